// A cond whose branches give a float and a double.
#include <weft/dsl.hpp>

void compile_fail_case() {
  auto x = weft::placeholder<float>("x", weft::dims<3>);
  auto r = weft::cond(
      weft::reduce_sum(x) > 0.0f, [&] { return x * 2.0f; },
#ifdef WEFT_COMPILE_FAIL_TWIN
      [&] { return x; });
#else
      [&] { return weft::cast<double>(x); });
#endif
  (void)r;
}
