// TensorFlow's ExpandDims, Squeeze, Pack, Unpack, ReverseV2, Range, AddN, StridedSlice,
// SplitV, the identities (StopGradient, Snapshot, EnsureShape, ...), LeakyRelu and
// ClipByValue: values against naive loops and hand values written here, the shapes the graph infers when it is built, edge cases (rank
// 0, empty, negative axes, every dtype kind) and the errors, which name the node.
#include "support/helpers.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace weft;
using test::eval;

namespace {
template <class T>
output tc(graph& g, shape s, std::vector<T> v) {
  return g.constant(tensor::from_vector(v, s));
}
output scalar_i32(graph& g, std::int32_t v) { return g.constant(tensor::scalar(v)); }
std::vector<float> seq(std::int64_t n, float from = 0) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = from + static_cast<float>(i);
  return v;
}
// The row-major index of idx in dims.
std::int64_t flat_index(const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& idx) {
  std::int64_t at = 0;
  for (std::size_t d = 0; d < dims.size(); ++d) at = at * dims[d] + idx[d];
  return at;
}
// Calls f with every index of dims, in row-major order.
template <class F>
void for_each_index(const std::vector<std::int64_t>& dims, F&& f) {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  std::vector<std::int64_t> idx(dims.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    f(idx);
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      if (++idx[static_cast<std::size_t>(d)] < dims[static_cast<std::size_t>(d)]) break;
      idx[static_cast<std::size_t>(d)] = 0;
    }
  }
}
}  // namespace

TEST_CASE("ExpandDims inserts a dim of 1 at any place from -rank - 1 to rank as a view of the input") {
  graph g;
  const output x = tc<float>(g, {2, 3}, seq(6));
  const std::vector<std::pair<std::int32_t, shape>> cases{{0, {1, 2, 3}}, {1, {2, 1, 3}}, {2, {2, 3, 1}},
                                                          {-1, {2, 3, 1}}, {-3, {1, 2, 3}}, {-2, {2, 1, 3}}};
  for (const auto& [dim, want] : cases) {
    INFO("dim " << dim);
    const node& e = g.op("ExpandDims", {x, scalar_i32(g, dim)});
    CHECK(e.output_shape(0) == partial_shape(want));  // known when the graph is built
    const tensor t = eval(g, e);
    CHECK(t.shape() == want);
    CHECK(t.to_vector<float>() == seq(6));
  }
  // Rank 0 to rank 1, a dim given as a one-element int64 vector, an empty input.
  CHECK(eval(g, g.op("ExpandDims", {g.constant(tensor::scalar(7.0)), tc<std::int64_t>(g, {1}, {0})})).shape() == shape{1});
  CHECK(eval(g, g.op("ExpandDims", {tc<float>(g, {0, 2}, {}), scalar_i32(g, 1)})).shape() == shape{0, 1, 2});
  test::require_error([&] { g.op("ExpandDims", {x, scalar_i32(g, 3)}, {}, "too_far"); },
                      {"too_far", "ExpandDims", "dim 3 is out of range [-3, 2]"});
  // A dim known only when run: the rank is still known, the error comes from the kernel.
  const output fed = g.placeholder(dtype::int32, partial_shape{}, "dim");
  const node& late = g.op("ExpandDims", {x, fed}, {}, "late");
  CHECK(late.output_shape(0) == partial_shape::unknown_of_rank(3));
  test::require_error([&] { eval(g, late, {{fed, tensor::scalar(std::int32_t{-4})}}); },
                      {"node 'late' (ExpandDims)", "dim -4 is out of range [-3, 2]"});
}

TEST_CASE("Squeeze removes the named dims of size 1 or every one") {
  graph g;
  const output x = tc<std::int32_t>(g, {1, 2, 1, 3, 1}, {1, 2, 3, 4, 5, 6});
  const auto squeeze = [&](std::vector<std::int64_t> dims) { return g.op("Squeeze", {x}, {{"squeeze_dims", dims}}).out(0); };
  CHECK(g.at(squeeze({})).output_shape(0) == partial_shape{2, 3});
  CHECK(eval(g, squeeze({})).shape() == shape{2, 3});
  CHECK(eval(g, squeeze({2})).shape() == shape{1, 2, 3, 1});
  CHECK(eval(g, squeeze({0, -1})).shape() == shape{2, 1, 3});
  CHECK(eval(g, squeeze({0, 4, 0})).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 2, 3, 4, 5, 6});  // a repeat is harmless
  // All ones to rank 0; an empty tensor keeps its 0.
  CHECK(eval(g, g.op("Squeeze", {tc<float>(g, {1, 1}, {5})})).shape() == shape{});
  CHECK(eval(g, g.op("Squeeze", {tc<float>(g, {0, 1}, {})})).shape() == shape{0});
  test::require_error([&] { g.op("Squeeze", {x}, {{"squeeze_dims", std::vector<std::int64_t>{1}}}, "not_one"); },
                      {"not_one", "(Squeeze)", "cannot squeeze dim 1", "its size is 2, not 1"});
  test::require_error([&] { g.op("Squeeze", {x}, {{"squeeze_dims", std::vector<std::int64_t>{5}}}, "far"); },
                      {"far", "squeeze_dims 5 is out of range for rank 5"});
  // A dim unknown when built: squeezing every 1 leaves the shape unknown; the kernel decides.
  const output fed = g.placeholder(dtype::float32, partial_shape{unknown_dim, 1}, "fed");
  const node& all = g.op("Squeeze", {fed}, {}, "all");
  CHECK_FALSE(all.output_shape(0).rank_known());
  CHECK(g.op("Squeeze", {fed}, {{"squeeze_dims", std::vector<std::int64_t>{1}}}).output_shape(0) == partial_shape{unknown_dim});
  CHECK(eval(g, all, {{fed, tensor::from_vector(std::vector<float>{4}, shape{1, 1})}}).shape() == shape{});
  const node& named = g.op("Squeeze", {fed}, {{"squeeze_dims", std::vector<std::int64_t>{0}}}, "named");
  test::require_error([&] { eval(g, named, {{fed, tensor::from_vector(std::vector<float>{1, 2}, shape{2, 1})}}); },
                      {"node 'named' (Squeeze)", "cannot squeeze dim 0", "its size is 2"});
}

