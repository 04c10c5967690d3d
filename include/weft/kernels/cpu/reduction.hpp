/// @file
/// CPU kernels for ops/reduction_ops.hpp. The reduced axes are first merged with their
/// neighbours; the common layouts (all, trailing, leading, middle) reduce in place and any
/// other layout is transposed so the reduced axes come last. Half types accumulate in float.
#pragma once

#include <algorithm>
#include <limits>

#include <weft/kernels/cpu/array.hpp>
#include <weft/kernels/cpu/broadcast_rows.hpp>
#include <weft/kernels/cpu/common.hpp>
#include <weft/kernels/cpu/convert.hpp>
#include <weft/ops/reduction_ops.hpp>

namespace weft::cpu {

/// Half types accumulate in float. Integers accumulate in 64 bits, wrapping: Sum and Prod
/// come out as if computed in the input type with wrap-around, and Mean is the exact mean
/// rounded toward zero (TensorFlow's wraps its sum in the input type first). Integer sums and
/// products wrap modulo 2^64 (computed unsigned), never overflowing a signed type.
template <class T>
using accumulator_t = std::conditional_t<std::is_integral_v<T>, wide_int_t<T>, compute_t<T>>;

// Each reducer: init<A, T>(), the identity as an accumulator A for inputs of type T, and
// combine(a, b).

/// Sum: 0, +, integers wrapping modulo 2^64.
struct sum_reducer {
  /// The identity, 0.
  template <class A, class> static A init() { return A(0); }
  /// a + b.
  template <class A> static A combine(A a, A b) {
    if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
    else return a + b;
  }
};
/// Prod: 1, *, integers wrapping modulo 2^64.
struct prod_reducer {
  /// The identity, 1.
  template <class A, class> static A init() { return A(1); }
  /// a * b.
  template <class A> static A combine(A a, A b) {
    if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
    else return a * b;
  }
};
/// Max and Min of nothing are -inf and +inf for floats (as in TensorFlow), the extremes for integers.
struct max_reducer {
  /// The identity: -inf, or T's lowest value.
  template <class A, class T> static A init() {
    if constexpr (std::numeric_limits<A>::has_infinity) return -std::numeric_limits<A>::infinity();
    else return static_cast<A>(std::numeric_limits<T>::lowest());
  }
  /// The larger of a and b (a when they compare equal or unordered).
  template <class A> static A combine(A a, A b) { return a < b ? b : a; }
};
/// Min: +inf, or T's largest value.
struct min_reducer {
  /// The identity: +inf, or T's largest value.
  template <class A, class T> static A init() {
    if constexpr (std::numeric_limits<A>::has_infinity) return std::numeric_limits<A>::infinity();
    else return static_cast<A>(std::numeric_limits<T>::max());
  }
  /// The smaller of a and b (a when they compare equal or unordered).
  template <class A> static A combine(A a, A b) { return b < a ? b : a; }
};
struct mean_reducer : sum_reducer {};

/// Reduced-axis analysis shared by the reductions: output dims and the (outer, reduce, inner)
/// view after moving the reduced axes last when they are not contiguous.
struct reduction_plan {
  std::vector<std::int64_t> out_dims;   ///< with keep_dims applied
  std::vector<std::int64_t> perm;       ///< non-empty when a transpose is needed
  std::int64_t outer = 1;   ///< the product of the dims before the reduced ones
  std::int64_t reduce = 1;  ///< the product of the reduced dims
  std::int64_t inner = 1;   ///< the product of the dims after them
};

/// The plan of reducing `in` over `axes` (each in [-rank, rank), or an error).
inline reduction_plan plan_reduction(const shape& in, const std::vector<std::int64_t>& axes, bool keep) {
  int rank = in.rank();
  std::vector<bool> reduced(static_cast<std::size_t>(rank));
  for (auto a : axes) reduced[static_cast<std::size_t>(canonical_axis(a, rank, "reduction axis"))] = true;
  reduction_plan p;
  for (int d = 0; d < rank; ++d) {
    if (!reduced[static_cast<std::size_t>(d)])
      p.out_dims.push_back(in[d]);
    else if (keep)
      p.out_dims.push_back(1);
  }
  // Layout: kept dims before the first reduced one, reduced ones, kept ones after: (outer, reduce, inner).
  int first = rank, last = -1;
  for (int d = 0; d < rank; ++d)
    if (reduced[static_cast<std::size_t>(d)] && in[d] != 1) first = std::min(first, d), last = std::max(last, d);
  bool contiguous = true;
  for (int d = first; d <= last; ++d) contiguous = contiguous && (reduced[static_cast<std::size_t>(d)] || in[d] == 1);
  if (contiguous) {
    for (int d = 0; d < rank; ++d) {
      if (d < first) p.outer *= in[d];
      else if (d <= last) p.reduce *= in[d];
      else p.inner *= in[d];
    }
    if (first == rank) p.outer = in.num_elements(), p.reduce = 1, p.inner = 1;
    return p;
  }
  for (int d = 0; d < rank; ++d)
    if (!reduced[static_cast<std::size_t>(d)]) p.perm.push_back(d), p.outer *= in[d];
  for (int d = 0; d < rank; ++d)
    if (reduced[static_cast<std::size_t>(d)]) p.perm.push_back(d), p.reduce *= in[d];
  return p;
}

/// Reduces x (of dtype T) into out as `plan` says, starting each accumulator at `init`.
template <class R, class T>
void reduce_compute(kernel_context& ctx, const tensor& x, tensor& out, const reduction_plan& plan,
                    accumulator_t<T> init) {
  using A = accumulator_t<T>;
  tensor source = x;
  if (!plan.perm.empty()) {
    source = tensor(x.dtype(), shape{plan.outer * plan.reduce});
    transpose_bytes(static_cast<const char*>(x.raw_data()), static_cast<char*>(source.raw_data()), x.shape().dims(),
                    plan.perm, sizeof(T));
  }
  const T* in = source.data<T>();
  T* o = out.data<T>();
  std::int64_t reduce = plan.reduce, inner = plan.inner;
  ctx.parallel_for(plan.outer * inner, static_cast<double>(reduce) + 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t k = b; k < e; ++k) {
      std::int64_t a = k / inner, i = k % inner;
      const T* base = in + a * reduce * inner + i;
      A acc = init;
      for (std::int64_t r = 0; r < reduce; ++r) acc = R::combine(acc, static_cast<A>(base[r * inner]));
      if constexpr (std::is_same_v<R, mean_reducer>) {
        // The mean of nothing is NaN for floats (0 / 0, as in TensorFlow) and 0 for integers.
        if (!std::is_integral_v<A> || reduce > 0) acc = acc / static_cast<A>(reduce);
      }
      o[k] = static_cast<T>(acc);
    }
  });
}

