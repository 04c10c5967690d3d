/// @file
/// session: run(feeds, fetches, targets) on a graph (whitepaper §2, OSDI §3.3).
///
/// Each distinct signature (fed outputs, fetched outputs, target nodes) is pruned to the
/// nodes the fetches and targets need, with every fed output replaced by the fed value, so
/// both placeholders and intermediate outputs can be fed. The pruned graph, with its
/// kernels, is validated and cached; the nodes that compute the same value at every step
/// (everything they read is constant) are evaluated then, once
/// (graph/passes/constant_folding.hpp), and of nodes equal in op, inputs and attributes only
/// one runs (graph/passes/cse.hpp). Variables live in the session's resource_manager
/// and survive across runs; several threads may call run() at once.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/graph/graph.hpp>
#include <weft/graph/passes/constant_folding.hpp>
#include <weft/graph/passes/cse.hpp>
#include <weft/graph/passes/fuse_matmul.hpp>
#include <weft/graph/passes/fuse_conv.hpp>
#include <weft/graph/passes/placement.hpp>
#include <weft/graph/passes/prune.hpp>
#include <weft/runtime/device.hpp>
#include <weft/runtime/executor.hpp>
#include <weft/runtime/kernel.hpp>
#include <weft/runtime/partition.hpp>
#include <weft/runtime/resource.hpp>

namespace weft {

/// How a session runs its graph: threads, devices, placement, transfers, memory and the
/// graph passes applied when a signature's executable is built (docs/runtime.md).
struct session_options {
  /// The thread that calls run() works beside the inter-op pool's threads (it runs nodes the
  /// pool has not taken yet), so a step has inter_op_threads + 1 threads for nodes that can
  /// run at once: by default one per core. 0: the calling thread runs every node.
  int inter_op_threads = default_thread_count() - 1;
  int intra_op_threads = default_thread_count();  ///< per CPU device
  /// The session's CPU devices, /job:localhost/replica:0/task:0/device:CPU:0 to CPU:<n-1>,
  /// each with its own intra-op threads and allocator.
  int cpu_devices = 1;
  /// Devices of other types, by type: {"GPU", 1} gives the session GPU:0 (when a program has
  /// the GPU's factory: weft/cuda/device.hpp), -1 every one the machine has. They come after
  /// the CPU devices, in the order of their types' names; asking for more than the machine
  /// has is an error that says why it has fewer.
  std::map<std::string, int> device_count;
  /// Where each node runs (graph/passes/placement.hpp), decided when a signature's executable
  /// is built: placer::rules (the default, TensorFlow's) puts a node on the device it requests
  /// (node_options::on, device_scope), with the nodes colocated with it (a variable with the
  /// ops that update it), else on CPU:0; placer::greedy simulates the step with the cost model
  /// and puts each unconstrained node where it would finish first. A request no device
  /// matches, or whose devices have no kernel for the node, is an error naming the node
  /// unless `soft` is set.
  passes::placement_options placement{.algorithm = passes::placer::rules};
  /// The devices as the cost model sees them, by index (the names are the session's own;
  /// empty: measured when the greedy placer places on several devices (measured_device_spec),
  /// else default_device_spec for each), and the link between any two of them (unset:
  /// measured when the greedy placer or alap Recv scheduling uses several devices
  /// (measured_link), else passes::link_spec's defaults).
  std::vector<passes::device_spec> device_specs;
  std::optional<passes::link_spec> link;  ///< see device_specs
  /// Lossy transfers (whitepaper §5.5): float32 tensors cross between devices as bfloat16,
  /// their top 16 bits, and are zero-filled back: every float32 transfer when set, else those
  /// of the outputs named in lossy_outputs ("node" or "node:port").
  bool lossy_transfers = false;
  std::vector<std::string> lossy_outputs;  ///< see lossy_transfers
  /// Whether a Recv copies its value into its own device's memory, as between devices of
  /// separate memory spaces (a GPU's Recv always does; CPU devices of separate NUMA nodes
  /// gain from it). Off: a CPU device's Recv hands on the sending device's buffer.
  bool copy_transfers = false;
  /// When Recvs take their values (whitepaper §5.2): as soon as they are sent (asap), or as
  /// late as the placement's simulated step allows (alap: a control edge from the node of the
  /// Recv's device simulated to finish last before the value is needed), so that a copying
  /// transfer holds the receiving device's memory only shortly before it is used.
  enum class recv_order { asap, alap } recv_scheduling = recv_order::asap;  ///< see recv_order
  std::shared_ptr<resource_manager> resources;    ///< null: a fresh one for this session
  /// The most bytes the tensors this session's kernels allocate on each device may hold at
  /// once; past it a step fails with resource_exhausted naming the node (0: no limit but the
  /// machine's).
  std::size_t memory_limit_bytes = 0;
  /// Constant folding when a signature's executable is built (max_bytes 0: off).
  passes::constant_folding_options constant_folding;
  /// Common subexpression elimination when a signature's executable is built: of the nodes
  /// equal in op, inputs, attributes, device, colocation and control inputs, one runs and
  /// the others' consumers, fetches and targets read it (graph/passes/cse.hpp).
  bool eliminate_common_subexpressions = true;
  /// Folding into a float or bfloat16 MatMul what alone reads its product, when a signature's
  /// executable is built, on the session's own copy of the graph, where the fused kernel is
  /// registered for every device type of the session (graph/passes/fuse_matmul.hpp): the
  /// BiasAdd and Relu after it, or the ReluGrad that reads it, applied in the product's
  /// output pass, and a weight's gradient-descent step, one GEMM that adds -rate * x^T dz
  /// into the variable (the gradient is neither written nor read back), or mixed
  /// precision's Adam step on a bfloat16 product's float sums. Results
  /// differ from the unfused graph by rounding only (the ReluGrad's, not at all). The same
  /// switch folds a convolution layer's nodes (graph/passes/fuse_conv.hpp): the BiasAdd and
  /// Relu after a Conv2D into _FusedConv2DBiasAdd, and the ReluGrad after a MaxPoolGrad
  /// that alone reads it into _FusedMaxPoolGradReluGrad, with the same bits in float32.
  bool fuse_matmul = true;
};

/// Options of one run: tracing, a deadline, cancellation.
struct run_options {
  bool trace = false;  ///< fill run_metadata::stats with per-node timings
  /// The run fails with deadline_exceeded once it has run this long (zero: no limit): no
  /// node starts after that, and waiting async kernels (a blocked Dequeue or Enqueue, a
  /// Recv) are cancelled; a kernel already running finishes first.
  std::chrono::milliseconds timeout{0};
  /// Cancelling this from any thread fails the run with cancelled, as a timeout does; one
  /// cancelled before the run starts fails it at once. Either leaves the queues it waited
  /// on as they were and the session usable.
  cancellation_manager* cancellation = nullptr;
};

/// What a run reports besides its fetches (session::run's last argument).
struct run_metadata {
  step_stats stats;  ///< each node's device, thread, times and outputs (tools/timeline.hpp writes them)
};

/// Names an output ("x", "x:1") or a node, by name or by handle.
class endpoint {
 public:
  endpoint(const char* name) : name_(name) {}          ///< "node" (its output 0, or the node as a target) or "node:port"
  endpoint(std::string name) : name_(std::move(name)) {}  ///< as the const char* form
  endpoint(output o) : output_(o) {}                     ///< an output by handle
  endpoint(const node& n) : output_(output{n.id(), 0}) {}  ///< a node: its output 0, or the node as a target

