// The typed DSL: static shapes, values against naive loops, lowering (CSE, node counts,
// scopes), fusion on and off, feeds and run-time shape checks.
#include <weft/dsl.hpp>

#include "support/dsl_helpers.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

using namespace weft;

namespace {

using weft::test::count_op;
using weft::test::fusion;

std::vector<float> ramp(std::size_t n, float scale, float offset = 0) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>(static_cast<int>(i % 23) - 11);
  return v;
}

}  // namespace

namespace {
struct prebuilt_probe_op {  // a user's op: never in the registry
  static constexpr const char* name = "PrebuiltProbe";
  static void define() {}
};
}  // namespace

TEST_CASE("dsl: WEFT_PREBUILT_CPU_KERNELS skips the CPU kernels of the library's ops only", "[dsl]") {
#ifdef WEFT_PREBUILT_CPU_KERNELS  // the sanitizer presets: the tests link the registry
  STATIC_REQUIRE(weft::detail::kernels_prebuilt<ops::Add, device_types::cpu>());
  STATIC_REQUIRE(weft::detail::kernels_prebuilt<ops::Relu, device_types::cpu>());
  STATIC_REQUIRE(weft::detail::kernels_prebuilt<ops::families::nn, device_types::cpu>());
#else
  STATIC_REQUIRE_FALSE(weft::detail::kernels_prebuilt<ops::Add, device_types::cpu>());
  STATIC_REQUIRE_FALSE(weft::detail::kernels_prebuilt<ops::families::nn, device_types::cpu>());
#endif
  STATIC_REQUIRE_FALSE(weft::detail::kernels_prebuilt<prebuilt_probe_op, device_types::cpu>());
  STATIC_REQUIRE_FALSE(weft::detail::kernels_prebuilt<ops::Fused<fused::leaf<float, false>>, device_types::cpu>());
}

TEST_CASE("dsl: expression types carry dtype and static shape", "[dsl]") {
  auto x = placeholder<float>("x", dims<dyn, 784>);
  auto w = variable<float>("w", dims<784, 256>, 0.0f);
  auto b = variable<float>("b", dims<256>, 0.0f);
  auto h = relu(matmul(x, w) + b);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(h)>, float>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(h)>, static_shape<dyn, 256>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(matmul<true, false>(w, w))>, static_shape<256, 256>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(reduce_sum(h))>, static_shape<>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(reduce_sum(h, axes<1>))>, static_shape<dyn>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(reduce_mean(h, axes<-1>, keep_dims))>, static_shape<dyn, 1>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(reshape(w, dims<dyn, 512>))>, static_shape<392, 512>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(reshape(x, dims<dyn, 28, 28>))>, static_shape<dyn, 28, 28>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(transpose(x))>, static_shape<784, dyn>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(concat<1>(x, x))>, static_shape<dyn, 1568>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(concat<0>(w, w))>, static_shape<1568, 256>>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(x > 0.5f)>, bool>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(cast<double>(x))>, double>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(argmax(h, axes<1>))>, std::int64_t>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(argmax(h, axes<1>))>, static_shape<dyn>>);
  // Broadcasting: dyn against a static dim takes the static dim; rank 0 broadcasts anywhere.
  auto c = placeholder<float>("c", dims<dyn, 1, 5>);
  auto d = placeholder<float>("d", dims<3, dyn>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(c + d)>, static_shape<dyn, 3, 5>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(2.0f * c)>, static_shape<dyn, 1, 5>>);
  STATIC_REQUIRE(std::is_same_v<result_of<decltype(h)>, tensor_of<float, 2>>);
}

TEST_CASE("dsl: a dense layer matches a naive loop", "[dsl]") {
  constexpr int n = 5, k = 7, m = 3;
  auto x = placeholder<float>("x", dims<dyn, k>);
  std::vector<float> wv = ramp(k * m, 0.05f), bv = ramp(m, 0.3f);
  auto w = variable<float>("w", dims<k, m>, tensor_of<float, 2>(wv, {k, m}));
  auto b = variable<float>("b", dims<m>, tensor_of<float, 1>(bv, {m}));
  auto y = relu(matmul(x, w) + b);
  auto mean = reduce_mean(y);
  std::vector<float> xv = ramp(n * k, 0.1f);
  for (bool fused : {true, false}) {
    client_session s(fusion(fused));
    s.initialize(y);
    auto [yv, mv] = s.run(fetch(y, mean), feed(x, tensor_of<float, 2>(xv, {n, k})));
    REQUIRE(yv.shape() == shape{n, m});
    double total = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < m; ++j) {
        double acc = bv[static_cast<std::size_t>(j)];
        for (int t = 0; t < k; ++t) acc += double(xv[static_cast<std::size_t>(i * k + t)]) * wv[static_cast<std::size_t>(t * m + j)];
        double want = acc > 0 ? acc : 0;
        total += want;
        CHECK(yv(i, j) == Approx(want).margin(1e-5));
      }
    CHECK(mv.scalar() == Approx(total / (n * m)).margin(1e-5));
  }
}

