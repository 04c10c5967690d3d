/// @file
/// CPU kernels for MatMul and BatchMatMulV2: Eigen's GEMM and matrix-vector kernels (float
/// products through weft's own GEMM on x86-64 CPUs with AVX2 and FMA, with its AVX-512 block
/// where the CPU has AVX-512F: sgemm.hpp), with the output rows or columns split across the intra-op
/// threads. (Eigen's dense product compiles in a fraction of the time of its Tensor
/// contraction and reaches the same speed.)
/// float16 and bfloat16 multiply in float32 (bfloat16 products through bgemm.hpp's GEMM where
/// the CPU has AVX-512 BF16); int32 and int64 in uint32 and uint64, which wrap.
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>

#include <weft/core/broadcast.hpp>
#include <weft/core/product_dims.hpp>
#include <weft/kernels/cpu/bgemm.hpp>
#include <weft/kernels/cpu/common.hpp>
#include <weft/kernels/cpu/convert.hpp>
#include <weft/kernels/cpu/sgemm.hpp>
#include <weft/ops/matrix_ops.hpp>

namespace weft::cpu {

/// One Eigen GEMM: res(rows, cols) = alpha * op(lhs) * op(rhs), or res += that when
/// `accumulate`, res dense and row-major (row i at res + i * res_stride); each operand is a
/// plain strided matrix stored in the given order (a transposed operand is the same memory
/// read in the other order) and conjugated where asked. Eigen's general_matrix_matrix_product
/// is called directly rather than through `noalias() = A * B`: the expression path also
/// compiles Eigen's coefficient-wise small product and its matrix-vector paths for every
/// case, which doubles the compile cost of a MatMul kernel, while tiny products are dominated
/// by the step's overhead anyway.
template <class T, int LhsOrder, int RhsOrder, bool ConjLhs, bool ConjRhs>
void gemm_block(std::int64_t rows, std::int64_t cols, std::int64_t depth, const T* lhs, std::int64_t lhs_stride,
                const T* rhs, std::int64_t rhs_stride, T* res, std::int64_t res_stride, T alpha, bool accumulate) {
  namespace ei = Eigen::internal;
  if (!accumulate)
    for (std::int64_t i = 0; i < rows; ++i) std::fill_n(res + i * res_stride, cols, T(0));
  ei::gemm_blocking_space<Eigen::RowMajor, T, T, Eigen::Dynamic, Eigen::Dynamic, Eigen::Dynamic> blocking(rows, cols, depth,
                                                                                                         1, true);
  ei::general_matrix_matrix_product<Eigen::Index, T, LhsOrder, ConjLhs, T, RhsOrder, ConjRhs, Eigen::RowMajor, 1>::run(
      rows, cols, depth, lhs, lhs_stride, rhs, rhs_stride, res, 1, res_stride, alpha, blocking, nullptr);
}

/// res(rows) = alpha * op(lhs)(rows, depth) * x, or res += that when `accumulate`, with x a
/// contiguous vector: Eigen's matrix-vector kernel, for products with one output column or
/// row (a GEMM would pack the whole matrix first).
template <class T, int LhsOrder, bool ConjLhs, bool ConjRhs>
void gemv_block(std::int64_t rows, std::int64_t depth, const T* lhs, std::int64_t lhs_stride, const T* x, T* res, T alpha,
                bool accumulate) {
  namespace ei = Eigen::internal;
  constexpr int VecOrder = LhsOrder == Eigen::RowMajor ? Eigen::ColMajor : Eigen::RowMajor;
  using lhs_mapper = ei::const_blas_data_mapper<T, Eigen::Index, LhsOrder>;
  using rhs_mapper = ei::const_blas_data_mapper<T, Eigen::Index, VecOrder>;
  if (!accumulate) std::fill(res, res + rows, T(0));
  ei::general_matrix_vector_product<Eigen::Index, T, lhs_mapper, LhsOrder, ConjLhs, T, rhs_mapper, ConjRhs>::run(
      rows, depth, lhs_mapper(lhs, lhs_stride), rhs_mapper(x, 1), res, 1, alpha);
}

/// gemv_block with the conjugations chosen at run time (real types have one instance).
template <class T, int LhsOrder>
void gemv_conj(std::int64_t rows, std::int64_t depth, const T* lhs, std::int64_t lhs_stride, const T* x, T* res,
               bool conj_lhs, bool conj_x, T alpha, bool accumulate) {
  if constexpr (Eigen::NumTraits<T>::IsComplex) {
    if (conj_lhs && conj_x) return gemv_block<T, LhsOrder, true, true>(rows, depth, lhs, lhs_stride, x, res, alpha, accumulate);
    if (conj_lhs) return gemv_block<T, LhsOrder, true, false>(rows, depth, lhs, lhs_stride, x, res, alpha, accumulate);
    if (conj_x) return gemv_block<T, LhsOrder, false, true>(rows, depth, lhs, lhs_stride, x, res, alpha, accumulate);
  }
  gemv_block<T, LhsOrder, false, false>(rows, depth, lhs, lhs_stride, x, res, alpha, accumulate);
}

/// Rows [r0, r1) and columns [c0, c1) of out(M,N) = alpha * op(a) * op(b), or of out += that
/// when `accumulate`; op transposes (and conjugates when `adjoint`) where asked. a is stored
/// row-major as (M,K), or (K,M) when ta; b as (K,N), or (N,K) when tb. Four GEMM and two
/// matrix-vector instances cover every real case. `shared` (float only) is an operand that
/// gemm packed for every part; `pass` (float only: a bias and ReLU, a mask) is applied to
/// the part once its sum is complete, by sgemm's blocks or after the part.
template <class T>
void gemm_part(const T* a, const T* b, T* out, std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb,
               bool adjoint, std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1,
               [[maybe_unused]] sgemm_shared shared = {}, T alpha = T(1), bool accumulate = false,
               [[maybe_unused]] sgemm_output_pass pass = {}) {
  if (shared.b_columns) shared.b_column0 = c0;  // a whole packed b: this part's columns of it
  if constexpr (std::is_same_v<T, float>) {
    // sgemm's blocks apply the pass (below); after Eigen's GEMM or GEMV it runs over the part.
    bool in_blocks = false;
#ifdef WEFT_OWN_SGEMM
    in_blocks = n > 1 && m > 1 && sgemm_supported();
#endif
    if (pass && !in_blocks) {
      gemm_part<T>(a, b, out, m, k, n, ta, tb, adjoint, r0, r1, c0, c1, shared, alpha, accumulate);
      return pass.at(r0, c0).apply(out + r0 * n + c0, n, r1 - r0, c1 - c0);
    }
  }
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  constexpr bool complex = Eigen::NumTraits<T>::IsComplex;
  const std::int64_t rows = r1 - r0, cols = c1 - c0;
  T* res = out + r0 * n + c0;
  const bool conj_a = complex && adjoint && ta, conj_b = complex && adjoint && tb;
  if (n == 1) {  // op(a) times the vector op(b)
    if (ta) return gemv_conj<T, C>(rows, k, a + r0, m, b, res, conj_a, conj_b, alpha, accumulate);
    return gemv_conj<T, R>(rows, k, a + r0 * k, k, b, res, conj_a, conj_b, alpha, accumulate);
  }
  if (m == 1) {  // the vector op(a) times op(b): out^T = op(b)^T op(a)^T
    if (tb) return gemv_conj<T, R>(cols, k, b + c0 * k, k, a, res, conj_b, conj_a, alpha, accumulate);
    return gemv_conj<T, C>(cols, k, b + c0, n, a, res, conj_b, conj_a, alpha, accumulate);
  }
#ifdef WEFT_OWN_SGEMM
  if constexpr (std::is_same_v<T, float>) {
    if (sgemm_supported()) {
      // op(a)(i, p) and op(b)(p, j) through strides: a transposed operand swaps them.
      const T* lhs = ta ? a + r0 : a + r0 * k;
      const T* rhs = tb ? b + c0 * k : b + c0;
      return sgemm(rows, cols, k, lhs, ta ? 1 : k, ta ? m : 1, rhs, tb ? 1 : n, tb ? k : 1, res, n, shared, alpha, accumulate,
                   pass.at(r0, c0));
    }
  }
#endif
  // lhs: rows [r0, r1) of op(a); rhs: columns [c0, c1) of op(b).
  auto with_rhs = [&]<int LO, bool LC>(const T* lhs, std::int64_t ls) {
    if (!tb) return gemm_block<T, LO, R, LC, false>(rows, cols, k, lhs, ls, b + c0, n, res, n, alpha, accumulate);
    if constexpr (complex) {
      if (adjoint) return gemm_block<T, LO, C, LC, true>(rows, cols, k, lhs, ls, b + c0 * k, k, res, n, alpha, accumulate);
    }
    gemm_block<T, LO, C, LC, false>(rows, cols, k, lhs, ls, b + c0 * k, k, res, n, alpha, accumulate);
  };
  if (!ta) return with_rhs.template operator()<R, false>(a + r0 * k, k);
  if constexpr (complex) {
    if (adjoint) return with_rhs.template operator()<C, true>(a + r0, m);
  }
  with_rhs.template operator()<C, false>(a + r0, m);
}

/// Rows [r0, r1) of out(M,N) = op(a) * op(b), every column.
template <class T>
void gemm_rows(const T* a, const T* b, T* out, std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb,
               bool adjoint, std::int64_t r0, std::int64_t r1) {
  gemm_part<T>(a, b, out, m, k, n, ta, tb, adjoint, r0, r1, 0, n);
}

#ifdef WEFT_OWN_SGEMM
/// Whether gemm() splits a float product along its depth rather than by rows or columns: a
/// narrow output (fewer columns than sgemm's AVX-512 block) of a product deeper than its
/// rows, such as a classifier's 10-wide layer x w (128 x 512 times 512 x 10), at least 64
/// deep a thread, the partial sums at most 16 MiB. Split by rows, each thread
/// would read its rows of x whole, half of them written by the other core where x's producer
/// split by columns; split by depth, each thread reads the columns of x that its core wrote
/// and the partial sums it hands over are small (m x n). In an MLP's step on two threads the
/// 10-wide forward product took 20 us instead of 30 (docs/benchmarks.md, session 59).
inline bool splits_by_depth(std::int64_t m, std::int64_t k, std::int64_t n, bool accumulate, int threads) {
  return !accumulate && m > 1 && n > 1 && n < 32 && k > m && k >= 64 * threads &&
         static_cast<double>(threads) * static_cast<double>(m) * static_cast<double>(n) <= double(1 << 22) &&
         sgemm_supported();
}

/// out(M,N) = alpha * op(a) * op(b), then `pass`, split across the threads along the depth
/// (splits_by_depth): part p of the depth (16-float units, one part a thread) multiplies
/// into slot p of the calling thread's buffer of partial sums (the caller's, not the
/// threads': a worker moves on to another kernel's blocks while this caller still has to
/// sum, and the caller runs nothing else until it has); then out = the parts' sums in the
/// order of the parts, then the pass, on the caller when out is small (16,384 floats), else
/// by blocks of columns in whole cache lines. The sum does not depend on which thread ran
/// which part.
inline void gemm_by_depth(const kernel_context& ctx, const float* a, const float* b, float* out, std::int64_t m,
                          std::int64_t k, std::int64_t n, bool ta, bool tb, float alpha, sgemm_output_pass pass) {
  const std::int64_t parts = ctx.device().num_threads();
  thread_local sgemm_detail::scratch partials;
  float* const slots = partials.get(static_cast<std::size_t>(parts * m * n));
  // op(a)(i, p) at a[i * a_rs + p * a_cs], op(b)(p, j) at b[p * b_rs + j * b_cs].
  const std::int64_t a_rs = ta ? 1 : k, a_cs = ta ? m : 1, b_rs = tb ? 1 : n, b_cs = tb ? k : 1;
  const std::int64_t depth_units = (k + 15) / 16;
  ctx.parallel_for(parts, 1e9, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) {
      const std::int64_t lo = std::min(k, p * depth_units / parts * 16), hi = std::min(k, (p + 1) * depth_units / parts * 16);
      // Never empty: splits_by_depth asks for at least 64 (four units) a part.
      sgemm(m, n, hi - lo, a + lo * a_cs, a_rs, a_cs, b + lo * b_rs, b_rs, b_cs, slots + p * m * n, n, {.split = true}, alpha,
            false, {});
    }
  });
  const std::int64_t column_units = (n + 15) / 16, blocks = m * n <= 16384 ? 1 : std::min(parts, column_units);
  ctx.parallel_for(blocks, 1e9, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      const std::int64_t lo = std::min(n, blk * column_units / blocks * 16), hi = std::min(n, (blk + 1) * column_units / blocks * 16);
      for (std::int64_t i = 0; i < m; ++i) {
        float* row = out + i * n;
        const float* first = slots + i * n;
        for (std::int64_t j = lo; j < hi; ++j) row[j] = first[j];
        for (std::int64_t q = 1; q < parts; ++q) {
          const float* part = slots + q * m * n + i * n;
          for (std::int64_t j = lo; j < hi; ++j) row[j] += part[j];
        }
      }
      pass.at(0, lo).apply(out + lo, n, m, hi - lo);
    }
  });
}
#endif

