// The CUDA component (issue 28). Cases tagged [host] need no GPU: what the GPU kernels'
// host code computes (broadcast plans), their registration, and the errors of a machine
// without a GPU. Cases tagged [gpu] run on a GPU: `weft_cuda_tests "[gpu]"` exits 77, which
// CTest reports as skipped, where the CUDA runtime sees none (this project's build machines
// have the toolkit but no driver). Each GPU kernel is checked against the CPU kernel on the
// same inputs, drawn as the hardening test draws them (every dtype it admits, broadcasting,
// empty and rank 0).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <weft/cuda/all.hpp>
#include <weft/weft.hpp>

#include <unistd.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <cstdio>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/helpers.hpp"
#include "support/op_runner.hpp"

using namespace weft;

namespace cuda_test {

bool have_gpu() { return cuda::gpus_available().count > 0; }

// The elements of t as doubles (bool and integers too).
std::vector<double> as_doubles(const tensor& t) {
  const tensor d = t.dtype() == dtype::float64 ? t : [&] {
    graph g;
    auto& x = g.constant(t);
    auto& c = g.op("Cast", {x}, {{"DstT", dtype::float64}});
    session s(g);
    return s.run({}, {c}).at(0);
  }();
  return d.to_vector<double>();
}

// Whether `got` (from the GPU) matches `want` (from the CPU): the same dtype and shape, and
// values within the dtype's tolerance (float16 and bfloat16 compute in float32 on the GPU,
// sums add in another order); NaN where the other has NaN.
std::string difference(const tensor& got, const tensor& want) {
  if (got.dtype() != want.dtype()) return "dtype " + std::string(name(got.dtype())) + " against " + std::string(name(want.dtype()));
  if (got.shape() != want.shape()) {
    std::ostringstream s;
    s << "shape " << got.shape() << " against " << want.shape();
    return s.str();
  }
  const double rtol = got.dtype() == dtype::float16 ? 1e-2 : got.dtype() == dtype::bfloat16 ? 2e-2
                      : got.dtype() == dtype::float32 || got.dtype() == dtype::complex64 ? 1e-4 : 1e-9;
  std::vector<double> g, w;
  if (is_complex(got.dtype())) {  // real and imaginary parts, side by side
    const auto parts = [](const tensor& t) {
      std::vector<double> out;
      if (t.dtype() == dtype::complex64)
        for (auto z : t.to_vector<complex64>()) out.insert(out.end(), {z.real(), z.imag()});
      else
        for (auto z : t.to_vector<complex128>()) out.insert(out.end(), {z.real(), z.imag()});
      return out;
    };
    g = parts(got), w = parts(want);
  } else {
    g = as_doubles(got), w = as_doubles(want);
  }
  double scale = 1;
  for (double v : w)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  // Where a complex result is not finite, C's rules (Annex G: libstdc++'s scalar operators,
  // libcu++'s) and Eigen's packets (a / b as a * conj(b) / |b|^2) disagree on which part is
  // infinite and which NaN, as the CPU's own vectorized elements and its last ones do: a
  // part not finite on both devices is the same answer.
  const bool complex_parts = is_complex(got.dtype());
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    if (complex_parts && !std::isfinite(w[i]) && !std::isfinite(g[i])) continue;
    if (g[i] == w[i]) continue;
    if (std::abs(g[i] - w[i]) <= rtol * scale) continue;
    return "element " + std::to_string(i) + ": " + std::to_string(g[i]) + " against " + std::to_string(w[i]);
  }
  return {};
}

// The type attr that says what `op` computes in (dtype: the random ops' output; else T; else
// its first type attr) and the dtypes that attr admits and the GPU kernels are registered for
// (none: the op has no GPU kernel).
std::pair<std::string, std::vector<dtype>> gpu_dtypes(const std::string& op) {
  std::pair<std::string, std::vector<dtype>> out{"T", {}};
  const op_def* def = op_registry::global().find(op);
  if (!def) return out;
  const attr_def* type_attr = def->find_attr("dtype");
  if (!type_attr || type_attr->kind != attr_kind::type) type_attr = def->find_attr("T");
  for (const auto& a : def->attrs)
    if (a.kind == attr_kind::type && (!type_attr || type_attr->kind != attr_kind::type)) type_attr = &a;
  if (type_attr) out.first = type_attr->name;
  for (dtype t : {dtype::float16, dtype::bfloat16, dtype::float32, dtype::float64, dtype::int8, dtype::int16, dtype::int32,
                  dtype::int64, dtype::uint8, dtype::uint16, dtype::uint32, dtype::uint64, dtype::boolean, dtype::complex64,
                  dtype::complex128}) {
    if (type_attr && !type_attr->admits(t)) continue;
    if (kernel_registry::global().has(op, "GPU", {out.first, t})) out.second.push_back(t);
  }
  return out;
}

// Whether `attrs` ask for a stream seeded from the system (seed = seed2 = 0): a random op's
// values then differ from run to run, on any device.
bool unseeded(const attr_map& attrs) {
  const attr_value *seed = attrs.find("seed"), *seed2 = attrs.find("seed2");
  if (!seed || !seed2) return false;
  const auto* a = seed->get_if<std::int64_t>();
  const auto* b = seed2->get_if<std::int64_t>();
  return a && b && *a == 0 && *b == 0;
}

// A float32 tensor of dims d, each element uniform in [-1, 1) from rng.
tensor uniform_floats(std::mt19937& rng, const std::vector<std::int64_t>& d) {
  std::uniform_real_distribution<float> value(-1, 1);
  std::vector<float> v(static_cast<std::size_t>(shape(d).num_elements()));
  for (float& e : v) e = value(rng);
  return tensor::from_vector(v, shape(d));
}

// A float64 tensor of dims d, uniform in [-1, 1).
tensor uniform_doubles(std::mt19937& rng, const shape& d) {
  std::vector<double> v(static_cast<std::size_t>(d.num_elements()));
  for (double& e : v) e = std::uniform_real_distribution<double>(-1, 1)(rng);
  return tensor::from_vector(v, d);
}

// What a small classifier's graph gives its training (train_on_both): the placeholders of
// its 8 x 5 features and 8 labels, its loss, its training step and its initializers.
using classifier = std::tuple<output, output, output, int, std::vector<int>>;

// The losses of five SGD steps of a classifier built by `build(g, gpu)`, on the CPU (index 0)
// and in a session with a GPU (1), on fixed data (features sin(i), labels i % 3); `first`
// sees the first step's trace and whether it ran with the GPU.
std::array<std::vector<float>, 2> train_on_both(const std::function<classifier(graph&, bool)>& build,
                                                const std::function<void(const run_metadata&, bool)>& first = {}) {
  std::vector<float> xs(40);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i));
  const tensor xv = tensor::from_vector(xs, shape{8, 5});
  const tensor lv = tensor::of<std::int32_t>({8}, {0, 1, 2, 0, 1, 2, 0, 1});
  std::array<std::vector<float>, 2> losses;
  for (int gpu = 0; gpu < 2; ++gpu) {
    graph g;
    auto [x, labels, loss, step, inits] = build(g, gpu);
    session_options o;
    if (gpu) o.device_count = {{"GPU", 1}};
    session s(g, o);
    std::vector<endpoint> init_targets;
    for (int id : inits) init_targets.emplace_back(g.at(id));
    s.run(init_targets);
    for (int i = 0; i < 5; ++i) {
      run_metadata meta;
      s.run({{x, xv}, {labels, lv}}, {}, {g.at(step)}, {.trace = i == 0 && first}, &meta);
      if (i == 0 && first) first(meta, gpu);
      losses[static_cast<std::size_t>(gpu)].push_back(s.run({{x, xv}, {labels, lv}}, {loss}).at(0).scalar_value<float>());
    }
  }
  return losses;
}

}  // namespace cuda_test

using namespace cuda_test;

// ---- without a GPU ----

TEST_CASE("a machine without a GPU says why when a session asks for one", "[host]") {
  if (have_gpu()) return;  // the [gpu] cases run there
  graph g;
  g.placeholder(dtype::float32, {3}, "x");
  session_options o;
  o.device_count = {{"GPU", 1}};
  test::require_error([&] { session s(g, o); }, {"session_options::device_count asks for 1 GPU device; this machine has 0",
                                                 "cudaGetDeviceCount"});
  // Every GPU then: none, and a session without GPUs is untouched.
  o.device_count = {{"GPU", -1}};
  session s(g, o);
  CHECK(s.devices().size() == 1);
}

