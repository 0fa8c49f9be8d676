// fast::LayerNorm and fast::RMSNorm on the GPU: rows of the last axis,
// normalized with the CPU's arithmetic (backend/cpu/fast_norm.cpp): in
// float for the half types and float32, in double for float64;
// mean = sum / D, var = sum((x - mean)^2) / D (mean 0 for RMSNorm),
// rstd = 1 / sqrt(var + eps), y = ((x - mean) * rstd) * w + b, each step
// rounded as on the CPU (the CUDA files build with --fmad=false). Only the
// order of the two sums differs, so results agree to a few ulps.
//
// Shapes (design.md §5, row kernels):
//  - rows of up to 1024 elements: a warp per row, 8 rows per block (rows
//    of at most 16 loads: 4, 8 or 16 lanes per row);
//  - a block per row: up to 256 threads keeping 32 elements each (rows of
//    up to 8192 read in Packs), else up to 1024 threads keeping 16 (rows
//    of up to 16384);
//  - longer rows: a block of 1024 threads per row reading the row three
//    times (sum, squares, output) from global memory.
// In the first two the row stays in registers between the passes (a
// two-pass mean and variance with one read of memory), loaded in 16-byte
// Packs when every row start is aligned for them, element by element
// otherwise.
#include <algorithm>

#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/backend/cuda/norm.cuh"
#include "fluxion/ops/fast.h"

namespace fluxion::fast {

namespace {

// Elements a thread keeps in registers (M values): a warp per row takes
// rows of up to 32 * kWarpElems elements, a block per row up to
// 1024 * kBlockElems (fewer per thread there: 1024 threads leave 64
// registers each).
constexpr int kWarpElems = 32;
constexpr int kBlockElems = 16;
// Rows of up to kMidThreads * kWarpElems elements take a block of at most
// kMidThreads threads holding kWarpElems each.
constexpr int kMidThreads = 256;
// Threads of the long-row kernel.
constexpr int kLongThreads = 1024;

// The operands of one launch. w and b (when not null) are D contiguous
// elements (made so on the host: a weight is small).
template <typename T, typename M>
struct NormArgs {
  const T* x;  // rows, row-contiguous
  T* y;        // rows, row-contiguous
  const T* w;
  const T* b;
  bool w_packed, b_packed;  // 16-byte aligned
  int64_t rows;
  int d;
  M eps;
  bool layer;  // LayerNorm (subtract the mean) or RMSNorm
};

using cu::block_sum;
using cu::load_param;
using cu::warp_sum;

// One row held in registers by a group of `nt` threads (this one `tid`):
// unit u (V elements) of the row is v[k] for u = tid + k * nt. `Sum`
// combines a value over the group.
// `valid` false: the thread takes part in the sums (the shuffles need
// every lane) but reads and writes nothing.
template <typename T, typename M, int V, int P, typename Sum>
__device__ __forceinline__ void norm_row(const NormArgs<T, M>& a, int64_t r,
                                         bool valid, int tid, int nt, Sum sum) {
  using Pk = cu::Pack<T, V>;
  const int units = a.d / V;
  r = valid ? r : 0;
  const Pk* xr = reinterpret_cast<const Pk*>(a.x + r * a.d) + tid;
  Pk* yr = reinterpret_cast<Pk*>(a.y + r * a.d) + tid;
  // Units of this thread: those with k * nt < left.
  const int left = valid ? units - tid : 0;
  M v[P][V];
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if (k * nt < left) {
      Pk q = xr[k * nt];
#pragma unroll
      for (int e = 0; e < V; ++e) {
        v[k][e] = cu::convert<M>(q.v[e]);
      }
    }
  }
  M mu, rstd;
  cu::row_stats<M, P, V>(v, left, nt, a.d, a.layer, a.eps, sum, mu, rstd);
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if (k * nt < left) {
      const int e0 = (tid + k * nt) * V;
      M wv[V], bv[V];
      if (a.w) {
        load_param<T, M, V>(a.w, a.w_packed, e0, wv);
      }
      if (a.b) {
        load_param<T, M, V>(a.b, a.b_packed, e0, bv);
      }
      Pk q;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        M t = (v[k][e] - mu) * rstd;
        if (a.w) {
          t *= wv[e];
        }
        if (a.b) {
          t += bv[e];
        }
        q.v[e] = cu::convert<T>(t);
      }
      yr[k * nt] = q;
    }
  }
}

