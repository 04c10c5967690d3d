// MatMul through a session against Eigen called directly on the same data: the Tensor
// contraction on a ThreadPoolDevice (what the issue names) and the dense GEMM, sizes
// 256..2048, threads 1 and 2, GFLOP/s in the "flops" counter; and matrix times vector
// against Eigen's GEMV. The direct calls write into one output allocated before the loop;
// weft allocates its output every step, as a session does. And weft's own sgemm called
// directly with each register block the CPU has, on an MLP's products.
#include <weft/kernels/cpu/sgemm.hpp>
#include <weft/weft.hpp>

#include <benchmark/benchmark.h>

#include <string>

using namespace weft;

static void set_flops(benchmark::State& state, std::int64_t n) {
  state.counters["flops"] = benchmark::Counter(2.0 * static_cast<double>(n * n * n) * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
}

static tensor ramp(std::int64_t rows, std::int64_t cols) {
  tensor t(dtype::float32, {rows, cols});
  auto f = t.flat<float>();
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i % 13) * 0.01f;
  return t;
}
static tensor ramp(std::int64_t n) { return ramp(n, n); }

static void BM_weft_matmul(benchmark::State& state) {
  auto n = state.range(0);
  int threads = static_cast<int>(state.range(1));
  graph g;
  auto& a = g.placeholder(dtype::float32, {n, n}, "a");
  auto& b = g.placeholder(dtype::float32, {n, n}, "b");
  auto& m = g.op("MatMul", {a, b});
  session_options o;
  o.inter_op_threads = 0;
  o.intra_op_threads = threads;
  session s(g, o);
  feed_list feeds{{a, ramp(n)}, {b, ramp(n)}};
  for (auto _ : state) benchmark::DoNotOptimize(s.run(feeds, {m}));
  set_flops(state, n);
}

static void BM_eigen_contraction(benchmark::State& state) {
  auto n = state.range(0);
  int threads = static_cast<int>(state.range(1));
  Eigen::ThreadPool pool(threads);
  Eigen::ThreadPoolDevice dev(&pool, threads);
  auto ta = ramp(n), tb = ramp(n);
  tensor out(dtype::float32, {n, n});  // allocated once, as hand-written code would
  for (auto _ : state) {
    Eigen::array<Eigen::IndexPair<Eigen::Index>, 1> dims{Eigen::IndexPair<Eigen::Index>(1, 0)};
    eigen_map<float, 2>(out).device(dev) = eigen_map<float, 2>(ta).contract(eigen_map<float, 2>(tb), dims);
    benchmark::DoNotOptimize(out.raw_data());
  }
  set_flops(state, n);
}

static void BM_eigen_gemm(benchmark::State& state) {
  auto n = state.range(0);
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  auto ta = ramp(n), tb = ramp(n);
  tensor out(dtype::float32, {n, n});
  for (auto _ : state) {
    Eigen::Map<M>(out.data<float>(), n, n).noalias() =
        Eigen::Map<const M>(ta.data<float>(), n, n) * Eigen::Map<const M>(tb.data<float>(), n, n);
    benchmark::DoNotOptimize(out.raw_data());
  }
  set_flops(state, n);
}

// Matrix times vector, (n,n) x (n,1): the MatMul kernel takes Eigen's GEMV path, against
// Eigen's dense matrix-vector product called directly. Bytes of the matrix read per second
// in the "bytes" counter (the product is memory-bound).

