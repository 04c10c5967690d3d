// GPU benchmarks (issue 28), each against its baseline in the same run, on GPU:0:
//   BM_matmul_session / BM_matmul_cublas   MatMul through a session against cublasGemmEx called
//     / BM_matmul_cublaslt                 directly (goal >= 0.95) and cuBLASLt with a kept plan
//                                          (the session's path), n x n, float32 (0) and
//                                          bfloat16 (1), each call waited for (1) or pipelined,
//                                          a wait every 64 calls and after the last (0)
//   BM_copy / BM_fused_chain / BM_unfused_chain
//                                          a plain device-to-device copy of 2^28 floats (the
//                                          memory bandwidth), an 8-op elementwise chain as one
//                                          Fused node (NVRTC) and as 8 nodes (goals: >= 80 % of
//                                          the copy's bandwidth, >= 3x the unfused)
//   BM_send_recv / BM_memcpy_pinned        64 MiB from the CPU to the GPU through a Send/Recv
//                                          pair against cudaMemcpy from pinned memory (>= 0.8)
//   BM_mlp_step                            the 784-512-512-10 MLP's Adam step, batch 128 and
//                                          1024, on the GPU
//   BM_mlp_step_unfused                    the same without the session's MatMul folds
//                                          (session_options::fuse_matmul: the bias and ReLU in
//                                          cuBLASLt's epilogue, ReluGrad after the product)
//   BM_lenet_step                          bench_training's LeNet's Adam step, batch 128 and 1024
//   BM_lenet_step_unfused                  the same without the session's folds (since session
//                                          77 the GPU folds a convolution's bias and ReLU and
//                                          the pooling's ReLU gradient)
//   BM_mlp_sgd_step, BM_mlp_sgd_step_unfused  the MLP's gradient-descent step, with and without
//                                          the folds (each weight's update one product into it)
// `bench_gpu --node-times` instead prints where the MLP's and LeNet's steps spend their time,
// `bench_gpu --host-costs` the host's time a call of what a GPU node does, `bench_gpu
// --conv-algos` cuDNN's algorithms for LeNet's convolutions, listed by its heuristics and timed.
//   BM_executor_overhead                   a chain of 64 scalar GPU Adds: time per node
//   BM_gpu_loop                            a while loop with its body on the GPU: time per iteration
// Without a GPU it says so and exits 0. Time is wall time with the device synchronized
// (UseRealTime): the host runs ahead of the device otherwise.
//
//   cmake --preset bench && cmake --build build/bench --target bench_gpu && build/bench/benchmarks/bench_gpu
#include <benchmark/benchmark.h>

#include <weft/cuda/all.hpp>
#include <weft/graph/control_flow.hpp>
#include <weft/weft.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace weft;

