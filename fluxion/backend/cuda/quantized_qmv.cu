// The matrix-vector kernel of decoding (QuantizedMatmul with at most 8 rows
// of x and one N x K weight used transposed) for the layouts whose codes
// never straddle a 32-bit word: affine 2, 4 and 8 bits, mxfp4 and nvfp4
// (E2M1 nibbles, low first) and mxfp8 (E4M3 bytes). quantized.cu keeps the
// generic kernel for the other widths and for unaligned rows; one row of
// x goes to qmv_lanes.cu (x in registers) where its row fits a block.
//
// Decoding streams the packed weights once (half a byte per code at 4
// bits) against a few kilobytes of x, so the kernel is built to keep the
// memory busy and to spend few instructions per code:
//  - a warp per output column (a fraction of one for rows shorter than
//    512 bytes), each lane reading 16 bytes of packed weights per load,
//    kUnroll loads a step, and the next step's loads issued before this
//    step's arithmetic (software pipelining; the first step's before x is
//    staged): the old kernel's one dependent 4-byte load per lane kept ~8
//    KB in flight per SM, and Little's law asks for over 20 KB at HBM's
//    latency;
//  - x is staged once per block in shared memory as float (16-byte loads,
//    four in flight per thread), ordered so that lane c's four floats of
//    a quad sit next to lane c + 1's (conflict-free 16-byte reads). For
//    the affine codes each value is multiplied by 2^(-bits * j), j the
//    code's position in its 16-bit half word: (h & mask_j) | 0x4B000000
//    read as a float is then 2^23 + q * 2^(bits j), one subtraction gives
//    q * 2^(bits j) exactly, and a code costs one logic op, one add and
//    one fma per row of x (int->float conversion is a quarter-rate
//    instruction on sm_90, and the build's --fmad=false would split an
//    unfused a * b + c);
//  - the CPU's order per group: s * (x . q) + b * sum(x), the sums of x
//    precomputed while staging; a 32-bit word never straddles a group
//    (16 codes at most, groups of 16 or more).
// Blocks are persistent (as many as fit the GPU, each looping over groups
// of columns) so x is staged once per block; when x does not fit the
// shared-memory budget, a block stages it in tiles of K for each group.
// On the H200 the first version (no pipelining, x staged one element per
// load, the occupancy queried per launch) ran every width and mode in
// 24-29 us for 1 x 4096 @ 4096 x 14336 (4 bits: 1.24 TB/s): its blocks
// waited on the staging and the host on the runtime, not on the weights.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/backend/cuda/occupancy.cuh"
#include "fluxion/backend/cuda/quantized_codes.cuh"
#include "fluxion/ops/quantized.h"

