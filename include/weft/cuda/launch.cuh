// The definitions of weft/cuda/launch.hpp's entry points: CUDA kernels of weft's own and
// CUB's reductions. Compile it in ONE .cu file of a program, with nvcc (the CMake target
// weft_cuda_kernels of the weft::cuda component does; tests/support/cuda_kernels.cu is the
// build tree's). It includes nothing of weft but launch.hpp (DESIGN.md §2: nvcc does not
// parse the DSL's headers).
//
// Arithmetic on float16 and bfloat16 is done in float32 (loaded, computed, rounded back), as
// TensorFlow's GPU kernels and Eigen's do; sums of them accumulate in float32, of float32
// in float32, of float64 in float64.
#pragma once

#ifndef __CUDACC__
#error "weft/cuda/launch.cuh is compiled by nvcc: include it from one .cu file (other files include weft/cuda/launch.hpp)"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/std/complex>
#include <cuda/std/limits>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#include <weft/core/activation_constants.hpp>
#include <weft/cuda/launch.hpp>

namespace weft::cuda::launch {
namespace kernels {

// ---- element types: what each stores and what it computes in ----
template <class T> struct compute { using type = T; };
template <> struct compute<__half> { using type = float; };
template <> struct compute<__nv_bfloat16> { using type = float; };
template <class T> using compute_t = typename compute<T>::type;

template <class T> __device__ __forceinline__ compute_t<T> load(T x) { return static_cast<compute_t<T>>(x); }
template <> __device__ __forceinline__ float load(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float load(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T, class C> __device__ __forceinline__ T store(C x) { return static_cast<T>(x); }
template <> __device__ __forceinline__ __half store<__half, float>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16, float>(float x) { return __float2bfloat16_rn(x); }

// Blocks of 256 threads, at most 4096 blocks: grid-stride loops cover the rest.
constexpr int threads = 256;
inline unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : b > 4096 ? 4096 : b);
}
#define WEFT_GRID_LOOP(i, n) \
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < (n); i += std::int64_t{blockDim.x} * gridDim.x)

// Calls f with a value of each element type.
template <class F>
void dispatch(elem t, F&& f) {
  switch (t) {
    case elem::f16: return f(__half{});
    case elem::bf16: return f(__nv_bfloat16{});
    case elem::f32: return f(float{});
    case elem::f64: return f(double{});
    case elem::i32: return f(std::int32_t{});
    case elem::i64: return f(std::int64_t{});
    case elem::u8: return f(std::uint8_t{});
    case elem::boolean: return f(bool{});
    case elem::c64:
    case elem::c128: return;  // complex: unary_op and binary_op only (dispatch_arithmetic)
  }
}
// As dispatch, and the complex types as ::cuda::std::complex (std::complex's layout), for
// the elementwise arithmetic.
template <class F>
void dispatch_arithmetic(elem t, F&& f) {
  if (t == elem::c64) return f(::cuda::std::complex<float>{});
  if (t == elem::c128) return f(::cuda::std::complex<double>{});
  dispatch(t, static_cast<F&&>(f));
}
template <class T> inline constexpr bool is_float = !std::is_integral_v<T>;
template <class T> inline constexpr bool is_std_complex = false;
template <class R> inline constexpr bool is_std_complex<::cuda::std::complex<R>> = true;

// ---- unary ----
template <unary Op, class C>
__device__ __forceinline__ C apply_unary(C x) {
  if constexpr (Op == unary::neg) return -x;
  else if constexpr (Op == unary::abs) {
    if constexpr (std::is_unsigned_v<C>) return x;
    else return x < C(0) ? -x : x;
  }
  else if constexpr (Op == unary::square) return x * x;
  else if constexpr (Op == unary::sqrt) return sqrt(x);
  else if constexpr (Op == unary::rsqrt) return C(1) / sqrt(x);
  else if constexpr (Op == unary::exp) return exp(x);
  else if constexpr (Op == unary::log) return log(x);
  else if constexpr (Op == unary::tanh) return tanh(x);
  else if constexpr (Op == unary::sigmoid) return C(1) / (C(1) + exp(-x));
  else if constexpr (Op == unary::relu) return x > C(0) ? x : C(0);
  else if constexpr (Op == unary::logical_not) return !x;
  else if constexpr (Op == unary::sin) return sin(x);
  else if constexpr (Op == unary::cos) return cos(x);
  else if constexpr (Op == unary::reciprocal) return C(1) / x;
  else if constexpr (Op == unary::log1p) return log1p(x);
  else if constexpr (Op == unary::expm1) return expm1(x);
  else if constexpr (Op == unary::softplus) return (x > C(0) ? x : C(0)) + log1p(exp(-fabs(x)));  // the CPU's form
  else if constexpr (Op == unary::erf) return erf(x);
  else if constexpr (Op == unary::floor) return floor(x);
  else if constexpr (Op == unary::ceil) return ceil(x);
  else if constexpr (Op == unary::round) return rint(x);  // half to even
  else if constexpr (Op == unary::elu) return x > C(0) ? x : expm1(x);
  else if constexpr (Op == unary::selu)
    return x > C(0) ? C(::weft::selu_scale) * x : C(::weft::selu_scale * ::weft::selu_alpha) * expm1(x);
  else if constexpr (Op == unary::tan) return tan(x);
  else if constexpr (Op == unary::asin) return asin(x);
  else if constexpr (Op == unary::acos) return acos(x);
  else if constexpr (Op == unary::atan) return atan(x);
  else if constexpr (Op == unary::sinh) return sinh(x);
  else if constexpr (Op == unary::cosh) return cosh(x);
  else if constexpr (Op == unary::asinh) return asinh(x);
  else if constexpr (Op == unary::acosh) return acosh(x);
  else if constexpr (Op == unary::atanh) return atanh(x);
  else if constexpr (Op == unary::relu6) return x != x ? x : x > C(0) ? (x < C(6) ? x : C(6)) : C(0);  // NaN of NaN
  else if constexpr (std::is_unsigned_v<C>) return C(x > C(0));  // sign
  else if constexpr (!std::is_integral_v<C>) return x != x ? x : C((x > C(0)) - (x < C(0)));  // NaN of NaN
  else return C((x > C(0)) - (x < C(0)));
}

template <predicate Op, class T>
__global__ void predicate_kernel(const T* x, bool* y, std::int64_t n) {
  WEFT_GRID_LOOP(i, n) {
    const auto v = load(x[i]);
    if constexpr (Op == predicate::is_nan) y[i] = isnan(v);
    else if constexpr (Op == predicate::is_inf) y[i] = isinf(v);
    else y[i] = isfinite(v);
  }
}

template <unary Op, class T>
__global__ void unary_kernel(const T* x, T* y, std::int64_t n) {
  WEFT_GRID_LOOP(i, n) y[i] = store<T>(apply_unary<Op>(load(x[i])));
}

template <unary Op>
void unary_typed(elem t, const void* x, void* y, std::int64_t n, cudaStream_t s) {
  dispatch_arithmetic(t, [&](auto v) {
    using T = decltype(v);
    constexpr bool float_only = Op == unary::sqrt || Op == unary::rsqrt || Op == unary::exp || Op == unary::log ||
                                Op == unary::tanh || Op == unary::sigmoid || Op >= unary::sin;
    if constexpr (is_std_complex<T> && !complex_unary(Op)) return;
    else if constexpr (std::is_same_v<T, bool> != (Op == unary::logical_not)) return;
    else if constexpr (float_only && !is_float<T>) return;
    else unary_kernel<Op, T><<<blocks_for(n), threads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), n);
  });
}

// ---- binary, broadcast ----
template <binary Op, class C>
__device__ __forceinline__ auto apply_binary(C a, C b) {
  if constexpr (Op == binary::add) return a + b;
  else if constexpr (Op == binary::sub) return a - b;
  else if constexpr (Op == binary::mul) return a * b;
  else if constexpr (Op == binary::div) {
    if constexpr (std::is_integral_v<C>) return b == C(0) ? C(0) : a / b;  // the CPU kernel's check is a host error
    else return a / b;
  } else if constexpr (Op == binary::pow) {
    if constexpr (std::is_integral_v<C>) {
      C r = 1, base = a;
      for (C e = b; e > 0; e >>= 1, base *= base)
        if (e & 1) r *= base;
      if constexpr (std::is_signed_v<C>) return b < 0 ? C(0) : r;
      else return r;
    } else {
      return C(pow(a, b));
    }
  } else if constexpr (Op == binary::maximum) return a < b ? b : a;  // std::max's, as the CPU's (a NaN first stays)
  else if constexpr (Op == binary::minimum) return b < a ? b : a;
  else if constexpr (Op == binary::squared_difference) return (a - b) * (a - b);
  else if constexpr (Op == binary::atan2) return atan2(a, b);
  else if constexpr (Op == binary::floor_div) return floor(a / b);
  else if constexpr (Op == binary::floor_mod) {
    const C r = fmod(a, b);
    return r != C(0) && ((r < C(0)) != (b < C(0))) ? r + b : r;
  }
  else if constexpr (Op == binary::relu_grad) return b > C(0) ? a : C(0);
  else if constexpr (Op == binary::tanh_grad) return b * (C(1) - a * a);
  else if constexpr (Op == binary::sigmoid_grad) return b * a * (C(1) - a);
  else if constexpr (Op == binary::greater) return a > b;
  else if constexpr (Op == binary::greater_equal) return a >= b;
  else if constexpr (Op == binary::less) return a < b;
  else if constexpr (Op == binary::less_equal) return a <= b;
  else if constexpr (Op == binary::equal) return a == b;
  else if constexpr (Op == binary::not_equal) return a != b;
  else if constexpr (Op == binary::logical_and) return a && b;
  else return a || b;  // logical_or
}

