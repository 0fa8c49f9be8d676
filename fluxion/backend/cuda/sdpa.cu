// Scaled dot-product attention on the GPU (fast::ScaledDotProductAttention)
// with FlashAttention's schedule: a block keeps a tile of query rows on
// chip while tiles of 32 keys and values stream through shared memory, the
// softmax is computed online (a running max m, sum l and unnormalized
// output per row), so the Lq x Lk scores never reach memory. Causal blocks
// stop at the last key their rows can see.
//
// Grouped-query attention: the rows of a block are (query head, query)
// pairs of one key/value head, so a tile of keys read once serves every
// query head of its group (decoding with 32 query heads on 8 KV heads
// reads K and V once, not four times).
//
// Few rows and many keys (decoding): the keys are split over several
// blocks (`nsplit`), each writing its partial (m, l, output) to a scratch
// array, and a second kernel merges the partial softmaxes. Decoding with
// at most 4 queries in float16/bfloat16/float32 and 16-byte rows takes
// sdpa_decode.cu's kernel (vectorized loads, many keys in flight) instead.
//
// Arithmetic is SIMT in float (double for float64), as the CPU computes:
// in the score step lane j of a warp owns key j of the tile, in the
// output step lane t owns features t, t + 32, ... The semantics at the
// edges are the CPU kernel's (backend/cpu/fast_sdpa.cpp): keys hidden by a
// boolean mask score the lowest finite value; causally hidden keys get no
// weight; a query that sees no key (causal, Lq > Lk) attends uniformly to
// all keys; a row of -inf (additive) scores is nan; the sink is one more
// logit without a value.
#include <algorithm>
#include <limits>

#include "fluxion/backend/cuda/sdpa.cuh"
#include "fluxion/backend/cuda/sdpa_cudnn.h"

