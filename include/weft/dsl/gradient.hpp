/// @file
/// Gradients of typed expressions (the whitepaper's §4.1 on the DSL):
///
///   auto loss = reduce_mean(square(matmul(x, w) + b - y));
///   auto [dw, db] = weft::grad(loss, w, b);      // expressions of w's and b's dtype and shape
///   auto step = group(assign_sub(w, 0.1f * dw), assign_sub(b, 0.1f * db));
///
/// grad(y, xs...) is an expression per x: the gradient of the sum of y's elements with
/// respect to x (zeros where y does not depend on x). It is checked when it is compiled:
/// y and the xs must have a floating-point dtype, and every op on a path from an x to y must
/// have a gradient rule, else the build fails naming the op's descriptor type
/// (weft::check::gradient_rule<Op, false>). Paths are found by type: an op counts when one of
/// its operands contains an expression of an x's type (so a second variable of the same type
/// as an x counts too). Expressions behind type-erased handles are checked when the gradient
/// is lowered, with an error naming the node.
///
/// Lowering a gradient lowers y and the xs, then extends the graph backwards with the same
/// gradient rules as graphs built op by op (graph/gradient_rules.hpp); the gradient nodes go
/// under "gradients/" in the scope where grad was called. Elementwise subtrees that lowering
/// fused into one node get a fused backward too: per input of the fused node, the chain of
/// the elementwise ops' partials (the same rules, written over any value type) is one typed
/// expression at the fused node's output shape, which lowers (and fuses) like any other, and
/// is then summed down to the input's shape. The fused backward recomputes the subtree's
/// intermediate values in registers rather than storing them. A fused node that no typed
/// code registered a backward for (one reached through a handle, or the backward of a
/// backward: second derivatives) is differentiated by expanding it into its ops.
///
/// Lowering a gradient also registers the kernels its backward ops need, for the dtypes
/// involved, so DSL programs need not link the full kernel registry.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/dsl/fusion.hpp>
#include <weft/dsl/nn_ops.hpp>
#include <weft/graph/gradients.hpp>

