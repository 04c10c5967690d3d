/// @file
/// The single-device executor (whitepaper §3.1, DESIGN.md §1).
///
/// An executable is the pruned graph of one run signature with a kernel per node; it is
/// immutable and shared by every step that runs it. A step holds the mutable state: for
/// each node a count of unfinished inputs, and an input slot per data input that its
/// producer fills. A node whose count reaches zero is ready. Cheap ready nodes run inline
/// on the thread that made them ready. Large ones, whose kernels split across all of a
/// device's intra-op threads, run one at a time (classify()). Others go to the inter-op pool
/// (all but one, which the current thread keeps), where the thread that called run() takes
/// them too while it waits for the step to end. Async kernels get a done callback and hold
/// no thread.
///
/// Control flow (whitepaper §4.4, ops/control_flow_ops.hpp): every node belongs to a loop
/// frame, found when the executable is built (the root frame, or the frame an Enter leads
/// into). A step keeps a frame instance per run of a loop and, in it, an iteration state
/// (slots and counts) per iteration in flight, at most parallel_iterations of them; the
/// root frame has one iteration. Every value carries a dead bit: a node with a dead input
/// does not run and its outputs are dead, a Switch kills its untaken output, a Merge takes
/// its first live input. The executor runs the control-flow ops itself.
///
/// A kernel error or a cancellation aborts the step: no further node starts, waiting async
/// kernels are cancelled, buffers are released with the step, and run() reports the first
/// error with the node, op, dtypes and shapes.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <weft/core/inline_deque.hpp>
#include <weft/graph/graph.hpp>
#include <weft/runtime/executable.hpp>
#include <weft/runtime/kernel.hpp>
#include <weft/runtime/rendezvous.hpp>
#include <weft/runtime/run_control.hpp>

namespace weft {

/// An output of a traced node: its dtype, shape and bytes (a dead or reference output: none).
struct tensor_stats {
  weft::dtype dtype = weft::dtype::invalid;  ///< its dtype
  weft::shape shape{};                       ///< its shape
  std::size_t bytes = 0;                     ///< its size in bytes
};

/// One record of a traced step.
struct node_stats {
  std::string node;           ///< the node's name
  std::string op;             ///< its op
  std::string device;         ///< the device it ran on
  int thread = 0;             ///< the thread that ran it (numbered in the process)
  std::int64_t start_ns = 0;  ///< since the step started
  std::int64_t end_ns = 0;    ///< since the step started
  std::vector<tensor_stats> outputs{};  ///< the node's outputs (a _Send: the value it sends)
  std::size_t bytes_in_use = 0;         ///< the device's memory in use when the node ended
  int start_thread = -1;                ///< an async kernel's: the thread that started it
};

/// A traced step's records (run_options::trace, run_metadata::stats): tools/timeline.hpp
/// writes them as a Chrome trace, summarize() as a table.
struct step_stats {
  std::vector<node_stats> nodes;  ///< one per node run, in the order they ended
};

namespace detail {
inline int thread_index() {
  static std::atomic<int> next{0};
  thread_local int id = next.fetch_add(1);
  return id;
}

inline std::string describe_inputs(std::span<const entry> inputs) {
  std::ostringstream out;
  out << "(inputs:";
  if (inputs.empty()) out << " none";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    out << (i ? ", " : " ");
    if (inputs[i].value.valid())
      out << inputs[i].value.dtype() << inputs[i].value.shape();
    else if (inputs[i].ref)
      out << "ref " << inputs[i].ref->name();
    else
      out << "-";
  }
  out << ')';
  return out.str();
}
}  // namespace detail

/// How the executor runs one step of an executable.
struct step_options {
  bool trace = false;        ///< record node_stats
  std::int64_t step_id = 0;  ///< the step's id (kernel_context::step_id)
  /// What traced times count from (a step's partitions share it); unset: the step's creation.
  std::chrono::steady_clock::time_point start = {};
  /// A Recv copies its value into its device's memory (copy_from_host); else hands it on.
  bool copy_transfers = false;
};

/// One step of an executable (whitepaper §3.1's executor): nodes run as their inputs become
/// ready, on the devices' threads, control flow by the frames' rules; session::run makes one
/// per run (one per partition when the graph spans devices).
class step final : rendezvous::receiver {
 public:
  /// feeds: the values of the executable's fed outputs by exec_node::feed (the caller's,
  /// alive until the step ends); devices: the session's devices, indexed by exec_node::device.
  step(const executable& x, std::span<const tensor> feeds, std::span<const device* const> devices,
       resource_manager& resources, Eigen::ThreadPoolInterface* inter_op, step_options options)
      : x_(x), feeds_(feeds), devices_(devices), resources_(resources), inter_op_(inter_op),
        options_(options), results_(static_cast<std::size_t>(x.num_fetches)) {
    root_frame_.info = &x.frames[0];
    const auto num_nodes = static_cast<std::size_t>(x.frames[0].num_nodes);
    const auto num_slots = static_cast<std::size_t>(x.frames[0].num_slots);
    large_root_ = num_nodes > kept_root_nodes || num_slots > kept_root_nodes;
    if (large_root_) large_spare_ = x.spare_root.take();
    detail::kept_root* spare = large_root_ ? large_spare_.get() : &spare_root();
    if (spare && spare->nodes && spare->node_capacity >= num_nodes) {
      root_.slots = std::move(spare->slots);  // empty entries
      root_.slots.resize(num_slots);
      root_.nodes = std::move(spare->nodes);
      root_capacity_ = spare->node_capacity;
    } else {
      root_capacity_ = num_nodes;
    }
    init_iteration(root_, root_frame_, 0);
    if (options.trace)  // the clock is read only for a traced step's times
      start_ = options.start == std::chrono::steady_clock::time_point{} ? std::chrono::steady_clock::now() : options.start;
    for (const device* d : devices_) separate_ = separate_ || d->separate_memory();
  }

  step(const step&) = delete;
  step& operator=(const step&) = delete;
  /// Keeps the root iteration's arrays for this thread's next step where they are small,
  /// else for the executable's next step, and the handoff for this thread's next step where
  /// no pool task holds it (the values left are released here).
  ~step() {
    clear(root_.slots);
    if (!large_root_) {
      keep(spare_root());
    } else {
      if (!large_spare_) large_spare_ = std::make_unique<detail::kept_root>();
      keep(*large_spare_);
      x_.spare_root.give(std::move(large_spare_));
    }
    if (handoff_.use_count() != 1) return;  // a pool task still holds it
    {
      std::lock_guard lock(handoff_->mutex);  // after the last task's unlock
      handoff_->queue.clear();
      handoff_->live = 1;
      handoff_->done = false;
      handoff_->spin = false;
      handoff_->signalled.store(false, std::memory_order_relaxed);
    }
    spare_handoff() = std::move(handoff_);
  }

  /// Runs the step to completion on the calling thread plus the inter-op pool. Throws the
  /// first error; returns the fetched values otherwise. A `stopper` stopped from outside
  /// (a cancellation, a timeout) aborts the step with its error.
  std::vector<tensor> run(run_stopper* stopper = nullptr) {
    if (stopper) stopper->attach([this](const std::exception_ptr& e) { abort(e); });
    start();
    wait(*handoff_);
    if (stopper) stopper->detach();
    if (error_) std::rethrow_exception(error_);
    return std::move(results_);
  }

