// Graph passes (graph/passes/): pruning, frame analysis and CSE on their own, and constant
// folding and CSE through the session that runs them when a signature's executable is
// built. Node counts come from traced runs: a folded or merged node does not run in the steps.
#include "support/helpers.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <set>

#include <weft/graph/passes/cse.hpp>
#include <weft/kernels/cpu/sgemm.hpp>  // WEFT_OWN_SGEMM and sgemm_supported(), for the packed-weight cases

using namespace weft;

namespace {
// A traced run's fetched values, with the name, "name (op)" and op of each node it ran.
struct ran_nodes {
  std::vector<tensor> out;
  std::multiset<std::string> nodes, names, ops;
};

ran_nodes trace(session& s, const feed_list& feeds, const std::vector<endpoint>& fetches,
                      const std::vector<endpoint>& targets = {}) {
  run_metadata meta;
  ran_nodes r{s.run(feeds, fetches, targets, {.trace = true}, &meta), {}, {}, {}};
  for (const auto& n : meta.stats.nodes) {
    r.nodes.insert(n.node);
    r.names.insert(n.node + " (" + n.op + ")");
    r.ops.insert(n.op);
  }
  return r;
}

// The names of the nodes a traced run of `fetches` ran.
std::multiset<std::string> ran(session& s, const feed_list& feeds, const std::vector<endpoint>& fetches,
                               std::vector<tensor>* results = nullptr) {
  auto r = trace(s, feeds, fetches);
  if (results) *results = std::move(r.out);
  return std::move(r.nodes);
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

TEST_CASE("CSE over a finished graph: which node stands for which") {
  graph g;
  auto& x = g.placeholder(dtype::float32, {3}, "x");
  auto& x2 = g.placeholder(dtype::float32, {3}, "x2");  // placeholders never merge
  auto& a1 = g.op("Neg", {x}, {}, "a1");
  auto& a2 = g.op("Neg", {x}, {}, "a2");
  auto& b1 = g.op("Square", {a1}, {}, "b1");
  auto& b2 = g.op("Square", {a2}, {}, "b2");  // equal through a1 = a2
  auto& k1 = g.constant(tensor::scalar(2.0f), "k1");
  auto& k2 = g.constant(tensor::scalar(2.0f), "k2");
  auto& k3 = g.constant(tensor::scalar(3.0f), "k3");  // another value
  auto& m1 = g.op("Mul", {b1, k1}, {}, "m1");
  auto& m2 = g.op("Mul", {b2, k2}, {}, "m2");     // equal through b1 = b2, k1 = k2
  auto& m3 = g.op("Mul", {b2, k3}, {}, "m3");     // another constant
  auto& m4 = g.op("Mul", {k1, b1}, {}, "m4");     // inputs in another order
  auto& on1 = g.op("Neg", {x}, {}, node_options("on1").on("/device:CPU:1"));  // another device
  auto& after = g.op("Neg", {x}, {}, node_options("after").after({k3.id()}));  // a control input
  auto& after2 = g.op("Neg", {x}, {}, node_options("after2").after({k3.id(), k3.id()}));
  auto& mm1 = g.op("MatMul", {g.op("Reshape", {x, g.constant(tensor::from_vector(std::vector<std::int32_t>{3, 1}), "s1")}),
                              g.op("Reshape", {x, g.constant(tensor::from_vector(std::vector<std::int32_t>{1, 3}), "s2")})},
                   {}, "mm1");
  auto& mmt = g.op("MatMul", {g.at(mm1.inputs()[0]), g.at(mm1.inputs()[0])}, {{"transpose_a", true}}, "mmt");
  auto& dims = g.constant(tensor::from_vector(std::vector<std::int32_t>{3}), "dims");
  auto& r1 = g.op("RandomUniform", {dims}, {{"dtype", dtype::float32}, {"seed", std::int64_t{1}}, {"seed2", std::int64_t{2}}}, "r1");
  auto& r2 = g.op("RandomUniform", {dims}, {{"dtype", dtype::float32}, {"seed", std::int64_t{1}}, {"seed2", std::int64_t{2}}}, "r2");
  const std::vector<bool> all(static_cast<std::size_t>(g.size()), true);
  auto nothing_fed = [](output) { return false; };
  const auto rep = passes::common_subexpressions(g, all, nothing_fed);
  auto of = [&](const node& n) { return rep[static_cast<std::size_t>(n.id())]; };
  CHECK(of(a1) == a1.id());
  CHECK(of(a2) == a1.id());
  CHECK(of(b2) == b1.id());
  CHECK(of(k2) == k1.id());
  CHECK(of(m2) == m1.id());
  CHECK(of(x2) == x2.id());
  CHECK(of(k3) == k3.id());
  CHECK(of(m3) == m3.id());
  CHECK(of(m4) == m4.id());
  CHECK(of(on1) == on1.id());
  CHECK(of(after) == after.id());
  CHECK(of(after2) == after.id());  // control inputs are a set
  CHECK(of(mmt) == mmt.id());
  CHECK(of(r1) == r1.id());
  CHECK(of(r2) == r2.id());
  // Only needed nodes stand for others: a1 not needed, a2 stands for itself.
  std::vector<bool> some = all;
  some[static_cast<std::size_t>(a1.id())] = false;
  some[static_cast<std::size_t>(b1.id())] = false;
  const auto without = passes::common_subexpressions(g, some, nothing_fed);
  CHECK(without[static_cast<std::size_t>(a2.id())] == a2.id());
  CHECK(without[static_cast<std::size_t>(b2.id())] == b2.id());
  CHECK(without[static_cast<std::size_t>(a1.id())] == a1.id());
  // A node with a fed output keeps itself, and what reads it differs from what reads its twin.
  const output fed = a2;
  const auto with_feed = passes::common_subexpressions(g, all, [&](output o) { return o == fed; });
  CHECK(with_feed[static_cast<std::size_t>(a2.id())] == a2.id());
  CHECK(with_feed[static_cast<std::size_t>(b2.id())] == b2.id());
  CHECK(with_feed[static_cast<std::size_t>(k2.id())] == k1.id());
}

TEST_CASE("CSE in the session: one of each class of equal nodes runs, and feeds still reach their consumers") {
  graph g;
  auto& x = g.placeholder(dtype::float32, {3}, "x");
  auto& a1 = g.op("Neg", {x}, {}, "a1");
  auto& a2 = g.op("Neg", {x}, {}, "a2");
  auto& b1 = g.op("Square", {a1}, {}, "b1");
  auto& b2 = g.op("Square", {a2}, {}, "b2");
  auto& c = g.op("Sub", {b1, g.op("Neg", {b2}, {}, "nb2")}, {}, "c");  // b1 + b2
  auto& done = g.op("NoOp", {}, {}, node_options("done").after({b2.id()}));
  const feed_list feed{{x, tensor::of<float>({3}, {1, -2, 3})}};
  session s(g, test::one_thread());
  std::vector<tensor> out;
  auto names = ran(s, feed, {c, a2, b2}, &out);
  CHECK(names.count("a1") == 1);
  CHECK(names.count("a2") == 0);
  CHECK(names.count("b1") == 1);
  CHECK(names.count("b2") == 0);
  CHECK(out[0].to_vector<float>() == std::vector<float>{2, 8, 18});
  CHECK(out[1].to_vector<float>() == std::vector<float>{-1, 2, -3});  // a2's value, computed by a1
  CHECK(out[2].to_vector<float>() == std::vector<float>{1, 4, 9});
  // A control input on a merged-away node waits for its stand-in.
  auto target_names = trace(s, feed, {c}, {done}).nodes;
  CHECK(target_names.count("b1") == 1);
  CHECK(target_names.count("b2") == 0);
  CHECK(target_names.count("done") == 1);
  // Only needed nodes stand for others: with b1 not needed, b2 runs itself.
  target_names = trace(s, feed, {}, {done}).nodes;
  CHECK(target_names.count("b1") == 0);
  CHECK(target_names.count("b2") == 1);
  CHECK(target_names.count("done") == 1);
  // Fed a2: b2 reads the fed value, b1 still the computed one.
  feed_list fed_a2 = feed;
  fed_a2.push_back({a2, tensor::of<float>({3}, {10, 10, 10})});
  names = ran(s, fed_a2, {c}, &out);
  CHECK(names.count("b1") == 1);
  CHECK(names.count("b2") == 1);
  CHECK(out[0].to_vector<float>() == std::vector<float>{101, 104, 109});
  // Off: every node runs.
  session_options off = test::one_thread();
  off.eliminate_common_subexpressions = false;
  session all(g, off);
  names = ran(all, feed, {c}, &out);
  CHECK(names.count("a1") == 1);
  CHECK(names.count("a2") == 1);
  CHECK(names.count("b2") == 1);
  CHECK(out[0].to_vector<float>() == std::vector<float>{2, 8, 18});
}

namespace {
std::multiset<std::string> ran_ops(session& s, const feed_list& feeds, const std::vector<endpoint>& targets) {
  return trace(s, feeds, {}, targets).names;
}

std::vector<float> wave(std::int64_t count, double phase) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(phase + 0.41 * static_cast<double>(i)));
  return v;
}

session_options fusing(int threads, bool fuse) {
  session_options o = test::one_thread();
  o.intra_op_threads = threads;
  o.fuse_matmul = fuse;
  return o;
}

// Runs `init`, then two training steps, with the folds and without: the first step traced,
// each op of `fused_ops` run as many times as it says when folding and the other count
// (1 - n) when not, and the variables after the two steps equal.
void two_steps_alike(const graph& g, const node& init, const feed_list& feeds, const node& step,
                     const std::vector<output>& variables, const std::vector<std::pair<std::string, int>>& fused_ops) {
  std::vector<std::vector<float>> after;
  for (bool fuse : {true, false}) {
    INFO((fuse ? "fused" : "unfused"));
    session s(g, fusing(1, fuse));
    s.run({}, {}, {init});
    const auto ops = trace(s, feeds, {}, {step}).ops;
    for (const auto& [op, n] : fused_ops) {
      INFO(op);
      CHECK(static_cast<int>(ops.count(op)) == (fuse ? n : 1 - n));
    }
    s.run(feeds, {}, {step});
    after.push_back({});
    std::vector<endpoint> fetches(variables.begin(), variables.end());
    for (const auto& v : s.run({}, fetches)) {
      const auto values = v.to_vector<float>();
      after.back().insert(after.back().end(), values.begin(), values.end());
    }
  }
  REQUIRE(after[0].size() == after[1].size());
  for (std::size_t i = 0; i < after[0].size(); ++i) CHECK(std::abs(after[0][i] - after[1][i]) <= 1e-5f * (1 + std::abs(after[1][i])));
}
}  // namespace

