// The rendezvous of one step (whitepaper §3.3): where a Send leaves a tensor for the Recv of
// another device's partition, keyed by the edge (the tensor, its source and destination
// devices, and the loop frame and iteration it belongs to). The value crosses in process:
// a CPU device reads another CPU device's memory, so the Recv hands on the same buffer (a
// device of another memory space copies through copy_from_host / copy_to_host).
//
// A Recv holds no thread while it waits: recv() takes a callback that runs when the value
// arrives, on the thread of the Send, or at once when the value is already there. A dead
// value (an untaken branch) crosses as dead. abort() fails every waiting and later Recv
// with the step's error, so an error on any device ends the partitions on every other.
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/runtime/kernel.hpp>

namespace weft {

class rendezvous {
 public:
  using callback = std::function<void(const entry* value, std::exception_ptr error)>;

  // Leaves `value` under `key`; the Recv waiting for it, if any, runs now on this thread.
  // A second Send of one key in one step is an internal error.
  void send(const std::string& key, entry value) {
    callback waiter;
    {
      std::lock_guard lock(mutex_);
      if (aborted_) return;
      slot& s = slots_[key];
      if (s.sent) fail(error_code::internal, "rendezvous: '", key, "' was sent twice in one step");
      s.sent = true;
      if (!s.waiter) {
        s.value = std::move(value);
        return;
      }
      waiter = std::move(s.waiter);
      s.waiter = nullptr;
    }
    waiter(&value, nullptr);
  }

  // Runs `done` with the value left under `key`: now, when it is there, else when it comes,
  // or with the abort's error.
  void recv(const std::string& key, callback done) {
    entry value;
    std::exception_ptr error;
    {
      std::lock_guard lock(mutex_);
      if (aborted_) {
        error = aborted_;
      } else {
        slot& s = slots_[key];
        if (s.received) fail(error_code::internal, "rendezvous: '", key, "' is received twice in one step");
        s.received = true;
        if (!s.sent) {
          s.waiter = std::move(done);
          return;
        }
        value = std::move(s.value);
        s.value = entry{};
      }
    }
    if (error) return done(nullptr, error);
    done(&value, nullptr);
  }

  // Fails every Recv waiting now or later with `error` (the first abort's error stands).
  void abort(std::exception_ptr error) {
    std::vector<callback> waiters;
    {
      std::lock_guard lock(mutex_);
      if (aborted_) return;
      aborted_ = error;
      for (auto& [key, s] : slots_)
        if (s.waiter) waiters.push_back(std::move(s.waiter));
      slots_.clear();
    }
    for (auto& w : waiters) w(nullptr, error);
  }

 private:
  // A slot stays until the step ends, so that a key used twice is seen.
  struct slot {
    bool sent = false;
    bool received = false;
    entry value;
    callback waiter;
  };
  std::mutex mutex_;
  std::unordered_map<std::string, slot> slots_;
  std::exception_ptr aborted_;
};

}  // namespace weft
