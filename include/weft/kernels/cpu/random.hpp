/// @file
/// CPU kernels for the seeded random ops. Element i of the r-th value a node draws is a
/// pure function of (seed, seed2, counter + i): the stream is reproducible and shards
/// compute independently. A node reserves a counter range per run with one atomic add.
#pragma once

#include <atomic>
#include <cmath>
#include <random>

#include <weft/core/random_stream.hpp>
#include <weft/kernels/cpu/common.hpp>
#include <weft/ops/random_ops.hpp>

namespace weft::cpu {

/// The distribution a random op draws from.
enum class distribution { uniform, normal, truncated_normal };

/// The CPU kernel of RandomUniform, RandomStandardNormal, TruncatedNormal.
template <distribution D>
struct random_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit random_kernel(const node& n)
      : dtype_(n.attr<dtype>("dtype")), key_(random_key(n.attr<std::int64_t>("seed"), n.attr<std::int64_t>("seed2"))) {}

  /// A standard normal draw for counter c of stream `key` (Box-Muller on two uniforms).
  static double normal(std::uint64_t key, std::uint64_t c) {
    // Box-Muller on two uniforms drawn from distinct counters of the same element.
    double u1 = uniform01(key, 2 * c), u2 = uniform01(key, 2 * c + 1);
    return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(6.283185307179586 * u2);
  }

  void compute(kernel_context& ctx) const override {
    if (ctx.input(0).rank() != 1) fail(error_code::invalid_argument, "shape must be a vector, got shape ", ctx.input(0).shape());
    tensor& out = ctx.allocate_output(0, shape_from_dims(int_values(ctx.input(0), "shape"), "shape"));
    std::int64_t n = out.num_elements();
    // Truncated normal redraws: reserve 64 attempts per element; the chance of needing more is 1e-85.
    std::uint64_t per = D == distribution::truncated_normal ? 64 : 1;
    std::uint64_t base = counter_.fetch_add(static_cast<std::uint64_t>(n) * per, std::memory_order_relaxed);
    dispatcher<float_types>::run(
        dtype_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          T* o = out.data<T>();
          ctx.parallel_for(n, 40, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t i = b; i < e; ++i) {
              std::uint64_t c = base + static_cast<std::uint64_t>(i) * per;
              double v;
              if constexpr (D == distribution::uniform) {
                v = uniform01(key_, c);
              } else if constexpr (D == distribution::normal) {
                v = normal(key_, c);
              } else {
                v = normal(key_, c);
                for (std::uint64_t k = 1; std::abs(v) >= 2.0 && k < per; ++k) v = normal(key_, c + k);
                if (std::abs(v) >= 2.0) v = 0;
              }
              T t = static_cast<T>(v);
              if constexpr (D == distribution::uniform)
                if (!(static_cast<double>(t) < 1.0)) t = static_cast<T>(0);  // rounding to 1 in narrow types
              o[i] = t;
            }
          });
        },
        [] {});
  }

 private:
  dtype dtype_;
  std::uint64_t key_;
  mutable std::atomic<std::uint64_t> counter_{0};
};

/// A template, so that including this header instantiates nothing until it is called.
template <int = 0>
void register_random_kernels() {
  ops::register_random_ops();
  register_cpu_kernel<random_kernel<distribution::uniform>>("RandomUniform");
  register_cpu_kernel<random_kernel<distribution::normal>>("RandomStandardNormal");
  register_cpu_kernel<random_kernel<distribution::truncated_normal>>("TruncatedNormal");
}

}  // namespace weft::cpu

/// The kernels typed code asks for (framework/kernel_for.hpp), by op type.
namespace weft {
/// Typed code's registration of RandomUniform's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::RandomUniform, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::random_kernel<cpu::distribution::uniform>>("RandomUniform"); }
};
/// Typed code's registration of RandomStandardNormal's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::RandomStandardNormal, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::random_kernel<cpu::distribution::normal>>("RandomStandardNormal"); }
};
/// Typed code's registration of TruncatedNormal's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::TruncatedNormal, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::random_kernel<cpu::distribution::truncated_normal>>("TruncatedNormal"); }
};
/// Typed code's registration of every random op's CPU kernels (the family at once). A
/// partial specialization, so that including it instantiates nothing.
template <class T>
struct kernel_for<ops::families::random, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_random_kernels(); }
};
}  // namespace weft