/// The kernel body for inputs of dtype T computed as C: `widen` converts T to C and `narrow`
/// back (both null when T is C). One body per (R, C), so each further T costs only its class.
/// Allocates output 0 of shape `out_shape` (plan's element count) and reduces x of dtype T
/// into it, computing in C (`widen` and `narrow` convert, both null when T is C).
template <class R, class C>
void reduce_into(kernel_context& ctx, const tensor& x, const reduction_plan& plan, const shape& out_shape,
                 accumulator_t<C> init, detail::convert_fn widen, detail::convert_fn narrow) {
  tensor& out = ctx.allocate_output(0, out_shape);
  tensor xc = widen ? detail::converted(ctx, widen, x, dtype_of<C>) : x;
  tensor result = widen ? tensor(dtype_of<C>, out.shape()) : out;
  reduce_compute<R, C>(ctx, xc, result, plan, init);
  if (widen) detail::run_convert(ctx, narrow, result, out);
}

/// A reduction kernel's body: input 0 over the axes of input 1, computed in C.
template <class R, class C>
void reduce_run(kernel_context& ctx, bool keep, accumulator_t<C> init, detail::convert_fn widen,
                detail::convert_fn narrow) {
  const tensor& x = ctx.input(0);
  if (ctx.input(1).rank() > 1)
    fail(error_code::invalid_argument, "reduction_indices must be a scalar or vector, got shape ", ctx.input(1).shape());
  auto plan = plan_reduction(x.shape(), int_values(ctx.input(1), "reduction_indices"), keep);
  reduce_into<R, C>(ctx, x, plan, shape(plan.out_dims), init, widen, narrow);
}

