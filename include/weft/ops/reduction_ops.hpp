/// @file
/// Reductions over any set of axes (negative axes count from the end; an empty set is the
/// identity). keep_dims keeps each reduced axis with size 1.
///   Sum, Mean, Max, Min, Prod(input, reduction_indices; keep_dims = false)
///   ArgMax, ArgMin(input, dimension; output_type = int64): index of the first extremum.
///   Cumsum, Cumprod(x, axis; exclusive = false, reverse = false): running sums (products)
///   along `axis`, of x's shape; exclusive leaves out each element itself (the first is the
///   identity), reverse runs from the end.
///   UnsortedSegmentSum(data, segment_ids, num_segments): output[i, ...] is the sum of the
///   data[j..., ...] with segment_ids[j...] == i; shape [num_segments] + the dims of data
///   after those of segment_ids (TensorFlow's op; an id outside [0, num_segments) is an
///   error, where TensorFlow drops negative ids).
///   ScatterNd(indices, updates, shape): zeros of `shape` plus each update added at its
///   index tuple (indices [..., K], as GatherNd's: an array op); a slice indexed twice gets
///   the sum of its updates.
///   TensorScatterAdd(tensor, indices, updates): the same added into `tensor`.
///   SumToShape, BroadcastTo, ReducedShape: the helpers of reductions' and broadcasts'
///   gradients (below).
#pragma once

#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/gradient_rule.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>
#include <weft/ops/math_ops.hpp>