// G lanes per row (32: a warp; 4, 8 or 16: 32 / G rows per warp, for rows
// of at most G units), rows of at most G * P * V elements. The lanes of a
// warp loop together (their shuffles need all 32), each group over its
// row of the warp's batch.
template <typename T, typename M, int V, int P, int G>
__global__ void __launch_bounds__(256) norm_warp(NormArgs<T, M> a) {
  constexpr int kRowsPerWarp = 32 / G;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t base =
           (blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32) *
           kRowsPerWarp;
       base < a.rows; base += warps * kRowsPerWarp) {
    const int64_t r = base + lane / G;
    norm_row<T, M, V, P>(a, r, r < a.rows, lane % G, G,
                         [](M v) { return warp_sum<G>(v); });
  }
}

// A block of at most `Bound` threads per row (rows of at most
// blockDim.x * P * V elements).
template <typename T, typename M, int V, int P, int Bound>
__global__ void __launch_bounds__(Bound) norm_block(NormArgs<T, M> a) {
  __shared__ M part[32];
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    norm_row<T, M, V, P>(a, r, true, threadIdx.x, blockDim.x,
                         [&](M v) { return block_sum(v, part); });
  }
}

// Rows too long for registers: three sweeps over global memory (the
// second and third mostly from L2).
template <typename T, typename M>
__global__ void __launch_bounds__(kLongThreads) norm_long(NormArgs<T, M> a) {
  __shared__ M part[32];
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T* xr = a.x + r * a.d;
    T* yr = a.y + r * a.d;
    M mu, rstd;
    cu::long_row_stats(xr, a.d, a.layer, a.eps, part, mu, rstd);
    for (int i = threadIdx.x; i < a.d; i += blockDim.x) {
      M t = (cu::convert<M>(xr[i]) - mu) * rstd;
      if (a.w) {
        t *= cu::convert<M>(a.w[i]);
      }
      if (a.b) {
        t += cu::convert<M>(a.b[i]);
      }
      yr[i] = cu::convert<T>(t);
    }
  }
}

unsigned grid_of(int64_t blocks) {
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 1 << 20));
}

// A warp per row with the smallest P (units per lane, a power of two)
// that holds the row: P sets the registers the kernel takes, and fewer
// registers let more warps run at once, which short rows need to keep
// enough loads in flight. Rows of at most 16 units take a group of 4, 8
// or 16 lanes each instead of a warp (a warp would leave lanes idle).
template <typename T, typename M, int V, int P>
void launch_warp(const NormArgs<T, M>& a, int units, cudaStream_t s) {
  if constexpr (P > 1) {
    if (units <= 32 * (P / 2)) {
      launch_warp<T, M, V, P / 2>(a, units, s);
      return;
    }
  }
  constexpr int kWarps = 8;
  auto go = [&](auto kernel, int rows_per_warp) {
    const int64_t per_block = int64_t(kWarps) * rows_per_warp;
    kernel<<<grid_of((a.rows + per_block - 1) / per_block), 32 * kWarps, 0,
             s>>>(a);
  };
  if (P == 1 && units <= 4) {
    go(norm_warp<T, M, V, 1, 4>, 8);
  } else if (P == 1 && units <= 8) {
    go(norm_warp<T, M, V, 1, 8>, 4);
  } else if (P == 1 && units <= 16) {
    go(norm_warp<T, M, V, 1, 16>, 2);
  } else {
    go(norm_warp<T, M, V, P, 32>, 1);
  }
}

