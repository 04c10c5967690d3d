// A program with the GPU kernels: where the machine has a GPU it negates a vector there and
// checks the values; elsewhere it says why there is none (exit 0 either way, 1 on a wrong
// value). It has no CPU kernels: every node runs on the GPU.
#include <weft/weft.hpp>

#include <cstdio>

int main() {
  const bool registered = weft::kernel_registry::global().has("Neg", "GPU");
  std::printf("the GPU kernels are %sregistered\n", registered ? "" : "not ");
  weft::graph g;
  auto& x = g.placeholder(weft::dtype::float32, {3}, weft::node_options("x").on("/device:GPU:0"));
  auto& y = g.op("Neg", {x}, {}, weft::node_options("y").on("/device:GPU:0"));
  weft::session_options o;
  o.device_count = {{"GPU", -1}};
  weft::session s(g, o);
  if (s.devices().size() == 1) {
    std::printf("no GPU here: the CPU alone\n");
    if (registered) std::printf("consumer: ok\n");
    return registered ? 0 : 1;
  }
  const auto r = s.run({{x, weft::tensor::of<float>({3}, {1, -2, 3})}}, {y});
  std::printf("on %s: y = [%g, %g, %g]\n", s.devices()[1]->name().c_str(), r[0].data<float>()[0], r[0].data<float>()[1],
              r[0].data<float>()[2]);
  const bool ok = registered && r[0].to_vector<float>() == std::vector<float>{-1, 2, -3};
  if (ok) std::printf("consumer: ok\n");
  return ok ? 0 : 1;
}