namespace weft {

namespace check {
/// Op: the descriptor of an op on a path from an x to y that has no gradient rule.
template <class Op, bool Ok>
struct gradient_rule {
  static_assert(Ok, "weft::grad: an op on the path from an x to y has no gradient (its descriptor is Op)");
  static constexpr bool value = Ok;
};
WEFT_DETAIL_SUPPORT_CHECK(grad_output_dtype, "weft::grad: y must have a floating-point dtype");
WEFT_DETAIL_SUPPORT_CHECK(grad_input_dtype, "weft::grad: each x must have a floating-point dtype");
}  // namespace check

namespace detail {

template <class T>
inline constexpr bool differentiable_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// ---- which ops have rules ------------------------------------------------------------

/// The elementwise partials of op type O, asked of the op (framework/gradient_rule.hpp): its
/// `partials` where its graph rule is not written as partials (Relu's emits one ReluGrad
/// node), else its gradient rule.
template <class O>
struct partials_of {
  using type = typename O::gradient;
};
template <class O>
  requires requires { typename O::partials; }
struct partials_of<O> {
  using type = typename O::partials;
};

/// Whether the op of descriptor Op has a gradient rule: asked of its op type (Op::op, an
/// ops:: type or a user's, framework/kernel_for.hpp). The nn descriptor names its op at run
/// time; every op of nn_ops.hpp has a rule.
template <class Op>
struct has_gradient : std::false_type {};
template <class Op>
  requires requires { typename Op::op; }
struct has_gradient<Op> : std::bool_constant<has_gradient_rule_v<typename Op::op>> {};
template <>
struct has_gradient<nn_op> : std::true_type {};

/// Whether expression E is, or contains, an expression of one of the types Xs.
template <class E, class... Xs>
struct contains : std::bool_constant<(std::is_same_v<E, Xs> || ...)> {};
template <class Op, class T, class S, class... Args, class... Xs>
struct contains<op_expr<Op, T, S, Args...>, Xs...>
    : std::bool_constant<(std::is_same_v<op_expr<Op, T, S, Args...>, Xs> || ...) || (contains<Args, Xs...>::value || ...)> {};

/// Checks every op of E on a path from an expression of a type in Xs (compile time).
template <class E, class... Xs>
struct check_gradient_path : std::true_type {};
template <class Op, class T, class S, class... Args, class... Xs>
struct check_gradient_path<op_expr<Op, T, S, Args...>, Xs...> {
  static constexpr bool on_path = !(std::is_same_v<op_expr<Op, T, S, Args...>, Xs> || ...) && differentiable_v<T> &&
                                  ((differentiable_v<value_type_of<Args>> && contains<Args, Xs...>::value) || ...);
  static constexpr bool value = check::gradient_rule<Op, !on_path || has_gradient<Op>::value>::value &&
                                (check_gradient_path<Args, Xs...>::value && ...);
};

/// Sets the current scope to a copy of `s` while it lives.
struct in_scope : scope_guard_base {
  explicit in_scope(const scope_info& s) : scope_guard_base(s) {}
};

/// Gradient nodes added through a DSL lowering (merged with equal nodes, fused subtrees
/// differentiated by their compiled backward).
class lowering_gradient_builder final : public gradient_builder {
 public:
  lowering_gradient_builder(lowering& cx, const scope_info* scope) : cx_(cx), scope_(scope) {}
  const graph& target() const override { return cx_.target(); }
  output add(std::string_view op, std::vector<output> inputs, attr_map attrs) override {
    return cx_.add(op, std::move(inputs), std::move(attrs), scope_);
  }
  graph* mutable_graph() override { return &cx_.target(); }  ///< the backward loop of a while loop
  /// A lowering inside a loop's body (or a branch) adds its nodes there (dsl/expr.hpp).
  bool builds_in_loop_body() const override { return cx_.parent() != nullptr; }
  void adopt(output o) override { cx_.adopt(o); }  ///< what reads o stays in this lowering's frame
  /// Added where its inputs are, not hoisted (lowering::add_in_place).
  output add_in_place(std::string_view op, std::vector<output> inputs, attr_map attrs) override {
    return cx_.add_in_place(op, std::move(inputs), std::move(attrs), scope_);
  }
  lowering& target_lowering() const noexcept { return cx_; }
  const scope_info* scope() const noexcept { return scope_; }

 private:
  lowering& cx_;
  const scope_info* scope_;
};

// ---- fused backward ---------------------------------------------------------------------

/// A leaf of a fused subtree's backward: a tensor already in the graph.
template <class T, class S>
class bound_expr : public expr_base {
 public:
  using value_type = T;  ///< the element type
  using shape_type = S;  ///< the static shape (static_shape)
  bound_expr(const graph& g, output o) : graph_(&g), out_(o) {}
  /// The expression's output in cx's graph, its nodes added there when not yet.
  output lower(lowering& cx) const {
    if (&cx.target() != graph_)
      fail(error_code::internal, "weft::grad: a fused backward was lowered into another graph than its forward's");
    return out_;
  }

