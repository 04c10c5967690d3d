// CPU kernels for convolution, pooling and dropout (ops/nn_ops.hpp), NHWC.
//
// Conv2D and its two gradients are products with the patch matrix [rows, kh * kw * c] (a
// row per output position, its window's values), which is never built whole:
// - Register blocks, where the output channels fill whole packets: a run of output
//   positions times one or two packets of channels (or, for the filter's gradient, a run
//   of input channels times one or two packets) summed in registers straight from a
//   zero-padded copy of each image. The filter's gradient takes them with at least two
//   images per thread (each thread sums its own images).
// - Direct loops for a patch of at most 64 values (a first layer over few channels).
// - Otherwise a GEMM whose patch operand Eigen's packing routines read from the input in
//   place (patch_mapper), multiplied by Eigen's GEBP kernel.
// Conv2D takes the first that applies; the filter's gradient prefers the direct loops to
// register blocks (which for one input channel would load a packet per multiply-add). The
// input's gradient with stride 1 is the convolution of the output's gradient by the filter
// turned 180 degrees, done as Conv2D; with larger strides a GEMM by the filter and a
// scatter of its rows back into the input (col2im), an image per thread. A 1x1 convolution
// with stride 1 is one GEMM. Pooling walks the windows directly, the channels of a position
// being contiguous. float16 and bfloat16 compute in float (nn_kernel.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/kernels/cpu/matmul.hpp>
#include <weft/kernels/cpu/nn_kernel.hpp>
#include <weft/kernels/cpu/random.hpp>

namespace weft::cpu::nn {

// The window attrs of a node (its op's shape function checked them when it was built).
inline ops::window_attrs window_attrs_of(const node& n) {
  ops::window_attrs w;
  auto pair = [&](const char* name, std::int64_t& h, std::int64_t& wd) {
    if (const attr_value* v = n.attrs().find(name))
      if (const auto* l = v->get_if<std::vector<std::int64_t>>(); l && l->size() == 4) h = (*l)[1], wd = (*l)[2];
  };
  pair("ksize", w.kh, w.kw);
  pair("strides", w.sh, w.sw);
  pair("dilations", w.dh, w.dw);
  w.same = n.attr<std::string>("padding") == "SAME";
  return w;
}

// The geometry of one convolution or pooling: input [n, h, w, c], a kh x kw window, output
// [n, oh, ow, k] (k = c for pooling).
struct geometry {
  std::int64_t n = 0, h = 0, w = 0, c = 0, kh = 1, kw = 1, k = 0;
  std::int64_t sh = 1, sw = 1, dh = 1, dw = 1;
  std::int64_t oh = 0, ow = 0, pad_top = 0, pad_left = 0;
  std::int64_t patch() const { return kh * kw * c; }
  std::int64_t positions() const { return oh * ow; }  // per image
  std::int64_t rows() const { return n * oh * ow; }
  shape output_shape() const { return shape{n, oh, ow, k}; }
  // The first input row (column) of output row y (column x); may be negative (padding).
  std::int64_t top(std::int64_t y) const { return y * sh - pad_top; }
  std::int64_t left(std::int64_t x) const { return x * sw - pad_left; }
};

inline geometry make_geometry(const shape& in, std::int64_t kh, std::int64_t kw, std::int64_t k,
                              const ops::window_attrs& a, const char* what = "input") {
  if (in.rank() != 4) fail(error_code::invalid_argument, what, " must have rank 4 (NHWC), got shape ", in);
  if (kh < 1 || kw < 1)
    fail(error_code::invalid_argument, "the window's height and width must be positive, got ", kh, "x", kw);
  geometry g;
  g.n = in[0], g.h = in[1], g.w = in[2], g.c = in[3], g.kh = kh, g.kw = kw, g.k = k;
  g.sh = a.sh, g.sw = a.sw, g.dh = a.dh, g.dw = a.dw;
  auto y = ops::window_of(g.h, kh, g.sh, g.dh, a.same), x = ops::window_of(g.w, kw, g.sw, g.dw, a.same);
  if (!y || !x)
    fail(error_code::invalid_argument, "the ", kh, "x", kw, " window (dilations ", g.dh, ", ", g.dw, ") does not fit in the ",
         what, " ", in, " with VALID padding");
  g.oh = y->out, g.pad_top = y->pad, g.ow = x->out, g.pad_left = x->pad;
  (void)checked_mul(checked_mul(kh, kw, "the window's size"), g.c, "the window's size");  // patch() fits
  return g;
}

inline shape sizes_shape(const tensor& t, const char* what) {
  if (t.rank() != 1 || t.num_elements() != 4)
    fail(error_code::invalid_argument, what, " must be a vector of 4 dims, got shape ", t.shape());
  return shape_from_dims(int_values(t, what), what);
}

inline void require_shape(const tensor& t, const shape& expected, const char* what, const geometry& g) {
  if (t.shape() != expected)
    fail(error_code::invalid_argument, what, " has shape ", t.shape(), "; the input [", g.n, ", ", g.h, ", ", g.w, ", ", g.c,
         "] and a ", g.kh, "x", g.kw, " window give ", expected);
}

// Rows of patches (of `patch` values each) that fill about 128K elements, at least 16.
inline std::int64_t cache_rows(std::int64_t patch) {
  return std::max<std::int64_t>(16, (std::int64_t{1} << 17) / std::max<std::int64_t>(patch, 1));
}

// The scatter behind a strided convolution's input gradient: adds the value at (r, kk) of a
// patch matrix with rows [r0, r1) to the input element that patch value was taken from.
template <class C>
void col2im_add(const geometry& g, const C* cols, std::int64_t r0, std::int64_t r1, C* in) {
  const std::int64_t K = g.patch(), c = g.c;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t b = r / g.positions(), y = r % g.positions() / g.ow, x = r % g.ow;
    const C* src = cols + (r - r0) * K;
    for (std::int64_t i = 0; i < g.kh; ++i) {
      const std::int64_t iy = g.top(y) + i * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      C* dst = in + (b * g.h + iy) * g.w * c;
      for (std::int64_t j = 0; j < g.kw; ++j) {
        const std::int64_t ix = g.left(x) + j * g.dw;
        if (ix < 0 || ix >= g.w) continue;
        C* d = dst + ix * c;
        const C* s = src + (i * g.kw + j) * c;
        for (std::int64_t t = 0; t < c; ++t) d[t] += s[t];
      }
    }
  }
}

// A buffer of at least n values for this thread, aligned for Eigen's packets and kept
// between calls (slot 0 or 1): a block of packed patches is about half a megabyte, which
// malloc would map afresh, and the kernel zero, on every call. A body of parallel_for never
// waits, so a thread uses its buffer for one body at a time.
template <class C>
C* scratch(std::int64_t n, int slot) {
  thread_local std::vector<C, Eigen::aligned_allocator<C>> buffers[2];
  auto& b = buffers[slot];
  if (b.size() < static_cast<std::size_t>(n)) b.resize(static_cast<std::size_t>(n));
  return b.data();
}

