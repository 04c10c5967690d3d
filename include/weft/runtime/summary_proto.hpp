/// @file
/// TensorFlow's Summary messages (tensorflow/core/framework/summary.proto, its field numbers),
/// written with weft's wire codec: what the summary ops (ops/summary_ops.hpp) output as
/// serialized string scalars and what summary_writer (tools/summary.hpp) puts in event files.
///
///   summary_proto::scalar_value(tag, v)            a Summary.Value with simple_value
///   summary_proto::histogram_value(tag, histo)     with a HistogramProto (histogram_builder)
///   summary_proto::image_value(tag, h, w, c, png)  with an Image (core/png.hpp's encoding)
///   summary_proto::tensor_value(tag, t, metadata)  with a TensorProto and SummaryMetadata
///   summary_proto::text_value(tag, s)              a string tensor for the text plugin
///   summary_proto::summary_of(values)              the Summary message of those values
///   summary_proto::merge(summaries, what)          the values of several Summary messages in
///                                                  one, an error on a repeated tag
///   summary_proto::image_values(tag, images, ...)  an image batch's values, as ImageSummary
///   summary_proto::image_pixels(values, ...)       float pixels to uint8 as ImageSummary does
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/png.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/core/tensor.hpp>
#include <weft/core/wire.hpp>
#include <weft/graph/graph_def.hpp>

namespace weft {

namespace summary_proto {
/// Field numbers of TensorFlow's event.proto and summary.proto.
enum event_field : std::uint32_t { wall_time = 1, step = 2, file_version = 3, graph_def = 4, summary = 5 };
/// Summary's fields.
enum summary_field : std::uint32_t { value = 1 };
/// Summary.Value's fields.
enum value_field : std::uint32_t { tag = 1, simple_value = 2, image = 4, histo = 5, tensor = 8, metadata = 9 };
/// HistogramProto's fields.
enum histogram_field : std::uint32_t { min = 1, max = 2, num = 3, sum = 4, sum_squares = 5, bucket_limit = 6, bucket = 7 };
/// Summary.Image's fields.
enum image_field : std::uint32_t { height = 1, width = 2, colorspace = 3, encoded_image_string = 4 };
/// SummaryMetadata's fields.
enum metadata_field : std::uint32_t { plugin_data = 1 };
/// SummaryMetadata.PluginData's fields.
enum plugin_data_field : std::uint32_t { plugin_name = 1 };
}  // namespace summary_proto

/// TensorFlow's default histogram bucket limits: -DBL_MAX, then -1e20 ... -1e-12 and
/// 1e-12 ... 1e20 growing by 1.1, then DBL_MAX (tensorflow/core/lib/histogram).
inline const std::vector<double>& default_histogram_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> positive;
    for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
    std::vector<double> l;
    l.push_back(-std::numeric_limits<double>::max());
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) l.push_back(-*it);
    l.push_back(0.0);
    for (double v : positive) l.push_back(v);
    l.push_back(std::numeric_limits<double>::max());
    return l;
  }();
  return limits;
}

/// A histogram over TensorFlow's buckets (a value v lands in the first bucket whose limit is
/// above it). `proto()` serializes it as TensorFlow's Histogram::EncodeToProto does: each
/// run of empty buckets written as one, with the run's last limit. NaNs are an error;
/// infinities land in the end buckets. A value's bucket is found from its binary exponent and
/// the top 6 bits of its mantissa (a 64th of an octave, so at most one limit, 1.1 apart, lies
/// in it) and one comparison, not a binary search over all 1,550 limits.
class histogram_builder {
 public:
  histogram_builder() : counts_(default_histogram_limits().size(), 0.0) {}

  /// Counts v (NaN is an invalid_argument error).
  void add(double v) {
    if (std::isnan(v)) fail(error_code::invalid_argument, "weft::summary_writer::histogram: a value is NaN");
    counts_[bucket_in(*table_, v)] += 1;
    lo_ = std::min(lo_, v), hi_ = std::max(hi_, v), sum_ += v, squares_ += v * v, ++n_;
  }

  /// The bucket of a value that is not NaN: the index of the first limit above v (the last
  /// for v at or above DBL_MAX).
  static std::size_t bucket_of(double v) { return bucket_in(table(), v); }

  /// The HistogramProto message's bytes.
  std::string proto() const;

