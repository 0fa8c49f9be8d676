// fast::RoPE on the GPU: one thread per rotated pair, with the CPU's
// arithmetic (backend/cpu/fast_norm.cpp) in M = float (double for
// float64): the inverse frequencies are the CPU's, exp(i * coef) in double
// rounded once to M (coef = -log(base) / half computed on the host as the
// CPU does; CUDA's and glibc's double exp agree to an ulp, which the
// rounding to float hides, while float64 may differ by that ulp; a
// host-made table would cost an upload per call), or 1 / freqs[i]; the
// angle is
// ((l + offset) * scale) * inv[i], rotated by (cos, sign * sin), sign -1
// for the inverse rotation (`forward` false, the vjp). The features past
// `dims` are copied by further threads of the same launch.
//
// x [outer, L, D] (row-contiguous; other layouts are copied first): row r
// of outer * L has position l = r % L and, with a vector offset (one per
// element of axis 0), offset[r / (rows per element of axis 0)].
//
// The rows that share a position and an offset (every head and batch
// element, or every head of one batch element) share their angles, so a
// thread computes one (position, frequency) angle's sine and cosine and
// rotates that pair in up to `chunk` of those rows, L rows apart (chunks
// sized so that about 2^22 threads run): computing them per element made
// the kernel compute-bound (Nsight Compute on an H100, 4 x 32
// x 4096 x 128 bfloat16: 83% SM throughput, DRAM at 41%, 183 us).
#include <algorithm>
#include <cmath>

#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/ops/fast.h"

namespace fluxion::fast {

namespace {

__device__ __forceinline__ void sin_cos(float t, float* s, float* c) {
  sincosf(t, s, c);
}
__device__ __forceinline__ void sin_cos(double t, double* s, double* c) {
  sincos(t, s, c);
}

template <typename M>
struct RopeArgs {
  const int32_t* offset;  // 1 value, or one per element of axis 0
  const M* freqs;         // null: exp(i * coef)
  double coef;
  bool offset_vector;
  bool traditional;
  int64_t rows;        // outer * L
  int64_t group_rows;  // rows per element of axis 0
  // Rows sharing one angle row's angles: angle row a's rows are
  // (a / l) * group_stride + (a % l) + t * l for t < reuse, taken `chunk`
  // at a time (nchunks chunks).
  int64_t reuse, group_stride, chunk, nchunks;
  int l, d, dims, half;
  int work;  // items per row: half pairs, then d - dims copied features
  M scale, sign;
};

// Inverse frequency j (1 / freqs[j] or the CPU's exp step).
template <typename M>
__device__ __forceinline__ M inv_freq(const RopeArgs<M>& a, int j) {
  return a.freqs ? M(1) / a.freqs[j]
                 : static_cast<M>(exp(static_cast<double>(j) * a.coef));
}

// Items (angle row a, chunk c, j) of [0, rows / reuse * nchunks * work),
// j fastest, index arithmetic in
// I (32 bits when the count allows: 64-bit division is a long
// subroutine). With `table`, the block first puts the half inverse
// frequencies in shared memory (one double exp per frequency and block,
// not per item).
template <typename T, typename M, typename I>
__global__ void rope_kernel(const T* x, T* y, RopeArgs<M> a, bool table) {
  extern __shared__ __align__(16) unsigned char smem[];
  M* tab = reinterpret_cast<M*>(smem);
  if (table) {
    for (int j = threadIdx.x; j < a.half; j += blockDim.x) {
      tab[j] = inv_freq(a, j);
    }
    __syncthreads();
  }
  const I n = static_cast<I>(a.rows / a.reuse * a.nchunks * a.work);
  const I work = static_cast<I>(a.work), l = static_cast<I>(a.l);
  const I nchunks = static_cast<I>(a.nchunks);
  const int64_t step = int64_t{a.l} * a.d;  // from one row to the next
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < n;
       idx += I(blockDim.x) * gridDim.x) {
    const I q = idx / work;
    const int j = static_cast<int>(idx - q * work);
    const I ar = q / nchunks;
    const int64_t t0 = int64_t(q - ar * nchunks) * a.chunk;
    const int64_t t1 = t0 + a.chunk < a.reuse ? t0 + a.chunk : a.reuse;
    const int64_t r0 = int64_t(ar / l) * a.group_stride + ar % l;
    const T* xr = x + r0 * a.d;
    T* yr = y + r0 * a.d;
    if (j >= a.half) {
      const int k = a.dims + (j - a.half);
      for (int64_t t = t0; t < t1; ++t) {
        yr[t * step + k] = xr[t * step + k];
      }
      continue;
    }
    const int64_t g = a.offset_vector ? r0 / a.group_rows : 0;
    const M o = static_cast<M>(a.offset[g]);
    const M pos = (static_cast<M>(r0 % a.l) + o) * a.scale;
    const M inv = table ? tab[j] : inv_freq(a, j);
    M s, c;
    sin_cos(pos * inv, &s, &c);
    s = a.sign * s;
    const int i1 = a.traditional ? 2 * j : j;
    const int i2 = a.traditional ? 2 * j + 1 : j + a.half;
    // kBatch rows' loads before their stores: y may be x (a donated
    // buffer), so the compiler keeps each store before the next row's
    // loads, and one row at a time left a thread one load pair in flight
    // (Nsight Compute: 86% of the stalls on memory, DRAM at 49%).
    constexpr int kBatch = 4;
    for (int64_t t = t0; t < t1; t += kBatch) {
      M x1[kBatch], x2[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int64_t e = (t + k) * step;
        if (t + k < t1) {
          x1[k] = cu::convert<M>(xr[e + i1]);
          x2[k] = cu::convert<M>(xr[e + i2]);
        }
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int64_t e = (t + k) * step;
        if (t + k < t1) {
          yr[e + i1] = cu::convert<T>(x1[k] * c - x2[k] * s);
          yr[e + i2] = cu::convert<T>(x1[k] * s + x2[k] * c);
        }
      }
    }
  }
}

}  // namespace

