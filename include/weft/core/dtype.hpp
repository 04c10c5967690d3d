/// @file
/// dtype: the element types of the whitepaper (§2) and their C++ counterparts.
/// float16 and bfloat16 are Eigen::half and Eigen::bfloat16; complex types are std::complex;
/// string (TensorFlow's variable-length byte strings) is std::string, host memory only.
#pragma once

#include <Eigen/Core>

#include <complex>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>

#include <weft/core/error.hpp>

namespace weft {

/// An element type (TensorFlow's DataType, its names): bool, signed and unsigned integers,
/// float16, bfloat16, float32, float64, complex64, complex128 and string.
enum class dtype : std::uint8_t {
  invalid = 0,
  boolean,
  int8,
  int16,
  int32,
  int64,
  uint8,
  uint16,
  uint32,
  uint64,
  float16,
  bfloat16,
  float32,
  float64,
  complex64,
  complex128,
  string,
};

/// Every dtype code is below dtype_count. The fixed-size element types (bool and the numbers)
/// are the codes 1 to plain_dtype_count - 1: what a "type" attr admits unless the op takes
/// strings too ("any type"); string is the one code past them.
inline constexpr int dtype_count = 17;
inline constexpr int plain_dtype_count = 16;  ///< see dtype_count

using half = Eigen::half;                  ///< float16's C++ type
using bfloat16 = Eigen::bfloat16;          ///< bfloat16's C++ type
using complex64 = std::complex<float>;     ///< complex64's C++ type
using complex128 = std::complex<double>;  ///< complex128's C++ type

/// The dtype's name: "float32", "bool", "string" ("invalid" for dtype::invalid).
inline constexpr std::string_view name(dtype t) noexcept {
  switch (t) {
    case dtype::invalid: return "invalid";
    case dtype::boolean: return "bool";
    case dtype::int8: return "int8";
    case dtype::int16: return "int16";
    case dtype::int32: return "int32";
    case dtype::int64: return "int64";
    case dtype::uint8: return "uint8";
    case dtype::uint16: return "uint16";
    case dtype::uint32: return "uint32";
    case dtype::uint64: return "uint64";
    case dtype::float16: return "float16";
    case dtype::bfloat16: return "bfloat16";
    case dtype::float32: return "float32";
    case dtype::float64: return "float64";
    case dtype::complex64: return "complex64";
    case dtype::complex128: return "complex128";
    case dtype::string: return "string";
  }
  return "invalid";
}

/// Writes name(t).
inline std::ostream& operator<<(std::ostream& out, dtype t) { return out << name(t); }

/// Parses a dtype name as name() prints it; throws on anything else.
inline dtype parse_dtype(std::string_view s) {
  for (int i = 1; i < dtype_count; ++i)
    if (name(static_cast<dtype>(i)) == s) return static_cast<dtype>(i);
  fail(error_code::invalid_argument, "unknown dtype '", s, "'");
}

/// An element's size in bytes (a string element: sizeof(std::string); invalid: 0).
inline constexpr std::size_t size_of(dtype t) noexcept {
  switch (t) {
    case dtype::boolean:
    case dtype::int8:
    case dtype::uint8: return 1;
    case dtype::int16:
    case dtype::uint16:
    case dtype::float16:
    case dtype::bfloat16: return 2;
    case dtype::int32:
    case dtype::uint32:
    case dtype::float32: return 4;
    case dtype::int64:
    case dtype::uint64:
    case dtype::float64:
    case dtype::complex64: return 8;
    case dtype::complex128: return 16;
    case dtype::string: return sizeof(std::string);  // an element is a std::string object
    case dtype::invalid: return 0;
  }
  return 0;
}

/// float16, bfloat16, float32 or float64.
inline constexpr bool is_floating(dtype t) noexcept {
  return t == dtype::float16 || t == dtype::bfloat16 || t == dtype::float32 || t == dtype::float64;
}
/// complex64 or complex128.
inline constexpr bool is_complex(dtype t) noexcept {
  return t == dtype::complex64 || t == dtype::complex128;
}
/// A signed or unsigned integer (not bool).
inline constexpr bool is_integer(dtype t) noexcept {
  return t >= dtype::int8 && t <= dtype::uint64;
}
/// Bool and the numbers: elements that are plain bytes, copied by memcpy (string's are not).
inline constexpr bool is_plain(dtype t) noexcept {
  return t != dtype::invalid && static_cast<int>(t) < plain_dtype_count;
}

template <class T> struct dtype_traits;  ///< undefined: T is not a weft element type
#define WEFT_DETAIL_DTYPE(T, D)                                  \
  /** T is the element type of dtype::D. */                      \
  template <> struct dtype_traits<T> {                           \
    static constexpr dtype value = dtype::D; /**< dtype::D */    \
  }
WEFT_DETAIL_DTYPE(bool, boolean);
WEFT_DETAIL_DTYPE(std::int8_t, int8);
WEFT_DETAIL_DTYPE(std::int16_t, int16);
WEFT_DETAIL_DTYPE(std::int32_t, int32);
WEFT_DETAIL_DTYPE(std::int64_t, int64);
WEFT_DETAIL_DTYPE(std::uint8_t, uint8);
WEFT_DETAIL_DTYPE(std::uint16_t, uint16);
WEFT_DETAIL_DTYPE(std::uint32_t, uint32);
WEFT_DETAIL_DTYPE(std::uint64_t, uint64);
WEFT_DETAIL_DTYPE(half, float16);
WEFT_DETAIL_DTYPE(bfloat16, bfloat16);
WEFT_DETAIL_DTYPE(float, float32);
WEFT_DETAIL_DTYPE(double, float64);
WEFT_DETAIL_DTYPE(complex64, complex64);
WEFT_DETAIL_DTYPE(complex128, complex128);
WEFT_DETAIL_DTYPE(std::string, string);
#undef WEFT_DETAIL_DTYPE

template <class T>
concept element = requires { dtype_traits<std::remove_cv_t<T>>::value; };

/// The dtype of element type T: dtype_of<float> is dtype::float32.
template <element T>
inline constexpr dtype dtype_of = dtype_traits<std::remove_cv_t<T>>::value;

/// A type as a value, for generic lambdas (dispatch() passes one; the lambda reads its
/// member `type`).
template <class T> struct type_tag { using type = T; /**< the type */ };

/// Calls f(type_tag<T>{}) for the C++ type T of `t`, restricted to the listed types;
/// any other dtype calls on_other(). Kernels use it to instantiate only what they support.
template <class... Ts, class F, class G>
decltype(auto) dispatch(dtype t, F&& f, G&& on_other) {
  using result = decltype(f(type_tag<float>{}));
  if constexpr (std::is_void_v<result>) {
    bool hit = ((t == dtype_of<Ts> ? (f(type_tag<Ts>{}), true) : false) || ...);
    if (!hit) on_other();
  } else {
    result r{};
    bool hit = ((t == dtype_of<Ts> ? (r = f(type_tag<Ts>{}), true) : false) || ...);
    if (!hit) return on_other();
    return r;
  }
}

/// A list of element types (dispatcher's, the DSL's checks).
template <class... Ts> struct type_list {};

/// Every element type but string.
using all_types = type_list<bool, std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t,
                            std::uint16_t, std::uint32_t, std::uint64_t, half, bfloat16, float, double,
                            complex64, complex128>;
/// The integers and floating types (not bool, not complex).
using real_number_types = type_list<std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t,
                                    std::uint16_t, std::uint32_t, std::uint64_t, half, bfloat16, float,
                                    double>;
/// real_number_types and the complex types.
using number_types = type_list<std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t,
                               std::uint16_t, std::uint32_t, std::uint64_t, half, bfloat16, float, double,
                               complex64, complex128>;
using float_types = type_list<half, bfloat16, float, double>;  ///< the floating types
/// The floating and complex types.
using float_complex_types = type_list<half, bfloat16, float, double, complex64, complex128>;
using index_types = type_list<std::int32_t, std::int64_t>;  ///< int32 and int64 (indices, shapes)
/// The dtype sets of ops whose definitions name a set of their own (ops/math_ops.hpp,
/// ops/matrix_ops.hpp), for typed code's checks and the kernels' instantiations.
using signed_real_types = type_list<std::int8_t, std::int16_t, std::int32_t, std::int64_t, half, bfloat16, float, double>;
/// The signed integers, the floating and the complex types (Neg's).
using signed_number_types =
    type_list<std::int8_t, std::int16_t, std::int32_t, std::int64_t, half, bfloat16, float, double, complex64, complex128>;
using pow_types = type_list<std::int32_t, std::int64_t, half, bfloat16, float, double, complex64, complex128>;  ///< Pow's
using matmul_types = type_list<std::int32_t, std::int64_t, half, bfloat16, float, double, complex64, complex128>;  ///< MatMul's

/// float16 and bfloat16.
template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

/// dispatch() over a type_list: dispatcher<float_types>::run(t, f, on_other).
template <class List> struct dispatcher;
/// See the primary template.
template <class... Ts> struct dispatcher<type_list<Ts...>> {
  /// dispatch<Ts...>(t, f, on_other).
  template <class F, class G>
  static decltype(auto) run(dtype t, F&& f, G&& on_other) {
    return dispatch<Ts...>(t, static_cast<F&&>(f), static_cast<G&&>(on_other));
  }
};

}  // namespace weft
