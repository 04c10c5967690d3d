#include "support/helpers.hpp"

#include <fstream>
#include <map>
#include <sstream>

using namespace weft;

TEST_CASE("nodes get unique, scoped names and inferred attributes") {
  graph g;
  auto& a = g.constant(tensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  {
    auto scope = g.name_scope("layer1");
    auto& m = g.op("MatMul", {a, a}, {{"transpose_b", true}});
    CHECK(m.name() == "layer1/MatMul");
    CHECK(m.attr<dtype>("T") == dtype::float32);
    CHECK(m.output_shape(0) == partial_shape{2, 2});
    auto& m2 = g.op("MatMul", {a, a}, {{"transpose_a", true}});
    CHECK(m2.name() == "layer1/MatMul_1");
    CHECK(m2.output_shape(0) == partial_shape{3, 3});
  }
  CHECK(g.op("Identity", {a}).name() == "Identity");
  CHECK(g.resolve("layer1/MatMul:0") == g["layer1/MatMul"].out(0));
}

TEST_CASE("validation errors name the node, op, dtypes and shapes") {
  graph g;
  auto& f = g.constant(tensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6}), "f");
  auto& d = g.constant(tensor::scalar(1.0), "d");
  test::require_error([&] { g.op("Frobnicate", {f}); }, {"node 'Frobnicate' (Frobnicate)", "unknown op"});
  test::require_error([&] { g.op("Add", {f, d}, {}, "sum"); },
                      {"node 'sum' (Add)", "input 1 'y' has dtype float64 but T is float32", "float32[2,3]", "float64[]"});
  test::require_error([&] { g.op("MatMul", {f, f}, {}, "mm"); }, {"node 'mm' (MatMul)", "inner dimensions differ (3 vs 2)"});
  test::require_error([&] { g.op("Identity", {f}, {}, "f"); }, {"node 'f' (Identity)", "already exists"});
  test::require_error([&] { g.op("Add", {f}, {}, "one"); }, {"node 'one' (Add)", "expects 2 inputs, got 1"});
  test::require_error([&] { g.op("MatMul", {f, f}, {{"transpose_q", true}}, "q"); }, {"unknown attr 'transpose_q'"});
  test::require_error([&] { g.op("MatMul", {f, f}, {{"transpose_a", 3}}, "k"); }, {"attr 'transpose_a' must be bool"});
  test::require_error([&] { g.op("Sqrt", {g.constant(tensor::scalar(1))}, {}, "s"); },
                      {"T = int32 is not supported", "allowed: float16"});
  test::require_error([&] { g.op("Placeholder", {}, {{"dtype", dtype::float32}}, "p"); }, {"missing required attr 'shape'"});
  test::require_error([&] { g.op("Assign", {f, f}, {}, "a"); }, {"must be a variable reference"});
  test::require_error([&] { g.op("Add", {f, g.constant(tensor::of<float>({4}, {1, 2, 3, 4}))}, {}, "bc"); },
                      {"not broadcastable"});
  test::require_error([&] { g.op("Reshape", {f, g.constant(tensor::of<int>({2}, {4, 2}))}, {}, "r"); },
                      {"cannot reshape [2,3] (6 elements)"});
}

TEST_CASE("import builds graphs from names in any order and rejects bad ones") {
  attr_map c{{"value", tensor::scalar(2.0f)}, {"dtype", dtype::float32}};
  graph g;
  g.import({{"sum", "Add", {"x", "y:0"}, {}, ""}, {"x", "Const", {}, c, ""}, {"y", "Const", {"^x"}, c, "/cpu:0"}});
  CHECK(g.size() == 3);
  CHECK(g["sum"].inputs()[0] == g["x"].out());
  CHECK(g["y"].control_inputs() == std::vector<int>{g["x"].id()});
  CHECK(g["y"].device() == "/cpu:0");
  CHECK(test::eval(g, g["sum"]).scalar_value<float>() == 4.0f);

  graph h;
  test::require_error([&] { h.import({{"a", "Identity", {"b"}, {}, ""}, {"b", "Identity", {"a"}, {}, ""}}); },
                      {"part of a cycle"});
  test::require_error([&] { h.import({{"a", "Identity", {"nowhere"}, {}, ""}}); }, {"node 'a' (Identity)", "input 'nowhere' names no node"});
  test::require_error([&] { h.import({{"a", "Const", {}, c, ""}, {"a", "Const", {}, c, ""}}); }, {"node 'a'", "already exists"});
  test::require_error([&] { h.import({{"a", "Const", {}, c, ""}, {"b", "Nope", {"a"}, {}, ""}}); }, {"unknown op 'Nope'"});
  CHECK(h.size() == 0);  // all or nothing
}

