// The queue ops (ops/data_flow_ops.hpp) through sessions: queues shared by name across steps
// and sessions, TensorFlow's semantics (blocking, close, the out_of_range that ends an
// epoch, dequeue_up_to's remainder, padding, priorities, a seeded shuffle), a blocked step
// cancelled from another thread or timed out, leaving the queue as it was and the session
// usable, and errors that name the node and the queue.
#include "support/helpers.hpp"
#include "support/json.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <numeric>
#include <thread>

using namespace weft;
using namespace weft::test;

namespace queue_ops_test {

using namespace std::chrono_literals;

queue_spec floats(std::int64_t capacity = -1, queue_kind kind = queue_kind::fifo) {
  queue_spec s;
  s.kind = kind;
  s.component_types = {dtype::float32};
  s.shapes = {partial_shape({})};
  s.capacity = capacity;
  return s;
}

// A graph with one float queue: a placeholder's vector enqueued row by row, one element
// dequeued, n dequeued, up to n dequeued, the size, close.
struct float_graph {
  graph g;
  graph_queue q;
  output values, n, one, many, up_to, size, closed;
  std::string enqueue, close, cancel_close, single;
  explicit float_graph(queue_spec spec = floats(), const std::string& prefix = "")
      : q(g, std::move(spec), node_options(prefix + "q")) {
    values = g.placeholder(dtype::float32, partial_shape({unknown_dim}), node_options(prefix + "values")).out(0);
    auto scalar = g.placeholder(dtype::float32, partial_shape({}), node_options(prefix + "scalar")).out(0);
    n = g.placeholder(dtype::int32, partial_shape({}), node_options(prefix + "n")).out(0);
    enqueue = q.enqueue_many({values}, node_options(prefix + "enqueue")).name();
    single = q.enqueue({scalar}, node_options(prefix + "enqueue_one")).name();
    one = q.dequeue(node_options(prefix + "dequeue"))[0];
    many = q.dequeue_many(n, node_options(prefix + "dequeue_many"))[0];
    up_to = q.dequeue_up_to(n, node_options(prefix + "dequeue_up_to"))[0];
    size = q.size();
    closed = q.is_closed();
    close = q.close(false, node_options(prefix + "close")).name();
    cancel_close = q.close(true, node_options(prefix + "close_cancel")).name();
  }
};

tensor vec(std::vector<float> v) { return tensor::from_vector(v); }
std::vector<endpoint> fetch(const std::vector<output>& outs) { return {outs.begin(), outs.end()}; }
tensor count(std::int32_t n) { return tensor::scalar(n); }

error_code code_of(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  FAIL("expected an error");
  return error_code::internal;
}

session_options pooled() {
  session_options o;
  o.inter_op_threads = 2;
  o.intra_op_threads = 1;
  return o;
}

}  // namespace queue_ops_test

using namespace queue_ops_test;

TEST_CASE("queue ops: a FIFO queue carries elements across steps, and a closed one ends the epoch", "[queue_ops]") {
  float_graph f;
  session s(f.g, one_thread());
  s.run({{f.values, vec({1, 2, 3, 4, 5})}}, {}, {f.enqueue});
  CHECK(s.run({}, {f.size})[0].scalar_value<std::int32_t>() == 5);
  CHECK(s.run({}, {f.one})[0].scalar_value<float>() == 1);
  const tensor two = s.run({{f.n, count(2)}}, {f.many})[0];
  CHECK(two.shape() == shape{2});
  CHECK(two.to_vector<float>() == std::vector<float>{2, 3});
  // Static shapes: one element a scalar, n of them a vector.
  CHECK(f.g.at(f.one).output_shape(0) == partial_shape({}));
  CHECK(f.g.at(f.many).output_shape(0) == partial_shape({unknown_dim}));
  s.run({f.close});
  // Up to 3 of the 2 left; then the closed, empty queue is out of range (the epoch's end).
  CHECK(s.run({{f.n, count(3)}}, {f.up_to})[0].to_vector<float>() == std::vector<float>{4, 5});
  std::string message;
  CHECK(code_of([&] { s.run({}, {f.one}); }, &message) == error_code::out_of_range);
  CHECK(message.find("node 'dequeue' (QueueDequeue)") != std::string::npos);
  CHECK(message.find("queue 'q' is closed and has 0 elements") != std::string::npos);
  CHECK(code_of([&] { s.run({{f.n, count(1)}}, {f.up_to}); }) == error_code::out_of_range);
  // Enqueueing into a closed queue is cancelled; the size is still readable.
  CHECK(code_of([&] { s.run({{f.values, vec({9})}}, {}, {f.enqueue}); }) == error_code::cancelled);
  CHECK(s.run({}, {f.size})[0].scalar_value<std::int32_t>() == 0);
  CHECK(s.run({}, {f.closed})[0].scalar_value<bool>());
}

