/// @file
/// The DSL's shape, array and matrix ops: reshape, transpose, concat, identity, zeros_like,
/// ones_like, slice, pad, tile, gather, gather_nd,
/// tensor_scatter_update, tensor_scatter_add, one_hot, split, expand_dims, squeeze, stack,
/// unstack, reverse, add_n,
/// shape_tensor / rank_tensor / size_tensor, batch_matmul, matrix_inverse and
/// matrix_determinant. Sizes, offsets and axes are template arguments, so the result's static
/// shape is computed at compile time and static dims are checked there; dyn dims are checked
/// by the graph's shape rules and the kernels at run time.
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/dsl/ops.hpp>
#include <weft/dsl/reduction_ops.hpp>

namespace weft {

// ---- shape ops ------------------------------------------------------------------------

/// reshape(x, dims<dyn, 784>): one dim may be dyn, inferred from the element count.
template <expression A, std::int64_t... D>
auto reshape(const A& a, static_shape<D...>) {
  using From = shape_of<A>;
  using To = static_shape<D...>;
  constexpr std::int64_t dyns = ((D < 0 ? 1 : 0) + ... + 0);
  (void)check::reshape_one_dyn<dyns <= 1 ? 0 : dyns, 0>::value;
  if constexpr (From::fully_static && To::fully_static) {
    (void)check::reshape_element_counts<From::num_elements, To::num_elements>::value;
  }
  using R = detail::shape_from_array_t<ops::static_rules::reshape(From::values, To::values)>;
  using Op = detail::array_op<ops::Reshape>;
  return op_expr<Op, value_type_of<A>, R, A>(Op{"Reshape", {{detail::int_input::append, {D...}}}, {}}, a);
}

/// A permutation of dims in the type (perm<...> spells it).
template <std::int64_t... P>
struct permutation {};
/// transpose's permutation: output dim i is input dim P[i].
template <std::int64_t... P>
inline constexpr permutation<P...> perm{};

/// transpose(x, perm<1, 0>): dims permuted; transpose(x) reverses them.
template <expression A, std::int64_t... P>
auto transpose(const A& a, permutation<P...>) {
  using S = shape_of<A>;
  (void)check::transpose_perm<static_cast<std::int64_t>(sizeof...(P)), S::rank>::value;
  static_assert(((P >= 0 && P < S::rank) && ...), "weft::transpose: a permutation entry is out of range");
  using R = detail::shape_from_array_t<ops::static_rules::transpose(S::values, std::array<std::int64_t, sizeof...(P)>{P...})>;
  using Op = detail::array_op<ops::Transpose>;
  return op_expr<Op, value_type_of<A>, R, A>(Op{"Transpose", {{detail::int_input::append, {P...}}}, {}}, a);
}
/// transpose(x): the dims reversed.
template <expression A>
auto transpose(const A& a) {
  using S = shape_of<A>;
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return transpose(a, perm<static_cast<std::int64_t>(S::rank - 1 - static_cast<int>(I))...>);
  }(std::make_index_sequence<static_cast<std::size_t>(S::rank)>{});
}

namespace detail {
template <std::int64_t Axis, class First, class... Rest>
struct concat_shape {
  static constexpr int rank = First::rank;
  static constexpr std::int64_t axis = Axis < 0 ? Axis + rank : Axis;
  /// The first (rank, other rank) or (dim, other dim) mismatch, or {0, 0}.
  static constexpr std::array<std::int64_t, 2> rank_conflict = [] {
    std::array<std::int64_t, 2> out{0, 0};
    ((Rest::rank != rank && out[0] == out[1] ? (out = {rank, Rest::rank}, 0) : 0), ...);
    return out;
  }();
  static constexpr std::array<std::int64_t, 2> dim_conflict = [] {
    std::array<std::int64_t, 2> out{0, 0};
    auto one = [&](const auto& values) {
      for (std::size_t d = 0; d < values.size() && d < First::values.size(); ++d) {
        if (static_cast<std::int64_t>(d) == axis || out[0] != out[1]) continue;
        auto p = static_pair(First::values[d], values[d]);
        if (p[0] != p[1]) out = p;
      }
    };
    (one(Rest::values), ...);
    return out;
  }();
  static constexpr auto dims = ops::static_rules::concat(Axis, First::values, Rest::values...);
  using type = shape_from_array_t<dims>;
};
}  // namespace detail

