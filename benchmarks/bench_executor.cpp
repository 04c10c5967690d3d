// Executor overhead: 10,000 trivial scalar nodes as a chain and as a fan-out, one thread.
// Reported as ns per node (items_per_second inverted in docs/benchmarks.md). And the
// intra-op pool's own cost: a split kernel's job of empty blocks on two threads, and the
// count an executor thread keeps around a kernel (intra_op_pool::busy_scope).
#include <weft/weft.hpp>

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <new>

// Every heap allocation of the process is counted (BM_one_node_step reports those of a step).
namespace {
std::atomic<std::int64_t> allocations{0};
}  // namespace
void* operator new(std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace weft;

static void run_graph(benchmark::State& state, const graph& g, const std::vector<endpoint>& fetches,
                      const std::vector<endpoint>& targets, int nodes) {
  session_options o;
  o.constant_folding.max_bytes = 0;  // every step runs every node: folding would run them once
  o.eliminate_common_subexpressions = false;  // the fan-out's equal nodes would merge into one
  o.inter_op_threads = 0;
  o.intra_op_threads = 1;
  session s(g, o);
  s.run({}, fetches, targets);  // build and cache the executable
  for (auto _ : state) benchmark::DoNotOptimize(s.run({}, fetches, targets));
  state.SetItemsProcessed(state.iterations() * nodes);
  state.counters["ns_per_node"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * nodes, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

static void BM_chain(benchmark::State& state) {
  const int n = 10000;
  graph g;
  output cur = g.constant(tensor::scalar(0.0f));
  for (int i = 1; i < n; ++i) cur = g.op("Identity", {cur});
  run_graph(state, g, {cur}, {}, n);
}
BENCHMARK(BM_chain)->Unit(benchmark::kMicrosecond);

static void BM_fan_out(benchmark::State& state) {
  const int n = 10000;
  graph g;
  auto& src = g.constant(tensor::scalar(0.0f));
  std::vector<int> leaves;
  for (int i = 2; i < n; ++i) leaves.push_back(g.op("Identity", {src}).id());
  auto& sink = g.op("NoOp", {}, {}, node_options("sink").after(leaves));
  run_graph(state, g, {}, {sink}, n);
}
BENCHMARK(BM_fan_out)->Unit(benchmark::kMicrosecond);

static void BM_chain_add(benchmark::State& state) {
  const int n = 10000;
  graph g;
  output cur = g.constant(tensor::scalar(0.0f));
  auto& one = g.constant(tensor::scalar(1.0f));
  for (int i = 2; i < n; ++i) cur = g.op("Add", {cur, one});
  run_graph(state, g, {cur}, {}, n);
}
BENCHMARK(BM_chain_add)->Unit(benchmark::kMicrosecond);

// A step's fixed cost: one scalar Add, the executable cached, on the calling thread alone
// (Arg 0) or with the session's inter-op pool (Arg 1). What a GPU node's step adds to its
// kernel's launch. allocs_per_step: the step's calls of operator new, the vectors of
// fetches and results included; tensor buffers come from the CPU allocator, not counted.
static void BM_one_node_step(benchmark::State& state) {
  graph g;
  const node& y = g.op("Add", {g.constant(tensor::scalar(1.0f)), g.constant(tensor::scalar(2.0f))});
  session_options o;
  o.constant_folding.max_bytes = 0;  // the Add runs every step
  o.intra_op_threads = 1;
  if (state.range(0) == 0) o.inter_op_threads = 0;
  session s(g, o);
  for (int i = 0; i < 100; ++i) s.run({}, {y});
  const std::int64_t before = allocations.load();
  for (auto _ : state) benchmark::DoNotOptimize(s.run({}, {y}));
  state.counters["allocs_per_step"] =
      static_cast<double>(allocations.load() - before) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_one_node_step)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// One job of state.range(0) empty blocks on a pool of two threads (the caller and one
// worker), job after job: the worker spins between them, as between a step's kernels. What
// splitting a kernel costs beyond its work: posting the job, the worker's claims, the wait
// for its last block.
static void BM_intra_op_job(benchmark::State& state) {
  intra_op_pool pool(2);
  const std::int64_t blocks = state.range(0);
  std::atomic<std::int64_t> ran{0};
  for (auto _ : state) pool.run(blocks, [&](std::int64_t) { ran.fetch_add(1, std::memory_order_relaxed); });
  if (ran.load() != blocks * static_cast<std::int64_t>(state.iterations())) state.SkipWithError("a block did not run");
  state.counters["ns_per_job"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_intra_op_job)->Arg(2)->Arg(8)->Unit(benchmark::kMicrosecond);

// The executor's count of a kernel's thread in its device's pool (busy_scope, around every
// kernel that may run beside others when there are inter-op threads): two atomic updates of
// a line that the pool's spinning worker reads. A job before each batch keeps the worker
// spinning.
static void BM_busy_scope(benchmark::State& state) {
  intra_op_pool pool(2);
  constexpr int batch = 256;
  for (auto _ : state) {
    state.PauseTiming();
    pool.run(2, [](std::int64_t) {});
    state.ResumeTiming();
    for (int i = 0; i < batch; ++i) {
      intra_op_pool::busy_scope busy(pool);
      benchmark::ClobberMemory();
    }
  }
  state.counters["ns_per_scope"] = benchmark::Counter(static_cast<double>(state.iterations()) * batch,
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_busy_scope)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
