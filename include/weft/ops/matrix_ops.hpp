/// @file
/// Matrix ops.
///   MatMul(a, b; transpose_a, transpose_b)  (M,K) x (K,N) -> (M,N) after the transposes
///   BatchMatMulV2(x, y; adj_x, adj_y)       (...,M,K) x (...,K,N) -> (...,M,N), batch dims broadcast;
///                                           adj_* is the conjugate transpose
///   MatrixInverse(input; adjoint)           (...,N,N) -> (...,N,N); a singular matrix is an error
///   MatrixDeterminant(input)                (...,N,N) -> (...)
///   _FusedMatMulBiasAdd(a, b, bias; transpose_a, transpose_b, relu)
///                                           MatMul then BiasAdd (then Relu), in the product's
///                                           output pass (a session's rewrite: graph/passes/fuse_matmul.hpp)
///   _FusedMatMulReluGrad(a, b, features; transpose_a, transpose_b)
///                                           ReluGrad(MatMul(a, b), features), the same way
#pragma once

#include <string>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/gradient_rule.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>

namespace weft::ops {

/// MatMul's and BatchMatMul's allowed T.
inline constexpr const char* matmul_type_attr = "T: {int32, int64, float16, bfloat16, float32, float64, complex64, complex128}";
/// The linear algebra ops' allowed T (MatrixInverse, ...).
inline constexpr const char* linalg_type_attr = "T: {float32, float64, complex64, complex128}";

/// Fails unless input i, when its rank is known, has rank at least `rank`.
inline void check_rank_at_least(shape_context& c, int i, int rank) {
  require_rank_at_least(c, i, rank, "input " + std::to_string(i));
}

/// The shape [m, n] of MatMul's product of inputs `first` and `first` + 1 (0 and 1 for
/// MatMul), each transposed where its transpose_a / transpose_b attr asks: fails unless each
/// is a matrix where its rank is known, and where the inner dimensions are known and differ;
/// [?, ?] when a rank is unknown. (MatMul, the fused products and the fused updates share it.)
inline partial_shape matmul_shape(shape_context& c, int first = 0) {
  const auto& a = c.input(first);
  const auto& b = c.input(first + 1);
  for (int i = first; i < first + 2; ++i)
    if (c.input(i).rank_known() && c.input(i).rank() != 2) c.fail("input ", i, " must be a matrix, got shape ", c.input(i));
  if (!a.rank_known() || !b.rank_known()) return partial_shape::unknown_of_rank(2);
  const bool ta = c.attr<bool>("transpose_a"), tb = c.attr<bool>("transpose_b");
  const auto ka = a[ta ? 0 : 1], kb = b[tb ? 1 : 0];
  if (ka >= 0 && kb >= 0 && ka != kb) c.fail("inner dimensions differ (", ka, " vs ", kb, ")");
  return partial_shape{a[ta ? 1 : 0], b[tb ? 0 : 1]};
}

/// Static shape rules (framework/static_rule.hpp).
namespace static_rules {
/// MatMul: [m, k] x [k, n] -> [m, n], each operand transposed first when asked.
constexpr dims<2> matmul(const auto& a, const auto& b, bool transpose_a, bool transpose_b) {
  return {dim_or(a, transpose_a ? 1 : 0), dim_or(b, transpose_b ? 0 : 1)};
}
/// BatchMatMulV2: the broadcast batch dims (all but the last two), then m and n.
template <auto X, auto Y, bool AdjX, bool AdjY>
constexpr auto batch_matmul() {
  constexpr auto batch = broadcast<leading<X, 2>(), leading<Y, 2>()>();
  dims<batch.size() + 2> out{};
  for (std::size_t i = 0; i < batch.size(); ++i) out[i] = batch[i];
  out[batch.size()] = from_right(X, AdjX ? 0 : 1);
  out[batch.size() + 1] = from_right(Y, AdjY ? 1 : 0);
  return out;
}
/// MatrixInverse keeps its input's dims; MatrixDeterminant drops the last two.
template <auto X>
constexpr auto matrix_determinant() {
  return leading<X, 2>();
}
}  // namespace static_rules

/// The op a session puts in place of a BiasAdd (or the Relu after it) whose value is a float
/// or bfloat16 MatMul's product that nothing else reads (graph/passes/fuse_matmul.hpp): the
/// bias, and max(x, 0) when `relu`, added in the product's output pass.
inline constexpr const char* fused_matmul_bias_add_op = "_FusedMatMulBiasAdd";
/// The op a session puts in place of a ReluGrad whose gradients are a float or bfloat16
/// MatMul's product that nothing else reads (graph/passes/fuse_matmul.hpp): the product where
/// the features are above 0, else 0, in the product's output pass.
inline constexpr const char* fused_matmul_relu_grad_op = "_FusedMatMulReluGrad";

/// The matrix family's op definitions (registered by register_matrix_ops()).
std::vector<op_def> matrix_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> matrix_op_defs() {
  std::vector<op_def> defs;
  defs.push_back(op_def_builder("MatMul")
                     .input("a: T")
                     .input("b: T")
                     .output("product: T")
                     .attr(matmul_type_attr)
                     .attr("transpose_a: bool = false")
                     .attr("transpose_b: bool = false")
                     .shape_fn([](shape_context& c) { c.set_output(0, matmul_shape(c)); })
                     .flops([](const op_cost_args& c) {  // 2mnk: a multiply and an add per term
                       const double k = c.input_dim(0, get_attr<bool>(c.attrs, "transpose_a", "MatMul") ? 0 : 1);
                       return 2 * op_cost_args::elements(c.outputs[0]) * k;
                     })
                     .build());
  defs.push_back(op_def_builder("BatchMatMulV2")
                     .input("x: T")
                     .input("y: T")
                     .output("output: T")
                     .attr(matmul_type_attr)
                     .attr("adj_x: bool = false")
                     .attr("adj_y: bool = false")
                     .shape_fn([](shape_context& c) {
                       check_rank_at_least(c, 0, 2);
                       check_rank_at_least(c, 1, 2);
                       const auto& x = c.input(0);
                       const auto& y = c.input(1);
                       if (!x.rank_known() || !y.rank_known()) return;
                       bool ax = c.attr<bool>("adj_x"), ay = c.attr<bool>("adj_y");
                       int rx = x.rank(), ry = y.rank();
                       auto m = x[ax ? rx - 1 : rx - 2], kx = x[ax ? rx - 2 : rx - 1];
                       auto ky = y[ay ? ry - 1 : ry - 2], n = y[ay ? ry - 2 : ry - 1];
                       if (kx >= 0 && ky >= 0 && kx != ky) c.fail("inner dimensions differ (", kx, " vs ", ky, ")");
                       std::vector<std::int64_t> bx(x.dims().begin(), x.dims().end() - 2);
                       std::vector<std::int64_t> by(y.dims().begin(), y.dims().end() - 2);
                       auto batch = broadcast_dims(bx, by);
                       if (!batch)
                         c.fail("batch dimensions ", partial_shape(bx), " and ", partial_shape(by),
                                " are not broadcastable");
                       batch->push_back(m);
                       batch->push_back(n);
                       c.set_output(0, partial_shape(*batch));
                     })
                     .flops([](const op_cost_args& c) {
                       const double k = c.input_dim(0, get_attr<bool>(c.attrs, "adj_x", "BatchMatMulV2") ? -2 : -1);
                       return 2 * op_cost_args::elements(c.outputs[0]) * k;
                     })
                     .build());
  auto square = [](shape_context& c) {
    check_rank_at_least(c, 0, 2);
    const auto& in = c.input(0);
    if (!in.rank_known()) return false;
    auto r = in[in.rank() - 2], k = in[in.rank() - 1];
    if (r >= 0 && k >= 0 && r != k) c.fail("input must hold square matrices, got shape ", in);
    return true;
  };
  defs.push_back(op_def_builder("MatrixInverse")
                     .input("input: T")
                     .output("output: T")
                     .attr(linalg_type_attr)
                     .attr("adjoint: bool = false")
                     .shape_fn([square](shape_context& c) {
                       if (square(c)) c.set_output(0, c.input(0));
                     })
                     .build());
  // MatMul, BiasAdd and (relu) Relu as one node; only a session's own copy of a graph holds it.
  defs.push_back(op_def_builder(fused_matmul_bias_add_op)
                     .input("a: T")
                     .input("b: T")
                     .input("bias: T")
                     .output("output: T")
                     .attr("T: {float32, bfloat16}")
                     .attr("transpose_a: bool = false")
                     .attr("transpose_b: bool = false")
                     .attr("relu: bool = false")
                     .shape_fn([](shape_context& c) {
                       const auto& bias = c.input(2);
                       if (bias.rank_known() && bias.rank() != 1) c.fail("the bias must be a vector, got shape ", bias);
                       const partial_shape out = matmul_shape(c);
                       if (out[1] >= 0 && bias.rank_known() && bias[0] >= 0 && bias[0] != out[1])
                         c.fail("the bias has ", bias[0], " values for ", out[1], " columns");
                       c.set_output(0, out);
                     })
                     .flops([](const op_cost_args& c) {  // 2mnk, and the bias and ReLU per element
                       const double k = c.input_dim(0, get_attr<bool>(c.attrs, "transpose_a", fused_matmul_bias_add_op) ? 0 : 1);
                       return op_cost_args::elements(c.outputs[0]) * (2 * k + 2);
                     })
                     .build());
  // MatMul and the ReluGrad that reads it as one node; only a session's own copy of a graph holds it.
  defs.push_back(op_def_builder(fused_matmul_relu_grad_op)
                     .input("a: T")
                     .input("b: T")
                     .input("features: T")
                     .output("backprops: T")
                     .attr("T: {float32, bfloat16}")
                     .attr("transpose_a: bool = false")
                     .attr("transpose_b: bool = false")
                     .shape_fn([](shape_context& c) {
                       const auto& f = c.input(2);
                       if (f.rank_known() && f.rank() != 2) c.fail("input 2 must be a matrix, got shape ", f);
                       const partial_shape out = matmul_shape(c);
                       if (!shapes_compatible(out, f))
                         c.fail("the features of shape ", f, " do not match the product's shape ", out);
                       c.set_output(0, out);
                     })
                     .flops([](const op_cost_args& c) {  // 2mnk, and the mask per element
                       const double k = c.input_dim(0, get_attr<bool>(c.attrs, "transpose_a", fused_matmul_relu_grad_op) ? 0 : 1);
                       return op_cost_args::elements(c.outputs[0]) * (2 * k + 1);
                     })
                     .build());
  defs.push_back(op_def_builder("MatrixDeterminant")
                     .input("input: T")
                     .output("output: T")
                     .attr(linalg_type_attr)
                     .shape_fn([square](shape_context& c) {
                       if (!square(c)) return;
                       const auto& d = c.input(0).dims();
                       c.set_output(0, partial_shape(std::vector<std::int64_t>(d.begin(), d.end() - 2)));
                     })
                     .build());
  return defs;
}
#endif

/// Adds the matrix ops to the global registry, once; registering the family's kernels
/// calls it.
inline void register_matrix_ops() { op_registry::global().add_family("matrix", matrix_op_defs); }

}  // namespace weft::ops

