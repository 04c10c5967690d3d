/// @file
/// GPU kernels (issue 28): the op_kernel classes that run ops on a gpu_device, registered for
/// device type "GPU" by register_gpu_kernels(). Host code: each class checks its inputs on
/// the host, where their shapes are, and enqueues its work on the device's compute stream
/// through the entry points of launch.hpp (CUDA kernels of weft's own, defined in
/// launch.cuh) or cuBLAS; it returns as soon as the work is enqueued, so the host runs ahead
/// of the device until something waits for it (a fetch, a copy to the host).
///
/// Memory: inputs and outputs live in the GPU's memory, but small integer tensors (shapes,
/// axes: stays_in_host_memory) stay in host memory, where the kernels that read their values
/// find them; a kernel that computes on such a tensor copies it in, and one that needs the
/// values of a tensor in device memory copies them out (a wait). Bad input found on the
/// device (a label out of range) is reported at the next wait (gpu_device::errors()).
///
/// What runs here and what does not is docs/gpu.md's table; an op without a GPU kernel runs
/// on the CPU with soft placement (placement_options::soft).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <span>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <weft/core/broadcast.hpp>
#include <weft/core/checked.hpp>
#include <weft/core/product_dims.hpp>
#include <weft/core/random_stream.hpp>
#include <weft/cuda/check.hpp>
#include <weft/cuda/device.hpp>
#include <weft/cuda/launch.hpp>
#include <weft/graph/batch_norm_geometry.hpp>
#include <weft/graph/window_geometry.hpp>
#include <weft/kernels/cpu/array.hpp>
#include <weft/kernels/cpu/state.hpp>
#include <weft/ops/array_ops.hpp>
#include <weft/ops/core_ops.hpp>
#include <weft/ops/math_ops.hpp>
#include <weft/ops/matrix_ops.hpp>
#include <weft/ops/nn_ops.hpp>
#include <weft/ops/random_ops.hpp>
#include <weft/ops/reduction_ops.hpp>
#include <weft/ops/state_ops.hpp>
#include <weft/ops/training_ops.hpp>
#include <weft/runtime/kernel.hpp>

namespace weft::cuda {

// ---- helpers ----

/// The launch code of dtype t, or an error naming who asked (a node, a helper).
inline launch::elem elem_of(dtype t, const std::string& who) {
  switch (t) {
    case dtype::float16: return launch::elem::f16;
    case dtype::bfloat16: return launch::elem::bf16;
    case dtype::float32: return launch::elem::f32;
    case dtype::float64: return launch::elem::f64;
    case dtype::int32: return launch::elem::i32;
    case dtype::int64: return launch::elem::i64;
    case dtype::uint8: return launch::elem::u8;
    case dtype::boolean: return launch::elem::boolean;
    default: fail(error_code::unimplemented, who, ": ", t, " is not supported on the GPU");
  }
}
/// (The executor names the node in the errors of its kernels.)
inline launch::elem elem_of(dtype t, const node&) { return elem_of(t, "this kernel"); }
/// As elem_of, and complex64 and complex128 too where the op computes them (`complex_ok`:
/// launch::complex_unary, complex_binary, complex_reduction): the launch code of the
/// arithmetic's operands; a complex t the op does not compute is an error naming the op.
inline launch::elem arithmetic_elem_of(dtype t, const node& n, bool complex_ok) {
  if (is_complex(t) && !complex_ok) fail(error_code::unimplemented, n.op(), " of complex numbers is not computed on the GPU");
  if (t == dtype::complex64) return launch::elem::c64;
  if (t == dtype::complex128) return launch::elem::c128;
  return elem_of(t, n);
}

/// The bytes of t's elements, which the GPU copies (1, 2, 4, 8 or 16: no strings).
inline int element_bytes(dtype t) {
  if (t == dtype::string) fail(error_code::unimplemented, "strings live in host memory: no GPU kernel moves them");
  return static_cast<int>(size_of(t));
}
/// Fails unless t's dtype has elements the GPU copies (no strings).
inline void require_plain(const tensor& t, const node&) { (void)element_bytes(t.dtype()); }

/// Input i in the GPU's memory: as it is, or copied in from host memory.
inline tensor device_input(kernel_context& ctx, int i) {
  const tensor& t = ctx.input(i);
  if (t.memory_space() != memory_space::host) return t;
  return ctx.device().copy_from_host(t);
}

/// Input i in host memory: as it is, or copied out of the GPU's memory.
inline tensor host_input(kernel_context& ctx, int i) {
  const tensor& t = ctx.input(i);
  return t.memory_space() == memory_space::host ? t : ctx.device().copy_to_host(t);
}

/// The integer values of input i (int32 or int64), read on the host; copied out of the
/// GPU's memory when they are there (a wait for the device).
inline std::vector<std::int64_t> host_ints(kernel_context& ctx, int i, const char* what) {
  tensor t = ctx.input(i);
  if (t.memory_space() != memory_space::host) t = ctx.device().copy_to_host(t);
  std::vector<std::int64_t> out(static_cast<std::size_t>(t.num_elements()));
  if (t.dtype() == dtype::int32)
    for (std::size_t k = 0; k < out.size(); ++k) out[k] = t.data<std::int32_t>()[k];
  else if (t.dtype() == dtype::int64)
    std::copy_n(t.data<std::int64_t>(), out.size(), out.begin());
  else
    fail(error_code::invalid_argument, what, " must be int32 or int64, got ", t.dtype());
  return out;
}

/// v as an int32 output value, or an error when it does not fit.
inline std::int32_t to_int32(std::int64_t v, const char* what) {
  if (v > std::numeric_limits<std::int32_t>::max())
    fail(error_code::invalid_argument, what, " ", v, " does not fit an int32 output (ask for int64)");
  return static_cast<std::int32_t>(v);
}

/// Reports a failed launch (bad configuration, no kernel image for this GPU).
inline void launched(const char* what) { check(cudaGetLastError(), what); }

/// axis in [-rank, rank) made non-negative, or an invalid_argument error naming `what`.
inline int canonical_gpu_axis(std::int64_t axis, int rank, const char* what) {
  if (axis < -rank || axis >= std::max(rank, 1))
    fail(error_code::invalid_argument, what, " ", axis, " is out of range for rank ", rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

/// The dims of `out` above 1, which a broadcast plan indexes (a dim of 1 adds nothing); at
/// most broadcast_plan::max_rank of them.
inline std::vector<int> planned_dims(const shape& out) {
  std::vector<int> kept;
  for (int d = 0; d < out.rank(); ++d)
    if (out[d] != 1) kept.push_back(d);
  if (kept.size() > static_cast<std::size_t>(launch::broadcast_plan::max_rank))
    fail(error_code::unimplemented, "broadcasting over ", kept.size(), " dims of size above 1 on the GPU (at most ",
         launch::broadcast_plan::max_rank, ")");
  return kept;
}

/// The element strides of an operand of shape s along the planned dims of `out` (aligned on
/// the last dim, NumPy's rule), 0 where s broadcasts: `stride` gets max_rank entries.
inline void operand_strides(const shape& s, const shape& out, const std::vector<int>& kept, std::int64_t* stride) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(out.rank()), 0);
  std::int64_t step = 1;
  for (int d = s.rank() - 1, o = out.rank() - 1; d >= 0 && o >= 0; --d, --o) {
    all[static_cast<std::size_t>(o)] = s[d] == 1 ? 0 : step;
    step *= s[d];
  }
  for (int j = 0; j < launch::broadcast_plan::max_rank; ++j)
    stride[j] = static_cast<std::size_t>(j) < kept.size() ? all[static_cast<std::size_t>(kept[static_cast<std::size_t>(j)])] : 0;
}

/// The broadcast plan of up to three operands of shapes `in` to `out`.
inline launch::broadcast_plan plan_for(const std::vector<const shape*>& in, const shape& out) {
  if (in.size() > 3) fail(error_code::internal, "plan_for: ", in.size(), " operands (at most 3)");
  launch::broadcast_plan p;
  bool same = true;
  for (const shape* s : in) same = same && *s == out;
  p.same_shape = same;
  if (same) return p;
  const std::vector<int> kept = planned_dims(out);
  p.rank = static_cast<int>(kept.size());
  for (std::size_t k = 0; k < in.size(); ++k) {
    operand_strides(*in[k], out, kept, p.stride[k]);
    p.kind[k] = *in[k] == out                   ? launch::operand_kind::direct
                : in[k]->num_elements() == 1 ? launch::operand_kind::scalar
                                              : launch::operand_kind::general;
  }
  for (std::size_t j = 0; j < kept.size(); ++j) p.dims[j] = out[kept[j]];
  p.narrow = out.num_elements() <= std::numeric_limits<std::int32_t>::max();
  return p;
}

/// The broadcast shape of a and b, or an error naming both.
inline shape broadcast_shape(const node& n, const shape& a, const shape& b) {
  auto s = broadcast(a, b);
  if (!s) fail(error_code::invalid_argument, n.describe(), ": shapes ", a, " and ", b, " do not broadcast");
  return *s;
}

/// Holds the device's library mutex and makes it current while cuBLAS or cuDNN is called.
class library_call {
 public:
  /// Locks g's library mutex and makes g the current device.
  explicit library_call(const gpu_device& g) : lock_(g.library_mutex()), here_(g.ordinal()) {}

 private:
  std::lock_guard<std::mutex> lock_;
  current_device here_;
};

// ---- kernels of no data: the executor's and the host's ----

/// The GPU kernel of NoOp.
struct gpu_no_op final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_no_op(const node&) {}
  void compute(kernel_context&) const override {}
};

/// The GPU kernel of Identity, PlaceholderWithDefault.
struct gpu_identity final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_identity(const node&) {}
  void compute(kernel_context& ctx) const override { ctx.set_output(0, ctx.input(0)); }
};

/// The GPU kernel of Placeholder.
struct gpu_placeholder final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_placeholder(const node&) {}
  void compute(kernel_context&) const override { fail(error_code::invalid_argument, "a placeholder must be fed"); }
};

/// Const: small integer values stay in host memory (stays_in_host_memory); others are copied
/// to the GPU once, on the kernel's first run, and shared by every later one.
struct gpu_const final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_const(const node& n) : value_(n.attr<tensor>("value")) {}
  void compute(kernel_context& ctx) const override {
    if (stays_in_host_memory(value_) || value_.dtype() == dtype::string) return ctx.set_output(0, value_);
    std::call_once(once_, [&] { on_device_ = ctx.device().copy_from_host(value_); });
    ctx.set_output(0, on_device_);
  }
 private:
  tensor value_;
  mutable std::once_flag once_;
  mutable tensor on_device_;
};

/// Shape, Size and Rank read only shapes; their outputs are small host tensors.
struct gpu_shape final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_shape(const node&) {}
  void compute(kernel_context& ctx) const override {
    const auto& dims = ctx.input(0).shape().dims();
    if (ctx.node().output_dtype(0) == dtype::int64)
      return ctx.set_output(0, tensor::from_vector(dims));
    std::vector<std::int32_t> d32(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) d32[i] = to_int32(dims[i], "dim");
    ctx.set_output(0, tensor::from_vector(d32));
  }
};
/// The GPU kernel of Size.
struct gpu_size final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_size(const node&) {}
  void compute(kernel_context& ctx) const override {
    const std::int64_t n = ctx.input(0).num_elements();
    ctx.set_output(0, ctx.node().output_dtype(0) == dtype::int64
                          ? tensor::scalar(n)
                          : tensor::scalar(to_int32(n, "the element count")));
  }
};
/// The GPU kernel of Rank.
struct gpu_rank final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_rank(const node&) {}
  void compute(kernel_context& ctx) const override { ctx.set_output(0, tensor::scalar<std::int32_t>(ctx.input(0).rank())); }
};

/// ReducedShape(shape, axes): `shape` with the dims at `axes` set to 1, on the host.
struct gpu_reduced_shape final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_reduced_shape(const node&) {}
  void compute(kernel_context& ctx) const override {
    if (ctx.input(0).rank() != 1) fail(error_code::invalid_argument, "shape must be a vector, got shape ", ctx.input(0).shape());
    if (ctx.input(1).rank() > 1)
      fail(error_code::invalid_argument, "axes must be a scalar or vector, got shape ", ctx.input(1).shape());
    auto dims = host_ints(ctx, 0, "shape");
    const int rank = static_cast<int>(dims.size());
    for (auto a : host_ints(ctx, 1, "axes")) dims[static_cast<std::size_t>(canonical_gpu_axis(a, rank, "reduction axis"))] = 1;
    ctx.set_output(0, tensor::from_vector(dims));
  }
};

/// Reshape: a view of the input's buffer with the new shape (one dim may be -1).
struct gpu_reshape final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_reshape(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    if (ctx.input(1).rank() > 1) fail(error_code::invalid_argument, "shape must be a vector, got shape ", ctx.input(1).shape());
    auto dims = host_ints(ctx, 1, "shape");
    int wild = -1;
    std::int64_t known = 1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == -1 && wild < 0) wild = static_cast<int>(i);
      else if (dims[i] < 0) fail(error_code::invalid_argument, "invalid dimension ", dims[i], " in the shape");
      else known = checked_mul(known, dims[i], "the shape's element count");
    }
    if (wild >= 0) {
      if (known == 0 || x.num_elements() % known != 0)
        fail(error_code::invalid_argument, "cannot reshape ", x.shape(), " (", x.num_elements(), " elements) to a shape of ",
             known, " elements times -1");
      dims[static_cast<std::size_t>(wild)] = x.num_elements() / known;
    }
    ctx.set_output(0, x.reshape(shape(dims)));
  }
};

// ---- variables, Assign and loop accumulators: the CPU's kernels ----

/// Runs kernel K (a device-neutral class: the CPU's) with inputs Is... in memory space
/// Where: copied out of the GPU's memory (host: the values are read) or into it (device: the
/// value is kept, as Assign keeps it), when they are elsewhere.
template <class K, memory_space Where, int... Is>
struct with_inputs_in final : op_kernel {
  /// Builds K's kernel for node n.
  explicit with_inputs_in(const node& n) : k_(n) {}
  void compute(kernel_context& ctx) const override {
    const std::span<entry> given = ctx.input_entries();
    auto placed = [&](int i) {
      const tensor& t = given[static_cast<std::size_t>(i)].value;
      return !t.valid() || t.memory_space() == Where;
    };
    if ((placed(Is) && ...)) return k_.compute(ctx);
    std::vector<entry> inputs(given.begin(), given.end());
    for (int i : {Is...}) {
      tensor& t = inputs[static_cast<std::size_t>(i)].value;
      if (!placed(i)) t = Where == memory_space::host ? ctx.device().copy_to_host(t) : ctx.device().copy_from_host(t);
    }
    kernel_context inner = ctx.delegate(inputs, ctx.device());
    k_.compute(inner);
    if (inner.error()) std::rethrow_exception(inner.error());
  }
 private:
  K k_;
};
/// K run with inputs Is... copied to host memory first.
template <class K, int... Is>
using with_host_inputs = with_inputs_in<K, memory_space::host, Is...>;

// ---- elementwise ----

/// Small integer and bool elementwise ops whose inputs are all in host memory run on the
/// host, and their results stay there (TensorFlow's HostMemory int32 kernels): a loop's
/// counter, its bound and the predicate between them never wait for the device.
inline bool on_host_inputs(const kernel_context& ctx, dtype t) {
  if (t != dtype::int32 && t != dtype::int64 && t != dtype::boolean) return false;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.input(i).memory_space() != memory_space::host || ctx.input(i).num_elements() > 64) return false;
  return true;
}

/// One element of unary op Op, on the host (small inputs: no launch).
template <launch::unary Op, class T>
T host_unary(T x) {
  if constexpr (Op == launch::unary::neg) return static_cast<T>(-x);
  else if constexpr (Op == launch::unary::abs) return x < T(0) ? static_cast<T>(-x) : x;
  else if constexpr (Op == launch::unary::square) return static_cast<T>(x * x);
  else if constexpr (Op == launch::unary::relu) return x > T(0) ? x : T(0);
  else if constexpr (Op == launch::unary::logical_not) return !x;
  else if constexpr (Op == launch::unary::sign && !std::is_same_v<T, bool>) return static_cast<T>((x > T(0)) - (x < T(0)));
  else return x;  // not registered for these types
}

/// One pair of elements of binary op Op, on the host (small inputs: no launch).
template <launch::binary Op, class T>
auto host_binary(T a, T b) {
  using B = launch::binary;
  if constexpr (Op == B::add) return static_cast<T>(a + b);
  else if constexpr (Op == B::sub) return static_cast<T>(a - b);
  else if constexpr (Op == B::mul) return static_cast<T>(a * b);
  else if constexpr (Op == B::maximum) return a < b ? b : a;
  else if constexpr (Op == B::minimum) return b < a ? b : a;
  else if constexpr (Op == B::relu_grad) return b > T(0) ? a : T(0);
  else if constexpr (Op == B::greater) return a > b;
  else if constexpr (Op == B::greater_equal) return a >= b;
  else if constexpr (Op == B::less) return a < b;
  else if constexpr (Op == B::less_equal) return a <= b;
  else if constexpr (Op == B::equal) return a == b;
  else if constexpr (Op == B::not_equal) return a != b;
  else if constexpr (Op == B::logical_and) return a && b;
  else if constexpr (Op == B::logical_or) return a || b;
  else return a;  // not registered for these types
}

/// Calls f with a value of the host type of int32, int64 or bool.
template <class F>
void host_dispatch(dtype t, F&& f) {
  if (t == dtype::int32) f(std::int32_t{});
  else if (t == dtype::int64) f(std::int64_t{});
  else f(bool{});
}

/// The GPU kernel of Neg, Abs, Square, Relu, Sqrt, Rsqrt, Exp, Log, Tanh, Sigmoid, LogicalNot.
template <launch::unary Op>
struct gpu_unary final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_unary(const node& n) : t_(arithmetic_elem_of(n.output_dtype(0), n, launch::complex_unary(Op))) {}
  void compute(kernel_context& ctx) const override {
    if (on_host_inputs(ctx, ctx.input(0).dtype())) {
      const tensor& x = ctx.input(0);
      tensor y(x.dtype(), x.shape());
      host_dispatch(x.dtype(), [&](auto v) {
        using T = decltype(v);
        for (std::int64_t i = 0; i < x.num_elements(); ++i) y.data<T>()[i] = host_unary<Op>(x.data<T>()[i]);
      });
      return ctx.set_output(0, std::move(y));
    }
    const tensor x = device_input(ctx, 0);
    tensor& y = ctx.allocate_output(0, x.shape());
    const auto& g = gpu_of(ctx.device());
    launch::unary_op(Op, t_, x.raw_data(), y.raw_data(), x.num_elements(), g.stream());
    launched(ctx.node().op().c_str());
  }
 private:
  launch::elem t_;
};

/// The GPU kernel of IsNan, IsInf and IsFinite (floats in, bool out).
template <launch::predicate Op>
struct gpu_predicate final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_predicate(const node& n) : t_(elem_of(n.attr<dtype>("T"), n)) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    tensor& y = ctx.allocate_output(0, x.shape());
    launch::predicate_op(Op, t_, x.raw_data(), static_cast<bool*>(y.raw_data()), x.num_elements(), gpu_of(ctx.device()).stream());
    launched(ctx.node().op().c_str());
  }
 private:
  launch::elem t_;
};

/// The GPU kernel of Add, Sub, Mul, Div, Pow, Maximum, Minimum, ReluGrad, Greater, GreaterEqual, Less, LessEqual, Equal, NotEqual, LogicalAnd, LogicalOr.
template <launch::binary Op>
struct gpu_binary final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_binary(const node& n) : t_(arithmetic_elem_of(n.input_dtype(0), n, launch::complex_binary(Op))) {}
  void compute(kernel_context& ctx) const override {
    const bool host = on_host_inputs(ctx, ctx.input(0).dtype());
    const tensor a = host ? ctx.input(0) : device_input(ctx, 0), b = host ? ctx.input(1) : device_input(ctx, 1);
    shape out_shape;
    if constexpr (Op == launch::binary::relu_grad || Op == launch::binary::tanh_grad || Op == launch::binary::sigmoid_grad) {
      if (a.shape() != b.shape())
        fail(error_code::invalid_argument, "the inputs must have one shape, got ", a.shape(), " and ", b.shape());
      out_shape = a.shape();
    } else {
      out_shape = broadcast_shape(ctx.node(), a.shape(), b.shape());
    }
    const auto plan = plan_for({&a.shape(), &b.shape()}, out_shape);
    if (host) {
      tensor z(ctx.node().output_dtype(0), out_shape);
      host_dispatch(a.dtype(), [&](auto v) {
        using T = decltype(v);
        using R = std::conditional_t<launch::returns_bool(Op), bool, T>;
        for (std::int64_t i = 0; i < z.num_elements(); ++i)
          z.data<R>()[i] = static_cast<R>(host_binary<Op>(a.data<T>()[launch::offset_in(plan, 0, i)], b.data<T>()[launch::offset_in(plan, 1, i)]));
      });
      return ctx.set_output(0, std::move(z));
    }
    tensor& z = ctx.allocate_output(0, out_shape);
    launch::binary_op(Op, t_, a.raw_data(), b.raw_data(), z.raw_data(), z.num_elements(), plan, gpu_of(ctx.device()).stream());
    launched(ctx.node().op().c_str());
  }
 private:
  launch::elem t_;
};

/// The GPU kernel of SelectV2.
struct gpu_select_v2 final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_select_v2(const node& n) : bytes_(element_bytes(n.output_dtype(0))) {}
  void compute(kernel_context& ctx) const override {
    const tensor c = device_input(ctx, 0), a = device_input(ctx, 1), b = device_input(ctx, 2);
    const shape out_shape = broadcast_shape(ctx.node(), broadcast_shape(ctx.node(), c.shape(), a.shape()), b.shape());
    tensor& out = ctx.allocate_output(0, out_shape);
    const auto plan = plan_for({&c.shape(), &a.shape(), &b.shape()}, out_shape);
    launch::select_op(bytes_, static_cast<const bool*>(c.raw_data()), a.raw_data(), b.raw_data(), out.raw_data(),
                      out.num_elements(), plan, gpu_of(ctx.device()).stream());
    launched("SelectV2");
  }
 private:
  int bytes_;
};

