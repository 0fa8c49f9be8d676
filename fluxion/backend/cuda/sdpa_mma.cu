// Scaled dot-product attention on tensor cores, for float16/bfloat16
// prefill with head dimension 64 or 128 (sdpa.cu runs every other case).
// FlashAttention's schedule as in sdpa.cu, with the two products on
// tensor cores (WMMA 16x16x16, float accumulators): a block of 4 warps
// takes 64 queries of one head, each warp 16 of them; tiles of 64 keys and
// values stream through shared memory. Per tile a warp computes its 16 x
// 64 scores S = Q K^T into shared memory, applies the masks' rules and the
// online softmax there (two lanes a row, the same rules as the SIMT
// kernel: sdpa.cuh), writes P in the input's type and adds P V to its
// output rows, kept in shared memory in float, after scaling them by the
// row's correction factor. P is rounded to the input type before P V, as
// in every flash kernel: within the type's precision of the CPU's float
// computation.
#include <mma.h>

#include "fluxion/backend/cuda/sdpa.cuh"

namespace fluxion::fast::sdpa_detail {

namespace {

constexpr int kQ = 64;       // queries per block
constexpr int kK = 64;       // keys per tile
constexpr int kWarpsMma = 4;  // 16 queries each

template <int D>
struct Smem {
  // Row pitches padded so WMMA's rows do not all start in one bank; each
  // region starts 32-byte aligned (WMMA's pointer rule).
  static constexpr int ld = D + 8;        // Q, K, V (input type)
  static constexpr int lds = kK + 4;      // S (float)
  static constexpr int ldp = kK + 8;      // P (input type)
  static constexpr int ldo = D + 4;       // O (float)
  static constexpr size_t q = 0;
  static constexpr size_t k = q + size_t{kQ} * ld * 2;
  static constexpr size_t v = k + size_t{kK} * ld * 2;
  static constexpr size_t s = v + size_t{kK} * ld * 2;
  static constexpr size_t p = s + size_t{kWarpsMma} * 16 * lds * 4;
  static constexpr size_t o = p + size_t{kWarpsMma} * 16 * ldp * 2;
  static constexpr size_t bytes = o + size_t{kWarpsMma} * 16 * ldo * 4;
};

// Rows [r0, r0 + 64) of a [.., L, D] operand (row stride `ls`, unit
// feature stride) into shared memory with pitch `ld`, zeros past `rows`;
// 16-byte accesses (the host checked the alignment).
template <typename T, int D>
__device__ __forceinline__ void load_tile(T* dst, const T* src, int64_t ls,
                                          int r0, int rows) {
  constexpr int kChunks = D * 2 / 16;  // 16-byte chunks per row
  for (int c = threadIdx.x; c < 64 * kChunks; c += blockDim.x) {
    const int r = c / kChunks, part = c % kChunks;
    int4 val = make_int4(0, 0, 0, 0);
    if (r0 + r < rows) {
      val = reinterpret_cast<const int4*>(src + (r0 + r) * ls)[part];
    }
    reinterpret_cast<int4*>(dst + r * Smem<D>::ld)[part] = val;
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kWarpsMma * 32)
    sdpa_mma_kernel(SdpaParams p) {
  using namespace nvcuda;
  using L = Smem<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem + L::q);
  T* ks = reinterpret_cast<T*>(smem + L::k);
  T* vs = reinterpret_cast<T*>(smem + L::v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* ss = reinterpret_cast<float*>(smem + L::s) + warp * 16 * L::lds;
  T* ps = reinterpret_cast<T*>(smem + L::p) + warp * 16 * L::ldp;
  float* os = reinterpret_cast<float*>(smem + L::o) + warp * 16 * L::ldo;

  // The longest causal blocks first: they finish last otherwise.
  const int qb = gridDim.x - 1 - blockIdx.x;
  const int bh = blockIdx.y;
  const int b = bh / p.Hq, h = bh % p.Hq, hk = h / p.R;
  const int i0 = qb * kQ;
  const T* q = static_cast<const T*>(p.q) + b * p.qs[0] + h * p.qs[1];
  const T* k = static_cast<const T*>(p.k) + b * p.ks[0] + hk * p.ks[1];
  const T* v = static_cast<const T*>(p.v) + b * p.vs[0] + hk * p.vs[1];
  load_tile<T, D>(qs, q, p.qs[2], i0, p.Lq);
  for (int e = lane; e < 16 * D; e += 32) {
    os[(e / D) * L::ldo + e % D] = 0.0f;
  }

  // Lanes 2r and 2r + 1 own row r of the warp's 16, columns [32 half, +32).
  const int r = lane / 2, half = lane % 2;
  const int i = i0 + warp * 16 + r;
  const bool live = i < p.Lq;
  const int vis = live ? visible(p, i) : 0;
  float m = neg_inf<float>(), l = 0.0f;
  const int kend = keys_for(p, i0, min(i0 + kQ, p.Lq));

  for (int j0 = 0; j0 < kend; j0 += kK) {
    __syncthreads();  // every warp is done with the last tile
    load_tile<T, D>(ks, k, p.ks[2], j0, p.Lk);
    load_tile<T, D>(vs, v, p.vs[2], j0, p.Lk);
    __syncthreads();

    // S = Q K^T for the warp's 16 rows.
    for (int c = 0; c < kK / 16; ++c) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> bt;
        wmma::load_matrix_sync(a, qs + warp * 16 * L::ld + kk * 16, L::ld);
        wmma::load_matrix_sync(bt, ks + c * 16 * L::ld + kk * 16, L::ld);
        wmma::mma_sync(acc, a, bt, acc);
      }
      wmma::store_matrix_sync(ss + c * 16, acc, L::lds, wmma::mem_row_major);
    }
    __syncwarp();

    // The online softmax of the row's 64 scores (two lanes a row).
    const int nk = min(kK, kend - j0);
    float sc[32];
    float tmax = neg_inf<float>();
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const int col = half * 32 + c;
      float x = neg_inf<float>();
      if (live && col < nk) {
        x = masked_score<T, float>(p, b, h, i, vis, j0 + col,
                                   ss[r * L::lds + col]);
      }
      sc[c] = x;
      tmax = max_skip_nan(tmax, x);
    }
    tmax = max_skip_nan(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
    const float mnew = max_skip_nan(m, tmax);
    float alpha = 1.0f, sum = 0.0f;
    const bool none = mnew == neg_inf<float>();
    if (!none) {
      alpha = expf(m - mnew);
    }
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const float pv = none ? (sc[c] != sc[c] ? sc[c] : 0.0f)
                            : expf(sc[c] - mnew);
      sum += pv;
      ps[r * L::ldp + half * 32 + c] = cu::convert<T>(pv);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * alpha + sum;
    m = mnew;
    for (int c = half * (D / 2); c < (half + 1) * (D / 2); ++c) {
      os[r * L::ldo + c] *= alpha;
    }
    __syncwarp();

    // O += P V.
    for (int c = 0; c < D / 16; ++c) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, os + c * 16, L::ldo, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kK / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> bv;
        wmma::load_matrix_sync(a, ps + kk * 16, L::ldp);
        wmma::load_matrix_sync(bv, vs + kk * 16 * L::ld + c * 16, L::ld);
        wmma::mma_sync(acc, a, bv, acc);
      }
      wmma::store_matrix_sync(os + c * 16, acc, L::ldo, wmma::mem_row_major);
    }
    __syncwarp();
  }

  if (!live) {
    return;
  }
  const float sink =
      p.has_sinks ? load<T, float>(p.sinks, h * p.sink_stride) : 0.0f;
  float total;
  const float w = finish_scale(p, m, l, sink, total);
  T* o = static_cast<T*>(p.out) +
         ((static_cast<int64_t>(b) * p.Hq + h) * p.Lq + i) * D;
  for (int c = half * (D / 2); c < (half + 1) * (D / 2); ++c) {
    o[c] = cu::convert<T>(os[r * L::ldo + c] * w / total);
  }
}