/// concat<axis>(a, b, ...): joined along axis; the other dims must agree.
template <std::int64_t Axis, expression First, expression... Rest>
auto concat(const First& first, const Rest&... rest) {
  using C = detail::concat_shape<Axis, shape_of<First>, shape_of<Rest>...>;
  (void)check::concat_axis<(C::axis >= 0 && C::axis < C::rank) ? 0 : Axis, 0>::value;
  (void)check::concat_ranks<C::rank_conflict[0], C::rank_conflict[1]>::value;
  (void)check::concat_dims<C::dim_conflict[0], C::dim_conflict[1]>::value;
  ((void)check::concat_dtypes<value_type_of<First>, value_type_of<Rest>>::value, ...);
  using Op = detail::array_op<ops::ConcatV2>;
  return op_expr<Op, value_type_of<First>, typename C::type, First, Rest...>(
      Op{"ConcatV2", {{detail::int_input::append, {Axis}, {}}}, {}}, first, rest...);
}

/// Identity's descriptor.
struct identity_op : detail::lowers_plainly<identity_op> {
  static constexpr bool elementwise = false;  ///< whether fusion may merge it with its elementwise neighbours
  using op = ops::Identity;  ///< the op's type
  static constexpr const char* name = "Identity";  ///< the graph op's name
  /// The node's attrs.
  attr_map attrs() const { return {}; }
  /// A template, so that a header compiled without any backend's kernels stays valid.
  template <class = void>
  void prepare() const {
    use_kernels<ops::families::core>();
  }
};
/// identity(x): x's value through an Identity node (a name, a device, a control point).
template <expression A>
auto identity(const A& a) {
  return op_expr<identity_op, value_type_of<A>, shape_of<A>, A>({}, a);
}

/// ZerosLike's and OnesLike's descriptor.
template <bool Ones>
struct fill_like_op : detail::lowers_plainly<fill_like_op<Ones>> {
  static constexpr bool elementwise = false;  ///< whether fusion may merge it with its elementwise neighbours
  using op = std::conditional_t<Ones, ops::OnesLike, ops::ZerosLike>;  ///< the op's type
  static constexpr const char* name = op::name;  ///< the graph op's name
  /// The node's attrs.
  attr_map attrs() const { return {}; }
  /// Asks for the kernels the node needs (where a program compiles its own).
  void prepare() const {
    use_kernels<op>();
  }
};
/// Zeros of x's dtype and shape.
template <expression A>
auto zeros_like(const A& a) {
  return op_expr<fill_like_op<false>, value_type_of<A>, shape_of<A>, A>({}, a);
}
/// Ones of x's dtype and shape.
template <expression A>
auto ones_like(const A& a) {
  return op_expr<fill_like_op<true>, value_type_of<A>, shape_of<A>, A>({}, a);
}

namespace check {
WEFT_DETAIL_DIM_CHECK(slice_rank, "weft::slice: the number of offsets or sizes differs from the operand's rank");
WEFT_DETAIL_DIM_CHECK(slice_bounds, "weft::slice: offset + size exceeds the operand's dimension");
WEFT_DETAIL_DIM_CHECK(pad_count, "weft::pad: paddings need two entries (before, after) per dimension");
WEFT_DETAIL_DIM_CHECK(tile_count, "weft::tile: the number of multiples differs from the operand's rank");
WEFT_DETAIL_DIM_CHECK(split_divides, "weft::split: the dimension does not divide into equal parts");
WEFT_DETAIL_DIM_CHECK(stack_ranks, "weft::stack/add_n: operands have different ranks");
WEFT_DETAIL_DIM_CHECK(stack_dims, "weft::stack/add_n: operands differ in a dimension");
WEFT_DETAIL_TYPE_CHECK(stack_dtypes, "weft::stack/add_n: operands have different dtypes");
WEFT_DETAIL_DIM_CHECK(squeeze_one, "weft::squeeze: a named dimension is not 1");
WEFT_DETAIL_DIM_CHECK(unstack_count, "weft::unstack: the dimension along the axis is not the number of parts");
WEFT_DETAIL_DIM_CHECK(gather_axis, "weft::gather: the axis is out of range for the params' rank");
WEFT_DETAIL_SUPPORT_CHECK(gather_indices, "weft::gather: indices must be int32 or int64");
WEFT_DETAIL_SUPPORT_CHECK(nd_indices, "weft::gather_nd/tensor_scatter_*: indices must be int32 or int64");
WEFT_DETAIL_DIM_CHECK(nd_index_depth,
                      "weft::gather_nd/tensor_scatter_*: the indices' last dim (the index depth) must be static and at most "
                      "the operand's rank");
WEFT_DETAIL_TYPE_CHECK(scatter_dtypes, "weft::tensor_scatter_*: the updates' dtype differs from the tensor's");
WEFT_DETAIL_DIM_CHECK(scatter_updates_rank,
                      "weft::tensor_scatter_*: the updates' rank differs from the slices' (indices' dims but the last, "
                      "then the tensor's dims past the index depth)");
WEFT_DETAIL_DIM_CHECK(scatter_updates_dims, "weft::tensor_scatter_*: a static dim of the updates differs from the slices'");
WEFT_DETAIL_SUPPORT_CHECK(one_hot_indices, "weft::one_hot: indices must be uint8, int32 or int64");
WEFT_DETAIL_DIM_CHECK(batch_matmul_rank, "weft::batch_matmul: an operand has rank below 2");
WEFT_DETAIL_DIM_CHECK(batch_matmul_inner_dims, "weft::batch_matmul: inner dimensions differ");
WEFT_DETAIL_DIM_CHECK(batch_matmul_batch, "weft::batch_matmul: batch dimensions cannot be broadcast");
WEFT_DETAIL_TYPE_CHECK(batch_matmul_dtypes, "weft::batch_matmul: operands have different dtypes");
WEFT_DETAIL_SUPPORT_CHECK(batch_matmul_dtype, "weft::batch_matmul: the operands' dtype is not supported");
WEFT_DETAIL_DIM_CHECK(square_matrices, "weft::matrix_inverse/matrix_determinant: the matrices are not square");
WEFT_DETAIL_DIM_CHECK(square_rank, "weft::matrix_inverse/matrix_determinant: the operand has rank below 2");
WEFT_DETAIL_SUPPORT_CHECK(linalg_dtype,
                          "weft::matrix_inverse/matrix_determinant: the dtype must be float, double or complex");
}  // namespace check

