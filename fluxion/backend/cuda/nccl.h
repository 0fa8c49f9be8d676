// The NCCL library of the CUDA backend, loaded at run time, shared by
// nccl.cpp (the communicator and its watchdog) and nccl_world.cpp (its
// creation). Only where the toolkit has nccl.h (FLUXION_HAVE_NCCL).
#pragma once

// FLUXION_NO_NCCL builds without NCCL even where nccl.h exists.
#if __has_include(<nccl.h>) && !defined(FLUXION_NO_NCCL)
#define FLUXION_HAVE_NCCL 1
#include <nccl.h>

#include <memory>
#include <string>

#include "fluxion/distributed_comm.h"

namespace fluxion::distributed::detail::nccl {

// libnccl.so.2's functions, resolved with dlsym (types from nccl.h, so a
// signature change fails to compile rather than to run).
struct Lib {
  void* handle = nullptr;
  std::string error;  // why it could not be loaded
#define FLUXION_NCCL_FUNCTIONS(X) \
  X(ncclGetUniqueId)              \
  X(ncclCommInitRankConfig)       \
  X(ncclCommSplit)                \
  X(ncclCommAbort)                \
  X(ncclCommGetAsyncError)        \
  X(ncclCommCount)                \
  X(ncclCommUserRank)             \
  X(ncclGetErrorString)           \
  X(ncclGetLastError)             \
  X(ncclAllReduce)                \
  X(ncclAllGather)                \
  X(ncclReduceScatter)            \
  X(ncclSend)                     \
  X(ncclRecv)
#define FLUXION_NCCL_FIELD(NAME) decltype(&::NAME) NAME = nullptr;
  FLUXION_NCCL_FUNCTIONS(FLUXION_NCCL_FIELD)
#undef FLUXION_NCCL_FIELD
  Lib();
};
Lib& lib();

// A non-blocking communicator's configuration: calls may return
// ncclInProgress, polled with ncclCommGetAsyncError against a deadline.
ncclConfig_t nonblocking_config();

// The Comm of a created communicator on gpu `device`, watched by the
// watchdog (never destroyed: primitives may hold it until exit).
std::shared_ptr<Comm> make_comm(ncclComm_t comm, int device);

// "2.000000 s", for messages.
std::string seconds(double t);

}  // namespace fluxion::distributed::detail::nccl

#else
#define FLUXION_HAVE_NCCL 0
#endif
