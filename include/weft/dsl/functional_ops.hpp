/// @file
/// Loops over the first dim of their elements, built on while_loop (control_flow.hpp), as
/// TensorFlow's functional ops: foldl(fn, elems, init) (the final accumulator),
/// scan(fn, elems, init) (the accumulator after each element, stacked) and map_fn(fn, elems)
/// (fn of each element, stacked). The stacks are loop variables written a row per
/// iteration, in place (TensorScatterUpdate into a buffer nothing else holds), and their
/// gradients add each row's back the same way (TensorScatterAdd).
#pragma once

#include <boost/hana/at.hpp>
#include <boost/hana/drop_front.hpp>
#include <boost/hana/prepend.hpp>
#include <boost/hana/transform.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/unpack.hpp>
#include <boost/hana/zip_with.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <weft/dsl/array_ops.hpp>
#include <weft/dsl/control_flow.hpp>
#include <weft/dsl/handle.hpp>

namespace weft {

namespace detail {

/// Row `index` (an int32 [1]) of x: x[i], of x's shape without its first dim.
template <expression X, expression I>
auto row_of(const X& x, const I& index) {
  return gather_nd(x, index);
}
/// The element tensors Xs (a hana::tuple type) checked: each of rank 1 at least, their
/// static first dims equal. `length`: that first dim, dyn when none is static.
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
/// The position an iteration reads and writes, as an int32 [1]: i, or n - 1 - i in reverse.
/// (Its type is spelled out: deducing it would lower an expression in this header.)
using position_t = decltype(reshape(std::declval<handle<std::int32_t>>(), dims<1>));
template <expression I, expression N>
position_t position(const I& i, const N& n, bool reverse) {
  return reshape(reverse ? handle<std::int32_t>(n - 1 - i) : handle<std::int32_t>(i), dims<1>);
}
/// The rows fn gets from a hana::tuple of element tensors, as a hana::tuple type.
template <class Xs>
struct rows_type;
template <class... X>
struct rows_type<boost::hana::tuple<X...>> {
  using type = boost::hana::tuple<decltype(row_of(std::declval<const X&>(), std::declval<const position_t&>()))...>;
};

/// Whether two hana::tuples of expressions agree in length, dtypes and ranks.
template <class A, class B>
struct same_kinds : std::false_type {};
template <class... A, class... B>
  requires(sizeof...(A) == sizeof...(B))
struct same_kinds<boost::hana::tuple<A...>, boost::hana::tuple<B...>>
    : std::bool_constant<((std::is_same_v<value_type_of<A>, value_type_of<B>> && shape_of<A>::rank == shape_of<B>::rank) && ...)> {};

/// The shape [N] + S (a stack of N values of shape S).
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

/// Zeros of dtype T and shape Stack (= [n] + a row shape) to write rows into: a constant
/// fill when Stack is static, else filled to [n] + `row_dims` (an int32 vector).
template <class T, std::int64_t... D, expression N, expression RowDims>
handle<T, D...> stack_zeros(static_shape<D...> s, const N& n, const RowDims& row_dims) {
  if constexpr (static_shape<D...>::fully_static) {
    return zeros<T>(s);
  } else {
    return raw_op<T, D...>("Fill", {concat<0>(reshape(n, dims<1>), row_dims), constant(T(0))});
  }
}

/// The length of e's first dim as an int32 scalar: a constant when it is static.
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

}  // namespace detail

/// foldl(fn, elems, init): acc = fn(acc, elems[i]) for i from 0 to elems' first dim, in a
/// while loop; the final acc. `init` (an expression or a hana::tuple: several
/// accumulators, passed to fn one by one) fixes the accumulators' types, as a loop's
/// variables (the checks name the accumulator's index plus 1: variable 0 is the counter).
/// `elems` may be a hana::tuple of expressions with the same first dim: fn then gets a row
/// of each after the accumulators.
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

/// Options of scan and map_fn: the loop's name and parallel_iterations (as loop_options'),
/// and for scan `reverse`: from the last element to the first.
struct scan_options {
  std::string name;  ///< empty: "scan" or "map"
  std::int64_t parallel_iterations = 10;  ///< iterations that may run at once
  bool reverse = false;                   ///< scan: from the last element to the first
};

namespace detail {
/// The loop of scan: from element `start` on (in the order `reverse` gives), with the
/// accumulators acc0 and their stacks stacks0 (rows before `start` already written).
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

/// scan(fn, elems, init): acc = fn(acc, elems[i]) for each i of elems' first dim (from the
/// last with options.reverse), and the stack of the accumulator after each step: shape
/// [n] + acc's shape, row i the acc after elems[i] (TensorFlow's tf.scan). init, and fn's
/// result, may be a hana::tuple of accumulators (fn gets them one by one, then the rows):
/// the result is then a tuple of stacks. elems may be a hana::tuple of expressions with
/// the same first dim (fn gets a row of each). The accumulators keep their dtypes and
/// static dims, as a while_loop's variables (the checks name the accumulator's index plus
/// 1). Rows are read with gather_nd and written in place with tensor_scatter_update, so a
/// step costs a row, and so does its gradient.
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

/// scan(fn, elems) with no initializer: the first element (the last with reverse) is the
/// initial accumulator and the stack's first row, and fn runs from the next one on
/// (TensorFlow's tf.scan without one). The accumulators are of the elements' row types,
/// one per element tensor. elems must not be empty: reading its first row is then an error
/// naming the GatherNd.
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

/// map_fn(fn, elems): the stack of fn(elems[i]) over elems' first dim, shape [n] + the
/// result's (TensorFlow's tf.map_fn); fn may return a hana::tuple (a stack each) and elems
/// be a hana::tuple of expressions with the same first dim (fn gets a row of each).
/// Iterations are independent: up to options.parallel_iterations run at once. A result
/// with dyn dims gets its stack in the first iteration, shaped from its first value (an
/// empty elems then gives a stack with those dims 0).
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