/// The CPU kernels of the reduction by R: `reduce_kernel<R>::of<T>` for dtype T.
template <class R>
struct reduce_kernel {
  /// The kernel for inputs of dtype T.
  template <class T>
  struct of final : op_kernel {
    /// Reads keep_dims.
    explicit of(const node& n) : keep_(n.attr<bool>("keep_dims")) {}
    void compute(kernel_context& ctx) const override {
      using C = compute_t<T>;
      // The identity is T's (the int8 maximum of nothing is -128), even when computing in C.
      reduce_run<R, C>(ctx, keep_, R::template init<accumulator_t<C>, T>(), widen_fn<T>, narrow_fn<T>);
    }
   private:
    bool keep_;
  };
};

/// The index of the first maximum (Max) or minimum along the middle dim of x viewed as
/// (outer, reduce, inner), written as Index.
template <bool Max, class T, class Index>
void arg_compute(const T* in, Index* o, std::int64_t outer, std::int64_t reduce, std::int64_t inner) {
  for (std::int64_t a = 0; a < outer; ++a)
    for (std::int64_t i = 0; i < inner; ++i) {
      const T* base = in + a * reduce * inner + i;
      std::int64_t best = 0;
      for (std::int64_t r = 1; r < reduce; ++r)
        if (Max ? base[best * inner] < base[r * inner] : base[r * inner] < base[best * inner]) best = r;
      o[a * inner + i] = static_cast<Index>(best);
    }
}

/// ArgMax's (Max) or ArgMin's kernel body: the index of the first extreme along input 1's axis.
template <bool Max, class C>
void arg_run(kernel_context& ctx, detail::convert_fn widen) {
  const tensor& x = ctx.input(0);
  if (x.rank() == 0) fail(error_code::invalid_argument, "input must have rank at least 1");
  int axis = canonical_axis(scalar_int(ctx.input(1), "dimension"), x.rank(), "dimension");
  std::int64_t reduce = x.shape()[axis];
  if (reduce == 0) fail(error_code::invalid_argument, "cannot take the arg", Max ? "max" : "min", " of an empty dimension");
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
  auto dims = x.shape().dims();
  dims.erase(dims.begin() + axis);
  tensor& out = ctx.allocate_output(0, shape(dims));
  // Widening keeps the order, so the index is the same.
  tensor source = widen ? detail::converted(ctx, widen, x, dtype_of<C>) : x;
  if (out.dtype() == dtype::int32)
    arg_compute<Max>(source.data<C>(), out.data<std::int32_t>(), outer, reduce, inner);
  else
    arg_compute<Max>(source.data<C>(), out.data<std::int64_t>(), outer, reduce, inner);
}

/// The CPU kernels of ArgMax (Max) and ArgMin: `arg_kernel<Max>::of<T>` for dtype T.
template <bool Max>
struct arg_kernel {
  /// The kernel for inputs of dtype T.
  template <class T>
  struct of final : op_kernel {
    /// The kernel of a node (it reads no attrs).
    explicit of(const node&) {}
    void compute(kernel_context& ctx) const override { arg_run<Max, compute_t<T>>(ctx, widen_fn<T>); }
  };
};

