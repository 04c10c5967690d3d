// Control flow in the executor (ops/control_flow_ops.hpp, runtime/executor.hpp): Switch
// and Merge, loops of Enter, Merge, Switch, NextIteration and Exit built op by op, nested,
// in branches and with branches inside, on one and two threads, against host loops.
#include "support/helpers.hpp"

#include <cmath>
#include <string>
#include <vector>

using namespace weft;
using namespace weft::test;

namespace {

using weft::test::i64;

output scalar_ph(graph& g, dtype t, const char* name) { return g.placeholder(t, partial_shape(std::vector<std::int64_t>{}), node_options(name)); }

session_options threads(int n) {
  session_options o;
  o.inter_op_threads = n > 1 ? n : 0;
  o.intra_op_threads = n;
  return o;
}

// A loop in frame `name` over loop variables `init` (each entered from the current frame):
// while cond(vars): vars = body(vars). `invariant(v)` enters an outer value as a loop
// invariant. Returns the Exit outputs.
struct loop_builder {
  graph& g;
  std::string name;
  std::int64_t parallel = 10;
  output invariant(output v) {
    return g.op("Enter", {v}, {{"frame_name", name}, {"is_constant", true}, {"parallel_iterations", parallel}}).out(0);
  }
  template <class Cond, class Body>
  std::vector<output> run(const std::vector<output>& init, Cond cond, Body body) {
    std::vector<int> merges;
    std::vector<output> vars;
    for (const auto& v : init) {
      auto enter = g.op("Enter", {v}, {{"frame_name", name}, {"parallel_iterations", parallel}}).out(0);
      const node& m = g.op("Merge", {enter, enter});
      merges.push_back(m.id());
      vars.push_back(m.out(0));
    }
    auto pred = g.op("LoopCond", {cond(vars)}).out(0);
    std::vector<output> inside, exits;
    for (const auto& v : vars) {
      const node& sw = g.op("Switch", {v, pred});
      exits.push_back(g.op("Exit", {sw.out(0)}).out(0));
      inside.push_back(g.op("Identity", {sw.out(1)}).out(0));
    }
    auto next = body(inside);
    for (std::size_t k = 0; k < next.size(); ++k) g.close_loop(merges[k], g.op("NextIteration", {next[k]}).out(0));
    return exits;
  }
};

}  // namespace

TEST_CASE("control flow: Switch and Merge run one branch, and the other's nodes never run", "[control]") {
  graph g;
  auto x = scalar_ph(g, dtype::float64, "x");
  auto p = scalar_ph(g, dtype::boolean, "p");
  const node& sw = g.op("Switch", {x, p}, {}, node_options("switch"));
  auto neg = g.op("Neg", {sw.out(0)}).out(0);
  // A true-branch node that reshapes a scalar to `target` (fed [3]): an error if it ran.
  auto target = g.placeholder(dtype::int32, shape{1}, node_options("target"));
  auto bad = g.op("Reshape", {g.op("Square", {sw.out(1)}).out(0), target});
  auto sq = g.op("Square", {sw.out(1)}).out(0);
  const node& m = g.op("Merge", {neg, sq}, {}, node_options("merge"));
  for (int t : {1, 2}) {
    session s(g, threads(t));
    auto f = s.run({{x, tensor::scalar(3.0)}, {p, tensor::scalar(false)}}, {m.out(0), m.out(1)});
    CHECK(f[0].scalar_value<double>() == -3.0);
    CHECK(f[1].scalar_value<std::int32_t>() == 0);
    auto t_ = s.run({{x, tensor::scalar(3.0)}, {p, tensor::scalar(true)}}, {m.out(0), m.out(1)});
    CHECK(t_[0].scalar_value<double>() == 9.0);
    CHECK(t_[1].scalar_value<std::int32_t>() == 1);
    // A dead value never reaches a fetch: fetching the untaken branch is an error.
    require_error([&] { s.run({{x, tensor::scalar(3.0)}, {p, tensor::scalar(false)}}, {sq}); },
                  {"Square", "untaken branch"});
  }
  // The untaken branch's Reshape is dead, so it does not run: no error.
  session s(g, threads(1));
  auto merged_bad = g.op("Merge", {neg, bad.out(0)}, {}, node_options("merge_bad"));
  s.extend(g);
  const tensor three = tensor::from_vector(std::vector<std::int32_t>{3}, shape{1});
  CHECK(s.run({{x, tensor::scalar(2.0)}, {p, tensor::scalar(false)}, {target, three}}, {merged_bad.out(0)})[0]
            .scalar_value<double>() == -2.0);
  require_error([&] { s.run({{x, tensor::scalar(2.0)}, {p, tensor::scalar(true)}, {target, three}}, {merged_bad.out(0)}); },
                {"Reshape", "[3]"});
}

