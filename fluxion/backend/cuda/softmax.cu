// Softmax over the last axis on the GPU (ops/reduce.h). A row is read once
// into registers, its max and sum of exp(x - max) reduced, and written
// once: one read and one write of the data, the least a softmax can move.
//  - Rows of up to 1024 elements: a warp per row (4 rows per block), the
//    reductions warp shuffles only.
//  - Rows of up to 16384: a block per row of up to 512 threads, 32 values
//    a thread. Blocks of a few hundred threads (not 1024) leave several
//    rows in flight per multiprocessor, so one row's loads overlap
//    another's reductions.
//  - Longer rows: three passes over the row (max, sum, write).
// Rows whose length is a multiple of a 16-byte Pack are read and written
// in Packs (a warp moves 512 contiguous bytes per access), others element
// by element. Computed in float (double for float64); each value is
// exp(x - max) times 1 / sum. A nan in a row makes the row nan, as on the
// CPU.
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

// The row's max (a nan wins) or sum over the warp or the block, in every
// thread (kernels.cuh's reductions).
template <typename C, bool Max>
__device__ __forceinline__ C combine(C a, C b) {
  return Max ? max_nan(a, b) : a + b;
}

template <typename C, bool Max>
__device__ __forceinline__ C warp_reduce(C v) {
  return cu::warp_all_reduce(v,
                             [](C a, C b) { return combine<C, Max>(a, b); });
}

template <typename C, bool Max>
__device__ __forceinline__ C block_reduce(C v, C* shared) {
  return cu::block_all_reduce(v, shared,
                              [](C a, C b) { return combine<C, Max>(a, b); });
}

// The NV values one thread keeps of a row that `threads` threads share:
// NV / V Packs of V elements, pack j of thread t being the row's pack
// t + j * threads (so a warp's accesses are contiguous). V > 1 only when
// the row length is a multiple of V, so a pack is whole or wholly past the
// row's end.
template <typename T, typename C, int V, int NV>
struct RowValues {
  static constexpr int kPacks = NV / V;
  C v[NV];

  __device__ __forceinline__ C load(const T* row, int64_t n, int t,
                                    int threads) {
    C m = -cuda::std::numeric_limits<C>::infinity();
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int64_t i0 = (t + int64_t{j} * threads) * V;
      if constexpr (V > 1) {
        cu::Pack<T, V> p;
        if (i0 < n) {
          p = *reinterpret_cast<const cu::Pack<T, V>*>(row + i0);
        }
#pragma unroll
        for (int e = 0; e < V; ++e) {
          v[j * V + e] = i0 < n ? cu::convert<C>(p.v[e])
                                : -cuda::std::numeric_limits<C>::infinity();
        }
      } else {
        v[j] = i0 < n ? cu::convert<C>(row[i0])
                      : -cuda::std::numeric_limits<C>::infinity();
      }
    }
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      m = max_nan(m, v[k]);
    }
    return m;
  }

  // exp(v - m) in place (0 past the row's end: exp(-inf)); their sum.
  __device__ __forceinline__ C exp_sum(C m) {
    C s = 0;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      v[k] = exp_c(v[k] - m);
      s += v[k];
    }
    return s;
  }

  __device__ __forceinline__ void store(T* row, int64_t n, int t, int threads,
                                        C scale) const {
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int64_t i0 = (t + int64_t{j} * threads) * V;
      if (i0 >= n) {
        continue;
      }
      if constexpr (V > 1) {
        cu::Pack<T, V> p;
#pragma unroll
        for (int e = 0; e < V; ++e) {
          p.v[e] = cu::convert<T>(v[j * V + e] * scale);
        }
        *reinterpret_cast<cu::Pack<T, V>*>(row + i0) = p;
      } else {
        row[i0] = cu::convert<T>(v[j] * scale);
      }
    }
  }
};

// A warp per row, kRowsPerBlock rows per block.
constexpr int kRowsPerBlock = 4;