template <typename T, int D>
void launch(const SdpaParams& p, cudaStream_t stream) {
  auto kernel = sdpa_mma_kernel<T, D>;
  cu::check(cudaFuncSetAttribute(kernel,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(Smem<D>::bytes)),
            "scaled_dot_product_attention");
  dim3 grid((p.Lq + kQ - 1) / kQ, p.B * p.Hq);
  kernel<<<grid, kWarpsMma * 32, Smem<D>::bytes, stream>>>(p);
  cu::check_launch("scaled_dot_product_attention");
}

bool aligned16(const void* ptr, const int64_t* strides) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0 || strides[3] != 1) {
    return false;
  }
  for (int d = 0; d < 3; ++d) {
    if (strides[d] % 8 != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

template <typename T>
bool sdpa_mma(const SdpaParams& p, cudaStream_t stream) {
  if (p.D != p.Dv || (p.D != 64 && p.D != 128) || p.Lq < 16 ||
      int64_t{p.B} * p.Hq > 65535 || !aligned16(p.q, p.qs) ||
      !aligned16(p.k, p.ks) || !aligned16(p.v, p.vs)) {
    return false;
  }
  if (p.D == 64) {
    launch<T, 64>(p, stream);
  } else {
    launch<T, 128>(p, stream);
  }
  return true;
}

template bool sdpa_mma<__half>(const SdpaParams&, cudaStream_t);
template bool sdpa_mma<__nv_bfloat16>(const SdpaParams&, cudaStream_t);

}  // namespace fluxion::fast::sdpa_detail
