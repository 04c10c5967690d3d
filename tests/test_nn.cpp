// NN ops (ops/nn_ops.hpp) and optimizer updates (ops/training_ops.hpp) against naive
// loops written here, with their edge cases and errors. Their gradients are checked in
// test_gradients.cpp.
#include "support/helpers.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

using namespace weft;
using namespace weft::test;

namespace {

output ph(graph& g, dtype t, partial_shape s, const char* name) { return g.placeholder(t, std::move(s), node_options(name)); }
tensor doubles(shape s, std::vector<double> v) { return tensor::from_vector(v, std::move(s)); }

// log(sum(exp(row))) computed in long double from the row's maximum.
long double naive_lse(const double* row, std::int64_t n) {
  long double m = row[0], s = 0;
  for (std::int64_t j = 1; j < n; ++j) m = std::max<long double>(m, row[j]);
  for (std::int64_t j = 0; j < n; ++j) s += std::exp(static_cast<long double>(row[j]) - m);
  return m + std::log(s);
}

}  // namespace

TEST_CASE("nn: BiasAdd and BiasAddGrad equal the naive loops", "[nn]") {
  graph g;
  auto x = ph(g, dtype::float64, partial_shape::unknown_rank(), "x");
  auto b = ph(g, dtype::float64, partial_shape::unknown_rank(), "b");
  auto y = g.op("BiasAdd", {x, b}, {}, node_options("bias_add")).out(0);
  auto gb = g.op("BiasAddGrad", {x}, {}, node_options("bias_grad")).out(0);
  session s(g, one_thread());
  std::vector<double> xv(12), bv{0.5, -1, 2};
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = 0.25 * static_cast<double>(i) - 1;
  auto got = s.run({{x, doubles({2, 2, 3}, xv)}, {b, doubles({3}, bv)}}, {y, gb});
  std::vector<double> want(12), sums(3, 0.0);
  for (std::size_t i = 0; i < 12; ++i) want[i] = xv[i] + bv[i % 3], sums[i % 3] += xv[i];
  CHECK(got[0].shape() == shape{2, 2, 3});
  check_close(got[0].to_vector<double>(), want);
  CHECK(got[1].shape() == shape{3});
  check_close(got[1].to_vector<double>(), sums);
  // No rows: BiasAdd is empty and the bias gradient is zeros.
  auto none = s.run({{x, doubles({0, 3}, {})}, {b, doubles({3}, bv)}}, {y, gb});
  CHECK(none[0].shape() == shape{0, 3});
  CHECK(none[1].to_vector<double>() == std::vector<double>{0, 0, 0});
  require_error([&] { s.run({{x, doubles({2, 3}, std::vector<double>(6))}, {b, doubles({2}, {1, 2})}}, {y}); },
                {"node 'bias_add' (BiasAdd)", "bias length 2", "[2,3]"});
  require_error([&] { s.run({{x, doubles({3}, {1, 2, 3})}, {b, doubles({3}, bv)}}, {y}); },
                {"value must have rank at least 2"});
  // Static shapes are checked when the graph is built.
  graph h;
  auto hx = ph(h, dtype::float32, {4, 3}, "hx");
  auto hb = ph(h, dtype::float32, {2}, "hb");
  require_error([&] { h.op("BiasAdd", {hx, hb}); }, {"BiasAdd", "bias length and value's last dimension differ (3 vs 2)"});
  require_error([&] { h.op("BiasAdd", {hx, hb}, {{"data_format", std::string("NCHW")}}); }, {"NCHW", "NHWC"});
}

