/// @file
/// Array ops: views and rearrangements, and shape queries. (Const, Placeholder, Identity and
/// NoOp are core ops: <weft/ops/core_ops.hpp>.)
///   Reshape(x, shape)          one -1 in shape takes the remaining size
///   Transpose(x, perm)         out.dims[i] = x.dims[perm[i]]
///   ConcatV2(values..., axis)  dims equal except along axis, which sums
///   Split(axis, value)         num_split equal parts along axis
///   Slice(x, begin, size)      size -1 means "to the end"
///   Pad(x, paddings)           paddings is (rank, 2): before and after, zero-filled
///   Tile(x, multiples)         out.dims[i] = x.dims[i] * multiples[i]
///   GatherV2(params, indices, axis)  params[:axis] + indices + params[axis+1:]
///   OneHot(indices, depth, on, off; axis=-1)
///   GatherNd(params, indices)  indices [..., K]: the slices params[i0, ..., iK-1], shape
///                              indices.shape[:-1] + params.shape[K:]
///   TensorScatterUpdate(tensor, indices, updates)  tensor with those slices replaced by
///                              updates (of GatherNd's result shape); a slice indexed twice
///                              gets one of its updates. ScatterNd and TensorScatterAdd,
///                              which add, are reduction ops.
///   ExpandDims(x, dim)         a dim of 1 inserted at dim, in [-rank - 1, rank]
///   Squeeze(x; squeeze_dims)   the named dims of size 1 removed (none named: every one)
///   Pack(values...; axis)      N values of one shape stacked along a new dim at axis
///   Unpack(value; num, axis)   the num slices along axis, that dim removed
///   ReverseV2(x, axis)         x with the order along each dim in axis (a vector) reversed
///   StridedSlice(x, begin, end, strides; masks)  Python's x[b:e:s, ..., i, newaxis]
///                              (ops/strided_slice.hpp); StridedSliceGrad(shape, begin,
///                              end, strides, dy; masks) writes dy's slice into zeros of shape
///   SplitV(x, size_splits, axis)  parts of the given sizes along axis (one size may be -1:
///                              the rest)
///   StopGradient(x), Snapshot(x), PreventGradient(x; message), EnsureShape(x; shape)
///                              x itself: no gradient flows through StopGradient, asking for
///                              one through PreventGradient is an error with its message,
///                              EnsureShape checks x has the shape
///   Where(x)                   the coordinates of x's true (non-zero) elements in row-major
///                              order, int64 [count, rank] (tf.where with one argument)
///   Range(start, limit, delta) start, start + delta, ... up to limit (excluded); TensorFlow's
///                              count: ceil(|limit - start| / |delta|)
#pragma once

#include <array>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/gradient_rule.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>
#include <weft/ops/core_ops.hpp>
#include <weft/ops/strided_slice.hpp>

