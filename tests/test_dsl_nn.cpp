// The DSL's NN ops and train::minimize: static shapes, values against naive loops and
// formulas, gradients through a small CNN against central differences (float64), and
// optimizer steps against their update formulas.
#include <weft/dsl.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <vector>

using namespace weft;

namespace {

std::vector<double> nn_values(std::size_t n, double scale, double offset) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<double>(static_cast<int>((i * 7) % 13) - 6);
  return v;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(tol));
  }
}

// out[n, y, x, o] of a 2-D convolution (NHWC input, [kh, kw, in, out] filter), by loops.
std::vector<double> naive_conv(const std::vector<double>& in, const std::vector<double>& f, int n, int h, int w, int c,
                               int kh, int kw, int o, int sh, int sw, int dilation, bool same, int& oh, int& ow) {
  const int eh = (kh - 1) * dilation + 1, ew = (kw - 1) * dilation + 1;
  oh = same ? (h + sh - 1) / sh : (h - eh + sh) / sh;
  ow = same ? (w + sw - 1) / sw : (w - ew + sw) / sw;
  const int pt = same ? std::max(0, ((oh - 1) * sh + eh - h) / 2) : 0;
  const int pl = same ? std::max(0, ((ow - 1) * sw + ew - w) / 2) : 0;
  std::vector<double> out(static_cast<std::size_t>(n * oh * ow * o));
  for (int b = 0; b < n; ++b)
    for (int y = 0; y < oh; ++y)
      for (int x = 0; x < ow; ++x)
        for (int k = 0; k < o; ++k) {
          double s = 0;
          for (int dy = 0; dy < kh; ++dy)
            for (int dx = 0; dx < kw; ++dx) {
              const int iy = y * sh - pt + dy * dilation, ix = x * sw - pl + dx * dilation;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              for (int ch = 0; ch < c; ++ch)
                s += in[static_cast<std::size_t>(((b * h + iy) * w + ix) * c + ch)] *
                     f[static_cast<std::size_t>(((dy * kw + dx) * c + ch) * o + k)];
            }
          out[static_cast<std::size_t>(((b * oh + y) * ow + x) * o + k)] = s;
        }
  return out;
}

}  // namespace

TEST_CASE("dsl nn: static shapes of convolutions, pools and losses", "[dsl][nn]") {
  auto images = placeholder<float>("images", dims<dyn, 28, 28, 1>);
  auto f = variable<float>("f", dims<5, 5, 1, 16>, 0.1f);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(conv2d(images, f, strides<1, 1>, same))>, static_shape<dyn, 28, 28, 16>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(conv2d(images, f, strides<2, 3>, same))>, static_shape<dyn, 14, 10, 16>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(conv2d(images, f, strides<1, 1>, valid))>, static_shape<dyn, 24, 24, 16>>);
  STATIC_REQUIRE(
      std::is_same_v<shape_of<decltype(conv2d(images, f, strides<1, 1>, valid, dilations<2, 2>))>, static_shape<dyn, 20, 20, 16>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(max_pool(images, window<2, 2>, strides<2, 2>, valid))>, static_shape<dyn, 14, 14, 1>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(avg_pool(images, window<3, 3>, strides<2, 2>, same))>, static_shape<dyn, 14, 14, 1>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(avg_pool(images, window<3, 3>, strides<2, 2>, valid))>, static_shape<dyn, 13, 13, 1>>);
  auto any = placeholder<float>("any", dims<dyn, dyn, dyn, 3>);
  auto g = variable<float>("g", dims<3, 3, 3, 4>, 0.1f);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(conv2d(any, g, strides<1, 1>, same))>, static_shape<dyn, dyn, dyn, 4>>);
  auto logits = placeholder<double>("logits", dims<dyn, 10>);
  auto sparse = placeholder<std::int64_t>("sparse", dims<32>);
  auto dense = placeholder<double>("dense", dims<dyn, 10>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(sparse_softmax_cross_entropy_with_logits(logits, sparse))>, static_shape<32>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(softmax_cross_entropy_with_logits(logits, dense))>, static_shape<dyn>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(l2_loss(logits))>, static_shape<>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(bias_add(logits, variable<double>("b", dims<10>, 0.0)))>, static_shape<dyn, 10>>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(dropout(logits, 0.5))>, double>);
}

