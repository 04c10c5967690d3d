/// @file
/// The GPU kernels' plain C++ entry points (DESIGN.md §2): declarations that any C++
/// compiler reads, defined by weft/cuda/launch.cuh, which one .cu file of a program compiles
/// with nvcc (the CMake component weft::cuda does it: weft_cuda_kernels). Each enqueues its
/// work on `stream` and returns; a launch failure is reported by the caller's
/// check(cudaGetLastError()). Element types are passed as elem codes, so this header
/// includes nothing of weft's and nvcc never parses the typed DSL.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace weft::cuda::launch {

/// The element types the GPU kernels take. The complex ones (c64, c128) only the entry points
/// whose comments say so take (unary_op, binary_op, reduce_op, scan_op and the scatter adds,
/// for the ops complex_unary, complex_binary and complex_reduction name); every other entry
/// point launches nothing for them, and the kernels' host code never passes them there.
enum class elem : int { f16, bf16, f32, f64, i32, i64, u8, boolean, c64, c128 };

/// The elementwise unary ops the GPU computes (unary_op), as the CPU's kernels of the same names.
enum class unary : int {
  neg, abs, square, sqrt, rsqrt, exp, log, tanh, sigmoid, relu, logical_not, sign,
  // the real floating point types only
  sin, cos, reciprocal, log1p, expm1, softplus, erf, floor, ceil, round, elu, selu, relu6,
  tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh,
};

/// The elementwise binary ops the GPU computes (binary_op), broadcasting.
enum class binary : int {
  /// z: the operands' type
  add, sub, mul, div, pow, maximum, minimum, squared_difference,
  atan2,         ///< atan2(a, b) (floats)
  floor_div,     ///< floor(a / b) (floats)
  floor_mod,     ///< a - floor(a / b) b, as fmod moved to b's sign (floats)
  relu_grad,     ///< a where b > 0, else 0 (ReluGrad(gradients, features))
  tanh_grad,     ///< b * (1 - a^2)   (TanhGrad(y, dy))
  sigmoid_grad,  ///< b * a * (1 - a) (SigmoidGrad(y, dy))
  // z: bool
  greater, greater_equal, less, less_equal, equal, not_equal, logical_and, logical_or,
};
/// Whether op's output is bool (the comparisons and logical ops).
inline constexpr bool returns_bool(binary op) noexcept { return op >= binary::greater; }

/// Whether unary_op computes op on complex numbers (c64, c128), as the CPU's kernels do.
inline constexpr bool complex_unary(unary op) noexcept {
  return op == unary::neg || op == unary::square || op == unary::sqrt || op == unary::rsqrt || op == unary::exp ||
         op == unary::log || op == unary::tanh || op == unary::sigmoid;
}
/// Whether binary_op computes op on complex numbers (c64, c128), as the CPU's kernels do.
inline constexpr bool complex_binary(binary op) noexcept {
  return op == binary::add || op == binary::sub || op == binary::mul || op == binary::div || op == binary::pow ||
         op == binary::equal || op == binary::not_equal;
}

// An error slot: two int64 in host memory the device writes through (mapped pinned memory,
// gpu_device::error_slots): a kernel that meets bad input stores the offending value in [1],
// then 1 in [0]; the host reads them when it next waits for the device.

/// How an operand of a broadcast is indexed: by its strides (general), by the output's index
/// (direct: it has the output's shape), or not at all (scalar: one element).
enum class operand_kind : int { general, direct, scalar };

/// Broadcasting, NumPy's: the output's dims, and each operand's element strides (0 along a
/// broadcast dim), at most 8 dims. rank 0 with same_shape: both operands have the output's
/// shape (no index arithmetic). `narrow`: every offset fits 32 bits, so index arithmetic is
/// done in 32 bits (a 64-bit division costs a GPU tens of instructions).
struct broadcast_plan {
  /// The most dims a plan holds.
  static constexpr int max_rank = 8;
  /// The output's rank (0 with same_shape: no index arithmetic).
  int rank = 0;
  /// Every operand has the output's shape.
  bool same_shape = false;
  /// Every offset fits 32 bits.
  bool narrow = false;
  operand_kind kind[3] = {};                  ///< per operand (up to three: SelectV2)
  /// The output's dims.
  std::int64_t dims[max_rank] = {};
  /// Each operand's element strides along the output's dims (0 where broadcast).
  std::int64_t stride[3][max_rank] = {};
};

