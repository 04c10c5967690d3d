// Partitioning (runtime/partition.hpp) and the rendezvous (runtime/rendezvous.hpp): a run
// whose nodes sit on several devices runs as one step per device, Send and Recv on every
// edge between devices, one Recv per tensor and device; its results are those of the same
// graph on one device; a dead value crosses as dead; an error on any device ends the step
// on every device and the session stays usable.
#include "support/helpers.hpp"
#include "support/json.hpp"

#include <atomic>
#include <chrono>
#include <map>
#include <cstring>
#include <thread>

using namespace weft;

namespace {
session_options devices(int n, int inter_op_threads = 1) {
  session_options o = test::one_thread();
  o.cpu_devices = n;
  o.inter_op_threads = inter_op_threads;
  return o;
}

struct traced {
  std::vector<tensor> out;
  std::map<std::string, std::string> device;  // node -> device
  std::multiset<std::string> sends, recvs;     // transfer keys
};
traced run_traced(session& s, const feed_list& feeds, const std::vector<endpoint>& fetches,
                  const std::vector<endpoint>& targets = {}) {
  run_metadata meta;
  traced t;
  t.out = s.run(feeds, fetches, targets, {.trace = true}, &meta);
  for (const auto& st : meta.stats.nodes) {
    if (st.op == "_Send") t.sends.insert(st.node);
    else if (st.op == "_Recv") t.recvs.insert(st.node);
    else t.device[st.node] = st.device;
  }
  return t;
}
const std::string cpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";
const std::string cpu1 = "/job:localhost/replica:0/task:0/device:CPU:1";
}  // namespace

namespace {
// A receiver that keeps what it was told, by token.
struct keeper final : rendezvous::receiver {
  struct told {
    bool value = false, dead = false;
    std::vector<float> data;
    std::string error;
  };
  std::map<int, told> by_token;
  int calls = 0;
  void received(int token, entry* v, std::exception_ptr e) override {
    ++calls;
    told& t = by_token[token];
    if (v) {
      t.value = true;
      t.dead = v->dead;
      if (!v->dead) t.data = v->value.to_vector<float>();
    }
    if (e) try {
        std::rethrow_exception(e);
      } catch (const error& ex) {
        t.error = ex.what();
      }
  }
};
}  // namespace

TEST_CASE("rendezvous: a value sent before or after its Recv waits, dead values, and abort") {
  rendezvous r(4);
  keeper k;
  entry v;
  v.value = tensor::of<float>({2}, {1, 2});
  r.send(0, v, "a");  // before the Recv: taken at once, the receiver is not told
  entry out;
  REQUIRE(r.recv(0, out, k, 10, "a"));
  CHECK(out.value.to_vector<float>() == std::vector<float>{1, 2});
  CHECK(k.calls == 0);
  CHECK(!r.recv(1, out, k, 11, "b"));  // before the Send: told on the sender's call
  CHECK(k.calls == 0);
  entry d;
  d.dead = true;
  r.send(1, d, "b");
  CHECK(k.calls == 1);
  CHECK(k.by_token[11].value);
  CHECK(k.by_token[11].dead);
  CHECK_THROWS_WITH(r.send(1, v, "b"), Catch::Contains("'b' was sent twice"));
  CHECK_THROWS_WITH(r.send(0, v, "a"), Catch::Contains("'a' was sent twice"));
  CHECK(!r.recv(2, out, k, 12, "c"));
  CHECK_THROWS_WITH(r.recv(2, out, k, 12, "c"), Catch::Contains("'c' is received twice"));
  CHECK_THROWS_WITH(r.recv(4, out, k, 13, "d"), Catch::Contains("edge 4 ('d') is not one of its 4"));
  CHECK_THROWS_WITH(r.send(-1, v, "e"), Catch::Contains("edge -1 ('e') is not one of its 4"));
  // Abort: the waiting Recv and every later one get the error; later Sends are dropped.
  rendezvous q(3);
  keeper w;
  CHECK(!q.recv(0, out, w, 1, "x"));
  q.abort(std::make_exception_ptr(error(error_code::cancelled, "gone")));
  q.abort(std::make_exception_ptr(error(error_code::internal, "second")));  // the first abort stands
  CHECK(w.calls == 1);
  q.send(1, v, "y");
  CHECK(!q.recv(1, out, w, 2, "y"));
  CHECK(!q.recv(2, out, w, 3, "z"));
  CHECK(w.calls == 3);
  CHECK(w.by_token[1].error == "gone");
  CHECK(w.by_token[2].error == "gone");
  CHECK(w.by_token[3].error == "gone");
  CHECK(!w.by_token[2].value);
}

TEST_CASE("rendezvous: Sends and Recvs from two threads at once, each edge told exactly once") {
  // Many edges, the Sends from one thread and the Recvs from another in the same order, so
  // that each edge's Send and Recv race; every value reaches its receiver once, either as
  // recv()'s result or through the receiver.
  constexpr int edges = 20000;
  rendezvous r(edges);
  struct counter final : rendezvous::receiver {
    std::vector<std::atomic<int>> told = std::vector<std::atomic<int>>(edges);
    std::vector<float> got = std::vector<float>(edges, -1);
    void received(int token, entry* v, std::exception_ptr) override {
      got[static_cast<std::size_t>(token)] = v->value.data<float>()[0];
      told[static_cast<std::size_t>(token)].fetch_add(1);
    }
  } c;
  std::thread sender([&] {
    for (int i = 0; i < edges; ++i) {
      entry v;
      v.value = tensor::scalar(static_cast<float>(i));
      r.send(i, std::move(v), "edge");
    }
  });
  for (int i = 0; i < edges; ++i) {
    entry out;
    if (r.recv(i, out, c, i, "edge")) {
      c.got[static_cast<std::size_t>(i)] = out.value.data<float>()[0];
      c.told[static_cast<std::size_t>(i)].fetch_add(1);
    }
  }
  sender.join();
  int wrong = 0;
  for (int i = 0; i < edges; ++i)
    wrong += c.told[static_cast<std::size_t>(i)].load() != 1 || c.got[static_cast<std::size_t>(i)] != static_cast<float>(i);
  CHECK(wrong == 0);
}

