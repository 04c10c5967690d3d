/// @file
/// CPU kernels for convolution (ops/nn_ops.hpp), NHWC: Conv2D and its two gradients, and the
/// choice among three strategies, each in its own header (conv_register_blocks.hpp,
/// conv_direct.hpp, conv_gemm.hpp).
///
/// Conv2D and its two gradients are products with the patch matrix [rows, kh * kw * c] (a
/// row per output position, its window's values), which is never built whole:
/// - Register blocks, where the output channels fill whole packets: a run of output
///   positions times one or two packets of channels (or, for the filter's gradient, a run
///   of input channels times one or two packets) summed in registers straight from a
///   zero-padded copy of each image. The filter's gradient takes them with at least two
///   images per thread (each thread sums its own images).
/// - Direct loops for a patch of at most 64 values (a first layer over few channels).
/// - Otherwise a GEMM whose patch operand Eigen's packing routines read from the input in
///   place (patch_mapper), multiplied by Eigen's GEBP kernel.
/// Conv2D takes the first that applies; the filter's gradient prefers the direct loops to
/// register blocks (which for one input channel would load a packet per multiply-add). The
/// input's gradient with stride 1 is the convolution of the output's gradient by the filter
/// turned 180 degrees, done as Conv2D; with larger strides a GEMM by the filter and a
/// scatter of its rows back into the input (col2im), an image per thread. A 1x1 convolution
/// with stride 1 is one GEMM. float16 and bfloat16 compute in float (nn_kernel.hpp). Pooling is
/// pooling.hpp, dropout dropout.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <weft/kernels/cpu/conv_direct.hpp>
#include <weft/kernels/cpu/conv_gemm.hpp>
#include <weft/kernels/cpu/conv_register_blocks.hpp>
#include <weft/kernels/cpu/window.hpp>

namespace weft::cpu::nn {

/// Rows of patches (of `patch` values each) that fill about 128K elements, at least 16.
inline std::int64_t cache_rows(std::int64_t patch) {
  return std::max<std::int64_t>(16, (std::int64_t{1} << 17) / std::max<std::int64_t>(patch, 1));
}

/// The scatter behind a strided convolution's input gradient: adds the value at (r, kk) of a
/// patch matrix with rows [r0, r1) to the input element that patch value was taken from.
template <class C>
void col2im_add(const geometry& g, const C* cols, std::int64_t r0, std::int64_t r1, C* in) {
  const std::int64_t K = g.patch(), c = g.c;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t b = r / g.positions(), y = r % g.positions() / g.ow, x = r % g.ow;
    const C* src = cols + (r - r0) * K;
    for (std::int64_t i = 0; i < g.kh; ++i) {
      const std::int64_t iy = g.top(y) + i * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      C* dst = in + (b * g.h + iy) * g.w * c;
      for (std::int64_t j = 0; j < g.kw; ++j) {
        const std::int64_t ix = g.left(x) + j * g.dw;
        if (ix < 0 || ix >= g.w) continue;
        C* d = dst + ix * c;
        const C* s = src + (i * g.kw + j) * c;
        for (std::int64_t t = 0; t < c; ++t) d[t] += s[t];
      }
    }
  }
}

/// `pass` over out's rows (positions of k values), split between the threads: for the paths
/// that do not apply it as they go.
template <class C>
void apply_epilogue(const kernel_context& ctx, const geometry& g, C* out, conv_epilogue<C> pass) {
  if (!pass) return;
  ctx.parallel_for(g.rows(), static_cast<double>(2 * g.k), [&](std::int64_t b, std::int64_t e) {
    pass.apply(out + b * g.k, e - b, g.k);
  });
}

/// out = conv(in, w), w [K, k] row-major, without a patch matrix: in register blocks where
/// they apply (`pass` applied to each row as it is done), else directly for a small patch,
/// else as an implicit GEMM (then `pass` over the output after).
template <class C>
void conv_unpacked(const kernel_context& ctx, const geometry& g, const C* in, const C* w, C* out,
                   conv_epilogue<C> pass = {}) {
  if (use_register_blocks(g, packet_size<C>)) return register_blocks_forward<C>(ctx, g, in, w, out, pass);
  if (is_direct(g)) direct_forward<C>(ctx, g, in, w, out);
  else patch_gemm_forward<C>(ctx, g, in, w, out);
  apply_epilogue(ctx, g, out, pass);
}

