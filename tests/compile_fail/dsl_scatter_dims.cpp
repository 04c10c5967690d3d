// Updates of shape [2, 4] written into rows of a [4, 3] tensor: the slices are [2, 3].
#include <weft/dsl.hpp>

void compile_fail_case() {
  auto t = weft::placeholder<float>("t", weft::dims<4, 3>);
  auto rows = weft::placeholder<std::int32_t>("rows", weft::dims<2, 1>);
#ifdef WEFT_COMPILE_FAIL_TWIN
  auto updates = weft::placeholder<float>("updates", weft::dims<2, 3>);
#else
  auto updates = weft::placeholder<float>("updates", weft::dims<2, 4>);
#endif
  auto out = weft::tensor_scatter_update(t, rows, updates);
  (void)out;
}
