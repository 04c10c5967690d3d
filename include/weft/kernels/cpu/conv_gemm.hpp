/// @file
/// Convolution as an implicit GEMM (conv.hpp chooses it when neither register blocks nor
/// direct loops apply): the patch matrix read in place.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <weft/kernels/cpu/conv_scratch.hpp>
#include <weft/kernels/cpu/matmul.hpp>
#include <weft/kernels/cpu/window.hpp>

namespace weft::cpu::nn {

/// Eigen's packing routines (which copy each block of an operand into the order its GEBP
/// kernel reads) read the patches through patch_mapper straight from the input, and the
/// kernel multiplies the packed blocks. im2col wrote each patch value into a buffer that the
/// packing then copied again; here it is copied once (Conv2D of LeNet's second layer: 5.5 ->
/// 4.5 ms on one thread).
namespace ei = Eigen::internal;

/// Where column kk = (i * kw + j) * c + ci of the patch matrix lies relative to a window's
/// origin: an element offset, input row and column offsets, and how many columns from kk on
/// stay in tap (i, j)'s run of contiguous channels.
struct patch_tap {
  std::int64_t offset;  ///< the element's offset from the window origin's
  std::int64_t dy;      ///< its input row relative to the origin
  std::int64_t dx;      ///< its input column relative to the origin
  std::int64_t run;     ///< columns from here on that stay in this tap's channels
};
/// A row of the patch matrix (an output position): its window's origin, an element offset
/// and an input row and column (negative or past the input where the window overhangs).
struct patch_row {
  std::int64_t offset;  ///< the window origin's element offset in the input
  std::int64_t y;       ///< its input row
  std::int64_t x;       ///< its input column
};

/// The taps of every column of g's patch matrix.
inline std::vector<patch_tap> patch_taps(const geometry& g) {
  std::vector<patch_tap> taps(static_cast<std::size_t>(g.patch()));
  for (std::int64_t kk = 0; kk < g.patch(); ++kk) {
    const std::int64_t tap = kk / g.c, ci = kk % g.c, dy = tap / g.kw * g.dh, dx = tap % g.kw * g.dw;
    taps[static_cast<std::size_t>(kk)] = {(dy * g.w + dx) * g.c + ci, dy, dx, g.c - ci};
  }
  return taps;
}

/// The patch matrix's rows [r0, r1) (output positions over all images) into `rows`.
inline void patch_rows(const geometry& g, std::int64_t r0, std::int64_t r1, std::vector<patch_row>& rows) {
  rows.resize(static_cast<std::size_t>(r1 - r0));
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t b = r / g.positions(), y = g.top(r % g.positions() / g.ow), x = g.left(r % g.ow);
    rows[static_cast<std::size_t>(r - r0)] = {((b * g.h + y) * g.w + x) * g.c, y, x};
  }
}

/// The patch matrix of `in` under a convolution as an Eigen data mapper: element (r, kk), or
/// (kk, r) when Transposed; packets run along kk. A packet inside one tap's channels is one
/// load (or zeros where the tap lies outside the input); one that crosses taps is gathered.
template <class C, bool Transposed>
class patch_mapper {
 public:
  using LinearMapper = void;  ///< named by Eigen's packing routines, never used by them
  /// The patches of input `in` under g, rows and taps from patch_rows and patch_taps.
  patch_mapper(const geometry& g, const C* in, const patch_row* rows, const patch_tap* taps)
      : in_(in), rows_(rows), taps_(taps), h_(static_cast<std::uint64_t>(g.h)), w_(static_cast<std::uint64_t>(g.w)) {}
  /// Element (i, j) (zero where the window overhangs the input).
  C operator()(Eigen::Index i, Eigen::Index j) const { return Transposed ? at(j, i) : at(i, j); }
  /// The packet of elements from (i, j) on along kk.
  template <class Packet>
  Packet loadPacket(Eigen::Index i, Eigen::Index j) const {
    return Transposed ? packet<Packet>(j, i) : packet<Packet>(i, j);
  }

 private:
  bool inside(const patch_row& r, const patch_tap& t) const {
    return static_cast<std::uint64_t>(r.y + t.dy) < h_ && static_cast<std::uint64_t>(r.x + t.dx) < w_;
  }
  C at(Eigen::Index r, Eigen::Index kk) const {
    const patch_row& row = rows_[r];
    const patch_tap& t = taps_[kk];
    return inside(row, t) ? in_[row.offset + t.offset] : C(0);
  }
  template <class Packet>
  Packet packet(Eigen::Index r, Eigen::Index kk) const {
    constexpr int n = ei::unpacket_traits<Packet>::size;
    const patch_row& row = rows_[r];
    const patch_tap& t = taps_[kk];
    if (t.run >= n) return inside(row, t) ? ei::ploadu<Packet>(in_ + row.offset + t.offset) : ei::pset1<Packet>(C(0));
    C v[n];
    for (int q = 0; q < n; ++q) v[q] = at(r, kk + q);
    return ei::ploadu<Packet>(v);
  }
  const C* in_;
  const patch_row* rows_;
  const patch_tap* taps_;
  std::uint64_t h_, w_;
};

