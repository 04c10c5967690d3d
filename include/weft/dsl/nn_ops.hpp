/// @file
/// The DSL's neural-network ops (ops/nn_ops.hpp as typed expressions): bias_add, softmax,
/// log_softmax, softmax_cross_entropy_with_logits, sparse_softmax_cross_entropy_with_logits,
/// l2_loss, conv2d, max_pool, avg_pool, dropout and fused_batch_norm. Images are NHWC and filters [height,
/// width, in, out], as TensorFlow's defaults. Strides, window sizes, dilations and the
/// padding are template arguments, so the output's static shape is computed at compile time
/// and static dims (ranks, channels, batch sizes, classes) are checked there; dyn dims are
/// checked at run time by the graph's shape functions and the kernels.
///
///   auto h = max_pool(relu(bias_add(conv2d(images, filter, strides<1, 1>, same), b)),
///                     window<2, 2>, strides<2, 2>, valid);              // [dyn, 14, 14, 16]
///   auto loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(logits, labels));
///
/// Lowering an op registers its kernel and the kernels of its gradient for its dtype only.
/// Every op here has a gradient rule (graph/gradient_rules.hpp), so grad() and minimize()
/// differentiate through them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <weft/dsl/array_ops.hpp>
#include <weft/dsl/ops.hpp>
#include <weft/ops/nn_ops.hpp>