TEST_CASE("control flow: a Switch's pred must be a bool scalar at run time", "[control]") {
  graph g;
  auto x = scalar_ph(g, dtype::float32, "x");
  auto p = g.placeholder(dtype::boolean, partial_shape::unknown_rank(), node_options("p"));
  const node& sw = g.op("Switch", {x, p}, {}, node_options("sw"));
  const node& m = g.op("Merge", {sw.out(0), sw.out(1)});
  session s(g, threads(1));
  require_error([&] { s.run({{x, tensor::scalar(1.0f)}, {p, tensor::from_vector(std::vector<bool>{true, false}, shape{2})}}, {m.out(0)}); },
                {"node 'sw' (Switch)", "pred must be a bool scalar", "[2]"});
  CHECK(s.run({{x, tensor::scalar(1.0f)}, {p, tensor::scalar(true)}}, {m.out(0)})[0].scalar_value<float>() == 1.0f);
}

TEST_CASE("control flow: a while loop counts, sums and runs zero times", "[control]") {
  graph g;
  auto n = scalar_ph(g, dtype::int64, "n");
  loop_builder loop{g, "count"};
  auto limit = loop.invariant(n);
  auto one = loop.invariant(i64(g, 1));
  auto out = loop.run({i64(g, 0), i64(g, 0)},
                      [&](const std::vector<output>& v) { return g.op("Less", {v[0], limit}).out(0); },
                      [&](const std::vector<output>& v) {
                        auto sq = g.op("Mul", {v[0], v[0]}).out(0);
                        return std::vector<output>{g.op("Add", {v[0], one}).out(0), g.op("Add", {v[1], sq}).out(0)};
                      });
  for (int t : {1, 2}) {
    session s(g, threads(t));
    for (std::int64_t count : {0, 1, 7, 1000}) {
      INFO(count << " iterations, " << t << " threads");
      auto r = s.run({{n, tensor::scalar(count)}}, {out[0], out[1]});
      std::int64_t sum = 0;
      for (std::int64_t i = 0; i < count; ++i) sum += i * i;
      CHECK(r[0].scalar_value<std::int64_t>() == count);
      CHECK(r[1].scalar_value<std::int64_t>() == sum);
    }
  }
}

TEST_CASE("control flow: a loop of 100,000 iterations completes", "[control]") {
  graph g;
  loop_builder loop{g, "long"};
  auto limit = loop.invariant(i64(g, 100000));
  auto one = loop.invariant(i64(g, 1));
  auto out = loop.run({i64(g, 0)}, [&](const std::vector<output>& v) { return g.op("Less", {v[0], limit}).out(0); },
                      [&](const std::vector<output>& v) { return std::vector<output>{g.op("Add", {v[0], one}).out(0)}; });
  session s(g, threads(1));
  CHECK(s.run({}, {out[0]})[0].scalar_value<std::int64_t>() == 100000);
}