namespace weft::ops {

/// Static shape rules (framework/static_rule.hpp).
namespace static_rules {
/// Reshape to `to`: its one unknown dim (if any) takes the remaining size when every dim of
/// `from` is known.
template <std::size_t N, std::size_t M>
constexpr dims<M> reshape(const dims<N>& from, dims<M> to) {
  std::int64_t from_count = 1, known = 1;
  for (auto d : from) {
    if (d < 0) return to;
    from_count *= d;
  }
  for (auto d : to)
    if (d >= 0) known *= d;
  for (auto& d : to)
    if (d < 0) d = known ? from_count / known : 0;
  return to;
}
/// Transpose by `perm`: out[i] = x[perm[i]].
template <std::size_t N>
constexpr dims<N> transpose(const auto& x, const dims<N>& perm) {
  dims<N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = dim_or(x, static_cast<std::size_t>(perm[i]));
  return out;
}
/// ConcatV2 along `axis`: that dim sums (unknown if any is), a known dim of any operand
/// fixes the others' unknown ones.
template <std::size_t N, class... Rest>
constexpr dims<N> concat(std::int64_t axis, const dims<N>& first, const Rest&... rest) {
  auto out = first;
  axis = normalized_axis(axis, static_cast<std::int64_t>(N));
  if (axis < 0 || axis >= static_cast<std::int64_t>(N)) return out;
  const auto a = static_cast<std::size_t>(axis);
  ((out[a] = out[a] < 0 || dim_or(rest, a) < 0 ? unknown : out[a] + dim_or(rest, a)), ...);
  for (std::size_t d = 0; d < N; ++d)
    if (d != a) ((out[d] = out[d] < 0 ? dim_or(rest, d) : out[d]), ...);
  return out;
}
/// Slice from `begin`, `size` dims (an unknown size, TensorFlow's -1, runs to the end).
template <std::size_t N>
constexpr dims<N> slice(const auto& x, const auto& begin, dims<N> size) {
  for (std::size_t i = 0; i < N; ++i)
    if (size[i] < 0) size[i] = dim_or(x, i) < 0 ? unknown : dim_or(x, i) - dim_or(begin, i);
  return size;
}
/// Pad by `paddings` (before and after, per dim).
template <std::size_t N, std::size_t P>
constexpr dims<N> pad(dims<N> x, const dims<P>& paddings) {
  for (std::size_t i = 0; i < N && 2 * i + 1 < P; ++i)
    if (x[i] >= 0) x[i] += paddings[2 * i] + paddings[2 * i + 1];
  return x;
}
/// Tile by `multiples`: a zero multiple gives 0 even where the dim is unknown.
template <std::size_t N, std::size_t M>
constexpr dims<N> tile(dims<N> x, const dims<M>& multiples) {
  for (std::size_t i = 0; i < N && i < M; ++i) x[i] = multiples[i] == 0 ? 0 : x[i] < 0 ? unknown : x[i] * multiples[i];
  return x;
}
/// Split into `parts` equal parts along `axis`.
template <std::size_t N>
constexpr dims<N> split(dims<N> x, std::size_t axis, std::int64_t parts) {
  if (axis < N && x[axis] >= 0) x[axis] /= parts;
  return x;
}
/// GatherV2 along `Axis` (>= 0): params[:axis] + indices + params[axis+1:].
template <auto Params, auto Indices, std::int64_t Axis>
constexpr auto gather() {
  dims<Params.size() + Indices.size() - (Params.size() > 0 ? 1 : 0)> out{};
  std::size_t j = 0;
  for (std::size_t d = 0; d < Params.size(); ++d) {
    if (static_cast<std::int64_t>(d) == Axis)
      for (auto v : Indices) out[j++] = v;
    else if (j < out.size())
      out[j++] = Params[d];
  }
  return out;
}
/// GatherNd (and the slices TensorScatterUpdate and TensorScatterAdd replace or add to):
/// indices [..., K] with K known and at most params' rank -> indices[:-1] + params[K:].
template <auto Params, auto Indices>
constexpr auto gather_nd() {
  constexpr std::int64_t depth = Indices.size() >= 1 ? Indices[Indices.size() - 1] : -1;
  constexpr std::size_t k = depth >= 0 && depth <= static_cast<std::int64_t>(Params.size()) ? static_cast<std::size_t>(depth) : 0;
  constexpr std::size_t batch = Indices.size() >= 1 ? Indices.size() - 1 : 0;
  dims<batch + Params.size() - k> out{};
  for (std::size_t d = 0; d < batch; ++d) out[d] = Indices[d];
  for (std::size_t d = k; d < Params.size(); ++d) out[batch + d - k] = Params[d];
  return out;
}
/// OneHot with axis -1: indices + [depth].
template <std::size_t N>
constexpr dims<N + 1> one_hot(const dims<N>& indices, std::int64_t depth) {
  dims<N + 1> out{};
  for (std::size_t d = 0; d < N; ++d) out[d] = indices[d];
  out[N] = depth;
  return out;
}
/// ExpandDims at `axis` (in [-N - 1, N]): a dim of 1 inserted there.
template <std::size_t N>
constexpr dims<N + 1> expand_dims(const dims<N>& x, std::int64_t axis) {
  dims<N + 1> out{};
  const auto at = static_cast<std::size_t>(axis < 0 ? axis + static_cast<std::int64_t>(N) + 1 : axis);
  for (std::size_t i = 0, j = 0; i <= N; ++i) out[i] = i == at ? 1 : x[j++];
  return out;
}
/// Which dims of X Squeeze with `Axes` (none: every dim of 1) removes.
template <auto X, std::int64_t... Axes>
constexpr std::array<bool, X.size()> squeezed() {
  std::array<bool, X.size()> gone{};
  constexpr auto n = static_cast<std::int64_t>(X.size());
  if constexpr (sizeof...(Axes) == 0) {
    for (std::size_t d = 0; d < X.size(); ++d) gone[d] = X[d] == 1;
  } else {
    ((gone[static_cast<std::size_t>(Axes < 0 ? Axes + n : Axes)] = true), ...);
  }
  return gone;
}
/// Squeeze of X with `Axes` (none: every dim of 1): those dims removed.
template <auto X, std::int64_t... Axes>
constexpr auto squeeze() {
  constexpr auto gone = squeezed<X, Axes...>();
  constexpr std::size_t removed = [] {
    std::size_t k = 0;
    for (bool g : squeezed<X, Axes...>()) k += g ? 1 : 0;
    return k;
  }();
  dims<X.size() - removed> out{};
  for (std::size_t d = 0, j = 0; d < X.size(); ++d)
    if (!gone[d]) out[j++] = X[d];
  return out;
}
/// Pack of values of one shape along `axis` (in [-N - 1, N]): their dims merged (a static
/// dim of one fixes the others' unknown one), the count inserted at axis.
template <std::size_t N, class... Rest>
constexpr dims<N + 1> stack(std::int64_t axis, const dims<N>& first, const Rest&... rest) {
  auto merged = first;
  for (std::size_t d = 0; d < N; ++d) ((merged[d] = merged[d] < 0 ? rest[d] : merged[d]), ...);
  auto out = expand_dims(merged, axis);
  out[static_cast<std::size_t>(axis < 0 ? axis + static_cast<std::int64_t>(N) + 1 : axis)] = 1 + sizeof...(Rest);
  return out;
}
}  // namespace static_rules

/// The array family's op definitions (registered by register_array_ops()).
std::vector<op_def> array_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> array_op_defs() {
  std::vector<op_def> defs;
  defs.push_back(op_def_builder("Reshape")
                     .input("tensor: T")
                     .input("shape: Tshape")
                     .output("output: T")
                     .attr("T: any type")
                     .attr("Tshape: {int32, int64}")
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       auto dims = constant_ints(c, 1);
                       if (!dims) return shape_from_input(c, 1);
                       int wild = -1;
                       std::int64_t known = 1;
                       for (std::size_t i = 0; i < dims->size(); ++i) {
                         if ((*dims)[i] == -1) {
                           if (wild >= 0) c.fail("shape ", attr_value(*dims), " has more than one -1");
                           wild = static_cast<int>(i);
                         } else if ((*dims)[i] < 0) {
                           c.fail("negative dimension ", (*dims)[i], " in shape ", attr_value(*dims));
                         } else {
                           known = checked_mul(known, (*dims)[i], "the shape's element count");
                         }
                       }
                       const auto& in = c.input(0);
                       if (in.fully_known()) {
                         std::int64_t n = in.to_shape().num_elements();
                         if (wild >= 0) {
                           if (known == 0 || n % known != 0)
                             c.fail("cannot reshape ", in, " (", n, " elements) to ", attr_value(*dims));
                           (*dims)[static_cast<std::size_t>(wild)] = n / known;
                         } else if (known != n) {
                           c.fail("cannot reshape ", in, " (", n, " elements) to ", attr_value(*dims), " (", known,
                                  " elements)");
                         }
                       }
                       c.set_output(0, partial_shape(*dims));
                     })
                     .build());
  defs.push_back(op_def_builder("Transpose")
                     .input("x: T")
                     .input("perm: Tperm")
                     .output("y: T")
                     .attr("T: type")
                     .attr("Tperm: {int32, int64}")
                     .shape_fn([](shape_context& c) {
                       auto perm = constant_ints(c, 1);
                       const auto& in = c.input(0);
                       if (!perm || !in.rank_known()) return;
                       if (static_cast<int>(perm->size()) != in.rank())
                         c.fail("perm ", attr_value(*perm), " has ", perm->size(), " entries for rank ", in.rank());
                       std::vector<std::int64_t> out;
                       std::vector<bool> seen(perm->size());
                       for (auto p : *perm) {
                         if (p < 0 || p >= in.rank() || seen[static_cast<std::size_t>(p)])
                           c.fail("perm ", attr_value(*perm), " is not a permutation of 0..", in.rank() - 1);
                         seen[static_cast<std::size_t>(p)] = true;
                         out.push_back(in[static_cast<int>(p)]);
                       }
                       c.set_output(0, partial_shape(out));
                     })
                     .build());
  defs.push_back(op_def_builder("ConcatV2")
                     .input("values: N * T")
                     .input("axis: Tidx")
                     .output("output: T")
                     .attr("N: int")
                     .attr("T: any type")
                     .attr("Tidx: {int32, int64}")
                     .shape_fn([](shape_context& c) {
                       int n = c.num_inputs() - 1;
                       if (n < 1) c.fail("needs at least one value to concatenate");
                       auto axis = constant_scalar(c, n, "axis");
                       int rank = -1;
                       for (int i = 0; i < n; ++i)
                         if (c.input(i).rank_known()) {
                           if (rank >= 0 && c.input(i).rank() != rank)
                             c.fail("values have different ranks (", rank, " vs ", c.input(i).rank(), ")");
                           rank = c.input(i).rank();
                         }
                       if (rank < 0) return;
                       if (rank == 0) c.fail("cannot concatenate scalars");
                       if (!axis) return c.set_output(0, partial_shape::unknown_of_rank(rank));
                       int a = c.canonical_axis(*axis, rank);
                       std::vector<std::int64_t> out(static_cast<std::size_t>(rank), unknown_dim);
                       std::int64_t sum = 0;
                       for (int i = 0; i < n; ++i) {
                         if (!c.input(i).rank_known()) { sum = -1; continue; }
                         for (int d = 0; d < rank; ++d) {
                           auto v = c.input(i)[d];
                           if (d == a) {
                             sum = (sum < 0 || v < 0) ? -1 : checked_add(sum, v, "the concatenated dim");
                           } else if (v >= 0) {
                             auto& o = out[static_cast<std::size_t>(d)];
                             if (o >= 0 && o != v)
                               c.fail("dimension ", d, " differs between values (", o, " vs ", v, ")");
                             o = v;
                           }
                         }
                       }
                       out[static_cast<std::size_t>(a)] = sum;
                       c.set_output(0, partial_shape(out));
                     })
                     .build());
  defs.push_back(op_def_builder("Split")
                     .input("axis: int32")
                     .input("value: T")
                     .output("output: num_split * T")
                     .attr("num_split: int")
                     .attr("T: any type")
                     .shape_fn([](shape_context& c) {
                       auto k = c.attr<std::int64_t>("num_split");
                       if (k < 1) c.fail("num_split must be at least 1, got ", k);
                       auto axis = constant_scalar(c, 0, "axis");
                       const auto& in = c.input(1);
                       if (in.rank_known() && in.rank() == 0) c.fail("cannot split a scalar");
                       if (!axis || !in.rank_known()) return;
                       int a = c.canonical_axis(*axis, in.rank());
                       auto dims = in.dims();
                       auto& d = dims[static_cast<std::size_t>(a)];
                       if (d >= 0 && d % k != 0) c.fail("dimension ", a, " of size ", d, " does not split into ", k);
                       if (d >= 0) d /= k;
                       for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, partial_shape(dims));
                     })
                     .build());
  defs.push_back(op_def_builder("Slice")
                     .input("input: T")
                     .input("begin: Index")
                     .input("size: Index")
                     .output("output: T")
                     .attr("T: any type")
                     .attr("Index: {int32, int64}")
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 1, 1, "begin");
                       require_rank(c, 2, 1, "size");
                       auto begin = constant_ints(c, 1);
                       auto size = constant_ints(c, 2);
                       const auto& in = c.input(0);
                       const auto entries = [&](const auto& v, const char* what) {
                         if (v && in.rank_known() && static_cast<int>(v->size()) != in.rank())
                           c.fail(what, " has ", v->size(), " entries for rank ", in.rank());
                       };
                       entries(begin, "begin");
                       entries(size, "size");
                       if (begin && size && begin->size() != size->size())
                         c.fail("begin has ", begin->size(), " entries and size ", size->size());
                       if (!size) return;
                       std::vector<std::int64_t> out(*size);
                       for (std::size_t i = 0; i < out.size(); ++i) {
                         const int d = static_cast<int>(i);
                         const std::int64_t dim = in.rank_known() ? in[d] : unknown_dim;
                         if (begin && ((*begin)[i] < 0 || (dim >= 0 && (*begin)[i] > dim)))
                           c.fail("begin ", (*begin)[i], " is out of range for dim ", i, " of size ", dim);
                         if (out[i] < -1) c.fail("negative size ", out[i], " at dim ", i);
                         if (out[i] == -1) {
                           out[i] = begin && dim >= 0 ? dim - (*begin)[i] : unknown_dim;
                         } else if (begin && dim >= 0 && out[i] > dim - (*begin)[i]) {
                           c.fail("slice [", (*begin)[i], ", +", out[i], ") is out of range for dim ", i, " of size ", dim);
                         }
                       }
                       c.set_output(0, partial_shape(out));
                     })
                     .build());
  defs.push_back(op_def_builder("Pad")
                     .input("input: T")
                     .input("paddings: Tpaddings")
                     .output("output: T")
                     .attr("T: type")
                     .attr("Tpaddings: {int32, int64}")
                     .shape_fn([](shape_context& c) {
                       auto pads = constant_ints(c, 1);
                       const auto& in = c.input(0);
                       if (!pads || !in.rank_known()) return;
                       if (pads->size() != 2 * static_cast<std::size_t>(in.rank()))
                         c.fail("paddings must have shape [", in.rank(), ",2]");
                       auto dims = in.dims();
                       for (std::size_t i = 0; i < dims.size(); ++i) {
                         if ((*pads)[2 * i] < 0 || (*pads)[2 * i + 1] < 0) c.fail("negative padding at dim ", i);
                         if (dims[i] >= 0)
                           dims[i] = checked_add(checked_add(dims[i], (*pads)[2 * i], "a padded dim"), (*pads)[2 * i + 1],
                                                 "a padded dim");
                       }
                       c.set_output(0, partial_shape(dims));
                     })
                     .build());
  defs.push_back(op_def_builder("Tile")
                     .input("input: T")
                     .input("multiples: Tmultiples")
                     .output("output: T")
                     .attr("T: any type")
                     .attr("Tmultiples: {int32, int64}")
                     .shape_fn([](shape_context& c) {
                       auto m = constant_ints(c, 1);
                       const auto& in = c.input(0);
                       if (!m || !in.rank_known()) return;
                       if (m->size() != static_cast<std::size_t>(in.rank()))
                         c.fail("multiples has ", m->size(), " entries for rank ", in.rank());
                       auto dims = in.dims();
                       for (std::size_t i = 0; i < dims.size(); ++i) {
                         if ((*m)[i] < 0) c.fail("negative multiple ", (*m)[i], " at dim ", i);
                         if (dims[i] >= 0) dims[i] = checked_mul(dims[i], (*m)[i], "a tiled dim");
                       }
                       c.set_output(0, partial_shape(dims));
                     })
                     .build());
  defs.push_back(op_def_builder("GatherV2")
                     .input("params: Tparams")
                     .input("indices: Tindices")
                     .input("axis: Taxis")
                     .output("output: Tparams")
                     .attr("Tparams: any type")
                     .attr("Tindices: {int32, int64}")
                     .attr("Taxis: {int32, int64}")
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 2, 0, "axis");
                       auto axis = constant_scalar(c, 2, "axis");
                       const auto& p = c.input(0);
                       const auto& idx = c.input(1);
                       if (!axis || !p.rank_known() || !idx.rank_known()) return;
                       if (p.rank() == 0) c.fail("params must have rank at least 1");
                       int a = c.canonical_axis(*axis, p.rank());
                       std::vector<std::int64_t> out(p.dims().begin(), p.dims().begin() + a);
                       out.insert(out.end(), idx.dims().begin(), idx.dims().end());
                       out.insert(out.end(), p.dims().begin() + a + 1, p.dims().end());
                       c.set_output(0, partial_shape(out));
                     })
                     .build());
  defs.push_back(op_def_builder("GatherNd")
                     .input("params: Tparams")
                     .input("indices: Tindices")
                     .output("output: Tparams")
                     .attr("Tparams: type")
                     .attr("Tindices: {int32, int64}")
                     .shape_fn([](shape_context& c) {
                       if (auto out = nd_slices_shape(c, c.input(0), 1)) c.set_output(0, *out);
                     })
                     .build());
  defs.push_back(op_def_builder("TensorScatterUpdate")
                     .input("tensor: T")
                     .input("indices: Tindices")
                     .input("updates: T")
                     .output("output: T")
                     .attr("T: type")
                     .attr("Tindices: {int32, int64}")
                     .shape_fn([](shape_context& c) {
                       check_scatter_updates(c, c.input(0), 1, 2);
                       c.set_output(0, c.input(0));
                     })
                     .build());
  defs.push_back(op_def_builder("OneHot")
                     .input("indices: TI")
                     .input("depth: int32")
                     .input("on_value: T")
                     .input("off_value: T")
                     .output("output: T")
                     .attr("T: type")
                     .attr("TI: {uint8, int32, int64}")
                     .attr("axis: int = -1")
                     .shape_fn([](shape_context& c) {
                       const auto& idx = c.input(0);
                       auto depth = constant_scalar(c, 1, "depth");
                       if (depth && *depth < 0) c.fail("depth must be non-negative, got ", *depth);
                       if (!idx.rank_known()) return;
                       auto axis = c.attr<std::int64_t>("axis");
                       if (axis < -1 || axis > idx.rank()) c.fail("axis ", axis, " out of range for rank ", idx.rank() + 1);
                       auto dims = idx.dims();
                       auto pos = axis == -1 ? dims.size() : static_cast<std::size_t>(axis);
                       dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(pos), depth ? *depth : unknown_dim);
                       c.set_output(0, partial_shape(dims));
                     })
                     .build());
  defs.push_back(op_def_builder("Shape")
                     .input("input: T")
                     .output("output: out_type")
                     .attr("T: any type")
                     .attr("out_type: {int32, int64} = int32")
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       c.set_output(0, partial_shape{c.input(0).rank_known() ? c.input(0).rank() : unknown_dim});
                     })
                     .build());
  defs.push_back(op_def_builder("Rank").input("input: T").output("output: int32").attr("T: any type").cheap()
                     .shape_fn(scalar_shape).build());
  defs.push_back(op_def_builder("Size")
                     .input("input: T")
                     .output("output: out_type")
                     .attr("T: any type")
                     .attr("out_type: {int32, int64} = int32")
                     .cheap()
                     .shape_fn(scalar_shape)
                     .build());
  defs.push_back(op_def_builder("Fill")
                     .input("dims: index_type")
                     .input("value: T")
                     .output("output: T")
                     .attr("T: type")
                     .attr("index_type: {int32, int64}")
                     .shape_fn([](shape_context& c) {
                       if (c.input(1).rank_known() && c.input(1).rank() != 0)
                         c.fail("value must be a scalar, got shape ", c.input(1));
                       shape_from_input(c, 0);
                     })
                     .build());
  defs.push_back(op_def_builder("ExpandDims")
                     .input("input: T")
                     .input("dim: Tdim")
                     .output("output: T")
                     .attr("T: any type")
                     .attr("Tdim: {int32, int64} = int32")
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       const auto axis = constant_scalar(c, 1, "dim");
                       const auto& in = c.input(0);
                       if (!in.rank_known()) return;
                       const int rank = in.rank();
                       if (rank >= max_rank) c.fail("the input has ", rank, " dims: one more is more than ", max_rank);
                       if (!axis) return c.set_output(0, partial_shape::unknown_of_rank(rank + 1));
                       if (*axis < -rank - 1 || *axis > rank)
                         c.fail("dim ", *axis, " is out of range [", -rank - 1, ", ", rank, "] for an input of rank ", rank);
                       auto dims = in.dims();
                       dims.insert(dims.begin() + (*axis < 0 ? *axis + rank + 1 : *axis), 1);
                       c.set_output(0, partial_shape(dims));
                     })
                     .build());
  defs.push_back(op_def_builder("Squeeze")
                     .input("input: T")
                     .output("output: T")
                     .attr("T: any type")
                     .attr("squeeze_dims: list(int) = []")
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       const auto& in = c.input(0);
                       const auto& axes = c.attr<std::vector<std::int64_t>>("squeeze_dims");
                       if (!in.rank_known()) return;
                       const int rank = in.rank();
                       std::vector<bool> named(static_cast<std::size_t>(rank));
                       for (auto a : axes) {
                         if (a < -rank || a >= rank) c.fail("squeeze_dims ", a, " is out of range for rank ", rank);
                         named[static_cast<std::size_t>(a < 0 ? a + rank : a)] = true;
                       }
                       std::vector<std::int64_t> out;
                       for (int d = 0; d < rank; ++d) {
                         const std::int64_t n = in[d];
                         if (axes.empty()) {
                           if (n < 0) return;  // whether it goes is known only when run
                           if (n != 1) out.push_back(n);
                         } else if (!named[static_cast<std::size_t>(d)]) {
                           out.push_back(n);
                         } else if (n >= 0 && n != 1) {
                           c.fail("cannot squeeze dim ", d, " of shape ", in, ": its size is ", n, ", not 1");
                         }
                       }
                       c.set_output(0, partial_shape(out));
                     })
                     .build());
  defs.push_back(op_def_builder("Pack")
                     .input("values: N * T")
                     .output("output: T")
                     .attr("N: int")
                     .attr("T: any type")
                     .attr("axis: int = 0")
                     .shape_fn([](shape_context& c) {
                       const int n = c.num_inputs();
                       if (n < 1) c.fail("needs at least one value to pack");
                       const partial_shape in = merged_input_shapes(c, 0, n);
                       if (!in.rank_known()) return;
                       const int rank = in.rank();
                       if (rank >= max_rank) c.fail("the values have ", rank, " dims: one more is more than ", max_rank);
                       const auto axis = c.attr<std::int64_t>("axis");
                       if (axis < -rank - 1 || axis > rank)
                         c.fail("axis ", axis, " is out of range [", -rank - 1, ", ", rank, "] for values of rank ", rank);
                       auto dims = in.dims();
                       dims.insert(dims.begin() + (axis < 0 ? axis + rank + 1 : axis), n);
                       c.set_output(0, partial_shape(dims));
                     })
                     .build());
  defs.push_back(op_def_builder("Unpack")
                     .input("value: T")
                     .output("output: num * T")
                     .attr("num: int")
                     .attr("T: any type")
                     .attr("axis: int = 0")
                     .shape_fn([](shape_context& c) {
                       const auto num = c.attr<std::int64_t>("num");
                       if (num < 0) c.fail("num must be non-negative, got ", num);
                       const auto& in = c.input(0);
                       if (!in.rank_known()) return;
                       const int rank = in.rank();
                       if (rank == 0) c.fail("cannot unpack a scalar");
                       const int a = c.canonical_axis(c.attr<std::int64_t>("axis"), rank);
                       if (in[a] >= 0 && in[a] != num)
                         c.fail("dimension ", a, " of shape ", in, " has size ", in[a], ", not num = ", num);
                       auto dims = in.dims();
                       dims.erase(dims.begin() + a);
                       for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, partial_shape(dims));
                     })
                     .build());
  defs.push_back(op_def_builder("ReverseV2")
                     .input("tensor: T")
                     .input("axis: Tidx")
                     .output("output: T")
                     .attr("T: any type")
                     .attr("Tidx: {int32, int64} = int32")
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 1, 1, "axis");
                       const auto axes = constant_ints(c, 1);
                       const auto& in = c.input(0);
                       if (axes && in.rank_known()) {
                         std::vector<bool> seen(static_cast<std::size_t>(in.rank()));
                         for (auto a : *axes) {
                           const int d = c.canonical_axis(a, in.rank());
                           if (seen[static_cast<std::size_t>(d)]) c.fail("axis ", d, " is named twice in ", attr_value(*axes));
                           seen[static_cast<std::size_t>(d)] = true;
                         }
                       }
                       c.set_output(0, in);
                     })
                     .build());
  const auto strided = [](const char* name) {
    auto b = op_def_builder(name);
    if (std::string_view(name) == "StridedSlice") b.input("input: T");
    else b.input("shape: Index");
    b.input("begin: Index").input("end: Index").input("strides: Index");
    if (std::string_view(name) == "StridedSliceGrad") b.input("dy: T");
    b.output("output: T").attr(std::string_view(name) == "StridedSlice" ? "T: any type" : "T: type").attr("Index: {int32, int64}");
    for (const char* mask : {"begin_mask: int = 0", "end_mask: int = 0", "ellipsis_mask: int = 0", "new_axis_mask: int = 0",
                             "shrink_axis_mask: int = 0"})
      b.attr(mask);
    return b;
  };
  defs.push_back(strided("StridedSlice")
                     .shape_fn([](shape_context& c) {
                       for (int i = 1; i < 4; ++i) require_rank(c, i, 1, i == 1 ? "begin" : i == 2 ? "end" : "strides");
                       const auto strides = constant_ints(c, 3);
                       const auto& in = c.input(0);
                       if (!strides || !in.rank_known()) return;
                       const strided_slice_plan p =
                           plan_strided_slice(in.dims(), constant_ints(c, 1), constant_ints(c, 2), *strides, strided_slice_masks_of(c));
                       if (!p.error.empty()) c.fail(p.error);
                       c.set_output(0, partial_shape(p.dims));
                     })
                     .build());
  defs.push_back(strided("StridedSliceGrad")
                     .shape_fn([](shape_context& c) {
                       for (int i = 0; i < 4; ++i) require_rank(c, i, 1, i == 0 ? "shape" : i == 1 ? "begin" : i == 2 ? "end" : "strides");
                       shape_from_input(c, 0);
                       const auto dims = constant_ints(c, 0);
                       const auto strides = constant_ints(c, 3);
                       if (!dims || !strides) return;
                       const strided_slice_plan p =
                           plan_strided_slice(*dims, constant_ints(c, 1), constant_ints(c, 2), *strides, strided_slice_masks_of(c));
                       if (!p.error.empty()) c.fail(p.error);
                       if (!shapes_compatible(partial_shape(p.dims), c.input(4)))
                         c.fail("dy has shape ", c.input(4), " where the slice has ", partial_shape(p.dims));
                     })
                     .build());
  defs.push_back(op_def_builder("SplitV")
                     .input("value: T")
                     .input("size_splits: Tlen")
                     .input("axis: int32")
                     .output("output: num_split * T")
                     .attr("num_split: int")
                     .attr("T: any type")
                     .attr("Tlen: {int32, int64} = int64")
                     .shape_fn([](shape_context& c) {
                       const auto k = c.attr<std::int64_t>("num_split");
                       if (k < 1) c.fail("num_split must be at least 1, got ", k);
                       require_rank(c, 1, 1, "size_splits");
                       const auto& in = c.input(0);
                       if (in.rank_known() && in.rank() == 0) c.fail("cannot split a scalar");
                       const auto axis = constant_scalar(c, 2, "axis");
                       const auto sizes = constant_ints(c, 1);
                       if (!axis || !in.rank_known()) {
                         for (int i = 0; i < c.num_outputs(); ++i)
                           c.set_output(i, in.rank_known() ? partial_shape::unknown_of_rank(in.rank()) : partial_shape{});
                         return;
                       }
                       const int a = c.canonical_axis(*axis, in.rank());
                       std::vector<std::int64_t> parts(static_cast<std::size_t>(k), unknown_dim);
                       if (sizes) {
                         const split_sizes r = split_sizes_of(*sizes, k, in[a]);
                         if (!r.error.empty()) c.fail(r.error);
                         parts = r.sizes;
                       }
                       for (int i = 0; i < c.num_outputs(); ++i) {
                         auto dims = in.dims();
                         dims[static_cast<std::size_t>(a)] = parts[static_cast<std::size_t>(i)];
                         c.set_output(i, partial_shape(dims));
                       }
                     })
                     .build());
  for (const char* name : {"StopGradient", "Snapshot"})
    defs.push_back(op_def_builder(name).input("input: T").output("output: T").attr("T: any type").cheap().shape_fn(same_shape).build());
  defs.push_back(op_def_builder("PreventGradient")
                     .input("input: T")
                     .output("output: T")
                     .attr("T: any type")
                     .attr("message: string = ''")
                     .cheap()
                     .shape_fn(same_shape)
                     .build());
  defs.push_back(op_def_builder("EnsureShape")
                     .input("input: T")
                     .output("output: T")
                     .attr("T: any type")
                     .attr("shape: shape")
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       const auto& want = c.attr<partial_shape>("shape");
                       const auto& in = c.input(0);
                       if (!shapes_compatible(in, want)) c.fail("the input's shape ", in, " is not the shape ", want, " it must have");
                       if (!want.rank_known()) return c.set_output(0, in);
                       if (!in.rank_known()) return c.set_output(0, want);
                       auto dims = want.dims();
                       for (int d = 0; d < in.rank(); ++d)
                         if (dims[static_cast<std::size_t>(d)] < 0) dims[static_cast<std::size_t>(d)] = in[d];
                       c.set_output(0, partial_shape(dims));
                     })
                     .build());
  defs.push_back(op_def_builder("Where")
                     .input("input: T")
                     .output("index: int64")
                     .attr("T: {bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, "
                           "float64, complex64, complex128} = bool")
                     .shape_fn([](shape_context& c) {
                       const auto& in = c.input(0);
                       c.set_output(0, partial_shape{unknown_dim, in.rank_known() ? in.rank() : unknown_dim});
                     })
                     .build());
  defs.push_back(op_def_builder("Range")
                     .input("start: Tidx")
                     .input("limit: Tidx")
                     .input("delta: Tidx")
                     .output("output: Tidx")
                     .attr("Tidx: {int32, int64, float32, float64} = int32")
                     .shape_fn([](shape_context& c) {
                       for (int i = 0; i < 3; ++i) require_rank(c, i, 0, i == 0 ? "start" : i == 1 ? "limit" : "delta");
                       const tensor* v[3] = {c.input_value(0), c.input_value(1), c.input_value(2)};
                       if (!v[0] || !v[1] || !v[2]) return c.set_output(0, partial_shape{unknown_dim});
                       const range_count r = range_size_of(*v[0], *v[1], *v[2]);
                       if (!r.error.empty()) c.fail(r.error);
                       c.set_output(0, partial_shape{r.size});
                     })
                     .build());
  for (const char* name : {"ZerosLike", "OnesLike"})
    defs.push_back(op_def_builder(name).input("x: T").output("y: T").attr("T: type").shape_fn(same_shape).build());
  return defs;
}
#endif

