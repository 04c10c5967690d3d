/// @file
/// allocator: where a device's tensor buffers come from. Buffers are 64-byte aligned
/// (a cache line, and an AVX-512 register) so kernels can use aligned vector loads.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>

namespace weft {

/// Every buffer's alignment in bytes (a cache line; AVX-512 loads).
inline constexpr std::size_t buffer_alignment = 64;

/// Where an allocator's memory is: host memory the CPU reads and writes, or the memory of an
/// accelerator that only its device and copies reach.
enum class memory_space : std::uint8_t { host, device };

/// "host" or "device".
inline const char* to_string(memory_space s) noexcept { return s == memory_space::host ? "host" : "device"; }

/// Where tensors' buffers come from (whitepaper §3: each device has its own). Thread-safe.
class allocator {
 public:
  virtual ~allocator() = default;
  /// A name for messages ("cpu").
  virtual std::string name() const = 0;
  /// A buffer of `bytes` aligned to buffer_alignment; failure is a resource_exhausted error.
  virtual void* allocate(std::size_t bytes) = 0;
  /// Frees p, which allocate(bytes) returned.
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
  /// Where its memory is.
  virtual weft::memory_space space() const noexcept { return weft::memory_space::host; }
  /// The allocator whose memory this one hands out: itself, or what a wrapper (a memory
  /// limit) allocates from. Two allocators with one underlying() share their memory.
  virtual const allocator& underlying() const noexcept { return *this; }
};

namespace detail {
/// Freed small host buffers (up to 512 bytes, by multiples of 64), kept per thread for the
/// next allocation of their size: glibc's aligned_alloc splits a larger chunk under the
/// arena's lock and frees the pieces, about a fifth of a one-node step's time (a scalar's
/// output). Plain data, so that reaching it costs no check of a thread-local's
/// construction; a guard made when it first keeps a block (cpu_allocator::keep_small) frees
/// it when the thread ends and turns it off.
struct small_block_cache {
  static constexpr std::size_t classes = 8;  ///< sizes 64, 128, ..., 512
  static constexpr int keep = 64;            ///< the most kept of one size
  /// A kept block's first bytes: the next one of its size.
  struct block {
    block* next;  ///< the next kept block of its size
  };
  block* head[classes] = {};  ///< per size, the most recently freed
  int count[classes] = {};    ///< per size, how many are kept
  bool guarded = false;       ///< the guard that empties it at the thread's end is made
  bool closed = false;        ///< the thread is ending: blocks go back to the system
};
inline thread_local small_block_cache small_blocks;  // NOLINT: per-thread by design
}  // namespace detail

/// Host memory with byte counters (current and peak), usable from many threads.
///
/// Large buffers (at least `cache_min_bytes`, 64 KiB; each a mapping of its own) are kept
/// when freed, up to `cache_limit` bytes in all, and handed to the next allocation of the
/// same rounded size, as TensorFlow's BFC allocator keeps its regions: a step that
/// allocates the shapes of the step before touches no fresh pages. (A fresh page costs a page fault and zeroing by the kernel: about
/// 10 ms per 16 MiB on this project's VMs, a tenth of a 2048x2048 float MatMul. Below 1 MiB
/// glibc's malloc gave pages back too: with the threshold at 1 MiB, the MLP step's first
/// ReluGrad, 256 KiB, took 0.044 ms, at 64 KiB 0.022.) Small buffers (up to 512 bytes) are
/// kept too, up to 64 of each size by each thread that frees them, outside `bytes_cached()`
/// and `release_cached()` (at most 36 KiB a thread). Under ASan both caches are off, so
/// that a use after free is still reported.
class cpu_allocator final : public allocator {
 public:
  static constexpr std::size_t cache_min_bytes = std::size_t(64) << 10;  ///< the smallest buffer kept when freed
  static constexpr std::size_t page_bytes = 4096;  ///< cached sizes round up to whole pages
  // Whether freed large buffers are kept: not under ASan.
#if defined(__SANITIZE_ADDRESS__)
  static constexpr bool caches_buffers = false;  ///< whether freed large buffers are kept (not under ASan)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  static constexpr bool caches_buffers = false;  ///< whether freed large buffers are kept (not under ASan)
#else
  static constexpr bool caches_buffers = true;  ///< whether freed large buffers are kept (not under ASan)
#endif
#else
  static constexpr bool caches_buffers = true;  ///< whether freed large buffers are kept (not under ASan)
#endif

