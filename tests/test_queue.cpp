// Queues (runtime/queue.hpp) against TensorFlow's documented behaviour: order, waiting for
// room and for elements, close and the out_of_range that ends an epoch, cancellation of a
// waiting attempt, dtype and shape checks, shuffling with a seed, priorities, and a producer
// and a consumer on two threads.
#include "support/helpers.hpp"

#include <algorithm>
#include <atomic>
#include <future>
#include <numeric>
#include <optional>
#include <thread>

using namespace weft;

namespace {
queue_options float_queue(std::int64_t capacity = -1) {
  queue_options o;
  o.component_types = {dtype::float32};
  o.shapes = {partial_shape{}};
  o.capacity = capacity;
  return o;
}
queue_tuple scalar_element(float v) { return {tensor::scalar(v)}; }

// What a dequeue's done was told.
struct dequeued {
  bool called = false;
  std::vector<float> values;
  std::optional<error_code> code;
  std::string message;
};
queue::dequeue_done record(dequeued& t) {
  return [&t](std::exception_ptr e, std::vector<queue_tuple> elements) {
    t.called = true;
    for (auto& el : elements) t.values.push_back(el[0].scalar_value<float>());
    if (e) try {
        std::rethrow_exception(e);
      } catch (const error& err) {
        t.code = err.code();
        t.message = err.what();
      }
  };
}
struct enqueued {
  bool called = false;
  std::optional<error_code> code;
};
queue::enqueue_done record(enqueued& p) {
  return [&p](std::exception_ptr e) {
    p.called = true;
    if (e) try {
        std::rethrow_exception(e);
      } catch (const error& err) {
        p.code = err.code();
      }
  };
}
std::vector<queue_tuple> scalar_elements(std::initializer_list<float> vs) {
  std::vector<queue_tuple> out;
  for (float v : vs) out.push_back(scalar_element(v));
  return out;
}
}  // namespace

TEST_CASE("queue: first in, first out, waiting for elements and for room") {
  queue q("q", float_queue(2));
  enqueued p1;
  q.enqueue(scalar_elements({1, 2, 3}), nullptr, record(p1));  // room for two: it waits with the third
  CHECK(!p1.called);
  CHECK(q.size() == 2);
  CHECK(q.waiting_enqueues() == 1);
  CHECK(q.waiting_dequeues() == 0);
  dequeued a;
  q.dequeue(1, false, nullptr, record(a));  // takes 1, which lets 3 in and ends the enqueue
  CHECK(a.values == std::vector<float>{1});
  CHECK(p1.called);
  CHECK(!p1.code);
  CHECK(q.size() == 2);
  CHECK(q.waiting_enqueues() == 0);
  dequeued b, c;
  q.dequeue(3, false, nullptr, record(b));  // two there: it waits for a third
  CHECK(!b.called);
  q.dequeue(1, false, nullptr, record(c));  // behind it
  CHECK(q.waiting_dequeues() == 2);
  enqueued p2;
  q.enqueue(scalar_elements({4, 5}), nullptr, record(p2));
  CHECK(b.values == std::vector<float>{2, 3, 4});
  CHECK(c.values == std::vector<float>{5});
  CHECK(p2.called);
  CHECK(q.size() == 0);
  CHECK(q.waiting_dequeues() == 0);
  dequeued none;
  q.dequeue(0, false, nullptr, record(none));  // nothing asked: done at once
  CHECK(none.called);
  CHECK(none.values.empty());
}

TEST_CASE("queue: close ends the input - out_of_range, up_to takes what is left, enqueues fail") {
  queue q("epoch", float_queue());
  enqueued p;
  q.enqueue(scalar_elements({1, 2}), nullptr, record(p));
  dequeued waiting;
  q.dequeue(3, false, nullptr, record(waiting));  // takes both and waits for a third
  CHECK(!waiting.called);
  CHECK(q.size() == 0);
  q.close();
  // The queue cannot give three: out_of_range, and the two go back in their order.
  REQUIRE(waiting.called);
  CHECK(waiting.code == error_code::out_of_range);
  CHECK_THAT(waiting.message, Catch::Contains("queue 'epoch' is closed and has 2 elements, fewer than the 3 asked for"));
  CHECK(waiting.values.empty());
  CHECK(q.size() == 2);
  enqueued late;
  q.enqueue(scalar_elements({9}), nullptr, record(late));
  CHECK(late.code == error_code::cancelled);
  dequeued some;
  q.dequeue(3, true, nullptr, record(some));  // up_to: what is left
  CHECK(some.values == std::vector<float>{1, 2});
  CHECK(!some.code);
  dequeued end;
  q.dequeue(1, false, nullptr, record(end));
  CHECK(end.code == error_code::out_of_range);
  dequeued end_up_to;
  q.dequeue(2, true, nullptr, record(end_up_to));  // up_to with nothing left ends too
  CHECK(end_up_to.code == error_code::out_of_range);
  CHECK(q.is_closed());
}