/// Adds the array ops to the global registry, once; registering the family's kernels
/// calls it.
inline void register_array_ops() { op_registry::global().add_family("array", array_op_defs); }

}  // namespace weft::ops

// ---- gradient rules (framework/gradient_rule.hpp), each written once over a value type ----

namespace weft::gradients {

/// Each output's gradient, zeros for the outputs none flows into (the rules of the ops that
/// cut their input into parts: Split, SplitV, Unpack).
template <class V>
std::vector<V> output_gradients_or_zeros(const args<V>& a) {
  std::vector<V> parts;
  for (std::size_t i = 0; i < a.y.size(); ++i) parts.push_back(a.dy[i] ? *a.dy[i] : zeros_like(a.y[i]));
  return parts;
}

/// The gradient rule of ZerosLike, OnesLike and StopGradient (framework/gradient_rule.hpp): no gradient flows to the input (TensorFlow's None: it gets zeros).
struct values_unused_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>&) { return {std::nullopt}; }
};

/// The gradient rule of Reshape, ExpandDims and Squeeze (framework/gradient_rule.hpp): the
/// gradient reshaped to the input's shape; none for the shape or dim.
struct reshape_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    result<V> dx(a.x.size());
    dx[0] = reshape_like(a.d(), a.x[0]);
    return dx;
  }
};