  /// The output this endpoint names, as a fetch or a feed.
  output resolve(const graph& g) const {
    if (output_.node < 0) return g.resolve(name_);
    return node_in(g).out(output_.port);  // checks the port exists
  }

  /// The node this endpoint names, as a target: a node with no outputs (NoOp, Assign's
  /// control-only uses) is a valid target, so no port is checked.
  int resolve_node(const graph& g) const {
    if (output_.node >= 0) return node_in(g).id();
    if (const node* n = g.find(name_)) return n->id();
    return g.resolve(name_).node;  // "name:port", or the not-found error
  }

 private:
  /// The node a handle names; a handle past the end of `g` comes from a node added to the
  /// graph after the session copied it.
  const node& node_in(const graph& g) const {
    if (output_.node >= g.size())
      fail(error_code::not_found, "node handle ", output_.node, " is not in the session's graph of ", g.size(),
           " nodes: a node added after the session was created needs session::extend(graph)");
    return g.at(output_.node);
  }

  std::string name_;
  output output_{};
};

/// Values fed to a run in place of outputs: (output, tensor) pairs.
using feed_list = std::vector<std::pair<endpoint, tensor>>;

/// Runs a graph (whitepaper §3): each distinct (feeds, fetches, targets) signature is pruned,
/// placed, partitioned by device and optimized once into a cached executable; run() then
/// executes it. Variables and queues live in the session's resources across runs. run() may
/// be called from several threads at once.
class session {
 public:
  /// A session over a copy of g, with `options`' threads and devices.
  explicit session(const graph& g, session_options options = {});
  /// Releases the devices, threads and cached executables (no run may be in progress).
  ~session();

  /// Replaces the graph with `g`, which must extend the current one (same nodes first).
  void extend(const graph& g) {
    std::lock_guard lock(mutex_);
    if (g.size() < graph_->size())
      fail(error_code::invalid_argument, "session::extend: the new graph has fewer nodes (", g.size(), " < ",
           graph_->size(), ")");
    for (int i = 0; i < graph_->size(); ++i)
      if (g.at(i).name() != graph_->at(i).name() || g.at(i).op() != graph_->at(i).op())
        fail(error_code::invalid_argument, "session::extend: node ", i, " changed ('", graph_->at(i).name(),
             "' became '", g.at(i).name(), "')");
    graph_ = std::make_shared<const graph>(g);
    cache_.clear();
  }

  /// The figures the cost model assumes for a CPU device with `threads` intra-op threads:
  /// 50 GFLOP/s and 10 GB/s a thread (memory up to 40 GB/s), 2 us a node.
  /// Other devices give their own (device::speed()).
  static passes::device_spec default_device_spec(const weft::device& d) {
    if (const auto v = d.speed()) return {d.name(), v->flops_per_second, v->memory_bytes_per_second, v->node_overhead_seconds};
    const double threads = d.num_threads();
    return {d.name(), 50e9 * threads, std::min(10e9 * threads, 40e9), 2e-6};
  }

