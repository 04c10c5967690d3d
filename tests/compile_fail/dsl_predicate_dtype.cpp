// is_nan (and is_inf, is_finite, check_numerics) take the floating-point dtypes only.
#include <weft/dsl.hpp>

#ifdef WEFT_COMPILE_FAIL_TWIN
using element = double;
#else
using element = std::int32_t;
#endif

void compile_fail_case() {
  auto x = weft::placeholder<element>("x", weft::dims<3>);
  auto y = weft::is_nan(x);
  (void)y;
}