/// out(M,N) = alpha * op(a) * op(b), or out += that when `accumulate` (a weight's gradient
/// descent update folded into its gradient's product), then `pass` (float: a bias and ReLU
/// folded in), split across the intra-op threads in blocks of rows or of columns
/// (blocks_for), each a full GEMM of its part. Each thread packs its part of one operand and
/// the whole of the other, so the split is along the larger operand: by rows when op(a) is
/// the larger (M >= N), by columns when op(b) is (an MLP's batch of 128 rows times a
/// weight matrix of 512 columns). A narrow output of a deep product (float: a classifier's
/// 10-wide layer) splits along the depth instead (splits_by_depth, gemm_by_depth).
///
/// Signed integers multiply as the unsigned type of their width: a signed overflow inside
/// Eigen's kernels is undefined behaviour (UBSan found int32's in the kernel fuzzer), while
/// unsigned arithmetic wraps, and its bits are the two's complement result that TensorFlow's
/// integer MatMul gives.
///
/// `packed_b` (float, null by default) is op(b) packed whole for sgemm_best_isa() (a
/// weight's packed_weight): no part packs b.
template <class T>
void gemm(const kernel_context& ctx, const T* a, const T* b, T* out, std::int64_t m, std::int64_t k, std::int64_t n,
          bool ta, bool tb, bool adjoint, T alpha = T(1), bool accumulate = false, sgemm_output_pass pass = {},
          const float* packed_b = nullptr) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return gemm<U>(ctx, reinterpret_cast<const U*>(a), reinterpret_cast<const U*>(b), reinterpret_cast<U*>(out), m, k, n,
                   ta, tb, adjoint, static_cast<U>(alpha), accumulate);
  }
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate) std::fill(out, out + m * n, T(0));
    if constexpr (std::is_same_v<T, float>) pass.apply(out, n, m, n);
    return;
  }
  const int threads = ctx.device().num_threads();
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
#ifdef WEFT_OWN_SGEMM
  // A narrow output of a deep product (a classifier's layer): split along the depth.
  if constexpr (std::is_same_v<T, float>) {
    if (threads > 1 && flops >= 5e5 && !packed_b && splits_by_depth(m, k, n, accumulate, threads))
      return gemm_by_depth(ctx, a, b, out, m, k, n, ta, tb, alpha, pass);
  }
