// Bad input never crashes weft (issue 23): each class of defect that libraries of this kind
// have shipped (sizes that wrap, readers that trust their headers, shape rules that index
// past a rank, unbounded attributes, kernels that write into their inputs, foreign
// exceptions, malformed graphs) with the examples that once broke weft, each now a clear
// weft::error that names the node or file.
#include "support/helpers.hpp"
#include "support/op_runner.hpp"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <weft/core/crc32c.hpp>
#include <weft/data/idx.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace weft;
using namespace weft::test;
namespace fs = std::filesystem;

namespace {

// Runs f on a thread whose stack is `bytes` long (POSIX threads) and rethrows what f threw,
// so that a failure keeps its message; false when the thread could not start.
bool on_small_stack(std::size_t bytes, const std::function<void()>& f) {
  struct call {
    const std::function<void()>* f;
    std::exception_ptr thrown;
  } c{&f, nullptr};
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  pthread_t t;
  const bool started = pthread_attr_setstacksize(&attr, bytes) == 0 &&
                       pthread_create(&t, &attr, [](void* p) -> void* {
                         auto* c = static_cast<call*>(p);
                         try {
                           (*c->f)();
                         } catch (...) {
                           c->thrown = std::current_exception();
                         }
                         return nullptr;
                       }, &c) == 0;
  pthread_attr_destroy(&attr);
  if (!started) return false;
  pthread_join(t, nullptr);
  if (c.thrown) std::rethrow_exception(c.thrown);
  return true;
}

constexpr std::int64_t p2(int k) { return std::int64_t{1} << k; }
constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();

const node& ints(graph& g, std::vector<std::int64_t> v, shape s) { return g.constant(tensor::from_vector(v, std::move(s))); }
const node& ints(graph& g, std::vector<std::int64_t> v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return ints(g, std::move(v), shape{n});
}
const node& floats(graph& g, shape s) {
  return g.constant(tensor::filled(std::move(s), 1.0f));
}

// Runs `fetch` and expects a weft::error with every fragment.
void run_fails(const graph& g, output fetch, const std::vector<std::string>& fragments, const feed_list& feeds = {}) {
  session s(g, one_thread());
  require_error([&] { s.run(feeds, {fetch}); }, fragments);
}

// Pooling and convolution attrs with [1, h, w, 1] lists.
attr_map window(const char* padding, std::int64_t k, std::int64_t stride) {
  return {{"padding", std::string(padding)},
          {"ksize", std::vector<std::int64_t>{1, k, k, 1}},
          {"strides", std::vector<std::int64_t>{1, stride, stride, 1}}};
}

// A checkpoint file written field by field (runtime/checkpoint_file.hpp's format), with a
// valid index checksum, so that the reader's checks past the checksum are reached.
struct raw_entry {
  std::string name;
  dtype type;
  std::vector<std::int64_t> dims;
  std::uint64_t offset, size;
};
// The full file: index, its checksum, then `data`; each entry's CRC is of its bytes in data
// when they are there.
std::string checkpoint_file(std::vector<raw_entry> entries, const std::string& data) {
  std::string index("WEFTCKPT");
  auto put = [&](auto v) { index.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(std::uint32_t{1});
  put(static_cast<std::uint32_t>(entries.size()));
  for (const auto& e : entries) {
    put(static_cast<std::uint32_t>(e.name.size()));
    index += e.name;
    put(static_cast<std::uint8_t>(e.type));
    put(static_cast<std::uint8_t>(e.dims.size()));
    for (auto d : e.dims) put(d);
    put(e.offset);
    put(e.size);
    put(std::uint32_t{0});
  }
  put(crc32c(index.data(), index.size()));
  return index + data;
}
std::size_t index_size(const std::vector<raw_entry>& entries) { return checkpoint_file(entries, "").size(); }

void spill(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// One initialized variable and a saver of it.
struct saved_model {
  graph g;
  output var = g.variable(dtype::float32, {2}, "v");
  output init = g.op("Assign", {var, g.constant(tensor::from_vector(std::vector<float>{1, 2}))}).out(0);
  saver checkpoints{g, {var}};  // before the session: it adds nodes
  session s{g, one_thread()};
  saved_model() { s.run({init}); }
};

}  // namespace

TEST_CASE("hardening: sizes that would wrap are errors naming the node", "[hardening]") {
  graph g;
  // Fill of 2^62 floats: 2^64 bytes would wrap to 0.
  run_fails(g, g.op("Fill", {ints(g, {p2(62)}), g.constant(tensor::scalar(1.0f))}, {}, "fill"),
            {"node 'fill' (Fill)", "2^62 bytes"});
  // Tile by 2^62, and Reshape to [2^32, 2^32]: their shape rules multiply.
  require_error([&] { g.op("Tile", {floats(g, {4}), ints(g, {p2(62)})}, {}, "tile"); },
                {"node 'tile' (Tile)", "4 * 4611686018427387904 overflows"});
  require_error([&] { g.op("Reshape", {floats(g, {4}), ints(g, {p2(32), p2(32)})}, {}, "reshape"); },
                {"node 'reshape' (Reshape)", "overflows"});
  // The same with the multiples and shape fed at run time: the kernels check too.
  auto& m = g.placeholder(dtype::int64, partial_shape({1}), "m");
  run_fails(g, g.op("Tile", {floats(g, {4}), m}, {}, "tile2"), {"node 'tile2' (Tile)", "overflows"},
            {{m, tensor::from_vector(std::vector<std::int64_t>{p2(62)})}});
  auto& dims = g.placeholder(dtype::int64, partial_shape({2}), "dims");
  run_fails(g, g.op("Reshape", {floats(g, {4}), dims}, {}, "reshape2"), {"node 'reshape2' (Reshape)", "overflows"},
            {{dims, tensor::from_vector(std::vector<std::int64_t>{p2(32), p2(32)})}});
  // Pad: a padded dim past int64, at graph construction and at run time.
  require_error([&] { g.op("Pad", {floats(g, {4}), ints(g, {int64_max, 1}, shape{1, 2})}, {}, "pad"); },
                {"node 'pad' (Pad)", "a padded dim", "overflows"});
  auto& pads = g.placeholder(dtype::int64, partial_shape({1, 2}), "pads");
  run_fails(g, g.op("Pad", {floats(g, {4}), pads}, {}, "pad2"), {"node 'pad2' (Pad)", "overflows"},
            {{pads, tensor::from_vector(std::vector<std::int64_t>{1, int64_max}, shape{1, 2})}});
  // Conv2D with dilation 2^62: the window's extent (3 - 1) * 2^62 + 1.
  attr_map conv{{"padding", std::string("SAME")},
                {"strides", std::vector<std::int64_t>{1, 1, 1, 1}},
                {"dilations", std::vector<std::int64_t>{1, p2(62), 1, 1}}};
  require_error([&] { g.op("Conv2D", {floats(g, {1, 5, 5, 1}), floats(g, {3, 3, 1, 1})}, conv, "conv"); },
                {"node 'conv' (Conv2D)", "extent", "overflows"});
  // MaxPool with a 2^32 x 2^32 window: its size does not fit.
  run_fails(g, g.op("MaxPool", {floats(g, {1, 4, 4, 1})}, window("SAME", p2(32), 1), "pool"),
            {"node 'pool' (MaxPool)", "the window's size", "overflows"});
  // AvgPoolGrad asked for an input of [1, 2^31, 2^31, 1]: 2^62 floats.
  run_fails(g, g.op("AvgPoolGrad", {ints(g, {1, p2(31), p2(31), 1}), floats(g, {1, 1, 1, 1})}, window("VALID", 1, p2(31)), "apg"),
            {"node 'apg' (AvgPoolGrad)", "2^62 bytes"});
  // Slice with size INT64_MAX: begin + size would wrap.
  require_error([&] { g.op("Slice", {floats(g, {4}), ints(g, {1}), ints(g, {int64_max})}, {}, "slice"); },
                {"node 'slice' (Slice)", "out of range"});
  auto& sb = g.placeholder(dtype::int64, partial_shape({1}), "sb");
  auto& ss = g.placeholder(dtype::int64, partial_shape({1}), "ss");
  run_fails(g, g.op("Slice", {floats(g, {4}), sb, ss}, {}, "slice2"), {"node 'slice2' (Slice)", "out of range"},
            {{sb, tensor::from_vector(std::vector<std::int64_t>{1})}, {ss, tensor::from_vector(std::vector<std::int64_t>{int64_max})}});
  // A tensor of 2^62 float32 or a shape past int64 made directly.
  require_error([] { tensor(dtype::float32, shape{p2(62)}); }, {"2^62 bytes"});
  require_error([] { shape{p2(32), p2(32)}; }, {"shape", "overflows int64"});
}

// The kernel fuzzer's second finding: BroadcastTo to [0, 4052555153018976267, 3] had 0
// elements, so the shape passed, but merging its dims into rows multiplied the other two
// (a signed overflow, UBSan). A shape's non-zero dims must have a product that fits,
// whatever the order of its dims and whether one of them is 0.
TEST_CASE("hardening: the non-zero dims of an empty shape have a product that fits", "[hardening]") {
  require_error([] { shape{0, p2(62), 4}; }, {"shape", "overflows int64"});
  require_error([] { shape{p2(62), 4, 0}; }, {"shape", "overflows int64"});
  require_error([] { shape{p2(62), 0, 4}; }, {"shape", "overflows int64"});
  CHECK(shape{0, p2(62), 1}.num_elements() == 0);
  CHECK(shape{p2(31), 0, p2(31)}.num_elements() == 0);

  graph g;
  auto& to = g.placeholder(dtype::int64, partial_shape({3}), "to");
  auto& b = g.op("BroadcastTo", {floats(g, {3}), to}, {}, "broadcast");
  run_fails(g, b, {"node 'broadcast' (BroadcastTo)", "overflows int64"},
            {{to, tensor::from_vector(std::vector<std::int64_t>{0, 4052555153018976267, 3})}});
  // An empty result with modest dims is fine.
  session s(g, one_thread());
  const auto out = s.run({{to, tensor::from_vector(std::vector<std::int64_t>{0, 5, 3})}}, {b.out(0)});
  CHECK(out[0].shape() == shape{0, 5, 3});
  // Reshape of an empty tensor to such a shape, given as a constant.
  require_error([&] { g.op("Reshape", {floats(g, {0}), ints(g, {0, p2(62), 4})}, {}, "reshape"); },
                {"node 'reshape' (Reshape)", "overflows int64"});
}

// The kernel fuzzer's third finding: a Conv2D with dilation 2^61 in height and SAME padding
// pads its one-row image by 2^61 rows on each side, and its register blocks sized a buffer
// for the padded image, (2^62 + 1) rows, a product that overflowed. Such a convolution now
// tests each tap instead; its values are checked against sums by hand, and its gradients too
// (the input's gradient is itself a convolution padded by 2^61).
TEST_CASE("hardening: a convolution padded far beyond its image computes its values", "[hardening]") {
  constexpr std::int64_t n = 2, w = 3, c = 16, k = 16, kh = 3, dh = p2(61), pad_top = p2(61);
  auto values = [](shape s, int mod, int shift) {
    tensor t(dtype::float32, std::move(s));
    auto v = t.flat<float>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i % static_cast<std::size_t>(mod)) - shift);
    return t;
  };
  const tensor in = values({n, 1, w, c}, 7, 3), f = values({kh, 1, c, k}, 5, 2), d_out = values({n, 1, w, k}, 3, 1);
  auto at = [](const tensor& t, std::int64_t i) { return t.flat<float>()[static_cast<std::size_t>(i)]; };
  // Tap i of the window reads input row i * dh - pad_top: only i = 1 reads row 0.
  auto hits = [&](std::int64_t i) { return i * dh - pad_top == 0; };
  graph g;
  attr_map conv{{"padding", std::string("SAME")},
                {"strides", std::vector<std::int64_t>{1, 1, 1, 1}},
                {"dilations", std::vector<std::int64_t>{1, dh, 1, 1}}};
  attr_map sized = conv;
  sized.set("Tsizes", dtype::int64);
  auto& x = g.constant(in);
  auto& filter = g.constant(f);
  auto& dy = g.constant(d_out);
  auto& y = g.op("Conv2D", {x, filter}, conv, "conv");
  auto& dx = g.op("Conv2DBackpropInput", {ints(g, {n, 1, w, c}), filter, dy}, sized, "conv_dx");
  auto& df = g.op("Conv2DBackpropFilter", {x, ints(g, {kh, 1, c, k}), dy}, sized, "conv_df");
  session s(g, one_thread());
  const auto out = s.run({}, {y.out(0), dx.out(0), df.out(0)});
  REQUIRE(out[0].shape() == shape{n, 1, w, k});
  REQUIRE(out[1].shape() == shape{n, 1, w, c});
  REQUIRE(out[2].shape() == shape{kh, 1, c, k});
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t p = 0; p < w; ++p) {
      for (std::int64_t q = 0; q < k; ++q) {
        float sum = 0;
        for (std::int64_t i = 0; i < kh; ++i)
          for (std::int64_t ci = 0; ci < c; ++ci)
            if (hits(i)) sum += at(in, (b * w + p) * c + ci) * at(f, (i * c + ci) * k + q);
        CHECK(at(out[0], (b * w + p) * k + q) == sum);
      }
      for (std::int64_t ci = 0; ci < c; ++ci) {
        float sum = 0;
        for (std::int64_t i = 0; i < kh; ++i)
          for (std::int64_t q = 0; q < k; ++q)
            if (hits(i)) sum += at(d_out, (b * w + p) * k + q) * at(f, (i * c + ci) * k + q);
        CHECK(at(out[1], (b * w + p) * c + ci) == sum);
      }
    }
  for (std::int64_t i = 0; i < kh; ++i)
    for (std::int64_t ci = 0; ci < c; ++ci)
      for (std::int64_t q = 0; q < k; ++q) {
        float sum = 0;
        for (std::int64_t b = 0; b < n; ++b)
          for (std::int64_t p = 0; p < w; ++p)
            if (hits(i)) sum += at(in, (b * w + p) * c + ci) * at(d_out, (b * w + p) * k + q);
        CHECK(at(out[2], (i * c + ci) * k + q) == sum);
      }
}

