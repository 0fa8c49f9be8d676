// Softmax over the last axis (ops/reduce.h): each row read once into a
// float (double for float64) buffer, its max taken, exp(x - max) computed
// with the vector exp where the CPU has one, summed with independent
// accumulators (row_math.h), and written once scaled by the sum's reciprocal. A nan in
// a row makes the row nan, as in the composite (its max is nan); rows are
// spread over the thread pool.
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/row_math.h"
#include "fluxion/backend/cpu/thread_pool.h"
#include "fluxion/ops/reduce.h"

namespace fluxion {

namespace {

template <typename T>
void softmax_rows(const array& in, array& out) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const array x = cpu::ensure_row_contiguous(in);
  out.set_data(out.nbytes());
  const int64_t n = x.shape(-1);
  if (out.size() == 0 || n == 0) {
    return;
  }
  const int64_t rows = x.size() / n;
  const T* src = x.data<T>();
  T* dst = out.data<T>();
  cpu::parallel_for(rows, std::max<int64_t>(1, (1 << 14) / n),
                    [&](int64_t r0, int64_t r1) {
    auto buf = std::make_unique_for_overwrite<C[]>(n);
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = src + r * n;
      const C m = cpu::load_row_max(xr, buf.get(), n);
      for (int64_t i = 0; i < n; ++i) {
        buf[i] -= m;
      }
      cpu::exp_in_place(buf.get(), n);
      const C scale = C(1) / cpu::lane_sum(buf.get(), n);
      T* yr = dst + r * n;
      for (int64_t j = 0; j < n; ++j) {
        yr[j] = static_cast<T>(buf[j] * scale);
      }
    }
  });
}

}  // namespace

void Softmax::eval_cpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  dispatch<FloatTypes>(inputs[0].dtype(), "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_rows<T>(inputs[0], outputs[0]);
  });
}

}  // namespace fluxion
