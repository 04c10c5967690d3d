// Typed input pipelines (dsl/input.hpp): a dataset's element dtypes and static shapes follow
// its stages in the type (batch adds a dyn first dim, map takes them from the typed
// expressions it returns), next() gives typed tensors with the values a naive loop gives,
// and input() feeds a typed model in a client_session that shares the pipeline's resources.
#include <weft/dsl.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

using namespace weft;

namespace {

// Rows r of [r, r + 1, r + 2, r + 3] as uint8, and labels r % 3.
std::pair<tensor_of<std::uint8_t, 2>, tensor_of<std::uint8_t, 1>> rows(std::int64_t n) {
  std::vector<std::uint8_t> x, y;
  for (std::int64_t r = 0; r < n; ++r) {
    for (int c = 0; c < 4; ++c) x.push_back(static_cast<std::uint8_t>(r + c));
    y.push_back(static_cast<std::uint8_t>(r % 3));
  }
  return {tensor_of<std::uint8_t, 2>(x, {n, 4}), tensor_of<std::uint8_t, 1>(y, {n})};
}

}  // namespace

TEST_CASE("dsl: a dataset's element types follow its stages, and next() gives typed batches", "[dsl][dataset]") {
  using pixels = component<std::uint8_t, 4>;
  using label = component<std::uint8_t>;
  auto [xs, ys] = rows(10);
  auto data = dataset<pixels, label>::from_tensors(xs, ys)
                  .shuffle_source(9)
                  .batch(4)
                  .map([](auto x, auto y) { return std::tuple{cast<float>(x) * 0.5f, cast<std::int32_t>(y)}; })
                  .prefetch(2);
  STATIC_REQUIRE(std::is_same_v<decltype(data), dataset<component<float, dyn, 4>, component<std::int32_t, dyn>>>);
  data.start();
  std::vector<std::int64_t> seen;
  std::vector<std::int64_t> sizes;
  while (auto batch = data.next()) {
    auto& [x, y] = *batch;
    STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(x)>, tensor_of<float, 2>>);
    const auto xv = x.untyped().to_vector<float>();
    const auto yv = y.untyped().to_vector<std::int32_t>();
    sizes.push_back(static_cast<std::int64_t>(yv.size()));
    for (std::size_t i = 0; i < yv.size(); ++i) {
      const auto r = static_cast<std::int64_t>(xv[i * 4] * 2);  // the row's first pixel is its index
      for (int c = 0; c < 4; ++c) CHECK(xv[i * 4 + static_cast<std::size_t>(c)] == 0.5f * static_cast<float>(r + c));
      CHECK(yv[i] == r % 3);
      seen.push_back(r);
    }
  }
  CHECK(sizes == std::vector<std::int64_t>{4, 4, 2});
  // The rows in std::shuffle's order with std::mt19937_64(9), as a host loop draws them.
  std::vector<std::int64_t> want(10);
  std::iota(want.begin(), want.end(), 0);
  std::mt19937_64 random(9);
  std::shuffle(want.begin(), want.end(), random);
  CHECK(seen == want);
}

TEST_CASE("dsl: a typed model reads a dataset's batches through input()", "[dsl][dataset]") {
  auto [xs, ys] = rows(6);
  auto data = dataset<component<std::uint8_t, 4>, component<std::uint8_t>>::from_tensors(xs, ys)
                  .batch(3)
                  .map([](auto x, auto y) { return std::tuple{cast<float>(x), cast<float>(y)}; });
  data.start();
  auto [x, y] = data.input();
  STATIC_REQUIRE(std::is_same_v<decltype(x), handle<float, dyn, 4>>);
  // Per batch: the sum of its pixels and of its labels, from one dequeue.
  auto total = reduce_sum(x);
  auto labels = reduce_sum(y);
  client_options o;
  o.session.resources = data.resources();
  client_session s(o);
  auto [t1, l1] = s.run(fetch(total, labels));
  auto [t2, l2] = s.run(fetch(total, labels));
  // Rows 0-2: pixels 0..5 in overlapping runs: sum over r of (4r + 6); labels 0 + 1 + 2.
  CHECK(t1.untyped().scalar_value<float>() == (6 + 10 + 14));
  CHECK(l1.untyped().scalar_value<float>() == 3);
  CHECK(t2.untyped().scalar_value<float>() == (18 + 22 + 26));
  CHECK(l2.untyped().scalar_value<float>() == 0 + 1 + 2);
  try {
    s.run(total);
    FAIL("expected the end of the input");
  } catch (const error& e) {
    CHECK(e.code() == error_code::out_of_range);
  }
  // Columns whose rows do not fit the components are refused at once.
  CHECK_THROWS_WITH((dataset<component<std::uint8_t, 5>>::from_tensors(xs)),
                    Catch::Contains("column 0 has rows of shape [4], not the component's [5]"));
}