template <binary Op, class T, class R>
__global__ void binary_kernel(const T* a, const T* b, R* z, std::int64_t n, broadcast_plan p) {
  if (p.same_shape) {
    WEFT_GRID_LOOP(i, n) z[i] = store<R>(apply_binary<Op>(load(a[i]), load(b[i])));
  } else if (p.kind[0] == operand_kind::direct && p.kind[1] == operand_kind::scalar) {  // x op scalar: read once
    const auto bv = load(b[0]);
    WEFT_GRID_LOOP(i, n) z[i] = store<R>(apply_binary<Op>(load(a[i]), bv));
  } else if (p.kind[0] == operand_kind::scalar && p.kind[1] == operand_kind::direct) {
    const auto av = load(a[0]);
    WEFT_GRID_LOOP(i, n) z[i] = store<R>(apply_binary<Op>(av, load(b[i])));
  } else {
    WEFT_GRID_LOOP(i, n) z[i] = store<R>(apply_binary<Op>(load(a[offset_in(p, 0, i)]), load(b[offset_in(p, 1, i)])));
  }
}

template <binary Op>
void binary_typed(elem t, const void* a, const void* b, void* z, std::int64_t n, const broadcast_plan& p, cudaStream_t s) {
  dispatch_arithmetic(t, [&](auto v) {
    using T = decltype(v);
    constexpr bool logical = Op == binary::logical_and || Op == binary::logical_or;
    constexpr bool float_only = Op == binary::tanh_grad || Op == binary::sigmoid_grad || Op == binary::atan2 ||
                                Op == binary::floor_div || Op == binary::floor_mod;
    constexpr bool any_type = Op == binary::equal || Op == binary::not_equal;
    if constexpr (is_std_complex<T> && !complex_binary(Op)) return;
    else if constexpr (!any_type && std::is_same_v<T, bool> != logical) return;
    else if constexpr (float_only && !is_float<T>) return;
    else {
      using R = std::conditional_t<returns_bool(Op), bool, T>;
      binary_kernel<Op, T, R><<<blocks_for(n), threads, 0, s>>>(static_cast<const T*>(a), static_cast<const T*>(b),
                                                                 static_cast<R*>(z), n, p);
    }
  });
}

template <class T>
__global__ void select_kernel(const bool* c, const T* a, const T* b, T* out, std::int64_t n, broadcast_plan p) {
  if (p.same_shape) {
    WEFT_GRID_LOOP(i, n) out[i] = c[i] ? a[i] : b[i];
  } else {
    WEFT_GRID_LOOP(i, n) out[i] = c[offset_in(p, 0, i)] ? a[offset_in(p, 1, i)] : b[offset_in(p, 2, i)];
  }
}

// Complex numbers as std::complex lays them out.
template <class R>
struct alignas(2 * sizeof(R)) complex_of {
  R re, im;
};
template <class T> inline constexpr bool is_complex = false;
template <class R> inline constexpr bool is_complex<complex_of<R>> = true;

// One element converted as the CPU's Cast converts it (kernels/cpu/convert.hpp).
template <class To, class From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (is_complex<From>) {
    if constexpr (std::is_same_v<To, bool>) return v.re != 0 || v.im != 0;
    else if constexpr (is_complex<To>) return To{static_cast<decltype(To::re)>(v.re), static_cast<decltype(To::re)>(v.im)};
    else return convert<To>(v.re);  // TensorFlow keeps the real part
  } else if constexpr (is_complex<To>) {
    return To{static_cast<decltype(To::re)>(static_cast<double>(load(v))), 0};
  } else if constexpr (std::is_same_v<To, bool>) {
    return load(v) != compute_t<From>(0);
  } else if constexpr (std::is_integral_v<To> && !std::is_integral_v<From>) {
    // NaN gives 0, out-of-range values saturate.
    const double d = static_cast<double>(load(v));
    if (isnan(d)) return To(0);
    if (d <= static_cast<double>(::cuda::std::numeric_limits<To>::lowest())) return ::cuda::std::numeric_limits<To>::lowest();
    if (d >= static_cast<double>(::cuda::std::numeric_limits<To>::max())) return ::cuda::std::numeric_limits<To>::max();
    return static_cast<To>(d);
  } else if constexpr (std::is_integral_v<From> && !std::is_same_v<To, compute_t<To>>) {
    return store<To>(static_cast<float>(v));  // an integer to a 16-bit float: through float
  } else {
    return store<To>(static_cast<compute_t<To>>(load(v)));  // integers wrap modulo 2^bits
  }
}

template <class From, class To>
__global__ void cast_kernel(const From* x, To* y, std::int64_t n) {
  WEFT_GRID_LOOP(i, n) y[i] = convert<To>(x[i]);
}

// Calls f with a value of each type Cast converts.
template <class F>
void dispatch_cast(cast_elem t, F&& f) {
  switch (t) {
    case cast_elem::f16: return f(__half{});
    case cast_elem::bf16: return f(__nv_bfloat16{});
    case cast_elem::f32: return f(float{});
    case cast_elem::f64: return f(double{});
    case cast_elem::i8: return f(std::int8_t{});
    case cast_elem::i16: return f(std::int16_t{});
    case cast_elem::i32: return f(std::int32_t{});
    case cast_elem::i64: return f(std::int64_t{});
    case cast_elem::u8: return f(std::uint8_t{});
    case cast_elem::u16: return f(std::uint16_t{});
    case cast_elem::u32: return f(std::uint32_t{});
    case cast_elem::u64: return f(std::uint64_t{});
    case cast_elem::boolean: return f(bool{});
    case cast_elem::c64: return f(complex_of<float>{});
    case cast_elem::c128: return f(complex_of<double>{});
  }
}

template <class T>
__global__ void leaky_relu_kernel(const T* x, const T* g, T* y, std::int64_t n, compute_t<T> alpha) {
  WEFT_GRID_LOOP(i, n) {
    const compute_t<T> f = load(x[i]), v = g ? load(g[i]) : f;
    y[i] = store<T>(f > compute_t<T>(0) ? v : alpha * v);
  }
}

template <class T>
__global__ void fill_kernel(const T* value, T* y, std::int64_t n) {
  const T v = *value;
  WEFT_GRID_LOOP(i, n) y[i] = v;
}

template <class T>
__global__ void broadcast_kernel(const T* x, T* y, std::int64_t n, broadcast_plan p) {
  WEFT_GRID_LOOP(i, n) y[i] = x[offset_in(p, 0, i)];
}

// Records bad input in an error slot (launch.hpp): the value, then the flag, each visible to
// the host once the kernel is done. Plain stores (atomics on mapped host memory are not
// portable over PCIe): when threads race, the slot holds one of their values, all bad.
__device__ __forceinline__ void report(std::int64_t* slot, std::int64_t value) {
  volatile std::int64_t* s = slot;
  if (s[0] == 0) {
    s[1] = value;
    __threadfence_system();
    s[0] = 1;
  }
}

// ---- reductions over the middle dim of [outer, reduce, inner] ----
template <reduction Op, class A>
__device__ __forceinline__ A combine(A a, A b) {
  if constexpr (std::is_integral_v<A> && Op != reduction::max && Op != reduction::min) {
    // Integer sums and products wrap modulo 2^64, computed unsigned (no signed overflow).
    const auto ua = static_cast<std::uint64_t>(a), ub = static_cast<std::uint64_t>(b);
    return static_cast<A>(Op == reduction::prod ? ua * ub : ua + ub);
  } else if constexpr (Op == reduction::sum || Op == reduction::mean || Op == reduction::l2) return a + b;
  else if constexpr (Op == reduction::prod) return a * b;
  else if constexpr (Op == reduction::max) return b > a ? b : a;
  else return b < a ? b : a;
}
// What an element adds: itself, or its square (l2).
template <reduction Op, class A>
__device__ __forceinline__ A term(A v) {
  if constexpr (Op == reduction::l2) return v * v;
  else return v;
}
template <reduction Op, class A>
__device__ __forceinline__ A identity() {
  if constexpr (Op == reduction::sum || Op == reduction::mean || Op == reduction::l2) return A(0);
  else if constexpr (Op == reduction::prod) return A(1);
  else if constexpr (Op == reduction::max) {
    if constexpr (std::is_integral_v<A>) return ::cuda::std::numeric_limits<A>::lowest();
    else return -INFINITY;
  } else {
    if constexpr (std::is_integral_v<A>) return ::cuda::std::numeric_limits<A>::max();
    else return INFINITY;
  }
}
// The mean of `count` elements summing to `sum`: NaN of none (0 for integers).
template <class A>
__device__ __forceinline__ A mean_of(A sum, std::int64_t count) {
  if constexpr (is_std_complex<A>) return sum / A(static_cast<typename A::value_type>(count));  // none: 0 / 0, as the CPU
  if (count == 0) {
    if constexpr (std::is_integral_v<A>) return A(0);
    else return A(NAN);
  }
  return sum / A(count);
}
// What a reduction of T accumulates in, as the CPU kernels: float for the 16-bit floats;
// 64 bits for integer sums, products and means (a sum comes out as if it wrapped in T, a
// mean is the exact mean rounded toward zero); T itself otherwise.
template <reduction Op, class T>
using accumulate_t = std::conditional_t<std::is_integral_v<T> && Op != reduction::max && Op != reduction::min,
                                        std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>, compute_t<T>>;

// Shared memory of `threads` accumulators, as raw storage (a __shared__ array of a class
// with a constructor, as complex numbers, is not allowed).
#define WEFT_SHARED_ACCUMULATORS(A, name)                           \
  __shared__ alignas(A) unsigned char name##_raw[threads * sizeof(A)]; \
  A* name = reinterpret_cast<A*>(name##_raw)

// One block per output row of the inner == 1 case: its threads stride over the row, then
// combine in shared memory.
template <reduction Op, class T>
__global__ void reduce_rows_kernel(const T* x, T* y, std::int64_t outer, std::int64_t reduce) {
  using A = accumulate_t<Op, T>;
  WEFT_SHARED_ACCUMULATORS(A, partial);
  for (std::int64_t row = blockIdx.x; row < outer; row += gridDim.x) {
    A acc = identity<Op, A>();
    for (std::int64_t r = threadIdx.x; r < reduce; r += blockDim.x) acc = combine<Op>(acc, term<Op>(A(load(x[row * reduce + r]))));
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int half = threads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) partial[threadIdx.x] = combine<Op>(partial[threadIdx.x], partial[threadIdx.x + half]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      A r = partial[0];
      if constexpr (Op == reduction::mean) r = mean_of(r, reduce);
      if constexpr (Op == reduction::l2) r = r / A(2);
      y[row] = store<T>(compute_t<T>(r));
    }
    __syncthreads();
  }
}