 private:
  const graph* graph_;
  output out_;
};

/// E with its fused leaves replaced by bound_exprs: the subtree rebuilt over tensors.
template <class E>
struct rebound {
  using type = bound_expr<value_type_of<E>, shape_of<E>>;
};
template <class Op, class T, class S, class... Args>
  requires interior<op_expr<Op, T, S, Args...>>::value
struct rebound<op_expr<Op, T, S, Args...>> {
  using type = op_expr<Op, T, S, typename rebound<Args>::type...>;
};

template <class E, std::size_t Off>
typename rebound<E>::type rebind(const graph& g, const std::vector<output>& leaves) {
  if constexpr (interior<E>::value) {
    using Args = typename E::args_type;
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return typename rebound<E>::type(typename E::op_type{},
                                       rebind<std::tuple_element_t<I, Args>, Off + leaf_offset<Args, I>()>(g, leaves)...);
    }(std::make_index_sequence<std::tuple_size_v<Args>>{});
  } else {
    return typename rebound<E>::type(g, leaves[Off]);
  }
}

template <class E>
struct is_bound : std::false_type {};
template <class T, class S>
struct is_bound<bound_expr<T, S>> : std::true_type {};

/// The partials of rebound subtree X's leaves (from its root's gradient d): a tuple with one
/// entry per leaf position, the chain of the partials from X down to it at the output's
/// shape, or no_partial where none flows.
template <class X>
auto no_partials() {
  return []<std::size_t... K>(std::index_sequence<K...>) {
    return std::tuple{(static_cast<void>(K), gradients::no_partial{})...};
  }(std::make_index_sequence<fused_count<X>::leaves>{});
}
template <class X, class D>
auto chain_partials(const X& x, const D& d);

/// The partials of operand I of rebound node X, given the node's partials `parts`.
template <std::size_t I, class X, class Parts>
auto operand_partials(const X& x, const Parts& parts) {
  using P = std::remove_cvref_t<std::tuple_element_t<I, Parts>>;
  using A = std::tuple_element_t<I, typename X::args_type>;
  if constexpr (!std::is_same_v<P, gradients::no_partial> && differentiable_v<value_type_of<A>>)
    return chain_partials(std::get<I>(x.args()), std::get<I>(parts));
  else
    return no_partials<A>();
}

template <class X, class Parts, std::size_t... I>
auto all_operand_partials(const X& x, const Parts& parts, std::index_sequence<I...>) {
  return std::tuple_cat(operand_partials<I>(x, parts)...);
}

template <class X, class D>
auto chain_partials(const X& x, const D& d) {
  if constexpr (is_bound<X>::value) {
    return std::tuple<D>{d};
  } else {
    using Rule = typename partials_of<typename X::op_type::op>::type;
    auto parts = std::apply([&](const auto&... a) { return Rule::partials(d, a..., x); }, x.args());
    return all_operand_partials(x, parts, std::make_index_sequence<std::tuple_size_v<typename X::args_type>>{});
  }
}

/// The leaf types of subtree E, in order.
template <class E>
struct leaf_types {
  using type = std::tuple<E>;
};
template <class Op, class T, class S, class... Args>
  requires interior<op_expr<Op, T, S, Args...>>::value
struct leaf_types<op_expr<Op, T, S, Args...>> {
  using type = decltype(std::tuple_cat(std::declval<typename leaf_types<Args>::type>()...));
};

/// Per leaf position, the first position whose leaf has the same type: leaves of one type
/// are usually one tensor (x used several times), whose partials are summed in one
/// expression when they are.
template <class E>
constexpr auto first_of_type() {
  using L = typename leaf_types<E>::type;
  constexpr std::size_t n = std::tuple_size_v<L>;
  return []<std::size_t... K>(std::index_sequence<K...>) {
    std::array<std::size_t, n> out{};
    auto one = [&]<std::size_t J>() {
      std::size_t first = J;
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((first = (I < first && std::is_same_v<std::tuple_element_t<I, L>, std::tuple_element_t<J, L>>) ? I : first), ...);
      }(std::make_index_sequence<n>{});
      out[J] = first;
    };
    (one.template operator()<K>(), ...);
    return out;
  }(std::make_index_sequence<n>{});
}

/// The sum of the partials at the positions from K on whose group is R (no_partial: none).
template <auto Group, std::size_t R, std::size_t K, class Parts, class Acc>
auto group_sum(const Parts& parts, const Acc& acc) {
  if constexpr (K == std::tuple_size_v<Parts>) {
    return acc;
  } else {
    using P = std::remove_cvref_t<std::tuple_element_t<K, Parts>>;
    if constexpr (Group[K] != R || std::is_same_v<P, gradients::no_partial>)
      return group_sum<Group, R, K + 1>(parts, acc);
    else if constexpr (std::is_same_v<Acc, gradients::no_partial>)
      return group_sum<Group, R, K + 1>(parts, std::get<K>(parts));
    else
      return group_sum<Group, R, K + 1>(parts, acc + std::get<K>(parts));
  }
}

