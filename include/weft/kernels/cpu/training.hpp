/// @file
/// CPU kernels for ops/training_ops.hpp. An update writes the variable and its slots in
/// place under their locks (resource_variable::update_in_place: copied first when a reader still
/// holds a value), after checking every shape, so a bad input changes nothing. float16 and
/// bfloat16 compute in float.
#pragma once

#include <Eigen/Core>

#include <array>
#include <memory>
#include <vector>

#include <weft/kernels/cpu/common.hpp>
#include <weft/kernels/cpu/convert.hpp>
#include <weft/kernels/cpu/matmul.hpp>
#include <weft/ops/training_ops.hpp>

namespace weft::cpu {

namespace training {

/// A writable Eigen array view of n elements of type C.
template <class C>
using vec = Eigen::Map<Eigen::Array<C, Eigen::Dynamic, 1>>;
/// A read-only Eigen array view of n elements of type C.
template <class C>
using const_vec = Eigen::Map<const Eigen::Array<C, Eigen::Dynamic, 1>>;
/// The runtime's variable class.
using state = resource_variable;

// Each rule: its op's name, `refs` variables (the first is the one updated, the rest its
// slots), the gradient at input `grad`, the other inputs scalar hyperparameters h in order;
// update() applies the rule to n elements of the flat values s (s[0] the variable).

/// ApplyGradientDescent; h: lr.
struct gradient_descent {
  static constexpr const char* op = "ApplyGradientDescent";  ///< the op it runs
  static constexpr int refs = 1;  ///< variables: the one updated, then its slots
  static constexpr int grad = 2;  ///< the gradient's input index
  static constexpr int scalars = 1;  ///< scalar hyperparameters h
  /// Applies the rule to the n elements of s (s[0] the variable, then its slots), g the gradient (the last flag: use_nesterov).
  template <class C>
  static void update(const std::array<C*, refs>& s, const C* g, std::int64_t n, const std::array<C, scalars>& h, bool) {
    vec<C>(s[0], n) -= h[0] * const_vec<C>(g, n);
  }
};
/// ApplyMomentum; h: lr, momentum.
struct momentum {
  static constexpr const char* op = "ApplyMomentum";  ///< the op it runs
  static constexpr int refs = 2;  ///< variables: the one updated, then its slots
  static constexpr int grad = 3;  ///< the gradient's input index
  static constexpr int scalars = 2;  ///< scalar hyperparameters h
  /// Applies the rule to the n elements of s (s[0] the variable, then its slots), g the gradient (the last flag: use_nesterov).
  template <class C>
  static void update(const std::array<C*, refs>& s, const C* gp, std::int64_t n, const std::array<C, scalars>& h,
                     bool nesterov) {
    vec<C> var(s[0], n), accum(s[1], n);
    const_vec<C> g(gp, n);
    accum = accum * h[1] + g;
    if (nesterov) var -= h[0] * (g + h[1] * accum);
    else var -= h[0] * accum;
  }
};
/// ApplyAdagrad; h: lr.
struct adagrad {
  static constexpr const char* op = "ApplyAdagrad";  ///< the op it runs
  static constexpr int refs = 2;  ///< variables: the one updated, then its slots
  static constexpr int grad = 3;  ///< the gradient's input index
  static constexpr int scalars = 1;  ///< scalar hyperparameters h
  /// Applies the rule to the n elements of s (s[0] the variable, then its slots), g the gradient (the last flag: use_nesterov).
  template <class C>
  static void update(const std::array<C*, refs>& s, const C* gp, std::int64_t n, const std::array<C, scalars>& h, bool) {
    vec<C> var(s[0], n), accum(s[1], n);
    const_vec<C> g(gp, n);
    accum += g.square();
    var -= h[0] * g * accum.rsqrt();
  }
};
/// ApplyRMSProp; h: lr, rho, momentum, epsilon.
struct rms_prop {
  static constexpr const char* op = "ApplyRMSProp";  ///< the op it runs
  static constexpr int refs = 3;  ///< variables: the one updated, then its slots
  static constexpr int grad = 7;  ///< the gradient's input index
  static constexpr int scalars = 4;  ///< scalar hyperparameters h
  /// Applies the rule to the n elements of s (s[0] the variable, then its slots), g the gradient (the last flag: use_nesterov).
  template <class C>
  static void update(const std::array<C*, refs>& s, const C* gp, std::int64_t n, const std::array<C, scalars>& h, bool) {
    vec<C> var(s[0], n), ms(s[1], n), mom(s[2], n);
    const_vec<C> g(gp, n);
    ms += (C(1) - h[1]) * (g.square() - ms);
    mom = mom * h[2] + h[0] * g * (ms + h[3]).rsqrt();
    var -= mom;
  }
};
/// ApplyAdam; h: beta1_power, beta2_power, lr, beta1, beta2, epsilon.
struct adam {
  static constexpr const char* op = "ApplyAdam";  ///< the op it runs
  static constexpr int refs = 3;  ///< variables: the one updated, then its slots
  static constexpr int grad = 9;  ///< the gradient's input index
  static constexpr int scalars = 6;  ///< scalar hyperparameters h
  /// Applies the rule to the n elements of s (s[0] the variable, then its slots), g the gradient (the last flag: use_nesterov).
  template <class C>
  static void update(const std::array<C*, refs>& s, const C* gp, std::int64_t n, const std::array<C, scalars>& h,
                     bool nesterov) {
    step(s, gp, n, step_size(h), h, nesterov);
  }
  /// The step size lr sqrt(1 - beta2_power) / (1 - beta1_power).
  template <class C>
  static C step_size(const std::array<C, scalars>& h) {
    return h[2] * std::sqrt(C(1) - h[1]) / (C(1) - h[0]);
  }
  /// update() with the step size lr given (a fused step computes it once for many calls).
  template <class C>
  static void step(const std::array<C*, refs>& s, const C* gp, std::int64_t n, C lr, const std::array<C, scalars>& h,
                   bool nesterov) {
    vec<C> var(s[0], n), m(s[1], n), v(s[2], n);
    const_vec<C> g(gp, n);
    const C beta1 = h[3], beta2 = h[4], eps = h[5];
    m += (g - m) * (C(1) - beta1);
    v += (g.square() - v) * (C(1) - beta2);
    if (nesterov) var -= (m * beta1 + (C(1) - beta1) * g) * lr / (v.sqrt() + eps);
    else var -= m * lr / (v.sqrt() + eps);
  }
};

/// The CPU kernels of Rule's op: `apply_kernel<Rule>::of<T>` for dtype T.
template <class Rule>
struct apply_kernel {
  /// The kernel for variables of dtype T.
  template <class T>
  struct of final : op_kernel {
    /// Reads use_nesterov where the op has it.
    explicit of(const node& n) : nesterov_(n.attrs().contains("use_nesterov") && n.attr<bool>("use_nesterov")) {}
    void compute(kernel_context& ctx) const override {
      using C = compute_t<T>;
      constexpr int R = Rule::refs;
      std::vector<std::shared_ptr<state>> held;
      std::vector<state*> vars;
      for (int i = 0; i < R; ++i) vars.push_back(held.emplace_back(ctx.input_ref_shared(i)).get());
      std::array<C, Rule::scalars> h{};
      for (int i = R, k = 0; i < ctx.num_inputs(); ++i) {
        if (i == Rule::grad) continue;
        const tensor& x = ctx.input(i);
        if (x.num_elements() != 1)
          fail(error_code::invalid_argument, "input ", i, " (a hyperparameter) must be a scalar, got shape ", x.shape());
        h[static_cast<std::size_t>(k++)] = detail::convert<C>(x.data<T>()[0]);
      }
      const tensor& grad = ctx.input(Rule::grad);
      state::update_in_place(vars, [&](const std::vector<tensor*>& values) {
        for (int i = 0; i < R; ++i)
          if (values[static_cast<std::size_t>(i)]->shape() != grad.shape())
            fail(error_code::invalid_argument, "the gradient of shape ", grad.shape(), " does not match variable '",
                 vars[static_cast<std::size_t>(i)]->name(), "' of shape ", values[static_cast<std::size_t>(i)]->shape());
        const std::int64_t n = grad.num_elements();
        if constexpr (is_converted_v<T>) {
          // Half types: chunks of each variable and slot widened on the stack, updated, and
          // narrowed back in place (whole widened copies took 6 times the float update).
          std::array<T*, R> raw{};
          for (int i = 0; i < R; ++i) raw[static_cast<std::size_t>(i)] = values[static_cast<std::size_t>(i)]->template data<T>();
          const T* graw = grad.data<T>();
          ctx.parallel_for(n, 8.0, [&](std::int64_t b, std::int64_t e) {
            constexpr std::int64_t chunk = 512;
            alignas(64) C buf[R][chunk];
            alignas(64) C gbuf[chunk];
            for (std::int64_t lo = b; lo < e; lo += chunk) {
              const std::int64_t len = std::min(chunk, e - lo);
              widen_fn<T>(graw + lo, gbuf, 0, len);
              std::array<C*, R> at{};
              for (int i = 0; i < R; ++i) {
                widen_fn<T>(raw[static_cast<std::size_t>(i)] + lo, buf[i], 0, len);
                at[static_cast<std::size_t>(i)] = buf[i];
              }
              Rule::update(at, gbuf, len, h, nesterov_);
              for (int i = 0; i < R; ++i) narrow_fn<T>(buf[i], raw[static_cast<std::size_t>(i)] + lo, 0, len);
            }
          });
          return;
        }
        std::array<C*, R> ptrs{};
        for (int i = 0; i < R; ++i) ptrs[static_cast<std::size_t>(i)] = values[static_cast<std::size_t>(i)]->template data<C>();
        const C* gp = grad.data<C>();
        ctx.parallel_for(n, 8.0, [&](std::int64_t b, std::int64_t e) {
          std::array<C*, R> at{};
          for (int i = 0; i < R; ++i) at[static_cast<std::size_t>(i)] = ptrs[static_cast<std::size_t>(i)] + b;
          Rule::update(at, gp + b, e - b, h, nesterov_);
        });
      });
      ctx.set_output_ref(0, std::move(held[0]));
    }
   private:
    bool nesterov_;
  };
};

/// _FusedMatMulApplyGradientDescent (float or bfloat16): var -= alpha * op(a) op(b) as one
/// GEMM that adds into the variable where it is (alpha = -learning rate, accumulating; in
/// bfloat16, var + (-alpha) * the float sum rounded once: bgemm_output), under the variable's
/// lock as every update; copied first when a reader still holds its value (so a or b may be
/// the variable itself). Shapes are checked before anything is written.
template <class T>
struct fused_matmul_gradient_descent_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read here, once.
  explicit fused_matmul_gradient_descent_kernel(const node& n)
      : ta_(n.attr<bool>("transpose_a")), tb_(n.attr<bool>("transpose_b")) {}
  void compute(kernel_context& ctx) const override {
    std::shared_ptr<state> var = ctx.input_ref_shared(0);
    const tensor& alpha = ctx.input(1);
    const tensor& a = ctx.input(2);
    const tensor& b = ctx.input(3);
    if (alpha.num_elements() != 1)
      fail(error_code::invalid_argument, "input 1 (alpha) must be a scalar, got shape ", alpha.shape());
    const product_dims d = matrix_product_dims(a.shape(), b.shape(), ta_, tb_);
    const std::int64_t m = d.m, k = d.k, n = d.n;  // plain names: the lambda below captures them
    const float rate = static_cast<float>(alpha.data<T>()[0]);
    state::update_in_place({var.get()}, [&](const std::vector<tensor*>& values) {
      tensor& v = *values.front();
      if (v.shape() != shape{m, n})
        fail(error_code::invalid_argument, "the product of shape ", shape{m, n}, " does not match variable '", var->name(),
             "' of shape ", v.shape());
      if constexpr (std::is_same_v<T, bfloat16>) {
        bgemm_output pass{bfloat16_bits_of(v), n};
        pass.update = true, pass.alpha = -rate;
        bfloat16_product(ctx, a, b, m, k, n, ta_, tb_, pass);
      } else {
        gemm<float>(ctx, a.data<float>(), b.data<float>(), v.data<float>(), m, k, n, ta_, tb_, false, -rate, true);
      }
    });
    ctx.set_output_ref(0, std::move(var));
  }

