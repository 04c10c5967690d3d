// Typed control flow (dsl/control_flow.hpp): while_loop and cond on expressions, against
// host loops and the same computation unrolled; captured placeholders and variables,
// nested loops, a cond in a loop, invariant hoisting, gradients through both, and errors;
// scan, map_fn and foldl against host loops and central differences.
#include "support/numeric_gradient.hpp"

#include <weft/dsl.hpp>

#include "support/dsl_helpers.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <span>
#include <vector>

using namespace weft;
namespace hana = boost::hana;

namespace {

using weft::test::count_op;

using weft::test::numeric_gradient;

void check_gradient(std::span<const double> got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(1e-7));
  }
}

}  // namespace

TEST_CASE("dsl control flow: while_loop over heterogeneous state equals a host loop", "[dsl][control]") {
  auto n = placeholder<std::int32_t>("n", dims<>);
  auto x = placeholder<float>("x", dims<3>);
  // i < n: (i + 1, acc + x * i, count + 1.0) with an int32, a float vector and a double.
  auto out = while_loop([&](auto i, auto, auto) { return i < n; },
                        [&](auto i, auto acc, auto count) {
                          return hana::make_tuple(i + 1, acc + x * cast<float>(i), count + 1.0);
                        },
                        hana::make_tuple(constant(0), zeros<float>(dims<3>), constant(0.0)));
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(hana::at_c<1>(out))>, float>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(hana::at_c<1>(out))>, static_shape<3>>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(hana::at_c<2>(out))>, double>);
  const std::vector<float> xv{0.5f, -1.0f, 2.0f};
  client_session s;
  for (int nv : {0, 1, 7, 100}) {
    INFO("n = " << nv);
    auto [iv, accv, countv] = s.run(fetch(hana::at_c<0>(out), hana::at_c<1>(out), hana::at_c<2>(out)), feed(n, nv),
                                    feed(x, tensor_of<float, 1>(xv, {3})));
    CHECK(iv.scalar() == nv);
    CHECK(countv.scalar() == Approx(nv));
    const double tri = 0.5 * nv * (nv - 1);
    for (int k = 0; k < 3; ++k) CHECK(accv(k) == Approx(xv[static_cast<std::size_t>(k)] * tri).epsilon(1e-5));
  }
}

TEST_CASE("dsl control flow: an RNN in a while_loop equals it unrolled, and so does its gradient", "[dsl][control][grad]") {
  constexpr int steps = 5, k = 4;
  auto h0 = placeholder<double>("h0", dims<dyn, k>);  // a dyn batch dim
  auto xs = placeholder<double>("xs", dims<steps, dyn, k>);
  auto w = variable<double>("w", dims<k, k>, [] {
    std::vector<double> v;
    for (int i = 0; i < k * k; ++i) v.push_back(0.5 * std::cos(1.3 * i));
    return tensor_of<double, 2>(v, {k, k});
  }());
  auto looped = hana::at_c<1>(while_loop([](auto i, auto) { return i < 5; },
                                         [&](auto i, auto h) { return hana::make_tuple(i + 1, tanh(matmul(h, w) + gather(xs, i))); },
                                         hana::make_tuple(constant(0), h0)));
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(looped)>, static_shape<dyn, k>>);
  handle<double, dyn, k> unrolled = h0;
  for (int i = 0; i < steps; ++i) unrolled = tanh(matmul(unrolled, w) + gather(xs, constant(i)));
  auto loss_loop = reduce_sum(looped * looped);
  auto loss_unrolled = reduce_sum(unrolled * unrolled);
  auto [dw_loop, dh_loop] = grad(loss_loop, w, h0);
  auto [dw_unrolled, dh_unrolled] = grad(loss_unrolled, w, h0);
  const int batch = 3;
  std::vector<double> hv, xv;
  for (int i = 0; i < batch * k; ++i) hv.push_back(0.3 * std::sin(0.9 * i));
  for (int i = 0; i < steps * batch * k; ++i) xv.push_back(0.4 * std::cos(0.37 * i));
  for (bool fused : {true, false}) {
    client_options o;
    o.fusion = fused;
    o.session.intra_op_threads = 2;
    o.session.inter_op_threads = 2;
    client_session s(o);
    s.initialize(w);
    auto feeds = [&] { return std::tuple{feed(h0, tensor_of<double, 2>(hv, {batch, k})), feed(xs, tensor_of<double, 3>(xv, {steps, batch, k}))}; };
    auto [f0, f1] = feeds();
    auto [a, b, c, d, e, f] = s.run(fetch(looped, unrolled, dw_loop, dw_unrolled, dh_loop, dh_unrolled), f0, f1);
    INFO("fusion " << fused);
    for (std::size_t i = 0; i < a.flat().size(); ++i) CHECK(a.flat()[i] == Approx(b.flat()[i]).epsilon(1e-12));
    for (std::size_t i = 0; i < c.flat().size(); ++i) CHECK(c.flat()[i] == Approx(d.flat()[i]).epsilon(1e-10).margin(1e-13));
    for (std::size_t i = 0; i < e.flat().size(); ++i) CHECK(e.flat()[i] == Approx(f.flat()[i]).epsilon(1e-10).margin(1e-13));
    // The gradient is a backward loop fed by the forward loop's pushes.
    CHECK(count_op(s.current_graph(), "AccumulatorPush") >= 1);
  }
}