/// Select(condition, t, e), TensorFlow's first form: t and e of one shape; the condition a
/// scalar, of their shape, or a vector of their first dim that picks whole rows
/// (ops::select_picks_rows, the CPU's checks). Rows are a broadcast of the condition as
/// [n, 1, ..., 1].
struct gpu_select final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_select(const node& n) : bytes_(element_bytes(n.output_dtype(0))) {}
  void compute(kernel_context& ctx) const override {
    const tensor c = device_input(ctx, 0), a = device_input(ctx, 1), b = device_input(ctx, 2);
    const bool rows = ops::select_picks_rows(c.shape(), a.shape(), b.shape());
    std::vector<std::int64_t> cond_dims = c.shape().dims();
    if (rows) cond_dims.resize(static_cast<std::size_t>(a.rank()), 1);
    const shape cond(cond_dims);
    tensor& out = ctx.allocate_output(0, a.shape());
    const auto plan = plan_for({&cond, &a.shape(), &b.shape()}, a.shape());
    launch::select_op(bytes_, static_cast<const bool*>(c.raw_data()), a.raw_data(), b.raw_data(), out.raw_data(),
                      out.num_elements(), plan, gpu_of(ctx.device()).stream());
    launched("Select");
  }
 private:
  int bytes_;
};

/// The cast_elem of t: every real and complex dtype (no strings).
inline launch::cast_elem cast_elem_of(dtype t, const node& n) {
  using E = launch::cast_elem;
  switch (t) {
    case dtype::float16: return E::f16;
    case dtype::bfloat16: return E::bf16;
    case dtype::float32: return E::f32;
    case dtype::float64: return E::f64;
    case dtype::int8: return E::i8;
    case dtype::int16: return E::i16;
    case dtype::int32: return E::i32;
    case dtype::int64: return E::i64;
    case dtype::uint8: return E::u8;
    case dtype::uint16: return E::u16;
    case dtype::uint32: return E::u32;
    case dtype::uint64: return E::u64;
    case dtype::boolean: return E::boolean;
    case dtype::complex64: return E::c64;
    case dtype::complex128: return E::c128;
    default: fail(error_code::unimplemented, "Cast of ", t, " is not supported on the GPU (", n.op(), ")");
  }
}

/// The GPU kernel of Cast.
struct gpu_cast final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_cast(const node& n)
      : from_(n.attr<dtype>("SrcT")), to_(n.attr<dtype>("DstT")), from_elem_(cast_elem_of(from_, n)), to_elem_(cast_elem_of(to_, n)) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    if (from_ == to_) return ctx.set_output(0, x);
    tensor& y = ctx.allocate_output(0, x.shape());
    launch::cast_op(from_elem_, to_elem_, x.raw_data(), y.raw_data(), x.num_elements(), gpu_of(ctx.device()).stream());
    launched("Cast");
  }
 private:
  dtype from_, to_;
  launch::cast_elem from_elem_, to_elem_;
};

/// Fill(dims, value): dims on the host, the value a scalar on the GPU.
struct gpu_fill final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_fill(const node& n) : bytes_(element_bytes(n.output_dtype(0))) {}
  void compute(kernel_context& ctx) const override {
    if (ctx.input(0).rank() != 1) fail(error_code::invalid_argument, "dims must be a vector, got shape ", ctx.input(0).shape());
    if (ctx.input(1).num_elements() != 1 || ctx.input(1).rank() != 0)
      fail(error_code::invalid_argument, "value must be a scalar, got shape ", ctx.input(1).shape());
    const auto dims = host_ints(ctx, 0, "dims");
    for (auto d : dims)
      if (d < 0) fail(error_code::invalid_argument, "dims must not be negative, got ", d);
    const tensor value = device_input(ctx, 1);
    tensor& y = ctx.allocate_output(0, shape(dims));
    launch::fill_op(bytes_, value.raw_data(), y.raw_data(), y.num_elements(), gpu_of(ctx.device()).stream());
    launched("Fill");
  }
 private:
  int bytes_;
};

/// BroadcastTo(input, shape).
struct gpu_broadcast_to final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_broadcast_to(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    const shape to(host_ints(ctx, 1, "shape"));
    const shape both = broadcast_shape(ctx.node(), x.shape(), to);
    if (both != to) fail(error_code::invalid_argument, "cannot broadcast ", x.shape(), " to ", to);
    if (x.shape() == to) return ctx.set_output(0, x);
    tensor& y = ctx.allocate_output(0, to);
    launch::broadcast_op(element_bytes(x.dtype()), x.raw_data(), y.raw_data(), y.num_elements(), plan_for({&x.shape()}, to),
                         gpu_of(ctx.device()).stream());
    launched("BroadcastTo");
  }
};

// ---- transposes ----

/// x with its dims permuted (out dim d is x's dim perm[d]), as a broadcast of x whose
/// strides are permuted.
inline tensor transposed(const gpu_device& g, const tensor& x, const std::vector<int>& perm) {
  const int rank = x.rank();
  auto perm_text = [&] { return attr_value(std::vector<std::int64_t>(perm.begin(), perm.end())); };
  if (static_cast<int>(perm.size()) != rank)
    fail(error_code::invalid_argument, "perm ", perm_text(), " has ", perm.size(), " entries for rank ", rank);
  std::vector<std::int64_t> in_stride(static_cast<std::size_t>(rank), 1), out_dims(static_cast<std::size_t>(rank));
  for (int d = rank - 2; d >= 0; --d) in_stride[static_cast<std::size_t>(d)] = in_stride[static_cast<std::size_t>(d) + 1] * x.shape()[d + 1];
  std::vector<bool> seen(static_cast<std::size_t>(rank), false);
  for (int d = 0; d < rank; ++d) {
    const int p = perm[static_cast<std::size_t>(d)];
    if (p < 0 || p >= rank || seen[static_cast<std::size_t>(p)])
      fail(error_code::invalid_argument, "perm ", perm_text(), " is not a permutation");
    seen[static_cast<std::size_t>(p)] = true;
    out_dims[static_cast<std::size_t>(d)] = x.shape()[p];
  }
  tensor y(x.dtype(), shape(out_dims), g.get_allocator());
  if (y.num_elements() == 0) return y;
  launch::broadcast_plan plan;
  // Dims of size 1 move nothing: the plan keeps the others.
  for (int d = 0; d < rank; ++d) {
    if (out_dims[static_cast<std::size_t>(d)] == 1) continue;
    if (plan.rank == launch::broadcast_plan::max_rank)
      fail(error_code::unimplemented, "a transpose over more than ", launch::broadcast_plan::max_rank, " dims above 1 on the GPU");
    plan.dims[plan.rank] = out_dims[static_cast<std::size_t>(d)];
    plan.stride[0][plan.rank] = in_stride[static_cast<std::size_t>(perm[static_cast<std::size_t>(d)])];
    ++plan.rank;
  }
  launch::broadcast_op(element_bytes(x.dtype()), x.raw_data(), y.raw_data(), y.num_elements(), plan, g.stream());
  launched("a transpose");
  return y;
}

// ---- reductions ----

/// Reduces x over `axes` (sorted, distinct) in passes of [outer, reduce, inner], the last
/// reduced run of dims first; returns a tensor of the kept dims.
inline tensor reduce_axes(const gpu_device& g, launch::reduction op, launch::elem t, const tensor& x,
                          const std::vector<bool>& reduced) {
  // Runs of adjacent dims, each kept or reduced.
  std::vector<std::pair<std::int64_t, bool>> runs;
  for (int d = 0; d < x.rank(); ++d) {
    const bool r = reduced[static_cast<std::size_t>(d)];
    if (!runs.empty() && runs.back().second == r) runs.back().first *= x.shape()[d];
    else runs.emplace_back(x.shape()[d], r);
  }
  std::vector<std::int64_t> kept_dims;
  for (int d = 0; d < x.rank(); ++d)
    if (!reduced[static_cast<std::size_t>(d)]) kept_dims.push_back(x.shape()[d]);
  tensor current = x;
  while (true) {
    int last = -1;
    for (int i = static_cast<int>(runs.size()) - 1; i >= 0 && last < 0; --i)
      if (runs[static_cast<std::size_t>(i)].second) last = i;
    if (last < 0) break;
    std::int64_t outer = 1, inner = 1;
    for (int i = 0; i < last; ++i) outer *= runs[static_cast<std::size_t>(i)].first;
    for (std::size_t i = static_cast<std::size_t>(last) + 1; i < runs.size(); ++i) inner *= runs[i].first;
    const std::int64_t reduce = runs[static_cast<std::size_t>(last)].first;
    tensor next(x.dtype(), shape{outer * inner}, g.get_allocator());
    // Mean in passes: the mean of equal groups' means is the mean.
    const tensor scratch(dtype::uint8, shape{static_cast<std::int64_t>(launch::reduce_scratch_bytes(outer, reduce, inner))},
                         g.get_allocator());
    launch::reduce_op(op, t, current.raw_data(), next.raw_data(), outer, reduce, inner, scratch.raw_data(), g.stream());
    launched("a reduction");
    runs.erase(runs.begin() + last);
    // Merge the kept runs the removed one separated.
    if (last > 0 && static_cast<std::size_t>(last) < runs.size() && !runs[static_cast<std::size_t>(last)].second &&
        !runs[static_cast<std::size_t>(last) - 1].second) {
      runs[static_cast<std::size_t>(last) - 1].first *= runs[static_cast<std::size_t>(last)].first;
      runs.erase(runs.begin() + last);
    }
    current = std::move(next);
  }
  return current.reshape(shape(kept_dims));
}

/// The GPU kernel of Sum, Mean, Prod, Max, Min.
template <launch::reduction Op>
struct gpu_reduce final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_reduce(const node& n)
      : t_(arithmetic_elem_of(n.output_dtype(0), n, launch::complex_reduction(Op))), keep_dims_(n.attr<bool>("keep_dims")) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    if (ctx.input(1).rank() > 1)
      fail(error_code::invalid_argument, "reduction_indices must be a scalar or vector, got shape ", ctx.input(1).shape());
    std::vector<bool> reduced(static_cast<std::size_t>(x.rank()), false);
    for (auto a : host_ints(ctx, 1, "reduction_indices")) {
      // An axis listed twice is reduced once, as on the CPU.
      reduced[static_cast<std::size_t>(canonical_gpu_axis(a, x.rank(), "reduction axis"))] = true;
    }
    std::vector<std::int64_t> out_dims;
    for (int d = 0; d < x.rank(); ++d) {
      if (!reduced[static_cast<std::size_t>(d)]) out_dims.push_back(x.shape()[d]);
      else if (keep_dims_) out_dims.push_back(1);
    }
    const auto& g = gpu_of(ctx.device());
    const bool none = std::none_of(reduced.begin(), reduced.end(), [](bool r) { return r; });
    if (none) return ctx.set_output(0, x.reshape(shape(out_dims)));
    if (x.num_elements() == 0 && shape(out_dims).num_elements() == 0) {
      ctx.allocate_output(0, shape(out_dims));
      return;
    }
    if constexpr (Op == launch::reduction::mean) {
      // An integer mean in passes would round toward zero at each pass: with reduced dims
      // apart, move them last first, so one pass divides the exact sum once.
      if (!is_floating(x.dtype()) && !is_complex(x.dtype())) {
        std::vector<int> perm;
        for (int d = 0; d < x.rank(); ++d)
          if (!reduced[static_cast<std::size_t>(d)]) perm.push_back(d);
        const std::size_t kept = perm.size();
        for (int d = 0; d < x.rank(); ++d)
          if (reduced[static_cast<std::size_t>(d)]) perm.push_back(d);
        const tensor moved = transposed(g, x, perm);
        std::vector<bool> last(static_cast<std::size_t>(x.rank()), false);
        std::fill(last.begin() + static_cast<std::ptrdiff_t>(kept), last.end(), true);
        return ctx.set_output(0, reduce_axes(g, Op, t_, moved, last).reshape(shape(out_dims)));
      }
    }
    ctx.set_output(0, reduce_axes(g, Op, t_, x, reduced).reshape(shape(out_dims)));
  }
 private:
  launch::elem t_;
  bool keep_dims_;
};

/// The GPU kernel of ArgMax, ArgMin.
template <bool Max>
struct gpu_arg_reduce final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_arg_reduce(const node& n) : t_(elem_of(n.input_dtype(0), n)), int64_(n.output_dtype(0) == dtype::int64) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    if (x.rank() == 0) fail(error_code::invalid_argument, "input must have rank at least 1");
    const auto axes = host_ints(ctx, 1, "dimension");
    if (axes.size() != 1) fail(error_code::invalid_argument, "dimension must be a scalar, got ", axes.size(), " values");
    const int axis = canonical_gpu_axis(axes[0], x.rank(), "dimension");
    const std::int64_t n = x.shape()[axis];
    if (n == 0) fail(error_code::invalid_argument, "cannot take the extremum of an empty dimension (input ", x.shape(), ")");
    std::vector<std::int64_t> out_dims;
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < x.rank(); ++d) {
      if (d == axis) continue;
      out_dims.push_back(x.shape()[d]);
      (d < axis ? outer : inner) *= x.shape()[d];
    }
    tensor& y = ctx.allocate_output(0, shape(out_dims));
    launch::arg_reduce_op(Max, t_, x.raw_data(), y.raw_data(), int64_, outer, n, inner, gpu_of(ctx.device()).stream());
    launched(Max ? "ArgMax" : "ArgMin");
  }
 private:
  launch::elem t_;
  bool int64_;
};

/// Cumsum and Cumprod (x, axis; exclusive, reverse), the CPU's checks.
template <launch::reduction Op>
struct gpu_scan final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_scan(const node& n)
      : t_(arithmetic_elem_of(n.output_dtype(0), n, launch::complex_reduction(Op))),
        exclusive_(n.attr<bool>("exclusive")),
        reverse_(n.attr<bool>("reverse")) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    if (x.rank() == 0) fail(error_code::invalid_argument, "x must have rank at least 1, got a scalar");
    if (ctx.input(1).rank() != 0) fail(error_code::invalid_argument, "axis must be a scalar, got shape ", ctx.input(1).shape());
    const int axis = canonical_gpu_axis(host_ints(ctx, 1, "axis")[0], x.rank(), "axis");
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
    tensor& y = ctx.allocate_output(0, x.shape());
    launch::scan_op(Op, t_, x.raw_data(), y.raw_data(), outer, x.shape()[axis], inner, exclusive_, reverse_,
                    gpu_of(ctx.device()).stream());
    launched(Op == launch::reduction::sum ? "Cumsum" : "Cumprod");
  }
 private:
  launch::elem t_;
  bool exclusive_, reverse_;
};

// ---- matrix products (cuBLAS) ----

/// The cuBLAS data type of dtype t, or an unimplemented error.
inline cudaDataType_t cuda_type_of(dtype t) {
  switch (t) {
    case dtype::float16: return CUDA_R_16F;
    case dtype::bfloat16: return CUDA_R_16BF;
    case dtype::float32: return CUDA_R_32F;
    case dtype::float64: return CUDA_R_64F;
    case dtype::complex64: return CUDA_C_32F;
    case dtype::complex128: return CUDA_C_64F;
    default: fail(error_code::unimplemented, t, " matrix products are not supported on the GPU");
  }
}

/// What a product's output pass adds (_FusedMatMulBiasAdd): a bias per column of the row-major
/// result, then max(x, 0) where `relu`. Without a bias, nothing.
struct gemm_epilogue {
  const void* bias = nullptr;  ///< n values of the result's dtype in the device's memory
  bool relu = false;           ///< max(x, 0) after the bias
};

/// A product's alpha (1) and beta (0) in its scale type, and its compute type.
struct gemm_scalar_set {
  const void* alpha;              ///< 1
  const void* beta;               ///< 0
  cublasComputeType_t compute;    ///< CUBLAS_COMPUTE_32F or _64F
};
/// The scalars of a product of dtype t (float for the 16-bit types and float32, double for
/// float64, a pair of them, 1 + 0i and 0, for complex64 and complex128); fails unless every
/// dim fits cuBLAS's int.
inline gemm_scalar_set gemm_scalars(dtype t, std::initializer_list<std::int64_t> dims) {
  for (std::int64_t v : dims)
    if (v > std::numeric_limits<int>::max())
      fail(error_code::unimplemented, "a matrix product with a dim of ", v, " (cuBLAS takes at most 2^31 - 1)");
  // cuBLAS reads a complex scalar's parts where a real one's value is: one_f is 1 + 0i too.
  static constexpr float one_f[2] = {1, 0}, zero_f[2] = {0, 0};
  static constexpr double one_d[2] = {1, 0}, zero_d[2] = {0, 0};
  if (t == dtype::float64 || t == dtype::complex128) return {one_d, zero_d, CUBLAS_COMPUTE_64F};
  return {one_f, zero_f, CUBLAS_COMPUTE_32F};
}
/// cuBLAS's operation on an operand: none, the transpose, or (adjoint, complex t) the
/// conjugate transpose (BatchMatMulV2's adj_x and adj_y; MatMul's transposes conjugate nothing).
inline cublasOperation_t gemm_operation(dtype t, bool transposed, bool adjoint) {
  if (!transposed) return CUBLAS_OP_N;
  return adjoint && is_complex(t) ? CUBLAS_OP_C : CUBLAS_OP_T;
}

/// y (rows of `channels` values of dtype t in the device's memory) += bias per channel, then
/// max(y, 0) where `relu`, in place: two passes of weft's kernels (a product's or a
/// convolution's epilogue where the library applies none).
inline void add_bias_in_place(const gpu_device& g, dtype t, void* y, std::int64_t rows, std::int64_t channels, const void* bias,
                              bool relu, const char* who) {
  const launch::elem e = elem_of(t, who);
  launch::bias_add_op(e, y, bias, y, rows, channels, g.stream());
  if (relu) launch::unary_op(launch::unary::relu, e, y, y, rows * channels, g.stream());
  launched(who);
}

