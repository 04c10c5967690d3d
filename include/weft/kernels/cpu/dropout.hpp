/// @file
/// CPU kernel for the seeded Dropout op (ops/nn_ops.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <weft/kernels/cpu/nn_kernel.hpp>
#include <weft/kernels/cpu/random.hpp>

namespace weft::cpu::nn {

/// Element i of the r-th run keeps x when its uniform draw (random.hpp's stream, keyed by
/// seed and seed2) is at least `rate`.
struct dropout {
  /// Which inputs are values (bit i for input i): widened to float when T is a half type.
  static constexpr unsigned value_mask = 0b11;
  /// Reads seed and seed2 (the key of its random stream).
  explicit dropout(const node& n)
      : key_(random_key(n.attr<std::int64_t>("seed"), n.attr<std::int64_t>("seed2"), dropout_salt)) {}
  /// Checks the inputs; the outputs' shapes.
  std::vector<shape> shapes(kernel_context& ctx) const {
    if (ctx.input(1).rank() != 0) fail(error_code::invalid_argument, "rate must be a scalar, got shape ", ctx.input(1).shape());
    return {ctx.input(0).shape(), ctx.input(0).shape()};
  }
  /// Computes the outputs, in C (the compute type), from the widened inputs.
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const C rate = *v.in[1].data<C>();
    if (!(rate >= C(0) && rate < C(1)))
      fail(error_code::invalid_argument, "rate must be in [0, 1), got ", static_cast<double>(rate));
    const std::int64_t n = v.in[0].num_elements();
    const std::uint64_t base = counter_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    const C scale = C(1) / (C(1) - rate);
    const C* x = v.in[0].data<C>();
    C *out = v.out[0].data<C>(), *mask = v.out[1].data<C>();
    ctx.parallel_for(n, 30, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const bool keep = uniform01(key_, base + static_cast<std::uint64_t>(i)) >= static_cast<double>(rate);
        mask[i] = keep ? scale : C(0);
        out[i] = x[i] * mask[i];
      }
    });
  }
 private:
  std::uint64_t key_;
  mutable std::atomic<std::uint64_t> counter_{0};
};

}  // namespace weft::cpu::nn
