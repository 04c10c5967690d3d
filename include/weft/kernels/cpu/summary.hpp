/// @file
/// CPU kernels for ops/summary_ops.hpp: ScalarSummary, HistogramSummary, ImageSummary,
/// TensorSummaryV2 and MergeSummary, each a string scalar holding a serialized Summary
/// (runtime/summary_proto.hpp writes the messages).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <weft/kernels/cpu/common.hpp>
#include <weft/ops/summary_ops.hpp>
#include <weft/runtime/summary_proto.hpp>

namespace weft::cpu {

namespace summary_detail {
inline void output_summary(kernel_context& ctx, std::string s) {
  tensor& out = ctx.allocate_output(0, shape({}));
  out.data<std::string>()[0] = std::move(s);
}

inline const std::string& scalar_tag(const tensor& t, std::string_view what) {
  if (t.num_elements() != 1 || t.shape().rank() != 0)
    fail(error_code::invalid_argument, what, " must be a string scalar, got ", t.dtype(), t.shape());
  return t.data<std::string>()[0];
}

/// Calls f(values as doubles, one at a time) over a real-number tensor.
template <class F>
void each_number(const tensor& t, F f) {
  dispatcher<real_number_types>::run(
      t.dtype(),
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* p = t.data<T>();
        for (std::int64_t i = 0, n = t.num_elements(); i < n; ++i) f(i, static_cast<double>(p[i]));
      },
      [&] { fail(error_code::invalid_argument, "values of ", t.dtype(), ": a summary takes real numbers"); });
}
}  // namespace summary_detail

/// The CPU kernel of ScalarSummary.
struct scalar_summary_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit scalar_summary_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor &tags = ctx.input(0), &values = ctx.input(1);
    if (tags.shape() != values.shape())
      fail(error_code::invalid_argument, "tags and values must have the same shape, got ", tags.shape(), " and ",
           values.shape());
    const auto* t = tags.data<std::string>();
    std::vector<std::string> v(static_cast<std::size_t>(values.num_elements()));
    summary_detail::each_number(values, [&](std::int64_t i, double x) {
      v[static_cast<std::size_t>(i)] = summary_proto::scalar_value(t[i], x);
    });
    summary_detail::output_summary(ctx, summary_proto::summary_of(v));
  }
};

/// The CPU kernel of HistogramSummary.
struct histogram_summary_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit histogram_summary_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const std::string& tag = summary_detail::scalar_tag(ctx.input(0), "tag");
    histogram_builder h;
    summary_detail::each_number(ctx.input(1), [&](std::int64_t i, double x) {
      if (!std::isfinite(x))
        fail(error_code::invalid_argument, std::isnan(x) ? "NaN" : "an infinity", " in the values of histogram '", tag,
             "' (element ", i, ")");
      h.add(x);
    });
    summary_detail::output_summary(ctx, summary_proto::summary_of({summary_proto::histogram_value(tag, h.proto())}));
  }
};

/// The CPU kernel of ImageSummary.
struct image_summary_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit image_summary_kernel(const node& n)
      : max_images_(n.attr<std::int64_t>("max_images")), bad_color_(n.attr<tensor>("bad_color")) {}
  void compute(kernel_context& ctx) const override {
    const std::string& tag = summary_detail::scalar_tag(ctx.input(0), "tag");
    const auto bad = std::span<const std::uint8_t>(bad_color_.data<std::uint8_t>(),
                                                   static_cast<std::size_t>(bad_color_.num_elements()));
    summary_detail::output_summary(
        ctx, summary_proto::summary_of(summary_proto::image_values(tag, ctx.input(1), max_images_, bad, "ImageSummary")));
  }
 private:
  std::int64_t max_images_;
  tensor bad_color_;
};

/// The CPU kernel of TensorSummaryV2.
struct tensor_summary_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit tensor_summary_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const std::string& tag = summary_detail::scalar_tag(ctx.input(0), "tag");
    const std::string& metadata = summary_detail::scalar_tag(ctx.input(2), "serialized_summary_metadata");
    // The metadata must be a message (its fields are the plugin's business).
    wire::reader r(metadata, "serialized_summary_metadata");
    for (wire::field f; r.next(f);) {
    }
    summary_detail::output_summary(ctx,
                                   summary_proto::summary_of({summary_proto::tensor_value(tag, ctx.input(1), metadata)}));
  }
};

/// The CPU kernel of MergeSummary.
struct merge_summary_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit merge_summary_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    std::vector<std::string_view> all;
    for (int i = 0; i < ctx.num_inputs(); ++i)
      for (const std::string& s : ctx.input(i).flat<std::string>()) all.push_back(s);
    summary_detail::output_summary(ctx, summary_proto::merge(all, "MergeSummary"));
  }
};

/// A template, so that including this header instantiates nothing until it is called.
template <int = 0>
void register_summary_kernels() {
  ops::register_summary_ops();
  register_cpu_kernel<scalar_summary_kernel>("ScalarSummary");
  register_cpu_kernel<histogram_summary_kernel>("HistogramSummary");
  register_cpu_kernel<image_summary_kernel>("ImageSummary");
  register_cpu_kernel<tensor_summary_kernel>("TensorSummaryV2");
  register_cpu_kernel<merge_summary_kernel>("MergeSummary");
}

}  // namespace weft::cpu

/// The kernels typed code asks for (framework/kernel_for.hpp).
namespace weft {
/// Typed code's registration of every summary op's CPU kernels (the family at once). A
/// partial specialization, so that including it instantiates nothing.
template <class T>
struct kernel_for<ops::families::summary, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_summary_kernels(); }
};
}  // namespace weft
