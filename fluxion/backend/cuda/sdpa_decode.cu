// Attention decoding on the GPU: few queries (Lq <= 4) against many keys,
// for float16, bfloat16 and float32 with one head dimension D = Dv whose
// rows are whole 16-byte units (sdpa.cu runs every other case, with the
// same edge rules: sdpa.cuh).
//
// Decoding reads each key and value once and does ~2 flops per byte, so
// the kernel is built around the memory and around the few instructions
// it may spend per key:
//  - a block per (batch, KV head, group of up to 8 query rows, key split)
//    serves every query head of the KV head (grouped-query attention: 32
//    query heads on 8 KV heads read K and V once, not four times); the
//    rows are (query head, query) pairs as in sdpa.cu;
//  - a key's row is read by LPK lanes, 16 bytes each (D = 128 bf16: 16
//    lanes), so a warp takes 32 / LPK keys at a time; each lane copies its
//    units of kKeys keys (K and V) into shared memory kStages - 1 steps
//    ahead of their arithmetic (cp.async);
//  - scores: each lane's partial dot products of its features with the
//    query rows (held in registers, float); a reduce-scatter over the
//    key's lanes leaves each lane the whole dot product of one or two
//    (key, row) pairs, whose mask rules and exponentials only that lane
//    computes, then shuffles hand every lane the scores and weights (the
//    first version summed every pair in every lane and had all 16 lanes
//    of a key repeat each pair's softmax: on the H200 it ran at a quarter
//    of the bandwidth, bound by those instructions);
//  - the online softmax (running max, sum and unnormalized output per
//    row, in float) advances kKeys keys at a time;
//  - the key range is split over blocks so that about one full wave of
//    blocks runs (occupancy from the runtime, cached); each split's
//    partial (max, sum, output) goes to a scratch array and a second
//    kernel merges them (a block per output row).
// Within a block the 4 x (32 / LPK) key groups each keep their own softmax
// state, merged through shared memory at the end.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "fluxion/backend/cuda/occupancy.cuh"
#include "fluxion/backend/cuda/sdpa.cuh"

