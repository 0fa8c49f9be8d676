// fast::NormVJP on the GPU: the backward pass of layer_norm / rms_norm
// (math in ops/fast_norm_vjp.cpp) with the CPU's arithmetic
// (backend/cpu/fast_norm_vjp.cpp): float for the half types and float32,
// double for float64; the forward's statistics step for step (norm.cu),
// xhat = (x - mean) * rstd, gw = g * w, dx = ((gw - mean(gw)) - xhat *
// mean(gw * xhat)) * rstd (mean(gw) = 0 for RMSNorm), each step rounded as
// on the CPU (--fmad=false). Only the order of the sums differs.
//
// One read of each row of x and g. A row is held in registers by its
// threads, loaded in 16-byte Packs when the row length and the pointers
// allow (element by element otherwise), as the forward does, but a thread
// holds 4 values per element here (x, g and its dweight and dbias sums), so
// it keeps at most kElems elements (the forward keeps 32):
//  - rows of up to 32 * kElems elements (512; 256 doubles): a warp per
//    row, 8 warps per block; rows of at most 16 units share a warp (4, 8
//    or 16 lanes each), as in the forward;
//  - rows of up to kBlockThreads * kElems (8192; 4096 doubles): a block of
//    up to 512 threads per row;
//  - longer rows: a 1024-thread block per row sweeping it from global
//    memory (L2) four times.
// dweight and dbias: the blocks loop over the rows (one wave of resident
// blocks at most), and a thread always holds the same columns, so it adds
// its rows' g * xhat and g into registers; at the end each block writes one
// partial row per sum into scratch [blocks, D] (the warp kernel combines
// its 8 warps' sums through shared memory first; the long-row kernel keeps
// its partial row in the scratch itself, each column touched by one
// thread). A second kernel adds the partial rows column by column in a
// fixed order. No atomics: results are the same on every run.
#include <algorithm>
#include <memory>

#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/backend/cuda/norm.cuh"
#include "fluxion/ops/fast.h"

namespace fluxion::fast {

namespace {

using cu::block_sum;
using cu::load_param;
using cu::warp_sum;

// Elements of a row a thread keeps (4 values each: 64 registers of floats;
// a double takes two registers, so half as many).
template <typename M>
constexpr int kElems = sizeof(M) == 8 ? 8 : 16;
constexpr int kWarps = 8;           // warps per block of the warp kernel
constexpr int kBlockThreads = 512;  // most threads of a block per row
constexpr int kLongThreads = 1024;  // threads of the long-row kernel

// The operands of one launch. x, g and dx are rows of d elements,
// row-contiguous; w (null without a weight) d contiguous elements. pw and
// pb (null when that gradient is not an output) receive the launch's
// partial rows: block b's at [b * d, (b + 1) * d).
template <typename T, typename M>
struct VjpArgs {
  const T* x;
  const T* g;
  T* dx;
  const T* w;
  bool w_packed;  // w 16-byte aligned
  M* pw;
  M* pb;
  int64_t rows;
  int d;
  M eps;
  bool layer;  // LayerNorm (subtract the means) or RMSNorm
};

// Row r held by a group of `nt` threads (this one `tid`): unit u (V
// elements) of the row is v[k] for u = tid + k * nt, and aw[k] / ab[k]
// gather that unit's dweight / dbias terms over the rows this thread
// visits. `Sum` combines a value over the group. `valid` false: the thread
// takes part in the sums (the shuffles need every lane) and does nothing
// else.
template <typename T, typename M, int V, int P, typename Sum>
__device__ __forceinline__ void vjp_row(const VjpArgs<T, M>& a, int64_t r,
                                        bool valid, int tid, int nt, Sum sum,
                                        M (&aw)[P][V], M (&ab)[P][V]) {
  using Pk = cu::Pack<T, V>;
  const int units = a.d / V;
  r = valid ? r : 0;
  const int64_t off = r * a.d;
  const Pk* xr = reinterpret_cast<const Pk*>(a.x + off) + tid;
  const Pk* gr = reinterpret_cast<const Pk*>(a.g + off) + tid;
  Pk* dr = reinterpret_cast<Pk*>(a.dx + off) + tid;
  // Units of this thread: those with k * nt < left.
  const int left = valid ? units - tid : 0;
  M v[P][V], q[P][V];
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if (k * nt < left) {
      Pk px = xr[k * nt];
      Pk pg = gr[k * nt];
#pragma unroll
      for (int e = 0; e < V; ++e) {
        v[k][e] = cu::convert<M>(px.v[e]);
        q[k][e] = cu::convert<M>(pg.v[e]);
      }
    }
  }
  // The forward's statistics (norm.cu's norm_row).
  M mu, rstd;
  cu::row_stats<M, P, V>(v, left, nt, a.d, a.layer, a.eps, sum, mu, rstd);
  // xhat and gw replace x and g in the registers once the weight sums
  // have taken g.
  M s1 = 0, s2 = 0;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if (k * nt < left) {
      M wv[V];
      if (a.w) {
        load_param<T, M, V>(a.w, a.w_packed, (tid + k * nt) * V, wv);
      }
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const M xh = (v[k][e] - mu) * rstd;
        const M gv = q[k][e];
        const M gw = a.w ? gv * wv[e] : gv;
        s1 += gw;
        s2 += gw * xh;
        aw[k][e] += gv * xh;
        ab[k][e] += gv;
        v[k][e] = xh;
        q[k][e] = gw;
      }
    }
  }
  const M n = static_cast<M>(a.d);
  const M mean_gw = a.layer ? sum(s1) / n : M(0);
  const M mean_gwx = sum(s2) / n;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if (k * nt < left) {
      Pk o;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        o.v[e] =
            cu::convert<T>(((q[k][e] - mean_gw) - v[k][e] * mean_gwx) * rstd);
      }
      dr[k * nt] = o;
    }
  }
}

