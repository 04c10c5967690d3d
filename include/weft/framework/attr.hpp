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

enum class attr_kind { integer, real, boolean, string, type, shape, tensor, int_list, real_list, type_list, shape_list, string_list };

inline const char* name(attr_kind k) noexcept {
  constexpr const char* names[] = {"int",       "float",      "bool",       "string",     "type",      "shape",
                                   "tensor",    "list(int)",  "list(float)", "list(type)", "list(shape)", "list(string)"};
  return names[static_cast<int>(k)];
}

class attr_value {
 public:
  using storage = std::variant<std::int64_t, double, bool, std::string, dtype, partial_shape, tensor,
                               std::vector<std::int64_t>, std::vector<double>, std::vector<dtype>,
                               std::vector<partial_shape>, std::vector<std::string>>;

  attr_value() = default;
  template <class T>
    requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
  attr_value(T v) : v_(static_cast<std::int64_t>(v)) {}  // NOLINT
  attr_value(double v) : v_(v) {}                           // NOLINT
  attr_value(float v) : v_(static_cast<double>(v)) {}       // NOLINT
  attr_value(bool v) : v_(v) {}                             // NOLINT
  attr_value(std::string v) : v_(std::move(v)) {}           // NOLINT
  attr_value(const char* v) : v_(std::string(v)) {}         // NOLINT
  attr_value(dtype v) : v_(v) {}                            // NOLINT
  attr_value(partial_shape v) : v_(std::move(v)) {}         // NOLINT
  attr_value(const shape& v) : v_(partial_shape(v)) {}      // NOLINT
  attr_value(tensor v) : v_(std::move(v)) {}                // NOLINT
  attr_value(std::vector<std::int64_t> v) : v_(std::move(v)) {}  // NOLINT
  attr_value(std::initializer_list<std::int64_t> v) : v_(std::vector<std::int64_t>(v)) {}  // NOLINT
  attr_value(std::vector<int> v) : v_(std::vector<std::int64_t>(v.begin(), v.end())) {}    // NOLINT
  attr_value(std::vector<double> v) : v_(std::move(v)) {}           // NOLINT
  attr_value(std::vector<dtype> v) : v_(std::move(v)) {}            // NOLINT
  attr_value(std::vector<partial_shape> v) : v_(std::move(v)) {}    // NOLINT
  attr_value(std::vector<std::string> v) : v_(std::move(v)) {}      // NOLINT

  attr_kind kind() const noexcept { return static_cast<attr_kind>(v_.index()); }
  const storage& value() const noexcept { return v_; }

  template <class T>
  const T* get_if() const noexcept {
    return std::get_if<T>(&v_);
  }

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