  /// Runs one step: feeds replace their outputs' values, the fetched outputs' values are
  /// returned in order, and targets (and the fetches) run with everything they depend on.
  /// A failing node fails the step with a weft::error naming it, and the session stays
  /// usable. `metadata` (or options.trace) records per-node stats.
  std::vector<tensor> run(const feed_list& feeds, const std::vector<endpoint>& fetches,
                          const std::vector<endpoint>& targets = {}, const run_options& options = {},
                          run_metadata* metadata = nullptr) {
    auto x = prepare(feeds, fetches, targets);
    const bool trace = options.trace || metadata;
    if (feeds.empty()) return execute(*x, x->constants, inter_op_.get(), trace, metadata, &options);
    std::vector<tensor> feed_values;  // the feeds, then the folded constants (exec_node::feed)
    feed_values.reserve(feeds.size() + x->constants.size());
    for (const auto& f : feeds) feed_values.push_back(f.second);
    feed_values.insert(feed_values.end(), x->constants.begin(), x->constants.end());
    return execute(*x, feed_values, inter_op_.get(), trace, metadata, &options);
  }

  /// Runs targets only.
  void run(const std::vector<endpoint>& targets) { run({}, {}, targets); }

  /// Where the run (feeds, fetches, targets) places each node it runs, with the simulated
  /// times (passes::placement::report() prints them); builds the run's executable when it is
  /// not cached yet. The feeds' shapes refine the cost model's.
  std::shared_ptr<const passes::placement> placement(const feed_list& feeds, const std::vector<endpoint>& fetches,
                                                     const std::vector<endpoint>& targets = {}) {
    return prepare(feeds, fetches, targets)->placement;
  }

  /// Measured node times for the cost model, from a traced step's stats (run_options::trace):
  /// each node's time on its device's type (the mean of its runs in the step, for a node in a
  /// loop), replacing the estimate and earlier records; the executables built so far are
  /// dropped, so that each signature is placed again with them on its next run.
  void record_costs(const step_stats& stats) {
    std::shared_ptr<const graph> g;
    {
      std::lock_guard lock(mutex_);
      g = graph_;
    }
    std::map<std::string, std::pair<double, int>> sums;  // by cost_model::measured_key
    for (const auto& st : stats.nodes) {
      if (st.op == "_Send" || st.op == "_Recv") continue;  // transfers between partitions, not nodes
      std::string type;
      for (const auto& d : devices_)
        if (d->name() == st.device) type = d->type();
      if (type.empty())
        fail(error_code::invalid_argument, "session::record_costs: node '", st.node, "' ran on '", st.device,
             "', which is not a device of this session");
      if (!g->find(st.node))
        fail(error_code::not_found, "session::record_costs: no node named '", st.node, "' in the session's graph");
      auto& [sum, count] = sums[passes::cost_model::measured_key(st.node, type)];
      sum += static_cast<double>(st.end_ns - st.start_ns) * 1e-9;
      ++count;
    }
    std::lock_guard lock(mutex_);
    for (const auto& [key, value] : sums) measured_[key] = value.first / value.second;
    cache_.clear();
  }

  /// Runs a step that fetches one output and returns its value.
  tensor run_one(const feed_list& feeds, const endpoint& fetch) { return run(feeds, {fetch}).at(0); }

  /// The session's graph (its copy of the one it was made with).
  const graph& current_graph() const {
    std::lock_guard lock(mutex_);
    return *graph_;
  }
  /// The session's variables, queues and readers (session_options::resources, or its own).
  resource_manager& resources() const noexcept { return *resources_; }
  /// The default device (CPU:0), and every device of the session.
  const weft::device& device() const noexcept { return *devices_.front(); }
  std::span<const weft::device* const> devices() const noexcept { return device_ptrs_; }  ///< see device()
  /// The session's devices as the cost model sees them (session_options::device_specs, or
  /// measured, or the defaults) and the links between them.
  const passes::cluster& cluster() const noexcept { return cluster_; }
  /// How many signatures have a cached executable (each new one is built on its first run).
  std::size_t cached_executables() const {
    std::lock_guard lock(mutex_);
    return cache_.size();
  }

 private:
  using signature = std::tuple<std::vector<output>, std::vector<output>, std::vector<int>>;

  std::shared_ptr<const executable> prepare(const feed_list& feeds, const std::vector<endpoint>& fetches,
                                            const std::vector<endpoint>& targets);

