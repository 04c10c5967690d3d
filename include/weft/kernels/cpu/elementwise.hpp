/// @file
/// CPU kernels for the elementwise ops of ops/math_ops.hpp. Equal shapes and a scalar
/// operand take vectorized Eigen array expressions over contiguous shards; other
/// broadcasts go row by row (broadcast_rows.hpp), or walk the output with per-input
/// strides (0 along broadcast dims) where rows are short.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include <weft/core/broadcast.hpp>
#include <weft/kernels/cpu/broadcast_rows.hpp>
#include <weft/kernels/cpu/common.hpp>
#include <weft/kernels/cpu/convert.hpp>
#include <weft/ops/math_ops.hpp>

namespace weft::cpu {

/// A read-only Eigen array view of contiguous elements of type T (vectorized expressions).
template <class T>
using array_map = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
/// A writable Eigen array view of contiguous elements of type T.
template <class T>
using array_out = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

/// Signed integer +, -, *, negation, absolute value and square modulo 2^bits, as TensorFlow
/// computes them, without C++'s undefined signed overflow: Eigen's vector instructions wrap
/// already, and the scalar form computes in the unsigned type, where the wrap is defined.
enum class wrap_kind { add, sub, mul, neg, abs, square };

/// T's +, -, * and negation wrap modulo 2^bits (signed integers; unsigned ones wrap in C++ already).
template <class T>
inline constexpr bool wraps_v = std::is_integral_v<T> && std::is_signed_v<T>;

/// One element of the op: modulo 2^bits for signed integers (computed unsigned), plain otherwise.
template <wrap_kind K, class T>
T arith_scalar(T a, T b = T(0)) {
  if constexpr (wraps_v<T>) {
    using U = std::make_unsigned_t<T>;
    U x = static_cast<U>(a), y = static_cast<U>(b);
    switch (K) {
      case wrap_kind::add: return static_cast<T>(static_cast<U>(x + y));
      case wrap_kind::sub: return static_cast<T>(static_cast<U>(x - y));
      case wrap_kind::mul: return static_cast<T>(static_cast<U>(x * y));
      case wrap_kind::neg: return static_cast<T>(static_cast<U>(U(0) - x));
      case wrap_kind::abs: return a < 0 ? static_cast<T>(static_cast<U>(U(0) - x)) : a;
      case wrap_kind::square: return static_cast<T>(static_cast<U>(x * x));
    }
    return a;
  } else if constexpr (K == wrap_kind::add) {
    return a + b;
  } else if constexpr (K == wrap_kind::sub) {
    return a - b;
  } else if constexpr (K == wrap_kind::mul) {
    return a * b;
  } else if constexpr (K == wrap_kind::neg) {
    return -a;
  } else if constexpr (K == wrap_kind::abs) {
    return a < T(0) ? T(-a) : a;
  } else {
    return a * a;
  }
}

/// The Eigen functor of a wrapping op K on T (unaryExpr or binaryExpr): scalar and packet forms.
template <wrap_kind K, class T>
struct wrapping_op {
  /// K of one element (neg, abs, square), wrapping.
  T operator()(const T& a) const { return arith_scalar<K>(a); }
  /// a K b for one pair of elements (add, sub, mul), wrapping.
  T operator()(const T& a, const T& b) const { return arith_scalar<K>(a, b); }
  /// K of a packet of elements (SIMD integer instructions wrap).
  template <class P>
  P packetOp(const P& a) const {
    if constexpr (K == wrap_kind::neg) return Eigen::internal::pnegate(a);
    else if constexpr (K == wrap_kind::abs) return Eigen::internal::pabs(a);
    else return Eigen::internal::pmul(a, a);
  }
  /// a K b for packets of elements.
  template <class P>
  P packetOp(const P& a, const P& b) const {
    if constexpr (K == wrap_kind::add) return Eigen::internal::padd(a, b);
    else if constexpr (K == wrap_kind::sub) return Eigen::internal::psub(a, b);
    else return Eigen::internal::pmul(a, b);
  }
};

/// The Eigen expression for a op b (or op a): wrapping for signed integers, plain otherwise.
template <wrap_kind K, class A, class B>
auto wrapping_binary(const A& a, const B& b) {
  using T = typename A::Scalar;
  if constexpr (wraps_v<T>) return a.binaryExpr(b, wrapping_op<K, T>());
  else if constexpr (K == wrap_kind::add) return a + b;
  else if constexpr (K == wrap_kind::sub) return a - b;
  else return a * b;
}
/// The Eigen expression for op x (neg, abs, square): wrapping for signed integers, plain otherwise.
template <wrap_kind K, class A>
auto wrapping_unary(const A& x) {
  using T = typename A::Scalar;
  if constexpr (wraps_v<T>) return x.unaryExpr(wrapping_op<K, T>());
  else if constexpr (K == wrap_kind::neg) return -x;
  else if constexpr (K == wrap_kind::abs) return x.abs();
  else return x.square();
}
/// Sqrt and Rsqrt, exact at the edges. Eigen 3.4's fast packets (EIGEN_FAST_MATH: float on
/// SSE/AVX, float and double on AVX-512) compute sqrt(x) as x * rsqrt(x) refined, which
/// makes sqrt(inf) NaN and flushes subnormal inputs (sqrt(1e-40) = 0, rsqrt(1e-40) = inf).
/// A packet holding +inf, a subnormal or zero goes through std::sqrt lane by lane: IEEE's
/// answers, as TensorFlow's and the GPU's; other packets keep Eigen's fast path.
template <class T, bool Reciprocal>
struct exact_sqrt_op {
  /// sqrt(a) (or 1 / sqrt(a)) of one element.
  T operator()(const T& a) const {
    using std::sqrt;
    using Eigen::numext::sqrt;
    if constexpr (Reciprocal) return T(1) / sqrt(a);
    else return sqrt(a);
  }
  /// Of a packet: Eigen's fast form, or lane by lane where a lane is +inf, subnormal or zero.
  template <class P>
  P packetOp(const P& a) const {
    namespace ei = Eigen::internal;
    const P fast = Reciprocal ? ei::prsqrt(a) : ei::psqrt(a);
    using S = typename ei::unpacket_traits<P>::type;
    if constexpr (std::is_floating_point_v<S>) {
      const P edge = ei::por(ei::pcmp_eq(a, ei::pset1<P>(std::numeric_limits<S>::infinity())),
                             ei::pand(ei::pcmp_lt(a, ei::pset1<P>(std::numeric_limits<S>::min())),
                                      ei::pcmp_le(ei::pzero(a), a)));
      if (!ei::predux_any(edge)) return fast;
      constexpr int n = ei::unpacket_traits<P>::size;
      alignas(64) S lanes[n];
      ei::pstoreu(lanes, a);
      for (S& v : lanes) v = (*this)(v);
      return ei::ploadu<P>(lanes);
    } else {
      return fast;
    }
  }
};

/// Floor, Ceil and Round (half to even, as TensorFlow's) with the sign of zero kept: Eigen
/// 3.4's packets without SSE4.1 round by adding and subtracting 2^23 (2^52), which makes
/// floor(-0) and ceil(-0.5) +0; IEEE's answers (and the scalar functions') are -0. The result
/// has x's sign wherever it is zero, and otherwise too, so the sign is x's.
enum class rounding { floor, ceil, half_even };
/// The functor of one rounding (Eigen's unaryExpr).
template <class T, rounding R>
struct signed_rounding_op {
  /// Of one element.
  T operator()(const T& a) const {
    if constexpr (R == rounding::floor) return std::floor(a);
    else if constexpr (R == rounding::ceil) return std::ceil(a);
    else return std::nearbyint(a);
  }
  /// Of a packet: Eigen's rounding, then x's sign bit on the magnitude.
  template <class P>
  P packetOp(const P& a) const {
    namespace ei = Eigen::internal;
    const P r = R == rounding::floor ? ei::pfloor(a) : R == rounding::ceil ? ei::pceil(a) : ei::print(a);
    const P sign = ei::pset1<P>(T(-0.0));
    return ei::por(ei::pand(a, sign), ei::pandnot(r, sign));
  }
};

// ---- unary -------------------------------------------------------------------------
// Each functor: an Eigen array expression (apply) and its cost per element (parallel_for).
#define WEFT_DETAIL_UNARY(NAME, EXPR, COST)              \
  /** Elementwise functor NAME: `EXPR` of an Eigen array x. */ \
  struct NAME {                                          \
    static constexpr double cost = COST; /**< cycles per element, for splitting work */ \
    /** The Eigen expression of the op over the array x. */ \
    template <class A>                                   \
    static auto apply(const A& x) {                      \
      return EXPR;                                       \
    }                                                    \
  }
WEFT_DETAIL_UNARY(neg_fn, wrapping_unary<wrap_kind::neg>(x), 1);
WEFT_DETAIL_UNARY(abs_fn, wrapping_unary<wrap_kind::abs>(x), 1);
WEFT_DETAIL_UNARY(sqrt_fn, x.unaryExpr(exact_sqrt_op<typename A::Scalar, false>()), 8);
WEFT_DETAIL_UNARY(rsqrt_fn, x.unaryExpr(exact_sqrt_op<typename A::Scalar, true>()), 8);
WEFT_DETAIL_UNARY(exp_fn, x.exp(), 20);
WEFT_DETAIL_UNARY(log_fn, x.log(), 20);
WEFT_DETAIL_UNARY(tanh_fn, x.tanh(), 30);
WEFT_DETAIL_UNARY(sigmoid_fn, x.logistic(), 30);
WEFT_DETAIL_UNARY(logical_not_fn, !x, 1);
WEFT_DETAIL_UNARY(sin_fn, x.sin(), 20);
WEFT_DETAIL_UNARY(cos_fn, x.cos(), 20);
WEFT_DETAIL_UNARY(tan_fn, x.tan(), 30);
WEFT_DETAIL_UNARY(asin_fn, x.asin(), 30);
WEFT_DETAIL_UNARY(acos_fn, x.acos(), 30);
WEFT_DETAIL_UNARY(atan_fn, x.atan(), 30);
WEFT_DETAIL_UNARY(sinh_fn, x.sinh(), 30);
WEFT_DETAIL_UNARY(cosh_fn, x.cosh(), 30);
WEFT_DETAIL_UNARY(asinh_fn, x.asinh(), 30);
WEFT_DETAIL_UNARY(acosh_fn, x.acosh(), 30);
WEFT_DETAIL_UNARY(atanh_fn, x.atanh(), 30);
WEFT_DETAIL_UNARY(reciprocal_fn, x.inverse(), 4);
WEFT_DETAIL_UNARY(log1p_fn, x.log1p(), 25);
WEFT_DETAIL_UNARY(expm1_fn, x.expm1(), 25);
/// log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large x, e^x's digits for very
/// negative x.
WEFT_DETAIL_UNARY(softplus_fn, x.cwiseMax(typename A::Scalar(0)) + (-x.abs()).exp().log1p(), 50);
WEFT_DETAIL_UNARY(erf_fn, x.erf(), 30);
WEFT_DETAIL_UNARY(elu_fn, (x > typename A::Scalar(0)).select(x, x.expm1()), 25);
WEFT_DETAIL_UNARY(selu_fn,
                  (x > typename A::Scalar(0))
                      .select(x * typename A::Scalar(selu_scale), x.expm1() * typename A::Scalar(selu_scale * selu_alpha)),
                  25);
WEFT_DETAIL_UNARY(is_nan_fn, x != x, 1);
WEFT_DETAIL_UNARY(is_inf_fn, x.abs() == std::numeric_limits<typename A::Scalar>::infinity(), 1);
WEFT_DETAIL_UNARY(is_finite_fn, x.abs() < std::numeric_limits<typename A::Scalar>::infinity(), 1);  ///< NaN: false
WEFT_DETAIL_UNARY(relu6_fn, (x != x).select(x, x.cwiseMax(typename A::Scalar(0)).cwiseMin(typename A::Scalar(6))), 2);  ///< NaN of NaN
WEFT_DETAIL_UNARY(floor_fn, x.unaryExpr(signed_rounding_op<typename A::Scalar, rounding::floor>()), 1);
WEFT_DETAIL_UNARY(ceil_fn, x.unaryExpr(signed_rounding_op<typename A::Scalar, rounding::ceil>()), 1);
WEFT_DETAIL_UNARY(round_fn, x.unaryExpr(signed_rounding_op<typename A::Scalar, rounding::half_even>()), 1);
#undef WEFT_DETAIL_UNARY

/// Elementwise functor of Square, x * x (wrapping for signed integers). Square and Relu also
/// run on uint64, which has no Eigen kernels: they have a scalar form.
struct square_fn {
  static constexpr double cost = 1;  ///< cycles per element, for splitting work
  /// The Eigen expression over the array x.
  template <class A>
  static auto apply(const A& x) {
    return wrapping_unary<wrap_kind::square>(x);
  }
  /// Of one element (the dtypes that loop one element at a time).
  template <class T>
  static T scalar(const T& x) {
    return arith_scalar<wrap_kind::square>(x);
  }
};
/// Elementwise functor of Sign: -1, 0 or 1, and NaN of NaN.
struct sign_fn {
  static constexpr double cost = 2;  ///< cycles per element, for splitting work
  /// The Eigen expression over the array x.
  template <class A>
  static auto apply(const A& x) {
    if constexpr (std::is_floating_point_v<typename A::Scalar>) return (x != x).select(x, x.sign());
    else return x.sign();
  }
};
/// Elementwise functor of Relu, max(x, 0).
struct relu_fn {
  static constexpr double cost = 1;  ///< cycles per element, for splitting work
  /// The Eigen expression over the array x.
  template <class A>
  static auto apply(const A& x) {
    return x.cwiseMax(typename A::Scalar(0));
  }
  /// Of one element.
  template <class T>
  static T scalar(const T& x) {
    return std::max(x, T(0));
  }
};

/// y = F(x), elements of type T (bool ones out where Bool), split across the intra-op threads.
template <class F, class T, bool Bool = false>
void unary_compute(kernel_context& ctx, const tensor& x, tensor& y) {
  using Out = std::conditional_t<Bool, bool, T>;
  const T* in = x.data<T>();
  Out* out = y.data<Out>();
  ctx.parallel_for(x.num_elements(), F::cost, [&](std::int64_t b, std::int64_t e) {
    if constexpr (is_looped_v<T>)
      for (std::int64_t i = b; i < e; ++i) out[i] = F::scalar(in[i]);
    else
      array_out<Out>(out + b, e - b) = F::apply(array_map<T>(in + b, e - b));
  });
}

/// The kernel body for inputs of dtype T computed as C: `widen` converts T to C and `narrow`
/// back (both null when T is C; a bool output where Bool is not narrowed). One body per (F,
/// C), so each further T costs only its class.
template <class F, class C, bool Bool = false>
void unary_run(kernel_context& ctx, detail::convert_fn widen, detail::convert_fn narrow) {
  tensor x = ctx.input(0);
  tensor& y = ctx.allocate_output(0, x.shape());
  if (!widen) return unary_compute<F, C, Bool>(ctx, x, y);
  tensor xc = detail::converted(ctx, widen, x, dtype_of<C>);
  if constexpr (Bool) {
    unary_compute<F, C, true>(ctx, xc, y);
  } else {
    tensor yc(dtype_of<C>, x.shape());
    unary_compute<F, C>(ctx, xc, yc);
    detail::run_convert(ctx, narrow, yc, y);
  }
}

/// The CPU kernels of the unary op whose functor is F (a bool output when Bool: IsNan and
/// the like): `unary_kernel<F>::of<T>` for dtype T.
template <class F, bool Bool = false>
struct unary_kernel {
  /// The kernel for inputs of dtype T.
  template <class T>
  struct of final : op_kernel {
    /// The kernel of a node (it reads no attrs).
    explicit of(const node&) {}
    void compute(kernel_context& ctx) const override { unary_run<F, compute_t<T>, Bool>(ctx, widen_fn<T>, narrow_fn<T>); }
  };
};

// ---- binary ------------------------------------------------------------------------
// Each functor has an Eigen form (arrays or array and constant) and a scalar form.
#define WEFT_DETAIL_BINARY(NAME, EXPR, SCALAR, COST)                   \
  /** Elementwise functor NAME: `EXPR` of Eigen arrays (or an array and a constant) a and b. */ \
  struct NAME {                                                        \
    static constexpr double cost = COST; /**< cycles per element, for splitting work */ \
    /** The Eigen expression over a and b. */                          \
    template <class A, class B>                                        \
    static auto apply(const A& a, const B& b) {                        \
      return EXPR;                                                     \
    }                                                                  \
    /** Of one pair of elements: `SCALAR`. */                          \
    template <class T>                                                 \
    static auto scalar(const T& a, const T& b) {                       \
      return SCALAR;                                                   \
    }                                                                  \
  }
WEFT_DETAIL_BINARY(add_fn, wrapping_binary<wrap_kind::add>(a, b), arith_scalar<wrap_kind::add>(a, b), 1);
WEFT_DETAIL_BINARY(sub_fn, wrapping_binary<wrap_kind::sub>(a, b), arith_scalar<wrap_kind::sub>(a, b), 1);
WEFT_DETAIL_BINARY(mul_fn, wrapping_binary<wrap_kind::mul>(a, b), arith_scalar<wrap_kind::mul>(a, b), 1);
WEFT_DETAIL_BINARY(div_fn, a / b, a / b, 4);
WEFT_DETAIL_BINARY(maximum_fn, a.max(b), (a < b ? b : a), 1);
WEFT_DETAIL_BINARY(minimum_fn, a.min(b), (b < a ? b : a), 1);
WEFT_DETAIL_BINARY(greater_fn, a > b, a > b, 1);
WEFT_DETAIL_BINARY(greater_equal_fn, a >= b, a >= b, 1);
WEFT_DETAIL_BINARY(less_fn, a < b, a < b, 1);
WEFT_DETAIL_BINARY(less_equal_fn, a <= b, a <= b, 1);
WEFT_DETAIL_BINARY(equal_fn, a == b, a == b, 1);
WEFT_DETAIL_BINARY(not_equal_fn, a != b, a != b, 1);
WEFT_DETAIL_BINARY(logical_and_fn, a && b, a && b, 1);
WEFT_DETAIL_BINARY(logical_or_fn, a || b, a || b, 1);
WEFT_DETAIL_BINARY(squared_difference_fn, (a - b).square(), (a - b) * (a - b), 2);
#undef WEFT_DETAIL_BINARY

/// The Eigen form of a binary functor F that has no packets: F::scalar per pair of elements.
template <class F>
struct per_element_binary {
  /// The Eigen expression over a and b (an array or a constant each).
  template <class A, class B>
  static auto apply(const A& a, const B& b) {
    return a.binaryExpr(b, [](auto x, auto y) { return F::scalar(x, y); });
  }
};

/// Elementwise functor of Pow, a^b: integers by squaring and multiplying modulo 2^64 (the
/// kernel rejects negative exponents first), floats and complex numbers by pow.
struct pow_fn : per_element_binary<pow_fn> {
  static constexpr double cost = 40;  ///< cycles per element, for splitting work
  /// Of one pair of elements.
  template <class T>
  static T scalar(const T& a, const T& b) {
    if constexpr (std::is_integral_v<T>) {
      // Square and multiply modulo 2^64, so that overflow wraps instead of being undefined.
      std::uint64_t result = 1, base = static_cast<std::uint64_t>(a);
      for (auto e = static_cast<std::uint64_t>(b); e > 0; e >>= 1) {
        if (e & 1) result *= base;
        base *= base;
      }
      return static_cast<T>(result);
    } else {
      using std::pow;
      using Eigen::numext::pow;
      return static_cast<T>(pow(a, b));
    }
  }
};

/// Elementwise functor of Atan2, atan2(a, b): the angle of the point (b, a), in (-pi, pi].
struct atan2_fn : per_element_binary<atan2_fn> {  // Eigen 3.4 has no atan2 packets
  static constexpr double cost = 40;  ///< cycles per element, for splitting work
  /// Of one pair of elements.
  template <class T>
  static T scalar(const T& a, const T& b) {
    using std::atan2;
    return static_cast<T>(atan2(a, b));
  }
};

/// Elementwise functors of FloorDiv and FloorMod (Python's // and %, TensorFlow's): the
/// quotient rounded toward -infinity, and the remainder x - floor(x / y) y, which has y's
/// sign. Integers: the kernel rejects zero divisors first; x // -1 is the wrapped -x (INT_MIN
/// // -1 is INT_MIN) and x % -1 is 0, where C++'s / and % overflow. Floats: floor(x / y), and
/// fmod moved to y's sign.
template <bool Mod>
struct floor_division_fn : per_element_binary<floor_division_fn<Mod>> {
  static constexpr double cost = 12;  ///< cycles per element, for splitting work
  /// Of one pair of elements.
  template <class T>
  static T scalar(const T& a, const T& b) {
    if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return Mod ? T(0) : static_cast<T>(T(0) - static_cast<std::make_unsigned_t<T>>(a));
      }
      if (b == T(0)) return T(0);  // refused before any element is computed
      const T q = static_cast<T>(a / b), r = static_cast<T>(a % b);
      if constexpr (std::is_signed_v<T>) {
        const bool down = r != 0 && ((r < 0) != (b < 0));
        if constexpr (Mod) return down ? static_cast<T>(r + b) : r;
        else return down ? static_cast<T>(q - 1) : q;
      } else {
        return Mod ? r : q;
      }
    } else {
      using std::floor;
      using std::fmod;
      if constexpr (Mod) {
        const T r = static_cast<T>(fmod(a, b));
        return r != T(0) && ((r < T(0)) != (b < T(0))) ? static_cast<T>(r + b) : r;
      } else {
        return static_cast<T>(floor(a / b));
      }
    }
  }
};

