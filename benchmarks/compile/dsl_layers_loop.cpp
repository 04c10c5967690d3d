// A 20-layer network (784-256-...-256-10, ReLU) built in a runtime loop through
// weft::handle, so the type of each layer's output stays handle<float, dyn, 256>. The
// program runs one forward pass on 8 inputs and compares it with a naive loop over the
// weights it fetched; it exits 1 when they differ. Its compile time and compiler memory
// are measured by benchmarks/compile_cost.sh (docs/benchmarks.md).
#include <weft/dsl.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

int main() {
  using namespace weft;
  constexpr int layers = 20, batch = 8;
  auto x = placeholder<float>("x", dims<dyn, 784>);
  auto w_in = variable<float>("w_in", dims<784, 256>, truncated_normal<float>(dims<784, 256>, 1) * 0.05f);
  std::vector<variable_expr<float, static_shape<256, 256>>> w;
  for (int i = 0; i < layers - 2; ++i)
    w.push_back(variable<float>("w" + std::to_string(i), dims<256, 256>,
                                truncated_normal<float>(dims<256, 256>, 2 + i) * 0.09f));
  auto w_out = variable<float>("w_out", dims<256, 10>, truncated_normal<float>(dims<256, 10>, 99) * 0.09f);

  handle<float, dyn, 256> h = relu(matmul(x, w_in));
  for (const auto& wi : w) {
    name_scope scope("layer");
    h = relu(matmul(h, wi));
  }
  auto logits = matmul(h, w_out);

  client_session s;
  s.initialize(logits);
  std::vector<float> xv(batch * 784);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 7919) % 255) / 255.0f;
  auto y = s.run(logits, feed(x, tensor_of<float, 2>(xv, {batch, 784})));

  // The same network by hand, in double, with the weights the session initialized.
  auto dense = [](const std::vector<double>& in, int rows, int k, const tensor_of<float, 2>& wt, bool relu) {
    int n = static_cast<int>(wt.shape()[1]);
    std::vector<double> out(static_cast<std::size_t>(rows * n), 0.0);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int c = 0; c < k; ++c) acc += in[static_cast<std::size_t>(r * k + c)] * wt(c, j);
        out[static_cast<std::size_t>(r * n + j)] = relu ? std::max(acc, 0.0) : acc;
      }
    return out;
  };
  std::vector<double> a(xv.begin(), xv.end());
  a = dense(a, batch, 784, s.run(w_in), true);
  for (const auto& wi : w) a = dense(a, batch, 256, s.run(wi), true);
  a = dense(a, batch, 256, s.run(w_out), false);
  double err = 0, scale = 0;
  for (int r = 0; r < batch; ++r)
    for (int j = 0; j < 10; ++j) {
      err = std::max(err, std::abs(y(r, j) - a[static_cast<std::size_t>(r * 10 + j)]));
      scale = std::max(scale, std::abs(a[static_cast<std::size_t>(r * 10 + j)]));
    }
  std::printf("%d layers, %d MatMul nodes; logits max |x| %.4g, max error against the naive loop %.3g\n", layers,
              [&] {
                int n = 0;
                for (int i = 0; i < s.current_graph().size(); ++i) n += s.current_graph().at(i).op() == "MatMul";
                return n;
              }(),
              scale, err);
  return err <= 1e-4 * std::max(1.0, scale) && scale > 0 ? 0 : 1;
}
