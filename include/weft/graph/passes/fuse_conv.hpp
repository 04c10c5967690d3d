/// @file
/// What a convolution layer's nodes fold into, on the CPU (the MatMul folds' conditions,
/// graph/passes/fuse_matmul.hpp: the folded nodes read by nothing else, no output fed, no
/// other device or colocation asked for).
///
/// Relu(BiasAdd(Conv2D(x, f), bias)) (or the BiasAdd alone), float32 or bfloat16, NHWC,
/// becomes _FusedConv2DBiasAdd(x, f, bias; relu): the bias and ReLU applied to each row of
/// the convolution's output right after it is computed, while it is in L1, instead of one or
/// two more passes over the output (LeNet's first layer: 6.4 MB). Relu's gradient reads the
/// Relu's output, which the fused node gives; BiasAdd's and Conv2D's read only the incoming
/// gradient and the Conv2D's inputs. The result is the unfused nodes' bit for bit in float32
/// but for a NaN or a -0, which the fused ReLU keeps (as _FusedMatMulBiasAdd's; Eigen's Relu
/// gives 0 or NaN, +0 or -0, by where the value falls in a packet); in bfloat16 the sums are rounded once,
/// after the bias and ReLU, where the unfused nodes round the convolution's output too.
///
/// A max pooling's gradient absorbs the ReLU gradient after it: ReluGrad(MaxPoolGrad(r, p,
/// dy), r), the backward pass of a convolution layer's Relu then MaxPool (LeNet's), becomes
/// one _FusedMaxPoolGradReluGrad(r, p, dy) when nothing else reads the MaxPoolGrad. The
/// MaxPoolGrad writes a gradient of the pool's input shape (four times the pooled size for
/// 2x2 windows) and ReluGrad reads it back with r to write another; the fused node writes
/// one, each window's gradient to its first maximum where that maximum is above 0. Bit for
/// bit the two nodes' result (ops/nn_ops.hpp, kernels/cpu/pooling.hpp).
///
/// A session does both beside the MatMul folds (under session_options::fuse_matmul), on its
/// own copy of the graph, where the fused kernel of the dtype is registered for every device
/// type of the session (the CPU's and, since session 77, the GPU's). A fused node takes the id, name, device and colocation of the last node it
/// replaces (graph::replace), with the control inputs of all of them.
#pragma once

#include <utility>
#include <vector>

#include <weft/graph/graph.hpp>
#include <weft/graph/passes/fuse_matmul.hpp>
#include <weft/ops/nn_ops.hpp>

namespace weft::passes {

/// The BiasAdds of g (NHWC, float32 or bfloat16) whose value is output 0 of a Conv2D (NHWC,
/// as its op requires) that nothing else reads, with the Relu that alone reads each where
/// there is one: as fusable_biases() for MatMul (fusable_bias::matmul names the Conv2D).
inline std::vector<fusable_bias> fusable_conv_biases(const graph& g, const std::vector<output>& fed,
                                                     const std::vector<output>& fetched, const std::vector<int>& targets) {
  return detail::biases_after(g, fed, fetched, targets, "Conv2D");
}

/// Folds each of `biases` (from fusable_conv_biases(g, ...)) into its Conv2D in g: the Relu's
/// node, or the BiasAdd's where there is no Relu, replaced in place by _FusedConv2DBiasAdd(x,
/// f, bias) with the Conv2D's attrs and the control inputs of every node folded.
inline void fuse_conv_biases(graph& g, const std::vector<fusable_bias>& biases) {
  for (const auto& f : biases) detail::fuse_bias(g, f, ops::fused_conv2d_bias_add_op, g.at(f.matmul).attrs());
}

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
        !readers.folds(mpg.id(), id) || !detail::folds_into(g, mpg, rg))
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
