// Neural-network ops, with TensorFlow's semantics. The class axis is the last one.
//   BiasAdd(value, bias; data_format = 'NHWC')  value + bias along value's last dim
//                                            (value of rank >= 2; NHWC only)
//   BiasAddGrad(out_backprop)                out_backprop summed over all but its last dim
//   Softmax(logits), LogSoftmax(logits)      along the last dim (rank >= 1)
//   SoftmaxCrossEntropyWithLogits(features [b, n], labels [b, n])
//                                            -> loss [b] = -sum(labels * log_softmax(features)),
//                                               backprop [b, n] = softmax(features) - labels
//   SparseSoftmaxCrossEntropyWithLogits(features [b, n], labels [b] int32/int64)
//                                            the same with one-hot labels; a label outside
//                                            [0, n) is an error
//   L2Loss(t)                                sum(t^2) / 2, a scalar
#pragma once

#include <vector>

#include <weft/graph/op_def.hpp>
#include <weft/graph/op_registry.hpp>
#include <weft/ops/common.hpp>
#include <weft/ops/math_ops.hpp>

namespace weft::ops {

namespace detail {
// Fails unless dims a and b (either unknown: -1) agree; returns the known one.
inline std::int64_t merge_dim(shape_context& c, std::int64_t a, std::int64_t b, const char* what) {
  if (a >= 0 && b >= 0 && a != b) c.fail(what, " differ (", a, " vs ", b, ")");
  return a >= 0 ? a : b;
}
inline void require_nhwc(shape_context& c) {
  if (c.attr<std::string>("data_format") != "NHWC")
    c.fail("data_format '", c.attr<std::string>("data_format"), "' is not supported; weft's CPU kernels take NHWC");
}
}  // namespace detail

inline std::vector<op_def> nn_op_defs() {
  std::vector<op_def> defs;
  defs.push_back(op_def_builder("BiasAdd")
                     .input("value: T")
                     .input("bias: T")
                     .output("output: T")
                     .attr(real_float_type_attr)
                     .attr("data_format: string = 'NHWC'")
                     .shape_fn([](shape_context& c) {
                       detail::require_nhwc(c);
                       require_rank_at_least(c, 0, 2, "value");
                       require_rank(c, 1, 1, "bias");
                       partial_shape out = c.input(0);
                       if (out.rank_known() && c.input(1).rank_known()) {
                         auto dims = out.dims();
                         dims.back() = detail::merge_dim(c, dims.back(), c.input(1)[0],
                                                         "the bias length and value's last dimension");
                         out = partial_shape(dims);
                       }
                       c.set_output(0, out);
                     })
                     .build());
  defs.push_back(op_def_builder("BiasAddGrad")
                     .input("out_backprop: T")
                     .output("output: T")
                     .attr(real_float_type_attr)
                     .attr("data_format: string = 'NHWC'")
                     .shape_fn([](shape_context& c) {
                       detail::require_nhwc(c);
                       require_rank_at_least(c, 0, 2, "out_backprop");
                       const auto& in = c.input(0);
                       c.set_output(0, in.rank_known() ? partial_shape{in[in.rank() - 1]} : partial_shape::unknown_of_rank(1));
                     })
                     .build());
  for (const char* name : {"Softmax", "LogSoftmax"})
    defs.push_back(op_def_builder(name)
                       .input("logits: T")
                       .output(std::string_view(name) == "Softmax" ? "softmax: T" : "logsoftmax: T")
                       .attr(real_float_type_attr)
                       .shape_fn([](shape_context& c) {
                         require_rank_at_least(c, 0, 1, "logits");
                         c.set_output(0, c.input(0));
                       })
                       .build());
  defs.push_back(op_def_builder("SoftmaxCrossEntropyWithLogits")
                     .input("features: T")
                     .input("labels: T")
                     .output("loss: T")
                     .output("backprop: T")
                     .attr(real_float_type_attr)
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 2, "features");
                       require_rank(c, 1, 2, "labels");
                       partial_shape f = c.input(0), l = c.input(1);
                       if (!f.rank_known()) f = partial_shape::unknown_of_rank(2);
                       if (!l.rank_known()) l = partial_shape::unknown_of_rank(2);
                       auto b = detail::merge_dim(c, f[0], l[0], "the batch sizes of features and labels");
                       auto n = detail::merge_dim(c, f[1], l[1], "the class counts of features and labels");
                       c.set_output(0, partial_shape{b});
                       c.set_output(1, partial_shape{b, n});
                     })
                     .build());
  defs.push_back(op_def_builder("SparseSoftmaxCrossEntropyWithLogits")
                     .input("features: T")
                     .input("labels: Tlabels")
                     .output("loss: T")
                     .output("backprop: T")
                     .attr(real_float_type_attr)
                     .attr("Tlabels: {int32, int64} = int64")
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 2, "features");
                       require_rank(c, 1, 1, "labels");
                       partial_shape f = c.input(0);
                       if (!f.rank_known()) f = partial_shape::unknown_of_rank(2);
                       auto b = c.input(1).rank_known()
                                    ? detail::merge_dim(c, f[0], c.input(1)[0], "the batch sizes of features and labels")
                                    : f[0];
                       c.set_output(0, partial_shape{b});
                       c.set_output(1, partial_shape{b, f[1]});
                     })
                     .build());
  defs.push_back(op_def_builder("L2Loss")
                     .input("t: T")
                     .output("output: T")
                     .attr(real_float_type_attr)
                     .shape_fn(scalar_shape)
                     .build());
  return defs;
}

// Adds the NN ops to the global registry, once; registering the family's kernels calls it.
inline void register_nn_ops() { op_registry::global().add_family("nn", nn_op_defs); }

}  // namespace weft::ops
