/// @file
/// CPU kernels for pooling (ops/nn_ops.hpp), NHWC: MaxPool, AvgPool and their gradients walk
/// the windows directly, the channels of a position being contiguous. float16 and bfloat16
/// compute in float (nn_kernel.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include <weft/kernels/cpu/window.hpp>

namespace weft::cpu::nn {

/// The valid part [y0, y1) x [x0, x1) of output position (y, x)'s window.
struct window_span {
  std::int64_t y0;  ///< the first valid input row
  std::int64_t y1;  ///< one past the last
  std::int64_t x0;  ///< the first valid input column
  std::int64_t x1;  ///< one past the last
  /// Elements in the valid part.
  std::int64_t count() const { return (y1 - y0) * (x1 - x0); }
};
/// The valid part of output position (y, x)'s window in geometry g.
inline window_span span_of(const geometry& g, std::int64_t y, std::int64_t x) {
  const std::int64_t t = g.top(y), l = g.left(x);
  return {std::max<std::int64_t>(t, 0), std::min(t + g.kh, g.h), std::max<std::int64_t>(l, 0), std::min(l + g.kw, g.w)};
}

/// Calls f(image, y, x, output row) for the output positions of images [b, e).
template <class F>
void for_each_position(const geometry& g, std::int64_t b, std::int64_t e, F&& f) {
  for (std::int64_t img = b; img < e; ++img)
    for (std::int64_t y = 0; y < g.oh; ++y)
      for (std::int64_t x = 0; x < g.ow; ++x) f(img, y, x, (img * g.oh + y) * g.ow + x);
}

/// What the pooling kernels share: the node's window attrs.
struct pool_base {
  /// Reads the node's window attrs (ksize, strides, padding).
  explicit pool_base(const node& n) : w_(window_attrs_of(n)) {}
  /// The window geometry over an NHWC input of shape `in` (errors for a wrong rank or window).
  geometry geo(const shape& in) const { return make_geometry(in, w_.kh, w_.kw, in.rank() == 4 ? in[3] : 0, w_); }
  /// The work of a pooling pass: positions times window size.
  double cost(const geometry& g) const { return static_cast<double>(g.positions()) * static_cast<double>(g.patch()); }
 private:
  ops::window_attrs w_;
};

/// MaxPool (Max) and AvgPool over NHWC images: each window's largest element, or the mean of its valid part.
template <bool Max>
struct pool : pool_base {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b1;
  /// The kernel of a node (reads its window attrs).
  using pool_base::pool_base;
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const { return {geo(ctx.input(0).shape()).output_shape()}; }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const geometry g = geo(v.in[0].shape());
    const C* in = v.in[0].data<C>();
    C* out = v.out[0].data<C>();
    using P = packet_t<C>;
    constexpr std::int64_t lanes = packet_size<C>;
    const std::int64_t whole = g.c / lanes * lanes;  // channels in whole packets
    ctx.parallel_for(g.n, cost(g), [&](std::int64_t b, std::int64_t e) {
      for_each_position(g, b, e, [&](std::int64_t img, std::int64_t y, std::int64_t x, std::int64_t r) {
        const window_span s = span_of(g, y, x);
        const C* corner = in + ((img * g.h + s.y0) * g.w + s.x0) * g.c;
        const std::int64_t row = g.w * g.c;
        // Whole packets of channels summed in a register over the window, as Eigen's
        // expression below computes each packet (its pmax, in its order).
        for (std::int64_t c0 = 0; c0 < whole; c0 += lanes) {
          P acc = ei::pset1<P>(Max ? -std::numeric_limits<C>::infinity() : C(0));
          for (std::int64_t iy = 0; iy < s.y1 - s.y0; ++iy)
            for (std::int64_t ix = 0; ix < s.x1 - s.x0; ++ix) {
              const P v = ei::ploadu<P>(corner + iy * row + ix * g.c + c0);
              if constexpr (Max) acc = ei::pmax(acc, v);
              else acc = ei::padd(acc, v);
            }
          if constexpr (!Max) acc = ei::pdiv(acc, ei::pset1<P>(static_cast<C>(s.count())));
          ei::pstoreu(out + r * g.c + c0, acc);
        }
        if (whole == g.c) return;
        row_map<C> o(out + r * g.c + whole, g.c - whole);
        o.setConstant(Max ? -std::numeric_limits<C>::infinity() : C(0));
        for (std::int64_t iy = 0; iy < s.y1 - s.y0; ++iy)
          for (std::int64_t ix = 0; ix < s.x1 - s.x0; ++ix) {
            const_row_map<C> src(corner + iy * row + ix * g.c + whole, g.c - whole);
            if constexpr (Max) o = o.max(src);
            else o += src;
          }
        if constexpr (!Max) o /= static_cast<C>(s.count());
      });
    });
  }
};

