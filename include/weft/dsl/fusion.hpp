/// @file
/// Elementwise fusion (DESIGN.md §2, layer 2). Lowering turns every maximal subtree of
/// elementwise ops (casts, comparisons and select included) into one "Fused" node
/// (ops/fused_ops.hpp) whose kernel each device type's backend compiles from the subtree's
/// type (fused::apply / fused::leaf), and which evaluates the whole subtree in one pass
/// (kernels/cpu/fused.hpp on the CPU). Intermediate results never reach memory.
///
/// Covered: subtrees of every dtype but string, without integer Div, Pow, FloorDiv or
/// FloorMod (whose kernels check their operands) and casts from complex to real. All ops lower one node each when
/// fusion is off.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/dsl/ops.hpp>
#include <weft/framework/signature_table.hpp>
#include <weft/ops/fused_ops.hpp>

namespace weft {

namespace detail {

// ---- which expressions fuse ----------------------------------------------------------

template <class T>
inline constexpr bool fusable_type_v = std::is_same_v<T, bool> || std::is_arithmetic_v<T> || is_half_v<T> ||
                                       std::is_same_v<T, complex64> || std::is_same_v<T, complex128>;

/// Casts from a complex type to a real one are not fused (TensorFlow's Cast takes the real
/// part; Eigen's cast does not compile): the Cast is its own node.
template <class Op>
struct complex_to_real_cast : std::false_type {};
template <class To, class From>
struct complex_to_real_cast<cast_op<To, From>>
    : std::bool_constant<Eigen::NumTraits<From>::IsComplex && !Eigen::NumTraits<To>::IsComplex> {};

/// Whether an op node fuses (an elementwise op of fusable types, not integer Div, Pow,
/// FloorDiv or FloorMod, whose kernels check their operands first).
template <class Op, class T, class... Args>
constexpr bool fuses() {
  if constexpr (!Op::elementwise) {
    return false;  // (not every other descriptor has a static name)
  } else {
    return fusable_type_v<T> && (fusable_type_v<value_type_of<Args>> && ...) && !complex_to_real_cast<Op>::value &&
           !((std::string_view(Op::name) == "Div" || std::string_view(Op::name) == "Pow" ||
              std::string_view(Op::name) == "FloorDiv" || std::string_view(Op::name) == "FloorMod") &&
             std::is_integral_v<value_type_of<std::tuple_element_t<0, std::tuple<Args...>>>>);
  }
}
template <class E>
struct interior : std::false_type {};  ///< a leaf of the fused subtree
template <class Op, class T, class S, class... Args>
struct interior<op_expr<Op, T, S, Args...>> : std::bool_constant<fuses<Op, T, Args...>()> {};

template <class E>
struct fused_count {  // interior nodes, leaves
  static constexpr std::size_t ops = 0, leaves = 1;
};
template <class Op, class T, class S, class... Args>
  requires interior<op_expr<Op, T, S, Args...>>::value
struct fused_count<op_expr<Op, T, S, Args...>> {
  static constexpr std::size_t ops = 1 + (fused_count<Args>::ops + ... + 0);
  static constexpr std::size_t leaves = (fused_count<Args>::leaves + ... + 0);
};

/// The offset of operand I's first leaf among its parent's leaves.
template <class Tuple, std::size_t I>
constexpr std::size_t leaf_offset() {
  return [&]<std::size_t... J>(std::index_sequence<J...>) {
    return (fused_count<std::tuple_element_t<J, Tuple>>::leaves + ... + 0);
  }(std::make_index_sequence<I>{});
}

/// The device-neutral description of subtree E (ops/fused_ops.hpp), from which the backends
/// compile its kernels.
template <class E>
struct fused_tree {
  using type = fused::leaf<value_type_of<E>, shape_of<E>::rank == 0>;
};
template <class Op, class T, class S, class... Args>
  requires interior<op_expr<Op, T, S, Args...>>::value
struct fused_tree<op_expr<Op, T, S, Args...>> {
  using type = fused::apply<typename Op::op, T, typename fused_tree<Args>::type...>;
};
template <class E>
using fused_tree_t = typename fused_tree<E>::type;

/// "Add:float32(Mul:float32($float32,$float32s),$float32)": the ops, dtypes and structure
/// of subtree E; a leaf is $dtype, with s when it is a static scalar.
template <class E>
void append_signature(std::string& out) {
  out += fused::signature<fused_tree_t<E>>();
}

/// Lowers the leaves of a subtree, in order.
template <class E>
void lower_leaves(lowering& cx, const E& e, std::vector<output>& out) {
  if constexpr (interior<E>::value)
    std::apply([&](const auto&... a) { (lower_leaves(cx, a, out), ...); }, e.args());
  else
    out.push_back(weft::lower(cx, e));
}

template <class E>
std::optional<output> try_fuse(lowering& cx, const E& e) {
  if constexpr (!interior<E>::value || fused_count<E>::ops < 2) {
    return std::nullopt;
  } else {
    const std::string& signature = fused::signature<fused_tree_t<E>>();
    use_kernels<ops::Fused<fused_tree_t<E>>>();
    std::vector<output> leaves;
    lower_leaves(cx, e, leaves);
    std::vector<output> inputs;
    std::vector<std::int64_t> slots;
    for (const auto& l : leaves) {
      auto it = std::find(inputs.begin(), inputs.end(), l);
      slots.push_back(it - inputs.begin());
      if (it == inputs.end()) inputs.push_back(l);
    }
    return cx.add("Fused", std::move(inputs),
                  {{"expr", signature}, {"slots", std::move(slots)}, {"T", dtype_of<value_type_of<E>>}}, e.scope(),
                  E::op_type::name);
  }
}

}  // namespace detail

}  // namespace weft