namespace fluxion::fast::sdpa_detail {

namespace {

constexpr int kDecWarps = 4;
constexpr int kDecThreads = kDecWarps * 32;
constexpr int kMaxSplits = 256;
constexpr int kMinSplitKeys = 256;  // keys per split at least
constexpr int kStages = 3;          // steps of K and V staged per lane

// 16 bytes from global to shared memory without registers (cp.async, L2
// only); `ok` false writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem,
                                           bool ok) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(gmem), "r"(ok ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// A 16-byte unit of a K or V row.
template <typename T>
struct alignas(16) Unit {
  T v[16 / sizeof(T)];
};

// Row rho of kv head hk's rows (R query heads x Lq queries, head-major).
__device__ __forceinline__ void row_of(const SdpaParams& p, int hk, int rho,
                                       int& h, int& i) {
  h = hk * p.R + rho / p.Lq;
  i = rho % p.Lq;
}

// The block's rows as [B * Hq * Lq] indices of the output.
__device__ __forceinline__ int64_t out_row(const SdpaParams& p, int b, int h,
                                           int i) {
  return (static_cast<int64_t>(b) * p.Hq + h) * p.Lq + i;
}

// The splits' partials in p.part: (m, l) at [row][split], then the
// unnormalized outputs at [row][split][D] from the next 16-byte boundary
// (sdpa.cu allocates 4 floats more for it).
struct Partials {
  float* ml;
  float* acc;
};
__device__ __forceinline__ Partials partials(const SdpaParams& p) {
  float* ml = static_cast<float*>(p.part);
  const int64_t n = int64_t{p.B} * p.Hq * p.Lq * p.nsplit * 2;
  return {ml, ml + (n + 3) / 4 * 4};
}

// Sums the P values of v over the LPK lanes of a key (lane gl of them),
// scattered: afterwards lane gl holds in v[0 .. V) the sums of values
// gl / REP * V .. + V (V = P / LPK when P > LPK, else 1; REP lanes hold
// each sum when LPK > P). Each halving step sends the half the lane does
// not keep: P - V values exchanged, against P log2(LPK) for an all-reduce.
template <int P, int LPK>
__device__ __forceinline__ void reduce_scatter(float* v, int gl) {
  int n = P;
#pragma unroll
  for (int o = LPK / 2; o > 0; o >>= 1) {
    if (n > 1) {
      const int half = n / 2;
      const bool upper = (gl & o) != 0;
#pragma unroll
      for (int i = 0; i < P / 2; ++i) {
        if (i < half) {
          const float send = upper ? v[i] : v[half + i];
          const float keep = upper ? v[half + i] : v[i];
          v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
      }
      n = half;
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
    }
  }
}

// out[k] for every pair k < P from its owner in the key's lanes (first at
// lane `base`): lane base + k / V * REP, value k % V.
template <int P, int V, int LPK>
__device__ __forceinline__ void gather(const float* own, float* out, int base) {
  constexpr int REP = LPK > P ? LPK / P : 1;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    out[k] = __shfl_sync(0xffffffffu, own[k % V], base + k / V * REP);
  }
}
// out[r] for every row from the owner of pair r (key 0, row r): its
// per-pair values own[] hold a row's value at each pair.
template <int ROWS, int P, int V, int LPK>
__device__ __forceinline__ void gather_rows(const float* own, float* out,
                                            int base) {
  constexpr int REP = LPK > P ? LPK / P : 1;
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    out[r] = __shfl_sync(0xffffffffu, own[r % V], base + r / V * REP);
  }
}

// LPK lanes per key, CPL units per lane (features u * VPC.. of units
// u = gl + LPK * c), ROWS query rows per block.
template <typename T, int LPK, int CPL, int ROWS>
__global__ void __launch_bounds__(kDecThreads)
    sdpa_decode_kernel(SdpaParams p) {
  constexpr int VPC = 16 / sizeof(T);  // values per unit
  constexpr int EPL = CPL * VPC;       // features per lane
  constexpr int KPW = 32 / LPK;        // keys per warp at a time
  constexpr int G = kDecWarps * KPW;   // key groups per block
  // Keys per group and step: 2 (K and V, 64 bytes a lane in flight). On
  // the H200 the first version of this kernel ran 1.3x faster with 2 keys
  // a step than with 4 (more blocks fit an SM; its steps are latency
  // bound), for 4 query rows and for 1.
  constexpr int kKeys = 2 / CPL;
  constexpr int DMAX = LPK * EPL;
  constexpr int P = kKeys * ROWS;             // (key, row) pairs a step
  constexpr int V = P > LPK ? P / LPK : 1;    // pairs a lane owns
  constexpr int REP = LPK > P ? LPK / P : 1;  // lanes holding each pair
  // The staged K and V units (kStages steps, each lane's own slots:
  // [stage][slot][thread], conflict-free 16-byte accesses) share their
  // memory with the groups' accumulators of the final merge.
  constexpr int kSlots = 2 * kKeys * CPL;
  constexpr size_t kStageBytes = size_t{kStages} * kSlots * kDecThreads * 16;
  constexpr size_t kAccBytes = sizeof(float) * G * ROWS * DMAX;
  __shared__ alignas(16)
      unsigned char sm_raw[kStageBytes > kAccBytes ? kStageBytes : kAccBytes];
  __shared__ float sm_ml[G][ROWS][2];
  __shared__ float sm_w[ROWS][G];
  uint4* staged = reinterpret_cast<uint4*>(sm_raw);
  auto sm_acc = reinterpret_cast<float(*)[ROWS][DMAX]>(sm_raw);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int grp = warp * KPW + lane / LPK;  // this lane's key group
  const int gl = lane % LPK;
  const int own0 = gl / REP * V;  // this lane's first owned pair
  const int nunits = p.D / VPC;

  const int64_t bx = blockIdx.x;
  const int rg = static_cast<int>(bx % p.row_blocks);
  const int64_t bhk = bx / p.row_blocks;
  const int b = static_cast<int>(bhk / p.Hkv);
  const int hk = static_cast<int>(bhk % p.Hkv);
  const int split = blockIdx.y;
  const int nrows = p.R * p.Lq;

  // The block's rows: live ones, their heads, queries and visible keys;
  // the queries' features in registers.
  int hs[ROWS], is[ROWS], vis[ROWS];
  bool live[ROWS];
  float q[ROWS][EPL];
  int kend = 0;
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int rho = rg * ROWS + r;
    live[r] = rho < nrows;
    row_of(p, hk, live[r] ? rho : 0, hs[r], is[r]);
    vis[r] = visible(p, is[r]);
    if (live[r]) {
      kend = max(kend, vis[r] == 0 ? p.Lk : vis[r]);
    }
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
      const int u = gl + LPK * c;
#pragma unroll
      for (int e = 0; e < VPC; ++e) {
        float val = 0;
        if (live[r] && u < nunits) {
          val = load<T, float>(p.q, b * p.qs[0] + hs[r] * p.qs[1] +
                                        is[r] * p.qs[2] +
                                        (u * VPC + e) * p.qs[3]);
        }
        q[r][c * VPC + e] = val;
      }
    }
  }
  const int kbeg = split * p.split_len;
  const int kstop = min(kend, kbeg + p.split_len);

  float m[ROWS], l[ROWS], acc[ROWS][EPL];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    m[r] = neg_inf<float>();
    l[r] = 0;
