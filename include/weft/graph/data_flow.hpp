/// @file
/// Queues, mutexes and readers built into a graph (ops/data_flow_ops.hpp, ops/io_ops.hpp): one object per queue that adds its
/// queue op and the enqueue, dequeue, close and size nodes, with the dequeues' static shapes
/// taken from the queue's.
///
///   weft::graph_queue q(g, {.kind = weft::queue_kind::fifo, .component_types = {dtype::float32, dtype::int32},
///                           .shapes = {partial_shape({784}), partial_shape({})}, .capacity = 1000}, "examples");
///   g.op(...) ... q.enqueue_many({images, labels});            // a producer's step
///   auto batch = q.dequeue_many(g.constant(tensor::scalar(std::int32_t{128})).out(0));  // the trainer's
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/graph/graph.hpp>
#include <weft/ops/data_flow_ops.hpp>
#include <weft/ops/io_ops.hpp>

namespace weft {

/// TensorFlow's queue ops: FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue, PriorityQueue.
enum class queue_kind { fifo, padding_fifo, random_shuffle, priority };

/// A queue's type, components and bounds (TensorFlow's attrs).
struct queue_spec {
  queue_kind kind = queue_kind::fifo;  ///< which queue
  std::vector<dtype> component_types = {};  ///< a priority queue's leave out the priority
  std::vector<partial_shape> shapes = {};   ///< one per component, or none (any shape)
  std::int64_t capacity = -1;          ///< -1: no bound
  std::int64_t min_after_dequeue = 0;  ///< random_shuffle
  std::int64_t seed = 0;               ///< random_shuffle
  std::string container = {};          ///< the resource container (empty: the session's default)
  std::string shared_name = {};  ///< empty: the queue node's name
};

/// A queue in a graph (whitepaper §4.6): the queue node and helpers that add its enqueue,
/// dequeue, close and size nodes. The queue itself lives in the session's resources, so
/// separate steps (and threads: queue_runner) share it.
class graph_queue {
 public:
  /// Adds the queue node to g (named "queue" unless `options` names it).
  graph_queue(graph& g, queue_spec spec, node_options options = {});

  /// The queue node's output (its resource handle), which the queue ops take first.
  output handle() const noexcept { return handle_; }
  /// The spec it was made with.
  const queue_spec& spec() const noexcept { return spec_; }
  /// The dtypes of what a dequeue gives (a priority queue's priority first).
  const std::vector<dtype>& element_types() const noexcept { return types_; }

  /// One element (a priority queue's: the int64 priority, then the components).
  const node& enqueue(const std::vector<output>& components, node_options options = {}) {
    return enqueue_op("QueueEnqueue", components, std::move(options));
  }
  /// Each row of the components (along their first dim) an element.
  const node& enqueue_many(const std::vector<output>& components, node_options options = {}) {
    return enqueue_op("QueueEnqueueMany", components, std::move(options));
  }
  /// One element's components; blocks while the queue is empty and open (a closed, empty
  /// queue fails the step with out_of_range).
  std::vector<output> dequeue(node_options options = {}) { return dequeue_op("QueueDequeue", {}, std::move(options)); }
  /// n (an int32 scalar) elements, stacked along a new first dim.
  std::vector<output> dequeue_many(output n, node_options options = {}) {
    return dequeue_op("QueueDequeueMany", {n}, std::move(options));
  }
  /// dequeue_many with n as a constant.
  std::vector<output> dequeue_many(std::int32_t n, node_options options = {}) { return dequeue_many(count(n), std::move(options)); }
  /// Up to n elements: fewer once the queue is closed and has fewer left (at least one).
  std::vector<output> dequeue_up_to(output n, node_options options = {}) {
    return dequeue_op("QueueDequeueUpTo", {n}, std::move(options));
  }
  /// dequeue_up_to with n as a constant.
  std::vector<output> dequeue_up_to(std::int32_t n, node_options options = {}) {
    return dequeue_up_to(count(n), std::move(options));
  }
  /// Closes the queue: no more enqueues; dequeues take what is left. With
  /// cancel_pending_enqueues, blocked enqueues fail instead of waiting.
  const node& close(bool cancel_pending_enqueues = false, node_options options = {}) {
    return g_->op("QueueClose", {handle_}, {{"cancel_pending_enqueues", cancel_pending_enqueues}}, std::move(options));
  }
  /// How many elements the queue holds (int32).
  output size(node_options options = {}) { return g_->op("QueueSize", {handle_}, {}, std::move(options)).out(0); }
  /// Whether it is closed (bool).
  output is_closed(node_options options = {}) { return g_->op("QueueIsClosed", {handle_}, {}, std::move(options)).out(0); }