TEST_CASE("dsl control flow: cond runs one branch, with its result type and gradient", "[dsl][control][grad]") {
  auto x = placeholder<float>("x", dims<dyn>);
  auto y = placeholder<float>("y", dims<4>);
  auto p = reduce_sum(x) > 0.0f;
  // Then: x * 2 ([dyn]); else: y - 1 ([4]): the result is [dyn].
  auto r = cond(p, [&] { return x * 2.0f; }, [&] { return y - 1.0f; });
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(r)>, static_shape<dyn>>);
  // Two results at once, and gradients: d sum(r2 * r2) / dx.
  auto both = cond(p, [&] { return hana::make_tuple(x * x, constant(1.0f)); }, [&] { return hana::make_tuple(-x, constant(2.0f)); });
  auto loss = reduce_sum(hana::at_c<0>(both) * hana::at_c<1>(both));
  auto dx = grad(loss, x);
  client_session s;
  const std::vector<float> pos{1.0f, 2.0f, -0.5f, 0.25f}, neg{-1.0f, -2.0f, 0.5f, 0.25f}, yv{3, 4, 5, 6};
  for (const auto* xv : {&pos, &neg}) {
    const bool taken = *xv == pos;
    auto [rv, lv, dv] = s.run(fetch(r, loss, dx), feed(x, tensor_of<float, 1>(*xv, {4})), feed(y, tensor_of<float, 1>(yv, {4})));
    for (int i = 0; i < 4; ++i) {
      const float xi = (*xv)[static_cast<std::size_t>(i)];
      CHECK(rv(i) == Approx(taken ? 2 * xi : yv[static_cast<std::size_t>(i)] - 1));
      CHECK(dv(i) == Approx(taken ? 2 * xi : -2.0f));
    }
    double want = 0;
    for (float xi : *xv) want += taken ? xi * xi : -xi * 2;
    CHECK(lv.scalar() == Approx(want));
  }
}

TEST_CASE("dsl control flow: grad inside a while_loop body through a loop nested in the body", "[dsl][control][grad]") {
  // w <- w - 0.01 d/dw (w^3 a), w^3 by an inner loop that multiplies by w three times:
  // d/dw = 3 w^2 a, by hand; and the sum over the iterations of d/da (w_k^3 a) = w_k^3.
  auto a = placeholder<double>("a", dims<>);
  auto out = while_loop([&](auto i, auto, auto) { return i < 5; },
                        [&](auto i, auto w, auto da) {
                          auto cube = hana::at_c<1>(while_loop([&](auto j, auto) { return j < 3; },
                                                               [&](auto j, auto v) { return hana::make_tuple(j + 1, v * w); },
                                                               hana::make_tuple(constant(0), constant(1.0))));
                          auto loss = cube * a;
                          return hana::make_tuple(i + 1, w - grad(loss, w) * 0.01, da + grad(loss, a));
                        },
                        hana::make_tuple(constant(0), constant(1.5), constant(0.0)));
  client_session s;
  auto [w, da] = s.run(fetch(hana::at_c<1>(out), hana::at_c<2>(out)), feed(a, 0.8));
  double wh = 1.5, dah = 0;
  for (int k = 0; k < 5; ++k) {
    dah += wh * wh * wh;
    wh -= 0.01 * 3 * wh * wh * 0.8;
  }
  CHECK(w.scalar() == Approx(wh).epsilon(1e-12));
  CHECK(da.scalar() == Approx(dah).epsilon(1e-12));
}