// A thread per output element of the inner > 1 case: consecutive threads read consecutive
// elements of each row.
template <reduction Op, class T>
__global__ void reduce_columns_kernel(const T* x, T* y, std::int64_t outer, std::int64_t reduce, std::int64_t inner) {
  using A = accumulate_t<Op, T>;
  WEFT_GRID_LOOP(i, outer * inner) {
    const std::int64_t o = i / inner, c = i - o * inner;
    const T* p = x + o * reduce * inner + c;
    A acc = identity<Op, A>();
    for (std::int64_t r = 0; r < reduce; ++r) acc = combine<Op>(acc, term<Op>(A(load(p[r * inner]))));
    if constexpr (Op == reduction::mean) acc = mean_of(acc, reduce);
    if constexpr (Op == reduction::l2) acc = acc / A(2);
    y[i] = store<T>(compute_t<T>(acc));
  }
}

// A long reduced run against few outputs, in two kernels: the run split into `splits` parts
// of `chunk` elements, each part's partial result (in the accumulator type) into partial[o,
// s, i]; then each output joins its parts. Columns (inner > 1): a thread per (o, s, i),
// consecutive threads on consecutive columns. Rows (inner == 1): a block per (o, s).
template <reduction Op, class T>
__global__ void reduce_split_columns_kernel(const T* x, accumulate_t<Op, T>* partial, std::int64_t outer, std::int64_t reduce,
                                            std::int64_t inner, std::int64_t splits, std::int64_t chunk) {
  using A = accumulate_t<Op, T>;
  WEFT_GRID_LOOP(i, outer * splits * inner) {
    const std::int64_t c = i % inner, s = (i / inner) % splits, o = i / (inner * splits);
    const std::int64_t r0 = s * chunk, r1 = r0 + chunk < reduce ? r0 + chunk : reduce;
    const T* p = x + o * reduce * inner + c;
    A acc = identity<Op, A>();
    for (std::int64_t r = r0; r < r1; ++r) acc = combine<Op>(acc, term<Op>(A(load(p[r * inner]))));
    partial[i] = acc;
  }
}
template <reduction Op, class T>
__global__ void reduce_split_rows_kernel(const T* x, accumulate_t<Op, T>* partial, std::int64_t outer, std::int64_t reduce,
                                         std::int64_t splits, std::int64_t chunk) {
  using A = accumulate_t<Op, T>;
  WEFT_SHARED_ACCUMULATORS(A, shared);
  for (std::int64_t part = blockIdx.x; part < outer * splits; part += gridDim.x) {
    const std::int64_t o = part / splits, s = part - o * splits;
    const std::int64_t r0 = s * chunk, r1 = r0 + chunk < reduce ? r0 + chunk : reduce;
    A acc = identity<Op, A>();
    for (std::int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) acc = combine<Op>(acc, term<Op>(A(load(x[o * reduce + r]))));
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (int half = threads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) shared[threadIdx.x] = combine<Op>(shared[threadIdx.x], shared[threadIdx.x + half]);
      __syncthreads();
    }
    if (threadIdx.x == 0) partial[part] = shared[0];
    __syncthreads();
  }
}
template <reduction Op, class T>
__global__ void reduce_join_kernel(const accumulate_t<Op, T>* partial, T* y, std::int64_t outer, std::int64_t splits,
                                   std::int64_t inner, std::int64_t reduce) {
  using A = accumulate_t<Op, T>;
  WEFT_GRID_LOOP(i, outer * inner) {
    const std::int64_t o = i / inner, c = i - o * inner;
    A acc = identity<Op, A>();
    for (std::int64_t s = 0; s < splits; ++s) acc = combine<Op>(acc, partial[(o * splits + s) * inner + c]);
    if constexpr (Op == reduction::mean) acc = mean_of(acc, reduce);
    if constexpr (Op == reduction::l2) acc = acc / A(2);
    y[i] = store<T>(compute_t<T>(acc));
  }
}

template <reduction Op, class T>
__global__ void scan_kernel(const T* x, T* y, std::int64_t outer, std::int64_t n, std::int64_t inner, bool exclusive, bool reverse) {
  using A = accumulate_t<Op, T>;
  WEFT_GRID_LOOP(line, outer * inner) {
    const std::int64_t o = line / inner, i = line - o * inner;
    A acc = identity<Op, A>();
    for (std::int64_t step = 0; step < n; ++step) {
      const std::int64_t at = (o * n + (reverse ? n - 1 - step : step)) * inner + i;
      if (exclusive) y[at] = store<T>(compute_t<T>(acc));
      acc = combine<Op>(acc, A(load(x[at])));
      if (!exclusive) y[at] = store<T>(compute_t<T>(acc));
    }
  }
}

template <class T, class I>
__global__ void arg_reduce_kernel(bool max, const T* x, I* y, std::int64_t outer, std::int64_t n, std::int64_t inner) {
  WEFT_GRID_LOOP(i, outer * inner) {
    const std::int64_t o = i / inner, c = i - o * inner;
    const T* p = x + o * n * inner + c;
    std::int64_t best = 0;
    auto best_value = load(p[0]);
    for (std::int64_t r = 1; r < n; ++r) {
      const auto v = load(p[r * inner]);
      if (max ? v > best_value : v < best_value) best = r, best_value = v;
    }
    y[i] = static_cast<I>(best);
  }
}

// ---- nn ----
template <class T>
__global__ void bias_add_kernel(const T* x, const T* bias, T* y, std::int64_t n, std::int64_t channels) {
  WEFT_GRID_LOOP(i, n) y[i] = store<T>(load(x[i]) + load(bias[i % channels]));
}

template <class T>
__global__ void channel_affine_kernel(const T* x0, const T* a0, const T* x1, const T* a1, const T* b, T* y, std::int64_t n,
                                      std::int64_t channels) {
  if (x1) {
    WEFT_GRID_LOOP(i, n) {
      const std::int64_t k = i % channels;
      y[i] = store<T>(load(x0[i]) * load(a0[k]) + load(x1[i]) * load(a1[k]) + load(b[k]));
    }
  } else {
    WEFT_GRID_LOOP(i, n) {
      const std::int64_t k = i % channels;
      y[i] = store<T>(load(x0[i]) * load(a0[k]) + load(b[k]));
    }
  }
}

// Batch normalization's per-channel values, in double as the CPU's kernel computes them.
template <class T>
__global__ void batch_norm_forward_kernel(batch_norm_forward f, std::int64_t channels) {
  const auto at = [](const void* p, std::int64_t k) { return static_cast<double>(load(static_cast<const T*>(p)[k])); };
  const auto put = [](void* p, std::int64_t k, double v) { static_cast<T*>(p)[k] = store<T>(static_cast<compute_t<T>>(v)); };
  WEFT_GRID_LOOP(k, channels) {
    const double mean = f.mean ? at(f.mean, k) : NAN, variance = f.variance ? at(f.variance, k) : NAN;
    if (f.training) {
      const double n = static_cast<double>(f.rows), bessel = f.rows > 1 ? n / (n - 1) : 1.0;
      const double old_mean = f.old_mean ? at(f.old_mean, k) : 0.0, old_variance = f.old_variance ? at(f.old_variance, k) : 0.0;
      put(f.batch_mean, k, (1 - f.factor) * old_mean + f.factor * mean);
      put(f.batch_variance, k, (1 - f.factor) * old_variance + f.factor * variance * bessel);
    } else {
      put(f.batch_mean, k, mean);
      put(f.batch_variance, k, variance);
    }
    put(f.saved_mean, k, mean);
    put(f.saved_variance, k, variance);
    const double a = at(f.scale, k) / sqrt(variance + f.epsilon);
    put(f.a, k, a);
    put(f.b, k, at(f.offset, k) - mean * a);
  }
}

template <class T>
__global__ void batch_norm_backward_kernel(batch_norm_backward b, std::int64_t channels) {
  const auto at = [](const void* p, std::int64_t k) { return static_cast<double>(load(static_cast<const T*>(p)[k])); };
  const auto put = [](void* p, std::int64_t k, double v) { static_cast<T*>(p)[k] = store<T>(static_cast<compute_t<T>>(v)); };
  WEFT_GRID_LOOP(k, channels) {
    const double rstd = 1 / sqrt(at(b.variance, k) + b.epsilon), mean = at(b.mean, k);
    const double sum_dy = b.sum_dy ? at(b.sum_dy, k) : 0.0;
    const double sum_dy_xhat = b.sum_dy_centered ? at(b.sum_dy_centered, k) * rstd : 0.0;
    const double g = at(b.scale, k) * rstd, n = static_cast<double>(b.rows);
    const double mean_dy = b.training && b.rows ? sum_dy / n : 0.0;
    const double mean_dy_xhat = b.training && b.rows ? sum_dy_xhat / n : 0.0;
    const double q = -g * mean_dy_xhat * rstd;  // xhat = x rstd - mean rstd
    put(b.offset_backprop, k, sum_dy);
    put(b.scale_backprop, k, sum_dy_xhat);
    put(b.p, k, g);
    put(b.q, k, q);
    put(b.s, k, -g * mean_dy - q * mean);
  }
}