// out[0, size) = the sum over blocks of units [0, units) (blocks_for: at least min_units
// each) of body(sum, u0, u1), which adds the part of units [u0, u1) into a zeroed sum: the
// first block's sum is out itself, the others partial buffers added at the end.
template <class C, class Body>
void summed_in_blocks(const kernel_context& ctx, std::int64_t units, std::int64_t min_units, std::int64_t size, C* out,
                      Body&& body) {
  std::fill_n(out, size, C(0));
  const std::int64_t blocks = blocks_for(ctx, units, min_units);
  std::vector<C> partial(static_cast<std::size_t>(std::max<std::int64_t>(0, blocks - 1) * size), C(0));
  ctx.parallel_for(blocks, 1e9, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t blk = b; blk < e; ++blk)
      body(blk == 0 ? out : partial.data() + (blk - 1) * size, blk * units / blocks, (blk + 1) * units / blocks);
  });
  row_map<C> sum(out, size);
  for (std::int64_t blk = 1; blk < blocks; ++blk) sum += const_row_map<C>(partial.data() + (blk - 1) * size, size);
}

// ---- implicit GEMM: the patch matrix read in place ----------------------------------------
// Eigen's packing routines (which copy each block of an operand into the order its GEBP
// kernel reads) read the patches through patch_mapper straight from the input, and the
// kernel multiplies the packed blocks. im2col wrote each patch value into a buffer that the
// packing then copied again; here it is copied once (Conv2D of LeNet's second layer: 5.5 ->
// 4.5 ms on one thread).
namespace ei = Eigen::internal;

// Where column kk = (i * kw + j) * c + ci of the patch matrix lies relative to a window's
// origin: an element offset, input row and column offsets, and how many columns from kk on
// stay in tap (i, j)'s run of contiguous channels.
struct patch_tap {
  std::int64_t offset, dy, dx, run;
};
// A row of the patch matrix (an output position): its window's origin, an element offset
// and an input row and column (negative or past the input where the window overhangs).
struct patch_row {
  std::int64_t offset, y, x;
};

inline std::vector<patch_tap> patch_taps(const geometry& g) {
  std::vector<patch_tap> taps(static_cast<std::size_t>(g.patch()));
  for (std::int64_t kk = 0; kk < g.patch(); ++kk) {
    const std::int64_t tap = kk / g.c, ci = kk % g.c, dy = tap / g.kw * g.dh, dx = tap % g.kw * g.dw;
    taps[static_cast<std::size_t>(kk)] = {(dy * g.w + dx) * g.c + ci, dy, dx, g.c - ci};
  }
  return taps;
}

inline void patch_rows(const geometry& g, std::int64_t r0, std::int64_t r1, std::vector<patch_row>& rows) {
  rows.resize(static_cast<std::size_t>(r1 - r0));
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t b = r / g.positions(), y = g.top(r % g.positions() / g.ow), x = g.left(r % g.ow);
    rows[static_cast<std::size_t>(r - r0)] = {((b * g.h + y) * g.w + x) * g.c, y, x};
  }
}

