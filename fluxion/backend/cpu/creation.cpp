// CPU kernel of Arange (the other creation ops are composites).
#include "fluxion/ops/creation.h"

#include <cmath>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

namespace {

// Integers go through int64 so that values outside T's range wrap (as in
// NumPy) instead of being undefined behaviour.
template <typename T>
T convert(double v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<int64_t>(v));
  } else {
    return cast_value<T>(v);
  }
}

}  // namespace

void Arange::eval_cpu(const std::vector<array>&, std::vector<array>& out) {
  array& o = out[0];
  o.set_data(o.nbytes());
  double start = start_, step = step_;
  dispatch<AllTypes>(o.dtype(), "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      throw std::invalid_argument("[arange] bool is not supported.");
    } else {
      T* dst = o.data<T>();
      if (std::isinf(step)) {
        // At most one element; 0 * inf would make it nan.
        if (o.size() > 0) {
          dst[0] = convert<T>(start);
        }
        return;
      }
      if constexpr (std::is_integral_v<T>) {
        // Integer ranges step by the truncated step from the truncated start
        // (MLX: arange(0, 3, 0.2, int32) is all zeros), exactly in 64 bits.
        int64_t first = static_cast<int64_t>(start);
        int64_t inc = static_cast<int64_t>(step);
        cpu::parallel_for(o.size(), cpu::kElementwiseGrain,
                          [&](int64_t b, int64_t e) {
                            for (int64_t i = b; i < e; ++i) {
                              dst[i] = static_cast<T>(first + i * inc);
                            }
                          });
        return;
      }
      // Each value from its index (not a running sum): no drift, and chunks
      // are independent.
      cpu::parallel_for(o.size(), cpu::kElementwiseGrain,
                        [&](int64_t b, int64_t e) {
                          for (int64_t i = b; i < e; ++i) {
                            dst[i] = convert<T>(start + i * step);
                          }
                        });
    }
  });
}

}  // namespace fluxion
