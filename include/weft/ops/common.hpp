/// @file
/// Shape-rule helpers shared by the op definition headers.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <weft/core/broadcast.hpp>
#include <weft/framework/gradient_rule.hpp>
#include <weft/framework/kernel_for.hpp>
#include <weft/framework/shape_context.hpp>
#include <weft/framework/static_rule.hpp>
#include <weft/ops/strided_slice.hpp>

namespace weft::ops {

// ops::NAME: op NAME as a C++ type (framework/kernel_for.hpp), defined by its family's
// register_FAMILY_ops(); with a gradient rule RULE (framework/gradient_rule.hpp) written in
// the family's header (tests/test_op_families.cpp checks each against the registry). Typed
// code asks for its kernels with use_kernels<ops::NAME, T>().
// in_cpu_registry: the full CPU kernel registry has its kernels (WEFT_PREBUILT_CPU_KERNELS).
#define WEFT_DETAIL_OP_TYPE(NAME, FAMILY)                       \
  /** Op NAME as a C++ type (of the FAMILY family). */          \
  struct NAME {                                                 \
    static constexpr const char* name = #NAME; /**< "NAME" */   \
    /** The full CPU kernel registry has its kernels. */        \
    static constexpr bool in_cpu_registry = true;               \
    /** Registers its family's op definitions. */               \
    static void define() { register_##FAMILY##_ops(); }         \
  };
#define WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(NAME, FAMILY, RULE)   \
  /** Op NAME as a C++ type (of the FAMILY family), with its gradient rule. */\
  struct NAME {                                                 \
    static constexpr const char* name = #NAME; /**< "NAME" */   \
    /** The full CPU kernel registry has its kernels. */        \
    static constexpr bool in_cpu_registry = true;               \
    using gradient = RULE; /**< its gradient rule */            \
    /** Registers its family's op definitions. */               \
    static void define() { register_##FAMILY##_ops(); }         \
  };

/// The values of an int32 or int64 tensor (t may be null), else nullopt.
inline std::optional<std::vector<std::int64_t>> int_values_of(const tensor* t) {
  if (!t) return std::nullopt;
  std::vector<std::int64_t> v;
  if (t->dtype() == dtype::int32)
    for (auto x : t->flat<std::int32_t>()) v.push_back(x);
  else if (t->dtype() == dtype::int64)
    for (auto x : t->flat<std::int64_t>()) v.push_back(x);
  else
    return std::nullopt;
  return v;
}
/// The values of an integer input whose producer is a constant, else nullopt.
inline std::optional<std::vector<std::int64_t>> constant_ints(const shape_context& c, int i) {
  return int_values_of(c.input_value(i));
}

/// The value of a single-valued integer input (an axis, a depth, a count) whose producer is
/// a constant, else nullopt; a constant of more or fewer values is an error naming `what`.
inline std::optional<std::int64_t> constant_scalar(const shape_context& c, int i, std::string_view what) {
  auto v = constant_ints(c, i);
  if (!v) return std::nullopt;
  if (v->size() != 1) c.fail(what, " must be a single value, got shape ", c.input(i));
  return (*v)[0];
}

/// Shape function: output 0 has input 0's shape.
inline void same_shape(shape_context& c) { c.set_output(0, c.input(0)); }

/// Whether some shape is accepted by both a and b: no two known ranks or dims differ.
inline bool shapes_compatible(const partial_shape& a, const partial_shape& b) {
  if (!a.rank_known() || !b.rank_known()) return true;
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i)
    if (a[i] != unknown_dim && b[i] != unknown_dim && a[i] != b[i]) return false;
  return true;
}

/// Fails unless input i, when its rank is known, has rank `rank` (or at least `rank`);
/// `what` names the input in the message.
inline void require_rank(shape_context& c, int i, int rank, std::string_view what) {
  if (c.input(i).rank_known() && c.input(i).rank() != rank)
    c.fail(what, " must have rank ", rank, ", got shape ", c.input(i));
}
/// Fails unless input i, when its rank is known, has rank at least `rank`.
inline void require_rank_at_least(shape_context& c, int i, int rank, std::string_view what) {
  if (c.input(i).rank_known() && c.input(i).rank() < rank)
    c.fail(what, " must have rank at least ", rank, ", got shape ", c.input(i));
}

/// Shape function: output 0 has the broadcast shape of every input, or an error naming two that do not broadcast.
inline void broadcast_inputs(shape_context& c) {
  partial_shape out = c.input(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    auto b = broadcast(out, c.input(i));
    if (!b) c.fail("shapes ", out, " and ", c.input(i), " are not broadcastable");
    out = *b;
  }
  c.set_output(0, out);
}

/// The shape inputs [first, first + count) all have (the ops that take values of one
/// shape: Pack, AddN): their known dims merged, or an error naming the two that differ.
inline partial_shape merged_input_shapes(shape_context& c, int first, int count) {
  partial_shape out;
  int from = first;
  for (int i = first; i < first + count; ++i) {
    const partial_shape& s = c.input(i);
    if (!s.rank_known()) continue;
    if (!out.rank_known()) {
      out = s;
      from = i;
      continue;
    }
    if (!shapes_compatible(out, s))
      c.fail("input ", i - first, " has shape ", s, ", which does not match input ", from - first, "'s shape ", out);
    std::vector<std::int64_t> dims = out.dims();
    for (int d = 0; d < s.rank(); ++d)
      if (dims[static_cast<std::size_t>(d)] < 0) dims[static_cast<std::size_t>(d)] = s[d];
    out = partial_shape(dims);
  }
  return out;
}

/// Range's element count for start, limit and delta (TensorFlow's rule: integers
/// ceil(|limit - start| / |delta|), computed without overflow; floats ceil(|(limit - start) /
/// delta|)), or why there is none: a zero delta, a delta pointing away from limit, a count
/// that is not finite or does not fit an int64.
struct range_count {
  std::int64_t size = 0;  ///< the element count
  std::string error;      ///< empty when the count is valid
};
/// range_count of integer (int64) or floating-point (double) start, limit and delta.
template <class T>
range_count range_size(T start, T limit, T delta) {
  const auto text = [](const auto&... parts) { return range_count{0, weft::detail::concat(parts...)}; };
  if (delta == 0) return text("delta must not be 0");
  if (delta > 0 && start > limit) return text("start ", start, " is above limit ", limit, " while delta ", delta, " > 0");
  if (delta < 0 && start < limit) return text("start ", start, " is below limit ", limit, " while delta ", delta, " < 0");
  if constexpr (std::is_integral_v<T>) {
    // |limit - start| and |delta| as unsigned: both fit a uint64, whatever the int64s.
    const std::uint64_t span = delta > 0 ? static_cast<std::uint64_t>(limit) - static_cast<std::uint64_t>(start)
                                         : static_cast<std::uint64_t>(start) - static_cast<std::uint64_t>(limit);
    const std::uint64_t step = delta > 0 ? static_cast<std::uint64_t>(delta) : std::uint64_t{0} - static_cast<std::uint64_t>(delta);
    const std::uint64_t n = span / step + (span % step != 0 ? 1 : 0);
    if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return text("the range from ", start, " to ", limit, " by ", delta, " has more than 2^63 - 1 elements");
    return {static_cast<std::int64_t>(n), {}};
  } else {
    const double n = std::ceil(std::abs((limit - start) / delta));
    if (!(n >= 0 && n < 9.2233720368547758e18))  // NaN and infinities too
      return text("the range from ", start, " to ", limit, " by ", delta, " has no finite element count that fits an int64");
    return {static_cast<std::int64_t>(n), {}};
  }
}
/// range_count of Range's three scalar inputs (of one dtype: int32, int64, float32 or float64).
inline range_count range_size_of(const tensor& start, const tensor& limit, const tensor& delta) {
  if (start.num_elements() != 1 || limit.num_elements() != 1 || delta.num_elements() != 1)
    return {0, "start, limit and delta must be scalars"};
  if (auto a = int_values_of(&start), b = int_values_of(&limit), d = int_values_of(&delta); a && b && d)
    return range_size((*a)[0], (*b)[0], (*d)[0]);
  const auto real = [](const tensor& t) {
    return t.dtype() == dtype::float32 ? static_cast<double>(t.flat<float>()[0]) : t.flat<double>()[0];
  };
  return range_size(real(start), real(limit), real(delta));
}

/// SplitV's part sizes: `sizes` (one may be -1: what the others leave of the dim `dim`, -1
/// when unknown), checked to be num_split entries of non-negative sizes that sum to the dim.
struct split_sizes {
  std::vector<std::int64_t> sizes;  ///< the parts' sizes (-1 where the dim is unknown)
  std::string error;                ///< empty when valid
};
/// split_sizes of SplitV's size_splits for `parts` parts of a dim of size `dim`.
inline split_sizes split_sizes_of(std::vector<std::int64_t> sizes, std::int64_t parts, std::int64_t dim) {
  const auto text = [](const auto&... p) { return split_sizes{{}, weft::detail::concat(p...)}; };
  if (static_cast<std::int64_t>(sizes.size()) != parts)
    return text("size_splits has ", sizes.size(), " entries for num_split = ", parts);
  std::int64_t known = 0;
  int wild = -1;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && wild < 0) {
      wild = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      return text("size_splits has ", sizes[i], " at entry ", i, " (sizes are non-negative; one may be -1)");
    } else {
      if (sizes[i] > std::numeric_limits<std::int64_t>::max() - known) return text("size_splits' sum overflows");
      known += sizes[i];
    }
  }
  if (dim < 0) return {sizes, {}};
  if (wild >= 0) {
    if (known > dim) return text("size_splits' sizes sum to ", known, ", more than the dim's ", dim);
    sizes[static_cast<std::size_t>(wild)] = dim - known;
  } else if (known != dim) {
    return text("size_splits' sizes sum to ", known, ", not the dim's ", dim);
  }
  return {sizes, {}};
}

