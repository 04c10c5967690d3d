/// @file
/// Control flow on typed expressions (the whitepaper's §4.4): data-dependent branches and
/// loops that run inside the graph, checked when they are compiled.
///
///   namespace hana = boost::hana;
///   auto out = weft::while_loop(
///       [](auto i, auto h) { return i < 10; },
///       [&](auto i, auto h) { return hana::make_tuple(i + 1, tanh(matmul(h, w))); },
///       hana::make_tuple(weft::constant(0), h0));
///   auto h_final = hana::at_c<1>(out);                    // an expression of h0's type
///   auto y = weft::cond(x > 0.0f, [&] { return x * 2.0f; }, [&] { return -x; });
///
/// while_loop(cond, body, init[, options]): `init` is a boost::hana::tuple of expressions (or
/// one expression); cond and body are called once, when the loop is built, with one
/// expression per loop variable, and build the condition (a bool scalar) and the next values
/// (a hana::tuple, or one expression for one variable). The loop keeps each variable's dtype
/// and static dims (a weft::dyn dim may change from one iteration to the next); the build
/// fails otherwise, naming the variable's index (weft::check::loop_variable_dtype<1, float,
/// double>). The result has one expression per variable, of its type.
///
/// cond(pred, then_fn, else_fn): pred a bool scalar; the branches return an expression or a
/// hana::tuple of them, of equal dtypes and compatible static shapes (a dim static in both
/// must agree: the result keeps it, else it is weft::dyn). Only the taken branch runs.
///
/// Lowering: a loop lowers through graph::while_loop (graph/control_flow.hpp) and a cond
/// through Switch and Merge. Inside them expressions are lowered anew, in a lowering of
/// their own: a value from outside enters a loop once as an invariant (a computation whose
/// inputs all come from outside is hoisted out of the loop) and a branch through its side
/// of a Switch (nothing is hoisted out of a branch, so that it runs only when taken).
/// Placeholders, variables and constants always live outside. Expressions built in a
/// loop's body or a branch can be used outside only through the loop's or cond's results.
/// grad() differentiates through both (graph/gradients.hpp); the paths inside them are
/// checked when the gradient is lowered.
///
/// On them: switch_case(index, branches...) (a chain of conds), and, in functional_ops.hpp,
/// the loops over elements' first dim (foldl, scan, map_fn).
#pragma once

#include <boost/hana/at.hpp>
#include <boost/hana/concat.hpp>
#include <boost/hana/drop_front.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/prepend.hpp>
#include <boost/hana/take_front.hpp>
#include <boost/hana/transform.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <boost/hana/unpack.hpp>
#include <boost/hana/zip_with.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/dsl/array_ops.hpp>
#include <weft/dsl/expr.hpp>
#include <weft/dsl/handle.hpp>
#include <weft/dsl/ops.hpp>
#include <weft/graph/control_flow.hpp>
#include <weft/ops/standard.hpp>