#endif
  // A weight's update (`accumulate`: w += alpha x^T dz, k the batch) splits by the weight's
  // columns too where the forward product x w splits by them (more columns than the batch)
  // and they are wide, so that each core updates the part of the weight it reads in the next
  // forward product rather than the other core's (docs/benchmarks.md, session 58: the MLP
  // step 4 % faster on two threads; LeNet's 1568 x 128 weight, whose forward product splits
  // by rows, keeps its row split: by columns, its step ran 1.6 % slower).
  const bool by_columns = m > 1 && (n > m || (accumulate && n > k && n >= 64 * threads));
  const std::int64_t extent = by_columns ? n : m;
  const sgemm_shared prepacked{nullptr, packed_b, packed_b ? n : 0, 0};
  // Products from 0.5 MFLOP (about 3 us on one core) split: the 1.3 MFLOP ones of an MLP's
  // 10-wide last layer split made its step on two threads 1.5 % faster than from 2 MFLOP.
  if (threads == 1 || flops < 5e5 || extent < 2 * threads)
    return gemm_part<T>(a, b, out, m, k, n, ta, tb, adjoint, 0, m, 0, n, prepacked, alpha, accumulate, pass);
  const std::int64_t blocks = std::max<std::int64_t>(threads, blocks_for(ctx, extent, 16));
  sgemm_shared shared = prepacked;
  shared.split = true;