  /// An allocator that keeps at most cache_limit bytes of freed buffers for reuse.
  explicit cpu_allocator(std::size_t cache_limit = std::size_t(1) << 30) : cache_limit_(cache_limit) {}
  cpu_allocator(const cpu_allocator&) = delete;
  cpu_allocator& operator=(const cpu_allocator&) = delete;
  ~cpu_allocator() override { release_cached(); }

  std::string name() const override { return "cpu"; }  ///< "cpu"

  /// A buffer from the cache when one of the rounded size is there, else from the system;
  /// more than the machine's memory, or none left, is a resource_exhausted error.
  void* allocate(std::size_t bytes) override {
    // More than the machine has can never be used: an error, not an overcommitted mapping
    // that the kernel's OOM killer ends when it is touched.
    if (bytes > physical_memory_bytes())
      fail(error_code::resource_exhausted, "cpu allocator: ", bytes, " bytes requested, more than the machine's ",
           physical_memory_bytes(), " bytes of memory");
    std::size_t rounded = round_up(bytes);
    void* p = rounded <= small_max_bytes ? take_small(rounded) : take_cached(rounded);
    if (!p) p = system_allocate(rounded);
    if (!p)
      fail(error_code::resource_exhausted, "cpu allocator: out of memory allocating ", bytes, " bytes (",
           in_use_.load(std::memory_order_relaxed), " bytes in use)");
    auto now = in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    auto peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    return p;
  }
  /// Frees p, keeping it in the cache when it is large and the cache has room.
  void deallocate(void* p, std::size_t bytes) noexcept override {
    in_use_.fetch_sub(bytes, std::memory_order_relaxed);
    const std::size_t rounded = round_up(bytes);
    if (rounded <= small_max_bytes ? !keep_small(p, rounded) : !keep_cached(p, rounded)) system_free(p, rounded);
  }

  /// Bytes allocated and not yet freed.
  std::size_t bytes_in_use() const noexcept { return in_use_.load(std::memory_order_relaxed); }
  /// The most bytes in use at once since construction or reset_peak().
  std::size_t peak_bytes_in_use() const noexcept { return peak_.load(std::memory_order_relaxed); }
  /// Starts a new peak from the bytes in use now (to measure one step's peak).
  void reset_peak() noexcept { peak_.store(in_use_.load(std::memory_order_relaxed), std::memory_order_relaxed); }
  /// Bytes held for reuse, not in use.
  std::size_t bytes_cached() const {
    std::lock_guard lock(mu_);
    return cached_bytes_;
  }
  /// Returns every cached buffer to the system.
  void release_cached() noexcept {
    std::vector<std::pair<std::size_t, void*>> blocks;
    {
      std::lock_guard lock(mu_);
      blocks.swap(cache_);
      cached_bytes_ = 0;
    }
    for (auto& b : blocks) system_free(b.second, b.first);
  }

  /// The machine's physical memory (no limit when the system does not say).
  static std::size_t physical_memory_bytes() noexcept {
    static const std::size_t bytes = [] {
      const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
      return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : SIZE_MAX;
    }();
    return bytes;
  }

  /// The process's host allocator (CPU:0's, and host copies').
  static cpu_allocator& global() {
    static cpu_allocator instance;
    return instance;
  }

  /// The allocator of the local CPU device with index `id` (cpu_device): CPU:0's is global(),
  /// which host tensors made outside any session use too; each other CPU device has its own,
  /// with its own counts and cache, shared by every session that has that device and never
  /// destroyed (buffers may outlive the sessions that made them).
  static cpu_allocator& of_device(int id) {
    if (id == 0) return global();
    static std::mutex mu;
    static auto* table = new std::vector<cpu_allocator*>;  // never destroyed, like the allocators
    std::lock_guard lock(mu);
    if (table->size() <= static_cast<std::size_t>(id)) table->resize(static_cast<std::size_t>(id) + 1, nullptr);
    auto& a = (*table)[static_cast<std::size_t>(id)];
    if (!a) a = new cpu_allocator;
    return *a;
  }

