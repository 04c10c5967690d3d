// The network of dsl_layers_loop.cpp written out as 20 typed expressions, without
// handles: each layer's type contains every layer below it. Compiled (not run) by
// benchmarks/compile_cost.sh to compare compile time and compiler memory with the loop.
#include <weft/dsl.hpp>

#include <string>
#include <vector>

int main() {
  using namespace weft;
  auto x = placeholder<float>("x", dims<dyn, 784>);
  auto w_in = variable<float>("w_in", dims<784, 256>, truncated_normal<float>(dims<784, 256>, 1) * 0.05f);
  std::vector<variable_expr<float, static_shape<256, 256>>> w;
  for (int i = 0; i < 18; ++i)
    w.push_back(variable<float>("w" + std::to_string(i), dims<256, 256>,
                                truncated_normal<float>(dims<256, 256>, 2 + i) * 0.09f));
  auto w_out = variable<float>("w_out", dims<256, 10>, truncated_normal<float>(dims<256, 10>, 99) * 0.09f);
  auto h0 = relu(matmul(x, w_in));
  auto h1 = relu(matmul(h0, w[0]));
  auto h2 = relu(matmul(h1, w[1]));
  auto h3 = relu(matmul(h2, w[2]));
  auto h4 = relu(matmul(h3, w[3]));
  auto h5 = relu(matmul(h4, w[4]));
  auto h6 = relu(matmul(h5, w[5]));
  auto h7 = relu(matmul(h6, w[6]));
  auto h8 = relu(matmul(h7, w[7]));
  auto h9 = relu(matmul(h8, w[8]));
  auto h10 = relu(matmul(h9, w[9]));
  auto h11 = relu(matmul(h10, w[10]));
  auto h12 = relu(matmul(h11, w[11]));
  auto h13 = relu(matmul(h12, w[12]));
  auto h14 = relu(matmul(h13, w[13]));
  auto h15 = relu(matmul(h14, w[14]));
  auto h16 = relu(matmul(h15, w[15]));
  auto h17 = relu(matmul(h16, w[16]));
  auto h18 = relu(matmul(h17, w[17]));
  auto logits = matmul(h18, w_out);
  client_session s;
  s.initialize(logits);
  std::vector<float> xv(8 * 784, 0.5f);
  auto y = s.run(logits, feed(x, tensor_of<float, 2>(xv, {8, 784})));
  return y.shape()[1] == 10 ? 0 : 1;
}
