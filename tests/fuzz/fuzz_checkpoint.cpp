// libFuzzer target: the checkpoint reader on arbitrary bytes. It returns tensors or throws
// weft::error; anything else (a crash, a sanitizer report, another exception) is a finding.
#include <weft/runtime/checkpoint_file.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    auto tensors = weft::parse_checkpoint(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz input");
    for (const auto& [name, t] : tensors) (void)t.bytes();
  } catch (const weft::error&) {
  }
  return 0;
}