  /// Runs the steps of one executable's partitions (one per device, runtime/partition.hpp)
  /// as one step. Each partition's step is driven by its device's own thread: the first's by
  /// the calling thread, the others' by drivers[i] (a pool of one thread per device), beside
  /// the inter-op pool the steps were given, if any; so with no inter-op pool each device
  /// runs its nodes one at a time on one thread. Their Sends and Recvs meet in one
  /// rendezvous; a Recv's consumers run on their own device's thread. An error in any step
  /// aborts every one (the rendezvous fails the Recvs that wait). Throws the first error;
  /// returns the fetched values otherwise, each from the partition that computes it.
  static std::vector<tensor> run_partitions(std::span<step* const> steps,
                                            std::span<Eigen::ThreadPoolInterface* const> drivers,
                                            run_stopper* stopper = nullptr) {
    rendezvous meeting(steps.front()->x_.num_edges);
    group g{&meeting, steps};
    for (step* s : steps) {
      s->group_ = &g, s->rendezvous_ = &meeting, s->handoff_->spin = true;
      s->recv_waits_.resize(s->x_.transfers.size());
    }
    if (stopper) stopper->attach([&g](const std::exception_ptr& e) { g.abort(e); });
    std::mutex mutex;
    std::condition_variable cv;
    std::size_t running = steps.size() - 1;
    for (std::size_t i = 1; i < steps.size(); ++i)
      drivers[i]->Schedule([s = steps[i], &mutex, &cv, &running] {
        s->start();
        wait(*s->handoff_);
        std::lock_guard lock(mutex);
        if (--running == 0) cv.notify_all();
      });
    steps.front()->start();
    wait(*steps.front()->handoff_);
    {
      std::unique_lock lock(mutex);
      cv.wait(lock, [&] { return running == 0; });
    }
    if (stopper) stopper->detach();
    if (g.first) std::rethrow_exception(g.first);
    std::vector<tensor> results = std::move(steps.front()->results_);
    for (step* s : steps.subspan(1))
      for (std::size_t i = 0; i < results.size(); ++i)
        if (s->results_[i].valid()) results[i] = std::move(s->results_[i]);
    return results;
  }

  /// Aborts the step from outside (a user cancellation): running kernels finish, no new
  /// node starts, and waiting async kernels are cancelled.
  void cancel() { abort(std::make_exception_ptr(error(error_code::cancelled, "step was cancelled"))); }

  /// The records of a traced step (moved out).
  step_stats take_stats() {
    std::lock_guard lock(trace_mutex_);
    return std::move(stats_);
  }

 private:
  /// The expensive nodes handed off to other threads, and whether every step of the run has
  /// ended (`live`: the steps not ended yet; one, but for run_partitions).
  struct handoff;
  /// The steps of run_partitions: the first error aborts them all and the rendezvous.
  struct group {
    group(rendezvous* m, std::span<step* const> s) : meeting(m), steps(s) {}
    rendezvous* meeting;
    std::span<step* const> steps;
    std::mutex mutex;
    std::exception_ptr first;
    void abort(const std::exception_ptr& e) {
      {
        std::lock_guard lock(mutex);
        if (first) return;
        first = e;
      }
      meeting->abort(e);
      for (step* s : steps) s->abort(e);
    }
  };

  /// Starts the roots on this thread (a step with none has ended).
  void start() {
    if (x_.roots.empty()) return step_ended();
    outstanding_.store(static_cast<int>(x_.roots.size()), std::memory_order_relaxed);
    node_queue ready;
    for (int r : x_.roots) ready.push_back({.id = r, .iter = &root_});
    process(ready);
  }
  /// The calling thread works beside the inter-op pool: it runs the expensive nodes handed
  /// off and not yet taken by a pool thread, until the step has ended. A partition's thread
  /// spins up to 200 us before it sleeps (waking a sleeping thread costs 30 to 90 us, and a
  /// Recv's value from another device may come microseconds later).
  static void wait(handoff& h) {
    node_queue work;
    for (;;) {
      if (h.spin) {  // up to 200 us, as the intra-op pool's workers do between kernels
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
        for (int i = 0; !h.signalled.load(std::memory_order_acquire); ++i) {
          intra_op_detail::cpu_relax();
          if (i % 32 == 31 && std::chrono::steady_clock::now() > until) break;
        }
      }
      std::unique_lock lock(h.mutex);
      h.cv.wait(lock, [&] { return h.done || !h.queue.empty(); });
      if (h.done) break;
      auto [owner, tn] = h.queue.front();
      h.queue.pop_front();
      if (h.queue.empty()) h.signalled.store(false, std::memory_order_relaxed);
      lock.unlock();
      work.push_back(tn);
      owner->process(work);
    }
  }

  struct frame_state;
  /// One iteration of one frame instance: its nodes' input slots, pending counts and Merge
  /// states, all atomic or written by one producer; the frame's mutex guards the rest.
  struct iteration_state {
    frame_state* frame = nullptr;
    std::int64_t number = 0;
    std::vector<entry> slots;
    using node_state = detail::node_state;
    /// Per node of the frame (by exec_node::local), together: one allocation an iteration.
    std::unique_ptr<node_state[]> nodes;
    std::atomic<int> outstanding{0};  ///< nodes ready or running (frames other than the root)
    int child_frames = 0;             ///< frame instances started here and not yet ended
    std::vector<frame_state*> children;
  };
  /// A frame's iterations in flight, oldest first; it owns them (a retired one is freed at once).
  class iteration_ring {
   public:
    iteration_ring() = default;
    iteration_ring(const iteration_ring&) = delete;
    iteration_ring& operator=(const iteration_ring&) = delete;
    ~iteration_ring() {
      while (!empty()) pop_front();
    }
    bool empty() const { return q_.empty(); }
    std::size_t size() const { return q_.size(); }
    iteration_state* operator[](std::size_t i) const { return q_[i]; }
    iteration_state* front() const { return q_[0]; }
    iteration_state* back() const { return q_[q_.size() - 1]; }
    void push_back(std::unique_ptr<iteration_state> it) {
      q_.push_back(it.get());
      it.release();
    }
    void pop_front() { delete take_front(); }
    /// The oldest iteration, no longer in the ring (the caller owns it).
    [[nodiscard]] iteration_state* take_front() {
      iteration_state* it = q_[0];
      q_.pop_front();
      return it;
    }
    auto begin() const { return q_.begin(); }
    auto end() const { return q_.end(); }

