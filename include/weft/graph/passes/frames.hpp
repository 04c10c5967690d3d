/// @file
/// Loop frames (the whitepaper's §4.4): which frame each node of a graph runs in. The
/// executor (runtime/executor.hpp) and the gradient pass (graph/gradients.hpp) both work
/// on this analysis.
///
/// A node runs in the frame its inputs come from: an Enter's output is in the child frame
/// its frame_name names (one frame per name per parent frame), an Exit's in its frame's
/// parent, any other node's in the node's own frame; a node with no input runs in the
/// root frame (frame 0). NextIteration's edges into Merges are back edges and do not place
/// their consumers.
///
/// With `check`, the analysis also verifies the control flow and throws weft::error naming
/// the node: every input of a node from one frame, no Exit or NextIteration outside a loop,
/// a NextIteration in the frame of the Merge it feeds, one parallel_iterations per frame.
/// Without it, a node runs in the frame of its first input that places it (data inputs
/// before control inputs), and nothing is reported: the gradient pass reads graphs that
/// may hold nodes no run will reach.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/graph/graph.hpp>

namespace weft::passes {

/// One loop frame: its name, its parent frame and depth.
struct frame {
  std::string name;  ///< the Enters' frame_name ("" for the root)
  int parent = -1;   ///< -1 for the root
  int depth = 0;     ///< loops around it
  std::int64_t parallel_iterations = 1;  ///< iterations in flight at most (the Enters' attr)
};

/// What the analysis needs of one node: its definition (nullptr for a value fed in a node's
/// place, which has no inputs), its part in control flow, and where its inputs come from
/// (the producing node's index, and whether it is a data input), data inputs first.
struct frame_node {
  const node* def = nullptr;                  ///< the node (null for a fed value)
  flow kind = flow::plain;                    ///< its part in control flow
  std::vector<std::pair<int, bool>> sources;  ///< (producer index, is a data input), data inputs first
  std::string fed;  ///< for a fed value: the name of the output it replaces
};

/// The frames of a graph's nodes (find_frames).
class frame_map {
 public:
  int of(int i) const { return of_[static_cast<std::size_t>(i)]; }        ///< the frame node i runs in
  int child(int i) const { return child_[static_cast<std::size_t>(i)]; }  ///< an Enter's frame, else -1
  /// The frame node i's outputs are seen in.
  int out_frame(int i) const {
    const auto k = static_cast<std::size_t>(i);
    if (kind_[k] == flow::enter) return child_[k];
    if (kind_[k] == flow::exit) return std::max(frames_[static_cast<std::size_t>(of_[k])].parent, 0);
    return of_[k];
  }
  /// Frame f.
  const frame& info(int f) const { return frames_[static_cast<std::size_t>(f)]; }
  /// Every frame; frame 0 is the root.
  const std::vector<frame>& frames() const noexcept { return frames_; }
  /// Frame f in an error message: "the root frame" or "frame 'name'".
  std::string frame_name(int f) const { return f == 0 ? std::string("the root frame") : "frame '" + info(f).name + "'"; }

 private:
  friend frame_map find_frames(const std::vector<frame_node>& nodes, bool check);
  std::vector<frame> frames_;
  std::vector<int> of_, child_;
  std::vector<flow> kind_;
};

/// The frames of `nodes`, given in topological order but for the back edges out of
/// NextIterations.
frame_map find_frames(const std::vector<frame_node>& nodes, bool check);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE frame_map find_frames(const std::vector<frame_node>& nodes, bool check) {
  frame_map m;
  const auto count = nodes.size();
  m.frames_.assign(1, frame{});
  m.of_.assign(count, 0);
  m.child_.assign(count, -1);
  m.kind_.resize(count);
  for (std::size_t i = 0; i < count; ++i) m.kind_[i] = nodes[i].kind;
  auto describe = [&](int i) {
    const frame_node& n = nodes[static_cast<std::size_t>(i)];
    return n.def ? n.def->describe() : "the value fed for '" + n.fed + "'";
  };
  auto child_of = [&](int parent, const node& enter) {
    const auto name = enter.attr<std::string>("frame_name");
    const auto parallel = enter.attr<std::int64_t>("parallel_iterations");
    for (std::size_t f = 1; f < m.frames_.size(); ++f)
      if (m.frames_[f].parent == parent && m.frames_[f].name == name) {
        if (check && m.frames_[f].parallel_iterations != parallel)
          fail(error_code::invalid_argument, enter.describe(), ": parallel_iterations ", parallel, " for frame '", name,
               "', which another Enter gave ", m.frames_[f].parallel_iterations);
        return static_cast<int>(f);
      }
    m.frames_.push_back(frame{name, parent, m.frames_[static_cast<std::size_t>(parent)].depth + 1, parallel});
    return static_cast<int>(m.frames_.size() - 1);
  };
  for (std::size_t i = 0; i < count; ++i) {
    const frame_node& n = nodes[i];
    int f = -1, from = -1;
    for (auto [src, data] : n.sources) {
      if (data && nodes[static_cast<std::size_t>(src)].kind == flow::next_iteration) continue;  // a back edge
      if (src >= static_cast<int>(i)) continue;  // not placed yet: only a back edge can come later
      const int sf = data ? m.out_frame(src) : m.of(src);
      if (f < 0) {
        f = sf, from = src;
      } else if (check && sf != f) {
        fail(error_code::invalid_argument, describe(static_cast<int>(i)), ": its inputs come from ", m.frame_name(f),
             " (", describe(from), ") and from ", m.frame_name(sf), " (", describe(src),
             "); a value enters a loop through an Enter and leaves it through an Exit");
      }
    }
    m.of_[i] = std::max(f, 0);
    if (check && (n.kind == flow::exit || n.kind == flow::next_iteration) && m.of_[i] == 0)
      fail(error_code::invalid_argument, describe(static_cast<int>(i)), ": is not inside a loop (its input comes from no Enter)");
    if (n.kind == flow::enter && n.def) m.child_[i] = child_of(m.of_[i], *n.def);
  }
  if (check)
    for (std::size_t i = 0; i < count; ++i)
      for (auto [src, data] : nodes[i].sources)
        if (data && nodes[static_cast<std::size_t>(src)].kind == flow::next_iteration && m.of(src) != m.of_[i])
          fail(error_code::invalid_argument, describe(src), ": runs in ", m.frame_name(m.of(src)), " but feeds ",
               describe(static_cast<int>(i)), " in ", m.frame_name(m.of_[i]));
  return m;
}
#endif

/// The frames of a whole graph, by node id.
frame_map find_frames(const graph& g, bool check);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE frame_map find_frames(const graph& g, bool check) {
  std::vector<frame_node> nodes(static_cast<std::size_t>(g.size()));
  for (int id = 0; id < g.size(); ++id) {
    frame_node& fn = nodes[static_cast<std::size_t>(id)];
    const node& n = g.at(id);
    fn.def = &n;
    fn.kind = n.def().control;
    for (const output& in : n.inputs()) fn.sources.push_back({in.node, true});
    for (int c : n.control_inputs()) fn.sources.push_back({c, false});
  }
  return find_frames(nodes, check);
}
#endif

}  // namespace weft::passes
