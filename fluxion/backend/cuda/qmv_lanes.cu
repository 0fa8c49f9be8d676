// The decoding kernel for one row of x (the common case: one token at a
// time) with x held in registers: each lane owns one or two 16-byte chunks
// of a weight row's positions along K, keeps x's codes for them as floats
// (prescaled for the affine codes, as in quantized_qmv.cu) for the whole
// kernel, and walks the columns. The staged kernel re-reads x from shared
// memory for every code (one 16-byte shared load per four codes), and on
// the H100 its largest stall was that load's latency (Nsight Compute,
// session 21: 29 us for 1 x 4096 @ 4096 x 14336 at 4 bits, 35% of DRAM
// bandwidth, 113 registers); here a code costs its decode and one fma.
//
// A weight row of `row_chunks` chunks spreads over kw = 1, 2, 4 or 8 warps
// (lane l of warp j owns chunks (j * R + r) * 32 + l), so a block of 8
// warps works on 8 / kw columns at once ("sets"). Every step a lane loads
// its chunks of kColumns columns (16-byte evict-first loads, the next
// step's issued before this step's arithmetic), sums each column over its
// warp by shuffles, and with kw > 1 leaves the warp's partial in shared
// memory; every kFlush steps the block sums the partials of the window's
// columns and writes them. Every warp runs the same number of steps, so
// the barriers match.
#include <algorithm>

#include "fluxion/backend/cuda/occupancy.cuh"
#include "fluxion/backend/cuda/quantized_codes.cuh"

namespace fluxion::qmv {

namespace {

constexpr int kWarps = 8;
constexpr int kXFloats = 32;  // x's floats per lane: R chunks' codes
constexpr int kFlush = 2;     // steps between the block's partial sums

// Columns per step: four 16-byte loads per lane a step (eight in flight
// with the next step's).
template <int R>
constexpr int kColumns = 4 / R;

template <typename T>
struct LaneParams {
  const uint4* w;
  const void* scales;
  const void* biases;
  const float* global_scale;
  const T* x;
  T* out;
  int N, K;
  int lgs;         // log2 of the group size
  int row_chunks;  // 16-byte chunks per row of w
  int kw_log;      // log2 of the warps sharing a column
  int steps;       // steps of every warp
  bool x_vec;      // x readable 16 bytes at a time
};

template <typename T, int S, int R>
struct LaneStep {
  static constexpr int U = kColumns<R>;
  static constexpr int upc = SchemeOf<S>::upc;
  uint4 w[U][R];
  RawScale<T, S> s[U][R][upc];  // converted when used (quantized_codes.cuh)
  RawScale<T, S> b[U][R][upc];
};

template <typename T, int S, int R>
struct Lanes {
  using Sc = SchemeOf<S>;
  static constexpr int U = kColumns<R>;
  LaneParams<T> p;
  int sets;   // columns a block works on at once
  int set;    // this warp's
  int chunk[R];
  int64_t groups_per_row;
  float gscale;

  // Column of this warp's set at iteration i (every set walks its own
  // sequence; sets of all blocks interleave).
  __device__ int column(int i) const {
    return (i * static_cast<int>(gridDim.x) + static_cast<int>(blockIdx.x)) *
               sets +
           set;
  }

