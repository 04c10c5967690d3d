// One training step of the MLP (784-512-512-10, ReLU, batch 128, sparse softmax
// cross-entropy averaged over the batch, SGD, float32): weft's graph (add_gradients and
// train::minimize through a session) against the same step written by hand with Eigen's
// Tensor module on a ThreadPoolDevice (forward, backward and update, buffers allocated
// once). Threads 1 and 2. Both start from the same weights and data; the hand-written step
// is checked against weft's after one step before timing.
#include <weft/weft.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

using namespace weft;

namespace {

constexpr std::int64_t batch = 128, in = 784, hidden = 512, classes = 10;
constexpr float rate = 0.01f;

tensor uniform(shape s, float scale, unsigned seed) {
  tensor t(dtype::float32, std::move(s));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (auto& v : t.flat<float>()) v = u(gen);
  return t;
}

struct problem {
  std::vector<tensor> params;  // w1, b1, w2, b2, w3, b3
  tensor x = uniform({batch, in}, 1.0f, 7), labels{dtype::int32, shape{batch}};
  problem() {
    const std::int64_t dims[3][2] = {{in, hidden}, {hidden, hidden}, {hidden, classes}};
    for (int l = 0; l < 3; ++l) {
      params.push_back(uniform({dims[l][0], dims[l][1]}, std::sqrt(6.0f / static_cast<float>(dims[l][0] + dims[l][1])),
                               static_cast<unsigned>(l + 1)));
      params.push_back(uniform({dims[l][1]}, 0.01f, static_cast<unsigned>(l + 11)));
    }
    for (std::int64_t i = 0; i < batch; ++i) labels.data<std::int32_t>()[i] = static_cast<std::int32_t>(i % classes);
  }
};

// weft: the graph of examples/mnist_mlp with SGD.
struct weft_step {
  graph g;
  output x, labels, loss;
  std::vector<output> vars;
  std::vector<int> inits;
  explicit weft_step(const problem& p) {
    x = g.placeholder(dtype::float32, {unknown_dim, in}, "x").out(0);
    labels = g.placeholder(dtype::int32, {unknown_dim}, "labels").out(0);
    output h = x;
    for (int l = 0; l < 3; ++l) {
      const tensor &w0 = p.params[static_cast<std::size_t>(2 * l)], &b0 = p.params[static_cast<std::size_t>(2 * l + 1)];
      auto w = g.variable(dtype::float32, w0.shape(), "w" + std::to_string(l)).out(0);
      auto b = g.variable(dtype::float32, b0.shape(), "b" + std::to_string(l)).out(0);
      inits.push_back(g.op("Assign", {w, g.constant(w0)}).id());
      inits.push_back(g.op("Assign", {b, g.constant(b0)}).id());
      vars.push_back(w), vars.push_back(b);
      h = g.op("BiasAdd", {g.op("MatMul", {h, w}).out(0), b}).out(0);
      if (l < 2) h = g.op("Relu", {h}).out(0);
    }
    auto xent = g.op("SparseSoftmaxCrossEntropyWithLogits", {h, labels}).out(0);
    loss = g.op("Mean", {xent, g.constant(tensor::of<std::int32_t>({1}, {0}))}).out(0);
  }
};

// The same step by hand: Eigen Tensor expressions on a thread pool.
struct eigen_step {
  using mat = Eigen::Tensor<float, 2, Eigen::RowMajor>;
  using vec = Eigen::Tensor<float, 1, Eigen::RowMajor>;
  Eigen::ThreadPool pool;
  Eigen::ThreadPoolDevice dev;
  mat w[3], z[3], h[2], dz[3], dh[2], dw[3];
  vec b[3], db[3], loss_rows;
  mat x;
  std::vector<std::int32_t> labels;
  float loss = 0;
  eigen_step(const problem& p, int threads) : pool(threads), dev(&pool, threads) {
    for (int l = 0; l < 3; ++l) {
      w[l] = eigen_map<float, 2>(p.params[static_cast<std::size_t>(2 * l)]);
      b[l] = eigen_map<float, 1>(p.params[static_cast<std::size_t>(2 * l + 1)]);
      z[l] = mat(batch, w[l].dimension(1)), dz[l] = mat(batch, w[l].dimension(1));
      dw[l] = mat(w[l].dimension(0), w[l].dimension(1)), db[l] = vec(w[l].dimension(1));
    }
    for (int l = 0; l < 2; ++l) h[l] = mat(batch, hidden), dh[l] = mat(batch, hidden);
    x = eigen_map<float, 2>(p.x);
    labels = p.labels.to_vector<std::int32_t>();
  }
  void run() {
    using pair = Eigen::IndexPair<Eigen::Index>;
    const Eigen::array<pair, 1> ab{pair(1, 0)}, atb{pair(0, 0)}, abt{pair(1, 1)};
    const Eigen::array<Eigen::Index, 2> bcast_rows{batch, 1};
    auto bias = [&](const vec& v) {
      return v.reshape(Eigen::array<Eigen::Index, 2>{1, v.dimension(0)}).broadcast(bcast_rows);
    };
    // Forward.
    const mat* input = &x;
    for (int l = 0; l < 3; ++l) {
      z[l].device(dev) = input->contract(w[l], ab) + bias(b[l]);
      if (l < 2) {
        h[l].device(dev) = z[l].cwiseMax(0.0f);
        input = &h[l];
      }
    }
    // Softmax cross-entropy, by rows; its gradient divided by the batch.
    loss = 0;
    for (std::int64_t r = 0; r < batch; ++r) {
      float m = z[2](r, 0), s = 0;
      for (std::int64_t c = 1; c < classes; ++c) m = std::max(m, z[2](r, c));
      for (std::int64_t c = 0; c < classes; ++c) s += std::exp(z[2](r, c) - m);
      const std::int32_t k = labels[static_cast<std::size_t>(r)];
      loss += std::log(s) + m - z[2](r, k);
      for (std::int64_t c = 0; c < classes; ++c)
        dz[2](r, c) = (std::exp(z[2](r, c) - m) / s - (c == k ? 1.0f : 0.0f)) / static_cast<float>(batch);
    }
    loss /= static_cast<float>(batch);
    // Backward and update, last layer first.
    const Eigen::array<Eigen::Index, 1> rows{0};
    for (int l = 2; l >= 0; --l) {
      const mat& a = l == 0 ? x : h[l - 1];
      dw[l].device(dev) = a.contract(dz[l], atb);
      db[l].device(dev) = dz[l].sum(rows);
      if (l > 0) {
        dh[l - 1].device(dev) = dz[l].contract(w[l], abt);
        dz[l - 1].device(dev) = (z[l - 1] > 0.0f).select(dh[l - 1], dh[l - 1].constant(0.0f));
      }
      w[l].device(dev) -= dw[l] * rate;
      b[l].device(dev) -= db[l] * rate;
    }
  }
};

session_options threads_options(int threads) {
  session_options o;
  o.inter_op_threads = threads > 1 ? threads : 0;
  o.intra_op_threads = threads;
  return o;
}

void BM_weft_mlp_step(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  problem p;
  weft_step m(p);
  auto train = train::minimize(m.g, m.loss, m.vars, train::sgd{rate});
  const node& init = m.g.op("NoOp", {}, {}, node_options("init").after(m.inits));
  session s(m.g, threads_options(threads));
  s.run({init, train.init});
  // Check: one step of weft equals one step by hand, then start again from the same weights.
  eigen_step e(p, threads);
  e.run();
  s.run({{m.x, p.x}, {m.labels, p.labels}}, {}, {train.step});
  const tensor w0 = s.run({}, {m.vars[0]}).at(0);
  const auto got = w0.to_vector<float>();
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - double(e.w[0].data()[i])));
  if (worst > 1e-4) state.SkipWithError("weft's step differs from the hand-written one");
  s.run({init});
  const feed_list feeds{{m.x, p.x}, {m.labels, p.labels}};
  for (auto _ : state) s.run(feeds, {}, {train.step});
  state.counters["examples/s"] = benchmark::Counter(static_cast<double>(batch * state.iterations()), benchmark::Counter::kIsRate);
}

void BM_eigen_mlp_step(benchmark::State& state) {
  problem p;
  eigen_step e(p, static_cast<int>(state.range(0)));
  for (auto _ : state) {
    e.run();
    benchmark::DoNotOptimize(e.loss);
  }
  state.counters["examples/s"] = benchmark::Counter(static_cast<double>(batch * state.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_weft_mlp_step)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_eigen_mlp_step)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