#ifdef WEFT_OWN_SGEMM
  // The operand every block reads whole is packed once for all of the blocks a thread runs
  // (packing it per block cost a quarter of a split product's time); each block packs its
  // own part of the other. Where each thread's part is at least 64 rows or columns wide,
  // each thread packs it whole for itself before its first block (sgemm_private_packing:
  // the packing then costs at most about a fifth of the thread's part, less than reading a
  // copy that another core wrote); narrower, the threads pack it together, in chunks, into
  // one copy that all of them read (sgemm_shared_packing). Up to 16 MiB packed (the buffers
  // stay with the threads for their next products); a larger operand is packed a block at
  // a time by each block, as on one thread.
  std::optional<sgemm_shared_packing> packing;
  std::optional<sgemm_private_packing> own;
  if constexpr (std::is_same_v<T, float>) {
    constexpr std::int64_t shared_cap = std::int64_t{1} << 22;
    if (m > 1 && n > 1 && sgemm_supported()) {
      // A transposed a is read where it is (sgemm's direct slivers): not packed.
      const bool pack_a = by_columns && !ta && sgemm_packed_size_a(m, k) <= shared_cap;
      const bool pack_b = !by_columns && !packed_b && n <= sgemm_max_shared_columns && sgemm_packed_size_b(k, n) <= shared_cap;
      if (pack_a || pack_b) {
        const auto which = pack_a ? sgemm_shared_packing::operand::a : sgemm_shared_packing::operand::b;
        const float* src = pack_a ? a : b;
        const std::int64_t whole = pack_a ? m : n;
        const std::int64_t rs = pack_a ? (ta ? 1 : k) : (tb ? 1 : n), cs = pack_a ? (ta ? m : 1) : (tb ? k : 1);
        if (extent >= 64 * threads) {
          own.emplace(which, whole, k, src, rs, cs);
        } else {
          float* buffer = sgemm_shared_buffer(pack_a ? sgemm_packed_size_a(m, k) : sgemm_packed_size_b(k, n));
          packing.emplace(which, whole, k, src, rs, cs, buffer);
          (pack_a ? shared.a : shared.b) = buffer;
        }
      }
    }
  }
