// A floating-point scalar beside an int32 expression: it would be truncated, so it does not
// convert (write an int, or cast the expression).
#include <weft/dsl.hpp>

void compile_fail_case() {
  auto n = weft::placeholder<std::int32_t>("n", weft::dims<weft::dyn>);
#ifdef WEFT_COMPILE_FAIL_TWIN
  auto y = n * 2;
#else
  auto y = n * 2.5;
#endif
  (void)y;
}
