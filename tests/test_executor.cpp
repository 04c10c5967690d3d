#include "support/helpers.hpp"

#include <weft/core/inline_deque.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <random>
#include <thread>
#include <vector>

using namespace weft;

namespace {
// An async kernel that completes from another thread after a short wait, or when the step
// is cancelled; it holds no executor thread meanwhile.
struct async_wait final : op_kernel {
  explicit async_wait(const node&) {}
  void compute(kernel_context&) const override {}
  bool is_async() const noexcept override { return true; }
  void compute_async(kernel_context& ctx, std::function<void()> done) const override {
    auto state = std::make_shared<std::atomic<bool>>(false);
    auto finish = [&ctx, done, state](bool cancelled) {
      if (state->exchange(true)) return;
      if (cancelled) ctx.set_error(std::make_exception_ptr(error(error_code::cancelled, "wait cancelled")));
      else ctx.set_output(0, ctx.input(0));
      done();
    };
    bool wait_forever = ctx.input(0).scalar_value<float>() < 0;
    auto token = ctx.cancellation().register_callback([finish] { finish(true); });
    if (token == 0) return finish(true);
    if (!wait_forever)
      std::thread([finish] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        finish(false);
      }).detach();
  }
};

const bool registered = [] {
  register_op(op_def_builder("TestAsyncWait").input("x: float32").output("y: float32").shape_fn(ops::same_shape));
  return register_cpu_kernel<async_wait>("TestAsyncWait");
}();
}  // namespace

TEST_CASE("async kernels complete through their done callback") {
  REQUIRE(registered);
  graph g;
  auto& x = g.placeholder(dtype::float32, {}, "x");
  auto& w = g.op("TestAsyncWait", {x}, {}, "wait");
  auto& y = g.op("Add", {w, g.constant(tensor::scalar(1.0f))}, {}, "y");
  session s(g);
  CHECK(s.run({{x, tensor::scalar(2.0f)}}, {y})[0].scalar_value<float>() == 3.0f);
}

TEST_CASE("a failing node cancels waiting async kernels and the step ends with its error") {
  graph g;
  auto& x = g.placeholder(dtype::float32, {}, "x");
  auto& w = g.op("TestAsyncWait", {x}, {}, "wait_forever");
  auto& bad = g.op("Reshape", {g.constant(tensor::of<float>({3}, {1, 2, 3})), g.op("Identity", {g.constant(tensor::of<std::int32_t>({1}, {2}))})}, {}, "bad_reshape");
  session s(g);
  test::require_error([&] { s.run({{x, tensor::scalar(-1.0f)}}, {w, bad}); }, {"node 'bad_reshape' (Reshape)", "cannot reshape [3]"});
  // The session is still usable.
  CHECK(s.run({{x, tensor::scalar(4.0f)}}, {w})[0].scalar_value<float>() == 4.0f);
}

TEST_CASE("long chains and wide fan-outs run, inline and on the pool") {
  for (int threads : {0, 2}) {
    graph g;
    output cur = g.constant(tensor::scalar(0.0f));
    auto& one = g.constant(tensor::scalar(1.0f));
    for (int i = 0; i < 2000; ++i) cur = g.op("Add", {cur, one});
    std::vector<output> leaves;
    for (int i = 0; i < 500; ++i) leaves.push_back(g.op("Mul", {one, g.constant(tensor::scalar(static_cast<float>(i)))}));
    session_options o;
    o.inter_op_threads = threads;
    o.intra_op_threads = 1;
    session s(g, o);
    CHECK(s.run({}, {cur})[0].scalar_value<float>() == 2000.0f);
    std::vector<endpoint> fetches(leaves.begin(), leaves.end());
    auto out = s.run({}, fetches);
    for (int i = 0; i < 500; ++i) REQUIRE(out[static_cast<std::size_t>(i)].scalar_value<float>() == static_cast<float>(i));
  }
}