TEST_CASE("dsl control flow: nested loops and a cond in a loop, capturing outer values", "[dsl][control][grad]") {
  auto a = placeholder<double>("a", dims<>);
  auto n = placeholder<std::int32_t>("n", dims<>);
  // Outer i < n: inner j < i: acc = acc * a (so acc = a^(n(n-1)/2)); then, per outer
  // iteration, i even ? acc : acc + 1 (a cond in the loop).
  auto out = while_loop(
      [&](auto i, auto) { return i < n; },
      [&](auto i, auto acc) {
        auto inner = hana::at_c<1>(while_loop([&](auto j, auto) { return j < i; },
                                              [&](auto j, auto v) { return hana::make_tuple(j + 1, v * a); },
                                              hana::make_tuple(constant(0), acc)));
        auto even = equal(i - (i / 2) * 2, constant(0));
        return hana::make_tuple(i + 1, cond(even, [&] { return inner; }, [&] { return inner + 1.0; }));
      },
      hana::make_tuple(constant(0), constant(1.0)));
  auto result = hana::at_c<1>(out);
  auto da = grad(result, a);
  auto host = [](double av, int nv) {
    double acc = 1, d = 0;  // acc and d acc / da
    for (int i = 0; i < nv; ++i) {
      for (int j = 0; j < i; ++j) d = d * av + acc, acc *= av;
      if (i % 2) acc += 1;
    }
    return std::pair{acc, d};
  };
  client_session s;
  for (int nv : {0, 1, 2, 5}) {
    INFO("n = " << nv);
    auto [rv, dv] = s.run(fetch(result, da), feed(a, 1.1), feed(n, nv));
    CHECK(rv.scalar() == Approx(host(1.1, nv).first).epsilon(1e-12));
    CHECK(dv.scalar() == Approx(host(1.1, nv).second).epsilon(1e-12));
  }
}

TEST_CASE("dsl control flow: loop invariants are hoisted and entered once", "[dsl][control]") {
  auto m = placeholder<float>("m", dims<8, 8>);
  auto v = placeholder<float>("v", dims<1, 8>);
  // m @ m does not depend on the loop: it is made outside and entered as one invariant.
  auto out = hana::at_c<1>(while_loop([](auto i, auto) { return i < 3; },
                                      [&](auto i, auto h) { return hana::make_tuple(i + 1, matmul(h, matmul(m, m))); },
                                      hana::make_tuple(constant(0), v)));
  client_session s;
  std::vector<float> mv(64, 0.0f), vv(8, 1.0f);
  for (int i = 0; i < 8; ++i) mv[static_cast<std::size_t>(i * 8 + i)] = 2.0f;  // 2 I: m @ m = 4 I
  auto r = s.run(out, feed(m, tensor_of<float, 2>(mv, {8, 8})), feed(v, tensor_of<float, 2>(vv, {1, 8})));
  for (int i = 0; i < 8; ++i) CHECK(r(0, i) == Approx(64.0f));
  const graph& g = s.current_graph();
  int hoisted = 0, inside = 0;
  for (int id = 0; id < g.size(); ++id) {
    if (g.at(id).op() != "MatMul") continue;
    bool entered = false;
    for (const auto& in : g.at(id).inputs()) entered = entered || g.at(in).op() == "Enter" || g.at(in).op() == "Identity";
    (entered ? inside : hoisted) += 1;
  }
  CHECK(hoisted == 1);  // m @ m, outside the loop
  CHECK(inside == 1);   // h @ (m @ m), per iteration
}

TEST_CASE("dsl control flow: a loop variable lowered outside its loop is a clear error", "[dsl][control]") {
  std::optional<handle<std::int32_t>> escaped;
  auto out = while_loop([](auto i) { return i < 3; },
                        [&](auto i) {
                          escaped = i + 1;
                          return i + 1;
                        },
                        constant(0));
  client_session s;
  CHECK(s.run(out).scalar() == 3);
  CHECK_THROWS_WITH(s.run(*escaped), Catch::Contains("a loop variable is lowered outside its loop"));
}

