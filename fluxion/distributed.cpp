// mx.distributed's groups: the singleton group, or the MPI world of a
// process started by mpirun (distributed_mpi.cpp) and its splits. The ops
// are in fluxion/ops/distributed.cpp.
#include "fluxion/distributed.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "fluxion/distributed_comm.h"

namespace fluxion::distributed {

int Group::rank() const { return comm_ ? comm_->rank() : 0; }
int Group::size() const { return comm_ ? comm_->size() : 1; }

Group Group::split(int color, int key) const {
  if (color < 0) {
    throw std::invalid_argument(
        "[Group.split] color must be non-negative; "
        "got " +
        std::to_string(color) + ".");
  }
  return comm_ ? Group(comm_->split(color, key)) : Group();
}

bool is_available(const std::string& backend) {
  if (backend == "any" || backend == "mpi") {
    return detail::mpi_available();
  }
  return false;
}

Group init(bool strict, const std::string& backend) {
  if (backend != "any" && backend != "single" && backend != "ring" &&
      backend != "mpi" && backend != "nccl" && backend != "jaccl") {
    throw std::invalid_argument("[distributed.init] Unknown backend '" +
                                backend + "'.");
  }
  if (backend == "any" || backend == "mpi") {
    if (auto world = detail::mpi_world()) {
      return Group(world);
    }
  }
  if (strict) {
    throw std::runtime_error(
        "[distributed.init] No multi-process backend is available (asked "
        "for '" +
        backend +
        "'): Fluxion's is MPI, for processes started by mpirun (`mpirun -np "
        "2 python train.py`); call init() without strict=True for the "
        "group of size 1.");
  }
  return Group();
}

namespace detail {
double timeout_seconds() {
  const char* v = std::getenv("FLUXION_DIST_TIMEOUT");
  if (!v || !*v) {
    return 0;
  }
  char* end = nullptr;
  double t = std::strtod(v, &end);
  if (end == v || *end != '\0') {
    throw std::invalid_argument(
        std::string("FLUXION_DIST_TIMEOUT must be a number of seconds; got '") +
        v + "'.");
  }
  return t > 0 ? t : 0;
}
}  // namespace detail

}  // namespace fluxion::distributed