namespace weft {

namespace check {
WEFT_DETAIL_SUPPORT_CHECK(nn_dtype, "weft::nn: the dtype must be float16, bfloat16, float or double");
WEFT_DETAIL_TYPE_CHECK(nn_dtypes, "weft::nn: operands have different dtypes");
WEFT_DETAIL_DIM_CHECK(bias_add_rank, "weft::bias_add: the value's rank is below 2 or the bias is not a vector");
WEFT_DETAIL_DIM_CHECK(bias_add_length, "weft::bias_add: the bias length differs from the value's last dimension");
WEFT_DETAIL_DIM_CHECK(softmax_rank, "weft::softmax: the logits' rank is below 1");
WEFT_DETAIL_DIM_CHECK(xent_rank, "weft::softmax_cross_entropy_with_logits: logits and labels must be matrices [batch, classes]");
WEFT_DETAIL_DIM_CHECK(xent_dims, "weft::softmax_cross_entropy_with_logits: logits and labels have different shapes");
WEFT_DETAIL_DIM_CHECK(sparse_xent_rank,
                      "weft::sparse_softmax_cross_entropy_with_logits: logits must be [batch, classes] and labels [batch]");
WEFT_DETAIL_DIM_CHECK(sparse_xent_batch,
                      "weft::sparse_softmax_cross_entropy_with_logits: logits and labels have different batch sizes");
WEFT_DETAIL_SUPPORT_CHECK(sparse_xent_labels, "weft::sparse_softmax_cross_entropy_with_logits: labels must be int32 or int64");
WEFT_DETAIL_DIM_CHECK(conv2d_rank, "weft::conv2d: input and filter must have rank 4 (NHWC; height, width, in, out)");
WEFT_DETAIL_DIM_CHECK(conv2d_channels, "weft::conv2d: the input's channels differ from the filter's input channels");
WEFT_DETAIL_DIM_CHECK(window_count, "weft::conv2d/pool: strides, window and dilations take two values (height, width)");
WEFT_DETAIL_DIM_CHECK(window_too_large, "weft::conv2d/pool: with VALID padding the window is larger than the input");
WEFT_DETAIL_DIM_CHECK(pool_rank, "weft::max_pool/avg_pool: the input must have rank 4 (NHWC)");
WEFT_DETAIL_DIM_CHECK(dropout_rate_rank, "weft::dropout: the rate must be a scalar");
WEFT_DETAIL_SUPPORT_CHECK(batch_norm_dtype, "weft::fused_batch_norm: x's dtype must be float16, bfloat16, float or double");
WEFT_DETAIL_TYPE_CHECK(batch_norm_statistics_dtype,
                       "weft::fused_batch_norm: scale, offset, mean and variance must have x's dtype, or float where x is float16 or bfloat16");
WEFT_DETAIL_DIM_CHECK(batch_norm_rank, "weft::fused_batch_norm: x must have rank 2 to 5 (channels last), the others rank 1");
WEFT_DETAIL_DIM_CHECK(batch_norm_channels, "weft::fused_batch_norm: a per-channel input's length differs from x's channels");
}  // namespace check

/// Padding of a convolution or a pool: `same` (output size ceil(in / stride)) or `valid`
/// (only windows inside the input).
template <bool Same>
struct padding_t {
  static constexpr bool is_same = Same;  ///< SAME (else VALID)
  static constexpr const char* name = Same ? "SAME" : "VALID";  ///< the padding attr's value
};
inline constexpr padding_t<true> same{};    ///< SAME padding
inline constexpr padding_t<false> valid{};  ///< VALID padding
/// Two values (height, width): strides<1, 1>, window<2, 2>, dilations<2, 2>.
template <std::int64_t... V>
inline constexpr index_list<V...> strides{};
/// A pool's window (height, width): window<2, 2>.
template <std::int64_t... V>
inline constexpr index_list<V...> window{};
/// A convolution's dilations (height, width): dilations<2, 2>.
template <std::int64_t... V>
inline constexpr index_list<V...> dilations{};

namespace detail {

template <class T>
inline constexpr bool nn_float = in_list<T, type_list<half, bfloat16, float, double>>::value;

/// Asks for the kernels of Ops for dtype T (an nn op and the ops its gradient rule adds).
template <class T, class... Ops>
void use_nn_kernels() {
  (use_kernels<Ops, T>(), ...);
}

/// An op of ops/nn_ops.hpp: node `name`(operands; attrs), output `port`. prepare() runs
/// `kernels`, which registers the op's kernel and its gradient's for the dtype.
struct nn_op {
  static constexpr bool elementwise = false;  ///< whether fusion may merge it with its elementwise neighbours
  const char* name;
  attr_map attrs;
  void (*kernels)();
  int port = 0;
  /// Asks for the kernels the node needs (where a program compiles its own).
  template <class = void>  // instantiated where the kernels are visible, not in this header
  void prepare() const {
    use_kernels<ops::families::core>();
    kernels();
  }
  output lower(lowering& cx, std::vector<output> inputs, const scope_info* scope) const {
    output o = cx.add(name, std::move(inputs), attrs, scope);
    o.port = port;
    return o;
  }
};

/// Kernel sets: the op and what its gradient rule adds.
template <class T>
void bias_add_kernels() {
  use_nn_kernels<T, ops::BiasAdd, ops::BiasAddGrad>();
}
template <class T, bool Log>
void softmax_kernels() {
  use_nn_kernels<T, std::conditional_t<Log, ops::LogSoftmax, ops::Softmax>>();
}
template <class T>  // the gradient through the backprop output uses Softmax, the labels' LogSoftmax
void xent_kernels() {
  use_nn_kernels<T, ops::SoftmaxCrossEntropyWithLogits, ops::Softmax, ops::LogSoftmax>();
}
template <class T>
void sparse_xent_kernels() {
  use_nn_kernels<T, ops::SparseSoftmaxCrossEntropyWithLogits, ops::Softmax>();
}
template <class T>
void l2_loss_kernels() {
  use_nn_kernels<T, ops::L2Loss>();
}
template <class T>
void conv2d_kernels() {
  use_nn_kernels<T, ops::Conv2D, ops::Conv2DBackpropInput, ops::Conv2DBackpropFilter>();
}
template <class T, bool Max>
void pool_kernels() {
  if constexpr (Max)
    use_nn_kernels<T, ops::MaxPool, ops::MaxPoolGrad, ops::MaxPoolGradGrad>();
  else
    use_nn_kernels<T, ops::AvgPool, ops::AvgPoolGrad>();
}
template <class T>
void dropout_kernels() {
  use_nn_kernels<T, ops::Dropout>();
}
template <class T>
void batch_norm_kernels() {
  use_nn_kernels<T, ops::FusedBatchNormV3, ops::FusedBatchNormGradV3>();
}

/// {effective window, input} when a VALID window is larger than a static input dim, else {0, 0}.
constexpr std::array<std::int64_t, 2> window_fits(std::int64_t in, std::int64_t k, std::int64_t dilation, bool same) {
  const std::int64_t effective = (k - 1) * dilation + 1;
  return !same && in >= 0 && k >= 0 && effective > in ? std::array<std::int64_t, 2>{effective, in}
                                                      : std::array<std::int64_t, 2>{0, 0};
}

template <class T>
constexpr bool check_nn_dtype() {
  return check::nn_dtype<T, nn_float<T>>::value;
}

}  // namespace detail

/// bias_add(x, b): x + b along x's last dimension (TensorFlow's BiasAdd, NHWC).
template <expression X, expression B>
auto bias_add(const X& x, const B& b) {
  using SX = shape_of<X>;
  using SB = shape_of<B>;
  using T = value_type_of<X>;
  (void)check::nn_dtypes<T, value_type_of<B>>::value;
  (void)detail::check_nn_dtype<T>();
  (void)check::bias_add_rank<(SX::rank >= 2 && SB::rank == 1) ? 1 : 0, 1>::value;
  constexpr auto n = detail::static_pair(detail::dim_or(SX::values, SX::rank - 1), detail::dim_or(SB::values, 0));
  (void)check::bias_add_length<n[0], n[1]>::value;
  return op_expr<detail::nn_op, T, SX, X, B>({"BiasAdd", {}, &detail::bias_add_kernels<T>}, x, b);
}

namespace detail {
template <bool Log, class X>
auto softmax(const X& x) {
  using T = value_type_of<X>;
  (void)check_nn_dtype<T>();
  (void)check::softmax_rank<(shape_of<X>::rank >= 1 ? 1 : 0), 1>::value;
  return op_expr<nn_op, T, shape_of<X>, X>({Log ? "LogSoftmax" : "Softmax", {}, &softmax_kernels<T, Log>}, x);
}
}  // namespace detail

/// softmax(x), log_softmax(x): over the last dimension.
template <expression X>
auto softmax(const X& x) {
  return detail::softmax<false>(x);
}
/// log(softmax(x)) over the last dimension, computed stably.
template <expression X>
auto log_softmax(const X& x) {
  return detail::softmax<true>(x);
}

/// softmax_cross_entropy_with_logits(logits, labels): per row of [batch, classes], the
/// cross-entropy between the probability rows `labels` and softmax(logits); [batch].
template <expression L, expression Y>
auto softmax_cross_entropy_with_logits(const L& logits, const Y& labels) {
  using SL = shape_of<L>;
  using SY = shape_of<Y>;
  using T = value_type_of<L>;
  (void)check::nn_dtypes<T, value_type_of<Y>>::value;
  (void)detail::check_nn_dtype<T>();
  (void)check::xent_rank<(SL::rank == 2 && SY::rank == 2) ? 1 : 0, 1>::value;
  constexpr auto b = detail::static_pair(detail::dim_or(SL::values, 0), detail::dim_or(SY::values, 0));
  constexpr auto c = detail::static_pair(detail::dim_or(SL::values, 1), detail::dim_or(SY::values, 1));
  (void)check::xent_dims<b[0], b[1]>::value;
  (void)check::xent_dims<c[0], c[1]>::value;
  using S = detail::shape_from_array_t<ops::static_rules::cross_entropy(SL::values, SY::values)>;
  return op_expr<detail::nn_op, T, S, L, Y>(
      {"SoftmaxCrossEntropyWithLogits", {}, &detail::xent_kernels<T>}, logits, labels);
}

/// sparse_softmax_cross_entropy_with_logits(logits, labels): labels are class indices
/// ([batch], int32 or int64); [batch]. A label outside [0, classes) is a run-time error.
template <expression L, expression Y>
auto sparse_softmax_cross_entropy_with_logits(const L& logits, const Y& labels) {
  using SL = shape_of<L>;
  using SY = shape_of<Y>;
  using T = value_type_of<L>;
  using I = value_type_of<Y>;
  (void)detail::check_nn_dtype<T>();
  (void)check::sparse_xent_labels<I, std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>>::value;
  (void)check::sparse_xent_rank<(SL::rank == 2 && SY::rank == 1) ? 1 : 0, 1>::value;
  constexpr auto b = detail::static_pair(detail::dim_or(SL::values, 0), detail::dim_or(SY::values, 0));
  (void)check::sparse_xent_batch<b[0], b[1]>::value;
  using S = detail::shape_from_array_t<ops::static_rules::cross_entropy(SL::values, SY::values)>;
  return op_expr<detail::nn_op, T, S, L, Y>(
      {"SparseSoftmaxCrossEntropyWithLogits", {{"Tlabels", dtype_of<I>}}, &detail::sparse_xent_kernels<T>}, logits, labels);
}

/// l2_loss(x) = sum(x^2) / 2, a scalar.
template <expression X>
auto l2_loss(const X& x) {
  using T = value_type_of<X>;
  (void)detail::check_nn_dtype<T>();
  return op_expr<detail::nn_op, T, static_shape<>, X>({"L2Loss", {}, &detail::l2_loss_kernels<T>}, x);
}

/// conv2d(input, filter, strides<sh, sw>, same or valid[, dilations<dh, dw>]): input
/// [batch, height, width, in], filter [fh, fw, in, out]; [batch, oh, ow, out].
template <expression X, expression F, std::int64_t... St, bool Same, std::int64_t... Di>
auto conv2d(const X& x, const F& f, index_list<St...>, padding_t<Same>, index_list<Di...>) {
  using SX = shape_of<X>;
  using SF = shape_of<F>;
  using T = value_type_of<X>;
  (void)check::nn_dtypes<T, value_type_of<F>>::value;
  (void)detail::check_nn_dtype<T>();
  (void)check::conv2d_rank<(SX::rank == 4 && SF::rank == 4) ? 1 : 0, 1>::value;
  (void)check::window_count<sizeof...(St), 2>::value;
  (void)check::window_count<sizeof...(Di), 2>::value;
  static_assert(((St > 0) && ...) && ((Di > 0) && ...), "weft::conv2d: strides and dilations must be positive");
  constexpr std::array<std::int64_t, 2> s{St...}, d{Di...};
  constexpr auto c = detail::static_pair(detail::dim_or(SX::values, 3), detail::dim_or(SF::values, 2));
  (void)check::conv2d_channels<c[0], c[1]>::value;
  constexpr std::int64_t kh = detail::dim_or(SF::values, 0), kw = detail::dim_or(SF::values, 1);
  constexpr auto fit_h = detail::window_fits(detail::dim_or(SX::values, 1), kh, d[0], Same);
  constexpr auto fit_w = detail::window_fits(detail::dim_or(SX::values, 2), kw, d[1], Same);
  (void)check::window_too_large<fit_h[0], fit_h[1]>::value;
  (void)check::window_too_large<fit_w[0], fit_w[1]>::value;
  using S = detail::shape_from_array_t<ops::static_rules::conv2d(SX::values, SF::values, s, d, Same)>;
  attr_map attrs{{"strides", std::vector<std::int64_t>{1, s[0], s[1], 1}},
                 {"padding", std::string(padding_t<Same>::name)},
                 {"dilations", std::vector<std::int64_t>{1, d[0], d[1], 1}}};
  return op_expr<detail::nn_op, T, S, X, F>({"Conv2D", std::move(attrs), &detail::conv2d_kernels<T>}, x, f);
}

/// conv2d with dilations<1, 1>.
template <expression X, expression F, std::int64_t... St, bool Same>
auto conv2d(const X& x, const F& f, index_list<St...> s, padding_t<Same> p) {
  return conv2d(x, f, s, p, dilations<1, 1>);
}

namespace detail {
template <bool Max, class X, std::int64_t... K, std::int64_t... St, bool Same>
auto pool(const X& x, index_list<K...>, index_list<St...>, padding_t<Same>) {
  using SX = shape_of<X>;
  using T = value_type_of<X>;
  (void)check_nn_dtype<T>();
  (void)check::pool_rank<SX::rank, 4>::value;
  (void)check::window_count<sizeof...(K), 2>::value;
  (void)check::window_count<sizeof...(St), 2>::value;
  static_assert(((K > 0) && ...) && ((St > 0) && ...), "weft::max_pool/avg_pool: window and strides must be positive");
  constexpr std::array<std::int64_t, 2> k{K...}, s{St...};
  constexpr auto fit_h = window_fits(dim_or(SX::values, 1), k[0], 1, Same);
  constexpr auto fit_w = window_fits(dim_or(SX::values, 2), k[1], 1, Same);
  (void)check::window_too_large<fit_h[0], fit_h[1]>::value;
  (void)check::window_too_large<fit_w[0], fit_w[1]>::value;
  using S = shape_from_array_t<ops::static_rules::pool(SX::values, k, s, Same)>;
  attr_map attrs{{"ksize", std::vector<std::int64_t>{1, k[0], k[1], 1}},
                 {"strides", std::vector<std::int64_t>{1, s[0], s[1], 1}},
                 {"padding", std::string(padding_t<Same>::name)}};
  return op_expr<nn_op, T, S, X>({Max ? "MaxPool" : "AvgPool", std::move(attrs), &pool_kernels<T, Max>}, x);
}
}  // namespace detail

/// max_pool(x, window<kh, kw>, strides<sh, sw>, same or valid), avg_pool(...): x NHWC.
template <expression X, std::int64_t... K, std::int64_t... St, bool Same>
auto max_pool(const X& x, index_list<K...> k, index_list<St...> s, padding_t<Same> p) {
  return detail::pool<true>(x, k, s, p);
}
/// See max_pool: each window's mean (over its valid part, with SAME padding).
template <expression X, std::int64_t... K, std::int64_t... St, bool Same>
auto avg_pool(const X& x, index_list<K...> k, index_list<St...> s, padding_t<Same> p) {
  return detail::pool<false>(x, k, s, p);
}

/// dropout(x, rate, seed, seed2): each element zeroed with probability `rate` and the rest
/// scaled by 1 / (1 - rate). rate is a number or a scalar expression of x's dtype (a
/// placeholder, to train with a rate and test with 0); a rate outside [0, 1) is a run-time
/// error. The masks come from a stream keyed by the seeds: the n-th run of a graph draws
/// the same mask for the same seeds.
template <expression X, expression R>
auto dropout(const X& x, const R& rate, std::int64_t seed = 0, std::int64_t seed2 = 0) {
  using T = value_type_of<X>;
  (void)check::nn_dtypes<T, value_type_of<R>>::value;
  (void)detail::check_nn_dtype<T>();
  (void)check::dropout_rate_rank<shape_of<R>::rank, 0>::value;
  return op_expr<detail::nn_op, T, shape_of<X>, X, R>(
      {"Dropout", {{"seed", seed}, {"seed2", seed2}}, &detail::dropout_kernels<T>}, x, rate);
}
/// dropout with a number as the rate.
template <expression X, detail::scalar_value U>
auto dropout(const X& x, U rate, std::int64_t seed = 0, std::int64_t seed2 = 0) {
  return dropout(x, detail::scalar_operand<value_type_of<X>>(rate), seed, seed2);
}

/// fused_batch_norm(x, scale, offset, mean, variance, {training, epsilon, factor}):
/// TensorFlow's FusedBatchNormV3 (ops/nn_ops.hpp), channels last; x float16, bfloat16,
/// float or double, the four vectors of x's dtype or, for a 16-bit x, float
/// (batch_norm_statistics_t: TensorFlow's mixed precision). Returns {y, batch_mean,
/// batch_variance} (one node): in training, y normalized by the batch's statistics and the
/// moving averages (1 - factor) mean + factor batch_mean (variance alike, Bessel-corrected);
/// in inference, y normalized by mean and variance. Its gradient reaches x, scale and
/// offset (FusedBatchNormGradV3), not mean or variance.
struct batch_norm_options {
  bool training = true;   ///< normalize by the batch's statistics (else by mean and variance)
  double epsilon = 1e-3;  ///< added to the variance
  double factor = 1.0;  ///< exponential_avg_factor: 1 - momentum
};
/// The dtype of batch normalization's scale, offset and statistics for an x of dtype T:
/// float for the 16-bit floats (TensorFlow's mixed precision), else T.
template <class T>
using batch_norm_statistics_t = std::conditional_t<std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, float, T>;
/// What fused_batch_norm returns.
template <class Y, class M>
struct batch_norm_result {
  Y y;               ///< the normalized x
  M batch_mean;      ///< in training, the moving mean's update (else the mean given)
  M batch_variance;  ///< in training, the moving variance's update (else the variance given)
};
/// See batch_norm_options.
template <expression X, expression S, expression O, expression M, expression V>
auto fused_batch_norm(const X& x, const S& scale, const O& offset, const M& mean, const V& variance,
                      batch_norm_options options = {}) {
  using T = value_type_of<X>;
  using U = batch_norm_statistics_t<T>;
  using SX = shape_of<X>;
  (void)check::batch_norm_dtype<T, detail::nn_float<T>>::value;
  (void)check::batch_norm_statistics_dtype<U, value_type_of<S>>::value;
  (void)check::batch_norm_statistics_dtype<U, value_type_of<O>>::value;
  (void)check::batch_norm_statistics_dtype<U, value_type_of<M>>::value;
  (void)check::batch_norm_statistics_dtype<U, value_type_of<V>>::value;
  constexpr bool ranks = SX::rank >= 2 && SX::rank <= 5 && shape_of<S>::rank == 1 && shape_of<O>::rank == 1 &&
                         shape_of<M>::rank == 1 && shape_of<V>::rank == 1;
  (void)check::batch_norm_rank<ranks ? 1 : 0, 1>::value;
  constexpr std::int64_t c = detail::dim_or(SX::values, SX::rank - 1);
  constexpr auto cs = detail::static_pair(c, detail::dim_or(shape_of<S>::values, 0));
  (void)check::batch_norm_channels<cs[0], cs[1]>::value;
  constexpr auto co = detail::static_pair(c, detail::dim_or(shape_of<O>::values, 0));
  (void)check::batch_norm_channels<co[0], co[1]>::value;
  attr_map attrs{{"epsilon", options.epsilon},
                 {"exponential_avg_factor", options.factor},
                 {"is_training", options.training}};
  auto port = [&](int p) { return detail::nn_op{"FusedBatchNormV3", attrs, &detail::batch_norm_kernels<T>, p}; };
  using Y = op_expr<detail::nn_op, T, SX, X, S, O, M, V>;
  using Stat = op_expr<detail::nn_op, U, static_shape<c>, X, S, O, M, V>;
  return batch_norm_result<Y, Stat>{Y(port(0), x, scale, offset, mean, variance), Stat(port(1), x, scale, offset, mean, variance),
                                    Stat(port(2), x, scale, offset, mean, variance)};
}

}  // namespace weft
