/// @file
/// Elementwise ops. Binary ops broadcast NumPy-style; comparisons return bool.
///   unary:   y = f(x), shape(y) = shape(x)
///   binary:  z = f(x, y), shape(z) = broadcast(shape(x), shape(y))
///   SelectV2: out = cond ? t : e, all three broadcast
///   Select:  out = cond ? t : e, TensorFlow's first form: t and e of one shape; cond of
///            that shape, a scalar, or a vector picking whole rows (along dim 0) of t or e
///   Cast:    y = static_cast<DstT>(x)
///   AddN:    sum = inputs[0] + ... + inputs[N-1], all of one shape (no broadcasting)
///   LeakyRelu(x; alpha), LeakyReluGrad(g, x; alpha), ClipByValue(t, min, max)
#pragma once

#include <vector>
#include <tuple>

#include <weft/core/activation_constants.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/framework/gradient_rule.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>

namespace weft::ops {

/// The number types: a type attr's allowed values for arithmetic.
inline constexpr const char* number_type_attr =
    "T: {int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64, "
    "complex64, complex128}";
/// The real (not complex) number types: comparisons, Maximum/Minimum, Relu.
inline constexpr const char* real_type_attr =
    "T: {int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64}";
/// The signed number types: Neg, Abs.
inline constexpr const char* signed_type_attr =
    "T: {int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64, complex128}";
/// The floating point and complex types: Exp, Log, Sqrt and the like.
inline constexpr const char* float_type_attr = "T: {float16, bfloat16, float32, float64, complex64, complex128}";
/// The real floating point types.
inline constexpr const char* real_float_type_attr = "T: {float16, bfloat16, float32, float64}";

/// Select's operands at run time, for its kernels on every device: whether the condition
/// picks whole rows (a vector of t's first dim); fails unless t and e have one shape and the
/// condition is a scalar, of their shape, or such a vector.
inline bool select_picks_rows(const shape& cond, const shape& t, const shape& e) {
  if (t != e)
    fail(error_code::invalid_argument, "t and e must have the same shape, got ", t, " and ", e, " (SelectV2 broadcasts)");
  const bool rows = cond.rank() == 1 && t.rank() > 1;
  if (cond.rank() != 0 && cond != t && !(rows && cond[0] == t[0]))
    fail(error_code::invalid_argument, "the condition of shape ", cond, " must be a scalar, have the shape of t and e ", t,
         ", or be a vector of their first dim (SelectV2 broadcasts)");
  return rows;
}

/// Shape function of ReluGrad and LeakyReluGrad: gradients and features of one shape, the output's.
inline void gradients_and_features(shape_context& c) {
  if (!shapes_compatible(c.input(0), c.input(1)))
    c.fail("gradients and features must have the same shape, got ", c.input(0), " and ", c.input(1));
  c.set_output(0, c.input(0).rank_known() ? c.input(0) : c.input(1));
}

/// The math family's op definitions (registered by register_math_ops()).
std::vector<op_def> math_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> math_op_defs() {
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
  // TensorFlow's, on the real floating point types: Softplus is log(1 + e^x), Round rounds
  // half to even, Sign is -1, 0 or 1 (NaN of NaN).
  for (const char* name : {"Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
                           "Reciprocal", "Log1p", "Expm1", "Softplus", "Erf", "Floor", "Ceil", "Round"})
    unary(name, real_float_type_attr);
  unary("Sign", "T: {int8, int16, int32, int64, float16, bfloat16, float32, float64}");
  // Activations, TensorFlow's: Elu is x where x > 0, else e^x - 1; Selu is scale x where
  // x > 0, else scale alpha (e^x - 1) (Klambauer et al.'s constants); Relu6 is min(max(x, 0), 6).
  for (const char* name : {"Elu", "Selu", "Relu6"}) unary(name, real_float_type_attr);
  // IsNan, IsInf (either infinity), IsFinite (neither NaN nor an infinity): bool, no gradient.
  for (const char* name : {"IsNan", "IsInf", "IsFinite"})
    defs.push_back(op_def_builder(name).input("x: T").output("y: bool").attr(real_float_type_attr).shape_fn(same_shape).build());
  // CheckNumerics(tensor): the tensor itself, or an error "<message> : Tensor had NaN values"
  // (Inf, NaN and Inf: TensorFlow's words) naming the node.
  defs.push_back(op_def_builder("CheckNumerics")
                     .input("tensor: T")
                     .output("output: T")
                     .attr(real_float_type_attr)
                     .attr("message: string")
                     .shape_fn(same_shape)
                     .build());
  // ReluGrad(gradients, features): gradients where features > 0, else 0 (TensorFlow's; features
  // is Relu's input or output, which are positive at the same places). One pass where
  // Greater and SelectV2 took two and a bool tensor between them. No broadcasting.
  defs.push_back(op_def_builder("ReluGrad")
                     .input("gradients: T")
                     .input("features: T")
                     .output("backprops: T")
                     .attr(real_type_attr)
                     .shape_fn(gradients_and_features)
                     .build());
  defs.push_back(op_def_builder("LogicalNot").input("x: bool").output("y: bool").shape_fn(same_shape).build());
  // LeakyRelu: x > 0 ? x : alpha x (NaN stays NaN); its gradient op, LeakyReluGrad(gradients,
  // features): features > 0 ? gradients : alpha gradients, of one shape.
  defs.push_back(op_def_builder("LeakyRelu")
                     .input("features: T")
                     .output("activations: T")
                     .attr(real_float_type_attr)
                     .attr("alpha: float = 0.2")
                     .shape_fn(same_shape)
                     .build());
  defs.push_back(op_def_builder("LeakyReluGrad")
                     .input("gradients: T")
                     .input("features: T")
                     .output("backprops: T")
                     .attr(real_float_type_attr)
                     .attr("alpha: float = 0.2")
                     .shape_fn(gradients_and_features)
                     .build());
  // ClipByValue(t, min, max): max(min(t, max), min) elementwise (NaN stays NaN; min above
  // max gives min), min and max scalars or of t's shape.
  defs.push_back(op_def_builder("ClipByValue")
                     .input("t: T")
                     .input("clip_value_min: T")
                     .input("clip_value_max: T")
                     .output("output: T")
                     .attr(real_type_attr)
                     .shape_fn([](shape_context& c) {
                       for (int i = 1; i < 3; ++i) {
                         const partial_shape& b = c.input(i);
                         if (b.rank_known() && b.rank() != 0 && !shapes_compatible(b, c.input(0)))
                           c.fail(i == 1 ? "clip_value_min" : "clip_value_max", " must be a scalar or have t's shape ", c.input(0),
                                  ", got ", b);
                       }
                       c.set_output(0, c.input(0));
                     })
                     .build());

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
  binary("SquaredDifference", real_float_type_attr);  // (x - y)^2
  binary("Atan2", real_float_type_attr);              // the angle of (x, y) from the x axis: atan2(y=x0, x=x1)
  // Python's // and %: the quotient rounded down, the remainder with the divisor's sign;
  // integer division by zero is an error, INT_MIN // -1 wraps (as Div).
  binary("FloorDiv", real_type_attr);
  binary("FloorMod", real_type_attr);
  // The sum of N tensors of one shape (no broadcasting, as TensorFlow's).
  defs.push_back(op_def_builder("AddN")
                     .input("inputs: N * T")
                     .output("sum: T")
                     .attr("N: int")
                     .attr(number_type_attr)
                     .shape_fn([](shape_context& c) {
                       if (c.num_inputs() < 1) c.fail("needs at least one input to add");
                       c.set_output(0, merged_input_shapes(c, 0, c.num_inputs()));
                     })
                     .build());

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
  compare("Equal", "T: any type");
  compare("NotEqual", "T: any type");
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
#endif

/// Adds the math ops to the global registry, once; registering the family's kernels
/// calls it.
inline void register_math_ops() { op_registry::global().add_family("math", math_op_defs); }

}  // namespace weft::ops

// ---- gradient rules (framework/gradient_rule.hpp), each written once over a value type ----

namespace weft::gradients {

/// The gradient rule of Neg (framework/gradient_rule.hpp).
struct neg_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X&, const Y&) { return std::tuple{-d}; }
};

