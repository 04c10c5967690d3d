/// @file
/// Helpers shared by the CPU kernels: reading integer tensors, axes, and registration.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <weft/runtime/kernel.hpp>

namespace weft::cpu {

/// How many blocks a kernel that gives each block a buffer of its own (a partial sum, a
/// packed operand) cuts `units` into: `units / min_units` (each block at least min_units
/// long), at least one and at most four per intra-op thread. Four per thread balance better
/// than one: with a block per thread LeNet's filter gradient ran 1.27 times faster on two
/// threads than on one, with four 1.9 times, and the MLP's GEMMs 1.07 and 1.4 times.
inline std::int64_t blocks_for(const kernel_context& ctx, std::int64_t units, std::int64_t min_units) {
  const std::int64_t most = std::min<std::int64_t>(4 * ctx.device().num_threads(), units);
  return std::clamp<std::int64_t>(units / std::max<std::int64_t>(min_units, 1), std::min<std::int64_t>(1, most), most);
}

/// The values of an int32 or int64 tensor; `what` names the input in errors.
inline std::vector<std::int64_t> int_values(const tensor& t, const char* what) {
  std::vector<std::int64_t> v;
  if (t.dtype() == dtype::int32)
    for (auto x : t.flat<std::int32_t>()) v.push_back(x);
  else if (t.dtype() == dtype::int64)
    for (auto x : t.flat<std::int64_t>()) v.push_back(x);
  else
    fail(error_code::invalid_argument, what, " must be int32 or int64, got ", t.dtype());
  return v;
}

/// The value of a one-element int32 or int64 tensor, or an error naming `what`.
inline std::int64_t scalar_int(const tensor& t, const char* what) {
  if (t.num_elements() != 1) fail(error_code::invalid_argument, what, " must be a scalar, got shape ", t.shape());
  return int_values(t, what)[0];
}

/// axis in [-rank, rank) made non-negative, or an invalid_argument error naming `what`.
inline int canonical_axis(std::int64_t axis, int rank, const char* what = "axis") {
  if (axis < -rank || axis >= rank)
    fail(error_code::invalid_argument, what, " ", axis, " is out of range for rank ", rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

/// dims as a shape, or an error naming `what` for a negative dim or too many dims.
inline shape shape_from_dims(const std::vector<std::int64_t>& dims, const char* what) {
  if (dims.size() > static_cast<std::size_t>(max_rank))
    fail(error_code::invalid_argument, what, " has ", dims.size(), " dims, more than ", max_rank);
  for (auto d : dims)
    if (d < 0) fail(error_code::invalid_argument, what, " has a negative dimension ", d);
  return shape(dims);
}

/// The index tuples of `indices` (shape [..., K]) into a tensor of shape `s`, as rows of s
/// seen as a matrix [s[0] * ... * s[K-1], slice] (GatherNd, ScatterNd, TensorScatter*);
/// each tuple is checked to lie in s.
struct nd_rows {
  std::vector<std::int64_t> rows;         ///< each tuple's row
  std::int64_t slice = 1;                 ///< elements per row: the product of s[K:]
  std::vector<std::int64_t> slices_dims;  ///< of the slices together: indices.shape[:-1] + s[K:]
};
/// The rows of `indices`' tuples into a tensor of shape s, or an error naming a tuple out of range.
inline nd_rows nd_rows_of(const tensor& indices, const shape& s) {
  if (indices.rank() < 1) fail(error_code::invalid_argument, "indices must have rank at least 1, got shape ", indices.shape());
  const std::int64_t depth = indices.dim(indices.rank() - 1);
  if (depth > s.rank())
    fail(error_code::invalid_argument, "indices of shape ", indices.shape(), " give ", depth, " coordinates into shape ", s,
         " of rank ", s.rank());
  const auto idx = int_values(indices, "indices");
  nd_rows r;
  std::int64_t count = 1;
  for (int d = 0; d + 1 < indices.rank(); ++d) r.slices_dims.push_back(indices.dim(d)), count *= indices.dim(d);
  for (int d = static_cast<int>(depth); d < s.rank(); ++d) r.slices_dims.push_back(s[d]), r.slice *= s[d];
  r.rows.resize(static_cast<std::size_t>(count));
  for (std::int64_t j = 0; j < count; ++j) {
    std::int64_t row = 0;
    for (std::int64_t d = 0; d < depth; ++d) {
      const std::int64_t v = idx[static_cast<std::size_t>(j * depth + d)];
      if (v < 0 || v >= s[static_cast<int>(d)]) {
        std::vector<std::int64_t> tuple(idx.begin() + j * depth, idx.begin() + (j + 1) * depth);
        fail(error_code::out_of_range, "index tuple ", j, " of indices, ", shape(tuple), ", is not in shape ", s);
      }
      row = row * s[static_cast<int>(d)] + v;
    }
    r.rows[static_cast<std::size_t>(j)] = row;
  }
  return r;
}
/// Fails unless `updates` has the shape of the slices r addresses.
inline void check_updates(const nd_rows& r, const tensor& updates, const tensor& indices, const shape& s) {
  if (updates.shape() != shape(r.slices_dims))
    fail(error_code::invalid_argument, "updates of shape ", updates.shape(), " do not fit indices of shape ", indices.shape(),
         " into shape ", s, ": they must have shape ", shape(r.slices_dims));
}

/// Strides of `in` (right-aligned to rank) as seen from an output of dims `out`: 0 where broadcast.
inline std::vector<std::int64_t> broadcast_strides(const shape& in, const shape& out) {
  std::vector<std::int64_t> strides(static_cast<std::size_t>(out.rank()), 0);
  std::int64_t stride = 1;
  for (int i = in.rank() - 1, o = out.rank() - 1; i >= 0; --i, --o) {
    if (in[i] != 1) strides[static_cast<std::size_t>(o)] = stride;
    stride *= in[i];
  }
  return strides;
}

using weft::is_half_v;

/// Every CPU kernel covers every dtype its op definition admits (a test checks this). To keep
/// compile time down, the rarer dtypes compute through a wider one, converting on the way in
/// and out, instead of compiling each op's code again:
/// - float16 and bfloat16 through float32 (Eigen's half arithmetic converts every element
///   to float anyway);
/// - int8, int16, uint8 and uint16 through int64, where their sums and products are exact,
///   so that narrowing the result wraps as TensorFlow's does;
/// - uint32 through uint64, which computes in plain loops (it has no vectorized kernels).
template <class T>
using compute_t = std::conditional_t<
    is_half_v<T>, float,
    std::conditional_t<std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::int16_t> ||
                           std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::uint16_t>,
                       std::int64_t, std::conditional_t<std::is_same_v<T, std::uint32_t>, std::uint64_t, T>>>;
/// T computes through another type (compute_t).
template <class T>
inline constexpr bool is_converted_v = !std::is_same_v<compute_t<T>, T>;
/// T has no vectorized kernels: elementwise kernels loop one element at a time (uint64).
template <class T>
inline constexpr bool is_looped_v = std::is_same_v<T, std::uint64_t>;
/// The 64-bit integer type of T's signedness.
template <class T>
using wide_int_t = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;

/// The dtype sets of ops/math_ops.hpp that core/dtype.hpp names.
using kernel_signed_real_types = signed_real_types;
using kernel_signed_types = signed_number_types;  ///< Neg's dtypes
using kernel_pow_types = pow_types;  ///< Pow's dtypes

/// The kernel for one dtype T of a typed kernel template, for every T in a type_list.
template <template <class> class K, class... Ts>
void register_for(const char* op, const char* type_attr, type_list<Ts...>) {
  (register_cpu_kernel<K<Ts>>(op, {type_attr, dtype_of<Ts>}), ...);
}

}  // namespace weft::cpu