/// Eigen's GEMM parts for C (as general_matrix_matrix_product instantiates them): packing
/// of either operand from a mapper M stored in Order, and the kernel, into a column-major
/// result.
template <class C>
struct gebp_parts {
  using traits = ei::gebp_traits<C, C>;  ///< register block sizes (mr, nr) and packet types
  using res_mapper = ei::blas_data_mapper<C, Eigen::Index, Eigen::ColMajor>;  ///< the result
  using matrix_mapper = ei::const_blas_data_mapper<C, Eigen::Index, Eigen::RowMajor>;  ///< a dense row-major operand
  /// Packs the left operand from mapper M (stored in Order).
  template <class M, int Order>
  using pack_lhs = ei::gemm_pack_lhs<C, Eigen::Index, M, traits::mr, traits::LhsProgress,
                                     typename traits::LhsPacket4Packing, Order>;
  using pack_rhs = ei::gemm_pack_rhs<C, Eigen::Index, matrix_mapper, traits::nr, Eigen::RowMajor>;  ///< packs a dense right operand
  using kernel = ei::gebp_kernel<C, C, Eigen::Index, res_mapper, traits::mr, traits::nr, false, false>;  ///< the GEMM kernel
  /// Packed blocks are read with aligned loads: each starts on a multiple of this many values.
  static constexpr std::int64_t align = std::max<std::int64_t>(1, EIGEN_MAX_ALIGN_BYTES / sizeof(C));
  /// n rounded up to a multiple of align.
  static std::int64_t aligned(std::int64_t n) { return (n + align - 1) / align * align; }
};

/// The most values a block of packed patches holds (1 MiB of floats): Eigen's blocking
/// would pack a filter gradient's whole [K, kc] patch block however large K.
inline constexpr std::int64_t packed_patches_limit = std::int64_t{1} << 18;

/// Depth blocks of a patch matrix's columns: Eigen's block depth, evened out over the
/// blocks and rounded up to whole taps where a tap has a packet's worth of channels, so
/// that a packet never crosses a tap.
template <class C>
std::int64_t patch_depth_block(const geometry& g, std::int64_t kc) {
  const std::int64_t K = g.patch();
  if (kc >= K) return K;
  const std::int64_t blocks = (K + kc - 1) / kc;
  kc = (K + blocks - 1) / blocks;
  if (g.c >= static_cast<std::int64_t>(ei::packet_traits<C>::size))
    kc = std::min(K, (kc + g.c - 1) / g.c * g.c);
  return kc;
}

