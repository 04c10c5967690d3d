/// @file
/// Core ops, which every graph registers (register_core_ops()): sources, Identity and NoOp.
///   Const(; value, dtype)         the tensor `value`
///   Placeholder(; dtype, shape)   a tensor fed to run()
///   Identity(input)               its input, unchanged (no copy)
///   NoOp()                        nothing; a target that gathers control edges
///
/// The other standard ops come in families (array, math, reduction, matrix, random,
/// state), each defined in <weft/ops/FAMILY_ops.hpp> and added to the registry when the
/// program registers it: by registering the family's CPU kernels, by
/// weft::ops::register_FAMILY_ops(), or with them all by register_standard_ops()
/// (<weft/ops/all.hpp>) or <weft/kernels/cpu/all.hpp>. A program compiles only the op
/// definitions it uses; standard_op_family (<weft/ops/standard.hpp>) finds an op's family
/// among the families' op types, so that graph::op can tell an op that does not exist from
/// one whose family the program has not registered.
#pragma once

#include <string_view>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/gradient_rule.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>

namespace weft::ops {

/// The core family's op definitions (registered by register_core_ops()).
std::vector<op_def> core_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> core_op_defs() {
  std::vector<op_def> defs;
  defs.push_back(op_def_builder("Const")
                     .constant()
                     .output("output: dtype")
                     .attr("value: tensor")
                     .attr("dtype: any type")
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       const auto& v = c.attr<tensor>("value");
                       if (v.dtype() != c.attr<dtype>("dtype"))
                         c.fail("value has dtype ", v.dtype(), " but attr dtype is ", c.attr<dtype>("dtype"));
                       c.set_output(0, v.shape());
                     })
                     .build());
  defs.push_back(op_def_builder("Placeholder")
                     .feed()
                     .output("output: dtype")
                     .attr("dtype: any type")
                     .attr("shape: shape")
                     .cheap()
                     .shape_fn([](shape_context& c) { c.set_output(0, c.attr<partial_shape>("shape")); })
                     .build());
  // A Placeholder with a value when it is not fed: its input, passed through (TensorFlow's
  // PlaceholderWithDefault). Not a feed op: the step that does not feed it runs it.
  defs.push_back(op_def_builder("PlaceholderWithDefault")
                     .input("input: dtype")
                     .output("output: dtype")
                     .attr("dtype: any type")
                     .attr("shape: shape")
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       const auto& declared = c.attr<partial_shape>("shape");
                       if (!shapes_compatible(declared, c.input(0)))
                         c.fail("the default value's shape ", c.input(0), " is not the declared shape ", declared);
                       c.set_output(0, declared);
                     })
                     .build());
  defs.push_back(op_def_builder("Identity").input("input: T").output("output: T").attr("T: any type").cheap()
                     .shape_fn(same_shape).build());
  defs.push_back(op_def_builder("NoOp").cheap().build());
  return defs;
}
#endif

/// An op of the standard library and the family that defines it.
struct standard_op {
  std::string_view name;    ///< the op's name
  std::string_view family;  ///< its family's name
};


/// How a program registers `family`, for error messages.
inline std::string_view family_registration_hint(std::string_view family) {
  if (family == "array") return "weft::ops::register_array_ops() or weft::cpu::register_array_kernels()";
  if (family == "math") return "weft::ops::register_math_ops() or weft::cpu::register_elementwise_kernels()";
  if (family == "reduction")
    return "weft::ops::register_reduction_ops() or weft::cpu::register_reduction_kernels()";
  if (family == "matrix")
    return "weft::ops::register_matrix_ops(), weft::cpu::register_matmul_kernels() or "
           "weft::cpu::register_linalg_kernels()";
  if (family == "random") return "weft::ops::register_random_ops() or weft::cpu::register_random_kernels()";
  if (family == "state") return "weft::ops::register_state_ops() or weft::cpu::register_state_kernels()";
  if (family == "nn") return "weft::ops::register_nn_ops() or weft::cpu::register_nn_kernels()";
  if (family == "training") return "weft::ops::register_training_ops() or weft::cpu::register_training_kernels()";
  if (family == "io") return "weft::ops::register_io_ops() or weft::cpu::register_io_kernels()";
  if (family == "parsing") return "weft::ops::register_parsing_ops() or weft::cpu::register_parsing_kernels()";
  if (family == "summary") return "weft::ops::register_summary_ops() or weft::cpu::register_summary_kernels()";
  if (family == "data_flow") return "weft::ops::register_data_flow_ops() or weft::cpu::register_data_flow_kernels()";
  if (family == "control") return "weft::ops::register_control_flow_ops() (the executor runs these ops itself)";
  return "weft::ops::register_standard_ops()";
}

/// Adds the core ops to the registry, once (every graph does, on construction).
inline void register_core_ops() { op_registry::global().add_family("core", core_op_defs); }

}  // namespace weft::ops

// ---- gradient rules (framework/gradient_rule.hpp), each written once over a value type ----

namespace weft::gradients {

/// The gradient rule of Identity, PlaceholderWithDefault (framework/gradient_rule.hpp).
struct identity_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {a.d()}; }
};

}  // namespace weft::gradients

namespace weft::ops {

/// The ops of this family as C++ types (framework/kernel_for.hpp), each with its gradient
/// rule where it has one.
WEFT_DETAIL_OP_TYPE(Const, core)
WEFT_DETAIL_OP_TYPE(Placeholder, core)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Identity, core, gradients::identity_grad)
/// When not fed, its output is its input: the gradient passes through to the default.
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(PlaceholderWithDefault, core, gradients::identity_grad)
WEFT_DETAIL_OP_TYPE(NoOp, core)
namespace families {  // the whole family (its kernels for every dtype, on each device type)
/// The core family as a C++ type: use_kernels<ops::families::core>() registers its ops and kernels.
struct core {
  static constexpr const char* name = "core";  ///< the family's name
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using types = type_list<Const, Placeholder, PlaceholderWithDefault, Identity, NoOp>;  ///< its op types
  /// Registers the family's op definitions.
  static void define() { register_core_ops(); }
};
}  // namespace families

}  // namespace weft::ops
