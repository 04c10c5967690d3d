// TensorBoard's event files (the whitepaper's summaries): a summary_writer appends
// TensorFlow `Event` records (tensorflow/core/util/event.proto, its field numbers) in
// TFRecord framing (runtime/records.hpp: lengths and data under masked CRC-32C) to
// `<logdir>/events.out.tfevents.<seconds>.<host>`, which TensorBoard reads:
//
//   weft::summary_writer log("runs/mlp");       // one file per writer, in its run directory
//   log.graph(g);                               // the graph, as a GraphDef event
//   log.scalar("loss", 0.25f, step);            // Summary.Value.simple_value
//   log.histogram("weights/fc1", w, step);      // HistogramProto with TensorFlow's buckets
//   log.text("notes", "lr 1e-3", step);         // a string tensor for the text plugin
//   log.flush();                                // also every flush_seconds, and on close
//
// Records are written by `flush` (buffered in between), appended, so a reader sees whole
// records of the flushed prefix; a writer that dies loses what it had not flushed. Errors
// name the file.
#pragma once

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <weft/core/error.hpp>
#include <weft/core/tensor.hpp>
#include <weft/core/wire.hpp>
#include <weft/graph/graph.hpp>
#include <weft/graph/graph_def.hpp>
#include <weft/runtime/records.hpp>

namespace weft {

namespace summary_proto {
// Field numbers of TensorFlow's event.proto and summary.proto.
enum event_field : std::uint32_t { wall_time = 1, step = 2, file_version = 3, graph_def = 4, summary = 5 };
enum summary_field : std::uint32_t { value = 1 };
enum value_field : std::uint32_t { tag = 1, simple_value = 2, image = 4, histo = 5, tensor = 8, metadata = 9 };
enum histogram_field : std::uint32_t { min = 1, max = 2, num = 3, sum = 4, sum_squares = 5, bucket_limit = 6, bucket = 7 };
enum metadata_field : std::uint32_t { plugin_data = 1 };
enum plugin_data_field : std::uint32_t { plugin_name = 1 };
}  // namespace summary_proto

// TensorFlow's default histogram bucket limits: -DBL_MAX, then -1e20 ... -1e-12 and
// 1e-12 ... 1e20 growing by 1.1, then DBL_MAX (tensorflow/core/lib/histogram).
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

// A histogram over TensorFlow's buckets (a value v lands in the first bucket whose limit is
// above it). `proto()` serializes it as TensorFlow's Histogram::EncodeToProto does: each
// run of empty buckets written as one, with the run's last limit. NaNs are an error;
// infinities land in the end buckets. A value's bucket is found from its binary exponent
// (about 7 limits per octave) and a short scan, not a binary search over all 1,550 limits.
class histogram_builder {
 public:
  histogram_builder() : counts_(default_histogram_limits().size(), 0.0) {}

  void add(double v) {
    if (std::isnan(v)) fail(error_code::invalid_argument, "weft::summary_writer::histogram: a value is NaN");
    counts_[bucket_of(v)] += 1;
    lo_ = std::min(lo_, v), hi_ = std::max(hi_, v), sum_ += v, squares_ += v * v, ++n_;
  }

  // The bucket of a value that is not NaN: the index of the first limit above v (the last
  // for v at or above DBL_MAX).
  static std::size_t bucket_of(double v) {
    const auto& limits = default_histogram_limits();
    std::size_t i;
    const double m = std::abs(v);
    const int e = m > 0 && std::isfinite(m) ? std::ilogb(m) : 0;
    if (m < 1e-12) {
      i = zero_index() + (v >= 0 ? 1 : 0);  // 0's limit for a tiny negative, 1e-12's otherwise
    } else if (std::isfinite(m) && e >= table().lowest && e < table().lowest + static_cast<int>(table().positive.size())) {
      const auto k = static_cast<std::size_t>(e - table().lowest);
      i = v > 0 ? table().positive[k] : table().negative[k];
      while (i < limits.size() && limits[i] <= v) ++i;
    } else {
      i = static_cast<std::size_t>(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin());
    }
    return std::min(i, limits.size() - 1);
  }