/// A template, so that including this header instantiates nothing until it is called.
/// SumToShape(x, shape): x summed down to `shape`, which broadcasts to x's shape; x itself
/// when the shapes are equal.
template <class T>
struct sum_to_shape_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit sum_to_shape_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    shape to = shape_from_dims(int_values(ctx.input(1), "shape"), "shape");
    if (to == x.shape()) return ctx.set_output(0, x);
    auto b = broadcast(to, x.shape());
    if (!b || *b != x.shape())
      fail(error_code::invalid_argument, "cannot sum an input of shape ", x.shape(), " down to shape ", to,
           ", which does not broadcast to it");
    std::vector<std::int64_t> axes;  // the dims `to` lacks, or has as 1 where x does not
    const int lead = x.rank() - to.rank();
    for (int d = 0; d < x.rank(); ++d)
      if (d < lead || (to[d - lead] == 1 && x.shape()[d] != 1)) axes.push_back(d);
    using C = compute_t<T>;
    reduce_into<sum_reducer, C>(ctx, x, plan_reduction(x.shape(), axes, false), to, accumulator_t<C>{}, widen_fn<T>,
                                narrow_fn<T>);
  }
};

/// BroadcastTo(x, shape): x broadcast to `shape`, row by row (broadcast_rows.hpp); any
/// dtype, copied as bytes.
struct broadcast_to_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit broadcast_to_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    shape to = shape_from_dims(int_values(ctx.input(1), "shape"), "shape");
    if (to == x.shape()) return ctx.set_output(0, x);
    auto b = broadcast(x.shape(), to);
    if (!b || *b != to) fail(error_code::invalid_argument, "cannot broadcast an input of shape ", x.shape(), " to shape ", to);
    tensor& out = ctx.allocate_output(0, to);
    const auto size = static_cast<std::int64_t>(size_of(x.dtype()));
    const char* src = static_cast<const char*>(x.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    broadcast_rows<1> rows(to, {&x.shape()});
    ctx.parallel_for(rows.units(), static_cast<double>(rows.piece()), [&](std::int64_t s, std::int64_t e) {
      rows.each(s, e, [&](std::int64_t o, std::int64_t len, const std::array<std::int64_t, 1>& off) {
        if (rows.steps(0))
          std::memcpy(dst + o * size, src + off[0] * size, static_cast<std::size_t>(len * size));
        else
          replicate_bytes(dst + o * size, src + off[0] * size, size, len);
      });
    });
  }
};

/// Cumsum (R = sum_reducer) and Cumprod (prod_reducer): x seen as (outer, n, inner) around
/// the axis, each line scanned in order or from the end, computing in C (integers wrap as
/// Sum and Prod do). Lines are split between threads by their outer index.
template <class R, class C>
void scan_lines(kernel_context& ctx, const C* in, C* out, std::int64_t outer, std::int64_t n, std::int64_t inner,
                bool exclusive, bool reverse) {
  using A = accumulator_t<C>;
  ctx.parallel_for(outer, static_cast<double>(n * inner) + 1, [&](std::int64_t b, std::int64_t e) {
    std::vector<A> acc(static_cast<std::size_t>(inner));
    for (std::int64_t a = b; a < e; ++a) {
      std::fill(acc.begin(), acc.end(), R::template init<A, C>());
      for (std::int64_t step = 0; step < n; ++step) {
        const std::int64_t k = reverse ? n - 1 - step : step;
        const C* x = in + (a * n + k) * inner;
        C* o = out + (a * n + k) * inner;
        for (std::int64_t i = 0; i < inner; ++i) {
          A& s = acc[static_cast<std::size_t>(i)];
          if (exclusive) o[i] = static_cast<C>(s);
          s = R::combine(s, static_cast<A>(x[i]));
          if (!exclusive) o[i] = static_cast<C>(s);
        }
      }
    }
  });
}

