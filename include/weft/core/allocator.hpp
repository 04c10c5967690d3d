// allocator: where a device's tensor buffers come from. Buffers are 64-byte aligned
// (a cache line, and an AVX-512 register) so kernels can use aligned vector loads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <string>

#include <weft/core/error.hpp>

namespace weft {

inline constexpr std::size_t buffer_alignment = 64;

class allocator {
 public:
  virtual ~allocator() = default;
  virtual std::string name() const = 0;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
};

// Host memory with byte counters (current and peak), usable from many threads.
class cpu_allocator final : public allocator {
 public:
  std::string name() const override { return "cpu"; }

  void* allocate(std::size_t bytes) override {
    std::size_t rounded = (bytes + buffer_alignment - 1) / buffer_alignment * buffer_alignment;
    if (rounded == 0) rounded = buffer_alignment;
    void* p = std::aligned_alloc(buffer_alignment, rounded);
    if (!p) fail(error_code::out_of_range, "cpu allocator: out of memory allocating ", bytes, " bytes");
    auto now = in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    auto peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    return p;
  }
  void deallocate(void* p, std::size_t bytes) noexcept override {
    in_use_.fetch_sub(bytes, std::memory_order_relaxed);
    std::free(p);
  }

  std::size_t bytes_in_use() const noexcept { return in_use_.load(std::memory_order_relaxed); }
  std::size_t peak_bytes_in_use() const noexcept { return peak_.load(std::memory_order_relaxed); }

  static cpu_allocator& global() {
    static cpu_allocator instance;
    return instance;
  }

 private:
  std::atomic<std::size_t> in_use_{0};
  std::atomic<std::size_t> peak_{0};
};

}  // namespace weft
