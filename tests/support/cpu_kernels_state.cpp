// One family of the full CPU kernel registry, in its own translation unit so that the
// families compile in parallel; it registers during static initialisation.
#include <weft/kernels/cpu/state.hpp>

static const bool registered_state = (weft::cpu::register_state_kernels(), true);
