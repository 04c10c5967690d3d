// Helpers shared by the CPU kernels: reading integer tensors, axes, and registration.
#pragma once

#include <cstdint>
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

// The dtypes the arithmetic CPU kernels are compiled for (each costs compile time in the
// registry translation unit). The op definitions admit more (int8, uint16, float16, ...);
// a graph using those builds, and its session reports that no kernel is registered.
// Data-movement kernels, Cast and MatMul cover every dtype.
using kernel_real_types = type_list<std::int32_t, std::int64_t, float, double>;
using kernel_float_types = type_list<float, double>;
using kernel_number_types = type_list<std::int32_t, std::int64_t, float, double, complex64, complex128>;
using kernel_float_complex_types = type_list<float, double, complex64, complex128>;
using kernel_all_types = type_list<bool, std::uint8_t, std::int32_t, std::int64_t, half, bfloat16, float, double,
                                   complex64, complex128>;
using kernel_compare_types = type_list<bool, std::int32_t, std::int64_t, float, double>;

// The kernel for one dtype T of a typed kernel template, for every T in a type_list.
template <template <class> class K, class... Ts>
void register_for(const char* op, const char* type_attr, type_list<Ts...>) {
  (register_cpu_kernel<K<Ts>>(op, {type_attr, dtype_of<Ts>}), ...);
}

}  // namespace weft::cpu
