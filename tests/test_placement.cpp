// The cost model and the placer (graph/passes/cost_model.hpp, graph/passes/placement.hpp)
// on clusters described, not built: a slow CPU and two accelerators four times faster with
// a slow link between every pair. Every expected device and time is worked out by hand in
// the comments from the figures the cluster states.
#include "support/helpers.hpp"

#include <limits>

#include <weft/graph/passes/placement.hpp>

using namespace weft;
using namespace weft::passes;

namespace {
std::string local(const char* type, int id) { return device_name::local(type, id).str(); }

// CPU:0 at 1 GFLOP/s, ACC:0 and ACC:1 at 4 GFLOP/s; memory so fast and overhead so small that
// arithmetic alone counts; every link 100 MB/s with no latency.
cluster three_devices() {
  const double fast_memory = 1e18;
  return cluster({{local("CPU", 0), 1e9, fast_memory, 0}, {local("ACC", 0), 4e9, fast_memory, 0},
                  {local("ACC", 1), 4e9, fast_memory, 0}},
                 link_spec{0, 1e8});
}

// Every op has a kernel everywhere but Assign, which the accelerators lack.
std::string kernels(const node& n, const std::string& type) {
  return type == "ACC" && n.op() == "Assign" ? n.describe() + ": no ACC kernel registered" : "";
}

std::vector<bool> every(const graph& g) { return std::vector<bool>(static_cast<std::size_t>(g.size()), true); }

output floats(graph& g, shape s, const std::string& name) {
  return g.constant(tensor::zeros(dtype::float32, s), name).out(0);
}

int device_of(const placement& p, const graph& g, const std::string& name) {
  return p.device_of[static_cast<std::size_t>(g[name].id())];
}
const node_placement& record(const placement& p, const graph& g, const std::string& name) {
  for (const auto& r : p.nodes)
    if (r.node == g[name].id()) return r;
  throw std::runtime_error("not placed: " + name);
}
}  // namespace

TEST_CASE("cost model: the op's flop rule, bytes, and shapes refined with the values fed") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{-1, 784}, "x");
  auto w = floats(g, shape{10, 784}, "w");
  auto y = g.op("MatMul", {x, w}, {{"transpose_b", true}}, "y");
  auto r = g.op("Relu", {y}, {}, "r");

  cost_model guessed(g, {}, cost_model_options{.unknown_dim = 2});
  CHECK(guessed.output_shape(y) == partial_shape{-1, 10});
  CHECK(guessed.flops(y.id()) == Approx(2.0 * 2 * 10 * 784));  // the unknown batch counts as 2
  CHECK(guessed.output_bytes(y) == Approx(2 * 10 * 4));

  cost_model fed(g, {{x.out(0), shape{128, 784}}});
  CHECK(fed.output_shape(y) == partial_shape{128, 10});
  CHECK(fed.output_shape(r) == partial_shape{128, 10});
  CHECK(fed.flops(y.id()) == Approx(2.0 * 128 * 10 * 784));
  // y reads x (128x784) and w (10x784) and writes 128x10 floats.
  CHECK(fed.bytes(y.id()) == Approx(4.0 * (128 * 784 + 10 * 784 + 128 * 10)));
  // Relu has no rule: one operation per element of its largest tensor.
  CHECK(fed.flops(r.id()) == Approx(128.0 * 10));
  // Constants and placeholders cost the overhead alone.
  CHECK(fed.flops(w.node) == 0);
  CHECK(fed.bytes(w.node) == 0);

  // Time on a device: overhead + the larger of arithmetic and memory time.
  cluster c({{local("CPU", 0), 1e9, 1e8, 1e-6}});
  const double arithmetic = 2.0 * 128 * 10 * 784 / 1e9, memory = fed.bytes(y.id()) / 1e8;
  CHECK(fed.compute_seconds(y.id(), c, 0) == Approx(1e-6 + std::max(arithmetic, memory)));
  fed.set_measured("y", "CPU", 0.25);
  CHECK(fed.compute_seconds(y.id(), c, 0) == 0.25);
  CHECK_THROWS_WITH(fed.set_measured("nope", "CPU", 1), Catch::Contains("no node named 'nope'"));
  CHECK_THROWS_WITH(fed.set_measured("y", "CPU", -1), Catch::Contains("is not a time"));
  CHECK_THROWS_WITH(cost_model(g, {{x.out(0), shape{128, 785}}}), Catch::Contains("does not accept [128,785]"));
}

