/// @file
/// Every standard op family's definitions, and register_standard_ops() (an umbrella header
/// for programs; library headers include <weft/ops/standard.hpp> or the family they need).
#pragma once

#include <weft/ops/standard.hpp>