namespace weft {

namespace check {
/// K: the index of the loop variable (or the cond's result) concerned.
template <std::size_t K, class Before, class After, bool Ok = std::is_same_v<Before, After>>
struct loop_variable_dtype {
  static_assert(Ok, "weft::while_loop: the body changes the dtype of a loop variable");
  static constexpr bool value = Ok;
};
template <std::size_t K, int Before, int After>
struct loop_variable_rank {
  static_assert(Before == After, "weft::while_loop: the body changes the rank of a loop variable");
  static constexpr bool value = Before == After;
};
template <std::size_t K, std::int64_t Before, std::int64_t After>
struct loop_variable_dims {
  static_assert(Before < 0 || Before == After, "weft::while_loop: the body changes a static dim of a loop variable");
  static constexpr bool value = Before < 0 || Before == After;
};
template <std::size_t Variables, std::size_t Values>
struct loop_body_arity {
  static_assert(Variables == Values, "weft::while_loop: the body returns another number of values than there are loop variables");
  static constexpr bool value = Variables == Values;
};
template <class T, int Rank>
struct loop_condition {
  static_assert(std::is_same_v<T, bool> && Rank == 0, "weft::while_loop: the condition is not a bool scalar");
  static constexpr bool value = std::is_same_v<T, bool> && Rank == 0;
};
template <std::size_t K, class Then, class Else, bool Ok = std::is_same_v<Then, Else>>
struct cond_branch_dtypes {
  static_assert(Ok, "weft::cond: a result has different dtypes in the two branches");
  static constexpr bool value = Ok;
};
template <std::size_t K, int Then, int Else>
struct cond_branch_ranks {
  static_assert(Then == Else, "weft::cond: a result has different ranks in the two branches");
  static constexpr bool value = Then == Else;
};
template <std::size_t K, std::int64_t Then, std::int64_t Else>
struct cond_branch_dims {
  static_assert(Then < 0 || Else < 0 || Then == Else, "weft::cond: a result has static dims that differ between the two branches");
  static constexpr bool value = Then < 0 || Else < 0 || Then == Else;
};
template <std::size_t Then, std::size_t Else>
struct cond_branch_arity {
  static_assert(Then == Else, "weft::cond: the branches return different numbers of values");
  static constexpr bool value = Then == Else;
};
template <class T, int Rank>
struct cond_predicate {
  static_assert(std::is_same_v<T, bool> && Rank == 0, "weft::cond: the predicate is not a bool scalar");
  static constexpr bool value = std::is_same_v<T, bool> && Rank == 0;
};
}  // namespace check

/// A while_loop's frame name, how many iterations may run at once (TensorFlow's default
/// 10) and an optional bound on the iterations.
struct loop_options {
  std::string name = "while";             ///< the loop's name (its frame's)
  std::int64_t parallel_iterations = 10;  ///< iterations that may run at once
  std::int64_t maximum_iterations = -1;  ///< -1: no bound
};

namespace detail {

/// The kernels of the int64 counters and iteration paths a loop and its gradient add, of
/// the accumulators, and of the ops a cond's gradient adds (DSL programs link only the
/// kernels they use). A template, called where a loop or cond is built, so that this header
/// compiled without any backend's kernels stays valid.
template <class = void>
void register_control_flow_kernels() {
  static const bool once = [] {
    ops::register_standard_ops();
    use_kernels<ops::families::array>();
    use_kernels<ops::Add, std::int64_t>();
    use_kernels<ops::Sub, std::int64_t>();
    use_kernels<ops::Less, std::int64_t>();
    use_kernels<ops::GreaterEqual, std::int64_t>();
    use_kernels<ops::Equal, std::int32_t>();
    use_kernels<ops::LogicalAnd, bool>();
    use_kernels<ops::AccumulatorPush>();
    use_kernels<ops::AccumulatorPop>();
    return true;
  }();
  (void)once;
}

template <class X>
struct is_hana_tuple : std::false_type {};
template <class... Xs>
struct is_hana_tuple<boost::hana::tuple<Xs...>> : std::true_type {};

/// r as a hana::tuple: itself, or a tuple of the one expression.
template <class R>
auto as_tuple(const R& r) {
  if constexpr (is_hana_tuple<R>::value) return r;
  else return boost::hana::make_tuple(r);
}

/// A loop variable as the loop's condition and body see it: bound to its Merge (condition)
/// or Switch (body) output by the lowering of the loop.
template <class T, class S>
class loop_variable_expr : public expr_base {
 public:
  using value_type = T;  ///< the element type
  using shape_type = S;  ///< the static shape (static_shape)
  loop_variable_expr() : id_(std::make_shared<const int>(0)) {}
  const void* identity() const noexcept { return id_.get(); }
  /// The expression's output in cx's graph, its nodes added there when not yet.
  output lower(lowering& cx) const {
    if (auto o = cx.find_bound(id_.get())) return *o;
    fail(error_code::invalid_argument,
         "weft::while_loop: a loop variable is lowered outside its loop; an expression built in a loop's condition or "
         "body is used outside it (use the loop's results)");
  }

