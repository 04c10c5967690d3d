/// @file
/// Queue and mutex ops (whitepaper §4.6 and Table 1; runtime/queue.hpp and runtime/mutex.hpp). A queue op makes its queue
/// in the session's resource manager the first time it runs and outputs the queue's handle,
/// a string vector [container, name] (TensorFlow's first queue ops' handle, there a string
/// reference); the other ops take that handle. A queue whose shared_name is empty is named
/// after its node, so every step of a session (and every session sharing its resource
/// manager) finds the same queue.
///   FIFOQueue(; component_types, shapes, capacity, container, shared_name) -> handle
///   PaddingFIFOQueue(; the same): DequeueMany pads dims the shapes leave unknown (-1) with
///       zeros to the longest element of each batch (the other queues batch only elements of
///       one shape)
///   RandomShuffleQueue(; the same, min_after_dequeue, seed)
///   PriorityQueue(; the same): each element is (priority: int64 scalar, components...);
///       component_types and shapes leave the priority out, as TensorFlow's do
///   QueueEnqueue(handle, components...)        one element (waits for room)
///   QueueEnqueueMany(handle, components...)    each row of the components an element
///   QueueDequeue(handle; component_types) -> components      one element (waits for it)
///   QueueDequeueMany(handle, n; component_types) -> components  n elements, stacked
///   QueueDequeueUpTo(handle, n; component_types) -> components  n, or fewer (at least one)
///                                                                once the queue is closed
///   QueueClose(handle; cancel_pending_enqueues)
///   QueueSize(handle) -> int32     QueueIsClosed(handle) -> bool
/// Mutexes (whitepaper Table 1; runtime/mutex.hpp): one holder at a time, granted in order.
///   Mutex(; container, shared_name) -> handle    the mutex's handle, as a queue's
///   MutexAcquire(handle) -> grant: int64          waits (holding no thread) for the mutex
///   MutexRelease(handle, grant)                   gives it back; the same step must
/// The nodes of the critical section take control inputs from MutexAcquire, and
/// MutexRelease takes control inputs from them. A step that fails or is cancelled while it
/// holds the mutex gives it back; one that waits for it leaves the line.
/// The dequeue ops' optional `shapes` attr gives their outputs' static shapes (the queue's,
/// with a batch dim first for DequeueMany and DequeueUpTo); graph/data_flow.hpp sets it.
/// Enqueue and the dequeues are async kernels: one that waits holds no thread, and a step
/// cancelled (or timed out) while it waits leaves the queue as it was.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>

