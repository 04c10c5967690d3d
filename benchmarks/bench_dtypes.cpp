// Elementwise Add and Tanh through a session for each way a dtype is computed: natively
// (float32, int32), through float32 (float16, bfloat16), through int64 (int8) and through
// uint64 (uint32). 1M elements, one thread; items are elements.
#include <weft/weft.hpp>

#include <benchmark/benchmark.h>

using namespace weft;

template <class T>
static void run_op(benchmark::State& state, const char* op, int arity) {
  const std::int64_t n = 1 << 20;
  std::vector<T> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(static_cast<T>(static_cast<float>(i % 7) * 0.25f));
  graph g;
  auto& x = g.constant(tensor::from_vector(v));
  auto& y = arity == 1 ? g.op(op, {x}) : g.op(op, {x, x});
  session_options o;
  o.constant_folding.max_bytes = 0;  // every step runs every node: folding would run them once
  o.inter_op_threads = 0;
  o.intra_op_threads = 1;
  session s(g, o);
  s.run({}, {y});
  for (auto _ : state) benchmark::DoNotOptimize(s.run({}, {y}));
  state.SetItemsProcessed(state.iterations() * n);
}

template <class T>
static void BM_add(benchmark::State& state) {
  run_op<T>(state, "Add", 2);
}
template <class T>
static void BM_tanh(benchmark::State& state) {
  run_op<T>(state, "Tanh", 1);
}
BENCHMARK_TEMPLATE(BM_add, float)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_add, half)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_add, bfloat16)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_add, std::int32_t)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_add, std::int8_t)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_add, std::uint32_t)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_tanh, float)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_tanh, half)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_tanh, bfloat16)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