/// y = x broadcast to y's shape (BroadcastTo, transposes); operand 0 of the plan is x, whose
/// elements have `element_bytes` bytes (1, 2, 4, 8 or 16).
void broadcast_op(int element_bytes, const void* x, void* y, std::int64_t n, const broadcast_plan& plan, cudaStream_t stream);
// Functions both sides compile: the host's code and the CUDA kernels.
#if defined(__CUDACC__)
#define WEFT_HOST_DEVICE __host__ __device__
#else
#define WEFT_HOST_DEVICE
#endif

/// The offset in operand k of the plan's output element i.
inline WEFT_HOST_DEVICE std::int64_t offset_in(const broadcast_plan& p, int k, std::int64_t i) {
  if (p.same_shape || p.kind[k] == operand_kind::direct) return i;
  if (p.kind[k] == operand_kind::scalar) return 0;
  if (p.narrow) {
    std::uint32_t j = static_cast<std::uint32_t>(i), off = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const auto dim = static_cast<std::uint32_t>(p.dims[d]);
      const std::uint32_t q = j / dim;
      off += (j - q * dim) * static_cast<std::uint32_t>(p.stride[k][d]);
      j = q;
    }
    return off;
  }
  std::int64_t off = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    const std::int64_t q = i / p.dims[d];
    off += (i - q * p.dims[d]) * p.stride[k][d];
    i = q;
  }
  return off;
}

/// The elementwise tests of floats the GPU computes (predicate_op): IsNan, IsInf, IsFinite.
enum class predicate : int { is_nan, is_inf, is_finite };
/// y = op(x), bool, for n elements of floating type t (f16, bf16, f32, f64).
void predicate_op(predicate op, elem t, const void* x, bool* y, std::int64_t n, cudaStream_t stream);
/// y = op(x) for n elements of type t (complex ones: the ops complex_unary names).
void unary_op(unary op, elem t, const void* x, void* y, std::int64_t n, cudaStream_t stream);
/// z = a op b for the n elements of z, operands indexed by `plan` (0: a, 1: b); complex
/// operands: the ops complex_binary names.
void binary_op(binary op, elem t, const void* a, const void* b, void* z, std::int64_t n, const broadcast_plan& plan,
               cudaStream_t stream);
/// out = cond ? t : e, broadcast (SelectV2); operand 0 of the plan is cond, 1 is t, 2 is e;
/// elements of `element_bytes` bytes (1, 2, 4, 8 or 16: any dtype but string).
void select_op(int element_bytes, const bool* cond, const void* a, const void* b, void* out, std::int64_t n,
               const broadcast_plan& plan, cudaStream_t stream);
/// LeakyRelu (gradients null: y = x > 0 ? x : alpha x) and LeakyReluGrad (y = x > 0 ? g :
/// alpha g, x the features) for n elements of floating type t, alpha rounded to t first.
void leaky_relu_op(elem t, double alpha, const void* x, const void* gradients, void* y, std::int64_t n, cudaStream_t stream);
/// Every element type Cast converts between on the GPU: elem's and the narrow integers and
/// complex numbers no other GPU kernel computes with.
enum class cast_elem : int { f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, boolean, c64, c128 };
/// y = x converted as the CPU's Cast converts (kernels/cpu/convert.hpp): a float to an integer
/// saturates and NaN gives 0, a complex number to a real keeps its real part, integers wrap.
void cast_op(cast_elem from, cast_elem to, const void* x, void* y, std::int64_t n, cudaStream_t stream);
/// Every element of y set to *value (one element of `element_bytes` bytes, 1, 2, 4, 8 or 16,
/// in device memory).
void fill_op(int element_bytes, const void* value, void* y, std::int64_t n, cudaStream_t stream);

