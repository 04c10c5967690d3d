/// @file
/// The geometry of a window sliding over NHWC images, shared by the convolution and pooling
/// kernels (ops/nn_ops.hpp): a node's window attrs, the input, window and output sizes with
/// the padding, and the checks of the sizes a kernel is given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <weft/kernels/cpu/nn_kernel.hpp>
#include <weft/graph/window_geometry.hpp>

namespace weft::cpu::nn {

/// The node's window attrs, the geometry and its checks are the ops layer's
/// (graph/window_geometry.hpp), which the GPU kernels share.
using ops::geometry;
using ops::make_geometry;
using ops::window_attrs_of;

/// The shape a 4-element sizes input gives (input_sizes, filter_sizes), or an error naming `what`.
inline shape sizes_shape(const tensor& t, const char* what) {
  if (t.rank() != 1 || t.num_elements() != 4)
    fail(error_code::invalid_argument, what, " must be a vector of 4 dims, got shape ", t.shape());
  return shape_from_dims(int_values(t, what), what);
}

/// Fails unless t has shape `expected`, naming `what` and g's input and window.
inline void require_shape(const tensor& t, const shape& expected, const char* what, const geometry& g) {
  if (t.shape() != expected)
    fail(error_code::invalid_argument, what, " has shape ", t.shape(), "; the input [", g.n, ", ", g.h, ", ", g.w, ", ", g.c,
         "] and a ", g.kh, "x", g.kw, " window give ", expected);
}

namespace ei = Eigen::internal;
/// The SIMD packet of C (Eigen's widest for the target).
template <class C>
using packet_t = typename ei::packet_traits<C>::type;
/// Values of C per SIMD packet.
template <class C>
inline constexpr std::int64_t packet_size = ei::packet_traits<C>::size;

/// A Conv2D's output pass (_FusedConv2DBiasAdd): to each output position's k channels the
/// bias, then 0 where the value is below 0 (`relu`; a NaN or a -0 stays, as in
/// _FusedMatMulBiasAdd's pass). Empty: nothing to do.
template <class C>
struct conv_epilogue {
  const C* bias = nullptr;  ///< k values, or null
  bool relu = false;        ///< max(x, 0) after the bias
  /// Whether there is anything to apply.
  explicit operator bool() const noexcept { return bias || relu; }
  /// Applies the pass to `positions` rows of k values at `rows`.
  void apply(C* rows, std::int64_t positions, std::int64_t k) const {
    using P = packet_t<C>;
    constexpr std::int64_t lanes = packet_size<C>;
    for (std::int64_t r = 0; r < positions; ++r, rows += k) {
      std::int64_t c = 0;
      for (; c + lanes <= k; c += lanes) {
        P x = ei::ploadu<P>(rows + c);
        if (bias) x = ei::padd(x, ei::ploadu<P>(bias + c));
        if (relu) x = ei::pselect(ei::pcmp_lt(x, ei::pzero(x)), ei::pzero(x), x);
        ei::pstoreu(rows + c, x);
      }
      for (; c < k; ++c) {
        C x = rows[c];
        if (bias) x += bias[c];
        if (relu && x < C(0)) x = C(0);
        rows[c] = x;
      }
    }
  }
};

/// A 1x1 window with stride 1: the convolution is a plain matrix product.
inline bool is_pointwise(const geometry& g) { return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1; }

}  // namespace weft::cpu::nn