// One block per row: the row's max, then the sum of exponentials, then the outputs.
// They compute in compute_t<T>: float for the 16-bit floats and float32, double for float64.
template <class T, class C = compute_t<T>>
__device__ void row_max_and_sum(const T* row, std::int64_t classes, C* shared, C& max_out, C& sum_out) {
  C m = -INFINITY;
  for (std::int64_t c = threadIdx.x; c < classes; c += blockDim.x) m = fmax(m, load(row[c]));
  shared[threadIdx.x] = m;
  __syncthreads();
  for (int half = threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] = fmax(shared[threadIdx.x], shared[threadIdx.x + half]);
    __syncthreads();
  }
  m = shared[0];
  __syncthreads();
  C s = 0;
  for (std::int64_t c = threadIdx.x; c < classes; c += blockDim.x) s += exp(load(row[c]) - m);
  shared[threadIdx.x] = s;
  __syncthreads();
  for (int half = threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  s = shared[0];
  __syncthreads();
  max_out = m;
  sum_out = s;
}

template <class T>
__global__ void softmax_kernel(bool log_softmax, const T* logits, T* y, std::int64_t rows, std::int64_t classes) {
  using C = compute_t<T>;
  __shared__ C shared[threads];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    C m, s;
    row_max_and_sum(logits + r * classes, classes, shared, m, s);
    const C log_sum = log(s);
    for (std::int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const C shifted = load(logits[r * classes + c]) - m;
      y[r * classes + c] = store<T>(C(log_softmax ? shifted - log_sum : exp(shifted) / s));
    }
  }
}

template <class T, class L>
__global__ void sparse_xent_kernel(const T* logits, const L* labels, T* loss, T* backprop, std::int64_t rows,
                                   std::int64_t classes, std::int64_t* error) {
  using C = compute_t<T>;
  __shared__ C shared[threads];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = logits + r * classes;
    C m, s;
    row_max_and_sum(row, classes, shared, m, s);
    const std::int64_t label = static_cast<std::int64_t>(labels[r]);
    const bool bad = label < 0 || label >= classes;
    const C log_sum = log(s);
    for (std::int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const C shifted = load(row[c]) - m;
      const C p = exp(shifted) / s;
      backprop[r * classes + c] = store<T>(C(bad ? C(NAN) : p - (c == label ? C(1) : C(0))));
    }
    if (threadIdx.x == 0) {
      loss[r] = store<T>(C(bad ? C(NAN) : log_sum - (load(row[label]) - m)));
      if (bad) report(error, label);
    }
  }
}

template <class T>
__global__ void softmax_xent_kernel(const T* logits, const T* labels, T* loss, T* backprop, std::int64_t rows,
                                    std::int64_t classes) {
  using C = compute_t<T>;
  __shared__ C shared[threads];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = logits + r * classes;
    C m, s;
    row_max_and_sum(row, classes, shared, m, s);
    const C log_sum = log(s);
    C part = 0;
    for (std::int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const C shifted = load(row[c]) - m, label = load(labels[r * classes + c]);
      part += label * (log_sum - shifted);
      backprop[r * classes + c] = store<T>(C(exp(shifted) / s - label));
    }
    shared[threadIdx.x] = part;
    __syncthreads();
    for (int half = threads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) loss[r] = store<T>(C(shared[0]));
    __syncthreads();
  }
}

template <class U, class I>
__global__ void one_hot_kernel(const I* indices, const U* on, const U* off, U* out, std::int64_t outer, std::int64_t depth,
                               std::int64_t inner) {
  const U yes = *on, no = *off;
  WEFT_GRID_LOOP(i, outer * depth * inner) {
    const std::int64_t b = i % inner, k = (i / inner) % depth, a = i / (inner * depth);
    out[i] = static_cast<std::int64_t>(indices[a * inner + b]) == k ? yes : no;
  }
}

// ---- training ----
template <class T>
__global__ void gradient_descent_kernel(T* var, const T* lr, const T* grad, std::int64_t n) {
  const auto a = load(*lr);
  WEFT_GRID_LOOP(i, n) var[i] = store<T>(load(var[i]) - a * load(grad[i]));
}

template <class T>
__global__ void negated_rate_kernel(const T* lr, float* out) {
  out[0] = -static_cast<float>(load(*lr));
  out[1] = 1;
}

template <class T>
__global__ void momentum_kernel(T* var, T* accum, const T* lr, const T* grad, const T* momentum, bool nesterov,
                                std::int64_t n) {
  const auto a = load(*lr), mu = load(*momentum);
  WEFT_GRID_LOOP(i, n) {
    const auto g = load(grad[i]);
    const auto acc = mu * load(accum[i]) + g;
    accum[i] = store<T>(acc);
    var[i] = store<T>(load(var[i]) - (nesterov ? a * (g + mu * acc) : a * acc));
  }
}

template <class T>
__global__ void adagrad_kernel(T* var, T* accum, const T* lr, const T* grad, std::int64_t n) {
  using C = compute_t<T>;
  const C a = load(*lr);
  WEFT_GRID_LOOP(i, n) {
    const C g = load(grad[i]);
    const C acc = load(accum[i]) + g * g;
    accum[i] = store<T>(acc);
    var[i] = store<T>(load(var[i]) - a * g / C(sqrt(acc)));
  }
}

template <class T>
__global__ void rms_prop_kernel(T* var, T* ms, T* mom, const T* lr, const T* rho, const T* momentum, const T* epsilon,
                                const T* grad, std::int64_t n) {
  using C = compute_t<T>;
  const C a = load(*lr), r = load(*rho), mu = load(*momentum), eps = load(*epsilon);
  WEFT_GRID_LOOP(i, n) {
    const C g = load(grad[i]);
    const C m = r * load(ms[i]) + (C(1) - r) * g * g;
    const C v = mu * load(mom[i]) + a * g / C(sqrt(m + eps));
    ms[i] = store<T>(m);
    mom[i] = store<T>(v);
    var[i] = store<T>(load(var[i]) - v);
  }
}

template <class T>
__global__ void adam_kernel(T* var, T* m, T* v, const T* beta1_power, const T* beta2_power, const T* lr, const T* beta1,
                            const T* beta2, const T* epsilon, const T* grad, bool nesterov, std::int64_t n) {
  using C = compute_t<T>;
  const C b1 = load(*beta1), b2 = load(*beta2), eps = load(*epsilon);
  const C alpha = load(*lr) * C(sqrt(C(1) - load(*beta2_power))) / (C(1) - load(*beta1_power));
  WEFT_GRID_LOOP(i, n) {
    const C g = load(grad[i]);
    const C mi = b1 * load(m[i]) + (C(1) - b1) * g;
    const C vi = b2 * load(v[i]) + (C(1) - b2) * g * g;
    m[i] = store<T>(mi);
    v[i] = store<T>(vi);
    const C step = nesterov ? b1 * mi + (C(1) - b1) * g : mi;
    var[i] = store<T>(load(var[i]) - alpha * step / (C(sqrt(vi)) + eps));
  }
}

// ---- random: core/random_stream.hpp's stream, on the device ----
__device__ __forceinline__ std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
__device__ __forceinline__ double uniform01(std::uint64_t key, std::uint64_t counter) {
  return static_cast<double>(mix64(key ^ mix64(counter)) >> 11) * 0x1.0p-53;
}
__device__ __forceinline__ double normal01(std::uint64_t key, std::uint64_t c) {
  const double u1 = uniform01(key, 2 * c), u2 = uniform01(key, 2 * c + 1);
  return sqrt(-2.0 * log1p(-u1)) * cos(6.283185307179586 * u2);
}

template <distribution D, class T>
__global__ void random_kernel(std::uint64_t key, std::uint64_t base, std::uint64_t per, T* out, std::int64_t n) {
  WEFT_GRID_LOOP(i, n) {
    const std::uint64_t c = base + static_cast<std::uint64_t>(i) * per;
    double v;
    if constexpr (D == distribution::uniform) {
      v = uniform01(key, c);
    } else if constexpr (D == distribution::normal) {
      v = normal01(key, c);
    } else {
      v = normal01(key, c);
      for (std::uint64_t k = 1; fabs(v) >= 2.0 && k < per; ++k) v = normal01(key, c + k);
      if (fabs(v) >= 2.0) v = 0;
    }
    T t = store<T>(static_cast<compute_t<T>>(v));
    if constexpr (D == distribution::uniform)
      if (!(static_cast<double>(load(t)) < 1.0)) t = store<T>(compute_t<T>(0));  // rounding to 1 in narrow types
    out[i] = t;
  }
}

template <class T>
__global__ void dropout_kernel(std::uint64_t key, std::uint64_t base, const T* x, const T* rate_at, T* out, T* mask,
                               std::int64_t n, std::int64_t* error) {
  using C = compute_t<T>;
  const C rate = load(*rate_at);
  const bool bad = !(rate >= C(0) && rate < C(1));
  if (bad && blockIdx.x == 0 && threadIdx.x == 0) {
    const double r = static_cast<double>(rate);
    long long bits;
    memcpy(&bits, &r, sizeof bits);
    report(error, bits);
  }
  const C scale = C(1) / (C(1) - rate);
  WEFT_GRID_LOOP(i, n) {
    if (bad) {
      mask[i] = out[i] = store<T>(C(NAN));
      continue;
    }
    const bool keep = uniform01(key, base + static_cast<std::uint64_t>(i)) >= static_cast<double>(rate);
    const C m = keep ? scale : C(0);
    mask[i] = store<T>(m);
    out[i] = store<T>(load(x[i]) * m);
  }
}

// ---- boxes, tiles, segment sums ----
template <class U>
__global__ void copy_box_kernel(const U* src, U* dst, std::int64_t n, box_plan p) {
  WEFT_GRID_LOOP(i, n) {
    std::int64_t rest = i, s = p.src_offset, d = p.dst_offset;
    for (int k = p.rank - 1; k >= 0; --k) {
      const std::int64_t q = rest / p.dims[k], at = rest - q * p.dims[k];
      s += at * p.src_stride[k];
      d += at * p.dst_stride[k];
      rest = q;
    }
    dst[d] = src[s];
  }
}

