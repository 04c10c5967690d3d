/// @file
/// Work space of the convolution kernels: a thread's kept buffer, and sums over blocks of
/// work computed by several threads into partial buffers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <weft/kernels/cpu/nn_kernel.hpp>

namespace weft::cpu::nn {

/// A buffer of at least n values for this thread, aligned for Eigen's packets and kept
/// between calls (slot 0 or 1): a block of packed patches is about half a megabyte, which
/// malloc would map afresh, and the kernel zero, on every call. A body of parallel_for never
/// waits, so a thread uses its buffer for one body at a time.
template <class C>
C* scratch(std::int64_t n, int slot) {
  thread_local std::vector<C, Eigen::aligned_allocator<C>> buffers[2];
  auto& b = buffers[slot];
  if (b.size() < static_cast<std::size_t>(n)) b.resize(static_cast<std::size_t>(n));
  return b.data();
}

/// out[0, size) = the sum over blocks of units [0, units) (blocks_for: at least min_units
/// each) of body(sum, u0, u1), which adds the part of units [u0, u1) into a zeroed sum: the
/// first block's sum is out itself, the others partial buffers added at the end.
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

}  // namespace weft::cpu::nn