   private:
    inline_deque<iteration_state*, 4> q_;
  };
  /// One run of a loop: its iterations in flight, oldest first. Frame instances live until
  /// the step ends (a retired iteration's memory is freed at once).
  struct frame_state {
    const frame_info* info = nullptr;
    int id = 0;
    iteration_state* parent_iteration = nullptr;
    std::mutex mutex;
    iteration_ring iterations;
    std::int64_t first = 0;   ///< iterations[0]'s number
    int pending_enters = 0;   ///< Enter nodes that have not delivered yet
    bool ended = false;
    std::vector<std::pair<int, entry>> invariants;  ///< (Enter, value) for every iteration
    std::vector<std::pair<int, entry>> deferred;    ///< (NextIteration, value) for the next one
    std::vector<char> exit_delivered;
    std::unique_ptr<iteration_state> spare;  ///< the last retired iteration, for the next one to reuse
  };
  struct tagged_node {  // 16 bytes
    int id;
    bool large = false;    ///< holds the step's turn for large nodes (schedule())
    bool arrived = false;  ///< a Recv whose value has come (received())
    bool kept = false;     ///< an other node kept on the thread that made it ready (place())
    iteration_state* iter;
  };
  /// Nodes made ready by one node, and the nodes one thread is to run: in the object for the
  /// usual few (a std::deque allocates when it is made, a vector when it is first pushed to).
  using ready_list = inline_deque<tagged_node, 16>;
  using node_queue = inline_deque<tagged_node, 32>;
  struct recv_wait {  // a Recv waiting for its value
    tagged_node tn;   ///< marked arrived
    std::int64_t t0 = 0;
    entry value;      ///< the value, once it came
  };

  std::unique_ptr<iteration_state> make_iteration(frame_state& f, std::int64_t number) {
    auto it = f.spare ? std::move(f.spare) : std::make_unique<iteration_state>();
    init_iteration(*it, f, number);
    return it;
  }
  /// Sets `it` up as iteration `number` of f: fresh, or a retired iteration of f (its arrays
  /// kept; its slots were emptied when it retired).
  static void init_iteration(iteration_state& it, frame_state& f, std::int64_t number) {
    const frame_info& info = *f.info;
    const auto n = static_cast<std::size_t>(info.num_nodes);
    it.frame = &f;
    it.number = number;
    if (it.nodes) {
      it.outstanding.store(0, std::memory_order_relaxed);
      it.child_frames = 0;
      it.children.clear();
    } else {
      it.slots.resize(static_cast<std::size_t>(info.num_slots));
      it.nodes = std::make_unique_for_overwrite<iteration_state::node_state[]>(n);
    }
    for (std::size_t i = 0; i < n; ++i) {
      auto& s = it.nodes[i];
      s.pending.store(info.initial_pending[i], std::memory_order_relaxed);
      s.merge_live.store(-1, std::memory_order_relaxed);
      s.merge_dead.store(0, std::memory_order_relaxed);
      s.dead_control.store(false, std::memory_order_relaxed);
      s.merge_fired.store(false, std::memory_order_relaxed);
    }
  }
  bool in_root(const iteration_state* it) const { return it->frame == &root_frame_; }

  /// A node's outputs while it runs: in the object for up to four (most ops), else on the heap.
  class output_buffer {
   public:
    /// n empty entries.
    std::span<entry> take(std::size_t n) {
      if (n > small_.size()) {
        large_.assign(n, entry{});
        return large_;
      }
      for (std::size_t i = 0; i < n; ++i) small_[i].reset();  // a failed kernel may have left values
      return {small_.data(), n};
    }

   private:
    std::array<entry, 4> small_{};
    std::vector<entry> large_;
  };

  /// Runs the nodes of inline_ready and those they make ready here, until it is empty.
  void process(node_queue& inline_ready) {
    output_buffer buffer;
    ready_list ready;
    while (!inline_ready.empty()) {
      tagged_node tn = inline_ready.front();
      inline_ready.pop_front();
      const exec_node& xn = x_.nodes[static_cast<std::size_t>(tn.id)];
      if (aborted_.load(std::memory_order_acquire)) {
        if (tn.large) pass_large_turn(inline_ready);
        node_done(1);
        continue;
      }
      std::span<entry> inputs(tn.iter->slots.data() + xn.input_start, static_cast<std::size_t>(xn.num_inputs));
      const std::span<entry> outputs = buffer.take(static_cast<std::size_t>(xn.num_outputs));
      bool dead = tn.iter->nodes[static_cast<std::size_t>(xn.local)].dead_control.load(std::memory_order_relaxed);
      if (xn.kind != flow::merge)
        for (std::size_t i = 0; i < (xn.runs_on_dead_value ? 1 : inputs.size()); ++i) dead = dead || inputs[i].dead;
      if (xn.transfer >= 0) {  // a dead value crosses too
        if (!transfer(tn, xn, inputs, dead, outputs, ready, inline_ready)) continue;
      } else if (dead) {
        for (auto& o : outputs) o.dead = true;
      } else if (xn.feed >= 0) {
        outputs[0].value = feeds_[static_cast<std::size_t>(xn.feed)];
        if (separate_) outputs[0].value = on_device(xn, std::move(outputs[0].value));
      } else if (xn.kind != flow::plain) {
        try {
          snapshot_refs(xn, inputs);
          run_control_flow(tn, xn, inputs, outputs);
        } catch (...) {
          fail_node(xn, inputs, std::current_exception());
          clear(inputs);
          node_done(1);
          continue;
        }
      } else {
        if (xn.async) {
          start_async(tn, xn, inputs, inline_ready);
          continue;
        }
        auto t0 = options_.trace ? now_ns() : 0;
        try {
          snapshot_refs(xn, inputs);
          kernel_context ctx(*xn.def, inputs, outputs, device_of(xn), resources_, cancellation_, options_.step_id, &store_);
          if (inter_op_ && !xn.cheap) {
            auto busy = device_of(xn).cpu().count_busy();  // other threads may run kernels beside it
            xn.kernel->compute(ctx);
          } else {
            xn.kernel->compute(ctx);
          }
        } catch (...) {
          fail_node(xn, inputs, std::current_exception());
          clear(inputs);
          if (tn.large) pass_large_turn(inline_ready);
          node_done(1);
          continue;
        }
        if (options_.trace) record(xn, t0, outputs);
      }
      clear(inputs);
      ready.clear();
      propagate(tn, xn, outputs, ready);
      clear(outputs);  // the consumers hold their copies: a sole one may write into its buffer
      finish(tn, ready);
      if (tn.large) pass_large_turn(inline_ready);
      schedule_after(ready, inline_ready);
    }
  }

  /// Switch, Merge, Enter, Exit, NextIteration and LoopCond on live inputs (a Merge also on
  /// dead ones).
  void run_control_flow(tagged_node tn, const exec_node& xn, std::span<entry> inputs, std::span<entry> outputs) {
    switch (xn.kind) {
      case flow::switch_: {
        // A predicate in a device's memory is copied out (a wait for that device).
        tensor copied;
        const tensor& pred = !separate_ || inputs[1].value.memory_space() == memory_space::host
                                 ? inputs[1].value
                                 : (copied = on_host(xn, inputs[1].value));
        if (pred.dtype() != dtype::boolean || pred.num_elements() != 1)
          fail(error_code::invalid_argument, "pred must be a bool scalar, got ", pred.dtype(), pred.shape());
        const int taken = pred.data<bool>()[0] ? 1 : 0;
        outputs[static_cast<std::size_t>(taken)].value = inputs[0].value;
        outputs[static_cast<std::size_t>(1 - taken)].dead = true;
        break;
      }
      case flow::merge: {
        const int live = tn.iter->nodes[static_cast<std::size_t>(xn.local)].merge_live.load(std::memory_order_acquire);
        if (live < 0) {
          outputs[0].dead = outputs[1].dead = true;
        } else {
          outputs[0].value = inputs[static_cast<std::size_t>(live)].value;
          outputs[1].value = tensor::scalar(static_cast<std::int32_t>(live));
        }
        break;
      }
      case flow::next_iteration:
        for (const auto& e : xn.out_edges) {  // a loop variable keeps the shape its Merge declares
          const node& m = *x_.nodes[static_cast<std::size_t>(e.dst)].def;
          if (!m.output_shape(0).accepts(inputs[0].value.shape()))
            fail(error_code::invalid_argument, "the loop variable of ", m.describe(), " has shape ", m.output_shape(0),
                 " but iteration ", tn.iter->number, " gives it ", inputs[0].value.dtype(), inputs[0].value.shape());
        }
        outputs[0].value = inputs[0].value;
        break;
      default:  // Enter, Exit, LoopCond pass their input on
        outputs[0].value = inputs[0].value;
        break;
    }
  }

