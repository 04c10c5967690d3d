// Control flow on typed expressions (the whitepaper's §4.4): data-dependent branches and
// loops that run inside the graph, checked when they are compiled.
//
//   namespace hana = boost::hana;
//   auto out = weft::while_loop(
//       [](auto i, auto h) { return i < 10; },
//       [&](auto i, auto h) { return hana::make_tuple(i + 1, tanh(matmul(h, w))); },
//       hana::make_tuple(weft::constant(0), h0));
//   auto h_final = hana::at_c<1>(out);                    // an expression of h0's type
//   auto y = weft::cond(x > 0.0f, [&] { return x * 2.0f; }, [&] { return -x; });
//
// while_loop(cond, body, init[, options]): `init` is a boost::hana::tuple of expressions (or
// one expression); cond and body are called once, when the loop is built, with one
// expression per loop variable, and build the condition (a bool scalar) and the next values
// (a hana::tuple, or one expression for one variable). The loop keeps each variable's dtype
// and static dims (a weft::dyn dim may change from one iteration to the next); the build
// fails otherwise, naming the variable's index (weft::check::loop_variable_dtype<1, float,
// double>). The result has one expression per variable, of its type.
//
// cond(pred, then_fn, else_fn): pred a bool scalar; the branches return an expression or a
// hana::tuple of them, of equal dtypes and compatible static shapes (a dim static in both
// must agree: the result keeps it, else it is weft::dyn). Only the taken branch runs.
//
// Lowering: a loop lowers through graph::while_loop (graph/control_flow.hpp) and a cond
// through Switch and Merge. Inside them expressions are lowered anew, in a lowering of
// their own: a value from outside enters a loop once as an invariant (a computation whose
// inputs all come from outside is hoisted out of the loop) and a branch through its side
// of a Switch (nothing is hoisted out of a branch, so that it runs only when taken).
// Placeholders, variables and constants always live outside. Expressions built in a
// loop's body or a branch can be used outside only through the loop's or cond's results.
// grad() differentiates through both (graph/gradients.hpp); the paths inside them are
// checked when the gradient is lowered.
//
// On them: switch_case(index, branches...) (a chain of conds), and loops over elements'
// first dim: foldl(fn, elems, init) (the final accumulator), scan(fn, elems, init) (the
// accumulator after each element, stacked) and map_fn(fn, elems) (fn of each element,
// stacked). The stacks are loop variables written a row per iteration, in place.
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
// K: the index of the loop variable (or the cond's result) concerned.
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

struct loop_options {
  std::string name = "while";
  std::int64_t parallel_iterations = 10;
  std::int64_t maximum_iterations = -1;  // -1: no bound
};

namespace detail {

// The kernels of the int64 counters and iteration paths a loop and its gradient add, of
// the accumulators, and of the ops a cond's gradient adds (DSL programs link only the
// kernels they use). A template, called where a loop or cond is built, so that this header
// compiled without any backend's kernels stays valid.
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

// r as a hana::tuple: itself, or a tuple of the one expression.
template <class R>
auto as_tuple(const R& r) {
  if constexpr (is_hana_tuple<R>::value) return r;
  else return boost::hana::make_tuple(r);
}

// A loop variable as the loop's condition and body see it: bound to its Merge (condition)
// or Switch (body) output by the lowering of the loop.
template <class T, class S>
class loop_variable_expr : public expr_base {
 public:
  using value_type = T;
  using shape_type = S;
  loop_variable_expr() : id_(std::make_shared<const int>(0)) {}
  const void* identity() const noexcept { return id_.get(); }
  output lower(lowering& cx) const {
    if (auto o = cx.find_bound(id_.get())) return *o;
    fail(error_code::invalid_argument,
         "weft::while_loop: a loop variable is lowered outside its loop; an expression built in a loop's condition or "
         "body is used outside it (use the loop's results)");
  }

 private:
  std::shared_ptr<const int> id_;
};

// A loop as lowered: its init values, variables, condition and body results.
struct loop_state {
  std::vector<lower_fn> init, next;
  std::vector<const void*> variables;
  lower_fn condition;
  loop_options options;
  memo_per_lowering<std::vector<output>> memo;