/// The gradient rule of Add (framework/gradient_rule.hpp).
struct add_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0&, const X1&, const Y&) { return std::tuple{d, d}; }
};

/// The gradient rule of Sub (framework/gradient_rule.hpp).
struct sub_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0&, const X1&, const Y&) { return std::tuple{d, -d}; }
};

/// The gradient rule of Mul (framework/gradient_rule.hpp).
struct mul_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0& x0, const X1& x1, const Y&) { return std::tuple{d * x1, x0 * d}; }
};

/// The gradient rule of Div (framework/gradient_rule.hpp): z = x / y: dx = d / y, dy = -d * z / y.
struct div_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0&, const X1& x1, const Y& y) { return std::tuple{d / x1, -(d * y) / x1}; }
};

/// The gradient rule of Pow (framework/gradient_rule.hpp): z = x^y: dx = d * y * x^(y - 1), dy = d * z * log(x) where x > 0, else 0.
struct pow_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0& x, const X1& e, const Y& y) {
    return std::tuple{d * e * pow(x, e - 1.0), select(x > 0.0, d * y * log(x), 0.0)};
  }
};

/// The gradient rule of Maximum (framework/gradient_rule.hpp): ties go to the first operand.
struct maximum_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0& x0, const X1& x1, const Y&) {
    return std::tuple{select(x0 >= x1, d, 0.0), select(x0 >= x1, 0.0, d)};
  }
};

