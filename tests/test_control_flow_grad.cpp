// Gradients through while loops and conds (graph/gradients.hpp): against central
// differences in float64, against the gradient of the same computation unrolled on the
// host, and against derivatives worked out by hand; nested loops, a branch in a loop and a
// loop in a branch; several iterations in flight on two threads.
#include "support/gradient_check.hpp"
#include "support/helpers.hpp"

#include <cmath>
#include <string>
#include <vector>

using namespace weft;
using namespace weft::test;

namespace {

using weft::test::i64;
using weft::test::op;

output f64(graph& g, double v) { return g.constant(tensor::scalar(v)); }
std::vector<output> outs(std::initializer_list<output> o) { return o; }

session_options two_threads() {
  session_options o;
  o.inter_op_threads = 2;
  o.intra_op_threads = 2;
  return o;
}

// h <- tanh(h W + X[i]) for i < steps, h [1, k], W [k, k], X [steps, k]: in a while loop,
// or unrolled when `unrolled`.
output rnn(graph& g, output h0, output w, output x, std::int64_t steps, bool unrolled, std::int64_t parallel = 10) {
  auto row = [&](output h, output xs, output i, output shape) {
    auto xi = op(g, "Reshape", {op(g, "GatherV2", {xs, i, g.constant(tensor::scalar(std::int32_t{0}))}), shape});
    return op(g, "Tanh", {op(g, "Add", {op(g, "MatMul", {h, w}), xi})});
  };
  if (unrolled) {
    output h = h0;
    for (std::int64_t i = 0; i < steps; ++i) h = row(h, x, i64(g, i), g.constant(tensor::from_vector(std::vector<std::int64_t>{1, -1})));
    return h;
  }
  auto out = while_loop(
      g, {i64(g, 0), h0},
      [&](loop_scope& s, const std::vector<output>& v) { return op(g, "Less", {v[0], s.invariant(i64(g, steps))}); },
      [&](loop_scope& s, const std::vector<output>& v) {
        auto xi = op(g, "Reshape", {op(g, "GatherV2", {s.invariant(x), v[0], s.invariant(g.constant(tensor::scalar(std::int32_t{0})))}),
                                    s.invariant(g.constant(tensor::from_vector(std::vector<std::int64_t>{1, -1})))});
        auto h = op(g, "Tanh", {op(g, "Add", {op(g, "MatMul", {v[1], s.invariant(w)}), xi})});
        return outs({op(g, "Add", {v[0], s.invariant(i64(g, 1))}), h});
      },
      while_options{"rnn", parallel, -1});
  return out[1];
}

}  // namespace

TEST_CASE("loop gradients: an RNN in a while loop against central differences", "[control][grad]") {
  for (std::int64_t steps : {0, 1, 4}) {
    INFO(steps << " steps");
    auto build = [&](graph& g, const std::vector<output>& in) { return rnn(g, in[0], in[1], in[2], steps, false); };
    const std::vector<input_spec> specs{{shape{1, 3}, -0.8, 0.8}, {shape{3, 3}, -0.6, 0.6}, {shape{std::max<std::int64_t>(steps, 1), 3}, -0.5, 0.5}};
    CHECK(jacobian_error(build, specs) < 1e-6);
    CHECK(jacobian_error(build, specs, two_threads()) < 1e-6);
  }
}

