// A gradient through an op without a gradient rule (Prod) names the op's descriptor.
#include <weft/dsl.hpp>

void compile_fail_case() {
  auto x = weft::variable<float>("x", weft::dims<4>, 1.0f);
#ifdef WEFT_COMPILE_FAIL_TWIN
  auto y = weft::reduce_sum(x * 2.0f);
#else
  auto y = weft::reduce_prod(x * 2.0f);
#endif
  auto d = weft::grad(y, x);
  (void)d;
}
