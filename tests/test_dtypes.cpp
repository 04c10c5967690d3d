// Every dtype an op admits has a CPU kernel, and the kernels that compute through another
// type give the values of an independent reference: float16/bfloat16 against the standard
// library in double, within one rounding of the result type; the integers other than
// int32/int64 against arithmetic modulo 2^bits, plus values worked out by hand.
#include "support/helpers.hpp"

#include <weft/kernels/cpu/convert.hpp>

#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <functional>
#include <limits>

using namespace weft;
using test::eval;

namespace {
template <class T>
tensor make(const std::vector<double>& v, shape s) {
  std::vector<T> t;
  for (double d : v) t.push_back(static_cast<T>(d));
  return tensor::from_vector(t, std::move(s));
}

template <class T>
std::vector<double> as_double(const tensor& t) {
  std::vector<double> v;
  for (T x : t.flat<T>()) v.push_back(static_cast<double>(x));
  return v;
}

// Two intra-op threads, so that large inputs are split into shards.
tensor eval2(const graph& g, output fetch) {
  session_options o = test::one_thread();
  o.intra_op_threads = 2;
  session s(g, o);
  return s.run({}, {fetch}).at(0);
}

// `got` is `exact` rounded to T: within one unit in the last place of T.
template <class T>
bool within_rounding(double got, double exact) {
  if (std::isnan(exact)) return std::isnan(got);
  if (std::isinf(exact)) return got == exact;
  // From digits: Eigen 3.4's numeric_limits<half>::epsilon() is 2^-13 instead of 2^-10.
  double eps = std::ldexp(1.0, 1 - std::numeric_limits<T>::digits);
  double tiny = static_cast<double>(std::numeric_limits<T>::denorm_min());  // one unit among subnormals
  return std::abs(got - exact) <= eps * std::abs(exact) + tiny;
}
}  // namespace

TEST_CASE("every op has a CPU kernel for every dtype its definition admits") {
  const auto& defs = op_registry::global();
  const auto& kernels = kernel_registry::global();
  std::vector<std::string_view> names{"Const", "Placeholder", "Identity", "NoOp"};
  for (const auto& op : ops::standard_ops())
    if (!ops::is_control_flow_op(op.name)) names.push_back(op.name);  // the executor runs these itself
  int pairs = 0;
  for (auto name : names) {
    INFO("op " << name);
    const op_def* def = defs.find(name);
    REQUIRE(def != nullptr);
    const attr_def* t = nullptr;
    for (const auto& a : def->attrs)
      if (a.kind == attr_kind::type && a.name == "T") t = &a;
    if (!t && def->find_attr("Tidx") && !def->find_attr("T")) t = def->find_attr("Tidx");  // Range: its only type attr
    if (!t) {
      // Kernels of ops without a T attr (Cast, GatherV2, the random ops) serve every dtype.
      CHECK(kernels.has(name, "CPU", {}));
      continue;
    }
    std::vector<dtype> types = t->admitted();
    for (dtype d : types) {
      INFO("T=" << d);
      CHECK(kernels.has(name, "CPU", {t->name, d}));
      ++pairs;
    }
  }
  CHECK(pairs > 400);
}