TEST_CASE("cost model: convolution and pooling count their window taps") {
  graph g;
  ops::register_nn_ops();
  auto in = floats(g, shape{2, 8, 8, 3}, "in");
  auto f = floats(g, shape{3, 3, 3, 16}, "f");
  auto conv = g.op("Conv2D", {in, f}, {{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("SAME")}}, "conv");
  auto pool = g.op("MaxPool", {conv},
                   {{"ksize", std::vector<std::int64_t>{1, 2, 2, 1}}, {"strides", std::vector<std::int64_t>{1, 2, 2, 1}},
                    {"padding", std::string("VALID")}},
                   "pool");
  cost_model costs(g);
  // 2 x 8 x 8 x 16 outputs, each 3 x 3 x 3 multiply-adds.
  CHECK(costs.flops(conv.id()) == Approx(2.0 * (2 * 8 * 8 * 16) * (3 * 3 * 3)));
  // 2 x 4 x 4 x 16 pooled outputs of 4 taps each.
  CHECK(costs.flops(pool.id()) == Approx(2.0 * 4 * 4 * 16 * 4));
}

TEST_CASE("greedy placement: a free source runs at the step's start, so a chain is not split for its overhead (worked by hand)") {
  // Two CPUs at 1 GFLOP/s with 1 us a node, a link of 0.1 us and no bandwidth limit.
  const cluster c({{local("CPU", 0), 1e9, 1e18, 1e-6}, {local("CPU", 1), 1e9, 1e18, 1e-6}}, link_spec{0.1e-6, 1e18});
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{10, 100}, "x");
  auto w0 = floats(g, shape{100, 100}, "w0");
  auto w1 = floats(g, shape{100, 100}, "w1");
  auto a = g.op("MatMul", {x, w0}, {}, "a");
  g.op("MatMul", {a, w1}, {}, "b");
  const cost_model costs(g);
  const auto fed = [&](output o) { return o == x.out(0); };
  std::vector<bool> needed = every(g);
  needed[static_cast<std::size_t>(x.id())] = false;
  const placement p = place(g, needed, c, costs, kernels, {}, fed);
  // A MatMul is 2e5 flops: 200 us, 201 with the overhead; a constant costs the overhead.
  // a: a tie, CPU:0; w0 runs there at the start (0 to 1 us), a from 1 to 202.
  CHECK(device_of(p, g, "a") == 0);
  CHECK(record(p, g, "a").finish == Approx(202e-6));
  // b on CPU:0: w1 ran at the start too (1 to 2 us), so b starts when a ends: 202 -> 403.
  // On CPU:1: w1 at 0 to 1, a arrives at 202.1 -> 403.1. CPU:0. (Were w1 run when CPU:0 is
  // free, at 202 to 203, CPU:1 would win by 0.9 us and split the chain.)
  CHECK(device_of(p, g, "b") == 0);
  CHECK(device_of(p, g, "w1") == 0);
  CHECK(record(p, g, "w1").start == Approx(1e-6));
  CHECK(record(p, g, "w1").finish == Approx(2e-6));
  CHECK(record(p, g, "b").finish == Approx(403e-6));
  CHECK(record(p, g, "b").finish_on[1] == Approx(403.1e-6));
  CHECK(p.predicted_seconds == Approx(403e-6));
}

