/// @file
/// Optimizer update ops (TensorFlow's Apply*): each updates a variable, and its slot
/// variables, in place from a gradient, and outputs the variable's reference. Hyper-
/// parameters are scalar tensors of the variable's dtype, so they can be fed or decayed.
///   ApplyGradientDescent(var, alpha, delta)               var -= alpha * delta
///   ApplyMomentum(var, accum, lr, grad, momentum; use_nesterov = false)
///       accum = momentum * accum + grad
///       var  -= lr * accum                     (Nesterov: lr * (grad + momentum * accum))
///   ApplyAdagrad(var, accum, lr, grad)        accum += grad^2; var -= lr * grad / sqrt(accum)
///   ApplyRMSProp(var, ms, mom, lr, rho, momentum, epsilon, grad)
///       ms  = rho * ms + (1 - rho) * grad^2
///       mom = momentum * mom + lr * grad / sqrt(ms + epsilon);  var -= mom
///   ApplyAdam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad; use_nesterov = false)
///       m = beta1 * m + (1 - beta1) * grad;  v = beta2 * v + (1 - beta2) * grad^2
///       var -= lr * sqrt(1 - beta2_power) / (1 - beta1_power) * m / (sqrt(v) + epsilon)
///                                              (Nesterov: m replaced by beta1 * m + (1 - beta1) * grad)
///   _FusedMatMulApplyGradientDescent(var, alpha, a, b; transpose_a, transpose_b)
///       var -= alpha * op(a) op(b)             (a session's rewrite of ApplyGradientDescent on a MatMul)
///   _FusedMatMulApplyAdam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, a, b;
///                         transpose_a, transpose_b, use_nesterov)
///       ApplyAdam with grad = op(a) op(b), a and b bfloat16 and the rest float32 (a session's
///       rewrite of mixed precision's ApplyAdam on Cast(MatMul) to float32)
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>
#include <weft/ops/math_ops.hpp>
#include <weft/ops/matrix_ops.hpp>