  /// An async kernel: its done callback hands on what it made ready. Done within
  /// compute_async (a queue that had the element), they join `inline_ready`, the queue of the
  /// process() loop that started it, rather than a process() call nested in the kernel's
  /// (which made a node queue of its own for them).
  void start_async(tagged_node tn, const exec_node& xn, std::span<entry> inputs, node_queue& inline_ready) {
    struct async_state {
      std::vector<entry> outputs;
      std::unique_ptr<kernel_context> ctx;
      std::int64_t t0;
      std::thread::id caller = std::this_thread::get_id();
      int caller_index = 0;                 // the tracing thread index of the caller
      node_queue* starting_queue = nullptr;  // while compute_async runs: the caller's queue (read on its thread only)
    };
    auto state = std::make_shared<async_state>();
    state->outputs.resize(static_cast<std::size_t>(xn.num_outputs));
    state->t0 = options_.trace ? now_ns() : 0;
    if (options_.trace) state->caller_index = detail::thread_index();
    try {
      snapshot_refs(xn, inputs);
    } catch (...) {
      fail_node(xn, inputs, std::current_exception());
      clear(inputs);
      node_done(1);
      return;
    }
    state->ctx = std::make_unique<kernel_context>(*xn.def, inputs, state->outputs, device_of(xn), resources_,
                                                  cancellation_, options_.step_id, &store_);
    state->starting_queue = &inline_ready;
    xn.kernel->compute_async(*state->ctx, [this, tn, &xn, state, inputs] {
      if (auto e = state->ctx->error()) {
        fail_node(xn, inputs, e);
        clear(inputs);
        node_done(1);
        return;
      }
      if (options_.trace) record(xn, state->t0, state->outputs, state->caller_index);
      clear(inputs);
      ready_list ready;
      propagate(tn, xn, state->outputs, ready);
      finish(tn, ready);
      if (std::this_thread::get_id() != state->caller) {
        // Done on another thread (an enqueue that made room, a dequeue that brought the
        // element, another step's): the nodes it made ready go to this step's own threads,
        // so that a step waiting on a queue does not run the rest of its work on the thread
        // of the step that fed it (two steps of a pipeline would then run one after the other).
        outstanding_.fetch_add(static_cast<int>(ready.size()), std::memory_order_relaxed);  // before any can run
        for (const tagged_node& r : ready) hand_off(r);
      } else if (state->starting_queue) {
        schedule(ready, *state->starting_queue);
      } else {
        node_queue inline_ready;
        schedule(ready, inline_ready);
        if (!inline_ready.empty()) process(inline_ready);
      }
      node_done(1);
    });
    state->starting_queue = nullptr;  // (state, not the step: the step may have ended)
  }

  /// A Send or Recv in process(): true when a Recv has its value in `outputs`, to go on as
  /// any node that ran; false when the node is done with here (a Send, a control edge's
  /// token, or a Recv that waits). Out of line: the path of a node with no transfer stays short.
  [[gnu::noinline]] bool transfer(tagged_node tn, const exec_node& xn, std::span<entry> inputs, bool dead,
                                  std::span<entry> outputs, ready_list& ready, node_queue& inline_ready) {
    const transfer_info& t = x_.transfers[static_cast<std::size_t>(xn.transfer)];
    auto done = [&] {
      finish(tn, ready);  // a Send or Recv inside a loop ends its iteration's part
      schedule(ready, inline_ready);
      node_done(1);
      return false;
    };
    ready.clear();
    if (t.send) {
      send(tn, xn, t, inputs, dead);
      return done();
    }
    if (!tn.arrived && !receive(tn, xn, t)) return false;  // received() hands it back when its value comes
    bool dead_token = false;
    arrived(tn, xn, t, outputs, dead_token);
    if (!t.control) return true;
    // A token: its consumers run, dead when it is (as they would be on one device).
    control_edges(tn.iter, xn, dead_token, ready);
    return done();
  }

  /// A Send: the value (a variable's read now; a dead one as dead) goes to the rendezvous,
  /// which hands a Recv waiting for it back to its device's thread. Out of line, as
  /// receive(): the path of a node with no transfer stays short.
  [[gnu::noinline]] void send(tagged_node tn, const exec_node& xn, const transfer_info& t, std::span<entry> inputs, bool dead) {
    const std::int64_t t0 = options_.trace ? now_ns() : 0;
    entry v;
    if (dead) {
      v.dead = true;
    } else if (!t.control) {
      // Values cross in host memory: a device of its own memory copies out here, and the
      // Recv's device copies in.
      v.value = on_host(xn, inputs[0].ref && !inputs[0].value.valid() ? inputs[0].ref->value() : inputs[0].value);
      if (t.lossy) v.value = truncate_to_bfloat16(v.value);
    }
    clear(inputs);
    if (options_.trace) record(xn, t0, std::span<const entry>(&v, 1));
    try {
      rendezvous_->send(t.edge, std::move(v), t.key, iteration_key(tn));
    } catch (...) {
      abort(std::current_exception());
    }
  }

