// The GPU side of attention's fused backward
// (fast::ScaledDotProductAttentionVJP): cuDNN's flash-attention backward
// (sdpa_cudnn.cpp) where it runs. Elsewhere (a dtype or head size cuDNN
// does not take, cuDNN absent or refusing at run time: the op only builds
// this primitive on the GPU after cuDNN built both passes' plans, so this
// is the rare path, and the op table's GPU runs) the host routine of
// backend/common/sdpa_vjp.cpp computes it: the operands are copied to the
// host through the stream and widened to float (double for float64), and
// the gradients copied back.
#include "fluxion/backend/common/sdpa_vjp.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cuda/cuda.h"
#include "fluxion/backend/cuda/sdpa_cudnn.h"
#include "fluxion/backend_interface.h"
#include "fluxion/ops/fast.h"

namespace fluxion {

namespace {

// Every copy goes through the node's stream, never the legacy default
// stream: a host-resident input (a cotangent the forward never read) gets
// its GPU copy on the upload stream (Data::ptr_on), which only our stream
// is made to wait for; a cudaMemcpy on the legacy stream read it half
// uploaded (the op table's vmap check on an H100, session 19).

// Queues the copy of `a` (row-contiguous) into `raw`, read once the stream
// has been synchronized.
template <typename T>
void queue_to_host(const array& a, std::vector<T>& raw, cudaStream_t stream) {
  raw.resize(a.size());
  const void* src = cu::ptr(a);  // may queue the upload; the stream waits
  cu::check(cudaMemcpyAsync(raw.data(), src, a.nbytes(),
                            cudaMemcpyDeviceToHost, stream),
            "scaled_dot_product_attention_vjp");
}

template <typename M, typename T>
std::vector<M> widened(const std::vector<T>& raw) {
  std::vector<M> out(std::max<size_t>(raw.size(), 1));
  for (size_t i = 0; i < raw.size(); ++i) {
    out[i] = static_cast<M>(raw[i]);
  }
  return out;
}

template <typename T>
void host_vjp(const std::vector<array>& in, std::vector<array>& out,
              float scale, bool causal) {
  using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
  cudaStream_t stream = cu::current_stream();
  std::vector<array> c;
  for (auto& a : in) {
    c.push_back(cu::contiguous(a));
  }
  for (auto& o : out) {
    cu::alloc(o);
  }
  // The inputs are q, k, v, o, the row statistics (in M) and d_o.
  std::vector<T> raw_q, raw_k, raw_v, raw_o, raw_do;
  std::vector<M> raw_lse;
  queue_to_host(c[0], raw_q, stream);
  queue_to_host(c[1], raw_k, stream);
  queue_to_host(c[2], raw_v, stream);
  queue_to_host(c[3], raw_o, stream);
  queue_to_host(c[4], raw_lse, stream);
  queue_to_host(c[5], raw_do, stream);
  cu::check(cudaStreamSynchronize(stream), "scaled_dot_product_attention_vjp");
  auto q = widened<M>(raw_q), k = widened<M>(raw_k), v = widened<M>(raw_v),
       o = widened<M>(raw_o), d_o = widened<M>(raw_do);
  auto lse = widened<M>(raw_lse);
  common::SdpaVjpDims dims{in[0].shape(0), in[0].shape(1), in[1].shape(1),
                           in[0].shape(2), in[1].shape(2), in[0].shape(3),
                           in[2].shape(3), causal,         scale};
  std::vector<M> g[3];
  for (int i = 0; i < 3; ++i) {
    g[i].resize(std::max<size_t>(out[i].size(), 1));
  }
  common::sdpa_vjp_host<M>(dims, q.data(), k.data(), v.data(), o.data(),
                           lse.data(), d_o.data(), g[0].data(), g[1].data(),
                           g[2].data());
  std::vector<T> back[3];
  for (int i = 0; i < 3; ++i) {
    back[i].resize(out[i].size());
    for (size_t e = 0; e < back[i].size(); ++e) {
      back[i][e] = static_cast<T>(g[i][e]);
    }
    cu::check(cudaMemcpyAsync(cu::ptr(out[i]), back[i].data(), out[i].nbytes(),
                              cudaMemcpyHostToDevice, stream),
              "scaled_dot_product_attention_vjp");
  }
  // The host buffers must outlive the copies.
  cu::check(cudaStreamSynchronize(stream), "scaled_dot_product_attention_vjp");
}

}  // namespace

void fast::ScaledDotProductAttentionVJP::eval_gpu(
    const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (cu::cudnn_sdpa::backward(inputs, outputs, scale_, causal_)) {
    return;
  }
  dispatch<FloatTypes>(inputs[0].dtype(), "scaled_dot_product_attention_vjp",
                       [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         host_vjp<T>(inputs, outputs, scale_, causal_);
                       });
}

bool fast::ScaledDotProductAttentionVJP::use_fused(Stream s, const array& q,
                                                   const array& k,
                                                   const array& v, bool causal,
                                                   float scale) {
  if (s.device.type != Device::gpu || !gpu_backend().available() ||
      !cu::cudnn_sdpa::eligible(q.dtype(), q.shape(0), q.shape(1), k.shape(1),
                                q.shape(2), k.shape(2), q.shape(3), v.shape(3),
                                causal)) {
    return false;
  }
  return cu::cudnn_sdpa::plans_ready(s.device.index, q.dtype(), q.shape(0),
                                     q.shape(1), k.shape(1), q.shape(2),
                                     k.shape(2), q.shape(3), causal, scale);
}

}  // namespace fluxion
