// Every op against values computed by hand or by a naive loop.
#include "support/helpers.hpp"

#include <bit>
#include <functional>
#include <cmath>
#include <limits>
#include <map>

using namespace weft;
using test::eval;

namespace {
template <class T>
const node& c(graph& g, shape s, std::vector<T> v) {
  return g.constant(tensor::from_vector(v, s));
}
const node& i32s(graph& g, std::vector<std::int32_t> v) { return g.constant(tensor::from_vector(v)); }
}  // namespace

TEST_CASE("binary ops broadcast like NumPy, including rank 0 and empty") {
  graph g;
  auto& a = c<float>(g, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto& col = c<float>(g, {2, 1}, {10, 20});
  auto& row = c<float>(g, {3}, {1, 2, 3});
  auto& s = g.constant(tensor::scalar(2.0f));
  CHECK(eval(g, g.op("Add", {a, col})).to_vector<float>() == std::vector<float>{11, 12, 13, 24, 25, 26});
  CHECK(eval(g, g.op("Sub", {row, a})).to_vector<float>() == std::vector<float>{0, 0, 0, -3, -3, -3});
  CHECK(eval(g, g.op("Mul", {s, a})).to_vector<float>() == std::vector<float>{2, 4, 6, 8, 10, 12});
  CHECK(eval(g, g.op("Div", {a, s})).to_vector<float>() == std::vector<float>{0.5, 1, 1.5, 2, 2.5, 3});
  auto outer = eval(g, g.op("Mul", {col, row}));
  CHECK(outer.shape() == shape{2, 3});
  CHECK(outer.to_vector<float>() == std::vector<float>{10, 20, 30, 20, 40, 60});
  CHECK(eval(g, g.op("Add", {s, s})).shape() == shape{});
  auto empty = eval(g, g.op("Add", {c<float>(g, {0, 3}, {}), row}));
  CHECK(empty.shape() == shape{0, 3});
  CHECK(eval(g, g.op("Maximum", {a, g.constant(tensor::scalar(3.5f))})).to_vector<float>() ==
        std::vector<float>{3.5, 3.5, 3.5, 4, 5, 6});
  CHECK(eval(g, g.op("Minimum", {a, col})).to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  auto p = eval(g, g.op("Pow", {row, s})).to_vector<float>();
  CHECK(p == std::vector<float>{1, 4, 9});
}

TEST_CASE("integer division by zero is an error, INT_MIN / -1 wraps") {
  graph g;
  auto& a = c<std::int32_t>(g, {2}, {7, INT32_MIN});
  auto& z = g.op("Div", {a, c<std::int32_t>(g, {2}, {2, 0})});
  test::require_error([&] { eval(g, z); }, {"(Div)", "integer division by zero", "int32[2]"});
  CHECK(eval(g, g.op("Div", {a, c<std::int32_t>(g, {2}, {-1, -1})})).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{-7, INT32_MIN});
}

TEST_CASE("unary math matches the standard library") {
  std::vector<double> x{0.25, 0.5, 1.0, 2.0, 3.0};
  graph g;
  auto& t = c<double>(g, {5}, x);
  auto check = [&](const char* op, double (*f)(double)) {
    INFO(op);
    auto got = eval(g, g.op(op, {t})).to_vector<double>();
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(got[i] == Approx(f(x[i])).epsilon(1e-12));
  };
  check("Exp", [](double v) { return std::exp(v); });
  check("Log", [](double v) { return std::log(v); });
  check("Sqrt", [](double v) { return std::sqrt(v); });
  check("Rsqrt", [](double v) { return 1 / std::sqrt(v); });
  check("Tanh", [](double v) { return std::tanh(v); });
  check("Sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); });
  check("Square", [](double v) { return v * v; });
  check("Neg", [](double v) { return -v; });
  auto& m = c<float>(g, {4}, {-2, -0.5, 0, 3});
  CHECK(eval(g, g.op("Relu", {m})).to_vector<float>() == std::vector<float>{0, 0, 0, 3});
  CHECK(eval(g, g.op("Abs", {m})).to_vector<float>() == std::vector<float>{2, 0.5, 0, 3});
}


// 19 values: every packet width holds ordinary values beside the edges (NaN, infinities,
// signed zeros, halves that Round takes to the even neighbour).
TEST_CASE("the trigonometric and hyperbolic functions and Reciprocal Log1p Expm1 Softplus Erf Floor Ceil Round Sign Elu Selu and Relu6 match the standard library") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> x{0.25, -0.5, 0.5, 1.5, 2.5, -2.5, 0.0, -0.0, 1e-10, -1e-10, 3.7, -3.2, 40, -40, 700, -745, inf, -inf, nan};
  // Independent answers: the C library's, and log(1 + e^x) in long double for Softplus.
  auto softplus = [](double v) {
    if (std::isnan(v)) return v;
    if (v > 50) return v;  // log(1 + e^v) = v + log1p(e^-v): v to every double digit
    return static_cast<double>(std::log1p(std::exp(static_cast<long double>(v))));
  };
  const std::map<std::string, std::function<double(double)>> want{
      {"Sin", [](double v) { return std::sin(v); }},     {"Cos", [](double v) { return std::cos(v); }},
      {"Tan", [](double v) { return std::tan(v); }},     {"Asin", [](double v) { return std::asin(v); }},
      {"Acos", [](double v) { return std::acos(v); }},   {"Atan", [](double v) { return std::atan(v); }},
      {"Sinh", [](double v) { return std::sinh(v); }},   {"Cosh", [](double v) { return std::cosh(v); }},
      {"Asinh", [](double v) { return std::asinh(v); }}, {"Acosh", [](double v) { return std::acosh(v); }},
      {"Atanh", [](double v) { return std::atanh(v); }},
      {"Reciprocal", [](double v) { return 1 / v; }},    {"Log1p", [](double v) { return std::log1p(v); }},
      {"Expm1", [](double v) { return std::expm1(v); }}, {"Softplus", softplus},
      {"Erf", [](double v) { return std::erf(v); }},     {"Floor", [](double v) { return std::floor(v); }},
      {"Ceil", [](double v) { return std::ceil(v); }},   {"Round", [](double v) { return std::nearbyint(v); }},
      {"Sign", [](double v) { return std::isnan(v) ? v : static_cast<double>((v > 0) - (v < 0)); }},
      {"Elu", [](double v) { return v > 0 ? v : std::expm1(v); }},
      {"Selu", [](double v) { return v > 0 ? 1.0507009873554805 * v : 1.0507009873554805 * 1.6732632423543772 * std::expm1(v); }},
      {"Relu6", [](double v) { return std::isnan(v) ? v : std::min(std::max(v, 0.0), 6.0); }}};
  for (dtype t : {dtype::float64, dtype::float32}) {
    graph g;
    auto& v = g.op("Cast", {c<double>(g, {19}, x)}, {{"DstT", t}});
    const auto input = eval(g, g.op("Cast", {v}, {{"DstT", dtype::float64}})).to_vector<double>();
    for (const auto& [op, f] : want) {
      INFO(op << " of " << t);
      auto& y = g.op(op, {v});
      REQUIRE(y.output_dtype(0) == t);
      const auto got = eval(g, g.op("Cast", {y}, {{"DstT", dtype::float64}})).to_vector<double>();
      for (std::size_t i = 0; i < x.size(); ++i) {
        INFO("x = " << input[i]);
        double expected = f(input[i]);
        if (t == dtype::float32) expected = static_cast<float>(expected);
        // float32 within FLT_MIN of 0: Eigen's float exp without AVX-512 stops at e^-87.3
        // (Softplus(-745) is 2.9e-39 there, as Exp(-745)).
        const double tiny = t == dtype::float32 ? std::numeric_limits<float>::min() : 0.0;
        if (std::isnan(expected)) CHECK(std::isnan(got[i]));
        else if (std::isinf(expected)) CHECK(got[i] == expected);
        else if (std::abs(expected) <= tiny) CHECK(std::abs(got[i]) <= tiny);
        else CHECK(got[i] == Approx(expected).epsilon(t == dtype::float32 ? 4e-6 : 1e-13).margin(0));
        if (expected == 0 && got[i] == 0) CHECK(std::signbit(got[i]) == std::signbit(expected));  // Floor(-0) is -0
      }
    }
  }
}

TEST_CASE("IsNan IsInf and IsFinite in every float dtype, and CheckNumerics passes finite tensors and names NaN and Inf") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  // 19 values: every packet width sees the edges among ordinary values.
  const std::vector<double> x{1, -2, inf, 0, nan, 3, -inf, 5, 6, 7, 8, nan, 1e300, -0.0, 1e-310, 2, 3, 4, inf};
  for (dtype t : {dtype::float64, dtype::float32, dtype::float16, dtype::bfloat16}) {
    INFO(t);
    graph g;
    auto& v = g.op("Cast", {c<double>(g, {19}, x)}, {{"DstT", t}});
    const auto held = eval(g, g.op("Cast", {v}, {{"DstT", dtype::float64}})).to_vector<double>();  // 1e300: inf in float32
    const auto nans = eval(g, g.op("IsNan", {v})), infs = eval(g, g.op("IsInf", {v})), finite = eval(g, g.op("IsFinite", {v}));
    REQUIRE(nans.dtype() == dtype::boolean);
    for (std::size_t i = 0; i < x.size(); ++i) {
      INFO(held[i]);
      CHECK(nans.to_vector<bool>()[i] == std::isnan(held[i]));
      CHECK(infs.to_vector<bool>()[i] == std::isinf(held[i]));
      CHECK(finite.to_vector<bool>()[i] == std::isfinite(held[i]));
    }
  }
  graph g;
  auto& ok = c<float>(g, {2, 2}, {1, -2, 0, 1e30f});
  const tensor in = eval(g, ok), out = eval(g, g.op("CheckNumerics", {ok}, {{"message", std::string("fine")}}));
  CHECK(out.to_vector<float>() == in.to_vector<float>());
  CHECK(eval(g, g.op("CheckNumerics", {c<float>(g, {0, 3}, {})}, {{"message", std::string("empty")}})).shape() == shape{0, 3});
  CHECK(eval(g, g.op("CheckNumerics", {g.constant(tensor::scalar(2.5))}, {{"message", std::string("scalar")}})).shape() == shape{});
  auto check = [&](std::vector<float> v, const char* what) {
    auto& t = c<float>(g, {static_cast<std::int64_t>(v.size())}, v);
    const std::string name = "check_logits_" + std::to_string(v.size());
    auto& n = g.op("CheckNumerics", {t}, {{"message", std::string("the logits")}}, node_options(name));
    test::require_error([&] { eval(g, n); }, {name, "CheckNumerics", "the logits : Tensor had", what});
  };
  const float finf = std::numeric_limits<float>::infinity(), fnan = std::numeric_limits<float>::quiet_NaN();
  check({1, fnan, 2}, "NaN values");
  check({1, 2, 3, 4, 5, 6, 7, 8, 9, -finf}, "Inf values");
  check({finf, fnan}, "NaN and Inf values");
  test::require_error([&] { g.op("IsNan", {c<std::int32_t>(g, {1}, {1})}); }, {"IsNan", "int32"});
}

TEST_CASE("Atan2 gives the C library's angle in every quadrant and on the axes, broadcasting") {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> ys{1, -1, 0.0, -0.0, 2.5, -inf, 3};
  const std::vector<double> xs{1, -1, -0.0, 0.0, -2, inf, -inf, 0.5};  // a row: every y against every x
  for (dtype t : {dtype::float64, dtype::float32}) {
    INFO(t);
    graph g;
    auto& y = g.op("Cast", {c<double>(g, {7, 1}, ys)}, {{"DstT", t}});
    auto& x = g.op("Cast", {c<double>(g, {8}, xs)}, {{"DstT", t}});
    const tensor z = eval(g, g.op("Cast", {g.op("Atan2", {y, x})}, {{"DstT", dtype::float64}}));
    REQUIRE(z.shape() == shape{7, 8});
    const auto got = z.to_vector<double>();
    for (std::size_t i = 0; i < ys.size(); ++i)
      for (std::size_t j = 0; j < xs.size(); ++j) {
        INFO("atan2(" << ys[i] << ", " << xs[j] << ")");
        double want = std::atan2(ys[i], xs[j]);
        if (t == dtype::float32) want = static_cast<float>(want);
        const double g_ij = got[i * xs.size() + j];
        if (want == 0) CHECK((g_ij == 0 && std::signbit(g_ij) == std::signbit(want)));
        else CHECK(g_ij == Approx(want).epsilon(t == dtype::float32 ? 1e-6 : 1e-15));
      }
  }
}

TEST_CASE("FloorDiv and FloorMod are Python's // and % for integers and floats, zero divisors refused") {
  graph g;
  const std::vector<std::int32_t> xi{7, -7, 7, -7, 0, INT32_MIN, INT32_MIN, 5, INT32_MAX, -1};
  const std::vector<std::int32_t> yi{2, 2, -2, -2, 3, -1, 2, 1, -3, 5};
  auto& x = c<std::int32_t>(g, {10}, xi);
  auto& y = c<std::int32_t>(g, {10}, yi);
  const auto q = eval(g, g.op("FloorDiv", {x, y})).to_vector<std::int32_t>();
  const auto r = eval(g, g.op("FloorMod", {x, y})).to_vector<std::int32_t>();
  for (std::size_t i = 0; i < xi.size(); ++i) {
    INFO(xi[i] << " // " << yi[i]);
    // In 64 bits by a floor of the exact quotient, wrapped to 32 as Div wraps INT_MIN / -1.
    const auto want_q = static_cast<std::int64_t>(std::floor(static_cast<long double>(xi[i]) / yi[i]));
    const std::int64_t want_r = static_cast<std::int64_t>(xi[i]) - want_q * yi[i];
    CHECK(q[i] == static_cast<std::int32_t>(static_cast<std::uint32_t>(want_q)));
    CHECK(r[i] == want_r);
  }
  CHECK(eval(g, g.op("FloorDiv", {c<std::uint8_t>(g, {2}, {7, 200}), c<std::uint8_t>(g, {2}, {2, 7})})).to_vector<std::uint8_t>() ==
        std::vector<std::uint8_t>{3, 28});
  CHECK(eval(g, g.op("FloorMod", {c<std::int8_t>(g, {2}, {-128, 100}), c<std::int8_t>(g, {2}, {7, -7})})).to_vector<std::int8_t>() ==
        std::vector<std::int8_t>{5, -5});  // -128 = -19 * 7 + 5, 100 = -15 * -7 - 5
  for (const char* op : {"FloorDiv", "FloorMod"})
    test::require_error([&] { eval(g, g.op(op, {c<std::int64_t>(g, {2}, {1, 2}), c<std::int64_t>(g, {2}, {1, 0})})); },
                        {op, "integer division by zero"});
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> xf{7.5, -7.5, 7.5, -7.5, 0.0, 1.0, -3.0, 5.25, 1.0, 2.0};
  const std::vector<double> yf{2.0, 2.0, -2.0, -2.0, 3.0, 0.0, 1.5, -0.5, inf, -inf};
  auto& xd = c<double>(g, {10}, xf);
  auto& yd = c<double>(g, {10}, yf);
  const auto qf = eval(g, g.op("FloorDiv", {xd, yd})).to_vector<double>();
  const auto rf = eval(g, g.op("FloorMod", {xd, yd})).to_vector<double>();
  // TensorFlow's floor(x / y): 2 // -inf is floor(-0) (Python's -1); the remainders are Python's.
  const std::vector<double> want_qf{3, -4, -4, 3, 0, inf, -2, -11, 0, 0};
  const std::vector<double> want_rf{1.5, 0.5, -0.5, -1.5, 0, nan, 0, -0.25, 1, -inf};
  for (std::size_t i = 0; i < xf.size(); ++i) {
    INFO(xf[i] << " // " << yf[i]);
    CHECK(qf[i] == want_qf[i]);
    if (std::isnan(want_rf[i])) CHECK(std::isnan(rf[i]));
    else CHECK(rf[i] == want_rf[i]);
  }
  // Broadcast: a [2, 3] by a scalar.
  CHECK(eval(g, g.op("FloorMod", {c<float>(g, {2, 3}, {-3, -2, -1, 1, 2, 3}), g.constant(tensor::scalar(2.0f))})).to_vector<float>() ==
        std::vector<float>{1, 0, 1, 1, 0, 1});
}

TEST_CASE("Sign of integers and SquaredDifference broadcast as TensorFlow's, empty and rank 0 included") {
  graph g;
  auto& ints = c<std::int32_t>(g, {5}, {-7, 0, 3, INT32_MIN, INT32_MAX});
  CHECK(eval(g, g.op("Sign", {ints})).to_vector<std::int32_t>() == std::vector<std::int32_t>{-1, 0, 1, -1, 1});
  auto& bytes = c<std::int8_t>(g, {3}, {-128, 0, 127});
  CHECK(eval(g, g.op("Sign", {bytes})).to_vector<std::int8_t>() == std::vector<std::int8_t>{-1, 0, 1});
  auto& a = c<float>(g, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto& col = c<float>(g, {2, 1}, {0.5f, -1});
  auto d = eval(g, g.op("SquaredDifference", {a, col}));
  CHECK(d.shape() == shape{2, 3});
  CHECK(d.to_vector<float>() == std::vector<float>{0.25f, 2.25f, 6.25f, 25, 36, 49});
  auto& s = g.constant(tensor::scalar(2.0f));
  CHECK(eval(g, g.op("SquaredDifference", {s, a})).to_vector<float>() == std::vector<float>{1, 0, 1, 4, 9, 16});
  CHECK(eval(g, g.op("SquaredDifference", {s, s})).shape() == shape{});
  auto empty = eval(g, g.op("SquaredDifference", {c<float>(g, {0, 3}, {}), c<float>(g, {3}, {1, 2, 3})}));
  CHECK(empty.shape() == shape{0, 3});
  CHECK(eval(g, g.op("Floor", {c<float>(g, {0}, {})})).shape() == shape{0});
  CHECK(eval(g, g.op("Round", {g.constant(tensor::scalar(-1.5))})).to_vector<double>() == std::vector<double>{-2});
  test::require_error([&] { g.op("Sin", {ints}); }, {"Sin", "int32"});
  test::require_error([&] { eval(g, g.op("SquaredDifference", {a, c<float>(g, {2}, {1, 2})})); }, {"SquaredDifference", "[2,3]"});
}

// Eigen's fast packet sqrt (x * rsqrt(x)) made sqrt(inf) NaN and flushed subnormals; 16
// values fill every packet width, the edge values sit among ordinary ones.
TEST_CASE("Sqrt and Rsqrt give IEEE's answers at infinity, zero and subnormals, in every float dtype") {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> x{4, inf, 9, 0, 1e-40, 16, 2, 3, 5, 6, 7, 8, 10, 11, 12, inf};
  for (dtype t : {dtype::float32, dtype::float64, dtype::float16, dtype::bfloat16}) {
    INFO(t);
    graph g;
    auto& v = g.op("Cast", {c<double>(g, {16}, x)}, {{"DstT", t}});
    auto to_double = [&](const node& n) -> const node& { return g.op("Cast", {n}, {{"DstT", dtype::float64}}); };
    const auto input = eval(g, to_double(v)).to_vector<double>();  // as the dtype holds them (1e-40: 0 in float16)
    const auto root = eval(g, to_double(g.op("Sqrt", {v}))).to_vector<double>();
    const auto reciprocal = eval(g, to_double(g.op("Rsqrt", {v}))).to_vector<double>();
    const double tol = t == dtype::float16 ? 2e-3 : t == dtype::bfloat16 ? 1e-2 : t == dtype::float32 ? 1e-6 : 1e-12;
    for (std::size_t i = 0; i < x.size(); ++i) {
      INFO(input[i]);
      const double want = std::sqrt(input[i]), want_r = 1 / want;
      if (std::isinf(want)) CHECK(root[i] == want);
      else CHECK(root[i] == Approx(want).epsilon(tol));
      if (std::isinf(want_r)) CHECK(reciprocal[i] == want_r);
      else CHECK(reciprocal[i] == Approx(want_r).epsilon(tol));
    }
  }
}
TEST_CASE("comparisons, logical ops and Select") {
  graph g;
  auto& a = c<int>(g, {3}, {1, 2, 3});
  auto& two = g.constant(tensor::scalar(2));
  auto b = [&](const char* op) { return eval(g, g.op(op, {a, two})).to_vector<bool>(); };
  CHECK(b("Greater") == std::vector<bool>{false, false, true});
  CHECK(b("GreaterEqual") == std::vector<bool>{false, true, true});
  CHECK(b("Less") == std::vector<bool>{true, false, false});
  CHECK(b("LessEqual") == std::vector<bool>{true, true, false});
  CHECK(b("Equal") == std::vector<bool>{false, true, false});
  CHECK(b("NotEqual") == std::vector<bool>{true, false, true});
  auto& p = c<bool>(g, {2}, {true, false});
  auto& q = c<bool>(g, {2, 1}, {true, false});
  CHECK(eval(g, g.op("LogicalAnd", {p, q})).to_vector<bool>() == std::vector<bool>{true, false, false, false});
  CHECK(eval(g, g.op("LogicalOr", {p, q})).to_vector<bool>() == std::vector<bool>{true, true, true, false});
  CHECK(eval(g, g.op("LogicalNot", {p})).to_vector<bool>() == std::vector<bool>{false, true});
  auto sel = eval(g, g.op("SelectV2", {q, c<float>(g, {2}, {1, 2}), g.constant(tensor::scalar(0.0f))}));
  CHECK(sel.shape() == shape{2, 2});
  CHECK(sel.to_vector<float>() == std::vector<float>{1, 2, 0, 0});
  // Operands of the output's shape or single values take one flat pass: a scalar on either
  // side, a [1, 1] condition, and a scalar condition with two tensors.
  auto& r = c<bool>(g, {2, 2}, {true, false, false, true});
  auto& v = c<float>(g, {2, 2}, {1, 2, 3, 4});
  CHECK(eval(g, g.op("SelectV2", {r, v, g.constant(tensor::scalar(-1.0f))})).to_vector<float>() == std::vector<float>{1, -1, -1, 4});
  CHECK(eval(g, g.op("SelectV2", {r, g.constant(tensor::scalar(-1.0f)), v})).to_vector<float>() == std::vector<float>{-1, 2, 3, -1});
  CHECK(eval(g, g.op("SelectV2", {c<bool>(g, {1, 1}, {false}), v, c<float>(g, {2, 2}, {5, 6, 7, 8})})).to_vector<float>() ==
        std::vector<float>{5, 6, 7, 8});
  CHECK(eval(g, g.op("SelectV2", {g.constant(tensor::scalar(true)), v, c<float>(g, {2, 2}, {5, 6, 7, 8})})).to_vector<float>() ==
        std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("ReluGrad passes the gradient where the features are positive, 0 elsewhere (0 at 0)") {
  graph g;
  auto& d = c<float>(g, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto& f = c<float>(g, {2, 3}, {-1, 0, 0.5f, 2, -0.25f, 7});
  // By hand: kept where f > 0.
  CHECK(eval(g, g.op("ReluGrad", {d, f})).to_vector<float>() == std::vector<float>{0, 0, 3, 4, 0, 6});
  CHECK(eval(g, g.op("ReluGrad", {c<std::int32_t>(g, {3}, {5, -6, 7}), c<std::int32_t>(g, {3}, {1, 1, -1})}))
            .to_vector<std::int32_t>() == std::vector<std::int32_t>{5, -6, 0});
  CHECK(eval(g, g.op("ReluGrad", {g.constant(tensor::scalar(2.5)), g.constant(tensor::scalar(1.0))})).to_vector<double>() == std::vector<double>{2.5});
  auto& empty = g.constant(tensor(dtype::float32, shape{0, 4}));
  CHECK(eval(g, g.op("ReluGrad", {empty, empty})).shape() == shape{0, 4});
  // No broadcasting, unlike SelectV2: shapes must match, in the graph and in the kernel.
  test::require_error([&] { g.op("ReluGrad", {d, c<float>(g, {3}, {1, 1, 1})}); }, {"node 'ReluGrad", "same shape", "[2,3]"});
  auto& pf = g.placeholder(dtype::float32, partial_shape::unknown_rank(), "pf");
  auto back = g.op("ReluGrad", {d, pf}).out(0);
  session s(g, test::one_thread());
  test::require_error([&] { s.run({{pf, tensor::of<float>({3, 2}, {1, 1, 1, 1, 1, 1})}}, {back}); },
                      {"ReluGrad", "same shape", "[2,3]", "[3,2]"});
}

TEMPLATE_TEST_CASE("ReluGrad in float16 and bfloat16 (on their bits): zeros, denormals, infinities and NaNs", "", half,
                   bfloat16) {
  using T = TestType;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // The smallest positive denormal of each type, from its bits.
  const T tiny = std::bit_cast<T>(std::uint16_t{1}), neg_tiny = std::bit_cast<T>(std::uint16_t{0x8001});
  const std::vector<T> f = {T(-1.0f), T(0.0f), T(-0.0f), tiny, neg_tiny, T(inf), T(-inf), T(nan), T(-nan), T(0.5f), T(65504.0f)};
  std::vector<T> d;
  for (std::size_t i = 0; i < f.size(); ++i) d.push_back(T(static_cast<float>(i + 1)));
  graph g;
  const auto n = static_cast<std::int64_t>(f.size());
  auto& r = g.op("ReluGrad", {g.constant(tensor::from_vector(d, {n})), g.constant(tensor::from_vector(f, {n}))});
  // By hand: kept where f > 0 (the positive denormal, +infinity, 0.5 and 65504), else +0.
  const std::vector<float> expected = {0, 0, 0, 4, 0, 6, 0, 0, 0, 10, 11};
  const tensor out = eval(g, r);
  for (std::size_t i = 0; i < f.size(); ++i) {
    INFO("element " << i);
    CHECK(static_cast<float>(out.data<T>()[i]) == expected[i]);
    CHECK(!std::signbit(static_cast<float>(out.data<T>()[i])));
  }
}

TEST_CASE("Select is TensorFlow's first form, a vector condition picking whole rows, and SelectV2 broadcasts") {
  graph g;
  auto& t = c<float>(g, {3, 2}, {1, 2, 3, 4, 5, 6});
  auto& e = c<float>(g, {3, 2}, {-1, -2, -3, -4, -5, -6});
  auto& rows = c<bool>(g, {3}, {true, false, true});
  // Row r of the result is row r of t where rows[r] holds, else of e (by hand).
  CHECK(eval(g, g.op("Select", {rows, t, e})).to_vector<float>() == std::vector<float>{1, 2, -3, -4, 5, 6});
  // An elementwise condition, and a scalar one.
  auto& each = c<bool>(g, {3, 2}, {true, false, false, true, true, false});
  CHECK(eval(g, g.op("Select", {each, t, e})).to_vector<float>() == std::vector<float>{1, -2, -3, 4, 5, -6});
  CHECK(eval(g, g.op("Select", {g.constant(tensor::scalar(false)), t, e})).to_vector<float>() ==
        std::vector<float>{-1, -2, -3, -4, -5, -6});
  // A vector condition of a rank-1 t is elementwise, and empty rows are fine.
  CHECK(eval(g, g.op("Select", {c<bool>(g, {2}, {false, true}), c<float>(g, {2}, {1, 2}), c<float>(g, {2}, {3, 4})}))
            .to_vector<float>() == std::vector<float>{3, 2});
  auto& none = c<bool>(g, {0}, {});
  auto& empty = g.constant(tensor(dtype::float32, shape{0, 4}));
  CHECK(eval(g, g.op("Select", {none, empty, empty})).shape() == shape{0, 4});
  // SelectV2 broadcasts the same vector along the last axis instead: [3] against [3, 2] fails.
  test::require_error([&] { g.op("SelectV2", {rows, t, e}); }, {"not broadcastable"});
  // Select does not broadcast t and e, nor a condition of another shape.
  test::require_error([&] { g.op("Select", {rows, t, c<float>(g, {2}, {0, 0})}); }, {"node 'Select", "same shape", "SelectV2"});
  test::require_error([&] { g.op("Select", {c<bool>(g, {2}, {true, true}), t, e}); }, {"condition", "first dim"});
  // The same checks at run time, for shapes known only then.
  auto& pc = g.placeholder(dtype::boolean, partial_shape::unknown_rank(), "pc");
  auto sel = g.op("Select", {pc, t, e}).out(0);
  session s(g, test::one_thread());
  test::require_error([&] { s.run({{pc, tensor::from_vector(std::vector<bool>{true, false}, shape{2})}}, {sel}); },
                      {"(Select)", "condition of shape [2]", "first dim"});
  CHECK(s.run({{pc, tensor::from_vector(std::vector<bool>{false, false, true}, shape{3})}}, {sel})[0].to_vector<float>() ==
        std::vector<float>{-1, -2, -3, -4, 5, 6});
}

TEST_CASE("Cast converts between dtypes, saturating float to int") {
  graph g;
  auto& f = c<float>(g, {4}, {1.7f, -2.5f, 1e10f, std::nanf("")});
  CHECK(eval(g, g.op("Cast", {f}, {{"DstT", dtype::int32}})).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{1, -2, INT32_MAX, 0});
  CHECK(eval(g, g.op("Cast", {f}, {{"DstT", dtype::boolean}})).to_vector<bool>() == std::vector<bool>{true, true, true, true});
  auto h = eval(g, g.op("Cast", {c<float>(g, {2}, {0.5f, 2.0f})}, {{"DstT", dtype::float16}}));
  CHECK(static_cast<float>(h.data<half>()[0]) == 0.5f);
  CHECK(static_cast<float>(h.data<half>()[1]) == 2.0f);
}

TEST_CASE("array ops move data as specified") {
  graph g;
  auto& a = c<float>(g, {2, 3}, {0, 1, 2, 3, 4, 5});
  CHECK(eval(g, g.op("Reshape", {a, i32s(g, {3, -1})})).shape() == shape{3, 2});
  test::require_error([&] { eval(g, g.op("Reshape", {a, g.op("Identity", {i32s(g, {4, -1})})})); }, {"cannot reshape"});
  CHECK(eval(g, g.op("Transpose", {a, i32s(g, {1, 0})})).to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  auto cat = eval(g, g.op("ConcatV2", {a, a, g.constant(tensor::scalar(1))}));
  CHECK(cat.shape() == shape{2, 6});
  CHECK(cat.to_vector<float>() == std::vector<float>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
  auto& split = g.op("Split", {g.constant(tensor::scalar(1)), c<float>(g, {2, 4}, {0, 1, 2, 3, 4, 5, 6, 7})},
                     {{"num_split", 2}});
  session s(g, test::one_thread());
  auto parts = s.run({}, {split.out(0), split.out(1)});
  CHECK(parts[0].to_vector<float>() == std::vector<float>{0, 1, 4, 5});
  CHECK(parts[1].to_vector<float>() == std::vector<float>{2, 3, 6, 7});
  CHECK(eval(g, g.op("Slice", {a, i32s(g, {0, 1}), i32s(g, {2, -1})})).to_vector<float>() ==
        std::vector<float>{1, 2, 4, 5});
  test::require_error([&] { eval(g, g.op("Slice", {a, i32s(g, {1, 1}), i32s(g, {2, 1})})); }, {"out of range"});
  auto pad = eval(g, g.op("Pad", {c<float>(g, {1, 2}, {1, 2}), c<std::int32_t>(g, {2, 2}, {1, 0, 0, 1})}));
  CHECK(pad.shape() == shape{2, 3});
  CHECK(pad.to_vector<float>() == std::vector<float>{0, 0, 0, 1, 2, 0});
  CHECK(eval(g, g.op("Tile", {c<float>(g, {2}, {1, 2}), i32s(g, {3})})).to_vector<float>() ==
        std::vector<float>{1, 2, 1, 2, 1, 2});
  auto gat = eval(g, g.op("GatherV2", {a, i32s(g, {1, 0, 1}), g.constant(tensor::scalar(0))}));
  CHECK(gat.shape() == shape{3, 3});
  CHECK(gat.to_vector<float>() == std::vector<float>{3, 4, 5, 0, 1, 2, 3, 4, 5});
  CHECK(eval(g, g.op("GatherV2", {a, i32s(g, {2}), g.constant(tensor::scalar(1))})).to_vector<float>() ==
        std::vector<float>{2, 5});
  test::require_error([&] { eval(g, g.op("GatherV2", {a, i32s(g, {2}), g.constant(tensor::scalar(0))})); },
                      {"(GatherV2)", "indices[0] = 2 is not in [0, 2)"});
  auto oh = eval(g, g.op("OneHot", {i32s(g, {0, 2, 5}), g.constant(tensor::scalar(3)), g.constant(tensor::scalar(1.0f)),
                                   g.constant(tensor::scalar(0.0f))}));
  CHECK(oh.to_vector<float>() == std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0, 0});
  CHECK(eval(g, g.op("Shape", {a})).to_vector<std::int32_t>() == std::vector<std::int32_t>{2, 3});
  CHECK(eval(g, g.op("Rank", {a})).scalar_value<std::int32_t>() == 2);
  CHECK(eval(g, g.op("Size", {a}, {{"out_type", dtype::int64}})).scalar_value<std::int64_t>() == 6);
  CHECK(eval(g, g.op("Fill", {i32s(g, {2, 2}), g.constant(tensor::scalar(7.0))})).to_vector<double>() ==
        std::vector<double>(4, 7.0));
  test::require_error([&] { eval(g, g.op("Fill", {g.op("Identity", {i32s(g, {2, -2})}), g.constant(tensor::scalar(7.0))})); },
                      {"(Fill)", "negative dimension -2"});
  CHECK(eval(g, g.op("ZerosLike", {a})).to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(eval(g, g.op("OnesLike", {a})).to_vector<float>() == std::vector<float>(6, 1.0f));
}

TEST_CASE("reductions over any axes match a naive loop") {
  // x[i][j][k] = i*100 + j*10 + k, dims 2x3x4
  std::vector<double> x;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) x.push_back(i * 100 + j * 10 + k);
  graph g;
  auto& t = c<double>(g, {2, 3, 4}, x);
  auto sum_over = [&](std::vector<int> axes) {
    std::vector<double> acc;  // naive: accumulate into the kept coordinates
    std::map<std::vector<int>, double> m;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) {
          std::vector<int> key{i, j, k};
          for (int a : axes) key[static_cast<std::size_t>(a)] = 0;
          m[key] += i * 100 + j * 10 + k;
        }
    for (auto& [k, v] : m) acc.push_back(v);
    return acc;
  };
  for (auto axes : std::vector<std::vector<int>>{{0}, {1}, {2}, {0, 2}, {0, 1}, {1, 2}, {0, 1, 2}}) {
    INFO("axes " << axes.size() << " first " << axes[0]);
    auto got = eval(g, g.op("Sum", {t, i32s(g, axes)})).to_vector<double>();
    CHECK(got == sum_over(axes));
  }
  auto keep = eval(g, g.op("Mean", {t, i32s(g, {-1})}, {{"keep_dims", true}}));
  CHECK(keep.shape() == shape{2, 3, 1});
  CHECK(keep.to_vector<double>()[4] == 111.5);  // (110+111+112+113)/4
  CHECK(eval(g, g.op("Max", {t, i32s(g, {0, 1})})).to_vector<double>() == std::vector<double>{120, 121, 122, 123});
  CHECK(eval(g, g.op("Min", {t, i32s(g, {2})})).to_vector<double>()[5] == 120);
  CHECK(eval(g, g.op("Prod", {c<double>(g, {3}, {2, 3, 4}), i32s(g, {0})})).scalar_value<double>() == 24);
  CHECK(eval(g, g.op("Sum", {t, i32s(g, {})})).to_vector<double>() == x);
  CHECK(eval(g, g.op("Sum", {c<double>(g, {0, 2}, {}), i32s(g, {0})})).to_vector<double>() == std::vector<double>{0, 0});
  CHECK(eval(g, g.op("ArgMax", {c<float>(g, {2, 3}, {1, 9, 9, 7, 2, 8}), g.constant(tensor::scalar(1))})).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{1, 2});
  CHECK(eval(g, g.op("ArgMin", {c<float>(g, {2, 3}, {1, 9, 9, 7, 2, 8}), g.constant(tensor::scalar(0))})).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{0, 1, 1});
}

TEST_CASE("Cumsum, Cumprod and UnsortedSegmentSum match naive loops") {
  // x[i][j][k] = i*100 + j*10 + k + 1, dims 2x3x4; scans along each axis, every flag.
  std::vector<double> x;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) x.push_back(i * 100 + j * 10 + k + 1);
  const int dims[3] = {2, 3, 4};
  graph g;
  auto& t = c<double>(g, {2, 3, 4}, x);
  for (const char* op : {"Cumsum", "Cumprod"})
    for (int axis = -1; axis < 3; ++axis)
      for (bool exclusive : {false, true})
        for (bool reverse : {false, true}) {
          INFO(op << " axis " << axis << " exclusive " << exclusive << " reverse " << reverse);
          const bool sum = std::string(op) == "Cumsum";
          const int a = axis < 0 ? axis + 3 : axis;
          std::vector<double> want(x.size());
          for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 3; ++j)
              for (int k = 0; k < 4; ++k) {
                const int at[3] = {i, j, k};
                double acc = sum ? 0 : 1;
                for (int m = 0; m < dims[a]; ++m) {  // every element of the line before (after) this one
                  const bool counted = reverse ? (exclusive ? m > at[a] : m >= at[a]) : (exclusive ? m < at[a] : m <= at[a]);
                  if (!counted) continue;
                  int p[3] = {i, j, k};
                  p[a] = m;
                  const double v = x[static_cast<std::size_t>((p[0] * 3 + p[1]) * 4 + p[2])];
                  acc = sum ? acc + v : acc * v;
                }
                want[static_cast<std::size_t>((i * 3 + j) * 4 + k)] = acc;
              }
          auto got = eval(g, g.op(op, {t, g.constant(tensor::scalar(axis))}, {{"exclusive", exclusive}, {"reverse", reverse}}));
          CHECK(got.shape() == shape{2, 3, 4});
          CHECK(got.to_vector<double>() == want);
        }
  // Integers wrap like the type; half types compute in float; empty lines and tensors.
  CHECK(eval(g, g.op("Cumprod", {c<std::int8_t>(g, {3}, {16, 16, 3}), g.constant(tensor::scalar(0))})).to_vector<std::int8_t>() ==
        std::vector<std::int8_t>{16, 0, 0});
  auto halves = eval(g, g.op("Cumsum", {c<half>(g, {3}, {half(0.5f), half(1.5f), half(2.0f)}), g.constant(tensor::scalar(0))}))
                    .to_vector<half>();
  CHECK(std::vector<float>(halves.begin(), halves.end()) == std::vector<float>{0.5f, 2.0f, 4.0f});
  CHECK(eval(g, g.op("Cumsum", {c<float>(g, {2, 0}, {}), g.constant(tensor::scalar(1))})).shape() == shape{2, 0});
  test::require_error([&] { eval(g, g.op("Cumsum", {t, g.constant(tensor::scalar(3))})); }, {"axis 3", "rank 3"});

  // UnsortedSegmentSum: rows added into their segments, empty segments 0, 2-D ids.
  auto& data = c<float>(g, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto seg = eval(g, g.op("UnsortedSegmentSum", {data, i32s(g, {2, 0, 2, 3}), g.constant(tensor::scalar(5))}));
  CHECK(seg.shape() == shape{5, 2});
  CHECK(seg.to_vector<float>() == std::vector<float>{3, 4, 0, 0, 6, 8, 7, 8, 0, 0});
  auto ids2 = g.constant(tensor::from_vector(std::vector<std::int64_t>{1, 1, 0, 1, 0, 0, 1, 1}, shape{4, 2}));
  auto whole = eval(g, g.op("UnsortedSegmentSum", {data, ids2, g.constant(tensor::scalar(std::int64_t{2}))}));
  CHECK(whole.shape() == shape{2});
  CHECK(whole.to_vector<float>() == std::vector<float>{3 + 5 + 6, 1 + 2 + 4 + 7 + 8});
  auto none = eval(g, g.op("UnsortedSegmentSum", {c<float>(g, {0, 3}, {}), i32s(g, {}), g.constant(tensor::scalar(2))}));
  CHECK(none.shape() == shape{2, 3});
  CHECK(none.to_vector<float>() == std::vector<float>(6, 0.0f));
  test::require_error([&] { eval(g, g.op("UnsortedSegmentSum", {data, i32s(g, {0, 5, 1, 1}), g.constant(tensor::scalar(5))})); },
                      {"segment_ids[1] = 5", "[0, 5)"});
  test::require_error([&] { g.op("UnsortedSegmentSum", {data, i32s(g, {0, 1, 2}), g.constant(tensor::scalar(5))}); },
                      {"UnsortedSegmentSum", "not a prefix", "[4,2]"});
}

namespace {
// The flat offset of the slice index tuple `t` names in row-major dims, and the slice's size.
std::pair<std::int64_t, std::int64_t> naive_slice(const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& t) {
  std::int64_t offset = 0, size = 1;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    offset = offset * dims[d] + (d < t.size() ? t[d] : 0);
    if (d >= t.size()) size *= dims[d];
  }
  return {offset, size};
}
}  // namespace

TEST_CASE("GatherNd, ScatterNd, TensorScatterUpdate and TensorScatterAdd match naive loops") {
  graph g;
  const std::vector<std::int64_t> dims{3, 4, 2};
  std::vector<float> pv(24);
  for (std::size_t i = 0; i < pv.size(); ++i) pv[i] = static_cast<float>(i) * 0.5f - 3.0f;
  auto& params = c<float>(g, shape(dims), pv);
  // Index tuples of depth 0 to 3, in batches of shape [2] and [2, 2]; (1, 3) twice.
  const std::vector<std::vector<std::vector<std::int64_t>>> tuple_sets{
      {{}, {}}, {{2}, {0}}, {{1, 3}, {0, 0}, {1, 3}, {2, 1}}, {{2, 3, 1}, {0, 1, 0}}};
  for (const auto& tuples : tuple_sets) {
    const auto depth = static_cast<std::int64_t>(tuples[0].size());
    const auto count = static_cast<std::int64_t>(tuples.size());
    INFO("depth " << depth << ", " << count << " tuples");
    std::vector<std::int64_t> flat;
    for (const auto& t : tuples) flat.insert(flat.end(), t.begin(), t.end());
    const shape ishape = count == 4 ? shape{2, 2, depth} : shape{count, depth};
    auto& indices = g.constant(tensor::from_vector(flat, ishape));
    // GatherNd: the slices one after the other.
    std::vector<float> want;
    std::int64_t slice = 0;
    for (const auto& t : tuples) {
      auto [offset, size] = naive_slice(dims, t);
      slice = size;
      for (std::int64_t k = 0; k < size; ++k) want.push_back(pv[static_cast<std::size_t>(offset + k)]);
    }
    auto gathered = eval(g, g.op("GatherNd", {params, indices}));
    std::vector<std::int64_t> sdims(ishape.dims().begin(), ishape.dims().end() - 1);
    sdims.insert(sdims.end(), dims.begin() + depth, dims.end());
    CHECK(gathered.shape() == shape(sdims));
    CHECK(gathered.to_vector<float>() == want);
    CHECK(g.op("GatherNd", {params, indices}).output_shape(0) == partial_shape(sdims));
    // The scatters: updates 1, 2, 3, ...; ScatterNd and TensorScatterAdd add a slice named
    // twice, TensorScatterUpdate writes the last update (one thread, in order).
    std::vector<float> uv(want.size());
    for (std::size_t i = 0; i < uv.size(); ++i) uv[i] = static_cast<float>(i + 1);
    auto& updates = c<float>(g, shape(sdims), uv);
    std::vector<float> added(24, 0.0f), into = pv, replaced = pv;
    for (std::size_t j = 0; j < tuples.size(); ++j) {
      auto [offset, size] = naive_slice(dims, tuples[j]);
      for (std::int64_t k = 0; k < size; ++k) {
        const float u = uv[j * static_cast<std::size_t>(slice) + static_cast<std::size_t>(k)];
        added[static_cast<std::size_t>(offset + k)] += u;
        into[static_cast<std::size_t>(offset + k)] += u;
        replaced[static_cast<std::size_t>(offset + k)] = u;
      }
    }
    auto& dims_in = g.constant(tensor::from_vector(dims));
    CHECK(eval(g, g.op("ScatterNd", {indices, updates, dims_in})).to_vector<float>() == added);
    CHECK(eval(g, g.op("TensorScatterAdd", {params, indices, updates})).to_vector<float>() == into);
    CHECK(eval(g, g.op("TensorScatterUpdate", {params, indices, updates})).to_vector<float>() == replaced);
  }

  // int8 adds as TensorFlow's, wrapping; float16 through float; int32 indices.
  auto& i32 = i32s(g, {1, 0, 1});
  auto idx = g.op("Reshape", {i32, i32s(g, {3, 1})});
  auto bytes = eval(g, g.op("TensorScatterAdd", {c<std::int8_t>(g, {2}, {120, -5}), idx, c<std::int8_t>(g, {3}, {10, 20, -2})}));
  CHECK(bytes.to_vector<std::int8_t>() == std::vector<std::int8_t>{-116, 3});  // 120 + 20 wraps, -5 + 10 - 2
  auto halves = eval(g, g.op("ScatterNd", {idx, c<half>(g, {3}, {half(1.5f), half(2.0f), half(0.25f)}), i32s(g, {2})}));
  CHECK(halves.to_vector<half>() == std::vector<half>{half(2.0f), half(1.75f)});

  // Empty: no index tuples leave the tensor as it is; an empty tensor takes no tuple.
  auto& none = g.constant(tensor::from_vector(std::vector<std::int64_t>{}, shape{0, 2}));
  CHECK(eval(g, g.op("TensorScatterUpdate", {params, none, c<float>(g, {0, 2}, {})})).to_vector<float>() == pv);
  CHECK(eval(g, g.op("GatherNd", {params, none})).shape() == shape{0, 2});

  // Errors name the tuple, the shapes, the op.
  auto& bad = g.constant(tensor::from_vector(std::vector<std::int64_t>{0, 1, 3, 0}, shape{2, 2}));
  test::require_error([&] { eval(g, g.op("GatherNd", {params, bad})); },
                      {"(GatherNd)", "index tuple 1 of indices, [3,0], is not in shape [3,4,2]"});
  test::require_error([&] { g.op("GatherNd", {params, g.constant(tensor::from_vector(std::vector<std::int64_t>{0, 0, 0, 0}, shape{1, 4}))}); },
                      {"GatherNd", "give 4 coordinates into shape [3,4,2] of rank 3"});
  test::require_error([&] { g.op("TensorScatterUpdate", {params, bad, c<float>(g, {2, 3}, std::vector<float>(6))}); },
                      {"TensorScatterUpdate", "updates of shape [2,3] do not fit indices of shape [2,2] into shape [3,4,2]",
                       "must have shape [2,2]"});
  test::require_error([&] { g.op("ScatterNd", {bad, c<float>(g, {2}, {1, 2}), i32s(g, {3, 4})}); },
                      {"ScatterNd", "Tindices"});  // shape's dtype must be the indices'
}

TEST_CASE("TensorScatterUpdate writes into a tensor no one else holds, and copies a shared one") {
  // A 4 MB tensor filled, then a row written: in place, the step's peak is one tensor.
  graph g;
  const std::int64_t rows = 1000, cols = 1000;
  auto& zeros = g.op("Fill", {g.constant(tensor::from_vector(std::vector<std::int64_t>{rows, cols})), g.constant(tensor::scalar(0.0f))});
  auto& at = g.constant(tensor::from_vector(std::vector<std::int64_t>{7}, shape{1, 1}));
  auto& row = g.op("Fill", {g.constant(tensor::from_vector(std::vector<std::int64_t>{1, cols})), g.constant(tensor::scalar(2.0f))});
  auto& written = g.op("TensorScatterUpdate", {zeros, at, row});
  auto& total = g.op("Sum", {written, g.constant(tensor::from_vector(std::vector<std::int32_t>{0, 1}))});
  auto& a = cpu_allocator::global();
  {
    session s(g, test::one_thread());
    (void)s.run({}, {total.out(0)});  // warm: kernels made, buffers cached
    a.reset_peak();
    const std::size_t before = a.bytes_in_use();
    auto got = s.run({}, {total.out(0)});
    CHECK(got[0].scalar_value<float>() == 2.0f * cols);
    CHECK(a.peak_bytes_in_use() - before < static_cast<std::size_t>(rows * cols * 4) * 3 / 2);
  }
  // Fetched as well, the filled tensor is shared: it keeps its zeros.
  session s(g, test::one_thread());
  auto both = s.run({}, {zeros.out(0), written.out(0)});
  CHECK(both[0].to_vector<float>() == std::vector<float>(static_cast<std::size_t>(rows * cols), 0.0f));
  CHECK(both[1].flat<float>()[7 * cols + 3] == 2.0f);
  CHECK(both[1].flat<float>()[6 * cols + 3] == 0.0f);
}

TEST_CASE("UnsortedSegmentSum splits rows of 20 columns between two threads") {
  // 3000 rows of 20 int32 values into 7 segments: threads take runs of 16 columns.
  const std::int64_t rows = 3000, inner = 20, segments = 7;
  std::vector<std::int32_t> values(static_cast<std::size_t>(rows * inner)), ids(static_cast<std::size_t>(rows));
  std::vector<std::int32_t> want(static_cast<std::size_t>(segments * inner), 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    ids[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(r * 5 % segments);
    for (std::int64_t i = 0; i < inner; ++i) {
      const auto v = static_cast<std::int32_t>((r * 31 + i * 7) % 19 - 9);
      values[static_cast<std::size_t>(r * inner + i)] = v;
      want[static_cast<std::size_t>(ids[static_cast<std::size_t>(r)] * inner + i)] += v;
    }
  }
  graph g;
  auto sum = g.op("UnsortedSegmentSum", {g.constant(tensor::from_vector(values, shape{rows, inner})),
                                         g.constant(tensor::from_vector(ids, shape{rows})),
                                         g.constant(tensor::scalar(std::int32_t{segments}))});
  session_options o;
  o.intra_op_threads = 2;
  session s(g, o);
  auto got = s.run({}, {sum.out(0)})[0];
  CHECK(got.shape() == shape{segments, inner});
  CHECK(got.to_vector<std::int32_t>() == want);
}

namespace {
// op(x) for a row-major (r, cdim) matrix x: its transpose, conjugated too when `conj`.
template <class T>
std::vector<T> transpose_of(const std::vector<T>& x, int r, int cdim, bool conj) {
  std::vector<T> t(x.size());
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < cdim; ++j) {
      T v = x[static_cast<std::size_t>(i * cdim + j)];
      if constexpr (!std::is_arithmetic_v<T>) v = conj ? std::conj(v) : v;
      t[static_cast<std::size_t>(j * r + i)] = v;
    }
  return t;
}

// out(m,n) = a(m,k) * b(k,n), all row-major: a naive triple loop.
template <class T>
std::vector<T> naive_matmul(const std::vector<T>& a, const std::vector<T>& b, int m, int k, int n) {
  std::vector<T> out(static_cast<std::size_t>(m * n), T(0));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p)
        out[static_cast<std::size_t>(i * n + j)] += a[static_cast<std::size_t>(i * k + p)] * b[static_cast<std::size_t>(p * n + j)];
  return out;
}
}  // namespace

TEST_CASE("MatMul and BatchMatMulV2 match a naive triple loop") {
  int m = 37, k = 19, n = 23;
  std::vector<double> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(static_cast<double>(i));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::cos(static_cast<double>(i));
  auto expect = naive_matmul(a, b, m, k, n);
  graph g;
  auto& A = c<double>(g, {m, k}, a);
  auto& B = c<double>(g, {k, n}, b);
  auto& At = c<double>(g, {k, m}, transpose_of(a, m, k, false));
  auto& Bt = c<double>(g, {n, k}, transpose_of(b, k, n, false));
  for (auto [x, y, ta, tb] : {std::tuple{&A, &B, false, false}, {&At, &B, true, false}, {&A, &Bt, false, true}, {&At, &Bt, true, true}}) {
    auto got = eval(g, g.op("MatMul", {*x, *y}, {{"transpose_a", ta}, {"transpose_b", tb}})).to_vector<double>();
    REQUIRE(got.size() == expect.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expect[i]).margin(1e-12));
  }
  // batch broadcasting: (2,m,k) x (k,n)
  std::vector<double> a2(a);
  for (auto v : a) a2.push_back(2 * v);
  auto bm = eval(g, g.op("BatchMatMulV2", {c<double>(g, {2, m, k}, a2), B}));
  CHECK(bm.shape() == shape{2, m, n});
  CHECK(bm.to_vector<double>()[static_cast<std::size_t>(m * n + 5)] == Approx(2 * expect[5]));
  auto empty = eval(g, g.op("MatMul", {c<double>(g, {2, 0}, {}), c<double>(g, {0, 3}, {})}));
  CHECK(empty.to_vector<double>() == std::vector<double>(6, 0.0));
}

namespace {
// Every transpose (and, for complex, adjoint) case of MatMul or BatchMatMulV2 at (m,k,n),
// against a naive triple loop on the untransposed operands.
template <class T>
void check_matmul_cases(const char* op, int m, int k, int n, const session_options& options) {
  constexpr bool complex = !std::is_arithmetic_v<T>;
  std::vector<T> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
  for (std::size_t i = 0; i < a.size(); ++i) {
    if constexpr (complex) a[i] = T(std::sin(double(i)), std::cos(3.0 * double(i)));
    else if constexpr (std::is_integral_v<T>) a[i] = T(int(i % 7) - 3);
    else a[i] = T(std::sin(double(i)));
  }
  for (std::size_t i = 0; i < b.size(); ++i) {
    if constexpr (complex) b[i] = T(std::cos(double(i)), std::sin(0.5 * double(i)));
    else if constexpr (std::is_integral_v<T>) b[i] = T(int(i % 5) - 2);
    else b[i] = T(std::cos(double(i)));
  }
  auto expect = naive_matmul(a, b, m, k, n);
  bool batch = std::string_view(op) == "BatchMatMulV2";
  const char* attr_a = batch ? "adj_x" : "transpose_a";
  const char* attr_b = batch ? "adj_y" : "transpose_b";
  graph g;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO(op << " " << dtype_of<T> << " m=" << m << " k=" << k << " n=" << n << " ta=" << ta << " tb=" << tb);
      // Stored so that op(x) (conjugate transpose for BatchMatMulV2) gives back a and b.
      auto sa = ta ? transpose_of(a, m, k, batch) : a;
      auto sb = tb ? transpose_of(b, k, n, batch) : b;
      auto& x = g.constant(tensor::from_vector(sa, ta ? shape{k, m} : shape{m, k}));
      auto& y = g.constant(tensor::from_vector(sb, tb ? shape{n, k} : shape{k, n}));
      auto& product = g.op(op, {x, y}, {{attr_a, ta}, {attr_b, tb}});
      session s(g, options);
      auto out = s.run({}, {product})[0];
      REQUIRE(out.shape() == (shape{m, n}));
      auto got = out.template to_vector<T>();
      for (std::size_t i = 0; i < got.size(); ++i) {
        if constexpr (std::is_integral_v<T>) {
          CHECK(got[i] == expect[i]);
        } else {
          CHECK(std::abs(got[i] - expect[i]) <= 1e-9 * (1 + std::abs(expect[i])));
        }
      }
    }
}
}  // namespace

