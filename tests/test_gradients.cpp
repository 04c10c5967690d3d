// Symbolic gradients of graphs built op by op (graph/gradients.hpp): every rule against a
// Jacobian from central differences in float64, accumulation over several consumers,
// zeros for unconnected inputs, clear errors, and linear growth of the backward graph.
#include "support/gradient_check.hpp"
#include "support/helpers.hpp"

#include <cmath>
#include <functional>
#include <vector>

using namespace weft;
using namespace weft::test;

namespace {

using weft::test::op;

output port(output o, int p) {
  o.port = p;
  return o;
}
output ints(graph& g, std::vector<std::int64_t> v) { return g.constant(tensor::from_vector(v, shape{static_cast<std::int64_t>(v.size())})); }

// x + 3 I (x [..., n, n] with entries in [-0.5, 0.5]): far from singular.
output well_conditioned(graph& g, output x) {
  const auto n = g.at(x).output_shape(0)[g.at(x).output_shape(0).rank() - 1];
  std::vector<double> eye(static_cast<std::size_t>(n * n));
  for (std::int64_t i = 0; i < n; ++i) eye[static_cast<std::size_t>(i * n + i)] = 3;
  return op(g, "Add", {x, g.constant(tensor::from_vector(eye, shape{n, n}))});
}

// Window attrs: padding, stride and dilation (or pooling window, when ksize > 0) in both dims.
attr_map window(const char* padding, std::int64_t stride, std::int64_t dilation, std::int64_t ksize) {
  attr_map a{{"padding", std::string(padding)}, {"strides", std::vector<std::int64_t>{1, stride, stride, 1}}};
  if (ksize) a.set("ksize", std::vector<std::int64_t>{1, ksize, ksize, 1});
  if (dilation) a.set("dilations", std::vector<std::int64_t>{1, dilation, dilation, 1});
  return a;
}
builder conv(const char* name, std::int64_t stride, std::int64_t dilation, const char* padding) {
  return [=](graph& g, const std::vector<output>& x) { return op(g, name, {x[0], x[1]}, window(padding, stride, dilation, 0)); };
}
builder pool(const char* name, std::int64_t ksize, std::int64_t stride, const char* padding) {
  return [=](graph& g, const std::vector<output>& x) { return op(g, name, {x[0]}, window(padding, stride, 0, ksize)); };
}

}  // namespace