TEST_CASE("nn: BiasAddGrad over short and long rows, on one and two threads", "[nn]") {
  // The rows are summed in blocks of at least 2^17 values, a partial row each, and rows
  // shorter than 64 values in runs of about 256 values (then the rows left over): 20000 rows
  // of 17 (two blocks on two threads, runs of 15 rows and leftovers), 5000 rows of 17 (one
  // block), 29 rows of 17 (too few for runs), 4099 rows of 1 (runs of 256), 300 rows of 64
  // (no runs), 2100 rows of 128 (two blocks of long rows) and 50 rows of none (an empty sum).
  // Integers below 2^24 sum exactly in float32, so the sums are compared exactly.
  for (const auto& [rows, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {20000, 17}, {5000, 17}, {29, 17}, {4099, 1}, {300, 64}, {2100, 128}, {50, 0}}) {
    std::vector<float> xv(static_cast<std::size_t>(rows * n));
    std::vector<float> want(static_cast<std::size_t>(n), 0.0f);
    for (std::size_t i = 0; i < xv.size(); ++i) {
      xv[i] = static_cast<float>(static_cast<int>(i * 7 % 23) - 11);
      want[i % static_cast<std::size_t>(n)] += xv[i];
    }
    for (int threads : {1, 2}) {
      INFO(rows << " rows of " << n << ", " << threads << " threads");
      graph g;
      auto x = ph(g, dtype::float32, partial_shape::unknown_rank(), "x");
      auto gb = g.op("BiasAddGrad", {x}).out(0);
      session_options o;
      o.intra_op_threads = threads;
      session s(g, o);
      CHECK(s.run({{x, tensor::from_vector(xv, shape{rows, n})}}, {gb})[0].to_vector<float>() == want);
    }
  }
}

TEST_CASE("nn: Softmax and LogSoftmax equal the naive result, without overflow", "[nn]") {
  graph g;
  auto x = ph(g, dtype::float64, partial_shape::unknown_rank(), "x");
  auto sm = g.op("Softmax", {x}).out(0);
  auto lsm = g.op("LogSoftmax", {x}).out(0);
  session s(g, one_thread());
  // Logits near 1000 overflow exp() unless the row's maximum is subtracted first.
  const std::vector<std::pair<shape, std::vector<double>>> inputs{
      {shape{2, 4}, {1, 2, 3, 4, 1000, 1001, 999, 1000.5}},
      {shape{3}, {-2, 0.5, 0.25}},
      {shape{2, 1, 3}, {0, 0, 0, -700, 5, 6}},
  };
  for (const auto& [dims, v] : inputs) {
    INFO(dims);
    auto got = s.run({{x, doubles(dims, v)}}, {sm, lsm});
    const std::int64_t n = dims[dims.rank() - 1];
    std::vector<double> want_sm(v.size()), want_lsm(v.size());
    for (std::size_t r = 0; r < v.size() / static_cast<std::size_t>(n); ++r) {
      const double* row = v.data() + r * static_cast<std::size_t>(n);
      long double lse = naive_lse(row, n);
      for (std::int64_t j = 0; j < n; ++j) {
        want_lsm[r * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)] = static_cast<double>(row[j] - lse);
        want_sm[r * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)] = static_cast<double>(std::exp(row[j] - lse));
      }
    }
    check_close(got[0].to_vector<double>(), want_sm);
    check_close(got[1].to_vector<double>(), want_lsm);
  }
  CHECK(s.run({{x, doubles({0, 3}, {})}}, {sm})[0].shape() == shape{0, 3});
  CHECK(s.run({{x, doubles({2, 0}, {})}}, {lsm})[0].shape() == shape{2, 0});
  require_error([&] { s.run({{x, tensor::scalar(1.0)}}, {sm}); }, {"Softmax", "logits must have rank at least 1"});
  // float16 computes in float: within float16's rounding of the double result.
  graph h;
  auto hx = h.constant(tensor::of<half>({3}, {half(1.0f), half(2.0f), half(3.0f)}));
  auto hs = eval(h, h.op("Softmax", {hx}).out(0));
  CHECK(hs.dtype() == dtype::float16);
  const double e[] = {std::exp(-2.0), std::exp(-1.0), 1.0}, total = e[0] + e[1] + e[2];
  for (int i = 0; i < 3; ++i) CHECK(static_cast<float>(hs.data<half>()[i]) == Approx(e[i] / total).epsilon(1e-3));
}

