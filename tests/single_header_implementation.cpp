// The single header's WEFT_IMPLEMENTATION section (the full CPU kernel registry) compiles:
// checked syntax only (every kernel is instantiated, no code generated), by the test
// single_include.implementation. Included by path, so that include/ cannot stand in for it.
#define WEFT_IMPLEMENTATION
#include "../single_include/weft/weft.hpp"
