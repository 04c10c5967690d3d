/// @file
/// Neural-network ops, with TensorFlow's semantics. The class axis is the last one.
///   BiasAdd(value, bias; data_format = 'NHWC')  value + bias along value's last dim
///                                            (value of rank >= 2; NHWC only)
///   BiasAddGrad(out_backprop)                out_backprop summed over all but its last dim
///   Softmax(logits), LogSoftmax(logits)      along the last dim (rank >= 1)
///   SoftmaxCrossEntropyWithLogits(features [b, n], labels [b, n])
///                                            -> loss [b] = -sum(labels * log_softmax(features)),
///                                               backprop [b, n] = softmax(features) - labels
///   SparseSoftmaxCrossEntropyWithLogits(features [b, n], labels [b] int32/int64)
///                                            the same with one-hot labels; a label outside
///                                            [0, n) is an error
///   L2Loss(t)                                sum(t^2) / 2, a scalar
///
/// Convolution and pooling, NHWC, with TensorFlow's windows: `strides` and `ksize` are
/// [1, h, w, 1]; padding 'VALID' keeps the windows inside the input (out = ceil((in - k + 1)
/// / s)), 'SAME' pads with zeros (-infinity for MaxPool) so that out = ceil(in / s), the
/// extra row or column at the bottom or right. Conv2D's `dilations` are [1, h, w, 1] too.
///   Conv2D(input [n, h, w, c], filter [kh, kw, c, k])      -> [n, oh, ow, k]
///   Conv2DBackpropInput(input_sizes, filter, out_backprop)  the gradient in the input
///   Conv2DBackpropFilter(input, filter_sizes, out_backprop) the gradient in the filter
///   MaxPool(input), AvgPool(value)                          AvgPool averages the window's
///                                                           elements inside the input only
///   MaxPoolGrad(orig_input, orig_output, grad)              each window's gradient to its
///                                                           maximum (the first, at a tie)
///   MaxPoolGradGrad(orig_input, orig_output, grad)          grad (orig_input's shape) read
///                                                           at each window's maximum:
///                                                           MaxPoolGrad's gradient in grad
///   AvgPoolGrad(orig_input_shape, grad)
///   _FusedConv2DBiasAdd(input, filter, bias; relu)          Relu(BiasAdd(Conv2D(input,
///                                                           filter), bias)) as one node (the
///                                                           Relu where relu; a NaN or a -0
///                                                           stays). Only a session's own copy
///                                                           of a graph holds it.
///   _FusedMaxPoolGradReluGrad(orig_input, orig_output, grad)
///                                                           ReluGrad(MaxPoolGrad(orig_input,
///                                                           orig_output, grad), orig_input)
///                                                           as one node: a window's gradient
///                                                           to its first maximum where that is
///                                                           above 0. Only a session's own copy
///                                                           of a graph holds it
///                                                           (graph/passes/fuse_conv.hpp).
///
/// Batch normalization, TensorFlow's fused ops (channels last; weft also takes ranks 2 to 5):
///   FusedBatchNormV3(x, scale, offset, mean, variance; epsilon, exponential_avg_factor,
///                    is_training) -> (y, batch_mean, batch_variance, reserve_space_1..3)
///     training: y = scale (x - m) / sqrt(v + epsilon) + offset with m, v the mean and
///     (biased) variance of x over every dim but the last; batch_mean = (1 - f) mean + f m
///     and batch_variance = (1 - f) variance + f v n / (n - 1) (f the avg factor, n the count
///     per channel): the moving averages; reserve_space_1, _2 = m, v; _3 empty. mean and
///     variance may be empty when f is 1. Inference: mean and variance normalize; they are
///     passed through.
///   FusedBatchNormGradV3(y_backprop, x, scale, reserve_space_1..3; epsilon, is_training)
///     -> (x_backprop, scale_backprop, offset_backprop, reserve_space_4, reserve_space_5)
///     T is float16, bfloat16, float32 or float64; U (scale, offset and the statistics) is T,
///     or float32 where T is a 16-bit float (TensorFlow's mixed precision: the statistics
///     and the arithmetic in float32, x and y in T).
///   Dropout(x, rate; seed, seed2) -> (output, mask)         keeps each element with
///                                                           probability 1 - rate and scales
///                                                           it by 1 / (1 - rate); mask holds
///                                                           that factor or 0 (rate in [0, 1))
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/gradient_rule.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>
#include <weft/ops/math_ops.hpp>

