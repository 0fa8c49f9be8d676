// The three-input elementwise functor (where), shared by every backend and
// by the kernels compile generates (see unary_ops.h and math.h).
#pragma once

// Host only: stripped from the generated kernels' preamble.
#include "fluxion/backend/common/math.h"

namespace fluxion::detail {

struct Select {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(bool c, T x, T y) const {
    return c ? x : y;
  }
};

}  // namespace fluxion::detail
