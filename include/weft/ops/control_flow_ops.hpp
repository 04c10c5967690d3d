/// @file
/// Control-flow ops (whitepaper §4.4, TensorFlow's definitions). The executor runs them
/// itself (runtime/executor.hpp); they have no kernels.
///   Switch(data, pred) -> (output_false, output_true)
///                           data on the output pred selects; the other output is dead
///   Merge(inputs...) -> (output, value_index)
///                           the first live input and its index, once every control input
///                           arrived; dead when every input is dead
///   Enter(data; frame_name, is_constant, parallel_iterations)
///                           data into the loop frame `frame_name`, a child of the node's
///                           frame: into its first iteration, or into every iteration when
///                           is_constant (a loop invariant)
///   Exit(data)              data out of its frame into the parent frame, once: the live
///                           value of the iteration that ends the loop
///   NextIteration(data)     data into the next iteration of its frame (into a Merge)
///   LoopCond(input)         the loop's predicate, a bool scalar, unchanged
/// A loop is Enter -> Merge -> Switch(LoopCond) -> body -> NextIteration -> the same Merge,
/// with Switch's false output into Exit. The Merge is built with its Enter twice and its
/// second input then set to the NextIteration by graph::close_loop, the graph's one back
/// edge. An untaken branch's values are dead: nodes with a dead input do not run and pass
/// deadness on, and a dead NextIteration ends its chain.
#pragma once

#include <string>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>

namespace weft::ops {

/// The most specific shape that accepts both a and b: their dims where they agree.
inline partial_shape common_shape(const partial_shape& a, const partial_shape& b) {
  if (!a.rank_known() || !b.rank_known() || a.rank() != b.rank()) return partial_shape::unknown_rank();
  std::vector<std::int64_t> dims(static_cast<std::size_t>(a.rank()));
  for (int i = 0; i < a.rank(); ++i) dims[static_cast<std::size_t>(i)] = a[i] == b[i] ? a[i] : unknown_dim;
  return partial_shape(std::move(dims));
}

/// The control-flow ops (run by the executor; they have no op types).
inline constexpr std::string_view control_flow_op_names[] = {"Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond"};

/// Whether op is one of control_flow_op_names.
inline bool is_control_flow_op(std::string_view op) {
  for (std::string_view name : control_flow_op_names)
    if (op == name) return true;
  return false;
}

/// The control_flow family's op definitions (registered by register_control_flow_ops()).
std::vector<op_def> control_flow_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> control_flow_op_defs() {
  std::vector<op_def> defs;
  defs.push_back(op_def_builder("Switch")
                     .control_flow(flow::switch_)
                     .input("data: T")
                     .input("pred: bool")
                     .output("output_false: T")
                     .output("output_true: T")
                     .attr("T: any type")
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 1, 0, "pred");
                       c.set_output(0, c.input(0));
                       c.set_output(1, c.input(0));
                     })
                     .build());
  defs.push_back(op_def_builder("Merge")
                     .control_flow(flow::merge)
                     .input("inputs: N * T")
                     .output("output: T")
                     .output("value_index: int32")
                     .attr("T: any type")
                     .attr("N: int")
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       if (c.num_inputs() < 1) c.fail("Merge needs at least one input");
                       partial_shape s = c.input(0);
                       for (int i = 1; i < c.num_inputs(); ++i) s = common_shape(s, c.input(i));
                       c.set_output(0, s);
                       c.set_output(1, partial_shape(std::vector<std::int64_t>{}));
                     })
                     .build());
  defs.push_back(op_def_builder("Enter")
                     .control_flow(flow::enter)
                     .input("data: T")
                     .output("output: T")
                     .attr("T: any type")
                     .attr("frame_name: string")
                     .attr("is_constant: bool = false")
                     .attr("parallel_iterations: int = 10")
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       if (c.attr<std::string>("frame_name").empty()) c.fail("frame_name must not be empty");
                       if (c.attr<std::int64_t>("parallel_iterations") < 1)
                         c.fail("parallel_iterations must be at least 1, got ", c.attr<std::int64_t>("parallel_iterations"));
                       c.set_output_same_as_input();
                     })
                     .build());
  for (const char* name : {"Exit", "NextIteration"})
    defs.push_back(op_def_builder(name).input("data: T").output("output: T").attr("T: any type").cheap()
                       .control_flow(std::string_view(name) == "Exit" ? flow::exit : flow::next_iteration)
                       .shape_fn([](shape_context& c) { c.set_output_same_as_input(); })
                       .build());
  defs.push_back(op_def_builder("LoopCond")
                     .control_flow(flow::loop_cond)
                     .input("input: bool")
                     .output("output: bool")
                     .cheap()
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 0, "input");
                       c.set_output_same_as_input();
                     })
                     .build());
  return defs;
}
#endif

/// Adds the control-flow ops to the global registry, once.
inline void register_control_flow_ops() { op_registry::global().add_family("control", control_flow_op_defs); }

}  // namespace weft::ops