TEST_CASE("nn: softmax cross-entropy, dense and sparse, equals the naive result", "[nn]") {
  graph g;
  auto f = ph(g, dtype::float64, partial_shape::unknown_rank(), "features");
  auto l = ph(g, dtype::float64, partial_shape::unknown_rank(), "labels");
  auto k = ph(g, dtype::int32, partial_shape::unknown_rank(), "classes");
  auto& dense = g.op("SoftmaxCrossEntropyWithLogits", {f, l}, {}, node_options("xent"));
  auto& sparse = g.op("SparseSoftmaxCrossEntropyWithLogits", {f, k}, {}, node_options("sparse_xent"));
  session s(g, one_thread());
  const std::vector<double> fv{0.5, -1, 2, 1000, 1002, 999};
  const std::vector<double> lv{0.2, 0.3, 0.5, 0, 1, 0};  // soft labels, and one-hot
  const std::vector<std::int32_t> kv{2, 1};
  auto got = s.run({{f, doubles({2, 3}, fv)}, {l, doubles({2, 3}, lv)}, {k, tensor::from_vector(kv, shape{2})}},
                   {dense.out(0), dense.out(1), sparse.out(0), sparse.out(1)});
  std::vector<double> loss(2), back(6), sloss(2), sback(6);
  for (std::size_t r = 0; r < 2; ++r) {
    long double lse = naive_lse(fv.data() + 3 * r, 3);
    for (std::size_t j = 0; j < 3; ++j) {
      const double p = static_cast<double>(std::exp(fv[3 * r + j] - lse));
      loss[r] += static_cast<double>(-lv[3 * r + j] * (fv[3 * r + j] - lse));
      back[3 * r + j] = p - lv[3 * r + j];
      sback[3 * r + j] = p - (static_cast<std::int32_t>(j) == kv[r] ? 1 : 0);
    }
    sloss[r] = static_cast<double>(lse - fv[3 * r + static_cast<std::size_t>(kv[r])]);
  }
  check_close(got[0].to_vector<double>(), loss);
  check_close(got[1].to_vector<double>(), back);
  check_close(got[2].to_vector<double>(), sloss);
  check_close(got[3].to_vector<double>(), sback);
  // Edge cases: no classes (a loss of 0, the empty sum), an empty batch.
  auto empty = s.run({{f, doubles({2, 0}, {})}, {l, doubles({2, 0}, {})}}, {dense.out(0)});
  CHECK(empty[0].to_vector<double>() == std::vector<double>{0, 0});
  auto no_rows = s.run({{f, doubles({0, 3}, {})}, {k, tensor::from_vector(std::vector<std::int32_t>{}, shape{0})}},
                       {sparse.out(0), sparse.out(1)});
  CHECK(no_rows[0].shape() == shape{0});
  CHECK(no_rows[1].shape() == shape{0, 3});
  // A label outside [0, classes) names the label and where it is.
  require_error([&] {
    s.run({{f, doubles({2, 3}, fv)}, {k, tensor::from_vector(std::vector<std::int32_t>{1, 3}, shape{2})}}, {sparse.out(0)});
  }, {"node 'sparse_xent' (SparseSoftmaxCrossEntropyWithLogits)", "label 3 at index 1", "[0, 3)"});
  require_error([&] {
    s.run({{f, doubles({2, 3}, fv)}, {k, tensor::from_vector(std::vector<std::int32_t>{-1, 0}, shape{2})}}, {sparse.out(0)});
  }, {"label -1 at index 0"});
  require_error([&] { s.run({{f, doubles({2, 3}, fv)}, {l, doubles({3, 2}, lv)}}, {dense.out(0)}); },
                {"node 'xent'", "one shape", "[2,3]", "[3,2]"});
  graph h;
  require_error([&] {
    h.op("SparseSoftmaxCrossEntropyWithLogits",
         {ph(h, dtype::float32, {4, 10}, "f"), ph(h, dtype::int64, {5}, "k")});
  }, {"batch sizes of features and labels differ (4 vs 5)"});
}

TEST_CASE("nn: L2Loss is half the sum of squares", "[nn]") {
  graph g;
  auto x = ph(g, dtype::float64, partial_shape::unknown_rank(), "x");
  auto y = g.op("L2Loss", {x}).out(0);
  session s(g, one_thread());
  CHECK(s.run({{x, doubles({2, 2}, {1, -2, 3, 0.5})}}, {y})[0].scalar_value<double>() == Approx((1 + 4 + 9 + 0.25) / 2));
  CHECK(s.run({{x, tensor::scalar(3.0)}}, {y})[0].scalar_value<double>() == 4.5);
  CHECK(s.run({{x, doubles({0}, {})}}, {y})[0].scalar_value<double>() == 0);
}

