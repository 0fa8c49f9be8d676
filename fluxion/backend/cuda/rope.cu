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
  int l, d, dims, half;
  int work;  // items per row: half pairs, then d - dims copied features
  M scale, sign;
};

template <typename T, typename M>
__global__ void rope_kernel(const T* x, T* y, RopeArgs<M> a) {
  const int64_t n = a.rows * a.work;
  FLUXION_GRID_LOOP(idx, n) {
    const int64_t r = idx / a.work;
    const int j = static_cast<int>(idx - r * a.work);
    const T* xr = x + r * a.d;
    T* yr = y + r * a.d;
    if (j >= a.half) {
      const int k = a.dims + (j - a.half);
      yr[k] = xr[k];
      continue;
    }
    const int64_t g = a.offset_vector ? r / a.group_rows : 0;
    const M o = static_cast<M>(a.offset[g]);
    const M pos = (static_cast<M>(r % a.l) + o) * a.scale;
    const M inv = a.freqs
                      ? M(1) / a.freqs[j]
                      : static_cast<M>(exp(static_cast<double>(j) * a.coef));
    M s, c;
    sin_cos(pos * inv, &s, &c);
    s = a.sign * s;
    const int i1 = a.traditional ? 2 * j : j;
    const int i2 = a.traditional ? 2 * j + 1 : j + a.half;
    const M x1 = cu::convert<M>(xr[i1]), x2 = cu::convert<M>(xr[i2]);
    yr[i1] = cu::convert<T>(x1 * c - x2 * s);
    yr[i2] = cu::convert<T>(x1 * s + x2 * c);
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
    rope_kernel<T, M>
        <<<cu::blocks_for(a.rows * a.work, 4), cu::kThreads, 0,
           cu::current_stream()>>>(cu::ptr<const T>(x), cu::ptr<T>(out), a);
    cu::check_launch("rope");
  });
}

}  // namespace fluxion::fast