TEST_CASE("folding gradient updates: a weight's step runs as one GEMM into the variable, as the unfused step") {
  // w (in x out) -= 0.05 * x^T dz for two batches, checked against the sum in double. The
  // larger shapes split the product across two threads: by the weight's columns (200 x 300,
  // and 400 x 160: an update of more columns than the batch splits by columns at least 64 a
  // thread), by its rows (300 x 100 and 400 x 64, narrower); out = 10 takes sgemm's
  // transposed path (fewer columns than a register block).
  for (auto [in, out, threads] : {std::tuple<std::int64_t, std::int64_t, int>{70, 50, 1}, {200, 300, 2}, {400, 160, 2},
                                  {300, 100, 2}, {400, 64, 2}, {300, 10, 2}}) {
    const std::int64_t batch = 64;
    INFO("w: " << in << " x " << out << ", " << threads << " threads");
    graph g;
    auto w = g.variable(dtype::float32, {in, out}, node_options("w")).out(0);
    const auto w0 = wave(in * out, 0.3);
    auto& init = g.op("Assign", {w, g.constant(tensor::from_vector(w0, shape{in, out}))}, {}, "init");
    auto& x = g.placeholder(dtype::float32, {batch, in}, "x");
    auto& dz = g.placeholder(dtype::float32, {batch, out}, "dz");
    auto& grad = g.op("MatMul", {x, dz}, {{"transpose_a", true}}, "grad");
    auto& step = g.op("ApplyGradientDescent", {w, g.constant(tensor::scalar(0.05f), "rate"), grad}, {}, "step");
    std::vector<double> want(w0.begin(), w0.end()), magnitude(w0.size(), 0.0);
    std::vector<feed_list> batches;
    for (int b = 0; b < 2; ++b) {
      const auto xs = wave(batch * in, 1.0 + b), dzs = wave(batch * out, 2.0 + b);
      batches.push_back({{"x", tensor::from_vector(xs, shape{batch, in})}, {"dz", tensor::from_vector(dzs, shape{batch, out})}});
      for (std::int64_t i = 0; i < in; ++i)
        for (std::int64_t j = 0; j < out; ++j)
          for (std::int64_t p = 0; p < batch; ++p) {
            const double term = 0.05 * static_cast<double>(xs[static_cast<std::size_t>(p * in + i)]) *
                                static_cast<double>(dzs[static_cast<std::size_t>(p * out + j)]);
            want[static_cast<std::size_t>(i * out + j)] -= term;
            magnitude[static_cast<std::size_t>(i * out + j)] += std::abs(term);
          }
    }
    for (bool fuse : {true, false}) {
      INFO((fuse ? "fused" : "unfused"));
      session s(g, fusing(threads, fuse));
      s.run({}, {}, {init});
      const auto names = ran_ops(s, batches[0], {step});
      if (fuse) CHECK(names == std::multiset<std::string>{"rate (Const)", "step (_FusedMatMulApplyGradientDescent)", "w (Variable)"});
      else CHECK(names.count("grad (MatMul)") == 1);
      CHECK(names.count(fuse ? "step (_FusedMatMulApplyGradientDescent)" : "step (ApplyGradientDescent)") == 1);
      s.run(batches[1], {}, {step});
      const auto got = s.run({}, {w}).at(0).to_vector<float>();
      int bad = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        // Two steps of (batch + 4) roundings of each sum, plus the update's own.
        const double bound = std::ldexp(1.0, -23) * static_cast<double>(batch + 8) * (magnitude[i] + std::abs(want[i]));
        if (!(std::abs(static_cast<double>(got[i]) - want[i]) <= bound)) ++bad;
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("a narrow layer deeper than its batch, split along its depth, adds its bias and ReLU once to the sum") {
  // relu(x w + bias) with w 640 x 10 at a batch of 96 (one _FusedMatMulBiasAdd): on two and
  // three threads the product splits along its depth (kernels/cpu/matmul.hpp,
  // splits_by_depth), the threads' partial sums added before the bias and ReLU.
  const std::int64_t batch = 96, in = 640, out = 10;
  const auto xs = wave(batch * in, 0.4), ws = wave(in * out, 1.1), bias = wave(out, 2.7);
  for (int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    graph g;
    auto& x = g.placeholder(dtype::float32, {batch, in}, "x");
    auto& w = g.placeholder(dtype::float32, {in, out}, "w");
    auto& h = g.op("Relu", {g.op("BiasAdd", {g.op("MatMul", {x, w}), g.constant(tensor::from_vector(bias, shape{out}))})});
    session s(g, fusing(threads, true));
    const auto got = s.run({{"x", tensor::from_vector(xs, shape{batch, in})}, {"w", tensor::from_vector(ws, shape{in, out})}}, {h})
                         .at(0)
                         .to_vector<float>();
    int bad = 0;
    for (std::int64_t i = 0; i < batch; ++i)
      for (std::int64_t j = 0; j < out; ++j) {
        double sum = bias[static_cast<std::size_t>(j)], magnitude = std::abs(sum);
        for (std::int64_t p = 0; p < in; ++p) {
          const double term = static_cast<double>(xs[static_cast<std::size_t>(i * in + p)]) * static_cast<double>(ws[static_cast<std::size_t>(p * out + j)]);
          sum += term;
          magnitude += std::abs(term);
        }
        const double bound = std::ldexp(1.0, -22) * static_cast<double>(in + 4) * (magnitude + 1.0);
        if (!(std::abs(static_cast<double>(got[static_cast<std::size_t>(i * out + j)]) - std::max(sum, 0.0)) <= bound)) ++bad;
      }
    CHECK(bad == 0);
  }
}

TEST_CASE("a weight read again unchanged is packed once for the products that read it, until a write") {
  // h = relu(x w + bias) (one _FusedMatMulBiasAdd), the fused update w -= 0.05 x^T dz, and an
  // Assign of w. Forward runs without a write between them: the second packs a copy of w
  // that the variable keeps, the later ones read it; an update or an Assign drops it. Each
  // product is checked against the sum in double of the weight as the steps left it.
  const std::int64_t batch = 24, in = 150, out = 70;
  for (int threads : {1, 2}) {
    INFO(threads << " threads");
    graph g;
    auto w = g.variable(dtype::float32, {in, out}, node_options("w")).out(0);
    const auto w0 = wave(in * out, 0.3), w1 = wave(in * out, 0.9), bias = wave(out, 0.2);
    std::vector<double> want(w0.begin(), w0.end());
    auto& init = g.op("Assign", {w, g.constant(tensor::from_vector(w0, shape{in, out}))}, {}, "init");
    auto& set = g.op("Assign", {w, g.constant(tensor::from_vector(w1, shape{in, out}))}, {}, "set");
    auto& x = g.placeholder(dtype::float32, {batch, in}, "x");
    auto& dz = g.placeholder(dtype::float32, {batch, out}, "dz");
    auto& h = g.op("Relu", {g.op("BiasAdd", {g.op("MatMul", {x, w}, {}, "mm"), g.constant(tensor::from_vector(bias, shape{out}))})}, {}, "h");
    auto& grad = g.op("MatMul", {x, dz}, {{"transpose_a", true}}, "grad");
    auto& step = g.op("ApplyGradientDescent", {w, g.constant(tensor::scalar(0.05f), "rate"), grad}, {}, "step");
    session s(g, fusing(threads, true));
    s.run({}, {}, {init});
    auto var = s.resources().find_variable("", "w");
    REQUIRE(var);
    [[maybe_unused]] int kept = 0;  // forward runs after which the variable held a copy
    // Per round: `forwards` products, then a write (0: an update, 1: an Assign).
    for (auto [forwards, write] : {std::pair<int, int>{3, 0}, {1, 0}, {4, 1}, {2, 0}, {3, 0}}) {
      const auto dzs = wave(batch * out, 2.0 + forwards);
      std::vector<float> xs;
      for (int f = 0; f < forwards; ++f) {
        INFO("forward " << f << " of " << forwards);
        xs = wave(batch * in, 1.0 + f + 3 * forwards);
        const auto got = s.run({{"x", tensor::from_vector(xs, shape{batch, in})}}, {h}).at(0).to_vector<float>();
        int bad = 0;
        for (std::int64_t i = 0; i < batch; ++i)
          for (std::int64_t j = 0; j < out; ++j) {
            double sum = bias[static_cast<std::size_t>(j)], magnitude = std::abs(sum);
            for (std::int64_t p = 0; p < in; ++p) {
              const double term = static_cast<double>(xs[static_cast<std::size_t>(i * in + p)]) * want[static_cast<std::size_t>(p * out + j)];
              sum += term;
              magnitude += std::abs(term);
            }
            // The weight's own error (from the updates so far) and the sum's roundings.
            const double bound = std::ldexp(1.0, -22) * static_cast<double>(in + 6 * batch) * (magnitude + 1.0);
            if (!(std::abs(static_cast<double>(got[static_cast<std::size_t>(i * out + j)]) - std::max(sum, 0.0)) <= bound)) ++bad;
          }
        CHECK(bad == 0);
#ifdef WEFT_OWN_SGEMM
        // Kept from the second product of an unchanged weight on.
        if (cpu::sgemm_supported()) CHECK(static_cast<bool>(var->derived(var->value())) == (f >= 1));
#endif
        kept += var->derived(var->value()) ? 1 : 0;
      }
      if (write == 1) {
        s.run({}, {}, {set});
        want.assign(w1.begin(), w1.end());
      } else {
        s.run({{"x", tensor::from_vector(xs, shape{batch, in})}, {"dz", tensor::from_vector(dzs, shape{batch, out})}}, {}, {step});
        for (std::int64_t i = 0; i < in; ++i)
          for (std::int64_t j = 0; j < out; ++j)
            for (std::int64_t p = 0; p < batch; ++p)
              want[static_cast<std::size_t>(i * out + j)] -= 0.05 * static_cast<double>(xs[static_cast<std::size_t>(p * in + i)]) *
                                                            static_cast<double>(dzs[static_cast<std::size_t>(p * out + j)]);
      }
      CHECK(!var->derived(var->value()));  // a write drops it
    }
#ifdef WEFT_OWN_SGEMM
    if (cpu::sgemm_supported()) CHECK(kept == 8);
#endif
  }
}

TEST_CASE("a MatMul of a weight read again unchanged reads its packed copy too, until an Assign") {
  // y = x w, a plain MatMul (no bias to fold): three products, an Assign, two more, each
  // against the sum in double; the variable keeps the copy from the second product on.
  const std::int64_t batch = 9, in = 40, out = 33;
  for (int threads : {1, 2}) {
    INFO(threads << " threads");
    graph g;
    auto w = g.variable(dtype::float32, {in, out}, node_options("w")).out(0);
    const auto w0 = wave(in * out, 0.3), w1 = wave(in * out, 1.7);
    auto& init = g.op("Assign", {w, g.constant(tensor::from_vector(w0, shape{in, out}))}, {}, "init");
    auto& set = g.op("Assign", {w, g.constant(tensor::from_vector(w1, shape{in, out}))}, {}, "set");
    auto& x = g.placeholder(dtype::float32, {batch, in}, "x");
    auto& y = g.op("MatMul", {x, w}, {}, "y");
    session s(g, fusing(threads, true));
    s.run({}, {}, {init});
    auto var = s.resources().find_variable("", "w");
    REQUIRE(var);
    for (int run = 0; run < 5; ++run) {
      INFO("product " << run);
      if (run == 3) s.run({}, {}, {set});
      const auto& weight = run < 3 ? w0 : w1;
      const auto xs = wave(batch * in, 0.5 + run);
      const auto got = s.run({{"x", tensor::from_vector(xs, shape{batch, in})}}, {y}).at(0).to_vector<float>();
      int bad = 0;
      for (std::int64_t i = 0; i < batch; ++i)
        for (std::int64_t j = 0; j < out; ++j) {
          double sum = 0, magnitude = 0;
          for (std::int64_t p = 0; p < in; ++p) {
            const double term = static_cast<double>(xs[static_cast<std::size_t>(i * in + p)]) *
                                static_cast<double>(weight[static_cast<std::size_t>(p * out + j)]);
            sum += term;
            magnitude += std::abs(term);
          }
          if (!(std::abs(static_cast<double>(got[static_cast<std::size_t>(i * out + j)]) - sum) <=
                std::ldexp(1.0, -24) * static_cast<double>(in + 4) * magnitude))
            ++bad;
        }
      CHECK(bad == 0);
#ifdef WEFT_OWN_SGEMM
      if (cpu::sgemm_supported()) CHECK(static_cast<bool>(var->derived(var->value())) == (run == 1 || run == 2 || run == 4));
#endif
    }
  }
}

namespace {
// w (3 x 2) -= rate * x^T dz in the given dtype, with the gradient named "grad" and the
// update "step"; `norm` adds a reduction that reads the gradient too.
struct update_graph {
  graph g;
  output w, grad, init, step;
};

std::unique_ptr<update_graph> make_update_graph(dtype t, bool norm) {
  auto u = std::make_unique<update_graph>();
  graph& g = u->g;
  const bool f64 = t == dtype::float64;
  const std::vector<double> w0{1, 2, 3, 4, 5, 6};
  const tensor w0t = f64 ? tensor::from_vector(w0, shape{3, 2}) : tensor::from_vector(std::vector<float>(w0.begin(), w0.end()), shape{3, 2});
  u->w = g.variable(t, {3, 2}, node_options("w")).out(0);
  u->init = g.op("Assign", {u->w, g.constant(w0t)}, {}, "init").out(0);
  u->grad = g.op("MatMul", {g.placeholder(t, {4, 3}, "x"), g.placeholder(t, {4, 2}, "dz")}, {{"transpose_a", true}}, "grad").out(0);
  const output rate = g.constant(f64 ? tensor::scalar(0.5) : tensor::scalar(0.5f), "rate").out(0);
  u->step = g.op("ApplyGradientDescent", {u->w, rate, u->grad}, {}, "step").out(0);
  if (norm) g.op("Sum", {g.op("Square", {u->grad}, {}, "square"), g.constant(tensor::of<std::int32_t>({2}, {0, 1}))}, {}, "norm");
  return u;
}
}  // namespace

TEST_CASE("folding gradient updates: not where the gradient is read, fetched or fed, nor for float64") {
  const std::vector<float> xs{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, dzs{1, 0, 0, 1, 1, 1, 2, 2};
  // x^T dz = [[1+2, 0+2], [0+2, 1+2], [1+2, 1+2]] = [[3, 2], [2, 3], [3, 3]]; w - 0.5 of it:
  const std::vector<float> after{-0.5f, 1, 2, 2.5f, 3.5f, 4.5f};
  const feed_list feeds{{"x", tensor::from_vector(xs, shape{4, 3})}, {"dz", tensor::from_vector(dzs, shape{4, 2})}};
  const std::string fused = "step (_FusedMatMulApplyGradientDescent)", unfused = "step (ApplyGradientDescent)";
  {
    auto u = make_update_graph(dtype::float32, false);
    session s(u->g, test::one_thread());
    s.run({}, {}, {u->init});
    CHECK(ran_ops(s, feeds, {u->step}).count(fused) == 1);  // this signature folds
    const auto fetched = trace(s, feeds, {u->grad}, {u->step});  // the gradient fetched too: not folded
    CHECK(fetched.out.at(0).to_vector<float>() == std::vector<float>{3, 2, 2, 3, 3, 3});
    CHECK(fetched.names.count(unfused) == 1);
    CHECK(fetched.ops.count("_FusedMatMulApplyGradientDescent") == 0);
    // The gradient fed: the update reads the fed value, and no product runs.
    feed_list fed = feeds;
    fed.push_back({"grad", tensor::of<float>({3, 2}, {2, 2, 2, 2, 2, 2})});
    const auto with_fed = ran_ops(s, fed, {u->step});
    CHECK(with_fed.count(unfused) == 1);
    CHECK(with_fed.count("grad (MatMul)") == 0);
    // Three updates of the same w: 1 - 0.5 * 3 - 0.5 * 3 - 0.5 * 2 = -3, and so on.
    CHECK(s.run({}, {u->w}).at(0).to_vector<float>() == std::vector<float>{-3, -1, 0, 0, 1, 2});
    s.run({}, {}, {u->init});
    s.run(feeds, {}, {u->step});
    CHECK(s.run({}, {u->w}).at(0).to_vector<float>() == after);
  }
  {
    auto u = make_update_graph(dtype::float32, true);
    session s(u->g, test::one_thread());
    s.run({}, {}, {u->init});
    CHECK(ran_ops(s, feeds, {u->step}).count(unfused) == 1);  // norm reads the gradient too
    CHECK(s.run({}, {u->w}).at(0).to_vector<float>() == after);
  }
  {
    auto u = make_update_graph(dtype::float64, false);
    session s(u->g, test::one_thread());
    s.run({}, {}, {u->init});
    feed_list dfeeds{{"x", tensor::from_vector(std::vector<double>(xs.begin(), xs.end()), shape{4, 3})},
                     {"dz", tensor::from_vector(std::vector<double>(dzs.begin(), dzs.end()), shape{4, 2})}};
    CHECK(ran_ops(s, dfeeds, {u->step}).count(unfused) == 1);
    CHECK(s.run({}, {u->w}).at(0).to_vector<double>() == std::vector<double>{-0.5, 1, 2, 2.5, 3.5, 4.5});
  }
}

TEST_CASE("folding gradient updates: a product of the variable itself reads its value before the step") {
  // w -= 0.25 * w^T w: the product reads w while the fused kernel writes it, so the variable is
  // copied first (its reader holds the value); w = [[1, 2], [3, 4]]: w^T w = [[10, 14], [14, 20]].
  graph g;
  auto w = g.variable(dtype::float32, {2, 2}, node_options("w")).out(0);
  auto& init = g.op("Assign", {w, g.constant(tensor::of<float>({2, 2}, {1, 2, 3, 4}))}, {}, "init");
  auto& grad = g.op("MatMul", {w, w}, {{"transpose_a", true}}, "grad");
  auto& step = g.op("ApplyGradientDescent", {w, g.constant(tensor::scalar(0.25f)), grad}, {}, "step");
  session s(g, test::one_thread());
  s.run({}, {}, {init});
  CHECK(ran_ops(s, {}, {step}).count("step (_FusedMatMulApplyGradientDescent)") == 1);
  CHECK(s.run({}, {w}).at(0).to_vector<float>() == std::vector<float>{1 - 2.5f, 2 - 3.5f, 3 - 3.5f, 4 - 5.0f});
}

TEST_CASE("folding gradient updates: a bad shape is an error naming the node, and the variable keeps its value") {
  // Shapes unknown until run time: the fused kernel checks them before writing anything.
  graph g;
  auto w = g.variable(dtype::float32, {2, 2}, node_options("w")).out(0);
  auto& init = g.op("Assign", {w, g.constant(tensor::of<float>({2, 2}, {1, 2, 3, 4}))}, {}, "init");
  auto& x = g.placeholder(dtype::float32, partial_shape::unknown_rank(), "x");
  auto& dz = g.placeholder(dtype::float32, partial_shape::unknown_rank(), "dz");
  auto& step = g.op("ApplyGradientDescent", {w, g.constant(tensor::scalar(1.0f)), g.op("MatMul", {x, dz}, {}, "grad")}, {},
                    "step");
  session s(g, test::one_thread());
  s.run({}, {}, {init});
  test::require_error([&] { s.run({{"x", tensor::of<float>({3, 1}, {1, 1, 1})}, {"dz", tensor::of<float>({1, 2}, {1, 1})}}, {}, {step}); },
                      {"node 'step' (_FusedMatMulApplyGradientDescent)", "product of shape [3,2]", "variable 'w' of shape [2,2]"});
  test::require_error([&] { s.run({{"x", tensor::of<float>({2, 3}, {1, 1, 1, 1, 1, 1})}, {"dz", tensor::of<float>({2, 2}, {1, 1, 1, 1})}}, {}, {step}); },
                      {"node 'step'", "inner dimensions differ (3 vs 2"});
  test::require_error([&] { s.run({{"x", tensor::of<float>({4}, {1, 1, 1, 1})}, {"dz", tensor::of<float>({2, 2}, {1, 1, 1, 1})}}, {}, {step}); },
                      {"node 'step'", "must be matrices", "[4]"});
  CHECK(s.run({}, {w}).at(0).to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  // The same op added by name is checked when it is added.
  test::require_error([&] { g.op("_FusedMatMulApplyGradientDescent", {w, g.constant(tensor::scalar(1.0f)), g.constant(tensor::of<float>({3, 1}, {1, 1, 1})), g.constant(tensor::of<float>({1, 2}, {1, 1}))}); },
                      {"_FusedMatMulApplyGradientDescent", "product of shape [3,2] does not match the variable's shape [2,2]"});
}

TEST_CASE("graph::replace keeps ids in topological order and the outputs consumers were checked against") {
  graph g;
  auto& a = g.constant(tensor::scalar(1.0f), "a");
  auto& i = g.constant(tensor::scalar(std::int32_t{1}), "i");
  auto& b = g.op("Neg", {a}, {}, "b");
  auto& c = g.op("Abs", {b}, {}, "c");
  auto& late = g.constant(tensor::scalar(2.0f), "late");
  const node& replaced = g.replace(b.id(), "Square", {a}, {}, {});
  CHECK(replaced.id() == b.id());
  CHECK(g.at(b.id()).op() == "Square");
  CHECK(g["b"].op() == "Square");
  CHECK(test::eval(g, c).scalar_value<float>() == 1.0f);
  test::require_error([&] { g.replace(b.id(), "Neg", {late}, {}, {}); }, {"node 'b' (Neg)", "input 0 is not an output of this graph"});
  test::require_error([&] { g.replace(b.id(), "Neg", {a}, {}, {late.id()}); }, {"control input", "does not come before"});
  test::require_error([&] { g.replace(b.id(), "Identity", {i}, {}, {}); }, {"cannot replace node 'b' (Square)", "outputs differ"});
  CHECK(g.at(b.id()).op() == "Square");  // unchanged by the failures
  // Control edges move from a folded node to the node it folds into, which must come before
  // every node that waits.
  auto& waits = g.op("NoOp", {}, {}, node_options("waits").after({b.id()}));
  auto& early = g.op("NoOp", {}, {}, node_options("early"));
  test::require_error([&] { g.redirect_control_inputs(b.id(), early.id() + 1); }, {"no node with id"});
  test::require_error([&] { g.redirect_control_inputs(b.id(), waits.id()); }, {"node 'waits' (NoOp)", "does not come before it"});
  CHECK(g.at(waits.id()).control_inputs() == std::vector<int>{b.id()});
  g.redirect_control_inputs(b.id(), c.id());
  CHECK(g.at(waits.id()).control_inputs() == std::vector<int>{c.id()});
}

TEST_CASE("folding a bias and ReLU into a MatMul's output pass: the same values as the three nodes") {
  // y = relu(x w + b), z = y v + c, against sums in double: products split across two threads,
  // sgemm's transposed path (10 columns), a matrix-vector product (one column, Eigen's path
  // and the pass after it), and a transposed operand.
  struct layer_shape {
    std::int64_t batch, in, out;
    bool tb;
    int threads;
  };
  for (auto [batch, in, out, tb, threads] : {layer_shape{64, 200, 300, false, 2}, layer_shape{64, 70, 50, true, 1},
                                             layer_shape{150, 40, 10, false, 2}, layer_shape{33, 20, 1, false, 1}}) {
    INFO("x: " << batch << " x " << in << ", w: " << in << " x " << out << (tb ? " (stored transposed)" : "") << ", "
               << threads << " threads");
    graph g;
    const auto xs = wave(batch * in, 0.5), ws = wave(in * out, 1.5), bs = wave(out, 2.5), vs = wave(out * 3, 3.5);
    auto& x = g.placeholder(dtype::float32, {batch, in}, "x");
    auto& w = g.constant(tensor::from_vector(ws, tb ? shape{out, in} : shape{in, out}), "w");
    auto& b = g.constant(tensor::from_vector(bs, shape{out}), "b");
    auto& y = g.op("Relu", {g.op("BiasAdd", {g.op("MatMul", {x, w}, {{"transpose_b", tb}}, "xw"), b}, {}, "xw_b")}, {}, "y");
    auto& z = g.op("BiasAdd", {g.op("MatMul", {y, g.constant(tensor::from_vector(vs, shape{out, 3}), "v")}, {}, "yv"),
                               g.constant(tensor::of<float>({3}, {0.25f, -0.5f, 1.0f}), "c")},
                   {}, "z");
    std::vector<double> want_y(static_cast<std::size_t>(batch * out)), bound_y(want_y.size());
    for (std::int64_t i = 0; i < batch; ++i)
      for (std::int64_t j = 0; j < out; ++j) {
        double sum = bs[static_cast<std::size_t>(j)], magnitude = std::abs(sum);
        for (std::int64_t p = 0; p < in; ++p) {
          const double term = static_cast<double>(xs[static_cast<std::size_t>(i * in + p)]) *
                              static_cast<double>(ws[static_cast<std::size_t>(tb ? j * in + p : p * out + j)]);
          sum += term;
          magnitude += std::abs(term);
        }
        want_y[static_cast<std::size_t>(i * out + j)] = std::max(sum, 0.0);
        bound_y[static_cast<std::size_t>(i * out + j)] = std::ldexp(1.0, -24) * static_cast<double>(in + 6) * magnitude;
      }
    const feed_list feeds{{"x", tensor::from_vector(xs, shape{batch, in})}};
    std::vector<std::vector<float>> results;
    for (bool fuse : {true, false}) {
      INFO((fuse ? "fused" : "unfused"));
      session s(g, fusing(threads, fuse));
      const auto traced = trace(s, feeds, {y, z});
      const auto& got = traced.out;
      const auto& names = traced.names;
      if (fuse) {
        CHECK(names.count("y (_FusedMatMulBiasAdd)") == 1);
        CHECK(names.count("z (_FusedMatMulBiasAdd)") == 1);
        CHECK(names.count("xw (MatMul)") + names.count("xw_b (BiasAdd)") + names.count("yv (MatMul)") == 0);
      } else {
        CHECK(names.count("y (Relu)") == 1);
      }
      const auto ys = got.at(0).to_vector<float>();
      int bad = 0;
      for (std::size_t i = 0; i < ys.size(); ++i)
        if (!(std::abs(static_cast<double>(ys[i]) - want_y[i]) <= bound_y[i])) ++bad;
      CHECK(bad == 0);
      results.push_back(got.at(1).to_vector<float>());
    }
    // z from the fused and the unfused y: the same sums, within float rounding of each other.
    REQUIRE(results[0].size() == results[1].size());
    int far = 0;
    for (std::size_t i = 0; i < results[0].size(); ++i)
      if (!(std::abs(results[0][i] - results[1][i]) <= 1e-4f * (1 + std::abs(results[1][i])))) ++far;
    CHECK(far == 0);
  }
}

TEST_CASE("folding a bias and ReLU: a BiasAdd read elsewhere keeps its Relu, and gradients read the fused output") {
  // One dense ReLU layer and SGD, folded and not: the fused forward node feeds ReluGrad,
  // and the weight's update is folded too. The BiasAdd fetched as well stops the Relu's fold.
  graph g;
  auto& x = g.placeholder(dtype::float32, {8, 5}, "x");
  auto w = g.variable(dtype::float32, {5, 4}, node_options("w")).out(0);
  auto b = g.variable(dtype::float32, {4}, node_options("b")).out(0);
  auto& init_w = g.op("Assign", {w, g.constant(tensor::from_vector(wave(20, 0.7), shape{5, 4}))}, {}, "init_w");
  auto& init_b = g.op("Assign", {b, g.constant(tensor::of<float>({4}, {0.1f, -0.2f, 0.3f, 0.0f}))}, {}, "init_b");
  auto& pre = g.op("BiasAdd", {g.op("MatMul", {x, g.op("Identity", {w}, {}, "w/read")}, {}, "xw"), g.op("Identity", {b}, {}, "b/read")}, {}, "pre");
  auto& y = g.op("Relu", {pre}, {}, "y");
  auto& loss = g.op("Sum", {g.op("Square", {y}), g.constant(tensor::of<std::int32_t>({2}, {0, 1}))}, {}, "loss");
  auto grads = add_gradients(g, {loss.out(0)}, {w, b});
  auto rate = g.constant(tensor::scalar(0.01f), "rate").out(0);
  auto& step_w = g.op("ApplyGradientDescent", {w, rate, grads[0]}, {}, "step_w");
  auto& step_b = g.op("ApplyGradientDescent", {b, rate, grads[1]}, {}, "step_b");
  auto& train = g.op("NoOp", {}, {}, node_options("train").after({step_w.id(), step_b.id()}));
  const feed_list feeds{{"x", tensor::from_vector(wave(40, 1.9), shape{8, 5})}};
  std::vector<std::vector<float>> after;
  for (bool fuse : {true, false}) {
    INFO((fuse ? "fused" : "unfused"));
    session s(g, fusing(1, fuse));
    s.run({}, {}, {init_w, init_b});
    const auto ops = trace(s, feeds, {}, {train}).ops;
    CHECK(ops.count("_FusedMatMulBiasAdd") == (fuse ? 1 : 0));
    CHECK(ops.count("ReluGrad") == 1);
    s.run(feeds, {}, {train});
    auto wb = s.run({}, {w, b});
    after.push_back(wb[0].to_vector<float>());
    const auto bv = wb[1].to_vector<float>();
    after.back().insert(after.back().end(), bv.begin(), bv.end());
    // The BiasAdd fetched beside the loss: MatMul and BiasAdd fold, the Relu runs alone.
    const auto fetched = trace(s, feeds, {pre, y});
    const auto& out = fetched.out;
    const auto& names = fetched.names;
    CHECK(names.count(fuse ? "pre (_FusedMatMulBiasAdd)" : "pre (BiasAdd)") == 1);
    CHECK(names.count("y (Relu)") == 1);
    const auto p = out[0].to_vector<float>(), r = out[1].to_vector<float>();
    for (std::size_t i = 0; i < p.size(); ++i) CHECK(r[i] == std::max(p[i], 0.0f));
  }
  REQUIRE(after[0].size() == after[1].size());
  for (std::size_t i = 0; i < after[0].size(); ++i) CHECK(std::abs(after[0][i] - after[1][i]) <= 1e-5f * (1 + std::abs(after[1][i])));
}

TEST_CASE("folding a bias: bad shapes at run time are errors naming the node") {
  graph g;
  auto& x = g.placeholder(dtype::float32, partial_shape::unknown_rank(), "x");
  auto& bias = g.placeholder(dtype::float32, partial_shape::unknown_rank(), "bias");
  auto& y = g.op("Relu", {g.op("BiasAdd", {g.op("MatMul", {x, g.constant(tensor::of<float>({2, 2}, {1, 2, 3, 4}))}), bias})}, {}, "y");
  session s(g, test::one_thread());
  const tensor two = tensor::of<float>({1, 2}, {1, 1});
  CHECK(s.run({{"x", two}, {"bias", tensor::of<float>({2}, {-10, 0})}}, {y}).at(0).to_vector<float>() == std::vector<float>{0, 6});
  test::require_error([&] { s.run({{"x", two}, {"bias", tensor::of<float>({3}, {1, 1, 1})}}, {y}); },
                      {"node 'y' (_FusedMatMulBiasAdd)", "bias of shape [3]", "2 columns"});
  test::require_error([&] { s.run({{"x", tensor::of<float>({3}, {1, 1, 1})}, {"bias", tensor::of<float>({2}, {1, 1})}}, {y}); },
                      {"node 'y'", "must be matrices", "[3]"});
}

TEST_CASE("folding under train::minimize: control edges on the folded nodes move to the fused node") {
  // minimize makes each update wait on the variable's readers (the forward MatMul and BiasAdd);
  // those edges now name the fused node, and both folds happen.
  graph g;
  auto x = g.placeholder(dtype::float32, {4, 3}, "x").out(0);
  auto w = g.variable(dtype::float32, {3, 2}, node_options("w")).out(0);
  auto b = g.variable(dtype::float32, {2}, node_options("b")).out(0);
  auto& init_w = g.op("Assign", {w, g.constant(tensor::of<float>({3, 2}, {0.5f, -1, 1, 0.25f, -0.5f, 2}))});
  auto& init_b = g.op("Assign", {b, g.constant(tensor::of<float>({2}, {0.1f, -0.1f}))});
  auto y = g.op("Relu", {g.op("BiasAdd", {g.op("MatMul", {x, w}).out(0), b}).out(0)}, {}, "y").out(0);
  auto loss = g.op("Sum", {y, g.constant(tensor::of<std::int32_t>({2}, {0, 1}))}).out(0);
  auto t = train::minimize(g, loss, {w, b}, train::sgd{0.1f});
  const feed_list feeds{{"x", tensor::of<float>({4, 3}, {1, 2, 3, -1, 0, 1, 2, -2, 0.5f, 0, 1, -1})}};
  std::vector<std::vector<float>> after;
  for (bool fuse : {true, false}) {
    INFO((fuse ? "fused" : "unfused"));
    session s(g, fusing(1, fuse));
    s.run({}, {}, {init_w, init_b});
    const auto ops = trace(s, feeds, {}, {t.step}).ops;
    CHECK(ops.count("_FusedMatMulBiasAdd") == (fuse ? 1 : 0));
    CHECK(ops.count("_FusedMatMulApplyGradientDescent") == (fuse ? 1 : 0));
    CHECK(ops.count("MatMul") == (fuse ? 0 : 2));
    s.run(feeds, {}, {t.step});
    auto wb = s.run({}, {w, b});
    after.push_back(wb[0].to_vector<float>());
    const auto bv = wb[1].to_vector<float>();
    after.back().insert(after.back().end(), bv.begin(), bv.end());
  }
  for (std::size_t i = 0; i < after[0].size(); ++i) CHECK(std::abs(after[0][i] - after[1][i]) <= 1e-6f);
}

TEST_CASE("folding under a device scope: the gradient's product folds into the update that goes with its variable") {
  // minimize puts each update with its variable, outside the caller's device scope (device ""
  // and the variable's colocation group); the gradient's MatMul asks for the scope's device.
  // It folds where the variable asks for that device, and not where the variable asks for none
  // (the fused node goes with the variable, which may be placed elsewhere).
  for (bool variable_in_scope : {true, false}) {
    INFO((variable_in_scope ? "the variable in the scope" : "the variable outside it"));
    graph g;
    auto x = g.placeholder(dtype::float32, {4, 3}, "x").out(0);
    std::optional<output> w;
    if (!variable_in_scope) w = g.variable(dtype::float32, {3, 2}, node_options("w")).out(0);
    auto scope = g.device_scope("/device:CPU:0");
    if (variable_in_scope) w = g.variable(dtype::float32, {3, 2}, node_options("w")).out(0);
    auto& init = g.op("Assign", {*w, g.constant(tensor::of<float>({3, 2}, {0.5f, -1, 1, 0.25f, -0.5f, 2}))});
    auto loss = g.op("Sum", {g.op("MatMul", {x, *w}).out(0), g.constant(tensor::of<std::int32_t>({2}, {0, 1}))}).out(0);
    auto t = train::minimize(g, loss, {*w}, train::sgd{0.5f});
    CHECK(passes::fusable_updates(g, {}, {}, {t.step.id()}).size() == (variable_in_scope ? 1u : 0u));
    session s(g, fusing(1, true));
    s.run({}, {}, {init});
    const feed_list feeds{{"x", tensor::of<float>({4, 3}, {1, 2, 3, -1, 0, 1, 2, -2, 0.5f, 0, 1, -1})}};
    CHECK(trace(s, feeds, {}, {t.step}).ops.count("_FusedMatMulApplyGradientDescent") == (variable_in_scope ? 1 : 0));
    s.run({}, {}, {init});
    s.run(feeds, {}, {t.step});
    // d loss / d w = x^T 1: x's column sums [2, 1, 3.5] in each column of w; w - 0.5 of them.
    CHECK(s.run({}, {*w}).at(0).to_vector<float>() == std::vector<float>{-0.5f, -2, 0.5f, -0.25f, -2.25f, 0.25f});
  }
}

TEST_CASE("folding in bfloat16: a two-layer step folds as in float and lands within bfloat16 rounding of float's step") {
  // relu(x w1 + b1) w2 + b2, loss = the sum of its elements, one SGD step in bfloat16: both
  // BiasAdds (one with its Relu), the ReluGrad and both weights' updates fold. x is 48 x 300:
  // the first layer's product is deeper than one depth panel of bgemm (its partial sums wait
  // in float), and on two threads the products split (w1's update, 300 x 160 over a batch of
  // 48, by its columns, as the forward product). Checked against the same step in
  // float32 from the same (bfloat16) values: each weight within two bfloat16 ulps, plus
  // rate * 2^-8 * 24 for the bfloat16 rounding of the backward pass's values (48 terms of at
  // most 1 x 0.5). The unfused bfloat16 step misses this bound: a pre-activation near 0,
  // rounded twice, becomes 0, and its ReluGrad clears a term of 48-term sums that cancel.
  const std::int64_t batch = 48, in = 300, hidden = 160, out = 40;
  const float rate = 0.002f;
  // The step in dtype t: the weights after it, as floats, and the fused ops it ran.
  const auto step = [&](dtype t, int threads) {
    const auto values = [t](const std::vector<float>& v, shape s) {
      tensor b(dtype::bfloat16, s), f(dtype::float32, s);
      for (std::size_t i = 0; i < v.size(); ++i) {
        b.data<bfloat16>()[i] = bfloat16(v[i]);
        f.data<float>()[i] = static_cast<float>(b.data<bfloat16>()[i]);
      }
      return t == dtype::bfloat16 ? b : f;
    };
    graph g;
    auto x = g.placeholder(t, {batch, in}, "x").out(0);
    std::vector<output> vars;
    std::vector<int> inits;
    const std::vector<shape> shapes{{in, hidden}, {hidden}, {hidden, out}, {out}};
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      vars.push_back(g.variable(t, shapes[i], node_options("v" + std::to_string(i))).out(0));
      std::vector<float> init = wave(shapes[i].num_elements(), 0.3 + static_cast<double>(i));
      for (float& v : init) v *= 0.1f;
      inits.push_back(g.op("Assign", {vars[i], g.constant(values(init, shapes[i]))}).id());
    }
    auto y = g.op("Relu", {g.op("BiasAdd", {g.op("MatMul", {x, vars[0]}).out(0), vars[1]}).out(0)}).out(0);
    auto z = g.op("BiasAdd", {g.op("MatMul", {y, vars[2]}).out(0), vars[3]}).out(0);
    auto loss = g.op("Sum", {z, g.constant(tensor::of<std::int32_t>({2}, {0, 1}))}).out(0);
    auto train = train::minimize(g, loss, vars, train::sgd{rate});
    auto& init = g.op("NoOp", {}, {}, node_options("init").after(inits));
    session s(g, fusing(threads, true));
    s.run({}, {}, {init});
    const auto ops = trace(s, {{"x", values(wave(batch * in, 1.3), shape{batch, in})}}, {}, {train.step}).ops;
    std::vector<float> after;
    for (const tensor& v : s.run({}, std::vector<endpoint>(vars.begin(), vars.end()))) {
      REQUIRE(v.dtype() == t);
      for (std::int64_t i = 0; i < v.num_elements(); ++i)
        after.push_back(t == dtype::float32 ? v.data<float>()[i] : static_cast<float>(v.data<bfloat16>()[i]));
    }
    return std::pair{after, ops};
  };
  for (int threads : {1, 2}) {
    INFO(threads << " threads");
    const auto [want, float_ops] = step(dtype::float32, threads);
    const auto [got, ops] = step(dtype::bfloat16, threads);
    CHECK(ops.count("_FusedMatMulBiasAdd") == 2);
    CHECK(ops.count("_FusedMatMulReluGrad") == 1);
    CHECK(ops.count("_FusedMatMulApplyGradientDescent") == 2);
    CHECK(ops.count("MatMul") == 0);
    CHECK(ops == float_ops);
    REQUIRE(got.size() == want.size());
    int far = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!(std::abs(got[i] - want[i]) <= std::ldexp(std::abs(want[i]), -7) + rate * std::ldexp(24.0f, -8))) ++far;
    CHECK(far == 0);
  }
}

TEST_CASE("folding mixed precision's Adam: ApplyAdam on Cast(MatMul) of bfloat16 operands, Adam's step on the float sums") {
  // grad = Cast(MatMul(a, b), float32) of bfloat16 a and b (mixed precision's weight
  // gradient), ApplyAdam on float32 var, m and v: one _FusedMatMulApplyAdam. Checked against
  // Adam in double on the exact gradient (the bfloat16 operands' products summed in double):
  // m and v within float rounding of their update, plus (1 - beta) times the float sum's
  // rounding (k 2^-23 of the sum of the gradient's terms' magnitudes). The unfused step rounds
  // the gradient to bfloat16 (2^-9 of it) and misses that bound. Shapes: a weight gradient
  // x^T dz split by its columns on two threads (300 x 160 over 48), one deeper than a depth
  // panel with fewer columns than rows (40 x 20 over 300: the transposes' product), edges.
  struct problem {
    std::int64_t m, k, n;
    bool ta, tb, nesterov;
  };
  // The hyperparameters as the graph holds them (float32), in double for the reference.
  const double lr = 0.01f, b1 = 0.9f, b2 = 0.999f, eps = 1e-7f, b1p = 0.81f, b2p = 0.998001f;
  for (const problem& p : {problem{300, 48, 160, true, false, false}, problem{40, 300, 20, false, true, true},
                           problem{13, 5, 33, false, false, false}}) {
    INFO("m=" << p.m << " k=" << p.k << " n=" << p.n << " nesterov=" << p.nesterov);
    const shape sa = p.ta ? shape{p.k, p.m} : shape{p.m, p.k}, sb = p.tb ? shape{p.n, p.k} : shape{p.k, p.n};
    const auto bf16 = [](const std::vector<float>& v, const shape& s) {
      tensor t(dtype::bfloat16, s);
      for (std::size_t i = 0; i < v.size(); ++i) t.data<bfloat16>()[i] = bfloat16(v[i]);
      return t;
    };
    const tensor a = bf16(wave(sa.num_elements(), 0.2), sa), b = bf16(wave(sb.num_elements(), 1.7), sb);
    std::vector<float> var0 = wave(p.m * p.n, 0.9), m0 = wave(p.m * p.n, 2.1), v0 = wave(p.m * p.n, 2.9);
    for (float& x : m0) x *= 0.05f;
    for (float& x : v0) x = 0.01f * x * x;
    // The exact gradient and its terms' magnitudes, in double.
    std::vector<double> grad(static_cast<std::size_t>(p.m * p.n)), mag(grad.size());
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j)
        for (std::int64_t q = 0; q < p.k; ++q) {
          const double x = static_cast<float>(a.data<bfloat16>()[p.ta ? q * p.m + i : i * p.k + q]);
          const double y = static_cast<float>(b.data<bfloat16>()[p.tb ? j * p.k + q : q * p.n + j]);
          grad[static_cast<std::size_t>(i * p.n + j)] += x * y;
          mag[static_cast<std::size_t>(i * p.n + j)] += std::abs(x * y);
        }
    const auto run = [&](int threads, bool fuse) {
      graph g;
      const output pa = g.placeholder(dtype::bfloat16, sa, "a").out(0), pb = g.placeholder(dtype::bfloat16, sb, "b").out(0);
      std::vector<output> vars;
      std::vector<int> inits;
      for (const auto* start : {&var0, &m0, &v0}) {
        vars.push_back(g.variable(dtype::float32, shape{p.m, p.n}, node_options("s" + std::to_string(vars.size()))).out(0));
        inits.push_back(g.op("Assign", {vars.back(), g.constant(tensor::from_vector(*start, shape{p.m, p.n}))}).id());
      }
      const auto scalar = [&](double x) { return g.constant(tensor::scalar(static_cast<float>(x))).out(0); };
      const output product = g.op("MatMul", {pa, pb}, {{"transpose_a", p.ta}, {"transpose_b", p.tb}}).out(0);
      const output gradient = g.op("Cast", {product}, {{"DstT", dtype::float32}}).out(0);
      const node& step = g.op("ApplyAdam", {vars[0], vars[1], vars[2], scalar(b1p), scalar(b2p), scalar(lr), scalar(b1),
                                            scalar(b2), scalar(eps), gradient},
                              {{"use_nesterov", p.nesterov}}, "step");
      const node& init = g.op("NoOp", {}, {}, node_options("init").after(inits));
      session s(g, fusing(threads, fuse));
      s.run({}, {}, {init});
      const auto ops = trace(s, {{pa, a}, {pb, b}}, {}, {step}).ops;
      CHECK(ops.count("_FusedMatMulApplyAdam") == (fuse ? 1 : 0));
      CHECK(ops.count("Cast") == (fuse ? 0 : 1));
      std::vector<std::vector<float>> out;
      for (const tensor& t : s.run({}, std::vector<endpoint>(vars.begin(), vars.end()))) out.push_back(t.to_vector<float>());
      return out;
    };
    // Elements outside the bounds above (var: its update's float rounding, and lr times the
    // moments' bounds over sqrt(v)).
    const auto misses = [&](const std::vector<std::vector<float>>& got) {
      int far = 0;
      const double lr_t = lr * std::sqrt(1 - b2p) / (1 - b1p);
      for (std::size_t i = 0; i < grad.size(); ++i) {
        const double g = grad[i], m1 = m0[i] + (g - m0[i]) * (1 - b1), v1 = v0[i] + (g * g - v0[i]) * (1 - b2);
        const double dg = static_cast<double>(p.k) * std::ldexp(mag[i], -23);
        const double dm = 1e-6 * std::abs(m1) + (1 - b1) * dg;
        const double dv = 1e-6 * v1 + (1 - b2) * 3 * std::abs(g) * dg + 1e-12;
        const double num = p.nesterov ? m1 * b1 + (1 - b1) * g : m1, den = std::sqrt(v1) + eps;
        const double var1 = var0[i] - lr_t * num / den;
        const double dvar = 1e-6 * std::abs(var1) + lr_t * (2 * dm / den + std::abs(num) * dv / (den * den * std::sqrt(v1)));
        far += !(std::abs(got[1][i] - m1) <= dm) || !(std::abs(got[2][i] - v1) <= dv) || !(std::abs(got[0][i] - var1) <= dvar);
      }
      return far;
    };
    for (int threads : {1, 2}) {
      INFO(threads << " threads");
      CHECK(misses(run(threads, true)) == 0);
    }
    if (p.m * p.n > 1000) CHECK(misses(run(1, false)) > 0);  // the bound has teeth: the bfloat16 gradient misses it
  }
  // A product that does not fit the variable: an error naming the node and both shapes.
  graph g;
  const output w = g.variable(dtype::float32, shape{2, 2}, node_options("w")).out(0);
  const output mv = g.variable(dtype::float32, shape{2, 2}, node_options("mv")).out(0);
  const auto one = g.constant(tensor::scalar(0.5f)).out(0);
  const auto bf16_of = [](shape s) {
    tensor t(dtype::bfloat16, s);
    for (auto& x : t.flat<bfloat16>()) x = bfloat16(1.0f);
    return t;
  };
  test::require_error(
      [&] {
        g.op("_FusedMatMulApplyAdam", {w, mv, mv, one, one, one, one, one, one, g.constant(bf16_of({3, 1})).out(0),
                                       g.constant(bf16_of({1, 2})).out(0)});
      },
      {"_FusedMatMulApplyAdam", "product of shape [3,2] does not match the variable's shape [2,2]"});
}

TEST_CASE("folding in bfloat16: a product of one row or one column takes the float path, then the same pass") {
  // bgemm takes products of at least two rows and columns; the others are float products of
  // the widened operands, then the bias and ReLU or the mask, rounded to bfloat16 once.
  // Against the sums in double, rounded to bfloat16: within one bfloat16 ulp.
  const auto bf16 = [](const std::vector<float>& v, shape s) {
    tensor t(dtype::bfloat16, s);
    for (std::size_t i = 0; i < v.size(); ++i) t.data<bfloat16>()[i] = bfloat16(v[i]);
    return t;
  };
  const auto value = [](const tensor& t, std::int64_t i) { return static_cast<double>(static_cast<float>(t.data<bfloat16>()[i])); };
  for (auto [m, k, n] : {std::array<std::int64_t, 3>{1, 40, 7}, std::array<std::int64_t, 3>{9, 40, 1}}) {
    INFO(m << " x " << k << " x " << n);
    const tensor xs = bf16(wave(m * k, 0.2), shape{m, k}), ws = bf16(wave(k * n, 1.4), shape{k, n}),
                 bs = bf16(wave(n, 2.2), shape{n}), fs = bf16(wave(m * n, 0.9), shape{m, n});
    graph g;
    auto& x = g.placeholder(dtype::bfloat16, {m, k}, "x");  // fed: constants alone would fold away
    auto& y = g.op("Relu", {g.op("BiasAdd", {g.op("MatMul", {x, g.constant(ws)}), g.constant(bs)})}, {}, "y");
    auto& r = g.op("ReluGrad", {g.op("MatMul", {x, g.constant(ws)}, {}, "p2"), g.constant(fs)}, {}, "r");
    session s(g, fusing(1, true));
    const auto traced = trace(s, {{"x", xs}}, {y, r});
    CHECK(traced.names.count("y (_FusedMatMulBiasAdd)") == 1);
    CHECK(traced.names.count("r (_FusedMatMulReluGrad)") == 1);
    int far = 0;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (std::int64_t p = 0; p < k; ++p) sum += value(xs, i * k + p) * value(ws, p * n + j);
        const double want_y = static_cast<float>(bfloat16(static_cast<float>(std::max(sum + value(bs, j), 0.0))));
        const double want_r = value(fs, i * n + j) > 0 ? static_cast<float>(bfloat16(static_cast<float>(sum))) : 0.0;
        const auto near = [](double got, double want) { return std::abs(got - want) <= std::ldexp(std::abs(want), -8); };
        if (!near(value(traced.out[0], i * n + j), want_y) || !near(value(traced.out[1], i * n + j), want_r)) ++far;
      }
    CHECK(far == 0);
  }
}

TEST_CASE("folding a ReluGrad into its gradients' product: the same values as the two nodes") {
  // backprops = ReluGrad(dz w^T, features) against sums in double: a split product on two
  // threads, sgemm's transposed path (10 columns), a matrix-vector product (one column: the
  // pass after Eigen's GEMV), a transposed operand stored as is. The features hold zeros,
  // negatives and NaNs, the incoming gradient a NaN and an infinity where the features clear
  // them: the select gives 0 there, folded or not.
  struct layer_shape {
    std::int64_t batch, out, in;
    bool tb;
    int threads;
  };
  for (auto [batch, out, in, tb, threads] : {layer_shape{64, 200, 300, true, 2}, layer_shape{64, 70, 50, false, 1},
                                             layer_shape{150, 40, 10, true, 2}, layer_shape{33, 20, 1, true, 1}}) {
    INFO("dz: " << batch << " x " << out << ", w: " << in << " x " << out << (tb ? "" : " (stored transposed)") << ", "
                << threads << " threads");
    auto dzs = wave(batch * out, 0.2), ws = wave(in * out, 1.1), fs = wave(batch * in, 2.3);
    for (std::size_t i = 0; i < fs.size(); i += 7) fs[i] = 0.0f;
    for (std::size_t i = 3; i < fs.size(); i += 13) fs[i] = std::numeric_limits<float>::quiet_NaN();
    // Row 0 of the product becomes NaN (and row 1 infinite) where dz's first row is: cleared
    // wherever the features are not above 0 in those rows.
    dzs[0] = std::numeric_limits<float>::quiet_NaN();
    dzs[static_cast<std::size_t>(out)] = std::numeric_limits<float>::infinity();
    fs[0] = -1.0f;
    fs[static_cast<std::size_t>(in)] = -1.0f;
    graph g;
    auto& dz = g.placeholder(dtype::float32, {batch, out}, "dz");
    auto& features = g.placeholder(dtype::float32, {batch, in}, "features");
    // w is (in, out), the product dz w^T; stored as (out, in) when not tb (then no transpose).
    auto& w = g.constant(tensor::from_vector(ws, tb ? shape{in, out} : shape{out, in}), "w");
    auto& dx = g.op("ReluGrad", {g.op("MatMul", {dz, w}, {{"transpose_b", tb}}, "dz_w"), features}, {}, "dx");
    std::vector<double> want(static_cast<std::size_t>(batch * in)), bound(want.size());
    std::vector<char> cleared(want.size());
    for (std::int64_t i = 0; i < batch; ++i)
      for (std::int64_t j = 0; j < in; ++j) {
        double sum = 0, magnitude = 0;
        for (std::int64_t p = 0; p < out; ++p) {
          const double term = static_cast<double>(dzs[static_cast<std::size_t>(i * out + p)]) *
                              static_cast<double>(ws[static_cast<std::size_t>(tb ? j * out + p : p * in + j)]);
          sum += term;
          magnitude += std::abs(term);
        }
        const auto at = static_cast<std::size_t>(i * in + j);
        cleared[at] = !(fs[at] > 0.0f);
        want[at] = cleared[at] ? 0.0 : sum;
        bound[at] = std::ldexp(1.0, -24) * static_cast<double>(out + 4) * magnitude;
      }
    const feed_list feeds{{"dz", tensor::from_vector(dzs, shape{batch, out})}, {"features", tensor::from_vector(fs, shape{batch, in})}};
    std::vector<std::vector<float>> results;
    for (bool fuse : {true, false}) {
      INFO((fuse ? "fused" : "unfused"));
      session s(g, fusing(threads, fuse));
      const auto traced = trace(s, feeds, {dx});
      CHECK(traced.names.count(fuse ? "dx (_FusedMatMulReluGrad)" : "dx (ReluGrad)") == 1);
      CHECK(traced.names.count("dz_w (MatMul)") == (fuse ? 0 : 1));
      const auto got = traced.out.at(0).to_vector<float>();
      int bad = 0, kept = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (cleared[i]) {
          if (got[i] != 0.0f) ++bad;
        } else if (std::isfinite(want[i])) {
          ++kept;
          if (!(std::abs(static_cast<double>(got[i]) - want[i]) <= bound[i])) ++bad;
        } else if (!std::isnan(got[i]) && !std::isinf(got[i])) {
          ++bad;  // rows 0 and 1 where the features keep them: NaN or infinite, as the product
        }
      }
      CHECK(bad == 0);
      CHECK(kept > 0);
      results.push_back(got);
    }
    // Folded or not, the same floats: the product is the same GEMM, the select the same.
    REQUIRE(results[0].size() == results[1].size());
    int differ = 0;
    for (std::size_t i = 0; i < results[0].size(); ++i)
      if (std::memcmp(&results[0][i], &results[1][i], sizeof(float)) != 0 && !(std::isnan(results[0][i]) && std::isnan(results[1][i])))
        ++differ;
    CHECK(differ == 0);
  }
}