TEST_CASE("dsl nn: bias_add, softmax, log_softmax, losses and l2_loss against formulas", "[dsl][nn]") {
  auto x = placeholder<double>("x", dims<3, 4>);
  auto b = placeholder<double>("b", dims<4>);
  auto p = placeholder<double>("p", dims<3, 4>);
  auto k = placeholder<std::int32_t>("k", dims<3>);
  const auto xv = nn_values(12, 0.37, 0.1), bv = nn_values(4, 0.5, -0.2);
  std::vector<double> pv(12, 0.0);
  const std::vector<std::int32_t> kv{2, 0, 3};
  for (std::size_t r = 0; r < 3; ++r) pv[r * 4] = 0.25, pv[r * 4 + static_cast<std::size_t>(kv[r])] += 0.75;
  client_session s;
  auto [ba, sm, lsm, xent, sxent, l2] =
      s.run(fetch(bias_add(x, b), softmax(x), log_softmax(x), softmax_cross_entropy_with_logits(x, p),
                  sparse_softmax_cross_entropy_with_logits(x, k), l2_loss(x)),
            feed(x, xv, shape{3, 4}), feed(b, bv, shape{4}), feed(p, pv, shape{3, 4}), feed(k, kv, shape{3}));
  std::vector<double> want_ba(12), want_sm(12), want_lsm(12), want_xent(3), want_sxent(3);
  double want_l2 = 0;
  for (std::size_t r = 0; r < 3; ++r) {
    double z = 0;
    for (std::size_t c = 0; c < 4; ++c) z += std::exp(xv[r * 4 + c]);
    for (std::size_t c = 0; c < 4; ++c) {
      const std::size_t i = r * 4 + c;
      want_ba[i] = xv[i] + bv[c];
      want_sm[i] = std::exp(xv[i]) / z;
      want_lsm[i] = xv[i] - std::log(z);
      want_xent[r] -= pv[i] * want_lsm[i];
      want_l2 += xv[i] * xv[i] / 2;
    }
    want_sxent[r] = -want_lsm[r * 4 + static_cast<std::size_t>(kv[r])];
  }
  check_close(ba.to_vector(), want_ba, 1e-12);
  check_close(sm.to_vector(), want_sm, 1e-12);
  check_close(lsm.to_vector(), want_lsm, 1e-12);
  check_close(xent.to_vector(), want_xent, 1e-12);
  check_close(sxent.to_vector(), want_sxent, 1e-12);
  CHECK(l2.scalar() == Approx(want_l2).epsilon(1e-12));
}

TEST_CASE("dsl nn: conv2d and pools against direct loops", "[dsl][nn]") {
  auto img = placeholder<double>("img", dims<2, 7, 6, 3>);
  auto f = placeholder<double>("f", dims<3, 2, 3, 4>);
  const auto iv = nn_values(2 * 7 * 6 * 3, 0.21, 0.03), fv = nn_values(3 * 2 * 3 * 4, 0.17, -0.05);
  client_session s;
  auto [c_same, c_valid, c_dil, mp, ap] =
      s.run(fetch(conv2d(img, f, strides<2, 1>, same), conv2d(img, f, strides<1, 2>, valid),
                  conv2d(img, f, strides<1, 1>, same, dilations<2, 2>), max_pool(img, window<3, 2>, strides<2, 2>, valid),
                  avg_pool(img, window<2, 3>, strides<2, 2>, same)),
            feed(img, iv, shape{2, 7, 6, 3}), feed(f, fv, shape{3, 2, 3, 4}));
  int oh = 0, ow = 0;
  check_close(c_same.to_vector(), naive_conv(iv, fv, 2, 7, 6, 3, 3, 2, 4, 2, 1, 1, true, oh, ow), 1e-12);
  CHECK(c_same.shape() == shape{2, oh, ow, 4});
  check_close(c_valid.to_vector(), naive_conv(iv, fv, 2, 7, 6, 3, 3, 2, 4, 1, 2, 1, false, oh, ow), 1e-12);
  CHECK(c_valid.shape() == shape{2, oh, ow, 4});
  check_close(c_dil.to_vector(), naive_conv(iv, fv, 2, 7, 6, 3, 3, 2, 4, 1, 1, 2, true, oh, ow), 1e-12);
  // Pools: max over a 3x2 window, stride 2, VALID; the mean over the valid part of a 2x3
  // window, stride 2, SAME (padding before = total / 2).
  REQUIRE(mp.shape() == shape{2, 3, 3, 3});
  REQUIRE(ap.shape() == shape{2, 4, 3, 3});
  std::vector<double> want_mp, want_ap;
  for (int b = 0; b < 2; ++b)
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 3; ++x)
        for (int c = 0; c < 3; ++c) {
          double m = -INFINITY;
          for (int dy = 0; dy < 3; ++dy)
            for (int dx = 0; dx < 2; ++dx) m = std::max(m, iv[static_cast<std::size_t>(((b * 7 + 2 * y + dy) * 6 + 2 * x + dx) * 3 + c)]);
          want_mp.push_back(m);
        }
  // SAME, 7 -> 4 rows: total padding (4-1)*2+2-7 = 1, 0 before; 6 -> 3 columns: (3-1)*2+3-6 = 1, 0 before.
  for (int b = 0; b < 2; ++b)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 3; ++x)
        for (int c = 0; c < 3; ++c) {
          double sum = 0;
          int count = 0;
          for (int dy = 0; dy < 2; ++dy)
            for (int dx = 0; dx < 3; ++dx) {
              const int iy = 2 * y + dy, ix = 2 * x + dx;
              if (iy >= 7 || ix >= 6) continue;
              sum += iv[static_cast<std::size_t>(((b * 7 + iy) * 6 + ix) * 3 + c)], ++count;
            }
          want_ap.push_back(sum / count);
        }
  check_close(mp.to_vector(), want_mp, 1e-12);
  check_close(ap.to_vector(), want_ap, 1e-12);
}