 private:
  const node& enqueue_op(const char* op, const std::vector<output>& components, node_options options) {
    std::vector<output> in{handle_};
    in.insert(in.end(), components.begin(), components.end());
    std::vector<dtype> types;
    for (output c : components) types.push_back(g_->at(c).output_dtype(c.port));
    return g_->op(op, in, {{"Tcomponents", types}}, std::move(options));
  }
  std::vector<output> dequeue_op(const char* op, std::vector<output> extra, node_options options) {
    std::vector<output> in{handle_};
    in.insert(in.end(), extra.begin(), extra.end());
    const node& n = g_->op(op, in, {{"component_types", types_}, {"shapes", shapes_}}, std::move(options));
    std::vector<output> out;
    for (int i = 0; i < n.num_outputs(); ++i) out.push_back(n.out(i));
    return out;
  }
  output count(std::int32_t n) { return g_->constant(tensor::scalar(n)).out(0); }

  graph* g_;
  queue_spec spec_;
  output handle_;
  std::vector<dtype> types_;
  std::vector<partial_shape> shapes_;
};

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE graph_queue::graph_queue(graph& g, queue_spec spec, node_options options) : g_(&g), spec_(std::move(spec)) {
  ops::register_data_flow_ops();
  static constexpr const char* ops[] = {"FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue", "PriorityQueue"};
  attr_map attrs{{"component_types", spec_.component_types},
                 {"shapes", spec_.shapes},
                 {"capacity", spec_.capacity},
                 {"container", spec_.container},
                 {"shared_name", spec_.shared_name}};
  if (spec_.kind == queue_kind::random_shuffle) {
    attrs.set("min_after_dequeue", spec_.min_after_dequeue);
    attrs.set("seed", spec_.seed);
  }
  if (options.name.empty()) options.name = "queue";
  handle_ = g.op(ops[static_cast<int>(spec_.kind)], {}, std::move(attrs), std::move(options)).out(0);
  types_ = spec_.component_types;
  shapes_ = spec_.shapes;
  if (spec_.kind == queue_kind::priority) {  // elements come out with their priority first
    types_.insert(types_.begin(), dtype::int64);
    if (!shapes_.empty()) shapes_.insert(shapes_.begin(), partial_shape({}));
  }
}
#endif

/// A mutex in a graph (MutexAcquire and MutexRelease): acquire() adds a node whose output is
/// the grant; the critical section's nodes take control inputs from it
/// (node_options().after({grant.node})), and release(grant) takes control inputs from them.
class graph_mutex {
 public:
  /// Adds the Mutex node to g (named "mutex" unless `options` names it).
  graph_mutex(graph& g, node_options options = {}, std::string container = {}, std::string shared_name = {}) : g_(&g) {
    ops::register_data_flow_ops();
    if (options.name.empty()) options.name = "mutex";
    handle_ = g.op("Mutex", {}, {{"container", std::move(container)}, {"shared_name", std::move(shared_name)}}, std::move(options))
                  .out(0);
  }
  /// The Mutex node's output (its resource handle).
  output handle() const noexcept { return handle_; }
  /// Adds a MutexAcquire: its output, the grant, is ready once the step holds the mutex.
  output acquire(node_options options = {}) { return g_->op("MutexAcquire", {handle_}, {}, std::move(options)).out(0); }
  /// Adds a MutexRelease of `grant`.
  const node& release(output grant, node_options options = {}) {
    return g_->op("MutexRelease", {handle_, grant}, {}, std::move(options));
  }