/// The gradient rule of Minimum (framework/gradient_rule.hpp).
struct minimum_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0& x0, const X1& x1, const Y&) {
    return std::tuple{select(x0 <= x1, d, 0.0), select(x0 <= x1, 0.0, d)};
  }
};

/// The gradient rule of Square (framework/gradient_rule.hpp).
struct square_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{d * x * 2.0}; }
};

/// The gradient rule of Sqrt (framework/gradient_rule.hpp): z = sqrt(x): d / (2 z).
struct sqrt_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X&, const Y& y) { return std::tuple{d / (y * 2.0)}; }
};

/// The gradient rule of Rsqrt (framework/gradient_rule.hpp): z = x^-1/2: -d z^3 / 2.
struct rsqrt_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y>
  static auto partials(const D& d, const X&, const Y& y) { return std::tuple{d * y * y * y * -0.5}; }
};

/// The gradient rule of Exp (framework/gradient_rule.hpp).
struct exp_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X&, const Y& y) { return std::tuple{d * y}; }
};

/// The gradient rule of Log (framework/gradient_rule.hpp).
struct log_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{d / x}; }
};

/// The gradient rule of Tanh (framework/gradient_rule.hpp): d (1 - z^2).
struct tanh_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y>
  static auto partials(const D& d, const X&, const Y& y) { return std::tuple{d * (1.0 - y * y)}; }
};

/// The gradient rule of Sigmoid (framework/gradient_rule.hpp): d z (1 - z).
struct sigmoid_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y>
  static auto partials(const D& d, const X&, const Y& y) { return std::tuple{d * y * (1.0 - y)}; }
};

/// The gradient rule of Sin (framework/gradient_rule.hpp): d cos(x).
struct sin_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{d * cos(x)}; }
};

/// The gradient rule of Cos (framework/gradient_rule.hpp): -d sin(x).
struct cos_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{-(d * sin(x))}; }
};

/// The gradient rule of Tan (framework/gradient_rule.hpp): d (1 + z^2).
struct tan_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X&, const Y& y) { return std::tuple{d * (y * y + 1.0)}; }
};

/// The gradient rule of Asin (framework/gradient_rule.hpp): d / sqrt(1 - x^2).
struct asin_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y>
  static auto partials(const D& d, const X& x, const Y&) { return std::tuple{d * rsqrt(1.0 - square(x))}; }
};

/// The gradient rule of Acos (framework/gradient_rule.hpp): -d / sqrt(1 - x^2).
struct acos_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y>
  static auto partials(const D& d, const X& x, const Y&) { return std::tuple{-(d * rsqrt(1.0 - square(x)))}; }
};

/// The gradient rule of Atan (framework/gradient_rule.hpp): d / (1 + x^2).
struct atan_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{d / (square(x) + 1.0)}; }
};

/// The gradient rule of Sinh (framework/gradient_rule.hpp): d cosh(x).
struct sinh_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{d * cosh(x)}; }
};

