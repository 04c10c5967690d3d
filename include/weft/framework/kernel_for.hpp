/// @file
/// How typed code asks for an op's kernels without naming a device's kernel classes.
///
/// An op is also a C++ type (ops::Add, ops::MatMul, a user's op): a struct with the op's
/// registered `name`, a static `define()` that adds its definition (usually its whole
/// family) to the op registry, and its gradient rule where it has one
/// (framework/gradient_rule.hpp, docs/extending.md). Each device type's backend says how it registers the op's
/// kernel for dtype T by specializing kernel_for<Op, T, Device> beside that kernel (the
/// CPU kernels' headers specialize it for device_types::cpu). The DSL calls
/// use_kernels<Op, T>(), which defines the op and registers its kernels on every device type
/// of kernel_device_types, once per program: a program compiles the kernels of the ops and
/// dtypes its typed code uses, and nothing else (DESIGN.md §2, compile cost).
///
/// T is the dtype the kernel is asked for, or void where the op's kernel is one class for
/// every dtype (Reshape, Shape) or the request is for a whole family (ops::families::array).
///
/// A specialization must be visible in the translation unit that instantiates the request
/// (the DSL instantiates its requests where a model is lowered): <weft/dsl.hpp> includes the
/// CPU kernels' headers; a user op's kernel header is included by the user's code.
#pragma once

#include <concepts>
#include <string_view>

#include <weft/core/dtype.hpp>

namespace weft {

/// Device types: one tag per backend, named as the kernel registry names its device type.
namespace device_types {
/// The CPU backend.
struct cpu {
  static constexpr const char* name = "CPU";  ///< the kernel registry's device type
};
}  // namespace device_types

/// The device types whose kernels typed code registers (the CUDA component will add its own).
using kernel_device_types = type_list<device_types::cpu>;

/// An op as a C++ type.
template <class Op>
concept op_type = requires {
  { Op::name } -> std::convertible_to<std::string_view>;
  Op::define();
};

namespace detail {
template <class...>
inline constexpr bool no_kernel_for = false;
}  // namespace detail

/// Specialized by each backend: `static void register_kernels()` registers Op's kernel for
/// dtype T on Device.
template <class Op, class T, class Device>
struct kernel_for {
  static_assert(detail::no_kernel_for<Op, T, Device>,
                "weft: no kernel for this op on this device type is visible here; include the header that "
                "specializes weft::kernel_for for it (for the library's ops: <weft/dsl.hpp>, or the op family's "
                "header under <weft/kernels/cpu/>)");
  /// Registers the kernel (never reached: the static_assert fails first).
  static void register_kernels() {}
};

/// WEFT_PREBUILT_CPU_KERNELS: define it, the same in every file of a program, where the
/// program compiles the full CPU kernel registry once (<weft/kernels/cpu/all.hpp> in one
/// file, or each register_*_kernels() of <weft/kernels/cpu/kernels.hpp>). Typed code then
/// compiles no CPU kernel of the library's ops (each says so with `in_cpu_registry`): the
/// registry has registered them all. It still compiles those of fused subtrees and of users'
/// ops. Without the registry, running a model is an error naming the op with no kernel.
/// (The DSL tests' translation unit under ASan: 240 s against 185 s; docs/reliability.md.)
namespace detail {
template <class Op, class Device>
consteval bool kernels_prebuilt() {
#ifdef WEFT_PREBUILT_CPU_KERNELS
  if constexpr (std::same_as<Device, device_types::cpu>) return requires { requires Op::in_cpu_registry; };
#endif
  return false;
}
template <class Op, class T, class Device>
void register_kernels_on() {
  if constexpr (!kernels_prebuilt<Op, Device>()) kernel_for<Op, T, Device>::register_kernels();
}
}  // namespace detail

/// Defines Op and registers its kernels for dtype T on every device type, once.
template <op_type Op, class T = void>
void use_kernels() {
  static const bool once = [] {
    Op::define();
    []<class... D>(type_list<D...>) { (detail::register_kernels_on<Op, T, D>(), ...); }(kernel_device_types{});
    return true;
  }();
  (void)once;
}

}  // namespace weft
