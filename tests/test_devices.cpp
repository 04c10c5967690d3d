// Devices (runtime/device.hpp, framework/device_name.hpp): names parsed and matched, several CPU
// devices in a session, each with its own threads and allocator, requests for devices a
// session does not have, and kernels run through the device interface alone.
#include "support/helpers.hpp"

#include <atomic>
#include <cstring>
#include <map>
#include <set>

using namespace weft;

TEST_CASE("device names parse, print and match as TensorFlow's do") {
  const auto full = device_name::parse("/job:localhost/replica:0/task:0/device:CPU:1");
  CHECK(full.full());
  CHECK(full.job == "localhost");
  CHECK(full.replica == 0);
  CHECK(full.task == 0);
  CHECK(full.type == "CPU");
  CHECK(full.id == 1);
  CHECK(full.str() == "/job:localhost/replica:0/task:0/device:CPU:1");
  CHECK(device_name::local("CPU", 1).str() == full.str());
  // Partial specs: every field they set must agree.
  for (const char* spec : {"", "/device:CPU:1", "CPU:1", "cpu:1", "/cpu:1", "/device:CPU:*", "/CPU", "/task:0",
                           "/job:localhost/device:CPU:1", "/replica:0/task:0"}) {
    INFO(spec);
    CHECK(device_name::parse(spec).matches(full));
    CHECK_FALSE(device_name::parse(spec).full());
  }
  for (const char* spec : {"/device:CPU:0", "/gpu:1", "/device:GPU:*", "/task:1", "/job:worker", "/replica:1/device:CPU:1"}) {
    INFO(spec);
    CHECK_FALSE(device_name::parse(spec).matches(full));
  }
  CHECK(device_name::parse("/gpu:3").str() == "/device:GPU:3");
  CHECK(device_name::parse("/task:2/device:cpu").str() == "/task:2/device:CPU:*");
  // Malformed specs name themselves and what is wrong.
  test::require_error([] { device_name::parse("/device:CPU:x"); }, {"device spec '/device:CPU:x'", "'x' is not a number"});
  test::require_error([] { device_name::parse("/task:-1"); }, {"'-1' is not a number"});
  test::require_error([] { device_name::parse("/device:"); }, {"a device without a type"});
  test::require_error([] { device_name::parse("/job:"); }, {"a job without a name"});
  test::require_error([] { device_name::parse("/device:CPU:0//"); }, {"an empty piece"});
  test::require_error([] { device_name::parse("/device:C-PU:0"); }, {"'C-PU' is not a device type"});
}

TEST_CASE("a session's CPU devices run the nodes that ask for them, each with its own threads and allocator") {
  constexpr std::int64_t n = std::int64_t(1) << 20;  // 4 MiB of float32
  graph g;
  auto& x = g.placeholder(dtype::float32, {n}, "x");
  auto& a = g.op("Neg", {x}, {}, node_options("a").on("/device:CPU:1"));
  auto& b = g.op("Neg", {a}, {}, node_options("b"));                 // no request: CPU:0
  auto& c = g.op("Square", {b}, {}, node_options("c").on("/cpu:0"));  // TensorFlow's short form
  session_options o;
  o.inter_op_threads = 0;
  o.intra_op_threads = 2;
  o.cpu_devices = 2;
  session s(g, o);
  REQUIRE(s.devices().size() == 2);
  const device& cpu0 = *s.devices()[0];
  const device& cpu1 = *s.devices()[1];
  CHECK(&s.device() == &cpu0);
  CHECK(cpu0.name() == "/job:localhost/replica:0/task:0/device:CPU:0");
  CHECK(cpu1.name() == "/job:localhost/replica:0/task:0/device:CPU:1");
  CHECK(cpu1.type() == "CPU");
  // Each its own pool of intra-op threads and its own allocator.
  CHECK(cpu0.num_threads() == 2);
  CHECK(cpu1.num_threads() == 2);
  CHECK(&cpu0.cpu() != &cpu1.cpu());
  CHECK(&cpu0.cpu().eigen_device() != &cpu1.cpu().eigen_device());
  CHECK(&cpu0.get_allocator() == &cpu_allocator::global());
  CHECK(&cpu1.get_allocator() == &cpu_allocator::of_device(1));
  CHECK(&cpu1.get_allocator() != &cpu0.get_allocator());

  std::vector<float> xs(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 97) - 48.0f;
  const tensor xt = tensor::from_vector(xs, shape{n});
  const std::size_t cpu1_before = cpu1.bytes_in_use();
  cpu1.reset_peak();
  run_metadata meta;
  auto out = s.run({{x, xt}}, {b, c}, {}, run_options{true}, &meta);
  // Values, against the input: b = -(-x), c = x^2.
  const auto bv = out[0].to_vector<float>(), cv = out[1].to_vector<float>();
  bool right = true;
  for (std::size_t i = 0; i < xs.size(); ++i) right = right && bv[i] == xs[i] && cv[i] == xs[i] * xs[i];
  CHECK(right);
  // Where each node ran.
  std::map<std::string, std::string> ran_on;
  for (const auto& st : meta.stats.nodes) ran_on[st.node] = st.device;
  CHECK(ran_on.at("a") == cpu1.name());
  CHECK(ran_on.at("b") == cpu0.name());
  CHECK(ran_on.at("c") == cpu0.name());
  // a's 4 MiB output came from CPU:1's allocator, and went back to it after the step.
  CHECK(cpu1.peak_bytes_in_use() >= cpu1_before + static_cast<std::size_t>(n) * sizeof(float));
  CHECK(cpu1.bytes_in_use() == cpu1_before);
  // b's and c's outputs (the fetched tensors) are CPU:0's memory.
  CHECK(out[0].buffer_allocator() == &cpu_allocator::global());
}