/// The CPU kernels of Cumsum (sum_reducer) and Cumprod (prod_reducer): `scan_kernel<R>::of<T>`.
template <class R>
struct scan_kernel {
  /// The kernel for inputs of dtype T.
  template <class T>
  struct of final : op_kernel {
    /// Reads exclusive and reverse.
    explicit of(const node& n) : exclusive_(n.attr<bool>("exclusive")), reverse_(n.attr<bool>("reverse")) {}
    void compute(kernel_context& ctx) const override {
      using C = compute_t<T>;
      const tensor& x = ctx.input(0);
      if (x.rank() == 0) fail(error_code::invalid_argument, "x must have rank at least 1, got a scalar");
      if (ctx.input(1).rank() != 0) fail(error_code::invalid_argument, "axis must be a scalar, got shape ", ctx.input(1).shape());
      const int axis = canonical_axis(scalar_int(ctx.input(1), "axis"), x.rank());
      std::int64_t outer = 1, inner = 1;
      for (int d = 0; d < axis; ++d) outer *= x.shape()[d];
      for (int d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
      tensor& out = ctx.allocate_output(0, x.shape());
      const tensor xc = widened<T>(ctx, x);
      tensor result = is_converted_v<T> ? tensor(dtype_of<C>, x.shape()) : out;
      scan_lines<R, C>(ctx, xc.data<C>(), result.data<C>(), outer, x.shape()[axis], inner, exclusive_, reverse_);
      if constexpr (is_converted_v<T>) detail::run_convert(ctx, narrow_fn<T>, result, out);
    }
   private:
    bool exclusive_, reverse_;
  };
};

/// UnsortedSegmentSum(data, segment_ids, num_segments): rows of data (after the dims of
/// segment_ids) added into output row segment_ids[j]. Threads split the row's columns in
/// runs of 64 bytes, so no two add into one element or write into one cache line.
template <class C>
void segment_sum_rows(kernel_context& ctx, const C* data, const std::vector<std::int64_t>& ids, std::int64_t inner, C* out) {
  using A = accumulator_t<C>;
  const auto rows = static_cast<std::int64_t>(ids.size());
  constexpr std::int64_t run = std::max<std::int64_t>(1, 64 / static_cast<std::int64_t>(sizeof(C)));
  ctx.parallel_for((inner + run - 1) / run, static_cast<double>(run * rows) + 1, [&](std::int64_t rb, std::int64_t re) {
    const std::int64_t b = rb * run, e = std::min(inner, re * run);
    for (std::int64_t j = 0; j < rows; ++j) {
      const C* x = data + j * inner;
      C* o = out + ids[static_cast<std::size_t>(j)] * inner;
      for (std::int64_t i = b; i < e; ++i) o[i] = static_cast<C>(sum_reducer::combine(static_cast<A>(o[i]), static_cast<A>(x[i])));
    }
  });
}

/// out (of dtype T) = zeros plus the rows of data (dtype T, rows of `inner` elements) added
/// into rows ids[j], computed as compute_t<T> (UnsortedSegmentSum, ScatterNd).
template <class T>
void sum_rows_into_zeros(kernel_context& ctx, const tensor& data, const std::vector<std::int64_t>& ids, std::int64_t inner,
                         tensor& out) {
  using C = compute_t<T>;
  const tensor xc = widened<T>(ctx, data);
  tensor result = is_converted_v<T> ? tensor(dtype_of<C>, out.shape()) : out;
  std::fill_n(result.data<C>(), result.num_elements(), C(0));
  segment_sum_rows<C>(ctx, xc.data<C>(), ids, inner, result.data<C>());
  if constexpr (is_converted_v<T>) detail::run_convert(ctx, narrow_fn<T>, result, out);
}

/// The CPU kernel of UnsortedSegmentSum.
template <class T>
struct unsorted_segment_sum_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit unsorted_segment_sum_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& data = ctx.input(0);
    const tensor& segment_ids = ctx.input(1);
    const shape& ds = data.shape();
    bool prefix = segment_ids.rank() <= ds.rank();
    for (int d = 0; prefix && d < segment_ids.rank(); ++d) prefix = segment_ids.shape()[d] == ds[d];
    if (!prefix)
      fail(error_code::invalid_argument, "segment_ids of shape ", segment_ids.shape(), " is not a prefix of data's shape ", ds);
    if (ctx.input(2).rank() != 0)
      fail(error_code::invalid_argument, "num_segments must be a scalar, got shape ", ctx.input(2).shape());
    const std::int64_t segments = scalar_int(ctx.input(2), "num_segments");
    if (segments < 0) fail(error_code::invalid_argument, "num_segments must be non-negative, got ", segments);
    const auto ids = int_values(segment_ids, "segment_ids");
    for (std::size_t j = 0; j < ids.size(); ++j)
      if (ids[j] < 0 || ids[j] >= segments)
        fail(error_code::out_of_range, "segment_ids[", j, "] = ", ids[j], " is not in [0, ", segments, ")");
    std::vector<std::int64_t> dims{segments};
    std::int64_t inner = 1;
    for (int d = segment_ids.rank(); d < ds.rank(); ++d) dims.push_back(ds[d]), inner *= ds[d];
    sum_rows_into_zeros<T>(ctx, data, ids, inner, ctx.allocate_output(0, shape(dims)));
  }
};

