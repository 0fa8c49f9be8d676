// The eval_gpu of every primitive without a CUDA kernel yet (a 0 in the
// registry's GPU column, fluxion/primitive_list.h): it raises, naming the
// primitive, rather than computing anything.
#include <stdexcept>
#include <string>

#include "fluxion/primitive_classes.h"

namespace fluxion {

namespace {
[[noreturn]] void no_gpu_kernel(const Primitive& p) {
  throw std::runtime_error(std::string("[eval] Cannot run ") + p.name() +
                           " on the gpu yet.");
}
}  // namespace

#define FLUXION_CUDA_MISSING(CLASS, FAMILY, CPU, GPU)             \
  FLUXION_IF_NO_KERNEL(GPU)(                                      \
      void CLASS::eval_gpu(const std::vector<array>&,             \
                           std::vector<array>&) {                 \
        no_gpu_kernel(*this);                                     \
      })
FLUXION_PRIMITIVES(FLUXION_CUDA_MISSING)
#undef FLUXION_CUDA_MISSING

}  // namespace fluxion
