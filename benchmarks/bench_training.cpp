// Training steps, float32, SGD, sparse softmax cross-entropy averaged over the batch:
// - the MLP (784-512-512-10, ReLU, batch 128): weft's graph (add_gradients and
//   train::minimize through a session), the same model as typed expressions (the DSL's
//   train::minimize through a client_session) and as weft::layers (the same, through the
//   layers), against the same step written by hand with Eigen's
//   Tensor module on a ThreadPoolDevice (forward, backward and update, buffers allocated
//   once), against the step as an Eigen expert writes it with dense matrices and OpenMP
//   (eigen_mlp.cpp), and against libtorch with each way of sharing its threads with its BLAS;
// - the machine's limits in the same run: Eigen's sgemm and STREAM's triad (eigen_mlp.cpp), so
//   that each step is also a fraction of them (the MLP steps count GFLOP/s), and what writing
//   a buffer that the other CPU has read costs (BM_cross_core_write);
// - a LeNet (examples/mnist_cnn without dropout, batch 128): weft against libtorch;
// - weft's MLP in bfloat16 (all of it: BM_weft_mlp_step_bf16) and with Adam in float32 and in
//   mixed precision (BM_weft_mlp_step_adam: bfloat16 layers, float32 variables and Adam).
// Threads 1 and 2. Every side starts from the same weights and data and is checked against
// weft after one step before timing. The libtorch benchmarks are built when CMake finds
// libtorch (Debian's libtorch-dev); its code is in torch_models.cpp.
//
// `bench_training --peak-memory=NAME` (weft_mlp, eigen_mlp, torch_mlp, weft_lenet,
// torch_lenet) instead measures, in this process alone, how much resident memory 10 steps
// add to a model whose weights are already resident (VmHWM from /proc/self/status), and
// `bench_training --node-times=NAME[:THREADS]` (weft_mlp, weft_mlp_bf16, weft_mlp_adam, weft_mlp_mixed, weft_lenet) where a weft step's time goes,
// node by node, `--timeline=NAME:INTRA:INTER[:MIN_US]` when and on which thread each node of one
// step ran (and the call to run() from start to return), and `--step-times=NAME:INTRA:INTER`
// (weft_mlp, weft_lenet) how the times of single steps spread, traced and not, and
// `--compare-nodes=NAME:INTRA:INTER:INTRA2:INTER2` (weft_mlp, weft_lenet) each node's time in
// two sessions run in turn in one process (what the second thread gains, node by node).
#include <weft/dsl.hpp>
#include <weft/weft.hpp>

#include <benchmark/benchmark.h>
#include <malloc.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <sched.h>
#include <unistd.h>

#include "eigen_mlp.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#ifndef WEFT_BENCH_TORCH
#define WEFT_BENCH_TORCH 0
#endif
#if WEFT_BENCH_TORCH
#include "torch_models.hpp"
#endif

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

tensor glorot(shape s, std::int64_t fan_in, std::int64_t fan_out, unsigned seed) {
  return uniform(std::move(s), std::sqrt(6.0f / static_cast<float>(fan_in + fan_out)), seed);
}

// t (float32) as dtype `to`: float32 or bfloat16, rounded to nearest even.
tensor as_dtype(const tensor& t, dtype to) {
  if (to == dtype::float32) return t;
  tensor out(to, t.shape());
  const float* in = t.data<float>();
  bfloat16* o = out.data<bfloat16>();
  for (std::int64_t i = 0; i < t.num_elements(); ++i) o[i] = bfloat16(in[i]);
  return out;
}

// The elements of a float32 or bfloat16 tensor as floats.
std::vector<float> as_floats(const tensor& t) {
  if (t.dtype() == dtype::float32) return t.to_vector<float>();
  std::vector<float> out;
  for (const bfloat16& v : t.flat<bfloat16>()) out.push_back(static_cast<float>(v));
  return out;
}

tensor cycling_labels() {
  tensor labels(dtype::int32, shape{batch});
  for (std::int64_t i = 0; i < batch; ++i) labels.data<std::int32_t>()[i] = static_cast<std::int32_t>(i % classes);
  return labels;
}

// Weights and one batch: the MLP's w1, b1, w2, b2, w3, b3 and x [batch, 784].
struct mlp_problem {
  std::vector<tensor> params;
  tensor x = uniform({batch, in}, 1.0f, 7), labels = cycling_labels();
  mlp_problem() {
    const std::int64_t dims[3][2] = {{in, hidden}, {hidden, hidden}, {hidden, classes}};
    for (int l = 0; l < 3; ++l) {
      params.push_back(glorot({dims[l][0], dims[l][1]}, dims[l][0], dims[l][1], static_cast<unsigned>(l + 1)));
      params.push_back(uniform({dims[l][1]}, 0.01f, static_cast<unsigned>(l + 11)));
    }
  }
};

// The LeNet's filters f1 [5, 5, 1, 16], b1, f2 [5, 5, 16, 32], b2, dense w3 [1568, 128],
// b3, w4 [128, 10], b4, and images [batch, 28, 28, 1].
struct lenet_problem {
  static constexpr std::int64_t c1 = 16, c2 = 32, units = 128;
  std::vector<tensor> params;
  tensor x = uniform({batch, 28, 28, 1}, 1.0f, 7), labels = cycling_labels();
  lenet_problem() {
    params.push_back(glorot({5, 5, 1, c1}, 25, 25 * c1, 1));
    params.push_back(uniform({c1}, 0.01f, 11));
    params.push_back(glorot({5, 5, c1, c2}, 25 * c1, 25 * c2, 2));
    params.push_back(uniform({c2}, 0.01f, 12));
    params.push_back(glorot({49 * c2, units}, 49 * c2, units, 3));
    params.push_back(uniform({units}, 0.01f, 13));
    params.push_back(glorot({units, classes}, units, classes, 4));
    params.push_back(uniform({classes}, 0.01f, 14));
  }
};

// intra_op_threads = threads; inter_op_threads as given, by default one fewer (the thread
// that calls run works beside them: session_options' defaults on this machine).
session_options threads_options(int threads, int inter_op = -1) {
  session_options o;
  o.inter_op_threads = inter_op >= 0 ? inter_op : threads - 1;
  o.intra_op_threads = threads;
  return o;
}

// A weft model as its graph: variables assigned the problem's weights by `init`, the
// batch fed, SGD's step from train::minimize.
class weft_model {
 public:
  float step() {
    auto out = session_->run(feeds_, {loss_}, {train_->step});
    return as_floats(out.at(0)).at(0);
  }
  void step_only() { session_->run(feeds_, {}, {train_->step}); }
  // One traced step: each node's op and name with its time in ms.
  std::vector<node_stats> traced_nodes() {
    run_options options;
    options.trace = true;
    run_metadata metadata;
    session_->run(feeds_, {}, {train_->step}, options, &metadata);
    return std::move(metadata.stats.nodes);
  }
  std::vector<std::pair<std::string, double>> traced_step() {
    std::vector<std::pair<std::string, double>> times;
    for (const auto& n : traced_nodes())
      times.emplace_back(n.op + " " + n.node, static_cast<double>(n.end_ns - n.start_ns) / 1e6);
    return times;
  }
  void reset() { session_->run({*init_}); }
  std::vector<float> parameter(std::size_t i) { return as_floats(session_->run({}, {vars_.at(i)}).at(0)); }
  // A step that also fetches the loss, as the training examples' steps do.
  float step_with_loss() { return session_->run(feeds_, {loss_}, {train_->step}).at(0).scalar_value<float>(); }
  // Every variable's value (the examples' weight histograms read them so).
  std::vector<tensor> parameters() { return session_->run({}, std::vector<endpoint>(vars_.begin(), vars_.end())); }

