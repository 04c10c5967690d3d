// libFuzzer target: GraphDef bytes read into a graph (graph/graph_def.hpp): the wire codec,
// the messages' layouts, TensorFlow's spellings and graph::import. Each input builds a graph
// or throws weft::error and leaves the graph empty; a graph it builds writes out and reads
// back to the same bytes.
// Only what it uses: with <weft/weft.hpp> (the session runtime too) its object took 38.5 s of
// CPU under ASan and UBSan in a CI run, 25.4 s so in the next.
#include <weft/graph/graph_def.hpp>
#include <weft/ops/standard.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace weft;
  static const bool registered = (ops::register_standard_ops(), true);
  (void)registered;
  graph g;
  try {
    import_graph_def(g, std::string_view(reinterpret_cast<const char*>(data), size), {.max_filled_bytes = 1 << 24});
  } catch (const error&) {
    if (g.size() != 0) std::abort();  // all or nothing
    return 0;
  }
  const std::string out = to_graph_def(g);
  graph h;
  import_graph_def(h, out);
  if (h.size() != g.size() || to_graph_def(h) != out) std::abort();  // a graph weft wrote reads back unchanged
  return 0;
}