namespace {

bool gpu_present() { return cuda::gpus_available().count > 0; }

const cuda::gpu_device& gpu_of_session(const session& s) { return cuda::gpu_of(*s.devices().back()); }

session_options one_gpu() {
  session_options o;
  o.device_count = {{"GPU", 1}};
  return o;
}

dtype dtype_arg(std::int64_t code) { return code == 0 ? dtype::float32 : dtype::bfloat16; }

// A variable on the GPU holding n x m values of dtype t (filled with `value`).
output gpu_variable(graph& g, dtype t, std::vector<std::int64_t> dims, float value, std::vector<endpoint>& inits) {
  auto scope = g.device_scope("/device:GPU:0");
  const output v = g.variable(t, shape(dims)).out(0);
  output fill = g.op("Fill", {g.constant(tensor::from_vector(dims)).out(0), g.constant(tensor::scalar(value)).out(0)}).out(0);
  if (t != dtype::float32) fill = g.op("Cast", {fill}, {{"DstT", t}}).out(0);
  inits.emplace_back(g.op("Assign", {v, fill}));
  return v;
}

// Times `once` (a product on gpu's compute stream) as BM_matmul_session times a step: each
// call waited for (range 2 = 1) or a wait every 64 calls and after the last, in the timing
// (a wait after the loop would leave up to 63 calls untimed: at 8192, 50 TFLOP/s read 80).
template <class F>
void time_products(benchmark::State& state, const cuda::gpu_device& gpu, F&& once) {
  const std::int64_t n = state.range(0);
  once();
  gpu.synchronize();
  const bool synced = state.range(2) != 0;
  std::int64_t i = 0;
  for (auto _ : state) {
    once();
    if (++i % 64 == 0 || synced || i == static_cast<std::int64_t>(state.max_iterations)) gpu.synchronize();
  }
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) * 1e-12,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_matmul_session(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const dtype t = dtype_arg(state.range(1));
  graph g;
  std::vector<endpoint> inits;
  const output a = gpu_variable(g, t, {n, n}, 0.5f, inits), b = gpu_variable(g, t, {n, n}, 0.25f, inits);
  auto scope = g.device_scope("/device:GPU:0");
  const node& mm = g.op("MatMul", {a, b});
  session s(g, one_gpu());
  s.run(inits);
  time_products(state, gpu_of_session(s), [&] { s.run({mm}); });
}

// The direct calls' product: n x n operands and result of the benchmark's dtype on a GPU
// device of their own (state's ranges 0 and 1), with 1 and 0 as the factors.
struct square_product {
  explicit square_product(const benchmark::State& state)
      : n(state.range(0)), t(dtype_arg(state.range(1))), a(t, shape{n, n}, gpu.get_allocator()),
        b(t, shape{n, n}, gpu.get_allocator()), c(t, shape{n, n}, gpu.get_allocator()) {}
  const cuda::gpu_device gpu{0, 1};
  const std::int64_t n;
  const dtype t;
  const tensor a, b;
  tensor c;
  const float one = 1, zero = 0;
};

void BM_matmul_cublas(benchmark::State& state) {
  const square_product p(state);
  // As a user of cuBLAS writes it: C^T = B^T A^T in column-major terms, float32 accumulation.
  const cudaDataType_t type = cuda::cuda_type_of(p.t);
  const int N = static_cast<int>(p.n);
  time_products(state, p.gpu, [&] {
    cuda::check(cublasGemmEx(p.gpu.blas(), CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &p.one, p.b.raw_data(), type, N, p.a.raw_data(),
                             type, N, &p.zero, p.c.raw_data(), type, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                "cublasGemmEx");
  });
}

// The same product through cuBLASLt with the algorithm its heuristics chose once, as a
// caller who keeps a plan does (cuda::lt_plan, a thin wrapper over the cuBLASLt calls), with
// the device's 32 MiB workspace: the session's MatMul takes this path.
void BM_matmul_cublaslt(benchmark::State& state) {
  const square_product p(state);
  const std::int64_t n = p.n;
  const cuda::lt_geometry geometry{cuda::cuda_type_of(p.t), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, n, n, 1, 0, 0, 0, 256};
  const std::lock_guard lock(p.gpu.library_mutex());
  const cuda::lt_plan* plan = p.gpu.lt_plan_for(geometry);
  if (!plan) {
    state.SkipWithError("cuBLASLt has no algorithm for this product");
    return;
  }
  time_products(state, p.gpu, [&] { p.gpu.run_lt(*plan, &p.one, p.b.raw_data(), p.a.raw_data(), &p.zero, p.c.raw_data()); });
}

constexpr std::int64_t chain_elements = std::int64_t(1) << 28;

void BM_copy(benchmark::State& state) {
  const cuda::gpu_device gpu(0, 1);
  const tensor x(dtype::float32, shape{chain_elements}, gpu.get_allocator());
  tensor y(dtype::float32, shape{chain_elements}, gpu.get_allocator());
  for (auto _ : state) {
    cuda::check(cudaMemcpyAsync(y.raw_data(), x.raw_data(), x.bytes(), cudaMemcpyDeviceToDevice, gpu.stream()), "copy");
    gpu.synchronize();
  }
  state.counters["GB/s"] = benchmark::Counter(2.0 * double(x.bytes()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// y = relu(((((x * 1.5 + 0.5) - x) * 0.25 + x) * 2) - 1): eight ops on one input and
// scalars, as one Fused node or as eight nodes.
const char* const chain_expr =
    "Relu:float32(Sub:float32(Mul:float32(Add:float32(Mul:float32(Sub:float32(Add:float32(Mul:float32($float32,$float32s),"
    "$float32s),$float32),$float32s),$float32),$float32s),$float32s))";

void chain(benchmark::State& state, bool fused) {
  graph g;
  std::vector<endpoint> inits;
  const output x = gpu_variable(g, dtype::float32, {chain_elements}, 0.5f, inits);
  auto scope = g.device_scope("/device:GPU:0");
  auto c = [&](float v) { return g.constant(tensor::scalar(v)).out(0); };
  output y;
  if (fused) {
    y = g.op("Fused", {x, c(1.5f), c(0.5f), c(0.25f), c(2.0f), c(1.0f)},
             {{"expr", std::string(chain_expr)},
              {"slots", std::vector<std::int64_t>{0, 1, 2, 0, 3, 0, 4, 5}},
              {"T", dtype::float32},
              {"Tin", std::vector<dtype>(6, dtype::float32)}})
            .out(0);
  } else {
    auto op = [&](const char* name, output a, output b) { return g.op(name, {a, b}).out(0); };
    y = op("Sub", op("Mul", op("Add", op("Mul", op("Sub", op("Add", op("Mul", x, c(1.5f)), c(0.5f)), x), c(0.25f)), x), c(2.0f)), c(1.0f));
    y = g.op("Relu", {y}).out(0);
  }
  const node& target = g.op("Identity", {y});  // before the session: it copies the graph
  session_options o = one_gpu();
  o.constant_folding.max_bytes = 0;
  session s(g, o);
  s.run(inits);
  const auto& gpu = gpu_of_session(s);
  s.run({target});
  gpu.synchronize();
  for (auto _ : state) {
    s.run({target});
    gpu.synchronize();
  }
  state.counters["GB/s"] = benchmark::Counter(2.0 * 4 * double(chain_elements) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_fused_chain(benchmark::State& state) { chain(state, true); }
void BM_unfused_chain(benchmark::State& state) { chain(state, false); }

constexpr std::int64_t transfer_floats = std::int64_t(16) << 20;  // 64 MiB

void BM_send_recv(benchmark::State& state) {
  graph g;
  auto& x = g.placeholder(dtype::float32, {transfer_floats}, "x");  // on the CPU
  const node* on_gpu = nullptr;
  {
    auto scope = g.device_scope("/device:GPU:0");
    on_gpu = &g.op("Identity", {x});
  }
  session s(g, one_gpu());
  const tensor host = tensor(dtype::float32, shape{transfer_floats}, cuda::pinned_allocator());
  const auto& gpu = gpu_of_session(s);
  s.run({{x, host}}, {}, {*on_gpu});
  for (auto _ : state) {
    s.run({{x, host}}, {}, {*on_gpu});
    gpu.synchronize();
  }
  state.counters["GB/s"] = benchmark::Counter(double(host.bytes()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_memcpy_pinned(benchmark::State& state) {
  const cuda::gpu_device gpu(0, 1);
  const tensor host(dtype::float32, shape{transfer_floats}, cuda::pinned_allocator());
  tensor device(dtype::float32, shape{transfer_floats}, gpu.get_allocator());
  for (auto _ : state)
    cuda::check(cudaMemcpy(device.raw_data(), host.raw_data(), host.bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  state.counters["GB/s"] = benchmark::Counter(double(host.bytes()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// A model's graph on GPU:0: its loss, variables and their initializers, and the
// placeholders of a batch (images of `image_dims`, int32 labels).
struct model_graph {
  graph g;
  std::vector<endpoint> inits;
  std::vector<output> vars;
  output loss;
  const node* images = nullptr;
  const node* labels = nullptr;
  std::vector<std::int64_t> image_dims;

  output param(std::vector<std::int64_t> dims, float value) {
    vars.push_back(gpu_variable(g, dtype::float32, std::move(dims), value, inits));
    return vars.back();
  }
  output dense(output in, std::int64_t n_in, std::int64_t n_out) {
    const output w = param({n_in, n_out}, 0.01f), b = param({n_out}, 0.0f);
    return g.op("BiasAdd", {g.op("MatMul", {in, w}).out(0), b}).out(0);
  }
  // The loss: the mean sparse softmax cross-entropy of `logits` against the labels.
  void finish(output logits) {
    loss = g.op("Mean", {g.op("SparseSoftmaxCrossEntropyWithLogits", {logits, *labels}).out(0),
                         g.constant(tensor::scalar(0)).out(0)})
               .out(0);
  }
};

// The 784-512-512-10 MLP.
std::unique_ptr<model_graph> mlp_graph(std::int64_t batch) {
  auto m = std::make_unique<model_graph>();
  auto scope = m->g.device_scope("/device:GPU:0");
  m->image_dims = {batch, 784};
  m->images = &m->g.placeholder(dtype::float32, shape(m->image_dims), "images");
  m->labels = &m->g.placeholder(dtype::int32, {batch}, "labels");
  const output h1 = m->g.op("Relu", {m->dense(*m->images, 784, 512)}).out(0);
  const output h2 = m->g.op("Relu", {m->dense(h1, 512, 512)}).out(0);
  m->finish(m->dense(h2, 512, 10));
  return m;
}

// bench_training's LeNet (examples/mnist_cnn without dropout): two 5x5 SAME convolutions
// (16 and 32 filters) with bias, ReLU and 2x2 max pooling, dense 1568-128 ReLU, dense 128-10.
std::unique_ptr<model_graph> lenet_graph(std::int64_t batch) {
  auto m = std::make_unique<model_graph>();
  graph& g = m->g;
  auto scope = g.device_scope("/device:GPU:0");
  m->image_dims = {batch, 28, 28, 1};
  m->images = &g.placeholder(dtype::float32, shape(m->image_dims), "images");
  m->labels = &g.placeholder(dtype::int32, {batch}, "labels");
  const attr_map same{{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("SAME")}};
  const attr_map pool2{{"ksize", std::vector<std::int64_t>{1, 2, 2, 1}},
                       {"strides", std::vector<std::int64_t>{1, 2, 2, 1}},
                       {"padding", std::string("VALID")}};
  auto block = [&](output in, std::int64_t n_in, std::int64_t n_out) {
    const output f = m->param({5, 5, n_in, n_out}, 0.01f), b = m->param({n_out}, 0.0f);
    const output z = g.op("BiasAdd", {g.op("Conv2D", {in, f}, same).out(0), b}).out(0);
    return g.op("MaxPool", {g.op("Relu", {z}).out(0)}, pool2).out(0);
  };
  const output p2 = block(block(*m->images, 1, 16), 16, 32);
  const output flat = g.op("Reshape", {p2, g.constant(tensor::from_vector(std::vector<std::int64_t>{-1, 49 * 32})).out(0)}).out(0);
  m->finish(m->dense(g.op("Relu", {m->dense(flat, 49 * 32, 128)}).out(0), 128, 10));
  return m;
}

// A session running the model's Adam (or gradient-descent: sgd) step, initialized, with a
// batch to feed (images all 0.5, labels i % 10).
struct training {
  explicit training(model_graph& m, bool fuse = true, bool sgd = false) {
    auto scope = m.g.device_scope("/device:GPU:0");  // the gradient and the updates too, as in the examples
    const auto train = sgd ? train::minimize(m.g, m.loss, m.vars, train::sgd{0.01})
                           : train::minimize(m.g, m.loss, m.vars, train::adam{0.001});
    targets = {train.step};
    session_options o = one_gpu();
    o.placement.soft = true;
    o.fuse_matmul = fuse;
    s = std::make_unique<session>(m.g, o);
    s->run(m.inits);
    s->run({train.init});
    std::vector<std::int32_t> l(static_cast<std::size_t>(m.image_dims[0]));
    for (std::size_t i = 0; i < l.size(); ++i) l[i] = static_cast<std::int32_t>(i % 10);
    feeds = {{*m.images, tensor::filled(shape(m.image_dims), 0.5f)}, {*m.labels, tensor::from_vector(l)}};
  }
  void run(const run_options& options = {}, run_metadata* meta = nullptr) {
    s->run(feeds, {}, targets, options, meta);
    gpu_of_session(*s).synchronize();
  }
  std::unique_ptr<session> s;
  feed_list feeds;
  std::vector<endpoint> targets;
};

void time_training_step(benchmark::State& state, model_graph& m, bool fuse = true, bool sgd = false) {
  training t(m, fuse, sgd);
  t.run();
  for (auto _ : state) t.run();
  state.counters["examples/s"] = benchmark::Counter(double(m.image_dims[0]), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_mlp_step(benchmark::State& state) {
  const auto m = mlp_graph(state.range(0));
  time_training_step(state, *m);
}

void BM_mlp_step_unfused(benchmark::State& state) {
  const auto m = mlp_graph(state.range(0));
  time_training_step(state, *m, false);
}

void BM_lenet_step(benchmark::State& state) {
  const auto m = lenet_graph(state.range(0));
  time_training_step(state, *m);
}

void BM_lenet_step_unfused(benchmark::State& state) {
  const auto m = lenet_graph(state.range(0));
  time_training_step(state, *m, false);
}

void BM_mlp_sgd_step(benchmark::State& state) {
  const auto m = mlp_graph(state.range(0));
  time_training_step(state, *m, true, true);
}

void BM_mlp_sgd_step_unfused(benchmark::State& state) {
  const auto m = mlp_graph(state.range(0));
  time_training_step(state, *m, false, true);
}

// `bench_gpu --node-times`: where the MLP's and the LeNet's steps (batch 128) spend their
// time, node by node: the mean of 20 traced steps, every kernel launch synchronous
// (CUDA_LAUNCH_BLOCKING=1, set before the CUDA runtime starts), so that a node's time is its
// kernels' time.
void print_node_times(const char* name, model_graph& m) {
  training t(m);
  for (int i = 0; i < 5; ++i) t.run();
  constexpr int steps = 20;
  std::map<std::string, double> mean;
  for (int i = 0; i < steps; ++i) {
    run_metadata meta;
    t.run({.trace = true}, &meta);
    for (const auto& n : meta.stats.nodes) mean[n.op + " " + n.node] += static_cast<double>(n.end_ns - n.start_ns) / 1e6 / steps;
  }
  std::vector<std::pair<double, std::string>> sorted;
  double total = 0;
  for (const auto& [node, ms] : mean) sorted.emplace_back(ms, node), total += ms;
  std::sort(sorted.rbegin(), sorted.rend());
  std::printf("%s, batch %lld: %.3f ms in %zu nodes; the slowest:\n", name, static_cast<long long>(m.image_dims[0]), total,
              sorted.size());
  for (std::size_t i = 0; i < sorted.size() && i < 25; ++i) std::printf("  %8.3f ms  %s\n", sorted[i].first, sorted[i].second.c_str());
}

void BM_executor_overhead(benchmark::State& state) {
  constexpr int nodes = 64;
  graph g;
  std::vector<endpoint> inits;
  const output x = gpu_variable(g, dtype::float32, {1}, 1.0f, inits);
  auto scope = g.device_scope("/device:GPU:0");
  output v = x;
  for (int i = 0; i < nodes; ++i) v = g.op("Add", {v, x}).out(0);
  const node& target = g.op("Identity", {v});
  session_options o = one_gpu();
  o.inter_op_threads = 0;
  session s(g, o);
  s.run(inits);
  const auto& gpu = gpu_of_session(s);
  for (auto _ : state) {
    s.run({target});
    gpu.synchronize();
  }
  // Seconds per node (shown with an SI prefix: 6.0u is 6.0 us), as bench_control_flow's per_loop_iteration.
  state.counters["per_node"] =
      benchmark::Counter(double(nodes), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// A while loop whose body scales a 1024-float vector on the GPU, 1000 iterations: its
// control (the counter, its bound, the predicate: small int and bool tensors in host memory)
// stays on the host, so an iteration costs its nodes' launches, not a wait for the device.
void BM_gpu_loop(benchmark::State& state) {
  constexpr std::int64_t n = 1000;
  graph g;
  auto scope = g.device_scope("/device:GPU:0");
  auto i64 = [&](std::int64_t v) { return g.constant(tensor::scalar(v)).out(0); };
  const output x0 = g.op("Fill", {g.constant(tensor::from_vector(std::vector<std::int64_t>{1024})).out(0),
                                  g.constant(tensor::scalar(1.0f)).out(0)}).out(0);
  auto out = while_loop(
      g, {i64(0), x0},
      [&](loop_scope& sc, const std::vector<output>& v) { return g.op("Less", {v[0], sc.invariant(i64(n))}).out(0); },
      [&](loop_scope& sc, const std::vector<output>& v) {
        return std::vector<output>{g.op("Add", {v[0], sc.invariant(i64(1))}).out(0),
                                   g.op("Mul", {v[1], sc.invariant(g.constant(tensor::scalar(1.0001f)).out(0))}).out(0)};
      });
  const node& target = g.op("Identity", {out[1]});  // before the session: it copies the graph
  session_options o = one_gpu();
  o.constant_folding.max_bytes = 0;
  o.inter_op_threads = 0;
  session s(g, o);
  const auto& gpu = gpu_of_session(s);
  s.run({target});
  gpu.synchronize();
  for (auto _ : state) {
    s.run({target});
    gpu.synchronize();
  }
  state.counters["per_loop_iteration"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// `bench_gpu --host-costs`: the host's microseconds a call of what a GPU node does, each
// without waiting for the device (a wait every 64 calls keeps the queue short): where the
// session's overhead over a direct cuBLAS call goes.
void print_host_costs() {
  using clock = std::chrono::steady_clock;
  auto per_call = [](const char* what, int calls, auto&& f, auto&& wait) {
    double best = 1e30;
    for (int round = 0; round < 5; ++round) {
      const auto t0 = clock::now();
      for (int i = 0; i < calls; ++i) {
        f();
        if (i % 64 == 63) wait();
      }
      wait();
      best = std::min(best, std::chrono::duration<double, std::micro>(clock::now() - t0).count() / calls);
    }
    std::printf("  %9.3f us  %s\n", best, what);
  };
  const cuda::gpu_device gpu(0, 1);
  auto none = [] {};
  auto sync = [&] { gpu.synchronize(); };
  int current = 0;
  per_call("cudaGetDevice", 100000, [&] { (void)cudaGetDevice(&current); }, none);
  per_call("cudaSetDevice (the current one)", 100000, [&] { (void)cudaSetDevice(0); }, none);
  per_call("current_device guard", 100000, [&] { const cuda::current_device here(0); }, none);
  per_call("allocate and free 2 MiB (the GPU's caching allocator)", 20000,
           [&] { const tensor t(dtype::bfloat16, shape{1024, 1024}, gpu.get_allocator()); }, none);
  const tensor one(dtype::float32, shape{1}, gpu.get_allocator());
  tensor out(dtype::float32, shape{1}, gpu.get_allocator());
  cuda::launch::broadcast_plan same;
  same.same_shape = true;
  per_call("a kernel launch (a 1-element Add)", 20000,
           [&] { cuda::launch::binary_op(cuda::launch::binary::add, cuda::launch::elem::f32, one.raw_data(), one.raw_data(), out.raw_data(), 1, same, gpu.stream()); },
           sync);
  const tensor a(dtype::bfloat16, shape{1024, 1024}, gpu.get_allocator()), b(dtype::bfloat16, shape{1024, 1024}, gpu.get_allocator());
  tensor c(dtype::bfloat16, shape{1024, 1024}, gpu.get_allocator());
  const float one_f = 1, zero_f = 0;
  per_call("cublasGemmEx, bfloat16 1024 (called directly)", 2000,
           [&] {
             (void)cublasGemmEx(gpu.blas(), CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 1024, &one_f, b.raw_data(), CUDA_R_16BF,
                                1024, a.raw_data(), CUDA_R_16BF, 1024, &zero_f, c.raw_data(), CUDA_R_16BF, 1024,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
           },
           sync);
  per_call("cuda::gemm, bfloat16 1024 (cuBLASLt, its plan kept)", 2000,
           [&] { cuda::gemm(gpu, dtype::bfloat16, false, false, 1024, 1024, 1024, a.raw_data(), 1024, b.raw_data(), 1024, c.raw_data()); },
           sync);
  {
    graph g;
    std::vector<endpoint> inits;
    const output x = gpu_variable(g, dtype::bfloat16, {1024, 1024}, 0.5f, inits), y = gpu_variable(g, dtype::bfloat16, {1024, 1024}, 0.25f, inits);
    auto scope = g.device_scope("/device:GPU:0");
    const node& mm = g.op("MatMul", {x, y});
    const node& add = g.op("Add", {x, y});
    for (int inter : {-1, 0}) {
      session_options o = one_gpu();
      if (inter == 0) o.inter_op_threads = 0;
      session s(g, o);
      s.run(inits);
      const auto& sg = gpu_of_session(s);
      auto wait = [&] { sg.synchronize(); };
      per_call(inter == 0 ? "session step: one MatMul node, bfloat16 1024, inter_op_threads 0" : "session step: one MatMul node, bfloat16 1024",
               2000, [&] { s.run({mm}); }, wait);
      per_call(inter == 0 ? "session step: one Add node, bfloat16 1024^2, inter_op_threads 0" : "session step: one Add node, bfloat16 1024^2",
               2000, [&] { s.run({add}); }, wait);
    }
  }
  {
    graph g;
    const node& y = g.op("Add", {g.constant(tensor::scalar(1.0f)), g.constant(tensor::scalar(2.0f))});
    session_options o;
    o.constant_folding.max_bytes = 0;
    session s(g, o);
    per_call("session step: one scalar Add on the CPU", 20000, [&] { s.run({y}); }, none);
  }
}

// `bench_gpu --conv-algos`: for LeNet's two convolutions at batch 128, in float32 and
// bfloat16, each pass in NHWC and NCHW: the algorithm cuDNN's heuristics list first and
// cuDNN's timing of each algorithm (cudnnFind*), fastest first, with its workspace and math.
// A convolution's plan takes the heuristics' first that fits (WEFT_CUDNN_AUTOTUNE=1: the
// fastest timed one). Written after the last GPU run: not yet run on a GPU.
template <class Perf>
void print_algorithms(const char* what, const Perf* heuristic, int heuristics, const Perf* timed, int timings) {
  std::printf("    %-16s heuristics' first: %d;", what, heuristics > 0 ? static_cast<int>(heuristic[0].algo) : -1);
  std::printf(" timed:");
  for (int i = 0; i < timings; ++i)
    if (timed[i].status == CUDNN_STATUS_SUCCESS)
      std::printf(" %d %.4f ms (%zu B, math %d)", static_cast<int>(timed[i].algo), timed[i].time, timed[i].memory,
                  static_cast<int>(timed[i].mathType));
  std::printf("\n");
}

void print_conv_algorithms() {
  const cuda::gpu_device gpu(0, 1);
  struct conv_case {
    const char* name;
    shape x, f;
  };
  const std::vector<conv_case> convs{{"conv1 128x28x28x1 * 5x5x1x16", {128, 28, 28, 1}, {5, 5, 1, 16}},
                                     {"conv2 128x14x14x16 * 5x5x16x32", {128, 14, 14, 16}, {5, 5, 16, 32}}};
  ops::window_attrs same;
  same.same = true;
  const std::lock_guard lock(gpu.library_mutex());
  const cuda::current_device here(gpu.ordinal());
  for (dtype t : {dtype::float32, dtype::bfloat16})
    for (const conv_case& c : convs)
      for (bool nchw : {false, true}) {
        std::printf("%s, %s, %s\n", c.name, std::string(name(t)).c_str(), nchw ? "NCHW" : "NHWC");
        const cuda::conv_descriptors d(t, cuda::conv_geometry(c.x, c.f, same), nchw);
        int hn = 0, tn = 0;
        {
          cudnnConvolutionFwdAlgoPerf_t h[16], m[16];
          (void)cudnnGetConvolutionForwardAlgorithm_v7(gpu.dnn(), d.x_, d.f_, d.conv_, d.y_, 16, &hn, h);
          if (cudnnFindConvolutionForwardAlgorithm(gpu.dnn(), d.x_, d.f_, d.conv_, d.y_, 16, &tn, m) != CUDNN_STATUS_SUCCESS) tn = 0;
          print_algorithms("forward", h, hn, m, tn);
        }
        {
          cudnnConvolutionBwdDataAlgoPerf_t h[16], m[16];
          (void)cudnnGetConvolutionBackwardDataAlgorithm_v7(gpu.dnn(), d.f_, d.y_, d.conv_, d.x_, 16, &hn, h);
          if (cudnnFindConvolutionBackwardDataAlgorithm(gpu.dnn(), d.f_, d.y_, d.conv_, d.x_, 16, &tn, m) != CUDNN_STATUS_SUCCESS) tn = 0;
          print_algorithms("input gradient", h, hn, m, tn);
        }
        {
          cudnnConvolutionBwdFilterAlgoPerf_t h[16], m[16];
          (void)cudnnGetConvolutionBackwardFilterAlgorithm_v7(gpu.dnn(), d.x_, d.y_, d.conv_, d.f_, 16, &hn, h);
          if (cudnnFindConvolutionBackwardFilterAlgorithm(gpu.dnn(), d.x_, d.y_, d.conv_, d.f_, 16, &tn, m) != CUDNN_STATUS_SUCCESS) tn = 0;
          print_algorithms("filter gradient", h, hn, m, tn);
        }
      }
}

}  // namespace

BENCHMARK(BM_matmul_session)->ArgsProduct({{1024, 2048, 4096, 8192}, {0, 1}, {1, 0}})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_matmul_cublas)->ArgsProduct({{1024, 2048, 4096, 8192}, {0, 1}, {1, 0}})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_matmul_cublaslt)->ArgsProduct({{1024, 2048, 4096, 8192}, {0, 1}, {1, 0}})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_copy)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_fused_chain)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_unfused_chain)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_send_recv)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_memcpy_pinned)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_mlp_step)->Arg(128)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_mlp_step_unfused)->Arg(128)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lenet_step)->Arg(128)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lenet_step_unfused)->Arg(128)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_mlp_sgd_step)->Arg(128)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_mlp_sgd_step_unfused)->Arg(128)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_executor_overhead)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_gpu_loop)->UseRealTime()->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  const bool node_times = argc > 1 && std::string(argv[1]) == "--node-times";
  if (node_times) setenv("CUDA_LAUNCH_BLOCKING", "1", 1);  // before the CUDA runtime starts
  const auto a = cuda::gpus_available();
  if (a.count == 0) {
    std::printf("bench_gpu: no GPU here (%s); nothing to measure\n", a.why_none.c_str());
    return 0;
  }
  {
    const cuda::gpu_device probe(0, 1);
    std::printf("bench_gpu: %s (%s, compute capability %d.%d)\n", probe.name().c_str(), probe.properties().name,
                probe.properties().major, probe.properties().minor);
  }
  if (argc > 1 && std::string(argv[1]) == "--host-costs") {
    print_host_costs();
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--conv-algos") {
    print_conv_algorithms();
    return 0;
  }
  if (node_times) {
    print_node_times("MLP", *mlp_graph(128));
    print_node_times("LeNet", *lenet_graph(128));
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
