/// @file
/// Readers (TensorFlow's first input API): a reader is a resource that takes file names from
/// a queue of strings, one file at a time, and gives the records of each (runtime/records.hpp
/// cuts them) with keys "<file>:<record index>". A read that finds the current file done
/// dequeues the next name, waiting (holding no thread) while the queue is empty; when the
/// queue is closed and empty the read fails with out_of_range, the end of the epochs, or
/// (read_up_to) gives what it has. Reads of one reader are served in the order they came,
/// one at a time. A file that cannot be read or holds a bad record fails the read that met
/// it, with the file's name and the offset; the reader drops the rest of that file and the
/// next read goes on with the next file.
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/runtime/kernel.hpp>
#include <weft/runtime/queue.hpp>
#include <weft/runtime/records.hpp>
#include <weft/runtime/resource.hpp>

namespace weft {

/// A reader resource (see the file's comment): the ReaderRead and ReaderReadUpTo kernels' state.
class record_reader final : public resource_base, public std::enable_shared_from_this<record_reader> {
 public:
  static constexpr std::string_view kind_name = "reader";  ///< its resource kind
  std::string_view kind() const noexcept override { return kind_name; }
  using records = std::vector<std::pair<std::string, std::string>>;  ///< (key, value)
  /// Called once per read: with the records, or with the error that ended it.
  using read_done = std::function<void(std::exception_ptr error, records got)>;

  /// A reader named `name` (in errors) cutting files as `f` says.
  record_reader(std::string name, record_format f) : name_(std::move(name)), f_(f) {}
  /// Its name.
  const std::string& name() const noexcept { return name_; }
  /// How it cuts files into records.
  const record_format& format() const noexcept { return f_; }

  /// Reads n records (up_to: at most n, at least one, fewer only at the end of the input),
  /// taking file names from `files`; `done` runs once, on whichever thread completes it.
  void read(std::shared_ptr<queue> files, std::int64_t n, bool up_to, cancellation_manager* cancellation, read_done done) {
    if (files->options().component_types != std::vector<dtype>{dtype::string})
      fail(error_code::invalid_argument, "reader '", name_, "' reads file names from a queue of one string component; queue '",
           files->name(), "' holds ", files->options().describe());
    if (n < 1) fail(error_code::invalid_argument, "reader '", name_, "' cannot read ", n, " records");
    std::vector<std::function<void()>> calls;
    {
      std::lock_guard lock(mutex_);
      auto& r = requests_.emplace_back(request{std::move(files), n, up_to, cancellation, std::move(done), {}, ++next_id_, 0});
      // A read waiting in line behind another leaves the line when its step is cancelled
      // (the first read's fetch of a file name is cancelled through the queue instead).
      if (cancellation) {
        r.token = cancellation->register_callback([self = shared_from_this(), id = r.id] { self->cancelled(id); });
        if (r.token == 0) {
          auto e = std::make_exception_ptr(error(error_code::cancelled, "reader '" + name_ + "': the step was cancelled"));
          calls.push_back([d = std::move(r.done), e] { d(e, {}); });
          requests_.pop_back();
        }
      }
      pump(calls);
    }
    for (auto& c : calls) c();
  }

  /// Records given and files finished, over the reader's life.
  std::int64_t records_produced() const {
    std::lock_guard lock(mutex_);
    return produced_;
  }
  /// Files read to their end.
  std::int64_t work_units_completed() const {
    std::lock_guard lock(mutex_);
    return files_done_;
  }
  /// Forgets the current file and the counts.
  void reset() {
    std::lock_guard lock(mutex_);
    current_.reset();
    produced_ = files_done_ = 0;
  }

 private:
  struct request {
    std::shared_ptr<queue> files;
    std::int64_t n;
    bool up_to;
    cancellation_manager* cancellation;
    read_done done;
    records got;
    std::uint64_t id = 0;
    cancellation_manager::token token = 0;
  };