TEST_CASE("gradients: every rule matches central differences in float64", "[gradients]") {
  struct rule_case {
    const char* name;
    builder build;
    std::vector<input_spec> inputs;
  };
  auto unary = [](const char* name) { return [name](graph& g, const std::vector<output>& x) { return op(g, name, {x[0]}); }; };
  auto binary = [](const char* name) {
    return [name](graph& g, const std::vector<output>& x) { return op(g, name, {x[0], x[1]}); };
  };
  const input_spec m23{{2, 3}, -1.5, 1.5}, pos23{{2, 3}, 0.5, 2.0}, row3{{3}, -1.2, 1.3}, col21{{2, 1}, 0.6, 1.7};
  std::vector<rule_case> cases{
      {"Identity", unary("Identity"), {m23}},
      {"Neg", unary("Neg"), {m23}},
      {"Square", unary("Square"), {m23}},
      {"Sqrt", unary("Sqrt"), {pos23}},
      {"Rsqrt", unary("Rsqrt"), {pos23}},
      {"Exp", unary("Exp"), {m23}},
      {"Log", unary("Log"), {pos23}},
      {"Tanh", unary("Tanh"), {m23}},
      {"Sigmoid", unary("Sigmoid"), {m23}},
      {"Relu", unary("Relu"), {m23}},  // spread() keeps every value away from 0
      {"Sin", unary("Sin"), {m23}},
      {"Cos", unary("Cos"), {m23}},
      {"Tan", unary("Tan"), {{{2, 3}, -1.2, 1.2}}},
      {"Asin", unary("Asin"), {{{2, 3}, -0.8, 0.8}}},
      {"Acos", unary("Acos"), {{{2, 3}, -0.8, 0.8}}},
      {"Atan", unary("Atan"), {m23}},
      {"Sinh", unary("Sinh"), {m23}},
      {"Cosh", unary("Cosh"), {m23}},
      {"Asinh", unary("Asinh"), {m23}},
      {"Acosh", unary("Acosh"), {{{2, 3}, 1.2, 3.0}}},
      {"Atanh", unary("Atanh"), {{{2, 3}, -0.8, 0.8}}},
      {"Atan2, a row of xs broadcast", binary("Atan2"), {m23, {{3}, 0.5, 1.5}}},
      {"FloorMod, between the steps", binary("FloorMod"), {m23, pos23}},
      {"FloorDiv, flat between its steps", binary("FloorDiv"), {m23, pos23}},
      {"Reciprocal", unary("Reciprocal"), {pos23}},
      {"Log1p", unary("Log1p"), {{{2, 3}, -0.6, 2.0}}},
      {"Expm1", unary("Expm1"), {m23}},
      {"Softplus", unary("Softplus"), {{{2, 3}, -4, 4}}},
      {"Erf", unary("Erf"), {m23}},
      {"Floor, flat between its steps", unary("Floor"), {{{2, 3}, 0.1, 0.9}}},
      {"Round, flat between its steps", unary("Round"), {{{2, 3}, 0.6, 1.4}}},
      {"Sign, flat away from 0", unary("Sign"), {{{2, 3}, 0.2, 1.2}}},
      {"SquaredDifference, a row broadcast", binary("SquaredDifference"), {m23, row3}},
      {"Elu", unary("Elu"), {m23}},
      {"CheckNumerics", [](graph& g, const std::vector<output>& x) {
         return op(g, "CheckNumerics", {x[0]}, {{"message", std::string("x")}});
       }, {m23}},
      {"Selu", unary("Selu"), {m23}},
      {"Relu6, on both sides of 0 and 6", unary("Relu6"), {{{2, 3}, -1.5, 7.5}}},
      {"Abs", unary("Abs"), {m23}},
      {"ReluGrad, in its gradients", [](graph& g, const std::vector<output>& x) {
         auto f = g.constant(tensor::of<double>({2, 3}, {-1, 0.5, 2, -0.3, 0, 4}));
         return op(g, "ReluGrad", {x[0], f});
       }, {m23}},
      {"Add, a row broadcast", binary("Add"), {m23, row3}},
      {"Sub, a column broadcast", binary("Sub"), {m23, col21}},
      {"Mul, a row by a column", binary("Mul"), {row3, col21}},
      {"Div", binary("Div"), {m23, pos23}},
      {"Div, a scalar divisor", binary("Div"), {m23, {{}, 0.7, 0.7}}},
      {"Pow", binary("Pow"), {pos23, m23}},
      {"Maximum", binary("Maximum"), {m23, {{2, 3}, -1.4, 1.6}}},
      {"Minimum, broadcast", binary("Minimum"), {m23, row3}},
      {"SelectV2, broadcast", [](graph& g, const std::vector<output>& x) {
         auto c = g.constant(tensor::from_vector(std::vector<bool>{true, false, true}, shape{3}));
         return op(g, "SelectV2", {c, x[0], x[1]});
       }, {m23, row3}},
      {"Select, whole rows", [](graph& g, const std::vector<output>& x) {
         auto c = g.constant(tensor::from_vector(std::vector<bool>{false, true}, shape{2}));
         return op(g, "Select", {c, x[0], x[1]});
       }, {m23, m23}},
      {"MatMul", [](graph& g, const std::vector<output>& x) { return op(g, "MatMul", {x[0], x[1]}); },
       {{{2, 3}, -1, 1}, {{3, 4}, -1, 1}}},
      {"MatMul, a transposed", [](graph& g, const std::vector<output>& x) {
         return op(g, "MatMul", {x[0], x[1]}, {{"transpose_a", true}});
       }, {{{3, 2}, -1, 1}, {{3, 4}, -1, 1}}},
      {"MatMul, b transposed", [](graph& g, const std::vector<output>& x) {
         return op(g, "MatMul", {x[0], x[1]}, {{"transpose_b", true}});
       }, {{{2, 3}, -1, 1}, {{4, 3}, -1, 1}}},
      {"MatMul, both transposed", [](graph& g, const std::vector<output>& x) {
         return op(g, "MatMul", {x[0], x[1]}, {{"transpose_a", true}, {"transpose_b", true}});
       }, {{{3, 2}, -1, 1}, {{4, 3}, -1, 1}}},
      {"Sum over axis 1", [](graph& g, const std::vector<output>& x) { return op(g, "Sum", {x[0], ints(g, {1})}); },
       {{{2, 3, 2}, -1, 1}}},
      {"Sum, kept dims", [](graph& g, const std::vector<output>& x) {
         return op(g, "Sum", {x[0], ints(g, {0, 2})}, {{"keep_dims", true}});
       }, {{{2, 3, 2}, -1, 1}}},
      {"Sum of everything", [](graph& g, const std::vector<output>& x) { return op(g, "Sum", {x[0], ints(g, {0, 1})}); },
       {m23}},
      {"Mean over axis 0", [](graph& g, const std::vector<output>& x) { return op(g, "Mean", {x[0], ints(g, {0})}); },
       {{{4, 3}, -1, 1}}},
      {"Reshape", [](graph& g, const std::vector<output>& x) { return op(g, "Reshape", {x[0], ints(g, {3, 2})}); }, {m23}},
      {"BroadcastTo", [](graph& g, const std::vector<output>& x) { return op(g, "BroadcastTo", {x[0], ints(g, {2, 2, 3})}); },
       {row3}},
      {"SumToShape", [](graph& g, const std::vector<output>& x) { return op(g, "SumToShape", {x[0], ints(g, {1, 3})}); },
       {{{4, 3}, -1, 1}}},
      {"Max over axis 1", [](graph& g, const std::vector<output>& x) { return op(g, "Max", {x[0], ints(g, {1})}); },
       {{{2, 3, 2}, -1, 1}}},  // spread() values are distinct: one maximum per row
      {"Min, kept dims", [](graph& g, const std::vector<output>& x) {
         return op(g, "Min", {x[0], ints(g, {0, 2})}, {{"keep_dims", true}});
       }, {{{2, 3, 2}, -1, 1}}},
      {"Prod over axis 1", [](graph& g, const std::vector<output>& x) { return op(g, "Prod", {x[0], ints(g, {1})}); },
       {{{2, 3, 2}, -1, 1}}},
      {"Prod over axes 2 and 0, kept dims", [](graph& g, const std::vector<output>& x) {
         return op(g, "Prod", {x[0], ints(g, {2, 0})}, {{"keep_dims", true}});
       }, {{{2, 3, 2}, -1, 1}}},
      {"Prod of everything, axes -1 and 0", [](graph& g, const std::vector<output>& x) {
         return op(g, "Prod", {x[0], ints(g, {-1, 0})});
       }, {m23}},
      {"Prod over no axis", [](graph& g, const std::vector<output>& x) {
         return op(g, "Prod", {x[0], g.constant(tensor::from_vector(std::vector<std::int32_t>{}, shape{0}))});
       }, {m23}},
      {"Cumsum along axis 1", [](graph& g, const std::vector<output>& x) {
         return op(g, "Cumsum", {x[0], g.constant(tensor::scalar(1))});
       }, {{{2, 3, 2}, -1, 1}}},
      {"Cumsum, exclusive and reverse", [](graph& g, const std::vector<output>& x) {
         return op(g, "Cumsum", {x[0], g.constant(tensor::scalar(0))}, {{"exclusive", true}, {"reverse", true}});
       }, {{{3, 2}, -1, 1}}},
      {"Cumprod along axis -1", [](graph& g, const std::vector<output>& x) {
         return op(g, "Cumprod", {x[0], g.constant(tensor::scalar(-1))});
       }, {pos23}},  // TensorFlow's rule divides by x: away from 0
      {"Cumprod, exclusive and reverse", [](graph& g, const std::vector<output>& x) {
         return op(g, "Cumprod", {x[0], g.constant(tensor::scalar(0))}, {{"exclusive", true}, {"reverse", true}});
       }, {{{3, 2}, 0.5, 2.0}}},
      {"GatherV2 along axis 0, an index twice", [](graph& g, const std::vector<output>& x) {
         return op(g, "GatherV2", {x[0], ints(g, {2, 0, 2}), g.constant(tensor::scalar(0))});
       }, {{{4, 3}, -1, 1}}},
      {"GatherV2 along axis 1, indices [2, 2]", [](graph& g, const std::vector<output>& x) {
         auto idx = g.constant(tensor::from_vector(std::vector<std::int32_t>{1, 0, 1, 2}, shape{2, 2}));
         return op(g, "GatherV2", {x[0], idx, g.constant(tensor::scalar(1))});
       }, {{{2, 3, 2}, -1, 1}}},
      {"GatherV2 along the last axis", [](graph& g, const std::vector<output>& x) {
         return op(g, "GatherV2", {x[0], ints(g, {1}), g.constant(tensor::scalar(-1))});
       }, {m23}},
      {"UnsortedSegmentSum, empty segments", [](graph& g, const std::vector<output>& x) {
         return op(g, "UnsortedSegmentSum", {x[0], ints(g, {1, 0, 1, 3}), g.constant(tensor::scalar(5))});
       }, {{{4, 3}, -1, 1}}},
      {"GatherNd, rows and a tuple twice", [](graph& g, const std::vector<output>& x) {
         auto idx = g.constant(tensor::from_vector(std::vector<std::int32_t>{2, 1, 0, 0, 2, 1}, shape{3, 2}));
         return op(g, "GatherNd", {x[0], idx});
       }, {{{3, 2, 2}, -1, 1}}},
      {"ScatterNd, a slice twice", [](graph& g, const std::vector<output>& x) {
         return op(g, "ScatterNd", {g.constant(tensor::from_vector(std::vector<std::int64_t>{3, 0, 3}, shape{3, 1})), x[0], ints(g, {4, 2})});
       }, {{{3, 2}, -1, 1}}},
      {"TensorScatterUpdate", [](graph& g, const std::vector<output>& x) {
         return op(g, "TensorScatterUpdate", {x[0], g.constant(tensor::from_vector(std::vector<std::int64_t>{2, 0}, shape{2, 1})), x[1]});
       }, {{{4, 3}, -1, 1}, m23}},
      {"TensorScatterAdd, a slice twice", [](graph& g, const std::vector<output>& x) {
         return op(g, "TensorScatterAdd", {x[0], g.constant(tensor::from_vector(std::vector<std::int64_t>{1, 2, 1, 2}, shape{2, 2})), x[1]});
       }, {{{2, 3, 2}, -1, 1}, {{2, 2}, -1, 1}}},
      {"Fill", [](graph& g, const std::vector<output>& x) { return op(g, "Fill", {ints(g, {2, 3}), x[0]}); },
       {{{}, -1, 1}}},
      {"BatchMatMulV2, a matrix broadcast over the batch", binary("BatchMatMulV2"), {{{2, 2, 3}, -1, 1}, {{3, 4}, -1, 1}}},
      {"BatchMatMulV2, both adjoint", [](graph& g, const std::vector<output>& x) {
         return op(g, "BatchMatMulV2", {x[0], x[1]}, {{"adj_x", true}, {"adj_y", true}});
       }, {{{2, 3, 2}, -1, 1}, {{1, 4, 3}, -1, 1}}},
      {"BatchMatMulV2, y adjoint", [](graph& g, const std::vector<output>& x) {
         return op(g, "BatchMatMulV2", {x[0], x[1]}, {{"adj_y", true}});
       }, {{{2, 2, 3}, -1, 1}, {{2, 4, 3}, -1, 1}}},
      {"MatrixInverse", [](graph& g, const std::vector<output>& x) { return op(g, "MatrixInverse", {well_conditioned(g, x[0])}); },
       {{{2, 3, 3}, -0.5, 0.5}}},
      {"MatrixInverse, adjoint", [](graph& g, const std::vector<output>& x) {
         return op(g, "MatrixInverse", {well_conditioned(g, x[0])}, {{"adjoint", true}});
       }, {{{3, 3}, -0.5, 0.5}}},
      {"MatrixDeterminant", [](graph& g, const std::vector<output>& x) {
         return op(g, "MatrixDeterminant", {well_conditioned(g, x[0])});
       }, {{{2, 3, 3}, -0.5, 0.5}}},
      {"Transpose", [](graph& g, const std::vector<output>& x) { return op(g, "Transpose", {x[0], ints(g, {2, 0, 1})}); },
       {{{2, 3, 2}, -1, 1}}},
      {"ConcatV2 along axis 1", [](graph& g, const std::vector<output>& x) {
         return op(g, "ConcatV2", {x[0], x[1], g.constant(tensor::scalar(1))});
       }, {m23, {{2, 2}, -1, 1}}},
      {"ConcatV2 along axis -2, three values", [](graph& g, const std::vector<output>& x) {
         return op(g, "ConcatV2", {x[0], x[1], x[0], g.constant(tensor::scalar(-2))});
       }, {{{1, 3}, -1, 1}, m23}},
      {"Split, both parts used", [](graph& g, const std::vector<output>& x) {
         const node& parts = g.op("Split", {g.constant(tensor::scalar(1)), x[0]}, {{"num_split", std::int64_t{2}}});
         return op(g, "Add", {op(g, "Mul", {parts.out(0), parts.out(0)}), parts.out(1)});
       }, {{{2, 4}, -1, 1}}},
      {"Split, one part used", [](graph& g, const std::vector<output>& x) {
         return port(op(g, "Split", {g.constant(tensor::scalar(0)), x[0]}, {{"num_split", std::int64_t{3}}}), 2);
       }, {{{3, 2}, -1, 1}}},
      {"Slice", [](graph& g, const std::vector<output>& x) { return op(g, "Slice", {x[0], ints(g, {1, 1}), ints(g, {2, -1})}); },
       {{{3, 4}, -1, 1}}},
      {"Pad", [](graph& g, const std::vector<output>& x) {
         return op(g, "Pad", {x[0], g.constant(tensor::from_vector(std::vector<std::int32_t>{1, 0, 2, 1}, shape{2, 2}))});
       }, {m23}},
      {"Tile", [](graph& g, const std::vector<output>& x) { return op(g, "Tile", {x[0], ints(g, {2, 1, 3})}); },
       {{{2, 3, 1}, -1, 1}}},
      {"ExpandDims", [](graph& g, const std::vector<output>& x) { return op(g, "ExpandDims", {x[0], g.constant(tensor::scalar(-2))}); },
       {m23}},
      {"Squeeze, named", [](graph& g, const std::vector<output>& x) {
         return op(g, "Squeeze", {x[0]}, {{"squeeze_dims", std::vector<std::int64_t>{-2}}});
       }, {{{2, 1, 3}, -1, 1}}},
      {"Squeeze, every 1", unary("Squeeze"), {{{1, 3, 1}, -1, 1}}},
      {"Pack", [](graph& g, const std::vector<output>& x) {
         return op(g, "Pack", {x[0], x[1], x[0]}, {{"N", std::int64_t{3}}, {"axis", std::int64_t{1}}});
       }, {m23, {{2, 3}, -0.7, 0.9}}},
      {"Pack, last axis", [](graph& g, const std::vector<output>& x) {
         return op(g, "Pack", {x[0], x[1]}, {{"N", std::int64_t{2}}, {"axis", std::int64_t{-1}}});
       }, {row3, {{3}, 0.2, 1.1}}},
      {"Unpack, one output unused", [](graph& g, const std::vector<output>& x) {
         const node& parts = g.op("Unpack", {x[0]}, {{"num", std::int64_t{3}}, {"axis", std::int64_t{1}}});
         return op(g, "Add", {op(g, "Mul", {parts.out(0), parts.out(0)}), parts.out(2)});
       }, {m23}},
      {"ReverseV2", [](graph& g, const std::vector<output>& x) {
         return op(g, "ReverseV2", {x[0], g.constant(tensor::from_vector(std::vector<std::int32_t>{0, -1}))});
       }, {{{2, 3, 2}, -1, 1}}},
      {"StridedSlice, backwards with an index and a new axis", [](graph& g, const std::vector<output>& x) {
         return op(g, "StridedSlice", {x[0], ints(g, {2, 0, 0, 3}), ints(g, {0, 0, 0, 0}), ints(g, {-1, 1, 1, -2})},
                   {{"end_mask", std::int64_t{1}}, {"new_axis_mask", std::int64_t{0b100}}, {"shrink_axis_mask", std::int64_t{0b10}}});
       }, {{{3, 2, 4}, -1, 1}}},
      {"StridedSlice, ellipsis", [](graph& g, const std::vector<output>& x) {
         return op(g, "StridedSlice", {x[0], ints(g, {0, 1}), ints(g, {0, 3}), ints(g, {1, 1})}, {{"ellipsis_mask", std::int64_t{1}}});
       }, {{{2, 2, 3}, -1, 1}}},
      {"StridedSliceGrad", [](graph& g, const std::vector<output>& x) {
         return op(g, "StridedSliceGrad", {ints(g, {3, 4}), ints(g, {0, 3}), ints(g, {0, 0}), ints(g, {2, -2}), x[0]},
                   {{"begin_mask", std::int64_t{1}}, {"end_mask", std::int64_t{1}}});
       }, {{{2, 2}, -1, 1}}},
      {"SplitV, one output unused", [](graph& g, const std::vector<output>& x) {
         const node& parts = g.op("SplitV", {x[0], ints(g, {1, -1, 2}), g.constant(tensor::scalar(std::int32_t{1}))},
                                  {{"num_split", std::int64_t{3}}});
         return op(g, "Add", {op(g, "Sum", {op(g, "Mul", {parts.out(0), parts.out(0)}), ints(g, {1})}, {{"keep_dims", true}}),
                              op(g, "Sum", {parts.out(2), ints(g, {1})}, {{"keep_dims", true}})});
       }, {{{2, 5}, -1, 1}}},
      {"Snapshot", unary("Snapshot"), {m23}},
      {"EnsureShape", [](graph& g, const std::vector<output>& x) {
         return op(g, "EnsureShape", {x[0]}, {{"shape", partial_shape{unknown_dim, 3}}});
       }, {m23}},
      {"LeakyRelu", [](graph& g, const std::vector<output>& x) { return op(g, "LeakyRelu", {x[0]}, {{"alpha", 0.3}}); }, {m23}},
      {"LeakyReluGrad", [](graph& g, const std::vector<output>& x) {
         return op(g, "LeakyReluGrad", {x[0], x[1]}, {{"alpha", 1.7}});
       }, {m23, {{2, 3}, -1.3, 1.4}}},
      {"ClipByValue, a scalar min and elementwise max", [](graph& g, const std::vector<output>& x) {
         return op(g, "ClipByValue", {x[0], x[1], x[2]});
       }, {m23, {{}, -0.61, -0.59}, {{2, 3}, 0.2, 0.9}}},
      {"AddN", [](graph& g, const std::vector<output>& x) { return op(g, "AddN", {x[0], x[1], x[0]}, {{"N", std::int64_t{3}}}); },
       {m23, {{2, 3}, -0.3, 0.8}}},
      {"BiasAdd", binary("BiasAdd"), {m23, row3}},
      {"BiasAdd, rank 3", binary("BiasAdd"), {{{2, 2, 3}, -1, 1}, row3}},
      {"BiasAddGrad", unary("BiasAddGrad"), {{{4, 3}, -1, 1}}},
      {"Softmax", unary("Softmax"), {m23}},
      {"LogSoftmax", unary("LogSoftmax"), {m23}},
      {"L2Loss", unary("L2Loss"), {m23}},
      // As in TensorFlow, the features' gradient assumes each row of labels sums to 1: here
      // the labels are x1 normalized, so the chain rule through the Div covers every direction.
      {"SoftmaxCrossEntropyWithLogits, loss", [](graph& g, const std::vector<output>& x) {
         auto labels = op(g, "Div", {x[1], op(g, "Sum", {x[1], ints(g, {1})}, {{"keep_dims", true}})});
         return op(g, "SoftmaxCrossEntropyWithLogits", {x[0], labels});
       }, {m23, {{2, 3}, 0.1, 0.9}}},
      {"SoftmaxCrossEntropyWithLogits, backprop", [](graph& g, const std::vector<output>& x) {
         return port(op(g, "SoftmaxCrossEntropyWithLogits", {x[0], x[1]}), 1);
       }, {m23, {{2, 3}, 0.1, 0.9}}},
      {"SparseSoftmaxCrossEntropyWithLogits, loss", [](graph& g, const std::vector<output>& x) {
         return op(g, "SparseSoftmaxCrossEntropyWithLogits", {x[0], ints(g, {2, 0})});
       }, {m23}},
      {"SparseSoftmaxCrossEntropyWithLogits, backprop", [](graph& g, const std::vector<output>& x) {
         return port(op(g, "SparseSoftmaxCrossEntropyWithLogits", {x[0], ints(g, {1, 2})}), 1);
       }, {m23}},
      {"Conv2D, SAME, stride 1", conv("Conv2D", 1, 1, "SAME"), {{{2, 4, 4, 2}, -1, 1}, {{3, 3, 2, 3}, -1, 1}}},
      {"Conv2D, VALID, stride 2", conv("Conv2D", 2, 1, "VALID"), {{{1, 5, 4, 2}, -1, 1}, {{2, 2, 2, 2}, -1, 1}}},
      {"Conv2D, SAME, stride 2, dilation 2", conv("Conv2D", 2, 2, "SAME"), {{{1, 5, 5, 1}, -1, 1}, {{2, 2, 1, 2}, -1, 1}}},
      {"Conv2DBackpropInput", [](graph& g, const std::vector<output>& x) {
         return op(g, "Conv2DBackpropInput", {ints(g, {1, 5, 5, 2}), x[0], x[1]}, window("SAME", 2, 1, 0));
       }, {{{3, 3, 2, 2}, -1, 1}, {{1, 3, 3, 2}, -1, 1}}},
      {"Conv2DBackpropFilter", [](graph& g, const std::vector<output>& x) {
         return op(g, "Conv2DBackpropFilter", {x[0], ints(g, {2, 3, 2, 2}), x[1]}, window("VALID", 1, 1, 0));
       }, {{{1, 4, 4, 2}, -1, 1}, {{1, 3, 2, 2}, -1, 1}}},
      {"MaxPool, VALID", pool("MaxPool", 2, 2, "VALID"), {{{2, 4, 4, 2}, -1, 1}}},  // spread() values are distinct: no ties
      {"MaxPool, SAME, overlapping", pool("MaxPool", 3, 2, "SAME"), {{{1, 5, 5, 2}, -1, 1}}},
      {"AvgPool, SAME, overlapping", pool("AvgPool", 3, 2, "SAME"), {{{1, 5, 5, 2}, -1, 1}}},
      // Second derivatives through max pooling: MaxPoolGrad in its three inputs (none in the
      // first two: the maxima's places do not move), and MaxPoolGradGrad.
      {"MaxPoolGrad, SAME, overlapping", [](graph& g, const std::vector<output>& x) {
         const attr_map w = window("SAME", 2, 0, 3);
         return op(g, "MaxPoolGrad", {x[0], op(g, "MaxPool", {x[0]}, w), x[1]}, w);
       }, {{{1, 5, 5, 2}, -1, 1}, {{1, 3, 3, 2}, -1, 1}}},
      {"MaxPoolGradGrad, VALID", [](graph& g, const std::vector<output>& x) {
         const attr_map w = window("VALID", 2, 0, 2);
         return op(g, "MaxPoolGradGrad", {x[0], op(g, "MaxPool", {x[0]}, w), x[1]}, w);
       }, {{{2, 4, 4, 2}, -1, 1}, {{2, 4, 4, 2}, -1, 1}}},
      {"AvgPoolGrad", [](graph& g, const std::vector<output>& x) {
         return op(g, "AvgPoolGrad", {ints(g, {1, 5, 5, 2}), x[0]}, window("SAME", 2, 0, 3));
       }, {{{1, 3, 3, 2}, -1, 1}}},
      {"Dropout at rate 0", [](graph& g, const std::vector<output>& x) {
         return op(g, "Dropout", {x[0], g.constant(tensor::scalar(0.0))});
       }, {m23}},
      {"a layer: tanh(x w + b), x used twice", [](graph& g, const std::vector<output>& x) {
         auto h = op(g, "Tanh", {op(g, "Add", {op(g, "MatMul", {x[0], x[1]}), x[2]})});
         return op(g, "Mul", {h, op(g, "Sum", {x[0], ints(g, {1})}, {{"keep_dims", true}})});
       }, {{{2, 3}, -1, 1}, {{3, 4}, -1, 1}, {{4}, -0.5, 0.5}}},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    CHECK(jacobian_error(c.build, c.inputs) <= 1e-6);
  }
}

