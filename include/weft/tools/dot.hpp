/// @file
/// GraphViz pictures of a graph: `to_dot(g, options)` / `write_dot(g, out, options)` give DOT
/// text, `render_svg(dot_text)` and `write_svg(g, path, options)` run Graphviz's `dot` (Debian's
/// graphviz package) to make SVG.
///
/// Name scopes ("layer1/w", "gradients/layer1/MatMul_grad/...") become nested clusters, so
/// a model's layers, its gradient and its optimizer's slots read at a glance; scopes named in
/// `dot_options::collapse`, or nested deeper than `dot_options::depth`, are drawn as one box
/// each (with their node count), with the edges between boxes merged. Nodes are coloured by
/// device: the device each node was placed on when a placement is given (session::placement(),
/// passes::place()), with its simulated start and finish in the label and the nodes the
/// placed run does not need in grey; else the device a node requests, where it names one. A
/// legend lists the colours. Control edges are dotted; control-flow nodes have shapes of their
/// own (Switch and Merge diamonds, Enter and Exit trapezia, LoopCond an octagon, NextIteration
/// a circle), the edges out of a NextIteration are drawn as blue back edges, and nodes inside a
/// loop have a blue border; transfers between devices are red.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <weft/core/error.hpp>
#include <weft/core/file.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/graph/graph.hpp>
#include <weft/graph/passes/frames.hpp>
#include <weft/graph/passes/placement.hpp>

namespace weft {

/// What a picture of a graph shows (to_dot, write_dot, write_svg).
struct dot_options {
  const passes::placement* placed = nullptr;  ///< colour by the devices nodes were placed on
  bool scopes = true;                         ///< name scopes as nested clusters
  int depth = -1;                             ///< scopes nested deeper than this are one box each (-1: none)
  std::vector<std::string> collapse{};        ///< scopes drawn as one box each ("gradients", "Adam")
};

namespace detail {
inline std::string dot_escape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out;
}

/// The scopes of a node name: "a/b/c" is in "a" and "a/b".
inline std::vector<std::string> dot_scopes_of(const std::string& name) {
  std::vector<std::string> out;
  for (std::size_t p = name.find('/'); p != std::string::npos; p = name.find('/', p + 1))
    if (p > 0) out.push_back(name.substr(0, p));
  return out;
}

inline const char* dot_shape(flow kind) {
  switch (kind) {
    case flow::switch_:
    case flow::merge: return "diamond";
    case flow::enter: return "invtrapezium";
    case flow::exit: return "trapezium";
    case flow::next_iteration: return "circle";
    case flow::loop_cond: return "octagon";
    default: return "box";
  }
}
}  // namespace detail