/// Calls f(output index, offsets into each input) for every output element, in order.
template <std::size_t N, class F>
void for_each_broadcast(const shape& out, const std::array<std::vector<std::int64_t>, N>& strides,
                        std::int64_t begin, std::int64_t end, F&& f) {
  if (begin >= end) return;  // also keeps an empty output's zero dims out of the divisions below
  int rank = out.rank();
  std::vector<std::int64_t> idx(static_cast<std::size_t>(rank));
  std::array<std::int64_t, N> off{};
  std::int64_t rem = begin;
  for (int d = rank - 1; d >= 0; --d) {
    idx[static_cast<std::size_t>(d)] = rem % out[d];
    rem /= out[d];
    for (std::size_t k = 0; k < N; ++k) off[k] += idx[static_cast<std::size_t>(d)] * strides[k][static_cast<std::size_t>(d)];
  }
  for (std::int64_t i = begin; i < end; ++i) {
    f(i, off);
    for (int d = rank - 1; d >= 0; --d) {
      auto& x = idx[static_cast<std::size_t>(d)];
      for (std::size_t k = 0; k < N; ++k) off[k] += strides[k][static_cast<std::size_t>(d)];
      if (++x < out[d]) break;
      for (std::size_t k = 0; k < N; ++k) off[k] -= x * strides[k][static_cast<std::size_t>(d)];
      x = 0;
    }
  }
}