// The patch matrix of `in` under a convolution as an Eigen data mapper: element (r, kk), or
// (kk, r) when Transposed; packets run along kk. A packet inside one tap's channels is one
// load (or zeros where the tap lies outside the input); one that crosses taps is gathered.
template <class C, bool Transposed>
class patch_mapper {
 public:
  using LinearMapper = void;  // named by Eigen's packing routines, never used by them
  patch_mapper(const geometry& g, const C* in, const patch_row* rows, const patch_tap* taps)
      : in_(in), rows_(rows), taps_(taps), h_(static_cast<std::uint64_t>(g.h)), w_(static_cast<std::uint64_t>(g.w)) {}
  C operator()(Eigen::Index i, Eigen::Index j) const { return Transposed ? at(j, i) : at(i, j); }
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

// Eigen's GEMM parts for C (as general_matrix_matrix_product instantiates them): packing
// of either operand from a mapper M stored in Order, and the kernel, into a column-major
// result.
template <class C>
struct gebp_parts {
  using traits = ei::gebp_traits<C, C>;
  using res_mapper = ei::blas_data_mapper<C, Eigen::Index, Eigen::ColMajor>;
  using matrix_mapper = ei::const_blas_data_mapper<C, Eigen::Index, Eigen::RowMajor>;
  template <class M, int Order>
  using pack_lhs = ei::gemm_pack_lhs<C, Eigen::Index, M, traits::mr, traits::LhsProgress,
                                     typename traits::LhsPacket4Packing, Order>;
  using pack_rhs = ei::gemm_pack_rhs<C, Eigen::Index, matrix_mapper, traits::nr, Eigen::RowMajor>;
  using kernel = ei::gebp_kernel<C, C, Eigen::Index, res_mapper, traits::mr, traits::nr, false, false>;
  // Packed blocks are read with aligned loads: each starts on a multiple of this many values.
  static constexpr std::int64_t align = std::max<std::int64_t>(1, EIGEN_MAX_ALIGN_BYTES / sizeof(C));
  static std::int64_t aligned(std::int64_t n) { return (n + align - 1) / align * align; }
};

// The most values a block of packed patches holds (1 MiB of floats): Eigen's blocking
// would pack a filter gradient's whole [K, kc] patch block however large K.
inline constexpr std::int64_t packed_patches_limit = std::int64_t{1} << 18;

// Depth blocks of a patch matrix's columns: Eigen's block depth, evened out over the
// blocks and rounded up to whole taps where a tap has a packet's worth of channels, so
// that a packet never crosses a tap.
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

// out [rows, n] = patches(in) [rows, K] * w [K, n], w row-major: chunks of output rows per
// thread, each computed into a column-major block (Eigen's kernel works down a column-major
// result in panels of several packets) and transposed into out.
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

// d_w [K, n] = patches(in)^T [K, rows] * d_out [rows, n]: the output positions cut into
// blocks, a column-major partial sum per block (the kernel's favoured result order), summed
// into d_w at the end.
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

// ---- register blocks ---------------------------------------------------------------------
// For a batch of images whose output channels fill whole packets, Conv2D skips the patch
// matrix altogether: a run of P output positions of one row times NB packets of output
// channels is summed in P * NB registers, and for every tap and input channel the filter's
// NB packets are loaded once and each position's input value is broadcast into them. A
// packed patch matrix costs a copy of every patch value (25 per input value for a 5x5
// window) and the loads of the packed blocks; here every multiply-add takes one broadcast.
// The filter's gradient holds a run of input channels times NB packets instead, over the
// positions. Each image is first copied into a buffer with its padding as zeros, so no tap
// is checked.
template <class C>
using packet_t = typename ei::packet_traits<C>::type;
template <class C>
inline constexpr std::int64_t packet_size = ei::packet_traits<C>::size;
// Positions per block: what the registers hold beside the filter's NB packets and a
// broadcast value, at most 14.
template <int NB>
inline constexpr int block_positions = std::clamp((static_cast<int>(EIGEN_ARCH_DEFAULT_NUMBER_OF_REGISTERS) - NB - 2) / NB, 1, 14);

// Unrolls the loop that follows completely (the register blocks' loops over their
// compile-time sizes, so that their sums stay in registers).
#define WEFT_DETAIL_UNROLL _Pragma("GCC unroll 16")

// The image buffer's geometry: rows of `width` positions of c values, every window inside.
struct padded_image {
  std::int64_t height, width, row;  // row: values per buffer row
  explicit padded_image(const geometry& g)
      : height((g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1), width((g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1), row(width * g.c) {}
  std::int64_t size() const { return height * row; }
  // Whether the buffer of an image stays within four times the image plus 64 Ki values (and
  // so its sizes fit in int64). Padding far wider than the image (a dilation of 2^61 pads a
  // row by 2^61 on each side) is left to the paths that test each tap, not copied.
  static bool fits(const geometry& g) {
    auto extent = [](std::int64_t out, std::int64_t stride, std::int64_t k, std::int64_t dilation, std::int64_t& r) {
      std::int64_t a, b;
      return !__builtin_mul_overflow(out - 1, stride, &a) && !__builtin_mul_overflow(k - 1, dilation, &b) &&
             !__builtin_add_overflow(a, b, &r) && !__builtin_add_overflow(r, 1, &r);
    };
    std::int64_t h, w, values;
    if (!extent(g.oh, g.sh, g.kh, g.dh, h) || !extent(g.ow, g.sw, g.kw, g.dw, w) || __builtin_mul_overflow(h, w, &values) ||
        __builtin_mul_overflow(values, g.c, &values))
      return false;
    return (values - (std::int64_t{1} << 16)) / 4 <= g.h * g.w * g.c;  // the image exists: its size fits
  }
  // Copies image img of `in` into buf: buffer position (yy, xx) is input (yy - pad_top, xx - pad_left).
  template <class C>
  void fill(const geometry& g, const C* in, std::int64_t img, C* buf) const {
    for (std::int64_t yy = 0; yy < height; ++yy) {
      C* dst = buf + yy * row;
      const std::int64_t iy = yy - g.pad_top;
      if (iy < 0 || iy >= g.h) {
        std::fill_n(dst, row, C(0));
        continue;
      }
      const std::int64_t x0 = std::clamp<std::int64_t>(g.pad_left, 0, width), x1 = std::clamp<std::int64_t>(g.pad_left + g.w, x0, width);
      std::fill_n(dst, x0 * g.c, C(0));
      std::copy_n(in + ((img * g.h + iy) * g.w + (x0 - g.pad_left)) * g.c, (x1 - x0) * g.c, dst + x0 * g.c);
      std::fill_n(dst + x1 * g.c, (width - x1) * g.c, C(0));
    }
  }
};

// out[p * k + q * S + s] for p < P, q < NB: the sums of P positions (their windows start
// at src, src + sw * c, ...) with filter w's channels from w on (row stride k).
template <class C, int P, int NB>
void register_block(const geometry& g, const padded_image& pi, const C* src, const C* w, C* out) {
  using Packet = packet_t<C>;
  constexpr std::int64_t S = packet_size<C>;
  const std::int64_t c = g.c, N = g.k, x_step = g.sw * c;
  Packet acc[P][NB];
  WEFT_DETAIL_UNROLL
  for (int p = 0; p < P; ++p)
    WEFT_DETAIL_UNROLL
    for (int q = 0; q < NB; ++q) acc[p][q] = ei::pset1<Packet>(C(0));
  for (std::int64_t i = 0; i < g.kh; ++i)
    for (std::int64_t j = 0; j < g.kw; ++j) {
      const C* s = src + i * g.dh * pi.row + j * g.dw * c;
      const C* wt = w + (i * g.kw + j) * c * N;
      for (std::int64_t ci = 0; ci < c; ++ci, wt += N) {
        Packet wv[NB];
        WEFT_DETAIL_UNROLL
        for (int q = 0; q < NB; ++q) wv[q] = ei::ploadu<Packet>(wt + q * S);
        WEFT_DETAIL_UNROLL
        for (int p = 0; p < P; ++p) {
          const Packet v = ei::pset1<Packet>(s[p * x_step + ci]);
          WEFT_DETAIL_UNROLL
          for (int q = 0; q < NB; ++q) acc[p][q] = ei::pmadd(v, wv[q], acc[p][q]);
        }
      }
    }
  WEFT_DETAIL_UNROLL
  for (int p = 0; p < P; ++p)
    WEFT_DETAIL_UNROLL
    for (int q = 0; q < NB; ++q) ei::pstoreu(out + p * N + q * S, acc[p][q]);
}

// Calls f(std::integral_constant<int, n>{}) for a run-time n in [1, Max].
template <int Max, class F>
void with_count(std::int64_t n, F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (void)((n == I + 1 ? (f(std::integral_constant<int, I + 1>{}), true) : false) || ...);
  }(std::make_integer_sequence<int, Max>{});
}

// The length of runs of at most `most` that cut n as evenly as they can.
inline std::int64_t even_run(std::int64_t n, std::int64_t most) {
  const std::int64_t runs = (n + most - 1) / most;
  return (n + runs - 1) / runs;
}

// Calls f(nb, q) for the blocks of packets of k output channels: pairs, and one packet last
// when their number is odd.
template <class F>
void for_each_packet_block(std::int64_t packets, F&& f) {
  for (std::int64_t q = 0; q < packets; q += 2) f(packets - q >= 2 ? 2 : 1, q);
}

inline bool use_register_blocks(const geometry& g, std::int64_t packet) {
  return g.k % packet == 0 && padded_image::fits(g);
}

// Output row y of an image from its padded copy: runs of positions times blocks of packets.
template <class C>
void register_blocks_row(const geometry& g, const padded_image& pi, const C* image, const C* w, std::int64_t y, C* out_row) {
  constexpr std::int64_t S = packet_size<C>;
  const C* src_row = image + y * g.sh * pi.row;
  for_each_packet_block(g.k / S, [&](int nb, std::int64_t q) {
    const std::int64_t run = even_run(g.ow, nb == 2 ? block_positions<2> : block_positions<1>);
    for (std::int64_t x = 0; x < g.ow; x += run) {
      const std::int64_t p = std::min(run, g.ow - x);
      const C* src = src_row + x * g.sw * g.c;
      C* o = out_row + x * g.k + q * S;
      if (nb == 2) with_count<block_positions<2>>(p, [&](auto P) { register_block<C, P(), 2>(g, pi, src, w + q * S, o); });
      else with_count<block_positions<1>>(p, [&](auto P) { register_block<C, P(), 1>(g, pi, src, w + q * S, o); });
    }
  });
}

// out = conv(in, w) (w [K, k] row-major). With at least two images per thread, an image
// per thread at a time, copied into the thread's buffer (which stays in its cache);
// otherwise every image copied once and the output rows spread over the threads.
template <class C>
void register_blocks_forward(const kernel_context& ctx, const geometry& g, const C* in, const C* w, C* out) {
  const padded_image pi(g);
  const double row_cost = 2.0 * static_cast<double>(g.ow * g.patch() * g.k);
  if (g.n >= 2 * ctx.device().num_threads()) {
    ctx.parallel_for(g.n, row_cost * static_cast<double>(g.oh), [&](std::int64_t b, std::int64_t e) {
      C* buf = scratch<C>(pi.size(), 0);
      for (std::int64_t img = b; img < e; ++img) {
        pi.fill(g, in, img, buf);
        for (std::int64_t y = 0; y < g.oh; ++y) register_blocks_row(g, pi, buf, w, y, out + (img * g.oh + y) * g.ow * g.k);
      }
    });
    return;
  }
  std::vector<C, Eigen::aligned_allocator<C>> images(static_cast<std::size_t>(g.n * pi.size()));
  for (std::int64_t img = 0; img < g.n; ++img) pi.fill(g, in, img, images.data() + img * pi.size());
  ctx.parallel_for(g.n * g.oh, row_cost, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t row = b; row < e; ++row)
      register_blocks_row(g, pi, images.data() + row / g.oh * pi.size(), w, row % g.oh, out + row * g.ow * g.k);
  });
}

