// Kernel of fast::NormVJP (the layer_norm / rms_norm backward pass; the
// math is in ops/fast_norm_vjp.cpp). Each row of x and g is read once from
// memory into a row buffer of the compute type (float, double for float64;
// the float32 and float64 rows are used in place), and every later sweep
// runs over that cached row: the statistics as the forward kernel computes
// them (fast_norm.cpp), the two row sums of dx, dx itself, and the row's
// terms of dweight and dbias. The rows are split into one chunk per pool
// thread; each chunk adds its rows' dweight/dbias terms into its own
// D-element partial sums (compute type, no sharing, no atomics), and the
// chunks' partials are added up at the end in chunk order, so results do
// not depend on which thread ran what.
#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>
#include <vector>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/row_math.h"
#include "fluxion/backend/cpu/thread_pool.h"
#include "fluxion/ops/fast.h"

namespace fluxion::fast {

namespace {

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Elements below which a kernel stays on one thread (fast_norm.cpp's).
constexpr int64_t kRowGrain = 1 << 15;

// sum(gw) and sum(gw * xhat) over a row, gw = g * w, xhat = (x - mu) *
// rstd: 8 independent accumulators each, as cpu::lane_sum (vectorizable,
// short dependency chains).
template <typename M>
void lane_dot_sums(const M* x, const M* g, const M* w, int64_t n, M mu, M rstd,
                   M& s_gw, M& s_gwx) {
  M a[8] = {}, b[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) {
      M xh = (x[i + l] - mu) * rstd;
      M gw = g[i + l] * w[i + l];
      a[l] += gw;
      b[l] += gw * xh;
    }
  }
  s_gw = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  s_gwx = ((b[0] + b[1]) + (b[2] + b[3])) + ((b[4] + b[5]) + (b[6] + b[7]));
  for (; i < n; ++i) {
    M xh = (x[i] - mu) * rstd;
    M gw = g[i] * w[i];
    s_gw += gw;
    s_gwx += gw * xh;
  }
}

// The operands of one call: rows of x and g (row-contiguous), dx, the
// weight as D compute-type values (ones without a weight: g * 1 is g
// exactly, and one loop serves both), and where dweight/dbias terms go.
template <typename T, typename M>
struct VjpRows {
  const T* x;
  const T* g;
  T* dx;
  const M* w;
  int64_t d;
  M eps;
  bool layer;
};

// Rows [lo, hi): dx, and each row's terms added into pw / pb (D values
// each, or null when that gradient is not an output).
template <typename T, typename M>
void vjp_rows(const VjpRows<T, M>& a, int64_t lo, int64_t hi, M* pw, M* pb) {
  const int64_t D = a.d;
  std::unique_ptr<M[]> xbuf, gbuf;
  if constexpr (!std::is_same_v<T, M>) {
    xbuf = std::make_unique_for_overwrite<M[]>(D);
    gbuf = std::make_unique_for_overwrite<M[]>(D);
  }
  const M n = static_cast<M>(D);
  for (int64_t r = lo; r < hi; ++r) {
    const T* xr = a.x + r * D;
    const T* gr = a.g + r * D;
    T* dr = a.dx + r * D;
    const M* x;
    const M* g;
    if constexpr (std::is_same_v<T, M>) {
      x = xr;
      g = gr;
    } else {
      for (int64_t i = 0; i < D; ++i) {
        xbuf[i] = static_cast<M>(xr[i]);
        gbuf[i] = static_cast<M>(gr[i]);
      }
      x = xbuf.get();
      g = gbuf.get();
    }
    // The forward's statistics, step for step (fast_norm.cpp).
    const M mu = a.layer ? cpu::lane_sum(x, D) / n : M(0);
    const M var = cpu::lane_sum_sq(x, D, mu) / n;
    const M rstd = M(1) / std::sqrt(var + a.eps);
    M s_gw, s_gwx;
    lane_dot_sums(x, g, a.w, D, mu, rstd, s_gw, s_gwx);
    const M mean_gw = a.layer ? s_gw / n : M(0);
    const M mean_gwx = s_gwx / n;
    for (int64_t i = 0; i < D; ++i) {
      M xh = (x[i] - mu) * rstd;
      M gw = g[i] * a.w[i];
      dr[i] = static_cast<T>(((gw - mean_gw) - xh * mean_gwx) * rstd);
    }
    if (pw) {
      for (int64_t i = 0; i < D; ++i) {
        pw[i] += g[i] * ((x[i] - mu) * rstd);
      }
    }
    if (pb) {
      for (int64_t i = 0; i < D; ++i) {
        pb[i] += g[i];
      }
    }
  }
}

template <typename T>
void norm_vjp_kernel(const std::vector<array>& inputs,
                     std::vector<array>& outputs, float eps, bool layer,
                     bool has_weight, bool has_bias) {
  using M = Acc<T>;
  for (auto& o : outputs) {
    o.set_data(std::max<size_t>(o.nbytes(), 1));
  }
  const int64_t D = inputs[0].shape(-1);
  if (D == 0) {
    return;  // every output is empty
  }
  array x = cpu::ensure_row_contiguous(inputs[0]);
  array g = cpu::ensure_row_contiguous(inputs.back());
  const int64_t rows = x.size() / D;
  std::vector<M> w(D, M(1));
  if (has_weight) {
    array wa = cpu::ensure_row_contiguous(inputs[1]);
    const T* wp = wa.data<T>();
    for (int64_t i = 0; i < D; ++i) {
      w[i] = static_cast<M>(wp[i]);
    }
  }
  VjpRows<T, M> a{x.data<T>(), g.data<T>(), outputs[0].data<T>(),
                  w.data(),    D,           static_cast<M>(eps),
                  layer};
  // One chunk of rows per pool thread (one chunk for small work: rows of
  // at least kRowGrain elements between them).
  const int64_t chunks = std::max<int64_t>(
      1, std::min<int64_t>({static_cast<int64_t>(cpu::num_threads()), rows,
                            rows * D / kRowGrain}));
  // Partial sums: chunk c's dweight terms at [c][0][D], dbias at [c][1][D].
  const int nsums = int{has_weight} + int{has_bias};
  std::vector<M> part(static_cast<size_t>(chunks * nsums * D), M(0));
  cpu::parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      M* base = part.data() + c * nsums * D;
      M* pw = has_weight ? base : nullptr;
      M* pb = has_bias ? base + (has_weight ? D : 0) : nullptr;
      vjp_rows(a, rows * c / chunks, rows * (c + 1) / chunks, pw, pb);
    }
  });
  // Chunk by chunk, in order (zeros when there are no rows).
  for (int k = 0; k < nsums; ++k) {
    T* out = outputs[1 + k].data<T>();
    for (int64_t i = 0; i < D; ++i) {
      M s = 0;
      for (int64_t c = 0; c < chunks; ++c) {
        s += part[(c * nsums + k) * D + i];
      }
      out[i] = static_cast<T>(s);
    }
  }
}

}  // namespace

void NormVJP::eval_cpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  dispatch<FloatTypes>(inputs[0].dtype(), layer_ ? "layer_norm" : "rms_norm",
                       [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         norm_vjp_kernel<T>(inputs, outputs, eps_, layer_,
                                            has_weight_, has_bias_);
                       });
}

}  // namespace fluxion::fast