 private:
  graph* g_;
  output handle_;
};

/// TensorFlow's readers: TFRecordReader, FixedLengthRecordReader, TextLineReader, WholeFileReader.
enum class reader_kind { tfrecord, fixed_length, text_line, whole_file };

/// A reader's kind and attrs (TensorFlow's).
struct reader_spec {
  reader_kind kind = reader_kind::tfrecord;  ///< which reader
  std::string compression_type = {};  ///< "", "GZIP" or "ZLIB"
  std::int64_t header_bytes = 0;  ///< fixed_length: bytes skipped at each file's start
  std::int64_t record_bytes = 0;  ///< fixed_length: each record's bytes
  std::int64_t footer_bytes = 0;  ///< fixed_length: bytes ignored at each file's end
  std::int64_t hop_bytes = 0;     ///< fixed_length: bytes between records' starts (0: record_bytes)
  std::int64_t skip_header_lines = 0;                                                ///< text_line
  std::string container = {};  ///< the resource container (empty: the session's default)
  std::string shared_name = {};  ///< empty: the reader node's name
};

/// A reader in a graph (ops/io_ops.hpp): read(files) adds a ReaderRead whose file names come
/// from `files`, a graph_queue of one string component.
class graph_reader {
 public:
  /// Adds the reader node to g (named "reader" unless `options` names it).
  graph_reader(graph& g, reader_spec spec, node_options options = {});
  /// The reader node's output (its resource handle).
  output handle() const noexcept { return handle_; }
  /// One record: (key "<file>:<index>", value), string scalars.
  std::pair<output, output> read(const graph_queue& files, node_options options = {}) {
    const node& n = g_->op("ReaderRead", {handle_, files.handle()}, {}, std::move(options));
    return {n.out(0), n.out(1)};
  }
  /// Up to n records (fewer only at the end of the input): string vectors.
  std::pair<output, output> read_up_to(const graph_queue& files, std::int64_t n, node_options options = {}) {
    const node& k = g_->constant(tensor::scalar(n));
    const node& r = g_->op("ReaderReadUpTo", {handle_, files.handle(), k.out(0)}, {}, std::move(options));
    return {r.out(0), r.out(1)};
  }
  /// How many records the reader has produced (int64).
  output records_produced(node_options options = {}) {
    return g_->op("ReaderNumRecordsProduced", {handle_}, {}, std::move(options)).out(0);
  }
  /// How many files it has finished (int64).
  output files_done(node_options options = {}) {
    return g_->op("ReaderNumWorkUnitsCompleted", {handle_}, {}, std::move(options)).out(0);
  }
  /// Resets the reader to its start (no file, no records).
  const node& reset(node_options options = {}) { return g_->op("ReaderReset", {handle_}, {}, std::move(options)); }

 private:
  graph* g_;
  output handle_;
};

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE graph_reader::graph_reader(graph& g, reader_spec spec, node_options options) : g_(&g) {
  ops::register_io_ops();
  static constexpr const char* ops[] = {"TFRecordReader", "FixedLengthRecordReader", "TextLineReader", "WholeFileReader"};
  attr_map attrs{{"container", spec.container}, {"shared_name", spec.shared_name}, {"compression_type", spec.compression_type}};
  if (spec.kind == reader_kind::fixed_length) {
    attrs.set("header_bytes", spec.header_bytes);
    attrs.set("record_bytes", spec.record_bytes);
    attrs.set("footer_bytes", spec.footer_bytes);
    attrs.set("hop_bytes", spec.hop_bytes);
  }
  if (spec.kind == reader_kind::text_line) attrs.set("skip_header_lines", spec.skip_header_lines);
  if (options.name.empty()) options.name = "reader";
  handle_ = g.op(ops[static_cast<int>(spec.kind)], {}, std::move(attrs), std::move(options)).out(0);
}
#endif

}  // namespace weft