namespace {

// One optimizer op run `steps` times on a variable and its slots; returns the values of
// the variable and every slot after each step.
struct apply_run {
  const char* op;
  int slots;                     // slot variables after the variable
  std::vector<double> scalars;   // hyperparameters, in the op's order
  int grad_position;             // the gradient's input index
  attr_map attrs;
};

std::vector<std::vector<double>> run_apply(const apply_run& a, const std::vector<double>& init,
                                           const std::vector<std::vector<double>>& slot_init,
                                           const std::vector<std::vector<double>>& grads) {
  graph g;
  const shape s{static_cast<std::int64_t>(init.size())};
  std::vector<output> vars, inits;
  for (int i = 0; i <= a.slots; ++i) {
    auto v = g.variable(dtype::float64, s, node_options("v" + std::to_string(i))).out(0);
    vars.push_back(v);
    inits.push_back(g.op("Assign", {v, g.constant(doubles(s, i ? slot_init[static_cast<std::size_t>(i - 1)] : init))}).out(0));
  }
  auto grad = ph(g, dtype::float64, s, "grad");
  std::vector<output> in(vars);
  for (double h : a.scalars) in.push_back(g.constant(tensor::scalar(h)));
  in.insert(in.begin() + a.grad_position, grad);
  auto step = g.op(a.op, in, a.attrs).out(0);
  session sess(g, one_thread());
  sess.run({}, {}, std::vector<endpoint>(inits.begin(), inits.end()));
  std::vector<std::vector<double>> after;
  for (const auto& gv : grads) {
    sess.run({{grad, doubles(s, gv)}}, {}, {step});
    for (auto v : vars) after.push_back(sess.run({}, {v}).at(0).to_vector<double>());
  }
  return after;
}

}  // namespace

TEST_CASE("training: every optimizer update equals its formula, step after step", "[training]") {
  const std::vector<double> w0{1.0, -2.0, 0.5};
  const std::vector<std::vector<double>> grads{{0.1, -0.4, 2.0}, {-0.3, 0.2, 1.0}};
  SECTION("ApplyGradientDescent") {
    auto got = run_apply({"ApplyGradientDescent", 0, {0.5}, 2, {}}, w0, {}, grads);
    std::vector<double> w = w0;
    for (std::size_t t = 0; t < 2; ++t) {
      for (std::size_t i = 0; i < 3; ++i) w[i] -= 0.5 * grads[t][i];
      check_close(got[t], w);
    }
  }
  for (bool nesterov : {false, true}) {
    SECTION(nesterov ? "ApplyMomentum, Nesterov" : "ApplyMomentum") {
      const double lr = 0.1, mu = 0.9;
      auto got = run_apply({"ApplyMomentum", 1, {lr, mu}, 3, {{"use_nesterov", nesterov}}}, w0, {{0.5, 0, -1}}, grads);
      std::vector<double> w = w0, acc{0.5, 0, -1};
      for (std::size_t t = 0; t < 2; ++t) {
        for (std::size_t i = 0; i < 3; ++i) {
          acc[i] = mu * acc[i] + grads[t][i];
          w[i] -= nesterov ? lr * grads[t][i] + lr * mu * acc[i] : lr * acc[i];
        }
        check_close(got[2 * t], w);
        check_close(got[2 * t + 1], acc);
      }
    }
  }
  SECTION("ApplyAdagrad") {
    const double lr = 0.2;
    auto got = run_apply({"ApplyAdagrad", 1, {lr}, 3, {}}, w0, {{0.1, 0.1, 0.1}}, grads);
    std::vector<double> w = w0, acc{0.1, 0.1, 0.1};
    for (std::size_t t = 0; t < 2; ++t) {
      for (std::size_t i = 0; i < 3; ++i) {
        acc[i] += grads[t][i] * grads[t][i];
        w[i] -= lr * grads[t][i] / std::sqrt(acc[i]);
      }
      check_close(got[2 * t], w);
      check_close(got[2 * t + 1], acc);
    }
  }
  SECTION("ApplyRMSProp") {
    const double lr = 0.01, rho = 0.9, mu = 0.5, eps = 1e-3;
    auto got = run_apply({"ApplyRMSProp", 2, {lr, rho, mu, eps}, 7, {}}, w0, {{1, 1, 1}, {0, 0, 0}}, grads);
    std::vector<double> w = w0, ms{1, 1, 1}, mom{0, 0, 0};
    for (std::size_t t = 0; t < 2; ++t) {
      for (std::size_t i = 0; i < 3; ++i) {
        ms[i] = rho * ms[i] + (1 - rho) * grads[t][i] * grads[t][i];
        mom[i] = mu * mom[i] + lr * grads[t][i] / std::sqrt(ms[i] + eps);
        w[i] -= mom[i];
      }
      check_close(got[3 * t], w);
      check_close(got[3 * t + 1], ms);
      check_close(got[3 * t + 2], mom);
    }
  }
  for (bool nesterov : {false, true}) {
    SECTION(nesterov ? "ApplyAdam, Nesterov" : "ApplyAdam") {
      const double b1p = 0.9, b2p = 0.999, lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
      auto got = run_apply({"ApplyAdam", 2, {b1p, b2p, lr, b1, b2, eps}, 9, {{"use_nesterov", nesterov}}}, w0,
                           {{0, 0, 0}, {0, 0, 0}}, grads);
      std::vector<double> w = w0, m{0, 0, 0}, v{0, 0, 0};
      const double lr_t = lr * std::sqrt(1 - b2p) / (1 - b1p);  // the powers are inputs: fixed here
      for (std::size_t t = 0; t < 2; ++t) {
        for (std::size_t i = 0; i < 3; ++i) {
          const double gi = grads[t][i];
          m[i] = b1 * m[i] + (1 - b1) * gi;
          v[i] = b2 * v[i] + (1 - b2) * gi * gi;
          w[i] -= lr_t * (nesterov ? b1 * m[i] + (1 - b1) * gi : m[i]) / (std::sqrt(v[i]) + eps);
        }
        check_close(got[3 * t], w, 1e-10);
        check_close(got[3 * t + 1], m, 1e-10);
        check_close(got[3 * t + 2], v, 1e-10);
      }
    }
  }
}