// The kernel fuzzer's fourth finding: a MaxPoolGrad shard threw its weft::error inside
// Eigen's parallelFor, which unwound past a barrier that other shards still used (an
// assertion in Eigen, a use after scope under ASan; on a pool thread, std::terminate).
// cpu_context::parallel_for (a device's threads) now keeps the first exception and rethrows it once every shard
// has finished.
TEST_CASE("hardening: an exception in a parallel_for shard reaches the caller after every shard", "[hardening]") {
  const cpu_context d(2);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> active{0};
    const std::int64_t thrower = round % 2 == 0 ? 0 : 63;  // the first shard, or the last
    require_error(
        [&] {
          d.parallel_for(64, 1e6, [&](std::int64_t b, std::int64_t e) {
            ++active;
            if (b <= thrower && thrower < e) {
              --active;
              fail(error_code::invalid_argument, "shard of unit ", thrower, " fails");
            }
            for (int i = 0; i < 100; ++i) std::this_thread::yield();  // let the shards overlap
            --active;
          });
        },
        {"shard of unit", "fails"});
    CHECK(active == 0);  // no shard still runs once the error is out
  }
}

TEST_CASE("hardening: a request beyond memory, or a session's memory limit, is resource_exhausted", "[hardening]") {
  graph g;
  // 2^40 bytes: more than this machine has (checked, never handed to the kernel's overcommit).
  if (cpu_allocator::physical_memory_bytes() < (std::size_t{1} << 40)) {
    auto big = g.op("Fill", {ints(g, {p2(38)}), g.constant(tensor::scalar(1.0f))}, {}, "big").out(0);
    session s(g, one_thread());
    try {
      s.run({}, {big});
      FAIL("a 2^40-byte Fill ran");
    } catch (const error& e) {
      CHECK(e.code() == error_code::resource_exhausted);
      CHECK(std::string(e.what()).find("node 'big' (Fill)") != std::string::npos);
      CHECK(std::string(e.what()).find("bytes requested, more than the machine's") != std::string::npos);
    }
  }
  // A session limited to 1 MiB: a 4 MiB output fails, a small one runs, and the session is
  // still usable after the failure.
  auto four = g.op("Fill", {ints(g, {p2(20)}), g.constant(tensor::scalar(1.0f))}, {}, "four").out(0);
  auto small = g.op("Fill", {ints(g, {8}), g.constant(tensor::scalar(2.0f))}, {}, "small").out(0);
  session_options o = one_thread();
  o.memory_limit_bytes = std::size_t{1} << 20;
  session limited(g, o);
  try {
    limited.run({}, {four});
    FAIL("a 4 MiB Fill ran under a 1 MiB limit");
  } catch (const error& e) {
    CHECK(e.code() == error_code::resource_exhausted);
    INFO(e.what());
    CHECK(std::string(e.what()).find("node 'four' (Fill)") != std::string::npos);
    CHECK(std::string(e.what()).find("memory limit of 1048576 bytes") != std::string::npos);
  }
  tensor kept = limited.run({}, {small})[0];
  CHECK(kept.to_vector<float>() == std::vector<float>(8, 2.0f));
  // The fetched tensor outlives the session whose limit counted it.
  { session gone(g, o); kept = gone.run({}, {small})[0]; }
  CHECK(kept.to_vector<float>() == std::vector<float>(8, 2.0f));
}