  std::shared_ptr<const executable> build(const std::shared_ptr<const graph>& source, const std::vector<output>& user_fed,
                                          const std::vector<output>& fetched, const std::vector<int>& targets,
                                          const std::vector<std::pair<output, shape>>& fed_shapes, bool fold = true) {
    auto x = std::make_shared<executable>();
    x->source = source;
    // Updates folded into their products run on a copy of the graph with the same ids.
    std::shared_ptr<const graph> g = source;
    if (fuse_matmul_) {
      // Each fold where the fused op's kernel of the product's dtype is registered for every
      // device type of the session: wherever the placer puts the fused node, it runs.
      const auto registered = [&](auto found, const char* op) {
        std::erase_if(found, [&](const auto& f) { return !registered_everywhere(op, g->at(f.matmul).template attr<dtype>("T")); });
        return found;
      };
      auto u = registered(passes::fusable_updates(*g, user_fed, fetched, targets), ops::fused_matmul_gradient_descent_op);
      auto b = registered(passes::fusable_biases(*g, user_fed, fetched, targets), ops::fused_matmul_bias_add_op);
      auto r = registered(passes::fusable_relu_grads(*g, user_fed, fetched, targets), ops::fused_matmul_relu_grad_op);
      auto convs = registered(passes::fusable_conv_biases(*g, user_fed, fetched, targets), ops::fused_conv2d_bias_add_op);
      auto pools = passes::fusable_pool_relu_grads(*g, user_fed, fetched, targets);
      std::erase_if(pools, [&](const passes::fusable_pool_relu_grad& f) {
        return !registered_everywhere(ops::fused_max_pool_grad_relu_grad_op, g->at(f.relu_grad).attr<dtype>("T"));
      });
      // Mixed precision's Adam steps (float32 state, a bfloat16 product): the kernel of float32.
      auto adams = registered_everywhere(ops::fused_matmul_adam_op, dtype::float32)
                       ? passes::fusable_adams(*g, user_fed, fetched, targets)
                       : std::vector<passes::fusable_adam>{};
      if (!u.empty() || !b.empty() || !r.empty() || !adams.empty() || !convs.empty() || !pools.empty()) {
        auto copy = std::make_shared<graph>(*g);
        passes::fuse_updates(*copy, u);
        passes::fuse_adams(*copy, adams);
        passes::fuse_biases(*copy, b);
        passes::fuse_relu_grads(*copy, r);
        passes::fuse_conv_biases(*copy, convs);
        passes::fuse_pool_relu_grads(*copy, pools);
        x->rewritten = g = std::move(copy);
      }
    }
    std::vector<output> fed = user_fed;  // the run's feeds, then the folded outputs
    // Nodes with a fed output, so that most inputs are told apart without searching `fed`.
    std::vector<char> has_fed(static_cast<std::size_t>(g->size()), 0);
    for (output o : fed) has_fed[static_cast<std::size_t>(o.node)] = 1;
    auto is_fed = [&](output o) {
      return has_fed[static_cast<std::size_t>(o.node)] && std::find(fed.begin(), fed.end(), o) != fed.end();
    };
    // Prune: walk back from fetches and targets, stopping at fed outputs.
    std::vector<bool> needed;
    auto prune = [&] { needed = passes::prune(*g, fetched, targets, is_fed); };
    prune();
    // Constant folding: the outputs every step would compute alike are computed now, with
    // the kernels of a step of their own, and fed to every step. When that step fails, nothing
    // folds, and the signature's own steps report the error, naming the node.
    if (fold && folding_.max_bytes > 0) {
      const auto plan = passes::plan_constant_folding(*g, needed, fed, fetched, folding_);
      if (!plan.outputs.empty()) {
        try {
          auto sub = build(g, {}, plan.outputs, {}, {}, false);
          x->constants = execute(*sub, {}, nullptr, false, nullptr);  // one value per planned output
        } catch (const std::exception&) {
          x->constants.clear();
        }
        if (!x->constants.empty()) {
          fed.insert(fed.end(), plan.outputs.begin(), plan.outputs.end());
          for (output o : plan.outputs) has_fed[static_cast<std::size_t>(o.node)] = 1;
          prune();
        }
      }
    }

    // CSE: one node of each class of equal needed nodes runs, standing for the others. Nodes
    // with fed (or folded) outputs stand for themselves.
    std::vector<int> rep;
    if (cse_) {
      rep = passes::common_subexpressions(*g, needed, is_fed);
      needed = passes::prune(*g, fetched, targets, is_fed, rep);
    }
    auto stand_in = [&](int id) { return rep.empty() ? id : rep[static_cast<std::size_t>(id)]; };

    // Placement: a device for every needed node.
    passes::cost_model costs(*g, fed_shapes);
    {
      {
        std::lock_guard lock(mutex_);
        costs.set_measured(measured_);
      }
      const auto kernels = [](const node& n, const std::string& device_type) {
        return kernel_registry::global().missing(n, device_type);
      };
      x->placement = std::make_shared<const passes::placement>(
          passes::place(*g, needed, cluster_, costs, kernels, placement_, is_fed, rep));
    }

    // Exec nodes: one per fed output, then the needed graph nodes in id (topological) order.
    std::vector<int> exec_of(static_cast<std::size_t>(g->size()), -1);
    int num_slots = 0;  // numbered over the whole executable here; finish_executable numbers them per frame
    for (std::size_t f = 0; f < fed.size(); ++f) {
      exec_node xn;
      xn.feed = static_cast<int>(f);
      xn.num_outputs = 1;
      xn.cheap = true;
      x->nodes.push_back(std::move(xn));
    }
    for (int id = 0; id < g->size(); ++id) {
      if (!needed[static_cast<std::size_t>(id)]) continue;
      const node& n = g->at(id);
      if (n.def().feed) {
        std::string fetch_names;
        for (auto o : fetched) fetch_names += (fetch_names.empty() ? "" : ", ") + g->name_of(o);
        fail(error_code::invalid_argument, n.describe(), ": must be fed a ", n.output_dtype(0), n.output_shape(0),
             " value (needed by ", fetch_names.empty() ? std::string("the targets") : "fetch " + fetch_names, ")");
      }
      exec_node xn;
      xn.def = &n;
      xn.device = x->placement->device_of[static_cast<std::size_t>(id)];
      const std::string device_type = devices_[static_cast<std::size_t>(xn.device)]->type();
      if (n.def().control != flow::plain) {
        // The executor runs the control-flow ops itself.
      } else if (n.def().stateful) {
        // One kernel per stateful node per session (a random op's stream continues across
        // signatures); by op too, as a fused update has the name of the update it replaces.
        std::lock_guard lock(mutex_);
        auto& k = stateful_kernels_[n.name() + ':' + n.op()];
        if (!k) k = kernel_registry::global().create(n, device_type);
        xn.kernel = k;
      } else {
        xn.kernel = kernel_registry::global().create(n, device_type);
      }
      xn.num_inputs = n.num_inputs();
      xn.num_outputs = n.num_outputs();
      xn.cheap = n.def().cheap;
      xn.runs_on_dead_value = n.def().runs_on_dead_value;
      for (int i = 0; i < n.num_inputs(); ++i) xn.input_is_ref.push_back(n.input_is_ref(i));
      xn.input_start = num_slots;
      num_slots += n.num_inputs();
      exec_of[static_cast<std::size_t>(id)] = static_cast<int>(x->nodes.size());
      x->nodes.push_back(std::move(xn));
    }
    auto source_of = [&](output o) -> std::pair<int, int> {
      o.node = stand_in(o.node);
      if (auto it = std::find(fed.begin(), fed.end(), o); it != fed.end())
        return {static_cast<int>(it - fed.begin()), 0};
      return {exec_of[static_cast<std::size_t>(o.node)], o.port};
    };
    for (auto& xn : x->nodes) {
      if (!xn.def) continue;
      int self = static_cast<int>(&xn - x->nodes.data());
      for (int i = 0; i < xn.num_inputs; ++i) {
        auto [src, port] = source_of(xn.def->inputs()[static_cast<std::size_t>(i)]);
        x->nodes[static_cast<std::size_t>(src)].out_edges.push_back({port, self, xn.input_start + i});
        ++xn.pending;
      }
      for (int c : xn.def->control_inputs()) {
        x->nodes[static_cast<std::size_t>(exec_of[static_cast<std::size_t>(stand_in(c))])].control_out.push_back(self);
        ++xn.pending;
      }
    }
    for (std::size_t k = 0; k < fetched.size(); ++k) {
      auto [src, port] = source_of(fetched[k]);
      x->nodes[static_cast<std::size_t>(src)].fetches.emplace_back(port, static_cast<int>(k));
    }
    x->num_fetches = static_cast<int>(fetched.size());
    x->feeds = std::move(fed);
    if (recv_scheduling_ == session_options::recv_order::alap && cluster_.size() > 1) {
      const auto alap = recv_schedule_of(*x, costs, exec_of);
      x->partitions = partition(*x, device_names_, lossy_, &alap);
    } else {
      x->partitions = partition(*x, device_names_, lossy_);  // none when one device runs every node
    }
    if (x->partitions.empty()) {
      // One device runs every node: the feed nodes are its too, so that a device of its own
      // memory gets its feeds copied in.
      int only = -1;
      for (const auto& xn : x->nodes)
        if (xn.def) {
          only = xn.device;
          break;
        }
      if (only > 0)
        for (auto& xn : x->nodes)
          if (!xn.def) xn.device = only;
    }
    finish_executable(*x);
    return x;
  }

