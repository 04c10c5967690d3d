// weft::grad on typed expressions: gradients against central differences (float64) and
// hand-derived formulas, fused backwards (no unfused elementwise nodes), fusion on and off,
// second derivatives, zeros for unused xs, training with typed updates, and the run-time
// path (a DSL-lowered graph differentiated op by op).
#include "support/numeric_gradient.hpp"

#include <weft/dsl.hpp>

#include "support/dsl_helpers.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

using namespace weft;

namespace {

using weft::test::count_op;
using weft::test::fusion;

using weft::test::numeric_gradient;

void check_close(std::span<const double> got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(tol));
  }
}

std::vector<double> values(std::size_t n, double scale, double offset) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<double>(static_cast<int>((i * 7) % 11) - 5);
  return v;
}

}  // namespace

TEST_CASE("dsl grad: a fused elementwise expression with broadcasting matches central differences", "[dsl][grad]") {
  auto x = placeholder<double>("x", dims<3, 4>);
  auto b = placeholder<double>("b", dims<4>);
  auto s = placeholder<double>("s", dims<>);
  auto xf = placeholder<float>("xf", dims<3, 4>);  // the Cast's gradient (x itself is not cast: float rounding would swamp the differences)
  auto body = tanh(x * s + b) * x + sigmoid(b) / (square(x) + 1.0) + maximum(x, b * 0.5) - relu(x - b) +
              sqrt(x * x + 2.0) + log(abs(x) + 1.0) + exp(x * 0.3) - pow(x * x + 1.0, b * 0.5 + 1.0) +
              select(x > b, x * b, -x) + cast<double>(xf * 2.0f) * x;
  auto y = reduce_sum(body);
  auto [dx, db, ds, dxf] = grad(y, x, b, s, xf);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(dx)>, static_shape<3, 4>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(db)>, static_shape<4>>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(ds)>, double>);
  const std::vector<double> xv = values(12, 0.31, 0.07), bv = values(4, 0.4, -0.13);  // no x equals a b: no kinks
  const std::vector<float> xfv(xv.begin(), xv.end());
  const double sv = 0.7;
  for (bool on : {true, false}) {
    INFO("fusion " << on);
    client_session sess(fusion(on));
    auto run_y = [&](const std::vector<double>& xs, const std::vector<double>& bs, double sc) {
      return sess.run(y, feed(x, tensor_of<double, 2>(xs, {3, 4})), feed(b, tensor_of<double, 1>(bs, {4})), feed(s, sc),
                      feed(xf, tensor_of<float, 2>(xfv, {3, 4})))
          .scalar();
    };
    auto [gx, gb, gs, gxf] = sess.run(fetch(dx, db, ds, dxf), feed(x, tensor_of<double, 2>(xv, {3, 4})),
                                      feed(b, tensor_of<double, 1>(bv, {4})), feed(s, sv), feed(xf, tensor_of<float, 2>(xfv, {3, 4})));
    for (std::size_t i = 0; i < xv.size(); ++i) CHECK(gxf.flat()[i] == Approx(2 * xv[i]).epsilon(1e-6));  // d/dxf = 2x
    check_close(gx.flat(), numeric_gradient([&](const auto& v) { return run_y(v, bv, sv); }, xv), 1e-6);
    check_close(gb.flat(), numeric_gradient([&](const auto& v) { return run_y(xv, v, sv); }, bv), 1e-6);
    check_close(gs.flat(), numeric_gradient([&](const auto& v) { return run_y(xv, bv, v[0]); }, {sv}), 1e-6);
    const graph& g = sess.current_graph();
    if (on) {
      // Forward and backward are fused: no elementwise op has a node of its own.
      for (const char* op : {"Tanh", "Sigmoid", "Mul", "SelectV2", "Sqrt", "Log", "Exp", "Pow", "Maximum", "Relu", "ReluGrad", "Abs"}) {
        INFO(op);
        CHECK(count_op(g, op) == 0);
      }
      int backward = 0;
      for (int i = 0; i < g.size(); ++i)
        backward += g.at(i).op() == "Fused" && g.at(i).name().starts_with("gradients/");
      CHECK(backward >= 1);
      CHECK(backward <= 4);  // one per input of the forward's fused node (x, b, s, xf)
    } else {
      CHECK(count_op(g, "Fused") == 0);
    }
  }
}