 protected:
  graph g_;
  output x_, labels_, loss_;

  // The model in dtype `t` (float32 or bfloat16): the batch, weights and every op; with
  // `mixed`, the variables (and the optimizer) float32 and the layers in t, each variable
  // cast to t where it is read, as examples/mnist_mlp --bf16 1 (Keras's mixed precision).
  weft_model(const std::vector<tensor>& params, const tensor& x, const tensor& labels, dtype t = dtype::float32,
             bool mixed = false) {
    x_ = g_.placeholder(t, x.shape(), "x").out(0);
    labels_ = g_.placeholder(dtype::int32, {unknown_dim}, "labels").out(0);
    mixed_ = mixed && t != dtype::float32;
    const dtype vt = mixed ? dtype::float32 : t;
    for (std::size_t i = 0; i < params.size(); ++i) {
      auto v = g_.variable(vt, params[i].shape(), "param" + std::to_string(i)).out(0);
      inits_.push_back(g_.op("Assign", {v, g_.constant(as_dtype(params[i], vt))}).id());
      vars_.push_back(v);
      reads_.push_back(vt == t ? v : g_.op("Cast", {v}, {{"DstT", t}}).out(0));
    }
    feeds_ = {{x_, as_dtype(x, t)}, {labels_, labels}};
  }
  output var(std::size_t i) const { return reads_.at(i); }
  output dense(output h, std::size_t layer) {
    return g_.op("BiasAdd", {g_.op("MatMul", {h, var(2 * layer)}).out(0), var(2 * layer + 1)}).out(0);
  }
  output shape_of(std::vector<std::int64_t> dims) { return g_.constant(tensor::from_vector(dims)).out(0); }
  // Loss from the logits (in float32 where the layers are not), then SGD (or Adam, with
  // `adam`) and a session; weights assigned.
  void finish(output logits, const session_options& options, bool adam = false) {
    if (mixed_) logits = g_.op("Cast", {logits}, {{"DstT", dtype::float32}}).out(0);
    auto xent = g_.op("SparseSoftmaxCrossEntropyWithLogits", {logits, labels_}).out(0);
    loss_ = g_.op("Mean", {xent, g_.constant(tensor::of<std::int32_t>({1}, {0}))}).out(0);
    train_.emplace(adam ? train::minimize(g_, loss_, vars_, train::adam{0.001})
                        : train::minimize(g_, loss_, vars_, train::sgd{rate}));
    init_ = &g_.op("NoOp", {}, {}, node_options("init").after(inits_));
    session_ = std::make_unique<session>(g_, options);
    session_->run({*init_, train_->init});
  }

 private:
  std::vector<output> vars_, reads_;
  bool mixed_ = false;
  std::vector<int> inits_;
  feed_list feeds_;
  std::optional<train::training_op> train_;
  const node* init_ = nullptr;
  std::unique_ptr<session> session_;
};

// How an MLP trains: its layers' dtype, its variables' (float32 where `mixed`), its optimizer.
struct mlp_config {
  dtype layers = dtype::float32;
  bool mixed = false, adam = false;
};

struct weft_mlp : weft_model {
  weft_mlp(const mlp_problem& p, const session_options& options, dtype t = dtype::float32)
      : weft_mlp(p, options, mlp_config{.layers = t}) {}
  weft_mlp(const mlp_problem& p, const session_options& options, mlp_config c)
      : weft_model(p.params, p.x, p.labels, c.layers, c.mixed) {
    output h = x_;
    for (std::size_t l = 0; l < 3; ++l) {
      h = dense(h, l);
      if (l < 2) h = g_.op("Relu", {h}).out(0);
    }
    finish(h, options, c.adam);
  }
};

// The MLP in bfloat16, for --node-times and --timeline.
struct weft_mlp_bf16 final : weft_mlp {
  weft_mlp_bf16(const mlp_problem& p, const session_options& options) : weft_mlp(p, options, dtype::bfloat16) {}
};
// With Adam (as examples/mnist_mlp): in float32, and in mixed precision (bfloat16 layers,
// float32 variables and Adam: mnist_mlp --bf16 1).
struct weft_mlp_adam final : weft_mlp {
  weft_mlp_adam(const mlp_problem& p, const session_options& options) : weft_mlp(p, options, mlp_config{.adam = true}) {}
};
struct weft_mlp_mixed final : weft_mlp {
  weft_mlp_mixed(const mlp_problem& p, const session_options& options)
      : weft_mlp(p, options, mlp_config{.layers = dtype::bfloat16, .mixed = true, .adam = true}) {}
};

// What the typed MLPs share: the placeholders, a client_session, the step and the data.
class typed_mlp {
 public:
  void step_only() { s_.run(targets(*step_), feed(x_, xv_), feed(labels_, labels_v_)); }
  std::vector<float> first_weights() { return s_.untyped().run({}, {w1_}).at(0).to_vector<float>(); }

 protected:
  typed_mlp(const mlp_problem& p, const session_options& options)
      : s_(client_options{options, true}), xv_(tensor_of<float, 2>::from(p.x)), labels_v_(tensor_of<std::int32_t, 1>::from(p.labels)) {}

  placeholder_expr<float, static_shape<dyn, in>> x_ = placeholder<float>("x", dims<dyn, in>);
  placeholder_expr<std::int32_t, static_shape<dyn>> labels_ = placeholder<std::int32_t>("labels", dims<dyn>);
  client_session s_;
  std::unique_ptr<train::training_target> step_;
  output w1_;
  tensor_of<float, 2> xv_;
  tensor_of<std::int32_t, 1> labels_v_;
};

// The MLP as typed expressions: the DSL's ops and train::minimize, run by a client_session
// (fused elementwise backwards, typed feeds).
class dsl_mlp : public typed_mlp {
 public:
  dsl_mlp(const mlp_problem& p, const session_options& options) : typed_mlp(p, options) {
    auto param = [&](std::size_t i, auto shape_tag) {
      using S = decltype(shape_tag);
      return variable<float>("param" + std::to_string(i), S{}, tensor_of<float, S::rank>::from(p.params[i]));
    };
    auto w1 = param(0, dims<in, hidden>);
    auto b1 = param(1, dims<hidden>);
    auto w2 = param(2, dims<hidden, hidden>);
    auto b2 = param(3, dims<hidden>);
    auto w3 = param(4, dims<hidden, classes>);
    auto b3 = param(5, dims<classes>);
    auto h1 = relu(bias_add(matmul(x_, w1), b1));
    auto h2 = relu(bias_add(matmul(h1, w2), b2));
    auto logits = bias_add(matmul(h2, w3), b3);
    auto loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(logits, labels_));
    step_ = std::make_unique<train::training_target>(train::minimize(loss, train::sgd{rate}, w1, b1, w2, b2, w3, b3));
    w1_ = s_.lower(w1);
    s_.initialize(*step_);
  }
};