template <class U>
__global__ void tile_kernel(const U* x, U* y, std::int64_t n, tile_plan p) {
  WEFT_GRID_LOOP(i, n) {
    std::int64_t rest = i, off = 0, stride = 1;
    for (int k = p.rank - 1; k >= 0; --k) {
      const std::int64_t q = rest / p.out_dims[k], at = rest - q * p.out_dims[k];
      off += (at % p.in_dims[k]) * stride;
      stride *= p.in_dims[k];
      rest = q;
    }
    y[i] = x[off];
  }
}

// Calls f with an unsigned type of `bytes` bytes.
// Sixteen bytes moved as one (complex128's elements).
struct alignas(16) bytes16 {
  std::uint64_t lo, hi;
};

template <class F>
void by_size(int bytes, F&& f) {
  switch (bytes) {
    case 1: return f(std::uint8_t{});
    case 2: return f(std::uint16_t{});
    case 4: return f(std::uint32_t{});
    case 8: return f(std::uint64_t{});
    default: return f(bytes16{});  // complex128
  }
}

template <class T> __device__ __forceinline__ void add_at(T* p, T v) { atomicAdd(p, v); }
template <> __device__ __forceinline__ void add_at(std::int64_t* p, std::int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));  // two's complement wraps alike
}
template <> __device__ __forceinline__ void add_at(std::uint8_t*, std::uint8_t) {}  // not registered
template <> __device__ __forceinline__ void add_at(bool*, bool) {}                  // not registered
// A complex number's parts, each added atomically (no 8- or 16-byte atomic add of pairs).
template <class R> __device__ __forceinline__ void add_at(::cuda::std::complex<R>* p, ::cuda::std::complex<R> v) {
  R* parts = reinterpret_cast<R*>(p);
  atomicAdd(parts, v.real());
  atomicAdd(parts + 1, v.imag());
}
// The element types scatter adds compute in (dispatch_arithmetic's); other types only move.
template <class T>
inline constexpr bool addable = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, __half> ||
                                std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, std::int32_t> ||
                                std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint8_t> || std::is_same_v<T, bool> ||
                                is_std_complex<T>;

template <class T, class I>
__global__ void segment_sum_kernel(const T* data, const I* ids, T* out, std::int64_t rows, std::int64_t row,
                                   std::int64_t segments, std::int64_t* error) {
  // Rows of no elements still have their ids checked, as on the CPU.
  const std::int64_t step = row ? row : 1;
  WEFT_GRID_LOOP(i, rows * step) {
    const std::int64_t j = i / step, c = i - j * step;
    const std::int64_t id = static_cast<std::int64_t>(ids[j]);
    if (id < 0 || id >= segments) {
      if (c == 0) report(error, id);
      continue;
    }
    if (row) add_at(out + id * row + c, data[i]);
  }
}

template <class T, class I>
__global__ void nd_kernel(nd_mode mode, const I* indices, nd_plan p, const T* src, T* dst, std::int64_t* error) {
  // Slices of no elements still have their tuples checked, as on the CPU.
  const std::int64_t step = p.slice ? p.slice : 1;
  WEFT_GRID_LOOP(i, p.tuples * step) {
    const std::int64_t j = i / step, c = i - j * step;
    std::int64_t row = 0;
    bool bad = false;
    for (int m = 0; m < p.k; ++m) {
      const std::int64_t v = static_cast<std::int64_t>(indices[j * p.k + m]);
      if (v < 0 || v >= p.dims[m]) {
        bad = true;
        if (c == 0) report(error, v);
        break;
      }
      row = row * p.dims[m] + v;
    }
    if (p.slice == 0) continue;
    if (mode == nd_mode::gather) dst[i] = bad ? T{} : src[row * p.slice + c];
    else if (bad) continue;
    else if (mode == nd_mode::scatter_add) {
      if constexpr (addable<T>) add_at(dst + row * p.slice + c, src[i]);
    }
    else dst[row * p.slice + c] = src[i];
  }
}

// ---- pooling ----
// The valid part [y0, y1) x [x0, x1) of output position (y, x)'s window.
struct span {
  std::int64_t y0, y1, x0, x1;
};
__device__ __forceinline__ span span_of(const pool_geometry& g, std::int64_t y, std::int64_t x) {
  const std::int64_t t = y * g.sh - g.pad_top, l = x * g.sw - g.pad_left;
  return {t > 0 ? t : 0, t + g.kh < g.h ? t + g.kh : g.h, l > 0 ? l : 0, l + g.kw < g.w ? l + g.kw : g.w};
}

template <bool Max, class T>
__global__ void pool_kernel(const T* x, T* y, pool_geometry g) {
  using C = compute_t<T>;
  WEFT_GRID_LOOP(i, g.n * g.oh * g.ow * g.c) {
    const std::int64_t ch = i % g.c, r = i / g.c, ox = r % g.ow, oy = (r / g.ow) % g.oh, img = r / (g.ow * g.oh);
    const span s = span_of(g, oy, ox);
    C acc = Max ? C(-INFINITY) : C(0);
    for (std::int64_t iy = s.y0; iy < s.y1; ++iy)
      for (std::int64_t ix = s.x0; ix < s.x1; ++ix) {
        const C v = load(x[((img * g.h + iy) * g.w + ix) * g.c + ch]);
        if constexpr (Max) acc = v > acc ? v : acc;
        else acc += v;
      }
    if constexpr (!Max) acc /= C((s.y1 - s.y0) * (s.x1 - s.x0));
    y[i] = store<T>(acc);
  }
}

// The output windows that contain input row iy: [first, last] along one dim.
__device__ __forceinline__ void windows_of(std::int64_t i, std::int64_t k, std::int64_t stride, std::int64_t pad,
                                           std::int64_t out, std::int64_t& first, std::int64_t& last) {
  // Window o covers [o * stride - pad, o * stride - pad + k).
  const std::int64_t hi = i + pad, lo = hi - k + 1;
  first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  last = hi / stride;
  if (last > out - 1) last = out - 1;
}

template <class T>
__global__ void max_pool_grad_kernel(const T* x, const T* grad, T* dx, pool_geometry g) {
  using C = compute_t<T>;
  WEFT_GRID_LOOP(i, g.n * g.h * g.w * g.c) {
    const std::int64_t ch = i % g.c, r = i / g.c, ix = r % g.w, iy = (r / g.w) % g.h, img = r / (g.w * g.h);
    std::int64_t y0, y1, x0, x1;
    windows_of(iy, g.kh, g.sh, g.pad_top, g.oh, y0, y1);
    windows_of(ix, g.kw, g.sw, g.pad_left, g.ow, x0, x1);
    C sum = C(0);
    for (std::int64_t oy = y0; oy <= y1; ++oy)
      for (std::int64_t ox = x0; ox <= x1; ++ox) {
        // The window's first maximum (strict >).
        const span s = span_of(g, oy, ox);
        std::int64_t best_y = s.y0, best_x = s.x0;
        C best = load(x[((img * g.h + s.y0) * g.w + s.x0) * g.c + ch]);
        for (std::int64_t wy = s.y0; wy < s.y1; ++wy)
          for (std::int64_t wx = s.x0; wx < s.x1; ++wx) {
            const C v = load(x[((img * g.h + wy) * g.w + wx) * g.c + ch]);
            if (v > best) best = v, best_y = wy, best_x = wx;
          }
        if (best_y == iy && best_x == ix) sum += load(grad[((img * g.oh + oy) * g.ow + ox) * g.c + ch]);
      }
    dx[i] = store<T>(sum);
  }
}

template <class T>
__global__ void max_pool_grad_grad_kernel(const T* x, const T* grad, T* out, pool_geometry g) {
  using C = compute_t<T>;
  WEFT_GRID_LOOP(i, g.n * g.oh * g.ow * g.c) {
    const std::int64_t ch = i % g.c, r = i / g.c, ox = r % g.ow, oy = (r / g.ow) % g.oh, img = r / (g.ow * g.oh);
    const span s = span_of(g, oy, ox);
    if (s.y0 >= s.y1 || s.x0 >= s.x1) {  // wholly in the padding: no maximum
      out[i] = store<T>(C(0));
      continue;
    }
    std::int64_t best_at = ((img * g.h + s.y0) * g.w + s.x0) * g.c + ch;
    C best = load(x[best_at]);
    for (std::int64_t wy = s.y0; wy < s.y1; ++wy)
      for (std::int64_t wx = s.x0; wx < s.x1; ++wx) {
        const std::int64_t at = ((img * g.h + wy) * g.w + wx) * g.c + ch;
        const C v = load(x[at]);
        if (v > best) best = v, best_at = at;  // the first maximum (strict >)
      }
    out[i] = grad[best_at];
  }
}

template <class T>
__global__ void avg_pool_grad_kernel(const T* grad, T* dx, pool_geometry g) {
  using C = compute_t<T>;
  WEFT_GRID_LOOP(i, g.n * g.h * g.w * g.c) {
    const std::int64_t ch = i % g.c, r = i / g.c, ix = r % g.w, iy = (r / g.w) % g.h, img = r / (g.w * g.h);
    std::int64_t y0, y1, x0, x1;
    windows_of(iy, g.kh, g.sh, g.pad_top, g.oh, y0, y1);
    windows_of(ix, g.kw, g.sw, g.pad_left, g.ow, x0, x1);
    C sum = C(0);
    for (std::int64_t oy = y0; oy <= y1; ++oy)
      for (std::int64_t ox = x0; ox <= x1; ++ox) {
        const span s = span_of(g, oy, ox);
        const C scale = C(1) / C((s.y1 - s.y0) * (s.x1 - s.x0));
        sum += load(grad[((img * g.oh + oy) * g.ow + ox) * g.c + ch]) * scale;
      }
    dx[i] = store<T>(sum);
  }
}