 private:
  /// For each slot (a binary exponent e and the top sub_bits of the mantissa: the values
  /// [lo, hi) = 2^e [1 + s / 64, 1 + (s + 1) / 64)) over the finite limits' range, 1e-12 to
  /// past 1e20: the index of the first limit above lo (a positive value of the slot lands there
  /// or one later) and of the first limit above -hi (a negative one), side by side. A slot
  /// spans a factor of at most 1 + 1/64, less than the limits' 1.1, so at most one limit lies
  /// inside it.
  struct fine_table {
    static constexpr int sub_bits = 6;
    const std::vector<double>* limits = nullptr;  ///< default_histogram_limits()
    std::size_t zero = 0;                          ///< the index of the limit 0
    std::int64_t first_slot = 0;  ///< the slot number (the double's bits >> (52 - sub_bits)) of index 0
    std::int64_t slots = 0;       ///< how many slots
    std::vector<std::uint16_t> first_limit;  ///< [2 * slot]: positive values; [2 * slot + 1]: negative ones
  };
  static const fine_table& table() {
    static const fine_table t = [] {
      const auto& limits = default_histogram_limits();
      auto upper = [&](double x) {
        return static_cast<std::uint16_t>(std::upper_bound(limits.begin(), limits.end(), x) - limits.begin());
      };
      fine_table r;
      const auto slot_of = [](double x) {
        return static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(x) >> (52 - fine_table::sub_bits));
      };
      r.first_slot = slot_of(std::ldexp(1.0, std::ilogb(1e-12)));
      const std::int64_t end = slot_of(std::ldexp(1.0, std::ilogb(1e20) + 2));
      for (std::int64_t s = r.first_slot; s < end; ++s) {
        const double lo = std::bit_cast<double>(static_cast<std::uint64_t>(s) << (52 - fine_table::sub_bits));
        const double hi = std::bit_cast<double>(static_cast<std::uint64_t>(s + 1) << (52 - fine_table::sub_bits));
        r.first_limit.push_back(upper(lo));
        r.first_limit.push_back(upper(-hi));
      }
      r.slots = end - r.first_slot;
      r.limits = &limits;
      r.zero = static_cast<std::size_t>(std::lower_bound(limits.begin(), limits.end(), 0.0) - limits.begin());
      return r;
    }();
    return t;
  }
  static std::size_t bucket_in(const fine_table& t, double v) {
    const std::vector<double>& limits = *t.limits;
    const double m = std::abs(v);
    if (m < 1e-12) return t.zero + (v >= 0 ? 1 : 0);  // 0's limit for a tiny negative, 1e-12's otherwise
    // m is normal here (at least 1e-12): its slot is its exponent and the mantissa's top bits.
    const auto slot = static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(m) >> (52 - fine_table::sub_bits)) - t.first_slot;
    std::size_t i;
    if (slot >= 0 && slot < t.slots) {
      // The first limit after the slot's start (positive) or after -(its end) (negative); at
      // most one more limit lies before v. No branch on the sign: weights' signs are random.
      i = t.first_limit[2 * static_cast<std::size_t>(slot) + (v < 0)];
      i += limits[i] <= v;  // i < limits.size(): the last limit, DBL_MAX, is above every slot
    } else {
      i = static_cast<std::size_t>(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin());
    }
    return std::min(i, limits.size() - 1);
  }
  const fine_table* table_ = &table();
  std::vector<double> counts_;
  double lo_ = std::numeric_limits<double>::infinity(), hi_ = -std::numeric_limits<double>::infinity(), sum_ = 0,
         squares_ = 0;
  std::size_t n_ = 0;
};

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::string histogram_builder::proto() const {
  const auto& limits = default_histogram_limits();
  wire::writer h;
  h.float64(summary_proto::min, n_ ? lo_ : 0.0);
  h.float64(summary_proto::max, n_ ? hi_ : 0.0);
  h.float64(summary_proto::num, static_cast<double>(n_));
  h.float64(summary_proto::sum, sum_);
  h.float64(summary_proto::sum_squares, squares_);
  std::string kept_limits, kept_counts;
  auto put = [](std::string& out, double d) {
    const auto u = std::bit_cast<std::uint64_t>(d);
    for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>((u >> (8 * b)) & 0xff));
  };
  for (std::size_t i = 0; i < limits.size();) {
    double end = limits[i], count = counts_[i];
    ++i;
    if (count <= 0)
      while (i < limits.size() && counts_[i] <= 0) end = limits[i], count = counts_[i], ++i;
    put(kept_limits, end);
    put(kept_counts, count);
  }
  h.bytes(summary_proto::bucket_limit, kept_limits);  // packed repeated doubles
  h.bytes(summary_proto::bucket, kept_counts);
  return h.take();
}
#endif

/// A serialized HistogramProto of `values` (histogram_builder's).
inline std::string histogram_proto(const std::vector<double>& values) {
  histogram_builder h;
  for (double v : values) h.add(v);
  return h.proto();
}