TEMPLATE_TEST_CASE("float16 and bfloat16 unary math is the double result rounded once", "", half, bfloat16) {
  using T = TestType;
  const int n = 1300;  // more than two of the kernel's 512-element float chunks, in two shards
  std::vector<double> mixed, positive;
  for (int i = 0; i < n; ++i) {
    mixed.push_back(static_cast<double>(static_cast<T>(-4.0 + 8.0 * i / (n - 1))));
    positive.push_back(static_cast<double>(static_cast<T>(0.05 + 6.0 * i / (n - 1))));
  }
  graph g;
  auto& xm = g.constant(make<T>(mixed, {n}));
  auto& xp = g.constant(make<T>(positive, {n}));
  auto check = [&](const char* op, const node& x, const std::vector<double>& in, double (*f)(double)) {
    INFO(op << " on " << dtype_of<T>);
    auto got = eval2(g, g.op(op, {x}));
    REQUIRE(got.dtype() == dtype_of<T>);
    auto v = as_double<T>(got);
    int bad = 0;
    for (int i = 0; i < n; ++i)
      if (!within_rounding<T>(v[static_cast<std::size_t>(i)], f(in[static_cast<std::size_t>(i)]))) ++bad;
    CHECK(bad == 0);
  };
  check("Neg", xm, mixed, [](double v) { return -v; });
  check("Abs", xm, mixed, [](double v) { return std::abs(v); });
  check("Square", xm, mixed, [](double v) { return v * v; });
  check("Relu", xm, mixed, [](double v) { return v < 0 ? 0.0 : v; });
  check("Exp", xm, mixed, [](double v) { return std::exp(v); });
  check("Tanh", xm, mixed, [](double v) { return std::tanh(v); });
  check("Sigmoid", xm, mixed, [](double v) { return 1 / (1 + std::exp(-v)); });
  check("Sqrt", xp, positive, [](double v) { return std::sqrt(v); });
  check("Rsqrt", xp, positive, [](double v) { return 1 / std::sqrt(v); });
  check("Log", xp, positive, [](double v) { return std::log(v); });
  check("Sin", xm, mixed, [](double v) { return std::sin(v); });
  check("Cos", xm, mixed, [](double v) { return std::cos(v); });
  check("Tan", xm, mixed, [](double v) { return std::tan(v); });
  check("Asin", xm, mixed, [](double v) { return std::asin(v); });  // NaN outside [-1, 1]
  check("Acos", xm, mixed, [](double v) { return std::acos(v); });
  check("Atan", xm, mixed, [](double v) { return std::atan(v); });
  check("Sinh", xm, mixed, [](double v) { return std::sinh(v); });
  check("Cosh", xm, mixed, [](double v) { return std::cosh(v); });
  check("Asinh", xm, mixed, [](double v) { return std::asinh(v); });
  check("Acosh", xp, positive, [](double v) { return std::acosh(v); });
  check("Atanh", xm, mixed, [](double v) { return std::atanh(v); });
  check("Reciprocal", xp, positive, [](double v) { return 1 / v; });
  check("Log1p", xp, positive, [](double v) { return std::log1p(v); });
  check("Expm1", xm, mixed, [](double v) { return std::expm1(v); });
  check("Softplus", xm, mixed, [](double v) { return std::log1p(std::exp(v)); });
  check("Erf", xm, mixed, [](double v) { return std::erf(v); });
  check("Floor", xm, mixed, [](double v) { return std::floor(v); });
  check("Ceil", xm, mixed, [](double v) { return std::ceil(v); });
  check("Round", xm, mixed, [](double v) { return std::nearbyint(v); });  // the halves among them go to even
  check("Sign", xm, mixed, [](double v) { return static_cast<double>((v > 0) - (v < 0)); });
  check("Elu", xm, mixed, [](double v) { return v > 0 ? v : std::expm1(v); });
  check("Selu", xm, mixed, [](double v) { return v > 0 ? 1.0507009873554805 * v : 1.7580993408473766 * std::expm1(v); });
  check("Relu6", xm, mixed, [](double v) { return std::max(v, 0.0); });       // -4 to 4
  check("Relu6", xp, positive, [](double v) { return std::min(v, 6.0); });  // 0.05 to 6.05
}