TEST_CASE("dsl grad: sin cos reciprocal log1p expm1 softplus erf squared_difference elu selu relu6 and the flat ops fused", "[dsl][grad]") {
  auto x = placeholder<double>("x", dims<3, 4>);
  auto b = placeholder<double>("b", dims<4>);
  // Floor, Ceil, Round and Sign add no gradient (TensorFlow's None); the xs stay away from
  // their steps by 0.01 at least, so the central differences see them flat.
  auto body = sin(x * b) * cos(b) + reciprocal(x * x + 1.0) + log1p(x * x) + expm1(x * 0.5) + softplus(x - b) +
              erf(x * b) + squared_difference(x, b) + floor(x * 2.5) * x + round(x) + ceil(x + 0.25) + sign(x) * b +
              elu(x * b) + selu(x - b) + relu6(x * 4.0 + 3.0) + tan(x * 0.3) + asin(x * 0.5) * acos(x * 0.5) + atan(x) +
              sinh(x) * cosh(b) + asinh(x) + acosh(x * x + 1.5) + atanh(x * 0.5) + atan2(x, b + 3.0) +
              floor_div(x, b + 3.0) * b + floor_mod(x, b + 3.0);
  auto y = reduce_sum(body);
  auto [dx, db] = grad(y, x, b);
  const std::vector<double> xv = values(12, 0.31, 0.07), bv = values(4, 0.4, -0.13);
  for (bool on : {true, false}) {
    INFO("fusion " << on);
    client_session sess(fusion(on));
    auto run_y = [&](const std::vector<double>& xs, const std::vector<double>& bs) {
      return sess.run(y, feed(x, tensor_of<double, 2>(xs, {3, 4})), feed(b, tensor_of<double, 1>(bs, {4}))).scalar();
    };
    // The forward value by a naive loop.
    double want = 0;
    for (std::size_t i = 0; i < xv.size(); ++i) {
      const double v = xv[i], w = bv[i % 4];
      want += std::sin(v * w) * std::cos(w) + 1 / (v * v + 1) + std::log1p(v * v) + std::expm1(v * 0.5) +
              std::log1p(std::exp(v - w)) + std::erf(v * w) + (v - w) * (v - w) + std::floor(v * 2.5) * v +
              std::nearbyint(v) + std::ceil(v + 0.25) + (v > 0 ? w : -w) + (v * w > 0 ? v * w : std::expm1(v * w)) +
              (v - w > 0 ? 1.0507009873554805 * (v - w) : 1.7580993408473766 * std::expm1(v - w)) +
              std::min(std::max(v * 4 + 3, 0.0), 6.0) + std::tan(v * 0.3) + std::asin(v * 0.5) * std::acos(v * 0.5) +
              std::atan(v) + std::sinh(v) * std::cosh(w) + std::asinh(v) + std::acosh(v * v + 1.5) + std::atanh(v * 0.5) +
              std::atan2(v, w + 3) + std::floor(v / (w + 3)) * w +
              (v - std::floor(v / (w + 3)) * (w + 3));  // floor_div and floor_mod
    }
    CHECK(run_y(xv, bv) == Approx(want).epsilon(1e-12));
    auto [gx, gb] = sess.run(fetch(dx, db), feed(x, tensor_of<double, 2>(xv, {3, 4})), feed(b, tensor_of<double, 1>(bv, {4})));
    check_close(gx.flat(), numeric_gradient([&](const auto& v) { return run_y(v, bv); }, xv), 1e-6);
    check_close(gb.flat(), numeric_gradient([&](const auto& v) { return run_y(xv, v); }, bv), 1e-6);
    const graph& g = sess.current_graph();
    for (const char* op : {"Sin", "Cos", "Reciprocal", "Log1p", "Expm1", "Softplus", "Erf", "SquaredDifference", "Floor",
                           "Ceil", "Round", "Sign", "Elu", "Selu", "Relu6", "Tan", "Asin", "Acos", "Atan", "Sinh",
                           "Cosh", "Asinh", "Acosh", "Atanh", "Atan2", "FloorDiv", "FloorMod"}) {
      INFO(op);
      if (on) CHECK(count_op(g, op) == 0);  // forward and backward fused
      else CHECK(count_op(g, op) >= 1);
    }
  }
}