/// A StridedSlice's (or StridedSliceGrad's) masks, from its node's attrs.
template <class Attrs>
strided_slice_masks strided_slice_masks_of(const Attrs& c) {
  return {c.template attr<std::int64_t>("begin_mask"), c.template attr<std::int64_t>("end_mask"),
          c.template attr<std::int64_t>("ellipsis_mask"), c.template attr<std::int64_t>("new_axis_mask"),
          c.template attr<std::int64_t>("shrink_axis_mask")};
}

/// Shape function: every output is a scalar.
inline void scalar_shape(shape_context& c) {
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, partial_shape{});
}

/// An output shape given by an integer input holding dims (Fill, RandomUniform, ...).
inline void shape_from_input(shape_context& c, int i) {
  if (auto dims = constant_ints(c, i)) {
    for (auto d : *dims)
      if (d < 0) c.fail("negative dimension ", d, " in the requested shape");
    c.set_output(0, partial_shape(*dims));
  } else if (c.input(i).rank_known() && c.input(i).rank() == 1 && c.input(i)[0] >= 0) {
    if (c.input(i)[0] > max_rank) c.fail("the requested shape has ", c.input(i)[0], " dims, more than ", max_rank);
    c.set_output(0, partial_shape::unknown_of_rank(static_cast<int>(c.input(i)[0])));
  }
}

