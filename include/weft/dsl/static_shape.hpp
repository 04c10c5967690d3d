/// @file
/// Static shapes of the DSL: dims fixed at compile time (784) or known only at run time
/// (weft::dyn). `weft::dims<weft::dyn, 784>` is the shape of a batch of 784-vectors.
///
/// Broadcasting uses the graph's rule for one dim (core/broadcast.hpp): dyn against n > 1
/// gives n, against 1 or dyn gives dyn. Each op's own static shape rule is beside its
/// definition (ops/*.hpp, namespace ops::static_rules).
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include <weft/core/broadcast.hpp>
#include <weft/core/shape.hpp>
#include <weft/framework/static_rule.hpp>

namespace weft {

/// A dim known only at run time, in a static shape: dims<dyn, 784>.
inline constexpr std::int64_t dyn = unknown_dim;

/// A shape in the type: the DSL's expressions carry one, so that shape errors are compile
/// errors where the dims are static (dyn where they are not).
template <std::int64_t... D>
struct static_shape {
  static_assert(((D >= 0 || D == dyn) && ...), "weft::dims: every dimension must be non-negative or weft::dyn");
  static constexpr int rank = static_cast<int>(sizeof...(D));  ///< how many dims
  static constexpr std::array<std::int64_t, sizeof...(D)> values{D...};  ///< the dims (dyn where unknown)
  static constexpr bool fully_static = ((D >= 0) && ...);  ///< whether no dim is dyn
  /// The element count when every dim is static, else -1.
  static constexpr std::int64_t num_elements = fully_static ? (std::int64_t{1} * ... * D) : -1;
  /// The graph's form of the shape (dyn dims unknown).
  static partial_shape partial() { return partial_shape(std::vector<std::int64_t>{D...}); }
};

/// The value users write: placeholder<float>("x", dims<dyn, 784>).
template <std::int64_t... D>
inline constexpr static_shape<D...> dims{};

using scalar_shape = static_shape<>;  ///< rank 0

namespace detail {

/// A static_shape from a constexpr array of dims.
template <auto Array, class Seq = std::make_index_sequence<Array.size()>>
struct shape_from_array;
template <auto Array, std::size_t... I>
struct shape_from_array<Array, std::index_sequence<I...>> {
  using type = static_shape<Array[I]...>;
};
template <auto Array>
using shape_from_array_t = typename shape_from_array<Array>::type;


template <class A, class B>
struct broadcast_shapes {
  static constexpr std::size_t rank = A::values.size() > B::values.size() ? A::values.size() : B::values.size();
  static constexpr auto dims = ops::static_rules::broadcast<A::values, B::values>();
  /// The first pair of dims (from the right) that do not broadcast, or {1, 1}.
  static constexpr std::array<std::int64_t, 2> conflict = [] {
    for (std::size_t i = 0; i < rank; ++i) {
      auto a = ops::static_rules::from_right(A::values, i), b = ops::static_rules::from_right(B::values, i);
      if (!broadcastable(a, b)) return std::array<std::int64_t, 2>{a, b};
    }
    return std::array<std::int64_t, 2>{1, 1};
  }();
  using type = shape_from_array_t<dims>;
};

}  // namespace detail

/// The static shape of A and B broadcast (TensorFlow's rules; dyn where unknown).
template <class A, class B>
using broadcast_t = typename detail::broadcast_shapes<A, B>::type;

}  // namespace weft