// d_w[tap (i, j), channels ci0 .. ci0 + CI, k0 .. k0 + NB * S] += the sum over image img's
// output positions of the input under that tap times d_out: CI * NB sums in registers, the
// output gradient's NB packets loaded once per position and each input value broadcast.
template <class C, int CI, int NB>
void register_filter_block(const geometry& g, const padded_image& pi, const C* buf, const C* d_img, std::int64_t i,
                           std::int64_t j, std::int64_t ci0, std::int64_t k0, C* d_w) {
  using Packet = packet_t<C>;
  constexpr std::int64_t S = packet_size<C>;
  const std::int64_t N = g.k, x_step = g.sw * g.c;
  Packet acc[CI][NB];
  WEFT_DETAIL_UNROLL
  for (int c = 0; c < CI; ++c)
    WEFT_DETAIL_UNROLL
    for (int q = 0; q < NB; ++q) acc[c][q] = ei::pset1<Packet>(C(0));
  for (std::int64_t y = 0; y < g.oh; ++y) {
    const C* s = buf + (y * g.sh + i * g.dh) * pi.row + j * g.dw * g.c + ci0;
    const C* d = d_img + y * g.ow * N + k0;
    for (std::int64_t x = 0; x < g.ow; ++x, s += x_step, d += N) {
      Packet dv[NB];
      WEFT_DETAIL_UNROLL
      for (int q = 0; q < NB; ++q) dv[q] = ei::ploadu<Packet>(d + q * S);
      WEFT_DETAIL_UNROLL
      for (int c = 0; c < CI; ++c) {
        const Packet v = ei::pset1<Packet>(s[c]);
        WEFT_DETAIL_UNROLL
        for (int q = 0; q < NB; ++q) acc[c][q] = ei::pmadd(v, dv[q], acc[c][q]);
      }
    }
  }
  WEFT_DETAIL_UNROLL
  for (int c = 0; c < CI; ++c)
    WEFT_DETAIL_UNROLL
    for (int q = 0; q < NB; ++q) {
      C* to = d_w + ((i * g.kw + j) * g.c + ci0 + c) * N + k0 + q * S;
      ei::pstoreu(to, ei::padd(ei::ploadu<Packet>(to), acc[c][q]));
    }
}
#undef WEFT_DETAIL_UNROLL

// d_w = patches(in)^T * d_out in register blocks, over blocks of images (summed_in_blocks).
template <class C>
void register_blocks_filter(const kernel_context& ctx, const geometry& g, const C* in, const C* d_out, C* d_w) {
  constexpr std::int64_t S = packet_size<C>;
  const padded_image pi(g);
  const std::int64_t packets = g.k / S;
  summed_in_blocks(ctx, g.n, 1, g.patch() * g.k, d_w, [&](C* sum, std::int64_t b, std::int64_t e) {
    C* buf = scratch<C>(pi.size(), 0);
    for (std::int64_t img = b; img < e; ++img) {
      pi.fill(g, in, img, buf);
      const C* d_img = d_out + img * g.positions() * g.k;
      for (std::int64_t i = 0; i < g.kh; ++i)
        for (std::int64_t j = 0; j < g.kw; ++j)
          for_each_packet_block(packets, [&](int nb, std::int64_t q) {
            const std::int64_t run = even_run(g.c, nb == 2 ? block_positions<2> : block_positions<1>);
            for (std::int64_t ci = 0; ci < g.c; ci += run) {
              const std::int64_t n = std::min(run, g.c - ci);
              if (nb == 2)
                with_count<block_positions<2>>(n, [&](auto CI) { register_filter_block<C, CI(), 2>(g, pi, buf, d_img, i, j, ci, q * S, sum); });
              else
                with_count<block_positions<1>>(n, [&](auto CI) { register_filter_block<C, CI(), 1>(g, pi, buf, d_img, i, j, ci, q * S, sum); });
            }
          });
    }
  });
}

inline bool is_pointwise(const geometry& g) { return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1; }

// ---- direct convolution, for small patches ----------------------------------------------
// When a patch is small (kh * kw * c <= direct_patch_limit, as in a first layer over one
// to three channels), im2col copies each input value kh * kw times into a GEMM whose depth
// (forward) or height (filter gradient) is that small patch, where Eigen's GEBP runs at a
// fraction of its speed. The direct loops below read the input in place instead. Output
// channels go in blocks of `lanes` values (64 bytes), each block's sums held in registers.
inline constexpr std::int64_t direct_patch_limit = 64;
inline bool is_direct(const geometry& g) { return g.patch() <= direct_patch_limit && !is_pointwise(g); }
template <class C>
inline constexpr std::int64_t lanes = std::max<std::int64_t>(1, 64 / static_cast<std::int64_t>(sizeof(C)));

// The output columns [x0, x1) whose window's column j lies inside the input.
inline std::pair<std::int64_t, std::int64_t> columns_inside(const geometry& g, std::int64_t j) {
  auto first_at_least = [&](std::int64_t v) {  // the least x with x * sw >= v, in [0, ow]
    return v <= 0 ? 0 : std::min(g.ow, (v + g.sw - 1) / g.sw);
  };
  const std::int64_t shift = g.pad_left - j * g.dw;  // input column left(x) + j * dw = x * sw - shift
  return {first_at_least(shift), std::max(first_at_least(shift), first_at_least(g.w + shift))};
}

