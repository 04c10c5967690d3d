// Layers on the typed DSL (<weft/dsl/layers.hpp>): values against naive loops, gradients
// and an SGD step against the update computed by hand, the layers against the same model
// written with the DSL's ops, initializers' ranges and statistics, sizes given at run time,
// names, and the errors of layers that do not fit.
#include <weft/dsl.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

using namespace weft;
namespace L = weft::layers;

namespace {

std::vector<float> layer_values(std::size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>(static_cast<int>((i * 5) % 11) - 5);
  return v;
}

// y[n, o] = x[n, i] * w[i, o] + b[o], by loops.
std::vector<double> naive_dense(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                                int n, int in, int out) {
  std::vector<double> y(static_cast<std::size_t>(n * out));
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o) {
      double s = b[static_cast<std::size_t>(o)];
      for (int k = 0; k < in; ++k)
        s += static_cast<double>(x[static_cast<std::size_t>(r * in + k)]) * w[static_cast<std::size_t>(k * out + o)];
      y[static_cast<std::size_t>(r * out + o)] = s;
    }
  return y;
}

void require_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(tol));
  }
}

}  // namespace

TEST_CASE("layers: dense computes x * kernel + bias with its variables named under the layer", "[dsl][layers]") {
  auto x = placeholder<float>("x", dims<dyn, 3>);
  L::dense<float, 3, 4> fc("fc", {.kernel = L::glorot_uniform(7, 1), .bias = L::constant_initializer(0.5)});
  auto y = fc(x);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(y)>, static_shape<dyn, 4>>);
  client_session s;
  s.initialize(y);
  const auto xv = layer_values(6, 0.25f, 0.1f);
  auto [w, b, out] = s.run(fetch(fc.kernel(), fc.bias(), y), feed(x, xv, shape{2, 3}));
  CHECK(w.shape() == shape{3, 4});
  CHECK(b.to_vector() == std::vector<float>(4, 0.5f));
  require_close(out.to_vector(), naive_dense(xv, w.to_vector(), b.to_vector(), 2, 3, 4), 1e-5);
  // Glorot: U(-r, r), r = sqrt(6 / (3 + 4)).
  const float r = std::sqrt(6.0f / 7.0f);
  for (float v : w.to_vector()) CHECK(std::abs(v) <= r);
  CHECK(s.current_graph().find("fc/kernel"));
  CHECK(s.current_graph().find("fc/bias"));
  CHECK(s.current_graph().find("fc/MatMul"));
  CHECK(fc.name() == "fc");
  CHECK(fc.input_size() == 3);
  CHECK(fc.output_size() == 4);
}

TEST_CASE("layers: the activations elu selu relu6 and softplus as layers of a sequential", "[dsl][layers]") {
  auto x = placeholder<float>("x", dims<dyn>);
  auto y = L::sequential(L::elu, L::softplus, L::relu6)(x * 4.0f);
  auto z = L::selu(x);
  const std::vector<float> xv{-2.0f, -0.25f, 0.0f, 0.5f, 3.0f};
  client_session s;
  auto [yv, zv] = s.run(fetch(y, z), feed(x, xv, shape{5}));
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const double v = 4.0 * xv[i], e = v > 0 ? v : std::expm1(v);
    CHECK(yv.to_vector()[i] == Approx(std::min(std::log1p(std::exp(e)), 6.0)).epsilon(1e-6));
    const double u = xv[i];
    CHECK(zv.to_vector()[i] == Approx(u > 0 ? 1.0507009873554805 * u : 1.7580993408473766 * std::expm1(u)).epsilon(1e-6));
  }
}

TEST_CASE("layers: the glorot_uniform kernel is the seeded RandomUniform formula the graph examples used", "[dsl][layers]") {
  // (u - 1/2) * 2r with u from RandomUniform(seed, seed2): the same bits as the formula
  // written with the DSL's ops.
  L::dense<float, 20, 30> fc("fc", {.kernel = L::glorot_uniform(3, 2)});
  const float r = std::sqrt(6.0f / 50.0f);
  auto by_hand = (random_uniform<float>(dims<20, 30>, 3, 2) - 0.5f) * (2 * r);
  client_session s;
  s.initialize(fc.kernel());
  auto [w, want] = s.run(fetch(fc.kernel(), by_hand));
  CHECK(w.to_vector() == want.to_vector());
}

TEST_CASE("layers: initializers' ranges and statistics", "[dsl][layers]") {
  constexpr std::int64_t in = 200, out = 300;
  L::dense<float, in, out> gu("gu", {.kernel = L::glorot_uniform(1, 1)});
  L::dense<float, in, out> gn("gn", {.kernel = L::glorot_normal(1, 2)});
  L::dense<float, in, out> hu("hu", {.kernel = L::he_uniform(1, 3)});
  L::dense<float, in, out> hn("hn", {.kernel = L::he_normal(1, 4)});
  L::dense<float, in, out> z("z", {.kernel = L::zeros_initializer()});
  client_session s;
  s.initialize(gu.kernel(), gn.kernel(), hu.kernel(), hn.kernel(), z.kernel());
  auto [a, b, c, d, e] = s.run(fetch(gu.kernel(), gn.kernel(), hu.kernel(), hn.kernel(), z.kernel()));
  auto stats = [](const std::vector<float>& v) {
    double m = 0, q = 0, top = 0;
    for (float x : v) m += x, q += static_cast<double>(x) * x, top = std::max(top, static_cast<double>(std::abs(x)));
    m /= static_cast<double>(v.size());
    return std::array<double, 3>{m, std::sqrt(q / static_cast<double>(v.size()) - m * m), top};
  };
  // Uniform on (-r, r): stddev r / sqrt(3); Keras's normals: the stated stddev, at most 2
  // untruncated stddevs from 0.
  const double r_glorot = std::sqrt(6.0 / (in + out)), r_he = std::sqrt(6.0 / in);
  const double sd_glorot = std::sqrt(2.0 / (in + out)), sd_he = std::sqrt(2.0 / in);
  const auto sa = stats(a.to_vector()), sb = stats(b.to_vector()), sc = stats(c.to_vector()), sd = stats(d.to_vector());
  CHECK(std::abs(sa[0]) < 0.01 * r_glorot * 10);
  CHECK(sa[1] == Approx(r_glorot / std::sqrt(3.0)).epsilon(0.02));
  CHECK(sa[2] <= r_glorot);
  CHECK(sb[1] == Approx(sd_glorot).epsilon(0.03));
  CHECK(sb[2] <= 2 * sd_glorot / 0.87962566103423978 + 1e-6);
  CHECK(sc[1] == Approx(r_he / std::sqrt(3.0)).epsilon(0.02));
  CHECK(sc[2] <= r_he);
  CHECK(sd[1] == Approx(sd_he).epsilon(0.03));
  CHECK(sd[2] <= 2 * sd_he / 0.87962566103423978 + 1e-6);
  CHECK(e.to_vector() == std::vector<float>(in * out, 0.0f));
}

