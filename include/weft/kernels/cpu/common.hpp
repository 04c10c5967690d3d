// Helpers shared by the CPU kernels: reading integer tensors, axes, and registration.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include <weft/runtime/kernel.hpp>

namespace weft::cpu {

// The values of an int32 or int64 tensor; `what` names the input in errors.
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

inline std::int64_t scalar_int(const tensor& t, const char* what) {
  if (t.num_elements() != 1) fail(error_code::invalid_argument, what, " must be a scalar, got shape ", t.shape());
  return int_values(t, what)[0];
}

inline int canonical_axis(std::int64_t axis, int rank, const char* what = "axis") {
  if (axis < -rank || axis >= rank)
    fail(error_code::invalid_argument, what, " ", axis, " is out of range for rank ", rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

inline shape shape_from_dims(const std::vector<std::int64_t>& dims, const char* what) {
  for (auto d : dims)
    if (d < 0) fail(error_code::invalid_argument, what, " has a negative dimension ", d);
  return shape(dims);
}

// Strides of `in` (right-aligned to rank) as seen from an output of dims `out`: 0 where broadcast.
inline std::vector<std::int64_t> broadcast_strides(const shape& in, const shape& out) {
  std::vector<std::int64_t> strides(static_cast<std::size_t>(out.rank()), 0);
  std::int64_t stride = 1;
  for (int i = in.rank() - 1, o = out.rank() - 1; i >= 0; --i, --o) {
    if (in[i] != 1) strides[static_cast<std::size_t>(o)] = stride;
    stride *= in[i];
  }
  return strides;
}

// Every CPU kernel covers every dtype its op definition admits (a test checks this), at a
// compile cost kept low by computing the rarer types through the common ones:
// - float16 and bfloat16 compute in float32, a cache-sized chunk at a time, reusing the
//   float32 Eigen code (Eigen's half arithmetic converts every element to float anyway);
// - the integers other than int32 and int64 compute in plain loops over a 64-bit type of the
//   same signedness and wrap on the way back, so overflow wraps as in TensorFlow instead of
//   being undefined behaviour (C++ promotes uint16 * uint16 to a signed int, which overflows).
template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;
template <class T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;
template <class T>
inline constexpr bool is_looped_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                                        !std::is_same_v<T, std::int32_t> && !std::is_same_v<T, std::int64_t>;
template <class T>
using wide_int_t = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;

template <class... Lists>
struct type_list_cat;
template <class... A>
struct type_list_cat<type_list<A...>> {
  using type = type_list<A...>;
};
template <class... A, class... B, class... Rest>
struct type_list_cat<type_list<A...>, type_list<B...>, Rest...> : type_list_cat<type_list<A..., B...>, Rest...> {};

// The dtype sets of ops/math_ops.hpp, as type lists.
using kernel_unsigned_types = type_list<std::uint8_t, std::uint16_t, std::uint32_t, std::uint64_t>;
using kernel_signed_real_types =
    type_list<std::int8_t, std::int16_t, std::int32_t, std::int64_t, half, bfloat16, float, double>;
using kernel_signed_types = type_list_cat<kernel_signed_real_types, type_list<complex64, complex128>>::type;
using kernel_real_types = type_list_cat<kernel_signed_real_types, kernel_unsigned_types>::type;
using kernel_number_types = type_list_cat<kernel_signed_types, kernel_unsigned_types>::type;
using kernel_float_complex_types = float_complex_types;
using kernel_pow_types = type_list<std::int32_t, std::int64_t, half, bfloat16, float, double, complex64, complex128>;
using kernel_all_types = all_types;

// The kernel for one dtype T of a typed kernel template, for every T in a type_list.
template <template <class> class K, class... Ts>
void register_for(const char* op, const char* type_attr, type_list<Ts...>) {
  (register_cpu_kernel<K<Ts>>(op, {type_attr, dtype_of<Ts>}), ...);
}

}  // namespace weft::cpu
