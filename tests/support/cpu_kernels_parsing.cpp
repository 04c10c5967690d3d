// One family of the full CPU kernel registry, in its own translation unit so that the
// families compile in parallel; it registers during static initialisation.
#include <weft/kernels/cpu/parsing.hpp>

static const bool registered_parsing = (weft::cpu::register_parsing_kernels(), true);
