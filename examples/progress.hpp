// The examples' progress display: on a terminal, one bar per epoch redrawn in place (step,
// loss, accuracy, examples per second); otherwise plain lines, one every `every` steps and
// one at the end of each epoch.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace weft_examples {

class progress {
 public:
  explicit progress(int epochs, long steps_per_epoch, long every = 100)
      : epochs_(epochs), steps_(steps_per_epoch), every_(every), tty_(isatty(STDOUT_FILENO) != 0) {}

  void start_epoch(int epoch) {
    epoch_ = epoch, step_ = 0, examples_ = 0, loss_sum_ = 0, correct_ = 0;
    start_ = std::chrono::steady_clock::now();
  }
  // One step of `batch` examples with mean loss `loss` and `correct` right answers.
  void step(long batch, double loss, double correct) {
    ++step_, examples_ += batch, loss_sum_ += loss * static_cast<double>(batch), correct_ += correct;
    if (tty_) draw('\r');
    else if (step_ % every_ == 0) draw('\n');
  }
  // Ends the epoch's bar and returns the seconds it took.
  double end_epoch() {
    if (tty_) draw('\r'), std::printf("\n");
    else if (step_ % every_ != 0) draw('\n');
    std::fflush(stdout);
    return seconds();
  }
  double mean_loss() const { return examples_ ? loss_sum_ / static_cast<double>(examples_) : 0; }
  double accuracy() const { return examples_ ? correct_ / static_cast<double>(examples_) : 0; }

 private:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void draw(char end) {
    const int width = 24;
    const int filled = steps_ ? static_cast<int>(width * step_ / steps_) : width;
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(width, '.');
    const double s = seconds();
    std::printf("%sepoch %d/%d [%s] %ld/%ld  loss %.4f  acc %.2f%%  %.0f ex/s%s", end == '\r' ? "\r" : "", epoch_,
                epochs_, bar.c_str(), step_, steps_, mean_loss(), 100 * accuracy(),
                s > 0 ? static_cast<double>(examples_) / s : 0.0, end == '\n' ? "\n" : "");
    std::fflush(stdout);
  }

  int epochs_;
  long steps_, every_;
  bool tty_;
  int epoch_ = 0;
  long step_ = 0, examples_ = 0;
  double loss_sum_ = 0, correct_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace weft_examples