TEST_CASE("dsl control flow: switch_case runs the indexed branch, the last one out of range", "[dsl][control][grad]") {
  auto index = placeholder<std::int32_t>("index", dims<>);
  auto x = placeholder<float>("x", dims<2>);
  auto r = switch_case(index, [&] { return x * 1.0f; }, [&] { return x * 2.0f; }, [&] { return x * 3.0f + 1.0f; });
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(r)>, static_shape<2>>);
  auto dx = grad(reduce_sum(r), x);
  client_session s;
  for (int i : {0, 1, 2, 7, -1}) {
    INFO("index " << i);
    const float k = i == 0 ? 1.0f : i == 1 ? 2.0f : 3.0f;
    auto [rv, dv] = s.run(fetch(r, dx), feed(index, i), feed(x, tensor_of<float, 1>({1.5f, -2.0f}, {2})));
    CHECK(rv(0) == Approx(1.5f * k + (k == 3.0f ? 1.0f : 0.0f)));
    CHECK(rv(1) == Approx(-2.0f * k + (k == 3.0f ? 1.0f : 0.0f)));
    CHECK(dv(0) == Approx(k));
    CHECK(dv(1) == Approx(k));
  }
}

TEST_CASE("dsl control flow: foldl over a dyn or static first dim, with its gradient", "[dsl][control][grad]") {
  // acc = acc * 0.5 + x_i over the rows of elems [dyn, 3].
  auto elems = placeholder<double>("elems", dims<dyn, 3>);
  auto folded = foldl([](auto acc, auto row) { return acc * 0.5 + row; }, elems, zeros<double>(dims<3>));
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(folded)>, static_shape<3>>);
  auto d = grad(reduce_sum(folded), elems);
  // Two accumulators over a static first dim: the sum and the product of 4 scalars.
  auto four = placeholder<double>("four", dims<4>);
  auto both = foldl([](auto sum, auto product, auto v) { return hana::make_tuple(sum + v, product * v); }, four,
                    hana::make_tuple(constant(0.0), constant(1.0)));
  client_session s;
  for (int n : {0, 1, 5}) {
    INFO(n << " rows");
    std::vector<double> ev;
    for (int i = 0; i < n * 3; ++i) ev.push_back(std::sin(0.3 * i + 0.1));
    auto [fv, dv] = s.run(fetch(folded, d), feed(elems, tensor_of<double, 2>(ev, {n, 3})));
    for (int c = 0; c < 3; ++c) {
      double acc = 0;
      for (int i = 0; i < n; ++i) acc = acc * 0.5 + ev[static_cast<std::size_t>(i * 3 + c)];
      CHECK(fv(c) == Approx(acc).epsilon(1e-12));
      for (int i = 0; i < n; ++i) CHECK(dv(i, c) == Approx(std::pow(0.5, n - 1 - i)).epsilon(1e-12));
    }
  }
  auto [sv, pv] = s.run(fetch(hana::at_c<0>(both), hana::at_c<1>(both)), feed(four, tensor_of<double, 1>({1.5, -2.0, 3.0, 0.5}, {4})));
  CHECK(sv.scalar() == Approx(3.0));
  CHECK(pv.scalar() == Approx(-4.5));
}

TEST_CASE("dsl control flow: a loop inside a branch runs only when the branch is taken", "[dsl][control][grad]") {
  auto x = placeholder<double>("x", dims<>);
  auto n = placeholder<std::int32_t>("n", dims<>);
  // x > 0 ? x^n (a loop) : -x; and the gradient.
  auto r = cond(
      x > 0.0,
      [&] {
        return hana::at_c<1>(while_loop([&](auto i, auto) { return i < n; },
                                        [&](auto i, auto p) { return hana::make_tuple(i + 1, p * x); },
                                        hana::make_tuple(constant(0), constant(1.0))));
      },
      [&] { return -x; });
  auto dr = grad(r, x);
  client_session s;
  for (double xv : {1.5, -2.0})
    for (int nv : {0, 3}) {
      INFO("x = " << xv << ", n = " << nv);
      auto [rv, dv] = s.run(fetch(r, dr), feed(x, xv), feed(n, nv));
      CHECK(rv.scalar() == Approx(xv > 0 ? std::pow(xv, nv) : -xv));
      CHECK(dv.scalar() == Approx(xv > 0 ? nv * std::pow(xv, nv - 1) : -1.0));
    }
}

