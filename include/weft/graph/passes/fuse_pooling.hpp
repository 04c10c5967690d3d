/// @file
/// A max pooling's gradient absorbs the ReLU gradient after it: ReluGrad(MaxPoolGrad(r, p,
/// dy), r), the backward pass of a convolution layer's Relu then MaxPool (LeNet's), becomes
/// one _FusedMaxPoolGradReluGrad(r, p, dy) when nothing else reads the MaxPoolGrad. The
/// MaxPoolGrad writes a gradient of the pool's input shape (four times the pooled size for
/// 2x2 windows) and ReluGrad reads it back with r to write another; the fused node writes
/// one, each window's gradient to its first maximum where that maximum is above 0. Bit for
/// bit the two nodes' result (ops/nn_ops.hpp, kernels/cpu/pooling.hpp).
///
/// A session does it beside the MatMul folds (graph/passes/fuse_matmul.hpp, under
/// session_options::fuse_matmul), on its own copy of the graph, where every device is a CPU
/// and the fused kernel of the dtype is registered. The fused node takes the ReluGrad's id,
/// name, device and colocation (graph::replace), with the control inputs of both nodes.
#pragma once

#include <utility>
#include <vector>

#include <weft/graph/graph.hpp>
#include <weft/graph/passes/fuse_matmul.hpp>
#include <weft/ops/nn_ops.hpp>

namespace weft::passes {

/// A ReluGrad and the MaxPoolGrad whose output is its gradients, by node id.
struct fusable_pool_relu_grad {
  int max_pool_grad = -1;  ///< the MaxPoolGrad node
  int relu_grad = -1;      ///< the ReluGrad node
  /// Equal when both ids are.
  friend bool operator==(const fusable_pool_relu_grad&, const fusable_pool_relu_grad&) = default;
};

/// The ReluGrads of g whose gradients are output 0 of a MaxPoolGrad that nothing else reads
/// (no other input, fetch or target, no output fed; nodes that wait on it come after the
/// ReluGrad, where their control edges move) and whose features are that MaxPoolGrad's
/// orig_input (the same output), with the ReluGrad's output not fed and the MaxPoolGrad
/// asking for no other device or colocation than the ReluGrad.
inline std::vector<fusable_pool_relu_grad> fusable_pool_relu_grads(const graph& g, const std::vector<output>& fed,
                                                                   const std::vector<output>& fetched,
                                                                   const std::vector<int>& targets) {
  const detail::readers_of readers(g, fed, fetched, targets);
  std::vector<fusable_pool_relu_grad> out;
  for (int id = 0; id < g.size(); ++id) {
    const node& rg = g.at(id);
    if (rg.op() != "ReluGrad" || readers.fed[static_cast<std::size_t>(id)]) continue;
    const output gradients = rg.inputs()[0];
    const node& mpg = g.at(gradients.node);
    if (mpg.op() != "MaxPoolGrad" || gradients.port != 0 || mpg.inputs()[0] != rg.inputs()[1] ||
        mpg.attr<dtype>("T") != rg.attr<dtype>("T") || !readers.folds(mpg.id(), id) || !detail::folds_into(mpg, rg))
      continue;
    out.push_back({mpg.id(), id});
  }
  return out;
}

/// Folds each of `found` (from fusable_pool_relu_grads(g, ...)) in g: the ReluGrad's node
/// replaced in place by _FusedMaxPoolGradReluGrad with the MaxPoolGrad's inputs and attrs and
/// the control inputs of both nodes.
inline void fuse_pool_relu_grads(graph& g, const std::vector<fusable_pool_relu_grad>& found) {
  for (const auto& f : found) {
    const node& mpg = g.at(f.max_pool_grad);
    std::vector<output> inputs = mpg.inputs();
    std::vector<int> controls = detail::controls_of({&mpg, &g.at(f.relu_grad)});
    g.replace(f.relu_grad, ops::fused_max_pool_grad_relu_grad_op, inputs, mpg.attrs(), std::move(controls));
    g.redirect_control_inputs(f.max_pool_grad, f.relu_grad);
  }
}

}  // namespace weft::passes
