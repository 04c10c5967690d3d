// The intra-op pool (runtime/intra_op_pool.hpp) and cpu_context::parallel_for over it:
// every unit runs exactly once, in blocks that tile [0, n), with one caller or several at
// once, nested, and with more callers than the pool has job slots; the work is spread over
// more than one thread, the caller's blocks before the workers'; too many blocks is an error;
// pools are made and destroyed without hanging.
#include <catch2/catch.hpp>

#include <weft/core/function_ref.hpp>
#include <weft/runtime/device.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using namespace weft;

namespace {

// Calls parallel_for(n, cost) and checks that the blocks tile [0, n) once each, in order
// within each block; returns the number of blocks.
std::int64_t check_tiling(const cpu_context& c, std::int64_t n, double cost) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  std::atomic<std::int64_t> blocks{0};
  std::atomic<bool> bad{false};
  c.parallel_for(n, cost, [&](std::int64_t b, std::int64_t e) {
    if (b < 0 || e > n || b >= e) bad = true;
    for (std::int64_t i = b; i < e && !bad; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
    blocks.fetch_add(1);
  });
  CHECK_FALSE(bad);
  int wrong = 0;
  for (auto& h : hits) wrong += h.load() != 1;
  CHECK(wrong == 0);
  return blocks.load();
}

}  // namespace

TEST_CASE("intra-op pool: every unit runs once, for any size and cost", "[intra_op]") {
  for (int threads : {1, 2, 4}) {
    const cpu_context c(threads);
    CHECK(c.num_threads() == threads);
    c.parallel_for(0, 1e9, [](std::int64_t, std::int64_t) { FAIL("a block of an empty range ran"); });
    // Cheap work runs inline, as one block.
    CHECK(check_tiling(c, 1000, 1.0) == 1);
    CHECK(check_tiling(c, 1, 1e9) == 1);
    for (std::int64_t n : {2, 3, 7, 8, 9, 64, 1000, 100003}) {
      const std::int64_t blocks = check_tiling(c, n, 1e6);
      // Up to four blocks a thread, never more than the units; one thread runs it whole.
      CHECK(blocks <= std::min<std::int64_t>(n, 4 * threads));
      if (threads == 1) CHECK(blocks == 1);
      else if (n >= 2) CHECK(blocks >= 2);
    }
  }
}

namespace {
// The threads that ran blocks of splits of 8 blocks, tried until two are seen or 50 times.
// Each block sleeps, so the worker joins while the caller still has blocks left (it may be
// asleep at first: a few tries).
std::set<std::thread::id> threads_of_splits(const cpu_context& c) {
  std::set<std::thread::id> seen;
  std::mutex m;
  for (int attempt = 0; attempt < 50 && seen.size() < 2; ++attempt)
    c.parallel_for(8, 1e9, [&](std::int64_t, std::int64_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::lock_guard lock(m);
      seen.insert(std::this_thread::get_id());
    });
  return seen;
}
}  // namespace

TEST_CASE("intra-op pool: blocks run on more than one thread", "[intra_op]") {
  const cpu_context c(2);
  CHECK(threads_of_splits(c).size() == 2);
}