TEST_CASE("dsl grad: a dense layer's mean squared error matches the formula", "[dsl][grad]") {
  constexpr int n = 5, k = 3, m = 2;
  const std::vector<double> wv = values(k * m, 0.2, 0.05), bv = {0.3, -0.2}, xv = values(n * k, 0.5, 0.1),
                            tv = values(n * m, 0.7, -0.3);
  auto x = placeholder<double>("x", dims<dyn, k>);
  auto t = placeholder<double>("t", dims<dyn, m>);
  auto w = variable<double>("w", dims<k, m>, tensor_of<double, 2>(wv, {k, m}));
  auto b = variable<double>("b", dims<m>, tensor_of<double, 1>(bv, {m}));
  auto loss = reduce_mean(square(matmul(x, w) + b - t));
  auto [dw, db] = grad(loss, w, b);
  // d loss / d(xw + b - t) = 2 (xw + b - t) / (n m)
  std::vector<double> r(n * m), want_w(k * m, 0.0), want_b(m, 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) {
      double acc = bv[j] - tv[i * m + j];
      for (int q = 0; q < k; ++q) acc += xv[i * k + q] * wv[q * m + j];
      r[i * m + j] = 2 * acc / (n * m);
      want_b[j] += r[i * m + j];
      for (int q = 0; q < k; ++q) want_w[q * m + j] += xv[i * k + q] * r[i * m + j];
    }
  for (bool on : {true, false}) {
    client_session s(fusion(on));
    s.initialize(loss);
    auto [gw, gb] = s.run(fetch(dw, db), feed(x, tensor_of<double, 2>(xv, {n, k})), feed(t, tensor_of<double, 2>(tv, {n, m})));
    check_close(gw.flat(), want_w, 1e-12);
    check_close(gb.flat(), want_b, 1e-12);
  }
}

TEST_CASE("dsl grad: an x that y does not depend on gets zeros, and a single x gives one expression", "[dsl][grad]") {
  auto x = placeholder<double>("x", dims<dyn>);
  auto unused = placeholder<double>("unused", dims<2, 2>);
  auto y = reduce_sum(square(x));
  auto [dx, du] = grad(y, x, unused);
  auto dx_only = grad(y, x);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(dx_only)>, static_shape<dyn>>);
  client_session s;
  const std::vector<double> xv{1, -2, 3};
  auto [a, z, c] = s.run(fetch(dx, du, dx_only), feed(x, tensor_of<double, 1>(xv, {3})),
                         feed(unused, tensor_of<double, 2>({1, 2, 3, 4}, {2, 2})));
  check_close(a.flat(), {2, -4, 6}, 0);
  check_close(z.flat(), {0, 0, 0, 0}, 0);
  check_close(c.flat(), {2, -4, 6}, 0);
  // Lowered once per session: fetching again adds no node.
  const int nodes = s.current_graph().size();
  (void)s.run(dx, feed(x, tensor_of<double, 1>(xv, {3})));
  CHECK(s.current_graph().size() == nodes);
  // An empty x.
  auto e = s.run(dx, feed(x, tensor_of<double, 1>(std::vector<double>{}, {0})));
  CHECK(e.shape() == shape{0});
}

TEST_CASE("dsl grad: second derivatives through fused backwards", "[dsl][grad]") {
  auto x = placeholder<double>("x", dims<dyn>);
  auto g = grad(reduce_sum(x * x * x + tanh(x)), x);  // 3x^2 + 1 - tanh^2
  auto gg = grad(reduce_sum(g), x);                   // 6x - 2 tanh (1 - tanh^2)
  const std::vector<double> xv{-1.5, -0.2, 0.0, 0.4, 2.0};
  for (bool on : {true, false}) {
    client_session s(fusion(on));
    auto [gv, ggv] = s.run(fetch(g, gg), feed(x, tensor_of<double, 1>(xv, {5})));
    std::vector<double> want_g, want_gg;
    for (double v : xv) {
      const double th = std::tanh(v);
      want_g.push_back(3 * v * v + 1 - th * th);
      want_gg.push_back(6 * v - 2 * th * (1 - th * th));
    }
    check_close(gv.flat(), want_g, 1e-12);
    check_close(ggv.flat(), want_gg, 1e-12);
  }
}

