#include "support/helpers.hpp"
#include "support/json.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <thread>

using namespace weft;

TEST_CASE("run prunes to what fetches need and feeds replace outputs") {
  graph g;
  auto& x = g.placeholder(dtype::float32, {unknown_dim}, "x");
  auto& unused = g.placeholder(dtype::float32, {2}, "unused");
  (void)unused;
  auto& y = g.op("Mul", {x, g.constant(tensor::scalar(2.0f))}, {}, "y");
  auto& z = g.op("Add", {y, g.constant(tensor::scalar(1.0f))}, {}, "z");
  session s(g, test::one_thread());
  CHECK(s.run({{x, tensor::of<float>({2}, {1, 2})}}, {z})[0].to_vector<float>() == std::vector<float>{3, 5});
  // Feeding an intermediate output cuts x out of the step: no feed for x is needed.
  CHECK(s.run({{"y:0", tensor::of<float>({1}, {10})}}, {"z"})[0].to_vector<float>() == std::vector<float>{11});
  CHECK(s.cached_executables() == 2);
  s.run({{x, tensor::of<float>({1}, {0})}}, {z});
  CHECK(s.cached_executables() == 2);
  test::require_error([&] { s.run({}, {z}); }, {"node 'x' (Placeholder): must be fed a float32[?]", "needed by fetch z:0"});
  test::require_error([&] { s.run({{x, tensor::of<double>({1}, {0})}}, {z}); }, {"feed 'x:0'", "expected float32[?]", "got float64[1]"});
  test::require_error([&] { s.run({{x, tensor::of<float>({1, 1}, {0})}}, {z}); }, {"feed 'x:0'", "expected shape [?]"});
  test::require_error([&] { s.run({}, {"nope"}); }, {"no node named 'nope'"});
}

TEST_CASE("a session runs the graph as it was when created, until extended") {
  graph g;
  auto& x = g.placeholder(dtype::float32, {2}, "x");
  session s(g, test::one_thread());
  auto& y = g.op("Neg", {x}, {}, "y");  // added after the session copied the graph
  feed_list feed{{x, tensor::of<float>({2}, {1, 2})}};
  test::require_error([&] { s.run(feed, {y}); },
                      {"node handle 1 is not in the session's graph of 1 nodes", "session::extend(graph)"});
  test::require_error([&] { s.run({y}); }, {"node handle 1"});
  test::require_error([&] { s.run(feed, {"y"}); }, {"no node named 'y'"});
  s.extend(g);
  CHECK(s.run(feed, {y})[0].to_vector<float>() == std::vector<float>{-1, -2});
  graph other;
  other.placeholder(dtype::float32, {2}, "not_x");
  other.placeholder(dtype::float32, {2}, "z");
  test::require_error([&] { s.extend(other); }, {"session::extend: node 0 changed ('x' became 'not_x')"});
  test::require_error([&] { s.extend(graph{}); }, {"the new graph has fewer nodes (0 < 2)"});
  CHECK(s.run(feed, {y})[0].to_vector<float>() == std::vector<float>{-1, -2});  // unchanged by the failed extends
}

TEST_CASE("variables persist across runs, and containers are shared and reset") {
  graph g;
  auto& v = g.variable(dtype::float32, {2}, "v");
  auto& init = g.op("Assign", {v, g.constant(tensor::of<float>({2}, {1, 2}))}, {}, "init");
  auto& inc = g.op("AssignAdd", {v, g.constant(tensor::of<float>({2}, {10, 10}))}, {}, "inc");
  auto& dec = g.op("AssignSub", {v, g.constant(tensor::of<float>({2}, {1, 1}))}, {}, "dec");
  auto& read = g.op("Identity", {v}, {}, "read");
  auto shared = std::make_shared<resource_manager>();
  session_options o = test::one_thread();
  o.resources = shared;
  session a(g, o), b(g, o);
  test::require_error([&] { a.run({}, {read}); }, {"node 'read' (Identity)", "variable 'v' is read before it was initialized"});
  a.run({init});
  a.run({inc});
  CHECK(b.run({}, {read})[0].to_vector<float>() == std::vector<float>{11, 12});  // b sees a's variable
  b.run({dec});
  CHECK(a.run({}, {read})[0].to_vector<float>() == std::vector<float>{10, 11});
  shared->reset("");
  test::require_error([&] { a.run({}, {read}); }, {"before it was initialized"});
  session c(g, test::one_thread());  // its own container
  c.run({init});
  CHECK(c.run({}, {v})[0].to_vector<float>() == std::vector<float>{1, 2});
}