TEST_CASE("rendezvous: an abort racing waiting Recvs tells each exactly once") {
  constexpr int edges = 5000;
  for (int round = 0; round < 4; ++round) {
    rendezvous r(edges);
    struct counter final : rendezvous::receiver {
      std::vector<std::atomic<int>> told = std::vector<std::atomic<int>>(edges);
      void received(int token, entry*, std::exception_ptr) override { told[static_cast<std::size_t>(token)].fetch_add(1); }
    } c;
    int taken = 0;  // Catch's checks are for the test's own thread
    std::thread receiver_thread([&] {
      entry out;
      for (int i = 0; i < edges; ++i) taken += r.recv(i, out, c, i, "edge");
    });
    std::this_thread::sleep_for(std::chrono::microseconds(100 * round));
    r.abort(std::make_exception_ptr(error(error_code::cancelled, "stop")));
    receiver_thread.join();
    CHECK(taken == 0);
    int wrong = 0;
    for (int i = 0; i < edges; ++i) wrong += c.told[static_cast<std::size_t>(i)].load() != 1;
    CHECK(wrong == 0);
  }
}

TEST_CASE("partitions: one Recv per tensor and device, control edges cross, results as on one device") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{3}, "x");
  auto a = g.op("Square", {x}, {}, node_options("a").on("/device:CPU:1"));  // x^2 on CPU:1
  auto b = g.op("Neg", {a}, {}, node_options("b"));                          // both read a on CPU:0
  auto c = g.op("Add", {a, x}, {}, node_options("c"));
  auto d = g.op("Mul", {b, c}, {}, node_options("d").after({a.id()}));       // a control edge too, on CPU:0
  auto e = g.op("Sub", {d, a}, {}, node_options("e").on("/device:CPU:1"));   // back to CPU:1, with a local a
  const feed_list feeds{{x, tensor::of<float>({3}, {1, -2, 3})}};
  // By hand: a = [1, 4, 9]; b = [-1, -4, -9]; c = [2, 2, 12]; d = [-2, -8, -108]; e = d - a = [-3, -12, -117].
  const std::vector<float> d_want{-2, -8, -108}, e_want{-3, -12, -117};

  for (int inter_op : {0, 1}) {
    INFO("inter-op threads: " << inter_op);
    session s(g, devices(2, inter_op));
    const traced t = run_traced(s, feeds, {d, e, x});
    CHECK(t.out[0].to_vector<float>() == d_want);
    CHECK(t.out[1].to_vector<float>() == e_want);
    CHECK(t.out[2].to_vector<float>() == std::vector<float>{1, -2, 3});  // a fed value fetched as it is
    CHECK(t.device.at("a") == cpu1);
    CHECK(t.device.at("b") == cpu0);
    CHECK(t.device.at("d") == cpu0);
    CHECK(t.device.at("e") == cpu1);
    // a crosses to CPU:0 once for b and c, its control token once for d; d crosses to CPU:1.
    CHECK(t.sends == std::multiset<std::string>{"a:0 CPU:1 -> CPU:0", "^a CPU:1 -> CPU:0", "d:0 CPU:0 -> CPU:1"});
    CHECK(t.recvs == t.sends);
    // Again, and the same on one device.
    CHECK(s.run(feeds, {e})[0].to_vector<float>() == e_want);
  }
  graph flat;
  auto fx = flat.placeholder(dtype::float32, partial_shape{3}, "x");
  auto fa = flat.op("Square", {fx});
  auto fd = flat.op("Mul", {flat.op("Neg", {fa}), flat.op("Add", {fa, fx})});
  CHECK(test::eval(flat, flat.op("Sub", {fd, fa}), {{fx, tensor::of<float>({3}, {1, -2, 3})}}).to_vector<float>() == e_want);
}

TEST_CASE("partitions: a conditional whose branches sit on another device sends dead values across") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{2}, "x");
  auto p = g.placeholder(dtype::boolean, partial_shape{}, "p");
  std::vector<output> out;
  {
    auto on = g.device_scope("/device:CPU:1");
    out = cond(
        g, p, {x}, [&](const branch& b) { return std::vector<output>{g.op("Square", {b.inputs[0]}, {}, "then").out(0)}; },
        [&](const branch& b) { return std::vector<output>{g.op("Neg", {b.inputs[0]}, {}, "else").out(0)}; });
  }
  auto y = g.op("Mul", {out[0], g.constant(tensor::of<float>({2}, {10, 10}), "ten")}, {}, node_options("y").on("/device:CPU:0"));
  // The Switches and the Merge on CPU:1 too; y on CPU:0 reads the Merge's value across.
  session s(g, devices(2));
  for (bool taken : {true, false}) {
    INFO("pred " << taken);
    const traced t = run_traced(s, {{x, tensor::of<float>({2}, {3, -4})}, {p, tensor::scalar(taken)}}, {y});
    CHECK(t.out[0].to_vector<float>() == (taken ? std::vector<float>{90, 160} : std::vector<float>{-30, 40}));
    CHECK(t.device.at(taken ? "cond/then" : "cond/else") == cpu1);
    CHECK(t.device.count(taken ? "cond/else" : "cond/then") == 0);  // the untaken side does not run
  }

  // A branch computed on CPU:0 from a Switch on CPU:1: its dead side crosses as dead.
  graph h;
  auto hx = h.placeholder(dtype::float32, partial_shape{2}, "x");
  auto hp = h.placeholder(dtype::boolean, partial_shape{}, "p");
  auto sw = h.op("Switch", {hx, hp}, {}, node_options("sw").on("/device:CPU:1"));
  auto f = h.op("Neg", {sw.out(0)}, {}, node_options("f").on("/device:CPU:0"));
  auto t = h.op("Square", {sw.out(1)}, {}, node_options("t").on("/device:CPU:0"));
  auto m = h.op("Merge", {f, t}, {}, node_options("m").on("/device:CPU:1"));
  session hs(h, devices(2));
  for (bool taken : {true, false}) {
    const traced r = run_traced(hs, {{hx, tensor::of<float>({2}, {3, -4})}, {hp, tensor::scalar(taken)}}, {m});
    CHECK(r.out[0].to_vector<float>() == (taken ? std::vector<float>{9, 16} : std::vector<float>{-3, 4}));
    CHECK(r.sends.size() == 4);  // both Switch outputs over, both results back: the dead ones too
  }
}