TEST_CASE("control flow: nested loops, a loop in a branch and a branch in a loop", "[control]") {
  graph g;
  auto n = scalar_ph(g, dtype::int64, "n");
  // Outer i < n, inner j < i + 1: total counts the inner iterations, n (n + 1) / 2.
  loop_builder outer{g, "outer"};
  auto n_in = outer.invariant(n);
  auto one_out = outer.invariant(i64(g, 1));
  auto zero_out = outer.invariant(i64(g, 0));
  auto res = outer.run(
      {i64(g, 0), i64(g, 0)}, [&](const std::vector<output>& v) { return g.op("Less", {v[0], n_in}).out(0); },
      [&](const std::vector<output>& v) {
        auto bound = g.op("Add", {v[0], one_out}).out(0);
        loop_builder inner{g, "inner"};
        auto b = inner.invariant(bound);
        auto one_in = inner.invariant(one_out);
        auto inner_out = inner.run(
            {zero_out, v[1]}, [&](const std::vector<output>& w) { return g.op("Less", {w[0], b}).out(0); },
            [&](const std::vector<output>& w) {
              return std::vector<output>{g.op("Add", {w[0], one_in}).out(0), g.op("Add", {w[1], one_in}).out(0)};
            });
        return std::vector<output>{g.op("Add", {v[0], one_out}).out(0), inner_out[1]};
      });
  // A branch in a loop: k counts up to 10, adding 1 on even k and 10 on odd k.
  loop_builder mixed{g, "mixed"};
  auto ten = mixed.invariant(i64(g, 10));
  auto one = mixed.invariant(i64(g, 1));
  auto two = mixed.invariant(i64(g, 2));
  auto zero = mixed.invariant(i64(g, 0));
  auto branchy = mixed.run(
      {i64(g, 0), i64(g, 0)}, [&](const std::vector<output>& v) { return g.op("Less", {v[0], ten}).out(0); },
      [&](const std::vector<output>& v) {
        // k mod 2 == 0, as k - 2 * (k / 2) for non-negative k.
        auto half = g.op("Div", {v[0], two}).out(0);
        auto even = g.op("Equal", {g.op("Sub", {v[0], g.op("Mul", {half, two}).out(0)}).out(0), zero}).out(0);
        const node& sw = g.op("Switch", {v[1], even});
        auto odd_sum = g.op("Add", {sw.out(0), ten}).out(0);
        auto even_sum = g.op("Add", {sw.out(1), one}).out(0);
        auto merged = g.op("Merge", {odd_sum, even_sum}).out(0);
        return std::vector<output>{g.op("Add", {v[0], one}).out(0), merged};
      });
  // A loop in a branch: when p, count to n; else n itself.
  auto p = scalar_ph(g, dtype::boolean, "p");
  const node& sw = g.op("Switch", {n, p});
  loop_builder in_branch{g, "in_branch"};
  auto lim = in_branch.invariant(sw.out(1));
  auto one_b = in_branch.invariant(i64(g, 1));
  auto counted = in_branch.run({g.op("Sub", {sw.out(1), sw.out(1)}).out(0)},
                               [&](const std::vector<output>& v) { return g.op("Less", {v[0], lim}).out(0); },
                               [&](const std::vector<output>& v) { return std::vector<output>{g.op("Add", {v[0], one_b}).out(0)}; });
  auto either = g.op("Merge", {g.op("Neg", {sw.out(0)}).out(0), counted[0]});
  for (int t : {1, 2}) {
    session s(g, threads(t));
    for (std::int64_t count : {0, 1, 5, 30}) {
      INFO(count << ", " << t << " threads");
      auto r = s.run({{n, tensor::scalar(count)}, {p, tensor::scalar(count % 2 == 1)}}, {res[1], branchy[1], either.out(0)});
      CHECK(r[0].scalar_value<std::int64_t>() == count * (count + 1) / 2);
      CHECK(r[1].scalar_value<std::int64_t>() == 5 * 1 + 5 * 10);
      CHECK(r[2].scalar_value<std::int64_t>() == (count % 2 == 1 ? count : -count));
    }
  }
}

TEST_CASE("control flow: iterations in flight are bounded by parallel_iterations, and agree", "[control]") {
  // Each iteration does independent work (a 64x64 product of a loop invariant) and sums its
  // trace; the result is the same whatever the number of iterations in flight.
  std::vector<float> a(64 * 64);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7) % 13) / 13.0f;
  std::vector<float> results;
  for (std::int64_t parallel : {1, 2, 10}) {
    graph g;
    loop_builder loop{g, "work", parallel};
    auto m = loop.invariant(g.constant(tensor::from_vector(a, shape{64, 64})));
    auto limit = loop.invariant(i64(g, 40));
    auto one = loop.invariant(i64(g, 1));
    auto axes = loop.invariant(g.constant(tensor::from_vector(std::vector<std::int32_t>{0, 1}, shape{2})));
    auto out = loop.run({i64(g, 0), g.constant(tensor::scalar(0.0f))},
                        [&](const std::vector<output>& v) { return g.op("Less", {v[0], limit}).out(0); },
                        [&](const std::vector<output>& v) {
                          auto p = g.op("MatMul", {m, m}).out(0);
                          auto s = g.op("Sum", {p, axes}).out(0);
                          return std::vector<output>{g.op("Add", {v[0], one}).out(0), g.op("Add", {v[1], s}).out(0)};
                        });
    for (int t : {1, 2}) {
      session s(g, threads(t));
      results.push_back(s.run({}, {out[1]})[0].scalar_value<float>());
    }
  }
  // 40 times the sum of the entries of a * a, by a naive loop.
  double entries = 0;
  for (std::size_t i = 0; i < 64; ++i)
    for (std::size_t j = 0; j < 64; ++j)
      for (std::size_t k = 0; k < 64; ++k) entries += static_cast<double>(a[i * 64 + k]) * a[k * 64 + j];
  for (float r : results) CHECK(r == Approx(results[0]).epsilon(1e-5));
  CHECK(results[0] == Approx(40 * entries).epsilon(1e-4));
}

