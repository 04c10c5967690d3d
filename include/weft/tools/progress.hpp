/// @file
/// Progress and metrics of a training loop: a metrics_logger keeps running means of named
/// metrics (per epoch, for the display, and since the last summary written, for TensorBoard)
/// and writes them to a summary_writer every `every` steps; a progress_bar draws an epoch's
/// progress with the logger's means, steps and examples per second and the time left:
///
///   weft::summary_writer events("runs/mlp");
///   weft::metrics_logger metrics(&events, 100);      // or nullptr: no summaries
///   weft::progress_bar bar(steps_per_epoch);
///   for (int epoch = 1; epoch <= epochs; ++epoch) {
///     bar.start("epoch " + std::to_string(epoch) + "/" + std::to_string(epochs));
///     metrics.start_epoch();
///     for (...) {
///       ... run a step ...
///       metrics.add("loss", loss, batch);           // means weighted by the batch's size
///       metrics.add("accuracy", correct / batch, batch);
///       metrics.end_step(++global_step);            // every 100 steps: the means as scalars
///       bar.step(batch, metrics.text());
///     }
///     double seconds = bar.end(metrics.text());
///   }
///
/// On a terminal the bar is redrawn in place:
///   epoch 1/5 [#########...............] 180/469  loss 0.3120  accuracy 0.9041  412.5 steps/s  52800 ex/s  ETA 0:01
/// elsewhere (a log file, CTest) it is a plain line every `line_every` steps and at the end.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/tools/summary.hpp>

namespace weft {

/// Running means of named metrics, written to a summary_writer every `every` steps (see the
/// top of this header).
class metrics_logger {
 public:
  /// Writes to `writer` (may be null: the means are only kept) every `every` steps.
  explicit metrics_logger(summary_writer* writer = nullptr, std::int64_t every = 100) : writer_(writer), every_(every) {
    if (every < 1) fail(error_code::invalid_argument, "weft::metrics_logger: every is ", every, ", at least 1");
  }

  /// A value of metric `name` in this step, weighted (by a batch's size, say) in the means.
  void add(std::string_view name, double value, double weight = 1) {
    auto it = index_.find(std::string(name));
    if (it == index_.end()) {
      it = index_.emplace(std::string(name), metrics_.size()).first;
      metrics_.push_back(metric{std::string(name)});
    }
    auto& m = metrics_[it->second];
    m.epoch.add(value, weight);
    m.window.add(value, weight);
  }
  /// Ends step `global_step`: when it is a multiple of `every`, each metric's mean since the
  /// last write goes to the writer as a scalar at that step.
  void end_step(std::int64_t global_step) {
    if (global_step % every_ != 0) return;
    for (auto& m : metrics_) {
      if (m.window.weight > 0 && writer_) writer_->scalar(m.name, m.window.mean(), global_step);
      m.window = {};
    }
  }
  /// A value straight to the writer (an epoch's test accuracy, say), not to the means.
  void scalar(std::string_view name, double value, std::int64_t global_step) {
    if (writer_) writer_->scalar(name, value, global_step);
  }
  /// Starts the epoch's means afresh.
  void start_epoch() {
    for (auto& m : metrics_) m.epoch = {};
  }
  /// A metric's mean over the epoch (NaN for a metric never added this epoch).
  double mean(std::string_view name) const {
    auto it = index_.find(std::string(name));
    if (it == index_.end() || metrics_[it->second].epoch.weight <= 0) return std::nan("");
    return metrics_[it->second].epoch.mean();
  }
  /// The epoch's means in the order the metrics were first added: "loss 0.3120  accuracy 0.9041".
  std::string text() const {
    std::string out;
    char buf[64];
    for (const auto& m : metrics_) {
      if (m.epoch.weight <= 0) continue;
      std::snprintf(buf, sizeof buf, "%.4f", m.epoch.mean());
      out += (out.empty() ? "" : "  ") + m.name + " " + buf;
    }
    return out;
  }
  /// The writer the means go to (null for none).
  summary_writer* writer() const noexcept { return writer_; }

 private:
  struct running {
    double sum = 0, weight = 0;
    void add(double v, double w) { sum += v * w, weight += w; }
    double mean() const { return sum / weight; }
  };
  struct metric {
    std::string name{};
    running epoch{}, window{};
  };
  summary_writer* writer_;
  std::int64_t every_;
  std::vector<metric> metrics_;
  std::map<std::string, std::size_t> index_;
};

/// Where and how a progress_bar draws.
struct progress_options {
  std::FILE* out = stdout;        ///< where the bar is drawn
  int terminal = -1;              ///< 1: redraw in place; 0: plain lines; -1: whether `out` is a terminal
  std::int64_t line_every = 100;  ///< plain lines: one every this many steps, and one at the end
  int width = 24;                 ///< the bar's characters
  double redraw_seconds = 0.1;    ///< a terminal: redrawn at most this often (and at the end)
  std::function<double()> clock{};  ///< seconds, for tests; a steady clock when empty
};

/// An epoch's progress, drawn in place on a terminal and as lines elsewhere (see the top of
/// this header).
class progress_bar {
 public:
  /// An epoch of `steps` steps (0 when unknown: no bar, no time left).
  explicit progress_bar(std::int64_t steps, progress_options options = {}) : steps_(steps), options_(std::move(options)) {
    if (steps < 0) fail(error_code::invalid_argument, "weft::progress_bar: ", steps, " steps");
    if (options_.line_every < 1) fail(error_code::invalid_argument, "weft::progress_bar: line_every is ", options_.line_every);
    terminal_ = options_.terminal >= 0 ? options_.terminal == 1 : ::isatty(::fileno(options_.out)) != 0;
    start("");
  }