namespace fluxion::qmv {

namespace {

constexpr int kWarps = 8;  // columns (or column groups) per block step
// Shared memory for the staged x: at most this much per block, so that
// two blocks (16 warps) still fit an SM.
constexpr size_t kStageBudget = 96 * 1024;

// 16-byte loads per lane and step: four for one or two rows of x (the
// memory-bound case); two for more rows, whose arithmetic per code (one
// fma per row) bounds the kernel anyway and whose accumulators need the
// registers, and for 2-bit codes (64 a load: four loads' decoded codes
// spilled). With the next step's loads issued before this step's
// arithmetic, a lane has up to twice as many in flight.
template <int S, int M>
constexpr int kUnroll = M <= 2 && S != kAffine2 ? 4 : 2;

template <typename T>
struct Params {
  const uint4* w;
  const void* scales;
  const void* biases;
  const float* global_scale;
  const T* x;
  T* out;
  int rows, N, K;
  int lgs;         // log2 of the group size
  int row_chunks;  // 16-byte chunks per row of w
  int lpc_log;     // log2 of the lanes per column
  int kt;          // codes per staged tile, a multiple of 128
  int ntiles;
  int groups;  // column groups of kWarps * (32 >> lpc_log) columns
  bool x_vec;  // x readable 16 bytes at a time
};

// Shared-memory position (in floats) of code kk of a staged tile.
template <int S>
__device__ __forceinline__ int staged_at(int kk, int nct) {
  constexpr int cc = SchemeOf<S>::cc;
  return ((kk % cc / 4) * nct + kk / cc) * 4 + kk % 4;
}

// Codes [k0, k0 + kt) of x's M rows into shared memory (zeros past K and
// past p.rows): xs[m][(quad * nct + chunk) * 4 + e], quad the code's
// group of four in its chunk; for affine codes scaled by prescale, and
// sums[m][unit * nct + chunk] the unit's sum of x. x is read 16 bytes at a
// time when aligned, four loads in flight per thread (the staging is the
// blocks' first step, its latency nothing else hides but the weights'
// first loads).
template <typename T, int S, int M>
__device__ void stage_x(const Params<T>& p, int k0, float* xs, float* sums) {
  using Sc = SchemeOf<S>;
  constexpr int V = 16 / sizeof(T);
  const int nct = p.kt / Sc::cc;
  if (p.x_vec) {
    const int per_row = p.kt / V;
    const int total = M * per_row;
    for (int v0 = threadIdx.x; v0 < total; v0 += 4 * blockDim.x) {
      cu::Pack<T, V> pk[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int v = v0 + u * blockDim.x;
        const int m = v / per_row, kk = v % per_row * V;
        if (v < total && m < p.rows && k0 + kk < p.K) {
          pk[u] = *reinterpret_cast<const cu::Pack<T, V>*>(
              p.x + int64_t{m} * p.K + k0 + kk);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            pk[u].v[e] = cu::convert<T>(0.0f);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int v = v0 + u * blockDim.x;
        if (v < total) {
          const int m = v / per_row, kk = v % per_row * V;
          // V consecutive codes: V / 4 whole quads of one chunk.
#pragma unroll
          for (int qd = 0; qd < V / 4; ++qd) {
            float4 f;
            float* fe = &f.x;
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              fe[e] = cu::convert<float>(pk[u].v[qd * 4 + e]);
              if constexpr (Sc::affine) {
                fe[e] *= prescale<Sc::bits>(kk + qd * 4 + e);
              }
            }
            *reinterpret_cast<float4*>(xs + m * p.kt +
                                       staged_at<S>(kk + qd * 4, nct)) = f;
          }
        }
      }
    }
  } else {
    for (int e = threadIdx.x; e < M * p.kt; e += blockDim.x) {
      const int m = e / p.kt, kk = e % p.kt;
      const int k = k0 + kk;
      float v = 0;
      if (m < p.rows && k < p.K) {
        v = cu::convert<float>(p.x[int64_t{m} * p.K + k]);
      }
      if constexpr (Sc::affine) {
        v *= prescale<Sc::bits>(kk);
      }
      xs[m * p.kt + staged_at<S>(kk, nct)] = v;
    }
  }
  if constexpr (Sc::affine) {
    // Each unit's sum of x, from the staged values (the scaling undone:
    // powers of two, exact).
    __syncthreads();
    const int units = p.kt / Sc::uc;
    const float4* xs4 = reinterpret_cast<const float4*>(xs);
    for (int e = threadIdx.x; e < M * units; e += blockDim.x) {
      const int m = e / units, r = e % units;
      const int c = r % nct, q0 = r / nct * (Sc::uc / 4);
      float s = 0;
#pragma unroll
      for (int q = q0; q < q0 + Sc::uc / 4; ++q) {
        const float4 f = xs4[m * (p.kt / 4) + q * nct + c];
        const float* fe = &f.x;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          s = __fmaf_rn(fe[i], unscale<Sc::bits>(q * 4 + i), s);
        }
      }
      sums[e] = s;
    }
  }
}

// acc[m] += the products of chunk c's codes (words of w) with x.
template <int S, int M>
__device__ __forceinline__ void accumulate(const uint4& w, const float* s,
                                           const float* b, const float4* xs4,
                                           const float* sums, int c, int nct,
                                           int kt, float* acc,
                                           uint32_t& nan_codes) {
  using Sc = SchemeOf<S>;
  const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int uu = 0; uu < Sc::upc; ++uu) {
    // Two partial sums per row halve the fma chain's latency (with more
    // rows the rows' chains interleave).
    constexpr int P = M <= 2 ? 2 : 1;
    float dq[M][P];
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int i = 0; i < P; ++i) {
        dq[m][i] = 0;
      }
    }