TEST_CASE("folding a ReluGrad: not where the product is read, fetched or fed, and bad features are errors naming the node") {
  graph g;
  auto& dz = g.placeholder(dtype::float32, {2, 2}, "dz");
  auto& features = g.placeholder(dtype::float32, partial_shape::unknown_rank(), "features");
  auto& product = g.op("MatMul", {dz, g.constant(tensor::of<float>({2, 2}, {1, 2, 3, 4}), "w")}, {}, "product");
  auto& dx = g.op("ReluGrad", {product, features}, {}, "dx");
  // dz w = [[1, 1], [0, 1]] [[1, 2], [3, 4]] = [[4, 6], [3, 4]]; features [[1, -1], [0, 2]].
  const feed_list feeds{{"dz", tensor::of<float>({2, 2}, {1, 1, 0, 1})}, {"features", tensor::of<float>({2, 2}, {1, -1, 0, 2})}};
  const std::vector<float> want{4, 0, 0, 4};
  session s(g, test::one_thread());
  const auto folded = trace(s, feeds, {dx});
  CHECK(folded.names.count("dx (_FusedMatMulReluGrad)") == 1);
  CHECK(folded.out.at(0).to_vector<float>() == want);
  const auto fetched = trace(s, feeds, {dx, product});  // the product fetched too: not folded
  CHECK(fetched.names.count("dx (ReluGrad)") == 1);
  CHECK(fetched.out.at(0).to_vector<float>() == want);
  CHECK(fetched.out.at(1).to_vector<float>() == std::vector<float>{4, 6, 3, 4});
  feed_list fed = feeds;  // the product fed: the ReluGrad reads the fed value
  fed.push_back({"product", tensor::of<float>({2, 2}, {-5, 5, 5, 5})});
  const auto with_fed = trace(s, fed, {dx});
  CHECK(with_fed.names.count("dx (ReluGrad)") == 1);
  CHECK(with_fed.out.at(0).to_vector<float>() == std::vector<float>{-5, 0, 0, 5});
  test::require_error([&] { s.run({feeds[0], {"features", tensor::of<float>({2, 3}, {1, 1, 1, 1, 1, 1})}}, {dx}); },
                      {"node 'dx' (_FusedMatMulReluGrad)", "features of shape [2,3]", "[2,2]"});
}

