/// @file
/// CPU kernels for Variable, Assign, AssignAdd, AssignSub, AccumulatorPush and
/// AccumulatorPop. Updates build a new buffer and swap it in under the variable's lock, so
/// readers of the old value are never torn.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <weft/kernels/cpu/common.hpp>
#include <weft/ops/state_ops.hpp>

namespace weft::cpu {

/// The CPU kernel of Variable.
struct variable_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit variable_kernel(const node& n)
      : container_(n.attr<std::string>("container")),
        name_(n.attr<std::string>("shared_name").empty() ? n.name() : n.attr<std::string>("shared_name")),
        dtype_(n.attr<dtype>("dtype")),
        shape_(n.attr<partial_shape>("shape")) {}
  void compute(kernel_context& ctx) const override {
    ctx.set_output_ref(0, ctx.resources().lookup_or_create_variable(container_, name_, dtype_, shape_));
  }
 private:
  std::string container_, name_;
  dtype dtype_;
  partial_shape shape_;
};

/// The CPU kernel of Assign.
struct assign_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit assign_kernel(const node& n) : validate_(n.attr<bool>("validate_shape")) {}
  void compute(kernel_context& ctx) const override {
    auto var = ctx.input_ref_shared(0);
    const tensor& value = ctx.input(1);
    if (validate_ && !var->declared_shape().accepts(value.shape()))
      fail(error_code::invalid_argument, "value of shape ", value.shape(), " does not match variable '", var->name(),
           "' of shape ", var->declared_shape());
    var->assign(value);
    ctx.set_output_ref(0, std::move(var));
  }
 private:
  bool validate_;
};

/// AssignAdd (Add) and AssignSub: the variable updated in place by the delta.
template <bool Add>
struct assign_update_kernel {
  /// The kernel for dtype T.
  template <class T>
  struct of final : op_kernel {
    /// The kernel of a node (it reads no attrs).
    explicit of(const node&) {}
    void compute(kernel_context& ctx) const override {
      auto var = ctx.input_ref_shared(0);
      const tensor& delta = ctx.input(1);
      var->update([&](const tensor& old) {
        if (old.shape() != delta.shape())
          fail(error_code::invalid_argument, "value of shape ", delta.shape(), " does not match variable '",
               var->name(), "' of shape ", old.shape());
        tensor next(old.dtype(), old.shape());
        const T* a = old.data<T>();
        const T* d = delta.data<T>();
        T* o = next.data<T>();
        for (std::int64_t i = 0, n = old.num_elements(); i < n; ++i) {
          if constexpr (std::is_integral_v<T>) {  // wraps, instead of overflowing a signed type
            using U = std::make_unsigned_t<T>;
            o[i] = static_cast<T>(static_cast<U>(Add ? U(a[i]) + U(d[i]) : U(a[i]) - U(d[i])));
          } else {
            o[i] = Add ? T(a[i] + d[i]) : T(a[i] - d[i]);
          }
        }
        return next;
      });
      ctx.set_output_ref(0, std::move(var));
    }
  };
};

/// The iteration path an accumulator key holds (an int64 vector).
inline std::vector<std::int64_t> accumulator_path(const tensor& key) {
  const std::int64_t* p = key.data<std::int64_t>();
  return std::vector<std::int64_t>(p, p + key.num_elements());
}

/// The CPU kernel of AccumulatorPush.
struct accumulator_push_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit accumulator_push_kernel(const node& n) : name_(n.attr<std::string>("accumulator")) {}
  void compute(kernel_context& ctx) const override {
    // A dead value (from a branch the iteration did not take) is kept as dead.
    ctx.store().put({name_, accumulator_path(ctx.input(0))}, ctx.input_dead(1) ? tensor() : ctx.input(1));
    ctx.set_output(0, ctx.input(0));
  }
 private:
  std::string name_;
};

/// The CPU kernel of AccumulatorPop.
struct accumulator_pop_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit accumulator_pop_kernel(const node& n)
      : name_(n.attr<std::string>("accumulator")), dtype_(n.attr<dtype>("dtype")), shape_(n.attr<partial_shape>("shape")) {}
  void compute(kernel_context& ctx) const override {
    tensor t = ctx.store().take({name_, accumulator_path(ctx.input(0))});
    if (!t.valid()) return ctx.set_output_dead(0);
    if (t.dtype() != dtype_ || !shape_.accepts(t.shape()))
      fail(error_code::internal, "accumulator '", name_, "' holds ", t.dtype(), t.shape(), ", not ", dtype_, shape_);
    ctx.set_output(0, std::move(t));
  }
 private:
  std::string name_;
  dtype dtype_;
  partial_shape shape_;
};

/// A template, so that including this header instantiates nothing until it is called.
template <int = 0>
void register_state_kernels() {
  ops::register_state_ops();
  register_cpu_kernel<variable_kernel>("Variable");
  register_cpu_kernel<assign_kernel>("Assign");
  register_for<assign_update_kernel<true>::of>("AssignAdd", "T", number_types{});
  register_for<assign_update_kernel<false>::of>("AssignSub", "T", number_types{});
  register_cpu_kernel<accumulator_push_kernel>("AccumulatorPush");
  register_cpu_kernel<accumulator_pop_kernel>("AccumulatorPop");
}

}  // namespace weft::cpu

/// The kernels typed code asks for (framework/kernel_for.hpp), by op type.
namespace weft {
/// Typed code's registration of Variable's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Variable, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::variable_kernel>("Variable"); }
};
/// Typed code's registration of Assign's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Assign, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::assign_kernel>("Assign"); }
};
/// Typed code's registration of AccumulatorPush's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::AccumulatorPush, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::accumulator_push_kernel>("AccumulatorPush"); }
};
/// Typed code's registration of AccumulatorPop's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::AccumulatorPop, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::accumulator_pop_kernel>("AccumulatorPop"); }
};
/// Typed code's registration of AssignAdd's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::AssignAdd, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::assign_update_kernel<true>::template of<T>>("AssignAdd", {"T", dtype_of<T>}); }
};
/// Typed code's registration of AssignSub's CPU kernel (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::AssignSub, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<typename cpu::assign_update_kernel<false>::template of<T>>("AssignSub", {"T", dtype_of<T>}); }
};
/// Typed code's registration of every state op's CPU kernels (the family at once). A
/// partial specialization, so that including it instantiates nothing.
template <class T>
struct kernel_for<ops::families::state, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_state_kernels(); }
};
}  // namespace weft
