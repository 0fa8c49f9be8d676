// where (Select) on the GPU: the shared functor (ternary_ops.h) over
// elements moved by width (the value's bits are selected, never computed).
#include "fluxion/backend/cuda/elementwise.cuh"
#include "fluxion/ops/ternary.h"

namespace fluxion {

namespace {

template <typename T>
__global__ void select_flat(const bool* c, const T* x, const T* y, T* o,
                            int64_t n, bool cs, bool xs, bool ys) {
  FLUXION_GRID_LOOP(i, n) {
    o[i] = detail::Select{}(c[cs ? 0 : i], x[xs ? 0 : i], y[ys ? 0 : i]);
  }
}

template <typename T>
__global__ void select_strided(const bool* c, const T* x, const T* y, T* o,
                               int64_t n, cu::Layout l) {
  FLUXION_GRID_LOOP(i, n) {
    int64_t oc = 0, ox = 0, oy = 0, r = i;
    for (int d = l.ndim - 1; d >= 0; --d) {
      int64_t q = r % l.shape[d];
      r /= l.shape[d];
      oc += q * l.strides[0][d];
      ox += q * l.strides[1][d];
      oy += q * l.strides[2][d];
    }
    o[i] = detail::Select{}(c[oc], x[ox], y[oy]);
  }
}

}  // namespace

void Select::eval_gpu(const std::vector<array>& in, std::vector<array>& out) {
  const array& c = in[0];
  const array& x = in[1];
  const array& y = in[2];
  array& o = out[0];
  cu::alloc(o);
  const int64_t n = o.size();
  if (n == 0) {
    return;
  }
  // Dense (row-contiguous, full size) or broadcast-scalar operands take
  // the flat kernel; anything else the strided one.
  auto dense_or_scalar = [n](const array& a) {
    return (a.flags().row_contiguous &&
            static_cast<int64_t>(a.data_size()) == n) ||
           a.data_size() == 1;
  };
  cudaStream_t s = cu::current_stream();
  dispatch_bytes(o.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool* pc = cu::ptr<const bool>(c);
    const T* px = cu::ptr<const T>(x);
    const T* py = cu::ptr<const T>(y);
    T* po = cu::ptr<T>(o);
    if (dense_or_scalar(c) && dense_or_scalar(x) && dense_or_scalar(y)) {
      select_flat<T><<<cu::blocks_for(n, 4), cu::kThreads, 0, s>>>(
          pc, px, py, po, n, c.data_size() == 1, x.data_size() == 1,
          y.data_size() == 1);
    } else {
      cu::Layout l = cu::collapse(
          o.shape(), {c.strides(), x.strides(), y.strides()}, "where");
      select_strided<T><<<cu::blocks_for(n, 4), cu::kThreads, 0, s>>>(
          pc, px, py, po, n, l);
    }
  });
  cu::check_launch("where");
}

}  // namespace fluxion