// The MLP written with weft::layers (dsl/layers.hpp): the same expressions as dsl_mlp
// through the layers, their variables then assigned the problem's weights.
class layers_mlp : public typed_mlp {
 public:
  layers_mlp(const mlp_problem& p, const session_options& options) : typed_mlp(p, options) {
    namespace L = weft::layers;
    L::dense<float, in, hidden> fc1("fc1");
    L::dense<float, hidden, hidden> fc2("fc2");
    L::dense<float, hidden, classes> fc3("fc3");
    auto net = L::sequential(fc1, L::relu, fc2, L::relu, fc3);
    auto loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(net(x_), labels_));
    step_ = std::make_unique<train::training_target>(train::minimize(loss, train::sgd{rate}, net.variables()));
    w1_ = s_.lower(fc1.kernel());
    s_.initialize(*step_);
    auto set = [&](const auto& v, std::size_t i) {
      using V = std::remove_cvref_t<decltype(v)>;
      s_.run(targets(assign(v, constant(tensor_of<float, shape_of<V>::rank>::from(p.params[i])))));
    };
    set(fc1.kernel(), 0), set(fc1.bias(), 1), set(fc2.kernel(), 2), set(fc2.bias(), 3), set(fc3.kernel(), 4), set(fc3.bias(), 5);
  }
};

// examples/mnist_cnn's network without dropout.
struct weft_lenet final : weft_model {
  weft_lenet(const lenet_problem& p, const session_options& options) : weft_model(p.params, p.x, p.labels) {
    const attr_map same{{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("SAME")}};
    const attr_map pool2{{"ksize", std::vector<std::int64_t>{1, 2, 2, 1}},
                         {"strides", std::vector<std::int64_t>{1, 2, 2, 1}},
                         {"padding", std::string("VALID")}};
    auto block = [&](output in, std::size_t layer) {
      auto z = g_.op("BiasAdd", {g_.op("Conv2D", {in, var(2 * layer)}, same).out(0), var(2 * layer + 1)}).out(0);
      return g_.op("MaxPool", {g_.op("Relu", {z}).out(0)}, pool2).out(0);
    };
    const output p2 = block(block(x_, 0), 1);
    const output flat = g_.op("Reshape", {p2, shape_of({-1, 49 * lenet_problem::c2})}).out(0);
    finish(dense(g_.op("Relu", {dense(flat, 2)}).out(0), 3), options);
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
  eigen_step(const mlp_problem& p, int threads) : pool(threads), dev(&pool, threads) {
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


double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  return worst;
}

void count_examples(benchmark::State& state) {
  state.counters["examples/s"] = benchmark::Counter(static_cast<double>(batch * state.iterations()), benchmark::Counter::kIsRate);
}

// The MLP step's floating-point operations: three products forward, the weights' gradients
// (as many), and the gradients of the second and third layers' inputs.
constexpr double mlp_step_flops =
    2.0 * batch * (2.0 * (in * hidden + hidden * hidden + hidden * classes) + hidden * hidden + hidden * classes);

void count_mlp(benchmark::State& state) {
  count_examples(state);
  state.counters["GFLOP/s"] =
      benchmark::Counter(mlp_step_flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

template <class Model>
void time_weft(benchmark::State& state, Model& m, void (*count)(benchmark::State&) = count_examples) {
  for (auto _ : state) m.step_only();
  count(state);
}

void BM_weft_mlp_step(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  mlp_problem p;
  weft_mlp m(p, threads_options(threads, static_cast<int>(state.range(1))));
  // Check: one step of weft equals one step by hand, then start again from the same weights.
  eigen_step e(p, threads);
  e.run();
  m.step();
  const auto w0 = m.parameter(0);
  if (worst_difference(w0, std::vector<float>(e.w[0].data(), e.w[0].data() + e.w[0].size())) > 1e-4)
    state.SkipWithError("weft's step differs from the hand-written one");
  m.reset();
  time_weft(state, m, count_mlp);
}

// The CPUs this thread may run on (its affinity mask), in order; empty where it cannot be read.
std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// Runs the calling thread on `cpus` only (all of them when given the whole mask).
void pin_to(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  sched_setaffinity(0, sizeof set, &set);
}

// The median of a benchmark's own timings (0 for none).
double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Where the host has placed the two CPUs, in brief (BM_cross_core_write in full): the median
// of `trials` times of writing 256 KiB on cpus[0] just after a thread on cpus[1] has read it,
// in us: tens where the two share no cache, a few where they do. The calling thread ends on
// all of `cpus` again.
double cross_core_write_probe(const std::vector<int>& cpus, int trials = 5) {
  std::vector<std::uint32_t> buffer(128 * 512, 1);
  std::vector<double> us;
  pin_to({cpus[0]});
  for (int i = 0; i < trials; ++i) {
    std::uint32_t sum = 0;
    std::thread([&] {
      pin_to({cpus[1]});
      for (std::uint32_t x : buffer) sum += x;
    }).join();
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t j = 0; j < buffer.size(); ++j) buffer[j] = sum + static_cast<std::uint32_t>(j);
    benchmark::ClobberMemory();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  pin_to(cpus);
  return median(us);
}

// What the second thread gives the MLP step, on a machine shared with others: the step on
// one thread and on two (2 intra-op, 1 inter-op), two sessions in one process, their steps
// alternated in runs of 10, each step timed. A moment of contention on the host (a core
// taken away for a while) then falls on both in about the same measure, where two separate
// benchmarks, minutes apart, compare a quiet moment with a loaded one. Counters: each
// session's median step (ms), and the second thread's gain: the median over neighbouring
// pairs of runs of (one-thread run's median / two-thread run's median), and the same of the
// runs' fastest steps.
//
// Where the process may run on two CPUs, a third kind of run (every third run) times the
// one-thread step with the calling thread pinned to each CPU in turn: `cpu_spread` is the
// slower CPU's median step over the faster's. A host that gives one of a VM's two CPUs less
// time (another guest on its core) slows the two-thread step, whose halves wait for the
// slower core, more than the one-thread step: a run with a spread well above 1 measured the
// host as much as the code (a spread near 1 does not make a run quiet: the host may load
// both cores alike). After each pinned run, cross_core_write_probe says where the host had
// the two CPUs then: `cross_core_write_us` is the probes' median, and the gain is also split
// by it, `gain_apart` over the rounds (a one-thread, a two-thread and a pinned run) whose
// probe took 20 us or more (the CPUs sharing no cache: 38 to 47 us on this project's VM)
// and `gain_near` over the others (3 to 11 us), with `apart_share` the share of rounds
// apart (a counter is left out when no round had its placement).
void BM_weft_mlp_second_thread(benchmark::State& state) {
  mlp_problem p;
  weft_mlp one(p, threads_options(1, 0)), two(p, threads_options(2, 1));
  for (int i = 0; i < 5; ++i) one.step_only(), two.step_only();
  const std::vector<int> cpus = allowed_cpus();
  const bool spread = cpus.size() == 2;
  const int kinds = spread ? 3 : 2;
  constexpr int run = 10;
  std::vector<double> times[2], medians[2], fastest[2], pinned[2], probes;
  std::vector<double> current;
  int i = 0;
  for (auto _ : state) {
    const int r = i / run, kind = r % kinds;
    if (kind == 2 && i % run == 0) pin_to({cpus[static_cast<std::size_t>(r / kinds % 2)]});
    const auto t0 = std::chrono::steady_clock::now();
    (kind == 1 ? two : one).step_only();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    current.push_back(ms);
    if (kind == 2) pinned[r / kinds % 2].push_back(ms);
    else times[kind].push_back(ms);
    if (++i % run == 0) {
      if (kind == 2) {
        state.PauseTiming();
        probes.push_back(cross_core_write_probe(cpus));  // and unpins
        state.ResumeTiming();
      }
      std::sort(current.begin(), current.end());
      if (kind < 2) medians[kind].push_back(current[run / 2]), fastest[kind].push_back(current.front());
      current.clear();
    }
  }
  if (kinds == 3 && i % run != 0 && (i / run) % kinds == 2) pin_to(cpus);
  const auto gain = [&](const std::vector<double>(&of)[2]) {
    std::vector<double> ratios;
    for (std::size_t r = 0; r < std::min(of[0].size(), of[1].size()); ++r) ratios.push_back(of[0][r] / of[1][r]);
    return median(ratios);
  };
  state.counters["1T_ms"] = median(times[0]);
  state.counters["2T_ms"] = median(times[1]);
  state.counters["gain"] = gain(medians);
  state.counters["gain_fastest"] = gain(fastest);
  if (spread && !pinned[0].empty() && !pinned[1].empty()) {
    const double a = median(pinned[0]), b = median(pinned[1]);
    state.counters["cpu_spread"] = std::max(a, b) / std::min(a, b);
  }
  if (!probes.empty()) {
    std::vector<double> near, apart;  // the rounds' gains by placement
    for (std::size_t r = 0; r < std::min({medians[0].size(), medians[1].size(), probes.size()}); ++r)
      (probes[r] >= 20 ? apart : near).push_back(medians[0][r] / medians[1][r]);
    state.counters["cross_core_write_us"] = median(probes);
    if (!near.empty()) state.counters["gain_near"] = median(near);
    if (!apart.empty()) state.counters["gain_apart"] = median(apart);
    if (!near.empty() || !apart.empty())
      state.counters["apart_share"] = static_cast<double>(apart.size()) / static_cast<double>(near.size() + apart.size());
  }
}

// What handing a buffer from one CPU to the other costs on this host: a 256 KiB buffer (one
// of the MLP step's activations or gradients, 128 x 512 floats) is read by a thread on the
// second CPU (`remote_read_us`: the lines the first CPU has just written), then written by
// this thread on the first (`shared_write_us`, the median over the iterations), and written
// again at once (`own_write_us`: its lines this core's alone). A split kernel's output that
// both cores read in the step (a product packs its left operand whole on each core) is
// written so in the next step. Where the two CPUs share no cache, each line the other core
// holds must be invalidated before this one writes it: on this VM, 38 to 47 us a buffer
// against 2.5 to 3.2 alone at times of 2026-12-03, 6 to 11 us at others (the host had moved
// the VM's CPUs), so the two-thread step's time, and the second thread's gain, depend on
// where the host puts the CPUs as well as on the code (docs/benchmarks.md, session 65).
// Where the CPU has CLFLUSHOPT (x86-64), the reader then reads it again and evicts every
// line from every cache (`flush_read_us`: read and flush), and the writer writes it
// (`flushed_write_us`): what a buffer's last reader could save its next writer
// (docs/benchmarks.md, session 66). The reading thread spins between its turns.
void BM_cross_core_write(benchmark::State& state) {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2) return state.SkipWithError("needs two CPUs to run on");
  constexpr std::size_t n = 128 * 512;
  // The reader reads; then, where the CPU has CLFLUSHOPT (CPUID 7, EBX bit 23), reads and flushes.
  int kinds = 1;
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx >> 23 & 1u)) kinds = 2;
#endif
  std::vector<std::uint32_t> buffer(n, 1);
  std::atomic<std::int64_t> turn{0};  // odd: the reader's turn; -1: stop
  std::atomic<int> flush{0};          // whether the reader flushes this turn (set before the turn)
  std::atomic<std::uint32_t> sink{0};
  std::vector<double> read[2];
  std::thread reader([&] {
    pin_to({cpus[1]});
    for (std::int64_t seen = 0;;) {
      std::int64_t t;
      while ((t = turn.load(std::memory_order_acquire)) == seen) intra_op_detail::cpu_relax();
      if (t < 0) return;
      const int kind = flush.load(std::memory_order_relaxed);
      const auto t0 = std::chrono::steady_clock::now();
      std::uint32_t sum = 0;
      for (std::uint32_t x : buffer) sum += x;
#if defined(__x86_64__)
      if (kind == 1) {
        for (std::size_t i = 0; i < n; i += 64 / sizeof(std::uint32_t))
          asm volatile("clflushopt %0" : "+m"(buffer[i]));
        asm volatile("sfence" ::: "memory");
      }
#endif
      read[kind].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      sink.fetch_add(sum, std::memory_order_relaxed);
      seen = t + 1;
      turn.store(seen, std::memory_order_release);
    }
  });
  pin_to({cpus[0]});
  const auto write = [&](std::uint32_t v) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < n; ++i) buffer[i] = v + static_cast<std::uint32_t>(i);
    benchmark::ClobberMemory();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> shared[2], own;
  std::int64_t t = 0;
  for (auto _ : state) {
    for (int kind = 0; kind < kinds; ++kind) {
      flush.store(kind, std::memory_order_relaxed);
      turn.store(++t, std::memory_order_release);
      while (turn.load(std::memory_order_acquire) != t + 1) intra_op_detail::cpu_relax();
      ++t;
      shared[kind].push_back(write(static_cast<std::uint32_t>(t)));
      if (kind == 0) own.push_back(write(static_cast<std::uint32_t>(t) + 1));
    }
  }
  turn.store(-1, std::memory_order_release);
  reader.join();
  pin_to(cpus);
  benchmark::DoNotOptimize(sink.load());
  state.counters["remote_read_us"] = median(read[0]);
  state.counters["shared_write_us"] = median(shared[0]);
  state.counters["own_write_us"] = median(own);
  if (kinds == 2) {
    state.counters["flush_read_us"] = median(read[1]);
    state.counters["flushed_write_us"] = median(shared[1]);
  }
}