TEST_CASE("dsl: a fused elementwise chain equals the naive loop and the unfused graph", "[dsl][fusion]") {
  auto x = placeholder<float>("x", dims<dyn>);
  auto a = placeholder<float>("a", dims<>);
  auto bias = placeholder<float>("bias", dims<dyn, 1>);
  auto y = tanh(a * x + 0.5f) * sigmoid(x * 3.0f) + x * x - bias;  // 9 ops, bias [r, 1] broadcast
  const std::int64_t len = 1031, rows = 3;
  std::vector<float> xv = ramp(static_cast<std::size_t>(len), 0.07f), bv{0.5f, -1.0f, 2.0f};
  client_session fused(fusion(true)), plain(fusion(false));
  auto run = [&](client_session& s) {
    return s.run(y, feed(x, tensor_of<float, 1>(xv, {len})), feed(a, 1.5f), feed(bias, tensor_of<float, 2>(bv, {rows, 1})));
  };
  auto yf = run(fused), yp = run(plain);
  REQUIRE(yf.shape() == shape{rows, len});
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < len; ++i) {
      double v = xv[static_cast<std::size_t>(i)];
      double want = std::tanh(1.5 * v + 0.5) / (1 + std::exp(-3.0 * v)) + v * v - bv[static_cast<std::size_t>(r)];
      CHECK(yf(r, i) == Approx(want).epsilon(1e-5).margin(1e-5));
      CHECK(yf(r, i) == Approx(yp(r, i)).epsilon(1e-6).margin(1e-6));
    }
  // Fused: one node computes the chain; unfused: one node per op.
  CHECK(count_op(fused.current_graph(), "Fused") == 1);
  CHECK(count_op(fused.current_graph(), "Tanh") == 0);
  CHECK(count_op(plain.current_graph(), "Fused") == 0);
  CHECK(count_op(plain.current_graph(), "Mul") == 4);
  // x appears four times in the chain and is one input of the fused node.
  const node* f = nullptr;
  for (int i = 0; i < fused.current_graph().size(); ++i)
    if (fused.current_graph().at(i).op() == "Fused") f = &fused.current_graph().at(i);
  REQUIRE(f);
  // Leaves in order: a, x, 0.5, x, 3.0, x, x, bias; inputs: a, x, 0.5, 3.0, bias.
  CHECK(f->num_inputs() == 5);
  CHECK(f->attr<std::vector<std::int64_t>>("slots") == std::vector<std::int64_t>{0, 1, 2, 1, 3, 1, 1, 4});
  // Written out as its ops (what save_model writes, passes/expand_fused.hpp), the graph
  // computes the same with the standard kernels.
  const std::string y_name = fused.current_graph().name_of(fused.lower(y));
  const graph expanded = passes::expand_fused(fused.current_graph());
  CHECK(count_op(expanded, "Fused") == 0);
  CHECK(count_op(expanded, "Tanh") == 1);
  session se(expanded);
  const tensor ye = se.run({{"x", tensor::from_vector(xv)}, {"a", tensor::scalar(1.5f)}, {"bias", tensor::from_vector(bv, shape{rows, 1})}},
                           {y_name})[0];
  REQUIRE(ye.shape() == shape{rows, len});
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < len; ++i) CHECK(ye.flat<float>()[static_cast<std::size_t>(r * len + i)] == Approx(yp(r, i)).epsilon(1e-6).margin(1e-6));
}