TEST_CASE("layers: a sequential MLP equals the same model written with ops, values and gradients", "[dsl][layers][grad]") {
  auto x = placeholder<float>("x", dims<dyn, 5>);
  auto labels = placeholder<std::int32_t>("labels", dims<dyn>);
  auto net = L::sequential(L::dense<float, 5, 8>("fc1", {.kernel = L::he_normal(1, 1), .bias = L::constant_initializer(0.1)}),
                           L::relu, L::dense<float, 8, 3>("fc2", {.kernel = L::glorot_uniform(1, 2)}));
  const auto& fc1 = net.layer<0>();
  const auto& fc2 = net.layer<2>();
  auto logits = net(x);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(logits)>, static_shape<dyn, 3>>);
  auto by_hand = matmul(relu(matmul(x, fc1.kernel()) + fc1.bias()), fc2.kernel()) + fc2.bias();
  auto loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(logits, labels));
  auto loss_by_hand = reduce_mean(sparse_softmax_cross_entropy_with_logits(by_hand, labels));
  auto vars = net.variables();
  STATIC_REQUIRE(std::tuple_size_v<decltype(vars)> == 4);
  auto [g1, g2, g3, g4] = grad(loss, fc1.kernel(), fc1.bias(), fc2.kernel(), fc2.bias());
  auto [h1, h2, h3, h4] = grad(loss_by_hand, fc1.kernel(), fc1.bias(), fc2.kernel(), fc2.bias());
  client_session s;
  s.initialize(logits);
  const auto xv = layer_values(20, 0.3f, -0.05f);
  const std::vector<std::int32_t> yv{0, 2, 1, 2};
  auto fx = feed(x, xv, shape{4, 5});
  auto fy = feed(labels, yv, shape{4});
  auto [a, b] = s.run(fetch(logits, by_hand), fx, fy);
  const auto bv = b.to_vector();
  require_close(a.to_vector(), std::vector<double>(bv.begin(), bv.end()), 1e-6);
  auto [a1, a2, a3, a4, b1, b2, b3, b4] = s.run(fetch(g1, g2, g3, g4, h1, h2, h3, h4), fx, fy);
  auto same = [](const auto& p, const auto& q) {
    const auto pv = p.to_vector(), qv = q.to_vector();
    require_close(pv, std::vector<double>(qv.begin(), qv.end()), 1e-6);
  };
  same(a1, b1), same(a2, b2), same(a3, b3), same(a4, b4);
}

TEST_CASE("layers: one SGD step of train::minimize over a layer's variables is the update by hand", "[dsl][layers][train]") {
  // loss = l2_loss(x W + b - t) = sum((x W + b - t)^2) / 2: dW = x^T e, db = column sums of e.
  auto x = placeholder<float>("x", dims<dyn, 3>);
  auto t = placeholder<float>("t", dims<dyn, 2>);
  L::dense<float, 3, 2> fc("fc", {.kernel = L::glorot_uniform(5, 5), .bias = L::constant_initializer(0.25)});
  auto loss = l2_loss(fc(x) - t);
  auto step = train::minimize(loss, train::sgd{0.1}, fc.variables());
  client_session s;
  s.initialize(step);
  const auto xv = layer_values(12, 0.2f, 0.05f), tv = layer_values(8, 0.1f, 0.3f);
  auto [w0, b0] = s.run(fetch(fc.kernel(), fc.bias()));
  const auto w = w0.to_vector(), b = b0.to_vector();
  const auto y = naive_dense(xv, w, b, 4, 3, 2);
  std::vector<double> want_w(w.begin(), w.end()), want_b(b.begin(), b.end());
  for (int r = 0; r < 4; ++r)
    for (int o = 0; o < 2; ++o) {
      const double e = y[static_cast<std::size_t>(r * 2 + o)] - tv[static_cast<std::size_t>(r * 2 + o)];
      want_b[static_cast<std::size_t>(o)] -= 0.1 * e;
      for (int k = 0; k < 3; ++k) want_w[static_cast<std::size_t>(k * 2 + o)] -= 0.1 * xv[static_cast<std::size_t>(r * 3 + k)] * e;
    }
  s.run(targets(step), feed(x, xv, shape{4, 3}), feed(t, tv, shape{4, 2}));
  auto [w1, b1] = s.run(fetch(fc.kernel(), fc.bias()));
  require_close(w1.to_vector(), want_w, 1e-5);
  require_close(b1.to_vector(), want_b, 1e-5);
}