/// The gradient rule of Cosh (framework/gradient_rule.hpp): d sinh(x).
struct cosh_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{d * sinh(x)}; }
};

/// The gradient rule of Asinh (framework/gradient_rule.hpp): d / cosh(z).
struct asinh_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X&, const Y& y) { return std::tuple{d / cosh(y)}; }
};

/// The gradient rule of Acosh (framework/gradient_rule.hpp): d / sinh(z).
struct acosh_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X&, const Y& y) { return std::tuple{d / sinh(y)}; }
};

/// The gradient rule of Atanh (framework/gradient_rule.hpp): d / (1 - x^2).
struct atanh_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{d / (1.0 - square(x))}; }
};

/// The gradient rule of Atan2 (framework/gradient_rule.hpp): z = atan2(y, x): dy = d x / (x^2
/// + y^2), dx = -d y / (x^2 + y^2).
struct atan2_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0& y, const X1& x, const Y&) {
    auto scaled = d / (square(x) + square(y));
    return std::tuple{scaled * x, -(scaled * y)};
  }
};

/// The gradient rule of FloorDiv (framework/gradient_rule.hpp): none flows (TensorFlow's).
struct floor_div_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X0, class X1, class Y>
  static auto partials(const D&, const X0&, const X1&, const Y&) { return std::tuple{no_partial{}, no_partial{}}; }
};

/// The gradient rule of FloorMod (framework/gradient_rule.hpp): z = x - floor(x / y) y: dx =
/// d, dy = -d floor(x / y) (TensorFlow's).
struct floor_mod_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0& x, const X1& y, const Y&) { return std::tuple{d, -(d * floor_div(x, y))}; }
};

/// The gradient rule of AddN (framework/gradient_rule.hpp): every input gets the sum's
/// gradient, as it is (the inputs have the sum's shape).
struct add_n_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return result<V>(a.x.size(), a.d()); }
};

/// The gradient rule of Reciprocal (framework/gradient_rule.hpp): z = 1 / x: -d z^2.
struct reciprocal_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X&, const Y& y) { return std::tuple{-(d * y * y)}; }
};

/// The gradient rule of Log1p (framework/gradient_rule.hpp): d / (1 + x).
struct log1p_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{d / (x + 1.0)}; }
};

/// The gradient rule of Expm1 (framework/gradient_rule.hpp): d e^x (TensorFlow's: e^x rather
/// than z + 1, which loses digits where z is near -1).
struct expm1_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{d * exp(x)}; }
};

/// The gradient rule of Softplus (framework/gradient_rule.hpp): d sigmoid(x).
struct softplus_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{d * sigmoid(x)}; }
};

/// The gradient rule of Erf (framework/gradient_rule.hpp): d 2 / sqrt(pi) e^(-x^2).
struct erf_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y>
  static auto partials(const D& d, const X& x, const Y&) {
    return std::tuple{d * exp(-square(x)) * 1.1283791670955126};  // 2 / sqrt(pi)
  }
};

/// The gradient rule of the piecewise constant ops (Floor, Ceil, Round, Sign): none flows
/// (TensorFlow's: their gradient is None, so an x reached only through them gets zeros).
struct flat_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D&, const X&, const Y&) { return std::tuple{no_partial{}}; }
};

/// The gradient rule of Elu (framework/gradient_rule.hpp): d where z > 0, else d (z + 1).
struct elu_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y>
  static auto partials(const D& d, const X&, const Y& y) { return std::tuple{select(y > 0.0, d, d * (y + 1.0))}; }
};

/// The gradient rule of Selu (framework/gradient_rule.hpp): scale d where z > 0, else
/// d (z + scale alpha).
struct selu_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y>
  static auto partials(const D& d, const X&, const Y& y) {
    return std::tuple{select(y > 0.0, d * selu_scale, d * (y + selu_scale * selu_alpha))};
  }
};

/// The gradient rule of Relu6 (framework/gradient_rule.hpp): d where 0 < x < 6, else 0.
struct relu6_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y>
  static auto partials(const D& d, const X& x, const Y&) { return std::tuple{select(x > 0.0, select(x < 6.0, d, 0.0), 0.0)}; }
};

