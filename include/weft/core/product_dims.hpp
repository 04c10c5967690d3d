/// @file
/// The dims of a matrix product op(a) op(b) and of a batch of square matrices,
/// device-neutral: the fused products' and the linear algebra ops' kernels on the CPU
/// (kernels/cpu/matmul.hpp, kernels/cpu/training.hpp, kernels/cpu/linalg.hpp) and on the GPU
/// (cuda/kernels.hpp) check their operands here, with the same errors.
#pragma once

#include <cstdint>

#include <weft/core/error.hpp>
#include <weft/core/shape.hpp>

namespace weft {

/// m, k and n of a product op(a)(m, k) op(b)(k, n).
struct product_dims {
  std::int64_t m;  ///< rows of op(a)
  std::int64_t k;  ///< columns of op(a), rows of op(b)
  std::int64_t n;  ///< columns of op(b)
};

/// The dims of op(a) op(b) for operands of shapes a and b, transposed where asked: fails
/// naming both shapes unless both are matrices with equal inner dimensions.
inline product_dims matrix_product_dims(const shape& a, const shape& b, bool ta, bool tb) {
  if (a.rank() != 2 || b.rank() != 2)
    fail(error_code::invalid_argument, "inputs a and b must be matrices, got shapes ", a, " and ", b);
  const product_dims d{a[ta ? 1 : 0], a[ta ? 0 : 1], b[tb ? 0 : 1]};
  if (const std::int64_t kb = b[tb ? 1 : 0]; d.k != kb)
    fail(error_code::invalid_argument, "inner dimensions differ (", d.k, " vs ", kb, "; shapes ", a, " and ", b, ")");
  return d;
}

/// _FusedMatMulBiasAdd's dims: matrix_product_dims, and a bias of one value per column of
/// the product, or an error naming its shape.
inline product_dims biased_product_dims(const shape& a, const shape& b, const shape& bias, bool ta, bool tb) {
  const product_dims d = matrix_product_dims(a, b, ta, tb);
  if (bias.rank() != 1 || bias[0] != d.n)
    fail(error_code::invalid_argument, "the bias of shape ", bias, " does not match the product's ", d.n, " columns");
  return d;
}

/// _FusedMatMulReluGrad's dims: matrix_product_dims, and features of the product's shape, or
/// an error naming both.
inline product_dims masked_product_dims(const shape& a, const shape& b, const shape& features, bool ta, bool tb) {
  const product_dims d = matrix_product_dims(a, b, ta, tb);
  if (features != shape{d.m, d.n})
    fail(error_code::invalid_argument, "the features of shape ", features, " do not match the product's shape ",
         shape{d.m, d.n});
  return d;
}

/// The size n of the [..., n, n] matrices of shape s (MatrixInverse's, MatrixDeterminant's
/// input), or an error naming s when they are not square.
inline std::int64_t square_matrix_size(const shape& s) {
  if (s.rank() < 2 || s[s.rank() - 1] != s[s.rank() - 2])
    fail(error_code::invalid_argument, "input must hold square matrices, got shape ", s);
  return s[s.rank() - 1];
}

}  // namespace weft
