#include "support/helpers.hpp"

#include <condition_variable>
#include <thread>

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