 private:
  std::shared_ptr<const int> id_;
};

/// A loop as lowered: its init values, variables, condition and body results.
struct loop_state {
  std::vector<lower_fn> init, next;
  std::vector<const void*> variables;
  lower_fn condition;
  loop_options options;
  memo_per_lowering<std::vector<output>> memo;

  /// Enters outer values as loop invariants, hoisting invariant computations.
  struct hooks final : frame_hooks {
    loop_scope& scope;
    explicit hooks(loop_scope& s) : scope(s) {}
    output enter(output outer) override { return scope.invariant(outer); }
    std::vector<int> pivot() override { return scope.pivot() >= 0 ? std::vector<int>{scope.pivot()} : std::vector<int>{}; }
    bool hoists() const override { return true; }
  };

  std::vector<output> lower(lowering& cx) {
    return memo.get(cx, [&] {
      std::vector<output> in;
      for (const auto& f : init) in.push_back(f(cx));
      auto inside = [&](loop_scope& s, const std::vector<output>& v, auto&& what) {
        hooks h(s);
        lowering frame(cx, h);
        for (std::size_t k = 0; k < v.size(); ++k) frame.bind(variables[k], v[k]);
        return what(frame);
      };
      while_options o{options.name, options.parallel_iterations, options.maximum_iterations};
      auto exits = weft::while_loop(
          cx.target(), in,
          [&](loop_scope& s, const std::vector<output>& v) { return inside(s, v, [&](lowering& f) { return condition(f); }); },
          [&](loop_scope& s, const std::vector<output>& v) {
            return inside(s, v, [&](lowering& f) {
              std::vector<output> out;
              for (const auto& n : next) out.push_back(n(f));
              return out;
            });
          },
          o);
      for (const auto& e : exits) cx.adopt(e);
      return exits;
    });
  }
};

/// Result k of a loop or a cond (State: loop_state or cond_state).
template <class T, class S, class State>
class result_expr : public expr_base {
 public:
  using value_type = T;  ///< the element type
  using shape_type = S;  ///< the static shape (static_shape)
  result_expr(std::shared_ptr<State> state, std::size_t k) : state_(std::move(state)), k_(k) {}
  /// The expression's output in cx's graph, its nodes added there when not yet.
  output lower(lowering& cx) const { return state_->lower(cx)[k_]; }

 private:
  std::shared_ptr<State> state_;
  std::size_t k_;
};

/// Checks shapes S1 and S2 of value K with the rank check Rank, then, dim by dim, Dims.
template <template <std::size_t, int, int> class Rank, template <std::size_t, std::int64_t, std::int64_t> class Dims,
          std::size_t K, class S1, class S2>
constexpr bool check_shapes() {
  if constexpr (S1::rank != S2::rank) {
    return Rank<K, S1::rank, S2::rank>::value;
  } else {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (true && ... && Dims<K, S1::values[I], S2::values[I]>::value);
    }(std::make_index_sequence<static_cast<std::size_t>(S1::rank)>{});
  }
}

/// The shape a cond's result k has: the dims both branches agree on, weft::dyn elsewhere.
template <class A, class B>
struct common_static_shape {
  static constexpr std::array<std::int64_t, A::values.size()> dims = [] {
    std::array<std::int64_t, A::values.size()> out{};
    for (std::size_t i = 0; i < out.size(); ++i)
      if constexpr (A::values.size() == B::values.size()) out[i] = A::values[i] == B::values[i] ? A::values[i] : dyn;
      else out[i] = A::values[i];  // ranks differ: reported by check::cond_branch_ranks
    return out;
  }();
  using type = shape_from_array_t<dims>;
};

/// A cond as lowered: its predicate and each branch's results.
struct cond_state {
  lower_fn predicate;
  std::vector<lower_fn> then_values, else_values;
  const scope_info* scope;
  memo_per_lowering<std::vector<output>> memo;