#pragma unroll
    for (int e = 0; e < EPL; ++e) {
      acc[r][e] = 0;
    }
  }
  const T* kp = static_cast<const T*>(p.k) + b * p.ks[0] + hk * p.ks[1];
  const T* vp = static_cast<const T*>(p.v) + b * p.vs[0] + hk * p.vs[1];

  // Steps of G * kKeys keys; group grp takes keys j0 + grp + G * t. The
  // bound is uniform over the warp (its shuffles need every lane). Each
  // lane copies its units of step j0 + (kStages - 1) * step into shared
  // memory (cp.async, zeros past the keys) before it works on step j0, so
  // kStages - 1 steps of K and V are in flight behind the arithmetic (the
  // first version loaded a step into registers and used it at once: on
  // the H100 it ran at 56% of DRAM bandwidth, its loads in flight only
  // while the warp waited for them).
  constexpr int kStep = G * kKeys;
  const int tid = threadIdx.x;
  auto stage_step = [&](int j0, int stage) {
#pragma unroll
    for (int t = 0; t < kKeys; ++t) {
      const int j = j0 + grp + G * t;
#pragma unroll
      for (int c = 0; c < CPL; ++c) {
        const int u = gl + LPK * c;
        const bool ok = j < kstop && u < nunits;
        const T* ks = ok ? kp + int64_t{j} * p.ks[2] + u * VPC : kp;
        const T* vs = ok ? vp + int64_t{j} * p.vs[2] + u * VPC : vp;
        uint4* slot = staged + (stage * kSlots + t * CPL + c) * kDecThreads;
        cp_async16(slot + tid, ks, ok);
        cp_async16(slot + kKeys * CPL * kDecThreads + tid, vs, ok);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    stage_step(kbeg + s * kStep, s);
  }
  int stage = 0;
  for (int j0 = kbeg; j0 < kstop; j0 += kStep) {
    stage_step(j0 + (kStages - 1) * kStep, (stage + kStages - 1) % kStages);
    cp_async_wait<kStages - 1>();  // this step's group is in
    Unit<T> kv[kKeys][CPL], vv[kKeys][CPL];
#pragma unroll
    for (int t = 0; t < kKeys; ++t) {
#pragma unroll
      for (int c = 0; c < CPL; ++c) {
        const uint4* slot =
            staged + (stage * kSlots + t * CPL + c) * kDecThreads;
        const uint4 kr = slot[tid];
        const uint4 vr = slot[kKeys * CPL * kDecThreads + tid];
        memcpy(&kv[t][c], &kr, 16);
        memcpy(&vv[t][c], &vr, 16);
      }
    }
    stage = (stage + 1) % kStages;
    // The step's P = kKeys x ROWS (key, row) pairs, pair t * ROWS + r:
    // this lane's partial dot products, then a reduce-scatter over the
    // key's LPK lanes, after which lane gl holds the whole dot products of
    // pairs own0 .. own0 + V - 1 (every lane of the key otherwise doing
    // the same masking and exponentials for every pair cost more than the
    // products).
    float d[P];
#pragma unroll
    for (int t = 0; t < kKeys; ++t) {
      float kf[EPL];
#pragma unroll
      for (int c = 0; c < CPL; ++c) {
#pragma unroll
        for (int e = 0; e < VPC; ++e) {
          kf[c * VPC + e] = cu::convert<float>(kv[t][c].v[e]);
        }
      }
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        float dot = 0;
#pragma unroll
        for (int e = 0; e < EPL; ++e) {
          dot = fma_m(q[r][e], kf[e], dot);
        }
        d[t * ROWS + r] = dot;
      }
    }
    reduce_scatter<P, LPK>(d, gl);
    // Scores of the owned pairs (the masks' rules), then every pair's
    // score gathered from its owner.
    float sc[P], own_s[V];
    {
      float* own = own_s;
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const int pair = own0 + i;
        const int t = pair / ROWS, r = pair % ROWS;
        const int rho = rg * ROWS + r;
        const int j = j0 + grp + G * t;
        int h, iq;
        row_of(p, hk, rho < nrows ? rho : 0, h, iq);
        own[i] = rho < nrows && j < kstop
                     ? masked_score<T, float>(p, b, h, iq, visible(p, iq), j,
                                              d[i])
                     : neg_inf<float>();  // no weight
      }
      gather<P, V, LPK>(own, sc, lane - gl);
    }
    // The online softmax over the step's keys: the row maxima in every
    // lane, each owner's exponentials (and the rescaling of its first
    // pair's row) gathered the same way.
    float mx[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      mx[r] = m[r];
#pragma unroll
      for (int t = 0; t < kKeys; ++t) {
        mx[r] = max_skip_nan(mx[r], sc[t * ROWS + r]);
      }
    }
    float pr[P], alpha[ROWS];
    {
      float own[V], own_alpha[V];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const int r = (own0 + i) % ROWS;
        float mr = mx[0], m_old = m[0];
#pragma unroll
        for (int rr = 1; rr < ROWS; ++rr) {  // (no runtime index: local memory)
          mr = r == rr ? mx[rr] : mr;
          m_old = r == rr ? m[rr] : m_old;
        }
        const float si = own_s[i];
        if (mr == neg_inf<float>()) {
          own[i] = si != si ? si : 0.0f;  // nothing finite seen yet
          own_alpha[i] = 1;
        } else {
          own[i] = exp_m(si - mr);
          own_alpha[i] = exp_m(m_old - mr);
        }
      }
      gather<P, V, LPK>(own, pr, lane - gl);
      gather_rows<ROWS, P, V, LPK>(own_alpha, alpha, lane - gl);
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      float sum = 0;
#pragma unroll
      for (int t = 0; t < kKeys; ++t) {
        sum += pr[t * ROWS + r];
      }
      l[r] = l[r] * alpha[r] + sum;
      m[r] = mx[r];
#pragma unroll
      for (int e = 0; e < EPL; ++e) {
        acc[r][e] *= alpha[r];
      }
    }