TEST_CASE("partitions: a loop stays on one device and takes and gives values across") {
  graph g;
  auto n = g.placeholder(dtype::float32, partial_shape{}, "n");
  auto start = g.op("Square", {n}, {}, node_options("start").on("/device:CPU:0"));
  std::vector<output> done;
  {
    auto on = g.device_scope("/device:CPU:1");
    // while i < n: i = i + 1, acc = acc * 2
    done = while_loop(
        g, {g.constant(tensor::scalar<float>(0), "i0").out(0), start.out(0)},
        [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(n)}).out(0); },
        [&](loop_scope& s, const std::vector<output>& v) {
          auto one = g.constant(tensor::scalar<float>(1), node_options("one").after({s.pivot()}));
          auto two = g.constant(tensor::scalar<float>(2), node_options("two").after({s.pivot()}));
          return std::vector<output>{g.op("Add", {v[0], one}).out(0), g.op("Mul", {v[1], two}).out(0)};
        });
  }
  auto y = g.op("Neg", {done[1]}, {}, node_options("y").on("/device:CPU:0"));
  session s(g, devices(2));
  // n = 3: acc starts at 9 and doubles three times: 72; y = -72.
  const traced t = run_traced(s, {{n, tensor::scalar<float>(3)}}, {y});
  CHECK(t.out[0].to_vector<float>() == std::vector<float>{-72});
  CHECK(t.device.at("start") == cpu0);
  CHECK(t.device.at("y") == cpu0);
  for (const auto& [name, device] : t.device)
    if (name.starts_with("while/")) CHECK(device == cpu1);
  // start to the loop, its result back (n is fed, and a fed value goes to each device that reads it).
  CHECK(t.sends == std::multiset<std::string>{"start:0 CPU:0 -> CPU:1", "while/Exit_1:0 CPU:1 -> CPU:0"});
}

TEST_CASE("partitions: a loop whose body spans two devices runs each iteration on both") {
  // while v < 5: v = v * v, the test on CPU:0 (with the loop's control flow), the square on
  // CPU:1 (with a control loop of its own there, driven by the predicate sent each iteration).
  graph g;
  auto n = g.placeholder(dtype::float32, partial_shape{}, "n");
  auto five = g.constant(tensor::scalar<float>(5), "five");
  auto done = while_loop(
      g, {n},
      [&](loop_scope& s, const std::vector<output>& v) {
        return g.op("Less", {v[0], s.invariant(five)}, {}, node_options("less").on("/device:CPU:0")).out(0);
      },
      [&](loop_scope&, const std::vector<output>& v) {
        return std::vector<output>{g.op("Square", {v[0]}, {}, node_options("sq").on("/device:CPU:1")).out(0)};
      });
  session_options soft = devices(1);
  soft.placement.soft = true;  // the requests for CPU:1 fall back to CPU:0
  session one(g, soft);
  for (int inter_op : {0, 1}) {
    session s(g, devices(2, inter_op));
    for (float start : {2.0f, 1.5f, 7.0f}) {
      INFO("start " << start << ", inter-op threads " << inter_op);
      // By hand: 2 -> 4 -> 16 (three tests, two squares); 1.5 -> 2.25 -> 5.0625; 7: none.
      const float want = start == 2.0f ? 16.0f : start == 1.5f ? 5.0625f : 7.0f;
      const traced t = run_traced(s, {{n, tensor::scalar<float>(start)}}, {done[0]});
      CHECK(t.out[0].to_vector<float>() == std::vector<float>{want});
      CHECK(one.run({{n, tensor::scalar<float>(start)}}, {done[0]})[0].to_vector<float>() == std::vector<float>{want});
      if (start != 7.0f) CHECK(t.device.at("while/sq") == cpu1);
      CHECK(t.device.at("while/less") == cpu0);
      // Each iteration (the last, whose test fails, too) sends the predicate and the value to
      // square to CPU:1 and the square back.
      const std::size_t tests = start == 2.0f ? 3 : start == 1.5f ? 3 : 1;
      CHECK(t.sends.count("while/LoopCond:0 CPU:0 -> CPU:1") == tests);
      CHECK(t.recvs.count("while/LoopCond:0 CPU:0 -> CPU:1") == tests);
      CHECK(t.sends.count("while/sq:0 CPU:1 -> CPU:0") == tests);
    }
  }
}

TEST_CASE("partitions: a variable on one device, read on another, and its updates stay with it") {
  graph g;
  auto v = g.variable(dtype::float32, partial_shape{2}, node_options("v").on("/device:CPU:1"));
  auto init = g.op("Assign", {v, g.constant(tensor::of<float>({2}, {1, 2}), "init_value")}, {}, "init");
  auto inc = g.op("AssignAdd", {v, g.constant(tensor::of<float>({2}, {10, 10}), "step")}, {}, "inc");
  auto read = g.op("Mul", {v, g.constant(tensor::of<float>({2}, {3, 3}), "three")}, {}, node_options("read").on("/device:CPU:0"));
  session s(g, devices(2));
  s.run({init});
  CHECK(run_traced(s, {}, {read}).out[0].to_vector<float>() == std::vector<float>{3, 6});
  const traced t = run_traced(s, {}, {}, {inc});
  CHECK(t.device.at("inc") == cpu1);
  CHECK(t.sends.empty());
  CHECK(s.run({}, {read})[0].to_vector<float>() == std::vector<float>{33, 36});
}