/// Static integer lists: slice(x, offsets<1, 0>, dims<2, dyn>), pad(x, paddings<1, 1, 0, 0>),
/// tile(x, multiples<2, 1>).
template <std::int64_t... V>
struct index_list {
  static constexpr std::array<std::int64_t, sizeof...(V)> values{V...};  ///< the list
};
/// A slice's start per dim: offsets<1, 0>.
template <std::int64_t... V>
inline constexpr index_list<V...> offsets{};
/// pad's (before, after) pairs, dim by dim: paddings<1, 1, 0, 0>.
template <std::int64_t... V>
inline constexpr index_list<V...> paddings{};
/// tile's repeat count per dim: multiples<2, 1>.
template <std::int64_t... V>
inline constexpr index_list<V...> multiples{};

namespace detail {

/// The first pair (end, dim) of a slice that ends beyond a static dim, else {0, 0}.
template <class S, class B, class Z>
constexpr std::array<std::int64_t, 2> slice_conflict() {
  if constexpr (B::values.size() == S::values.size() && Z::values.size() == S::values.size()) {
    for (std::size_t i = 0; i < S::values.size(); ++i) {
      std::int64_t size = Z::values[i] < 0 ? 0 : Z::values[i];
      if (S::values[i] >= 0 && B::values[i] + size > S::values[i]) return {B::values[i] + size, S::values[i]};
    }
  }
  return {0, 0};
}

}  // namespace detail

// ---- slice, pad, tile -----------------------------------------------------------------

/// slice(x, offsets<1, 0>, dims<2, dyn>): the block starting at the offsets; a dyn size runs
/// to the end of its dimension (TensorFlow's -1).
template <expression A, std::int64_t... B, std::int64_t... Z>
auto slice(const A& a, index_list<B...>, static_shape<Z...>) {
  using S = shape_of<A>;
  static_assert(((B >= 0) && ...), "weft::slice: offsets must be non-negative");
  (void)check::slice_rank<static_cast<std::int64_t>(sizeof...(B)), S::rank>::value;
  (void)check::slice_rank<static_cast<std::int64_t>(sizeof...(Z)), S::rank>::value;
  constexpr auto bounds = detail::slice_conflict<S, index_list<B...>, static_shape<Z...>>();
  (void)check::slice_bounds<bounds[0], bounds[1]>::value;
  constexpr auto out = ops::static_rules::slice(S::values, index_list<B...>::values, static_shape<Z...>::values);
  using Op = detail::array_op<ops::Slice>;
  std::vector<std::int64_t> sizes{(Z < 0 ? -1 : Z)...};
  return op_expr<Op, value_type_of<A>, detail::shape_from_array_t<out>, A>(
      Op{"Slice", {{1, {B...}}, {2, sizes}}, {}}, a);
}

