#include "fluxion/distributed.h"

#include <stdexcept>
#include <string>

#include "fluxion/dtype.h"

namespace fluxion::distributed {

namespace {

// Collectives of a one-process group return their input itself (MLX does the
// same: no node is added, so gradients and transformations pass through).
array singleton_collective(const array& x, const std::optional<Group>& g) {
  (void)g.value_or(init());
  return x;
}

[[noreturn]] void no_peer(const char* op, const char* what, int peer) {
  throw std::invalid_argument(
      std::string("[") + op + "] Cannot " + what + " rank " +
      std::to_string(peer) +
      ": the group is this process alone (size 1; Fluxion has no "
      "multi-process backend).");
}

[[noreturn]] void check_peer(const char* op, const char* what, int peer, const Group& g) {
  if (peer < 0 || peer >= g.size()) {
    throw std::invalid_argument(std::string("[") + op + "] Invalid rank " +
                                std::to_string(peer) + " for a group of size " +
                                std::to_string(g.size()) + ".");
  }
  no_peer(op, what, peer);
}

}  // namespace

Group Group::split(int color, int key) const {
  if (color < 0) {
    throw std::invalid_argument("[Group.split] color must be non-negative; "
                                "got " +
                                std::to_string(color) + ".");
  }
  return Group();
}

bool is_available() { return false; }

Group init(bool strict, const std::string& backend) {
  if (backend != "any" && backend != "single" && backend != "ring" &&
      backend != "mpi" && backend != "nccl" && backend != "jaccl") {
    throw std::invalid_argument("[distributed.init] Unknown backend '" +
                                backend + "'.");
  }
  if (strict) {
    throw std::runtime_error(
        "[distributed.init] No multi-process backend is available (asked "
        "for '" +
        backend +
        "'); Fluxion runs as a single process: call init() without "
        "strict=True for the group of size 1.");
  }
  return Group();
}

array all_sum(const array& x, std::optional<Group> g, StreamOrDevice s) {
  return singleton_collective(x, g);
}
array all_max(const array& x, std::optional<Group> g, StreamOrDevice s) {
  return singleton_collective(x, g);
}
array all_min(const array& x, std::optional<Group> g, StreamOrDevice s) {
  return singleton_collective(x, g);
}
array all_gather(const array& x, std::optional<Group> g, StreamOrDevice s) {
  return singleton_collective(x, g);
}
array sum_scatter(const array& x, std::optional<Group> g, StreamOrDevice s) {
  if (x.ndim() == 0) {
    throw std::invalid_argument(
        "[sum_scatter] Expected an array with at least one dimension; got a "
        "0-d array.");
  }
  return singleton_collective(x, g);
}
array send(const array& x, int dst, std::optional<Group> g, StreamOrDevice s) {
  check_peer("send", "send to", dst, g.value_or(init()));
}
array recv(Shape shape, Dtype dtype, int src, std::optional<Group> g,
           StreamOrDevice s) {
  check_peer("recv", "receive from", src, g.value_or(init()));
}
array recv_like(const array& x, int src, std::optional<Group> g,
                StreamOrDevice s) {
  return recv(x.shape(), x.dtype(), src, g, s);
}

}  // namespace fluxion::distributed
