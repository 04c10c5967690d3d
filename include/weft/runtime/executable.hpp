/// @file
/// An executable: the pruned graph of one run signature, with a kernel per node and every
/// node's loop frame, input slots and pending counts worked out; immutable and shared by
/// every step that runs it (runtime/executor.hpp). The session builds its nodes and edges;
/// finish_executable completes it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/core/tensor.hpp>
#include <weft/graph/graph.hpp>
#include <weft/graph/passes/frames.hpp>
#include <weft/graph/passes/placement.hpp>
#include <weft/runtime/kernel.hpp>

namespace weft {

/// A data edge of an executable: from an output of its node to an input slot of `dst`.
struct exec_edge {
  int src_port;        ///< the output it leaves
  int dst;             ///< exec node
  int dst_slot;        ///< input slot, numbered within dst's frame
  int dst_local = 0;   ///< dst's index in its frame (set by finish_executable)
  bool to_merge = false;  ///< whether dst is a Merge (which runs on its first live input)
  /// Whether it is the last of its node's edges from src_port: the executor moves the value
  /// into its slot instead of copying it (set by finish_executable).
  bool last_of_port = false;
};

/// One end of an edge between two devices' partitions (runtime/partition.hpp): a Send puts
/// the value (or a control edge's token) in the step's rendezvous on `edge`, the Recv of the
/// other partition takes it from there.
struct transfer_info {
  std::string key;     ///< the edge: "name:port" or "^name", from device -> to device
  int edge = -1;       ///< its number among the edges between the partitions (both ends share it)
  bool send = false;     ///< the Send's end (else the Recv's)
  bool control = false;  ///< a control edge (a token crosses, no value)
  /// A float32 tensor that crosses as bfloat16 (whitepaper §5.5): the Send keeps each
  /// value's top 16 bits, the Recv fills the low 16 with zeros.
  bool lossy = false;
};

/// A node of an executable. `kind` is its op's part in control flow (op_def::control): the
/// control-flow ops are run by the executor itself, every other node by its kernel.
struct exec_node {
  const node* def = nullptr;  ///< nullptr for a feed node and for a Send or Recv
  std::shared_ptr<op_kernel> kernel;  ///< stateful ops share theirs across a session's executables
  int feed = -1;  ///< for a feed node: the index of its tensor in the run's feeds
  int input_start = 0;  ///< first input slot, numbered within the node's frame
  int num_inputs = 0;   ///< its data inputs
  int num_outputs = 0;  ///< its outputs
  int pending = 0;  ///< data inputs plus control inputs (a Merge: control inputs only)
  bool cheap = false;       ///< run inline by the thread that made it ready (op_def::cheap)
  bool async = false;       ///< its kernel completes through a callback (op_kernel::is_async; set by finish_executable)
  flow kind = flow::plain;  ///< its part in control flow
  int frame = 0;  ///< the loop frame the node runs in (0: the root), and
  int local = 0;  ///< its index among that frame's nodes
  int forward_inputs = 0;  ///< a Merge's data inputs that do not come from a NextIteration
  int child_frame = -1;    ///< an Enter's frame
  bool is_constant = false;  ///< an Enter's
  bool runs_on_dead_value = false;  ///< AccumulatorPush: only its key input's death kills it
  int device = 0;          ///< the index of the session device it runs on
  int exit_index = -1;     ///< an Exit's index in its frame's exits
  int transfer = -1;       ///< a Send or Recv between partitions: its index in executable::transfers
  std::vector<bool> input_is_ref;    ///< per input: a variable reference
  std::vector<exec_edge> out_edges;  ///< the data edges it feeds
  std::vector<int> control_out;      ///< the nodes that wait for it (exec ids)
  std::vector<std::pair<int, int>> fetches;  ///< (port, fetch index)
};

/// A loop frame of an executable, one per frame name per parent frame (frames[0] is the
/// root); each run of the loop in a step is one instance of it.
struct frame_info {
  std::string name;                      ///< the loop's frame name (its Enters' frame_name)
  int parent = -1;                       ///< the enclosing frame's index (-1: the root's)
  std::int64_t parallel_iterations = 1;  ///< iterations that may run at once
  int num_nodes = 0;                     ///< nodes in the frame
  int num_slots = 0;                     ///< input slots of those nodes
  std::vector<int> initial_pending;  ///< by local index
  int num_enters = 0;                    ///< Enters into the frame
  std::vector<int> exits;  ///< exec ids
};

namespace detail {
/// One node's state in one iteration of a step (runtime/executor.hpp), all atomic.
struct node_state {
  std::atomic<int> pending;       ///< inputs and control inputs yet to come
  std::atomic<int> merge_live;    ///< the live input a Merge took (-1: none yet)
  std::atomic<int> merge_dead;    ///< dead data inputs a Merge got
  std::atomic<bool> dead_control; ///< a dead control input came
  std::atomic<bool> merge_fired;  ///< a Merge was made ready (once)
};
/// A step's root arrays kept for a later step: its slots (empty entries that keep their
/// shapes' storage) and its node states.
struct kept_root {
  std::vector<entry> slots;              ///< empty
  std::unique_ptr<node_state[]> nodes;  ///< node_capacity of them
  std::size_t node_capacity = 0;         ///< nodes' length
};
/// The root arrays an executable keeps between its steps where it has more root nodes or
/// slots than a thread keeps (runtime/executor.hpp): a step takes them, if no other step
/// has, and gives them back when it ends.
class kept_root_slot {
 public:
  kept_root_slot() = default;
  kept_root_slot(const kept_root_slot&) = delete;
  kept_root_slot& operator=(const kept_root_slot&) = delete;
  ~kept_root_slot() { delete held_.load(std::memory_order_acquire); }
  /// The kept arrays, or null (none kept yet, or another step holds them).
  std::unique_ptr<kept_root> take() const { return std::unique_ptr<kept_root>(held_.exchange(nullptr, std::memory_order_acq_rel)); }
  /// Keeps r for the next step (what another step gave back meanwhile is freed).
  void give(std::unique_ptr<kept_root> r) const { delete held_.exchange(r.release(), std::memory_order_acq_rel); }