/// The gradient rule of Pack (framework/gradient_rule.hpp): the gradient unpacked along
/// the packed axis, a slice per value.
struct pack_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const auto parts = unpack(a.d(), static_cast<std::int64_t>(a.x.size()), a.n.template attr<std::int64_t>("axis"));
    return result<V>(parts.begin(), parts.end());
  }
};

/// The gradient rule of Unpack (framework/gradient_rule.hpp): the outputs' gradients packed
/// back along the axis, zeros for the outputs none flows into.
struct unpack_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    if (a.y.empty()) return {zeros_like(a.x[0])};  // num = 0: the input has no elements
    return {pack(output_gradients_or_zeros(a), a.n.template attr<std::int64_t>("axis"))};
  }
};

/// The gradient rule of StridedSlice (framework/gradient_rule.hpp): the gradient written
/// into zeros of the input's shape where the slice was taken (StridedSliceGrad).
struct strided_slice_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    return {strided_slice_backprop(shape_tensor_as(a.x[0], a.x[1].type()), a.x[1], a.x[2], a.x[3], a.d(),
                                   strided_slice_mask_attrs(a.n)),
            std::nullopt, std::nullopt, std::nullopt};
  }
};

/// The gradient rule of StridedSliceGrad (framework/gradient_rule.hpp): dy's gradient is
/// the slice of the gradient; none for the shape and spec.
struct strided_slice_grad_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    return {std::nullopt, std::nullopt, std::nullopt, std::nullopt,
            strided_slice(a.d(), a.x[1], a.x[2], a.x[3], strided_slice_mask_attrs(a.n))};
  }
};