TEST_CASE("a thread's steps reuse the root's arrays and the handoff across executables of any size and failed steps") {
  // A thread keeps its last step's root arrays when they are small (a large chain's are kept
  // by its executable) and its handoff when no pool task holds it: steps of three sessions in
  // turn, a failed step among them, each value worked out by hand; then the large chain's
  // steps on three threads at once (each takes the executable's arrays or makes its own) and
  // failing.
  for (int threads : {0, 2}) {
    INFO(threads << " inter-op threads");
    session_options o;
    o.inter_op_threads = threads;
    o.intra_op_threads = 1;
    graph small;  // y = x + 1
    auto& x = small.placeholder(dtype::float32, {}, "x");
    const output y = small.op("Add", {x, small.constant(tensor::scalar(1.0f))}).out(0);
    graph large;  // z = v + 1500, a chain of 1,500 Adds
    auto& v = large.placeholder(dtype::float32, {}, "v");
    output z = v;
    auto& one = large.constant(tensor::scalar(1.0f));
    for (int i = 0; i < 1500; ++i) z = large.op("Add", {z, one}).out(0);
    auto& large_shape = large.placeholder(dtype::int32, {1}, "large_shape");
    const output large_bad = large.op("Reshape", {z, large_shape}, {}, "large_bad").out(0);
    graph branchy;  // p ? (u * u) : -u; the untaken branch leaves dead values in the slots
    auto& u = branchy.placeholder(dtype::float32, {}, "u");
    auto& p = branchy.placeholder(dtype::boolean, {}, "p");
    const node& sw = branchy.op("Switch", {u, p});
    const output m = branchy.op("Merge", {branchy.op("Neg", {sw.out(0)}).out(0), branchy.op("Square", {sw.out(1)}).out(0)}).out(0);
    auto& shape_fed = branchy.placeholder(dtype::int32, {1}, "shape_fed");
    const output bad = branchy.op("Reshape", {branchy.op("Identity", {u}).out(0), shape_fed}, {}, "bad").out(0);
    session a(small, o), b(large, o), c(branchy, o);
    for (int round = 0; round < 3; ++round) {
      const float r = static_cast<float>(round);
      CHECK(a.run({{x, tensor::scalar(r)}}, {y})[0].scalar_value<float>() == r + 1);
      CHECK(c.run({{u, tensor::scalar(r + 2)}, {p, tensor::scalar(round % 2 == 0)}}, {m})[0].scalar_value<float>() ==
            (round % 2 == 0 ? (r + 2) * (r + 2) : -(r + 2)));
      CHECK(b.run({{v, tensor::scalar(r)}}, {z})[0].scalar_value<float>() == r + 1500);
      test::require_error([&] { c.run({{u, tensor::scalar(r)}, {shape_fed, tensor::of<std::int32_t>({1}, {3})}}, {bad}); },
                          {"node 'bad' (Reshape)"});
      CHECK(a.run({{x, tensor::scalar(-r)}}, {y})[0].scalar_value<float>() == 1 - r);
      CHECK(c.run({{u, tensor::scalar(r)}, {p, tensor::scalar(false)}}, {m})[0].scalar_value<float>() == -r);
    }
    std::atomic<int> wrong{0};
    std::vector<std::thread> runners;
    for (int t = 0; t < 3; ++t)
      runners.emplace_back([&, t] {
        for (int i = 0; i < 10; ++i) {
          const float r = static_cast<float>(t * 10 + i);
          if (b.run({{v, tensor::scalar(r)}}, {z})[0].scalar_value<float>() != r + 1500) ++wrong;
        }
      });
    for (auto& runner : runners) runner.join();
    CHECK(wrong == 0);
    for (int round = 0; round < 2; ++round) {
      test::require_error([&] { b.run({{v, tensor::scalar(1.0f)}, {large_shape, tensor::of<std::int32_t>({1}, {2})}}, {large_bad}); },
                          {"node 'large_bad' (Reshape)"});
      CHECK(b.run({{v, tensor::scalar(2.0f)}, {large_shape, tensor::of<std::int32_t>({1}, {1})}}, {large_bad})[0].to_vector<float>() ==
            std::vector<float>{1502});
    }
  }
}

namespace {
// Waits until `expect` rendezvous kernels have arrived (or fails after ten seconds): two of
// them finish only when two threads run them at once.
struct rendezvous_state {
  std::mutex mutex;
  std::condition_variable cv;
  int arrived = 0;
};
rendezvous_state meeting_point;
struct rendezvous_kernel final : op_kernel {
  explicit rendezvous_kernel(const node& n) : expect_(n.attr<std::int64_t>("expect")) {}
  void compute(kernel_context& ctx) const override {
    std::unique_lock lock(meeting_point.mutex);
    ++meeting_point.arrived;
    meeting_point.cv.notify_all();
    if (!meeting_point.cv.wait_for(lock, std::chrono::seconds(10), [&] { return meeting_point.arrived >= expect_; }))
      throw error(error_code::internal, "no other thread ran a rendezvous node");
    ctx.set_output(0, ctx.input(0));
  }
  std::int64_t expect_;
};
const bool rendezvous_registered = [] {
  // Stateful: two alike must both run (common subexpressions would merge them).
  register_op(op_def_builder("TestRendezvous").input("x: float32").output("y: float32").attr("expect: int").stateful().shape_fn(ops::same_shape));
  return register_cpu_kernel<rendezvous_kernel>("TestRendezvous");
}();
}  // namespace