#endif
  // Blocks start at whole register blocks of sgemm (12 rows, 32 columns, multiples of both
  // ISAs' blocks): a part of 98 rows computes 9 blocks of 12, and 8 such parts of a 784-row
  // weight gradient ran 9 % longer than the whole product on one thread. (An extent of
  // fewer register blocks than parts is cut anywhere.)
  std::int64_t align = by_columns ? 32 : 12;
  if ((extent + align - 1) / align < blocks) align = 1;
  const std::int64_t units = (extent + align - 1) / align;
  ctx.parallel_for(blocks, 1e9, [&](std::int64_t b0, std::int64_t b1) {
    sgemm_shared part = shared;
#ifdef WEFT_OWN_SGEMM
    if (packing) packing->help();
    if (own) (by_columns ? part.a : part.b) = own->get();
#endif
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      const std::int64_t lo = std::min(extent, blk * units / blocks * align);
      const std::int64_t hi = std::min(extent, (blk + 1) * units / blocks * align);
      if (lo == hi) continue;
      if (by_columns) gemm_part<T>(a, b, out, m, k, n, ta, tb, adjoint, 0, m, lo, hi, part, alpha, accumulate, pass);
      else gemm_part<T>(a, b, out, m, k, n, ta, tb, adjoint, lo, hi, 0, n, part, alpha, accumulate, pass);
    }
  });
}

#ifdef WEFT_OWN_SGEMM
/// The bfloat16 product op(a) * op(b) (m x n) of bfloat16 a and b (their bits) through `pass`
/// (bgemm_output: the result, and what a fused op applies on the way), by bgemm, split across
/// the intra-op threads as gemm splits a float product: M, N > 1.
inline void gemm_bf16(const kernel_context& ctx, const std::uint16_t* a, const std::uint16_t* b, std::int64_t m,
                      std::int64_t k, std::int64_t n, bool ta, bool tb, const bgemm_output& pass) {
  const auto part = [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1, bool split) {
    const std::uint16_t* lhs = ta ? a + r0 : a + r0 * k;
    const std::uint16_t* rhs = tb ? b + c0 * k : b + c0;
    bgemm(r1 - r0, c1 - c0, k, lhs, ta ? 1 : k, ta ? m : 1, rhs, tb ? 1 : n, tb ? k : 1, pass.at(r0, c0), split);
  };
  const int threads = ctx.device().num_threads();
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  // A weight's update splits by the weight's columns where they are wide, as gemm's (each
  // core updates the columns it reads in the next forward product). Not a sink's (Adam's):
  // its state read and written half a row at a time by each core took twice as long on two
  // threads as the unfused ApplyAdam (0.50 against 0.29 ms for the MLP's first weight, its
  // product included); by rows, 0.28.
  const bool by_columns = n > m || (pass.update && n > k && n >= 64 * threads);
  const std::int64_t extent = by_columns ? n : m;
  // From 0.5 MFLOP, as gemm's: the MLP's 1.3 MFLOP products of its 10-wide layer ran on one
  // core from 2 MFLOP, the input gradient's twice as long on two threads as on one (its
  // operands and output on the other core's side): the step on two threads 2.5 % faster.
  if (threads == 1 || flops < 5e5 || extent < 2 * threads) return part(0, m, 0, n, false);
  // One block per thread: each block packs the whole of the operand it does not split.
  const std::int64_t blocks = threads;
  ctx.parallel_for(blocks, 1e9, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      const std::int64_t lo = blk * extent / blocks, hi = (blk + 1) * extent / blocks;
      if (by_columns) part(0, m, lo, hi, true);
      else part(lo, hi, 0, n, true);
    }
  });
}
#endif

/// A bfloat16 tensor's elements as their bits.
inline const std::uint16_t* bfloat16_bits_of(const tensor& t) { return reinterpret_cast<const std::uint16_t*>(t.data<bfloat16>()); }
/// A bfloat16 tensor's elements as their bits, to write.
inline std::uint16_t* bfloat16_bits_of(tensor& t) { return reinterpret_cast<std::uint16_t*>(t.data<bfloat16>()); }

/// t's elements in compute_t<T>: t's own, or converted into `storage`.
template <class T>
const compute_t<T>* as_compute(const tensor& t, std::vector<compute_t<T>>& storage) {
  if constexpr (std::is_same_v<compute_t<T>, T>) {
    return t.data<T>();
  } else {
    storage.resize(static_cast<std::size_t>(t.num_elements()));
    detail::convert_range<compute_t<T>, T>(t.data<T>(), storage.data(), 0, t.num_elements());
    return storage.data();
  }
}