/// The element offsets of output position (img, y, x)'s window inside the input (its valid
/// part), and for each channel the index among them of the window's first maximum (a strict
/// > keeps the first; a NaN first element stays). Plain loops over pointers taken by value,
/// so that they compile to vector compares and blends.
struct window_maxima {
  /// The window's valid elements' offsets in the input (the first `count`).
  std::vector<std::int64_t> offsets;
  /// Per channel, the index in `offsets` of the window's first maximum.
  std::vector<std::int32_t> first;
  /// How many of `offsets` are in use.
  std::int64_t count = 0;
  /// Buffers for g's window and channels.
  explicit window_maxima(const geometry& g) : offsets(static_cast<std::size_t>(g.kh * g.kw)), first(static_cast<std::size_t>(g.c)) {}
  /// Fills offsets and first for output position (img, y, x) of input `in`; best gets each channel's maximum.
  template <class C>
  void find(const geometry& g, const C* in, C* best, std::int64_t img, std::int64_t y, std::int64_t x) {
    const window_span s = span_of(g, y, x);
    count = 0;
    for (std::int64_t iy = s.y0; iy < s.y1; ++iy)
      for (std::int64_t ix = s.x0; ix < s.x1; ++ix) offsets[static_cast<std::size_t>(count++)] = ((img * g.h + iy) * g.w + ix) * g.c;
    if (count > 0) first_of(in, offsets.data(), count, g.c, best, first.data());
  }
  /// The input offset of channel ch's maximum.
  std::int64_t at(std::int64_t ch) const { return offsets[static_cast<std::size_t>(first[static_cast<std::size_t>(ch)])] + ch; }

 private:
  template <class C>
  static void first_of(const C* in, const std::int64_t* offsets, std::int64_t count, std::int64_t channels, C* best,
                       std::int32_t* first) {
    const C* src = in + offsets[0];
    for (std::int64_t ch = 0; ch < channels; ++ch) best[ch] = src[ch], first[ch] = 0;
    for (std::int64_t k = 1; k < count; ++k) {
      src = in + offsets[k];
      const auto kk = static_cast<std::int32_t>(k);
      for (std::int64_t ch = 0; ch < channels; ++ch) {
        const bool greater = src[ch] > best[ch];
        best[ch] = greater ? src[ch] : best[ch];
        first[ch] = greater ? kk : first[ch];
      }
    }
  }
};