#pragma unroll
    for (int t = 0; t < kKeys; ++t) {
#pragma unroll
      for (int c = 0; c < CPL; ++c) {
#pragma unroll
        for (int e = 0; e < VPC; ++e) {
          const float vf = cu::convert<float>(vv[t][c].v[e]);
#pragma unroll
          for (int r = 0; r < ROWS; ++r) {
            acc[r][c * VPC + e] =
                fma_m(pr[t * ROWS + r], vf, acc[r][c * VPC + e]);
          }
        }
      }
    }
  }

  // Merge the G groups' states: weights exp(m_g - max) per row and group,
  // then every (row, feature) sums its groups. The accumulators reuse the
  // staging memory: every copy done and read first.
  cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    if (gl == 0) {
      sm_ml[grp][r][0] = m[r];
      sm_ml[grp][r][1] = l[r];
    }
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
#pragma unroll
      for (int e = 0; e < VPC; ++e) {
        sm_acc[grp][r][(gl + LPK * c) * VPC + e] = acc[r][c * VPC + e];
      }
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t < ROWS * G; t += blockDim.x) {
    const int r = t / G, g = t % G;
    float mx = neg_inf<float>();
    for (int g2 = 0; g2 < G; ++g2) {
      mx = max_skip_nan(mx, sm_ml[g2][r][0]);
    }
    const float mg = sm_ml[g][r][0];
    sm_w[r][g] = mg == neg_inf<float>() ? 0.0f : exp_m(mg - mx);
  }
  __syncthreads();
  for (int t = threadIdx.x; t < ROWS * p.D; t += blockDim.x) {
    // (Row data recomputed: indexing the register arrays by a runtime r
    // would move them to local memory.)
    const int r = t / p.D, d = t % p.D;
    const int rho = rg * ROWS + r;
    if (rho >= nrows) {
      continue;
    }
    int h, i;
    row_of(p, hk, rho, h, i);
    float mx = neg_inf<float>(), lsum = 0, a = 0;
    for (int g = 0; g < G; ++g) {
      mx = max_skip_nan(mx, sm_ml[g][r][0]);
      lsum += sm_ml[g][r][1] * sm_w[r][g];
      a += sm_acc[g][r][d] * sm_w[r][g];
    }
    const int64_t row = out_row(p, b, h, i);
    if (p.nsplit > 1) {
      const Partials parts = partials(p);
      const int64_t slot = row * p.nsplit + split;
      if (d == 0) {
        parts.ml[slot * 2] = mx;
        parts.ml[slot * 2 + 1] = lsum;
      }
      parts.acc[slot * p.D + d] = a;
      continue;
    }
    const float sink =
        p.has_sinks ? load<T, float>(p.sinks, h * p.sink_stride) : 0.0f;
    float total;
    const float w = finish_scale(p, mx, lsum, sink, total);
    static_cast<T*>(p.out)[row * p.D + d] = cu::convert<T>(a * w / total);
  }
}