TEST_CASE("gradients: partials are summed, unconnected inputs get zeros, outputs name their nodes", "[gradients]") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape({3}), node_options("x"));
  auto z = g.placeholder(dtype::float32, partial_shape({2}), node_options("z"));
  // y = sum(x * x + exp(x)): dy/dx = 2x + exp(x); z does not reach y.
  auto y = op(g, "Sum", {op(g, "Add", {op(g, "Mul", {x, x}), op(g, "Exp", {x})}), ints(g, {0})});
  auto d = add_gradients(g, {y}, {x, z});
  CHECK(g.at(d[0]).name().rfind("gradients/", 0) == 0);
  session s(g, one_thread());
  std::vector<float> xv{0.5f, -1.0f, 2.0f};
  auto got = s.run({{x, tensor::from_vector(xv, shape{3})}, {z, tensor::from_vector(std::vector<float>{1, 2}, shape{2})}},
                   {d[0], d[1]});
  auto dx = got[0].to_vector<float>();
  for (std::size_t i = 0; i < 3; ++i) CHECK(dx[i] == Approx(2 * xv[i] + std::exp(xv[i])).epsilon(1e-6));
  CHECK(got[1].to_vector<float>() == std::vector<float>{0, 0});
  // A float32 Cast to float64 and back: the gradient arrives as float32.
  auto c = op(g, "Cast", {op(g, "Cast", {x}, {{"DstT", dtype::float64}})}, {{"DstT", dtype::float32}});
  auto dc = add_gradients(g, {op(g, "Sum", {c, ints(g, {0})})}, {x});
  session s2(g, one_thread());
  auto ones = s2.run({{x, tensor::from_vector(xv, shape{3})}}, {dc[0]}).at(0);
  CHECK(ones.dtype() == dtype::float32);
  CHECK(ones.to_vector<float>() == std::vector<float>{1, 1, 1});
}