/// Reductions of x, seen as [outer, reduce, inner], to y of [outer, inner], in float for the
/// 16-bit types, double for float64 and 64 bits for integer sums, products and means. mean
/// divides by `reduce`.
/// l2: the sum of squares halved (L2Loss).
enum class reduction : int { sum, mean, max, min, prod, l2 };
/// Whether reduce_op computes op on complex numbers (c64, c128): sum, mean, prod.
inline constexpr bool complex_reduction(reduction op) noexcept {
  return op == reduction::sum || op == reduction::mean || op == reduction::prod;
}
/// How many parts reduce_op splits each reduced run into: 1 where there are outputs enough to
/// keep the GPU busy (a thread or a block each); otherwise enough parts of at least 256
/// elements for some 64 k threads, at most 1024, whose partial results a second kernel joins.
inline std::int64_t reduce_splits(std::int64_t outer, std::int64_t reduce, std::int64_t inner) {
  const std::int64_t outputs = outer * inner;
  if (outputs <= 0 || outputs >= 16384 || reduce < 1024) return 1;
  std::int64_t s = (65536 + outputs - 1) / outputs;
  if (s > reduce / 256) s = reduce / 256;
  if (s > 1024) s = 1024;
  return s < 1 ? 1 : s;
}
/// The scratch bytes reduce_op needs (the split parts' partial results, 8 bytes each).
inline std::size_t reduce_scratch_bytes(std::int64_t outer, std::int64_t reduce, std::int64_t inner) {
  const std::int64_t s = reduce_splits(outer, reduce, inner);
  return s > 1 ? static_cast<std::size_t>(outer * s * inner) * 16 : 0;  // the widest accumulator: complex128
}
/// y[o, i] = the reduction of x[o, :, i] ([outer, reduce, inner]); `scratch` holds
/// reduce_scratch_bytes(outer, reduce, inner) bytes of device memory. Complex elements (c64,
/// c128): the ops complex_reduction names.
void reduce_op(reduction op, elem t, const void* x, void* y, std::int64_t outer, std::int64_t reduce,
               std::int64_t inner, void* scratch, cudaStream_t stream);
/// Cumsum (op sum) and Cumprod (op prod) along the middle dim of [outer, n, inner]: a thread
/// a line, in order or from the end (reverse), each output before (exclusive) or after its
/// element is combined; accumulating as reduce_op does (complex numbers too).
void scan_op(reduction op, elem t, const void* x, void* y, std::int64_t outer, std::int64_t n, std::int64_t inner, bool exclusive,
             bool reverse, cudaStream_t stream);
/// The index of the largest (or smallest) element along the middle dim of [outer, n, inner],
/// the first of equals, as int64 (or int32).
void arg_reduce_op(bool max, elem t, const void* x, void* y, bool int64_out, std::int64_t outer, std::int64_t n,
                   std::int64_t inner, cudaStream_t stream);

/// BiasAdd: y[r, c] = x[r, c] + bias[c] for [rows, channels] (NHWC's last dim).
void bias_add_op(elem t, const void* x, const void* bias, void* y, std::int64_t rows, std::int64_t channels,
                 cudaStream_t stream);

/// y = x0 a0 + x1 a1 + b over [rows, channels], a0, a1 and b per channel (x1 and a1 null:
/// y = x0 a0 + b): batch normalization's outputs, in float (16-bit types), or T.
void channel_affine_op(elem t, const void* x0, const void* a0, const void* x1, const void* a1, const void* b, void* y,
                       std::int64_t rows, std::int64_t channels, cudaStream_t stream);