TEST_CASE("a node that asks for a device the session does not have is an error naming it") {
  graph g;
  auto& x = g.placeholder(dtype::float32, {2}, "x");
  auto& far = g.op("Neg", {x}, {}, node_options("far").on("/device:CPU:2"));
  auto& gpu = g.op("Neg", {x}, {}, node_options("gpu").on("/device:GPU:0"));
  auto& typo = g.op("Neg", {x}, {}, node_options("typo").on("/device:CPU:one"));
  auto& near = g.op("Neg", {x}, {}, node_options("near").on("/device:CPU:1"));
  session_options o = test::one_thread();
  o.cpu_devices = 2;
  session s(g, o);
  const feed_list feed{{x, tensor::of<float>({2}, {1, -2})}};
  test::require_error([&] { s.run(feed, {far}); },
                      {"node 'far' (Neg) requests device '/device:CPU:2', which matches none of the devices (CPU:0, CPU:1)"});
  test::require_error([&] { s.run(feed, {gpu}); }, {"node 'gpu' (Neg) requests device '/device:GPU:0'"});
  test::require_error([&] { s.run(feed, {typo}); }, {"node 'typo' (Neg)", "'one' is not a number"});
  // The session still runs what it can place.
  CHECK(s.run(feed, {near})[0].to_vector<float>() == std::vector<float>{-1, 2});
  // One CPU device (the default): CPU:1 does not exist.
  session one(g, test::one_thread());
  test::require_error([&] { one.run(feed, {near}); }, {"node 'near' (Neg) requests device '/device:CPU:1'"});
  session_options none = test::one_thread();
  none.cpu_devices = 0;
  test::require_error([&] { session bad(g, none); }, {"cpu_devices must be at least 1, got 0"});
}

TEST_CASE("a CPU device copies tensors to and from host memory") {
  const cpu_device d(1, 3);
  CHECK(d.name() == "/job:localhost/replica:0/task:0/device:CPU:3");
  const tensor host = tensor::of<double>({2, 2}, {1.5, -2, 0, 4});
  const std::size_t before = d.bytes_in_use();
  {
    const tensor on_device = d.copy_from_host(host);
    CHECK(on_device.buffer_allocator() == &cpu_allocator::of_device(3));
    CHECK(on_device.raw_data() != host.raw_data());
    // The data alone (the tensor's header is not in the device's memory).
    CHECK(d.bytes_in_use() >= before + 4 * sizeof(double));
    CHECK(d.bytes_in_use() <= before + 4 * sizeof(double) + 128);
    const tensor back = d.copy_to_host(on_device);
    CHECK(back.buffer_allocator() == &cpu_allocator::global());
    CHECK(back.shape() == shape{2, 2});
    CHECK(back.to_vector<double>() == std::vector<double>{1.5, -2, 0, 4});
  }
  CHECK(d.bytes_in_use() == before);
}

