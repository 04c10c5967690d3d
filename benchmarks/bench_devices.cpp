// Several devices in one process (issue 26): Send/Recv latency and bandwidth, and what
// placement buys on a workload with parallel branches.
//
//   BM_cross_chain/<inter-op threads>/<cross>/<length>: that many scalar Neg nodes in a
//     chain, alternating between CPU:0 and CPU:1 (cross = 1: length - 1 transfers) or all on
//     CPU:0 (cross = 0), in a session of two CPU devices; (cross - same) / (length - 1) is the
//     cost of one Send/Recv with the step's start and end shared out over them, and the
//     difference between lengths 256 and 64 of that, over 192, the cost without them.
//   BM_cross_bytes/<MiB>/<cross>: a tensor of that many MiB made on CPU:0 (Identity of a
//     constant) and read on CPU:1 (cross = 1) or on CPU:0; BM_memcpy/<MiB> copies as many bytes.
//   BM_branches/<placer>: four branches of two 512x512 layers over a batch of 256, summed;
//     CPU devices of one thread each (one intra-op thread, no inter-op pool: each device
//     runs its partition on its own thread). placer 0: one device; 1: two devices, the
//     rule-based placer (everything on CPU:0); 2: two devices, the greedy placer on the
//     estimated costs; 3: the greedy placer after record_costs() of a traced step.
//     Counter predicted_ms: the placement's simulated step.
//   BM_recv_scheduling/<alap>: CPU:0 makes 16 tensors of 1 MiB at once, CPU:1 folds them
//     into a chain of 4 Tanh nodes a tensor, transfers copying into CPU:1's memory
//     (copy_transfers); Recvs as soon as possible (0) or as late as possible (1). Counters:
//     the peak bytes in use on each device during a step, above what it held before.
//   BM_pipeline/<devices>/threads:<callers>: a model-parallel pipeline, two 512x512
//     MatMul+Relu layers on CPU:0 then two on CPU:1 (devices = 2; all four on CPU:0 when
//     devices = 1), batch 256, devices of one thread; one or two callers running steps at
//     once on one session (concurrent steps: while CPU:1 runs one step's second half, CPU:0
//     runs the next step's first). Counter steps_per_s: the steps of all callers a second.
#include <weft/weft.hpp>

#include <benchmark/benchmark.h>

#include <cstring>

using namespace weft;

namespace {
session_options two_devices(int inter_op) {
  session_options o;
  o.cpu_devices = 2;
  o.intra_op_threads = 1;
  o.inter_op_threads = inter_op;
  o.constant_folding.max_bytes = 0;  // every step runs every node
  return o;
}

tensor filled(shape s, float scale) {
  std::vector<float> v(static_cast<std::size_t>(s.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>(static_cast<int>(i * 37 % 101) - 50) / 50.0f;
  return tensor::from_vector(v, s);
}
}  // namespace

static void BM_cross_chain(benchmark::State& state) {
  const bool cross = state.range(1) != 0;
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{}, "x");
  output v = x;
  const auto length = static_cast<int>(state.range(2));
  for (int i = 0; i < length; ++i) v = g.op("Neg", {v}, {}, node_options().on(cross && i % 2 ? "/cpu:1" : "/cpu:0"));
  session s(g, two_devices(static_cast<int>(state.range(0))));
  const feed_list feeds{{x, tensor::scalar(1.0f)}};
  s.run(feeds, {v});
  for (auto _ : state) benchmark::DoNotOptimize(s.run(feeds, {v}));
  state.counters["transfers"] = cross ? length - 1 : 0;
}
BENCHMARK(BM_cross_chain)->ArgsProduct({{0, 1}, {0, 1}, {64, 256}})->Unit(benchmark::kMicrosecond);

static void BM_cross_bytes(benchmark::State& state) {
  const std::int64_t n = state.range(0) * (1 << 20) / 4;
  const bool cross = state.range(1) != 0;
  graph g;
  auto c = g.constant(filled(shape{n}, 1.0f), node_options("c").on("/cpu:0"));
  auto made = g.op("Identity", {c}, {}, node_options("made").on("/cpu:0"));
  auto read = g.op("Identity", {made}, {}, node_options("read").on(cross ? "/cpu:1" : "/cpu:0"));
  session s(g, two_devices(0));
  s.run({}, {read});
  for (auto _ : state) benchmark::DoNotOptimize(s.run({}, {read}));
  state.SetBytesProcessed(state.iterations() * n * 4);
}
BENCHMARK(BM_cross_bytes)->ArgsProduct({{1, 16, 64}, {0, 1}})->Unit(benchmark::kMicrosecond);

static void BM_memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0)) << 20;
  std::vector<char> from(bytes, 1), to(bytes);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_memcpy)->Arg(1)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);