TEST_CASE("loop gradients: equal to the gradient of the unrolled loop, whatever the iterations in flight", "[control][grad]") {
  const std::int64_t steps = 6;
  std::vector<std::vector<double>> expected;
  for (int variant = 0; variant < 4; ++variant) {
    const bool unrolled = variant == 0;
    const std::int64_t parallel = variant == 1 ? 1 : 10;
    graph g;
    auto h0 = g.constant(tensor::from_vector(std::vector<double>{0.3, -0.2, 0.5}, shape{1, 3}));
    auto w = g.placeholder(dtype::float64, partial_shape({3, 3}), "w");
    std::vector<double> xv;
    for (int i = 0; i < steps * 3; ++i) xv.push_back(std::sin(0.7 * i));
    auto x = g.constant(tensor::from_vector(xv, shape{steps, 3}));
    auto h = rnn(g, h0, w, x, steps, unrolled, parallel);
    auto loss = op(g, "Sum", {op(g, "Square", {h}), g.constant(tensor::from_vector(std::vector<std::int32_t>{0, 1}))});
    auto d = add_gradients(g, {loss}, {w, h0});
    std::vector<double> wv;
    for (int i = 0; i < 9; ++i) wv.push_back(0.4 * std::cos(1.3 * i));
    session s(g, variant == 3 ? two_threads() : one_thread());
    for (int rep = 0; rep < 3; ++rep) {
      auto r = s.run({{w, tensor::from_vector(wv, shape{3, 3})}}, {d[0], d[1]});
      std::vector<double> got = r[0].to_vector<double>();
      for (double v : r[1].to_vector<double>()) got.push_back(v);
      if (unrolled && rep == 0) expected.push_back(got);
      INFO("variant " << variant << ", rep " << rep);
      REQUIRE(got.size() == expected[0].size());
      for (std::size_t k = 0; k < got.size(); ++k) CHECK(got[k] == Approx(expected[0][k]).epsilon(1e-12).margin(1e-14));
    }
  }
}

TEST_CASE("loop gradients: zero iterations pass the gradient through, in counted and bounded loops", "[control][grad]") {
  graph g;
  auto x = g.placeholder(dtype::float64, partial_shape(std::vector<std::int64_t>{}), "x");
  auto n = g.placeholder(dtype::int64, partial_shape(std::vector<std::int64_t>{}), "n");
  // y = x^n * 1 by repeated multiplication; z = 2 + n x by repeated addition, at most 3 times.
  auto power = while_loop(
      g, {i64(g, 0), f64(g, 1.0)},
      [&](loop_scope& s, const std::vector<output>& v) { return op(g, "Less", {v[0], s.invariant(n)}); },
      [&](loop_scope& s, const std::vector<output>& v) {
        return outs({op(g, "Add", {v[0], s.invariant(i64(g, 1))}), op(g, "Mul", {v[1], s.invariant(x)})});
      });
  auto sum = while_loop(
      g, {i64(g, 0), f64(g, 2.0)},
      [&](loop_scope& s, const std::vector<output>& v) { return op(g, "Less", {v[0], s.invariant(n)}); },
      [&](loop_scope& s, const std::vector<output>& v) {
        return outs({op(g, "Add", {v[0], s.invariant(i64(g, 1))}), op(g, "Add", {v[1], s.invariant(x)})});
      },
      while_options{"bounded", 10, 3});
  auto d = add_gradients(g, {power[1], sum[1]}, {x});
  session s(g);
  for (double xv : {0.5, -1.5, 2.0})
    for (std::int64_t nv : {0, 1, 2, 5}) {
      INFO("x = " << xv << ", n = " << nv);
      auto r = s.run({{x, tensor::scalar(xv)}, {n, tensor::scalar(nv)}}, {d[0], power[1], sum[1]});
      CHECK(r[1].scalar_value<double>() == Approx(std::pow(xv, nv)));
      CHECK(r[2].scalar_value<double>() == Approx(2.0 + static_cast<double>(std::min<std::int64_t>(nv, 3)) * xv));
      const double expected = static_cast<double>(nv) * std::pow(xv, static_cast<double>(nv - 1)) + static_cast<double>(std::min<std::int64_t>(nv, 3));
      CHECK(r[0].scalar_value<double>() == Approx(expected).epsilon(1e-12));
    }
}

