/// @file
/// Element conversion between any two dtypes, with TensorFlow's Cast semantics, through a
/// table of plain loops: one small function per (from, to) pair instead of a kernel each.
/// Cast uses it, and so do the kernels that compute a dtype through a wider one (see
/// compute_t in common.hpp). The functions are templates, so that including this header
/// instantiates nothing until one is called.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <weft/kernels/cpu/common.hpp>

namespace weft::cpu {

namespace detail {
template <class T>
inline constexpr bool is_complex_v = std::is_same_v<T, complex64> || std::is_same_v<T, complex128>;

template <class To, class From>
To convert(const From& v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (is_complex_v<From>) {
    if constexpr (is_complex_v<To>)
      return To(static_cast<typename To::value_type>(v.real()), static_cast<typename To::value_type>(v.imag()));
    else
      return convert<To>(v.real());  // TensorFlow keeps the real part
  } else if constexpr (is_complex_v<To>) {
    return To(static_cast<typename To::value_type>(static_cast<double>(v)), 0);
  } else if constexpr (std::is_integral_v<To> && !std::is_integral_v<From>) {
    // Float to int: NaN gives 0 and out-of-range values saturate, instead of undefined behaviour.
    double d = static_cast<double>(v);
    if (std::isnan(d)) return To(0);
    if (d <= static_cast<double>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (d >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(d);
  } else if constexpr (is_half_v<To> && std::is_integral_v<From>) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);  // integer to integer wraps modulo 2^bits (C++20)
  }
}

using convert_fn = void (*)(const void* in, void* out, std::int64_t begin, std::int64_t end);

/// bfloat16 to float and back through their bits (Eigen converts one element at a time and
/// branches on NaN), with Eigen's results: a float rounds to the nearest even bfloat16, and
/// NaN becomes the quiet NaN of its sign (0x7FC0, 0xFFC0). Widening goes sixteen at a time in
/// the compilers' generic vectors (GCC left the loop scalar at -O2); GCC vectorizes the
/// narrowing loop itself where the target allows (-march=native on an AVX-512 CPU: 5 times
/// faster than without -march flags).
inline void bfloat16_to_float(const bfloat16* in, float* out, std::int64_t n) {
  typedef std::uint16_t u16x16 __attribute__((vector_size(32)));
  typedef std::uint16_t u16x16_u __attribute__((vector_size(32), aligned(2), may_alias));  // at any bfloat16's address
  typedef std::uint32_t u32x16 __attribute__((vector_size(64)));
  typedef std::uint32_t u32x16_u __attribute__((vector_size(64), aligned(4), may_alias));
  const std::int64_t vectors = n - n % 16;
  for (std::int64_t k = 0; k < vectors; k += 16) {
    const u16x16 b = *reinterpret_cast<const u16x16_u*>(in + k);
    *reinterpret_cast<u32x16_u*>(out + k) = __builtin_convertvector(b, u32x16) << 16;
  }
  for (std::int64_t k = vectors; k < n; ++k)
    out[k] = std::bit_cast<float>(static_cast<std::uint32_t>(std::bit_cast<std::uint16_t>(in[k])) << 16);
}
/// x's nearest bfloat16 (ties to even; NaN: the quiet NaN of its sign), as its bits.
inline std::uint16_t bfloat16_bits(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t nan = ((u >> 16) & 0x8000u) | 0x7FC0u;
  return static_cast<std::uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}
/// The float a bfloat16's bits stand for (exact).
inline float bfloat16_value(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }
inline void float_to_bfloat16(const float* in, bfloat16* out, std::int64_t n) {
  for (std::int64_t k = 0; k < n; ++k) out[k] = std::bit_cast<bfloat16>(bfloat16_bits(in[k]));
}

template <class To, class From>
void convert_range(const void* in, void* out, std::int64_t begin, std::int64_t end) {
  const From* i = static_cast<const From*>(in);
  To* o = static_cast<To*>(out);
  if constexpr (std::is_same_v<From, bfloat16> && std::is_same_v<To, float>) {
    bfloat16_to_float(i + begin, o + begin, end - begin);
  } else if constexpr (std::is_same_v<From, float> && std::is_same_v<To, bfloat16>) {
    float_to_bfloat16(i + begin, o + begin, end - begin);
  } else {
    for (std::int64_t k = begin; k < end; ++k) o[k] = convert<To>(i[k]);
  }
}

using convert_table = std::array<std::array<convert_fn, dtype_count>, dtype_count>;

template <class From, class... To>
void fill_convert_row(convert_table& t, type_list<To...>) {
  ((t[static_cast<std::size_t>(dtype_of<From>)][static_cast<std::size_t>(dtype_of<To>)] = &convert_range<To, From>), ...);
}
template <class... From>
void fill_convert_table(convert_table& t, type_list<From...>) {
  (fill_convert_row<From>(t, all_types{}), ...);
}
}  // namespace detail

namespace detail {
template <int = 0>
void run_convert(kernel_context& ctx, convert_fn f, const tensor& in, tensor& out) {
  const void* src = in.raw_data();
  void* dst = out.raw_data();
  ctx.parallel_for(in.num_elements(), 2, [&](std::int64_t b, std::int64_t e) { f(src, dst, b, e); });
}
template <int = 0>
tensor converted(kernel_context& ctx, convert_fn f, const tensor& in, dtype to) {
  tensor out(to, in.shape());
  run_convert(ctx, f, in, out);
  return out;
}
}  // namespace detail

/// The loop converting elements of `from` to `to`, for dtypes known only at run time (Cast).
template <int = 0>
detail::convert_fn converter(dtype from, dtype to) {
  static const detail::convert_table table = [] {
    detail::convert_table t{};
    detail::fill_convert_table(t, all_types{});
    return t;
  }();
  auto f = static_cast<std::size_t>(from), t = static_cast<std::size_t>(to);
  if (f >= table.size() || t >= table.size() || !table[f][t])
    fail(error_code::unimplemented, "cannot convert ", from, " to ", to);
  return table[f][t];
}

/// Writes the elements of `in`, converted, into `out` (same number of elements).
template <int = 0>
void convert_into(kernel_context& ctx, const tensor& in, tensor& out) {
  detail::run_convert(ctx, converter(in.dtype(), out.dtype()), in, out);
}

/// For kernels that compute dtype T as compute_t<T>: the conversions there and back, or null
/// when T computes as itself.
template <class T>
inline constexpr detail::convert_fn widen_fn =
    is_converted_v<T> ? &detail::convert_range<compute_t<T>, T> : nullptr;
/// Converts compute_t<T> back to T; null when T computes as itself.
template <class T>
inline constexpr detail::convert_fn narrow_fn =
    is_converted_v<T> ? &detail::convert_range<T, compute_t<T>> : nullptr;

/// x (of dtype T) as compute_t<T>: converted when T computes wider, x itself otherwise.
template <class T>
tensor widened(kernel_context& ctx, const tensor& x) {
  if constexpr (is_converted_v<T>) return detail::converted(ctx, widen_fn<T>, x, dtype_of<compute_t<T>>);
  else return x;
}

}  // namespace weft::cpu