TEST_CASE("hardening: shape rules check ranks before indexing, and attributes are bounded", "[hardening]") {
  graph g;
  auto& x = floats(g, {2, 3});
  // Slice with begin and size longer than the input's rank.
  require_error([&] { g.op("Slice", {x, ints(g, {0, 0, 0}), ints(g, {1, 1, 1})}, {}, "slice"); },
                {"node 'slice' (Slice)", "3 entries for rank 2"});
  // Split along axis 0 of a scalar.
  require_error([&] { g.op("Split", {g.constant(tensor::scalar(std::int32_t{0})), g.constant(tensor::scalar(1.0f))},
                           {{"num_split", std::int64_t{2}}}, "split"); },
                {"node 'split' (Split)", "cannot split a scalar"});
  // num_split = 2^40 would build a 2^40-entry output list.
  require_error([&] { g.op("Split", {g.constant(tensor::scalar(std::int32_t{0})), x}, {{"num_split", p2(40)}}, "many"); },
                {"node 'many' (Split)", "num_split", "1099511627776"});
  // Within the bound, num_split is still checked against the dim it splits.
  require_error([&] { g.op("Split", {g.constant(tensor::scalar(std::int32_t{1})), x}, {{"num_split", std::int64_t{4}}}); },
                {"does not split into 4"});
  // A tensor's dim past its rank.
  require_error([] { tensor::scalar(1.0f).dim(0); }, {"shape [] has no dimension 0"});
}

