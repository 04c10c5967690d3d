/// @file
/// Input pipelines built on queues (whitepaper 4.6-4.7; the anchors tf.data and libtorch's
/// DataLoader): a source (rows of in-memory tensors, or the records of files), then stages
/// in the order they are added (map a graph function over each element, shuffle through a
/// buffer, batch, repeat the epochs, prefetch), each stage a queue filled by a queue_runner's
/// threads, all in a graph and a session of the pipeline's own, so that the input runs ahead
/// of training on threads of its own and never holds a training step's thread.
///
///   weft::input_pipeline p = weft::input_pipeline::from_tensors({images, labels});
///   p.shuffle(10000, 42).batch(128).repeat(5).prefetch(4);
///   p.start();
///   while (auto batch = p.next()) train_on((*batch)[0], (*batch)[1]);   // nullopt: the end
///
/// or, in the training graph itself (no copy through the host's feeds):
///   auto [x, y] = ...p.dequeue_into(g)...   // a QueueDequeue of the last stage's queue; the
///   session shares p.resources() (session_options::resources)
///
/// Order is deterministic for a fixed seed when every map stage has one worker: each stage
/// keeps its input's order, and a shuffle draws from a full buffer (capacity `buffer`, and
/// min_after_dequeue buffer - 1) with its seeded generator. An element whose components have
/// dims unknown until run time is padded by batch() to the longest in its batch (the queue
/// before a batch is then a PaddingFIFOQueue). An error in any stage stops the pipeline; the
/// next next() rethrows it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/core/tensor.hpp>
#include <weft/graph/data_flow.hpp>
#include <weft/graph/graph.hpp>
#include <weft/runtime/queue.hpp>
#include <weft/runtime/queue_runner.hpp>
#include <weft/runtime/session.hpp>

namespace weft {

/// An input pipeline of queues (whitepaper §4.6; tf.data's stages): a source (rows of
/// tensors, or the records of files), then map, shuffle and batch stages, each a queue
/// filled by queue_runner threads in a graph and session of the pipeline's own; a training
/// graph dequeues from the last stage (dsl/input.hpp types it).
class input_pipeline {
 public:
  /// A graph function of a map stage: from an element's components (outputs of the
  /// pipeline's graph) to the new element's.
  using map_fn = std::function<std::vector<output>(graph&, const std::vector<output>&)>;

  /// Elements: row i of every column (all of one first dim).
  static input_pipeline from_tensors(std::vector<tensor> columns) {
    if (columns.empty()) fail(error_code::invalid_argument, "input_pipeline::from_tensors: no columns");
    for (const tensor& c : columns)
      if (c.rank() == 0 || c.dim(0) != columns[0].dim(0))
        fail(error_code::invalid_argument, "input_pipeline::from_tensors: every column needs the first dim ",
             columns[0].rank() ? columns[0].dim(0) : 0, ", got shape ", c.shape());
    input_pipeline p;
    p.columns_ = std::move(columns);
    return p;
  }
  /// Elements: the records of the files (string scalars), in the files' order each epoch.
  static input_pipeline from_files(std::vector<std::string> files, reader_spec reader) {
    if (files.empty()) fail(error_code::invalid_argument, "input_pipeline::from_files: no files");
    input_pipeline p;
    p.files_ = std::move(files);
    p.reader_ = std::move(reader);
    return p;
  }

  /// Movable until start(): its threads then hold its address.
  input_pipeline(input_pipeline&&) = default;
  input_pipeline& operator=(input_pipeline&&) = delete;
  ~input_pipeline() { stop(); }