namespace weft::ops {

/// The windows of a convolution or pooling op along one spatial dim.
struct window_dim {
  std::int64_t out = -1;  ///< the output size (-1: unknown, the input's is)
  std::int64_t pad = 0;   ///< zero rows or columns before the input (SAME)
};
/// TensorFlow's output size of a window op along one dim of size `in` >= 0, for a window of
/// extent (k - 1) * dilation + 1: ceil(in / stride) with SAME padding, ceil((in - extent + 1)
/// / stride) with VALID, -1 when a VALID window does not fit. The shape function (through
/// window_of) and the static shape rules below both compute it here.
constexpr std::int64_t window_out(std::int64_t in, std::int64_t extent, std::int64_t stride, bool same) {
  if (same) return in / stride + (in % stride != 0);
  return in < extent ? -1 : (in - extent) / stride + 1;
}

/// The window of one spatial dim, with its padding. Nullopt when a VALID window does not fit
/// in the input. The extent and in + extent must fit in int64 (an error otherwise), so that
/// no window offset a kernel computes overflows.
inline std::optional<window_dim> window_of(std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t dilation,
                                           bool same) {
  const std::int64_t extent = checked_add(checked_mul(k - 1, dilation, "the window's extent"), 1, "the window's extent");
  if (in < 0) return window_dim{};
  (void)checked_add(in, extent, "the input's size plus the window's extent");
  const std::int64_t out = window_out(in, extent, stride, same);
  if (out < 0) return std::nullopt;
  if (!same) return window_dim{out, 0};
  return window_dim{out, std::max<std::int64_t>(0, (out - 1) * stride + extent - in) / 2};
}

/// Static shape rules (framework/static_rule.hpp) of the convolutions, pools and losses.
namespace static_rules {
/// One spatial dim of a window op's output: unknown when the input's is, or when a VALID
/// window's size is (SAME padding does not depend on it).
constexpr std::int64_t window(std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t dilation, bool same) {
  if (in < 0 || (k < 0 && !same)) return unknown;
  return window_out(in, k < 0 ? 1 : (k - 1) * dilation + 1, stride, same);
}
/// Conv2D: input [n, h, w, c], filter [kh, kw, c, k] -> [n, oh, ow, k].
constexpr dims<4> conv2d(const auto& x, const auto& f, const dims<2>& strides, const dims<2>& dilations, bool same) {
  return {dim_or(x, 0), window(dim_or(x, 1), dim_or(f, 0), strides[0], dilations[0], same),
          window(dim_or(x, 2), dim_or(f, 1), strides[1], dilations[1], same), dim_or(f, 3)};
}
/// MaxPool, AvgPool: input [n, h, w, c] -> [n, oh, ow, c].
constexpr dims<4> pool(const auto& x, const dims<2>& ksize, const dims<2>& strides, bool same) {
  return {dim_or(x, 0), window(dim_or(x, 1), ksize[0], strides[0], 1, same),
          window(dim_or(x, 2), ksize[1], strides[1], 1, same), dim_or(x, 3)};
}
/// SoftmaxCrossEntropyWithLogits, SparseSoftmaxCrossEntropyWithLogits: logits [b, n] and
/// labels [b, n] or [b] -> loss [b].
constexpr dims<1> cross_entropy(const auto& logits, const auto& labels) {
  return {agreed(dim_or(logits, 0), dim_or(labels, 0))};
}
}  // namespace static_rules

/// The window attrs of a Conv2D or pooling node, checked: h and w of strides, ksize (pooling)
/// and dilations (convolution), and whether padding is SAME.
struct window_attrs {
  std::int64_t kh = 1;  ///< window rows (pooling's ksize; 1 for a convolution)
  std::int64_t kw = 1;  ///< window columns
  std::int64_t sh = 1;  ///< row stride
  std::int64_t sw = 1;  ///< column stride
  std::int64_t dh = 1;  ///< row dilation
  std::int64_t dw = 1;  ///< column dilation
  bool same = false;    ///< SAME padding (else VALID)
};

namespace detail {
/// Fails unless dims a and b (either unknown: -1) agree; returns the known one.
inline std::int64_t merge_dim(shape_context& c, std::int64_t a, std::int64_t b, const char* what) {
  if (a >= 0 && b >= 0 && a != b) c.fail(what, " differ (", a, " vs ", b, ")");
  return a >= 0 ? a : b;
}
inline void require_nhwc(shape_context& c) {
  if (c.attr<std::string>("data_format") != "NHWC")
    c.fail("data_format '", c.attr<std::string>("data_format"), "' is not supported; weft's CPU kernels take NHWC");
}
/// The [1, h, w, 1] list attr `name`, h and w at least 1.
inline std::pair<std::int64_t, std::int64_t> spatial_pair(shape_context& c, const char* name) {
  const auto& v = c.attr<std::vector<std::int64_t>>(name);
  if (v.size() != 4 || v[0] != 1 || v[3] != 1 || v[1] < 1 || v[2] < 1)
    c.fail(name, " must be [1, h, w, 1] with h, w >= 1 (NHWC; no batch or depth windows), got ", attr_value(v));
  return {v[1], v[2]};
}
inline bool same_padding(shape_context& c) {
  const auto& p = c.attr<std::string>("padding");
  if (p != "SAME" && p != "VALID") c.fail("padding must be 'SAME' or 'VALID', got '", p, "'");
  return p == "SAME";
}
inline window_attrs conv_window(shape_context& c) {
  require_nhwc(c);
  window_attrs w;
  std::tie(w.sh, w.sw) = spatial_pair(c, "strides");
  std::tie(w.dh, w.dw) = spatial_pair(c, "dilations");
  w.same = same_padding(c);
  return w;
}
inline window_attrs pool_window(shape_context& c) {
  require_nhwc(c);
  window_attrs w;
  std::tie(w.kh, w.kw) = spatial_pair(c, "ksize");
  std::tie(w.sh, w.sw) = spatial_pair(c, "strides");
  w.same = same_padding(c);
  return w;
}
/// [n, oh, ow, depth] for input `in` (rank 4) and a kh x kw window (-1: unknown).
inline partial_shape windowed(shape_context& c, const partial_shape& in, const window_attrs& w, std::int64_t kh,
                              std::int64_t kw, std::int64_t depth) {
  std::int64_t out[2] = {-1, -1};
  const std::int64_t k[2] = {kh, kw}, s[2] = {w.sh, w.sw}, d[2] = {w.dh, w.dw};
  for (int i = 0; i < 2; ++i) {
    if (k[i] < 0) continue;
    auto win = window_of(in[i + 1], k[i], s[i], d[i], w.same);
    if (!win)
      c.fail("the window (", k[i], " with dilation ", d[i], ") is larger than the input's dimension ", i + 1, " (",
             in[i + 1], ") with VALID padding");
    out[i] = win->out;
  }
  return partial_shape{in[0], out[0], out[1], depth};
}
/// Output shape from the constant 4-vector input i (an input's or filter's shape).
inline void sizes_output(shape_context& c, int i, const char* what) {
  require_rank(c, i, 1, what);
  if (c.input(i).rank_known() && c.input(i)[0] >= 0 && c.input(i)[0] != 4)
    c.fail(what, " must hold 4 dims, got shape ", c.input(i));
  if (auto dims = constant_ints(c, i)) {
    for (auto v : *dims)
      if (v < 0) c.fail(what, " has a negative dimension ", v);
    c.set_output(0, partial_shape(*dims));
  } else {
    c.set_output(0, partial_shape::unknown_of_rank(4));
  }
}
/// FusedBatchNormV3 (forward) or FusedBatchNormGradV3: x channels last, rank 2 to 5;
/// the per-channel vectors of length C (the forward's mean and variance may be empty in
/// training with an avg factor of 1).
inline void batch_norm_shapes(shape_context& c, bool forward) {
  detail::require_nhwc(c);
  const dtype t = c.attr<dtype>("T"), u = c.attr<dtype>("U");
  const bool half = t == dtype::float16 || t == dtype::bfloat16;
  if (u != t && !(half && u == dtype::float32))
    c.fail("U (", u, ") must equal T (", t, "), or be float32 where T is float16 or bfloat16");
  const int xi = forward ? 0 : 1;
  const partial_shape& x = c.input(xi);
  if (x.rank_known() && (x.rank() < 2 || x.rank() > 5))
    c.fail("x must have rank 2 to 5 (channels last), got shape ", x);
  if (!forward) {
    const partial_shape& dy = c.input(0);
    if (dy.rank_known() && x.rank_known() && !shapes_compatible(dy, x))
      c.fail("y_backprop ", dy, " and x ", x, " differ in shape");
  }
  std::int64_t channels = x.rank_known() ? x[x.rank() - 1] : unknown_dim;
  const bool may_be_empty = forward && c.attr<bool>("is_training") && c.attr<double>("exponential_avg_factor") == 1.0;
  const char* names_forward[] = {"x", "scale", "offset", "mean", "variance"};
  const char* names_grad[] = {"y_backprop", "x", "scale", "reserve_space_1", "reserve_space_2"};
  for (int i = forward ? 1 : 2; i < 5; ++i) {
    const char* what = forward ? names_forward[i] : names_grad[i];
    require_rank(c, i, 1, what);
    const partial_shape& v = c.input(i);
    if (!v.rank_known() || (may_be_empty && i >= 3 && v[0] == 0)) continue;
    const std::string pair = std::string("x's channel count and the length of ") + what;
    channels = merge_dim(c, channels, v[0], pair.c_str());
  }
  if (forward) {
    c.set_output(0, x);
    for (int o = 1; o < 5; ++o) c.set_output(o, partial_shape{channels});
    c.set_output(5, partial_shape{0});
  } else {
    c.set_output(0, x);
    c.set_output(1, partial_shape{channels});
    c.set_output(2, partial_shape{channels});
    c.set_output(3, partial_shape{0});
    c.set_output(4, partial_shape{0});
  }
}
}  // namespace detail

/// The op a session puts in place of a ReluGrad whose gradients are a MaxPoolGrad's output
/// that nothing else reads and whose features are that MaxPoolGrad's orig_input
/// (graph/passes/fuse_conv.hpp): each window's gradient to its first maximum where that
/// maximum is above 0, in one pass over the input instead of two.
inline constexpr const char* fused_max_pool_grad_relu_grad_op = "_FusedMaxPoolGradReluGrad";

/// The op a session puts in place of Relu(BiasAdd(Conv2D(input, filter), bias)), or of the
/// BiasAdd alone, where nothing else reads the inner nodes (graph/passes/fuse_conv.hpp):
/// the bias (and ReLU: relu) applied to each row of the convolution's output as it is
/// computed, instead of one or two more passes over it.
inline constexpr const char* fused_conv2d_bias_add_op = "_FusedConv2DBiasAdd";

/// The nn family's op definitions (registered by register_nn_ops()).
std::vector<op_def> nn_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> nn_op_defs() {
  std::vector<op_def> defs;
  defs.push_back(op_def_builder("BiasAdd")
                     .input("value: T")
                     .input("bias: T")
                     .output("output: T")
                     .attr(real_float_type_attr)
                     .attr("data_format: string = 'NHWC'")
                     .shape_fn([](shape_context& c) {
                       detail::require_nhwc(c);
                       require_rank_at_least(c, 0, 2, "value");
                       require_rank(c, 1, 1, "bias");
                       partial_shape out = c.input(0);
                       if (out.rank_known() && c.input(1).rank_known()) {
                         auto dims = out.dims();
                         dims.back() = detail::merge_dim(c, dims.back(), c.input(1)[0],
                                                         "the bias length and value's last dimension");
                         out = partial_shape(dims);
                       }
                       c.set_output(0, out);
                     })
                     .build());
  defs.push_back(op_def_builder("BiasAddGrad")
                     .input("out_backprop: T")
                     .output("output: T")
                     .attr(real_float_type_attr)
                     .attr("data_format: string = 'NHWC'")
                     .shape_fn([](shape_context& c) {
                       detail::require_nhwc(c);
                       require_rank_at_least(c, 0, 2, "out_backprop");
                       const auto& in = c.input(0);
                       c.set_output(0, in.rank_known() ? partial_shape{in[in.rank() - 1]} : partial_shape::unknown_of_rank(1));
                     })
                     .build());
  for (const char* name : {"Softmax", "LogSoftmax"})
    defs.push_back(op_def_builder(name)
                       .input("logits: T")
                       .output(std::string_view(name) == "Softmax" ? "softmax: T" : "logsoftmax: T")
                       .attr(real_float_type_attr)
                       .shape_fn([](shape_context& c) {
                         require_rank_at_least(c, 0, 1, "logits");
                         c.set_output(0, c.input(0));
                       })
                       .build());
  defs.push_back(op_def_builder("SoftmaxCrossEntropyWithLogits")
                     .input("features: T")
                     .input("labels: T")
                     .output("loss: T")
                     .output("backprop: T")
                     .attr(real_float_type_attr)
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 2, "features");
                       require_rank(c, 1, 2, "labels");
                       partial_shape f = c.input(0), l = c.input(1);
                       if (!f.rank_known()) f = partial_shape::unknown_of_rank(2);
                       if (!l.rank_known()) l = partial_shape::unknown_of_rank(2);
                       auto b = detail::merge_dim(c, f[0], l[0], "the batch sizes of features and labels");
                       auto n = detail::merge_dim(c, f[1], l[1], "the class counts of features and labels");
                       c.set_output(0, partial_shape{b});
                       c.set_output(1, partial_shape{b, n});
                     })
                     .build());
  defs.push_back(op_def_builder("SparseSoftmaxCrossEntropyWithLogits")
                     .input("features: T")
                     .input("labels: Tlabels")
                     .output("loss: T")
                     .output("backprop: T")
                     .attr(real_float_type_attr)
                     .attr("Tlabels: {int32, int64} = int64")
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 2, "features");
                       require_rank(c, 1, 1, "labels");
                       partial_shape f = c.input(0);
                       if (!f.rank_known()) f = partial_shape::unknown_of_rank(2);
                       auto b = c.input(1).rank_known()
                                    ? detail::merge_dim(c, f[0], c.input(1)[0], "the batch sizes of features and labels")
                                    : f[0];
                       c.set_output(0, partial_shape{b});
                       c.set_output(1, partial_shape{b, f[1]});
                     })
                     .build());
  defs.push_back(op_def_builder("L2Loss")
                     .input("t: T")
                     .output("output: T")
                     .attr(real_float_type_attr)
                     .shape_fn(scalar_shape)
                     .build());
  // Convolution and pooling.
  auto conv_attrs = [](op_def_builder b) {
    return b.attr(real_float_type_attr)
        .attr("strides: list(int)")
        .attr("padding: string")
        .attr("data_format: string = 'NHWC'")
        .attr("dilations: list(int) = [1, 1, 1, 1]");
  };
  auto pool_attrs = [](op_def_builder b) {
    return b.attr(real_float_type_attr)
        .attr("ksize: list(int)")
        .attr("strides: list(int)")
        .attr("padding: string")
        .attr("data_format: string = 'NHWC'");
  };
  // Conv2D's output shape (for _FusedConv2DBiasAdd too); its output's channels.
  const auto conv2d_shape = [](shape_context& c) {
    const window_attrs w = detail::conv_window(c);
    require_rank(c, 0, 4, "input");
    require_rank(c, 1, 4, "filter");
    partial_shape f = c.input(1);
    if (!f.rank_known()) f = partial_shape::unknown_of_rank(4);
    partial_shape in = c.input(0);
    if (!in.rank_known()) in = partial_shape::unknown_of_rank(4);
    detail::merge_dim(c, in[3], f[2], "the input's channels and the filter's input channels");
    if (f[0] == 0 || f[1] == 0) c.fail("the filter's height and width must be positive");
    c.set_output(0, detail::windowed(c, in, w, f[0], f[1], f[3]));
    return f[3];
  };
  const auto conv2d_flops = [](const op_cost_args& c) {  // a multiply-add per output element and filter tap
    return 2 * op_cost_args::elements(c.outputs[0]) * c.input_dim(1, 0) * c.input_dim(1, 1) * c.input_dim(1, 2);
  };
  defs.push_back(conv_attrs(op_def_builder("Conv2D").input("input: T").input("filter: T").output("output: T"))
                     .shape_fn([conv2d_shape](shape_context& c) { conv2d_shape(c); })
                     .flops(conv2d_flops)
                     .build());
  // Conv2D and the BiasAdd (and Relu) after it as one node; only a session's own copy of a
  // graph holds it.
  defs.push_back(conv_attrs(op_def_builder(fused_conv2d_bias_add_op)
                                .input("input: T")
                                .input("filter: T")
                                .input("bias: T")
                                .output("output: T")
                                .attr("relu: bool = false"))
                     .shape_fn([conv2d_shape](shape_context& c) {
                       const std::int64_t k = conv2d_shape(c);
                       require_rank(c, 2, 1, "bias");
                       if (c.input(2).rank_known()) detail::merge_dim(c, k, c.input(2)[0], "the filter's output channels and the bias length");
                     })
                     .flops([conv2d_flops](const op_cost_args& c) {  // and the bias and ReLU per element
                       return conv2d_flops(c) + 2 * op_cost_args::elements(c.outputs[0]);
                     })
                     .build());
  defs.push_back(conv_attrs(op_def_builder("Conv2DBackpropInput")
                                .input("input_sizes: Tsizes")
                                .input("filter: T")
                                .input("out_backprop: T")
                                .output("output: T")
                                .attr("Tsizes: {int32, int64} = int32"))
                     .shape_fn([](shape_context& c) {
                       detail::conv_window(c);
                       require_rank(c, 1, 4, "filter");
                       require_rank(c, 2, 4, "out_backprop");
                       detail::sizes_output(c, 0, "input_sizes");
                     })
                     .flops([](const op_cost_args& c) {  // the forward convolution's count
                       return 2 * op_cost_args::elements(c.inputs[2]) * c.input_dim(1, 0) * c.input_dim(1, 1) *
                              c.input_dim(1, 2);
                     })
                     .build());
  defs.push_back(conv_attrs(op_def_builder("Conv2DBackpropFilter")
                                .input("input: T")
                                .input("filter_sizes: Tsizes")
                                .input("out_backprop: T")
                                .output("output: T")
                                .attr("Tsizes: {int32, int64} = int32"))
                     .shape_fn([](shape_context& c) {
                       detail::conv_window(c);
                       require_rank(c, 0, 4, "input");
                       require_rank(c, 2, 4, "out_backprop");
                       detail::sizes_output(c, 1, "filter_sizes");
                     })
                     .flops([](const op_cost_args& c) {  // the forward convolution's count
                       return 2 * op_cost_args::elements(c.inputs[2]) * c.output_dim(0, 0) * c.output_dim(0, 1) *
                              c.output_dim(0, 2);
                     })
                     .build());
  // A pooling op or its gradient visits each window tap of each pooled element once: the
  // pooled side is its smallest 4-D tensor.
  const auto pool_flops = [](const op_cost_args& c) {
    double taps = 1;
    for (auto d : get_attr<std::vector<std::int64_t>>(c.attrs, "ksize", "pooling")) taps *= static_cast<double>(d);
    double pooled = -1;
    for (const auto* side : {&c.inputs, &c.outputs})
      for (const auto& dims : *side)
        if (dims.size() == 4 && (pooled < 0 || op_cost_args::elements(dims) < pooled)) pooled = op_cost_args::elements(dims);
    return std::max(pooled, 0.0) * taps;
  };
  for (const char* name : {"MaxPool", "AvgPool"})
    defs.push_back(pool_attrs(op_def_builder(name).input(std::string_view(name) == "MaxPool" ? "input: T" : "value: T").output("output: T"))
                       .shape_fn([](shape_context& c) {
                         const window_attrs w = detail::pool_window(c);
                         require_rank(c, 0, 4, "input");
                         partial_shape in = c.input(0);
                         if (!in.rank_known()) in = partial_shape::unknown_of_rank(4);
                         c.set_output(0, detail::windowed(c, in, w, w.kh, w.kw, in[3]));
                       })
                       .flops(pool_flops)
                       .build());
  // MaxPoolGrad's output has orig_input's shape, MaxPoolGradGrad's orig_output's;
  // _FusedMaxPoolGradReluGrad is MaxPoolGrad and the ReluGrad that masks it by the pool's
  // input as one node (a mask per element more).
  for (const char* name : {"MaxPoolGrad", "MaxPoolGradGrad", fused_max_pool_grad_relu_grad_op}) {
    const int like = std::string_view(name) == "MaxPoolGradGrad" ? 1 : 0;
    const bool masked = std::string_view(name) == fused_max_pool_grad_relu_grad_op;
    defs.push_back(pool_attrs(op_def_builder(name)
                                  .input("orig_input: T")
                                  .input("orig_output: T")
                                  .input("grad: T")
                                  .output("output: T"))
                       .shape_fn([like](shape_context& c) {
                         detail::pool_window(c);
                         for (int i = 0; i < 3; ++i) require_rank(c, i, 4, i == 0 ? "orig_input" : i == 1 ? "orig_output" : "grad");
                         c.set_output(0, c.input(like).rank_known() ? c.input(like) : partial_shape::unknown_of_rank(4));
                       })
                       .flops([pool_flops, masked](const op_cost_args& c) {
                         return pool_flops(c) + (masked ? op_cost_args::elements(c.outputs[0]) : 0.0);
                       })
                       .build());
  }
  defs.push_back(pool_attrs(op_def_builder("AvgPoolGrad")
                                .input("orig_input_shape: Tsizes")
                                .input("grad: T")
                                .output("output: T")
                                .attr("Tsizes: {int32, int64} = int32"))
                     .shape_fn([](shape_context& c) {
                       detail::pool_window(c);
                       require_rank(c, 1, 4, "grad");
                       detail::sizes_output(c, 0, "orig_input_shape");
                     })
                     .flops(pool_flops)
                     .build());
  defs.push_back(op_def_builder("Dropout")
                     .input("x: T")
                     .input("rate: T")
                     .output("output: T")
                     .output("mask: T")
                     .attr(real_float_type_attr)
                     .attr("seed: int = 0")
                     .attr("seed2: int = 0")
                     .stateful()
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 1, 0, "rate");
                       c.set_output(0, c.input(0));
                       c.set_output(1, c.input(0));
                     })
                     .build());
  // Batch normalization (the header's comment says what it computes).
  auto batch_norm_common = [](op_def_builder b) {
    return b.attr("T: {float16, bfloat16, float32, float64}")
        .attr("U: {float32, float64}")
        .attr("epsilon: float = 0.0001")
        .attr("data_format: string = 'NHWC'")
        .attr("is_training: bool = true");
  };
  defs.push_back(batch_norm_common(op_def_builder("FusedBatchNormV3")
                                       .input("x: T")
                                       .input("scale: U")
                                       .input("offset: U")
                                       .input("mean: U")
                                       .input("variance: U")
                                       .output("y: T")
                                       .output("batch_mean: U")
                                       .output("batch_variance: U")
                                       .output("reserve_space_1: U")
                                       .output("reserve_space_2: U")
                                       .output("reserve_space_3: U"))
                     .attr("exponential_avg_factor: float = 1.0")
                     .shape_fn([](shape_context& c) {
                       detail::batch_norm_shapes(c, true);
                     })
                     .build());
  defs.push_back(batch_norm_common(op_def_builder("FusedBatchNormGradV3")
                                       .input("y_backprop: T")
                                       .input("x: T")
                                       .input("scale: U")
                                       .input("reserve_space_1: U")
                                       .input("reserve_space_2: U")
                                       .input("reserve_space_3: U")
                                       .output("x_backprop: T")
                                       .output("scale_backprop: U")
                                       .output("offset_backprop: U")
                                       .output("reserve_space_4: U")
                                       .output("reserve_space_5: U"))
                     .shape_fn([](shape_context& c) {
                       detail::batch_norm_shapes(c, false);
                     })
                     .build());
  return defs;
}
#endif

