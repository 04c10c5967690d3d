// Graph passes (graph/passes/): pruning, frame analysis and the CSE table on their own, and
// constant folding through the session that runs it when a signature's executable is
// built. Node counts come from traced runs: a folded node does not run in the steps.
#include "support/helpers.hpp"

#include <algorithm>
#include <optional>
#include <set>

#include <weft/graph/passes/cse.hpp>

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

namespace {
std::vector<int> ids(const std::vector<bool>& needed) {
  std::vector<int> out;
  for (std::size_t i = 0; i < needed.size(); ++i)
    if (needed[i]) out.push_back(static_cast<int>(i));
  return out;
}
}  // namespace

TEST_CASE("pruning: a run needs what its fetches and targets reach, and stops at fed outputs") {
  graph g;
  auto a = floats(g, {1}, shape{1}, "a");
  auto b = floats(g, {2}, shape{1}, "b");
  const node& c = g.op("Add", {a, b}, {}, "c");
  const node& d = g.op("Mul", {c.out(0), a}, {}, "d");
  const node& unused = g.op("Neg", {a}, {}, "unused");
  const node& t = g.op("NoOp", {}, {}, node_options("t").after({unused.id()}));
  (void)floats(g, {3}, shape{1}, "alone");
  auto none = [](output) { return false; };
  CHECK(ids(passes::prune(g, {d.out(0)}, {}, none)) == std::vector<int>{a.node, b.node, c.id(), d.id()});
  // Feeding c cuts off what computes it.
  auto c_fed = [&](output o) { return o == c.out(0); };
  CHECK(ids(passes::prune(g, {d.out(0)}, {}, c_fed)) == std::vector<int>{a.node, d.id()});
  // A fetched output that is fed needs nothing.
  CHECK(ids(passes::prune(g, {c.out(0)}, {}, c_fed)).empty());
  // A target's control inputs are needed too.
  CHECK(ids(passes::prune(g, {}, {t.id()}, none)) == std::vector<int>{a.node, unused.id(), t.id()});
  CHECK(ids(passes::prune(g, {}, {}, none)).empty());
}

TEST_CASE("frame analysis: the frames of nested loops, by node") {
  graph g;
  auto zero = g.constant(tensor::scalar(0.0f), "zero").out(0);
  auto n = g.constant(tensor::scalar(3.0f), "n").out(0);
  auto one = g.constant(tensor::scalar(1.0f), "one").out(0);
  int inner_add = -1, outer_add = -1;
  auto out = while_loop(
      g, {zero}, [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(n)}).out(0); },
      [&](loop_scope& s, const std::vector<output>& v) {
        auto inner = while_loop(
            g, {v[0]},
            [&](loop_scope& t, const std::vector<output>& w) { return g.op("Less", {w[0], t.invariant(s.invariant(n))}).out(0); },
            [&](loop_scope& t, const std::vector<output>& w) {
              const node& add = g.op("Add", {w[0], t.invariant(s.invariant(one))});
              inner_add = add.id();
              return std::vector<output>{add.out(0)};
            },
            {.name = "inner"});
        const node& add = g.op("Add", {inner[0], s.invariant(one)});
        outer_add = add.id();
        return std::vector<output>{add.out(0)};
      },
      {.name = "outer"});
  const passes::frame_map frames = passes::find_frames(g, true);
  const int outer = frames.of(outer_add), inner = frames.of(inner_add);
  CHECK(outer != 0);
  CHECK(inner != 0);
  CHECK(inner != outer);
  CHECK(frames.info(outer).parent == 0);
  CHECK(frames.info(outer).depth == 1);
  CHECK(frames.info(inner).parent == outer);
  CHECK(frames.info(inner).depth == 2);
  CHECK(frames.info(outer).name.rfind("outer_", 0) == 0);
  CHECK(frames.info(inner).name.rfind("inner_", 0) == 0);
  CHECK(frames.info(outer).parallel_iterations == 10);
  CHECK(frames.frames().size() == 3);
  // The loop's result leaves through an Exit: it runs in the loop, its value is seen outside.
  CHECK(frames.of(out[0].node) == outer);
  CHECK(frames.out_frame(out[0].node) == 0);
  CHECK(frames.of(zero.node) == 0);
  // Every Enter leads from its frame into a child of it.
  int enters = 0;
  for (int id = 0; id < g.size(); ++id) {
    if (g.at(id).op() != "Enter") continue;
    ++enters;
    CHECK(frames.info(frames.child(id)).parent == frames.of(id));
    CHECK(frames.out_frame(id) == frames.child(id));
  }
  CHECK(enters == 6);  // outer: the variable, n, one; inner: the variable, n and one entered again
  // The unchecked analysis (the gradient pass's) agrees on a well-formed graph.
  const passes::frame_map unchecked = passes::find_frames(g, false);
  for (int id = 0; id < g.size(); ++id) CHECK(unchecked.of(id) == frames.of(id));
}

