// One family of the full CPU kernel registry, in its own translation unit so that the
// families compile in parallel; it registers during static initialisation.
#include <weft/kernels/cpu/training.hpp>

static const bool registered_training = (weft::cpu::register_training_kernels(), true);
