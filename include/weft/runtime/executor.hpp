// The single-device executor (whitepaper §3.1, DESIGN.md §1).
//
// An executable is the pruned graph of one run signature with a kernel per node; it is
// immutable and shared by every step that runs it. A step holds the mutable state: for
// each node a count of unfinished inputs, and an input slot per data input that its
// producer fills. A node whose count reaches zero is ready. Cheap ready nodes run inline
// on the thread that made them ready; expensive ones go to the inter-op pool (all but one,
// which the current thread keeps). Async kernels get a done callback and hold no thread.
//
// Per-step state is organised as frames and iterations (the root frame has iteration 0)
// and every value carries a dead bit: a node with a dead input does not run and its
// outputs are dead. Control-flow ops (Switch, Merge, Enter, Exit, NextIteration) add
// frames and iterations on this structure.
//
// A kernel error or a cancellation aborts the step: no further node starts, waiting async
// kernels are cancelled, buffers are released with the step, and run() reports the first
// error with the node, op, dtypes and shapes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <weft/graph/graph.hpp>
#include <weft/runtime/kernel.hpp>

namespace weft {

struct exec_edge {
  int src_port;
  int dst;       // exec node
  int dst_slot;  // absolute input slot
};

struct exec_node {
  const node* def = nullptr;  // nullptr for a feed node
  std::shared_ptr<op_kernel> kernel;  // stateful ops share theirs across a session's executables
  int feed = -1;  // for a feed node: the index of its tensor in the run's feeds
  int input_start = 0;
  int num_inputs = 0;
  int num_outputs = 0;
  int pending = 0;  // data inputs plus control inputs
  bool cheap = false;
  std::vector<bool> input_is_ref;
  std::vector<exec_edge> out_edges;
  std::vector<int> control_out;
  std::vector<std::pair<int, int>> fetches;  // (port, fetch index)
};

struct executable {
  std::shared_ptr<const graph> source;
  std::vector<exec_node> nodes;
  std::vector<int> roots;
  int num_slots = 0;
  int num_fetches = 0;
};

// One record of a traced step.
struct node_stats {
  std::string node;
  std::string op;
  std::string device;
  int thread = 0;
  std::int64_t start_ns = 0;  // since the step started
  std::int64_t end_ns = 0;
};

struct step_stats {
  std::vector<node_stats> nodes;
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

struct step_options {
  bool trace = false;
  std::int64_t step_id = 0;
};

class step {
 public:
  step(const executable& x, std::vector<tensor> feeds, const cpu_device& device, resource_manager& resources,
       Eigen::ThreadPoolInterface* inter_op, step_options options)
      : x_(x), feeds_(std::move(feeds)), device_(device), resources_(resources), inter_op_(inter_op),
        options_(options), results_(static_cast<std::size_t>(x.num_fetches)) {
    root_.frame = &root_frame_;
    root_.slots.resize(static_cast<std::size_t>(x.num_slots));
    root_.pending = std::make_unique<std::atomic<int>[]>(x.nodes.size());
    root_.dead_control = std::make_unique<std::atomic<bool>[]>(x.nodes.size());
    for (std::size_t i = 0; i < x.nodes.size(); ++i) {
      root_.pending[i].store(x.nodes[i].pending, std::memory_order_relaxed);
      root_.dead_control[i].store(false, std::memory_order_relaxed);
    }
    start_ = std::chrono::steady_clock::now();
  }

  step(const step&) = delete;
  step& operator=(const step&) = delete;

  // Runs the step to completion on the calling thread plus the inter-op pool. Throws the
  // first error; returns the fetched values otherwise.
  std::vector<tensor> run() {
    if (x_.roots.empty()) return std::move(results_);
    outstanding_.store(static_cast<int>(x_.roots.size()), std::memory_order_relaxed);
    std::deque<tagged_node> ready;
    for (int r : x_.roots) ready.push_back({r, &root_});
    process(std::move(ready));
    {
      std::unique_lock lock(done_mutex_);
      done_cv_.wait(lock, [&] { return done_; });
    }
    if (error_) std::rethrow_exception(error_);
    return std::move(results_);
  }

