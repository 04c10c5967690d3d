// Stacking [2, 3] and [2, 4]: stack (and add_n) need operands of one shape.
#include <weft/dsl.hpp>

#ifdef WEFT_COMPILE_FAIL_TWIN
constexpr std::int64_t cols = 3;
#else
constexpr std::int64_t cols = 4;
#endif

void compile_fail_case() {
  auto a = weft::placeholder<float>("a", weft::dims<2, 3>);
  auto b = weft::placeholder<float>("b", weft::dims<2, cols>);
  auto y = weft::stack<0>(a, b);
  (void)y;
}