// A block of output channels [k0, k0 + width): `Fixed` values (a packet or a few, held in
// registers) or, for the last block, fewer (Fixed = 0, width given).
template <std::int64_t Fixed, class C>
using lane_block = Eigen::Array<C, (Fixed > 0 ? Fixed : Eigen::Dynamic), 1, 0, (Fixed > 0 ? Fixed : lanes<C>), 1>;
template <std::int64_t Fixed, class C>
auto lanes_at(const C* p, std::int64_t width) {
  if constexpr (Fixed > 0) return Eigen::Map<const lane_block<Fixed, C>>(p);
  else return Eigen::Map<const lane_block<Fixed, C>>(p, width);
}
template <std::int64_t Fixed, class C>
lane_block<Fixed, C> zero_lanes(std::int64_t width) {
  if constexpr (Fixed > 0) return lane_block<Fixed, C>::Zero();
  else return lane_block<Fixed, C>::Zero(width);
}
template <std::int64_t Fixed, class C>
void store_lanes(C* p, const lane_block<Fixed, C>& v) {
  Eigen::Map<lane_block<Fixed, C>>(p, v.size()) = v;
}

// Output row (img, y), channels [k0, k0 + width): out[x] = the sum over x's window. Runs of
// four positions whose windows lie inside the input share each filter block's load (four
// sums in registers); the others check each tap.
template <std::int64_t Fixed, class C>
void direct_forward_row(const geometry& g, const C* in, const C* f, C* out_row, std::int64_t img, std::int64_t y,
                        std::int64_t k0, std::int64_t width, std::int64_t inner0, std::int64_t inner1) {
  auto tap = [&](std::int64_t i, std::int64_t j, std::int64_t ci) { return lanes_at<Fixed>(f + ((i * g.kw + j) * g.c + ci) * g.k + k0, width); };
  auto row_of = [&](std::int64_t i) -> const C* {
    const std::int64_t iy = g.top(y) + i * g.dh;
    return iy < 0 || iy >= g.h ? nullptr : in + (img * g.h + iy) * g.w * g.c;
  };
  const std::int64_t step = g.sw * g.c;
  std::int64_t x = 0;
  auto one = [&](std::int64_t px) {
    lane_block<Fixed, C> acc = zero_lanes<Fixed, C>(width);
    for (std::int64_t i = 0; i < g.kh; ++i)
      if (const C* row = row_of(i))
        for (std::int64_t j = 0; j < g.kw; ++j) {
          const std::int64_t ix = g.left(px) + j * g.dw;
          if (ix < 0 || ix >= g.w) continue;
          for (std::int64_t ci = 0; ci < g.c; ++ci) acc += row[ix * g.c + ci] * tap(i, j, ci);
        }
    store_lanes<Fixed>(out_row + px * g.k + k0, acc);
  };
  for (; x < std::min(inner0, g.ow); ++x) one(x);
  for (; x + 4 <= inner1; x += 4) {
    lane_block<Fixed, C> a0 = zero_lanes<Fixed, C>(width), a1 = a0, a2 = a0, a3 = a0;
    for (std::int64_t i = 0; i < g.kh; ++i)
      if (const C* row = row_of(i))
        for (std::int64_t j = 0; j < g.kw; ++j) {
          const C* src = row + (g.left(x) + j * g.dw) * g.c;
          for (std::int64_t ci = 0; ci < g.c; ++ci) {
            const auto fv = tap(i, j, ci);
            a0 += src[ci] * fv, a1 += src[ci + step] * fv, a2 += src[ci + 2 * step] * fv, a3 += src[ci + 3 * step] * fv;
          }
        }
    store_lanes<Fixed>(out_row + x * g.k + k0, a0);
    store_lanes<Fixed>(out_row + (x + 1) * g.k + k0, a1);
    store_lanes<Fixed>(out_row + (x + 2) * g.k + k0, a2);
    store_lanes<Fixed>(out_row + (x + 3) * g.k + k0, a3);
  }
  for (; x < g.ow; ++x) one(x);
}

template <class C>
void direct_forward(const kernel_context& ctx, const geometry& g, const C* in, const C* f, C* out) {
  constexpr std::int64_t W = lanes<C>;
  // The output columns whose whole window row lies inside the input.
  std::int64_t inner0 = 0, inner1 = g.ow;
  for (std::int64_t j = 0; j < g.kw; ++j) {
    const auto [x0, x1] = columns_inside(g, j);
    inner0 = std::max(inner0, x0), inner1 = std::min(inner1, x1);
  }
  ctx.parallel_for(g.n * g.oh, 2.0 * static_cast<double>(g.ow * g.patch() * g.k), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t row = b; row < e; ++row) {
      C* o = out + row * g.ow * g.k;
      std::int64_t k0 = 0;
      for (; k0 + W <= g.k; k0 += W) direct_forward_row<W>(g, in, f, o, row / g.oh, row % g.oh, k0, W, inner0, inner1);
      if (k0 < g.k) direct_forward_row<0>(g, in, f, o, row / g.oh, row % g.oh, k0, g.k - k0, inner0, inner1);
    }
  });
}

// For filter channels [k0, k0 + width): adds, for every tap of the window, the products of
// output row (img, y)'s gradients with the input values under that tap, to d_f. Four sums
// over alternate positions keep four multiply-adds in flight.
template <std::int64_t Fixed, class C>
void direct_filter_row(const geometry& g, const C* in, const C* d_out, C* d_f, std::int64_t img, std::int64_t y,
                       std::int64_t k0, std::int64_t width) {
  const C* d_row = d_out + (img * g.oh + y) * g.ow * g.k + k0;
  auto d_at = [&](std::int64_t x) { return lanes_at<Fixed>(d_row + x * g.k, width); };
  for (std::int64_t i = 0; i < g.kh; ++i) {
    const std::int64_t iy = g.top(y) + i * g.dh;
    if (iy < 0 || iy >= g.h) continue;
    const C* in_row = in + (img * g.h + iy) * g.w * g.c;
    for (std::int64_t j = 0; j < g.kw; ++j) {
      const auto [x0, x1] = columns_inside(g, j);
      const std::int64_t step = g.sw * g.c;
      for (std::int64_t ci = 0; ci < g.c; ++ci) {
        const C* v = in_row + (g.left(x0) + j * g.dw) * g.c + ci;  // the input under position x0
        lane_block<Fixed, C> a0 = zero_lanes<Fixed, C>(width), a1 = a0, a2 = a0, a3 = a0;
        std::int64_t x = x0;
        for (; x + 4 <= x1; x += 4, v += 4 * step)
          a0 += v[0] * d_at(x), a1 += v[step] * d_at(x + 1), a2 += v[2 * step] * d_at(x + 2), a3 += v[3 * step] * d_at(x + 3);
        for (; x < x1; ++x, v += step) a0 += v[0] * d_at(x);
        Eigen::Map<lane_block<Fixed, C>> into(d_f + ((i * g.kw + j) * g.c + ci) * g.k + k0, width);
        into += (a0 + a1) + (a2 + a3);
      }
    }
  }
}