/// MaxPoolGrad: each window's gradient to the first of its maxima (TensorFlow's CPU choice);
/// MaxPoolGradGrad (Second): grad, of the input's shape, read at each window's first maximum;
/// _FusedMaxPoolGradReluGrad (Masked): MaxPoolGrad's where that maximum is above 0, else 0,
/// which is ReluGrad(MaxPoolGrad(...), orig_input) bit for bit: ReluGrad keeps an element
/// where its feature is above 0, and the element a window's gradient goes to is the window's
/// maximum (an element that gets none is 0 either way).
template <bool Second, bool Masked = false>
struct max_pool_grad_op : pool_base {
  static_assert(!(Second && Masked), "MaxPoolGradGrad has no masked form");
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b101;  ///< orig_output is only checked for its shape
  /// The kernel of a node (reads its window attrs).
  using pool_base::pool_base;
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    const geometry g = geo(ctx.input(0).shape());
    require_shape(ctx.input(1), g.output_shape(), "orig_output", g);
    require_shape(ctx.input(2), Second ? ctx.input(0).shape() : g.output_shape(), "grad", g);
    return {Second ? g.output_shape() : ctx.input(0).shape()};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const geometry g = geo(v.in[0].shape());
    const C *in = v.in[0].data<C>(), *grad = v.in[2].data<C>();
    C* out = v.out[0].data<C>();
    if constexpr (Second) {
      each_window<C>(ctx, g, in, [&](std::int64_t r, const window_maxima& w, const C*) {
        for (std::int64_t ch = 0; ch < g.c; ++ch)  // a window wholly in the padding has no maximum: 0
          out[r * g.c + ch] = w.count > 0 ? grad[w.at(ch)] : C(0);
      });
    } else if (g.sh >= g.kh && g.sw >= g.kw) {
      // No two windows overlap (2x2 pooling with stride 2, say): each input element is in
      // one window at most, so the output is written once, per window the gradient at its
      // first maximum and 0 elsewhere, with no zero-filling pass or additions. Elements in
      // no window are zeroed first when there are any (strides larger than the window, or
      // rows and columns a VALID window leaves out).
      const bool covers = g.sh == g.kh && g.sw == g.kw && g.oh > 0 && g.ow > 0 && g.top(0) <= 0 &&
                          g.top(g.oh - 1) + g.kh >= g.h && g.left(0) <= 0 && g.left(g.ow - 1) + g.kw >= g.w;
      if (!covers) std::fill_n(out, v.out[0].num_elements(), C(0));
      // Window indices are kept as C values, exact up to 2^digits (2^24 for float): a larger
      // window goes channel by channel.
      const std::int64_t packed = g.kh * g.kw <= (std::int64_t{1} << std::numeric_limits<C>::digits) ? g.c : 0;
      ctx.parallel_for(g.n, 2 * cost(g), [&](std::int64_t b, std::int64_t e) {
        for_each_position(g, b, e, [&](std::int64_t img, std::int64_t y, std::int64_t x, std::int64_t r) {
          const window_span s = span_of(g, y, x);
          if (s.count() <= 0) return;  // wholly in the padding: its elements are in no other window
          const C* d = grad + r * g.c;
          const std::int64_t corner = ((img * g.h + s.y0) * g.w + s.x0) * g.c;
          disjoint_window(g, s, in + corner, d, out + corner, packed);
        });
      });
    } else {
      std::fill_n(out, v.out[0].num_elements(), C(0));
      each_window<C>(ctx, g, in, [&](std::int64_t r, const window_maxima& w, const C* best) {
        if (w.count == 0) return;
        // Masked: every gradient an element gets is masked by the same value (its own, the
        // maximum of each window it gets one from), so the sum is ReluGrad's of the sum.
        for (std::int64_t ch = 0; ch < g.c; ++ch)
          if (!Masked || best[ch] > C(0)) out[w.at(ch)] += grad[r * g.c + ch];
      });
    }
  }

 private:
  /// One window of non-overlapping pooling (`in` and `out` at its first valid element, `d` at
  /// its gradient): the gradient to each channel's first maximum, 0 to the window's other
  /// elements. Whole packets of the first `packed` channels keep each channel's maximum and
  /// the index of its first in registers (the index as a C); the other channels go one by one. (The loops over vectors of offsets and indices that serve overlapping windows
  /// took 1.67 ms for LeNet's first MaxPoolGrad in its step: docs/benchmarks.md.)
  template <class C>
  static void disjoint_window(const geometry& g, const window_span& s, const C* in, const C* d, C* out,
                              std::int64_t packed) {
    using P = packet_t<C>;
    constexpr std::int64_t lanes = packet_size<C>;
    const std::int64_t row = g.w * g.c, rows = s.y1 - s.y0, cols = s.x1 - s.x0;
    std::int64_t c0 = 0;
    for (; c0 + lanes <= packed; c0 += lanes) {
      P best = ei::ploadu<P>(in + c0), first = ei::pzero(best);
      C k = 0;
      for (std::int64_t iy = 0; iy < rows; ++iy)
        for (std::int64_t ix = 0; ix < cols; ++ix, ++k) {
          const P v = ei::ploadu<P>(in + iy * row + ix * g.c + c0);
          const P greater = ei::pcmp_lt(best, v);  // strict: the first maximum stays (a NaN first too)
          best = ei::pselect(greater, v, best);
          first = ei::pselect(greater, ei::pset1<P>(k), first);
        }
      P grad = ei::ploadu<P>(d + c0);
      const P zero = ei::pzero(grad);
      if constexpr (Masked) grad = ei::pselect(ei::pcmp_lt(zero, best), grad, zero);  // a NaN maximum is not above 0
      k = 0;
      for (std::int64_t iy = 0; iy < rows; ++iy)
        for (std::int64_t ix = 0; ix < cols; ++ix, ++k)
          ei::pstoreu(out + iy * row + ix * g.c + c0, ei::pselect(ei::pcmp_eq(first, ei::pset1<P>(k)), grad, zero));
    }
    for (std::int64_t ch = c0; ch < g.c; ++ch) {
      C best = in[ch];
      std::int64_t first = 0, k = 0;
      for (std::int64_t iy = 0; iy < rows; ++iy)
        for (std::int64_t ix = 0; ix < cols; ++ix, ++k)
          if (in[iy * row + ix * g.c + ch] > best) best = in[iy * row + ix * g.c + ch], first = k;
      const C grad = !Masked || best > C(0) ? d[ch] : C(0);
      k = 0;
      for (std::int64_t iy = 0; iy < rows; ++iy)
        for (std::int64_t ix = 0; ix < cols; ++ix, ++k) out[iy * row + ix * g.c + ch] = k == first ? grad : C(0);
    }
  }
  /// Calls f(output row, its window's maxima, each channel's maximum) for every output
  /// position, images split between the threads.
  template <class C, class F>
  void each_window(kernel_context& ctx, const geometry& g, const C* in, F&& f) const {
    ctx.parallel_for(g.n, 2 * cost(g), [&](std::int64_t b, std::int64_t e) {
      std::vector<C> best(static_cast<std::size_t>(g.c));
      window_maxima w(g);
      for_each_position(g, b, e, [&](std::int64_t img, std::int64_t y, std::int64_t x, std::int64_t r) {
        w.find(g, in, best.data(), img, y, x);
        f(r, w, static_cast<const C*>(best.data()));
      });
    });
  }
};
/// MaxPoolGrad's kernel body.
using max_pool_grad = max_pool_grad_op<false>;
/// MaxPoolGradGrad's kernel body.
using max_pool_grad_grad = max_pool_grad_op<true>;
/// _FusedMaxPoolGradReluGrad's kernel body.
using max_pool_grad_relu_grad = max_pool_grad_op<false, true>;