TEST_CASE("queue: close lets a waiting enqueue finish, or cancels it") {
  for (bool cancel_pending : {false, true}) {
    INFO("cancel_pending_enqueues " << cancel_pending);
    queue q("q", float_queue(1));
    enqueued first, second;
    q.enqueue(scalar_elements({1}), nullptr, record(first));
    q.enqueue(scalar_elements({2}), nullptr, record(second));  // waits for room
    CHECK(first.called);
    CHECK(!second.called);
    q.close(cancel_pending);
    dequeued a;
    q.dequeue(2, true, nullptr, record(a));
    if (cancel_pending) {
      CHECK(second.code == error_code::cancelled);
      CHECK(a.values == std::vector<float>{1});
    } else {
      CHECK(second.called);
      CHECK(!second.code);
      CHECK(a.values == std::vector<float>{1, 2});
    }
  }
}

TEST_CASE("queue: a waiting attempt whose step is cancelled fails, and the queue stays as it was") {
  queue q("q", float_queue(1));
  enqueued p;
  q.enqueue(scalar_elements({1}), nullptr, record(p));
  cancellation_manager step;
  enqueued blocked;
  q.enqueue(scalar_elements({2}), &step, record(blocked));
  dequeued a;
  {
    cancellation_manager other;
    q.dequeue(3, false, &other, record(a));  // takes 1, then 2 comes in, and it waits for a third
    CHECK(!a.called);
    CHECK(blocked.called);  // room appeared: the enqueue finished before the cancellation
    step.cancel();
    CHECK(!blocked.code);
    other.cancel();
  }
  REQUIRE(a.called);
  CHECK(a.code == error_code::cancelled);
  CHECK(q.waiting_dequeues() == 0);  // a cancelled attempt leaves the line
  CHECK(q.size() == 2);  // both went back, in order
  dequeued b;
  q.dequeue(2, false, nullptr, record(b));
  CHECK(b.values == std::vector<float>{1, 2});
  // An attempt of an already cancelled step fails at once.
  cancellation_manager gone;
  gone.cancel();
  dequeued c;
  q.dequeue(1, false, &gone, record(c));
  CHECK(c.code == error_code::cancelled);
  enqueued d;
  q.enqueue(scalar_elements({5}), &gone, record(d));
  CHECK(d.code == error_code::cancelled);
  CHECK(q.size() == 0);
}

TEST_CASE("queue: elements of the wrong dtype, shape or arity, and bad options, are errors naming the queue") {
  queue_options o;
  o.component_types = {dtype::float32, dtype::int32};
  o.shapes = {partial_shape{2}, partial_shape{}};
  queue q("pairs", o);
  enqueued p;
  test::require_error([&] { q.enqueue({{tensor::of<float>({2}, {1, 2})}}, nullptr, record(p)); },
                      {"queue 'pairs'", "an element of 1 components for its 2"});
  test::require_error([&] { q.enqueue({{tensor::of<float>({2}, {1, 2}), tensor::scalar(1.0f)}}, nullptr, record(p)); },
                      {"queue 'pairs'", "component 1 is float32, not int32"});
  test::require_error([&] { q.enqueue({{tensor::of<float>({3}, {1, 2, 3}), tensor::scalar(std::int32_t{1})}}, nullptr, record(p)); },
                      {"queue 'pairs'", "component 0 has shape [3]"});
  CHECK(!p.called);
  CHECK(q.size() == 0);
  test::require_error([&] { queue bad("none", queue_options{}); }, {"queue 'none'", "at least one component"});
  test::require_error([&] { queue bad("zero", float_queue(0)); }, {"queue 'zero'", "capacity must be positive or -1"});
  queue_options shuffle = float_queue(4);
  shuffle.kind = queue_options::order::random_shuffle;
  shuffle.min_after_dequeue = 4;
  test::require_error([&] { queue bad("s", shuffle); }, {"queue 's'", "min_after_dequeue 4"});
  queue_options priority = float_queue();
  priority.kind = queue_options::order::priority;
  test::require_error([&] { queue bad("p", priority); }, {"queue 'p'", "first component is an int64 scalar"});
  test::require_error([&] { q.dequeue(-1, false, nullptr, [](std::exception_ptr, std::vector<queue_tuple>) {}); },
                      {"cannot dequeue -1 elements"});
}