namespace weft::ops {

namespace detail {
/// A queue op's checks. Shapes may leave dims unknown: a padding queue pads them in
/// DequeueMany; the others batch only elements of one shape (DequeueMany's error says so).
inline void check_queue(shape_context& c) {
  const auto& types = c.attr<std::vector<dtype>>("component_types");
  const auto& shapes = c.attr<std::vector<partial_shape>>("shapes");
  if (types.empty()) c.fail("a queue needs at least one component type");
  if (!shapes.empty() && shapes.size() != types.size()) c.fail(shapes.size(), " shapes for ", types.size(), " component types");
  const auto capacity = c.attr<std::int64_t>("capacity");
  if (capacity == 0 || capacity < -1) c.fail("capacity must be positive or -1 (no bound), got ", capacity);
  c.set_output(0, partial_shape({2}));
}
inline op_def_builder queue_op(const char* name) {
  op_def_builder b(name);
  b.output("handle: string")
      .attr("component_types: list(type)")
      .attr("shapes: list(shape) = []")
      .attr("capacity: int = -1")
      .attr("container: string = ''")
      .attr("shared_name: string = ''")
      .stateful()
      .cheap();
  return b;
}
inline void require_handle(shape_context& c) { require_rank(c, 0, 1, "handle"); }
/// A dequeue's outputs: the `shapes` attr's, after a batch dim when it has one (n when the
/// count is exact and known, DequeueMany's; else unknown).
inline void dequeue_shapes(shape_context& c, bool batch, bool exact) {
  require_handle(c);
  const auto& shapes = c.attr<std::vector<partial_shape>>("shapes");
  const auto& types = c.attr<std::vector<dtype>>("component_types");
  if (types.empty()) c.fail("a dequeue needs at least one component type");
  if (shapes.empty()) return;
  if (shapes.size() != types.size()) c.fail(shapes.size(), " shapes for ", types.size(), " component types");
  std::int64_t n = unknown_dim;
  if (batch) {
    require_rank(c, 1, 0, "n");
    if (auto k = constant_scalar(c, 1, "n"); k && exact) {
      if (*k < 0) c.fail("cannot dequeue ", *k, " elements");
      n = *k;
    }
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (!batch || !shapes[i].rank_known()) {
      c.set_output(static_cast<int>(i), batch ? partial_shape::unknown_rank() : shapes[i]);
      continue;
    }
    std::vector<std::int64_t> dims{n};
    dims.insert(dims.end(), shapes[i].dims().begin(), shapes[i].dims().end());
    c.set_output(static_cast<int>(i), partial_shape(dims));
  }
}
}  // namespace detail

/// The data_flow family's op definitions (registered by register_data_flow_ops()).
std::vector<op_def> data_flow_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> data_flow_op_defs() {
  std::vector<op_def> defs;
  for (const char* name : {"FIFOQueue", "PaddingFIFOQueue", "PriorityQueue"})
    defs.push_back(detail::queue_op(name)
                       .shape_fn([](shape_context& c) { detail::check_queue(c); })
                       .build());
  defs.push_back(detail::queue_op("RandomShuffleQueue")
                     .attr("min_after_dequeue: int = 0")
                     .attr("seed: int = 0")
                     .shape_fn([](shape_context& c) {
                       detail::check_queue(c);
                       const auto keep = c.attr<std::int64_t>("min_after_dequeue");
                       const auto capacity = c.attr<std::int64_t>("capacity");
                       if (keep < 0 || (capacity > 0 && keep >= capacity))
                         c.fail("min_after_dequeue ", keep, " must be at least 0 and below the capacity ", capacity);
                     })
                     .build());
  for (const char* name : {"QueueEnqueue", "QueueEnqueueMany"})
    defs.push_back(op_def_builder(name)
                       .input("handle: string")
                       .input("components: Tcomponents")
                       .attr("Tcomponents: list(type)")
                       .stateful()
                       .shape_fn([many = std::string_view(name) == "QueueEnqueueMany"](shape_context& c) {
                         detail::require_handle(c);
                         if (c.num_inputs() < 2) c.fail("an enqueue needs at least one component");
                         if (many)
                           for (int i = 1; i < c.num_inputs(); ++i)
                             require_rank_at_least(c, i, 1, "each component of an enqueue_many");
                       })
                       .build());
  defs.push_back(op_def_builder("QueueDequeue")
                     .input("handle: string")
                     .output("components: component_types")
                     .attr("component_types: list(type)")
                     .attr("shapes: list(shape) = []")
                     .stateful()
                     .shape_fn([](shape_context& c) { detail::dequeue_shapes(c, false, false); })
                     .build());
  for (const char* name : {"QueueDequeueMany", "QueueDequeueUpTo"})
    defs.push_back(op_def_builder(name)
                       .input("handle: string")
                       .input("n: int32")
                       .output("components: component_types")
                       .attr("component_types: list(type)")
                       .attr("shapes: list(shape) = []")
                       .stateful()
                       .shape_fn([exact = std::string_view(name) == "QueueDequeueMany"](shape_context& c) {
                         detail::dequeue_shapes(c, true, exact);
                       })
                       .build());
  defs.push_back(op_def_builder("QueueClose")
                     .input("handle: string")
                     .attr("cancel_pending_enqueues: bool = false")
                     .stateful()
                     .cheap()
                     .shape_fn(detail::require_handle)
                     .build());
  defs.push_back(op_def_builder("QueueSize")
                     .input("handle: string")
                     .output("size: int32")
                     .stateful()
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       detail::require_handle(c);
                       c.set_output(0, partial_shape({}));
                     })
                     .build());
  defs.push_back(op_def_builder("QueueIsClosed")
                     .input("handle: string")
                     .output("is_closed: bool")
                     .stateful()
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       detail::require_handle(c);
                       c.set_output(0, partial_shape({}));
                     })
                     .build());
  defs.push_back(op_def_builder("Mutex")
                     .output("handle: string")
                     .attr("container: string = ''")
                     .attr("shared_name: string = ''")
                     .stateful()
                     .cheap()
                     .shape_fn([](shape_context& c) { c.set_output(0, partial_shape({2})); })
                     .build());
  defs.push_back(op_def_builder("MutexAcquire")
                     .input("handle: string")
                     .output("grant: int64")
                     .stateful()
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       detail::require_handle(c);
                       c.set_output(0, partial_shape({}));
                     })
                     .build());
  defs.push_back(op_def_builder("MutexRelease")
                     .input("handle: string")
                     .input("grant: int64")
                     .stateful()
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       detail::require_handle(c);
                       require_rank(c, 1, 0, "grant");
                     })
                     .build());
  return defs;
}
#endif

/// Adds the queue ops to the global registry, once; registering the family's kernels calls it.
inline void register_data_flow_ops() { op_registry::global().add_family("data_flow", data_flow_op_defs); }

/// The ops of this family as C++ types (framework/kernel_for.hpp).
WEFT_DETAIL_OP_TYPE(FIFOQueue, data_flow)
WEFT_DETAIL_OP_TYPE(PaddingFIFOQueue, data_flow)
WEFT_DETAIL_OP_TYPE(RandomShuffleQueue, data_flow)
WEFT_DETAIL_OP_TYPE(PriorityQueue, data_flow)
WEFT_DETAIL_OP_TYPE(QueueEnqueue, data_flow)
WEFT_DETAIL_OP_TYPE(QueueEnqueueMany, data_flow)
WEFT_DETAIL_OP_TYPE(QueueDequeue, data_flow)
WEFT_DETAIL_OP_TYPE(QueueDequeueMany, data_flow)
WEFT_DETAIL_OP_TYPE(QueueDequeueUpTo, data_flow)
WEFT_DETAIL_OP_TYPE(QueueClose, data_flow)
WEFT_DETAIL_OP_TYPE(QueueSize, data_flow)
WEFT_DETAIL_OP_TYPE(QueueIsClosed, data_flow)
WEFT_DETAIL_OP_TYPE(Mutex, data_flow)
WEFT_DETAIL_OP_TYPE(MutexAcquire, data_flow)
WEFT_DETAIL_OP_TYPE(MutexRelease, data_flow)
namespace families {  // the whole family (its kernels for every dtype, on each device type)
/// The data_flow family as a C++ type: use_kernels<ops::families::data_flow>() registers its ops and kernels.
struct data_flow {
  static constexpr const char* name = "data_flow";  ///< the family's name
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using types = type_list<FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue, PriorityQueue, QueueEnqueue, QueueEnqueueMany,
                          QueueDequeue, QueueDequeueMany, QueueDequeueUpTo, QueueClose, QueueSize, QueueIsClosed, Mutex,
                          MutexAcquire, MutexRelease>;  ///< its op types
  /// Registers the family's op definitions.
  static void define() { register_data_flow_ops(); }
};
}  // namespace families

}  // namespace weft::ops