TEST_CASE("hardening: Pad of a rank-0 tensor leaves its input alone", "[hardening]") {
  graph g;
  auto& c = g.constant(tensor::scalar(7.0f), "c");
  auto& fed = g.placeholder(dtype::float32, partial_shape{}, "fed");
  auto none = g.constant(tensor(dtype::int32, shape{0, 2}));
  auto padded_c = g.op("Pad", {c, none}).out(0);
  auto padded_fed = g.op("Pad", {fed, none}).out(0);
  session s(g, one_thread());
  tensor value = tensor::scalar(5.0f);
  auto got = s.run({{fed, value}}, {padded_c, padded_fed});
  CHECK(got[0].scalar_value<float>() == 7.0f);
  CHECK(got[1].scalar_value<float>() == 5.0f);
  // The Const's value and the caller's tensor are unchanged (Pad once zeroed them).
  CHECK(value.scalar_value<float>() == 5.0f);
  CHECK(s.run({}, {c})[0].scalar_value<float>() == 7.0f);
  CHECK(g.at(c.id()).attr<tensor>("value").scalar_value<float>() == 7.0f);
}

TEST_CASE("hardening: no foreign exception leaves a public entry point", "[hardening]") {
  graph g;
  auto& x = g.placeholder(dtype::float32, partial_shape({2}), "x");
  auto y = g.op("Neg", {x}).out(0);
  session s(g, one_thread());
  // A port past int: std::stoi once threw std::out_of_range.
  require_error([&] { s.run({{"x:99999999999", tensor::from_vector(std::vector<float>{1, 2})}}, {y}); },
                {"port 99999999999", "out of range"});
  require_error([&] { s.run({}, {"x:99999999999"}); }, {"port 99999999999"});
  graph h;
  require_error([&] { h.import({{"a", "Placeholder", {}, {{"dtype", dtype::float32}, {"shape", partial_shape{}}}},
                                {"b", "Neg", {"a:99999999999"}, {}}}); },
                {"port 99999999999"});
  // read_idx of a directory, and of an unreadable path.
  temp_dir d("weft_hardening");
  require_error([&] { data::read_idx(d.path); }, {"the IDX file", "is not a regular file"});
  // A saver asked to save under a regular file (no directory can be made there).
  spill(d.path / "file", "x");
  saved_model m;
  require_error([&] { m.checkpoints.save(m.s, d.path / "file" / "sub" / "model", 1); },
                {"weft::saver: cannot create the directory", "file/sub"});
  // An op definition with an unparsable default.
  require_error([] { op_def_builder("BadDefault").attr("n: int = 12x").build(); }, {"cannot parse default '12x'"});
  require_error([] { op_def_builder("BadDefault2").attr("n: int = 99999999999999999999").build(); },
                {"cannot parse default"});
}

