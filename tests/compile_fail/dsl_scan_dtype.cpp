// A scan step that turns its float accumulator into a double: the check names the
// accumulator's loop variable (1: variable 0 is the counter) and both dtypes.
#include <weft/dsl.hpp>

void compile_fail_case() {
  auto x = weft::placeholder<float>("x", weft::dims<weft::dyn, 3>);
  auto out = weft::scan(
      [](auto acc, auto row) {
#ifdef WEFT_COMPILE_FAIL_TWIN
        return acc + row;
#else
        return weft::cast<double>(acc + row);
#endif
      },
      x, weft::zeros<float>(weft::dims<3>));
  (void)out;
}