/// The broadcast shape of a and b, or an invalid_argument error naming both.
inline shape broadcast_or_fail(const shape& a, const shape& b) {
  auto s = broadcast(a, b);
  if (!s) fail(error_code::invalid_argument, "shapes ", a, " and ", b, " are not broadcastable");
  return *s;
}

/// z = F(x, y) with broadcasting (elements of type T in, Out out), split across the intra-op
/// threads: one vectorized expression over equal shapes, rows of broadcasts, or strides.
template <class F, class T, class Out>
void binary_compute(kernel_context& ctx, const tensor& x, const tensor& y, tensor& z) {
  const T* a = x.data<T>();
  const T* b = y.data<T>();
  Out* out = z.data<Out>();
  std::int64_t n = z.num_elements();
  if constexpr (!is_looped_v<T>) {
    if (x.shape() == z.shape() && y.shape() == z.shape())
      return ctx.parallel_for(n, F::cost, [&](std::int64_t s, std::int64_t e) {
        array_out<Out>(out + s, e - s) = F::apply(array_map<T>(a + s, e - s), array_map<T>(b + s, e - s));
      });
    // Any broadcast, in rows along which each operand steps or repeats one value (a scalar
    // beside a tensor: one row; a bias beside a batch; a column): one vectorized expression
    // per row piece. Rows too short for that take the strided loop below.
    broadcast_rows<2> rows(z.shape(), {&x.shape(), &y.shape()});
    if (rows.length() >= 16) {
      const bool sx = rows.steps(0), sy = rows.steps(1);
      using constant = Eigen::Array<T, Eigen::Dynamic, 1>;
      return ctx.parallel_for(rows.units(), F::cost * static_cast<double>(rows.piece()), [&](std::int64_t s, std::int64_t e) {
        rows.each(s, e, [&](std::int64_t o, std::int64_t len, const std::array<std::int64_t, 2>& off) {
          if (sx && sy)
            array_out<Out>(out + o, len) = F::apply(array_map<T>(a + off[0], len), array_map<T>(b + off[1], len));
          else if (sx)
            array_out<Out>(out + o, len) = F::apply(array_map<T>(a + off[0], len), constant::Constant(len, b[off[1]]));
          else
            array_out<Out>(out + o, len) = F::apply(constant::Constant(len, a[off[0]]), array_map<T>(b + off[1], len));
        });
      });
    }
  }
  // Short rows (or a type without Eigen kernels): walk the output with per-input strides.
  std::array<std::vector<std::int64_t>, 2> strides{broadcast_strides(x.shape(), z.shape()),
                                                    broadcast_strides(y.shape(), z.shape())};
  ctx.parallel_for(n, F::cost + 4, [&](std::int64_t s, std::int64_t e) {
    for_each_broadcast<2>(z.shape(), strides, s, e, [&](std::int64_t i, const std::array<std::int64_t, 2>& off) {
      out[i] = static_cast<Out>(F::scalar(a[off[0]], b[off[1]]));
    });
  });
}