  /// Each element through `f`, on `workers` threads (more than one may reorder elements).
  input_pipeline& map(map_fn f, int workers = 1) {
    if (workers < 1) fail(error_code::invalid_argument, "input_pipeline::map: workers must be at least 1, got ", workers);
    return add({stage::kind::map, 0, workers, std::move(f)});
  }
  /// Elements drawn at random from a buffer of `buffer` (a RandomShuffleQueue, seeded).
  input_pipeline& shuffle(std::int64_t buffer, std::uint64_t seed = 0) {
    if (buffer < 1) fail(error_code::invalid_argument, "input_pipeline::shuffle: buffer must be at least 1, got ", buffer);
    seed_ = seed;
    return add({stage::kind::shuffle, buffer, 1, {}});
  }
  /// n elements stacked (the last batch of the input smaller unless drop_remainder).
  input_pipeline& batch(std::int64_t n, bool drop_remainder = false) {
    if (n < 1) fail(error_code::invalid_argument, "input_pipeline::batch: n must be at least 1, got ", n);
    return add({drop_remainder ? stage::kind::batch_exact : stage::kind::batch, n, 1, {}});
  }
  /// from_tensors' rows in a fresh random order each epoch: the whole source shuffled, at no
  /// cost per element, as a training loop that shuffles its row indices does (epoch e's
  /// order is std::shuffle of 0..n-1 with std::mt19937_64(seed + e)). A shuffle() stage
  /// mixes only within its buffer.
  input_pipeline& shuffle_source(std::uint64_t seed) {
    if (columns_.empty()) fail(error_code::invalid_argument, "input_pipeline::shuffle_source: only rows of tensors are shuffled whole");
    shuffle_rows_ = true;
    row_seed_ = seed;
    return *this;
  }
  /// The source's elements `epochs` times (-1: forever). Applies to the whole source,
  /// wherever it is called.
  input_pipeline& repeat(std::int64_t epochs = -1) {
    if (epochs == 0 || epochs < -1) fail(error_code::invalid_argument, "input_pipeline::repeat: epochs must be positive or -1, got ", epochs);
    epochs_ = epochs;
    return *this;
  }
  /// The last queue holds up to k elements ready.
  input_pipeline& prefetch(std::int64_t k) {
    if (k < 1) fail(error_code::invalid_argument, "input_pipeline::prefetch: k must be at least 1, got ", k);
    prefetch_ = k;
    return *this;
  }
  /// The resource manager the pipeline's queues live in; a training session given it
  /// (session_options::resources) can dequeue from the last stage in its own graph.
  input_pipeline& share(std::shared_ptr<resource_manager> resources) {
    resources_ = std::move(resources);
    return *this;
  }

  /// Builds the pipeline's graph and session and starts its threads.
  void start();

  /// The next element (a batch after batch()), or nullopt at the end of the input; an
  /// error of any stage is rethrown here.
  std::optional<std::vector<tensor>> next() {
    if (!session_) fail(error_code::failed_precondition, "input_pipeline::next: start() it first");
    run_options o;
    o.cancellation = &coord_->cancellation();
    try {
      return session_->run({}, last_, {}, o);
    } catch (const error& e) {
      coord_->raise_if_error();
      if (e.code() == error_code::out_of_range) return std::nullopt;
      throw;
    }
  }

  /// Stops the threads and joins them (an error not yet taken is dropped).
  void stop() {
    if (!coord_) return;
    coord_->request_stop();
    try {
      coord_->join();
    } catch (...) {
    }
    coord_.reset();
  }

  /// The last stage's queue dequeued in another graph (whose session shares resources()).
  std::vector<output> dequeue_into(graph& g, node_options options = {}) const {
    if (!session_) fail(error_code::failed_precondition, "input_pipeline::dequeue_into: start() it first");
    const output h = g.constant(tensor::from_vector(std::vector<std::string>{"", last_queue_})).out(0);
    ops::register_data_flow_ops();
    const node& n = g.op("QueueDequeue", {h}, {{"component_types", types_}, {"shapes", shapes_}}, std::move(options));
    std::vector<output> out;
    for (int i = 0; i < n.num_outputs(); ++i) out.push_back(n.out(i));
    return out;
  }
  /// The resource manager of the pipeline's queues (give it to the training session).
  const std::shared_ptr<resource_manager>& resources() const noexcept { return resources_; }
  /// The shared name of the last stage's queue (in resources(), container ""), once started.
  const std::string& last_queue_name() const {
    if (!session_) fail(error_code::failed_precondition, "input_pipeline: start() it first");
    return last_queue_;
  }
  /// The element's dtypes and static shapes after every stage.
  const std::vector<dtype>& element_types() const noexcept { return types_; }
  const std::vector<partial_shape>& element_shapes() const noexcept { return shapes_; }  ///< see element_types()

 private:
  struct stage {
    enum class kind { map, shuffle, batch, batch_exact };
    kind type;
    std::int64_t n;  ///< shuffle's buffer, batch's size
    int workers;
    map_fn f;
  };
  struct runner_spec {
    std::vector<endpoint> targets;
    std::optional<endpoint> close, cancel;
    std::unique_ptr<queue_runner> runner;
  };