TEST_CASE("loop gradients: a loop of 10,000 iterations differentiates", "[control][grad]") {
  graph g;
  auto x = g.placeholder(dtype::float64, partial_shape(std::vector<std::int64_t>{}), "x");
  // y = x * c^10000 with c = 1 + 1e-5, as a loop; dy/dc = 10000 x c^9999.
  auto c = g.placeholder(dtype::float64, partial_shape(std::vector<std::int64_t>{}), "c");
  auto out = while_loop(
      g, {i64(g, 0), x},
      [&](loop_scope& s, const std::vector<output>& v) { return op(g, "Less", {v[0], s.invariant(i64(g, 10000))}); },
      [&](loop_scope& s, const std::vector<output>& v) {
        return outs({op(g, "Add", {v[0], s.invariant(i64(g, 1))}), op(g, "Mul", {v[1], s.invariant(c)})});
      });
  auto d = add_gradients(g, {out[1]}, {x, c});
  session s(g);
  auto r = s.run({{x, tensor::scalar(3.0)}, {c, tensor::scalar(1.0 + 1e-5)}}, {d[0], d[1]});
  CHECK(r[0].scalar_value<double>() == Approx(std::pow(1.0 + 1e-5, 10000)).epsilon(1e-10));
  CHECK(r[1].scalar_value<double>() == Approx(3.0 * 10000 * std::pow(1.0 + 1e-5, 9999)).epsilon(1e-10));
}

TEST_CASE("loop gradients: nested loops, the inner one using the outer one's values", "[control][grad]") {
  // x^(n m) by nested loops: the inner loop multiplies by x m times, n times over.
  {
    graph g;
    auto x = g.placeholder(dtype::float64, partial_shape(std::vector<std::int64_t>{}), "x");
    auto n = g.placeholder(dtype::int64, partial_shape(std::vector<std::int64_t>{}), "n");
    auto m = g.placeholder(dtype::int64, partial_shape(std::vector<std::int64_t>{}), "m");
    auto out = while_loop(
        g, {i64(g, 0), f64(g, 1.0)},
        [&](loop_scope& s, const std::vector<output>& v) { return op(g, "Less", {v[0], s.invariant(n)}); },
        [&](loop_scope& s, const std::vector<output>& v) {
          auto xo = s.invariant(x), mo = s.invariant(m);
          auto inner = while_loop(
              g, {op(g, "ZerosLike", {v[0]}), v[1]},
              [&](loop_scope& t, const std::vector<output>& u) { return op(g, "Less", {u[0], t.invariant(mo)}); },
              [&](loop_scope& t, const std::vector<output>& u) {
                return outs({op(g, "Add", {u[0], t.invariant(op(g, "OnesLike", {v[0]}))}), op(g, "Mul", {u[1], t.invariant(xo)})});
              },
              while_options{"inner", 10, -1});
          return outs({op(g, "Add", {v[0], s.invariant(i64(g, 1))}), inner[1]});
        },
        while_options{"outer", 10, -1});
    auto d = add_gradients(g, {out[1]}, {x});
    for (auto opts : {one_thread(), two_threads()}) {
      session s(g, opts);
      for (auto [nv, mv] : {std::pair<std::int64_t, std::int64_t>{0, 3}, {2, 0}, {2, 3}, {3, 1}, {4, 2}}) {
        INFO("n = " << nv << ", m = " << mv);
        auto r = s.run({{x, tensor::scalar(1.1)}, {n, tensor::scalar(nv)}, {m, tensor::scalar(mv)}}, {out[1], d[0]});
        const double k = static_cast<double>(nv * mv);
        CHECK(r[0].scalar_value<double>() == Approx(std::pow(1.1, k)));
        CHECK(r[1].scalar_value<double>() == Approx(k * std::pow(1.1, k - 1)).epsilon(1e-12));
      }
    }
  }
  // Outer: a <- inner(a), twice; inner: b <- tanh(b w) + a, three times (a from the outer
  // iteration, a loop invariant of the inner loop); against central differences.
  auto build = [](graph& g, const std::vector<output>& in) {
    auto out = while_loop(
        g, {i64(g, 0), in[0]},
        [&](loop_scope& s, const std::vector<output>& v) { return op(g, "Less", {v[0], s.invariant(i64(g, 2))}); },
        [&](loop_scope& s, const std::vector<output>& v) {
          auto w = s.invariant(in[1]);
          auto a = v[1];
          auto inner = while_loop(
              g, {op(g, "ZerosLike", {v[0]}), a},
              [&](loop_scope& t, const std::vector<output>& u) {
                return op(g, "Less", {u[0], t.invariant(op(g, "Add", {op(g, "OnesLike", {v[0]}), op(g, "OnesLike", {v[0]})}))});
              },
              [&](loop_scope& t, const std::vector<output>& u) {
                auto b = op(g, "Add", {op(g, "Tanh", {op(g, "Mul", {u[1], t.invariant(w)})}), t.invariant(a)});
                return outs({op(g, "Add", {u[0], t.invariant(op(g, "OnesLike", {v[0]}))}), b});
              },
              while_options{"inner", 10, -1});
          return outs({op(g, "Add", {v[0], s.invariant(i64(g, 1))}), inner[1]});
        },
        while_options{"outer", 10, -1});
    return out[1];
  };
  const std::vector<input_spec> specs{{shape{2}, -0.5, 0.5}, {shape{2}, -0.9, 0.9}};
  CHECK(jacobian_error(build, specs) < 1e-6);
  CHECK(jacobian_error(build, specs, two_threads()) < 1e-6);
}