  /// The step of read `id` was cancelled: unless it is the first read (whose fetch the queue
  /// cancels, or which is being served), it leaves the line with the error.
  void cancelled(std::uint64_t id) {
    std::vector<std::function<void()>> calls;
    {
      std::lock_guard lock(mutex_);
      for (std::size_t i = 1; i < requests_.size(); ++i)
        if (requests_[i].id == id) {
          auto e = std::make_exception_ptr(error(error_code::cancelled, "reader '" + name_ + "': the step was cancelled"));
          calls.push_back([d = std::move(requests_[i].done), e] { d(e, {}); });
          requests_.erase(requests_.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
    }
    for (auto& c : calls) c();
  }

  /// Serves requests in order from the current file; asks the queue for the next file when
  /// it is done (the lock held; `calls` run after it is released).
  void pump(std::vector<std::function<void()>>& calls) {
    while (!requests_.empty() && !fetching_) {
      request& r = requests_.front();
      bool failed = false;
      while (static_cast<std::int64_t>(r.got.size()) < r.n && current_) {
        std::optional<std::string> value;
        try {
          value = current_->next();
        } catch (...) {
          current_.reset();  // the rest of a bad file is dropped
          ++files_done_;
          failed = true;
          finish(std::current_exception(), calls);  // ends r
          break;
        }
        if (!value) {
          current_.reset();
          ++files_done_;
          break;
        }
        r.got.emplace_back(current_->name() + ":" + std::to_string(current_->index() - 1), std::move(*value));
        ++produced_;
      }
      if (failed) continue;
      if (static_cast<std::int64_t>(r.got.size()) == r.n) {
        finish(nullptr, calls);
        continue;
      }
      // The current file is done: the next name, from the queue.
      fetching_ = true;
      calls.push_back([self = shared_from_this(), files = r.files, c = r.cancellation] {
        files->dequeue(1, false, c, [self](std::exception_ptr e, std::vector<queue_tuple> names) {
          self->opened(std::move(e), std::move(names));
        });
      });
    }
  }

  /// The queue's answer to a fetch: a file name, or the end of the input, or a cancellation.
  void opened(std::exception_ptr e, std::vector<queue_tuple> names) {
    // Reading the file happens outside the lock; only one fetch is under way at a time.
    std::optional<record_cursor> cursor;
    const bool named = !e;  // a file name came (its file may still fail to open)
    if (!e) {
      try {
        const std::string file = names.at(0).at(0).scalar_value<std::string>();
        cursor.emplace(open_records(file, f_));
      } catch (...) {
        e = std::current_exception();
      }
    }
    std::vector<std::function<void()>> calls;
    {
      std::lock_guard lock(mutex_);
      fetching_ = false;
      if (cursor) {
        current_ = std::move(cursor);
      } else if (!requests_.empty()) {
        bool end = false;
        try {
          std::rethrow_exception(e);
        } catch (const error& err) {
          end = err.code() == error_code::out_of_range;
        } catch (...) {
        }
        request& r = requests_.front();
        if (end) {
          if (r.up_to && !r.got.empty()) finish(nullptr, calls);
          else
            finish(std::make_exception_ptr(error(error_code::out_of_range,
                                                 "reader '" + name_ + "': no more files (queue '" + r.files->name() +
                                                     "' is closed and empty) after " + std::to_string(produced_) + " records")),
                   calls);
        } else {
          if (named) ++files_done_;  // a file that could not be read counts as done
          finish(e, calls);
        }
      }
      pump(calls);
    }
    for (auto& c : calls) c();
  }

  /// Ends the first request (an error drops the records it had; they are not given twice).
  void finish(std::exception_ptr e, std::vector<std::function<void()>>& calls) {
    request r = std::move(requests_.front());
    requests_.pop_front();
    if (r.cancellation && r.token) r.cancellation->deregister(r.token);
    if (e) r.got.clear();
    calls.push_back([done = std::move(r.done), e, got = std::move(r.got)]() mutable { done(e, std::move(got)); });
  }

  std::string name_;
  record_format f_;
  mutable std::mutex mutex_;
  std::deque<request> requests_;
  std::optional<record_cursor> current_;
  bool fetching_ = false;
  std::uint64_t next_id_ = 0;
  std::int64_t produced_ = 0, files_done_ = 0;
};

}  // namespace weft
