// Kernels of the fused normalizations and rotary embedding. Rows of the
// last axis are independent: each is read once into registers/cache, its
// statistics computed in float (double for float64), and written once. Rows
// are spread over the thread pool.
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

// Elements below which a kernel stays on one thread.
constexpr int64_t kRowGrain = 1 << 15;

using cpu::lane_sum;
using cpu::lane_sum_sq;

// A parameter vector (weight or bias) as a dense array of T, or null.
struct Param {
  array keep;
  const void* ptr = nullptr;
};
Param param(const std::vector<array>& in, int i) {
  if (i < 0) {
    return {array(0.0f), nullptr};
  }
  auto a = cpu::ensure_row_contiguous(in[i]);
  return {a, a.data<void>()};
}

template <typename T>
void norm_kernel(const std::vector<array>& inputs, array& out, float eps,
                 bool layer, int wi, int bi) {
  using M = Acc<T>;
  array x = cpu::ensure_row_contiguous(inputs[0]);
  out.set_data(std::max<size_t>(out.nbytes(), 1));
  const int64_t D = x.shape(-1);
  if (D == 0 || x.size() == 0) {
    return;
  }
  const int64_t rows = x.size() / D;
  auto wp = param(inputs, wi), bp = param(inputs, bi);
  const T* w = static_cast<const T*>(wp.ptr);
  const T* b = static_cast<const T*>(bp.ptr);
  const T* src = x.data<T>();
  T* dst = out.data<T>();
  const M e = static_cast<M>(eps);
  cpu::parallel_for(rows, std::max<int64_t>(1, kRowGrain / D),
                    [&](int64_t lo, int64_t hi) {
                      std::unique_ptr<M[]> buf;
                      if constexpr (!std::is_same_v<T, M>) {
                        buf = std::make_unique_for_overwrite<M[]>(D);
                      }
                      for (int64_t r = lo; r < hi; ++r) {
                        const T* xr = src + r * D;
                        T* yr = dst + r * D;
                        const M* row;
                        if constexpr (std::is_same_v<T, M>) {
                          row = xr;
                        } else {
                          for (int64_t i = 0; i < D; ++i) {
                            buf[i] = static_cast<M>(xr[i]);
                          }
                          row = buf.get();
                        }
                        M mu = layer ? lane_sum(row, D) / D : M(0);
                        M var = lane_sum_sq(row, D, mu) / D;
                        M rstd = M(1) / std::sqrt(var + e);
                        for (int64_t i = 0; i < D; ++i) {
                          M y = (row[i] - mu) * rstd;
                          if (w) {
                            y *= static_cast<M>(w[i]);
                          }
                          if (b) {
                            y += static_cast<M>(b[i]);
                          }
                          yr[i] = static_cast<T>(y);
                        }
                      }
                    });
}

template <typename T>
void rope_kernel(const std::vector<array>& inputs, array& out, int dims,
                 bool traditional, float base, float scale, bool forward,
                 bool has_freqs) {
  using M = Acc<T>;
  array x = cpu::ensure_row_contiguous(inputs[0]);
  array off = cpu::ensure_row_contiguous(inputs[1]);
  out.set_data(std::max<size_t>(out.nbytes(), 1));
  if (x.size() == 0) {
    return;
  }
  const int64_t D = x.shape(-1), L = x.shape(-2), half = dims / 2;
  const int64_t outer = x.size() / (L * D);
  const int64_t groups = off.size() == 1 ? 1 : x.shape(0);
  const int64_t per_group = outer / groups;
  std::vector<M> inv(half);
  if (has_freqs) {
    array f = cpu::ensure_row_contiguous(inputs[2]);
    const M* fp = f.data<M>();
    for (int64_t i = 0; i < half; ++i) {
      inv[i] = M(1) / fp[i];
    }
  } else {
    // In double, rounded once: rope_composed computes the same values.
    const double coef = -std::log(double{base}) / half;
    for (int64_t i = 0; i < half; ++i) {
      inv[i] = static_cast<M>(std::exp(static_cast<double>(i) * coef));
    }
  }
  const M sign = forward ? M(1) : M(-1);
  const M sc = static_cast<M>(scale);
  const int32_t* op = off.data<int32_t>();
  const T* src = x.data<T>();
  T* dst = out.data<T>();
  std::vector<M> cs(L * half), sn(L * half);
  for (int64_t g = 0; g < groups; ++g) {
    // The rotation table of this group's positions.
    const M o = static_cast<M>(op[g]);
    cpu::parallel_for(L, std::max<int64_t>(1, 4096 / half),
                      [&](int64_t lo, int64_t hi) {
                        for (int64_t l = lo; l < hi; ++l) {
                          M pos = (static_cast<M>(l) + o) * sc;
                          for (int64_t i = 0; i < half; ++i) {
                            M t = pos * inv[i];
                            cs[l * half + i] = std::cos(t);
                            sn[l * half + i] = sign * std::sin(t);
                          }
                        }
                      });
    const int64_t first = g * per_group * L;
    const int64_t nrows = per_group * L;
    cpu::parallel_for(nrows, std::max<int64_t>(1, kRowGrain / D),
                      [&](int64_t lo, int64_t hi) {
                        for (int64_t r = first + lo; r < first + hi; ++r) {
                          const int64_t l = r % L;
                          const T* xr = src + r * D;
                          T* yr = dst + r * D;
                          const M* c = cs.data() + l * half;
                          const M* s = sn.data() + l * half;
                          const int64_t step = traditional ? 2 : 1;
                          const int64_t second = traditional ? 1 : half;
                          for (int64_t i = 0; i < half; ++i) {
                            const int64_t i1 = i * step, i2 = i * step + second;
                            M x1 = static_cast<M>(xr[i1]),
                              x2 = static_cast<M>(xr[i2]);
                            yr[i1] = static_cast<T>(x1 * c[i] - x2 * s[i]);
                            yr[i2] = static_cast<T>(x1 * s[i] + x2 * c[i]);
                          }
                          for (int64_t i = dims; i < D; ++i) {
                            yr[i] = xr[i];
                          }
                        }
                      });
  }
}

}  // namespace

void LayerNorm::eval_cpu(const std::vector<array>& inputs,
                         std::vector<array>& outputs) {
  int wi = has_weight_ ? 1 : -1;
  int bi = has_bias_ ? (has_weight_ ? 2 : 1) : -1;
  dispatch<FloatTypes>(inputs[0].dtype(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    norm_kernel<T>(inputs, outputs[0], eps_, true, wi, bi);
  });
}

void RMSNorm::eval_cpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  dispatch<FloatTypes>(inputs[0].dtype(), "rms_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    norm_kernel<T>(inputs, outputs[0], eps_, false, has_weight_ ? 1 : -1, -1);
  });
}

void RoPE::eval_cpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  dispatch<FloatTypes>(inputs[0].dtype(), "rope", [&](auto tag) {
    using T = typename decltype(tag)::type;
    rope_kernel<T>(inputs, outputs[0], dims_, traditional_, base_, scale_,
                   forward_, has_freqs_);
  });
}

}  // namespace fluxion::fast