TEST_CASE("queue ops: a loop dequeues an element an iteration for 50000 iterations in one step", "[queue_ops]") {
  // Each dequeue finds its element and completes inside its kernel's call: the nodes it
  // makes ready join the queue of the executor's loop that started it (step::start_async).
  constexpr std::int64_t n = 50000;
  float_graph f;
  auto& g = f.g;
  const queue_spec spec = floats();
  auto out = while_loop(
      g, {i64(g, 0), g.constant(tensor::scalar(0.0f)), g.constant(tensor::scalar(-1.0f))},
      [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(i64(g, n))}).out(0); },
      [&](loop_scope& s, const std::vector<output>& v) {
        const output got = g.op("QueueDequeue", {s.invariant(f.q.handle())},
                                {{"component_types", spec.component_types}, {"shapes", spec.shapes}},
                                node_options("loop_dequeue").after({v[0].node}))
                               .out(0);
        return std::vector<output>{g.op("Add", {v[0], s.invariant(i64(g, 1))}).out(0), g.op("Add", {v[1], got}).out(0), got};
      },
      while_options{"drain", 1, -1});
  std::vector<float> values(static_cast<std::size_t>(n));
  double expected = 0;
  for (std::size_t i = 0; i < values.size(); ++i) expected += values[i] = static_cast<float>(i % 3);
  for (const auto& o : {one_thread(), pooled()}) {
    session s(g, o);
    s.run({{f.values, vec(values)}}, {}, {f.enqueue});
    const auto r = s.run({}, {out[0], out[1], out[2]});
    CHECK(r[0].scalar_value<std::int64_t>() == n);
    CHECK(r[1].scalar_value<float>() == static_cast<float>(expected));  // sums below 2^24: exact
    CHECK(r[2].scalar_value<float>() == values.back());                  // in order: the last one last
    CHECK(s.run({}, {f.size})[0].scalar_value<std::int32_t>() == 0);
  }
}

TEST_CASE("queue ops: dequeue_many of 0 gives an empty batch, and an empty enqueue_many adds nothing", "[queue_ops]") {
  float_graph f;
  session s(f.g, one_thread());
  s.run({{f.values, vec({})}}, {}, {f.enqueue});
  CHECK(s.run({}, {f.size})[0].scalar_value<std::int32_t>() == 0);
  const tensor none = s.run({{f.n, count(0)}}, {f.many})[0];
  CHECK(none.shape() == shape{0});
  std::string message;
  CHECK(code_of([&] { s.run({{f.n, count(-1)}}, {f.many}); }, &message) == error_code::invalid_argument);
  CHECK(message.find("cannot dequeue -1 elements") != std::string::npos);
}

TEST_CASE("queue ops: sessions sharing a resource manager share a queue by name", "[queue_ops]") {
  auto resources = std::make_shared<resource_manager>();
  session_options o = one_thread();
  o.resources = resources;
  queue_spec spec = floats();
  spec.shared_name = "shared";
  float_graph producer(spec), consumer(spec);
  session a(producer.g, o), b(consumer.g, o);
  a.run({{producer.values, vec({7, 8})}}, {}, {producer.enqueue});
  CHECK(b.run({{consumer.n, count(2)}}, {consumer.many})[0].to_vector<float>() == std::vector<float>{7, 8});
  // A session of its own has a queue of its own.
  session c(consumer.g, one_thread());
  CHECK(c.run({}, {consumer.size})[0].scalar_value<std::int32_t>() == 0);
  // The same name with other options is an error naming both.
  queue_spec other = floats(5);
  other.shared_name = "shared";
  float_graph wrong(other);
  session d(wrong.g, o);
  std::string message;
  CHECK(code_of([&] { d.run({}, {wrong.size}); }, &message) == error_code::invalid_argument);
  CHECK(message.find("queue 'shared' in container '' exists as fifo(float32[]) capacity -1, not fifo(float32[]) capacity 5") !=
        std::string::npos);
  // A variable's name is not a queue's.
  graph g;
  g.variable(dtype::float32, partial_shape({}), node_options("v"));
  auto init = g.op("Assign", {g.resolve("v"), g.constant(tensor::scalar(1.0f)).out(0)});
  session e(g, o);
  e.run({init});
  queue_spec on_v = floats();
  on_v.shared_name = "v";
  float_graph clash(on_v);
  session h(clash.g, o);
  CHECK(code_of([&] { h.run({}, {clash.size}); }, &message) == error_code::invalid_argument);
  CHECK(message.find("resource 'v' in container '' is a variable, not a queue") != std::string::npos);
}

