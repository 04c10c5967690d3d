/// @file
/// The geometry of batch normalization (FusedBatchNormV3 and FusedBatchNormGradV3 of
/// ops/nn_ops.hpp), device-neutral: x seen as [rows, C] (channels last) and the checks of its
/// per-channel vectors. The CPU kernels (kernels/cpu/nn.hpp) and the GPU's (cuda/kernels.hpp)
/// check their inputs here, so both devices refuse the same inputs with the same words.
#pragma once

#include <cstdint>
#include <string>

#include <weft/core/error.hpp>
#include <weft/core/tensor.hpp>
#include <weft/graph/node.hpp>

namespace weft::ops {

/// A batch normalization node's attrs: epsilon and is_training; data_format must be NHWC.
struct batch_norm_attrs {
  double epsilon;  ///< added to the variance before its square root
  bool training;   ///< batch statistics (training) rather than the given mean and variance
  /// Reads n's attrs, or fails naming n where data_format is not NHWC.
  explicit batch_norm_attrs(const node& n) : epsilon(n.attr<double>("epsilon")), training(n.attr<bool>("is_training")) {
    if (n.attr<std::string>("data_format") != "NHWC")
      fail(error_code::invalid_argument, n.describe(), ": data_format must be NHWC");
  }
  /// Fails unless v is a vector of c channels (or empty, where allowed); `what` names it.
  static void check_vector(const tensor& v, std::int64_t c, const char* what, bool may_be_empty = false) {
    if (v.rank() != 1 || (v.shape()[0] != c && !(may_be_empty && v.shape()[0] == 0)))
      fail(error_code::invalid_argument, what, " must be a vector of the ", c, " channels", may_be_empty ? " (or empty)" : "",
           ", got shape ", v.shape());
  }
  /// The channels of x (its last dim, rank 2 to 5), or an error.
  static std::int64_t channels_of(const tensor& x) {
    if (x.rank() < 2 || x.rank() > 5)
      fail(error_code::invalid_argument, "x must have rank 2 to 5 (channels last), got shape ", x.shape());
    return x.shape()[x.rank() - 1];
  }
  /// FusedBatchNormV3's inputs checked (mean and variance may be empty in training with an
  /// avg factor of 1); x's channels.
  std::int64_t check_forward(const tensor& x, const tensor& scale, const tensor& offset, const tensor& mean,
                             const tensor& variance, double factor) const {
    const std::int64_t c = channels_of(x);
    const bool may_be_empty = training && factor == 1.0;
    check_vector(scale, c, "scale");
    check_vector(offset, c, "offset");
    check_vector(mean, c, "mean", may_be_empty);
    check_vector(variance, c, "variance", may_be_empty);
    return c;
  }
  /// FusedBatchNormGradV3's inputs checked; x's channels.
  static std::int64_t check_backward(const tensor& dy, const tensor& x, const tensor& scale, const tensor& mean,
                                     const tensor& variance) {
    const std::int64_t c = channels_of(x);
    if (dy.shape() != x.shape())
      fail(error_code::invalid_argument, "y_backprop ", dy.shape(), " and x ", x.shape(), " differ in shape");
    check_vector(scale, c, "scale");
    check_vector(mean, c, "reserve_space_1 (the mean)");
    check_vector(variance, c, "reserve_space_2 (the variance)");
    return c;
  }
};

}  // namespace weft::ops
