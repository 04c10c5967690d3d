// A cond whose branches give static shapes [3] and [4].
#include <weft/dsl.hpp>

void compile_fail_case() {
  auto x = weft::placeholder<float>("x", weft::dims<3>);
#ifdef WEFT_COMPILE_FAIL_TWIN
  auto y = weft::placeholder<float>("y", weft::dims<weft::dyn>);
#else
  auto y = weft::placeholder<float>("y", weft::dims<4>);
#endif
  auto r = weft::cond(weft::reduce_sum(x) > 0.0f, [&] { return x; }, [&] { return y; });
  (void)r;
}