TEST_CASE("folding under train::minimize: a two-layer ReLU network's input gradient folds its ReluGrad") {
  // x -> relu(x w1 + b1) -> (. w2 + b2) -> loss: the hidden layer's ReluGrad reads the product
  // d w2^T; folded with everything else, the weights after two steps equal the unfused ones.
  graph g;
  auto x = g.placeholder(dtype::float32, {6, 4}, "x").out(0);
  auto w1 = g.variable(dtype::float32, {4, 5}, node_options("w1")).out(0);
  auto w2 = g.variable(dtype::float32, {5, 3}, node_options("w2")).out(0);
  auto b1 = g.variable(dtype::float32, {5}, node_options("b1")).out(0);
  auto& init = g.op("NoOp", {}, {},
                    node_options("init").after({g.op("Assign", {w1, g.constant(tensor::from_vector(wave(20, 0.4), shape{4, 5}))}).id(),
                                                g.op("Assign", {w2, g.constant(tensor::from_vector(wave(15, 1.7), shape{5, 3}))}).id(),
                                                g.op("Assign", {b1, g.constant(tensor::from_vector(wave(5, 2.9), shape{5}))}).id()}));
  auto h = g.op("Relu", {g.op("BiasAdd", {g.op("MatMul", {x, w1}).out(0), b1}).out(0)}, {}, "h").out(0);
  auto y = g.op("MatMul", {h, w2}).out(0);
  auto loss = g.op("Sum", {g.op("Square", {y}), g.constant(tensor::of<std::int32_t>({2}, {0, 1}))}).out(0);
  auto t = train::minimize(g, loss, {w1, w2, b1}, train::sgd{0.01f});
  two_steps_alike(g, init, {{"x", tensor::from_vector(wave(24, 3.3), shape{6, 4})}}, t.step, {w1, w2, b1},
                  {{"_FusedMatMulReluGrad", 1}, {"ReluGrad", 0}});
}

