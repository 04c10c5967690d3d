// The full CPU kernel registry. Include this in ONE translation unit of a program (it
// registers every kernel during static initialisation); other files include only
// <weft/weft.hpp>. Compiling it costs tens of seconds, paid once; see docs/benchmarks.md.
#pragma once

#include <weft/kernels/cpu/array.hpp>
#include <weft/kernels/cpu/elementwise.hpp>
#include <weft/kernels/cpu/linalg.hpp>
#include <weft/kernels/cpu/matmul.hpp>
#include <weft/kernels/cpu/random.hpp>
#include <weft/kernels/cpu/reduction.hpp>
#include <weft/kernels/cpu/state.hpp>

namespace weft::cpu {

inline bool register_all_kernels() {
  static const bool done = [] {
    register_array_kernels();
    register_elementwise_kernels();
    register_reduction_kernels();
    register_matmul_kernels();
    register_linalg_kernels();
    register_random_kernels();
    register_state_kernels();
    return true;
  }();
  return done;
}

namespace detail {
inline const bool all_kernels_registered = register_all_kernels();
}  // namespace detail

}  // namespace weft::cpu