TEST_CASE("training: an update keeps values already read, and a bad input changes nothing", "[training]") {
  graph g;
  auto v = g.variable(dtype::float32, {3}, node_options("w")).out(0);
  auto acc = g.variable(dtype::float32, {3}, node_options("acc")).out(0);
  auto init = g.op("Assign", {v, g.constant(tensor::of<float>({3}, {1, 2, 3}))}).out(0);
  auto init_acc = g.op("Assign", {acc, g.constant(tensor::of<float>({3}, {0, 0, 0}))}).out(0);
  auto grad = ph(g, dtype::float32, partial_shape::unknown_rank(), "grad");
  auto lr = ph(g, dtype::float32, partial_shape::unknown_rank(), "lr");
  auto& sgd = g.op("ApplyGradientDescent", {v, lr, grad}, {}, node_options("sgd"));
  auto& mom = g.op("ApplyMomentum", {v, acc, lr, grad, g.constant(tensor::scalar(0.9f))}, {}, node_options("momentum"));
  auto& twice = g.op("ApplyMomentum", {v, v, lr, grad, g.constant(tensor::scalar(0.9f))}, {}, node_options("twice"));
  session s(g, one_thread());
  s.run({}, {}, {init, init_acc});
  tensor before = s.run({}, {v}).at(0);  // a reader's copy of the value
  const feed_list ok{{lr, tensor::scalar(1.0f)}, {grad, tensor::of<float>({3}, {1, 1, 1})}};
  s.run(ok, {}, {sgd});
  CHECK(before.to_vector<float>() == std::vector<float>{1, 2, 3});  // copied on write
  CHECK(s.run({}, {v}).at(0).to_vector<float>() == std::vector<float>{0, 1, 2});
  require_error([&] { s.run({{lr, tensor::scalar(1.0f)}, {grad, tensor::of<float>({2}, {1, 1})}}, {}, {mom}); },
                {"node 'momentum' (ApplyMomentum)", "gradient of shape [2]", "variable 'w' of shape [3]"});
  require_error([&] { s.run({{lr, tensor::of<float>({2}, {1, 1})}, {grad, tensor::of<float>({3}, {1, 1, 1})}}, {}, {sgd}); },
                {"node 'sgd'", "hyperparameter", "[2]"});
  require_error([&] { s.run(ok, {}, {twice}); }, {"node 'twice'", "variable 'w' is passed twice"});
  CHECK(s.run({}, {v}).at(0).to_vector<float>() == std::vector<float>{0, 1, 2});  // unchanged by the failures
  CHECK(s.run({}, {acc}).at(0).to_vector<float>() == std::vector<float>{0, 0, 0});
  // float16 variables update through float.
  graph h;
  auto hv = h.variable(dtype::float16, {2}, node_options("hw")).out(0);
  auto hinit = h.op("Assign", {hv, h.constant(tensor::of<half>({2}, {half(1.0f), half(-1.0f)}))}).out(0);
  auto hstep = h.op("ApplyGradientDescent", {hv, h.constant(tensor::scalar(half(0.5f))),
                                             h.constant(tensor::of<half>({2}, {half(1.0f), half(2.0f)}))}).out(0);
  session hs(h, one_thread());
  hs.run({}, {}, {hinit});
  hs.run({}, {}, {hstep});
  auto hw = hs.run({}, {hv}).at(0);
  CHECK(static_cast<float>(hw.data<half>()[0]) == 0.5f);
  CHECK(static_cast<float>(hw.data<half>()[1]) == -2.0f);
}