TEST_CASE("partitions: an error on one device ends the step on every device, and the session stays usable") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{-1, -1}, "x");
  auto w = g.placeholder(dtype::float32, partial_shape{-1, -1}, "w");
  // CPU:0 waits for CPU:1's product, which fails when the shapes do not fit.
  auto prod = g.op("MatMul", {x, w}, {}, node_options("prod").on("/device:CPU:1"));
  auto y = g.op("Neg", {prod}, {}, node_options("y").on("/device:CPU:0"));
  // ...and CPU:1 waits for CPU:0's value, which comes from a node that fails on CPU:0.
  auto ids = g.placeholder(dtype::int32, partial_shape{-1}, "ids");
  auto gathered = g.op("GatherV2", {x, ids, g.constant(tensor::scalar<std::int32_t>(0), "axis")}, {},
                       node_options("gathered").on("/device:CPU:0"));
  auto z = g.op("Square", {gathered}, {}, node_options("z").on("/device:CPU:1"));
  for (int inter_op : {0, 1}) {
    INFO("inter-op threads: " << inter_op);
    session s(g, devices(2, inter_op));
    const tensor x22 = tensor::of<float>({2, 2}, {1, 2, 3, 4});
    test::require_error([&] { s.run({{x, x22}, {w, tensor::of<float>({3, 1}, {1, 1, 1})}}, {y}); },
                        {"node 'prod' (MatMul)", "[2,2]", "[3,1]"});
    test::require_error([&] { s.run({{x, x22}, {ids, tensor::of<std::int32_t>({1}, {7})}}, {z}); },
                        {"node 'gathered' (GatherV2)"});
    // Both at once: one of the errors, whichever came first.
    test::require_error([&] {
      s.run({{x, x22}, {w, tensor::of<float>({3, 1}, {1, 1, 1})}, {ids, tensor::of<std::int32_t>({1}, {7})}}, {y, z});
    }, {"node '"});
    // The session runs again.
    CHECK(s.run({{x, x22}, {w, tensor::of<float>({2, 1}, {1, 1})}}, {y})[0].to_vector<float>() == std::vector<float>{-3, -7});
    CHECK(s.run({{x, x22}, {ids, tensor::of<std::int32_t>({1}, {1})}}, {z})[0].to_vector<float>() == std::vector<float>{9, 16});
  }
}

TEST_CASE("partitions: a chain that crosses devices at every node, on one thread and on several, from several callers") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{4}, "x");
  output v = x;
  for (int i = 0; i < 60; ++i)
    v = g.op(i % 3 == 2 ? "Square" : "Neg", {v}, {}, node_options("n" + std::to_string(i)).on(i % 2 ? "/cpu:1" : "/cpu:0"));
  // 20 Squares of -x or x: x^(2^20) overflows; keep the values at 1 and -1 and 0.
  const tensor in = tensor::of<float>({4}, {1, -1, 0, 2});
  std::vector<float> want{1, -1, 0, 2};
  for (int i = 0; i < 60; ++i)
    for (float& w : want) w = i % 3 == 2 ? w * w : -w;
  // Squares of 2 overflow to infinity: the chain keeps the values exact, overflow included.
  for (int inter_op : {0, 1, 3}) {
    INFO("inter-op threads: " << inter_op);
    session s(g, devices(2, inter_op));
    const traced t = run_traced(s, {{x, in}}, {v});
    CHECK(t.out[0].to_vector<float>() == want);
    CHECK(t.sends.size() == 59);
    std::atomic<int> right{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c)
      callers.emplace_back([&] {
        for (int k = 0; k < 10; ++k) right += s.run({{x, in}}, {v})[0].to_vector<float>() == want;
      });
    for (auto& th : callers) th.join();
    CHECK(right == 40);
  }
}

namespace {
// A linear model y ~ x W + b with the mean squared error over a batch, its variables on
// CPU:0 (the parameter device); returns the loss.
struct linear_model {
  output w, b;
  std::string init;  // the node that assigns both their first values
};
linear_model linear_variables(graph& g) {
  auto on = g.device_scope("/device:CPU:0");
  auto w = g.variable(dtype::float32, partial_shape{4, 3}, node_options("w"));
  auto b = g.variable(dtype::float32, partial_shape{3}, node_options("b"));
  std::vector<float> w0(12);
  for (int i = 0; i < 12; ++i) w0[static_cast<std::size_t>(i)] = 0.1f * static_cast<float>(i % 5) - 0.2f;
  auto iw = g.op("Assign", {w, g.constant(tensor::from_vector(w0, shape{4, 3}), "w0")}, {}, "w/init");
  auto ib = g.op("Assign", {b, g.constant(tensor::of<float>({3}, {0.5f, -0.5f, 0}), "b0")}, {}, "b/init");
  g.op("NoOp", {}, {}, node_options("init").after({iw.id(), ib.id()}));
  return {w, b, "init"};
}
output mse(graph& g, const linear_model& m, output x, output y) {
  auto pred = g.op("Add", {g.op("MatMul", {x, m.w}), m.b});
  auto err = g.op("Square", {g.op("Sub", {pred, y})});
  return g.op("Mean", {err, g.constant(tensor::of<std::int32_t>({2}, {0, 1}))}).out(0);
}
tensor batch(int rows, int cols, int seed) {
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(static_cast<int>((i * 7919 + static_cast<std::size_t>(seed) * 104729) % 211) - 105) / 50.0f;
  return tensor::from_vector(v, shape{rows, cols});
}
tensor rows_of(const tensor& t, int from, int count) {
  const auto v = t.to_vector<float>();
  const auto cols = t.shape()[1];
  return tensor::from_vector(std::vector<float>(v.begin() + from * cols, v.begin() + (from + count) * cols),
                             shape{count, cols});
}
}  // namespace