/// C [m, n] = op(A) op(B), all row-major, through column-major cuBLAS: C^T = op(B)^T op(A)^T.
/// lda, ldb: the stored rows' lengths. batch > 1: strided batches. An epilogue (one product
/// only) is cuBLASLt's where it has an algorithm for it and the bias is 16-byte aligned (8 is
/// not enough on an A100, as Marian found), else two passes of weft's own kernels after it.
/// `adjoint`: a transposed complex operand is conjugated too. Complex products are cuBLAS's
/// GemmEx (no cuBLASLt plan). Returns whether the product's own pass applied the epilogue
/// (cuBLASLt's).
inline bool gemm(const gpu_device& g, dtype t, bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
                 std::int64_t k, const void* a, std::int64_t lda, const void* b, std::int64_t ldb, void* c,
                 std::int64_t batch = 1, std::int64_t stride_a = 0, std::int64_t stride_b = 0, std::int64_t stride_c = 0,
                 gemm_epilogue epilogue = {}, bool adjoint = false) {
  if (epilogue.bias && (batch != 1 || is_complex(t)))
    fail(error_code::internal, "a matrix product's epilogue is of one real product, not ", batch, " of ", t);
  const cudaDataType_t type = cuda_type_of(t);
  const auto [alpha, beta, compute] = gemm_scalars(t, {m, n, k, lda, ldb, batch});
  const library_call call(g);
  const cublasOperation_t op_a = gemm_operation(t, transpose_a, adjoint);
  const cublasOperation_t op_b = gemm_operation(t, transpose_b, adjoint);
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
  // cuBLASLt with the algorithm chosen once for this geometry; cublasGemmEx where it has none.
  auto align = [](std::uintptr_t v) { return static_cast<std::uint32_t>(v == 0 ? 256 : std::min<std::uintptr_t>(v & (~v + 1), 256)); };
  const std::size_t size = size_of(t);
  const auto address = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  std::uint32_t alignment = std::min({align(address(a)), align(address(b)), align(address(c))});
  if (batch > 1)
    for (std::int64_t stride : {stride_a, stride_b, stride_c})
      alignment = std::min(alignment, align(static_cast<std::uintptr_t>(stride) * size));
  const lt_geometry geometry{type, op_b, op_a, n, m, k, ldb, lda, batch, batch > 1 ? stride_b : 0,
                             batch > 1 ? stride_a : 0, batch > 1 ? stride_c : 0, alignment};
  if (epilogue.bias && align(address(epilogue.bias)) >= 16) {
    lt_geometry fused = geometry;
    fused.epilogue = epilogue.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    fused.bias_alignment = align(address(epilogue.bias));
    if (const lt_plan* plan = g.lt_plan_for(fused, epilogue.bias)) {
      g.run_lt(*plan, alpha, b, a, beta, c, epilogue.bias);
      return true;
    }
  }
  if (const lt_plan* plan = is_complex(t) ? nullptr : g.lt_plan_for(geometry)) {
    g.run_lt(*plan, alpha, b, a, beta, c);
  } else if (batch == 1) {
    check(cublasGemmEx(g.blas(), op_b, op_a, N, M, K, alpha, b, type, static_cast<int>(ldb), a, type,
                       static_cast<int>(lda), beta, c, type, N, compute, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  } else {
    check(cublasGemmStridedBatchedEx(g.blas(), op_b, op_a, N, M, K, alpha, b, type, static_cast<int>(ldb), stride_b, a,
                                     type, static_cast<int>(lda), stride_a, beta, c, type, N, stride_c,
                                     static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
  }
  if (epilogue.bias) add_bias_in_place(g, t, c, m, n, epilogue.bias, epilogue.relu, "a matrix product's bias");
  return false;
}

/// C[b] = op(X[b]) op(Y[b]) for each index b of the output's batch dims `out_batch`, where
/// X's batch dims `x_batch` and Y's `y_batch` broadcast to them (NumPy's rule, BatchMatMulV2)
/// but neither is the whole batch or a single matrix: cuBLAS's GemmBatchedEx over arrays of
/// the matrices' pointers made on the device (batch_pointers_op). Row-major, as gemm().
/// x_rows x x_cols and y_rows x y_cols: each stored matrix's dims; `adjoint` as gemm's.
inline void gemm_broadcast(const gpu_device& g, dtype t, bool transpose_x, bool transpose_y, std::int64_t m, std::int64_t n,
                           std::int64_t k, const tensor& x, std::int64_t x_rows, std::int64_t x_cols, const tensor& y,
                           std::int64_t y_rows, std::int64_t y_cols, tensor& c, const shape& x_batch, const shape& y_batch,
                           const shape& out_batch, bool adjoint) {
  const cudaDataType_t type = cuda_type_of(t);
  const std::int64_t batch = out_batch.num_elements();
  const auto [alpha, beta, compute] = gemm_scalars(t, {m, n, k, x_cols, y_cols, batch});
  const launch::broadcast_plan plan = plan_for({&x_batch, &y_batch}, out_batch);
  const auto size = static_cast<std::int64_t>(size_of(t));
  const tensor pointers(dtype::uint8, shape{3 * batch * static_cast<std::int64_t>(sizeof(void*))}, g.get_allocator());
  void** p = static_cast<void**>(pointers.raw_data());
  const library_call call(g);
  launch::batch_pointers_op(x.raw_data(), x_rows * x_cols * size, y.raw_data(), y_rows * y_cols * size, c.raw_data(),
                            m * n * size, plan, p, batch, g.stream());
  launched("a broadcast product's matrix pointers");
  check(cublasGemmBatchedEx(g.blas(), gemm_operation(t, transpose_y, adjoint), gemm_operation(t, transpose_x, adjoint),
                            static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), alpha, p + batch, type,
                            static_cast<int>(y_cols), p, type, static_cast<int>(x_cols), beta, p + 2 * batch, type,
                            static_cast<int>(n), static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmBatchedEx");
}

/// C [m, n] = alpha op(A) op(B) + beta C through cublasGemmEx, row-major as gemm(): A and B
/// of dtype `in`, C of dtype `out` (float32 sums of bfloat16 operands, say), float scalars
/// read from device memory where `device_scalars` (alpha, then beta) and host memory
/// otherwise. The fused updates' product: no cuBLASLt plan.
inline void gemm_ex(const gpu_device& g, dtype in, dtype out, bool transpose_a, bool transpose_b, std::int64_t m,
                    std::int64_t n, std::int64_t k, const void* a, std::int64_t lda, const void* b, std::int64_t ldb, void* c,
                    const float* alpha, const float* beta, bool device_scalars) {
  (void)gemm_scalars(in, {m, n, k, lda, ldb});
  const library_call call(g);
  // The handle's pointer mode, set for this call only (the handle is shared: library_call
  // holds its lock) and put back on every path.
  struct pointer_mode {
    cublasHandle_t h;
    bool set;
    ~pointer_mode() {
      if (set) (void)cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
    }
  } mode{g.blas(), device_scalars};
  if (device_scalars) check(cublasSetPointerMode(g.blas(), CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode");
  check(cublasGemmEx(g.blas(), gemm_operation(in, transpose_b, false), gemm_operation(in, transpose_a, false), static_cast<int>(n),
                     static_cast<int>(m), static_cast<int>(k), alpha, b, cuda_type_of(in), static_cast<int>(ldb), a,
                     cuda_type_of(in), static_cast<int>(lda), beta, c, cuda_type_of(out), static_cast<int>(n), CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

/// The GPU kernel of MatMul.
struct gpu_matmul final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_matmul(const node& n)
      : t_(n.output_dtype(0)), transpose_a_(n.attr<bool>("transpose_a")), transpose_b_(n.attr<bool>("transpose_b")) {
    (void)cuda_type_of(t_);
  }
  void compute(kernel_context& ctx) const override {
    const tensor a = device_input(ctx, 0), b = device_input(ctx, 1);
    if (a.rank() != 2 || b.rank() != 2)
      fail(error_code::invalid_argument, "MatMul takes matrices, got shapes ", a.shape(), " and ", b.shape());
    const std::int64_t m = transpose_a_ ? a.shape()[1] : a.shape()[0], k = transpose_a_ ? a.shape()[0] : a.shape()[1];
    const std::int64_t k2 = transpose_b_ ? b.shape()[1] : b.shape()[0], n = transpose_b_ ? b.shape()[0] : b.shape()[1];
    if (k != k2)
      fail(error_code::invalid_argument, "the inner dims of ", a.shape(), transpose_a_ ? "^T" : "", " and ", b.shape(),
           transpose_b_ ? "^T" : "", " differ");
    tensor& c = ctx.allocate_output(0, shape{m, n});
    if (c.num_elements() == 0) return;
    const auto& g = gpu_of(ctx.device());
    if (k == 0) {
      const current_device here(g.ordinal());
      check(cudaMemsetAsync(c.raw_data(), 0, c.bytes(), g.stream()), "cudaMemsetAsync");
      return;
    }
    gemm(g, t_, transpose_a_, transpose_b_, m, n, k, a.raw_data(), a.shape()[1], b.raw_data(), b.shape()[1], c.raw_data());
  }
 private:
  dtype t_;
  bool transpose_a_, transpose_b_;
};

/// BatchMatMulV2: batch dims broadcast by NumPy's rule, as on the CPU. Where each operand is
/// the whole batch or one matrix, one strided batched product; otherwise a batched product
/// over arrays of the matrices' pointers (gemm_broadcast).
struct gpu_batch_matmul final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_batch_matmul(const node& n) : t_(n.output_dtype(0)), adj_x_(n.attr<bool>("adj_x")), adj_y_(n.attr<bool>("adj_y")) {
    (void)cuda_type_of(t_);
  }
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0), y = device_input(ctx, 1);
    if (x.rank() < 2 || y.rank() < 2)
      fail(error_code::invalid_argument, "BatchMatMulV2 takes tensors of rank 2 or more, got ", x.shape(), " and ", y.shape());
    const auto& xs = x.shape().dims();
    const auto& ys = y.shape().dims();
    const std::vector<std::int64_t> xb(xs.begin(), xs.end() - 2), yb(ys.begin(), ys.end() - 2);
    const std::int64_t xr = xs[xs.size() - 2], xc = xs.back(), yr = ys[ys.size() - 2], yc = ys.back();
    const std::int64_t m = adj_x_ ? xc : xr, k = adj_x_ ? xr : xc, k2 = adj_y_ ? yc : yr, n = adj_y_ ? yr : yc;
    if (k != k2) fail(error_code::invalid_argument, "the inner dims of ", x.shape(), " and ", y.shape(), " differ");
    const shape x_batch_dims(xb), y_batch_dims(yb);
    const std::optional<shape> out_batch = broadcast(x_batch_dims, y_batch_dims);
    if (!out_batch)
      fail(error_code::invalid_argument, "the batch dims of ", x.shape(), " and ", y.shape(), " do not broadcast");
    const std::int64_t x_batch = x_batch_dims.num_elements(), y_batch = y_batch_dims.num_elements();
    const std::int64_t batch = out_batch->num_elements();
    std::vector<std::int64_t> out(out_batch->dims().begin(), out_batch->dims().end());
    out.push_back(m);
    out.push_back(n);
    tensor& c = ctx.allocate_output(0, shape(out));
    if (c.num_elements() == 0) return;
    const auto& g = gpu_of(ctx.device());
    if (k == 0) {
      const current_device here(g.ordinal());
      check(cudaMemsetAsync(c.raw_data(), 0, c.bytes(), g.stream()), "cudaMemsetAsync");
      return;
    }
    // An operand with as many matrices as the output lays them out in the output's order.
    if ((x_batch == batch || x_batch == 1) && (y_batch == batch || y_batch == 1))
      gemm(g, t_, adj_x_, adj_y_, m, n, k, x.raw_data(), xc, y.raw_data(), yc, c.raw_data(), batch,
           x_batch == 1 ? 0 : xr * xc, y_batch == 1 ? 0 : yr * yc, m * n, {}, true);
    else
      gemm_broadcast(g, t_, adj_x_, adj_y_, m, n, k, x, xr, xc, y, yr, yc, c, x_batch_dims, y_batch_dims, *out_batch, true);
  }
 private:
  dtype t_;
  bool adj_x_, adj_y_;
};

/// The GPU kernel of _FusedMatMulBiasAdd (a session's rewrite of MatMul, BiasAdd and Relu:
/// graph/passes/fuse_matmul.hpp): the product with cuBLASLt's bias (and ReLU) epilogue.
struct gpu_fused_matmul_bias_add final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_fused_matmul_bias_add(const node& n)
      : t_(n.output_dtype(0)), transpose_a_(n.attr<bool>("transpose_a")), transpose_b_(n.attr<bool>("transpose_b")),
        relu_(n.attr<bool>("relu")) {
    (void)cuda_type_of(t_);
  }
  void compute(kernel_context& ctx) const override {
    const tensor a = device_input(ctx, 0), b = device_input(ctx, 1), bias = device_input(ctx, 2);
    const auto [m, k, n] = biased_product_dims(a.shape(), b.shape(), bias.shape(), transpose_a_, transpose_b_);
    tensor& c = ctx.allocate_output(0, shape{m, n});
    if (c.num_elements() == 0) return;
    const auto& g = gpu_of(ctx.device());
    if (k == 0) {  // relu(0 + bias) in every row
      const current_device here(g.ordinal());
      check(cudaMemsetAsync(c.raw_data(), 0, c.bytes(), g.stream()), "cudaMemsetAsync");
      add_bias_in_place(g, t_, c.raw_data(), m, n, bias.raw_data(), relu_, "_FusedMatMulBiasAdd");
      return;
    }
    (void)gemm(g, t_, transpose_a_, transpose_b_, m, n, k, a.raw_data(), a.shape()[1], b.raw_data(), b.shape()[1],
               c.raw_data(), 1, 0, 0, 0, {bias.raw_data(), relu_});
  }
 private:
  dtype t_;
  bool transpose_a_, transpose_b_, relu_;
};

/// The GPU kernel of _FusedMatMulReluGrad (a session's rewrite of ReluGrad(MatMul(a, b),
/// features)): the product, then ReluGrad's mask over it in place (one node and one buffer
/// less than the two ops; cuBLASLt's DRELU epilogue wants the forward pass's mask, which the
/// graph does not keep).
struct gpu_fused_matmul_relu_grad final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_fused_matmul_relu_grad(const node& n)
      : t_(n.output_dtype(0)), transpose_a_(n.attr<bool>("transpose_a")), transpose_b_(n.attr<bool>("transpose_b")) {
    (void)cuda_type_of(t_);
  }
  void compute(kernel_context& ctx) const override {
    const tensor a = device_input(ctx, 0), b = device_input(ctx, 1), features = device_input(ctx, 2);
    const auto [m, k, n] = masked_product_dims(a.shape(), b.shape(), features.shape(), transpose_a_, transpose_b_);
    tensor& c = ctx.allocate_output(0, shape{m, n});
    if (c.num_elements() == 0) return;
    const auto& g = gpu_of(ctx.device());
    if (k == 0) {  // a product of zeros: 0 wherever the mask is
      const current_device here(g.ordinal());
      check(cudaMemsetAsync(c.raw_data(), 0, c.bytes(), g.stream()), "cudaMemsetAsync");
      return;
    }
    gemm(g, t_, transpose_a_, transpose_b_, m, n, k, a.raw_data(), a.shape()[1], b.raw_data(), b.shape()[1], c.raw_data());
    launch::binary_op(launch::binary::relu_grad, elem_of(t_, "_FusedMatMulReluGrad"), c.raw_data(), features.raw_data(),
                      c.raw_data(), c.num_elements(), plan_for({&c.shape(), &features.shape()}, c.shape()), g.stream());
    launched("_FusedMatMulReluGrad");
  }
 private:
  dtype t_;
  bool transpose_a_, transpose_b_;
};

// ---- linear algebra: cuBLAS's batched LU ----

/// The launch code of a linear algebra dtype, or an unimplemented error.
inline launch::linalg_elem linalg_elem_of(dtype t) {
  switch (t) {
    case dtype::float32: return launch::linalg_elem::f32;
    case dtype::float64: return launch::linalg_elem::f64;
    case dtype::complex64: return launch::linalg_elem::c64;
    case dtype::complex128: return launch::linalg_elem::c128;
    default: fail(error_code::unimplemented, t, " linear algebra is not supported on the GPU");
  }
}

/// The LU factors of a batch of n x n matrices (or of their adjoints), with partial pivoting,
/// by cuBLAS's getrfBatched, in a buffer of their own; what cuBLAS reads and writes around
/// them: the device's arrays of pointers to each matrix (the factors', then those of the
/// inverses' buffer where one is given), the pivots and each matrix's info (which the
/// kernels do not read: a singular matrix is found on U's diagonal, as on the CPU). Enqueued
/// on the compute stream; nothing waits.
class batched_lu {
 public:
  /// Factors the matrices of x (batch n x n, n > 0, in the GPU's memory), or their adjoints.
  batched_lu(const gpu_device& g, const tensor& x, std::int64_t n, bool adjoint, void* inverses = nullptr)
      : batch_(x.num_elements() / (n * n)), n_(n), t_(x.dtype()),
        factors_(x.dtype(), x.shape(), g.get_allocator()),
        pointers_(dtype::uint8, shape{static_cast<std::int64_t>(sizeof(void*)) * batch_ * (inverses ? 2 : 1)}, g.get_allocator()),
        pivots_(dtype::int32, shape{batch_ * n}, g.get_allocator()),
        info_(dtype::int32, shape{batch_}, g.get_allocator()) {
    if (n > std::numeric_limits<int>::max() || batch_ > std::numeric_limits<int>::max())
      fail(error_code::unimplemented, batch_, " matrices of ", n, " x ", n, " (cuBLAS's batched LU takes at most 2^31 - 1 of each)");
    const launch::linalg_elem e = linalg_elem_of(t_);
    const std::int64_t matrix_bytes = n * n * static_cast<std::int64_t>(size_of(t_));
    const library_call call(g);
    if (adjoint) launch::adjoint_op(e, x.raw_data(), factors_.raw_data(), batch_, n, g.stream());
    else check(cudaMemcpyAsync(factors_.raw_data(), x.raw_data(), x.bytes(), cudaMemcpyDeviceToDevice, g.stream()), "cudaMemcpyAsync");
    launch::pointer_array_op(factors_.raw_data(), matrix_bytes, pointers(), batch_, g.stream());
    if (inverses) launch::pointer_array_op(inverses, matrix_bytes, pointers() + batch_, batch_, g.stream());
    launched("the matrices' pointers");
    const int N = static_cast<int>(n), B = static_cast<int>(batch_);
    int* const pivots = pivots_.data<std::int32_t>();
    int* const info = info_.data<std::int32_t>();
    switch (t_) {
      case dtype::float32:
        check(cublasSgetrfBatched(g.blas(), N, reinterpret_cast<float* const*>(pointers()), N, pivots, info, B), "cublasSgetrfBatched");
        break;
      case dtype::float64:
        check(cublasDgetrfBatched(g.blas(), N, reinterpret_cast<double* const*>(pointers()), N, pivots, info, B), "cublasDgetrfBatched");
        break;
      case dtype::complex64:
        check(cublasCgetrfBatched(g.blas(), N, reinterpret_cast<cuComplex* const*>(pointers()), N, pivots, info, B), "cublasCgetrfBatched");
        break;
      default:
        check(cublasZgetrfBatched(g.blas(), N, reinterpret_cast<cuDoubleComplex* const*>(pointers()), N, pivots, info, B),
              "cublasZgetrfBatched");
    }
  }

  /// Writes the inverses of the factored matrices into the buffer given at construction
  /// (getriBatched), and reports a singular matrix (a zero or NaN pivot) in `error`.
  void invert(const gpu_device& g, std::int64_t* error) {
    const int N = static_cast<int>(n_), B = static_cast<int>(batch_);
    const int* const pivots = pivots_.data<std::int32_t>();
    int* const info = info_.data<std::int32_t>();
    {
      const library_call call(g);
      void** in = pointers();
      void** out = pointers() + batch_;
      switch (t_) {
        case dtype::float32:
          check(cublasSgetriBatched(g.blas(), N, reinterpret_cast<const float* const*>(in), N, pivots,
                                    reinterpret_cast<float* const*>(out), N, info, B), "cublasSgetriBatched");
          break;
        case dtype::float64:
          check(cublasDgetriBatched(g.blas(), N, reinterpret_cast<const double* const*>(in), N, pivots,
                                    reinterpret_cast<double* const*>(out), N, info, B), "cublasDgetriBatched");
          break;
        case dtype::complex64:
          check(cublasCgetriBatched(g.blas(), N, reinterpret_cast<const cuComplex* const*>(in), N, pivots,
                                    reinterpret_cast<cuComplex* const*>(out), N, info, B), "cublasCgetriBatched");
          break;
        default:
          check(cublasZgetriBatched(g.blas(), N, reinterpret_cast<const cuDoubleComplex* const*>(in), N, pivots,
                                    reinterpret_cast<cuDoubleComplex* const*>(out), N, info, B), "cublasZgetriBatched");
      }
    }
    launch::lu_singular_op(linalg_elem_of(t_), factors_.raw_data(), batch_, n_, error, g.stream());
    launched("the pivots' check");
  }

  /// Writes each matrix's determinant into det (batch elements of the matrices' dtype).
  void determinants(const gpu_device& g, void* det) const {
    launch::lu_determinant_op(linalg_elem_of(t_), factors_.raw_data(), pivots_.data<std::int32_t>(), det, batch_, n_, g.stream());
    launched("the determinants");
  }

 private:
  void** pointers() const { return static_cast<void**>(pointers_.raw_data()); }

  std::int64_t batch_, n_;
  dtype t_;
  tensor factors_, pointers_, pivots_, info_;
};

/// The GPU kernel of MatrixInverse: LU factors with partial pivoting and the inverse from
/// them (cuBLAS's getrfBatched and getriBatched), as TensorFlow's GPU kernel computes it. A
/// matrix with a zero or NaN pivot is singular (the CPU kernel's test): reported at the next
/// wait, naming the node and the matrix (its values are then whatever cuBLAS made of them).
struct gpu_matrix_inverse final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_matrix_inverse(const node& n)
      : adjoint_(n.attr<bool>("adjoint")), message_(n.describe() + ": the input is not invertible (a zero pivot): matrix ") {
    (void)linalg_elem_of(n.output_dtype(0));
  }
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    const std::int64_t n = square_matrix_size(x.shape());
    tensor& out = ctx.allocate_output(0, x.shape());
    if (out.num_elements() == 0) return;
    const auto& g = gpu_of(ctx.device());
    batched_lu lu(g, x, n, adjoint_, out.raw_data());
    lu.invert(g, g.errors().claim(message_));
  }
 private:
  bool adjoint_;
  std::string message_;
};

/// The GPU kernel of MatrixDeterminant: the product of the diagonal of LU factors with
/// partial pivoting (cuBLAS's getrfBatched), negated per row interchange; 1 for 0 x 0 matrices.
struct gpu_matrix_determinant final : op_kernel {
  /// The kernel of node n: its dtype is checked here, once.
  explicit gpu_matrix_determinant(const node& n) { (void)linalg_elem_of(n.output_dtype(0)); }
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    const std::int64_t n = square_matrix_size(x.shape());
    const auto& dims = x.shape().dims();
    tensor& det = ctx.allocate_output(0, shape(std::vector<std::int64_t>(dims.begin(), dims.end() - 2)));
    if (det.num_elements() == 0) return;
    const auto& g = gpu_of(ctx.device());
    if (n == 0) {
      launch::lu_determinant_op(linalg_elem_of(x.dtype()), nullptr, nullptr, det.raw_data(), det.num_elements(), 0, g.stream());
      launched("the determinants");
      return;
    }
    batched_lu(g, x, n, false).determinants(g, det.raw_data());
  }
};

// ---- nn ----

/// The channel dim of a BiasAdd input: the last (NHWC) or the second (NCHW).
inline int channel_dim(const std::string& format, const tensor& x) {
  if (format == "NCHW") {
    if (x.rank() < 2) fail(error_code::invalid_argument, "NCHW input must have rank at least 2, got ", x.shape());
    return 1;
  }
  if (x.rank() < 1) fail(error_code::invalid_argument, "input must have rank at least 1, got a scalar");
  return x.rank() - 1;
}

/// The GPU kernel of BiasAdd.
struct gpu_bias_add final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_bias_add(const node& n) : t_(elem_of(n.output_dtype(0), n)), format_(n.attr<std::string>("data_format")) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0), bias = device_input(ctx, 1);
    const int c = channel_dim(format_, x);
    if (bias.rank() != 1 || bias.shape()[0] != x.shape()[c])
      fail(error_code::invalid_argument, "bias of shape ", bias.shape(), " does not match the channel dim of ", x.shape());
    tensor& y = ctx.allocate_output(0, x.shape());
    const auto& g = gpu_of(ctx.device());
    if (c == x.rank() - 1) {
      const std::int64_t channels = x.shape()[c];
      launch::bias_add_op(t_, x.raw_data(), bias.raw_data(), y.raw_data(), channels ? x.num_elements() / channels : 0,
                          channels, g.stream());
    } else {
      std::vector<std::int64_t> as(static_cast<std::size_t>(x.rank() - c), 1);
      as[0] = x.shape()[c];
      const shape bias_shape(as);
      launch::binary_op(launch::binary::add, t_, x.raw_data(), bias.raw_data(), y.raw_data(), y.num_elements(),
                        plan_for({&x.shape(), &bias_shape}, x.shape()), g.stream());
    }
    launched("BiasAdd");
  }
 private:
  launch::elem t_;
  std::string format_;
};