namespace summary_proto {

/// SummaryMetadata naming a TensorBoard plugin (its plugin_data.plugin_name).
inline std::string plugin_metadata(std::string_view plugin) {
  wire::writer p, m;
  p.bytes(plugin_name, plugin);
  m.bytes(plugin_data, p.data());
  return m.take();
}

/// A scalar value (simple_value, a float).
inline std::string scalar_value(std::string_view tag_, double v) {
  wire::writer w;
  w.bytes(tag, tag_);
  w.float32(simple_value, static_cast<float>(v));
  return w.take();
}

/// A histogram value: `histogram` is a serialized HistogramProto (histogram_builder::proto).
inline std::string histogram_value(std::string_view tag_, const std::string& histogram) {
  wire::writer w;
  w.bytes(tag, tag_);
  w.bytes(histo, histogram);
  return w.take();
}

/// An image value: `png` is the encoded image, of h x w pixels with `channels` channels.
inline std::string image_value(std::string_view tag_, std::int64_t h, std::int64_t w_, int channels,
                               const std::string& png) {
  wire::writer i, w;
  i.varint(height, static_cast<std::uint64_t>(h));
  i.varint(width, static_cast<std::uint64_t>(w_));
  i.varint(colorspace, static_cast<std::uint64_t>(channels));
  i.bytes(encoded_image_string, png);
  w.bytes(tag, tag_);
  w.bytes(image, i.data());
  return w.take();
}

/// A tensor value (TensorSummaryV2's): the tensor as a TensorProto, with `metadata` (a
/// serialized SummaryMetadata; empty for none).
inline std::string tensor_value(std::string_view tag_, const weft::tensor& t, std::string_view metadata_) {
  wire::writer w;
  w.bytes(tag, tag_);
  if (!metadata_.empty()) w.bytes(metadata, metadata_);
  w.message(tensor, graph_def_detail::tensor_message(t));
  return w.take();
}

/// A string for TensorBoard's text plugin: a string scalar whose metadata names "text".
inline std::string text_value(std::string_view tag_, std::string_view s) {
  return tensor_value(tag_, weft::tensor::scalar(std::string(s)), plugin_metadata("text"));
}

/// The Summary message holding `values` (serialized Summary.Value messages).
inline std::string summary_of(std::span<const std::string> values) {
  wire::writer w;
  for (const auto& v : values) w.bytes(value, v);
  return w.take();
}
/// The Summary message holding `values`.
inline std::string summary_of(std::initializer_list<std::string> values) {
  return summary_of(std::span<const std::string>(values.begin(), values.size()));
}

/// The tag of a serialized Summary.Value (empty if it has none); `what` names it in errors.
inline std::string value_tag(std::string_view v, const std::string& what) {
  wire::reader r(v, what);
  std::string found;
  for (wire::field f; r.next(f);)
    if (f.number == tag) {
      r.expect(f, wire::wire_type::bytes, "tag");
      found = std::string(f.bytes);
    }
  return found;
}

/// One Summary of the values of every message in `summaries`, in order (MergeSummary). Each
/// message is read (a malformed one is an error naming its index); a tag that occurs twice is
/// an error naming it (empty tags, as TensorSummary's, may repeat).
inline std::string merge(std::span<const std::string_view> summaries, std::string_view what) {
  std::set<std::string> tags;
  wire::writer out;
  for (std::size_t i = 0; i < summaries.size(); ++i) {
    const std::string name = std::string(what) + ": summary " + std::to_string(i);
    wire::reader r(summaries[i], name);
    for (wire::field f; r.next(f);) {
      if (f.number != value) continue;  // Summary has no other field; unknown ones are dropped
      r.expect(f, wire::wire_type::bytes, "value");
      const std::string t = value_tag(f.bytes, name + " value");
      if (!t.empty() && !tags.insert(t).second)
        fail(error_code::invalid_argument, what, ": duplicate tag '", t, "' in the summaries merged");
      out.bytes(value, f.bytes);
    }
  }
  return out.take();
}

/// ImageSummary's conversion of one image of float pixels (`hw` pixels of `depth` channels)
/// to uint8: pixels with a channel that is not finite become `bad_color`; the rest are
/// scaled by 255 / max when no finite value is negative, else by 127 / max(|min|, |max|) and
/// offset by 128 (a scale of 0 when that maximum is below 1e-6), then truncated to uint8.
template <class T>
void image_pixels(const T* values, std::int64_t hw, std::int64_t depth, const std::uint8_t* bad_color,
                  std::uint8_t* out) {
  auto finite_pixel = [&](std::int64_t i) {
    for (std::int64_t j = 0; j < depth; ++j)
      if (!std::isfinite(static_cast<float>(values[i * depth + j]))) return false;
    return true;
  };
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (std::int64_t i = 0; i < hw; ++i)
    if (finite_pixel(i))
      for (std::int64_t j = 0; j < depth; ++j) {
        const auto v = static_cast<float>(values[i * depth + j]);
        lo = std::min(lo, v), hi = std::max(hi, v);
      }
  constexpr float zero_threshold = 1e-6f;
  float scale, offset;
  if (lo < 0) {
    const float m = std::max(std::abs(lo), std::abs(hi));
    scale = m < zero_threshold ? 0.0f : 127.0f / m, offset = 128.0f;
  } else {
    scale = hi < zero_threshold ? 0.0f : 255.0f / hi, offset = 0.0f;
  }
  for (std::int64_t i = 0; i < hw; ++i) {
    const bool finite = finite_pixel(i);
    for (std::int64_t j = 0; j < depth; ++j) {
      // In [0, 255] up to rounding: clamped, as a cast of a float above 255 is undefined.
      const float v = std::clamp(static_cast<float>(values[i * depth + j]) * scale + offset, 0.0f, 255.0f);
      out[i * depth + j] = finite ? static_cast<std::uint8_t>(v) : bad_color[j];
    }
  }
}

/// ImageSummary's values of `images`, a [batch, height, width, channels] tensor (channels 1,
/// 3 or 4) of uint8 (as they are), float16, float32 or float64 (through image_pixels, with
/// `bad_color`, which needs at least `channels` entries): the first min(batch, max_images)
/// images as PNG, tagged "<tag>/image" when max_images is 1 and "<tag>/image/<i>" otherwise.
/// `what` names the caller in errors (the node, or the writer's method).
inline std::vector<std::string> image_values(std::string_view tag_, const weft::tensor& images, std::int64_t max_images,
                                             std::span<const std::uint8_t> bad_color, std::string_view what) {
  const auto& s = images.shape();
  if (s.rank() != 4 || (s[3] != 1 && s[3] != 3 && s[3] != 4))
    fail(error_code::invalid_argument, what, ": images must be [batch, height, width, channels] with 1, 3 or 4 channels, got ",
         images.dtype(), s);
  if (s[1] == 0 || s[2] == 0)
    fail(error_code::invalid_argument, what, ": images of ", s[1], " x ", s[2], " pixels (", images.dtype(), s,
         "): an image needs at least one");
  if (max_images < 1) fail(error_code::invalid_argument, what, ": max_images is ", max_images, ", at least 1");
  const std::int64_t hw = s[1] * s[2], depth = s[3], n = std::min(s[0], max_images);
  const bool is_uint8 = images.dtype() == dtype::uint8;
  if (!is_uint8 && images.dtype() != dtype::float16 && images.dtype() != dtype::float32 && images.dtype() != dtype::float64)
    fail(error_code::invalid_argument, what, ": images of ", images.dtype(), s, " (uint8, float16, float32 or float64)");
  if (!is_uint8 && static_cast<std::int64_t>(bad_color.size()) < depth)
    fail(error_code::invalid_argument, what, ": bad_color has ", bad_color.size(), " entries for images of ", depth,
         " channels");
  std::vector<std::string> out;
  std::vector<std::uint8_t> pixels(is_uint8 ? 0 : static_cast<std::size_t>(hw * depth));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t at = i * hw * depth;
    const std::uint8_t* image = nullptr;
    switch (images.dtype()) {
      case dtype::uint8: image = images.data<std::uint8_t>() + at; break;
      case dtype::float16: image_pixels(images.data<half>() + at, hw, depth, bad_color.data(), pixels.data()); break;
      case dtype::float32: image_pixels(images.data<float>() + at, hw, depth, bad_color.data(), pixels.data()); break;
      default: image_pixels(images.data<double>() + at, hw, depth, bad_color.data(), pixels.data()); break;
    }
    if (!image) image = pixels.data();
    const std::string name = std::string(tag_) + (max_images > 1 ? "/image/" + std::to_string(i) : "/image");
    out.push_back(image_value(name, s[1], s[2], static_cast<int>(depth), encode_png(image, s[1], s[2], static_cast<int>(depth))));
  }
  return out;
}

/// ImageSummary's default bad_color: opaque red.
inline constexpr std::uint8_t default_bad_color[4] = {255, 0, 0, 255};

}  // namespace summary_proto

}  // namespace weft