/// pad(x, paddings<before0, after0, before1, after1, ...>): zeros around x.
template <expression A, std::int64_t... P>
auto pad(const A& a, index_list<P...>) {
  using S = shape_of<A>;
  static_assert(((P >= 0) && ...), "weft::pad: paddings must be non-negative");
  (void)check::pad_count<static_cast<std::int64_t>(sizeof...(P)), 2 * S::rank>::value;
  constexpr auto out = ops::static_rules::pad(S::values, index_list<P...>::values);
  using Op = detail::array_op<ops::Pad>;
  // Paddings are a [rank, 2] matrix.
  return op_expr<Op, value_type_of<A>, detail::shape_from_array_t<out>, A>(
      Op{"Pad", {{1, {P...}, {S::rank, 2}}}, {}}, a);
}

/// tile(x, multiples<2, 1>): x repeated along each dimension.
template <expression A, std::int64_t... M>
auto tile(const A& a, index_list<M...>) {
  using S = shape_of<A>;
  static_assert(((M >= 0) && ...), "weft::tile: multiples must be non-negative");
  (void)check::tile_count<static_cast<std::int64_t>(sizeof...(M)), S::rank>::value;
  constexpr auto out = ops::static_rules::tile(S::values, index_list<M...>::values);
  using Op = detail::array_op<ops::Tile>;
  return op_expr<Op, value_type_of<A>, detail::shape_from_array_t<out>, A>(Op{"Tile", {{1, {M...}}}, {}}, a);
}

// ---- gather, one_hot, split -------------------------------------------------------------

/// gather(params, indices[, axes<a>]): slices of params along axis a (default 0) at the
/// indices; the result's shape is params[:a] + indices + params[a+1:] (TensorFlow's GatherV2).
/// An index out of range is a run-time error.
template <expression P, expression I, std::int64_t Axis = 0>
auto gather(const P& params, const I& indices, axis_list<Axis> = {}) {
  using SP = shape_of<P>;
  using SI = shape_of<I>;
  using IT = value_type_of<I>;
  constexpr std::int64_t axis = Axis < 0 ? Axis + SP::rank : Axis;
  (void)check::gather_axis<(axis >= 0 && axis < SP::rank) ? 0 : Axis, 0>::value;
  (void)check::gather_indices<IT, std::is_same_v<IT, std::int32_t> || std::is_same_v<IT, std::int64_t>>::value;
  constexpr auto out = ops::static_rules::gather<SP::values, SI::values, axis>();
  using Op = detail::array_op<ops::GatherV2>;
  return op_expr<Op, value_type_of<P>, detail::shape_from_array_t<out>, P, I>(
      Op{"GatherV2", {{2, {axis}, {}}}, {}}, params, indices);
}

// ---- gather_nd, tensor_scatter_update, tensor_scatter_add ---------------------------------

namespace detail {
/// The slices that indices of shape SI ([..., K], K static) address in a tensor of shape SP:
/// SI[:-1] + SP[K:]. Checks the indices' dtype IT and depth.
template <class SP, class SI, class IT>
constexpr auto nd_slices() {
  (void)check::nd_indices<IT, std::is_same_v<IT, std::int32_t> || std::is_same_v<IT, std::int64_t>>::value;
  constexpr std::int64_t depth = SI::rank >= 1 ? SI::values[static_cast<std::size_t>(SI::rank - 1)] : -1;
  constexpr bool ok = depth >= 0 && depth <= SP::rank;
  (void)check::nd_index_depth<ok ? 0 : depth, 0>::value;
  return ops::static_rules::gather_nd<SP::values, SI::values>();
}
/// Checks the updates' dtype and shape SU against the tensor's T and the slices' shape.
template <class T, class U, class Slices, class SU>
constexpr bool check_scatter() {
  (void)check::scatter_dtypes<T, U>::value;
  if constexpr (Slices::rank != SU::rank) {
    return check::scatter_updates_rank<Slices::rank, SU::rank>::value;
  } else {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (true && ... &&
              check::scatter_updates_dims<(Slices::values[I] < 0 || SU::values[I] < 0) ? 0 : Slices::values[I],
                                          (Slices::values[I] < 0 || SU::values[I] < 0) ? 0 : SU::values[I]>::value);
    }(std::make_index_sequence<static_cast<std::size_t>(Slices::rank)>{});
  }
}
}  // namespace detail

