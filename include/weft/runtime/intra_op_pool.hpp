/// @file
/// The intra-op threads of a CPU device: a kernel splits its work into blocks with
/// parallel_for, and the calling thread runs blocks beside the pool's workers, each thread
/// claiming its next block as it finishes one, so a kernel never waits for a block that no
/// thread has started: the caller claims from the front and the workers from the back, so
/// that with two threads the same part of a kernel's output runs on the same core step after
/// step instead of moving between the cores' caches at random (docs/benchmarks.md, issue
/// 24). The pool has threads - 1 workers; after a job a worker spins for a
/// while (`spin`, 500 us by default; none while every core runs blocks) before it sleeps,
/// since a training step's kernels come a few microseconds apart and waking a sleeping
/// thread costs tens of them (docs/benchmarks.md): an MLP step's small nodes between its
/// forward products and its first split gradient kernel take about 200 us. Several callers (the executor's inter-op
/// threads) may split kernels at once; a worker joins a job only while fewer than `threads`
/// threads are running blocks and leaves it, after its block, when more are, so two kernels
/// split at once on two cores run one thread each instead of three threads on two cores.
/// Once its blocks are claimed, the caller spins for the workers' last blocks as a worker
/// spins between jobs (up to `spin`, yielding the core every 64 spins to any thread that
/// wants it), then sleeps: a block of a split product takes tens of microseconds, about what
/// waking a sleeping caller costs. A parallel_for called from inside a block runs inline.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include <weft/core/error.hpp>

namespace weft {

namespace intra_op_detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();  // pause, without <immintrin.h> (see kernels/cpu/sgemm.hpp)
#endif
}

/// Whether this thread is running a block of some pool's job (a nested split runs inline).
inline bool& in_block() noexcept {
  thread_local bool inside = false;
  return inside;
}

/// The pool this thread is counted in as running a kernel (intra_op_pool::busy_scope).
inline const void*& counted_in() noexcept {
  thread_local const void* pool = nullptr;
  return pool;
}

}  // namespace intra_op_detail