  /// A Recv: takes its value from the rendezvous (true) or waits for it, holding no thread
  /// (false): received() then hands the Recv back to its device's thread.
  [[gnu::noinline]] bool receive(tagged_node tn, const exec_node& xn, const transfer_info& t) {
    auto [w, token] = wait_of(tn, xn, true);
    w->tn = tn;
    w->tn.arrived = true;
    w->t0 = options_.trace ? now_ns() : 0;
    return rendezvous_->recv(t.edge, w->value, *this, token, t.key, iteration_key(tn));
  }
  /// The value of a waiting Recv has come, on the Send's thread (or the abort's error).
  void received(int token, entry* value, std::exception_ptr e) override {
    if (e) {
      abort(e);
      node_done(1);
      return;
    }
    recv_wait* w = nullptr;
    if (static_cast<std::size_t>(token) < recv_waits_.size()) {
      w = &recv_waits_[static_cast<std::size_t>(token)];
    } else {
      std::lock_guard lock(loop_waits_mutex_);
      w = loop_waits_[static_cast<std::size_t>(token) - recv_waits_.size()].get();
    }
    w->value = std::move(*value);
    hand_off(w->tn);  // to the Recv's device's thread
  }
  /// A Recv's value, taken: its output, or for a control edge whether its token is dead.
  void arrived(tagged_node tn, const exec_node& xn, const transfer_info& t, std::span<entry> outputs, bool& dead_token) {
    recv_wait& w = *wait_of(tn, xn, false).first;
    entry v = std::move(w.value);
    w.value.reset();
    const device& d = device_of(xn);
    if (t.lossy && !v.dead) {
      v.value = d.separate_memory() ? d.copy_from_host(widen_from_bfloat16(v.value, cpu_allocator::global()))
                                    : widen_from_bfloat16(v.value, d.get_allocator());
    } else if (options_.copy_transfers && !v.dead && v.value.valid() && !d.separate_memory()) {
      v.value = d.copy_from_host(v.value);
    } else if (!v.dead) {
      v.value = on_device(xn, std::move(v.value));
    }
    if (options_.trace) record(xn, w.t0, std::span<const entry>(&v, 1));
    if (outputs.empty()) dead_token = v.dead;
    else outputs[0] = std::move(v);
  }
  /// A transfer's iteration in the rendezvous: -1 in the root frame, else its loop's iteration
  /// (a loop across devices runs in the root frame's one instance of its frame).
  std::int64_t iteration_key(tagged_node tn) const { return in_root(tn.iter) ? -1 : tn.iter->number; }
  /// Where a Recv waits (by transfer in the root frame, by transfer and iteration in a loop),
  /// and the token that names it to the rendezvous; made on first use when `make`.
  std::pair<recv_wait*, int> wait_of(tagged_node tn, const exec_node& xn, bool make) {
    if (in_root(tn.iter)) return {&recv_waits_[static_cast<std::size_t>(xn.transfer)], xn.transfer};
    std::lock_guard lock(loop_waits_mutex_);
    const auto key = std::make_pair(xn.transfer, tn.iter->number);
    auto it = loop_wait_index_.find(key);
    if (it == loop_wait_index_.end()) {
      if (!make) fail(error_code::internal, "a Recv in iteration ", tn.iter->number, " arrived without waiting");
      it = loop_wait_index_.emplace(key, static_cast<int>(loop_waits_.size())).first;
      loop_waits_.push_back(std::make_unique<recv_wait>());
    }
    return {loop_waits_[static_cast<std::size_t>(it->second)].get(), static_cast<int>(recv_waits_.size()) + it->second};
  }

  /// A lossy transfer's wire format: each float32's top 16 bits (its bfloat16 truncation),
  /// and back, the low 16 bits zero.
  /// t in host memory: as it is, or copied out of the memory of xn's device.
  /// Out of line: a session of host devices only never calls them (separate_ is false).
  [[gnu::noinline]] tensor on_host(const exec_node& xn, tensor t) const {
    if (!separate_ || t.memory_space() == memory_space::host) return t;
    return device_of(xn).copy_to_host(t);
  }
  /// A host tensor for xn's device: as it is, or copied into the device's own memory (but
  /// small integer tensors, stays_in_host_memory).
  [[gnu::noinline]] tensor on_device(const exec_node& xn, tensor t) const {
    if (!separate_) return t;
    const device& d = device_of(xn);
    if (!t.valid() || t.memory_space() != memory_space::host || !d.separate_memory() || stays_in_host_memory(t)) return t;
    return d.copy_from_host(t);
  }
  static tensor truncate_to_bfloat16(const tensor& f) {
    tensor wire(dtype::bfloat16, f.shape());
    const auto* from = static_cast<const std::uint32_t*>(f.raw_data());
    auto* to = static_cast<std::uint16_t*>(wire.raw_data());
    for (std::int64_t i = 0, n = f.num_elements(); i < n; ++i) to[i] = static_cast<std::uint16_t>(from[i] >> 16);
    return wire;
  }
  static tensor widen_from_bfloat16(const tensor& wire, allocator& alloc) {
    tensor f(dtype::float32, wire.shape(), alloc);
    const auto* from = static_cast<const std::uint16_t*>(wire.raw_data());
    auto* to = static_cast<std::uint32_t*>(f.raw_data());
    for (std::int64_t i = 0, n = wire.num_elements(); i < n; ++i) to[i] = std::uint32_t{from[i]} << 16;
    return f;
  }

