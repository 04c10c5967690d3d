/// @file
/// A node of the dataflow graph (graph.hpp), and what names one: an output `node:port`, the
/// options a node is added with, and a node by names only (node_spec) as serialized models
/// describe it. Nodes are made and validated by the graph only.
#pragma once

#include <compare>
#include <string>
#include <string_view>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/framework/shape_context.hpp>

namespace weft {

/// One output of a node: `node:port`.
struct output {
  int node = -1;  ///< the node's id in its graph (-1: none)
  int port = 0;   ///< which of its outputs, from 0
  /// Equal when both the node and the port are.
  friend bool operator==(const output&, const output&) = default;
  /// Ordered by node, then port (outputs as map keys).
  friend auto operator<=>(const output&, const output&) = default;
};

class graph;

/// A node of a graph: an op with attrs, data inputs and control inputs, the device it asks
/// for, and the dtypes and inferred shapes of its outputs. Made by graph::op (checked there)
/// and immutable once added.
class node {
 public:
  /// The node's id: its index in its graph, in the order nodes were added.
  int id() const noexcept { return id_; }
  /// The node's name, unique in its graph ("layer1/MatMul").
  const std::string& name() const noexcept { return name_; }
  /// The op's name ("MatMul").
  const std::string& op() const noexcept { return def_->name; }
  /// The op's definition: inputs, outputs, attrs and shape function.
  const op_def& def() const noexcept { return *def_; }
  /// Every attr, the op's defaults filled in.
  const attr_map& attrs() const noexcept { return attrs_; }
  /// Attr `key` as T; a missing attr or another kind is an error naming the node.
  template <class T>
  const T& attr(std::string_view key) const {
    return get_attr<T>(attrs_, key, describe());
  }
  /// The data inputs: other nodes' outputs, in the op's order.
  const std::vector<output>& inputs() const noexcept { return inputs_; }
  /// The ids of the nodes that must finish before this one starts.
  const std::vector<int>& control_inputs() const noexcept { return control_inputs_; }
  /// The device the node asks for ("/device:GPU:0"; empty: any), which placement honours.
  const std::string& device() const noexcept { return device_; }
  /// The colocation group: the name of the node this one must be placed with (empty: none).
  /// Groups are flat: colocating with a colocated node joins that node's group.
  const std::string& colocation() const noexcept { return colocation_; }
  /// How many data inputs.
  int num_inputs() const noexcept { return static_cast<int>(inputs_.size()); }
  /// How many outputs.
  int num_outputs() const noexcept { return static_cast<int>(output_dtypes_.size()); }
  /// Input i's dtype.
  dtype input_dtype(int i) const { return input_dtypes_.at(static_cast<std::size_t>(i)); }
  /// Whether input i is a variable reference ("Ref(T)" in the op).
  bool input_is_ref(int i) const { return input_is_ref_.at(static_cast<std::size_t>(i)); }
  /// Output i's dtype.
  dtype output_dtype(int i) const { return output_dtypes_.at(static_cast<std::size_t>(i)); }
  /// Output i's shape as the op's shape function inferred it (dims or the rank may be unknown).
  const partial_shape& output_shape(int i) const { return output_shapes_.at(static_cast<std::size_t>(i)); }
  /// Whether output i is a variable reference.
  bool output_is_ref(int i) const { return output_is_ref_.at(static_cast<std::size_t>(i)); }
  /// Output `port`; a port the node does not have is an error naming it.
  output out(int port = 0) const {
    if (port < 0 || port >= num_outputs())
      fail(error_code::out_of_range, describe(), ": has no output ", port, " (it has ", num_outputs(), ")");
    return {id_, port};
  }
  /// A node stands for its first output.
  operator output() const { return out(0); }  // NOLINT: a node stands for its first output

  /// "node 'layer1/MatMul' (MatMul)": how every error names a node.
  std::string describe() const { return "node '" + name_ + "' (" + def_->name + ")"; }

 private:
  friend class graph;
  int id_ = -1;
  std::string name_;
  const op_def* def_ = nullptr;
  attr_map attrs_;
  std::vector<output> inputs_;
  std::vector<int> control_inputs_;
  std::string device_;
  std::string colocation_;
  std::vector<dtype> input_dtypes_;
  std::vector<bool> input_is_ref_;
  std::vector<dtype> output_dtypes_;
  std::vector<partial_shape> output_shapes_;
  std::vector<bool> output_is_ref_;
};

/// Options of one added node; fields left empty take the graph's current scopes.
/// g.op("MatMul", {a, b}, {}, "mm") names the node; node_options("mm").on("/cpu:0").after({init.id()})
/// also sets its device and control inputs, and .colocate("w") places it with node w.
struct node_options {
  std::string name;                 ///< default: the op name, made unique
  std::vector<int> control_inputs;  ///< node ids
  std::string device = {};         ///< the device asked for ("/device:GPU:0")
  std::string colocate_with = {};  ///< a node name

  node_options() = default;
  node_options(const char* n) : name(n) {}          ///< a bare string is a name
  node_options(std::string n) : name(std::move(n)) {}  ///< a bare string is a name
  /// Asks for device d.
  node_options& on(std::string d) {
    device = std::move(d);
    return *this;
  }
  /// Adds control inputs: the node runs after the nodes of `ids`.
  node_options& after(std::vector<int> ids) {
    control_inputs.insert(control_inputs.end(), ids.begin(), ids.end());
    return *this;
  }
  /// Places the node with node `node_name` (its colocation group).
  node_options& colocate(std::string node_name) {
    colocate_with = std::move(node_name);
    return *this;
  }
};

/// A node by names only, as a serialized or runtime-built model describes it.
struct node_spec {
  std::string name;                         ///< the node's name
  std::string op;                           ///< the op's name
  std::vector<std::string> inputs;          ///< "node", "node:port"; "^node" is a control input
  attr_map attrs;                           ///< the attrs given (the op's defaults fill the rest)
  std::string device = {};                  ///< the device asked for (empty: any)
  std::string colocate_with = {};  ///< a node name, of this graph or of the specs
};

}  // namespace weft