TEST_CASE("queue: random shuffle - a seeded permutation, min_after_dequeue kept while open") {
  auto drain = [](std::uint64_t seed) {
    queue_options o = float_queue();
    o.kind = queue_options::order::random_shuffle;
    o.seed = seed;
    queue q("shuffle", o);
    std::vector<queue_tuple> in;
    for (int i = 0; i < 1000; ++i) in.push_back(scalar_element(static_cast<float>(i)));
    enqueued p;
    q.enqueue(std::move(in), nullptr, record(p));
    dequeued t;
    q.dequeue(1000, false, nullptr, record(t));
    return t.values;
  };
  const auto a = drain(7), b = drain(7), c = drain(8);
  CHECK(a == b);  // the seed decides
  CHECK(a != c);
  std::vector<float> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<float> all(1000);
  std::iota(all.begin(), all.end(), 0.0f);
  CHECK(sorted == all);  // a permutation
  // Well mixed: the mean distance an element moves is near a third of the length (333 for
  // a uniform permutation), and about one element in 1000 stays put.
  double moved = 0;
  int fixed = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    moved += std::abs(a[i] - static_cast<float>(i));
    fixed += a[i] == static_cast<float>(i);
  }
  CHECK(moved / 1000 > 280);
  CHECK(moved / 1000 < 390);
  CHECK(fixed < 8);
  // min_after_dequeue 3: with 4 in, one comes out while open; closing frees the rest.
  queue_options o = float_queue();
  o.kind = queue_options::order::random_shuffle;
  o.min_after_dequeue = 3;
  queue q("keep3", o);
  enqueued p;
  q.enqueue(scalar_elements({1, 2, 3, 4}), nullptr, record(p));
  dequeued one, rest;
  q.dequeue(1, false, nullptr, record(one));
  CHECK(one.values.size() == 1);
  q.dequeue(3, false, nullptr, record(rest));
  CHECK(!rest.called);
  q.close();
  CHECK(rest.values.size() == 3);
}

TEST_CASE("queue: priority - the smallest first, ties in the order they came") {
  queue_options o;
  o.kind = queue_options::order::priority;
  o.component_types = {dtype::int64, dtype::float32};
  queue q("priority", o);
  std::vector<queue_tuple> in;
  const std::vector<std::pair<std::int64_t, float>> items{{5, 50}, {1, 10}, {3, 30}, {1, 11}, {-2, -20}};
  for (auto [p, v] : items) in.push_back({tensor::scalar(p), tensor::scalar(v)});
  q.enqueue(std::move(in), nullptr, [](std::exception_ptr) {});
  std::vector<float> got;
  q.dequeue(5, false, nullptr, [&](std::exception_ptr, std::vector<queue_tuple> e) {
    for (auto& t : e) got.push_back(t[1].scalar_value<float>());
  });
  CHECK(got == std::vector<float>{-20, 10, 11, 30, 50});
  // Taken by a dequeue that fails, they come back in the same order.
  q.enqueue({{tensor::scalar(std::int64_t{4}), tensor::scalar(40.0f)}, {tensor::scalar(std::int64_t{4}), tensor::scalar(41.0f)}}, nullptr,
            [](std::exception_ptr) {});
  cancellation_manager step;
  q.dequeue(3, false, &step, [](std::exception_ptr, std::vector<queue_tuple>) {});
  step.cancel();
  got.clear();
  q.dequeue(2, false, nullptr, [&](std::exception_ptr, std::vector<queue_tuple> e) {
    for (auto& t : e) got.push_back(t[1].scalar_value<float>());
  });
  CHECK(got == std::vector<float>{40, 41});
}

