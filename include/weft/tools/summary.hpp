/// @file
/// TensorBoard's event files (the whitepaper's summaries): a summary_writer appends
/// TensorFlow `Event` records (tensorflow/core/util/event.proto, its field numbers) in
/// TFRecord framing (runtime/records.hpp: lengths and data under masked CRC-32C) to
/// `<logdir>/events.out.tfevents.<seconds>.<host>`, which TensorBoard reads:
///
///   weft::summary_writer log("runs/mlp");       // one file per writer, in its run directory
///   log.graph(g);                               // the graph, as a GraphDef event
///   log.scalar("loss", 0.25f, step);            // Summary.Value.simple_value
///   log.histogram("weights/fc1", w, step);      // HistogramProto with TensorFlow's buckets
///   log.text("notes", "lr 1e-3", step);         // a string tensor for the text plugin
///   log.image("inputs", batch, step);           // [n, h, w, c] images as PNG (the first 3)
///   log.summary(merged, step);                  // what a summary op computed (a serialized
///                                               // Summary: ops/summary_ops.hpp)
///   log.flush();                                // also every flush_seconds, and on close
///
/// Records are written by `flush` (buffered in between), appended, so a reader sees whole
/// records of the flushed prefix; a writer that dies loses what it had not flushed. Errors
/// name the file.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/core/tensor.hpp>
#include <weft/core/wire.hpp>
#include <weft/graph/graph.hpp>
#include <weft/graph/graph_def.hpp>
#include <weft/runtime/records.hpp>
#include <weft/runtime/summary_proto.hpp>

namespace weft {

/// How a summary_writer names and flushes its file.
struct summary_writer_options {
  double flush_seconds = 120;   ///< flush when a record is added this long after the last flush
  std::string filename_suffix;  ///< appended to the file's name
};

/// Writes TensorBoard event files: one file per writer in its run directory (see the top of
/// this header).
class summary_writer {
 public:
  /// Creates `logdir` if needed and a new events file in it, which starts with the file version.
  explicit summary_writer(const std::filesystem::path& logdir, summary_writer_options options = {});
  summary_writer(const summary_writer&) = delete;
  summary_writer& operator=(const summary_writer&) = delete;
  ~summary_writer() {
    try {
      flush();
    } catch (const error&) {  // a destructor does not throw; flush() first to see the error
    }
  }

  /// The events file.
  const std::filesystem::path& path() const noexcept { return path_; }

  /// A scalar (Summary.Value.simple_value, as float) of `tag` at `step`.
  void scalar(std::string_view tag, double value, std::int64_t step) {
    add_value(summary_proto::scalar_value(tag, value), step);
  }
  /// The values of a tensor of real numbers (any shape: floats of every width, bfloat16
  /// included, and integers), or of a vector of numbers.
  void histogram(std::string_view tag, const tensor& t, std::int64_t step) {
    histogram_builder h;
    dispatcher<real_number_types>::run(
        t.dtype(),
        [&](auto type) {
          using T = typename decltype(type)::type;
          for (const T& v : t.flat<T>()) h.add(static_cast<double>(v));
        },
        [&] {
          fail(error_code::invalid_argument, "weft::summary_writer::histogram '", tag, "': a ", t.dtype(),
               " tensor (real numbers only)");
        });
    add_value(summary_proto::histogram_value(tag, h.proto()), step);
  }
  /// A histogram of `values` (TensorFlow's default buckets) of `tag` at `step`.
  void histogram(std::string_view tag, const std::vector<double>& values, std::int64_t step) {
    add_value(summary_proto::histogram_value(tag, histogram_proto(values)), step);
  }
  /// A string for TensorBoard's text plugin: a DT_STRING scalar TensorProto whose metadata
  /// names the plugin "text".
  void text(std::string_view tag, std::string_view s, std::int64_t step) {
    add_value(summary_proto::text_value(tag, s), step);
  }
  /// Images as ImageSummary writes them (summary_proto::image_values): `images` is
  /// [n, height, width, channels] (or one [height, width, channels] image) of uint8, float16,
  /// float32 or float64; the first max_images become PNG images tagged "<tag>/image/<i>"
  /// ("<tag>/image" when max_images is 1).
  void image(std::string_view tag, const tensor& images, std::int64_t step, std::int64_t max_images = 3) {
    tensor batch = images;
    if (images.shape().rank() == 3) {
      auto dims = images.shape().dims();
      dims.insert(dims.begin(), 1);
      batch = images.reshape(shape(dims));
    }
    const std::string what = "weft::summary_writer::image '" + std::string(tag) + "'";
    const auto values = summary_proto::image_values(tag, batch, max_images, summary_proto::default_bad_color, what);
    add_summary(summary_proto::summary_of(values), step);
  }
  /// A serialized Summary (what ScalarSummary, HistogramSummary, ImageSummary,
  /// TensorSummaryV2 and MergeSummary output), as a string or a string scalar tensor.
  void summary(std::string_view serialized, std::int64_t step) {
    summary_proto::merge(std::span<const std::string_view>(&serialized, 1), "weft::summary_writer::summary");  // checks it
    add_summary(std::string(serialized), step);
  }
  /// A summary op's output (a string scalar tensor), at `step`.
  void summary(const tensor& serialized, std::int64_t step) {
    if (serialized.dtype() != dtype::string || serialized.num_elements() != 1)
      fail(error_code::invalid_argument, "weft::summary_writer::summary: a serialized Summary is a string scalar, got ",
           serialized.dtype(), serialized.shape());
    summary(std::string_view(serialized.flat<std::string>()[0]), step);
  }
  /// The graph, as TensorBoard's graph view reads it (a GraphDef event).
  void graph(const weft::graph& g) {
    wire::writer e;
    e.float64(summary_proto::wall_time, wall_seconds());
    e.bytes(summary_proto::graph_def, to_graph_def(g));
    add_record(e.take());
  }

  /// Writes the records added since the last flush, and fflush()es the file.
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
  void add_value(const std::string& value, std::int64_t step) { add_summary(summary_proto::summary_of({value}), step); }
  void add_summary(const std::string& summary, std::int64_t step) {
    wire::writer e;
    e.float64(summary_proto::wall_time, wall_seconds());
    e.varint(summary_proto::step, static_cast<std::uint64_t>(step));
    e.bytes(summary_proto::summary, summary);
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

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE summary_writer::summary_writer(const std::filesystem::path& logdir, summary_writer_options options)
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
#endif

}  // namespace weft
