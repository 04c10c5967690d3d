/// @file
/// A mutex shared by steps (whitepaper Table 1, MutexAcquire and MutexRelease): a resource
/// that one holder at a time owns, granted in the order the acquisitions came. An
/// acquisition that waits holds no thread: the mutex calls it back when it is granted. Each
/// grant has an id, which the release names; a release of another id is an error.
/// The step that acquired it releases it: an acquisition watches its step's cancellation,
/// so a step that fails or is cancelled while it waits leaves the line, and one that fails
/// while it holds the mutex gives it back (a step that ends without its MutexRelease keeps
/// it: the release belongs in the same step, after the critical section's nodes).
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/runtime/kernel.hpp>
#include <weft/runtime/resource.hpp>

namespace weft {

/// The mutex resource MutexAcquire and MutexRelease use (see the file's comment).
class resource_mutex final : public resource_base, public std::enable_shared_from_this<resource_mutex> {
 public:
  static constexpr std::string_view kind_name = "mutex";  ///< its resource kind
  std::string_view kind() const noexcept override { return kind_name; }
  /// Called once per acquisition: with the grant's id, or with the error that ended the wait.
  using granted = std::function<void(std::exception_ptr error, std::uint64_t id)>;

  /// A mutex named `name` (in errors), not held.
  explicit resource_mutex(std::string name) : name_(std::move(name)) {}
  /// Its name.
  const std::string& name() const noexcept { return name_; }

  /// Asks for the mutex for step `step`; `done` runs once, with the grant's id, or with the
  /// error (the step was cancelled while it waited). Once granted, a cancellation of
  /// `cancellation` (the step's: it failed) releases it, until release(id, step).
  void acquire(cancellation_manager* cancellation, std::int64_t step, granted done) {
    std::vector<std::function<void()>> calls;
    {
      std::lock_guard lock(mutex_);
      auto& w = waiting_.emplace_back();
      w.id = ++next_id_;
      w.cancellation = cancellation;
      w.step = step;
      w.done = std::move(done);
      if (cancellation) {
        w.token = cancellation->register_callback([self = shared_from_this(), id = w.id] { self->cancelled(id); });
        if (w.token == 0) {  // cancelled already
          auto e = std::make_exception_ptr(error(error_code::cancelled, "mutex '" + name_ + "': the step was cancelled"));
          calls.push_back([d = std::move(w.done), e] { d(e, 0); });
          waiting_.pop_back();
        }
      }
      grant(calls);
    }
    for (auto& c : calls) c();
  }

  /// Gives the mutex back; `id` must be the holder's, granted to the same step.
  void release(std::uint64_t id, std::int64_t step) {
    std::vector<std::function<void()>> calls;
    std::pair<cancellation_manager*, cancellation_manager::token> watch{};
    {
      std::lock_guard lock(mutex_);
      if (!held_ || holder_ != id)
        fail(error_code::failed_precondition, "mutex '", name_, "' is not held by grant ", id,
             held_ ? " (another grant holds it)" : " (it is free)");
      if (holder_step_ != step)
        fail(error_code::failed_precondition, "mutex '", name_, "' was acquired by step ", holder_step_,
             " and must be released by it, not by step ", step);
      watch = {holder_cancellation_, holder_token_};
      held_ = false;
      grant(calls);
    }
    if (watch.first && watch.second) watch.first->deregister(watch.second);
    for (auto& c : calls) c();
  }

  /// Whether some step holds it now.
  bool held() const {
    std::lock_guard lock(mutex_);
    return held_;
  }
  /// Acquisitions waiting in line.
  std::size_t waiting() const {
    std::lock_guard lock(mutex_);
    return waiting_.size();
  }

 private:
  struct waiter {
    std::uint64_t id = 0;
    cancellation_manager* cancellation = nullptr;
    cancellation_manager::token token = 0;
    std::int64_t step = 0;
    granted done;
  };

  /// Grants the mutex to the first waiter when it is free (the lock held). The waiter's
  /// cancellation callback stays registered: now it releases the grant.
  void grant(std::vector<std::function<void()>>& calls) {
    if (held_ || waiting_.empty()) return;
    waiter w = std::move(waiting_.front());
    waiting_.pop_front();
    held_ = true;
    holder_ = w.id;
    holder_cancellation_ = w.cancellation;
    holder_token_ = w.token;
    holder_step_ = w.step;
    calls.push_back([d = std::move(w.done), id = w.id] { d(nullptr, id); });
  }

  /// The step of acquisition `id` was cancelled: it leaves the line, or gives the mutex back.
  void cancelled(std::uint64_t id) {
    std::vector<std::function<void()>> calls;
    {
      std::lock_guard lock(mutex_);
      if (held_ && holder_ == id) {
        held_ = false;  // its callback is running: nothing to deregister
        grant(calls);
      } else {
        for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
          if (it->id == id) {
            auto e = std::make_exception_ptr(error(error_code::cancelled, "mutex '" + name_ + "': the step was cancelled"));
            calls.push_back([d = std::move(it->done), e] { d(e, 0); });
            waiting_.erase(it);
            break;
          }
      }
    }
    for (auto& c : calls) c();
  }

  std::string name_;
  mutable std::mutex mutex_;
  bool held_ = false;
  std::uint64_t holder_ = 0;
  cancellation_manager* holder_cancellation_ = nullptr;
  cancellation_manager::token holder_token_ = 0;
  std::int64_t holder_step_ = 0;
  std::uint64_t next_id_ = 0;
  std::deque<waiter> waiting_;
};

}  // namespace weft
