// mx.distributed: communication groups and collective ops.
//
// Fluxion has no inter-process transport yet (that is its own issue), so the
// only group is the singleton group of this process: rank 0 of size 1, which
// is what MLX gives a program started without a launcher. On it every
// collective is the identity (the sum, max or gather over one process is the
// process's own value), and point-to-point ops raise, since there is no peer.
#pragma once

#include <optional>
#include <string>

#include "fluxion/array.h"
#include "fluxion/device.h"

namespace fluxion::distributed {

class Group {
 public:
  Group() = default;
  int rank() const { return 0; }
  int size() const { return 1; }
  // Sub-groups of the processes passing the same `color`, ranked by `key`
  // (default: their rank). Over one process that is the process itself.
  Group split(int color, int key = -1) const;
};

// Whether a transport that reaches other processes is built in (none is).
bool is_available();
// The group of every process of this run. `backend` is "any" or one of MLX's
// names ("ring", "mpi", "nccl", "jaccl", or "single"); none of the
// multi-process ones is built, so this is the singleton group, and with
// `strict` (a multi-process group required) it raises std::runtime_error.
Group init(bool strict = false, const std::string& backend = "any");

array all_sum(const array& x, std::optional<Group> group = std::nullopt,
              StreamOrDevice s = {});
array all_max(const array& x, std::optional<Group> group = std::nullopt,
              StreamOrDevice s = {});
array all_min(const array& x, std::optional<Group> group = std::nullopt,
              StreamOrDevice s = {});
// Concatenation along axis 0 of every process's x (over one process: x).
array all_gather(const array& x, std::optional<Group> group = std::nullopt,
                 StreamOrDevice s = {});
// The sum over processes, split along axis 0: this process's part.
array sum_scatter(const array& x, std::optional<Group> group = std::nullopt,
                  StreamOrDevice s = {});
array send(const array& x, int dst, std::optional<Group> group = std::nullopt,
           StreamOrDevice s = {});
array recv(Shape shape, Dtype dtype, int src,
           std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
array recv_like(const array& x, int src,
                std::optional<Group> group = std::nullopt,
                StreamOrDevice s = {});

}  // namespace fluxion::distributed