/// gather_nd(params, indices): indices of shape [..., K] (int32 or int64, K static and at
/// most params' rank) name slices params[i0, ..., iK-1]; the result holds them, shape
/// indices[:-1] + params[K:] (TensorFlow's GatherNd). A tuple out of range is a run-time
/// error naming it. gather_nd(x, reshape(i, dims<1>)) is row i of x.
template <expression P, expression I>
auto gather_nd(const P& params, const I& indices) {
  constexpr auto out = detail::nd_slices<shape_of<P>, shape_of<I>, value_type_of<I>>();
  using Op = detail::array_op<ops::GatherNd>;
  return op_expr<Op, value_type_of<P>, detail::shape_from_array_t<out>, P, I>(Op{"GatherNd", {}, {}}, params, indices);
}

/// tensor_scatter_update(t, indices, updates): t with the slices that indices name (as
/// gather_nd's) replaced by updates, of gather_nd(t, indices)'s shape; a slice named twice
/// gets one of its updates. tensor_scatter_add adds the updates instead (a slice named twice
/// gets both). Both write into t's buffer when nothing else holds it, so a loop that
/// updates one row of a loop variable per iteration costs a row per iteration.
template <expression E, expression I, expression U>
auto tensor_scatter_update(const E& t, const I& indices, const U& updates) {
  constexpr auto slices = detail::nd_slices<shape_of<E>, shape_of<I>, value_type_of<I>>();
  (void)detail::check_scatter<value_type_of<E>, value_type_of<U>, detail::shape_from_array_t<slices>, shape_of<U>>();
  using Op = detail::array_op<ops::TensorScatterUpdate>;
  return op_expr<Op, value_type_of<E>, shape_of<E>, E, I, U>(Op{"TensorScatterUpdate", {}, {}}, t, indices, updates);
}
/// tensor_scatter_add(t, indices, updates): t with the updates added at the indices
/// (TensorFlow's TensorScatterAdd; repeated indices add up).
template <expression E, expression I, expression U>
auto tensor_scatter_add(const E& t, const I& indices, const U& updates) {
  using T = value_type_of<E>;
  constexpr auto slices = detail::nd_slices<shape_of<E>, shape_of<I>, value_type_of<I>>();
  (void)detail::check_scatter<T, value_type_of<U>, detail::shape_from_array_t<slices>, shape_of<U>>();
  using Op = detail::indexed_op<ops::TensorScatterAdd, T>;
  return op_expr<Op, T, shape_of<E>, E, I, U>(Op{"TensorScatterAdd", {}, {}}, t, indices, updates);
}

/// one_hot<10>(labels): float32 rows with 1 at each label and 0 elsewhere, a new last
/// dimension of size 10; one_hot<10, double>(labels, on, off) with other values and dtype.
/// An index outside [0, depth) gives a row of `off`.
template <std::int64_t Depth, element T = float, expression I>
auto one_hot(const I& indices, T on = T(1), T off = T(0)) {
  using SI = shape_of<I>;
  using IT = value_type_of<I>;
  static_assert(Depth >= 0, "weft::one_hot: the depth must be non-negative");
  (void)check::one_hot_indices<IT, std::is_same_v<IT, std::uint8_t> || std::is_same_v<IT, std::int32_t> ||
                                       std::is_same_v<IT, std::int64_t>>::value;
  constexpr auto out = ops::static_rules::one_hot(SI::values, Depth);
  using Op = detail::array_op<ops::OneHot>;
  auto on_c = constant(on), off_c = constant(off);
  return op_expr<Op, T, detail::shape_from_array_t<out>, I, decltype(on_c), decltype(off_c)>(
      Op{"OneHot", {{1, {Depth}, {}, dtype::int32}}, {}}, indices, on_c, off_c);
}

/// split<3, 1>(x): three equal parts of x along axis 1, as a std::array of expressions (one
/// node with three outputs).
template <std::int64_t N, std::int64_t Axis, expression A>
auto split(const A& a) {
  using S = shape_of<A>;
  static_assert(N >= 1, "weft::split: the number of parts must be at least 1");
  constexpr std::int64_t axis = Axis < 0 ? Axis + S::rank : Axis;
  static_assert(axis >= 0 && axis < S::rank, "weft::split: the axis is out of range for the operand's rank");
  constexpr std::int64_t dim = S::values[static_cast<std::size_t>(axis)];
  (void)check::split_divides<dim < 0 ? 0 : dim % N, 0>::value;
  constexpr auto out = ops::static_rules::split(S::values, static_cast<std::size_t>(axis), N);
  using Op = detail::array_op<ops::Split>;
  using E = op_expr<Op, value_type_of<A>, detail::shape_from_array_t<out>, A>;
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    return std::array<E, N>{
        E(Op{"Split", {{0, {axis}, {}, dtype::int32}}, {{"num_split", N}}, static_cast<int>(K)}, a)...};
  }(std::make_index_sequence<static_cast<std::size_t>(N)>{});
}