TEST_CASE("dsl: fused subtrees read broadcast rows, columns and scalars", "[dsl][fusion]") {
  // x [r, 4, 40]; b [40] and c [1, 4, 40] step along rows of 40 (from 0, and from 40 * j);
  // d [r, 1, 1] repeats one value per row.
  auto x = placeholder<float>("x", dims<dyn, 4, 40>);
  auto b = placeholder<float>("b", dims<40>);
  auto c = placeholder<float>("c", dims<1, 4, 40>);
  auto d = placeholder<float>("d", dims<dyn, 1, 1>);
  auto y = relu(x * 0.5f + b) - c * d;
  auto z = maximum(x, b) + b * b;  // two reads of one row operand
  const std::int64_t r = 3;
  auto xv = ramp(static_cast<std::size_t>(r * 160), 0.11f), bv = ramp(40, 0.3f, 0.2f), cv = ramp(160, -0.05f),
       dv = std::vector<float>{1.0f, -2.0f, 0.5f};
  std::vector<float> empty;
  for (bool on : {true, false}) {
    client_session s(fusion(on));
    auto [yv, zv] = s.run(fetch(y, z), feed(x, tensor_of<float, 3>(xv, {r, 4, 40})), feed(b, tensor_of<float, 1>(bv, {40})),
                          feed(c, tensor_of<float, 3>(cv, {1, 4, 40})), feed(d, tensor_of<float, 3>(dv, {r, 1, 1})));
    REQUIRE(yv.shape() == shape{r, 4, 40});
    for (std::int64_t i = 0; i < r; ++i)
      for (std::int64_t j = 0; j < 4; ++j)
        for (std::int64_t k = 0; k < 40; ++k) {
          float xe = xv[static_cast<std::size_t>(i * 160 + j * 40 + k)], be = bv[static_cast<std::size_t>(k)];
          float want = std::max(xe * 0.5f + be, 0.0f) -
                       cv[static_cast<std::size_t>(j * 40 + k)] * dv[static_cast<std::size_t>(i)];
          CHECK(yv(i, j, k) == Approx(want).margin(1e-6));
          CHECK(zv(i, j, k) == Approx(std::max(xe, be) + be * be).margin(1e-6));
        }
    if (on) CHECK(count_op(s.current_graph(), "Fused") == 2);
    // A column [r, 4, 1] sets the rows (40 elements); b is a row, the fed [1, 1, 1] s a
    // run-time scalar.
    auto col = placeholder<float>("col", dims<dyn, 4, 1>);
    auto sc = placeholder<float>("sc", dims<1, 1, 1>);
    auto w = tanh(x) * col + b - sc;
    std::vector<float> ev = ramp(static_cast<std::size_t>(r * 4), 0.2f);
    auto wv = s.run(w, feed(x, tensor_of<float, 3>(xv, {r, 4, 40})), feed(b, tensor_of<float, 1>(bv, {40})),
                    feed(col, tensor_of<float, 3>(ev, {r, 4, 1})), feed(sc, tensor_of<float, 3>({0.75f}, {1, 1, 1})));
    for (std::int64_t i = 0; i < r; ++i)
      for (std::int64_t j = 0; j < 4; ++j)
        for (std::int64_t k = 0; k < 40; ++k) {
          float xe = xv[static_cast<std::size_t>(i * 160 + j * 40 + k)];
          float want = std::tanh(xe) * ev[static_cast<std::size_t>(i * 4 + j)] + bv[static_cast<std::size_t>(k)] - 0.75f;
          CHECK(wv(i, j, k) == Approx(want).margin(1e-5));
        }
    // Empty batch: nothing to compute, the shape still follows the broadcast.
    auto e = s.run(z, feed(x, tensor_of<float, 3>(empty, {0, 4, 40})), feed(b, tensor_of<float, 1>(bv, {40})));
    CHECK(e.shape() == shape{0, 4, 40});
  }
}