TEMPLATE_TEST_CASE("float16 and bfloat16 binary ops and comparisons, in every broadcast form", "", half, bfloat16) {
  using T = TestType;
  const int rows = 26, cols = 50;  // 1300 elements
  std::vector<double> x, y, col, row;
  for (int i = 0; i < rows * cols; ++i) {
    x.push_back(static_cast<double>(static_cast<T>(0.1 + 0.003 * i)));
    y.push_back(static_cast<double>(static_cast<T>(3.9 - 0.0025 * i)));
  }
  for (int i = 0; i < rows; ++i) col.push_back(static_cast<double>(static_cast<T>(0.5 + 0.25 * i)));
  for (int j = 0; j < cols; ++j) row.push_back(static_cast<double>(static_cast<T>(0.2 + 0.05 * j)));
  const double s = static_cast<double>(static_cast<T>(1.75));
  graph g;
  auto& tx = g.constant(make<T>(x, {rows, cols}));
  auto& ty = g.constant(make<T>(y, {rows, cols}));
  auto& tc = g.constant(make<T>(col, {rows, 1}));
  auto& tr = g.constant(make<T>(row, {cols}));
  auto& ts = g.constant(make<T>({s}, {}));
  struct form {
    const char* name;
    const node *a, *b;
    std::function<double(int)> va, vb;
  };
  std::vector<form> forms{
      {"same shape", &tx, &ty, [&](int i) { return x[static_cast<std::size_t>(i)]; },
       [&](int i) { return y[static_cast<std::size_t>(i)]; }},
      {"scalar right", &tx, &ts, [&](int i) { return x[static_cast<std::size_t>(i)]; }, [&](int) { return s; }},
      {"scalar left", &ts, &ty, [&](int) { return s; }, [&](int i) { return y[static_cast<std::size_t>(i)]; }},
      {"column by row", &tc, &tr, [&](int i) { return col[static_cast<std::size_t>(i / cols)]; },
       [&](int i) { return row[static_cast<std::size_t>(i % cols)]; }},
  };
  using fn = double (*)(double, double);
  std::vector<std::pair<const char*, fn>> arith{
      {"Add", [](double a, double b) { return a + b; }},     {"Sub", [](double a, double b) { return a - b; }},
      {"Mul", [](double a, double b) { return a * b; }},     {"Div", [](double a, double b) { return a / b; }},
      {"Pow", [](double a, double b) { return std::pow(a, b); }},
      {"Maximum", [](double a, double b) { return a < b ? b : a; }},
      {"Minimum", [](double a, double b) { return b < a ? b : a; }}};
  using cmp = bool (*)(double, double);
  std::vector<std::pair<const char*, cmp>> compare{
      {"Greater", [](double a, double b) { return a > b; }},    {"GreaterEqual", [](double a, double b) { return a >= b; }},
      {"Less", [](double a, double b) { return a < b; }},       {"LessEqual", [](double a, double b) { return a <= b; }},
      {"Equal", [](double a, double b) { return a == b; }},     {"NotEqual", [](double a, double b) { return a != b; }}};
  for (const auto& f : forms) {
    for (const auto& [op, ref] : arith) {
      INFO(op << ", " << f.name << ", " << dtype_of<T>);
      auto got = eval2(g, g.op(op, {*f.a, *f.b}));
      REQUIRE(got.shape() == shape{rows, cols});
      auto v = as_double<T>(got);
      int bad = 0;
      for (int i = 0; i < rows * cols; ++i)
        if (!within_rounding<T>(v[static_cast<std::size_t>(i)], ref(f.va(i), f.vb(i)))) ++bad;
      CHECK(bad == 0);
    }
    for (const auto& [op, ref] : compare) {
      INFO(op << ", " << f.name << ", " << dtype_of<T>);
      auto v = eval2(g, g.op(op, {*f.a, *f.b})).template to_vector<bool>();
      int bad = 0;
      for (int i = 0; i < rows * cols; ++i) bad += v[static_cast<std::size_t>(i)] != ref(f.va(i), f.vb(i));
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("float16 and bfloat16 reductions accumulate in float") {
  graph g;
  // Summed in float16, 3000 ones would stop at 2048 (2049 is not a float16); in float they give 3000.
  auto& ones_h = g.constant(make<half>(std::vector<double>(3000, 1.0), {3000}));
  auto& axis0 = g.constant(tensor::scalar(0));
  CHECK(as_double<half>(eval(g, g.op("Sum", {ones_h, axis0}))) == std::vector<double>{3000});
  CHECK(as_double<half>(eval(g, g.op("Mean", {ones_h, axis0}))) == std::vector<double>{1});
  // bfloat16 keeps 8 significant bits: summed in bfloat16, 1000 ones would stop at 256.
  auto& ones_b = g.constant(make<bfloat16>(std::vector<double>(1000, 1.0), {1000}));
  CHECK(as_double<bfloat16>(eval(g, g.op("Sum", {ones_b, axis0}))) == std::vector<double>{1000});
  auto& m = g.constant(make<half>({1, -2, 3.5, 0.25, 8, -0.5}, {2, 3}));
  auto& axis1 = g.constant(tensor::scalar(1));
  CHECK(as_double<half>(eval(g, g.op("Max", {m, axis1}))) == std::vector<double>{3.5, 8});
  CHECK(as_double<half>(eval(g, g.op("Min", {m, axis0}))) == std::vector<double>{0.25, -2, -0.5});
  CHECK(as_double<half>(eval(g, g.op("Prod", {m, axis1}))) == std::vector<double>{-7, -1});
  CHECK(eval(g, g.op("ArgMax", {m, axis1})).to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 1});
  CHECK(eval(g, g.op("ArgMin", {m, axis0})).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 1});
}

TEST_CASE("reductions of nothing: -inf and +inf for Max and Min, NaN for a float Mean, 0 for an integer Mean") {
  graph g;
  auto& empty_f = g.constant(tensor::from_vector(std::vector<float>{}, {0, 2}));
  auto& empty_i = g.constant(tensor::from_vector(std::vector<std::int32_t>{}, {0, 2}));
  auto& empty_h = g.constant(make<half>({}, {0, 2}));
  auto& axis0 = g.constant(tensor::scalar(0));
  float inf = std::numeric_limits<float>::infinity();
  CHECK(eval(g, g.op("Max", {empty_f, axis0})).to_vector<float>() == std::vector<float>{-inf, -inf});
  CHECK(eval(g, g.op("Min", {empty_f, axis0})).to_vector<float>() == std::vector<float>{inf, inf});
  CHECK(as_double<half>(eval(g, g.op("Max", {empty_h, axis0}))) == std::vector<double>{-INFINITY, -INFINITY});
  for (float v : eval(g, g.op("Mean", {empty_f, axis0})).to_vector<float>()) CHECK(std::isnan(v));
  CHECK(eval(g, g.op("Mean", {empty_i, axis0})).to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 0});
  CHECK(eval(g, g.op("Max", {empty_i, axis0})).to_vector<std::int32_t>() == std::vector<std::int32_t>{INT32_MIN, INT32_MIN});
  CHECK(eval(g, g.op("Prod", {empty_i, axis0})).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 1});
}