  /// Takes outer values through the branch's side of a Switch on the predicate.
  struct hooks final : frame_hooks {
    graph& g;
    output pred;
    int side, pivot_node;
    hooks(graph& gr, output p, int s, int pv) : g(gr), pred(p), side(s), pivot_node(pv) {}
    output enter(output outer) override { return output{g.op("Switch", {outer, pred}).id(), side}; }
    std::vector<int> pivot() override { return {pivot_node}; }
    bool hoists() const override { return false; }
  };

  std::vector<output> lower(lowering& cx) {
    return memo.get(cx, [&] {
      graph& g = cx.target();
      const output pred = predicate(cx);
      auto name = g.name_scope("cond");
      const node& pivots = g.op("Switch", {pred, pred});
      const int pivot_true = g.op("Identity", {pivots.out(1)}).id(), pivot_false = g.op("Identity", {pivots.out(0)}).id();
      auto side = [&](int s, int pv, const std::vector<lower_fn>& values) {
        hooks h(g, pred, s, pv);
        lowering branch(cx, h);
        std::vector<output> out;
        for (const auto& v : values) out.push_back(branch.bring(v(branch)));  // a value from outside is switched too
        cx.adopt_all(branch);
        return out;
      };
      const auto t = side(1, pivot_true, then_values);
      const auto f = side(0, pivot_false, else_values);
      std::vector<output> merged;
      for (std::size_t k = 0; k < t.size(); ++k) {
        merged.push_back(g.op("Merge", {f[k], t[k]}).out(0));
        cx.adopt(merged.back());
      }
      for (int id : {pivots.id(), pivot_true, pivot_false}) cx.adopt(output{id, 0});
      return merged;
    });
  }
};

template <std::int32_t K, expression I, class First, class... Rest>
auto switch_from(const I& index, First&& first, Rest&&... rest) {
  if constexpr (sizeof...(Rest) == 0) {
    return first();
  } else {
    return cond(
        equal(index, constant(K)), std::forward<First>(first),
        [&] { return switch_from<K + 1>(index, std::forward<Rest>(rest)...); });
  }
}

}  // namespace detail

/// while cond(vars...): vars = body(vars...), in the graph. See the top of this file.
template <class Cond, class Body, expression... Vars>
  requires(sizeof...(Vars) >= 1)
auto while_loop(Cond&& cond, Body&& body, const boost::hana::tuple<Vars...>& init, loop_options options = {}) {
  namespace hana = boost::hana;
  detail::register_control_flow_kernels();
  auto state = std::make_shared<detail::loop_state>();
  state->options = std::move(options);
  hana::for_each(init, [&](const auto& e) { state->init.push_back(lowering_of(e)); });
  auto variables = hana::make_tuple(detail::loop_variable_expr<value_type_of<Vars>, shape_of<Vars>>{}...);
  hana::for_each(variables, [&](const auto& v) { state->variables.push_back(v.identity()); });

  auto c = hana::unpack(variables, cond);
  static_assert(expression<decltype(c)>, "weft::while_loop: the condition must return an expression");
  (void)check::loop_condition<value_type_of<decltype(c)>, shape_of<decltype(c)>::rank>::value;
  state->condition = lowering_of(c);

  auto next = detail::as_tuple(hana::unpack(variables, body));
  using next_type = decltype(next);
  constexpr std::size_t n = sizeof...(Vars);
  if constexpr (check::loop_body_arity<n, decltype(hana::length(next))::value>::value) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      using vars_type = hana::tuple<Vars...>;
      (void)(true && ... &&
             (check::loop_variable_dtype<K, value_type_of<std::remove_cvref_t<decltype(hana::at_c<K>(std::declval<vars_type>()))>>,
                                         value_type_of<std::remove_cvref_t<decltype(hana::at_c<K>(std::declval<next_type>()))>>>::value &&
              detail::check_shapes<check::loop_variable_rank, check::loop_variable_dims, K, shape_of<std::remove_cvref_t<decltype(hana::at_c<K>(std::declval<vars_type>()))>>,
                                       shape_of<std::remove_cvref_t<decltype(hana::at_c<K>(std::declval<next_type>()))>>>()));
      (state->next.push_back(lowering_of(hana::at_c<K>(next))), ...);
    }(std::make_index_sequence<n>{});
  }
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    return hana::make_tuple(detail::result_expr<value_type_of<Vars>, shape_of<Vars>, detail::loop_state>(state, K)...);
  }(std::index_sequence_for<Vars...>{});
}