namespace {

// Host memory from the global allocator, counted: a device written outside the library.
class counting_allocator final : public allocator {
 public:
  std::string name() const override { return "counting"; }
  void* allocate(std::size_t bytes) override {
    void* p = cpu_allocator::global().allocate(bytes);
    in_use += bytes;
    peak = std::max<std::size_t>(peak, in_use);
    ++allocations;
    return p;
  }
  void deallocate(void* p, std::size_t bytes) noexcept override {
    cpu_allocator::global().deallocate(p, bytes);
    in_use -= bytes;
  }
  std::atomic<std::size_t> in_use{0}, peak{0};
  std::atomic<int> allocations{0};
};

class test_device final : public device {
 public:
  explicit test_device(int threads) : parsed_(device_name::local("CPU", 7)), name_(parsed_.str()), context_(threads) {}
  const std::string& name() const noexcept override { return name_; }
  const device_name& parsed_name() const noexcept override { return parsed_; }
  std::string type() const override { return "CPU"; }
  allocator& get_allocator() const noexcept override { return memory; }
  std::size_t bytes_in_use() const noexcept override { return memory.in_use; }
  std::size_t peak_bytes_in_use() const noexcept override { return memory.peak; }
  void reset_peak() const noexcept override { memory.peak = memory.in_use.load(); }
  const cpu_context& cpu() const noexcept override { return context_; }
  tensor copy_from_host(const tensor& host) const override { return host.copy(memory); }
  tensor copy_to_host(const tensor& t) const override { return t.copy(cpu_allocator::global()); }

  mutable counting_allocator memory;

 private:
  device_name parsed_;
  std::string name_;
  cpu_context context_;
};

}  // namespace

TEST_CASE("a library kernel runs on a device it knows only through the device interface") {
  constexpr std::int64_t n = 96;  // big enough for the MatMul kernel to use both threads
  graph g;
  auto& a = g.placeholder(dtype::float32, {n, n}, "a");
  auto& b = g.placeholder(dtype::float32, {n, n}, "b");
  const node& mm = g.op("MatMul", {a, b}, {}, "mm");
  std::vector<float> av(static_cast<std::size_t>(n * n)), bv(av.size());
  for (std::size_t i = 0; i < av.size(); ++i) {
    av[i] = static_cast<float>(static_cast<int>(i % 13) - 6) / 4;
    bv[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 2;
  }
  test_device dev(2);
  const auto kernel = kernel_registry::global().create(mm, dev.type());
  std::vector<entry> in(2), out(1);
  in[0].value = tensor::from_vector(av, shape{n, n});
  in[1].value = dev.copy_from_host(tensor::from_vector(bv, shape{n, n}));
  resource_manager resources;
  cancellation_manager cancellation;
  const int before = dev.memory.allocations;
  {
    kernel_context ctx(mm, in, out, dev, resources, cancellation, 1);
    CHECK(&ctx.device() == &dev);
    CHECK(&ctx.cpu() == &dev.cpu());
    CHECK(ctx.device().num_threads() == 2);
    kernel->compute(ctx);
  }
  // The product, against a naive loop; its buffer came from the device's allocator.
  const tensor& c = out[0].value;
  REQUIRE(c.shape() == shape{n, n});
  CHECK(c.buffer_allocator() == &dev.memory);
  CHECK(dev.memory.allocations > before);
  const auto cv = c.to_vector<float>();
  double worst = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (std::int64_t k = 0; k < n; ++k)
        want += double(av[static_cast<std::size_t>(i * n + k)]) * double(bv[static_cast<std::size_t>(k * n + j)]);
      worst = std::max(worst, std::abs(want - double(cv[static_cast<std::size_t>(i * n + j)])));
    }
  CHECK(worst < 1e-3);

  // An input in the device's memory that nothing else holds becomes the output; one in
  // other memory is copied into the device's.
  {
    std::vector<entry> ins(2), outs(1);
    ins[0].value = dev.copy_from_host(tensor::from_vector(av, shape{n, n}));
    ins[1].value = tensor::from_vector(bv, shape{n, n});
    const void* own = ins[0].value.raw_data();
    const void* other = ins[1].value.raw_data();
    kernel_context ctx(mm, ins, outs, dev, resources, cancellation, 2);
    CHECK(ctx.forward_input_or_copy(0, 0).raw_data() == own);
    CHECK(ctx.forward_input_or_copy(1, 0).raw_data() != other);
    CHECK(outs[0].value.buffer_allocator() == &dev.memory);
    CHECK(outs[0].value.to_vector<float>() == bv);
  }
  // Under a memory limit, a buffer of the device's own allocator is still the device's.
  {
    const cpu_device limited(1, 5, std::size_t(1) << 24);
    std::vector<entry> ins(2), outs(1);
    ins[0].value = tensor(dtype::float32, shape{n, n}, cpu_allocator::of_device(5));
    ins[1].value = tensor(dtype::float32, shape{n, n}, cpu_allocator::of_device(4));
    const void* own = ins[0].value.raw_data();
    const void* other = ins[1].value.raw_data();
    kernel_context ctx(mm, ins, outs, limited, resources, cancellation, 3);
    CHECK(ctx.forward_input_or_copy(0, 0).raw_data() == own);
    CHECK(ctx.forward_input_or_copy(1, 0).raw_data() != other);
    CHECK(outs[0].value.buffer_allocator() == &limited.get_allocator());
  }
  in.clear();
  out.clear();
  CHECK(dev.bytes_in_use() == 0);
}

