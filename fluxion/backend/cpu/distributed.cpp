// The CPU kernels of the distributed primitives: the group's communicator
// moves row-contiguous host buffers (fluxion/distributed_comm.h).
#include "fluxion/ops/distributed.h"

#include "fluxion/backend/cpu/copy.h"

namespace fluxion::distributed {

void AllReduce::eval_cpu(const std::vector<array>& in,
                         std::vector<array>& out) {
  // In place (MPI_IN_PLACE) in an input no one else sees; otherwise from
  // the input into a fresh output, without a copy first.
  if (in[0].is_donatable()) {
    out[0].copy_shared_buffer(in[0]);
    group_.comm()->all_reduce(op_name(), out[0], out[0], op_);
    return;
  }
  array x = cpu::ensure_row_contiguous(in[0]);
  out[0].set_data(out[0].nbytes());
  group_.comm()->all_reduce(op_name(), x, out[0], op_);
}

void AllGather::eval_cpu(const std::vector<array>& in,
                         std::vector<array>& out) {
  array x = cpu::ensure_row_contiguous(in[0]);
  out[0].set_data(out[0].nbytes());
  group_.comm()->all_gather("all_gather", x, out[0]);
}

void ReduceScatter::eval_cpu(const std::vector<array>& in,
                             std::vector<array>& out) {
  array x = cpu::ensure_row_contiguous(in[0]);
  out[0].set_data(out[0].nbytes());
  group_.comm()->sum_scatter("sum_scatter", x, out[0]);
}

void Send::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  array x = cpu::ensure_row_contiguous(in[0]);
  group_.comm()->send("send", x, dst_);
  out[0].copy_shared_buffer(in[0]);
}

void Recv::eval_cpu(const std::vector<array>&, std::vector<array>& out) {
  out[0].set_data(out[0].nbytes());
  group_.comm()->recv("recv", out[0], src_);
}

}  // namespace fluxion::distributed
