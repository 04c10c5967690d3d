// libFuzzer target: one op of the registry, for a dtype it admits, with attributes, input
// shapes and values chosen by the fuzzer's bytes (tests/support/op_runner.hpp). The op
// runs or throws weft::error; an input whose value changed is a finding too.
#include <weft/weft.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "../support/op_runner.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace weft;
  static const std::vector<std::string> names = test::runnable_ops();
  test::byte_choices c(data, size);
  const std::string& op = c.one_of(names);
  dtype t = dtype::float32;
  if (const attr_def* a = op_registry::global().find(op)->find_attr("T"); a && a->kind == attr_kind::type)
    t = c.one_of(a->admitted());
  const test::op_result r = test::run_op(op, t, c);
  if (!r.changed_inputs.empty()) {
    std::fprintf(stderr, "%s (T=%s) changed its input %s\n", op.c_str(), std::string(name(t)).c_str(), r.changed_inputs[0].c_str());
    std::abort();
  }
  return 0;
}