TEST_CASE("dsl control flow: scan stacks each step's accumulators, forwards and in reverse", "[dsl][control]") {
  auto x = placeholder<double>("x", dims<dyn, 3>);
  auto w = placeholder<double>("w", dims<dyn>);
  auto c = placeholder<double>("c", dims<3>);
  auto step = [&](auto acc, auto row) { return acc * 0.5 + row * c; };
  auto forward = scan(step, x, zeros<double>(dims<3>));
  scan_options from_the_end;
  from_the_end.reverse = true;
  auto backward = scan(step, x, zeros<double>(dims<3>), from_the_end);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(forward)>, static_shape<dyn, 3>>);
  // Two accumulators over two element tensors: a weighted running sum and a count.
  auto both = scan([](auto sum, auto count, auto row, auto weight) { return hana::make_tuple(sum + row * weight, count + 1); },
                   hana::make_tuple(x, w), hana::make_tuple(zeros<double>(dims<3>), constant(0)));
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(hana::at_c<1>(both))>, static_shape<dyn>>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(hana::at_c<1>(both))>, std::int32_t>);
  // A static first dim gives a static stack.
  auto fixed = placeholder<float>("fixed", dims<4, 2>);
  auto prefix = scan([](auto acc, auto row) { return acc + row; }, fixed, zeros<float>(dims<2>));
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(prefix)>, static_shape<4, 2>>);
  client_session s;
  const std::vector<double> cv{1.0, -2.0, 0.5};
  for (int n : {0, 1, 6}) {
    INFO(n << " rows");
    std::vector<double> xv, wv;
    for (int i = 0; i < n * 3; ++i) xv.push_back(std::sin(0.4 * i + 0.2));
    for (int i = 0; i < n; ++i) wv.push_back(0.5 + i);
    auto [fv, bv, sv, kv] = s.run(fetch(forward, backward, hana::at_c<0>(both), hana::at_c<1>(both)),
                                  feed(x, tensor_of<double, 2>(xv, {n, 3})), feed(w, tensor_of<double, 1>(wv, {n})),
                                  feed(c, tensor_of<double, 1>(cv, {3})));
    CHECK(fv.shape() == shape{n, 3});
    CHECK(bv.shape() == shape{n, 3});
    CHECK(sv.shape() == shape{n, 3});
    CHECK(kv.shape() == shape{n});
    for (int col = 0; col < 3; ++col) {
      double acc = 0, sum = 0;
      for (int i = 0; i < n; ++i) {
        const double xi = xv[static_cast<std::size_t>(i * 3 + col)];
        acc = acc * 0.5 + xi * cv[static_cast<std::size_t>(col)];
        sum += xi * wv[static_cast<std::size_t>(i)];
        CHECK(fv(i, col) == Approx(acc).epsilon(1e-12));
        CHECK(sv(i, col) == Approx(sum).epsilon(1e-12));
      }
      acc = 0;
      for (int i = n - 1; i >= 0; --i) {
        acc = acc * 0.5 + xv[static_cast<std::size_t>(i * 3 + col)] * cv[static_cast<std::size_t>(col)];
        CHECK(bv(i, col) == Approx(acc).epsilon(1e-12));
      }
    }
    for (int i = 0; i < n; ++i) CHECK(kv(i) == i + 1);
  }
  auto pv = s.run(prefix, feed(fixed, tensor_of<float, 2>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2})));
  CHECK(pv.to_vector() == std::vector<float>{1, 2, 4, 6, 9, 12, 16, 20});
}