/// ScatterNd(indices, updates, shape) and TensorScatterAdd(tensor, indices, updates): the
/// updates added into zeros of `shape` or into `tensor` (written in place when no one else
/// holds it), at the slices the index tuples address (nd_rows_of).
template <class T>
struct scatter_nd_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit scatter_nd_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    if (ctx.input(2).rank() != 1) fail(error_code::invalid_argument, "shape must be a vector, got shape ", ctx.input(2).shape());
    const shape s = shape_from_dims(int_values(ctx.input(2), "shape"), "shape");
    const nd_rows r = nd_rows_of(ctx.input(0), s);
    check_updates(r, ctx.input(1), ctx.input(0), s);
    sum_rows_into_zeros<T>(ctx, ctx.input(1), r.rows, r.slice, ctx.allocate_output(0, s));
  }
};
/// The CPU kernel of TensorScatterAdd.
template <class T>
struct tensor_scatter_add_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit tensor_scatter_add_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    using C = compute_t<T>;
    const shape s = ctx.input(0).shape();
    const nd_rows r = nd_rows_of(ctx.input(1), s);
    check_updates(r, ctx.input(2), ctx.input(1), s);
    const tensor uc = widened<T>(ctx, ctx.input(2));
    if constexpr (is_converted_v<T>) {
      tensor result = widened<T>(ctx, ctx.input(0));
      segment_sum_rows<C>(ctx, uc.data<C>(), r.rows, r.slice, result.data<C>());
      detail::run_convert(ctx, narrow_fn<T>, result, ctx.allocate_output(0, s));
    } else {
      segment_sum_rows<C>(ctx, uc.data<C>(), r.rows, r.slice, ctx.forward_input_or_copy(0, 0).template data<C>());
    }
  }
};

/// ReducedShape(shape, axes): `shape` with the dims at `axes` set to 1 (int64).
struct reduced_shape_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit reduced_shape_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    if (ctx.input(0).rank() != 1) fail(error_code::invalid_argument, "shape must be a vector, got shape ", ctx.input(0).shape());
    if (ctx.input(1).rank() > 1)
      fail(error_code::invalid_argument, "axes must be a scalar or vector, got shape ", ctx.input(1).shape());
    auto dims = int_values(ctx.input(0), "shape");
    const auto rank = static_cast<int>(dims.size());
    for (auto a : int_values(ctx.input(1), "axes")) dims[static_cast<std::size_t>(canonical_axis(a, rank, "reduction axis"))] = 1;
    tensor& out = ctx.allocate_output(0, shape{rank});
    std::copy(dims.begin(), dims.end(), out.data<std::int64_t>());
  }
};

