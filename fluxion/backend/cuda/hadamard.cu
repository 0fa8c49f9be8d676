// Hadamard on the GPU, with the CPU's arithmetic (backend/cpu/hadamard.cpp)
// in M = float (double for float64): a row of n = m * p (p = 2^k, m in
// {1, 12, 20, 28}) is m blocks of p; each block takes the radix-2 fast
// Walsh-Hadamard transform, stage h = 1, 2, ..., p / 2 pairing (i, i + h);
// then output block i is sum over l of +-block l (H_m's signs, or H_m^T's
// for the vjp), accumulated from 0 in the order l = 0, 1, ...; then times
// the scale. Every value sees the same additions in the same order as on
// the CPU, so the results are the CPU's bit for bit.
//
// Rows of up to 48 KB of M values: a block per row, the row in shared
// memory for all the stages, H_m applied column by column (each thread
// holds a column's m values in registers) while writing the output.
// Longer rows: the stages inside 4096-element chunks in shared memory
// (one launch, reading the input), each later stage as one launch over
// global memory, then the H_m/scale/convert launch; the M values live in
// the output (float32, float64) or a float scratch (half types).
#include <algorithm>
#include <vector>

#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/ops/hadamard.h"

namespace fluxion {

namespace {

constexpr int kMaxFactor = 28;
constexpr size_t kRowSmemBytes = 48 * 1024;  // no opt-in needed
constexpr int kChunk = 4096;                 // elements of the chunk pass
constexpr int kChunkThreads = 512;

// H_m's signs: s[i * m + l] multiplies block l into output block i.
struct Signs {
  int8_t s[kMaxFactor * kMaxFactor];
};

// The radix-2 butterfly (lo, hi) <- (lo + hi, lo - hi).
template <typename M>
__device__ __forceinline__ void butterfly(M& lo, M& hi) {
  const M u = lo, w = hi;
  lo = u + w;
  hi = u - w;
}

// Radix-2 stages h = 1 .. `last` (last < span, powers of two) of the
// blocks of `span` (a power of two) elements of buf[0, n), in shared
// memory, by the block's threads. Three stages at a time where it can: a
// thread takes the 8 elements base + k * h (k < 8) and runs stages h, 2h
// and 4h on them in registers, the same butterflies as three radix-2
// passes (so the same results) with a third of the passes over shared
// memory and of the barriers; the stages left over go one at a time.
template <typename M>
__device__ __forceinline__ void fwht_stages(M* buf, int n, int log_span,
                                            int last) {
  int lh = 0;
  for (; (4 << lh) <= last; lh += 3) {  // stages 2^lh, 2^(lh+1), 2^(lh+2)
    const int h = 1 << lh, eighth_log = log_span - 3;
    for (int q = threadIdx.x; q < n / 8; q += blockDim.x) {
      const int blk = q >> eighth_log;
      const int j = q & ((1 << eighth_log) - 1);
      // Bits lh .. lh + 2 of the position in the block are k's.
      const int i = ((j >> lh) << (lh + 3)) | (j & (h - 1));
      M* b = buf + (blk << log_span) + i;
      M v[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        v[k] = b[k * h];
      }
#pragma unroll
      for (int bit = 1; bit < 8; bit <<= 1) {  // stages h, 2h, 4h
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          if ((k & bit) == 0) {
            butterfly(v[k], v[k + bit]);
          }
        }
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        b[k * h] = v[k];
      }
    }
    __syncthreads();
  }
  const int half_log = log_span - 1;
  for (int h = 1 << lh; h <= last; h <<= 1, ++lh) {
    for (int q = threadIdx.x; q < n / 2; q += blockDim.x) {
      const int blk = q >> half_log;
      const int j = q & ((1 << half_log) - 1);
      const int i = ((j >> lh) << (lh + 1)) | (j & (h - 1));
      const int lo = (blk << log_span) + i;
      butterfly(buf[lo], buf[lo + h]);
    }
    __syncthreads();
  }
}

// Output column j of a row: y[i * p + j] = (sum_l +-v[l]) * scale.
template <typename T, typename M, int MF>
__device__ __forceinline__ void mix_column(const M (&v)[MF], T* y, int64_t p,
                                           M scale, const Signs& sg) {
  if constexpr (MF == 1) {
    y[0] = cu::convert<T>(v[0] * scale);
  } else {
    // Fully unrolled: the signs are read at constant offsets of the
    // kernel's parameters (a variable index would copy them to local
    // memory).
#pragma unroll
    for (int i = 0; i < MF; ++i) {
      M acc = M(0);
#pragma unroll
      for (int l = 0; l < MF; ++l) {
        if (sg.s[i * MF + l] > 0) {
          acc += v[l];
        } else {
          acc -= v[l];
        }
      }
      y[i * p] = cu::convert<T>(acc * scale);
    }
  }
}

// A block per row; the row (n = MF * 2^log_p) in dynamic shared memory.
constexpr int kRowThreads = 512;
template <typename T, typename M, int MF>
__global__ void __launch_bounds__(kRowThreads)
    hadamard_rows(const T* x, T* y, int64_t rows, int log_p, M scale,
                  Signs sg) {
  extern __shared__ __align__(16) unsigned char smem[];
  M* buf = reinterpret_cast<M*>(smem);
  const int p = 1 << log_p, n = MF * p;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      buf[i] = cu::convert<M>(xr[i]);
    }
    __syncthreads();
    if (p > 1) {
      fwht_stages(buf, n, log_p, p / 2);
    }
    for (int j = threadIdx.x; j < p; j += blockDim.x) {
      M v[MF];
#pragma unroll
      for (int l = 0; l < MF; ++l) {
        v[l] = buf[l * p + j];
      }
      mix_column<T, M, MF>(v, yr + j, p, scale, sg);
    }
    __syncthreads();  // buf is the next row's
  }
}