/// Adds, through add(slot, partial), the partials of group R (the positions whose leaves
/// have the type of position R's): as one sum when they all read one input, else one by one.
template <auto Group, std::size_t R, std::size_t K, class Parts, class Add>
void add_one(const Parts& parts, const std::vector<std::int64_t>& slots, Add& add) {
  using P = std::remove_cvref_t<std::tuple_element_t<K, Parts>>;
  if constexpr (Group[K] == R && !std::is_same_v<P, gradients::no_partial>) add(slots[K], std::get<K>(parts));
}
template <auto Group, std::size_t R, class Parts, class Add, std::size_t... K>
void add_each(const Parts& parts, const std::vector<std::int64_t>& slots, Add& add, std::index_sequence<K...>) {
  (add_one<Group, R, K>(parts, slots, add), ...);
}
template <auto Group, std::size_t R, class Parts, class Add>
void add_group(const Parts& parts, const std::vector<std::int64_t>& slots, Add& add) {
  if constexpr (Group[R] == R) {
    constexpr std::size_t n = std::tuple_size_v<Parts>;
    bool one_input = true;
    for (std::size_t k = R; k < n; ++k) one_input = one_input && (Group[k] != R || slots[k] == slots[R]);
    if (one_input) {
      const auto sum = group_sum<Group, R, 0>(parts, gradients::no_partial{});
      if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(sum)>, gradients::no_partial>) add(slots[R], sum);
    } else {  // leaves of one type that are different tensors
      add_each<Group, R>(parts, slots, add, std::make_index_sequence<n>{});
    }
  }
}
template <auto Group, class Parts, class Add, std::size_t... R>
void add_groups(const Parts& parts, const std::vector<std::int64_t>& slots, Add& add, std::index_sequence<R...>) {
  (add_group<Group, R>(parts, slots, add), ...);
}

/// The backward of fused subtree E, for a Fused node of E's signature: per input, the sum of
/// its leaves' partials as one expression, lowered (and fused) in `cx`, then summed down to
/// the input's shape. Inputs no gradient is asked of are skipped.
template <class E>
gradient_result<symbol> fused_backward(const gradient_args<symbol>& a, lowering_gradient_builder& b) {
  constexpr std::size_t n = fused_count<E>::leaves;
  constexpr auto group = first_of_type<E>();
  lowering& cx = b.target_lowering();
  const graph& g = cx.target();
  const auto& slots = a.n.attr<std::vector<std::int64_t>>("slots");
  if (slots.size() != n || !a.dy[0])
    fail(error_code::internal, "weft::grad: ", a.n.describe(), " does not match its compiled backward");
  std::vector<output> leaves;
  for (auto s : slots) leaves.push_back(a.x.at(static_cast<std::size_t>(s)).out());
  const in_scope scope(*b.scope());  // the typed backward's nodes go where the builder's do
  const auto x = rebind<E, 0>(g, leaves);
  const bound_expr<value_type_of<E>, shape_of<E>> d(g, a.dy[0]->out());
  const auto parts = chain_partials(x, d);
  std::vector<std::optional<symbol>> sums(a.x.size());
  auto add = [&](std::int64_t slot, const auto& partial) {
    if (!a.needs(static_cast<std::size_t>(slot))) return;
    symbol p(b, weft::lower(cx, partial));
    auto& s = sums[static_cast<std::size_t>(slot)];
    s = s ? *s + p : p;
  };
  add_groups<group>(parts, slots, add, std::make_index_sequence<n>{});
  gradient_result<symbol> out(a.x.size());
  for (std::size_t i = 0; i < a.x.size(); ++i)
    if (sums[i]) out[i] = sum_to(*sums[i], a.x[i]);
  return out;
}

using fused_backward_fn = gradient_result<symbol> (*)(const gradient_args<symbol>&, lowering_gradient_builder&);
using fused_gradient_registry = signature_table<fused_backward_fn>;  ///< compiled backwards, registered by grad()