// The same step with session_options::fuse_matmul off: the bias and ReLU as nodes of their own, each weight's gradient
// written by its MatMul and read back by ApplyGradientDescent, as before the rewrite
// (graph/passes/fuse_matmul.hpp), for the ratio in one run.
void BM_weft_mlp_step_unfused(benchmark::State& state) {
  session_options options = threads_options(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  options.fuse_matmul = false;
  mlp_problem p;
  weft_mlp m(p, options);
  time_weft(state, m, count_mlp);
}

// Summaries as examples/mnist_mlp writes them with --logdir (issue 30's overhead figure):
// every step adds the loss and the learning rate to a metrics_logger, which writes their
// means to the event file every 100 steps; after each epoch (469 steps of batch 128 over
// MNIST's 60,000 images) the weights' histograms (669,706 values) and a flush. Argument 2
// is 1 to write the event file, 0 for a metrics_logger with no writer (the examples without
// --logdir, whose progress bar reads the same means). Both fetch the loss every step, as the
// examples do. 938 iterations: two epochs' histograms in each measurement.
constexpr std::int64_t mnist_steps_per_epoch = (60000 + batch - 1) / batch;

std::filesystem::path bench_logdir() {
  return std::filesystem::temp_directory_path() / ("weft_bench_summaries_" + std::to_string(::getpid()));
}

void BM_weft_mlp_step_logged(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const bool write = state.range(2) != 0;
  mlp_problem p;
  weft_mlp m(p, threads_options(threads, static_cast<int>(state.range(1))));
  const auto dir = bench_logdir();
  std::optional<summary_writer> writer;
  if (write) writer.emplace(dir);
  metrics_logger metrics(writer ? &*writer : nullptr, 100);
  std::int64_t step = 0;
  for (auto _ : state) {
    const float loss = m.step_with_loss();
    metrics.add("loss", loss, static_cast<double>(batch));
    metrics.add("learning_rate", rate);
    metrics.end_step(++step);
    if (writer && step % mnist_steps_per_epoch == 0) {
      const auto values = m.parameters();
      for (std::size_t i = 0; i < values.size(); ++i) writer->histogram("param" + std::to_string(i), values[i], step);
      writer->flush();
    }
  }
  count_mlp(state);
  writer.reset();
  std::filesystem::remove_all(dir);
}

// The two parts alone: one step's metrics (arg 0; the scalars written every 100th call) and
// one epoch's histograms of the MLP's weights and the flush (arg 1).
void BM_mlp_summaries(benchmark::State& state) {
  mlp_problem p;
  const auto dir = bench_logdir();
  {
    summary_writer writer(dir);
    if (state.range(0) == 0) {
      metrics_logger metrics(&writer, 100);
      std::int64_t step = 0;
      for (auto _ : state) {
        metrics.add("loss", 2.3, static_cast<double>(batch));
        metrics.add("learning_rate", rate);
        metrics.end_step(++step);
      }
    } else {
      std::int64_t step = 0;
      for (auto _ : state) {
        ++step;
        for (std::size_t i = 0; i < p.params.size(); ++i) writer.histogram("param" + std::to_string(i), p.params[i], step);
        writer.flush();
      }
    }
  }
  std::filesystem::remove_all(dir);
}

// The MLP in bfloat16 (the batch, weights, activations and gradients; products and most
// kernels compute in float and round their outputs). Checked against the float32 step: the
// loss within bfloat16's rounding of it, the first layer's weights within 2^-8 of their size.
void BM_weft_mlp_step_bf16(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const session_options options = threads_options(threads, static_cast<int>(state.range(1)));
  mlp_problem p;
  weft_mlp m(p, options, dtype::bfloat16);
  {
    weft_mlp reference(p, options);
    const float loss = reference.step(), loss_bf16 = m.step();
    const auto w = reference.parameter(0), w_bf16 = m.parameter(0);
    double worst = 0;
    for (std::size_t i = 0; i < w.size(); ++i)
      worst = std::max(worst, std::abs(double(w[i]) - double(w_bf16[i])) / (std::abs(double(w[i])) + 1e-3));
    if (std::abs(loss - loss_bf16) > 0.02f * std::abs(loss) || worst > 1.0 / 128)
      state.SkipWithError("the bfloat16 step differs from the float32 one by more than bfloat16's precision");
    m.reset();
  }
  time_weft(state, m, count_mlp);
}

// The MLP with Adam (as examples/mnist_mlp), in float32 (arg 2: 0) or in mixed precision
// (1: bfloat16 layers, float32 variables and Adam: mnist_mlp --bf16 1). The mixed step's
// first loss is checked against float32's: within bfloat16's rounding of it.
void BM_weft_mlp_step_adam(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const session_options options = threads_options(threads, static_cast<int>(state.range(1)));
  const bool mixed = state.range(2) != 0;
  mlp_problem p;
  weft_mlp m(p, options, mlp_config{.layers = mixed ? dtype::bfloat16 : dtype::float32, .mixed = mixed, .adam = true});
  if (mixed) {
    weft_mlp reference(p, options, mlp_config{.adam = true});
    const float loss = reference.step(), loss_mixed = m.step();
    if (std::abs(loss - loss_mixed) > 0.02f * std::abs(loss))
      state.SkipWithError("the mixed-precision step's loss differs from float32's by more than bfloat16's precision");
    m.reset();
  }
  time_weft(state, m, count_mlp);
}

// A typed MLP (Model: dsl_mlp or layers_mlp), checked first: one of its steps equals one
// step of the graph built op by op.
template <class Model>
void time_typed_mlp(benchmark::State& state, const char* differs) {
  const int threads = static_cast<int>(state.range(0));
  const session_options options = threads_options(threads, static_cast<int>(state.range(1)));
  mlp_problem p;
  {
    weft_mlp reference(p, options);
    Model checked(p, options);
    reference.step();
    checked.step_only();
    if (worst_difference(reference.parameter(0), checked.first_weights()) > 1e-5) state.SkipWithError(differs);
  }
  Model m(p, options);
  time_weft(state, m, count_mlp);
}

void BM_weft_dsl_mlp_step(benchmark::State& state) { time_typed_mlp<dsl_mlp>(state, "the typed step differs from the graph's"); }
void BM_weft_layers_mlp_step(benchmark::State& state) {
  time_typed_mlp<layers_mlp>(state, "the layers' step differs from the graph's");
}

void BM_eigen_mlp_step(benchmark::State& state) {
  mlp_problem p;
  eigen_step e(p, static_cast<int>(state.range(0)));
  for (auto _ : state) {
    e.run();
    benchmark::DoNotOptimize(e.loss);
  }
  count_mlp(state);
}

std::unique_ptr<eigen_bench::mlp_step> eigen_dense_mlp(const mlp_problem& p) {
  std::vector<const float*> params;
  for (const tensor& t : p.params) params.push_back(t.data<float>());
  return std::make_unique<eigen_bench::mlp_step>(params, in, hidden, classes, p.x.data<float>(),
                                                 p.labels.data<std::int32_t>(), batch, rate);
}

// The expert's step: checked against one step of weft's graph (loss and first weights).
void BM_eigen_dense_mlp_step(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  mlp_problem p;
  {
    weft_mlp reference(p, threads_options(threads));
    eigen_bench::set_threads(threads);
    auto checked = eigen_dense_mlp(p);
    const float loss_weft = reference.step(), loss_eigen = checked->run();
    if (std::abs(loss_weft - loss_eigen) > 1e-4f || worst_difference(reference.parameter(0), checked->parameter(0)) > 1e-4)
      state.SkipWithError("the dense Eigen step differs from weft's");
  }
  eigen_bench::set_threads(threads);
  auto e = eigen_dense_mlp(p);
  for (auto _ : state) benchmark::DoNotOptimize(e->run());
  count_mlp(state);
}

void BM_weft_lenet_step(benchmark::State& state) {
  lenet_problem p;
  weft_lenet m(p, threads_options(static_cast<int>(state.range(0)), static_cast<int>(state.range(1))));
  time_weft(state, m);
}

#if WEFT_BENCH_TORCH
std::vector<torch_bench::param> torch_params(const std::vector<tensor>& params) {
  std::vector<torch_bench::param> out;
  for (const tensor& t : params) out.push_back({t.shape().dims(), t.data<float>()});
  return out;
}

std::unique_ptr<torch_bench::model> torch_mlp(const mlp_problem& p) {
  return torch_bench::make_mlp(torch_params(p.params), p.x.data<float>(), p.labels.data<std::int32_t>(), batch, rate);
}

std::unique_ptr<torch_bench::model> torch_lenet(const lenet_problem& p) {
  return torch_bench::make_lenet(torch_params(p.params), p.x.data<float>(), p.labels.data<std::int32_t>(), batch, rate);
}

// How libtorch and its BLAS share the threads: libtorch's intra-op threads (OpenMP) run the
// elementwise ops and split some products; OpenBLAS's own threads split each sgemm call.
enum class torch_threads {
  torch_only = 0,  // torch::set_num_threads(n), OpenBLAS on one thread
  blas_only = 1,   // torch::set_num_threads(1), OpenBLAS on n threads
  defaults = 2,    // neither set: what a libtorch program gets (both use every core)
};

void set_torch_threads(benchmark::State& state, int threads, torch_threads how) {
  switch (how) {
    case torch_threads::torch_only:
      torch_bench::set_threads(threads);
      if (!torch_bench::set_blas_threads(1) && threads > 1) state.SkipWithError("the BLAS is not OpenBLAS");
      break;
    case torch_threads::blas_only:
      torch_bench::set_threads(1);
      if (!torch_bench::set_blas_threads(threads) && threads > 1) state.SkipWithError("the BLAS is not OpenBLAS");
      break;
    case torch_threads::defaults:
      torch_bench::set_threads(torch_bench::default_threads());
      torch_bench::set_blas_threads(0);
      break;
  }
}

// Checks libtorch's first step against weft's (loss and first weights), then times it.
// Arguments: threads, and how libtorch and its BLAS share them (torch_threads).
template <class Problem, class WeftModel>
void time_torch(benchmark::State& state, std::unique_ptr<torch_bench::model> (*make)(const Problem&),
                void (*count)(benchmark::State&)) {
  const int threads = static_cast<int>(state.range(0));
  set_torch_threads(state, threads, static_cast<torch_threads>(state.range(1)));
  Problem p;
  {
    WeftModel reference(p, threads_options(threads));
    auto checked = make(p);
    const float loss_weft = reference.step(), loss_torch = checked->step();
    if (std::abs(loss_weft - loss_torch) > 1e-4f || worst_difference(reference.parameter(0), checked->parameter(0)) > 1e-4)
      state.SkipWithError("libtorch's step differs from weft's");
  }
  auto m = make(p);
  for (auto _ : state) benchmark::DoNotOptimize(m->step());
  count(state);
}

void BM_torch_mlp_step(benchmark::State& state) { time_torch<mlp_problem, weft_mlp>(state, torch_mlp, count_mlp); }
void BM_torch_lenet_step(benchmark::State& state) {
  time_torch<lenet_problem, weft_lenet>(state, torch_lenet, count_examples);
}
#endif

// --peak-memory=NAME: a model built and stepped twice first (code paged in, thread pools
// started) and thrown away with its memory given back; then a second one whose resident
// growth over 10 steps is measured.
long status_kib(const char* key) {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key));
  return -1;
}

