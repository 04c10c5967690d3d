// A model reading a dataset's batches of 784 pixels through weights of 100 rows: the
// pipeline's static shapes reach the model's matmul check.
#include <weft/dsl.hpp>

#ifdef WEFT_COMPILE_FAIL_TWIN
constexpr std::int64_t rows = 784;
#else
constexpr std::int64_t rows = 100;
#endif

void compile_fail_case() {
  using pixels = weft::component<std::uint8_t, 784>;
  auto data = weft::dataset<pixels>::from_tensors(weft::tensor_of<std::uint8_t, 2>(std::vector<std::uint8_t>(784), {1, 784}))
                  .batch(1)
                  .map([](auto x) { return weft::cast<float>(x); });
  auto [x] = data.input();
  auto w = weft::variable<float>("w", weft::dims<rows, 10>, 0.0f);
  auto y = weft::matmul(x, w);
  (void)y;
}