/// FusedBatchNormV3's per-channel values, one thread a channel, in double, as the CPU's
/// kernel computes them (ops/nn_ops.hpp says what each is). Vectors of `channels` elements of
/// the node's T.
struct batch_norm_forward {
  /// Training: the batch's mean and (biased) variance (null where x has no rows: NaN, as
  /// TensorFlow's); inference: the given mean and variance.
  const void* mean = nullptr;
  const void* variance = nullptr;  ///< see mean
  /// Training: the moving averages given (null: empty inputs, taken as 0).
  const void* old_mean = nullptr;
  const void* old_variance = nullptr;  ///< see old_mean
  const void* scale = nullptr;         ///< the scale input
  const void* offset = nullptr;        ///< the offset input
  void* batch_mean = nullptr;          ///< output 1: the moving mean (training) or the given mean
  void* batch_variance = nullptr;      ///< output 2: the moving variance (training: Bessel-corrected batch variance)
  void* saved_mean = nullptr;          ///< output 3 (reserve_space_1): the mean that normalized
  void* saved_variance = nullptr;      ///< output 4 (reserve_space_2): the variance that normalized
  void* a = nullptr;                   ///< y = x a + b: scale / sqrt(variance + epsilon)
  void* b = nullptr;                   ///< offset - mean a
  double epsilon = 0;                  ///< the epsilon attr
  double factor = 1;                   ///< exponential_avg_factor
  std::int64_t rows = 0;               ///< x's rows (elements per channel)
  bool training = true;                ///< is_training
};
/// Computes `f`'s outputs for `channels` channels of type t (float32 or float64).
void batch_norm_forward_op(elem t, const batch_norm_forward& f, std::int64_t channels, cudaStream_t stream);

/// FusedBatchNormGradV3's per-channel values, one thread a channel, in double: the offset's
/// and scale's gradients and the coefficients of x_backprop = dy p + x q + s.
struct batch_norm_backward {
  const void* sum_dy = nullptr;           ///< the sum of y_backprop over the rows (null: no rows, 0)
  const void* sum_dy_centered = nullptr;  ///< the sum of y_backprop (x - mean) (null: no rows, 0)
  const void* scale = nullptr;            ///< the scale input
  const void* mean = nullptr;             ///< reserve_space_1
  const void* variance = nullptr;         ///< reserve_space_2
  void* scale_backprop = nullptr;         ///< output 1
  void* offset_backprop = nullptr;        ///< output 2
  void* p = nullptr;                      ///< x_backprop's coefficient of dy
  void* q = nullptr;                      ///< its coefficient of x
  void* s = nullptr;                      ///< its constant
  double epsilon = 0;                     ///< the epsilon attr
  std::int64_t rows = 0;                  ///< x's rows (elements per channel)
  bool training = true;                   ///< is_training
};
/// Computes `b`'s outputs for `channels` channels of type t (float32 or float64).
void batch_norm_backward_op(elem t, const batch_norm_backward& b, std::int64_t channels, cudaStream_t stream);

/// Softmax and log-softmax along the last dim of [rows, classes].
void softmax_op(bool log, elem t, const void* logits, void* y, std::int64_t rows, std::int64_t classes,
                cudaStream_t stream);
/// SparseSoftmaxCrossEntropyWithLogits: loss[r] = logsumexp(logits[r]) - logits[r, label[r]],
/// backprop[r] = softmax(logits[r]) - onehot(label[r]). A label outside [0, classes) gives NaN
/// for its row's loss and backprop (TensorFlow's GPU kernel does the same) and is reported in
/// `error` (an error slot: see below).
void sparse_xent_op(elem t, const void* logits, const void* labels, bool labels_int64, void* loss, void* backprop,
                    std::int64_t rows, std::int64_t classes, std::int64_t* error, cudaStream_t stream);

/// Training updates, in place on var (and the slots): see the ops' docs (ops/training_ops.hpp).
/// lr, beta1_power and the like are one element each in device memory.
void apply_gradient_descent_op(elem t, void* var, const void* lr, const void* grad, std::int64_t n,
                               cudaStream_t stream);