TEST_CASE("colocation groups are stored on nodes, flat, and checked against devices") {
  graph g;
  auto& w = g.variable(dtype::float32, partial_shape{2}, node_options("w").on("/cpu:0"));
  auto& a = g.op("Identity", {w}, {}, node_options("a").colocate("w"));
  CHECK(a.colocation() == "w");
  {
    auto scope = g.colocate_with(a);  // a is in w's group: so is everything built here
    auto& b = g.op("Identity", {a}, {}, "b");
    CHECK(b.colocation() == "w");
    test::require_error([&] { g.op("Identity", {a}, {}, node_options("c").on("/cpu:1")); },
                        {"node 'c' (Identity)", "requests device '/cpu:1'", "colocated with node 'w'", "'/cpu:0'"});
  }
  CHECK(g.op("Identity", {a}, {}, "d").colocation().empty());
  CHECK(w.colocation().empty());
  test::require_error([&] { g.op("Identity", {a}, {}, node_options("e").colocate("nowhere")); },
                      {"node 'e' (Identity)", "colocate_with names no node ('nowhere')"});

  // Import: a node may be colocated with one that consumes it; chains flatten; cycles fail.
  attr_map c{{"value", tensor::scalar(2.0f)}, {"dtype", dtype::float32}};
  graph h;
  h.import({{"x", "Const", {}, c, "", "y"}, {"y", "Identity", {"x"}, {}, "", "z"}, {"z", "Identity", {"y"}, {}, ""}});
  CHECK(h["x"].colocation() == "z");
  CHECK(h["y"].colocation() == "z");
  CHECK(h["z"].colocation().empty());
  graph k;
  test::require_error([&] { k.import({{"p", "Const", {}, c, "", "q"}, {"q", "Const", {}, c, "", "p"}}); },
                      {"colocations form a cycle"});
  test::require_error([&] { k.import({{"p", "Const", {}, c, "", "r"}}); }, {"colocate_with names no node ('r')"});
  CHECK(k.size() == 0);
}

TEST_CASE("control edges that would close a cycle are rejected") {
  graph g;
  auto& a = g.constant(tensor::scalar(1.0f), "a");
  auto& b = g.op("Neg", {a}, {}, "b");
  test::require_error([&] { g.add_control_input(a.id(), b.id()); }, {"node 'a' (Const)", "would create a cycle"});
  g.add_control_input(b.id(), a.id());
  CHECK(g["b"].control_inputs() == std::vector<int>{a.id()});
}

TEST_CASE("user ops register without touching the core") {
  static const bool registered = [] {
    register_op(op_def_builder("TestTimesTwo").input("x: T").output("y: T").attr("T: {float32}").shape_fn(ops::same_shape));
    struct times_two final : op_kernel {
      explicit times_two(const node&) {}
      void compute(kernel_context& ctx) const override {
        auto& y = ctx.allocate_output(0, ctx.input(0).shape());
        auto in = ctx.input(0).flat<float>();
        for (std::size_t i = 0; i < in.size(); ++i) y.data<float>()[i] = 2 * in[i];
      }
    };
    return register_cpu_kernel<times_two>("TestTimesTwo");
  }();
  CHECK(registered);
  test::require_error([] { register_op(op_def_builder("TestTimesTwo")); }, {"already registered"});
  graph g;
  auto& y = g.op("TestTimesTwo", {g.constant(tensor::of<float>({2}, {1, 2}))});
  CHECK(test::eval(g, y).to_vector<float>() == std::vector<float>{2, 4});
}

