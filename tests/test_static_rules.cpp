// The ops' static shape rules (ops::static_rules, used by the DSL at compile time): their
// values worked out by hand, and the same as what the graph's shape functions infer at run
// time for operands with the same dims (-1 unknown).
#include "support/helpers.hpp"

#include <weft/ops/all.hpp>

using namespace weft;
namespace rules = weft::ops::static_rules;

template <std::size_t N>
using dims = std::array<std::int64_t, N>;

// Compile time, by hand.
static_assert(rules::broadcast<dims<3>{4, 1, 3}, dims<2>{5, 1}>() == dims<3>{4, 5, 3});
static_assert(rules::broadcast<dims<2>{-1, 3}, dims<1>{-1}>() == dims<2>{-1, 3});
static_assert(rules::broadcast<dims<1>{-1}, dims<1>{4}>() == dims<1>{4});
static_assert(rules::broadcast<dims<0>{}, dims<0>{}>() == dims<0>{});
static_assert(rules::matmul(dims<2>{5, 3}, dims<2>{4, 3}, false, true) == dims<2>{5, 4});
static_assert(rules::matmul(dims<2>{3, -1}, dims<2>{3, 7}, true, false) == dims<2>{-1, 7});
static_assert(rules::batch_matmul<dims<4>{2, 1, 5, 3}, dims<3>{6, 3, 4}, false, false>() == dims<4>{2, 6, 5, 4});
static_assert(rules::batch_matmul<dims<2>{3, 5}, dims<2>{4, 3}, true, true>() == dims<2>{5, 4});
static_assert(rules::matrix_determinant<dims<3>{7, 2, 2}>() == dims<1>{7});
// 28 -> SAME, stride 2: 14; VALID 5x5: 24; dilated 3x3 (extent 5) VALID: 24; unknown stays.
static_assert(rules::conv2d(dims<4>{-1, 28, 28, 1}, dims<4>{5, 5, 1, 32}, {1, 1}, {1, 1}, false) == dims<4>{-1, 24, 24, 32});
static_assert(rules::conv2d(dims<4>{8, 28, -1, 3}, dims<4>{3, 3, 3, 4}, {2, 2}, {1, 1}, true) == dims<4>{8, 14, -1, 4});
static_assert(rules::conv2d(dims<4>{1, 28, 28, 3}, dims<4>{3, 3, 3, 4}, {1, 1}, {2, 2}, false) == dims<4>{1, 24, 24, 4});
static_assert(rules::conv2d(dims<4>{1, 9, 9, 3}, dims<4>{-1, -1, 3, 4}, {2, 2}, {1, 1}, true) == dims<4>{1, 5, 5, 4});
static_assert(rules::conv2d(dims<4>{1, 9, 9, 3}, dims<4>{-1, -1, 3, 4}, {2, 2}, {1, 1}, false) == dims<4>{1, -1, -1, 4});
static_assert(rules::pool(dims<4>{-1, 7, 7, 16}, {2, 2}, {2, 2}, false) == dims<4>{-1, 3, 3, 16});
static_assert(rules::pool(dims<4>{-1, 7, 7, 16}, {2, 2}, {2, 2}, true) == dims<4>{-1, 4, 4, 16});
static_assert(rules::cross_entropy(dims<2>{-1, 10}, dims<1>{32}) == dims<1>{32});
static_assert(rules::reduce<dims<3>{2, 3, 4}, dims<1>{-1}, false>() == dims<2>{2, 3});
static_assert(rules::reduce<dims<3>{2, 3, 4}, dims<2>{0, 2}, true>() == dims<3>{1, 3, 1});
static_assert(rules::reduce<dims<3>{2, 3, 4}, dims<0>{}, false>() == dims<0>{});
static_assert(rules::reshape(dims<2>{6, 4}, dims<3>{2, -1, 3}) == dims<3>{2, 4, 3});
static_assert(rules::reshape(dims<2>{-1, 4}, dims<2>{-1, 2}) == dims<2>{-1, 2});
static_assert(rules::reshape(dims<2>{0, 4}, dims<2>{-1, 2}) == dims<2>{0, 2});
static_assert(rules::transpose(dims<3>{2, 3, 4}, dims<3>{2, 0, 1}) == dims<3>{4, 2, 3});
static_assert(rules::concat(1, dims<2>{-1, 3}, dims<2>{5, 4}, dims<2>{5, 1}) == dims<2>{5, 8});
static_assert(rules::concat(-1, dims<2>{2, 3}, dims<2>{2, -1}) == dims<2>{2, -1});
static_assert(rules::slice(dims<2>{6, -1}, dims<2>{1, 2}, dims<2>{-1, -1}) == dims<2>{5, -1});
static_assert(rules::pad(dims<2>{3, -1}, dims<4>{1, 2, 0, 4}) == dims<2>{6, -1});
static_assert(rules::tile(dims<3>{2, -1, -1}, dims<3>{3, 0, 2}) == dims<3>{6, 0, -1});
static_assert(rules::split(dims<2>{4, 9}, 1, 3) == dims<2>{4, 3});
static_assert(rules::gather<dims<3>{5, 6, 7}, dims<2>{2, 3}, 1>() == dims<4>{5, 2, 3, 7});
static_assert(rules::gather<dims<1>{5}, dims<0>{}, 0>() == dims<0>{});
static_assert(rules::gather_nd<dims<3>{5, 6, 7}, dims<2>{4, 2}>() == dims<2>{4, 7});
static_assert(rules::gather_nd<dims<2>{5, 6}, dims<1>{2}>() == dims<0>{});
static_assert(rules::one_hot(dims<1>{-1}, 10) == dims<2>{-1, 10});