TEST_CASE("synchronous data parallelism: a replica per device, gradients averaged, one update, as one device on the whole batch") {
  // One device, the whole batch of 16.
  graph one;
  const auto m1 = linear_variables(one);
  auto x = one.placeholder(dtype::float32, partial_shape{-1, 4}, "x");
  auto y = one.placeholder(dtype::float32, partial_shape{-1, 3}, "y");
  auto step1 = train::minimize(one, mse(one, m1, x, y), {m1.w, m1.b}, train::sgd{0.1});
  session s1(one, test::one_thread());
  s1.run({m1.init});

  // Two replicas, each on half the batch on its own device; the averaged gradient updates
  // the variables on CPU:0 once.
  graph two;
  const auto m2 = linear_variables(two);
  std::vector<output> xs, ys, losses;
  std::vector<std::vector<output>> grads;
  for (int r = 0; r < 2; ++r) {
    auto on = two.device_scope("/device:CPU:" + std::to_string(r));
    auto scope = two.name_scope("replica" + std::to_string(r));
    xs.push_back(two.placeholder(dtype::float32, partial_shape{-1, 4}, "x"));
    ys.push_back(two.placeholder(dtype::float32, partial_shape{-1, 3}, "y"));
    losses.push_back(mse(two, m2, xs.back(), ys.back()));
    grads.push_back(add_gradients(two, {losses.back()}, {m2.w, m2.b}));
  }
  std::vector<output> averaged;
  {
    auto on = two.device_scope("/device:CPU:0");
    auto half = two.constant(tensor::scalar(0.5f), "half");
    for (int v = 0; v < 2; ++v)
      averaged.push_back(two.op("Mul", {two.op("Add", {grads[0][static_cast<std::size_t>(v)], grads[1][static_cast<std::size_t>(v)]}), half}));
  }
  auto step2 = train::apply_gradients(two, losses[0], {m2.w, m2.b}, averaged, train::sgd{0.1});
  session s2(two, devices(2));
  s2.run({m2.init});

  for (int k = 0; k < 5; ++k) {
    const tensor bx = batch(16, 4, k), by = batch(16, 3, k + 100);
    s1.run({{x, bx}, {y, by}}, {}, {step1.step});
    const traced t = run_traced(s2,
                                {{xs[0], rows_of(bx, 0, 8)}, {ys[0], rows_of(by, 0, 8)},
                                 {xs[1], rows_of(bx, 8, 8)}, {ys[1], rows_of(by, 8, 8)}},
                                {}, {step2.step});
    if (k == 0) {  // each replica's gradient ran on its own device and crossed to CPU:0
      bool replica1_on_cpu1 = false;
      for (const auto& [name, device] : t.device)
        if (name.starts_with("replica1/")) replica1_on_cpu1 = device == cpu1;
      CHECK(replica1_on_cpu1);
      CHECK(!t.sends.empty());
    }
  }
  // The mean over 16 rows is the mean of the two halves' means: equal up to rounding.
  const auto w1 = s1.run({}, {m1.w})[0].to_vector<float>(), w2 = s2.run({}, {m2.w})[0].to_vector<float>();
  const auto b1 = s1.run({}, {m1.b})[0].to_vector<float>(), b2 = s2.run({}, {m2.b})[0].to_vector<float>();
  for (std::size_t i = 0; i < w1.size(); ++i) CHECK(w2[i] == Approx(w1[i]).margin(1e-5));
  for (std::size_t i = 0; i < b1.size(); ++i) CHECK(b2[i] == Approx(b1[i]).margin(1e-5));
  CHECK(w1 != std::vector<float>(w1.size(), 0.0f));
}

TEST_CASE("asynchronous data parallelism: each replica updates the shared variables") {
  graph g;
  const auto m = linear_variables(g);
  std::vector<output> xs, ys, losses;
  std::vector<train::training_op> steps;
  for (int r = 0; r < 2; ++r) {
    auto on = g.device_scope("/device:CPU:" + std::to_string(r));
    auto scope = g.name_scope("replica" + std::to_string(r));
    xs.push_back(g.placeholder(dtype::float32, partial_shape{-1, 4}, "x"));
    ys.push_back(g.placeholder(dtype::float32, partial_shape{-1, 3}, "y"));
    losses.push_back(mse(g, m, xs.back(), ys.back()));
    steps.push_back(train::minimize(g, losses.back(), {m.w, m.b}, train::sgd{0.05}, "train" + std::to_string(r)));
  }
  // Replica steps one after another are plain SGD steps on each half in turn: the same
  // graph on one device (its rule-based placement puts nothing elsewhere) gives the same
  // values bit for bit.
  session_options o1 = test::one_thread();
  o1.placement.soft = true;  // the requests for CPU:1 fall back to CPU:0
  session reference(g, o1), parallel(g, devices(2));
  reference.run({m.init});
  parallel.run({m.init});
  for (int k = 0; k < 4; ++k)
    for (int r = 0; r < 2; ++r) {
      const feed_list feeds{{xs[static_cast<std::size_t>(r)], batch(8, 4, 10 * k + r)}, {ys[static_cast<std::size_t>(r)], batch(8, 3, 10 * k + r + 50)}};
      reference.run(feeds, {}, {steps[static_cast<std::size_t>(r)].step});
      parallel.run(feeds, {}, {steps[static_cast<std::size_t>(r)].step});
    }
  CHECK(parallel.run({}, {m.w})[0].to_vector<float>() == reference.run({}, {m.w})[0].to_vector<float>());
  // Both replicas at once, from two threads, on one fixed batch each of a linear target
  // (y = x T, T[i][j] = i - j, by a naive loop): the loss goes down.
  auto target = [](const tensor& x) {
    const auto v = x.to_vector<float>();
    std::vector<float> y(static_cast<std::size_t>(x.shape()[0]) * 3, 0.0f);
    for (std::int64_t r = 0; r < x.shape()[0]; ++r)
      for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 4; ++i) y[static_cast<std::size_t>(r * 3 + j)] += v[static_cast<std::size_t>(r * 4 + i)] * static_cast<float>(i - j);
    return tensor::from_vector(y, shape{x.shape()[0], 3});
  };
  const tensor x0 = batch(8, 4, 1), x1 = batch(8, 4, 3);
  const feed_list both{{xs[0], x0}, {ys[0], target(x0)}, {xs[1], x1}, {ys[1], target(x1)}};
  const float before = parallel.run(both, {losses[0]})[0].to_vector<float>()[0] + parallel.run(both, {losses[1]})[0].to_vector<float>()[0];
  std::vector<std::thread> replicas;
  for (int r = 0; r < 2; ++r)
    replicas.emplace_back([&, r] {
      const feed_list mine{both[static_cast<std::size_t>(2 * r)], both[static_cast<std::size_t>(2 * r + 1)]};
      for (int k = 0; k < 50; ++k) parallel.run(mine, {}, {steps[static_cast<std::size_t>(r)].step});
    });
  for (auto& th : replicas) th.join();
  const float after = parallel.run(both, {losses[0]})[0].to_vector<float>()[0] + parallel.run(both, {losses[1]})[0].to_vector<float>()[0];
  CHECK(after < 0.5f * before);
}