template <typename M, int V, int P>
__device__ __forceinline__ void zero(M (&acc)[P][V]) {
#pragma unroll
  for (int k = 0; k < P; ++k) {
#pragma unroll
    for (int e = 0; e < V; ++e) {
      acc[k][e] = 0;
    }
  }
}

// The warp kernel's sums into the block's partial row `out` (d values; null:
// nothing, the same in every thread): the warp's row groups first (lanes of
// the same `tid` hold the same columns), then the block's warps, added in
// warp order through shared memory `buf` (kWarps rows of kCap values).
template <typename M, int V, int P, int G>
__device__ __forceinline__ void flush_warp(M (&acc)[P][V], M* buf, M* out,
                                           int d) {
  constexpr int kCap = G * P * V;
  if (out == nullptr) {
    return;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, tid = lane % G;
  const int units = d / V;
#pragma unroll
  for (int k = 0; k < P; ++k) {
#pragma unroll
    for (int e = 0; e < V; ++e) {
#pragma unroll
      for (int o = G; o < 32; o <<= 1) {
        acc[k][e] += __shfl_xor_sync(0xffffffffu, acc[k][e], o);
      }
    }
  }
  if (lane < G) {
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int u = tid + k * G;
      if (u < units) {
#pragma unroll
        for (int e = 0; e < V; ++e) {
          buf[warp * kCap + u * V + e] = acc[k][e];
        }
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    M s = buf[i];
    for (int w = 1; w < kWarps; ++w) {
      s += buf[w * kCap + i];
    }
    out[i] = s;
  }
  __syncthreads();  // buf is reused by the next flush
}

// G lanes per row (32: a warp; 4, 8 or 16: 32 / G rows per warp), rows of
// at most G * P * V elements; blocks of kWarps warps loop over the rows.
template <typename T, typename M, int V, int P, int G>
__global__ void __launch_bounds__(32 * kWarps) vjp_warp(VjpArgs<T, M> a) {
  constexpr int kRowsPerWarp = 32 / G;
  __shared__ M buf[kWarps * G * P * V];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  M aw[P][V], ab[P][V];
  zero(aw);
  zero(ab);
  const int64_t step = int64_t(gridDim.x) * kWarps * kRowsPerWarp;
  for (int64_t base = (int64_t(blockIdx.x) * kWarps + warp) * kRowsPerWarp;
       base < a.rows; base += step) {
    const int64_t r = base + lane / G;
    vjp_row<T, M, V, P>(
        a, r, r < a.rows, lane % G, G, [](M v) { return warp_sum<G>(v); }, aw,
        ab);
  }
  const int64_t prow = int64_t(blockIdx.x) * a.d;
  flush_warp<M, V, P, G>(aw, buf, a.pw ? a.pw + prow : nullptr, a.d);
  flush_warp<M, V, P, G>(ab, buf, a.pb ? a.pb + prow : nullptr, a.d);
}

// The block's sums into its partial row `out` (null: nothing): each column
// belongs to one thread of the block.
template <typename M, int V, int P>
__device__ __forceinline__ void store_block(const M (&acc)[P][V], M* out,
                                            int d) {
  if (out == nullptr) {
    return;
  }
  const int units = d / V;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const int u = threadIdx.x + k * blockDim.x;
    if (u < units) {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        out[u * V + e] = acc[k][e];
      }
    }
  }
}

