/// @file
/// What a float or bfloat16 MatMul's product absorbs when nothing else reads it, as
/// TensorFlow's grappler "remapper" folds MatMul + BiasAdd: the BiasAdd (and Relu) after it or
/// the ReluGrad that reads it, applied in the product's output pass, the gradient-descent
/// step that consumes it, and (mixed precision) the float32 Adam step on its cast to float32.
///
/// A session does all four for each signature it builds, on its own copy of the graph, where
/// the fused op's kernel of the product's dtype is registered for every device type of the
/// session (runtime/session.hpp, session_options::fuse_matmul): the CPU has all four, the GPU
/// _FusedMatMulBiasAdd (cuBLASLt's bias epilogue) and _FusedMatMulReluGrad. A fused node takes the id, name, device and colocation of
/// the last node it replaces (graph::replace), with the control inputs of all of them:
/// fetches, targets and control edges that named it still do, and the nodes before it, left
/// without a consumer, are pruned.
///
/// Relu(BiasAdd(MatMul(a, b), bias)) becomes _FusedMatMulBiasAdd(a, b, bias; relu) (and
/// BiasAdd(MatMul(a, b), bias) the same without relu): each block of the output gets its
/// bias and ReLU while it is in registers or L1, instead of two more passes over the output.
/// Relu's gradient reads the Relu's output, which the fused node gives; BiasAdd's and
/// MatMul's read only the incoming gradient and the MatMul's operands.
///
/// ReluGrad(MatMul(a, b), features) becomes _FusedMatMulReluGrad(a, b, features): the
/// backward pass's input gradient of a dense layer, masked where the layer below it was
/// positive, in the product's output pass instead of a pass of its own over both matrices.
///
/// Folding a weight's gradient-descent step into the product that computes its gradient: an
/// ApplyGradientDescent(var, alpha, MatMul(a, b)) whose MatMul nothing else reads
/// becomes one _FusedMatMulApplyGradientDescent(var, alpha, a, b), a GEMM that adds
/// -alpha * op(a) op(b) into the variable where it is (ops/training_ops.hpp). The gradient
/// (784 x 512 floats, 1.6 MB, for an MLP's first layer) is then neither written nor read
/// back: the expert's hand-written step, `w.noalias() -= rate * x.transpose() * dz`, as a
/// rewrite of the graph (the kind TensorFlow's grappler "remapper" does for MatMul + BiasAdd).
///
/// Mixed precision's Adam step: an ApplyAdam (float32) whose gradient is Cast(MatMul(a, b)) to
/// float32 of a bfloat16 MatMul, the Cast and the MatMul read by nothing else, becomes one
/// _FusedMatMulApplyAdam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, a,
/// b): bgemm hands each block of the product's float sums to Adam's step as it completes (the
/// gradient, 1.6 MB in float for an MLP's first layer, is neither rounded to bfloat16, cast,
/// written nor read back; Adam's state is read and written as before). Its step is the
/// unfused one's on the unrounded gradient.
///
/// Results differ from the unfused step by rounding only: each term is scaled by -alpha
/// inside the product and added to the variable once, where the unfused step rounds the
/// gradient, then alpha times it. In bfloat16 the float sum goes through the output pass and
/// is rounded to bfloat16 once (bgemm_output), where the unfused ops round the product, then
/// each op's result (ReluGrad's select changes nothing: its fused result is the same bits).
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include <weft/graph/graph.hpp>
#include <weft/ops/matrix_ops.hpp>
#include <weft/ops/training_ops.hpp>