TEST_CASE("dsl nn: dropout keeps or zeroes, scaled, and rate 0 is the identity", "[dsl][nn]") {
  auto x = placeholder<float>("x", dims<1000>);
  auto rate = placeholder<float>("rate", dims<>);
  auto d = dropout(x, rate, 7, 3);
  client_session s;
  const std::vector<float> xv(1000, 2.0f);
  const auto kept = s.run(d, feed(x, xv, shape{1000}), feed(rate, 0.25f)).to_vector();
  int zeros = 0;
  for (float v : kept) {
    CHECK((v == 0.0f || v == Approx(2.0f / 0.75f)));
    zeros += v == 0.0f;
  }
  CHECK(zeros > 180);  // about 250 of 1000
  CHECK(zeros < 320);
  CHECK(s.run(d, feed(x, xv, shape{1000}), feed(rate, 0.0f)).to_vector() == xv);
  client_session bad;
  CHECK_THROWS_WITH(bad.run(d, feed(x, xv, shape{1000}), feed(rate, 1.0f)), Catch::Contains("Dropout") && Catch::Contains("rate"));
}

TEST_CASE("dsl nn: gradients through a small CNN match central differences", "[dsl][nn][grad]") {
  // conv (SAME, stride 1) -> bias -> relu -> max pool -> avg pool -> dense -> sparse xent,
  // plus an l2 penalty; float64, values away from ReLU's and max pooling's kinks.
  auto img = placeholder<double>("img", dims<2, 6, 6, 2>);
  auto labels = placeholder<std::int64_t>("labels", dims<2>);
  auto f = placeholder<double>("f", dims<3, 3, 2, 3>);
  auto b = placeholder<double>("b", dims<3>);
  auto w = placeholder<double>("w", dims<12, 4>);
  auto h = max_pool(relu(bias_add(conv2d(img, f, strides<1, 1>, same), b)), window<2, 2>, strides<2, 2>, valid);
  auto pooled = avg_pool(h, window<2, 2>, strides<2, 2>, same);  // [2, 2, 2, 3]
  auto logits = matmul(reshape(pooled, dims<2, 12>), w);
  auto loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(logits, labels)) + 0.1 * l2_loss(w) +
              reduce_sum(softmax(logits) * log_softmax(logits));
  auto [df, db, dw] = grad(loss, f, b, w);
  const auto iv = nn_values(2 * 36 * 2, 0.3, 0.05), fv0 = nn_values(54, 0.11, 0.02), bv0 = nn_values(3, 0.05, 0.1),
             wv0 = nn_values(48, 0.2, -0.03);
  const std::vector<std::int64_t> lv{3, 1};
  client_session s;
  auto eval = [&](const std::vector<double>& fv, const std::vector<double>& bv, const std::vector<double>& wv) {
    return s.run(loss, feed(img, iv, shape{2, 6, 6, 2}), feed(labels, lv, shape{2}), feed(f, fv, shape{3, 3, 2, 3}),
                 feed(b, bv, shape{3}), feed(w, wv, shape{12, 4}))
        .scalar();
  };
  auto [gf, gb, gw] = s.run(fetch(df, db, dw), feed(img, iv, shape{2, 6, 6, 2}), feed(labels, lv, shape{2}),
                            feed(f, fv0, shape{3, 3, 2, 3}), feed(b, bv0, shape{3}), feed(w, wv0, shape{12, 4}));
  const double eps = 1e-6;
  auto numeric = [&](int which) {
    std::vector<double> fv = fv0, bv = bv0, wv = wv0;
    std::vector<double>& v = which == 0 ? fv : which == 1 ? bv : wv;
    std::vector<double> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double keep = v[i];
      v[i] = keep + eps;
      const double up = eval(fv, bv, wv);
      v[i] = keep - eps;
      const double down = eval(fv, bv, wv);
      v[i] = keep;
      out[i] = (up - down) / (2 * eps);
    }
    return out;
  };
  check_close(gf.to_vector(), numeric(0), 1e-6);
  check_close(gb.to_vector(), numeric(1), 1e-6);
  check_close(gw.to_vector(), numeric(2), 1e-6);
}

