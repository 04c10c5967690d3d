// Elementwise ops. Binary ops broadcast NumPy-style; comparisons return bool.
//   unary:   y = f(x), shape(y) = shape(x)
//   binary:  z = f(x, y), shape(z) = broadcast(shape(x), shape(y))
//   SelectV2: out = cond ? t : e, all three broadcast
//   Select:  out = cond ? t : e, TensorFlow's first form: t and e of one shape; cond of
//            that shape, a scalar, or a vector picking whole rows (along dim 0) of t or e
//   Cast:    y = static_cast<DstT>(x)
#pragma once

#include <vector>

#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>

namespace weft::ops {

inline constexpr const char* number_type_attr =
    "T: {int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64, "
    "complex64, complex128}";
inline constexpr const char* real_type_attr =
    "T: {int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64}";
inline constexpr const char* signed_type_attr =
    "T: {int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64, complex128}";
inline constexpr const char* float_type_attr = "T: {float16, bfloat16, float32, float64, complex64, complex128}";
inline constexpr const char* real_float_type_attr = "T: {float16, bfloat16, float32, float64}";

inline std::vector<op_def> math_op_defs() {
  std::vector<op_def> defs;
  auto unary = [&](const char* name, const char* types) {
    defs.push_back(op_def_builder(name).input("x: T").output("y: T").attr(types).shape_fn(same_shape).build());
  };
  unary("Neg", signed_type_attr);
  unary("Abs", "T: {int8, int16, int32, int64, float16, bfloat16, float32, float64}");
  unary("Square", number_type_attr);
  unary("Sqrt", float_type_attr);
  unary("Rsqrt", float_type_attr);
  unary("Exp", float_type_attr);
  unary("Log", float_type_attr);
  unary("Tanh", float_type_attr);
  unary("Sigmoid", float_type_attr);
  unary("Relu", real_type_attr);
  // ReluGrad(gradients, features): gradients where features > 0, else 0 (TensorFlow's; features
  // is Relu's input or output, which are positive at the same places). One pass where
  // Greater and SelectV2 took two and a bool tensor between them. No broadcasting.
  defs.push_back(op_def_builder("ReluGrad")
                     .input("gradients: T")
                     .input("features: T")
                     .output("backprops: T")
                     .attr(real_type_attr)
                     .shape_fn([](shape_context& c) {
                       if (!shapes_compatible(c.input(0), c.input(1)))
                         c.fail("gradients and features must have the same shape, got ", c.input(0), " and ", c.input(1));
                       c.set_output(0, c.input(0).rank_known() ? c.input(0) : c.input(1));
                     })
                     .build());
  defs.push_back(op_def_builder("LogicalNot").input("x: bool").output("y: bool").shape_fn(same_shape).build());

  auto binary = [&](const char* name, const char* types) {
    defs.push_back(op_def_builder(name)
                       .input("x: T")
                       .input("y: T")
                       .output("z: T")
                       .attr(types)
                       .shape_fn(broadcast_inputs)
                       .build());
  };
  binary("Add", number_type_attr);
  binary("Sub", number_type_attr);
  binary("Mul", number_type_attr);
  binary("Div", number_type_attr);
  binary("Pow", "T: {int32, int64, float16, bfloat16, float32, float64, complex64, complex128}");
  binary("Maximum", real_type_attr);
  binary("Minimum", real_type_attr);

  auto compare = [&](const char* name, const char* types) {
    defs.push_back(op_def_builder(name)
                       .input("x: T")
                       .input("y: T")
                       .output("z: bool")
                       .attr(types)
                       .shape_fn(broadcast_inputs)
                       .build());
  };
  compare("Greater", real_type_attr);
  compare("GreaterEqual", real_type_attr);
  compare("Less", real_type_attr);
  compare("LessEqual", real_type_attr);
  compare("Equal", "T: type");
  compare("NotEqual", "T: type");
  for (const char* name : {"LogicalAnd", "LogicalOr"})
    defs.push_back(
        op_def_builder(name).input("x: bool").input("y: bool").output("z: bool").shape_fn(broadcast_inputs).build());

  defs.push_back(op_def_builder("SelectV2")
                     .input("condition: bool")
                     .input("t: T")
                     .input("e: T")
                     .output("output: T")
                     .attr("T: type")
                     .shape_fn(broadcast_inputs)
                     .build());
  defs.push_back(op_def_builder("Select")
                     .input("condition: bool")
                     .input("t: T")
                     .input("e: T")
                     .output("output: T")
                     .attr("T: type")
                     .shape_fn([](shape_context& c) {
                       if (!shapes_compatible(c.input(1), c.input(2)))
                         c.fail("t and e must have the same shape (SelectV2 broadcasts)");
                       const partial_shape& t = c.input(1).rank_known() ? c.input(1) : c.input(2);
                       const partial_shape& cond = c.input(0);
                       if (cond.rank_known() && t.rank_known() && cond.rank() != 0 && !shapes_compatible(cond, t) &&
                           !(cond.rank() == 1 && t.rank() > 1 && (cond[0] < 0 || t[0] < 0 || cond[0] == t[0])))
                         c.fail("the condition must be a scalar, have the shape of t and e, or be a vector of their ",
                                "first dim (SelectV2 broadcasts)");
                       c.set_output(0, t);
                     })
                     .build());
  defs.push_back(op_def_builder("Cast")
                     .input("x: SrcT")
                     .output("y: DstT")
                     .attr("SrcT: type")
                     .attr("DstT: type")
                     .shape_fn(same_shape)
                     .build());
  return defs;
}

// Adds the math ops to the global registry, once; registering the family's kernels
// calls it.
inline void register_math_ops() { op_registry::global().add_family("math", math_op_defs); }

// The ops of this family as C++ types (framework/kernel_for.hpp).
WEFT_DETAIL_OP_TYPE(Neg, math, true)
WEFT_DETAIL_OP_TYPE(Abs, math, true)
WEFT_DETAIL_OP_TYPE(Square, math, true)
WEFT_DETAIL_OP_TYPE(Sqrt, math, true)
WEFT_DETAIL_OP_TYPE(Rsqrt, math, true)
WEFT_DETAIL_OP_TYPE(Exp, math, true)
WEFT_DETAIL_OP_TYPE(Log, math, true)
WEFT_DETAIL_OP_TYPE(Tanh, math, true)
WEFT_DETAIL_OP_TYPE(Sigmoid, math, true)
WEFT_DETAIL_OP_TYPE(Relu, math, true)
WEFT_DETAIL_OP_TYPE(ReluGrad, math, true)
WEFT_DETAIL_OP_TYPE(LogicalNot, math, false)
WEFT_DETAIL_OP_TYPE(Add, math, true)
WEFT_DETAIL_OP_TYPE(Sub, math, true)
WEFT_DETAIL_OP_TYPE(Mul, math, true)
WEFT_DETAIL_OP_TYPE(Div, math, true)
WEFT_DETAIL_OP_TYPE(Pow, math, true)
WEFT_DETAIL_OP_TYPE(Maximum, math, true)
WEFT_DETAIL_OP_TYPE(Minimum, math, true)
WEFT_DETAIL_OP_TYPE(Greater, math, false)
WEFT_DETAIL_OP_TYPE(GreaterEqual, math, false)
WEFT_DETAIL_OP_TYPE(Less, math, false)
WEFT_DETAIL_OP_TYPE(LessEqual, math, false)
WEFT_DETAIL_OP_TYPE(Equal, math, false)
WEFT_DETAIL_OP_TYPE(NotEqual, math, false)
WEFT_DETAIL_OP_TYPE(LogicalAnd, math, false)
WEFT_DETAIL_OP_TYPE(LogicalOr, math, false)
WEFT_DETAIL_OP_TYPE(Select, math, true)
WEFT_DETAIL_OP_TYPE(SelectV2, math, true)
WEFT_DETAIL_OP_TYPE(Cast, math, true)
// The whole family (its kernels for every dtype, on each device type).
namespace families {
struct math {
  static constexpr const char* name = "math";
  using types = type_list<Neg, Abs, Square, Sqrt, Rsqrt, Exp, Log, Tanh, Sigmoid, Relu, ReluGrad, LogicalNot, Add, Sub, Mul, Div, Pow, Maximum, Minimum, Greater, GreaterEqual, Less, LessEqual, Equal, NotEqual, LogicalAnd, LogicalOr, Select, SelectV2, Cast>;  // its op types
  static void define() { register_math_ops(); }
};
}  // namespace families

}  // namespace weft::ops