// Merges the splits of each output row (a block per row). Each thread
// sums four features over every `groups`-th split (the block's threads
// cover the features kDecThreads / (D / 4) times), and the groups' sums
// meet in shared memory. The loads are few rounds, not chains: a thread's
// first kAhead splits' features go out before the weights exp(m_s - max)
// are known, and every thread reads two splits' (m, l) at once. The
// version before had one warp walk the (m, l) twice and the features
// wait for the weights: Nsight Compute on an H100 gave it 11.7 us for 32
// rows of 64 splits (of the 70 of a 32k-key decode), 6% achieved
// occupancy, stalled on those loads.
template <typename T>
__global__ void __launch_bounds__(kDecThreads) sdpa_decode_merge(SdpaParams p) {
  constexpr int kAhead = 16;
  static_assert(kMaxSplits == 2 * kDecThreads, "two splits' (m, l) a thread");
  __shared__ float w[kMaxSplits];
  __shared__ float red_max[kDecWarps], red_sum[kDecWarps];
  __shared__ float4 red[kDecThreads];
  const int64_t row = blockIdx.x;
  const Partials parts = partials(p);
  const float* mlr = parts.ml + row * p.nsplit * 2;
  // D is a multiple of 4 (whole 16-byte units) and at most 4 * kDecThreads.
  const int quads = p.D / 4;
  const int groups = kDecThreads / quads;
  const int qd = threadIdx.x % quads, sg = threadIdx.x / quads;
  const bool active = sg < groups;
  const float4* ar =
      reinterpret_cast<const float4*>(parts.acc + row * p.nsplit * p.D) + qd;
  float4 a[kAhead];
#pragma unroll
  for (int c = 0; c < kAhead; ++c) {
    const int sp = sg + c * groups;
    a[c] = active && sp < p.nsplit ? ar[int64_t{sp} * quads]
                                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  float ms[2], ls[2];
  float mx = neg_inf<float>();
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int sp = threadIdx.x + i * kDecThreads;
    ms[i] = neg_inf<float>();
    ls[i] = 0.0f;
    if (sp < p.nsplit) {
      const float2 v = reinterpret_cast<const float2*>(mlr)[sp];
      ms[i] = v.x;
      ls[i] = v.y;
    }
    mx = max_skip_nan(mx, ms[i]);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  mx = warp_max(mx);
  if (lane == 0) {
    red_max[warp] = mx;
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kDecWarps; ++i) {
    mx = max_skip_nan(mx, red_max[i]);
  }
  float lsum = 0.0f;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int sp = threadIdx.x + i * kDecThreads;
    const float wi = ms[i] == neg_inf<float>() ? 0.0f : exp_m(ms[i] - mx);
    if (sp < p.nsplit) {
      w[sp] = wi;
    }
    lsum += ls[i] * wi;
  }
  lsum = warp_sum(lsum);
  if (lane == 0) {
    red_sum[warp] = lsum;
  }
  __syncthreads();
  lsum = 0.0f;
#pragma unroll
  for (int i = 0; i < kDecWarps; ++i) {
    lsum += red_sum[i];
  }
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  auto add = [&](const float4& v, float ws) {
    acc.x += v.x * ws;
    acc.y += v.y * ws;
    acc.z += v.z * ws;
    acc.w += v.w * ws;
  };
#pragma unroll
  for (int c = 0; c < kAhead; ++c) {
    const int sp = sg + c * groups;
    if (active && sp < p.nsplit) {
      add(a[c], w[sp]);
    }
  }
  for (int sp = sg + kAhead * groups; active && sp < p.nsplit; sp += groups) {
    add(ar[int64_t{sp} * quads], w[sp]);
  }
  if (active) {
    red[sg * quads + qd] = acc;
  }
  __syncthreads();
  const int h = static_cast<int>((row / p.Lq) % p.Hq);
  const float sink =
      p.has_sinks ? load<T, float>(p.sinks, h * p.sink_stride) : 0.0f;
  float total;
  const float wf = finish_scale(p, mx, lsum, sink, total);
  const float* redf = reinterpret_cast<const float*>(red);
  for (int d = threadIdx.x; d < p.D; d += blockDim.x) {
    float sum = 0;
    for (int g = 0; g < groups; ++g) {
      sum += redf[g * p.D + d];
    }
    static_cast<T*>(p.out)[row * p.D + d] = cu::convert<T>(sum * wf / total);
  }
}