TEST_CASE("the GPU kernels of the examples' training ops are registered", "[host]") {
  for (const char* op : {"MatMul", "BiasAdd", "BiasAddGrad", "Relu", "ReluGrad", "Add", "Sub", "Mul", "Div", "Cast", "Fill",
                         "Mean", "Sum", "ArgMax", "Equal", "SparseSoftmaxCrossEntropyWithLogits", "ApplyAdam",
                         "ApplyGradientDescent", "ApplyMomentum", "Reshape", "Shape", "Size", "ReducedShape",
                         "BroadcastTo", "Variable", "Assign", "Identity", "NoOp", "Const", "Softmax", "Tanh", "Sigmoid",
                         "GatherV2", "BatchMatMulV2", "RandomUniform", "RandomStandardNormal", "TruncatedNormal",
                         "Dropout", "Fused", "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MaxPool",
                         "MaxPoolGrad", "AvgPool", "AvgPoolGrad", "Transpose", "ConcatV2", "Split", "Slice", "Pad", "Tile",
                         "ZerosLike", "OnesLike", "UnsortedSegmentSum", "AccumulatorPush", "AccumulatorPop", "GatherNd",
                         "ScatterNd", "TensorScatterAdd", "TensorScatterUpdate", "SumToShape", "OneHot",
                         "SoftmaxCrossEntropyWithLogits", "L2Loss", "ApplyAdagrad", "ApplyRMSProp", "Sin", "Cos",
                         "Reciprocal", "Log1p", "Expm1", "Softplus", "Erf", "Floor", "Ceil", "Round", "Sign",
                         "SquaredDifference", "Elu", "Selu", "Relu6", "IsNan", "IsInf", "IsFinite", "Tan", "Asin",
                         "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Atan2", "FloorDiv",
                         "FloorMod", "ExpandDims", "Squeeze", "Pack", "Unpack", "ReverseV2", "Range", "AddN",
                         "StridedSlice", "StridedSliceGrad", "SplitV", "StopGradient", "PreventGradient", "Snapshot",
                         "EnsureShape", "LeakyRelu", "LeakyReluGrad", "ClipByValue"}) {
    INFO(op);
    CHECK(kernel_registry::global().has(op, "GPU"));
  }
  for (const char* op : {"MatMul", "BatchMatMulV2"})
    CHECK(gpu_dtypes(op).second == std::vector<dtype>{dtype::float16, dtype::bfloat16, dtype::float32, dtype::float64,
                                                      dtype::complex64, dtype::complex128});
  CHECK(gpu_dtypes("Add").second.size() == 9);  // 7 real dtypes, complex64 and complex128
  // The elementwise arithmetic of complex numbers, as the CPU's kernels compute it; the
  // ordered ops (Abs, Relu, Maximum, Greater, ...) take no complex numbers on either device.
  for (const char* op : {"Neg", "Square", "Sqrt", "Rsqrt", "Exp", "Log", "Tanh", "Sigmoid", "Add", "Sub", "Mul", "Div", "Pow",
                         "Equal", "NotEqual", "Sum", "Mean", "Prod"})
    for (dtype t : {dtype::complex64, dtype::complex128}) {
      INFO(op << " " << t);
      CHECK(kernel_registry::global().has(op, "GPU", {"T", t}));
      CHECK(kernel_registry::global().has(op, "CPU", {"T", t}));
    }
  for (const char* op : {"Abs", "Relu", "Maximum", "Greater", "Max", "Min"}) CHECK_FALSE(kernel_registry::global().has(op, "GPU", {"T", dtype::complex64}));
  // A Fused node whose expression has no GPU code (Select) is refused when it is placed (soft
  // placement runs it on the CPU), not when its kernel is built.
  {
    graph g;
    auto& c = g.placeholder(dtype::boolean, {2, 3}, "c");
    auto& a = g.placeholder(dtype::float32, {2, 3}, "a");
    const node& row_select = g.op("Fused", {c, a, a},
                                  {{"expr", std::string("Select:float32($bool,$float32,$float32)")},
                                   {"slots", std::vector<std::int64_t>{0, 1, 2}},
                                   {"T", dtype::float32},
                                   {"Tin", std::vector<dtype>{dtype::boolean, dtype::float32, dtype::float32}}},
                                  node_options("row_select"));
    const node& sum = g.op("Fused", {a, a},
                           {{"expr", std::string("Add:float32($float32,$float32)")},
                            {"slots", std::vector<std::int64_t>{0, 1}},
                            {"T", dtype::float32},
                            {"Tin", std::vector<dtype>{dtype::float32, dtype::float32}}},
                           node_options("sum"));
    CHECK_THAT(kernel_registry::global().missing(row_select, "GPU"),
               Catch::StartsWith("node 'row_select' (Fused): the GPU kernel does not take it: Fused expr: Select has no GPU code"));
    CHECK(kernel_registry::global().missing(sum, "GPU").empty());
  }
  for (const char* op : {"FusedBatchNormV3", "FusedBatchNormGradV3"})
    CHECK(gpu_dtypes(op).second == std::vector<dtype>{dtype::float16, dtype::bfloat16, dtype::float32, dtype::float64});
  CHECK(gpu_dtypes("AssignAdd").second.size() == 9);  // a counter or a sum kept on the GPU
  CHECK(gpu_dtypes("AssignSub").second.size() == 9);
  CHECK(gpu_dtypes("Cumsum").second.size() == 9);  // 7 real dtypes, complex64 and complex128
  CHECK(gpu_dtypes("Cumprod").second.size() == 9);
  CHECK(gpu_dtypes("MaxPoolGradGrad").second.size() == 4);
  for (const char* op : {"MatrixInverse", "MatrixDeterminant"})
    CHECK(gpu_dtypes(op).second == std::vector<dtype>{dtype::float32, dtype::float64, dtype::complex64, dtype::complex128});
  CHECK(gpu_dtypes("AddN").second.size() == 9);  // Add's
  CHECK(gpu_dtypes("Range").second == std::vector<dtype>{dtype::float32, dtype::float64, dtype::int32, dtype::int64});
  CHECK(gpu_dtypes("Cast").second.size() == 15);  // every dtype but string
  // The kernels that move elements without computing with them: every dtype but string.
  for (const char* op : {"Select", "SelectV2", "Fill", "BroadcastTo", "ZerosLike", "OnesLike", "TensorScatterUpdate"}) {
    INFO(op);
    CHECK(gpu_dtypes(op).second.size() == 15);
  }
  // The adds of the scatters and SumToShape (a broadcast operand's gradient) of complex numbers.
  for (const char* op : {"UnsortedSegmentSum", "ScatterNd", "TensorScatterAdd", "SumToShape"})
    for (dtype t : {dtype::complex64, dtype::complex128}) {
      INFO(op << " " << t);
      CHECK(kernel_registry::global().has(op, "GPU", {"T", t}));
    }
  CHECK(gpu_dtypes("RandomUniform").first == "dtype");
  // A Fused node of every dtype the generated code computes in: all but string.
  CHECK(gpu_dtypes("Fused").second.size() == 15);
  for (dtype t : {dtype::complex64, dtype::complex128}) CHECK(kernel_registry::global().has("Fused", "GPU", {"T", t}));
  // A session's folds of MatMul (graph/passes/fuse_matmul.hpp) whose kernels a GPU has.
  CHECK(gpu_dtypes("_FusedMatMulBiasAdd").second == std::vector<dtype>{dtype::bfloat16, dtype::float32});
  CHECK(gpu_dtypes("_FusedMatMulReluGrad").second == std::vector<dtype>{dtype::bfloat16, dtype::float32});
  // The folds of a convolution layer and of the updates (graph/passes/fuse_conv.hpp,
  // fuse_matmul.hpp), which a session makes only where every device type has the kernel.
  CHECK(gpu_dtypes("_FusedConv2DBiasAdd").second == std::vector<dtype>{dtype::bfloat16, dtype::float32});
  CHECK(gpu_dtypes("_FusedMaxPoolGradReluGrad").second.size() == 4);
  CHECK(gpu_dtypes("_FusedMatMulApplyGradientDescent").second == std::vector<dtype>{dtype::bfloat16, dtype::float32});
  CHECK(gpu_dtypes("_FusedMatMulApplyAdam").second == std::vector<dtype>{dtype::float32});
}

// The differential test ([gpu], below) compares an op only where the CPU runs it on the
// random inputs; ops those inputs never run must have a case of their own.
TEST_CASE("the differential test's random inputs run every op with a GPU kernel on the CPU", "[host]") {
  // The convolution, batch normalization and folds' cases' ops; Variable and AccumulatorPop, the
  // CPU's kernels registered on the GPU (they move no data: the training-step case and the
  // loops use them).
  const std::set<std::string> own_case{"BiasAdd", "Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "AvgPoolGrad",
                                       "Variable", "AccumulatorPop", "_FusedMatMulBiasAdd", "_FusedMatMulReluGrad",
                                       "FusedBatchNormV3", "FusedBatchNormGradV3", "_FusedConv2DBiasAdd",
                                       "_FusedMatMulApplyGradientDescent", "_FusedMatMulApplyAdam"};
  std::vector<std::string> never;
  for (const auto& op : test::runnable_ops()) {
    const auto [attr, types] = gpu_dtypes(op);
    if (types.empty() || own_case.count(op)) continue;
    bool ran = false;
    for (dtype t : types)
      for (std::uint64_t seed = 1; seed <= 12 && !ran; ++seed) {
        test::seeded_choices c(seed * 977 + static_cast<std::uint64_t>(t));
        ran = test::run_op(op, t, c, {}, attr).ran;
      }
    if (!ran) never.push_back(op);
  }
  INFO("never ran:" << [&] {
    std::string s;
    for (const auto& op : never) s += " " + op;
    return s;
  }());
  CHECK(never.empty());
}

TEST_CASE("broadcast plans give each operand's offset of every output element", "[host]") {
  // Against a naive index computation: output index -> each operand's index.
  const std::vector<std::pair<shape, shape>> cases{
      {shape{2, 3}, shape{3}}, {shape{4, 1, 5}, shape{3, 1}}, {shape{}, shape{2, 2}}, {shape{1}, shape{1, 1, 7}},
      {shape{2, 1, 3, 1}, shape{1, 4, 1, 5}}, {shape{3, 4}, shape{3, 4}}};
  for (const auto& [a, b] : cases) {
    const shape out = *broadcast(a, b);
    const auto plan = cuda::plan_for({&a, &b}, out);
    INFO(a << " and " << b);
    CHECK(plan.same_shape == (a == out && b == out));
    for (std::int64_t i = 0; i < out.num_elements(); ++i) {
      // The plan's offsets (launch::offset_in, which the CUDA kernels and the host path share).
      const std::int64_t off[2] = {cuda::launch::offset_in(plan, 0, i), cuda::launch::offset_in(plan, 1, i)};
      // The naive ones: the output's multi-index, clamped to each operand's dims.
      std::vector<std::int64_t> index(static_cast<std::size_t>(out.rank()));
      std::int64_t rest = i;
      for (int d = out.rank() - 1; d >= 0; --d) {
        index[static_cast<std::size_t>(d)] = rest % out[d];
        rest /= out[d];
      }
      for (int k = 0; k < 2; ++k) {
        const shape& s = k ? b : a;
        std::int64_t want = 0;
        for (int d = 0; d < s.rank(); ++d) {
          const std::int64_t at = s[d] == 1 ? 0 : index[static_cast<std::size_t>(d + out.rank() - s.rank())];
          want = want * s[d] + at;
        }
        CHECK(off[k] == want);
      }
    }
  }
  // More than eight dims above 1 is refused.
  const shape many{2, 2, 2, 2, 2, 2, 2, 2, 2}, one{1};
  test::require_error([&] { cuda::plan_for({&many, &one}, many); }, {"broadcasting over 9 dims", "at most 8"});
}

TEST_CASE("a Fused node's signature parses into its subtree, leaves numbered left to right", "[host]") {
  using E = fused::apply<ops::Add, float, fused::apply<ops::Mul, float, fused::leaf<float, false>, fused::leaf<float, true>>,
                         fused::leaf<float, false>>;
  const std::string& sig = fused::signature<E>();
  CHECK(sig == "Add:float32(Mul:float32($float32,$float32s),$float32)");
  const cuda::fused_expr e = cuda::parse_fused(sig);
  CHECK(e.op == "Add");
  CHECK(e.type == dtype::float32);
  REQUIRE(e.args.size() == 2);
  CHECK(e.args[0].op == "Mul");
  CHECK(e.args[0].args[0].leaf == 0);
  CHECK_FALSE(e.args[0].args[0].scalar);
  CHECK(e.args[0].args[1].leaf == 1);
  CHECK(e.args[0].args[1].scalar);
  CHECK(e.args[1].leaf == 2);
  const auto c = cuda::parse_fused("Cast:bfloat16(SelectV2:int32(Less:bool($int64,$int64s),$int32,$int32))");
  CHECK(c.args[0].args[0].type == dtype::boolean);
  CHECK(c.args[0].args[0].args[1].scalar);
  for (const char* bad : {"", "Add:float32(", "Add:float32($float32", "Add($float32)", "Add:float32($float32)x", "$nosuchtype"}) {
    INFO(bad);
    CHECK_THROWS_AS(cuda::parse_fused(bad), error);
  }
}

