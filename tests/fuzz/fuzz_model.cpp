// libFuzzer target: model bundle bytes loaded (runtime/model.hpp's load_model_bytes): the
// header, the meta's checksum and protobuf message, the GraphDef, the signatures' checks,
// the checkpoint of variables and their restore step. Each input loads or throws
// weft::error; a loaded model's signatures name outputs of its graph. The meta's checksum is
// set right before loading, so that mutations reach the GraphDef and the signatures rather
// than stopping at the checksum (which the tests check apart).
#include <weft/weft.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <optional>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace weft;
  static const bool registered = (ops::register_standard_ops(), true);
  (void)registered;
  session_options o;
  o.inter_op_threads = 0;
  o.intra_op_threads = 1;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  constexpr std::size_t head = 24;  // magic, version, meta size, meta checksum
  if (bytes.size() >= head) {
    std::uint64_t meta = 0;
    std::memcpy(&meta, bytes.data() + 12, 8);
    if (meta <= bytes.size() - head) {
      const std::uint32_t crc = crc32c(bytes.data() + head, static_cast<std::size_t>(meta));
      std::memcpy(bytes.data() + 20, &crc, 4);
    }
  }
  std::optional<model_bundle> m;
  try {
    m.emplace(load_model_bytes(bytes, "the fuzz input", o, {.max_filled_bytes = 1 << 24}));
  } catch (const error&) {
    return 0;
  }
  try {
    for (const auto& s : m->signatures())
      for (const auto& t : s.outputs) (void)m->graph().resolve(t.tensor);  // checked at load
  } catch (const error&) {
    std::abort();
  }
  return 0;
}