TEST_CASE("control dependencies order side effects") {
  graph g;
  auto& v = g.variable(dtype::int32, {}, "v");
  auto& init = g.op("Assign", {v, g.constant(tensor::scalar(5))}, {}, "init");
  auto& read = g.op("Identity", {v}, {}, node_options("read").after({init.id()}));
  session s(g, test::one_thread());
  CHECK(s.run({}, {read})[0].scalar_value<std::int32_t>() == 5);
}

TEST_CASE("a node with no outputs is a target, by handle and by name") {
  graph g;
  auto& v = g.variable(dtype::int32, {}, "v");
  auto& set = g.op("Assign", {v, g.constant(tensor::scalar(5))}, {}, "set");
  auto& bump = g.op("AssignAdd", {v, g.constant(tensor::scalar(1))}, {}, "bump");
  auto& init = g.op("NoOp", {}, {}, node_options("init").after({set.id()}));
  auto& step = g.op("NoOp", {}, {}, node_options("step").after({bump.id()}));
  session s(g, test::one_thread());
  s.run({init});
  s.run({"step"});
  s.run({}, {}, {step, "step"});  // the same target twice runs it once
  CHECK(s.run({}, {v})[0].scalar_value<std::int32_t>() == 7);
  // A NoOp has no output to fetch: that is an error naming the node, not a crash.
  test::require_error([&] { s.run({}, {init}); }, {"node 'init' (NoOp)", "has no output 0"});
  test::require_error([&] { s.run({"nope"}); }, {"no node named 'nope'"});
}

TEST_CASE("a failed step reports the node and leaves the session usable") {
  graph g;
  auto& idx = g.placeholder(dtype::int32, {1}, "idx");
  auto& v = g.variable(dtype::float32, {3}, "v");
  auto& init = g.op("Assign", {v, g.constant(tensor::of<float>({3}, {1, 2, 3}))}, {}, "init");
  auto& gather = g.op("GatherV2", {v, idx, g.constant(tensor::scalar(0))}, {}, "gather");
  auto& bump = g.op("AssignAdd", {v, g.constant(tensor::of<float>({3}, {1, 1, 1}))}, {}, node_options("bump").after({gather.id()}));
  session s(g);
  s.run({init});
  test::require_error([&] { s.run({{idx, tensor::of<std::int32_t>({1}, {9})}}, {gather}, {bump}); },
                      {"node 'gather' (GatherV2)", "indices[0] = 9 is not in [0, 3)", "float32[3], int32[1], int32[]"});
  // bump depended on the failed node and did not run: the variable is unchanged.
  CHECK(s.run({{idx, tensor::of<std::int32_t>({1}, {2})}}, {gather})[0].to_vector<float>() == std::vector<float>{3});
}

TEST_CASE("many concurrent run() calls on shared variables") {
  graph g;
  auto& v = g.variable(dtype::int64, {}, "counter");
  auto& init = g.op("Assign", {v, g.constant(tensor::scalar<std::int64_t>(0))}, {}, "init");
  auto& inc = g.op("AssignAdd", {v, g.constant(tensor::scalar<std::int64_t>(1))}, {}, "inc");
  auto& x = g.placeholder(dtype::float32, {unknown_dim}, "x");
  auto& y = g.op("Sum", {g.op("Square", {x}), g.constant(tensor::of<std::int32_t>({1}, {0}))}, {}, "y");
  session_options o;
  o.inter_op_threads = 2;
  o.intra_op_threads = 2;
  session s(g, o);
  s.run({init});
  constexpr int threads = 4, steps = 200;
  std::vector<std::thread> pool;
  std::atomic<int> wrong{0};
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < steps; ++i) {
        float k = static_cast<float>(t + i);
        auto out = s.run({{x, tensor::of<float>({2}, {k, 1})}}, {y}, {inc});
        if (out[0].scalar_value<float>() != k * k + 1) ++wrong;
      }
    });
  for (auto& th : pool) th.join();
  CHECK(wrong == 0);
  CHECK(s.run({}, {v})[0].scalar_value<std::int64_t>() == threads * steps);
}

TEST_CASE("a traced run exports a Chrome trace") {
  graph g;
  auto& a = g.constant(tensor::scalar(1.0f), "a");
  auto& b = g.op("Neg", {a}, {}, "neg\"quoted");
  session_options o = test::one_thread();
  o.constant_folding.max_bytes = 0;  // a graph of constants: folded, its nodes would not run in the step
  session s(g, o);
  run_metadata meta;
  s.run({}, {b}, {}, {.trace = true}, &meta);
  REQUIRE(meta.stats.nodes.size() == 2);
  for (const auto& n : meta.stats.nodes) CHECK(n.end_ns >= n.start_ns);
  auto json = chrome_trace(meta.stats);
  CHECK(json.find("\"ph\":\"M\"") != std::string::npos);
  CHECK(json.find("\"process_name\"") != std::string::npos);
  CHECK(json.find("neg\\\"quoted") != std::string::npos);
  CHECK(json.find("\"ph\":\"X\"") != std::string::npos);
  // Past one second, timestamps keep their nanoseconds (once printed as 1.23457e+06).
  step_stats late;
  late.nodes.push_back({.node = "n", .op = "Neg", .device = "/cpu:0", .thread = 0, .start_ns = 1'234'567'891, .end_ns = 1'234'569'000});
  auto text = chrome_trace(late);
  CHECK(text.find("\"ts\":1234567.891,\"dur\":1.109,") != std::string::npos);
}