TEST_CASE("dsl: broadcasts of every form equal the naive loop, fused and unfused", "[dsl][fusion]") {
  // Three rank-3 operands broadcast to the output: long rows cut into pieces, rows that
  // start at different offsets per operand, values repeated per row, short rows (several
  // rows per block), and an empty output. The fused session computes `f` and `k` as one
  // node each; the unfused one runs a node per op; `p` is one Add node in both.
  auto x = placeholder<float>("x", dims<dyn, dyn, dyn>);
  auto y = placeholder<float>("y", dims<dyn, dyn, dyn>);
  auto c = placeholder<float>("c", dims<dyn, dyn, dyn>);
  auto i = placeholder<std::int32_t>("i", dims<dyn, dyn, dyn>);
  auto j = placeholder<std::int32_t>("j", dims<dyn, dyn, dyn>);
  auto f = tanh(x) * y + c;
  auto p = x + y;
  auto k = i * j - i;
  struct form {
    shape out, sx, sy, sc;
  };
  const std::vector<form> forms{
      {{2, 3, 5000}, {2, 3, 5000}, {1, 1, 5000}, {2, 3, 1}},  // rows of 5000, two pieces each
      {{4, 5, 70}, {4, 1, 70}, {1, 5, 70}, {4, 5, 1}},        // rows start at 70 * i and 70 * j
      {{3, 7, 80}, {3, 1, 1}, {1, 7, 80}, {1, 1, 80}},        // x repeats one value for 7 rows
      {{40, 7, 3}, {40, 7, 3}, {1, 7, 3}, {40, 7, 1}},        // rows of 3: blocks of many rows
      {{9, 1, 20}, {9, 1, 1}, {1, 1, 20}, {1, 1, 1}},         // a column by a row, a fed scalar
      {{6, 4, 10}, {1, 4, 1}, {6, 1, 10}, {6, 4, 10}},        // rows of 10, nothing full but c
      {{0, 4, 5}, {0, 4, 5}, {1, 4, 5}, {0, 1, 1}},           // empty
  };
  // The element of an operand of shape s at output index (a, b, e): 0 along its dims of 1.
  auto at = [](const auto& v, const shape& s, std::int64_t a, std::int64_t b, std::int64_t e) {
    return v[static_cast<std::size_t>(((s[0] == 1 ? 0 : a) * s[1] + (s[1] == 1 ? 0 : b)) * s[2] + (s[2] == 1 ? 0 : e))];
  };
  auto ints = [](std::int64_t n) {
    std::vector<std::int32_t> v(static_cast<std::size_t>(n));
    for (std::size_t q = 0; q < v.size(); ++q) v[q] = static_cast<std::int32_t>(q % 19) - 9;
    return v;
  };
  for (const auto& fm : forms)
    for (bool on : {true, false}) {
      INFO("output " << fm.out << ", x " << fm.sx << ", y " << fm.sy << ", c " << fm.sc << ", fusion " << on);
      auto xv = ramp(static_cast<std::size_t>(fm.sx.num_elements()), 0.09f),
           yv = ramp(static_cast<std::size_t>(fm.sy.num_elements()), -0.13f, 0.5f),
           cv = ramp(static_cast<std::size_t>(fm.sc.num_elements()), 0.07f, 1.0f);
      auto iv = ints(fm.sx.num_elements()), jv = ints(fm.sy.num_elements());
      auto t3 = [](auto v, const shape& s) {
        using V = typename decltype(v)::value_type;
        return tensor_of<V, 3>(std::move(v), {s[0], s[1], s[2]});
      };
      client_session s(fusion(on));
      auto [fv, pv, kv] = s.run(fetch(f, p, k), feed(x, t3(xv, fm.sx)), feed(y, t3(yv, fm.sy)), feed(c, t3(cv, fm.sc)),
                                feed(i, t3(iv, fm.sx)), feed(j, t3(jv, fm.sy)));
      REQUIRE(fv.shape() == fm.out);
      REQUIRE(pv.shape() == fm.out);
      REQUIRE(kv.shape() == fm.out);
      int bad = 0;
      for (std::int64_t a = 0; a < fm.out[0]; ++a)
        for (std::int64_t b = 0; b < fm.out[1]; ++b)
          for (std::int64_t e = 0; e < fm.out[2]; ++e) {
            float xe = at(xv, fm.sx, a, b, e), ye = at(yv, fm.sy, a, b, e), ce = at(cv, fm.sc, a, b, e);
            std::int32_t ie = at(iv, fm.sx, a, b, e), je = at(jv, fm.sy, a, b, e);
            bad += std::abs(fv(a, b, e) - (std::tanh(xe) * ye + ce)) > 1e-5f;
            bad += pv(a, b, e) != xe + ye;
            bad += kv(a, b, e) != ie * je - ie;
          }
      CHECK(bad == 0);
      CHECK(count_op(s.current_graph(), "Fused") == (on ? 2 : 0));
    }
}

