/// @file
/// Summary ops (TensorFlow's, for TensorBoard): each outputs a string scalar, a serialized
/// Summary message (runtime/summary_proto.hpp), which a summary_writer (tools/summary.hpp)
/// writes to an event file with `summary(value, step)`:
///   ScalarSummary(tags: string, values: T) -> summary     one simple_value per element,
///       tags and values of the same shape
///   HistogramSummary(tag: string, values: T) -> summary   values (any shape) in TensorFlow's
///       default buckets; a NaN or infinite value is an error naming the node
///   ImageSummary(tag: string, tensor: T; max_images >= 1 = 3, bad_color) -> summary
///       tensor [batch, height, width, channels], channels 1, 3 or 4: the first max_images
///       images as PNG; uint8 as they are, float16/32/64 scaled to [0, 255] (by 255 / max
///       when nothing is negative, else by 127 / max |x| around 128), pixels that are not
///       finite in bad_color (a uint8 vector, opaque red by default)
///   TensorSummaryV2(tag: string, tensor: T, serialized_summary_metadata: string) -> summary
///       the tensor itself (a TensorProto), with the plugin metadata given
///   MergeSummary(inputs: N * string) -> summary     the values of every input Summary (of
///       any shape) in one; a tag found twice is an error
/// All are stateless; ScalarSummary, HistogramSummary and TensorSummaryV2 take every real
/// number dtype (TensorSummaryV2 also strings and bool).
#pragma once

#include <string>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/core/tensor.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>

namespace weft::ops {

namespace detail {
inline constexpr const char* summary_number_types =
    "T: {float32, float64, float16, bfloat16, int8, int16, int32, int64, uint8, uint16, uint32, uint64}";

inline void summary_output(shape_context& c) { c.set_output(0, partial_shape(std::vector<std::int64_t>{})); }

inline tensor default_bad_color() {
  tensor t(dtype::uint8, shape({4}));
  const std::uint8_t red[4] = {255, 0, 0, 255};
  for (int i = 0; i < 4; ++i) t.data<std::uint8_t>()[i] = red[i];
  return t;
}
}  // namespace detail

/// The summary family's op definitions (registered by register_summary_ops()).
std::vector<op_def> summary_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> summary_op_defs() {
  std::vector<op_def> defs;
  defs.push_back(op_def_builder("ScalarSummary")
                     .input("tags: string")
                     .input("values: T")
                     .output("summary: string")
                     .attr(detail::summary_number_types)
                     .shape_fn([](shape_context& c) {
                       const auto &t = c.input(0), &v = c.input(1);
                       if (t.rank_known() && v.rank_known()) {
                         bool same = t.rank() == v.rank();
                         for (int i = 0; same && i < t.rank(); ++i) same = t[i] < 0 || v[i] < 0 || t[i] == v[i];
                         if (!same) c.fail("tags and values must have the same shape, got ", t, " and ", v);
                       }
                       detail::summary_output(c);
                     })
                     .cheap()
                     .build());
  defs.push_back(op_def_builder("HistogramSummary")
                     .input("tag: string")
                     .input("values: T")
                     .output("summary: string")
                     .attr(std::string(detail::summary_number_types) + " = float32")
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 0, "tag");
                       detail::summary_output(c);
                     })
                     .build());
  defs.push_back(op_def_builder("ImageSummary")
                     .input("tag: string")
                     .input("tensor: T")
                     .output("summary: string")
                     .attr("max_images: int = 3")
                     .attr("T: {uint8, float32, float16, float64} = float32")
                     .attr("bad_color: tensor", attr_value(detail::default_bad_color()))
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 0, "tag");
                       require_rank(c, 1, 4, "tensor (images: [batch, height, width, channels])");
                       const auto& in = c.input(1);
                       if (in.rank_known() && in[3] >= 0 && in[3] != 1 && in[3] != 3 && in[3] != 4)
                         c.fail("images have 1, 3 or 4 channels, got shape ", in);
                       if (c.attr<std::int64_t>("max_images") < 1)
                         c.fail("max_images must be at least 1, got ", c.attr<std::int64_t>("max_images"));
                       const auto& bad = c.attr<tensor>("bad_color");
                       if (bad.dtype() != dtype::uint8 || bad.shape().rank() != 1)
                         c.fail("bad_color must be a uint8 vector, got ", bad.dtype(), bad.shape());
                       detail::summary_output(c);
                     })
                     .build());
  defs.push_back(op_def_builder("TensorSummaryV2")
                     .input("tag: string")
                     .input("tensor: T")
                     .input("serialized_summary_metadata: string")
                     .output("summary: string")
                     .attr("T: any type")
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 0, "tag");
                       require_rank(c, 2, 0, "serialized_summary_metadata");
                       detail::summary_output(c);
                     })
                     .build());
  defs.push_back(op_def_builder("MergeSummary")
                     .input("inputs: N * string")
                     .output("summary: string")
                     .attr("N: int")
                     .shape_fn([](shape_context& c) {
                       if (c.num_inputs() < 1) c.fail("needs at least one summary to merge");
                       detail::summary_output(c);
                     })
                     .cheap()
                     .build());
  return defs;
}
#endif

/// Adds the summary ops to the global registry, once; registering the family's kernels calls it.
inline void register_summary_ops() { op_registry::global().add_family("summary", summary_op_defs); }

/// The ops of this family as C++ types (framework/kernel_for.hpp).
WEFT_DETAIL_OP_TYPE(ScalarSummary, summary)
WEFT_DETAIL_OP_TYPE(HistogramSummary, summary)
WEFT_DETAIL_OP_TYPE(ImageSummary, summary)
WEFT_DETAIL_OP_TYPE(TensorSummaryV2, summary)
WEFT_DETAIL_OP_TYPE(MergeSummary, summary)
namespace families {  // the whole family (its kernels for every dtype, on each device type)
/// The summary family as a C++ type: use_kernels<ops::families::summary>() registers its ops and kernels.
struct summary {
  static constexpr const char* name = "summary";  ///< the family's name
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using types = type_list<ScalarSummary, HistogramSummary, ImageSummary, TensorSummaryV2, MergeSummary>;  ///< its op types
  /// Registers the family's op definitions.
  static void define() { register_summary_ops(); }
};
}  // namespace families

}  // namespace weft::ops