TEST_CASE("Pack stacks values along a new axis and Unpack takes them apart") {
  graph g;
  const std::vector<std::int64_t> dims{2, 3};
  std::vector<output> values;
  for (int i = 0; i < 4; ++i) values.push_back(tc<float>(g, {2, 3}, seq(6, 10.0f * static_cast<float>(i))));
  for (std::int64_t axis : {0, 1, 2, -1, -3}) {
    INFO("axis " << axis);
    const node& p = g.op("Pack", values, {{"N", std::int64_t{4}}, {"axis", axis}});
    const std::int64_t a = axis < 0 ? axis + 3 : axis;
    std::vector<std::int64_t> out_dims = dims;
    out_dims.insert(out_dims.begin() + a, 4);
    CHECK(p.output_shape(0) == partial_shape(out_dims));
    const tensor t = eval(g, p);
    REQUIRE(t.shape() == shape(out_dims));
    // Naive: out[..., i at a, ...] = values[i][...].
    std::vector<float> want(24);
    for_each_index(out_dims, [&](const std::vector<std::int64_t>& idx) {
      std::vector<std::int64_t> in = idx;
      const std::int64_t i = in[static_cast<std::size_t>(a)];
      in.erase(in.begin() + a);
      want[static_cast<std::size_t>(flat_index(out_dims, idx))] = 10.0f * static_cast<float>(i) + static_cast<float>(flat_index(dims, in));
    });
    CHECK(t.to_vector<float>() == want);
    // Unpack along the same axis gives the values back.
    const node& u = g.op("Unpack", {p.out(0)}, {{"num", std::int64_t{4}}, {"axis", axis}});
    for (int i = 0; i < 4; ++i) {
      CHECK(u.output_shape(i) == partial_shape{2, 3});
      CHECK(eval(g, u.out(i)).to_vector<float>() == seq(6, 10.0f * static_cast<float>(i)));
    }
  }
  // Scalars to a vector and back; strings; one value; empty values.
  const node& v = g.op("Pack", {g.constant(tensor::scalar(std::int64_t{5})), g.constant(tensor::scalar(std::int64_t{-2}))},
                       {{"N", std::int64_t{2}}});
  CHECK(eval(g, v).to_vector<std::int64_t>() == std::vector<std::int64_t>{5, -2});
  CHECK(eval(g, g.op("Unpack", {v.out(0)}, {{"num", std::int64_t{2}}}).out(1)).shape() == shape{});
  const node& s = g.op("Pack", {g.constant(tensor::from_vector(std::vector<std::string>{"a", "bc"})),
                                g.constant(tensor::from_vector(std::vector<std::string>{"def", ""}))},
                       {{"N", std::int64_t{2}}, {"axis", std::int64_t{1}}});
  CHECK(eval(g, s).to_vector<std::string>() == std::vector<std::string>{"a", "def", "bc", ""});
  CHECK(eval(g, g.op("Pack", {values[0]}, {{"N", std::int64_t{1}}})).shape() == shape{1, 2, 3});
  CHECK(eval(g, g.op("Pack", {tc<float>(g, {0}, {}), tc<float>(g, {0}, {})}, {{"N", std::int64_t{2}}, {"axis", std::int64_t{1}}}))
            .shape() == shape{0, 2});
  const node& none = g.op("Unpack", {tc<float>(g, {2, 0}, {})}, {{"num", std::int64_t{0}}, {"axis", std::int64_t{1}}});
  CHECK(none.num_outputs() == 0);
  // Errors: shapes that differ, an axis out of range, num that is not the dim.
  test::require_error([&] { g.op("Pack", {values[0], tc<float>(g, {3, 2}, seq(6))}, {{"N", std::int64_t{2}}}, "mixed"); },
                      {"mixed", "(Pack)", "input 1 has shape [3,2]", "[2,3]"});
  test::require_error([&] { g.op("Pack", {values[0], values[1]}, {{"N", std::int64_t{2}}, {"axis", std::int64_t{3}}}, "far"); },
                      {"far", "axis 3 is out of range [-3, 2]"});
  test::require_error([&] { g.op("Unpack", {values[0]}, {{"num", std::int64_t{3}}}, "wrong_num"); },
                      {"wrong_num", "(Unpack)", "has size 2, not num = 3"});
  test::require_error([&] { g.op("Unpack", {g.constant(tensor::scalar(1.0f))}, {{"num", std::int64_t{1}}}, "scalar"); },
                      {"scalar", "cannot unpack a scalar"});
  // Shapes known only when run: the kernels check them.
  const output fed = g.placeholder(dtype::float32, partial_shape::unknown_rank(), "fed");
  const node& late = g.op("Pack", {values[0], fed}, {{"N", std::int64_t{2}}}, "late");
  CHECK(late.output_shape(0) == partial_shape{2, 2, 3});
  test::require_error([&] { eval(g, late, {{fed, tensor::from_vector(seq(3), shape{3})}}); },
                      {"node 'late' (Pack)", "value 1 has shape [3]", "one shape"});
  const node& late_u = g.op("Unpack", {fed}, {{"num", std::int64_t{2}}}, "late_u");
  test::require_error([&] { eval(g, late_u.out(0), {{fed, tensor::from_vector(seq(3), shape{3})}}); },
                      {"node 'late_u' (Unpack)", "has size 3, not num = 2"});
}