 private:
  bool ta_, tb_;
};

/// Adam's step (adam::update) on the blocks of a product's float sums, as bgemm hands them
/// over: the sums are the gradient of the block of var, m and v (row stride ld) at the same
/// place.
struct adam_sink final : bgemm_sink {
  std::array<float*, adam::refs> vars;           ///< var, m, v
  std::int64_t ld;                               ///< their row stride
  std::array<float, adam::scalars> h;            ///< beta1_power, beta2_power, lr, beta1, beta2, epsilon
  bool nesterov;                                 ///< use_nesterov
  float lr;                                      ///< the step size: lr sqrt(1 - beta2_power) / (1 - beta1_power)
  /// The sink of var, m and v (row stride ld) with hyperparameters h.
  adam_sink(std::array<float*, adam::refs> s, std::int64_t ld, std::array<float, adam::scalars> h, bool nesterov)
      : vars(s), ld(ld), h(h), nesterov(nesterov), lr(adam::step_size(h)) {}
  /// Adam on rows x cols from (row, column), the gradient `sums` (row stride lds): adam::step,
  /// a row at a time, with the step size computed once.
  void take(const float* sums, std::int64_t lds, std::int64_t row, std::int64_t column, std::int64_t rows,
            std::int64_t cols) const override {
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t at = (row + i) * ld + column;
      adam::step<float>({vars[0] + at, vars[1] + at, vars[2] + at}, sums + i * lds, cols, lr, h, nesterov);
    }
  }
};

