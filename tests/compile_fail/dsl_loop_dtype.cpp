// A loop body that turns the float loop variable 1 into a double.
#include <weft/dsl.hpp>

void compile_fail_case() {
  namespace hana = boost::hana;
  auto x = weft::placeholder<float>("x", weft::dims<3>);
  auto out = weft::while_loop([](auto i, auto) { return i < 10; },
                              [](auto i, auto v) {
#ifdef WEFT_COMPILE_FAIL_TWIN
                                return hana::make_tuple(i + 1, v * 2.0f);
#else
                                return hana::make_tuple(i + 1, weft::cast<double>(v));
#endif
                              },
                              hana::make_tuple(weft::constant(0), x));
  (void)out;
}