/// Registers the reduction family's ops and CPU kernels. A template, so that including this
/// header instantiates nothing until it is called.
template <int = 0>
void register_reduction_kernels() {
  ops::register_reduction_ops();
  register_for<reduce_kernel<sum_reducer>::of>("Sum", "T", number_types{});
  register_for<reduce_kernel<mean_reducer>::of>("Mean", "T", number_types{});
  register_for<reduce_kernel<prod_reducer>::of>("Prod", "T", number_types{});
  register_for<reduce_kernel<max_reducer>::of>("Max", "T", real_number_types{});
  register_for<reduce_kernel<min_reducer>::of>("Min", "T", real_number_types{});
  register_for<arg_kernel<true>::of>("ArgMax", "T", real_number_types{});
  register_for<arg_kernel<false>::of>("ArgMin", "T", real_number_types{});
  register_for<scan_kernel<sum_reducer>::of>("Cumsum", "T", number_types{});
  register_for<scan_kernel<prod_reducer>::of>("Cumprod", "T", number_types{});
  register_for<unsorted_segment_sum_kernel>("UnsortedSegmentSum", "T", number_types{});
  register_for<scatter_nd_kernel>("ScatterNd", "T", number_types{});
  register_for<tensor_scatter_add_kernel>("TensorScatterAdd", "T", number_types{});
  register_for<sum_to_shape_kernel>("SumToShape", "T", number_types{});
  register_cpu_kernel<broadcast_to_kernel>("BroadcastTo");
  register_cpu_kernel<reduced_shape_kernel>("ReducedShape");
}

}  // namespace weft::cpu

/// The kernels typed code asks for (framework/kernel_for.hpp), by op type.
namespace weft {
/// Typed code's registration of Sum's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Sum, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::reduce_kernel<cpu::sum_reducer>::template of<T>>("Sum", {"T", dtype_of<T>}); }
};
/// Typed code's registration of Mean's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Mean, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::reduce_kernel<cpu::mean_reducer>::template of<T>>("Mean", {"T", dtype_of<T>}); }
};
/// Typed code's registration of Prod's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Prod, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::reduce_kernel<cpu::prod_reducer>::template of<T>>("Prod", {"T", dtype_of<T>}); }
};
/// Typed code's registration of Max's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Max, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::reduce_kernel<cpu::max_reducer>::template of<T>>("Max", {"T", dtype_of<T>}); }
};
/// Typed code's registration of Min's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Min, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::reduce_kernel<cpu::min_reducer>::template of<T>>("Min", {"T", dtype_of<T>}); }
};
/// Typed code's registration of ArgMax's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::ArgMax, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::arg_kernel<true>::template of<T>>("ArgMax", {"T", dtype_of<T>}); }
};
/// Typed code's registration of ArgMin's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::ArgMin, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::arg_kernel<false>::template of<T>>("ArgMin", {"T", dtype_of<T>}); }
};
/// Typed code's registration of Cumsum's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Cumsum, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::scan_kernel<cpu::sum_reducer>::template of<T>>("Cumsum", {"T", dtype_of<T>}); }
};
/// Typed code's registration of Cumprod's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Cumprod, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::scan_kernel<cpu::prod_reducer>::template of<T>>("Cumprod", {"T", dtype_of<T>}); }
};
/// Typed code's registration of UnsortedSegmentSum's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::UnsortedSegmentSum, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::unsorted_segment_sum_kernel<T>>("UnsortedSegmentSum", {"T", dtype_of<T>}); }
};
/// Typed code's registration of ScatterNd's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::ScatterNd, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::scatter_nd_kernel<T>>("ScatterNd", {"T", dtype_of<T>}); }
};
/// Typed code's registration of TensorScatterAdd's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::TensorScatterAdd, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::tensor_scatter_add_kernel<T>>("TensorScatterAdd", {"T", dtype_of<T>}); }
};
/// Typed code's registration of SumToShape's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::SumToShape, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::sum_to_shape_kernel<T>>("SumToShape", {"T", dtype_of<T>}); }
};
/// Typed code's registration of BroadcastTo's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::BroadcastTo, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::broadcast_to_kernel>("BroadcastTo"); }
};
/// Typed code's registration of ReducedShape's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::ReducedShape, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::reduced_shape_kernel>("ReducedShape"); }
};
/// Typed code's registration of every reduction op's CPU kernels (the family at once). A
/// partial specialization, so that including it instantiates nothing.
template <class T>
struct kernel_for<ops::families::reduction, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_reduction_kernels(); }
};
}  // namespace weft
