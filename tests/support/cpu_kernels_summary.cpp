// One family of the full CPU kernel registry, in its own translation unit so that the
// families compile in parallel; it registers during static initialisation.
#include <weft/kernels/cpu/summary.hpp>

static const bool registered_summary = (weft::cpu::register_summary_kernels(), true);