namespace weft::ops {

/// Static shape rules (framework/static_rule.hpp).
namespace static_rules {
/// Whether a reduction over `axes` (every axis when there are none; negative ones count from
/// the end) reduces dim d of a rank `rank` input.
template <std::size_t N>
constexpr bool reduces(const dims<N>& axes, std::int64_t rank, std::int64_t d) {
  if (N == 0) return true;
  for (auto a : axes)
    if (normalized_axis(a, rank) == d) return true;
  return false;
}
/// Sum, Mean, Prod, Max, Min over Axes: the reduced dims dropped, or kept with size 1; ArgMax
/// and ArgMin over one axis, dropped.
template <auto X, auto Axes, bool KeepDims>
constexpr auto reduce() {
  constexpr auto rank = static_cast<std::int64_t>(X.size());
  constexpr std::size_t out_rank = [] {
    std::size_t n = 0;
    for (std::int64_t d = 0; d < rank; ++d) n += (KeepDims || !reduces(Axes, rank, d)) ? 1 : 0;
    return n;
  }();
  dims<out_rank> out{};
  std::size_t j = 0;
  for (std::int64_t d = 0; d < rank; ++d) {
    if (!reduces(Axes, rank, d))
      out[j++] = X[static_cast<std::size_t>(d)];
    else if (KeepDims)
      out[j++] = 1;
  }
  return out;
}
}  // namespace static_rules

/// Shape function of the reductions: the input with the axes (input 1, when constant)
/// removed, or kept as 1 with keep_dims; axes not constant: the rank with keep_dims, else unknown.
inline void reduce_shape(shape_context& c) {
  const auto& in = c.input(0);
  auto axes = constant_ints(c, 1);
  if (!in.rank_known()) return;
  bool keep = c.attr<bool>("keep_dims");
  if (!axes) {
    if (keep) c.set_output(0, partial_shape::unknown_of_rank(in.rank()));
    return;
  }
  std::vector<bool> reduced(static_cast<std::size_t>(in.rank()));
  for (auto a : *axes) {
    if (a < -in.rank() || a >= in.rank()) c.fail("reduction axis ", a, " is out of range for rank ", in.rank());
    reduced[static_cast<std::size_t>(a < 0 ? a + in.rank() : a)] = true;
  }
  std::vector<std::int64_t> out;
  for (int i = 0; i < in.rank(); ++i) {
    if (!reduced[static_cast<std::size_t>(i)])
      out.push_back(in[i]);
    else if (keep)
      out.push_back(1);
  }
  c.set_output(0, partial_shape(out));
}

/// The reduction family's op definitions (registered by register_reduction_ops()).
std::vector<op_def> reduction_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> reduction_op_defs() {
  std::vector<op_def> defs;
  auto reduction = [&](const char* name, const char* types) {
    defs.push_back(op_def_builder(name)
                       .input("input: T")
                       .input("reduction_indices: Tidx")
                       .output("output: T")
                       .attr(types)
                       .attr("Tidx: {int32, int64}")
                       .attr("keep_dims: bool = false")
                       .shape_fn(reduce_shape)
                       .build());
  };
  reduction("Sum", number_type_attr);
  reduction("Mean", number_type_attr);
  reduction("Prod", number_type_attr);
  reduction("Max", real_type_attr);
  reduction("Min", real_type_attr);
  for (const char* name : {"ArgMax", "ArgMin"})
    defs.push_back(op_def_builder(name)
                       .input("input: T")
                       .input("dimension: Tidx")
                       .output("output: output_type")
                       .attr(real_type_attr)
                       .attr("Tidx: {int32, int64}")
                       .attr("output_type: {int32, int64} = int64")
                       .shape_fn([](shape_context& c) {
                         const auto& in = c.input(0);
                         auto axis = constant_scalar(c, 1, "dimension");
                         if (!in.rank_known()) return;
                         if (in.rank() == 0) c.fail("input must have rank at least 1");
                         if (!axis) return c.set_output(0, partial_shape::unknown_of_rank(in.rank() - 1));
                         int a = c.canonical_axis(*axis, in.rank());
                         auto dims = in.dims();
                         if (dims[static_cast<std::size_t>(a)] == 0) c.fail("cannot take ", "the extremum of an empty dimension");
                         dims.erase(dims.begin() + a);
                         c.set_output(0, partial_shape(dims));
                       })
                       .build());
  for (const char* name : {"Cumsum", "Cumprod"})
    defs.push_back(op_def_builder(name)
                       .input("x: T")
                       .input("axis: Tidx")
                       .output("out: T")
                       .attr(number_type_attr)
                       .attr("Tidx: {int32, int64}")
                       .attr("exclusive: bool = false")
                       .attr("reverse: bool = false")
                       .shape_fn([](shape_context& c) {
                         require_rank(c, 1, 0, "axis");
                         const auto& x = c.input(0);
                         if (auto axis = constant_scalar(c, 1, "axis"); axis && x.rank_known()) {
                           if (x.rank() == 0) c.fail("x must have rank at least 1");
                           (void)c.canonical_axis(*axis, x.rank());
                         }
                         c.set_output(0, x);
                       })
                       .build());
  defs.push_back(op_def_builder("UnsortedSegmentSum")
                     .input("data: T")
                     .input("segment_ids: Tindices")
                     .input("num_segments: Tnumsegments")
                     .output("output: T")
                     .attr(number_type_attr)
                     .attr("Tindices: {int32, int64}")
                     .attr("Tnumsegments: {int32, int64}")
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 2, 0, "num_segments");
                       const auto& data = c.input(0);
                       const auto& ids = c.input(1);
                       auto n = constant_scalar(c, 2, "num_segments");
                       if (n && *n < 0) c.fail("num_segments must be non-negative, got ", *n);
                       if (!data.rank_known() || !ids.rank_known()) return;
                       if (ids.rank() > data.rank())
                         c.fail("segment_ids of shape ", ids, " is not a prefix of data's shape ", data);
                       for (int i = 0; i < ids.rank(); ++i)
                         if (ids[i] >= 0 && data[i] >= 0 && ids[i] != data[i])
                           c.fail("segment_ids of shape ", ids, " is not a prefix of data's shape ", data);
                       std::vector<std::int64_t> out{n ? *n : unknown_dim};
                       out.insert(out.end(), data.dims().begin() + ids.rank(), data.dims().end());
                       c.set_output(0, partial_shape(out));
                     })
                     .build());
  defs.push_back(op_def_builder("ScatterNd")
                     .input("indices: Tindices")
                     .input("updates: T")
                     .input("shape: Tindices")
                     .output("output: T")
                     .attr(number_type_attr)
                     .attr("Tindices: {int32, int64}")
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 2, 1, "shape");
                       shape_from_input(c, 2);
                       check_scatter_updates(c, partial_shape(c.output_shapes()[0]), 0, 1);
                     })
                     .build());
  defs.push_back(op_def_builder("TensorScatterAdd")
                     .input("tensor: T")
                     .input("indices: Tindices")
                     .input("updates: T")
                     .output("output: T")
                     .attr(number_type_attr)
                     .attr("Tindices: {int32, int64}")
                     .shape_fn([](shape_context& c) {
                       check_scatter_updates(c, c.input(0), 1, 2);
                       c.set_output(0, c.input(0));
                     })
                     .build());
  // Gradient helpers (graph/gradients.hpp):
  //   SumToShape(x, shape)         x summed over the dims that broadcasting `shape` to x's
  //                                shape added or stretched: the result has `shape`
  //   BroadcastTo(x, shape)        x broadcast to `shape`
  //   ReducedShape(shape, axes)    `shape` with the dims at `axes` set to 1
  for (const char* name : {"SumToShape", "BroadcastTo"})
    defs.push_back(op_def_builder(name)
                       .input("input: T")
                       .input("shape: Tshape")
                       .output("output: T")
                       .attr(std::string_view(name) == "SumToShape" ? number_type_attr : "T: type")
                       .attr("Tshape: {int32, int64}")
                       .shape_fn([](shape_context& c) { shape_from_input(c, 1); })
                       .build());
  defs.push_back(op_def_builder("ReducedShape")
                     .input("shape: int64")
                     .input("axes: Tidx")
                     .output("output: int64")
                     .attr("Tidx: {int32, int64}")
                     .cheap()
                     .shape_fn(same_shape)
                     .build());
  return defs;
}
#endif

