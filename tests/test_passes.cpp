// Graph passes (graph/passes/): constant folding, through the session that runs it when a
// signature's executable is built. Node counts come from traced runs: a folded node does
// not run in the steps.
#include "support/helpers.hpp"

#include <algorithm>
#include <set>

using namespace weft;

namespace {
// The names of the nodes a traced run of `fetches` ran.
std::multiset<std::string> ran(session& s, const feed_list& feeds, const std::vector<endpoint>& fetches,
                               std::vector<tensor>* results = nullptr) {
  run_metadata meta;
  auto out = s.run(feeds, fetches, {}, {.trace = true}, &meta);
  if (results) *results = std::move(out);
  std::multiset<std::string> names;
  for (const auto& n : meta.stats.nodes) names.insert(n.node);
  return names;
}

session_options folding(std::size_t max_bytes) {
  session_options o = test::one_thread();
  o.constant_folding.max_bytes = max_bytes;
  return o;
}

output floats(graph& g, std::vector<float> v, shape s, const std::string& name) {
  return g.constant(tensor::from_vector(v, s), name).out(0);
}
}  // namespace

TEST_CASE("constant folding: a subgraph of constants runs once, when the executable is built") {
  graph g;
  // w = [[1, 2], [3, 4]], v = [[1, 0], [2, 1]]; (w v^T) = [[1, 4], [3, 10]]; + 1 = [[2, 5], [4, 11]]
  auto w = floats(g, {1, 2, 3, 4}, shape{2, 2}, "w");
  auto v = floats(g, {1, 0, 2, 1}, shape{2, 2}, "v");
  auto& prod = g.op("MatMul", {w, v}, {{"transpose_b", true}}, "prod");
  auto& plus = g.op("Add", {prod, g.constant(tensor::scalar(1.0f), "one")}, {}, "plus");
  auto& x = g.placeholder(dtype::float32, {2, 2}, "x");
  auto& y = g.op("Mul", {plus, x}, {}, "y");  // reads a fed value: never folds
  const feed_list feeds{{"x", tensor::from_vector(std::vector<float>{1, 2, 3, 4}, shape{2, 2})}};
  const std::vector<float> want{2, 10, 12, 44};  // [[2, 5], [4, 11]] * [[1, 2], [3, 4]]

  session folded(g, folding(1 << 20));
  std::vector<tensor> out;
  for (int step = 0; step < 2; ++step) {  // the second step runs the cached executable
    const auto names = ran(folded, feeds, {y, plus}, &out);
    CHECK(names == std::multiset<std::string>{"y"});  // MatMul, Add and the Consts folded; the feed is no node
    CHECK(out[0].to_vector<float>() == want);
    CHECK(out[1].to_vector<float>() == std::vector<float>{2, 5, 4, 11});
  }
  session plain(g, folding(0));
  CHECK(ran(plain, feeds, {y, plus}, &out) == std::multiset<std::string>{"w", "v", "prod", "one", "plus", "y"});
  CHECK(out[0].to_vector<float>() == want);
}