TEST_CASE("training: bfloat16 variables and slots update through float, chunk by chunk, on two threads", "[training]") {
  // 1,300 elements: several chunks of 512 per thread and a short last one. Momentum, two
  // steps; the reference is the same arithmetic in double with each stored value rounded to
  // bfloat16, so the kernel is within a bfloat16 rounding or two of it (2^-7 relative, 2^-8
  // absolute near zero); an element from the wrong chunk would be off by about 1.
  constexpr std::int64_t n = 1300;
  const double lr = 0.25, mu = 0.5;
  const auto value = [](std::int64_t i, double phase) { return std::sin(0.37 * static_cast<double>(i) + phase); };
  const auto round = [](double x) { return static_cast<double>(static_cast<float>(bfloat16(static_cast<float>(x)))); };
  std::vector<bfloat16> w0, g;
  for (std::int64_t i = 0; i < n; ++i) {
    w0.push_back(bfloat16(static_cast<float>(value(i, 0.0))));
    g.push_back(bfloat16(static_cast<float>(value(i, 1.0))));
  }
  graph h;
  auto v = h.variable(dtype::bfloat16, {n}, node_options("w")).out(0);
  auto acc = h.variable(dtype::bfloat16, {n}, node_options("acc")).out(0);
  auto init = h.op("Assign", {v, h.constant(tensor::from_vector(w0, {n}))}).out(0);
  auto init_acc = h.op("Assign", {acc, h.constant(tensor::from_vector(std::vector<bfloat16>(n, bfloat16(0.0f)), {n}))}).out(0);
  auto& step = h.op("ApplyMomentum", {v, acc, h.constant(tensor::scalar(bfloat16(static_cast<float>(lr)))),
                                      h.constant(tensor::from_vector(g, {n})),
                                      h.constant(tensor::scalar(bfloat16(static_cast<float>(mu))))});
  session_options two;
  two.intra_op_threads = 2;
  two.inter_op_threads = 0;
  session s(h, two);
  s.run({}, {}, {init, init_acc});
  std::vector<double> w(w0.begin(), w0.end()), a(n, 0.0);
  for (int t = 0; t < 2; ++t) {
    s.run({}, {}, {step});
    for (std::size_t i = 0; i < w.size(); ++i) {
      a[i] = round(a[i] * mu + static_cast<double>(static_cast<float>(g[i])));
      w[i] = round(w[i] - lr * a[i]);
    }
  }
  const auto got_w = s.run({}, {v}).at(0), got_a = s.run({}, {acc}).at(0);
  int off = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double gw = static_cast<float>(got_w.data<bfloat16>()[i]), ga = static_cast<float>(got_a.data<bfloat16>()[i]);
    off += !(std::abs(gw - w[i]) <= std::ldexp(std::abs(w[i]), -7) + std::ldexp(1.0, -8));
    off += !(std::abs(ga - a[i]) <= std::ldexp(std::abs(a[i]), -7) + std::ldexp(1.0, -8));
  }
  CHECK(off == 0);
}

