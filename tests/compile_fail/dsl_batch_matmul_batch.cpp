// batch_matmul of 4 matrices with 3 matrices: the batch dims do not broadcast.
#include <weft/dsl.hpp>

#ifdef WEFT_COMPILE_FAIL_TWIN
constexpr std::int64_t batch = 1;
#else
constexpr std::int64_t batch = 3;
#endif

void compile_fail_case() {
  auto x = weft::placeholder<double>("x", weft::dims<4, 2, 5>);
  auto y = weft::placeholder<double>("y", weft::dims<batch, 5, 2>);
  auto z = weft::batch_matmul(x, y);
  (void)z;
}