 private:
  mutable std::atomic<kept_root*> held_{nullptr};
};
}  // namespace detail

/// A signature's graph compiled for the executor (session::run builds one per distinct
/// feeds, fetches and targets): the pruned, placed and optimized nodes with their kernels,
/// edges, loop frames and transfers.
struct executable {
  std::shared_ptr<const graph> source;  ///< the graph it was built from
  /// The signature's own copy of source with gradient updates folded into their products
  /// (graph/passes/fuse_matmul.hpp; same ids and names), which the nodes point into; null
  /// when the nodes are source's.
  std::shared_ptr<const graph> rewritten;
  /// Values computed once when the executable was built (constant folding): feed nodes
  /// numbered after the run's own feeds read them.
  std::vector<tensor> constants;
  std::vector<exec_node> nodes;  ///< by exec id
  std::vector<output> feeds;  ///< the outputs the feed nodes stand for: the run's feeds, then the folded ones
  std::vector<frame_info> frames;  ///< frames[0]: the root
  std::vector<int> roots;          ///< the nodes ready when a step starts (no pending inputs)
  int num_fetches = 0;             ///< how many values a run returns
  /// Where each node runs, and the simulation that chose it (exec_node::device follows it).
  std::shared_ptr<const passes::placement> placement;
  std::vector<transfer_info> transfers;  ///< the Sends and Recvs between partitions
  int device = -1;  ///< a partition's device
  int num_edges = 0;  ///< a partition's: how many edges cross between the partitions
  /// A partition's own nodes, not the source graph's: the control loop that runs a loop's
  /// iterations on a device where only part of its body runs (runtime/partition.hpp).
  std::shared_ptr<const graph> own_nodes;
  /// When the nodes span several devices: one executable per device, each run by a step of
  /// its own (the nodes above are then the unsplit graph, not run).
  std::vector<std::shared_ptr<const executable>> partitions;
  /// A large root frame's arrays, kept between steps (runtime/executor.hpp).
  detail::kept_root_slot spare_root;
};

/// Completes an executable whose nodes, edges and fetches are set (input_start and dst_slot
/// counted over the whole executable): finds each node's frame (graph/passes/frames.hpp,
/// checked), numbers nodes and slots within their frames, and checks what only an
/// executable has to hold (non-constant Enters and NextIterations feeding Merges only, no
/// fetch from inside a loop). Throws weft::error naming the node.
/// The frame analysis' view of an executable's nodes (graph/passes/frames.hpp).
inline std::vector<passes::frame_node> frame_view(const executable& x) {
  const auto& nodes = x.nodes;
  const auto count = nodes.size();
  std::vector<passes::frame_node> view(count);
  for (std::size_t i = 0; i < count; ++i) {
    const exec_node& xn = nodes[i];
    view[i].def = xn.def;
    view[i].kind = xn.def ? xn.def->def().control : flow::plain;
    if (!xn.def && xn.feed >= 0 && static_cast<std::size_t>(xn.feed) < x.feeds.size() && x.source)
      view[i].fed = x.source->name_of(x.feeds[static_cast<std::size_t>(xn.feed)]);
  }
  // Each node's sources: (exec id, is data) per input.
  for (std::size_t i = 0; i < count; ++i) {
    for (const auto& e : nodes[i].out_edges) view[static_cast<std::size_t>(e.dst)].sources.push_back({static_cast<int>(i), true});
    for (int c : nodes[i].control_out) view[static_cast<std::size_t>(c)].sources.push_back({static_cast<int>(i), false});
  }
  return view;
}

/// Completes x after its nodes and edges are set: each node's control-flow kind and frame,
/// the frames' local numbering, slots and initial pending counts. A NextIteration or a
/// non-constant Enter that feeds something other than a Merge, or a fetch from inside a
/// loop, is an invalid_argument error naming the node.
void finish_executable(executable& x);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void finish_executable(executable& x) {
  auto& nodes = x.nodes;
  const auto count = nodes.size();
  for (auto& xn : nodes) {
    if (xn.def) xn.kind = xn.def->def().control;
    xn.async = xn.kernel && xn.kernel->is_async();
  }
  const std::vector<passes::frame_node> view = frame_view(x);
  const passes::frame_map frames = passes::find_frames(view, true);
  x.frames.clear();
  for (const passes::frame& f : frames.frames()) {
    frame_info info;
    info.name = f.name, info.parent = f.parent, info.parallel_iterations = f.parallel_iterations;
    x.frames.push_back(std::move(info));
  }
  for (std::size_t i = 0; i < count; ++i) {
    exec_node& xn = nodes[i];
    xn.frame = frames.of(static_cast<int>(i));
    xn.child_frame = frames.child(static_cast<int>(i));
    if (xn.kind == flow::enter) xn.is_constant = xn.def->attr<bool>("is_constant");
  }
  for (std::size_t i = 0; i < count; ++i) {
    const exec_node& xn = nodes[i];
    const bool to_merges = xn.kind == flow::next_iteration || (xn.kind == flow::enter && !xn.is_constant);
    if (to_merges)
      for (const auto& e : xn.out_edges)
        if (nodes[static_cast<std::size_t>(e.dst)].kind != flow::merge)
          fail(error_code::invalid_argument, xn.def->describe(), ": feeds ", nodes[static_cast<std::size_t>(e.dst)].def->describe(),
               ", which is not a Merge", xn.kind == flow::enter ? " (only a loop's first iteration would get the value; "
                                                                 "a loop invariant's Enter has is_constant)" : "");
    if (!xn.fetches.empty() && frames.out_frame(static_cast<int>(i)) != 0)
      fail(error_code::invalid_argument, "cannot fetch ", xn.def->describe(), ": it runs in every iteration of ",
           frames.frame_name(frames.out_frame(static_cast<int>(i))), "; fetch a value that leaves the loop through an Exit");
  }
  // Local numbering, slots and pending counts per frame.
  std::size_t total_slots = 0;
  for (const auto& xn : nodes) total_slots += static_cast<std::size_t>(xn.num_inputs);
  std::vector<int> local_slot(total_slots);
  for (auto& xn : nodes) {
    frame_info& f = x.frames[static_cast<std::size_t>(xn.frame)];
    xn.local = f.num_nodes++;
    for (int k = 0; k < xn.num_inputs; ++k) local_slot[static_cast<std::size_t>(xn.input_start + k)] = f.num_slots + k;
    xn.input_start = f.num_slots;
    f.num_slots += xn.num_inputs;
    if (xn.kind == flow::merge) {
      xn.pending = 0;
      for (auto [src, data] : view[static_cast<std::size_t>(&xn - nodes.data())].sources) {
        if (!data) ++xn.pending;
        else if (nodes[static_cast<std::size_t>(src)].kind != flow::next_iteration) ++xn.forward_inputs;
      }
    }
    f.initial_pending.push_back(xn.pending);
    if (xn.kind == flow::enter) ++x.frames[static_cast<std::size_t>(xn.child_frame)].num_enters;
    if (xn.kind == flow::exit) xn.exit_index = static_cast<int>(f.exits.size()), f.exits.push_back(static_cast<int>(&xn - nodes.data()));
  }
  for (auto& xn : nodes) {
    for (auto& e : xn.out_edges) {
      const exec_node& dst = nodes[static_cast<std::size_t>(e.dst)];
      e.dst_slot = local_slot[static_cast<std::size_t>(e.dst_slot)];
      e.dst_local = dst.local;
      e.to_merge = dst.kind == flow::merge;
      e.last_of_port = false;
    }
    for (auto e = xn.out_edges.rbegin(); e != xn.out_edges.rend(); ++e)
      e->last_of_port = std::none_of(xn.out_edges.rbegin(), e, [&](const exec_edge& later) { return later.src_port == e->src_port; });
  }
  x.roots.clear();
  for (std::size_t i = 0; i < count; ++i)
    if (nodes[i].frame == 0 && nodes[i].pending == 0 && nodes[i].kind != flow::merge) x.roots.push_back(static_cast<int>(i));
}
#endif

}  // namespace weft