namespace {
// a op b for integers of type T, computed modulo 2^64 and reduced to T's width.
template <class T>
T wrap(std::uint64_t v) {
  return static_cast<T>(v);
}
template <class T>
std::vector<T> int_values() {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_signed_v<T>)
    return {L::min(), L::max(), T(0), T(1), T(2), T(7), T(L::max() / 3), T(L::max() - 1),
            T(-1),    T(-2),    T(-7), T(L::min() + 1), T(L::min() / 3)};
  else
    return {L::min(), L::max(), T(0), T(1), T(2), T(7), T(L::max() / 3), T(L::max() - 1)};
}
}  // namespace

TEMPLATE_TEST_CASE("integer ops wrap on overflow for every integer width, in every broadcast form", "",
                   std::int8_t, std::int16_t, std::uint8_t, std::uint16_t, std::uint32_t, std::uint64_t) {
  using T = TestType;
  using U = std::uint64_t;
  auto vals = int_values<T>();
  const auto k = static_cast<std::int64_t>(vals.size());
  // Every pair (a, b): as two flat vectors (the same-shape path) and as a column and a row (strided).
  std::vector<T> left, right, nonzero;
  for (T a : vals)
    for (T b : vals) left.push_back(a), right.push_back(b);
  graph g;
  auto& tl = g.constant(tensor::from_vector(left, {k * k}));
  auto& tr = g.constant(tensor::from_vector(right, {k * k}));
  auto& tcol = g.constant(tensor::from_vector(vals, {k, 1}));
  auto& trow = g.constant(tensor::from_vector(vals, {k}));
  auto each_pair = [&](const char* op, auto ref) {
    using R = decltype(ref(T(0), T(0)));
    for (int form = 0; form < 2; ++form) {
      INFO(op << " on " << dtype_of<T> << (form ? " as column by row" : " as flat vectors"));
      auto& n = form ? g.op(op, {tcol, trow}) : g.op(op, {tl, tr});
      auto got = eval(g, n);
      REQUIRE(got.num_elements() == k * k);
      auto v = got.template to_vector<R>();
      int bad = 0;
      for (std::size_t i = 0; i < left.size(); ++i) bad += v[i] != ref(left[i], right[i]);
      CHECK(bad == 0);
    }
  };
  each_pair("Add", [](T a, T b) { return wrap<T>(U(a) + U(b)); });
  each_pair("Sub", [](T a, T b) { return wrap<T>(U(a) - U(b)); });
  each_pair("Mul", [](T a, T b) { return wrap<T>(U(a) * U(b)); });
  each_pair("Maximum", [](T a, T b) { return a < b ? b : a; });
  each_pair("Minimum", [](T a, T b) { return b < a ? b : a; });
  each_pair("Greater", [](T a, T b) { return a > b; });
  each_pair("GreaterEqual", [](T a, T b) { return a >= b; });
  each_pair("Less", [](T a, T b) { return a < b; });
  each_pair("LessEqual", [](T a, T b) { return a <= b; });
  each_pair("Equal", [](T a, T b) { return a == b; });
  each_pair("NotEqual", [](T a, T b) { return a != b; });
  // Division: every pair with a nonzero divisor; the result truncates toward zero, and
  // min / -1 (one past max) wraps to min.
  std::vector<T> num, den;
  for (T a : vals)
    for (T b : vals)
      if (b != 0) num.push_back(a), den.push_back(b);
  auto div = eval(g, g.op("Div", {g.constant(tensor::from_vector(num)), g.constant(tensor::from_vector(den))})).template to_vector<T>();
  int bad = 0;
  for (std::size_t i = 0; i < num.size(); ++i) {
    T want;
    if constexpr (std::is_signed_v<T>)
      want = den[i] == -1 ? wrap<T>(U(0) - U(num[i])) : T(static_cast<std::int64_t>(num[i]) / den[i]);
    else
      want = T(U(num[i]) / U(den[i]));
    bad += div[i] != want;
  }
  CHECK(bad == 0);
  test::require_error([&] { eval(g, g.op("Div", {tl, tr})); }, {"(Div)", "integer division by zero"});
  // Unary ops, against a naive loop.
  auto unary = [&](const char* op, auto ref) {
    INFO(op << " on " << dtype_of<T>);
    auto v = eval(g, g.op(op, {trow})).template to_vector<T>();
    for (std::size_t i = 0; i < vals.size(); ++i) CHECK(v[i] == ref(vals[i]));
  };
  unary("Square", [](T a) { return wrap<T>(U(a) * U(a)); });
  unary("Relu", [](T a) { return a > T(0) ? a : T(0); });
  if constexpr (std::is_signed_v<T>) {
    unary("Neg", [](T a) { return wrap<T>(U(0) - U(a)); });
    unary("Abs", [](T a) { return a < 0 ? wrap<T>(U(0) - U(a)) : a; });
  }
}

