// What the row kernels of the norms share (norm.cu: the forward, and
// norm_vjp.cu: the backward): the CPU's rounding of 1 / sqrt, the rows'
// statistics (sums from kernels.cuh), and vector loads of a weight.
#pragma once

#include "fluxion/backend/cuda/kernels.cuh"

namespace fluxion::cu {

// 1 / sqrt(v), correctly rounded in both steps as on the CPU (not the
// approximate rsqrt).
__device__ __forceinline__ float inv_sqrt(float v) { return 1.0f / sqrtf(v); }
__device__ __forceinline__ double inv_sqrt(double v) { return 1.0 / ::sqrt(v); }

// A row's statistics, mean (0 for RMSNorm) and rstd = 1 / sqrt(var + eps),
// two-pass as on the CPU. In registers: the thread's units are v[k] for
// k * nt < left, and `sum` combines a value over the row's threads (every
// thread must call it, valid or not).
template <typename M, int P, int V, typename Sum>
__device__ __forceinline__ void row_stats(const M (&v)[P][V], int left, int nt,
                                          int d, bool layer, M eps, Sum sum,
                                          M& mu, M& rstd) {
  const M n = static_cast<M>(d);
  M s = 0;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if (k * nt < left) {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        s += v[k][e];
      }
    }
  }
  mu = layer ? sum(s) / n : M(0);
  M sq = 0;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if (k * nt < left) {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        M c = v[k][e] - mu;
        sq += c * c;
      }
    }
  }
  rstd = inv_sqrt(sum(sq) / n + eps);
}

// The same for a row too long for registers, read from memory by the
// whole block (two sweeps).
template <typename T, typename M>
__device__ __forceinline__ void long_row_stats(const T* xr, int d, bool layer,
                                               M eps, M* part, M& mu,
                                               M& rstd) {
  const M n = static_cast<M>(d);
  mu = 0;
  if (layer) {
    M s = 0;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
      s += convert<M>(xr[i]);
    }
    mu = block_sum(s, part) / n;
  }
  M sq = 0;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    M c = convert<M>(xr[i]) - mu;
    sq += c * c;
  }
  rstd = inv_sqrt(block_sum(sq, part) / n + eps);
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