// A block of up to kBlockThreads threads per row (rows of at most
// blockDim.x * P * V elements), blocks looping over the rows.
template <typename T, typename M, int V, int P>
__global__ void __launch_bounds__(kBlockThreads) vjp_block(VjpArgs<T, M> a) {
  __shared__ M part[32];
  M aw[P][V], ab[P][V];
  zero(aw);
  zero(ab);
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    vjp_row<T, M, V, P>(
        a, r, true, threadIdx.x, blockDim.x,
        [&](M v) { return block_sum(v, part); }, aw, ab);
  }
  const int64_t prow = int64_t(blockIdx.x) * a.d;
  store_block<M, V, P>(aw, a.pw ? a.pw + prow : nullptr, a.d);
  store_block<M, V, P>(ab, a.pb ? a.pb + prow : nullptr, a.d);
}

// Rows too long for registers: four sweeps over global memory per row (the
// statistics as norm.cu's norm_long, the two sums of dx with the weight
// terms, then dx). The block's partial rows are its own scratch rows,
// column i only ever touched by thread i % blockDim.x.
template <typename T, typename M>
__global__ void __launch_bounds__(kLongThreads) vjp_long(VjpArgs<T, M> a) {
  __shared__ M part[32];
  const int64_t prow = int64_t(blockIdx.x) * a.d;
  M* pw = a.pw ? a.pw + prow : nullptr;
  M* pb = a.pb ? a.pb + prow : nullptr;
  for (int i = threadIdx.x; i < a.d; i += blockDim.x) {
    if (pw) {
      pw[i] = 0;
    }
    if (pb) {
      pb[i] = 0;
    }
  }
  const M n = static_cast<M>(a.d);
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T* xr = a.x + r * a.d;
    const T* gr = a.g + r * a.d;
    T* dr = a.dx + r * a.d;
    M mu, rstd;
    cu::long_row_stats(xr, a.d, a.layer, a.eps, part, mu, rstd);
    M s1 = 0, s2 = 0;
    for (int i = threadIdx.x; i < a.d; i += blockDim.x) {
      const M xh = (cu::convert<M>(xr[i]) - mu) * rstd;
      const M gv = cu::convert<M>(gr[i]);
      const M gw = a.w ? gv * cu::convert<M>(a.w[i]) : gv;
      s1 += gw;
      s2 += gw * xh;
      if (pw) {
        pw[i] += gv * xh;
      }
      if (pb) {
        pb[i] += gv;
      }
    }
    const M mean_gw = a.layer ? block_sum(s1, part) / n : M(0);
    const M mean_gwx = block_sum(s2, part) / n;
    for (int i = threadIdx.x; i < a.d; i += blockDim.x) {
      const M xh = (cu::convert<M>(xr[i]) - mu) * rstd;
      const M gv = cu::convert<M>(gr[i]);
      const M gw = a.w ? gv * cu::convert<M>(a.w[i]) : gv;
      dr[i] = cu::convert<T>(((gw - mean_gw) - xh * mean_gwx) * rstd);
    }
  }
}

