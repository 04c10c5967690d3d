/// @file
/// Folding a weight's gradient-descent step into the product that computes its gradient: an
/// ApplyGradientDescent(var, alpha, MatMul(a, b)) whose float MatMul nothing else reads
/// becomes one _FusedMatMulApplyGradientDescent(var, alpha, a, b), a GEMM that adds
/// -alpha * op(a) op(b) into the variable where it is (ops/training_ops.hpp). The gradient
/// (784 x 512 floats, 1.6 MB, for an MLP's first layer) is then neither written nor read
/// back: the expert's hand-written step, `w.noalias() -= rate * x.transpose() * dz`, as a
/// rewrite of the graph (the kind TensorFlow's grappler "remapper" does for MatMul + BiasAdd).
///
/// A session does it for each signature it builds, on its own copy of the graph, where every
/// device is a CPU and the fused kernel is registered (runtime/session.hpp,
/// session_options::fuse_gradient_updates). The fused node takes the ApplyGradientDescent's
/// id, name, device and colocation, with the control inputs of both nodes: fetches, targets
/// and control edges that named the update still do, and the MatMul, left without a
/// consumer, is pruned. Results differ from the unfused step by rounding only: each term is
/// scaled by -alpha inside the product and added to the variable once, where the unfused
/// step rounds the gradient, then alpha times it.
#pragma once

#include <memory>
#include <vector>

#include <weft/graph/graph.hpp>
#include <weft/ops/training_ops.hpp>

namespace weft::passes {

/// An ApplyGradientDescent and the MatMul whose product is its delta, by node id.
struct fusable_update {
  int matmul = -1;  ///< the MatMul node
  int apply = -1;   ///< the ApplyGradientDescent node
  /// Equal when both ids are.
  friend bool operator==(const fusable_update&, const fusable_update&) = default;
};

/// The updates of g that fold into their MatMul: ApplyGradientDescent of float whose delta is
/// output 0 of a float MatMul that no other input, control edge, fetch or target names, with
/// no output of either node fed, and that asks for no other device or colocation than the
/// update (the fused node runs where the update runs).
inline std::vector<fusable_update> fusable_updates(const graph& g, const std::vector<output>& fed,
                                                   const std::vector<output>& fetched, const std::vector<int>& targets) {
  const auto n = static_cast<std::size_t>(g.size());
  std::vector<int> readers(n, 0);  // inputs, control edges, fetches and targets that name the node
  std::vector<char> has_fed(n, 0);
  for (int id = 0; id < g.size(); ++id) {
    const node& x = g.at(id);
    for (output in : x.inputs()) ++readers[static_cast<std::size_t>(in.node)];
    for (int c : x.control_inputs()) ++readers[static_cast<std::size_t>(c)];
  }
  for (output o : fetched) ++readers[static_cast<std::size_t>(o.node)];
  for (int t : targets) ++readers[static_cast<std::size_t>(t)];
  for (output o : fed) has_fed[static_cast<std::size_t>(o.node)] = 1;
  const auto is_float = [](const node& x) { return x.attr<dtype>("T") == dtype::float32; };

  std::vector<fusable_update> out;
  for (int id = 0; id < g.size(); ++id) {
    const node& apply = g.at(id);
    if (apply.op() != "ApplyGradientDescent" || !is_float(apply) || has_fed[static_cast<std::size_t>(id)]) continue;
    const output delta = apply.inputs()[2];
    const node& product = g.at(delta.node);
    if (product.op() != "MatMul" || delta.port != 0 || !is_float(product)) continue;
    if (readers[static_cast<std::size_t>(product.id())] != 1 || has_fed[static_cast<std::size_t>(product.id())]) continue;
    if (!product.device().empty() && product.device() != apply.device()) continue;
    if (!product.colocation().empty() && product.colocation() != apply.colocation()) continue;
    out.push_back({product.id(), id});
  }
  return out;
}

/// A copy of g with each update of `updates` (from fusable_updates(g, ...)) folded into its
/// MatMul: the update's node replaced in place by _FusedMatMulApplyGradientDescent(var,
/// alpha, a, b) with the MatMul's transposes and the control inputs of both nodes.
inline std::shared_ptr<const graph> fuse_updates(const graph& g, const std::vector<fusable_update>& updates) {
  auto copy = std::make_shared<graph>(g);
  for (const auto& u : updates) {
    const node& apply = g.at(u.apply);
    const node& product = g.at(u.matmul);
    std::vector<int> controls = apply.control_inputs();
    controls.insert(controls.end(), product.control_inputs().begin(), product.control_inputs().end());
    attr_map attrs;
    attrs.set("T", dtype::float32);
    attrs.set("transpose_a", product.attr<bool>("transpose_a"));
    attrs.set("transpose_b", product.attr<bool>("transpose_b"));
    attrs.set("use_locking", apply.attr<bool>("use_locking"));
    copy->replace(u.apply, ops::fused_matmul_gradient_descent_op,
                  {apply.inputs()[0], apply.inputs()[1], product.inputs()[0], product.inputs()[1]}, std::move(attrs),
                  std::move(controls));
  }
  return copy;
}

}  // namespace weft::passes
