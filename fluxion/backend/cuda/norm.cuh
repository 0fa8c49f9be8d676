// What the row kernels of the norms share (norm.cu: the forward, and
// norm_vjp.cu: the backward): the CPU's rounding of 1 / sqrt, sums over a
// warp's lane groups and over a block, and vector loads of a weight.
#pragma once

#include "fluxion/backend/cuda/kernels.cuh"

namespace fluxion::cu {

// 1 / sqrt(v), correctly rounded in both steps as on the CPU (not the
// approximate rsqrt).
__device__ __forceinline__ float inv_sqrt(float v) { return 1.0f / sqrtf(v); }
__device__ __forceinline__ double inv_sqrt(double v) { return 1.0 / ::sqrt(v); }

// Sum of v over each aligned group of G lanes of the warp, in every lane of
// the group (a butterfly: all lanes agree, and offsets below G stay inside
// the group). Every lane of the warp must call it.
template <int G = 32, typename M>
__device__ __forceinline__ M warp_sum(M v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, o);
  }
  return v;
}

// Sum of v over the block, in every thread. `part` holds 32 values; the
// closing barrier lets the caller reuse it at once.
template <typename M>
__device__ __forceinline__ M block_sum(M v, M* part) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) {
    part[warp] = v;
  }
  __syncthreads();
  M s = part[0];
  const int nw = blockDim.x / 32;
  for (int i = 1; i < nw; ++i) {
    s += part[i];
  }
  __syncthreads();
  return s;
}

// V consecutive parameter values from element e, as one Pack when the
// vector is aligned for it.
template <typename T, typename M, int V>
__device__ __forceinline__ void load_param(const T* p, bool packed, int e,
                                           M (&o)[V]) {
  if (V > 1 && packed) {
    Pack<T, V> q = *reinterpret_cast<const Pack<T, V>*>(p + e);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      o[k] = convert<M>(q.v[k]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      o[k] = convert<M>(p[e + k]);
    }
  }
}

}  // namespace fluxion::cu
