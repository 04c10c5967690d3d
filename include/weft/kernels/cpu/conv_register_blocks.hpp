/// @file
/// Convolution in register blocks (conv.hpp chooses it first where the output channels fill
/// whole packets).
///
/// For a batch of images whose output channels fill whole packets, Conv2D skips the patch
/// matrix altogether: a run of P output positions of one row times NB packets of output
/// channels is summed in P * NB registers, and for every tap and input channel the filter's
/// NB packets are loaded once and each position's input value is broadcast into them. A
/// packed patch matrix costs a copy of every patch value (25 per input value for a 5x5
/// window) and the loads of the packed blocks; here every multiply-add takes one broadcast.
/// The filter's gradient holds a run of input channels times NB packets instead, over the
/// positions. Each image is first copied into a buffer with its padding as zeros, so no tap
/// is checked.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/kernels/cpu/conv_scratch.hpp>
#include <weft/kernels/cpu/window.hpp>

namespace weft::cpu::nn {

/// Positions per block: what the registers hold beside the filter's NB packets and a
/// broadcast value, at most 14.
template <int NB>
inline constexpr int block_positions = std::clamp((static_cast<int>(EIGEN_ARCH_DEFAULT_NUMBER_OF_REGISTERS) - NB - 2) / NB, 1, 14);

// Unrolls the loop that follows completely (the register blocks' loops over their
// compile-time sizes, so that their sums stay in registers).
#define WEFT_DETAIL_UNROLL _Pragma("GCC unroll 16")

/// The image buffer's geometry: rows of `width` positions of c values, every window inside.
struct padded_image {
  std::int64_t height;  ///< rows of positions
  std::int64_t width;   ///< positions per row
  std::int64_t row;     ///< values per buffer row
  /// The buffer g's windows read: the input rows and columns they span.
  explicit padded_image(const geometry& g)
      : height((g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1), width((g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1), row(width * g.c) {}
  std::int64_t size() const { return height * row; }  ///< values in the buffer
  /// Whether the buffer of an image stays within four times the image plus 64 Ki values (and
  /// so its sizes fit in int64). Padding far wider than the image (a dilation of 2^61 pads a
  /// row by 2^61 on each side) is left to the paths that test each tap, not copied.
  static bool fits(const geometry& g) {
    auto extent = [](std::int64_t out, std::int64_t stride, std::int64_t k, std::int64_t dilation, std::int64_t& r) {
      std::int64_t a, b;
      return !__builtin_mul_overflow(out - 1, stride, &a) && !__builtin_mul_overflow(k - 1, dilation, &b) &&
             !__builtin_add_overflow(a, b, &r) && !__builtin_add_overflow(r, 1, &r);
    };
    std::int64_t h, w, values;
    if (!extent(g.oh, g.sh, g.kh, g.dh, h) || !extent(g.ow, g.sw, g.kw, g.dw, w) || __builtin_mul_overflow(h, w, &values) ||
        __builtin_mul_overflow(values, g.c, &values))
      return false;
    return (values - (std::int64_t{1} << 16)) / 4 <= g.h * g.w * g.c;  // the image exists: its size fits
  }
  /// Copies image img of `in` into buf: buffer position (yy, xx) is input (yy - pad_top, xx - pad_left).
  template <class C>
  void fill(const geometry& g, const C* in, std::int64_t img, C* buf) const {
    for (std::int64_t yy = 0; yy < height; ++yy) {
      C* dst = buf + yy * row;
      const std::int64_t iy = yy - g.pad_top;
      if (iy < 0 || iy >= g.h) {
        std::fill_n(dst, row, C(0));
        continue;
      }
      const std::int64_t x0 = std::clamp<std::int64_t>(g.pad_left, 0, width), x1 = std::clamp<std::int64_t>(g.pad_left + g.w, x0, width);
      std::fill_n(dst, x0 * g.c, C(0));
      std::copy_n(in + ((img * g.h + iy) * g.w + (x0 - g.pad_left)) * g.c, (x1 - x0) * g.c, dst + x0 * g.c);
      std::fill_n(dst + x1 * g.c, (width - x1) * g.c, C(0));
    }
  }
};

/// out[p * k + q * S + s] for p < P, q < NB: the sums of P positions (their windows start
/// at src, src + sw * c, ...) with filter w's channels from w on (row stride k).
template <class C, int P, int NB>
void register_block(const geometry& g, const padded_image& pi, const C* src, const C* w, C* out) {
  using Packet = packet_t<C>;
  constexpr std::int64_t S = packet_size<C>;
  const std::int64_t c = g.c, N = g.k, x_step = g.sw * c;
  Packet acc[P][NB];
  WEFT_DETAIL_UNROLL
  for (int p = 0; p < P; ++p)
    WEFT_DETAIL_UNROLL
    for (int q = 0; q < NB; ++q) acc[p][q] = ei::pset1<Packet>(C(0));
  for (std::int64_t i = 0; i < g.kh; ++i)
    for (std::int64_t j = 0; j < g.kw; ++j) {
      const C* s = src + i * g.dh * pi.row + j * g.dw * c;
      const C* wt = w + (i * g.kw + j) * c * N;
      for (std::int64_t ci = 0; ci < c; ++ci, wt += N) {
        Packet wv[NB];
        WEFT_DETAIL_UNROLL
        for (int q = 0; q < NB; ++q) wv[q] = ei::ploadu<Packet>(wt + q * S);
        WEFT_DETAIL_UNROLL
        for (int p = 0; p < P; ++p) {
          const Packet v = ei::pset1<Packet>(s[p * x_step + ci]);
          WEFT_DETAIL_UNROLL
          for (int q = 0; q < NB; ++q) acc[p][q] = ei::pmadd(v, wv[q], acc[p][q]);
        }
      }
    }
  WEFT_DETAIL_UNROLL
  for (int p = 0; p < P; ++p)
    WEFT_DETAIL_UNROLL
    for (int q = 0; q < NB; ++q) ei::pstoreu(out + p * N + q * S, acc[p][q]);
}

/// Calls f(std::integral_constant<int, n>{}) for a run-time n in [1, Max].
template <int Max, class F>
void with_count(std::int64_t n, F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (void)((n == I + 1 ? (f(std::integral_constant<int, I + 1>{}), true) : false) || ...);
  }(std::make_integer_sequence<int, Max>{});
}

/// The length of runs of at most `most` that cut n as evenly as they can.
inline std::int64_t even_run(std::int64_t n, std::int64_t most) {
  const std::int64_t runs = (n + most - 1) / most;
  return (n + runs - 1) / runs;
}

/// Calls f(nb, q) for the blocks of packets of k output channels: pairs, and one packet last
/// when their number is odd.
template <class F>
void for_each_packet_block(std::int64_t packets, F&& f) {
  for (std::int64_t q = 0; q < packets; q += 2) f(packets - q >= 2 ? 2 : 1, q);
}

/// Whether g's convolution takes the register blocks (output channels a multiple of the packet, the buffer within bounds).
inline bool use_register_blocks(const geometry& g, std::int64_t packet) {
  return g.k % packet == 0 && padded_image::fits(g);
}

/// Output row y of an image from its padded copy: runs of positions times blocks of packets.
template <class C>
void register_blocks_row(const geometry& g, const padded_image& pi, const C* image, const C* w, std::int64_t y, C* out_row) {
  constexpr std::int64_t S = packet_size<C>;
  const C* src_row = image + y * g.sh * pi.row;
  for_each_packet_block(g.k / S, [&](int nb, std::int64_t q) {
    const std::int64_t run = even_run(g.ow, nb == 2 ? block_positions<2> : block_positions<1>);
    for (std::int64_t x = 0; x < g.ow; x += run) {
      const std::int64_t p = std::min(run, g.ow - x);
      const C* src = src_row + x * g.sw * g.c;
      C* o = out_row + x * g.k + q * S;
      if (nb == 2) with_count<block_positions<2>>(p, [&](auto P) { register_block<C, P(), 2>(g, pi, src, w + q * S, o); });
      else with_count<block_positions<1>>(p, [&](auto P) { register_block<C, P(), 1>(g, pi, src, w + q * S, o); });
    }
  });
}

/// out = conv(in, w) (w [K, k] row-major). With at least two images per thread, an image
/// per thread at a time, copied into the thread's buffer (which stays in its cache);
/// otherwise every image copied once and the output rows spread over the threads. `pass`
/// (_FusedConv2DBiasAdd's bias and ReLU) goes over each output row right after its blocks,
/// while the row is in L1.
template <class C>
void register_blocks_forward(const kernel_context& ctx, const geometry& g, const C* in, const C* w, C* out,
                             conv_epilogue<C> pass = {}) {
  const padded_image pi(g);
  const double row_cost = 2.0 * static_cast<double>(g.ow * g.patch() * g.k);
  const auto row = [&](const C* image, std::int64_t y, C* out_row) {
    register_blocks_row(g, pi, image, w, y, out_row);
    if (pass) pass.apply(out_row, g.ow, g.k);
  };
  if (g.n >= 2 * ctx.device().num_threads()) {
    ctx.parallel_for(g.n, row_cost * static_cast<double>(g.oh), [&](std::int64_t b, std::int64_t e) {
      C* buf = scratch<C>(pi.size(), 0);
      for (std::int64_t img = b; img < e; ++img) {
        pi.fill(g, in, img, buf);
        for (std::int64_t y = 0; y < g.oh; ++y) row(buf, y, out + (img * g.oh + y) * g.ow * g.k);
      }
    });
    return;
  }
  std::vector<C, Eigen::aligned_allocator<C>> images(static_cast<std::size_t>(g.n * pi.size()));
  for (std::int64_t img = 0; img < g.n; ++img) pi.fill(g, in, img, images.data() + img * pi.size());
  ctx.parallel_for(g.n * g.oh, row_cost, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) row(images.data() + r / g.oh * pi.size(), r % g.oh, out + r * g.ow * g.k);
  });
}