TEST_CASE("constant folding leaves stateful, fed, too large and loop-bound nodes to the steps") {
  graph g;
  auto c = floats(g, {1, 2, 3}, shape{3}, "c");
  SECTION("a variable's value changes between steps") {
    auto& v = g.variable(dtype::float32, {3}, node_options("v"));
    auto& init = g.op("Assign", {v, c}, {}, "init");
    auto& read = g.op("Neg", {v}, {}, "read");
    auto& bump = g.op("AssignAdd", {v, c}, {}, "bump");
    session s(g, folding(1 << 20));
    s.run({init});
    CHECK(s.run({}, {read})[0].to_vector<float>() == std::vector<float>{-1, -2, -3});
    s.run({bump});
    CHECK(s.run({}, {read})[0].to_vector<float>() == std::vector<float>{-2, -4, -6});
  }
  SECTION("random numbers are drawn at every step") {
    auto& r = g.op("RandomUniform", {g.constant(tensor::from_vector(std::vector<std::int32_t>{64}), "dims")},
                   {{"dtype", dtype::float32}, {"seed", std::int64_t{7}}, {"seed2", std::int64_t{0}}}, "r");
    auto& neg = g.op("Neg", {r}, {}, "neg");
    session s(g, folding(1 << 20));
    CHECK(s.run({}, {neg})[0].to_vector<float>() != s.run({}, {neg})[0].to_vector<float>());
  }
  SECTION("a fed constant's readers read the fed value") {
    auto& neg = g.op("Neg", {c}, {}, "neg");
    session s(g, folding(1 << 20));
    std::vector<tensor> out;
    CHECK(ran(s, {{"c", tensor::from_vector(std::vector<float>{5, 6, 7})}}, {neg}, &out) ==
          std::multiset<std::string>{"neg"});
    CHECK(out[0].to_vector<float>() == std::vector<float>{-5, -6, -7});
    CHECK(s.run({}, {neg})[0].to_vector<float>() == std::vector<float>{-1, -2, -3});
  }
  SECTION("an output over max_bytes is computed at every step") {
    // Tile makes 3 x 4 = 12 floats, 48 bytes: folded under a 48-byte bound, not under 47.
    auto& tiled = g.op("Tile", {c, g.constant(tensor::from_vector(std::vector<std::int32_t>{4}), "multiples")}, {}, "tiled");
    auto& sum = g.op("Sum", {tiled, g.constant(tensor::scalar(0), "axis")}, {}, "sum");
    session small(g, folding(47)), large(g, folding(48));
    std::vector<tensor> out;
    CHECK(ran(small, {}, {sum}, &out) == std::multiset<std::string>{"c", "multiples", "tiled", "sum", "axis"});
    CHECK(out[0].scalar_value<float>() == 24.0f);
    CHECK(ran(large, {}, {sum}, &out).empty());  // tiled folded, and sum's 4 bytes too
    CHECK(out[0].scalar_value<float>() == 24.0f);
  }
  SECTION("an error in a constant subgraph is reported by the step, naming the node") {
    auto& bad = g.op("GatherV2", {c, g.constant(tensor::from_vector(std::vector<std::int32_t>{5}), "at"),
                                  g.constant(tensor::scalar(0), "axis")}, {}, "bad");
    session s(g, folding(1 << 20));
    for (int step = 0; step < 2; ++step)
      test::require_error([&] { s.run({}, {bad}); }, {"node 'bad' (GatherV2)", "indices[0] = 5 is not in [0, 3)"});
  }
}

TEST_CASE("constant folding stops at a loop's frame") {
  graph g;
  // while i < 10: i = i + 6 + k * k, from 0, with k = 0 a Const inside the body: six = 2 * 3
  // is a constant outside the loop and folds; inside, k runs once per iteration (its control
  // input is the loop's pivot), so k * k stays in the loop too.
  auto six = g.op("Mul", {g.constant(tensor::scalar(2), "two"), g.constant(tensor::scalar(3), "three")}, {}, "six").out(0);
  auto ten = g.constant(tensor::scalar(10), "ten").out(0);
  auto outs = while_loop(
      g, {g.constant(tensor::scalar(0), "zero").out(0)},
      [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(ten)}).out(0); },
      [&](loop_scope& s, const std::vector<output>& v) {
        auto k = g.constant(tensor::scalar(0), node_options("k").after({s.pivot()})).out(0);
        auto kk = g.op("Mul", {k, k}, {}, "kk").out(0);
        return std::vector<output>{g.op("Add", {g.op("Add", {v[0], s.invariant(six)}).out(0), kk}).out(0)};
      });
  session s(g, folding(1 << 20));
  std::vector<tensor> out;
  const auto names = ran(s, {}, {outs[0]}, &out);
  CHECK(out[0].scalar_value<std::int32_t>() == 12);
  // Nodes the loop adds are named in its scope ("while/k").
  auto runs = [&](const std::string& name) {
    return std::count_if(names.begin(), names.end(), [&](const std::string& n) {
      return n == name || (n.size() > name.size() && n.ends_with("/" + name));
    });
  };
  CHECK(runs("six") == 0);
  CHECK(runs("two") == 0);
  CHECK(runs("k") == 2);  // two iterations
  CHECK(runs("kk") == 2);
}
