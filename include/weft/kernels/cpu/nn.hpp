/// @file
/// CPU kernels for ops/nn_ops.hpp. Each works on rows: the input viewed as [rows, n] with n
/// its last dim, rows split between threads, and each row one Eigen array expression
/// (vectorized exp, max and sums). float16 and bfloat16 compute in float. Convolution is
/// conv.hpp, pooling pooling.hpp, dropout dropout.hpp.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include <weft/graph/batch_norm_geometry.hpp>
#include <weft/kernels/cpu/conv.hpp>
#include <weft/kernels/cpu/dropout.hpp>
#include <weft/kernels/cpu/nn_kernel.hpp>
#include <weft/kernels/cpu/pooling.hpp>

namespace weft::cpu {

namespace nn {

/// BiasAdd: value plus a bias along its last dim (NHWC).
struct bias_add {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b11;
  /// The kernel of a node (it reads no attrs: data_format is NHWC, which the op's shape function checks).
  explicit bias_add(const node&) {}
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    const tensor &x = ctx.input(0), &b = ctx.input(1);
    require_rank_at_least(x, 2, "value");
    if (b.rank() != 1) fail(error_code::invalid_argument, "bias must be a vector, got shape ", b.shape());
    if (b.shape()[0] != x.shape()[x.rank() - 1])
      fail(error_code::invalid_argument, "the bias length ", b.shape()[0], " differs from value's last dimension (value: ",
           x.shape(), ")");
    return {x.shape()};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const std::int64_t n = row_length(v.in[0]), rows = row_count(v.in[0]);
    const C* x = v.in[0].data<C>();
    const_row_map<C> bias(v.in[1].data<C>(), n);
    C* out = v.out[0].data<C>();
    ctx.parallel_for(rows, static_cast<double>(n), [&](std::int64_t b, std::int64_t e) {
      rows_map<C>(out + b * n, n, e - b) = const_rows_map<C>(x + b * n, n, e - b).colwise() + bias;
    });
  }
};

/// BiasAddGrad: the output gradient summed over every dim but the last.
struct bias_add_grad {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b1;
  /// The kernel of a node (it reads no attrs).
  explicit bias_add_grad(const node&) {}
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    const tensor& d = ctx.input(0);
    require_rank_at_least(d, 2, "out_backprop");
    return {shape{d.shape()[d.rank() - 1]}};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const std::int64_t n = row_length(v.in[0]), rows = row_count(v.in[0]);
    const C* d = v.in[0].data<C>();
    C* out = v.out[0].data<C>();
    // Threads take blocks of rows, each summing its rows into a partial row of its own, and
    // the partial rows are added at the end. (Threads taking slices of the columns wrote
    // into one cache line from both sides when the rows were short: 16 channels took 16
    // times longer on two threads than on one.)
    // Short rows (a convolution's few channels) are summed a run of m rows, about 256
    // values, at a time into a buffer that long, whose m rows are added at the end: one long
    // vector sum a run instead of a short one a row (LeNet's first BiasAddGrad, 100352 rows
    // of 16, went at 4 bytes a cycle).
    const std::int64_t m = n > 0 && n < 64 ? 256 / n : 1;
    auto sum_rows = [&](std::int64_t r0, std::int64_t r1, C* into) {
      row_map<C> o(into, n);
      o.setZero();
      std::int64_t r = r0;
      if (m > 1 && r1 - r0 >= 2 * m) {
        std::array<C, 256> runs{};  // m * n <= 256
        row_map<C> acc(runs.data(), m * n);
        for (; r + m <= r1; r += m) acc += const_row_map<C>(d + r * n, m * n);
        for (std::int64_t i = 0; i < m; ++i) o += const_row_map<C>(runs.data() + i * n, n);
      }
      for (; r < r1; ++r) o += const_row_map<C>(d + r * n, n);
    };
    if (n == 0) return;
    // Blocks of at least 2^17 values (512 KiB of float32, several microseconds on one core):
    // a split costs a handoff between the threads and, where another core wrote the rows (a
    // split product's output), reading them from that core's cache. In blocks of 2^15 values
    // the MLP's 128 x 512 BiasAddGrads took 10 to 15 us on two threads against 4 to 5 on one;
    // unsplit, its step on two threads ran 1 to 2 % faster (docs/benchmarks.md, session 65).
    const std::int64_t blocks = blocks_for(ctx, rows, std::max<std::int64_t>(1, (std::int64_t{1} << 17) / n));
    if (blocks <= 1) return sum_rows(0, rows, out);
    std::vector<C> partial(static_cast<std::size_t>(blocks * n));
    ctx.parallel_for(blocks, 1e9, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t blk = b; blk < e; ++blk) sum_rows(blk * rows / blocks, (blk + 1) * rows / blocks, partial.data() + blk * n);
    });
    row_map<C> o(out, n);
    o = const_row_map<C>(partial.data(), n);
    for (std::int64_t blk = 1; blk < blocks; ++blk) o += const_row_map<C>(partial.data() + blk * n, n);
  }
};

