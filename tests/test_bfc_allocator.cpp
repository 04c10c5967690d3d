// The best-fit caching allocator (core/bfc_allocator.hpp) over host regions: alignment,
// best fit, splitting, coalescing, growth, the memory limit, out-of-memory errors that
// leave it usable, and a random stress checked against a model of which bytes are whose.
#include "support/helpers.hpp"

#include <weft/core/bfc_allocator.hpp>

#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

using namespace weft;

namespace bfc_test {

// Host regions, counted; fails every request above `fail_above` bytes (a device that has
// not the memory).
struct host_regions final : region_source {
  struct counts {
    int live = 0;
    int made = 0;
    std::size_t bytes = 0;
    std::size_t fail_above = SIZE_MAX;
    std::vector<std::size_t> sizes;  // of every region made
  };
  explicit host_regions(counts& c) : c_(c) {}
  void* allocate_region(std::size_t bytes) noexcept override {
    if (bytes > c_.fail_above) return nullptr;
    void* p = std::aligned_alloc(bfc_allocator::chunk_alignment, bytes);
    if (!p) return nullptr;
    ++c_.live;
    ++c_.made;
    c_.bytes += bytes;
    c_.sizes.push_back(bytes);
    return p;
  }
  void free_region(void* p, std::size_t bytes) noexcept override {
    --c_.live;
    c_.bytes -= bytes;
    std::free(p);
  }
  weft::memory_space space() const noexcept override { return weft::memory_space::device; }
  std::string name() const override { return "test regions"; }