TEST_CASE("dsl control flow: map_fn stacks fn of each row, static and dyn results, tuples", "[dsl][control]") {
  auto x = placeholder<float>("x", dims<dyn, 3>);
  auto c = placeholder<float>("c", dims<3>);
  auto xd = placeholder<float>("xd", dims<dyn, dyn>);
  auto mapped = map_fn([&](auto row) { return tanh(row) * c; }, x);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(mapped)>, static_shape<dyn, 3>>);
  // Results of dyn shape: the stack is made in the first iteration.
  auto doubled = map_fn([](auto row) { return row * 2.0f + reduce_sum(row); }, xd);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(doubled)>, static_shape<dyn, dyn>>);
  // Two element tensors in, two results out (a row and a scalar each).
  auto pair = map_fn([](auto a, auto b) { return hana::make_tuple(a * b, reduce_max(a)); }, hana::make_tuple(x, x * 2.0f));
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(hana::at_c<1>(pair))>, static_shape<dyn>>);
  scan_options from_the_end;
  from_the_end.reverse = true;
  auto reversed = map_fn([&](auto row) { return tanh(row) * c; }, x, from_the_end);
  const std::vector<float> cv{1.0f, -2.0f, 0.5f};
  for (int threads : {1, 2}) {
    client_options o;
    o.session.inter_op_threads = threads;
    client_session s(o);
    for (int n : {0, 1, 5}) {
      INFO(n << " rows, " << threads << " threads");
      std::vector<float> xv;
      for (int i = 0; i < n * 3; ++i) xv.push_back(std::cos(0.6f * static_cast<float>(i)));
      auto [mv, dv, pa, pb, rv] = s.run(fetch(mapped, doubled, hana::at_c<0>(pair), hana::at_c<1>(pair), reversed),
                                        feed(x, tensor_of<float, 2>(xv, {n, 3})), feed(xd, tensor_of<float, 2>(xv, {n, 3})),
                                        feed(c, tensor_of<float, 1>(cv, {3})));
      CHECK(mv.shape() == shape{n, 3});
      CHECK(dv.shape() == (n == 0 ? shape{0, 0} : shape{n, 3}));  // an empty map has no row to size the stack
      CHECK(pb.shape() == shape{n});
      for (int i = 0; i < n; ++i) {
        float row_sum = 0, row_max = -1e30f;
        for (int k = 0; k < 3; ++k) row_sum += xv[static_cast<std::size_t>(i * 3 + k)];
        for (int k = 0; k < 3; ++k) row_max = std::max(row_max, xv[static_cast<std::size_t>(i * 3 + k)]);
        for (int k = 0; k < 3; ++k) {
          const float v = xv[static_cast<std::size_t>(i * 3 + k)];
          CHECK(mv(i, k) == Approx(std::tanh(v) * cv[static_cast<std::size_t>(k)]));
          CHECK(rv(i, k) == mv(i, k));
          CHECK(dv(i, k) == Approx(v * 2.0f + row_sum));
          CHECK(pa(i, k) == Approx(v * v * 2.0f));
        }
        CHECK(pb(i) == row_max);
      }
    }
  }
}

