// A [?, 128] expression assigned to a handle of [?, 256]: a static dim differs.
#include <weft/dsl.hpp>

#ifdef WEFT_COMPILE_FAIL_TWIN
constexpr std::int64_t width = 256;
#else
constexpr std::int64_t width = 128;
#endif

void compile_fail_case() {
  auto x = weft::placeholder<float>("x", weft::dims<weft::dyn, width>);
  weft::handle<float, weft::dyn, 256> h = weft::relu(x);
  (void)h;
}