TEST_CASE("dsl grad: typed updates train a linear model", "[dsl][grad]") {
  auto x = placeholder<float>("x", dims<dyn, 2>);
  auto t = placeholder<float>("t", dims<dyn, 1>);
  auto w = variable<float>("w", dims<2, 1>, 0.0f);
  auto b = variable<float>("b", dims<1>, 0.0f);
  auto loss = reduce_mean(square(matmul(x, w) + b - t));
  auto [dw, db] = grad(loss, w, b);
  auto step = group(assign_sub(w, 0.2f * dw), assign_sub(b, 0.2f * db));
  std::vector<float> xv, tv;
  for (int i = 0; i < 16; ++i) {
    const float a = static_cast<float>(i % 4) - 1.5f, c = static_cast<float>(i / 4) - 1.5f;
    xv.insert(xv.end(), {a, c});
    tv.push_back(2 * a - 3 * c + 0.5f);
  }
  client_session s;
  s.initialize(loss);
  const auto feeds = [&] { return std::tuple{feed(x, tensor_of<float, 2>(xv, {16, 2})), feed(t, tensor_of<float, 2>(tv, {16, 1}))}; };
  const float first = std::apply([&](const auto&... f) { return s.run(loss, f...).scalar(); }, feeds());
  for (int i = 0; i < 200; ++i) std::apply([&](const auto&... f) { s.run(targets(step), f...); }, feeds());
  const float last = std::apply([&](const auto&... f) { return s.run(loss, f...).scalar(); }, feeds());
  CHECK(first > 1.0f);
  CHECK(last < 1e-6f);
  auto [wv, bv] = s.run(fetch(w, b));
  CHECK(wv(0, 0) == Approx(2.0f).margin(1e-3));
  CHECK(wv(1, 0) == Approx(-3.0f).margin(1e-3));
  CHECK(bv(0) == Approx(0.5f).margin(1e-3));
}

TEST_CASE("dsl grad: a DSL-lowered graph differentiated op by op expands its fused nodes", "[dsl][grad]") {
  auto x = placeholder<double>("x", dims<dyn>);
  auto c = placeholder<double>("c", dims<>);
  auto y = reduce_sum(sigmoid(x * c) * x - minimum(x, c));
  const std::vector<double> xv{-1.0, 0.25, 0.5, 2.0};
  // The typed gradient (also registers the kernels the expansion's nodes need).
  client_session typed;
  auto [want_x, want_c] = typed.run(fetch(grad(y, x), grad(y, c)), feed(x, tensor_of<double, 1>(xv, {4})), feed(c, 0.5));
  graph g;
  lowering cx(g);
  const output yo = weft::lower(cx, y), xo = weft::lower(cx, x), co = weft::lower(cx, c);
  REQUIRE(count_op(g, "Fused") == 1);
  const auto d = add_gradients(g, {yo}, {xo, co});
  CHECK(count_op(g, "Sigmoid") == 1);  // the fused node rebuilt op by op
  session s(g);
  auto out = s.run({{xo, tensor::from_vector(xv)}, {co, tensor::scalar(0.5)}}, {d[0], d[1]});
  check_close(out[0].flat<double>(), want_x.to_vector(), 1e-12);
  check_close(out[1].flat<double>(), want_c.to_vector(), 1e-12);
}

TEST_CASE("dsl grad: is_nan is_inf and is_finite fuse as masks and check_numerics checks the value and its gradient", "[dsl][grad]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  auto x = placeholder<double>("x", dims<6>);
  auto w = placeholder<double>("w", dims<6>);
  // The non-finite entries replaced by 0, then a weighted sum of squares, plus the weights
  // where x is not finite.
  auto clean = select(is_finite(x), x, 0.0);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(is_nan(x))>, bool>);
  auto y = reduce_sum(check_numerics(clean, "clean") * check_numerics(clean, "clean") * w) +
           reduce_sum(select(is_nan(x) || is_inf(x), w, w * 0.0));
  auto dw = grad(y, w);
  const std::vector<double> xv{1.5, nan, -2, inf, -inf, 0.5}, wv{1, 2, 3, 4, 5, 6};
  for (bool on : {true, false}) {
    INFO("fusion " << on);
    client_session sess(fusion(on));
    auto [yv, gv] = sess.run(fetch(y, dw), feed(x, tensor_of<double, 1>(xv, {6})), feed(w, tensor_of<double, 1>(wv, {6})));
    CHECK(yv.scalar() == Approx(1.5 * 1.5 * 1 + 4.0 * 3 + 0.25 * 6 + 2 + 4 + 5));
    check_close(gv.flat(), {2.25, 1, 4, 1, 1, 0.25}, 1e-12);  // d/dw: clean^2, or 1 where x is not finite
    CHECK(count_op(sess.current_graph(), "CheckNumerics") == 1);  // the two calls are one node
    if (on) CHECK(count_op(sess.current_graph(), "IsFinite") == 0);
  }
  // Unclean: the check names its node and message when the step runs; its gradient is checked.
  auto z = reduce_sum(check_numerics(x * w, "x times w"));
  client_session sess;
  const std::vector<double> finite{1, 2, 3, 4, 5, 6};
  CHECK(sess.run(z, feed(x, tensor_of<double, 1>(finite, {6})), feed(w, tensor_of<double, 1>(wv, {6}))).scalar() == Approx(91));
  try {
    (void)sess.run(z, feed(x, tensor_of<double, 1>(xv, {6})), feed(w, tensor_of<double, 1>(wv, {6})));
    FAIL("no error");
  } catch (const error& e) {
    CHECK_THAT(e.what(), Catch::Contains("CheckNumerics") && Catch::Contains("x times w : Tensor had NaN and Inf values"));
  }
}

