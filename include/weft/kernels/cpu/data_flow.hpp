/// @file
/// CPU kernels for ops/data_flow_ops.hpp: the queue ops, over runtime/queue.hpp's queue held
/// in the session's resource manager, and the mutex ops, over runtime/mutex.hpp's. Enqueue and the dequeues are async: they hand the
/// queue an attempt and return; the queue calls back (on whichever thread made room or
/// brought the elements) and the step goes on from there.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <weft/kernels/cpu/common.hpp>
#include <weft/ops/data_flow_ops.hpp>
#include <weft/runtime/mutex.hpp>
#include <weft/runtime/queue.hpp>

namespace weft::cpu {

/// FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue, PriorityQueue: makes the queue on first
/// run (a queue already under the name must have been made with the same options) and
/// outputs its handle.
struct queue_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit queue_kernel(const node& n)
      : container_(n.attr<std::string>("container")),
        name_(n.attr<std::string>("shared_name").empty() ? n.name() : n.attr<std::string>("shared_name")) {
    const std::string& op = n.op();
    o_.kind = op == "RandomShuffleQueue" ? queue_options::order::random_shuffle
              : op == "PriorityQueue"    ? queue_options::order::priority
                                         : queue_options::order::fifo;
    o_.padded = op == "PaddingFIFOQueue";
    o_.component_types = n.attr<std::vector<dtype>>("component_types");
    o_.shapes = n.attr<std::vector<partial_shape>>("shapes");
    if (o_.kind == queue_options::order::priority) {  // the priority comes first, an int64 scalar
      o_.component_types.insert(o_.component_types.begin(), dtype::int64);
      if (!o_.shapes.empty()) o_.shapes.insert(o_.shapes.begin(), partial_shape({}));
    }
    o_.capacity = n.attr<std::int64_t>("capacity");
    if (o_.kind == queue_options::order::random_shuffle) {
      o_.min_after_dequeue = n.attr<std::int64_t>("min_after_dequeue");
      o_.seed = static_cast<std::uint64_t>(n.attr<std::int64_t>("seed"));
    }
    handle_ = tensor::from_vector(std::vector<std::string>{container_, name_});
  }
  void compute(kernel_context& ctx) const override {
    auto q = ctx.resources().lookup_or_create<queue>(container_, name_, [&] { return std::make_shared<queue>(name_, o_); });
    if (!q->options().same_as(o_))
      fail(error_code::invalid_argument, "queue '", name_, "' in container '", container_, "' exists as ",
           q->options().describe(), ", not ", o_.describe());
    ctx.set_output(0, handle_);
  }
 private:
  std::string container_, name_;
  queue_options o_;
  tensor handle_;
};

/// The resource of kind R the handle of input `i` names.
template <class R>
std::shared_ptr<R> resource_of(const kernel_context& ctx, int i = 0) {
  const tensor& h = ctx.input(i);
  if (h.dtype() != dtype::string || h.shape() != shape{2})
    fail(error_code::invalid_argument, "a ", R::kind_name, " handle is a string vector [container, name], got ", h.dtype(),
         h.shape());
  const std::string* p = h.data<std::string>();
  auto r = ctx.resources().find<R>(p[0], p[1]);
  if (!r)
    fail(error_code::not_found, R::kind_name, " '", p[1], "' in container '", p[0],
         "' does not exist (its container was reset after its op ran?)");
  return r;
}
/// The queue resource input i's handle names.
inline std::shared_ptr<queue> queue_of(const kernel_context& ctx, int i = 0) { return resource_of<queue>(ctx, i); }

/// Runs `start` (which hands the queue an attempt whose callback calls finish), turning an
/// exception thrown before the queue took the attempt into the node's error.
template <class Start>
void start_attempt(kernel_context& ctx, const std::function<void()>& done, Start&& start) {
  try {
    start();
  } catch (...) {
    ctx.set_error(std::current_exception());
    done();
  }
}

