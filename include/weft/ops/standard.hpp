/// @file
/// Every standard op family, and register_standard_ops() to add them all to the registry,
/// for programs that build graphs by op name without registering kernel families (to dump
/// or validate them, say; <weft/kernels/cpu/all.hpp> calls it); standard_ops() and
/// standard_op_family(), every standard op's family from the families' op types.
#pragma once

#include <string_view>
#include <type_traits>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/ops/array_ops.hpp>
#include <weft/ops/control_flow_ops.hpp>
#include <weft/ops/core_ops.hpp>
#include <weft/ops/data_flow_ops.hpp>
#include <weft/ops/io_ops.hpp>
#include <weft/ops/math_ops.hpp>
#include <weft/ops/matrix_ops.hpp>
#include <weft/ops/nn_ops.hpp>
#include <weft/ops/parsing_ops.hpp>
#include <weft/ops/random_ops.hpp>
#include <weft/ops/reduction_ops.hpp>
#include <weft/ops/state_ops.hpp>
#include <weft/ops/summary_ops.hpp>
#include <weft/ops/training_ops.hpp>

namespace weft::ops {

/// The standard families that have op types (the control-flow ops are run by the executor
/// and have none).
using standard_families = type_list<families::core, families::array, families::math, families::reduction,
                                    families::matrix, families::random, families::state, families::nn,
                                    families::training, families::io, families::data_flow,
                                    families::parsing, families::summary>;

/// Registers every standard family's op definitions.
inline void register_standard_ops() {
  []<class... F>(type_list<F...>) { (F::define(), ...); }(standard_families{});
  register_control_flow_ops();
}

/// Every standard op outside the core with its family: the op types of each family (so that
/// an op is named in one place, its family's header) and the control-flow ops.
const std::vector<standard_op>& standard_ops();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE const std::vector<standard_op>& standard_ops() {
  static const std::vector<standard_op> all = [] {
    std::vector<standard_op> out;
    [&]<class... F>(type_list<F...>) {
      const auto add = [&]<class Family, class... Op>(Family, type_list<Op...>) {
        if constexpr (!std::is_same_v<Family, families::core>) (out.push_back({Op::name, Family::name}), ...);
      };
      (add(F{}, typename F::types{}), ...);
    }(standard_families{});
    for (std::string_view name : control_flow_op_names) out.push_back({name, "control"});
    return out;
  }();
  return all;
}
#endif

/// The family of the standard op `name`, or an empty view when weft has no such op.
inline std::string_view standard_op_family(std::string_view name) {
  for (const auto& op : standard_ops())
    if (op.name == name) return op.family;
  return {};
}

}  // namespace weft::ops