namespace {
const bool loop_probe_registered = [] {
  register_op(op_def_builder("TestLoopProbe").input("x: float32").output("y: float32").stateful().shape_fn(ops::same_shape));
  return register_cpu_kernel<test::concurrency_probe>("TestLoopProbe");
}();
}  // namespace

TEST_CASE("control flow: parallel iterations run at once on the inter-op threads", "[control]") {
  // Each iteration's body is a probe of 10,000 elements (neither cheap nor large): with two
  // iterations in flight and an inter-op thread, two probes run at once; with one, never.
  REQUIRE(loop_probe_registered);
  for (std::int64_t parallel : {1, 2}) {
    graph g;
    loop_builder loop{g, "probes", parallel};
    auto x = loop.invariant(g.constant(tensor::from_vector(std::vector<float>(10000, 1.0f), shape{10000})));
    auto limit = loop.invariant(i64(g, 6));
    auto one = loop.invariant(i64(g, 1));
    auto axis = loop.invariant(g.constant(tensor::scalar(std::int32_t{0})));
    auto out = loop.run({i64(g, 0), g.constant(tensor::scalar(0.0f))},
                        [&](const std::vector<output>& v) { return g.op("Less", {v[0], limit}).out(0); },
                        [&](const std::vector<output>& v) {
                          auto s = g.op("Sum", {g.op("TestLoopProbe", {x}).out(0), axis}).out(0);
                          return std::vector<output>{g.op("Add", {v[0], one}).out(0), g.op("Add", {v[1], s}).out(0)};
                        });
    session_options o;
    o.inter_op_threads = 1;
    o.intra_op_threads = 1;
    session sess(g, o);
    test::concurrency_probe::most = 0;
    CHECK(sess.run({}, {out[1]})[0].scalar_value<float>() == 60000.0f);  // six sums of 10,000 ones
    CHECK(test::concurrency_probe::most == parallel);
  }
}

TEST_CASE("control flow: a failing node inside a loop aborts the step cleanly", "[control]") {
  graph g;
  auto n = scalar_ph(g, dtype::int64, "n");
  loop_builder loop{g, "failing"};
  auto limit = loop.invariant(n);
  auto one = loop.invariant(i64(g, 1));
  auto table = loop.invariant(g.constant(tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5}, shape{5})));
  auto axis = loop.invariant(i64(g, 0));
  auto out = loop.run({i64(g, 0), g.constant(tensor::scalar(0.0f))},
                      [&](const std::vector<output>& v) { return g.op("Less", {v[0], limit}).out(0); },
                      [&](const std::vector<output>& v) {
                        auto picked = g.op("GatherV2", {table, v[0], axis}, {}, node_options("pick")).out(0);
                        return std::vector<output>{g.op("Add", {v[0], one}).out(0), g.op("Add", {v[1], picked}).out(0)};
                      });
  for (int t : {1, 2}) {
    session s(g, threads(t));
    CHECK(s.run({{n, tensor::scalar(std::int64_t{5})}}, {out[1]})[0].scalar_value<float>() == 15.0f);
    require_error([&] { s.run({{n, tensor::scalar(std::int64_t{9})}}, {out[1]}); }, {"node 'pick' (GatherV2)", "5"});
    CHECK(s.run({{n, tensor::scalar(std::int64_t{3})}}, {out[1]})[0].scalar_value<float>() == 6.0f);  // the session goes on
  }
}