/// d_in = the convolution, stride 1, of d_out by the filter turned 180 degrees with its
/// channels swapped: d_in[b, iy, ix, ci] sums d_out[b, y, x, k] * f[i, j, ci, k] over the
/// (y, x) = (iy + pad_top - i * dh, ix + pad_left - j * dw) inside d_out, which with
/// i' = kh - 1 - i is a window of d_out at iy - ((kh - 1) * dh - pad_top) + i' * dh.
template <class C>
void backprop_input_as_conv(const kernel_context& ctx, const geometry& g, const C* f, const C* d_out, C* d_in) {
  geometry t = g;
  t.h = g.oh, t.w = g.ow, t.c = g.k, t.k = g.c, t.oh = g.h, t.ow = g.w, t.sh = t.sw = 1;
  t.pad_top = (g.kh - 1) * g.dh - g.pad_top, t.pad_left = (g.kw - 1) * g.dw - g.pad_left;
  std::vector<C> turned(static_cast<std::size_t>(g.patch() * g.k));  // [kh, kw, k, c]
  for (std::int64_t i = 0; i < g.kh; ++i)
    for (std::int64_t j = 0; j < g.kw; ++j)
      for (std::int64_t ci = 0; ci < g.c; ++ci)
        for (std::int64_t k = 0; k < g.k; ++k)
          turned[static_cast<std::size_t>((((g.kh - 1 - i) * g.kw + (g.kw - 1 - j)) * g.k + k) * g.c + ci)] =
              f[((i * g.kw + j) * g.c + ci) * g.k + k];
  conv_unpacked<C>(ctx, t, d_out, turned.data(), d_in);
}

/// out [rows, k] = patches(in) [rows, K] * filter [K, k], then `pass` (_FusedConv2DBiasAdd's).
template <class C>
void conv_forward(const kernel_context& ctx, const geometry& g, const C* in, const C* f, C* out,
                  conv_epilogue<C> pass = {}) {
  const std::int64_t rows = g.rows(), K = g.patch();
  if (rows == 0 || g.k == 0) return;
  if (is_pointwise(g)) {
    gemm<C>(ctx, in, f, out, rows, K, g.k, false, false, false);
    return apply_epilogue(ctx, g, out, pass);
  }
  conv_unpacked<C>(ctx, g, in, f, out, pass);
}

/// d_in: with stride 1 a convolution of d_out (backprop_input_as_conv); else
/// col2im(d_out [rows, k] * filter^T), an image per thread.
template <class C>
void conv_backprop_input(const kernel_context& ctx, const geometry& g, const C* f, const C* d_out, C* d_in) {
  const std::int64_t K = g.patch(), per_image = g.positions();
  if (g.rows() == 0 || K == 0 || g.k == 0) {
    std::fill_n(d_in, g.n * g.h * g.w * g.c, C(0));
    return;
  }
  if (is_pointwise(g)) return gemm<C>(ctx, d_out, f, d_in, g.rows(), g.k, K, false, true, false);
  if (g.sh == 1 && g.sw == 1) return backprop_input_as_conv<C>(ctx, g, f, d_out, d_in);
  std::fill_n(d_in, g.n * g.h * g.w * g.c, C(0));
  const std::int64_t chunk = std::min(per_image, cache_rows(K));
  ctx.parallel_for(g.n, 2.0 * static_cast<double>(per_image * K * g.k), [&](std::int64_t b, std::int64_t e) {
    C* cols = scratch<C>(chunk * K, 0);
    for (std::int64_t img = b; img < e; ++img)
      for (std::int64_t r0 = img * per_image, end = r0 + per_image; r0 < end; r0 += chunk) {
        const std::int64_t r1 = std::min(end, r0 + chunk);
        gemm_rows<C>(d_out + r0 * g.k, f, cols, r1 - r0, g.k, K, false, true, false, 0, r1 - r0);
        col2im_add(g, cols, r0, r1, d_in);
      }
  });
}

/// d_filter [K, k] = patches(in)^T * d_out.
template <class C>
void conv_backprop_filter(const kernel_context& ctx, const geometry& g, const C* in, const C* d_out, C* d_f) {
  const std::int64_t rows = g.rows(), K = g.patch(), size = K * g.k;
  if (rows == 0 || size == 0) {
    std::fill_n(d_f, size, C(0));
    return;
  }
  if (is_pointwise(g)) return gemm<C>(ctx, in, d_out, d_f, K, rows, g.k, true, false, false);
  if (is_direct(g)) return direct_filter<C>(ctx, g, in, d_out, d_f);
  if (use_register_blocks(g, packet_size<C>) && g.n >= 2 * ctx.device().num_threads())
    return register_blocks_filter<C>(ctx, g, in, d_out, d_f);
  patch_gemm_filter<C>(ctx, g, in, d_out, d_f);
}