TEST_CASE("MatMul covers matrix, vector and sharded shapes, every transpose and adjoint") {
  session_options two;
  two.inter_op_threads = 1;
  two.intra_op_threads = 2;
  for (auto [m, k, n] : {std::tuple{37, 19, 23}, {1, 19, 23}, {37, 19, 1}, {1, 19, 1}, {1, 1, 1}, {5, 1, 3}}) {
    check_matmul_cases<double>("MatMul", m, k, n, test::one_thread());
    check_matmul_cases<std::int32_t>("MatMul", m, k, n, test::one_thread());
    check_matmul_cases<complex128>("MatMul", m, k, n, test::one_thread());
    check_matmul_cases<complex128>("BatchMatMulV2", m, k, n, test::one_thread());
  }
  // Large enough to split the output rows across two intra-op threads.
  check_matmul_cases<double>("MatMul", 160, 120, 110, two);
  check_matmul_cases<double>("MatMul", 4000, 300, 1, two);
  check_matmul_cases<complex128>("BatchMatMulV2", 130, 90, 100, two);
  // Wider than tall: the output columns are split instead.
  check_matmul_cases<double>("MatMul", 20, 150, 700, two);
  check_matmul_cases<std::int32_t>("MatMul", 20, 150, 701, two);
  check_matmul_cases<complex128>("BatchMatMulV2", 12, 100, 900, two);
}