namespace fluxion::fast {

namespace {

using namespace sdpa_detail;

constexpr int kWarps = 4;               // warps per block
constexpr int kRows = 4;                // rows per warp
constexpr int kBlockRows = kWarps * kRows;
constexpr int kTileK = 32;              // keys per tile: one per lane

// Query head and position of row `rho` of kv head group (rows are the
// group's R heads times Lq queries, head-major).
struct RowId {
  int h, i;
};
__device__ __forceinline__ RowId row_id(const SdpaParams& p, int hk,
                                        int rho) {
  return {hk * p.R + rho / p.Lq, rho % p.Lq};
}

// Rows [0, nk) of a tile of kTileK keys (features `d` of rows at `base`,
// strides `st`) into shared memory as M with pitch `pitch`, zeros past nk.
// `vec`: unit feature strides and 16-byte aligned rows, read in 16-byte
// packs (a 2-byte element read alone keeps too few bytes in flight).
template <typename T, typename M>
__device__ __forceinline__ void load_tile(M* dst, int pitch, const void* src,
                                          int64_t base, const int64_t* st,
                                          int d, int nk, bool vec) {
  const T* s = static_cast<const T*>(src) + base;
  if (vec) {
    constexpr int V = 16 / sizeof(T);
    const int chunks = d / V;
    for (int c = threadIdx.x; c < kTileK * chunks; c += blockDim.x) {
      const int jj = c / chunks, k = (c % chunks) * V;
      M* out = dst + jj * pitch + k;
      if (jj < nk) {
        const auto pk =
            *reinterpret_cast<const cu::Pack<T, V>*>(s + jj * st[2] + k);
#pragma unroll
        for (int i = 0; i < V; ++i) {
          out[i] = cu::convert<M>(pk.v[i]);
        }
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) {
          out[i] = M(0);
        }
      }
    }
    return;
  }
  for (int e = threadIdx.x; e < kTileK * d; e += blockDim.x) {
    const int jj = e / d, k = e % d;
    dst[jj * pitch + k] =
        jj < nk ? cu::convert<M>(s[jj * st[2] + k * st[3]]) : M(0);
  }
}

// The logsumexp of a row's scores (the sink's logit joining them) from its
// finished softmax state: mf + log(total) in finish_scale's terms.
template <typename M>
__device__ __forceinline__ M row_lse(const SdpaParams& p, M m, M sink,
                                     M total) {
  M mf = m;
  if (p.has_sinks) {
    mf = sink != sink ? sink : (mf < sink ? sink : mf);
  }
  return mf + log(total);
}

template <typename M>
__global__ void lse_fill(M* lse, int64_t n) {
  FLUXION_GRID_LOOP(i, n) { lse[i] = neg_inf<M>(); }
}

template <typename T, typename M, int DPL>
__global__ void __launch_bounds__(kWarps * 32)
    sdpa_forward(SdpaParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int D = p.D, Dv = p.Dv;
  M* ktile = reinterpret_cast<M*>(smem);       // [kTileK][D + 1]
  M* vtile = ktile + kTileK * (D + 1);         // [kTileK][Dv]
  M* qrows = vtile + kTileK * Dv;              // [kBlockRows][D]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  const int64_t block = blockIdx.x;
  const int rb = static_cast<int>(block % p.row_blocks);
  const int64_t bhk = block / p.row_blocks;
  const int b = static_cast<int>(bhk / p.Hkv);
  const int hk = static_cast<int>(bhk % p.Hkv);
  const int split = blockIdx.y;
  const int nrows = p.R * p.Lq;
  const int rho0 = rb * kBlockRows;

  // The block's query rows, in M.
  for (int e = threadIdx.x; e < kBlockRows * D; e += blockDim.x) {
    const int r = e / D, d = e % D;
    M val = 0;
    if (rho0 + r < nrows) {
      RowId id = row_id(p, hk, rho0 + r);
      val = load<T, M>(p.q, b * p.qs[0] + id.h * p.qs[1] + id.i * p.qs[2] +
                                d * p.qs[3]);
    }
    qrows[e] = val;
  }

  // The keys this block's rows may see: up to the furthest causal limit,
  // or all of them when a row sees none (it attends to every key).
  int kend = 0;
  for (int r = 0; r < kBlockRows && rho0 + r < nrows; ++r) {
    int vis = visible(p, row_id(p, hk, rho0 + r).i);
    kend = max(kend, vis == 0 ? p.Lk : vis);
  }
  const int kbeg = split * p.split_len;
  const int kstop = min(kend, kbeg + p.split_len);

  // This warp's rows.
  RowId ids[kRows];
  int vis[kRows];
  bool live[kRows];
  M m[kRows], l[kRows], acc[kRows][DPL];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int rho = rho0 + warp * kRows + r;
    live[r] = rho < nrows;
    ids[r] = row_id(p, hk, live[r] ? rho : 0);
    vis[r] = visible(p, ids[r].i);
    m[r] = neg_inf<M>();
    l[r] = 0;
#pragma unroll
    for (int t = 0; t < DPL; ++t) {
      acc[r][t] = 0;
    }
  }
  const int64_t kbase = b * p.ks[0] + hk * p.ks[1];
  const int64_t vbase = b * p.vs[0] + hk * p.vs[1];

