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

/// A dimension not known until run time, in a partial_shape (a Placeholder's batch dim).
inline constexpr std::int64_t unknown_dim = -1;
/// The most dims a shape built from a tensor of dims may have (TensorFlow's limit too).
inline constexpr int max_rank = 254;

/// A tensor's dimensions, all known: rank 0 is a scalar. A negative dim, or dims whose
/// product overflows int64, is an error when the shape is made.
class shape {
 public:
  /// A scalar's shape (rank 0).
  shape() = default;
  /// `shape{2, 3}`.
  shape(std::initializer_list<std::int64_t> dims) : dims_(dims) { check(); }
  /// A shape of `dims`.
  explicit shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) { check(); }

  /// How many dims.
  int rank() const noexcept { return static_cast<int>(dims_.size()); }
  /// Dim i (0 <= i < rank(); another i is an out_of_range error).
  std::int64_t dim(int i) const {
    if (i < 0 || i >= rank()) fail(error_code::out_of_range, "shape ", *this, " has no dimension ", i);
    return dims_[static_cast<std::size_t>(i)];
  }
  /// Dim i, unchecked.
  std::int64_t operator[](int i) const noexcept { return dims_[static_cast<std::size_t>(i)]; }
  /// The dims.
  const std::vector<std::int64_t>& dims() const noexcept { return dims_; }

  /// The product of the dims: 1 for a scalar, 0 when a dim is 0.
  std::int64_t num_elements() const noexcept {
    std::int64_t n = 1;
    for (auto d : dims_) n *= d;
    return n;
  }
  /// Whether the rank is 0.
  bool is_scalar() const noexcept { return dims_.empty(); }
  /// Makes it a scalar's shape, keeping the dims' storage for a later assignment (the
  /// executor's input slots, refilled step after step, allocate nothing).
  void clear() noexcept { dims_.clear(); }

  /// Equal when the dims are.
  friend bool operator==(const shape&, const shape&) = default;

 private:
  /// The product of a shape's non-zero dims fits in int64, so products of any of its dims
  /// (element counts, strides) need no check.
  void check() const { (void)checked_element_count(dims_, "shape"); }
  std::vector<std::int64_t> dims_;
};

/// Writes "[2,3]" ("[]" for a scalar).
inline std::ostream& operator<<(std::ostream& out, const shape& s) {
  out << '[';
  for (int i = 0; i < s.rank(); ++i) out << (i ? "," : "") << s[i];
  return out << ']';
}

/// The shape as operator<< writes it.
inline std::string to_string(const shape& s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

/// A shape known in part, as graphs infer them before run time: the rank may be unknown,
/// and any dim may be unknown_dim (printed '?').
class partial_shape {
 public:
  partial_shape() = default;  ///< unknown rank
  /// `partial_shape{unknown_dim, 784}`.
  partial_shape(std::initializer_list<std::int64_t> dims) : dims_(std::vector<std::int64_t>(dims)) {}
  /// A partial shape of `dims` (unknown_dim where unknown).
  explicit partial_shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {}
  /// A known shape is a partial one.
  partial_shape(const shape& s) : dims_(s.dims()) {}  // NOLINT: a known shape is a partial one

  /// Nothing known, not even the rank.
  static partial_shape unknown_rank() { return {}; }
  /// A known rank, every dim unknown.
  static partial_shape unknown_of_rank(int rank) {
    return partial_shape(std::vector<std::int64_t>(static_cast<std::size_t>(rank), unknown_dim));
  }

  /// Whether the rank is known.
  bool rank_known() const noexcept { return dims_.has_value(); }
  /// The rank, or -1 when unknown.
  int rank() const noexcept { return dims_ ? static_cast<int>(dims_->size()) : -1; }
  /// Dim i (unknown_dim when unknown), unchecked; the rank must be known.
  std::int64_t operator[](int i) const noexcept { return (*dims_)[static_cast<std::size_t>(i)]; }
  /// The dims; a failed_precondition error when the rank is unknown (check rank_known()).
  const std::vector<std::int64_t>& dims() const {
    if (!dims_) fail(error_code::failed_precondition, "partial_shape::dims: the rank is unknown");
    return *dims_;
  }
  /// Whether the rank and every dim are known.
  bool fully_known() const noexcept {
    if (!dims_) return false;
    for (auto d : *dims_)
      if (d < 0) return false;
    return true;
  }
  /// The shape, when fully known; an unknown dim or rank is an invalid_argument error.
  shape to_shape() const {
    if (!dims_) fail(error_code::invalid_argument, "partial_shape::to_shape: the rank is unknown");
    return shape(*dims_);
  }

  /// True when a run-time shape `s` is one this partial shape allows.
  bool accepts(const shape& s) const noexcept {
    if (!dims_) return true;
    if (static_cast<int>(dims_->size()) != s.rank()) return false;
    for (int i = 0; i < s.rank(); ++i)
      if ((*this)[i] >= 0 && (*this)[i] != s[i]) return false;
    return true;
  }

  /// Equal when both ranks are unknown, or the dims are equal (unknown_dim equals itself).
  friend bool operator==(const partial_shape&, const partial_shape&) = default;

 private:
  std::optional<std::vector<std::int64_t>> dims_;
};

/// Writes "[?,784]", or "<unknown>" for an unknown rank.
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