/// d_w[tap (i, j), channels ci0 .. ci0 + CI, k0 .. k0 + NB * S] += the sum over image img's
/// output positions of the input under that tap times d_out: CI * NB sums in registers, the
/// output gradient's NB packets loaded once per position and each input value broadcast.
template <class C, int CI, int NB>
void register_filter_block(const geometry& g, const padded_image& pi, const C* buf, const C* d_img, std::int64_t i,
                           std::int64_t j, std::int64_t ci0, std::int64_t k0, C* d_w) {
  using Packet = packet_t<C>;
  constexpr std::int64_t S = packet_size<C>;
  const std::int64_t N = g.k, x_step = g.sw * g.c;
  Packet acc[CI][NB];
  WEFT_DETAIL_UNROLL
  for (int c = 0; c < CI; ++c)
    WEFT_DETAIL_UNROLL
    for (int q = 0; q < NB; ++q) acc[c][q] = ei::pset1<Packet>(C(0));
  for (std::int64_t y = 0; y < g.oh; ++y) {
    const C* s = buf + (y * g.sh + i * g.dh) * pi.row + j * g.dw * g.c + ci0;
    const C* d = d_img + y * g.ow * N + k0;
    for (std::int64_t x = 0; x < g.ow; ++x, s += x_step, d += N) {
      Packet dv[NB];
      WEFT_DETAIL_UNROLL
      for (int q = 0; q < NB; ++q) dv[q] = ei::ploadu<Packet>(d + q * S);
      WEFT_DETAIL_UNROLL
      for (int c = 0; c < CI; ++c) {
        const Packet v = ei::pset1<Packet>(s[c]);
        WEFT_DETAIL_UNROLL
        for (int q = 0; q < NB; ++q) acc[c][q] = ei::pmadd(v, dv[q], acc[c][q]);
      }
    }
  }
  WEFT_DETAIL_UNROLL
  for (int c = 0; c < CI; ++c)
    WEFT_DETAIL_UNROLL
    for (int q = 0; q < NB; ++q) {
      C* to = d_w + ((i * g.kw + j) * g.c + ci0 + c) * N + k0 + q * S;
      ei::pstoreu(to, ei::padd(ei::ploadu<Packet>(to), acc[c][q]));
    }
}
#undef WEFT_DETAIL_UNROLL