/// The GPU kernel of BiasAddGrad.
struct gpu_bias_add_grad final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_bias_add_grad(const node& n) : t_(elem_of(n.output_dtype(0), n)), format_(n.attr<std::string>("data_format")) {}
  void compute(kernel_context& ctx) const override {
    const tensor d = device_input(ctx, 0);
    const int c = channel_dim(format_, d);
    std::vector<bool> reduced(static_cast<std::size_t>(d.rank()), true);
    reduced[static_cast<std::size_t>(c)] = false;
    const auto& g = gpu_of(ctx.device());
    if (d.num_elements() == 0) {
      tensor& out = ctx.allocate_output(0, shape{d.shape()[c]});
      const current_device here(g.ordinal());
      check(cudaMemsetAsync(out.raw_data(), 0, out.bytes(), g.stream()), "cudaMemsetAsync");
      return;
    }
    ctx.set_output(0, reduce_axes(g, launch::reduction::sum, t_, d, reduced));
  }
 private:
  launch::elem t_;
  std::string format_;
};

/// x in dtype `to`, converted on g's compute stream as Cast converts (x itself where it has
/// that dtype).
inline tensor converted_on(const gpu_device& g, const tensor& x, dtype to, const node& n) {
  if (x.dtype() == to) return x;
  tensor y(to, x.shape(), g.get_allocator());
  launch::cast_op(cast_elem_of(x.dtype(), n), cast_elem_of(to, n), x.raw_data(), y.raw_data(), x.num_elements(), g.stream());
  return y;
}
/// `from` converted into `to` (of its shape) on g's compute stream, unless they are one tensor.
inline void converted_into(const gpu_device& g, const tensor& from, tensor& to, const node& n) {
  if (from.raw_data() == to.raw_data()) return;
  launch::cast_op(cast_elem_of(from.dtype(), n), cast_elem_of(to.dtype(), n), from.raw_data(), to.raw_data(),
                  from.num_elements(), g.stream());
}

/// What both batch normalization kernels read from their node: the attrs, and the dtype they
/// compute in (U, the statistics': float32 for a 16-bit x) with its launch code.
struct gpu_batch_norm_frame {
  ops::batch_norm_attrs attrs;  ///< epsilon, is_training (data_format checked)
  dtype u;                      ///< the statistics' dtype
  launch::elem t;               ///< its launch code
  /// Reads and checks n's attrs.
  explicit gpu_batch_norm_frame(const node& n) : attrs(n), u(n.attr<dtype>("U")), t(elem_of(u, n)) {}
};

/// The GPU kernel of FusedBatchNormV3 (NHWC; x float16, bfloat16, float32 or float64, computed
/// in the statistics' dtype U: float32 for a 16-bit x), as the CPU's: x seen as
/// [rows, C]; in training the batch's mean and variance by reductions over the rows (the
/// variance as the mean of squared differences from the mean), the per-channel values by a
/// kernel computing in double, then y = x a + b in one pass.
struct gpu_fused_batch_norm final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_fused_batch_norm(const node& n) : frame_(n), factor_(n.attr<double>("exponential_avg_factor")) {}
  void compute(kernel_context& ctx) const override {
    const auto& [attrs_, u_, t_] = frame_;
    const auto& g = gpu_of(ctx.device());
    const tensor x = converted_on(g, device_input(ctx, 0), u_, ctx.node());  // a 16-bit x computes in float32 (U)
    const std::int64_t c = attrs_.check_forward(x, ctx.input(1), ctx.input(2), ctx.input(3), ctx.input(4), factor_);
    const tensor scale = device_input(ctx, 1), offset = device_input(ctx, 2), mean = device_input(ctx, 3),
                 variance = device_input(ctx, 4);
    tensor& out = ctx.allocate_output(0, x.shape());
    tensor y = out.dtype() == u_ ? out : tensor(u_, x.shape(), g.get_allocator());
    launch::batch_norm_forward f;
    f.batch_mean = ctx.allocate_output(1, shape{c}).raw_data();
    f.batch_variance = ctx.allocate_output(2, shape{c}).raw_data();
    f.saved_mean = ctx.allocate_output(3, shape{c}).raw_data();
    f.saved_variance = ctx.allocate_output(4, shape{c}).raw_data();
    ctx.allocate_output(5, shape{0});
    if (c == 0) return;
    const std::int64_t rows = x.num_elements() / c;
    const tensor rows_view = x.reshape(shape{rows, c});
    tensor batch_mean, batch_variance, coefficients(x.dtype(), shape{2, c}, g.get_allocator());
    if (attrs_.training) {
      if (rows > 0) {
        batch_mean = reduce_axes(g, launch::reduction::mean, t_, rows_view, {true, false});
        tensor squares(x.dtype(), rows_view.shape(), g.get_allocator());
        const shape channels{c};
        launch::binary_op(launch::binary::squared_difference, t_, x.raw_data(), batch_mean.raw_data(), squares.raw_data(),
                          squares.num_elements(), plan_for({&rows_view.shape(), &channels}, rows_view.shape()), g.stream());
        batch_variance = reduce_axes(g, launch::reduction::mean, t_, squares, {true, false});
        f.mean = batch_mean.raw_data();
        f.variance = batch_variance.raw_data();
      }
      if (mean.num_elements() == c) f.old_mean = mean.raw_data();
      if (variance.num_elements() == c) f.old_variance = variance.raw_data();
    } else {
      f.mean = mean.raw_data();
      f.variance = variance.raw_data();
    }
    f.scale = scale.raw_data();
    f.offset = offset.raw_data();
    f.a = coefficients.raw_data();
    f.b = static_cast<char*>(coefficients.raw_data()) + c * static_cast<std::int64_t>(size_of(x.dtype()));
    f.epsilon = attrs_.epsilon;
    f.factor = factor_;
    f.rows = rows;
    f.training = attrs_.training;
    launch::batch_norm_forward_op(t_, f, c, g.stream());
    launch::channel_affine_op(t_, x.raw_data(), f.a, nullptr, nullptr, f.b, y.raw_data(), rows, c, g.stream());
    converted_into(g, y, out, ctx.node());
    launched("FusedBatchNormV3");
  }
 private:
  gpu_batch_norm_frame frame_;
  double factor_;
};

/// The GPU kernel of FusedBatchNormGradV3 (NHWC; the dtypes of FusedBatchNormV3's), as the CPU's: the sums
/// of dy and of dy (x - mean) per channel by reductions, the gradients of scale and offset
/// and the coefficients of x_backprop = dy p + x q + s by a kernel in double, then one pass.
struct gpu_fused_batch_norm_grad final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_fused_batch_norm_grad(const node& n) : frame_(n) {}
  void compute(kernel_context& ctx) const override {
    const auto& [attrs_, u_, t_] = frame_;
    const auto& g = gpu_of(ctx.device());
    const tensor dy = converted_on(g, device_input(ctx, 0), u_, ctx.node()), x = converted_on(g, device_input(ctx, 1), u_, ctx.node());
    const std::int64_t c = ops::batch_norm_attrs::check_backward(dy, x, ctx.input(2), ctx.input(3), ctx.input(4));
    const tensor scale = device_input(ctx, 2), mean = device_input(ctx, 3), variance = device_input(ctx, 4);
    tensor& out = ctx.allocate_output(0, x.shape());
    tensor dx = out.dtype() == u_ ? out : tensor(u_, x.shape(), g.get_allocator());
    launch::batch_norm_backward b;
    b.scale_backprop = ctx.allocate_output(1, shape{c}).raw_data();
    b.offset_backprop = ctx.allocate_output(2, shape{c}).raw_data();
    ctx.allocate_output(3, shape{0});
    ctx.allocate_output(4, shape{0});
    if (c == 0) return;
    const std::int64_t rows = x.num_elements() / c;
    const shape rows_shape{rows, c}, channels{c};
    tensor sum_dy, sum_dy_centered, coefficients(x.dtype(), shape{3, c}, g.get_allocator());
    if (rows > 0) {
      sum_dy = reduce_axes(g, launch::reduction::sum, t_, dy.reshape(rows_shape), {true, false});
      tensor centered(x.dtype(), rows_shape, g.get_allocator());
      launch::binary_op(launch::binary::sub, t_, x.raw_data(), mean.raw_data(), centered.raw_data(), centered.num_elements(),
                        plan_for({&rows_shape, &channels}, rows_shape), g.stream());
      launch::binary_op(launch::binary::mul, t_, centered.raw_data(), dy.raw_data(), centered.raw_data(),
                        centered.num_elements(), plan_for({&rows_shape, &rows_shape}, rows_shape), g.stream());
      sum_dy_centered = reduce_axes(g, launch::reduction::sum, t_, centered, {true, false});
      b.sum_dy = sum_dy.raw_data();
      b.sum_dy_centered = sum_dy_centered.raw_data();
    }
    const std::int64_t bytes = c * static_cast<std::int64_t>(size_of(x.dtype()));
    b.scale = scale.raw_data();
    b.mean = mean.raw_data();
    b.variance = variance.raw_data();
    b.p = coefficients.raw_data();
    b.q = static_cast<char*>(coefficients.raw_data()) + bytes;
    b.s = static_cast<char*>(coefficients.raw_data()) + 2 * bytes;
    b.epsilon = attrs_.epsilon;
    b.rows = rows;
    b.training = attrs_.training;
    launch::batch_norm_backward_op(t_, b, c, g.stream());
    launch::channel_affine_op(t_, dy.raw_data(), b.p, x.raw_data(), b.q, b.s, dx.raw_data(), rows, c, g.stream());
    converted_into(g, dx, out, ctx.node());
    launched("FusedBatchNormGradV3");
  }
 private:
  gpu_batch_norm_frame frame_;
};

/// The GPU kernel of Softmax, LogSoftmax.
template <bool Log>
struct gpu_softmax final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_softmax(const node& n) : t_(elem_of(n.output_dtype(0), n)) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    if (x.rank() < 1) fail(error_code::invalid_argument, "logits must have rank at least 1, got a scalar");
    const std::int64_t classes = x.shape()[x.rank() - 1];
    tensor& y = ctx.allocate_output(0, x.shape());
    launch::softmax_op(Log, t_, x.raw_data(), y.raw_data(), classes ? x.num_elements() / classes : 0, classes,
                       gpu_of(ctx.device()).stream());
    launched(Log ? "LogSoftmax" : "Softmax");
  }
 private:
  launch::elem t_;
};

/// The GPU kernel of SparseSoftmaxCrossEntropyWithLogits.
struct gpu_sparse_xent final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_sparse_xent(const node& n)
      : t_(elem_of(n.output_dtype(0), n)),
        labels64_(n.input_dtype(1) == dtype::int64),
        message_(n.describe() + ": a label is outside the valid range [0, classes): ") {}
  void compute(kernel_context& ctx) const override {
    const tensor f = device_input(ctx, 0), l = device_input(ctx, 1);
    if (f.rank() != 2) fail(error_code::invalid_argument, "features must be a matrix, got shape ", f.shape());
    if (l.rank() != 1 || l.shape()[0] != f.shape()[0])
      fail(error_code::invalid_argument, "labels must be a vector of the batch size ", f.shape()[0], ", got shape ", l.shape());
    const std::int64_t rows = f.shape()[0], classes = f.shape()[1];
    if (classes == 0 && rows > 0) fail(error_code::invalid_argument, "features have no classes (shape ", f.shape(), ")");
    tensor& loss = ctx.allocate_output(0, shape{rows});
    tensor& backprop = ctx.allocate_output(1, f.shape());
    const auto& g = gpu_of(ctx.device());
    launch::sparse_xent_op(t_, f.raw_data(), l.raw_data(), labels64_, loss.raw_data(), backprop.raw_data(), rows, classes,
                           g.errors().claim(message_), g.stream());
    launched("SparseSoftmaxCrossEntropyWithLogits");
  }
 private:
  launch::elem t_;
  bool labels64_;
  std::string message_;
};

/// SoftmaxCrossEntropyWithLogits(features, labels): dense labels of the features' shape.
struct gpu_softmax_xent final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_softmax_xent(const node& n) : t_(elem_of(n.output_dtype(0), n)) {}
  void compute(kernel_context& ctx) const override {
    const tensor f = device_input(ctx, 0), l = device_input(ctx, 1);
    if (f.rank() != 2 || l.shape() != f.shape())
      fail(error_code::invalid_argument, "features and labels must be matrices of one shape, got ", f.shape(), " and ", l.shape());
    const std::int64_t rows = f.shape()[0], classes = f.shape()[1];
    tensor& loss = ctx.allocate_output(0, shape{rows});
    tensor& backprop = ctx.allocate_output(1, f.shape());
    launch::softmax_xent_op(t_, f.raw_data(), l.raw_data(), loss.raw_data(), backprop.raw_data(), rows, classes,
                            gpu_of(ctx.device()).stream());
    launched("SoftmaxCrossEntropyWithLogits");
  }
 private:
  launch::elem t_;
};

/// L2Loss(t): sum(t^2) / 2.
struct gpu_l2_loss final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_l2_loss(const node& n) : t_(elem_of(n.output_dtype(0), n)) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    tensor& y = ctx.allocate_output(0, shape{});
    const auto& g = gpu_of(ctx.device());
    const tensor scratch(dtype::uint8, shape{static_cast<std::int64_t>(launch::reduce_scratch_bytes(1, x.num_elements(), 1))},
                         g.get_allocator());
    launch::reduce_op(launch::reduction::l2, t_, x.raw_data(), y.raw_data(), 1, x.num_elements(), 1, scratch.raw_data(), g.stream());
    launched("L2Loss");
  }
 private:
  launch::elem t_;
};

/// OneHot(indices, depth, on_value, off_value; axis).
struct gpu_one_hot final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_one_hot(const node& n) : axis_(n.attr<std::int64_t>("axis")) {}
  void compute(kernel_context& ctx) const override {
    const tensor indices = device_input(ctx, 0), on = device_input(ctx, 2), off = device_input(ctx, 3);
    require_plain(on, ctx.node());
    const auto depths = host_ints(ctx, 1, "depth");
    if (depths.size() != 1) fail(error_code::invalid_argument, "depth must be a scalar");
    const std::int64_t depth = depths[0];
    if (depth < 0) fail(error_code::invalid_argument, "depth must be non-negative, got ", depth);
    if (on.num_elements() != 1 || off.num_elements() != 1)
      fail(error_code::invalid_argument, "on_value and off_value must be scalars");
    if (axis_ < -1 || axis_ > indices.rank()) fail(error_code::invalid_argument, "axis ", axis_, " out of range");
    auto dims = indices.shape().dims();
    const auto pos = axis_ == -1 ? dims.size() : static_cast<std::size_t>(axis_);
    dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(pos), depth);
    tensor& out = ctx.allocate_output(0, shape(dims));
    std::int64_t outer = 1, inner = 1;
    for (std::size_t d = 0; d < pos; ++d) outer *= dims[d];
    for (std::size_t d = pos + 1; d < dims.size(); ++d) inner *= dims[d];
    const launch::elem index_type = indices.dtype() == dtype::uint8 ? launch::elem::u8
                                    : indices.dtype() == dtype::int32 ? launch::elem::i32 : launch::elem::i64;
    launch::one_hot_op(static_cast<int>(size_of(out.dtype())), index_type, indices.raw_data(), on.raw_data(), off.raw_data(),
                       out.raw_data(), outer, depth, inner, gpu_of(ctx.device()).stream());
    launched("OneHot");
  }
 private:
  std::int64_t axis_;
};

/// GatherV2(params, indices, axis): params[:axis] + indices + params[axis+1:].
struct gpu_gather final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_gather(const node& n)
      : indices64_(n.input_dtype(1) == dtype::int64), message_(n.describe() + ": an index is out of range: ") {}
  void compute(kernel_context& ctx) const override {
    const tensor params = device_input(ctx, 0), indices = device_input(ctx, 1);
    const auto axes = host_ints(ctx, 2, "axis");
    if (axes.size() != 1 || ctx.input(2).rank() != 0) fail(error_code::invalid_argument, "axis must be a scalar, got shape ", ctx.input(2).shape());
    if (params.rank() < 1) fail(error_code::invalid_argument, "params must have rank at least 1");
    const int axis = canonical_gpu_axis(axes[0], params.rank(), "axis");
    const auto& pd = params.shape().dims();
    std::vector<std::int64_t> out(pd.begin(), pd.begin() + axis);
    out.insert(out.end(), indices.shape().dims().begin(), indices.shape().dims().end());
    out.insert(out.end(), pd.begin() + axis + 1, pd.end());
    tensor& y = ctx.allocate_output(0, shape(out));
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= pd[static_cast<std::size_t>(d)];
    for (int d = axis + 1; d < params.rank(); ++d) inner *= pd[static_cast<std::size_t>(d)];
    const std::int64_t rows = pd[static_cast<std::size_t>(axis)];
    const auto& g = gpu_of(ctx.device());
    launch::gather_rows_op(params.raw_data(), indices.raw_data(), indices64_, y.raw_data(), outer, indices.num_elements(),
                           rows, inner * static_cast<std::int64_t>(size_of(params.dtype())), g.errors().claim(message_),
                           g.stream());
    launched("GatherV2");
  }
 private:
  bool indices64_;
  std::string message_;
};

/// Transpose(x, perm), through transposed() above.
struct gpu_transpose final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_transpose(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    std::vector<int> perm;
    // As on the CPU (and in TensorFlow), no negative entries: perm names dims 0..rank-1.
    for (auto p : host_ints(ctx, 1, "perm")) perm.push_back(p < -1 || p > x.rank() ? -1 : static_cast<int>(p));
    ctx.set_output(0, transposed(gpu_of(ctx.device()), x, perm));
  }
};

// ---- array ops: boxes copied between tensors ----

/// Copies the box of `extent` starting at `src_begin` in src to `dst_begin` in dst (same
/// dtype, same rank), on the compute stream.
/// With `reversed`, the source's order along each dim it marks is reversed (ReverseV2).
inline void copy_region(const gpu_device& g, const tensor& src, const std::vector<std::int64_t>& src_begin, tensor& dst,
                        const std::vector<std::int64_t>& dst_begin, const std::vector<std::int64_t>& extent,
                        const std::vector<bool>* reversed = nullptr) {
  const int rank = static_cast<int>(extent.size());
  for (auto e : extent)
    if (e == 0) return;
  std::vector<std::int64_t> ss(static_cast<std::size_t>(rank), 1), ds(static_cast<std::size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d) {
    ss[static_cast<std::size_t>(d)] = ss[static_cast<std::size_t>(d) + 1] * src.shape()[d + 1];
    ds[static_cast<std::size_t>(d)] = ds[static_cast<std::size_t>(d) + 1] * dst.shape()[d + 1];
  }
  launch::box_plan p;
  for (int d = 0; d < rank; ++d) {
    const auto k = static_cast<std::size_t>(d);
    p.src_offset += src_begin[k] * ss[k];
    p.dst_offset += dst_begin[k] * ds[k];
    if (extent[k] == 1) continue;  // moves nothing along it
    const bool back = reversed && (*reversed)[k];
    if (back) p.src_offset += (extent[k] - 1) * ss[k];  // from the last element, stepping back
    if (p.rank == launch::box_plan::max_rank)
      fail(error_code::unimplemented, "copying a region of more than ", launch::box_plan::max_rank, " dims above 1 on the GPU");
    p.dims[p.rank] = extent[k], p.src_stride[p.rank] = back ? -ss[k] : ss[k], p.dst_stride[p.rank] = ds[k];
    ++p.rank;
  }
  launch::copy_box_op(static_cast<int>(size_of(src.dtype())), src.raw_data(), dst.raw_data(), p, g.stream());
  launched("a region copy");
}

/// The GPU kernel of ConcatV2.
struct gpu_concat final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_concat(const node& n) : count_(static_cast<int>(n.attr<std::int64_t>("N"))) {}
  void compute(kernel_context& ctx) const override {
    std::vector<tensor> in;
    for (int i = 0; i < count_; ++i) in.push_back(device_input(ctx, i));
    const auto axes = host_ints(ctx, count_, "axis");
    if (axes.size() != 1 || in.empty()) fail(error_code::invalid_argument, "axis must be a scalar");
    const int rank = in[0].rank();
    if (rank == 0) fail(error_code::invalid_argument, "cannot concatenate scalars");
    const int axis = canonical_gpu_axis(axes[0], rank, "axis");
    std::vector<std::int64_t> dims = in[0].shape().dims();
    dims[static_cast<std::size_t>(axis)] = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      require_plain(in[i], ctx.node());
      bool ok = in[i].rank() == rank;
      for (int d = 0; ok && d < rank; ++d) ok = d == axis || in[i].shape()[d] == in[0].shape()[d];
      if (!ok)
        fail(error_code::invalid_argument, "value ", i, " of shape ", in[i].shape(), " does not match value 0's shape ",
             in[0].shape(), " but along axis ", axis);
      dims[static_cast<std::size_t>(axis)] = checked_add(dims[static_cast<std::size_t>(axis)], in[i].shape()[axis], "the concatenated dim");
    }
    tensor& out = ctx.allocate_output(0, shape(dims));
    const auto& g = gpu_of(ctx.device());
    std::vector<std::int64_t> zero(static_cast<std::size_t>(rank), 0), at(static_cast<std::size_t>(rank), 0);
    for (const auto& t : in) {
      copy_region(g, t, zero, out, at, t.shape().dims());
      at[static_cast<std::size_t>(axis)] += t.shape()[axis];
    }
  }
 private:
  int count_;
};

/// The GPU kernel of Split.
struct gpu_split final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_split(const node& n) : count_(static_cast<int>(n.attr<std::int64_t>("num_split"))) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 1);
    require_plain(x, ctx.node());
    const auto axes = host_ints(ctx, 0, "axis");
    if (axes.size() != 1) fail(error_code::invalid_argument, "axis must be a scalar");
    const int axis = canonical_gpu_axis(axes[0], x.rank(), "axis");
    const std::int64_t along = x.shape()[axis];
    if (count_ <= 0 || along % count_ != 0)
      fail(error_code::invalid_argument, "dimension ", axis, " of ", x.shape(), " does not split into ", count_, " equal parts");
    std::vector<std::int64_t> dims = x.shape().dims(), begin(dims.size(), 0), zero(dims.size(), 0);
    dims[static_cast<std::size_t>(axis)] = along / count_;
    const auto& g = gpu_of(ctx.device());
    for (int i = 0; i < count_; ++i) {
      tensor& out = ctx.allocate_output(i, shape(dims));
      copy_region(g, x, begin, out, zero, dims);
      begin[static_cast<std::size_t>(axis)] += dims[static_cast<std::size_t>(axis)];
    }
  }
 private:
  int count_;
};

