// One family of the full CPU kernel registry, in its own translation unit so that the
// families compile in parallel; it registers during static initialisation.
#include <weft/kernels/cpu/nn.hpp>

static const bool registered_nn = (weft::cpu::register_nn_kernels(), true);