TEST_CASE("frame analysis, checked: reading two frames, leaving no loop, parallel_iterations that disagree") {
  graph g;
  auto zero = g.constant(tensor::scalar(0.0f), "zero").out(0);
  auto n = g.constant(tensor::scalar(3.0f), "n").out(0);
  output inside;
  while_loop(
      g, {zero}, [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(n)}).out(0); },
      [&](loop_scope& s, const std::vector<output>& v) {
        inside = v[0];
        return std::vector<output>{g.op("Add", {v[0], s.invariant(n)}).out(0)};
      });
  const node& bad = g.op("Add", {zero, inside}, {}, "bad");
  CHECK_THROWS_WITH(passes::find_frames(g, true),
                    Catch::Contains("node 'bad' (Add): its inputs come from the root frame (node 'zero' (Const)) and from "
                                    "frame 'while_"));
  // Unchecked, the first input places it.
  CHECK(passes::find_frames(g, false).of(bad.id()) == 0);

  graph h;
  auto c = h.constant(tensor::scalar(1.0f), "c").out(0);
  h.op("Exit", {c}, {}, "stray");
  CHECK_THROWS_WITH(passes::find_frames(h, true), Catch::Contains("node 'stray' (Exit): is not inside a loop"));

  graph k;
  auto x = k.constant(tensor::scalar(1.0f), "x").out(0);
  k.op("Enter", {x}, {{"frame_name", std::string("f")}, {"is_constant", true}, {"parallel_iterations", std::int64_t{4}}}, "e1");
  k.op("Enter", {x}, {{"frame_name", std::string("f")}, {"is_constant", true}, {"parallel_iterations", std::int64_t{8}}}, "e2");
  CHECK_THROWS_WITH(passes::find_frames(k, true),
                    Catch::Contains("node 'e2' (Enter): parallel_iterations 8 for frame 'f', which another Enter gave 4"));
}

TEST_CASE("a value fed inside a loop is reported naming the feed, not followed into the loop") {
  graph g;
  auto zero = g.constant(tensor::scalar(0.0f), "zero").out(0);
  auto n = g.constant(tensor::scalar(3.0f), "n").out(0);
  std::string fed_name;
  auto out = while_loop(
      g, {zero}, [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(n)}).out(0); },
      [&](loop_scope& s, const std::vector<output>& v) {
        const node& y = g.op("Mul", {v[0], v[0]}, {}, "y");
        fed_name = y.name();
        return std::vector<output>{g.op("Add", {g.op("Add", {y.out(0), v[0]}).out(0), s.invariant(n)}).out(0)};
      });
  session s(g, test::one_thread());
  CHECK_THROWS_WITH(s.run({{fed_name, tensor::scalar(2.0f)}}, {out[0]}),
                    Catch::Contains("its inputs come from the root frame (the value fed for '" + fed_name + ":0')") &&
                        Catch::Contains("a value enters a loop through an Enter"));
  // The session stays usable.
  CHECK(s.run_one({}, out[0]).scalar_value<float>() == 3.0f);
}

TEST_CASE("CSE table: equal means the same op, inputs, attributes, device, colocation and control inputs") {
  passes::cse_table table;
  const std::vector<output> in{{0, 0}, {1, 0}};
  const passes::cse_signature sig{{{"transpose_a", false}}, "/device:CPU:0", "", {}};
  CHECK_FALSE(table.find("MatMul", in, sig));
  table.insert("MatMul", in, sig, 7);
  CHECK(table.find("MatMul", in, sig) == std::optional<int>(7));
  CHECK_FALSE(table.find("Add", in, sig));                                      // another op
  CHECK_FALSE(table.find("MatMul", {{1, 0}, {0, 0}}, sig));                     // inputs in another order
  CHECK_FALSE(table.find("MatMul", {{0, 0}, {1, 1}}, sig));                     // another port
  auto other = sig;
  other.attrs = attr_map{{"transpose_a", true}};
  CHECK_FALSE(table.find("MatMul", in, other));
  other = sig, other.device = "/device:CPU:1";
  CHECK_FALSE(table.find("MatMul", in, other));
  other = sig, other.colocate = "w";
  CHECK_FALSE(table.find("MatMul", in, other));
  other = sig, other.controls = {3};
  CHECK_FALSE(table.find("MatMul", in, other));
  table.insert("MatMul", in, other, 8);  // a second node with the same op and inputs
  CHECK(table.find("MatMul", in, other) == std::optional<int>(8));
  CHECK(table.find("MatMul", in, sig) == std::optional<int>(7));
}