TEST_CASE("ReverseV2 reverses the order along each named dim") {
  graph g;
  const std::vector<std::int64_t> dims{2, 3, 4};
  const output x = tc<float>(g, {2, 3, 4}, seq(24));
  const std::vector<std::vector<std::int32_t>> cases{{}, {0}, {1}, {2}, {0, 2}, {-1, 1}, {0, 1, 2}};
  for (const auto& axes : cases) {
    INFO("axes " << axes.size() << (axes.empty() ? 0 : axes[0]));
    std::vector<bool> flip(3);
    for (auto a : axes) flip[static_cast<std::size_t>(a < 0 ? a + 3 : a)] = true;
    std::vector<float> want(24);
    for_each_index(dims, [&](const std::vector<std::int64_t>& idx) {
      std::vector<std::int64_t> from = idx;
      for (std::size_t d = 0; d < 3; ++d)
        if (flip[d]) from[d] = dims[d] - 1 - idx[d];
      want[static_cast<std::size_t>(flat_index(dims, idx))] = static_cast<float>(flat_index(dims, from));
    });
    const node& r = g.op("ReverseV2", {x, tc<std::int32_t>(g, {static_cast<std::int64_t>(axes.size())}, axes)});
    CHECK(r.output_shape(0) == partial_shape{2, 3, 4});
    CHECK(eval(g, r).to_vector<float>() == want);
  }
  // int64 axes, strings, rank 0 with no axes, an empty tensor.
  CHECK(eval(g, g.op("ReverseV2", {g.constant(tensor::from_vector(std::vector<std::string>{"x", "yz", ""})), tc<std::int64_t>(g, {1}, {0})}))
            .to_vector<std::string>() == std::vector<std::string>{"", "yz", "x"});
  CHECK(eval(g, g.op("ReverseV2", {g.constant(tensor::scalar(3.0)), tc<std::int32_t>(g, {0}, {})})).to_vector<double>() ==
        std::vector<double>{3.0});
  CHECK(eval(g, g.op("ReverseV2", {tc<float>(g, {3, 0}, {}), tc<std::int32_t>(g, {1}, {0})})).shape() == shape{3, 0});
  test::require_error([&] { g.op("ReverseV2", {x, tc<std::int32_t>(g, {2}, {1, -2})}, {}, "twice"); },
                      {"twice", "(ReverseV2)", "axis 1 is named twice"});
  test::require_error([&] { g.op("ReverseV2", {x, tc<std::int32_t>(g, {1}, {3})}, {}, "far"); }, {"far", "axis 3 is out of range for rank 3"});
  test::require_error([&] { g.op("ReverseV2", {x, scalar_i32(g, 0)}, {}, "not_vector"); }, {"not_vector", "axis must have rank 1"});
}

TEST_CASE("Range counts as TensorFlow does for integers and floating point") {
  graph g;
  const auto range = [&](auto start, auto limit, auto delta) {
    return g.op("Range", {g.constant(tensor::scalar(start)), g.constant(tensor::scalar(limit)), g.constant(tensor::scalar(delta))},
                {{"Tidx", dtype_of<decltype(start)>}});
  };
  // Integers: against a loop.
  const auto naive = [](std::int64_t start, std::int64_t limit, std::int64_t delta) {
    std::vector<std::int64_t> v;
    for (std::int64_t x = start; delta > 0 ? x < limit : x > limit; x += delta) v.push_back(x);
    return v;
  };
  for (auto [s, l, d] : std::vector<std::array<std::int64_t, 3>>{{0, 5, 1}, {3, 18, 3}, {3, 19, 3}, {-5, 5, 4}, {10, 1, -3}, {4, 4, 1}, {4, 4, -2}}) {
    INFO(s << " " << l << " " << d);
    const node& r = range(s, l, d);
    const auto want = naive(s, l, d);
    CHECK(r.output_shape(0) == partial_shape{static_cast<std::int64_t>(want.size())});
    CHECK(eval(g, r).to_vector<std::int64_t>() == want);
    std::vector<std::int32_t> want32(want.begin(), want.end());
    CHECK(eval(g, range(static_cast<std::int32_t>(s), static_cast<std::int32_t>(l), static_cast<std::int32_t>(d))).to_vector<std::int32_t>() == want32);
  }
  // The widest int64 range's count does not overflow: from INT64_MIN by 2^62 to INT64_MAX.
  const std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
  CHECK(eval(g, range(lo, hi, std::int64_t{1} << 62)).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{lo, lo / 2, 0, -(lo / 2)});
  // Floating point: start + i delta, ceil(|limit - start| / delta) elements.
  CHECK(eval(g, range(0.5f, 2.0f, 0.5f)).to_vector<float>() == std::vector<float>{0.5f, 1.0f, 1.5f});
  CHECK(eval(g, range(0.0, 1.1, 0.25)).to_vector<double>() == std::vector<double>{0, 0.25, 0.5, 0.75, 1.0});
  CHECK(eval(g, range(1.0, -1.0, -0.75)).to_vector<double>() == std::vector<double>{1.0, 0.25, -0.5});
  const tensor tenths = eval(g, range(0.0, 1.0, 0.1));
  REQUIRE(tenths.num_elements() == 10);
  for (int i = 0; i < 10; ++i) CHECK(tenths.to_vector<double>()[static_cast<std::size_t>(i)] == static_cast<double>(i) * 0.1);
  // Errors at graph building (constants) and when run (fed).
  test::require_error([&] { range(std::int32_t{0}, std::int32_t{5}, std::int32_t{0}); }, {"(Range)", "delta must not be 0"});
  test::require_error([&] { range(std::int32_t{5}, std::int32_t{0}, std::int32_t{1}); }, {"start 5 is above limit 0"});
  test::require_error([&] { range(0.0, 1.0, -1.0); }, {"start 0 is below limit 1"});
  test::require_error([&] { range(0.0, std::numeric_limits<double>::infinity(), 1.0); }, {"no finite element count"});
  test::require_error([&] { range(0.0, 1.0, std::nan("")); }, {"no finite element count"});
  const output fed = g.placeholder(dtype::int32, partial_shape{}, "delta");
  const node& late = g.op("Range", {scalar_i32(g, 0), scalar_i32(g, 3), fed}, {}, "late");
  CHECK(late.output_shape(0) == partial_shape{unknown_dim});
  test::require_error([&] { eval(g, late, {{fed, tensor::scalar(std::int32_t{0})}}); }, {"node 'late' (Range)", "delta must not be 0"});
  CHECK(eval(g, late, {{fed, tensor::scalar(std::int32_t{2})}}).to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 2});
}