TEST_CASE("hardening: auto-named nodes find their names by a counter per base name", "[hardening]") {
  graph g;
  auto& x = g.constant(tensor::scalar(1.0f));
  CHECK(g.op("Identity", {x}).name() == "Identity");
  g.op("Identity", {x}, {}, "Identity_1");  // a name taken by hand is skipped
  CHECK(g.op("Identity", {x}).name() == "Identity_2");
  CHECK(g.op("Identity", {x}).name() == "Identity_3");
  {
    auto scope = g.name_scope("s");
    CHECK(g.op("Identity", {x}).name() == "s/Identity");
    CHECK(g.op("Identity", {x}).name() == "s/Identity_1");
  }
  // 40,000 of one op (once minutes, now linear): each name unique, the last as counted.
  std::string last;
  for (int i = 0; i < 40000; ++i) last = g.op("Neg", {x}).name();
  CHECK(last == "Neg_39999");
  CHECK(g.find("Neg_20000") != nullptr);
}

TEST_CASE("hardening: malformed graphs are errors at import", "[hardening]") {
  const attr_map f32{{"dtype", dtype::float32}, {"shape", partial_shape{}}};
  {
    graph g;
    require_error([&] { g.import({{"", "Placeholder", {}, f32}}); }, {"node 0 of the specs (Placeholder) has an empty name"});
    CHECK(g.size() == 0);
  }
  {
    // A NextIteration that no Merge takes back: outside any loop.
    graph g;
    require_error([&] { g.import({{"a", "Placeholder", {}, f32}, {"n", "NextIteration", {"a"}, {}}}); },
                  {"node 'n' (NextIteration)", "not inside a loop"});
    CHECK(g.size() == 0);
  }
  {
    // A Merge closing a loop whose first input is no Enter.
    graph g;
    require_error([&] { g.import({{"a", "Placeholder", {}, f32}, {"m", "Merge", {"a", "n"}, {}}, {"n", "NextIteration", {"m"}, {}}}); },
                  {"node 'm' (Merge)", "not from an Enter"});
    CHECK(g.size() == 0);
  }
  {
    // Built op by op, a NextIteration outside a loop is an error when the session prepares it.
    graph g;
    auto& a = g.placeholder(dtype::float32, partial_shape{}, "a");
    auto n = g.op("NextIteration", {a}, {}, "n").out(0);
    auto m = g.op("Merge", {a, n}, {}, "m").out(0);
    session s(g, one_thread());
    require_error([&] { s.run({{a, tensor::scalar(1.0f)}}, {m}); }, {"node 'n' (NextIteration)", "not inside a loop"});
  }
  {
    // A chain of 40,000 nodes given last first, imported on a thread with a 512 KiB stack: no
    // recursion deep enough to overflow (one frame of a few dozen bytes per node would need
    // megabytes). 200,000 nodes on the main thread's 8 MiB took 22 s under ASan.
    std::vector<node_spec> specs;
    const int n = 40000;
    auto name = [](int i) { return std::string(1, 'n').append(std::to_string(i)); };
    for (int i = n - 1; i > 0; --i) specs.push_back({name(i), "Identity", {name(i - 1)}, {}});
    specs.push_back({"n0", "Placeholder", {}, f32});
    graph g;
    CHECK(on_small_stack(512 * 1024, [&] { g.import(specs); }));
    CHECK(g.size() == n);
  }
}

