// Assigning a [3, 5] value to a [3, 4] variable.
#include <weft/dsl.hpp>

#ifdef WEFT_COMPILE_FAIL_TWIN
constexpr std::int64_t cols = 4;
#else
constexpr std::int64_t cols = 5;
#endif

void compile_fail_case() {
  auto v = weft::variable<float>("v", weft::dims<3, 4>, 0.0f);
  auto update = weft::assign(v, weft::zeros<float>(weft::dims<3, cols>));
  (void)update;
}
