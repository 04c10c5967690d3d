// Queues (issue 27): what an element costs through a session, and whether a queue fed by a
// runner thread hides the time its input takes.
//
//   BM_queue_step/<n>: one step that enqueues a float scalar n times (QueueEnqueueMany of
//     a vector of n) and one that dequeues n (QueueDequeueMany): the time of the pair, and
//     the counter elements_per_s.
//   BM_queue_roundtrip: one element in (a step), one element out (another step), as a
//     training loop fed one example at a time: the latency of the pair.
//   BM_queue_threads/threads:2: one caller enqueues a scalar a step, the other dequeues one
//     a step, on one session, concurrently; counter elements_per_s (both callers' steps).
//   BM_overlap/<mode>/<L>/<C>: a training step whose input takes L units (a chain of L
//     512x512 MatMul+Tanh on one core) and whose computation takes C units (a chain of C
//     more, then a sum). mode 0: the input alone; 1: the computation alone (on a fed input);
//     2: both in one step, the computation reading the input directly (serial: L + C);
//     3: a queue_runner thread runs the input and enqueues it (capacity 2), the training
//     loop dequeues and computes (pipelined: max(L, C) ideally). One intra-op thread, no
//     inter-op pool: each step runs on its caller's thread, so the pipeline's two steps
//     use the two cores. Counter ms_per_step.
//   BM_mnist_batches/<mode>: MNIST-sized batches without training, by the host loop's code
//     (mode 0) and by an input_pipeline (mode 1); see below.
#include <weft/weft.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

using namespace weft;

