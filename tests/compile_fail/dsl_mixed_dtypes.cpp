// float + double: TensorFlow does not convert between tensor dtypes, nor does weft.
#include <weft/dsl.hpp>

#ifdef WEFT_COMPILE_FAIL_TWIN
using second = float;
#else
using second = double;
#endif

void compile_fail_case() {
  auto a = weft::placeholder<float>("a", weft::dims<weft::dyn>);
  auto b = weft::placeholder<second>("b", weft::dims<weft::dyn>);
  auto y = a + b;
  (void)y;
}
