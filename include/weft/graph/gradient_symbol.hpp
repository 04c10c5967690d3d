/// @file
/// The values symbolic gradients are written over, for graphs built at run time: `symbol`,
/// a tensor of the graph being extended with the arithmetic of expressions (+, -, *, /,
/// exp, matmul, select, sum_to, ...), each operation adding a node through a
/// gradient_builder; and the registry of rules by op name. What a rule sees and returns is
/// framework/gradient_rule.hpp's; the rules themselves are beside their ops' definitions
/// (ops/*.hpp), registered by gradient_rules.hpp; the pass that applies them is gradients.hpp.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/framework/gradient_rule.hpp>
#include <weft/graph/graph.hpp>
#include <weft/ops/common.hpp>

namespace weft {

namespace detail {
/// v as a scalar of the floating-point dtype t; of float64 when t is another dtype.
inline tensor floating_scalar(dtype t, double v) {
  switch (t) {
    case dtype::float32: return tensor::scalar(static_cast<float>(v));
    case dtype::float16: return tensor::scalar(half(static_cast<float>(v)));
    case dtype::bfloat16: return tensor::scalar(bfloat16(static_cast<float>(v)));
    default: return tensor::scalar(v);
  }
}
}  // namespace detail

/// Where gradient nodes go: a graph and how nodes are added to it (a DSL lowering merges
/// equal nodes; a plain graph names them under "gradients/").
class gradient_builder {
 public:
  virtual ~gradient_builder() = default;
  /// The graph being extended (the rules read producers' dtypes and shapes in it).
  virtual const graph& target() const = 0;
  /// Adds (or finds an equal) node op(inputs) with attrs; its output 0.
  virtual output add(std::string_view op, std::vector<output> inputs, attr_map attrs) = 0;
  /// The graph itself, where the builder can add loops (the gradient of a while loop); null
  /// where it cannot.
  virtual graph* mutable_graph() { return nullptr; }
  /// Whether the nodes it adds land in the frame of the loop body it builds in (a DSL
  /// lowering inside a while_loop's body: constants take the body's pivot, outer values
  /// enter), so that a gradient of values inside one loop iteration can be taken there.
  virtual bool builds_in_loop_body() const { return false; }
  /// Marks o, added to the graph directly (mutable_graph()), as made in the frame the builder
  /// adds to: a DSL lowering in a loop body then keeps what reads it there rather than
  /// hoisting it out of the loop (nothing to do for a plain graph's builder).
  virtual void adopt(output) {}
  /// As add(), but the node goes in the frame of its inputs as they are, never moved out of
  /// the loop body the builder builds in (a loop's Enter, Merge, Switch and pushes, and the
  /// nodes of a backward loop's body); the same as add() for a plain graph's builder.
  virtual output add_in_place(std::string_view op, std::vector<output> inputs, attr_map attrs) {
    return add(op, std::move(inputs), std::move(attrs));
  }
};

/// A tensor of the graph being extended, with the arithmetic gradient rules use.
class symbol {
 public:
  /// Output o of b's graph.
  symbol(gradient_builder& b, output o) : b_(&b), o_(o) {}
  /// Where the symbol's nodes go.
  gradient_builder& builder() const noexcept { return *b_; }
  /// The graph output it names.
  output out() const noexcept { return o_; }
  /// The node that produces it.
  const node& producer() const { return b_->target().at(o_); }
  /// Its dtype.
  dtype type() const { return producer().output_dtype(o_.port); }
  /// Its shape as far as the graph knows it.
  const partial_shape& shape() const { return producer().output_shape(o_.port); }

  /// The node op(*this, more..., attrs), port `port`.
  symbol then(std::string_view op, std::vector<symbol> more = {}, attr_map attrs = {}, int port = 0) const {
    std::vector<output> in{o_};
    for (const auto& m : more) in.push_back(m.o_);
    output r = b_->add(op, std::move(in), std::move(attrs));
    r.port = port;
    return symbol(*b_, r);
  }
  /// A scalar constant of this symbol's dtype (floating point: the dtypes with gradients).
  symbol scalar(double v) const {
    const tensor t = detail::floating_scalar(type(), v);
    symbol c(*b_, b_->add("Const", {}, {{"value", t}, {"dtype", t.dtype()}}));
    return c.type() == type() ? c : c.then("Cast", {}, {{"DstT", type()}});
  }