namespace devices_xpu {

// A device of its own memory, as a GPU is, written outside the library: its buffers come
// from an allocator that says memory_space::device (host bytes underneath, so that its
// test kernel can read them), and only its copies move tensors in and out.
class xpu_memory final : public allocator {
 public:
  std::string name() const override { return "xpu"; }
  void* allocate(std::size_t bytes) override { return cpu_allocator::global().allocate(bytes); }
  void deallocate(void* p, std::size_t bytes) noexcept override { cpu_allocator::global().deallocate(p, bytes); }
  weft::memory_space space() const noexcept override { return weft::memory_space::device; }
};

std::atomic<int> copies_in{0}, copies_out{0};

class xpu_device final : public device {
 public:
  xpu_device(int index, int threads) : parsed_(device_name::local("XPU", index)), name_(parsed_.str()), context_(threads) {}
  const std::string& name() const noexcept override { return name_; }
  const device_name& parsed_name() const noexcept override { return parsed_; }
  std::string type() const override { return "XPU"; }
  allocator& get_allocator() const noexcept override { return memory_; }
  std::size_t bytes_in_use() const noexcept override { return 0; }
  std::size_t peak_bytes_in_use() const noexcept override { return 0; }
  void reset_peak() const noexcept override {}
  const cpu_context& cpu() const noexcept override { return context_; }
  tensor copy_from_host(const tensor& host) const override {
    if (host.memory_space() != memory_space::host) fail(error_code::internal, "copy_from_host of a device tensor");
    tensor t(host.dtype(), host.shape(), memory_);
    std::memcpy(t.raw_data(), host.raw_data(), host.bytes());
    ++copies_in;
    return t;
  }
  tensor copy_to_host(const tensor& t) const override {
    if (t.memory_space() != memory_space::device) fail(error_code::internal, "copy_to_host of a host tensor");
    tensor h(t.dtype(), t.shape());
    std::memcpy(h.raw_data(), t.raw_data(), t.bytes());
    ++copies_out;
    return h;
  }
  std::optional<speed_figures> speed() const override { return speed_figures{1e12, 1e12, 1e-5}; }

 private:
  mutable xpu_memory memory_;
  device_name parsed_;
  std::string name_;
  cpu_context context_;
};

// Neg on the XPU: fails unless its input is in the XPU's memory.
struct xpu_neg final : op_kernel {
  explicit xpu_neg(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& in = ctx.input(0);
    if (in.memory_space() != memory_space::device) fail(error_code::internal, "XPU Neg: its input is in host memory");
    tensor& out = ctx.allocate_output(0, in.shape());
    for (std::int64_t i = 0; i < in.num_elements(); ++i) out.data<float>()[i] = -in.data<float>()[i];
  }
};

// _FusedMatMulBiasAdd on the XPU, float32 only: relu(a b + bias) by naive loops, no
// transposes (the session's fold asks for the kernel of every device type it has).
struct xpu_fused_matmul_bias_add final : op_kernel {
  explicit xpu_fused_matmul_bias_add(const node& n) : relu_(n.attr<bool>("relu")) {
    if (n.attr<bool>("transpose_a") || n.attr<bool>("transpose_b")) fail(error_code::unimplemented, "XPU: transposes");
  }
  void compute(kernel_context& ctx) const override {
    const tensor &a = ctx.input(0), &b = ctx.input(1), &bias = ctx.input(2);
    const std::int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
    tensor& out = ctx.allocate_output(0, shape{m, n});
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        float v = bias.data<float>()[j];
        for (std::int64_t l = 0; l < k; ++l) v += a.data<float>()[i * k + l] * b.data<float>()[l * n + j];
        out.data<float>()[i * n + j] = relu_ && v < 0 ? 0.0f : v;
      }
  }
  bool relu_;
};