/// QueueEnqueue and QueueEnqueueMany.
struct enqueue_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit enqueue_kernel(const node& n) : many_(n.op() == "QueueEnqueueMany") {}
  bool is_async() const noexcept override { return true; }
  void compute(kernel_context&) const override {}  ///< async only
  void compute_async(kernel_context& ctx, std::function<void()> done) const override {
    start_attempt(ctx, done, [&] {
      auto q = queue_of(ctx);
      std::vector<tensor> components;
      for (int i = 1; i < ctx.num_inputs(); ++i) components.push_back(ctx.input(i));
      std::vector<queue_tuple> elements;
      if (many_) elements = unstack_elements(components, q->name());
      else elements.push_back(std::move(components));
      q->enqueue(std::move(elements), &ctx.cancellation(), [&ctx, done](std::exception_ptr e) {
        if (e) ctx.set_error(std::move(e));
        done();
      });
    });
  }
 private:
  bool many_;
};

/// QueueDequeue, QueueDequeueMany, QueueDequeueUpTo.
struct dequeue_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit dequeue_kernel(const node& n)
      : batch_(n.op() != "QueueDequeue"), up_to_(n.op() == "QueueDequeueUpTo"),
        types_(n.attr<std::vector<dtype>>("component_types")) {}
  bool is_async() const noexcept override { return true; }
  void compute(kernel_context&) const override {}  ///< async only
  void compute_async(kernel_context& ctx, std::function<void()> done) const override {
    start_attempt(ctx, done, [&] {
      auto q = queue_of(ctx);
      if (q->options().component_types != types_)
        fail(error_code::invalid_argument, "queue '", q->name(), "' holds elements of ", describe(q->options().component_types),
             ", not ", describe(types_));
      // Only a padding queue batches elements whose shapes it does not fix (TensorFlow's
      // rule): checked before any element is taken, so a refused dequeue loses none.
      if (const queue_options& o = q->options(); batch_ && !o.padded) {
        if (o.shapes.empty())
          fail(error_code::invalid_argument, "queue '", q->name(), "' has no shapes: a batch needs the components' shapes ",
               "(a PaddingFIFOQueue pads dims left unknown)");
        for (std::size_t i = 0; i < o.shapes.size(); ++i)
          if (!o.shapes[i].fully_known())
            fail(error_code::invalid_argument, "queue '", q->name(), "' leaves component ", i, "'s shape ", o.shapes[i],
                 " open: a batch needs fully known shapes (a PaddingFIFOQueue pads dims left unknown)");
      }
      std::int64_t n = 1;
      if (batch_) {
        const tensor& k = ctx.input(1);
        if (k.rank() != 0) fail(error_code::invalid_argument, "n must be a scalar, got shape ", k.shape());
        n = k.scalar_value<std::int32_t>();
        if (n < 0) fail(error_code::invalid_argument, "cannot dequeue ", n, " elements");
      }
      q->dequeue(n, up_to_, &ctx.cancellation(), [this, &ctx, done, q](std::exception_ptr e, std::vector<queue_tuple> elements) {
        if (!e) {
          try {
            deliver(ctx, *q, std::move(elements));
          } catch (...) {
            e = std::current_exception();
          }
        }
        if (e) ctx.set_error(std::move(e));
        done();
      });
    });
  }
  /// Sets the outputs from the dequeued elements (stacked into batches for DequeueMany/UpTo).
  void deliver(kernel_context& ctx, const queue& q, std::vector<queue_tuple> elements) const {
    if (!batch_) {
      for (std::size_t i = 0; i < types_.size(); ++i) ctx.set_output(static_cast<int>(i), std::move(elements[0][i]));
      return;
    }
    const queue_options& o = q.options();
    auto stacked = stack_elements(elements, o.component_types, o.shapes, o.padded, q.name());
    for (std::size_t i = 0; i < stacked.size(); ++i) ctx.set_output(static_cast<int>(i), std::move(stacked[i]));
  }
  /// "(float32, int64)": the component types in messages.
  static std::string describe(const std::vector<dtype>& types) {
    std::string s = "(";
    for (std::size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + std::string(name(types[i]));
    return s + ")";
  }
 private:
  bool batch_, up_to_;
  std::vector<dtype> types_;
};