 private:
  gradient_builder* b_;
  output o_;
};

// ---- the arithmetic of rules, on symbols ----------------------------------------------

/// Whether a and b are known, at graph-building time, to have one shape.
inline bool same_known_shape(const symbol& a, const symbol& b) { return a.shape().fully_known() && a.shape() == b.shape(); }

/// Add(a, b).
inline symbol operator+(const symbol& a, const symbol& b) { return a.then("Add", {b}); }
/// Sub(a, b).
inline symbol operator-(const symbol& a, const symbol& b) { return a.then("Sub", {b}); }
/// Mul(a, b).
inline symbol operator*(const symbol& a, const symbol& b) { return a.then("Mul", {b}); }
/// Div(a, b).
inline symbol operator/(const symbol& a, const symbol& b) { return a.then("Div", {b}); }
/// Neg(a).
inline symbol operator-(const symbol& a) { return a.then("Neg"); }
/// a plus a scalar constant of a's dtype.
inline symbol operator+(const symbol& a, double b) { return a + a.scalar(b); }
/// A scalar constant of b's dtype minus b.
inline symbol operator-(double a, const symbol& b) { return b.scalar(a) - b; }
/// a times a scalar constant of a's dtype.
inline symbol operator*(const symbol& a, double b) { return a * a.scalar(b); }
/// A scalar constant of b's dtype times b.
inline symbol operator*(double a, const symbol& b) { return b.scalar(a) * b; }
/// A scalar constant of b's dtype divided by b.
inline symbol operator/(double a, const symbol& b) { return b.scalar(a) / b; }
/// a minus a scalar constant of a's dtype.
inline symbol operator-(const symbol& a, double b) { return a - a.scalar(b); }
/// Greater(a, b): a bool tensor.
inline symbol operator>(const symbol& a, double b) { return a.then("Greater", {a.scalar(b)}); }
/// Less(a, b): a bool tensor.
inline symbol operator<(const symbol& a, double b) { return a.then("Less", {a.scalar(b)}); }
/// GreaterEqual(a, b): a bool tensor.
inline symbol operator>=(const symbol& a, const symbol& b) { return a.then("GreaterEqual", {b}); }
/// LessEqual(a, b): a bool tensor.
inline symbol operator<=(const symbol& a, const symbol& b) { return a.then("LessEqual", {b}); }
/// Exp(a).
inline symbol exp(const symbol& a) { return a.then("Exp"); }
/// Log(a).
inline symbol log(const symbol& a) { return a.then("Log"); }
/// Square(a).
inline symbol square(const symbol& a) { return a.then("Square"); }
/// Sigmoid(a).
inline symbol sigmoid(const symbol& a) { return a.then("Sigmoid"); }
/// Sin(a).
inline symbol sin(const symbol& a) { return a.then("Sin"); }
/// Cos(a).
inline symbol cos(const symbol& a) { return a.then("Cos"); }
/// Sinh(a).
inline symbol sinh(const symbol& a) { return a.then("Sinh"); }
/// Cosh(a).
inline symbol cosh(const symbol& a) { return a.then("Cosh"); }
/// Rsqrt(a).
inline symbol rsqrt(const symbol& a) { return a.then("Rsqrt"); }
/// FloorDiv(a, b).
inline symbol floor_div(const symbol& a, const symbol& b) { return a.then("FloorDiv", {b}); }
/// Pow(a, b).
inline symbol pow(const symbol& a, const symbol& b) { return a.then("Pow", {b}); }
/// SelectV2(c, t, e): t where c, else e, broadcasting.
inline symbol select(const symbol& c, const symbol& t, const symbol& e) { return c.then("SelectV2", {t, e}); }
/// TensorFlow's Select: a vector condition picks whole rows.
inline symbol select_rows(const symbol& c, const symbol& t, const symbol& e) { return c.then("Select", {t, e}); }
/// t where c, else the scalar e (of t's dtype).
inline symbol select(const symbol& c, const symbol& t, double e) { return select(c, t, t.scalar(e)); }
/// The scalar t (of e's dtype) where c, else e.
inline symbol select(const symbol& c, double t, const symbol& e) { return select(c, e.scalar(t), e); }
/// a cast to like's dtype (a itself when they agree).
inline symbol cast_like(const symbol& a, const symbol& like) {
  return a.type() == like.type() ? a : a.then("Cast", {}, {{"DstT", like.type()}});
}
/// The constant t in the graph behind `near`.
inline symbol constant_in(const symbol& near, const tensor& t) {
  return symbol(near.builder(), near.builder().add("Const", {}, {{"value", t}, {"dtype", t.dtype()}}));
}
/// The shape (size) of a as an int64 tensor: a constant when a's shape is known when the
/// graph is built, so that the ops reading it infer full shapes; else a Shape (Size) node.
inline symbol shape_tensor(const symbol& a) {
  if (a.shape().fully_known()) return constant_in(a, tensor::from_vector(a.shape().dims()));
  return a.then("Shape", {}, {{"out_type", dtype::int64}});
}
/// The element count of a as an int64 scalar (a constant when a's shape is known).
inline symbol size_tensor(const symbol& a) {
  if (a.shape().fully_known())  // a partial shape's dims are not checked as a shape's are
    return constant_in(a, tensor::scalar(checked_element_count(a.shape().dims(), "the element count")));
  return a.then("Size", {}, {{"out_type", dtype::int64}});
}
/// a reshaped to like's shape (a itself when both are known equal).
inline symbol reshape_like(const symbol& a, const symbol& like) {
  if (same_known_shape(a, like)) return a;
  return a.then("Reshape", {shape_tensor(like)});
}
/// ZerosLike(a).
inline symbol zeros_like(const symbol& a) { return a.then("ZerosLike"); }
/// OnesLike(a).
inline symbol ones_like(const symbol& a) { return a.then("OnesLike"); }
/// MatMul(a, b), a transposed when ta, b when tb.
inline symbol matmul(const symbol& a, const symbol& b, bool ta, bool tb) {
  return a.then("MatMul", {b}, {{"transpose_a", ta}, {"transpose_b", tb}});
}
/// g summed down to the shape of `like` (the gradient of an operand that was broadcast);
/// g itself when the two shapes are known equal.
inline symbol sum_to(const symbol& g, const symbol& like) {
  if (same_known_shape(g, like)) return g;
  return g.then("SumToShape", {shape_tensor(like)});
}
/// g broadcast to the shape of `like`.
inline symbol broadcast_like(const symbol& g, const symbol& like) {
  if (same_known_shape(g, like)) return g;
  return g.then("BroadcastTo", {shape_tensor(like)});
}
/// An int32 constant of the graph behind `near` (axes, say).
inline symbol int_constant(const symbol& near, std::int32_t v) { return constant_in(near, tensor::scalar(v)); }
/// g, the result of reducing x over `axes` without kept dims, reshaped with the reduced
/// dims as 1 (so that it broadcasts against x).
inline symbol keep_reduced(const symbol& g, const symbol& x, const symbol& axes) {
  return g.then("Reshape", {shape_tensor(x).then("ReducedShape", {axes})});
}
/// g, the gradient of a reduction of x over `axes` without kept dims, broadcast back to x's shape.
inline symbol unreduce(const symbol& g, const symbol& x, const symbol& axes) {
  return broadcast_like(keep_reduced(g, x, axes), x);
}
/// The sum of a over `axis`, the dim kept as 1.
inline symbol reduce_sum_keep(const symbol& a, std::int32_t axis) {
  return a.then("Sum", {int_constant(a, axis)}, {{"keep_dims", true}});
}
/// The NN ops the rules of nn_ops.hpp's ops use.
inline symbol softmax(const symbol& a) { return a.then("Softmax"); }
/// LogSoftmax(a) over the last dim.
inline symbol log_softmax(const symbol& a) { return a.then("LogSoftmax"); }
/// BiasAddGrad(a): a summed over every dim but the channel dim.
inline symbol bias_add_grad(const symbol& a) { return a.then("BiasAddGrad"); }
/// LeakyReluGrad(d, features; alpha): d where features > 0, else alpha d.
inline symbol leaky_relu_backprop(const symbol& d, const symbol& features, double alpha) {
  return d.then("LeakyReluGrad", {features}, {{"alpha", alpha}});
}
/// Less(a, b), Greater(a, b) and LogicalOr(a, b), broadcasting.
inline symbol less(const symbol& a, const symbol& b) { return a.then("Less", {b}); }
/// Greater(a, b).
inline symbol greater(const symbol& a, const symbol& b) { return a.then("Greater", {b}); }
/// LogicalOr(a, b).
inline symbol logical_or(const symbol& a, const symbol& b) { return a.then("LogicalOr", {b}); }
/// ReluGrad(d, features): d where features > 0, else 0.
inline symbol relu_backprop(const symbol& d, const symbol& features) { return d.then("ReluGrad", {features}); }
/// Integer helpers: an int64 vector constant, a value cast to int64, a column [n, 1].
inline symbol int64_vector(const symbol& near, std::vector<std::int64_t> v) {
  return constant_in(near, tensor::from_vector(v));
}
/// a cast to int64 (a itself when it is int64).
inline symbol as_int64(const symbol& a) { return a.type() == dtype::int64 ? a : a.then("Cast", {}, {{"DstT", dtype::int64}}); }
/// Reshape(a, dims).
inline symbol reshape(const symbol& a, const symbol& dims) { return a.then("Reshape", {dims}); }
/// a reshaped to a column [n, 1].
inline symbol as_column(const symbol& a) { return reshape(a, int64_vector(a, {-1, 1})); }
/// The value of a when its producer is a constant (read when the graph is built), else null;
/// a constant that enters a loop as an invariant counts.
inline const tensor* constant_value(const symbol& a) {
  const node* n = &a.producer();
  while (n->op() == "Enter" && n->attr<bool>("is_constant")) n = &a.builder().target().at(n->inputs()[0]);  // a loop invariant
  return n->op() == "Const" ? n->attrs().find("value")->get_if<tensor>() : nullptr;
}
/// The values of a when its producer is an int32 or int64 constant, else nullopt.
inline std::optional<std::vector<std::int64_t>> constant_ints(const symbol& a) { return ops::int_values_of(constant_value(a)); }
/// ConcatV2 of the parts (at least one) along axis.
inline symbol concat(const std::vector<symbol>& parts, const symbol& axis) {
  std::vector<symbol> rest(parts.begin() + 1, parts.end());
  rest.push_back(axis);
  return parts.front().then("ConcatV2", rest, {{"N", static_cast<std::int64_t>(parts.size())}});
}
/// Pack(parts..., axis): the parts (at least one, of one shape) stacked along a new dim.
inline symbol pack(const std::vector<symbol>& parts, std::int64_t axis) {
  return parts.front().then("Pack", std::vector<symbol>(parts.begin() + 1, parts.end()),
                            {{"N", static_cast<std::int64_t>(parts.size())}, {"axis", axis}});
}
/// Unpack(a, num, axis): a's `num` slices along `axis`, that dim dropped (one node, its ports).
inline std::vector<symbol> unpack(const symbol& a, std::int64_t num, std::int64_t axis) {
  std::vector<symbol> parts;
  for (std::int64_t i = 0; i < num; ++i)
    parts.push_back(a.then("Unpack", {}, {{"num", num}, {"axis", axis}}, static_cast<int>(i)));
  return parts;
}
/// ReverseV2(a, axes): a with the order along each of `axes` reversed.
inline symbol reverse(const symbol& a, const symbol& axes) { return a.then("ReverseV2", {axes}); }
/// Slice(a, begin, size).
inline symbol slice(const symbol& a, const symbol& begin, const symbol& size) { return a.then("Slice", {begin, size}); }
/// Pad(a, paddings) with zeros.
inline symbol pad(const symbol& a, const symbol& paddings) { return a.then("Pad", {paddings}); }
/// Transpose(a, perm).
inline symbol transpose(const symbol& a, const symbol& perm) { return a.then("Transpose", {perm}); }
/// BatchMatMulV2(a, b), a adjointed when adj_a, b when adj_b.
inline symbol batch_matmul(const symbol& a, const symbol& b, bool adj_a, bool adj_b) {
  return a.then("BatchMatMulV2", {b}, {{"adj_x", adj_a}, {"adj_y", adj_b}});
}
/// MatrixInverse(a) (of a's adjoint when `adjoint`).
inline symbol matrix_inverse(const symbol& a, bool adjoint) { return a.then("MatrixInverse", {}, {{"adjoint", adjoint}}); }
/// Equal(a, b): a bool tensor.
inline symbol equal(const symbol& a, const symbol& b) { return a.then("Equal", {b}); }
/// Sum(a, axes), reduced dims kept as 1 when keep_dims.
inline symbol reduce_sum(const symbol& a, const symbol& axes, bool keep_dims) {
  return a.then("Sum", {axes}, {{"keep_dims", keep_dims}});
}
/// Prod(a, axes), reduced dims kept as 1 when keep_dims.
inline symbol reduce_prod(const symbol& a, const symbol& axes, bool keep_dims) {
  return a.then("Prod", {axes}, {{"keep_dims", keep_dims}});
}
/// Cumsum and Cumprod of a along `axis`.
inline symbol cumsum(const symbol& a, const symbol& axis, bool exclusive, bool reverse) {
  return a.then("Cumsum", {axis}, {{"exclusive", exclusive}, {"reverse", reverse}});
}
/// Cumprod of a along `axis`.
inline symbol cumprod(const symbol& a, const symbol& axis, bool exclusive, bool reverse) {
  return a.then("Cumprod", {axis}, {{"exclusive", exclusive}, {"reverse", reverse}});
}
/// GatherV2(params, indices, axis).
inline symbol gather(const symbol& params, const symbol& indices, const symbol& axis) {
  return params.then("GatherV2", {indices, axis});
}
/// UnsortedSegmentSum(data, ids, segments): the rows of data summed by segment id.
inline symbol unsorted_segment_sum(const symbol& data, const symbol& ids, const symbol& segments) {
  return data.then("UnsortedSegmentSum", {ids, segments});
}
/// GatherNd(params, indices).
inline symbol gather_nd(const symbol& params, const symbol& indices) { return params.then("GatherNd", {indices}); }
/// ScatterNd into zeros shaped as `like` (its shape given in the indices' dtype, as the op wants).
inline symbol scatter_nd_like(const symbol& indices, const symbol& updates, const symbol& like) {
  const symbol dims = indices.type() == dtype::int64 ? shape_tensor(like) : like.then("Shape", {}, {{"out_type", indices.type()}});
  return indices.then("ScatterNd", {updates, dims});
}
/// The shape of a as a tensor of int dtype t (int32 or int64): a constant when a's shape is
/// known when the graph is built (an int32 dim too large is an error), else a Shape node.
inline symbol shape_tensor_as(const symbol& a, dtype t) {
  if (t == dtype::int64) return shape_tensor(a);
  if (!a.shape().fully_known()) return a.then("Shape", {}, {{"out_type", t}});
  std::vector<std::int32_t> dims;
  for (auto d : a.shape().dims()) {
    if (d > std::numeric_limits<std::int32_t>::max())
      fail(error_code::invalid_argument, "dim ", d, " of ", a.shape(), " does not fit an int32 shape");
    dims.push_back(static_cast<std::int32_t>(d));
  }
  return constant_in(a, tensor::from_vector(dims));
}
/// The masks of a StridedSlice or StridedSliceGrad node, as attrs for another.
inline attr_map strided_slice_mask_attrs(const node& n) {
  attr_map m;
  for (const char* name : {"begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"})
    m.set(name, n.attr<std::int64_t>(name));
  return m;
}
/// StridedSlice(a, begin, end, strides) with `masks`.
inline symbol strided_slice(const symbol& a, const symbol& begin, const symbol& end, const symbol& strides, attr_map masks) {
  return a.then("StridedSlice", {begin, end, strides}, std::move(masks));
}
/// StridedSliceGrad(dims, begin, end, strides, d) with `masks`: d written into zeros of dims.
inline symbol strided_slice_backprop(const symbol& dims, const symbol& begin, const symbol& end, const symbol& strides, const symbol& d,
                                     attr_map masks) {
  return dims.then("StridedSliceGrad", {begin, end, strides, d}, std::move(masks));
}
/// TensorScatterUpdate(t, indices, updates): t with the indexed slices replaced.
inline symbol tensor_scatter_update(const symbol& t, const symbol& indices, const symbol& updates) {
  return t.then("TensorScatterUpdate", {indices, updates});
}

/// Convolution and pooling, with the window attrs `w` of the node differentiated.
inline attr_map window_attr_map(const node& n) {
  attr_map m;
  for (const char* k : {"strides", "padding", "data_format", "dilations", "ksize"})
    if (const attr_value* v = n.attrs().find(k)) m.set(k, *v);
  return m;
}
/// FusedBatchNormGradV3's x, scale and offset backprops (one node, ports 0 to 2).
inline std::array<symbol, 3> fused_batch_norm_grad(const symbol& dy, const symbol& x, const symbol& scale, const symbol& r1,
                                                   const symbol& r2, const symbol& r3, const attr_map& attrs) {
  const symbol dx = dy.then("FusedBatchNormGradV3", {x, scale, r1, r2, r3}, attrs);
  const output o = dx.out();
  return {dx, symbol(dx.builder(), output{o.node, 1}), symbol(dx.builder(), output{o.node, 2})};
}
/// Conv2D(x, f) with window attrs w.
inline symbol conv2d(const symbol& x, const symbol& f, const attr_map& w) { return x.then("Conv2D", {f}, w); }
/// Conv2DBackpropInput: the gradient of a Conv2D's input of shape `sizes`, from filter f and output gradient d.
inline symbol conv2d_backprop_input(const symbol& sizes, const symbol& f, const symbol& d, const attr_map& w) {
  return sizes.then("Conv2DBackpropInput", {f, d}, w);
}
/// Conv2DBackpropFilter: the gradient of a Conv2D's filter of shape `sizes`, from input x and output gradient d.
inline symbol conv2d_backprop_filter(const symbol& x, const symbol& sizes, const symbol& d, const attr_map& w) {
  return x.then("Conv2DBackpropFilter", {sizes, d}, w);
}
/// MaxPoolGrad: d routed to the maxima of MaxPool's input x (output y).
inline symbol max_pool_grad(const symbol& x, const symbol& y, const symbol& d, const attr_map& w) {
  return x.then("MaxPoolGrad", {y, d}, w);
}
/// MaxPoolGradGrad: the gradient of MaxPoolGrad, d (shaped as x) read at each window's maximum.
inline symbol max_pool_grad_grad(const symbol& x, const symbol& y, const symbol& d, const attr_map& w) {
  return x.then("MaxPoolGradGrad", {y, d}, w);
}
/// AvgPool(x) with window attrs w.
inline symbol avg_pool(const symbol& x, const attr_map& w) { return x.then("AvgPool", {}, w); }
/// AvgPoolGrad: d spread evenly over the windows of an input of shape `sizes`.
inline symbol avg_pool_grad(const symbol& sizes, const symbol& d, const attr_map& w) {
  return sizes.then("AvgPoolGrad", {d}, w);
}

// ---- rules ----------------------------------------------------------------------------

/// What a rule sees and returns: gradient_args, gradient_result (framework/gradient_rule.hpp).
using gradient_fn = std::function<gradient_result<symbol>(const gradient_args<symbol>&)>;

/// Gradient rules by op name, for graphs built at run time.
class gradient_registry {
 public:
  /// The process-wide registry (never destroyed).
  static gradient_registry& global() {
    static gradient_registry* r = new gradient_registry;  // never destroyed: used during static teardown
    return *r;
  }
  /// Registers op's rule (a second rule for the same op is ignored).
  void add(const std::string& op, gradient_fn fn) {
    std::unique_lock lock(mutex_);
    rules_.emplace(op, std::move(fn));
  }
  /// op's rule, or null when it has none.
  const gradient_fn* find(const std::string& op) const {
    std::shared_lock lock(mutex_);
    auto it = rules_.find(op);
    return it == rules_.end() ? nullptr : &it->second;
  }

 private:
  mutable std::shared_mutex mutex_;
  std::map<std::string, gradient_fn, std::less<>> rules_;
};

}  // namespace weft