TEST_CASE("cond gradients: the gradient goes to the branch that ran", "[control][grad]") {
  graph g;
  auto x = g.placeholder(dtype::float64, partial_shape(std::vector<std::int64_t>{}), "x");
  auto w = g.placeholder(dtype::float64, partial_shape(std::vector<std::int64_t>{}), "w");
  // x > 1 ? x * x * w : 5 (the else side uses neither input: its gradients are zeros).
  auto p = op(g, "Greater", {x, f64(g, 1.0)});
  auto r = cond(
      g, p, {x, w},
      [&](const branch& b) { return outs({op(g, "Mul", {op(g, "Mul", {b.inputs[0], b.inputs[0]}), b.inputs[1]})}); },
      [&](const branch& b) { return outs({g.constant(tensor::scalar(5.0), node_options("five").after({b.pivot})).out(0)}); });
  auto d = add_gradients(g, {r[0]}, {x, w});
  session s(g);
  for (double xv : {0.5, 1.0, 3.0}) {
    INFO("x = " << xv);
    auto got = s.run({{x, tensor::scalar(xv)}, {w, tensor::scalar(0.7)}}, {r[0], d[0], d[1]});
    const bool taken = xv > 1.0;
    CHECK(got[0].scalar_value<double>() == Approx(taken ? xv * xv * 0.7 : 5.0));
    CHECK(got[1].scalar_value<double>() == Approx(taken ? 2 * xv * 0.7 : 0.0));
    CHECK(got[2].scalar_value<double>() == Approx(taken ? xv * xv : 0.0));
  }
  // Both sides differentiable, against central differences on each side of the switch.
  for (double bias : {-2.0, 2.0}) {
    auto build = [bias](graph& h, const std::vector<output>& in) {
      auto pred = op(h, "Greater", {op(h, "Sum", {in[0], h.constant(tensor::from_vector(std::vector<std::int32_t>{0}))}), f64(h, bias)});
      return cond(
          h, pred, {in[0], in[1]},
          [&](const branch& b) { return outs({op(h, "Mul", {op(h, "Tanh", {b.inputs[0]}), b.inputs[1]})}); },
          [&](const branch& b) { return outs({op(h, "Sub", {op(h, "Square", {b.inputs[0]}), b.inputs[0]})}); })[0];
    };
    CHECK(jacobian_error(build, {{shape{3}, -0.5, 0.5}, {shape{3}, -1.0, 1.0}}) < 1e-6);
  }
}

