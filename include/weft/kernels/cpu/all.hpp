/// @file
/// The full CPU kernel registry. Include this in ONE translation unit of a program (it
/// registers every kernel during static initialisation); other files include only
/// <weft/weft.hpp>. Compiling it costs minutes of CPU time, paid once (docs/benchmarks.md);
/// to spread that over several translation units, call each register_*_kernels() of
/// <weft/kernels/cpu/kernels.hpp> in a file of its own instead.
#pragma once

#include <weft/kernels/cpu/kernels.hpp>
#include <weft/ops/all.hpp>

namespace weft::cpu {

/// Registers every standard op and every CPU kernel, once (the kernel registry's full set).
inline bool register_all_kernels() {
  static const bool done = [] {
    ops::register_standard_ops();
    register_array_kernels();
    register_elementwise_kernels();
    register_reduction_kernels();
    register_matmul_kernels();
    register_linalg_kernels();
    register_random_kernels();
    register_state_kernels();
    register_nn_kernels();
    register_training_kernels();
    register_io_kernels();
    register_data_flow_kernels();
    register_parsing_kernels();
    register_summary_kernels();
    return true;
  }();
  return done;
}

namespace detail {
inline const bool all_kernels_registered = register_all_kernels();
}  // namespace detail

}  // namespace weft::cpu