// ---- expand_dims, squeeze, stack, unstack, reverse, add_n ---------------------------------

namespace detail {
/// Dim Axis of S for squeeze's check: 1 where it is dyn (checked when run).
template <class S, std::int64_t Axis>
constexpr std::int64_t squeezed_dim() {
  const std::int64_t d = dim_or(S::values, static_cast<std::size_t>(Axis < 0 ? Axis + S::rank : Axis));
  return d < 0 ? 1 : d;
}
/// The operands of stack and add_n: one rank, dims that agree where static, one dtype.
template <class First, class... Rest>
constexpr void check_same_shapes() {
  [[maybe_unused]] constexpr int rank = shape_of<First>::rank;
  constexpr std::array<std::int64_t, 2> rank_conflict = [] {
    std::array<std::int64_t, 2> out{0, 0};
    ((shape_of<Rest>::rank != rank && out[0] == out[1] ? (out = {rank, shape_of<Rest>::rank}, 0) : 0), ...);
    return out;
  }();
  (void)check::stack_ranks<rank_conflict[0], rank_conflict[1]>::value;
  constexpr std::array<std::int64_t, 2> dim_conflict = [] {
    std::array<std::int64_t, 2> out{0, 0};
    [[maybe_unused]] const auto one = [&](const auto& values) {
      for (std::size_t d = 0; d < values.size() && d < shape_of<First>::values.size(); ++d) {
        const auto p = static_pair(shape_of<First>::values[d], values[d]);
        if (out[0] == out[1] && p[0] != p[1]) out = p;
      }
    };
    (one(shape_of<Rest>::values), ...);
    return out;
  }();
  (void)check::stack_dims<dim_conflict[0], dim_conflict[1]>::value;
  ((void)check::stack_dtypes<value_type_of<First>, value_type_of<Rest>>::value, ...);
}
}  // namespace detail

/// expand_dims<1>(x): x with a dim of 1 inserted at the axis (in [-rank - 1, rank]; -1 the
/// last place), a view of x (TensorFlow's ExpandDims).
template <std::int64_t Axis, expression A>
auto expand_dims(const A& a) {
  using S = shape_of<A>;
  static_assert(Axis >= -S::rank - 1 && Axis <= S::rank, "weft::expand_dims: the axis is out of range [-rank - 1, rank]");
  constexpr auto out = ops::static_rules::expand_dims(S::values, Axis);
  using Op = detail::array_op<ops::ExpandDims>;
  return op_expr<Op, value_type_of<A>, detail::shape_from_array_t<out>, A>(Op{"ExpandDims", {{1, {Axis}, {}, dtype::int32}}, {}}, a);
}

/// squeeze(x, axes<0, 2>): x without those dims, each 1 (a dyn one is checked when run);
/// squeeze(x): without every dim of 1, which needs every dim static (TensorFlow's Squeeze).
template <expression A, std::int64_t... Axes>
auto squeeze(const A& a, axis_list<Axes...> = {}) {
  using S = shape_of<A>;
  static_assert(((Axes >= -S::rank && Axes < S::rank) && ...), "weft::squeeze: an axis is out of range for the operand's rank");
  static_assert(sizeof...(Axes) > 0 || S::fully_static,
                "weft::squeeze: without axes every dimension must be static (name the axes to squeeze a dyn one)");
  (void)(check::squeeze_one<detail::squeezed_dim<S, Axes>(), 1>::value && ...);
  constexpr auto out = ops::static_rules::squeeze<S::values, Axes...>();
  using Op = detail::array_op<ops::Squeeze>;
  return op_expr<Op, value_type_of<A>, detail::shape_from_array_t<out>, A>(
      Op{"Squeeze", {}, {{"squeeze_dims", std::vector<std::int64_t>{Axes...}}}}, a);
}


/// stack<0>(a, b, ...): the operands (one shape) stacked along a new dim at the axis (in
/// [-rank - 1, rank]), TensorFlow's Pack.
template <std::int64_t Axis, expression First, expression... Rest>
auto stack(const First& first, const Rest&... rest) {
  using S = shape_of<First>;
  detail::check_same_shapes<First, Rest...>();
  static_assert(Axis >= -S::rank - 1 && Axis <= S::rank, "weft::stack: the axis is out of range [-rank - 1, rank]");
  constexpr auto out = ops::static_rules::stack(Axis, S::values, shape_of<Rest>::values...);
  using Op = detail::array_op<ops::Pack>;
  return op_expr<Op, value_type_of<First>, detail::shape_from_array_t<out>, First, Rest...>(
      Op{"Pack", {}, {{"N", static_cast<std::int64_t>(1 + sizeof...(Rest))}, {"axis", Axis}}}, first, rest...);
}