TEST_CASE("control-flow gradients: a branch in a loop and a loop in a branch", "[control][grad]") {
  // Per iteration i: i even ? h * w : tanh(h) + w, four iterations; against central differences.
  auto branchy = [](graph& g, const std::vector<output>& in) {
    auto out = while_loop(
        g, {i64(g, 0), in[0]},
        [&](loop_scope& s, const std::vector<output>& v) { return op(g, "Less", {v[0], s.invariant(i64(g, 4))}); },
        [&](loop_scope& s, const std::vector<output>& v) {
          auto two = s.invariant(i64(g, 2));
          auto even = op(g, "Equal", {op(g, "Mul", {op(g, "Div", {v[0], two}), two}), v[0]});
          auto w = s.invariant(in[1]);
          auto h = cond(
              g, even, {v[1], w}, [&](const branch& b) { return outs({op(g, "Mul", {b.inputs[0], b.inputs[1]})}); },
              [&](const branch& b) { return outs({op(g, "Add", {op(g, "Tanh", {b.inputs[0]}), b.inputs[1]})}); });
          return outs({op(g, "Add", {v[0], s.invariant(i64(g, 1))}), h[0]});
        });
    return out[1];
  };
  const std::vector<input_spec> specs{{shape{2}, 0.2, 0.9}, {shape{2}, 0.5, 1.5}};
  CHECK(jacobian_error(branchy, specs) < 1e-6);
  CHECK(jacobian_error(branchy, specs, two_threads()) < 1e-6);
  // sum(x) > 0 ? (x <- x * w three times) : x * 2; on both sides of the switch.
  for (double lo : {-1.0, 0.2}) {
    auto looped = [](graph& g, const std::vector<output>& in) {
      auto pred = op(g, "Greater", {op(g, "Sum", {in[0], g.constant(tensor::from_vector(std::vector<std::int32_t>{0}))}), f64(g, 0.0)});
      return cond(
          g, pred, {in[0], in[1]},
          [&](const branch& b) {
            auto three = g.constant(tensor::scalar(std::int64_t{3}), node_options().after({b.pivot})).out(0);
            auto zero = g.constant(tensor::scalar(std::int64_t{0}), node_options().after({b.pivot})).out(0);
            auto out = while_loop(
                g, {zero, b.inputs[0]},
                [&](loop_scope& s, const std::vector<output>& v) { return op(g, "Less", {v[0], s.invariant(three)}); },
                [&](loop_scope& s, const std::vector<output>& v) {
                  return outs({op(g, "Add", {v[0], s.invariant(op(g, "OnesLike", {zero}))}), op(g, "Mul", {v[1], s.invariant(b.inputs[1])})});
                });
            return outs({out[1]});
          },
          [&](const branch& b) { return outs({op(g, "Mul", {b.inputs[0], op(g, "Add", {b.inputs[1], b.inputs[1]})})}); })[0];
    };
    CHECK(jacobian_error(looped, {{shape{2}, lo, lo + 0.5}, {shape{2}, 0.5, 1.5}}) < 1e-6);
  }
}

TEST_CASE("control-flow gradients: clear errors", "[control][grad]") {
  graph g;
  auto x = g.placeholder(dtype::float64, partial_shape(std::vector<std::int64_t>{}), "x");
  output inside{}, inside_sum{};
  auto out = while_loop(
      g, {i64(g, 0), x},
      [&](loop_scope& s, const std::vector<output>& v) { return op(g, "Less", {v[0], s.invariant(i64(g, 3))}); },
      [&](loop_scope& s, const std::vector<output>& v) {
        inside = op(g, "Square", {v[1]});
        inside_sum = op(g, "Add", {inside, v[1]});
        return outs({op(g, "Add", {v[0], s.invariant(i64(g, 1))}), inside_sum});
      },
      while_options{"lp", 10, -1});
  require_error([&] { add_gradients(g, {out[1]}, {inside}); }, {"is inside a loop", "(Square)", "differentiate with respect to a value outside it"});
  require_error([&] { add_gradients(g, {inside}, {x}); }, {"is inside a loop", "(Square)", "leaves it through an Exit"});
  // Both inside one body: an iteration's gradient, which needs the body's loop_scope.
  require_error([&] { add_gradients(g, {inside_sum}, {inside}); },
                {"(Add) and the xs are inside a loop", "pass the body's loop_scope (add_gradients(g, scope, ys, xs)"});
}

