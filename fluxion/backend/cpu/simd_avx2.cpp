// Built with -mavx2 -mfma (see CMakeLists.txt); only called after a run-time
// check that the CPU has both. SLEEF's u10 functions are within 1 ulp.
#include <immintrin.h>
#include <sleef.h>

#include "fluxion/backend/cpu/simd.h"

namespace fluxion::cpu::simd {

namespace {

bool has_avx2() {
  static bool ok = __builtin_cpu_supports("avx2") &&
                   __builtin_cpu_supports("fma");
  return ok;
}

template <typename V>
void run_f32(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, V::apply(_mm256_loadu_ps(x + i)));
  }
  if (i < n) {
    // Pad the tail into a full vector so results match the body exactly.
    alignas(32) float buf[8] = {};
    for (int64_t j = i; j < n; ++j) {
      buf[j - i] = x[j];
    }
    _mm256_store_ps(buf, V::apply(_mm256_load_ps(buf)));
    for (int64_t j = i; j < n; ++j) {
      y[j] = buf[j - i];
    }
  }
}

template <typename V>
void run_f64(const double* x, double* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    _mm256_storeu_pd(y + i, V::apply(_mm256_loadu_pd(x + i)));
  }
  if (i < n) {
    alignas(32) double buf[4] = {};
    for (int64_t j = i; j < n; ++j) {
      buf[j - i] = x[j];
    }
    _mm256_store_pd(buf, V::apply(_mm256_load_pd(buf)));
    for (int64_t j = i; j < n; ++j) {
      y[j] = buf[j - i];
    }
  }
}

__m256 sqrt8(__m256 x) { return _mm256_sqrt_ps(x); }
__m256d sqrt4(__m256d x) { return _mm256_sqrt_pd(x); }
__m256 rsqrt8(__m256 x) {
  return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_sqrt_ps(x));
}
__m256d rsqrt4(__m256d x) {
  return _mm256_div_pd(_mm256_set1_pd(1.0), _mm256_sqrt_pd(x));
}
// 1 / (1 + exp(-x)): exp overflows to inf for very negative x, giving 0.
__m256 sigmoid8(__m256 x) {
  __m256 one = _mm256_set1_ps(1.0f);
  __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(one, _mm256_add_ps(one, e));
}
__m256d sigmoid4(__m256d x) {
  __m256d one = _mm256_set1_pd(1.0);
  __m256d e = Sleef_expd4_u10avx2(_mm256_sub_pd(_mm256_setzero_pd(), x));
  return _mm256_div_pd(one, _mm256_add_pd(one, e));
}

}  // namespace

#define FLUXION_SIMD_DEF(OP, F8, F4)                                \
  namespace {                                                       \
  struct OP##8 {                                                    \
    static __m256 apply(__m256 x) { return F8(x); }                 \
  };                                                                \
  struct OP##4 {                                                    \
    static __m256d apply(__m256d x) { return F4(x); }               \
  };                                                                \
  }                                                                 \
  template <>                                                       \
  F32Kernel f32<detail::OP>() {                                     \
    return has_avx2() ? &run_f32<OP##8> : nullptr;                  \
  }                                                                 \
  template <>                                                       \
  F64Kernel f64<detail::OP>() {                                     \
    return has_avx2() ? &run_f64<OP##4> : nullptr;                  \
  }

FLUXION_SIMD_DEF(Exp, Sleef_expf8_u10avx2, Sleef_expd4_u10avx2)
FLUXION_SIMD_DEF(Expm1, Sleef_expm1f8_u10avx2, Sleef_expm1d4_u10avx2)
FLUXION_SIMD_DEF(Log, Sleef_logf8_u10avx2, Sleef_logd4_u10avx2)
FLUXION_SIMD_DEF(Log1p, Sleef_log1pf8_u10avx2, Sleef_log1pd4_u10avx2)
FLUXION_SIMD_DEF(Log2, Sleef_log2f8_u10avx2, Sleef_log2d4_u10avx2)
FLUXION_SIMD_DEF(Log10, Sleef_log10f8_u10avx2, Sleef_log10d4_u10avx2)
FLUXION_SIMD_DEF(Sqrt, sqrt8, sqrt4)
FLUXION_SIMD_DEF(Rsqrt, rsqrt8, rsqrt4)
FLUXION_SIMD_DEF(Sin, Sleef_sinf8_u10avx2, Sleef_sind4_u10avx2)
FLUXION_SIMD_DEF(Cos, Sleef_cosf8_u10avx2, Sleef_cosd4_u10avx2)
FLUXION_SIMD_DEF(Tan, Sleef_tanf8_u10avx2, Sleef_tand4_u10avx2)
FLUXION_SIMD_DEF(ArcSin, Sleef_asinf8_u10avx2, Sleef_asind4_u10avx2)
FLUXION_SIMD_DEF(ArcCos, Sleef_acosf8_u10avx2, Sleef_acosd4_u10avx2)
FLUXION_SIMD_DEF(ArcTan, Sleef_atanf8_u10avx2, Sleef_atand4_u10avx2)
FLUXION_SIMD_DEF(Sinh, Sleef_sinhf8_u10avx2, Sleef_sinhd4_u10avx2)
FLUXION_SIMD_DEF(Cosh, Sleef_coshf8_u10avx2, Sleef_coshd4_u10avx2)
FLUXION_SIMD_DEF(Tanh, Sleef_tanhf8_u10avx2, Sleef_tanhd4_u10avx2)
FLUXION_SIMD_DEF(ArcSinh, Sleef_asinhf8_u10avx2, Sleef_asinhd4_u10avx2)
FLUXION_SIMD_DEF(ArcCosh, Sleef_acoshf8_u10avx2, Sleef_acoshd4_u10avx2)
FLUXION_SIMD_DEF(ArcTanh, Sleef_atanhf8_u10avx2, Sleef_atanhd4_u10avx2)
FLUXION_SIMD_DEF(Sigmoid, sigmoid8, sigmoid4)
FLUXION_SIMD_DEF(Erf, Sleef_erff8_u10avx2, Sleef_erfd4_u10avx2)
#undef FLUXION_SIMD_DEF

}  // namespace fluxion::cpu::simd