/// The gradient rule of SplitV (framework/gradient_rule.hpp): the outputs' gradients
/// concatenated along the axis, zeros for the outputs none flows into.
struct split_v_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const std::vector<V> parts = output_gradients_or_zeros(a);
    return {parts.size() == 1 ? parts[0] : concat(parts, a.x[2]), std::nullopt, std::nullopt};
  }
};

/// The gradient rule of PreventGradient (framework/gradient_rule.hpp): asking for the
/// gradient through it is an error with its message (TensorFlow's words).
struct prevent_gradient_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    fail(error_code::invalid_argument, "weft::add_gradients: gradient explicitly disabled at ", a.n.describe(), ". Reason: ",
         a.n.template attr<std::string>("message"));
  }
};

/// The gradient rule of ReverseV2 (framework/gradient_rule.hpp): the gradient reversed along
/// the same axes.
struct reverse_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {reverse(a.d(), a.x[1]), std::nullopt}; }
};

/// The permutation that undoes p (p a permutation of 0..n-1).
inline std::vector<std::int64_t> inverse_permutation(const std::vector<std::int64_t>& p) {
  std::vector<std::int64_t> inverse(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) inverse[static_cast<std::size_t>(p[i])] = static_cast<std::int64_t>(i);
  return inverse;
}