TEST_CASE("loop gradients: a loop variable with no Exit still carries its gradient back", "[control][grad]") {
  // Built op by op: (i, a, b) with a <- a * x and b <- b + a; only b leaves the loop.
  graph g;
  auto x = g.placeholder(dtype::float64, partial_shape(std::vector<std::int64_t>{}), "x");
  const attr_map frame{{"frame_name", std::string("L")}, {"parallel_iterations", std::int64_t{10}}};
  attr_map invariant = frame;
  invariant.set("is_constant", true);
  std::vector<int> merges;
  std::vector<output> vars;
  for (output init : {i64(g, 0), f64(g, 1.0), f64(g, 0.0)}) {
    auto enter = g.op("Enter", {init}, frame).out(0);
    const node& m = g.op("Merge", {enter, enter});
    merges.push_back(m.id());
    vars.push_back(m.out(0));
  }
  auto pred = op(g, "LoopCond", {op(g, "Less", {vars[0], g.op("Enter", {i64(g, 3)}, invariant).out(0)})});
  std::vector<output> inside;
  output b_exit{};
  for (std::size_t k = 0; k < vars.size(); ++k) {
    const node& sw = g.op("Switch", {vars[k], pred});
    if (k == 2) b_exit = g.op("Exit", {sw.out(0)}).out(0);
    inside.push_back(op(g, "Identity", {sw.out(1)}));
  }
  auto xe = g.op("Enter", {x}, invariant).out(0);
  auto a2 = op(g, "Mul", {inside[1], xe});
  std::vector<output> next{op(g, "Add", {inside[0], g.op("Enter", {i64(g, 1)}, invariant).out(0)}), a2, op(g, "Add", {inside[2], a2})};
  for (std::size_t k = 0; k < next.size(); ++k) g.close_loop(merges[k], g.op("NextIteration", {next[k]}).out(0));
  // b = x + x^2 + x^3: db/dx = 1 + 2x + 3x^2.
  auto d = add_gradients(g, {b_exit}, {x});
  session s(g);
  auto r = s.run({{x, tensor::scalar(1.5)}}, {b_exit, d[0]});
  CHECK(r[0].scalar_value<double>() == Approx(1.5 + 2.25 + 3.375));
  CHECK(r[1].scalar_value<double>() == Approx(1 + 3.0 + 3 * 2.25));
}

TEST_CASE("control-flow gradients: the gradient of each iteration inside a loop body, built op by op", "[control][grad]") {
  // w <- w - 0.1 d/dw sum(a (w - c)^2) from w = 0, a read from outside: w_n = c (1 - (1 - 0.2 a)^n).
  graph g;
  auto c = g.placeholder(dtype::float64, partial_shape(std::vector<std::int64_t>{3}), "c");
  auto a = g.placeholder(dtype::float64, partial_shape(std::vector<std::int64_t>{}), "a");
  auto n = g.placeholder(dtype::int64, partial_shape(std::vector<std::int64_t>{}), "n");
  auto out = while_loop(
      g, {i64(g, 0), g.constant(tensor::from_vector(std::vector<double>{0, 0, 0})), f64(g, 0)},
      [&](loop_scope& s, const std::vector<output>& v) { return op(g, "Less", {v[0], s.invariant(n)}); },
      [&](loop_scope& s, const std::vector<output>& v) {
        const output ai = s.invariant(a);
        const output loss = op(g, "Sum", {op(g, "Mul", {ai, op(g, "Square", {op(g, "Sub", {v[1], s.invariant(c)})})}),
                                          s.invariant(g.constant(tensor::scalar(std::int32_t{0})))});
        const auto d = add_gradients(g, s, {loss}, {v[1], ai});  // by w, and by a where it enters
        return outs({op(g, "Add", {v[0], s.invariant(i64(g, 1))}), op(g, "Sub", {v[1], op(g, "Mul", {d[0], s.invariant(f64(g, 0.1))})}),
                     op(g, "Add", {v[2], d[1]})});
      },
      while_options{"descent", 10, -1});
  session s(g);
  const std::vector<double> cv{1.0, -2.0, 0.5};
  for (std::int64_t nv : {0, 1, 5}) {
    INFO("n = " << nv);
    const auto r = s.run({{c, tensor::from_vector(cv)}, {a, tensor::scalar(1.5)}, {n, tensor::scalar(nv)}}, {out[1], out[2]});
    const auto w = r[0].to_vector<double>();
    double da = 0;  // the sum over iterations of d/da = sum((w_k - c)^2), w_k before the step
    std::vector<double> wk(3, 0.0);
    for (std::int64_t k = 0; k < nv; ++k)
      for (std::size_t j = 0; j < 3; ++j) {
        da += (wk[j] - cv[j]) * (wk[j] - cv[j]);
        wk[j] -= 0.1 * 2 * 1.5 * (wk[j] - cv[j]);
      }
    for (std::size_t j = 0; j < 3; ++j) {
      CHECK(w[j] == Approx(cv[j] * (1 - std::pow(1 - 0.2 * 1.5, static_cast<double>(nv)))).margin(1e-12));
      CHECK(w[j] == Approx(wk[j]).margin(1e-12));
    }
    CHECK(r[1].scalar_value<double>() == Approx(da).margin(1e-12));
  }
}