// ---- gradient rules (framework/gradient_rule.hpp), each written once over a value type ----

namespace weft::gradients {

/// The gradient rule of MatMul (framework/gradient_rule.hpp).
struct matmul_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const bool ta = a.n.template attr<bool>("transpose_a"), tb = a.n.template attr<bool>("transpose_b");
    const V &x = a.x[0], &y = a.x[1], &d = a.d();
    if (!ta && !tb) return {matmul(d, y, false, true), matmul(x, d, true, false)};
    if (!ta && tb) return {matmul(d, y, false, false), matmul(d, x, true, false)};
    if (ta && !tb) return {matmul(y, d, false, true), matmul(x, d, false, false)};
    return {matmul(y, d, true, true), matmul(d, x, true, true)};
  }
};

/// The gradient rule of BatchMatMulV2 (framework/gradient_rule.hpp): MatMul's, with batch dims summed back where they were broadcast.
struct batch_matmul_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const bool ax = a.n.template attr<bool>("adj_x"), ay = a.n.template attr<bool>("adj_y");
    const V &x = a.x[0], &y = a.x[1], &d = a.d();
    if (!ax && !ay) return {sum_to(batch_matmul(d, y, false, true), x), sum_to(batch_matmul(x, d, true, false), y)};
    if (!ax && ay) return {sum_to(batch_matmul(d, y, false, false), x), sum_to(batch_matmul(d, x, true, false), y)};
    if (ax && !ay) return {sum_to(batch_matmul(y, d, false, true), x), sum_to(batch_matmul(x, d, false, false), y)};
    return {sum_to(batch_matmul(y, d, true, true), x), sum_to(batch_matmul(d, x, true, true), y)};
  }
};