  // Aborts the step from outside (a user cancellation): running kernels finish, no new
  // node starts, and waiting async kernels are cancelled.
  void cancel() { abort(std::make_exception_ptr(error(error_code::cancelled, "step was cancelled"))); }

  step_stats take_stats() {
    std::lock_guard lock(trace_mutex_);
    return std::move(stats_);
  }

 private:
  struct frame_state;
  struct iteration_state {
    frame_state* frame = nullptr;
    std::vector<entry> slots;
    std::unique_ptr<std::atomic<int>[]> pending;
    std::unique_ptr<std::atomic<bool>[]> dead_control;
  };
  struct frame_state {
    std::string name;  // "" for the root frame
    frame_state* parent = nullptr;
  };
  struct tagged_node {
    int id;
    iteration_state* iter;
  };

  void process(std::deque<tagged_node> inline_ready) {
    std::vector<entry> outputs;
    std::vector<tagged_node> ready;
    while (!inline_ready.empty()) {
      tagged_node tn = inline_ready.front();
      inline_ready.pop_front();
      const exec_node& xn = x_.nodes[static_cast<std::size_t>(tn.id)];
      if (aborted_.load(std::memory_order_acquire)) {
        node_done(1);
        continue;
      }
      std::span<entry> inputs(tn.iter->slots.data() + xn.input_start, static_cast<std::size_t>(xn.num_inputs));
      outputs.assign(static_cast<std::size_t>(xn.num_outputs), entry{});
      bool dead = tn.iter->dead_control[static_cast<std::size_t>(tn.id)].load(std::memory_order_relaxed);
      for (auto& in : inputs) dead = dead || in.dead;

      if (dead) {
        for (auto& o : outputs) o.dead = true;
      } else if (xn.feed >= 0) {
        outputs[0].value = feeds_[static_cast<std::size_t>(xn.feed)];
      } else {
        if (xn.kernel->is_async()) {
          start_async(tn, xn, inputs);
          continue;
        }
        auto t0 = options_.trace ? now_ns() : 0;
        try {
          snapshot_refs(xn, inputs);
          kernel_context ctx(*xn.def, inputs, outputs, device_, resources_, cancellation_, options_.step_id);
          xn.kernel->compute(ctx);
        } catch (...) {
          fail_node(xn, inputs, std::current_exception());
          clear(inputs);
          node_done(1);
          continue;
        }
        if (options_.trace) record(xn, t0);
      }
      clear(inputs);
      ready.clear();
      propagate(tn, xn, outputs, ready);
      schedule(ready, inline_ready);
      node_done(1);
    }
  }

  void start_async(tagged_node tn, const exec_node& xn, std::span<entry> inputs) {
    struct async_state {
      std::vector<entry> outputs;
      std::unique_ptr<kernel_context> ctx;
      std::int64_t t0;
    };
    auto state = std::make_shared<async_state>();
    state->outputs.resize(static_cast<std::size_t>(xn.num_outputs));
    state->t0 = options_.trace ? now_ns() : 0;
    try {
      snapshot_refs(xn, inputs);
    } catch (...) {
      fail_node(xn, inputs, std::current_exception());
      clear(inputs);
      node_done(1);
      return;
    }
    state->ctx = std::make_unique<kernel_context>(*xn.def, inputs, state->outputs, device_, resources_,
                                                  cancellation_, options_.step_id);
    xn.kernel->compute_async(*state->ctx, [this, tn, &xn, state, inputs] {
      if (auto e = state->ctx->error()) {
        fail_node(xn, inputs, e);
        clear(inputs);
        node_done(1);
        return;
      }
      if (options_.trace) record(xn, state->t0);
      clear(inputs);
      std::vector<tagged_node> ready;
      propagate(tn, xn, state->outputs, ready);
      std::deque<tagged_node> inline_ready;
      schedule(ready, inline_ready);
      if (!inline_ready.empty()) process(std::move(inline_ready));
      node_done(1);
    });
  }

