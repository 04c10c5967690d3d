/// @file
/// Every CPU kernel family: kernel templates, their register_*_kernels() functions and their
/// kernel_for specializations (framework/kernel_for.hpp).
/// Including this instantiates nothing; a program registers what it uses, for example
/// weft::cpu::register_core_kernels() and weft::cpu::register_matmul_kernel<float>(), or
/// includes <weft/kernels/cpu/all.hpp> in one translation unit for the full registry.
#pragma once

#include <weft/kernels/cpu/array.hpp>
#include <weft/kernels/cpu/data_flow.hpp>
#include <weft/kernels/cpu/elementwise.hpp>
#include <weft/kernels/cpu/fused.hpp>
#include <weft/kernels/cpu/io.hpp>
#include <weft/kernels/cpu/linalg.hpp>
#include <weft/kernels/cpu/matmul.hpp>
#include <weft/kernels/cpu/nn.hpp>
#include <weft/kernels/cpu/parsing.hpp>
#include <weft/kernels/cpu/random.hpp>
#include <weft/kernels/cpu/reduction.hpp>
#include <weft/kernels/cpu/state.hpp>
#include <weft/kernels/cpu/summary.hpp>
#include <weft/kernels/cpu/training.hpp>