TEST_CASE("layers: conv2d, pools and flatten against loops, with channel counts given at run time", "[dsl][layers]") {
  auto images = placeholder<float>("images", dims<dyn, 6, 5, 2>);
  L::conv2d<float, 3, 3, 2, 4> c("c", {.filter = L::glorot_uniform(2, 1), .bias = L::constant_initializer(-0.1)});
  L::conv2d<float, 2, 2, dyn, dyn, L::valid_padding, 1, 1> d("d", 4, 3);
  auto net = L::sequential(c, L::relu, L::max_pool<2, 2>{}, d, L::flatten{});
  auto out = net(images);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(c(images))>, static_shape<dyn, 6, 5, 4>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(out)>, static_shape<dyn, dyn>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(L::flatten{}(c(images)))>, static_shape<dyn, 120>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(L::avg_pool<3, 3, 2, 2, L::same_padding>{}(images))>, static_shape<dyn, 3, 3, 2>>);
  client_session s;
  s.initialize(out);
  const auto iv = layer_values(2 * 6 * 5 * 2, 0.2f, 0.02f);
  auto [f1, b1, f2, b2, got] = s.run(fetch(c.filter(), c.bias(), d.filter(), d.bias(), out), feed(images, iv, shape{2, 6, 5, 2}));
  // Conv 3x3 SAME, ReLU, max pool 2x2 VALID ([2, 3, 2, 4]), conv 2x2 VALID ([2, 2, 1, 3]), flattened.
  const auto fv1 = f1.to_vector(), fv2 = f2.to_vector(), bv1 = b1.to_vector(), bv2 = b2.to_vector();
  auto conv = [](const std::vector<double>& in, const std::vector<float>& f, const std::vector<float>& b, int h, int w,
                 int ci, int k, int co, bool same) {
    const int oh = same ? h : h - k + 1, ow = same ? w : w - k + 1, p = same ? (k - 1) / 2 : 0;
    std::vector<double> o(static_cast<std::size_t>(2 * oh * ow * co));
    for (int n = 0; n < 2; ++n)
      for (int y = 0; y < oh; ++y)
        for (int x = 0; x < ow; ++x)
          for (int m = 0; m < co; ++m) {
            double s = b[static_cast<std::size_t>(m)];
            for (int dy = 0; dy < k; ++dy)
              for (int dx = 0; dx < k; ++dx) {
                const int iy = y + dy - p, ix = x + dx - p;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                for (int q = 0; q < ci; ++q)
                  s += in[static_cast<std::size_t>(((n * h + iy) * w + ix) * ci + q)] *
                       f[static_cast<std::size_t>(((dy * k + dx) * ci + q) * co + m)];
              }
            o[static_cast<std::size_t>(((n * oh + y) * ow + x) * co + m)] = s;
          }
    return o;
  };
  auto h1 = conv(std::vector<double>(iv.begin(), iv.end()), fv1, bv1, 6, 5, 2, 3, 4, true);
  std::vector<double> pooled(2 * 3 * 2 * 4);
  for (int n = 0; n < 2; ++n)
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 2; ++x)
        for (int m = 0; m < 4; ++m) {
          double best = 0;  // after ReLU
          for (int dy = 0; dy < 2; ++dy)
            for (int dx = 0; dx < 2; ++dx)
              best = std::max(best, h1[static_cast<std::size_t>(((n * 6 + 2 * y + dy) * 5 + 2 * x + dx) * 4 + m)]);
          pooled[static_cast<std::size_t>(((n * 3 + y) * 2 + x) * 4 + m)] = best;
        }
  const auto want = conv(pooled, fv2, bv2, 3, 2, 4, 2, 3, false);
  CHECK(got.shape() == shape{2, 2 * 1 * 3});
  require_close(got.to_vector(), want, 1e-5);
  CHECK(s.current_graph().find("d/kernel"));
  CHECK(s.current_graph().at(*s.current_graph().find("d/kernel")).attr<partial_shape>("shape") == partial_shape{2, 2, 4, 3});
}

TEST_CASE("layers: dense sized at run time, mixed precision and dropout", "[dsl][layers]") {
  auto x = placeholder<float>("x", dims<dyn, 4>);
  const std::int64_t hidden = 6;
  L::dense<float, 4, dyn, bfloat16> fc("fc", 4, hidden, {.kernel = L::glorot_uniform(9, 9)});
  auto rate = placeholder<bfloat16>("rate", dims<>);
  auto y = L::dropout(rate, 1, 2)(fc(x));
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(y)>, bfloat16>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(y)>, static_shape<dyn, dyn>>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(fc.kernel())>, float>);
  client_session s;
  s.initialize(y);
  const auto xv = layer_values(8, 0.3f, 0.1f);
  auto [w, b, out] = s.run(fetch(fc.kernel(), fc.bias(), cast<float>(y)), feed(x, xv, shape{2, 4}), feed(rate, tensor_of<bfloat16, 0>(bfloat16(0.0f))));
  CHECK(out.shape() == shape{2, hidden});
  require_close(out.to_vector(), naive_dense(xv, w.to_vector(), b.to_vector(), 2, 4, static_cast<int>(hidden)), 0.05);
}

TEST_CASE("layers: sizes that do not fit are errors naming the layer", "[dsl][layers][errors]") {
  auto x3 = placeholder<float>("x3", dims<dyn, 3>);
  L::dense<float, dyn, dyn> wide("wide", 5, 2);
  CHECK_THROWS_WITH(wide(x3), Catch::Contains("weft::layers::dense 'wide'") && Catch::Contains("3 features") &&
                                  Catch::Contains("takes 5"));
  using fixed = L::dense<float, 4, dyn>;
  CHECK_THROWS_WITH(fixed("f", 5, 2), Catch::Contains("'f'") && Catch::Contains("input size is 5") &&
                                          Catch::Contains("the layer's type says 4"));
  CHECK_THROWS_WITH((L::dense<float, dyn, dyn>("g", 0, 2)), Catch::Contains("positive"));
  CHECK_THROWS_WITH((L::dense<float, 2, 2>("a/b")), Catch::Contains("no '/'"));
  L::conv2d<float, 3, 3, dyn, 8> c("c", 2, 8);
  auto rgb = placeholder<float>("rgb", dims<dyn, 8, 8, 3>);
  CHECK_THROWS_WITH(c(rgb), Catch::Contains("weft::layers::conv2d 'c'") && Catch::Contains("3 channels"));
  // A flatten of unknown spatial dims is an error when the graph is built.
  auto any = placeholder<float>("any", dims<dyn, dyn, dyn, 3>);
  auto flat = L::flatten{}(any);
  client_session s;
  CHECK_THROWS_WITH(s.lower(flat), Catch::Contains("weft::layers::flatten") && Catch::Contains("unknown"));
}

