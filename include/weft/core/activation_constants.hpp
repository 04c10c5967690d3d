/// @file
/// Constants of activation functions, written once for every device's kernels and for the
/// GPU's generated fused code. No includes: nvcc compiles it (cuda/launch.cuh).
#pragma once

namespace weft {

/// Selu's alpha (Klambauer et al. 2017, as TensorFlow's): selu(x) = scale alpha (e^x - 1)
/// where x <= 0.
inline constexpr double selu_alpha = 1.6732632423543772848170429916717;
/// Selu's scale: selu(x) = scale x where x > 0.
inline constexpr double selu_scale = 1.0507009873554804934193349852946;

}  // namespace weft
