#pragma once

#include "fluxion/array.h"

namespace fluxion::cpu {

// Schedule `arr`'s primitive on its CPU stream's worker.
void eval(array& arr);

}  // namespace fluxion::cpu
