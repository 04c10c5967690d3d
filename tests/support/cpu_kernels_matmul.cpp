// One family of the full CPU kernel registry, in its own translation unit so that the
// families compile in parallel; it registers during static initialisation.
#include <weft/kernels/cpu/matmul.hpp>

static const bool registered_matmul = (weft::cpu::register_matmul_kernels(), true);