/// Checks the operands, then writes x op y into z, all of dtype T (z bool for comparisons).
template <class F, class T, bool Bool>
void binary_apply(kernel_context& ctx, const tensor& x, const tensor& y, tensor& z) {
  using Out = std::conditional_t<Bool, bool, T>;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                (std::is_same_v<F, div_fn> || std::is_same_v<F, floor_division_fn<false>> ||
                 std::is_same_v<F, floor_division_fn<true>>)) {
    for (T v : y.flat<T>())
      if (v == 0) fail(error_code::invalid_argument, "integer division by zero");
  }
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T> && std::is_same_v<F, pow_fn>) {
    for (T v : y.flat<T>())
      if (v < 0) fail(error_code::invalid_argument, "integers to negative integer powers are not allowed");
  }
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T> && std::is_same_v<F, div_fn>) {
    // INT_MIN / -1 overflows (and traps on x86): compute it as the wrapped result instead.
    const T* a = x.data<T>();
    const T* b = y.data<T>();
    T* out = z.data<T>();
    const shape& s = z.shape();
    std::array<std::vector<std::int64_t>, 2> strides{broadcast_strides(x.shape(), s), broadcast_strides(y.shape(), s)};
    for_each_broadcast<2>(s, strides, 0, s.num_elements(), [&](std::int64_t i, const std::array<std::int64_t, 2>& o) {
      T p = a[o[0]], q = b[o[1]];
      out[i] = (q == -1) ? static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(p)) : static_cast<T>(p / q);
    });
  } else {
    binary_compute<F, T, Out>(ctx, x, y, z);
  }
}

/// As unary_run: one body per (F, C, Bool) for every T that computes as C.
template <class F, class C, bool Bool>
void binary_run(kernel_context& ctx, detail::convert_fn widen, detail::convert_fn narrow) {
  const tensor& x = ctx.input(0);
  const tensor& y = ctx.input(1);
  shape s = broadcast_or_fail(x.shape(), y.shape());
  tensor& z = ctx.allocate_output(0, s);
  // One call of binary_apply, so that the compiler does not inline two copies of it.
  bool widened = widen != nullptr, narrowed = widened && !Bool;
  tensor xc = widened ? detail::converted(ctx, widen, x, dtype_of<C>) : x;
  tensor yc = widened ? detail::converted(ctx, widen, y, dtype_of<C>) : y;
  tensor zc = narrowed ? tensor(dtype_of<C>, s) : z;
  binary_apply<F, C, Bool>(ctx, xc, yc, zc);
  if (narrowed) detail::run_convert(ctx, narrow, zc, z);
}