TEST_CASE("MatrixInverse and MatrixDeterminant") {
  graph g;
  auto& a = c<double>(g, {2, 2}, {4, 7, 2, 6});
  auto inv = eval(g, g.op("MatrixInverse", {a})).to_vector<double>();
  std::vector<double> expect{0.6, -0.7, -0.2, 0.4};  // 1/10 * [6 -7; -2 4]
  for (int i = 0; i < 4; ++i) CHECK(inv[static_cast<std::size_t>(i)] == Approx(expect[static_cast<std::size_t>(i)]));
  CHECK(eval(g, g.op("MatrixDeterminant", {a})).scalar_value<double>() == Approx(10.0));
  test::require_error([&] { eval(g, g.op("MatrixInverse", {c<double>(g, {2, 2}, {1, 2, 2, 4})})); }, {"not invertible"});
  // TensorFlow's test, which the GPU's kernel shares: a zero or NaN pivot of the LU factors
  // with partial pivoting. In a batch the error names the matrix; its determinant is 0. A
  // nearly singular matrix is inverted ([[1, 2], [2, 4 + 2^-20]]: 2^20 * [[4 + 2^-20, -2], [-2, 1]]).
  auto& batch = c<double>(g, {2, 2, 2}, {4, 7, 2, 6, 1, 2, 2, 4});
  test::require_error([&] { eval(g, g.op("MatrixInverse", {batch})); }, {"MatrixInverse", "not invertible", "matrix 1"});
  CHECK(eval(g, g.op("MatrixDeterminant", {batch})).to_vector<double>() == std::vector<double>{10.0, 0.0});
  const double nan = std::numeric_limits<double>::quiet_NaN(), tiny = std::ldexp(1.0, -20);
  test::require_error([&] { eval(g, g.op("MatrixInverse", {c<double>(g, {2, 2}, {1, nan, 2, 4})})); }, {"not invertible"});
  const auto near = eval(g, g.op("MatrixInverse", {c<double>(g, {2, 2}, {1, 2, 2, 4 + tiny})})).to_vector<double>();
  const std::vector<double> near_want{(4 + tiny) / tiny, -2 / tiny, -2 / tiny, 1 / tiny};
  for (std::size_t i = 0; i < near.size(); ++i) CHECK(near[i] == Approx(near_want[i]));
}