TEST_CASE("dsl: fused subtrees of half, narrow, unsigned and complex types equal their unfused graphs", "[dsl][fusion]") {
  // float16: each op rounds to half, fused or not, so the two agree exactly.
  auto h = placeholder<half>("h", dims<dyn>);
  auto hy = tanh(h * half(1.5f) + half(0.25f)) * h - sigmoid(h);
  auto b = placeholder<bfloat16>("b", dims<dyn>);
  auto by = relu(b * b - bfloat16(0.5f)) + b;
  // int8: products and sums wrap at each op (a comparison sees the wrapped value); uint8
  // and int16 likewise; a cast from float rounds through its dtype.
  auto i = placeholder<std::int8_t>("i", dims<dyn>);
  auto iy = select(i * std::int8_t{3} > std::int8_t{0}, i + std::int8_t{100}, -i);
  auto u = placeholder<std::uint8_t>("u", dims<dyn>);
  auto uy = u * std::uint8_t{7} + std::uint8_t{200};
  auto f = placeholder<float>("f", dims<dyn>);
  auto fy = cast<std::int16_t>(f * 1000.0f) * std::int16_t{3};
  // uint32 (computed in uint64, one element at a time) and uint64 wrap; complex64 fuses,
  // but its cast to float (the real part) stays a node of its own.
  auto q = placeholder<std::uint32_t>("q", dims<dyn>);
  auto qy = select(q * 3u > 10u, q + 4000000000u, q * q);
  auto w = placeholder<std::uint64_t>("w", dims<dyn>);
  auto wy = maximum(w * w, w + std::uint64_t{7});
  auto c = placeholder<complex64>("c", dims<dyn>);
  auto cy = exp(c) * c + c;
  auto cr = cast<float>(c * c) + 1.0f;
  std::vector<half> hv;
  std::vector<bfloat16> bv;
  std::vector<std::int8_t> iv;
  std::vector<std::uint8_t> uv;
  std::vector<float> fv;
  std::vector<std::uint32_t> qv;
  std::vector<std::uint64_t> wv;
  std::vector<complex64> cv;
  for (int k = 0; k < 300; ++k) {
    qv.push_back(static_cast<std::uint32_t>(k) * 15000000u);
    wv.push_back(static_cast<std::uint64_t>(k) << 31);
    cv.push_back(complex64(static_cast<float>(k - 150) / 100.0f, static_cast<float>(k % 7) / 5.0f));
    hv.push_back(half(static_cast<float>(k - 150) / 37.0f));
    bv.push_back(bfloat16(static_cast<float>(k - 150) / 29.0f));
    iv.push_back(static_cast<std::int8_t>(k - 150));
    uv.push_back(static_cast<std::uint8_t>(k));
    fv.push_back(static_cast<float>(k - 150) / 7.0f);
  }
  const std::int64_t n = 300;
  auto run = [&](bool on) {
    client_session s(fusion(on));
    auto r = s.run(fetch(hy, by, iy, uy, fy), feed(h, tensor_of<half, 1>(hv, {n})), feed(b, tensor_of<bfloat16, 1>(bv, {n})),
                   feed(i, tensor_of<std::int8_t, 1>(iv, {n})), feed(u, tensor_of<std::uint8_t, 1>(uv, {n})),
                   feed(f, tensor_of<float, 1>(fv, {n})));
    auto r2 = s.run(fetch(qy, wy, cy, cr), feed(q, tensor_of<std::uint32_t, 1>(qv, {n})),
                    feed(w, tensor_of<std::uint64_t, 1>(wv, {n})), feed(c, tensor_of<complex64, 1>(cv, {n})));
    if (on) {
      CHECK(count_op(s.current_graph(), "Fused") == 8);
      CHECK(count_op(s.current_graph(), "Cast") == 1);
    }
    return std::tuple_cat(r, r2);
  };
  auto [hf, bf, i_f, uf, ff, qf, wf, cf, crf] = run(true);
  auto [hp, bp, ip, up, fp, qp, wp, cp, crp] = run(false);
  for (std::int64_t k = 0; k < n; ++k) {
    CHECK(static_cast<float>(hf(k)) == static_cast<float>(hp(k)));
    CHECK(static_cast<float>(bf(k)) == static_cast<float>(bp(k)));
    CHECK(i_f(k) == ip(k));
    CHECK(uf(k) == up(k));
    CHECK(ff(k) == fp(k));
    CHECK(qf(k) == qp(k));
    CHECK(wf(k) == wp(k));
    CHECK(cf(k) == cp(k));
    CHECK(crf(k) == crp(k));
    std::uint32_t qk = qv[static_cast<std::size_t>(k)];
    CHECK(qf(k) == (static_cast<std::uint32_t>(qk * 3u) > 10u ? static_cast<std::uint32_t>(qk + 4000000000u)
                                                               : static_cast<std::uint32_t>(qk * qk)));
    std::uint64_t wk = wv[static_cast<std::size_t>(k)];
    CHECK(wf(k) == std::max(wk * wk, wk + 7));
    std::complex<double> ck(cv[static_cast<std::size_t>(k)]);
    auto cwant = std::exp(ck) * ck + ck;
    CHECK(std::abs(std::complex<double>(cf(k)) - cwant) <= 1e-5 * (1 + std::abs(cwant)));
    CHECK(crf(k) == Approx((ck * ck).real() + 1).margin(1e-5));
    // Against values computed here: half within its precision, integers exactly.
    double x = static_cast<float>(hv[static_cast<std::size_t>(k)]);
    CHECK(static_cast<float>(hf(k)) == Approx(std::tanh(1.5 * x + 0.25) * x - 1 / (1 + std::exp(-x))).margin(4e-3).epsilon(4e-3));
    int iv8 = iv[static_cast<std::size_t>(k)];
    auto wrap8 = [](int v) { return static_cast<std::int8_t>(static_cast<std::uint8_t>(v & 0xff)); };
    CHECK(i_f(k) == (wrap8(iv8 * 3) > 0 ? wrap8(iv8 + 100) : wrap8(-iv8)));
    CHECK(uf(k) == static_cast<std::uint8_t>((uv[static_cast<std::size_t>(k)] * 7 + 200) & 0xff));
    auto c16 = static_cast<std::int16_t>(fv[static_cast<std::size_t>(k)] * 1000.0f);
    CHECK(ff(k) == static_cast<std::int16_t>(static_cast<std::uint16_t>((c16 * 3) & 0xffff)));
  }
}

TEST_CASE("dsl: fused integer, bool and mixed-dtype subtrees", "[dsl][fusion]") {
  auto i = placeholder<std::int32_t>("i", dims<dyn>);
  auto f = placeholder<float>("f", dims<dyn>);
  // Wrapping int32 arithmetic, a comparison, a select and casts in one subtree.
  auto y = select(i * 3 + 1 > 10 && f < 0.0f, cast<float>(i) * f, -f);
  auto q = i / 2 + 1;  // integer Div is not fused (its kernel checks for zero divisors)
  std::vector<std::int32_t> iv{1, 4, 5, 7, 2147483647, -3, 0};
  std::vector<float> fv{-1, -2, 3, -4, -5, 6, -7};
  for (bool on : {true, false}) {
    client_session s(fusion(on));
    auto [yv, qv] = s.run(fetch(y, q), feed(i, tensor_of<std::int32_t, 1>(iv, {7})), feed(f, tensor_of<float, 1>(fv, {7})));
    for (std::size_t k = 0; k < iv.size(); ++k) {
      auto wrapped = static_cast<std::int32_t>(static_cast<std::uint32_t>(iv[k]) * 3u + 1u);
      float want = (wrapped > 10 && fv[k] < 0) ? static_cast<float>(iv[k]) * fv[k] : -fv[k];
      CHECK(yv(k) == want);
      CHECK(qv(k) == iv[k] / 2 + 1);
    }
    if (on) {
      CHECK(count_op(s.current_graph(), "Fused") == 1);
      CHECK(count_op(s.current_graph(), "Div") == 1);
    }
  }
}

