/// @file
/// bfc_allocator: a caching allocator with best fit and coalescing, in the manner of
/// TensorFlow's BFC allocator, for memory whose raw allocation is slow or synchronizing
/// (cudaMalloc waits for the whole device). It takes large regions from a region_source and
/// carves them into chunks: an allocation takes the smallest free chunk that fits (splitting
/// off the rest when the rest is worth keeping), a freed chunk merges with its free
/// neighbours of the same region, and regions go back to the source only when the allocator
/// is destroyed, when release_free_regions() is called, or when a request fits nowhere else.
///
/// Device-neutral: the GPU device (weft/cuda/) gives it cudaMalloc'd regions; the tests give
/// it host memory. Chunk sizes are multiples of `chunk_alignment` (256 bytes, cudaMalloc's
/// own alignment) and every chunk starts on one. A memory limit caps the regions' bytes;
/// past it, or when the source fails, an allocation is a resource_exhausted error that says
/// what was asked, what is in use, what is free and the largest free chunk (fragmentation),
/// and the allocator is left as it was.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <weft/core/allocator.hpp>
#include <weft/core/error.hpp>

namespace weft {

/// Where a bfc_allocator's regions come from: large raw allocations in one memory space.
class region_source {
 public:
  virtual ~region_source() = default;
  /// A region of `bytes` bytes, aligned to at least 256 bytes, or nullptr when there is not
  /// the memory for it (never throws).
  virtual void* allocate_region(std::size_t bytes) noexcept = 0;
  /// Gives back a region allocate_region returned (`bytes`: its size).
  virtual void free_region(void* p, std::size_t bytes) noexcept = 0;
  /// The memory space its regions are in.
  virtual weft::memory_space space() const noexcept = 0;
  /// A name for errors ("GPU:0 memory", "pinned host memory").
  virtual std::string name() const = 0;
};

/// How a bfc_allocator grows.
struct bfc_options {
  /// The most bytes the regions may hold in all (the device's memory limit).
  std::size_t memory_limit = std::size_t(1) << 30;
  /// The first region's size (at least the first request's); each later region doubles the
  /// last one's, up to what the limit leaves, so that a model's steady state lives in a few
  /// regions.
  std::size_t initial_region_bytes = std::size_t(2) << 20;
};

/// Best-fit with coalescing, as TensorFlow's BFC allocator: chunks carved from a few large
/// regions of a region_source, freed chunks merged with free neighbours, a request served by
/// the smallest free chunk that fits; in-use and peak counts; thread-safe.
class bfc_allocator final : public allocator {
 public:
  static constexpr std::size_t chunk_alignment = 256;  ///< every chunk's size and address are multiples of it
  /// A free remainder smaller than this stays part of the chunk it was split from (the
  /// allocation then holds a little more than it asked for).
  static constexpr std::size_t min_split_bytes = chunk_alignment;

  /// What the allocator holds, at one moment.
  struct stats {
    std::size_t bytes_in_use = 0;       ///< in chunks handed out (rounded sizes)
    std::size_t peak_bytes_in_use = 0;  ///< since creation or reset_peak()
    std::size_t bytes_reserved = 0;     ///< in regions taken from the source
    std::size_t largest_free_chunk = 0;  ///< bytes of the largest free chunk
    std::size_t num_allocations = 0;    ///< live chunks
    std::size_t num_regions = 0;        ///< regions taken from the source
    std::size_t num_free_chunks = 0;    ///< free chunks (fragmentation)
    std::size_t limit = 0;              ///< bfc_options::memory_limit
  };