/// Writes the DOT text of g to `out`, drawn as `options` say.
void write_dot(const graph& g, std::ostream& out, const dot_options& options);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void write_dot(const graph& g, std::ostream& out, const dot_options& options) {
  static constexpr const char* colours[] = {"#a6cee3", "#fdbf6f", "#b2df8a", "#fb9a99", "#cab2d6", "#ffff99", "#8dd3c7", "#bebada"};
  const passes::placement* placed = options.placed;
  const int n = g.size();
  // Each node's device (an index into `devices`, -1 for none) and its placement record.
  std::vector<std::string> devices;
  std::vector<int> device_of(static_cast<std::size_t>(n), -1);
  std::map<int, const passes::node_placement*> records;
  if (placed) {
    devices = placed->device_names;
    for (const auto& r : placed->nodes) records[r.node] = &r;
    for (int id = 0; id < n && static_cast<std::size_t>(id) < placed->device_of.size(); ++id)
      device_of[static_cast<std::size_t>(id)] = placed->device_of[static_cast<std::size_t>(id)];
  } else {
    std::map<std::string, int> index;
    for (int id = 0; id < n; ++id) {
      const std::string& d = g.at(id).device();
      if (d.empty()) continue;
      auto [it, fresh] = index.emplace(d, static_cast<int>(devices.size()));
      if (fresh) devices.push_back(d);
      device_of[static_cast<std::size_t>(id)] = it->second;
    }
  }
  auto colour = [&](int d) { return colours[static_cast<std::size_t>(d) % std::size(colours)]; };
  // Which nodes run inside a loop (frames of an unchecked analysis: a malformed graph is
  // still drawn, without the marks).
  std::vector<bool> in_loop(static_cast<std::size_t>(n), false);
  try {
    const auto frames = passes::find_frames(g, false);
    for (int id = 0; id < n; ++id) in_loop[static_cast<std::size_t>(id)] = frames.of(id) != 0;
  } catch (const error&) {
  }

  // Where each node is drawn: its own box, or the box of the outermost collapsed scope it is in.
  const std::set<std::string> collapse(options.collapse.begin(), options.collapse.end());
  std::vector<std::string> box_scope(static_cast<std::size_t>(n));  // "" for its own box
  std::vector<std::vector<std::string>> scopes(static_cast<std::size_t>(n));
  for (int id = 0; id < n; ++id) {
    auto all = options.scopes || !collapse.empty() || options.depth >= 0 ? detail::dot_scopes_of(g.at(id).name())
                                                                         : std::vector<std::string>{};
    for (std::size_t k = 0; k < all.size(); ++k)
      if (collapse.count(all[k]) || (options.depth >= 0 && static_cast<int>(k) >= options.depth)) {
        box_scope[static_cast<std::size_t>(id)] = all[k];
        all.resize(k);  // drawn in the collapsed scope's parents
        break;
      }
    scopes[static_cast<std::size_t>(id)] = options.scopes ? std::move(all) : std::vector<std::string>{};
  }
  auto vertex = [&](int id) {
    const auto& s = box_scope[static_cast<std::size_t>(id)];
    return s.empty() ? "n" + std::to_string(id) : "\"scope:" + detail::dot_escape(s) + "\"";
  };

  // The cluster tree: each scope's nodes and collapsed boxes, and its child scopes.
  struct cluster {
    std::vector<int> nodes;
    std::map<std::string, std::vector<int>> boxes;  // collapsed scope -> its nodes
    std::set<std::string> children;
  };
  std::map<std::string, cluster> clusters;  // "" is the top level
  for (int id = 0; id < n; ++id) {
    const auto& sc = scopes[static_cast<std::size_t>(id)];
    std::string parent;
    for (const auto& s : sc) {
      clusters[parent].children.insert(s);
      parent = s;
    }
    const auto& box = box_scope[static_cast<std::size_t>(id)];
    if (box.empty()) clusters[parent].nodes.push_back(id);
    else clusters[parent].boxes[box].push_back(id);
  }

  out << "digraph weft {\n  rankdir=TB;\n  compound=true;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  int cluster_id = 0;
  auto draw_node = [&](int id, const std::string& indent) {
    const node& nd = g.at(id);
    out << indent << "n" << id << " [label=\"" << detail::dot_escape(nd.name()) << "\\n" << nd.op();
    for (int p = 0; p < nd.num_outputs(); ++p) out << "\\n" << nd.output_dtype(p) << nd.output_shape(p);
    const int d = device_of[static_cast<std::size_t>(id)];
    if (placed && d >= 0 && records.count(id)) {
      const auto* r = records[id];
      out << "\\n" << r->start * 1e6 << "-" << r->finish * 1e6 << " us";
    }
    out << "\"";
    if (nd.def().control != flow::plain) out << ", shape=" << detail::dot_shape(nd.def().control);
    if (d >= 0) out << ", style=filled, fillcolor=\"" << colour(d) << "\"";
    else if (placed) out << ", color=grey, fontcolor=grey";
    if (in_loop[static_cast<std::size_t>(id)]) out << ", color=\"#1f78b4\", penwidth=2";
    out << "];\n";
  };
  auto draw_box = [&](const std::string& scope, const std::vector<int>& ids, const std::string& indent) {
    std::set<int> devs;
    for (int id : ids) devs.insert(device_of[static_cast<std::size_t>(id)]);
    out << indent << "\"scope:" << detail::dot_escape(scope) << "\" [label=\"" << detail::dot_escape(scope) << "/\\n"
        << ids.size() << (ids.size() == 1 ? " node" : " nodes") << "\", shape=box3d";
    if (devs.size() == 1 && *devs.begin() >= 0) out << ", style=filled, fillcolor=\"" << colour(*devs.begin()) << "\"";
    out << "];\n";
  };
  auto draw = [&](auto& self, const std::string& scope, const std::string& indent) -> void {
    const cluster& c = clusters[scope];
    for (const auto& child : c.children) {
      const auto slash = child.rfind('/');
      out << indent << "subgraph cluster_" << cluster_id++ << " {\n"
          << indent << "  label=\"" << detail::dot_escape(slash == std::string::npos ? child : child.substr(slash + 1))
          << "\";\n"
          << indent << "  style=rounded;\n";
      self(self, child, indent + "  ");
      out << indent << "}\n";
    }
    for (const auto& [box, ids] : c.boxes) draw_box(box, ids, indent);
    for (int id : c.nodes) draw_node(id, indent);
  };
  draw(draw, "", "  ");

  // Edges; those into or out of a collapsed box merged, with their count.
  std::map<std::pair<std::string, std::string>, int> merged;
  for (int id = 0; id < n; ++id) {
    const node& nd = g.at(id);
    const std::string to = vertex(id);
    for (const auto& in : nd.inputs()) {
      const std::string from = vertex(in.node);
      if (from == to && from[0] == '"') continue;  // inside one collapsed box
      const int a = device_of[static_cast<std::size_t>(in.node)], b = device_of[static_cast<std::size_t>(id)];
      if (from[0] == '"' || to[0] == '"') {
        ++merged[{from, to}];
        continue;
      }
      out << "  " << from << " -> " << to << " [label=\"" << in.port << "\"";
      if (g.at(in.node).def().control == flow::next_iteration) out << ", color=\"#1f78b4\", style=bold, constraint=false";
      else if (a >= 0 && b >= 0 && a != b) out << ", color=red, penwidth=2";  // a transfer between devices
      out << "];\n";
    }
    for (int c : nd.control_inputs()) {
      const std::string from = vertex(c);
      if (from == to && from[0] == '"') continue;
      if (from[0] == '"' || to[0] == '"') {
        ++merged[{from, to}];
        continue;
      }
      out << "  " << from << " -> " << to << " [style=dotted];\n";
    }
  }
  for (const auto& [edge, count] : merged) {
    out << "  " << edge.first << " -> " << edge.second;
    if (count > 1) out << " [label=\"" << count << "\"]";
    out << ";\n";
  }
  if (!devices.empty()) {
    out << "  subgraph cluster_legend {\n    label=\"devices\";\n    style=dashed;\n";
    for (std::size_t d = 0; d < devices.size(); ++d)
      out << "    \"legend:" << d << "\" [label=\"" << detail::dot_escape(devices[d]) << "\", style=filled, fillcolor=\""
          << colour(static_cast<int>(d)) << "\"];\n";
    out << "  }\n";
  }
  out << "}\n";
}
#endif

