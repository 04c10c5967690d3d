/// @file
/// The DSL's ops: typed expressions for the ops of the registry. Each expression type names
/// its dtype and static shape; static dims are checked at compile time (checks.hpp), dyn
/// dims at run time by the graph's shape rules and the kernels. This header holds what every
/// op's expression is built from, the elementwise ops, matmul, fill, and apply_op for ops
/// defined outside the library; the other families have a header each, as in ops/:
/// reduction_ops.hpp, array_ops.hpp (shape and array ops), random_ops.hpp, state_ops.hpp,
/// nn_ops.hpp.
///
/// Lowering an op defines its op family and asks for its kernels for its dtype only
/// (use_kernels, framework/kernel_for.hpp), so a program compiles the kernels its graphs use
/// (DESIGN.md §2, compile cost); the DSL never names a device's kernel classes.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/dsl/expr.hpp>
#include <weft/dsl/leaves.hpp>
#include <weft/framework/kernel_for.hpp>
#include <weft/ops/array_ops.hpp>
#include <weft/ops/core_ops.hpp>
#include <weft/ops/math_ops.hpp>
#include <weft/ops/matrix_ops.hpp>
#include <weft/ops/random_ops.hpp>
#include <weft/ops/reduction_ops.hpp>
#include <weft/ops/state_ops.hpp>

namespace weft {

template <class Op, class T, class S, class... Args>
class op_expr;

namespace detail {
/// Defined in fusion.hpp: lowers a maximal elementwise subtree as one fused node, or returns
/// nothing when the subtree is a single op or has a dtype fusion does not cover.
template <class E>
std::optional<output> try_fuse(lowering& cx, const E& e);
}  // namespace detail

/// An op applied to operand expressions. Op is a descriptor: its graph op name, its attrs,
/// the kernels it asks for and, for elementwise ops, the op type fusion describes it by.
template <class Op, class T, class S, class... Args>
class op_expr : public expr_base {
 public:
  using value_type = T;                   ///< the element type
  using shape_type = S;                   ///< the static shape
  using op_type = Op;                     ///< the descriptor's type
  using args_type = std::tuple<Args...>;  ///< the operands' types

  /// The op over the operands, in the name scope current now (layers' scopes).
  explicit op_expr(Op op, const Args&... args)
      : op_(std::move(op)), args_(args...), scope_(detail::current_scope()),
        memo_(std::make_shared<detail::lowered_memo>()) {}

  /// The descriptor.
  const Op& op() const noexcept { return op_; }
  /// The operands.
  const args_type& args() const noexcept { return args_; }
  /// The name scope the expression was made in.
  const scope_info* scope() const noexcept { return scope_; }

  /// Lowered once per lowering context; later calls return the memoized node.
  output lower(lowering& cx) const {
    return memo_->get(cx, [&] {
      if constexpr (Op::elementwise) {
        if (cx.fusion())
          if (auto fused = detail::try_fuse(cx, *this)) return *fused;
      }
      return lower_unfused(cx);
    });
  }

  /// One node for this op, its operands lowered as usual.
  output lower_unfused(lowering& cx) const {
    std::vector<output> inputs = std::apply([&](const auto&... a) { return std::vector<output>{weft::lower(cx, a)...}; },
                                            args_);
    op_.prepare();
    return op_.lower(cx, std::move(inputs), scope_);
  }