TEST_CASE("hardening: checkpoint readers check every size against the bytes present", "[hardening]") {
  temp_dir d("weft_hardening_ckpt");
  const auto file = d.path / "bad.ckpt";
  // int32 [2^31, 2^31] in 0 bytes: 2^62 elements, whose 2^64 bytes wrap to 0.
  {
    std::vector<raw_entry> e{{"w", dtype::int32, {p2(31), p2(31)}, 0, 0}};
    e[0].offset = index_size(e);
    spill(file, checkpoint_file(e, ""));
    require_error([&] { read_checkpoint(file); }, {"bad.ckpt is corrupt", "tensor 'w' declares dims [2147483648,2147483648]"});
  }
  // float64 [2, 2^30-1, 2^30+1]: 2^64 - 16 bytes, so that offset + size wraps below the file.
  {
    std::vector<raw_entry> e{{"w", dtype::float64, {2, p2(30) - 1, p2(30) + 1}, 0, std::uint64_t(0) - 16}};
    e[0].offset = index_size(e);
    spill(file, checkpoint_file(e, std::string(16, 'x')));
    require_error([&] { read_checkpoint(file); }, {"is corrupt", "tensor 'w' declares dims", "more bytes than the file's"});
  }
  // Two tensors of one name.
  {
    tensor t = tensor::from_vector(std::vector<float>{1, 2});
    std::vector<raw_entry> e{{"w", dtype::float32, {2}, 0, 8}, {"w", dtype::float32, {2}, 0, 8}};
    e[0].offset = index_size(e), e[1].offset = e[0].offset + 8;
    std::string data(16, '\0');
    std::memcpy(data.data(), t.raw_data(), 8);
    std::memcpy(data.data() + 8, t.raw_data(), 8);
    spill(file, checkpoint_file(e, data));
    require_error([&] { read_checkpoint(file); }, {"is corrupt", "two tensors named 'w'"});
  }
  // A directory, not a file.
  require_error([&] { read_checkpoint(d.path); }, {"the checkpoint", "is not a regular file"});
  // IDX: dims that promise more than the file holds, 2^32-1 in each of 255 dims.
  std::string idx{'\0', '\0', '\x08', '\xff'};
  idx += std::string(4 * 255, '\xff');
  spill(d.path / "huge.idx", idx);
  require_error([&] { data::read_idx(d.path / "huge.idx"); }, {"huge.idx is not valid", "promise more bytes than 2^64"});
}

