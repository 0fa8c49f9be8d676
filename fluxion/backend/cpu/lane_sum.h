// Sums of a row with 8 independent accumulators: vectorizable without
// fast-math, and 8 short dependency chains instead of one long one (a
// single running sum was most of a row kernel's time). Shared by the row
// kernels (fast_norm.cpp, softmax.cpp).
#pragma once

#include <cstdint>

namespace fluxion::cpu {

template <typename M>
M lane_sum(const M* p, int64_t n) {
  M a[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) {
      a[l] += p[i + l];
    }
  }
  M s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  for (; i < n; ++i) {
    s += p[i];
  }
  return s;
}

}  // namespace fluxion::cpu