TEST_CASE("a fused subtree becomes CUDA source that NVRTC compiles, for every op and dtype the fusion makes", "[host]") {
  // The source of a small subtree, line by line.
  const auto e = cuda::parse_fused("Add:float32(Mul:float32($float32,$float32s),$float32)");
  const std::string src = cuda::fused_source(e, {0, 1, 0}, {dtype::float32, dtype::float32}, dtype::float32, "k");
  CHECK_THAT(src, Catch::Contains("extern \"C\" __global__ void k(const float* __restrict__ in0, const float* __restrict__ in1, "
                                  "float* __restrict__ out, long long n, weft_plan p)"));
  // Each leaf reads its input directly, once before the loop (a scalar), or by strides; in
  // 32-bit index arithmetic where every offset fits, 64-bit otherwise.
  CHECK_THAT(src, Catch::Contains("const float s1 = in1[0];"));
  CHECK_THAT(src, Catch::Contains("const float v0 = (p.kind[0] == 1 ? in0[i] : p.kind[0] == 2 ? s0 : in0[weft_offset<unsigned>(p, 0, i)]);"));
  CHECK_THAT(src, Catch::Contains("const float v0 = (p.kind[0] == 1 ? in0[i] : p.kind[0] == 2 ? s0 : in0[weft_offset<long long>(p, 0, i)]);"));
  CHECK_THAT(src, Catch::Contains("const float v2 = (p.kind[0] == 1 ? in0[i]"));  // leaf 2 reads input 0 again (slots)
  CHECK_THAT(src, Catch::Contains("float weft_eval(const float v0, const float v1, const float v2) { "
                                  "return ((float)(((float)(v0 * v1)) + v2)); }"));
  // Four elements a thread, loaded before they are computed; then the rest one by one.
  CHECK_THAT(src, Catch::Contains("a1[u] = (p.kind[1] == 1 ? in1[i] : p.kind[1] == 2 ? s1 : in1[weft_offset<unsigned>(p, 1, i)]);"));
  CHECK_THAT(src, Catch::Contains("for (int u = 0; u < 4; ++u) out[base + u * stride] = weft_eval(a0[u], a1[u], a2[u]);"));
  CHECK_THAT(src, Catch::Contains("out[i] = weft_eval(v0, v1, v2);"));
  // Leaves against the inputs they read.
  test::require_error([&] { cuda::fused_source(e, {0, 1}, {dtype::float32, dtype::float32}, dtype::float32, "k"); },
                      {"3 leaves but 2 slots"});
  test::require_error([&] { cuda::fused_source(e, {0, 1, 2}, {dtype::float32, dtype::float32}, dtype::float32, "k"); },
                      {"slot 2 of leaf 2 is not an input"});
  test::require_error([&] { cuda::fused_source(e, {0, 1, 0}, {dtype::float64, dtype::float32}, dtype::float32, "k"); },
                      {"leaf 0 is float32 but input 0 is float64"});
  test::require_error([&] { cuda::fused_source(cuda::parse_fused("Select:float32($bool,$float32,$float32)"), {0, 1, 2},
                                               {dtype::boolean, dtype::float32, dtype::float32}, dtype::float32, "k"); },
                      {"Select has no GPU code"});
  test::require_error([&] { cuda::fused_source(cuda::parse_fused("Greater:bool($complex64,$complex64)"), {0, 0},
                                               {dtype::complex64}, dtype::boolean, "k"); },
                      {"Greater of complex64: complex numbers are not ordered"});
  // A complex kernel includes libcu++'s complex numbers; a real one does not.
  CHECK_THAT(cuda::fused_source(cuda::parse_fused("Neg:complex64($complex64)"), {0}, {dtype::complex64}, dtype::complex64, "k"),
             Catch::Contains("#include <cuda/std/complex>"));
  CHECK_THAT(src, !Catch::Contains("complex"));
  // Every op the fusion makes, over each dtype family: the generated source compiles.
  struct sample {
    const char* expr;
    std::vector<dtype> inputs;
    dtype out;
  };
  const std::vector<sample> samples{
      {"Sigmoid:float32(Tanh:float32(Exp:float32(Log:float32(Sqrt:float32(Rsqrt:float32(Abs:float32(Neg:float32(Square:float32(Relu:float32($float32))))))))))",
       {dtype::float32}, dtype::float32},
      {"ReluGrad:float16(Pow:float16(Div:float16(Sub:float16($float16,$float16s),$float16),$float16),Maximum:float16(Minimum:float16($float16,$float16),$float16))",
       {dtype::float16}, dtype::float16},
      {"Mul:bfloat16(Add:bfloat16($bfloat16,$bfloat16),Exp:bfloat16($bfloat16))", {dtype::bfloat16}, dtype::bfloat16},
      {"SelectV2:float64(LogicalOr:bool(LogicalAnd:bool(Greater:bool($float64,$float64),GreaterEqual:bool($float64,$float64)),"
       "LogicalNot:bool(Equal:bool($float64,$float64))),Add:float64($float64,$float64),Neg:float64($float64))",
       {dtype::float64}, dtype::float64},
      {"Cast:float32(Add:int8(Mul:int8($int8,$int8),Abs:int8($int8)))", {dtype::int8}, dtype::float32},
      {"Cast:bool(Maximum:uint8(Abs:uint8($uint8),Square:uint8($uint8)))", {dtype::uint8}, dtype::boolean},
      {"Cast:float16(Sub:int64(LessEqual:bool($int64,$int32),$int64))", {dtype::int64, dtype::int32}, dtype::float16},
      {"NotEqual:bool(Cast:bfloat16($int32),Cast:bfloat16(Less:bool($uint16,$uint16)))", {dtype::int32, dtype::uint16}, dtype::boolean},
      // Complex numbers, as ::cuda::std::complex: each op the fusion makes of them.
      {"Sigmoid:complex64(Tanh:complex64(Exp:complex64(Log:complex64(Sqrt:complex64(Rsqrt:complex64(Neg:complex64(Square:complex64($complex64))))))))",
       {dtype::complex64}, dtype::complex64},
      {"Pow:complex128(Div:complex128(Sub:complex128($complex128,$complex128s),$complex128),Mul:complex128(Add:complex128($complex128,$complex128),$complex128))",
       {dtype::complex128}, dtype::complex128},
      {"LogicalAnd:bool(Equal:bool($complex64,$complex64),NotEqual:bool(Cast:complex128($complex64),$complex128))",
       {dtype::complex64, dtype::complex128}, dtype::boolean},
      {"Mul:complex64(Cast:complex64($float32),Cast:complex64(Cast:complex128($float16)))", {dtype::float32, dtype::float16}, dtype::complex64},
      // Sin, Cos, ..., Sign and SquaredDifference in each float dtype, Sign of integers.
      {"Round:float32(Floor:float32(Ceil:float32(Sign:float32(Erf:float32(Softplus:float32(Expm1:float32(Log1p:float32("
       "Reciprocal:float32(Cos:float32(Sin:float32($float32)))))))))))",
       {dtype::float32}, dtype::float32},
      {"SquaredDifference:float16(Sign:float16($float16),Softplus:float16(Round:float16($float16)))", {dtype::float16}, dtype::float16},
      {"SquaredDifference:bfloat16(Erf:bfloat16($bfloat16),Sin:bfloat16($bfloat16))", {dtype::bfloat16}, dtype::bfloat16},
      {"SquaredDifference:float64(Round:float64($float64),Erf:float64(Expm1:float64($float64)))", {dtype::float64}, dtype::float64},
      {"Cast:float32(Sign:int32($int32))", {dtype::int32}, dtype::float32},
      {"Relu6:float32(Selu:float32(Elu:float32($float32)))", {dtype::float32}, dtype::float32},
      {"Relu6:bfloat16(Selu:bfloat16(Elu:bfloat16($bfloat16)))", {dtype::bfloat16}, dtype::bfloat16},
      {"Relu6:float64(Selu:float64(Elu:float64($float64)))", {dtype::float64}, dtype::float64},
      {"LogicalOr:bool(IsNan:bool($float16),LogicalAnd:bool(IsInf:bool($float16),IsFinite:bool($float16)))", {dtype::float16}, dtype::boolean},
      {"SelectV2:float64(IsFinite:bool($float64),$float64,$float64)", {dtype::float64}, dtype::float64},
      {"Atan2:float32(Atanh:float32(Acosh:float32(Asinh:float32(Cosh:float32(Sinh:float32($float32))))),"
       "Atan:float32(Acos:float32(Asin:float32(Tan:float32($float32)))))", {dtype::float32}, dtype::float32},
      {"Atan2:bfloat16(Tan:bfloat16($bfloat16),Cosh:bfloat16($bfloat16))", {dtype::bfloat16}, dtype::bfloat16},
      {"Atan2:float64(Asinh:float64($float64),Atanh:float64($float64))", {dtype::float64}, dtype::float64},
      {"FloorMod:float32(FloorDiv:float32($float32,$float32),$float32)", {dtype::float32}, dtype::float32},
      {"FloorMod:float16(FloorDiv:float16($float16,$float16),$float16)", {dtype::float16}, dtype::float16},
  };
  int compiled = 0;
  for (const auto& s : samples) {
    INFO(s.expr);
    const auto x = cuda::parse_fused(s.expr);
    std::vector<const cuda::fused_expr*> leaves;
    cuda::detail::number_leaves(x, leaves);
    std::vector<std::int64_t> slots;
    for (const auto* l : leaves)
      slots.push_back(std::find(s.inputs.begin(), s.inputs.end(), l->type) - s.inputs.begin());
    // A second input type in a sample is read by its leaves of that type.
    const std::string source = cuda::fused_source(x, slots, s.inputs, s.out, "weft_fused");
    const std::string cubin = cuda::compile_cubin(source, 90, "weft_fused");
    CHECK(cubin.size() > 1000);
    CHECK(cubin.compare(0, 4, "\x7f" "ELF") == 0);
    ++compiled;
  }
  CHECK(compiled == static_cast<int>(samples.size()));
  // A sum of max_fused_inputs inputs (its parameters within 4 KiB) compiles; one input more
  // is an error that says how many a kernel takes.
  const auto sum_of = [](std::size_t n) {
    std::string expr = "$float32";
    for (std::size_t i = 1; i < n; ++i) expr = "Add:float32(" + expr + ",$float32)";
    return expr;
  };
  std::vector<std::int64_t> slots(cuda::max_fused_inputs + 1);
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<std::int64_t>(i);
  const std::vector<dtype> floats(cuda::max_fused_inputs + 1, dtype::float32);
  const std::string wide = cuda::fused_source(cuda::parse_fused(sum_of(cuda::max_fused_inputs)),
                                              {slots.begin(), slots.end() - 1}, {floats.begin(), floats.end() - 1},
                                              dtype::float32, "weft_wide");
  CHECK(cuda::compile_cubin(wide, 90, "weft_wide").compare(0, 4, "\x7f" "ELF") == 0);
  test::require_error([&] { cuda::fused_source(cuda::parse_fused(sum_of(slots.size())), slots, floats, dtype::float32, "k"); },
                      {"fused GPU kernels take at most 48 inputs, got 49"});
  // A source NVRTC refuses: the error carries its log.
  test::require_error([] { cuda::compile_cubin("extern \"C\" __global__ void k() { undeclared(); }", 90, "k"); },
                      {"NVRTC could not compile fused kernel k", "undeclared"});
}