TEST_CASE("gradients: a node's gradient goes to the device the node asked for, unless the caller's scope names one", "[gradients]") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape({3}), node_options("x"));
  output y;
  {
    auto on_cpu1 = g.device_scope("/device:CPU:1");
    y = op(g, "Tanh", {op(g, "Exp", {op(g, "Mul", {x, x})})});
  }
  const output loss = op(g, "Sum", {y, ints(g, {0})});  // asks for no device
  const int forward = g.size();
  auto d = add_gradients(g, {loss}, {x});
  // Every gradient node of Tanh, Exp and Mul asks for CPU:1; the seed and Sum's gradient ask
  // for nothing, and so does the sum of Mul's two partials at x, which asked for nothing.
  int on_cpu1 = 0, elsewhere = 0;
  for (int id = forward; id < g.size(); ++id) {
    const node& n = g.at(id);
    INFO(n.describe() << " on '" << n.device() << "'");
    CHECK((n.device().empty() || n.device() == "/device:CPU:1"));
    (n.device().empty() ? elsewhere : on_cpu1) += 1;
  }
  CHECK(on_cpu1 >= 4);
  CHECK(g.at(d[0]).device().empty());
  CHECK(elsewhere >= 1);
  // The caller's scope wins.
  const int before = g.size();
  {
    auto on_cpu0 = g.device_scope("/device:CPU:0");
    (void)add_gradients(g, {op(g, "Sum", {y, ints(g, {0})})}, {x});
  }
  for (int id = before; id < g.size(); ++id) CHECK(g.at(id).device() == "/device:CPU:0");
  // The values: d/dx sum(tanh(exp(x^2))) = (1 - tanh^2(e)) e 2x.
  session_options o = one_thread();
  o.cpu_devices = 2;
  session s(g, o);
  const std::vector<float> xv{0.5f, -0.25f, 0.1f};
  const auto got = s.run({{x, tensor::from_vector(xv, shape{3})}}, {d[0]}).at(0).to_vector<float>();
  for (std::size_t i = 0; i < 3; ++i) {
    const double e = std::exp(double(xv[i]) * xv[i]), t = std::tanh(e);
    CHECK(got[i] == Approx((1 - t * t) * e * 2 * xv[i]).epsilon(1e-5));
  }
}