TEST_CASE("AddN sums inputs of one shape without broadcasting") {
  graph g;
  const output a = tc<float>(g, {2, 3}, seq(6)), b = tc<float>(g, {2, 3}, seq(6, 100)), d = tc<float>(g, {2, 3}, seq(6, -7));
  const node& sum = g.op("AddN", {a, b, d, a}, {{"N", std::int64_t{4}}});
  CHECK(sum.output_shape(0) == partial_shape{2, 3});
  std::vector<float> want(6);
  for (std::size_t i = 0; i < 6; ++i) want[i] = 2 * static_cast<float>(i) + (100 + static_cast<float>(i)) + (-7 + static_cast<float>(i));
  CHECK(eval(g, sum).to_vector<float>() == want);
  CHECK(eval(g, g.op("AddN", {a}, {{"N", std::int64_t{1}}})).to_vector<float>() == seq(6));
  // Large enough for several blocks and threads: against a loop.
  std::vector<double> x(10007), y(10007), z(10007);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(double(i)), y[i] = std::cos(double(i)), z[i] = 1e-3 * double(i);
  const std::vector<double> got =
      eval(g, g.op("AddN", {tc<double>(g, {10007}, x), tc<double>(g, {10007}, y), tc<double>(g, {10007}, z)}, {{"N", std::int64_t{3}}}))
          .to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(got[i] == (x[i] + y[i]) + z[i]);
  // Signed integers wrap, rank 0, empty; float16 rounds once.
  const std::int32_t big = std::numeric_limits<std::int32_t>::max();
  CHECK(eval(g, g.op("AddN", {g.constant(tensor::scalar(big)), g.constant(tensor::scalar(std::int32_t{1})), g.constant(tensor::scalar(std::int32_t{1}))},
                     {{"N", std::int64_t{3}}}))
            .to_vector<std::int32_t>() == std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min() + 1});
  CHECK(eval(g, g.op("AddN", {tc<float>(g, {0, 4}, {}), tc<float>(g, {0, 4}, {})}, {{"N", std::int64_t{2}}})).shape() == shape{0, 4});
  const output h = g.constant(tensor::from_vector(std::vector<half>{half(2048.0f)})), one = g.constant(tensor::from_vector(std::vector<half>{half(1.0f)}));
  // 2048 + 1 + 1 in float16 one add at a time is 2048 (2049 rounds to even); summed in float32 and rounded once, 2050.
  CHECK(static_cast<float>(eval(g, g.op("AddN", {h, one, one}, {{"N", std::int64_t{3}}})).to_vector<half>()[0]) == 2050.0f);
  test::require_error([&] { g.op("AddN", {a, tc<float>(g, {3}, seq(3))}, {{"N", std::int64_t{2}}}, "broadcast"); },
                      {"broadcast", "(AddN)", "input 1 has shape [3]"});
  const output fed = g.placeholder(dtype::float32, partial_shape::unknown_rank(), "fed");
  const node& late = g.op("AddN", {a, fed}, {{"N", std::int64_t{2}}}, "late");
  test::require_error([&] { eval(g, late, {{fed, tensor::from_vector(seq(3), shape{3})}}); },
                      {"node 'late' (AddN)", "input 1 has shape [3]", "does not broadcast"});
}

namespace {
// StridedSlice(x, begin, end, strides) with masks, int32 spec.
const node& strided(graph& g, output x, std::vector<std::int32_t> b, std::vector<std::int32_t> e, std::vector<std::int32_t> s,
                    ops::strided_slice_masks m = {}, const char* name = nullptr) {
  const auto vec = [&](const std::vector<std::int32_t>& v) {
    return g.constant(tensor::from_vector(v, shape{static_cast<std::int64_t>(v.size())}));
  };
  attr_map a{{"begin_mask", m.begin}, {"end_mask", m.end}, {"ellipsis_mask", m.ellipsis}, {"new_axis_mask", m.new_axis},
             {"shrink_axis_mask", m.shrink_axis}};
  return name ? g.op("StridedSlice", {x, vec(b), vec(e), vec(s)}, a, name) : g.op("StridedSlice", {x, vec(b), vec(e), vec(s)}, a);
}
}  // namespace

