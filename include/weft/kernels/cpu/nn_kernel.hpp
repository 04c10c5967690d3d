/// @file
/// The frame of the NN kernels (nn.hpp, conv.hpp): Eigen maps over rows, and
/// nn::kernel<Body>, which widens half inputs to float, runs the body and narrows back.
#pragma once

#include <Eigen/Core>

#include <vector>

#include <weft/kernels/cpu/common.hpp>
#include <weft/kernels/cpu/convert.hpp>
#include <weft/ops/nn_ops.hpp>

namespace weft::cpu {

namespace nn {

/// A writable Eigen array view of n elements (a row).
template <class C>
using row_map = Eigen::Map<Eigen::Array<C, Eigen::Dynamic, 1>>;
/// A read-only Eigen array view of n elements.
template <class C>
using const_row_map = Eigen::Map<const Eigen::Array<C, Eigen::Dynamic, 1>>;
/// A [rows, n] row-major buffer as a column-major n x rows array: column r is row r.
template <class C>
using rows_map = Eigen::Map<Eigen::Array<C, Eigen::Dynamic, Eigen::Dynamic>>;
/// A read-only [rows, cols] column-major array view.
template <class C>
using const_rows_map = Eigen::Map<const Eigen::Array<C, Eigen::Dynamic, Eigen::Dynamic>>;
/// A row-major [rows, cols] buffer as a matrix, and a column-major one.
template <class C>
using row_major_map = Eigen::Map<Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
/// A read-only column-major matrix view.
template <class C>
using const_col_major_map = Eigen::Map<const Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic>>;

/// The last dim of t (1 for a scalar), and the number of rows of that length.
inline std::int64_t row_length(const tensor& t) { return t.rank() ? t.shape()[t.rank() - 1] : 1; }
/// The number of rows of row_length(t) elements.
inline std::int64_t row_count(const tensor& t) { return row_length(t) ? t.num_elements() / row_length(t) : 0; }

/// Inputs and outputs of one run, in the compute type: `in` are the op's inputs (those in
/// `Body::value_mask`, bit i for input i, widened when T is a half type), `out` its outputs.
struct io {
  std::vector<tensor> in;   ///< the inputs (values widened)
  std::vector<tensor> out;  ///< the outputs, in the compute type
};

/// The kernel of Body for dtype T: Body::shapes(ctx) checks the inputs and gives the output
/// shapes, Body::run<C>(ctx, io) computes into outputs of dtype C = compute_t<T>. For half
/// types the value inputs of dtype T are widened to float first and the outputs of dtype T
/// narrowed after (inputs and outputs that are float already, as batch normalization's
/// statistics of a half x, are read and written as they are).
template <class Body>
struct kernel {
  /// The kernel for dtype T.
  template <class T>
  struct of final : op_kernel {
    /// Builds Body from the node (it reads the attrs).
    explicit of(const node& n) : body_(n) {}
    void compute(kernel_context& ctx) const override {
      using C = compute_t<T>;
      const std::vector<shape> shapes = body_.shapes(ctx);
      io v;
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        const tensor& x = ctx.input(i);
        v.in.push_back((Body::value_mask >> i) & 1u && x.dtype() == dtype_of<T> ? widened<T>(ctx, x) : x);
      }
      // Whether output o is narrowed from C after the body.
      const auto narrowed = [&](std::size_t o) { return is_converted_v<T> && ctx.node().output_dtype(static_cast<int>(o)) == dtype_of<T>; };
      for (std::size_t o = 0; o < shapes.size(); ++o)
        v.out.push_back(narrowed(o) ? tensor(dtype_of<C>, shapes[o]) : ctx.allocate_output(static_cast<int>(o), shapes[o]));
      body_.template run<C>(ctx, v);
      if constexpr (is_converted_v<T>)
        for (std::size_t o = 0; o < shapes.size(); ++o)
          if (narrowed(o)) detail::run_convert(ctx, narrow_fn<T>, v.out[o], ctx.allocate_output(static_cast<int>(o), shapes[o]));
    }
   private:
    Body body_;
  };
};

/// Fails unless t has rank `rank` or more (`what` names it).
inline void require_rank_at_least(const tensor& t, int rank, const char* what) {
  if (t.rank() < rank) fail(error_code::invalid_argument, what, " must have rank at least ", rank, ", got shape ", t.shape());
}

}  // namespace nn

}  // namespace weft::cpu
