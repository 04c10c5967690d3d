/// @file
/// Stopping a run from outside: run_options' cancellation (a cancellation_manager the caller
/// cancels from any thread) and timeout (a deadline_timer that fires on its own thread) both
/// stop the run's steps through a run_stopper. Stopped, a step starts no more nodes, its
/// waiting async kernels (a blocked Dequeue, a Recv) are cancelled, and the run throws the
/// stop's error; the queues and variables it touched stay consistent (a cancelled dequeue
/// puts its elements back) and the session stays usable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <weft/core/error.hpp>

namespace weft {

/// Stops one run: stop(why) calls the attached target (the run's steps' abort) once, under a
/// lock that detach() also takes, so that once detach() returns the target is never called
/// (its steps may go). Held by shared_ptr: the callbacks of a cancellation_manager and of a
/// timer may outlive the run, and then find nothing attached.
class run_stopper {
 public:
  /// Stops the run with error(code, message) (the first stop counts).
  void stop(error_code code, std::string message) {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
    code_ = code;
    message_ = std::move(message);
    if (target_) target_(make_error());  // the exception is made, and its handle dropped, under the lock
  }
  /// Attaches `f`, or calls it at once when the run was stopped already.
  void attach(std::function<void(const std::exception_ptr&)> f) {
    std::lock_guard lock(mutex_);
    if (stopped_) f(make_error());
    else target_ = std::move(f);
  }
  /// After detach() returns, the target is not called, and a call under way has ended.
  void detach() {
    std::lock_guard lock(mutex_);
    target_ = nullptr;
  }

 private:
  /// A fresh exception for each target: no exception object is shared with the callbacks
  /// that hold this stopper, which may be destroyed on another thread after the run ends.
  std::exception_ptr make_error() const { return std::make_exception_ptr(error(code_, message_)); }

  mutable std::mutex mutex_;
  bool stopped_ = false;
  error_code code_ = error_code::cancelled;
  std::string message_;
  std::function<void(const std::exception_ptr&)> target_;
};

/// Calls functions at deadlines, on a thread of its own (started with the timer).
class deadline_timer {
 public:
  using clock = std::chrono::steady_clock;  ///< deadlines are on this clock
  using id = std::uint64_t;  ///< names a scheduled call (to cancel it)

  deadline_timer() : thread_([this] { loop(); }) {}
  deadline_timer(const deadline_timer&) = delete;
  deadline_timer& operator=(const deadline_timer&) = delete;
  ~deadline_timer() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  /// Calls f on the timer's thread at `when` (soon, when it has passed) unless removed first.
  id add(clock::time_point when, std::function<void()> f) {
    std::lock_guard lock(mutex_);
    const id i = ++next_;
    due_.emplace(std::make_pair(when, i), std::move(f));
    cv_.notify_all();
    return i;
  }
  /// Removes the call `i` if it has not started (a call under way runs to its end).
  void remove(id i) {
    std::lock_guard lock(mutex_);
    for (auto it = due_.begin(); it != due_.end(); ++it)
      if (it->first.second == i) {
        due_.erase(it);
        return;
      }
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    while (!done_) {
      if (due_.empty()) {
        cv_.wait(lock);
        continue;
      }
      const auto first = due_.begin();
      if (const clock::time_point when = first->first.first; clock::now() < when) {
        cv_.wait_until(lock, when);  // a copy: remove() may erase the entry while this waits
        continue;
      }
      std::function<void()> f = std::move(first->second);
      due_.erase(first);
      lock.unlock();
      f();
      lock.lock();
    }
  }

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::multimap<std::pair<clock::time_point, id>, std::function<void()>> due_;
  id next_ = 0;
  bool done_ = false;
  std::thread thread_;  ///< last: it starts once the members above are made
};

}  // namespace weft
