// libFuzzer target: graph::import of node specs decoded from arbitrary bytes (names,
// ops of the registry, inputs with ports and control edges, attributes of every kind).
// Import builds the graph or throws weft::error and leaves the graph unchanged.
#include <weft/weft.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "../support/op_runner.hpp"

namespace {
const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names = [] {
    weft::ops::register_standard_ops();
    auto v = weft::test::runnable_ops();
    for (const char* op : {"Placeholder", "Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond"}) v.emplace_back(op);
    return v;
  }();
  return names;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace weft;
  test::byte_choices c(data, size);
  static const std::vector<std::string> names{"a", "b", "c", "d", "e", "f", "g", "", "a/b", "x:1", "^y"};
  static const std::vector<dtype> types{dtype::float32, dtype::int32, dtype::int64, dtype::boolean, dtype::float64};
  std::vector<node_spec> specs(static_cast<std::size_t>(1 + c.pick(8)));
  for (auto& s : specs) {
    s.name = c.one_of(names);
    s.op = c.one_of(op_names());
    const op_def* def = op_registry::global().find(s.op);
    const dtype t = c.one_of(types);
    for (std::size_t k = 0, n = c.pick(4); k < n; ++k) {
      std::string ref = (c.pick(6) == 0 ? "^" : "") + c.one_of(names);
      if (c.pick(3) == 0) ref += ":" + (c.pick(8) ? std::to_string(c.pick(3)) : std::string("99999999999"));
      s.inputs.push_back(std::move(ref));
    }
    if (def)
      for (const auto& a : def->attrs)
        if (!a.default_value || c.pick(4) == 0) s.attrs.set(a.name, test::detail::some_attr(c, a, t));
    if (c.pick(8) == 0) s.colocate_with = c.one_of(names);
  }
  graph g;
  try {
    g.import(specs);
    (void)to_dot(g);
  } catch (const error&) {
    if (g.size() != 0) std::abort();  // all or nothing
  }
  return 0;
}