using step_fn = std::function<void()>;

// The models --peak-memory knows, each built on one thread and returned as its step.
template <class Problem, class Model>
step_fn weft_stepper() {
  auto p = std::make_shared<Problem>();
  auto m = std::make_shared<Model>(*p, threads_options(1));
  return [p, m] { m->step_only(); };
}

std::function<step_fn()> peak_model(const std::string& name) {
  if (name == "weft_mlp") return weft_stepper<mlp_problem, weft_mlp>;
  if (name == "weft_lenet") return weft_stepper<lenet_problem, weft_lenet>;
  if (name == "eigen_mlp")
    return [] {
      auto e = std::make_shared<eigen_step>(mlp_problem(), 1);
      return step_fn([e] { e->run(); });
    };
#if WEFT_BENCH_TORCH
  auto torch_stepper = [](auto make, auto problem) {
    return [make, problem] {
      torch_bench::set_threads(1);
      auto p = std::make_shared<decltype(problem)>();
      std::shared_ptr<torch_bench::model> m = make(*p);
      return step_fn([p, m] { m->step(); });
    };
  };
  if (name == "torch_mlp") return torch_stepper(torch_mlp, mlp_problem());
  if (name == "torch_lenet") return torch_stepper(torch_lenet, lenet_problem());
#endif
  return {};
}

