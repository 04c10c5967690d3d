// weft's own float GEMM (<weft/kernels/cpu/sgemm.hpp>), as every x86-64 build compiles it:
// each product with each register block the CPU has (the 6 x 16 AVX2 one, and the 12 x 32
// AVX-512 one where the CPU has AVX-512F, whatever the build's flags); skipped (exit 77) on
// a CPU without AVX2 and FMA. Values against a naive loop in double, within the float error
// bound of a sum of k products: |got - exact| <= (k + 4) * 2^-24 * sum_p |a(i,p) b(p,j)|.
#define CATCH_CONFIG_RUNNER
#include <weft/kernels/cpu/array.hpp>
#include <weft/kernels/cpu/bgemm.hpp>
#include <weft/kernels/cpu/matmul.hpp>
#include <weft/weft.hpp>

#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

using namespace weft;

#ifdef WEFT_OWN_SGEMM

namespace {

std::vector<float> pattern(std::int64_t count, double phase) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(phase + 0.37 * static_cast<double>(i)));
  return v;
}

struct operands {
  std::int64_t m, n, k;
  bool ta, tb;
  std::vector<float> a, b;  // stored (m,k) or (k,m) when ta; (k,n) or (n,k) when tb
  float a_at(std::int64_t i, std::int64_t p) const { return a[static_cast<std::size_t>(ta ? p * m + i : i * k + p)]; }
  float b_at(std::int64_t p, std::int64_t j) const { return b[static_cast<std::size_t>(tb ? j * k + p : p * n + j)]; }
};

operands make(std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb) {
  return {m, n, k, ta, tb, pattern(m * k, 0.1), pattern(k * n, 1.3)};
}

// out (row stride ldc) against the naive product; columns [n, ldc) must keep `fill`. One
// assertion per product (a message per element would dominate the run under ASan).
void check(const operands& o, const std::vector<float>& out, std::int64_t ldc, float fill) {
  INFO("m=" << o.m << " n=" << o.n << " k=" << o.k << " ta=" << o.ta << " tb=" << o.tb);
  for (std::int64_t i = 0; i < o.m; ++i) {
    for (std::int64_t j = 0; j < ldc; ++j) {
      const float got = out[static_cast<std::size_t>(i * ldc + j)];
      if (j >= o.n) {
        if (got != fill) FAIL("out(" << i << ", " << j << ") = " << got << " outside the product, was " << fill);
        continue;
      }
      double exact = 0, magnitude = 0;
      for (std::int64_t p = 0; p < o.k; ++p) {
        const double term = static_cast<double>(o.a_at(i, p)) * static_cast<double>(o.b_at(p, j));
        exact += term;
        magnitude += std::abs(term);
      }
      const double bound = static_cast<double>(o.k + 4) * std::ldexp(1.0, -24) * magnitude;
      if (!(std::abs(static_cast<double>(got) - exact) <= bound))
        FAIL("out(" << i << ", " << j << ") = " << got << ", exact " << exact << ", bound " << bound);
    }
  }
  SUCCEED("every element within the bound");
}

// The register blocks this CPU runs.
std::vector<cpu::sgemm_isa> isas() {
  std::vector<cpu::sgemm_isa> out;
  for (auto isa : {cpu::sgemm_isa::avx2, cpu::sgemm_isa::avx512})
    if (cpu::sgemm_supported(isa)) out.push_back(isa);
  return out;
}
const char* name(cpu::sgemm_isa isa) { return isa == cpu::sgemm_isa::avx512 ? "AVX-512" : "AVX2"; }

void run_sgemm(const operands& o, std::int64_t ldc, float fill) {
  for (auto isa : isas()) {
    INFO(name(isa) << " block");
    std::vector<float> out(static_cast<std::size_t>(o.m * ldc), fill);
    cpu::sgemm(isa, o.m, o.n, o.k, o.a.data(), o.ta ? 1 : o.k, o.ta ? o.m : 1, o.b.data(), o.tb ? 1 : o.n,
               o.tb ? o.k : 1, out.data(), ldc);
    check(o, out, ldc, fill);
  }
}

// out = initial + alpha * op(a) op(b), from sgemm with `accumulate` (a gradient-descent
// update folded into its product), against the naive sum in double: alpha scales each
// panel's block once, and the sum is rounded once more per panel.
void run_update(const operands& o, float alpha) {
  const std::vector<float> initial = pattern(o.m * o.n, 2.9);
  for (auto isa : isas()) {
    INFO(name(isa) << " block, m=" << o.m << " n=" << o.n << " k=" << o.k << " ta=" << o.ta << " tb=" << o.tb
                   << " alpha=" << alpha);
    std::vector<float> out = initial;
    cpu::sgemm(isa, o.m, o.n, o.k, o.a.data(), o.ta ? 1 : o.k, o.ta ? o.m : 1, o.b.data(), o.tb ? 1 : o.n,
               o.tb ? o.k : 1, out.data(), o.n, alpha, true);
    for (std::int64_t i = 0; i < o.m; ++i)
      for (std::int64_t j = 0; j < o.n; ++j) {
        double exact = 0, magnitude = 0;
        for (std::int64_t p = 0; p < o.k; ++p) {
          const double term = static_cast<double>(o.a_at(i, p)) * static_cast<double>(o.b_at(p, j));
          exact += term;
          magnitude += std::abs(term);
        }
        const auto at = static_cast<std::size_t>(i * o.n + j);
        const double want = static_cast<double>(initial[at]) + static_cast<double>(alpha) * exact;
        const double panels = static_cast<double>(o.k / 97 + 2);  // roundings of the running sum
        const double bound = std::ldexp(1.0, -24) * (static_cast<double>(o.k + 4) * std::abs(alpha) * magnitude +
                                                     panels * (std::abs(static_cast<double>(initial[at])) + std::abs(alpha) * magnitude));
        if (!(std::abs(static_cast<double>(out[at]) - want) <= bound))
          FAIL("out(" << i << ", " << j << ") = " << out[at] << ", want " << want << ", bound " << bound);
      }
    SUCCEED("every element within the bound");
  }
}

