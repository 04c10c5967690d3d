/// @file
/// weft's own float GEMM for x86-64 CPUs with AVX2 and FMA, or AVX-512, chosen at run time:
/// every x86-64 build compiles both register blocks (each function carries its own target
/// attribute, whatever the build's flags), and sgemm() uses the AVX-512 one where the CPU has
/// AVX-512F, the AVX2 one where it has AVX2 and FMA (sgemm_best_isa(), checked once), so a
/// build without -march flags runs AVX-512 code on a CPU that has it.
/// - AVX2 (AMD Zen 1 to 4 as some virtual machines expose them, Intel Haswell to Comet Lake):
///   a 6 x 16 register block (12 ymm accumulators) over depth panels of up to 256. Eigen 3.4's
///   GEMM reaches about 40 to 48 GFLOP/s on one core of an AMD EPYC (Zen 4 without AVX-512)
///   where OpenBLAS reaches 60 to 70, and this one 60 to 80 on the products of an MLP.
/// - AVX-512: a 12 x 32 register block (24 zmm accumulators) over depth panels of up to 128.
///   On one core of an AMD EPYC with AVX-512 (Zen 5) it reaches 165 to 192 GFLOP/s on an MLP's
///   products where Eigen's AVX-512 GEMM reaches 138 to 146, and the AVX2 block 89 to 96
///   (docs/benchmarks.md).
///
/// The structure is BLIS's (Van Zee and van de Geijn, 2015): the depth is cut into panels of
/// at most `kc` values, op(b)'s panel is packed once into slivers of nr columns, op(a)'s rows
/// into slivers of mr rows per block of `mc` rows, and an mr x nr register block (two loads of
/// b and mr broadcasts of a per step of the depth) computes each piece of the output. Slivers
/// are padded with zeros at the edges, and an edge block goes through a small buffer, so any
/// m, n and k work. The first depth panel stores its block, the later ones add to it: the
/// output needs no zero fill.
///
/// The registers are GCC's and Clang's vector types (vector_size), not <immintrin.h>'s: that
/// header is about a quarter of the preprocessed lines of a program that runs one MatMul and
/// some 100 MB of the compiler's memory, for the dozen operations used here (each helper
/// below names the instruction it compiles to).
///
/// Define WEFT_NO_OWN_SGEMM to use Eigen's GEMM for float everywhere.
#pragma once

#include <cstdint>

namespace weft::cpu {
/// An operand packed once for every block of a product split across threads: `a` is
/// sgemm_pack_a of all the rows the blocks pass, `b` sgemm_pack_b of all the columns. (Defined
/// in every build, so that MatMul's generic code can pass one along.)
struct sgemm_shared {
  const float* a = nullptr;  ///< packed rows, or null
  const float* b = nullptr;  ///< packed columns, or null
  /// The columns b holds when it is a whole matrix packed before (a weight's packed copy),
  /// of which the product reads n from b_column0 on; 0: b holds the product's n columns.
  std::int64_t b_columns = 0;
  /// The first column of b_columns that the product reads: the start of a sliver (a
  /// multiple of the block's columns), else the product packs its b itself.
  std::int64_t b_column0 = 0;
  /// Whether the product is one thread's part of a product split across threads: each of
  /// its blocks claims its lines of the output before its first panel's sum (claim_rows).
  bool split = false;
};

/// What a product's output pass applies once the sum is complete: bias[j] added to column j
/// (null: none), then max(x, 0) where `relu` (a NaN stays NaN), then 0 wherever the matrix
/// `mask` (the output's shape, row stride mask_ld) is not above 0 (NaN included): a MatMul
/// with the BiasAdd and Relu after it folded in, or with the ReluGrad that reads it (the mask
/// is the ReLU's features), computed while each block of the output is in registers or L1.
struct sgemm_output_pass {
  const float* bias = nullptr;  ///< one value per output column, or null
  bool relu = false;            ///< max(x, 0) after the bias
  const float* mask = nullptr;  ///< keeps out(i, j) where mask[i * mask_ld + j] > 0, or null
  std::int64_t mask_ld = 0;     ///< the mask's row stride
  /// Whether the pass changes anything.
  explicit operator bool() const noexcept { return bias || relu || mask; }
  /// The same pass for the block of the output from (row, column) on (a part of a split
  /// product, a register block).
  sgemm_output_pass at(std::int64_t row, std::int64_t column) const noexcept {
    return {bias ? bias + column : nullptr, relu, mask ? mask + row * mask_ld + column : nullptr, mask_ld};
  }
  /// Applies the pass to rows x cols of c (row stride ldc), one element at a time.
  void apply(float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols) const noexcept {
    if (!*this) return;
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) {
        float& x = c[i * ldc + j];
        if (bias) x += bias[j];
        if (relu && x < 0.0f) x = 0.0f;
        if (mask && !(mask[i * mask_ld + j] > 0.0f)) x = 0.0f;
      }
  }
};
}  // namespace weft::cpu

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(WEFT_NO_OWN_SGEMM)
#define WEFT_OWN_SGEMM 1

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <cpuid.h>
#include <memory>
#include <new>
#include <thread>

namespace weft::cpu {

/// The register blocks sgemm has: 6 x 16 with AVX2 and FMA, 12 x 32 with AVX-512F.
enum class sgemm_isa { avx2, avx512 };

namespace sgemm_detail {

/// Four, eight and sixteen floats in an xmm, ymm or zmm register; the _u types read and
/// write floats at any alignment (vmovups) and may alias them.
typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x8_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef float f32x4 __attribute__((vector_size(16)));
typedef float f32x4_u __attribute__((vector_size(16), aligned(4), may_alias));
typedef float f32x16 __attribute__((vector_size(64)));
typedef float f32x16_u __attribute__((vector_size(64), aligned(4), may_alias));
typedef std::int32_t i32x8 __attribute__((vector_size(32)));
typedef std::int32_t i32x16 __attribute__((vector_size(64)));

/// a * b + c rounded once (vfmadd), through the builtin the compiler's own intrinsics use, so
/// that neither -ffp-contract nor the language mode can turn it into two roundings.
__attribute__((target("avx2,fma,avx512f"), always_inline)) inline f32x16 fma(f32x16 a, f32x16 b, f32x16 c) {
#if defined(__clang__) && __has_builtin(__builtin_elementwise_fma)
  return __builtin_elementwise_fma(a, b, c);
#else
  return __builtin_ia32_vfmaddps512_mask(a, b, c, static_cast<unsigned short>(0xFFFF), 4 /* current rounding */);
#endif
}
__attribute__((target("avx2,fma,avx512f"), always_inline)) inline f32x16 load16(const float* p) {
  return *reinterpret_cast<const f32x16_u*>(p);
}
__attribute__((target("avx2,fma,avx512f"), always_inline)) inline void store16(float* p, f32x16 v) {
  *reinterpret_cast<f32x16_u*>(p) = v;
}
/// x in every lane (vbroadcastss): x - 0 is x for every float, -0 and NaN included, so the
/// subtraction folds away.
__attribute__((target("avx2,fma,avx512f"), always_inline)) inline f32x16 splat16(float x) { return x - f32x16{}; }

/// Whether the CPU has PREFETCHW (CPUID 0x80000001, ECX bit 8): every CPU with AVX-512F,
/// AMD's since the K6-2, Intel's since Broadwell (not Haswell, whose AVX2 block then skips it).
inline bool has_prefetchw() {
  static const bool yes = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 8)) != 0;
  }();
  return yes;
}

