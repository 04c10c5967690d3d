/// @file
/// Variables (whitepaper §2): a Variable node names a persistent tensor held in a
/// resource container; it outputs a reference that Assign, AssignAdd and AssignSub update
/// and that other consumers read as the variable's value when they run.
///   Variable(; shape, dtype, container = '', shared_name = '')  shared_name defaults to the node name
///   Assign(ref, value; validate_shape = true)  ref := value
///   AssignAdd(ref, value), AssignSub(ref, value)  ref := ref +/- value (same shape)
/// Tensors kept for one step, which the gradient of a while loop uses (graph/gradients.hpp):
///   AccumulatorPush(key, value; accumulator) -> key   stores value under (accumulator, key),
///                                   key an int64 vector (the iteration path); passes key on
///   AccumulatorPop(key; accumulator, dtype, shape)  takes the value stored under (accumulator, key)
#pragma once

#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>
#include <weft/ops/math_ops.hpp>

namespace weft::ops {

/// The state family's op definitions (registered by register_state_ops()).
std::vector<op_def> state_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> state_op_defs() {
  std::vector<op_def> defs;
  defs.push_back(op_def_builder("Variable")
                     .variable()
                     .output("ref: Ref(dtype)")
                     .attr("shape: shape")
                     .attr("dtype: any type")
                     .attr("container: string = ''")
                     .attr("shared_name: string = ''")
                     .stateful()
                     .cheap()
                     .shape_fn([](shape_context& c) { c.set_output(0, c.attr<partial_shape>("shape")); })
                     .build());
  defs.push_back(op_def_builder("Assign")
                     .input("ref: Ref(T)")
                     .input("value: T")
                     .output("output_ref: Ref(T)")
                     .attr("T: any type")
                     .attr("validate_shape: bool = true")
                     .stateful()
                     .shape_fn([](shape_context& c) {
                       if (!c.attr<bool>("validate_shape")) return c.set_output(0, c.input(1));
                       const auto& r = c.input(0);
                       const auto& v = c.input(1);
                       if (r.rank_known() && v.rank_known()) {
                         bool ok = r.rank() == v.rank();
                         for (int i = 0; ok && i < r.rank(); ++i) ok = r[i] < 0 || v[i] < 0 || r[i] == v[i];
                         if (!ok) c.fail("value of shape ", v, " does not match the variable's shape ", r);
                       }
                       c.set_output(0, r);
                     })
                     .build());
  for (const char* name : {"AssignAdd", "AssignSub"})
    defs.push_back(op_def_builder(name)
                       .input("ref: Ref(T)")
                       .input("value: T")
                       .output("output_ref: Ref(T)")
                       .attr(number_type_attr)
                       .stateful()
                       .shape_fn([](shape_context& c) {
                         const auto& r = c.input(0);
                         const auto& v = c.input(1);
                         if (r.fully_known() && v.fully_known() && !(r == v))
                           c.fail("value of shape ", v, " does not match the variable's shape ", r);
                         c.set_output(0, r);
                       })
                       .build());
  defs.push_back(op_def_builder("AccumulatorPush")
                     .runs_on_dead_value()
                     .input("key: int64")
                     .input("value: T")
                     .output("key_out: int64")
                     .attr("T: type")
                     .attr("accumulator: string")
                     .stateful()
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 1, "key");
                       c.set_output(0, c.input(0));
                     })
                     .build());
  defs.push_back(op_def_builder("AccumulatorPop")
                     .input("key: int64")
                     .output("value: dtype")
                     .attr("dtype: type")
                     .attr("shape: shape")
                     .attr("accumulator: string")
                     .stateful()
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 1, "key");
                       c.set_output(0, c.attr<partial_shape>("shape"));
                     })
                     .build());
  return defs;
}
#endif

/// Adds the state ops to the global registry, once; registering the family's kernels
/// calls it.
inline void register_state_ops() { op_registry::global().add_family("state", state_op_defs); }

/// The ops of this family as C++ types (framework/kernel_for.hpp).
WEFT_DETAIL_OP_TYPE(Variable, state)
WEFT_DETAIL_OP_TYPE(Assign, state)
WEFT_DETAIL_OP_TYPE(AssignAdd, state)
WEFT_DETAIL_OP_TYPE(AssignSub, state)
WEFT_DETAIL_OP_TYPE(AccumulatorPush, state)
WEFT_DETAIL_OP_TYPE(AccumulatorPop, state)
namespace families {  // the whole family (its kernels for every dtype, on each device type)
/// The state family as a C++ type: use_kernels<ops::families::state>() registers its ops and kernels.
struct state {
  static constexpr const char* name = "state";  ///< the family's name
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using types = type_list<Variable, Assign, AssignAdd, AssignSub, AccumulatorPush, AccumulatorPop>;  ///< its op types
  /// Registers the family's op definitions.
  static void define() { register_state_ops(); }
};
}  // namespace families

}  // namespace weft::ops