// ---- gather ----
template <class U, class I>
__global__ void gather_rows_kernel(const U* params, const I* indices, U* out, std::int64_t outer, std::int64_t n,
                                   std::int64_t rows, std::int64_t units, std::int64_t* error) {
  // Where params or out hold nothing the indices are still checked, as on the CPU.
  const std::int64_t step = units && outer ? units : 1, blocks = outer ? outer : 1;
  WEFT_GRID_LOOP(i, blocks * n * step) {
    const std::int64_t o = i / (n * step), rest = i - o * n * step;
    const std::int64_t k = rest / step, b = rest - k * step;
    const std::int64_t row = static_cast<std::int64_t>(indices[k]);
    const bool bad = row < 0 || row >= rows;
    if (bad && o == 0 && b == 0) report(error, row);
    if (units && outer) out[i] = bad ? U(0) : params[(o * rows + row) * units + b];
  }
}


// ---- linear algebra: around cuBLAS's batched LU ----
template <class R> __device__ __forceinline__ R conjugate(R x) { return x; }
template <class R> __device__ __forceinline__ complex_of<R> conjugate(complex_of<R> x) { return {x.re, -x.im}; }
template <class R> __device__ __forceinline__ R times(R a, R b) { return a * b; }
template <class R> __device__ __forceinline__ complex_of<R> times(complex_of<R> a, complex_of<R> b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
template <class R> __device__ __forceinline__ R negated(R x) { return -x; }
template <class R> __device__ __forceinline__ complex_of<R> negated(complex_of<R> x) { return {-x.re, -x.im}; }
template <class R> __device__ __forceinline__ R one_of(R) { return R(1); }
template <class R> __device__ __forceinline__ complex_of<R> one_of(complex_of<R>) { return {R(1), R(0)}; }

template <class F>
void dispatch_linalg(linalg_elem t, F&& f) {
  switch (t) {
    case linalg_elem::f32: return f(float{});
    case linalg_elem::f64: return f(double{});
    case linalg_elem::c64: return f(complex_of<float>{});
    case linalg_elem::c128: return f(complex_of<double>{});
  }
}

__global__ void batch_pointers_kernel(const char* x, std::int64_t x_bytes, const char* y, std::int64_t y_bytes, char* out,
                                      std::int64_t out_bytes, broadcast_plan p, void** pointers, std::int64_t batch) {
  WEFT_GRID_LOOP(b, batch) {
    pointers[b] = const_cast<char*>(x + offset_in(p, 0, b) * x_bytes);
    pointers[batch + b] = const_cast<char*>(y + offset_in(p, 1, b) * y_bytes);
    pointers[2 * batch + b] = out + b * out_bytes;
  }
}

__global__ void pointer_array_kernel(char* base, std::int64_t step, void** pointers, std::int64_t count) {
  WEFT_GRID_LOOP(b, count) pointers[b] = base + b * step;
}

// y[b, i, j] = conj(x[b, j, i]).
template <class T>
__global__ void adjoint_kernel(const T* x, T* y, std::int64_t batch, std::int64_t n) {
  WEFT_GRID_LOOP(e, batch * n * n) {
    const std::int64_t b = e / (n * n), r = e - b * n * n, i = r / n, j = r - i * n;
    y[e] = conjugate(x[(b * n + j) * n + i]);
  }
}

// A thread a matrix: U's diagonal multiplied in order, the sign flipped per interchange.
template <class T>
__global__ void lu_determinant_kernel(const T* lu, const int* pivots, T* det, std::int64_t batch, std::int64_t n) {
  WEFT_GRID_LOOP(b, batch) {
    T d = one_of(T{});
    bool odd = false;
    for (std::int64_t i = 0; i < n; ++i) {
      d = times(d, lu[(b * n + i) * n + i]);
      odd ^= pivots[b * n + i] != i + 1;
    }
    det[b] = odd ? negated(d) : d;
  }
}

// Whether a pivot makes its matrix singular: 0 or NaN (!(|x| > 0), the CPU's test).
template <class R> __device__ __forceinline__ bool singular_pivot(R x) { return !(x > R(0) || x < R(0)); }
template <class R> __device__ __forceinline__ bool singular_pivot(complex_of<R> x) {
  return x.re != x.re || x.im != x.im || (x.re == R(0) && x.im == R(0));
}

template <class T>
__global__ void lu_singular_kernel(const T* lu, std::int64_t batch, std::int64_t n, std::int64_t* error) {
  WEFT_GRID_LOOP(e, batch * n) {
    const std::int64_t b = e / n, i = e - b * n;
    if (singular_pivot(lu[(b * n + i) * n + i])) report(error, b);
  }
}

}  // namespace kernels

// ---- the entry points ----

void predicate_op(predicate op, elem t, const void* x, bool* y, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  using namespace kernels;
  dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (is_float<T>) {
      const T* in = static_cast<const T*>(x);
      if (op == predicate::is_nan) predicate_kernel<predicate::is_nan, T><<<blocks_for(n), threads, 0, s>>>(in, y, n);
      if (op == predicate::is_inf) predicate_kernel<predicate::is_inf, T><<<blocks_for(n), threads, 0, s>>>(in, y, n);
      if (op == predicate::is_finite) predicate_kernel<predicate::is_finite, T><<<blocks_for(n), threads, 0, s>>>(in, y, n);
    }
  });
}

void unary_op(unary op, elem t, const void* x, void* y, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  using namespace kernels;
  switch (op) {
#define WEFT_UNARY(name) \
  case unary::name: return unary_typed<unary::name>(t, x, y, n, s);
    WEFT_UNARY(neg) WEFT_UNARY(abs) WEFT_UNARY(square) WEFT_UNARY(sqrt) WEFT_UNARY(rsqrt) WEFT_UNARY(exp)
    WEFT_UNARY(log) WEFT_UNARY(tanh) WEFT_UNARY(sigmoid) WEFT_UNARY(relu) WEFT_UNARY(logical_not) WEFT_UNARY(sign)
    WEFT_UNARY(sin) WEFT_UNARY(cos) WEFT_UNARY(reciprocal) WEFT_UNARY(log1p) WEFT_UNARY(expm1) WEFT_UNARY(softplus)
    WEFT_UNARY(erf) WEFT_UNARY(floor) WEFT_UNARY(ceil) WEFT_UNARY(round) WEFT_UNARY(elu) WEFT_UNARY(selu) WEFT_UNARY(relu6)
    WEFT_UNARY(tan) WEFT_UNARY(asin) WEFT_UNARY(acos) WEFT_UNARY(atan) WEFT_UNARY(sinh) WEFT_UNARY(cosh) WEFT_UNARY(asinh) WEFT_UNARY(acosh) WEFT_UNARY(atanh)
#undef WEFT_UNARY
  }
}

void binary_op(binary op, elem t, const void* a, const void* b, void* z, std::int64_t n, const broadcast_plan& p,
               cudaStream_t s) {
  if (n <= 0) return;
  using namespace kernels;
  switch (op) {
#define WEFT_BINARY(name) \
  case binary::name: return binary_typed<binary::name>(t, a, b, z, n, p, s);
    WEFT_BINARY(add) WEFT_BINARY(sub) WEFT_BINARY(mul) WEFT_BINARY(div) WEFT_BINARY(pow) WEFT_BINARY(maximum)
    WEFT_BINARY(minimum) WEFT_BINARY(squared_difference) WEFT_BINARY(atan2) WEFT_BINARY(floor_div) WEFT_BINARY(floor_mod) WEFT_BINARY(relu_grad) WEFT_BINARY(tanh_grad)
    WEFT_BINARY(sigmoid_grad) WEFT_BINARY(greater) WEFT_BINARY(greater_equal) WEFT_BINARY(less)
    WEFT_BINARY(less_equal) WEFT_BINARY(equal) WEFT_BINARY(not_equal) WEFT_BINARY(logical_and) WEFT_BINARY(logical_or)
#undef WEFT_BINARY
  }
}

void select_op(int element_bytes, const bool* cond, const void* a, const void* b, void* out, std::int64_t n,
               const broadcast_plan& p, cudaStream_t s) {
  if (n <= 0) return;
  kernels::by_size(element_bytes, [&](auto v) {
    using T = decltype(v);
    kernels::select_kernel<T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
        cond, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), n, p);
  });
}

void cast_op(cast_elem from, cast_elem to, const void* x, void* y, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  kernels::dispatch_cast(from, [&](auto f) {
    kernels::dispatch_cast(to, [&](auto g) {
      using From = decltype(f);
      using To = decltype(g);
      kernels::cast_kernel<From, To><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(static_cast<const From*>(x),
                                                                                         static_cast<To*>(y), n);
    });
  });
}

void leaky_relu_op(elem t, double alpha, const void* x, const void* g, void* y, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (kernels::is_float<T>) {
      using C = kernels::compute_t<T>;
      const C a = static_cast<C>(static_cast<T>(alpha));  // rounded to T first, as the CPU's
      kernels::leaky_relu_kernel<T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          static_cast<const T*>(x), static_cast<const T*>(g), static_cast<T*>(y), n, a);
    }
  });
}

void fill_op(int element_bytes, const void* value, void* y, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  kernels::by_size(element_bytes, [&](auto v) {
    using T = decltype(v);
    kernels::fill_kernel<T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(static_cast<const T*>(value), static_cast<T*>(y), n);
  });
}

void broadcast_op(int element_bytes, const void* x, void* y, std::int64_t n, const broadcast_plan& p, cudaStream_t s) {
  if (n <= 0) return;
  kernels::by_size(element_bytes, [&](auto v) {
    using T = decltype(v);
    kernels::broadcast_kernel<T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(static_cast<const T*>(x),
                                                                                     static_cast<T*>(y), n, p);
  });
}

