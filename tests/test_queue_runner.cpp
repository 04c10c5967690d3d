// Threads that fill queues (runtime/queue_runner.hpp) and mutexes between steps
// (MutexAcquire, MutexRelease): runners that feed a consumer until stopped, close the queue
// when their input runs out, report an error to the training loop and stop everything, and
// unblock on a stop; a mutex that makes read-modify-write steps on two threads lose no
// update, is given back by a step that fails, and whose waiting steps time out. Also under
// TSan (no race, no thread left running).
#include "support/helpers.hpp"

#include <algorithm>
#include <chrono>
#include <future>
#include <set>
#include <thread>

using namespace weft;
using namespace weft::test;

namespace queue_runner_test {

using namespace std::chrono_literals;

session_options runner_threads() {
  session_options o;
  o.inter_op_threads = 2;
  o.intra_op_threads = 1;
  return o;
}

queue_spec int_queue(std::int64_t capacity) {
  queue_spec s;
  s.component_types = {dtype::int64};
  s.shapes = {partial_shape({})};
  s.capacity = capacity;
  return s;
}

// A counter variable: each run of `next` adds one and gives the new value.
struct step_counter {
  output var, init, next;
  explicit step_counter(graph& g) {
    var = g.variable(dtype::int64, partial_shape({}), "count").out(0);
    init = g.op("Assign", {var, g.constant(tensor::scalar(std::int64_t{0})).out(0)}).out(0);
    next = g.op("AssignAdd", {var, g.constant(tensor::scalar(std::int64_t{1})).out(0)}).out(0);
  }
};

error_code error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const error& e) {
    return e.code();
  }
  return error_code::internal;
}

}  // namespace queue_runner_test

using namespace queue_runner_test;

TEST_CASE("queue runner: two threads feed a consumer until it stops them", "[queue_runner]") {
  graph g;
  step_counter c(g);
  graph_queue q(g, int_queue(4), "q");
  const std::string put = q.enqueue({c.next}, "put").name();
  auto take = q.dequeue_many(10, "take")[0];
  const std::string cancel = q.close(true, "cancel").name();
  auto closed = q.is_closed();
  session s(g, runner_threads());
  s.run({}, {c.init});
  CHECK_FALSE(s.run({}, {closed})[0].scalar_value<bool>());
  queue_runner runner(s, {put, put}, {.cancel = endpoint(cancel)});
  coordinator coord;
  runner.start(coord);
  std::vector<std::int64_t> seen;
  for (int i = 0; i < 10; ++i)
    for (std::int64_t v : s.run({}, {take})[0].to_vector<std::int64_t>()) seen.push_back(v);
  coord.request_stop();
  coord.join();  // no error: the blocked enqueues were cancelled by the stop
  // 100 counts taken; each is at least 1 and at most the counter's last value (an enqueue
  // reads the variable when it runs, so two steps may enqueue one value).
  CHECK(seen.size() == 100);
  const std::int64_t last = s.run({}, {c.var})[0].scalar_value<std::int64_t>();
  CHECK(*std::min_element(seen.begin(), seen.end()) >= 1);
  CHECK(*std::max_element(seen.begin(), seen.end()) <= last);
  CHECK(last >= 100);
  // The stop ran the cancel target, which closed the queue.
  CHECK(s.run({}, {closed})[0].scalar_value<bool>());
}

TEST_CASE("queue runner: when its input runs out it closes the queue, and the consumer drains it", "[queue_runner]") {
  graph g;
  graph_queue input(g, int_queue(-1), "input");
  graph_queue output(g, int_queue(3), "output");
  auto values = g.placeholder(dtype::int64, partial_shape({unknown_dim}), "values").out(0);
  const std::string fill = input.enqueue_many({values}, "fill").name();
  const std::string close_input = input.close(false, "close_input").name();
  // The runner's step: one element from the input, times ten, into the output.
  auto x = input.dequeue("read")[0];
  auto ten = g.op("Mul", {x, g.constant(tensor::scalar(std::int64_t{10})).out(0)}).out(0);
  const std::string move = output.enqueue({ten}, "move").name();
  const std::string close_output = output.close(false, "close_output").name();
  auto batch = output.dequeue_up_to(4, "batch")[0];
  session s(g, runner_threads());
  s.run({{values, tensor::of<std::int64_t>({10}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10})}}, {}, {fill});
  s.run({close_input});
  queue_runner runner(s, {move}, {.close = endpoint(close_output)});
  coordinator coord;
  runner.start(coord);
  std::vector<std::int64_t> got;
  for (;;) {
    try {
      for (std::int64_t v : s.run({}, {batch})[0].to_vector<std::int64_t>()) got.push_back(v);
    } catch (const error& e) {
      REQUIRE(e.code() == error_code::out_of_range);
      break;
    }
  }
  coord.request_stop();
  coord.join();
  CHECK(got == std::vector<std::int64_t>{10, 20, 30, 40, 50, 60, 70, 80, 90, 100});
  CHECK(runner.runs() == 10);
}