namespace {

template <std::size_t N>
partial_shape as_partial(const dims<N>& d) {
  return partial_shape(std::vector<std::int64_t>(d.begin(), d.end()));
}

output input(graph& g, const partial_shape& s) { return g.placeholder(dtype::float32, s).out(0); }
output scalar_int(graph& g, std::int32_t v) { return g.constant(tensor::scalar(v)).out(0); }
output i32_vector(graph& g, std::vector<std::int32_t> v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return g.constant(tensor::from_vector(v, shape{n})).out(0);
}

// The run-time shape of op(inputs; attrs) equals the rule's dims.
template <std::size_t N>
void same_as_rule(graph& g, const char* op, std::vector<output> inputs, attr_map attrs, const dims<N>& rule) {
  const node& n = g.op(op, inputs, std::move(attrs));
  INFO(op << ": inferred " << n.output_shape(0) << ", rule " << as_partial(rule));
  CHECK(n.output_shape(0) == as_partial(rule));
}

}  // namespace

TEST_CASE("the static shape rules agree with the graph's shape functions") {
  ops::register_standard_ops();
  graph g;
  using V = std::vector<std::int64_t>;
  same_as_rule(g, "Add", {input(g, {4, 1, 3}), input(g, {5, 1})}, {}, rules::broadcast<dims<3>{4, 1, 3}, dims<2>{5, 1}>());
  same_as_rule(g, "Mul", {input(g, {-1, 3}), input(g, {-1})}, {}, rules::broadcast<dims<2>{-1, 3}, dims<1>{-1}>());
  same_as_rule(g, "MatMul", {input(g, {5, 3}), input(g, {4, 3})}, {{"transpose_b", true}},
               rules::matmul(dims<2>{5, 3}, dims<2>{4, 3}, false, true));
  same_as_rule(g, "BatchMatMulV2", {input(g, {2, 1, 5, 3}), input(g, {6, 3, 4})}, {},
               rules::batch_matmul<dims<4>{2, 1, 5, 3}, dims<3>{6, 3, 4}, false, false>());
  same_as_rule(g, "MatrixDeterminant", {input(g, {7, 2, 2})}, {}, rules::matrix_determinant<dims<3>{7, 2, 2}>());

  const auto window = [](std::int64_t h, std::int64_t w) { return V{1, h, w, 1}; };
  same_as_rule(g, "Conv2D", {input(g, {8, 28, -1, 3}), input(g, {3, 3, 3, 4})},
               {{"strides", window(2, 2)}, {"padding", std::string("SAME")}},
               rules::conv2d(dims<4>{8, 28, -1, 3}, dims<4>{3, 3, 3, 4}, {2, 2}, {1, 1}, true));
  same_as_rule(g, "Conv2D", {input(g, {1, 28, 27, 3}), input(g, {3, 3, 3, 4})},
               {{"strides", window(1, 2)}, {"padding", std::string("VALID")}, {"dilations", window(2, 3)}},
               rules::conv2d(dims<4>{1, 28, 27, 3}, dims<4>{3, 3, 3, 4}, {1, 2}, {2, 3}, false));
  same_as_rule(g, "MaxPool", {input(g, {-1, 7, 7, 16})},
               {{"ksize", window(2, 2)}, {"strides", window(2, 2)}, {"padding", std::string("VALID")}},
               rules::pool(dims<4>{-1, 7, 7, 16}, {2, 2}, {2, 2}, false));
  same_as_rule(g, "AvgPool", {input(g, {-1, 7, 9, 16})},
               {{"ksize", window(3, 2)}, {"strides", window(2, 3)}, {"padding", std::string("SAME")}},
               rules::pool(dims<4>{-1, 7, 9, 16}, {3, 2}, {2, 3}, true));

  same_as_rule(g, "Sum", {input(g, {2, 3, 4}), i32_vector(g, {0, 2})}, {{"keep_dims", true}},
               rules::reduce<dims<3>{2, 3, 4}, dims<2>{0, 2}, true>());
  same_as_rule(g, "Max", {input(g, {2, -1, 4}), i32_vector(g, {-1})}, {}, rules::reduce<dims<3>{2, -1, 4}, dims<1>{-1}, false>());
  same_as_rule(g, "Reshape", {input(g, {6, 4}), i32_vector(g, {2, -1, 3})}, {}, rules::reshape(dims<2>{6, 4}, dims<3>{2, -1, 3}));
  same_as_rule(g, "Transpose", {input(g, {2, 3, 4}), i32_vector(g, {2, 0, 1})}, {},
               rules::transpose(dims<3>{2, 3, 4}, dims<3>{2, 0, 1}));
  same_as_rule(g, "ConcatV2", {input(g, {-1, 3}), input(g, {5, 4}), input(g, {5, 1}), scalar_int(g, 1)}, {},
               rules::concat(1, dims<2>{-1, 3}, dims<2>{5, 4}, dims<2>{5, 1}));
  same_as_rule(g, "Slice", {input(g, {6, 7}), i32_vector(g, {1, 2}), i32_vector(g, {-1, 3})}, {},
               rules::slice(dims<2>{6, 7}, dims<2>{1, 2}, dims<2>{-1, 3}));
  same_as_rule(g, "Pad", {input(g, {3, 5}), g.constant(tensor::of<std::int32_t>({2, 2}, {1, 2, 0, 4})).out(0)}, {},
               rules::pad(dims<2>{3, 5}, dims<4>{1, 2, 0, 4}));
  same_as_rule(g, "Tile", {input(g, {2, 5}), i32_vector(g, {3, 0})}, {}, rules::tile(dims<2>{2, 5}, dims<2>{3, 0}));
  same_as_rule(g, "ExpandDims", {input(g, {2, -1}), scalar_int(g, -1)}, {}, rules::expand_dims(dims<2>{2, -1}, -1));
  same_as_rule(g, "ExpandDims", {input(g, {2, -1}), scalar_int(g, 1)}, {}, rules::expand_dims(dims<2>{2, -1}, 1));
  same_as_rule(g, "Squeeze", {input(g, {1, 4, 1})}, {}, rules::squeeze<dims<3>{1, 4, 1}>());
  same_as_rule(g, "Squeeze", {input(g, {1, -1, 1})}, {{"squeeze_dims", V{-1, 0}}}, rules::squeeze<dims<3>{1, -1, 1}, -1, 0>());
  same_as_rule(g, "Pack", {input(g, {-1, 3}), input(g, {4, -1}), input(g, {-1, -1})}, {{"N", std::int64_t{3}}, {"axis", std::int64_t{1}}},
               rules::stack(1, dims<2>{-1, 3}, dims<2>{4, -1}, dims<2>{-1, -1}));
  same_as_rule(g, "GatherV2", {input(g, {5, 6, 7}), g.placeholder(dtype::int32, {2, 3}).out(0), scalar_int(g, 1)}, {},
               rules::gather<dims<3>{5, 6, 7}, dims<2>{2, 3}, 1>());
  same_as_rule(g, "GatherNd", {input(g, {5, 6, 7}), g.placeholder(dtype::int32, {4, 2}).out(0)}, {},
               rules::gather_nd<dims<3>{5, 6, 7}, dims<2>{4, 2}>());
}