void reduce_op(reduction op, elem t, const void* x, void* y, std::int64_t outer, std::int64_t reduce, std::int64_t inner,
               void* scratch, cudaStream_t s) {
  if (outer * inner <= 0) return;
  using namespace kernels;
  const std::int64_t splits = reduce_splits(outer, reduce, inner);
  auto run = [&](auto op_tag) {
    constexpr reduction Op = decltype(op_tag)::value;
    dispatch_arithmetic(t, [&](auto v) {
      using T = decltype(v);
      using A = accumulate_t<Op, T>;
      if constexpr (std::is_same_v<T, bool>) return;
      else if constexpr (is_std_complex<T> && !complex_reduction(Op)) return;
      else if (splits > 1 && scratch) {
        A* partial = static_cast<A*>(scratch);
        const std::int64_t chunk = (reduce + splits - 1) / splits;
        if (inner == 1)
          reduce_split_rows_kernel<Op, T><<<blocks_for(outer * splits * threads), threads, 0, s>>>(
              static_cast<const T*>(x), partial, outer, reduce, splits, chunk);
        else
          reduce_split_columns_kernel<Op, T><<<blocks_for(outer * splits * inner), threads, 0, s>>>(
              static_cast<const T*>(x), partial, outer, reduce, inner, splits, chunk);
        reduce_join_kernel<Op, T><<<blocks_for(outer * inner), threads, 0, s>>>(partial, static_cast<T*>(y), outer, splits, inner,
                                                                                 reduce);
      } else if (inner == 1)
        reduce_rows_kernel<Op, T><<<blocks_for(outer * threads), threads, 0, s>>>(static_cast<const T*>(x),
                                                                                  static_cast<T*>(y), outer, reduce);
      else
        reduce_columns_kernel<Op, T><<<blocks_for(outer * inner), threads, 0, s>>>(
            static_cast<const T*>(x), static_cast<T*>(y), outer, reduce, inner);
    });
  };
  switch (op) {
    case reduction::sum: return run(std::integral_constant<reduction, reduction::sum>{});
    case reduction::mean: return run(std::integral_constant<reduction, reduction::mean>{});
    case reduction::max: return run(std::integral_constant<reduction, reduction::max>{});
    case reduction::min: return run(std::integral_constant<reduction, reduction::min>{});
    case reduction::prod: return run(std::integral_constant<reduction, reduction::prod>{});
    case reduction::l2: return run(std::integral_constant<reduction, reduction::l2>{});
  }
}

void scan_op(reduction op, elem t, const void* x, void* y, std::int64_t outer, std::int64_t n, std::int64_t inner, bool exclusive,
             bool reverse, cudaStream_t s) {
  if (outer * inner <= 0 || n <= 0) return;
  auto run = [&](auto op_tag) {
    constexpr reduction Op = decltype(op_tag)::value;
    kernels::dispatch_arithmetic(t, [&](auto v) {
      using T = decltype(v);
      if constexpr (std::is_same_v<T, bool>) return;
      else
        kernels::scan_kernel<Op, T><<<kernels::blocks_for(outer * inner), kernels::threads, 0, s>>>(
            static_cast<const T*>(x), static_cast<T*>(y), outer, n, inner, exclusive, reverse);
    });
  };
  if (op == reduction::prod) run(std::integral_constant<reduction, reduction::prod>{});
  else run(std::integral_constant<reduction, reduction::sum>{});
}

void arg_reduce_op(bool max, elem t, const void* x, void* y, bool int64_out, std::int64_t outer, std::int64_t n,
                   std::int64_t inner, cudaStream_t s) {
  if (outer * inner <= 0 || n <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, bool>) return;
    else if (int64_out)
      kernels::arg_reduce_kernel<T, std::int64_t><<<kernels::blocks_for(outer * inner), kernels::threads, 0, s>>>(
          max, static_cast<const T*>(x), static_cast<std::int64_t*>(y), outer, n, inner);
    else
      kernels::arg_reduce_kernel<T, std::int32_t><<<kernels::blocks_for(outer * inner), kernels::threads, 0, s>>>(
          max, static_cast<const T*>(x), static_cast<std::int32_t*>(y), outer, n, inner);
  });
}

void bias_add_op(elem t, const void* x, const void* bias, void* y, std::int64_t rows, std::int64_t channels,
                 cudaStream_t s) {
  if (rows * channels <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, bool>) return;
    else
      kernels::bias_add_kernel<T><<<kernels::blocks_for(rows * channels), kernels::threads, 0, s>>>(
          static_cast<const T*>(x), static_cast<const T*>(bias), static_cast<T*>(y), rows * channels, channels);
  });
}

void channel_affine_op(elem t, const void* x0, const void* a0, const void* x1, const void* a1, const void* b, void* y,
                       std::int64_t rows, std::int64_t channels, cudaStream_t s) {
  if (rows * channels <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else
      kernels::channel_affine_kernel<T><<<kernels::blocks_for(rows * channels), kernels::threads, 0, s>>>(
          static_cast<const T*>(x0), static_cast<const T*>(a0), static_cast<const T*>(x1), static_cast<const T*>(a1),
          static_cast<const T*>(b), static_cast<T*>(y), rows * channels, channels);
  });
}

void batch_norm_forward_op(elem t, const batch_norm_forward& f, std::int64_t channels, cudaStream_t s) {
  if (channels <= 0) return;
  if (t == elem::f32) kernels::batch_norm_forward_kernel<float><<<kernels::blocks_for(channels), kernels::threads, 0, s>>>(f, channels);
  if (t == elem::f64) kernels::batch_norm_forward_kernel<double><<<kernels::blocks_for(channels), kernels::threads, 0, s>>>(f, channels);
}

void batch_norm_backward_op(elem t, const batch_norm_backward& b, std::int64_t channels, cudaStream_t s) {
  if (channels <= 0) return;
  if (t == elem::f32) kernels::batch_norm_backward_kernel<float><<<kernels::blocks_for(channels), kernels::threads, 0, s>>>(b, channels);
  if (t == elem::f64) kernels::batch_norm_backward_kernel<double><<<kernels::blocks_for(channels), kernels::threads, 0, s>>>(b, channels);
}

void softmax_op(bool log, elem t, const void* logits, void* y, std::int64_t rows, std::int64_t classes, cudaStream_t s) {
  if (rows <= 0 || classes <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else
      kernels::softmax_kernel<T><<<kernels::blocks_for(rows * kernels::threads), kernels::threads, 0, s>>>(
          log, static_cast<const T*>(logits), static_cast<T*>(y), rows, classes);
  });
}

void sparse_xent_op(elem t, const void* logits, const void* labels, bool labels_int64, void* loss, void* backprop,
                    std::int64_t rows, std::int64_t classes, std::int64_t* error, cudaStream_t s) {
  if (rows <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else if (labels_int64)
      kernels::sparse_xent_kernel<T, std::int64_t><<<kernels::blocks_for(rows * kernels::threads), kernels::threads, 0, s>>>(
          static_cast<const T*>(logits), static_cast<const std::int64_t*>(labels), static_cast<T*>(loss),
          static_cast<T*>(backprop), rows, classes, error);
    else
      kernels::sparse_xent_kernel<T, std::int32_t><<<kernels::blocks_for(rows * kernels::threads), kernels::threads, 0, s>>>(
          static_cast<const T*>(logits), static_cast<const std::int32_t*>(labels), static_cast<T*>(loss),
          static_cast<T*>(backprop), rows, classes, error);
  });
}

void softmax_xent_op(elem t, const void* logits, const void* labels, void* loss, void* backprop, std::int64_t rows,
                     std::int64_t classes, cudaStream_t s) {
  if (rows <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else
      kernels::softmax_xent_kernel<T><<<kernels::blocks_for(rows * kernels::threads), kernels::threads, 0, s>>>(
          static_cast<const T*>(logits), static_cast<const T*>(labels), static_cast<T*>(loss), static_cast<T*>(backprop),
          rows, classes);
  });
}

void one_hot_op(int element_bytes, elem index_type, const void* indices, const void* on, const void* off, void* out,
                std::int64_t outer, std::int64_t depth, std::int64_t inner, cudaStream_t s) {
  const std::int64_t n = outer * depth * inner;
  if (n <= 0) return;
  kernels::by_size(element_bytes, [&](auto u) {
    using U = decltype(u);
    auto go = [&](auto i) {
      using I = decltype(i);
      kernels::one_hot_kernel<U, I><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          static_cast<const I*>(indices), static_cast<const U*>(on), static_cast<const U*>(off), static_cast<U*>(out),
          outer, depth, inner);
    };
    if (index_type == elem::u8) go(std::uint8_t{});
    else if (index_type == elem::i32) go(std::int32_t{});
    else go(std::int64_t{});
  });
}

void apply_gradient_descent_op(elem t, void* var, const void* lr, const void* grad, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else
      kernels::gradient_descent_kernel<T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          static_cast<T*>(var), static_cast<const T*>(lr), static_cast<const T*>(grad), n);
  });
}

void negated_rate_op(elem t, const void* lr, float* out, cudaStream_t s) {
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else kernels::negated_rate_kernel<T><<<1, 1, 0, s>>>(static_cast<const T*>(lr), out);
  });
}

void apply_momentum_op(elem t, void* var, void* accum, const void* lr, const void* grad, const void* momentum,
                       bool nesterov, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else
      kernels::momentum_kernel<T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          static_cast<T*>(var), static_cast<T*>(accum), static_cast<const T*>(lr), static_cast<const T*>(grad),
          static_cast<const T*>(momentum), nesterov, n);
  });
}

void apply_adagrad_op(elem t, void* var, void* accum, const void* lr, const void* grad, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else
      kernels::adagrad_kernel<T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          static_cast<T*>(var), static_cast<T*>(accum), static_cast<const T*>(lr), static_cast<const T*>(grad), n);
  });
}

void apply_rms_prop_op(elem t, void* var, void* ms, void* mom, const void* lr, const void* rho, const void* momentum,
                       const void* epsilon, const void* grad, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else
      kernels::rms_prop_kernel<T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          static_cast<T*>(var), static_cast<T*>(ms), static_cast<T*>(mom), static_cast<const T*>(lr),
          static_cast<const T*>(rho), static_cast<const T*>(momentum), static_cast<const T*>(epsilon),
          static_cast<const T*>(grad), n);
  });
}

