// A fused elementwise chain of 8 ops, tanh(a*x + b) * sigmoid(c*x) + x*x with scalar a, b
// and c, on 4M and 16M floats with 1 and 2 threads:
// - weft_fused: the DSL's lowering (one Fused node);
// - weft_unfused: the same expression with fusion off (one node per op);
// - eigen: the same expression written by hand with Eigen Tensor, into a preallocated
//   output (DefaultDevice on one thread, a ThreadPoolDevice on two).
// Bytes processed count one read of x and one write of the result.
//
// A bias layer's activation, relu(0.5*x + b) with x [4096, 1024] and b [1024] (a fused
// subtree with a broadcast operand), against Eigen Tensor's broadcast and Eigen's dense
// rowwise form, and weft unfused. And a column operand: exp(x - m) * 2 with m [4096, 1]
// (a softmax's shift), against Eigen Tensor's broadcast.
//
// The chain's gradient, grad(reduce_sum(chain), x), on 4M floats: weft with fusion (the
// backward is one fused node, after the sum's gradient broadcasts its seed), weft
// unfused (a node per op of the forward and of the rules), and the derivative written by
// hand as one Eigen Tensor expression. Bytes processed count one read of x and one write.
#include <weft/dsl.hpp>

#include <benchmark/benchmark.h>

#include <memory>

using namespace weft;