TEST_CASE("queue: a producer and a consumer on two threads, a small capacity between them") {
  queue q("pipe", float_queue(4));
  constexpr int n = 20000;
  std::thread producer([&] {
    for (int i = 0; i < n; ++i) {
      std::promise<void> in;
      q.enqueue(scalar_elements({static_cast<float>(i)}), nullptr, [&](std::exception_ptr) { in.set_value(); });
      in.get_future().wait();
    }
    q.close();
  });
  std::vector<float> got;
  for (;;) {
    std::promise<std::pair<bool, std::vector<float>>> out;
    q.dequeue(3, true, nullptr, [&](std::exception_ptr e, std::vector<queue_tuple> el) {
      std::vector<float> v;
      for (auto& t : el) v.push_back(t[0].scalar_value<float>());
      out.set_value({e != nullptr, std::move(v)});
    });
    auto [ended, v] = out.get_future().get();
    if (ended) break;
    got.insert(got.end(), v.begin(), v.end());
  }
  producer.join();
  std::vector<float> want(n);
  std::iota(want.begin(), want.end(), 0.0f);
  CHECK(got == want);
}

TEST_CASE("queue: enqueue_many splits a batch into elements, dequeue_many stacks them, padded for a padding queue") {
  // Split: rows of each component, the same count for all.
  const tensor xs = tensor::of<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  const tensor ys = tensor::of<std::int32_t>({3}, {7, 8, 9});
  const auto el = unstack_elements({xs, ys}, "q");
  REQUIRE(el.size() == 3);
  CHECK(el[1][0].shape() == shape{2});
  CHECK(el[1][0].to_vector<float>() == std::vector<float>{3, 4});
  CHECK(el[2][1].shape() == shape{});
  CHECK(el[2][1].scalar_value<std::int32_t>() == 9);
  test::require_error([&] { unstack_elements({xs, tensor::of<std::int32_t>({2}, {1, 2})}, "q"); },
                      {"queue 'q'", "have 3 and 2 rows (component 1, shape [2])"});
  test::require_error([&] { unstack_elements({tensor::scalar(1.0f)}, "q"); }, {"component 0 needs a first dimension"});
  // Stack: back to the batch.
  const auto back = stack_elements(el, {dtype::float32, dtype::int32}, {}, false, "q");
  CHECK(back[0].shape() == shape{3, 2});
  CHECK(back[0].to_vector<float>() == xs.to_vector<float>());
  CHECK(back[1].to_vector<std::int32_t>() == std::vector<std::int32_t>{7, 8, 9});
  // Shapes that differ: an error, unless padded with zeros to the largest in each dimension.
  std::vector<queue_tuple> ragged{{tensor::of<float>({1, 2}, {1, 2})}, {tensor::of<float>({2, 1}, {3, 4})}, {tensor::of<float>({0, 3}, {})}};
  test::require_error([&] { stack_elements(ragged, {dtype::float32}, {}, false, "q"); },
                      {"cannot batch component 0 of shapes [1,2] and [2,1]", "a padding queue pads them"});
  const auto padded = stack_elements(ragged, {dtype::float32}, {}, true, "q");
  CHECK(padded[0].shape() == shape{3, 2, 3});
  // By hand: [[1,2,0],[0,0,0]], [[3,0,0],[4,0,0]], zeros.
  CHECK(padded[0].to_vector<float>() == std::vector<float>{1, 2, 0, 0, 0, 0, 3, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0});
  std::vector<queue_tuple> ranks{{tensor::of<float>({1}, {1})}, {tensor::of<float>({1, 1}, {2})}};
  test::require_error([&] { stack_elements(ranks, {dtype::float32}, {}, true, "q"); }, {"padding needs one rank"});
  // No elements: the queue's shapes, unknown dimensions as 0.
  const auto empty = stack_elements({}, {dtype::float32, dtype::int64}, {partial_shape{2, 3}, partial_shape{-1}}, true, "q");
  CHECK(empty[0].shape() == shape{0, 2, 3});
  CHECK(empty[1].shape() == shape{0, 0});
  CHECK(empty[1].dtype() == dtype::int64);
}
