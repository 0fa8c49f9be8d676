// mx.distributed: communication groups and collective ops.
//
// A Group is a set of processes that communicate through a backend
// (fluxion/distributed_comm.h). A process started by `mpirun` gets the MPI
// group of every process of the job (Open MPI loaded at run time:
// distributed_mpi.cpp); without a launcher it gets the singleton group,
// rank 0 of size 1, which is what MLX gives then: on it every collective is
// the identity (no node is added) and point-to-point ops raise, since there
// is no peer. A process started with GPUs can get a NCCL group instead
// (backend/cuda/nccl.cpp). Collectives over a real group are lazy
// primitives (fluxion/ops/distributed.h) evaluated on a stream of the
// transport's device: a CPU stream for MPI, a GPU stream for NCCL.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "fluxion/array.h"
#include "fluxion/device.h"

namespace fluxion::distributed {

namespace detail {
class Comm;
}

class Group {
 public:
  // The singleton group (this process alone, no backend).
  Group() = default;
  explicit Group(std::shared_ptr<detail::Comm> comm) : comm_(std::move(comm)) {}
  int rank() const;
  int size() const;
  // Sub-groups of the processes passing the same `color`, ranked by `key`
  // (default: their rank). Every process of the group must call it.
  Group split(int color, int key = -1) const;
  // The backend's communicator; null for the singleton group.
  const std::shared_ptr<detail::Comm>& comm() const { return comm_; }

 private:
  std::shared_ptr<detail::Comm> comm_;
};

// Whether `backend` can be used here: "mpi", whether libmpi loads; "nccl",
// whether libnccl.so.2 loads and a GPU is visible; "any", either. ("ring",
// "jaccl": not built, false.)
bool is_available(const std::string& backend = "any");
// The group of every process of this run. `backend` is "any" or one of MLX's
// names ("ring", "mpi", "nccl", "jaccl", or "single"). "mpi": the MPI group
// of a process started by mpirun. "nccl": a NCCL communicator of every
// process started by mpirun or with torchrun-style RANK / WORLD_SIZE /
// MASTER_ADDR / MASTER_PORT, or of this process alone without a launcher;
// its collectives run on the GPU. "any": NCCL when a launcher gave ranks
// and each rank has a GPU of its own (backend/cuda/nccl.cpp), else MPI.
// Otherwise the singleton group, and with `strict` (a multi-process group
// required) this raises std::runtime_error. The same group is returned by
// every call.
Group init(bool strict = false, const std::string& backend = "any");

// Reductions over the processes of the group, elementwise: same shape and
// dtype as x on every process (bool: sum and max are "or", min is "and").
array all_sum(const array& x, std::optional<Group> group = std::nullopt,
              StreamOrDevice s = {});
array all_max(const array& x, std::optional<Group> group = std::nullopt,
              StreamOrDevice s = {});
array all_min(const array& x, std::optional<Group> group = std::nullopt,
              StreamOrDevice s = {});
// Concatenation along axis 0 of every process's x (a 0-d x counts as
// shape (1,)); every process passes the same shape.
array all_gather(const array& x, std::optional<Group> group = std::nullopt,
                 StreamOrDevice s = {});
// The sum over processes, split along axis 0 (whose size the group's size
// divides): this process's part.
array sum_scatter(const array& x, std::optional<Group> group = std::nullopt,
                  StreamOrDevice s = {});
// Send x to process `dst`; the result is x itself once sent (evaluate it
// to send).
array send(const array& x, int dst, std::optional<Group> group = std::nullopt,
           StreamOrDevice s = {});
array recv(Shape shape, Dtype dtype, int src,
           std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
array recv_like(const array& x, int src,
                std::optional<Group> group = std::nullopt,
                StreamOrDevice s = {});

}  // namespace fluxion::distributed
