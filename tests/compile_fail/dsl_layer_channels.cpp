// A convolution layer whose input channels differ from the image's: the check names both.
#include <weft/dsl.hpp>

void compile_fail_case() {
  namespace L = weft::layers;
  auto images = weft::placeholder<float>("images", weft::dims<weft::dyn, 28, 28, 3>);
#ifdef WEFT_COMPILE_FAIL_TWIN
  L::conv2d<float, 5, 5, 3, 16> conv("conv1");
#else
  L::conv2d<float, 5, 5, 1, 16> conv("conv1");
#endif
  auto h = L::max_pool<2, 2>{}(conv(images));
  (void)h;
}
