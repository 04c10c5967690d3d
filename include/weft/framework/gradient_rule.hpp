/// @file
/// What a gradient rule sees and returns, for any value type V the rule is written over
/// (the graph's `symbol`, graph/gradient_symbol.hpp, or a typed DSL expression), so that an
/// op's rule can be written beside its definition (ops/*.hpp) below the layers that
/// instantiate it. An op type declares its rule as `using gradient = R;` where R has either
///   `template <class V> static gradient_result<V> apply(const gradient_args<V>&)`
/// (any op), or, for an elementwise op,
///   `template <class D, class... X, class Y> static auto partials(const D& d, const X&... x, const Y& y)`
/// returning a tuple with, per operand, d times the derivative of y in that operand at the
/// output's (broadcast) shape, or no_partial where there is none. The same partials serve
/// graph symbols (graph/gradient_rules.hpp sums each down to its operand's shape) and typed
/// expressions (dsl/gradient.hpp chains them through a fused subtree).
///
/// A rule calls the operations of its value type unqualified (sum_to, matmul, select, ...),
/// found by argument-dependent lookup where the rule is instantiated.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/shape.hpp>

namespace weft {

class node;  ///< graph/graph.hpp: complete where a rule is instantiated

/// What a rule sees. `dy[i]` is the gradient flowing into output i (absent: none flows).
template <class V>
struct gradient_args {
  const node& n;                   ///< the node (its attrs; errors name it)
  std::vector<V> x;                ///< the node's inputs
  std::vector<V> y;                ///< its outputs
  std::vector<std::optional<V>> dy;  ///< per output, the gradient flowing in (absent: none)
  std::vector<char> wanted;  ///< per input, whether its gradient is asked for (empty: all are)
  const V& d() const { return *dy.at(0); }  ///< the gradient of a single-output op
  /// Whether input `input`'s gradient is asked for (a rule may skip the others).
  bool needs(std::size_t input) const { return wanted.empty() || wanted.at(input); }
};
template <class V>
using gradient_result = std::vector<std::optional<V>>;  ///< one per input; absent: no gradient

namespace gradients {
template <class V>
using args = gradient_args<V>;  ///< short for rules
template <class V>
using result = gradient_result<V>;  ///< short for rules
/// An elementwise rule's partial for an operand that has none (Select's condition).
struct no_partial {};

/// The axis (or axes) of node `n` given by the int constant `axes`, canonical for the rank of
/// `x`, sorted and without repeats; an error naming the node when it is not a constant, or
/// when x's rank is not known when the graph is built (constant_ints: the value type's).
template <class Node, class V>
std::vector<std::int64_t> constant_axes(const Node& n, const V& axes, const partial_shape& x) {
  const auto v = constant_ints(axes);
  if (!v || !x.rank_known())
    fail(error_code::unimplemented, "weft::add_gradients: the gradient of ", n.describe(),
         " needs a constant axis and an input of known rank");
  std::vector<std::int64_t> out;
  for (auto a : *v) {
    if (a < -x.rank() || a >= x.rank())
      fail(error_code::invalid_argument, "weft::add_gradients: ", n.describe(), " has axis ", a, " out of range for rank ",
           x.rank());
    out.push_back(a < 0 ? a + x.rank() : a);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}
/// The one axis of `n` given by `axis` (ConcatV2's, GatherV2's), as constant_axes.
template <class Node, class V>
std::int64_t one_axis(const Node& n, const V& axis, const partial_shape& x) {
  const std::vector<std::int64_t> axes = constant_axes(n, axis, x);
  if (axes.size() != 1) fail(error_code::invalid_argument, "weft::add_gradients: ", n.describe(), " needs one axis");
  return axes[0];
}
}  // namespace gradients

/// Whether op type Op declares a gradient rule: `using gradient = R;` (the library's ops), or
/// `static constexpr bool has_gradient_rule = true;` with the rule registered by name in
/// its define() (a user's op may do either; docs/extending.md).
template <class Op>
inline constexpr bool has_gradient_rule_v = [] {
  if constexpr (requires { typename Op::gradient; })
    return true;
  else if constexpr (requires { Op::has_gradient_rule; })
    return static_cast<bool>(Op::has_gradient_rule);
  else
    return false;
}();

}  // namespace weft
