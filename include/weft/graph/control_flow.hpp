/// @file
/// Loops and conditionals built op by op into a graph (ops/control_flow_ops.hpp): the
/// lowering that the typed combinators use, and that runtime-built graphs can call.
///
///   auto out = weft::while_loop(g, {i0, acc0},
///       [&](weft::loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(n)}).out(0); },
///       [&](weft::loop_scope& s, const std::vector<output>& v) { return std::vector<output>{...}; });
///
/// The loop variables enter through Enter nodes into Merges; cond's value goes through
/// LoopCond to one Switch per variable, whose true side feeds the body and false side an
/// Exit; the body's results come back through NextIteration nodes (graph::close_loop). An
/// outer value the functions use must come in through scope.invariant(v) (an Enter with
/// is_constant, made once per value); a node the functions add with no inputs (a Const)
/// must take a control input from scope.pivot() to run inside the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/graph/graph.hpp>

namespace weft {

/// How while_loop builds a loop.
struct while_options {
  std::string name = "while";             ///< names the nodes' scope and the frame
  std::int64_t parallel_iterations = 10;  ///< iterations in flight at most
  std::int64_t maximum_iterations = -1;   ///< -1: no bound; else the loop also stops after so many
};

/// What a loop's functions use to reach outside the loop.
class loop_scope {
 public:
  /// The scope of the loop whose frame is `frame` in g, `parallel` iterations in flight at most.
  loop_scope(graph& g, std::string frame, std::int64_t parallel) : g_(g), frame_(std::move(frame)), parallel_(parallel) {}
  /// `outer` as a loop invariant: entered once into every iteration.
  output invariant(output outer) {
    auto [it, fresh] = invariants_.try_emplace(outer);
    if (fresh)
      it->second = g_.op("Enter", {outer}, {{"frame_name", frame_}, {"is_constant", true}, {"parallel_iterations", parallel_}})
                       .out(0);
    return it->second;
  }
  /// A node of the loop that runs once per iteration, before the body: a control input for
  /// body nodes that have no data input.
  int pivot() const { return pivot_; }
  /// The loop's frame name.
  const std::string& frame() const noexcept { return frame_; }