// Long rows, first pass: chunks of 2^log_c consecutive elements (inside
// one block of p) take the stages h < 2^log_c in shared memory, read from
// x (converted to M) and written to s.
template <typename T, typename M>
__global__ void __launch_bounds__(kChunkThreads)
    hadamard_chunks(const T* x, M* s, int64_t chunks, int log_c) {
  FLUXION_SHARED_ARRAY(M, buf, kChunk);
  const int c = 1 << log_c;
  for (int64_t k = blockIdx.x; k < chunks; k += gridDim.x) {
    const T* src = x + k * c;
    M* dst = s + k * c;
    for (int i = threadIdx.x; i < c; i += blockDim.x) {
      buf[i] = cu::convert<M>(src[i]);
    }
    __syncthreads();
    fwht_stages(buf, c, log_c, c / 2);
    for (int i = threadIdx.x; i < c; i += blockDim.x) {
      dst[i] = buf[i];
    }
    __syncthreads();
  }
}

// Long rows: stage h = 2^lh of every block of p = 2^log_p in s (in place),
// a thread per pair.
template <typename M>
__global__ void hadamard_stage(M* s, int64_t pairs, int log_p, int lh) {
  const int64_t h = int64_t{1} << lh;
  FLUXION_GRID_LOOP(q, pairs) {
    const int64_t blk = q >> (log_p - 1);
    const int64_t j = q & ((int64_t{1} << (log_p - 1)) - 1);
    const int64_t i = ((j >> lh) << (lh + 1)) | (j & (h - 1));
    const int64_t lo = (blk << log_p) + i;
    const M u = s[lo], w = s[lo + h];
    s[lo] = u + w;
    s[lo + h] = u - w;
  }
}

// Long rows, last pass: a thread per column (row, j) of the transformed
// blocks in s; y may be s itself (each thread reads its column before
// writing it).
template <typename T, typename M, int MF>
__global__ void __launch_bounds__(cu::kThreads)
    hadamard_mix(const M* s, T* y, int64_t rows, int log_p, M scale, Signs sg) {
  const int64_t p = int64_t{1} << log_p;
  FLUXION_GRID_LOOP(c, rows * p) {
    const int64_t r = c >> log_p;
    const int64_t j = c & (p - 1);
    const int64_t base = r * MF * p + j;
    M v[MF];
#pragma unroll
    for (int l = 0; l < MF; ++l) {
      v[l] = s[base + l * p];
    }
    mix_column<T, M, MF>(v, y + base, p, scale, sg);
  }
}

unsigned grid_of(int64_t blocks) {
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 1 << 20));
}

