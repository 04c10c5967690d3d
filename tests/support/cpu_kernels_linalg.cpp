// One family of the full CPU kernel registry, in its own translation unit so that the
// families compile in parallel; it registers during static initialisation.
#include <weft/kernels/cpu/linalg.hpp>

static const bool registered_linalg = (weft::cpu::register_linalg_kernels(), true);
