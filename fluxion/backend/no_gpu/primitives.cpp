// Every primitive's eval_gpu, generated from the registry
// (fluxion/primitive_list.h): a primitive class missing from the list has
// no eval_gpu and fails to link, an entry without a class fails here.
#include <stdexcept>
#include <string>

#include "fluxion/primitive_classes.h"

namespace fluxion {

namespace {
[[noreturn]] void no_gpu_kernel(const Primitive& p) {
  throw std::runtime_error(
      std::string("[eval] Cannot run ") + p.name() +
      " on the gpu: Fluxion was built without a GPU backend.");
}
}  // namespace

#define FLUXION_NO_GPU_KERNEL(CLASS, FAMILY, CPU, GPU)            \
  void CLASS::eval_gpu(const std::vector<array>&,                 \
                       std::vector<array>&) {                     \
    no_gpu_kernel(*this);                                         \
  }
FLUXION_PRIMITIVES(FLUXION_NO_GPU_KERNEL)
#undef FLUXION_NO_GPU_KERNEL

}  // namespace fluxion