namespace {
// MaxPool's attrs: a kh x kw window, stride s, SAME or VALID.
attr_map pooling(std::int64_t kh, std::int64_t kw, std::int64_t s, bool same) {
  return {{"ksize", std::vector<std::int64_t>{1, kh, kw, 1}},
          {"strides", std::vector<std::int64_t>{1, s, s, 1}},
          {"padding", std::string(same ? "SAME" : "VALID")}};
}
}  // namespace

TEST_CASE("folding a MaxPoolGrad's ReluGrad: the same bits as the two nodes for every kind of window") {
  // A convolution layer's backward pass through its Relu and MaxPool: dx = ReluGrad(MaxPoolGrad(r,
  // MaxPool(r), dy), r), r = Relu(x). Windows that do not overlap and cover the input, that reach
  // into SAME padding, that leave elements out (stride 3), and that overlap (3x3, stride 2); 19
  // channels (a SIMD packet of floats and a tail); x with zeros (whole windows of them: a
  // maximum of 0, masked), negatives, a NaN and an infinity; float32 and bfloat16.
  struct geo {
    std::int64_t h, w, kh, kw, s;
    bool same;
  };
  const std::int64_t n = 2, c = 19;
  for (const geo& q : {geo{6, 6, 2, 2, 2, false}, geo{5, 5, 2, 2, 2, true}, geo{5, 7, 2, 2, 3, true}, geo{5, 5, 3, 3, 2, true}})
    for (dtype t : {dtype::float32, dtype::bfloat16})
      for (int threads : {1, 2}) {
        INFO(q.h << "x" << q.w << " by " << q.kh << "x" << q.kw << " stride " << q.s << (q.same ? " SAME, " : " VALID, ") << t
                  << ", " << threads << " threads");
        graph g;
        auto& x = g.placeholder(dtype::float32, shape{n, q.h, q.w, c}, "x");
        auto& dy = g.placeholder(dtype::float32, partial_shape::unknown_of_rank(4), "dy");
        auto& r = g.op("Relu", {g.op("Cast", {x}, {{"DstT", t}})}, {}, "r");
        auto& p = g.op("MaxPool", {r}, pooling(q.kh, q.kw, q.s, q.same), "p");
        auto& mg = g.op("MaxPoolGrad", {r, p, g.op("Cast", {dy}, {{"DstT", t}})}, pooling(q.kh, q.kw, q.s, q.same), "mg");
        auto& dx = g.op("ReluGrad", {mg, r}, {}, "dx");
        auto& out = g.op("Cast", {dx}, {{"DstT", dtype::float32}}, "out");
        const auto oh = q.same ? (q.h + q.s - 1) / q.s : (q.h - q.kh) / q.s + 1;
        const auto ow = q.same ? (q.w + q.s - 1) / q.s : (q.w - q.kw) / q.s + 1;
        std::vector<float> xs(static_cast<std::size_t>(n * q.h * q.w * c)), dys(static_cast<std::size_t>(n * oh * ow * c));
        for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = i % 5 == 0 ? 0.0f : static_cast<float>(std::sin(0.9 * static_cast<double>(i)));
        for (std::size_t i = 0; i < xs.size() / 4; ++i) xs[i] = 0.0f;  // the first image's first rows: windows of zeros
        xs[xs.size() / 2] = std::numeric_limits<float>::quiet_NaN();
        xs[xs.size() / 2 + 3 * c] = std::numeric_limits<float>::infinity();
        for (std::size_t i = 0; i < dys.size(); ++i) dys[i] = 1.0f + static_cast<float>(i % 13);
        const feed_list feeds{{"x", tensor::from_vector(xs, shape{n, q.h, q.w, c})},
                              {"dy", tensor::from_vector(dys, shape{n, oh, ow, c})}};
        std::vector<std::vector<float>> results;
        for (bool fuse : {true, false}) {
          INFO((fuse ? "fused" : "unfused"));
          session s(g, fusing(threads, fuse));
          const auto traced = trace(s, feeds, {out});
          CHECK(traced.names.count(fuse ? "dx (_FusedMaxPoolGradReluGrad)" : "dx (ReluGrad)") == 1);
          CHECK(traced.names.count("mg (MaxPoolGrad)") == (fuse ? 0 : 1));
          results.push_back(traced.out.at(0).to_vector<float>());
        }
        REQUIRE(results[0].size() == results[1].size());
        int differ = 0, kept = 0, masked = 0;
        for (std::size_t i = 0; i < results[0].size(); ++i) {
          if (std::memcmp(&results[0][i], &results[1][i], sizeof(float)) != 0) ++differ;
          kept += results[0][i] != 0.0f;
        }
        // Windows of zeros: the gradient a window sends its first element is masked.
        for (std::size_t i = 0; i < xs.size() / 4; ++i) masked += results[0][i] != 0.0f;
        CHECK(differ == 0);
        CHECK(kept > 0);
        CHECK(masked == 0);
      }
}

