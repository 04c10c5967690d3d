/// @file
/// tensor_of<T, Rank>: a tensor whose dtype (and rank, unless Rank is -1) is part of its
/// type. Fetching a typed expression returns one; feeding a placeholder takes one, so a
/// feed of the wrong dtype does not compile.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include <weft/core/tensor.hpp>

namespace weft {

/// A tensor whose element type (and rank, unless -1) the C++ type states: what a typed run
/// returns (client_session::run) and feeds take. Shares the untyped tensor's buffer.
template <element T, int Rank = -1>
class tensor_of {
 public:
  using value_type = T;  ///< the element type
  static constexpr int rank = Rank;  ///< the static rank (-1: any)

  tensor_of() = default;
  /// From values in row-major order.
  tensor_of(const std::vector<T>& values, weft::shape s) : t_(tensor::from_vector(values, std::move(s))) {
    check_rank("tensor_of");
  }
  /// A scalar.
  explicit tensor_of(T value)
    requires(Rank == 0 || Rank == -1)
      : t_(tensor::scalar(value)) {}

  /// Wraps an untyped tensor; throws when its dtype or rank differ.
  static tensor_of from(tensor t) {
    if (t.dtype() != dtype_of<T>)
      fail(error_code::invalid_argument, "tensor_of<", dtype_of<T>, ">: the tensor is ", t.dtype(), t.shape());
    tensor_of r;
    r.t_ = std::move(t);
    r.check_rank("tensor_of::from");
    return r;
  }

  /// The untyped tensor.
  const tensor& untyped() const noexcept { return t_; }
  /// A typed tensor converts to its untyped one.
  operator const tensor&() const noexcept { return t_; }  // NOLINT: typed converts to untyped

  /// The dims.
  const weft::shape& shape() const noexcept { return t_.shape(); }
  /// Dim i (checked).
  std::int64_t dim(int i) const { return t_.dim(i); }
  /// The element count.
  std::int64_t num_elements() const noexcept { return t_.num_elements(); }
  /// The elements, row-major.
  std::span<const T> flat() const { return t_.flat<T>(); }
  /// The elements copied into a vector.
  std::vector<T> to_vector() const { return t_.to_vector<T>(); }
  /// The one element of a one-element tensor (checked).
  T scalar() const { return t_.scalar_value<T>(); }

  /// Element at a multi-index, bounds-checked.
  template <std::integral... I>
  T operator()(I... index) const {
    static_assert(Rank < 0 || static_cast<int>(sizeof...(I)) == Rank,
                  "weft::tensor_of: the number of indices differs from the tensor's rank");
    const std::array<std::int64_t, sizeof...(I)> idx{static_cast<std::int64_t>(index)...};
    if (static_cast<int>(idx.size()) != t_.rank())
      fail(error_code::invalid_argument, "tensor_of: ", idx.size(), " indices for a tensor of shape ", t_.shape());
    std::int64_t offset = 0;
    for (int d = 0; d < t_.rank(); ++d) {
      auto i = idx[static_cast<std::size_t>(d)];
      if (i < 0 || i >= t_.dim(d))
        fail(error_code::out_of_range, "tensor_of: index ", i, " out of range for dim ", d, " of shape ", t_.shape());
      offset = offset * t_.dim(d) + i;
    }
    return t_.data<T>()[offset];
  }

 private:
  void check_rank(const char* who) const {
    if (Rank >= 0 && t_.rank() != Rank)
      fail(error_code::invalid_argument, who, ": shape ", t_.shape(), " does not have rank ", Rank);
  }
  tensor t_;
};

}  // namespace weft