/// d_w = patches(in)^T * d_out in register blocks, over blocks of images (summed_in_blocks).
template <class C>
void register_blocks_filter(const kernel_context& ctx, const geometry& g, const C* in, const C* d_out, C* d_w) {
  constexpr std::int64_t S = packet_size<C>;
  const padded_image pi(g);
  const std::int64_t packets = g.k / S;
  summed_in_blocks(ctx, g.n, 1, g.patch() * g.k, d_w, [&](C* sum, std::int64_t b, std::int64_t e) {
    C* buf = scratch<C>(pi.size(), 0);
    for (std::int64_t img = b; img < e; ++img) {
      pi.fill(g, in, img, buf);
      const C* d_img = d_out + img * g.positions() * g.k;
      for (std::int64_t i = 0; i < g.kh; ++i)
        for (std::int64_t j = 0; j < g.kw; ++j)
          for_each_packet_block(packets, [&](int nb, std::int64_t q) {
            const std::int64_t run = even_run(g.c, nb == 2 ? block_positions<2> : block_positions<1>);
            for (std::int64_t ci = 0; ci < g.c; ci += run) {
              const std::int64_t n = std::min(run, g.c - ci);
              if (nb == 2)
                with_count<block_positions<2>>(n, [&](auto CI) { register_filter_block<C, CI(), 2>(g, pi, buf, d_img, i, j, ci, q * S, sum); });
              else
                with_count<block_positions<1>>(n, [&](auto CI) { register_filter_block<C, CI(), 1>(g, pi, buf, d_img, i, j, ci, q * S, sum); });
            }
          });
    }
  });
}

}  // namespace weft::cpu::nn