TEST_CASE("folding a MaxPoolGrad's ReluGrad: not where the MaxPoolGrad is fetched or fed or the features differ") {
  // A 2x2 input, one window: r = [[1, 3], [0, 2]] (x = [[1, 3], [-1, 2]]), dy = 5: MaxPoolGrad
  // sends 5 to the 3; ReluGrad by r keeps it, by other = [[1, -1], [1, 1]] clears it.
  graph g;
  auto& x = g.placeholder(dtype::float32, shape{1, 2, 2, 1}, "x");
  auto& other = g.placeholder(dtype::float32, shape{1, 2, 2, 1}, "other");
  auto& r = g.op("Relu", {x}, {}, "r");
  auto& p = g.op("MaxPool", {r}, pooling(2, 2, 2, false), "p");
  auto& mg = g.op("MaxPoolGrad", {r, p, g.constant(tensor::of<float>({1, 1, 1, 1}, {5}))}, pooling(2, 2, 2, false), "mg");
  auto& dx = g.op("ReluGrad", {mg, r}, {}, "dx");
  auto& mg2 = g.op("MaxPoolGrad", {r, p, g.constant(tensor::of<float>({1, 1, 1, 1}, {5}))}, pooling(2, 2, 2, false), "mg2");
  auto& dx_other = g.op("ReluGrad", {mg2, other}, {}, "dx_other");  // (mg read twice would fold in neither)
  auto& bad = g.op("_FusedMaxPoolGradReluGrad", {r, p, x}, pooling(2, 2, 2, false), "bad");  // grad of the input's shape
  const feed_list feeds{{"x", tensor::of<float>({1, 2, 2, 1}, {1, 3, -1, 2})}, {"other", tensor::of<float>({1, 2, 2, 1}, {1, -1, 1, 1})}};
  session s(g, test::one_thread());
  const auto folded = trace(s, feeds, {dx});
  CHECK(folded.names.count("dx (_FusedMaxPoolGradReluGrad)") == 1);
  CHECK(folded.out.at(0).to_vector<float>() == std::vector<float>{0, 5, 0, 0});
  const auto fetched = trace(s, feeds, {dx, mg});  // the MaxPoolGrad fetched too: not folded
  CHECK(fetched.names.count("dx (ReluGrad)") == 1);
  CHECK(fetched.out.at(0).to_vector<float>() == std::vector<float>{0, 5, 0, 0});
  feed_list fed = feeds;  // the MaxPoolGrad fed: the ReluGrad reads the fed value
  fed.push_back({"mg", tensor::of<float>({1, 2, 2, 1}, {7, 7, 7, 7})});
  const auto with_fed = trace(s, fed, {dx});
  CHECK(with_fed.names.count("dx (ReluGrad)") == 1);
  CHECK(with_fed.out.at(0).to_vector<float>() == std::vector<float>{7, 7, 0, 7});
  const auto others = trace(s, feeds, {dx_other});  // features other than the pool's input
  CHECK(others.names.count("dx_other (ReluGrad)") == 1);
  CHECK(others.out.at(0).to_vector<float>() == std::vector<float>{0, 0, 0, 0});
  test::require_error([&] { s.run(feeds, {bad}); },
                      {"node 'bad' (_FusedMaxPoolGradReluGrad)", "grad has shape [1,2,2,1]", "give [1,1,1,1]"});
}