  /// An allocator of source's memory, with no region yet.
  bfc_allocator(std::unique_ptr<region_source> source, bfc_options options)
      : source_(std::move(source)), options_(options) {
    if (!source_) fail(error_code::invalid_argument, "bfc_allocator: no region source");
  }
  bfc_allocator(const bfc_allocator&) = delete;
  bfc_allocator& operator=(const bfc_allocator&) = delete;
  /// Gives every region back. Buffers still allocated then point into freed memory: the
  /// owner (a device) outlives every tensor it made.
  ~bfc_allocator() override {
    for (auto& [base, r] : regions_) source_->free_region(reinterpret_cast<void*>(base), r.bytes);
  }

  std::string name() const override { return "bfc(" + source_->name() + ")"; }
  weft::memory_space space() const noexcept override { return source_->space(); }

  void* allocate(std::size_t bytes) override {
    const std::size_t size = rounded(bytes);
    std::lock_guard lock(mu_);
    auto fit = free_.lower_bound({size, 0});
    if (fit == free_.end()) {
      if (!grow(size)) {
        // Entirely free regions may be what stops a larger one: give them back and try once
        // more (TensorFlow's allocator does the same before it reports an out-of-memory).
        if (release_free_regions_locked() == 0 || !grow(size)) out_of_memory(bytes, size);
      }
      fit = free_.lower_bound({size, 0});
      if (fit == free_.end()) out_of_memory(bytes, size);  // cannot happen after grow(size)
    }
    const std::uintptr_t at = fit->second;
    chunk& c = chunks_.at(at);
    if (c.size - size >= min_split_bytes) {
      // The remainder first, so that a failure to record it leaves the chunk as it was.
      const std::size_t rest = c.size - size;
      auto made = chunks_.emplace(at + size, chunk{.size = rest, .region = c.region, .in_use = false}).first;
      try {
        free_.insert({rest, at + size});
      } catch (...) {
        chunks_.erase(made);
        throw;
      }
      c.size = size;
    }
    free_.erase(fit);
    c.in_use = true;
    in_use_ += c.size;
    peak_ = std::max(peak_, in_use_);
    ++live_;
    return reinterpret_cast<void*>(at);
  }

  void deallocate(void* p, std::size_t) noexcept override {
    if (!p) return;
    std::lock_guard lock(mu_);
    auto it = chunks_.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == chunks_.end() || !it->second.in_use) return;  // not ours, or freed twice: ignored
    it->second.in_use = false;
    in_use_ -= it->second.size;
    --live_;
    // Merge with the next chunk, then with the previous one, when free and of the same region.
    auto next = std::next(it);
    if (next != chunks_.end() && !next->second.in_use && next->second.region == it->second.region) {
      free_.erase({next->second.size, next->first});
      it->second.size += next->second.size;
      chunks_.erase(next);
    }
    if (it != chunks_.begin()) {
      auto prev = std::prev(it);
      if (!prev->second.in_use && prev->second.region == it->second.region) {
        free_.erase({prev->second.size, prev->first});
        prev->second.size += it->second.size;
        chunks_.erase(it);
        it = prev;
      }
    }
    free_.insert({it->second.size, it->first});
  }

  /// Gives back to the source each region no chunk of which is in use; returns the bytes.
  std::size_t release_free_regions() {
    std::lock_guard lock(mu_);
    return release_free_regions_locked();
  }

  /// The counts now.
  stats get_stats() const {
    std::lock_guard lock(mu_);
    stats s;
    s.bytes_in_use = in_use_;
    s.peak_bytes_in_use = peak_;
    s.bytes_reserved = reserved_;
    s.largest_free_chunk = free_.empty() ? 0 : free_.rbegin()->first;
    s.num_allocations = live_;
    s.num_regions = regions_.size();
    s.num_free_chunks = free_.size();
    s.limit = options_.memory_limit;
    return s;
  }
  /// Bytes in chunks handed out.
  std::size_t bytes_in_use() const {
    std::lock_guard lock(mu_);
    return in_use_;
  }
  /// The most bytes in use since creation or reset_peak().
  std::size_t peak_bytes_in_use() const {
    std::lock_guard lock(mu_);
    return peak_;
  }
  /// Starts the peak again from the bytes in use now.
  void reset_peak() {
    std::lock_guard lock(mu_);
    peak_ = in_use_;
  }
  /// The bytes a request of `bytes` takes: a whole number of chunk_alignment units, at least one.
  static std::size_t rounded(std::size_t bytes) {
    if (bytes > SIZE_MAX - chunk_alignment)
      fail(error_code::resource_exhausted, "bfc allocator: ", bytes, " bytes requested, more than any memory");
    return std::max(chunk_alignment, (bytes + chunk_alignment - 1) / chunk_alignment * chunk_alignment);
  }

