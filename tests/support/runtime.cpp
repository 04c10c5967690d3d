// weft's non-template library code (core/prebuilt.hpp): the session's runtime (its
// constructor and destructor, and what builds and runs a signature's executable: the
// executor, placement, partitioning, the graph passes), the op families' definitions, the
// standard gradient rules, the gradient pass, the control-flow builders and the graph's
// builders, compiled once for every program that links the kernel registry: those programs'
// own files are built with WEFT_PREBUILT_RUNTIME and only declare them.
#define WEFT_RUNTIME_IMPLEMENTATION
#include <weft/data/idx.hpp>
#include <weft/weft.hpp>