 private:
  friend std::vector<output> while_loop(graph&, const std::vector<output>&,
                                        const std::function<output(loop_scope&, const std::vector<output>&)>&,
                                        const std::function<std::vector<output>(loop_scope&, const std::vector<output>&)>&,
                                        const while_options&);
  graph& g_;
  std::string frame_;
  std::int64_t parallel_;
  std::map<output, output> invariants_;
  int pivot_ = -1;
};

/// while cond(vars): vars = body(vars), in the graph; returns the loop variables' final
/// values (Exit outputs). body returns one value per variable, of its dtype and of a
/// compatible shape.
std::vector<output> while_loop(graph& g, const std::vector<output>& init,
                               const std::function<output(loop_scope&, const std::vector<output>&)>& cond,
                               const std::function<std::vector<output>(loop_scope&, const std::vector<output>&)>& body,
                               const while_options& options = {});
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<output> while_loop(graph& g, const std::vector<output>& init,
                                                          const std::function<output(loop_scope&, const std::vector<output>&)>& cond,
                                                          const std::function<std::vector<output>(loop_scope&, const std::vector<output>&)>& body,
                                                          const while_options& options) {
  if (init.empty()) fail(error_code::invalid_argument, "while_loop '", options.name, "': needs at least one loop variable");
  auto scope = g.name_scope(options.name);
  loop_scope s(g, options.name + "_" + std::to_string(g.size()), options.parallel_iterations);
  const attr_map enter_attrs{{"frame_name", s.frame()}, {"parallel_iterations", options.parallel_iterations}};
  std::vector<output> vars = init;
  const bool bounded = options.maximum_iterations >= 0;
  if (bounded) vars.push_back(g.constant(tensor::scalar(std::int64_t{0}), node_options("iteration")).out(0));
  std::vector<int> merges;
  std::vector<output> current;
  for (const auto& v : vars) {
    auto enter = g.op("Enter", {v}, enter_attrs).out(0);
    const node& m = g.op("Merge", {enter, enter});
    merges.push_back(m.id());
    current.push_back(m.out(0));
  }
  std::vector<output> user(current.begin(), current.begin() + static_cast<std::ptrdiff_t>(init.size()));
  output keep_going = cond(s, user);
  if (bounded) {
    auto below = g.op("Less", {current.back(), s.invariant(g.constant(tensor::scalar(options.maximum_iterations)))}).out(0);
    keep_going = g.op("LogicalAnd", {keep_going, below}).out(0);
  }
  auto pred = g.op("LoopCond", {keep_going}).out(0);
  std::vector<output> exits, inside;
  for (const auto& v : current) {
    const node& sw = g.op("Switch", {v, pred});
    exits.push_back(g.op("Exit", {sw.out(0)}).out(0));
    inside.push_back(g.op("Identity", {sw.out(1)}).out(0));
  }
  s.pivot_ = inside.front().node;
  std::vector<output> next =
      body(s, std::vector<output>(inside.begin(), inside.begin() + static_cast<std::ptrdiff_t>(init.size())));
  if (next.size() != init.size())
    fail(error_code::invalid_argument, "while_loop '", options.name, "': the body returns ", next.size(),
         " values for ", init.size(), " loop variables");
  if (bounded) next.push_back(g.op("Add", {inside.back(), s.invariant(g.constant(tensor::scalar(std::int64_t{1})))}).out(0));
  for (std::size_t k = 0; k < next.size(); ++k) g.close_loop(merges[k], g.op("NextIteration", {next[k]}).out(0));
  exits.resize(init.size());
  return exits;
}
#endif

/// One side of a cond: the outer values as seen from inside it (through its Switch), and a
/// pivot node for control inputs of nodes with no data input (a Const), which would run on
/// both sides otherwise.
struct branch {
  std::vector<output> inputs;  ///< the outer values, through this side's Switch outputs
  int pivot = -1;              ///< the pivot node's id
};

/// pred ? then_fn() : else_fn(), in the graph: only the taken side runs, the other's values
/// are dead. `inputs` are the outer values the sides use; every result of a side must depend
/// on its inputs or its pivot. Both return the same number of results, of the same dtypes
/// and compatible shapes. Returns the Merges' outputs.
std::vector<output> cond(graph& g, output pred, const std::vector<output>& inputs,
                         const std::function<std::vector<output>(const branch&)>& then_fn,
                         const std::function<std::vector<output>(const branch&)>& else_fn,
                         const std::string& name = "cond");
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<output> cond(graph& g, output pred, const std::vector<output>& inputs,
                                                    const std::function<std::vector<output>(const branch&)>& then_fn,
                                                    const std::function<std::vector<output>(const branch&)>& else_fn,
                                                    const std::string& name) {
  auto scope = g.name_scope(name);
  const node& pivots = g.op("Switch", {pred, pred});
  branch on_true{{}, g.op("Identity", {pivots.out(1)}, {}, node_options("pivot_t")).id()};
  branch on_false{{}, g.op("Identity", {pivots.out(0)}, {}, node_options("pivot_f")).id()};
  for (const auto& v : inputs) {
    const node& sw = g.op("Switch", {v, pred});
    on_false.inputs.push_back(sw.out(0));
    on_true.inputs.push_back(sw.out(1));
  }
  auto t = then_fn(on_true);
  auto f = else_fn(on_false);
  if (t.size() != f.size())
    fail(error_code::invalid_argument, "cond '", name, "': the branches return ", t.size(), " and ", f.size(), " values");
  std::vector<output> out;
  for (std::size_t k = 0; k < t.size(); ++k) out.push_back(g.op("Merge", {f[k], t[k]}).out(0));
  return out;
}
#endif

}  // namespace weft