/// The gradient rule of Transpose (framework/gradient_rule.hpp): transposed back by the inverse permutation (perm must be a constant).
struct transpose_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const auto p = constant_ints(a.x[1]);
    if (!p)
      fail(error_code::unimplemented, "weft::add_gradients: the gradient of ", a.n.describe(),
           " needs its permutation to be a constant");
    return {transpose(a.d(), int64_vector(a.x[0], inverse_permutation(*p))), std::nullopt};
  }
};

/// ConcatV2(values..., axis): each value gets its slice of the gradient. The axis must be a
/// constant and the values' dims along it known when the graph is built (their offsets).
struct concat_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const std::size_t n = a.x.size() - 1;
    const partial_shape& out = a.y[0].shape();
    const std::int64_t axis = one_axis(a.n, a.x[n], out);
    const int rank = out.rank();
    result<V> dx;
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<std::int64_t> begin(static_cast<std::size_t>(rank), 0);
      begin[static_cast<std::size_t>(axis)] = offset;
      dx.push_back(slice(a.d(), int64_vector(a.x[i], begin), shape_tensor(a.x[i])));
      const partial_shape& s = a.x[i].shape();
      const std::int64_t along = s.rank_known() ? s[static_cast<int>(axis)] : -1;
      if (along < 0 && i + 1 < n)
        fail(error_code::unimplemented, "weft::add_gradients: the gradient of ", a.n.describe(), " needs input ", i,
             "'s dimension ", axis, " to be known when the graph is built");
      offset += along;
    }
    dx.push_back(std::nullopt);
    return dx;
  }
};

