// The session's runtime (its constructor and destructor, and what builds and runs a
// signature's executable: the executor, placement, partitioning, the graph passes), compiled
// once for every program that links the kernel registry: those programs' own files are built
// with WEFT_PREBUILT_RUNTIME and only declare it (runtime/session.hpp).
#define WEFT_RUNTIME_IMPLEMENTATION
#include <weft/runtime/session.hpp>