/// The scalars of a product that subtracts itself from a variable (_FusedMatMulApplyGradientDescent:
/// var = -lr op(a) op(b) + 1 var, cuBLAS reading alpha and beta in device memory): out[0] =
/// -lr (lr one element of type t in device memory), out[1] = 1, as float.
void negated_rate_op(elem t, const void* lr, float* out, cudaStream_t stream);
/// ApplyMomentum: accum = accum * momentum + grad; var -= lr * accum (or Nesterov's form).
void apply_momentum_op(elem t, void* var, void* accum, const void* lr, const void* grad, const void* momentum,
                       bool nesterov, std::int64_t n, cudaStream_t stream);
/// ApplyAdagrad: accum += grad^2; var -= lr * grad / sqrt(accum).
void apply_adagrad_op(elem t, void* var, void* accum, const void* lr, const void* grad, std::int64_t n, cudaStream_t stream);
/// ApplyRMSProp: ms = rho * ms + (1 - rho) * grad^2; mom = momentum * mom + lr * grad / sqrt(ms + epsilon); var -= mom.
void apply_rms_prop_op(elem t, void* var, void* ms, void* mom, const void* lr, const void* rho, const void* momentum,
                       const void* epsilon, const void* grad, std::int64_t n, cudaStream_t stream);
/// ApplyAdam: the moments m and v updated by beta1 and beta2, var moved by the bias-corrected step (or Nesterov's form).
void apply_adam_op(elem t, void* var, void* m, void* v, const void* beta1_power, const void* beta2_power,
                   const void* lr, const void* beta1, const void* beta2, const void* epsilon, const void* grad,
                   bool nesterov, std::int64_t n, cudaStream_t stream);

/// A box of elements copied between two tensors of elements of `element_bytes` bytes (1, 2, 4,
/// 8 or 16): dst[dst_offset + sum_d i_d * dst_stride[d]] = src[src_offset + sum_d i_d *
/// src_stride[d]] for every index i in dims (Slice, ConcatV2, Split, Pad's interior).
struct box_plan {
  /// The most dims a plan holds.
  static constexpr int max_rank = 8;
  /// The number of dims in use.
  int rank = 0;
  std::int64_t dims[max_rank] = {};  ///< the box's dims
  /// The source's element strides.
  std::int64_t src_stride[max_rank] = {};
  /// The destination's element strides.
  std::int64_t dst_stride[max_rank] = {};
  std::int64_t src_offset = 0;  ///< where the box starts in the source (elements)
  std::int64_t dst_offset = 0;  ///< where it starts in the destination
};
/// Copies the box `plan` describes from src to dst.
void copy_box_op(int element_bytes, const void* src, void* dst, const box_plan& plan, cudaStream_t stream);
/// Tile: y (dims out_dims) element i is x's element at i's index modulo in_dims.
struct tile_plan {
  /// The most dims a plan holds.
  static constexpr int max_rank = 8;
  int rank = 0;  ///< the number of dims in use
  /// y's dims.
  std::int64_t out_dims[max_rank] = {};
  /// x's dims (same rank).
  std::int64_t in_dims[max_rank] = {};
};
/// y = Tile(x) for the n elements of y.
void tile_op(int element_bytes, const void* x, void* y, std::int64_t n, const tile_plan& plan, cudaStream_t stream);
/// UnsortedSegmentSum: out[ids[j], :] += data[j, :] for rows of `row` elements, out (of
/// `segments` rows) zeroed first; an id outside [0, segments) adds nothing and is reported
/// in `error`. Adds are atomic, so float sums may round in another order than the CPU's;
/// complex numbers add their real and imaginary parts atomically, each on its own.
void unsorted_segment_sum_op(elem t, const void* data, const void* ids, bool ids_int64, void* out, std::int64_t rows,
                             std::int64_t row, std::int64_t segments, std::int64_t* error, cudaStream_t stream);