namespace {

session_options one_core() {
  session_options o;
  o.intra_op_threads = 1;
  o.inter_op_threads = 0;
  o.constant_folding.max_bytes = 0;  // every step runs every node
  return o;
}

queue_spec floats(std::int64_t capacity, partial_shape s) {
  queue_spec q;
  q.component_types = {dtype::float32};
  q.shapes = {std::move(s)};
  q.capacity = capacity;
  return q;
}

tensor filled(shape s, float scale) {
  std::vector<float> v(static_cast<std::size_t>(s.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>(static_cast<int>(i * 37 % 101) - 50) / 50.0f;
  return tensor::from_vector(v, s);
}

// n layers of Tanh(MatMul(h, W)) after h.
output layers(graph& g, output h, int n, int salt) {
  for (int l = 0; l < n; ++l) {
    auto w = g.constant(filled(shape{512, 512}, 0.04f / static_cast<float>(l + salt + 1))).out(0);
    h = g.op("Tanh", {g.op("MatMul", {h, w}).out(0)}).out(0);
  }
  return h;
}

}  // namespace

static void BM_queue_step(benchmark::State& state) {
  const auto n = static_cast<std::int32_t>(state.range(0));
  graph g;
  graph_queue q(g, floats(-1, partial_shape({})));
  auto x = g.constant(filled(shape{n}, 1.0f)).out(0);
  const std::string put = q.enqueue_many({x}, "put").name();
  auto take = q.dequeue_many(n, "take")[0];
  session s(g, one_core());
  for (auto _ : state) {
    s.run({put});
    benchmark::DoNotOptimize(s.run({}, {take}));
  }
  state.counters["elements_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * n, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_queue_step)->Arg(1)->Arg(128)->Arg(4096)->UseRealTime();

static void BM_queue_roundtrip(benchmark::State& state) {
  graph g;
  graph_queue q(g, floats(-1, partial_shape({})));
  auto x = g.placeholder(dtype::float32, partial_shape({}), "x").out(0);
  const std::string put = q.enqueue({x}, "put").name();
  auto take = q.dequeue("take")[0];
  session s(g, one_core());
  const feed_list feeds{{x, tensor::scalar(1.0f)}};
  for (auto _ : state) {
    s.run(feeds, {}, {put});
    benchmark::DoNotOptimize(s.run({}, {take}));
  }
}
BENCHMARK(BM_queue_roundtrip)->UseRealTime();

static void BM_queue_threads(benchmark::State& state) {
  static std::unique_ptr<session> shared;
  static std::string put;
  static output take;
  static std::string close;
  if (state.thread_index() == 0) {
    graph g;
    graph_queue q(g, floats(64, partial_shape({})));
    auto x = g.constant(tensor::scalar(1.0f)).out(0);
    put = q.enqueue({x}, "put").name();
    take = q.dequeue("take")[0];
    close = q.close(true, "close").name();
    shared = std::make_unique<session>(g, one_core());
  }
  // Thread 0 produces, thread 1 consumes; the producer runs as many steps as the consumer.
  for (auto _ : state) {
    if (state.thread_index() == 0) shared->run({put});
    else benchmark::DoNotOptimize(shared->run({}, {take}));
  }
  state.counters["elements_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_queue_threads)->Threads(2)->UseRealTime();

static void BM_overlap(benchmark::State& state) {
  const auto mode = state.range(0);
  const int L = static_cast<int>(state.range(1)), C = static_cast<int>(state.range(2));
  graph g;
  auto seed = g.constant(filled(shape{512, 512}, 1.0f)).out(0);
  auto input = layers(g, seed, L, 0);
  graph_queue q(g, floats(2, partial_shape({512, 512})), "inputs");
  const std::string put = q.enqueue({input}, "put").name();
  const std::string cancel = q.close(true, "cancel").name();
  auto fed = g.placeholder(dtype::float32, partial_shape({512, 512}), "fed").out(0);
  auto sum = [&](output h) {
    return g.op("Sum", {layers(g, h, C, 100), g.constant(tensor::of<std::int32_t>({2}, {0, 1})).out(0)}).out(0);
  };
  auto on_fed = sum(fed);
  auto serial = sum(input);
  auto pipelined = sum(q.dequeue("take")[0]);
  session s(g, one_core());
  const feed_list feeds{{fed, filled(shape{512, 512}, 0.5f)}};
  coordinator coord;
  queue_runner runner(s, {put}, {.cancel = endpoint(cancel)});
  if (mode == 3) runner.start(coord);
  for (auto _ : state) {
    switch (mode) {
      case 0: s.run({}, {input}); break;
      case 1: s.run(feeds, {on_fed}); break;
      case 2: s.run({}, {serial}); break;
      default: s.run({}, {pipelined}); break;
    }
  }
  coord.request_stop();
  coord.join();
  state.counters["ms_per_step"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 1e-3, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_overlap)
    ->ArgsProduct({{0, 1, 2, 3}, {4}, {4}})
    ->ArgsProduct({{0, 1, 2, 3}, {2}, {6}})
    ->ArgsProduct({{0, 1, 2, 3}, {6}, {2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// MNIST-sized batches, made without training: the host loop's way (rows gathered by a
// shuffled index and converted to floats in one pass, examples/mnist_training.hpp's
// batch_of) against an input_pipeline's (shuffle_source, batch(128), a map stage of Cast and
// Mul, prefetch 4), on 60000 synthetic uint8 rows of 784. Counter batches_per_s; the CPU
// time per batch is what the pipeline takes from a training step beside it.
static void BM_mnist_batches(benchmark::State& state) {
  constexpr std::int64_t rows = 60000, pixels = 784, batch = 128;
  static const tensor images = [] {
    tensor t(dtype::uint8, shape{rows, pixels});
    auto* p = t.data<std::uint8_t>();
    for (std::int64_t i = 0; i < rows * pixels; ++i) p[i] = static_cast<std::uint8_t>(i * 2654435761u >> 24);
    return t;
  }();
  static const tensor labels = [] {
    tensor t(dtype::uint8, shape{rows});
    for (std::int64_t i = 0; i < rows; ++i) t.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(i % 10);
    return t;
  }();
  std::int64_t made = 0;
  if (state.range(0) == 0) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(rows));
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 random(1);
    std::shuffle(order.begin(), order.end(), random);
    std::int64_t first = 0;
    for (auto _ : state) {
      const std::int64_t n = std::min(batch, rows - first);
      tensor x(dtype::float32, shape{n, pixels}), y(dtype::int32, shape{n});
      float* xp = x.data<float>();
      for (std::int64_t i = 0; i < n; ++i) {
        const std::uint8_t* src = images.data<std::uint8_t>() + order[static_cast<std::size_t>(first + i)] * pixels;
        for (std::int64_t p = 0; p < pixels; ++p) xp[i * pixels + p] = static_cast<float>(src[p]) * (1.0f / 255.0f);
        y.data<std::int32_t>()[i] = labels.data<std::uint8_t>()[order[static_cast<std::size_t>(first + i)]];
      }
      benchmark::DoNotOptimize(x.raw_data());
      first = first + n == rows ? 0 : first + n;
      ++made;
    }
  } else {
    auto p = input_pipeline::from_tensors({images, labels});
    p.shuffle_source(1).batch(batch).prefetch(4).repeat(-1).map([](graph& g, const std::vector<output>& in) {
      const output x = g.op("Cast", {in[0]}, {{"DstT", dtype::float32}}).out(0);
      return std::vector<output>{g.op("Mul", {x, g.constant(tensor::scalar(1.0f / 255.0f)).out(0)}).out(0),
                                 g.op("Cast", {in[1]}, {{"DstT", dtype::int32}}).out(0)};
    });
    p.start();
    for (auto _ : state) {
      benchmark::DoNotOptimize(p.next());
      ++made;
    }
  }
  state.counters["batches_per_s"] = benchmark::Counter(static_cast<double>(made), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_mnist_batches)->Arg(0)->Arg(1)->UseRealTime();

BENCHMARK_MAIN();
