// The CPU kernel of SearchSorted.
#include "fluxion/ops/searchsorted.h"

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

}  // namespace fluxion