/// Index tuples into the first k dims of a tensor (GatherNd, ScatterNd, TensorScatterAdd,
/// TensorScatterUpdate): tuple j (k int32 or int64 indices) names a slice of `slice`
/// elements. gather: dst[j, :] = src[tuple j's slice]; scatter_add / scatter_update:
/// dst[tuple j's slice] += / = src[j, :] (adds atomic; updates of one slice by two tuples
/// land in either order). A tuple out of range is reported in `error` and moves nothing
/// (gather writes zeros).
enum class nd_mode : int { gather, scatter_add, scatter_update };
/// Where tuples of indices point (nd_op): the indexed tensor's first k dims, the tuples, each slice's size.
struct nd_plan {
  /// The most dims a tuple indexes.
  static constexpr int max_k = 8;
  /// Indices per tuple.
  int k = 0;
  /// The indexed tensor's first k dims (a tuple is in range when each index is within its dim).
  std::int64_t dims[max_k] = {};
  std::int64_t tuples = 0;  ///< how many tuples
  std::int64_t slice = 0;   ///< elements per slice
};
/// `t` is the element type of a scatter_add (complex numbers too, as
/// unsorted_segment_sum_op adds them); gather and scatter_update move elements of
/// `element_bytes` bytes (1, 2, 4, 8 or 16).
void nd_op(nd_mode mode, elem t, int element_bytes, const void* indices, bool indices_int64, const nd_plan& plan, const void* src,
           void* dst, std::int64_t* error, cudaStream_t stream);

/// A pooling window over NHWC images (graph/window_geometry.hpp's geometry): input
/// [n, h, w, c], a kh x kw window moving by (sh, sw), output [n, oh, ow, c]; output row y's
/// window starts at input row y * sh - pad_top (the same for columns).
struct pool_geometry {
  std::int64_t n = 0;         ///< images
  std::int64_t h = 0;         ///< input rows
  std::int64_t w = 0;         ///< input columns
  std::int64_t c = 0;         ///< channels
  std::int64_t kh = 1;        ///< window rows
  std::int64_t kw = 1;        ///< window columns
  std::int64_t sh = 1;        ///< row stride
  std::int64_t sw = 1;        ///< column stride
  std::int64_t oh = 0;        ///< output rows
  std::int64_t ow = 0;        ///< output columns
  std::int64_t pad_top = 0;   ///< rows of padding before the image
  std::int64_t pad_left = 0;  ///< columns of padding before the image
};
/// MaxPool (the largest element of each window's valid part, -inf for none) and AvgPool
/// (their mean), as the CPU's kernels compute them.
void pool_op(bool max, elem t, const void* x, void* y, const pool_geometry& g, cudaStream_t stream);
/// MaxPoolGrad: each window's gradient to the first of its maxima (a strict > keeps the
/// first, as on the CPU); AvgPoolGrad: each window's gradient shared equally by its valid
/// part. Each input element sums what its windows give it, in window order (deterministic).
void max_pool_grad_op(elem t, const void* x, const void* grad, void* dx, const pool_geometry& g, cudaStream_t stream);
/// AvgPoolGrad (see max_pool_grad_op).
void avg_pool_grad_op(elem t, const void* grad, void* dx, const pool_geometry& g, cudaStream_t stream);
/// MaxPoolGradGrad: each window's output is grad (of the input's shape) at the window's first
/// maximum; 0 for a window wholly in the padding.
void max_pool_grad_grad_op(elem t, const void* x, const void* grad, void* out, const pool_geometry& g, cudaStream_t stream);

/// OneHot: out[a, k, b] = on if indices[a, b] == k else off, for [outer, depth, inner]; on and
/// off are one element each in device memory; an index out of [0, depth) gives a row of off.
void one_hot_op(int element_bytes, elem index_type, const void* indices, const void* on, const void* off, void* out,
                std::int64_t outer, std::int64_t depth, std::int64_t inner, cudaStream_t stream);
