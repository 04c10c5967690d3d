// One family of the full CPU kernel registry, in its own translation unit so that the
// families compile in parallel; it registers during static initialisation.
#include <weft/kernels/cpu/random.hpp>

static const bool registered_random = (weft::cpu::register_random_kernels(), true);