// d_f is summed over blocks of output rows (summed_in_blocks).
template <class C>
void direct_filter(const kernel_context& ctx, const geometry& g, const C* in, const C* d_out, C* d_f) {
  constexpr std::int64_t W = lanes<C>;
  const std::int64_t size = g.patch() * g.k;
  summed_in_blocks(ctx, g.n * g.oh, std::max<std::int64_t>(1, (std::int64_t{1} << 16) / (g.ow * size)), size, d_f,
                   [&](C* sum, std::int64_t b, std::int64_t e) {
                     for (std::int64_t row = b; row < e; ++row) {
                       const std::int64_t img = row / g.oh, y = row % g.oh;
                       std::int64_t k0 = 0;
                       for (; k0 + W <= g.k; k0 += W) direct_filter_row<W>(g, in, d_out, sum, img, y, k0, W);
                       if (k0 < g.k) direct_filter_row<0>(g, in, d_out, sum, img, y, k0, g.k - k0);
                     }
                   });
}

// out = conv(in, w), w [K, k] row-major, without a patch matrix: in register blocks where
// they apply, else directly for a small patch, else as an implicit GEMM.
template <class C>
void conv_unpacked(const kernel_context& ctx, const geometry& g, const C* in, const C* w, C* out) {
  if (use_register_blocks(g, packet_size<C>)) return register_blocks_forward<C>(ctx, g, in, w, out);
  if (is_direct(g)) return direct_forward<C>(ctx, g, in, w, out);
  patch_gemm_forward<C>(ctx, g, in, w, out);
}

// d_in = the convolution, stride 1, of d_out by the filter turned 180 degrees with its
// channels swapped: d_in[b, iy, ix, ci] sums d_out[b, y, x, k] * f[i, j, ci, k] over the
// (y, x) = (iy + pad_top - i * dh, ix + pad_left - j * dw) inside d_out, which with
// i' = kh - 1 - i is a window of d_out at iy - ((kh - 1) * dh - pad_top) + i' * dh.
template <class C>
void backprop_input_as_conv(const kernel_context& ctx, const geometry& g, const C* f, const C* d_out, C* d_in) {
  geometry t = g;
  t.h = g.oh, t.w = g.ow, t.c = g.k, t.k = g.c, t.oh = g.h, t.ow = g.w, t.sh = t.sw = 1;
  t.pad_top = (g.kh - 1) * g.dh - g.pad_top, t.pad_left = (g.kw - 1) * g.dw - g.pad_left;
  std::vector<C> turned(static_cast<std::size_t>(g.patch() * g.k));  // [kh, kw, k, c]
  for (std::int64_t i = 0; i < g.kh; ++i)
    for (std::int64_t j = 0; j < g.kw; ++j)
      for (std::int64_t ci = 0; ci < g.c; ++ci)
        for (std::int64_t k = 0; k < g.k; ++k)
          turned[static_cast<std::size_t>((((g.kh - 1 - i) * g.kw + (g.kw - 1 - j)) * g.k + k) * g.c + ci)] =
              f[((i * g.kw + j) * g.c + ci) * g.k + k];
  conv_unpacked<C>(ctx, t, d_out, turned.data(), d_in);
}

// out [rows, k] = patches(in) [rows, K] * filter [K, k].
template <class C>
void conv_forward(const kernel_context& ctx, const geometry& g, const C* in, const C* f, C* out) {
  const std::int64_t rows = g.rows(), K = g.patch();
  if (rows == 0 || g.k == 0) return;
  if (is_pointwise(g)) return gemm<C>(ctx, in, f, out, rows, K, g.k, false, false, false);
  conv_unpacked<C>(ctx, g, in, f, out);
}

// d_in: with stride 1 a convolution of d_out (backprop_input_as_conv); else
// col2im(d_out [rows, k] * filter^T), an image per thread.
template <class C>
void conv_backprop_input(const kernel_context& ctx, const geometry& g, const C* f, const C* d_out, C* d_in) {
  const std::int64_t K = g.patch(), per_image = g.positions();
  if (g.rows() == 0 || K == 0 || g.k == 0) {
    std::fill_n(d_in, g.n * g.h * g.w * g.c, C(0));
    return;
  }
  if (is_pointwise(g)) return gemm<C>(ctx, d_out, f, d_in, g.rows(), g.k, K, false, true, false);
  if (g.sh == 1 && g.sw == 1) return backprop_input_as_conv<C>(ctx, g, f, d_out, d_in);
  std::fill_n(d_in, g.n * g.h * g.w * g.c, C(0));
  const std::int64_t chunk = std::min(per_image, cache_rows(K));
  ctx.parallel_for(g.n, 2.0 * static_cast<double>(per_image * K * g.k), [&](std::int64_t b, std::int64_t e) {
    C* cols = scratch<C>(chunk * K, 0);
    for (std::int64_t img = b; img < e; ++img)
      for (std::int64_t r0 = img * per_image, end = r0 + per_image; r0 < end; r0 += chunk) {
        const std::int64_t r1 = std::min(end, r0 + chunk);
        gemm_rows<C>(d_out + r0 * g.k, f, cols, r1 - r0, g.k, K, false, true, false, 0, r1 - r0);
        col2im_add(g, cols, r0, r1, d_in);
      }
  });
}

// d_filter [K, k] = patches(in)^T * d_out.
template <class C>
void conv_backprop_filter(const kernel_context& ctx, const geometry& g, const C* in, const C* d_out, C* d_f) {
  const std::int64_t rows = g.rows(), K = g.patch(), size = K * g.k;
  if (rows == 0 || size == 0) {
    std::fill_n(d_f, size, C(0));
    return;
  }
  if (is_pointwise(g)) return gemm<C>(ctx, in, d_out, d_f, K, rows, g.k, true, false, false);
  if (is_direct(g)) return direct_filter<C>(ctx, g, in, d_out, d_f);
  if (use_register_blocks(g, packet_size<C>) && g.n >= 2 * ctx.device().num_threads())
    return register_blocks_filter<C>(ctx, g, in, d_out, d_f);
  patch_gemm_filter<C>(ctx, g, in, d_out, d_f);
}

// The geometry of a Conv2D of an input of shape `in` by a filter of shape `f`.
inline geometry conv_geometry(const shape& in, const shape& f, const ops::window_attrs& w) {
  if (f.rank() != 4)
    fail(error_code::invalid_argument, "filter must have rank 4 [height, width, in_channels, out_channels], got shape ", f);
  if (in.rank() == 4 && in[3] != f[2])
    fail(error_code::invalid_argument, "the input's channels (", in[3], ") differ from the filter's input channels (", f[2],
         "); input ", in, ", filter ", f);
  return make_geometry(in, f[0], f[1], f[3], w);
}

