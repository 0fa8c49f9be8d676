// mx.distributed's groups: the singleton group, the MPI world of a process
// started by mpirun (distributed_mpi.cpp), the NCCL world
// (backend/cuda/nccl.cpp), and their splits; the cross-rank checks of the
// collectives' arguments. The ops
// are in fluxion/ops/distributed.cpp.
#include "fluxion/distributed.h"

#include <cstdlib>
#include <cstring>
#include <sstream>
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
  if (backend == "mpi") {
    return detail::mpi_available();
  }
  if (backend == "nccl") {
    return detail::nccl_available();
  }
  if (backend == "any") {
    return detail::mpi_available() || detail::nccl_available();
  }
  return false;
}

namespace {
// "any" takes NCCL when a launcher gave ranks, a GPU is visible, and each
// rank of this host has a GPU of its own: Fluxion computes on the first
// visible GPU, so either this host runs one rank, or the launcher gave
// each process one GPU (CUDA_VISIBLE_DEVICES naming one). Otherwise the
// ranks would share a GPU, which NCCL refuses: MPI.
bool prefer_nccl() {
  static const bool prefer = [] {
    bool launched = detail::mpi_launched() || detail::torchrun_launched();
    if (!launched || !detail::nccl_available()) {
      return false;
    }
    const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
    bool own = v && *v && device_count(Device::gpu) == 1;
    return detail::local_size() == 1 || own;
  }();
  return prefer;
}
}  // namespace

Group init(bool strict, const std::string& backend) {
  if (backend != "any" && backend != "single" && backend != "ring" &&
      backend != "mpi" && backend != "nccl" && backend != "jaccl") {
    throw std::invalid_argument("[distributed.init] Unknown backend '" +
                                backend + "'.");
  }
  std::string why;
  if (backend == "nccl" || (backend == "any" && prefer_nccl())) {
    if (detail::nccl_available()) {
      // Without a launcher, a communicator of this process alone: its
      // collectives still run through NCCL on the GPU.
      auto world = detail::nccl_world();
      if (world->size() > 1 || !strict) {
        return Group(world);
      }
      why = "NCCL was asked for but no launcher gave this process ranks";
    } else {
      why = "NCCL is not available here: " + detail::nccl_unavailable_reason();
    }
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
        backend + "'" + (why.empty() ? "" : "; " + why) +
        "): Fluxion's are MPI, for processes started by mpirun (`mpirun -np "
        "2 python train.py`), and NCCL on GPUs, for processes started by "
        "mpirun or with torchrun's RANK, WORLD_SIZE, MASTER_ADDR and "
        "MASTER_PORT; call init() without strict=True for the group of size "
        "1.");
  }
  return Group();
}

namespace detail {

namespace {

// The collectives a descriptor names, by index.
constexpr const char* kOps[] = {"all_sum",     "all_max", "all_min",
                                "all_gather",  "sum_scatter", "send",
                                "recv"};
constexpr int kShownDims = kDescriptorLength - 5;

std::string describe_text(const Descriptor& d) {
  std::ostringstream os;
  Dtype t{static_cast<Dtype::Val>(d[1]), static_cast<uint8_t>(d[2])};
  os << dtype_name(t) << " of shape (";
  if (d[3] > kShownDims) {
    os << d[3] << " dims, " << d[4] << " elements";
  } else {
    for (int64_t i = 0; i < d[3]; ++i) {
      os << (i ? ", " : "") << d[5 + i];
    }
    if (d[3] == 1) {
      os << ",";
    }
  }
  os << ")";
  return os.str();
}

const char* op_of(const Descriptor& d) {
  return d[0] >= 0 && d[0] < int64_t(std::size(kOps)) ? kOps[d[0]] : "?";
}

}  // namespace

Descriptor describe(const char* op, const array& x) {
  Descriptor d{};
  d[0] = -1;
  for (size_t i = 0; i < std::size(kOps); ++i) {
    if (std::strcmp(op, kOps[i]) == 0) {
      d[0] = static_cast<int64_t>(i);
    }
  }
  d[1] = static_cast<int64_t>(x.dtype().val);
  d[2] = x.dtype().size;
  d[3] = x.ndim();
  d[4] = static_cast<int64_t>(x.size());
  // Past kShownDims the last slot folds in the rest (the messages then
  // give the rank and the size only).
  for (int i = 0; i < x.ndim(); ++i) {
    if (i < kShownDims - 1 || x.ndim() <= kShownDims) {
      d[5 + i] = x.shape(i);
    } else {
      d[5 + kShownDims - 1] = d[5 + kShownDims - 1] * 1000003 + x.shape(i);
    }
  }
  return d;
}

void check_descriptors(const char* op, const std::vector<Descriptor>& all,
                       int rank) {
  std::string diff;
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      diff += (diff.empty() ? "" : "; ") + std::string("rank ") +
              std::to_string(r) + " called " + op_of(all[r]) + " with " +
              describe_text(all[r]);
    }
  }
  if (diff.empty()) {
    return;
  }
  throw std::invalid_argument(
      std::string("[") + op + "] Mismatched arguments across the ranks of a "
      "group of " + std::to_string(all.size()) + " (seen on rank " +
      std::to_string(rank) + "): rank 0 called " + op_of(all[0]) + " with " +
      describe_text(all[0]) + "; " + diff + ".");
}

void check_transfer(const char* op, const Descriptor& sent,
                    const Descriptor& expected, int src, int rank) {
  // The op slots differ by design (send against recv).
  if (std::equal(sent.begin() + 1, sent.end(), expected.begin() + 1)) {
    return;
  }
  throw std::invalid_argument(
      std::string("[") + op + "] Mismatched transfer: rank " +
      std::to_string(rank) + " expected " + describe_text(expected) +
      " from rank " + std::to_string(src) + ", which sent " +
      describe_text(sent) + ".");
}

bool check_enabled(bool default_on) {
  const char* v = std::getenv("FLUXION_DIST_CHECK");
  if (!v || !*v) {
    return default_on;
  }
  if (std::strcmp(v, "0") == 0 || std::strcmp(v, "1") == 0) {
    return v[0] == '1';
  }
  throw std::invalid_argument(
      std::string("FLUXION_DIST_CHECK must be 0 or 1; got '") + v + "'.");
}

namespace {
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) {
    return fallback;
  }
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 0 || n > (1 << 30)) {
    throw std::invalid_argument(std::string("[distributed.init] ") + name +
                                " must be a non-negative integer; got '" + v +
                                "'.");
  }
  return static_cast<int>(n);
}
}  // namespace

bool torchrun_launched() {
  return std::getenv("RANK") && std::getenv("WORLD_SIZE");
}

int local_size() {
  return env_int("LOCAL_WORLD_SIZE",
                 env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1));
}

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