TEST_CASE("dsl train: minimize's steps follow the optimizers' update formulas", "[dsl][train]") {
  // loss = 1/2 sum((w - t)^2): its gradient is w - t.
  const std::vector<double> t{1.0, -2.0, 0.5}, w0{0.2, 0.4, -0.6};
  auto target = constant(tensor_of<double, 1>(t, shape{3}));
  auto run_steps = [&](auto optimizer, int steps) {
    auto w = variable<double>("w", dims<3>, tensor_of<double, 1>(w0, shape{3}));
    auto loss = 0.5 * reduce_sum(square(w - target));
    auto step = train::minimize(loss, optimizer, w);
    client_session s;
    s.initialize(step);
    for (int i = 0; i < steps; ++i) s.run(targets(step));
    return s.run(w).to_vector();
  };
  std::vector<double> want_sgd(3), want_momentum(3), want_adam(3);
  for (std::size_t i = 0; i < 3; ++i) {
    // SGD, two steps at rate 0.1.
    double w = w0[i];
    for (int k = 0; k < 2; ++k) w -= 0.1 * (w - t[i]);
    want_sgd[i] = w;
    // Momentum 0.9 (no Nesterov), two steps at rate 0.1: accum = 0.9 accum + g; w -= 0.1 accum.
    w = w0[i];
    double accum = 0;
    for (int k = 0; k < 2; ++k) {
      accum = 0.9 * accum + (w - t[i]);
      w -= 0.1 * accum;
    }
    want_momentum[i] = w;
    // Adam, two steps at rate 0.01 (TensorFlow's form: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t)).
    w = w0[i];
    double m = 0, v = 0;
    for (int k = 1; k <= 2; ++k) {
      const double g = w - t[i];
      m = 0.9 * m + 0.1 * g;
      v = 0.999 * v + 0.001 * g * g;
      const double lr = 0.01 * std::sqrt(1 - std::pow(0.999, k)) / (1 - std::pow(0.9, k));
      w -= lr * m / (std::sqrt(v) + 1e-8);
    }
    want_adam[i] = w;
  }
  check_close(run_steps(train::sgd{0.1}, 2), want_sgd, 1e-12);
  check_close(run_steps(train::momentum{0.1, 0.9}, 2), want_momentum, 1e-12);
  check_close(run_steps(train::adam{0.01}, 2), want_adam, 1e-12);
}

TEST_CASE("dsl train: hyperparameters given by expressions are fed each step", "[dsl][train]") {
  // loss = 1/2 sum((w - t)^2), SGD with a fed rate (float, cast to the double variable)
  // and Momentum whose momentum is computed in the graph: each step against the formula.
  const std::vector<double> t{1.0, -2.0}, w0{0.5, 0.5};
  auto target = constant(tensor_of<double, 1>(t, shape{2}));
  auto rate = placeholder<float>("rate", dims<>);
  auto w = variable<double>("w", dims<2>, tensor_of<double, 1>(w0, shape{2}));
  auto loss = 0.5 * reduce_sum(square(w - target));
  auto sgd = train::minimize(loss, train::sgd{train::hyper_of(rate)}, w);
  auto half_rate = placeholder<double>("half_rate", dims<>);
  auto v = variable<double>("v", dims<2>, tensor_of<double, 1>(w0, shape{2}));
  auto loss_v = 0.5 * reduce_sum(square(v - target));
  auto mom = train::minimize(loss_v, train::momentum{0.1, train::hyper_of(half_rate * 2.0)}, v);
  client_session s;
  s.initialize(sgd, mom);
  std::vector<double> want_w = w0, want_v = w0, accum(2, 0.0);
  const float rates[] = {0.5f, 0.25f, 0.125f};
  for (float r : rates) {
    s.run(targets(sgd, mom), feed(rate, r), feed(half_rate, 0.25 * r));
    for (std::size_t i = 0; i < 2; ++i) {
      want_w[i] -= double(r) * (want_w[i] - t[i]);
      accum[i] = 0.5 * r * accum[i] + (want_v[i] - t[i]);
      want_v[i] -= 0.1 * accum[i];
    }
    check_close(s.run(w).to_vector(), want_w, 1e-12);
    check_close(s.run(v).to_vector(), want_v, 1e-12);
  }
  // A typed hyperparameter given to the graph API's minimize is a clear error.
  graph g;
  auto gw = g.variable(dtype::float32, shape{2}, "gw").out(0);
  auto gl = g.op("L2Loss", {gw}).out(0);
  CHECK_THROWS_WITH(train::minimize(g, gl, {gw}, train::sgd{train::hyper_of(rate)}),
                    Catch::Contains("lowered by the DSL's train::minimize"));
}