TEST_CASE("the thread that calls run works beside the inter-op pool") {
  // A quick node and two rendezvous become ready at once (none is cheap: 5,000 elements).
  // The calling thread keeps the quick one and hands both rendezvous off; the pool's only
  // thread takes one and waits in it for the other, which only the calling thread can run.
  REQUIRE(rendezvous_registered);
  graph g;
  auto& x = g.constant(tensor::from_vector(std::vector<float>(5000, 1.5f), shape{5000}));
  auto& r = g.op("Identity", {x});
  auto& quick = g.op("Neg", {r}, {}, "quick");
  attr_map two;
  two.set("expect", std::int64_t{2});
  auto& b = g.op("TestRendezvous", {r}, two, "b");
  auto& c = g.op("TestRendezvous", {r}, two, "c");
  auto& sum = g.op("Add", {b, c}, {}, "sum");
  session_options o;
  o.inter_op_threads = 1;
  o.intra_op_threads = 1;
  o.constant_folding.max_bytes = 0;
  session s(g, o);
  for (int step = 0; step < 3; ++step) {
    meeting_point.arrived = 0;
    auto out = s.run({}, {quick, sum});
    CHECK(out[0].data<float>()[4999] == -1.5f);
    CHECK(out[1].data<float>()[0] == 3.0f);
  }
}

TEST_CASE("a node ready beside cheap ones stays on the thread that made it ready") {
  // Shape and Rank (cheap) and Neg (5,000 elements: neither cheap nor large) become ready
  // together; chains of 200 cheap nodes follow Shape and Rank. The calling thread keeps Neg
  // rather than handing it to the inter-op pool, whose thread would take it while the
  // calling thread runs the chains: Neg, and the Square after it, run on the calling thread.
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape({unknown_dim}), "x").out(0);  // no static shape to fold
  auto& r = g.op("Identity", {x}, {}, "r");
  // A cheap node made before Neg and one after: one of them is ahead of Neg in the ready list.
  output size = g.op("Shape", {r}, {}, "size").out(0);
  auto& neg = g.op("Neg", {r}, {}, "neg");
  output rank = g.op("Rank", {r}, {}, "rank").out(0);
  for (int i = 0; i < 200; ++i) size = g.op("Identity", {size}).out(0), rank = g.op("Identity", {rank}).out(0);
  auto& square = g.op("Square", {neg}, {}, "square");
  session_options o;
  o.inter_op_threads = 1;
  o.intra_op_threads = 1;
  session s(g, o);
  const tensor five_thousand = tensor::from_vector(std::vector<float>(5000, 1.5f), shape{5000});
  for (int step = 0; step < 20; ++step) {
    run_metadata meta;
    auto out = s.run({{x, five_thousand}}, {size, rank, square.out(0)}, {}, {.trace = true}, &meta);
    CHECK(out[0].data<std::int32_t>()[0] == 5000);
    CHECK(out[1].scalar_value<std::int32_t>() == 1);
    CHECK(out[2].data<float>()[4999] == 2.25f);
    std::map<std::string, int> thread;
    for (const auto& n : meta.stats.nodes) thread[n.node] = n.thread;
    REQUIRE(thread.count("size"));
    CHECK(thread["neg"] == thread["size"]);
    CHECK(thread["square"] == thread["size"]);
  }
}

namespace {
const bool probe_registered = [] {
  register_op(op_def_builder("TestProbe").input("x: float32").output("y: float32").stateful().shape_fn(ops::same_shape));
  return register_cpu_kernel<test::concurrency_probe>("TestProbe");
}();

// TestProbe reading a second input it does not use: a variable's value, through the
// variable's reference.
const bool probe_reading_registered = [] {
  register_op(op_def_builder("TestProbeReading")
                  .input("x: float32")
                  .input("w: float32")
                  .output("y: float32")
                  .stateful()
                  .shape_fn(ops::same_shape));
  return register_cpu_kernel<test::concurrency_probe>("TestProbeReading");
}();

// The most probes that ran at once in a few steps of three probes that are ready together:
// TestProbe of `elements`, or with `through_variable` TestProbeReading of 10 elements and
// a variable of `elements`.
int most_probes_at_once(std::int64_t elements, int intra_op_threads, bool through_variable = false) {
  graph g;
  const std::int64_t own = through_variable ? 10 : elements;
  auto& x = g.constant(tensor::from_vector(std::vector<float>(static_cast<std::size_t>(own), 1.0f), shape{own}));
  auto& r = g.op("Identity", {x});
  std::vector<endpoint> targets;
  std::vector<endpoint> probes;
  if (through_variable) {
    output v = g.variable(dtype::float32, partial_shape({elements}), "v");
    targets.push_back(g.op("Assign", {v, g.constant(tensor::filled(shape{elements}, 2.0f)).out(0)}));
    for (int i = 0; i < 3; ++i) probes.push_back(g.op("TestProbeReading", {r.out(0), v}));
  } else {
    for (int i = 0; i < 3; ++i) probes.push_back(g.op("TestProbe", {r}));
  }
  session_options o;
  o.inter_op_threads = 1;
  o.intra_op_threads = intra_op_threads;
  o.constant_folding.max_bytes = 0;
  session s(g, o);
  if (!targets.empty()) s.run({}, {}, targets);
  test::concurrency_probe::most = 0;
  for (int step = 0; step < 5 && test::concurrency_probe::most < 2; ++step) s.run({}, probes);
  return test::concurrency_probe::most;
}
}  // namespace