int measure_peak(const std::string& name) {
  const auto make = peak_model(name);
  if (!make) {
    std::fprintf(stderr, "bench_training: --peak-memory: unknown model '%s' (weft_mlp, eigen_mlp, weft_lenet%s)\n",
                 name.c_str(), WEFT_BENCH_TORCH ? ", torch_mlp, torch_lenet" : "; built without libtorch");
    return 2;
  }
  {
    const step_fn warm = make();
    warm();
    warm();
  }
  cpu_allocator::global().release_cached();
  malloc_trim(0);
  const step_fn step = make();
  cpu_allocator::global().reset_peak();
  const std::size_t allocated = cpu_allocator::global().bytes_in_use();
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM starts again from VmRSS
  const long before = status_kib("VmRSS:");
  for (int i = 0; i < 10; ++i) step();
  const long peak = status_kib("VmHWM:");
  std::printf("%s: %.1f MiB resident before the steps; peak over 10 steps %+.1f MiB resident", name.c_str(),
              static_cast<double>(before) / 1024.0, static_cast<double>(peak - before) / 1024.0);
  if (name.rfind("weft", 0) == 0)
    std::printf(", %+.1f MiB in use in weft's allocator at most, %.1f MiB kept in its cache of freed buffers after",
                static_cast<double>(cpu_allocator::global().peak_bytes_in_use() - allocated) / (1024.0 * 1024.0),
                static_cast<double>(cpu_allocator::global().bytes_cached()) / (1024.0 * 1024.0));
  std::printf("\n");
  return 0;
}

// --node-times=NAME[:THREADS] (weft_mlp, weft_mlp_bf16, weft_mlp_adam, weft_mlp_mixed, weft_lenet): each node's mean time over 20 traced
// steps (after 5 untimed ones), the slowest first, their sum, and the MatMul nodes' sum (for
// the MLP, whose floating-point work is all in its products, also their GFLOP/s). The nodes run one at a
// time, each on THREADS intra-op threads (1 unless given).
template <class Problem, class Model>
void print_node_times(int threads, double gemm_flops = 0) {
  Problem p;
  Model m(p, threads_options(threads, 0));
  for (int i = 0; i < 5; ++i) m.step_only();
  constexpr int steps = 20;
  std::map<std::string, double> mean;
  for (int i = 0; i < steps; ++i)
    for (const auto& [node, ms] : m.traced_step()) mean[node] += ms / steps;
  std::vector<std::pair<double, std::string>> sorted;
  double total = 0;
  for (const auto& [node, ms] : mean) sorted.emplace_back(ms, node), total += ms;
  std::sort(sorted.rbegin(), sorted.rend());
  double matmul = 0;
  for (const auto& [ms, node] : sorted) {
    std::printf("%8.3f ms  %s\n", ms, node.c_str());
    // Products: MatMul, and a weight's update folded into its gradient's product (2mn more flops, not counted).
    if (node.rfind("MatMul ", 0) == 0 || node.rfind("_FusedMatMul", 0) == 0) matmul += ms;
  }
  std::printf("%8.3f ms  in all\n%8.3f ms  in MatMul nodes (and updates folded into them)", total, matmul);
  if (gemm_flops > 0) std::printf(", %.1f GFLOP/s", gemm_flops / (matmul * 1e6));
  std::printf("\n");
}

// --timeline=NAME:INTRA:INTER[:MIN_US]: the nodes of the fastest of 20 traced steps (after 5
// untimed ones) that take MIN_US (5 by default; 0: every node) or more, by start time: start
// and end (us since the step started), the thread, the node; then each thread's busy time
// and the step's span.
template <class Problem, class Model>
void print_timeline(int intra, int inter, double min_us) {
  Problem p;
  Model m(p, threads_options(intra, inter));
  for (int i = 0; i < 5; ++i) m.step_only();
  std::vector<node_stats> best;
  std::int64_t best_span = 0, best_call = 0;
  for (int i = 0; i < 20; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto nodes = m.traced_nodes();
    const std::int64_t call = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
    std::int64_t span = 0;
    for (const auto& n : nodes) span = std::max(span, n.end_ns);
    if (best.empty() || span < best_span) best = std::move(nodes), best_span = span, best_call = call;
  }
  std::sort(best.begin(), best.end(), [](const node_stats& a, const node_stats& b) { return a.start_ns < b.start_ns; });
  std::map<int, double> busy;
  for (const auto& n : best) {
    const double us = static_cast<double>(n.end_ns - n.start_ns) / 1e3;
    busy[n.thread] += us;
    if (us >= min_us)
      std::printf("%8.1f %8.1f  thread %d  %s %s\n", static_cast<double>(n.start_ns) / 1e3, static_cast<double>(n.end_ns) / 1e3,
                  n.thread, n.op.c_str(), n.node.c_str());
  }
  for (const auto& [thread, us] : busy) std::printf("thread %d: %.1f us in nodes\n", thread, us);
  std::printf("step: %.1f us from its start to its last node's end, %.1f us from the call to run() to its return\n",
              static_cast<double>(best_span) / 1e3, static_cast<double>(best_call) / 1e3);
}