/// Asks for the lines of `rows` rows of Cols elements of c (floats, or bfloat16 bits for
/// bgemm's bfloat16 results; row stride ldc) in a state this
/// core may write (PREFETCHW), before a register block's first multiply-adds. Where another
/// core holds copies of them (in a split product: an output buffer that both cores read in
/// its last use, a weight whose input gradient the other core read), a store waits until
/// those copies are invalidated, about 20 us per 128 KiB between this 2-core VM's cores, and
/// a block's first stores came right after its sums. Asked first, the wait overlaps the
/// sums: the MLP step on two threads 4 to 5 % faster, one thread level (docs/benchmarks.md,
/// session 61). Only split products ask (sgemm_shared::split): alone on one core, where no
/// other core holds the lines, products with one panel ran about 1 % slower asking. Every
/// 64 bytes of a row and its last element are asked for, so that a row that does not start on a
/// line has all of its lines asked for. Inline assembly: the builtin needs the prfchw target.
template <int Cols, class T>
__attribute__((always_inline)) inline void claim_rows(const T* c, std::int64_t ldc, int rows) {
  for (int i = 0; i < rows; ++i) {
    const T* row = c + i * ldc;
    for (int j = 0; j < Cols; j += 64 / static_cast<int>(sizeof(T))) asm volatile("prefetchw (%0)" ::"r"(row + j));
    asm volatile("prefetchw (%0)" ::"r"(row + Cols - 1));
  }
}

/// c[rows x cols] (row stride ldc) = or += a block of Mr rows of two zmm accumulators (32
/// columns): the last step of the AVX-512 block and of bgemm.hpp's. A full block is stored
/// directly, an edge block through a buffer.
template <int Mr>
__attribute__((target("avx2,fma,avx512f"), always_inline)) inline void store_rows_of_32(const f32x16 (&acc)[Mr][2], float* c,
                                                                                       std::int64_t ldc, bool accumulate,
                                                                                       int rows, int cols) {
  if (rows == Mr && cols == 32) {
    for (int i = 0; i < Mr; ++i) {
      float* ci = c + i * ldc;
      if (accumulate) {
        store16(ci, load16(ci) + acc[i][0]);
        store16(ci + 16, load16(ci + 16) + acc[i][1]);
      } else {
        store16(ci, acc[i][0]);
        store16(ci + 16, acc[i][1]);
      }
    }
    return;
  }
  alignas(64) float t[Mr * 32];
  for (int i = 0; i < Mr; ++i) {
    store16(t + i * 32, acc[i][0]);
    store16(t + i * 32 + 16, acc[i][1]);
  }
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + t[i * 32 + j] : t[i * 32 + j];
}

/// The AVX-512 block, with its own target (the code below has AVX2's, as every CPU with
/// AVX-512F has AVX2 and FMA): packing is the same code for both blocks.
struct avx512 {
  static constexpr int mr = 12;                 ///< rows of the register block
  static constexpr int nr = 32;                 ///< columns: two zmm registers
  static constexpr std::int64_t kc_max = 128;   ///< depth of a panel: a 32-column sliver of b is 16 KiB (L1)
  static constexpr std::int64_t nc_max = 4096;  ///< columns of b's panel: at most 2 MiB (L3)
  /// Whether claim_rows may run (PREFETCHW): every CPU with AVX-512F has it.
  static bool can_claim() { return true; }

  /// c[rows x cols] (row stride ldc) = or += alpha times the product of an a sliver and a b
  /// sliver over kc; the sliver's mr values of depth step p start at a + p * a_step (mr when
  /// packed). The last block of a product whose rows are not a multiple of 12
  /// computes only 4 or 8 of them (a batch of 128 rows ends in a block of 8: computing 12
  /// cost as much as a full block, 3 to 4 % of such a product).
  __attribute__((target("avx2,fma,avx512f"))) static void block(std::int64_t kc, const float* __restrict a,
                                                                 std::int64_t a_step, const float* __restrict b, float* c,
                                                                 std::int64_t ldc, bool accumulate, int rows, int cols,
                                                                 float alpha, sgemm_output_pass pass) {
    if (rows <= 4) return block_of<4>(kc, a, a_step, b, c, ldc, accumulate, rows, cols, alpha, pass);
    if (rows <= 8) return block_of<8>(kc, a, a_step, b, c, ldc, accumulate, rows, cols, alpha, pass);
    block_of<mr>(kc, a, a_step, b, c, ldc, accumulate, rows, cols, alpha, pass);
  }