/// Adds the reduction ops to the global registry, once; registering the family's kernels
/// calls it.
inline void register_reduction_ops() { op_registry::global().add_family("reduction", reduction_op_defs); }

}  // namespace weft::ops

// ---- gradient rules (framework/gradient_rule.hpp), each written once over a value type ----

namespace weft::gradients {

/// The gradient rule of Sum (framework/gradient_rule.hpp): the gradient, broadcast back over the reduced axes.
struct sum_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    if (a.n.template attr<bool>("keep_dims")) return {broadcast_like(a.d(), a.x[0]), std::nullopt};
    return {unreduce(a.d(), a.x[0], a.x[1]), std::nullopt};
  }
};

/// The gradient rule of Mean (framework/gradient_rule.hpp): sum's, divided by the number of elements averaged.
struct mean_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    V g = *sum_grad::apply(a)[0];
    return {g / cast_like(size_tensor(a.x[0]), g) * cast_like(size_tensor(a.y[0]), g), std::nullopt};
  }
};

/// The gradient rule of SumToShape (framework/gradient_rule.hpp): broadcast back.
struct sum_to_shape_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {broadcast_like(a.d(), a.x[0]), std::nullopt}; }
};

/// The gradient rule of BroadcastTo (framework/gradient_rule.hpp): summed back.
struct broadcast_to_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {sum_to(a.d(), a.x[0]), std::nullopt}; }
};

/// The gradient rule of Max, Min (framework/gradient_rule.hpp): the gradient shared equally by the elements equal to the extreme.
struct max_min_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V &x = a.x[0], &axes = a.x[1];
    const bool keep = a.n.template attr<bool>("keep_dims");
    const V y = keep ? a.y[0] : keep_reduced(a.y[0], x, axes), d = keep ? a.d() : keep_reduced(a.d(), x, axes);
    const V hit = cast_like(equal(x, y), x);
    return {hit / reduce_sum(hit, axes, true) * d, std::nullopt};
  }
};