TEST_CASE("layers: applying a layer twice shares its variables, and a layer trains with Adam", "[dsl][layers][train]") {
  auto a = placeholder<float>("a", dims<dyn, 2>);
  auto b = placeholder<float>("b", dims<dyn, 2>);
  L::dense<float, 2, 1> shared("shared", {.kernel = L::glorot_uniform(4, 4)});
  auto loss = l2_loss(shared(a) - shared(b) - 1.0f);
  auto step = train::minimize(loss, train::adam{0.05}, L::variables(shared));
  client_session s;
  s.initialize(step);
  // One kernel and one bias (and Adam's slots of those two).
  CHECK(s.current_graph().find("shared/kernel"));
  CHECK_FALSE(s.current_graph().find("shared/kernel_1"));
  CHECK(variables_of(s.current_graph()).size() == 2 + 2 * 2 + 2);
  const std::vector<float> av{1, 0, 0, 1}, bv{0, 0, 0, 0};  // fits exactly: kernel (1, 1)
  float first = 0, last = 0;
  for (int i = 0; i < 200; ++i) {
    const float l = s.run(loss, feed(a, av, shape{2, 2}), feed(b, bv, shape{2, 2})).scalar();
    if (i == 0) first = l;
    last = l;
    s.run(targets(step), feed(a, av, shape{2, 2}), feed(b, bv, shape{2, 2}));
  }
  CHECK(first > 0.01f);
  CHECK(last < 0.01f * first);
}

namespace {
double sigmoid_of(double v) { return 1 / (1 + std::exp(-v)); }

// One LSTM step by loops, as lstm_cell documents it.
void naive_lstm_step(const std::vector<double>& x, std::vector<double>& h, std::vector<double>& c,
                     const std::vector<double>& k, const std::vector<double>& b, int batch, int in, int units) {
  std::vector<double> h2(h.size()), c2(c.size());
  for (int n = 0; n < batch; ++n)
    for (int u = 0; u < units; ++u) {
      double z[4];
      for (int gate = 0; gate < 4; ++gate) {
        const int col = gate * units + u;
        double s = b[static_cast<std::size_t>(col)];
        for (int j = 0; j < in + units; ++j) {
          const double v = j < in ? x[static_cast<std::size_t>(n * in + j)] : h[static_cast<std::size_t>(n * units + j - in)];
          s += v * k[static_cast<std::size_t>(j * 4 * units + col)];
        }
        z[gate] = s;
      }
      const std::size_t at = static_cast<std::size_t>(n * units + u);
      c2[at] = sigmoid_of(z[1]) * c[at] + sigmoid_of(z[0]) * std::tanh(z[2]);
      h2[at] = sigmoid_of(z[3]) * std::tanh(c2[at]);
    }
  h = h2, c = c2;
}

}  // namespace

TEST_CASE("layers: embedding looks up rows of its table", "[dsl][layers]") {
  auto ids = placeholder<std::int32_t>("ids", dims<dyn, 3>);
  L::embedding<float, 10, 4> embed("embed");
  auto rows = embed(ids);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(rows)>, static_shape<dyn, 3, 4>>);
  client_session s;
  s.initialize(rows);
  const std::vector<std::int32_t> iv{0, 9, 3, 3, 1, 0};
  auto [table, got] = s.run(fetch(embed.table(), rows), feed(ids, iv, shape{2, 3}));
  const auto t = table.to_vector(), g = got.to_vector();
  for (float v : t) CHECK(std::abs(v) <= 0.05f);  // U(-0.05, 0.05)
  REQUIRE(g.size() == 24);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t d = 0; d < 4; ++d) CHECK(g[i * 4 + d] == t[static_cast<std::size_t>(iv[i]) * 4 + d]);
  CHECK(s.current_graph().find("embed/embeddings"));
  const std::vector<std::int32_t> bad{0, 10, 1};
  CHECK_THROWS_WITH(s.run(rows, feed(ids, bad, shape{1, 3})), Catch::Contains("GatherV2"));
}

TEST_CASE("layers: lstm_cell and rnn over a sequence against loops, and the forget bias", "[dsl][layers]") {
  // rnn over a GRU: one state.
  {
    auto seq = placeholder<float>("seq", dims<4, 2, 3>);
    L::gru_cell<float, 3, 5> gru("gru_in_rnn");
    STATIC_REQUIRE(std::is_same_v<shape_of<decltype(L::rnn(gru, seq, zeros<float>(dims<2, 5>)))>, static_shape<4, 2, 5>>);
  }
  constexpr int T = 3, B = 2, F = 3, U = 4;
  auto xs = placeholder<double>("xs", dims<dyn, dyn, F>);
  auto h0 = placeholder<double>("h0", dims<dyn, U>);
  auto c0 = placeholder<double>("c0", dims<dyn, U>);
  L::lstm_cell<double, F, U> cell("lstm", {.kernel = L::glorot_uniform(3, 3)});
  auto hs = L::rnn(cell, xs, h0, c0);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(hs)>, static_shape<dyn, dyn, U>>);
  client_session s;
  s.initialize(hs);
  // Lowered first inside rnn's loop, the cell's variables and the placeholders keep their
  // own names, outside the loop's name scope.
  CHECK(s.current_graph().at(s.lower(cell.kernel()).node).name() == "lstm/kernel");
  CHECK(s.current_graph().at(s.lower(cell.bias()).node).name() == "lstm/bias");
  CHECK(s.current_graph().at(s.lower(h0).node).name() == "h0");
  std::vector<double> xv(T * B * F), hv(B * U), cv(B * U);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = 0.3 * std::sin(0.7 * static_cast<double>(i));
  for (std::size_t i = 0; i < hv.size(); ++i) hv[i] = 0.1 * static_cast<double>(i % 3), cv[i] = -0.2 + 0.05 * static_cast<double>(i);
  auto [k, b, hs_v] = s.run(fetch(cell.kernel(), cell.bias(), hs), feed(xs, xv, shape{T, B, F}), feed(h0, hv, shape{B, U}),
                            feed(c0, cv, shape{B, U}));
  // The forget gate's block of the bias starts at 1.
  const auto bias = b.to_vector();
  for (int i = 0; i < 4 * U; ++i) CHECK(bias[static_cast<std::size_t>(i)] == (i >= U && i < 2 * U ? 1.0 : 0.0));
  std::vector<double> h = hv, c = cv, want_h, want_c;
  for (int t = 0; t < T; ++t) {
    const std::vector<double> x(xv.begin() + t * B * F, xv.begin() + (t + 1) * B * F);
    naive_lstm_step(x, h, c, k.to_vector(), bias, B, F, U);
    want_h.insert(want_h.end(), h.begin(), h.end());
    want_c.insert(want_c.end(), c.begin(), c.end());
  }
  CHECK(hs_v.shape() == shape{T, B, U});
  const auto got_h = hs_v.to_vector();
  for (std::size_t i = 0; i < want_h.size(); ++i) CHECK(got_h[i] == Approx(want_h[i]).margin(1e-12));
  // One step alone.
  auto x1 = placeholder<double>("x1", dims<dyn, F>);
  auto [h1, c1] = cell(x1, h0, c0);
  auto [one_h, one_c] = s.run(fetch(h1, c1), feed(x1, std::vector<double>(xv.begin(), xv.begin() + B * F), shape{B, F}),
                              feed(h0, hv, shape{B, U}), feed(c0, cv, shape{B, U}));
  const auto oh = one_h.to_vector(), oc = one_c.to_vector();
  for (std::size_t i = 0; i < oh.size(); ++i) {
    CHECK(oh[i] == Approx(want_h[i]).margin(1e-12));
    CHECK(oc[i] == Approx(want_c[i]).margin(1e-12));
  }
}