  input_pipeline() : resources_(std::make_shared<resource_manager>()), id_(next_id()) {}
  static int next_id() {
    static std::atomic<int> n{0};
    return ++n;
  }
  input_pipeline& add(stage s) {
    if (session_) fail(error_code::failed_precondition, "input_pipeline: stages are added before start()");
    stages_.push_back(std::move(s));
    return *this;
  }

  std::string queue_name(std::size_t k) const { return "input_pipeline_" + std::to_string(id_) + "/stage_" + std::to_string(k); }

  /// The queue that feeds stage `next` (stages_.size(): the last queue, which next() and
  /// dequeue_into() read): a RandomShuffleQueue for a shuffle (capacity its buffer, drawn from
  /// only when full while open, so that the order is the seed's); a PaddingFIFOQueue for a
  /// batch of elements whose shapes leave dims open; else a FIFOQueue of `capacity`.
  graph_queue queue_for(std::size_t next, std::int64_t capacity);
  void shapes_of(const std::vector<output>& outs) {
    types_.clear();
    shapes_.clear();
    for (output o : outs) {
      types_.push_back(g_->at(o).output_dtype(o.port));
      shapes_.push_back(g_->at(o).output_shape(o.port));
    }
  }

  /// The graph: queues between fragments, each fragment one step a runner's threads repeat
  /// (a dequeue from the queue before it, the map functions after it, an enqueue into the
  /// queue after it). A map of one worker joins the fragment before it (no queue between:
  /// a step and a hand-over between threads fewer a batch); a batch starts a fragment; a
  /// shuffle is the queue it feeds from.
  void build();

  /// The epoch thread: the source's elements once per epoch, then the end of the input.
  void feed_epochs();
  /// Epoch e's order of the rows: 0..n-1, or its permutation by std::mt19937_64(seed + e).
  void epoch_order(std::int64_t e, std::vector<std::int64_t>& order) const {
    std::iota(order.begin(), order.end(), 0);
    if (!shuffle_rows_) return;
    std::mt19937_64 random(row_seed_ + static_cast<std::uint64_t>(e));
    std::shuffle(order.begin(), order.end(), random);
  }
  /// from_tensors: each epoch's rows (in order, or permuted) as views into the source queue,
  /// waiting for room; then the queue is closed.
  void feed_rows();
  /// from_tensors then batch: each epoch's rows (in order, or permuted) copied into batches
  /// of the first stage's size, which run on across epochs as a batch stage's would (the
  /// last, short one at the end of the input unless drop_remainder).
  void feed_batches(queue& source);

  std::vector<tensor> columns_;
  std::vector<std::string> files_;
  reader_spec reader_;
  std::vector<stage> stages_;
  std::int64_t epochs_ = 1;
  std::int64_t prefetch_ = 2;
  std::uint64_t seed_ = 0;
  bool shuffle_rows_ = false;
  bool batched_source_ = false;  ///< the epoch thread makes the first stage's batches itself
  std::uint64_t row_seed_ = 0;
  std::shared_ptr<resource_manager> resources_;
  int id_ = 0;
  /// Moving a started pipeline is an error (its threads hold its address).
  struct unstarted {
    bool started = false;
    unstarted() = default;
    unstarted(unstarted&& o) {
      if (o.started) fail(error_code::failed_precondition, "input_pipeline: a started pipeline cannot be moved");
    }
  } unstarted_;

