// The one translation unit that instantiates the full CPU kernel registry.
#include <weft/kernels/cpu/all.hpp>
