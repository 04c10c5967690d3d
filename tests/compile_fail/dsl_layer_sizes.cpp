// A dense layer after one whose output size it does not take: the check names both sizes.
#include <weft/dsl.hpp>

void compile_fail_case() {
  namespace L = weft::layers;
  auto images = weft::placeholder<float>("images", weft::dims<weft::dyn, 784>);
#ifdef WEFT_COMPILE_FAIL_TWIN
  auto net = L::sequential(L::dense<float, 784, 512>("fc1"), L::relu, L::dense<float, 512, 10>("fc2"));
#else
  auto net = L::sequential(L::dense<float, 784, 512>("fc1"), L::relu, L::dense<float, 256, 10>("fc2"));
#endif
  auto logits = net(images);
  (void)logits;
}