/// The GPU kernel of Slice.
struct gpu_slice final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_slice(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    require_plain(x, ctx.node());
    const auto begin = host_ints(ctx, 1, "begin");
    auto size = host_ints(ctx, 2, "size");
    if (static_cast<int>(begin.size()) != x.rank() || static_cast<int>(size.size()) != x.rank())
      fail(error_code::invalid_argument, "begin and size must have one entry per dim of ", x.shape(), ", got ", begin.size(),
           " and ", size.size());
    for (int d = 0; d < x.rank(); ++d) {
      const auto k = static_cast<std::size_t>(d);
      if (size[k] == -1) size[k] = x.shape()[d] - begin[k];
      if (begin[k] < 0 || size[k] < 0 || begin[k] > x.shape()[d] || size[k] > x.shape()[d] - begin[k])
        fail(error_code::invalid_argument, "the slice [", begin[k], ", ", begin[k], " + ", size[k], ") of dim ", d,
             " is outside ", x.shape());
    }
    tensor& out = ctx.allocate_output(0, shape(size));
    copy_region(gpu_of(ctx.device()), x, begin, out, std::vector<std::int64_t>(size.size(), 0), size);
  }
};

/// The GPU kernel of Pad.
struct gpu_pad final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_pad(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    require_plain(x, ctx.node());
    const tensor& p = ctx.input(1);
    if (p.rank() != 2 || p.shape()[0] != x.rank() || p.shape()[1] != 2)
      fail(error_code::invalid_argument, "paddings must have shape [", x.rank(), ", 2], got ", p.shape());
    const auto pads = host_ints(ctx, 1, "paddings");
    std::vector<std::int64_t> dims, before;
    for (int d = 0; d < x.rank(); ++d) {
      const std::int64_t b = pads[static_cast<std::size_t>(2 * d)], a = pads[static_cast<std::size_t>(2 * d + 1)];
      if (b < 0 || a < 0) fail(error_code::invalid_argument, "paddings must not be negative, got ", b, " and ", a, " for dim ", d);
      dims.push_back(checked_add(checked_add(x.shape()[d], b, "a padded dim"), a, "a padded dim"));
      before.push_back(b);
    }
    tensor& out = ctx.allocate_output(0, shape(dims));
    const auto& g = gpu_of(ctx.device());
    if (out.bytes()) {
      const current_device here(g.ordinal());
      check(cudaMemsetAsync(out.raw_data(), 0, out.bytes(), g.stream()), "cudaMemsetAsync");
    }
    copy_region(g, x, std::vector<std::int64_t>(dims.size(), 0), out, before, x.shape().dims());
  }
};

/// The GPU kernel of Tile.
struct gpu_tile final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_tile(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    require_plain(x, ctx.node());
    const auto m = host_ints(ctx, 1, "multiples");
    if (static_cast<int>(m.size()) != x.rank())
      fail(error_code::invalid_argument, "multiples must have one entry per dim of ", x.shape(), ", got ", m.size());
    std::vector<std::int64_t> dims;
    launch::tile_plan p;
    for (int d = 0; d < x.rank(); ++d) {
      if (m[static_cast<std::size_t>(d)] < 0) fail(error_code::invalid_argument, "multiples must not be negative");
      dims.push_back(checked_mul(x.shape()[d], m[static_cast<std::size_t>(d)], "a tiled dim"));
    }
    tensor& out = ctx.allocate_output(0, shape(dims));
    if (out.num_elements() == 0) return;
    // Dims of size 1 in the input repeat one element: merged away, rank at most 8 after.
    for (int d = 0; d < x.rank(); ++d) {
      if (x.shape()[d] == 1 && m[static_cast<std::size_t>(d)] == 1) continue;
      if (p.rank == launch::tile_plan::max_rank) fail(error_code::unimplemented, "tiling more than 8 dims on the GPU");
      p.out_dims[p.rank] = dims[static_cast<std::size_t>(d)], p.in_dims[p.rank] = x.shape()[d];
      ++p.rank;
    }
    launch::tile_op(static_cast<int>(size_of(x.dtype())), x.raw_data(), out.raw_data(), out.num_elements(), p,
                    gpu_of(ctx.device()).stream());
    launched("Tile");
  }
};

/// The GPU kernel of Pack: small integer values in host memory are packed on the host (a
/// shape built from dims stays where the kernels that read it are); others are copied into
/// their slot along the new axis on the device.
struct gpu_pack final : op_kernel {
  /// The kernel of node n: its attrs are read here, once.
  explicit gpu_pack(const node& n) : axis_(n.attr<std::int64_t>("axis")) {}
  void compute(kernel_context& ctx) const override {
    const shape out_shape = cpu::packed_shape(ctx, axis_);
    if (on_host_inputs(ctx, ctx.input(0).dtype())) {
      tensor out(ctx.input(0).dtype(), out_shape);
      cpu::pack_into(ctx, axis_, out);
      return ctx.set_output(0, std::move(out));
    }
    tensor& out = ctx.allocate_output(0, out_shape);
    const int rank = out_shape.rank();
    const auto at = static_cast<std::size_t>(axis_ < 0 ? axis_ + rank : axis_);
    std::vector<std::int64_t> extent = out_shape.dims(), begin(static_cast<std::size_t>(rank), 0), zero = begin;
    extent[at] = 1;
    const auto& g = gpu_of(ctx.device());
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const tensor x = device_input(ctx, i);
      require_plain(x, ctx.node());
      begin[at] = i;
      copy_region(g, x.reshape(shape(extent)), zero, out, begin, extent);
    }
  }
 private:
  std::int64_t axis_;
};

/// The GPU kernel of Unpack: small integer values in host memory are unpacked on the host;
/// others a slice per output on the device.
struct gpu_unpack final : op_kernel {
  /// The kernel of node n: its attrs are read here, once.
  explicit gpu_unpack(const node& n) : axis_(n.attr<std::int64_t>("axis")) {}
  void compute(kernel_context& ctx) const override {
    const int num = ctx.num_outputs();
    if (on_host_inputs(ctx, ctx.input(0).dtype())) {
      const tensor& x = ctx.input(0);
      const auto [a, part] = cpu::unpacked_part(x, axis_, num);
      for (int i = 0; i < num; ++i) {
        tensor out(x.dtype(), part);
        cpu::unpack_into(x, a, i, out);
        ctx.set_output(i, std::move(out));
      }
      return;
    }
    const tensor x = device_input(ctx, 0);
    require_plain(x, ctx.node());
    const auto [a, part] = cpu::unpacked_part(x, axis_, num);
    std::vector<std::int64_t> extent = x.shape().dims(), begin(extent.size(), 0), zero = begin;
    extent[static_cast<std::size_t>(a)] = 1;
    const auto& g = gpu_of(ctx.device());
    for (int i = 0; i < num; ++i) {
      tensor view = ctx.allocate_output(i, part).reshape(shape(extent));  // the output's buffer
      begin[static_cast<std::size_t>(a)] = i;
      copy_region(g, x, begin, view, zero, extent);
    }
  }
 private:
  std::int64_t axis_;
};

/// The GPU kernel of ReverseV2: one box copy whose source steps back along the reversed dims.
struct gpu_reverse final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_reverse(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    require_plain(x, ctx.node());
    const std::vector<bool> flip = cpu::reversed_dims(host_input(ctx, 1), x.rank());
    tensor& out = ctx.allocate_output(0, x.shape());
    const std::vector<std::int64_t> zero(static_cast<std::size_t>(x.rank()), 0);
    copy_region(gpu_of(ctx.device()), x, zero, out, zero, x.shape().dims(), &flip);
  }
};

/// A StridedSlice plan as a box copy between `whole` (the input, or StridedSliceGrad's
/// output) and the dense slice: the whole's side steps by each dim's stride from its begin.
inline launch::box_plan strided_box(const ops::strided_slice_plan& p, const shape& whole, bool slice_is_source) {
  launch::box_plan b;
  const int rank = whole.rank();
  std::vector<std::int64_t> ws(static_cast<std::size_t>(rank), 1), ss(static_cast<std::size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d) {
    ws[static_cast<std::size_t>(d)] = ws[static_cast<std::size_t>(d) + 1] * whole[d + 1];
    ss[static_cast<std::size_t>(d)] = ss[static_cast<std::size_t>(d) + 1] * p.count[static_cast<std::size_t>(d) + 1];
  }
  std::int64_t& whole_offset = slice_is_source ? b.dst_offset : b.src_offset;
  for (std::size_t d = 0; d < static_cast<std::size_t>(rank); ++d) {
    whole_offset += p.begin[d] * ws[d];
    if (p.count[d] == 1) continue;  // moves nothing along it
    if (b.rank == launch::box_plan::max_rank)
      fail(error_code::unimplemented, "a strided slice of more than ", launch::box_plan::max_rank, " dims above 1 on the GPU");
    b.dims[b.rank] = p.count[d];
    (slice_is_source ? b.dst_stride : b.src_stride)[b.rank] = p.stride[d] * ws[d];
    (slice_is_source ? b.src_stride : b.dst_stride)[b.rank] = ss[d];
    ++b.rank;
  }
  return b;
}

/// The GPU kernel of StridedSlice: small integer inputs in host memory (a dim read from a
/// shape) are sliced on the host; others by one box copy on the device (a view where it
/// takes the whole input).
struct gpu_strided_slice final : op_kernel {
  /// The kernel of node n: its masks are read here, once.
  explicit gpu_strided_slice(const node& n) : masks_(ops::strided_slice_masks_of(n)) {}
  void compute(kernel_context& ctx) const override {
    const auto p = cpu::strided_slice_plan_for(ctx.input(0).shape().dims(), host_input(ctx, 1), host_input(ctx, 2),
                                               host_input(ctx, 3), masks_);
    if (p.identity) return ctx.set_output(0, ctx.input(0).reshape(shape(p.dims)));
    if (on_host_inputs(ctx, ctx.input(0).dtype())) {
      tensor out(ctx.input(0).dtype(), shape(p.dims));
      cpu::strided_copy<false>(p, ctx.input(0), out);
      return ctx.set_output(0, std::move(out));
    }
    const tensor x = device_input(ctx, 0);
    require_plain(x, ctx.node());
    tensor& out = ctx.allocate_output(0, shape(p.dims));
    if (out.num_elements() == 0) return;
    launch::copy_box_op(static_cast<int>(size_of(x.dtype())), x.raw_data(), out.raw_data(), strided_box(p, x.shape(), false),
                        gpu_of(ctx.device()).stream());
    launched("StridedSlice");
  }
 private:
  ops::strided_slice_masks masks_;
};

/// The GPU kernel of StridedSliceGrad: zeros, then dy copied where the slice was taken.
struct gpu_strided_slice_grad final : op_kernel {
  /// The kernel of node n: its masks are read here, once.
  explicit gpu_strided_slice_grad(const node& n) : masks_(ops::strided_slice_masks_of(n)) {}
  void compute(kernel_context& ctx) const override {
    const tensor dims_value = host_input(ctx, 0);
    if (dims_value.rank() != 1) fail(error_code::invalid_argument, "shape must be a vector, got shape ", dims_value.shape());
    const auto dims = cpu::int_values(dims_value, "shape");
    const shape whole = cpu::shape_from_dims(dims, "shape");
    const auto p = cpu::strided_slice_plan_for(dims, host_input(ctx, 1), host_input(ctx, 2), host_input(ctx, 3), masks_);
    const tensor dy = device_input(ctx, 4);
    require_plain(dy, ctx.node());
    if (dy.shape() != shape(p.dims))
      fail(error_code::invalid_argument, "dy has shape ", dy.shape(), " where the slice has ", shape(p.dims));
    tensor& out = ctx.allocate_output(0, whole);
    const auto& g = gpu_of(ctx.device());
    if (out.bytes()) check(cudaMemsetAsync(out.raw_data(), 0, out.bytes(), g.stream()), "StridedSliceGrad's zeros");
    if (dy.num_elements() == 0) return;
    launch::copy_box_op(static_cast<int>(size_of(dy.dtype())), dy.raw_data(), out.raw_data(), strided_box(p, whole, true), g.stream());
    launched("StridedSliceGrad");
  }
 private:
  ops::strided_slice_masks masks_;
};

/// The GPU kernel of SplitV: each part a region copy on the device.
struct gpu_split_v final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_split_v(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    require_plain(x, ctx.node());
    const auto [a, sizes] = cpu::split_v_parts(x, host_input(ctx, 1), host_input(ctx, 2), ctx.num_outputs());
    std::vector<std::int64_t> begin(static_cast<std::size_t>(x.rank()), 0), zero = begin, dims = x.shape().dims();
    const auto& g = gpu_of(ctx.device());
    for (int i = 0; i < ctx.num_outputs(); ++i) {
      dims[static_cast<std::size_t>(a)] = sizes[static_cast<std::size_t>(i)];
      copy_region(g, x, begin, ctx.allocate_output(i, shape(dims)), zero, dims);
      begin[static_cast<std::size_t>(a)] += sizes[static_cast<std::size_t>(i)];
    }
  }
};

/// The GPU kernel of Snapshot: a copy of the input on the device.
struct gpu_snapshot final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_snapshot(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    require_plain(x, ctx.node());
    tensor& y = ctx.allocate_output(0, x.shape());
    if (x.bytes())
      check(cudaMemcpyAsync(y.raw_data(), x.raw_data(), x.bytes(), cudaMemcpyDeviceToDevice, gpu_of(ctx.device()).stream()),
            "Snapshot's copy");
  }
};

/// The GPU kernel of LeakyRelu (Grad false) and LeakyReluGrad (Grad true).
template <bool Grad>
struct gpu_leaky_relu final : op_kernel {
  /// The kernel of node n: its alpha and dtype are read here, once.
  explicit gpu_leaky_relu(const node& n) : t_(arithmetic_elem_of(n.output_dtype(0), n, false)), alpha_(n.attr<double>("alpha")) {}
  void compute(kernel_context& ctx) const override {
    const tensor f = device_input(ctx, Grad ? 1 : 0);
    const tensor g = Grad ? device_input(ctx, 0) : tensor();
    if (Grad && g.shape() != f.shape())
      fail(error_code::invalid_argument, "gradients and features must have the same shape, got ", g.shape(), " and ", f.shape());
    tensor& out = ctx.allocate_output(0, f.shape());
    launch::leaky_relu_op(t_, alpha_, f.raw_data(), Grad ? g.raw_data() : nullptr, out.raw_data(), out.num_elements(),
                          gpu_of(ctx.device()).stream());
    launched(Grad ? "LeakyReluGrad" : "LeakyRelu");
  }
 private:
  launch::elem t_;
  double alpha_;
};

/// The GPU kernel of ClipByValue: Minimum with max, then Maximum with min (Add's plans and
/// kernels, a scalar broadcast), the CPU's order: a NaN stays NaN, min above max gives min.
struct gpu_clip_by_value final : op_kernel {
  /// The kernel of node n: its dtype is read here, once.
  explicit gpu_clip_by_value(const node& n) : t_(arithmetic_elem_of(n.output_dtype(0), n, false)) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0), lo = device_input(ctx, 1), hi = device_input(ctx, 2);
    for (const tensor* b : {&lo, &hi})
      if (b->rank() != 0 && b->shape() != x.shape())
        fail(error_code::invalid_argument, b == &lo ? "clip_value_min" : "clip_value_max", " must be a scalar or have t's shape ",
             x.shape(), ", got ", b->shape());
    tensor& out = ctx.allocate_output(0, x.shape());
    const cudaStream_t stream = gpu_of(ctx.device()).stream();
    launch::binary_op(launch::binary::minimum, t_, x.raw_data(), hi.raw_data(), out.raw_data(), out.num_elements(),
                      plan_for({&x.shape(), &hi.shape()}, x.shape()), stream);
    launch::binary_op(launch::binary::maximum, t_, out.raw_data(), lo.raw_data(), out.raw_data(), out.num_elements(),
                      plan_for({&x.shape(), &lo.shape()}, x.shape()), stream);
    launched("ClipByValue");
  }
 private:
  launch::elem t_;
};

/// The GPU kernel of Range for dtype T: its few values computed on the host (TensorFlow's
/// int32 Range lives in host memory too); a kernel on the device that reads them copies them.
template <class T>
struct gpu_range final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gpu_range(const node&) {}
  void compute(kernel_context& ctx) const override {
    std::vector<entry> inputs(ctx.input_entries().begin(), ctx.input_entries().end());
    for (auto& in : inputs)
      if (in.value.memory_space() != memory_space::host) in.value = ctx.device().copy_to_host(in.value);
    const kernel_context host = ctx.delegate(inputs, ctx.device());
    tensor out(dtype_of<T>, shape{cpu::range_count_of(host)});
    cpu::range_into<T>(host.input(0), host.input(2), out);
    ctx.set_output(0, std::move(out));
  }
};

/// The GPU kernel of AddN: the inputs (of one shape) added in turn into the output.
struct gpu_add_n final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_add_n(const node& n) : t_(arithmetic_elem_of(n.input_dtype(0), n, true)) {}
  void compute(kernel_context& ctx) const override {
    const int n = ctx.num_inputs();
    for (int i = 1; i < n; ++i)
      if (ctx.input(i).shape() != ctx.input(0).shape())
        fail(error_code::invalid_argument, "input ", i, " has shape ", ctx.input(i).shape(), ", input 0 ", ctx.input(0).shape(),
             ": the inputs must have one shape (AddN does not broadcast)");
    if (n == 1) return ctx.set_output(0, device_input(ctx, 0));
    const shape& s = ctx.input(0).shape();
    const auto plan = plan_for({&s, &s}, s);
    tensor& out = ctx.allocate_output(0, s);
    const cudaStream_t stream = gpu_of(ctx.device()).stream();
    const tensor first = device_input(ctx, 0);
    const void* sum = first.raw_data();
    for (int i = 1; i < n; ++i) {
      const tensor x = device_input(ctx, i);  // freed after the launch: reused only by work enqueued after it
      launch::binary_op(launch::binary::add, t_, sum, x.raw_data(), out.raw_data(), out.num_elements(), plan, stream);
      launched("AddN");
      sum = out.raw_data();
    }
  }
 private:
  launch::elem t_;
};

/// The GPU kernel of ZerosLike, OnesLike.
template <bool Ones>
struct gpu_fill_like final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_fill_like(const node& n) : t_(n.output_dtype(0)) { (void)element_bytes(t_); }
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    const auto& g = gpu_of(ctx.device());
    tensor& y = ctx.allocate_output(0, x.shape());
    if (y.bytes() == 0) return;
    const current_device here(g.ordinal());
    if constexpr (!Ones) {
      check(cudaMemsetAsync(y.raw_data(), 0, y.bytes(), g.stream()), "cudaMemsetAsync");
    } else {
      std::call_once(once_, [&] { one_ = g.copy_from_host(one_of(t_)); });  // once per kernel
      launch::fill_op(element_bytes(t_), one_.raw_data(), y.raw_data(), y.num_elements(), g.stream());
      launched("OnesLike");
    }
  }
  /// A host scalar 1 of dtype t (any dtype but string; a complex 1 is 1 + 0i).
  static tensor one_of(dtype t) {
    tensor one(t, shape{});
    dispatch<bool, std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t, std::uint16_t, std::uint32_t,
             std::uint64_t, half, bfloat16, float, double, complex64, complex128>(
        t, [&](auto tag) { *one.data<typename decltype(tag)::type>() = typename decltype(tag)::type(1); },
        [&] { fail(error_code::unimplemented, "OnesLike of ", t, " is not supported on the GPU"); });
    return one;
  }
 private:
  dtype t_;
  mutable std::once_flag once_;
  mutable tensor one_;
};

/// The GPU kernel of UnsortedSegmentSum.
struct gpu_unsorted_segment_sum final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_unsorted_segment_sum(const node& n)
      : t_(arithmetic_elem_of(n.output_dtype(0), n, true)), message_(n.describe() + ": a segment id is out of range: ") {}
  void compute(kernel_context& ctx) const override {
    const tensor data = device_input(ctx, 0), ids = device_input(ctx, 1);
    const shape& ds = data.shape();
    bool prefix = ids.rank() <= ds.rank();
    for (int d = 0; prefix && d < ids.rank(); ++d) prefix = ids.shape()[d] == ds[d];
    if (!prefix) fail(error_code::invalid_argument, "segment_ids of shape ", ids.shape(), " is not a prefix of data's shape ", ds);
    if (ctx.input(2).num_elements() != 1 || ctx.input(2).rank() != 0)
      fail(error_code::invalid_argument, "num_segments must be a scalar, got shape ", ctx.input(2).shape());
    const std::int64_t segments = host_ints(ctx, 2, "num_segments")[0];
    if (segments < 0) fail(error_code::invalid_argument, "num_segments must be non-negative, got ", segments);
    std::vector<std::int64_t> dims{segments};
    std::int64_t row = 1;
    for (int d = ids.rank(); d < ds.rank(); ++d) dims.push_back(ds[d]), row *= ds[d];
    tensor& out = ctx.allocate_output(0, shape(dims));
    const auto& g = gpu_of(ctx.device());
    const current_device here(g.ordinal());
    launch::unsorted_segment_sum_op(t_, data.raw_data(), ids.raw_data(), ids.dtype() == dtype::int64, out.raw_data(),
                                    ids.num_elements(), row, segments, g.errors().claim(message_), g.stream());
    launched("UnsortedSegmentSum");
  }
 private:
  launch::elem t_;
  std::string message_;
};