TEST_CASE("lossy transfers: float32 crosses devices as its top 16 bits, zero-filled back") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{6}, "x");
  auto a = g.op("Identity", {x}, {}, node_options("a").on("/cpu:1"));
  auto b = g.op("Neg", {x}, {}, node_options("b").on("/cpu:1"));  // not Identity: CSE would merge it with a
  auto ya = g.op("Identity", {a}, {}, node_options("ya").on("/cpu:0"));
  auto yb = g.op("Neg", {b}, {}, node_options("yb").on("/cpu:0"));  // truncation keeps the sign: -(-v cut) = v cut
  auto n = g.placeholder(dtype::int32, partial_shape{2}, "n");
  auto ni = g.op("Identity", {n}, {}, node_options("ni").on("/cpu:1"));
  auto yn = g.op("Identity", {ni}, {}, node_options("yn").on("/cpu:0"));
  const std::vector<float> v{1.0f, -3.14159265f, 1e-30f, 65504.25f, 0.1f, -0.0f};
  // By hand: the value whose low 16 bits are cleared.
  std::vector<float> cut;
  for (float f : v) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits &= 0xFFFF0000u;
    float c;
    std::memcpy(&c, &bits, 4);
    cut.push_back(c);
  }
  const feed_list feeds{{x, tensor::from_vector(v, shape{6})}, {n, tensor::of<std::int32_t>({2}, {123456789, -7})}};
  SECTION("every float32 transfer") {
    session_options o = devices(2);
    o.lossy_transfers = true;
    session s(g, o);
    const auto out = s.run(feeds, {ya, yb, yn});
    CHECK(out[0].to_vector<float>() == cut);
    CHECK(out[1].to_vector<float>() == cut);
    CHECK(out[2].to_vector<std::int32_t>() == std::vector<std::int32_t>{123456789, -7});  // not float32: exact
    // Truncation keeps 8 significant bits: the error is below 2^-7 of the value.
    for (std::size_t i = 0; i < v.size(); ++i) CHECK(std::abs(cut[i] - v[i]) <= std::abs(v[i]) * 0x1p-7f);
  }
  SECTION("the outputs named") {
    session_options o = devices(2);
    o.lossy_outputs = {"a"};
    session s(g, o);
    const auto out = s.run(feeds, {ya, yb});
    CHECK(out[0].to_vector<float>() == cut);
    CHECK(out[1].to_vector<float>() == v);
    o.lossy_outputs = {"nope:0"};
    test::require_error([&] { session bad(g, o); }, {"lossy_outputs", "no node named 'nope'"});
  }
  SECTION("off: exact") {
    session s(g, devices(2));
    CHECK(s.run(feeds, {ya})[0].to_vector<float>() == v);
  }
}

TEST_CASE("the timeline of a step on two devices: a process per device, a flow arrow per transfer") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{2}, "x");
  auto a = g.op("Neg", {x}, {}, node_options("a").on("/cpu:1"));
  auto b = g.op("Square", {a}, {}, node_options("b").on("/cpu:0"));
  session s(g, devices(2));
  run_metadata meta;
  s.run({{x, tensor::of<float>({2}, {1, 2})}}, {b}, {}, {.trace = true}, &meta);
  const auto doc = test::json::parse(chrome_trace(meta.stats));
  std::map<std::string, double> pid_of;  // device -> pid
  std::map<std::string, std::vector<double>> flow;  // phase -> [pid, ts]
  std::map<std::string, double> pid_of_node;
  std::map<double, int> counters;  // pid -> memory counter events
  for (const auto& ev : doc["traceEvents"].as_array()) {
    const std::string ph = ev["ph"].as_string();
    if (ph == "M") pid_of[ev["args"]["name"].as_string()] = ev["pid"].as_number();
    else if (ph == "X") pid_of_node[ev["args"]["name"].as_string()] = ev["pid"].as_number();
    else if (ph == "C") ++counters[ev["pid"].as_number()];  // memory in use on each device
    else flow[ph] = {ev["pid"].as_number(), ev["ts"].as_number(), ev["id"].as_number()};
  }
  CHECK(pid_of.size() == 2);
  REQUIRE(flow.count("s") == 1);
  REQUIRE(flow.count("f") == 1);
  CHECK(flow["s"][2] == flow["f"][2]);                 // one arrow
  CHECK(flow["s"][0] == pid_of.at(cpu1));              // from CPU:1's Send
  CHECK(flow["f"][0] == pid_of.at(cpu0));              // to CPU:0's Recv
  CHECK(flow["s"][1] <= flow["f"][1]);
  CHECK(pid_of_node.at("a") == pid_of.at(cpu1));
  CHECK(pid_of_node.at("b") == pid_of.at(cpu0));
  CHECK(counters[pid_of.at(cpu0)] >= 2);  // b and the Recv
  CHECK(counters[pid_of.at(cpu1)] >= 2);  // a and the Send
  // The Send's record carries the value it sent.
  for (const auto& n : meta.stats.nodes)
    if (n.op == "_Send") {
      REQUIRE(n.outputs.size() == 1);
      CHECK(n.outputs[0].shape == shape({2}));
      CHECK(n.outputs[0].bytes == 8);
    }
}