TEST_CASE("StridedSlice takes Python's slices: TensorFlow's documented and tested examples") {
  graph g;
  // TensorFlow's own kernel test (slice_ops_test.py): every stride negative.
  const output i = tc<std::int32_t>(g, {3, 4, 10},
                                    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 5, 3, 1, 7, 9, 2, 4, 6, 8, 0, 4, 5, 2, 4, 3, 7, 6, 8, 9, 4,
                                     5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 4, 3, 4, 5, 7, 6, 5, 3, 4, 5, 8, 7, 6, 5, 4, 3, 2, 1, 8, 7, 7, 1, 7, 1, 8, 1, 8, 1, 3, 1,
                                     7, 5, 7, 5, 7, 5, 7, 5, 7, 5, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 9, 8, 7, 9, 8, 7, 9, 8, 7, 9, 9, 9, 5, 5, 6, 6, 3, 3, 6, 6});
  const node& back = strided(g, i, {2, 2, 6}, {0, 0, 2}, {-1, -1, -2});
  CHECK(back.output_shape(0) == partial_shape{2, 2, 2});
  CHECK(eval(g, back).to_vector<std::int32_t>() == std::vector<std::int32_t>{9, 8, 1, 1, 2, 4, 5, 7});
  // tf.strided_slice's documentation.
  const output t = tc<float>(g, {3, 2, 3}, {1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6});
  CHECK(eval(g, strided(g, t, {1, 0, 0}, {2, 1, 3}, {1, 1, 1})).to_vector<float>() == std::vector<float>{3, 3, 3});
  const tensor two = eval(g, strided(g, t, {1, 0, 0}, {2, 2, 3}, {1, 1, 1}));
  CHECK(two.shape() == shape{1, 2, 3});
  CHECK(two.to_vector<float>() == std::vector<float>{3, 3, 3, 4, 4, 4});
  CHECK(eval(g, strided(g, t, {1, -1, 0}, {2, -3, 3}, {1, -1, 1})).to_vector<float>() == std::vector<float>{4, 4, 4, 3, 3, 3});
  // x[1:10, ...] with the first entry an index: [3, 4, 5] of [[0, 1, 2], [3, 4, 5]].
  const output m = tc<float>(g, {2, 3}, seq(6));
  const node& row = strided(g, m, {1, 0}, {10, 3}, {1, 1}, {.shrink_axis = 1});
  CHECK(row.output_shape(0) == partial_shape{3});
  CHECK(eval(g, row).to_vector<float>() == std::vector<float>{3, 4, 5});
}

TEST_CASE("StridedSlice's masks (begin and end and ellipsis and new axes and indices) against loops") {
  graph g;
  // foo[5:, :, :3] on 7x8x9: x[5 + a, b, c].
  const output foo = tc<float>(g, {7, 8, 9}, seq(7 * 8 * 9));
  const node& a = strided(g, foo, {5, 0, 0}, {0, 0, 3}, {1, 1, 1}, {.begin = 0b110, .end = 0b011});
  CHECK(a.output_shape(0) == partial_shape{2, 8, 3});
  std::vector<float> want;
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 8; ++q)
      for (int r = 0; r < 3; ++r) want.push_back(static_cast<float>((5 + p) * 72 + q * 9 + r));
  CHECK(eval(g, a).to_vector<float>() == want);
  // foo[::-1] of 8 elements, foo[::-3]: from the end.
  const output eight = tc<float>(g, {8}, seq(8));
  CHECK(eval(g, strided(g, eight, {0}, {0}, {-1}, {.begin = 1, .end = 1})).to_vector<float>() ==
        std::vector<float>{7, 6, 5, 4, 3, 2, 1, 0});
  CHECK(eval(g, strided(g, eight, {0}, {0}, {-3}, {.begin = 1, .end = 1})).to_vector<float>() == std::vector<float>{7, 4, 1});
  CHECK(eval(g, strided(g, eight, {1}, {8}, {3})).to_vector<float>() == std::vector<float>{1, 4, 7});
  // Clamped, empty, backwards-empty ranges.
  CHECK(eval(g, strided(g, eight, {-100}, {100}, {1})).to_vector<float>() == seq(8));
  CHECK(eval(g, strided(g, eight, {5}, {2}, {1})).shape() == shape{0});
  CHECK(eval(g, strided(g, eight, {2}, {5}, {-1})).shape() == shape{0});
  // foo[3:5, ..., 4:5] on 10x3x3x10: x[3 + p, q, r, 4].
  const output big = tc<float>(g, {10, 3, 3, 10}, seq(900));
  const node& e = strided(g, big, {3, 0, 4}, {5, 0, 5}, {1, 1, 1}, {.ellipsis = 0b010});
  CHECK(e.output_shape(0) == partial_shape{2, 3, 3, 1});
  want.clear();
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 3; ++q)
      for (int r = 0; r < 3; ++r) want.push_back(static_cast<float>((3 + p) * 90 + q * 30 + r * 10 + 4));
  CHECK(eval(g, e).to_vector<float>() == want);
  // foo[..., 2] and foo[1, ...]: an index beside the ellipsis.
  CHECK(eval(g, strided(g, big, {0, 2}, {0, 3}, {1, 1}, {.ellipsis = 1, .shrink_axis = 0b10})).shape() == shape{10, 3, 3});
  CHECK(eval(g, strided(g, big, {1, 0}, {2, 0}, {1, 1}, {.ellipsis = 0b10, .shrink_axis = 1})).shape() == shape{3, 3, 10});
  // m[:, newaxis, 1] on 2x3: [[1], [4]]; m[newaxis, ..., newaxis]: 1x2x3x1.
  const output m = tc<float>(g, {2, 3}, seq(6));
  const node& n = strided(g, m, {0, 0, 1}, {0, 0, 2}, {1, 1, 1}, {.begin = 1, .end = 1, .new_axis = 0b010, .shrink_axis = 0b100});
  CHECK(n.output_shape(0) == partial_shape{2, 1});
  CHECK(eval(g, n).to_vector<float>() == std::vector<float>{1, 4});
  CHECK(eval(g, strided(g, m, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {.ellipsis = 0b010, .new_axis = 0b101})).shape() == shape{1, 2, 3, 1});
  // tf.shape(x)[0] and [-1]: a scalar from a dims vector; strings; a rank-0 input with new axes.
  const output dims = tc<std::int32_t>(g, {3}, {5, 7, 9});
  const tensor first = eval(g, strided(g, dims, {0}, {1}, {1}, {.shrink_axis = 1}));
  CHECK(first.shape() == shape{});
  CHECK(first.to_vector<std::int32_t>() == std::vector<std::int32_t>{5});
  CHECK(eval(g, strided(g, dims, {-1}, {0}, {1}, {.shrink_axis = 1})).to_vector<std::int32_t>() == std::vector<std::int32_t>{9});
  CHECK(eval(g, strided(g, g.constant(tensor::from_vector(std::vector<std::string>{"a", "b", "c"})), {0}, {0}, {-2}, {.begin = 1, .end = 1}))
            .to_vector<std::string>() == std::vector<std::string>{"c", "a"});
  CHECK(eval(g, strided(g, g.constant(tensor::scalar(2.5)), {0}, {0}, {1}, {.new_axis = 1})).to_vector<double>() ==
        std::vector<double>{2.5});
  // The whole input, in order: the input itself.
  CHECK(eval(g, strided(g, m, {0, 0}, {2, 3}, {1, 1})).to_vector<float>() == seq(6));
}

