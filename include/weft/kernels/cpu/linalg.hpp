/// @file
/// CPU kernels for MatrixInverse and MatrixDeterminant, batched over leading dims: LU
/// factors with partial pivoting, as TensorFlow's kernels and the GPU's (cuBLAS's
/// getrfBatched) compute them. A matrix whose factors have a zero (or NaN) pivot is
/// singular: MatrixInverse fails naming it (TensorFlow's check; a nearly singular matrix
/// gives large values), MatrixDeterminant gives 0.
#pragma once

#include <Eigen/LU>

#include <weft/core/product_dims.hpp>
#include <weft/kernels/cpu/common.hpp>
#include <weft/kernels/cpu/matmul.hpp>
#include <weft/ops/matrix_ops.hpp>

namespace weft::cpu {

/// The CPU kernel of MatrixInverse.
template <class T>
struct matrix_inverse_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit matrix_inverse_kernel(const node& n) : adjoint_(n.attr<bool>("adjoint")) {}
  void compute(kernel_context& ctx) const override {
    using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const tensor& x = ctx.input(0);
    std::int64_t k = square_matrix_size(x.shape());
    tensor& out = ctx.allocate_output(0, x.shape());
    std::int64_t batch = k ? x.num_elements() / (k * k) : 0;
    for (std::int64_t b = 0; b < batch; ++b) {
      Eigen::Map<const M> in(x.data<T>() + b * k * k, k, k);
      Eigen::Map<M> o(out.data<T>() + b * k * k, k, k);
      const Eigen::PartialPivLU<M> lu(adjoint_ ? M(in.adjoint()) : M(in));
      if (!(lu.matrixLU().diagonal().cwiseAbs().array() > 0).all())  // a NaN too (minCoeff would skip it)
        fail(error_code::invalid_argument, "the input is not invertible (a zero pivot): matrix ", b);
      o = lu.inverse();
    }
  }
 private:
  bool adjoint_;
};

/// The CPU kernel of MatrixDeterminant.
template <class T>
struct matrix_determinant_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit matrix_determinant_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const tensor& x = ctx.input(0);
    std::int64_t k = square_matrix_size(x.shape());
    std::vector<std::int64_t> dims(x.shape().dims().begin(), x.shape().dims().end() - 2);
    tensor& out = ctx.allocate_output(0, shape(dims));
    T* o = out.data<T>();
    for (std::int64_t b = 0, n = out.num_elements(); b < n; ++b)
      o[b] = k == 0 ? T(1) : Eigen::PartialPivLU<M>(Eigen::Map<const M>(x.data<T>() + b * k * k, k, k)).determinant();
  }
};

/// A template, so that including this header instantiates nothing until it is called.
template <int = 0>
void register_linalg_kernels() {
  ops::register_matrix_ops();
  using types = type_list<float, double, complex64, complex128>;
  register_for<matrix_inverse_kernel>("MatrixInverse", "T", types{});
  register_for<matrix_determinant_kernel>("MatrixDeterminant", "T", types{});
}

}  // namespace weft::cpu

/// The kernels typed code asks for (framework/kernel_for.hpp), by op type.
namespace weft {
/// Typed code's registration of MatrixInverse's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::MatrixInverse, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::matrix_inverse_kernel<T>>("MatrixInverse", {"T", dtype_of<T>}); }
};
/// Typed code's registration of MatrixDeterminant's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::MatrixDeterminant, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::matrix_determinant_kernel<T>>("MatrixDeterminant", {"T", dtype_of<T>}); }
};
/// Typed code's registration of every matrix op's CPU kernels (the family at once). A
/// partial specialization, so that including it instantiates nothing.
template <class T>
struct kernel_for<ops::families::matrix, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_matmul_kernels(); cpu::register_linalg_kernels(); }
};
}  // namespace weft
