// The second convolution of examples/mnist_cnn (input [128, 14, 14, 16], filter
// [5, 5, 16, 32], SAME, stride 1, float32) and its two gradients: weft's ops through a
// session against the same products written by hand with Eigen's Tensor module, the way
// TensorFlow's CPU kernels do them (extract_image_patches, then a contraction, on a
// ThreadPoolDevice; the input's gradient as the convolution of the output's gradient with
// the filter turned 180 degrees). Threads 1 and 2. Each result is checked against weft's
// before timing. And LeNet's first pooling and its gradient (BM_weft_pool, below).
#include <weft/weft.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace weft;

namespace {

constexpr std::int64_t N = 128, H = 14, W = 14, C = 16, K = 32, R = 5;
constexpr std::int64_t rows = N * H * W, patch = R * R * C;

tensor uniform(shape s, unsigned seed) {
  tensor t(dtype::float32, std::move(s));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& v : t.flat<float>()) v = u(gen);
  return t;
}

const tensor x_value = uniform({N, H, W, C}, 1), f_value = uniform({R, R, C, K}, 2), dy_value = uniform({N, H, W, K}, 3);

enum which { forward = 0, input_grad = 1, filter_grad = 2 };
const char* const names[] = {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"};

session_options with_threads(int n) {
  session_options o;
  o.intra_op_threads = n;
  return o;
}

struct weft_conv {
  graph g;
  output x, f, dy, result[3];
  weft_conv() {
    x = g.placeholder(dtype::float32, {unknown_dim, H, W, C}, "x").out(0);
    f = g.placeholder(dtype::float32, shape{R, R, C, K}, "f").out(0);
    dy = g.placeholder(dtype::float32, {unknown_dim, H, W, K}, "dy").out(0);
    const attr_map a{{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("SAME")}};
    auto sizes = [&](std::vector<std::int64_t> v) { return g.constant(tensor::from_vector(v)).out(0); };
    result[forward] = g.op("Conv2D", {x, f}, a).out(0);
    result[input_grad] = g.op("Conv2DBackpropInput", {sizes({N, H, W, C}), f, dy}, a).out(0);
    result[filter_grad] = g.op("Conv2DBackpropFilter", {x, sizes({R, R, C, K}), dy}, a).out(0);
  }
  tensor run(session& s, which w) const {
    return s.run({{x, x_value}, {f, f_value}, {dy, dy_value}}, {result[w]}).at(0);
  }
};

struct eigen_conv {
  template <int Rank>
  using in_map = Eigen::TensorMap<Eigen::Tensor<const float, Rank, Eigen::RowMajor>>;
  template <int Rank>
  using out_map = Eigen::TensorMap<Eigen::Tensor<float, Rank, Eigen::RowMajor>>;
  using dims2 = Eigen::array<Eigen::Index, 2>;
  Eigen::ThreadPool pool;
  Eigen::ThreadPoolDevice dev;
  tensor out[3] = {tensor(dtype::float32, shape{N, H, W, K}), tensor(dtype::float32, shape{N, H, W, C}),
                   tensor(dtype::float32, shape{R, R, C, K})};
  explicit eigen_conv(int threads) : pool(threads), dev(&pool, threads) {}

  void run(which w) {
    in_map<4> x(x_value.data<float>(), N, H, W, C), f(f_value.data<float>(), R, R, C, K), dy(dy_value.data<float>(), N, H, W, K);
    const Eigen::array<Eigen::IndexPair<int>, 1> inner{Eigen::IndexPair<int>(1, 0)}, over_rows{Eigen::IndexPair<int>(0, 0)};
    auto patches = [](const auto& t, Eigen::Index depth) {
      return t.extract_image_patches(R, R, 1, 1, 1, 1, Eigen::PADDING_SAME).reshape(dims2{rows, R * R * depth});
    };
    if (w == forward) {
      out_map<2>(out[w].data<float>(), rows, K).device(dev) = patches(x, C).contract(f.reshape(dims2{patch, K}), inner);
    } else if (w == input_grad) {
      // The filter turned 180 degrees, its channels swapped: [R, R, K, C].
      const Eigen::array<bool, 4> turn{true, true, false, false};
      const Eigen::array<int, 4> swap{0, 1, 3, 2};
      out_map<2>(out[w].data<float>(), rows, C).device(dev) =
          patches(dy, K).contract(f.reverse(turn).shuffle(swap).reshape(dims2{R * R * K, C}), inner);
    } else {
      out_map<2>(out[w].data<float>(), patch, K).device(dev) =
          patches(x, C).contract(in_map<2>(dy_value.data<float>(), rows, K), over_rows);
    }
  }
};

void check_same(const tensor& a, const tensor& b, const char* what) {
  const float* p = a.data<float>();
  const float* q = b.data<float>();
  for (std::int64_t i = 0; i < a.num_elements(); ++i)
    if (std::abs(p[i] - q[i]) > 1e-3f * std::max(1.0f, std::abs(q[i]))) {
      std::fprintf(stderr, "bench_conv: %s differs at element %lld: weft %g, Eigen %g\n", what, static_cast<long long>(i),
                   static_cast<double>(p[i]), static_cast<double>(q[i]));
      std::exit(1);
    }
}

void BM_weft(benchmark::State& state) {
  const auto w = static_cast<which>(state.range(0));
  const weft_conv c;
  session s(c.g, with_threads(static_cast<int>(state.range(1))));
  for (auto _ : state) benchmark::DoNotOptimize(c.run(s, w));
  state.SetLabel(names[w]);
}

void BM_eigen(benchmark::State& state) {
  const auto w = static_cast<which>(state.range(0));
  eigen_conv e(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    e.run(w);
    benchmark::ClobberMemory();
  }
  state.SetLabel(names[w]);
}

// Each op and thread count, weft and Eigen side by side.
void args(benchmark::internal::Benchmark* b) {
  for (int w = 0; w < 3; ++w)
    for (int t : {1, 2}) b->Args({w, t});
  b->ArgNames({"op", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(BM_weft)->Apply(args);
BENCHMARK(BM_eigen)->Apply(args);

// Conv2D of a batch of 1, 2 and 4 images on two threads: fewer than two images per thread
// spread each image's output rows over the threads (time per image against the batch of
// 128's above).
void BM_weft_small_batch(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const weft_conv c;
  session s(c.g, with_threads(2));
  const tensor x = uniform({n, H, W, C}, 1);
  for (auto _ : state) benchmark::DoNotOptimize(s.run({{c.x, x}, {c.f, f_value}}, {c.result[forward]}));
  state.counters["per_image_us"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetLabel("Conv2D");
}
BENCHMARK(BM_weft_small_batch)->ArgName("images")->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMicrosecond)->UseRealTime();

// LeNet's first pooling (examples/mnist_cnn: input [128, 28, 28, 16], 2 x 2 windows, stride 2,
// SAME) and its gradient through a session, threads 1 and 2. GB/s counts the bytes each must
// move at the least: MaxPool reads its input and writes a quarter of it; MaxPoolGrad reads the
// input and the gradient and writes the input's shape (its orig_output is only checked for its
// shape). Each result is checked against a naive loop before timing.
constexpr std::int64_t PH = 28, PC = 16;
const tensor pool_in = uniform({N, PH, PH, PC}, 4), pool_grad = uniform({N, PH / 2, PH / 2, PC}, 5);

void check_pool(const tensor& pooled, const tensor& in_grad) {
  const float *in = pool_in.data<float>(), *d = pool_grad.data<float>();
  const float *p = pooled.data<float>(), *g = in_grad.data<float>();
  for (std::int64_t b = 0; b < N; ++b)
    for (std::int64_t y = 0; y < PH / 2; ++y)
      for (std::int64_t x = 0; x < PH / 2; ++x)
        for (std::int64_t c = 0; c < PC; ++c) {
          auto at = [&](std::int64_t i, std::int64_t j) { return ((b * PH + 2 * y + i) * PH + 2 * x + j) * PC + c; };
          std::int64_t first = at(0, 0);  // the first maximum in row-major order
          for (std::int64_t i = 0; i < 2; ++i)
            for (std::int64_t j = 0; j < 2; ++j)
              if (in[at(i, j)] > in[first]) first = at(i, j);
          const std::int64_t o = ((b * PH / 2 + y) * PH / 2 + x) * PC + c;
          bool ok = p[o] == in[first];
          for (std::int64_t i = 0; i < 2; ++i)
            for (std::int64_t j = 0; j < 2; ++j) ok = ok && g[at(i, j)] == (at(i, j) == first ? d[o] : 0.0f);
          if (!ok) {
            std::fprintf(stderr, "bench_conv: MaxPool or MaxPoolGrad wrong at window %lld\n", static_cast<long long>(o));
            std::exit(1);
          }
        }
}

void BM_weft_pool(benchmark::State& state) {
  const bool grad = state.range(0) != 0;
  graph g;
  const output x = g.placeholder(dtype::float32, shape{N, PH, PH, PC}, "x").out(0);
  const output dy = g.placeholder(dtype::float32, shape{N, PH / 2, PH / 2, PC}, "dy").out(0);
  const attr_map a{{"ksize", std::vector<std::int64_t>{1, 2, 2, 1}},
                   {"strides", std::vector<std::int64_t>{1, 2, 2, 1}},
                   {"padding", std::string("SAME")}};
  const output pooled = g.op("MaxPool", {x}, a).out(0);
  const output in_grad = g.op("MaxPoolGrad", {x, pooled, dy}, a).out(0);
  session s(g, with_threads(static_cast<int>(state.range(1))));
  const auto checked = s.run({{x, pool_in}, {dy, pool_grad}}, {pooled, in_grad});
  check_pool(checked.at(0), checked.at(1));
  // MaxPoolGrad's run feeds the pooled output, so that only the gradient is timed
  const tensor pooled_value = checked.at(0);
  for (auto _ : state) {
    if (grad) benchmark::DoNotOptimize(s.run({{x, pool_in}, {pooled, pooled_value}, {dy, pool_grad}}, {in_grad}));
    else benchmark::DoNotOptimize(s.run({{x, pool_in}}, {pooled}));
  }
  const double in_bytes = static_cast<double>(pool_in.num_elements()) * sizeof(float);
  state.counters["GB/s"] = benchmark::Counter(grad ? 2.25 * in_bytes : 1.25 * in_bytes,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(grad ? "MaxPoolGrad" : "MaxPool");
}
BENCHMARK(BM_weft_pool)
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->ArgNames({"grad", "threads"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  {  // The two sides agree before anything is timed.
    const weft_conv c;
    session s(c.g, with_threads(2));
    eigen_conv e(2);
    for (int w = 0; w < 3; ++w) {
      e.run(static_cast<which>(w));
      check_same(c.run(s, static_cast<which>(w)), e.out[w], names[w]);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