struct conv2d {
  static constexpr unsigned value_mask = 0b11;
  explicit conv2d(const node& n) : w_(window_attrs_of(n)) {}
  std::vector<shape> shapes(kernel_context& ctx) const {
    return {conv_geometry(ctx.input(0).shape(), ctx.input(1).shape(), w_).output_shape()};
  }
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    conv_forward<C>(ctx, conv_geometry(v.in[0].shape(), v.in[1].shape(), w_), v.in[0].data<C>(), v.in[1].data<C>(),
                    v.out[0].data<C>());
  }
  ops::window_attrs w_;
};

struct conv2d_backprop_input {
  static constexpr unsigned value_mask = 0b110;
  explicit conv2d_backprop_input(const node& n) : w_(window_attrs_of(n)) {}
  geometry geo(const tensor& sizes, const tensor& f, const tensor& d) const {
    const geometry g = conv_geometry(sizes_shape(sizes, "input_sizes"), f.shape(), w_);
    require_shape(d, g.output_shape(), "out_backprop", g);
    return g;
  }
  std::vector<shape> shapes(kernel_context& ctx) const {
    const geometry g = geo(ctx.input(0), ctx.input(1), ctx.input(2));
    return {shape{g.n, g.h, g.w, g.c}};
  }
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    conv_backprop_input<C>(ctx, geo(v.in[0], v.in[1], v.in[2]), v.in[1].data<C>(), v.in[2].data<C>(), v.out[0].data<C>());
  }
  ops::window_attrs w_;
};

struct conv2d_backprop_filter {
  static constexpr unsigned value_mask = 0b101;
  explicit conv2d_backprop_filter(const node& n) : w_(window_attrs_of(n)) {}
  geometry geo(const tensor& in, const tensor& sizes, const tensor& d) const {
    const geometry g = conv_geometry(in.shape(), sizes_shape(sizes, "filter_sizes"), w_);
    require_shape(d, g.output_shape(), "out_backprop", g);
    return g;
  }
  std::vector<shape> shapes(kernel_context& ctx) const {
    const geometry g = geo(ctx.input(0), ctx.input(1), ctx.input(2));
    return {shape{g.kh, g.kw, g.c, g.k}};
  }
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    conv_backprop_filter<C>(ctx, geo(v.in[0], v.in[1], v.in[2]), v.in[0].data<C>(), v.in[2].data<C>(), v.out[0].data<C>());
  }
  ops::window_attrs w_;
};

// ---- pooling ---------------------------------------------------------------------------
// The valid part [y0, y1) x [x0, x1) of output position (y, x)'s window.
struct window_span {
  std::int64_t y0, y1, x0, x1;
  std::int64_t count() const { return (y1 - y0) * (x1 - x0); }
};
inline window_span span_of(const geometry& g, std::int64_t y, std::int64_t x) {
  const std::int64_t t = g.top(y), l = g.left(x);
  return {std::max<std::int64_t>(t, 0), std::min(t + g.kh, g.h), std::max<std::int64_t>(l, 0), std::min(l + g.kw, g.w)};
}

// Calls f(image, y, x, output row) for the output positions of images [b, e).
template <class F>
void for_each_position(const geometry& g, std::int64_t b, std::int64_t e, F&& f) {
  for (std::int64_t img = b; img < e; ++img)
    for (std::int64_t y = 0; y < g.oh; ++y)
      for (std::int64_t x = 0; x < g.ow; ++x) f(img, y, x, (img * g.oh + y) * g.ow + x);
}

struct pool_base {
  explicit pool_base(const node& n) : w_(window_attrs_of(n)) {}
  geometry geo(const shape& in) const { return make_geometry(in, w_.kh, w_.kw, in.rank() == 4 ? in[3] : 0, w_); }
  double cost(const geometry& g) const { return static_cast<double>(g.positions()) * static_cast<double>(g.patch()); }
  ops::window_attrs w_;
};

template <bool Max>
struct pool : pool_base {
  static constexpr unsigned value_mask = 0b1;
  using pool_base::pool_base;
  std::vector<shape> shapes(kernel_context& ctx) const { return {geo(ctx.input(0).shape()).output_shape()}; }
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const geometry g = geo(v.in[0].shape());
    const C* in = v.in[0].data<C>();
    C* out = v.out[0].data<C>();
    ctx.parallel_for(g.n, cost(g), [&](std::int64_t b, std::int64_t e) {
      for_each_position(g, b, e, [&](std::int64_t img, std::int64_t y, std::int64_t x, std::int64_t r) {
        row_map<C> o(out + r * g.c, g.c);
        const window_span s = span_of(g, y, x);
        o.setConstant(Max ? -std::numeric_limits<C>::infinity() : C(0));
        for (std::int64_t iy = s.y0; iy < s.y1; ++iy)
          for (std::int64_t ix = s.x0; ix < s.x1; ++ix) {
            const_row_map<C> src(in + ((img * g.h + iy) * g.w + ix) * g.c, g.c);
            if constexpr (Max) o = o.max(src);
            else o += src;
          }
        if constexpr (!Max) o /= static_cast<C>(s.count());
      });
    });
  }
};

// The element offsets of output position (img, y, x)'s window inside the input (its valid
// part), and for each channel the index among them of the window's first maximum (a strict
// > keeps the first; a NaN first element stays). Plain loops over pointers taken by value,
// so that they compile to vector compares and blends.
struct window_maxima {
  std::vector<std::int64_t> offsets;
  std::vector<std::int32_t> first;
  std::int64_t count = 0;
  explicit window_maxima(const geometry& g) : offsets(static_cast<std::size_t>(g.kh * g.kw)), first(static_cast<std::size_t>(g.c)) {}
  template <class C>
  void find(const geometry& g, const C* in, C* best, std::int64_t img, std::int64_t y, std::int64_t x) {
    const window_span s = span_of(g, y, x);
    count = 0;
    for (std::int64_t iy = s.y0; iy < s.y1; ++iy)
      for (std::int64_t ix = s.x0; ix < s.x1; ++ix) offsets[static_cast<std::size_t>(count++)] = ((img * g.h + iy) * g.w + ix) * g.c;
    if (count > 0) first_of(in, offsets.data(), count, g.c, best, first.data());
  }
  // The input offset of channel ch's maximum.
  std::int64_t at(std::int64_t ch) const { return offsets[static_cast<std::size_t>(first[static_cast<std::size_t>(ch)])] + ch; }

 private:
  template <class C>
  static void first_of(const C* in, const std::int64_t* offsets, std::int64_t count, std::int64_t channels, C* best,
                       std::int32_t* first) {
    const C* src = in + offsets[0];
    for (std::int64_t ch = 0; ch < channels; ++ch) best[ch] = src[ch], first[ch] = 0;
    for (std::int64_t k = 1; k < count; ++k) {
      src = in + offsets[k];
      const auto kk = static_cast<std::int32_t>(k);
      for (std::int64_t ch = 0; ch < channels; ++ch) {
        const bool greater = src[ch] > best[ch];
        best[ch] = greater ? src[ch] : best[ch];
        first[ch] = greater ? kk : first[ch];
      }
    }
  }
};