/// Writes the DOT text of g to `out`, coloured by `placed` when given.
inline void write_dot(const graph& g, std::ostream& out, const passes::placement* placed = nullptr) {
  write_dot(g, out, dot_options{.placed = placed});
}

/// The DOT text of g, drawn as `options` say.
inline std::string to_dot(const graph& g, const dot_options& options) {
  std::ostringstream out;
  write_dot(g, out, options);
  return out.str();
}
/// The DOT text of g, coloured by `placed` when given.
inline std::string to_dot(const graph& g, const passes::placement* placed = nullptr) {
  return to_dot(g, dot_options{.placed = placed});
}

/// Whether Graphviz's `dot` is on the PATH.
inline bool have_graphviz() {
  static const bool have = std::system("dot -V > /dev/null 2>&1") == 0;
  return have;
}

/// SVG of DOT text, by Graphviz's `dot -Tsvg` (Debian's graphviz package); an error when it is
/// not installed or fails, with what it printed.
std::string render_svg(const std::string& dot_text);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::string render_svg(const std::string& dot_text) {
  if (!have_graphviz())
    fail(error_code::failed_precondition, "weft::render_svg: Graphviz's dot is not installed (Debian: apt install graphviz)");
  char dir_template[] = "/tmp/weft_dot_XXXXXX";
  if (!::mkdtemp(dir_template)) fail(error_code::failed_precondition, "weft::render_svg: cannot make a temporary directory");
  const std::filesystem::path dir(dir_template), in = dir / "graph.dot", svg = dir / "graph.svg", log = dir / "dot.log";
  struct cleanup {
    std::filesystem::path p;
    ~cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  } remove{dir};
  {
    std::ofstream f(in, std::ios::binary);
    f << dot_text;
    if (!f.flush()) fail(error_code::failed_precondition, "weft::render_svg: cannot write ", in);
  }
  const std::string cmd = "dot -Tsvg -o '" + svg.string() + "' '" + in.string() + "' > '" + log.string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
  };
  if (status != 0 || !std::filesystem::exists(svg))
    fail(error_code::internal, "weft::render_svg: dot failed (status ", status, "): ", slurp(log));
  return slurp(svg);
}
#endif

/// Writes the SVG picture of g to `path`, atomically.
inline void write_svg(const graph& g, const std::filesystem::path& path, const dot_options& options = {}) {
  const std::string svg = render_svg(to_dot(g, options));
  detail::write_file_atomically(path, svg, {}, "the SVG picture");
}

}  // namespace weft