  __device__ void load(int step, LaneStep<T, S, R>& d) const {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int n = column(step * U + u);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        d.w[u][r] = make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int uu = 0; uu < Sc::upc; ++uu) {
          d.s[u][r][uu] = d.b[u][r][uu] = zero_scale<T, S>();
        }
        if (n < p.N && chunk[r] < p.row_chunks) {
          d.w[u][r] = __ldcs(p.w + int64_t{n} * p.row_chunks + chunk[r]);
#pragma unroll
          for (int uu = 0; uu < Sc::upc; ++uu) {
            const int64_t k = int64_t{chunk[r]} * Sc::cc + uu * Sc::uc;
            fetch_scale<T, S>(p.scales, p.biases,
                              n * groups_per_row + (k >> p.lgs),
                              d.s[u][r][uu], d.b[u][r][uu]);
          }
        }
      }
    }
  }

  // This lane's codes of x (zeros past the row), prescaled for affine
  // codes, and each unit's plain sum.
  __device__ void load_x(float (&xr)[R][Sc::cc],
                         float (&xsum)[R][Sc::upc]) const {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool live = chunk[r] < p.row_chunks;
      const T* src = p.x + int64_t{chunk[r]} * Sc::cc;
      if (p.x_vec) {
        constexpr int V = 16 / sizeof(T);
#pragma unroll
        for (int e = 0; e < Sc::cc; e += V) {
          cu::Pack<T, V> pk;
          if (live) {
            pk = *reinterpret_cast<const cu::Pack<T, V>*>(src + e);
          } else {
#pragma unroll
            for (int v = 0; v < V; ++v) {
              pk.v[v] = cu::convert<T>(0.0f);
            }
          }
#pragma unroll
          for (int v = 0; v < V; ++v) {
            xr[r][e + v] = cu::convert<float>(pk.v[v]);
          }
        }
      } else {
#pragma unroll
        for (int e = 0; e < Sc::cc; ++e) {
          xr[r][e] = live ? cu::convert<float>(src[e]) : 0.0f;
        }
      }
#pragma unroll
      for (int uu = 0; uu < Sc::upc; ++uu) {
        float sum = 0;
#pragma unroll
        for (int e = uu * Sc::uc; e < (uu + 1) * Sc::uc; ++e) {
          sum += xr[r][e];
        }
        xsum[r][uu] = sum;
      }
      if constexpr (Sc::affine) {
#pragma unroll
        for (int e = 0; e < Sc::cc; ++e) {
          xr[r][e] *= prescale<Sc::bits>(e);
        }
      }
    }
  }
};

// acc += the products of one chunk's codes with this lane's x for it.
template <int S>
__device__ __forceinline__ void accumulate_chunk(const uint4& w,
                                                 const float* s,
                                                 const float* b,
                                                 const float* x,
                                                 const float* xsum, float& acc,
                                                 uint32_t& nan_codes) {
  using Sc = SchemeOf<S>;
  const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int uu = 0; uu < Sc::upc; ++uu) {
    float dq[2] = {0, 0};  // two chains halve the fma latency
#pragma unroll
    for (int wi = uu * Sc::wpu; wi < (uu + 1) * Sc::wpu; ++wi) {
      float f[Sc::cpw];
      decode_word<S>(words[wi], f, nan_codes);
#pragma unroll
      for (int j = 0; j < Sc::cpw; ++j) {
        const int e = wi * Sc::cpw + j;
        float& d = dq[(e / 4) % 2];
        d = __fmaf_rn(x[e], f[j], d);
      }
    }
    float d = dq[0] + dq[1];
    if constexpr (S == kMxfp8) {
      d *= 256.0f;
    }
    acc = __fmaf_rn(s[uu], d, acc);
    if constexpr (Sc::affine) {
      acc = __fmaf_rn(b[uu], xsum[uu], acc);
    }
  }
}

template <typename T, int S, int R>
__global__ void __launch_bounds__(kWarps * 32, 2)
    qmv_lanes_kernel(LaneParams<T> p) {
  using Sc = SchemeOf<S>;
  constexpr int U = kColumns<R>;
  __shared__ float partial[kFlush * U][kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kw = 1 << p.kw_log;
  const int kwarp = warp & (kw - 1);
  Lanes<T, S, R> k;
  k.p = p;
  k.sets = kWarps >> p.kw_log;
  k.set = warp >> p.kw_log;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    k.chunk[r] = (kwarp * R + r) * 32 + lane;
  }
  k.groups_per_row = p.K >> p.lgs;
  k.gscale = 1.0f;
  if constexpr (S == kNvfp4) {
    if (p.global_scale) {
      k.gscale = *p.global_scale / (448.0f * 6.0f);
    }
  }
  LaneStep<T, S, R> now, ahead;
  k.load(0, now);  // the weights' first loads before x's
  float xr[R][Sc::cc], xsum[R][Sc::upc];
  k.load_x(xr, xsum);
  for (int step = 0; step < p.steps; ++step) {
    if (step + 1 < p.steps) {
      k.load(step + 1, ahead);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float acc = 0;
      uint32_t nan_codes = 0;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float s[Sc::upc], b[Sc::upc];
#pragma unroll
        for (int uu = 0; uu < Sc::upc; ++uu) {
          scale_of<T, S>(now.s[u][r][uu], now.b[u][r][uu], k.gscale, s[uu],
                         b[uu]);
        }
        accumulate_chunk<S>(now.w[u][r], s, b, xr[r], xsum[r], acc,
                            nan_codes);
      }
      if (S == kMxfp8 && (nan_codes & 0x80808080u) != 0) {
        acc = __int_as_float(0x7fc00000);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
      }
      const int i = step * U + u;
      if (lane == 0) {
        if (kw == 1) {
          const int n = k.column(i);
          if (n < p.N) {
            p.out[n] = cu::convert<T>(acc);
          }
        } else {
          partial[i % (kFlush * U)][warp] = acc;
        }
      }
    }
    if (kw > 1 && ((step + 1) % kFlush == 0 || step + 1 == p.steps)) {
      // The window's columns: sum their warps' partials in warp order.
      __syncthreads();
      const int i0 = step / kFlush * kFlush * U;
      const int count = (step % kFlush + 1) * U * k.sets;
      for (int e = threadIdx.x; e < count; e += blockDim.x) {
        const int il = e / k.sets, s = e % k.sets;
        Lanes<T, S, R> at = k;
        at.set = s;
        const int n = at.column(i0 + il);
        if (n < p.N) {
          float v = 0;
          for (int j = 0; j < kw; ++j) {
            v += partial[il][s * kw + j];
          }
          p.out[n] = cu::convert<T>(v);
        }
      }
      __syncthreads();
    }
    now = ahead;
  }
}