 private:
  counts& c_;
};

constexpr std::size_t KiB = 1024;

bfc_allocator make(host_regions::counts& c, std::size_t limit, std::size_t initial) {
  return bfc_allocator(std::make_unique<host_regions>(c), bfc_options{.memory_limit = limit, .initial_region_bytes = initial});
}

std::uintptr_t addr(void* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace bfc_test

using namespace bfc_test;

TEST_CASE("bfc: chunks are aligned, rounded to 256 bytes, carved from one region until it is full") {
  host_regions::counts c;
  {
    auto a = make(c, 1024 * KiB, 64 * KiB);
    CHECK(a.space() == memory_space::device);
    CHECK(a.name() == "bfc(test regions)");
    void* p0 = a.allocate(0);  // a zero-byte request still gets a chunk of its own
    void* p1 = a.allocate(1);
    void* p2 = a.allocate(300);
    for (void* p : {p0, p1, p2}) CHECK(addr(p) % 256 == 0);
    CHECK(addr(p1) == addr(p0) + 256);
    CHECK(addr(p2) == addr(p1) + 256);
    auto s = a.get_stats();
    CHECK(s.bytes_in_use == 256 + 256 + 512);
    CHECK(s.num_allocations == 3);
    CHECK(s.num_regions == 1);
    CHECK(s.bytes_reserved == 64 * KiB);
    CHECK(s.largest_free_chunk == 64 * KiB - 1024);
    CHECK(c.live == 1);
    a.deallocate(p0, 0);
    a.deallocate(p1, 1);
    a.deallocate(p2, 300);
    s = a.get_stats();
    CHECK(s.bytes_in_use == 0);
    CHECK(s.num_allocations == 0);
    CHECK(s.num_free_chunks == 1);  // coalesced back into the whole region
    CHECK(s.largest_free_chunk == 64 * KiB);
    CHECK(s.peak_bytes_in_use == 1024);
    CHECK(c.live == 1);  // kept for the next allocation
  }
  CHECK(c.live == 0);  // given back with the allocator
}

TEST_CASE("bfc: a freed chunk merges with free neighbours on either side, never across regions") {
  host_regions::counts c;
  auto a = make(c, 1024 * KiB, 16 * KiB);
  void* x = a.allocate(4 * KiB);
  void* y = a.allocate(4 * KiB);
  void* z = a.allocate(4 * KiB);
  void* w = a.allocate(4 * KiB);  // fills the first region
  CHECK(a.get_stats().num_free_chunks == 0);
  a.deallocate(x, 4 * KiB);
  a.deallocate(z, 4 * KiB);
  CHECK(a.get_stats().num_free_chunks == 2);
  CHECK(a.get_stats().largest_free_chunk == 4 * KiB);
  a.deallocate(y, 4 * KiB);  // joins x before it and z after it
  CHECK(a.get_stats().num_free_chunks == 1);
  CHECK(a.get_stats().largest_free_chunk == 12 * KiB);
  void* big = a.allocate(12 * KiB);
  CHECK(big == x);
  // A second region; its chunks stay apart from the first region's even when adjacent.
  void* v = a.allocate(20 * KiB);
  CHECK(a.get_stats().num_regions == 2);
  CHECK(c.sizes.at(1) == 32 * KiB);  // regions double
  a.deallocate(big, 12 * KiB);
  a.deallocate(w, 4 * KiB);
  a.deallocate(v, 20 * KiB);
  auto s = a.get_stats();
  CHECK(s.num_free_chunks == 2);  // one whole chunk per region
  CHECK(s.largest_free_chunk == 32 * KiB);
  CHECK(a.release_free_regions() == 48 * KiB);
  CHECK(c.live == 0);
  CHECK(a.get_stats().bytes_reserved == 0);
  void* again = a.allocate(1);  // works after giving everything back
  CHECK(c.live == 1);
  a.deallocate(again, 1);
}

TEST_CASE("bfc: best fit takes the smallest free chunk that holds the request") {
  host_regions::counts c;
  auto a = make(c, 1024 * KiB, 64 * KiB);
  void* h1 = a.allocate(8 * KiB);
  void* s1 = a.allocate(256);
  void* h2 = a.allocate(2 * KiB);
  void* s2 = a.allocate(256);
  void* h3 = a.allocate(4 * KiB);
  void* s3 = a.allocate(256);
  a.deallocate(h1, 8 * KiB);
  a.deallocate(h2, 2 * KiB);
  a.deallocate(h3, 4 * KiB);
  // Holes of 8, 2 and 4 KiB, and the region's tail.
  CHECK(a.allocate(3 * KiB) == h3);  // 4 KiB is the smallest that fits
  CHECK(a.allocate(2 * KiB) == h2);  // exactly
  void* p = a.allocate(1 * KiB);     // the remaining 1 KiB of h3
  CHECK(addr(p) == addr(h3) + 3 * KiB);
  CHECK(a.allocate(5 * KiB) == h1);
  CHECK(a.get_stats().num_regions == 1);
  for (void* q : {s1, s2, s3}) a.deallocate(q, 256);
}

TEST_CASE("bfc: past the memory limit an allocation fails with the figures, and the allocator goes on") {
  host_regions::counts c;
  auto a = make(c, 256 * KiB, 256 * KiB);
  void* p = a.allocate(100 * KiB);
  void* q = a.allocate(100 * KiB);
  test::require_error([&] { (void)a.allocate(100 * KiB); },
                      {"bfc(test regions): out of memory allocating 102400 bytes", "204800 bytes in use in 2 buffers",
                       "57344 free in 1 chunks (the largest 57344 bytes)", "of a limit of 262144"});
  bool exhausted = false;
  try {
    (void)a.allocate(100 * KiB);
  } catch (const error& e) {
    exhausted = e.code() == error_code::resource_exhausted;
  }
  CHECK(exhausted);
  auto s = a.get_stats();
  CHECK(s.bytes_in_use == 200 * KiB);
  CHECK(s.num_allocations == 2);
  a.deallocate(p, 100 * KiB);
  // 156 KiB free, but in two chunks with q between them.
  test::require_error([&] { (void)a.allocate(150 * KiB); }, {"the largest 102400 bytes"});
  void* r = a.allocate(100 * KiB);
  CHECK(r == p);
  a.deallocate(q, 100 * KiB);
  a.deallocate(r, 100 * KiB);
  CHECK(a.get_stats().bytes_in_use == 0);
  CHECK(a.get_stats().num_free_chunks == 1);
  // More than the limit at once.
  test::require_error([&] { (void)a.allocate(257 * KiB); }, {"out of memory allocating 263168 bytes"});
  test::require_error([&] { (void)a.allocate(SIZE_MAX); }, {"more than any memory"});
}

TEST_CASE("bfc: fragmentation is reported, and free regions are given back for a request that needs the room") {
  host_regions::counts c;
  auto a = make(c, 64 * KiB, 16 * KiB);
  // Regions of 16, 32 and 16 KiB (each doubles the last, capped by the limit's room).
  void* first = a.allocate(16 * KiB);
  void* second = a.allocate(32 * KiB);
  void* third = a.allocate(16 * KiB);
  CHECK(a.get_stats().num_regions == 3);
  CHECK(a.get_stats().bytes_reserved == 64 * KiB);
  a.deallocate(first, 16 * KiB);
  a.deallocate(third, 16 * KiB);
  // 32 KiB free, in two chunks of two regions, and 32 KiB held: a 40 KiB request fits no
  // chunk, and no region of its size fits under the limit even with the free ones given back.
  test::require_error([&] { (void)a.allocate(40 * KiB); }, {"32768 bytes in use in 1 buffers", "32768 bytes reserved of a limit of 65536"});
  // The failed request gave the free regions back; a 32 KiB one now fits in a new region.
  CHECK(a.get_stats().num_regions == 1);
  void* fits = a.allocate(32 * KiB);
  CHECK(a.get_stats().bytes_reserved == 64 * KiB);
  a.deallocate(fits, 32 * KiB);
  a.deallocate(second, 32 * KiB);
}

TEST_CASE("bfc: a source that has not the memory gets smaller regions, then an error") {
  host_regions::counts c;
  c.fail_above = 48 * KiB;
  auto a = make(c, 1024 * KiB, 256 * KiB);
  void* p = a.allocate(10 * KiB);  // 256 KiB refused, 128 refused, 64 refused, 32 given
  REQUIRE(c.sizes.size() == 1);
  CHECK(c.sizes[0] == 32 * KiB);
  test::require_error([&] { (void)a.allocate(64 * KiB); }, {"out of memory allocating 65536 bytes"});
  CHECK(a.get_stats().bytes_in_use == 10 * KiB);
  a.deallocate(p, 10 * KiB);
}

TEST_CASE("bfc: peak bytes, reset_peak, and frees of foreign or freed pointers are ignored") {
  host_regions::counts c;
  auto a = make(c, 1024 * KiB, 64 * KiB);
  void* p = a.allocate(10 * KiB);
  void* q = a.allocate(20 * KiB);
  a.deallocate(q, 20 * KiB);
  CHECK(a.peak_bytes_in_use() == 30 * KiB);
  a.reset_peak();
  CHECK(a.peak_bytes_in_use() == 10 * KiB);
  a.deallocate(q, 20 * KiB);  // twice
  int local = 0;
  a.deallocate(&local, sizeof local);  // not its own
  a.deallocate(nullptr, 0);
  CHECK(a.bytes_in_use() == 10 * KiB);
  a.deallocate(p, 10 * KiB);
  CHECK(a.bytes_in_use() == 0);
}

TEST_CASE("bfc: random allocations and frees keep every live buffer's bytes and coalesce fully") {
  host_regions::counts c;
  auto a = make(c, 8 * 1024 * KiB, 64 * KiB);
  std::mt19937 rng(7);
  struct live {
    void* p;
    std::size_t bytes;
    unsigned char fill;
  };
  std::vector<live> held;
  std::size_t expected_in_use = 0;
  auto check_and_free = [&](std::size_t i) {
    live l = held[i];
    const auto* b = static_cast<const unsigned char*>(l.p);
    std::size_t bad = 0;
    for (std::size_t k = 0; k < l.bytes; ++k) bad += b[k] != l.fill;
    CHECK(bad == 0);
    a.deallocate(l.p, l.bytes);
    expected_in_use -= bfc_allocator::rounded(l.bytes);
    held[i] = held.back();
    held.pop_back();
  };
  for (int round = 0; round < 4000; ++round) {
    if (held.empty() || rng() % 3 != 0) {
      // Sizes over five orders of magnitude, as a model's tensors.
      std::size_t bytes = std::size_t(1) << (rng() % 17);
      bytes += rng() % bytes;
      void* p = nullptr;
      try {
        p = a.allocate(bytes);
      } catch (const error& e) {
        CHECK(e.code() == error_code::resource_exhausted);
        continue;
      }
      // No overlap with any live buffer.
      const auto lo = addr(p), hi = lo + bytes;
      for (const auto& l : held) {
        const auto llo = addr(l.p), lhi = llo + std::max<std::size_t>(l.bytes, 1);
        if (lo < lhi && llo < std::max(hi, lo + 1)) FAIL("overlapping buffers");
      }
      const auto fill = static_cast<unsigned char>(rng());
      std::memset(p, fill, bytes);
      held.push_back({p, bytes, fill});
      expected_in_use += bfc_allocator::rounded(bytes);
    } else {
      check_and_free(rng() % held.size());
    }
    if (round % 500 == 0) CHECK(a.bytes_in_use() == expected_in_use);
  }
  while (!held.empty()) check_and_free(held.size() - 1);
  auto s = a.get_stats();
  CHECK(s.bytes_in_use == 0);
  CHECK(s.num_allocations == 0);
  CHECK(s.num_free_chunks == s.num_regions);  // each region one whole free chunk again
  CHECK(s.bytes_reserved <= 8 * 1024 * KiB);
}

TEST_CASE("bfc: threads allocating and freeing at once") {
  host_regions::counts c;
  auto a = make(c, 64 * 1024 * KiB, 1024 * KiB);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&a, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<std::pair<void*, std::size_t>> mine;
      for (int i = 0; i < 2000; ++i) {
        if (mine.size() < 16 && rng() % 2) {
          std::size_t bytes = 1 + rng() % 20000;
          void* p = a.allocate(bytes);
          std::memset(p, t, bytes);
          mine.emplace_back(p, bytes);
        } else if (!mine.empty()) {
          auto [p, bytes] = mine.back();
          mine.pop_back();
          a.deallocate(p, bytes);
        }
      }
      for (auto [p, bytes] : mine) a.deallocate(p, bytes);
    });
  for (auto& th : threads) th.join();
  CHECK(a.bytes_in_use() == 0);
  auto s = a.get_stats();
  CHECK(s.num_free_chunks == s.num_regions);
}

TEST_CASE("bfc: tensors over it") {
  host_regions::counts c;
  auto a = make(c, 1024 * KiB, 64 * KiB);
  {
    tensor t(dtype::float32, {3, 5}, a);
    CHECK(t.memory_space() == memory_space::device);
    CHECK(a.bytes_in_use() == 256);
    tensor u(dtype::float64, {0}, a);
    CHECK(a.get_stats().num_allocations == 2);
  }
  CHECK(a.bytes_in_use() == 0);
}
