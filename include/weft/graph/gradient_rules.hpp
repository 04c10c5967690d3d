// The gradient rules of the standard ops, each written once over a value type V
// (gradient_symbol.hpp): today instantiated for `symbol`, the run-time graph's tensors.
// Conventions follow TensorFlow's: the gradient of a broadcast operand is summed down to
// its shape (sum_to); at a tie, Maximum and Minimum send the gradient to their first
// operand; Relu's gradient at 0 is 0; Pow's gradient in the exponent is 0 where the base
// is not positive.
#pragma once

#include <algorithm>
#include <tuple>
#include <utility>

#include <weft/graph/gradient_symbol.hpp>

namespace weft::gradients {

template <class V>
using args = gradient_args<V>;
template <class V>
using result = gradient_result<V>;

struct identity_grad {
  template <class V> static result<V> apply(const args<V>& a) { return {a.d()}; }
};
struct values_unused_grad {  // ZerosLike, OnesLike: the result does not depend on the input's values
  template <class V> static result<V> apply(const args<V>&) { return {std::nullopt}; }
};

// ---- elementwise ops ---------------------------------------------------------------------
// Each rule gives the partials of one elementwise op: partials(d, x..., y) returns a tuple
// with, per operand, d times the derivative of y in that operand, at the output's
// (broadcast) shape, or `no_partial` where there is none. The same text serves both kinds
// of values: run-time graph symbols (elementwise_grad below sums each partial down to its
// operand's shape) and typed DSL expressions, where the backward of a fused elementwise
// subtree chains them at the output's shape and sums once per leaf (dsl/gradient.hpp;
// summing is linear and the partials are constant along broadcast dims, so that is the same).
struct no_partial {};

struct neg_grad {
  template <class D, class X, class Y> static auto partials(const D& d, const X&, const Y&) { return std::tuple{-d}; }
};
struct add_grad {
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0&, const X1&, const Y&) { return std::tuple{d, d}; }
};
struct sub_grad {
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0&, const X1&, const Y&) { return std::tuple{d, -d}; }
};
struct mul_grad {
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0& x0, const X1& x1, const Y&) { return std::tuple{d * x1, x0 * d}; }
};
struct div_grad {  // z = x / y: dx = d / y, dy = -d * z / y
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0&, const X1& x1, const Y& y) { return std::tuple{d / x1, -(d * y) / x1}; }
};
struct pow_grad {  // z = x^y: dx = d * y * x^(y - 1), dy = d * z * log(x) where x > 0, else 0
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0& x, const X1& e, const Y& y) {
    return std::tuple{d * e * pow(x, e - 1.0), select(x > 0.0, d * y * log(x), 0.0)};
  }
};
struct maximum_grad {  // ties go to the first operand
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0& x0, const X1& x1, const Y&) {
    return std::tuple{select(x0 >= x1, d, 0.0), select(x0 >= x1, 0.0, d)};
  }
};
struct minimum_grad {
  template <class D, class X0, class X1, class Y>
  static auto partials(const D& d, const X0& x0, const X1& x1, const Y&) {
    return std::tuple{select(x0 <= x1, d, 0.0), select(x0 <= x1, 0.0, d)};
  }
};
struct square_grad {
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{d * x * 2.0}; }
};
struct sqrt_grad {  // z = sqrt(x): d / (2 z)
  template <class D, class X, class Y> static auto partials(const D& d, const X&, const Y& y) { return std::tuple{d / (y * 2.0)}; }
};
struct rsqrt_grad {  // z = x^-1/2: -d z^3 / 2
  template <class D, class X, class Y>
  static auto partials(const D& d, const X&, const Y& y) { return std::tuple{d * y * y * y * -0.5}; }
};
struct exp_grad {
  template <class D, class X, class Y> static auto partials(const D& d, const X&, const Y& y) { return std::tuple{d * y}; }
};
struct log_grad {
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{d / x}; }
};
struct tanh_grad {  // d (1 - z^2)
  template <class D, class X, class Y>
  static auto partials(const D& d, const X&, const Y& y) { return std::tuple{d * (1.0 - y * y)}; }
};
struct sigmoid_grad {  // d z (1 - z)
  template <class D, class X, class Y>
  static auto partials(const D& d, const X&, const Y& y) { return std::tuple{d * y * (1.0 - y)}; }
};
struct relu_grad {
  template <class D, class X, class Y>
  static auto partials(const D& d, const X&, const Y& y) { return std::tuple{select(y > 0.0, d, 0.0)}; }
};
struct abs_grad {  // TensorFlow's d * sign(x): 0 at 0
  template <class D, class X, class Y>
  static auto partials(const D& d, const X& x, const Y&) { return std::tuple{select(x < 0.0, -d, select(x > 0.0, d, 0.0))}; }
};
struct select_grad {  // SelectV2; no gradient for the condition
  template <class D, class C, class T, class E, class Y>
  static auto partials(const D& d, const C& c, const T&, const E&, const Y&) {
    return std::tuple{no_partial{}, select(c, d, 0.0), select(c, 0.0, d)};
  }
};
struct cast_grad {
  template <class D, class X, class Y> static auto partials(const D& d, const X& x, const Y&) { return std::tuple{cast_like(d, x)}; }
};