#pragma unroll
    for (int wi = uu * Sc::wpu; wi < (uu + 1) * Sc::wpu; ++wi) {
      float f[Sc::cpw];
      decode_word<S>(words[wi], f, nan_codes);
#pragma unroll
      for (int qd = 0; qd < Sc::cpw / 4; ++qd) {
        const int quad = wi * (Sc::cpw / 4) + qd;
#pragma unroll
        for (int m = 0; m < M; ++m) {
          const float4 xv = xs4[m * (kt / 4) + quad * nct + c];
          float& d = dq[m][quad % P];
          d = __fmaf_rn(xv.x, f[4 * qd], d);
          d = __fmaf_rn(xv.y, f[4 * qd + 1], d);
          d = __fmaf_rn(xv.z, f[4 * qd + 2], d);
          d = __fmaf_rn(xv.w, f[4 * qd + 3], d);
        }
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float d = P == 2 ? dq[m][0] + dq[m][P - 1] : dq[m][0];
      if constexpr (S == kMxfp8) {
        d *= 256.0f;
      }
      acc[m] = __fmaf_rn(s[uu], d, acc[m]);
      if constexpr (SchemeOf<S>::affine) {
        acc[m] = __fmaf_rn(b[uu], sums[(m * Sc::upc + uu) * nct + c], acc[m]);
      }
    }
  }
}

// A lane's packed weights and scales for one step: kUnroll chunks.
template <typename T, int S, int M>
struct StepData {
  uint4 w[kUnroll<S, M>];
  RawScale<T, S> s[kUnroll<S, M>][SchemeOf<S>::upc];
  RawScale<T, S> b[kUnroll<S, M>][SchemeOf<S>::upc];
};

// Position of a block's threads in their common sequence of work: column
// group g (every gridDim.x-th), tile t of K, step s of the tile (each lane
// takes chunks sl + (s * kUnroll + u) * lpc). Every thread of the block
// walks the same sequence, so the staging barriers match.
struct Work {
  int g, t, s;
};

template <typename T, int S, int M>
struct Kernel {
  using Sc = SchemeOf<S>;
  static constexpr int U = kUnroll<S, M>;
  Params<T> p;
  int lpc, sl, nct;
  int64_t groups_per_row;
  float gscale;

  __device__ int chunks_in(int t) const {
    return min(nct, p.row_chunks - t * nct);
  }
  __device__ int steps_in(int t) const {
    return (chunks_in(t) + U * lpc - 1) / (U * lpc);
  }
  __device__ int column(int g) const {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    return ((g * kWarps + warp) << (5 - p.lpc_log)) + (lane >> p.lpc_log);
  }
  __device__ Work next(Work w) const {
    if (++w.s == steps_in(w.t)) {
      w.s = 0;
      if (++w.t == p.ntiles) {
        w.t = 0;
        w.g += gridDim.x;
      }
    }
    return w;
  }
  // Issues the loads of step w (nothing for a dead column, zeros past the
  // tile's chunks).
  __device__ void load(Work w, StepData<T, S, M>& d) const {
    const int n = column(w.g);
    const int nc = chunks_in(w.t), c0 = w.t * nct;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = sl + (w.s * U + u) * lpc;
      d.w[u] = make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int uu = 0; uu < Sc::upc; ++uu) {
        d.s[u][uu] = d.b[u][uu] = zero_scale<T, S>();
      }
      if (n < p.N && c < nc) {
        // Streamed once: evict-first, so x's lines and the scales stay.
        d.w[u] = __ldcs(p.w + int64_t{n} * p.row_chunks + c0 + c);
#pragma unroll
        for (int uu = 0; uu < Sc::upc; ++uu) {
          const int64_t k = int64_t{c0 + c} * Sc::cc + uu * Sc::uc;
          fetch_scale<T, S>(p.scales, p.biases,
                            n * groups_per_row + (k >> p.lgs), d.s[u][uu],
                            d.b[u][uu]);
        }
      }
    }
  }
  // acc += the products of the step's chunk u (tile chunk c).
  __device__ void chunk(const StepData<T, S, M>& d, int u, const float4* xs4,
                        const float* sums, int c, float* acc,
                        uint32_t& nan_codes) const {
    float s[Sc::upc], b[Sc::upc];
#pragma unroll
    for (int uu = 0; uu < Sc::upc; ++uu) {
      scale_of<T, S>(d.s[u][uu], d.b[u][uu], gscale, s[uu], b[uu]);
    }
    accumulate<S, M>(d.w[u], s, b, xs4, sums, c, nct, p.kt, acc, nan_codes);
  }
  // acc += step w's products. When every chunk of the step lies in the
  // tile (the usual case) the chunks' arithmetic has no branches between
  // them, so the compiler interleaves it.
  __device__ void compute(Work w, const StepData<T, S, M>& d,
                          const float4* xs4, const float* sums, float* acc,
                          uint32_t& nan_codes) const {
    if (column(w.g) >= p.N) {
      return;
    }
    const int nc = chunks_in(w.t);
    const int c_first = sl + w.s * U * lpc;
    if (c_first + (U - 1) * lpc < nc) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        chunk(d, u, xs4, sums, c_first + u * lpc, acc, nan_codes);
      }
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (c_first + u * lpc < nc) {
          chunk(d, u, xs4, sums, c_first + u * lpc, acc, nan_codes);
        }
      }
    }
  }
};