TEST_CASE("greedy placement: each node where it would finish first, counting transfers (worked by hand)") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{100, 100}, "x");
  output w[3];
  for (int i = 0; i < 3; ++i) w[i] = floats(g, shape{100, 100}, "w" + std::to_string(i));
  auto m0 = g.op("MatMul", {x, w[0]}, {}, "m0");
  auto m1 = g.op("MatMul", {x, w[1]}, {}, "m1");
  auto m2 = g.op("MatMul", {x, w[2]}, {}, "m2");
  auto s = g.op("Add", {m0, m1}, {}, "s");
  g.op("Add", {s, m2}, {}, "t");
  const cluster c = three_devices();
  const cost_model costs(g);
  const auto fed = [&](output o) { return o == x.out(0); };
  std::vector<bool> needed = every(g);
  needed[static_cast<std::size_t>(x.id())] = false;  // fed: nothing computes it
  const placement p = place(g, needed, c, costs, kernels, {}, fed);

  // A MatMul is 2e6 flops: 2 ms on CPU:0, 0.5 ms on an accelerator; moving a 100x100 float
  // product costs 40,000 B / 100 MB/s = 0.4 ms; an Add of 10,000 elements 2.5 us on an
  // accelerator, 10 us on the CPU.
  // m0: ACC:0 and ACC:1 both finish at 0.5 ms, the lower index wins; its weight goes with it.
  CHECK(device_of(p, g, "m0") == 1);
  CHECK(device_of(p, g, "w0") == 1);
  CHECK(record(p, g, "m0").finish == Approx(0.5e-3));
  // m1: ACC:0 is busy until 0.5 ms, so ACC:1 (0.5 ms) beats it (1.0 ms) and the CPU (2 ms).
  CHECK(device_of(p, g, "m1") == 2);
  CHECK(record(p, g, "m1").finish_on[0] == Approx(2e-3));
  CHECK(record(p, g, "m1").finish_on[1] == Approx(1e-3));
  // m2: ACC:0 and ACC:1 both finish at 1.0 ms: ACC:0.
  CHECK(device_of(p, g, "m2") == 1);
  // s = m0 + m1: on ACC:0 it waits for m2 (1.0 ms) -> 1.0025; on ACC:1 for m0 to arrive
  // (0.5 + 0.4) -> 0.9025; on the CPU both arrive at 0.9 -> 0.91. ACC:1.
  CHECK(device_of(p, g, "s") == 2);
  CHECK(record(p, g, "s").finish_on[0] == Approx(0.91e-3));
  CHECK(record(p, g, "s").finish_on[1] == Approx(1.0025e-3));
  CHECK(record(p, g, "s").finish == Approx(0.9025e-3));
  // t = s + m2: on ACC:0, s arrives at 1.3025 -> 1.305; on ACC:1, m2 arrives at 1.4 -> 1.4025;
  // on the CPU at 1.4 -> 1.41. ACC:0, and the step is predicted to take 1.305 ms.
  CHECK(device_of(p, g, "t") == 1);
  CHECK(record(p, g, "t").finish_on[2] == Approx(1.4025e-3));
  CHECK(record(p, g, "t").finish_on[0] == Approx(1.41e-3));
  CHECK(p.predicted_seconds == Approx(1.305e-3));
  CHECK(p.busy_seconds[1] == Approx(1e-3 + 2.5e-6));
  CHECK(p.busy_seconds[0] == 0);
  // The fed placeholder is not placed; every other node is.
  CHECK(device_of(p, g, "x") == -1);
  CHECK(p.nodes.size() == static_cast<std::size_t>(g.size() - 1));

  // Deterministic: the same placement again.
  const placement again = place(g, needed, c, costs, kernels, {}, fed);
  CHECK(again.device_of == p.device_of);

  // The report names each node, its device and the alternatives.
  const std::string report = p.report(g);
  CHECK_THAT(report, Catch::Contains("greedy placement of 8 nodes on 3 devices: predicted step 1305.0 us"));
  CHECK_THAT(report, Catch::Contains("ACC:0: 1002.5 us of compute"));
  CHECK_THAT(report, Catch::Matches("(.|\n)*s \\(Add\\) +ACC:1 +900.0 +902.5 +CPU:0 910.0 ACC:0 1002.5 ACC:1 902.5\n(.|\n)*"));

  // The DOT picture: boxes filled with the colour of the device they were placed on (the
  // legend names them), transfers in red, the fed placeholder grey.
  const std::string dot = to_dot(g, &p);
  for (std::size_t d = 0; d < p.device_names.size(); ++d)
    CHECK_THAT(dot, Catch::Contains("\"legend:" + std::to_string(d) + "\" [label=\"" + p.device_names[d] + "\""));
  for (const auto& r : p.nodes) {
    const std::string colour = "fillcolor=\"" + std::string(std::vector<const char*>{"#a6cee3", "#fdbf6f", "#b2df8a"}.at(
                                                     static_cast<std::size_t>(r.device))) + "\"";
    const auto at = dot.find("\n  n" + std::to_string(r.node) + " [");
    REQUIRE(at != std::string::npos);
    CHECK_THAT(dot.substr(at + 1, dot.find('\n', at + 1) - at - 1), Catch::Contains(colour));
  }
  CHECK_THAT(dot, Catch::Contains("s\\nAdd\\nfloat32[100,100]\\n900-902.5 us\", style=filled, fillcolor="));
  const std::string m0_to_s = "n" + std::to_string(m0.id()) + " -> n" + std::to_string(s.id()) + " [label=\"0\", color=red";
  CHECK_THAT(dot, Catch::Contains(m0_to_s));
  CHECK_THAT(dot, Catch::Contains("x\\nPlaceholder\\nfloat32[100,100]\", color=grey"));

  // The rule-based placer puts everything on the default device: three 2 ms products and
  // two 10 us sums, one after another.
  const placement rules = place(g, needed, c, costs, kernels, {.algorithm = placer::rules}, fed);
  for (const auto& r : rules.nodes) CHECK(r.device == 0);
  CHECK(rules.predicted_seconds == Approx(6.02e-3));
  const placement on_acc = place(g, needed, c, costs, kernels, {.algorithm = placer::rules, .default_device = 2}, fed);
  CHECK(on_acc.predicted_seconds == Approx(1.505e-3));
}

