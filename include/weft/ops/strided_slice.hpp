/// @file
/// TensorFlow's StridedSlice, as a plan over the input's dims: what `x[b0:e0:s0, ..., i,
/// tf.newaxis, ...]` takes, device-neutral. The op's shape function (ops/array_ops.hpp), its
/// CPU kernels (kernels/cpu/array.hpp) and its GPU kernels (cuda/kernels.hpp) build theirs
/// here, and so does StridedSliceGrad, which writes the slice back into zeros.
///
/// A spec has one entry per element of `strides`; bit i of each mask speaks of entry i:
///   begin_mask, end_mask  the entry's begin (end) is ignored: the fullest range is taken
///   ellipsis_mask         (one bit at most) the entry stands for as many whole dims as the
///                         other entries leave; a spec without one ends with an implicit one
///   new_axis_mask         the entry adds a dim of 1 to the output, consuming no input dim
///   shrink_axis_mask      the entry is an index (begin), whose dim the output drops
/// Negative begins and ends count from the end of their dim; a range is clamped to the dim
/// (Python's slices); an index must lie in its dim; a stride must not be 0 (an index's must
/// be positive). The output has, per entry, ceil((end - begin) / stride) elements, 0 where
/// the range is empty or points the other way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <weft/core/error.hpp>