TEST_CASE("StridedSlice and StridedSliceGrad name what is wrong with a spec when built and when run") {
  graph g;
  const output m = tc<float>(g, {2, 3}, seq(6));
  test::require_error([&] { strided(g, m, {5}, {6}, {1}, {.shrink_axis = 1}, "far"); },
                      {"node 'far' (StridedSlice)", "index 5 is out of range for input dim 0 of size 2"});
  test::require_error([&] { strided(g, m, {0}, {1}, {0}, {}, "still"); }, {"still", "the stride of input dim 0 is 0"});
  test::require_error([&] { strided(g, m, {0, 0}, {1, 1}, {1, 1}, {.ellipsis = 0b11}, "two"); }, {"two", "at most one ellipsis"});
  test::require_error([&] { strided(g, m, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, {}, "deep"); },
                      {"deep", "the spec indexes input dim 2; the input has 2 dims"});
  test::require_error([&] { strided(g, m, {0, 0}, {1}, {1, 1}, {}, "ragged"); }, {"ragged", "must have one length"});
  test::require_error([&] { strided(g, m, {1}, {0}, {-1}, {.shrink_axis = 1}, "back"); }, {"back", "negative stride -1"});
  // The spec fed: the rank is known, the sizes come when run, and so do the errors.
  const output b = g.placeholder(dtype::int32, partial_shape{2}, "b");
  const node& late = g.op("StridedSlice", {m, b, tc<std::int32_t>(g, {2}, {2, 3}), tc<std::int32_t>(g, {2}, {1, 1})}, {}, "late");
  CHECK(late.output_shape(0) == partial_shape{unknown_dim, unknown_dim});
  CHECK(eval(g, late, {{b, tensor::from_vector(std::vector<std::int32_t>{1, 1})}}).to_vector<float>() == std::vector<float>{4, 5});
  const node& late_index = g.op("StridedSlice", {m, b, tc<std::int32_t>(g, {2}, {2, 3}), tc<std::int32_t>(g, {2}, {1, 1})},
                                {{"shrink_axis_mask", std::int64_t{1}}}, "late_index");
  CHECK(late_index.output_shape(0) == partial_shape{unknown_dim});
  test::require_error([&] { eval(g, late_index, {{b, tensor::from_vector(std::vector<std::int32_t>{-3, 0})}}); },
                      {"node 'late_index' (StridedSlice)", "index -3 is out of range for input dim 0 of size 2"});
}

TEST_CASE("StridedSliceGrad writes dy into zeros where the slice was taken") {
  graph g;
  const auto vec = [&](std::vector<std::int32_t> v) { return tc<std::int32_t>(g, {static_cast<std::int64_t>(v.size())}, v); };
  // x[::2, 3:0:-2] of a 3x4: rows 0 and 2, columns 3 and 1.
  const node& grad = g.op("StridedSliceGrad", {vec({3, 4}), vec({0, 3}), vec({0, 0}), vec({2, -2}), tc<float>(g, {2, 2}, {1, 2, 3, 4})},
                          {{"begin_mask", std::int64_t{1}}, {"end_mask", std::int64_t{1}}});
  CHECK(grad.output_shape(0) == partial_shape{3, 4});
  CHECK(eval(g, grad).to_vector<float>() == std::vector<float>{0, 2, 0, 1, 0, 0, 0, 0, 0, 4, 0, 3});
  // An index: dy of rank 1 into a 2x3's row 1.
  CHECK(eval(g, g.op("StridedSliceGrad", {vec({2, 3}), vec({1}), vec({2}), vec({1}), tc<double>(g, {3}, {7, 8, 9})},
                     {{"shrink_axis_mask", std::int64_t{1}}}))
            .to_vector<double>() == std::vector<double>{0, 0, 0, 7, 8, 9});
  test::require_error([&] { g.op("StridedSliceGrad", {vec({3, 4}), vec({0}), vec({1}), vec({1}), tc<float>(g, {2, 4}, seq(8))}, {}, "wrong_dy"); },
                      {"wrong_dy", "dy has shape [2,4] where the slice has [1,4]"});
}

