// matmul of a vector (rank 1) with a matrix: matmul takes matrices (batch_matmul batches).
#include <weft/dsl.hpp>

void compile_fail_case() {
#ifdef WEFT_COMPILE_FAIL_TWIN
  auto x = weft::placeholder<float>("x", weft::dims<1, 4>);
#else
  auto x = weft::placeholder<float>("x", weft::dims<4>);
#endif
  auto w = weft::variable<float>("w", weft::dims<4, 3>, 0.0f);
  auto y = weft::matmul(x, w);
  (void)y;
}