  /// block() with the first M rows of the sliver (its steps a_step apart, whatever M).
  template <int M>
  __attribute__((target("avx2,fma,avx512f"))) static void block_of(std::int64_t kc, const float* __restrict a,
                                                                    std::int64_t a_step, const float* __restrict b, float* c,
                                                                    std::int64_t ldc,
                                                                    bool accumulate, int rows, int cols, float alpha,
                                                                    sgemm_output_pass pass) {
    f32x16 acc[M][2];  // zeroed by a loop: `= {}` left GCC a dead memset of the array
    for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = f32x16{};
    for (std::int64_t p = 0; p < kc; ++p, a += a_step, b += nr) {
      const f32x16 b0 = load16(b), b1 = load16(b + 16);
#if defined(__clang__)
#pragma unroll
#else
#pragma GCC unroll 12
#endif
      for (int i = 0; i < M; ++i) {
        const f32x16 t = splat16(a[i]);
        acc[i][0] = fma(t, b0, acc[i][0]);
        acc[i][1] = fma(t, b1, acc[i][1]);
      }
    }
    static_assert(nr == 32);
    if (alpha != 1.0f) {  // once per panel of up to kc_max steps: a fused update's -learning_rate
      const f32x16 s = splat16(alpha);
      for (int i = 0; i < M; ++i) acc[i][0] *= s, acc[i][1] *= s;
    }
    if (rows < M || cols < nr) return store_edge(acc, c, ldc, accumulate, rows, cols, pass);
    // A full block goes from the registers to c: the sum with c's block when accumulating,
    // then the output pass (the last panel's: bias, ReLU as a mask of the negative lanes, the
    // mask's lanes above 0), with no copy of the accumulators in memory.
    const f32x16 b0 = pass.bias ? load16(pass.bias) : f32x16{}, b1 = pass.bias ? load16(pass.bias + 16) : f32x16{};
#if defined(__clang__)
#pragma unroll
#else
#pragma GCC unroll 12
#endif
    for (int i = 0; i < M; ++i) {
      float* ci = c + i * ldc;
      f32x16 v0 = acc[i][0], v1 = acc[i][1];
      if (accumulate) v0 = load16(ci) + v0, v1 = load16(ci + 16) + v1;
      if (pass.bias) v0 += b0, v1 += b1;  // not x + 0 when there is none: -0 stays -0
      if (pass.relu) {
        v0 = (f32x16)((i32x16)v0 & ~(v0 < f32x16{}));
        v1 = (f32x16)((i32x16)v1 & ~(v1 < f32x16{}));
      }
      if (pass.mask) {
        const float* mi = pass.mask + i * pass.mask_ld;
        v0 = (f32x16)((i32x16)v0 & (load16(mi) > f32x16{}));
        v1 = (f32x16)((i32x16)v1 & (load16(mi + 16) > f32x16{}));
      }
      store16(ci, v0);
      store16(ci + 16, v1);
    }
  }

  /// An edge block (fewer than M rows or 32 columns): through a buffer, then the pass one
  /// element at a time. Out of line, so that the full block's accumulators stay in registers.
  template <int M>
  __attribute__((target("avx2,fma,avx512f"), noinline)) static void store_edge(const f32x16 (&acc)[M][2], float* c,
                                                                             std::int64_t ldc, bool accumulate, int rows,
                                                                             int cols, sgemm_output_pass pass) {
    store_rows_of_32(acc, c, ldc, accumulate, rows, cols);
    pass.apply(c, ldc, rows, cols);
  }
};

}  // namespace sgemm_detail
}  // namespace weft::cpu

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

namespace weft::cpu {
namespace sgemm_detail {

/// The AVX2 counterparts of the helpers above (this region's target is AVX2 and FMA).
__attribute__((always_inline)) inline f32x8 fma(f32x8 a, f32x8 b, f32x8 c) {
#if defined(__clang__) && __has_builtin(__builtin_elementwise_fma)
  return __builtin_elementwise_fma(a, b, c);
#else
  return __builtin_ia32_vfmaddps256(a, b, c);
#endif
}
__attribute__((always_inline)) inline f32x8 load8(const float* p) { return *reinterpret_cast<const f32x8_u*>(p); }
__attribute__((always_inline)) inline void store8(float* p, f32x8 v) { *reinterpret_cast<f32x8_u*>(p) = v; }
__attribute__((always_inline)) inline void store4(float* p, f32x4 v) { *reinterpret_cast<f32x4_u*>(p) = v; }
__attribute__((always_inline)) inline f32x8 splat8(float x) { return x - f32x8{}; }

struct avx2 {
  static constexpr int mr = 6;                  ///< rows of the register block
  static constexpr int nr = 16;                 ///< columns: two ymm registers
  static constexpr std::int64_t kc_max = 256;   ///< depth of a panel: a 16-column sliver of b is 16 KiB (L1)
  static constexpr std::int64_t nc_max = 4080;  ///< columns of b's panel: at most 4 MiB (L3)
  /// Whether claim_rows may run: Haswell has AVX2 but not PREFETCHW.
  static bool can_claim() { return has_prefetchw(); }