namespace {
// x^m (x a float64 scalar, m an int64 one) by a loop that multiplies by x m times, built
// where x, m and the int64 scalar `like` are (a loop body: a loop nested in it).
output power_by_loop(graph& g, output like, output x, output m) {
  return while_loop(
             g, {op(g, "ZerosLike", {like}), op(g, "OnesLike", {x})},
             [&](loop_scope& t, const std::vector<output>& u) { return op(g, "Less", {u[0], t.invariant(m)}); },
             [&](loop_scope& t, const std::vector<output>& u) {
               return outs({op(g, "Add", {u[0], t.invariant(op(g, "OnesLike", {like}))}), op(g, "Mul", {u[1], t.invariant(x)})});
             },
             while_options{"power", 10, -1})[1];
}
}  // namespace

TEST_CASE("control-flow gradients: an iteration's gradient inside a loop body through a loop nested in it", "[control][grad]") {
  // w <- w - 0.01 d/dw (w^m a), w^m by an inner loop that multiplies by w m times and a read
  // from outside both loops: d/dw = m w^(m-1) a, and d/da (summed over the outer iterations)
  // = sum_k w_k^m.
  graph g;
  auto a = g.placeholder(dtype::float64, partial_shape(std::vector<std::int64_t>{}), "a");
  auto n = g.placeholder(dtype::int64, partial_shape(std::vector<std::int64_t>{}), "n");
  auto m = g.placeholder(dtype::int64, partial_shape(std::vector<std::int64_t>{}), "m");
  auto out = while_loop(
      g, {i64(g, 0), f64(g, 1.5), f64(g, 0)},
      [&](loop_scope& s, const std::vector<output>& v) { return op(g, "Less", {v[0], s.invariant(n)}); },
      [&](loop_scope& s, const std::vector<output>& v) {
        const output w = v[1], ai = s.invariant(a), mi = s.invariant(m);
        const output loss = op(g, "Mul", {power_by_loop(g, v[0], w, mi), ai});
        const auto d = add_gradients(g, s, {loss}, {w, ai});
        return outs({op(g, "Add", {v[0], s.invariant(i64(g, 1))}), op(g, "Sub", {w, op(g, "Mul", {d[0], s.invariant(f64(g, 0.01))})}),
                     op(g, "Add", {v[2], d[1]})});
      },
      while_options{"descent", 10, -1});
  for (auto opts : {one_thread(), two_threads()}) {
    session s(g, opts);
    for (auto [nv, mv] : {std::pair<std::int64_t, std::int64_t>{0, 3}, {1, 0}, {1, 3}, {4, 2}, {5, 3}}) {
      INFO("n = " << nv << ", m = " << mv);
      const auto r = s.run({{a, tensor::scalar(0.8)}, {n, tensor::scalar(nv)}, {m, tensor::scalar(mv)}}, {out[1], out[2]});
      double w = 1.5, da = 0;
      const double mk = static_cast<double>(mv);
      for (std::int64_t k = 0; k < nv; ++k) {
        da += std::pow(w, mk);
        w -= 0.01 * mk * std::pow(w, mk - 1) * 0.8;
      }
      CHECK(r[0].scalar_value<double>() == Approx(w).epsilon(1e-12));
      CHECK(r[1].scalar_value<double>() == Approx(da).epsilon(1e-12));
    }
  }
}

