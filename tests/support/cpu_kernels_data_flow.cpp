// One family of the full CPU kernel registry, in its own translation unit so that the
// families compile in parallel; it registers during static initialisation.
#include <weft/kernels/cpu/data_flow.hpp>

static const bool registered_data_flow = (weft::cpu::register_data_flow_kernels(), true);