  for (int j0 = kbeg; j0 < kstop; j0 += kTileK) {
    const int nk = min(kTileK, kstop - j0);
    __syncthreads();  // the last tile has been read by every warp
    load_tile<T, M>(ktile, D + 1, p.k, kbase + j0 * p.ks[2], p.ks, D, nk,
                    p.vec);
    load_tile<T, M>(vtile, Dv, p.v, vbase + j0 * p.vs[2], p.vs, Dv, nk,
                    p.vec);
    __syncthreads();

    // Scores: lane owns key j0 + lane, for the warp's rows at once (each
    // key feature read from shared memory once for kRows products).
    M s[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      s[r] = 0;
    }
    const M* krow = ktile + lane * (D + 1);
    const M* q0 = qrows + warp * kRows * D;
    for (int d = 0; d < D; ++d) {
      const M kd = krow[d];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        s[r] = fma_m(q0[r * D + d], kd, s[r]);
      }
    }
    const int j = j0 + lane;
    M pj[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const M sc = live[r] && lane < nk
                       ? masked_score<T, M>(p, b, ids[r].h, ids[r].i, vis[r],
                                            j, s[r])
                       : neg_inf<M>();  // no weight
      const M mnew = max_skip_nan(m[r], warp_max(sc));
      M alpha = 1;
      if (mnew == neg_inf<M>()) {
        pj[r] = sc != sc ? sc : M(0);  // nothing finite seen yet
      } else {
        alpha = exp_m(m[r] - mnew);
        pj[r] = exp_m(sc - mnew);
      }
      l[r] = l[r] * alpha + warp_sum(pj[r]);
      m[r] = mnew;
#pragma unroll
      for (int t = 0; t < DPL; ++t) {
        acc[r][t] *= alpha;
      }
    }
    // Output: lane owns features lane + 32 t.
    for (int jj = 0; jj < nk; ++jj) {
      M pb[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        pb[r] = __shfl_sync(0xffffffffu, pj[r], jj);
      }
      const M* vrow = vtile + jj * Dv;
#pragma unroll
      for (int t = 0; t < DPL; ++t) {
        const int d = lane + 32 * t;
        const M vd = d < Dv ? vrow[d] : M(0);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          acc[r][t] = fma_m(pb[r], vd, acc[r][t]);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (!live[r]) {
      continue;
    }
    const int64_t row =
        (static_cast<int64_t>(b) * p.Hq + ids[r].h) * p.Lq + ids[r].i;
    if (p.nsplit > 1) {
      M* part = static_cast<M*>(p.part) +
                (static_cast<int64_t>(split) * p.B * p.Hq * p.Lq + row) *
                    (Dv + 2);
      if (lane == 0) {
        part[0] = m[r];
        part[1] = l[r];
      }
#pragma unroll
      for (int t = 0; t < DPL; ++t) {
        const int d = lane + 32 * t;
        if (d < Dv) {
          part[2 + d] = acc[r][t];
        }
      }
      continue;
    }
    M sink = p.has_sinks ? load<T, M>(p.sinks, ids[r].h * p.sink_stride) : 0;
    M total;
    const M w = finish_scale(p, m[r], l[r], sink, total);
    if (p.lse && lane == 0) {
      static_cast<M*>(p.lse)[row] = row_lse(p, m[r], sink, total);
    }
    T* o = static_cast<T*>(p.out) + row * Dv;
#pragma unroll
    for (int t = 0; t < DPL; ++t) {
      const int d = lane + 32 * t;
      if (d < Dv) {
        o[d] = cu::convert<T>(acc[r][t] * w / total);
      }
    }
  }
}

// Merges the splits' partial softmaxes of each row: one thread per output
// element (the few rows of decoding).
template <typename T, typename M>
__global__ void sdpa_merge(SdpaParams p) {
  const int64_t rows = int64_t{p.B} * p.Hq * p.Lq;
  FLUXION_GRID_LOOP(e, rows * p.Dv) {
    const int64_t row = e / p.Dv;
    const int d = static_cast<int>(e % p.Dv);
    const M* part = static_cast<const M*>(p.part);
    const int64_t stride = rows * (p.Dv + 2);
    M m = neg_inf<M>();
    for (int s = 0; s < p.nsplit; ++s) {
      m = max_skip_nan(m, part[s * stride + row * (p.Dv + 2)]);
    }
    M l = 0, acc = 0;
    for (int s = 0; s < p.nsplit; ++s) {
      const M* ps = part + s * stride + row * (p.Dv + 2);
      const M w = ps[0] == neg_inf<M>() ? M(0) : exp_m(ps[0] - m);
      l += ps[1] * w;
      acc += ps[2 + d] * w;
    }
    const int h = static_cast<int>((row / p.Lq) % p.Hq);
    M sink = p.has_sinks ? load<T, M>(p.sinks, h * p.sink_stride) : 0;
    M total;
    const M w = finish_scale(p, m, l, sink, total);
    if (p.lse && d == 0) {
      static_cast<M*>(p.lse)[row] = row_lse(p, m, sink, total);
    }
    static_cast<T*>(p.out)[e] = cu::convert<T>(acc * w / total);
  }
}

template <typename T>
void sdpa_gpu(const std::vector<array>& in, array& out, array* lse,
              float scale, bool causal,
              ScaledDotProductAttention::MaskKind kind, bool has_sinks) {
  using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const array& q = in[0];
  const array& k = in[1];
  const array& v = in[2];
  SdpaParams p{};
  p.B = q.shape(0);
  p.Hq = q.shape(1);
  p.Lq = q.shape(2);
  p.D = q.shape(3);
  p.Hkv = k.shape(1);
  p.Lk = k.shape(2);
  p.Dv = v.shape(3);
  p.R = p.Hq / p.Hkv;
  p.causal = causal;
  p.mask_kind = kind;
  p.has_sinks = has_sinks;
  p.scale = scale;
  cudaStream_t stream = cu::current_stream();
  if (lse) {
    cu::alloc(*lse);
    p.lse = cu::ptr(*lse);
  }
  if (p.Lk == 0) {  // an empty softmax: the product with no keys is zero
    cu::check(cudaMemsetAsync(cu::ptr(out), 0, out.nbytes(), stream),
              "scaled_dot_product_attention");
    if (lse) {  // log(0)
      lse_fill<M><<<cu::blocks_for(lse->size()), cu::kThreads, 0, stream>>>(
          static_cast<M*>(p.lse), static_cast<int64_t>(lse->size()));
      cu::check_launch("scaled_dot_product_attention");
    }
    return;
  }
  const int dpl = (p.Dv + 31) / 32;
  if (dpl > 16) {
    throw std::invalid_argument(
        "[scaled_dot_product_attention] value head dimension " +
        std::to_string(p.Dv) + " > 512 is not supported on the gpu yet.");
  }
  auto strides4 = [](const array& a, int64_t* s) {
    for (int i = 0; i < 4; ++i) {
      s[i] = a.strides()[i];
    }
  };
  p.q = cu::ptr(q);
  p.k = cu::ptr(k);
  p.v = cu::ptr(v);
  strides4(q, p.qs);
  strides4(k, p.ks);
  strides4(v, p.vs);
  if (kind != ScaledDotProductAttention::None) {
    p.mask = cu::ptr(in[3]);
    strides4(in[3], p.ms);
  }
  if (has_sinks) {
    p.sinks = cu::ptr(in.back());
    p.sink_stride = in.back().strides()[0];
  }
  p.out = cu::ptr(out);
  {
    constexpr int V = 16 / sizeof(T);
    auto packable = [](const void* ptr, const int64_t* st) {
      return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && st[3] == 1 &&
             st[0] % V == 0 && st[1] % V == 0 && st[2] % V == 0;
    };
    p.vec = p.D % V == 0 && p.Dv % V == 0 && packable(p.k, p.ks) &&
            packable(p.v, p.vs);
  }
  // The decode kernel writes no logsumexp (asked for only while a vjp
  // traces): the SIMT kernel below does.
  if (!p.lse && decode_plan<T>(p)) {
    std::shared_ptr<Data> part;
    if (p.nsplit > 1) {
      // + 4: the outputs start on a 16-byte boundary (sdpa_decode.cu).
      const int64_t n =
          int64_t{p.nsplit} * p.B * p.Hq * p.Lq * (p.Dv + 2) + 4;
      part = std::make_shared<Data>(static_cast<size_t>(n) * sizeof(float),
                                    Device{Device::gpu});
      cu::keep_alive(part);
      p.part = part->ptr();
    }
    sdpa_decode<T>(p, stream);
    cu::check_launch("scaled_dot_product_attention");
    return;
  }
  if constexpr (std::is_same_v<T, __half> ||
                std::is_same_v<T, __nv_bfloat16>) {
    // The tensor-core kernel writes no logsumexp: the SIMT one does.
    if (!p.lse && sdpa_mma<T>(p, stream)) {
      return;
    }
  }
  p.row_blocks = (p.R * p.Lq + kBlockRows - 1) / kBlockRows;
  const int64_t blocks = int64_t{p.B} * p.Hkv * p.row_blocks;

  // Split the keys when the blocks would leave most of the GPU idle.
  int sms = 0, dev = 0;
  cu::check(cudaGetDevice(&dev), "scaled_dot_product_attention");
  cu::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev),
            "scaled_dot_product_attention");
  int nsplit = 1;
  if (blocks < 2 * sms && p.Lk >= 4 * kTileK) {
    nsplit = static_cast<int>(std::min<int64_t>(
        (4 * sms + blocks - 1) / blocks, (p.Lk + 255) / 256));
    nsplit = std::max(nsplit, 1);
  }
  int split_len = (p.Lk + nsplit - 1) / nsplit;
  split_len = (split_len + kTileK - 1) / kTileK * kTileK;
  nsplit = (p.Lk + split_len - 1) / split_len;
  p.nsplit = nsplit;
  p.split_len = split_len;
  std::shared_ptr<Data> part;
  if (nsplit > 1) {
    const int64_t n = int64_t{nsplit} * p.B * p.Hq * p.Lq * (p.Dv + 2);
    part = std::make_shared<Data>(static_cast<size_t>(n) * sizeof(M),
                                  Device{Device::gpu});
    cu::keep_alive(part);
    p.part = part->ptr();
  }

  const size_t smem =
      sizeof(M) * (size_t{kTileK} * (p.D + 1) + size_t{kTileK} * p.Dv +
                   size_t{kBlockRows} * p.D);
  int smem_max = 0;
  cu::check(cudaDeviceGetAttribute(&smem_max,
                                   cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                   dev),
            "scaled_dot_product_attention");
  if (smem > static_cast<size_t>(smem_max)) {
    throw std::invalid_argument(
        "[scaled_dot_product_attention] head dimensions " +
        std::to_string(p.D) + " and " + std::to_string(p.Dv) + " in " +
        dtype_name(out.dtype()) + " are not supported on the gpu yet.");
  }
  auto launch = [&](auto kernel) {
    if (smem > 48 * 1024) {
      cu::check(cudaFuncSetAttribute(kernel,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)),
                "scaled_dot_product_attention");
    }
    kernel<<<dim3(static_cast<unsigned>(blocks), nsplit), kWarps * 32, smem,
             stream>>>(p);
  };
  switch (dpl <= 1 ? 1 : dpl <= 2 ? 2 : dpl <= 4 ? 4 : dpl <= 8 ? 8 : 16) {
    case 1: launch(sdpa_forward<T, M, 1>); break;
    case 2: launch(sdpa_forward<T, M, 2>); break;
    case 4: launch(sdpa_forward<T, M, 4>); break;
    case 8: launch(sdpa_forward<T, M, 8>); break;
    default: launch(sdpa_forward<T, M, 16>); break;
  }
  cu::check_launch("scaled_dot_product_attention");
  if (nsplit > 1) {
    const int64_t n = int64_t{p.B} * p.Hq * p.Lq * p.Dv;
    sdpa_merge<T, M><<<cu::blocks_for(n), cu::kThreads, 0, stream>>>(p);
    cu::check_launch("scaled_dot_product_attention");
  }
}

}  // namespace

// cuDNN's fused kernel (sdpa_cudnn.cpp) where it takes the inputs, else
// the kernels above.
void ScaledDotProductAttention::eval_gpu(const std::vector<array>& inputs,
                                         std::vector<array>& outputs) {
  if (mask_ == None && !has_sinks_ &&
      cu::cudnn_sdpa::forward(inputs, outputs, scale_, causal_)) {
    return;
  }
  array& out = outputs[0];
  array* lse = outputs.size() > 1 ? &outputs[1] : nullptr;
  cu::alloc(out);
  if (out.size() == 0) {
    if (lse && lse->size() > 0) {  // no value features: not computed
      cu::alloc(*lse);
      cu::check(cudaMemsetAsync(cu::ptr(*lse), 0xff, lse->nbytes(),
                                cu::current_stream()),
                "scaled_dot_product_attention");
    }
    return;
  }
  cu::dispatch_gpu<FloatTypes>(
      out.dtype(), "scaled_dot_product_attention", [&](auto tag) {
        using T = typename decltype(tag)::type;
        sdpa_gpu<T>(inputs, out, lse, scale_, causal_, mask_, has_sinks_);
      });
}

}  // namespace fluxion::fast