TEST_CASE("control-flow gradients: nested loops' accumulators inside a loop body are kept apart per iteration of the body", "[control][grad]") {
  // Each iteration of the outer loop takes d/da of a^m (m multiplications by a in an inner
  // loop) on its own: no iteration waits for another, so with ten in flight their inner
  // loops' accumulators share names and differ by the outer iteration. The sum: n m a^(m-1).
  graph g;
  auto a = g.placeholder(dtype::float64, partial_shape(std::vector<std::int64_t>{}), "a");
  auto n = g.placeholder(dtype::int64, partial_shape(std::vector<std::int64_t>{}), "n");
  auto m = g.placeholder(dtype::int64, partial_shape(std::vector<std::int64_t>{}), "m");
  auto out = while_loop(
      g, {i64(g, 0), f64(g, 0)},
      [&](loop_scope& s, const std::vector<output>& v) { return op(g, "Less", {v[0], s.invariant(n)}); },
      [&](loop_scope& s, const std::vector<output>& v) {
        const output ai = s.invariant(a), mi = s.invariant(m);
        const auto d = add_gradients(g, s, {power_by_loop(g, v[0], ai, mi)}, {ai});
        return outs({op(g, "Add", {v[0], s.invariant(i64(g, 1))}), op(g, "Add", {v[1], d[0]})});
      },
      while_options{"sum", 10, -1});
  for (auto opts : {one_thread(), two_threads()}) {
    session s(g, opts);
    for (int repeat = 0; repeat < 5; ++repeat)
      for (auto [nv, mv] : {std::pair<std::int64_t, std::int64_t>{6, 3}, {10, 4}, {3, 0}}) {
        INFO("n = " << nv << ", m = " << mv);
        const auto r = s.run({{a, tensor::scalar(1.25)}, {n, tensor::scalar(nv)}, {m, tensor::scalar(mv)}}, {out[1]});
        const double mk = static_cast<double>(mv);
        CHECK(r[0].scalar_value<double>() == Approx(static_cast<double>(nv) * mk * std::pow(1.25, mk - 1)).epsilon(1e-12));
      }
  }
}

TEST_CASE("control-flow gradients: inside the body of a loop that is itself in a loop, through a third loop, an error says so", "[control][grad]") {
  graph g;
  auto a = g.placeholder(dtype::float64, partial_shape(std::vector<std::int64_t>{}), "a");
  auto three = [&](loop_scope& s, const std::vector<output>& v) { return op(g, "Less", {v[0], s.invariant(i64(g, 3))}); };
  auto count = [&](loop_scope& s, output i) { return op(g, "Add", {i, s.invariant(i64(g, 1))}); };
  test::require_error(
      [&] {
        while_loop(
            g, {i64(g, 0), f64(g, 0)}, three,
            [&](loop_scope& s0, const std::vector<output>& v0) {
              const output a0 = s0.invariant(a);
              auto middle = while_loop(
                  g, {op(g, "ZerosLike", {v0[0]}), v0[1]}, three,
                  [&](loop_scope& s1, const std::vector<output>& v1) {
                    const output a1 = s1.invariant(a0);
                    auto inner = while_loop(
                        g, {op(g, "ZerosLike", {v1[0]}), op(g, "OnesLike", {a1})}, three,
                        [&](loop_scope& s2, const std::vector<output>& v2) {
                          return outs({count(s2, v2[0]), op(g, "Mul", {v2[1], s2.invariant(a1)})});
                        },
                        while_options{"inner", 10, -1});
                    const auto d = add_gradients(g, s1, {inner[1]}, {a1});
                    return outs({count(s1, v1[0]), op(g, "Add", {v1[1], d[0]})});
                  },
                  while_options{"middle", 10, -1});
              return outs({count(s0, v0[0]), middle[1]});
            },
            while_options{"outer", 10, -1});
      },
      {"weft::add_gradients", "reaches a loop nested in it", "is itself inside a loop",
       "built in the body of an outermost loop only"});
}