TEST_CASE("dsl: lowering merges equal nodes and keeps distinct leaves apart", "[dsl][cse]") {
  auto x = placeholder<float>("x", dims<dyn, 4>);
  auto w1 = variable<float>("w", dims<4, 4>, 1.0f);
  auto w2 = variable<float>("w", dims<4, 4>, 1.0f);  // built alike, still a second variable
  auto a = matmul(x, w1);
  auto b = matmul(x, w1);  // the same op on the same inputs: one node
  auto c = matmul(x, w2);
  client_session s(fusion(false));
  auto y = a + b + c;
  s.initialize(y);
  const graph& g = s.current_graph();
  CHECK(count_op(g, "Variable") == 2);
  CHECK(count_op(g, "MatMul") == 2);
  CHECK(count_op(g, "Add") == 2);
  CHECK(g.find("w") != nullptr);
  CHECK(g.find("w_1") != nullptr);
  int before = g.size();
  std::vector<float> xv(8, 1.0f);
  auto v1 = s.run(y, feed(x, tensor_of<float, 2>(xv, {2, 4})));
  auto v2 = s.run(a + b + c, feed(x, tensor_of<float, 2>(xv, {2, 4})));  // rebuilt: same nodes
  CHECK(s.current_graph().size() == before);
  CHECK(v1(1, 3) == 12.0f);
  CHECK(v2(1, 3) == 12.0f);
  // Equal constants are one node: the two 2.0f of k add one Const.
  int consts = count_op(g, "Const");
  auto k = x * 2.0f + 2.0f;
  s.lower(k);
  CHECK(count_op(s.current_graph(), "Const") == consts + 1);
}

TEST_CASE("dsl: name and device scopes reach the nodes", "[dsl][scopes]") {
  auto x = placeholder<float>("x", dims<dyn, 2>);
  auto layer = [&](const char* scope, auto in) {
    name_scope ns(scope);
    auto w = variable<float>("w", dims<2, 2>, 0.5f);
    return relu(matmul(in, w));
  };
  auto h = layer("layer1", x);
  auto y = [&] {
    device_scope ds("/cpu:0");
    return layer("layer2", h);
  }();
  client_session s;
  s.initialize(y);
  const graph& g = s.current_graph();
  REQUIRE(g.find("layer1/w"));
  REQUIRE(g.find("layer1/MatMul"));
  REQUIRE(g.find("layer2/MatMul"));
  CHECK(g["layer2/MatMul"].device() == "/cpu:0");
  CHECK(g["layer1/MatMul"].device().empty());
  CHECK(g["layer2/w"].device() == "/cpu:0");
}

TEST_CASE("dsl: feeds and dyn dims are checked at run time", "[dsl][errors]") {
  auto x = placeholder<float>("x", dims<dyn, 3>);
  auto w = placeholder<float>("w", dims<dyn, 2>);
  client_session s;
  auto y = matmul(x, w);
  std::vector<float> v(12, 1.0f);
  // A feed of the wrong shape names the placeholder.
  CHECK_THROWS_WITH(s.run(y, feed(x, tensor_of<float, 2>(v, {3, 4})), feed(w, tensor_of<float, 2>(v, {6, 2}))),
                    Catch::Contains("feed 'x:0'") && Catch::Contains("expected shape [?,3]") &&
                        Catch::Contains("float32[3,4]"));
  // dyn inner dims that differ: the kernel's error names the node and the shapes.
  CHECK_THROWS_WITH(s.run(y, feed(x, tensor_of<float, 2>(v, {4, 3})), feed(w, tensor_of<float, 2>(v, {6, 2}))),
                    Catch::Contains("MatMul") && Catch::Contains("[4,3]") && Catch::Contains("[6,2]"));
  // The session still works after a failed step.
  auto ok = s.run(y, feed(x, tensor_of<float, 2>(v, {4, 3})), feed(w, tensor_of<float, 2>(std::vector<float>(6, 2.0f), {3, 2})));
  CHECK(ok(3, 1) == 6.0f);
  // A fused node whose operands do not broadcast at run time.
  auto p = placeholder<float>("p", dims<dyn>);
  auto q = placeholder<float>("q", dims<dyn>);
  auto z = tanh(p) + q;
  CHECK_THROWS_WITH(s.run(z, feed(p, tensor_of<float, 1>(std::vector<float>(3), {3})), feed(q, tensor_of<float, 1>(std::vector<float>(4), {4}))),
                    Catch::Contains("cannot be broadcast") && Catch::Contains("[3]") && Catch::Contains("[4]"));
}