/// Adds the NN ops to the global registry, once; registering the family's kernels calls it.
inline void register_nn_ops() { op_registry::global().add_family("nn", nn_op_defs); }

}  // namespace weft::ops

// ---- gradient rules (framework/gradient_rule.hpp), each written once over a value type ----

namespace weft::gradients {

/// BiasAdd's gradient: the value gets d, the bias d summed over every other dim.
struct bias_add_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {a.d(), bias_add_grad(a.d())}; }
};

/// BiasAddGrad's gradient: BiasAddGrad sums rows, so its gradient repeats them.
struct bias_add_grad_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {broadcast_like(a.d(), a.x[0])}; }
};

/// The gradient of softmax at y = softmax(x) for output gradient d: (d - sum(d y)) y.
template <class V>
V softmax_backward(const V& d, const V& y) {
  return (d - reduce_sum_keep(d * y, -1)) * y;
}

/// Softmax's gradient (softmax_backward).
struct softmax_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {softmax_backward(a.d(), a.y[0])}; }
};

/// LogSoftmax's gradient: d - sum(d) softmax(x), with softmax(x) = exp(y).
struct log_softmax_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {a.d() - reduce_sum_keep(a.d(), -1) * exp(a.y[0])}; }
};

/// (Sparse)SoftmaxCrossEntropyWithLogits(features, labels) -> (loss, backprop). Through the
/// loss: the features get dloss * backprop and dense labels dloss * -log_softmax(features);
/// through backprop = softmax(features) - labels, softmax's gradient and minus the labels'.
/// As in TensorFlow, the features' gradient through the loss assumes that each row of
/// labels sums to 1 (a distribution), which makes it softmax - labels.
template <bool Dense>
struct softmax_cross_entropy_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V& f = a.x[0];
    std::optional<V> df, dl;
    if (a.dy[0]) {
      V d = keep_reduced(*a.dy[0], f, int_constant(f, -1));
      df = d * a.y[1];
      if (Dense) dl = d * -log_softmax(f);
    }
    if (a.dy[1]) {
      const V& g = *a.dy[1];
      V t = softmax_backward(g, softmax(f));
      df = df ? *df + t : t;
      if (Dense) dl = dl ? *dl - g : -g;
    }
    return {df, dl};
  }
};

