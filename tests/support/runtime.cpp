// weft's non-template library code (core/prebuilt.hpp; tools/check_prebuilt.py checks that
// these includes reach every header that has some): the session's runtime, the op families'
// definitions, the gradient rules and pass, control flow, the graph's builders, GraphDef,
// model, checkpoint, queue, pipeline and summary code, compiled once for every program that
// links the kernel registry: those programs' own files are built with WEFT_PREBUILT_RUNTIME
// and only declare them.
#define WEFT_RUNTIME_IMPLEMENTATION
#include <weft/data/idx.hpp>
#include <weft/weft.hpp>
