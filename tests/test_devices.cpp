// Devices (runtime/device.hpp, runtime/device_name.hpp): names parsed and matched, several CPU
// devices in a session, each with its own threads and allocator, and requests for devices a
// session does not have.
#include "support/helpers.hpp"

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
  const cpu_device& cpu0 = *s.devices()[0];
  const cpu_device& cpu1 = *s.devices()[1];
  CHECK(&s.device() == &cpu0);
  CHECK(cpu0.name() == "/job:localhost/replica:0/task:0/device:CPU:0");
  CHECK(cpu1.name() == "/job:localhost/replica:0/task:0/device:CPU:1");
  CHECK(cpu1.type() == "CPU");
  // Each its own pool of intra-op threads and its own allocator.
  CHECK(cpu0.num_threads() == 2);
  CHECK(cpu1.num_threads() == 2);
  CHECK(&cpu0.eigen_device() != &cpu1.eigen_device());
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
                      {"node 'far' (Neg) requests device '/device:CPU:2', which this session does not have",
                       "its devices: /job:localhost/replica:0/task:0/device:CPU:0, "
                       "/job:localhost/replica:0/task:0/device:CPU:1"});
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
    // The data, and the tensor's header, which still lives in the same allocation.
    CHECK(d.bytes_in_use() >= before + 4 * sizeof(double));
    CHECK(d.bytes_in_use() <= before + 4 * sizeof(double) + 128);
    const tensor back = d.copy_to_host(on_device);
    CHECK(back.buffer_allocator() == &cpu_allocator::global());
    CHECK(back.shape() == shape{2, 2});
    CHECK(back.to_vector<double>() == std::vector<double>{1.5, -2, 0, 4});
  }
  CHECK(d.bytes_in_use() == before);
}