/// Softmax (Log = false) or LogSoftmax along the last dim: x - max is exponentiated, so
/// large logits do not overflow.
template <bool Log>
struct softmax {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b1;
  /// The kernel of a node (it reads no attrs).
  explicit softmax(const node&) {}
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    require_rank_at_least(ctx.input(0), 1, "logits");
    return {ctx.input(0).shape()};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const std::int64_t n = row_length(v.in[0]), rows = row_count(v.in[0]);
    const C* x = v.in[0].data<C>();
    C* out = v.out[0].data<C>();
    ctx.parallel_for(rows, 8.0 * static_cast<double>(n), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const_row_map<C> xr(x + r * n, n);
        row_map<C> o(out + r * n, n);
        const C m = xr.maxCoeff();
        if constexpr (Log) {
          o = xr - m;
          o -= std::log(o.exp().sum());
        } else {
          o = (xr - m).exp();
          o /= o.sum();
        }
      }
    });
  }
};

/// One row of the cross-entropy ops: given the logits f, writes softmax(f) into `back` and
/// returns log(sum(exp(f - max))) and max, from which log_softmax(f) = f - max - lse.
template <class C>
std::pair<C, C> softmax_row(const_row_map<C> f, row_map<C> back) {
  const C m = f.maxCoeff();
  back = (f - m).exp();
  const C s = back.sum();
  back /= s;
  return {std::log(s), m};
}

/// SoftmaxCrossEntropyWithLogits: per row, the loss and its gradient softmax(logits) - labels.
struct softmax_cross_entropy {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b11;
  /// The kernel of a node (it reads no attrs).
  explicit softmax_cross_entropy(const node&) {}
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    const tensor &f = ctx.input(0), &l = ctx.input(1);
    if (f.rank() != 2 || f.shape() != l.shape())
      fail(error_code::invalid_argument, "features and labels must be matrices of one shape, got ", f.shape(), " and ",
           l.shape());
    return {shape{f.shape()[0]}, f.shape()};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const std::int64_t n = row_length(v.in[0]), rows = row_count(v.in[0]);
    if (n == 0) row_map<C>(v.out[0].data<C>(), v.out[0].num_elements()).setZero();  // sums of nothing
    const C *f = v.in[0].data<C>(), *l = v.in[1].data<C>();
    C *loss = v.out[0].data<C>(), *back = v.out[1].data<C>();
    ctx.parallel_for(rows, 10.0 * static_cast<double>(n), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const_row_map<C> fr(f + r * n, n), lr(l + r * n, n);
        row_map<C> br(back + r * n, n);
        auto [lse, m] = softmax_row<C>(fr, br);
        // -sum(l * (f - m - lse)) = sum(l * (lse + m - f))
        loss[r] = n ? (lr * ((lse + m) - fr)).sum() : C(0);
        br -= lr;
      }
    });
  }
};

/// SparseSoftmaxCrossEntropyWithLogits: as softmax_cross_entropy with integer class labels (checked in range).
struct sparse_softmax_cross_entropy {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b1;
  /// The kernel of a node (it reads no attrs).
  explicit sparse_softmax_cross_entropy(const node&) {}
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    const tensor &f = ctx.input(0), &l = ctx.input(1);
    if (f.rank() != 2) fail(error_code::invalid_argument, "features must be a matrix, got shape ", f.shape());
    if (l.rank() != 1 || l.shape()[0] != f.shape()[0])
      fail(error_code::invalid_argument, "labels must be a vector of the batch size ", f.shape()[0], ", got shape ",
           l.shape());
    const std::int64_t n = f.shape()[1];
    const auto labels = int_values(l, "labels");
    for (std::size_t i = 0; i < labels.size(); ++i)
      if (labels[i] < 0 || labels[i] >= n)
        fail(error_code::invalid_argument, "label ", labels[i], " at index ", i, " is outside the valid range [0, ", n,
             ")");
    return {shape{f.shape()[0]}, f.shape()};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const std::int64_t n = row_length(v.in[0]), rows = row_count(v.in[0]);
    const C* f = v.in[0].data<C>();
    const tensor& labels = v.in[1];
    auto label = [&](std::int64_t r) {
      return labels.dtype() == dtype::int32 ? std::int64_t{labels.data<std::int32_t>()[r]} : labels.data<std::int64_t>()[r];
    };
    C *loss = v.out[0].data<C>(), *back = v.out[1].data<C>();
    ctx.parallel_for(rows, 10.0 * static_cast<double>(n), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const std::int64_t k = label(r);
        auto [lse, m] = softmax_row<C>(const_row_map<C>(f + r * n, n), row_map<C>(back + r * n, n));
        loss[r] = lse + m - f[r * n + k];
        back[r * n + k] -= C(1);
      }
    });
  }
};