TEST_CASE("folding a Conv2D's BiasAdd and Relu: the same floats as the three nodes in each convolution path") {
  // Relu(BiasAdd(Conv2D(x, f), b)) and BiasAdd(Conv2D(x, f), b) alone, fused and unfused, in
  // float32: 16 output channels (register blocks, the pass on each row as it is done), a
  // one-channel input with 5 output channels (the direct loops), 7 input channels by 3 (the
  // patch GEMM) and a 1x1 filter (one GEMM); the latter three apply the pass after the
  // convolution. A NaN in x stays NaN through the fused ReLU.
  struct layer {
    std::int64_t c, k, kh;
  };
  for (const layer& q : {layer{3, 16, 3}, layer{1, 5, 3}, layer{7, 3, 3}, layer{4, 6, 1}})
    for (int threads : {1, 2}) {
      INFO(q.c << " channels by " << q.k << ", " << q.kh << "x" << q.kh << ", " << threads << " threads");
      const std::int64_t n = 3, h = 7, w = 6;
      graph g;
      auto& x = g.placeholder(dtype::float32, shape{n, h, w, q.c}, "x");
      const attr_map conv{{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("SAME")}};
      std::vector<float> fs(static_cast<std::size_t>(q.kh * q.kh * q.c * q.k)), bs(static_cast<std::size_t>(q.k));
      for (std::size_t i = 0; i < fs.size(); ++i) fs[i] = static_cast<float>(std::cos(1.3 * static_cast<double>(i)));
      for (std::size_t i = 0; i < bs.size(); ++i) bs[i] = 0.25f * static_cast<float>(i % 5) - 0.5f;
      auto& f = g.constant(tensor::from_vector(fs, shape{q.kh, q.kh, q.c, q.k}), "f");
      auto& b = g.constant(tensor::from_vector(bs, shape{q.k}), "b");
      auto& r = g.op("Relu", {g.op("BiasAdd", {g.op("Conv2D", {x, f}, conv, "conv"), b}, {}, "biased")}, {}, "r");
      for (float& v : fs) v = -v;  // another filter, so that common subexpressions do not merge the two
      auto& f2 = g.constant(tensor::from_vector(fs, shape{q.kh, q.kh, q.c, q.k}), "f2");
      auto& lone = g.op("BiasAdd", {g.op("Conv2D", {x, f2}, conv, "conv2"), b}, {}, "lone");
      std::vector<float> xs(static_cast<std::size_t>(n * h * w * q.c));
      for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i)));
      xs[5] = std::numeric_limits<float>::quiet_NaN();
      const feed_list feeds{{"x", tensor::from_vector(xs, shape{n, h, w, q.c})}};
      std::vector<std::vector<float>> results;
      for (bool fuse : {true, false}) {
        INFO((fuse ? "fused" : "unfused"));
        session s(g, fusing(threads, fuse));
        const auto traced = trace(s, feeds, {r, lone});
        CHECK(traced.names.count(fuse ? "r (_FusedConv2DBiasAdd)" : "r (Relu)") == 1);
        CHECK(traced.names.count(fuse ? "lone (_FusedConv2DBiasAdd)" : "lone (BiasAdd)") == 1);
        CHECK(traced.ops.count("Conv2D") == (fuse ? 0 : 2));
        results.push_back(traced.out.at(0).to_vector<float>());
        const auto l = traced.out.at(1).to_vector<float>();
        results.back().insert(results.back().end(), l.begin(), l.end());
      }
      REQUIRE(results[0].size() == results[1].size());
      int differ = 0, nans = 0, zeros = 0;
      for (std::size_t i = 0; i < results[0].size(); ++i) {
        if (std::isnan(results[0][i])) {
          ++nans;  // the fused ReLU keeps a NaN; Eigen's Relu may make it 0
          continue;
        }
        zeros += results[0][i] == 0.0f;
        if (std::memcmp(&results[0][i], &results[1][i], sizeof(float)) != 0) ++differ;
      }
      CHECK(differ == 0);
      CHECK(nans > 0);
      CHECK(zeros > 0);  // the ReLU cut something
    }
}

