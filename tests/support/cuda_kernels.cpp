// The GPU device and every GPU kernel, registered during static initialisation (a program
// does the same in one .cpp file of its own).
#include <weft/cuda/all.hpp>