/// BatchMatMulV2 (and MatMul where require_matrices): x times y over broadcast batch dims, x
/// (y) transposed or adjointed when ax (ay). `packed_b`: y packed whole (a float MatMul's
/// weight, packed_weight), read instead of y by a product of one matrix.
template <class T>
void batch_matmul(kernel_context& ctx, const tensor& x, const tensor& y, bool ax, bool ay, bool adjoint,
                  bool require_matrices, const float* packed_b = nullptr) {
  using C = compute_t<T>;
  if (require_matrices && (x.rank() != 2 || y.rank() != 2))
    fail(error_code::invalid_argument, "inputs must be matrices, got shapes ", x.shape(), " and ", y.shape());
  if (x.rank() < 2 || y.rank() < 2)
    fail(error_code::invalid_argument, "inputs must have rank at least 2, got shapes ", x.shape(), " and ", y.shape());
  int rx = x.rank(), ry = y.rank();
  std::int64_t m = x.shape()[ax ? rx - 1 : rx - 2], kx = x.shape()[ax ? rx - 2 : rx - 1];
  std::int64_t ky = y.shape()[ay ? ry - 1 : ry - 2], n = y.shape()[ay ? ry - 2 : ry - 1];
  if (kx != ky) fail(error_code::invalid_argument, "inner dimensions differ (", kx, " vs ", ky, ")");
  std::vector<std::int64_t> bx(x.shape().dims().begin(), x.shape().dims().end() - 2);
  std::vector<std::int64_t> by(y.shape().dims().begin(), y.shape().dims().end() - 2);
  auto batch = broadcast_dims(bx, by);
  if (!batch) fail(error_code::invalid_argument, "batch dimensions are not broadcastable");
  auto dims = *batch;
  dims.push_back(m);
  dims.push_back(n);
  tensor& out = ctx.allocate_output(0, shape(dims));
  std::vector<C> xs, ys, os;
  // bfloat16 products with AVX-512 BF16 read their operands as they are and write their
  // result rounded to bfloat16 from the registers (bgemm_output).
  [[maybe_unused]] bool bf16_direct = false;
#ifdef WEFT_OWN_SGEMM
  if constexpr (std::is_same_v<T, bfloat16>) bf16_direct = m > 1 && n > 1 && bgemm_supported();
#endif
  const C* px = bf16_direct ? nullptr : as_compute<T>(x, xs);
  const C* py = bf16_direct ? nullptr : as_compute<T>(y, ys);
  C* po = nullptr;
  if constexpr (std::is_same_v<C, T>) {
    po = out.data<T>();
  } else if (!bf16_direct) {
    os.resize(static_cast<std::size_t>(out.num_elements()));
    po = os.data();
  }
  shape bshape(*batch);
  auto sx = broadcast_strides(shape(bx), bshape), sy = broadcast_strides(shape(by), bshape);
  std::int64_t mat_x = x.shape()[rx - 2] * x.shape()[rx - 1], mat_y = y.shape()[ry - 2] * y.shape()[ry - 1];
  for (std::int64_t i = 0, nb = bshape.num_elements(); i < nb; ++i) {
    std::int64_t rem = i, ox = 0, oy = 0;
    for (int d = bshape.rank() - 1; d >= 0; --d) {
      auto idx = rem % bshape[d];
      rem /= bshape[d];
      ox += idx * sx[static_cast<std::size_t>(d)];
      oy += idx * sy[static_cast<std::size_t>(d)];
    }
#ifdef WEFT_OWN_SGEMM
    if constexpr (std::is_same_v<T, bfloat16>) {
      if (bf16_direct) {
        gemm_bf16(ctx, bfloat16_bits_of(x) + ox * mat_x, bfloat16_bits_of(y) + oy * mat_y, m, kx, n, ax, ay,
                  {bfloat16_bits_of(out) + i * m * n, n});
        continue;
      }
    }
#endif
    gemm<C>(ctx, px + ox * mat_x, py + oy * mat_y, po + i * m * n, m, kx, n, ax, ay, adjoint, C(1), false, {},
            std::is_same_v<C, float> && nb == 1 ? packed_b : nullptr);
  }
  if constexpr (!std::is_same_v<C, T>) {
    if (bf16_direct) return;
    T* o = out.data<T>();
    ctx.parallel_for(out.num_elements(), 2, [&](std::int64_t b, std::int64_t e) { detail::convert_range<T, C>(os.data(), o, b, e); });
  }
}

/// The bfloat16 product op(a) * op(b) (m x n) of bfloat16 matrices a and b through `pass`
/// (bgemm_output; the fused ops' kernels): by bgemm where the CPU has AVX-512 BF16 and m, n >
/// 1, else the float product of the widened operands, then the pass.
inline void bfloat16_product(kernel_context& ctx, const tensor& a, const tensor& b, std::int64_t m, std::int64_t k,
                             std::int64_t n, bool ta, bool tb, const bgemm_output& pass) {
#ifdef WEFT_OWN_SGEMM
  if (m > 1 && n > 1 && bgemm_supported())
    return gemm_bf16(ctx, bfloat16_bits_of(a), bfloat16_bits_of(b), m, k, n, ta, tb, pass);
#endif
  std::vector<float> as, bs, sums(static_cast<std::size_t>(m * n));
  gemm<float>(ctx, as_compute<bfloat16>(a, as), as_compute<bfloat16>(b, bs), sums.data(), m, k, n, ta, tb, false, 1.0f,
              false);
  ctx.parallel_for(m, static_cast<double>(n) * 4, [&](std::int64_t r0, std::int64_t r1) {
    pass.at(r0, 0).apply(sums.data() + r0 * n, n, r1 - r0, n);
  });
}

