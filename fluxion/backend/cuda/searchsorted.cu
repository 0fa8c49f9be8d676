// SearchSorted on the GPU: one thread per value, a binary search of its
// row of `a`, with the CPU's rules (backend/cpu/searchsorted.cpp): NaN is
// the largest value, half types compare as float, "left" finds the first
// element not less than the value and "right" the first greater, the
// output is uint32 laid out row-contiguous over v's shape. Rows (every
// dimension but the last) index each operand through its own shape and
// strides, as the CPU's row_offset does (broadcast rows included).
#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/ops/searchsorted.h"

namespace fluxion {

namespace {

// The leading (row) dims of one operand.
struct RowDims {
  int nd = 0;
  int64_t shape[cu::kMaxDims];
  int64_t strides[cu::kMaxDims];
};

RowDims row_dims(const array& a) {
  RowDims r;
  r.nd = a.ndim() - 1;
  if (r.nd > cu::kMaxDims) {
    throw std::invalid_argument(
        "[searchsorted] arrays of more than " +
        std::to_string(cu::kMaxDims + 1) +
        " dimensions are not supported on the gpu yet.");
  }
  for (int d = 0; d < r.nd; ++d) {
    r.shape[d] = a.shape(d);
    r.strides[d] = a.strides()[d];
  }
  return r;
}

__device__ __forceinline__ int64_t row_offset(int64_t r, const RowDims& l) {
  int64_t off = 0;
  for (int d = l.nd - 1; d >= 0; --d) {
    off += (r % l.shape[d]) * l.strides[d];
    r /= l.shape[d];
  }
  return off;
}

// x sorts before y (NaN last).
template <typename M>
__device__ __forceinline__ bool sorts_before(M x, M y) {
  if constexpr (math::is_floating_point_v<M>) {
    return x < y || (y != y && x == x);
  } else {
    return x < y;
  }
}

template <typename T>
__global__ void search_kernel(const T* a, const T* v, uint32_t* out,
                              int64_t total, int64_t n, int64_t m, RowDims la,
                              RowDims lv, int64_t as, int64_t vs, bool right) {
  using M = cu::compute_t<T>;
  FLUXION_GRID_LOOP(e, total) {
    const int64_t r = e / m, j = e % m;
    const T* row = a + row_offset(r, la);
    const M x = cu::convert<M>(v[row_offset(r, lv) + j * vs]);
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      const M y = cu::convert<M>(row[mid * as]);
      const bool go_right = right ? !sorts_before(x, y) : sorts_before(y, x);
      if (go_right) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    out[e] = static_cast<uint32_t>(lo);
  }
}

}  // namespace

void SearchSorted::eval_gpu(const std::vector<array>& inputs,
                            std::vector<array>& outputs) {
  const array& a = inputs[0];
  const array& v = inputs[1];
  array& o = outputs[0];
  cu::alloc(o);
  const int64_t total = o.size();
  if (total == 0) {
    return;
  }
  const int nd = a.ndim();
  const int64_t n = a.shape(-1);
  const int64_t m = v.shape(-1);
  const RowDims la = row_dims(a), lv = row_dims(v);
  cudaStream_t s = cu::current_stream();
  cu::dispatch_gpu<RealTypes>(a.dtype(), "searchsorted", [&](auto tag) {
    using T = typename decltype(tag)::type;
    search_kernel<T><<<cu::blocks_for(total), cu::kThreads, 0, s>>>(
        cu::ptr<const T>(a), cu::ptr<const T>(v), cu::ptr<uint32_t>(o), total,
        n, m, la, lv, a.strides()[nd - 1], v.strides()[nd - 1], right_);
  });
  cu::check_launch("searchsorted");
}

}  // namespace fluxion