TEST_CASE("dsl: variables, assignments and random initializers", "[dsl][state]") {
  auto v = variable<float>("v", dims<2, 3>, truncated_normal<float>(dims<2, 3>, 7));
  auto counter = variable<std::int64_t>("counter", dims<>, std::int64_t{0});
  client_session s;
  s.initialize(v, counter);
  auto first = s.run(v);
  for (float e : first.flat()) CHECK(std::abs(e) <= 2.0f);
  auto step = assign_add(counter, constant(std::int64_t{5}));
  s.run(targets(step));
  s.run(targets(step));
  CHECK(s.run(counter).scalar() == 10);
  auto reset = assign(v, zeros<float>(dims<2, 3>));
  s.run(targets(reset));
  for (float e : s.run(v).flat()) CHECK(e == 0.0f);
  // Initializing again does not re-run initializers already run.
  s.initialize(v);
  CHECK(s.run(counter).scalar() == 10);
}

TEST_CASE("dsl: shape ops and reductions match hand-computed values", "[dsl]") {
  auto m = constant<float>({1, 2, 3, 4, 5, 6}, dims<2, 3>);
  client_session s;
  auto t = s.run(transpose(m));
  CHECK(t.shape() == shape{3, 2});
  CHECK(t(2, 1) == 6.0f);
  CHECK(t(0, 1) == 4.0f);
  auto r = s.run(reshape(m, dims<3, dyn>));
  CHECK(r.shape() == shape{3, 2});
  CHECK(r(1, 0) == 3.0f);
  auto c = s.run(concat<0>(m, m * 10.0f));
  CHECK(c.shape() == shape{4, 3});
  CHECK(c(3, 2) == 60.0f);
  CHECK(s.run(reduce_sum(m, axes<0>)).to_vector() == std::vector<float>{5, 7, 9});
  CHECK(s.run(reduce_max(m, axes<1>, keep_dims)).shape() == shape{2, 1});
  CHECK(s.run(reduce_prod(m)).scalar() == 720.0f);
  CHECK(s.run(argmax(m, axes<0>)).to_vector() == std::vector<std::int64_t>{1, 1, 1});
  CHECK(s.run(ones_like(m)).to_vector() == std::vector<float>(6, 1.0f));
  CHECK(s.run(cast<std::int32_t>(m * 1.5f)).to_vector() == std::vector<std::int32_t>{1, 3, 4, 6, 7, 9});
  // Empty and rank-0 operands.
  auto e = placeholder<float>("e", dims<dyn>);
  CHECK(s.run(tanh(e) * 2.0f + e, feed(e, tensor_of<float, 1>(std::vector<float>{}, {0}))).num_elements() == 0);
  CHECK(s.run(reduce_sum(e), feed(e, tensor_of<float, 1>(std::vector<float>{}, {0}))).scalar() == 0.0f);
  CHECK(s.run(exp(constant(0.0f)) + 1.0f).scalar() == 2.0f);
}

