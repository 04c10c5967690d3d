/// @file
/// NumPy broadcasting: shapes are aligned on their last dim; each pair of dims must be
/// equal or one of them 1, and the result takes the larger. An unknown dim (-1) against
/// 1 stays unknown; against n > 1 it becomes n.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include <weft/core/shape.hpp>

namespace weft {

/// One broadcast dim: whether dims a and b broadcast, and the result's dim (for a pair that
/// does not broadcast, a's: the caller reports it). The graph's shapes and the DSL's static
/// shapes (dsl/static_shape.hpp) both use these.
constexpr bool broadcastable(std::int64_t a, std::int64_t b) { return a == b || a == 1 || b == 1 || a < 0 || b < 0; }
/// The result's dim of a broadcast pair (a for a pair that does not broadcast).
constexpr std::int64_t broadcast_dim(std::int64_t a, std::int64_t b) {
  if (a == 1) return b;
  if (b == 1) return a;
  if (a < 0) return b;
  return a;
}

/// The broadcast dims of a and b, or nullopt when they do not broadcast.
inline std::optional<std::vector<std::int64_t>> broadcast_dims(const std::vector<std::int64_t>& a,
                                                                const std::vector<std::int64_t>& b) {
  std::size_t rank = std::max(a.size(), b.size());
  std::vector<std::int64_t> out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (!broadcastable(da, db)) return std::nullopt;
    out[i] = broadcast_dim(da, db);
  }
  return out;
}

/// NumPy's broadcast of a and b: unknown rank when either's is; nullopt when they do not broadcast.
inline std::optional<partial_shape> broadcast(const partial_shape& a, const partial_shape& b) {
  if (!a.rank_known() || !b.rank_known()) return partial_shape::unknown_rank();
  auto dims = broadcast_dims(a.dims(), b.dims());
  if (!dims) return std::nullopt;
  return partial_shape(std::move(*dims));
}

/// NumPy's broadcast of a and b, or nullopt when they do not broadcast.
inline std::optional<shape> broadcast(const shape& a, const shape& b) {
  auto dims = broadcast_dims(a.dims(), b.dims());
  if (!dims) return std::nullopt;
  return shape(std::move(*dims));
}

}  // namespace weft
