// A separate project: find_package(weft), one MatMul through a session.
#include <weft/weft.hpp>
#include <weft/kernels/cpu/kernels.hpp>

int main() {
  weft::cpu::register_matmul_kernel<float>();
  weft::cpu::register_core_kernels();
  weft::graph g;
  auto& a = g.constant(weft::tensor::of<float>({1, 2}, {1, 2}));
  auto& b = g.constant(weft::tensor::of<float>({2, 1}, {3, 4}));
  auto& m = g.op("MatMul", {a, b});
  weft::session s(g);
  return s.run({}, {m})[0].scalar_value<float>() == 11.0f ? 0 : 1;
}