TEST_CASE("dsl: expand_dims squeeze stack unstack reverse and add_n have static shapes and hand values", "[dsl]") {
  auto m = constant<float>({1, 2, 3, 4, 5, 6}, dims<2, 3>);
  auto p = placeholder<float>("p", dims<dyn, 3>);
  auto e = expand_dims<-1>(m);
  auto st = stack<1>(m, m * 10.0f);
  auto parts = unstack<3, 1>(m);
  auto r = reverse(m, axes<1>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(e)>, static_shape<2, 3, 1>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(expand_dims<0>(p))>, static_shape<1, dyn, 3>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(squeeze(e, axes<2>))>, static_shape<2, 3>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(squeeze(expand_dims<1>(e)))>, static_shape<2, 3>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(squeeze(expand_dims<0>(p), axes<0>))>, static_shape<dyn, 3>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(st)>, static_shape<2, 2, 3>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(stack<-1>(p, m))>, static_shape<2, 3, 2>>);  // m fixes p's dyn dim
  STATIC_REQUIRE(std::is_same_v<decltype(parts), std::array<std::remove_cvref_t<decltype(parts[0])>, 3>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(parts[0])>, static_shape<2>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(unstack<3, 1>(p)[0])>, static_shape<dyn>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(r)>, static_shape<2, 3>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(add_n(p, m, p))>, static_shape<2, 3>>);
  client_session s;
  CHECK(s.run(e).shape() == shape{2, 3, 1});
  CHECK(s.run(squeeze(e, axes<-1>)).to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(s.run(st).to_vector() == std::vector<float>{1, 2, 3, 10, 20, 30, 4, 5, 6, 40, 50, 60});
  CHECK(s.run(parts[0]).to_vector() == std::vector<float>{1, 4});
  CHECK(s.run(parts[2]).to_vector() == std::vector<float>{3, 6});
  CHECK(s.run(r).to_vector() == std::vector<float>{3, 2, 1, 6, 5, 4});
  CHECK(s.run(reverse(m, axes<0, -1>)).to_vector() == std::vector<float>{6, 5, 4, 3, 2, 1});
  CHECK(s.run(add_n(m, r, m)).to_vector() == std::vector<float>{5, 6, 7, 14, 15, 16});
  CHECK(s.run(add_n(constant(2.5))).scalar() == 2.5);
  // The fed operand's dyn dim checked when run, naming the node.
  auto fed = tensor_of<float, 2>(std::vector<float>(9, 1.0f), {3, 3});
  CHECK_THROWS_WITH(s.run(stack<0>(p, m), feed(p, fed)), Catch::Contains("(Pack)") && Catch::Contains("value 1 has shape [2,3], value 0 [3,3]"));
  CHECK_THROWS_WITH(s.run(unstack<2, 0>(p)[0], feed(p, fed)), Catch::Contains("(Unpack)") && Catch::Contains("has size 3, not num = 2"));
  CHECK_THROWS_WITH(s.run(add_n(p, m), feed(p, fed)), Catch::Contains("(AddN)") && Catch::Contains("input 1 has shape [2,3]"));
}

TEST_CASE("dsl: leaky_relu and clip_by_value match the formulas and their gradients", "[dsl]") {
  auto x = placeholder<double>("x", dims<2, 3>);
  auto hi = placeholder<double>("hi", dims<2, 3>);
  auto y = reduce_sum(leaky_relu(x, 0.1) * clip_by_value(x, -1.0, hi));
  auto [dx, dhi] = grad(y, x, hi);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(clip_by_value(x, constant(0.5), hi))>, static_shape<2, 3>>);
  const std::vector<double> xv{-2, -0.5, 0.25, 1.5, 3, -1.25}, hv{1, 1, 1, 1, 2, 1};
  client_session s;
  auto [v, gx, gh] = s.run(fetch(y, dx, dhi), feed(x, tensor_of<double, 2>(xv, {2, 3})), feed(hi, tensor_of<double, 2>(hv, {2, 3})));
  double want = 0;
  std::vector<double> want_x(6), want_h(6);
  for (std::size_t i = 0; i < 6; ++i) {
    const double l = xv[i] > 0 ? xv[i] : 0.1 * xv[i], dl = xv[i] > 0 ? 1 : 0.1;
    const double c = std::max(std::min(xv[i], hv[i]), -1.0);
    const bool inside = xv[i] >= -1.0 && xv[i] <= hv[i];
    want += l * c;
    want_x[i] = dl * c + (inside ? l : 0.0);
    want_h[i] = xv[i] > hv[i] ? l : 0.0;
  }
  CHECK(v.scalar() == Approx(want).epsilon(1e-12));
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(gx.flat()[i] == Approx(want_x[i]).epsilon(1e-12));
    CHECK(gh.flat()[i] == Approx(want_h[i]).epsilon(1e-12));
  }
}

TEST_CASE("dsl: a client_session saves its variables and restores them all or none", "[dsl][checkpoint]") {
  const auto dir = std::filesystem::temp_directory_path() / ("weft_dsl_ckpt_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto a = variable<float>("a", dims<2>, 1.5f);
  auto b = variable<std::int32_t>("b", dims<3>, std::int32_t{7});
  client_session s;
  s.initialize(a);
  const auto first = s.save(dir / "m", 1);  // only a is lowered yet
  CHECK(read_checkpoint(first).size() == 1);
  s.initialize(b);
  s.run(targets(assign(a, constant(std::vector<float>{2.0f, -3.0f}, dims<2>))));
  const auto second = s.save(dir / "m", 2);  // a new saver covers a and b
  const auto stored = read_checkpoint(second);
  REQUIRE(stored.size() == 2);
  CHECK(stored[0].second.to_vector<float>() == std::vector<float>{2.0f, -3.0f});
  CHECK(stored[1].second.to_vector<std::int32_t>() == std::vector<std::int32_t>{7, 7, 7});

  client_session fresh;
  fresh.initialize(a, b);
  // A file that lacks b changes neither variable.
  try {
    fresh.restore(first);
    FAIL("a checkpoint without b restored");
  } catch (const error& e) {
    CHECK(std::string(e.what()).find("no tensor for variable 'b'") != std::string::npos);
  }
  CHECK(fresh.run(a).to_vector() == std::vector<float>{1.5f, 1.5f});
  fresh.restore(second);
  CHECK(fresh.run(a).to_vector() == std::vector<float>{2.0f, -3.0f});
  CHECK(fresh.run(b).to_vector() == std::vector<std::int32_t>{7, 7, 7});
  std::filesystem::remove_all(dir);
}