  std::unique_ptr<graph> g_;
  std::vector<dtype> types_;
  std::vector<partial_shape> shapes_;
  std::string fill_, end_, last_queue_, source_;
  std::vector<endpoint> handles_;  ///< every queue op of the graph
  int queues_ = 0;
  std::vector<endpoint> last_;
  std::unique_ptr<session> session_;
  std::vector<runner_spec> runners_;
  std::unique_ptr<coordinator> coord_;  ///< last: stopped and joined first
};

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void input_pipeline::start() {
  if (session_) fail(error_code::failed_precondition, "input_pipeline::start: already started");
  build();
  unstarted_.started = true;
  session_options o;
  o.intra_op_threads = 1;
  o.inter_op_threads = 0;
  o.resources = resources_;
  session_ = std::make_unique<session>(*g_, o);
  session_->run({}, handles_);  // makes every queue, before any thread or other graph uses one
  coord_ = std::make_unique<coordinator>();
  for (auto& r : runners_) r.runner = std::make_unique<queue_runner>(*session_, r.targets, queue_runner_options{r.close, r.cancel});
  for (auto& r : runners_) r.runner->start(*coord_);
  coord_->add_thread(std::thread([this] { feed_epochs(); }));
}

WEFT_DETAIL_RUNTIME_INLINE graph_queue input_pipeline::queue_for(std::size_t next, std::int64_t capacity) {
  queue_spec q;
  q.component_types = types_;
  q.shapes = shapes_;
  q.capacity = capacity;
  q.seed = static_cast<std::int64_t>(seed_);
  if (next < stages_.size()) {
    const stage& s = stages_[next];
    if (s.type == stage::kind::shuffle) {
      q.kind = queue_kind::random_shuffle;
      q.capacity = s.n;
      q.min_after_dequeue = s.n - 1;
    } else if (s.type == stage::kind::batch || s.type == stage::kind::batch_exact) {
      for (const auto& sh : shapes_)
        if (!sh.fully_known()) q.kind = queue_kind::padding_fifo;
    }
  }
  q.shared_name = queue_name(queues_++);
  graph_queue made(*g_, q, node_options(q.shared_name));
  handles_.push_back(made.handle());
  return made;
}

WEFT_DETAIL_RUNTIME_INLINE void input_pipeline::build() {
  g_ = std::make_unique<graph>();
  graph& g = *g_;
  constexpr std::int64_t source_capacity = 4096;  // rows waiting in the source queue at most
  std::optional<graph_queue> q;
  std::vector<output> open;  // the open fragment's outputs (none: no fragment open)
  int workers = 1;
  auto close = [&](std::size_t next) {
    shapes_of(open);
    graph_queue after = queue_for(next, next == stages_.size() ? prefetch_ : 64);
    const std::string put = after.enqueue(open).name();
    runners_.push_back({std::vector<endpoint>(static_cast<std::size_t>(workers), endpoint(put)),
                        endpoint(after.close(false).name()), endpoint(after.close(true).name()), nullptr});
    q.emplace(std::move(after));
    open.clear();
  };
  std::size_t first_stage = 0;
  if (!columns_.empty()) {
    // Rows of the columns, enqueued as views by the epoch thread (no step, no copy); or,
    // when the first stage batches them, whole batches the epoch thread copies the rows
    // into (as a host loop would: no element goes through a queue alone).
    types_.clear();
    shapes_.clear();
    batched_source_ = !stages_.empty() && (stages_[0].type == stage::kind::batch || stages_[0].type == stage::kind::batch_exact);
    for (const tensor& c : columns_) {
      types_.push_back(c.dtype());
      std::vector<std::int64_t> dims(c.shape().dims().begin() + 1, c.shape().dims().end());
      if (batched_source_) dims.insert(dims.begin(), unknown_dim);
      shapes_.push_back(partial_shape(dims));
    }
    if (batched_source_) {
      first_stage = 1;
      q.emplace(queue_for(1, stages_.size() == 1 ? prefetch_ : 64));
    } else {
      q.emplace(queue_for(0, source_capacity));
    }
    source_ = q->spec().shared_name;
  } else {
    graph_queue names(g, {.component_types = {dtype::string}, .shapes = {partial_shape({})}, .shared_name = queue_name(queues_++)},
                      "files");
    fill_ = names.enqueue_many({g.constant(tensor::from_vector(files_)).out(0)}, "fill").name();
    end_ = names.close(false, "end_of_input").name();
    graph_reader reader(g, reader_, "reader");
    open = {reader.read(names, "read").second};  // the first fragment reads the records
  }
  for (std::size_t k = first_stage; k < stages_.size(); ++k) {
    const stage& s = stages_[k];
    switch (s.type) {
      case stage::kind::map:
        if (!open.empty() && s.workers > 1 && s.workers != workers) close(k);
        if (open.empty()) open = q->dequeue(), workers = s.workers;
        open = s.f(g, open);
        if (open.empty()) fail(error_code::invalid_argument, "input_pipeline::map: the function returned no components");
        break;
      case stage::kind::shuffle:
        if (!open.empty()) close(k);  // else the queue before it was made for it
        break;
      case stage::kind::batch:
      case stage::kind::batch_exact:
        if (!open.empty()) close(k);
        open = s.type == stage::kind::batch ? q->dequeue_up_to(static_cast<std::int32_t>(s.n))
                                            : q->dequeue_many(static_cast<std::int32_t>(s.n));
        workers = 1;
        break;
    }
  }
  if (!open.empty()) close(stages_.size());  // types_ and shapes_ are now the last queue's
  last_queue_ = q->spec().shared_name;
  for (output o : q->dequeue("next")) last_.push_back(o);
}

WEFT_DETAIL_RUNTIME_INLINE void input_pipeline::feed_epochs() {
  run_options o;
  o.cancellation = &coord_->cancellation();
  try {
    if (!columns_.empty()) return feed_rows();
    for (std::int64_t e = 0; (epochs_ < 0 || e < epochs_) && !coord_->should_stop(); ++e) session_->run({}, {}, {fill_}, o);
    if (!coord_->should_stop()) session_->run({}, {}, {end_}, o);
  } catch (const error& e) {
    if (!(e.code() == error_code::cancelled && coord_->should_stop())) coord_->request_stop(std::current_exception());
  } catch (...) {
    coord_->request_stop(std::current_exception());
  }
}

WEFT_DETAIL_RUNTIME_INLINE void input_pipeline::feed_rows() {
  auto source = resources_->find<queue>("", source_);
  std::vector<std::vector<tensor>> rows;  // rows[c][i]: row i of column c, a view
  for (const tensor& c : columns_) {
    const std::vector<std::int64_t> rest(c.shape().dims().begin() + 1, c.shape().dims().end());
    auto& r = rows.emplace_back();
    for (std::int64_t i = 0; i < c.dim(0); ++i) r.push_back(c.slice(i, i + 1).reshape(shape(rest)));
  }
  const std::int64_t n = columns_[0].dim(0);
  if (batched_source_) return feed_batches(*source);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t e = 0; (epochs_ < 0 || e < epochs_) && !coord_->should_stop(); ++e) {
    epoch_order(e, order);
    // In pieces, so that a stop is seen between them.
    for (std::int64_t first = 0; first < n && !coord_->should_stop(); first += 256) {
      std::vector<queue_tuple> elements;
      for (std::int64_t i = first; i < std::min(n, first + 256); ++i) {
        queue_tuple t;
        for (auto& r : rows) t.push_back(r[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])]);
        elements.push_back(std::move(t));
      }
      std::promise<std::exception_ptr> done;
      auto result = done.get_future();
      source->enqueue(std::move(elements), &coord_->cancellation(), [&done](std::exception_ptr e) { done.set_value(e); });
      if (auto e = result.get()) {
        if (coord_->should_stop()) return;  // cancelled by the stop
        std::rethrow_exception(e);
      }
    }
  }
  source->close();
}