TEST_CASE("dsl control flow: scan's and map_fn's gradients match central differences", "[dsl][control][grad]") {
  auto x = placeholder<double>("x", dims<dyn, 3>);
  auto c = placeholder<double>("c", dims<3>);
  auto a0 = placeholder<double>("a0", dims<3>);
  auto wt = placeholder<double>("wt", dims<dyn, 3>);
  auto xd = placeholder<double>("xd", dims<dyn, dyn>);
  auto stack = scan([&](auto acc, auto row) { return tanh(acc * c + row); }, x, a0);
  scan_options from_the_end;
  from_the_end.reverse = true;
  auto back = scan([&](auto acc, auto row) { return acc * row + c; }, x, a0, from_the_end);
  auto mapped = map_fn([&](auto row) { return hana::make_tuple(exp(row * 0.5) * c, reduce_sum(row * row)); }, x);
  auto dynamic = map_fn([](auto row) { return tanh(row) * row; }, xd);
  auto loss = reduce_sum(stack * wt) + reduce_sum(back * back) * 0.25 + reduce_sum(hana::at_c<0>(mapped) * wt) +
              reduce_sum(square(hana::at_c<1>(mapped))) * 0.1 + reduce_sum(dynamic * dynamic);
  auto [dx, dc, da0, dxd] = grad(loss, x, c, a0, xd);
  client_session s;
  const std::vector<double> cv{0.7, -0.4, 0.9}, av{0.1, -0.2, 0.3};
  for (int n : {0, 1, 4}) {
    INFO(n << " rows");
    std::vector<double> xv, wv;
    for (int i = 0; i < n * 3; ++i) xv.push_back(0.8 * std::sin(0.5 * i + 0.3));
    for (int i = 0; i < n * 3; ++i) wv.push_back(std::cos(0.7 * i));
    auto value = [&](const std::vector<double>& xs, const std::vector<double>& cs, const std::vector<double>& as,
                     const std::vector<double>& ds) {
      return s.run(loss, feed(x, tensor_of<double, 2>(xs, {n, 3})), feed(c, tensor_of<double, 1>(cs, {3})),
                   feed(a0, tensor_of<double, 1>(as, {3})), feed(wt, tensor_of<double, 2>(wv, {n, 3})),
                   feed(xd, tensor_of<double, 2>(ds, {n, 3})))
          .scalar();
    };
    auto [gx, gc, ga, gd] = s.run(fetch(dx, dc, da0, dxd), feed(x, tensor_of<double, 2>(xv, {n, 3})),
                                  feed(c, tensor_of<double, 1>(cv, {3})), feed(a0, tensor_of<double, 1>(av, {3})),
                                  feed(wt, tensor_of<double, 2>(wv, {n, 3})), feed(xd, tensor_of<double, 2>(xv, {n, 3})));
    check_gradient(gx.flat(), numeric_gradient([&](const std::vector<double>& v) { return value(v, cv, av, xv); }, xv));
    check_gradient(gc.flat(), numeric_gradient([&](const std::vector<double>& v) { return value(xv, v, av, xv); }, cv));
    check_gradient(ga.flat(), numeric_gradient([&](const std::vector<double>& v) { return value(xv, cv, v, xv); }, av));
    check_gradient(gd.flat(), numeric_gradient([&](const std::vector<double>& v) { return value(xv, cv, av, v); }, xv));
  }
  // The rows' gradients are added into the elements' gradient in place, one row each.
  CHECK(count_op(s.current_graph(), "TensorScatterAdd") >= 1);
}

TEST_CASE("dsl control flow: scan without an initializer starts from the first element", "[dsl][control][grad]") {
  auto x = placeholder<double>("x", dims<dyn, 2>);
  auto products = scan([](auto acc, auto row) { return acc * row; }, x);
  scan_options from_the_end;
  from_the_end.reverse = true;
  auto suffix_sums = scan([](auto acc, auto row) { return acc + row; }, x, from_the_end);
  auto both = scan([](auto a, auto b, auto ra, auto rb) { return hana::make_tuple(a + ra, b * rb); }, hana::make_tuple(x, x * 2.0));
  auto dx = grad(reduce_sum(products), x);
  client_session s;
  for (int n : {1, 4}) {
    INFO(n << " rows");
    std::vector<double> xv;
    for (int i = 0; i < n * 2; ++i) xv.push_back(1.0 + 0.25 * i);
    auto [pv, sv, av, bv, dv] = s.run(fetch(products, suffix_sums, hana::at_c<0>(both), hana::at_c<1>(both), dx),
                                      feed(x, tensor_of<double, 2>(xv, {n, 2})));
    for (int col = 0; col < 2; ++col) {
      auto at = [&](int i) { return xv[static_cast<std::size_t>(i * 2 + col)]; };
      double p = 1, sum = 0, twice = 1;
      for (int i = 0; i < n; ++i) {
        p *= at(i);
        sum += at(i);
        twice *= 2 * at(i);
        CHECK(pv(i, col) == Approx(p).epsilon(1e-12));
        CHECK(av(i, col) == Approx(sum).epsilon(1e-12));
        CHECK(bv(i, col) == Approx(twice).epsilon(1e-12));
      }
      double suffix = 0;
      for (int i = n - 1; i >= 0; --i) CHECK(sv(i, col) == Approx(suffix += at(i)).epsilon(1e-12));
      // d/dx_k of the sum of the running products: the sum over i >= k of prod_{j <= i, j != k} x_j.
      for (int k = 0; k < n; ++k) {
        double want = 0;
        for (int i = k; i < n; ++i) {
          double term = 1;
          for (int j = 0; j <= i; ++j) term *= j == k ? 1.0 : at(j);
          want += term;
        }
        CHECK(dv(k, col) == Approx(want).epsilon(1e-12));
      }
    }
  }
  // No first element to start from.
  REQUIRE_THROWS_WITH(s.run(products, feed(x, tensor_of<double, 2>(std::vector<double>{}, {0, 2}))),
                      Catch::Contains("(GatherNd)") && Catch::Contains("is not in shape [0,2]"));
}