  /// c[rows x cols] (row stride ldc) = or += alpha times the product of an a sliver and a b
  /// sliver over kc, the sliver's step p at a + p * a_step.
  static void block(std::int64_t kc, const float* __restrict a, std::int64_t a_step, const float* __restrict b, float* c,
                    std::int64_t ldc, bool accumulate, int rows, int cols, float alpha, sgemm_output_pass pass) {
    f32x8 c00 = {}, c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    f32x8 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (std::int64_t p = 0; p < kc; ++p, a += a_step, b += nr) {
      const f32x8 b0 = load8(b), b1 = load8(b + 8);
      f32x8 t = splat8(a[0]);
      c00 = fma(t, b0, c00);
      c01 = fma(t, b1, c01);
      t = splat8(a[1]);
      c10 = fma(t, b0, c10);
      c11 = fma(t, b1, c11);
      t = splat8(a[2]);
      c20 = fma(t, b0, c20);
      c21 = fma(t, b1, c21);
      t = splat8(a[3]);
      c30 = fma(t, b0, c30);
      c31 = fma(t, b1, c31);
      t = splat8(a[4]);
      c40 = fma(t, b0, c40);
      c41 = fma(t, b1, c41);
      t = splat8(a[5]);
      c50 = fma(t, b0, c50);
      c51 = fma(t, b1, c51);
    }
    f32x8 r[2 * mr] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    if (alpha != 1.0f) {
      const f32x8 s = splat8(alpha);
      for (auto& v : r) v *= s;
    }
    if (rows == mr && cols == nr) {
      for (int i = 0; i < mr; ++i) {
        float* ci = c + i * ldc;
        if (accumulate) {
          store8(ci, load8(ci) + r[2 * i]);
          store8(ci + 8, load8(ci + 8) + r[2 * i + 1]);
        } else {
          store8(ci, r[2 * i]);
          store8(ci + 8, r[2 * i + 1]);
        }
      }
      if (!pass) return;
      const f32x8 b0 = pass.bias ? load8(pass.bias) : f32x8{}, b1 = pass.bias ? load8(pass.bias + 8) : f32x8{};
      for (int i = 0; i < mr; ++i) {
        float* ci = c + i * ldc;
        f32x8 v0 = load8(ci), v1 = load8(ci + 8);
        if (pass.bias) v0 += b0, v1 += b1;  // not x + 0 when there is none: -0 stays -0
        if (pass.relu) {
          v0 = (f32x8)((i32x8)v0 & ~(v0 < f32x8{}));
          v1 = (f32x8)((i32x8)v1 & ~(v1 < f32x8{}));
        }
        if (pass.mask) {
          const float* mi = pass.mask + i * pass.mask_ld;
          v0 = (f32x8)((i32x8)v0 & (load8(mi) > f32x8{}));
          v1 = (f32x8)((i32x8)v1 & (load8(mi + 8) > f32x8{}));
        }
        store8(ci, v0);
        store8(ci + 8, v1);
      }
      return;
    }
    alignas(32) float t[mr * nr];
    for (int i = 0; i < mr; ++i) {
      store8(t + i * nr, r[2 * i]);
      store8(t + i * nr + 8, r[2 * i + 1]);
    }
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + t[i * nr + j] : t[i * nr + j];
    pass.apply(c, ldc, rows, cols);
  }
};

inline constexpr std::int64_t mc_max = 144;  ///< rows of a's block (a multiple of mr): at most 144 KiB (L2)

/// f(avx2{}) or f(avx512{}).
template <class F>
decltype(auto) with_isa(sgemm_isa isa, F&& f) {
  if (isa == sgemm_isa::avx512) return f(avx512{});
  return f(avx2{});
}

/// Scratch for the packed operands, one per thread, grown to the largest panel it has held
/// (at most 4.2 MiB; 16 MiB for an operand packed whole for a split product), 64-byte
/// aligned.
class scratch {
 public:
  float* get(std::size_t floats) {
    if (floats > size_) {
      data_.reset();
      size_ = 0;  // a failed allocation (std::bad_alloc) leaves it empty, not claiming the old size
      data_.reset(static_cast<float*>(::operator new(floats * sizeof(float), std::align_val_t{64})));
      size_ = floats;
    }
    return data_.get();
  }