TEST_CASE("queue ops: a blocked dequeue holds no thread and resumes when another step enqueues", "[queue_ops]") {
  float_graph f;
  session s(f.g, pooled());
  auto waiting = std::async(std::launch::async, [&] { return s.run({{f.n, count(3)}}, {f.many})[0].to_vector<float>(); });
  wait_until([&] { return waiting_dequeues(s, "q") == 1; }, "the dequeue to wait");
  CHECK(waiting.wait_for(0ms) == std::future_status::timeout);
  // Two steps of one session run while the first waits: its dequeue holds no thread.
  s.run({{f.values, vec({1, 2})}}, {}, {f.enqueue});
  CHECK(s.run({}, {f.size})[0].scalar_value<std::int32_t>() == 0);  // taken by the waiting dequeue
  s.run({{f.values, vec({3, 4})}}, {}, {f.enqueue});
  CHECK(waiting.get() == std::vector<float>{1, 2, 3});
  CHECK(s.run({}, {f.one})[0].scalar_value<float>() == 4);
}

TEST_CASE("queue ops: the trace of a dequeue that waited: an arrow from the thread that started it to the one that ended it", "[queue_ops]") {
  float_graph f;
  session s(f.g, test::one_thread());  // each step runs on the thread that calls run()
  run_metadata meta;
  auto waiting = std::async(std::launch::async, [&] { return s.run({}, {f.one}, {}, {.trace = true}, &meta)[0]; });
  wait_until([&] { return waiting_dequeues(s, "q") == 1; }, "the dequeue to wait");
  std::this_thread::sleep_for(20ms);
  s.run({{f.values, vec({7})}}, {}, {f.enqueue});  // here: the waiting dequeue ends on this thread
  CHECK(waiting.get().scalar_value<float>() == 7);
  const node_stats* dequeue = nullptr;
  for (const auto& n : meta.stats.nodes)
    if (n.node == "dequeue") dequeue = &n;
  REQUIRE(dequeue);
  CHECK(dequeue->start_thread >= 0);
  CHECK(dequeue->start_thread != dequeue->thread);
  CHECK(dequeue->end_ns - dequeue->start_ns >= 15'000'000);  // it waited about 20 ms
  REQUIRE(dequeue->outputs.size() == 1);
  CHECK(dequeue->outputs[0].bytes == 4);
  std::map<std::string, std::vector<double>> arrow;  // phase -> tid, ts, id
  const auto doc = test::json::parse(chrome_trace(meta.stats));
  for (const auto& ev : doc["traceEvents"].as_array())
    if (ev["ph"].as_string() == "s" || ev["ph"].as_string() == "f") {
      CHECK(ev["cat"].as_string() == "async");
      CHECK(ev["args"]["name"].as_string() == "dequeue");
      arrow[ev["ph"].as_string()] = {ev["tid"].as_number(), ev["ts"].as_number(), ev["id"].as_number()};
    }
  REQUIRE(arrow.size() == 2);
  CHECK(arrow["s"][0] == dequeue->start_thread);
  CHECK(arrow["f"][0] == dequeue->thread);
  CHECK(arrow["s"][2] == arrow["f"][2]);
  CHECK(arrow["f"][1] - arrow["s"][1] >= 15'000);  // microseconds
}

TEST_CASE("queue ops: a step blocked in a dequeue times out and leaves the queue as it was", "[queue_ops]") {
  float_graph f;
  session s(f.g, one_thread());
  s.run({{f.values, vec({1, 2})}}, {}, {f.enqueue});
  run_options timed;
  timed.timeout = 30ms;
  const auto t0 = std::chrono::steady_clock::now();
  std::string message;
  CHECK(code_of([&] { s.run({{f.n, count(3)}}, {f.many}, {}, timed); }, &message) == error_code::deadline_exceeded);
  CHECK(std::chrono::steady_clock::now() - t0 >= 30ms);
  CHECK(message.find("timed out after 30 ms") != std::string::npos);
  // The two elements the dequeue had taken are back, in order; the session goes on.
  CHECK(s.run({}, {f.size})[0].scalar_value<std::int32_t>() == 2);
  CHECK(s.run({{f.n, count(2)}}, {f.many}, {}, timed)[0].to_vector<float>() == std::vector<float>{1, 2});
  // A blocked enqueue (capacity 1) times out too, its element not added.
  float_graph small(floats(1), "small_");
  session t(small.g, one_thread());
  CHECK(code_of([&] { t.run({{small.values, vec({5, 6})}}, {}, {small.enqueue}, timed); }) == error_code::deadline_exceeded);
  CHECK(t.run({}, {small.size})[0].scalar_value<std::int32_t>() == 1);  // the first row went in, the second did not
  CHECK(t.run({}, {small.one})[0].scalar_value<float>() == 5);
  CHECK(t.run({}, {small.size})[0].scalar_value<std::int32_t>() == 0);
}

TEST_CASE("queue ops: a blocked step cancelled from another thread fails with cancelled, the session goes on", "[queue_ops]") {
  float_graph f;
  session s(f.g, pooled());
  s.run({{f.values, vec({1})}}, {}, {f.enqueue});
  cancellation_manager cancel;
  run_options o;
  o.cancellation = &cancel;
  auto waiting = std::async(std::launch::async, [&] {
    std::string message;
    const error_code c = code_of([&] { s.run({{f.n, count(2)}}, {f.many}, {}, o); }, &message);
    return std::make_pair(c, message);
  });
  wait_until([&] { return waiting_dequeues(s, "q") == 1; }, "the dequeue to wait");
  cancel.cancel();
  auto [code, message] = waiting.get();
  CHECK(code == error_code::cancelled);
  CHECK(message.find("the run was cancelled") != std::string::npos);
  CHECK(s.run({}, {f.size})[0].scalar_value<std::int32_t>() == 1);
  // A run given a cancelled manager fails at once, running nothing.
  CHECK(code_of([&] { s.run({{f.values, vec({2})}}, {}, {f.enqueue}, o); }) == error_code::cancelled);
  CHECK(s.run({}, {f.size})[0].scalar_value<std::int32_t>() == 1);
  CHECK(s.run({}, {f.one})[0].scalar_value<float>() == 1);
}

TEST_CASE("queue ops: close with cancel_pending_enqueues fails a blocked enqueue, without it the enqueue finishes", "[queue_ops]") {
  float_graph f(floats(1));
  session s(f.g, pooled());
  s.run({{f.values, vec({1})}}, {}, {f.enqueue});
  auto blocked = std::async(std::launch::async, [&] { return code_of([&] { s.run({{f.values, vec({2})}}, {}, {f.enqueue}); }); });
  wait_until([&] { return waiting_enqueues(s, "q") == 1; }, "the enqueue to wait");
  s.run({f.cancel_close});
  CHECK(blocked.get() == error_code::cancelled);
  CHECK(s.run({}, {f.one})[0].scalar_value<float>() == 1);

  float_graph g2(floats(1), "g2_");
  session t(g2.g, pooled());
  t.run({{g2.values, vec({1})}}, {}, {g2.enqueue});
  auto pending = std::async(std::launch::async, [&] { t.run({{g2.values, vec({2})}}, {}, {g2.enqueue}); });
  wait_until([&] { return waiting_enqueues(t, "g2_q") == 1; }, "the enqueue to wait");
  t.run({g2.close});
  CHECK(t.run({}, {g2.one})[0].scalar_value<float>() == 1);  // room: the pending enqueue goes in
  pending.get();
  CHECK(t.run({}, {g2.one})[0].scalar_value<float>() == 2);
  CHECK(code_of([&] { t.run({}, {g2.one}); }) == error_code::out_of_range);
}

TEST_CASE("queue ops: padding, priority and seeded shuffle queues through sessions", "[queue_ops]") {
  SECTION("a padding queue pads each batch to its longest element") {
    graph g;
    queue_spec spec;
    spec.kind = queue_kind::padding_fifo;
    spec.component_types = {dtype::int32, dtype::string};
    spec.shapes = {partial_shape({unknown_dim}), partial_shape({})};
    graph_queue q(g, spec);
    auto seq = g.placeholder(dtype::int32, partial_shape({unknown_dim}), node_options("seq")).out(0);
    auto word = g.placeholder(dtype::string, partial_shape({}), node_options("word")).out(0);
    const std::string put = q.enqueue({seq, word}).name();
    auto batch = q.dequeue_many(3);
    CHECK(g.at(batch[0]).output_shape(0) == partial_shape({3, unknown_dim}));
    session s(g, one_thread());
    s.run({{seq, tensor::of<std::int32_t>({2}, {1, 2})}, {word, tensor::scalar("two")}}, {}, {put});
    s.run({{seq, tensor::of<std::int32_t>({0}, {})}, {word, tensor::scalar("none")}}, {}, {put});
    s.run({{seq, tensor::of<std::int32_t>({3}, {3, 4, 5})}, {word, tensor::scalar("three")}}, {}, {put});
    auto got = s.run({}, fetch(batch));
    CHECK(got[0].shape() == shape{3, 3});
    CHECK(got[0].to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 2, 0, 0, 0, 0, 3, 4, 5});
    CHECK(got[1].to_vector<std::string>() == std::vector<std::string>{"two", "none", "three"});
  }
  SECTION("a priority queue gives the smallest priority first, ties in arrival order") {
    graph g;
    queue_spec spec;
    spec.kind = queue_kind::priority;
    spec.component_types = {dtype::string};
    spec.shapes = {partial_shape({})};
    graph_queue q(g, spec);
    CHECK(q.element_types() == std::vector<dtype>{dtype::int64, dtype::string});
    auto p = g.placeholder(dtype::int64, partial_shape({unknown_dim}), node_options("p")).out(0);
    auto w = g.placeholder(dtype::string, partial_shape({unknown_dim}), node_options("w")).out(0);
    const std::string put = q.enqueue_many({p, w}).name();
    auto all = q.dequeue_many(4);
    session s(g, one_thread());
    s.run({{p, tensor::of<std::int64_t>({4}, {5, -1, 5, 2})},
           {w, tensor::from_vector(std::vector<std::string>{"e1", "a", "e2", "b"})}},
          {}, {put});
    auto got = s.run({}, fetch(all));
    CHECK(got[0].to_vector<std::int64_t>() == std::vector<std::int64_t>{-1, 2, 5, 5});
    CHECK(got[1].to_vector<std::string>() == std::vector<std::string>{"a", "b", "e1", "e2"});
  }
  SECTION("a random shuffle queue with a seed gives one permutation, the same every time") {
    auto order = [] {
      queue_spec spec = floats(-1, queue_kind::random_shuffle);
      spec.seed = 42;
      spec.min_after_dequeue = 3;
      float_graph f(spec);
      session s(f.g, one_thread());
      std::vector<float> in(20);
      std::iota(in.begin(), in.end(), 0.0f);
      s.run({{f.values, vec(in)}}, {}, {f.enqueue});
      // Open, 3 must stay: 17 come out; closed, the rest.
      std::vector<float> out = s.run({{f.n, count(17)}}, {f.many})[0].to_vector<float>();
      run_options timed;
      timed.timeout = 20ms;
      CHECK(code_of([&] { s.run({}, {f.one}, {}, timed); }) == error_code::deadline_exceeded);
      s.run({f.close});
      for (float v : s.run({{f.n, count(10)}}, {f.up_to})[0].to_vector<float>()) out.push_back(v);
      return out;
    };
    const auto first = order(), second = order();
    CHECK(first == second);
    std::vector<float> sorted = first;
    std::sort(sorted.begin(), sorted.end());
    std::vector<float> all(20);
    std::iota(all.begin(), all.end(), 0.0f);
    CHECK(sorted == all);
    CHECK(first != all);
  }
}