TEMPLATE_TEST_CASE("int32 and int64 arithmetic wraps on overflow in every code path", "", std::int32_t, std::int64_t) {
  using T = TestType;
  using U = std::make_unsigned_t<T>;
  using L = std::numeric_limits<T>;
  // 37 elements: whole vector packets and a scalar tail.
  std::vector<T> a, b;
  for (int i = 0; i < 37; ++i) {
    a.push_back(i % 3 == 0 ? L::max() - T(i) : i % 3 == 1 ? L::min() + T(i) : T(i * 1000003));
    b.push_back(i % 2 ? L::max() : L::min() + T(i));
  }
  graph g;
  auto& ta = g.constant(tensor::from_vector(a));
  auto& tb = g.constant(tensor::from_vector(b));
  auto& col = g.constant(tensor::from_vector(a, {37, 1}));
  auto& row = g.constant(tensor::from_vector(std::vector<T>{L::max(), L::min(), T(-1)}, {3}));
  auto& s = g.constant(tensor::scalar(L::max()));
  auto check2 = [&](const char* op, const node& x, const node& y, auto ref) {
    INFO(op << " on " << dtype_of<T>);
    auto got = eval(g, g.op(op, {x, y})).template to_vector<T>();
    auto xs = eval(g, x).template to_vector<T>(), ys = eval(g, y).template to_vector<T>();
    auto n = got.size();
    int bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
      T p = xs.size() == n ? xs[i] : xs.size() == 1 ? xs[0] : xs[i / ys.size()];
      T q = ys.size() == n ? ys[i] : ys.size() == 1 ? ys[0] : ys[i % ys.size()];
      bad += got[i] != ref(p, q);
    }
    CHECK(bad == 0);
  };
  auto add = [](T p, T q) { return wrap<T>(U(p) + U(q)); };
  auto sub = [](T p, T q) { return wrap<T>(U(p) - U(q)); };
  auto mul = [](T p, T q) { return wrap<T>(U(p) * U(q)); };
  for (auto [op, ref] : {std::pair<const char*, std::function<T(T, T)>>{"Add", add}, {"Sub", sub}, {"Mul", mul}}) {
    check2(op, ta, tb, ref);   // same shape
    check2(op, ta, s, ref);    // scalar right
    check2(op, s, tb, ref);    // scalar left
    check2(op, col, row, ref);  // strided broadcast
  }
  auto neg = eval(g, g.op("Neg", {ta})).template to_vector<T>();
  auto abs = eval(g, g.op("Abs", {ta})).template to_vector<T>();
  auto sq = eval(g, g.op("Square", {ta})).template to_vector<T>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(neg[i] == wrap<T>(U(0) - U(a[i])));
    CHECK(abs[i] == (a[i] < 0 ? wrap<T>(U(0) - U(a[i])) : a[i]));
    CHECK(sq[i] == wrap<T>(U(a[i]) * U(a[i])));
  }
  CHECK(eval(g, g.op("Neg", {g.constant(tensor::scalar(L::min()))})).template scalar_value<T>() == L::min());
}