// MaxPoolGrad: each window's gradient to the first of its maxima (TensorFlow's CPU choice);
// MaxPoolGradGrad (Second): grad, of the input's shape, read at each window's first maximum.
template <bool Second>
struct max_pool_grad_op : pool_base {
  static constexpr unsigned value_mask = 0b101;  // orig_output is only checked for its shape
  using pool_base::pool_base;
  std::vector<shape> shapes(kernel_context& ctx) const {
    const geometry g = geo(ctx.input(0).shape());
    require_shape(ctx.input(1), g.output_shape(), "orig_output", g);
    require_shape(ctx.input(2), Second ? ctx.input(0).shape() : g.output_shape(), "grad", g);
    return {Second ? g.output_shape() : ctx.input(0).shape()};
  }
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const geometry g = geo(v.in[0].shape());
    const C *in = v.in[0].data<C>(), *grad = v.in[2].data<C>();
    C* out = v.out[0].data<C>();
    if constexpr (Second) {
      each_window<C>(ctx, g, in, [&](std::int64_t r, const window_maxima& w) {
        for (std::int64_t ch = 0; ch < g.c; ++ch)  // a window wholly in the padding has no maximum: 0
          out[r * g.c + ch] = w.count > 0 ? grad[w.at(ch)] : C(0);
      });
    } else if (g.sh >= g.kh && g.sw >= g.kw) {
      // No two windows overlap (2x2 pooling with stride 2, say): each input element is in
      // one window at most, so the output is written once, per window the gradient at its
      // first maximum and 0 elsewhere, with no zero-filling pass or additions. Elements in
      // no window are zeroed first when there are any (strides larger than the window, or
      // rows and columns a VALID window leaves out).
      const bool covers = g.sh == g.kh && g.sw == g.kw && g.oh > 0 && g.ow > 0 && g.top(0) <= 0 &&
                          g.top(g.oh - 1) + g.kh >= g.h && g.left(0) <= 0 && g.left(g.ow - 1) + g.kw >= g.w;
      if (!covers) std::fill_n(out, v.out[0].num_elements(), C(0));
      each_window<C>(ctx, g, in, [&](std::int64_t r, const window_maxima& w) {
        const C* d = grad + r * g.c;
        const std::int32_t* first = w.first.data();
        for (std::int64_t k = 0; k < w.count; ++k) {
          C* o = out + w.offsets[static_cast<std::size_t>(k)];
          const auto kk = static_cast<std::int32_t>(k);
          for (std::int64_t ch = 0; ch < g.c; ++ch) o[ch] = first[ch] == kk ? d[ch] : C(0);
        }
      });
    } else {
      std::fill_n(out, v.out[0].num_elements(), C(0));
      each_window<C>(ctx, g, in, [&](std::int64_t r, const window_maxima& w) {
        if (w.count > 0)
          for (std::int64_t ch = 0; ch < g.c; ++ch) out[w.at(ch)] += grad[r * g.c + ch];
      });
    }
  }

 private:
  // Calls f(output row, its window's maxima) for every output position, images split
  // between the threads.
  template <class C, class F>
  void each_window(kernel_context& ctx, const geometry& g, const C* in, F&& f) const {
    ctx.parallel_for(g.n, 2 * cost(g), [&](std::int64_t b, std::int64_t e) {
      std::vector<C> best(static_cast<std::size_t>(g.c));
      window_maxima w(g);
      for_each_position(g, b, e, [&](std::int64_t img, std::int64_t y, std::int64_t x, std::int64_t r) {
        w.find(g, in, best.data(), img, y, x);
        f(r, w);
      });
    });
  }
};
using max_pool_grad = max_pool_grad_op<false>;
using max_pool_grad_grad = max_pool_grad_op<true>;

// Each window's gradient shared equally by the input elements it averaged.
struct avg_pool_grad : pool_base {
  static constexpr unsigned value_mask = 0b10;
  using pool_base::pool_base;
  std::vector<shape> shapes(kernel_context& ctx) const {
    const shape in = sizes_shape(ctx.input(0), "orig_input_shape");
    require_shape(ctx.input(1), geo(in).output_shape(), "grad", geo(in));
    return {in};
  }
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const geometry g = geo(v.out[0].shape());
    const C* grad = v.in[1].data<C>();
    C* out = v.out[0].data<C>();
    std::fill_n(out, v.out[0].num_elements(), C(0));
    ctx.parallel_for(g.n, cost(g), [&](std::int64_t b, std::int64_t e) {
      for_each_position(g, b, e, [&](std::int64_t img, std::int64_t y, std::int64_t x, std::int64_t r) {
        const window_span s = span_of(g, y, x);
        const const_row_map<C> d(grad + r * g.c, g.c);
        const C scale = C(1) / static_cast<C>(s.count());
        for (std::int64_t iy = s.y0; iy < s.y1; ++iy)
          for (std::int64_t ix = s.x0; ix < s.x1; ++ix) row_map<C>(out + ((img * g.h + iy) * g.w + ix) * g.c, g.c) += d * scale;
      });
    });
  }
};

// ---- dropout ---------------------------------------------------------------------------
// Element i of the r-th run keeps x when its uniform draw (random.hpp's stream, keyed by
// seed and seed2) is at least `rate`.
struct dropout {
  static constexpr unsigned value_mask = 0b11;
  explicit dropout(const node& n)
      : key_(random_key(n.attr<std::int64_t>("seed"), n.attr<std::int64_t>("seed2"), 0x5bd1e995u)) {}
  std::vector<shape> shapes(kernel_context& ctx) const {
    if (ctx.input(1).rank() != 0) fail(error_code::invalid_argument, "rate must be a scalar, got shape ", ctx.input(1).shape());
    return {ctx.input(0).shape(), ctx.input(0).shape()};
  }
  template <class C>
  void run(kernel_context& ctx, io& v) const {
    const C rate = *v.in[1].data<C>();
    if (!(rate >= C(0) && rate < C(1)))
      fail(error_code::invalid_argument, "rate must be in [0, 1), got ", static_cast<double>(rate));
    const std::int64_t n = v.in[0].num_elements();
    const std::uint64_t base = counter_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    const C scale = C(1) / (C(1) - rate);
    const C* x = v.in[0].data<C>();
    C *out = v.out[0].data<C>(), *mask = v.out[1].data<C>();
    ctx.parallel_for(n, 30, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const bool keep = uniform01(key_, base + static_cast<std::uint64_t>(i)) >= static_cast<double>(rate);
        mask[i] = keep ? scale : C(0);
        out[i] = x[i] * mask[i];
      }
    });
  }
  std::uint64_t key_;
  mutable std::atomic<std::uint64_t> counter_{0};
};

}  // namespace weft::cpu::nn
