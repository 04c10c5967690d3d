/// @file
/// Fused nodes written out as their ops: each Fused node (the typed DSL's fusion,
/// ops/fused_ops.hpp) becomes the elementwise nodes of its subtree, read back from its
/// `expr` attr. A Fused node's CPU kernel is compiled from the subtree's C++ type, so only the
/// program that built the model has it; the expanded graph runs wherever the standard
/// elementwise kernels are (save_model writes models this way, runtime/model.hpp).
///
/// The subtree's root keeps the Fused node's name (what reads "name:0" still does); its
/// other ops are named "<name>/<op>_<k>", k counting in the subtree's pre-order. Each keeps
/// the node's device, colocation and control inputs. The ops broadcast as the Fused node
/// did (numpy's rule, both ways), and each op's dtype is checked against the subtree's.
#pragma once

#include <string>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/graph/graph.hpp>
#include <weft/ops/fused_ops.hpp>

namespace weft::passes {

/// Whether `g` has a Fused node.
inline bool has_fused(const graph& g) {
  for (int id = 0; id < g.size(); ++id)
    if (g.at(id).op() == "Fused") return true;
  return false;
}

/// `g` with every Fused node written out as its ops (`g` itself when it has none).
graph expand_fused(const graph& g);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE graph expand_fused(const graph& g) {
  if (!has_fused(g)) return g;
  std::vector<node_spec> specs;
  std::vector<std::pair<std::string, dtype>> checks;  // (node, the dtype the subtree gives it)
  for (int id = 0; id < g.size(); ++id) {
    const node& n = g.at(id);
    if (n.op() != "Fused") {
      specs.push_back(spec_of(g, n));
      continue;
    }
    std::vector<std::string> controls;
    for (int c : n.control_inputs()) controls.push_back("^" + g.at(c).name());
    const fused::expr_node root = fused::parse(n.attr<std::string>("expr"));
    const auto& slots = n.attr<std::vector<std::int64_t>>("slots");
    int counter = 0;
    // Adds the nodes of `e` and returns the name of its value ("node:0" or an input).
    auto add = [&](auto& self, const fused::expr_node& e, bool is_root) -> std::string {
      if (e.op.empty()) {
        if (e.leaf < 0 || static_cast<std::size_t>(e.leaf) >= slots.size() || slots[static_cast<std::size_t>(e.leaf)] < 0 ||
            slots[static_cast<std::size_t>(e.leaf)] >= n.num_inputs())
          fail(error_code::invalid_argument, "expand_fused: ", n.describe(), ": leaf ", e.leaf, " has no input (slots ",
               attr_value(slots), ", ", n.num_inputs(), " inputs)");
        return g.name_of(n.inputs()[static_cast<std::size_t>(slots[static_cast<std::size_t>(e.leaf)])]);
      }
      const std::string name = is_root ? n.name() : n.name() + "/" + e.op + "_" + std::to_string(counter);
      ++counter;
      node_spec s{name, e.op, {}, {}, n.device(), n.colocation()};
      for (const auto& a : e.args) s.inputs.push_back(self(self, a, false));
      s.inputs.insert(s.inputs.end(), controls.begin(), controls.end());
      if (e.op == "Cast") s.attrs.set("DstT", e.type);
      checks.emplace_back(name, e.type);
      specs.push_back(std::move(s));
      return name;
    };
    if (root.op.empty()) fail(error_code::invalid_argument, "expand_fused: ", n.describe(), ": its expr is a leaf, not an op");
    add(add, root, true);
  }
  graph out;
  try {
    out.import(specs);
  } catch (const error& e) {
    fail(e.code(), "expand_fused: ", e.what());
  }
  for (const auto& [name, type] : checks)
    if (out[name].output_dtype(0) != type)
      fail(error_code::invalid_argument, "expand_fused: ", out[name].describe(), " gives ", out[name].output_dtype(0),
           " where its Fused subtree says ", type);
  return out;
}
#endif

}  // namespace weft::passes