TEST_CASE("hardening: a save removes the temporaries of writers that were killed", "[hardening]") {
  temp_dir d("weft_hardening_tmp");
  // A process that has exited: its pid names no live process while we hold its zombie...
  // so reap it first; pids are not reused at once.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string dead = ".model-3.ckpt.weft-tmp." + std::to_string(child) + ".0";
  const std::string live = ".model-3.ckpt.weft-tmp." + std::to_string(::getppid()) + ".0";
  const std::string other = ".model-3.ckpt.tmp.1.0";  // not weft's
  for (const auto& name : {dead, live, other}) spill(d.path / name, "partial");
  saved_model m;
  m.checkpoints.save(m.s, d.path / "model", 4);
  CHECK_FALSE(fs::exists(d.path / dead));
  CHECK(fs::exists(d.path / live));
  CHECK(fs::exists(d.path / other));
  CHECK(fs::exists(d.path / "model-4.ckpt"));
}

TEST_CASE("hardening: every op, for every dtype, runs or fails cleanly and leaves its inputs unchanged", "[hardening]") {
  const auto names = runnable_ops();
  std::set<std::string> ran;
  int runs = 0, successes = 0;
  for (const auto& name : names) {
    const op_def* def = op_registry::global().find(name);
    REQUIRE(def != nullptr);
    std::vector<dtype> types{dtype::float32};
    if (const attr_def* t = def->find_attr("T"); t && t->kind == attr_kind::type) {
      types = t->admitted();
    }
    for (dtype t : types)
      for (std::uint64_t seed = 0; seed < 16; ++seed) {
        seeded_choices c(std::hash<std::string>{}(name) ^ (static_cast<std::uint64_t>(t) << 32) ^ seed);
        const op_result r = run_op(name, t, c);
        ++runs;
        successes += r.ran;
        if (r.ran) ran.insert(name);
        INFO(name << " T=" << t << " seed " << seed << ": " << (r.ran ? "ran" : r.error));
        CHECK(r.changed_inputs.empty());
      }
  }
  // The check means something only where ops run: nine in ten of the ops a program adds ran
  // for some inputs. A session's private rewrites (named "_...": the _FusedMatMul ops) run
  // here too, for clean failures, but are not counted: their operands must fit each other
  // (a product the shape of three variables, six scalars), which random inputs almost never
  // do; their own tests run them (test_passes.cpp).
  std::string never;
  std::size_t counted = 0, counted_ran = 0;
  for (const auto& name : names) {
    if (!ran.count(name)) never += " " + name;
    if (name.starts_with("_")) continue;
    ++counted;
    counted_ran += ran.count(name);
  }
  INFO("ops that never ran:" << never << "; " << successes << " of " << runs << " runs succeeded");
  CHECK(counted_ran * 10 >= counted * 9);
  CHECK(successes * 5 >= runs);
}