static void set_bytes(benchmark::State& state, std::int64_t n) {
  state.counters["bytes"] = benchmark::Counter(4.0 * static_cast<double>(n * n) * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
}

static void BM_weft_matvec(benchmark::State& state) {
  auto n = state.range(0);
  graph g;
  auto& a = g.placeholder(dtype::float32, {n, n}, "a");
  auto& x = g.placeholder(dtype::float32, {n, 1}, "x");
  auto& m = g.op("MatMul", {a, x});
  session_options o;
  o.inter_op_threads = 0;
  o.intra_op_threads = static_cast<int>(state.range(1));
  session s(g, o);
  feed_list feeds{{a, ramp(n, n)}, {x, ramp(n, 1)}};
  for (auto _ : state) benchmark::DoNotOptimize(s.run(feeds, {m}));
  set_bytes(state, n);
}

static void BM_eigen_gemv(benchmark::State& state) {
  auto n = state.range(0);
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using V = Eigen::Matrix<float, Eigen::Dynamic, 1>;
  auto ta = ramp(n, n), tx = ramp(n, 1);
  tensor out(dtype::float32, {n, 1});
  for (auto _ : state) {
    Eigen::Map<V>(out.data<float>(), n).noalias() =
        Eigen::Map<const M>(ta.data<float>(), n, n) * Eigen::Map<const V>(tx.data<float>(), n);
    benchmark::DoNotOptimize(out.raw_data());
  }
  set_bytes(state, n);
}

// The products of a training step of the 784-512-512-10 MLP at batch 128 (bench_training):
// forward (128 x 784 times 784 x 512), a weight's gradient (op(a) = 784 x 128 transposed),
// an input's gradient (op(b) = 512 x 512 transposed). weft's MatMul through a session
// against Eigen's dense product on Maps, transposes included; GFLOP/s in "flops".
struct mlp_product {
  const char* name;
  std::int64_t m, k, n;
  bool ta, tb;
};
static constexpr mlp_product mlp_products[] = {{"forward_784", 128, 784, 512, false, false},
                                               {"forward_512", 128, 512, 512, false, false},
                                               {"weight_grad_784", 784, 128, 512, true, false},
                                               {"input_grad_512", 128, 512, 512, false, true}};

static void set_product_flops(benchmark::State& state, const mlp_product& p) {
  state.counters["flops"] = benchmark::Counter(2.0 * static_cast<double>(p.m * p.k * p.n) * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
}

static void BM_weft_mlp_product(benchmark::State& state, mlp_product p, int threads) {
  graph g;
  auto& a = g.placeholder(dtype::float32, p.ta ? shape{p.k, p.m} : shape{p.m, p.k}, "a");
  auto& b = g.placeholder(dtype::float32, p.tb ? shape{p.n, p.k} : shape{p.k, p.n}, "b");
  auto& m = g.op("MatMul", {a, b}, {{"transpose_a", p.ta}, {"transpose_b", p.tb}});
  session_options o;
  o.inter_op_threads = 0;
  o.intra_op_threads = threads;
  session s(g, o);
  feed_list feeds{{a, p.ta ? ramp(p.k, p.m) : ramp(p.m, p.k)}, {b, p.tb ? ramp(p.n, p.k) : ramp(p.k, p.n)}};
  for (auto _ : state) benchmark::DoNotOptimize(s.run(feeds, {m}));
  set_product_flops(state, p);
}

// A layer's forward product with its bias (one _FusedMatMulBiasAdd), the weight fed with
// each run (packed by each product) or held by a variable that no step writes (packed once,
// from the second product on: inference), in one run.
static void BM_weft_dense_forward(benchmark::State& state, mlp_product p, int threads, bool variable) {
  graph g;
  auto& a = g.placeholder(dtype::float32, shape{p.m, p.k}, "a");
  const tensor weight = ramp(p.k, p.n);
  output b = variable ? g.variable(dtype::float32, shape{p.k, p.n}, "w").out(0) : g.placeholder(dtype::float32, shape{p.k, p.n}, "b").out(0);
  auto& bias = g.constant(tensor::from_vector(std::vector<float>(static_cast<std::size_t>(p.n), 0.25f), shape{p.n}));
  auto& y = g.op("BiasAdd", {g.op("MatMul", {a, b}), bias});
  const node* init = variable ? &g.op("Assign", {b, g.constant(weight)}) : nullptr;
  session_options o;
  o.inter_op_threads = 0;
  o.intra_op_threads = threads;
  session s(g, o);
  feed_list feeds{{a, ramp(p.m, p.k)}};
  if (init) s.run({}, {}, {*init});
  else feeds.push_back({b, weight});
  for (auto _ : state) benchmark::DoNotOptimize(s.run(feeds, {y}));
  set_product_flops(state, p);
}

static void BM_eigen_mlp_product(benchmark::State& state, mlp_product p) {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  auto ta = p.ta ? ramp(p.k, p.m) : ramp(p.m, p.k), tb = p.tb ? ramp(p.n, p.k) : ramp(p.k, p.n);
  tensor out(dtype::float32, {p.m, p.n});
  Eigen::Map<const M> a(ta.data<float>(), p.ta ? p.k : p.m, p.ta ? p.m : p.k);
  Eigen::Map<const M> b(tb.data<float>(), p.tb ? p.n : p.k, p.tb ? p.k : p.n);
  Eigen::Map<M> c(out.data<float>(), p.m, p.n);
  for (auto _ : state) {
    if (p.ta) c.noalias() = a.transpose() * b;
    else if (p.tb) c.noalias() = a * b.transpose();
    else c.noalias() = a * b;
    benchmark::DoNotOptimize(out.raw_data());
  }
  set_product_flops(state, p);
}

#ifdef WEFT_OWN_SGEMM
// weft's sgemm called directly with one register block (AVX2, or AVX-512 where the CPU has
// it, whatever the build's flags), one thread, on the same products: what each block gives,
// side by side in one run.
static void BM_weft_sgemm(benchmark::State& state, mlp_product p, cpu::sgemm_isa isa) {
  auto ta = p.ta ? ramp(p.k, p.m) : ramp(p.m, p.k), tb = p.tb ? ramp(p.n, p.k) : ramp(p.k, p.n);
  tensor out(dtype::float32, {p.m, p.n});
  for (auto _ : state) {
    cpu::sgemm(isa, p.m, p.n, p.k, ta.data<float>(), p.ta ? 1 : p.k, p.ta ? p.m : 1, tb.data<float>(), p.tb ? 1 : p.n,
               p.tb ? p.k : 1, out.data<float>(), p.n);
    benchmark::DoNotOptimize(out.raw_data());
  }
  set_product_flops(state, p);
}
#endif

// Registered pairwise, so that each weft run sits next to the Eigen runs it is compared
// with (the machine is shared and noisy: compare ratios within one run).
int main(int argc, char** argv) {
  for (std::int64_t n : {256, 512, 1024, 2048})
    for (std::int64_t t : {1, 2}) {
      auto name = [&](const char* what) { return std::string(what) + "/" + std::to_string(n) + "/threads:" + std::to_string(t); };
      benchmark::RegisterBenchmark(name("weft_matmul").c_str(), BM_weft_matmul)->Args({n, t})->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark(name("eigen_contraction").c_str(), BM_eigen_contraction)->Args({n, t})->Unit(benchmark::kMillisecond)->UseRealTime();
      if (t == 1)
        benchmark::RegisterBenchmark(name("eigen_gemm").c_str(), BM_eigen_gemm)->Args({n, t})->Unit(benchmark::kMillisecond)->UseRealTime();
    }
  for (std::int64_t n : {1024, 4096}) {
    auto name = [&](const char* what, int t) { return std::string(what) + "/" + std::to_string(n) + "/threads:" + std::to_string(t); };
    for (int t : {1, 2})
      benchmark::RegisterBenchmark(name("weft_matvec", t).c_str(), BM_weft_matvec)->Args({n, t})->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark(name("eigen_gemv", 1).c_str(), BM_eigen_gemv)->Args({n, 1})->Unit(benchmark::kMicrosecond)->UseRealTime();
  }
  for (const auto& p : mlp_products) {
    for (int t : {1, 2})
      benchmark::RegisterBenchmark((std::string("weft_mlp_product/") + p.name + "/threads:" + std::to_string(t)).c_str(),
                                   BM_weft_mlp_product, p, t)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    benchmark::RegisterBenchmark((std::string("eigen_mlp_product/") + p.name + "/threads:1").c_str(), BM_eigen_mlp_product, p)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    if (!p.ta && !p.tb)
      for (int t : {1, 2})
        for (bool variable : {false, true})
          benchmark::RegisterBenchmark((std::string("weft_dense_forward/") + p.name + (variable ? "/weight_held" : "/weight_fed") +
                                        "/threads:" + std::to_string(t)).c_str(),
                                       BM_weft_dense_forward, p, t, variable)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
#ifdef WEFT_OWN_SGEMM
    for (auto isa : {cpu::sgemm_isa::avx2, cpu::sgemm_isa::avx512})
      if (cpu::sgemm_supported(isa))
        benchmark::RegisterBenchmark((std::string("weft_sgemm_") + (isa == cpu::sgemm_isa::avx512 ? "avx512/" : "avx2/") +
                                      p.name + "/threads:1").c_str(),
                                     BM_weft_sgemm, p, isa)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
#endif
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