TEST_CASE("compiled fused kernels are cached in memory and on disk, and a torn file is compiled again", "[host]") {
  const auto dir = std::filesystem::temp_directory_path() / ("weft_cuda_cache_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ::setenv("WEFT_CUDA_CACHE", dir.c_str(), 1);
  cuda::fused_cache cache;
  const std::string source = cuda::fused_source(cuda::parse_fused("Mul:float32($float32,$float32)"), {0, 0},
                                                {dtype::float32}, dtype::float32, "weft_fused");
  const auto first = cache.cubin(source, 90, "weft_fused");
  CHECK(cache.get_counts().compiled == 1);
  CHECK(cache.cubin(source, 90, "weft_fused") == first);
  CHECK(cache.get_counts().from_memory == 1);
  std::vector<std::filesystem::path> files;
  for (const auto& f : std::filesystem::directory_iterator(dir)) files.push_back(f.path());
  REQUIRE(files.size() == 1);
  CHECK(files[0].filename().string() == cuda::text_hash(source) + "_sm90.cubin");
  cache.clear_memory();
  CHECK(*cache.cubin(source, 90, "weft_fused") == *first);
  CHECK(cache.get_counts().from_disk == 1);
  // Another architecture is another entry.
  (void)cache.cubin(source, 80, "weft_fused");
  CHECK(cache.get_counts().compiled == 2);
  // A torn file (its source tail missing) is never loaded: compiled and written again.
  std::filesystem::resize_file(files[0], std::filesystem::file_size(files[0]) / 2);
  cache.clear_memory();
  CHECK(*cache.cubin(source, 90, "weft_fused") == *first);
  CHECK(cache.get_counts().compiled == 3);
  ::unsetenv("WEFT_CUDA_CACHE");
  std::filesystem::remove_all(dir);
}

TEST_CASE("a convolution's algorithm is the first of cuDNN's list that ran within the workspace limit and with the descriptor's math", "[host]") {
  auto perf = [](int algo, cudnnStatus_t status, std::size_t memory, cudnnMathType_t math) {
    cudnnConvolutionFwdAlgoPerf_t p{};
    p.algo = static_cast<cudnnConvolutionFwdAlgo_t>(algo);
    p.status = status;
    p.memory = memory;
    p.mathType = math;
    return p;
  };
  const std::size_t limit = cuda::conv_workspace_limit;
  const cudnnConvolutionFwdAlgoPerf_t list[] = {perf(6, CUDNN_STATUS_NOT_SUPPORTED, 0, CUDNN_FMA_MATH),
                                               perf(5, CUDNN_STATUS_SUCCESS, limit + 1, CUDNN_FMA_MATH),
                                               perf(4, CUDNN_STATUS_SUCCESS, 0, CUDNN_TENSOR_OP_MATH),
                                               perf(1, CUDNN_STATUS_SUCCESS, limit, CUDNN_FMA_MATH),
                                               perf(0, CUDNN_STATUS_SUCCESS, 0, CUDNN_FMA_MATH)};
  // The heuristics' list: any math (the descriptor's is the one that runs).
  CHECK(cuda::pick_algorithm(list, 5) == std::optional<std::pair<int, std::size_t>>({4, 0}));
  // A timed list: float32 takes FMAs only (no TF32), the 16-bit types tensor cores.
  CHECK(cuda::pick_algorithm(list, 5, cuda::conv_math_type(dtype::float32)) ==
        std::optional<std::pair<int, std::size_t>>({1, limit}));
  CHECK(cuda::pick_algorithm(list, 5, cuda::conv_math_type(dtype::bfloat16)) ==
        std::optional<std::pair<int, std::size_t>>({4, 0}));
  CHECK_FALSE(cuda::pick_algorithm(list, 2).has_value());  // failed, or over the limit
  CHECK_FALSE(cuda::pick_algorithm(list, 0).has_value());
}

TEST_CASE("small integer and bool elementwise ops of host inputs run on the host, where a loop's predicate is read", "[host]") {
  // The GPU kernels' host path needs no GPU: run them on a CPU device's context.
  const cpu_device cpu(1);
  resource_manager resources;
  cancellation_manager cancellation;
  auto run = [&](const node& n, std::vector<tensor> inputs) {
    const auto k = kernel_registry::global().create(n, "GPU");
    std::vector<entry> in(inputs.size()), out(static_cast<std::size_t>(n.num_outputs()));
    for (std::size_t i = 0; i < inputs.size(); ++i) in[i].value = inputs[i];
    kernel_context ctx(n, in, out, cpu, resources, cancellation, 1);
    k->compute(ctx);
    return out[0].value;
  };
  graph g;
  auto& i = g.placeholder(dtype::int32, {}, "i");
  auto& n = g.placeholder(dtype::int32, {3}, "n");
  auto& less = g.op("Less", {i, n});
  auto& add = g.op("Add", {i, n});
  auto& neg = g.op("Neg", {n});
  auto& both = g.op("LogicalAnd", {g.placeholder(dtype::boolean, {3}, "p"), g.placeholder(dtype::boolean, {}, "q")});
  const tensor counter = tensor::scalar<std::int32_t>(4), bounds = tensor::of<std::int32_t>({3}, {3, 4, 9});
  const tensor lt = run(less, {counter, bounds});
  CHECK(lt.memory_space() == memory_space::host);
  CHECK(lt.dtype() == dtype::boolean);
  CHECK(lt.to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(run(add, {counter, bounds}).to_vector<std::int32_t>() == std::vector<std::int32_t>{7, 8, 13});
  CHECK(run(neg, {bounds}).to_vector<std::int32_t>() == std::vector<std::int32_t>{-3, -4, -9});
  CHECK(run(both, {tensor::of<bool>({3}, {true, false, true}), tensor::scalar(true)}).to_vector<bool>() ==
        std::vector<bool>{true, false, true});
  // Shapes that do not broadcast are an error naming the node.
  test::require_error([&] { run(add, {tensor::of<std::int32_t>({2}, {1, 2}), bounds}); }, {"Add", "do not broadcast"});
}

// ---- on a GPU ----

TEST_CASE("every GPU kernel matches the CPU kernel on the same random inputs", "[gpu]") {
  // Random small integers and edges make singular and ill-conditioned matrices, whose
  // inverses and determinants two correct LU codes round apart (one finds an exact zero pivot
  // where the other rounds to 1e-17): these ops are compared on matrices of their own below.
  const std::set<std::string> inverted{"MatrixInverse", "MatrixDeterminant"};
  std::set<std::string> checked;
  int compared = 0;
  for (const auto& op : test::runnable_ops()) {
    const auto [attr, types] = gpu_dtypes(op);
    if (types.empty()) continue;
    for (dtype t : types) {
      for (std::uint64_t seed = 1; seed <= 12; ++seed) {
        test::seeded_choices on_cpu(seed * 977 + static_cast<std::uint64_t>(t)), on_gpu(seed * 977 + static_cast<std::uint64_t>(t));
        const auto want = test::run_op(op, t, on_cpu, {}, attr);
        const auto got = test::run_op(op, t, on_gpu, {"/device:GPU:0", {{"GPU", 1}}}, attr);
        INFO(op << " " << t << " seed " << seed << "\n  CPU: " << (want.ran ? "ran" : want.error) << "\n  GPU: "
                << (got.ran ? "ran" : got.error));
        CHECK(got.changed_inputs.empty());
        if (!want.built || inverted.count(op)) continue;
        CHECK(got.ran == want.ran);
        if (!got.ran || !want.ran || unseeded(want.attrs)) continue;
        REQUIRE(got.outputs.size() == want.outputs.size());
        std::ostringstream inputs;
        for (const tensor& in : want.inputs) inputs << " " << in.dtype() << in.shape();
        INFO("inputs:" << inputs.str());
        for (std::size_t i = 0; i < got.outputs.size(); ++i) {
          INFO("output " << i);
          CHECK(difference(got.outputs[i], want.outputs[i]) == "");
        }
        ++compared;
        checked.insert(op);
      }
    }
  }
  INFO("ops compared: " << checked.size());
  CHECK(compared > 0);
  // The random ops draw what the CPU's draw: the same stream, on the device. (BiasAdd and
  // the convolutions rarely get valid random inputs: the next case compares them.)
  for (const char* op : {"MatMul", "Add", "Mean", "SparseSoftmaxCrossEntropyWithLogits", "ApplyAdam", "RandomUniform",
                         "TruncatedNormal", "Dropout", "MaxPoolGrad", "Transpose", "ConcatV2", "Split", "Slice", "Pad", "Tile",
                         "UnsortedSegmentSum", "GatherNd", "ScatterNd", "SumToShape", "OneHot", "SoftmaxCrossEntropyWithLogits",
                         "L2Loss", "ApplyAdagrad", "ApplyRMSProp", "ExpandDims", "Squeeze", "Pack", "Unpack", "ReverseV2",
                         "Range", "AddN", "StridedSlice", "StridedSliceGrad", "SplitV", "Snapshot", "LeakyRelu",
                         "LeakyReluGrad", "ClipByValue"}) {
    INFO(op);
    CHECK(checked.count(op));
  }
}

// The random inputs of the test above rarely make a valid convolution; these do: each op of
// LeNet's forward and backward passes, on the CPU and on the GPU, for every float dtype.
TEST_CASE("convolutions, pooling and BiasAdd with their gradients match the CPU on valid shapes", "[gpu]") {
  struct conv_case {
    shape x, f;
    std::vector<std::int64_t> strides;
    const char* padding;
  };
  const std::vector<conv_case> cases{{{2, 7, 6, 3}, {3, 3, 3, 4}, {1, 1, 1, 1}, "SAME"},
                                     {{2, 7, 6, 3}, {3, 2, 3, 4}, {1, 2, 1, 1}, "VALID"},
                                     {{3, 28, 28, 1}, {5, 5, 1, 16}, {1, 1, 1, 1}, "SAME"},
                                     {{1, 9, 9, 16}, {5, 5, 16, 8}, {1, 2, 2, 1}, "VALID"},
                                     // Uneven SAME padding (one more row and column at the end),
                                     // which the GPU makes explicit before cuDNN.
                                     {{2, 7, 6, 3}, {2, 2, 3, 4}, {1, 1, 1, 1}, "SAME"},
                                     {{2, 8, 8, 3}, {3, 3, 3, 4}, {1, 2, 2, 1}, "SAME"}};
  std::mt19937 rng(7);
  auto random = [&](const shape& sh) { return uniform_doubles(rng, sh); };
  for (dtype t : {dtype::float32, dtype::float64, dtype::float16, dtype::bfloat16}) {
    for (const auto& c : cases) {
      INFO(t << " x " << c.x << " filter " << c.f << " " << c.padding);
      const tensor xv = random(c.x), fv = random(c.f), bv = random(shape{c.f[3]});
      std::vector<tensor> results[2];
      for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
        graph g;
        auto scope = g.device_scope(on_gpu ? "/device:GPU:0" : "");
        auto cast = [&](const tensor& v) { return g.op("Cast", {g.constant(v).out(0)}, {{"DstT", t}}).out(0); };
        const output x = cast(xv), f = cast(fv), b = cast(bv);
        const attr_map conv{{"strides", c.strides}, {"padding", std::string(c.padding)}};
        const output y = g.op("BiasAdd", {g.op("Conv2D", {x, f}, conv).out(0), b}).out(0);
        const attr_map pool{{"ksize", std::vector<std::int64_t>{1, 2, 2, 1}}, {"strides", std::vector<std::int64_t>{1, 2, 2, 1}},
                            {"padding", std::string("SAME")}};
        const output mp = g.op("MaxPool", {y}, pool).out(0), ap = g.op("AvgPool", {y}, pool).out(0);
        // The gradient of sum(maxpool(y) * 1.5 + avgpool(y)) through every op above.
        const output loss = g.op("Add", {g.op("Sum", {g.op("Mul", {mp, g.op("Cast", {g.constant(tensor::scalar(1.5)).out(0)}, {{"DstT", t}}).out(0)}).out(0),
                                                      g.constant(tensor::of<std::int32_t>({4}, {0, 1, 2, 3})).out(0)}).out(0),
                                         g.op("Sum", {ap, g.constant(tensor::of<std::int32_t>({4}, {0, 1, 2, 3})).out(0)}).out(0)}).out(0);
        const auto d = add_gradients(g, {loss}, {x, f, b});
        session_options o;
        if (on_gpu) o.device_count = {{"GPU", 1}};
        session s(g, o);
        results[on_gpu] = s.run({}, {y, mp, ap, d[0], d[1], d[2]});
      }
      const char* names[] = {"Conv2D+BiasAdd", "MaxPool", "AvgPool", "Conv2DBackpropInput", "Conv2DBackpropFilter", "BiasAddGrad"};
      for (std::size_t i = 0; i < results[0].size(); ++i) {
        INFO(names[i]);
        CHECK(difference(results[1][i], results[0][i]) == "");
      }
    }
  }
}

// Batch normalization's random inputs rarely have matching channel counts: its own case.
TEST_CASE("FusedBatchNormV3 and FusedBatchNormGradV3 on the GPU match the CPU in training and inference, 16-bit x too", "[gpu]") {
  struct bn_case {
    shape x;
    bool training;
    double factor;  // 1 in training: the moving averages' inputs empty
  };
  const std::vector<bn_case> cases{{{4, 3, 5, 6}, true, 1.0}, {{4, 3, 5, 6}, true, 0.25}, {{4, 3, 5, 6}, false, 1.0},
                                   {{7, 3}, true, 0.5},        {{1, 2, 3}, true, 0.5},    {{0, 3}, true, 1.0},
                                   {{0, 3}, false, 1.0},       {{4, 0}, true, 1.0},       {{2, 1, 1, 1, 5}, false, 1.0}};
  std::mt19937 rng(11);
  auto random = [&](const shape& sh, double lo, double hi) {
    std::vector<double> v(static_cast<std::size_t>(sh.num_elements()));
    for (double& e : v) e = std::uniform_real_distribution<double>(lo, hi)(rng);
    return tensor::from_vector(v, sh);
  };
  // x and y in t; the statistics in u (float32 for a 16-bit t, TensorFlow's mixed precision).
  for (dtype t : {dtype::float32, dtype::float64, dtype::float16, dtype::bfloat16}) {
    const dtype u = t == dtype::float64 ? dtype::float64 : dtype::float32;
    for (const auto& c : cases) {
      INFO(t << " x " << c.x << (c.training ? " training, factor " : " inference ") << c.factor);
      const std::int64_t channels = c.x[c.x.rank() - 1];
      const bool empty_stats = c.training && c.factor == 1.0;
      const tensor xv = random(c.x, -2, 3), dyv = random(c.x, -1, 1), scale = random(shape{channels}, 0.5, 1.5),
                   offset = random(shape{channels}, -1, 1), mean = random(shape{empty_stats ? 0 : channels}, -0.5, 0.5),
                   variance = random(shape{empty_stats ? 0 : channels}, 0.5, 2);
      std::vector<tensor> results[2];
      for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
        graph g;
        auto scope = g.device_scope(on_gpu ? "/device:GPU:0" : "");
        auto cast = [&](const tensor& v, dtype to) { return g.op("Cast", {g.constant(v).out(0)}, {{"DstT", to}}).out(0); };
        const attr_map attrs{{"T", t}, {"U", u}, {"epsilon", 0.001}, {"is_training", c.training}};
        attr_map forward_attrs = attrs;
        forward_attrs.set("exponential_avg_factor", c.factor);
        const node& bn = g.op("FusedBatchNormV3", {cast(xv, t), cast(scale, u), cast(offset, u), cast(mean, u), cast(variance, u)},
                              forward_attrs);
        const node& grad =
            g.op("FusedBatchNormGradV3", {cast(dyv, t), cast(xv, t), cast(scale, u), bn.out(3), bn.out(4), bn.out(5)}, attrs);
        session_options o;
        if (on_gpu) o.device_count = {{"GPU", 1}};
        session s(g, o);
        std::vector<endpoint> fetches;
        for (int i = 0; i < 6; ++i) fetches.emplace_back(bn.out(i));
        for (int i = 0; i < 5; ++i) fetches.emplace_back(grad.out(i));
        results[on_gpu] = s.run({}, fetches);
      }
      for (std::size_t i = 0; i < results[0].size(); ++i) {
        INFO((i < 6 ? "FusedBatchNormV3 output " : "FusedBatchNormGradV3 output ") << (i < 6 ? i : i - 6));
        CHECK(difference(results[1][i], results[0][i]) == "");
      }
    }
  }
}