/// The same with one loop variable: cond(v) and body(v) -> v's next value; returns one expression.
template <class Cond, class Body, expression Var>
auto while_loop(Cond&& cond, Body&& body, const Var& init, loop_options options = {}) {
  return boost::hana::at_c<0>(while_loop(std::forward<Cond>(cond), std::forward<Body>(body), boost::hana::make_tuple(init), std::move(options)));
}

/// pred ? then_fn() : else_fn(), in the graph. See the top of this file.
template <expression P, class Then, class Else>
  requires std::is_invocable_v<Then> && std::is_invocable_v<Else>
auto cond(const P& pred, Then&& then_fn, Else&& else_fn) {
  namespace hana = boost::hana;
  (void)check::cond_predicate<value_type_of<P>, shape_of<P>::rank>::value;
  auto t_raw = then_fn();
  auto f_raw = else_fn();
  auto t = detail::as_tuple(t_raw);
  auto f = detail::as_tuple(f_raw);
  constexpr std::size_t n = decltype(hana::length(t))::value;
  detail::register_control_flow_kernels();
  auto state = std::make_shared<detail::cond_state>();
  state->predicate = lowering_of(pred);
  state->scope = detail::current_scope();
  if constexpr (check::cond_branch_arity<n, decltype(hana::length(f))::value>::value) {
    auto results = [&]<std::size_t... K>(std::index_sequence<K...>) {
      using TT = decltype(t);
      using FT = decltype(f);
      (void)(true && ... &&
             (check::cond_branch_dtypes<K, value_type_of<std::remove_cvref_t<decltype(hana::at_c<K>(std::declval<TT>()))>>,
                                        value_type_of<std::remove_cvref_t<decltype(hana::at_c<K>(std::declval<FT>()))>>>::value &&
              detail::check_shapes<check::cond_branch_ranks, check::cond_branch_dims, K, shape_of<std::remove_cvref_t<decltype(hana::at_c<K>(std::declval<TT>()))>>,
                                          shape_of<std::remove_cvref_t<decltype(hana::at_c<K>(std::declval<FT>()))>>>()));
      (state->then_values.push_back(lowering_of(hana::at_c<K>(t))), ...);
      (state->else_values.push_back(lowering_of(hana::at_c<K>(f))), ...);
      return hana::make_tuple(detail::result_expr<
                              value_type_of<std::remove_cvref_t<decltype(hana::at_c<K>(std::declval<TT>()))>>,
                              typename detail::common_static_shape<
                                  shape_of<std::remove_cvref_t<decltype(hana::at_c<K>(std::declval<TT>()))>>,
                                  shape_of<std::remove_cvref_t<decltype(hana::at_c<K>(std::declval<FT>()))>>>::type,
                              detail::cond_state>(state, K)...);
    }(std::make_index_sequence<n>{});
    if constexpr (detail::is_hana_tuple<decltype(t_raw)>::value) return results;
    else return hana::at_c<0>(results);
  }
}

/// switch_case(index, branch0, branch1, ...): branch `index`'s results, the last branch
/// for an index out of range (TensorFlow's default branch); index an int32 scalar. The
/// branches' results follow cond's rules (it is a chain of conds: only the taken branch runs).
template <expression I, class First, class... Rest>
  requires std::is_invocable_v<First> && (std::is_invocable_v<Rest> && ...)
auto switch_case(const I& index, First&& first, Rest&&... rest) {
  static_assert(std::is_same_v<value_type_of<I>, std::int32_t> && shape_of<I>::rank == 0,
                "weft::switch_case: the index is not an int32 scalar");
  return detail::switch_from<0>(index, std::forward<First>(first), std::forward<Rest>(rest)...);
}

}  // namespace weft