// An elementwise rule on graph symbols; the partials of a binary op or Select are summed
// down to their operands' shapes (unary ops do not broadcast).
template <class Rule>
struct elementwise_grad {
  template <class V>
  static result<V> apply(const args<V>& a) {
    constexpr std::size_t n = requires(const V& v) { Rule::partials(v, v, v); }      ? 1
                              : requires(const V& v) { Rule::partials(v, v, v, v); } ? 2
                                                                                     : 3;
    if (a.x.size() != n)
      fail(error_code::invalid_argument, "weft::add_gradients: ", a.n.describe(), " has ", a.x.size(),
           " inputs; its gradient rule takes ", n);
    auto parts = [&]<std::size_t... I>(std::index_sequence<I...>) { return Rule::partials(a.d(), a.x[I]..., a.y[0]); }(
        std::make_index_sequence<n>{});
    result<V> out;
    std::apply([&](const auto&... p) { (out.push_back(reduced<n>(p, a.x[out.size()])), ...); }, parts);
    return out;
  }

 private:
  template <std::size_t N, class V>
  static std::optional<V> reduced(const V& p, const V& x) {
    if constexpr (N == 1) return p;
    else return sum_to(p, x);
  }
  template <std::size_t N, class V>
  static std::optional<V> reduced(no_partial, const V&) { return std::nullopt; }
};

struct matmul_grad {
  template <class V>
  static result<V> apply(const args<V>& a) {
    const bool ta = a.n.template attr<bool>("transpose_a"), tb = a.n.template attr<bool>("transpose_b");
    const V &x = a.x[0], &y = a.x[1], &d = a.d();
    if (!ta && !tb) return {matmul(d, y, false, true), matmul(x, d, true, false)};
    if (!ta && tb) return {matmul(d, y, false, false), matmul(d, x, true, false)};
    if (ta && !tb) return {matmul(y, d, false, true), matmul(x, d, false, false)};
    return {matmul(y, d, true, true), matmul(d, x, true, true)};
  }
};
struct sum_grad {  // the gradient, broadcast back over the reduced axes
  template <class V>
  static result<V> apply(const args<V>& a) {
    if (a.n.template attr<bool>("keep_dims")) return {broadcast_like(a.d(), a.x[0]), std::nullopt};
    return {unreduce(a.d(), a.x[0], a.x[1]), std::nullopt};
  }
};
struct mean_grad {  // sum's, divided by the number of elements averaged
  template <class V>
  static result<V> apply(const args<V>& a) {
    V g = *sum_grad::apply(a)[0];
    return {g / cast_like(size_tensor(a.x[0]), g) * cast_like(size_tensor(a.y[0]), g), std::nullopt};
  }
};
struct select_rows_grad {  // Select: the gradient goes where the condition picked, row or element
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V zeros = zeros_like(a.d());
    return {std::nullopt, select_rows(a.x[0], a.d(), zeros), select_rows(a.x[0], zeros, a.d())};
  }
};
struct reshape_grad {
  template <class V> static result<V> apply(const args<V>& a) { return {reshape_like(a.d(), a.x[0]), std::nullopt}; }
};
struct sum_to_shape_grad {  // broadcast back
  template <class V> static result<V> apply(const args<V>& a) { return {broadcast_like(a.d(), a.x[0]), std::nullopt}; }
};
struct broadcast_to_grad {  // summed back
  template <class V> static result<V> apply(const args<V>& a) { return {sum_to(a.d(), a.x[0]), std::nullopt}; }
};