TEST_CASE("narrow and unsigned integers: values worked out by hand") {
  graph g;
  auto i8 = [&](std::vector<std::int8_t> v) -> const node& { return g.constant(tensor::from_vector(v)); };
  auto u8 = [&](std::vector<std::uint8_t> v) -> const node& { return g.constant(tensor::from_vector(v)); };
  CHECK(eval(g, g.op("Add", {i8({100, -100}), i8({100, -100})})).to_vector<std::int8_t>() == std::vector<std::int8_t>{-56, 56});
  CHECK(eval(g, g.op("Sub", {u8({3}), u8({5})})).to_vector<std::uint8_t>() == std::vector<std::uint8_t>{254});
  CHECK(eval(g, g.op("Div", {i8({-128, -7}), i8({-1, 2})})).to_vector<std::int8_t>() == std::vector<std::int8_t>{-128, -3});
  CHECK(eval(g, g.op("Abs", {i8({-128, -5})})).to_vector<std::int8_t>() == std::vector<std::int8_t>{-128, 5});
  auto& u16 = g.constant(tensor::from_vector(std::vector<std::uint16_t>{65535}));
  CHECK(eval(g, g.op("Mul", {u16, u16})).to_vector<std::uint16_t>() == std::vector<std::uint16_t>{1});  // (2^16-1)^2 = 1 mod 2^16
  auto& u64 = g.constant(tensor::from_vector(std::vector<std::uint64_t>{UINT64_MAX}));
  CHECK(eval(g, g.op("Add", {u64, g.constant(tensor::scalar(std::uint64_t{1}))})).to_vector<std::uint64_t>() ==
        std::vector<std::uint64_t>{0});
  CHECK(eval(g, g.op("Greater", {u64, g.constant(tensor::scalar(std::uint64_t{1}))})).to_vector<bool>() ==
        std::vector<bool>{true});  // compared unsigned, not as -1
  // Reductions: Sum and Prod wrap like the type; Mean is exact, rounded toward zero.
  auto& axis0 = g.constant(tensor::scalar(0));
  auto& hundreds = i8({100, 100, 100});
  CHECK(eval(g, g.op("Sum", {hundreds, axis0})).scalar_value<std::int8_t>() == 44);  // 300 - 256
  CHECK(eval(g, g.op("Mean", {hundreds, axis0})).scalar_value<std::int8_t>() == 100);
  CHECK(eval(g, g.op("Mean", {i8({-7, 0}), axis0})).scalar_value<std::int8_t>() == -3);
  CHECK(eval(g, g.op("Prod", {u8({16, 16, 2}), axis0})).scalar_value<std::uint8_t>() == 0);
  CHECK(eval(g, g.op("Max", {u8({3, 250, 7}), axis0})).scalar_value<std::uint8_t>() == 250);
  CHECK(eval(g, g.op("ArgMin", {i8({3, -120, 7}), axis0})).scalar_value<std::int64_t>() == 1);
  auto& i32 = g.constant(tensor::from_vector(std::vector<std::int32_t>{INT32_MAX, 1}));
  CHECK(eval(g, g.op("Sum", {i32, axis0})).scalar_value<std::int32_t>() == INT32_MIN);
  // Pow of int32 and int64 wraps too: 3^41 overflows int64.
  std::uint64_t p = 1;
  for (int i = 0; i < 41; ++i) p *= 3;
  CHECK(eval(g, g.op("Pow", {g.constant(tensor::scalar(std::int64_t{3})), g.constant(tensor::scalar(std::int64_t{41}))}))
            .scalar_value<std::int64_t>() == static_cast<std::int64_t>(p));
  CHECK(eval(g, g.op("Pow", {g.constant(tensor::scalar(2)), g.constant(tensor::scalar(31))})).scalar_value<std::int32_t>() ==
        INT32_MIN);
  // Data movement and fills cover them as well.
  CHECK(eval(g, g.op("OnesLike", {u64})).to_vector<std::uint64_t>() == std::vector<std::uint64_t>{1});
  CHECK(eval(g, g.op("Select", {g.constant(tensor::from_vector(std::vector<bool>{true, false})), i8({1, 2}), i8({-1, -2})}))
            .to_vector<std::int8_t>() == std::vector<std::int8_t>{1, -2});
}