template <typename T, int LPK, int CPL, int ROWS>
void* kernel_for() {
  return reinterpret_cast<void*>(sdpa_decode_kernel<T, LPK, CPL, ROWS>);
}

// The kernel for p's shape, or null: LPK and CPL from the units per row,
// ROWS from the rows per KV head (1, up to 4, else 8 per block).
template <typename T>
void* pick_kernel(const SdpaParams& p, int& rows) {
  const int units = p.D * static_cast<int>(sizeof(T)) / 16;
  const int nrows = p.R * p.Lq;
  rows = nrows <= 1 ? 1 : (nrows <= 4 ? 4 : 8);
  auto by_rows = [&](auto k1, auto k4, auto k8) {
    return rows == 1 ? k1 : (rows == 4 ? k4 : k8);
  };
  if (units <= 8) {
    return by_rows(kernel_for<T, 8, 1, 1>(), kernel_for<T, 8, 1, 4>(),
                   kernel_for<T, 8, 1, 8>());
  }
  if (units <= 16) {
    return by_rows(kernel_for<T, 16, 1, 1>(), kernel_for<T, 16, 1, 4>(),
                   kernel_for<T, 16, 1, 8>());
  }
  if (units <= 32) {
    return by_rows(kernel_for<T, 32, 1, 1>(), kernel_for<T, 32, 1, 4>(),
                   kernel_for<T, 32, 1, 8>());
  }
  if constexpr (sizeof(T) == 4) {
    if (units <= 64) {
      return by_rows(kernel_for<T, 32, 2, 1>(), kernel_for<T, 32, 2, 4>(),
                     kernel_for<T, 32, 2, 8>());
    }
  }
  return nullptr;
}

}  // namespace