TEST_CASE("gradients: none flows through StopGradient and PreventGradient's is an error with its message", "[gradients]") {
  graph g;
  const output x = g.placeholder(dtype::float64, partial_shape{3}, "x");
  // y = x * x + StopGradient(x) * x: dy/dx = 2x + x, the stopped factor a constant.
  const output y = op(g, "Add", {op(g, "Mul", {x, x}), op(g, "Mul", {op(g, "StopGradient", {x}), x})});
  const auto dx = add_gradients(g, {y}, {x});
  const auto only = add_gradients(g, {op(g, "StopGradient", {x})}, {x});  // only through StopGradient: zeros
  session s(g, one_thread());
  const tensor got = s.run({{"x", tensor::from_vector(std::vector<double>{1, -2, 0.5})}}, {dx[0]})[0];
  CHECK(got.to_vector<double>() == std::vector<double>{3, -6, 1.5});
  CHECK(s.run({{"x", tensor::from_vector(std::vector<double>{1, -2, 0.5})}}, {only[0]})[0].to_vector<double>() ==
        std::vector<double>{0, 0, 0});
  const output p = g.op("PreventGradient", {x}, {{"message", std::string("not differentiable here")}}, "guard").out(0);
  require_error([&] { add_gradients(g, {op(g, "Square", {p})}, {x}); },
                {"gradient explicitly disabled at node 'guard' (PreventGradient)", "Reason: not differentiable here"});
}