/// L2Loss's gradient: x times d.
struct l2_loss_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {a.x[0] * a.d()}; }
};

/// Convolution and pooling. Conv2D is bilinear in input and filter, and its two gradient
/// ops are the same product with another operand left out, so each of the three ops'
/// gradients is one of the others.
struct conv2d_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const attr_map w = window_attr_map(a.n);
    const V &x = a.x[0], &f = a.x[1];
    return {conv2d_backprop_input(shape_tensor(x), f, a.d(), w), conv2d_backprop_filter(x, shape_tensor(f), a.d(), w)};
  }
};

/// Conv2DBackpropInput's gradient ((input_sizes, filter, out_backprop) -> d input): the filter
/// gets Conv2DBackpropFilter, out_backprop a Conv2D.
struct conv2d_backprop_input_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const attr_map w = window_attr_map(a.n);
    const V &f = a.x[1], &dy = a.x[2];
    return {std::nullopt, conv2d_backprop_filter(a.d(), shape_tensor(f), dy, w), conv2d(a.d(), f, w)};
  }
};

/// Conv2DBackpropFilter's gradient ((input, filter_sizes, out_backprop) -> d filter): the input
/// gets Conv2DBackpropInput, out_backprop a Conv2D.
struct conv2d_backprop_filter_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const attr_map w = window_attr_map(a.n);
    const V &x = a.x[0], &dy = a.x[2];
    return {conv2d_backprop_input(shape_tensor(x), a.d(), dy, w), std::nullopt, conv2d(x, a.d(), w)};
  }
};

