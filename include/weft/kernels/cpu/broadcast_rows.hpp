/// @file
/// The output of a broadcasting elementwise op, walked in rows. The output's dims of size 1
/// are dropped and neighbouring dims are merged wherever every input steps through the two
/// as through one; a row is the last merged dim. Along a row each input either steps one
/// element at a time or repeats one value, so a row is one vectorized expression over
/// pointers and constants, and only a row's start needs an index walk. Long rows are cut
/// into pieces of at most `max_piece` elements: the pieces are the units of parallel work.
///
/// Examples, output [b, m, n]: a bias [n] steps along rows of n and starts every row at 0;
/// a column [b, m, 1] repeats one value per row; [1, m, n] beside [b, 1, n] gives rows of n
/// starting at m * n and at 0; equal shapes merge into one row of b * m * n elements.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include <weft/core/shape.hpp>
#include <weft/kernels/cpu/common.hpp>

namespace weft::cpu {

/// Fills `count` elements of `size` bytes at dst with the element at src (a value repeated
/// along a row).
inline void replicate_bytes(char* dst, const void* src, std::int64_t size, std::int64_t count) {
  auto fill = [&](auto word) {  // fixed-size copies, which compile to (vector) stores
    std::memcpy(&word, src, sizeof(word));
    for (std::int64_t i = 0; i < count; ++i) std::memcpy(dst + i * static_cast<std::int64_t>(sizeof(word)), &word, sizeof(word));
  };
  switch (size) {
    case 1: return fill(std::uint8_t{});
    case 2: return fill(std::uint16_t{});
    case 4: return fill(std::uint32_t{});
    case 8: return fill(std::uint64_t{});
    default:
      for (std::int64_t i = 0; i < count; ++i) std::memcpy(dst + i * size, src, static_cast<std::size_t>(size));
  }
}

/// An output and N inputs broadcast to it, cut into rows along which each input either steps
/// one element at a time or repeats one value, so that each row piece is one vectorized
/// expression (see the file's comment).
template <std::size_t N>
class broadcast_rows {
 public:
  /// `in` are the inputs' shapes, each broadcastable to `out` (checked by the caller).
  broadcast_rows(const shape& out, const std::array<const shape*, N>& in, std::int64_t max_piece = 4096) {
    std::array<std::vector<std::int64_t>, N> full;
    for (std::size_t k = 0; k < N; ++k) full[k] = broadcast_strides(*in[k], out);
    // Merge from the last dim outwards. A dim joins the group inside it when each input's
    // stride over it is its stride over the group times the group's size.
    std::vector<std::int64_t> dims;                     // innermost first
    std::array<std::vector<std::int64_t>, N> strides;  // innermost first
    for (int d = out.rank() - 1; d >= 0; --d) {
      if (out[d] == 1) continue;
      auto i = static_cast<std::size_t>(d);
      bool merge = !dims.empty();
      for (std::size_t k = 0; k < N && merge; ++k) merge = full[k][i] == strides[k].back() * dims.back();
      if (merge) {
        dims.back() *= out[d];
        continue;
      }
      dims.push_back(out[d]);
      for (std::size_t k = 0; k < N; ++k) strides[k].push_back(full[k][i]);
    }
    length_ = dims.empty() ? (out.num_elements() == 0 ? 0 : 1) : dims.front();
    for (std::size_t k = 0; k < N; ++k) step_[k] = strides[k].empty() ? 0 : strides[k].front();
    // Outer dims, outermost first.
    dims_.assign(dims.rbegin(), dims.rend() - (dims.empty() ? 0 : 1));
    for (std::size_t k = 0; k < N; ++k) strides_[k].assign(strides[k].rbegin(), strides[k].rend() - (strides[k].empty() ? 0 : 1));
    rows_ = length_ == 0 ? 0 : out.num_elements() / length_;
    pieces_ = length_ == 0 ? 1 : (length_ + max_piece - 1) / max_piece;
    piece_ = length_ == 0 ? 0 : (length_ + pieces_ - 1) / pieces_;
  }

  std::int64_t length() const { return length_; }         ///< elements in a row
  std::int64_t rows() const { return rows_; }  ///< rows in the output
  std::int64_t units() const { return rows_ * pieces_; }   ///< pieces, all rows
  std::int64_t piece() const { return piece_; }            ///< elements of the longest piece
  bool steps(std::size_t k) const { return step_[k] != 0; }  ///< else input k repeats one value along a row

  /// Calls f(output offset, length, offsets of the inputs) for units [first, last), in order.
  template <class F>
  void each(std::int64_t first, std::int64_t last, F&& f) const {
    if (first >= last) return;
    const auto outer = static_cast<int>(dims_.size());
    std::vector<std::int64_t> idx(dims_.size());
    std::array<std::int64_t, N> row_off{};
    std::int64_t row = first / pieces_, rem = row;
    for (int d = outer - 1; d >= 0; --d) {
      auto i = static_cast<std::size_t>(d);
      idx[i] = rem % dims_[i];
      rem /= dims_[i];
      for (std::size_t k = 0; k < N; ++k) row_off[k] += idx[i] * strides_[k][i];
    }
    std::int64_t p = first % pieces_;
    for (std::int64_t u = first; u < last; ++u) {
      std::int64_t start = p * piece_, len = std::min(piece_, length_ - start);
      std::array<std::int64_t, N> off;
      for (std::size_t k = 0; k < N; ++k) off[k] = row_off[k] + step_[k] * start;
      f(row * length_ + start, len, off);
      if (++p < pieces_) continue;
      p = 0;
      ++row;
      for (int d = outer - 1; d >= 0; --d) {  // odometer over the outer dims
        auto i = static_cast<std::size_t>(d);
        for (std::size_t k = 0; k < N; ++k) row_off[k] += strides_[k][i];
        if (++idx[i] < dims_[i]) break;
        for (std::size_t k = 0; k < N; ++k) row_off[k] -= idx[i] * strides_[k][i];
        idx[i] = 0;
      }
    }
  }

 private:
  std::vector<std::int64_t> dims_;                     ///< outer merged dims, outermost first
  std::array<std::vector<std::int64_t>, N> strides_;  ///< per input, over dims_
  std::array<std::int64_t, N> step_{};                 ///< per input, along a row: 1 or 0
  std::int64_t length_ = 0, rows_ = 0, pieces_ = 1, piece_ = 0;
};

}  // namespace weft::cpu