/// The CPU kernel of QueueClose.
struct queue_close_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit queue_close_kernel(const node& n) : cancel_(n.attr<bool>("cancel_pending_enqueues")) {}
  void compute(kernel_context& ctx) const override { queue_of(ctx)->close(cancel_); }
 private:
  bool cancel_;
};

/// The CPU kernel of QueueSize.
struct queue_size_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit queue_size_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const std::int64_t n = queue_of(ctx)->size();
    ctx.allocate_output(0, shape{}).data<std::int32_t>()[0] = static_cast<std::int32_t>(std::min<std::int64_t>(n, INT32_MAX));
  }
};

/// The CPU kernel of QueueIsClosed.
struct queue_is_closed_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit queue_is_closed_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    ctx.allocate_output(0, shape{}).data<bool>()[0] = queue_of(ctx)->is_closed();
  }
};

/// Mutex: makes the mutex on first run and outputs its handle.
struct mutex_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit mutex_kernel(const node& n)
      : container_(n.attr<std::string>("container")),
        name_(n.attr<std::string>("shared_name").empty() ? n.name() : n.attr<std::string>("shared_name")),
        handle_(tensor::from_vector(std::vector<std::string>{container_, name_})) {}
  void compute(kernel_context& ctx) const override {
    ctx.resources().lookup_or_create<resource_mutex>(container_, name_, [&] { return std::make_shared<resource_mutex>(name_); });
    ctx.set_output(0, handle_);
  }
 private:
  std::string container_, name_;
  tensor handle_;
};

/// MutexAcquire: waits for the mutex, then outputs the grant.
struct mutex_acquire_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit mutex_acquire_kernel(const node&) {}
  bool is_async() const noexcept override { return true; }
  void compute(kernel_context&) const override {}  ///< async only
  void compute_async(kernel_context& ctx, std::function<void()> done) const override {
    start_attempt(ctx, done, [&] {
      auto m = resource_of<resource_mutex>(ctx);
      m->acquire(&ctx.cancellation(), ctx.step_id(), [&ctx, done](std::exception_ptr e, std::uint64_t id) {
        if (e) ctx.set_error(std::move(e));
        else ctx.allocate_output(0, shape{}).data<std::int64_t>()[0] = static_cast<std::int64_t>(id);
        done();
      });
    });
  }
};

/// The CPU kernel of MutexRelease.
struct mutex_release_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit mutex_release_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& grant = ctx.input(1);
    resource_of<resource_mutex>(ctx)->release(static_cast<std::uint64_t>(grant.scalar_value<std::int64_t>()), ctx.step_id());
  }
};

/// A template, so that including this header instantiates nothing until it is called.
template <int = 0>
void register_data_flow_kernels() {
  ops::register_data_flow_ops();
  for (const char* op : {"FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue", "PriorityQueue"})
    register_cpu_kernel<queue_kernel>(op);
  register_cpu_kernel<enqueue_kernel>("QueueEnqueue");
  register_cpu_kernel<enqueue_kernel>("QueueEnqueueMany");
  register_cpu_kernel<dequeue_kernel>("QueueDequeue");
  register_cpu_kernel<dequeue_kernel>("QueueDequeueMany");
  register_cpu_kernel<dequeue_kernel>("QueueDequeueUpTo");
  register_cpu_kernel<queue_close_kernel>("QueueClose");
  register_cpu_kernel<queue_size_kernel>("QueueSize");
  register_cpu_kernel<queue_is_closed_kernel>("QueueIsClosed");
  register_cpu_kernel<mutex_kernel>("Mutex");
  register_cpu_kernel<mutex_acquire_kernel>("MutexAcquire");
  register_cpu_kernel<mutex_release_kernel>("MutexRelease");
}

}  // namespace weft::cpu

/// The kernels typed code asks for (framework/kernel_for.hpp): every queue op's kernel at once.
namespace weft {
/// Typed code's registration of every data_flow op's CPU kernels (the family at once). A
/// partial specialization, so that including it instantiates nothing.
template <class T>
struct kernel_for<ops::families::data_flow, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_data_flow_kernels(); }
};
}  // namespace weft
