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

// A serialized HistogramProto of `values` over TensorFlow's buckets (a value v lands in the
// first bucket whose limit is above it; each run of empty buckets is written as one, with
// the run's last limit, as TensorFlow's Histogram::EncodeToProto does). NaNs are an error;
// infinities land in the end buckets.
inline std::string histogram_proto(const std::vector<double>& values) {
  const auto& limits = default_histogram_limits();
  std::vector<double> counts(limits.size(), 0.0);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0, squares = 0;
  for (double v : values) {
    if (std::isnan(v)) fail(error_code::invalid_argument, "weft::summary_writer::histogram: a value is NaN");
    const auto at = std::upper_bound(limits.begin(), limits.end(), v) - limits.begin();
    counts[static_cast<std::size_t>(std::min<std::ptrdiff_t>(at, static_cast<std::ptrdiff_t>(limits.size()) - 1))] += 1;
    lo = std::min(lo, v), hi = std::max(hi, v), sum += v, squares += v * v;
  }
  if (values.empty()) lo = hi = 0;
  wire::writer h;
  h.float64(summary_proto::min, lo);
  h.float64(summary_proto::max, hi);
  h.float64(summary_proto::num, static_cast<double>(values.size()));
  h.float64(summary_proto::sum, sum);
  h.float64(summary_proto::sum_squares, squares);
  std::string kept_limits, kept_counts;
  for (std::size_t i = 0; i < limits.size();) {
    double end = limits[i], count = counts[i];
    ++i;
    if (count <= 0)
      while (i < limits.size() && counts[i] <= 0) end = limits[i], count = counts[i], ++i;
    const auto l = std::bit_cast<std::uint64_t>(end), c = std::bit_cast<std::uint64_t>(count);
    for (int b = 0; b < 8; ++b) kept_limits.push_back(static_cast<char>((l >> (8 * b)) & 0xff));
    for (int b = 0; b < 8; ++b) kept_counts.push_back(static_cast<char>((c >> (8 * b)) & 0xff));
  }
  h.bytes(summary_proto::bucket_limit, kept_limits);  // packed repeated doubles
  h.bytes(summary_proto::bucket, kept_counts);
  return h.take();
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
  // The values of a float tensor (any shape), or of a vector of numbers.
  void histogram(std::string_view tag, const tensor& t, std::int64_t step) {
    std::vector<double> values;
    switch (t.dtype()) {
      case dtype::float32: for (float v : t.flat<float>()) values.push_back(v); break;
      case dtype::float64: for (double v : t.flat<double>()) values.push_back(v); break;
      case dtype::int32: for (std::int32_t v : t.flat<std::int32_t>()) values.push_back(v); break;
      case dtype::int64: for (std::int64_t v : t.flat<std::int64_t>()) values.push_back(static_cast<double>(v)); break;
      default:
        fail(error_code::invalid_argument, "weft::summary_writer::histogram '", tag, "': a ", t.dtype(),
             " tensor (float32, float64, int32 or int64 only)");
    }
    histogram(tag, values, step);
  }
  void histogram(std::string_view tag, const std::vector<double>& values, std::int64_t step) {
    wire::writer v;
    v.bytes(summary_proto::tag, tag);
    v.bytes(summary_proto::histo, histogram_proto(values));
    add_summary(v.take(), step);
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