TEST_CASE("placement: measured times replace the estimates") {
  graph g;
  auto a = floats(g, shape{100, 100}, "a");
  g.op("MatMul", {a, a}, {}, "m");
  const cluster c = three_devices();
  cost_model costs(g);
  CHECK(place(g, every(g), c, costs, kernels, {}).device_of[1] == 1);
  // Measured: MatMul is slow on the accelerators after all (3 ms against the CPU's 2 ms estimate).
  costs.set_measured("m", "ACC", 3e-3);
  const placement p = place(g, every(g), c, costs, kernels, {});
  CHECK(p.device_of[1] == 0);
  CHECK(p.device_of[0] == 0);  // the constant goes with its first consumer
  CHECK(p.predicted_seconds == Approx(2e-3));
}

TEST_CASE("placement: a variable and the ops that take its reference colocate, and requests constrain") {
  graph g;
  auto v = g.variable(dtype::float32, partial_shape{100, 100}, node_options("v"));
  auto init = floats(g, shape{100, 100}, "init");
  auto assign = g.op("Assign", {v, init}, {}, "assign");
  auto m = g.op("MatMul", {v, v}, {}, "m");
  auto pinned = g.op("MatMul", {m, m}, {}, node_options("pinned").on("/device:ACC:1"));
  const cluster c = three_devices();
  const cost_model costs(g);
  const placement p = place(g, every(g), c, costs, kernels, {});
  // Assign has no accelerator kernel, so v, which it updates, stays on the CPU with it.
  CHECK(device_of(p, g, "assign") == 0);
  CHECK(device_of(p, g, "v") == 0);
  // m reads v's value: it may go elsewhere, and does (0.4 ms to move v beats 1.5 ms more on the CPU).
  CHECK(device_of(p, g, "m") == 1);
  CHECK(device_of(p, g, "pinned") == 2);
  CHECK(record(p, g, "pinned").finish_on[0] == std::numeric_limits<double>::infinity());
  (void)assign, (void)pinned;
}