// --step-times=NAME:INTRA:INTER: how the times of single steps spread: 2,000 plain steps and
// 2,000 traced ones (run_options::trace), in turn, after 20 untimed ones, each timed alone
// from the call to run() to its return; for each kind the minimum, the 10th, 25th, 50th, 75th,
// 90th and 99th centiles, the maximum and the mean. A benchmark's figure is a mean over steps;
// this says whether a slow mean is every step a little slow or a few steps much slower, and
// what tracing (--node-times, --timeline) costs a step.
template <class Problem, class Model>
void print_step_times(int intra, int inter) {
  Problem p;
  Model m(p, threads_options(intra, inter));
  for (int i = 0; i < 20; ++i) m.step_only();
  constexpr int steps = 2000;
  std::vector<double> plain(steps), traced(steps);
  for (int i = 0; i < steps; ++i)
    for (bool trace : {false, true}) {
      const auto start = std::chrono::steady_clock::now();
      if (trace) m.traced_nodes();
      else m.step_only();
      (trace ? traced : plain)[i] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    }
  for (auto* us : {&plain, &traced}) {
    double mean = 0;
    for (double t : *us) mean += t / steps;
    std::sort(us->begin(), us->end());
    auto at = [&](double q) { return (*us)[static_cast<std::size_t>(q * (steps - 1))]; };
    std::printf("%d %s steps, us: min %.1f  q10 %.1f  q25 %.1f  q50 %.1f  q75 %.1f  q90 %.1f  q99 %.1f  max %.1f  mean %.1f\n",
                steps, us == &plain ? "plain" : "traced", us->front(), at(0.1), at(0.25), at(0.5), at(0.75), at(0.9), at(0.99),
                us->back(), mean);
  }
}

// --compare-nodes=NAME:INTRA:INTER:INTRA2:INTER2: two sessions of one model, each node's time
// in each, in one process: runs of 10 traced steps of the first and of the second, in turn,
// 40 runs each (after 20 untimed steps of each), so that both see the same load on this noisy
// host; the order of the two runs swaps from one pair to the next (of two sessions with two
// threads each, the one that ran second in every pair ran 3 to 5 % faster, even with the
// same threads; with one thread each, level). Prints the median of each node's times that
// take 1 us or more in either (slowest in the first first), the ratio first / second (a
// node's gain from the second's threads), the sums of the nodes' medians, products (MatMul
// and the products folded with their output pass or update) apart, and the median step from
// the call to run() to its return.
template <class Problem, class Model>
void print_compare_nodes(int intra1, int inter1, int intra2, int inter2) {
  Problem p;
  Model first(p, threads_options(intra1, inter1)), second(p, threads_options(intra2, inter2));
  for (int i = 0; i < 20; ++i) first.step_only(), second.step_only();
  std::map<std::string, std::vector<double>> us[2];  // node -> its times in the runs, us
  std::vector<double> step_us[2];
  for (int run = 0; run < 40; ++run)
    for (int turn = 0; turn < 2; ++turn)
      for (int i = 0, w = turn ^ (run & 1); i < 10; ++i) {
        const auto start = std::chrono::steady_clock::now();
        const auto nodes = (w == 0 ? first : second).traced_step();
        step_us[w].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
        for (const auto& [node, ms] : nodes) us[w][node].push_back(ms * 1e3);
      }
  // A node's median in the second session, 0 where it did not run there.
  auto in_second = [&](const std::string& node) {
    const auto it = us[1].find(node);
    return it == us[1].end() ? 0.0 : median(it->second);
  };
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [node, v] : us[0]) rows.emplace_back(median(v), node);
  for (const auto& [node, v] : us[1])
    if (!us[0].count(node)) rows.emplace_back(0.0, node);
  std::sort(rows.rbegin(), rows.rend());
  double sum[2][2] = {};  // [session][product?]
  std::printf("%10s %10s %7s  node (us: medians of %d:%d and %d:%d)\n", "first", "second", "ratio", intra1, inter1, intra2, inter2);
  for (const auto& [a, node] : rows) {
    const double b = in_second(node);
    const bool product = node.rfind("MatMul ", 0) == 0 || node.rfind("_FusedMatMul", 0) == 0;
    sum[0][product] += a, sum[1][product] += b;
    if (a >= 1 || b >= 1) std::printf("%10.1f %10.1f %7.2f  %s\n", a, b, b > 0 ? a / b : 0.0, node.c_str());
  }
  const double all[2] = {sum[0][0] + sum[0][1], sum[1][0] + sum[1][1]};
  std::printf("%10.1f %10.1f %7.2f  products\n", sum[0][1], sum[1][1], sum[0][1] / sum[1][1]);
  std::printf("%10.1f %10.1f %7.2f  other nodes\n", sum[0][0], sum[1][0], sum[0][0] / sum[1][0]);
  std::printf("%10.1f %10.1f %7.2f  all nodes\n", all[0], all[1], all[0] / all[1]);
  std::printf("%10.1f %10.1f %7.2f  step, from the call to run() to its return\n", median(step_us[0]), median(step_us[1]),
              median(step_us[0]) / median(step_us[1]));
}

int compare_nodes(const std::string& spec) {
  char n[32] = {};
  int intra1 = 0, inter1 = -1, intra2 = 0, inter2 = -1;
  if (std::sscanf(spec.c_str(), "%31[^:]:%d:%d:%d:%d", n, &intra1, &inter1, &intra2, &inter2) != 5 || intra1 < 1 ||
      inter1 < 0 || intra2 < 1 || inter2 < 0) {
    std::fprintf(stderr, "bench_training: --compare-nodes=NAME:INTRA:INTER:INTRA2:INTER2, e.g. weft_mlp:1:0:2:1\n");
    return 2;
  }
  const std::string name = n;
  if (name == "weft_mlp") return print_compare_nodes<mlp_problem, weft_mlp>(intra1, inter1, intra2, inter2), 0;
  if (name == "weft_lenet") return print_compare_nodes<lenet_problem, weft_lenet>(intra1, inter1, intra2, inter2), 0;
  std::fprintf(stderr, "bench_training: --compare-nodes: unknown model '%s' (weft_mlp, weft_lenet)\n", name.c_str());
  return 2;
}

// NAME:INTRA:INTER of --timeline and --step-times: false (after saying so) when it is not one.
bool parse_model_threads(const std::string& spec, const char* flag, std::string& name, int& intra, int& inter) {
  char n[32] = {};
  if (std::sscanf(spec.c_str(), "%31[^:]:%d:%d", n, &intra, &inter) != 3 || intra < 1 || inter < 0) {
    std::fprintf(stderr, "bench_training: %s=NAME:INTRA:INTER, e.g. weft_mlp:2:1\n", flag);
    return false;
  }
  name = n;
  return true;
}

int step_times(const std::string& spec) {
  std::string name;
  int intra = 0, inter = -1;
  if (!parse_model_threads(spec, "--step-times", name, intra, inter)) return 2;
  if (name == "weft_mlp") return print_step_times<mlp_problem, weft_mlp>(intra, inter), 0;
  if (name == "weft_lenet") return print_step_times<lenet_problem, weft_lenet>(intra, inter), 0;
  std::fprintf(stderr, "bench_training: --step-times: unknown model '%s' (weft_mlp, weft_lenet)\n", name.c_str());
  return 2;
}

