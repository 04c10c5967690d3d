/// @file
/// The DSL's state ops: assign, assign_add and assign_sub of a variable, each giving the new
/// value (run it as a target).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/dsl/ops.hpp>
#include <weft/ops/state_ops.hpp>

namespace weft {

// ---- state ----------------------------------------------------------------------------

/// Assign's, AssignAdd's and AssignSub's descriptor.
template <class T, int Kind>  // 0 Assign, 1 AssignAdd, 2 AssignSub
struct assign_op : detail::lowers_plainly<assign_op<T, Kind>> {
  static constexpr bool elementwise = false;  ///< whether fusion may merge it with its elementwise neighbours
  static constexpr const char* name = Kind == 0 ? "Assign" : Kind == 1 ? "AssignAdd" : "AssignSub";  ///< the graph op's name
  /// The node's attrs.
  attr_map attrs() const { return {}; }
  /// Asks for the kernels the node needs (where a program compiles its own).
  void prepare() const {
    use_kernels<std::conditional_t<Kind == 0, ops::Assign, std::conditional_t<Kind == 1, ops::AssignAdd, ops::AssignSub>>,
                T>();
  }
};

namespace detail {
template <int Kind, class T, class S, class V>
auto make_assign(const variable_expr<T, S>& var, const V& value) {
  using VS = shape_of<V>;
  (void)check::assign_dtypes<T, value_type_of<V>>::value;
  (void)check::assign_rank<S::rank, VS::rank>::value;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((void)check::assign_dims<static_pair(S::values[I], dim_or(VS::values, I))[0],
                              static_pair(S::values[I], dim_or(VS::values, I))[1]>::value,
     ...);
  }(std::make_index_sequence<S::values.size()>{});
  return op_expr<assign_op<T, Kind>, T, S, variable_expr<T, S>, V>({}, var, value);
}
}  // namespace detail

/// assign(v, value): stores value in v and gives the new value (run it as a target).
template <class T, class S, expression V>
auto assign(const variable_expr<T, S>& var, const V& value) {
  return detail::make_assign<0>(var, value);
}
/// assign_add(v, value): adds value to v and gives the new value.
template <class T, class S, expression V>
auto assign_add(const variable_expr<T, S>& var, const V& value) {
  return detail::make_assign<1>(var, value);
}
/// assign_sub(v, value): subtracts value from v and gives the new value.
template <class T, class S, expression V>
auto assign_sub(const variable_expr<T, S>& var, const V& value) {
  return detail::make_assign<2>(var, value);
}

}  // namespace weft