TEST_CASE("SplitV cuts parts of the given sizes and one -1 takes the rest") {
  graph g;
  const output x = tc<float>(g, {2, 5}, seq(10));
  const node& parts = g.op("SplitV", {x, tc<std::int64_t>(g, {3}, {1, -1, 0}), scalar_i32(g, -1)}, {{"num_split", std::int64_t{3}}});
  CHECK(parts.output_shape(0) == partial_shape{2, 1});
  CHECK(parts.output_shape(1) == partial_shape{2, 4});
  CHECK(parts.output_shape(2) == partial_shape{2, 0});
  CHECK(eval(g, parts.out(0)).to_vector<float>() == std::vector<float>{0, 5});
  CHECK(eval(g, parts.out(1)).to_vector<float>() == std::vector<float>{1, 2, 3, 4, 6, 7, 8, 9});
  CHECK(eval(g, parts.out(2)).shape() == shape{2, 0});
  const node& rows = g.op("SplitV", {x, tc<std::int32_t>(g, {2}, {2, 0}), scalar_i32(g, 0)}, {{"num_split", std::int64_t{2}}});
  CHECK(eval(g, rows.out(0)).to_vector<float>() == seq(10));
  test::require_error([&] { g.op("SplitV", {x, tc<std::int64_t>(g, {2}, {1, 3}), scalar_i32(g, 1)}, {{"num_split", std::int64_t{2}}}, "short"); },
                      {"short", "(SplitV)", "sizes sum to 4, not the dim's 5"});
  test::require_error([&] { g.op("SplitV", {x, tc<std::int64_t>(g, {2}, {-1, -1}), scalar_i32(g, 1)}, {{"num_split", std::int64_t{2}}}, "wild"); },
                      {"wild", "size_splits has -1 at entry 1"});
  test::require_error([&] { g.op("SplitV", {x, tc<std::int64_t>(g, {2}, {6, -1}), scalar_i32(g, 1)}, {{"num_split", std::int64_t{2}}}, "over"); },
                      {"over", "sum to 6, more than the dim's 5"});
  test::require_error([&] { g.op("SplitV", {x, tc<std::int64_t>(g, {3}, {1, 1, 3}), scalar_i32(g, 1)}, {{"num_split", std::int64_t{2}}}, "count"); },
                      {"count", "size_splits has 3 entries for num_split = 2"});
  const output fed = g.placeholder(dtype::int64, partial_shape{2}, "sizes");
  const node& late = g.op("SplitV", {x, fed, scalar_i32(g, 1)}, {{"num_split", std::int64_t{2}}}, "late");
  CHECK(late.output_shape(1) == partial_shape{2, unknown_dim});
  CHECK(eval(g, late.out(1), {{fed, tensor::from_vector(std::vector<std::int64_t>{2, 3})}}).to_vector<float>() ==
        std::vector<float>{2, 3, 4, 7, 8, 9});
  test::require_error([&] { eval(g, late.out(0), {{fed, tensor::from_vector(std::vector<std::int64_t>{2, 2})}}); },
                      {"node 'late' (SplitV)", "sizes sum to 4, not the dim's 5"});
}