// out = relu(op(a) op(b) + bias) (or without relu) from sgemm's output pass, against the sum
// in double: the pass runs on each block after its last depth panel, full blocks in vector
// registers, edge blocks element by element.
void run_output_pass(const operands& o, bool relu) {
  const std::vector<float> bias = pattern(o.n, 4.1);
  for (auto isa : isas()) {
    INFO(name(isa) << " block, m=" << o.m << " n=" << o.n << " k=" << o.k << " ta=" << o.ta << " tb=" << o.tb
                   << " relu=" << relu);
    std::vector<float> out(static_cast<std::size_t>(o.m * o.n), 99.0f);
    cpu::sgemm(isa, o.m, o.n, o.k, o.a.data(), o.ta ? 1 : o.k, o.ta ? o.m : 1, o.b.data(), o.tb ? 1 : o.n,
               o.tb ? o.k : 1, out.data(), o.n, 1.0f, false, {bias.data(), relu});
    int bad = 0, negative = 0;
    for (std::int64_t i = 0; i < o.m; ++i)
      for (std::int64_t j = 0; j < o.n; ++j) {
        double sum = bias[static_cast<std::size_t>(j)], magnitude = std::abs(sum);
        for (std::int64_t p = 0; p < o.k; ++p) {
          const double term = static_cast<double>(o.a_at(i, p)) * static_cast<double>(o.b_at(p, j));
          sum += term;
          magnitude += std::abs(term);
        }
        if (sum < 0) ++negative;
        const double want = relu ? std::max(sum, 0.0) : sum;
        const float got = out[static_cast<std::size_t>(i * o.n + j)];
        if (!(std::abs(static_cast<double>(got) - want) <= static_cast<double>(o.k + 6) * std::ldexp(1.0, -24) * magnitude) ||
            (relu && got < 0))
          ++bad;
      }
    CHECK(bad == 0);
    CHECK(negative > 0);  // the ReLU had something to clear
  }
}

// out = op(a) op(b) where mask > 0, else 0 (a ReluGrad folded into its gradients' product),
// the mask in a wider matrix (row stride n + 3) with positives, zeros, negatives and NaNs;
// the product is NaN-free, so kept values are checked against the sum in double and cleared
// ones are +0 exactly.
void run_mask_pass(const operands& o) {
  const std::int64_t ld = o.n + 3;
  std::vector<float> mask = pattern(o.m * ld, 0.7);
  for (std::size_t i = 0; i < mask.size(); i += 5) mask[i] = 0.0f;
  for (std::size_t i = 2; i < mask.size(); i += 11) mask[i] = std::numeric_limits<float>::quiet_NaN();
  for (auto isa : isas()) {
    INFO(name(isa) << " block, m=" << o.m << " n=" << o.n << " k=" << o.k << " ta=" << o.ta << " tb=" << o.tb);
    std::vector<float> out(static_cast<std::size_t>(o.m * o.n), 99.0f);
    cpu::sgemm(isa, o.m, o.n, o.k, o.a.data(), o.ta ? 1 : o.k, o.ta ? o.m : 1, o.b.data(), o.tb ? 1 : o.n, o.tb ? o.k : 1,
               out.data(), o.n, 1.0f, false, {nullptr, false, mask.data(), ld});
    int bad = 0, kept = 0, cleared = 0;
    for (std::int64_t i = 0; i < o.m; ++i)
      for (std::int64_t j = 0; j < o.n; ++j) {
        const float got = out[static_cast<std::size_t>(i * o.n + j)];
        if (!(mask[static_cast<std::size_t>(i * ld + j)] > 0.0f)) {
          ++cleared;
          if (got != 0.0f || std::signbit(got)) ++bad;
          continue;
        }
        ++kept;
        double sum = 0, magnitude = 0;
        for (std::int64_t p = 0; p < o.k; ++p) {
          const double term = static_cast<double>(o.a_at(i, p)) * static_cast<double>(o.b_at(p, j));
          sum += term;
          magnitude += std::abs(term);
        }
        if (!(std::abs(static_cast<double>(got) - sum) <= static_cast<double>(o.k + 4) * std::ldexp(1.0, -24) * magnitude)) ++bad;
      }
    CHECK(bad == 0);
    CHECK(kept > 0);
    CHECK(cleared > 0);
  }
}

}  // namespace

