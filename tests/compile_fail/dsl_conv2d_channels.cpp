// A filter whose input channels differ from the image's names both counts.
#include <weft/dsl.hpp>

void compile_fail_case() {
  auto images = weft::placeholder<float>("images", weft::dims<weft::dyn, 28, 28, 3>);
#ifdef WEFT_COMPILE_FAIL_TWIN
  auto filter = weft::variable<float>("filter", weft::dims<5, 5, 3, 8>, 0.1f);
#else
  auto filter = weft::variable<float>("filter", weft::dims<5, 5, 1, 8>, 0.1f);
#endif
  auto y = weft::conv2d(images, filter, weft::strides<1, 1>, weft::same);
  (void)y;
}
