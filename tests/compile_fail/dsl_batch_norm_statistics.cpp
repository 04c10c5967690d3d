// A bfloat16 x keeps its statistics in float (TensorFlow's mixed precision): a double scale
// names both dtypes.
#include <weft/dsl.hpp>

void compile_fail_case() {
  auto x = weft::placeholder<weft::bfloat16>("x", weft::dims<weft::dyn, 3>);
#ifdef WEFT_COMPILE_FAIL_TWIN
  using U = float;
#else
  using U = double;
#endif
  auto v = weft::constant<U>(std::vector<U>{1, 1, 1}, weft::dims<3>);
  auto r = weft::fused_batch_norm(x, v, v, v, v);
  (void)r;
}