/// _FusedMatMulApplyAdam: ApplyAdam on float32 var, m and v whose gradient is op(a) op(b) of
/// bfloat16 a and b (mixed precision's weight gradient, cast to float32 in the graph the
/// session rewrote): bgemm hands each block of the float sums to Adam's step as it completes
/// (adam_sink), so the gradient is not rounded to bfloat16, cast, written or read back. The
/// same step as ApplyAdam's on the float sums (the unfused graph's gradient is those sums
/// rounded to bfloat16). Under the three variables' locks, shapes checked before anything is
/// written, as ApplyAdam.
struct fused_matmul_adam_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read here, once.
  explicit fused_matmul_adam_kernel(const node& n)
      : ta_(n.attr<bool>("transpose_a")), tb_(n.attr<bool>("transpose_b")), nesterov_(n.attr<bool>("use_nesterov")) {}
  void compute(kernel_context& ctx) const override {
    std::vector<std::shared_ptr<state>> held;
    std::vector<state*> vars;
    for (int i = 0; i < adam::refs; ++i) vars.push_back(held.emplace_back(ctx.input_ref_shared(i)).get());
    std::array<float, adam::scalars> h{};
    for (int i = adam::refs; i < adam::refs + adam::scalars; ++i) {
      const tensor& x = ctx.input(i);
      if (x.num_elements() != 1)
        fail(error_code::invalid_argument, "input ", i, " (a hyperparameter) must be a scalar, got shape ", x.shape());
      h[static_cast<std::size_t>(i - adam::refs)] = x.data<float>()[0];
    }
    const tensor& a = ctx.input(adam::refs + adam::scalars);
    const tensor& b = ctx.input(adam::refs + adam::scalars + 1);
    const product_dims d = matrix_product_dims(a.shape(), b.shape(), ta_, tb_);
    const std::int64_t m = d.m, k = d.k, n = d.n;  // plain names: the lambda below captures them
    state::update_in_place(vars, [&](const std::vector<tensor*>& values) {
      for (int i = 0; i < adam::refs; ++i)
        if (values[static_cast<std::size_t>(i)]->shape() != shape{m, n})
          fail(error_code::invalid_argument, "the product of shape ", shape{m, n}, " does not match variable '",
               vars[static_cast<std::size_t>(i)]->name(), "' of shape ", values[static_cast<std::size_t>(i)]->shape());
      const adam_sink sink({values[0]->data<float>(), values[1]->data<float>(), values[2]->data<float>()}, n, h, nesterov_);
      bgemm_output pass;
      pass.sink = &sink;
      bfloat16_product(ctx, a, b, m, k, n, ta_, tb_, pass);
    });
    ctx.set_output_ref(0, std::move(held[0]));
  }

 private:
  bool ta_, tb_, nesterov_;
};