// A long reduced run against few outputs is split across threads and joined by a second
// kernel (launch::reduce_splits): BiasAddGrad over a LeNet-sized batch, a whole-tensor sum.
TEST_CASE("long reductions against few outputs, split across threads, match the CPU, complex sums too", "[gpu]") {
  struct reduction_case {
    shape x;
    std::vector<std::int32_t> axes;
  };
  const std::vector<reduction_case> cases{{{64, 28, 28, 16}, {0, 1, 2}}, {{1 << 20}, {0}}, {{3, 5000}, {1}},
                                         {{2, 4099, 3}, {1}}, {{4099, 2}, {0}}};
  std::mt19937 rng(11);
  for (dtype t : {dtype::float32, dtype::float64, dtype::float16, dtype::int32, dtype::int64, dtype::complex64, dtype::complex128}) {
    for (const auto& c : cases) {
      std::vector<double> v(static_cast<std::size_t>(c.x.num_elements()));
      for (double& e : v) e = is_floating(t) || is_complex(t) ? std::uniform_real_distribution<double>(-1, 1)(rng) : double(rng() % 7) - 3;
      tensor xv = tensor::from_vector(v, c.x);
      if (is_complex(t)) {  // imaginary parts of their own
        std::vector<complex128> z;
        for (std::size_t i = 0; i < v.size(); ++i) z.emplace_back(v[i], v[(i * 7 + 3) % v.size()]);
        xv = tensor::from_vector(z).reshape(c.x);
      }
      for (const char* op : {"Sum", "Mean", "Max", "Min", "L2Loss", "BiasAddGrad"}) {
        if ((std::string(op) == "L2Loss" || std::string(op) == "BiasAddGrad") && !is_floating(t)) continue;
        if ((std::string(op) == "Max" || std::string(op) == "Min") && is_complex(t)) continue;  // not ordered
        if (std::string(op) == "BiasAddGrad" && c.x.rank() < 2) continue;
        INFO(op << " " << t << " of " << c.x);
        std::vector<tensor> results[2];
        for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
          graph g;
          auto scope = g.device_scope(on_gpu ? "/device:GPU:0" : "");
          const output x = g.op("Cast", {g.constant(xv).out(0)}, {{"DstT", t}}).out(0);
          const output axes = g.constant(tensor::from_vector(c.axes)).out(0);
          const output y = std::string(op) == "L2Loss" || std::string(op) == "BiasAddGrad" ? g.op(op, {x}).out(0)
                                                                                           : g.op(op, {x, axes}).out(0);
          session_options o;
          if (on_gpu) o.device_count = {{"GPU", 1}};
          session s(g, o);
          results[on_gpu] = s.run({}, {y});
        }
        CHECK(difference(results[1][0], results[0][0]) == "");
      }
    }
  }
}