/// The backward of a Fused node without a compiled one: its subtree, parsed from the
/// signature, rebuilt as one node per op (recomputing the intermediate values) and
/// differentiated with each op's rule.
inline gradient_result<symbol> expanded_fused_backward(const gradient_args<symbol>& a) {
  const std::string& sig = a.n.attr<std::string>("expr");
  const auto& slots = a.n.attr<std::vector<std::int64_t>>("slots");
  struct item {
    symbol value;
    std::vector<std::size_t> operands;  // items
    int input = -1;                     // a leaf: the node input it reads
  };
  std::vector<item> items;
  std::size_t pos = 0, leaf = 0;
  auto bad = [&]() -> std::size_t {
    fail(error_code::invalid_argument, a.n.describe(), ": cannot parse the fused expression '", sig, "' at offset ", pos);
  };
  auto read_dtype = [&](bool leaf_name) {
    std::size_t end = sig.find_first_of(",()", pos);
    std::string name = sig.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? sig.size() : end;
    if (leaf_name && !name.empty() && name.back() == 's') name.pop_back();  // a static scalar
    return parse_dtype(name);
  };
  std::function<std::size_t()> parse = [&]() -> std::size_t {
    if (pos < sig.size() && sig[pos] == '$') {
      ++pos;
      read_dtype(true);
      if (leaf >= slots.size()) bad();
      const int input = static_cast<int>(slots[leaf++]);
      items.push_back({a.x.at(static_cast<std::size_t>(input)), {}, input});
      return items.size() - 1;
    }
    const std::size_t colon = sig.find(':', pos);
    if (colon == std::string::npos) return bad();
    const std::string op = sig.substr(pos, colon - pos);
    pos = colon + 1;
    const dtype t = read_dtype(false);
    if (pos >= sig.size() || sig[pos] != '(') return bad();
    std::vector<std::size_t> operands;
    do {
      ++pos;
      operands.push_back(parse());
    } while (pos < sig.size() && sig[pos] == ',');
    if (pos >= sig.size() || sig[pos] != ')') return bad();
    ++pos;
    std::vector<symbol> rest;
    for (std::size_t k = 1; k < operands.size(); ++k) rest.push_back(items[operands[k]].value);
    attr_map attrs;
    if (op == "Cast") attrs.set("DstT", t);
    items.push_back({items[operands[0]].value.then(op, rest, attrs), operands, -1});
    return items.size() - 1;
  };
  const std::size_t root = parse();
  if (pos != sig.size() || leaf != slots.size()) bad();
  // Backwards over the rebuilt ops (operands come before their users).
  std::vector<std::optional<symbol>> d(items.size());
  d[root] = a.dy[0];
  gradient_result<symbol> out(a.x.size());
  for (std::size_t k = items.size(); k-- > 0;) {
    if (!d[k]) continue;
    const item& it = items[k];
    if (it.input >= 0) {
      auto& s = out[static_cast<std::size_t>(it.input)];
      s = s ? *s + *d[k] : *d[k];
      continue;
    }
    const node& n = it.value.producer();
    const gradient_fn* rule = gradient_registry::global().find(n.op());
    if (!rule)
      fail(error_code::unimplemented, "weft::add_gradients: no gradient is defined for ", n.describe(),
           ", inside the fused expression of ", a.n.describe());
    gradient_args<symbol> args{n, {}, {it.value}, {d[k]}, {}};
    for (auto o : it.operands) args.x.push_back(items[o].value);
    const gradient_result<symbol> parts = (*rule)(args);
    for (std::size_t j = 0; j < it.operands.size() && j < parts.size(); ++j) {
      const std::size_t o = it.operands[j];
      if (!parts[j] || !differentiable(items[o].value.type())) continue;
      d[o] = d[o] ? *d[o] + *parts[j] : *parts[j];
    }
  }
  return out;
}