// Cast on the XPU from int32, to float32 only: the nodes of other DstT it refuses when they
// are placed (kernel_refusal), which its constructor would refuse when built.
struct xpu_cast final : op_kernel {
  static std::string refuses(const node& n) {
    return n.attr<dtype>("DstT") == dtype::float32 ? std::string() : "it converts to float32 only";
  }
  explicit xpu_cast(const node& n) {
    if (const std::string why = refuses(n); !why.empty()) fail(error_code::unimplemented, "XPU Cast: ", why);
  }
  void compute(kernel_context& ctx) const override {
    const tensor& in = ctx.input(0);  // small int32 tensors stay in host memory, which the XPU reads
    tensor& out = ctx.allocate_output(0, in.shape());
    for (std::int64_t i = 0; i < in.num_elements(); ++i) out.data<float>()[i] = static_cast<float>(in.data<std::int32_t>()[i]);
  }
};

void register_xpu() {
  static const bool once = [] {
    kernel_registry::global().add("Neg", "XPU", {"T", dtype::float32}, &make_kernel<xpu_neg>);
    kernel_registry::global().add("Cast", "XPU", {"SrcT", dtype::int32}, &make_kernel<xpu_cast>, refusal_of<xpu_cast>());
    kernel_registry::global().add(ops::fused_matmul_bias_add_op, "XPU", {"T", dtype::float32},
                                  &make_kernel<xpu_fused_matmul_bias_add>);
    device_factory f;
    f.available = [] { return device_factory::availability{1, ""}; };
    f.create = [](int index, int threads, std::size_t) { return std::make_unique<xpu_device>(index, threads); };
    return device_factory_registry::global().add("XPU", std::move(f));
  }();
  (void)once;
}

}  // namespace devices_xpu

TEST_CASE("a device of its own memory gets feeds and Recvs copied in, and fetches, Sends and predicates copied out") {
  using namespace devices_xpu;
  register_xpu();
  graph g;
  auto& x = g.placeholder(dtype::float32, {3}, node_options("x").on("/device:XPU:0"));
  auto& a = g.op("Neg", {x}, {}, node_options("a").on("/device:XPU:0"));
  auto& b = g.op("Neg", {a}, {}, node_options("b"));  // CPU:0: a crosses out
  auto& c = g.op("Neg", {b}, {}, node_options("c").on("/device:XPU:0"));  // b crosses in
  auto& p = g.placeholder(dtype::boolean, {}, node_options("p").on("/device:XPU:0"));
  auto& sw = g.op("Switch", {c, p}, {}, node_options("sw").on("/device:XPU:0"));
  auto& taken = g.op("Neg", {sw.out(1)}, {}, node_options("taken").on("/device:XPU:0"));
  session_options o;
  o.device_count = {{"XPU", 1}};
  o.inter_op_threads = 0;
  session s(g, o);
  REQUIRE(s.devices().size() == 2);
  CHECK(s.devices()[1]->name() == "/job:localhost/replica:0/task:0/device:XPU:0");
  CHECK(s.devices()[1]->separate_memory());
  CHECK_FALSE(s.devices()[0]->separate_memory());
  CHECK(s.cluster().device(1).flops_per_second == 1e12);  // the device's own figures
  copies_in = 0;
  copies_out = 0;
  auto r = s.run({{x, tensor::of<float>({3}, {1, -2, 3})}, {p, tensor::scalar(true)}}, {a, b, c, taken});
  for (const auto& t : r) CHECK(t.memory_space() == memory_space::host);
  CHECK(r[0].to_vector<float>() == std::vector<float>{-1, 2, -3});
  CHECK(r[1].to_vector<float>() == std::vector<float>{1, -2, 3});
  CHECK(r[2].to_vector<float>() == std::vector<float>{-1, 2, -3});
  CHECK(r[3].to_vector<float>() == std::vector<float>{1, -2, 3});
  // In: x, p and b's Recv. Out: a's Send, p for the Switch, and the fetches of a, c, taken.
  CHECK(copies_in == 3);
  CHECK(copies_out == 5);
  // Lossy transfers widen in host memory, then copy in.
  session_options lossy = o;
  lossy.lossy_transfers = true;
  session l(g, lossy);
  r = l.run({{x, tensor::of<float>({3}, {1.5f, -2, 3})}, {p, tensor::scalar(true)}}, {c});
  CHECK(r[0].to_vector<float>() == std::vector<float>{-1.5f, 2, -3});
}