TEST_CASE("cuBLASLt products at any alignment, transposed, in strided batches with a broadcast operand, match a naive loop", "[gpu]") {
  const cuda::gpu_device gpu(0, 1);
  const std::int64_t m = 5, n = 7, k = 9, batch = 3;
  // Small integers: every product and sum is exact in each dtype, so the results compare exactly.
  auto store = [](dtype t, void* p, std::int64_t i, double v) {
    switch (t) {
      case dtype::float64: static_cast<double*>(p)[i] = v; break;
      case dtype::float32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
      case dtype::float16: static_cast<weft::half*>(p)[i] = weft::half(static_cast<float>(v)); break;
      default: static_cast<bfloat16*>(p)[i] = bfloat16(static_cast<float>(v)); break;
    }
  };
  auto load = [](dtype t, const void* p, std::int64_t i) {
    switch (t) {
      case dtype::float64: return static_cast<const double*>(p)[i];
      case dtype::float32: return double(static_cast<const float*>(p)[i]);
      case dtype::float16: return double(static_cast<float>(static_cast<const weft::half*>(p)[i]));
      default: return double(static_cast<float>(static_cast<const bfloat16*>(p)[i]));
    }
  };
  std::mt19937 rng(5);
  for (dtype t : {dtype::float32, dtype::bfloat16, dtype::float16, dtype::float64})
    for (std::int64_t offset : {0, 1})  // one element past the allocator's alignment: 2 to 8 bytes
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (bool broadcast : {false, true}) {
            INFO(t << " offset " << offset << " transpose_a " << ta << " transpose_b " << tb << " broadcast " << broadcast);
            const std::int64_t a_batches = broadcast ? 1 : batch, size = static_cast<std::int64_t>(size_of(t));
            std::vector<double> av(static_cast<std::size_t>(a_batches * m * k)), bv(static_cast<std::size_t>(batch * k * n));
            for (double& v : av) v = double(rng() % 5) - 2;
            for (double& v : bv) v = double(rng() % 5) - 2;
            auto on_device = [&](const std::vector<double>& v) {
              const std::int64_t count = static_cast<std::int64_t>(v.size()) + offset;
              std::vector<char> host(static_cast<std::size_t>(count * size));
              for (std::size_t i = 0; i < v.size(); ++i) store(t, host.data(), static_cast<std::int64_t>(i) + offset, v[i]);
              tensor d(t, shape{count}, gpu.get_allocator());
              cuda::check(cudaMemcpy(d.raw_data(), host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
              return d;
            };
            const tensor a = on_device(av), b = on_device(bv);
            tensor c(t, shape{batch * m * n + offset}, gpu.get_allocator());
            auto at = [&](const tensor& x) { return static_cast<char*>(x.raw_data()) + offset * size; };
            for (int twice = 0; twice < 2; ++twice) {  // the second call takes the kept plan
              cuda::check(cudaMemset(c.raw_data(), 0, c.bytes()), "cudaMemset");
              cuda::gemm(gpu, t, ta, tb, m, n, k, at(a), ta ? m : k, at(b), tb ? k : n, at(c), batch, broadcast ? 0 : m * k,
                         k * n, m * n);
              gpu.synchronize();
              std::vector<char> out(static_cast<std::size_t>(c.bytes()));
              cuda::check(cudaMemcpy(out.data(), c.raw_data(), out.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
              int wrong = 0;
              for (std::int64_t p = 0; p < batch; ++p)
                for (std::int64_t i = 0; i < m; ++i)
                  for (std::int64_t j = 0; j < n; ++j) {
                    double want = 0;
                    const std::int64_t pa = broadcast ? 0 : p;
                    for (std::int64_t l = 0; l < k; ++l)
                      want += av[static_cast<std::size_t>(pa * m * k + (ta ? l * m + i : i * k + l))] *
                              bv[static_cast<std::size_t>(p * k * n + (tb ? j * k + l : l * n + j))];
                    wrong += load(t, out.data(), offset + (p * m + i) * n + j) != want;
                  }
              CHECK(wrong == 0);
            }
          }
}

// Batch dims that broadcast by NumPy's rule, where neither operand is the whole batch or a
// single matrix (a product over arrays of pointers), and a single matrix of more batch dims
// than the other operand (the output keeps them all), against the CPU.
TEST_CASE("BatchMatMulV2 on the GPU broadcasts batch dims as the CPU does", "[gpu]") {
  struct operands {
    std::vector<std::int64_t> x_batch, y_batch;
  };
  std::mt19937 rng(17);
  auto random = [&](const std::vector<std::int64_t>& d) { return uniform_floats(rng, d); };
  session_options o;
  o.device_count = {{"GPU", 1}};
  const std::int64_t m = 3, k = 4, n = 5;
  for (dtype t : {dtype::float32, dtype::float64, dtype::bfloat16})
    for (const operands& b : std::vector<operands>{
             {{2, 1}, {1, 3}}, {{2, 1, 3}, {4, 1}}, {{3}, {2, 1}}, {{1, 1, 1}, {4}}, {{4}, {1, 1, 1}}, {{2, 3}, {3}}, {{0, 1}, {1, 3}}})
      for (bool adj_x : {false, true})
        for (bool adj_y : {false, true}) {
          INFO(t << " x batch " << shape(b.x_batch) << " y batch " << shape(b.y_batch) << " adj_x " << adj_x << " adj_y " << adj_y);
          std::vector<std::int64_t> xd = b.x_batch, yd = b.y_batch;
          xd.insert(xd.end(), adj_x ? std::initializer_list<std::int64_t>{k, m} : std::initializer_list<std::int64_t>{m, k});
          yd.insert(yd.end(), adj_y ? std::initializer_list<std::int64_t>{n, k} : std::initializer_list<std::int64_t>{k, n});
          graph g;
          const output x = g.op("Cast", {g.constant(random(xd), "x").out(0)}, {{"DstT", t}}).out(0);
          const output y = g.op("Cast", {g.constant(random(yd), "y").out(0)}, {{"DstT", t}}).out(0);
          std::vector<endpoint> fetches;
          for (const char* device : {"/device:CPU:0", "/device:GPU:0"}) {
            auto scope = g.device_scope(device);
            fetches.push_back(g.op("BatchMatMulV2", {x, y}, {{"adj_x", adj_x}, {"adj_y", adj_y}}).out(0));
          }
          session s(g, o);
          const auto r = s.run({}, fetches);
          CHECK(difference(r[1], r[0]) == "");
        }
}

// Complex products, by Gaussian integers (every product and sum exact): MatMul's transposes
// conjugate nothing, BatchMatMulV2's adj_x and adj_y take the conjugate transpose (as
// TensorFlow's), in one product, in strided batches with a single matrix broadcast and over
// arrays of pointers; against a naive loop, on the CPU and on the GPU.
TEST_CASE("complex products on the GPU conjugate where adj_x and adj_y ask and nowhere else, as a naive loop", "[gpu]") {
  std::mt19937 rng(23);
  const std::int64_t m = 3, k = 4, n = 2;
  auto run = [&](auto zero) {
    using C = decltype(zero);
    const dtype t = dtype_of<C>;
    auto random = [&](const std::vector<std::int64_t>& d) {
      tensor x(t, shape(d));
      for (C& z : x.flat<C>()) z = C(double(rng() % 5) - 2, double(rng() % 5) - 2);
      return x;
    };
    struct product {
      const char* op;
      std::vector<std::int64_t> x_batch, y_batch;
    };
    for (const product& p : std::vector<product>{{"MatMul", {}, {}}, {"BatchMatMulV2", {}, {}}, {"BatchMatMulV2", {2}, {}},
                                                 {"BatchMatMulV2", {2}, {2}}, {"BatchMatMulV2", {2, 1}, {1, 3}}})
      for (bool tx : {false, true})
        for (bool ty : {false, true}) {
          const bool batch_op = std::string(p.op) == "BatchMatMulV2";
          INFO(t << " " << p.op << " x batch " << shape(p.x_batch) << " y batch " << shape(p.y_batch) << " transposed "
                 << tx << " " << ty);
          std::vector<std::int64_t> xd = p.x_batch, yd = p.y_batch;
          xd.insert(xd.end(), tx ? std::initializer_list<std::int64_t>{k, m} : std::initializer_list<std::int64_t>{m, k});
          yd.insert(yd.end(), ty ? std::initializer_list<std::int64_t>{n, k} : std::initializer_list<std::int64_t>{k, n});
          const tensor xv = random(xd), yv = random(yd);
          // The naive product: output batch index b reads x's and y's matrices by NumPy's rule.
          const shape out_batch = *broadcast(shape(p.x_batch), shape(p.y_batch));
          std::vector<std::int64_t> od = out_batch.dims();
          od.insert(od.end(), {m, n});
          tensor want(t, shape(od));
          const auto xs = xv.flat<C>(), ys = yv.flat<C>();
          auto matrix_of = [&](const shape& batch, std::int64_t b) {  // b's matrix in an operand of batch dims `batch`
            std::int64_t index = 0, stride = 1, rest = b;
            for (int d = out_batch.rank() - 1, e = batch.rank() - 1; d >= 0; --d, --e) {
              const std::int64_t i = rest % out_batch[d];
              rest /= out_batch[d];
              if (e >= 0) {
                index += (batch[e] == 1 ? 0 : i) * stride;
                stride *= batch[e];
              }
            }
            return index;
          };
          for (std::int64_t b = 0; b < out_batch.num_elements(); ++b) {
            const std::int64_t xm = matrix_of(shape(p.x_batch), b) * m * k, ym = matrix_of(shape(p.y_batch), b) * k * n;
            for (std::int64_t i = 0; i < m; ++i)
              for (std::int64_t j = 0; j < n; ++j) {
                C sum{};
                for (std::int64_t l = 0; l < k; ++l) {
                  C a = xs[static_cast<std::size_t>(xm + (tx ? l * m + i : i * k + l))];
                  C c = ys[static_cast<std::size_t>(ym + (ty ? j * k + l : l * n + j))];
                  if (batch_op && tx) a = std::conj(a);
                  if (batch_op && ty) c = std::conj(c);
                  sum += a * c;
                }
                want.flat<C>()[static_cast<std::size_t>((b * m + i) * n + j)] = sum;
              }
          }
          graph g;
          const output x = g.constant(xv, "x").out(0), y = g.constant(yv, "y").out(0);
          const attr_map attrs = batch_op ? attr_map{{"adj_x", tx}, {"adj_y", ty}} : attr_map{{"transpose_a", tx}, {"transpose_b", ty}};
          std::vector<endpoint> fetches;
          for (const char* device : {"/device:CPU:0", "/device:GPU:0"}) {
            auto scope = g.device_scope(device);
            fetches.push_back(g.op(p.op, {x, y}, attrs).out(0));
          }
          session_options o;
          o.device_count = {{"GPU", 1}};
          session s(g, o);
          const auto r = s.run({}, fetches);
          for (const tensor& got : r) {
            REQUIRE(got.shape() == want.shape());
            CHECK(got.to_vector<C>() == want.to_vector<C>());
          }
        }
  };
  run(complex64{});
  run(complex128{});
}

// The random inputs of the differential test almost never fit a fused product (three
// operands of matching shapes); these do.
TEST_CASE("the fused products on the GPU equal MatMul with BiasAdd and Relu or with ReluGrad on the CPU", "[gpu]") {
  struct dims {
    std::int64_t m, k, n;
  };
  std::mt19937 rng(11);
  auto random = [&](const std::vector<std::int64_t>& d) { return uniform_floats(rng, d); };
  for (dtype t : {dtype::float32, dtype::bfloat16})
    for (const dims d : {dims{5, 7, 3}, dims{64, 33, 17}, dims{130, 256, 96}, dims{0, 4, 3}, dims{3, 0, 2}, dims{2, 3, 0}})
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (bool relu : {false, true}) {
            INFO(t << " m " << d.m << " k " << d.k << " n " << d.n << " transpose_a " << ta << " transpose_b " << tb
                   << " relu " << relu);
            graph g;
            auto cast = [&](const tensor& v, const char* name) {
              return g.op("Cast", {g.constant(v, name).out(0)}, {{"DstT", t}}).out(0);
            };
            const output a = cast(random(ta ? std::vector{d.k, d.m} : std::vector{d.m, d.k}), "a");
            const output b = cast(random(tb ? std::vector{d.n, d.k} : std::vector{d.k, d.n}), "b");
            const output bias = cast(random({d.n}), "bias");
            const output features = cast(random({d.m, d.n}), "features");
            const attr_map product{{"transpose_a", ta}, {"transpose_b", tb}};
            output plain_bias, plain_mask;
            {
              auto on_cpu = g.device_scope("/device:CPU:0");
              const output p = g.op("MatMul", {a, b}, product).out(0);
              plain_bias = g.op("BiasAdd", {p, bias}).out(0);
              if (relu) plain_bias = g.op("Relu", {plain_bias}).out(0);
              plain_mask = g.op("ReluGrad", {g.op("MatMul", {a, b}, product).out(0), features}).out(0);
            }
            attr_map with_relu = product;
            with_relu.set("relu", relu);
            const node& fused_bias =
                g.op("_FusedMatMulBiasAdd", {a, b, bias}, with_relu, node_options("fused_bias").on("/device:GPU:0"));
            const node& fused_mask =
                g.op("_FusedMatMulReluGrad", {a, b, features}, product, node_options("fused_mask").on("/device:GPU:0"));
            session_options o;
            o.device_count = {{"GPU", 1}};
            o.fuse_matmul = false;  // the CPU's side unfused
            session s(g, o);
            const auto r = s.run({}, {plain_bias, fused_bias, plain_mask, fused_mask});
            CHECK(difference(r[1], r[0]) == "");
            CHECK(difference(r[3], r[2]) == "");
          }
}

// The differential test's random matrices are mostly singular or ill-conditioned; these are
// diagonally dominant (well-conditioned), in batches, and by hand.
TEST_CASE("MatrixInverse and MatrixDeterminant on the GPU equal the CPU's and name a singular matrix", "[gpu]") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> value(-1, 1);
  // A tensor of dtype t and dims d: each matrix's diagonal in [1, 2] (plus up to 0.5i for the
  // complex types), the rest within 1 / (2 n), so that each row's other entries sum to less
  // than half its diagonal's (well-conditioned, and a determinant of at most 2.5^n).
  auto matrices = [&](dtype t, std::vector<std::int64_t> d) {
    const shape s(d);
    const std::int64_t n = s.rank() ? s[s.rank() - 1] : 1;
    tensor out = tensor::zeros(t, s);
    for (std::int64_t e = 0; e < s.num_elements(); ++e) {
      const std::int64_t i = e / n % n, j = e % n;
      const double scale = i == j ? 0.5 : 0.5 / static_cast<double>(n);
      const double re = (i == j ? 1.5 : 0.0) + scale * value(rng), im = is_complex(t) ? scale * value(rng) : 0.0;
      if (t == dtype::float32) out.data<float>()[e] = static_cast<float>(re);
      else if (t == dtype::float64) out.data<double>()[e] = re;
      else if (t == dtype::complex64) out.data<complex64>()[e] = complex64(static_cast<float>(re), static_cast<float>(im));
      else out.data<complex128>()[e] = complex128(re, im);
    }
    return out;
  };
  session_options o;
  o.device_count = {{"GPU", 1}};
  for (dtype t : {dtype::float32, dtype::float64, dtype::complex64, dtype::complex128})
    for (const std::vector<std::int64_t>& d : std::vector<std::vector<std::int64_t>>{
             {1, 1}, {4, 4}, {2, 3, 5, 5}, {33, 33}, {2, 70, 70}, {3, 0, 0}, {0, 4, 4}, {2, 0, 2, 2}, {0, 0}})
      for (bool adjoint : {false, true}) {
        INFO(t << " " << shape(d) << " adjoint " << adjoint);
        graph g;
        const output x = g.constant(matrices(t, d), "x").out(0);
        std::vector<endpoint> fetches;
        for (const char* device : {"/device:CPU:0", "/device:GPU:0"}) {
          auto scope = g.device_scope(device);
          fetches.push_back(g.op("MatrixInverse", {x}, {{"adjoint", adjoint}}).out(0));
          fetches.push_back(g.op("MatrixDeterminant", {x}).out(0));
        }
        session s(g, o);
        const auto r = s.run({}, fetches);
        CHECK(difference(r[2], r[0]) == "");
        CHECK(difference(r[3], r[1]) == "");
      }
  // By hand: [[4, 7], [2, 6]]^-1 = [[0.6, -0.7], [-0.2, 0.4]], its determinant 10; the second
  // matrix's rows are dependent (an exact zero pivot): its determinant is 0 and its inverse an
  // error naming the node and the matrix, at the fetch.
  graph g;
  auto& x = g.placeholder(dtype::float64, partial_shape::unknown_rank(), "x");
  output inverse, determinant;
  {
    auto scope = g.device_scope("/device:GPU:0");
    inverse = g.op("MatrixInverse", {x}, {}, "inverse").out(0);
    determinant = g.op("MatrixDeterminant", {x}, {}, "determinant").out(0);
  }
  session s(g, o);
  const tensor good = tensor::of<double>({2, 2}, {4, 7, 2, 6});
  const auto r = s.run({{x, good}}, {inverse, determinant});
  const std::vector<double> want{0.6, -0.7, -0.2, 0.4};
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(r[0].to_vector<double>()[i] == Approx(want[i]).margin(1e-15));
  CHECK(r[1].scalar_value<double>() == Approx(10.0));
  const tensor batch = tensor::of<double>({2, 2, 2}, {4, 7, 2, 6, 1, 2, 2, 4});
  // (The GPU factors the transpose, whose pivots round 10 to within an ulp; the dependent
  // rows' pivot is exactly 0.)
  const auto dets = s.run({{x, batch}}, {determinant})[0].to_vector<double>();
  REQUIRE(dets.size() == 2);
  CHECK(dets[0] == Approx(10.0));
  CHECK(dets[1] == 0.0);
  test::require_error([&] { s.run({{x, batch}}, {inverse}); }, {"inverse", "MatrixInverse", "not invertible", "matrix 1"});
  // The session goes on.
  CHECK(s.run({{x, good}}, {determinant})[0].scalar_value<double>() == Approx(10.0));
}

TEST_CASE("a product's bias and ReLU run in cuBLASLt's epilogue at an aligned bias and in two passes at another", "[gpu]") {
  const cuda::gpu_device gpu(0, 1);
  const std::int64_t m = 6, n = 5, k = 7;
  // Small integers: exact in float32 and bfloat16, so the results compare exactly.
  std::mt19937 rng(3);
  std::vector<float> av(static_cast<std::size_t>(m * k)), bv(static_cast<std::size_t>(k * n)), biasv(static_cast<std::size_t>(n));
  for (float& v : av) v = float(rng() % 5) - 2;
  for (float& v : bv) v = float(rng() % 5) - 2;
  for (float& v : biasv) v = float(rng() % 9) - 4;
  for (dtype t : {dtype::float32, dtype::bfloat16})
    for (std::int64_t offset : {0, 1})  // a bias one element past the allocator's alignment: two passes
      for (bool relu : {false, true}) {
        INFO(t << " bias offset " << offset << " relu " << relu);
        auto on_device = [&](const std::vector<float>& v, std::int64_t skip) {
          std::vector<float> padded(static_cast<std::size_t>(skip), 0.0f);
          padded.insert(padded.end(), v.begin(), v.end());
          const tensor host = tensor::from_vector(padded);
          graph h;
          const output c = h.op("Cast", {h.constant(host).out(0)}, {{"DstT", t}}).out(0);
          const tensor cast = session(h).run({}, {c}).at(0);
          tensor d(t, cast.shape(), gpu.get_allocator());
          cuda::check(cudaMemcpy(d.raw_data(), cast.raw_data(), cast.bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
          return d;
        };
        const tensor a = on_device(av, 0), b = on_device(bv, 0), bias = on_device(biasv, offset);
        tensor c(t, shape{m, n}, gpu.get_allocator());
        const void* bias_at = static_cast<const char*>(bias.raw_data()) + offset * static_cast<std::int64_t>(size_of(t));
        for (int twice = 0; twice < 2; ++twice) {  // the second call takes the kept plan
          const bool in_epilogue = cuda::gemm(gpu, t, false, false, m, n, k, a.raw_data(), k, b.raw_data(), n, c.raw_data(),
                                              1, 0, 0, 0, {bias_at, relu});
          CHECK(in_epilogue == (offset == 0));
          gpu.synchronize();
          tensor out(t, shape{m, n});
          cuda::check(cudaMemcpy(out.raw_data(), c.raw_data(), c.bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
          const std::vector<double> got = as_doubles(out);
          int wrong = 0;
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
              double want = biasv[static_cast<std::size_t>(j)];
              for (std::int64_t l = 0; l < k; ++l)
                want += double(av[static_cast<std::size_t>(i * k + l)]) * double(bv[static_cast<std::size_t>(l * n + j)]);
              if (relu) want = std::max(want, 0.0);
              wrong += got[static_cast<std::size_t>(i * n + j)] != want;
            }
          CHECK(wrong == 0);
        }
      }
}

TEST_CASE("a dense network on the GPU folds its bias, ReLU and ReluGrad into the products and trains as on the CPU", "[gpu]") {
  auto build = [](graph& g, bool gpu) {
    auto& x = g.placeholder(dtype::float32, {8, 5}, "x");
    auto& labels = g.placeholder(dtype::int32, {8}, "labels");
    auto scope = g.device_scope(gpu ? "/device:GPU:0" : "/device:CPU:0");
    auto& w1 = g.variable(dtype::float32, {5, 16}, "w1");
    auto& b1 = g.variable(dtype::float32, {16}, "b1");
    auto& w2 = g.variable(dtype::float32, {16, 3}, "w2");
    auto& b2 = g.variable(dtype::float32, {3}, "b2");
    std::vector<float> w1v(80), w2v(48);
    for (std::size_t i = 0; i < w1v.size(); ++i) w1v[i] = 0.3f * std::sin(static_cast<float>(i));
    for (std::size_t i = 0; i < w2v.size(); ++i) w2v[i] = 0.3f * std::cos(static_cast<float>(i));
    std::vector<int> inits;
    inits.push_back(g.op("Assign", {w1, g.constant(tensor::from_vector(w1v, shape{5, 16}))}).id());
    inits.push_back(g.op("Assign", {b1, g.constant(tensor::filled(shape{16}, 0.05f))}).id());
    inits.push_back(g.op("Assign", {w2, g.constant(tensor::from_vector(w2v, shape{16, 3}))}).id());
    inits.push_back(g.op("Assign", {b2, g.constant(tensor::filled(shape{3}, -0.1f))}).id());
    const output h = g.op("Relu", {g.op("BiasAdd", {g.op("MatMul", {x, w1}).out(0), b1.out(0)}).out(0)}, {}, "h").out(0);
    const output logits = g.op("BiasAdd", {g.op("MatMul", {h, w2}).out(0), b2.out(0)}, {}, "logits").out(0);
    const output loss = g.op("Mean", {g.op("SparseSoftmaxCrossEntropyWithLogits", {logits, labels}).out(0),
                                      g.constant(tensor::scalar(0)).out(0)}, {}, "loss").out(0);
    const auto t = train::minimize(g, loss, {w1.out(0), b1.out(0), w2.out(0), b2.out(0)}, train::sgd{0.5});
    return classifier(x.out(0), labels.out(0), loss, t.step.id(), inits);
  };
  const auto losses = train_on_both(build, [](const run_metadata& meta, bool gpu) {
    std::multiset<std::string> ops;
    for (const auto& n : meta.stats.nodes) ops.insert(n.op + (n.device.find("GPU") != std::string::npos ? " GPU" : " CPU"));
    const std::string where = gpu ? " GPU" : " CPU";
    CHECK(ops.count("_FusedMatMulBiasAdd" + where) == 2);  // h with its ReLU, logits without
    CHECK(ops.count("_FusedMatMulReluGrad" + where) == 1);  // h's gradient
    CHECK(ops.count("BiasAdd" + where) == 0);
    CHECK(ops.count("_FusedMatMulApplyGradientDescent" + where) == 2);  // w1 and w2 updated by their products
  });
  for (int i = 0; i < 5; ++i) CHECK(losses[1][static_cast<std::size_t>(i)] == Approx(losses[0][static_cast<std::size_t>(i)]).epsilon(1e-4));
  CHECK(losses[1][4] < losses[1][0]);
}

// The ops each node ran as, with " GPU" or " CPU" after it, from a traced run.
std::multiset<std::string> ops_run(session& s, const feed_list& feeds, const std::vector<endpoint>& fetches,
                                   const std::vector<endpoint>& targets) {
  run_metadata meta;
  s.run(feeds, fetches, targets, {.trace = true}, &meta);
  std::multiset<std::string> ops;
  for (const auto& n : meta.stats.nodes) ops.insert(n.op + (n.device.find("GPU") != std::string::npos ? " GPU" : " CPU"));
  return ops;
}

// A session on the GPU folds a convolution layer's BiasAdd and Relu into its Conv2D and the
// ReluGrad into the MaxPoolGrad, as on the CPU; against a CPU session that folds nothing.
TEST_CASE("a convolution layer on the GPU folds its bias, ReLU and ReLU gradient and equals the unfused nodes", "[gpu]") {
  std::mt19937 rng(29);
  auto random = [&](const shape& sh) { return uniform_doubles(rng, sh); };
  for (dtype t : {dtype::float32, dtype::bfloat16}) {
    INFO(t);
    const tensor xv = random(shape{2, 8, 8, 3}), fv = random(shape{3, 3, 3, 4}), bv = random(shape{4}), cv = random(shape{2, 4, 4, 4});
    std::vector<tensor> results[2];
    for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
      graph g;
      // Fed, so that constant folding leaves the layer's nodes to the devices.
      const output xp = g.placeholder(dtype::float64, xv.shape(), "x").out(0), fp = g.placeholder(dtype::float64, fv.shape(), "f").out(0);
      auto scope = g.device_scope(on_gpu ? "/device:GPU:0" : "/device:CPU:0");
      auto cast = [&](const tensor& v) { return g.op("Cast", {g.constant(v).out(0)}, {{"DstT", t}}).out(0); };
      const output x = g.op("Cast", {xp}, {{"DstT", t}}).out(0), f = g.op("Cast", {fp}, {{"DstT", t}}).out(0), b = cast(bv);
      const attr_map conv{{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("SAME")}};
      const output r = g.op("Relu", {g.op("BiasAdd", {g.op("Conv2D", {x, f}, conv).out(0), b}).out(0)}).out(0);
      const attr_map pool{{"ksize", std::vector<std::int64_t>{1, 2, 2, 1}}, {"strides", std::vector<std::int64_t>{1, 2, 2, 1}},
                          {"padding", std::string("VALID")}};
      const output mp = g.op("MaxPool", {r}, pool).out(0);
      const output loss = g.op("Sum", {g.op("Mul", {mp, cast(cv)}).out(0),
                                       g.constant(tensor::of<std::int32_t>({4}, {0, 1, 2, 3})).out(0)})
                              .out(0);
      const auto d = add_gradients(g, {loss}, {x, f, b});
      session_options o;
      if (on_gpu) o.device_count = {{"GPU", 1}};
      else o.fuse_matmul = false;
      session s(g, o);
      const std::vector<endpoint> fetches{mp, d[0], d[1], d[2]};
      const feed_list feeds{{xp, xv}, {fp, fv}};
      const auto ops = ops_run(s, feeds, fetches, {});
      if (on_gpu) {
        CHECK(ops.count("_FusedConv2DBiasAdd GPU") == 1);
        CHECK(ops.count("_FusedMaxPoolGradReluGrad GPU") == 1);
        CHECK(ops.count("Relu GPU") + ops.count("ReluGrad GPU") + ops.count("MaxPoolGrad GPU") == 0);
      } else {
        CHECK(ops.count("Relu CPU") == 1);
      }
      results[on_gpu] = s.run(feeds, fetches);
    }
    const char* names[] = {"MaxPool", "the input's gradient", "the filter's gradient", "the bias's gradient"};
    for (std::size_t i = 0; i < results[0].size(); ++i) {
      INFO(names[i]);
      CHECK(difference(results[1][i], results[0][i]) == "");
    }
  }
}

// A session on the GPU folds a weight's gradient-descent step into its product (one cuBLAS
// call adds -rate a^T b into the variable) and mixed precision's Adam step into its bfloat16
// product, as on the CPU; against a CPU session that folds nothing (Adam: which folds, the
// CPU's step from the same float sums; unfolded, the gradient is rounded to bfloat16).
TEST_CASE("the folded updates on the GPU equal the CPU's: gradient descent into the product and Adam on bfloat16 sums", "[gpu]") {
  std::mt19937 rng(31);
  auto random = [&](const shape& sh) { return uniform_floats(rng, sh.dims()); };
  const std::int64_t m = 6, k = 9, n = 5;
  for (dtype t : {dtype::float32, dtype::bfloat16})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool adam : {false, true}) {
          if (adam && t != dtype::bfloat16) continue;  // Adam's fold: float32 state, a bfloat16 product
          INFO(t << " transpose_a " << ta << " transpose_b " << tb << (adam ? " Adam" : " gradient descent"));
          const tensor av = random(ta ? shape{k, m} : shape{m, k}), bv = random(tb ? shape{n, k} : shape{k, n});
          const tensor w0 = random(shape{m, n}), m0 = random(shape{m, n}), v0 = random(shape{m, n});
          std::vector<std::vector<tensor>> results;
          for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
            graph g;
            auto scope = g.device_scope(on_gpu ? "/device:GPU:0" : "/device:CPU:0");
            const dtype var_type = adam ? dtype::float32 : t;
            auto cast = [&](const tensor& v, dtype to) { return g.op("Cast", {g.constant(v).out(0)}, {{"DstT", to}}).out(0); };
            std::vector<output> vars;
            std::vector<endpoint> inits;
            for (const tensor* start : {&w0, &m0, &v0}) {
              if (!adam && start != &w0) break;
              vars.push_back(g.variable(var_type, shape{m, n}, "s" + std::to_string(vars.size())).out(0));
              inits.emplace_back(g.op("Assign", {vars.back(), cast(*start, var_type)}));
            }
            const output product = g.op("MatMul", {cast(av, t), cast(bv, t)}, {{"transpose_a", ta}, {"transpose_b", tb}}).out(0);
            auto scalar = [&](float v) { return cast(tensor::scalar(v), var_type); };
            const node& step =
                adam ? g.op("ApplyAdam", {vars[0], vars[1], vars[2], scalar(0.81f), scalar(0.998f), scalar(0.01f), scalar(0.9f),
                                          scalar(0.999f), scalar(1e-7f), g.op("Cast", {product}, {{"DstT", dtype::float32}}).out(0)})
                     : g.op("ApplyGradientDescent", {vars[0], scalar(0.25f), product});
            session_options o;
            if (on_gpu) o.device_count = {{"GPU", 1}};
            else o.fuse_matmul = adam;  // the CPU's Adam reference folds too (the same float sums)
            session s(g, o);
            s.run(inits);
            const auto ops = ops_run(s, {}, {}, {step});
            const std::string fused = adam ? "_FusedMatMulApplyAdam" : "_FusedMatMulApplyGradientDescent";
            CHECK(ops.count(fused + (on_gpu ? " GPU" : " CPU")) == (on_gpu || adam ? 1 : 0));
            results.push_back(s.run({}, std::vector<endpoint>(vars.begin(), vars.end())));
          }
          for (std::size_t i = 0; i < results[0].size(); ++i) {
            INFO("variable " << i);
            CHECK(difference(results[1][i], results[0][i]) == "");
          }
        }
}

TEST_CASE("AssignAdd and AssignSub update a variable on the GPU by hand's values and keep a value read before", "[gpu]") {
  // v = [1, -2, 2^31 - 1]; v += [5, 3, 1] (int32 wraps at the top), then v -= [2, 2, 2].
  for (dtype t : {dtype::float32, dtype::int32, dtype::int64, dtype::float64, dtype::complex64}) {
    INFO(t);
    graph g;
    auto scope = g.device_scope("/device:GPU:0");
    const auto of = [&](std::vector<std::int64_t> xs) {
      return g.op("Cast", {g.constant(tensor::from_vector(xs)).out(0)}, {{"DstT", t}}).out(0);
    };
    auto& v = g.variable(t, {3}, "v");
    const node& init = g.op("Assign", {v, of({1, -2, 2147483647})});
    const node& read = g.op("Identity", {v.out(0)}, {}, node_options("read"));
    const node& add = g.op("AssignAdd", {v.out(0), of({5, 3, 1})}, {}, node_options("add").after({read.id()}));
    const node& sub = g.op("AssignSub", {v.out(0), of({2, 2, 2})}, {}, node_options("sub"));
    auto& delta = g.placeholder(t, {-1}, "delta");  // its length known when it is fed
    const node& bad = g.op("AssignAdd", {v.out(0), delta.out(0)}, {}, node_options("bad"));
    session_options o;
    o.device_count = {{"GPU", 1}};
    session s(g, o);
    s.run({}, {}, {init});
    const auto r = s.run({}, {read, add});
    const auto as_int64 = [](const tensor& x) {
      if (x.dtype() == dtype::complex64) {
        std::vector<std::int64_t> out;
        for (auto z : x.to_vector<complex64>()) out.push_back(z.imag() == 0 ? static_cast<std::int64_t>(z.real()) : -7);
        return out;
      }
      std::vector<std::int64_t> out;
      for (double d : as_doubles(x)) out.push_back(static_cast<std::int64_t>(d));
      return out;
    };
    // The last element by hand: float32's 2^31 - 1 rounds to 2^31 and stays there (its
    // neighbours are 128 and 256 away); int32 wraps up, then back down.
    const bool single = t == dtype::float32 || t == dtype::complex64;
    const std::int64_t first = single ? 2147483648LL : 2147483647LL;
    const std::int64_t added = t == dtype::int32 ? -2147483648LL : 2147483648LL;
    const std::int64_t subtracted = single ? 2147483648LL : 2147483646LL;
    CHECK(as_int64(r[0]) == std::vector<std::int64_t>{1, -2, first});
    CHECK(as_int64(r[1]) == std::vector<std::int64_t>{6, 1, added});
    CHECK(as_int64(s.run({}, {sub})[0]) == std::vector<std::int64_t>{4, -1, subtracted});
    // A delta of another shape: an error naming the variable, and the value kept.
    test::require_error([&] { s.run({{delta, tensor::zeros(t, shape{2})}}, {}, {bad}); },
                        {"value of shape [2] does not match variable 'v' of shape [3]"});
    CHECK(as_int64(s.run({}, {v.out(0)})[0]) == std::vector<std::int64_t>{4, -1, subtracted});
  }
}

TEST_CASE("the GPU's caching allocator under many sizes, and its out-of-memory error", "[gpu]") {
  cuda::gpu_device gpu(0, 1, std::size_t(256) << 20);
  const std::size_t before = gpu.memory_stats().bytes_in_use;  // the process's allocator: other cases' tensors too
  std::mt19937 rng(3);
  std::vector<tensor> live;
  for (int i = 0; i < 3000; ++i) {
    if (live.size() < 64 && rng() % 3) {
      const std::int64_t n = std::int64_t(1) << (rng() % 20);
      live.emplace_back(dtype::float32, shape{n + static_cast<std::int64_t>(rng() % n)}, gpu.get_allocator());
    } else if (!live.empty()) {
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(rng() % live.size()));
    }
  }
  live.clear();
  CHECK(gpu.memory_stats().bytes_in_use == before);
  // The session's limit, then the GPU's own memory.
  test::require_error([&] { tensor big(dtype::float32, shape{std::int64_t(1) << 27}, gpu.get_allocator()); },
                      {"memory limit of 268435456 bytes reached"});
  cuda::gpu_device unlimited(0, 1);
  test::require_error([&] { tensor huge(dtype::float32, shape{std::int64_t(1) << 40}, unlimited.get_allocator()); },
                      {"GPU:0 memory", "out of memory allocating 4398046511104 bytes"});
  // Values survive a round trip through the device.
  const tensor host = tensor::of<float>({2, 3}, {1, -2, 3.5f, 0, 1e-3f, -7});
  CHECK(gpu.copy_to_host(gpu.copy_from_host(host)).to_vector<float>() == host.to_vector<float>());
  CHECK(gpu.copy_to_host(gpu.copy_from_host(tensor(dtype::float32, {0, 4}))).shape() == shape{0, 4});
}

TEST_CASE("copies to and from the GPU reuse the events that order their streams, from several threads too", "[gpu]") {
  cuda::gpu_device gpu(0, 1);
  const tensor host = tensor::of<float>({2, 3}, {1, -2, 3.5f, 0, 1e-3f, -7});
  for (int i = 0; i < 100; ++i) REQUIRE(gpu.copy_to_host(gpu.copy_from_host(host)).to_vector<float>() == host.to_vector<float>());
  CHECK(gpu.ordering_events_kept() == 1);  // one copy at a time: one event, made once
  // Four threads at once, each its own values: every round trip right, at most four events.
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const tensor mine = tensor::filled(shape{1000}, static_cast<float>(t * 1000 + i));
        if (gpu.copy_to_host(gpu.copy_from_host(mine)).to_vector<float>() != mine.to_vector<float>()) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
  CHECK(gpu.ordering_events_kept() >= 1);
  CHECK(gpu.ordering_events_kept() <= 4);
}

TEST_CASE("a training step split between the CPU and the GPU equals the CPU's", "[gpu]") {
  auto build = [](graph& g, bool gpu) {
    auto& x = g.placeholder(dtype::float32, {8, 5}, "x");
    auto& labels = g.placeholder(dtype::int32, {8}, "labels");
    auto& w1 = g.variable(dtype::float32, {5, 16}, "w1");
    auto& w2 = g.variable(dtype::float32, {16, 3}, "w2");
    std::vector<int> inits;
    inits.push_back(g.op("Assign", {w1, g.constant(tensor::filled(shape{5, 16}, 0.1f))}).id());
    inits.push_back(g.op("Assign", {w2, g.constant(tensor::filled(shape{16, 3}, -0.05f))}).id());
    output h;
    {
      auto scope = g.device_scope(gpu ? "/device:GPU:0" : "");
      h = g.op("Relu", {g.op("MatMul", {x, w1}).out(0)}).out(0);
    }
    const output logits = g.op("MatMul", {h, w2}).out(0);  // on the CPU
    const output loss = g.op("Mean", {g.op("SparseSoftmaxCrossEntropyWithLogits", {logits, labels}).out(0),
                                      g.constant(tensor::scalar(0)).out(0)}, {}, "loss").out(0);
    const auto t = train::minimize(g, loss, {w1.out(0), w2.out(0)}, train::sgd{0.5});
    return classifier(x.out(0), labels.out(0), loss, t.step.id(), inits);
  };
  const auto losses = train_on_both(build);
  for (int i = 0; i < 5; ++i) CHECK(losses[1][static_cast<std::size_t>(i)] == Approx(losses[0][static_cast<std::size_t>(i)]).epsilon(1e-4));
}

TEST_CASE("a label out of range on the GPU fails the step that fetches, naming the node", "[gpu]") {
  graph g;
  auto& logits = g.placeholder(dtype::float32, {2, 3}, "logits");
  auto& labels = g.placeholder(dtype::int64, {2}, "labels");
  output loss;
  {
    auto scope = g.device_scope("/device:GPU:0");
    loss = g.op("SparseSoftmaxCrossEntropyWithLogits", {logits, labels}, {}, "xent").out(0);
  }
  session_options o;
  o.device_count = {{"GPU", 1}};
  session s(g, o);
  const tensor l = tensor::filled(shape{2, 3}, 0.5f);
  test::require_error([&] { s.run({{logits, l}, {labels, tensor::of<std::int64_t>({2}, {1, 7})}}, {loss}); },
                      {"xent", "a label is outside the valid range [0, classes): 7"});
  // The session goes on.
  const auto r = s.run({{logits, l}, {labels, tensor::of<std::int64_t>({2}, {1, 2})}}, {loss});
  CHECK(r[0].to_vector<float>()[0] == Approx(std::log(3.0f)));
}

TEST_CASE("a Fused node runs on the GPU as the ops it fuses run on the CPU, broadcasting", "[gpu]") {
  // y = relu(a * b + c) - 0.5 * b, b a row, c a scalar; the CPU computes the unfused ops.
  const tensor a = tensor::of<float>({2, 3}, {1, -2, 3, -4, 5, -6});
  const tensor b = tensor::of<float>({3}, {0.5f, 2, -1});
  const tensor c = tensor::scalar(0.25f);
  graph g;
  auto& pa = g.placeholder(dtype::float32, {2, 3}, "a");
  auto& pb = g.placeholder(dtype::float32, {3}, "b");
  auto& pc = g.placeholder(dtype::float32, {}, "c");
  const output half = g.constant(tensor::scalar(0.5f)).out(0);
  const output want = g.op("Sub", {g.op("Relu", {g.op("Add", {g.op("Mul", {pa, pb}).out(0), pc}).out(0)}).out(0),
                                   g.op("Mul", {half, pb}).out(0)}).out(0);
  const node& fused = g.op("Fused", {pa, pb, pc, half},
                           {{"expr", std::string("Sub:float32(Relu:float32(Add:float32(Mul:float32($float32,$float32),$float32s)),"
                                                 "Mul:float32($float32s,$float32))")},
                            {"slots", std::vector<std::int64_t>{0, 1, 2, 3, 1}},
                            {"T", dtype::float32},
                            {"Tin", std::vector<dtype>{dtype::float32, dtype::float32, dtype::float32, dtype::float32}}},
                           node_options("fused").on("/device:GPU:0"));
  session_options o;
  o.device_count = {{"GPU", 1}};
  session s(g, o);
  const auto r = s.run({{pa, a}, {pb, b}, {pc, c}}, {want, fused});
  CHECK(difference(r[1], r[0]) == "");
  CHECK(cuda::fused_cache::global().get_counts().compiled + cuda::fused_cache::global().get_counts().from_disk >= 1);
  // Inputs of the output's shape and scalars: four elements a thread at a time, and the
  // elements after the last four (1027 = 4 * 256 + 3) one by one; float32 and float16.
  for (dtype t : {dtype::float32, dtype::float16}) {
    INFO(t);
    std::vector<float> xs(1027);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.1f * static_cast<float>(i));
    graph h;
    const output x = h.op("Cast", {h.constant(tensor::from_vector(xs)).out(0)}, {{"DstT", t}}).out(0);
    const output k = h.op("Cast", {h.constant(tensor::scalar(0.75f)).out(0)}, {{"DstT", t}}).out(0);
    output plain;
    {
      auto on_cpu = h.device_scope("/device:CPU:0");
      plain = h.op("Relu", {h.op("Add", {h.op("Mul", {x, k}).out(0), x}).out(0)}).out(0);
    }
    const std::string ty(name(t));
    const node& f = h.op("Fused", {x, k},
                         {{"expr", "Relu:" + ty + "(Add:" + ty + "(Mul:" + ty + "($" + ty + ",$" + ty + "s),$" + ty + "))"},
                          {"slots", std::vector<std::int64_t>{0, 1, 0}},
                          {"T", t},
                          {"Tin", std::vector<dtype>{t, t}}},
                         node_options("fused").on("/device:GPU:0"));
    session s2(h, o);
    const auto r2 = s2.run({}, {plain, f});
    CHECK(difference(r2[1], r2[0]) == "");
  }
  // Complex numbers: sigmoid(a * b) + a / b, b a row broadcast, and an Equal of complex
  // numbers (a bool Fused node over complex inputs; true in a's first column), against the unfused ops on the CPU.
  for (dtype t : {dtype::complex64, dtype::complex128}) {
    INFO(t);
    graph h;
    const auto complex_input = [&](std::vector<float> parts, shape dims) {
      std::vector<complex128> z;
      for (std::size_t i = 0; i + 1 < parts.size(); i += 2) z.emplace_back(parts[i], parts[i + 1]);
      const tensor c = tensor::from_vector(z).reshape(dims);
      return h.op("Cast", {h.constant(c).out(0)}, {{"DstT", t}}).out(0);
    };
    const output a = complex_input({1, -2, 0.5f, 3, -1.5f, 0.25f, 2, 2, -3, 1, 0.75f, -0.5f}, {2, 3});
    const output b = complex_input({1, 0, -2, 0.5f, 1.5f, -1}, {3});  // b[0] = 1: a's first column equals a * b
    output plain, plain_equal;
    {
      auto on_cpu = h.device_scope("/device:CPU:0");
      plain = h.op("Add", {h.op("Sigmoid", {h.op("Mul", {a, b}).out(0)}).out(0), h.op("Div", {a, b}).out(0)}).out(0);
      plain_equal = h.op("Equal", {a, h.op("Mul", {a, b}).out(0)}).out(0);
    }
    const std::string ty(name(t));
    const node& f = h.op("Fused", {a, b},
                         {{"expr", "Add:" + ty + "(Sigmoid:" + ty + "(Mul:" + ty + "($" + ty + ",$" + ty + ")),Div:" + ty + "($" + ty +
                                       ",$" + ty + "))"},
                          {"slots", std::vector<std::int64_t>{0, 1, 0, 1}},
                          {"T", t},
                          {"Tin", std::vector<dtype>{t, t}}},
                         node_options("fused").on("/device:GPU:0"));
    const node& f_equal = h.op("Fused", {a, b},
                               {{"expr", "Equal:bool($" + ty + ",Mul:" + ty + "($" + ty + ",$" + ty + "))"},
                                {"slots", std::vector<std::int64_t>{0, 0, 1}},
                                {"T", dtype::boolean},
                                {"Tin", std::vector<dtype>{t, t}}},
                               node_options("fused_equal").on("/device:GPU:0"));
    session s3(h, o);
    const auto r3 = s3.run({}, {plain, f, plain_equal, f_equal});
    CHECK(difference(r3[1], r3[0]) == "");
    CHECK(difference(r3[3], r3[2]) == "");
  }
}

int main(int argc, char** argv) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv)) return rc;
  const auto& filters = session.configData().testsOrTags;
  const bool gpu_cases = std::find(filters.begin(), filters.end(), "[gpu]") != filters.end();
  if (gpu_cases) {
    const auto a = cuda::gpus_available();
    if (a.count == 0) {
      std::printf("weft_cuda_tests: the [gpu] cases are skipped: no GPU (%s)\n", a.why_none.c_str());
      return 77;  // CTest's SKIP_RETURN_CODE
    }
    const cuda::gpu_device probe(0, 1);
    std::printf("weft_cuda_tests: on %s (%s)\n", probe.name().c_str(), probe.properties().name);
  }
  return session.run();
}