#ifdef WEFT_OWN_SGEMM
/// A float weight (k x n) packed as sgemm_pack_b packs it for sgemm_best_isa(), kept with its
/// variable (resource_variable::derived) while the weight does not change: MatMuls that read
/// the weight as b, untransposed, use it instead of packing b each time (inference, or the
/// steps of a loop that reads a weight each iteration). It takes about as much memory as the
/// weight (columns rounded up to the block's).
struct packed_weight final : resource_variable::derived_form {
  sgemm_isa isa;        ///< the block whose layout it has
  std::int64_t k, n;    ///< the weight's shape
  std::unique_ptr<float[]> storage;
  float* data;          ///< 64-byte aligned within storage
  /// w (k x n, row-major) packed.
  packed_weight(std::int64_t rows, std::int64_t cols, const float* w)
      : isa(sgemm_best_isa()), k(rows), n(cols), storage(new float[static_cast<std::size_t>(sgemm_packed_size_b(rows, cols)) + 16]),
        data(storage.get() + (16 - reinterpret_cast<std::uintptr_t>(storage.get()) / sizeof(float) % 16) % 16) {
    sgemm_pack_b(rows, cols, w, cols, 1, data);
  }
  /// Whether it is the layout a k x n weight has for this CPU's block.
  bool fits(std::int64_t rows, std::int64_t cols) const noexcept { return rows == k && cols == n && isa == sgemm_best_isa(); }
};

/// The packed copy of the weight that input i holds (op(b) of a float product, k x n, not
/// transposed), or null. A variable keeps one from the second read of an unchanged value on
/// (a training step, which reads each weight once before it updates it, never packs a
/// copy); a product of fewer than 32 columns takes sgemm's transposed path and never reads
/// one.
inline std::shared_ptr<const packed_weight> weight_packed_as_b(const kernel_context& ctx, int i, std::int64_t k,
                                                               std::int64_t n, bool tb) {
  resource_variable* v = ctx.input_variable(i);
  const tensor& w = ctx.input(i);
  if (!v || tb || k < 1 || n < 32 || !sgemm_supported() || w.dtype() != dtype::float32 || w.rank() != 2) return nullptr;
  std::optional<std::uint64_t> keep_at;
  auto kept = std::dynamic_pointer_cast<const packed_weight>(v->read_derived(w, keep_at));
  if (kept && kept->fits(k, n)) return kept;
  if (!keep_at) return nullptr;
  std::shared_ptr<packed_weight> made;
  try {
    made = std::make_shared<packed_weight>(k, n, w.data<float>());
  } catch (const std::bad_alloc&) {
    return nullptr;  // no room for a second copy of the weight: the product packs b as before
  }
  v->keep_derived(w, *keep_at, made);
  return made;
}
#endif

/// The CPU kernel of MatMul.
template <class T>
struct matmul_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit matmul_kernel(const node& n) : ta_(n.attr<bool>("transpose_a")), tb_(n.attr<bool>("transpose_b")) {}
  void compute(kernel_context& ctx) const override {
    [[maybe_unused]] std::shared_ptr<const void> held;  // the weight's packed copy, while the product reads it
    const float* packed_b = nullptr;
#ifdef WEFT_OWN_SGEMM
    if constexpr (std::is_same_v<T, float>) {
      const tensor& x = ctx.input(0);
      const tensor& y = ctx.input(1);
      if (x.rank() == 2 && y.rank() == 2 && x.shape()[ta_ ? 0 : 1] == y.shape()[0]) {
        auto packed = weight_packed_as_b(ctx, 1, y.shape()[0], y.shape()[1], tb_);
        if (packed) packed_b = packed->data;
        held = std::move(packed);
      }
    }
#endif
    batch_matmul<T>(ctx, ctx.input(0), ctx.input(1), ta_, tb_, false, true, packed_b);
  }
 private:
  bool ta_, tb_;
};

/// The CPU kernel of BatchMatMulV2.
template <class T>
struct batch_matmul_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit batch_matmul_kernel(const node& n) : ax_(n.attr<bool>("adj_x")), ay_(n.attr<bool>("adj_y")) {}
  void compute(kernel_context& ctx) const override {
    batch_matmul<T>(ctx, ctx.input(0), ctx.input(1), ax_, ay_, true, false);
  }
 private:
  bool ax_, ay_;
};