/// The CPU kernels of the binary op whose functor is F (a bool output when Bool):
/// `binary_kernel<F>::of<T>` for dtype T.
template <class F, bool Bool = false>
struct binary_kernel {
  /// The kernel for inputs of dtype T.
  template <class T>
  struct of final : op_kernel {
    /// The kernel of a node (it reads no attrs).
    explicit of(const node&) {}
    void compute(kernel_context& ctx) const override {
      binary_run<F, compute_t<T>, Bool>(ctx, widen_fn<T>, narrow_fn<T>);
    }
  };
};

/// ReluGrad(gradients, features): gradients where features > 0, else 0; one shape, no
/// broadcasting. The loop is a function of its own over pointers taken by value, which GCC
/// vectorizes into compares and blends; written in the parallel_for lambda over pointers
/// captured by reference it stayed scalar, and its branch, taken at random, made it ten times
/// slower than SelectV2 (Eigen's select is not vectorized either).
template <class T>
struct relu_grad_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit relu_grad_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor &g = ctx.input(0), &f = ctx.input(1);
    if (g.shape() != f.shape())
      fail(error_code::invalid_argument, "gradients and features must have the same shape, got ", g.shape(), " and ",
           f.shape());
    tensor& out = ctx.allocate_output(0, g.shape());
    const T *pg = g.data<T>(), *pf = f.data<T>();
    T* po = out.data<T>();
    ctx.parallel_for(g.num_elements(), 1, [&](std::int64_t b, std::int64_t e) { flat(pg + b, pf + b, po + b, e - b); });
  }
  /// o[i] = f[i] > 0 ? g[i] : 0 for n elements.
  static void flat(const T* g, const T* f, T* o, std::int64_t n) {
    if constexpr (is_half_v<T>) {
      // On the bits, eight at a time in the compilers' generic vectors (Eigen's half types
      // compare through float, one element at a time, and the loop stayed scalar with a
      // branch: 30 times float's time): f > 0 when its bits, as a signed 16-bit number, are
      // in [1, +infinity's]; zeros, negatives and NaNs are not. Signed compares and eight
      // lanes, SSE2's width: SSE2 has no unsigned compares, and GCC turned the compares of
      // wider generic vectors into scalar code.
      typedef std::int16_t i16x8 __attribute__((vector_size(16)));
      typedef std::int16_t i16x8_u __attribute__((vector_size(16), aligned(2), may_alias));  // at any T's address
      constexpr std::int16_t inf = std::is_same_v<T, bfloat16> ? 0x7F80 : 0x7C00;
      const std::int64_t vectors = n - n % 8;
      for (std::int64_t i = 0; i < vectors; i += 8) {
        const i16x8 fb = *reinterpret_cast<const i16x8_u*>(f + i), gb = *reinterpret_cast<const i16x8_u*>(g + i);
        *reinterpret_cast<i16x8_u*>(o + i) = gb & ((fb > 0) & (fb <= inf));  // each comparison: all ones or zero
      }
      for (std::int64_t i = vectors; i < n; ++i) {
        const auto fb = std::bit_cast<std::int16_t>(f[i]);
        o[i] = fb > 0 && fb <= inf ? g[i] : std::bit_cast<T>(std::int16_t{0});
      }
    } else {
      for (std::int64_t i = 0; i < n; ++i) o[i] = f[i] > T(0) ? g[i] : T(0);
    }
  }
};

/// SelectV2(condition, t, e): all three broadcast.
template <class T>
struct select_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit select_kernel(const node&) {}
  /// n elements, each operand read with step 1 or 0 (a single value). The common cases are
  /// loops over pointers taken by value without strides or branches, which compile to blends.
  static void select_flat(const bool* cond, std::int64_t sc, const T* t, std::int64_t st, const T* e, std::int64_t se,
                          T* o, std::int64_t n) {
    // Read as bytes (bools are 0 or 1): GCC vectorizes `byte != 0 ? a : b`, not `bool ? a : b`.
    const auto* c = reinterpret_cast<const unsigned char*>(cond);
    if (sc == 1 && st == 1 && se == 0) {
      const T ev = *e;
      for (std::int64_t i = 0; i < n; ++i) o[i] = c[i] != 0 ? t[i] : ev;
    } else if (sc == 1 && st == 0 && se == 1) {
      const T tv = *t;
      for (std::int64_t i = 0; i < n; ++i) o[i] = c[i] != 0 ? tv : e[i];
    } else if (sc == 1 && st == 1 && se == 1) {
      for (std::int64_t i = 0; i < n; ++i) o[i] = c[i] != 0 ? t[i] : e[i];
    } else {
      for (std::int64_t i = 0; i < n; ++i) o[i] = c[i * sc] != 0 ? t[i * st] : e[i * se];
    }
  }
  void compute(kernel_context& ctx) const override {
    const tensor& c = ctx.input(0);
    const tensor& t = ctx.input(1);
    const tensor& e = ctx.input(2);
    shape s = broadcast_or_fail(broadcast_or_fail(c.shape(), t.shape()), e.shape());
    tensor& out = ctx.allocate_output(0, s);
    const bool* pc = c.data<bool>();
    const T* pt = t.data<T>();
    const T* pe = e.data<T>();
    T* po = out.data<T>();
    // Each operand of the output's shape or a single value (Relu's gradient selects
    // between a tensor and 0): one flat pass, a single value read with step 0.
    auto step = [&](const tensor& x) -> std::int64_t {
      return x.shape() == s ? 1 : x.num_elements() == 1 ? 0 : -1;
    };
    if (const std::int64_t sc = step(c), st = step(t), se = step(e); sc >= 0 && st >= 0 && se >= 0) {
      ctx.parallel_for(s.num_elements(), 2, [&](std::int64_t b, std::int64_t en) {
        select_flat(pc + b * sc, sc, pt + b * st, st, pe + b * se, se, po + b, en - b);
      });
      return;
    }
    std::array<std::vector<std::int64_t>, 3> strides{broadcast_strides(c.shape(), s), broadcast_strides(t.shape(), s),
                                                      broadcast_strides(e.shape(), s)};
    ctx.parallel_for(s.num_elements(), 6, [&](std::int64_t b, std::int64_t en) {
      for_each_broadcast<3>(s, strides, b, en, [&](std::int64_t i, const std::array<std::int64_t, 3>& o) {
        po[i] = pc[o[0]] ? pt[o[1]] : pe[o[2]];
      });
    });
  }
};

