// The CPU generators' pieces (codegen.cpp, codegen_reduce.cpp): the
// expression walk every backend shares (backend/common/codegen_parts.h)
// and the CPU's glue after the functor preamble.
#pragma once

#include "fluxion/backend/common/codegen_parts.h"

namespace fluxion::cpu::gen {

using namespace fluxion::codegen;

// Half-type storage and conversions (_Float16, and bfloat16 by its bits).
extern const char* const kBase;

}  // namespace fluxion::cpu::gen