TEST_CASE("random ops are seeded, reproducible and have the right moments") {
  graph g;
  auto& shape_t = i32s(g, {20000});
  auto& u = g.op("RandomUniform", {shape_t}, {{"dtype", dtype::float64}, {"seed", 7}});
  auto& n = g.op("RandomStandardNormal", {shape_t}, {{"dtype", dtype::float64}, {"seed", 7}});
  auto& t = g.op("TruncatedNormal", {shape_t}, {{"dtype", dtype::float32}, {"seed", 7}});
  session s1(g, test::one_thread()), s2(g, test::one_thread());
  auto r1 = s1.run({}, {u, n, t});
  auto r2 = s2.run({}, {u, n, t});
  CHECK(r1[0].to_vector<double>() == r2[0].to_vector<double>());
  CHECK(s1.run({}, {u})[0].to_vector<double>() != r1[0].to_vector<double>());  // the stream advances
  auto mean = [](const std::vector<double>& v) { double m = 0; for (double x : v) m += x; return m / static_cast<double>(v.size()); };
  auto uv = r1[0].to_vector<double>();
  CHECK(mean(uv) == Approx(0.5).margin(0.01));
  for (double x : uv) REQUIRE((x >= 0 && x < 1));
  auto nv = r1[1].to_vector<double>();
  CHECK(mean(nv) == Approx(0).margin(0.03));
  double var = 0;
  for (double x : nv) var += x * x;
  CHECK(var / static_cast<double>(nv.size()) == Approx(1).margin(0.05));
  for (float x : r1[2].to_vector<float>()) REQUIRE(std::abs(x) < 2.0f);
}