int timeline(const std::string& spec) {
  std::string name;
  int intra = 0, inter = -1;
  double min_us = 5;
  std::string threads = spec;
  if (std::count(spec.begin(), spec.end(), ':') == 3) {  // a fourth field: the shortest node shown, in us
    const std::size_t colon = spec.rfind(':');
    threads = spec.substr(0, colon);
    const char* first = spec.c_str() + colon + 1;
    char* end = nullptr;
    min_us = std::strtod(first, &end);
    if (end == first || *end != '\0' || !(min_us >= 0)) {
      std::fprintf(stderr, "bench_training: --timeline=NAME:INTRA:INTER[:MIN_US], MIN_US a number >= 0, e.g. weft_mlp:2:1:0\n");
      return 2;
    }
  }
  if (!parse_model_threads(threads, "--timeline", name, intra, inter))
    return 2;
  if (name == "weft_mlp") return print_timeline<mlp_problem, weft_mlp>(intra, inter, min_us), 0;
  if (name == "weft_mlp_bf16") return print_timeline<mlp_problem, weft_mlp_bf16>(intra, inter, min_us), 0;
  if (name == "weft_mlp_adam") return print_timeline<mlp_problem, weft_mlp_adam>(intra, inter, min_us), 0;
  if (name == "weft_mlp_mixed") return print_timeline<mlp_problem, weft_mlp_mixed>(intra, inter, min_us), 0;
  if (name == "weft_lenet") return print_timeline<lenet_problem, weft_lenet>(intra, inter, min_us), 0;
  std::fprintf(stderr, "bench_training: --timeline: unknown model '%s' (weft_mlp, weft_mlp_bf16, weft_mlp_adam, weft_mlp_mixed, weft_lenet)\n", name.c_str());
  return 2;
}

int node_times(std::string name) {
  int threads = 1;
  if (const auto colon = name.find(':'); colon != std::string::npos) {
    threads = std::atoi(name.c_str() + colon + 1);
    name.resize(colon);
    if (threads < 1) {
      std::fprintf(stderr, "bench_training: --node-times=NAME:THREADS takes a positive number of threads\n");
      return 2;
    }
  }
  if (name == "weft_mlp") return print_node_times<mlp_problem, weft_mlp>(threads, mlp_step_flops), 0;
  if (name == "weft_mlp_bf16") return print_node_times<mlp_problem, weft_mlp_bf16>(threads, mlp_step_flops), 0;
  if (name == "weft_mlp_adam") return print_node_times<mlp_problem, weft_mlp_adam>(threads, mlp_step_flops), 0;
  if (name == "weft_mlp_mixed") return print_node_times<mlp_problem, weft_mlp_mixed>(threads, mlp_step_flops), 0;
  if (name == "weft_lenet") return print_node_times<lenet_problem, weft_lenet>(threads), 0;
  std::fprintf(stderr, "bench_training: --node-times: unknown model '%s' (weft_mlp, weft_mlp_bf16, weft_mlp_adam, weft_mlp_mixed, weft_lenet)\n", name.c_str());
  return 2;
}

}  // namespace

// Arguments: intra-op threads, inter-op threads.
BENCHMARK(BM_weft_mlp_step)->Args({1, 0})->Args({2, 1})->Args({2, 0})->Args({2, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_weft_mlp_second_thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cross_core_write)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_weft_mlp_step_unfused)->Args({1, 0})->Args({2, 1})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_weft_mlp_step_logged)->Args({1, 0, 0})->Args({1, 0, 1})->Args({2, 1, 0})->Args({2, 1, 1})
    ->Iterations(2 * mnist_steps_per_epoch)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_mlp_summaries)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_weft_mlp_step_bf16)->Args({1, 0})->Args({2, 1})->Unit(benchmark::kMillisecond)->UseRealTime();
// Arguments: intra-op threads, inter-op threads, mixed precision (0: float32).
BENCHMARK(BM_weft_mlp_step_adam)->Args({1, 0, 0})->Args({1, 0, 1})->Args({2, 1, 0})->Args({2, 1, 1})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_weft_dsl_mlp_step)->Args({1, 0})->Args({2, 1})->Args({2, 0})->Args({2, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_weft_layers_mlp_step)->Args({1, 0})->Args({2, 1})->Args({2, 0})->Args({2, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_eigen_mlp_step)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_eigen_dense_mlp_step)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_weft_lenet_step)->Args({1, 0})->Args({2, 1})->Args({2, 0})->Args({2, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
#if WEFT_BENCH_TORCH
// Arguments: threads, torch_threads (on one thread, both set to one).
BENCHMARK(BM_torch_mlp_step)->Args({1, 0})->Args({2, 0})->Args({2, 1})->Args({2, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_torch_lenet_step)->Args({1, 0})->Args({2, 0})->Args({2, 1})->Args({2, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

int main(int argc, char** argv) {
  const std::string peak_flag = "--peak-memory=";
  if (argc == 2 && std::string(argv[1]).rfind(peak_flag, 0) == 0) return measure_peak(argv[1] + peak_flag.size());
  const std::string nodes_flag = "--node-times=";
  if (argc == 2 && std::string(argv[1]).rfind(nodes_flag, 0) == 0) return node_times(argv[1] + nodes_flag.size());
  const std::string timeline_flag = "--timeline=";
  if (argc == 2 && std::string(argv[1]).rfind(timeline_flag, 0) == 0) return timeline(argv[1] + timeline_flag.size());
  const std::string compare_flag = "--compare-nodes=";
  if (argc == 2 && std::string(argv[1]).rfind(compare_flag, 0) == 0) return compare_nodes(argv[1] + compare_flag.size());
  const std::string step_times_flag = "--step-times=";
  if (argc == 2 && std::string(argv[1]).rfind(step_times_flag, 0) == 0) return step_times(argv[1] + step_times_flag.size());
  // glibc's malloc hands blocks of 128 KiB and more back to the kernel when they are freed
  // (munmap, and trimming the heap's top), so a program that allocates its temporaries afresh
  // each step (libtorch) faults their pages in again each step. On this VM a page fault costs
  // 1 to 9 us depending on the host's load, and libtorch's LeNet step took 68 to 100 ms with
  // glibc's defaults where it takes 25 with these settings (docs/benchmarks.md, session 64). A
  // deployment that cares keeps freed memory (jemalloc, tcmalloc, or these settings), so every
  // side runs with them: blocks up to 32 MiB (the largest threshold glibc takes) come from the
  // heap, and the heap is not trimmed. weft and the Eigen baselines allocate nothing a step;
  // `--glibc-malloc-defaults` keeps glibc's defaults.
  bool malloc_defaults = false;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--glibc-malloc-defaults") {
      malloc_defaults = true;
      std::copy(argv + i + 1, argv + argc, argv + i);
      --argc;
      break;
    }
  if (!malloc_defaults) {
    if (mallopt(M_MMAP_THRESHOLD, 32 << 20) != 1 || mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max()) != 1) {
      std::fprintf(stderr, "bench_training: mallopt refused the thresholds\n");
      return 1;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("malloc", malloc_defaults ? "glibc's defaults"
                                                        : "glibc, mmap threshold 32 MiB, heap never trimmed (mallopt)");
#if WEFT_BENCH_TORCH
  benchmark::AddCustomContext("libtorch threads by default", std::to_string(torch_bench::default_threads()));
  benchmark::AddCustomContext("libtorch's BLAS", torch_bench::blas_description());
#endif
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  benchmark::AddCustomContext("OPENBLAS_CORETYPE", coretype ? coretype : "(unset)");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