// Column sums of `parts` partial rows of d values: out0[i] = sum over r of
// p0[r * d + i] (blockIdx.y 0), out1 from p1 likewise (blockIdx.y 1).
// Blocks of 32 columns x 8 row slices: each thread adds its slice's rows
// in order (coalesced across the 32 columns), then the slices are added in
// order; zeros when there are no partial rows.
template <typename T, typename M>
__global__ void __launch_bounds__(256)
    sum_partials(const M* p0, const M* p1, int64_t parts, int d, T* out0,
                 T* out1) {
  __shared__ M by_slice[8][33];
  const M* p = blockIdx.y == 0 ? p0 : p1;
  T* out = blockIdx.y == 0 ? out0 : out1;
  const int col = blockIdx.x * 32 + threadIdx.x;
  M acc = 0;
  if (col < d) {
    for (int64_t r = threadIdx.y; r < parts; r += 8) {
      acc += p[r * d + col];
    }
  }
  by_slice[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < d) {
    M s = by_slice[0][threadIdx.x];
    for (int j = 1; j < 8; ++j) {
      s += by_slice[j][threadIdx.x];
    }
    out[col] = cu::convert<T>(s);
  }
}

// A kernel for one launch, its block size and the rows each block takes
// per turn of its loop.
template <typename T, typename M>
struct Plan {
  void (*kernel)(VjpArgs<T, M>);
  unsigned threads;
  int rows_per_block;
};

// A warp per row with the smallest P (units per lane, a power of two)
// that holds the row, as the forward chooses (fewer registers, more warps
// at once); rows of at most 16 units: groups of 4, 8 or 16 lanes.
template <typename T, typename M, int V, int P>
Plan<T, M> warp_plan(int units) {
  if constexpr (P > 1) {
    if (units <= 32 * (P / 2)) {
      return warp_plan<T, M, V, P / 2>(units);
    }
  }
  constexpr unsigned kThreads = 32 * kWarps;
  if (P == 1 && units <= 4) {
    return {vjp_warp<T, M, V, 1, 4>, kThreads, kWarps * 8};
  }
  if (P == 1 && units <= 8) {
    return {vjp_warp<T, M, V, 1, 8>, kThreads, kWarps * 4};
  }
  if (P == 1 && units <= 16) {
    return {vjp_warp<T, M, V, 1, 16>, kThreads, kWarps * 2};
  }
  return {vjp_warp<T, M, V, P, 32>, kThreads, kWarps};
}

// Rows of d <= kBlockThreads * kElems<M> elements read in units of V.
template <typename T, typename M, int V>
Plan<T, M> plan_for(int d) {
  constexpr int P = kElems<M> / V;
  const int units = d / V;
  if (units <= 32 * P) {
    return warp_plan<T, M, V, P>(units);
  }
  // The fewest whole warps holding the row at P units each (at most
  // kBlockThreads, by the caller's bound on d).
  const int t = (units + P - 1) / P;
  return {vjp_block<T, M, V, P>, static_cast<unsigned>((t + 31) / 32 * 32), 1};
}

// Blocks of `kernel` (of `threads` threads) the GPU runs at once.
template <typename T, typename M>
int64_t resident_blocks(const Plan<T, M>& p, int& sms) {
  int dev = 0, per_sm = 0;
  cu::check(cudaGetDevice(&dev), "norm_vjp");
  cu::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev),
            "norm_vjp");
  cu::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &per_sm, p.kernel, static_cast<int>(p.threads), 0),
            "norm_vjp");
  sms = std::max(sms, 1);
  return int64_t{sms} * std::max(per_sm, 1);
}