/// The gradient rule of Split (framework/gradient_rule.hpp): Split(axis, value): the outputs' gradients concatenated, zeros for the missing.
struct split_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    return {std::nullopt, concat(output_gradients_or_zeros(a), a.x[0])};
  }
};

/// The gradient rule of Slice (framework/gradient_rule.hpp): padded back with zeros: begin before, shape(x) - begin - shape(y) after.
struct slice_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V &x = a.x[0], begin = as_int64(a.x[1]);
    const V after = shape_tensor(x) - begin - shape_tensor(a.y[0]);
    return {pad(a.d(), concat({as_column(begin), as_column(after)}, int_constant(x, 1))), std::nullopt, std::nullopt};
  }
};

/// The gradient rule of Pad (framework/gradient_rule.hpp): the unpadded part: from paddings[:, 0], of x's shape.
struct pad_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V &x = a.x[0], p = as_int64(a.x[1]);
    const V before = reshape(slice(p, int64_vector(x, {0, 0}), int64_vector(x, {-1, 1})), int64_vector(x, {-1}));
    return {slice(a.d(), before, shape_tensor(x)), std::nullopt};
  }
};

/// Tile(x, multiples): the gradient seen as [m0, s0, m1, s1, ...] (s the dims of x), summed
/// over the m's. x's rank must be known when the graph is built.
struct tile_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V& x = a.x[0];
    if (!x.shape().rank_known())
      fail(error_code::unimplemented, "weft::add_gradients: the gradient of ", a.n.describe(),
           " needs its input's rank to be known");
    const V split = reshape(concat({as_column(as_int64(a.x[1])), as_column(shape_tensor(x))}, int_constant(x, 1)),
                            int64_vector(x, {-1}));
    std::vector<std::int64_t> axes;
    for (int i = 0; i < x.shape().rank(); ++i) axes.push_back(2 * i);
    return {reduce_sum(reshape(a.d(), split), int64_vector(x, axes), false), std::nullopt};
  }
};