  /// Whether op's kernel of T = t is registered for every device type of the session: a
  /// session folds into a fused op (graph/passes/fuse_matmul.hpp, fuse_conv.hpp) only then
  /// (the CPU and the GPU have them all, for the dtypes each registers).
  bool registered_everywhere(const char* op, dtype t) const {
    return std::all_of(devices_.begin(), devices_.end(),
                       [&](const auto& d) { return kernel_registry::global().has(op, d->type(), {"T", t}); });
  }

  /// The placement's simulated times by exec node (fed values at 0) and the cluster's
  /// transfer times, for as-late-as-possible Recvs.
  recv_schedule recv_schedule_of(const executable& x, const passes::cost_model& costs, const std::vector<int>& exec_of) const {
    recv_schedule r;
    const auto n = x.nodes.size();
    r.start.assign(n, 0.0), r.finish.assign(n, 0.0);
    for (const auto& p : x.placement->nodes)
      if (const int e = exec_of[static_cast<std::size_t>(p.node)]; e >= 0)
        r.start[static_cast<std::size_t>(e)] = p.start, r.finish[static_cast<std::size_t>(e)] = p.finish;
    r.transfer_seconds = [&x, &costs, this](int src, int port, int to) {
      const exec_node& u = x.nodes[static_cast<std::size_t>(src)];
      return cluster_.transfer_seconds(costs.output_bytes(output{u.def->id(), port}), u.device, to);
    };
    return r;
  }

  /// One step of x: its partitions' steps together (step::run_partitions), or x's own.
  std::vector<tensor> execute(const executable& x, std::span<const tensor> feed_values, Eigen::ThreadPoolInterface* inter_op,
                              bool trace, run_metadata* metadata, const run_options* options = nullptr);

  /// What stops a run from outside: the caller's cancellation and the timeout, wired to one
  /// run_stopper, and unwired when the run ends (the callbacks hold the stopper, so one that
  /// fires late finds nothing attached).
  struct stop_hooks {
    std::shared_ptr<run_stopper> stopper;
    cancellation_manager* cancellation = nullptr;
    cancellation_manager::token token = 0;
    deadline_timer* timer = nullptr;
    deadline_timer::id timeout = 0;
    stop_hooks() = default;
    stop_hooks(const stop_hooks&) = delete;
    stop_hooks& operator=(const stop_hooks&) = delete;
    ~stop_hooks() {
      if (token) cancellation->deregister(token);
      if (timeout) timer->remove(timeout);
    }
  };
  void arm(stop_hooks& h, const run_options* o) {
    if (!o || (!o->cancellation && o->timeout.count() <= 0)) return;
    h.stopper = std::make_shared<run_stopper>();
    if (o->cancellation) {
      h.cancellation = o->cancellation;
      h.token = o->cancellation->register_callback([s = h.stopper] {
        s->stop(error_code::cancelled, "the run was cancelled (run_options::cancellation)");
      });
      if (h.token == 0) fail(error_code::cancelled, "the run was cancelled before it started (run_options::cancellation)");
    }
    if (o->timeout.count() > 0) {
      h.timer = &timer();
      h.timeout = h.timer->add(std::chrono::steady_clock::now() + o->timeout, [s = h.stopper, ms = o->timeout.count()] {
        s->stop(error_code::deadline_exceeded, "the run timed out after " + std::to_string(ms) + " ms (run_options::timeout)");
      });
    }
  }
  /// The session's timer thread, started by the first run with a timeout.
  deadline_timer& timer() {
    std::call_once(timer_started_, [this] { timer_ = std::make_unique<deadline_timer>(); });
    return *timer_;
  }

