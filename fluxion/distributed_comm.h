// The seam between mx.distributed and a transport: a communicator of a
// group of processes. The kernels of the distributed primitives call it
// with evaluated, row-contiguous arrays: the CPU kernels
// (backend/cpu/distributed.cpp) for a host transport, MPI
// (distributed_mpi.cpp), whose calls complete before returning; the GPU
// kernels (backend/cuda/distributed.cpp) for a device transport, NCCL
// (backend/cuda/nccl.cpp), whose calls enqueue on the CUDA stream of the
// kernel being launched and return without waiting for it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"

namespace fluxion::distributed::detail {

enum class ReduceOp { sum, max, min };

// inout[i] = r(inout[i], in[i]) for `n` host elements of dtype `t`, as
// Fluxion's reductions combine (the CPU backend's functors, defined in
// backend/cpu/distributed.cpp): for a host transport that combines
// buffers itself (MPI's user operations). float16 and bfloat16 combine in
// float32 and round back each step; max and min propagate NaN.
void combine_on_host(ReduceOp r, Dtype t, const void* in, void* inout,
                     size_t n);

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::shared_ptr<Comm> split(int color, int key) = 0;
  // Where the transport's buffers live: the cpu (MPI), or the gpu of that
  // index (NCCL). The ops run on a stream of this device.
  virtual Device device() const { return Device{Device::cpu}; }
  // A host transport's calls complete (or raise std::runtime_error naming
  // `op` and the ranks) before they return; a device transport's are
  // enqueued on the current CUDA stream (its errors reach the outputs).
  // `in` and `out` are row-contiguous with data on device();
  // all_reduce may be given in == out's buffer.
  virtual void all_reduce(const char* op, const array& in, array& out,
                          ReduceOp r) = 0;
  virtual void all_gather(const char* op, const array& in, array& out) = 0;
  virtual void sum_scatter(const char* op, const array& in, array& out) = 0;
  virtual void send(const char* op, const array& in, int dst) = 0;
  virtual void recv(const char* op, array& out, int src) = 0;
};

// The cross-rank check of a collective's arguments: every rank passes the
// same collective, dtype and shape (mismatched ones raise instead of
// truncating, hanging or reading past a buffer). A fixed-size descriptor of
// int64s, gathered from every rank by the transport.
constexpr int kDescriptorLength = 12;
using Descriptor = std::array<int64_t, kDescriptorLength>;
Descriptor describe(const char* op, const array& x);
// Raises std::invalid_argument naming `op` and the ranks whose descriptor
// differs from rank 0's, given every rank's (`all`, size() of them).
void check_descriptors(const char* op, const std::vector<Descriptor>& all,
                       int rank);
// The receiving side of a transfer: raises naming both ranks when the
// sender's descriptor differs from what this rank expects.
void check_transfer(const char* op, const Descriptor& sent,
                    const Descriptor& expected, int src, int rank);
// Whether collectives check their arguments across ranks:
// FLUXION_DIST_CHECK=1 or 0; by default on for MPI (the check is one small
// collective more), off for NCCL (it needs a host synchronisation).
bool check_enabled(bool default_on);

// The NCCL world (backend/cuda/nccl.cpp; null where the build has no CUDA
// backend): a communicator of every rank the launcher started (mpirun, or
// torchrun-style RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT), or of this
// process alone without a launcher. Raises std::runtime_error when libnccl
// cannot be loaded, no GPU is visible, or the rendezvous or the
// communicator's creation fails or times out.
std::shared_ptr<Comm> nccl_world();
// Whether libnccl.so.2 can be loaded (and this build has a CUDA backend).
bool nccl_available();
// Why not, for messages.
std::string nccl_unavailable_reason();
// The launcher's ranks for NCCL: under mpirun (rank and size from MPI) or
// torchrun-style environment variables; false without a launcher.
bool torchrun_launched();
// How many ranks share this host (LOCAL_WORLD_SIZE,
// OMPI_COMM_WORLD_LOCAL_SIZE; 1 without).
int local_size();

// The TCP rendezvous (distributed_rendezvous.cpp): rank 0 listens on
// `port` and sends `blob` (`bytes` long) to each of the other `size - 1`
// ranks, which connect to host:port (retrying until rank 0 listens).
// Returns the blob on every rank; raises std::runtime_error naming the
// ranks missing after `timeout_s` seconds.
std::string tcp_broadcast(const char* op, const std::string& host, int port,
                          int rank, int size, const std::string& blob,
                          size_t bytes, double timeout_s);

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