TEST_CASE("placement errors name the node, its request and the devices, and soft placement relaxes them") {
  const cluster c = three_devices();
  SECTION("a request nothing matches") {
    graph g;
    auto a = floats(g, shape{2, 2}, "a");
    g.op("Neg", {a}, {}, node_options("n").on("/device:GPU:0"));
    CHECK_THROWS_WITH(place(g, every(g), c, cost_model(g), kernels, {}),
                      "node 'n' (Neg) requests device '/device:GPU:0', which matches none of the devices (CPU:0, ACC:0, ACC:1)");
    // Soft placement cannot help a request for a device type no device has a kernel for? It can:
    // any feasible device.
    const placement p = place(g, every(g), c, cost_model(g), kernels, {.soft = true});
    CHECK(device_of(p, g, "n") >= 0);
  }
  SECTION("a request whose devices have no kernel") {
    graph g;
    auto v = g.variable(dtype::float32, partial_shape{2}, node_options("v"));
    auto z = floats(g, shape{2}, "z");
    g.op("Assign", {v, z}, {}, node_options("assign").on("/device:ACC:*"));
    CHECK_THROWS_WITH(place(g, every(g), c, cost_model(g), kernels, {}),
                      "node 'assign' (Assign): no ACC kernel registered; it requests device '/device:ACC:*' (ACC:0, ACC:1), "
                      "and soft placement is off");
    const placement p = place(g, every(g), c, cost_model(g), kernels, {.soft = true});
    CHECK(device_of(p, g, "assign") == 0);
    CHECK(device_of(p, g, "v") == 0);
  }
  SECTION("no kernel anywhere: the registry's message") {
    graph g;
    auto v = g.variable(dtype::float32, partial_shape{2}, node_options("v"));
    auto z = floats(g, shape{2}, "z");
    g.op("Assign", {v, z}, {}, "assign");
    const cluster accelerators({{local("ACC", 0)}, {local("ACC", 1)}});
    CHECK_THROWS_WITH(place(g, every(g), accelerators, cost_model(g), kernels, {.soft = true}),
                      "node 'assign' (Assign): no ACC kernel registered");
  }
  SECTION("colocated nodes with no device in common") {
    graph g;
    auto v = g.variable(dtype::float32, partial_shape{2}, node_options("v").on("/device:ACC:0"));
    auto z = floats(g, shape{2}, "z");
    g.op("Assign", {v, z}, {}, "assign");
    CHECK_THROWS_WITH(place(g, every(g), c, cost_model(g), kernels, {}),
                      "nodes colocated with node 'v' (Variable) (by colocation, by taking its reference or by sharing a loop) have no "
                      "device in common; node 'v' (Variable) may run on ACC:0; node 'assign' (Assign) may run on CPU:0");
  }
  SECTION("a malformed request") {
    graph g;
    auto a = floats(g, shape{2}, "a");
    g.op("Neg", {a}, {}, node_options("n").on("/device:"));
    CHECK_THROWS_WITH(place(g, every(g), c, cost_model(g), kernels, {}), Catch::StartsWith("node 'n' (Neg): device spec '/device:'"));
  }
  SECTION("clusters and options checked") {
    CHECK_THROWS_WITH(cluster({{"/device:CPU:0"}}), Catch::Contains("needs a full name"));
    CHECK_THROWS_WITH(cluster({{local("CPU", 0), 0}}), Catch::Contains("needs positive flops_per_second"));
    CHECK_THROWS_WITH(cluster({{local("CPU", 0)}, {local("CPU", 0)}}), Catch::Contains("is listed twice"));
    CHECK_THROWS_WITH(cluster({}), "cluster: no devices");
    cluster two({{local("CPU", 0)}, {local("CPU", 1)}});
    CHECK_THROWS_WITH(two.set_link(0, 0, {}), Catch::Contains("no link from device 0 to 0"));
    CHECK_THROWS_WITH(two.set_link(0, 1, {0, 0}), Catch::Contains("positive bandwidth"));
    two.set_link(0, 1, {1e-3, 1e6});
    CHECK(two.transfer_seconds(1e6, 0, 1) == Approx(1.001));
    CHECK(two.transfer_seconds(1e6, 1, 0) == Approx(2e-6 + 1e6 / 10e9));  // the default link the other way
    CHECK(two.transfer_seconds(1e6, 1, 1) == 0);
    graph g;
    floats(g, shape{2}, "a");
    CHECK_THROWS_WITH(place(g, every(g), two, cost_model(g), kernels, {.default_device = 2}),
                      Catch::Contains("default_device 2 is not one of the 2 devices"));
  }
}

