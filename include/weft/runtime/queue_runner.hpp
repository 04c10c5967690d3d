/// @file
/// Threads that fill queues (TensorFlow's QueueRunner and Coordinator, whitepaper 4.6):
/// a queue_runner runs its enqueue targets over and over, a thread each, until told to stop;
/// a coordinator tells every thread to stop at the first error or at a request, cancels the
/// runs they are blocked in, keeps the first error for the training loop, and joins them.
///
///   weft::coordinator coord;
///   weft::queue_runner runner(s, {"enqueue"}, {.close = "close", .cancel = "close_cancel"});
///   runner.start(coord);                  // one thread per enqueue target
///   while (!coord.should_stop()) {
///     try { s.run({}, {}, {"train"}); }
///     catch (const weft::error& e) { if (e.code() == weft::error_code::out_of_range) break; throw; }
///   }
///   coord.request_stop();
///   coord.join();                         // rethrows a runner thread's error, if any
///
/// When every thread of a runner has ended because its input ran out (an out_of_range from
/// an upstream queue or reader: the end of the epochs), the runner runs its close target, so
/// that the consumers' dequeues drain the queue and then end the epoch themselves. Any other
/// error stops the coordinator; a stop runs the cancel target (a close that cancels pending
/// enqueues), so that nothing stays blocked on the queue.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/runtime/kernel.hpp>
#include <weft/runtime/session.hpp>

namespace weft {

/// Stops a set of threads together (TensorFlow's tf.train.Coordinator): threads started
/// through it check should_stop(), report errors with request_stop(error), and join()
/// waits for them and rethrows the first error.
class coordinator {
 public:
  coordinator() = default;
  coordinator(const coordinator&) = delete;
  coordinator& operator=(const coordinator&) = delete;
  /// Stops and joins what is still running; an error not taken by join() is dropped.
  ~coordinator() {
    request_stop();
    join_threads();
  }

  /// Asks every thread to stop; the first error given is kept for join(). Runs under way in
  /// the threads (with run_options{.cancellation = &cancellation()}) are cancelled.
  void request_stop(std::exception_ptr error = nullptr) {
    std::vector<std::function<void()>> hooks;
    {
      std::lock_guard lock(mutex_);
      if (error && !error_) error_ = error;
      if (stopped_) return;
      stopped_ = true;
      hooks.swap(on_stop_);
    }
    cv_.notify_all();
    cancellation_.cancel();
    for (auto& h : hooks) h();
  }
  /// Whether a stop was requested.
  bool should_stop() const {
    std::lock_guard lock(mutex_);
    return stopped_;
  }
  /// Waits until a stop is requested, or `timeout` passes; whether it was.
  bool wait_for_stop(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return stopped_; });
  }
  /// Waits until a stop is requested.
  void wait_for_stop() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return stopped_; });
  }
  /// What the threads' runs pass as run_options::cancellation.
  cancellation_manager& cancellation() noexcept { return cancellation_; }
  /// Runs f when a stop is requested (at once if it was).
  void on_stop(std::function<void()> f) {
    {
      std::lock_guard lock(mutex_);
      if (!stopped_) {
        on_stop_.push_back(std::move(f));
        return;
      }
    }
    f();
  }
  /// A thread the coordinator joins.
  void add_thread(std::thread t) {
    std::lock_guard lock(mutex_);
    threads_.push_back(std::move(t));
  }
  /// Joins every thread (they end once a stop is requested or their work is done), then
  /// rethrows the first error reported, if any.
  void join() {
    join_threads();
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }
  /// Rethrows the first error reported so far, without waiting.
  void raise_if_error() const {
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void join_threads() {
    for (;;) {
      std::vector<std::thread> threads;
      {
        std::lock_guard lock(mutex_);
        threads.swap(threads_);
      }
      if (threads.empty()) return;
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  }

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stopped_ = false;
  std::exception_ptr error_;
  std::vector<std::function<void()>> on_stop_;
  std::vector<std::thread> threads_;
  cancellation_manager cancellation_;
};

/// What a queue_runner runs besides its enqueues.
struct queue_runner_options {
  std::optional<endpoint> close = {};   ///< run when every thread has run out of input
  std::optional<endpoint> cancel = {};  ///< run when the coordinator stops (a close that cancels pending enqueues)
};

/// Runs each enqueue target in a loop on a thread of its own (several threads may run one
/// target: list it more than once). The runner and its session must outlive the threads:
/// join the coordinator first.
class queue_runner {
 public:
  /// A runner of `enqueues` (targets) in session s; none is an invalid_argument error.
  queue_runner(session& s, std::vector<endpoint> enqueues, queue_runner_options o = {})
      : session_(s), enqueues_(std::move(enqueues)), o_(std::move(o)) {
    if (enqueues_.empty()) fail(error_code::invalid_argument, "queue_runner: no enqueue targets");
  }
  queue_runner(const queue_runner&) = delete;
  queue_runner& operator=(const queue_runner&) = delete;

  /// Starts the threads; the coordinator joins them.
  void start(coordinator& c) {
    if (o_.cancel) c.on_stop([this] { quietly(*o_.cancel); });
    live_.store(static_cast<int>(enqueues_.size()));
    for (const endpoint& e : enqueues_) c.add_thread(std::thread([this, &c, e] { loop(c, e); }));
  }
  /// The enqueue runs done so far, over all threads.
  std::int64_t runs() const noexcept { return runs_.load(); }

 private:
  void loop(coordinator& c, const endpoint& target);
  /// A stop's cancel target: its errors (the session going away) do not matter then.
  void quietly(const endpoint& e) {
    try {
      session_.run({}, {}, {e});
    } catch (...) {
    }
  }
  session& session_;
  std::vector<endpoint> enqueues_;
  queue_runner_options o_;
  std::atomic<int> live_{0};
  std::atomic<int> exhausted_{0};
  std::atomic<std::int64_t> runs_{0};
};

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void queue_runner::loop(coordinator& c, const endpoint& target) {
  run_options o;
  o.cancellation = &c.cancellation();
  bool exhausted = false;
  try {
    while (!c.should_stop()) {
      session_.run({}, {}, {target}, o);
      runs_.fetch_add(1, std::memory_order_relaxed);
    }
  } catch (const error& e) {
    if (e.code() == error_code::out_of_range) exhausted = true;          // the input ran out: a clean end
    else if (!(e.code() == error_code::cancelled && c.should_stop())) c.request_stop(std::current_exception());
  } catch (...) {
    c.request_stop(std::current_exception());
  }
  // The last loop to end closes the queue when all ran out, so that the consumers drain it.
  if (exhausted) exhausted_.fetch_add(1);
  if (live_.fetch_sub(1) == 1 && exhausted_.load() == static_cast<int>(enqueues_.size()) && !c.should_stop() &&
      o_.close) {
    try {
      session_.run({}, {}, {*o_.close});
    } catch (...) {
      c.request_stop(std::current_exception());
    }
  }
}
#endif

}  // namespace weft