TEST_CASE("gradients: Abs's gradient is d * sign(x), 0 at 0, as TensorFlow's", "[gradients]") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape({4}), node_options("x"));
  auto d = add_gradients(g, {op(g, "Sum", {op(g, "Abs", {x}), ints(g, {0})})}, {x});
  session s(g, one_thread());
  auto got = s.run({{x, tensor::from_vector(std::vector<float>{-2, 0, 3, -0.0f}, shape{4})}}, {d[0]}).at(0);
  CHECK(got.to_vector<float>() == std::vector<float>{-1, 0, 1, 0});
}

TEST_CASE("gradients: CheckNumerics checks the gradient too, with TensorFlow's words and the message", "[gradients]") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape({3}), node_options("x"));
  auto checked = op(g, "CheckNumerics", {x}, {{"message", std::string("x of the root")}});
  auto d = add_gradients(g, {op(g, "Sum", {op(g, "Sqrt", {checked}), ints(g, {0})})}, {x});
  session s(g, one_thread());
  auto got = s.run({{x, tensor::from_vector(std::vector<float>{1, 4, 0.25f}, shape{3})}}, {d[0]}).at(0);
  CHECK(got.to_vector<float>() == std::vector<float>{0.5f, 0.25f, 1});  // 1 / (2 sqrt(x))
  // sqrt's gradient at 0 is infinite: the gradient's check fails, the forward's passes.
  test::require_error([&] { s.run({{x, tensor::from_vector(std::vector<float>{1, 0, 4}, shape{3})}}, {d[0]}); },
                      {"CheckNumerics", "Not a number (NaN) or infinity (Inf) values detected in gradient. x of the root : Tensor had Inf values"});
  test::require_error([&] { s.run({{x, tensor::from_vector(std::vector<float>{1, -1, 4}, shape{3})}}, {d[0]}); },
                      {"detected in gradient. x of the root : Tensor had NaN values"});  // sqrt(-1)'s gradient is NaN
}

