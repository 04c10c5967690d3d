// Builds a small two-layer network as a graph, initialises its variables, runs it on a
// batch, and writes the step's timeline (Chrome trace JSON) and the graph (GraphViz DOT).
#include <weft/weft.hpp>

#include <fstream>
#include <iostream>

int main() {
  using namespace weft;
  graph g;
  auto shape_of = [&](std::vector<std::int32_t> dims) {
    return g.constant(tensor::from_vector(dims));
  };
  const node& x = g.placeholder(dtype::float32, {unknown_dim, 64}, "x");
  std::vector<int> inits;
  auto dense = [&](const std::string& scope, output in, std::int64_t n_in, std::int64_t n_out) {
    auto guard = g.name_scope(scope);
    const node& w = g.variable(dtype::float32, {n_in, n_out}, "w");
    const node& b = g.variable(dtype::float32, {n_out}, "b");
    const node& w0 = g.op("TruncatedNormal", {shape_of({static_cast<int>(n_in), static_cast<int>(n_out)})},
                          {{"dtype", dtype::float32}, {"seed", 1}});
    inits.push_back(g.op("Assign", {w, g.op("Mul", {w0, g.constant(tensor::scalar(0.1f))})}).id());
    inits.push_back(g.op("Assign", {b, g.op("Fill", {shape_of({static_cast<int>(n_out)}), g.constant(tensor::scalar(0.0f))})}).id());
    return g.op("Relu", {g.op("Add", {g.op("MatMul", {in, w}), b})}).out();
  };
  output h = dense("layer1", x, 64, 128);
  output y = dense("layer2", h, 128, 10);
  const node& mean = g.op("Mean", {y, g.constant(tensor::of<std::int32_t>({2}, {0, 1}))}, {}, "mean");
  const node& init = g.op("NoOp", {}, {}, node_options("init").after(inits));

  session s(g);
  s.run({init});
  std::vector<float> batch(32 * 64);
  for (std::size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<float>(i % 17) / 17.0f;
  run_metadata meta;
  auto out = s.run({{x, tensor::from_vector(batch, {32, 64})}}, {y, mean}, {}, {.trace = true}, &meta);
  std::cout << "output " << out[0] << "\nmean " << out[1].scalar_value<float>() << "\n";

  std::ofstream("timeline.json") << chrome_trace(meta.stats);
  std::ofstream("graph.dot") << to_dot(g);
  std::cout << "ran " << meta.stats.nodes.size() << " nodes; wrote timeline.json (open in ui.perfetto.dev) and graph.dot\n";
}