/// Each window's gradient shared equally by the input elements it averaged.
struct avg_pool_grad : pool_base {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b10;
  /// The kernel of a node (reads its window attrs).
  using pool_base::pool_base;
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    const shape in = sizes_shape(ctx.input(0), "orig_input_shape");
    require_shape(ctx.input(1), geo(in).output_shape(), "grad", geo(in));
    return {in};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const geometry g = geo(v.out[0].shape());
    const C* grad = v.in[1].data<C>();
    C* out = v.out[0].data<C>();
    std::fill_n(out, v.out[0].num_elements(), C(0));
    ctx.parallel_for(g.n, cost(g), [&](std::int64_t b, std::int64_t e) {
      for_each_position(g, b, e, [&](std::int64_t img, std::int64_t y, std::int64_t x, std::int64_t r) {
        const window_span s = span_of(g, y, x);
        const const_row_map<C> d(grad + r * g.c, g.c);
        const C scale = C(1) / static_cast<C>(s.count());
        for (std::int64_t iy = s.y0; iy < s.y1; ++iy)
          for (std::int64_t ix = s.x0; ix < s.x1; ++ix) row_map<C>(out + ((img * g.h + iy) * g.w + ix) * g.c, g.c) += d * scale;
      });
    });
  }
};

}  // namespace weft::cpu::nn