TEST_CASE("large nodes of a step run one at a time where kernels split across threads") {
  REQUIRE(probe_registered);
  // 40,000 elements: large. With two intra-op threads each kernel would split across both,
  // so the step runs them one after another; with one, two run at once (the calling thread
  // and the inter-op thread).
  CHECK(most_probes_at_once(40000, 2) == 1);
  CHECK(most_probes_at_once(40000, 1) == 2);
  // 10,000 elements: neither cheap nor large, so they run at once on either device.
  CHECK(most_probes_at_once(10000, 2) == 2);
}

TEST_CASE("a node reading a variable is placed by the size of the variable's value") {
  REQUIRE(probe_reading_registered);
  // The probes' own input is 10 elements; each reads a variable of 40,000 through its
  // reference, which holds no value itself. Counted by the value it reads, each probe is
  // large, or on a device of one intra-op thread neither cheap nor large, so the inter-op
  // thread takes one while the calling thread runs another. Counted as one element (the
  // reference), they were cheap and ran one after another on one thread.
  CHECK(most_probes_at_once(40000, 1, true) == 2);
  CHECK(most_probes_at_once(40000, 2, true) == 1);
  // A small variable leaves them cheap.
  CHECK(most_probes_at_once(100, 1, true) == 1);
}

namespace {
// A user op whose definition admits int32 and float32 but whose kernel covers float32 only.
struct pass_through final : op_kernel {
  explicit pass_through(const node&) {}
  void compute(kernel_context& ctx) const override { ctx.set_output(0, ctx.input(0)); }
};
const bool float_only_registered = [] {
  register_op(op_def_builder("TestFloatOnly").input("x: T").output("y: T").attr("T: {int32, float32}").shape_fn(ops::same_shape));
  return register_cpu_kernel<pass_through>("TestFloatOnly", {"T", dtype::float32});
}();
}  // namespace

TEST_CASE("missing kernels are reported when the executable is built") {
  REQUIRE(float_only_registered);
  graph g;
  auto& a = g.constant(tensor::of<std::int32_t>({1}, {1}));
  auto& b = g.op("TestFloatOnly", {a}, {}, "ints");
  session s(g);
  test::require_error([&] { s.run({}, {b}); },
                      {"node 'ints' (TestFloatOnly): no CPU kernel registered T=int32 (registered for: T=float32)"});
}

TEST_CASE("inline_deque behaves as std::deque through growth past its inline room") {
  // Random operations on both, the inline room (4) outgrown and the ring wrapped around.
  inline_deque<int, 4> q;
  std::deque<int> model;
  std::mt19937 rng(7);
  int next = 0;
  for (int round = 0; round < 4000; ++round) {
    switch (rng() % 7) {
      case 0:
      case 1: q.push_back(next), model.push_back(next), ++next; break;
      case 2: q.push_front(next), model.push_front(next), ++next; break;
      case 3: {
        const std::size_t at = rng() % (model.size() + 1);
        q.insert(at, next), model.insert(model.begin() + static_cast<std::ptrdiff_t>(at), next), ++next;
        break;
      }
      case 4:
        if (!model.empty()) q.pop_front(), model.pop_front();
        break;
      case 5:
        if (!model.empty()) q.pop_back(), model.pop_back();
        break;
      default:
        if (rng() % 50 == 0) q.clear(), model.clear();
        break;
    }
    REQUIRE(q.size() == model.size());
    REQUIRE(q.empty() == model.empty());
    if (!model.empty()) {
      REQUIRE(q.front() == model.front());
      REQUIRE(q.back() == model.back());
    }
    REQUIRE(std::equal(q.begin(), q.end(), model.begin(), model.end()));
  }
  CHECK(next > 2000);
  // Reverse iteration and index order agree with the model's.
  const auto& cq = q;
  CHECK(std::vector<int>(std::make_reverse_iterator(cq.end()), std::make_reverse_iterator(cq.begin())) ==
        std::vector<int>(model.rbegin(), model.rend()));
}