TEST_CASE("gradients: an op without a rule, or an integer output, is a clear error", "[gradients]") {
  graph g;
  auto x = g.placeholder(dtype::float32, partial_shape({3}), node_options("x"));
  auto on = g.placeholder(dtype::float32, partial_shape({}), node_options("on"));
  auto p = g.op("OneHot", {ints(g, {0, 2}), g.constant(tensor::scalar(3)), on, g.constant(tensor::scalar(0.0f))}, {},
                node_options("hot"));
  require_error([&] { add_gradients(g, {p}, {on}); }, {"no gradient", "node 'hot' (OneHot)"});
  auto i = g.op("ArgMax", {x, ints(g, {0})}, {}, node_options("index"));
  require_error([&] { add_gradients(g, {i}, {x}); }, {"node 'index' (ArgMax)", "int64", "floating-point"});
  // Rules that read values when the graph is built say so.
  auto m = g.placeholder(dtype::float32, partial_shape({2, 3}), node_options("m"));
  auto perm = g.placeholder(dtype::int32, partial_shape({2}), node_options("perm"));
  auto t = g.op("Transpose", {m, perm}, {}, node_options("turned"));
  require_error([&] { add_gradients(g, {t}, {m}); }, {"node 'turned' (Transpose)", "permutation to be a constant"});
  auto axis = g.placeholder(dtype::int32, partial_shape({}), node_options("axis"));
  auto pr = g.op("Prod", {m, axis}, {}, node_options("product"));
  require_error([&] { add_gradients(g, {pr}, {m}); }, {"node 'product' (Prod)", "constant axis"});
  auto ga = g.op("GatherV2", {m, ints(g, {1}), axis}, {}, node_options("picked"));
  require_error([&] { add_gradients(g, {ga}, {m}); }, {"node 'picked' (GatherV2)", "constant axis"});
  require_error([&] { g.op("GatherV2", {m, ints(g, {1}), ints(g, {})}); }, {"GatherV2", "axis must have rank 0"});
  auto rows = g.placeholder(dtype::float32, partial_shape({unknown_dim, 3}), node_options("rows"));
  auto c = g.op("ConcatV2", {rows, m, g.constant(tensor::scalar(0))}, {}, node_options("joined"));
  require_error([&] { add_gradients(g, {c}, {rows}); }, {"node 'joined' (ConcatV2)", "input 0's dimension 0"});
}