TEST_CASE("Recv scheduling: as late as possible, a copying Recv waits until just before its value is used") {
  // CPU:0 makes K tensors of 64 Ki floats at once; CPU:1 folds them into a chain, three Tanh
  // nodes a stage, so the k-th is needed long after it is sent. By hand, as the cost model
  // sees it (default devices: a Tanh of 256 KiB in and out is about 27 us, a transfer 28 us):
  // the last node of CPU:1 to finish before stage k's Add less the transfer is the Add of
  // stage k - 1, so under alap each Recv (but the first two) starts after that Add ends.
  constexpr int K = 6;
  constexpr std::int64_t n = 65536;
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{n}, "x");
  std::vector<output> a;
  for (int k = 0; k < K; ++k) {
    auto c = g.constant(tensor::scalar(0.25f * static_cast<float>(k + 1)), node_options("c" + std::to_string(k)).on("/cpu:0"));
    a.push_back(g.op("Mul", {x, c}, {}, node_options("a" + std::to_string(k)).on("/cpu:0")));
  }
  output acc = g.op("Tanh", {a[0]}, {}, node_options("acc0").on("/cpu:1"));
  for (int k = 1; k < K; ++k) {
    output t = acc;
    for (int j = 0; j < 3; ++j) t = g.op("Tanh", {t}, {}, node_options("t" + std::to_string(k) + std::to_string(j)).on("/cpu:1"));
    acc = g.op("Add", {t, a[static_cast<std::size_t>(k)]}, {}, node_options("acc" + std::to_string(k)).on("/cpu:1"));
  }
  std::vector<float> xv(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0f;
  // By hand, element by element.
  std::vector<float> want(xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) {
    float s = std::tanh(xv[i] * 0.25f);
    for (int k = 1; k < K; ++k) s = std::tanh(std::tanh(std::tanh(s))) + xv[i] * 0.25f * static_cast<float>(k + 1);
    want[i] = s;
  }
  const feed_list feeds{{x, tensor::from_vector(xv, shape{n})}};
  auto run = [&](session_options::recv_order order, std::size_t& peak) {
    session_options o = devices(2, 0);
    o.copy_transfers = true;
    o.recv_scheduling = order;
    o.link = passes::link_spec{};  // the default figures the times above were worked with (else measured)
    session s(g, o);
    s.run(feeds, {acc});  // builds the executable (and warms the allocator)
    s.devices()[1]->reset_peak();
    const auto before = s.devices()[1]->bytes_in_use();
    run_metadata meta;
    auto out = s.run(feeds, {acc}, {}, {.trace = true}, &meta);
    peak = s.devices()[1]->peak_bytes_in_use() - before;
    const auto got = out[0].to_vector<float>();
    int wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) wrong += std::abs(got[i] - want[i]) > 1e-5f;
    CHECK(wrong == 0);
    return meta.stats;
  };
  std::size_t peak_asap = 0, peak_alap = 0;
  run(session_options::recv_order::asap, peak_asap);
  const step_stats stats = run(session_options::recv_order::alap, peak_alap);
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> times;  // node or transfer -> (start, end)
  for (const auto& st : stats.nodes) times[st.node] = {st.start_ns, st.end_ns};
  for (int k = 2; k < K; ++k) {
    const std::string recv = "a" + std::to_string(k) + ":0 CPU:0 -> CPU:1";
    INFO(recv);
    REQUIRE(times.count(recv));
    CHECK(times[recv].first >= times["acc" + std::to_string(k - 1)].second);
  }
  // A copy lives from its Recv to its Add: under alap at most the chain's value, its next
  // one and one copy (64 Ki floats each) on CPU:1 at once, with some slack for scalars.
  const std::size_t unit = n * sizeof(float);
  INFO("peak on CPU:1: asap " << peak_asap << " bytes, alap " << peak_alap << " bytes");  // asap's depends on timing
  CHECK(peak_alap <= 3 * unit + 4096);
}

TEST_CASE("partitions: the gradient of a loop whose body spans two devices") {
  // An RNN step in a while loop, h = tanh(h w + x_i), its MatMul, Add and Tanh on CPU:1, the
  // rest of the body and the loop's control flow on CPU:0; the gradient of sum(h^2) with
  // respect to w and h0, built with no device (the backward loop on CPU:0) or in a CPU:1
  // device scope (the backward loop on CPU:1, the forward loop's control flow with it).
  // Bit for bit as on one device.
  const std::int64_t steps = 5;
  auto build = [&](graph& g, bool grad_on_cpu1) {
    auto h0 = g.placeholder(dtype::float64, partial_shape({1, 3}), "h0");
    auto w = g.placeholder(dtype::float64, partial_shape({3, 3}), "w");
    std::vector<double> xv;
    for (int i = 0; i < steps * 3; ++i) xv.push_back(std::sin(0.7 * i));
    auto x = g.constant(tensor::from_vector(xv, shape{steps, 3}), "x");
    auto i64 = [&](std::int64_t v) { return g.constant(tensor::scalar(v)).out(0); };
    auto out = while_loop(
        g, {i64(0), h0},
        [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(i64(steps))}).out(0); },
        [&](loop_scope& s, const std::vector<output>& v) {
          auto xi = g.op("Reshape", {g.op("GatherV2", {s.invariant(x), v[0], s.invariant(g.constant(tensor::scalar(std::int32_t{0})))}),
                                     s.invariant(g.constant(tensor::from_vector(std::vector<std::int64_t>{1, -1})))});
          output h;
          const output wi = s.invariant(w);  // its Enter, control flow, stays with the loop's
          {
            auto on = g.device_scope("/device:CPU:1");
            h = g.op("Tanh", {g.op("Add", {g.op("MatMul", {v[1], wi}, {}, "mm"), xi})}, {}, "tanh");
          }
          return std::vector<output>{g.op("Add", {v[0], s.invariant(i64(1))}).out(0), h};
        },
        while_options{"rnn", 4, -1});
    auto loss = g.op("Sum", {g.op("Square", {out[1]}), g.constant(tensor::from_vector(std::vector<std::int32_t>{0, 1}))}, {}, "loss");
    std::vector<output> d;
    if (grad_on_cpu1) {
      auto on = g.device_scope("/device:CPU:1");
      d = add_gradients(g, {loss}, {w, h0});
    } else {
      d = add_gradients(g, {loss}, {w, h0});
    }
    return std::tuple{h0, w, d};
  };
  std::vector<double> wv, hv{0.3, -0.2, 0.5};
  for (int i = 0; i < 9; ++i) wv.push_back(0.4 * std::cos(1.3 * i));
  for (bool grad_on_cpu1 : {false, true}) {
    INFO("gradient in a CPU:1 scope: " << grad_on_cpu1);
    graph g;
    auto [h0, w, d] = build(g, grad_on_cpu1);
    const feed_list feeds{{w, tensor::from_vector(wv, shape{3, 3})}, {h0, tensor::from_vector(hv, shape{1, 3})}};
    session_options soft = devices(1);
    soft.placement.soft = true;
    session one(g, soft);
    const auto want = one.run(feeds, {d[0], d[1]});
    for (int inter_op : {0, 1}) {
      INFO("inter-op threads " << inter_op);
      session two(g, devices(2, inter_op));
      for (int rep = 0; rep < 2; ++rep) {
        const traced t = run_traced(two, feeds, {d[0], d[1]});
        CHECK(t.out[0].to_vector<double>() == want[0].to_vector<double>());
        CHECK(t.out[1].to_vector<double>() == want[1].to_vector<double>());
        CHECK(t.device.at("rnn/mm") == cpu1);
        // The predicate crosses each iteration (five tests that pass and the one that fails),
        // from CPU:0, or from CPU:1 when the gradient's scope took the loop's control flow there
        // (the gradient adds an iteration counter to the forward loop), and the step's value
        // from CPU:1 back.
        const std::string pred = grad_on_cpu1 ? "rnn/LoopCond:0 CPU:1 -> CPU:0" : "rnn/LoopCond:0 CPU:0 -> CPU:1";
        CHECK(t.sends.count(pred) == steps + 1);
        CHECK(t.recvs.count(pred) == steps + 1);
        if (!grad_on_cpu1) CHECK(t.sends.count("rnn/tanh:0 CPU:1 -> CPU:0") == steps + 1);
      }
    }
  }
}