TEST_CASE("dsl control flow: grad inside a while_loop body is each iteration's gradient (gradient descent in a loop)", "[dsl][control][grad]") {
  // w <- w - lr * d/dw sum(a (w - c)^2), from w = 0: w_n = c (1 - (1 - 2 a lr)^n), by hand.
  auto c = placeholder<double>("c", dims<3>);
  auto n = placeholder<int>("n", dims<>);
  auto a = variable<double>("a", dims<>, 1.5);  // read inside the loop: it enters as an invariant
  auto out = while_loop([&](auto i, auto) { return i < n; },
                        [&](auto i, auto w) {
                          auto loss = reduce_sum(a * square(w - c));
                          return hana::make_tuple(i + 1, w - grad(loss, w) * 0.1);
                        },
                        hana::make_tuple(constant(0), zeros<double>(dims<3>)));
  // Newton's method for sqrt(s) in a loop, the derivative by grad: x <- x - (x^2 - s) / (2x).
  auto s2 = placeholder<double>("s2", dims<2>);
  auto newton = while_loop([&](auto i, auto) { return i < 6; },
                           [&](auto i, auto x) {
                             auto f = identity(square(x) - s2);
                             return hana::make_tuple(i + 1, x - f / grad(reduce_sum(f), x));
                           },
                           hana::make_tuple(constant(0), constant(std::vector<double>{1.0, 1.0}, dims<2>)));
  // A cond in the body on the gradient's path: v <- v + d/dv sum(even i ? v^2 : 3 v), by hand.
  auto branchy = while_loop([&](auto i, auto) { return i < 4; },
                            [&](auto i, auto v) {
                              auto even = equal(i - (i / 2) * 2, constant(0));
                              auto y = cond(even, [&] { return square(v); }, [&] { return v * 3.0; });
                              return hana::make_tuple(i + 1, v + grad(reduce_sum(y), v));
                            },
                            hana::make_tuple(constant(0), constant(std::vector<double>{0.5, -1.0}, dims<2>)));
  // With respect to a variable from outside the loop (it enters the body): the sum over the
  // iterations of d/da (a (i + 1)^2) = 1 + 4 + 9.
  auto summed = while_loop([&](auto i, auto) { return i < 3; },
                           [&](auto i, auto acc) {
                             auto xi = cast<double>(i) + 1.0;
                             return hana::make_tuple(i + 1, acc + grad(a * xi * xi, a));
                           },
                           hana::make_tuple(constant(0), constant(0.0)));
  client_session s;
  s.initialize(hana::at_c<1>(out));
  CHECK(s.run(hana::at_c<1>(summed)).scalar() == Approx(14.0).margin(1e-12));
  {
    const auto v = s.run(hana::at_c<1>(branchy)).to_vector();
    for (std::size_t k = 0; k < 2; ++k) {
      double want = k == 0 ? 0.5 : -1.0;
      for (int i = 0; i < 4; ++i) want += i % 2 == 0 ? 2 * want : 3.0;
      CHECK(v[k] == Approx(want).margin(1e-12));
    }
  }
  const std::vector<double> cv{1.0, -2.0, 0.5};
  for (int nv : {0, 1, 4, 30}) {
    INFO("n = " << nv);
    const auto w = s.run(hana::at_c<1>(out), feed(c, tensor_of<double, 1>(cv, {3})), feed(n, nv)).to_vector();
    for (std::size_t k = 0; k < 3; ++k) CHECK(w[k] == Approx(cv[k] * (1 - std::pow(1 - 2 * 1.5 * 0.1, nv))).margin(1e-12));
  }
  const auto roots = s.run(hana::at_c<1>(newton), feed(s2, tensor_of<double, 1>(std::vector<double>{2.0, 9.0}, {2}))).to_vector();
  CHECK(roots[0] == Approx(std::sqrt(2.0)).epsilon(1e-12));
  CHECK(roots[1] == Approx(3.0).epsilon(1e-9));
}