/// The gradient rule of Fused nodes: the compiled backward when typed code registered one
/// for the signature and the gradient is built by a DSL lowering, else the expansion.
inline gradient_result<symbol> fused_gradient(const gradient_args<symbol>& a) {
  if (!a.dy[0] || a.x.empty()) return gradient_result<symbol>(a.x.size());
  if (auto* b = dynamic_cast<lowering_gradient_builder*>(&a.x[0].builder()))
    if (auto fn = fused_gradient_registry::global().find(a.n.attr<std::string>("expr"))) return fn(a, *b);
  return expanded_fused_backward(a);
}

/// Calls f.template operator()<A>() for each operand type A of expression type E.
template <class E, class F>
void each_operand_type(F&& f) {
  if constexpr (requires { typename E::args_type; })
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f.template operator()<std::tuple_element_t<I, typename E::args_type>>(), ...);
    }(std::make_index_sequence<std::tuple_size_v<typename E::args_type>>{});
}

template <class E>
void each_fused_leaf();

/// Registers the compiled backward of every maximal fused subtree of E (those lowering
/// turns into Fused nodes) whose value is differentiable.
template <class E>
void register_fused_backwards() {
  if constexpr (requires { typename E::op_type; typename E::args_type; }) {
    if constexpr (interior<E>::value && fused_count<E>::ops >= 2 && differentiable_v<value_type_of<E>>) {
      static const std::string signature = [] {
        std::string s;
        append_signature<E>(s);
        return s;
      }();
      fused_gradient_registry::global().add(signature, &fused_backward<E>);
      each_fused_leaf<E>();
    } else {
      each_operand_type<E>([]<class A>() { register_fused_backwards<A>(); });
    }
  }
}
template <class E>
void each_fused_leaf() {
  if constexpr (interior<E>::value) {
    each_operand_type<E>([]<class A>() { each_fused_leaf<A>(); });
  } else {
    register_fused_backwards<E>();
  }
}

/// The kernels of the ops gradient rules add for dtype T (and the array ops they use).
template <class T>
void register_gradient_kernels() {
  static const bool once = [] {
    ops::register_standard_ops();
    use_kernels<ops::families::array>();
    use_kernels<ops::Neg, T>();
    use_kernels<ops::Abs, T>();
    use_kernels<ops::Square, T>();
    use_kernels<ops::Sqrt, T>();
    use_kernels<ops::Rsqrt, T>();
    use_kernels<ops::Exp, T>();
    use_kernels<ops::Log, T>();
    use_kernels<ops::Tanh, T>();
    use_kernels<ops::Sigmoid, T>();
    use_kernels<ops::Sin, T>();  // Cos's rule
    use_kernels<ops::Cos, T>();  // Sin's rule
    use_kernels<ops::Sinh, T>();  // Cosh's and Acosh's rules
    use_kernels<ops::Cosh, T>();  // Sinh's and Asinh's rules
    use_kernels<ops::Relu, T>();
    use_kernels<ops::ReluGrad, T>();  // Relu's rule
    use_kernels<ops::Add, T>();
    use_kernels<ops::Sub, T>();
    use_kernels<ops::Mul, T>();
    use_kernels<ops::Div, T>();
    use_kernels<ops::Pow, T>();
    use_kernels<ops::Maximum, T>();
    use_kernels<ops::Minimum, T>();
    use_kernels<ops::Greater, T>();
    use_kernels<ops::GreaterEqual, T>();
    use_kernels<ops::Less, T>();
    use_kernels<ops::LessEqual, T>();
    use_kernels<ops::Equal, T>();
    use_kernels<ops::SelectV2, T>();
    use_kernels<ops::Cast, T>();
    use_kernels<ops::MatMul, T>();
    use_kernels<ops::BatchMatMulV2, T>();
    use_kernels<ops::Sum, T>();
    // Prod's rule (running products), Cumprod's (running sums), GatherV2's.
    use_kernels<ops::Prod, T>();
    use_kernels<ops::Cumprod, T>();
    use_kernels<ops::Cumsum, T>();
    use_kernels<ops::UnsortedSegmentSum, T>();
    // GatherNd's (ScatterNd), and a loop's sum of them (TensorScatterAdd).
    use_kernels<ops::ScatterNd, T>();
    use_kernels<ops::TensorScatterAdd, T>();
    use_kernels<ops::SumToShape, T>();
    use_kernels<ops::BroadcastTo, T>();
    use_kernels<ops::ReducedShape, T>();
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) use_kernels<ops::MatrixInverse, T>();
    return true;
  }();
  (void)once;
}