TEST_CASE("hardening: integer MatMul wraps on overflow, as TensorFlow's (no signed overflow inside Eigen)", "[hardening]") {
  // INT_MIN * -1 and a sum past INT_MAX: two's complement results worked out by hand.
  graph g;
  const std::int32_t lo = std::numeric_limits<std::int32_t>::min(), hi = std::numeric_limits<std::int32_t>::max();
  auto& a = g.constant(tensor::from_vector(std::vector<std::int32_t>{lo, hi, hi, 1}, shape{2, 2}));
  auto& b = g.constant(tensor::from_vector(std::vector<std::int32_t>{-1, 0, 1, 2}, shape{2, 2}));
  // Row 0: lo*-1 + hi*1 = 2^31 + 2^31 - 1 = 2^32 - 1 -> -1; lo*0 + hi*2 = 2^32 - 2 -> -2.
  // Row 1: hi*-1 + 1*1 = -2^31 + 2; hi*0 + 1*2 = 2.
  CHECK(eval(g, g.op("MatMul", {a, b})).to_vector<std::int32_t>() == std::vector<std::int32_t>{-1, -2, lo + 2, 2});
  auto& c = g.constant(tensor::from_vector(std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min()}, shape{1, 1}));
  auto& d = g.constant(tensor::from_vector(std::vector<std::int64_t>{-1}, shape{1, 1}));
  CHECK(eval(g, g.op("BatchMatMulV2", {c, d})).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min()});
}