TEST_CASE("placement: a loop's back edge is left out of the simulation, and empty or fed-only runs place nothing") {
  graph g;
  ops::register_control_flow_ops();
  auto zero = g.constant(tensor::scalar<float>(0), "zero");
  auto enter = g.op("Enter", {zero}, {{"frame_name", std::string("loop")}}, "enter");
  auto merge = g.op("Merge", {enter, enter}, {}, "merge");
  auto limit = g.constant(tensor::scalar<float>(3), "limit");
  auto less = g.op("Less", {merge, limit}, {}, "less");
  auto cond = g.op("LoopCond", {less}, {}, "cond");
  auto sw = g.op("Switch", {merge, cond}, {}, "switch");
  auto one = g.constant(tensor::scalar<float>(1), "one");
  auto add = g.op("Add", {sw.out(1), one}, {}, "add");
  auto next = g.op("NextIteration", {add}, {}, "next");
  g.close_loop(merge.id(), next);
  g.op("Exit", {sw.out(0)}, {}, "exit");
  const cluster c = three_devices();
  const placement p = place(g, every(g), c, cost_model(g), kernels, {});
  for (int id = 0; id < g.size(); ++id) CHECK(p.device_of[static_cast<std::size_t>(id)] >= 0);

  std::vector<bool> none(static_cast<std::size_t>(g.size()), false);
  const placement empty = place(g, none, c, cost_model(g), kernels, {});
  CHECK(empty.nodes.empty());
  CHECK(empty.predicted_seconds == 0);
}

namespace {
session_options two_devices(passes::placer algorithm) {
  session_options o = test::one_thread();
  o.cpu_devices = 2;
  o.intra_op_threads = 1;
  o.inter_op_threads = 1;
  o.placement.algorithm = algorithm;
  return o;
}

tensor filled(shape s, float scale) {
  std::vector<float> v(static_cast<std::size_t>(s.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>(static_cast<int>(i * 37 % 101) - 50) / 50.0f;
  return tensor::from_vector(v, s);
}

std::map<std::string, std::string> devices_run(session& s, const feed_list& feeds, const std::vector<endpoint>& fetches,
                                               std::vector<tensor>* out, const std::vector<endpoint>& targets = {}) {
  run_metadata meta;
  *out = s.run(feeds, fetches, targets, {.trace = true}, &meta);
  std::map<std::string, std::string> where;
  for (const auto& st : meta.stats.nodes)
    if (st.op != "_Send" && st.op != "_Recv") where[st.node] = st.device;
  return where;
}
}  // namespace

TEST_CASE("session: the greedy placer spreads two branches over two CPU devices, with one device's results") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{-1, 256}, "x");
  auto w1 = g.constant(filled(shape{256, 256}, 0.1f), "w1");
  auto w2 = g.constant(filled(shape{256, 256}, -0.2f), "w2");
  auto v1 = g.constant(filled(shape{256, 8}, 0.3f), "v1");
  auto v2 = g.constant(filled(shape{256, 8}, 0.4f), "v2");
  auto h1 = g.op("Relu", {g.op("MatMul", {x, w1}, {}, "m1")}, {}, "h1");
  auto h2 = g.op("Tanh", {g.op("MatMul", {x, w2}, {}, "m2")}, {}, "h2");
  auto y = g.op("Add", {g.op("MatMul", {h1, v1}, {}, "p1"), g.op("MatMul", {h2, v2}, {}, "p2")}, {}, "y");
  const feed_list feeds{{x, filled(shape{64, 256}, 1.0f)}};