template <typename T, int S, int M>
// At most 128 registers (two blocks per SM): the two steps' loads in
// registers, the accumulators and the decoded codes fit without spills.
__global__ void __launch_bounds__(kWarps * 32, 2) qmv_kernel(Params<T> p) {
  using Sc = SchemeOf<S>;
  extern __shared__ float4 smem[];
  const float4* xs4 = smem;
  float* xs = reinterpret_cast<float*>(smem);
  float* sums = xs + M * p.kt;
  const int lane = threadIdx.x % 32;
  Kernel<T, S, M> k{p,
                    1 << p.lpc_log,
                    lane & ((1 << p.lpc_log) - 1),
                    p.kt / Sc::cc,
                    p.K >> p.lgs,
                    1.0f};
  if constexpr (S == kNvfp4) {
    if (p.global_scale) {
      k.gscale = *p.global_scale / (448.0f * 6.0f);
    }
  }
  // Software pipelined: the loads of the next step are issued before the
  // arithmetic of the current one, and the first step's loads before x is
  // staged.
  Work cur{static_cast<int>(blockIdx.x), 0, 0};
  if (cur.g >= p.groups) {
    return;  // the whole block (grids are capped at the groups anyway)
  }
  StepData<T, S, M> now, ahead;
  k.load(cur, now);
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    acc[m] = 0;
  }
  uint32_t nan_codes = 0;
  bool staged = false;
  for (;;) {
    if (cur.s == 0 && (!staged || p.ntiles > 1)) {
      if (staged) {
        __syncthreads();  // every warp is done with the last tile
      }
      stage_x<T, S, M>(p, cur.t * p.kt, xs, sums);
      __syncthreads();
      staged = true;
    }
    const Work nx = k.next(cur);
    const bool more = nx.g < p.groups;
    if (more) {
      k.load(nx, ahead);
    }
    k.compute(cur, now, xs4, sums, acc, nan_codes);
    if (nx.g != cur.g) {
      // The column is done: sum its lanes and write it.
      const int n = k.column(cur.g);
      const bool nan_code = S == kMxfp8 && (nan_codes & 0x80808080u) != 0;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float v = nan_code ? __int_as_float(0x7fc00000) : acc[m];
        for (int o = k.lpc >> 1; o > 0; o >>= 1) {
          v += __shfl_xor_sync(0xffffffffu, v, o);
        }
        if (n < p.N && k.sl == 0 && m < p.rows) {
          p.out[int64_t{m} * p.N + n] = cu::convert<T>(v);
        }
        acc[m] = 0;
      }
      nan_codes = 0;
    }
    if (!more) {
      break;
    }
    cur = nx;
    now = ahead;
  }
}