 private:
  struct chunk {
    std::size_t size = 0;
    std::uintptr_t region = 0;  ///< the base of the region it lies in
    bool in_use = false;
  };
  struct region {
    std::size_t bytes = 0;
  };

  /// Takes a new region that holds at least `size` bytes; false when the limit or the source
  /// says no. The caller holds mu_.
  bool grow(std::size_t size) {
    if (reserved_ > options_.memory_limit || size > options_.memory_limit - reserved_) return false;
    const std::size_t room = options_.memory_limit - reserved_;
    std::size_t want = std::max(options_.initial_region_bytes, next_region_);
    want = std::max(size, std::min(want, room));
    want = want / chunk_alignment * chunk_alignment;
    void* p = nullptr;
    // A smaller region when the source has not the memory for the one wanted, down to the
    // request itself.
    while (!(p = source_->allocate_region(want))) {
      if (want == size) return false;
      want = std::max(size, want / 2 / chunk_alignment * chunk_alignment);
    }
    const auto base = reinterpret_cast<std::uintptr_t>(p);
    try {
      regions_.emplace(base, region{want});
      chunks_.emplace(base, chunk{.size = want, .region = base, .in_use = false});
      free_.insert({want, base});
    } catch (...) {
      regions_.erase(base);
      chunks_.erase(base);
      source_->free_region(p, want);
      throw;
    }
    reserved_ += want;
    next_region_ = want > SIZE_MAX / 2 ? want : want * 2;
    return true;
  }

  std::size_t release_free_regions_locked() noexcept {
    std::size_t released = 0;
    for (auto it = regions_.begin(); it != regions_.end();) {
      auto c = chunks_.find(it->first);
      if (c != chunks_.end() && !c->second.in_use && c->second.size == it->second.bytes) {
        free_.erase({c->second.size, c->first});
        chunks_.erase(c);
        source_->free_region(reinterpret_cast<void*>(it->first), it->second.bytes);
        reserved_ -= it->second.bytes;
        released += it->second.bytes;
        it = regions_.erase(it);
      } else {
        ++it;
      }
    }
    if (released) next_region_ = 0;
    return released;
  }

  [[noreturn]] void out_of_memory(std::size_t bytes, std::size_t size) const {
    const std::size_t largest = free_.empty() ? 0 : free_.rbegin()->first;
    std::size_t free_bytes = 0;
    for (const auto& f : free_) free_bytes += f.first;
    fail(error_code::resource_exhausted, name(), ": out of memory allocating ", bytes, " bytes (", size,
         " rounded): ", in_use_, " bytes in use in ", live_, " buffers, ", free_bytes, " free in ", free_.size(),
         " chunks (the largest ", largest, " bytes), ", reserved_, " bytes reserved of a limit of ",
         options_.memory_limit);
  }

  std::unique_ptr<region_source> source_;
  const bfc_options options_;
  mutable std::mutex mu_;
  std::map<std::uintptr_t, chunk> chunks_;                ///< every chunk, by address
  std::set<std::pair<std::size_t, std::uintptr_t>> free_;  ///< free chunks by (size, address): best fit first
  std::map<std::uintptr_t, region> regions_;
  std::size_t in_use_ = 0, peak_ = 0, reserved_ = 0, live_ = 0, next_region_ = 0;
};

}  // namespace weft
