/// @file
/// shape: the dims of a tensor (rank = dims.size(); rank 0 is a scalar).
/// partial_shape: what graph construction knows before running: an unknown rank, or
/// dims where -1 (unknown_dim) stands for a size known only at run time.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <weft/core/checked.hpp>
#include <weft/core/error.hpp>

namespace weft {

inline constexpr std::int64_t unknown_dim = -1;
/// The most dims a shape built from a tensor of dims may have (TensorFlow's limit too).
inline constexpr int max_rank = 254;

class shape {
 public:
  shape() = default;
  shape(std::initializer_list<std::int64_t> dims) : dims_(dims) { check(); }
  explicit shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) { check(); }

  int rank() const noexcept { return static_cast<int>(dims_.size()); }
  std::int64_t dim(int i) const {
    if (i < 0 || i >= rank()) fail(error_code::out_of_range, "shape ", *this, " has no dimension ", i);
    return dims_[static_cast<std::size_t>(i)];
  }
  std::int64_t operator[](int i) const noexcept { return dims_[static_cast<std::size_t>(i)]; }
  const std::vector<std::int64_t>& dims() const noexcept { return dims_; }

  std::int64_t num_elements() const noexcept {
    std::int64_t n = 1;
    for (auto d : dims_) n *= d;
    return n;
  }
  bool is_scalar() const noexcept { return dims_.empty(); }

  friend bool operator==(const shape&, const shape&) = default;

 private:
  /// The product of a shape's non-zero dims fits in int64, so products of any of its dims
  /// (element counts, strides) need no check.
  void check() const { (void)checked_element_count(dims_, "shape"); }
  std::vector<std::int64_t> dims_;
};

inline std::ostream& operator<<(std::ostream& out, const shape& s) {
  out << '[';
  for (int i = 0; i < s.rank(); ++i) out << (i ? "," : "") << s[i];
  return out << ']';
}

inline std::string to_string(const shape& s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

class partial_shape {
 public:
  partial_shape() = default;  ///< unknown rank
  partial_shape(std::initializer_list<std::int64_t> dims) : dims_(std::vector<std::int64_t>(dims)) {}
  explicit partial_shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {}
  partial_shape(const shape& s) : dims_(s.dims()) {}  // NOLINT: a known shape is a partial one

  static partial_shape unknown_rank() { return {}; }
  static partial_shape unknown_of_rank(int rank) {
    return partial_shape(std::vector<std::int64_t>(static_cast<std::size_t>(rank), unknown_dim));
  }

  bool rank_known() const noexcept { return dims_.has_value(); }
  int rank() const noexcept { return dims_ ? static_cast<int>(dims_->size()) : -1; }
  std::int64_t operator[](int i) const noexcept { return (*dims_)[static_cast<std::size_t>(i)]; }
  const std::vector<std::int64_t>& dims() const { return dims_.value(); }
  bool fully_known() const noexcept {
    if (!dims_) return false;
    for (auto d : *dims_)
      if (d < 0) return false;
    return true;
  }
  shape to_shape() const { return shape(dims()); }

  /// True when a run-time shape `s` is one this partial shape allows.
  bool accepts(const shape& s) const noexcept {
    if (!dims_) return true;
    if (static_cast<int>(dims_->size()) != s.rank()) return false;
    for (int i = 0; i < s.rank(); ++i)
      if ((*this)[i] >= 0 && (*this)[i] != s[i]) return false;
    return true;
  }

  friend bool operator==(const partial_shape&, const partial_shape&) = default;

 private:
  std::optional<std::vector<std::int64_t>> dims_;
};

inline std::ostream& operator<<(std::ostream& out, const partial_shape& s) {
  if (!s.rank_known()) return out << "<unknown>";
  out << '[';
  for (int i = 0; i < s.rank(); ++i) {
    out << (i ? "," : "");
    if (s[i] < 0) out << '?'; else out << s[i];
  }
  return out << ']';
}

}  // namespace weft
