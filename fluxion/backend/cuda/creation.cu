// arange on the GPU, with the CPU's value rule (backend/cpu/creation.cpp):
// integer ranges step by the truncated step from the truncated start, in
// 64 bits; floating ones compute each value from its index in double.
#include <cmath>

#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/ops/creation.h"

namespace fluxion {

namespace {

template <typename T>
__global__ void arange_int(T* y, int64_t n, int64_t first, int64_t inc) {
  FLUXION_GRID_LOOP(i, n) { y[i] = static_cast<T>(first + i * inc); }
}

template <typename T>
__global__ void arange_float(T* y, int64_t n, double start, double step) {
  FLUXION_GRID_LOOP(i, n) { y[i] = cu::convert<T>(start + i * step); }
}

}  // namespace

void Arange::eval_gpu(const std::vector<array>&, std::vector<array>& out) {
  array& o = out[0];
  cu::alloc(o);
  const int64_t n = o.size();
  double start = start_, step = step_;
  cudaStream_t s = cu::current_stream();
  cu::dispatch_gpu<RealTypes>(o.dtype(), "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      throw std::invalid_argument("[arange] bool is not supported.");
    } else {
      if (n == 0) {
        return;
      }
      if (std::isinf(step)) {
        // At most one element; 0 * inf would make it nan.
        arange_float<T><<<1, 1, 0, s>>>(cu::ptr<T>(o), 1, start, 0.0);
      } else if constexpr (math::is_integral_v<T>) {
        arange_int<T><<<cu::blocks_for(n, 4), cu::kThreads, 0, s>>>(
            cu::ptr<T>(o), n, static_cast<int64_t>(start),
            static_cast<int64_t>(step));
      } else {
        arange_float<T><<<cu::blocks_for(n, 4), cu::kThreads, 0, s>>>(
            cu::ptr<T>(o), n, start, step);
      }
    }
  });
  cu::check_launch("arange");
}

}  // namespace fluxion
