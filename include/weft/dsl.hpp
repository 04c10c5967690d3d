/// @file
/// weft's typed front end: models written as C++ expressions whose dtypes and static shapes
/// the compiler checks, lowered to the runtime graph (with CSE and elementwise fusion) and
/// run by a client_session. See docs/tutorial.md.
///
/// The DSL asks for each op's kernels through weft::kernel_for (framework/kernel_for.hpp);
/// the CPU kernels' headers below specialize it. Including them instantiates nothing: a
/// program compiles the kernels of the ops and dtypes its typed code lowers.
#pragma once

#include <weft/weft.hpp>
#include <weft/kernels/cpu/kernels.hpp>

#include <weft/dsl/static_shape.hpp>
#include <weft/dsl/checks.hpp>
#include <weft/dsl/expr.hpp>
#include <weft/dsl/tensor_of.hpp>
#include <weft/dsl/leaves.hpp>
#include <weft/dsl/ops.hpp>
#include <weft/dsl/reduction_ops.hpp>
#include <weft/dsl/array_ops.hpp>
#include <weft/dsl/random_ops.hpp>
#include <weft/dsl/state_ops.hpp>
#include <weft/dsl/nn_ops.hpp>
#include <weft/dsl/layers.hpp>
#include <weft/dsl/handle.hpp>
#include <weft/dsl/fusion.hpp>
#include <weft/dsl/gradient.hpp>
#include <weft/dsl/control_flow.hpp>
#include <weft/dsl/functional_ops.hpp>
#include <weft/dsl/train.hpp>
#include <weft/dsl/client_session.hpp>
#include <weft/dsl/input.hpp>