/// The gradient rule of MatrixInverse (framework/gradient_rule.hpp): Y = A^-1: dA = -Y^T d Y^T; with adjoint (Y = A^-T), -Y d^T Y.
struct matrix_inverse_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V& y = a.y[0];
    if (a.n.template attr<bool>("adjoint")) return {-batch_matmul(batch_matmul(y, a.d(), false, true), y, false, false)};
    return {-batch_matmul(batch_matmul(y, a.d(), true, false), y, false, true)};
  }
};

/// The gradient rule of MatrixDeterminant (framework/gradient_rule.hpp): d det(A) / dA = det(A) A^-T.
struct matrix_determinant_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V& x = a.x[0];
    const V scale = reshape(a.d() * a.y[0], concat({shape_tensor(a.y[0]), int64_vector(x, {1, 1})}, int_constant(x, 0)));
    return {scale * matrix_inverse(x, true)};
  }
};

}  // namespace weft::gradients

namespace weft::ops {

/// The ops of this family as C++ types (framework/kernel_for.hpp), each with its gradient
/// rule where it has one.
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(MatMul, matrix, gradients::matmul_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(BatchMatMulV2, matrix, gradients::batch_matmul_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(MatrixInverse, matrix, gradients::matrix_inverse_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(MatrixDeterminant, matrix, gradients::matrix_determinant_grad)
/// _FusedMatMulBiasAdd as a C++ type (of the matrix family): a session's rewrite adds it
/// (graph/passes/fuse_matmul.hpp), no program does.
struct FusedMatMulBiasAdd {
  static constexpr const char* name = fused_matmul_bias_add_op;  ///< "_FusedMatMulBiasAdd"
  /// The full CPU kernel registry has its kernel.
  static constexpr bool in_cpu_registry = true;
  /// Registers its family's op definitions.
  static void define() { register_matrix_ops(); }
};
/// _FusedMatMulReluGrad as a C++ type (of the matrix family): a session's rewrite adds it
/// (graph/passes/fuse_matmul.hpp), no program does.
struct FusedMatMulReluGrad {
  static constexpr const char* name = fused_matmul_relu_grad_op;  ///< "_FusedMatMulReluGrad"
  /// The full CPU kernel registry has its kernel.
  static constexpr bool in_cpu_registry = true;
  /// Registers its family's op definitions.
  static void define() { register_matrix_ops(); }
};
namespace families {  // the whole family (its kernels for every dtype, on each device type)
/// The matrix family as a C++ type: use_kernels<ops::families::matrix>() registers its ops and kernels.
struct matrix {
  static constexpr const char* name = "matrix";  ///< the family's name
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using types = type_list<MatMul, BatchMatMulV2, MatrixInverse, MatrixDeterminant, FusedMatMulBiasAdd, FusedMatMulReluGrad>;  ///< its op types
  /// Registers the family's op definitions.
  static void define() { register_matrix_ops(); }
};
}  // namespace families

}  // namespace weft::ops