namespace {

std::vector<float> input(std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(i % 1001) / 500.0f - 1.0f;
  return v;
}

client_options options(int threads, bool fused = true) {
  client_options o;
  o.fusion = fused;
  o.session.inter_op_threads = 0;
  o.session.intra_op_threads = threads;
  return o;
}

// Evaluates y = expr_of(x) over state.range(0) floats on state.range(1) threads, in a loop.
template <class F>
void weft_on_ramp(benchmark::State& state, bool fused, F expr_of) {
  const std::int64_t n = state.range(0);
  auto x = placeholder<float>("x", dims<dyn>);
  auto y = expr_of(x);
  client_session s(options(static_cast<int>(state.range(1)), fused));
  auto xv = tensor_of<float, 1>(input(n), {n});
  benchmark::DoNotOptimize(s.run(y, feed(x, xv)));
  for (auto _ : state) benchmark::DoNotOptimize(s.run(y, feed(x, xv)));
  state.SetBytesProcessed(state.iterations() * n * 8);
}

template <class X>
auto chain(const X& x) {
  return tanh(0.7f * x + 0.1f) * sigmoid(1.3f * x) + x * x;
}

void BM_weft_fused(benchmark::State& state) { weft_on_ramp(state, true, [](const auto& x) { return chain(x); }); }
void BM_weft_unfused(benchmark::State& state) { weft_on_ramp(state, false, [](const auto& x) { return chain(x); }); }

// out = expr, on the calling thread (threads 1) or a pool of `threads`, in a loop.
template <class Out, class Expr>
void eigen_loop(benchmark::State& state, int threads, Out& out, const Expr& expr) {
  Eigen::ThreadPool pool(threads);
  Eigen::ThreadPoolDevice device(&pool, threads);
  for (auto _ : state) {
    if (threads == 1)
      out = expr;
    else
      out.device(device) = expr;
    benchmark::ClobberMemory();
  }
}

void BM_eigen(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  auto xv = input(n);
  std::vector<float> out(static_cast<std::size_t>(n));
  Eigen::TensorMap<Eigen::Tensor<const float, 1, Eigen::RowMajor>> x(xv.data(), n);
  Eigen::TensorMap<Eigen::Tensor<float, 1, Eigen::RowMajor>> y(out.data(), n);
  eigen_loop(state, threads, y, (x * 0.7f + 0.1f).tanh() * (x * 1.3f).sigmoid() + x * x);
  state.SetBytesProcessed(state.iterations() * n * 8);
}

void BM_weft_grad_fused(benchmark::State& state) {
  weft_on_ramp(state, true, [](const auto& x) { return grad(reduce_sum(chain(x)), x); });
}
void BM_weft_grad_unfused(benchmark::State& state) {
  weft_on_ramp(state, false, [](const auto& x) { return grad(reduce_sum(chain(x)), x); });
}

void BM_eigen_grad(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  auto xv = input(n);
  std::vector<float> out(static_cast<std::size_t>(n));
  Eigen::TensorMap<Eigen::Tensor<const float, 1, Eigen::RowMajor>> x(xv.data(), n);
  Eigen::TensorMap<Eigen::Tensor<float, 1, Eigen::RowMajor>> dx(out.data(), n);
  // d/dx [tanh(0.7x + 0.1) sigmoid(1.3x) + x^2] = 0.7 (1 - t^2) s + 1.3 t s (1 - s) + 2x
  auto t = (x * 0.7f + 0.1f).tanh();
  auto sg = (x * 1.3f).sigmoid();
  eigen_loop(state, threads, dx, (t * t * -1.0f + 1.0f) * sg * 0.7f + t * sg * (sg * -1.0f + 1.0f) * 1.3f + x * 2.0f);
  state.SetBytesProcessed(state.iterations() * n * 8);
}

constexpr std::int64_t rows = 4096, cols = 1024;

void weft_bias(benchmark::State& state, bool fused) {
  const int threads = static_cast<int>(state.range(0));
  auto x = placeholder<float>("x", dims<dyn, cols>);
  auto b = placeholder<float>("b", dims<cols>);
  auto y = relu(0.5f * x + b);
  client_session s(options(threads, fused));
  auto xv = tensor_of<float, 2>(input(rows * cols), {rows, cols});
  auto bv = tensor_of<float, 1>(input(cols), {cols});
  benchmark::DoNotOptimize(s.run(y, feed(x, xv), feed(b, bv)));
  for (auto _ : state) benchmark::DoNotOptimize(s.run(y, feed(x, xv), feed(b, bv)));
  state.SetBytesProcessed(state.iterations() * rows * cols * 8);
}
void BM_weft_bias_fused(benchmark::State& state) { weft_bias(state, true); }
void BM_weft_bias_unfused(benchmark::State& state) { weft_bias(state, false); }

void BM_eigen_bias(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  auto xv = input(rows * cols), bv = input(cols);
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  Eigen::TensorMap<Eigen::Tensor<const float, 2, Eigen::RowMajor>> x(xv.data(), rows, cols);
  Eigen::TensorMap<Eigen::Tensor<const float, 2, Eigen::RowMajor>> b(bv.data(), 1, cols);
  Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor>> y(out.data(), rows, cols);
  eigen_loop(state, threads, y, (x * 0.5f + b.broadcast(Eigen::array<Eigen::Index, 2>{rows, 1})).cwiseMax(0.0f));
  state.SetBytesProcessed(state.iterations() * rows * cols * 8);
}

// One thread: Eigen's dense arrays, the bias added row by row.
void BM_eigen_bias_rowwise(benchmark::State& state) {
  using A = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  auto xv = input(rows * cols), bv = input(cols);
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  Eigen::Map<const A> x(xv.data(), rows, cols);
  Eigen::Map<const Eigen::Array<float, 1, Eigen::Dynamic>> b(bv.data(), cols);
  Eigen::Map<A> y(out.data(), rows, cols);
  for (auto _ : state) {
    y = ((x * 0.5f).rowwise() + b).max(0.0f);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * rows * cols * 8);
}

void BM_weft_column_fused(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  auto x = placeholder<float>("x", dims<dyn, cols>);
  auto m = placeholder<float>("m", dims<dyn, 1>);
  auto y = exp(x - m) * 2.0f;
  client_session s(options(threads));
  auto xv = tensor_of<float, 2>(input(rows * cols), {rows, cols});
  auto mv = tensor_of<float, 2>(input(rows), {rows, 1});
  benchmark::DoNotOptimize(s.run(y, feed(x, xv), feed(m, mv)));
  for (auto _ : state) benchmark::DoNotOptimize(s.run(y, feed(x, xv), feed(m, mv)));
  state.SetBytesProcessed(state.iterations() * rows * cols * 8);
}

void BM_eigen_column(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  auto xv = input(rows * cols), mv = input(rows);
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  Eigen::TensorMap<Eigen::Tensor<const float, 2, Eigen::RowMajor>> x(xv.data(), rows, cols);
  Eigen::TensorMap<Eigen::Tensor<const float, 2, Eigen::RowMajor>> m(mv.data(), rows, 1);
  Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor>> y(out.data(), rows, cols);
  auto expr = (x - m.broadcast(Eigen::array<Eigen::Index, 2>{1, cols})).exp() * 2.0f;
  eigen_loop(state, threads, y, expr);
  state.SetBytesProcessed(state.iterations() * rows * cols * 8);
}

// A per-sample scale [b, 1, 1] beside a bias [n], output [b, m, n]: the scale repeats one
// value along each row, the bias steps along it.
constexpr std::int64_t batch = 64, mid = 64;

void BM_weft_scale_bias_fused(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  auto x = placeholder<float>("x", dims<dyn, mid, cols>);
  auto sc = placeholder<float>("s", dims<dyn, 1, 1>);
  auto b = placeholder<float>("b", dims<cols>);
  auto y = relu(x * sc + b);
  client_session s(options(threads));
  auto xv = tensor_of<float, 3>(input(batch * mid * cols), {batch, mid, cols});
  auto sv = tensor_of<float, 3>(input(batch), {batch, 1, 1});
  auto bv = tensor_of<float, 1>(input(cols), {cols});
  benchmark::DoNotOptimize(s.run(y, feed(x, xv), feed(sc, sv), feed(b, bv)));
  for (auto _ : state) benchmark::DoNotOptimize(s.run(y, feed(x, xv), feed(sc, sv), feed(b, bv)));
  state.SetBytesProcessed(state.iterations() * batch * mid * cols * 8);
}

void BM_eigen_scale_bias(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  auto xv = input(batch * mid * cols), sv = input(batch), bv = input(cols);
  std::vector<float> out(static_cast<std::size_t>(batch * mid * cols));
  Eigen::TensorMap<Eigen::Tensor<const float, 3, Eigen::RowMajor>> x(xv.data(), batch, mid, cols);
  Eigen::TensorMap<Eigen::Tensor<const float, 3, Eigen::RowMajor>> sc(sv.data(), batch, 1, 1);
  Eigen::TensorMap<Eigen::Tensor<const float, 3, Eigen::RowMajor>> b(bv.data(), 1, 1, cols);
  Eigen::TensorMap<Eigen::Tensor<float, 3, Eigen::RowMajor>> y(out.data(), batch, mid, cols);
  auto expr = (x * sc.broadcast(Eigen::array<Eigen::Index, 3>{1, mid, cols}) +
               b.broadcast(Eigen::array<Eigen::Index, 3>{batch, mid, 1}))
                  .cwiseMax(0.0f);
  eigen_loop(state, threads, y, expr);
  state.SetBytesProcessed(state.iterations() * batch * mid * cols * 8);
}

void threads(benchmark::internal::Benchmark* b) {
  b->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
}

void sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {std::int64_t{1} << 22, std::int64_t{1} << 24})
    for (int t : {1, 2}) b->Args({n, t});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

BENCHMARK(BM_weft_fused)->Apply(sizes);
BENCHMARK(BM_eigen)->Apply(sizes);
BENCHMARK(BM_weft_unfused)->Apply(sizes);
BENCHMARK(BM_weft_bias_fused)->Apply(threads);
BENCHMARK(BM_eigen_bias)->Apply(threads);
BENCHMARK(BM_eigen_bias_rowwise)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_weft_bias_unfused)->Apply(threads);
BENCHMARK(BM_weft_column_fused)->Apply(threads);
BENCHMARK(BM_eigen_column)->Apply(threads);
BENCHMARK(BM_weft_scale_bias_fused)->Apply(threads);
BENCHMARK(BM_eigen_scale_bias)->Apply(threads);
BENCHMARK(BM_weft_grad_fused)->Args({1 << 22, 1})->Args({1 << 22, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_weft_grad_unfused)->Args({1 << 22, 1})->Args({1 << 22, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_eigen_grad)->Args({1 << 22, 1})->Args({1 << 22, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
