// The NCCL world of mx.distributed: the ranks and the unique id from the
// launcher (MPI under mpirun, the TCP rendezvous of torchrun-style
// variables, or this process alone), then a non-blocking communicator
// created against a deadline (FLUXION_DIST_TIMEOUT, else 300 s), so a rank
// that never comes raises instead of hanging.
#include "fluxion/backend/cuda/nccl.h"

#include <stdexcept>
#include <string>

#include "fluxion/distributed_comm.h"

#if FLUXION_HAVE_NCCL

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "fluxion/backend/cuda/cuda.h"
#include "fluxion/backend_interface.h"

namespace fluxion::distributed::detail {

namespace {

using namespace nccl;
using Clock = std::chrono::steady_clock;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  char* end = nullptr;
  long n = v ? std::strtol(v, &end, 10) : -1;
  if (!v || end == v || *end != '\0' || n < 0 || n > (1 << 30)) {
    throw std::invalid_argument(std::string("[distributed.init] ") + name +
                                " must be a non-negative integer; got '" +
                                (v ? v : "") + "'.");
  }
  return static_cast<int>(n);
}

// The rank, size and unique id of this process's world: from MPI under
// mpirun, from the TCP rendezvous under torchrun-style variables, else this
// process alone. The rendezvous is bounded by FLUXION_DIST_TIMEOUT, else
// 300 s.
void world_id(int& rank, int& size, ncclUniqueId& id) {
  const char* op = "distributed.init";
  auto& l = lib();
  double limit = timeout_seconds() > 0 ? timeout_seconds() : 300;
  std::memset(&id, 0, sizeof id);
  if (mpi_launched()) {
    auto mpi = mpi_world();
    rank = mpi->rank();
    size = mpi->size();
    if (rank == 0 && l.ncclGetUniqueId(&id) != ncclSuccess) {
      throw std::runtime_error("[distributed.init] ncclGetUniqueId failed.");
    }
    // Every rank gathers every rank's bytes; rank 0's are the id.
    array mine(Shape{int(sizeof id)}, uint8, nullptr, {});
    mine.set_data(mine.nbytes());
    std::memcpy(mine.data<void>(), &id, sizeof id);
    array all(Shape{int(sizeof id) * size}, uint8, nullptr, {});
    all.set_data(all.nbytes());
    mpi->all_gather(op, mine, all);
    std::memcpy(&id, all.data<void>(), sizeof id);
    return;
  }
  if (torchrun_launched()) {
    rank = env_int("RANK");
    size = env_int("WORLD_SIZE");
    if (size < 1 || rank >= size) {
      throw std::invalid_argument("[distributed.init] RANK " +
                                  std::to_string(rank) + " is not below " +
                                  "WORLD_SIZE " + std::to_string(size) + ".");
    }
    std::string blob;
    if (rank == 0) {
      if (l.ncclGetUniqueId(&id) != ncclSuccess) {
        throw std::runtime_error("[distributed.init] ncclGetUniqueId failed.");
      }
      blob.assign(reinterpret_cast<const char*>(&id), sizeof id);
    }
    const char* host = std::getenv("MASTER_ADDR");
    if (size > 1 && (!host || !*host)) {
      throw std::invalid_argument(
          "[distributed.init] RANK and WORLD_SIZE are set but MASTER_ADDR is "
          "not (the host of rank 0).");
    }
    int port = std::getenv("FLUXION_DIST_PORT") ? env_int("FLUXION_DIST_PORT")
               : size > 1                       ? env_int("MASTER_PORT")
                                                : 0;
    if (size > 1) {
      blob = tcp_broadcast(op, host, port, rank, size, blob, sizeof id, limit);
    }
    std::memcpy(&id, blob.data(), sizeof id);
    return;
  }
  rank = 0;
  size = 1;
  if (l.ncclGetUniqueId(&id) != ncclSuccess) {
    throw std::runtime_error("[distributed.init] ncclGetUniqueId failed.");
  }
}

}  // namespace

bool nccl_available() {
  return lib().handle != nullptr && gpu_backend().available();
}

std::string nccl_unavailable_reason() {
  if (!lib().handle) {
    return lib().error;
  }
  if (!gpu_backend().available()) {
    return "no GPU is visible";
  }
  return "";
}

std::shared_ptr<Comm> nccl_world() {
  static std::once_flag once;
  static std::shared_ptr<Comm> world;
  static std::string failure;
  std::call_once(once, [] {
    if (!nccl_available()) {
      failure = "NCCL is not available: " + nccl_unavailable_reason();
      return;
    }
    try {
      int rank = 0, size = 1;
      ncclUniqueId id;
      world_id(rank, size, id);
      // Fluxion's CUDA backend computes on the first visible GPU: each rank
      // needs one of its own (CUDA_VISIBLE_DEVICES per rank; NCCL refuses
      // two ranks on one GPU).
      int device = 0;
      cu::check(cudaSetDevice(device), "distributed.init");
      ncclConfig_t cfg = nonblocking_config();
      ncclComm_t comm = nullptr;
      double limit = timeout_seconds() > 0 ? timeout_seconds() : 300;
      ncclResult_t rc =
          lib().ncclCommInitRankConfig(&comm, size, id, rank, &cfg);
      if (rc != ncclSuccess && rc != ncclInProgress) {
        throw std::runtime_error(
            std::string("[distributed.init] ncclCommInitRank failed on rank ") +
            std::to_string(rank) + " of " + std::to_string(size) + ": " +
            lib().ncclGetErrorString(rc));
      }
      auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(limit));
      while (true) {
        ncclResult_t state = ncclSuccess;
        rc = lib().ncclCommGetAsyncError(comm, &state);
        if (rc != ncclSuccess) {
          state = rc;
        }
        if (state == ncclSuccess) {
          break;
        }
        if (state != ncclInProgress || Clock::now() > deadline) {
          std::string why =
              state != ncclInProgress
                  ? std::string(lib().ncclGetErrorString(state))
                  : "timed out after " + seconds(limit) +
                        " (FLUXION_DIST_TIMEOUT, else 300 s) waiting for the "
                        "other ranks";
          lib().ncclCommAbort(comm);
          throw std::runtime_error(
              "[distributed.init] Creating the NCCL communicator failed on "
              "rank " +
              std::to_string(rank) + " of " + std::to_string(size) + ": " +
              why + ".");
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      world = make_comm(comm, device);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) {
    throw std::runtime_error(failure);
  }
  return world;
}

}  // namespace fluxion::distributed::detail

#else  // no nccl.h when this was built

namespace fluxion::distributed::detail {
bool nccl_available() { return false; }
std::string nccl_unavailable_reason() {
  return "this build of Fluxion found no nccl.h (the NCCL headers)";
}
std::shared_ptr<Comm> nccl_world() {
  throw std::runtime_error("[distributed.init] NCCL is not available: " +
                           nccl_unavailable_reason() + ".");
}
}  // namespace fluxion::distributed::detail

#endif