/// Registers the fused Adam step's kernel (float32 state, bfloat16 operands; with ApplyAdam's
/// float32 kernel: a session uses the op only where its kernel is registered).
inline void register_fused_adam_kernel() {
  register_cpu_kernel<fused_matmul_adam_kernel>(ops::fused_matmul_adam_op, {"T", dtype::float32});
}

/// Registers the fused update's kernel of dtype T (float or bfloat16; with
/// ApplyGradientDescent's kernel of T: a session uses the op only where its kernel is
/// registered).
template <class T>
void register_fused_update_kernel() {
  register_cpu_kernel<fused_matmul_gradient_descent_kernel<T>>(ops::fused_matmul_gradient_descent_op, {"T", dtype_of<T>});
}
/// Registers the fused update's kernels of every dtype it has.
inline void register_fused_update_kernel() {
  register_fused_update_kernel<float>();
  register_fused_update_kernel<bfloat16>();
}

}  // namespace training

/// A template, so that including this header instantiates nothing until it is called.
template <int = 0>
void register_training_kernels() {
  ops::register_training_ops();
  using types = type_list<half, bfloat16, float, double>;
  register_for<training::apply_kernel<training::gradient_descent>::of>(training::gradient_descent::op, "T", types{});
  register_for<training::apply_kernel<training::momentum>::of>(training::momentum::op, "T", types{});
  register_for<training::apply_kernel<training::adagrad>::of>(training::adagrad::op, "T", types{});
  register_for<training::apply_kernel<training::rms_prop>::of>(training::rms_prop::op, "T", types{});
  register_for<training::apply_kernel<training::adam>::of>(training::adam::op, "T", types{});
  training::register_fused_update_kernel();
  training::register_fused_adam_kernel();
}

}  // namespace weft::cpu