/// Select(condition, t, e), TensorFlow's first form: t and e of one shape; a condition of
/// that shape picks elements, a scalar one the whole of t or e, and a vector one whole rows
/// (along dim 0).
template <class T>
struct select_rows_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit select_rows_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& c = ctx.input(0);
    const tensor& t = ctx.input(1);
    const tensor& e = ctx.input(2);
    const bool rows = ops::select_picks_rows(c.shape(), t.shape(), e.shape());
    tensor& out = ctx.allocate_output(0, t.shape());
    const bool* pc = c.data<bool>();
    const T *pt = t.data<T>(), *pe = e.data<T>();
    T* po = out.data<T>();
    if (c.rank() == 0) {
      std::copy_n(*pc ? pt : pe, t.num_elements(), po);
    } else if (!rows) {
      ctx.parallel_for(t.num_elements(), 2, [&](std::int64_t b, std::int64_t en) {
        select_kernel<T>::select_flat(pc + b, 1, pt + b, 1, pe + b, 1, po + b, en - b);
      });
    } else {
      const std::int64_t row = t.dim(0) ? t.num_elements() / t.dim(0) : 0;
      ctx.parallel_for(t.dim(0), static_cast<double>(row), [&](std::int64_t b, std::int64_t en) {
        for (std::int64_t r = b; r < en; ++r) std::copy_n((pc[r] ? pt : pe) + r * row, row, po + r * row);
      });
    }
  }
};

/// Equal and NotEqual of string tensors (byte by byte), broadcasting as the numbers' do.
template <bool Equal>
struct string_compare_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit string_compare_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    const tensor& y = ctx.input(1);
    const shape s = broadcast_or_fail(x.shape(), y.shape());
    tensor& out = ctx.allocate_output(0, s);
    const std::string* a = x.data<std::string>();
    const std::string* b = y.data<std::string>();
    bool* o = out.data<bool>();
    std::array<std::vector<std::int64_t>, 2> strides{broadcast_strides(x.shape(), s), broadcast_strides(y.shape(), s)};
    for_each_broadcast<2>(s, strides, 0, s.num_elements(), [&](std::int64_t i, const std::array<std::int64_t, 2>& off) {
      o[i] = (a[off[0]] == b[off[1]]) == Equal;
    });
  }
};

/// CheckNumerics: the input itself (no copy), or an invalid_argument error with the node's
/// message and TensorFlow's words where an element is NaN or an infinity; floats compared in
/// their compute type, the threads' findings joined.
template <class T>
struct check_numerics_kernel final : op_kernel {
  /// The kernel of a node: its message.
  explicit check_numerics_kernel(const node& n) : message_(n.attr<std::string>("message")) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    const T* p = x.data<T>();
    std::atomic<bool> nan{false}, inf{false};
    ctx.parallel_for(x.num_elements(), 1, [&](std::int64_t b, std::int64_t e) {
      bool n = false, i = false;
      for (std::int64_t k = b; k < e; ++k) {
        const auto v = static_cast<compute_t<T>>(p[k]);
        n |= std::isnan(v);
        i |= std::isinf(v);
      }
      if (n) nan = true;
      if (i) inf = true;
    });
    if (nan || inf)
      fail(error_code::invalid_argument, message_, " : Tensor had ", nan && inf ? "NaN and Inf" : nan ? "NaN" : "Inf",
           " values");
    ctx.set_output(0, x);
  }
 private:
  std::string message_;
};

/// The CPU kernel of AddN for dtype T: blocks of the inputs summed in T's compute type
/// (float16 and bfloat16 in float32, rounded once; signed integers wrapping), no broadcasting.
template <class T>
struct add_n_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit add_n_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const int n = ctx.num_inputs();
    const tensor& first = ctx.input(0);
    for (int i = 1; i < n; ++i)
      if (ctx.input(i).shape() != first.shape())
        fail(error_code::invalid_argument, "input ", i, " has shape ", ctx.input(i).shape(), ", input 0 ", first.shape(),
             ": the inputs must have one shape (AddN does not broadcast)");
    if (n == 1) return ctx.set_output(0, first);
    tensor& out = ctx.allocate_output(0, first.shape());
    using C = compute_t<T>;
    T* y = out.data<T>();
    ctx.parallel_for(out.num_elements(), 4096, [&](std::int64_t b, std::int64_t e) {
      constexpr std::int64_t block = 256;
      C acc[block];
      for (std::int64_t s = b; s < e; s += block) {
        const std::int64_t m = std::min(block, e - s);
        const T* x0 = ctx.input(0).data<T>() + s;
        for (std::int64_t k = 0; k < m; ++k) acc[k] = static_cast<C>(x0[k]);
        for (int i = 1; i < n; ++i) {
          const T* x = ctx.input(i).data<T>() + s;
          for (std::int64_t k = 0; k < m; ++k) acc[k] = arith_scalar<wrap_kind::add>(acc[k], static_cast<C>(x[k]));
        }
        for (std::int64_t k = 0; k < m; ++k) y[s + k] = static_cast<T>(acc[k]);
      }
    });
  }
};

/// The CPU kernel of LeakyRelu (Grad false: x > 0 ? x : alpha x) and LeakyReluGrad (Grad
/// true: features > 0 ? g : alpha g) for dtype T; alpha rounded to T first, as TensorFlow's.
template <class T, bool Grad>
struct leaky_relu_kernel final : op_kernel {
  /// The kernel of node n: its alpha is read here, once.
  explicit leaky_relu_kernel(const node& n) : alpha_(static_cast<compute_t<T>>(static_cast<T>(n.attr<double>("alpha")))) {}
  void compute(kernel_context& ctx) const override {
    const tensor& f = ctx.input(Grad ? 1 : 0);
    const tensor& v = ctx.input(0);
    if (Grad && v.shape() != f.shape())
      fail(error_code::invalid_argument, "gradients and features must have the same shape, got ", v.shape(), " and ", f.shape());
    tensor& out = ctx.allocate_output(0, f.shape());
    const T *pf = f.data<T>(), *pv = v.data<T>();
    T* po = out.data<T>();
    using C = compute_t<T>;
    ctx.parallel_for(f.num_elements(), 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const C x = static_cast<C>(pf[i]), g = static_cast<C>(pv[i]);
        po[i] = static_cast<T>(x > C(0) ? g : alpha_ * g);
      }
    });
  }
 private:
  compute_t<T> alpha_;
};
template <class T>
using leaky_relu_forward_kernel = leaky_relu_kernel<T, false>;  ///< LeakyRelu's
template <class T>
using leaky_relu_grad_kernel = leaky_relu_kernel<T, true>;  ///< LeakyReluGrad's

/// The CPU kernel of ClipByValue for dtype T: min(t, max), then max of that and min, in T's
/// compute type (a NaN stays NaN); min and max scalars or of t's shape.
template <class T>
struct clip_by_value_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit clip_by_value_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor &t = ctx.input(0), &lo = ctx.input(1), &hi = ctx.input(2);
    for (const tensor* b : {&lo, &hi})
      if (b->rank() != 0 && b->shape() != t.shape())
        fail(error_code::invalid_argument, b == &lo ? "clip_value_min" : "clip_value_max", " must be a scalar or have t's shape ",
             t.shape(), ", got ", b->shape());
    tensor& out = ctx.allocate_output(0, t.shape());
    const T *pt = t.data<T>(), *pl = lo.data<T>(), *ph = hi.data<T>();
    const std::int64_t sl = lo.rank() == 0 ? 0 : 1, sh = hi.rank() == 0 ? 0 : 1;  // a scalar's stride is 0
    T* po = out.data<T>();
    using C = compute_t<T>;
    ctx.parallel_for(t.num_elements(), 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        C x = static_cast<C>(pt[i]);
        const C l = static_cast<C>(pl[i * sl]), h = static_cast<C>(ph[i * sh]);
        x = x > h ? h : x;
        po[i] = static_cast<T>(x < l ? l : x);
      }
    });
  }
};