TEST_CASE("folding a Conv2D's BiasAdd: not where the Conv2D is fetched, and a bad bias is an error naming the node") {
  graph g;
  auto& x = g.placeholder(dtype::float32, shape{1, 2, 2, 1}, "x");
  auto& b = g.placeholder(dtype::float32, partial_shape::unknown_rank(), "b");
  const attr_map conv{{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("VALID")}};
  auto& c = g.op("Conv2D", {x, g.constant(tensor::of<float>({1, 1, 1, 2}, {1, -1}), "f")}, conv, "conv");
  auto& r = g.op("Relu", {g.op("BiasAdd", {c, b}, {}, "biased")}, {}, "r");
  // x = [1, 2, 3, 4]: conv = [[1, -1], [2, -2], [3, -3], [4, -4]]; + [0.5, 2.5]; ReLU.
  const feed_list feeds{{"x", tensor::of<float>({1, 2, 2, 1}, {1, 2, 3, 4})}, {"b", tensor::of<float>({2}, {0.5f, 2.5f})}};
  const std::vector<float> want{1.5f, 1.5f, 2.5f, 0.5f, 3.5f, 0, 4.5f, 0};
  session s(g, test::one_thread());
  const auto folded = trace(s, feeds, {r});
  CHECK(folded.names.count("r (_FusedConv2DBiasAdd)") == 1);
  CHECK(folded.out.at(0).to_vector<float>() == want);
  const auto fetched = trace(s, feeds, {r, c});  // the Conv2D fetched too: not folded
  CHECK(fetched.names.count("r (Relu)") == 1);
  CHECK(fetched.out.at(0).to_vector<float>() == want);
  test::require_error([&] { s.run({feeds[0], {"b", tensor::of<float>({3}, {1, 2, 3})}}, {r}); },
                      {"node 'r' (_FusedConv2DBiasAdd)", "bias must be a vector of the filter's 2 output channels", "[3]"});
}

TEST_CASE("folding a convolution layer's nodes under train::minimize: the weights after two steps equal the unfused ones") {
  // LeNet's first layer and a dense one: x -> MaxPool(Relu(Conv2D(x, f) + b)) -> . w -> loss.
  // The Conv2D's BiasAdd and Relu fold into _FusedConv2DBiasAdd, the pool's gradient and the
  // ReluGrad into _FusedMaxPoolGradReluGrad.
  graph g;
  auto x = g.placeholder(dtype::float32, {4, 8, 8, 1}, "x").out(0);
  auto f = g.variable(dtype::float32, {3, 3, 1, 16}, node_options("f")).out(0);
  auto b = g.variable(dtype::float32, {16}, node_options("b")).out(0);
  auto w = g.variable(dtype::float32, {256, 3}, node_options("w")).out(0);
  auto& init = g.op("NoOp", {}, {},
                    node_options("init").after({g.op("Assign", {f, g.constant(tensor::from_vector(wave(144, 0.4), shape{3, 3, 1, 16}))}).id(),
                                                g.op("Assign", {b, g.constant(tensor::from_vector(wave(16, 2.9), shape{16}))}).id(),
                                                g.op("Assign", {w, g.constant(tensor::from_vector(wave(768, 1.7), shape{256, 3}))}).id()}));
  const attr_map conv{{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("SAME")}};
  auto h = g.op("Relu", {g.op("BiasAdd", {g.op("Conv2D", {x, f}, conv).out(0), b}).out(0)}).out(0);
  auto p = g.op("MaxPool", {h}, pooling(2, 2, 2, true)).out(0);
  auto flat = g.op("Reshape", {p, g.constant(tensor::of<std::int32_t>({2}, {4, 256}))}).out(0);
  auto y = g.op("MatMul", {flat, w}).out(0);
  auto loss = g.op("Sum", {g.op("Square", {y}), g.constant(tensor::of<std::int32_t>({2}, {0, 1}))}).out(0);
  auto t = train::minimize(g, loss, {f, b, w}, train::sgd{0.001f});
  two_steps_alike(g, init, {{"x", tensor::from_vector(wave(256, 3.3), shape{4, 8, 8, 1})}}, t.step, {f, b, w},
                  {{"_FusedConv2DBiasAdd", 1}, {"_FusedMaxPoolGradReluGrad", 1}, {"ReluGrad", 0}});
}