void RoPE::eval_gpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  array& out = outputs[0];
  cu::alloc(out);
  if (out.size() == 0) {
    return;
  }
  const array x = cu::contiguous(inputs[0]);
  const array off = cu::contiguous(inputs[1]);
  cu::dispatch_gpu<FloatTypes>(x.dtype(), "rope", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = cu::compute_t<T>;
    RopeArgs<M> a{};
    a.d = x.shape(-1);
    a.l = x.shape(-2);
    a.dims = dims_;
    a.half = dims_ / 2;
    a.work = a.half + (a.d - a.dims);
    a.rows = static_cast<int64_t>(x.size()) / a.d;
    a.offset_vector = off.size() != 1;
    a.group_rows = a.rows / x.shape(0);
    // The rows sharing a position and an offset: all of them (a scalar
    // offset), or those of one element of axis 0; else each row alone.
    a.reuse = 1;
    a.group_stride = a.l;
    if (!a.offset_vector && a.rows % a.l == 0) {
      a.reuse = a.rows / a.l;
      a.group_stride = a.rows;
    } else if (a.offset_vector && a.group_rows % a.l == 0) {
      a.reuse = a.group_rows / a.l;
      a.group_stride = a.group_rows;
    }
    // Chunks of the shared rows: at least about 2^22 threads.
    const int64_t pairs = a.rows * a.work;
    a.chunk = std::clamp<int64_t>(pairs >> 22, 1, a.reuse);
    a.nchunks = (a.reuse + a.chunk - 1) / a.chunk;
    a.offset = cu::ptr<const int32_t>(off);
    a.traditional = traditional_;
    a.scale = static_cast<M>(scale_);
    a.sign = forward_ ? M(1) : M(-1);
    // freqs (of dtype M, made so by fast::rope), inverted in the kernel,
    // or the CPU's exponent step.
    const Dtype mt = std::is_same_v<M, double> ? float64 : float32;
    array freqs = x;
    if (has_freqs_) {
      freqs = cu::contiguous(inputs[2]);
      if (freqs.dtype() != mt) {
        // Not made by fast::rope (which casts freqs to M): cast here.
        array cast(freqs.shape(), mt, nullptr, {});
        cu::alloc(cast);
        cu::copy_into(freqs, cast);
        cast.set_status(array::Status::available);
        cu::keep_alive(cast);
        freqs = cast;
      }
      a.freqs = cu::ptr<const M>(freqs);
    } else {
      a.coef = -std::log(double{base_}) / a.half;
    }
    // The frequency table in shared memory when it fits in 16 KB (dims
    // of up to 8192 in float).
    const int64_t n = a.rows / a.reuse * a.nchunks * a.work;
    const size_t tab_bytes = size_t(a.half) * sizeof(M);
    const bool table = tab_bytes <= 16 * 1024;
    const size_t smem = table ? tab_bytes : 0;
    const unsigned blocks = cu::blocks_for(n, 4);
    cudaStream_t st = cu::current_stream();
    const T* xp = cu::ptr<const T>(x);
    T* yp = cu::ptr<T>(out);
    if (n <= int64_t{UINT32_MAX} - int64_t{blocks} * cu::kThreads) {
      rope_kernel<T, M, uint32_t>
          <<<blocks, cu::kThreads, smem, st>>>(xp, yp, a, table);
    } else {
      rope_kernel<T, M, int64_t>
          <<<blocks, cu::kThreads, smem, st>>>(xp, yp, a, table);
    }
    cu::check_launch("rope");
  });
}

}  // namespace fluxion::fast