namespace {

// loss = L2Loss(w2 * (w1 * x) - t) over scalars w1, w2: its gradients by hand are
// r w2 x and r w1 x with r = w2 w1 x - t.
struct two_scalars {
  graph g;
  output w1, w2, loss;
  int init = -1;
  two_scalars(double v1, double v2, double x, double t) {
    w1 = g.variable(dtype::float64, shape{}, node_options("w1")).out(0);
    w2 = g.variable(dtype::float64, shape{}, node_options("w2")).out(0);
    auto i1 = g.op("Assign", {w1, g.constant(tensor::scalar(v1))}).id();
    auto i2 = g.op("Assign", {w2, g.constant(tensor::scalar(v2))}).id();
    init = g.op("NoOp", {}, {}, node_options("init_vars").after({i1, i2})).id();
    auto h = g.op("Mul", {w1, g.constant(tensor::scalar(x))}).out(0);
    auto r = g.op("Sub", {g.op("Mul", {w2, h}).out(0), g.constant(tensor::scalar(t))}).out(0);
    loss = g.op("L2Loss", {r}).out(0);
  }
};

}  // namespace

TEST_CASE("training: minimize updates every variable from the values before the step", "[training]") {
  const double v1 = 0.5, v2 = -1.5, x = 2.0, t = 1.0, lr = 0.1;
  // An update that ran before a read of its variable in the backward pass would change the
  // other variable's gradient. The control edges checked below are what rule that out; the
  // repeated two-thread runs check the step's values (a race would show only by chance).
  for (int rep = 0; rep < 20; ++rep) {
    two_scalars m(v1, v2, x, t);
    auto train = train::minimize(m.g, m.loss, {m.w1, m.w2}, train::sgd{lr});
    session_options o;
    o.inter_op_threads = 2;
    session s(m.g, o);
    s.run({}, {}, {m.g.at(m.init), train.init});
    s.run({}, {}, {train.step});
    const double r = v2 * v1 * x - t;
    auto got = s.run({}, {m.w1, m.w2});
    CHECK(got[0].scalar_value<double>() == Approx(v1 - lr * r * v2 * x).epsilon(1e-14));
    CHECK(got[1].scalar_value<double>() == Approx(v2 - lr * r * v1 * x).epsilon(1e-14));
    // The same, as the graph says it: each update waits for every node of the step that
    // reads its variable (w2 is read by the forward Mul and by the backward pass).
    // The step's nodes: ancestors of the loss and the gradients.
    std::vector<char> in_step(static_cast<std::size_t>(m.g.size()));
    std::vector<int> stack{m.loss.node, train.gradients[0].node, train.gradients[1].node};
    while (!stack.empty()) {
      int id = stack.back();
      stack.pop_back();
      if (std::exchange(in_step[static_cast<std::size_t>(id)], 1)) continue;
      for (const auto& in : m.g.at(id).inputs()) stack.push_back(in.node);
    }
    for (auto [v, update] : {std::pair{m.w1, "train/w1/GradientDescent"}, std::pair{m.w2, "train/w2/GradientDescent"}}) {
      const node* u = m.g.find(update);
      REQUIRE(u != nullptr);
      int readers = 0;
      for (int id = 0; id < m.g.size(); ++id)
        for (const auto& in : m.g.at(id).inputs())
          if (in.node == v.node && in_step[static_cast<std::size_t>(id)]) {
            ++readers;
            INFO(m.g.at(id).describe());
            CHECK(std::find(u->control_inputs().begin(), u->control_inputs().end(), id) != u->control_inputs().end());
          }
      CHECK(readers >= (v == m.w2 ? 2 : 1));
    }
  }
}