TEST_CASE("StopGradient and PreventGradient and Snapshot pass their input on and EnsureShape checks it") {
  graph g;
  const output x = tc<float>(g, {2, 2}, {1, 2, 3, 4});
  for (const char* op : {"StopGradient", "PreventGradient", "Snapshot", "EnsureShape"}) {
    INFO(op);
    const node& y = std::string(op) == "EnsureShape" ? g.op(op, {x}, {{"shape", partial_shape{unknown_dim, 2}}}) : g.op(op, {x});
    CHECK(y.output_shape(0) == partial_shape{2, 2});
    CHECK(eval(g, y).to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  }
  CHECK(eval(g, g.op("Snapshot", {g.constant(tensor::from_vector(std::vector<std::string>{"a", "bc"}))})).to_vector<std::string>() ==
        std::vector<std::string>{"a", "bc"});
  test::require_error([&] { g.op("EnsureShape", {x}, {{"shape", partial_shape{2, 3}}}, "wrong"); },
                      {"wrong", "(EnsureShape)", "the input's shape [2,2] is not the shape [2,3] it must have"});
  // A placeholder of unknown shape gets EnsureShape's static shape, checked when run.
  const output fed = g.placeholder(dtype::float32, partial_shape::unknown_rank(), "fed");
  const node& checked = g.op("EnsureShape", {fed}, {{"shape", partial_shape{unknown_dim, 3}}}, "checked");
  CHECK(checked.output_shape(0) == partial_shape{unknown_dim, 3});
  CHECK(eval(g, checked, {{fed, tensor::from_vector(seq(6), shape{2, 3})}}).shape() == shape{2, 3});
  test::require_error([&] { eval(g, checked, {{fed, tensor::from_vector(seq(6), shape{3, 2})}}); },
                      {"node 'checked' (EnsureShape)", "shape of tensor [3,2] is not compatible with expected shape [?,3]"});
}

TEST_CASE("LeakyRelu and LeakyReluGrad scale the negative side by alpha rounded to the dtype") {
  graph g;
  const std::vector<double> xs{-2, -0.5, -0.0, 0.0, 0.25, 3, std::nan(""), -std::numeric_limits<double>::infinity()};
  const output x = tc<double>(g, {8}, xs);
  for (double alpha : {0.2, 0.01, 1.5}) {
    INFO("alpha " << alpha);
    const auto y = eval(g, g.op("LeakyRelu", {x}, {{"alpha", alpha}})).to_vector<double>();
    const auto d = eval(g, g.op("LeakyReluGrad", {tc<double>(g, {8}, std::vector<double>(8, 2.0)), x}, {{"alpha", alpha}})).to_vector<double>();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double want = xs[i] > 0 ? xs[i] : alpha * xs[i];
      if (std::isnan(want)) CHECK(std::isnan(y[i]));
      else CHECK(y[i] == want);
      CHECK(std::signbit(y[i]) == std::signbit(want));
      CHECK(d[i] == (xs[i] > 0 ? 2.0 : 2.0 * alpha));
    }
  }
  // The default alpha is 0.2; float16 rounds it first (0.2 is 0.199951171875 in float16).
  CHECK(eval(g, g.op("LeakyRelu", {tc<float>(g, {2}, {-1, 4})})).to_vector<float>() == std::vector<float>{-0.2f, 4});
  const tensor h = eval(g, g.op("LeakyRelu", {g.constant(tensor::from_vector(std::vector<half>{half(-1.0f)}))}));
  CHECK(static_cast<float>(h.to_vector<half>()[0]) == -0.199951171875f);
  test::require_error([&] { g.op("LeakyReluGrad", {tc<float>(g, {2}, {1, 2}), tc<float>(g, {3}, {1, 2, 3})}, {}, "mismatch"); },
                      {"mismatch", "gradients and features must have the same shape"});
}

TEST_CASE("ClipByValue clamps to scalar or elementwise bounds as TensorFlow does") {
  graph g;
  const output t = tc<float>(g, {2, 3}, {-3, -1, 0, 1, 2, std::nanf("")});
  const auto clip = [&](output lo, output hi) { return eval(g, g.op("ClipByValue", {t, lo, hi})).to_vector<float>(); };
  const auto y = clip(g.constant(tensor::scalar(-1.5f)), g.constant(tensor::scalar(1.0f)));
  CHECK(std::vector<float>(y.begin(), y.end() - 1) == std::vector<float>{-1.5f, -1, 0, 1, 1});
  CHECK(std::isnan(y[5]));  // NaN stays NaN
  // Elementwise bounds; a min above its max gives the min (max(min(t, max), min)).
  const auto z = clip(tc<float>(g, {2, 3}, {0, 0, 0, 5, 0, 0}), tc<float>(g, {2, 3}, {1, 1, 1, 2, 1, 1}));
  CHECK(std::vector<float>(z.begin(), z.end() - 1) == std::vector<float>{0, 0, 0, 5, 1});
  CHECK(eval(g, g.op("ClipByValue", {tc<std::int32_t>(g, {4}, {-7, 0, 7, 100}), g.constant(tensor::scalar(std::int32_t{-5})),
                                     g.constant(tensor::scalar(std::int32_t{50}))}))
            .to_vector<std::int32_t>() == std::vector<std::int32_t>{-5, 0, 7, 50});
  CHECK(eval(g, g.op("ClipByValue", {tc<float>(g, {0}, {}), g.constant(tensor::scalar(0.0f)), g.constant(tensor::scalar(1.0f))})).shape() ==
        shape{0});
  test::require_error([&] { g.op("ClipByValue", {t, tc<float>(g, {3}, {0, 0, 0}), g.constant(tensor::scalar(1.0f))}, {}, "row"); },
                      {"row", "(ClipByValue)", "clip_value_min must be a scalar or have t's shape [2,3], got [3]"});
}

TEST_CASE("Where gives the coordinates of the true elements in row-major order") {
  graph g;
  const node& w = g.op("Where", {g.constant(tensor::from_vector(std::vector<bool>{true, false, false, true, true, false}, shape{2, 3}))});
  CHECK(w.output_shape(0) == partial_shape{unknown_dim, 2});
  const tensor got = eval(g, w);
  CHECK(got.shape() == shape{3, 2});
  CHECK(got.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 0, 1, 0, 1, 1});
  // Numbers: non-zero is true, -0 is not, NaN is; rank 0; empty; none true.
  CHECK(eval(g, g.op("Where", {tc<float>(g, {5}, {0.0f, -0.0f, std::nanf(""), 2.0f, 0.0f})})).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{2, 3});
  CHECK(eval(g, g.op("Where", {g.constant(tensor::scalar(std::int32_t{7}))})).shape() == shape{1, 0});
  CHECK(eval(g, g.op("Where", {g.constant(tensor::scalar(std::int32_t{0}))})).shape() == shape{0, 0});
  CHECK(eval(g, g.op("Where", {tc<double>(g, {2, 0, 3}, {})})).shape() == shape{0, 3});
  CHECK(eval(g, g.op("Where", {tc<std::int64_t>(g, {2, 2}, {0, 0, 0, 0})})).shape() == shape{0, 2});
}
