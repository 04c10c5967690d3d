// Executor overhead: 10,000 trivial scalar nodes as a chain and as a fan-out, one thread.
// Reported as ns per node (items_per_second inverted in docs/benchmarks.md).
#include <weft/weft.hpp>

#include <benchmark/benchmark.h>

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

BENCHMARK_MAIN();