 private:
  struct release {
    void operator()(float* p) const { ::operator delete(p, std::align_val_t{64}); }
  };
  std::unique_ptr<float, release> data_;
  std::size_t size_ = 0;
};

inline scratch& thread_scratch() {
  thread_local scratch s;
  return s;
}

/// A matrix read through strides: element (i, j) at p[i * rs + j * cs].
struct strided {
  const float* p;
  std::int64_t rs, cs;
  const float* at(std::int64_t i, std::int64_t j) const { return p + i * rs + j * cs; }
};

/// Shuffles within and across the two 128-bit halves of a ymm register, for transpose8.
/// vunpcklps and vunpckhps: within each half, the low (high) two floats of x and y interleaved.
__attribute__((always_inline)) inline f32x8 unpack_lo(f32x8 x, f32x8 y) {
  return __builtin_shufflevector(x, y, 0, 8, 1, 9, 4, 12, 5, 13);
}
__attribute__((always_inline)) inline f32x8 unpack_hi(f32x8 x, f32x8 y) {
  return __builtin_shufflevector(x, y, 2, 10, 3, 11, 6, 14, 7, 15);
}
/// vshufps with 0x44 and 0xEE: within each half, the low (high) two floats of x, then of y.
__attribute__((always_inline)) inline f32x8 pairs_lo(f32x8 x, f32x8 y) {
  return __builtin_shufflevector(x, y, 0, 1, 8, 9, 4, 5, 12, 13);
}
__attribute__((always_inline)) inline f32x8 pairs_hi(f32x8 x, f32x8 y) {
  return __builtin_shufflevector(x, y, 2, 3, 10, 11, 6, 7, 14, 15);
}
/// vperm2f128 with 0x20 and 0x31: the low (high) halves of x and y.
__attribute__((always_inline)) inline f32x8 halves_lo(f32x8 x, f32x8 y) {
  return __builtin_shufflevector(x, y, 0, 1, 2, 3, 8, 9, 10, 11);
}
__attribute__((always_inline)) inline f32x8 halves_hi(f32x8 x, f32x8 y) {
  return __builtin_shufflevector(x, y, 4, 5, 6, 7, 12, 13, 14, 15);
}

/// dst[r * dst_stride + c] = src[c * src_stride + r] for an 8 x 8 block.
inline void transpose8(const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride) {
  const f32x8 r0 = load8(src), r1 = load8(src + src_stride), r2 = load8(src + 2 * src_stride);
  const f32x8 r3 = load8(src + 3 * src_stride), r4 = load8(src + 4 * src_stride), r5 = load8(src + 5 * src_stride);
  const f32x8 r6 = load8(src + 6 * src_stride), r7 = load8(src + 7 * src_stride);
  const f32x8 t0 = unpack_lo(r0, r1), t1 = unpack_hi(r0, r1), t2 = unpack_lo(r2, r3), t3 = unpack_hi(r2, r3);
  const f32x8 t4 = unpack_lo(r4, r5), t5 = unpack_hi(r4, r5), t6 = unpack_lo(r6, r7), t7 = unpack_hi(r6, r7);
  const f32x8 u0 = pairs_lo(t0, t2), u1 = pairs_hi(t0, t2), u2 = pairs_lo(t1, t3), u3 = pairs_hi(t1, t3);
  const f32x8 u4 = pairs_lo(t4, t6), u5 = pairs_hi(t4, t6), u6 = pairs_lo(t5, t7), u7 = pairs_hi(t5, t7);
  store8(dst, halves_lo(u0, u4));
  store8(dst + dst_stride, halves_lo(u1, u5));
  store8(dst + 2 * dst_stride, halves_lo(u2, u6));
  store8(dst + 3 * dst_stride, halves_lo(u3, u7));
  store8(dst + 4 * dst_stride, halves_hi(u0, u4));
  store8(dst + 5 * dst_stride, halves_hi(u1, u5));
  store8(dst + 6 * dst_stride, halves_hi(u2, u6));
  store8(dst + 7 * dst_stride, halves_hi(u3, u7));
}

/// dst[r * dst_stride + c] = src[c * src_stride + r] for 4 rows of src by 8 columns.
inline void transpose4x8(const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride) {
  const f32x8 r0 = load8(src), r1 = load8(src + src_stride), r2 = load8(src + 2 * src_stride);
  const f32x8 r3 = load8(src + 3 * src_stride);
  const f32x8 t0 = unpack_lo(r0, r1), t1 = unpack_hi(r0, r1), t2 = unpack_lo(r2, r3), t3 = unpack_hi(r2, r3);
  // u0 holds column 0 of src in its low half and column 4 in its high half, u1 columns 1 and 5...
  const f32x8 u[4] = {pairs_lo(t0, t2), pairs_hi(t0, t2), pairs_lo(t1, t3), pairs_hi(t1, t3)};
  for (int j = 0; j < 4; ++j) {
    store4(dst + j * dst_stride, __builtin_shufflevector(u[j], u[j], 0, 1, 2, 3));
    store4(dst + (j + 4) * dst_stride, __builtin_shufflevector(u[j], u[j], 4, 5, 6, 7));
  }
}

/// Rows [0, m) x depth [0, kc) of a, as slivers of mr rows: sliver s holds a(s*mr + i, p) at
/// [s*mr*kc + p*mr + i], rows past m zero.
template <class Isa>
void pack_a(std::int64_t m, std::int64_t kc, strided a, float* out) {
  constexpr int mr = Isa::mr;
  for (std::int64_t i0 = 0; i0 < m; i0 += mr) {
    const int rows = static_cast<int>(std::min<std::int64_t>(mr, m - i0));
    if (a.rs == 1 && rows == mr) {  // a transposed operand: a step's mr rows are contiguous
      for (std::int64_t p = 0; p < kc; ++p, out += mr) std::memcpy(out, a.at(i0, p), mr * sizeof(float));
      continue;
    }
    // Rows contiguous in depth: the AVX-512 block's 12 rows 8 steps at a time through
    // transposes, the rest of the depth (and the AVX2 block's 6 rows) a float at a time.
    if (a.cs == 1 && rows == mr) {
      std::int64_t p = 0;
      if constexpr (mr == 12)
        for (; p + 8 <= kc; p += 8, out += 8 * mr) {
          transpose8(a.at(i0, p), a.rs, out, mr);
          transpose4x8(a.at(i0 + 8, p), a.rs, out + 8, mr);
        }
      const float* r[mr];
      for (int i = 0; i < mr; ++i) r[i] = a.at(i0 + i, 0);
      for (; p < kc; ++p, out += mr)
        for (int i = 0; i < mr; ++i) out[i] = r[i][p];
      continue;
    }
    for (std::int64_t p = 0; p < kc; ++p, out += mr) {
      const float* col = a.at(i0, p);
      for (int i = 0; i < rows; ++i) out[i] = col[i * a.rs];
      for (int i = rows; i < mr; ++i) out[i] = 0.0f;
    }
  }
}

/// Depth [0, kc) x columns [0, n) of b, as slivers of nr columns: sliver s holds b(p, s*nr + j)
/// at [s*nr*kc + p*nr + j], columns past n zero.
template <class Isa>
void pack_b(std::int64_t kc, std::int64_t n, strided b, float* out) {
  constexpr int nr = Isa::nr;
  for (std::int64_t j0 = 0; j0 < n; j0 += nr, out += kc * nr) {
    const int cols = static_cast<int>(std::min<std::int64_t>(nr, n - j0));
    if (b.cs == 1 && cols == nr) {  // rows of b contiguous: copy nr floats a step
      for (std::int64_t p = 0; p < kc; ++p) std::memcpy(out + p * nr, b.at(p, j0), nr * sizeof(float));
    } else if (b.rs == 1 && cols == nr) {  // columns contiguous (a transposed operand): 8 x 8 transposes
      std::int64_t p = 0;
      for (; p + 8 <= kc; p += 8)
        for (int h = 0; h < nr; h += 8) transpose8(b.at(p, j0 + h), b.cs, out + p * nr + h, nr);
      for (; p < kc; ++p)
        for (int j = 0; j < nr; ++j) out[p * nr + j] = *b.at(p, j0 + j);
    } else if (b.rs == 1) {  // an edge sliver of a transposed operand: read each column once
      for (int j = 0; j < cols; ++j) {
        const float* col = b.at(0, j0 + j);
        for (std::int64_t p = 0; p < kc; ++p) out[p * nr + j] = col[p];
      }
      for (int j = cols; j < nr; ++j)
        for (std::int64_t p = 0; p < kc; ++p) out[p * nr + j] = 0.0f;
    } else {
      for (std::int64_t p = 0; p < kc; ++p) {
        for (int j = 0; j < cols; ++j) out[p * nr + j] = *b.at(p, j0 + j);
        for (int j = cols; j < nr; ++j) out[p * nr + j] = 0.0f;
      }
    }
  }
}

inline std::int64_t round_up(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

/// Depth panels of a product of depth k: `count` panels of `step` values (the last may be
/// shorter). Equal panels (784 = 4 x 196, not 3 x 256 + 16): a short last panel would load
/// and store its block of c for little work.
struct panels {
  std::int64_t count, step;
  panels(std::int64_t k, std::int64_t kc_max) : count((k + kc_max - 1) / kc_max), step((k + count - 1) / count) {}
};

/// Every depth panel of a (all m rows) or of b (all n columns, n <= nc_max), packed as the
/// loops of `product` read them: panel q at q * round_up(rows or columns, block) * step.
template <class Isa>
std::int64_t packed_size_a(std::int64_t m, std::int64_t k) {
  const panels ps(k, Isa::kc_max);
  return ps.count * round_up(m, Isa::mr) * ps.step;
}
template <class Isa>
std::int64_t packed_size_b(std::int64_t k, std::int64_t n) {
  const panels ps(k, Isa::kc_max);
  return ps.count * round_up(n, Isa::nr) * ps.step;
}
template <class Isa>
void pack_all_a(std::int64_t m, std::int64_t k, strided a, float* out) {
  const panels ps(k, Isa::kc_max);
  for (std::int64_t q = 0, pc = 0; pc < k; ++q, pc += ps.step)
    pack_a<Isa>(m, std::min(ps.step, k - pc), {a.at(0, pc), a.rs, a.cs}, out + q * round_up(m, Isa::mr) * ps.step);
}
template <class Isa>
void pack_all_b(std::int64_t k, std::int64_t n, strided b, float* out) {
  const panels ps(k, Isa::kc_max);
  for (std::int64_t q = 0, pc = 0; pc < k; ++q, pc += ps.step)
    pack_b<Isa>(std::min(ps.step, k - pc), n, {b.at(pc, 0), b.rs, b.cs}, out + q * round_up(n, Isa::nr) * ps.step);
}

/// c(m, n) = alpha * a(m, k) * b(k, n), or c += that when `accumulate`, k >= 1, c row-major
/// with row stride ldc. shared.a, when
/// given, is pack_all_a of these m rows; shared.b is pack_all_b of these n columns, or of
/// shared.b_columns from which these are the ones from shared.b_column0 on (then n <=
/// nc_max): the blocks of a product split across threads share the packed operand that all
/// of them read, and a weight's packed copy is read as it is.
template <class Isa>
void product(std::int64_t m, std::int64_t n, std::int64_t k, strided a, strided b, float* c, std::int64_t ldc,
             sgemm_shared shared = {}, float alpha = 1.0f, bool accumulate = false, sgemm_output_pass pass = {}) {
  constexpr int mr = Isa::mr, nr = Isa::nr;
  constexpr std::int64_t nc_max = Isa::nc_max;
  const panels ps(k, Isa::kc_max);
  const std::int64_t nc_cap = round_up(std::min(n, nc_max), nr);
  float* packed_b = thread_scratch().get(static_cast<std::size_t>(ps.step * (nc_cap + round_up(std::min(m, mc_max), mr))));
  float* packed_a = packed_b + ps.step * nc_cap;
  // A transposed a (a weight's gradient x^T dz) holds a sliver's mr rows of each depth step
  // next to each other, as packing would lay them out: its whole slivers are read where they
  // are, not packed (an edge sliver is: the block reads all mr rows). The MLP's 512 x 128 x
  // 512 weight gradient ran 2.5 % faster on one core, its step on two threads 1 %, and split
  // products no longer pack such an a once per thread (docs/benchmarks.md, session 60).
  const bool direct_a = !shared.a && a.rs == 1;
  for (std::int64_t jc = 0; jc < n; jc += nc_max) {
    const std::int64_t nc = std::min(nc_max, n - jc);
    for (std::int64_t q = 0, pc = 0; pc < k; ++q, pc += ps.step) {
      const std::int64_t kc = std::min(ps.step, k - pc);
      const bool last = pc + kc >= k;  // the output pass goes with the last panel's blocks
      const float* panel_b = packed_b;
      if (shared.b)
        panel_b = shared.b + q * round_up(shared.b_columns ? shared.b_columns : n, nr) * ps.step + shared.b_column0 * kc;
      else pack_b<Isa>(kc, nc, {b.at(pc, jc), b.rs, b.cs}, packed_b);
      for (std::int64_t ic = 0; ic < m; ic += mc_max) {
        const std::int64_t mc = std::min(mc_max, m - ic);
        const float* block_a = packed_a;
        if (shared.a) block_a = shared.a + q * round_up(m, mr) * ps.step + ic * kc;
        else if (!direct_a) pack_a<Isa>(mc, kc, {a.at(ic, pc), a.rs, a.cs}, packed_a);
        for (std::int64_t jr = 0; jr < nc; jr += nr) {
          const int cols = static_cast<int>(std::min<std::int64_t>(nr, nc - jr));
          for (std::int64_t ir = 0; ir < mc; ir += mr) {
            const int rows = static_cast<int>(std::min<std::int64_t>(mr, mc - ir));
            const float* sliver = block_a + ir * kc;
            std::int64_t step = mr;
            if (direct_a && rows == mr) {
              sliver = a.at(ic + ir, pc), step = a.cs;
            } else if (direct_a) {  // the edge sliver, packed once for the panel's columns
              if (jr == 0) pack_a<Isa>(rows, kc, {a.at(ic + ir, pc), a.rs, a.cs}, packed_a);
              sliver = packed_a;
            }
            float* const out = c + (ic + ir) * ldc + jc + jr;
            // A part of a split product claims its block of c before the block's first sum.
            if (pc == 0 && shared.split && cols == nr && Isa::can_claim()) claim_rows<nr>(out, ldc, rows);
            Isa::block(kc, sliver, step, panel_b + jr * kc, out, ldc, accumulate || pc > 0,
                       rows, cols, alpha, last ? pass.at(ic + ir, jc + jr) : sgemm_output_pass{});
          }
        }
      }
    }
  }
}

/// out(m, n) = alpha * op(a)(m, k) * op(b)(k, n), or out += that when `accumulate`, then
/// the output pass, as sgemm() below.
template <class Isa>
void sgemm(std::int64_t m, std::int64_t n, std::int64_t k, strided a, strided b, float* out, std::int64_t ldc,
           sgemm_shared shared, float alpha, bool accumulate, sgemm_output_pass pass) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate)
      for (std::int64_t i = 0; i < m; ++i) std::fill_n(out + i * ldc, n, 0.0f);
    return pass.apply(out, ldc, m, n);
  }
  // A product with few columns (a layer of 10 outputs) wastes most of an nr-column block;
  // its transpose out^T = op(b)^T op(a)^T has them as rows, in blocks of mr.
  if (n < Isa::nr && m > n && !shared.a && !shared.b) {
    thread_local scratch transposed;
    float* t = transposed.get(static_cast<std::size_t>(m * n));  // within: out has m * n elements
    product<Isa>(n, m, k, {b.p, b.cs, b.rs}, {a.p, a.cs, a.rs}, t, m, {}, alpha);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) out[i * ldc + j] = accumulate ? out[i * ldc + j] + t[j * m + i] : t[j * m + i];
    return pass.apply(out, ldc, m, n);
  }
  // A shared b holds one panel of columns: wider products pack b themselves.
  if (n > Isa::nc_max || (shared.b_columns && (shared.b_columns > Isa::nc_max || shared.b_column0 % Isa::nr))) shared.b = nullptr;
  product<Isa>(m, n, k, a, b, out, ldc, shared, alpha, accumulate, pass);
}

}  // namespace sgemm_detail
}  // namespace weft::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace weft::cpu {

