// The eval_cpu of every primitive the registry (fluxion/primitive_list.h)
// marks as having no CPU kernel (a 0 in the CPU column): it raises. None
// today; a 1 without a kernel fails to link, a 0 next to a kernel is a
// duplicate definition.
#include <stdexcept>
#include <string>

#include "fluxion/primitive_classes.h"

namespace fluxion {

#define FLUXION_NO_CPU_KERNEL(CLASS, FAMILY, CPU, GPU)                      \
  FLUXION_IF_NO_KERNEL(CPU)(                                                \
      void CLASS::eval_cpu(const std::vector<array>&, std::vector<array>&) { \
        throw std::runtime_error(std::string("[eval] Cannot run ") + name() + \
                                 " on the cpu: it has no CPU kernel.");     \
      })
FLUXION_PRIMITIVES(FLUXION_NO_CPU_KERNEL)
#undef FLUXION_NO_CPU_KERNEL

}  // namespace fluxion
