// GraphViz DOT of a graph (`dot -Tsvg`): write_dot(g, out), to_dot(g).
#pragma once

#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <weft/graph/graph.hpp>

namespace weft {

namespace detail {
inline std::string dot_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}
}  // namespace detail

// GraphViz DOT of g: one box per node (name, op, dtype and shape), dotted control edges,
// and one cluster per requested device.
inline void write_dot(const graph& g, std::ostream& out) {
  out << "digraph weft {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  std::map<std::string, std::vector<int>> by_device;
  for (int id = 0; id < g.size(); ++id) by_device[g.at(id).device()].push_back(id);
  int cluster = 0;
  for (const auto& [device, ids] : by_device) {
    std::string indent = "  ";
    if (!device.empty()) {
      out << "  subgraph cluster_" << cluster++ << " {\n    label=\"" << detail::dot_escape(device) << "\";\n";
      indent = "    ";
    }
    for (int id : ids) {
      const node& n = g.at(id);
      out << indent << "n" << id << " [label=\"" << detail::dot_escape(n.name()) << "\\n" << n.op();
      for (int p = 0; p < n.num_outputs(); ++p) out << "\\n" << n.output_dtype(p) << n.output_shape(p);
      out << "\"];\n";
    }
    if (!device.empty()) out << "  }\n";
  }
  for (int id = 0; id < g.size(); ++id) {
    const node& n = g.at(id);
    for (const auto& in : n.inputs())
      out << "  n" << in.node << " -> n" << n.id() << " [label=\"" << in.port << "\"];\n";
    for (int c : n.control_inputs()) out << "  n" << c << " -> n" << n.id() << " [style=dotted];\n";
  }
  out << "}\n";
}

inline std::string to_dot(const graph& g) {
  std::ostringstream out;
  write_dot(g, out);
  return out.str();
}

}  // namespace weft