namespace weft::ops {

/// The op a session puts in place of an ApplyGradientDescent whose delta is a MatMul that
/// nothing else reads (graph/passes/fuse_matmul.hpp): var -= alpha * op(a) op(b) as one GEMM.
inline constexpr const char* fused_matmul_gradient_descent_op = "_FusedMatMulApplyGradientDescent";
/// The op a session puts in place of a float32 ApplyAdam whose gradient is a bfloat16
/// MatMul's product cast to float32, the Cast and the MatMul read by nothing else (mixed
/// precision; graph/passes/fuse_matmul.hpp): Adam's step from the product's float sums, each
/// block of them as it completes.
inline constexpr const char* fused_matmul_adam_op = "_FusedMatMulApplyAdam";

/// The training family's op definitions (registered by register_training_ops()).
std::vector<op_def> training_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> training_op_defs() {
  std::vector<op_def> defs;
  // refs: the variable and its slots; scalars: the hyperparameters; the gradient goes at
  // input `grad_position` (TensorFlow's orders differ: ApplyMomentum's comes before momentum).
  auto apply = [&](const char* name, std::initializer_list<const char*> refs, std::initializer_list<const char*> scalars,
                   const char* grad_name, int grad_position, bool nesterov) {
    op_def_builder b(name);
    std::vector<std::string> inputs;
    for (const char* r : refs) inputs.push_back(std::string(r) + ": Ref(T)");
    for (const char* s : scalars) inputs.push_back(std::string(s) + ": T");
    inputs.insert(inputs.begin() + grad_position, std::string(grad_name) + ": T");
    for (const auto& in : inputs) b.input(in);
    b.output("out: Ref(T)").attr(real_float_type_attr).attr("use_locking: bool = false");
    if (nesterov) b.attr("use_nesterov: bool = false");
    const int n_refs = static_cast<int>(refs.size()), grad = grad_position;
    defs.push_back(b.stateful()
                       .shape_fn([n_refs, grad](shape_context& c) {
                         partial_shape s = c.input(0);
                         for (int i = 0; i < c.num_inputs(); ++i) {
                           const auto& in = c.input(i);
                           if (i < n_refs || i == grad) {
                             if (s.fully_known() && in.fully_known() && !(s == in))
                               c.fail("input ", i, " of shape ", in, " does not match the variable's shape ", s);
                           } else if (in.rank_known() && in.rank() != 0) {
                             c.fail("input ", i, " (a hyperparameter) must be a scalar, got shape ", in);
                           }
                         }
                         c.set_output(0, s);
                       })
                       .build());
  };
  apply("ApplyGradientDescent", {"var"}, {"alpha"}, "delta", 2, false);
  apply("ApplyMomentum", {"var", "accum"}, {"lr", "momentum"}, "grad", 3, true);
  apply("ApplyAdagrad", {"var", "accum"}, {"lr"}, "grad", 3, false);
  apply("ApplyRMSProp", {"var", "ms", "mom"}, {"lr", "rho", "momentum", "epsilon"}, "grad", 7, false);
  apply("ApplyAdam", {"var", "m", "v"}, {"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"}, "grad", 9,
        true);
  // A fused update's operands a and b (inputs `first` and `first` + 1): matrices whose
  // product, op(a) op(b) by the transpose attrs (matmul_shape), has the variable's shape
  // (input 0), which is the output's.
  const auto product_fits = [](shape_context& c, int first) {
    const partial_shape& v = c.input(0);
    const partial_shape product = matmul_shape(c, first);
    if (v.fully_known() && product.fully_known() && !(v == product))
      c.fail("the product of shape ", product, " does not match the variable's shape ", v);
    c.set_output(0, v);
  };
  // ApplyGradientDescent whose delta is a MatMul's product, as one GEMM that adds
  // -alpha * op(a) op(b) to the variable where it is: no gradient is written and read back.
  // Only a session's own copy of a graph holds it (graph/passes/fuse_matmul.hpp), in place
  // of an ApplyGradientDescent whose MatMul nothing else reads; no program adds it.
  defs.push_back(op_def_builder(fused_matmul_gradient_descent_op)
                     .input("var: Ref(T)")
                     .input("alpha: T")
                     .input("a: T")
                     .input("b: T")
                     .output("out: Ref(T)")
                     .attr("T: {float32, bfloat16}")
                     .attr("transpose_a: bool = false")
                     .attr("transpose_b: bool = false")
                     .attr("use_locking: bool = false")
                     .stateful()
                     .shape_fn([product_fits](shape_context& c) {
                       if (c.input(1).rank_known() && c.input(1).rank() != 0)
                         c.fail("input 1 (alpha) must be a scalar, got shape ", c.input(1));
                       product_fits(c, 2);
                     })
                     .flops([](const op_cost_args& c) {  // the product's 2mnk, and 2mn for the update
                       const double k = c.input_dim(2, get_attr<bool>(c.attrs, "transpose_a", fused_matmul_gradient_descent_op) ? 0 : 1);
                       return 2 * op_cost_args::elements(c.outputs[0]) * (k + 1);
                     })
                     .build());
  // ApplyAdam whose gradient is op(a) op(b) of bfloat16 a and b, cast to float32: Adam's step
  // on each block of the product's float sums as it completes (the gradient is neither
  // rounded to bfloat16, cast, written nor read back). Only a session's copy of a graph holds it.
  defs.push_back(op_def_builder(fused_matmul_adam_op)
                     .input("var: Ref(T)")
                     .input("m: Ref(T)")
                     .input("v: Ref(T)")
                     .input("beta1_power: T")
                     .input("beta2_power: T")
                     .input("lr: T")
                     .input("beta1: T")
                     .input("beta2: T")
                     .input("epsilon: T")
                     .input("a: TIn")
                     .input("b: TIn")
                     .output("out: Ref(T)")
                     .attr("T: {float32}")
                     .attr("TIn: {bfloat16}")
                     .attr("transpose_a: bool = false")
                     .attr("transpose_b: bool = false")
                     .attr("use_locking: bool = false")
                     .attr("use_nesterov: bool = false")
                     .stateful()
                     .shape_fn([product_fits](shape_context& c) {
                       const partial_shape& v = c.input(0);
                       for (int i = 1; i < 3; ++i)
                         if (v.fully_known() && c.input(i).fully_known() && !(c.input(i) == v))
                           c.fail("input ", i, " of shape ", c.input(i), " does not match the variable's shape ", v);
                       for (int i = 3; i < 9; ++i)
                         if (c.input(i).rank_known() && c.input(i).rank() != 0)
                           c.fail("input ", i, " (a hyperparameter) must be a scalar, got shape ", c.input(i));
                       product_fits(c, 9);
                     })
                     .flops([](const op_cost_args& c) {  // the product's 2mnk, and about 12 a weight for Adam
                       const double k = c.input_dim(9, get_attr<bool>(c.attrs, "transpose_a", fused_matmul_adam_op) ? 0 : 1);
                       return op_cost_args::elements(c.outputs[0]) * (2 * k + 12);
                     })
                     .build());
  return defs;
}
#endif

/// Adds the training ops to the global registry, once; registering the family's kernels
/// calls it.
inline void register_training_ops() { op_registry::global().add_family("training", training_op_defs); }

/// The ops of this family as C++ types (framework/kernel_for.hpp).
WEFT_DETAIL_OP_TYPE(ApplyGradientDescent, training)
WEFT_DETAIL_OP_TYPE(ApplyMomentum, training)
WEFT_DETAIL_OP_TYPE(ApplyAdagrad, training)
WEFT_DETAIL_OP_TYPE(ApplyRMSProp, training)
WEFT_DETAIL_OP_TYPE(ApplyAdam, training)
/// _FusedMatMulApplyGradientDescent as a C++ type (of the training family): a session's
/// rewrite adds it (graph/passes/fuse_matmul.hpp), no program does.
struct FusedMatMulApplyGradientDescent {
  static constexpr const char* name = fused_matmul_gradient_descent_op;  ///< "_FusedMatMulApplyGradientDescent"
  /// The full CPU kernel registry has its kernel.
  static constexpr bool in_cpu_registry = true;
  /// Registers its family's op definitions.
  static void define() { register_training_ops(); }
};
/// _FusedMatMulApplyAdam as a C++ type (of the training family): a session's rewrite adds it
/// (graph/passes/fuse_matmul.hpp), no program does.
struct FusedMatMulApplyAdam {
  static constexpr const char* name = fused_matmul_adam_op;  ///< "_FusedMatMulApplyAdam"
  /// The full CPU kernel registry has its kernel.
  static constexpr bool in_cpu_registry = true;
  /// Registers its family's op definitions.
  static void define() { register_training_ops(); }
};
namespace families {  // the whole family (its kernels for every dtype, on each device type)
/// The training family as a C++ type: use_kernels<ops::families::training>() registers its ops and kernels.
struct training {
  static constexpr const char* name = "training";  ///< the family's name
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using types = type_list<ApplyGradientDescent, ApplyMomentum, ApplyAdagrad, ApplyRMSProp, ApplyAdam,
                          FusedMatMulApplyGradientDescent, FusedMatMulApplyAdam>;  ///< its op types
  /// Registers the family's op definitions.
  static void define() { register_training_ops(); }
};
}  // namespace families

}  // namespace weft::ops