/// L2Loss: sum(t^2) / 2 over every element.
struct l2_loss {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b1;
  /// The kernel of a node (it reads no attrs).
  explicit l2_loss(const node&) {}
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context&) const { return {shape{}}; }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context&, io& v) const {
    const tensor& t = v.in[0];
    *v.out[0].data<C>() = const_row_map<C>(t.data<C>(), t.num_elements()).square().sum() / C(2);
  }
};

/// FusedBatchNormV3 and FusedBatchNormGradV3 (ops/nn_ops.hpp): x viewed as [rows, C];
/// per-channel sums over blocks of rows on the threads, then one pass for the output.
struct batch_norm_frame : ops::batch_norm_attrs {
  /// Reads epsilon and is_training; data_format must be NHWC.
  explicit batch_norm_frame(const node& n) : ops::batch_norm_attrs(n) {}
  /// Per-channel sums of f(row r, into) over all rows, in `acc` (length c * k), blocks of
  /// rows on the threads, each into a partial of its own.
  template <class F>
  static void channel_sums(kernel_context& ctx, std::int64_t rows, std::int64_t width, std::vector<double>& acc, F f) {
    std::fill(acc.begin(), acc.end(), 0.0);
    if (rows == 0 || width == 0) return;
    const std::int64_t blocks = blocks_for(ctx, rows, std::max<std::int64_t>(1, (std::int64_t{1} << 14) / width));
    std::vector<double> partial(static_cast<std::size_t>(std::max<std::int64_t>(blocks, 1)) * acc.size(), 0.0);
    ctx.parallel_for(blocks, 1e9, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t blk = b; blk < e; ++blk) {
        double* into = partial.data() + blk * static_cast<std::int64_t>(acc.size());
        for (std::int64_t r = blk * rows / blocks; r < (blk + 1) * rows / blocks; ++r) f(r, into);
      }
    });
    for (std::int64_t blk = 0; blk < blocks; ++blk)
      for (std::size_t i = 0; i < acc.size(); ++i) acc[i] += partial[static_cast<std::size_t>(blk) * acc.size() + i];
  }
};