TEST_CASE("queue runner: an error in a runner thread stops the coordinator and reaches the training loop", "[queue_runner]") {
  graph g;
  graph_queue q(g, int_queue(2), "q");
  auto unfed = g.placeholder(dtype::int64, partial_shape({}), "unfed").out(0);
  const std::string put = q.enqueue({unfed}, "put").name();
  const std::string cancel = q.close(true, "cancel").name();
  auto take = q.dequeue("take")[0];
  session s(g, runner_threads());
  queue_runner runner(s, {put}, {.cancel = endpoint(cancel)});
  coordinator coord;
  runner.start(coord);
  CHECK(coord.wait_for_stop(10s));
  // The stop closed the queue: the consumer does not block, it ends the epoch.
  CHECK(error_of([&] { s.run({}, {take}); }) == error_code::out_of_range);
  require_error([&] { coord.join(); }, {"node 'unfed' (Placeholder)", "must be fed"});
  coord.join();  // the error was taken: a second join has nothing to report
}

TEST_CASE("queue runner: the coordinator stops threads blocked on a full queue and joins them", "[queue_runner]") {
  graph g;
  step_counter c(g);
  graph_queue q(g, int_queue(1), "q");
  const std::string put = q.enqueue({c.next}, "put").name();
  auto size = q.size();
  session s(g, runner_threads());
  s.run({}, {c.init});
  queue_runner runner(s, {put, put, put});
  coordinator coord;
  runner.start(coord);
  wait_until([&] { return waiting_enqueues(s, "q") == 3; }, "the queue to fill and three runs to block");
  coord.request_stop();               // cancels them: no cancel target needed
  coord.join();
  CHECK(s.run({}, {size})[0].scalar_value<std::int32_t>() == 1);  // the blocked enqueues added nothing
  CHECK(runner.runs() == 1);
}

TEST_CASE("mutex: read-modify-write steps on two threads lose no update under MutexAcquire", "[mutex]") {
  graph g;
  step_counter c(g);
  graph_mutex m(g, "m");
  auto grant = m.acquire("acquire");
  // The critical section reads the variable after the grant and writes it before the release.
  auto read = g.op("Identity", {c.var}, {}, node_options("read").after({grant.node})).out(0);
  auto plus = g.op("Add", {read, g.constant(tensor::scalar(std::int64_t{1})).out(0)}).out(0);
  auto write = g.op("Assign", {c.var, plus}, {}, node_options("write"));
  const std::string release = m.release(grant, node_options("release").after({write.id()})).name();
  session s(g, runner_threads());
  s.run({}, {c.init});
  auto work = [&] {
    for (int i = 0; i < 200; ++i) s.run({}, {}, {release});
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  CHECK(s.run({}, {c.var})[0].scalar_value<std::int64_t>() == 400);
}

TEST_CASE("mutex: a step that fails holding it gives it back, a step waiting for it times out", "[mutex]") {
  graph g;
  graph_mutex m(g, "m");
  auto grant = m.acquire("acquire");
  graph_queue q(g, int_queue(-1), "q");
  // Holds the mutex while it waits in a dequeue.
  auto held = g.op("Identity", {q.dequeue(node_options("wait").after({grant.node}))[0]}).out(0);
  const std::string release_after_wait = m.release(grant, node_options("release_after_wait").after({held.node})).name();
  // Fails at run time (an index out of range), after the grant.
  auto index = g.placeholder(dtype::int64, partial_shape({}), "index").out(0);
  auto failing = g.op("GatherV2", {g.constant(tensor::of<float>({3}, {1, 2, 3})).out(0), index,
                                   g.constant(tensor::scalar(std::int32_t{0})).out(0)},
                      {}, node_options("failing").after({grant.node})).out(0);
  const std::string release_after_fail = m.release(grant, node_options("release_after_fail").after({failing.node})).name();
  const std::string plain = m.release(grant, "plain").name();
  session s(g, runner_threads());
  // A step that fails inside the critical section gives the mutex back.
  require_error([&] { s.run({{index, tensor::scalar(std::int64_t{7})}}, {}, {release_after_fail}); },
                {"node 'failing' (GatherV2)", "indices[0] = 7 is not in [0, 3)"});
  s.run({plain});  // acquires and releases at once: the mutex was free
  // A step holding it while blocked makes another wait; the waiter times out.
  cancellation_manager cancel;
  run_options holder;
  holder.cancellation = &cancel;
  auto blocked = std::async(std::launch::async, [&] { return error_of([&] { s.run({}, {}, {release_after_wait}, holder); }); });
  wait_until([&] { return waiting_dequeues(s, "q") == 1; }, "the holder to wait in its dequeue");
  run_options timed;
  timed.timeout = 30ms;
  CHECK(error_of([&] { s.run({}, {}, {plain}, timed); }) == error_code::deadline_exceeded);
  cancel.cancel();  // the holder is cancelled and gives the mutex back
  CHECK(blocked.get() == error_code::cancelled);
  s.run({}, {}, {plain}, timed);
}

TEST_CASE("mutex: a release must name the grant its own step holds", "[mutex]") {
  graph g;
  graph_mutex m(g, "m");
  auto grant = m.acquire("acquire");
  auto wrong = g.op("Add", {grant, g.constant(tensor::scalar(std::int64_t{1000})).out(0)}).out(0);
  const std::string bad = m.release(wrong, "bad").name();
  const std::string plain = m.release(m.acquire("acquire2"), "plain").name();
  session s(g, runner_threads());
  require_error([&] { s.run({bad}); }, {"node 'bad' (MutexRelease)", "mutex 'm' is not held by grant"});
  s.run({plain});  // the failed step gave its grant back
}
