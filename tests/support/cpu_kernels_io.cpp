// One family of the full CPU kernel registry, in its own translation unit so that the
// families compile in parallel; it registers during static initialisation.
#include <weft/kernels/cpu/io.hpp>

static const bool registered_io = (weft::cpu::register_io_kernels(), true);
