// The seam between mx.distributed and a transport: a communicator of a
// group of processes. The CPU kernels of the distributed primitives
// (backend/cpu/distributed.cpp) call it with evaluated, row-contiguous
// arrays; MPI implements it (distributed_mpi.cpp). A GPU transport (NCCL)
// would implement the same calls, enqueued on its stream instead of
// completed before returning.
#pragma once

#include <memory>
#include <string>

#include "fluxion/array.h"

namespace fluxion::distributed::detail {

enum class ReduceOp { sum, max, min };

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::shared_ptr<Comm> split(int color, int key) = 0;
  // Each call completes (or raises std::runtime_error naming `op` and the
  // ranks) before it returns. `in` and `out` are row-contiguous with data;
  // all_reduce may be given in == out's buffer.
  virtual void all_reduce(const char* op, const array& in, array& out,
                          ReduceOp r) = 0;
  virtual void all_gather(const char* op, const array& in, array& out) = 0;
  virtual void sum_scatter(const char* op, const array& in, array& out) = 0;
  virtual void send(const char* op, const array& in, int dst) = 0;
  virtual void recv(const char* op, array& out, int src) = 0;
};

// The MPI world of a process started by mpirun, or null when this process
// was not (no OMPI_COMM_WORLD_SIZE / PMI rank in the environment). Raises
// std::runtime_error when libmpi cannot be loaded or initialised.
std::shared_ptr<Comm> mpi_world();
// Whether libmpi (libmpi.so.40, else libmpi.so) can be loaded.
bool mpi_available();
// Whether the environment says a launcher (mpirun) started this process.
bool mpi_launched();
// Ends the whole MPI job (MPI_Abort on the world) when this process has
// initialised MPI; otherwise does nothing. For a process about to exit on
// an error: exiting normally would run MPI_Finalize, which waits for the
// peers, while they may wait for this process in a collective.
void mpi_abort(int code);
// FLUXION_DIST_TIMEOUT in seconds; 0 (unset, empty or not positive): wait
// without limit.
double timeout_seconds();

}  // namespace fluxion::distributed::detail
