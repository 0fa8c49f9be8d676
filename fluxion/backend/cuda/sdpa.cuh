// What the two attention kernels share (sdpa.cu: SIMT, any dtype and head
// size, decoding; sdpa_mma.cu: tensor cores for float16/bfloat16
// prefill): the parameters, the softmax state's rules and the masks'.
#pragma once

#include <limits>

#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/ops/fast.h"

namespace fluxion::fast::sdpa_detail {

struct SdpaParams {
  const void* q;
  const void* k;
  const void* v;
  const void* mask;   // [B, Hq, Lq, Lk] by ms, or null
  const void* sinks;  // [Hq] by sink_stride, or null
  void* out;          // [B, Hq, Lq, Dv], row-contiguous
  void* lse;          // [B, Hq, Lq] in M (the logsumexp), or null
  void* part;         // nsplit > 1: nsplit * B * Hq * Lq * (Dv + 2) of M
                      // ([nsplit, rows, Dv + 2] in sdpa.cu; the decode
                      // kernel's own layout in sdpa_decode.cu)
  int64_t qs[4], ks[4], vs[4], ms[4];
  int64_t sink_stride;
  int B, Hq, Hkv, R, Lq, Lk, D, Dv;
  int causal, mask_kind, has_sinks;
  bool vec;  // K and V readable in 16-byte packs (SIMT kernel)
  float scale;
  int nsplit, split_len;  // split_len: keys per split, a multiple of kTileK
  int row_blocks;         // blocks of kBlockRows rows per (b, kv head)
};

template <typename M>
__device__ __forceinline__ M neg_inf() {
  return -std::numeric_limits<M>::infinity();
}

// The CPU's running max: a nan candidate is skipped (it still reaches the
// row through exp and the sum).
template <typename M>
__device__ __forceinline__ M max_skip_nan(M a, M b) {
  return a < b ? b : a;
}

template <typename M>
__device__ __forceinline__ M warp_max(M v) {
  return cu::warp_all_reduce(v, [](M a, M b) { return max_skip_nan(a, b); });
}

using cu::warp_sum;

__device__ __forceinline__ float exp_m(float x) { return expf(x); }
__device__ __forceinline__ double exp_m(double x) { return exp(x); }
// The build turns off FMA contraction (bit-equal elementwise results with
// the CPU); the products here are sums of many terms in another order than
// the CPU's anyway, so they use fused multiply-adds explicitly.
__device__ __forceinline__ float fma_m(float a, float b, float c) {
  return fmaf(a, b, c);
}
__device__ __forceinline__ double fma_m(double a, double b, double c) {
  return fma(a, b, c);
}

// Keys query i can see under the causal mask (all without it).
__device__ __forceinline__ int visible(const SdpaParams& p, int i) {
  if (!p.causal) {
    return p.Lk;
  }
  int v = i + p.Lk - p.Lq + 1;
  return v < 0 ? 0 : (v > p.Lk ? p.Lk : v);
}

// The output of one row from its softmax state (m, l, unnormalized acc),
// the head's sink joining as one more logit without a value.
template <typename M>
__device__ __forceinline__ M finish_scale(const SdpaParams& p, M m, M l,
                                          M sink, M& total) {
  M mf = m;
  if (p.has_sinks) {
    mf = sink != sink ? sink : (mf < sink ? sink : mf);
  }
  // A row that saw nothing (m = -inf, l = 0) and no sink is nan (0 / 0),
  // as the CPU's row of -inf scores.
  M w = m == neg_inf<M>() ? M(0) : exp_m(m - mf);
  total = l * w;
  if (p.has_sinks) {
    total += exp_m(sink - mf);
  }
  return w;
}

template <typename T, typename M>
__device__ __forceinline__ M load(const void* base, int64_t off) {
  return cu::convert<M>(static_cast<const T*>(base)[off]);
}

// The score of key j for query i of head (b, h), which sees `vis` keys,
// from its product q.k by the rules above: -inf (no weight) for a
// causally hidden key, the lowest finite value for every key of a query
// that sees none and for a key a boolean mask hides, else the scaled
// product plus an additive mask.
template <typename T, typename M>
__device__ __forceinline__ M masked_score(const SdpaParams& p, int b, int h,
                                          int i, int vis, int j, M dot) {
  if (vis == 0) {
    return std::numeric_limits<M>::lowest();
  }
  if (j >= vis) {
    return neg_inf<M>();
  }
  M sc = dot * static_cast<M>(p.scale);
  if (p.mask_kind != ScaledDotProductAttention::None) {
    const int64_t mo =
        b * p.ms[0] + h * p.ms[1] + i * p.ms[2] + j * p.ms[3];
    if (p.mask_kind == ScaledDotProductAttention::Bool) {
      if (!static_cast<const bool*>(p.mask)[mo]) {
        sc = std::numeric_limits<M>::lowest();
      }
    } else {
      sc += load<T, M>(p.mask, mo);
    }
  }
  return sc;
}

// The keys a block of queries [i0, i1) reads: up to the furthest causal
// limit, or all of them when a query sees none (it attends to every key).
__device__ __forceinline__ int keys_for(const SdpaParams& p, int i0, int i1) {
  int kend = 0;
  for (int i = i0; i < i1; ++i) {
    const int vis = visible(p, i);
    kend = max(kend, vis == 0 ? p.Lk : vis);
  }
  return kend;
}

// The tensor-core kernel of sdpa_mma.cu for float16/bfloat16 prefill with
// head dimension 64 or 128 and unit feature strides: false when it does
// not apply (the caller runs the SIMT kernel).
template <typename T>
bool sdpa_mma(const SdpaParams& p, cudaStream_t stream);

// The decode kernel of sdpa_decode.cu (Lq <= 4, float16/bfloat16/float32,
// D = Dv in whole 16-byte units, K and V readable in 16-byte packs):
// decode_plan returns false when it does not apply, else sets p's
// row_blocks, nsplit and split_len; the caller then gives p.part
// nsplit * B * Hq * Lq * (D + 2) floats when nsplit > 1 and calls
// sdpa_decode, which launches the kernel and the merge of the splits.
template <typename T>
bool decode_plan(SdpaParams& p);
template <typename T>
void sdpa_decode(const SdpaParams& p, cudaStream_t stream);

}  // namespace fluxion::fast::sdpa_detail
