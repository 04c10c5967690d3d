// The loading half of runtime.model_in_another_process (tests/model_save.cpp wrote the
// bundles): this program has no model code, only weft and the kernels. It loads the bundle
// and its frozen form, runs their signature on the saved input, and compares the outputs
// with the ones the saving program computed, bit for bit.
#include <weft/weft.hpp>

#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>

int main(int argc, char** argv) {
  using namespace weft;
  if (argc != 2) {
    std::fprintf(stderr, "usage: model_load DIR\n");
    return 2;
  }
  try {
    const std::filesystem::path dir = argv[1];
    const auto expected = read_checkpoint(dir / "expected.ckpt");  // features, probs, logits
    int failures = 0;
    for (const char* file : {"model.weft", "frozen.weft"}) {
      model_bundle m = load_model(dir / file);
      const auto out = m.run("classify", {{"features", expected[0].second}});
      for (std::size_t i = 0; i < 2; ++i) {
        const tensor& want = expected[i + 1].second;
        const bool same = out[i].dtype() == want.dtype() && out[i].shape() == want.shape() &&
                          std::memcmp(out[i].raw_data(), want.raw_data(), want.bytes()) == 0;
        std::printf("model_load: %s %s: %s\n", file, expected[i + 1].first.c_str(), same ? "same" : "DIFFERENT");
        failures += !same;
      }
    }
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_load: %s\n", e.what());
    return 1;
  }
}
