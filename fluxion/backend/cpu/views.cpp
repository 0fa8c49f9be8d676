// The CPU's eval of the primitives that move no data: the shared view
// kernels (backend/common/views.cpp), with the CPU's copy for inputs a view
// cannot express.
#include "fluxion/backend/common/views.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/ops/custom.h"
#include "fluxion/ops/extras.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"

namespace fluxion {

#define FLUXION_CPU_VIEW(CLASS)                                  \
  void CLASS::eval_cpu(const std::vector<array>& inputs,         \
                       std::vector<array>& outputs) {            \
    common::eval_view(*this, inputs, outputs,                    \
                      [](const array& a) {                       \
                        return cpu::ensure_row_contiguous(a);    \
                      });                                        \
  }

FLUXION_CPU_VIEW(Reshape)
FLUXION_CPU_VIEW(Transpose)
FLUXION_CPU_VIEW(Broadcast)
FLUXION_CPU_VIEW(ExpandDims)
FLUXION_CPU_VIEW(Squeeze)
FLUXION_CPU_VIEW(Slice)
FLUXION_CPU_VIEW(AsStrided)
FLUXION_CPU_VIEW(View)
FLUXION_CPU_VIEW(Contiguous)
FLUXION_CPU_VIEW(StopGradient)
FLUXION_CPU_VIEW(Depends)
FLUXION_CPU_VIEW(CustomTransforms)

#undef FLUXION_CPU_VIEW

}  // namespace fluxion
