// libFuzzer target: the IDX reader on arbitrary bytes; it returns a tensor or throws
// weft::error.
#include <weft/data/idx.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)weft::data::parse_idx(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz input").bytes();
  } catch (const weft::error&) {
  }
  return 0;
}
