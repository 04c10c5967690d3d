/// @file
/// The vocabulary of static shape rules. Beside its definition and shape function (ops/*.hpp),
/// an op states in namespace ops::static_rules the output dims a typed expression of it has
/// at compile time, from its operands' dims (-1 where a dim is known only at run time), so
/// that the DSL's shapes and the graph's come from one place per op. Rules are constexpr
/// functions over std::array dims, taking the dims as template arguments where the output's
/// rank depends on their values; they assume the operands passed the DSL's checks (which
/// name what is wrong) and index safely when they did not. The graph's shape function
/// checks and computes the same at run time from partial shapes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <weft/core/broadcast.hpp>

namespace weft::ops::static_rules {

/// N static dims (unknown where known only at run time).
template <std::size_t N>
using dims = std::array<std::int64_t, N>;

/// A dim known only at run time.
inline constexpr std::int64_t unknown = -1;

/// Dim i of `values`, 1 beyond its rank.
constexpr std::int64_t dim_or(const auto& values, std::size_t i) { return i < values.size() ? values[i] : 1; }

/// The dim two operands must agree on: a if known, else b.
constexpr std::int64_t agreed(std::int64_t a, std::int64_t b) { return a >= 0 ? a : b; }

/// An axis counted from the end when negative.
constexpr std::int64_t normalized_axis(std::int64_t axis, std::int64_t rank) { return axis < 0 ? axis + rank : axis; }

/// Dim i of `values` counted from the right (0 is the last), 1 beyond its rank.
constexpr std::int64_t from_right(const auto& values, std::size_t i) {
  return i < values.size() ? values[values.size() - 1 - i] : 1;
}

/// The elementwise ops' rule: A and B broadcast (core/broadcast.hpp), aligned on the right.
template <auto A, auto B>
constexpr auto broadcast() {
  dims<(A.size() > B.size() ? A.size() : B.size())> out{};
  for (std::size_t i = 0; i < out.size(); ++i)
    out[out.size() - 1 - i] = broadcast_dim(from_right(A, i), from_right(B, i));
  return out;
}

/// All dims of X but its last N (none when X has fewer).
template <auto X, std::size_t N>
constexpr auto leading() {
  dims<(X.size() < N ? 0 : X.size() - N)> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = X[i];
  return out;
}

}  // namespace weft::ops::static_rules