struct max_min_grad {  // the gradient shared equally by the elements equal to the extreme
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V &x = a.x[0], &axes = a.x[1];
    const bool keep = a.n.template attr<bool>("keep_dims");
    const V y = keep ? a.y[0] : keep_reduced(a.y[0], x, axes), d = keep ? a.d() : keep_reduced(a.d(), x, axes);
    const V hit = cast_like(equal(x, y), x);
    return {hit / reduce_sum(hit, axes, true) * d, std::nullopt};
  }
};
struct batch_matmul_grad {  // MatMul's, with batch dims summed back where they were broadcast
  template <class V>
  static result<V> apply(const args<V>& a) {
    const bool ax = a.n.template attr<bool>("adj_x"), ay = a.n.template attr<bool>("adj_y");
    const V &x = a.x[0], &y = a.x[1], &d = a.d();
    if (!ax && !ay) return {sum_to(batch_matmul(d, y, false, true), x), sum_to(batch_matmul(x, d, true, false), y)};
    if (!ax && ay) return {sum_to(batch_matmul(d, y, false, false), x), sum_to(batch_matmul(d, x, true, false), y)};
    if (ax && !ay) return {sum_to(batch_matmul(y, d, false, true), x), sum_to(batch_matmul(x, d, false, false), y)};
    return {sum_to(batch_matmul(y, d, true, true), x), sum_to(batch_matmul(d, x, true, true), y)};
  }
};
struct matrix_inverse_grad {  // Y = A^-1: dA = -Y^T d Y^T; with adjoint (Y = A^-T), -Y d^T Y
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V& y = a.y[0];
    if (a.n.template attr<bool>("adjoint")) return {-batch_matmul(batch_matmul(y, a.d(), false, true), y, false, false)};
    return {-batch_matmul(batch_matmul(y, a.d(), true, false), y, false, true)};
  }
};
struct matrix_determinant_grad {  // d det(A) / dA = det(A) A^-T
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V& x = a.x[0];
    const V scale = reshape(a.d() * a.y[0], concat({shape_tensor(a.y[0]), int64_vector(x, {1, 1})}, int_constant(x, 0)));
    return {scale * matrix_inverse(x, true)};
  }
};
// The permutation that undoes p (p a permutation of 0..n-1).
inline std::vector<std::int64_t> inverse_permutation(const std::vector<std::int64_t>& p) {
  std::vector<std::int64_t> inverse(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) inverse[static_cast<std::size_t>(p[i])] = static_cast<std::int64_t>(i);
  return inverse;
}
struct transpose_grad {  // transposed back by the inverse permutation (perm must be a constant)
  template <class V>
  static result<V> apply(const args<V>& a) {
    const auto p = constant_ints(a.x[1]);
    if (!p)
      fail(error_code::unimplemented, "weft::add_gradients: the gradient of ", a.n.describe(),
           " needs its permutation to be a constant");
    return {transpose(a.d(), int64_vector(a.x[0], inverse_permutation(*p))), std::nullopt};
  }
};
// The axis (or axes) of `n` given by the int constant `axes`, canonical for `rank`,
// sorted and without repeats; an error naming the node when it is not a constant, or when
// x's rank is not known when the graph is built.
inline std::vector<std::int64_t> constant_axes(const node& n, const symbol& axes, const partial_shape& x) {
  const auto v = constant_ints(axes);
  if (!v || !x.rank_known())
    fail(error_code::unimplemented, "weft::add_gradients: the gradient of ", n.describe(),
         " needs a constant axis and an input of known rank");
  std::vector<std::int64_t> out;
  for (auto a : *v) {
    if (a < -x.rank() || a >= x.rank())
      fail(error_code::invalid_argument, "weft::add_gradients: ", n.describe(), " has axis ", a, " out of range for rank ",
           x.rank());
    out.push_back(a < 0 ? a + x.rank() : a);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}
// The one axis of `n` given by `axis` (ConcatV2's, GatherV2's), as constant_axes.
inline std::int64_t one_axis(const node& n, const symbol& axis, const partial_shape& x) {
  const std::vector<std::int64_t> axes = constant_axes(n, axis, x);
  if (axes.size() != 1) fail(error_code::invalid_argument, "weft::add_gradients: ", n.describe(), " needs one axis");
  return axes[0];
}

// ConcatV2(values..., axis): each value gets its slice of the gradient. The axis must be a
// constant and the values' dims along it known when the graph is built (their offsets).
struct concat_grad {
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
struct split_grad {  // Split(axis, value): the outputs' gradients concatenated, zeros for the missing
  template <class V>
  static result<V> apply(const args<V>& a) {
    std::vector<V> parts;
    for (std::size_t i = 0; i < a.y.size(); ++i) parts.push_back(a.dy[i] ? *a.dy[i] : zeros_like(a.y[i]));
    return {std::nullopt, concat(parts, a.x[0])};
  }
};
struct slice_grad {  // padded back with zeros: begin before, shape(x) - begin - shape(y) after
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V &x = a.x[0], begin = as_int64(a.x[1]);
    const V after = shape_tensor(x) - begin - shape_tensor(a.y[0]);
    return {pad(a.d(), concat({as_column(begin), as_column(after)}, int_constant(x, 1))), std::nullopt, std::nullopt};
  }
};
struct pad_grad {  // the unpadded part: from paddings[:, 0], of x's shape
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V &x = a.x[0], p = as_int64(a.x[1]);
    const V before = reshape(slice(p, int64_vector(x, {0, 0}), int64_vector(x, {-1, 1})), int64_vector(x, {-1}));
    return {slice(a.d(), before, shape_tensor(x)), std::nullopt};
  }
};
// Tile(x, multiples): the gradient seen as [m0, s0, m1, s1, ...] (s the dims of x), summed
// over the m's. x's rank must be known when the graph is built.
struct tile_grad {
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

// Prod: each element gets d times the product of the others in its reduction group,
// computed without dividing (so zeros are exact) as exclusive running products from both
// ends along the first reduced axis, times the same for the rest of the axes applied to
// the product along the first (TensorFlow's rule flattens the axes with a transpose
// instead). The axes must be constants.
struct prod_grad {
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
struct fill_grad {  // Fill(dims, value): the value gets the sum of the gradient
  template <class V> static result<V> apply(const args<V>& a) { return {std::nullopt, sum_to(a.d(), a.x[1])}; }
};
struct cumsum_grad {  // the running sum the other way
  template <class V>
  static result<V> apply(const args<V>& a) {
    const bool exclusive = a.n.template attr<bool>("exclusive"), reverse = a.n.template attr<bool>("reverse");
    return {cumsum(a.d(), a.x[1], exclusive, !reverse), std::nullopt};
  }
};
// Cumprod, TensorFlow's rule: the running sum the other way of y * d, divided by x, so
// it is not defined where x has a zero (Prod's rule above is).
struct cumprod_grad {
  template <class V>
  static result<V> apply(const args<V>& a) {
    const bool exclusive = a.n.template attr<bool>("exclusive"), reverse = a.n.template attr<bool>("reverse");
    return {cumsum(a.y[0] * a.d(), a.x[1], exclusive, !reverse) / a.x[0], std::nullopt};
  }
};
// GatherV2(params, indices, axis): the gradient's slices, one per index, added into the
// rows of params they were gathered from (UnsortedSegmentSum, with the axis moved to the
// front and back). The axis must be a constant and params' rank known.
struct gather_grad {
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
struct unsorted_segment_sum_grad {  // each row of data gets its segment's gradient row
  template <class V>
  static result<V> apply(const args<V>& a) {
    return {gather(a.d(), a.x[1], int_constant(a.x[0], 0)), std::nullopt, std::nullopt};
  }
};
// GatherNd, ScatterNd and the TensorScatter ops read or write the same slices (index
// tuples): the gradient of what is written is the gradient's slices (GatherNd), of what is
// gathered those slices added into zeros (ScatterNd). A loop that gathers one row per
// iteration so gets a ScatterNd per backward iteration, which the backward loop adds into
// its sum in place (TensorScatterAdd, gradients.hpp).
struct gather_nd_grad {
  template <class V> static result<V> apply(const args<V>& a) { return {scatter_nd_like(a.x[1], a.d(), a.x[0]), std::nullopt}; }
};
struct scatter_nd_grad {
  template <class V> static result<V> apply(const args<V>& a) { return {std::nullopt, gather_nd(a.d(), a.x[0]), std::nullopt}; }
};
// The slices written are overwritten: the tensor's gradient is d with them zeroed (zeros
// shaped from d's own slices, so that the updates are not kept for the backward pass).
struct tensor_scatter_update_grad {
  template <class V>
  static result<V> apply(const args<V>& a) {
    V du = gather_nd(a.d(), a.x[1]);
    return {tensor_scatter_update(a.d(), a.x[1], zeros_like(du)), std::nullopt, du};
  }
};
struct tensor_scatter_add_grad {
  template <class V> static result<V> apply(const args<V>& a) { return {a.d(), std::nullopt, gather_nd(a.d(), a.x[1])}; }
};

// ---- NN ops (nn_ops.hpp); the class axis is the last one ------------------------------
// Relu's gradient is one ReluGrad node at its output, as TensorFlow's (relu_grad above is
// the same function for the typed DSL, which fuses it with its neighbours).
struct relu_rule {
  template <class V> static result<V> apply(const args<V>& a) { return {relu_backprop(a.d(), a.y[0])}; }
};
// ReluGrad is linear in its gradients and flat in its features (TensorFlow's ReluGradGrad).
struct relu_grad_rule {
  template <class V> static result<V> apply(const args<V>& a) { return {relu_backprop(a.d(), a.x[1]), std::nullopt}; }
};
struct bias_add_rule {  // the bias gets the gradient summed over every other dim
  template <class V> static result<V> apply(const args<V>& a) { return {a.d(), bias_add_grad(a.d())}; }
};
struct bias_add_grad_rule {  // BiasAddGrad sums rows, so its gradient repeats them
  template <class V> static result<V> apply(const args<V>& a) { return {broadcast_like(a.d(), a.x[0])}; }
};
// The gradient of softmax at y = softmax(x) for output gradient d: (d - sum(d y)) y.
template <class V>
V softmax_backward(const V& d, const V& y) {
  return (d - reduce_sum_keep(d * y, -1)) * y;
}
struct softmax_rule {
  template <class V> static result<V> apply(const args<V>& a) { return {softmax_backward(a.d(), a.y[0])}; }
};
struct log_softmax_rule {  // d - sum(d) softmax(x), with softmax(x) = exp(y)
  template <class V> static result<V> apply(const args<V>& a) { return {a.d() - reduce_sum_keep(a.d(), -1) * exp(a.y[0])}; }
};
// (Sparse)SoftmaxCrossEntropyWithLogits(features, labels) -> (loss, backprop). Through the
// loss: the features get dloss * backprop and dense labels dloss * -log_softmax(features);
// through backprop = softmax(features) - labels, softmax's gradient and minus the labels'.
// As in TensorFlow, the features' gradient through the loss assumes that each row of
// labels sums to 1 (a distribution), which makes it softmax - labels.
template <bool Dense>
struct softmax_cross_entropy_rule {
  template <class V>
  static result<V> apply(const args<V>& a) {
    const V& f = a.x[0];
    std::optional<V> df, dl;
    if (a.dy[0]) {
      V d = keep_reduced(*a.dy[0], f, int_constant(f, -1));
      df = d * a.y[1];
      if (Dense) dl = d * -log_softmax(f);
    }
    if (a.dy[1]) {
      const V& g = *a.dy[1];
      V t = softmax_backward(g, softmax(f));
      df = df ? *df + t : t;
      if (Dense) dl = dl ? *dl - g : -g;
    }
    return {df, dl};
  }
};
struct l2_loss_rule {
  template <class V> static result<V> apply(const args<V>& a) { return {a.x[0] * a.d()}; }
};

// Convolution and pooling. Conv2D is bilinear in input and filter, and its two gradient
// ops are the same product with another operand left out, so each of the three ops'
// gradients is one of the others.
struct conv2d_rule {
  template <class V>
  static result<V> apply(const args<V>& a) {
    const attr_map w = window_attr_map(a.n);
    const V &x = a.x[0], &f = a.x[1];
    return {conv2d_backprop_input(shape_tensor(x), f, a.d(), w), conv2d_backprop_filter(x, shape_tensor(f), a.d(), w)};
  }
};
struct conv2d_backprop_input_rule {  // (input_sizes, filter, out_backprop) -> d input
  template <class V>
  static result<V> apply(const args<V>& a) {
    const attr_map w = window_attr_map(a.n);
    const V &f = a.x[1], &dy = a.x[2];
    return {std::nullopt, conv2d_backprop_filter(a.d(), shape_tensor(f), dy, w), conv2d(a.d(), f, w)};
  }
};
struct conv2d_backprop_filter_rule {  // (input, filter_sizes, out_backprop) -> d filter
  template <class V>
  static result<V> apply(const args<V>& a) {
    const attr_map w = window_attr_map(a.n);
    const V &x = a.x[0], &dy = a.x[2];
    return {conv2d_backprop_input(shape_tensor(x), a.d(), dy, w), std::nullopt, conv2d(x, a.d(), w)};
  }
};
struct max_pool_rule {
  template <class V> static result<V> apply(const args<V>& a) { return {max_pool_grad(a.x[0], a.y[0], a.d(), window_attr_map(a.n))}; }
};
// MaxPoolGrad is linear in its grad and MaxPoolGradGrad is its adjoint (and the other way
// round); both are piecewise constant in orig_input and orig_output (no gradient there,
// as in TensorFlow).
template <bool Second>
struct max_pool_grad_rule {
  template <class V>
  static result<V> apply(const args<V>& a) {
    const attr_map w = window_attr_map(a.n);
    return {std::nullopt, std::nullopt,
            Second ? max_pool_grad(a.x[0], a.x[1], a.d(), w) : max_pool_grad_grad(a.x[0], a.x[1], a.d(), w)};
  }
};
struct avg_pool_rule {
  template <class V> static result<V> apply(const args<V>& a) { return {avg_pool_grad(shape_tensor(a.x[0]), a.d(), window_attr_map(a.n))}; }
};
struct avg_pool_grad_rule {  // AvgPoolGrad is AvgPool's adjoint, so AvgPool is its
  template <class V> static result<V> apply(const args<V>& a) { return {std::nullopt, avg_pool(a.d(), window_attr_map(a.n))}; }
};
struct dropout_rule {  // output = x * mask; the mask does not depend on x
  template <class V>
  static result<V> apply(const args<V>& a) {
    if (!a.dy[0]) return {std::nullopt, std::nullopt};
    return {*a.dy[0] * a.y[1], std::nullopt};
  }
};

// Registers the rules above for graphs built at run time, once.
// ---- control flow (graphs only) ----------------------------------------------------------
// A cond's Switch: the gradients of its two outputs meet in a Merge, the side that did not
// run given zeros on that side only (a Switch of zeros), so that the Merge gets one live value.
struct switch_grad {
  static result<symbol> apply(const args<symbol>& a) {
    if (a.x[1].producer().op() == "LoopCond")
      fail(error_code::internal, "weft::add_gradients: ", a.n.describe(), " is a loop's Switch, differentiated as a cond's");
    auto side = [&](int port) { return a.dy[static_cast<std::size_t>(port)] ? *a.dy[static_cast<std::size_t>(port)]
                                                                             : zeros_like(a.x[0]).then("Switch", {a.x[1]}, {}, port); };
    return {side(0).then("Merge", {side(1)}), std::nullopt};
  }
};
// A cond's Merge: the gradient goes to the input that was taken (value_index), through a
// Switch; the other inputs' gradients are dead, as their branches were.
struct merge_grad {
  static result<symbol> apply(const args<symbol>& a) {
    result<symbol> r;
    for (std::size_t i = 0; i < a.x.size(); ++i) {
      if (!a.needs(i)) {
        r.push_back(std::nullopt);
        continue;
      }
      auto taken = equal(a.y[1], constant_in(a.y[1], tensor::scalar(static_cast<std::int32_t>(i))));
      r.push_back(a.d().then("Switch", {taken}, {}, 1));
    }
    return r;
  }
};

inline void register_standard_gradients() {
  static const bool done = [] {
    auto& r = gradient_registry::global();
    auto add_rule = [&]<class R>(const char* op, R) {
      r.add(op, [](const gradient_args<symbol>& a) { return R::template apply<symbol>(a); });
    };
    add_rule("Identity", identity_grad{});
    r.add("Switch", &switch_grad::apply);
    r.add("Merge", &merge_grad::apply);
    add_rule("ZerosLike", values_unused_grad{});
    add_rule("OnesLike", values_unused_grad{});
    add_rule("Neg", elementwise_grad<neg_grad>{});
    add_rule("Add", elementwise_grad<add_grad>{});
    add_rule("Sub", elementwise_grad<sub_grad>{});
    add_rule("Mul", elementwise_grad<mul_grad>{});
    add_rule("Div", elementwise_grad<div_grad>{});
    add_rule("Pow", elementwise_grad<pow_grad>{});
    add_rule("Maximum", elementwise_grad<maximum_grad>{});
    add_rule("Minimum", elementwise_grad<minimum_grad>{});
    add_rule("Square", elementwise_grad<square_grad>{});
    add_rule("Sqrt", elementwise_grad<sqrt_grad>{});
    add_rule("Rsqrt", elementwise_grad<rsqrt_grad>{});
    add_rule("Exp", elementwise_grad<exp_grad>{});
    add_rule("Log", elementwise_grad<log_grad>{});
    add_rule("Tanh", elementwise_grad<tanh_grad>{});
    add_rule("Sigmoid", elementwise_grad<sigmoid_grad>{});
    add_rule("Relu", relu_rule{});
    add_rule("ReluGrad", relu_grad_rule{});
    add_rule("Abs", elementwise_grad<abs_grad>{});
    add_rule("SelectV2", elementwise_grad<select_grad>{});
    add_rule("Select", select_rows_grad{});
    add_rule("Cast", elementwise_grad<cast_grad>{});
    add_rule("MatMul", matmul_grad{});
    add_rule("Sum", sum_grad{});
    add_rule("Mean", mean_grad{});
    add_rule("Reshape", reshape_grad{});
    add_rule("SumToShape", sum_to_shape_grad{});
    add_rule("BroadcastTo", broadcast_to_grad{});
    add_rule("Fill", fill_grad{});
    add_rule("Prod", prod_grad{});
    add_rule("Cumsum", cumsum_grad{});
    add_rule("Cumprod", cumprod_grad{});
    add_rule("GatherV2", gather_grad{});
    add_rule("UnsortedSegmentSum", unsorted_segment_sum_grad{});
    add_rule("GatherNd", gather_nd_grad{});
    add_rule("ScatterNd", scatter_nd_grad{});
    add_rule("TensorScatterUpdate", tensor_scatter_update_grad{});
    add_rule("TensorScatterAdd", tensor_scatter_add_grad{});
    add_rule("Max", max_min_grad{});
    add_rule("Min", max_min_grad{});
    add_rule("BatchMatMulV2", batch_matmul_grad{});
    add_rule("MatrixInverse", matrix_inverse_grad{});
    add_rule("MatrixDeterminant", matrix_determinant_grad{});
    add_rule("Transpose", transpose_grad{});
    add_rule("ConcatV2", concat_grad{});
    add_rule("Split", split_grad{});
    add_rule("Slice", slice_grad{});
    add_rule("Pad", pad_grad{});
    add_rule("Tile", tile_grad{});
    add_rule("BiasAdd", bias_add_rule{});
    add_rule("BiasAddGrad", bias_add_grad_rule{});
    add_rule("Softmax", softmax_rule{});
    add_rule("LogSoftmax", log_softmax_rule{});
    add_rule("SoftmaxCrossEntropyWithLogits", softmax_cross_entropy_rule<true>{});
    add_rule("SparseSoftmaxCrossEntropyWithLogits", softmax_cross_entropy_rule<false>{});
    add_rule("L2Loss", l2_loss_rule{});
    add_rule("Conv2D", conv2d_rule{});
    add_rule("Conv2DBackpropInput", conv2d_backprop_input_rule{});
    add_rule("Conv2DBackpropFilter", conv2d_backprop_filter_rule{});
    add_rule("MaxPool", max_pool_rule{});
    add_rule("MaxPoolGrad", max_pool_grad_rule<false>{});
    add_rule("MaxPoolGradGrad", max_pool_grad_rule<true>{});
    add_rule("AvgPool", avg_pool_rule{});
    add_rule("AvgPoolGrad", avg_pool_grad_rule{});
    add_rule("Dropout", dropout_rule{});
    return true;
  }();
  (void)done;
}

}  // namespace weft::gradients
