// Built with -mavx2 -mfma (see CMakeLists.txt); only called after a run-time
// check that the CPU has both. The vector math comes from SLEEF (u10: within
// 1 ulp) or, where SLEEF is absent, glibc's libmvec (AVX2 variants, within
// 4 ulp; special values go through libm), chosen at configure time
// (FLUXION_VECTOR_MATH). With neither, every kernel here reports nullptr and
// the scalar functors run.
#include <immintrin.h>

#include <cmath>

#include "fluxion/backend/cpu/simd.h"

// The ops whose vector versions come from the math library: (primitive
// functor, libm name). Every list below is generated from this one.
#define FX_LIBRARY_OPS(X)                                                     \
  X(Exp, exp)                                                                 \
  X(Expm1, expm1)                                                             \
  X(Log, log) X(Log1p, log1p) X(Log2, log2) X(Log10, log10) X(Sin, sin)       \
      X(Cos, cos) X(Tan, tan) X(ArcSin, asin) X(ArcCos, acos) X(ArcTan, atan) \
          X(Tanh, tanh) X(ArcSinh, asinh) X(ArcCosh, acosh) X(ArcTanh, atanh) \
              X(Erf, erf)

#if defined(FLUXION_VMATH_SLEEF)
#include <sleef.h>
#define FX_V8(f) Sleef_##f##f8_u10avx2
#define FX_V4(f) Sleef_##f##d4_u10avx2
#define FX_HAVE_VMATH 1
#elif defined(FLUXION_VMATH_LIBMVEC)
// libmvec's x86-64 vector ABI names: _ZGV d(AVX2) N<lanes> v(vector arg).
#define FX_LIBMVEC(OP, name)                    \
  extern "C" __m256 _ZGVdN8v_##name##f(__m256); \
  extern "C" __m256d _ZGVdN4v_##name(__m256d);
FX_LIBRARY_OPS(FX_LIBMVEC)
FX_LIBMVEC(Sinh, sinh)
FX_LIBMVEC(Cosh, cosh)
#undef FX_LIBMVEC
#define FX_V8(name) _ZGVdN8v_##name##f
#define FX_V4(name) _ZGVdN4v_##name
#define FX_HAVE_VMATH 1
#else
#define FX_HAVE_VMATH 0
#endif

namespace fluxion::cpu::simd {

#if FX_HAVE_VMATH
namespace {

bool has_avx2() {
  static bool ok =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok && enabled();
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
  __m256 e = FX_V8(exp)(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(one, _mm256_add_ps(one, e));
}
__m256d sigmoid4(__m256d x) {
  __m256d one = _mm256_set1_pd(1.0);
  __m256d e = FX_V4(exp)(_mm256_sub_pd(_mm256_setzero_pd(), x));
  return _mm256_div_pd(one, _mm256_add_pd(one, e));
}

// sinh and cosh: SLEEF's u10 versions are only accurate up to |x| = 88.5
// (float) and 709 (double) and return inf beyond, although the results
// stay finite up to 89.4 and 710.5 (found by the fuzzer: sinh(89.24f) gave
// inf, not 2.85e38). Past those bounds exp(-|x|) is negligible and
// sinh(x) = sign(x) * e * (e / 2) with e = exp(|x| / 2), which reaches
// FLT_MAX / DBL_MAX without overflowing early.
template <bool kSinh>
__m256 sinhcosh8(__m256 x) {
  __m256 y = kSinh ? FX_V8(sinh)(x) : FX_V8(cosh)(x);
  __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 ax = _mm256_andnot_ps(sign, x);
  __m256 large = _mm256_cmp_ps(ax, _mm256_set1_ps(88.0f), _CMP_GT_OQ);
  if (_mm256_movemask_ps(large) == 0) {
    return y;
  }
  __m256 e = FX_V8(exp)(_mm256_mul_ps(ax, _mm256_set1_ps(0.5f)));
  __m256 big = _mm256_mul_ps(_mm256_mul_ps(e, _mm256_set1_ps(0.5f)), e);
  if (kSinh) {
    big = _mm256_or_ps(big, _mm256_and_ps(x, sign));
  }
  return _mm256_blendv_ps(y, big, large);
}
template <bool kSinh>
__m256d sinhcosh4(__m256d x) {
  __m256d y = kSinh ? FX_V4(sinh)(x) : FX_V4(cosh)(x);
  __m256d sign = _mm256_set1_pd(-0.0);
  __m256d ax = _mm256_andnot_pd(sign, x);
  __m256d large = _mm256_cmp_pd(ax, _mm256_set1_pd(708.0), _CMP_GT_OQ);
  if (_mm256_movemask_pd(large) == 0) {
    return y;
  }
  __m256d e = FX_V4(exp)(_mm256_mul_pd(ax, _mm256_set1_pd(0.5)));
  __m256d big = _mm256_mul_pd(_mm256_mul_pd(e, _mm256_set1_pd(0.5)), e);
  if (kSinh) {
    big = _mm256_or_pd(big, _mm256_and_pd(x, sign));
  }
  return _mm256_blendv_pd(y, big, large);
}
__m256 sinh8(__m256 x) { return sinhcosh8<true>(x); }
__m256 cosh8(__m256 x) { return sinhcosh8<false>(x); }
__m256d sinh4(__m256d x) { return sinhcosh4<true>(x); }
__m256d cosh4(__m256d x) { return sinhcosh4<false>(x); }

// erfinv: Giles' single-precision approximation, one Newton step on
// erf(x) - y for full float accuracy, and the exact values at |y| >= 1.
__m256 poly(__m256 w, const float* c, int n) {
  __m256 p = _mm256_set1_ps(c[0]);
  for (int i = 1; i < n; ++i) {
    p = _mm256_fmadd_ps(p, w, _mm256_set1_ps(c[i]));
  }
  return p;
}
__m256 erfinv8(__m256 y) {
  static const float lo[] = {2.81022636e-08f,  3.43273939e-07f, -3.5233877e-06f,
                             -4.39150654e-06f, 0.00021858087f,  -0.00125372503f,
                             -0.00417768164f,  0.246640727f,    1.50140941f};
  static const float hi[] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                             -0.00367342844f,  0.00573950773f,  -0.0076224613f,
                             0.00943887047f,   1.00167406f,     2.83297682f};
  __m256 one = _mm256_set1_ps(1.0f);
  __m256 w = _mm256_sub_ps(
      _mm256_setzero_ps(),
      FX_V8(log)(_mm256_mul_ps(_mm256_sub_ps(one, y), _mm256_add_ps(one, y))));
  __m256 small = _mm256_cmp_ps(w, _mm256_set1_ps(5.0f), _CMP_LT_OQ);
  __m256 p_lo = poly(_mm256_sub_ps(w, _mm256_set1_ps(2.5f)), lo, 9);
  __m256 p_hi =
      poly(_mm256_sub_ps(_mm256_sqrt_ps(w), _mm256_set1_ps(3.0f)), hi, 9);
  __m256 x = _mm256_mul_ps(_mm256_blendv_ps(p_hi, p_lo, small), y);
  // Newton: f = erf(x) - y, f' = 2/sqrt(pi) exp(-x^2).
  __m256 err = _mm256_sub_ps(FX_V8(erf)(x), y);
  __m256 d = _mm256_mul_ps(
      _mm256_set1_ps(1.1283791670955126f),
      FX_V8(exp)(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(x, x))));
  x = _mm256_sub_ps(x, _mm256_div_ps(err, d));
  // |y| >= 1: +-inf at +-1, nan beyond.
  __m256 ay = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), y);
  __m256 edge = _mm256_cmp_ps(ay, one, _CMP_GE_OQ);
  __m256 inf = _mm256_or_ps(_mm256_and_ps(y, _mm256_set1_ps(-0.0f)),
                            _mm256_set1_ps(INFINITY));
  __m256 at_one = _mm256_cmp_ps(ay, one, _CMP_EQ_OQ);
  __m256 edge_val = _mm256_blendv_ps(_mm256_set1_ps(NAN), inf, at_one);
  x = _mm256_blendv_ps(x, edge_val, edge);
  // nan inputs stay nan (the compares above are false for them).
  return _mm256_blendv_ps(x, y, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
}

}  // namespace