template <typename T, typename C, int V, int NV>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    softmax_warp_rows(const T* x, T* y, int64_t rows, int64_t n) {
  const int64_t r = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.y;
  if (r >= rows) {
    return;  // a whole warp: no shuffle waits for it
  }
  RowValues<T, C, V, NV> row;
  C m = warp_reduce<C, true>(row.load(x + r * n, n, threadIdx.x, 32));
  C s = warp_reduce<C, false>(row.exp_sum(m));
  row.store(y + r * n, n, threadIdx.x, 32, C(1) / s);
}

// A block per row.
template <typename T, typename C, int V, int NV>
__global__ void __launch_bounds__(512)
    softmax_block_rows(const T* x, T* y, int64_t n) {
  __shared__ C shared[32];
  const int64_t r = blockIdx.x;
  RowValues<T, C, V, NV> row;
  C m = block_reduce<C, true>(row.load(x + r * n, n, threadIdx.x, blockDim.x),
                              shared);
  C s = block_reduce<C, false>(row.exp_sum(m), shared);
  row.store(y + r * n, n, threadIdx.x, blockDim.x, C(1) / s);
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
  const C scale = C(1) / s;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    yr[i] = cu::convert<T>(exp_c(cu::convert<C>(xr[i]) - m) * scale);
  }
}

constexpr int kBlockValues = 32;   // values a thread keeps, block per row
constexpr int kBlockThreads = 512;
constexpr int64_t kRegisterRow = int64_t{kBlockValues} * kBlockThreads;

// Launches the row kernels for pack width V (1, or 16 bytes of T).
template <typename T, typename C, int V>
void launch_rows(const T* x, T* y, int64_t rows, int64_t n, cudaStream_t s) {
  if (n <= 32 * 32) {
    // Values a lane keeps: the least of 4, 8, 16, 32 that covers the row.
    const unsigned blocks =
        static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    const dim3 threads(32, kRowsPerBlock);
    auto go = [&](auto nv) {
      constexpr int NV = decltype(nv)::value;
      constexpr int W = V < NV ? V : NV;
      softmax_warp_rows<T, C, W, NV><<<blocks, threads, 0, s>>>(x, y, rows, n);
    };
    if (n <= 32 * 4) {
      go(std::integral_constant<int, 4>{});
    } else if (n <= 32 * 8) {
      go(std::integral_constant<int, 8>{});
    } else if (n <= 32 * 16) {
      go(std::integral_constant<int, 16>{});
    } else {
      go(std::integral_constant<int, 32>{});
    }
  } else if (n <= kRegisterRow) {
    int64_t t = (n + kBlockValues - 1) / kBlockValues;
    t = (t + 31) / 32 * 32;
    softmax_block_rows<T, C, V, kBlockValues>
        <<<static_cast<unsigned>(rows), static_cast<unsigned>(t), 0, s>>>(x, y,
                                                                        n);
  } else {
    softmax_long_rows<T, C><<<static_cast<unsigned>(rows), 1024, 0, s>>>(x, y,
                                                                       n);
  }
  cu::check_launch("softmax");
}

template <typename T>
void softmax_gpu(const array& in, array& out) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  constexpr int P = 16 / sizeof(T);
  const array x = cu::contiguous(in);
  const int64_t n = x.shape(-1);
  const int64_t rows = x.size() / n;
  const T* xp = cu::ptr<const T>(x);
  T* yp = cu::ptr<T>(out);
  cudaStream_t s = cu::current_stream();
  // Every row starts on a Pack boundary when the row length is a multiple
  // of the Pack and both buffers start on one.
  const bool packed = n % P == 0 && cu::pack_aligned<T, P>(xp) &&
                      cu::pack_aligned<T, P>(yp);
  // At most 2^30 rows a launch (the grid's x limit with room to spare).
  for (int64_t r0 = 0; r0 < rows; r0 += int64_t{1} << 30) {
    const int64_t count = std::min<int64_t>(rows - r0, int64_t{1} << 30);
    if (packed) {
      launch_rows<T, C, P>(xp + r0 * n, yp + r0 * n, count, n, s);
    } else {
      launch_rows<T, C, 1>(xp + r0 * n, yp + r0 * n, count, n, s);
    }
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
