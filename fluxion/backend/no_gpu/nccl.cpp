// mx.distributed's NCCL backend without a GPU backend: not available.
#include <stdexcept>
#include <string>

#include "fluxion/distributed_comm.h"

namespace fluxion::distributed::detail {
bool nccl_available() { return false; }
std::string nccl_unavailable_reason() {
  return "Fluxion was built without a GPU backend";
}
std::shared_ptr<Comm> nccl_world() {
  throw std::runtime_error("[distributed.init] NCCL is not available: " +
                           nccl_unavailable_reason() + ".");
}
}  // namespace fluxion::distributed::detail