void norm_vjp_gpu(const std::vector<array>& inputs, std::vector<array>& outputs,
                  float eps, bool layer, bool has_weight, bool has_bias) {
  for (auto& o : outputs) {
    cu::alloc(o);
  }
  const int d = inputs[0].shape(-1);  // a Shape entry: int32
  if (d == 0) {
    return;  // every output is empty
  }
  const char* op = layer ? "layer_norm" : "rms_norm";
  // Rows made row-contiguous (a strided x or g is copied once), the weight
  // dense (a strided or broadcast vector of d elements is copied).
  const array x = cu::contiguous(inputs[0]);
  const array g = cu::contiguous(inputs.back());
  const array w = has_weight ? cu::contiguous(inputs[1]) : x;
  const int nsums = int{has_weight} + int{has_bias};
  cu::dispatch_gpu<FloatTypes>(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = cu::compute_t<T>;
    constexpr int V = cu::pack_width<T>();
    VjpArgs<T, M> a{};
    a.x = cu::ptr<const T>(x);
    a.g = cu::ptr<const T>(g);
    a.dx = cu::ptr<T>(outputs[0]);
    a.rows = static_cast<int64_t>(x.size()) / d;
    a.d = d;
    a.eps = static_cast<M>(eps);
    a.layer = layer;
    if (has_weight) {
      a.w = cu::ptr<const T>(w);
      a.w_packed = cu::pack_aligned<T, V>(a.w);
    }
    cudaStream_t s = cu::current_stream();
    std::shared_ptr<Data> scratch;
    int64_t parts = 0;  // partial rows written
    if (a.rows > 0) {
      const bool packed = d % V == 0 && cu::pack_aligned<T, V>(a.x) &&
                          cu::pack_aligned<T, V>(a.g) &&
                          cu::pack_aligned<T, V>(a.dx);
      Plan<T, M> p{vjp_long<T, M>, kLongThreads, 1};
      if (d <= kBlockThreads * kElems<M>) {
        p = packed ? plan_for<T, M, V>(d) : plan_for<T, M, 1>(d);
      }
      if (!packed) {
        a.w_packed = false;  // element by element, the weight too
      }
      // One wave of resident blocks, each looping over its share of the
      // rows: no more partial rows than that (and, for long rows of few
      // rows each, no more than a sixteenth of the rows beyond one block
      // per SM, so that the scratch stays small beside the data).
      int sms = 1;
      const int64_t wave = resident_blocks(p, sms);
      const int64_t need = (a.rows + p.rows_per_block - 1) / p.rows_per_block;
      parts =
          std::min({need, wave, std::max<int64_t>(sms, (a.rows + 15) / 16)});
      parts = std::max<int64_t>(parts, 1);
      if (nsums > 0) {
        scratch = std::make_shared<Data>(
            static_cast<size_t>(parts * nsums * d) * sizeof(M),
            Device{Device::gpu});
        M* base = static_cast<M*>(scratch->ptr());
        a.pw = has_weight ? base : nullptr;
        a.pb = has_bias ? base + (has_weight ? parts * d : 0) : nullptr;
      }
      p.kernel<<<static_cast<unsigned>(parts), p.threads, 0, s>>>(a);
      cu::check_launch(op);
    }
    if (nsums > 0) {
      // dweight then dbias, in the outputs' order (zeros without rows).
      const M* p0 = has_weight ? a.pw : a.pb;
      const M* p1 = has_weight ? a.pb : nullptr;
      T* o0 = cu::ptr<T>(outputs[1]);
      T* o1 = nsums > 1 ? cu::ptr<T>(outputs[2]) : nullptr;
      const dim3 grid(static_cast<unsigned>((d + 31) / 32),
                      static_cast<unsigned>(nsums));
      sum_partials<T, M><<<grid, dim3(32, 8), 0, s>>>(p0, p1, parts, d, o0, o1);
      cu::check_launch(op);
    }
    if (scratch) {
      cu::keep_alive(scratch);
    }
  });
}

}  // namespace

void NormVJP::eval_gpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  norm_vjp_gpu(inputs, outputs, eps_, layer_, has_weight_, has_bias_);
}

}  // namespace fluxion::fast
