/// @file
/// Every GPU kernel and the GPU device, registered. Include this in ONE .cpp file of a
/// program that runs graphs on GPUs, and compile <weft/cuda/launch.cuh> in one .cu file (the
/// CMake component weft::cuda does both: link weft::cuda and weft::cuda_kernels); other
/// files include <weft/weft.hpp> alone, and ask for GPUs with
/// session_options::device_count = {{"GPU", 1}}.
#pragma once

#include <weft/cuda/device.hpp>
#include <weft/cuda/fused.hpp>
#include <weft/cuda/kernels.hpp>

namespace weft::cuda::detail {
inline const bool all_gpu_kernels_registered = register_gpu_kernels() && register_gpu_fused_kernel();
}  // namespace weft::cuda::detail