TEST_CASE("training: Adam's beta powers advance once per step, and slots are variables named after theirs", "[training]") {
  // loss = L2Loss(w - c): the gradient is w - c.
  graph g;
  auto w = g.variable(dtype::float64, {2}, node_options("w")).out(0);
  auto init = g.op("Assign", {w, g.constant(doubles({2}, {1.0, -2.0}))}).out(0);
  auto loss = g.op("L2Loss", {g.op("Sub", {w, g.constant(doubles({2}, {0.5, 0.5}))}).out(0)}).out(0);
  const double lr = 0.1, eps = 1e-8;
  const train::adam opt{lr, 0.8, 0.9, eps};
  auto step = train::minimize(g, loss, {w}, opt);
  CHECK(g.find("w/Adam/m") != nullptr);
  CHECK(g.find("w/Adam/v") != nullptr);
  CHECK(g.find("train/beta1_power") != nullptr);
  session s(g, one_thread());
  s.run({}, {}, {init, step.init});
  std::vector<double> wv{1.0, -2.0}, mv{0, 0}, vv{0, 0};
  double p1 = opt.beta1, p2 = opt.beta2;
  for (int k = 0; k < 3; ++k) {
    s.run({}, {}, {step.step});
    const double lr_t = lr * std::sqrt(1 - p2) / (1 - p1);
    for (std::size_t i = 0; i < 2; ++i) {
      const double gi = wv[i] - 0.5;
      mv[i] = opt.beta1 * mv[i] + (1 - opt.beta1) * gi;
      vv[i] = opt.beta2 * vv[i] + (1 - opt.beta2) * gi * gi;
      wv[i] -= lr_t * mv[i] / (std::sqrt(vv[i]) + eps);
    }
    p1 *= opt.beta1, p2 *= opt.beta2;
    check_close(s.run({}, {w}).at(0).to_vector<double>(), wv, 1e-12);
    CHECK(s.run({}, {"train/beta1_power"}).at(0).scalar_value<double>() == Approx(p1).epsilon(1e-14));
  }
  graph bad;
  auto p = ph(bad, dtype::float32, {2}, "p");
  require_error([&] { train::minimize(bad, bad.op("L2Loss", {p}).out(0), {p}, train::sgd{0.1}); },
                {"node 'p' (Placeholder) is not a variable"});
}

TEST_CASE("training: every optimizer fits a least-squares problem", "[training]") {
  // w* solves X w = y exactly; each optimizer brings L2Loss(X w - y) near 0.
  auto fit = [](auto opt, int steps) {
    graph g;
    auto w = g.variable(dtype::float32, {2, 1}, node_options("w")).out(0);
    auto init = g.op("Assign", {w, g.constant(tensor::of<float>({2, 1}, {0, 0}))}).out(0);
    auto X = g.constant(tensor::of<float>({4, 2}, {1, 0, 0, 1, 1, 1, 1, -1}));
    auto y = g.constant(tensor::of<float>({4, 1}, {2, -1, 1, 3}));  // w* = (2, -1)
    auto loss = g.op("L2Loss", {g.op("Sub", {g.op("MatMul", {X, w}).out(0), y}).out(0)}).out(0);
    auto train = train::minimize(g, loss, {w}, opt);
    session s(g, one_thread());
    s.run({}, {}, {init, train.init});
    const double first = s.run({}, {loss}).at(0).scalar_value<float>();
    for (int k = 0; k < steps; ++k) s.run({}, {}, {train.step});
    const double last = s.run({}, {loss}).at(0).scalar_value<float>();
    INFO(decltype(opt)::name << ": " << first << " -> " << last);
    CHECK(last < 1e-3 * first);
  };
  fit(train::sgd{0.1}, 200);
  fit(train::momentum{0.05, 0.9}, 200);
  fit(train::momentum{0.05, 0.9, true}, 200);
  fit(train::adagrad{0.5}, 300);
  fit(train::rms_prop{0.01}, 600);
  fit(train::adam{0.05}, 600);
}

TEST_CASE("training: a hyperparameter may be a fed tensor, cast to the variable's dtype", "[training]") {
  graph g;
  auto w = g.variable(dtype::float32, {2}, node_options("w")).out(0);
  auto init = g.op("Assign", {w, g.constant(tensor::of<float>({2}, {1, -1}))}).out(0);
  auto loss = g.op("L2Loss", {w}).out(0);  // gradient: w
  auto lr = ph(g, dtype::float64, shape{}, "lr");
  auto train = train::minimize(g, loss, {w}, train::sgd{lr});
  session s(g, one_thread());
  s.run({}, {}, {init, train.init});
  s.run({{lr, tensor::scalar(0.25)}}, {}, {train.step});
  CHECK(s.run({}, {w}).at(0).to_vector<float>() == std::vector<float>{0.75f, -0.75f});
  s.run({{lr, tensor::scalar(1.0)}}, {}, {train.step});
  CHECK(s.run({}, {w}).at(0).to_vector<float>() == std::vector<float>{0, 0});
  graph bad;
  auto bw = bad.variable(dtype::float32, {2}, node_options("w")).out(0);
  auto vec = ph(bad, dtype::float32, {2}, "rates");
  require_error([&] { train::minimize(bad, bad.op("L2Loss", {bw}).out(0), {bw}, train::sgd{vec}); },
                {"hyperparameter must be a scalar", "node 'rates'"});
}
