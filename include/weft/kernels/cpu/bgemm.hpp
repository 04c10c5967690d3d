/// @file
/// weft's bfloat16 GEMM for x86-64 CPUs with AVX-512 BF16 (AMD Zen 4 and later, Intel Cooper
/// Lake and Sapphire Rapids), chosen at run time like sgemm.hpp's blocks: out (float) =
/// op(a) * op(b) with a and b in bfloat16. vdpbf16ps multiplies pairs of bfloat16 values
/// exactly and adds both products to a float accumulator, so one instruction does the work of
/// two float FMAs: a 12 x 32 register block (24 zmm accumulators) over depth panels of up to
/// 256 values, taken two at a time.
///
/// The structure is sgemm's (BLIS's): b's depth panel is packed into slivers of 32 columns,
/// a's rows into slivers of 12 rows per block of 144, each holding the depth in pairs (a pair
/// of bfloat16 values of one row or column, at depths 2q and 2q + 1, is the 32-bit lane that
/// vdpbf16ps reads); an odd depth is padded with a zero. Like every AVX-512 BF16 unit, the
/// instruction treats denormal inputs as zero, rounds each pair's sum to nearest even and
/// flushes a denormal result to zero, whatever MXCSR says (TensorFlow's oneDNN path computes
/// the same way).
///
/// vdpbf16ps is written as inline assembly: the compilers' builtins for it take vectors of
/// different element types in each GCC and Clang version, and <immintrin.h> is kept out of
/// the library (tools/check_layers.py). Define WEFT_NO_OWN_SGEMM to leave this GEMM out too.
#pragma once

#include <cmath>
#include <cstdint>

#include <weft/kernels/cpu/convert.hpp>
#include <weft/kernels/cpu/sgemm.hpp>

namespace weft::cpu {
struct bgemm_sink;
/// A bfloat16 product's output pass: what becomes of each element's float sum s, once
/// complete, when the result is bfloat16 (a bfloat16 MatMul, and the ops a session folds into
/// one, graph/passes/fuse_matmul.hpp). out(i, j) = bf16(s + bias[j]), then max(x, 0) where
/// `relu` (a NaN stays NaN), then 0 wherever `mask` (the output's shape, row stride mask_ld)
/// is not above 0 (NaN included); or, where `update`, out(i, j) = bf16(out(i, j) + alpha * s)
/// with one rounding of the float sum (a gradient-descent step into a bfloat16 variable,
/// alpha = -learning rate). bf16() rounds to the nearest even, NaN to the quiet NaN of its
/// sign, as every float-to-bfloat16 conversion in weft (convert.hpp). The sum is rounded once,
/// where the unfused ops round the product, then each op's result. Values are bfloat16 bits.
/// Or, where `sink` is set, each block's complete float sums go to it unrounded (and `out` is
/// not used): a fused optimizer step on float32 state (a MatMul's gradient of bfloat16
/// operands into Adam's update of a float32 weight, training.hpp).
struct bgemm_output {
  std::uint16_t* out = nullptr;         ///< the result (row stride ld)
  std::int64_t ld = 0;                  ///< the result's row stride
  const std::uint16_t* bias = nullptr;  ///< one value per output column, or null
  bool relu = false;                    ///< max(x, 0) after the bias
  const std::uint16_t* mask = nullptr;  ///< keeps out(i, j) where mask[i * mask_ld + j] > 0, or null
  std::int64_t mask_ld = 0;             ///< the mask's row stride
  bool update = false;                  ///< out += alpha * s instead of the above
  float alpha = 1.0f;                   ///< the sum's factor where `update`
  const bgemm_sink* sink = nullptr;     ///< takes the float sums instead of all the above, or null
  std::int64_t row = 0;                 ///< the first row of this pass's block in the whole result (for the sink)
  std::int64_t column = 0;              ///< its first column
  /// Whether the product has an output pass (a bfloat16 result or a sink).
  bool active() const noexcept { return out || sink; }
  /// The same pass for the block of the output from (row, column) on (a part of a split
  /// product, a register block).
  bgemm_output at(std::int64_t r, std::int64_t c) const noexcept {
    return {out ? out + r * ld + c : nullptr, ld, bias ? bias + c : nullptr, relu,
            mask ? mask + r * mask_ld + c : nullptr, mask_ld, update, alpha, sink, row + r, column + c};
  }
  /// The pass over rows x cols of complete float sums (row stride lds).
  void apply(const float* sums, std::int64_t lds, std::int64_t rows, std::int64_t cols) const;
  /// out(i, j) from the element's complete float sum s, one element at a time.
  void put(float s, std::int64_t i, std::int64_t j) const {
    if (sink) return at(i, j).apply(&s, 1, 1, 1);
    std::uint16_t& o = out[i * ld + j];
    if (update) {
      o = detail::bfloat16_bits(std::fma(alpha, s, detail::bfloat16_value(o)));
      return;
    }
    if (bias) s += detail::bfloat16_value(bias[j]);
    if (relu && s < 0.0f) s = 0.0f;
    if (mask && !(detail::bfloat16_value(mask[i * mask_ld + j]) > 0.0f)) s = 0.0f;
    o = detail::bfloat16_bits(s);
  }
};

/// What takes a bfloat16 product's complete float sums (bgemm_output::sink), a block at a
/// time: the block of rows x cols from (row, column) of the whole result, row stride lds.
/// Blocks do not overlap, each element comes once, and split parts call it from their
/// threads at once.
struct bgemm_sink {
  /// Takes one block's sums.
  virtual void take(const float* sums, std::int64_t lds, std::int64_t row, std::int64_t column, std::int64_t rows,
                    std::int64_t cols) const = 0;
 protected:
  ~bgemm_sink() = default;
};

inline void bgemm_output::apply(const float* sums, std::int64_t lds, std::int64_t rows, std::int64_t cols) const {
  if (sink) return sink->take(sums, lds, row, column, rows, cols);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) put(sums[i * lds + j], i, j);
}
}  // namespace weft::cpu