TEST_CASE("partitions: an error in an iteration of a loop across devices ends the step on both, and the session runs again") {
  // acc += table[i] while i < n, the lookup on CPU:1: with n = 5 the fourth lookup (i = 3)
  // is out of the table's three rows.
  graph g;
  auto n = g.placeholder(dtype::int32, partial_shape{}, "n");
  auto table = g.constant(tensor::of<float>({3}, {1, 10, 100}), "table");
  auto done = while_loop(
      g, {g.constant(tensor::scalar(std::int32_t{0}), "i0").out(0), g.constant(tensor::scalar(0.0f), "acc0").out(0)},
      [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(n)}).out(0); },
      [&](loop_scope& s, const std::vector<output>& v) {
        const output t = s.invariant(table), axis = s.invariant(g.constant(tensor::scalar(std::int32_t{0}), "axis"));
        auto row = g.op("GatherV2", {t, v[0], axis}, {}, node_options("lookup").on("/device:CPU:1"));
        return std::vector<output>{g.op("Add", {v[0], s.invariant(g.constant(tensor::scalar(std::int32_t{1}), "one"))}).out(0),
                                   g.op("Add", {v[1], row}, {}, "sum").out(0)};
      });
  for (int inter_op : {0, 1}) {
    INFO("inter-op threads " << inter_op);
    session s(g, devices(2, inter_op));
    CHECK(s.run({{n, tensor::scalar(std::int32_t{3})}}, {done[1]})[0].to_vector<float>() == std::vector<float>{111});
    test::require_error([&] { s.run({{n, tensor::scalar(std::int32_t{5})}}, {done[1]}); }, {"node 'while/lookup' (GatherV2)"});
    CHECK(s.run({{n, tensor::scalar(std::int32_t{2})}}, {done[1]})[0].to_vector<float>() == std::vector<float>{11});
    const traced t = run_traced(s, {{n, tensor::scalar(std::int32_t{2})}}, {done[1]});
    CHECK(t.device.at("while/lookup") == cpu1);
    CHECK(t.device.at("while/sum") == cpu0);
  }
}

namespace {
// An async kernel that passes its input on at once when it is not negative, and else waits,
// holding no thread, until its step is cancelled.
struct wait_until_cancelled final : op_kernel {
  explicit wait_until_cancelled(const node&) {}
  void compute(kernel_context&) const override {}
  bool is_async() const noexcept override { return true; }
  void compute_async(kernel_context& ctx, std::function<void()> done) const override {
    if (ctx.input(0).scalar_value<float>() >= 0) {
      ctx.set_output(0, ctx.input(0));
      return done();
    }
    auto once = std::make_shared<std::atomic<bool>>(false);
    auto cancelled = [&ctx, done, once] {
      if (once->exchange(true)) return;
      ctx.set_error(std::make_exception_ptr(error(error_code::cancelled, "wait cancelled")));
      done();
    };
    if (ctx.cancellation().register_callback(cancelled) == 0) cancelled();
  }
};
const bool wait_registered = [] {
  register_op(op_def_builder("TestPartitionWait").input("x: float32").output("y: float32").shape_fn(ops::same_shape));
  return register_cpu_kernel<wait_until_cancelled>("TestPartitionWait");
}();
}  // namespace

TEST_CASE("partitions: an error on one device cancels a kernel waiting on the other") {
  REQUIRE(wait_registered);
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape{}, "x");
  auto waiting = g.op("TestPartitionWait", {x}, {}, node_options("waiting").on("/device:CPU:1"));
  auto after = g.op("Neg", {waiting}, {}, node_options("after").on("/device:CPU:0"));
  auto bad = g.op("Reshape", {g.constant(tensor::of<float>({3}, {1, 2, 3})), g.op("Identity", {g.constant(tensor::of<std::int32_t>({1}, {2}))})}, {},
                  node_options("bad_reshape").on("/device:CPU:0"));
  for (int inter_op : {0, 1}) {
    INFO("inter-op threads " << inter_op);
    session s(g, devices(2, inter_op));
    // CPU:1 waits for ever and CPU:0's Recv waits for it; CPU:0's error cancels the wait.
    test::require_error([&] { s.run({{x, tensor::scalar(-1.0f)}}, {after, bad}); }, {"node 'bad_reshape' (Reshape)", "cannot reshape [3]"});
    CHECK(s.run({{x, tensor::scalar(4.0f)}}, {after})[0].scalar_value<float>() == -4.0f);
  }
}
