// Built with only single_include/ on the include path, registering the kernels it uses
// (single_header_implementation.cpp checks WEFT_IMPLEMENTATION's registry).
#include <weft/weft.hpp>

#include <catch2/catch.hpp>

TEST_CASE("the single header builds and runs a graph") {
  using namespace weft;
  cpu::register_core_kernels();
  use_kernels<ops::Mul, double>();
  graph g;
  auto& x = g.placeholder(dtype::float64, {2}, "x");
  auto& y = g.op("Mul", {x, g.constant(tensor::scalar(3.0))});
  session s(g, {.inter_op_threads = 1, .intra_op_threads = 1, .resources = nullptr});
  auto out = s.run({{x, tensor::of<double>({2}, {1, 2})}}, {y});
  CHECK(out[0].to_vector<double>() == std::vector<double>{3, 6});
}