namespace sgemm_detail {
/// sgemm<avx512> compiled whole with AVX-512's target, so that the register block is inlined
/// into the product's loops whatever the build's flags: called out of line from the AVX2
/// region (a build without -march flags), an MLP's 784 x 128 x 512 weight gradient took 771
/// us on an Emerald Rapids core where it takes 659 inlined.
__attribute__((target("avx2,fma,avx512f"), flatten)) inline void sgemm_avx512(
    std::int64_t m, std::int64_t n, std::int64_t k, strided a, strided b, float* out, std::int64_t ldc, sgemm_shared shared,
    float alpha, bool accumulate, sgemm_output_pass pass) {
  sgemm<avx512>(m, n, k, a, b, out, ldc, shared, alpha, accumulate, pass);
}
/// sgemm() with a given block.
inline void sgemm_with(sgemm_isa isa, std::int64_t m, std::int64_t n, std::int64_t k, strided a, strided b, float* out,
                       std::int64_t ldc, sgemm_shared shared, float alpha, bool accumulate,
                       sgemm_output_pass pass) {
  if (isa == sgemm_isa::avx512) return sgemm_avx512(m, n, k, a, b, out, ldc, shared, alpha, accumulate, pass);
  sgemm<avx2>(m, n, k, a, b, out, ldc, shared, alpha, accumulate, pass);
}
}  // namespace sgemm_detail