  session one(g, test::one_thread());
  const tensor expected = one.run_one(feeds, y);
  session two(g, two_devices(passes::placer::greedy));
  std::vector<tensor> out;
  const auto where = devices_run(two, feeds, {y}, &out);
  CHECK(out[0].to_vector<float>() == expected.to_vector<float>());  // same kernels, one thread each: bit for bit
  // The two branches run on different devices, as the placement says.
  const auto p = two.placement(feeds, {y});
  REQUIRE(p);
  CHECK(p->algorithm == passes::placer::greedy);
  CHECK(where.at("m1") != where.at("m2"));
  for (const auto& [name, device] : where) {
    INFO(name);
    CHECK(two.devices()[static_cast<std::size_t>(p->device_of[static_cast<std::size_t>(g[name].id())])]->name() == device);
  }
  CHECK(p->predicted_seconds > 0);
  CHECK_THAT(p->report(g), Catch::Contains("greedy placement of"));

  // The rule-based placer (the default) keeps everything on CPU:0.
  session rules(g, two_devices(passes::placer::rules));
  for (const auto& [name, device] : devices_run(rules, feeds, {y}, &out)) CHECK(device == rules.devices()[0]->name());
  CHECK(out[0].to_vector<float>() == expected.to_vector<float>());

  // Measured times replace the estimates: recorded from a traced step, the next run places again.
  run_metadata meta;
  two.run(feeds, {y}, {}, {.trace = true}, &meta);
  CHECK(two.cached_executables() == 1);
  two.record_costs(meta.stats);
  CHECK(two.cached_executables() == 0);
  const auto measured = two.placement(feeds, {y});
  for (const auto& r : measured->nodes)
    for (const auto& st : meta.stats.nodes)
      if (st.node == g.at(r.node).name()) CHECK(r.compute == Approx(static_cast<double>(st.end_ns - st.start_ns) * 1e-9));
  step_stats alien;
  alien.nodes.push_back({"m1", "MatMul", "/device:GPU:0"});
  CHECK_THROWS_WITH(two.record_costs(alien), Catch::Contains("ran on '/device:GPU:0', which is not a device of this session"));
}

TEST_CASE("session: the rule-based placer keeps a variable's updates with it, and soft placement falls back") {
  graph g;
  auto v = g.variable(dtype::float32, partial_shape{2}, node_options("v").on("/device:CPU:1"));
  auto init = g.op("Assign", {v, g.constant(tensor::of<float>({2}, {1, 2}), "one_two")}, {}, "init");
  auto doubled = g.op("Mul", {v, g.constant(tensor::of<float>({2}, {2, 2}), "two")}, {}, "doubled");
  auto gpu = g.op("Neg", {v}, {}, node_options("gpu").on("/device:GPU:0"));
  session s(g, two_devices(passes::placer::rules));
  std::vector<tensor> out;
  auto where = devices_run(s, {}, {}, &out, {init});
  CHECK(where.at("init") == s.devices()[1]->name());  // with v, which it updates
  where = devices_run(s, {}, {doubled}, &out);
  CHECK(where.at("doubled") == s.devices()[0]->name());  // reads v's value: the default device
  CHECK(out[0].to_vector<float>() == std::vector<float>{2, 4});
  test::require_error([&] { s.run({}, {gpu}); },
                      {"node 'gpu' (Neg) requests device '/device:GPU:0', which matches none of the devices (CPU:0, CPU:1)"});

  session_options soft = two_devices(passes::placer::rules);
  soft.placement.soft = true;
  session relaxed(g, soft);
  relaxed.run({init});
  where = devices_run(relaxed, {}, {gpu}, &out);
  CHECK(where.at("gpu") == relaxed.devices()[0]->name());
  CHECK(out[0].to_vector<float>() == std::vector<float>{-1, -2});

  session_options wrong = two_devices(passes::placer::rules);
  wrong.device_specs.resize(3);
  test::require_error([&] { session bad(g, wrong); }, {"device_specs has 3 entries for the session's 2 devices"});
}