 private:
  static constexpr std::size_t small_max_bytes = buffer_alignment * detail::small_block_cache::classes;
  /// The calling thread's kept block of this size (a multiple of 64 up to 512), or null.
  static void* take_small(std::size_t rounded) noexcept {
    if constexpr (!caches_buffers) return nullptr;
    detail::small_block_cache& c = detail::small_blocks;
    const std::size_t k = rounded / buffer_alignment - 1;
    if (detail::small_block_cache::block* b = c.head[k]) {
      c.head[k] = b->next;
      --c.count[k];
      return b;
    }
    return nullptr;
  }
  /// Keeps p (of this rounded size) in the calling thread's cache; false when it is full or
  /// the thread is ending.
  static bool keep_small(void* p, std::size_t rounded) noexcept {
    if constexpr (!caches_buffers) return false;
    detail::small_block_cache& c = detail::small_blocks;
    const std::size_t k = rounded / buffer_alignment - 1;
    if (c.closed || c.count[k] >= detail::small_block_cache::keep) return false;
    if (!c.guarded) {
      thread_local small_cache_guard guard;  // frees the cache when this thread ends
      (void)guard;
      c.guarded = true;
    }
    auto* b = ::new (p) detail::small_block_cache::block{c.head[k]};
    c.head[k] = b;
    ++c.count[k];
    return true;
  }
  struct small_cache_guard {
    small_cache_guard() = default;
    small_cache_guard(const small_cache_guard&) = delete;
    small_cache_guard& operator=(const small_cache_guard&) = delete;
    ~small_cache_guard() {
      detail::small_block_cache& c = detail::small_blocks;
      c.closed = true;
      for (std::size_t k = 0; k < detail::small_block_cache::classes; ++k) {
        while (c.head[k]) std::free(std::exchange(c.head[k], c.head[k]->next));
        c.count[k] = 0;
      }
    }
  };
  /// Whether a buffer of this rounded size is a mapping of its own (see system_allocate).
  static bool mapped(std::size_t rounded) noexcept { return caches_buffers && rounded >= cache_min_bytes; }
  /// A buffer the cache did not have, or null. One the cache may keep (64 KiB and more, not
  /// under ASan) is a fresh anonymous mapping of its own, whatever glibc's malloc would have
  /// done: malloc maps large blocks only above a threshold that it raises when such a block
  /// is freed, and serves them from its heap after that, and the same two-thread products ran
  /// slower writing into heap blocks (docs/benchmarks.md, session 59: a 128 x 512 x 512 one
  /// 234 us instead of 198 after a larger product had run; an MLP step on two threads 1.51 ms
  /// instead of 1.37 when it was the process's first). Smaller ones come from malloc (and
  /// every one under ASan, which checks them).
  static void* system_allocate(std::size_t rounded) noexcept {
    if (mapped(rounded)) {
      void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      return p == MAP_FAILED ? nullptr : p;
    }
    return std::aligned_alloc(buffer_alignment, rounded);
  }
  /// Returns a buffer that system_allocate(rounded) made.
  static void system_free(void* p, std::size_t rounded) noexcept {
    if (mapped(rounded)) ::munmap(p, rounded);
    else std::free(p);
  }
  /// Small buffers round to the alignment, large ones to whole pages so that sizes that
  /// differ by a few bytes share cached blocks.
  static std::size_t round_up(std::size_t bytes) noexcept {
    std::size_t unit = bytes >= cache_min_bytes ? page_bytes : buffer_alignment;
    std::size_t r = (bytes + unit - 1) / unit * unit;
    return r == 0 ? buffer_alignment : r;
  }
  void* take_cached(std::size_t rounded) {
    if (!caches_buffers || rounded < cache_min_bytes) return nullptr;
    std::lock_guard lock(mu_);
    for (auto it = cache_.rbegin(); it != cache_.rend(); ++it)
      if (it->first == rounded) {
        void* p = it->second;
        cache_.erase(std::next(it).base());
        cached_bytes_ -= rounded;
        return p;
      }
    return nullptr;
  }
  bool keep_cached(void* p, std::size_t rounded) noexcept {
    if (!caches_buffers || rounded < cache_min_bytes || rounded > cache_limit_) return false;
    std::lock_guard lock(mu_);
    // Oldest blocks go first when the cache is full.
    while (!cache_.empty() && cached_bytes_ + rounded > cache_limit_) {
      system_free(cache_.front().second, cache_.front().first);
      cached_bytes_ -= cache_.front().first;
      cache_.erase(cache_.begin());
    }
    try {
      cache_.emplace_back(rounded, p);
    } catch (...) {
      return false;
    }
    cached_bytes_ += rounded;
    return true;
  }

