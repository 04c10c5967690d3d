// weft: the umbrella header. Graphs, sessions and the runtime; no kernel bodies (see
// <weft/kernels/cpu/all.hpp>, included by one translation unit of a program).
#pragma once

#include <weft/core/dtype.hpp>
#include <weft/core/eigen.hpp>
#include <weft/core/error.hpp>
#include <weft/core/shape.hpp>
#include <weft/core/tensor.hpp>
#include <weft/graph/graph.hpp>
#include <weft/graph/op_registry.hpp>
#include <weft/runtime/executor.hpp>
#include <weft/runtime/kernel.hpp>
#include <weft/runtime/session.hpp>
#include <weft/runtime/timeline.hpp>

#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
