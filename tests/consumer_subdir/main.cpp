// weft added with add_subdirectory: the umbrella header compiles against the weft::weft
// target's include directories and definitions, and a graph infers a MatMul's shape. (The
// installed package's program, tests/consumer/main.cpp, also runs it in a session with the
// CPU kernels; compiling those kernels again here took 40 s of the 51 s this test took.)
#include <weft/weft.hpp>

int main() {
  weft::ops::register_matrix_ops();  // MatMul's definition (no kernels: nothing runs)
  weft::graph g;
  auto& a = g.constant(weft::tensor::of<float>({1, 2}, {1, 2}));
  auto& b = g.constant(weft::tensor::of<float>({2, 3}, {3, 4, 5, 6, 7, 8}));
  auto& m = g.op("MatMul", {a, b});
  return m.output_shape(0) == weft::partial_shape(weft::shape{1, 3}) ? 0 : 1;
}