TEST_CASE("dsl grad: through unstack stack reverse expand_dims squeeze and add_n", "[dsl][grad]") {
  auto x = placeholder<double>("x", dims<2, 3>);
  auto w = placeholder<double>("w", dims<3>);
  const std::vector<double> c{1, 2, 3, 4, 5, 6}, k{0.5, -1, 2};
  auto rows = unstack<2, 0>(x);
  auto st = stack<1>(rows[1], w);  // [3, 2]: (x1[i], w[i])
  // y = sum(C * reverse(st)^2) + sum(k * (x0 + w + w)), reverse along dim 0.
  auto turned = squeeze(expand_dims<0>(reverse(st, axes<0>)), axes<0>);
  auto y = reduce_sum(constant(c, dims<3, 2>) * square(turned)) + reduce_sum(constant(k, dims<3>) * add_n(rows[0], w, w));
  auto [dx, dw] = grad(y, x, w);
  client_session s;
  const std::vector<double> xv{1, -2, 3, 0.5, -1.5, 2}, wv{-1, 2, 0.25};
  auto [gx, gw] = s.run(fetch(dx, dw), feed(x, tensor_of<double, 2>(xv, {2, 3})), feed(w, tensor_of<double, 1>(wv, {3})));
  // Row i of the reversed stack is st[2 - i], weighted by c[2i] (x1) and c[2i + 1] (w).
  std::vector<double> want_x(6), want_w(3);
  for (int i = 0; i < 3; ++i) {
    const auto at = static_cast<std::size_t>(i), from = static_cast<std::size_t>(2 - i);
    want_x[at] = k[at];
    want_x[3 + at] = 2 * c[2 * from] * xv[3 + at];
    want_w[at] = 2 * c[2 * from + 1] * wv[at] + 2 * k[at];
  }
  check_close(gx.flat(), want_x, 1e-12);
  check_close(gw.flat(), want_w, 1e-12);
}

TEST_CASE("dsl grad: through reduce_prod (zeros included) and gather", "[dsl][grad]") {
  auto x = placeholder<double>("x", dims<2, 3>);
  auto w = placeholder<double>("w", dims<4, 2>);
  // Products of the rows, and rows of w picked by index (row 1 twice, row 2 never).
  auto y = reduce_sum(reduce_prod(x, axes<1>) * constant(std::vector<double>{1.0, 2.0}, dims<2>)) +
           reduce_sum(square(gather(w, constant(std::vector<std::int32_t>{1, 3, 1}, dims<3>))));
  auto [dx, dw] = grad(y, x, w);
  client_session s;
  auto [gx, gw] = s.run(fetch(dx, dw), feed(x, tensor_of<double, 2>({2, 0, 3, -1, 4, 5}, {2, 3})),
                        feed(w, tensor_of<double, 2>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2})));
  // Row 0 (2, 0, 3) has one zero: only that element's gradient (2 * 3) is nonzero; row 1,
  // weighted by 2: the products of the other two.
  check_close(gx.flat(), {0, 6, 0, 2 * 20, 2 * -5, 2 * -4}, 0);
  // d sum(w[i]^2) = 2 w[i] per pick: row 1 twice, row 3 once, rows 0 and 2 none.
  check_close(gw.flat(), {0, 0, 4 * 3, 4 * 4, 0, 0, 2 * 7, 2 * 8}, 0);
}