/// The kernels typed code asks for (framework/kernel_for.hpp), by op type.
namespace weft {
/// Typed code's registration of ApplyGradientDescent's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::ApplyGradientDescent, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() {
    register_cpu_kernel<typename cpu::training::apply_kernel<cpu::training::gradient_descent>::template of<T>>("ApplyGradientDescent", {"T", dtype_of<T>});
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bfloat16>) cpu::training::register_fused_update_kernel<T>();
  }
};
/// Typed code's registration of ApplyMomentum's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::ApplyMomentum, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::training::apply_kernel<cpu::training::momentum>::template of<T>>("ApplyMomentum", {"T", dtype_of<T>}); }
};
/// Typed code's registration of ApplyAdagrad's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::ApplyAdagrad, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::training::apply_kernel<cpu::training::adagrad>::template of<T>>("ApplyAdagrad", {"T", dtype_of<T>}); }
};
/// Typed code's registration of ApplyRMSProp's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::ApplyRMSProp, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::training::apply_kernel<cpu::training::rms_prop>::template of<T>>("ApplyRMSProp", {"T", dtype_of<T>}); }
};
/// Typed code's registration of ApplyAdam's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::ApplyAdam, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() {
    register_cpu_kernel<typename cpu::training::apply_kernel<cpu::training::adam>::template of<T>>("ApplyAdam", {"T", dtype_of<T>});
    if constexpr (std::is_same_v<T, float>) cpu::training::register_fused_adam_kernel();
  }
};
/// Typed code's registration of the fused Adam step's CPU kernel (float32 state).
template <class T>
struct kernel_for<ops::FusedMatMulApplyAdam, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::training::register_fused_adam_kernel(); }
};
/// Typed code's registration of the fused update's CPU kernels (float and bfloat16, its dtypes).
template <class T>
struct kernel_for<ops::FusedMatMulApplyGradientDescent, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::training::register_fused_update_kernel(); }
};
/// Typed code's registration of every training op's CPU kernels (the family at once). A
/// partial specialization, so that including it instantiates nothing.
template <class T>
struct kernel_for<ops::families::training, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_training_kernels(); }
};
}  // namespace weft