TEST_CASE("a Chrome trace parses as JSON, with exact times, producers before consumers, and nesting on a thread") {
  graph g;
  auto& a = g.constant(tensor::filled(shape{64, 64}, 0.5f), "a");
  auto& b = g.op("Neg", {a}, {}, "b");
  auto& c = g.op("Exp", {b}, {}, "c");
  auto& d = g.op("Tanh", {b}, {}, "d");
  auto& e = g.op("Add", {c, d}, {}, "e");
  session_options o;
  o.inter_op_threads = 2;
  o.intra_op_threads = 1;
  o.constant_folding.max_bytes = 0;
  session s(g, o);
  run_metadata meta;
  s.run({}, {e}, {}, {.trace = true}, &meta);
  const auto doc = test::json::parse(chrome_trace(meta.stats));
  CHECK(doc["displayTimeUnit"].as_string() == "ns");
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> span;  // node -> [start, end) in ns
  std::map<std::pair<double, double>, std::vector<std::pair<std::int64_t, std::int64_t>>> by_thread;
  int processes = 0;
  std::map<std::string, std::int64_t> counters;  // ts in ns -> bytes in use
  for (const auto& ev : doc["traceEvents"].as_array()) {
    if (ev["ph"].as_string() == "M") {
      CHECK(ev["name"].as_string() == "process_name");
      ++processes;
      continue;
    }
    if (ev["ph"].as_string() == "C") {  // the device's memory as a node ended
      CHECK(ev["name"].as_string() == "memory");
      counters[std::to_string(std::llround(ev["ts"].as_number() * 1000))] = std::llround(ev["args"]["bytes_in_use"].as_number());
      continue;
    }
    REQUIRE(ev["ph"].as_string() == "X");
    const std::string node = ev["args"]["name"].as_string();
    CHECK(ev["name"].as_string() == ev["args"]["op"].as_string());
    const auto start = std::llround(ev["ts"].as_number() * 1000), dur = std::llround(ev["dur"].as_number() * 1000);
    CHECK(dur >= 0);
    span[node] = {start, start + dur};
    by_thread[{ev["pid"].as_number(), ev["tid"].as_number()}].push_back(span[node]);
  }
  CHECK(processes == 1);
  REQUIRE(span.size() == meta.stats.nodes.size());
  // A counter per node, at its end, of its record's bytes; each node's outputs in its args.
  for (const auto& n : meta.stats.nodes) {
    REQUIRE(counters.count(std::to_string(n.end_ns)) == 1);
    CHECK(counters[std::to_string(n.end_ns)] >= 0);
    REQUIRE(n.outputs.size() == 1);
    CHECK(n.outputs[0].dtype == dtype::float32);
    CHECK(n.outputs[0].shape == shape({64, 64}));
    CHECK(n.outputs[0].bytes == 64 * 64 * 4);
  }
  for (const auto& ev : doc["traceEvents"].as_array())
    if (ev["ph"].as_string() == "X") {
      const auto& o = ev["args"]["outputs"].as_array();
      REQUIRE(o.size() == 1);
      CHECK(o[0]["dtype"].as_string() == "float32");
      CHECK(o[0]["shape"].as_string() == "[64,64]");
      CHECK(o[0]["bytes"].as_number() == 64 * 64 * 4);
    }
  // The microseconds carry the nanoseconds exactly.
  for (const auto& n : meta.stats.nodes) CHECK(span[n.node] == std::make_pair(n.start_ns, n.end_ns));
  // A node starts after its producers end.
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{{"a", "b"}, {"b", "c"}, {"b", "d"}, {"c", "e"}, {"d", "e"}})
    CHECK(span[from].second <= span[to].first);
  // On one thread, events nest or follow each other, never overlap in part.
  for (auto& [thread, spans] : by_thread) {
    std::sort(spans.begin(), spans.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first < y.first : x.second > y.second;
    });
    std::vector<std::pair<std::int64_t, std::int64_t>> open;
    for (const auto& sp : spans) {
      while (!open.empty() && open.back().second <= sp.first) open.pop_back();
      if (!open.empty()) CHECK(sp.second <= open.back().second);
      open.push_back(sp);
    }
  }
}