// ---- index tuples: GatherNd, ScatterNd, TensorScatterAdd, TensorScatterUpdate ----

/// The plan of tuples of `indices` ([..., k]) into a tensor of shape `into`, and the shape
/// of the slices they name (what an update row holds).
inline launch::nd_plan nd_plan_of(const tensor& indices, const shape& into, std::vector<std::int64_t>& slice_dims) {
  if (indices.rank() < 1) fail(error_code::invalid_argument, "indices must have rank at least 1, got a scalar");
  const std::int64_t k = indices.shape()[indices.rank() - 1];
  if (k > into.rank() || k > launch::nd_plan::max_k)
    fail(error_code::invalid_argument, "index tuples of ", k, " entries into a tensor of shape ", into,
         k > launch::nd_plan::max_k ? " (at most 8 on the GPU)" : "");
  launch::nd_plan p;
  p.k = static_cast<int>(k);
  p.tuples = 1;
  for (int d = 0; d + 1 < indices.rank(); ++d) p.tuples *= indices.shape()[d];
  p.slice = 1;
  for (int d = 0; d < into.rank(); ++d) {
    if (d < k) p.dims[d] = into[d];
    else slice_dims.push_back(into[d]), p.slice *= into[d];
  }
  return p;
}

/// updates must have shape indices.shape[:-1] + the slices' shape.
inline void require_updates(const tensor& indices, const tensor& updates, const std::vector<std::int64_t>& slice_dims) {
  std::vector<std::int64_t> want(indices.shape().dims().begin(), indices.shape().dims().end() - 1);
  want.insert(want.end(), slice_dims.begin(), slice_dims.end());
  if (updates.shape() != shape(want))
    fail(error_code::invalid_argument, "updates of shape ", updates.shape(), " do not match the indices ", indices.shape(),
         " and the slices they name (", shape(want), " expected)");
}

/// The GPU kernel of GatherNd.
struct gpu_gather_nd final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_gather_nd(const node& n) : message_(n.describe() + ": an index is out of range: ") {}
  void compute(kernel_context& ctx) const override {
    const tensor params = device_input(ctx, 0), indices = device_input(ctx, 1);
    std::vector<std::int64_t> slice_dims;
    const launch::nd_plan p = nd_plan_of(indices, params.shape(), slice_dims);
    std::vector<std::int64_t> out(indices.shape().dims().begin(), indices.shape().dims().end() - 1);
    out.insert(out.end(), slice_dims.begin(), slice_dims.end());
    tensor& y = ctx.allocate_output(0, shape(out));
    const auto& g = gpu_of(ctx.device());
    launch::nd_op(launch::nd_mode::gather, launch::elem::u8, element_bytes(params.dtype()), indices.raw_data(),
                  indices.dtype() == dtype::int64, p, params.raw_data(), y.raw_data(), g.errors().claim(message_), g.stream());
    launched("GatherNd");
  }
 private:
  std::string message_;
};

/// ScatterNd (zeros of `shape`, updates added), TensorScatterAdd (tensor, updates added) and
/// TensorScatterUpdate (tensor, slices replaced).
template <launch::nd_mode Mode, bool FromZeros>
struct gpu_scatter_nd final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_scatter_nd(const node& n) : message_(n.describe() + ": an index is out of range: ") {}
  void compute(kernel_context& ctx) const override {
    const auto& g = gpu_of(ctx.device());
    const int idx = FromZeros ? 0 : 1, upd = FromZeros ? 1 : 2;
    const tensor indices = device_input(ctx, idx), updates = device_input(ctx, upd);
    if constexpr (FromZeros) {
      const shape to(host_ints(ctx, 2, "shape"));
      tensor* out = &ctx.allocate_output(0, to);
      if (out->bytes()) {
        const current_device here(g.ordinal());
        check(cudaMemsetAsync(out->raw_data(), 0, out->bytes(), g.stream()), "cudaMemsetAsync");
      }
      run(ctx, g, indices, updates, *out);
    } else {
      tensor copy = g.copy_on_device(device_input(ctx, 0));
      run(ctx, g, indices, updates, copy);
      ctx.set_output(0, std::move(copy));
    }
  }
  /// Scatters updates into out (on g) at indices.
  void run(kernel_context& ctx, const gpu_device& g, const tensor& indices, const tensor& updates, tensor& out) const {
    std::vector<std::int64_t> slice_dims;
    const launch::nd_plan p = nd_plan_of(indices, out.shape(), slice_dims);
    require_updates(indices, updates, slice_dims);
    const launch::elem t = Mode == launch::nd_mode::scatter_add ? arithmetic_elem_of(out.dtype(), ctx.node(), true) : launch::elem::u8;
    launch::nd_op(Mode, t, element_bytes(out.dtype()), indices.raw_data(), indices.dtype() == dtype::int64, p,
                  updates.raw_data(), out.raw_data(), g.errors().claim(message_), g.stream());
    launched(ctx.node().op().c_str());
  }
 private:
  std::string message_;
};

/// SumToShape(x, shape): x summed over the dims that broadcasting `shape` to x's shape added
/// or stretched.
struct gpu_sum_to_shape final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_sum_to_shape(const node& n) : t_(arithmetic_elem_of(n.output_dtype(0), n, true)) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    const shape to(host_ints(ctx, 1, "shape"));
    if (to.rank() > x.rank() || broadcast_shape(ctx.node(), x.shape(), to) != x.shape())
      fail(error_code::invalid_argument, "shape ", to, " does not broadcast to ", x.shape());
    if (to == x.shape()) return ctx.set_output(0, x);
    std::vector<bool> reduced(static_cast<std::size_t>(x.rank()), false);
    const int lead = x.rank() - to.rank();
    for (int d = 0; d < x.rank(); ++d) reduced[static_cast<std::size_t>(d)] = d < lead || (to[d - lead] == 1 && x.shape()[d] != 1);
    const auto& g = gpu_of(ctx.device());
    if (x.num_elements() == 0) {
      tensor& y = ctx.allocate_output(0, to);
      if (y.bytes()) {
        const current_device here(g.ordinal());
        check(cudaMemsetAsync(y.raw_data(), 0, y.bytes(), g.stream()), "cudaMemsetAsync");
      }
      return;
    }
    ctx.set_output(0, reduce_axes(g, launch::reduction::sum, t_, x, reduced).reshape(to));
  }
 private:
  launch::elem t_;
};

// ---- pooling (weft's CUDA kernels, the CPU's semantics) and convolutions (cuDNN) ----

/// The launch-side copy of a window geometry.
inline launch::pool_geometry pool_geometry_of(const ops::geometry& g) {
  launch::pool_geometry p;
  p.n = g.n, p.h = g.h, p.w = g.w, p.c = g.c, p.kh = g.kh, p.kw = g.kw, p.sh = g.sh, p.sw = g.sw;
  p.oh = g.oh, p.ow = g.ow, p.pad_top = g.pad_top, p.pad_left = g.pad_left;
  return p;
}

/// A 4-vector of sizes (Conv2DBackpropInput's input_sizes, AvgPoolGrad's orig_input_shape), read on the host.
inline shape four_sizes(kernel_context& ctx, int i, const char* what) {
  if (ctx.input(i).rank() != 1 || ctx.input(i).num_elements() != 4)
    fail(error_code::invalid_argument, what, " must be a vector of 4 dims, got shape ", ctx.input(i).shape());
  const auto dims = host_ints(ctx, i, what);
  for (auto d : dims)
    if (d < 0) fail(error_code::invalid_argument, what, " has a negative dimension ", d);
  return shape(dims);
}

/// Fails with invalid_argument unless t has shape `expected` (`what` names t).
inline void require_gpu_shape(const tensor& t, const shape& expected, const char* what) {
  if (t.shape() != expected) fail(error_code::invalid_argument, what, " has shape ", t.shape(), ", expected ", expected);
}

/// The GPU kernel of MaxPool, AvgPool.
template <bool Max>
struct gpu_pool final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_pool(const node& n) : t_(elem_of(n.output_dtype(0), n)), w_(ops::window_attrs_of(n)) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0);
    const ops::geometry g = ops::make_geometry(x.shape(), w_.kh, w_.kw, x.rank() == 4 ? x.shape()[3] : 0, w_);
    tensor& y = ctx.allocate_output(0, g.output_shape());
    launch::pool_op(Max, t_, x.raw_data(), y.raw_data(), pool_geometry_of(g), gpu_of(ctx.device()).stream());
    launched(Max ? "MaxPool" : "AvgPool");
  }
 private:
  launch::elem t_;
  ops::window_attrs w_;
};

/// MaxPoolGrad(orig_input, orig_output, grad): each window's gradient to its first maximum;
/// MaxPoolGradGrad (Second): grad, of the input's shape, read at each window's first
/// maximum. The CPU's checks (kernels/cpu/pooling.hpp's max_pool_grad_op). MaxPoolGrad's
/// kernel is _FusedMaxPoolGradReluGrad's too: the gradient then ReluGrad's mask by the pool's
/// input, in place (a second pass in the same node).
template <bool Second>
struct gpu_max_pool_grad final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_max_pool_grad(const node& n)
      : t_(elem_of(n.output_dtype(0), n)), w_(ops::window_attrs_of(n)), masked_(n.op() == ops::fused_max_pool_grad_relu_grad_op) {}
  void compute(kernel_context& ctx) const override {
    const tensor x = device_input(ctx, 0), y = ctx.input(1), grad = device_input(ctx, 2);
    const ops::geometry g = ops::make_geometry(x.shape(), w_.kh, w_.kw, x.rank() == 4 ? x.shape()[3] : 0, w_, "orig_input");
    require_gpu_shape(y, g.output_shape(), "orig_output");
    require_gpu_shape(grad, Second ? x.shape() : g.output_shape(), "grad");
    tensor& out = ctx.allocate_output(0, Second ? g.output_shape() : x.shape());
    if constexpr (Second)
      launch::max_pool_grad_grad_op(t_, x.raw_data(), grad.raw_data(), out.raw_data(), pool_geometry_of(g), gpu_of(ctx.device()).stream());
    else
      launch::max_pool_grad_op(t_, x.raw_data(), grad.raw_data(), out.raw_data(), pool_geometry_of(g), gpu_of(ctx.device()).stream());
    if (masked_) {  // ReluGrad(out, x) in place: the gradient where the pool's input is above 0
      launch::binary_op(launch::binary::relu_grad, t_, out.raw_data(), x.raw_data(), out.raw_data(), out.num_elements(),
                        plan_for({&out.shape(), &x.shape()}, out.shape()), gpu_of(ctx.device()).stream());
    }
    launched(ctx.node().op().c_str());
  }
 private:
  launch::elem t_;
  ops::window_attrs w_;
  bool masked_;  ///< _FusedMaxPoolGradReluGrad
};

/// The GPU kernel of AvgPoolGrad.
struct gpu_avg_pool_grad final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_avg_pool_grad(const node& n) : t_(elem_of(n.output_dtype(0), n)), w_(ops::window_attrs_of(n)) {}
  void compute(kernel_context& ctx) const override {
    const shape in = four_sizes(ctx, 0, "orig_input_shape");
    const tensor grad = device_input(ctx, 1);
    const ops::geometry g = ops::make_geometry(in, w_.kh, w_.kw, in[3], w_, "orig_input_shape");
    require_gpu_shape(grad, g.output_shape(), "grad");
    tensor& dx = ctx.allocate_output(0, in);
    launch::avg_pool_grad_op(t_, grad.raw_data(), dx.raw_data(), pool_geometry_of(g), gpu_of(ctx.device()).stream());
    launched("AvgPoolGrad");
  }
 private:
  launch::elem t_;
  ops::window_attrs w_;
};

/// The cuDNN data type of dtype t, or an unimplemented error.
inline cudnnDataType_t cudnn_type_of(dtype t) {
  switch (t) {
    case dtype::float16: return CUDNN_DATA_HALF;
    case dtype::bfloat16: return CUDNN_DATA_BFLOAT16;
    case dtype::float32: return CUDNN_DATA_FLOAT;
    case dtype::float64: return CUDNN_DATA_DOUBLE;
    default: fail(error_code::unimplemented, t, " convolutions are not supported on the GPU");
  }
}