#define FLUXION_SIMD_DEF(OP, F8, F4)                          \
  namespace {                                                 \
  struct OP##8 {static __m256 apply(__m256 x){return F8(x);   \
  }                                                           \
  }                                                           \
  ;                                                           \
  struct OP##4 {static __m256d apply(__m256d x){return F4(x); \
  }                                                           \
  }                                                           \
  ;                                                           \
  }                                                           \
  template <>                                                 \
  F32Kernel f32<detail::OP>() {                               \
    return has_avx2() ? &run_f32<OP##8> : nullptr;            \
  }                                                           \
  template <>                                                 \
  F64Kernel f64<detail::OP>() {                               \
    return has_avx2() ? &run_f64<OP##4> : nullptr;            \
  }

#define FX_LIBRARY_DEF(OP, name) FLUXION_SIMD_DEF(OP, FX_V8(name), FX_V4(name))
FX_LIBRARY_OPS(FX_LIBRARY_DEF)
#undef FX_LIBRARY_DEF
FLUXION_SIMD_DEF(Sqrt, sqrt8, sqrt4)
FLUXION_SIMD_DEF(Rsqrt, rsqrt8, rsqrt4)
FLUXION_SIMD_DEF(Sigmoid, sigmoid8, sigmoid4)
FLUXION_SIMD_DEF(Sinh, sinh8, sinh4)
FLUXION_SIMD_DEF(Cosh, cosh8, cosh4)
#undef FLUXION_SIMD_DEF

// float32 only: the double path keeps the scalar refinement in double.
namespace {
struct ErfInv8 {
  static __m256 apply(__m256 x) { return erfinv8(x); }
};
}  // namespace
template <>
F32Kernel f32<detail::ErfInv>() {
  return has_avx2() ? &run_f32<ErfInv8> : nullptr;
}
template <>
F64Kernel f64<detail::ErfInv>() {
  return nullptr;
}

#else  // no vector math library: the scalar functors run.

#define FLUXION_SIMD_NONE(OP)   \
  template <>                   \
  F32Kernel f32<detail::OP>() { \
    return nullptr;             \
  }                             \
  template <>                   \
  F64Kernel f64<detail::OP>() { \
    return nullptr;             \
  }
#define FX_LIBRARY_NONE(OP, name) FLUXION_SIMD_NONE(OP)
FX_LIBRARY_OPS(FX_LIBRARY_NONE)
#undef FX_LIBRARY_NONE
FLUXION_SIMD_NONE(Sqrt)
FLUXION_SIMD_NONE(Rsqrt)
FLUXION_SIMD_NONE(Sigmoid)
FLUXION_SIMD_NONE(Sinh)
FLUXION_SIMD_NONE(Cosh)
FLUXION_SIMD_NONE(ErfInv)
#undef FLUXION_SIMD_NONE
#endif  // FX_HAVE_VMATH

}  // namespace fluxion::cpu::simd