/// unstack<3, 1>(x): the 3 slices of x along axis 1, that dim removed, as a std::array of
/// expressions (one Unpack node with three outputs); the dim must be 3 (a dyn one is checked
/// when run).
template <std::int64_t N, std::int64_t Axis, expression A>
auto unstack(const A& a) {
  using S = shape_of<A>;
  static_assert(N >= 0, "weft::unstack: the number of parts must be non-negative");
  static_assert(S::rank >= 1, "weft::unstack: the operand must have rank at least 1");
  constexpr std::int64_t axis = Axis < 0 ? Axis + S::rank : Axis;
  static_assert(axis >= 0 && axis < S::rank, "weft::unstack: the axis is out of range for the operand's rank");
  constexpr std::int64_t dim = S::values[static_cast<std::size_t>(axis)];
  (void)check::unstack_count<dim < 0 ? N : dim, N>::value;
  constexpr auto out = [] {
    std::array<std::int64_t, static_cast<std::size_t>(S::rank - 1)> d{};
    for (std::size_t i = 0, j = 0; i < S::values.size(); ++i)
      if (static_cast<std::int64_t>(i) != axis) d[j++] = S::values[i];
    return d;
  }();
  using Op = detail::array_op<ops::Unpack>;
  using E = op_expr<Op, value_type_of<A>, detail::shape_from_array_t<out>, A>;
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    return std::array<E, static_cast<std::size_t>(N)>{E(Op{"Unpack", {}, {{"num", N}, {"axis", axis}}, static_cast<int>(K)}, a)...};
  }(std::make_index_sequence<static_cast<std::size_t>(N)>{});
}

/// reverse(x, axes<0, 2>): x with the order along those dims reversed (TensorFlow's ReverseV2).
template <expression A, std::int64_t... Axes>
auto reverse(const A& a, axis_list<Axes...>) {
  using S = shape_of<A>;
  static_assert(((Axes >= -S::rank && Axes < S::rank) && ...), "weft::reverse: an axis is out of range for the operand's rank");
  using Op = detail::array_op<ops::ReverseV2>;
  return op_expr<Op, value_type_of<A>, S, A>(
      Op{"ReverseV2", {{1, {Axes...}, {static_cast<std::int64_t>(sizeof...(Axes))}, dtype::int32}}, {}}, a);
}

/// add_n(a, b, ...): the sum of operands of one shape and dtype in one node (TensorFlow's
/// AddN: no broadcasting), its gradient each operand's.
template <expression First, expression... Rest>
auto add_n(const First& first, const Rest&... rest) {
  detail::check_same_shapes<First, Rest...>();
  using T = value_type_of<First>;
  constexpr auto out = [] {  // the dims merged: a static dim of one fixes the others' dyn one
    auto m = shape_of<First>::values;
    [[maybe_unused]] const auto one = [&](const auto& v) {
      for (std::size_t d = 0; d < m.size() && d < v.size(); ++d)
        if (m[d] < 0) m[d] = v[d];
    };
    (one(shape_of<Rest>::values), ...);
    return m;
  }();
  using S = detail::shape_from_array_t<out>;
  using Op = detail::array_op<ops::AddN, T>;
  return op_expr<Op, T, S, First, Rest...>(Op{"AddN", {}, {{"N", static_cast<std::int64_t>(1 + sizeof...(Rest))}}}, first, rest...);
}

// ---- shape_tensor, rank_tensor, size_tensor -----------------------------------------------

/// The run-time shape, rank and element count of x as tensors (TensorFlow's Shape, Rank and
/// Size; int32 by default, as there).
template <element Out = std::int32_t, expression A>
auto shape_tensor(const A& a) {
  static_assert(std::is_same_v<Out, std::int32_t> || std::is_same_v<Out, std::int64_t>,
                "weft::shape_tensor: the result dtype must be int32 or int64");
  using Op = detail::array_op<ops::Shape>;
  return op_expr<Op, Out, static_shape<shape_of<A>::rank>, A>(Op{"Shape", {}, {{"out_type", dtype_of<Out>}}}, a);
}
/// x's rank as an int32 scalar (TensorFlow's Rank).
template <expression A>
auto rank_tensor(const A& a) {
  using Op = detail::array_op<ops::Rank>;
  return op_expr<Op, std::int32_t, scalar_shape, A>(Op{"Rank", {}, {}}, a);
}
/// x's element count as a scalar of Out (TensorFlow's Size).
template <element Out = std::int32_t, expression A>
auto size_tensor(const A& a) {
  static_assert(std::is_same_v<Out, std::int32_t> || std::is_same_v<Out, std::int64_t>,
                "weft::size_tensor: the result dtype must be int32 or int64");
  using Op = detail::array_op<ops::Size>;
  return op_expr<Op, Out, scalar_shape, A>(Op{"Size", {}, {{"out_type", dtype_of<Out>}}}, a);
}