/// The gradient rule of CheckNumerics (framework/gradient_rule.hpp): the gradient checked too,
/// with TensorFlow's words before the node's message.
struct check_numerics_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    return {a.d().then("CheckNumerics", {},
                       {{"message", "Not a number (NaN) or infinity (Inf) values detected in gradient. " +
                                        a.n.template attr<std::string>("message")}})};
  }
};

/// The gradient rule of SquaredDifference (framework/gradient_rule.hpp): z = (x - y)^2:
/// dx = 2 d (x - y), dy = -dx.
struct squared_difference_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0& x0, const X1& x1, const Y&) {
    auto dx = d * (x0 - x1) * 2.0;
    return std::tuple{dx, -dx};
  }
};

/// Relu's partial derivative for the DSL's fused subtrees: d where y > 0, else 0.
struct relu_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y>
  static auto partials(const D& d, const X&, const Y& y) { return std::tuple{select(y > 0.0, d, 0.0)}; }
};

/// The gradient rule of Abs (framework/gradient_rule.hpp): TensorFlow's d * sign(x): 0 at 0.
struct abs_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y>
  static auto partials(const D& d, const X& x, const Y&) { return std::tuple{select(x < 0.0, -d, select(x > 0.0, d, 0.0))}; }
};

/// The gradient rule of SelectV2 (framework/gradient_rule.hpp): SelectV2; no gradient for the condition.
struct select_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class C, class T, class E, class Y>
  static auto partials(const D& d, const C& c, const T&, const E&, const Y&) {
    return std::tuple{no_partial{}, select(c, d, 0.0), select(c, 0.0, d)};
  }
};

/// The gradient rule of Cast (framework/gradient_rule.hpp).
struct cast_grad {
  /// d times the derivative of the output in each operand (no_partial where none).
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{cast_like(d, x)}; }
};

/// The gradient rule of Select (framework/gradient_rule.hpp): Select: the gradient goes where the condition picked, row or element.
struct select_rows_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V zeros = zeros_like(a.d());
    return {std::nullopt, select_rows(a.x[0], a.d(), zeros), select_rows(a.x[0], zeros, a.d())};
  }
};

/// Relu's gradient is one ReluGrad node at its output, as TensorFlow's (relu_grad above is
/// the same function for the typed DSL, which fuses it with its neighbours).
struct relu_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {relu_backprop(a.d(), a.y[0])}; }
};

/// The gradient rule of LeakyRelu (framework/gradient_rule.hpp): LeakyReluGrad of the gradient.
struct leaky_relu_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    return {leaky_relu_backprop(a.d(), a.x[0], a.n.template attr<double>("alpha"))};
  }
};
/// The gradient rule of LeakyReluGrad (framework/gradient_rule.hpp): linear in the
/// gradients, with the same mask; none for the features.
struct leaky_relu_grad_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    return {leaky_relu_backprop(a.d(), a.x[1], a.n.template attr<double>("alpha")), std::nullopt};
  }
};
/// The gradient rule of ClipByValue (framework/gradient_rule.hpp), TensorFlow's: t gets the
/// gradient where it was inside the range, min (max) the sum of it where t was below (above).
struct clip_by_value_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V &x = a.x[0], &d = a.d();
    const V below = less(x, a.x[1]), above = greater(x, a.x[2]), zero = zeros_like(d);
    return {select(logical_or(below, above), zero, d), sum_to(select(below, d, zero), a.x[1]), sum_to(select(above, d, zero), a.x[2])};
  }
};
/// ReluGrad is linear in its gradients and flat in its features (TensorFlow's ReluGradGrad).
struct relu_grad_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {relu_backprop(a.d(), a.x[1]), std::nullopt}; }
};

}  // namespace weft::gradients