TEST_CASE("layers: the gradient through rnn(lstm_cell) matches central differences", "[dsl][layers][grad]") {
  constexpr int T = 3, B = 2, F = 2, U = 3;
  auto xs = placeholder<double>("xs", dims<T, B, F>);
  auto zero = constant(std::vector<double>(B * U, 0.0), dims<B, U>);
  L::lstm_cell<double, F, U> cell("lstm", {.kernel = L::glorot_uniform(8, 8)});
  auto hs = L::rnn(cell, xs, zero, zero);
  auto loss = reduce_sum(hs * hs);
  auto [dk, db] = grad(loss, cell.kernel(), cell.bias());
  client_session s;
  s.initialize(loss);
  std::vector<double> xv(T * B * F);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = 0.5 * std::cos(1.3 * static_cast<double>(i));
  auto fx = feed(xs, xv, shape{T, B, F});
  auto [k0, gk, gb] = s.run(fetch(cell.kernel(), dk, db), fx);
  // Central differences on a few kernel entries and every bias entry, through assignments.
  auto kernel_value = k0.to_vector();
  const auto analytic_k = gk.to_vector(), analytic_b = gb.to_vector();
  auto loss_with_kernel = [&](const std::vector<double>& kv) {
    s.run(targets(assign(cell.kernel(), constant(tensor_of<double, 2>(kv, shape{F + U, 4 * U})))));
    return s.run(loss, fx).scalar();
  };
  const double eps = 1e-6;
  for (std::size_t i : {std::size_t{0}, std::size_t{7}, std::size_t{20}, std::size_t{59}}) {
    auto plus = kernel_value, minus = kernel_value;
    plus[i] += eps, minus[i] -= eps;
    const double numeric = (loss_with_kernel(plus) - loss_with_kernel(minus)) / (2 * eps);
    INFO("kernel entry " << i);
    CHECK(analytic_k[i] == Approx(numeric).margin(1e-7));
  }
  loss_with_kernel(kernel_value);
  auto bias_value = s.run(cell.bias()).to_vector();
  for (std::size_t i = 0; i < bias_value.size(); ++i) {
    auto at = [&](double delta) {
      auto v = bias_value;
      v[i] += delta;
      s.run(targets(assign(cell.bias(), constant(tensor_of<double, 1>(v, shape{4 * U})))));
      return s.run(loss, fx).scalar();
    };
    const double numeric = (at(eps) - at(-eps)) / (2 * eps);
    INFO("bias entry " << i);
    CHECK(analytic_b[i] == Approx(numeric).margin(1e-7));
  }
}

TEST_CASE("layers: gru_cell against loops", "[dsl][layers]") {
  constexpr int B = 2, F = 3, U = 2;
  auto x = placeholder<double>("x", dims<dyn, F>);
  auto h = placeholder<double>("h", dims<dyn, U>);
  L::gru_cell<double, F, U> cell("gru", {.gate_kernel = L::glorot_uniform(1, 1), .candidate_kernel = L::glorot_uniform(1, 2)});
  auto h2 = cell(x, h);
  client_session s;
  s.initialize(h2);
  const std::vector<double> xv{0.1, -0.2, 0.3, 0.5, 0.0, -0.4}, hv{0.2, -0.1, 0.05, 0.3};
  auto [gk, gb, ck, cb, got] = s.run(fetch(cell.gate_kernel(), cell.gate_bias(), cell.candidate_kernel(), cell.candidate_bias(), h2),
                                     feed(x, xv, shape{B, F}), feed(h, hv, shape{B, U}));
  const auto GK = gk.to_vector(), GB = gb.to_vector(), CK = ck.to_vector(), CB = cb.to_vector();
  CHECK(GB == std::vector<double>(2 * U, 1.0));
  CHECK(CB == std::vector<double>(U, 0.0));
  const auto out = got.to_vector();
  for (int n = 0; n < B; ++n) {
    auto in = [&](int j, const std::vector<double>& hh) {
      return j < F ? xv[static_cast<std::size_t>(n * F + j)] : hh[static_cast<std::size_t>(n * U + j - F)];
    };
    std::vector<double> r(U), u(U), rh(hv);
    for (int k = 0; k < 2 * U; ++k) {
      double z = GB[static_cast<std::size_t>(k)];
      for (int j = 0; j < F + U; ++j) z += in(j, hv) * GK[static_cast<std::size_t>(j * 2 * U + k)];
      (k < U ? r[static_cast<std::size_t>(k)] : u[static_cast<std::size_t>(k - U)]) = sigmoid_of(z);
    }
    for (int k = 0; k < U; ++k) rh[static_cast<std::size_t>(n * U + k)] = r[static_cast<std::size_t>(k)] * hv[static_cast<std::size_t>(n * U + k)];
    for (int k = 0; k < U; ++k) {
      double z = CB[static_cast<std::size_t>(k)];
      for (int j = 0; j < F + U; ++j) z += in(j, rh) * CK[static_cast<std::size_t>(j * U + k)];
      const double cand = std::tanh(z), uk = u[static_cast<std::size_t>(k)];
      const double want = uk * hv[static_cast<std::size_t>(n * U + k)] + (1 - uk) * cand;
      CHECK(out[static_cast<std::size_t>(n * U + k)] == Approx(want).margin(1e-12));
    }
  }
  CHECK(s.current_graph().find("gru/gates/kernel"));
  CHECK(s.current_graph().find("gru/candidate/kernel"));
}

