/// @file
/// The gradient rules of graphs built at run time: each standard op's rule is declared by its
/// op type, beside its definition (ops/*.hpp, `using gradient = R`, written once over a value
/// type; framework/gradient_rule.hpp); here they are instantiated for `symbol`
/// (gradient_symbol.hpp) and registered by op name, with the rules of the control-flow ops,
/// which only graphs have. Conventions follow TensorFlow's: the gradient of a broadcast
/// operand is summed down to its shape (sum_to); at a tie, Maximum and Minimum send the
/// gradient to their first operand; Relu's gradient at 0 is 0; Pow's gradient in the
/// exponent is 0 where the base is not positive.
#pragma once

#include <cstddef>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/gradient_rule.hpp>
#include <weft/graph/gradient_symbol.hpp>
#include <weft/ops/standard.hpp>

namespace weft::gradients {

/// An elementwise rule on graph symbols; the partials of a binary op or Select are summed
/// down to their operands' shapes (unary ops do not broadcast).
template <class Rule>
struct elementwise_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    constexpr std::size_t n = requires(const V& v) { Rule::partials(v, v, v); }      ? 1
                              : requires(const V& v) { Rule::partials(v, v, v, v); } ? 2
                                                                                     : 3;
    if (a.x.size() != n)
      fail(error_code::invalid_argument, "weft::add_gradients: ", a.n.describe(), " has ", a.x.size(),
           " inputs; its gradient rule takes ", n);
    auto parts = [&]<std::size_t... I>(std::index_sequence<I...>) { return Rule::partials(a.d(), a.x[I]..., a.y[0]); }(
        std::make_index_sequence<n>{});
    result<V> out;
    std::apply([&](const auto&... p) { (out.push_back(reduced<n>(p, a.x[out.size()])), ...); }, parts);
    return out;
  }

 private:
  template <std::size_t N, class V>
  static std::optional<V> reduced(const V& p, const V& x) {
    if constexpr (N == 1) return p;
    else return sum_to(p, x);
  }
  template <std::size_t N, class V>
  static std::optional<V> reduced(no_partial, const V&) { return std::nullopt; }
};

/// Op type Op's rule as a rule over graph symbols: its apply, or its elementwise partials
/// summed down to the operands' shapes.
template <class Op>
gradient_result<symbol> apply_rule(const gradient_args<symbol>& a) {
  using R = typename Op::gradient;
  if constexpr (requires { R::template apply<symbol>(a); })
    return R::template apply<symbol>(a);
  else
    return elementwise_grad<R>::template apply<symbol>(a);
}

// ---- control flow (graphs only) ----------------------------------------------------------

/// A cond's Switch: the gradients of its two outputs meet in a Merge, the side that did not
/// run given zeros on that side only (a Switch of zeros), so that the Merge gets one live value.
struct switch_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  static result<symbol> apply(const args<symbol>& a) {
    if (a.x[1].producer().op() == "LoopCond")
      fail(error_code::internal, "weft::add_gradients: ", a.n.describe(), " is a loop's Switch, differentiated as a cond's");
    auto side = [&](int port) { return a.dy[static_cast<std::size_t>(port)] ? *a.dy[static_cast<std::size_t>(port)]
                                                                             : zeros_like(a.x[0]).then("Switch", {a.x[1]}, {}, port); };
    return {side(0).then("Merge", {side(1)}), std::nullopt};
  }
};
/// A cond's Merge: the gradient goes to the input that was taken (value_index), through a
/// Switch; the other inputs' gradients are dead, as their branches were.
struct merge_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  static result<symbol> apply(const args<symbol>& a) {
    result<symbol> r;
    for (std::size_t i = 0; i < a.x.size(); ++i) {
      if (!a.needs(i)) {
        r.push_back(std::nullopt);
        continue;
      }
      auto taken = equal(a.y[1], constant_in(a.y[1], tensor::scalar(static_cast<std::int32_t>(i))));
      r.push_back(a.d().then("Switch", {taken}, {}, 1));
    }
    return r;
  }
};

/// Registers, once, the rule of every standard op type that declares one, and the rules of
/// Switch and Merge.
void register_standard_gradients();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void register_standard_gradients() {
  static const bool done = [] {
    auto& r = gradient_registry::global();
    auto family = [&]<class... Op>(type_list<Op...>) {
      auto one = [&]<class O>(std::type_identity<O>) {
        if constexpr (requires { typename O::gradient; }) r.add(O::name, &apply_rule<O>);
      };
      (one(std::type_identity<Op>{}), ...);
    };
    [&]<class... F>(type_list<F...>) { (family(typename F::types{}), ...); }(ops::standard_families{});
    r.add("Switch", &switch_grad::apply);
    r.add("Merge", &merge_grad::apply);
    return true;
  }();
  (void)done;
}
#endif

}  // namespace weft::gradients
