// The GPU's eval of the primitives that move no data: the shared view
// kernels (backend/common/views.cpp), with the GPU's copy for inputs a view
// cannot express.
#include "fluxion/backend/common/views.h"
#include "fluxion/backend/cuda/cuda.h"
#include "fluxion/ops/custom.h"
#include "fluxion/ops/layout.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"

namespace fluxion {

#define FLUXION_GPU_VIEW(CLASS)                                  \
  void CLASS::eval_gpu(const std::vector<array>& inputs,         \
                       std::vector<array>& outputs) {            \
    common::eval_view(*this, inputs, outputs,                    \
                      [](const array& a) {                       \
                        return cu::contiguous(a);               \
                      });                                        \
  }

FLUXION_GPU_VIEW(Reshape)
FLUXION_GPU_VIEW(Transpose)
FLUXION_GPU_VIEW(Broadcast)
FLUXION_GPU_VIEW(ExpandDims)
FLUXION_GPU_VIEW(Squeeze)
FLUXION_GPU_VIEW(Slice)
FLUXION_GPU_VIEW(AsStrided)
FLUXION_GPU_VIEW(View)
FLUXION_GPU_VIEW(Contiguous)
FLUXION_GPU_VIEW(StopGradient)
FLUXION_GPU_VIEW(Depends)
FLUXION_GPU_VIEW(CustomTransforms)

#undef FLUXION_GPU_VIEW

}  // namespace fluxion