/// The math a convolution of dtype t may use: float32 and float64 with FMAs only (no TF32
/// tensor cores: the CPU's precision), the 16-bit types on tensor cores.
inline cudnnMathType_t conv_math_type(dtype t) {
  return t == dtype::float32 || t == dtype::float64 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

/// cuDNN's descriptors of one convolution: x and y NHWC, the filter OHWI (cuDNN's NHWC filter
/// layout; weft's filters are HWIO and are transposed for it), cross-correlation with the
/// geometry's padding, which must be symmetric (cuDNN pads both sides alike; gpu_conv makes
/// TensorFlow's uneven SAME padding explicit first).
class conv_descriptors {
 public:
  /// nchw: x and y NCHW, the filter KCRS (where cuDNN has no NHWC algorithm: float64).
  conv_descriptors(dtype t, const ops::geometry& g, bool nchw = false) {
    const std::int64_t extent_h = (g.kh - 1) * g.dh + 1, extent_w = (g.kw - 1) * g.dw + 1;
    const std::int64_t total_h = std::max<std::int64_t>(0, (g.oh - 1) * g.sh + extent_h - g.h);
    const std::int64_t total_w = std::max<std::int64_t>(0, (g.ow - 1) * g.sw + extent_w - g.w);
    if (total_h != 2 * g.pad_top || total_w != 2 * g.pad_left)
      fail(error_code::internal, "conv_descriptors: uneven padding (", total_h, " rows, ", total_w,
           " columns) reached cuDNN, which pads both sides alike");
    for (std::int64_t v : {g.n, g.h, g.w, g.c, g.k, g.oh, g.ow, g.kh, g.kw})
      if (v > std::numeric_limits<int>::max()) fail(error_code::unimplemented, "a convolution dim of ", v, " (cuDNN takes int)");
    const cudnnDataType_t type = cudnn_type_of(t);
    const cudnnDataType_t compute = t == dtype::float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    auto i = [](std::int64_t v) { return static_cast<int>(v); };
    check(cudnnCreateTensorDescriptor(&x_), "cudnnCreateTensorDescriptor");
    check(cudnnCreateTensorDescriptor(&y_), "cudnnCreateTensorDescriptor");
    check(cudnnCreateFilterDescriptor(&f_), "cudnnCreateFilterDescriptor");
    check(cudnnCreateConvolutionDescriptor(&conv_), "cudnnCreateConvolutionDescriptor");
    const cudnnTensorFormat_t format = nchw ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC;
    check(cudnnSetTensor4dDescriptor(x_, format, type, i(g.n), i(g.c), i(g.h), i(g.w)), "cudnnSetTensor4dDescriptor (input)");
    check(cudnnSetTensor4dDescriptor(y_, format, type, i(g.n), i(g.k), i(g.oh), i(g.ow)), "cudnnSetTensor4dDescriptor (output)");
    check(cudnnSetFilter4dDescriptor(f_, type, format, i(g.k), i(g.c), i(g.kh), i(g.kw)), "cudnnSetFilter4dDescriptor");
    check(cudnnSetConvolution2dDescriptor(conv_, i(g.pad_top), i(g.pad_left), i(g.sh), i(g.sw), i(g.dh), i(g.dw),
                                          CUDNN_CROSS_CORRELATION, compute),
          "cudnnSetConvolution2dDescriptor");
    check(cudnnSetConvolutionMathType(conv_, conv_math_type(t)), "cudnnSetConvolutionMathType");
  }
  conv_descriptors(const conv_descriptors&) = delete;
  conv_descriptors& operator=(const conv_descriptors&) = delete;
  ~conv_descriptors() {
    if (conv_) (void)cudnnDestroyConvolutionDescriptor(conv_);
    if (f_) (void)cudnnDestroyFilterDescriptor(f_);
    if (y_) (void)cudnnDestroyTensorDescriptor(y_);
    if (x_) (void)cudnnDestroyTensorDescriptor(x_);
  }
  cudnnTensorDescriptor_t x_ = nullptr;  ///< the input's descriptor
  cudnnTensorDescriptor_t y_ = nullptr;  ///< the output's descriptor
  cudnnFilterDescriptor_t f_ = nullptr;  ///< the filter's descriptor
  cudnnConvolutionDescriptor_t conv_ = nullptr;  ///< the convolution's (padding, strides, dilations)
};

/// The scaling factors cuDNN takes: float, or double for float64 data.
struct cudnn_scale {
  /// The factors for data of dtype t.
  explicit cudnn_scale(dtype t) : f64(t == dtype::float64) {}
  /// A pointer to 1 in the type cuDNN wants.
  const void* one() const { return f64 ? static_cast<const void*>(&one_d) : &one_f; }
  /// A pointer to 0 in the type cuDNN wants.
  const void* zero() const { return f64 ? static_cast<const void*>(&zero_d) : &zero_f; }
  bool f64;          ///< the data is float64 (the factors are double)
  float one_f = 1;   ///< 1 as a float
  float zero_f = 0;  ///< 0 as a float
  double one_d = 1;  ///< 1 as a double
  double zero_d = 0; ///< 0 as a double
};

/// The most workspace a convolution's algorithm may take.
inline constexpr std::size_t conv_workspace_limit = std::size_t(512) << 20;

/// The first algorithm of cuDNN's list (its heuristics' order, or the timing's) that works
/// within the workspace limit (as an int), and its workspace; none when no algorithm does.
/// With `math`: only an algorithm timed with that math (the descriptor's; a timed list may
/// hold others).
template <class Perf>
std::optional<std::pair<int, std::size_t>> pick_algorithm(const Perf* perf, int count,
                                                          std::optional<cudnnMathType_t> math = std::nullopt) {
  for (int i = 0; i < count; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= conv_workspace_limit && (!math || perf[i].mathType == *math))
      return std::pair<int, std::size_t>{static_cast<int>(perf[i].algo), perf[i].memory};
  return std::nullopt;
}

/// The geometry of a Conv2D of an NHWC input and an HWIO filter, or an error naming the mismatch.
inline ops::geometry conv_geometry(const shape& input, const shape& filter, const ops::window_attrs& w) {
  if (filter.rank() != 4) fail(error_code::invalid_argument, "filter must have rank 4 (HWIO), got shape ", filter);
  ops::geometry g = ops::make_geometry(input, filter[0], filter[1], filter[3], w);
  if (filter[2] != g.c)
    fail(error_code::invalid_argument, "the input's channels and the filter's input channels differ (", g.c, " vs ", filter[2], ")");
  return g;
}

/// Which of a convolution's three computations a plan is for.
enum class conv_pass { forward, backprop_input, backprop_filter };

/// Whether the geometry's padding is uneven (TensorFlow's SAME pads one more row or column at
/// the end when the total is odd), which cuDNN cannot do.
inline bool uneven_padding(const ops::geometry& g) {
  const std::int64_t extent_h = (g.kh - 1) * g.dh + 1, extent_w = (g.kw - 1) * g.dw + 1;
  const std::int64_t total_h = std::max<std::int64_t>(0, (g.oh - 1) * g.sh + extent_h - g.h);
  const std::int64_t total_w = std::max<std::int64_t>(0, (g.ow - 1) * g.sw + extent_w - g.w);
  return total_h != 2 * g.pad_top || total_w != 2 * g.pad_left;
}
/// The same convolution over the window of the input its outputs read, padding made
/// explicit: the window starts pad_top rows and pad_left columns before the image, and cuDNN
/// pads nothing.
inline ops::geometry explicit_padding(ops::geometry g) {
  g.h = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1;
  g.w = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
  g.pad_top = g.pad_left = 0;
  return g;
}
/// The rows (or columns) where an image of `size` and a window starting at -pad of `window`
/// overlap: the first in the image, the first in the window, how many.
struct overlap {
  std::int64_t in_image;   ///< the first row in the image
  std::int64_t in_window;  ///< the first row in the window
  std::int64_t count;      ///< how many rows
};
/// Where an image of `size` and a window of `window` starting at -pad overlap.
inline overlap overlap_of(std::int64_t size, std::int64_t pad, std::int64_t window) {
  const std::int64_t first = std::max<std::int64_t>(0, -pad), last = std::min(size, window - pad);
  return {first, first + pad, std::max<std::int64_t>(0, last - first)};
}
/// Copies between an NHWC image x and its window (zeros where the window is outside the
/// image): into the window (to_window) or back into a zeroed image.
inline void copy_window(const gpu_device& g, const tensor& from, tensor& to, const ops::geometry& geo,
                        const ops::geometry& window, bool to_window) {
  const current_device here(g.ordinal());
  if (to.bytes()) check(cudaMemsetAsync(to.raw_data(), 0, to.bytes(), g.stream()), "cudaMemsetAsync");
  const overlap rows = overlap_of(geo.h, geo.pad_top, window.h), cols = overlap_of(geo.w, geo.pad_left, window.w);
  const std::vector<std::int64_t> image_begin{0, rows.in_image, cols.in_image, 0}, window_begin{0, rows.in_window, cols.in_window, 0};
  copy_region(g, from, to_window ? image_begin : window_begin, to, to_window ? window_begin : image_begin,
              {geo.n, rows.count, cols.count, geo.c});
}

/// How one convolution pass runs on one GPU: cuDNN's descriptors, the layout (NHWC, or NCHW
/// where cuDNN has no NHWC algorithm), the algorithm its heuristics pick and its workspace.
/// Made once per geometry and kept by the kernel: asking cuDNN's heuristics costs about a
/// millisecond of host time, more than LeNet's convolutions on an H200.
struct conv_plan {
  /// Descriptors for a convolution of dtype t over geo (NCHW when nchw); no algorithm yet.
  conv_plan(dtype t, const ops::geometry& geo, bool nchw) : d(t, geo, nchw), nchw(nchw) {}
  conv_descriptors d;         ///< cuDNN's descriptors
  bool nchw;                  ///< the tensors are NCHW (else NHWC)
  int algo = 0;               ///< the chosen algorithm (the pass's cuDNN enum, as int)
  std::size_t workspace = 0;  ///< the workspace bytes it needs
};

/// Whether convolution plans time cuDNN's algorithms (cudnnFind*: each algorithm run once on
/// scratch buffers when the plan is made, the fastest kept, as TensorFlow's autotuning does)
/// rather than take the first of its heuristics' list: only where the environment says
/// WEFT_CUDNN_AUTOTUNE=1. Opt-in because it was written after the last GPU run and has not
/// yet run on a GPU (docs/gpu.md); the heuristics' path is the one run and measured.
inline bool conv_autotune() {
  static const bool on = [] {
    const char* v = std::getenv("WEFT_CUDNN_AUTOTUNE");
    return v && std::string(v) == "1";
  }();
  return on;
}

/// The algorithm of one pass and layout (pick_algorithm): from `find`, cuDNN's timing, when
/// conv_autotune() (the descriptor's math only), else or where timing fails (memory for its
/// buffers) from `heuristics`, cuDNN's list (cudnnGet*_v7, an error naming `what` if it
/// fails). Each takes the results' array and their count.
template <class Perf, class Find, class Heuristics>
std::optional<std::pair<int, std::size_t>> choose_algorithm(dtype t, Find&& find, Heuristics&& heuristics, const char* what) {
  Perf perf[16];
  int count = 0;
  if (conv_autotune() && find(perf, &count) == CUDNN_STATUS_SUCCESS)
    if (auto picked = pick_algorithm(perf, count, conv_math_type(t))) return picked;
  check(heuristics(perf, &count), what);
  return pick_algorithm(perf, count);
}

/// A plan for pass Pass: NHWC tried first, then NCHW; in a layout, the fastest algorithm
/// cuDNN's timing finds (conv_autotune()) or the first of its heuristics' list (cudnnGet*_v7)
/// that fits the workspace limit; an error when none does. The timing runs each algorithm on
/// scratch buffers cuDNN allocates (outside the device's allocator) and waits for the device.
template <conv_pass Pass>
std::unique_ptr<conv_plan> make_conv_plan(const gpu_device& g, dtype t, const ops::geometry& geo) {
  for (bool nchw : {false, true}) {
    auto plan = std::make_unique<conv_plan>(t, geo, nchw);
    const conv_descriptors& d = plan->d;
    std::optional<std::pair<int, std::size_t>> picked;
    if constexpr (Pass == conv_pass::forward) {
      picked = choose_algorithm<cudnnConvolutionFwdAlgoPerf_t>(
          t, [&](auto* perf, int* n) { return cudnnFindConvolutionForwardAlgorithm(g.dnn(), d.x_, d.f_, d.conv_, d.y_, 16, n, perf); },
          [&](auto* perf, int* n) { return cudnnGetConvolutionForwardAlgorithm_v7(g.dnn(), d.x_, d.f_, d.conv_, d.y_, 16, n, perf); },
          "cudnnGetConvolutionForwardAlgorithm_v7");
    } else if constexpr (Pass == conv_pass::backprop_input) {
      picked = choose_algorithm<cudnnConvolutionBwdDataAlgoPerf_t>(
          t, [&](auto* perf, int* n) { return cudnnFindConvolutionBackwardDataAlgorithm(g.dnn(), d.f_, d.y_, d.conv_, d.x_, 16, n, perf); },
          [&](auto* perf, int* n) { return cudnnGetConvolutionBackwardDataAlgorithm_v7(g.dnn(), d.f_, d.y_, d.conv_, d.x_, 16, n, perf); },
          "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    } else {
      picked = choose_algorithm<cudnnConvolutionBwdFilterAlgoPerf_t>(
          t, [&](auto* perf, int* n) { return cudnnFindConvolutionBackwardFilterAlgorithm(g.dnn(), d.x_, d.y_, d.conv_, d.f_, 16, n, perf); },
          [&](auto* perf, int* n) { return cudnnGetConvolutionBackwardFilterAlgorithm_v7(g.dnn(), d.x_, d.y_, d.conv_, d.f_, 16, n, perf); },
          "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    }
    if (picked) {
      plan->algo = picked->first;
      plan->workspace = picked->second;
      return plan;
    }
  }
  fail(error_code::unimplemented, "cuDNN has no ",
       Pass == conv_pass::forward ? "forward" : Pass == conv_pass::backprop_input ? "input gradient" : "filter gradient",
       " algorithm for this ", t, " convolution within ", conv_workspace_limit, " bytes of workspace, in NHWC or NCHW");
}

/// The GPU kernel of Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter, and (the forward
/// pass) of _FusedConv2DBiasAdd: the bias (and ReLU) applied to cuDNN's output in place, one
/// pass of weft's kernels each, in the same node.
template <conv_pass Pass>
struct gpu_conv final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_conv(const node& n)
      : t_(n.output_dtype(0)), w_(ops::window_attrs_of(n)), biased_(Pass == conv_pass::forward && n.op() == ops::fused_conv2d_bias_add_op),
        relu_(biased_ && n.attr<bool>("relu")) {
    (void)cudnn_type_of(t_);
  }
  void compute(kernel_context& ctx) const override {
    const auto& g = gpu_of(ctx.device());
    tensor x, f, dy, bias;
    shape x_shape, f_shape;
    if constexpr (Pass == conv_pass::forward) {
      x = device_input(ctx, 0), f = device_input(ctx, 1);
      x_shape = x.shape(), f_shape = f.shape();
      if (biased_) bias = device_input(ctx, 2);
    } else if constexpr (Pass == conv_pass::backprop_input) {
      x_shape = four_sizes(ctx, 0, "input_sizes"), f = device_input(ctx, 1), dy = device_input(ctx, 2);
      f_shape = f.shape();
    } else {
      x = device_input(ctx, 0), f_shape = four_sizes(ctx, 1, "filter_sizes"), dy = device_input(ctx, 2);
      x_shape = x.shape();
    }
    const ops::geometry geo = conv_geometry(x_shape, f_shape, w_);
    if constexpr (Pass != conv_pass::forward) require_gpu_shape(dy, geo.output_shape(), "out_backprop");
    if (biased_ && (bias.rank() != 1 || bias.shape()[0] != geo.k))  // the CPU kernel's words
      fail(error_code::invalid_argument, "bias must be a vector of the filter's ", geo.k, " output channels, got shape ",
           bias.shape(), " (filter ", f_shape, ")");
    tensor& out = ctx.allocate_output(0, Pass == conv_pass::forward ? geo.output_shape()
                                         : Pass == conv_pass::backprop_input ? x_shape : f_shape);
    if (out.num_elements() == 0) return;
    const current_device here(g.ordinal());
    // The fused node's bias and ReLU over a forward pass's output y.
    const auto epilogue = [&](tensor& y) {
      if (biased_) add_bias_in_place(g, t_, y.raw_data(), y.num_elements() / geo.k, geo.k, bias.raw_data(), relu_, "_FusedConv2DBiasAdd");
    };
    if (geo.c == 0 || geo.n == 0 || geo.oh == 0 || geo.ow == 0 || geo.k == 0) {  // nothing to sum: zeros
      check(cudaMemsetAsync(out.raw_data(), 0, out.bytes(), g.stream()), "cudaMemsetAsync");
      epilogue(out);
      return;
    }
    // Uneven padding: the convolution of the input's window, padding made explicit.
    const bool uneven = uneven_padding(geo);
    const ops::geometry run = uneven ? explicit_padding(geo) : geo;
    if (uneven && Pass != conv_pass::backprop_input) {
      tensor window(t_, shape{run.n, run.h, run.w, run.c}, g.get_allocator());
      copy_window(g, x, window, geo, run, true);
      x = window;
    }
    const conv_plan& plan = plan_for(g, run);
    const conv_descriptors& d = plan.d;
    const cudnn_scale scale(t_);
    tensor ws(dtype::uint8, shape{static_cast<std::int64_t>(plan.workspace)}, g.get_allocator());
    // In NCHW the data is transposed in and the result back; weft's filters are HWIO, cuDNN's
    // OHWI (NHWC) or KCRS (NCHW).
    const std::vector<int> to_nchw{0, 3, 1, 2}, from_nchw{0, 2, 3, 1};
    if constexpr (Pass == conv_pass::backprop_filter) {
      const tensor xin = plan.nchw ? transposed(g, x, to_nchw) : x, dyin = plan.nchw ? transposed(g, dy, to_nchw) : dy;
      tensor dw(t_, plan.nchw ? shape{geo.k, geo.c, geo.kh, geo.kw} : shape{geo.k, geo.kh, geo.kw, geo.c}, g.get_allocator());
      {
        const library_call call(g);
        check(cudnnConvolutionBackwardFilter(g.dnn(), scale.one(), d.x_, xin.raw_data(), d.y_, dyin.raw_data(), d.conv_,
                                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), ws.raw_data(),
                                             plan.workspace, scale.zero(), d.f_, dw.raw_data()),
              "cudnnConvolutionBackwardFilter");
      }
      ctx.set_output(0, transposed(g, dw, plan.nchw ? std::vector<int>{2, 3, 1, 0} : std::vector<int>{1, 2, 3, 0}));
    } else {
      const tensor fin = transposed(g, f, plan.nchw ? std::vector<int>{3, 2, 0, 1} : std::vector<int>{3, 0, 1, 2});
      // What cuDNN writes: the output, or the input gradient of the window (uneven padding).
      const bool window_grad = Pass == conv_pass::backprop_input && uneven;
      const shape direct = window_grad ? shape{run.n, run.h, run.w, run.c} : out.shape();
      tensor result = plan.nchw ? tensor(t_, shape{direct[0], direct[3], direct[1], direct[2]}, g.get_allocator())
                      : window_grad ? tensor(t_, direct, g.get_allocator())
                                    : out;
      {
        const library_call call(g);
        if constexpr (Pass == conv_pass::forward) {
          const tensor xin = plan.nchw ? transposed(g, x, to_nchw) : x;
          check(cudnnConvolutionForward(g.dnn(), scale.one(), d.x_, xin.raw_data(), d.f_, fin.raw_data(), d.conv_,
                                        static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), ws.raw_data(), plan.workspace,
                                        scale.zero(), d.y_, result.raw_data()),
                "cudnnConvolutionForward");
        } else {
          const tensor dyin = plan.nchw ? transposed(g, dy, to_nchw) : dy;
          check(cudnnConvolutionBackwardData(g.dnn(), scale.one(), d.f_, fin.raw_data(), d.y_, dyin.raw_data(), d.conv_,
                                             static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), ws.raw_data(),
                                             plan.workspace, scale.zero(), d.x_, result.raw_data()),
                "cudnnConvolutionBackwardData");
        }
      }
      if (plan.nchw) result = transposed(g, result, from_nchw);
      epilogue(plan.nchw ? result : out);
      if (window_grad) {
        copy_window(g, result, out, geo, run, false);  // out: the image's gradient, zeros where no window reads
      } else if (plan.nchw) {
        ctx.set_output(0, result);
      }
    }
  }

 private:
  /// The plan of this geometry on this GPU, made on first use.
  const conv_plan& plan_for(const gpu_device& g, const ops::geometry& geo) const {
    const std::array<std::int64_t, 16> key{g.ordinal(), geo.n,  geo.h,  geo.w,  geo.c,  geo.k,       geo.kh,       geo.kw,
                                           geo.sh,      geo.sw, geo.dh, geo.dw, geo.oh, geo.ow, geo.pad_top, geo.pad_left};
    std::lock_guard lock(plans_mu_);
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      const library_call call(g);
      it = plans_.emplace(key, make_conv_plan<Pass>(g, t_, geo)).first;
    }
    return *it->second;
  }
  dtype t_;
  ops::window_attrs w_;
  bool biased_, relu_;  ///< _FusedConv2DBiasAdd's bias, and its relu attr
  mutable std::mutex plans_mu_;
  mutable std::map<std::array<std::int64_t, 16>, std::unique_ptr<conv_plan>> plans_;
};

// ---- random: the CPU kernels' streams (core/random_stream.hpp), drawn on the device ----

/// The GPU kernel of RandomUniform, RandomStandardNormal, TruncatedNormal.
template <launch::distribution D>
struct gpu_random final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_random(const node& n)
      : t_(elem_of(n.attr<dtype>("dtype"), n)), key_(random_key(n.attr<std::int64_t>("seed"), n.attr<std::int64_t>("seed2"))) {}
  void compute(kernel_context& ctx) const override {
    if (ctx.input(0).rank() != 1) fail(error_code::invalid_argument, "shape must be a vector, got shape ", ctx.input(0).shape());
    const auto dims = host_ints(ctx, 0, "shape");
    for (auto d : dims)
      if (d < 0) fail(error_code::invalid_argument, "shape must not have negative dims, got ", d);
    tensor& out = ctx.allocate_output(0, shape(dims));
    const std::int64_t n = out.num_elements();
    const std::uint64_t per = D == launch::distribution::truncated_normal ? 64 : 1;
    const std::uint64_t base = counter_.fetch_add(static_cast<std::uint64_t>(n) * per, std::memory_order_relaxed);
    launch::random_op(D, t_, key_, base, per, out.raw_data(), n, gpu_of(ctx.device()).stream());
    launched(ctx.node().op().c_str());
  }
 private:
  launch::elem t_;
  std::uint64_t key_;
  mutable std::atomic<std::uint64_t> counter_{0};
};

/// The GPU kernel of Dropout.
struct gpu_dropout final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_dropout(const node& n)
      : t_(elem_of(n.output_dtype(0), n)),
        key_(random_key(n.attr<std::int64_t>("seed"), n.attr<std::int64_t>("seed2"), dropout_salt)),
        message_(n.describe() + ": rate must be in [0, 1), got ") {}
  void compute(kernel_context& ctx) const override {
    if (ctx.input(1).rank() != 0) fail(error_code::invalid_argument, "rate must be a scalar, got shape ", ctx.input(1).shape());
    const tensor x = device_input(ctx, 0), rate = device_input(ctx, 1);
    tensor& out = ctx.allocate_output(0, x.shape());
    tensor& mask = ctx.allocate_output(1, x.shape());
    const std::int64_t n = x.num_elements();
    const std::uint64_t base = counter_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    const auto& g = gpu_of(ctx.device());
    launch::dropout_op(t_, key_, base, x.raw_data(), rate.raw_data(), out.raw_data(), mask.raw_data(), n,
                       g.errors().claim(message_, error_slots::value_kind::float64_bits), g.stream());
    launched("Dropout");
  }
 private:
  launch::elem t_;
  std::uint64_t key_;
  std::string message_;
  mutable std::atomic<std::uint64_t> counter_{0};
};

// ---- optimizers: in place, with a device copy of a value still read elsewhere ----

/// resource_variable::update_in_place on GPU g: `check(values)` (which fails before anything is
/// written), then the values still in host memory moved into g's, then `run(values)`; a
/// value a reader still holds is copied first (from host memory, or on the device).
template <class Check, class Run>
void update_on_gpu(const gpu_device& g, const std::vector<resource_variable*>& vars, Check&& check, Run&& run) {
  resource_variable::update_in_place(
      vars,
      [&](const std::vector<tensor*>& v) {
        check(v);
        for (tensor* t : v)
          if (t->memory_space() == memory_space::host) *t = g.copy_from_host(*t);
        run(v);
      },
      [&g](const tensor& t) { return t.memory_space() == memory_space::host ? g.copy_from_host(t) : g.copy_on_device(t); });
}

/// The update rules the GPU applies in place (gpu_apply).
enum class optimizer { gradient_descent, momentum, adagrad, rms_prop, adam };

/// The GPU kernel of ApplyGradientDescent, ApplyMomentum, ApplyAdam, ApplyAdagrad, ApplyRMSProp.
template <optimizer O>
struct gpu_apply final : op_kernel {
  /// Variables the rule updates: the variable, then its slots.
  static constexpr int refs = O == optimizer::gradient_descent ? 1 : O == optimizer::momentum || O == optimizer::adagrad ? 2 : 3;
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_apply(const node& n)
      : t_(elem_of(n.output_dtype(0), n)),
        nesterov_(n.attrs().find("use_nesterov") && n.attr<bool>("use_nesterov")) {}
  void compute(kernel_context& ctx) const override {
    std::vector<std::shared_ptr<resource_variable>> held;
    std::vector<resource_variable*> vars;
    for (int i = 0; i < refs; ++i) {
      held.push_back(ctx.input_ref_shared(i));
      vars.push_back(held.back().get());
    }
    std::vector<tensor> in;  // the other inputs, on the device
    for (int i = refs; i < ctx.num_inputs(); ++i) in.push_back(device_input(ctx, i));
    const auto& g = gpu_of(ctx.device());
    const tensor& grad = O == optimizer::momentum ? in[1] : in.back();
    update_on_gpu(
        g, vars,
        [&](const std::vector<tensor*>& v) {
          const shape& s = v[0]->shape();
          for (int i = 1; i < refs; ++i)
            if (v[static_cast<std::size_t>(i)]->shape() != s)
              fail(error_code::invalid_argument, "slot ", i, " of shape ", v[static_cast<std::size_t>(i)]->shape(),
                   " does not match the variable's shape ", s);
          if (grad.shape() != s)
            fail(error_code::invalid_argument, "the gradient of shape ", grad.shape(), " does not match the variable's shape ", s);
          for (std::size_t i = 0; i < in.size(); ++i)
            if (&in[i] != &grad && in[i].num_elements() != 1)
              fail(error_code::invalid_argument, "hyperparameter input ", refs + static_cast<int>(i), " must be a scalar, got shape ",
                   in[i].shape());
        },
        [&](const std::vector<tensor*>& v) {
          const std::int64_t n = v[0]->num_elements();
          if constexpr (O == optimizer::gradient_descent)
            launch::apply_gradient_descent_op(t_, v[0]->raw_data(), in[0].raw_data(), grad.raw_data(), n, g.stream());
          else if constexpr (O == optimizer::momentum)
            launch::apply_momentum_op(t_, v[0]->raw_data(), v[1]->raw_data(), in[0].raw_data(), grad.raw_data(),
                                      in[2].raw_data(), nesterov_, n, g.stream());
          else if constexpr (O == optimizer::adagrad)
            launch::apply_adagrad_op(t_, v[0]->raw_data(), v[1]->raw_data(), in[0].raw_data(), grad.raw_data(), n, g.stream());
          else if constexpr (O == optimizer::rms_prop)
            launch::apply_rms_prop_op(t_, v[0]->raw_data(), v[1]->raw_data(), v[2]->raw_data(), in[0].raw_data(),
                                      in[1].raw_data(), in[2].raw_data(), in[3].raw_data(), grad.raw_data(), n, g.stream());
          else
            launch::apply_adam_op(t_, v[0]->raw_data(), v[1]->raw_data(), v[2]->raw_data(), in[0].raw_data(),
                                  in[1].raw_data(), in[2].raw_data(), in[3].raw_data(), in[4].raw_data(), in[5].raw_data(),
                                  grad.raw_data(), nesterov_, n, g.stream());
          launched(ctx.node().op().c_str());
        });
    ctx.set_output_ref(0, std::move(held[0]));
  }
 private:
  launch::elem t_;
  bool nesterov_;
};

/// Fails unless the values of `refs` (the node's first reference inputs) each have the
/// product's shape {m, n}, naming the variable: the fused updates' check (update_on_gpu).
inline void require_product_variables(const std::vector<resource_variable*>& refs, const std::vector<tensor*>& values,
                                      std::int64_t m, std::int64_t n) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i]->shape() != shape{m, n})
      fail(error_code::invalid_argument, "the product of shape ", shape{m, n}, " does not match variable '", refs[i]->name(),
           "' of shape ", values[i]->shape());
}

/// The GPU kernel of _FusedMatMulApplyGradientDescent (float32, bfloat16; a session's fold of
/// ApplyGradientDescent and the MatMul that alone gives its delta: graph/passes/fuse_matmul.hpp):
/// var = -alpha op(a) op(b) + var as one cuBLAS product into the variable, alpha and beta
/// read on the device (no wait for the learning rate); in bfloat16 the float sum rounded
/// once, as the CPU's. Copied first where a reader holds the variable's value (so a or b may
/// be the variable), shapes checked before anything is written, as ApplyGradientDescent.
struct gpu_fused_matmul_gradient_descent final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_fused_matmul_gradient_descent(const node& n)
      : t_(n.attr<dtype>("T")), ta_(n.attr<bool>("transpose_a")), tb_(n.attr<bool>("transpose_b")) {
    (void)cuda_type_of(t_);
  }
  void compute(kernel_context& ctx) const override {
    std::shared_ptr<resource_variable> var = ctx.input_ref_shared(0);
    const tensor alpha = device_input(ctx, 1), a = device_input(ctx, 2), b = device_input(ctx, 3);
    if (alpha.num_elements() != 1)
      fail(error_code::invalid_argument, "input 1 (alpha) must be a scalar, got shape ", alpha.shape());
    const product_dims d = matrix_product_dims(a.shape(), b.shape(), ta_, tb_);
    const std::int64_t m = d.m, k = d.k, n = d.n;  // plain names: the lambda below captures them
    const auto& g = gpu_of(ctx.device());
    update_on_gpu(
        g, {var.get()}, [&](const std::vector<tensor*>& v) { require_product_variables({var.get()}, v, m, n); },
        [&](const std::vector<tensor*>& v) {
          if (m == 0 || n == 0 || k == 0) return;  // a product of zeros moves nothing
          const tensor scalars(dtype::float32, shape{2}, g.get_allocator());  // -alpha, 1
          float* s = static_cast<float*>(scalars.raw_data());
          const current_device here(g.ordinal());
          launch::negated_rate_op(elem_of(t_, ctx.node()), alpha.raw_data(), s, g.stream());
          launched(ops::fused_matmul_gradient_descent_op);
          gemm_ex(g, t_, t_, ta_, tb_, m, n, k, a.raw_data(), a.shape()[1], b.raw_data(), b.shape()[1], v[0]->raw_data(), s,
                  s + 1, true);
        });
    ctx.set_output_ref(0, std::move(var));
  }
 private:
  dtype t_;
  bool ta_, tb_;
};