/// MaxPool's gradient: MaxPoolGrad.
struct max_pool_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {max_pool_grad(a.x[0], a.y[0], a.d(), window_attr_map(a.n))}; }
};

/// MaxPoolGrad is linear in its grad and MaxPoolGradGrad is its adjoint (and the other way
/// round); both are piecewise constant in orig_input and orig_output (no gradient there,
/// as in TensorFlow).
template <bool Second>
struct max_pool_grad_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const attr_map w = window_attr_map(a.n);
    return {std::nullopt, std::nullopt,
            Second ? max_pool_grad(a.x[0], a.x[1], a.d(), w) : max_pool_grad_grad(a.x[0], a.x[1], a.d(), w)};
  }
};

/// AvgPool's gradient: AvgPoolGrad.
struct avg_pool_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {avg_pool_grad(shape_tensor(a.x[0]), a.d(), window_attr_map(a.n))}; }
};

/// AvgPoolGrad's gradient: AvgPoolGrad is AvgPool's adjoint, so AvgPool is its gradient.
struct avg_pool_grad_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {std::nullopt, avg_pool(a.d(), window_attr_map(a.n))}; }
};

/// Dropout's gradient: output = x * mask, so x gets d * mask; the mask does not depend on x.
struct dropout_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    if (!a.dy[0]) return {std::nullopt, std::nullopt};
    return {*a.dy[0] * a.y[1], std::nullopt};
  }
};

