// GraphViz DOT of a graph (`dot -Tsvg`): write_dot(g, out), to_dot(g), either with a placement.
#pragma once

#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <weft/graph/graph.hpp>
#include <weft/graph/passes/placement.hpp>

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
// and one cluster per requested device. With a placement (session::placement(), or
// passes::place()), one cluster per device the nodes were placed on instead, each device's
// boxes filled with its own colour, the simulated start and finish in each label, and the
// nodes the placed run does not need left grey outside the clusters.
inline void write_dot(const graph& g, std::ostream& out, const passes::placement* placed = nullptr) {
  out << "digraph weft {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  static constexpr const char* colours[] = {"#a6cee3", "#fdbf6f", "#b2df8a", "#fb9a99", "#cab2d6", "#ffff99", "#8dd3c7", "#bebada"};
  std::map<std::string, std::vector<int>> by_device;
  std::map<int, const passes::node_placement*> records;
  if (placed)
    for (const auto& r : placed->nodes) records[r.node] = &r;
  auto device_of = [&](int id) -> int {
    if (!placed || static_cast<std::size_t>(id) >= placed->device_of.size()) return -1;
    return placed->device_of[static_cast<std::size_t>(id)];
  };
  for (int id = 0; id < g.size(); ++id) {
    const int d = device_of(id);
    by_device[placed ? (d >= 0 ? placed->device_names[static_cast<std::size_t>(d)] : std::string()) : g.at(id).device()]
        .push_back(id);
  }
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
      const int d = device_of(id);
      if (d >= 0 && records.count(id)) {
        const auto* r = records[id];
        out << "\\n" << r->start * 1e6 << "-" << r->finish * 1e6 << " us";
      }
      out << "\"";
      if (d >= 0)
        out << ", style=filled, fillcolor=\"" << colours[static_cast<std::size_t>(d) % std::size(colours)] << "\"";
      else if (placed)
        out << ", color=grey, fontcolor=grey";
      out << "];\n";
    }
    if (!device.empty()) out << "  }\n";
  }
  for (int id = 0; id < g.size(); ++id) {
    const node& n = g.at(id);
    for (const auto& in : n.inputs()) {
      out << "  n" << in.node << " -> n" << n.id() << " [label=\"" << in.port << "\"";
      const int from = device_of(in.node), to = device_of(id);
      if (from >= 0 && to >= 0 && from != to) out << ", color=red, penwidth=2";  // a transfer between devices
      out << "];\n";
    }
    for (int c : n.control_inputs()) out << "  n" << c << " -> n" << n.id() << " [style=dotted];\n";
  }
  out << "}\n";
}

inline std::string to_dot(const graph& g, const passes::placement* placed = nullptr) {
  std::ostringstream out;
  write_dot(g, out, placed);
  return out.str();
}

}  // namespace weft