// Launches the kernel for units of V elements (V = 1: element by element).
template <typename T, typename M, int V>
void launch_norm(const NormArgs<T, M>& a, cudaStream_t s) {
  const int units = a.d / V;
  constexpr int kWarpP = kWarpElems / V, kBlockP = kBlockElems / V;
  // The fewest threads (whole warps, at least `least`) that hold the row at
  // `per` units each.
  auto threads_for = [units](int per, int least) {
    const int t = (units + per - 1) / per;
    return static_cast<unsigned>(std::max(least, (t + 31) / 32 * 32));
  };
  if (units <= 32 * kWarpP) {
    launch_warp<T, M, V, kWarpP>(a, units, s);
    return;
  }
  if constexpr (V > 1) {
    if (units <= kMidThreads * kWarpP) {
      // Up to kMidThreads threads keeping 32 values each in kWarpP Packs
      // (74 registers for bfloat16, 64 for float32): more loads in flight
      // per thread and fewer threads to combine than the wide kernel. (Not
      // element by element: that version takes over 150 registers.)
      norm_block<T, M, V, kWarpP, kMidThreads>
          <<<grid_of(a.rows), threads_for(kWarpP, 64), 0, s>>>(a);
      return;
    }
  }
  norm_block<T, M, V, kBlockP, 1024>
      <<<grid_of(a.rows), threads_for(kBlockP, 128), 0, s>>>(a);
}

void norm_gpu(const std::vector<array>& inputs, array& out, float eps,
              bool layer, int wi, int bi, const char* op) {
  cu::alloc(out);
  const array& x0 = inputs[0];
  if (x0.size() == 0) {
    return;
  }
  array x = cu::contiguous(x0);
  // weight and bias as dense vectors (a strided or broadcast one is copied:
  // D elements, next to the rows' D * rows).
  const array w = wi >= 0 ? cu::contiguous(inputs[wi]) : x;
  const array b = bi >= 0 ? cu::contiguous(inputs[bi]) : x;
  cu::dispatch_gpu<FloatTypes>(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = cu::compute_t<T>;
    NormArgs<T, M> a{};
    a.x = cu::ptr<const T>(x);
    a.y = cu::ptr<T>(out);
    a.d = x.shape(-1);  // a Shape entry: int32
    a.rows = static_cast<int64_t>(x.size()) / a.d;
    a.eps = static_cast<M>(eps);
    a.layer = layer;
    constexpr int V = cu::pack_width<T>();
    if (wi >= 0) {
      a.w = cu::ptr<const T>(w);
      a.w_packed = cu::pack_aligned<T, V>(a.w);
    }
    if (bi >= 0) {
      a.b = cu::ptr<const T>(b);
      a.b_packed = cu::pack_aligned<T, V>(a.b);
    }
    cudaStream_t s = cu::current_stream();
    const bool packed = a.d % V == 0 && cu::pack_aligned<T, V>(a.x) &&
                        cu::pack_aligned<T, V>(a.y);
    if (a.d > kBlockElems * 1024) {
      norm_long<T, M><<<grid_of(a.rows), kLongThreads, 0, s>>>(a);
    } else if (packed) {
      launch_norm<T, M, V>(a, s);
    } else {
      a.w_packed = a.b_packed = false;
      launch_norm<T, M, 1>(a, s);
    }
    cu::check_launch(op);
  });
}

}  // namespace

void LayerNorm::eval_gpu(const std::vector<array>& inputs,
                         std::vector<array>& outputs) {
  const int wi = has_weight_ ? 1 : -1;
  const int bi = has_bias_ ? (has_weight_ ? 2 : 1) : -1;
  norm_gpu(inputs, outputs[0], eps_, true, wi, bi, "layer_norm");
}

void RMSNorm::eval_gpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  norm_gpu(inputs, outputs[0], eps_, false, has_weight_ ? 1 : -1, -1,
           "rms_norm");
}

}  // namespace fluxion::fast