TEST_CASE("sgemm's output pass: a mask (ReluGrad's features), at the edges of its blocks") {
  for (auto [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{7, 17, 5}, {12, 32, 128}, {25, 65, 385},
                         {13, 33, 257}, {150, 10, 129}, {24, 64, 1}, {20, 64, 130}, {16, 32, 7}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) run_mask_pass(make(m, n, k, ta, tb));
}

TEST_CASE("sgemm's output pass: a bias per column, then ReLU, at the edges of its blocks") {
  for (bool relu : {true, false})
    for (auto [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{7, 17, 5}, {12, 32, 128}, {25, 65, 385},
                           {13, 33, 257}, {150, 10, 129}, {24, 64, 1}, {20, 64, 130}, {16, 32, 7}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) run_output_pass(make(m, n, k, ta, tb), relu);
  // k = 0: the product is zeros, then the pass: relu(bias).
  for (auto isa : isas()) {
    const std::vector<float> bias{-1.0f, 2.0f};
    std::vector<float> out(4, 7.0f);
    cpu::sgemm(isa, 2, 2, 0, nullptr, 0, 1, nullptr, 2, 1, out.data(), 2, 1.0f, false, {bias.data(), true});
    CHECK(out == std::vector<float>{0.0f, 2.0f, 0.0f, 2.0f});
  }
}

TEST_CASE("sgemm with alpha and accumulate: out += alpha * op(a) op(b), at the edges of its blocks") {
  // The register blocks' edges, several depth panels, the transposed path of products with
  // fewer columns than a block (n = 10), and alpha = 1 and -0.05 (a learning rate).
  for (float alpha : {1.0f, -0.05f})
    for (auto [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{7, 17, 5}, {13, 33, 257}, {25, 65, 385},
                           {150, 10, 129}, {12, 32, 128}, {1, 40, 3}, {20, 64, 130}, {16, 32, 7}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) run_update(make(m, n, k, ta, tb), alpha);
  // k = 0 adds nothing.
  for (auto isa : isas()) {
    std::vector<float> out(12, 3.0f);
    cpu::sgemm(isa, 3, 4, 0, nullptr, 0, 1, nullptr, 4, 1, out.data(), 4, -0.5f, true);
    CHECK(out == std::vector<float>(12, 3.0f));
  }
}

TEST_CASE("sgemm matches a naive loop at every edge of its blocks, every transpose") {
  // Edges of the AVX2 6 x 16 register block, of the 144-row block of a, of the 256-deep panels
  // (784 is four panels of 196, 257 two of 129), and products with fewer columns than a
  // block (computed transposed).
  const std::int64_t ms[] = {1, 2, 5, 6, 7, 13};
  const std::int64_t ns[] = {1, 3, 10, 15, 16, 17, 33};
  const std::int64_t ks[] = {1, 2, 7, 256, 257, 784};
  for (auto m : ms)
    for (auto n : ns)
      for (auto k : ks)
        for (bool ta : {false, true})
          for (bool tb : {false, true}) run_sgemm(make(m, n, k, ta, tb), n, 0.0f);
  for (std::int64_t m : {143, 144, 150})
    for (std::int64_t n : {10, 16, 17})
      for (std::int64_t k : {7, 257})
        for (bool ta : {false, true})
          for (bool tb : {false, true}) run_sgemm(make(m, n, k, ta, tb), n, 0.0f);
  // Edges of the AVX-512 12 x 32 register block and 128-deep panels (385: four of 97); a
  // last block of 4 or 8 rows computes only those (16 = 12 + 4, 20 = 12 + 8).
  for (std::int64_t m : {4, 8, 11, 12, 16, 20, 25})
    for (std::int64_t n : {31, 32, 65})
      for (std::int64_t k : {128, 129, 385})
        for (bool ta : {false, true})
          for (bool tb : {false, true}) run_sgemm(make(m, n, k, ta, tb), n, 0.0f);
}

TEST_CASE("sgemm writes only its block of a larger output and spans panels of b") {
  // Output rows inside a wider matrix: the columns past n keep their values.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      run_sgemm(make(9, 21, 30, ta, tb), 40, 7.5f);
      run_sgemm(make(40, 5, 30, ta, tb), 8, -1.0f);
    }
  // More columns than one packed panel of b (4080, or 4096 with AVX-512).
  run_sgemm(make(3, 4100, 5, false, false), 4100, 0.0f);
  run_sgemm(make(7, 4097, 3, true, true), 4100, 2.0f);
  // Operands with neither stride 1 (every other element of a larger buffer).
  const auto o = make(11, 19, 21, false, false);
  std::vector<float> a2(o.a.size() * 2, 99.0f), b2(o.b.size() * 2, 99.0f);
  for (std::size_t i = 0; i < o.a.size(); ++i) a2[2 * i] = o.a[i];
  for (std::size_t i = 0; i < o.b.size(); ++i) b2[2 * i] = o.b[i];
  for (auto isa : isas()) {
    INFO(name(isa) << " block");
    std::vector<float> strided_out(static_cast<std::size_t>(o.m * o.n));
    cpu::sgemm(isa, o.m, o.n, o.k, a2.data(), 2 * o.k, 2, b2.data(), 2 * o.n, 2, strided_out.data(), o.n);
    check(o, strided_out, o.n, 0.0f);
    // k = 0: zeros.
    std::vector<float> out(12, 3.0f);
    cpu::sgemm(isa, 3, 4, 0, nullptr, 0, 1, nullptr, 4, 1, out.data(), 4);
    CHECK(out == std::vector<float>(12, 0.0f));
  }
}

TEST_CASE("a part of a split product claims its output first and writes what it would have written, nothing more") {
  // sgemm_shared::split: each full-width block asks for its rows of c (PREFETCHW) before its
  // first panel's sum. Rows that start anywhere in a line (row strides n + 3), several
  // panels (k past 128 and 256), plain and as an update: the same bits as without, the
  // columns past n untouched.
  for (const auto& [m, n, k, ta] : {std::tuple{25, 70, 300, false}, std::tuple{40, 96, 129, true}, std::tuple{13, 33, 7, false}}) {
    const auto o = make(m, n, k, ta, false);
    const std::int64_t ldc = n + 3;
    for (bool accumulate : {false, true}) {
      INFO("m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " accumulate=" << accumulate);
      std::vector<float> alone(static_cast<std::size_t>(m * ldc), 0.25f);
      for (std::int64_t i = 0; i < m; ++i)  // an update's initial values; the pad stays 0.25
        for (std::int64_t j = 0; j < n; ++j) alone[static_cast<std::size_t>(i * ldc + j)] = 0.01f * static_cast<float>(i - j);
      std::vector<float> part = alone;
      const float alpha = accumulate ? -0.5f : 1.0f;
      cpu::sgemm(m, n, k, o.a.data(), ta ? 1 : k, ta ? m : 1, o.b.data(), n, 1, alone.data(), ldc, {}, alpha, accumulate);
      cpu::sgemm(m, n, k, o.a.data(), ta ? 1 : k, ta ? m : 1, o.b.data(), n, 1, part.data(), ldc, {.split = true}, alpha,
                 accumulate);
      CHECK(std::memcmp(alone.data(), part.data(), alone.size() * sizeof(float)) == 0);
      if (!accumulate) check(o, part, ldc, 0.25f);
    }
  }
}

// `count` floats that end where an unreadable page begins: a read past them faults.
class guarded_floats {
 public:
  explicit guarded_floats(std::size_t count) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    bytes_ = (count * sizeof(float) + page - 1) / page * page + page;
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    base_ = static_cast<char*>(p);
    REQUIRE(mprotect(base_ + bytes_ - page, page, PROT_NONE) == 0);
    data_ = reinterpret_cast<float*>(base_ + bytes_ - page) - count;
  }
  guarded_floats(const guarded_floats&) = delete;
  guarded_floats& operator=(const guarded_floats&) = delete;
  ~guarded_floats() { munmap(base_, bytes_); }
  float* data() const { return data_; }

 private:
  char* base_ = nullptr;
  std::size_t bytes_ = 0;
  float* data_ = nullptr;
};

TEST_CASE("sgemm reads a transposed a where it is, never past its rows, whatever its stride") {
  // A transposed a (a weight's gradient x^T dz) is read in place, a whole register block of
  // rows at each depth step; its edge rows are packed, as a block reads all of its rows
  // (those past the edge only into accumulators it does not store). Here a ends where an
  // unreadable page begins, so a read past its last row faults, and sits in a larger
  // buffer (row stride m + 5, the rows between NaN), so a read with the wrong stride
  // reaches the output. Rows that end inside each block (AVX2 6, AVX-512 12, the 144-row
  // block of a), depths across panels, plain and as an update (alpha, accumulate).
  for (std::int64_t m : {5, 12, 25, 150})
    for (std::int64_t k : {7, 129, 257}) {
      const std::int64_t n = 33, lda = m + 5;
      const auto o = make(m, n, k, true, false);
      guarded_floats flush(o.a.size());
      std::copy(o.a.begin(), o.a.end(), flush.data());
      for (auto isa : isas()) {
        INFO(name(isa) << " block, a against an unreadable page");
        std::vector<float> out(static_cast<std::size_t>(m * n), 0.0f);
        cpu::sgemm(isa, m, n, k, flush.data(), 1, m, o.b.data(), n, 1, out.data(), n);
        check(o, out, n, 0.0f);
      }
      std::vector<float> padded(static_cast<std::size_t>(k * lda), std::numeric_limits<float>::quiet_NaN());
      for (std::int64_t p = 0; p < k; ++p)
        for (std::int64_t i = 0; i < m; ++i) padded[static_cast<std::size_t>(p * lda + i)] = o.a_at(i, p);
      for (auto isa : isas()) {
        INFO(name(isa) << " block, lda=" << lda);
        std::vector<float> out(static_cast<std::size_t>(m * n), 0.0f);
        cpu::sgemm(isa, m, n, k, padded.data(), 1, lda, o.b.data(), n, 1, out.data(), n);
        check(o, out, n, 0.0f);
        // out = 2 - 0.5 op(a) op(b), checked as the plain product of -0.5 a with b plus 2.
        std::fill(out.begin(), out.end(), 2.0f);
        cpu::sgemm(isa, m, n, k, padded.data(), 1, lda, o.b.data(), n, 1, out.data(), n, -0.5f, true);
        auto scaled = o;
        for (auto& v : scaled.a) v *= -0.5f;
        for (auto& v : out) v -= 2.0f;
        check(scaled, out, n, 0.0f);
      }
    }
}

TEST_CASE("sgemm propagates infinities and NaNs only into their own rows and columns") {
  // 7 rows and 17 columns: padded rows and columns of the blocks multiply the non-finite
  // values by zero (NaN), and none of it may reach a real output.
  auto o = make(7, 17, 9, false, false);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  o.a[static_cast<std::size_t>(2 * o.k + 4)] = nan;  // a(2, 4)
  o.b[static_cast<std::size_t>(3 * o.n + 16)] = inf;  // b(3, 16)
  for (auto isa : isas()) {
    INFO(name(isa) << " block");
    std::vector<float> out(static_cast<std::size_t>(o.m * o.n));
    cpu::sgemm(isa, o.m, o.n, o.k, o.a.data(), o.k, 1, o.b.data(), o.n, 1, out.data(), o.n);
    for (std::int64_t i = 0; i < o.m; ++i)
      for (std::int64_t j = 0; j < o.n; ++j) {
        const float got = out[static_cast<std::size_t>(i * o.n + j)];
        INFO("out(" << i << ", " << j << ") = " << got);
        if (i == 2) CHECK(std::isnan(got));
        else if (j == 16) CHECK(std::isinf(got));
        else CHECK(std::isfinite(got));
      }
  }
}

namespace {
// MatMul through a session (this file's kernels, with the block sgemm_best_isa() picks)
// against the naive loop.
void check_matmul(std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb, int threads) {
  const auto o = make(m, n, k, ta, tb);
  graph g;
  auto& x = g.constant(tensor::from_vector(o.a, ta ? shape{k, m} : shape{m, k}));
  auto& y = g.constant(tensor::from_vector(o.b, tb ? shape{n, k} : shape{k, n}));
  auto& product = g.op("MatMul", {x, y}, {{"transpose_a", ta}, {"transpose_b", tb}});
  session_options options;
  options.inter_op_threads = 0;
  options.intra_op_threads = threads;
  session s(g, options);
  const auto out = s.run({}, {product})[0];
  REQUIRE(out.shape() == (shape{m, n}));
  check(o, out.to_vector<float>(), n, 0.0f);
}
}  // namespace

TEST_CASE("a product reads a weight packed before as b, whole or from a sliver on, as if it packed the weight itself") {
  // A weight (m x n) packed once (packed_weight: sgemm_pack_b's layout for this CPU's block;
  // edges of its slivers and of its depth panels); a product that reads the copy equals, bit
  // for bit, one that packs the weight itself: all columns, and columns [32, n) from the
  // copy's second sliver of 32 (a part of a product split by columns).
  for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{7, 40}, {13, 33}, {25, 65}, {150, 64}, {128, 32}, {300, 70}, {784, 96}}) {
    INFO("weight " << m << " x " << n);
    const std::vector<float> w = pattern(m * n, 0.7), x = pattern(20 * m, 2.1);
    const cpu::packed_weight packed(m, n, w.data());
    REQUIRE(packed.fits(m, n));
    std::vector<float> direct(static_cast<std::size_t>(20 * n)), from_copy(direct.size(), 9.0f);
    cpu::sgemm(20, n, m, x.data(), m, 1, w.data(), n, 1, direct.data(), n);
    check({20, n, m, false, false, x, w}, direct, n, 0.0f);
    cpu::sgemm(20, n, m, x.data(), m, 1, w.data(), n, 1, from_copy.data(), n, {nullptr, packed.data, n, 0});
    CHECK(std::memcmp(direct.data(), from_copy.data(), direct.size() * sizeof(float)) == 0);
    std::fill(from_copy.begin(), from_copy.end(), 9.0f);
    cpu::sgemm(20, n - 32, m, x.data(), m, 1, w.data() + 32, n, 1, from_copy.data() + 32, n, {nullptr, packed.data, n, 32});
    int differ = 0;
    for (std::int64_t i = 0; i < 20; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const float got = from_copy[static_cast<std::size_t>(i * n + j)];
        if (j < 32 ? got != 9.0f : std::memcmp(&got, &direct[static_cast<std::size_t>(i * n + j)], sizeof got) != 0) ++differ;
      }
    CHECK(differ == 0);
    // Columns [16, n): not the start of a sliver of the copy, which the product then ignores.
    if (n > 40) {
      std::fill(from_copy.begin(), from_copy.end(), 9.0f);
      cpu::sgemm(20, n - 16, m, x.data(), m, 1, w.data() + 16, n, 1, from_copy.data() + 16, n, {nullptr, packed.data, n, 16});
      int wrong = 0;
      for (std::int64_t i = 0; i < 20; ++i)
        for (std::int64_t j = 16; j < n; ++j)
          if (std::memcmp(&from_copy[static_cast<std::size_t>(i * n + j)], &direct[static_cast<std::size_t>(i * n + j)], sizeof(float)) != 0)
            ++wrong;
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("MatMul in float uses sgemm: an MLP's products on one and two threads") {
  cpu::register_core_kernels();
  cpu::register_matmul_kernel<float>();
  // 784-512-512-10 at a batch of 24: forward, weight gradients (a transposed), input
  // gradients (b transposed); the two-thread runs split rows or columns between blocks.
  for (int threads : {1, 2}) {
    check_matmul(24, 512, 784, false, false, threads);
    check_matmul(24, 10, 512, false, false, threads);
    check_matmul(784, 512, 24, true, false, threads);
    check_matmul(512, 10, 24, true, false, threads);
    check_matmul(24, 512, 512, false, true, threads);
    check_matmul(24, 512, 10, false, true, threads);
    check_matmul(37, 23, 19, true, true, threads);
    // The 10-wide layer at a batch of 128: 1.3 MFLOP each, split on two threads.
    check_matmul(128, 10, 512, false, false, threads);
    check_matmul(128, 512, 10, false, true, threads);
    check_matmul(512, 10, 128, true, false, threads);
  }
  // Parts at least 64 wide: each thread packs the operand it reads whole for itself (rows
  // and columns that end inside a sliver, a transposed b, three threads).
  for (int threads : {2, 3}) {
    check_matmul(130, 520, 784, false, false, threads);  // a: 22 slivers of 6 rows (AVX2), 11 of 12
    check_matmul(600, 250, 300, false, true, threads);   // b^T: 16 slivers of 16 columns, 8 of 32
    check_matmul(601, 90, 37, true, false, threads);
  }
  // Narrower parts: the threads pack that operand together, in chunks, into one copy
  // (chunks and slivers that end inside the operand).
  for (int threads : {2, 3}) {
    check_matmul(40, 100, 784, false, false, threads);  // split by columns: a shared, 4 or 7 slivers of rows
    check_matmul(120, 60, 400, true, true, threads);    // split by rows: b^T shared, 4 or 2 slivers of columns
  }
  // An operand too large to share packed (over 2^22 floats): each block packs its own part.
  check_matmul(8, 16, 600000, false, false, 2);
}

TEST_CASE("a narrow product deeper than its rows splits along its depth, on two and three threads") {
  cpu::register_core_kernels();
  cpu::register_matmul_kernel<float>();
  if (!cpu::sgemm_supported()) return;
  // Which products take the depth split (gemm_by_depth): fewer than 32 columns, deeper than
  // their rows, at least 64 deep a thread; not a weight's update.
  CHECK(cpu::splits_by_depth(128, 512, 10, false, 2));
  CHECK(cpu::splits_by_depth(100, 401, 7, false, 3));
  CHECK_FALSE(cpu::splits_by_depth(128, 512, 10, true, 2));  // accumulating
  CHECK_FALSE(cpu::splits_by_depth(128, 512, 32, false, 2));  // 32 columns: split by them
  CHECK_FALSE(cpu::splits_by_depth(600, 512, 10, false, 2));  // more rows than depth: by rows
  CHECK_FALSE(cpu::splits_by_depth(100, 190, 10, false, 3));  // under 64 deep a thread
  // Depth parts that end inside a 16-float unit, every transpose, the sums of two and three parts.
  for (int threads : {2, 3}) {
    check_matmul(100, 7, 401, false, false, threads);
    check_matmul(100, 7, 401, true, true, threads);
    check_matmul(60, 31, 400, true, false, threads);
    check_matmul(128, 10, 512, false, true, threads);
  }
  // Out past 16,384 floats: the threads sum blocks of its columns (whole cache lines).
  check_matmul(900, 20, 1000, false, false, 2);
}

TEST_CASE("two products split along their depth at once, by two inter-op threads, keep their partial sums apart") {
  cpu::register_core_kernels();
  cpu::register_matmul_kernel<float>();
  // A worker that ran a part of one product may run a part of the other before the first
  // product's caller has summed its parts: each product's parts are the caller's own. (The
  // window is narrow: this did not catch partial sums kept per thread in 600 runs; it checks
  // the values with both products in flight.)
  const auto p = make(128, 10, 512, false, false), q = make(96, 7, 700, true, false);
  REQUIRE(cpu::splits_by_depth(p.m, p.k, p.n, false, 3));
  REQUIRE(cpu::splits_by_depth(q.m, q.k, q.n, false, 3));
  graph g;
  auto& pa = g.placeholder(dtype::float32, shape{p.m, p.k}, "pa");
  auto& qa = g.placeholder(dtype::float32, shape{q.k, q.m}, "qa");
  auto& pp = g.op("MatMul", {pa, g.constant(tensor::from_vector(p.b, shape{p.k, p.n}))});
  auto& qq = g.op("MatMul", {qa, g.constant(tensor::from_vector(q.b, shape{q.k, q.n}))}, {{"transpose_a", true}});
  session_options options;
  options.inter_op_threads = 2;
  options.intra_op_threads = 3;  // two workers: one may leave the first product for the second
  session s(g, options);
  const feed_list feeds{{pa, tensor::from_vector(p.a, shape{p.m, p.k})}, {qa, tensor::from_vector(q.a, shape{q.k, q.m})}};
  for (int run = 0; run < 200; ++run) {
    INFO("run " << run);
    const auto out = s.run(feeds, {pp, qq});
    check(p, out[0].to_vector<float>(), p.n, 0.0f);
    check(q, out[1].to_vector<float>(), q.n, 0.0f);
  }
}

TEST_CASE("each thread packs a split product's operand again for the next product, of the same shape") {
  cpu::register_core_kernels();
  cpu::register_matmul_kernel<float>();
  // Two threads, a product split by columns (each thread packs a whole) and one split by rows
  // (b whole), run with two sets of values in turn: a thread that kept its copy of the
  // first run's operand would give the first run's product again.
  for (auto [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{128, 512, 200}, {512, 200, 64}}) {
    graph g;
    auto& x = g.placeholder(dtype::float32, shape{m, k}, "x");
    auto& y = g.placeholder(dtype::float32, shape{k, n}, "y");
    auto& product = g.op("MatMul", {x, y});
    session_options options;
    options.inter_op_threads = 0;
    options.intra_op_threads = 2;
    session s(g, options);
    for (double phase : {0.1, 2.6, 0.1}) {
      const operands o{m, n, k, false, false, pattern(m * k, phase), pattern(k * n, phase + 1.2)};
      const auto out = s.run({{x, tensor::from_vector(o.a, shape{m, k})}, {y, tensor::from_vector(o.b, shape{k, n})}}, {product})[0];
      INFO("phase " << phase);
      check(o, out.to_vector<float>(), n, 0.0f);
    }
  }
}

// The bfloat16 GEMM (<weft/kernels/cpu/bgemm.hpp>), where the CPU has AVX-512 BF16: the
// operands are the pattern rounded to bfloat16, the exact product of those in double, the
// same bound (each vdpbf16ps rounds like two FMAs).
namespace {
struct bf16_operands {
  operands o;  // the rounded values, as floats, for check()
  std::vector<std::uint16_t> a, b;
};
std::uint16_t bits(bfloat16 v) {
  std::uint16_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}
bf16_operands make_bf16(std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb) {
  bf16_operands r{make(m, n, k, ta, tb), {}, {}};
  for (auto* v : {&r.o.a, &r.o.b}) {
    auto& out = v == &r.o.a ? r.a : r.b;
    for (float& x : *v) {
      const bfloat16 h(x);
      out.push_back(bits(h));
      x = static_cast<float>(h);
    }
  }
  return r;
}
// Also as a part of a split product (its blocks claim their rows of out first): the same bits.
void run_bgemm(const bf16_operands& r, std::int64_t ldc, float fill) {
  const operands& o = r.o;
  std::vector<float> out(static_cast<std::size_t>(o.m * ldc), fill), part = out;
  cpu::bgemm(o.m, o.n, o.k, r.a.data(), o.ta ? 1 : o.k, o.ta ? o.m : 1, r.b.data(), o.tb ? 1 : o.n, o.tb ? o.k : 1,
             out.data(), ldc);
  check(o, out, ldc, fill);
  cpu::bgemm(o.m, o.n, o.k, r.a.data(), o.ta ? 1 : o.k, o.ta ? o.m : 1, r.b.data(), o.tb ? 1 : o.n, o.tb ? o.k : 1,
             part.data(), ldc, true);
  CHECK(std::memcmp(out.data(), part.data(), out.size() * sizeof(float)) == 0);
}
}  // namespace

TEST_CASE("bgemm (bfloat16) matches a naive loop at every edge of its blocks, every transpose") {
  if (!cpu::bgemm_supported()) {
    WARN("skipped: this CPU lacks AVX-512 BF16");
    return;
  }
  // Edges of the 12 x 32 register block (and of its 4- and 8-row forms: 4, 8, 20 rows) and
  // of the 144-row block of a; depths odd and even, one pair, and panels of 256 (257: two of
  // 130 and 127, the last odd; 784: four of 196).
  for (std::int64_t m : {1, 2, 4, 8, 11, 12, 13, 20, 25})
    for (std::int64_t n : {2, 17, 31, 32, 33, 65})
      for (std::int64_t k : {1, 2, 3, 255, 256, 257, 784})
        for (bool ta : {false, true})
          for (bool tb : {false, true}) run_bgemm(make_bf16(m, n, k, ta, tb), n, 0.0f);
  for (std::int64_t m : {143, 144, 150})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) run_bgemm(make_bf16(m, 40, 9, ta, tb), 40, 0.0f);
  // Inside a wider output, more columns than one panel of b (4096), k = 0.
  run_bgemm(make_bf16(9, 21, 30, true, false), 40, 7.5f);
  run_bgemm(make_bf16(5, 4100, 5, false, false), 4100, 0.0f);
  run_bgemm(make_bf16(3, 4097, 4, true, true), 4100, 2.0f);
  std::vector<float> out(12, 3.0f);
  cpu::bgemm(3, 4, 0, nullptr, 0, 1, nullptr, 4, 1, out.data(), 4);
  CHECK(out == std::vector<float>(12, 0.0f));
}

// bgemm's bfloat16 results (bgemm_output) against its float sums put through the pass here, a
// loop of its own with Eigen's conversion to bfloat16: the same bits, for each kind of pass.
namespace {
float value_of(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
enum class pass_kind { plain, bias_relu, mask, update };
void run_bgemm_output(std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb, std::int64_t ld, pass_kind kind) {
  INFO("m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb << " ld=" << ld << " pass=" << int(kind));
  const auto r = make_bf16(m, n, k, ta, tb);
  const std::int64_t a_rs = ta ? 1 : k, a_cs = ta ? m : 1, b_rs = tb ? 1 : n, b_cs = tb ? k : 1;
  std::vector<float> sums(static_cast<std::size_t>(m * n));
  cpu::bgemm(m, n, k, r.a.data(), a_rs, a_cs, r.b.data(), b_rs, b_cs, sums.data(), n);
  // The bias, mask and starting values: negatives, zeros and (in the mask) NaNs.
  std::vector<std::uint16_t> bias, mask, start;
  for (float v : pattern(n, 2.1)) bias.push_back(bits(bfloat16(v)));
  for (float v : pattern(m * n, 0.7)) mask.push_back(bits(bfloat16(v)));
  for (std::size_t i = 0; i < mask.size(); i += 11) mask[i] = i % 2 ? 0x7FC0 : 0x8000;  // NaN, -0
  for (float v : pattern(m * ld, 3.3)) start.push_back(bits(bfloat16(4 * v)));
  cpu::bgemm_output pass{nullptr, ld};
  if (kind == pass_kind::bias_relu) pass.bias = bias.data(), pass.relu = true;
  if (kind == pass_kind::mask) pass.mask = mask.data(), pass.mask_ld = n;
  if (kind == pass_kind::update) pass.update = true, pass.alpha = -0.37f;
  std::vector<std::uint16_t> want = start;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float v = sums[static_cast<std::size_t>(i * n + j)];
      const std::size_t at = static_cast<std::size_t>(i * ld + j);
      if (kind == pass_kind::update) v = std::fma(-0.37f, v, value_of(start[at]));
      if (kind == pass_kind::bias_relu) v = std::max(v + value_of(bias[static_cast<std::size_t>(j)]), 0.0f);
      if (kind == pass_kind::mask && !(value_of(mask[static_cast<std::size_t>(i * n + j)]) > 0)) v = 0;
      want[at] = bits(bfloat16(v));
    }
  for (bool split : {false, true}) {
    std::vector<std::uint16_t> got = start;
    pass.out = got.data();
    cpu::bgemm(m, n, k, r.a.data(), a_rs, a_cs, r.b.data(), b_rs, b_cs, pass, split);
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];  // columns past n: untouched
    INFO("split=" << split);
    CHECK(bad == 0);
  }
}
}  // namespace

TEST_CASE("bgemm's bfloat16 results: its float sums through a bias and ReLU, a mask or an update, rounded once") {
  if (!cpu::bgemm_supported()) {
    WARN("skipped: this CPU lacks AVX-512 BF16");
    return;
  }
  // Edges of the register block (a last block of 4 or 8 rows: 16, 20; of 7: 19); one depth
  // panel and several (257: the partial sums wait in float), results inside a wider output;
  // fewer columns than rows (2: the transposes' product).
  for (auto kind : {pass_kind::plain, pass_kind::bias_relu, pass_kind::mask, pass_kind::update})
    for (std::int64_t m : {1, 11, 12, 16, 19, 20, 25})
      for (std::int64_t n : {2, 31, 32, 65})
        for (std::int64_t k : {1, 3, 256, 257})
          for (bool ta : {false, true}) run_bgemm_output(m, n, k, ta, !ta, n + (m % 2 ? 3 : 0), kind);
  // Rows in chunks of 144 (the float sums of 4 MiB at most), columns past one panel of b.
  run_bgemm_output(300, 5000, 300, false, false, 5000, pass_kind::bias_relu);
  run_bgemm_output(150, 40, 784, true, false, 40, pass_kind::update);
  // Fewer than 32 columns and more rows: the product of the transposes, 8192 rows at a time.
  run_bgemm_output(512, 10, 128, true, false, 10, pass_kind::update);
  run_bgemm_output(128, 10, 512, false, false, 13, pass_kind::bias_relu);
  run_bgemm_output(9000, 3, 40, false, true, 3, pass_kind::mask);
  // k = 0: the sums are 0.
  std::vector<std::uint16_t> out(6, bits(bfloat16(2.0f)));
  const std::uint16_t bias[3] = {bits(bfloat16(-1.0f)), bits(bfloat16(0.5f)), bits(bfloat16(0.0f))};
  cpu::bgemm_output pass{out.data(), 3};
  pass.bias = bias, pass.relu = true;
  cpu::bgemm(2, 3, 0, nullptr, 0, 1, nullptr, 3, 1, pass);
  CHECK(out == std::vector<std::uint16_t>{0, bits(bfloat16(0.5f)), 0, 0, bits(bfloat16(0.5f)), 0});
}

// A sink (bgemm_output::sink) takes each element's complete float sum once: bgemm's float
// sums, bit for bit, by the row and column of the whole result it names.
namespace {
struct recording_sink final : cpu::bgemm_sink {
  std::int64_t n;
  mutable std::vector<float> got;
  mutable std::vector<int> times;
  recording_sink(std::int64_t m, std::int64_t n)
      : n(n), got(static_cast<std::size_t>(m * n), 0.0f), times(static_cast<std::size_t>(m * n), 0) {}
  void take(const float* sums, std::int64_t lds, std::int64_t row, std::int64_t column, std::int64_t rows,
            std::int64_t cols) const override {
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) {
        const auto at = static_cast<std::size_t>((row + i) * n + column + j);
        got[at] = sums[i * lds + j];
        ++times[at];
      }
  }
};
void run_bgemm_sink(std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb) {
  INFO("m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb);
  const auto r = make_bf16(m, n, k, ta, tb);
  const std::int64_t a_rs = ta ? 1 : k, a_cs = ta ? m : 1, b_rs = tb ? 1 : n, b_cs = tb ? k : 1;
  std::vector<float> sums(static_cast<std::size_t>(m * n));
  cpu::bgemm(m, n, k, r.a.data(), a_rs, a_cs, r.b.data(), b_rs, b_cs, sums.data(), n);
  for (bool split : {false, true}) {
    INFO("split=" << split);
    const recording_sink sink(m, n);
    cpu::bgemm_output pass;
    pass.sink = &sink;
    cpu::bgemm(m, n, k, r.a.data(), a_rs, a_cs, r.b.data(), b_rs, b_cs, pass, split);
    CHECK(std::count(sink.times.begin(), sink.times.end(), 1) == m * n);
    CHECK(std::memcmp(sink.got.data(), sums.data(), sums.size() * sizeof(float)) == 0);
  }
}
}  // namespace

TEST_CASE("bgemm hands a sink each element's float sum once, as the float result's bits") {
  if (!cpu::bgemm_supported()) {
    WARN("skipped: this CPU lacks AVX-512 BF16");
    return;
  }
  // Edges of the register block (last blocks of 1, 4, 7, 8, 11 rows), one depth panel and
  // several (257, 784: the partial sums wait in float), fewer columns than rows (2, 10: the
  // transposes' product, its sums handed over in rows), rows in chunks of 144.
  for (std::int64_t m : {1, 11, 12, 16, 19, 20, 25})
    for (std::int64_t n : {2, 31, 32, 65})
      for (std::int64_t k : {1, 3, 256, 257})
        for (bool ta : {false, true}) run_bgemm_sink(m, n, k, ta, !ta);
  run_bgemm_sink(784, 512, 128, true, false);  // an MLP's first weight gradient
  run_bgemm_sink(512, 10, 128, true, false);
  run_bgemm_sink(300, 200, 784, false, true);
  // k = 0: every sum is 0.
  const recording_sink sink(2, 3);
  cpu::bgemm_output pass;
  pass.sink = &sink;
  cpu::bgemm(2, 3, 0, nullptr, 0, 1, nullptr, 3, 1, pass);
  CHECK(sink.times == std::vector<int>(6, 1));
  CHECK(sink.got == std::vector<float>(6, 0.0f));
}

TEST_CASE("MatMul in bfloat16 multiplies its operands as they are, on one and two threads") {
  cpu::register_core_kernels();
  cpu::register_matmul_kernel<bfloat16>();
  // Through a session: the output is the float product rounded to bfloat16 (within half an
  // ulp of bfloat16, 2^-9 of its size, beside the product's own bound). With AVX-512 BF16
  // the products go through bgemm; without it, through float: both meet the same bound.
  const auto run = [](std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb, int threads) {
    const auto r = make_bf16(m, n, k, ta, tb);
    const auto as_tensor = [](const std::vector<float>& v, shape s) {
      tensor t(dtype::bfloat16, s);
      for (std::size_t i = 0; i < v.size(); ++i) t.data<bfloat16>()[i] = bfloat16(v[i]);
      return t;
    };
    graph g;
    auto& x = g.constant(as_tensor(r.o.a, ta ? shape{k, m} : shape{m, k}));
    auto& y = g.constant(as_tensor(r.o.b, tb ? shape{n, k} : shape{k, n}));
    auto& product = g.op("MatMul", {x, y}, {{"transpose_a", ta}, {"transpose_b", tb}});
    session_options options;
    options.inter_op_threads = 0;
    options.intra_op_threads = threads;
    session s(g, options);
    const auto out = s.run({}, {product})[0];
    REQUIRE(out.shape() == (shape{m, n}));
    INFO("m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb << " threads=" << threads);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double exact = 0, magnitude = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          const double term = static_cast<double>(r.o.a_at(i, p)) * static_cast<double>(r.o.b_at(p, j));
          exact += term;
          magnitude += std::abs(term);
        }
        const double got = static_cast<double>(static_cast<float>(out.data<bfloat16>()[i * n + j]));
        const double bound = std::ldexp(std::abs(exact), -8) + static_cast<double>(k + 4) * std::ldexp(1.0, -23) * magnitude;
        if (!(std::abs(got - exact) <= bound)) FAIL("out(" << i << ", " << j << ") = " << got << ", exact " << exact);
      }
    SUCCEED("every element within the bound");
  };
  for (int threads : {1, 2}) {
    run(24, 512, 784, false, false, threads);
    run(784, 512, 24, true, false, threads);
    run(24, 512, 512, false, true, threads);
    run(37, 23, 19, true, true, threads);
    run(24, 1, 30, false, false, threads);  // a matrix-vector product: through float
  }
}

#endif

int main(int argc, char* argv[]) {
#ifdef WEFT_OWN_SGEMM
  if (!cpu::sgemm_supported()) {
    std::puts("skipped: this CPU lacks what sgemm's register blocks need (AVX2 and FMA)");
    return 77;
  }
  std::printf("sgemm blocks on this CPU: AVX2%s; MatMul uses %s; bfloat16 GEMM (AVX-512 BF16): %s\n",
              cpu::sgemm_supported(cpu::sgemm_isa::avx512) ? ", AVX-512" : "", name(cpu::sgemm_best_isa()),
              cpu::bgemm_supported() ? "yes" : "no, skipped");
  return Catch::Session().run(argc, argv);
#else
  (void)argc;
  (void)argv;
  std::puts("skipped: this build has no sgemm (not x86-64, or WEFT_NO_OWN_SGEMM)");
  return 77;
#endif
}
