// The CPU kernel of Hadamard.
#include "fluxion/ops/hadamard.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/common/layout.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

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