/// Registers the kernels for each differentiable dtype in E.
template <class E>
void register_gradient_kernels_of() {
  if constexpr (differentiable_v<value_type_of<E>>) register_gradient_kernels<value_type_of<E>>();
  each_operand_type<E>([]<class A>() { register_gradient_kernels_of<A>(); });
}

/// Fused nodes are differentiable in every program that includes this header.
inline const bool fused_gradient_registered = (gradient_registry::global().add("Fused", &fused_gradient), true);

/// What grad(y, xs...) lowers: all the xs' gradients, in one backward pass per lowering.
struct gradient_state {
  lower_fn y;
  std::vector<lower_fn> xs;
  void (*prepare)();
  const scope_info* scope;
  memo_per_lowering<std::vector<output>> lowered;

  output get(lowering& cx, std::size_t i) {
    return lowered.get(cx, [&] {
      prepare();
      const output yo = y(cx);
      std::vector<output> xo;
      for (const auto& x : xs) xo.push_back(x(cx));
      lowering_gradient_builder b(cx, scope);
      return add_gradients(b, {yo}, xo);
    })[i];
  }
};

}  // namespace detail

/// The gradient of y with respect to one x: an expression of x's dtype and shape.
template <class T, class S>
class gradient_expr : public expr_base {
 public:
  using value_type = T;  ///< the element type
  using shape_type = S;  ///< the static shape (static_shape)
  /// Gradient `index` of the computation `state` holds (made by weft::grad).
  gradient_expr(std::shared_ptr<detail::gradient_state> state, std::size_t index)
      : state_(std::move(state)), index_(index) {}
  /// The expression's output in cx's graph, its nodes added there when not yet.
  output lower(lowering& cx) const { return state_->get(cx, index_); }

 private:
  std::shared_ptr<detail::gradient_state> state_;
  std::size_t index_;
};

/// grad(y, x): the gradient of the sum of y's elements with respect to x; grad(y, x1, x2, ...)
/// a std::tuple of them (for structured bindings). See the top of this file.
template <expression Y, expression... X>
  requires(sizeof...(X) >= 1)
auto grad(const Y& y, const X&... xs) {
  using YT = value_type_of<Y>;
  (void)check::grad_output_dtype<YT, detail::differentiable_v<YT>>::value;
  ((void)check::grad_input_dtype<value_type_of<X>, detail::differentiable_v<value_type_of<X>>>::value, ...);
  static_assert(!(detail::interior<std::remove_cvref_t<X>>::value || ...),
                "weft::grad: an x is an elementwise expression, which lowering fuses into its users (it is no node of "
                "the graph); use weft::identity(x) in y and differentiate with respect to that");
  static_assert(detail::check_gradient_path<std::remove_cvref_t<Y>, std::remove_cvref_t<X>...>::value);
  auto state = std::make_shared<detail::gradient_state>();
  state->y = lowering_of(y);
  (state->xs.push_back(lowering_of(xs)), ...);
  state->prepare = [] {
    WEFT_DETAIL_ONCE(ops::register_fused_ops(),
                     detail::register_gradient_kernels_of<std::remove_cvref_t<Y>>(),
                     detail::register_fused_backwards<std::remove_cvref_t<Y>>());
  };
  state->scope = detail::intern_scope({detail::current_scope()->prefix + "gradients/", detail::current_scope()->device,
                                       detail::current_scope()->colocate});
  if constexpr (sizeof...(X) == 1) {
    return gradient_expr<value_type_of<X>..., shape_of<X>...>(std::move(state), 0);
  } else {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple{gradient_expr<value_type_of<X>, shape_of<X>>(state, I)...};
    }(std::index_sequence_for<X...>{});
  }
}

}  // namespace weft
