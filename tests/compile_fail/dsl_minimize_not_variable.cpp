// minimize updates variables: a placeholder among its vars is named in the error.
#include <weft/dsl.hpp>

void compile_fail_case() {
  auto x = weft::placeholder<float>("x", weft::dims<4>);
  auto w = weft::variable<float>("w", weft::dims<4>, 1.0f);
  auto loss = weft::reduce_sum(w * x);
#ifdef WEFT_COMPILE_FAIL_TWIN
  auto step = weft::train::minimize(loss, weft::train::sgd{0.1}, w);
#else
  auto step = weft::train::minimize(loss, weft::train::sgd{0.1}, w, x);
#endif
  (void)step;
}