/// Whether this CPU has what an ISA's register block needs: AVX2 and FMA, and AVX-512F for
/// the AVX-512 block (checked once; __builtin_cpu_init first, so that a check from a static
/// initializer that runs before libgcc's own sees the CPU).
inline bool sgemm_supported(sgemm_isa isa) {
  static const bool avx2 = (__builtin_cpu_init(), __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
  static const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  return isa == sgemm_isa::avx512 ? avx512 : avx2;
}
/// Whether sgemm runs on this CPU (AVX2 and FMA at least).
inline bool sgemm_supported() { return sgemm_supported(sgemm_isa::avx2); }
/// The block sgemm() uses: AVX-512 where the CPU has it, else AVX2.
inline sgemm_isa sgemm_best_isa() {
  return sgemm_supported(sgemm_isa::avx512) ? sgemm_isa::avx512 : sgemm_isa::avx2;
}

/// Floats that sgemm_pack_a of m x k (or sgemm_pack_b of k x n) writes.
inline std::int64_t sgemm_packed_size_a(std::int64_t m, std::int64_t k) {
  return sgemm_detail::with_isa(sgemm_best_isa(), [&]<class Isa>(Isa) { return sgemm_detail::packed_size_a<Isa>(m, k); });
}
inline std::int64_t sgemm_packed_size_b(std::int64_t k, std::int64_t n) {
  return sgemm_detail::with_isa(sgemm_best_isa(), [&]<class Isa>(Isa) { return sgemm_detail::packed_size_b<Isa>(k, n); });
}
/// Packs op(a)(m, k) (a(i, p) at a[i * rs + p * cs]), or op(b)(k, n) with n <=
/// sgemm_max_shared_columns, into `out` (64-byte aligned), k >= 1, for sgemm_shared.
inline void sgemm_pack_a(std::int64_t m, std::int64_t k, const float* a, std::int64_t rs, std::int64_t cs, float* out) {
  sgemm_detail::with_isa(sgemm_best_isa(), [&]<class Isa>(Isa) { sgemm_detail::pack_all_a<Isa>(m, k, {a, rs, cs}, out); });
}
inline void sgemm_pack_b(std::int64_t k, std::int64_t n, const float* b, std::int64_t rs, std::int64_t cs, float* out) {
  sgemm_detail::with_isa(sgemm_best_isa(), [&]<class Isa>(Isa) { sgemm_detail::pack_all_b<Isa>(k, n, {b, rs, cs}, out); });
}
/// The widest b that one packed panel holds with either block.
inline constexpr std::int64_t sgemm_max_shared_columns = std::min(sgemm_detail::avx2::nc_max, sgemm_detail::avx512::nc_max);

/// Packing one operand of a split product for all of its blocks, by whichever threads run
/// the blocks: each thread that starts a block first calls help(), which packs chunks (a
/// group of slivers of one depth panel) until none is left unclaimed, then waits for the
/// chunks other threads are still packing. A lone thread packs it all; a second one that
/// arrives in time halves the work, with no extra hand-over through the pool. Every claimed
/// chunk is being packed by a running thread, so the wait ends.
class sgemm_shared_packing {
 public:
  enum class operand { a, b };
  /// operand::a: op(a)(m, k) with `extent` = m, element (i, p) at src[i * rs + p * cs], packed
  /// as sgemm_pack_a packs it into `out`; operand::b: op(b)(k, n) with `extent` = n <=
  /// sgemm_max_shared_columns, element (p, j) at src[p * rs + j * cs], as sgemm_pack_b.
  sgemm_shared_packing(operand which, std::int64_t extent, std::int64_t k, const float* src, std::int64_t rs,
                       std::int64_t cs, float* out)
      : is_a_(which == operand::a), isa_(sgemm_best_isa()), extent_(extent), k_(k),
        sliver_(sgemm_detail::with_isa(isa_, [&]<class Isa>(Isa) { return is_a_ ? Isa::mr : Isa::nr; })),
        panels_(k, sgemm_detail::with_isa(isa_, []<class Isa>(Isa) { return Isa::kc_max; })), src_{src, rs, cs}, out_(out) {
    // Chunks of about 8192 floats (32 KiB): 16 for an MLP's 128 x 784 operand.
    const std::int64_t slivers = (extent_ + sliver_ - 1) / sliver_;
    group_ = std::clamp<std::int64_t>(8192 / (sliver_ * panels_.step), 1, slivers);
    groups_ = (slivers + group_ - 1) / group_;
    chunks_ = groups_ * panels_.count;
  }
  sgemm_shared_packing(const sgemm_shared_packing&) = delete;
  sgemm_shared_packing& operator=(const sgemm_shared_packing&) = delete;

  void help() {
    namespace d = sgemm_detail;
    for (std::int64_t c; (c = next_.fetch_add(1, std::memory_order_relaxed)) < chunks_;) {
      const std::int64_t q = c / groups_, g = c % groups_, pc = q * panels_.step;
      const std::int64_t kc = std::min(panels_.step, k_ - pc);
      const std::int64_t lo = g * group_ * sliver_, hi = std::min(extent_, (g + 1) * group_ * sliver_);
      float* dst = out_ + q * d::round_up(extent_, sliver_) * panels_.step + lo * kc;
      d::with_isa(isa_, [&]<class Isa>(Isa) {
        if (is_a_) d::pack_a<Isa>(hi - lo, kc, {src_.at(lo, pc), src_.rs, src_.cs}, dst);
        else d::pack_b<Isa>(kc, hi - lo, {src_.at(pc, lo), src_.rs, src_.cs}, dst);
      });
      done_.fetch_add(1, std::memory_order_release);
    }
    // Spin briefly, then give the core away: on a busy machine the packer may be waiting for it.
    for (int spins = 0; done_.load(std::memory_order_acquire) < chunks_; ++spins) {
      if (spins < 4096) __builtin_ia32_pause();
      else std::this_thread::yield();
    }
  }

 private:
  bool is_a_;
  sgemm_isa isa_;  ///< the block whose packing this is: sgemm_best_isa(), as sgemm() uses
  std::int64_t extent_, k_, sliver_;  ///< rows of a or columns of b; depth; rows or columns a sliver holds
  sgemm_detail::panels panels_;
  sgemm_detail::strided src_;
  float* out_;
  std::int64_t group_ = 1, groups_ = 1, chunks_ = 1;  ///< slivers a chunk holds, chunks a panel holds, all chunks
  std::atomic<std::int64_t> next_{0}, done_{0};
};

/// A per-thread buffer for the packed operand of sgemm_shared, kept for the next product.
inline float* sgemm_shared_buffer(std::int64_t floats) {
  thread_local sgemm_detail::scratch buffer;
  return buffer.get(static_cast<std::size_t>(floats));
}

/// Packing one operand of a split product whole by each thread that runs its blocks, into
/// a buffer of that thread's own, before the thread's first block (get()): every thread
/// repeats the packing, but reads only what its own core wrote. Where the parts are wide,
/// that beats sharing one packed copy: on a 2-core AMD EPYC (Zen 5), whose two cores pass a
/// cache line back and forth in about 0.5 us, a 128 x 784 x 128 product split in two took
/// 86 us with a copy per thread and 122 with a shared one, a 128 x 784 x 512 one 381 and 414
/// (docs/benchmarks.md, session 58), and packing the 128 x 784 operand takes 15 us alone.
/// The buffer is the thread's own (not sgemm_shared_buffer's) and kept for its next product.
class sgemm_private_packing {
 public:
  using operand = sgemm_shared_packing::operand;
  /// The operand as sgemm_shared_packing takes it.
  sgemm_private_packing(operand which, std::int64_t extent, std::int64_t k, const float* src, std::int64_t rs,
                        std::int64_t cs)
      : is_a_(which == operand::a), extent_(extent), k_(k), src_(src), rs_(rs), cs_(cs),
        id_(next_id().fetch_add(1, std::memory_order_relaxed) + 1) {}
  sgemm_private_packing(const sgemm_private_packing&) = delete;
  sgemm_private_packing& operator=(const sgemm_private_packing&) = delete;

  /// The calling thread's packed copy, packed on its first call for this product.
  const float* get() const {
    thread_local sgemm_detail::scratch buffer;
    thread_local std::uint64_t packed = 0;  ///< the id of the product whose operand it holds
    const std::int64_t floats = is_a_ ? sgemm_packed_size_a(extent_, k_) : sgemm_packed_size_b(k_, extent_);
    float* data = buffer.get(static_cast<std::size_t>(floats));
    if (packed != id_) {
      packed = 0;  // while it is packed (a throw leaves it marked as holding nothing)
      if (is_a_) sgemm_pack_a(extent_, k_, src_, rs_, cs_, data);
      else sgemm_pack_b(k_, extent_, src_, rs_, cs_, data);
      packed = id_;
    }
    return data;
  }

 private:
  /// Ids of products: unique within the process (64 bits do not wrap).
  static std::atomic<std::uint64_t>& next_id() {
    static std::atomic<std::uint64_t> id{0};
    return id;
  }
  bool is_a_;
  std::int64_t extent_, k_;
  const float* src_;
  std::int64_t rs_, cs_;
  std::uint64_t id_;
};

/// out(m, n) = alpha * op(a)(m, k) * op(b)(k, n) into a row-major out with row stride ldc, or
/// out += that when `accumulate` (then out is read, not overwritten: a weight's update
/// w -= rate * x^T dz is one product, with alpha = -rate); a(i, p) is at a[i * a_rs + p * a_cs]
/// and b(p, j) at b[p * b_rs + j * b_cs] (a transposed operand is the same memory with its
/// strides swapped). k == 0 writes zeros, or leaves out as it is when accumulating. `shared`
/// replaces the packing of a or b by an operand packed before (by sgemm_pack_a or
/// sgemm_pack_b, which pack for sgemm_best_isa(), the block this overload uses). alpha scales
/// each depth panel's block once, before it is stored: alpha = 1 gives the plain product,
/// bit for bit. `pass` (a bias, ReLU) is applied to each block of the output after its last
/// depth panel (sgemm_output_pass).
inline void sgemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_rs, std::int64_t a_cs,
                  const float* b, std::int64_t b_rs, std::int64_t b_cs, float* out, std::int64_t ldc, sgemm_shared shared = {},
                  float alpha = 1.0f, bool accumulate = false, sgemm_output_pass pass = {}) {
  sgemm_detail::sgemm_with(sgemm_best_isa(), m, n, k, {a, a_rs, a_cs}, {b, b_rs, b_cs}, out, ldc, shared, alpha,
                           accumulate, pass);
}
/// The same with a given block, which the CPU must have (sgemm_supported(isa)); no shared
/// operand, as the packed layout depends on the block.
inline void sgemm(sgemm_isa isa, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_rs,
                  std::int64_t a_cs, const float* b, std::int64_t b_rs, std::int64_t b_cs, float* out, std::int64_t ldc,
                  float alpha = 1.0f, bool accumulate = false, sgemm_output_pass pass = {}) {
  sgemm_detail::sgemm_with(isa, m, n, k, {a, a_rs, a_cs}, {b, b_rs, b_cs}, out, ldc, {}, alpha, accumulate, pass);
}

}  // namespace weft::cpu

#endif