/// The geometry of a Conv2D of an input of shape `in` by a filter of shape `f`.
inline geometry conv_geometry(const shape& in, const shape& f, const ops::window_attrs& w) {
  if (f.rank() != 4)
    fail(error_code::invalid_argument, "filter must have rank 4 [height, width, in_channels, out_channels], got shape ", f);
  if (in.rank() == 4 && in[3] != f[2])
    fail(error_code::invalid_argument, "the input's channels (", in[3], ") differ from the filter's input channels (", f[2],
         "); input ", in, ", filter ", f);
  return make_geometry(in, f[0], f[1], f[3], w);
}

/// Conv2D over NHWC input and HWIO filter: direct loops, register blocks or a GEMM over the
/// patches, by shape.
struct conv2d {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b11;
  /// Reads the node's window attrs.
  explicit conv2d(const node& n) : w_(window_attrs_of(n)) {}
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    return {conv_geometry(ctx.input(0).shape(), ctx.input(1).shape(), w_).output_shape()};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    conv_forward<C>(ctx, conv_geometry(v.in[0].shape(), v.in[1].shape(), w_), v.in[0].data<C>(), v.in[1].data<C>(),
                    v.out[0].data<C>());
  }
 private:
  ops::window_attrs w_;
};

/// _FusedConv2DBiasAdd: Conv2D, then the bias (and the ReLU where relu) applied to each
/// output row as the register blocks complete it, or over the output after the other paths
/// (conv_epilogue).
struct fused_conv2d_bias_add {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b111;
  /// Reads the node's window attrs and relu.
  explicit fused_conv2d_bias_add(const node& n) : w_(window_attrs_of(n)), relu_(n.attr<bool>("relu")) {}
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    const geometry g = conv_geometry(ctx.input(0).shape(), ctx.input(1).shape(), w_);
    const tensor& b = ctx.input(2);
    if (b.rank() != 1 || b.shape()[0] != g.k)
      fail(error_code::invalid_argument, "bias must be a vector of the filter's ", g.k, " output channels, got shape ",
           b.shape(), " (filter ", ctx.input(1).shape(), ")");
    return {g.output_shape()};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    conv_forward<C>(ctx, conv_geometry(v.in[0].shape(), v.in[1].shape(), w_), v.in[0].data<C>(), v.in[1].data<C>(),
                    v.out[0].data<C>(), conv_epilogue<C>{v.in[2].data<C>(), relu_});
  }
 private:
  ops::window_attrs w_;
  bool relu_;
};

/// Conv2DBackpropInput: the gradient of a Conv2D's input (of shape input_sizes).
struct conv2d_backprop_input {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b110;
  /// Reads the node's window attrs.
  explicit conv2d_backprop_input(const node& n) : w_(window_attrs_of(n)) {}
  /// The forward convolution's geometry, checked against the filter and output gradient.
  geometry geo(const tensor& sizes, const tensor& f, const tensor& d) const {
    const geometry g = conv_geometry(sizes_shape(sizes, "input_sizes"), f.shape(), w_);
    require_shape(d, g.output_shape(), "out_backprop", g);
    return g;
  }
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    const geometry g = geo(ctx.input(0), ctx.input(1), ctx.input(2));
    return {shape{g.n, g.h, g.w, g.c}};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    conv_backprop_input<C>(ctx, geo(v.in[0], v.in[1], v.in[2]), v.in[1].data<C>(), v.in[2].data<C>(), v.out[0].data<C>());
  }
 private:
  ops::window_attrs w_;
};

/// Conv2DBackpropFilter: the gradient of a Conv2D's filter (of shape filter_sizes).
struct conv2d_backprop_filter {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b101;
  /// Reads the node's window attrs.
  explicit conv2d_backprop_filter(const node& n) : w_(window_attrs_of(n)) {}
  /// The forward convolution's geometry, checked against the input and output gradient.
  geometry geo(const tensor& in, const tensor& sizes, const tensor& d) const {
    const geometry g = conv_geometry(in.shape(), sizes_shape(sizes, "filter_sizes"), w_);
    require_shape(d, g.output_shape(), "out_backprop", g);
    return g;
  }
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    const geometry g = geo(ctx.input(0), ctx.input(1), ctx.input(2));
    return {shape{g.kh, g.kw, g.c, g.k}};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    conv_backprop_filter<C>(ctx, geo(v.in[0], v.in[1], v.in[2]), v.in[0].data<C>(), v.in[2].data<C>(), v.out[0].data<C>());
  }
 private:
  ops::window_attrs w_;
};

}  // namespace weft::cpu::nn
