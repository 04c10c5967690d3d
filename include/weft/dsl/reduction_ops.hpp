/// @file
/// The DSL's reductions: reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod over
/// all axes or axes<...> (keep_dims), and argmax / argmin along one axis. The result's static
/// shape is computed at compile time and the axes are checked there.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/dsl/ops.hpp>
#include <weft/ops/reduction_ops.hpp>

namespace weft {

// ---- reductions -----------------------------------------------------------------------

/// Axes in the type (negative ones count from the end), as axes<...> spells them.
template <std::int64_t... Axes>
struct axis_list {};
/// The axes a reduction runs over: reduce_sum(x, axes<1>).
template <std::int64_t... Axes>
inline constexpr axis_list<Axes...> axes{};
/// keep_dims's type.
struct keep_dims_t {};
/// Keeps the reduced axes as dims of 1: reduce_sum(x, axes<1>, keep_dims).
inline constexpr keep_dims_t keep_dims{};

namespace detail {
/// The shape of a reduction of S over Axes (all axes when none are given).
template <class S, bool Keep, std::int64_t... Axes>
struct reduced_shape {
  static constexpr int rank = S::rank;
  static constexpr std::array<std::int64_t, sizeof...(Axes)> given{Axes...};
  /// The first axis out of range, or 0 when all are in range (for the check).
  static constexpr std::int64_t bad_axis = [] {
    for (auto a : given)
      if (a < -rank || a >= rank) return a;
    return std::int64_t{0};
  }();
  static constexpr bool reduced(std::int64_t d) { return ops::static_rules::reduces(given, rank, d); }
  static constexpr auto dims = ops::static_rules::reduce<S::values, given, Keep>();
  using type = shape_from_array_t<dims>;
  static std::vector<std::int64_t> axes_vector() {
    std::vector<std::int64_t> v;
    for (int d = 0; d < rank; ++d)
      if (reduced(d)) v.push_back(d);
    return v;
  }
};
}  // namespace detail

namespace detail {
template <class Reduction, class Types, class A, bool Keep, std::int64_t... Axes>
auto make_reduce(const char* name, const A& a) {
  using R = reduced_shape<shape_of<A>, Keep, Axes...>;
  using T = value_type_of<A>;
  (void)check::reduce_axis<R::bad_axis, 0>::value;
  static_assert(in_list<T, Types>::value, "weft::reduce: the operand's dtype is not supported by this reduction");
  using Op = indexed_op<Reduction, T>;
  return op_expr<Op, T, typename R::type, A>(Op{name, {{int_input::append, R::axes_vector()}}, {{"keep_dims", Keep}}}, a);
}
}  // namespace detail

// reduce_sum(x): every element; reduce_sum(x, axes<1>): over axis 1; reduce_sum(x, axes<1>, keep_dims).
#define WEFT_DETAIL_DSL_REDUCE(FN, NAME, OP, TYPES)                                         \
  /** TensorFlow's OP over the axes given (every axis when none), the axes dropped; an */   \
  /** axis out of range, or a dtype outside TYPES, is a compile error. */                   \
  template <expression A, std::int64_t... Axes>                                             \
  auto FN(const A& a, axis_list<Axes...> = {}) {                                            \
    return detail::make_reduce<ops::OP, TYPES, A, false, Axes...>(NAME, a);              \
  }                                                                                           \
  /** TensorFlow's OP over the axes given, each kept as a dim of 1. */                      \
  template <expression A, std::int64_t... Axes>                                             \
  auto FN(const A& a, axis_list<Axes...>, keep_dims_t) {                                    \
    return detail::make_reduce<ops::OP, TYPES, A, true, Axes...>(NAME, a);               \
  }
WEFT_DETAIL_DSL_REDUCE(reduce_sum, "Sum", Sum, number_types)
WEFT_DETAIL_DSL_REDUCE(reduce_mean, "Mean", Mean, number_types)
WEFT_DETAIL_DSL_REDUCE(reduce_prod, "Prod", Prod, number_types)
WEFT_DETAIL_DSL_REDUCE(reduce_max, "Max", Max, real_number_types)
WEFT_DETAIL_DSL_REDUCE(reduce_min, "Min", Min, real_number_types)
#undef WEFT_DETAIL_DSL_REDUCE

/// argmax(x, axes<1>) / argmin: the int64 index of the first extreme along one axis.
namespace detail {
template <bool Max, expression A, std::int64_t Axis>
auto make_arg(const A& a) {
  using R = reduced_shape<shape_of<A>, false, Axis>;
  (void)check::reduce_axis<R::bad_axis, 0>::value;
  using T = value_type_of<A>;
  using Op = indexed_op<std::conditional_t<Max, ops::ArgMax, ops::ArgMin>, T>;
  return op_expr<Op, std::int64_t, typename R::type, A>(
      Op{Max ? "ArgMax" : "ArgMin", {{int_input::append, R::axes_vector(), {}}}, {}}, a);
}
}  // namespace detail
/// The int64 index of the first maximum along Axis (TensorFlow's ArgMax); the axis is dropped.
template <expression A, std::int64_t Axis>
auto argmax(const A& a, axis_list<Axis>) {
  return detail::make_arg<true, A, Axis>(a);
}
/// The int64 index of the first minimum along Axis (TensorFlow's ArgMin); the axis is dropped.
template <expression A, std::int64_t Axis>
auto argmin(const A& a, axis_list<Axis>) {
  return detail::make_arg<false, A, Axis>(a);
}

}  // namespace weft