namespace weft::ops {

/// The ops of this family as C++ types (framework/kernel_for.hpp), each with its gradient
/// rule where it has one.
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Neg, math, gradients::neg_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Abs, math, gradients::abs_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Square, math, gradients::square_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Sqrt, math, gradients::sqrt_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Rsqrt, math, gradients::rsqrt_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Exp, math, gradients::exp_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Log, math, gradients::log_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Tanh, math, gradients::tanh_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Sigmoid, math, gradients::sigmoid_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Sin, math, gradients::sin_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Cos, math, gradients::cos_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Tan, math, gradients::tan_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Asin, math, gradients::asin_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Acos, math, gradients::acos_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Atan, math, gradients::atan_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Sinh, math, gradients::sinh_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Cosh, math, gradients::cosh_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Asinh, math, gradients::asinh_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Acosh, math, gradients::acosh_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Atanh, math, gradients::atanh_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Reciprocal, math, gradients::reciprocal_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Log1p, math, gradients::log1p_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Expm1, math, gradients::expm1_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Softplus, math, gradients::softplus_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Erf, math, gradients::erf_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Floor, math, gradients::flat_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Ceil, math, gradients::flat_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Round, math, gradients::flat_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Sign, math, gradients::flat_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Elu, math, gradients::elu_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Selu, math, gradients::selu_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Relu6, math, gradients::relu6_grad)
WEFT_DETAIL_OP_TYPE(IsNan, math)
WEFT_DETAIL_OP_TYPE(IsInf, math)
WEFT_DETAIL_OP_TYPE(IsFinite, math)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(CheckNumerics, math, gradients::check_numerics_grad)
/// Op Relu as a C++ type (of the math family), with its gradient rule and its partials.
struct Relu {
  static constexpr const char* name = "Relu";  ///< "Relu"
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using gradient = gradients::relu_rule;  ///< one ReluGrad node, as TensorFlow's
  using partials = gradients::relu_grad;  ///< the same function, for the DSL's fused subtrees
  /// Registers its family's op definitions.
  static void define() { register_math_ops(); }
};
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(ReluGrad, math, gradients::relu_grad_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(LeakyRelu, math, gradients::leaky_relu_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(LeakyReluGrad, math, gradients::leaky_relu_grad_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(ClipByValue, math, gradients::clip_by_value_grad)
WEFT_DETAIL_OP_TYPE(LogicalNot, math)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Add, math, gradients::add_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Sub, math, gradients::sub_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Mul, math, gradients::mul_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Div, math, gradients::div_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Pow, math, gradients::pow_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Maximum, math, gradients::maximum_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Minimum, math, gradients::minimum_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(SquaredDifference, math, gradients::squared_difference_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Atan2, math, gradients::atan2_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(FloorDiv, math, gradients::floor_div_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(FloorMod, math, gradients::floor_mod_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(AddN, math, gradients::add_n_grad)
WEFT_DETAIL_OP_TYPE(Greater, math)
WEFT_DETAIL_OP_TYPE(GreaterEqual, math)
WEFT_DETAIL_OP_TYPE(Less, math)
WEFT_DETAIL_OP_TYPE(LessEqual, math)
WEFT_DETAIL_OP_TYPE(Equal, math)
WEFT_DETAIL_OP_TYPE(NotEqual, math)
WEFT_DETAIL_OP_TYPE(LogicalAnd, math)
WEFT_DETAIL_OP_TYPE(LogicalOr, math)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Select, math, gradients::select_rows_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(SelectV2, math, gradients::select_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Cast, math, gradients::cast_grad)
namespace families {  // the whole family (its kernels for every dtype, on each device type)
/// The math family as a C++ type: use_kernels<ops::families::math>() registers its ops and kernels.
struct math {
  static constexpr const char* name = "math";  ///< the family's name
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using types = type_list<Neg, Abs, Square, Sqrt, Rsqrt, Exp, Log, Tanh, Sigmoid, Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Reciprocal, Log1p, Expm1, Softplus, Erf, Floor, Ceil, Round, Sign, Elu, Selu, Relu6, IsNan, IsInf, IsFinite, CheckNumerics, Relu, ReluGrad, LogicalNot, Add, Sub, Mul, Div, Pow, Maximum, Minimum, SquaredDifference, Atan2, FloorDiv, FloorMod, AddN, LeakyRelu, LeakyReluGrad, ClipByValue, Greater, GreaterEqual, Less, LessEqual, Equal, NotEqual, LogicalAnd, LogicalOr, Select, SelectV2, Cast>;  ///< its op types
  /// Registers the family's op definitions.
  static void define() { register_math_ops(); }
};
}  // namespace families

}  // namespace weft::ops