TEST_CASE("graphs dump to GraphViz DOT") {
  graph g;
  auto& a = g.constant(tensor::scalar(1.0f), node_options("a").on("/cpu:0"));
  auto& b = g.op("Neg", {a}, {}, node_options("b").after({a.id()}));
  (void)b;
  auto dot = to_dot(g);
  CHECK(dot.find("digraph weft") != std::string::npos);
  CHECK(dot.find("label=\"b\\nNeg\\nfloat32[]\"") != std::string::npos);
  CHECK(dot.find("n0 -> n1 [style=dotted]") != std::string::npos);
  CHECK(dot.find("\"legend:0\" [label=\"/cpu:0\"") != std::string::npos);  // the requested device's colour
}

namespace {
// The clusters around each vertex of a DOT text ("n12" or "\"scope:gradients\""): their
// labels, outermost first, joined by '/' (read from the text's nesting, not from weft).
std::map<std::string, std::string> dot_cluster_paths(const std::string& dot) {
  std::map<std::string, std::string> out;
  std::vector<std::string> stack;
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);) {
    const auto start = line.find_first_not_of(' ');
    if (start == std::string::npos) continue;
    const std::string l = line.substr(start);
    if (l.rfind("subgraph cluster_", 0) == 0) {
      stack.emplace_back();
    } else if (l == "}") {
      if (!stack.empty()) stack.pop_back();
    } else if (l.rfind("label=\"", 0) == 0 && !stack.empty()) {
      stack.back() = l.substr(7, l.size() - 9);  // label="X";
    } else if (l.find(" [") != std::string::npos && l.find(" -> ") == std::string::npos &&
               (l[0] == 'n' || l.rfind("\"scope:", 0) == 0)) {
      std::string path;
      for (const auto& s : stack) path += (path.empty() ? "" : "/") + s;
      out[l.substr(0, l.find(" ["))] = path;
    }
  }
  return out;
}

// The line of a DOT text that starts (after its indentation) with `start` (empty if none):
// std::regex over a whole picture recursed per character, past ASan's stack.
std::string dot_line(const std::string& dot, const std::string& start) {
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);)
    if (line.find_first_not_of(' ') != std::string::npos && line.compare(line.find_first_not_of(' '), start.size(), start) == 0)
      return line;
  return {};
}
}  // namespace