/// out [rows, n] = patches(in) [rows, K] * w [K, n], w row-major: chunks of output rows per
/// thread, each computed into a column-major block (Eigen's kernel works down a column-major
/// result in panels of several packets) and transposed into out.
template <class C>
void patch_gemm_forward(const kernel_context& ctx, const geometry& g, const C* in, const C* w, C* out) {
  using P = gebp_parts<C>;
  const std::int64_t K = g.patch(), N = g.k, rows = g.rows();
  const std::vector<patch_tap> taps = patch_taps(g);
  Eigen::Index kc = K, mc = rows, nc = N;
  ei::computeProductBlockingSizes<C, C, 1>(kc, mc, nc, Eigen::Index{1});
  kc = patch_depth_block<C>(g, kc);
  // The filter, packed once: depth block q at q * block_b.
  const std::int64_t depth_blocks = (K + kc - 1) / kc, block_b = P::aligned(kc * N);
  std::vector<C, Eigen::aligned_allocator<C>> packed_w(static_cast<std::size_t>(depth_blocks * block_b));
  typename P::pack_rhs pack_rhs;
  for (std::int64_t q = 0; q < depth_blocks; ++q)
    pack_rhs(packed_w.data() + q * block_b, typename P::matrix_mapper(w + q * kc * N, N), std::min(kc, K - q * kc), N);
  // Rows per chunk: Eigen's block height, at most packed_patches_limit values and at
  // least four chunks per thread where there are enough rows, in whole panels of the
  // kernel's height.
  const std::int64_t mr = P::traits::mr, per_thread = (rows + 4 * ctx.device().num_threads() - 1) / (4 * ctx.device().num_threads());
  const std::int64_t most = std::min<std::int64_t>({mc, per_thread, packed_patches_limit / kc});
  const std::int64_t chunk = std::max<std::int64_t>(mr, (most + mr - 1) / mr * mr);
  const std::int64_t chunks = (rows + chunk - 1) / chunk;
  ctx.parallel_for(chunks, 2.0 * static_cast<double>(chunk * K * N), [&](std::int64_t b, std::int64_t e) {
    C* block_a = scratch<C>(chunk * kc, 0);
    C* res = scratch<C>(chunk * N, 1);
    thread_local std::vector<patch_row> row_info;
    typename P::template pack_lhs<patch_mapper<C, false>, Eigen::RowMajor> pack_lhs;
    typename P::kernel kernel;
    for (std::int64_t q = b; q < e; ++q) {
      const std::int64_t r0 = q * chunk, m = std::min(rows, r0 + chunk) - r0;
      patch_rows(g, r0, r0 + m, row_info);
      std::fill_n(res, m * N, C(0));
      for (std::int64_t d = 0; d < depth_blocks; ++d) {
        const std::int64_t k0 = d * kc, depth = std::min(kc, K - k0);
        pack_lhs(block_a, patch_mapper<C, false>(g, in, row_info.data(), taps.data() + k0), depth, m);
        kernel(typename P::res_mapper(res, m), block_a, packed_w.data() + d * block_b, m, depth, N, C(1));
      }
      row_major_map<C>(out + r0 * N, m, N) = const_col_major_map<C>(res, m, N);
    }
  });
}

/// d_w [K, n] = patches(in)^T [K, rows] * d_out [rows, n]: the output positions cut into
/// blocks, a column-major partial sum per block (the kernel's favoured result order), summed
/// into d_w at the end.
template <class C>
void patch_gemm_filter(const kernel_context& ctx, const geometry& g, const C* in, const C* d_out, C* d_w) {
  using P = gebp_parts<C>;
  const std::int64_t K = g.patch(), N = g.k, rows = g.rows(), size = K * N;
  const std::vector<patch_tap> taps = patch_taps(g);
  Eigen::Index kc = rows, mc = K, nc = N;
  ei::computeProductBlockingSizes<C, C, 1>(kc, mc, nc, Eigen::Index{1});
  // A packed block of at most packed_patches_limit values: fewer positions per block,
  // down to 64, then fewer patch columns.
  kc = std::min<Eigen::Index>(kc, std::max<std::int64_t>(64, packed_patches_limit / K));
  mc = patch_depth_block<C>(g, std::min<std::int64_t>(mc, std::max<std::int64_t>(1, packed_patches_limit / kc)));
  const std::int64_t depth_chunks = (rows + kc - 1) / kc, blocks = blocks_for(ctx, depth_chunks, 1);
  std::vector<C> partial(static_cast<std::size_t>(blocks * size), C(0));
  ctx.parallel_for(blocks, 1e9, [&](std::int64_t b, std::int64_t e) {
    C* block_a = scratch<C>(mc * kc, 0);
    C* block_b = scratch<C>(kc * N, 1);
    thread_local std::vector<patch_row> row_info;
    typename P::template pack_lhs<patch_mapper<C, true>, Eigen::ColMajor> pack_lhs;
    typename P::pack_rhs pack_rhs;
    typename P::kernel kernel;
    for (std::int64_t blk = b; blk < e; ++blk)
      for (std::int64_t q = blk * depth_chunks / blocks; q < (blk + 1) * depth_chunks / blocks; ++q) {
        const std::int64_t r0 = q * kc, depth = std::min<std::int64_t>(rows, r0 + kc) - r0;
        patch_rows(g, r0, r0 + depth, row_info);
        pack_rhs(block_b, typename P::matrix_mapper(d_out + r0 * N, N), depth, N);
        for (std::int64_t k0 = 0; k0 < K; k0 += mc) {
          const std::int64_t m = std::min<std::int64_t>(mc, K - k0);
          pack_lhs(block_a, patch_mapper<C, true>(g, in, row_info.data(), taps.data() + k0), depth, m);
          kernel(typename P::res_mapper(partial.data() + blk * size + k0, K), block_a, block_b, m, depth, N, C(1));
        }
      }
  });
  row_major_map<C> out(d_w, K, N);
  out = const_col_major_map<C>(partial.data(), K, N);
  for (std::int64_t blk = 1; blk < blocks; ++blk) out += const_col_major_map<C>(partial.data() + blk * size, K, N);
}

}  // namespace weft::cpu::nn