TEST_CASE("layers: batch_norm in training and inference against loops, with the moving averages", "[dsl][layers]") {
  constexpr int N = 4, C = 3;
  auto x = placeholder<double>("x", dims<dyn, 2, C>);  // rank 3: rows are N * 2
  L::batch_norm<double, C> bn("bn", {.momentum = 0.9, .epsilon = 1e-3});
  auto trained = bn(x, L::training);
  auto inferred = bn(x, L::inference);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(trained)>, static_shape<dyn, 2, C>>);
  client_session s;
  s.initialize(trained, inferred);
  std::vector<double> xv(N * 2 * C);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(1.7 * static_cast<double>(i)) * (1 + static_cast<double>(i % C));
  // gamma 1, beta 0 at first; set them so that they count.
  s.run(targets(assign(bn.gamma(), constant(std::vector<double>{1.5, 0.5, -1.0}, dims<C>)),
                assign(bn.beta(), constant(std::vector<double>{0.1, -0.2, 0.3}, dims<C>))));
  const std::vector<double> gamma{1.5, 0.5, -1.0}, beta{0.1, -0.2, 0.3};
  const int rows = N * 2;
  std::vector<double> mean(C, 0), var(C, 0);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < C; ++k) mean[static_cast<std::size_t>(k)] += xv[static_cast<std::size_t>(r * C + k)] / rows;
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < C; ++k) {
      const double d = xv[static_cast<std::size_t>(r * C + k)] - mean[static_cast<std::size_t>(k)];
      var[static_cast<std::size_t>(k)] += d * d / rows;
    }
  auto fx = feed(x, xv, shape{N, 2, C});
  const auto y = s.run(trained, fx).to_vector();
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < C; ++k) {
      const auto i = static_cast<std::size_t>(r * C + k), c = static_cast<std::size_t>(k);
      CHECK(y[i] == Approx(gamma[c] * (xv[i] - mean[c]) / std::sqrt(var[c] + 1e-3) + beta[c]).margin(1e-12));
    }
  // One training run moved the averages from (0, 1): 0.9 old + 0.1 batch (variance unbiased).
  auto [mm, mv] = s.run(fetch(bn.moving_mean(), bn.moving_variance()));
  for (int k = 0; k < C; ++k) {
    const auto c = static_cast<std::size_t>(k);
    CHECK(mm.to_vector()[c] == Approx(0.1 * mean[c]).margin(1e-12));
    CHECK(mv.to_vector()[c] == Approx(0.9 + 0.1 * var[c] * rows / (rows - 1)).margin(1e-12));
  }
  // Inference normalizes by the moving averages and moves nothing.
  const auto yi = s.run(inferred, fx).to_vector();
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < C; ++k) {
      const auto i = static_cast<std::size_t>(r * C + k), c = static_cast<std::size_t>(k);
      CHECK(yi[i] == Approx(gamma[c] * (xv[i] - mm.to_vector()[c]) / std::sqrt(mv.to_vector()[c] + 1e-3) + beta[c]).margin(1e-12));
    }
  CHECK(s.run(bn.moving_mean()).to_vector() == mm.to_vector());
  CHECK(s.current_graph().find("bn/moving_variance"));
  STATIC_REQUIRE(std::tuple_size_v<decltype(bn.variables())> == 2);
}

TEST_CASE("layers: gradients through batch_norm, training and inference, match central differences", "[dsl][layers][grad]") {
  constexpr int N = 5, C = 2;
  auto x = placeholder<double>("x", dims<N, C>);
  auto w = variable<double>("w", dims<N, C>, constant(std::vector<double>{0.3, -1.2, 0.8, 0.1, -0.5, 0.9, 1.1, -0.7, 0.2, 0.4}, dims<N, C>));
  L::batch_norm<double, C> bn("bn", {.momentum = 0.5, .epsilon = 1e-2});
  for (const L::mode m : {L::training, L::inference}) {
    INFO((m == L::training ? "training" : "inference"));
    auto y = bn(x, m);
    auto loss = reduce_sum(y * w) + reduce_sum(square(y)) * 0.25;
    auto [dx, dg, db] = grad(loss, x, bn.gamma(), bn.beta());
    client_session s;
    s.initialize(loss);
    s.run(targets(assign(bn.gamma(), constant(std::vector<double>{1.3, -0.6}, dims<C>)),
                  assign(bn.moving_mean(), constant(std::vector<double>{0.2, -0.1}, dims<C>)),
                  assign(bn.moving_variance(), constant(std::vector<double>{0.8, 1.7}, dims<C>))));
    std::vector<double> xv(N * C);
    for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = std::cos(0.9 * static_cast<double>(i)) + 0.1 * static_cast<double>(i);
    // The loss without the averages' updates (inference mode reads them): a fresh run of y
    // in training mode changes them but not the loss.
    auto loss_at = [&](const std::vector<double>& v) { return s.run(loss, feed(x, v, shape{N, C})).scalar(); };
    auto [gx, gg, gb] = s.run(fetch(dx, dg, db), feed(x, xv, shape{N, C}));
    const double eps = 1e-6;
    for (std::size_t i = 0; i < xv.size(); ++i) {
      auto p = xv, q = xv;
      p[i] += eps, q[i] -= eps;
      CHECK(gx.to_vector()[i] == Approx((loss_at(p) - loss_at(q)) / (2 * eps)).margin(1e-6));
    }
    auto vary = [&](const auto& var, std::size_t i, double delta) {
      auto v = s.run(var).to_vector();
      v[i] += delta;
      s.run(targets(assign(var, constant(tensor_of<double, 1>(v, shape{C})))));
    };
    for (std::size_t i = 0; i < C; ++i) {
      vary(bn.gamma(), i, eps);
      const double up = loss_at(xv);
      vary(bn.gamma(), i, -2 * eps);
      const double down = loss_at(xv);
      vary(bn.gamma(), i, eps);
      CHECK(gg.to_vector()[i] == Approx((up - down) / (2 * eps)).margin(1e-6));
      vary(bn.beta(), i, eps);
      const double up_b = loss_at(xv);
      vary(bn.beta(), i, -2 * eps);
      const double down_b = loss_at(xv);
      vary(bn.beta(), i, eps);
      CHECK(gb.to_vector()[i] == Approx((up_b - down_b) / (2 * eps)).margin(1e-6));
    }
  }
}