namespace weft::ops {

/// A StridedSlice's five masks (its node's attrs).
struct strided_slice_masks {
  std::int64_t begin = 0;        ///< begin_mask
  std::int64_t end = 0;          ///< end_mask
  std::int64_t ellipsis = 0;     ///< ellipsis_mask
  std::int64_t new_axis = 0;     ///< new_axis_mask
  std::int64_t shrink_axis = 0;  ///< shrink_axis_mask
};

/// What a StridedSlice takes of an input: per input dim, where it starts, the step and how
/// many elements (begin and stride meaningful only where the dim and the spec are known),
/// and the output's dims. `error` names what is wrong with the spec (empty: valid).
struct strided_slice_plan {
  std::vector<std::int64_t> begin;   ///< per input dim: the first index taken
  std::vector<std::int64_t> stride;  ///< per input dim: the step (negative: backwards)
  std::vector<std::int64_t> count;   ///< per input dim: how many taken (-1: not known yet)
  std::vector<std::int64_t> dims;    ///< the output's dims (-1: not known yet)
  bool identity = true;              ///< it takes the whole input, in order
  std::string error;                 ///< why the spec is invalid; empty when it is valid
};

namespace detail {
inline bool bit(std::int64_t mask, std::size_t i) { return i < 63 && ((mask >> i) & 1) != 0; }
}  // namespace detail

/// The plan of StridedSlice over an input of dims `input` (-1 where unknown), with
/// `strides` and, where known, `begin` and `end` (nullopt: known only when run).
inline strided_slice_plan plan_strided_slice(const std::vector<std::int64_t>& input,
                                             const std::optional<std::vector<std::int64_t>>& begin,
                                             const std::optional<std::vector<std::int64_t>>& end,
                                             const std::vector<std::int64_t>& strides, const strided_slice_masks& m) {
  using detail::bit;
  strided_slice_plan p;
  const std::size_t entries = strides.size();
  if ((begin && begin->size() != entries) || (end && end->size() != entries)) {
    p.error = weft::detail::concat("begin, end and strides must have one length, got ", begin ? begin->size() : entries,
                                          ", ", end ? end->size() : entries, " and ", entries);
    return p;
  }
  if (entries > 62) {
    p.error = weft::detail::concat("the spec has ", entries, " entries: the masks hold at most 62");
    return p;
  }
  if (m.begin < 0 || m.end < 0 || m.ellipsis < 0 || m.new_axis < 0 || m.shrink_axis < 0) {
    p.error = "the masks must not be negative";
    return p;
  }
  if (m.ellipsis & (m.ellipsis - 1)) {
    p.error = "ellipsis_mask has more than one bit: a spec has at most one ellipsis";
    return p;
  }
  // The sparse spec with its ellipsis (an implicit one at the end when it has none), and the
  // new axes after it (they consume no input dim).
  std::int64_t ellipsis = m.ellipsis & ((std::int64_t{1} << entries) - 1);
  std::size_t sparse = entries;
  if (!ellipsis) ellipsis = std::int64_t{1} << sparse++;
  std::size_t new_after = 0;
  for (std::size_t i = 0, seen = 0; i < entries; ++i) {
    if (seen && bit(m.new_axis, i) && !bit(ellipsis, i)) ++new_after;
    if (bit(ellipsis, i)) seen = 1;
  }
  // The dense spec: one entry per input dim, and where each output dim comes from.
  const std::size_t rank = input.size();
  constexpr std::int64_t shrunk = -1, added = -2;
  std::vector<std::int64_t> b(rank, 0), e(rank, 0), s(rank, 1), gather;
  std::vector<char> b_masked(rank, 0), e_masked(rank, 0), shrink(rank, 0);
  std::size_t full = 0;
  for (std::size_t i = 0; i < sparse; ++i) {
    if (bit(ellipsis, i)) {
      const std::size_t rest = sparse - i - 1;  // entries after the ellipsis
      const std::size_t upto = rank + new_after >= rest ? std::min(rank, rank + new_after - rest) : 0;
      for (; full < upto; ++full) {
        b_masked[full] = e_masked[full] = 1;
        gather.push_back(static_cast<std::int64_t>(full));
      }
    } else if (bit(m.new_axis, i)) {
      gather.push_back(added);
    } else {
      if (full == rank) {
        p.error = weft::detail::concat("the spec indexes input dim ", full, "; the input has ", rank, " dims");
        return p;
      }
      if (begin) b[full] = (*begin)[i];
      if (end) e[full] = (*end)[i];
      s[full] = strides[i];
      b_masked[full] = bit(m.begin, i);
      e_masked[full] = bit(m.end, i);
      shrink[full] = bit(m.shrink_axis, i);
      gather.push_back(shrink[full] ? shrunk : static_cast<std::int64_t>(full));
      ++full;
    }
  }
  // Each input dim's range, made explicit and clamped; its element count.
  p.begin.assign(rank, 0);
  p.stride.assign(rank, 1);
  p.count.assign(rank, -1);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t dim = input[i], step = s[i];
    if (step == 0) {
      p.error = weft::detail::concat("the stride of input dim ", i, " is 0");
      return p;
    }
    if (shrink[i] && step < 0) {
      p.error = weft::detail::concat("input dim ", i, " is indexed (shrink_axis_mask) with a negative stride ", step);
      return p;
    }
    p.stride[i] = step;
    const bool whole = b_masked[i] && e_masked[i];
    if (dim < 0) {  // known only when run
      if (shrink[i]) p.count[i] = 1;
      p.identity = false;
      continue;
    }
    std::int64_t interval = 0;
    bool known = true;
    if (shrink[i] && begin) {
      const std::int64_t at = b[i] < 0 ? dim + b[i] : b[i];
      if (at < 0 || at >= dim) {
        p.error = weft::detail::concat("index ", b[i], " is out of range for input dim ", i, " of size ", dim);
        return p;
      }
      p.begin[i] = at;
      interval = 1;
    } else if (begin && end) {
      // Clamped to [0, dim] going forwards, [-1, dim - 1] going backwards (-1: before 0).
      const std::int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? dim : dim - 1;
      const auto canonical = [&](std::int64_t x, bool masked, bool is_begin) {
        if (masked) return (step > 0) == is_begin ? lo : hi;
        const std::int64_t forward = x < 0 ? dim + x : x;
        return std::clamp(forward, lo, hi);
      };
      p.begin[i] = canonical(b[i], b_masked[i], true);
      interval = canonical(e[i], e_masked[i], false) - p.begin[i];
    } else if (shrink[i]) {
      interval = 1;
    } else if (whole) {
      interval = step > 0 ? dim : -dim;
      p.begin[i] = step > 0 ? 0 : dim - 1;
    } else {
      known = false;
    }
    p.identity = p.identity && known && step == 1 && p.begin[i] == 0 && interval == dim && !shrink[i];
    if (!known) continue;
    p.count[i] = interval == 0 || (interval < 0) != (step < 0) ? 0 : interval / step + (interval % step != 0 ? 1 : 0);
  }
  for (auto g : gather) {
    if (g >= 0) p.dims.push_back(p.count[static_cast<std::size_t>(g)]);
    else if (g == added) p.dims.push_back(1);
  }
  if (p.dims.size() != rank) p.identity = false;
  return p;
}

}  // namespace weft::ops
