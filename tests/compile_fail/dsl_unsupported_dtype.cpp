// Tanh is defined for floating-point and complex dtypes only.
#include <weft/dsl.hpp>

#ifdef WEFT_COMPILE_FAIL_TWIN
using element = float;
#else
using element = std::int32_t;
#endif

void compile_fail_case() {
  auto x = weft::placeholder<element>("x", weft::dims<weft::dyn>);
  auto y = weft::tanh(x);
  (void)y;
}