TEST_CASE("gradients: Prod's gradient is exact where the product has zeros", "[gradients]") {
  // d prod / d x_i is the product of the others: with one zero only that element's is
  // nonzero, with two zeros every one is 0 (a rule dividing the product by x_i gives NaN).
  graph g;
  auto x = g.placeholder(dtype::float64, partial_shape({2, 4}), node_options("x"));
  auto p = g.op("Prod", {x, ints(g, {1})});
  auto d = add_gradients(g, {p}, {x});
  session s(g, one_thread());
  const std::vector<double> xv{2, 0, 3, 5, 0, 4, 0, -1};
  auto got = s.run({{x, tensor::from_vector(xv, shape{2, 4})}}, {d[0]}).at(0).to_vector<double>();
  CHECK(got == std::vector<double>{0, 30, 0, 0, 0, 0, 0, 0});
  // And through two axes of a [2, 2, 2]: the other seven elements' product.
  auto y = g.placeholder(dtype::float64, partial_shape({2, 2, 2}), node_options("y"));
  auto d2 = add_gradients(g, {g.op("Prod", {y, ints(g, {0, 2})})}, {y});
  session s2(g, one_thread());
  const std::vector<double> yv{1, 2, 3, 0, 5, 6, 7, 8};
  auto got2 = s2.run({{y, tensor::from_vector(yv, shape{2, 2, 2})}}, {d2[0]}).at(0).to_vector<double>();
  // Groups (axes 0 and 2 reduced): {1, 2, 5, 6} for dim 1 = 0 and {3, 0, 7, 8} for dim 1 = 1.
  CHECK(got2 == std::vector<double>{60, 30, 0, 168, 12, 10, 0, 0});
}

TEST_CASE("gradients: the backward graph grows linearly with a deep chain", "[gradients]") {
  // relu(h w_k + b_k), k layers: each layer adds the same number of gradient nodes.
  auto added = [](int layers) {
    graph g;
    output h = g.placeholder(dtype::float32, partial_shape({-1, 8}), node_options("x"));
    std::vector<output> params;
    for (int k = 0; k < layers; ++k) {
      auto w = g.placeholder(dtype::float32, partial_shape({8, 8}));
      auto b = g.placeholder(dtype::float32, partial_shape({8}));
      params.push_back(w), params.push_back(b);
      h = op(g, "Relu", {op(g, "Add", {op(g, "MatMul", {h, w}), b})});
    }
    auto loss = op(g, "Sum", {h, ints(g, {0, 1})});
    int before = g.size();
    add_gradients(g, {loss}, params);
    return g.size() - before;
  };
  int a2 = added(2), a4 = added(4), a8 = added(8);
  INFO("gradient nodes for 2, 4 and 8 layers: " << a2 << ", " << a4 << ", " << a8);
  CHECK(a8 - a4 == 2 * (a4 - a2));
  // Per layer: ReluGrad, MatMul x2, SumToShape x2 and the Shape of the batch-sized sum; the
  // bias's shape is known, a constant shared by every layer.
  CHECK(a4 - a2 == 2 * 6);
}

TEST_CASE("gradients: the helper ops check their shapes", "[gradients]") {
  graph g;
  auto x = g.constant(tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, shape{2, 3}));
  CHECK(eval(g, g.op("SumToShape", {x, ints(g, {3})})).to_vector<float>() == std::vector<float>{5, 7, 9});
  CHECK(eval(g, g.op("SumToShape", {x, ints(g, {2, 1})})).to_vector<float>() == std::vector<float>{6, 15});
  CHECK(eval(g, g.op("SumToShape", {x, ints(g, {})})).to_vector<float>() == std::vector<float>{21});
  CHECK(eval(g, g.op("BroadcastTo", {x, ints(g, {2, 2, 3})})).to_vector<float>() ==
        std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  CHECK(eval(g, g.op("ReducedShape", {ints(g, {4, 5, 6}), ints(g, {0, -1})})).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{1, 5, 1});
  require_error([&] { eval(g, g.op("SumToShape", {x, ints(g, {4})})); }, {"cannot sum", "[2,3]", "[4]"});
  require_error([&] { eval(g, g.op("BroadcastTo", {x, ints(g, {3, 3})})); }, {"cannot broadcast", "[2,3]", "[3,3]"});
}
