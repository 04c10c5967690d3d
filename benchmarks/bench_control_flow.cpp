// Loops in the executor (ops/control_flow_ops.hpp, graph/control_flow.hpp):
// - the overhead of one iteration of a trivial loop (i < n: i += 1) on one thread, the
//   loop counting to 10,000 per step; the per-iteration time is the step's over 10,000;
// - a loop whose iterations are independent (each a 192x192 MatMul of a loop invariant,
//   summed; the sum's chain is cheap) with parallel_iterations 1 and 2, on 1 intra-op
//   thread and 2 or 1 inter-op threads (the thread that runs the step works beside them),
//   so that only overlapping iterations can use the second core;
// - the gradient of a trivial loop (y = x * c, 10,000 times), on one thread: the forward
//   loop with its pushes and the backward loop with its pops, per iteration, against the
//   forward loop alone;
// - a typed scan over n rows of 256 floats (acc = acc * 0.5 + row, stacked), with and
//   without its gradient, for n = 1000 and 4000, on one thread: the time per row stays
//   flat as n grows when rows are read, written and their gradients summed in place
//   (TensorScatterUpdate, TensorScatterAdd) rather than copying the [n, 256] tensors;
// - a typed map_fn over 32 matrices of 192x192, each multiplied by one weight matrix,
//   with parallel_iterations 1 and 2, on 2 or 1 inter-op threads and 1 intra-op thread.
#include <weft/dsl.hpp>
#include <weft/weft.hpp>

#include <benchmark/benchmark.h>

#include <vector>

using namespace weft;

namespace {

output i64(graph& g, std::int64_t v) { return g.constant(tensor::scalar(v)); }

void BM_trivial_loop(benchmark::State& state) {
  constexpr std::int64_t n = 10000;
  graph g;
  auto out = while_loop(
      g, {i64(g, 0)}, [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(i64(g, n))}).out(0); },
      [&](loop_scope& s, const std::vector<output>& v) { return std::vector<output>{g.op("Add", {v[0], s.invariant(i64(g, 1))}).out(0)}; });
  session_options o;
  o.constant_folding.max_bytes = 0;  // every step runs every node: folding would run them once
  o.inter_op_threads = 0;
  o.intra_op_threads = 1;
  session sess(g, o);
  if (sess.run({}, {out[0]})[0].scalar_value<std::int64_t>() != n) state.SkipWithError("the loop counted wrong");
  for (auto _ : state) benchmark::DoNotOptimize(sess.run({}, {out[0]}));
  // Seconds per loop iteration (shown with an SI prefix: 1.2u is 1.2 us).
  state.counters["per_loop_iteration"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_independent_iterations(benchmark::State& state) {
  const std::int64_t parallel = state.range(0);
  constexpr std::int64_t iterations = 32, size = 192;
  std::vector<float> a(static_cast<std::size_t>(size * size));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 17) / 17.0f;
  graph g;
  auto m = g.constant(tensor::from_vector(a, shape{size, size}));
  auto axes = g.constant(tensor::from_vector(std::vector<std::int32_t>{0, 1}, shape{2}));
  auto out = while_loop(
      g, {i64(g, 0), g.constant(tensor::scalar(0.0f))},
      [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(i64(g, iterations))}).out(0); },
      [&](loop_scope& s, const std::vector<output>& v) {
        auto mm = s.invariant(m);
        auto p = g.op("MatMul", {mm, mm}).out(0);
        auto sum = g.op("Sum", {p, s.invariant(axes)}).out(0);
        return std::vector<output>{g.op("Add", {v[0], s.invariant(i64(g, 1))}).out(0), g.op("Add", {v[1], sum}).out(0)};
      },
      while_options{"work", parallel, -1});
  session_options o;
  o.constant_folding.max_bytes = 0;  // every step runs every node: folding would run them once
  o.inter_op_threads = static_cast<int>(state.range(1));
  o.intra_op_threads = 1;
  session sess(g, o);
  for (auto _ : state) benchmark::DoNotOptimize(sess.run({}, {out[1]}));
}

// y = x * c by a loop of 10,000 iterations; with `gradient`, dy/dx and dy/dc as well.
void BM_loop_gradient(benchmark::State& state) {
  const bool gradient = state.range(0) != 0;
  constexpr std::int64_t n = 10000;
  graph g;
  auto x = g.constant(tensor::scalar(1.0));
  auto c = g.constant(tensor::scalar(1.0 + 1e-6));
  auto out = while_loop(
      g, {i64(g, 0), x},
      [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(i64(g, n))}).out(0); },
      [&](loop_scope& s, const std::vector<output>& v) {
        return std::vector<output>{g.op("Add", {v[0], s.invariant(i64(g, 1))}).out(0), g.op("Mul", {v[1], s.invariant(c)}).out(0)};
      });
  auto d = add_gradients(g, {out[1]}, {x, c});
  std::vector<endpoint> fetches{out[1]};
  if (gradient) fetches = {d[0], d[1]};
  session_options o;
  o.constant_folding.max_bytes = 0;  // every step runs every node: folding would run them once
  o.inter_op_threads = 0;
  o.intra_op_threads = 1;
  session sess(g, o);
  for (auto _ : state) benchmark::DoNotOptimize(sess.run({}, fetches));
  state.counters["per_loop_iteration"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_scan(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const bool gradient = state.range(1) != 0;
  auto x = placeholder<float>("x", dims<dyn, 256>);
  auto stack = scan([](auto acc, auto row) { return acc * 0.5f + row; }, x, zeros<float>(dims<256>));
  auto dx = grad(reduce_sum(stack), x);
  client_options o;
  o.session.constant_folding.max_bytes = 0;
  o.session.inter_op_threads = 0;
  o.session.intra_op_threads = 1;
  client_session s(o);
  std::vector<float> xv(static_cast<std::size_t>(n * 256));
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 17) * 0.125f;
  tensor_of<float, 2> xt(xv, {n, 256});
  for (auto _ : state) {
    if (gradient) benchmark::DoNotOptimize(s.run(dx, feed(x, xt)));
    else benchmark::DoNotOptimize(s.run(stack, feed(x, xt)));
  }
  state.counters["per_row"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_map_fn_parallel(benchmark::State& state) {
  constexpr std::int64_t n = 32, k = 192;
  auto x = placeholder<float>("x", dims<n, k, k>);
  auto w = placeholder<float>("w", dims<k, k>);
  scan_options options;
  options.parallel_iterations = state.range(0);
  auto products = map_fn([&](auto m) { return matmul(m, w); }, x, options);
  client_options o;
  o.session.inter_op_threads = static_cast<int>(state.range(1));
  o.session.intra_op_threads = 1;
  client_session s(o);
  std::vector<float> xv(static_cast<std::size_t>(n * k * k)), wv(static_cast<std::size_t>(k * k));
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 13) * 0.01f;
  for (std::size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>(i % 7) * 0.02f;
  tensor_of<float, 3> xt(xv, {n, k, k});
  tensor_of<float, 2> wt(wv, {k, k});
  for (auto _ : state) benchmark::DoNotOptimize(s.run(products, feed(x, xt), feed(w, wt)));
}

}  // namespace

BENCHMARK(BM_map_fn_parallel)->ArgNames({"parallel_iterations", "inter_op"})->Args({1, 2})->Args({2, 2})->Args({2, 1})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_scan)->ArgNames({"rows", "gradient"})->ArgsProduct({{1000, 4000}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_loop_gradient)->ArgName("gradient")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_trivial_loop)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_independent_iterations)->ArgNames({"parallel_iterations", "inter_op"})->Args({1, 2})->Args({2, 2})->Args({2, 1})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