/// The CPU kernel of _FusedMatMulBiasAdd (float or bfloat16): the product, then the bias and,
/// when `relu`, max(x, 0), applied to each block of the output as its sum completes (in
/// bfloat16, to the float sum, rounded once: bgemm_output).
template <class T>
struct fused_matmul_bias_add_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read here, once.
  explicit fused_matmul_bias_add_kernel(const node& n)
      : ta_(n.attr<bool>("transpose_a")), tb_(n.attr<bool>("transpose_b")), relu_(n.attr<bool>("relu")) {}
  void compute(kernel_context& ctx) const override {
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    const tensor& bias = ctx.input(2);
    const auto [m, k, n] = biased_product_dims(a.shape(), b.shape(), bias.shape(), ta_, tb_);
    tensor& out = ctx.allocate_output(0, shape{m, n});
    if constexpr (std::is_same_v<T, bfloat16>) {
      bgemm_output pass{bfloat16_bits_of(out), n};
      pass.bias = bfloat16_bits_of(bias), pass.relu = relu_;
      bfloat16_product(ctx, a, b, m, k, n, ta_, tb_, pass);
    } else {
      const float* packed_b = nullptr;
#ifdef WEFT_OWN_SGEMM
      const auto packed = weight_packed_as_b(ctx, 1, k, n, tb_);
      if (packed) packed_b = packed->data;
#endif
      gemm<float>(ctx, a.data<float>(), b.data<float>(), out.data<float>(), m, k, n, ta_, tb_, false, 1.0f, false,
                  {bias.data<float>(), relu_}, packed_b);
    }
  }

 private:
  bool ta_, tb_, relu_;
};

/// The CPU kernel of _FusedMatMulReluGrad (float or bfloat16): the product where the features
/// are above 0, else 0 (ReluGrad's select: a NaN in the product where the features are not
/// above 0 gives 0), applied to each block of the output as its sum completes.
template <class T>
struct fused_matmul_relu_grad_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read here, once.
  explicit fused_matmul_relu_grad_kernel(const node& n) : ta_(n.attr<bool>("transpose_a")), tb_(n.attr<bool>("transpose_b")) {}
  void compute(kernel_context& ctx) const override {
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    const tensor& features = ctx.input(2);
    const auto [m, k, n] = masked_product_dims(a.shape(), b.shape(), features.shape(), ta_, tb_);
    tensor& out = ctx.allocate_output(0, shape{m, n});
    if constexpr (std::is_same_v<T, bfloat16>) {
      bgemm_output pass{bfloat16_bits_of(out), n};
      pass.mask = bfloat16_bits_of(features), pass.mask_ld = n;
      bfloat16_product(ctx, a, b, m, k, n, ta_, tb_, pass);
    } else {
      gemm<float>(ctx, a.data<float>(), b.data<float>(), out.data<float>(), m, k, n, ta_, tb_, false, 1.0f, false,
                  {nullptr, false, features.data<float>(), n});
    }
  }

 private:
  bool ta_, tb_;
};

/// The dtypes of the fused products (graph/passes/fuse_matmul.hpp).
using fused_matmul_types = type_list<float, bfloat16>;

/// Registers the fused products' kernels of dtype T (with MatMul's kernel of T: a session
/// uses an op only where its kernel is registered).
template <class T>
void register_fused_matmul_kernel() {
  register_cpu_kernel<fused_matmul_bias_add_kernel<T>>(ops::fused_matmul_bias_add_op, {"T", dtype_of<T>});
  register_cpu_kernel<fused_matmul_relu_grad_kernel<T>>(ops::fused_matmul_relu_grad_op, {"T", dtype_of<T>});
}
/// Registers the fused products' kernels of every dtype they have.
inline void register_fused_matmul_kernel() {
  register_fused_matmul_kernel<float>();
  register_fused_matmul_kernel<bfloat16>();
}

using matmul_types = weft::matmul_types;  ///< MatMul's dtypes

/// One dtype only, for programs that want MatMul without compiling every dtype.
template <class T>
void register_matmul_kernel() {
  ops::register_matrix_ops();
  register_cpu_kernel<matmul_kernel<T>>("MatMul", {"T", dtype_of<T>});
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bfloat16>) register_fused_matmul_kernel<T>();
}

/// A template, so that including this header instantiates nothing until it is called.
template <int = 0>
void register_matmul_kernels() {
  ops::register_matrix_ops();
  register_for<matmul_kernel>("MatMul", "T", matmul_types{});
  register_fused_matmul_kernel();
  register_for<batch_matmul_kernel>("BatchMatMulV2", "T", matmul_types{});
}

}  // namespace weft::cpu

/// The kernels typed code asks for (framework/kernel_for.hpp), by op type.
namespace weft {
/// Typed code's registration of MatMul's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::MatMul, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_matmul_kernel<T>(); }
};
/// Typed code's registration of the fused product's CPU kernel (float and bfloat16, its dtypes).
template <class T>
struct kernel_for<ops::FusedMatMulBiasAdd, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() {
    ops::register_matrix_ops();
    cpu::register_fused_matmul_kernel();
  }
};
/// Typed code's registration of the fused product and ReluGrad's CPU kernel (float and bfloat16).
template <class T>
struct kernel_for<ops::FusedMatMulReluGrad, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() {
    ops::register_matrix_ops();
    cpu::register_fused_matmul_kernel();
  }
};
/// Typed code's registration of BatchMatMulV2's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::BatchMatMulV2, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::batch_matmul_kernel<T>>("BatchMatMulV2", {"T", dtype_of<T>}); }
};
}  // namespace weft