  std::string proto() const {
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

 private:
  // For each binary exponent e of the finite limits' range: the first limit above 2^e (a
  // positive value of that exponent lands there or later) and the first above -2^(e+1) (a
  // negative one).
  struct exponent_table {
    int lowest = 0;
    std::vector<std::size_t> positive, negative;
  };
  static const exponent_table& table() {
    static const exponent_table t = [] {
      const auto& limits = default_histogram_limits();
      exponent_table r;
      r.lowest = std::ilogb(1e-12);
      for (int e = r.lowest; e <= std::ilogb(1e20) + 1; ++e) {
        const double p = std::ldexp(1.0, e), q = -std::ldexp(1.0, e + 1);
        r.positive.push_back(static_cast<std::size_t>(std::upper_bound(limits.begin(), limits.end(), p) - limits.begin()));
        r.negative.push_back(static_cast<std::size_t>(std::upper_bound(limits.begin(), limits.end(), q) - limits.begin()));
      }
      return r;
    }();
    return t;
  }
  static std::size_t zero_index() {
    static const std::size_t z = static_cast<std::size_t>(
        std::lower_bound(default_histogram_limits().begin(), default_histogram_limits().end(), 0.0) -
        default_histogram_limits().begin());
    return z;
  }
  std::vector<double> counts_;
  double lo_ = std::numeric_limits<double>::infinity(), hi_ = -std::numeric_limits<double>::infinity(), sum_ = 0,
         squares_ = 0;
  std::size_t n_ = 0;
};

// A serialized HistogramProto of `values` (histogram_builder's).
inline std::string histogram_proto(const std::vector<double>& values) {
  histogram_builder h;
  for (double v : values) h.add(v);
  return h.proto();
}

struct summary_writer_options {
  double flush_seconds = 120;  // flush when a record is added this long after the last flush
  std::string filename_suffix;  // appended to the file's name
};

class summary_writer {
 public:
  explicit summary_writer(const std::filesystem::path& logdir, summary_writer_options options = {})
      : options_(std::move(options)) {
    std::error_code ec;
    std::filesystem::create_directories(logdir, ec);
    if (ec) fail(error_code::failed_precondition, "weft::summary_writer: cannot create the directory ", logdir, ": ", ec.message());
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0 || !host[0]) std::snprintf(host, sizeof host, "localhost");
    const auto seconds = static_cast<long long>(wall_seconds());
    path_ = logdir / ("events.out.tfevents." + std::to_string(seconds) + "." + host + options_.filename_suffix);
    // A second writer in the same second gets a file of its own.
    for (int k = 1; std::filesystem::exists(path_); ++k)
      path_ = logdir / ("events.out.tfevents." + std::to_string(seconds) + "." + host + options_.filename_suffix + "." +
                        std::to_string(k));
    file_.reset(std::fopen(path_.c_str(), "wb"));
    if (!file_) fail(error_code::failed_precondition, "weft::summary_writer: cannot create ", path_);
    wire::writer e;
    e.float64(summary_proto::wall_time, wall_seconds());
    e.bytes(summary_proto::file_version, "brain.Event:2");
    add_record(e.take());
    flush();
  }
  summary_writer(const summary_writer&) = delete;
  summary_writer& operator=(const summary_writer&) = delete;
  ~summary_writer() {
    try {
      flush();
    } catch (const error&) {  // a destructor does not throw; flush() first to see the error
    }
  }

  const std::filesystem::path& path() const noexcept { return path_; }

  void scalar(std::string_view tag, double value, std::int64_t step) {
    wire::writer v;
    v.bytes(summary_proto::tag, tag);
    v.float32(summary_proto::simple_value, static_cast<float>(value));
    add_summary(v.take(), step);
  }
  // The values of a float or integer tensor (any shape), or of a vector of numbers.
  void histogram(std::string_view tag, const tensor& t, std::int64_t step) {
    histogram_builder h;
    auto each = [&](auto span) {
      for (auto v : span) h.add(static_cast<double>(v));
    };
    switch (t.dtype()) {
      case dtype::float32: each(t.flat<float>()); break;
      case dtype::float64: each(t.flat<double>()); break;
      case dtype::int32: each(t.flat<std::int32_t>()); break;
      case dtype::int64: each(t.flat<std::int64_t>()); break;
      default:
        fail(error_code::invalid_argument, "weft::summary_writer::histogram '", tag, "': a ", t.dtype(),
             " tensor (float32, float64, int32 or int64 only)");
    }
    add_histogram(tag, h.proto(), step);
  }
  void histogram(std::string_view tag, const std::vector<double>& values, std::int64_t step) {
    add_histogram(tag, histogram_proto(values), step);
  }
  // A string for TensorBoard's text plugin: a DT_STRING scalar TensorProto whose metadata
  // names the plugin "text".
  void text(std::string_view tag, std::string_view s, std::int64_t step) {
    wire::writer plugin, metadata, tensor_proto, v;
    plugin.bytes(summary_proto::plugin_name, "text");
    metadata.bytes(summary_proto::plugin_data, plugin.data());
    tensor_proto.varint(1, 7);                 // TensorProto.dtype = DT_STRING
    tensor_proto.bytes(2, std::string_view());  // tensor_shape: a scalar
    tensor_proto.bytes(8, s);                  // string_val
    v.bytes(summary_proto::tag, tag);
    v.bytes(summary_proto::metadata, metadata.data());
    v.bytes(summary_proto::tensor, tensor_proto.data());
    add_summary(v.take(), step);
  }
  // The graph, as TensorBoard's graph view reads it (a GraphDef event).
  void graph(const weft::graph& g) {
    wire::writer e;
    e.float64(summary_proto::wall_time, wall_seconds());
    e.bytes(summary_proto::graph_def, to_graph_def(g));
    add_record(e.take());
  }

  // Writes the records added since the last flush, and fflush()es the file.
  void flush() {
    if (!pending_.empty()) {
      if (std::fwrite(pending_.data(), 1, pending_.size(), file_.get()) != pending_.size())
        fail(error_code::data_loss, "weft::summary_writer: writing ", path_, " failed");
      pending_.clear();
    }
    if (std::fflush(file_.get()) != 0) fail(error_code::data_loss, "weft::summary_writer: flushing ", path_, " failed");
    last_flush_ = std::chrono::steady_clock::now();
  }

 private:
  static double wall_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  void add_histogram(std::string_view tag, const std::string& histo, std::int64_t step) {
    wire::writer v;
    v.bytes(summary_proto::tag, tag);
    v.bytes(summary_proto::histo, histo);
    add_summary(v.take(), step);
  }
  void add_summary(const std::string& value, std::int64_t step) {
    wire::writer summary, e;
    summary.bytes(summary_proto::value, value);
    e.float64(summary_proto::wall_time, wall_seconds());
    e.varint(summary_proto::step, static_cast<std::uint64_t>(step));
    e.bytes(summary_proto::summary, summary.data());
    add_record(e.take());
  }
  void add_record(const std::string& event) {
    append_tfrecord(pending_, event);
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - last_flush_).count() >= options_.flush_seconds) flush();
  }
  struct closer {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
  };
  summary_writer_options options_;
  std::filesystem::path path_;
  std::unique_ptr<std::FILE, closer> file_;
  std::string pending_;
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
};

}  // namespace weft
