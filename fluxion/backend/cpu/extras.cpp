// Kernels of SearchSorted and Hadamard (AsStrided, View and Contiguous are
// views: backend/common/views.cpp).
#include "fluxion/ops/extras.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/common/layout.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

namespace {

// Offset of row `r` (an index over all but the last dimension).
int64_t row_offset(int64_t r, const Shape& shape, const Strides& st) {
  int64_t off = 0;
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    off += (r % shape[d]) * st[d];
    r /= shape[d];
  }
  return off;
}

}  // namespace

// Binary search per value, rows in parallel. NaNs order last (NumPy).
void SearchSorted::eval_cpu(const std::vector<array>& in,
                            std::vector<array>& out) {
  const array& a = in[0];
  const array& v = in[1];
  array& o = out[0];
  o.set_data(o.nbytes());
  if (o.size() == 0) {
    return;
  }
  const int nd = a.ndim();
  const int64_t n = a.shape(-1);
  const int64_t m = v.shape(-1);
  const int64_t rows = static_cast<int64_t>(o.size()) / m;
  const int64_t as = a.strides()[nd - 1];
  const int64_t vs = v.strides()[nd - 1];
  const bool right = right_;
  dispatch_all(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_complex_v<T>) {
      throw std::invalid_argument("[searchsorted] complex64 is not supported.");
    } else {
      using M = opmath_t<T>;
      // x sorts before y: NaN is the largest value.
      auto lt = [](M x, M y) {
        if constexpr (is_float_v<T>) {
          return x < y || (y != y && x == x);
        } else {
          return x < y;
        }
      };
      const T* ap = a.data<T>();
      const T* vp = v.data<T>();
      uint32_t* op = o.data<uint32_t>();
      cpu::parallel_for(
          rows, std::max<int64_t>(1, cpu::kElementwiseGrain / (m * 8 + 1)),
          [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
              const T* row = ap + row_offset(r, a.shape(), a.strides());
              const T* vals = vp + row_offset(r, v.shape(), v.strides());
              for (int64_t j = 0; j < m; ++j) {
                M x = static_cast<M>(vals[j * vs]);
                int64_t lo = 0, hi = n;
                while (lo < hi) {
                  int64_t mid = lo + (hi - lo) / 2;
                  M y = static_cast<M>(row[mid * as]);
                  // left: first y with !(y < x); right: first with x < y.
                  bool go_right = right ? !lt(x, y) : lt(y, x);
                  if (go_right) {
                    lo = mid + 1;
                  } else {
                    hi = mid;
                  }
                }
                op[r * m + j] = static_cast<uint32_t>(lo);
              }
            }
          });
    }
  });
}

// Each row of n = m * 2^k is a (m, 2^k) block: the fast Walsh-Hadamard
// transform of each of its m rows, then H_m (or its transpose) across them,
// in place in the output (half types through a float row).
void Hadamard::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  array& o = out[0];
  cpu::copy_to_row_contiguous(in[0], o);
  if (o.size() == 0) {
    return;
  }
  const int64_t n = o.shape(-1);
  const int m = detail::hadamard_factor(n);
  const int64_t p = n / m;
  const int64_t rows = static_cast<int64_t>(o.size()) / n;
  const double scale = scale_;
  // H_m as signs, transposed when asked: hm[i * m + l] multiplies block l
  // into block i.
  std::vector<int8_t> hm = detail::hadamard_matrix(m);
  if (transpose_) {
    for (int i = 0; i < m; ++i) {
      for (int l = i + 1; l < m; ++l) {
        std::swap(hm[i * m + l], hm[l * m + i]);
      }
    }
  }
  dispatch<FloatTypes>(o.dtype(), "hadamard_transform", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
    T* ptr = o.data<T>();
    auto fwht = [p](M* x) {
      for (int64_t h = 1; h < p; h *= 2) {
        for (int64_t i = 0; i < p; i += 2 * h) {
          M* lo = x + i;
          M* hi = x + i + h;
          for (int64_t j = 0; j < h; ++j) {
            M u = lo[j], w = hi[j];
            lo[j] = u + w;
            hi[j] = u - w;
          }
        }
      }
    };
    cpu::parallel_for(
        rows, std::max<int64_t>(1, cpu::kElementwiseGrain / (n * 4)),
        [&](int64_t b, int64_t e) {
          std::vector<M> buf(std::is_same_v<T, M> && m == 1 ? 0 : n);
          std::vector<M> mixed(m == 1 ? 0 : n);
          for (int64_t r = b; r < e; ++r) {
            T* row = ptr + r * n;
            M* x;
            if constexpr (std::is_same_v<T, M>) {
              x = m == 1 ? row : buf.data();
            } else {
              x = buf.data();
            }
            if (x != reinterpret_cast<M*>(row)) {
              for (int64_t j = 0; j < n; ++j) {
                x[j] = static_cast<M>(row[j]);
              }
            }
            for (int i = 0; i < m; ++i) {
              fwht(x + i * p);
            }
            const M* y = x;
            if (m > 1) {
              // mixed[i, :] = sum_l H[i, l] x[l, :]
              for (int i = 0; i < m; ++i) {
                M* dst = mixed.data() + i * p;
                std::fill(dst, dst + p, M(0));
                for (int l = 0; l < m; ++l) {
                  const M* src = x + l * p;
                  if (hm[i * m + l] > 0) {
                    for (int64_t j = 0; j < p; ++j) {
                      dst[j] += src[j];
                    }
                  } else {
                    for (int64_t j = 0; j < p; ++j) {
                      dst[j] -= src[j];
                    }
                  }
                }
              }
              y = mixed.data();
            }
            for (int64_t j = 0; j < n; ++j) {
              row[j] = static_cast<T>(y[j] * static_cast<M>(scale));
            }
          }
        });
  });
}

}  // namespace fluxion