  std::atomic<std::size_t> in_use_{0};
  std::atomic<std::size_t> peak_{0};
  const std::size_t cache_limit_;
  mutable std::mutex mu_;
  std::vector<std::pair<std::size_t, void*>> cache_;  ///< (rounded size, block), oldest first
  std::size_t cached_bytes_ = 0;
};

/// A byte limit over another allocator: an allocation that would take the bytes in use past
/// `limit` is a resource_exhausted error naming both (a session's memory limit). Buffers may
/// outlive whoever made the limit (fetched tensors, variables of a shared resource manager),
/// so each live buffer holds a reference on it: it is deleted with the last of them, or when
/// its owner lets go of it with none left (memory_limit_ptr does that).
class limited_allocator final : public allocator {
 public:
  /// A limit of `limit` bytes over base (hold it in a memory_limit_ptr).
  static limited_allocator* create(allocator& base, std::size_t limit) { return new limited_allocator(base, limit); }

  std::string name() const override { return base_.name() + " (limit " + std::to_string(limit_) + " bytes)"; }  ///< base's, with the limit
  weft::memory_space space() const noexcept override { return base_.space(); }  ///< base's
  const allocator& underlying() const noexcept override { return base_.underlying(); }
  /// From base, unless the bytes in use would pass the limit (a resource_exhausted error).
  void* allocate(std::size_t bytes) override {
    std::size_t used = in_use_.load(std::memory_order_relaxed);
    do {
      if (bytes > limit_ || used > limit_ - bytes)
        fail(error_code::resource_exhausted, "memory limit of ", limit_, " bytes reached: ", used,
             " bytes in use, ", bytes, " more requested");
    } while (!in_use_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    void* p = nullptr;
    try {
      p = base_.allocate(bytes);
    } catch (...) {
      in_use_.fetch_sub(bytes, std::memory_order_relaxed);
      throw;
    }
    refs_.fetch_add(1, std::memory_order_relaxed);
    return p;
  }
  /// Returns p to base.
  void deallocate(void* p, std::size_t bytes) noexcept override {
    base_.deallocate(p, bytes);
    in_use_.fetch_sub(bytes, std::memory_order_relaxed);
    unref();
  }
  /// The owner's reference.
  void release() noexcept { unref(); }

  std::size_t limit() const noexcept { return limit_; }  ///< the limit in bytes
  std::size_t bytes_in_use() const noexcept { return in_use_.load(std::memory_order_relaxed); }  ///< bytes allocated through it

 private:
  limited_allocator(allocator& base, std::size_t limit) : base_(base), limit_(limit) {}
  void unref() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  allocator& base_;
  const std::size_t limit_;
  std::atomic<std::size_t> in_use_{0};
  std::atomic<std::size_t> refs_{1};  ///< the owner's, and one per live buffer
};

namespace detail {
struct release_limit {
  void operator()(limited_allocator* a) const noexcept { a->release(); }
};
}  // namespace detail
/// Owns a limited_allocator: releases the owner's reference when it goes.
using memory_limit_ptr = std::unique_ptr<limited_allocator, detail::release_limit>;

}  // namespace weft