/// FusedBatchNormV3: x, scale and offset get FusedBatchNormGradV3's three results (from the
/// gradient of y; none flows back through the batch statistics, as in TensorFlow); the mean
/// and variance inputs get none.
struct fused_batch_norm_rule {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    if (!a.dy[0]) return {std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
    attr_map attrs;
    for (const char* k : {"epsilon", "data_format", "is_training"})
      if (const attr_value* v = a.n.attrs().find(k)) attrs.set(k, *v);
    const auto d = fused_batch_norm_grad(*a.dy[0], a.x[0], a.x[1], a.y[3], a.y[4], a.y[5], attrs);
    return {d[0], d[1], d[2], std::nullopt, std::nullopt};
  }
};

}  // namespace weft::gradients

namespace weft::ops {

/// The ops of this family as C++ types (framework/kernel_for.hpp), each with its gradient
/// rule where it has one.
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(BiasAdd, nn, gradients::bias_add_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(BiasAddGrad, nn, gradients::bias_add_grad_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Softmax, nn, gradients::softmax_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(LogSoftmax, nn, gradients::log_softmax_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(SoftmaxCrossEntropyWithLogits, nn, gradients::softmax_cross_entropy_rule<true>)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(SparseSoftmaxCrossEntropyWithLogits, nn, gradients::softmax_cross_entropy_rule<false>)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(L2Loss, nn, gradients::l2_loss_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Conv2D, nn, gradients::conv2d_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Conv2DBackpropInput, nn, gradients::conv2d_backprop_input_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Conv2DBackpropFilter, nn, gradients::conv2d_backprop_filter_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(MaxPool, nn, gradients::max_pool_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(MaxPoolGrad, nn, gradients::max_pool_grad_rule<false>)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(MaxPoolGradGrad, nn, gradients::max_pool_grad_rule<true>)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(AvgPool, nn, gradients::avg_pool_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(AvgPoolGrad, nn, gradients::avg_pool_grad_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Dropout, nn, gradients::dropout_rule)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(FusedBatchNormV3, nn, gradients::fused_batch_norm_rule)
WEFT_DETAIL_OP_TYPE(FusedBatchNormGradV3, nn)
/// _FusedConv2DBiasAdd as a C++ type (of the nn family): a session's rewrite adds it
/// (graph/passes/fuse_conv.hpp), no program does.
struct FusedConv2DBiasAdd {
  static constexpr const char* name = fused_conv2d_bias_add_op;  ///< "_FusedConv2DBiasAdd"
  /// The full CPU kernel registry has its kernel.
  static constexpr bool in_cpu_registry = true;
  /// Registers its family's op definitions.
  static void define() { register_nn_ops(); }
};
/// _FusedMaxPoolGradReluGrad as a C++ type (of the nn family): a session's rewrite adds it
/// (graph/passes/fuse_conv.hpp), no program does.
struct FusedMaxPoolGradReluGrad {
  static constexpr const char* name = fused_max_pool_grad_relu_grad_op;  ///< "_FusedMaxPoolGradReluGrad"
  /// The full CPU kernel registry has its kernel.
  static constexpr bool in_cpu_registry = true;
  /// Registers its family's op definitions.
  static void define() { register_nn_ops(); }
};
namespace families {  // the whole family (its kernels for every dtype, on each device type)
/// The nn family as a C++ type: use_kernels<ops::families::nn>() registers its ops and kernels.
struct nn {
  static constexpr const char* name = "nn";  ///< the family's name
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using types = type_list<BiasAdd, BiasAddGrad, Softmax, LogSoftmax, SoftmaxCrossEntropyWithLogits, SparseSoftmaxCrossEntropyWithLogits, L2Loss, Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter, MaxPool, MaxPoolGrad, MaxPoolGradGrad, AvgPool, AvgPoolGrad, Dropout, FusedBatchNormV3, FusedBatchNormGradV3, FusedConv2DBiasAdd, FusedMaxPoolGradReluGrad>;  ///< its op types
  /// Registers the family's op definitions.
  static void define() { register_nn_ops(); }
};
}  // namespace families

}  // namespace weft::ops
