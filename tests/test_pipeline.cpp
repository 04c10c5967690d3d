// Input pipelines (runtime/pipeline.hpp): batches of in-memory rows in order, map stages
// (one worker keeps the order, two keep the elements), a seeded shuffle whose order repeats
// run after run, epochs, padded batches of elements of different lengths, records of files
// decoded in a map, an error in a stage rethrown by next(), the last stage dequeued inside a
// training graph, and a pipeline repeating forever stopped mid-epoch. Also under TSan.
#include "support/helpers.hpp"

#include <algorithm>
#include <numeric>

using namespace weft;
using namespace weft::test;

namespace pipeline_test {

tensor iota64(std::int64_t n, std::int64_t scale = 1) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i * scale;
  return tensor::from_vector(v);
}

// Every element's first component, batch by batch, until the end.
std::vector<std::vector<std::int64_t>> drain(input_pipeline& p) {
  std::vector<std::vector<std::int64_t>> out;
  while (auto e = p.next()) out.push_back((*e)[0].to_vector<std::int64_t>());
  return out;
}
std::vector<std::int64_t> flat(const std::vector<std::vector<std::int64_t>>& batches) {
  std::vector<std::int64_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace pipeline_test

using namespace pipeline_test;

TEST_CASE("pipeline: rows of in-memory tensors, batched in order, the last batch short", "[pipeline]") {
  std::vector<std::string> words;
  for (int i = 0; i < 10; ++i) words.push_back("w" + std::to_string(i));
  auto p = input_pipeline::from_tensors({iota64(10), tensor::from_vector(words)});
  p.batch(4).prefetch(2);
  p.start();
  CHECK(p.element_types() == std::vector<dtype>{dtype::int64, dtype::string});
  CHECK(p.element_shapes()[0] == partial_shape({unknown_dim}));
  auto first = p.next();
  REQUIRE(first);
  CHECK((*first)[0].to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK((*first)[1].to_vector<std::string>() == std::vector<std::string>{"w0", "w1", "w2", "w3"});
  auto rest = drain(p);
  CHECK(rest == std::vector<std::vector<std::int64_t>>{{4, 5, 6, 7}, {8, 9}});
  CHECK(!p.next());  // still the end
  // drop_remainder: whole batches only.
  auto exact = input_pipeline::from_tensors({iota64(10)});
  exact.batch(4, true);
  exact.start();
  CHECK(drain(exact) == std::vector<std::vector<std::int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}});
}

TEST_CASE("pipeline: map stages run graph functions, one worker keeps the order, two keep the elements", "[pipeline]") {
  auto times = [](std::int64_t k) {
    return [k](graph& g, const std::vector<output>& in) {
      return std::vector<output>{g.op("Mul", {in[0], g.constant(tensor::scalar(k)).out(0)}).out(0)};
    };
  };
  auto one = input_pipeline::from_tensors({iota64(100)});
  one.map(times(10)).map(times(-1)).batch(7);
  one.start();
  std::vector<std::int64_t> want(100);
  for (std::int64_t i = 0; i < 100; ++i) want[static_cast<std::size_t>(i)] = -10 * i;
  CHECK(flat(drain(one)) == want);
  auto two = input_pipeline::from_tensors({iota64(100)});
  two.map(times(10), 2).batch(7);
  two.start();
  auto got = flat(drain(two));
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  for (auto& w : want) w = -w;
  std::sort(want.begin(), want.end());
  CHECK(got == want);
}

TEST_CASE("pipeline: a seeded shuffle over two epochs gives the same order every run", "[pipeline]") {
  auto order = [](std::uint64_t seed) {
    auto p = input_pipeline::from_tensors({iota64(20)});
    p.shuffle(8, seed).batch(5).repeat(2);
    p.start();
    return flat(drain(p));
  };
  const auto a = order(7), b = order(7), c = order(8);
  CHECK(a == b);
  CHECK(a != c);
  std::vector<std::int64_t> sorted = a, want;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < 20; ++i) want.insert(want.end(), {i, i});
  CHECK(sorted == want);  // every row twice
  std::vector<std::int64_t> ordered(40);
  for (int i = 0; i < 40; ++i) ordered[static_cast<std::size_t>(i)] = i % 20;
  CHECK(a != ordered);
}

TEST_CASE("pipeline: elements of different lengths are padded to the longest of each batch", "[pipeline]") {
  // Element i: a vector of n_i copies of n_i (Fill), its length known only at run time.
  auto p = input_pipeline::from_tensors({tensor::of<std::int32_t>({4}, {2, 0, 3, 1})});
  p.map([](graph& g, const std::vector<output>& in) {
     auto dims = g.op("Reshape", {in[0], g.constant(tensor::of<std::int32_t>({1}, {1})).out(0)}).out(0);
     return std::vector<output>{g.op("Fill", {dims, in[0]}).out(0)};
   }).batch(2);
  p.start();
  CHECK(p.element_shapes()[0] == partial_shape({unknown_dim, unknown_dim}));
  auto b1 = p.next();
  REQUIRE(b1);
  CHECK((*b1)[0].shape() == shape{2, 2});
  CHECK((*b1)[0].to_vector<std::int32_t>() == std::vector<std::int32_t>{2, 2, 0, 0});
  auto b2 = p.next();
  REQUIRE(b2);
  CHECK((*b2)[0].shape() == shape{2, 3});
  CHECK((*b2)[0].to_vector<std::int32_t>() == std::vector<std::int32_t>{3, 3, 3, 1, 0, 0});
  CHECK(!p.next());
}

