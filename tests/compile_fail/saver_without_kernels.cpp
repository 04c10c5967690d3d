// A saver asks for the Save and Restore kernels where it is constructed (kernel_for,
// framework/kernel_for.hpp): without a header that specializes kernel_for for the io family
// on a device type, constructing one does not compile, and says which header is missing.
// <weft/weft.hpp> includes the CPU kernels' header; the twin includes it directly.
#include <weft/runtime/checkpoint.hpp>
#ifdef WEFT_COMPILE_FAIL_TWIN
#include <weft/kernels/cpu/io.hpp>
#endif

int compile_fail_case() {
  weft::graph g;
  const weft::node& v = g.variable(weft::dtype::float32, weft::partial_shape({2}));
  weft::saver saver(g, {v.out(0)});
  return 0;
}
