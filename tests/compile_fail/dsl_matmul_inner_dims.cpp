// matmul of a [?, 784] batch with a [256, 10] matrix: the inner dims differ.
#include <weft/dsl.hpp>

#ifdef WEFT_COMPILE_FAIL_TWIN
constexpr std::int64_t rows = 784;
#else
constexpr std::int64_t rows = 256;
#endif

void compile_fail_case() {
  auto x = weft::placeholder<float>("x", weft::dims<weft::dyn, 784>);
  auto w = weft::variable<float>("w", weft::dims<rows, 10>, 0.0f);
  auto y = weft::matmul(x, w);
  (void)y;
}