  // Non-ref inputs that carry a variable reference read the variable's value now.
  void snapshot_refs(const exec_node& xn, std::span<entry> inputs) {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].ref && !xn.input_is_ref[i]) inputs[i].value = inputs[i].ref->value();
  }

  static void clear(std::span<entry> inputs) {
    for (auto& in : inputs) in = entry{};
  }

  void propagate(tagged_node tn, const exec_node& xn, std::vector<entry>& outputs, std::vector<tagged_node>& ready) {
    iteration_state* it = tn.iter;
    bool any_dead = false;
    for (const auto& o : outputs) any_dead = any_dead || o.dead;
    for (auto [port, index] : xn.fetches) {
      const entry& o = outputs[static_cast<std::size_t>(port)];
      if (o.dead) continue;  // a dead value never reaches a fetch
      try {
        results_[static_cast<std::size_t>(index)] = o.ref && !o.value.valid() ? o.ref->value() : o.value;
      } catch (...) {
        abort(std::current_exception());
      }
    }
    for (const auto& e : xn.out_edges) {
      it->slots[static_cast<std::size_t>(e.dst_slot)] = outputs[static_cast<std::size_t>(e.src_port)];
      if (it->pending[static_cast<std::size_t>(e.dst)].fetch_sub(1, std::memory_order_acq_rel) == 1)
        ready.push_back({e.dst, it});
    }
    for (int c : xn.control_out) {
      if (any_dead) it->dead_control[static_cast<std::size_t>(c)].store(true, std::memory_order_relaxed);
      if (it->pending[static_cast<std::size_t>(c)].fetch_sub(1, std::memory_order_acq_rel) == 1)
        ready.push_back({c, it});
    }
  }

  bool is_cheap(tagged_node tn) const {
    const exec_node& xn = x_.nodes[static_cast<std::size_t>(tn.id)];
    if (xn.cheap) return true;
    std::int64_t elements = 0;
    for (int i = 0; i < xn.num_inputs; ++i)
      elements += tn.iter->slots[static_cast<std::size_t>(xn.input_start + i)].value.num_elements();
    return elements <= 4096;
  }

  void schedule(const std::vector<tagged_node>& ready, std::deque<tagged_node>& inline_ready) {
    if (ready.empty()) return;
    outstanding_.fetch_add(static_cast<int>(ready.size()), std::memory_order_relaxed);
    const tagged_node* keep = nullptr;  // one expensive node stays on this thread
    for (const auto& tn : ready) {
      if (!inter_op_ || is_cheap(tn)) {
        inline_ready.push_back(tn);
      } else if (!keep && inline_ready.empty()) {
        keep = &tn;
      } else {
        inter_op_->Schedule([this, tn] { process(std::deque<tagged_node>{tn}); });
      }
    }
    if (keep) inline_ready.push_back(*keep);
  }

  void node_done(int n) {
    if (outstanding_.fetch_sub(n, std::memory_order_acq_rel) == n) {
      std::lock_guard lock(done_mutex_);
      done_ = true;
      done_cv_.notify_all();
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
      error_ = std::move(e);
    }
    aborted_.store(true, std::memory_order_release);
    cancellation_.cancel();
  }

  std::int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
  }
  void record(const exec_node& xn, std::int64_t t0) {
    node_stats s{xn.def->name(), xn.def->op(), device_.name(), detail::thread_index(), t0, now_ns()};
    std::lock_guard lock(trace_mutex_);
    stats_.nodes.push_back(std::move(s));
  }

  const executable& x_;
  std::vector<tensor> feeds_;
  const cpu_device& device_;
  resource_manager& resources_;
  Eigen::ThreadPoolInterface* inter_op_;
  step_options options_;
  std::vector<tensor> results_;
  frame_state root_frame_;
  iteration_state root_;
  cancellation_manager cancellation_;
  std::atomic<int> outstanding_{0};
  std::atomic<bool> aborted_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
  std::mutex done_mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::chrono::steady_clock::time_point start_;
  std::mutex trace_mutex_;
  step_stats stats_;
};

}  // namespace weft
