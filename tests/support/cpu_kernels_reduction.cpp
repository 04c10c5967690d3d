// One family of the full CPU kernel registry, in its own translation unit so that the
// families compile in parallel; it registers during static initialisation.
#include <weft/kernels/cpu/reduction.hpp>

static const bool registered_reduction = (weft::cpu::register_reduction_kernels(), true);