static void BM_branches(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{-1, 512}, "x");
  std::vector<output> ends;
  for (int b = 0; b < 4; ++b) {
    output h = x;
    for (int l = 0; l < 2; ++l) {
      auto w = g.constant(filled(shape{512, 512}, 0.05f * static_cast<float>(2 * b + l + 1)));  // distinct: CSE would share equal ones
      h = g.op("Relu", {g.op("MatMul", {h, w})});
    }
    ends.push_back(h);
  }
  auto y = g.op("Add", {g.op("Add", {ends[0], ends[1]}), g.op("Add", {ends[2], ends[3]})}, {}, "y");
  session_options o = two_devices(0);  // each device runs its nodes on its own one thread
  if (mode == 0) o.cpu_devices = 1;
  o.placement.algorithm = mode >= 2 ? passes::placer::greedy : passes::placer::rules;
  session s(g, o);
  const feed_list feeds{{x, filled(shape{256, 512}, 1.0f)}};
  s.run(feeds, {y});
  if (mode == 3) {
    for (int k = 0; k < 3; ++k) s.run(feeds, {y});
    run_metadata meta;
    s.run(feeds, {y}, {}, {.trace = true}, &meta);
    s.record_costs(meta.stats);
    s.run(feeds, {y});
  }
  for (auto _ : state) benchmark::DoNotOptimize(s.run(feeds, {y}));
  state.counters["predicted_ms"] = s.placement(feeds, {y})->predicted_seconds * 1e3;
  state.counters["link_us"] = s.cluster().link(0, std::min(1, s.cluster().size() - 1)).latency_seconds * 1e6;
}
BENCHMARK(BM_branches)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();

static void BM_recv_scheduling(benchmark::State& state) {
  constexpr int K = 16;
  constexpr std::int64_t n = 1 << 18;  // 1 MiB of float32
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{n}, "x");
  std::vector<output> made;
  for (int k = 0; k < K; ++k)
    made.push_back(g.op("Mul", {x, g.constant(tensor::scalar(1.0f / static_cast<float>(k + 1)), node_options().on("/cpu:0"))}, {},
                        node_options().on("/cpu:0")));
  output acc = g.op("Tanh", {made[0]}, {}, node_options().on("/cpu:1"));
  for (int k = 1; k < K; ++k) {
    for (int j = 0; j < 4; ++j) acc = g.op("Tanh", {acc}, {}, node_options().on("/cpu:1"));
    acc = g.op("Add", {acc, made[static_cast<std::size_t>(k)]}, {}, node_options().on("/cpu:1"));
  }
  session_options o = two_devices(0);
  o.copy_transfers = true;
  o.recv_scheduling = state.range(0) ? session_options::recv_order::alap : session_options::recv_order::asap;
  session s(g, o);
  const feed_list feeds{{x, filled(shape{n}, 1.0f)}};
  s.run(feeds, {acc});
  std::size_t peak[2] = {0, 0};
  for (auto _ : state) {
    std::size_t before[2];
    for (int d = 0; d < 2; ++d) s.devices()[static_cast<std::size_t>(d)]->reset_peak(), before[d] = s.devices()[static_cast<std::size_t>(d)]->bytes_in_use();
    benchmark::DoNotOptimize(s.run(feeds, {acc}));
    for (int d = 0; d < 2; ++d) peak[d] = std::max(peak[d], s.devices()[static_cast<std::size_t>(d)]->peak_bytes_in_use() - before[d]);
  }
  state.counters["peak_cpu0_MiB"] = static_cast<double>(peak[0]) / (1 << 20);
  state.counters["peak_cpu1_MiB"] = static_cast<double>(peak[1]) / (1 << 20);
}
static void BM_pipeline(benchmark::State& state) {
  static std::unique_ptr<session> shared;  // made by the first caller; the callers start and stop together
  static feed_list feeds;
  static output y;
  if (state.thread_index() == 0) {
    graph g;
    auto x = g.placeholder(dtype::float32, partial_shape{-1, 512}, "x");
    output h = x;
    for (int l = 0; l < 4; ++l) {
      const char* where = state.range(0) == 2 && l >= 2 ? "/cpu:1" : "/cpu:0";
      auto w = g.constant(filled(shape{512, 512}, 0.05f * static_cast<float>(l + 1)), node_options().on(where));
      h = g.op("Relu", {g.op("MatMul", {h, w}, {}, node_options().on(where))}, {}, node_options().on(where));
    }
    y = h;
    session_options o = two_devices(0);
    o.cpu_devices = static_cast<int>(state.range(0));
    shared = std::make_unique<session>(g, o);
    feeds = {{x, filled(shape{256, 512}, 1.0f)}};
    shared->run(feeds, {y});
  }
  for (auto _ : state) benchmark::DoNotOptimize(shared->run(feeds, {y}));
  state.counters["steps_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_pipeline)->Arg(1)->Arg(2)->Threads(1)->Threads(2)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK(BM_recv_scheduling)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