/// The GPU kernel of _FusedMatMulApplyAdam (a session's fold of mixed precision's float32
/// ApplyAdam, the Cast and the bfloat16 MatMul that give its gradient): the product's float
/// sums (cuBLAS, bfloat16 operands, a float32 result) are the gradient of ApplyAdam's kernel,
/// in the same node; not rounded to bfloat16, as the CPU's. Checks and copies as ApplyAdam.
struct gpu_fused_matmul_adam final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_fused_matmul_adam(const node& n)
      : ta_(n.attr<bool>("transpose_a")), tb_(n.attr<bool>("transpose_b")), nesterov_(n.attr<bool>("use_nesterov")) {}
  void compute(kernel_context& ctx) const override {
    constexpr int refs = 3, scalars = 6;  // var, m, v; beta1_power, beta2_power, lr, beta1, beta2, epsilon
    std::vector<std::shared_ptr<resource_variable>> held;
    std::vector<resource_variable*> vars;
    for (int i = 0; i < refs; ++i) vars.push_back(held.emplace_back(ctx.input_ref_shared(i)).get());
    std::vector<tensor> h;
    for (int i = refs; i < refs + scalars; ++i) {
      h.push_back(device_input(ctx, i));
      if (h.back().num_elements() != 1)
        fail(error_code::invalid_argument, "input ", i, " (a hyperparameter) must be a scalar, got shape ", h.back().shape());
    }
    const tensor a = device_input(ctx, refs + scalars), b = device_input(ctx, refs + scalars + 1);
    const product_dims d = matrix_product_dims(a.shape(), b.shape(), ta_, tb_);
    const std::int64_t m = d.m, k = d.k, n = d.n;  // plain names: the lambda below captures them
    const auto& g = gpu_of(ctx.device());
    update_on_gpu(
        g, vars, [&](const std::vector<tensor*>& v) { require_product_variables(vars, v, m, n); },
        [&](const std::vector<tensor*>& v) {
          if (m == 0 || n == 0) return;
          const current_device here(g.ordinal());
          tensor grad(dtype::float32, shape{m, n}, g.get_allocator());  // the product's float sums
          if (k == 0) {
            check(cudaMemsetAsync(grad.raw_data(), 0, grad.bytes(), g.stream()), "cudaMemsetAsync");
          } else {
            static constexpr float one = 1, zero = 0;
            gemm_ex(g, dtype::bfloat16, dtype::float32, ta_, tb_, m, n, k, a.raw_data(), a.shape()[1], b.raw_data(),
                    b.shape()[1], grad.raw_data(), &one, &zero, false);
          }
          launch::apply_adam_op(launch::elem::f32, v[0]->raw_data(), v[1]->raw_data(), v[2]->raw_data(), h[0].raw_data(),
                                h[1].raw_data(), h[2].raw_data(), h[3].raw_data(), h[4].raw_data(), h[5].raw_data(),
                                grad.raw_data(), nesterov_, m * n, g.stream());
          launched(ops::fused_matmul_adam_op);
        });
    ctx.set_output_ref(0, std::move(held[0]));
  }
 private:
  bool ta_, tb_, nesterov_;
};

/// The GPU kernel of AssignAdd (Add) and AssignSub: the variable updated in place by the delta
/// (copied first where a reader still holds its value), moved into device memory first where
/// it was in host memory; integers wrap, as on the CPU.
template <bool Add>
struct gpu_assign_update final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit gpu_assign_update(const node& n) : t_(arithmetic_elem_of(n.attr<dtype>("T"), n, launch::complex_binary(Add ? launch::binary::add : launch::binary::sub))) {}
  void compute(kernel_context& ctx) const override {
    auto var = ctx.input_ref_shared(0);
    const tensor delta = device_input(ctx, 1);
    const auto& g = gpu_of(ctx.device());
    update_on_gpu(
        g, {var.get()},
        [&](const std::vector<tensor*>& v) {
          if (v[0]->shape() != delta.shape())
            fail(error_code::invalid_argument, "value of shape ", delta.shape(), " does not match variable '", var->name(),
                 "' of shape ", v[0]->shape());
        },
        [&](const std::vector<tensor*>& v) {
          tensor& value = *v[0];
          const auto plan = plan_for({&value.shape(), &delta.shape()}, value.shape());
          launch::binary_op(Add ? launch::binary::add : launch::binary::sub, t_, value.raw_data(), delta.raw_data(),
                            value.raw_data(), value.num_elements(), plan, g.stream());
          launched(ctx.node().op().c_str());
        });
    ctx.set_output_ref(0, std::move(var));
  }
 private:
  launch::elem t_;
};

// ---- registration ----

/// Registers kernel class K for op on "GPU" devices with a type constraint; false when one was registered already.
template <class K>
bool register_gpu_kernel(std::string op, kernel_registry::type_constraint constraint = {}) {
  return kernel_registry::global().add(std::move(op), "GPU", std::move(constraint), &make_kernel<K>, refusal_of<K>());
}
/// register_gpu_kernel for op with attr `attr` set to each of the dtypes.
template <class K>
void register_gpu_kernel_for(const char* op, const char* attr, const std::vector<dtype>& types) {
  for (dtype t : types) register_gpu_kernel<K>(op, {attr, t});
}

/// Registers the op families these kernels belong to and every GPU kernel, once.
inline bool register_gpu_kernels() {
  static const bool done = [] {
    ops::register_math_ops();
    ops::register_array_ops();
    ops::register_matrix_ops();
    ops::register_nn_ops();
    ops::register_reduction_ops();
    ops::register_state_ops();
    ops::register_training_ops();
    ops::register_random_ops();
    const std::vector<dtype> floats = {dtype::float16, dtype::bfloat16, dtype::float32, dtype::float64};
    const std::vector<dtype> linalg_types = {dtype::float32, dtype::float64, dtype::complex64, dtype::complex128};
    const std::vector<dtype> signed_numbers = {dtype::float16, dtype::bfloat16, dtype::float32,
                                                             dtype::float64, dtype::int32, dtype::int64};
    const std::vector<dtype> numbers = {dtype::float16, dtype::bfloat16, dtype::float32, dtype::float64,
                                                      dtype::int32,   dtype::int64,    dtype::uint8};
    const std::vector<dtype> everything = {dtype::float16, dtype::bfloat16, dtype::float32, dtype::float64,
                                                         dtype::int32,   dtype::int64,    dtype::uint8,   dtype::boolean};
    // The kernels that move elements without computing with them (Select, Fill, ...): every
    // dtype but string.
    const std::vector<dtype> all_but_string = {dtype::float16, dtype::bfloat16, dtype::float32, dtype::float64, dtype::int8,
                                               dtype::int16,   dtype::int32,    dtype::int64,   dtype::uint8,   dtype::uint16,
                                               dtype::uint32,  dtype::uint64,   dtype::boolean, dtype::complex64, dtype::complex128};
    // The elementwise arithmetic's dtypes: these and complex64 and complex128.
    auto and_complex = [](std::vector<dtype> types) {
      types.insert(types.end(), {dtype::complex64, dtype::complex128});
      return types;
    };
    using U = launch::unary;
    using B = launch::binary;
    register_gpu_kernel<gpu_no_op>("NoOp");
    register_gpu_kernel<gpu_identity>("Identity");
    register_gpu_kernel<gpu_identity>("PlaceholderWithDefault");
    register_gpu_kernel<gpu_placeholder>("Placeholder");
    register_gpu_kernel<gpu_const>("Const");
    register_gpu_kernel<gpu_shape>("Shape");
    register_gpu_kernel<gpu_size>("Size");
    register_gpu_kernel<gpu_rank>("Rank");
    register_gpu_kernel<gpu_reduced_shape>("ReducedShape");
    register_gpu_kernel<gpu_reshape>("Reshape");
    register_gpu_kernel<cpu::variable_kernel>("Variable");
    register_gpu_kernel<with_host_inputs<cpu::accumulator_push_kernel, 0>>("AccumulatorPush");
    register_gpu_kernel<with_host_inputs<cpu::accumulator_pop_kernel, 0>>("AccumulatorPop");
    register_gpu_kernel<with_inputs_in<cpu::assign_kernel, memory_space::device, 1>>("Assign");
    register_gpu_kernel_for<gpu_fused_batch_norm>("FusedBatchNormV3", "T", floats);
    register_gpu_kernel_for<gpu_fused_batch_norm_grad>("FusedBatchNormGradV3", "T", floats);
    register_gpu_kernel_for<gpu_assign_update<true>>("AssignAdd", "T", and_complex(numbers));
    register_gpu_kernel_for<gpu_assign_update<false>>("AssignSub", "T", and_complex(numbers));
    register_gpu_kernel_for<gpu_unary<U::neg>>("Neg", "T", and_complex(signed_numbers));
    register_gpu_kernel_for<gpu_unary<U::abs>>("Abs", "T", signed_numbers);
    register_gpu_kernel_for<gpu_unary<U::square>>("Square", "T", and_complex(numbers));
    register_gpu_kernel_for<gpu_unary<U::relu>>("Relu", "T", numbers);
    register_gpu_kernel_for<gpu_unary<U::sqrt>>("Sqrt", "T", and_complex(floats));
    register_gpu_kernel_for<gpu_unary<U::rsqrt>>("Rsqrt", "T", and_complex(floats));
    register_gpu_kernel_for<gpu_unary<U::exp>>("Exp", "T", and_complex(floats));
    register_gpu_kernel_for<gpu_unary<U::log>>("Log", "T", and_complex(floats));
    register_gpu_kernel_for<gpu_unary<U::tanh>>("Tanh", "T", and_complex(floats));
    register_gpu_kernel_for<gpu_unary<U::sigmoid>>("Sigmoid", "T", and_complex(floats));
    register_gpu_kernel<gpu_unary<U::logical_not>>("LogicalNot");
    register_gpu_kernel_for<gpu_unary<U::sign>>("Sign", "T", signed_numbers);
    register_gpu_kernel_for<gpu_unary<U::sin>>("Sin", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::cos>>("Cos", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::reciprocal>>("Reciprocal", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::log1p>>("Log1p", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::expm1>>("Expm1", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::softplus>>("Softplus", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::erf>>("Erf", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::floor>>("Floor", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::ceil>>("Ceil", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::round>>("Round", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::elu>>("Elu", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::selu>>("Selu", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::relu6>>("Relu6", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::tan>>("Tan", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::asin>>("Asin", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::acos>>("Acos", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::atan>>("Atan", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::sinh>>("Sinh", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::cosh>>("Cosh", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::asinh>>("Asinh", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::acosh>>("Acosh", "T", floats);
    register_gpu_kernel_for<gpu_unary<U::atanh>>("Atanh", "T", floats);
    register_gpu_kernel_for<gpu_predicate<launch::predicate::is_nan>>("IsNan", "T", floats);
    register_gpu_kernel_for<gpu_predicate<launch::predicate::is_inf>>("IsInf", "T", floats);
    register_gpu_kernel_for<gpu_predicate<launch::predicate::is_finite>>("IsFinite", "T", floats);
    register_gpu_kernel_for<gpu_binary<B::add>>("Add", "T", and_complex(numbers));
    register_gpu_kernel_for<gpu_binary<B::sub>>("Sub", "T", and_complex(numbers));
    register_gpu_kernel_for<gpu_binary<B::mul>>("Mul", "T", and_complex(numbers));
    register_gpu_kernel_for<gpu_binary<B::div>>("Div", "T", and_complex(floats));  // integer division's check by zero is the CPU's
    register_gpu_kernel_for<gpu_binary<B::pow>>("Pow", "T", and_complex(floats));
    register_gpu_kernel_for<gpu_binary<B::maximum>>("Maximum", "T", numbers);
    register_gpu_kernel_for<gpu_binary<B::minimum>>("Minimum", "T", numbers);
    register_gpu_kernel_for<gpu_binary<B::squared_difference>>("SquaredDifference", "T", floats);
    register_gpu_kernel_for<gpu_binary<B::atan2>>("Atan2", "T", floats);
    register_gpu_kernel_for<gpu_binary<B::floor_div>>("FloorDiv", "T", floats);  // integers: the CPU's zero check
    register_gpu_kernel_for<gpu_binary<B::floor_mod>>("FloorMod", "T", floats);
    register_gpu_kernel_for<gpu_binary<B::relu_grad>>("ReluGrad", "T", numbers);
    register_gpu_kernel_for<gpu_binary<B::greater>>("Greater", "T", numbers);
    register_gpu_kernel_for<gpu_binary<B::greater_equal>>("GreaterEqual", "T", numbers);
    register_gpu_kernel_for<gpu_binary<B::less>>("Less", "T", numbers);
    register_gpu_kernel_for<gpu_binary<B::less_equal>>("LessEqual", "T", numbers);
    register_gpu_kernel_for<gpu_binary<B::equal>>("Equal", "T", and_complex(everything));
    register_gpu_kernel_for<gpu_binary<B::not_equal>>("NotEqual", "T", and_complex(everything));
    register_gpu_kernel<gpu_binary<B::logical_and>>("LogicalAnd");
    register_gpu_kernel<gpu_binary<B::logical_or>>("LogicalOr");
    register_gpu_kernel_for<gpu_select_v2>("SelectV2", "T", all_but_string);
    register_gpu_kernel_for<gpu_select>("Select", "T", all_but_string);
    register_gpu_kernel_for<gpu_cast>("Cast", "SrcT", all_but_string);
    register_gpu_kernel_for<gpu_fill>("Fill", "T", all_but_string);
    register_gpu_kernel_for<gpu_broadcast_to>("BroadcastTo", "T", all_but_string);
    register_gpu_kernel_for<gpu_reduce<launch::reduction::sum>>("Sum", "T", and_complex(numbers));
    register_gpu_kernel_for<gpu_reduce<launch::reduction::mean>>("Mean", "T", and_complex(numbers));
    register_gpu_kernel_for<gpu_scan<launch::reduction::sum>>("Cumsum", "T", and_complex(numbers));
    register_gpu_kernel_for<gpu_scan<launch::reduction::prod>>("Cumprod", "T", and_complex(numbers));
    register_gpu_kernel_for<gpu_reduce<launch::reduction::prod>>("Prod", "T", and_complex(numbers));
    register_gpu_kernel_for<gpu_reduce<launch::reduction::max>>("Max", "T", numbers);
    register_gpu_kernel_for<gpu_reduce<launch::reduction::min>>("Min", "T", numbers);
    register_gpu_kernel_for<gpu_arg_reduce<true>>("ArgMax", "T", numbers);
    register_gpu_kernel_for<gpu_arg_reduce<false>>("ArgMin", "T", numbers);
    register_gpu_kernel_for<gpu_matmul>("MatMul", "T", and_complex(floats));
    register_gpu_kernel_for<gpu_batch_matmul>("BatchMatMulV2", "T", and_complex(floats));
    register_gpu_kernel_for<gpu_matrix_inverse>("MatrixInverse", "T", linalg_types);
    register_gpu_kernel_for<gpu_matrix_determinant>("MatrixDeterminant", "T", linalg_types);
    register_gpu_kernel_for<gpu_fused_matmul_bias_add>(ops::fused_matmul_bias_add_op, "T", {dtype::float32, dtype::bfloat16});
    register_gpu_kernel_for<gpu_fused_matmul_relu_grad>(ops::fused_matmul_relu_grad_op, "T", {dtype::float32, dtype::bfloat16});
    register_gpu_kernel_for<gpu_bias_add>("BiasAdd", "T", floats);
    register_gpu_kernel_for<gpu_bias_add_grad>("BiasAddGrad", "T", floats);
    register_gpu_kernel_for<gpu_softmax<false>>("Softmax", "T", floats);
    register_gpu_kernel_for<gpu_softmax<true>>("LogSoftmax", "T", floats);
    register_gpu_kernel_for<gpu_sparse_xent>("SparseSoftmaxCrossEntropyWithLogits", "T", floats);
    register_gpu_kernel<gpu_gather>("GatherV2");
    register_gpu_kernel<gpu_transpose>("Transpose");
    register_gpu_kernel<gpu_concat>("ConcatV2");
    register_gpu_kernel<gpu_gather_nd>("GatherNd");
    const std::vector<dtype> addable = {dtype::float16, dtype::bfloat16, dtype::float32, dtype::float64, dtype::int32, dtype::int64};
    register_gpu_kernel_for<gpu_scatter_nd<launch::nd_mode::scatter_add, true>>("ScatterNd", "T", and_complex(addable));
    register_gpu_kernel_for<gpu_scatter_nd<launch::nd_mode::scatter_add, false>>("TensorScatterAdd", "T", and_complex(addable));
    register_gpu_kernel_for<gpu_scatter_nd<launch::nd_mode::scatter_update, false>>("TensorScatterUpdate", "T", all_but_string);
    register_gpu_kernel_for<gpu_sum_to_shape>("SumToShape", "T", and_complex(numbers));
    register_gpu_kernel<gpu_split>("Split");
    register_gpu_kernel<gpu_slice>("Slice");
    register_gpu_kernel<gpu_pad>("Pad");
    register_gpu_kernel<gpu_tile>("Tile");
    register_gpu_kernel<gpu_pack>("Pack");
    register_gpu_kernel<gpu_unpack>("Unpack");
    register_gpu_kernel<gpu_reverse>("ReverseV2");
    register_gpu_kernel<gpu_strided_slice>("StridedSlice");
    register_gpu_kernel_for<gpu_strided_slice_grad>("StridedSliceGrad", "T", all_but_string);
    register_gpu_kernel<gpu_split_v>("SplitV");
    register_gpu_kernel_for<gpu_leaky_relu<false>>("LeakyRelu", "T", floats);
    register_gpu_kernel_for<gpu_leaky_relu<true>>("LeakyReluGrad", "T", floats);
    register_gpu_kernel_for<gpu_clip_by_value>("ClipByValue", "T", numbers);
    register_gpu_kernel<gpu_identity>("StopGradient");
    register_gpu_kernel<gpu_identity>("PreventGradient");
    register_gpu_kernel<cpu::ensure_shape_kernel>("EnsureShape");
    register_gpu_kernel_for<gpu_snapshot>("Snapshot", "T", all_but_string);
    register_gpu_kernel<with_host_inputs<cpu::expand_dims_kernel, 1>>("ExpandDims");
    register_gpu_kernel<cpu::squeeze_kernel>("Squeeze");
    register_gpu_kernel_for<gpu_range<std::int32_t>>("Range", "Tidx", {dtype::int32});
    register_gpu_kernel_for<gpu_range<std::int64_t>>("Range", "Tidx", {dtype::int64});
    register_gpu_kernel_for<gpu_range<float>>("Range", "Tidx", {dtype::float32});
    register_gpu_kernel_for<gpu_range<double>>("Range", "Tidx", {dtype::float64});
    register_gpu_kernel_for<gpu_add_n>("AddN", "T", and_complex(numbers));
    register_gpu_kernel_for<gpu_fill_like<false>>("ZerosLike", "T", all_but_string);
    register_gpu_kernel_for<gpu_fill_like<true>>("OnesLike", "T", all_but_string);
    register_gpu_kernel_for<gpu_unsorted_segment_sum>("UnsortedSegmentSum", "T", and_complex(addable));
    register_gpu_kernel_for<gpu_pool<true>>("MaxPool", "T", floats);
    register_gpu_kernel_for<gpu_pool<false>>("AvgPool", "T", floats);
    register_gpu_kernel_for<gpu_max_pool_grad<false>>("MaxPoolGrad", "T", floats);
    register_gpu_kernel_for<gpu_max_pool_grad<true>>("MaxPoolGradGrad", "T", floats);
    register_gpu_kernel_for<gpu_max_pool_grad<false>>(ops::fused_max_pool_grad_relu_grad_op, "T", floats);
    register_gpu_kernel_for<gpu_avg_pool_grad>("AvgPoolGrad", "T", floats);
    register_gpu_kernel_for<gpu_conv<conv_pass::forward>>("Conv2D", "T", floats);
    register_gpu_kernel_for<gpu_conv<conv_pass::forward>>(ops::fused_conv2d_bias_add_op, "T", {dtype::float32, dtype::bfloat16});
    register_gpu_kernel_for<gpu_conv<conv_pass::backprop_input>>("Conv2DBackpropInput", "T", floats);
    register_gpu_kernel_for<gpu_conv<conv_pass::backprop_filter>>("Conv2DBackpropFilter", "T", floats);
    register_gpu_kernel<gpu_random<launch::distribution::uniform>>("RandomUniform");
    register_gpu_kernel<gpu_random<launch::distribution::normal>>("RandomStandardNormal");
    register_gpu_kernel<gpu_random<launch::distribution::truncated_normal>>("TruncatedNormal");
    register_gpu_kernel_for<gpu_dropout>("Dropout", "T", floats);
    register_gpu_kernel_for<gpu_apply<optimizer::gradient_descent>>("ApplyGradientDescent", "T", floats);
    register_gpu_kernel_for<gpu_apply<optimizer::momentum>>("ApplyMomentum", "T", floats);
    register_gpu_kernel_for<gpu_apply<optimizer::adam>>("ApplyAdam", "T", floats);
    register_gpu_kernel_for<gpu_apply<optimizer::adagrad>>("ApplyAdagrad", "T", floats);
    register_gpu_kernel_for<gpu_apply<optimizer::rms_prop>>("ApplyRMSProp", "T", floats);
    register_gpu_kernel_for<gpu_fused_matmul_gradient_descent>(ops::fused_matmul_gradient_descent_op, "T",
                                                               {dtype::float32, dtype::bfloat16});
    register_gpu_kernel_for<gpu_fused_matmul_adam>(ops::fused_matmul_adam_op, "T", {dtype::float32});
    register_gpu_kernel<gpu_one_hot>("OneHot");
    register_gpu_kernel_for<gpu_softmax_xent>("SoftmaxCrossEntropyWithLogits", "T", floats);
    register_gpu_kernel_for<gpu_l2_loss>("L2Loss", "T", floats);
    return true;
  }();
  return done;
}

}  // namespace weft::cuda
