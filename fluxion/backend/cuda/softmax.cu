// Softmax over the last axis on the GPU (ops/reduce.h): a block per row.
// Rows of up to 16 * 1024 elements are read once into registers (VPT
// values per thread, strided by the block so a warp's loads are
// contiguous), their max and sum of exp(x - max) reduced over the block,
// and written once: one read and one write of the data, the least a
// softmax can move. Longer rows loop over the row three times (max, sum,
// write). Computed in float (double for float64); a nan in a row makes
// the row nan, as on the CPU.
#include <cuda/std/limits>

#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/ops/reduce.h"

namespace fluxion {

namespace {

template <typename C>
__device__ __forceinline__ C max_nan(C a, C b) {
  return (b > a || b != b) && a == a ? b : a;
}

__device__ __forceinline__ float exp_c(float x) { return expf(x); }
__device__ __forceinline__ double exp_c(double x) { return exp(x); }

// The block's combination of v (every thread gets the result).
template <typename C, bool Max>
__device__ C block_reduce(C v, C* shared) {
  for (int o = 16; o > 0; o >>= 1) {
    C u = __shfl_xor_sync(0xffffffffu, v, o);
    v = Max ? max_nan(v, u) : v + u;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  __syncthreads();  // `shared` may hold the last reduction's values
  if (lane == 0) {
    shared[warp] = v;
  }
  __syncthreads();
  v = shared[0];
  for (int w = 1; w < warps; ++w) {
    v = Max ? max_nan(v, shared[w]) : v + shared[w];
  }
  return v;
}

template <typename T, typename C, int VPT>
__global__ void __launch_bounds__(1024)
    softmax_rows(const T* x, T* y, int64_t n) {
  __shared__ C shared[32];
  const T* xr = x + blockIdx.x * n;
  T* yr = y + blockIdx.x * n;
  C v[VPT];
  C m = -cuda::std::numeric_limits<C>::infinity();
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int64_t i = threadIdx.x + int64_t{k} * blockDim.x;
    v[k] = i < n ? cu::convert<C>(xr[i])
                 : -cuda::std::numeric_limits<C>::infinity();
    m = max_nan(m, v[k]);
  }
  m = block_reduce<C, true>(m, shared);
  C s = 0;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int64_t i = threadIdx.x + int64_t{k} * blockDim.x;
    v[k] = i < n ? exp_c(v[k] - m) : C(0);
    s += v[k];
  }
  s = block_reduce<C, false>(s, shared);
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int64_t i = threadIdx.x + int64_t{k} * blockDim.x;
    if (i < n) {
      yr[i] = cu::convert<T>(v[k] / s);
    }
  }
}

// Rows too long for registers: three passes over the row.
template <typename T, typename C>
__global__ void softmax_long_rows(const T* x, T* y, int64_t n) {
  __shared__ C shared[32];
  const T* xr = x + blockIdx.x * n;
  T* yr = y + blockIdx.x * n;
  C m = -cuda::std::numeric_limits<C>::infinity();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    m = max_nan(m, cu::convert<C>(xr[i]));
  }
  m = block_reduce<C, true>(m, shared);
  C s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    s += exp_c(cu::convert<C>(xr[i]) - m);
  }
  s = block_reduce<C, false>(s, shared);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    yr[i] = cu::convert<T>(exp_c(cu::convert<C>(xr[i]) - m) / s);
  }
}

template <typename T>
void softmax_gpu(const array& in, array& out) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const array x = cu::contiguous(in);
  const int64_t n = x.shape(-1);
  const int64_t rows = x.size() / n;
  const T* xp = cu::ptr<const T>(x);
  T* yp = cu::ptr<T>(out);
  cudaStream_t s = cu::current_stream();
  // Threads: enough for VPT values each, a multiple of the warp.
  auto threads_for = [n](int vpt) {
    int64_t t = (n + vpt - 1) / vpt;
    t = (t + 31) / 32 * 32;
    return static_cast<unsigned>(t < 32 ? 32 : (t > 1024 ? 1024 : t));
  };
  for (int64_t r0 = 0; r0 < rows; r0 += 1 << 30) {
    const unsigned blocks =
        static_cast<unsigned>(std::min<int64_t>(rows - r0, 1 << 30));
    const T* xr = xp + r0 * n;
    T* yr = yp + r0 * n;
    if (n <= 4 * 256) {
      softmax_rows<T, C, 4><<<blocks, threads_for(4), 0, s>>>(xr, yr, n);
    } else if (n <= 8 * 1024) {
      softmax_rows<T, C, 8><<<blocks, threads_for(8), 0, s>>>(xr, yr, n);
    } else if (n <= 16 * 1024) {
      softmax_rows<T, C, 16><<<blocks, threads_for(16), 0, s>>>(xr, yr, n);
    } else {
      softmax_long_rows<T, C><<<blocks, 1024, 0, s>>>(xr, yr, n);
    }
    cu::check_launch("softmax");
  }
}

}  // namespace

void Softmax::eval_gpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  array& out = outputs[0];
  cu::alloc(out);
  if (out.size() == 0) {
    return;
  }
  cu::dispatch_gpu<FloatTypes>(out.dtype(), "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_gpu<T>(inputs[0], out);
  });
}

}  // namespace fluxion