 private:
  Op op_;
  args_type args_;
  const scope_info* scope_;
  std::shared_ptr<detail::lowered_memo> memo_;
};

namespace detail {

/// Descriptors whose node is the op applied to the operands, with the descriptor's attrs.
template <class D>
struct lowers_plainly {
  output lower(lowering& cx, std::vector<output> inputs, const scope_info* scope) const {
    return cx.add(D::name, std::move(inputs), static_cast<const D&>(*this).attrs(), scope);
  }
};

template <class T, class List>
struct in_list;
template <class T, class... Ts>
struct in_list<T, type_list<Ts...>> : std::bool_constant<(std::is_same_v<T, Ts> || ...)> {};

/// A scalar operand next to an expression of dtype T becomes a constant of dtype T, as
/// TensorFlow converts Python numbers; a floating-point scalar does not convert to an
/// integer or bool expression.
template <class T, class U>
auto scalar_operand(U value) {
  constexpr bool float_u = std::is_floating_point_v<U> || is_half_v<U>;
  constexpr bool float_t = std::is_floating_point_v<T> || is_half_v<T> || Eigen::NumTraits<T>::IsComplex;
  static_assert(!(float_u && !float_t),
                "weft: a floating-point scalar cannot be an operand of an integer or bool expression");
  if constexpr (is_half_v<U> && !std::is_same_v<T, U>)
    return constant(static_cast<T>(static_cast<float>(value)));  // half to another type goes through float
  else
    return constant(static_cast<T>(value));
}

/// Numbers (and float16 / bfloat16 values) beside an expression.
template <class U>
concept scalar_value = std::is_arithmetic_v<U> || is_half_v<U>;

/// Lowers a constant int tensor of shape s (axes, shapes, permutations, paddings) into the
/// graph, as int64 or (for inputs TensorFlow types int32, such as Split's axis) int32.
inline output int_constant(lowering& cx, const std::vector<std::int64_t>& values, shape s, dtype type = dtype::int64) {
  tensor t = type == dtype::int32
                 ? tensor::from_vector(std::vector<std::int32_t>(values.begin(), values.end()), std::move(s))
                 : tensor::from_vector(values, std::move(s));
  return cx.add("Const", {}, {{"value", t}, {"dtype", type}}, root_scope());
}

/// A constant int input of an op (sizes, paddings, axes), inserted at `position` (`append`:
/// after the operands); of shape `dims` ([n] by default; {} for a scalar).
struct int_input {
  static constexpr std::size_t append = static_cast<std::size_t>(-1);
  std::size_t position;
  std::vector<std::int64_t> values;
  std::vector<std::int64_t> dims = {static_cast<std::int64_t>(values.size())};
  dtype type = dtype::int64;
};

/// The node `name`(operands, with constant int inputs inserted; attrs), output `port`.
/// prepare() asks for Op's kernels for dtype T (void: the one kernel of every dtype).
template <class Op, class T = void>
struct indexed_op {
  static constexpr bool elementwise = false;  ///< whether fusion may merge it with its elementwise neighbours
  using op = Op;  ///< the op's type
  const char* name;
  std::vector<int_input> ints;
  attr_map attrs;
  int port = 0;
  /// Asks for the kernels the node needs (where a program compiles its own).
  void prepare() const {
    use_kernels<ops::families::core>();  // the Consts of the int inputs
    use_kernels<Op, T>();
  }
  output lower(lowering& cx, std::vector<output> inputs, const scope_info* scope) const {
    for (const auto& c : ints) {
      auto at = c.position == int_input::append ? inputs.end() : inputs.begin() + static_cast<std::ptrdiff_t>(c.position);
      inputs.insert(at, int_constant(cx, c.values, shape(c.dims), c.type));
    }
    output o = cx.add(name, std::move(inputs), attrs, scope);
    o.port = port;
    return o;
  }
};

template <class Op, class T = void>
using array_op = indexed_op<Op, T>;

}  // namespace detail


// ---- elementwise ---------------------------------------------------------------------

/// The unary and binary elementwise ops: Tag names the op's type (ops::Add, ...).
template <class Tag, class T>
struct elementwise_op : detail::lowers_plainly<elementwise_op<Tag, T>> {
  static constexpr bool elementwise = true;        ///< fusion may merge it with its neighbours
  using op = typename Tag::op;                     ///< the op's type
  static constexpr const char* name = Tag::name;  ///< the op's name
  /// No attrs.
  attr_map attrs() const { return {}; }
  /// Registers the kernel for T (where a program compiles its own).
  void prepare() const { use_kernels<op, T>(); }
};

// Unary elementwise ops: FN(a) an expression of a's shape whose dtype is RESULT (T, a's
// dtype, or bool), a's dtype one of TYPES (another is a compile error: "weft::FN: MESSAGE").
#define WEFT_DETAIL_DSL_UNARY_OF(FN, OP, TYPES, RESULT, MESSAGE)                                        \
  namespace tags {                                                                                      \
  /** The DSL's tag of op OP, as fusion and the gradient rules read it. */                              \
  struct FN {                                                                                           \
    using op = ops::OP;                           /**< the op's type */                                 \
    static constexpr const char* name = op::name; /**< the op's name */                                 \
    /** Registers the op's kernel for element type T where a program compiles its own. */               \
    template <class T>                                                                                  \
    static void register_kernel() {                                                                     \
      use_kernels<op, T>();                                                                             \
    }                                                                                                   \
  };                                                                                                    \
  }                                                                                                     \
  namespace check {                                                                                     \
  WEFT_DETAIL_SUPPORT_CHECK(FN##_dtype, "weft::" #FN ": " MESSAGE);                                     \
  }                                                                                                     \
  /** Op OP elementwise (TYPES; another dtype is a compile error): the operand's shape, dtype RESULT. */ \
  template <expression A>                                                                               \
  auto FN(const A& a) {                                                                                 \
    using T = value_type_of<A>;                                                                         \
    (void)check::FN##_dtype<T, detail::in_list<T, TYPES>::value>::value;                                \
    return op_expr<elementwise_op<tags::FN, T>, RESULT, shape_of<A>, std::remove_cvref_t<A>>({}, a);   \
  }
#define WEFT_DETAIL_DSL_UNARY(FN, OP, TYPES) \
  WEFT_DETAIL_DSL_UNARY_OF(FN, OP, TYPES, T, "the operand's dtype is not supported")

WEFT_DETAIL_DSL_UNARY(negate, Neg, signed_number_types)
WEFT_DETAIL_DSL_UNARY(abs, Abs, signed_real_types)
WEFT_DETAIL_DSL_UNARY(square, Square, number_types)
WEFT_DETAIL_DSL_UNARY(sqrt, Sqrt, float_complex_types)
WEFT_DETAIL_DSL_UNARY(rsqrt, Rsqrt, float_complex_types)
WEFT_DETAIL_DSL_UNARY(exp, Exp, float_complex_types)
WEFT_DETAIL_DSL_UNARY(log, Log, float_complex_types)
WEFT_DETAIL_DSL_UNARY(tanh, Tanh, float_complex_types)
WEFT_DETAIL_DSL_UNARY(sigmoid, Sigmoid, float_complex_types)
WEFT_DETAIL_DSL_UNARY(relu, Relu, real_number_types)
WEFT_DETAIL_DSL_UNARY(sin, Sin, float_types)
WEFT_DETAIL_DSL_UNARY(cos, Cos, float_types)
WEFT_DETAIL_DSL_UNARY(tan, Tan, float_types)
WEFT_DETAIL_DSL_UNARY(asin, Asin, float_types)
WEFT_DETAIL_DSL_UNARY(acos, Acos, float_types)
WEFT_DETAIL_DSL_UNARY(atan, Atan, float_types)
WEFT_DETAIL_DSL_UNARY(sinh, Sinh, float_types)
WEFT_DETAIL_DSL_UNARY(cosh, Cosh, float_types)
WEFT_DETAIL_DSL_UNARY(asinh, Asinh, float_types)
WEFT_DETAIL_DSL_UNARY(acosh, Acosh, float_types)
WEFT_DETAIL_DSL_UNARY(atanh, Atanh, float_types)
WEFT_DETAIL_DSL_UNARY(reciprocal, Reciprocal, float_types)
WEFT_DETAIL_DSL_UNARY(log1p, Log1p, float_types)
WEFT_DETAIL_DSL_UNARY(expm1, Expm1, float_types)
WEFT_DETAIL_DSL_UNARY(softplus, Softplus, float_types)
WEFT_DETAIL_DSL_UNARY(erf, Erf, float_types)
WEFT_DETAIL_DSL_UNARY(floor, Floor, float_types)
WEFT_DETAIL_DSL_UNARY(ceil, Ceil, float_types)
WEFT_DETAIL_DSL_UNARY(round, Round, float_types)
WEFT_DETAIL_DSL_UNARY(sign, Sign, signed_real_types)
WEFT_DETAIL_DSL_UNARY(elu, Elu, float_types)
WEFT_DETAIL_DSL_UNARY(selu, Selu, float_types)
WEFT_DETAIL_DSL_UNARY(relu6, Relu6, float_types)
WEFT_DETAIL_DSL_UNARY(logical_not, LogicalNot, type_list<bool>)
#undef WEFT_DETAIL_DSL_UNARY

/// is_nan, is_inf, is_finite: elementwise tests of a float expression, bool expressions
/// (fused with their neighbours; no gradient flows through them).
WEFT_DETAIL_DSL_UNARY_OF(is_nan, IsNan, float_types, bool, "the operand must be float16, bfloat16, float or double")
WEFT_DETAIL_DSL_UNARY_OF(is_inf, IsInf, float_types, bool, "the operand must be float16, bfloat16, float or double")
WEFT_DETAIL_DSL_UNARY_OF(is_finite, IsFinite, float_types, bool, "the operand must be float16, bfloat16, float or double")
#undef WEFT_DETAIL_DSL_UNARY_OF

/// CheckNumerics's descriptor: its message.
template <class T>
struct check_numerics_op : detail::lowers_plainly<check_numerics_op<T>> {
  static constexpr bool elementwise = false;  ///< a node of its own: the point where the check is made
  using op = ops::CheckNumerics;  ///< the op's type
  static constexpr const char* name = "CheckNumerics";  ///< the graph op's name
  std::string message;  ///< the error's first words
  /// The node's attrs.
  attr_map attrs() const { return {{"message", message}}; }
  /// Asks for the kernel the node needs (where a program compiles its own).
  void prepare() const { use_kernels<op, T>(); }
};
namespace check {
WEFT_DETAIL_SUPPORT_CHECK(check_numerics_dtype, "weft::check_numerics: the operand must be float16, bfloat16, float or double");
}
/// check_numerics(x, message): x's value, or, when the step runs, an invalid_argument error
/// "<message> : Tensor had NaN values" (Inf, NaN and Inf: TensorFlow's words) naming the
/// node; x's gradient through it is checked too. float16, bfloat16, float or double.
template <expression A>
auto check_numerics(const A& a, std::string message) {
  using T = value_type_of<A>;
  (void)check::check_numerics_dtype<T, detail::in_list<T, float_types>::value>::value;
  return op_expr<check_numerics_op<T>, T, shape_of<A>, std::remove_cvref_t<A>>({{}, std::move(message)}, a);
}

namespace check {
WEFT_DETAIL_SUPPORT_CHECK(leaky_relu_dtype, "weft::leaky_relu: the operand must be float16, bfloat16, float or double");
WEFT_DETAIL_SUPPORT_CHECK(clip_by_value_dtype, "weft::clip_by_value: the operand must be a real number type");
WEFT_DETAIL_TYPE_CHECK(clip_by_value_dtypes, "weft::clip_by_value: the bounds' dtype differs from the operand's");
WEFT_DETAIL_DIM_CHECK(clip_by_value_bounds, "weft::clip_by_value: a bound must be a scalar or have the operand's shape");
}  // namespace check
/// leaky_relu(x, alpha): x > 0 ? x : alpha x (TensorFlow's LeakyRelu, alpha 0.2 by default,
/// rounded to x's dtype); a node of its own, differentiable (LeakyReluGrad).
template <expression A>
auto leaky_relu(const A& a, double alpha = 0.2) {
  using T = value_type_of<A>;
  (void)check::leaky_relu_dtype<T, detail::in_list<T, float_types>::value>::value;
  using Op = detail::indexed_op<ops::LeakyRelu, T>;
  return op_expr<Op, T, shape_of<A>, std::remove_cvref_t<A>>(Op{"LeakyRelu", {}, {{"alpha", alpha}}}, a);
}
/// clip_by_value(x, min, max): max(min(x, max), min) elementwise (TensorFlow's ClipByValue:
/// NaN stays NaN); the bounds expressions of x's dtype, each a scalar or of x's shape, or
/// plain numbers (of x's dtype); differentiable in all three.
template <expression A, class Lo, class Hi>
auto clip_by_value(const A& a, const Lo& lo, const Hi& hi) {
  using T = value_type_of<A>;
  (void)check::clip_by_value_dtype<T, detail::in_list<T, real_number_types>::value>::value;
  const auto bound = [](const auto& b) {
    if constexpr (expression<std::remove_cvref_t<decltype(b)>>) return b;
    else return constant(static_cast<T>(b));
  };
  auto l = bound(lo);
  auto h = bound(hi);
  using L = decltype(l);
  using H = decltype(h);
  (void)check::clip_by_value_dtypes<T, value_type_of<L>>::value;
  (void)check::clip_by_value_dtypes<T, value_type_of<H>>::value;
  constexpr auto fits = [](auto bound_shape) {
    using B = decltype(bound_shape);
    if constexpr (B::rank == 0) {
      return std::int64_t{0};
    } else if constexpr (B::rank != shape_of<A>::rank) {
      return std::int64_t{1};
    } else {
      for (std::size_t d = 0; d < B::values.size(); ++d)
        if (B::values[d] >= 0 && shape_of<A>::values[d] >= 0 && B::values[d] != shape_of<A>::values[d]) return std::int64_t{1};
      return std::int64_t{0};
    }
  };
  (void)check::clip_by_value_bounds<fits(shape_of<L>{}), 0>::value;
  (void)check::clip_by_value_bounds<fits(shape_of<H>{}), 0>::value;
  using Op = detail::indexed_op<ops::ClipByValue, T>;
  return op_expr<Op, T, shape_of<A>, std::remove_cvref_t<A>, L, H>(Op{"ClipByValue", {}, {}}, a, l, h);
}

namespace detail {
/// Lowers the operands of a binary op: a scalar beside an expression takes its dtype.
template <class A, class B>
struct binary_operands;
template <expression A, expression B>
struct binary_operands<A, B> {
  using lhs = A;
  using rhs = B;
  static const A& left(const A& a) { return a; }
  static const B& right(const B& b) { return b; }
};
template <expression A, scalar_value B>
struct binary_operands<A, B> {
  using lhs = A;
  using rhs = decltype(scalar_operand<value_type_of<A>>(std::declval<B>()));
  static const A& left(const A& a) { return a; }
  static rhs right(B b) { return scalar_operand<value_type_of<A>>(b); }
};
template <scalar_value A, expression B>
struct binary_operands<A, B> {
  using lhs = decltype(scalar_operand<value_type_of<B>>(std::declval<A>()));
  using rhs = B;
  static lhs left(A a) { return scalar_operand<value_type_of<B>>(a); }
  static const B& right(const B& b) { return b; }
};

template <class Tag, class A, class B>
auto make_binary(const A& a0, const B& b0) {
  using ops_t = binary_operands<A, B>;
  using L = typename ops_t::lhs;
  using R = typename ops_t::rhs;
  using T = value_type_of<L>;
  using shapes = broadcast_shapes<shape_of<L>, shape_of<R>>;
  (void)Tag::template dtypes<T, value_type_of<R>>::value;
  (void)Tag::template supported<T, in_list<T, typename Tag::types>::value>::value;
  (void)Tag::template broadcast<shapes::conflict[0], shapes::conflict[1]>::value;
  using Out = std::conditional_t<Tag::bool_result, bool, T>;
  return op_expr<elementwise_op<Tag, T>, Out, typename shapes::type, L, R>({}, ops_t::left(a0), ops_t::right(b0));
}
}  // namespace detail

template <class A, class B>
concept binary_operands = (expression<A> && expression<B>) || (expression<A> && detail::scalar_value<B>) ||
                          (detail::scalar_value<A> && expression<B>);

#define WEFT_DETAIL_DSL_BINARY(FN, OP, TYPES, BOOL)                                                           \
  namespace check {                                                                                          \
  WEFT_DETAIL_TYPE_CHECK(FN##_dtypes, "weft::" #FN ": operands have different dtypes");                     \
  WEFT_DETAIL_SUPPORT_CHECK(FN##_dtype, "weft::" #FN ": the operands' dtype is not supported");             \
  WEFT_DETAIL_DIM_CHECK(FN##_broadcast, "weft::" #FN ": operand shapes cannot be broadcast");               \
  }                                                                                                          \
  namespace tags {                                                                                            \
  /** The DSL's tag of op OP, as fusion and the gradient rules read it. */                                    \
  struct FN {                                                                                                 \
    using op = ops::OP;                           /**< the op's type */                                       \
    static constexpr const char* name = op::name; /**< the op's name */                                       \
    static constexpr bool bool_result = BOOL;     /**< whether the result is bool (comparisons) */            \
    using types = TYPES;                          /**< the element types it admits */                         \
    /** The compile-time check that both operands' dtypes agree. */                                           \
    template <class X, class Y>                                                                               \
    using dtypes = check::FN##_dtypes<X, Y>;                                                                  \
    /** The compile-time check that the dtype is admitted. */                                                 \
    template <class X, bool Ok>                                                                               \
    using supported = check::FN##_dtype<X, Ok>;                                                               \
    /** The compile-time check that a pair of static dims broadcasts. */                                      \
    template <std::int64_t X, std::int64_t Y>                                                                 \
    using broadcast = check::FN##_broadcast<X, Y>;                                                            \
    /** Registers the op's kernel for element type T where a program compiles its own. */                     \
    template <class T>                                                                                        \
    static void register_kernel() {                                                                           \
      use_kernels<op, T>();                                                                                  \
    }                                                                                                        \
  };                                                                                                         \
  }                                                                                                          \
  /** Op OP with broadcasting (TensorFlow's rules; static dims that cannot broadcast, or two */               \
  /** dtypes, are a compile error); a number beside an expression takes its dtype. */                         \
  template <class A, class B>                                                                                 \
    requires binary_operands<A, B>                                                                            \
  auto FN(const A& a, const B& b) {                                                                           \
    return detail::make_binary<tags::FN>(a, b);                                                              \
  }

WEFT_DETAIL_DSL_BINARY(add, Add, number_types, false)
WEFT_DETAIL_DSL_BINARY(subtract, Sub, number_types, false)
WEFT_DETAIL_DSL_BINARY(multiply, Mul, number_types, false)
WEFT_DETAIL_DSL_BINARY(divide, Div, number_types, false)
WEFT_DETAIL_DSL_BINARY(pow, Pow, pow_types, false)
WEFT_DETAIL_DSL_BINARY(maximum, Maximum, real_number_types, false)
WEFT_DETAIL_DSL_BINARY(minimum, Minimum, real_number_types, false)
WEFT_DETAIL_DSL_BINARY(squared_difference, SquaredDifference, float_types, false)
WEFT_DETAIL_DSL_BINARY(atan2, Atan2, float_types, false)
WEFT_DETAIL_DSL_BINARY(floor_div, FloorDiv, real_number_types, false)
WEFT_DETAIL_DSL_BINARY(floor_mod, FloorMod, real_number_types, false)
WEFT_DETAIL_DSL_BINARY(greater, Greater, real_number_types, true)
WEFT_DETAIL_DSL_BINARY(greater_equal, GreaterEqual, real_number_types, true)
WEFT_DETAIL_DSL_BINARY(less, Less, real_number_types, true)
WEFT_DETAIL_DSL_BINARY(less_equal, LessEqual, real_number_types, true)
WEFT_DETAIL_DSL_BINARY(equal, Equal, all_types, true)
WEFT_DETAIL_DSL_BINARY(not_equal, NotEqual, all_types, true)
WEFT_DETAIL_DSL_BINARY(logical_and, LogicalAnd, type_list<bool>, true)
WEFT_DETAIL_DSL_BINARY(logical_or, LogicalOr, type_list<bool>, true)
#undef WEFT_DETAIL_DSL_BINARY

/// Operators. == and != are not overloaded (an expression's == would not be a bool); use
/// equal() and not_equal(). a + b is add(a, b).
template <class A, class B> requires binary_operands<A, B>
auto operator+(const A& a, const B& b) { return add(a, b); }
/// subtract(a, b).
template <class A, class B> requires binary_operands<A, B>
auto operator-(const A& a, const B& b) { return subtract(a, b); }
/// multiply(a, b), elementwise (matmul is the matrix product).
template <class A, class B> requires binary_operands<A, B>
auto operator*(const A& a, const B& b) { return multiply(a, b); }
/// divide(a, b).
template <class A, class B> requires binary_operands<A, B>
auto operator/(const A& a, const B& b) { return divide(a, b); }
/// less(a, b), a bool expression.
template <class A, class B> requires binary_operands<A, B>
auto operator<(const A& a, const B& b) { return less(a, b); }
/// less_equal(a, b).
template <class A, class B> requires binary_operands<A, B>
auto operator<=(const A& a, const B& b) { return less_equal(a, b); }
/// greater(a, b).
template <class A, class B> requires binary_operands<A, B>
auto operator>(const A& a, const B& b) { return greater(a, b); }
/// greater_equal(a, b).
template <class A, class B> requires binary_operands<A, B>
auto operator>=(const A& a, const B& b) { return greater_equal(a, b); }
/// logical_and(a, b) of bool expressions (both are computed).
template <class A, class B> requires binary_operands<A, B>
auto operator&&(const A& a, const B& b) { return logical_and(a, b); }
/// logical_or(a, b) of bool expressions (both are computed).
template <class A, class B> requires binary_operands<A, B>
auto operator||(const A& a, const B& b) { return logical_or(a, b); }
/// negate(a).
template <expression A>
auto operator-(const A& a) { return negate(a); }
/// logical_not(a).
template <expression A>
auto operator!(const A& a) { return logical_not(a); }

/// SelectV2's descriptor.
template <class T>
struct select_op : detail::lowers_plainly<select_op<T>> {
  static constexpr bool elementwise = true;  ///< whether fusion may merge it with its elementwise neighbours
  using op = ops::SelectV2;  ///< the op's type
  static constexpr const char* name = "SelectV2";  ///< the graph op's name
  /// The node's attrs.
  attr_map attrs() const { return {}; }
  /// Asks for the kernels the node needs (where a program compiles its own).
  void prepare() const { use_kernels<op, T>(); }
};
/// select(condition, t, e): t where condition holds, else e; all three broadcast. The
/// condition must be bool and t and e of one dtype (compile errors otherwise).
template <expression C, expression A, expression B>
auto select(const C& c, const A& a, const B& b) {
  using T = value_type_of<A>;
  using ab = detail::broadcast_shapes<shape_of<A>, shape_of<B>>;
  using all = detail::broadcast_shapes<shape_of<C>, typename ab::type>;
  (void)check::select_condition<value_type_of<C>, bool>::value;
  (void)check::select_dtypes<T, value_type_of<B>>::value;
  (void)check::select_broadcast<ab::conflict[0], ab::conflict[1]>::value;
  (void)check::select_broadcast<all::conflict[0], all::conflict[1]>::value;
  return op_expr<select_op<T>, T, typename all::type, C, A, B>({}, c, a, b);
}
/// select(c, x, 0.0) / select(c, 0.0, x): a number as one branch, of the other's dtype.
template <expression C, expression A, detail::scalar_value U>
auto select(const C& c, const A& a, U b) {
  return select(c, a, detail::scalar_operand<value_type_of<A>>(b));
}
/// See the overload above.
template <expression C, detail::scalar_value U, expression B>
auto select(const C& c, U a, const B& b) {
  return select(c, detail::scalar_operand<value_type_of<B>>(a), b);
}

/// Cast's descriptor.
template <class To, class From>
struct cast_op : detail::lowers_plainly<cast_op<To, From>> {
  static constexpr bool elementwise = true;  ///< whether fusion may merge it with its elementwise neighbours
  using op = ops::Cast;  ///< the op's type
  static constexpr const char* name = "Cast";  ///< the graph op's name
  /// The node's attrs.
  attr_map attrs() const { return {{"DstT", dtype_of<To>}}; }
  /// Asks for the kernels the node needs (where a program compiles its own).
  void prepare() const { use_kernels<op, To>(); }
};
/// cast<U>(x): x converted to U (TensorFlow's Cast).
template <element To, expression A>
auto cast(const A& a) {
  return op_expr<cast_op<To, value_type_of<A>>, To, shape_of<A>, A>({}, a);
}
/// cast_like(x, like): x converted to like's dtype; x itself when it has it.
template <expression A, expression Like>
auto cast_like(const A& a, const Like&) {
  if constexpr (std::is_same_v<value_type_of<A>, value_type_of<Like>>)
    return a;
  else
    return cast<value_type_of<Like>>(a);
}

// ---- matmul ---------------------------------------------------------------------------

/// MatMul's descriptor.
template <class T, bool TA, bool TB>
struct matmul_op : detail::lowers_plainly<matmul_op<T, TA, TB>> {
  static constexpr bool elementwise = false;  ///< whether fusion may merge it with its elementwise neighbours
  using op = ops::MatMul;  ///< the op's type
  static constexpr const char* name = "MatMul";  ///< the graph op's name
  /// The node's attrs.
  attr_map attrs() const { return {{"transpose_a", TA}, {"transpose_b", TB}}; }
  /// Asks for the kernels the node needs (where a program compiles its own).
  void prepare() const { use_kernels<ops::MatMul, T>(); }
};

namespace detail {
using ops::static_rules::dim_or;
/// The pair a check compares: the two dims when both are static, else equal values.
constexpr std::array<std::int64_t, 2> static_pair(std::int64_t a, std::int64_t b) {
  return a < 0 || b < 0 ? std::array<std::int64_t, 2>{0, 0} : std::array<std::int64_t, 2>{a, b};
}
}  // namespace detail

/// matmul(a, b) = a × b for matrices; matmul<true, false>(a, b) = aᵀ × b.
template <bool TransposeA = false, bool TransposeB = false, expression A, expression B>
auto matmul(const A& a, const B& b) {
  using SA = shape_of<A>;
  using SB = shape_of<B>;
  (void)check::matmul_dtypes<value_type_of<A>, value_type_of<B>>::value;
  (void)check::matmul_rank_a<SA::rank, 2>::value;
  (void)check::matmul_rank_b<SB::rank, 2>::value;
  constexpr std::int64_t ka = detail::dim_or(SA::values, TransposeA ? 0 : 1);
  constexpr std::int64_t kb = detail::dim_or(SB::values, TransposeB ? 1 : 0);
  constexpr auto k = detail::static_pair(ka, kb);
  (void)check::matmul_inner_dims<k[0], k[1]>::value;
  using T = value_type_of<A>;
  using S = detail::shape_from_array_t<ops::static_rules::matmul(SA::values, SB::values, TransposeA, TransposeB)>;
  return op_expr<matmul_op<T, TransposeA, TransposeB>, T, S, A, B>({}, a, b);
}

/// fill(dims<2, 3>, value): every element `value` (a scalar expression or number).
template <std::int64_t... D, expression V>
auto fill(static_shape<D...>, const V& value) {
  static_assert(shape_of<V>::rank == 0, "weft::fill: the value must be a scalar (rank 0)");
  (void)check::fill_static<static_shape<D...>::fully_static ? 1 : 0, 1>::value;
  using Op = detail::array_op<ops::Fill>;
  return op_expr<Op, value_type_of<V>, static_shape<D...>, V>(Op{"Fill", {{0, {D...}}}, {}}, value);
}
/// zeros<float>(dims<2, 3>): a tensor of zeros.
template <element T, std::int64_t... D>
auto zeros(static_shape<D...> s) {
  return fill(s, constant(T(0)));
}
/// ones<float>(dims<2, 3>): a tensor of ones.
template <element T, std::int64_t... D>
auto ones(static_shape<D...> s) {
  return fill(s, constant(T(1)));
}

// ---- ops defined outside the library (docs/extending.md) ------------------------------

/// The node of op type Op (framework/kernel_for.hpp) over the operands, with `attrs`; it asks
/// for Op's kernels for dtype T. weft::grad differentiates through it when Op declares
/// has_gradient_rule (its rule registered by Op::define()).
template <op_type Op, class T>
struct typed_op : detail::lowers_plainly<typed_op<Op, T>> {
  static constexpr bool elementwise = false;  ///< whether fusion may merge it with its elementwise neighbours
  using op = Op;  ///< the op's type
  static constexpr const char* name = Op::name;  ///< the graph op's name
  attr_map node_attrs;  ///< the node's attrs
  /// The node's attrs.
  attr_map attrs() const { return node_attrs; }
  /// Asks for the kernels the node needs (where a program compiles its own).
  void prepare() const {
    use_kernels<ops::families::core>();
    use_kernels<Op, T>();
  }
};
/// apply_op<Op, T, S>(attrs, operands...): Op's node over the operands, an expression of dtype
/// T and static shape S (the calling function's static shape rule computes S).
template <op_type Op, element T, class S, expression... Args>
auto apply_op(attr_map attrs, const Args&... args) {
  return op_expr<typed_op<Op, T>, T, S, Args...>(typed_op<Op, T>{{}, std::move(attrs)}, args...);
}

}  // namespace weft