TEST_CASE("layers: FusedBatchNormV3's errors name the node and the shapes", "[dsl][layers][errors]") {
  use_kernels<ops::FusedBatchNormV3, float>();
  graph g;
  auto& x = g.placeholder(dtype::float32, {unknown_dim, 3}, "x");
  auto& v2 = g.placeholder(dtype::float32, {2}, "v2");
  auto& v3 = g.placeholder(dtype::float32, {3}, "v3");
  CHECK_THROWS_WITH(g.op("FusedBatchNormV3", {x, v2, v3, v3, v3}, {}, "bn"),
                    Catch::Contains("'bn'") && Catch::Contains("length of scale") && Catch::Contains("3 vs 2"));
  auto& d = g.placeholder(dtype::float64, {3}, "d");
  CHECK_THROWS_WITH(g.op("FusedBatchNormV3", {x, d, d, d, d}, {}, "mixed"), Catch::Contains("U (float64) must equal T (float32)"));
  // An x whose channels are not the vectors' only shows at run time.
  auto& any = g.placeholder(dtype::float32, partial_shape::unknown_rank(), "any");
  auto& bn = g.op("FusedBatchNormV3", {any, v3, v3, v3, v3}, {}, "ok");
  session s(g);
  const tensor ones = tensor::from_vector(std::vector<float>{1, 1, 1});
  CHECK_THROWS_WITH(s.run({{any, tensor::from_vector(std::vector<float>{1, 2, 3, 4}, shape{2, 2})}, {v3, ones}}, {bn.out(0)}),
                    Catch::Contains("'ok'") && Catch::Contains("scale must be a vector of the 2 channels"));
  CHECK_THROWS_WITH(s.run({{any, tensor::from_vector(std::vector<float>{1, 2, 3}, shape{3})}, {v3, ones}}, {bn.out(0)}),
                    Catch::Contains("rank"));
}

TEST_CASE("layers: FusedBatchNormV3 of float16 and bfloat16 with float32 statistics is float32's, x and y rounded", "[dsl][layers]") {
  // TensorFlow's mixed precision: x, y and their gradients in the 16-bit type, scale, offset
  // and the statistics in float32. The kernel widens x, computes as float32 does, and rounds
  // y and x's gradient once: the outputs equal float32's on the same (representable) values,
  // rounded.
  use_kernels<ops::FusedBatchNormV3, float>();
  use_kernels<ops::FusedBatchNormV3, half>();
  use_kernels<ops::FusedBatchNormV3, bfloat16>();
  use_kernels<ops::Cast, float>();
  use_kernels<ops::Cast, half>();
  use_kernels<ops::Cast, bfloat16>();
  std::vector<float> xv(4 * 2 * 3), dyv(xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) {
    xv[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5) * 0.25f;  // exact in both 16-bit types
    dyv[i] = static_cast<float>(static_cast<int>(i * 5 % 9) - 4) * 0.5f;
  }
  const tensor x32 = tensor::from_vector(xv, shape{4, 2, 3}), dy32 = tensor::from_vector(dyv, shape{4, 2, 3});
  const tensor scale = tensor::of<float>({3}, {1.5f, -0.5f, 2}), offset = tensor::of<float>({3}, {0.25f, 0, -1});
  const tensor mean = tensor::of<float>({3}, {0.1f, -0.2f, 0.3f}), variance = tensor::of<float>({3}, {1, 2, 0.5f});
  for (const bool training : {true, false}) {
    // The float32 result, then each 16-bit type's.
    std::vector<tensor> want;
    for (dtype t : {dtype::float32, dtype::float16, dtype::bfloat16}) {
      INFO(t << (training ? " training" : " inference"));
      graph g;
      const output x = g.op("Cast", {g.constant(x32).out(0)}, {{"DstT", t}}).out(0);
      const output dy = g.op("Cast", {g.constant(dy32).out(0)}, {{"DstT", t}}).out(0);
      const attr_map attrs{{"epsilon", 0.01}, {"is_training", training}};
      attr_map forward_attrs = attrs;
      forward_attrs.set("exponential_avg_factor", 0.5);
      const node& bn = g.op("FusedBatchNormV3", {x, g.constant(scale), g.constant(offset), g.constant(mean), g.constant(variance)},
                            forward_attrs, "bn");
      const node& d = g.op("FusedBatchNormGradV3", {dy, x, g.constant(scale), bn.out(3), bn.out(4), bn.out(5)}, attrs, "bn_grad");
      CHECK(bn.output_dtype(0) == t);
      CHECK(bn.output_dtype(1) == dtype::float32);
      CHECK(d.output_dtype(0) == t);
      CHECK(d.output_dtype(1) == dtype::float32);
      // y and x's gradient as float32 (a 16-bit value widens exactly), the float32 outputs as they are.
      const output y = g.op("Cast", {bn.out(0)}, {{"DstT", dtype::float32}}).out(0);
      const output dx = g.op("Cast", {d.out(0)}, {{"DstT", dtype::float32}}).out(0);
      session s(g);
      const auto r = s.run({}, {y, bn.out(1), bn.out(2), bn.out(3), bn.out(4), dx, d.out(1), d.out(2)});
      if (t == dtype::float32) {
        want = r;
        continue;
      }
      // float32's y and x's gradient rounded to t, and back.
      graph h;
      const auto rounded = [&](const tensor& v) {
        return h.op("Cast", {h.op("Cast", {h.constant(v).out(0)}, {{"DstT", t}}).out(0)}, {{"DstT", dtype::float32}}).out(0);
      };
      const output ry = rounded(want[0]), rdx = rounded(want[5]);
      session sh(h);
      const auto w = sh.run({}, {ry, rdx});
      CHECK(r[0].to_vector<float>() == w[0].to_vector<float>());
      CHECK(r[5].to_vector<float>() == w[1].to_vector<float>());
      for (std::size_t i : {1u, 2u, 3u, 4u, 6u, 7u}) {
        INFO("output " << i);
        CHECK(r[i].to_vector<float>() == want[i].to_vector<float>());
      }
    }
  }
  // The statistics of a 16-bit x are float32, not float64, and not the 16-bit type itself.
  graph g;
  auto& x = g.placeholder(dtype::float16, {unknown_dim, 3}, "x");
  auto& d = g.placeholder(dtype::float64, {3}, "d");
  CHECK_THROWS_WITH(g.op("FusedBatchNormV3", {x, d, d, d, d}, {}, "wide"),
                    Catch::Contains("U (float64) must equal T (float16), or be float32 where T is float16 or bfloat16"));
}

