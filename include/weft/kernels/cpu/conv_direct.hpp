/// @file
/// Direct convolution loops, for small patches (conv.hpp chooses them where register blocks
/// do not apply and a patch holds at most direct_patch_limit values).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include <weft/kernels/cpu/conv_scratch.hpp>
#include <weft/kernels/cpu/window.hpp>

namespace weft::cpu::nn {

/// When a patch is small (kh * kw * c <= direct_patch_limit, as in a first layer over one
/// to three channels), im2col copies each input value kh * kw times into a GEMM whose depth
/// (forward) or height (filter gradient) is that small patch, where Eigen's GEBP runs at a
/// fraction of its speed. The direct loops below read the input in place instead. Output
/// channels go in blocks of `lanes` values (64 bytes), each block's sums held in registers.
/// Where the window slides one column at a time (stride and dilation 1 along the width, 3, 5
/// or 7 columns wide: slides()), full blocks take the sliding loops, which load each input
/// value once for all the taps it meets.
inline constexpr std::int64_t direct_patch_limit = 64;
/// Whether g's convolution takes the direct loops (a small patch, not pointwise).
inline bool is_direct(const geometry& g) { return g.patch() <= direct_patch_limit && !is_pointwise(g); }
/// Output channels per block: 64 bytes of C.
template <class C>
inline constexpr std::int64_t lanes = std::max<std::int64_t>(1, 64 / static_cast<std::int64_t>(sizeof(C)));

/// The output columns [x0, x1) whose window's column j lies inside the input.
inline std::pair<std::int64_t, std::int64_t> columns_inside(const geometry& g, std::int64_t j) {
  auto first_at_least = [&](std::int64_t v) {  // the least x with x * sw >= v, in [0, ow]
    return v <= 0 ? 0 : std::min(g.ow, (v + g.sw - 1) / g.sw);
  };
  const std::int64_t shift = g.pad_left - j * g.dw;  // input column left(x) + j * dw = x * sw - shift
  return {first_at_least(shift), std::max(first_at_least(shift), first_at_least(g.w + shift))};
}

/// A block of output channels [k0, k0 + width): `Fixed` values (a packet or a few, held in
/// registers) or, for the last block, fewer (Fixed = 0, width given).
template <std::int64_t Fixed, class C>
using lane_block = Eigen::Array<C, (Fixed > 0 ? Fixed : Eigen::Dynamic), 1, 0, (Fixed > 0 ? Fixed : lanes<C>), 1>;
/// The block of width values at p, as an Eigen map.
template <std::int64_t Fixed, class C>
auto lanes_at(const C* p, std::int64_t width) {
  if constexpr (Fixed > 0) return Eigen::Map<const lane_block<Fixed, C>>(p);
  else return Eigen::Map<const lane_block<Fixed, C>>(p, width);
}
/// A block of width zeros.
template <std::int64_t Fixed, class C>
lane_block<Fixed, C> zero_lanes(std::int64_t width) {
  if constexpr (Fixed > 0) return lane_block<Fixed, C>::Zero();
  else return lane_block<Fixed, C>::Zero(width);
}
/// Stores block v at p.
template <std::int64_t Fixed, class C>
void store_lanes(C* p, const lane_block<Fixed, C>& v) {
  Eigen::Map<lane_block<Fixed, C>>(p, v.size()) = v;
}

/// Whether the sliding loops below take g's rows: stride and dilation 1 along the width, a
/// window 3, 5 or 7 wide (any height, stride or dilation down the rows, any channels).
inline bool slides(const geometry& g) { return g.sw == 1 && g.dw == 1 && (g.kw == 3 || g.kw == 5 || g.kw == 7); }
/// Output positions a sliding tile holds in registers.
inline constexpr int slide_tile = 8;

/// Input row (img, iy) where iy = the row of tap row i of output row y's window, or null
/// where it lies outside the input (SAME's padding).
template <class C>
const C* window_row(const geometry& g, const C* in, std::int64_t img, std::int64_t y, std::int64_t i) {
  const std::int64_t iy = g.top(y) + i * g.dh;
  return iy < 0 || iy >= g.h ? nullptr : in + (img * g.h + iy) * g.w * g.c;
}

/// The input values under a sliding tile: row[(ix0 + q) * c + ci] for q in [0, slide_tile +
/// KW - 1), 0 where the column lies outside the input (SAME's padding).
template <int KW, class C>
void slide_values(const geometry& g, const C* row, std::int64_t ix0, std::int64_t ci, C (&v)[slide_tile + KW - 1]) {
  for (int q = 0; q < slide_tile + KW - 1; ++q) {
    const std::int64_t ix = ix0 + q;
    v[q] = ix >= 0 && ix < g.w ? row[ix * g.c + ci] : C(0);
  }
}

/// Conv2D's output row (img, y), channels [k0, k0 + lanes) of a window KW wide with stride and
/// dilation 1 along the width (slides(g)): tiles of slide_tile output positions, whose sums
/// stay in registers over every tap. Each input value under a tile is loaded once per tap row
/// and channel and multiplies the KW filter blocks it meets (input column ix0 + q is tap j of
/// position q - j): KW + 1 multiply-adds a load, where the four-position runs of
/// direct_forward_row load a value and a filter block for every multiply-add of a position.
template <int KW, class C>
void sliding_forward_row(const geometry& g, const C* in, const C* f, C* out_row, std::int64_t img, std::int64_t y,
                         std::int64_t k0) {
  constexpr std::int64_t W = lanes<C>;
  constexpr int T = slide_tile;
  using block = lane_block<W, C>;
  for (std::int64_t x0 = 0; x0 < g.ow; x0 += T) {
    block acc[T];
    for (auto& a : acc) a = block::Zero();
    for (std::int64_t i = 0; i < g.kh; ++i) {
      const C* row = window_row(g, in, img, y, i);
      if (!row) continue;
      for (std::int64_t ci = 0; ci < g.c; ++ci) {
        block taps[KW];
        for (int j = 0; j < KW; ++j) taps[j] = lanes_at<W>(f + ((i * KW + j) * g.c + ci) * g.k + k0, W);
        C v[T + KW - 1];
        slide_values<KW>(g, row, g.left(x0), ci, v);
#pragma GCC unroll 16
        for (int q = 0; q < T + KW - 1; ++q)
#pragma GCC unroll 8
          for (int j = 0; j < KW; ++j)
            if (q - j >= 0 && q - j < T) acc[q - j] += v[q] * taps[j];
      }
    }
    const std::int64_t n = std::min<std::int64_t>(T, g.ow - x0);
    for (std::int64_t t = 0; t < n; ++t) store_lanes<W>(out_row + (x0 + t) * g.k + k0, acc[t]);
  }
}

/// Conv2DBackpropFilter's sums over output row (img, y), filter channels [k0, k0 + lanes), a
/// window KW wide with stride and dilation 1 along the width (slides(g)), added to d_f: for
/// each tap row and input channel, the KW taps' sums in registers (two each, over alternate
/// positions), over tiles of slide_tile positions whose gradients are loaded once per tile
/// and input values once per tap row and channel (KW multiply-adds a value).
template <int KW, class C>
void sliding_filter_row(const geometry& g, const C* in, const C* d_out, C* d_f, std::int64_t img, std::int64_t y,
                        std::int64_t k0) {
  constexpr std::int64_t W = lanes<C>;
  constexpr int T = slide_tile;
  using block = lane_block<W, C>;
  const C* d_row = d_out + (img * g.oh + y) * g.ow * g.k + k0;
  for (std::int64_t i = 0; i < g.kh; ++i) {
    const C* row = window_row(g, in, img, y, i);
    if (!row) continue;
    for (std::int64_t ci = 0; ci < g.c; ++ci) {
      block acc[2][KW];
      for (auto& pair : acc)
        for (auto& a : pair) a = block::Zero();
      for (std::int64_t x0 = 0; x0 < g.ow; x0 += T) {
        const std::int64_t n = std::min<std::int64_t>(T, g.ow - x0);
        block d[T];
        for (int t = 0; t < T; ++t) d[t] = t < n ? block(lanes_at<W>(d_row + (x0 + t) * g.k, W)) : block(block::Zero());
        C v[T + KW - 1];
        slide_values<KW>(g, row, g.left(x0), ci, v);
#pragma GCC unroll 16
        for (int q = 0; q < T + KW - 1; ++q)
#pragma GCC unroll 8
          for (int j = 0; j < KW; ++j)
            if (q - j >= 0 && q - j < T) acc[(q - j) & 1][j] += v[q] * d[q - j];
      }
      for (int j = 0; j < KW; ++j) {
        Eigen::Map<block> into(d_f + ((i * KW + j) * g.c + ci) * g.k + k0);
        into += acc[0][j] + acc[1][j];
      }
    }
  }
}

/// Calls body's templated call operator with g's window width (3, 5 or 7: slides(g)) as its
/// template argument.
template <class Body>
void with_slide_width(const geometry& g, Body&& body) {
  if (g.kw == 3) body.template operator()<3>();
  else if (g.kw == 5) body.template operator()<5>();
  else body.template operator()<7>();
}

/// Output row (img, y), channels [k0, k0 + width): out[x] = the sum over x's window. Runs of
/// four positions whose windows lie inside the input share each filter block's load (four
/// sums in registers); the others check each tap.
template <std::int64_t Fixed, class C>
void direct_forward_row(const geometry& g, const C* in, const C* f, C* out_row, std::int64_t img, std::int64_t y,
                        std::int64_t k0, std::int64_t width, std::int64_t inner0, std::int64_t inner1) {
  auto tap = [&](std::int64_t i, std::int64_t j, std::int64_t ci) { return lanes_at<Fixed>(f + ((i * g.kw + j) * g.c + ci) * g.k + k0, width); };
  auto row_of = [&](std::int64_t i) { return window_row(g, in, img, y, i); };
  const std::int64_t step = g.sw * g.c;
  std::int64_t x = 0;
  auto one = [&](std::int64_t px) {
    lane_block<Fixed, C> acc = zero_lanes<Fixed, C>(width);
    for (std::int64_t i = 0; i < g.kh; ++i)
      if (const C* row = row_of(i))
        for (std::int64_t j = 0; j < g.kw; ++j) {
          const std::int64_t ix = g.left(px) + j * g.dw;
          if (ix < 0 || ix >= g.w) continue;
          for (std::int64_t ci = 0; ci < g.c; ++ci) acc += row[ix * g.c + ci] * tap(i, j, ci);
        }
    store_lanes<Fixed>(out_row + px * g.k + k0, acc);
  };
  for (; x < std::min(inner0, g.ow); ++x) one(x);
  for (; x + 4 <= inner1; x += 4) {
    lane_block<Fixed, C> a0 = zero_lanes<Fixed, C>(width), a1 = a0, a2 = a0, a3 = a0;
    for (std::int64_t i = 0; i < g.kh; ++i)
      if (const C* row = row_of(i))
        for (std::int64_t j = 0; j < g.kw; ++j) {
          const C* src = row + (g.left(x) + j * g.dw) * g.c;
          for (std::int64_t ci = 0; ci < g.c; ++ci) {
            const auto fv = tap(i, j, ci);
            a0 += src[ci] * fv, a1 += src[ci + step] * fv, a2 += src[ci + 2 * step] * fv, a3 += src[ci + 3 * step] * fv;
          }
        }
    store_lanes<Fixed>(out_row + x * g.k + k0, a0);
    store_lanes<Fixed>(out_row + (x + 1) * g.k + k0, a1);
    store_lanes<Fixed>(out_row + (x + 2) * g.k + k0, a2);
    store_lanes<Fixed>(out_row + (x + 3) * g.k + k0, a3);
  }
  for (; x < g.ow; ++x) one(x);
}

/// Conv2D by the direct loops: out [n, oh, ow, k] from in [n, h, w, c] and filter f [kh, kw, c, k].
template <class C>
void direct_forward(const kernel_context& ctx, const geometry& g, const C* in, const C* f, C* out) {
  constexpr std::int64_t W = lanes<C>;
  // The output columns whose whole window row lies inside the input.
  std::int64_t inner0 = 0, inner1 = g.ow;
  for (std::int64_t j = 0; j < g.kw; ++j) {
    const auto [x0, x1] = columns_inside(g, j);
    inner0 = std::max(inner0, x0), inner1 = std::min(inner1, x1);
  }
  ctx.parallel_for(g.n * g.oh, 2.0 * static_cast<double>(g.ow * g.patch() * g.k), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t row = b; row < e; ++row) {
      C* o = out + row * g.ow * g.k;
      std::int64_t k0 = 0;
      if (slides(g))
        with_slide_width(g, [&]<int KW>() {
          for (; k0 + W <= g.k; k0 += W) sliding_forward_row<KW>(g, in, f, o, row / g.oh, row % g.oh, k0);
        });
      for (; k0 + W <= g.k; k0 += W) direct_forward_row<W>(g, in, f, o, row / g.oh, row % g.oh, k0, W, inner0, inner1);
      if (k0 < g.k) direct_forward_row<0>(g, in, f, o, row / g.oh, row % g.oh, k0, g.k - k0, inner0, inner1);
    }
  });
}

