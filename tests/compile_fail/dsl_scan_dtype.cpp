// A scan step that turns its float accumulator into an int32: the check names the
// accumulator's loop variable (1: variable 0 is the counter) and both dtypes. (Not a double,
// as in dsl_loop_dtype: the compile-fail batch reports one check's instantiation once.)
#include <weft/dsl.hpp>

void compile_fail_case() {
  auto x = weft::placeholder<float>("x", weft::dims<weft::dyn, 3>);
  auto out = weft::scan(
      [](auto acc, auto row) {
#ifdef WEFT_COMPILE_FAIL_TWIN
        return acc + row;
#else
        return weft::cast<std::int32_t>(acc + row);
#endif
      },
      x, weft::zeros<float>(weft::dims<3>));
  (void)out;
}