template <typename T, int S, int M>
bool launch(const Args& a, cudaStream_t stream) {
  using Sc = SchemeOf<S>;
  // Groups hold whole units (a power of two of at least uc codes).
  if (a.gs < Sc::uc || (a.gs & (a.gs - 1)) != 0) {
    return false;
  }
  Params<T> p{};
  take_args(a, p);
  p.rows = a.rows;
  p.row_chunks = static_cast<int>(int64_t{a.K} * Sc::bits / 128);
  // Lanes per column: a warp, or fewer for rows of fewer than 32 chunks.
  p.lpc_log = 5;
  while (p.lpc_log > 0 && (1 << p.lpc_log) > p.row_chunks) {
    --p.lpc_log;
  }
  p.x_vec = reinterpret_cast<uintptr_t>(a.x) % 16 == 0 &&
            (int64_t{a.K} * sizeof(T)) % 16 == 0;
  // Bytes of staged x per code of K (values, plus unit sums if affine).
  const double per_code =
      M * sizeof(float) * (1.0 + (Sc::affine ? 1.0 / Sc::uc : 0.0));
  const int64_t k128 = (int64_t{a.K} + 127) / 128 * 128;
  if (k128 * per_code <= kStageBudget) {
    p.kt = static_cast<int>(k128);
  } else {
    p.kt = static_cast<int>(kStageBudget / per_code) / 128 * 128;
  }
  p.ntiles = static_cast<int>((a.K + p.kt - 1) / p.kt);
  const size_t smem = size_t{M} * p.kt * sizeof(float) +
                      (Sc::affine ? size_t{M} * (p.kt / Sc::uc) * 4 : 0);
  const int64_t cols_per_group = int64_t{kWarps} << (5 - p.lpc_log);
  p.groups = static_cast<int>((a.N + cols_per_group - 1) / cols_per_group);

  auto kernel = qmv_kernel<T, S, M>;
  if (smem > 48 * 1024 &&
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem)) != cudaSuccess) {
    cudaGetLastError();  // not taken: the generic kernel runs instead
    return false;
  }
  const int per_sm = cu::blocks_per_sm(reinterpret_cast<const void*>(kernel),
                                       kWarps * 32, smem);
  const int sms = cu::sm_count();
  if (per_sm < 1 || sms < 1) {
    return false;
  }
  const int blocks =
      static_cast<int>(std::min<int64_t>(p.groups, int64_t{per_sm} * sms));
  kernel<<<blocks, kWarps * 32, smem, stream>>>(p);
  return true;
}

// FLUXION_QMV_STAGED=1 keeps one row of x on the staged kernel too (an
// A/B switch for benchmarks; read once).
bool staged_only() {
  static const bool on = [] {
    const char* v = std::getenv("FLUXION_QMV_STAGED");
    return v != nullptr && v[0] == '1';
  }();
  return on;
}

// Rows of x rounded up to the kernel's: 1, 2, 4 or 8 (the extra rows are
// zeros in shared memory and are not written).
template <typename T, int S>
bool launch_rows(const Args& a, cudaStream_t stream) {
  if (a.rows <= 1) {
    // One row (decoding one token): x in registers where it fits.
    return (!staged_only() && launch_lanes<T, S>(a, stream)) ||
           launch<T, S, 1>(a, stream);
  }
  if (a.rows == 2) {
    return launch<T, S, 2>(a, stream);
  }
  if (a.rows <= 4) {
    return launch<T, S, 4>(a, stream);
  }
  return launch<T, S, 8>(a, stream);
}

}  // namespace

template <typename T>
bool qmv_fast(const Args& a, cudaStream_t stream) {
  if constexpr (!std::is_same_v<T, __half> &&
                !std::is_same_v<T, __nv_bfloat16> &&
                !std::is_same_v<T, float>) {
    return false;
  } else {
    using QM = QuantizationMode;
    if (a.rows < 1 || a.rows > 8 || a.N < 1 || a.K < 1 ||
        reinterpret_cast<uintptr_t>(a.w) % 16 != 0 ||
        (int64_t{a.K} * a.bits) % 128 != 0) {
      return false;
    }
    switch (static_cast<QM>(a.mode)) {
      case QM::affine:
        switch (a.bits) {
          case 2:
            return launch_rows<T, kAffine2>(a, stream);
          case 4:
            return launch_rows<T, kAffine4>(a, stream);
          case 8:
            return launch_rows<T, kAffine8>(a, stream);
          default:
            return false;
        }
      case QM::mxfp4:
        return a.bits == 4 && launch_rows<T, kMxfp4>(a, stream);
      case QM::nvfp4:
        return a.bits == 4 && launch_rows<T, kNvfp4>(a, stream);
      case QM::mxfp8:
        return a.bits == 8 && launch_rows<T, kMxfp8>(a, stream);
    }
    return false;
  }
}

template bool qmv_fast<__half>(const Args&, cudaStream_t);
template bool qmv_fast<__nv_bfloat16>(const Args&, cudaStream_t);
template bool qmv_fast<float>(const Args&, cudaStream_t);
template bool qmv_fast<double>(const Args&, cudaStream_t);

}  // namespace fluxion::qmv