/// Prod: each element gets d times the product of the others in its reduction group,
/// computed without dividing (so zeros are exact) as exclusive running products from both
/// ends along the first reduced axis, times the same for the rest of the axes applied to
/// the product along the first (TensorFlow's rule flattens the axes with a transpose
/// instead). The axes must be constants.
struct prod_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V& x = a.x[0];
    const std::vector<std::int64_t> axes = constant_axes(a.n, a.x[1], x.shape());
    if (axes.empty()) return {a.d(), std::nullopt};
    const V d = a.n.template attr<bool>("keep_dims") ? a.d() : keep_reduced(a.d(), x, a.x[1]);
    return {others(x, axes, 0) * d, std::nullopt};
  }

 private:
  template <class V>
  static V others(const V& v, const std::vector<std::int64_t>& axes, std::size_t i) {
    const V axis = int_constant(v, static_cast<std::int32_t>(axes[i]));
    V own = cumprod(v, axis, true, false) * cumprod(v, axis, true, true);
    if (i + 1 == axes.size()) return own;
    return own * others(reduce_prod(v, axis, true), axes, i + 1);
  }
};

/// The gradient rule of Cumsum (framework/gradient_rule.hpp): the running sum the other way.
struct cumsum_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const bool exclusive = a.n.template attr<bool>("exclusive"), reverse = a.n.template attr<bool>("reverse");
    return {cumsum(a.d(), a.x[1], exclusive, !reverse), std::nullopt};
  }
};

/// Cumprod, TensorFlow's rule: the running sum the other way of y * d, divided by x, so
/// it is not defined where x has a zero (Prod's rule above is).
struct cumprod_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    const bool exclusive = a.n.template attr<bool>("exclusive"), reverse = a.n.template attr<bool>("reverse");
    return {cumsum(a.y[0] * a.d(), a.x[1], exclusive, !reverse) / a.x[0], std::nullopt};
  }
};

/// The gradient rule of UnsortedSegmentSum (framework/gradient_rule.hpp): each row of data gets its segment's gradient row.
struct unsorted_segment_sum_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V>
  static result<V> apply(const args<V>& a) {
    return {gather(a.d(), a.x[1], int_constant(a.x[0], 0)), std::nullopt, std::nullopt};
  }
};

/// The gradient rule of ScatterNd (framework/gradient_rule.hpp).
struct scatter_nd_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {std::nullopt, gather_nd(a.d(), a.x[0]), std::nullopt}; }
};

/// The gradient rule of TensorScatterAdd (framework/gradient_rule.hpp).
struct tensor_scatter_add_grad {
  /// The gradients of the node's inputs, from the gradients of its outputs.
  template <class V> static result<V> apply(const args<V>& a) { return {a.d(), std::nullopt, gather_nd(a.d(), a.x[1])}; }
};

}  // namespace weft::gradients

namespace weft::ops {

/// The ops of this family as C++ types (framework/kernel_for.hpp), each with its gradient
/// rule where it has one.
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Sum, reduction, gradients::sum_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Mean, reduction, gradients::mean_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Prod, reduction, gradients::prod_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Max, reduction, gradients::max_min_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Min, reduction, gradients::max_min_grad)
WEFT_DETAIL_OP_TYPE(ArgMax, reduction)
WEFT_DETAIL_OP_TYPE(ArgMin, reduction)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Cumsum, reduction, gradients::cumsum_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(Cumprod, reduction, gradients::cumprod_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(UnsortedSegmentSum, reduction, gradients::unsorted_segment_sum_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(ScatterNd, reduction, gradients::scatter_nd_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(TensorScatterAdd, reduction, gradients::tensor_scatter_add_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(SumToShape, reduction, gradients::sum_to_shape_grad)
WEFT_DETAIL_OP_TYPE_WITH_GRADIENT(BroadcastTo, reduction, gradients::broadcast_to_grad)
WEFT_DETAIL_OP_TYPE(ReducedShape, reduction)
namespace families {  // the whole family (its kernels for every dtype, on each device type)
/// The reduction family as a C++ type: use_kernels<ops::families::reduction>() registers its ops and kernels.
struct reduction {
  static constexpr const char* name = "reduction";  ///< the family's name
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using types = type_list<Sum, Mean, Prod, Max, Min, ArgMax, ArgMin, Cumsum, Cumprod, UnsortedSegmentSum, ScatterNd, TensorScatterAdd, SumToShape, BroadcastTo, ReducedShape>;  ///< its op types
  /// Registers the family's op definitions.
  static void define() { register_reduction_ops(); }
};
}  // namespace families

}  // namespace weft::ops