void apply_adam_op(elem t, void* var, void* m, void* v, const void* beta1_power, const void* beta2_power, const void* lr,
                   const void* beta1, const void* beta2, const void* epsilon, const void* grad, bool nesterov,
                   std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  kernels::dispatch(t, [&](auto x) {
    using T = decltype(x);
    if constexpr (!kernels::is_float<T>) return;
    else
      kernels::adam_kernel<T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          static_cast<T*>(var), static_cast<T*>(m), static_cast<T*>(v), static_cast<const T*>(beta1_power),
          static_cast<const T*>(beta2_power), static_cast<const T*>(lr), static_cast<const T*>(beta1),
          static_cast<const T*>(beta2), static_cast<const T*>(epsilon), static_cast<const T*>(grad), nesterov, n);
  });
}

void copy_box_op(int element_bytes, const void* src, void* dst, const box_plan& p, cudaStream_t s) {
  std::int64_t n = 1;
  for (int k = 0; k < p.rank; ++k) n *= p.dims[k];
  if (n <= 0) return;
  kernels::by_size(element_bytes, [&](auto v) {
    using U = decltype(v);
    kernels::copy_box_kernel<U><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(static_cast<const U*>(src), static_cast<U*>(dst), n, p);
  });
}

void tile_op(int element_bytes, const void* x, void* y, std::int64_t n, const tile_plan& p, cudaStream_t s) {
  if (n <= 0) return;
  kernels::by_size(element_bytes, [&](auto v) {
    using U = decltype(v);
    kernels::tile_kernel<U><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(static_cast<const U*>(x), static_cast<U*>(y), n, p);
  });
}

void unsorted_segment_sum_op(elem t, const void* data, const void* ids, bool ids_int64, void* out, std::int64_t rows,
                             std::int64_t row, std::int64_t segments, std::int64_t* error, cudaStream_t s) {
  kernels::dispatch_arithmetic(t, [&](auto v) {
    using T = decltype(v);
    std::size_t bytes = static_cast<std::size_t>(segments * row) * sizeof(T);
    if (bytes) cudaMemsetAsync(out, 0, bytes, s);
    const std::int64_t n = rows * (row ? row : 1);
    if (n <= 0) return;
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::uint8_t>) return;
    else if (ids_int64)
      kernels::segment_sum_kernel<T, std::int64_t><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          static_cast<const T*>(data), static_cast<const std::int64_t*>(ids), static_cast<T*>(out), rows, row, segments, error);
    else
      kernels::segment_sum_kernel<T, std::int32_t><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          static_cast<const T*>(data), static_cast<const std::int32_t*>(ids), static_cast<T*>(out), rows, row, segments, error);
  });
}

void nd_op(nd_mode mode, elem t, int element_bytes, const void* indices, bool indices_int64, const nd_plan& p, const void* src,
           void* dst, std::int64_t* error, cudaStream_t s) {
  const std::int64_t n = p.tuples * (p.slice ? p.slice : 1);
  if (n <= 0) return;
  auto go = [&](auto v) {
    using T = decltype(v);
    if (indices_int64)
      kernels::nd_kernel<T, std::int64_t><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          mode, static_cast<const std::int64_t*>(indices), p, static_cast<const T*>(src), static_cast<T*>(dst), error);
    else
      kernels::nd_kernel<T, std::int32_t><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          mode, static_cast<const std::int32_t*>(indices), p, static_cast<const T*>(src), static_cast<T*>(dst), error);
  };
  // Adds compute in the element type; gathers and updates move bytes.
  if (mode == nd_mode::scatter_add) kernels::dispatch_arithmetic(t, go);
  else kernels::by_size(element_bytes, go);
}

void pool_op(bool max, elem t, const void* x, void* y, const pool_geometry& g, cudaStream_t s) {
  const std::int64_t n = g.n * g.oh * g.ow * g.c;
  if (n <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else if (max)
      kernels::pool_kernel<true, T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), g);
    else
      kernels::pool_kernel<false, T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), g);
  });
}

void max_pool_grad_op(elem t, const void* x, const void* grad, void* dx, const pool_geometry& g, cudaStream_t s) {
  const std::int64_t n = g.n * g.h * g.w * g.c;
  if (n <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else
      kernels::max_pool_grad_kernel<T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          static_cast<const T*>(x), static_cast<const T*>(grad), static_cast<T*>(dx), g);
  });
}

void max_pool_grad_grad_op(elem t, const void* x, const void* grad, void* out, const pool_geometry& g, cudaStream_t s) {
  const std::int64_t n = g.n * g.oh * g.ow * g.c;
  if (n <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else
      kernels::max_pool_grad_grad_kernel<T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          static_cast<const T*>(x), static_cast<const T*>(grad), static_cast<T*>(out), g);
  });
}

void avg_pool_grad_op(elem t, const void* grad, void* dx, const pool_geometry& g, cudaStream_t s) {
  const std::int64_t n = g.n * g.h * g.w * g.c;
  if (n <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else
      kernels::avg_pool_grad_kernel<T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(static_cast<const T*>(grad),
                                                                                         static_cast<T*>(dx), g);
  });
}

void random_op(distribution d, elem t, std::uint64_t key, std::uint64_t base, std::uint64_t per, void* out, std::int64_t n,
               cudaStream_t s) {
  if (n <= 0) return;
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else if (d == distribution::uniform)
      kernels::random_kernel<distribution::uniform, T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(key, base, per, static_cast<T*>(out), n);
    else if (d == distribution::normal)
      kernels::random_kernel<distribution::normal, T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(key, base, per, static_cast<T*>(out), n);
    else
      kernels::random_kernel<distribution::truncated_normal, T><<<kernels::blocks_for(n), kernels::threads, 0, s>>>(
          key, base, per, static_cast<T*>(out), n);
  });
}

void dropout_op(elem t, std::uint64_t key, std::uint64_t base, const void* x, const void* rate, void* out, void* mask,
                std::int64_t n, std::int64_t* error, cudaStream_t s) {
  kernels::dispatch(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!kernels::is_float<T>) return;
    else
      kernels::dropout_kernel<T><<<kernels::blocks_for(n > 0 ? n : 1), kernels::threads, 0, s>>>(
          key, base, static_cast<const T*>(x), static_cast<const T*>(rate), static_cast<T*>(out), static_cast<T*>(mask), n, error);
  });
}

void gather_rows_op(const void* params, const void* indices, bool indices_int64, void* out, std::int64_t outer,
                    std::int64_t n, std::int64_t rows, std::int64_t row_bytes, std::int64_t* error, cudaStream_t s) {
  if (n <= 0) return;
  // Moved in the widest unit that divides a row and both base addresses.
  const auto aligned = [&](std::int64_t u) {
    return row_bytes % u == 0 && reinterpret_cast<std::uintptr_t>(params) % u == 0 && reinterpret_cast<std::uintptr_t>(out) % u == 0;
  };
  auto go = [&](auto unit) {
    using U = decltype(unit);
    const std::int64_t units = row_bytes / static_cast<std::int64_t>(sizeof(U));
    const std::int64_t count = (outer ? outer : 1) * n * (units && outer ? units : 1);
    if (indices_int64)
      kernels::gather_rows_kernel<U, std::int64_t><<<kernels::blocks_for(count), kernels::threads, 0, s>>>(
          static_cast<const U*>(params), static_cast<const std::int64_t*>(indices), static_cast<U*>(out), outer, n, rows,
          units, error);
    else
      kernels::gather_rows_kernel<U, std::int32_t><<<kernels::blocks_for(count), kernels::threads, 0, s>>>(
          static_cast<const U*>(params), static_cast<const std::int32_t*>(indices), static_cast<U*>(out), outer, n, rows,
          units, error);
  };
  if (aligned(8)) go(std::uint64_t{});
  else if (aligned(4)) go(std::uint32_t{});
  else go(std::uint8_t{});
}

void batch_pointers_op(const void* x, std::int64_t x_matrix_bytes, const void* y, std::int64_t y_matrix_bytes, void* out,
                       std::int64_t out_matrix_bytes, const broadcast_plan& p, void** pointers, std::int64_t batch, cudaStream_t s) {
  if (batch <= 0) return;
  kernels::batch_pointers_kernel<<<kernels::blocks_for(batch), kernels::threads, 0, s>>>(
      static_cast<const char*>(x), x_matrix_bytes, static_cast<const char*>(y), y_matrix_bytes, static_cast<char*>(out),
      out_matrix_bytes, p, pointers, batch);
}

void pointer_array_op(void* base, std::int64_t step_bytes, void** pointers, std::int64_t count, cudaStream_t s) {
  if (count <= 0) return;
  kernels::pointer_array_kernel<<<kernels::blocks_for(count), kernels::threads, 0, s>>>(static_cast<char*>(base), step_bytes,
                                                                                     pointers, count);
}

void adjoint_op(linalg_elem t, const void* x, void* y, std::int64_t batch, std::int64_t n, cudaStream_t s) {
  const std::int64_t count = batch * n * n;
  if (count <= 0) return;
  kernels::dispatch_linalg(t, [&](auto v) {
    using T = decltype(v);
    kernels::adjoint_kernel<T><<<kernels::blocks_for(count), kernels::threads, 0, s>>>(static_cast<const T*>(x),
                                                                                      static_cast<T*>(y), batch, n);
  });
}

void lu_determinant_op(linalg_elem t, const void* lu, const int* pivots, void* det, std::int64_t batch, std::int64_t n,
                       cudaStream_t s) {
  if (batch <= 0) return;
  kernels::dispatch_linalg(t, [&](auto v) {
    using T = decltype(v);
    kernels::lu_determinant_kernel<T><<<kernels::blocks_for(batch), kernels::threads, 0, s>>>(
        static_cast<const T*>(lu), pivots, static_cast<T*>(det), batch, n);
  });
}

void lu_singular_op(linalg_elem t, const void* lu, std::int64_t batch, std::int64_t n, std::int64_t* error, cudaStream_t s) {
  if (batch * n <= 0) return;
  kernels::dispatch_linalg(t, [&](auto v) {
    using T = decltype(v);
    kernels::lu_singular_kernel<T><<<kernels::blocks_for(batch * n), kernels::threads, 0, s>>>(static_cast<const T*>(lu), batch,
                                                                                              n, error);
  });
}

}  // namespace weft::cuda::launch