TEST_CASE("control flow: malformed loops are clear errors", "[control]") {
  graph g;
  auto x = g.constant(tensor::scalar(1.0f));
  auto enter = g.op("Enter", {x}, {{"frame_name", std::string("f")}}).out(0);
  // A non-constant Enter feeding anything but a Merge.
  auto neg = g.op("Neg", {enter}, {}, node_options("neg")).out(0);
  auto ex = g.op("Exit", {neg}).out(0);
  {
    session s(g, threads(1));
    require_error([&] { s.run({}, {ex}); }, {"(Enter)", "node 'neg' (Neg)", "not a Merge", "is_constant"});
  }
  // A fetch from inside a loop.
  {
    graph l;
    loop_builder loop{l, "inside"};
    auto limit = loop.invariant(i64(l, 3));
    auto one = loop.invariant(i64(l, 1));
    output body_value;
    loop.run({i64(l, 0)}, [&](const std::vector<output>& v) { return l.op("Less", {v[0], limit}).out(0); },
             [&](const std::vector<output>& v) {
               body_value = l.op("Add", {v[0], one}, {}, node_options("step")).out(0);
               return std::vector<output>{body_value};
             });
    session s(l, threads(1));
    require_error([&] { s.run({}, {body_value}); }, {"cannot fetch node 'step'", "frame 'inside'", "Exit"});
  }
  // Inputs from two frames.
  auto mixed = g.op("Add", {g.op("Enter", {x}, {{"frame_name", std::string("h")}, {"is_constant", true}}).out(0), x},
                    {}, node_options("mixed")).out(0);
  auto ex2 = g.op("Exit", {mixed}).out(0);
  {
    session s(g, threads(1));
    require_error([&] { s.run({}, {ex2}); }, {"node 'mixed' (Add)", "frame 'h'", "the root frame", "Enter"});
  }
  // An Exit outside any loop.
  auto stray = g.op("Exit", {x}, {}, node_options("stray")).out(0);
  {
    session s(g, threads(1));
    require_error([&] { s.run({}, {stray}); }, {"node 'stray' (Exit)", "not inside a loop"});
  }
  // close_loop's checks.
  auto e2 = g.op("Enter", {x}, {{"frame_name", std::string("k")}}).out(0);
  const node& m = g.op("Merge", {e2, e2}, {}, node_options("m"));
  auto wrong = g.op("NextIteration", {g.constant(tensor::scalar(std::int64_t{1}))}).out(0);
  require_error([&] { g.close_loop(m.id(), wrong); }, {"node 'm' (Merge)", "float32", "int64"});
  require_error([&] { g.close_loop(m.id(), x); }, {"is not a NextIteration"});
  auto vec = g.op("NextIteration", {g.constant(tensor::from_vector(std::vector<float>{1, 2}, shape{2}))}).out(0);
  require_error([&] { g.close_loop(m.id(), vec); }, {"shape", "[]", "[2]"});
  require_error([&] { g.close_loop(neg.node, wrong); }, {"is not a Merge"});
  // Shape functions: pred and LoopCond's input are scalars, Enter needs a frame name.
  auto v = g.constant(tensor::from_vector(std::vector<bool>{true, false}, shape{2}));
  require_error([&] { g.op("Switch", {x, v}); }, {"Switch", "pred"});
  require_error([&] { g.op("LoopCond", {v}); }, {"LoopCond"});
  require_error([&] { g.op("Enter", {x}, {{"frame_name", std::string("")}}); }, {"frame_name must not be empty"});
  require_error([&] { g.op("Enter", {x}, {{"frame_name", std::string("z")}, {"parallel_iterations", std::int64_t{0}}}); },
                {"parallel_iterations must be at least 1"});
}