// Whether rows of n values take the one-block kernel.
template <typename M>
bool fits_block(int64_t n) {
  return n * sizeof(M) <= kRowSmemBytes;
}

// The launches for rows of MF * 2^log_p elements from x into y; `s` holds
// the long rows' M values (y itself when T is M).
template <typename T, typename M, int MF>
void hadamard_launch(const T* xp, T* yp, M* s, int64_t rows, int log_p, M scale,
                     const Signs& sg, cudaStream_t st) {
  const int64_t p = int64_t{1} << log_p, n = MF * p;
  if (fits_block<M>(n)) {
    const int threads = static_cast<int>(
        std::clamp<int64_t>((n / 2 + 31) / 32 * 32, 32, kRowThreads));
    hadamard_rows<T, M, MF>
        <<<grid_of(rows), threads, static_cast<size_t>(n * sizeof(M)), st>>>(
            xp, yp, rows, log_p, scale, sg);
    cu::check_launch("hadamard_transform");
    return;
  }
  const int log_c = std::min(log_p, 12);  // 2^12 = kChunk
  static_assert(kChunk == 1 << 12);
  const int64_t total = rows * n;
  hadamard_chunks<T, M><<<grid_of(total >> log_c), kChunkThreads, 0, st>>>(
      xp, s, total >> log_c, log_c);
  cu::check_launch("hadamard_transform");
  for (int lh = log_c; lh < log_p; ++lh) {
    hadamard_stage<M><<<cu::blocks_for(total / 2, 4), cu::kThreads, 0, st>>>(
        s, total / 2, log_p, lh);
    cu::check_launch("hadamard_transform");
  }
  hadamard_mix<T, M, MF><<<cu::blocks_for(rows * p, 4), cu::kThreads, 0, st>>>(
      s, yp, rows, log_p, scale, sg);
  cu::check_launch("hadamard_transform");
}

template <typename T, typename M, int MF>
void hadamard_typed(const array& x, array& out, int64_t rows, int log_p,
                    M scale, const Signs& sg) {
  const T* xp = cu::ptr<const T>(x);
  T* yp = cu::ptr<T>(out);
  // The long rows' M values: the output itself, or a float scratch for
  // the half types.
  M* s = nullptr;
  if constexpr (std::is_same_v<T, M>) {
    s = yp;
  } else if (!fits_block<M>(MF * (int64_t{1} << log_p))) {
    array scratch(out.shape(), float32, nullptr, {});
    cu::alloc(scratch);
    s = cu::ptr<M>(scratch);
    cu::keep_alive(scratch);
  }
  hadamard_launch<T, M, MF>(xp, yp, s, rows, log_p, scale, sg,
                            cu::current_stream());
}

}  // namespace

void Hadamard::eval_gpu(const std::vector<array>& in, std::vector<array>& out) {
  array& o = out[0];
  cu::alloc(o);
  if (o.size() == 0) {
    return;
  }
  const array x = cu::contiguous(in[0]);
  const int64_t n = x.shape(-1);
  const int m = detail::hadamard_factor(n);
  const int64_t p = n / m;
  int log_p = 0;
  while ((int64_t{1} << log_p) < p) {
    ++log_p;
  }
  const int64_t rows = static_cast<int64_t>(x.size()) / n;
  Signs sg{};
  const std::vector<int8_t> hm = detail::hadamard_matrix(m);
  for (int i = 0; i < m; ++i) {
    for (int l = 0; l < m; ++l) {
      sg.s[i * m + l] = transpose_ ? hm[l * m + i] : hm[i * m + l];
    }
  }
  cu::dispatch_gpu<FloatTypes>(x.dtype(), "hadamard_transform", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = cu::compute_t<T>;
    const M scale = static_cast<M>(scale_);
    switch (m) {
      case 1:
        hadamard_typed<T, M, 1>(x, o, rows, log_p, scale, sg);
        break;
      case 12:
        hadamard_typed<T, M, 12>(x, o, rows, log_p, scale, sg);
        break;
      case 20:
        hadamard_typed<T, M, 20>(x, o, rows, log_p, scale, sg);
        break;
      default:  // 28: hadamard_factor allows no other
        hadamard_typed<T, M, 28>(x, o, rows, log_p, scale, sg);
        break;
    }
  });
}

}  // namespace fluxion