  // Enters outer values as loop invariants, hoisting invariant computations.
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

// Result k of a loop or a cond (State: loop_state or cond_state).
template <class T, class S, class State>
class result_expr : public expr_base {
 public:
  using value_type = T;
  using shape_type = S;
  result_expr(std::shared_ptr<State> state, std::size_t k) : state_(std::move(state)), k_(k) {}
  output lower(lowering& cx) const { return state_->lower(cx)[k_]; }

 private:
  std::shared_ptr<State> state_;
  std::size_t k_;
};

// Checks shapes S1 and S2 of value K with the rank check Rank, then, dim by dim, Dims.
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

// The shape a cond's result k has: the dims both branches agree on, weft::dyn elsewhere.
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

// A cond as lowered: its predicate and each branch's results.
struct cond_state {
  lower_fn predicate;
  std::vector<lower_fn> then_values, else_values;
  const scope_info* scope;
  memo_per_lowering<std::vector<output>> memo;

  // Takes outer values through the branch's side of a Switch on the predicate.
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

// ---- scan, map_fn and foldl: a loop over the first dim of their elements ----------------

// Row `index` (an int32 [1]) of x: x[i], of x's shape without its first dim.
template <expression X, expression I>
auto row_of(const X& x, const I& index) {
  return gather_nd(x, index);
}
// The element tensors Xs (a hana::tuple type) checked: each of rank 1 at least, their
// static first dims equal. `length`: that first dim, dyn when none is static.
template <class Xs>
struct elements;
template <class... X>
struct elements<boost::hana::tuple<X...>> {
  static_assert(((shape_of<X>::rank >= 1) && ...), "weft::scan/map_fn/foldl: an element tensor has rank 0 (no first dim to iterate over)");
  template <class Y>
  static constexpr std::int64_t first_of = shape_of<Y>::rank >= 1 ? shape_of<Y>::values[0] : dyn;
  static constexpr std::int64_t length = std::max({first_of<X>...});
  static_assert(((first_of<X> < 0 || first_of<X> == length) && ...),
                "weft::scan/map_fn/foldl: the element tensors' static first dims differ");
};
// The position an iteration reads and writes, as an int32 [1]: i, or n - 1 - i in reverse.
// (Its type is spelled out: deducing it would lower an expression in this header.)
using position_t = decltype(reshape(std::declval<handle<std::int32_t>>(), dims<1>));
template <expression I, expression N>
position_t position(const I& i, const N& n, bool reverse) {
  return reshape(reverse ? handle<std::int32_t>(n - 1 - i) : handle<std::int32_t>(i), dims<1>);
}
// The rows fn gets from a hana::tuple of element tensors, as a hana::tuple type.
template <class Xs>
struct rows_type;
template <class... X>
struct rows_type<boost::hana::tuple<X...>> {
  using type = boost::hana::tuple<decltype(row_of(std::declval<const X&>(), std::declval<const position_t&>()))...>;
};

// Whether two hana::tuples of expressions agree in length, dtypes and ranks.
template <class A, class B>
struct same_kinds : std::false_type {};
template <class... A, class... B>
  requires(sizeof...(A) == sizeof...(B))
struct same_kinds<boost::hana::tuple<A...>, boost::hana::tuple<B...>>
    : std::bool_constant<((std::is_same_v<value_type_of<A>, value_type_of<B>> && shape_of<A>::rank == shape_of<B>::rank) && ...)> {};

// The shape [N] + S (a stack of N values of shape S).
template <std::int64_t N, class S>
struct stacked {
  static constexpr std::array<std::int64_t, S::values.size() + 1> dims = [] {
    std::array<std::int64_t, S::values.size() + 1> r{};
    r[0] = N;
    for (std::size_t d = 0; d < S::values.size(); ++d) r[d + 1] = S::values[d];
    return r;
  }();
  using type = shape_from_array_t<dims>;
};
template <std::int64_t N, class S>
using stacked_shape = typename stacked<N, S>::type;

// Zeros of dtype T and shape Stack (= [n] + a row shape) to write rows into: a constant
// fill when Stack is static, else filled to [n] + `row_dims` (an int32 vector).
template <class T, std::int64_t... D, expression N, expression RowDims>
handle<T, D...> stack_zeros(static_shape<D...> s, const N& n, const RowDims& row_dims) {
  if constexpr (static_shape<D...>::fully_static) {
    return zeros<T>(s);
  } else {
    return raw_op<T, D...>("Fill", {concat<0>(reshape(n, dims<1>), row_dims), constant(T(0))});
  }
}

// The length of e's first dim as an int32 scalar: a constant when it is static.
template <expression E>
auto first_dim(const E& e) {
  constexpr std::int64_t n = shape_of<E>::values[0];
  if constexpr (n >= 0) {
    return handle<std::int32_t>(constant(static_cast<std::int32_t>(n)));
  } else {
    auto dims = raw_op<std::int32_t, shape_of<E>::rank>("Shape", {e}, {{"out_type", dtype::int32}});
    return handle<std::int32_t>(raw_op<std::int32_t>("GatherV2", {dims, constant(std::int32_t{0}), constant(std::int32_t{0})}));
  }
}

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

// while cond(vars...): vars = body(vars...), in the graph. See the top of this file.
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

// The same with one loop variable: cond(v) and body(v) -> v's next value; returns one expression.
template <class Cond, class Body, expression Var>
auto while_loop(Cond&& cond, Body&& body, const Var& init, loop_options options = {}) {
  return boost::hana::at_c<0>(while_loop(std::forward<Cond>(cond), std::forward<Body>(body), boost::hana::make_tuple(init), std::move(options)));
}

// pred ? then_fn() : else_fn(), in the graph. See the top of this file.
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

// switch_case(index, branch0, branch1, ...): branch `index`'s results, the last branch
// for an index out of range (TensorFlow's default branch); index an int32 scalar. The
// branches' results follow cond's rules (it is a chain of conds: only the taken branch runs).
template <expression I, class First, class... Rest>
  requires std::is_invocable_v<First> && (std::is_invocable_v<Rest> && ...)
auto switch_case(const I& index, First&& first, Rest&&... rest) {
  static_assert(std::is_same_v<value_type_of<I>, std::int32_t> && shape_of<I>::rank == 0,
                "weft::switch_case: the index is not an int32 scalar");
  return detail::switch_from<0>(index, std::forward<First>(first), std::forward<Rest>(rest)...);
}

// foldl(fn, elems, init): acc = fn(acc, elems[i]) for i from 0 to elems' first dim, in a
// while loop; the final acc. `init` (an expression or a hana::tuple: several
// accumulators, passed to fn one by one) fixes the accumulators' types, as a loop's
// variables (the checks name the accumulator's index plus 1: variable 0 is the counter).
// `elems` may be a hana::tuple of expressions with the same first dim: fn then gets a row
// of each after the accumulators.
template <class Fn, class Elems, class Init>
auto foldl(Fn&& fn, const Elems& elems, const Init& init, loop_options options = {}) {
  namespace hana = boost::hana;
  if (options.name == "while") options.name = "foldl";
  auto xs = detail::as_tuple(elems);
  (void)detail::elements<decltype(xs)>::length;
  auto length = detail::first_dim(hana::at_c<0>(xs));
  auto state = hana::prepend(detail::as_tuple(init), constant(std::int32_t{0}));
  auto out = while_loop([length](auto i, auto&&...) { return i < length; },
                        [&](auto i, auto... acc) {
                          auto at = detail::position(i, length, false);
                          auto rows = hana::transform(xs, [&](const auto& x) { return detail::row_of(x, at); });
                          return hana::prepend(detail::as_tuple(hana::unpack(rows, [&](const auto&... r) { return fn(acc..., r...); })), i + 1);
                        },
                        state, std::move(options));
  auto result = hana::drop_front(out);
  if constexpr (detail::is_hana_tuple<Init>::value) return result;
  else return hana::at_c<0>(result);
}

// Options of scan and map_fn: the loop's name and parallel_iterations (as loop_options'),
// and for scan `reverse`: from the last element to the first.
struct scan_options {
  std::string name;  // empty: "scan" or "map"
  std::int64_t parallel_iterations = 10;
  bool reverse = false;
};

namespace detail {
// The loop of scan: from element `start` on (in the order `reverse` gives), with the
// accumulators acc0 and their stacks stacks0 (rows before `start` already written).
template <class Fn, class Xs, class Acc0, class Stacks0, class Length>
auto scan_loop(Fn&& fn, const Xs& xs, const Acc0& acc0, const Stacks0& stacks0, const Length& length, std::int32_t start,
               const scan_options& options) {
  namespace hana = boost::hana;
  constexpr std::size_t K = decltype(hana::length(acc0))::value;
  const bool reverse = options.reverse;
  auto out = while_loop(
      [length](auto i, auto&&...) { return i < length; },
      [&](auto i, auto... vars) {
        auto all = hana::make_tuple(vars...);
        auto at = position(i, length, reverse);
        auto rows = hana::transform(xs, [&](const auto& x) { return row_of(x, at); });
        auto accs = hana::take_front_c<K>(all);
        auto next = as_tuple(hana::unpack(hana::concat(accs, rows), fn));
        auto stacks = hana::drop_front(all, hana::size_c<K>);
        // Stacked when the step keeps the accumulators' dtypes and ranks (else the loop's
        // checks name the accumulator, and nothing else fails).
        if constexpr (same_kinds<decltype(accs), decltype(next)>::value) {
          auto written = hana::zip_with([&](const auto& stack, const auto& value) { return tensor_scatter_update(stack, at, value); },
                                        stacks, next);
          return hana::prepend(hana::concat(next, written), i + 1);
        } else {
          return hana::prepend(hana::concat(next, stacks), i + 1);
        }
      },
      hana::prepend(hana::concat(acc0, stacks0), constant(start)),
      loop_options{options.name.empty() ? "scan" : options.name, options.parallel_iterations});
  return hana::drop_front(out, hana::size_c<1 + K>);
}
}  // namespace detail

// scan(fn, elems, init): acc = fn(acc, elems[i]) for each i of elems' first dim (from the
// last with options.reverse), and the stack of the accumulator after each step: shape
// [n] + acc's shape, row i the acc after elems[i] (TensorFlow's tf.scan). init, and fn's
// result, may be a hana::tuple of accumulators (fn gets them one by one, then the rows):
// the result is then a tuple of stacks. elems may be a hana::tuple of expressions with
// the same first dim (fn gets a row of each). The accumulators keep their dtypes and
// static dims, as a while_loop's variables (the checks name the accumulator's index plus
// 1). Rows are read with gather_nd and written in place with tensor_scatter_update, so a
// step costs a row, and so does its gradient.
template <class Fn, class Elems, class Init>
  requires(expression<Init> || detail::is_hana_tuple<Init>::value)
auto scan(Fn&& fn, const Elems& elems, const Init& init, scan_options options = {}) {
  namespace hana = boost::hana;
  auto xs = detail::as_tuple(elems);
  auto acc0 = detail::as_tuple(init);
  constexpr std::int64_t N = detail::elements<decltype(xs)>::length;
  auto length = detail::first_dim(hana::at_c<0>(xs));
  auto stacks0 = hana::transform(acc0, [&](const auto& a) {
    using A = std::remove_cvref_t<decltype(a)>;
    return detail::stack_zeros<value_type_of<A>>(detail::stacked_shape<N, shape_of<A>>{}, length, shape_tensor(a));
  });
  auto result = detail::scan_loop(std::forward<Fn>(fn), xs, acc0, stacks0, length, 0, options);
  if constexpr (detail::is_hana_tuple<Init>::value) return result;
  else return hana::at_c<0>(result);
}

// scan(fn, elems) with no initializer: the first element (the last with reverse) is the
// initial accumulator and the stack's first row, and fn runs from the next one on
// (TensorFlow's tf.scan without one). The accumulators are of the elements' row types,
// one per element tensor. elems must not be empty: reading its first row is then an error
// naming the GatherNd.
template <class Fn, class Elems>
auto scan(Fn&& fn, const Elems& elems, scan_options options = {}) {
  namespace hana = boost::hana;
  auto xs = detail::as_tuple(elems);
  (void)detail::elements<decltype(xs)>::length;
  auto length = detail::first_dim(hana::at_c<0>(xs));
  auto first = detail::position(constant(std::int32_t{0}), length, options.reverse);
  auto acc0 = hana::transform(xs, [&](const auto& x) { return detail::row_of(x, first); });
  auto stacks0 = hana::zip_with([&](const auto& x, const auto& a) { return tensor_scatter_update(zeros_like(x), first, a); }, xs, acc0);
  auto result = detail::scan_loop(std::forward<Fn>(fn), xs, acc0, stacks0, length, 1, options);
  if constexpr (detail::is_hana_tuple<Elems>::value) return result;
  else return hana::at_c<0>(result);
}

// map_fn(fn, elems): the stack of fn(elems[i]) over elems' first dim, shape [n] + the
// result's (TensorFlow's tf.map_fn); fn may return a hana::tuple (a stack each) and elems
// be a hana::tuple of expressions with the same first dim (fn gets a row of each).
// Iterations are independent: up to options.parallel_iterations run at once. A result
// with dyn dims gets its stack in the first iteration, shaped from its first value (an
// empty elems then gives a stack with those dims 0).
template <class Fn, class Elems>
auto map_fn(Fn&& fn, const Elems& elems, scan_options options = {}) {
  namespace hana = boost::hana;
  auto xs = detail::as_tuple(elems);
  constexpr std::int64_t N = detail::elements<decltype(xs)>::length;
  using rows_t = typename detail::rows_type<decltype(xs)>::type;
  using fn_result_t = decltype(hana::unpack(std::declval<rows_t>(), fn));
  using results_t = decltype(detail::as_tuple(std::declval<fn_result_t>()));
  auto length = detail::first_dim(hana::at_c<0>(xs));
  // A result's stack: its final zeros when the result's shape is static, else zeros [n, 0, ...].
  auto stacks0 = [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto zeros_for = [&]<class R>(hana::basic_type<R>) {
      using S = shape_of<R>;
      std::vector<std::int32_t> row(static_cast<std::size_t>(S::rank), 0);
      for (std::size_t d = 0; d < row.size(); ++d) row[d] = static_cast<std::int32_t>(std::max<std::int64_t>(S::values[d], 0));
      return detail::stack_zeros<value_type_of<R>>(detail::stacked_shape<N, S>{}, length, constant(row, static_shape<S::rank>{}));
    };
    return hana::make_tuple(zeros_for(hana::basic_type<std::remove_cvref_t<decltype(hana::at_c<K>(std::declval<results_t>()))>>{})...);
  }(std::make_index_sequence<decltype(hana::length(std::declval<results_t>()))::value>{});
  const bool reverse = options.reverse;
  auto out = while_loop(
      [length](auto i, auto&&...) { return i < length; },
      [&](auto i, auto... stack) {
        auto at = detail::position(i, length, reverse);
        auto rows = hana::transform(xs, [&](const auto& x) { return detail::row_of(x, at); });
        auto results = detail::as_tuple(hana::unpack(rows, fn));
        auto stacks = hana::zip_with(
            [&](const auto& st, const auto& value) {
              using V = std::remove_cvref_t<decltype(value)>;
              if constexpr (shape_of<V>::fully_static) {
                return tensor_scatter_update(st, at, value);
              } else {  // the first iteration makes the stack, from the value's shape
                auto made = cond(
                    equal(i, constant(std::int32_t{0})),
                    [&] { return detail::stack_zeros<value_type_of<V>>(detail::stacked_shape<N, shape_of<V>>{}, length, shape_tensor(value)); },
                    [&] { return st; });
                return tensor_scatter_update(made, at, value);
              }
            },
            hana::make_tuple(stack...), results);
        return hana::prepend(stacks, i + 1);
      },
      hana::prepend(stacks0, constant(std::int32_t{0})), loop_options{options.name.empty() ? "map" : options.name, options.parallel_iterations});
  auto result = hana::drop_front(out);
  if constexpr (detail::is_hana_tuple<std::remove_cvref_t<fn_result_t>>::value) return result;
  else return hana::at_c<0>(result);
}

}  // namespace weft
