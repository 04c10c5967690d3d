// Every standard op family, and register_standard_ops() to add them all to the registry,
// for programs that build graphs by op name without registering kernel families (to dump
// or validate them, say). <weft/kernels/cpu/all.hpp> calls it.
#pragma once

#include <weft/ops/array_ops.hpp>
#include <weft/ops/control_flow_ops.hpp>
#include <weft/ops/core_ops.hpp>
#include <weft/ops/io_ops.hpp>
#include <weft/ops/math_ops.hpp>
#include <weft/ops/matrix_ops.hpp>
#include <weft/ops/nn_ops.hpp>
#include <weft/ops/random_ops.hpp>
#include <weft/ops/reduction_ops.hpp>
#include <weft/ops/state_ops.hpp>
#include <weft/ops/training_ops.hpp>

namespace weft::ops {

// The standard families that have op types (the control-flow ops are run by the executor
// and have none).
using standard_families = type_list<families::core, families::array, families::math, families::reduction,
                                    families::matrix, families::random, families::state, families::nn,
                                    families::training, families::io>;

inline void register_standard_ops() {
  []<class... F>(type_list<F...>) { (F::define(), ...); }(standard_families{});
  register_control_flow_ops();
}

}  // namespace weft::ops