template <typename T>
bool decode_plan(SdpaParams& p) {
  if constexpr (!std::is_same_v<T, __half> &&
                !std::is_same_v<T, __nv_bfloat16> &&
                !std::is_same_v<T, float>) {
    return false;
  } else {
    if (p.Lq > 4 || p.R * p.Lq > 32 || p.D != p.Dv ||
        p.D * sizeof(T) % 16 != 0 || !p.vec) {
      return false;
    }
    int rows = 0;
    void* kernel = pick_kernel<T>(p, rows);
    if (kernel == nullptr) {
      return false;
    }
    p.row_blocks = (p.R * p.Lq + rows - 1) / rows;
    const int64_t blocks = int64_t{p.B} * p.Hkv * p.row_blocks;
    if (blocks > (int64_t{1} << 31) - 1) {
      return false;
    }
    // Splits of the keys: enough blocks for one full wave.
    const int per_sm = cu::blocks_per_sm(kernel, kDecThreads, 0);
    const int sms = cu::sm_count();
    if (per_sm < 1 || sms < 1) {
      return false;  // sdpa.cu's kernels run instead
    }
    const int64_t wave = int64_t{sms} * per_sm;
    int64_t nsplit = (wave + blocks - 1) / blocks;
    nsplit =
        std::min<int64_t>(nsplit, (p.Lk + kMinSplitKeys - 1) / kMinSplitKeys);
    nsplit = std::clamp<int64_t>(nsplit, 1, kMaxSplits);
    // Split lengths in whole steps of every block shape (at most 4 warps
    // x 4 keys x 2 keys a step).
    constexpr int kStep = 128;
    int64_t len = (p.Lk + nsplit - 1) / nsplit;
    len = (len + kStep - 1) / kStep * kStep;
    p.split_len = static_cast<int>(len);
    p.nsplit = static_cast<int>((p.Lk + len - 1) / len);
    return true;
  }
}

template <typename T>
void sdpa_decode(const SdpaParams& p, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, double>) {
    return;  // decode_plan<double> never takes a case
  } else {
    int rows = 0;
    void* kernel = pick_kernel<T>(p, rows);
    const int64_t blocks = int64_t{p.B} * p.Hkv * p.row_blocks;
    SdpaParams args = p;
    void* params[] = {&args};
    cudaLaunchKernel(kernel, dim3(static_cast<unsigned>(blocks), p.nsplit),
                     dim3(kDecThreads), params, 0, stream);
    if (p.nsplit > 1) {
      const int64_t rows_out = int64_t{p.B} * p.Hq * p.Lq;
      sdpa_decode_merge<T>
          <<<static_cast<unsigned>(rows_out), kDecThreads, 0, stream>>>(p);
    }
  }
}

template bool decode_plan<__half>(SdpaParams&);
template bool decode_plan<__nv_bfloat16>(SdpaParams&);
template bool decode_plan<float>(SdpaParams&);
template bool decode_plan<double>(SdpaParams&);
template void sdpa_decode<__half>(const SdpaParams&, cudaStream_t);
template void sdpa_decode<__nv_bfloat16>(const SdpaParams&, cudaStream_t);
template void sdpa_decode<float>(const SdpaParams&, cudaStream_t);
template void sdpa_decode<double>(const SdpaParams&, cudaStream_t);

}  // namespace fluxion::fast::sdpa_detail