#ifdef WEFT_OWN_SGEMM

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace weft::cpu {

namespace bgemm_detail {

using sgemm_detail::f32x16;
using sgemm_detail::panels;
using sgemm_detail::round_up;
using sgemm_detail::scratch;
typedef std::uint32_t u32x16 __attribute__((vector_size(64)));
typedef std::uint32_t u32x16_u __attribute__((vector_size(64), aligned(2), may_alias));
typedef std::uint16_t u16x32_u __attribute__((vector_size(64), aligned(2), may_alias));
typedef std::uint16_t u16x32 __attribute__((vector_size(64)));
typedef std::uint16_t u16x16 __attribute__((vector_size(32)));
typedef std::uint16_t u16x8 __attribute__((vector_size(16)));
typedef std::uint16_t u16x16_u __attribute__((vector_size(32), aligned(2), may_alias));
using sgemm_detail::i32x16;

/// A matrix of bfloat16 bits read through strides: element (i, j) at p[i * rs + j * cs].
struct strided {
  const std::uint16_t* p;
  std::int64_t rs, cs;
  std::uint16_t at(std::int64_t i, std::int64_t j) const { return p[i * rs + j * cs]; }
  const std::uint16_t* ptr(std::int64_t i, std::int64_t j) const { return p + i * rs + j * cs; }
};

inline constexpr int mr = 12;                  ///< rows of the register block
inline constexpr int nr = 32;                  ///< columns: two zmm registers of 16 pairs
inline constexpr std::int64_t kc_max = 256;    ///< depth of a panel: a 32-column sliver of b is 16 KiB (L1)
inline constexpr std::int64_t mc_max = 144;    ///< rows of a's block: 72 KiB packed (L2)
inline constexpr std::int64_t nc_max = 4096;   ///< columns of b's panel: at most 2 MiB packed (L3)

/// Two bfloat16 values as one 32-bit lane: `lo` at depth 2q, `hi` at 2q + 1.
inline std::uint32_t pair(std::uint16_t lo, std::uint16_t hi) {
  return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
}

/// acc plus the pairwise products of a and b, summed per lane (vdpbf16ps). By value: with
/// the accumulator passed by reference, GCC kept the block's accumulators in memory.
__attribute__((target("avx512f,avx512bf16"), always_inline)) inline f32x16 dot_pairs(f32x16 acc, u32x16 a, u32x16 b) {
  asm("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

/// 16 bfloat16 values at p, as floats.
__attribute__((target("avx2,fma,avx512f,avx512bw"), always_inline)) inline f32x16 widen16(const std::uint16_t* p) {
  const u16x16 h = *reinterpret_cast<const u16x16_u*>(p);
  return (f32x16)(__builtin_convertvector(h, u32x16) << 16);
}
/// v rounded to bfloat16 lane by lane (detail::bfloat16_bits: ties to even, NaN quiet), at p.
__attribute__((target("avx2,fma,avx512f,avx512bw"), always_inline)) inline void narrow16(std::uint16_t* p, f32x16 v) {
  const u32x16 u = (u32x16)v;
  const u32x16 rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const u32x16 nan = ((u >> 16) & 0x8000u) | 0x7FC0u;
  const u32x16 is_nan = (u32x16)((u & 0x7FFFFFFFu) > 0x7F800000u);
  *reinterpret_cast<u16x16_u*>(p) = __builtin_convertvector((rounded & ~is_nan) | (nan & is_nan), u16x16);
}

/// An edge block's bfloat16 result (fewer than M rows or nr columns), or a block's sums for a
/// sink: the sums through a buffer, with c's earlier panels' where `accumulate`, then the pass
/// (one element at a time, or the sink's take). Out of line, so that the full block's
/// accumulators stay in registers.
template <int M>
__attribute__((target("avx2,fma,avx512f"), noinline)) inline void store_edge(const f32x16 (&acc)[M][2], const float* c,
                                                                           std::int64_t ldc, bool accumulate, int rows,
                                                                           int cols, const bgemm_output& pass) {
  alignas(64) float t[M * nr];
  for (int i = 0; i < M; ++i) {
    sgemm_detail::store16(t + i * nr, acc[i][0]);
    sgemm_detail::store16(t + i * nr + 16, acc[i][1]);
  }
  if (accumulate)
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) t[i * nr + j] = c[i * ldc + j] + t[i * nr + j];
  pass.apply(t, nr, rows, cols);
}

/// The product of the first M rows of an a sliver (its depth pairs mr words apart) and a b
/// sliver over `pairs` depth pairs, for c[rows x cols] (row stride ldc): c = or += it where
/// the pass is not active; else (the last depth panel of a bfloat16 result or of a sink's
/// sums) the sum, with c's earlier panels' where `accumulate`, goes through the pass to
/// pass.out from the registers (a block of M rows and nr columns) or a buffer (an edge block,
/// or any block for a sink).
template <int M>
__attribute__((target("avx2,fma,avx512f,avx512bw,avx512bf16"))) inline void block_of(std::int64_t pairs,
                                                                                   const std::uint32_t* __restrict a,
                                                                                   const std::uint32_t* __restrict b, float* c,
                                                                                   std::int64_t ldc, bool accumulate, int rows,
                                                                                   int cols, bgemm_output pass) {
  f32x16 acc[M][2];
  for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = f32x16{};
  for (std::int64_t q = 0; q < pairs; ++q, a += mr, b += nr) {
    u32x16 b0, b1;
    std::memcpy(&b0, b, sizeof b0);
    std::memcpy(&b1, b + 16, sizeof b1);
#if defined(__clang__)
#pragma unroll
#else
#pragma GCC unroll 12
#endif
    for (int i = 0; i < M; ++i) {
      const u32x16 t = a[i] + u32x16{};  // the pair in every lane (vpbroadcastd)
      acc[i][0] = dot_pairs(acc[i][0], t, b0);
      acc[i][1] = dot_pairs(acc[i][1], t, b1);
    }
  }
  static_assert(nr == 32);
  if (!pass.active()) return sgemm_detail::store_rows_of_32(acc, c, ldc, accumulate, rows, cols);
  if (rows < M || cols < nr || pass.sink) return store_edge(acc, c, ldc, accumulate, rows, cols, pass);
  using sgemm_detail::load16;
  const f32x16 alpha = sgemm_detail::splat16(pass.alpha);
  const f32x16 b0 = pass.bias ? widen16(pass.bias) : f32x16{}, b1 = pass.bias ? widen16(pass.bias + 16) : f32x16{};
#if defined(__clang__)
#pragma unroll
#else
#pragma GCC unroll 12
#endif
  for (int i = 0; i < M; ++i) {
    std::uint16_t* o = pass.out + i * pass.ld;
    f32x16 v0 = acc[i][0], v1 = acc[i][1];
    if (accumulate) v0 = load16(c + i * ldc) + v0, v1 = load16(c + i * ldc + 16) + v1;
    if (pass.update) {
      v0 = sgemm_detail::fma(alpha, v0, widen16(o));
      v1 = sgemm_detail::fma(alpha, v1, widen16(o + 16));
    } else {
      if (pass.bias) v0 += b0, v1 += b1;  // not x + 0 when there is none: -0 stays -0
      if (pass.relu) {
        v0 = (f32x16)((i32x16)v0 & ~(v0 < f32x16{}));
        v1 = (f32x16)((i32x16)v1 & ~(v1 < f32x16{}));
      }
      if (pass.mask) {
        const std::uint16_t* mi = pass.mask + i * pass.mask_ld;
        v0 = (f32x16)((i32x16)v0 & (widen16(mi) > f32x16{}));
        v1 = (f32x16)((i32x16)v1 & (widen16(mi + 16) > f32x16{}));
      }
    }
    narrow16(o, v0);
    narrow16(o + 16, v1);
  }
}

/// block_of() with the fewest rows that hold `rows` (4, 8 or mr): a batch of 128 rows ends
/// in a block of 8, whose output pass then runs from the registers (it went through
/// store_edge one element at a time) and whose sums skip 4 rows of padding, as sgemm's.
__attribute__((target("avx2,fma,avx512f,avx512bw,avx512bf16"))) inline void block(std::int64_t pairs,
                                                                                const std::uint32_t* __restrict a,
                                                                                const std::uint32_t* __restrict b, float* c,
                                                                                std::int64_t ldc, bool accumulate, int rows,
                                                                                int cols, const bgemm_output& pass) {
  if (rows <= 4) return block_of<4>(pairs, a, b, c, ldc, accumulate, rows, cols, pass);
  if (rows <= 8) return block_of<8>(pairs, a, b, c, ldc, accumulate, rows, cols, pass);
  block_of<mr>(pairs, a, b, c, ldc, accumulate, rows, cols, pass);
}

/// 16 words at p, read at any 2-byte alignment (16 depth pairs of a row of bfloat16 values).
__attribute__((target("avx2,fma,avx512f,avx512bw"), always_inline)) inline u32x16 load_pairs(const std::uint16_t* p) {
  return *reinterpret_cast<const u32x16_u*>(p);
}
/// One step of transpose16: for each row pair (i, i + S) with (i & S) == 0, swaps the blocks
/// r[i][j + S] and r[i + S][j], (j & S) == 0.
template <int S>
__attribute__((target("avx2,fma,avx512f,avx512bw"), always_inline)) inline void swap_blocks(u32x16 (&r)[16]) {
  for (int i = 0; i < 16; ++i) {
    if (i & S) continue;
    const u32x16 a = r[i], b = r[i + S];
    if constexpr (S == 8) {
      r[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
      r[i + S] = __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    } else if constexpr (S == 4) {
      r[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
      r[i + S] = __builtin_shufflevector(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    } else if constexpr (S == 2) {
      r[i] = __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
      r[i + S] = __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    } else {
      r[i] = __builtin_shufflevector(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
      r[i + S] = __builtin_shufflevector(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
    }
  }
}
/// A 16 x 16 matrix of words, one row a vector, transposed in place: the off-diagonal blocks
/// of 8, then 4, 2 and 1 swapped (64 two-source shuffles).
__attribute__((target("avx2,fma,avx512f,avx512bw"), always_inline)) inline void transpose16(u32x16 (&r)[16]) {
  swap_blocks<8>(r);
  swap_blocks<4>(r);
  swap_blocks<2>(r);
  swap_blocks<1>(r);
}

/// Rows [0, m) x depth [0, kc) of a as slivers of mr rows in depth pairs: sliver s holds the
/// pair of row s*mr + i at depth pair q at [s*mr*pairs + q*mr + i]; rows past m and the
/// depth past kc zero.
__attribute__((target("avx2,fma,avx512f,avx512bw"))) inline void pack_a(std::int64_t m, std::int64_t kc, strided a,
                                                                      std::uint32_t* out) {
  const std::int64_t full = kc / 2, pairs = (kc + 1) / 2;
  for (std::int64_t i0 = 0; i0 < m; i0 += mr, out += mr * pairs) {
    const int rows = static_cast<int>(std::min<std::int64_t>(mr, m - i0));
    if (a.rs == 1 && rows == mr && i0 + 16 <= m) {
      // A transposed a (a weight gradient's x^T): the sliver's rows are contiguous at each
      // depth; two depths' 12 rows interleave into the sliver's pairs (16 read, 12 kept).
      for (std::int64_t q = 0; q < full; ++q) {
        const u16x16 r0 = *reinterpret_cast<const u16x16_u*>(a.ptr(i0, 2 * q));
        const u16x16 r1 = *reinterpret_cast<const u16x16_u*>(a.ptr(i0, 2 * q + 1));
        const u16x16 lo = __builtin_shufflevector(r0, r1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const u16x8 hi = __builtin_shufflevector(r0, r1, 8, 24, 9, 25, 10, 26, 11, 27);
        std::memcpy(out + q * mr, &lo, sizeof lo);
        std::memcpy(out + q * mr + 8, &hi, sizeof hi);
      }
      if (pairs > full)
        for (int i = 0; i < mr; ++i) out[full * mr + i] = pair(a.at(i0 + i, kc - 1), 0);
      continue;
    }
    std::int64_t q0 = 0;  // depth pairs packed before the loop below
    if (a.cs == 1 && rows == mr) {
      // Rows of a contiguous in depth: each row's pairs are words; 16 pairs of the 12 rows at
      // a time, transposed as a 16 x 16 block (its last 4 rows zero).
      for (; q0 + 16 <= full; q0 += 16) {
        u32x16 r[16];
        for (int i = 0; i < 16; ++i) r[i] = i < mr ? load_pairs(a.ptr(i0 + i, 2 * q0)) : u32x16{};
        transpose16(r);
        for (int t = 0; t < 16; ++t) std::memcpy(out + (q0 + t) * mr, &r[t], mr * sizeof(std::uint32_t));
      }
    }
    for (int i = 0; i < rows; ++i) {
      if (a.cs == 1) {  // the row's depth contiguous: its pairs are 32-bit words
        const std::uint16_t* r = a.ptr(i0 + i, 0);
        for (std::int64_t q = q0; q < full; ++q) {
          std::uint32_t w;
          std::memcpy(&w, r + 2 * q, sizeof w);
          out[q * mr + i] = w;
        }
      } else {
        for (std::int64_t q = 0; q < full; ++q) out[q * mr + i] = pair(a.at(i0 + i, 2 * q), a.at(i0 + i, 2 * q + 1));
      }
      if (pairs > full) out[full * mr + i] = pair(a.at(i0 + i, kc - 1), 0);
    }
    for (std::int64_t q = 0; q < pairs; ++q)
      for (int i = rows; i < mr; ++i) out[q * mr + i] = 0;
  }
}

/// Depth [0, kc) x columns [0, n) of b as slivers of nr columns in depth pairs: sliver s
/// holds the pair of column s*nr + j at depth pair q at [s*nr*pairs + q*nr + j]; columns past
/// n and the depth past kc zero.
__attribute__((target("avx2,fma,avx512f,avx512bw"))) inline void pack_b(std::int64_t kc, std::int64_t n, strided b,
                                                                      std::uint32_t* out) {
  const std::int64_t full = kc / 2, pairs = (kc + 1) / 2;
  for (std::int64_t j0 = 0; j0 < n; j0 += nr, out += nr * pairs) {
    const int cols = static_cast<int>(std::min<std::int64_t>(nr, n - j0));
    if (b.cs == 1 && cols == nr) {  // rows of b contiguous: interleave two rows of 32 (vpermt2w)
      for (std::int64_t q = 0; q < full; ++q) {
        const u16x32 r0 = *reinterpret_cast<const u16x32_u*>(b.ptr(2 * q, j0));
        const u16x32 r1 = *reinterpret_cast<const u16x32_u*>(b.ptr(2 * q + 1, j0));
        const u16x32 lo = __builtin_shufflevector(r0, r1, 0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39, 8, 40, 9,
                                                  41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47);
        const u16x32 hi = __builtin_shufflevector(r0, r1, 16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                                  24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63);
        std::memcpy(out + q * nr, &lo, sizeof lo);
        std::memcpy(out + q * nr + 16, &hi, sizeof hi);
      }
    } else if (b.rs == 1) {  // columns of b contiguous in depth (a transposed operand): pairs are words
      std::int64_t q0 = 0;  // 16 pairs of 16 columns at a time, transposed as a 16 x 16 block
      if (cols == nr)
        for (; q0 + 16 <= full; q0 += 16)
          for (int half = 0; half < nr; half += 16) {
            u32x16 r[16];
            for (int t = 0; t < 16; ++t) r[t] = load_pairs(b.ptr(2 * q0, j0 + half + t));
            transpose16(r);
            for (int t = 0; t < 16; ++t) std::memcpy(out + (q0 + t) * nr + half, &r[t], sizeof r[t]);
          }
      for (int j = 0; j < cols; ++j) {
        const std::uint16_t* col = b.ptr(0, j0 + j);
        for (std::int64_t q = q0; q < full; ++q) {
          std::uint32_t w;
          std::memcpy(&w, col + 2 * q, sizeof w);
          out[q * nr + j] = w;
        }
      }
    } else {
      for (std::int64_t q = 0; q < full; ++q)
        for (int j = 0; j < cols; ++j) out[q * nr + j] = pair(b.at(2 * q, j0 + j), b.at(2 * q + 1, j0 + j));
    }
    if (pairs > full)
      for (int j = 0; j < cols; ++j) out[full * nr + j] = pair(b.at(kc - 1, j0 + j), 0);
    for (std::int64_t q = 0; q < pairs; ++q)
      for (int j = cols; j < nr; ++j) out[q * nr + j] = 0;
  }
}

/// Depth panels of an even number of values (the last may be shorter, and odd).
inline panels even_panels(std::int64_t k) {
  panels ps(k, kc_max);
  ps.step = round_up(ps.step, 2);
  ps.count = (k + ps.step - 1) / ps.step;
  return ps;
}

/// c(m, n) = a(m, k) * b(k, n), m, n, k >= 1, c row-major with row stride ldc, or, where
/// the pass is active, the result through the pass (c then holds the sums of the depth
/// panels before the last, and may be null where there is one panel); `split`: a thread's
/// part of a split product, whose blocks claim their rows of the result first (as sgemm's).
inline void product(std::int64_t m, std::int64_t n, std::int64_t k, strided a, strided b, float* c, std::int64_t ldc,
                    bool split, const bgemm_output& pass = {}) {
  const panels ps = even_panels(k);
  const std::int64_t step_pairs = ps.step / 2;
  const std::int64_t nc_cap = round_up(std::min(n, nc_max), nr), mc_cap = round_up(std::min(m, mc_max), mr);
  // 32-bit words, in sgemm's per-thread scratch (floats of the same size).
  float* buffer = sgemm_detail::thread_scratch().get(static_cast<std::size_t>(step_pairs * (nc_cap + mc_cap)));
  auto* packed_b = reinterpret_cast<std::uint32_t*>(buffer);
  std::uint32_t* packed_a = packed_b + step_pairs * nc_cap;
  for (std::int64_t jc = 0; jc < n; jc += nc_max) {
    const std::int64_t nc = std::min(nc_max, n - jc);
    for (std::int64_t pc = 0; pc < k; pc += ps.step) {
      const std::int64_t kc = std::min(ps.step, k - pc), pairs = (kc + 1) / 2;
      const bool last = pc + kc >= k;  // the bfloat16 pass goes with the last panel's blocks
      pack_b(kc, nc, {b.ptr(pc, jc), b.rs, b.cs}, packed_b);
      for (std::int64_t ic = 0; ic < m; ic += mc_max) {
        const std::int64_t mc = std::min(mc_max, m - ic);
        pack_a(mc, kc, {a.ptr(ic, pc), a.rs, a.cs}, packed_a);
        if (last && pass.sink) {
          // A sink's blocks go along each strip of 12 rows, so that what it updates (Adam's
          // weight and moments) is read and written row by row in order, not 12 x 32 blocks
          // down a column of blocks.
          for (std::int64_t ir = 0; ir < mc; ir += mr) {
            const int rows = static_cast<int>(std::min<std::int64_t>(mr, mc - ir));
            for (std::int64_t jr = 0; jr < nc; jr += nr) {
              const int cols = static_cast<int>(std::min<std::int64_t>(nr, nc - jr));
              block(pairs, packed_a + ir * pairs, packed_b + jr * pairs, c ? c + (ic + ir) * ldc + jc + jr : nullptr, ldc,
                    pc > 0, rows, cols, pass.at(ic + ir, jc + jr));
            }
          }
          continue;
        }
        for (std::int64_t jr = 0; jr < nc; jr += nr) {
          const int cols = static_cast<int>(std::min<std::int64_t>(nr, nc - jr));
          for (std::int64_t ir = 0; ir < mc; ir += mr) {
            const int rows = static_cast<int>(std::min<std::int64_t>(mr, mc - ir));
            float* const out = c ? c + (ic + ir) * ldc + jc + jr : nullptr;
            const bgemm_output at = last && pass.active() ? pass.at(ic + ir, jc + jr) : bgemm_output{};
            // As sgemm's product(): the block's lines of the result, claimed before its sums.
            if (split && cols == nr && at.out) sgemm_detail::claim_rows<nr>(at.out, at.ld, rows);
            else if (split && cols == nr && pc == 0 && !pass.active()) sgemm_detail::claim_rows<nr>(out, ldc, rows);
            block(pairs, packed_a + ir * pairs, packed_b + jr * pairs, out, ldc, pc > 0, rows, cols, at);
          }
        }
      }
    }
  }
}

}  // namespace bgemm_detail

/// Whether this CPU has AVX-512F, AVX-512BW and AVX-512 BF16 (checked once).
inline bool bgemm_supported() {
  static const bool ok = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                                     __builtin_cpu_supports("avx512bf16"));
  return ok;
}

/// out(m, n) = op(a)(m, k) * op(b)(k, n) into a row-major float out with row stride ldc; a
/// and b are bfloat16 bits, a(i, p) at a[i * a_rs + p * a_cs] and b(p, j) at b[p * b_rs + j *
/// b_cs]. k == 0 writes zeros. The CPU must have what bgemm_supported() checks. `split`: the
/// product is one thread's part of a product split across threads (sgemm_shared::split).
inline void bgemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::uint16_t* a, std::int64_t a_rs,
                  std::int64_t a_cs, const std::uint16_t* b, std::int64_t b_rs, std::int64_t b_cs, float* out,
                  std::int64_t ldc, bool split = false) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (std::int64_t i = 0; i < m; ++i) std::fill_n(out + i * ldc, n, 0.0f);
    return;
  }
  bgemm_detail::product(m, n, k, {a, a_rs, a_cs}, {b, b_rs, b_cs}, out, ldc, split);
}

/// The bfloat16 result of op(a)(m, k) * op(b)(k, n) through `pass` (bgemm_output: a bias, ReLU
/// and mask, or a gradient-descent step, applied to each block of the sum as it completes),
/// operands as bgemm() above. A product deeper than one depth panel (256) keeps its partial
/// sums in float in this thread's scratch, at most 144 rows or 4 MiB at a time.
inline void bgemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::uint16_t* a, std::int64_t a_rs,
                  std::int64_t a_cs, const std::uint16_t* b, std::int64_t b_rs, std::int64_t b_cs, const bgemm_output& pass,
                  bool split = false) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) pass.put(0.0f, i, j);
    return;
  }
  // A product with few columns (a layer of 10 outputs) would waste most of a 32-column block:
  // its transpose out^T = op(b)^T op(a)^T has them as rows, into a float buffer that the pass
  // then reads (as sgemm's). The MLP's last weight's update (512 x 10, depth 128): 0.078 ms
  // on one thread before, 0.018 after (docs/benchmarks.md, session 62).
  if (n < bgemm_detail::nr && m > n) {
    constexpr std::int64_t chunk = 8192;  // rows at a time: the buffer at most 1 MiB
    thread_local sgemm_detail::scratch transposed;
    float* t = transposed.get(static_cast<std::size_t>(std::min(m, chunk) * n));
    for (std::int64_t r0 = 0; r0 < m; r0 += chunk) {
      const std::int64_t rows = std::min(chunk, m - r0);
      bgemm_detail::product(n, rows, k, {b, b_cs, b_rs}, {a + r0 * a_rs, a_cs, a_rs}, t, rows, false);
      const bgemm_output at = pass.at(r0, 0);
      if (at.sink) {  // the sums in rows for the sink, a block of them at once
        thread_local sgemm_detail::scratch in_rows;
        float* r = in_rows.get(static_cast<std::size_t>(rows * n));
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t j = 0; j < n; ++j) r[i * n + j] = t[j * rows + i];
        at.apply(r, n, rows, n);
        continue;
      }
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < n; ++j) at.put(t[j * rows + i], i, j);
    }
    return;
  }
  if (bgemm_detail::even_panels(k).count == 1)
    return bgemm_detail::product(m, n, k, {a, a_rs, a_cs}, {b, b_rs, b_cs}, nullptr, 0, split, pass);
  using bgemm_detail::mc_max;
  const std::int64_t rows = std::max(mc_max, (std::int64_t{1} << 20) / n / mc_max * mc_max);
  thread_local sgemm_detail::scratch sums;
  float* c = sums.get(static_cast<std::size_t>(std::min(rows, m) * n));
  for (std::int64_t r0 = 0; r0 < m; r0 += rows)
    bgemm_detail::product(std::min(rows, m - r0), n, k, {a + r0 * a_rs, a_rs, a_cs}, {b, b_rs, b_cs}, c, n, split,
                          pass.at(r0, 0));
}

}  // namespace weft::cpu

#endif
