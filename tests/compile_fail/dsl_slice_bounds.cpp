// A slice of 3 rows starting at row 2 of a 4-row matrix ends at 5, past the dimension.
#include <weft/dsl.hpp>

#ifdef WEFT_COMPILE_FAIL_TWIN
constexpr std::int64_t start = 1;
#else
constexpr std::int64_t start = 2;
#endif

void compile_fail_case() {
  auto m = weft::placeholder<float>("m", weft::dims<4, 6>);
  auto s = weft::slice(m, weft::offsets<start, 0>, weft::dims<3, weft::dyn>);
  (void)s;
}
