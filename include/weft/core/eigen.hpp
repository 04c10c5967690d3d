/// @file
/// Conversions between weft::tensor and Eigen::Tensor (either layout). Maps are views;
/// from_eigen copies into a fresh weft buffer.
#pragma once

#include <weft/core/eigen_tensor.hpp>

#include <array>

#include <weft/core/tensor.hpp>

namespace weft {

/// A row-major Eigen view of `t`'s buffer; `t` must have rank Rank and element type T.
template <element T, int Rank>
Eigen::TensorMap<Eigen::Tensor<T, Rank, Eigen::RowMajor, Eigen::Index>> eigen_map(const tensor& t) {
  if (t.rank() != Rank)
    fail(error_code::invalid_argument, "eigen_map: tensor of shape ", t.shape(), " has rank ", t.rank(),
         ", not ", Rank);
  std::array<Eigen::Index, Rank> dims{};
  for (int i = 0; i < Rank; ++i) dims[static_cast<std::size_t>(i)] = t.shape()[i];
  return Eigen::TensorMap<Eigen::Tensor<T, Rank, Eigen::RowMajor, Eigen::Index>>(t.data<T>(), dims);
}

/// A tensor holding a copy of Eigen tensor e (row-major whatever e's layout).
template <class Scalar, int Rank, int Options, class Index>
tensor from_eigen(const Eigen::Tensor<Scalar, Rank, Options, Index>& e) {
  std::vector<std::int64_t> dims(static_cast<std::size_t>(Rank));
  for (int i = 0; i < Rank; ++i) dims[static_cast<std::size_t>(i)] = e.dimension(i);
  tensor t(dtype_of<Scalar>, shape(std::move(dims)));
  if constexpr ((Options & Eigen::RowMajor) != 0 || Rank <= 1) {
    std::copy(e.data(), e.data() + e.size(), t.data<Scalar>());
  } else {
    // Column-major: let Eigen reorder into a row-major map of the same dims.
    auto out = eigen_map<Scalar, Rank>(t);
    std::array<Index, Rank> reverse{};
    for (int i = 0; i < Rank; ++i) reverse[static_cast<std::size_t>(i)] = Rank - 1 - i;
    out = e.swap_layout().shuffle(reverse);
  }
  return t;
}

/// A copy of t (dtype T, rank Rank) as an Eigen tensor of layout Options.
template <element T, int Rank, int Options = Eigen::RowMajor>
Eigen::Tensor<T, Rank, Options, Eigen::Index> to_eigen(const tensor& t) {
  auto map = eigen_map<T, Rank>(t);
  if constexpr ((Options & Eigen::RowMajor) != 0) {
    return Eigen::Tensor<T, Rank, Options, Eigen::Index>(map);
  } else {
    std::array<Eigen::Index, Rank> reverse{};
    for (int i = 0; i < Rank; ++i) reverse[static_cast<std::size_t>(i)] = Rank - 1 - i;
    return Eigen::Tensor<T, Rank, Options, Eigen::Index>(map.swap_layout().shuffle(reverse));
  }
}

}  // namespace weft