TEST_CASE("session: the greedy placer on several devices measures them, and the rule-based one keeps the given figures") {
  graph g;
  g.constant(tensor::scalar(1.0f), "c");
  session greedy(g, two_devices(passes::placer::greedy));
  const auto& measured = greedy.cluster();
  REQUIRE(measured.size() == 2);
  for (int d = 0; d < 2; ++d) {
    INFO("device " << d);
    // A real rate (between 100 MFLOP/s and 100 TFLOP/s), measured, not the default figure.
    CHECK(measured.device(d).flops_per_second > 1e8);
    CHECK(measured.device(d).flops_per_second < 1e14);
    CHECK(measured.device(d).flops_per_second != session::default_device_spec(*greedy.devices()[0]).flops_per_second);
    CHECK(measured.device(d).memory_bytes_per_second > 1e7);
  }
  CHECK(measured.device(0).flops_per_second == measured.device(1).flops_per_second);  // one probe per thread count
  session rules(g, two_devices(passes::placer::rules));
  CHECK(rules.cluster().device(1).flops_per_second == session::default_device_spec(*rules.devices()[1]).flops_per_second);
  session_options given = two_devices(passes::placer::greedy);
  given.device_specs = {{"ignored", 1e9, 2e9, 3e-6}, {"", 4e9, 5e9, 6e-6}};
  session told(g, given);
  CHECK(told.cluster().device(1).flops_per_second == 4e9);
  CHECK(told.cluster().device(0).name == told.devices()[0]->name());  // the session's names
}

TEST_CASE("session: the link between devices is measured unless given") {
  graph g;
  g.constant(tensor::scalar(1.0f), "c");
  // Measured: a hand-off to the other device's thread (between 10 ns and 10 ms), and no
  // bandwidth limit while a Recv hands on the sender's buffer.
  session greedy(g, two_devices(passes::placer::greedy));
  const passes::link_spec& l = greedy.cluster().link(0, 1);
  CHECK(l.latency_seconds > 1e-8);
  CHECK(l.latency_seconds < 1e-2);
  CHECK(l.latency_seconds != passes::link_spec{}.latency_seconds);
  CHECK(l.bytes_per_second == std::numeric_limits<double>::infinity());
  CHECK(greedy.cluster().transfer_seconds(1e9, 0, 1) == l.latency_seconds);
  // Copying transfers: a copy's bandwidth (above 10 MB/s, finite).
  session_options copying = two_devices(passes::placer::greedy);
  copying.copy_transfers = true;
  session c(g, copying);
  CHECK(c.cluster().link(0, 1).bytes_per_second > 1e7);
  CHECK(c.cluster().link(0, 1).bytes_per_second < std::numeric_limits<double>::infinity());
  // As-late-as-possible Recvs measure it too; the rule-based placer alone keeps the defaults.
  session_options alap = two_devices(passes::placer::rules);
  alap.recv_scheduling = session_options::recv_order::alap;
  CHECK(session(g, alap).cluster().link(0, 1).bytes_per_second == std::numeric_limits<double>::infinity());
  session rules(g, two_devices(passes::placer::rules));
  CHECK(rules.cluster().link(0, 1).latency_seconds == passes::link_spec{}.latency_seconds);
  CHECK(rules.cluster().link(0, 1).bytes_per_second == passes::link_spec{}.bytes_per_second);
  // Given: kept.
  session_options given = two_devices(passes::placer::greedy);
  given.link = passes::link_spec{3e-6, 5e9};
  session told(g, given);
  CHECK(told.cluster().link(1, 0).latency_seconds == 3e-6);
  CHECK(told.cluster().link(0, 1).bytes_per_second == 5e9);
}
