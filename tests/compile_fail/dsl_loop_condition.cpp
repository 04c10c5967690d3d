// A loop condition that is a float, not a bool scalar.
#include <weft/dsl.hpp>

void compile_fail_case() {
  auto out = weft::while_loop(
#ifdef WEFT_COMPILE_FAIL_TWIN
      [](auto v) { return v < 10.0f; },
#else
      [](auto v) { return v - 10.0f; },
#endif
      [](auto v) { return v + 1.0f; }, weft::constant(0.0f));
  (void)out;
}