// ---- batch_matmul, matrix_inverse, matrix_determinant ------------------------------------

namespace detail {
/// Whether the batch dims (all but the last two) of SX and SY broadcast, for the check.
template <class SX, class SY>
using batch_dims_broadcast = broadcast_shapes<shape_from_array_t<ops::static_rules::leading<SX::values, 2>()>,
                                              shape_from_array_t<ops::static_rules::leading<SY::values, 2>()>>;
}  // namespace detail

/// batch_matmul(x, y): matrix products over the last two dims, the leading (batch) dims
/// broadcast; batch_matmul<true, false>(x, y) takes the adjoint of each matrix of x first.
template <bool AdjX = false, bool AdjY = false, expression X, expression Y>
auto batch_matmul(const X& x, const Y& y) {
  using SX = shape_of<X>;
  using SY = shape_of<Y>;
  using T = value_type_of<X>;
  (void)check::batch_matmul_dtypes<T, value_type_of<Y>>::value;
  (void)check::batch_matmul_dtype<T, detail::in_list<T, matmul_types>::value>::value;
  (void)check::batch_matmul_rank<(SX::rank < 2 ? SX::rank : 2), 2>::value;
  (void)check::batch_matmul_rank<(SY::rank < 2 ? SY::rank : 2), 2>::value;
  // Below rank 2 the check above has failed; the indices stay in range for the rest.
  constexpr auto k = detail::static_pair(ops::static_rules::from_right(SX::values, AdjX ? 1 : 0),
                                         ops::static_rules::from_right(SY::values, AdjY ? 0 : 1));
  (void)check::batch_matmul_inner_dims<k[0], k[1]>::value;
  using batch = detail::batch_dims_broadcast<SX, SY>;
  (void)check::batch_matmul_batch<batch::conflict[0], batch::conflict[1]>::value;
  using Out = detail::shape_from_array_t<ops::static_rules::batch_matmul<SX::values, SY::values, AdjX, AdjY>()>;
  using Op = detail::indexed_op<ops::BatchMatMulV2, T>;
  return op_expr<Op, T, Out, X, Y>(
      Op{"BatchMatMulV2", {}, {{"adj_x", AdjX}, {"adj_y", AdjY}}}, x, y);
}

namespace detail {
template <class A>
constexpr void check_square() {
  using S = shape_of<A>;
  using T = value_type_of<A>;
  (void)check::linalg_dtype<T, in_list<T, type_list<float, double, complex64, complex128>>::value>::value;
  (void)check::square_rank<(S::rank < 2 ? S::rank : 2), 2>::value;
  if constexpr (S::rank >= 2) {
    constexpr auto p = static_pair(S::values[S::values.size() - 2], S::values[S::values.size() - 1]);
    (void)check::square_matrices<p[0], p[1]>::value;
  }
}
}  // namespace detail

/// matrix_inverse(x): the inverse of each square matrix of x (its last two dims); a singular
/// matrix is a run-time error. matrix_inverse(x, true) inverts the adjoints.
template <expression A>
auto matrix_inverse(const A& a, bool adjoint = false) {
  detail::check_square<A>();
  using T = value_type_of<A>;
  using Op = detail::indexed_op<ops::MatrixInverse, T>;
  return op_expr<Op, T, shape_of<A>, A>(Op{"MatrixInverse", {}, {{"adjoint", adjoint}}}, a);
}

/// matrix_determinant(x): the determinant of each square matrix of x; the result drops the
/// last two dims.
template <expression A>
auto matrix_determinant(const A& a) {
  detail::check_square<A>();
  using S = shape_of<A>;
  using T = value_type_of<A>;
  constexpr auto out = ops::static_rules::matrix_determinant<S::values>();
  using Op = detail::indexed_op<ops::MatrixDeterminant, T>;
  return op_expr<Op, T, detail::shape_from_array_t<out>, A>(Op{"MatrixDeterminant", {}, {}}, a);
}

}  // namespace weft