TEST_CASE("AssignAdd and AssignSub cover float16 and wrap integers") {
  graph g;
  auto& h = g.variable(dtype::float16, {2}, "h");
  auto& b = g.variable(dtype::int8, {1}, "b");
  auto& w = g.variable(dtype::int32, {}, "w");
  auto& init = g.op("NoOp", {}, {},
                    node_options("init").after({g.op("Assign", {h, g.constant(make<half>({1.5, 2}, {2}))}).id(),
                                                g.op("Assign", {b, g.constant(make<std::int8_t>({100}, {1}))}).id(),
                                                g.op("Assign", {w, g.constant(tensor::scalar(INT32_MAX))}).id()}));
  auto& bump = g.op("NoOp", {}, {},
                    node_options("bump").after({g.op("AssignAdd", {h, g.constant(make<half>({0.25, -3}, {2}))}).id(),
                                                g.op("AssignAdd", {b, g.constant(make<std::int8_t>({100}, {1}))}).id(),
                                                g.op("AssignAdd", {w, g.constant(tensor::scalar(1))}).id()}));
  auto& drop = g.op("AssignSub", {w, g.constant(tensor::scalar(2))});
  auto& read_h = g.op("Identity", {h});
  auto& read_b = g.op("Identity", {b});
  auto& read_w = g.op("Identity", {w});
  session s(g, test::one_thread());
  s.run({init});
  s.run({bump});
  auto out = s.run({}, {read_h, read_b, read_w});
  CHECK(as_double<half>(out[0]) == std::vector<double>{1.75, -1});
  CHECK(out[1].to_vector<std::int8_t>() == std::vector<std::int8_t>{-56});
  CHECK(out[2].scalar_value<std::int32_t>() == INT32_MIN);
  s.run({drop});
  CHECK(s.run({}, {read_w}).at(0).scalar_value<std::int32_t>() == INT32_MAX - 1);
}

TEST_CASE("Cast converts between every pair of dtypes") {
  // 0, 1, 2 and 100 are exact in every dtype; through bool they become 0, 1, 1, 1.
  graph g;
  auto& x = g.constant(tensor::from_vector(std::vector<double>{0, 1, 2, 100}));
  int pairs = 0;
  for (int i = 1; i < plain_dtype_count; ++i)
    for (int j = 1; j < plain_dtype_count; ++j) {
      auto from = static_cast<dtype>(i), to = static_cast<dtype>(j);
      INFO(from << " to " << to);
      auto& a = g.op("Cast", {x}, {{"DstT", from}});
      auto& b = g.op("Cast", {a}, {{"DstT", to}});
      auto& back = g.op("Cast", {b}, {{"DstT", dtype::float64}});
      auto got = eval(g, back).to_vector<double>();
      bool through_bool = from == dtype::boolean || to == dtype::boolean;
      CHECK(got == (through_bool ? std::vector<double>{0, 1, 1, 1} : std::vector<double>{0, 1, 2, 100}));
      ++pairs;
    }
  CHECK(pairs == 225);
}

