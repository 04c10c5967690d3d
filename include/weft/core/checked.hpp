/// @file
/// Checked size arithmetic. Every element count, byte size, output dimension and index sum
/// that is computed from user data (shapes, attributes, tensor values, file headers) goes
/// through these functions, so a product or sum that does not fit is a weft::error naming
/// what was computed, never a wrapped size that a kernel then writes past.
///
/// Offsets inside a tensor that already exists need no check: its element count and byte
/// size were checked when it was allocated, so every index below them fits. The rule of
/// the tree (docs/reliability.md; tools/check_size_arithmetic.py greps for it): a new size
/// is computed here, or from dims of a weft::shape, whose constructor checks the product.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include <weft/core/error.hpp>

namespace weft {

/// The largest buffer weft asks any allocator for: a tensor's bytes plus its header must
/// fit in ptrdiff_t, so that pointer differences inside it are defined.
inline constexpr std::size_t max_buffer_bytes = std::size_t{1} << 62;

/// a * b for non-negative sizes; `what` names the quantity in the error.
[[nodiscard]] inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(error_code::invalid_argument, what, ": ", a, " * ", b, " overflows int64");
  return r;
}

/// a + b; `what` names the quantity in the error.
[[nodiscard]] inline std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    fail(error_code::invalid_argument, what, ": ", a, " + ", b, " overflows int64");
  return r;
}

/// The number of elements of `dims`. A negative dim is an error, and so is a product of the
/// non-zero dims that does not fit in int64, even where a zero dim makes the count 0
/// ([0, 2^62, 4] as much as [2^62, 4, 0]): then the product of any of a shape's dims (a
/// stride, a row's length, a group of merged dims) fits too, empty shapes included.
[[nodiscard]] inline std::int64_t checked_element_count(std::span<const std::int64_t> dims, const char* what) {
  std::int64_t n = 1;
  bool empty = false;
  for (auto d : dims) {
    if (d < 0) fail(error_code::invalid_argument, what, ": negative dimension ", d);
    if (d == 0)
      empty = true;
    else
      n = checked_mul(n, d, what);
  }
  return empty ? 0 : n;
}

/// The bytes of `elements` elements of `element_size` bytes each, at most max_buffer_bytes.
[[nodiscard]] inline std::size_t checked_byte_size(std::int64_t elements, std::size_t element_size, const char* what) {
  std::size_t r;
  if (elements < 0 || __builtin_mul_overflow(static_cast<std::size_t>(elements), element_size, &r) ||
      r > max_buffer_bytes)
    fail(error_code::resource_exhausted, what, ": ", elements, " elements of ", element_size,
         " bytes are more than the largest buffer (2^62 bytes)");
  return r;
}

}  // namespace weft