/// For filter channels [k0, k0 + width): adds, for every tap of the window, the products of
/// output row (img, y)'s gradients with the input values under that tap, to d_f. Four sums
/// over alternate positions keep four multiply-adds in flight.
template <std::int64_t Fixed, class C>
void direct_filter_row(const geometry& g, const C* in, const C* d_out, C* d_f, std::int64_t img, std::int64_t y,
                       std::int64_t k0, std::int64_t width) {
  const C* d_row = d_out + (img * g.oh + y) * g.ow * g.k + k0;
  auto d_at = [&](std::int64_t x) { return lanes_at<Fixed>(d_row + x * g.k, width); };
  for (std::int64_t i = 0; i < g.kh; ++i) {
    const C* in_row = window_row(g, in, img, y, i);
    if (!in_row) continue;
    for (std::int64_t j = 0; j < g.kw; ++j) {
      const auto [x0, x1] = columns_inside(g, j);
      const std::int64_t step = g.sw * g.c;
      for (std::int64_t ci = 0; ci < g.c; ++ci) {
        const C* v = in_row + (g.left(x0) + j * g.dw) * g.c + ci;  // the input under position x0
        lane_block<Fixed, C> a0 = zero_lanes<Fixed, C>(width), a1 = a0, a2 = a0, a3 = a0;
        std::int64_t x = x0;
        for (; x + 4 <= x1; x += 4, v += 4 * step)
          a0 += v[0] * d_at(x), a1 += v[step] * d_at(x + 1), a2 += v[2 * step] * d_at(x + 2), a3 += v[3 * step] * d_at(x + 3);
        for (; x < x1; ++x, v += step) a0 += v[0] * d_at(x);
        Eigen::Map<lane_block<Fixed, C>> into(d_f + ((i * g.kw + j) * g.c + ci) * g.k + k0, width);
        into += (a0 + a1) + (a2 + a3);
      }
    }
  }
}

/// d_f is summed over blocks of output rows (summed_in_blocks).
template <class C>
void direct_filter(const kernel_context& ctx, const geometry& g, const C* in, const C* d_out, C* d_f) {
  constexpr std::int64_t W = lanes<C>;
  const std::int64_t size = g.patch() * g.k;
  summed_in_blocks(ctx, g.n * g.oh, std::max<std::int64_t>(1, (std::int64_t{1} << 16) / (g.ow * size)), size, d_f,
                   [&](C* sum, std::int64_t b, std::int64_t e) {
                     for (std::int64_t row = b; row < e; ++row) {
                       const std::int64_t img = row / g.oh, y = row % g.oh;
                       std::int64_t k0 = 0;
                       if (slides(g))
                         with_slide_width(g, [&]<int KW>() {
                           for (; k0 + W <= g.k; k0 += W) sliding_filter_row<KW>(g, in, d_out, sum, img, y, k0);
                         });
                       for (; k0 + W <= g.k; k0 += W) direct_filter_row<W>(g, in, d_out, sum, img, y, k0, W);
                       if (k0 < g.k) direct_filter_row<0>(g, in, d_out, sum, img, y, k0, g.k - k0);
                     }
                   });
}

}  // namespace weft::cpu::nn
