// One family of the full CPU kernel registry, in its own translation unit so that the
// families compile in parallel; it registers during static initialisation.
#include <weft/kernels/cpu/elementwise.hpp>

static const bool registered_elementwise = (weft::cpu::register_elementwise_kernels(), true);