TEST_CASE("control flow: while_loop and cond build loops and branches into a graph", "[control]") {
  graph g;
  auto n = scalar_ph(g, dtype::int64, "n");
  auto x = scalar_ph(g, dtype::float64, "x");
  // Newton's iteration for sqrt(x), at most `n` steps or until the step is below 1e-12.
  auto roots = while_loop(
      g, {x, g.constant(tensor::scalar(1e30))},
      [&](loop_scope& s, const std::vector<output>& v) {
        return g.op("Greater", {v[1], s.invariant(g.constant(tensor::scalar(1e-12)))}).out(0);
      },
      [&](loop_scope& s, const std::vector<output>& v) {
        auto half = s.invariant(g.constant(tensor::scalar(0.5)));
        auto next = g.op("Mul", {half, g.op("Add", {v[0], g.op("Div", {s.invariant(x), v[0]}).out(0)}).out(0)}).out(0);
        auto step = g.op("Abs", {g.op("Sub", {next, v[0]}).out(0)}).out(0);
        return std::vector<output>{next, step};
      },
      while_options{"newton", 4, -1});
  // A bounded loop: i < 1000 stops after maximum_iterations.
  while_options bounded{"bounded", 10, 7};
  auto counted = while_loop(
      g, {g.constant(tensor::scalar(std::int64_t{0}))},
      [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(i64(g, 1000))}).out(0); },
      [&](loop_scope& s, const std::vector<output>& v) { return std::vector<output>{g.op("Add", {v[0], s.invariant(i64(g, 1))}).out(0)}; },
      bounded);
  // cond: x > 2 ? x * 10 : 5 (a constant, run only on its side through the pivot).
  auto p = g.op("Greater", {x, g.constant(tensor::scalar(2.0))}).out(0);
  auto picked = cond(
      g, p, {x}, [&](const branch& b) { return std::vector<output>{g.op("Mul", {b.inputs[0], g.constant(tensor::scalar(10.0))}).out(0)}; },
      [&](const branch& b) {
        return std::vector<output>{g.constant(tensor::scalar(5.0), node_options("five").after({b.pivot})).out(0)};
      });
  // Gradients through the loop (d sqrt(x) / dx, as Newton's iteration converges) and the branch.
  auto d_root = add_gradients(g, {roots[0]}, {x});
  auto d_picked = add_gradients(g, {picked[0]}, {x});
  require_error([&] { while_loop(g, {x}, [&](loop_scope&, const std::vector<output>& v) { return g.op("Greater", {v[0], v[0]}).out(0); },
                                 [&](loop_scope&, const std::vector<output>&) { return std::vector<output>{}; }); },
                {"while_loop 'while'", "returns 0 values for 1 loop variables"});
  for (int t : {1, 2}) {
    session s(g, threads(t));
    for (double v : {0.5, 2.0, 9.0, 1e6}) {
      INFO(v << ", " << t << " threads");
      auto r = s.run({{x, tensor::scalar(v)}, {n, tensor::scalar(std::int64_t{3})}},
                     {roots[0], counted[0], picked[0], d_root[0], d_picked[0]});
      CHECK(r[0].scalar_value<double>() == Approx(std::sqrt(v)).epsilon(1e-12));
      CHECK(r[1].scalar_value<std::int64_t>() == 7);
      CHECK(r[2].scalar_value<double>() == (v > 2.0 ? v * 10 : 5.0));
      CHECK(r[3].scalar_value<double>() == Approx(0.5 / std::sqrt(v)).epsilon(1e-9));
      CHECK(r[4].scalar_value<double>() == (v > 2.0 ? 10.0 : 0.0));
    }
  }
}

TEST_CASE("control flow: a loop imported from node specs, its back edge named before its source", "[control]") {
  auto constant = [](std::int64_t v) { return attr_map{{"value", tensor::scalar(v)}, {"dtype", dtype::int64}}; };
  const attr_map frame{{"frame_name", std::string("L")}};
  const attr_map invariant{{"frame_name", std::string("L")}, {"is_constant", true}};
  graph g;
  g.import({{"exit", "Exit", {"switch:0"}, {}, ""},
            {"merge", "Merge", {"enter_i", "next"}, {}, ""},
            {"next", "NextIteration", {"add"}, {}, ""},
            {"add", "Add", {"body", "enter_one"}, {}, ""},
            {"body", "Identity", {"switch:1"}, {}, ""},
            {"switch", "Switch", {"merge", "cond"}, {}, ""},
            {"cond", "LoopCond", {"less"}, {}, ""},
            {"less", "Less", {"merge", "enter_n"}, {}, ""},
            {"enter_i", "Enter", {"zero"}, frame, ""},
            {"enter_n", "Enter", {"n"}, invariant, ""},
            {"enter_one", "Enter", {"one"}, invariant, ""},
            {"n", "Placeholder", {}, {{"dtype", dtype::int64}, {"shape", partial_shape(std::vector<std::int64_t>{})}}, ""},
            {"zero", "Const", {}, constant(0), ""},
            {"one", "Const", {}, constant(1), ""}});
  session s(g, threads(1));
  CHECK(s.run({{"n", tensor::scalar(std::int64_t{6})}}, {"exit"})[0].scalar_value<std::int64_t>() == 6);
  // Any other cycle is still an error.
  graph h;
  require_error([&] { h.import({{"a", "Identity", {"b"}, {}, ""}, {"b", "NextIteration", {"a"}, {}, ""}}); },
                {"is part of a cycle", "input 1 of a Merge"});
}