/// The gradient rule of Fill (framework/gradient_rule.hpp): Fill(dims, value): the value gets the sum of the gradient.
struct fill_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {std::nullopt, sum_to(a.d(), a.x[1])}; }
};

/// GatherV2(params, indices, axis): the gradient's slices, one per index, added into the
/// rows of params they were gathered from (UnsortedSegmentSum, with the axis moved to the
/// front and back). The axis must be a constant and params' rank known.
struct gather_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V &params = a.x[0], &indices = a.x[1];
    const std::int64_t axis = one_axis(a.n, a.x[2], params.shape()), rank = params.shape().rank();
    const V dims = shape_tensor(params), zero = int_constant(params, 0);
    // The gradient as [params[:axis], all the indices, params[axis + 1:]].
    std::vector<V> parts;
    if (axis > 0) parts.push_back(slice(dims, int64_vector(params, {0}), int64_vector(params, {axis})));
    parts.push_back(int64_vector(params, {-1}));
    if (axis + 1 < rank) parts.push_back(slice(dims, int64_vector(params, {axis + 1}), int64_vector(params, {-1})));
    V values = reshape(a.d(), parts.size() == 1 ? parts[0] : concat(parts, zero));
    std::vector<std::int64_t> perm{axis};  // the indices' axis first
    for (std::int64_t i = 0; i < rank; ++i)
      if (i != axis) perm.push_back(i);
    if (axis > 0) values = transpose(values, int64_vector(params, perm));
    const V rows = reshape(slice(dims, int64_vector(params, {axis}), int64_vector(params, {1})), int64_vector(params, {}));
    V sums = unsorted_segment_sum(values, reshape(indices, int64_vector(params, {-1})), rows);
    if (axis > 0) sums = transpose(sums, int64_vector(params, inverse_permutation(perm)));
    return {sums, std::nullopt, std::nullopt};
  }
};

/// GatherNd, ScatterNd and the TensorScatter ops read or write the same slices (index
/// tuples): the gradient of what is written is the gradient's slices (GatherNd), of what is
/// gathered those slices added into zeros (ScatterNd). A loop that gathers one row per
/// iteration so gets a ScatterNd per backward iteration, which the backward loop adds into
/// its sum in place (TensorScatterAdd, gradients.hpp).
struct gather_nd_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {scatter_nd_like(a.x[1], a.d(), a.x[0]), std::nullopt}; }
};

/// The slices written are overwritten: the tensor's gradient is d with them zeroed (zeros
/// shaped from d's own slices, so that the updates are not kept for the backward pass).
struct tensor_scatter_update_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    V du = gather_nd(a.d(), a.x[1]);
    return {tensor_scatter_update(a.d(), a.x[1], zeros_like(du)), std::nullopt, du};
  }
};

}  // namespace weft::gradients

namespace weft::ops {

/// The ops of this family as C++ types (framework/kernel_for.hpp), each with its gradient
/// rule where it has one.
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Reshape, array, gradients::reshape_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Transpose, array, gradients::transpose_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(ConcatV2, array, gradients::concat_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Split, array, gradients::split_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Slice, array, gradients::slice_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Pad, array, gradients::pad_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Tile, array, gradients::tile_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(GatherV2, array, gradients::gather_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(GatherNd, array, gradients::gather_nd_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(TensorScatterUpdate, array, gradients::tensor_scatter_update_grad)
WEFT_DETAIL_OP_TYPE(OneHot, array)
WEFT_DETAIL_OP_TYPE(Shape, array)
WEFT_DETAIL_OP_TYPE(Rank, array)
WEFT_DETAIL_OP_TYPE(Size, array)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Fill, array, gradients::fill_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(ZerosLike, array, gradients::values_unused_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(OnesLike, array, gradients::values_unused_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(ExpandDims, array, gradients::reshape_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Squeeze, array, gradients::reshape_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Pack, array, gradients::pack_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Unpack, array, gradients::unpack_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(ReverseV2, array, gradients::reverse_grad)
WEFT_DETAIL_OP_TYPE(Range, array)
WEFT_DETAIL_OP_TYPE(Where, array)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(StridedSlice, array, gradients::strided_slice_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(StridedSliceGrad, array, gradients::strided_slice_grad_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(SplitV, array, gradients::split_v_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(StopGradient, array, gradients::values_unused_grad)  // none flows through it
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(PreventGradient, array, gradients::prevent_gradient_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Snapshot, array, gradients::identity_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(EnsureShape, array, gradients::identity_grad)
namespace families {  // the whole family (its kernels for every dtype, on each device type)
/// The array family as a C++ type: use_kernels<ops::families::array>() registers its ops and kernels.
struct array {
  static constexpr const char* name = "array";  ///< the family's name
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using types = type_list<Reshape, Transpose, ConcatV2, Split, Slice, Pad, Tile, GatherV2, GatherNd, TensorScatterUpdate, OneHot, Shape, Rank, Size, Fill, ZerosLike, OnesLike, ExpandDims, Squeeze, Pack, Unpack, ReverseV2, Range, StridedSlice, StridedSliceGrad, SplitV, StopGradient, PreventGradient, Snapshot, EnsureShape, Where>;  ///< its op types
  /// Registers the family's op definitions.
  static void define() { register_array_ops(); }
};
}  // namespace families

}  // namespace weft::ops