/// A template, so that including this header does not instantiate the conversion table.
template <int = 0>
struct cast_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit cast_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    dtype to = ctx.node().output_dtype(0);
    if (to == x.dtype()) return ctx.set_output(0, x);
    convert_into(ctx, x, ctx.allocate_output(0, x.shape()));
  }
};

/// Each elementwise op's CPU kernel, said once: its functor (which the fused kernels of
/// kernels/cpu/fused.hpp evaluate subtrees with), its kernel class and the dtypes it runs
/// on. register_elementwise_kernels() and kernel_for (what typed code asks for) read it.
/// The logical ops run on bool only and have no type attr.
template <class Op>
struct elementwise_cpu;
#define WEFT_DETAIL_ELEMENTWISE(OP, FN, KERNEL, TYPES, TYPED) \
  /** The CPU kernel of OP: functor FN, the kernels of KERNEL, dtypes TYPES. */ \
  template <>                                                  \
  struct elementwise_cpu<ops::OP> {                            \
    using functor = FN; /**< the elementwise functor */        \
    /** The kernel class for dtype T. */                       \
    template <class T>                                         \
    using kernel = typename KERNEL::template of<T>;            \
    using types = TYPES; /**< the dtypes it runs on */         \
    static constexpr bool typed = TYPED; /**< false: bool only, no type attr */ \
  };
template <class F>
using bool_binary_kernel = binary_kernel<F, true>;  ///< comparisons and logical ops: bool output
template <class F>
using bool_unary_kernel = unary_kernel<F, true>;  ///< IsNan, IsInf, IsFinite: bool output
#define WEFT_DETAIL_UNARY_OP(OP, FN, TYPES) WEFT_DETAIL_ELEMENTWISE(OP, FN, unary_kernel<FN>, TYPES, true)
#define WEFT_DETAIL_BINARY_OP(OP, FN, TYPES) WEFT_DETAIL_ELEMENTWISE(OP, FN, binary_kernel<FN>, TYPES, true)
#define WEFT_DETAIL_COMPARISON_OP(OP, FN, TYPES) WEFT_DETAIL_ELEMENTWISE(OP, FN, bool_binary_kernel<FN>, TYPES, true)
WEFT_DETAIL_UNARY_OP(Neg, neg_fn, kernel_signed_types)
WEFT_DETAIL_UNARY_OP(Abs, abs_fn, kernel_signed_real_types)
WEFT_DETAIL_UNARY_OP(Square, square_fn, number_types)
WEFT_DETAIL_UNARY_OP(Sqrt, sqrt_fn, float_complex_types)
WEFT_DETAIL_UNARY_OP(Rsqrt, rsqrt_fn, float_complex_types)
WEFT_DETAIL_UNARY_OP(Exp, exp_fn, float_complex_types)
WEFT_DETAIL_UNARY_OP(Log, log_fn, float_complex_types)
WEFT_DETAIL_UNARY_OP(Tanh, tanh_fn, float_complex_types)
WEFT_DETAIL_UNARY_OP(Sigmoid, sigmoid_fn, float_complex_types)
WEFT_DETAIL_UNARY_OP(Sin, sin_fn, float_types)
WEFT_DETAIL_UNARY_OP(Cos, cos_fn, float_types)
WEFT_DETAIL_UNARY_OP(Tan, tan_fn, float_types)
WEFT_DETAIL_UNARY_OP(Asin, asin_fn, float_types)
WEFT_DETAIL_UNARY_OP(Acos, acos_fn, float_types)
WEFT_DETAIL_UNARY_OP(Atan, atan_fn, float_types)
WEFT_DETAIL_UNARY_OP(Sinh, sinh_fn, float_types)
WEFT_DETAIL_UNARY_OP(Cosh, cosh_fn, float_types)
WEFT_DETAIL_UNARY_OP(Asinh, asinh_fn, float_types)
WEFT_DETAIL_UNARY_OP(Acosh, acosh_fn, float_types)
WEFT_DETAIL_UNARY_OP(Atanh, atanh_fn, float_types)
WEFT_DETAIL_UNARY_OP(Reciprocal, reciprocal_fn, float_types)
WEFT_DETAIL_UNARY_OP(Log1p, log1p_fn, float_types)
WEFT_DETAIL_UNARY_OP(Expm1, expm1_fn, float_types)
WEFT_DETAIL_UNARY_OP(Softplus, softplus_fn, float_types)
WEFT_DETAIL_UNARY_OP(Erf, erf_fn, float_types)
WEFT_DETAIL_UNARY_OP(Floor, floor_fn, float_types)
WEFT_DETAIL_UNARY_OP(Ceil, ceil_fn, float_types)
WEFT_DETAIL_UNARY_OP(Round, round_fn, float_types)
WEFT_DETAIL_UNARY_OP(Sign, sign_fn, kernel_signed_real_types)
WEFT_DETAIL_UNARY_OP(Elu, elu_fn, float_types)
WEFT_DETAIL_UNARY_OP(Selu, selu_fn, float_types)
WEFT_DETAIL_UNARY_OP(Relu6, relu6_fn, float_types)
WEFT_DETAIL_ELEMENTWISE(IsNan, is_nan_fn, bool_unary_kernel<is_nan_fn>, float_types, true)
WEFT_DETAIL_ELEMENTWISE(IsInf, is_inf_fn, bool_unary_kernel<is_inf_fn>, float_types, true)
WEFT_DETAIL_ELEMENTWISE(IsFinite, is_finite_fn, bool_unary_kernel<is_finite_fn>, float_types, true)
WEFT_DETAIL_UNARY_OP(Relu, relu_fn, real_number_types)
WEFT_DETAIL_ELEMENTWISE(LogicalNot, logical_not_fn, unary_kernel<logical_not_fn>, type_list<bool>, false)
WEFT_DETAIL_BINARY_OP(Add, add_fn, number_types)
WEFT_DETAIL_BINARY_OP(Sub, sub_fn, number_types)
WEFT_DETAIL_BINARY_OP(Mul, mul_fn, number_types)
WEFT_DETAIL_BINARY_OP(Div, div_fn, number_types)
WEFT_DETAIL_BINARY_OP(Pow, pow_fn, kernel_pow_types)
WEFT_DETAIL_BINARY_OP(Maximum, maximum_fn, real_number_types)
WEFT_DETAIL_BINARY_OP(Minimum, minimum_fn, real_number_types)
WEFT_DETAIL_BINARY_OP(SquaredDifference, squared_difference_fn, float_types)
WEFT_DETAIL_BINARY_OP(Atan2, atan2_fn, float_types)
WEFT_DETAIL_BINARY_OP(FloorDiv, floor_division_fn<false>, real_number_types)
WEFT_DETAIL_BINARY_OP(FloorMod, floor_division_fn<true>, real_number_types)
WEFT_DETAIL_COMPARISON_OP(Greater, greater_fn, real_number_types)
WEFT_DETAIL_COMPARISON_OP(GreaterEqual, greater_equal_fn, real_number_types)
WEFT_DETAIL_COMPARISON_OP(Less, less_fn, real_number_types)
WEFT_DETAIL_COMPARISON_OP(LessEqual, less_equal_fn, real_number_types)
WEFT_DETAIL_COMPARISON_OP(Equal, equal_fn, all_types)
WEFT_DETAIL_COMPARISON_OP(NotEqual, not_equal_fn, all_types)
WEFT_DETAIL_ELEMENTWISE(LogicalAnd, logical_and_fn, bool_binary_kernel<logical_and_fn>, type_list<bool>, false)
WEFT_DETAIL_ELEMENTWISE(LogicalOr, logical_or_fn, bool_binary_kernel<logical_or_fn>, type_list<bool>, false)
#undef WEFT_DETAIL_COMPARISON_OP
#undef WEFT_DETAIL_BINARY_OP
#undef WEFT_DETAIL_UNARY_OP
#undef WEFT_DETAIL_ELEMENTWISE