WEFT_DETAIL_RUNTIME_INLINE void input_pipeline::feed_batches(queue& source) {
  const std::int64_t n = columns_[0].dim(0), size = stages_[0].n;
  const bool exact = stages_[0].type == stage::kind::batch_exact;
  std::vector<tensor> batch;
  std::int64_t filled = 0;
  auto fresh = [&] {
    batch.clear();
    for (const tensor& c : columns_) {
      auto dims = c.shape().dims();
      dims[0] = size;
      batch.emplace_back(c.dtype(), shape(dims));
    }
    filled = 0;
  };
  auto put = [&](std::vector<tensor> element) {
    std::promise<std::exception_ptr> done;
    auto result = done.get_future();
    source.enqueue({std::move(element)}, &coord_->cancellation(), [&done](std::exception_ptr e) { done.set_value(e); });
    if (auto e = result.get()) {
      if (coord_->should_stop()) return false;  // cancelled by the stop
      std::rethrow_exception(e);
    }
    return true;
  };
  fresh();
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t e = 0; (epochs_ < 0 || e < epochs_) && !coord_->should_stop(); ++e) {
    epoch_order(e, order);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto row = order[static_cast<std::size_t>(i)];
      for (std::size_t c = 0; c < columns_.size(); ++c) {
        const tensor& col = columns_[c];
        const std::size_t width = col.dim(0) ? col.bytes() / static_cast<std::size_t>(col.dim(0)) : 0;  // within: a row of the column
        copy_element_bytes(static_cast<char*>(batch[c].raw_data()) + static_cast<std::size_t>(filled) * width,
                           static_cast<const char*>(col.raw_data()) + static_cast<std::size_t>(row) * width, width, col.dtype());
      }
      if (++filled == size) {
        if (!put(std::move(batch))) return;
        fresh();
      }
    }
  }
  if (coord_->should_stop()) return;
  if (filled > 0 && !exact) {
    std::vector<tensor> rest;
    for (const tensor& b : batch) rest.push_back(b.slice(0, filled));
    if (!put(std::move(rest))) return;
  }
  source.close();
}
#endif

}  // namespace weft