/// FusedBatchNormV3: normalized x, the batch mean and variance, and the moving averages updated by exponential_avg_factor.
struct fused_batch_norm : batch_norm_frame {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b11111;
  /// exponential_avg_factor: the weight of the batch's statistics in the moving averages.
  double factor;
  /// Reads the node's attrs.
  explicit fused_batch_norm(const node& n) : batch_norm_frame(n), factor(n.attr<double>("exponential_avg_factor")) {}
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    const std::int64_t c = check_forward(ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3), ctx.input(4), factor);
    return {ctx.input(0).shape(), shape{c}, shape{c}, shape{c}, shape{c}, shape{0}};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const tensor& xt = v.in[0];
    const std::int64_t c = row_length(xt), rows = row_count(xt);
    const C* x = xt.data<C>();
    const C *scale = v.in[1].data<C>(), *offset = v.in[2].data<C>();
    C *y = v.out[0].data<C>(), *batch_mean = v.out[1].data<C>(), *batch_var = v.out[2].data<C>();
    C *saved_mean = v.out[3].data<C>(), *saved_var = v.out[4].data<C>();
    std::vector<double> mean(static_cast<std::size_t>(c)), var(static_cast<std::size_t>(c));
    if (training) {
      channel_sums(ctx, rows, c, mean, [&](std::int64_t r, double* into) {
        for (std::int64_t k = 0; k < c; ++k) into[k] += static_cast<double>(x[r * c + k]);
      });
      const double n = static_cast<double>(rows);
      for (auto& m : mean) m /= n;  // NaN for no rows, as TensorFlow
      channel_sums(ctx, rows, c, var, [&](std::int64_t r, double* into) {
        for (std::int64_t k = 0; k < c; ++k) {
          const double d = static_cast<double>(x[r * c + k]) - mean[static_cast<std::size_t>(k)];
          into[k] += d * d;
        }
      });
      for (auto& s2 : var) s2 /= n;
      const double bessel = rows > 1 ? n / (n - 1) : 1.0;
      const bool have_old = v.in[3].num_elements() == c;
      for (std::int64_t k = 0; k < c; ++k) {
        const auto i = static_cast<std::size_t>(k);
        const double old_mean = have_old ? static_cast<double>(v.in[3].data<C>()[k]) : 0.0;
        const double old_var = have_old ? static_cast<double>(v.in[4].data<C>()[k]) : 0.0;
        batch_mean[k] = static_cast<C>((1 - factor) * old_mean + factor * mean[i]);
        batch_var[k] = static_cast<C>((1 - factor) * old_var + factor * var[i] * bessel);
        saved_mean[k] = static_cast<C>(mean[i]);
        saved_var[k] = static_cast<C>(var[i]);
      }
    } else {
      for (std::int64_t k = 0; k < c; ++k) {
        const auto i = static_cast<std::size_t>(k);
        mean[i] = static_cast<double>(v.in[3].data<C>()[k]);
        var[i] = static_cast<double>(v.in[4].data<C>()[k]);
        batch_mean[k] = saved_mean[k] = v.in[3].data<C>()[k];
        batch_var[k] = saved_var[k] = v.in[4].data<C>()[k];
      }
    }
    // y = x * a + b per channel: a = scale / sqrt(var + eps), b = offset - mean a.
    std::vector<C> a(static_cast<std::size_t>(c)), b(static_cast<std::size_t>(c));
    for (std::int64_t k = 0; k < c; ++k) {
      const auto i = static_cast<std::size_t>(k);
      const double ak = static_cast<double>(scale[k]) / std::sqrt(var[i] + epsilon);
      a[i] = static_cast<C>(ak);
      b[i] = static_cast<C>(static_cast<double>(offset[k]) - mean[i] * ak);
    }
    if (c == 0) return;
    const_row_map<C> am(a.data(), c), bm(b.data(), c);
    ctx.parallel_for(rows, 2.0 * static_cast<double>(c), [&](std::int64_t r0, std::int64_t r1) {
      rows_map<C>(y + r0 * c, c, r1 - r0) = (const_rows_map<C>(x + r0 * c, c, r1 - r0).colwise() * am).colwise() + bm;
    });
  }
};

