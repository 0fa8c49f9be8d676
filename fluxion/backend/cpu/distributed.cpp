// The CPU kernels of the distributed primitives: the group's communicator
// moves row-contiguous host buffers (fluxion/distributed_comm.h).
#include "fluxion/ops/distributed.h"

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/common/reduce_ops.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/distributed_comm.h"

namespace fluxion::distributed {

namespace detail {

namespace {
template <typename T, typename Op>
void combine(const void* in, void* inout, size_t n) {
  using C = compute_type_t<T>;
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (size_t i = 0; i < n; ++i) {
    b[i] = static_cast<T>(Op()(static_cast<C>(b[i]), static_cast<C>(a[i])));
  }
}
}  // namespace

void combine_on_host(ReduceOp r, Dtype t, const void* in, void* inout,
                     size_t n) {
  dispatch_all(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      // sum and max of bools are "or", min is "and" (as MPI's lor / land).
      if (r == ReduceOp::min) {
        combine<bool, fluxion::detail::AndOp>(in, inout, n);
      } else {
        combine<bool, fluxion::detail::OrOp>(in, inout, n);
      }
    } else {
      using C = compute_type_t<T>;
      switch (r) {
        case ReduceOp::sum:
          return combine<T, fluxion::detail::SumOp<C>>(in, inout, n);
        case ReduceOp::max:
          return combine<T, fluxion::detail::Maximum>(in, inout, n);
        case ReduceOp::min:
          return combine<T, fluxion::detail::Minimum>(in, inout, n);
      }
    }
  });
}

}  // namespace detail

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
