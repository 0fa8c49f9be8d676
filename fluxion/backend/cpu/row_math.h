// What the CPU's row kernels share (fast_norm.cpp, fast_norm_vjp.cpp,
// fast_sdpa.cpp, softmax.cpp): a row's sum (and sum of squares) and max
// with independent accumulators and exp of a row in place through the
// vector kernel.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "fluxion/backend/cpu/simd.h"

namespace fluxion::cpu {

// Sum with 8 independent accumulators: vectorizable without fast-math,
// and 8 short dependency chains instead of one long one (a single running
// sum was most of a row kernel's time).

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

// Copies n values of T into buf as M and returns their max; nan when any
// value is nan (as a running max that lets a nan stick). 8 independent
// maxima and a separate nan flag keep the loop vectorizable without
// fast-math (a branch on nan inside the running max is not).
template <typename T, typename M>
M load_row_max(const T* src, M* buf, int64_t n) {
  M lanes[8];
  for (auto& l : lanes) {
    l = -std::numeric_limits<M>::infinity();
  }
  bool nan = false;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) {
      const M v = static_cast<M>(src[i + l]);
      buf[i + l] = v;
      lanes[l] = v > lanes[l] ? v : lanes[l];
      nan |= v != v;
    }
  }
  M m = lanes[0];
  for (int l = 1; l < 8; ++l) {
    m = lanes[l] > m ? lanes[l] : m;
  }
  for (; i < n; ++i) {
    const M v = static_cast<M>(src[i]);
    buf[i] = v;
    m = v > m ? v : m;
    nan |= v != v;
  }
  return nan ? std::numeric_limits<M>::quiet_NaN() : m;
}

// Sum of (p[i] - shift)^2 with 8 accumulators as lane_sum (a row's variance
// about its mean).
template <typename M>
M lane_sum_sq(const M* p, int64_t n, M shift) {
  M a[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) {
      M d = p[i + l] - shift;
      a[l] += d * d;
    }
  }
  M s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  for (; i < n; ++i) {
    M d = p[i] - shift;
    s += d * d;
  }
  return s;
}

// exp of n values in place: the vector kernel where the CPU has one, else
// the scalar function.
template <typename C>
void exp_in_place(C* p, int64_t n) {
  static const auto k = [] {
    if constexpr (std::is_same_v<C, float>) {
      return simd::f32<::fluxion::detail::Exp>();
    } else {
      return simd::f64<::fluxion::detail::Exp>();
    }
  }();
  if (k) {
    k(p, p, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::exp(p[i]);
  }
}

}  // namespace fluxion::cpu
