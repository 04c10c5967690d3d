/// @file
/// weft: the umbrella header. Graphs, sessions, the runtime and the standard op
/// definitions; no kernel bodies (see <weft/kernels/cpu/all.hpp>, included by one
/// translation unit of a program). A program compiles only the op families it registers
/// (<weft/ops/core_ops.hpp>).
#pragma once

#include <weft/core/checked.hpp>
#include <weft/core/dtype.hpp>
#include <weft/core/eigen.hpp>
#include <weft/core/error.hpp>
#include <weft/core/shape.hpp>
#include <weft/core/tensor.hpp>
#include <weft/graph/control_flow.hpp>
#include <weft/graph/data_flow.hpp>
#include <weft/graph/gradients.hpp>
#include <weft/graph/graph.hpp>
#include <weft/graph/graph_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/graph/optimizers.hpp>
#include <weft/ops/all.hpp>
#include <weft/runtime/checkpoint.hpp>
#include <weft/runtime/model.hpp>
#include <weft/kernels/cpu/io.hpp>  // the saver's Save and Restore kernels (its kernel_for specialization)
#include <weft/runtime/executor.hpp>
#include <weft/runtime/kernel.hpp>
#include <weft/runtime/mutex.hpp>
#include <weft/runtime/queue.hpp>
#include <weft/runtime/pipeline.hpp>
#include <weft/runtime/queue_runner.hpp>
#include <weft/runtime/session.hpp>
#include <weft/tools/dot.hpp>
#include <weft/tools/progress.hpp>
#include <weft/tools/summary.hpp>
#include <weft/tools/timeline.hpp>

#define WEFT_VERSION_MAJOR 0  ///< weft's version: major
#define WEFT_VERSION_MINOR 1  ///< weft's version: minor
#define WEFT_VERSION_PATCH 0  ///< weft's version: patch
