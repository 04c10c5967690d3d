// Feeding a float placeholder a tensor of doubles.
#include <weft/dsl.hpp>

#ifdef WEFT_COMPILE_FAIL_TWIN
using fed = float;
#else
using fed = double;
#endif

void compile_fail_case() {
  auto x = weft::placeholder<float>("x", weft::dims<weft::dyn>);
  auto f = weft::feed(x, weft::tensor_of<fed, 1>(std::vector<fed>{1, 2}, {2}));
  (void)f;
}
