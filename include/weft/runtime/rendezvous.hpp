/// @file
/// The rendezvous of one step (whitepaper §3.3): where a Send leaves a tensor for the Recv of
/// another device's partition. Partitioning numbers the edges that cross devices (the
/// tensor, or a control edge's token, and its destination device; runtime/partition.hpp),
/// and the rendezvous holds a slot per edge, so a transfer costs two atomic operations on
/// its slot: no lock, no lookup, no allocation. An edge inside a loop crosses once per
/// iteration: its slots, one per (edge, iteration), are made on first use, under a lock. The value crosses in process: a CPU device
/// reads another CPU device's memory, so the Recv hands on the same buffer (a device of
/// another memory space copies through copy_from_host / copy_to_host).
///
/// A Recv holds no thread while it waits: it takes the value when it is already there, and
/// otherwise its receiver is told when the value arrives, on the thread of the Send. A dead value (an
/// untaken branch) crosses as dead. abort() fails every waiting and later Recv with the
/// step's error, so an error on any device ends the partitions on every other.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/runtime/kernel.hpp>

namespace weft {

/// One step's rendezvous (see the file's comment): a slot per cross-device edge.
class rendezvous {
 public:
  /// Who waits for a value: told once, with the token it gave, the value or the abort's error.
  class receiver {
   public:
    /// The value (null with an error) arrived for the wait that gave `token`.
    virtual void received(int token, entry* value, std::exception_ptr error) = 0;

   protected:
    ~receiver() = default;
  };

  /// A rendezvous for the edges 0 .. edges - 1.
  explicit rendezvous(int edges) : slots_(std::make_unique<slot[]>(static_cast<std::size_t>(edges))), edges_(edges) {}

  /// Leaves `value` on `edge` (in that iteration of its loop, for an edge inside one); the
  /// Recv waiting for it, if any, is told now on this thread. A second Send of one edge in
  /// one step (and iteration) is an internal error (`name` names the edge).
  void send(int edge, entry value, std::string_view name, std::int64_t iteration = -1) {
    slot& s = at(edge, iteration, name);
    if (aborted_.load(std::memory_order_acquire)) return;
    int state = s.state.load(std::memory_order_acquire);
    if (state == empty) {
      s.value = std::move(value);  // read by the Recv only once it sees `sent`
      if (s.state.compare_exchange_strong(state, sent, std::memory_order_acq_rel)) return;
      value = std::move(s.value);  // a Recv came meanwhile (or the step was aborted)
      s.value = entry{};
    }
    if (state == waiting) {
      if (s.state.compare_exchange_strong(state, done, std::memory_order_acq_rel))
        return s.waiter->received(s.token, &value, nullptr);
      return;  // the abort told the Recv
    }
    if (state == sent || !aborted_.load(std::memory_order_acquire))
      fail(error_code::internal, "rendezvous: '", name, "' was sent twice in one step");
  }

  /// The value left on `edge`: true with it in `out` when it is there; else false, and `r` is
  /// told (with `token`) when it comes, or the abort's error (possibly before this returns).
  /// A second Recv of one edge in one step is an internal error.
  bool recv(int edge, entry& out, receiver& r, int token, std::string_view name, std::int64_t iteration = -1) {
    slot& s = at(edge, iteration, name);
    if (aborted_.load(std::memory_order_acquire)) {
      r.received(token, nullptr, error_);
      return false;
    }
    int state = s.state.load(std::memory_order_acquire);
    if (state == empty) {
      s.waiter = &r;  // read by the Send or the abort only once they see `waiting`
      s.token = token;
      if (s.state.compare_exchange_strong(state, waiting, std::memory_order_seq_cst)) {
        // An abort that began before this Recv waited may not have seen it: whoever moves
        // the slot from waiting to done tells the receiver.
        if (aborted_.load(std::memory_order_seq_cst)) {
          int w = waiting;
          if (s.state.compare_exchange_strong(w, done, std::memory_order_acq_rel)) r.received(token, nullptr, error_);
        }
        return false;
      }
    }
    if (state == sent) {  // only the Recv moves a slot on from `sent`
      s.state.store(done, std::memory_order_relaxed);
      out = std::move(s.value);
      s.value = entry{};
      return true;
    }
    fail(error_code::internal, "rendezvous: '", name, "' is received twice in one step");
  }

  /// Fails every Recv waiting now or later with `error` (the first abort's error stands);
  /// later Sends are dropped.
  void abort(std::exception_ptr error) {
    {
      std::lock_guard lock(mutex_);
      if (error_) return;
      error_ = std::move(error);
    }
    aborted_.store(true, std::memory_order_seq_cst);
    auto tell = [&](slot& s) {
      int w = waiting;
      if (s.state.load(std::memory_order_seq_cst) == waiting &&
          s.state.compare_exchange_strong(w, done, std::memory_order_acq_rel))
        s.waiter->received(s.token, nullptr, error_);
    };
    for (int i = 0; i < edges_; ++i) tell(slots_[static_cast<std::size_t>(i)]);
    std::vector<slot*> in_loops;  // told outside the lock: a receiver may use the rendezvous
    {
      std::lock_guard lock(mutex_);
      for (auto& [key, s] : loop_slots_) in_loops.push_back(s.get());
    }
    for (slot* s : in_loops) tell(*s);
  }

 private:
  enum : int { empty, sent, waiting, done };
  /// A slot keeps its state until the step ends, so that an edge used twice is seen. One
  /// per cache line: two transfers at once do not share a line.
  struct alignas(64) slot {
    std::atomic<int> state{empty};
    int token = 0;
    receiver* waiter = nullptr;
    entry value;
  };
  slot& at(int edge, std::int64_t iteration, std::string_view name) {
    if (edge < 0 || edge >= edges_)
      fail(error_code::internal, "rendezvous: edge ", edge, " ('", name, "') is not one of its ", edges_);
    if (iteration < 0) return slots_[static_cast<std::size_t>(edge)];
    std::lock_guard lock(mutex_);
    auto& s = loop_slots_[{edge, iteration}];
    if (!s) s = std::make_unique<slot>();
    return *s;
  }

  std::unique_ptr<slot[]> slots_;
  int edges_;
  std::mutex mutex_;  ///< guards error_'s first write and loop_slots_
  std::map<std::pair<int, std::int64_t>, std::unique_ptr<slot>> loop_slots_;
  std::exception_ptr error_;  ///< written once, before aborted_
  std::atomic<bool> aborted_{false};
};

}  // namespace weft