TEST_CASE("a kernel that refuses a node when it is placed sends it to another device under soft placement, and names why otherwise") {
  using namespace devices_xpu;
  register_xpu();
  graph g;
  auto& x = g.placeholder(dtype::int32, {3}, "x");
  auto& to_float = g.op("Cast", {x}, {{"DstT", dtype::float32}}, node_options("to_float").on("/device:XPU:0"));
  auto& to_double = g.op("Cast", {x}, {{"DstT", dtype::float64}}, node_options("to_double").on("/device:XPU:0"));
  // The registry: the kernel is found for both; it takes one.
  CHECK(kernel_registry::global().missing(to_float, "XPU").empty());
  CHECK(kernel_registry::global().missing(to_double, "XPU") ==
        "node 'to_double' (Cast): the XPU kernel does not take it: it converts to float32 only");
  CHECK(refusal_of<xpu_neg>() == nullptr);
  const feed_list feed{{x, tensor::of<std::int32_t>({3}, {1, -2, 7})}};
  session_options o;
  o.device_count = {{"XPU", 1}};
  o.placement.soft = true;
  session relaxed(g, o);
  run_metadata meta;
  const auto r = relaxed.run(feed, {to_float, to_double}, {}, {}, &meta);
  CHECK(r[0].to_vector<float>() == std::vector<float>{1, -2, 7});
  CHECK(r[1].to_vector<double>() == std::vector<double>{1, -2, 7});
  std::map<std::string, std::string> device_of;
  for (const auto& n : meta.stats.nodes) device_of[n.node] = n.device;
  CHECK(device_of.at("to_float") == "/job:localhost/replica:0/task:0/device:XPU:0");
  CHECK(device_of.at("to_double") == "/job:localhost/replica:0/task:0/device:CPU:0");
  // Without soft placement the request cannot be met: the error gives the kernel's reason
  // when the node is placed (before, its constructor's error when the kernel was built).
  o.placement.soft = false;
  session strict(g, o);
  CHECK(strict.run(feed, {to_float})[0].to_vector<float>() == std::vector<float>{1, -2, 7});
  test::require_error([&] { strict.run(feed, {to_double}); },
                      {"node 'to_double' (Cast): the XPU kernel does not take it: it converts to float32 only",
                       "requests device '/device:XPU:0'"});
}

TEST_CASE("a session folds MatMul with its bias and ReLU where every device type has the fused kernel, and not otherwise") {
  using namespace devices_xpu;
  register_xpu();
  graph g;
  auto& x = g.placeholder(dtype::float32, {2, 3}, "x");
  auto& w = g.constant(tensor::of<float>({3, 2}, {1, -1, 2, 0, -1, 3}), "w");
  auto& bias = g.constant(tensor::of<float>({2}, {0.5f, -4}), "bias");
  output y;
  {
    auto scope = g.device_scope("/device:XPU:0");
    y = g.op("Relu", {g.op("BiasAdd", {g.op("MatMul", {x, w}), bias})}, {}, "y").out(0);
  }
  // On the CPU: the XPU has no _FusedMatMulReluGrad, so this ReluGrad stays as it is, and
  // a bfloat16 product, whose fused kernel the XPU lacks, keeps its BiasAdd.
  auto& features = g.constant(tensor::of<float>({2, 2}, {1, -1, 0, 2}), "features");
  auto& w2 = g.constant(tensor::of<float>({3, 2}, {1, 0, 0, 1, 1, 1}), "w2");
  const output z = g.op("ReluGrad", {g.op("MatMul", {x, w2}), features}, {}, "z").out(0);
  auto& xb = g.op("Cast", {x}, {{"DstT", dtype::bfloat16}});
  auto& wb = g.op("Cast", {w}, {{"DstT", dtype::bfloat16}});
  auto& biasb = g.op("Cast", {bias}, {{"DstT", dtype::bfloat16}});
  const output yb = g.op("BiasAdd", {g.op("MatMul", {xb, wb}), biasb}, {}, "yb").out(0);
  session_options o;
  o.device_count = {{"XPU", 1}};
  o.inter_op_threads = 0;
  session s(g, o);
  run_metadata meta;
  const auto r = s.run({{x, tensor::of<float>({2, 3}, {1, 2, 3, -1, 0, 1})}}, {y, z, yb}, {}, {.trace = true}, &meta);
  std::multiset<std::string> ran;
  for (const auto& n : meta.stats.nodes) ran.insert(n.node + " (" + n.op + ") " + n.device.substr(n.device.rfind(':') - 3));
  INFO([&] {
    std::string all;
    for (const auto& n : ran) all += n + "\n";
    return all;
  }());
  CHECK(ran.count("y (_FusedMatMulBiasAdd) XPU:0") == 1);
  CHECK(ran.count("z (ReluGrad) CPU:0") == 1);
  CHECK(ran.count("yb (BiasAdd) CPU:0") == 1);
  // x w = [[2, 8], [-2, 4]] by hand; + bias = [[2.5, 4], [-1.5, 0]]; ReLU: [[2.5, 4], [0, 0]].
  CHECK(r[0].to_vector<float>() == std::vector<float>{2.5f, 4, 0, 0});
  CHECK(r[1].to_vector<float>() == std::vector<float>{4, 0, 0, 1});  // x w2 = [[4, 5], [0, 1]] where features > 0
  CHECK(r[2].dtype() == dtype::bfloat16);
}