TEST_CASE("layers: batch_norm of float16 and bfloat16 keeps float variables and equals float's layer, rounded", "[dsl][layers]") {
  constexpr int C = 3;
  auto x = placeholder<float>("x", dims<dyn, C>);
  L::batch_norm<float, C> full("bn_full", {.momentum = 0.5, .epsilon = 1e-2});
  L::batch_norm<half, C> h("bn_half", {.momentum = 0.5, .epsilon = 1e-2});
  L::batch_norm<bfloat16, C> b("bn_bf16", {.momentum = 0.5, .epsilon = 1e-2});
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(h.gamma())>, float>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(b.moving_mean())>, float>);
  auto y_full = full(x, L::training);
  auto y_half = h(cast<half>(x), L::training);
  auto y_bf16 = b(cast<bfloat16>(x), L::training);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(y_bf16)>, bfloat16>);
  // The gradient of gamma (float) through a 16-bit y.
  auto dg_full = grad(reduce_sum(y_full * y_full), full.gamma());
  auto dg_bf16 = grad(reduce_sum(cast<float>(y_bf16) * cast<float>(y_bf16)), b.gamma());
  client_session s;
  s.initialize(y_full, y_half, y_bf16);
  s.run(targets(assign(full.gamma(), constant(std::vector<float>{1.5f, 0.5f, -1}, dims<C>)),
                assign(h.gamma(), constant(std::vector<float>{1.5f, 0.5f, -1}, dims<C>)),
                assign(b.gamma(), constant(std::vector<float>{1.5f, 0.5f, -1}, dims<C>))));
  std::vector<float> xv(6 * C);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(static_cast<int>(i * 5 % 13) - 6) * 0.25f;  // exact in 16 bits
  auto fx = feed(x, xv, shape{6, C});
  auto [yf, yh, yb, gf, gb] = s.run(fetch(y_full, cast<float>(y_half), cast<float>(y_bf16), dg_full, dg_bf16), fx);
  for (std::size_t i = 0; i < xv.size(); ++i) {
    INFO("element " << i);
    const float want = yf.to_vector()[i];
    CHECK(yh.to_vector()[i] == static_cast<float>(half(want)));  // computed in float, rounded once
    CHECK(yb.to_vector()[i] == static_cast<float>(bfloat16(want)));
  }
  for (std::size_t k = 0; k < C; ++k) CHECK(gb.to_vector()[k] == Approx(gf.to_vector()[k]).epsilon(2e-2));
  // The moving averages are float and moved alike: the same statistics, bit for bit.
  auto [mf, mh, mb, vf, vh, vb] =
      s.run(fetch(full.moving_mean(), h.moving_mean(), b.moving_mean(), full.moving_variance(), h.moving_variance(), b.moving_variance()));
  CHECK(mh.to_vector() == mf.to_vector());
  CHECK(mb.to_vector() == mf.to_vector());
  CHECK(vh.to_vector() == vf.to_vector());
  CHECK(vb.to_vector() == vf.to_vector());
  CHECK(mf.to_vector() != std::vector<float>(C, 0.0f));
}

TEST_CASE("layers: a session's checkpoint holds the layers' variables, and another session restores them", "[dsl][layers]") {
  auto x = placeholder<float>("x", dims<dyn, 4>);
  L::dense<float, 4, 3> fc("fc", {.kernel = L::glorot_uniform(6, 1)});
  L::batch_norm<float, 3> bn("bn");
  auto y = bn(fc(x), L::inference);
  auto loss = reduce_sum(square(bn(fc(x), L::training)));
  auto step = train::minimize(loss, train::sgd{0.1}, L::variables(fc, bn));
  const auto dir = std::filesystem::temp_directory_path() / ("weft_test_layers_checkpoint_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::vector<float> xv{0.5f, -1, 2, 0.25f, 1, 1, -0.5f, 0};
  client_session a;
  a.initialize(step, y);
  for (int i = 0; i < 3; ++i) a.run(targets(step), feed(x, xv, shape{2, 4}));
  const auto file = a.save(dir / "layers", 3);
  const auto want = a.run(y, feed(x, xv, shape{2, 4})).to_vector();
  client_session b;  // fresh variables (the same initial values: seeded), then the trained ones
  b.initialize(step, y);
  b.restore(file);
  CHECK(b.run(y, feed(x, xv, shape{2, 4})).to_vector() == want);
  // The moving averages moved in training and came back too.
  CHECK(b.run(bn.moving_mean()).to_vector() == a.run(bn.moving_mean()).to_vector());
  CHECK(b.run(bn.moving_mean()).to_vector() != std::vector<float>(3, 0.0f));
  std::filesystem::remove_all(dir);
}