namespace weft::passes {

namespace detail {
/// How many inputs, fetches and targets name each node of g, the first node that waits on it
/// (a control input), and which nodes have a fed output.
struct readers_of {
  std::vector<int> count;
  std::vector<int> first_waiter;  ///< the smallest id with a control input on the node (g.size(): none)
  std::vector<char> fed;
  readers_of(const graph& g, const std::vector<output>& fed_outputs, const std::vector<output>& fetched,
             const std::vector<int>& targets)
      : count(static_cast<std::size_t>(g.size()), 0), first_waiter(static_cast<std::size_t>(g.size()), g.size()),
        fed(static_cast<std::size_t>(g.size()), 0) {
    for (int id = 0; id < g.size(); ++id) {
      const node& x = g.at(id);
      for (output in : x.inputs()) ++count[static_cast<std::size_t>(in.node)];
      for (int c : x.control_inputs()) first_waiter[static_cast<std::size_t>(c)] = std::min(first_waiter[static_cast<std::size_t>(c)], id);
    }
    for (output o : fetched) ++count[static_cast<std::size_t>(o.node)];
    for (int t : targets) ++count[static_cast<std::size_t>(t)];
    for (output o : fed_outputs) fed[static_cast<std::size_t>(o.node)] = 1;
  }
  /// Whether node `id` can fold into the node `into`: its value read by exactly one input (no
  /// fetch, target or fed output), and every node that waits on it after `into` (its control
  /// edges move there: graph::redirect_control_inputs).
  bool folds(int id, int into) const {
    const auto i = static_cast<std::size_t>(id);
    return count[i] == 1 && !fed[i] && first_waiter[i] > into;
  }
};
/// Whether x's T attr is a dtype the fused products have: float32 or bfloat16 (the session
/// folds only where the fused op's kernel of that dtype is registered).
inline bool fusable_dtype(const node& x) {
  const dtype t = x.attr<dtype>("T");
  return t == dtype::float32 || t == dtype::bfloat16;
}
/// The device `n` asks for: its own, or where it has none, that of the node its colocation
/// group is named after (an update colocated with its variable goes where the variable asks
/// to be; empty: anywhere).
inline const std::string& requested_device(const graph& g, const node& n) {
  if (!n.device().empty() || n.colocation().empty()) return n.device();
  const node* leader = g.find(n.colocation());
  return leader ? leader->device() : n.device();
}
/// Whether `inner` asks for no other device or colocation than `outer`, into which it folds
/// (the fused node takes outer's): a gradient's product made under a device scope folds into
/// an update that asks for no device but goes with a variable on that device.
inline bool folds_into(const graph& g, const node& inner, const node& outer) {
  return (inner.device().empty() || inner.device() == requested_device(g, outer)) &&
         (inner.colocation().empty() || inner.colocation() == outer.colocation());
}
/// (MatMul, reader) ids for each node of op `op` (float or bfloat16), its outputs not fed,
/// whose input `input` is output 0 of a MatMul that folds into it (readers_of::folds) and asks
/// for no other device or colocation.
inline std::vector<std::pair<int, int>> products_read_by(const graph& g, const readers_of& readers, std::string_view op,
                                                         int input) {
  std::vector<std::pair<int, int>> out;
  for (int id = 0; id < g.size(); ++id) {
    const node& x = g.at(id);
    if (x.op() != op || !fusable_dtype(x) || readers.fed[static_cast<std::size_t>(id)]) continue;
    const output value = x.inputs()[static_cast<std::size_t>(input)];
    const node& product = g.at(value.node);
    if (product.op() == "MatMul" && value.port == 0 && fusable_dtype(product) && readers.folds(product.id(), id) &&
        folds_into(g, product, x))
      out.emplace_back(product.id(), id);
  }
  return out;
}
/// A fused product's attrs: the MatMul's T and transposes.
inline attr_map product_attrs(const node& product) {
  attr_map attrs;
  attrs.set("T", product.attr<dtype>("T"));
  attrs.set("transpose_a", product.attr<bool>("transpose_a"));
  attrs.set("transpose_b", product.attr<bool>("transpose_b"));
  return attrs;
}
/// The control inputs of all of `nodes`.
inline std::vector<int> controls_of(std::initializer_list<const node*> nodes) {
  std::vector<int> out;
  for (const node* n : nodes)
    if (n) out.insert(out.end(), n->control_inputs().begin(), n->control_inputs().end());
  return out;
}
}  // namespace detail

/// A BiasAdd (and the Relu after it) and the MatMul whose product is its value, by node id.
struct fusable_bias {
  int matmul = -1;    ///< the MatMul node (fuse_conv.hpp: the Conv2D)
  int bias_add = -1;  ///< the BiasAdd node
  int relu = -1;      ///< the Relu that alone reads the BiasAdd, or -1
  /// Equal when every id is.
  friend bool operator==(const fusable_bias&, const fusable_bias&) = default;
};

namespace detail {
/// fusable_biases() for a BiasAdd after a node of op `inner` (MatMul, or Conv2D in
/// fuse_conv.hpp), float or bfloat16, output 0 (fusable_bias::matmul names it).
inline std::vector<fusable_bias> biases_after(const graph& g, const std::vector<output>& fed, const std::vector<output>& fetched,
                                              const std::vector<int>& targets, std::string_view inner) {
  const readers_of readers(g, fed, fetched, targets);
  std::vector<int> relu_of(static_cast<std::size_t>(g.size()), -1);  // the Relu reading a node's output 0
  for (int id = 0; id < g.size(); ++id)
    if (const node& r = g.at(id); r.op() == "Relu" && r.inputs()[0].port == 0) relu_of[static_cast<std::size_t>(r.inputs()[0].node)] = id;
  std::vector<fusable_bias> out;
  for (int id = 0; id < g.size(); ++id) {
    const node& add = g.at(id);
    if (add.op() != "BiasAdd" || !fusable_dtype(add) || add.attr<std::string>("data_format") != "NHWC") continue;
    const output value = add.inputs()[0];
    const node& product = g.at(value.node);
    if (product.op() != inner || value.port != 0 || !fusable_dtype(product) || !folds_into(g, product, add)) continue;
    fusable_bias f{product.id(), id, -1};
    if (const int r = relu_of[static_cast<std::size_t>(id)];
        r >= 0 && readers.folds(product.id(), r) && readers.folds(id, r) && !readers.fed[static_cast<std::size_t>(r)] &&
        folds_into(g, add, g.at(r)) && folds_into(g, product, g.at(r)))
      f.relu = r;
    else if (!readers.folds(product.id(), id) || readers.fed[static_cast<std::size_t>(id)])
      continue;
    out.push_back(f);
  }
  return out;
}
/// Replaces f's Relu, or its BiasAdd where there is none, by a node of op `op` (the inner
/// node's inputs and the bias) with `attrs` and relu, and the control inputs of every node
/// folded; control edges on the inner node and the BiasAdd move to it.
inline void fuse_bias(graph& g, const fusable_bias& f, const char* op, attr_map attrs) {
  const node& inner = g.at(f.matmul);
  const node& add = g.at(f.bias_add);
  const node* relu = f.relu >= 0 ? &g.at(f.relu) : nullptr;
  attrs.set("relu", relu != nullptr);
  std::vector<output> inputs{inner.inputs()[0], inner.inputs()[1], add.inputs()[1]};
  std::vector<int> controls = controls_of({&inner, &add, relu});
  const int into = relu ? f.relu : f.bias_add;
  g.replace(into, op, inputs, std::move(attrs), std::move(controls));
  g.redirect_control_inputs(f.matmul, into);
  if (relu) g.redirect_control_inputs(f.bias_add, into);
}
}  // namespace detail

/// The BiasAdds of g (NHWC, float or bfloat16) whose value is output 0 of a MatMul that
/// nothing else reads (no other input, fetch or target, no output fed; nodes that wait on it
/// come after the fused node, where their control edges move), with the Relu
/// that alone reads each, where there is one; every node folded asks for no other device or
/// colocation than the node that stays.
inline std::vector<fusable_bias> fusable_biases(const graph& g, const std::vector<output>& fed,
                                                const std::vector<output>& fetched, const std::vector<int>& targets) {
  return detail::biases_after(g, fed, fetched, targets, "MatMul");
}

/// Folds each of `biases` (from fusable_biases(g, ...)) into its MatMul in g: the Relu's node,
/// or the BiasAdd's where there is no Relu, replaced in place by _FusedMatMulBiasAdd(a, b,
/// bias) with the MatMul's transposes and the control inputs of every node folded.
inline void fuse_biases(graph& g, const std::vector<fusable_bias>& biases) {
  for (const auto& f : biases) detail::fuse_bias(g, f, ops::fused_matmul_bias_add_op, detail::product_attrs(g.at(f.matmul)));
}

/// A ReluGrad and the MatMul whose product is its gradients, by node id.
struct fusable_relu_grad {
  int matmul = -1;     ///< the MatMul node
  int relu_grad = -1;  ///< the ReluGrad node
  /// Equal when both ids are.
  friend bool operator==(const fusable_relu_grad&, const fusable_relu_grad&) = default;
};

/// The ReluGrads of g (float or bfloat16) whose gradients are output 0 of a MatMul that
/// nothing else reads (no other input, fetch or target, no output fed; nodes that wait on it come after the
/// ReluGrad, where their control edges move), with the ReluGrad's own output not fed, and the
/// MatMul asking for no other device or colocation than the ReluGrad.
inline std::vector<fusable_relu_grad> fusable_relu_grads(const graph& g, const std::vector<output>& fed,
                                                         const std::vector<output>& fetched, const std::vector<int>& targets) {
  std::vector<fusable_relu_grad> out;
  for (auto [product, rg] : detail::products_read_by(g, detail::readers_of(g, fed, fetched, targets), "ReluGrad", 0))
    out.push_back({product, rg});
  return out;
}

/// Folds each of `relu_grads` (from fusable_relu_grads(g, ...)) into its MatMul in g: the
/// ReluGrad's node replaced in place by _FusedMatMulReluGrad(a, b, features) with the
/// MatMul's transposes and the control inputs of both nodes.
inline void fuse_relu_grads(graph& g, const std::vector<fusable_relu_grad>& relu_grads) {
  for (const auto& f : relu_grads) {
    const node& rg = g.at(f.relu_grad);
    const node& product = g.at(f.matmul);
    std::vector<output> inputs{product.inputs()[0], product.inputs()[1], rg.inputs()[1]};
    g.replace(f.relu_grad, ops::fused_matmul_relu_grad_op, inputs, detail::product_attrs(product),
              detail::controls_of({&product, &rg}));
    g.redirect_control_inputs(f.matmul, f.relu_grad);
  }
}

/// An ApplyGradientDescent and the MatMul whose product is its delta, by node id.
struct fusable_update {
  int matmul = -1;  ///< the MatMul node
  int apply = -1;   ///< the ApplyGradientDescent node
  /// Equal when both ids are.
  friend bool operator==(const fusable_update&, const fusable_update&) = default;
};

/// The updates of g that fold into their MatMul: ApplyGradientDescent (float or bfloat16) whose
/// delta is output 0 of a MatMul that no other input, fetch or target names (nodes that wait on
/// it come after the update, where their control edges move), with no output of either node
/// fed, and that asks for no other device or colocation than the
/// update (the fused node runs where the update runs).
inline std::vector<fusable_update> fusable_updates(const graph& g, const std::vector<output>& fed,
                                                   const std::vector<output>& fetched, const std::vector<int>& targets) {
  std::vector<fusable_update> out;
  for (auto [product, apply] : detail::products_read_by(g, detail::readers_of(g, fed, fetched, targets), "ApplyGradientDescent", 2))
    out.push_back({product, apply});
  return out;
}

/// Folds each of `updates` (from fusable_updates(g, ...)) into its MatMul in g: the update's
/// node replaced in place by _FusedMatMulApplyGradientDescent(var, alpha, a, b) with the
/// MatMul's transposes and the control inputs of both nodes.
inline void fuse_updates(graph& g, const std::vector<fusable_update>& updates) {
  for (const auto& u : updates) {
    const node& apply = g.at(u.apply);
    const node& product = g.at(u.matmul);
    attr_map attrs = detail::product_attrs(product);
    attrs.set("use_locking", apply.attr<bool>("use_locking"));
    std::vector<output> inputs{apply.inputs()[0], apply.inputs()[1], product.inputs()[0], product.inputs()[1]};
    g.replace(u.apply, ops::fused_matmul_gradient_descent_op, inputs, std::move(attrs), detail::controls_of({&apply, &product}));
    g.redirect_control_inputs(u.matmul, u.apply);
  }
}

/// A mixed-precision ApplyAdam, the Cast of its gradient and the MatMul under it, by node id.
struct fusable_adam {
  int matmul = -1;  ///< the MatMul node (bfloat16)
  int cast = -1;    ///< the Cast to float32 of its product
  int apply = -1;   ///< the ApplyAdam node (float32)
  /// Equal when every id is.
  friend bool operator==(const fusable_adam&, const fusable_adam&) = default;
};

/// The ApplyAdams of g (float32, output not fed) whose gradient is output 0 of a Cast to
/// float32 of output 0 of a bfloat16 MatMul, the Cast and the MatMul each read by nothing
/// else (no other input, fetch or target, no output fed; nodes that wait on them come after
/// the ApplyAdam, where their control edges move), neither asking for another device or
/// colocation than the ApplyAdam.
inline std::vector<fusable_adam> fusable_adams(const graph& g, const std::vector<output>& fed,
                                               const std::vector<output>& fetched, const std::vector<int>& targets) {
  const detail::readers_of readers(g, fed, fetched, targets);
  std::vector<fusable_adam> out;
  for (int id = 0; id < g.size(); ++id) {
    const node& apply = g.at(id);
    if (apply.op() != "ApplyAdam" || apply.attr<dtype>("T") != dtype::float32 || readers.fed[static_cast<std::size_t>(id)])
      continue;
    const output grad = apply.inputs()[9];
    const node& cast = g.at(grad.node);
    if (cast.op() != "Cast" || grad.port != 0 || cast.attr<dtype>("DstT") != dtype::float32 ||
        cast.attr<dtype>("SrcT") != dtype::bfloat16 || !readers.folds(cast.id(), id) || !detail::folds_into(g, cast, apply))
      continue;
    const output value = cast.inputs()[0];
    const node& product = g.at(value.node);
    if (product.op() == "MatMul" && value.port == 0 && product.attr<dtype>("T") == dtype::bfloat16 &&
        readers.folds(product.id(), id) && detail::folds_into(g, product, apply))
      out.push_back({product.id(), cast.id(), id});
  }
  return out;
}

/// Folds each of `adams` (from fusable_adams(g, ...)) into its MatMul in g: the ApplyAdam's
/// node replaced in place by _FusedMatMulApplyAdam(var, m, v, the six hyperparameters, a, b)
/// with the MatMul's transposes, the ApplyAdam's use_locking and use_nesterov, and the
/// control inputs of all three nodes.
inline void fuse_adams(graph& g, const std::vector<fusable_adam>& adams) {
  for (const auto& f : adams) {
    const node& apply = g.at(f.apply);
    const node& cast = g.at(f.cast);
    const node& product = g.at(f.matmul);
    attr_map attrs;
    attrs.set("T", dtype::float32);
    attrs.set("TIn", dtype::bfloat16);
    attrs.set("transpose_a", product.attr<bool>("transpose_a"));
    attrs.set("transpose_b", product.attr<bool>("transpose_b"));
    attrs.set("use_locking", apply.attr<bool>("use_locking"));
    attrs.set("use_nesterov", apply.attr<bool>("use_nesterov"));
    std::vector<output> inputs(apply.inputs().begin(), apply.inputs().begin() + 9);
    inputs.push_back(product.inputs()[0]);
    inputs.push_back(product.inputs()[1]);
    g.replace(f.apply, ops::fused_matmul_adam_op, inputs, std::move(attrs), detail::controls_of({&apply, &cast, &product}));
    g.redirect_control_inputs(f.matmul, f.apply);
    g.redirect_control_inputs(f.cast, f.apply);
  }
}

}  // namespace weft::passes