TEST_CASE("session_options::device_count asks for devices by type, with errors that say what is missing") {
  devices_xpu::register_xpu();
  graph g;
  g.placeholder(dtype::float32, {3}, "x");
  auto with = [&](std::map<std::string, int> count) {
    session_options o;
    o.device_count = std::move(count);
    return std::make_unique<session>(g, o);
  };
  CHECK(with({{"XPU", -1}})->devices().size() == 2);
  CHECK(with({{"XPU", 0}})->devices().size() == 1);
  test::require_error([&] { with({{"XPU", 2}}); }, {"session_options::device_count asks for 2 XPU devices; this machine has 1"});
  test::require_error([&] { with({{"GPU", 1}}); },
                      {"no device factory for device type 'GPU'", "include <weft/cuda/device.hpp>"});
  test::require_error([&] { with({{"CPU", 2}}); }, {"the CPU devices are set by cpu_devices"});
  test::require_error([&] { with({{"XPU", -3}}); }, {"-3 XPU devices asked for"});
  // The host does not copy a device's tensor itself.
  devices_xpu::xpu_device d(0, 1);
  const tensor t = d.copy_from_host(tensor::of<float>({2}, {1, 2}));
  test::require_error([&] { (void)t.copy(); }, {"tensor::copy: a float32[2] tensor in device memory cannot be copied by the host"});
}

TEST_CASE("the greedy placer sees a device's own speed figures and puts work there when it finishes sooner") {
  using namespace devices_xpu;
  register_xpu();
  // Eight Negs of 4 MiB: on this CPU about 0.3 ms each; on the XPU (1 TB/s, by its figures)
  // microseconds, after a copy in and before a copy out.
  graph g;
  auto& x = g.placeholder(dtype::float32, {std::int64_t(1) << 20}, "x");
  output v = x;
  for (int i = 0; i < 8; ++i) v = g.op("Neg", {v}).out(0);
  session_options o;
  o.device_count = {{"XPU", 1}};
  o.placement.algorithm = passes::placer::greedy;
  o.inter_op_threads = 0;
  session s(g, o);
  CHECK(s.cluster().device(1).memory_bytes_per_second == 1e12);
  const feed_list feeds{{x, tensor::filled(shape{std::int64_t(1) << 20}, 2.0f)}};
  const auto p = s.placement(feeds, {v});
  int on_xpu = 0;
  for (int id = 0; id < g.size(); ++id)
    if (g.at(id).op() == "Neg" && p->device_of[static_cast<std::size_t>(id)] == 1) ++on_xpu;
  CHECK(on_xpu >= 6);
  // And the values are the CPU's.
  const auto r = s.run(feeds, {v});
  CHECK(r[0].data<float>()[0] == 2.0f);
  CHECK(r[0].data<float>()[(std::int64_t(1) << 20) - 1] == 2.0f);
}
