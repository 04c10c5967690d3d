// Loading and running a model bundle (docs/models.md, issue 29): load_model's time, and the
// inference latency of examples/mnist_cnn's network (two 5x5 SAME convolutions of 16 and
// 32 filters, each with ReLU and 2x2 max pooling, 128 ReLU units, 10 logits) loaded from a
// bundle, at batch 1 and 64 on 1 and 2 threads; beside the same network run by libtorch
// (eval mode, no autograd, the same weights), where libtorch is installed
// (tools/bench-setup). items_per_second counts images.
//
//   build/bench/benchmarks/bench_models --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <weft/weft.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#if WEFT_BENCH_TORCH
#include "torch_models.hpp"
#endif

namespace {

using namespace weft;

constexpr std::int64_t c1 = 16, c2 = 32, units = 128, classes = 10;

tensor random_tensor(const shape& s, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  tensor t(dtype::float32, s);
  for (float& v : t.flat<float>()) v = u(rng);
  return t;
}

// The network's weights (filters [5, 5, in, out], dense [in, out], biases) and a bundle of
// it in a temporary file: the graph as a frozen model is (its weights in Consts).
struct lenet_bundle {
  std::vector<tensor> params;
  std::filesystem::path path = std::filesystem::temp_directory_path() / ("weft_bench_models_" + std::to_string(::getpid()) + ".weft");

  lenet_bundle() {
    params = {random_tensor(shape{5, 5, 1, c1}, 0.3f, 1), random_tensor(shape{c1}, 0.01f, 2),
              random_tensor(shape{5, 5, c1, c2}, 0.07f, 3), random_tensor(shape{c2}, 0.01f, 4),
              random_tensor(shape{49 * c2, units}, 0.06f, 5), random_tensor(shape{units}, 0.01f, 6),
              random_tensor(shape{units, classes}, 0.2f, 7), random_tensor(shape{classes}, 0.01f, 8)};
    ops::register_standard_ops();
    graph g;
    const output x = g.placeholder(dtype::float32, partial_shape{unknown_dim, 28, 28, 1}, "images").out(0);
    const attr_map same{{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("SAME")}};
    const attr_map pool2{{"ksize", std::vector<std::int64_t>{1, 2, 2, 1}},
                         {"strides", std::vector<std::int64_t>{1, 2, 2, 1}},
                         {"padding", std::string("VALID")}};
    auto param = [&](std::size_t i) { return g.constant(params[i]).out(0); };
    auto block = [&](output in, std::size_t l) {
      const output z = g.op("BiasAdd", {g.op("Conv2D", {in, param(2 * l)}, same).out(0), param(2 * l + 1)}).out(0);
      return g.op("MaxPool", {g.op("Relu", {z}).out(0)}, pool2).out(0);
    };
    auto dense = [&](output in, std::size_t l) { return g.op("BiasAdd", {g.op("MatMul", {in, param(2 * l)}).out(0), param(2 * l + 1)}).out(0); };
    const output flat = g.op("Reshape", {block(block(x, 0), 1), g.constant(tensor::of<std::int64_t>({2}, {-1, 49 * c2})).out(0)}).out(0);
    const output logits = dense(g.op("Relu", {dense(flat, 2)}).out(0), 3);
    session s(g);
    save_model(path, s, g, {make_signature(g, "classify", {{"images", x}}, {{"logits", logits}})});
  }
  ~lenet_bundle() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
};

const lenet_bundle& bundle() {
  static const lenet_bundle b;
  return b;
}

session_options threads_options(int threads) {
  session_options o;
  o.intra_op_threads = threads;
  o.inter_op_threads = threads - 1;
  return o;
}

void BM_load_model(benchmark::State& state) {
  const auto& b = bundle();
  for (auto _ : state) {
    model_bundle m = load_model(b.path, threads_options(1));
    benchmark::DoNotOptimize(m.graph().size());
  }
  state.counters["bytes"] = static_cast<double>(std::filesystem::file_size(b.path));
}
BENCHMARK(BM_load_model)->Unit(benchmark::kMillisecond)->UseRealTime();

// Args: batch, threads.
void BM_weft_lenet_inference(benchmark::State& state) {
  const auto batch = state.range(0);
  model_bundle m = load_model(bundle().path, threads_options(static_cast<int>(state.range(1))));
  const tensor x = random_tensor(shape{batch, 28, 28, 1}, 1.0f, 9);
  m.run("classify", {{"images", x}});  // builds the executable
  for (auto _ : state) benchmark::DoNotOptimize(m.run("classify", {{"images", x}}));
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_weft_lenet_inference)->ArgsProduct({{1, 64}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

#if WEFT_BENCH_TORCH
void BM_torch_lenet_inference(benchmark::State& state) {
  const auto batch = state.range(0);
  torch_bench::set_threads(static_cast<int>(state.range(1)));
  std::vector<torch_bench::param> params;
  for (const tensor& t : bundle().params) params.push_back({t.shape().dims(), t.data<float>()});
  auto net = torch_bench::make_lenet_inference(params);
  const tensor x = random_tensor(shape{batch, 28, 28, 1}, 1.0f, 9);
  // The same network: libtorch's logits are weft's (from the bundle) to float rounding.
  const std::vector<float> theirs = net->forward(x.data<float>(), batch);
  model_bundle m = load_model(bundle().path, threads_options(1));
  const std::vector<float> ours = m.run("classify", {{"images", x}})[0].to_vector<float>();
  for (std::size_t i = 0; i < ours.size(); ++i)
    if (theirs.size() != ours.size() || std::abs(theirs[i] - ours[i]) > 1e-4f * std::max(1.0f, std::abs(ours[i]))) {
      state.SkipWithError("libtorch's logits differ from weft's: not the same network");
      return;
    }
  for (auto _ : state) benchmark::DoNotOptimize(net->forward(x.data<float>(), batch));
  state.SetItemsProcessed(state.iterations() * batch);
  torch_bench::set_threads(torch_bench::default_threads());
}
BENCHMARK(BM_torch_lenet_inference)->ArgsProduct({{1, 64}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