/// A device's threads for splitting one kernel's work (kernel_context::parallel_for): the
/// calling thread runs blocks beside `threads - 1` workers, which spin a while between
/// kernels before they sleep.
class intra_op_pool {
 public:
  /// `threads` threads in all (the callers included): threads - 1 workers.
  explicit intra_op_pool(int threads, std::chrono::microseconds spin = std::chrono::microseconds(500))
      : threads_(std::max(1, threads)), spin_(spin) {
    workers_.reserve(static_cast<std::size_t>(threads_ - 1));
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { work(); });
  }
  intra_op_pool(const intra_op_pool&) = delete;
  intra_op_pool& operator=(const intra_op_pool&) = delete;
  ~intra_op_pool() {
    {
      std::lock_guard lock(mutex_);
      stop_.store(true, std::memory_order_relaxed);
      posted_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }

  /// Threads in all, the caller's included.
  int num_threads() const noexcept { return threads_; }

  /// Counts the calling thread as running a kernel on this pool's device while it lives (the
  /// executor's threads, around a kernel that may run beside others): workers join a split
  /// kernel only while fewer than `threads` threads are counted, and leave it when more are,
  /// so kernels that inter-op threads run at once and the blocks of a split one share the
  /// cores instead of running more threads than there are. Does nothing when the thread is
  /// counted in this pool already.
  class busy_scope {
   public:
    /// Counts the calling thread in `pool` (unless it is counted there already).
    explicit busy_scope(intra_op_pool& pool) noexcept
        : pool_(intra_op_detail::counted_in() == &pool || pool.workers_.empty() ? nullptr : &pool),
          outer_(intra_op_detail::counted_in()) {
      if (!pool_) return;
      pool_->active_.fetch_add(1, std::memory_order_acq_rel);
      intra_op_detail::counted_in() = pool_;
    }
    busy_scope(const busy_scope&) = delete;
    busy_scope& operator=(const busy_scope&) = delete;
    ~busy_scope() {
      if (!pool_) return;
      intra_op_detail::counted_in() = outer_;
      pool_->leave();
    }

   private:
    intra_op_pool* pool_;
    const void* outer_;  ///< the pool the thread was counted in before
  };

  /// Runs body(b) for every block b of [0, blocks), on the calling thread and the workers
  /// that join; returns when all have run. The first exception a block throws is
  /// rethrown here once every started block has finished; blocks not yet started are skipped.
  /// At most max_blocks blocks (a kernel's parallel_for makes at most 4 a thread); more are
  /// an invalid_argument error.
  template <class F>
  void run(std::int64_t blocks, F&& body) {
    if (blocks <= 0) return;
    if (blocks > max_blocks)
      fail(error_code::invalid_argument, "intra_op_pool::run: ", blocks, " blocks, more than the ", max_blocks,
           " a job can count");
    auto& inside = intra_op_detail::in_block();
    if (blocks == 1 || workers_.empty() || inside) {
      for (std::int64_t b = 0; b < blocks; ++b) body(b);
      return;
    }
    job j(blocks, [](void* f, std::int64_t b) { (*static_cast<std::remove_reference_t<F>*>(f))(b); },
          const_cast<void*>(static_cast<const void*>(std::addressof(body))));
    const bool counted = intra_op_detail::counted_in() == this;  // by a busy_scope
    if (!counted) active_.fetch_add(1, std::memory_order_acq_rel);
    const bool posted = post(j);
    inside = true;
    j.run_blocks(false);
    inside = false;
    if (!counted) active_.fetch_sub(1, std::memory_order_acq_rel);  // withdraw() wakes for other jobs
    if (posted) {
      withdraw(j);
      // Only blocks that workers have claimed are left, at most one each: spin for them as
      // long as a worker spins between jobs, yielding the core to any thread that wants it,
      // then sleep (a block may be long).
      if (!spin_until(spin_, [&] { return j.helpers.load(std::memory_order_acquire) == 0; })) {
        std::unique_lock lock(mutex_);
        finished_.wait(lock, [&] { return j.helpers.load(std::memory_order_relaxed) == 0; });
      }
    }
    if (j.error) std::rethrow_exception(j.error);
  }

  /// The most blocks one run() takes: its claims count them in 32 bits (job::unclaimed).
  static constexpr std::int64_t max_blocks = 0x7fffffff;

 private:
  struct job {
    job(std::int64_t n, void (*c)(void*, std::int64_t), void* f) : blocks(n), call(c), fn(f) {}
    std::int64_t blocks;
    void (*call)(void*, std::int64_t);
    void* fn;
    /// The blocks not yet claimed, [front, back): the front's index in the low 32 bits, the
    /// back's in the high 32 bits.
    std::atomic<std::uint64_t> unclaimed{static_cast<std::uint64_t>(blocks) << 32};
    std::atomic<int> helpers{0};  ///< workers attached (changed under the pool's mutex; the caller spins on it)
    std::atomic<bool> failed{false};
    std::mutex error_mutex;
    std::exception_ptr error;

    bool exhausted() const noexcept {
      const std::uint64_t u = unclaimed.load(std::memory_order_relaxed);
      return (u & 0xffffffffu) >= (u >> 32);
    }
    /// The next block from the front (the caller's end) or the back (the workers'), or -1
    /// when none is left.
    std::int64_t claim(bool from_back) noexcept {
      std::uint64_t u = unclaimed.load(std::memory_order_relaxed);
      for (;;) {
        const std::uint64_t front = u & 0xffffffffu, back = u >> 32;
        if (front >= back) return -1;
        const std::uint64_t next = from_back ? ((back - 1) << 32) | front : (back << 32) | (front + 1);
        if (unclaimed.compare_exchange_weak(u, next, std::memory_order_relaxed))
          return static_cast<std::int64_t>(from_back ? back - 1 : front);
      }
    }
    /// Claims and runs blocks until none is left, or until stay() is false before a claim:
    /// the caller from the front, workers from the back, so that each thread runs a run of
    /// neighbouring blocks (with two threads, the caller the first blocks and the worker the
    /// last, step after step: a split kernel's part of its output, or of a weight it updates,
    /// stays with the same core's caches rather than moving between cores at random).
    template <class Stay = bool (*)()>
    void run_blocks(bool from_back, Stay stay = [] { return true; }) {
      for (std::int64_t b; stay() && (b = claim(from_back)) >= 0;) {
        if (failed.load(std::memory_order_relaxed)) continue;
        try {
          call(fn, b);
        } catch (...) {
          std::lock_guard lock(error_mutex);
          if (!error) error = std::current_exception();
          failed.store(true, std::memory_order_relaxed);
        }
      }
    }
  };

  static constexpr std::size_t max_jobs = 16;

  /// Makes the job visible to the workers; false when every slot is taken (the caller then
  /// runs it alone).
  bool post(job& j) {
    bool wake = false;
    {
      std::lock_guard lock(mutex_);
      auto slot = std::find(jobs_.begin(), jobs_.end(), nullptr);
      if (slot == jobs_.end()) return false;
      *slot = &j;
      jobs_posted_.fetch_add(1, std::memory_order_relaxed);
      posted_.fetch_add(1, std::memory_order_release);
      wake = sleepers_ > 0;
    }
    if (wake) {
      if (j.blocks > 2) wake_.notify_all();
      else wake_.notify_one();
    }
    return true;
  }

  /// After the caller has claimed the last block: no worker attaches to the job from now on.
  /// Its thread no longer runs blocks, so a worker kept out of another job may join it now:
  /// a sleeping one is woken for it.
  void withdraw(job& j) {
    bool wake = false;
    {
      std::lock_guard lock(mutex_);
      *std::find(jobs_.begin(), jobs_.end(), &j) = nullptr;
      if (jobs_posted_.fetch_sub(1, std::memory_order_relaxed) > 1) {
        posted_.fetch_add(1, std::memory_order_release);
        wake = sleepers_ > 0;
      }
    }
    if (wake) wake_.notify_one();
  }

  /// A counted thread stops running blocks or kernels. When that leaves a core free and a
  /// job is posted, a sleeping worker is woken for it (a spinning one sees joinable()).
  void leave() {
    if (active_.fetch_sub(1, std::memory_order_acq_rel) != threads_ ||
        jobs_posted_.load(std::memory_order_relaxed) == 0)
      return;
    bool wake = false;
    {
      std::lock_guard lock(mutex_);
      posted_.fetch_add(1, std::memory_order_release);
      wake = sleepers_ > 0;
    }
    if (wake) wake_.notify_one();
  }

  /// Whether a worker might join a job now: one is posted and fewer than `threads` threads
  /// run blocks.
  bool joinable() const noexcept {
    return jobs_posted_.load(std::memory_order_relaxed) > 0 && active_.load(std::memory_order_relaxed) < threads_;
  }

  /// A job with blocks left, with this worker attached to it; null when there is none or
  /// enough threads are running blocks already.
  job* attach() {
    if (active_.load(std::memory_order_acquire) >= threads_) return nullptr;
    std::lock_guard lock(mutex_);
    for (job* j : jobs_) {
      if (j && !j->exhausted()) {
        j->helpers.fetch_add(1, std::memory_order_relaxed);
        return j;
      }
    }
    return nullptr;
  }

  /// Spins until done() holds or `time` has passed, yielding the core every 64 spins to any
  /// thread that wants it (the caller waiting for workers, a worker waiting for a job);
  /// whether done() held.
  template <class Done>
  static bool spin_until(std::chrono::steady_clock::duration time, Done done) {
    const auto until = std::chrono::steady_clock::now() + time;
    for (int spins = 1;; ++spins) {
      if (done()) return true;
      if (spins % 64 == 0) {
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::yield();
      } else {
        intra_op_detail::cpu_relax();
      }
    }
  }

  void work() {
    using clock = std::chrono::steady_clock;
    for (;;) {
      const std::uint64_t seen = posted_.load(std::memory_order_acquire);
      if (job* j = attach()) {
        active_.fetch_add(1, std::memory_order_acq_rel);
        intra_op_detail::in_block() = true;
        // A worker leaves the job (to its caller) when more threads run blocks than the pool
        // has: another kernel's caller started meanwhile.
        j->run_blocks(true, [this] { return active_.load(std::memory_order_relaxed) <= threads_; });
        intra_op_detail::in_block() = false;
        active_.fetch_sub(1, std::memory_order_acq_rel);
        {
          // Under the lock, so that a caller that sleeps on finished_ does not miss it; the
          // caller may return (and the job end) as soon as the lock is released.
          std::lock_guard lock(mutex_);
          j->helpers.fetch_sub(1, std::memory_order_release);
        }
        finished_.notify_all();
        continue;
      }
      // Nothing to join: spin for a while for the next job, or for a thread to leave the
      // blocks of a job it was kept out of, yielding the core to any other thread that
      // wants it; then sleep.
      // While every core runs blocks, sleep at once: spinning would take a core from them.
      const auto spin = active_.load(std::memory_order_relaxed) >= threads_ ? clock::duration(0) : clock::duration(spin_);
      const bool could = joinable();
      const bool changed = spin_until(spin, [&] {
        return posted_.load(std::memory_order_acquire) != seen || (!could && joinable());
      });
      if (!changed) {
        std::unique_lock lock(mutex_);
        ++sleepers_;
        wake_.wait(lock, [&] { return stop_.load(std::memory_order_relaxed) || posted_.load(std::memory_order_relaxed) != seen; });
        --sleepers_;
      }
      if (stop_.load(std::memory_order_acquire)) return;
    }
  }

  int threads_;
  std::chrono::microseconds spin_;
  std::mutex mutex_;
  std::condition_variable wake_;      ///< a job posted, or withdrawn while another is posted
  std::condition_variable finished_;  ///< a worker left a job
  std::array<job*, max_jobs> jobs_{};  ///< posted jobs, under mutex_
  int sleepers_ = 0;                   ///< under mutex_
  std::atomic<bool> stop_{false};      ///< set under mutex_
  std::atomic<std::uint64_t> posted_{0};
  std::atomic<int> active_{0};       ///< threads running blocks or counted kernels: callers, attached workers, busy_scopes
  std::atomic<int> jobs_posted_{0};  ///< jobs in jobs_ (changed under mutex_)
  std::vector<std::thread> workers_;
};

}  // namespace weft
