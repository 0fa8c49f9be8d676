// The GPU kernels of the distributed primitives: the group's device
// transport (NCCL, backend/cuda/nccl.cpp) enqueues on the stream of the
// kernel being launched, so nothing here waits for the GPU. Inputs are
// made row-contiguous on the GPU first; int16 and uint16 reductions are
// widened to 32 bits and back (NCCL has no 16-bit integers; the sums wrap
// as 16-bit sums do).
#include "fluxion/backend/cuda/cuda.h"
#include "fluxion/ops/distributed.h"

namespace fluxion::distributed {

namespace {

bool needs_widening(Dtype t) { return t == int16 || t == uint16; }

array widened(const array& x) {
  array w(x.shape(), x.dtype() == int16 ? int32 : uint32, nullptr, {});
  cu::alloc(w);
  cu::copy_into(x, w);
  cu::keep_alive(w);
  return w;
}

array wide_like(const array& out) {
  array w(out.shape(), out.dtype() == int16 ? int32 : uint32, nullptr, {});
  cu::alloc(w);
  cu::keep_alive(w);
  return w;
}

detail::Comm& comm_of(const Group& g, const char* op) {
  if (!g.comm() || g.comm()->device().type != Device::gpu) {
    throw std::invalid_argument(std::string("[") + op +
                                "] This group's transport (MPI) moves host "
                                "memory: use a cpu stream.");
  }
  return *g.comm();
}

}  // namespace

void AllReduce::eval_gpu(const std::vector<array>& in,
                         std::vector<array>& out) {
  auto& comm = comm_of(group_, op_name());
  if (needs_widening(in[0].dtype())) {
    array w = widened(in[0]);
    comm.all_reduce(op_name(), w, w, op_);
    cu::alloc(out[0]);
    cu::copy_into(w, out[0]);
    return;
  }
  if (in[0].flags().row_contiguous) {
    // In place (NCCL takes the same buffer for both) when the input's
    // buffer can be donated.
    cu::alloc_like(in[0], out[0], true);
    comm.all_reduce(op_name(), in[0], out[0], op_);
    return;
  }
  array x = cu::contiguous(in[0]);
  cu::alloc(out[0]);
  comm.all_reduce(op_name(), x, out[0], op_);
}

void AllGather::eval_gpu(const std::vector<array>& in,
                         std::vector<array>& out) {
  auto& comm = comm_of(group_, "all_gather");
  array x = cu::contiguous(in[0]);
  cu::alloc(out[0]);
  comm.all_gather("all_gather", x, out[0]);
}

void ReduceScatter::eval_gpu(const std::vector<array>& in,
                             std::vector<array>& out) {
  auto& comm = comm_of(group_, "sum_scatter");
  if (needs_widening(in[0].dtype())) {
    array w = widened(in[0]);
    array part = wide_like(out[0]);
    comm.sum_scatter("sum_scatter", w, part);
    cu::alloc(out[0]);
    cu::copy_into(part, out[0]);
    return;
  }
  array x = cu::contiguous(in[0]);
  cu::alloc(out[0]);
  comm.sum_scatter("sum_scatter", x, out[0]);
}

void Send::eval_gpu(const std::vector<array>& in, std::vector<array>& out) {
  auto& comm = comm_of(group_, "send");
  array x = cu::contiguous(in[0]);
  comm.send("send", x, dst_);
  out[0].copy_shared_buffer(in[0]);
}

void Recv::eval_gpu(const std::vector<array>&, std::vector<array>& out) {
  auto& comm = comm_of(group_, "recv");
  cu::alloc(out[0]);
  comm.recv("recv", out[0], src_);
}

}  // namespace fluxion::distributed