/// FusedBatchNormGradV3: the gradients of x, scale and offset.
struct fused_batch_norm_grad : batch_norm_frame {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b111111;
  /// Reads the node's attrs.
  explicit fused_batch_norm_grad(const node& n) : batch_norm_frame(n) {}
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    const tensor& x = ctx.input(1);
    const std::int64_t c = check_backward(ctx.input(0), x, ctx.input(2), ctx.input(3), ctx.input(4));
    return {x.shape(), shape{c}, shape{c}, shape{0}, shape{0}};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const tensor& xt = v.in[1];
    const std::int64_t c = row_length(xt), rows = row_count(xt);
    const C *dy = v.in[0].data<C>(), *x = xt.data<C>(), *scale = v.in[2].data<C>();
    const C *mean = v.in[3].data<C>(), *var = v.in[4].data<C>();
    C *dx = v.out[0].data<C>(), *dscale = v.out[1].data<C>(), *doffset = v.out[2].data<C>();
    std::vector<double> rstd(static_cast<std::size_t>(c));
    for (std::int64_t k = 0; k < c; ++k) rstd[static_cast<std::size_t>(k)] = 1 / std::sqrt(static_cast<double>(var[k]) + epsilon);
    // sums[k] = sum(dy), sums[c + k] = sum(dy * xhat), xhat = (x - mean) rstd.
    std::vector<double> sums(static_cast<std::size_t>(2 * c));
    channel_sums(ctx, rows, c, sums, [&](std::int64_t r, double* into) {
      for (std::int64_t k = 0; k < c; ++k) {
        const double d = static_cast<double>(dy[r * c + k]);
        into[k] += d;
        into[c + k] += d * (static_cast<double>(x[r * c + k]) - static_cast<double>(mean[k])) * rstd[static_cast<std::size_t>(k)];
      }
    });
    // dx = scale rstd (dy - [training] (sum(dy) + xhat sum(dy xhat)) / n), as a per-channel
    // affine map of dy and x: dx = dy * p + x * q + s.
    const double n = static_cast<double>(rows);
    std::vector<C> p(static_cast<std::size_t>(c)), q(static_cast<std::size_t>(c)), s(static_cast<std::size_t>(c));
    for (std::int64_t k = 0; k < c; ++k) {
      const auto i = static_cast<std::size_t>(k);
      const double g = static_cast<double>(scale[k]) * rstd[i];
      doffset[k] = static_cast<C>(sums[i]);
      dscale[k] = static_cast<C>(sums[static_cast<std::size_t>(c) + i]);
      const double mean_dy = training && rows ? sums[i] / n : 0.0;
      const double mean_dy_xhat = training && rows ? sums[static_cast<std::size_t>(c) + i] / n : 0.0;
      // xhat = x rstd - mean rstd
      const double qk = -g * mean_dy_xhat * rstd[i];
      p[i] = static_cast<C>(g);
      q[i] = static_cast<C>(qk);
      s[i] = static_cast<C>(-g * mean_dy - qk * static_cast<double>(mean[k]));
    }
    if (c == 0) return;
    const_row_map<C> pm(p.data(), c), qm(q.data(), c), sm(s.data(), c);
    ctx.parallel_for(rows, 4.0 * static_cast<double>(c), [&](std::int64_t r0, std::int64_t r1) {
      rows_map<C>(dx + r0 * c, c, r1 - r0) = (const_rows_map<C>(dy + r0 * c, c, r1 - r0).colwise() * pm +
                                              const_rows_map<C>(x + r0 * c, c, r1 - r0).colwise() * qm)
                                                 .colwise() +
                                             sm;
    });
  }
};

}  // namespace nn

/// A template, so that including this header instantiates nothing until it is called.
template <int = 0>
void register_nn_kernels() {
  ops::register_nn_ops();
  using types = type_list<half, bfloat16, float, double>;
  register_for<nn::kernel<nn::bias_add>::of>("BiasAdd", "T", types{});
  register_for<nn::kernel<nn::bias_add_grad>::of>("BiasAddGrad", "T", types{});
  register_for<nn::kernel<nn::softmax<false>>::of>("Softmax", "T", types{});
  register_for<nn::kernel<nn::softmax<true>>::of>("LogSoftmax", "T", types{});
  register_for<nn::kernel<nn::softmax_cross_entropy>::of>("SoftmaxCrossEntropyWithLogits", "T", types{});
  register_for<nn::kernel<nn::sparse_softmax_cross_entropy>::of>("SparseSoftmaxCrossEntropyWithLogits", "T", types{});
  register_for<nn::kernel<nn::l2_loss>::of>("L2Loss", "T", types{});
  register_for<nn::kernel<nn::conv2d>::of>("Conv2D", "T", types{});
  register_for<nn::kernel<nn::fused_conv2d_bias_add>::of>(ops::fused_conv2d_bias_add_op, "T", types{});
  register_for<nn::kernel<nn::conv2d_backprop_input>::of>("Conv2DBackpropInput", "T", types{});
  register_for<nn::kernel<nn::conv2d_backprop_filter>::of>("Conv2DBackpropFilter", "T", types{});
  register_for<nn::kernel<nn::pool<true>>::of>("MaxPool", "T", types{});
  register_for<nn::kernel<nn::pool<false>>::of>("AvgPool", "T", types{});
  register_for<nn::kernel<nn::max_pool_grad>::of>("MaxPoolGrad", "T", types{});
  register_for<nn::kernel<nn::max_pool_grad_grad>::of>("MaxPoolGradGrad", "T", types{});
  register_for<nn::kernel<nn::max_pool_grad_relu_grad>::of>(ops::fused_max_pool_grad_relu_grad_op, "T", types{});
  register_for<nn::kernel<nn::avg_pool_grad>::of>("AvgPoolGrad", "T", types{});
  register_for<nn::kernel<nn::dropout>::of>("Dropout", "T", types{});
  register_for<nn::kernel<nn::fused_batch_norm>::of>("FusedBatchNormV3", "T", types{});
  register_for<nn::kernel<nn::fused_batch_norm_grad>::of>("FusedBatchNormGradV3", "T", types{});
}

}  // namespace weft::cpu