  /// A new epoch (or run) labelled `label` ("epoch 2/5").
  void start(std::string label) {
    label_ = std::move(label), done_ = 0, examples_ = 0, start_ = now(), last_draw_ = -1e300;
  }
  /// One step of `examples` examples done; `metrics` is shown after the bar.
  void step(std::int64_t examples = 0, std::string_view metrics = {}) {
    ++done_, examples_ += examples;
    if (terminal_) {
      if (const double t = now(); t - last_draw_ >= options_.redraw_seconds || done_ == steps_) {
        last_draw_ = t;
        draw(metrics, false);
      }
    } else if (done_ % options_.line_every == 0) {
      draw(metrics, true);
    }
  }
  /// Ends the epoch: its last line (on a terminal, the bar with a newline). Returns its seconds.
  double end(std::string_view metrics = {}) {
    if (terminal_) {
      draw(metrics, false);
      std::fputc('\n', options_.out);
      drawn_ = 0;
    } else if (done_ % options_.line_every != 0 || done_ == 0) {
      draw(metrics, true);
    }
    std::fflush(options_.out);
    return seconds();
  }

  /// Seconds since start().
  double seconds() const { return now() - start_; }
  /// Steps done since start().
  std::int64_t steps_done() const noexcept { return done_; }
  /// Steps per second since start().
  double steps_per_second() const {
    const double s = seconds();
    return s > 0 ? static_cast<double>(done_) / s : 0;
  }
  /// Seconds left at the epoch's rate so far (negative when unknown).
  double eta_seconds() const {
    const double r = steps_per_second();
    if (steps_ == 0 || r <= 0) return -1;
    return static_cast<double>(std::max<std::int64_t>(steps_ - done_, 0)) / r;
  }
  /// The text of the bar now.
  std::string line(std::string_view metrics = {}) const;

 private:
  double now() const {
    if (options_.clock) return options_.clock();
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  void draw(std::string_view metrics, bool newline) {
    const std::string text = line(metrics);
    if (newline) {
      std::fprintf(options_.out, "%s\n", text.c_str());
    } else {
      // Over the last line: a shorter line would leave the longer one's tail, so pad.
      std::fprintf(options_.out, "\r%s%s", text.c_str(),
                   std::string(text.size() < drawn_ ? drawn_ - text.size() : 0, ' ').c_str());
      drawn_ = text.size();
    }
    std::fflush(options_.out);
  }

  std::int64_t steps_;
  progress_options options_;
  bool terminal_ = false;
  std::string label_;
  std::int64_t done_ = 0, examples_ = 0;
  double start_ = 0, last_draw_ = 0;
  std::size_t drawn_ = 0;
};

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::string progress_bar::line(std::string_view metrics) const {
  std::string out = label_;
  if (steps_ > 0) {
    const auto filled = static_cast<std::size_t>(std::min<std::int64_t>(options_.width * done_ / steps_, options_.width));
    std::string bar(filled, '#');
    bar.resize(static_cast<std::size_t>(options_.width), '.');
    out += (out.empty() ? "[" : " [") + bar + "] " + std::to_string(done_) + "/" + std::to_string(steps_);
  } else {
    out += (out.empty() ? "" : " ") + std::string("step ") + std::to_string(done_);
  }
  if (!metrics.empty()) out += "  " + std::string(metrics);
  char buf[96];
  const double s = seconds();
  std::snprintf(buf, sizeof buf, "  %.1f steps/s", steps_per_second());
  out += buf;
  if (examples_ > 0 && s > 0) {
    std::snprintf(buf, sizeof buf, "  %.0f ex/s", static_cast<double>(examples_) / s);
    out += buf;
  }
  if (const double eta = eta_seconds(); eta >= 0) {
    const auto t = static_cast<long long>(std::llround(eta));
    if (t >= 3600) std::snprintf(buf, sizeof buf, "  ETA %lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
    else std::snprintf(buf, sizeof buf, "  ETA %lld:%02lld", t / 60, t % 60);
    out += buf;
  }
  return out;
}
#endif

}  // namespace weft