/// SoftmaxCrossEntropyWithLogits: loss[r] = -sum_c labels[r, c] * log_softmax(logits[r])[c],
/// backprop[r] = softmax(logits[r]) - labels[r].
void softmax_xent_op(elem t, const void* logits, const void* labels, void* loss, void* backprop, std::int64_t rows,
                     std::int64_t classes, cudaStream_t stream);

/// The seeded random ops, drawing what the CPU's kernels draw (core/random_stream.hpp):
/// element i is the draw of counter base + i * per (per: 64 for truncated_normal, whose
/// redraws take the counters after it), from the stream of `key`.
enum class distribution : int { uniform, normal, truncated_normal };
/// Fills out (n elements of type t) with draws of distribution d.
void random_op(distribution d, elem t, std::uint64_t key, std::uint64_t base, std::uint64_t per, void* out,
               std::int64_t n, cudaStream_t stream);
/// Dropout: out[i] = x[i] * mask[i], mask[i] = 1 / (1 - rate) where the uniform draw of counter
/// base + i is at least rate, else 0; rate is one element in device memory. A rate outside
/// [0, 1) makes the outputs NaN and is reported in `error` (as a double's bits).
void dropout_op(elem t, std::uint64_t key, std::uint64_t base, const void* x, const void* rate, void* out, void* mask,
                std::int64_t n, std::int64_t* error, cudaStream_t stream);

/// The matrices of a batched product whose batch dims broadcast (BatchMatMulV2, cuBLAS's
/// GemmBatchedEx): for each output batch index b < batch, pointers[b] = x + x's matrix
/// offset, pointers[batch + b] = y + y's and pointers[2 * batch + b] = out + b *
/// out_matrix_bytes; x's and y's matrices found through `plan` (operand 0: x's batch dims,
/// 1: y's, over the output's batch dims), in units of their matrices' bytes.
void batch_pointers_op(const void* x, std::int64_t x_matrix_bytes, const void* y, std::int64_t y_matrix_bytes, void* out,
                       std::int64_t out_matrix_bytes, const broadcast_plan& plan, void** pointers, std::int64_t batch,
                       cudaStream_t stream);
/// The element types of the linear algebra kernels (MatrixInverse, MatrixDeterminant).
enum class linalg_elem : int { f32, f64, c64, c128 };
/// pointers[b] = base + b * step_bytes for b < count: the arrays of matrix pointers that
/// cuBLAS's batched LU factorization takes, written on the device.
void pointer_array_op(void* base, std::int64_t step_bytes, void** pointers, std::int64_t count, cudaStream_t stream);
/// y[b] = the adjoint (the conjugate transpose) of x[b], for `batch` row-major n x n matrices.
void adjoint_op(linalg_elem t, const void* x, void* y, std::int64_t batch, std::int64_t n, cudaStream_t stream);
/// det[b] = the determinant of matrix b from its LU factors as cuBLAS's getrfBatched leaves
/// them (`lu`: batch n x n matrices; `pivots`: n 1-based row interchanges each): the product
/// of U's diagonal, negated once per interchange; 1 where n is 0.
void lu_determinant_op(linalg_elem t, const void* lu, const int* pivots, void* det, std::int64_t batch, std::int64_t n,
                       cudaStream_t stream);
/// Reports in `error` the index of a matrix whose LU factors (as lu_determinant_op reads them)
/// have a zero or NaN on U's diagonal: singular, as the CPU's kernel finds it.
void lu_singular_op(linalg_elem t, const void* lu, std::int64_t batch, std::int64_t n, std::int64_t* error, cudaStream_t stream);

/// A row gather: out[o, i, :] = params[o, indices[i], :] for `outer` blocks of `rows` rows
/// (params) and of n rows (out), rows of `row_bytes` bytes; an index outside [0, rows) gives
/// a row of zeros and is reported in `error` (also where rows hold nothing).
void gather_rows_op(const void* params, const void* indices, bool indices_int64, void* out, std::int64_t outer,
                    std::int64_t n, std::int64_t rows, std::int64_t row_bytes, std::int64_t* error, cudaStream_t stream);

}  // namespace weft::cuda::launch
