// A loop body that turns the loop variable's static shape [3] into [4].
#include <weft/dsl.hpp>

void compile_fail_case() {
  auto x = weft::placeholder<float>("x", weft::dims<3>);
  auto y = weft::placeholder<float>("y", weft::dims<4>);
  auto out = weft::while_loop([](auto v) { return weft::reduce_sum(v) < 10.0f; },
                              [&](auto v) {
#ifdef WEFT_COMPILE_FAIL_TWIN
                                return v * 2.0f;
#else
                                return weft::reduce_sum(v) + y;
#endif
                              },
                              x);
  (void)out;
}
