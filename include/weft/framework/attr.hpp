/// @file
/// attr_value: an op attribute fixed at graph-construction time (whitepaper §2):
/// int, float, bool, string, dtype, shape, tensor, and lists of int, float, dtype, shape, string.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <weft/core/dtype.hpp>
#include <weft/core/shape.hpp>
#include <weft/core/tensor.hpp>

namespace weft {

/// What an attr holds (the alternatives of attr_value::storage, in order).
enum class attr_kind { integer, real, boolean, string, type, shape, tensor, int_list, real_list, type_list, shape_list, string_list };

/// The kind's name as op specs spell it: "int", "float", "list(type)", ...
inline const char* name(attr_kind k) noexcept {
  constexpr const char* names[] = {"int",       "float",      "bool",       "string",     "type",      "shape",
                                   "tensor",    "list(int)",  "list(float)", "list(type)", "list(shape)", "list(string)"};
  return names[static_cast<int>(k)];
}

/// A node attribute's value: a number, bool, string, dtype, shape, tensor or a list. Built
/// implicitly from the C++ value (`{"T", dtype::float32}`, `{"axis", 1}`, `{"strides",
/// {1, 2, 2, 1}}`); ints are held as int64 and floats as double.
class attr_value {
 public:
  /// The held value, one alternative per attr_kind.
  using storage = std::variant<std::int64_t, double, bool, std::string, dtype, partial_shape, tensor,
                               std::vector<std::int64_t>, std::vector<double>, std::vector<dtype>,
                               std::vector<partial_shape>, std::vector<std::string>>;

  /// The int 0.
  attr_value() = default;
  /// An int (any integral type but bool), held as int64.
  template <class T>
    requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
  attr_value(T v) : v_(static_cast<std::int64_t>(v)) {}  // NOLINT
  /// A float, held as double.
  attr_value(double v) : v_(v) {}                           // NOLINT
  /// A float, held as double.
  attr_value(float v) : v_(static_cast<double>(v)) {}       // NOLINT
  /// A bool.
  attr_value(bool v) : v_(v) {}                             // NOLINT
  /// A string.
  attr_value(std::string v) : v_(std::move(v)) {}           // NOLINT
  /// A string.
  attr_value(const char* v) : v_(std::string(v)) {}         // NOLINT
  /// A type.
  attr_value(dtype v) : v_(v) {}                            // NOLINT
  /// A shape, possibly partly known.
  attr_value(partial_shape v) : v_(std::move(v)) {}         // NOLINT
  /// A shape, held as a partial_shape.
  attr_value(const shape& v) : v_(partial_shape(v)) {}      // NOLINT
  /// A tensor (Const's value), shared, not copied.
  attr_value(tensor v) : v_(std::move(v)) {}                // NOLINT
  /// A list(int).
  attr_value(std::vector<std::int64_t> v) : v_(std::move(v)) {}  // NOLINT
  /// A list(int): `{1, 2, 2, 1}`.
  attr_value(std::initializer_list<std::int64_t> v) : v_(std::vector<std::int64_t>(v)) {}  // NOLINT
  /// A list(int), held as int64.
  attr_value(std::vector<int> v) : v_(std::vector<std::int64_t>(v.begin(), v.end())) {}    // NOLINT
  /// A list(float).
  attr_value(std::vector<double> v) : v_(std::move(v)) {}           // NOLINT
  /// A list(type).
  attr_value(std::vector<dtype> v) : v_(std::move(v)) {}            // NOLINT
  /// A list(shape).
  attr_value(std::vector<partial_shape> v) : v_(std::move(v)) {}    // NOLINT
  /// A list(string).
  attr_value(std::vector<std::string> v) : v_(std::move(v)) {}      // NOLINT

  /// What the value holds.
  attr_kind kind() const noexcept { return static_cast<attr_kind>(v_.index()); }
  /// The held value (std::visit it).
  const storage& value() const noexcept { return v_; }

  /// The value as T (one of storage's alternatives), or null when it holds another.
  template <class T>
  const T* get_if() const noexcept {
    return std::get_if<T>(&v_);
  }

  /// Equal when of one kind and equal values; tensors compare by dtype, shape and bytes.
  friend bool operator==(const attr_value& a, const attr_value& b) {
    if (a.v_.index() != b.v_.index()) return false;
    if (auto* ta = std::get_if<tensor>(&a.v_)) {
      const tensor& tb = std::get<tensor>(b.v_);
      if (ta->dtype() != tb.dtype() || ta->shape() != tb.shape()) return false;
      if (ta->dtype() == dtype::string) {
        const auto x = ta->flat<std::string>(), y = tb.flat<std::string>();
        return std::equal(x.begin(), x.end(), y.begin());
      }
      return ta->bytes() == 0 || std::memcmp(ta->raw_data(), tb.raw_data(), ta->bytes()) == 0;
    }
    return std::visit(
        [&](const auto& va) {
          using V = std::decay_t<decltype(va)>;
          if constexpr (std::is_same_v<V, tensor>) return false;  // handled above
          else return va == std::get<V>(b.v_);
        },
        a.v_);
  }

 private:
  storage v_{std::int64_t{0}};
};

/// Writes the value for messages: `true`, `"same"`, `float32`, `[1,2]`, a tensor as `float32[2,2]`.
inline std::ostream& operator<<(std::ostream& out, const attr_value& a) {
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, bool>) {
          out << (v ? "true" : "false");
        } else if constexpr (std::is_same_v<V, std::string>) {
          out << '"' << v << '"';
        } else if constexpr (std::is_same_v<V, tensor>) {
          out << v.dtype() << v.shape();
        } else if constexpr (std::is_same_v<V, std::vector<std::int64_t>> || std::is_same_v<V, std::vector<double>> ||
                             std::is_same_v<V, std::vector<dtype>> ||
                             std::is_same_v<V, std::vector<partial_shape>> ||
                             std::is_same_v<V, std::vector<std::string>>) {
          out << '[';
          for (std::size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
          out << ']';
        } else {
          out << v;
        }
      },
      a.value());
  return out;
}

}  // namespace weft