TEST_CASE("dsl train: a typed softmax classifier trains with Adam, two targets in one graph", "[dsl][train]") {
  // Three separable classes in 4 dims; a second minimize (SGD on the same loss) lowers next
  // to the first under another name.
  auto x = placeholder<float>("x", dims<dyn, 4>);
  auto labels = placeholder<std::int64_t>("labels", dims<dyn>);
  auto w = variable<float>("w", dims<4, 3>, 0.0f);
  auto b = variable<float>("b", dims<3>, 0.0f);
  auto logits = bias_add(matmul(x, w), b);
  auto loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(logits, labels));
  auto adam = train::minimize(loss, train::adam{0.1}, w, b);
  auto sgd = train::minimize(loss, train::sgd{0.5}, w, b);
  client_session s;
  s.initialize(adam, sgd);
  const std::vector<float> xs{1, 0, 0, 0.2f, 0, 1, 0, 0.2f, 0, 0, 1, 0.2f, 0.9f, 0.1f, 0, 0};
  const std::vector<std::int64_t> ys{0, 1, 2, 0};
  float first = 0, last = 0;
  for (int i = 0; i < 60; ++i) {
    auto [l] = s.run(fetch(loss), targets(i % 2 ? sgd : adam), feed(x, xs, shape{4, 4}), feed(labels, ys, shape{4}));
    if (i == 0) first = l.scalar();
    last = l.scalar();
  }
  CHECK(first == Approx(std::log(3.0f)));
  CHECK(last < 0.1f);
  CHECK(s.current_graph().find("train/step") != nullptr);
  CHECK(s.current_graph().find("train_1/step") != nullptr);
}

TEST_CASE("dsl nn: second derivatives through max pooling match central differences", "[dsl][nn][grad]") {
  // z = sum(c * d/dx sum(max_pool(x)^2)): its gradient in x goes through MaxPoolGrad's rule
  // (MaxPoolGradGrad) and MaxPool's.
  auto x = placeholder<double>("x", dims<1, 5, 5, 2>);
  auto c = placeholder<double>("c", dims<1, 5, 5, 2>);
  auto y = reduce_sum(square(max_pool(x, window<3, 3>, strides<2, 2>, same)));
  auto z = reduce_sum(grad(y, x) * c);
  auto dz = grad(z, x);
  std::vector<double> xv0(50);  // distinct values: no ties inside a window
  for (std::size_t i = 0; i < 50; ++i) xv0[i] = 0.037 * static_cast<double>((i * 17) % 50) - 0.9;
  const auto cv = nn_values(50, 0.4, 0.3);
  client_session s;
  auto eval = [&](const std::vector<double>& xv) {
    return s.run(z, feed(x, xv, shape{1, 5, 5, 2}), feed(c, cv, shape{1, 5, 5, 2})).scalar();
  };
  const auto got = s.run(dz, feed(x, xv0, shape{1, 5, 5, 2}), feed(c, cv, shape{1, 5, 5, 2})).to_vector();
  std::vector<double> want(50), xv = xv0;
  for (std::size_t i = 0; i < 50; ++i) {
    const double keep = xv[i];
    xv[i] = keep + 1e-6;
    const double up = eval(xv);
    xv[i] = keep - 1e-6;
    const double down = eval(xv);
    xv[i] = keep;
    want[i] = (up - down) / 2e-6;
  }
  check_close(got, want, 1e-6);
  double norm = 0;
  for (double v : want) norm += std::abs(v);
  CHECK(norm > 0.1);  // the check is not vacuous
}