template <typename T, int S, int R>
bool launch(const Args& a, int row_chunks, cudaStream_t stream) {
  LaneParams<T> p{};
  take_args(a, p);
  p.row_chunks = row_chunks;
  const int warps_needed = (row_chunks + 32 * R - 1) / (32 * R);
  while ((1 << p.kw_log) < warps_needed) {
    ++p.kw_log;
  }
  p.x_vec = reinterpret_cast<uintptr_t>(a.x) % 16 == 0 &&
            (int64_t{a.K} * sizeof(T)) % 16 == 0;
  auto kernel = qmv_lanes_kernel<T, S, R>;
  const int per_sm = cu::blocks_per_sm(reinterpret_cast<const void*>(kernel),
                                       kWarps * 32, 0);
  const int sms = cu::sm_count();
  if (per_sm < 1 || sms < 1) {
    return false;
  }
  const int sets = kWarps >> p.kw_log;
  const int64_t set_count = (int64_t{a.N} + sets - 1) / sets;
  const int blocks =
      static_cast<int>(std::min<int64_t>(set_count, int64_t{per_sm} * sms));
  const int64_t per_set = (set_count + blocks - 1) / blocks;
  p.steps = static_cast<int>((per_set + kColumns<R> - 1) / kColumns<R>);
  kernel<<<blocks, kWarps * 32, 0, stream>>>(p);
  return true;
}

}  // namespace

template <typename T, int S>
bool launch_lanes(const Args& a, cudaStream_t stream) {
  using Sc = SchemeOf<S>;
  if (a.rows != 1 || a.gs < Sc::uc || (a.gs & (a.gs - 1)) != 0) {
    return false;
  }
  const int64_t row_chunks = int64_t{a.K} * Sc::bits / 128;
  // Lanes must be busy (a warp's worth of chunks at least) and x must fit
  // kXFloats per lane over at most 8 warps.
  if (row_chunks < 32) {
    return false;
  }
  const int64_t per_lane = (row_chunks + 32 * kWarps - 1) / (32 * kWarps);
  const int rc = static_cast<int>(row_chunks);
  if constexpr (Sc::cc <= kXFloats) {
    if (per_lane == 1) {
      return launch<T, S, 1>(a, rc, stream);
    }
  }
  if constexpr (2 * Sc::cc <= kXFloats) {
    if (per_lane == 2) {
      return launch<T, S, 2>(a, rc, stream);
    }
  }
  return false;
}

#define FLUXION_QMV_LANES(T)                                         \
  template bool launch_lanes<T, kAffine2>(const Args&, cudaStream_t); \
  template bool launch_lanes<T, kAffine4>(const Args&, cudaStream_t); \
  template bool launch_lanes<T, kAffine8>(const Args&, cudaStream_t); \
  template bool launch_lanes<T, kMxfp4>(const Args&, cudaStream_t);   \
  template bool launch_lanes<T, kNvfp4>(const Args&, cudaStream_t);   \
  template bool launch_lanes<T, kMxfp8>(const Args&, cudaStream_t);
FLUXION_QMV_LANES(__half)
FLUXION_QMV_LANES(__nv_bfloat16)
FLUXION_QMV_LANES(float)
#undef FLUXION_QMV_LANES

}  // namespace fluxion::qmv
