// A [2, 3] tensor has 6 elements; [4, 2] has 8.
#include <weft/dsl.hpp>

#ifdef WEFT_COMPILE_FAIL_TWIN
constexpr std::int64_t cols = 3;
#else
constexpr std::int64_t cols = 4;
#endif

void compile_fail_case() {
  auto a = weft::placeholder<float>("a", weft::dims<2, 3>);
  auto y = weft::reshape(a, weft::dims<2, cols>);
  (void)y;
}
