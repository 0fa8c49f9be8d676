// Attention's fused backward on the host (fast::ScaledDotProductAttentionVJP):
// the CPU kernel, and the GPU backend's fallback where cuDNN cannot take
// the shapes or dtype (backend/cuda/sdpa_cudnn.cpp).
#pragma once

#include <cstdint>

namespace fluxion::common {

struct SdpaVjpDims {
  int B, Hq, Hkv, Lq, Lk, D, Dv;
  bool causal;
  float scale;
};

// Row-major, contiguous operands in M (float or double): q [B, Hq, Lq, D],
// k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv], o and dO [B, Hq, Lq, Dv], lse
// [B, Hq, Lq]; writes dq, dk, dv of q's, k's and v's shapes.
template <typename M>
void sdpa_vjp_host(const SdpaVjpDims& dims, const M* q, const M* k,
                   const M* v, const M* o, const M* lse, const M* d_o, M* dq,
                   M* dk, M* dv);

}  // namespace fluxion::common