/// Op has an entry in the elementwise table.
template <class Op>
concept has_elementwise_cpu = requires { typename elementwise_cpu<Op>::functor; };

/// The elementwise functor of Op.
template <class Op>
using functor_of = typename elementwise_cpu<Op>::functor;

/// Registers the CPU kernel of the table's op Op for dtype T.
template <class Op, class T>
void register_elementwise_kernel() {
  using E = elementwise_cpu<Op>;
  if constexpr (E::typed)
    register_cpu_kernel<typename E::template kernel<T>>(Op::name, {"T", dtype_of<T>});
  else
    register_cpu_kernel<typename E::template kernel<bool>>(Op::name);
}

/// Registers the table's kernels of each op in the list, for each of their dtypes.
template <class Op, class... T>
void register_elementwise_kernels_for(type_list<T...>) {
  (register_elementwise_kernel<Op, T>(), ...);
}
/// Registers Op's table kernels for each of its dtypes (none when Op is not in the table).
template <class Op>
void register_table_kernels_of() {
  if constexpr (has_elementwise_cpu<Op>) register_elementwise_kernels_for<Op>(typename elementwise_cpu<Op>::types{});
}
/// register_table_kernels_of for each op in the list.
template <class... Op>
void register_table_kernels(type_list<Op...>) {
  (register_table_kernels_of<Op>(), ...);
}

/// A template, so that including this header instantiates nothing until it is called.
template <int = 0>
void register_elementwise_kernels() {
  ops::register_math_ops();
  register_table_kernels(ops::families::math::types{});
  register_for<relu_grad_kernel>("ReluGrad", "T", real_number_types{});
  register_for<check_numerics_kernel>("CheckNumerics", "T", float_types{});
  register_for<add_n_kernel>("AddN", "T", number_types{});
  register_for<leaky_relu_forward_kernel>("LeakyRelu", "T", float_types{});
  register_for<leaky_relu_grad_kernel>("LeakyReluGrad", "T", float_types{});
  register_for<clip_by_value_kernel>("ClipByValue", "T", real_number_types{});
  register_for<select_kernel>("SelectV2", "T", all_types{});
  register_for<select_rows_kernel>("Select", "T", all_types{});
  register_cpu_kernel<string_compare_kernel<true>>("Equal", {"T", dtype::string});
  register_cpu_kernel<string_compare_kernel<false>>("NotEqual", {"T", dtype::string});
  register_cpu_kernel<cast_kernel<>>("Cast");
}

}  // namespace weft::cpu

namespace weft {
/// The kernels typed code asks for (framework/kernel_for.hpp): op Op's CPU kernel for dtype T.
template <class Op, class T>
  requires cpu::has_elementwise_cpu<Op>
struct kernel_for<Op, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_elementwise_kernel<Op, T>(); }
};
/// Typed code's registration of ReluGrad's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::ReluGrad, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::relu_grad_kernel<T>>("ReluGrad", {"T", dtype_of<T>}); }
};
/// Typed code's registration of CheckNumerics's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::CheckNumerics, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::check_numerics_kernel<T>>("CheckNumerics", {"T", dtype_of<T>}); }
};
/// Typed code's registration of AddN's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::AddN, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::add_n_kernel<T>>("AddN", {"T", dtype_of<T>}); }
};
/// Typed code's registration of LeakyRelu's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::LeakyRelu, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::leaky_relu_forward_kernel<T>>("LeakyRelu", {"T", dtype_of<T>}); }
};
/// Typed code's registration of LeakyReluGrad's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::LeakyReluGrad, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::leaky_relu_grad_kernel<T>>("LeakyReluGrad", {"T", dtype_of<T>}); }
};
/// Typed code's registration of ClipByValue's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::ClipByValue, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::clip_by_value_kernel<T>>("ClipByValue", {"T", dtype_of<T>}); }
};
/// Typed code's registration of SelectV2's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::SelectV2, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::select_kernel<T>>("SelectV2", {"T", dtype_of<T>}); }
};
/// Typed code's registration of Cast's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel for every pair of dtypes
struct kernel_for<ops::Cast, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::cast_kernel<>>("Cast"); }
};
/// Typed code's registration of every math op's CPU kernels (the family at once). A partial
/// specialization, so that including it instantiates nothing.
template <class T>
struct kernel_for<ops::families::math, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_elementwise_kernels(); }
};
}  // namespace weft

namespace Eigen::internal {
template <class T, bool Reciprocal>
struct functor_traits<weft::cpu::exact_sqrt_op<T, Reciprocal>> {
  /// The 16-bit floats' packets compute in float packets this functor cannot reach: scalar.
  enum {
    Cost = 8,
    PacketAccess = !std::is_same_v<T, Eigen::half> && !std::is_same_v<T, Eigen::bfloat16> &&
                   (Reciprocal ? bool(packet_traits<T>::HasRsqrt) : bool(packet_traits<T>::HasSqrt))
  };
};
template <class T, weft::cpu::rounding R>
struct functor_traits<weft::cpu::signed_rounding_op<T, R>> {
  enum {
    Cost = 2,
    PacketAccess = (std::is_same_v<T, float> || std::is_same_v<T, double>) &&
                   bool(R == weft::cpu::rounding::floor   ? packet_traits<T>::HasFloor
                        : R == weft::cpu::rounding::ceil ? packet_traits<T>::HasCeil
                                                         : packet_traits<T>::HasRint)
  };
};
template <weft::cpu::wrap_kind K, class T>
struct functor_traits<weft::cpu::wrapping_op<K, T>> {
  enum {
    Cost = 1,
    PacketAccess = K == weft::cpu::wrap_kind::add   ? packet_traits<T>::HasAdd
                   : K == weft::cpu::wrap_kind::sub ? packet_traits<T>::HasSub
                   : K == weft::cpu::wrap_kind::neg ? packet_traits<T>::HasNegate
                   : K == weft::cpu::wrap_kind::abs ? packet_traits<T>::HasAbs
                                                    : packet_traits<T>::HasMul
  };
};
}  // namespace Eigen::internal