/// The ops that address slices of a tensor of shape `target` by index tuples (GatherNd,
/// ScatterNd, TensorScatterUpdate, TensorScatterAdd): `indices` of shape [..., K], each
/// row of K coordinates naming the slice target[i0, ..., iK-1, :, ...]. Returns the shape of
/// the slices gathered (or of the updates written): indices.shape[:-1] + target.shape[K:],
/// when known. Fails when K exceeds target's rank.
inline std::optional<partial_shape> nd_slices_shape(shape_context& c, const partial_shape& target, int indices) {
  require_rank_at_least(c, indices, 1, "indices");
  const auto& idx = c.input(indices);
  if (!idx.rank_known() || !target.rank_known()) return std::nullopt;
  const std::int64_t depth = idx[idx.rank() - 1];
  if (depth < 0) return std::nullopt;
  if (depth > target.rank())
    c.fail("indices of shape ", idx, " give ", depth, " coordinates into shape ", target, " of rank ", target.rank());
  std::vector<std::int64_t> dims(idx.dims().begin(), idx.dims().end() - 1);
  dims.insert(dims.end(), target.dims().begin() + depth, target.dims().end());
  return partial_shape(std::move(dims));
}
/// Checks the updates (input `updates`) of a scatter into `target` against the indices.
inline void check_scatter_updates(shape_context& c, const partial_shape& target, int indices, int updates) {
  auto want = nd_slices_shape(c, target, indices);
  const auto& up = c.input(updates);
  if (!want || !up.rank_known()) return;
  bool ok = up.rank() == want->rank();
  for (int i = 0; ok && i < up.rank(); ++i) ok = up[i] < 0 || (*want)[i] < 0 || up[i] == (*want)[i];
  if (!ok)
    c.fail("updates of shape ", up, " do not fit indices of shape ", c.input(indices), " into shape ", target,
           ": they must have shape ", *want);
}

}  // namespace weft::ops
