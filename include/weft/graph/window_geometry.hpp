/// @file
/// The geometry of a window sliding over NHWC images (the convolutions and pools of
/// ops/nn_ops.hpp), device-neutral: a node's window attrs, the input, window and output sizes
/// with TensorFlow's padding, and the check that the window fits. The CPU kernels
/// (kernels/cpu/window.hpp) and the GPU's (cuda/kernels.hpp) build theirs here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <weft/core/checked.hpp>
#include <weft/core/error.hpp>
#include <weft/core/shape.hpp>
#include <weft/graph/node.hpp>
#include <weft/ops/nn_ops.hpp>

namespace weft::ops {

/// The window attrs of a node (its op's shape function checked them when it was built).
inline window_attrs window_attrs_of(const node& n) {
  window_attrs w;
  auto pair = [&](const char* name, std::int64_t& h, std::int64_t& wd) {
    if (const attr_value* v = n.attrs().find(name))
      if (const auto* l = v->get_if<std::vector<std::int64_t>>(); l && l->size() == 4) h = (*l)[1], wd = (*l)[2];
  };
  pair("ksize", w.kh, w.kw);
  pair("strides", w.sh, w.sw);
  pair("dilations", w.dh, w.dw);
  w.same = n.attr<std::string>("padding") == "SAME";
  return w;
}

/// The geometry of one convolution or pooling: input [n, h, w, c], a kh x kw window, output
/// [n, oh, ow, k] (k = c for pooling).
struct geometry {
  std::int64_t n = 0;         ///< images
  std::int64_t h = 0;         ///< input rows
  std::int64_t w = 0;         ///< input columns
  std::int64_t c = 0;         ///< input channels
  std::int64_t kh = 1;        ///< window rows
  std::int64_t kw = 1;        ///< window columns
  std::int64_t k = 0;         ///< output channels
  std::int64_t sh = 1;        ///< row stride
  std::int64_t sw = 1;        ///< column stride
  std::int64_t dh = 1;        ///< row dilation
  std::int64_t dw = 1;        ///< column dilation
  std::int64_t oh = 0;        ///< output rows
  std::int64_t ow = 0;        ///< output columns
  std::int64_t pad_top = 0;   ///< rows of padding before the input
  std::int64_t pad_left = 0;  ///< columns of padding before the input
  /// Elements in one window over every input channel (a patch row of the im2col view).
  std::int64_t patch() const { return kh * kw * c; }
  /// Output positions per image.
  std::int64_t positions() const { return oh * ow; }
  /// Output positions over all images.
  std::int64_t rows() const { return n * oh * ow; }
  /// [n, oh, ow, k].
  shape output_shape() const { return shape{n, oh, ow, k}; }
  /// The first input row of output row y; may be negative (padding).
  std::int64_t top(std::int64_t y) const { return y * sh - pad_top; }
  /// The first input column of output column x; may be negative (padding).
  std::int64_t left(std::int64_t x) const { return x * sw - pad_left; }
};

/// The geometry of a kh x kw window with `k` output channels over the NHWC input `in`, with
/// a's strides, dilations and padding; an invalid_argument error (naming `what`) for a wrong
/// rank, an empty window or one that does not fit with VALID padding.
inline geometry make_geometry(const shape& in, std::int64_t kh, std::int64_t kw, std::int64_t k,
                              const window_attrs& a, const char* what = "input") {
  if (in.rank() != 4) fail(error_code::invalid_argument, what, " must have rank 4 (NHWC), got shape ", in);
  if (kh < 1 || kw < 1)
    fail(error_code::invalid_argument, "the window's height and width must be positive, got ", kh, "x", kw);
  geometry g;
  g.n = in[0], g.h = in[1], g.w = in[2], g.c = in[3], g.kh = kh, g.kw = kw, g.k = k;
  g.sh = a.sh, g.sw = a.sw, g.dh = a.dh, g.dw = a.dw;
  auto y = window_of(g.h, kh, g.sh, g.dh, a.same), x = window_of(g.w, kw, g.sw, g.dw, a.same);
  if (!y || !x)
    fail(error_code::invalid_argument, "the ", kh, "x", kw, " window (dilations ", g.dh, ", ", g.dw, ") does not fit in the ",
         what, " ", in, " with VALID padding");
  g.oh = y->out, g.pad_top = y->pad, g.ow = x->out, g.pad_left = x->pad;
  (void)checked_mul(checked_mul(kh, kw, "the window's size"), g.c, "the window's size");  // patch() fits
  return g;
}

}  // namespace weft::ops