  static std::vector<std::unique_ptr<weft::device>> make_devices(const session_options& o) {
    if (o.cpu_devices < 1)
      fail(error_code::invalid_argument, "session_options::cpu_devices must be at least 1, got ", o.cpu_devices);
    std::vector<std::unique_ptr<weft::device>> out;
    for (int i = 0; i < o.cpu_devices; ++i)
      out.push_back(std::make_unique<cpu_device>(std::max(1, o.intra_op_threads), i, o.memory_limit_bytes));
    for (const auto& [type, wanted] : o.device_count) {
      if (type == "CPU")
        fail(error_code::invalid_argument, "session_options::device_count: the CPU devices are set by cpu_devices");
      if (wanted < -1)
        fail(error_code::invalid_argument, "session_options::device_count: ", wanted, " ", type, " devices asked for");
      if (wanted == 0) continue;
      const device_factory f = device_factory_registry::global().find(type);
      const device_factory::availability a = f.available();
      if (wanted > a.count)
        fail(error_code::not_found, "session_options::device_count asks for ", wanted, " ", type, " device",
             wanted == 1 ? "" : "s", "; this machine has ", a.count, a.why_none.empty() ? "" : " (", a.why_none,
             a.why_none.empty() ? "" : ")");
      for (int i = 0; i < (wanted < 0 ? a.count : wanted); ++i)
        out.push_back(f.create(i, std::max(1, o.intra_op_threads), o.memory_limit_bytes));
    }
    return out;
  }
  static passes::cluster make_cluster(const std::vector<std::unique_ptr<weft::device>>& devices,
                                      const session_options& o) {
    if (!o.device_specs.empty() && o.device_specs.size() != devices.size())
      fail(error_code::invalid_argument, "session_options::device_specs has ", o.device_specs.size(),
           " entries for the session's ", devices.size(), " devices");
    // The greedy placer on several devices measures them (one probe per thread count).
    const bool measure = o.device_specs.empty() && o.placement.algorithm == passes::placer::greedy && devices.size() > 1;
    std::map<int, passes::device_spec> measured;
    std::vector<passes::device_spec> specs;
    for (std::size_t i = 0; i < devices.size(); ++i) {
      passes::device_spec s;
      if (!o.device_specs.empty()) s = o.device_specs[i];
      else if (!measure || devices[i]->speed()) s = default_device_spec(*devices[i]);
      else {
        auto [it, fresh] = measured.try_emplace(devices[i]->num_threads());
        if (fresh) it->second = measured_device_spec(*devices[i]);
        s = it->second;
      }
      s.name = devices[i]->name();
      specs.push_back(std::move(s));
    }
    passes::link_spec link;
    if (o.link) link = *o.link;
    else if (devices.size() > 1 && (o.placement.algorithm == passes::placer::greedy || o.recv_scheduling == session_options::recv_order::alap))
      link = measured_link(*devices[1], o.copy_transfers || devices[1]->separate_memory());
    return passes::cluster(std::move(specs), link);
  }
  /// The link between two CPU devices, measured with the registry's Neg kernel (the
  /// defaults where there is none): the latency, one transfer's share of the time chains of
  /// scalar Negs alternating between two CPU devices take beyond the same chains on one,
  /// the chains of 8 and 72 nodes told apart so that a step's start and end cancel (best of
  /// eleven runs each, about 3 ms in all; at least 0.1 us); the bandwidth unlimited when a Recv hands on the
  /// sender's buffer, else the best of three copies of 4 MiB into the receiving device.
  static passes::link_spec measured_link(const weft::device& receiver, bool copying) {
    passes::link_spec link;
    if (copying) {
      const tensor from = tensor::filled(shape{std::int64_t{1} << 20}, 1.0f);
      link.bytes_per_second = 4.0 * (1 << 20) / best_seconds(3, [&] { receiver.copy_from_host(from); });
    } else {
      link.bytes_per_second = std::numeric_limits<double>::infinity();
    }
    if (!op_registry::global().find("Neg") || !kernel_registry::global().has("Neg", "CPU")) return link;
    try {
      graph g;
      const node& x = g.placeholder(dtype::float32, partial_shape{}, "x");
      const node* ends[2][2] = {};  // [crossing][long]
      for (int crossing = 0; crossing < 2; ++crossing)
        for (int length : {8, 72}) {
          output v = x;
          for (int i = 0; i < length; ++i) v = g.op("Neg", {v}, {}, node_options().on(crossing && i % 2 ? "/cpu:1" : "/cpu:0"));
          ends[crossing][length == 72] = &g.at(v.node);
        }
      session_options o;
      o.cpu_devices = 2;
      o.intra_op_threads = 1;
      o.inter_op_threads = 0;
      o.constant_folding.max_bytes = 0;
      session probe(g, o);
      const feed_list feeds{{x, tensor::scalar(1.0f)}};
      double best[2][2];
      for (int crossing = 0; crossing < 2; ++crossing)
        for (int longer = 0; longer < 2; ++longer) {
          const node& end = *ends[crossing][longer];
          probe.run(feeds, {end});
          best[crossing][longer] = best_seconds(11, [&] { probe.run(feeds, {end}); });
        }
      const double extra = (best[1][1] - best[0][1]) - (best[1][0] - best[0][0]);
      link.latency_seconds = std::max(extra / 64, 1e-7);
    } catch (const std::exception&) {
      // Keep the default latency: a probe that cannot run says nothing of the link.
    }
    return link;
  }
  /// The shortest of `runs` calls of f, in seconds (the session's probes of its devices).
  template <class F>
  static double best_seconds(int runs, F&& f) {
    double best = std::numeric_limits<double>::infinity();
    for (int k = 0; k < runs; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  }
  /// A CPU device's figures measured: the best of three runs of a 256x256x256 float MatMul
  /// (its arithmetic rate) and of a Neg of 4 MiB (its memory bandwidth: 8 MiB moved), with
  /// the registry's kernels, in a session of one such device; default_device_spec's figures
  /// where the program registered no such kernel. About 2 ms.
  static passes::device_spec measured_device_spec(const weft::device& d) {
    passes::device_spec spec = default_device_spec(d);
    for (const char* op : {"MatMul", "Neg"})
      if (!op_registry::global().find(op) || !kernel_registry::global().has(op, "CPU")) return spec;
    try {
      graph g;
      const node& a = g.constant(tensor::filled(shape{256, 256}, 0.5f));
      const node& product = g.op("MatMul", {a, a});
      const node& big = g.constant(tensor::filled(shape{std::int64_t{1} << 20}, 1.0f));
      const node& negated = g.op("Neg", {big});
      session_options o;
      o.intra_op_threads = d.num_threads();
      o.inter_op_threads = 0;
      o.constant_folding.max_bytes = 0;
      session probe(g, o);
      auto best = [&](const node& n) {
        probe.run({}, {n});
        return best_seconds(3, [&] { probe.run({}, {n}); });
      };
      spec.flops_per_second = 2.0 * 256 * 256 * 256 / best(product);
      spec.memory_bytes_per_second = 2.0 * 4 * (1 << 20) / best(negated);
    } catch (const std::exception&) {
      // Keep the defaults: a probe that cannot run says nothing of the device.
    }
    return spec;
  }
  /// session_options' lossy transfers as a test on outputs (checked against the graph as
  /// each executable is built: a name no node has is an error).
  std::function<bool(output)> lossy_rule(const session_options& o) const {
    if (o.lossy_transfers) return [](output) { return true; };
    if (o.lossy_outputs.empty()) return {};
    std::vector<output> named;
    for (const auto& name : o.lossy_outputs) {
      try {
        named.push_back(graph_->resolve(name));
      } catch (const error& e) {
        fail(error_code::invalid_argument, "session_options::lossy_outputs: ", e.what());
      }
    }
    return [named](output o) { return std::find(named.begin(), named.end(), o) != named.end(); };
  }
  static std::vector<std::unique_ptr<Eigen::ThreadPool>> driver_threads(int devices) {
    std::vector<std::unique_ptr<Eigen::ThreadPool>> out(static_cast<std::size_t>(std::max(devices, 1)));
    for (std::size_t d = 1; d < out.size(); ++d) out[d] = std::make_unique<Eigen::ThreadPool>(1, false);
    return out;
  }
  static std::vector<std::string> short_names(const passes::cluster& c) {
    std::vector<std::string> out;
    for (int i = 0; i < c.size(); ++i) out.push_back(c.short_name(i));
    return out;
  }
  static std::vector<const weft::device*> pointers(const std::vector<std::unique_ptr<weft::device>>& devices) {
    std::vector<const weft::device*> out;
    for (const auto& d : devices) out.push_back(d.get());
    return out;
  }

  mutable std::mutex mutex_;
  std::shared_ptr<const graph> graph_;
  std::shared_ptr<resource_manager> resources_;
  std::vector<std::unique_ptr<weft::device>> devices_;
  std::vector<const weft::device*> device_ptrs_;
  std::unique_ptr<Eigen::ThreadPool> inter_op_;
  /// A thread per device (but the first: the calling thread drives a run's first partition)
  /// that drives the device's partition of each partitioned step.
  std::vector<std::unique_ptr<Eigen::ThreadPool>> device_threads_;
  passes::cluster cluster_;
  std::vector<std::string> device_names_;  ///< short: CPU:0
  std::function<bool(output)> lossy_;      ///< which float32 outputs cross devices as bfloat16
  bool copy_transfers_;
  session_options::recv_order recv_scheduling_;
  passes::placement_options placement_;
  passes::cost_model::measured_times measured_;  ///< record_costs' node times
  passes::constant_folding_options folding_;
  bool cse_;
  bool fuse_matmul_;
  std::map<signature, std::shared_ptr<const executable>> cache_;  ///< looked up without a copy of the key
  std::map<std::string, std::shared_ptr<op_kernel>> stateful_kernels_;
  std::atomic<std::int64_t> next_step_id_{1};
  std::once_flag timer_started_;
  std::unique_ptr<deadline_timer> timer_;  ///< runs' timeouts
};


#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
// The session's constructor and destructor and the two functions that build and run a
// signature's executable, which reach the executor, placement, partitioning and the graph
// passes: declared only where WEFT_PREBUILT_RUNTIME is defined (core/prebuilt.hpp).

WEFT_DETAIL_RUNTIME_INLINE session::session(const graph& g, session_options options)
    : graph_(std::make_shared<const graph>(g)),
      resources_(options.resources ? options.resources : std::make_shared<resource_manager>()),
      devices_(make_devices(options)),
      device_ptrs_(pointers(devices_)),
      // Without spinning: an idle inter-op thread that spins takes a core from the
      // kernels' intra-op threads (the calling thread runs most nodes).
      inter_op_(options.inter_op_threads > 0 ? std::make_unique<Eigen::ThreadPool>(options.inter_op_threads, false)
                                             : nullptr),
      device_threads_(driver_threads(static_cast<int>(devices_.size()))),
      cluster_(make_cluster(devices_, options)),
      device_names_(short_names(cluster_)),
      lossy_(lossy_rule(options)),
      copy_transfers_(options.copy_transfers),
      recv_scheduling_(options.recv_scheduling),
      placement_(options.placement),
      folding_(options.constant_folding),
      cse_(options.eliminate_common_subexpressions),
      fuse_matmul_(options.fuse_matmul) {}

WEFT_DETAIL_RUNTIME_INLINE session::~session() = default;

WEFT_DETAIL_RUNTIME_INLINE std::shared_ptr<const executable> session::prepare(const feed_list& feeds,
                                                                           const std::vector<endpoint>& fetches,
                                                                           const std::vector<endpoint>& targets) {
  std::shared_ptr<const graph> g;
  {
    std::lock_guard lock(mutex_);
    g = graph_;
  }
  // The run's signature in this thread's vectors, kept from run to run: a cached
  // signature's step allocates nothing for it (the build below takes its own copy).
  static thread_local signature key;
  auto& [fed, fetched, target_ids] = key;
  fed.clear(), fetched.clear(), target_ids.clear();
  for (const auto& [e, value] : feeds) {
    output o = e.resolve(*g);
    const node& n = g->at(o);
    if (!value.valid())
      fail(error_code::invalid_argument, "feed '", g->name_of(o), "': the fed tensor is empty (default-constructed)");
    if (value.dtype() != n.output_dtype(o.port))
      fail(error_code::invalid_argument, "feed '", g->name_of(o), "' (", n.op(), "): expected ",
           n.output_dtype(o.port), n.output_shape(o.port), ", got ", value.dtype(), value.shape());
    if (!n.output_shape(o.port).accepts(value.shape()))
      fail(error_code::invalid_argument, "feed '", g->name_of(o), "' (", n.op(), "): expected shape ",
           n.output_shape(o.port), ", got ", value.dtype(), value.shape());
    if (std::find(fed.begin(), fed.end(), o) != fed.end())
      fail(error_code::invalid_argument, "feed '", g->name_of(o), "' is fed twice");
    fed.push_back(o);
  }
  for (const auto& e : fetches) fetched.push_back(e.resolve(*g));
  for (const auto& e : targets) target_ids.push_back(e.resolve_node(*g));

  {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end() && it->second->source == g) return it->second;
  }
  signature built = key;
  std::vector<std::pair<output, shape>> fed_shapes;
  for (std::size_t i = 0; i < feeds.size(); ++i) fed_shapes.emplace_back(std::get<0>(built)[i], feeds[i].second.shape());
  auto x = build(g, std::get<0>(built), std::get<1>(built), std::get<2>(built), fed_shapes);
  std::lock_guard lock(mutex_);
  if (graph_ == g) cache_[std::move(built)] = x;
  return x;
}

WEFT_DETAIL_RUNTIME_INLINE std::vector<tensor> session::execute(const executable& x, std::span<const tensor> feed_values,
                                                               Eigen::ThreadPoolInterface* inter_op, bool trace,
                                                               run_metadata* metadata, const run_options* options) {
  stop_hooks hooks;
  arm(hooks, options);
  const step_options o{trace, next_step_id_.fetch_add(1),
                      trace ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{}, copy_transfers_};
  auto stats = [metadata](std::span<step* const> steps) {
    if (!metadata) return;
    metadata->stats = steps.front()->take_stats();
    for (std::size_t i = 1; i < steps.size(); ++i)
      for (auto& n : steps[i]->take_stats().nodes) metadata->stats.nodes.push_back(std::move(n));
  };
  std::vector<tensor> results;
  if (x.partitions.empty()) {  // one device: the step lives here (nothing allocated for it)
    step one(x, feed_values, device_ptrs_, *resources_, inter_op, o);
    step* const steps[] = {&one};
    try {
      results = one.run(hooks.stopper.get());
    } catch (...) {
      stats(steps);
      throw;
    }
    stats(steps);
    return results;
  }
  std::vector<std::unique_ptr<step>> parts;
  std::vector<step*> steps;
  std::vector<Eigen::ThreadPoolInterface*> drivers;
  for (const auto& part : x.partitions) {
    parts.push_back(std::make_unique<step>(*part, feed_values, device_ptrs_, *resources_, inter_op, o));
    steps.push_back(parts.back().get());
    drivers.push_back(drivers.empty() ? nullptr : device_threads_[static_cast<std::size_t>(part->device)].get());
  }
  try {
    results = step::run_partitions(steps, drivers, hooks.stopper.get());
  } catch (...) {
    stats(steps);
    throw;
  }
  stats(steps);
  return results;
}
#endif

}  // namespace weft