TEST_CASE("complex Tanh, Sigmoid, Pow, Sum and Equal match std::complex") {
  using C = std::complex<double>;
  std::vector<C> z{{0.5, -1}, {-0.25, 0.75}, {1.5, 0.125}};
  std::vector<complex64> zf;
  for (auto v : z) zf.emplace_back(static_cast<float>(v.real()), static_cast<float>(v.imag()));
  graph g;
  auto& t = g.constant(tensor::from_vector(z));
  auto& tf = g.constant(tensor::from_vector(zf));
  auto close = [](const std::vector<C>& got, std::vector<C> want, double tol) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= tol * std::abs(want[i]));
  };
  std::vector<C> th, sg, pw;
  for (auto v : z) th.push_back(std::tanh(v)), sg.push_back(1.0 / (1.0 + std::exp(-v))), pw.push_back(std::pow(v, v));
  close(eval(g, g.op("Tanh", {t})).to_vector<C>(), th, 1e-14);
  close(eval(g, g.op("Sigmoid", {t})).to_vector<C>(), sg, 1e-14);
  close(eval(g, g.op("Pow", {t, t})).to_vector<C>(), pw, 1e-13);
  std::vector<C> thf;
  for (auto v : eval(g, g.op("Tanh", {tf})).to_vector<complex64>()) thf.emplace_back(v.real(), v.imag());
  close(thf, th, 1e-6);
  auto& axis0 = g.constant(tensor::scalar(0));
  CHECK(eval(g, g.op("Sum", {t, axis0})).scalar_value<C>() == C(1.75, -0.125));
  CHECK(eval(g, g.op("Prod", {g.constant(tensor::from_vector(std::vector<C>{{0, 1}, {0, 1}})), axis0})).scalar_value<C>() ==
        C(-1, 0));
  close({eval(g, g.op("Mean", {t, axis0})).scalar_value<C>()}, {C(1.75 / 3, -0.125 / 3)}, 1e-15);
  CHECK(eval(g, g.op("Equal", {t, g.constant(tensor::scalar(C(-0.25, 0.75)))})).to_vector<bool>() ==
        std::vector<bool>{false, true, false});
}

TEST_CASE("bfloat16 to and from float agree with Eigen's conversions, bit for bit") {
  const auto bits16 = [](bfloat16 v) { return std::bit_cast<std::uint16_t>(v); };
  // Every bfloat16, NaNs of each sign and payload included.
  std::vector<bfloat16> all;
  for (std::uint32_t u = 0; u <= 0xFFFF; ++u) all.push_back(std::bit_cast<bfloat16>(static_cast<std::uint16_t>(u)));
  std::vector<float> widened(all.size());
  cpu::detail::convert_range<float, bfloat16>(all.data(), widened.data(), 0, static_cast<std::int64_t>(all.size()));
  int differ = 0;
  for (std::size_t i = 0; i < all.size(); ++i)
    differ += std::bit_cast<std::uint32_t>(widened[i]) != std::bit_cast<std::uint32_t>(static_cast<float>(all[i]));
  CHECK(differ == 0);
  // Floats: a stride through every bit pattern, and the cases that decide rounding: ties to
  // even down (0x3F808000) and up (0x3F818000), just past a tie, the largest float (rounds
  // to infinity), denormals, zeros, infinities and NaNs of both signs.
  std::vector<float> floats;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFu; u += 977) floats.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(u)));
  for (std::uint32_t u : {0x3F808000u, 0x3F818000u, 0x3F808001u, 0x7F7FFFFFu, 0x00000001u, 0x007FFFFFu, 0x80008000u, 0u,
                          0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0xFFBFFFFFu})
    floats.push_back(std::bit_cast<float>(u));
  std::vector<bfloat16> narrowed(floats.size());
  cpu::detail::convert_range<bfloat16, float>(floats.data(), narrowed.data(), 0, static_cast<std::int64_t>(floats.size()));
  differ = 0;
  for (std::size_t i = 0; i < floats.size(); ++i) {
    const bool same = bits16(narrowed[i]) == bits16(bfloat16(floats[i]));
    if (!same && differ++ < 5)
      WARN("float bits " << std::hex << std::bit_cast<std::uint32_t>(floats[i]) << ": " << bits16(narrowed[i]) << " against Eigen's "
                         << bits16(bfloat16(floats[i])));
  }
  CHECK(differ == 0);
  // By hand: 1 + 2^-8 is a tie and rounds to even (1), 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
  CHECK(bits16(narrowed[narrowed.size() - 15]) == 0x3F80);
  CHECK(bits16(narrowed[narrowed.size() - 14]) == 0x3F82);
}