TEST_CASE("queue ops: errors name the node, the queue and what did not match", "[queue_ops]") {
  float_graph f;
  graph& g = f.g;
  auto ints = g.constant(tensor::of<std::int32_t>({2}, {1, 2})).out(0);
  const std::string bad_dtype = f.q.enqueue_many({ints}, node_options("bad_dtype")).name();
  auto matrix = g.constant(tensor::of<float>({1, 2}, {1, 2})).out(0);
  const std::string bad_shape = f.q.enqueue_many({matrix}, node_options("bad_shape")).name();
  auto wrong = g.op("QueueDequeue", {f.q.handle()}, {{"component_types", std::vector<dtype>{dtype::int32}}}, node_options("wrong"));
  session s(g, one_thread());
  std::string message;
  CHECK(code_of([&] { s.run({bad_dtype}); }, &message) == error_code::invalid_argument);
  CHECK(message.find("node 'bad_dtype' (QueueEnqueueMany)") != std::string::npos);
  CHECK(message.find("queue 'q': component 0 is int32, not float32") != std::string::npos);
  CHECK(code_of([&] { s.run({bad_shape}); }, &message) == error_code::invalid_argument);
  CHECK(message.find("component 0 has shape [2], not []") != std::string::npos);
  CHECK(s.run({}, {f.size})[0].scalar_value<std::int32_t>() == 0);  // nothing went in
  // A dequeue that expects other dtypes takes nothing.
  s.run({{f.values, vec({1})}}, {}, {f.enqueue});
  CHECK(code_of([&] { s.run({}, {wrong.out(0)}); }, &message) == error_code::invalid_argument);
  CHECK(message.find("queue 'q' holds elements of (float32), not (int32)") != std::string::npos);
  CHECK(s.run({}, {f.size})[0].scalar_value<std::int32_t>() == 1);
  // Build-time checks: a handle of another shape, an enqueue of nothing, bad options.
  auto not_handle = g.constant(tensor::scalar("q")).out(0);
  require_error([&] { g.op("QueueSize", {not_handle}); }, {"QueueSize", "handle must have rank 1"});
  require_error([&] { g.op("QueueEnqueue", {f.q.handle()}, {{"Tcomponents", std::vector<dtype>{}}}); },
                {"QueueEnqueue", "at least one component"});
  require_error([&] { graph_queue(g, floats(0)); }, {"FIFOQueue", "capacity must be positive or -1"});
  queue_spec two_shapes = floats();
  two_shapes.shapes.push_back(partial_shape({}));
  require_error([&] { graph_queue(g, two_shapes); }, {"2 shapes for 1 component types"});
  queue_spec open_dims = floats();
  open_dims.shapes = {partial_shape({unknown_dim})};
  graph_queue open(g, open_dims, node_options("open"));
  auto rows = g.placeholder(dtype::float32, partial_shape({unknown_dim}), node_options("rows")).out(0);
  const std::string put_rows = open.enqueue({rows}, node_options("put_rows")).name();
  auto two_rows = open.dequeue_many(2, node_options("two_rows"))[0];
  // A random shuffle queue's extra attrs: min_after_dequeue below the capacity.
  queue_spec shuffle = floats(4, queue_kind::random_shuffle);
  shuffle.min_after_dequeue = 4;
  require_error([&] { graph_queue(g, shuffle); }, {"RandomShuffleQueue", "min_after_dequeue 4 must be at least 0 and below the capacity 4"});
  // A FIFO queue whose shape leaves a dim open takes rows of any length, one at a time; it
  // refuses to batch them before it takes any (a padding queue pads them).
  auto one_row = open.dequeue(node_options("one_row"))[0];
  auto open_size = open.size();
  session s3(g, one_thread());
  s3.run({{rows, vec({1, 2})}}, {}, {put_rows});
  s3.run({{rows, vec({3, 4, 5})}}, {}, {put_rows});
  CHECK(code_of([&] { s3.run({}, {two_rows}); }, &message) == error_code::invalid_argument);
  CHECK(message.find("queue 'open' leaves component 0's shape [?] open: a batch needs fully known shapes") != std::string::npos);
  CHECK(s3.run({}, {open_size})[0].scalar_value<std::int32_t>() == 2);
  CHECK(s3.run({}, {one_row})[0].to_vector<float>() == std::vector<float>{1, 2});
  CHECK(s3.run({}, {one_row})[0].to_vector<float>() == std::vector<float>{3, 4, 5});
}