TEST_CASE("intra-op pool: the caller runs the first blocks and the workers the last", "[intra_op]") {
  // Whoever joins, the blocks the calling thread ran are a prefix of [0, blocks) and the
  // workers' the rest: the caller claims from the front, the workers from the back.
  for (int threads : {2, 3}) {
    intra_op_pool pool(threads);
    const auto caller = std::this_thread::get_id();
    int joined = 0;
    for (int attempt = 0; attempt < 60; ++attempt) {
      const std::int64_t blocks = 2 + attempt % 11;
      std::vector<std::atomic<int>> by_caller(static_cast<std::size_t>(blocks)), runs(static_cast<std::size_t>(blocks));
      pool.run(blocks, [&](std::int64_t b) {
        if (attempt % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
        runs[static_cast<std::size_t>(b)].fetch_add(1);
        if (std::this_thread::get_id() == caller) by_caller[static_cast<std::size_t>(b)] = 1;
      });
      std::int64_t prefix = 0;
      while (prefix < blocks && by_caller[static_cast<std::size_t>(prefix)] == 1) ++prefix;
      int after = 0, wrong_runs = 0;
      for (std::int64_t b = 0; b < blocks; ++b) {
        after += b >= prefix && by_caller[static_cast<std::size_t>(b)] == 1;
        wrong_runs += runs[static_cast<std::size_t>(b)] != 1;
      }
      CHECK(after == 0);
      CHECK(wrong_runs == 0);
      joined += prefix < blocks;
    }
    CHECK(joined > 0);  // the workers ran some of the blocks (the sleeping attempts)
  }
}

TEST_CASE("intra-op pool: more blocks than a job counts is an error, before any runs", "[intra_op]") {
  intra_op_pool pool(2);
  std::atomic<int> ran{0};
  CHECK_THROWS_WITH(pool.run(intra_op_pool::max_blocks + 1, [&](std::int64_t) { ran.fetch_add(1); }),
                    Catch::Contains("intra_op_pool::run: 2147483648 blocks, more than the 2147483647"));
  CHECK(ran.load() == 0);
  pool.run(3, [&](std::int64_t) { ran.fetch_add(1); });
  CHECK(ran.load() == 3);
}

TEST_CASE("intra-op pool: a thread counted busy keeps the workers out of a split until it ends", "[intra_op]") {
  const cpu_context c(2);
  // Another thread runs a kernel (the executor's inter-op thread): with two threads in the
  // pool, the split runs on its caller alone.
  std::atomic<bool> counted{false}, release{false};
  std::thread other([&] {
    auto busy = c.count_busy();
    counted = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!counted) std::this_thread::yield();
  auto alone = threads_of_splits(c);
  CHECK(alone == std::set<std::thread::id>{std::this_thread::get_id()});
  release = true;
  other.join();
  CHECK(threads_of_splits(c).size() == 2);
}

TEST_CASE("intra-op pool: several callers at once, more than it has job slots", "[intra_op]") {
  const cpu_context c(2);
  for (int callers : {2, 3, 24}) {
    std::atomic<std::int64_t> sum{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < callers; ++t)
      threads.emplace_back([&] {
        for (int r = 0; r < 40; ++r)
          c.parallel_for(1000, 100.0, [&](std::int64_t b, std::int64_t e) {
            std::int64_t s = 0;
            for (std::int64_t i = b; i < e; ++i) s += i;
            sum.fetch_add(s);
          });
      });
    for (auto& t : threads) t.join();
    CHECK(sum.load() == std::int64_t{callers} * 40 * (999 * 1000 / 2));
  }
}

TEST_CASE("intra-op pool: a parallel_for inside a block runs, inline", "[intra_op]") {
  const cpu_context c(2);
  std::atomic<std::int64_t> sum{0};
  std::atomic<int> elsewhere{0};  // inner blocks run on another thread than their outer block's
  c.parallel_for(16, 1e6, [&](std::int64_t b, std::int64_t e) {
    const auto outer = std::this_thread::get_id();
    for (std::int64_t i = b; i < e; ++i)
      c.parallel_for(100, 1e6, [&](std::int64_t ib, std::int64_t ie) {
        if (std::this_thread::get_id() != outer) elsewhere.fetch_add(1);
        for (std::int64_t j = ib; j < ie; ++j) sum.fetch_add(i * 100 + j);
      });
  });
  CHECK(sum.load() == 1599 * 1600 / 2);
  CHECK(elsewhere.load() == 0);
}

TEST_CASE("intra-op pool: made and destroyed, busy and idle, without hanging", "[intra_op]") {
  for (int round = 0; round < 50; ++round) {
    intra_op_pool pool(1 + round % 4, std::chrono::microseconds(round % 3 == 0 ? 0 : 100));
    std::atomic<int> count{0};
    if (round % 2 == 0) pool.run(round % 7 + 1, [&](std::int64_t) { count.fetch_add(1); });
    CHECK(count.load() == (round % 2 == 0 ? round % 7 + 1 : 0));
  }
}

TEST_CASE("function_ref calls the callable it refers to, without copying it", "[intra_op]") {
  // A lambda capturing more than std::function keeps inline, its state changed through the reference.
  std::int64_t sum = 0, calls = 0, scale = 3;
  const std::vector<std::int64_t> offsets{10, 20};
  auto body = [&](std::int64_t b, std::int64_t e) {
    ++calls;
    for (std::int64_t i = b; i < e; ++i) sum += scale * i + offsets[static_cast<std::size_t>(i % 2)];
  };
  const function_ref<void(std::int64_t, std::int64_t)> ref(body);
  ref(0, 4);  // 3 * (0 + 1 + 2 + 3) + 10 + 20 + 10 + 20
  CHECK(sum == 78);
  CHECK(calls == 1);
  // A callable with state of its own is referred to, not copied: its count moves.
  struct counter {
    int n = 0;
    int operator()(int k) { return n += k; }
  } c;
  const function_ref<int(int)> count(c);
  CHECK(count(2) == 2);
  CHECK(count(5) == 7);
  CHECK(c.n == 7);
  // A reference copies as a pointer pair; a std::function converts too.
  const function_ref<int(int)> again = count;
  CHECK(again(1) == 8);
  const std::function<int(int)> twice = [](int k) { return 2 * k; };
  CHECK(function_ref<int(int)>(twice)(21) == 42);
}
