// One family of the full CPU kernel registry, in its own translation unit so that the
// families compile in parallel; it registers during static initialisation.
#include <weft/kernels/cpu/array.hpp>

static const bool registered_array = (weft::cpu::register_array_kernels(), true);