TEST_CASE("pipeline: records of files decoded in a map, a bad record's error comes out of next()", "[pipeline]") {
  temp_dir d("weft_pipeline_test");
  write_tfrecords(d.path / "a", {std::string("\x01\x02", 2), std::string("\x03\x04", 2)});
  write_tfrecords(d.path / "b", {std::string("\x05\x06", 2)});
  auto decode = [](graph& g, const std::vector<output>& in) {
    return std::vector<output>{g.op("DecodeRaw", {in[0]}, {{"out_type", dtype::uint8}}, node_options("decode")).out(0)};
  };
  auto p = input_pipeline::from_files({(d.path / "a").string(), (d.path / "b").string()}, {});
  p.map(decode).batch(3).repeat(2);
  p.start();
  auto b1 = p.next();
  REQUIRE(b1);
  CHECK((*b1)[0].shape() == shape{3, 2});
  CHECK((*b1)[0].to_vector<std::uint8_t>() == std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6});
  auto b2 = p.next();
  REQUIRE(b2);
  CHECK((*b2)[0].to_vector<std::uint8_t>() == std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6});
  CHECK(!p.next());
  // A record of three bytes where the others have two: DecodeRaw's error, named, from next().
  write_tfrecords(d.path / "c", {std::string("\x01\x02", 2), std::string("\x03\x04\x05", 3)});
  auto bad = input_pipeline::from_files({(d.path / "c").string()}, {});
  bad.map([](graph& g, const std::vector<output>& in) {
       return std::vector<output>{g.op("DecodeRaw", {in[0]}, {{"out_type", dtype::int16}}, node_options("decode")).out(0)};
     }).batch(2);
  bad.start();
  require_error([&] {
    while (bad.next()) {
    }
  }, {"node 'decode' (DecodeRaw)", "bytes[0] has 3 bytes, not a multiple of int16's 2"});
}

TEST_CASE("pipeline: a training graph dequeues the last stage itself, sharing the pipeline's resources", "[pipeline]") {
  auto p = input_pipeline::from_tensors({iota64(12), iota64(12, 2)});
  p.shuffle(4, 3).batch(6);
  p.start();
  graph g;
  auto batch = p.dequeue_into(g, "batch");
  CHECK(g.at(batch[0]).output_shape(0) == partial_shape({unknown_dim}));
  auto check = g.op("Sub", {batch[1], g.op("Add", {batch[0], batch[0]}).out(0)}).out(0);  // 2x - (x + x) = 0
  session_options o = one_thread();
  o.resources = p.resources();
  session s(g, o);
  std::vector<std::int64_t> seen;
  for (int i = 0; i < 2; ++i) {
    auto got = s.run({}, {batch[0], check});
    for (auto v : got[0].to_vector<std::int64_t>()) seen.push_back(v);
    for (auto v : got[1].to_vector<std::int64_t>()) CHECK(v == 0);  // the rows stay together
  }
  std::sort(seen.begin(), seen.end());
  std::vector<std::int64_t> want(12);
  std::iota(want.begin(), want.end(), 0);
  CHECK(seen == want);
}

TEST_CASE("pipeline: a pipeline repeating forever stops mid-epoch and joins its threads", "[pipeline]") {
  auto p = input_pipeline::from_tensors({iota64(1000)});
  p.map([](graph& g, const std::vector<output>& in) { return std::vector<output>{g.op("Neg", {in[0]}).out(0)}; }, 2)
      .shuffle(100, 1)
      .batch(10)
      .repeat(-1);
  p.start();
  for (int i = 0; i < 250; ++i) REQUIRE(p.next());  // 2.5 epochs
  p.stop();
  require_error([] { input_pipeline::from_tensors({iota64(3), iota64(4)}); }, {"every column needs the first dim 3"});
  require_error([] { input_pipeline::from_tensors({iota64(3)}).batch(0); }, {"batch: n must be at least 1"});
}

TEST_CASE("pipeline: shuffle_source permutes all the rows each epoch, the same way for a seed", "[pipeline]") {
  auto run = [](std::uint64_t seed) {
    auto p = input_pipeline::from_tensors({iota64(50), iota64(50, 3)});
    p.shuffle_source(seed).batch(16).repeat(2);
    p.start();
    std::vector<std::int64_t> rows;
    while (auto b = p.next()) {
      const auto x = (*b)[0].to_vector<std::int64_t>(), y = (*b)[1].to_vector<std::int64_t>();
      for (std::size_t i = 0; i < x.size(); ++i) {
        CHECK(y[i] == 3 * x[i]);  // the columns are permuted together
        rows.push_back(x[i]);
      }
    }
    return rows;
  };
  const auto a = run(5), b = run(5), c = run(6);
  REQUIRE(a.size() == 100);
  CHECK(a == b);
  CHECK(a != c);
  for (int epoch = 0; epoch < 2; ++epoch) {  // each epoch holds every row once
    std::vector<std::int64_t> e(a.begin() + 50 * epoch, a.begin() + 50 * (epoch + 1));
    std::sort(e.begin(), e.end());
    std::vector<std::int64_t> want(50);
    std::iota(want.begin(), want.end(), 0);
    CHECK(e == want);
  }
  CHECK(!std::equal(a.begin(), a.begin() + 50, a.begin() + 50));  // another order in epoch 2
}