TEST_CASE("a step's summary: time by op type, the slowest nodes, memory in use, and each node's outputs") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{64, 64}, "x");
  auto m1 = g.op("MatMul", {x, x}, {}, "m1");
  auto m2 = g.op("MatMul", {m1, x}, {}, "m2");
  auto t = g.op("Tanh", {m2}, {}, "t");
  session s(g, test::one_thread());
  run_metadata meta;
  s.run({{x, tensor::filled<float>(shape({64, 64}), 0.01f)}}, {t}, {}, {.trace = true}, &meta);
  REQUIRE(meta.stats.nodes.size() == 3);  // the placeholder is fed, not run
  // By hand: the op types' counts and totals, the slowest node, the wall time.
  std::map<std::string, std::pair<std::size_t, std::int64_t>> want;
  std::int64_t first = meta.stats.nodes[0].start_ns, last = 0, sum = 0;
  const node_stats* slowest = &meta.stats.nodes[0];
  std::size_t peak = 0;
  for (const auto& n : meta.stats.nodes) {
    auto& w = want[n.op];
    ++w.first, w.second += n.end_ns - n.start_ns;
    first = std::min(first, n.start_ns), last = std::max(last, n.end_ns), sum += n.end_ns - n.start_ns;
    if (n.end_ns - n.start_ns > slowest->end_ns - slowest->start_ns) slowest = &n;
    peak = std::max(peak, n.bytes_in_use);
    REQUIRE(n.outputs.size() == 1);
    CHECK(n.outputs[0].shape == shape({64, 64}));
    CHECK(n.outputs[0].bytes == 64 * 64 * 4);
  }
  CHECK(peak >= 64 * 64 * 4);  // at least the node's own output was in use as it ended
  const step_summary sum_of = summarize(meta.stats, 2);
  CHECK(sum_of.wall_ns == last - first);
  CHECK(sum_of.node_ns == sum);
  CHECK(sum_of.nodes == 3);
  CHECK(sum_of.threads == 1);
  REQUIRE(sum_of.by_op.size() == 2);
  for (const auto& o : sum_of.by_op) {
    CHECK(o.count == want[o.op].first);
    CHECK(o.total_ns == want[o.op].second);
  }
  CHECK(sum_of.by_op[0].total_ns >= sum_of.by_op[1].total_ns);
  REQUIRE(sum_of.slowest.size() == 2);
  CHECK(sum_of.slowest[0] == slowest);
  CHECK(sum_of.peak_bytes.at(meta.stats.nodes[0].device) == peak);
  const std::string text = step_stats_summary(meta.stats, 2);
  CHECK_THAT(text, Catch::Contains("in 3 nodes on 1 thread") && Catch::Contains("by op type:") && Catch::Contains("MatMul") &&
                       Catch::Contains("Tanh") && Catch::Contains("slowest nodes:") &&
                       Catch::Contains("(" + slowest->op + ", " + slowest->device + ") float32[64,64]") &&
                       Catch::Contains("memory in use on " + slowest->device));
  CHECK(summarize(step_stats{}).to_string().find("0 nodes") != std::string::npos);
}

TEST_CASE("the session reads an op's role from its definition, not from its name") {
  // A user op defined as a feed, like Placeholder: no kernel exists for it, the session
  // asks for its value, and a fed value reaches its readers.
  static const bool registered = [] {
    register_op(op_def_builder("UserFeed").output("output: dtype").attr("dtype: type").feed().shape_fn([](shape_context& c) {
      c.set_output(0, partial_shape::unknown_rank());
    }));
    return true;
  }();
  REQUIRE(registered);
  const op_def& def = *op_registry::global().find("UserFeed");
  CHECK(def.feed);
  CHECK_FALSE(def.constant);
  graph g;
  auto& in = g.op("UserFeed", {}, {{"dtype", dtype::float32}}, "in");
  auto& neg = g.op("Neg", {in}, {}, "neg");
  session s(g, test::one_thread());
  CHECK(s.run({{"in", tensor::from_vector(std::vector<float>{1, -2})}}, {neg})[0].to_vector<float>() ==
        std::vector<float>{-1, 2});
  test::require_error([&] { s.run({}, {neg}); }, {"node 'in' (UserFeed): must be fed a float32", "needed by fetch neg:0"});
  // The standard ops carry their roles.
  ops::register_control_flow_ops();
  CHECK(op_registry::global().find("Placeholder")->feed);
  CHECK(op_registry::global().find("Const")->constant);
  CHECK(op_registry::global().find("Merge")->control == flow::merge);
  CHECK(op_registry::global().find("NextIteration")->control == flow::next_iteration);
  CHECK(op_registry::global().find("Exit")->control == flow::exit);
  CHECK(op_registry::global().find("Identity")->control == flow::plain);
}
