/// @file
/// Seeded random ops. With seed = seed2 = 0 the stream is seeded from the system; with
/// either set, the sequence of values a node produces over successive runs is
/// reproducible (the node keeps a counter, like TensorFlow's per-kernel generator).
///   RandomUniform:        [0, 1)
///   RandomStandardNormal: mean 0, stddev 1
///   TruncatedNormal:      normal, redrawn until within two standard deviations
#pragma once

#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>

namespace weft::ops {

/// The random family's op definitions (registered by register_random_ops()).
std::vector<op_def> random_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> random_op_defs() {
  std::vector<op_def> defs;
  for (const char* name : {"RandomUniform", "RandomStandardNormal", "TruncatedNormal"})
    defs.push_back(op_def_builder(name)
                       .input("shape: T")
                       .output("output: dtype")
                       .attr("T: {int32, int64}")
                       .attr("dtype: {float16, bfloat16, float32, float64}")
                       .attr("seed: int = 0")
                       .attr("seed2: int = 0")
                       .stateful()
                       .shape_fn([](shape_context& c) { shape_from_input(c, 0); })
                       .build());
  return defs;
}
#endif

/// Adds the random ops to the global registry, once; registering the family's kernels
/// calls it.
inline void register_random_ops() { op_registry::global().add_family("random", random_op_defs); }

/// The ops of this family as C++ types (framework/kernel_for.hpp).
WEFT_DETAIL_OP_TYPE(RandomUniform, random)
WEFT_DETAIL_OP_TYPE(RandomStandardNormal, random)
WEFT_DETAIL_OP_TYPE(TruncatedNormal, random)
namespace families {  // the whole family (its kernels for every dtype, on each device type)
/// The random family as a C++ type: use_kernels<ops::families::random>() registers its ops and kernels.
struct random {
  static constexpr const char* name = "random";  ///< the family's name
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using types = type_list<RandomUniform, RandomStandardNormal, TruncatedNormal>;  ///< its op types
  /// Registers the family's op definitions.
  static void define() { register_random_ops(); }
};
}  // namespace families

}  // namespace weft::ops
