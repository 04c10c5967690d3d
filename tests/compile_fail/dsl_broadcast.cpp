// [3, 4] + [5]: the last dims are neither equal nor 1.
#include <weft/dsl.hpp>

#ifdef WEFT_COMPILE_FAIL_TWIN
constexpr std::int64_t n = 4;
#else
constexpr std::int64_t n = 5;
#endif

void compile_fail_case() {
  auto a = weft::placeholder<float>("a", weft::dims<3, 4>);
  auto b = weft::placeholder<float>("b", weft::dims<n>);
  auto y = a + b;
  (void)y;
}