TEST_CASE("DOT pictures: name scopes as clusters, collapsed scopes, loops and devices, rendered to SVG") {
  graph g;
  output x = g.placeholder(dtype::float32, partial_shape{2, 3}, "x");
  output w, h;
  {
    auto scope = g.name_scope("layer1");
    w = g.variable(dtype::float32, {3, 4}, "w");
    auto inner = g.name_scope("act");
    h = g.op("Relu", {g.op("MatMul", {x, w}).out()}).out();
  }
  auto loss = g.op("Sum", {h, g.constant(tensor::of<std::int32_t>({2}, {0, 1}))}, {}, "loss").out();
  auto dw = add_gradients(g, {loss}, {w});
  auto counted = while_loop(
      g, {g.constant(tensor::scalar(std::int64_t{0}))},
      [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(test::i64(g, 5))}).out(0); },
      [&](loop_scope& s, const std::vector<output>& v) {
        return std::vector<output>{g.op("Add", {v[0], s.invariant(test::i64(g, 1))}).out(0)};
      },
      while_options{"count", 1, -1});
  g.constant(tensor::scalar(1.0f), node_options("pinned").on("/cpu:0"));
  auto vertex = [](int id) { return "n" + std::to_string(id); };

  const std::string dot = to_dot(g);
  const auto paths = dot_cluster_paths(dot);
  CHECK(paths.at(vertex(w.node)) == "layer1");
  CHECK(paths.at(vertex(h.node)) == "layer1/act");
  CHECK(paths.at(vertex(x.node)).empty());
  CHECK(paths.at(vertex(dw[0].node)).rfind("gradients", 0) == 0);
  std::size_t gradient_nodes = 0, loop_nodes = 0;
  for (int id = 0; id < g.size(); ++id) {
    const std::string& name = g.at(id).name();
    gradient_nodes += name.rfind("gradients/", 0) == 0;
    if (name.rfind("count/", 0) == 0) {
      ++loop_nodes;
      CHECK(paths.at(vertex(id)).rfind("count", 0) == 0);
    }
    CHECK(paths.count(vertex(id)) == 1);  // every node drawn once
  }
  REQUIRE(gradient_nodes > 3);
  REQUIRE(loop_nodes > 5);
  // Control flow: shapes, a blue back edge out of the NextIteration, blue borders in the loop.
  int next = -1, sw = -1, add = -1;
  for (int id = 0; id < g.size(); ++id) {
    if (g.at(id).op() == "NextIteration") next = id;
    if (g.at(id).op() == "Switch") sw = id;
    if (g.at(id).op() == "Add" && g.at(id).name().rfind("count/", 0) == 0) add = id;
  }
  REQUIRE(next >= 0);
  CHECK_THAT(dot, Catch::Contains(vertex(sw) + " [label=\"" + g.at(sw).name() + "\\nSwitch"));
  CHECK_THAT(dot_line(dot, vertex(sw) + " ["), Catch::Contains("shape=diamond"));
  CHECK_THAT(dot_line(dot, vertex(next) + " -> "), Catch::Contains("[label=\"0\", color=\"#1f78b4\", style=bold, constraint=false]"));
  CHECK_THAT(dot_line(dot, vertex(add) + " ["), Catch::Contains("color=\"#1f78b4\", penwidth=2"));
  CHECK_THAT(dot_line(dot, vertex(w.node) + " ["), Catch::Contains("Variable") && !Catch::Contains("penwidth"));  // not in a loop
  // The requested device: a colour and the legend.
  CHECK_THAT(dot, Catch::Contains("\"legend:0\" [label=\"/cpu:0\", style=filled, fillcolor=\"#a6cee3\"]"));

  // The gradient collapsed: one box of every gradient node, edges into it merged.
  const std::string folded = to_dot(g, dot_options{.collapse = {"gradients"}});
  const auto folded_paths = dot_cluster_paths(folded);
  CHECK(folded_paths.count(vertex(dw[0].node)) == 0);
  CHECK(folded_paths.at("\"scope:gradients\"").empty());
  CHECK_THAT(folded, Catch::Contains("\"scope:gradients\" [label=\"gradients/\\n" + std::to_string(gradient_nodes) + " nodes\", shape=box3d"));
  CHECK_THAT(folded, Catch::Contains(vertex(w.node) + " -> \"scope:gradients\""));
  CHECK(folded.find(" -> n" + std::to_string(dw[0].node) + " ") == std::string::npos);
  // depth 0: every top-level scope one box; depth 1: layer1 a cluster, layer1/act a box.
  const auto top = dot_cluster_paths(to_dot(g, dot_options{.depth = 0}));
  CHECK(top.at("\"scope:layer1\"").empty());
  CHECK(top.at("\"scope:count\"").empty());
  CHECK(top.count(vertex(w.node)) == 0);
  CHECK(top.at(vertex(x.node)).empty());
  const auto one = dot_cluster_paths(to_dot(g, dot_options{.depth = 1}));
  CHECK(one.at(vertex(w.node)) == "layer1");
  CHECK(one.at("\"scope:layer1/act\"") == "layer1");
  // Without scopes: no cluster but the legend.
  const auto flat = dot_cluster_paths(to_dot(g, dot_options{.scopes = false}));
  CHECK(flat.at(vertex(h.node)).empty());

  if (!have_graphviz()) {
    WARN("Graphviz's dot is not installed (tools/install-deps installs it): no SVG rendered");
    CHECK_THROWS_WITH(render_svg(dot), Catch::Contains("not installed"));
    return;
  }
  const std::string svg = render_svg(folded);
  CHECK_THAT(svg, Catch::Contains("<svg") && Catch::Contains("layer1") && Catch::Contains("gradients/"));
  CHECK_THAT(svg, Catch::Contains("<title>n" + std::to_string(w.node) + "</title>"));
  test::temp_dir dir("weft_dot_svg");
  write_svg(g, dir.path / "g.svg", {.depth = 0});
  std::ifstream in(dir.path / "g.svg");
  std::string first;
  std::getline(in, first);
  CHECK_THAT(first, Catch::Contains("<?xml"));
  CHECK_THROWS_WITH(render_svg("digraph { a -> }"), Catch::Contains("dot failed") && Catch::Contains("syntax error"));
}