  /// Non-ref inputs that carry a variable reference read the variable's value now.
  void snapshot_refs(const exec_node& xn, std::span<entry> inputs) {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].ref && !xn.input_is_ref[i]) inputs[i].value = inputs[i].ref->value();
  }

  static void clear(std::span<entry> inputs) {
    for (auto& in : inputs) in.reset();  // (a slot keeps its shape's storage for the next step)
  }

  /// A node of `it` becomes ready.
  void make_ready(iteration_state* it, int id, ready_list& ready) {
    if (!in_root(it)) it->outstanding.fetch_add(1, std::memory_order_relaxed);
    ready.push_back({.id = id, .iter = it});
  }

  /// Delivers v along edge e into iteration it. An iteration cannot retire while a value may
  /// still arrive (see check_frame), so this takes no lock.
  template <class Entry>  // const entry& (copied into the slot) or entry&& (moved)
  void deliver(iteration_state* it, const exec_edge& e, Entry&& v, ready_list& ready) {
    const auto local = static_cast<std::size_t>(e.dst_local);
    if (!e.to_merge) {
      it->slots[static_cast<std::size_t>(e.dst_slot)] = std::forward<Entry>(v);
      if (it->nodes[local].pending.fetch_sub(1, std::memory_order_acq_rel) == 1) make_ready(it, e.dst, ready);
      return;
    }
    const exec_node& dst = x_.nodes[static_cast<std::size_t>(e.dst)];
    if (v.dead) {
      it->nodes[local].merge_dead.fetch_add(1, std::memory_order_seq_cst);
    } else {
      int none = -1;
      // The first live input wins; its value is written before it is published.
      if (it->nodes[local].merge_live.load(std::memory_order_acquire) >= 0) return;
      it->slots[static_cast<std::size_t>(e.dst_slot)] = std::forward<Entry>(v);
      if (!it->nodes[local].merge_live.compare_exchange_strong(none, e.dst_slot - dst.input_start, std::memory_order_seq_cst)) {
        it->slots[static_cast<std::size_t>(e.dst_slot)].reset();  // (keeps its dims' storage)
        return;
      }
    }
    fire_merge_if_ready(it, e.dst, ready);
  }
  /// A Merge runs once every control input arrived and it has a live input or every input
  /// it can get is dead; whichever thread sees that first runs it.
  void fire_merge_if_ready(iteration_state* it, int id, ready_list& ready) {
    const exec_node& m = x_.nodes[static_cast<std::size_t>(id)];
    const auto local = static_cast<std::size_t>(m.local);
    if (it->nodes[local].pending.load(std::memory_order_seq_cst) != 0) return;
    if (it->nodes[local].merge_live.load(std::memory_order_seq_cst) < 0 &&
        it->nodes[local].merge_dead.load(std::memory_order_seq_cst) < m.forward_inputs)
      return;
    if (it->nodes[local].merge_fired.exchange(true, std::memory_order_acq_rel)) return;
    make_ready(it, id, ready);
  }

  /// Outputs of a finished node to their consumers: in the same iteration, or for Enter,
  /// Exit and NextIteration into the child frame, the parent frame or the next iteration.
  void propagate(tagged_node tn, const exec_node& xn, std::span<entry> outputs, ready_list& ready) {
    iteration_state* it = tn.iter;
    if (!xn.fetches.empty() && xn.kind != flow::exit)  // an Exit's value is fetched when it leaves the loop
      for (std::size_t port = 0; port < outputs.size(); ++port) fetch(xn, static_cast<int>(port), outputs[port]);
    bool any_dead = false;
    for (const auto& o : outputs) any_dead = any_dead || o.dead;
    control_edges(it, xn, any_dead, ready);
    switch (xn.kind) {
      case flow::enter: return enter_frame(it, xn, outputs[0], ready);
      case flow::exit: return leave_frame(it, xn, outputs[0], ready);
      case flow::next_iteration: return next_iteration(it, xn, outputs[0], ready);
      default: break;
    }
    for (const auto& e : xn.out_edges) {  // the last edge of each output takes it (they are cleared next)
      entry& v = outputs[static_cast<std::size_t>(e.src_port)];
      if (e.last_of_port) deliver(it, e, std::move(v), ready);
      else deliver(it, e, std::as_const(v), ready);
    }
  }

  /// Fetches of output `port` of xn (only outputs in the root frame are fetched).
  void fetch(const exec_node& xn, int port, const entry& o) {
    for (auto [p, index] : xn.fetches) {
      if (p != port) continue;
      if (o.dead) {  // a dead value never reaches a fetch
        abort(std::make_exception_ptr(error(error_code::invalid_argument,
                                            "cannot fetch output " + std::to_string(port) + " of " + xn.def->describe() +
                                                ": it is on an untaken branch (its value is dead)")));
        continue;
      }
      try {
        tensor& r = results_[static_cast<std::size_t>(index)];
        r = o.ref && !o.value.valid() ? o.ref->value() : o.value;
        if (separate_) r = on_host(xn, std::move(r));
      } catch (...) {
        abort(std::current_exception());
      }
    }
  }

  void control_edges(iteration_state* it, const exec_node& xn, bool dead, ready_list& ready) {
    for (int c : xn.control_out) {
      const exec_node& dst = x_.nodes[static_cast<std::size_t>(c)];
      const auto local = static_cast<std::size_t>(dst.local);
      if (dead) it->nodes[local].dead_control.store(true, std::memory_order_relaxed);
      if (it->nodes[local].pending.fetch_sub(1, std::memory_order_seq_cst) != 1) continue;
      if (dst.kind == flow::merge) fire_merge_if_ready(it, c, ready);
      else make_ready(it, c, ready);
    }
  }

  /// An Enter's value goes into the instance of its frame started from `it` (created by the
  /// first Enter to arrive): into its first iteration, or into every iteration, present and
  /// future, for a loop invariant.
  void enter_frame(iteration_state* it, const exec_node& xn, const entry& v, ready_list& ready) {
    frame_state* child = nullptr;
    {
      std::lock_guard lock(it->frame->mutex);
      for (frame_state* c : it->children)
        if (c->id == xn.child_frame) child = c;
      if (!child) {
        auto f = std::make_unique<frame_state>();
        f->info = &x_.frames[static_cast<std::size_t>(xn.child_frame)];
        f->id = xn.child_frame;
        f->parent_iteration = it;
        f->pending_enters = f->info->num_enters;
        f->exit_delivered.assign(f->info->exits.size(), 0);
        f->iterations.push_back(make_iteration(*f, 0));
        child = f.get();
        it->children.push_back(child);
        ++it->child_frames;
        std::lock_guard frames_lock(frames_mutex_);
        frames_.push_back(std::move(f));
      }
    }
    {
      std::lock_guard lock(child->mutex);
      if (xn.is_constant) {
        child->invariants.emplace_back(static_cast<int>(&xn - x_.nodes.data()), v);
        for (iteration_state* iter : child->iterations)
          for (const auto& e : xn.out_edges) deliver(iter, e, v, ready);
      } else {
        for (const auto& e : xn.out_edges) deliver(child->iterations.front(), e, v, ready);
      }
      --child->pending_enters;
    }
    check_frame(child, ready);
  }

  /// An Exit's live value goes to the parent iteration, once; a dead one waits for the end of
  /// the frame (the loop may still end in a later iteration).
  void leave_frame(iteration_state* it, const exec_node& xn, const entry& v, ready_list& ready) {
    if (v.dead) return;
    frame_state* f = it->frame;
    {
      std::lock_guard lock(f->mutex);
      if (f->exit_delivered[static_cast<std::size_t>(xn.exit_index)]) {
        abort(std::make_exception_ptr(error(error_code::invalid_argument,
                                            xn.def->describe() + ": a second live value leaves the loop frame '" +
                                                f->info->name + "' (iteration " + std::to_string(it->number) +
                                                "); only the iteration that ends the loop sends an Exit a value")));
        return;
      }
      f->exit_delivered[static_cast<std::size_t>(xn.exit_index)] = 1;
    }
    fetch(xn, 0, v);
    for (const auto& e : xn.out_edges) deliver(f->parent_iteration, e, v, ready);
  }

  /// A NextIteration's live value goes into the next iteration, started now if fewer than
  /// parallel_iterations are in flight and deferred until the oldest retires otherwise; a
  /// dead one is dropped (the loop ended on this path).
  void next_iteration(iteration_state* it, const exec_node& xn, const entry& v, ready_list& ready) {
    if (v.dead) return;
    frame_state* f = it->frame;
    std::lock_guard lock(f->mutex);
    const auto index = static_cast<std::size_t>(it->number + 1 - f->first);
    if (index < f->iterations.size()) {
      for (const auto& e : xn.out_edges) deliver(f->iterations[index], e, v, ready);
    } else if (static_cast<std::int64_t>(f->iterations.size()) < f->info->parallel_iterations) {
      iteration_state* next = start_iteration(*f, ready);
      for (const auto& e : xn.out_edges) deliver(next, e, v, ready);
    } else {
      f->deferred.emplace_back(static_cast<int>(&xn - x_.nodes.data()), v);
    }
  }

  /// A new newest iteration of f, given the loop invariants (f's mutex held).
  iteration_state* start_iteration(frame_state& f, ready_list& ready) {
    f.iterations.push_back(make_iteration(f, f.first + static_cast<std::int64_t>(f.iterations.size())));
    iteration_state* next = f.iterations.back();
    for (const auto& [enter, value] : f.invariants)
      for (const auto& e : x_.nodes[static_cast<std::size_t>(enter)].out_edges) deliver(next, e, value, ready);
    return next;
  }

  /// After a node of tn's iteration finished outside the root frame.
  void finish(tagged_node tn, ready_list& ready) {
    if (in_root(tn.iter)) return;
    frame_state* f = tn.iter->frame;
    if (tn.iter->outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) check_frame(f, ready);
  }

  /// Retires f's oldest iterations while they are done (nothing ready or running, no child
  /// frame running, and for the first, every Enter arrived; a later one can only be done once
  /// the one before it retired, since that one feeds it), starts the deferred iteration in
  /// their place, and when nothing is left ends the frame: every Exit that let no live value
  /// out sends a dead one, and the parent iteration is checked in turn.
  void check_frame(frame_state* f, ready_list& ready) {
    while (f->parent_iteration) {
      std::vector<int> dead_exits;
      {
        std::lock_guard lock(f->mutex);
        if (f->ended) return;
        while (!f->iterations.empty()) {
          iteration_state& oldest = *f->iterations.front();
          if (oldest.outstanding.load(std::memory_order_acquire) != 0 || oldest.child_frames != 0 ||
              (oldest.number == 0 && f->pending_enters != 0))
            break;
          iteration_state* retired = f->iterations.take_front();
          clear(retired->slots);  // values nothing consumed (none, in a loop that ran to its end)
          f->spare.reset(retired);  // its arrays for the next iteration
          ++f->first;
          if (!f->deferred.empty() && static_cast<std::int64_t>(f->iterations.size()) < f->info->parallel_iterations) {
            iteration_state* next = start_iteration(*f, ready);
            for (const auto& [nid, value] : f->deferred)
              for (const auto& e : x_.nodes[static_cast<std::size_t>(nid)].out_edges) deliver(next, e, value, ready);
            f->deferred.clear();
          }
        }
        if (!f->iterations.empty() || f->pending_enters != 0) return;
        f->ended = true;
        for (std::size_t k = 0; k < f->exit_delivered.size(); ++k)
          if (!f->exit_delivered[k]) dead_exits.push_back(f->info->exits[k]);
      }
      iteration_state* parent = f->parent_iteration;
      entry dead;
      dead.dead = true;
      for (int exit : dead_exits) {
        fetch(x_.nodes[static_cast<std::size_t>(exit)], 0, dead);
        for (const auto& e : x_.nodes[static_cast<std::size_t>(exit)].out_edges) deliver(parent, e, dead, ready);
      }
      {
        std::lock_guard lock(parent->frame->mutex);
        std::erase(parent->children, f);
        --parent->child_frames;
      }
      if (in_root(parent)) return;
      f = parent->frame;
    }
  }

  /// How a ready node runs. Cheap (an op marked cheap, control flow, inputs of at most 4,096
  /// elements, a variable's reference counting its value's): on the thread that made it
  /// ready, since a thread hop costs more than it.
  /// Large (at least 32,768 elements, a synchronous kernel, a device with several intra-op
  /// threads): its kernel splits it across all of the device's threads, and two at once
  /// would run more threads than cores, so the step's large nodes run one at a time, each
  /// on the thread that made it ready or, while another runs, after it on that one's thread.
  /// Any other: on this thread or another (schedule()).
  enum class placement { cheap, large, other };
  placement classify(tagged_node tn) const {
    const exec_node& xn = x_.nodes[static_cast<std::size_t>(tn.id)];
    if (xn.cheap || xn.kind != flow::plain) return placement::cheap;
    std::int64_t elements = 0;
    // A variable's reference holds no value: the kernel reads the variable's (a weight whose
    // gradient's product read it through its reference counted 1, and LeNet's input gradient
    // of its 1568 x 128 layer, handed to the inter-op thread, took the backward pass there:
    // docs/benchmarks.md, session 68).
    for (int i = 0; i < xn.num_inputs; ++i) {
      const entry& in = tn.iter->slots[static_cast<std::size_t>(xn.input_start + i)];
      elements += in.ref && !in.value.valid() ? in.ref->num_elements() : in.value.num_elements();
    }
    if (elements <= 4096) return placement::cheap;
    if (elements >= 32768 && !xn.async && device_of(xn).num_threads() > 1) return placement::large;
    return placement::other;
  }

  /// A large node takes the step's turn, or waits for it: false when it waits.
  bool take_large_turn(tagged_node tn) {
    std::lock_guard lock(large_mutex_);
    if (!large_running_) return large_running_ = true;
    large_waiting_.push_back(tn);
    return false;
  }
  /// A large node has finished: the next waiting one runs on this thread, or the turn is free.
  /// Before the node's node_done (the waiting nodes keep the step alive).
  [[gnu::noinline]] void pass_large_turn(node_queue& inline_ready) {
    std::lock_guard lock(large_mutex_);
    if (large_waiting_.empty()) {
      large_running_ = false;
      return;
    }
    inline_ready.push_back(large_waiting_.front());
    large_waiting_.pop_front();
  }

  void schedule(const ready_list& ready, node_queue& inline_ready) {
    if (ready.empty()) return;
    outstanding_.fetch_add(static_cast<int>(ready.size()), std::memory_order_relaxed);
    enqueue(ready, inline_ready);
  }
  /// schedule(ready) and node_done(1) for the node that made them ready, in one atomic
  /// operation at most: its count in outstanding_ passes to one of them (none for a node of a
  /// chain). It is added before any of them can run elsewhere, and subtracted only when it
  /// made none ready, so the count cannot reach zero while one of them is to run.
  void schedule_after(const ready_list& ready, node_queue& inline_ready) {
    if (ready.empty()) return node_done(1);
    if (ready.size() > 1) outstanding_.fetch_add(static_cast<int>(ready.size()) - 1, std::memory_order_relaxed);
    enqueue(ready, inline_ready);
  }
  void enqueue(const ready_list& ready, node_queue& inline_ready) {
    if (!inter_op_) {
      if (!group_)
        for (const tagged_node& tn : ready) inline_ready.push_back(tn);
      else
        for (const tagged_node& tn : ready) run_here(tn, inline_ready);
      return;
    }
    place(ready, inline_ready);
  }
  /// A node for this thread: after those ready before it; in a partition, in the order of the
  /// nodes (the order the placer's simulation ran each device's nodes in), so that a node
  /// whose result another device waits for does not wait behind every node that was ready
  /// before it (breadth first, a device would send its first result after all of them).
  /// A Send goes first (partitioning numbers Sends after every other node).
  void run_here(tagged_node tn, node_queue& inline_ready) const {
    if (!group_) return inline_ready.push_back(tn);
    const exec_node& xn = x_.nodes[static_cast<std::size_t>(tn.id)];
    if (xn.transfer >= 0 && x_.transfers[static_cast<std::size_t>(xn.transfer)].send) return inline_ready.push_front(tn);
    std::size_t at = inline_ready.size();
    while (at != 0 && inline_ready[at - 1].id > tn.id) --at;
    inline_ready.insert(at, tn);
  }

  /// Out of line: the path with no inter-op pool stays short. One other node stays on this
  /// thread, after the cheap ones, when it has nothing but cheap nodes outside control flow
  /// to run: they take microseconds, and a hop to another thread moves the rest of the
  /// chain, whose inputs this core's caches hold (LeNet's backward pass ran 6 % slower on
  /// two threads when its first node came ready beside a cheap one and went to the inter-op
  /// thread: docs/benchmarks.md, session 67). The others go to the inter-op pool.
  [[gnu::noinline]] void place(const ready_list& ready, node_queue& inline_ready) {
    // Control flow queued here leads to more work (a loop's next iteration), which the
    // kept node would hold up: parallel iterations run at once only when it goes.
    auto work_ahead = [&](const tagged_node& q) {
      return q.large || q.kept || x_.nodes[static_cast<std::size_t>(q.id)].kind != flow::plain;
    };
    bool only_cheap = inline_ready.size() <= 8;  // a longer queue is work enough for this thread
    if (only_cheap)
      for (const tagged_node& q : inline_ready) only_cheap = only_cheap && !work_ahead(q);
    std::optional<tagged_node> keep;
    for (tagged_node tn : ready) {
      const placement p = classify(tn);
      if (p == placement::cheap) {
        run_here(tn, inline_ready);
        only_cheap = only_cheap && !work_ahead(tn);
      } else if (p == placement::large) {
        tn.large = true;
        if (take_large_turn(tn)) inline_ready.push_back(tn), only_cheap = false;
      } else if (!keep && only_cheap) {
        keep = tn;
        keep->kept = true;
      } else {
        hand_off(tn);
      }
    }
    if (keep) inline_ready.push_back(*keep);
  }

  /// An expensive node for another thread: it waits in the step's handoff queue, and a task
  /// on the inter-op pool takes it, unless the calling thread of run() (waiting for the step
  /// to end) takes it first. The task then finds the queue empty, possibly after the step
  /// has ended: it holds the queue, not the step. A node in the queue keeps the step from
  /// ending (it counts in outstanding_), so a task that takes one may use the step.
  void hand_off(tagged_node tn) {
    {
      std::lock_guard lock(handoff_->mutex);
      handoff_->queue.push_back({this, tn});
      handoff_->signalled.store(true, std::memory_order_release);
    }
    handoff_->cv.notify_one();
    if (!inter_op_) return;  // the calling thread of run() takes it
    inter_op_->Schedule([h = handoff_] {
      std::unique_lock lock(h->mutex);
      if (h->queue.empty()) return;
      auto [owner, taken] = h->queue.front();
      h->queue.pop_front();
      lock.unlock();
      node_queue work;
      work.push_back(taken);
      owner->process(work);
    });
  }

  void node_done(int n) {
    if (outstanding_.fetch_sub(n, std::memory_order_acq_rel) == n) step_ended();
  }
  void step_ended() {
    std::lock_guard lock(handoff_->mutex);
    if (--handoff_->live == 0) {
      handoff_->done = true;
      handoff_->signalled.store(true, std::memory_order_release);
      handoff_->cv.notify_all();
    }
  }

  void fail_node(const exec_node& xn, std::span<const entry> inputs, std::exception_ptr e) {
    error_code code = error_code::internal;
    std::string what;
    try {
      std::rethrow_exception(e);
    } catch (const error& err) {
      code = err.code();
      what = err.what();
    } catch (const std::exception& err) {
      what = err.what();
    } catch (...) {
      what = "unknown exception";
    }
    abort(std::make_exception_ptr(
        error(code, xn.def->describe() + ": " + what + " " + detail::describe_inputs(inputs))));
  }

  void abort(std::exception_ptr e) {
    {
      std::lock_guard lock(error_mutex_);
      if (error_) return;
      error_ = e;
    }
    aborted_.store(true, std::memory_order_release);
    cancellation_.cancel();
    if (group_) group_->abort(e);
  }

  std::int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
  }
  /// `outputs`: what the node made (for a Send, the value sent); `start_thread`: the thread
  /// that started an async kernel.
  void record(const exec_node& xn, std::int64_t t0, std::span<const entry> outputs = {}, int start_thread = -1) {
    node_stats s;
    const device& d = device_of(xn);
    if (xn.transfer >= 0) {
      const transfer_info& t = x_.transfers[static_cast<std::size_t>(xn.transfer)];
      s.node = t.key, s.op = t.send ? "_Send" : "_Recv";
    } else {
      s.node = xn.def->name(), s.op = xn.def->op();
    }
    s.device = d.name(), s.thread = detail::thread_index(), s.start_ns = t0, s.end_ns = now_ns();
    s.outputs.reserve(outputs.size());
    for (const entry& e : outputs) {
      if (e.dead || !e.value.valid()) s.outputs.push_back({});
      else s.outputs.push_back({e.value.dtype(), e.value.shape(), e.value.bytes()});
    }
    s.bytes_in_use = d.bytes_in_use();
    s.start_thread = start_thread;
    std::lock_guard lock(trace_mutex_);
    stats_.nodes.push_back(std::move(s));
  }

  const executable& x_;
  std::span<const tensor> feeds_;
  const device& device_of(const exec_node& xn) const { return *devices_[static_cast<std::size_t>(xn.device)]; }

  std::span<const device* const> devices_;
  resource_manager& resources_;
  Eigen::ThreadPoolInterface* inter_op_;
  step_options options_;
  bool separate_ = false;  ///< whether any device has memory of its own (only then are values copied)
  std::vector<tensor> results_;
  frame_state root_frame_;
  iteration_state root_;
  std::mutex frames_mutex_;
  std::vector<std::unique_ptr<frame_state>> frames_;  ///< every loop frame instance of the step
  cancellation_manager cancellation_;
  step_store store_;
  std::atomic<int> outstanding_{0};
  std::atomic<bool> aborted_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
  struct handoff {
    std::mutex mutex;
    std::condition_variable cv;  ///< the calling thread waits for a node or the step's end
    /// A node handed off, and its step.
    struct handed {
      step* owner;     ///< the node's step
      tagged_node tn;  ///< the node
    };
    inline_deque<handed, 16> queue;
    int live = 1;
    bool done = false;
    bool spin = false;                   ///< wait() spins a little first (a partition's thread)
    std::atomic<bool> signalled{false};  ///< set with every node queued and at the end
  };
  /// This thread's handoff and root arrays kept from its last step (~step), for the next one.
  static std::shared_ptr<handoff>& spare_handoff() {
    static thread_local std::shared_ptr<handoff> h;
    return h;
  }
  static detail::kept_root& spare_root() {
    static thread_local detail::kept_root r;
    return r;
  }
  /// Moves the root iteration's arrays (their slots cleared) into k.
  void keep(detail::kept_root& k) {
    k.slots = std::move(root_.slots);
    k.nodes = std::move(root_.nodes);
    k.node_capacity = root_capacity_;
  }
  /// The most root nodes and slots whose arrays a thread keeps (at most about 90 KB: 72
  /// bytes a slot, 16 a node's state); an executable keeps larger ones itself.
  static constexpr std::size_t kept_root_nodes = 1024;
  static std::shared_ptr<handoff> make_handoff() {
    if (auto& spare = spare_handoff()) return std::move(spare);
    return std::make_shared<handoff>();
  }
  std::shared_ptr<handoff> handoff_ = make_handoff();
  std::size_t root_capacity_ = 0;  ///< root_.nodes' length
  /// More root nodes or slots than a thread keeps: the arrays are the executable's to keep.
  bool large_root_ = false;
  std::unique_ptr<detail::kept_root> large_spare_;  ///< what this step took from the executable
  group* group_ = nullptr;             ///< run_partitions' steps
  rendezvous* rendezvous_ = nullptr;   ///< where their Sends and Recvs meet
  std::vector<recv_wait> recv_waits_;   ///< by transfer, in the root frame
  std::mutex loop_waits_mutex_;         ///< guards the two below
  std::vector<std::unique_ptr<recv_wait>> loop_waits_;  ///< inside loops (each stays where it is; none made for a step without)
  std::map<std::pair<int, std::int64_t>, int> loop_wait_index_;  ///< (transfer, iteration) -> its index
  std::mutex large_mutex_;
  bool large_running_ = false;                ///< a large node holds the turn
  node_queue large_waiting_;     ///< large nodes ready while it runs
  std::chrono::steady_clock::time_point start_;
  std::mutex trace_mutex_;
  step_stats stats_;
};

}  // namespace weft