/// The kernels typed code asks for (framework/kernel_for.hpp), by op type.
namespace weft {
/// Typed code's registration of BiasAdd's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::BiasAdd, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::bias_add>::template of<T>>("BiasAdd", {"T", dtype_of<T>}); }
};
/// Typed code's registration of BiasAddGrad's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::BiasAddGrad, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::bias_add_grad>::template of<T>>("BiasAddGrad", {"T", dtype_of<T>}); }
};
/// Typed code's registration of Softmax's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Softmax, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::softmax<false>>::template of<T>>("Softmax", {"T", dtype_of<T>}); }
};
/// Typed code's registration of LogSoftmax's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::LogSoftmax, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::softmax<true>>::template of<T>>("LogSoftmax", {"T", dtype_of<T>}); }
};
/// Typed code's registration of SoftmaxCrossEntropyWithLogits's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::SoftmaxCrossEntropyWithLogits, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::softmax_cross_entropy>::template of<T>>("SoftmaxCrossEntropyWithLogits", {"T", dtype_of<T>}); }
};
/// Typed code's registration of SparseSoftmaxCrossEntropyWithLogits's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::SparseSoftmaxCrossEntropyWithLogits, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::sparse_softmax_cross_entropy>::template of<T>>("SparseSoftmaxCrossEntropyWithLogits", {"T", dtype_of<T>}); }
};
/// Typed code's registration of L2Loss's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::L2Loss, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::l2_loss>::template of<T>>("L2Loss", {"T", dtype_of<T>}); }
};
/// Typed code's registration of Conv2D's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Conv2D, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::conv2d>::template of<T>>("Conv2D", {"T", dtype_of<T>}); }
};
/// Typed code's registration of Conv2DBackpropInput's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Conv2DBackpropInput, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::conv2d_backprop_input>::template of<T>>("Conv2DBackpropInput", {"T", dtype_of<T>}); }
};
/// Typed code's registration of Conv2DBackpropFilter's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Conv2DBackpropFilter, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::conv2d_backprop_filter>::template of<T>>("Conv2DBackpropFilter", {"T", dtype_of<T>}); }
};
/// Typed code's registration of MaxPool's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::MaxPool, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::pool<true>>::template of<T>>("MaxPool", {"T", dtype_of<T>}); }
};
/// Typed code's registration of AvgPool's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::AvgPool, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::pool<false>>::template of<T>>("AvgPool", {"T", dtype_of<T>}); }
};
/// Typed code's registration of MaxPoolGrad's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::MaxPoolGrad, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::max_pool_grad>::template of<T>>("MaxPoolGrad", {"T", dtype_of<T>}); }
};
/// Typed code's registration of MaxPoolGradGrad's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::MaxPoolGradGrad, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::max_pool_grad_grad>::template of<T>>("MaxPoolGradGrad", {"T", dtype_of<T>}); }
};
/// Typed code's registration of _FusedConv2DBiasAdd's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::FusedConv2DBiasAdd, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() {
    register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::fused_conv2d_bias_add>::template of<T>>(
        ops::fused_conv2d_bias_add_op, {"T", dtype_of<T>});
  }
};
/// Typed code's registration of _FusedMaxPoolGradReluGrad's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::FusedMaxPoolGradReluGrad, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() {
    register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::max_pool_grad_relu_grad>::template of<T>>(
        ops::fused_max_pool_grad_relu_grad_op, {"T", dtype_of<T>});
  }
};
/// Typed code's registration of AvgPoolGrad's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::AvgPoolGrad, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::avg_pool_grad>::template of<T>>("AvgPoolGrad", {"T", dtype_of<T>}); }
};
/// Typed code's registration of Dropout's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Dropout, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::dropout>::template of<T>>("Dropout", {"T", dtype_of<T>}); }
};
/// Typed code's registration of FusedBatchNormV3's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::FusedBatchNormV3, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::fused_batch_norm>::template of<T>>("FusedBatchNormV3", {"T", dtype_of<T>}); }
};
/// Typed code's registration of FusedBatchNormGradV3's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::FusedBatchNormGradV3, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::nn::kernel<cpu::nn::fused_batch_norm_grad>::template of<T>>("FusedBatchNormGradV3", {"T", dtype_of<T>}); }
};
/// Typed code's registration of every nn op's CPU kernels (the family at once). A
/// partial specialization, so that including it instantiates nothing.
template <class T>
struct kernel_for<ops::families::nn, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_nn_kernels(); }
};
}  // namespace weft
