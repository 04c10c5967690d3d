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
  int node = -1;
  int port = 0;
  friend bool operator==(const output&, const output&) = default;
  friend auto operator<=>(const output&, const output&) = default;
};

class graph;

class node {
 public:
  int id() const noexcept { return id_; }
  const std::string& name() const noexcept { return name_; }
  const std::string& op() const noexcept { return def_->name; }
  const op_def& def() const noexcept { return *def_; }
  const attr_map& attrs() const noexcept { return attrs_; }
  template <class T>
  const T& attr(std::string_view key) const {
    return get_attr<T>(attrs_, key, describe());
  }
  const std::vector<output>& inputs() const noexcept { return inputs_; }
  const std::vector<int>& control_inputs() const noexcept { return control_inputs_; }
  const std::string& device() const noexcept { return device_; }
  /// The colocation group: the name of the node this one must be placed with (empty: none).
  /// Groups are flat: colocating with a colocated node joins that node's group.
  const std::string& colocation() const noexcept { return colocation_; }
  int num_inputs() const noexcept { return static_cast<int>(inputs_.size()); }
  int num_outputs() const noexcept { return static_cast<int>(output_dtypes_.size()); }
  dtype input_dtype(int i) const { return input_dtypes_.at(static_cast<std::size_t>(i)); }
  bool input_is_ref(int i) const { return input_is_ref_.at(static_cast<std::size_t>(i)); }
  dtype output_dtype(int i) const { return output_dtypes_.at(static_cast<std::size_t>(i)); }
  const partial_shape& output_shape(int i) const { return output_shapes_.at(static_cast<std::size_t>(i)); }
  bool output_is_ref(int i) const { return output_is_ref_.at(static_cast<std::size_t>(i)); }
  output out(int port = 0) const {
    if (port < 0 || port >= num_outputs())
      fail(error_code::out_of_range, describe(), ": has no output ", port, " (it has ", num_outputs(), ")");
    return {id_, port};
  }
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
  std::string device = {};
  std::string colocate_with = {};  ///< a node name

  node_options() = default;
  node_options(const char* n) : name(n) {}          // NOLINT: a bare string is a name
  node_options(std::string n) : name(std::move(n)) {}  // NOLINT
  node_options& on(std::string d) {
    device = std::move(d);
    return *this;
  }
  node_options& after(std::vector<int> ids) {
    control_inputs.insert(control_inputs.end(), ids.begin(), ids.end());
    return *this;
  }
  node_options& colocate(std::string node_name) {
    colocate_with = std::move(node_name);
    return *this;
  }
};

/// A node by names only, as a serialized or runtime-built model describes it.
struct node_spec {
  std::string name;
  std::string op;
  std::vector<std::string> inputs;          ///< "node", "node:port"; "^node" is a control input
  attr_map attrs;
  std::string device = {};
  std::string colocate_with = {};  ///< a node name, of this graph or of the specs
};

}  // namespace weft
