// Scalar math and type traits for the shared kernel functors
// (unary_ops.h, binary_ops.h, ternary_ops.h, reduce_ops.h). These headers
// are compiled in three places:
//  - the host library, by the eager CPU kernels;
//  - every CPU kernel compile generates: their text is the kernel's
//    preamble (CMake embeds it at build time, see codegen.cpp), and a
//    generated kernel includes no standard header (one <complex> would
//    triple its build time);
//  - CUDA device code: the eager GPU kernels (nvcc) and the kernels
//    compile generates for the GPU (NVRTC, which has no standard library
//    and no system header either; backend/cuda/codegen_cuda.cpp).
// So the bodies below the includes use no std:: name and no header:
// compiler builtins, and FLUXION_HOST_DEVICE on every function. Complex
// branches of the functors call complex functions unqualified (exp(z),
// abs(z)), found by argument-dependent lookup where std::complex exists;
// generated kernels never instantiate them (they fuse real dtypes only).
#pragma once

#if defined(__CUDACC__)
#define FLUXION_HOST_DEVICE __host__ __device__
#else
#define FLUXION_HOST_DEVICE
#endif

// Infinities and NaN. NVRTC (the GPU's generated kernels: it defines
// __CUDACC_RTC__) knows none of GCC's __builtin_huge_val/__builtin_nan,
// but its __builtin_bit_cast is a constant expression: the same values
// from their bits there.
#if defined(__CUDACC_RTC__)
#define FLUXION_INF_F __builtin_bit_cast(float, 0x7f800000u)
#define FLUXION_INF __builtin_bit_cast(double, 0x7ff0000000000000ull)
#define FLUXION_NAN __builtin_bit_cast(double, 0x7ff8000000000000ull)
#else
#define FLUXION_INF_F __builtin_huge_valf()
#define FLUXION_INF __builtin_huge_val()
#define FLUXION_NAN __builtin_nan("")
#endif

// Fused multiply-add in the float32 polynomials, where it is one
// instruction: CUDA devices, and generated CPU kernels built with
// -march=native on an FMA machine (codegen defines
// FLUXION_GENERATED_KERNEL). The host library is built for baseline
// x86-64, where fmaf is a library call (5x slower), and must not depend on
// per-file flags (simd_avx2.cpp is built with -mfma: an inline function
// compiled two ways is still one function to the linker), so there it
// multiplies and adds. Fused and eager float32 transcendentals therefore
// agree to an ulp, not bit for bit (see test_kernel_functors.cpp).
#if defined(__CUDACC__)
#define FLUXION_FMAF(a, b, c) fmaf(a, b, c)
#elif defined(FLUXION_GENERATED_KERNEL) && \
    (defined(__FMA__) || defined(__ARM_FEATURE_FMA))
#define FLUXION_FMAF(a, b, c) __builtin_fmaf(a, b, c)
#else
#define FLUXION_FMAF(a, b, c) ((a) * (b) + (c))
#endif

namespace fluxion::math {

// --- type traits (the standard ones are not available everywhere) ---

template <typename T, typename U>
inline constexpr bool is_same_v = false;
template <typename T>
inline constexpr bool is_same_v<T, T> = true;

template <typename T>
struct IntTraits {
  static constexpr bool integral = false;
  static constexpr bool is_signed = false;
  using unsigned_type = T;
};
#define FLUXION_INT_TRAITS(T, SIGNED, U)      \
  template <>                                 \
  struct IntTraits<T> {                       \
    static constexpr bool integral = true;    \
    static constexpr bool is_signed = SIGNED; \
    using unsigned_type = U;                  \
  };
FLUXION_INT_TRAITS(bool, false, bool)
FLUXION_INT_TRAITS(char, (char(-1) < char(0)), unsigned char)
FLUXION_INT_TRAITS(signed char, true, unsigned char)
FLUXION_INT_TRAITS(unsigned char, false, unsigned char)
FLUXION_INT_TRAITS(short, true, unsigned short)
FLUXION_INT_TRAITS(unsigned short, false, unsigned short)
FLUXION_INT_TRAITS(int, true, unsigned int)
FLUXION_INT_TRAITS(unsigned int, false, unsigned int)
FLUXION_INT_TRAITS(long, true, unsigned long)
FLUXION_INT_TRAITS(unsigned long, false, unsigned long)
FLUXION_INT_TRAITS(long long, true, unsigned long long)
FLUXION_INT_TRAITS(unsigned long long, false, unsigned long long)
#undef FLUXION_INT_TRAITS

// bool counts as integral, as in std::is_integral.
template <typename T>
inline constexpr bool is_integral_v = IntTraits<T>::integral;
template <typename T>
inline constexpr bool is_signed_int_v = IntTraits<T>::is_signed;
template <typename T>
inline constexpr bool is_unsigned_int_v =
    IntTraits<T>::integral && !IntTraits<T>::is_signed;
template <typename T>
using make_unsigned_t = typename IntTraits<T>::unsigned_type;
template <typename T>
inline constexpr bool is_floating_point_v =
    is_same_v<T, float> || is_same_v<T, double>;

// Complex types: specialized where std::complex exists (dispatch.h).
template <typename T>
struct IsComplex {
  static constexpr bool value = false;
};
template <typename T>
inline constexpr bool is_complex_v = IsComplex<T>::value;

// Extremes of an arithmetic type (infinities for floats).
template <typename T>
FLUXION_HOST_DEVICE constexpr T highest() {
  if constexpr (is_same_v<T, float>) {
    return FLUXION_INF_F;
  } else if constexpr (is_same_v<T, double>) {
    return FLUXION_INF;
  } else if constexpr (is_same_v<T, bool>) {
    return true;
  } else if constexpr (is_signed_int_v<T>) {
    return static_cast<T>(static_cast<make_unsigned_t<T>>(~0ull) >> 1);
  } else {
    return static_cast<T>(~0ull);
  }
}
template <typename T>
FLUXION_HOST_DEVICE constexpr T lowest() {
  if constexpr (is_floating_point_v<T>) {
    return -highest<T>();
  } else if constexpr (is_signed_int_v<T>) {
    return static_cast<T>(-highest<T>() - 1);
  } else {
    return T(0);
  }
}

// --- libm, float and double (overloads, so `using math::exp; exp(x)` in
// a functor also finds std::exp for complex x by argument lookup) ---

#if defined(__CUDACC__)
#define FLUXION_LIBM(name) ::name
#else
#define FLUXION_LIBM(name) __builtin_##name
#endif
#define FLUXION_MATH1(name)                                             \
  FLUXION_HOST_DEVICE inline double name(double x) {                   \
    return FLUXION_LIBM(name)(x);                                      \
  }                                                                    \
  FLUXION_HOST_DEVICE inline float name(float x) {                     \
    return FLUXION_LIBM(name##f)(x);                                   \
  }
#define FLUXION_MATH2(name)                                             \
  FLUXION_HOST_DEVICE inline double name(double x, double y) {         \
    return FLUXION_LIBM(name)(x, y);                                   \
  }                                                                    \
  FLUXION_HOST_DEVICE inline float name(float x, float y) {            \
    return FLUXION_LIBM(name##f)(x, y);                                \
  }
FLUXION_MATH1(log)
FLUXION_MATH1(log1p)
FLUXION_MATH1(log2)
FLUXION_MATH1(log10)
FLUXION_MATH1(sqrt)
FLUXION_MATH1(sin)
FLUXION_MATH1(cos)
FLUXION_MATH1(tan)
FLUXION_MATH1(asin)
FLUXION_MATH1(acos)
FLUXION_MATH1(atan)
FLUXION_MATH1(sinh)
FLUXION_MATH1(cosh)
FLUXION_MATH1(asinh)
FLUXION_MATH1(acosh)
FLUXION_MATH1(atanh)
FLUXION_MATH1(erf)
FLUXION_MATH1(erfc)
FLUXION_MATH1(floor)
FLUXION_MATH1(ceil)
FLUXION_MATH1(fabs)
// rint: half to even (NumPy's round), in the default rounding mode.
FLUXION_MATH1(rint)
FLUXION_MATH2(pow)
FLUXION_MATH2(atan2)
FLUXION_MATH2(fmod)
FLUXION_MATH2(copysign)
#undef FLUXION_MATH1
#undef FLUXION_MATH2

#if defined(__CUDACC__)
#define FLUXION_CLASSIFY(name) ::name
#else
#define FLUXION_CLASSIFY(name) __builtin_##name
#endif
template <typename T>
FLUXION_HOST_DEVICE inline bool isnan(T x) {
  return FLUXION_CLASSIFY(isnan)(x);
}
template <typename T>
FLUXION_HOST_DEVICE inline bool isinf(T x) {
  return FLUXION_CLASSIFY(isinf)(x);
}
template <typename T>
FLUXION_HOST_DEVICE inline bool isfinite(T x) {
  return FLUXION_CLASSIFY(isfinite)(x);
}
#undef FLUXION_CLASSIFY

// --- float32 exponentials: branch-free (selects only), so loops over them
// vectorize, in eager kernels and generated ones alike. One argument
// reduction: e^c = 2^n e^r with |r| <= ln2/2 (Cody-Waite split of ln2),
// and a degree-6 polynomial for e^r - 1 (Cephes' coefficients). float64
// uses libm. ---

FLUXION_HOST_DEVICE inline float pow2i(int k) {  // 2^k, -126 <= k <= 127
  unsigned bits = static_cast<unsigned>(k + 127) << 23;
#if defined(__CUDA_ARCH__)  // nvcc's device pass (its host pass has builtins)
  return __uint_as_float(bits);
#else
  return __builtin_bit_cast(float, bits);
#endif
}

// e^r - 1 where c = n ln2 + r; n returned (a whole number, |c| < 2^21).
FLUXION_HOST_DEVICE inline float expm1_reduced(float c, float& n) {
  // rint(c / ln2) by the 1.5 * 2^23 trick: the same on every compiler
  // and device, without a rounding instruction.
  float t = c * 1.44269504088896341f;
  n = (t + 12582912.0f) - 12582912.0f;
  float r = FLUXION_FMAF(n, -0.693359375f, c);
  r = FLUXION_FMAF(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = FLUXION_FMAF(p, r, 1.3981999507e-3f);
  p = FLUXION_FMAF(p, r, 8.3334519073e-3f);
  p = FLUXION_FMAF(p, r, 4.1665795894e-2f);
  p = FLUXION_FMAF(p, r, 1.6666665459e-1f);
  p = FLUXION_FMAF(p, r, 5.0000001201e-1f);
  return FLUXION_FMAF(p, r * r, r);
}

// The clamps are written `x < hi ? x : hi` so that a NaN input becomes a
// bound (no NaN reaches the float-to-int conversion, which would be
// undefined); the last select passes NaN through.
FLUXION_HOST_DEVICE inline float exp(float x) {
  float c = x < 88.72283935f ? x : 88.72283935f;
  c = c > -103.97208f ? c : -103.97208f;
  float n;
  float p = expm1_reduced(c, n) + 1.0f;
  // n reaches 128 at the top and -150 at the bottom (subnormal results):
  // scaled in two halves, each a normal power of two.
  int k = static_cast<int>(n), h = k >> 1;
  float y = p * pow2i(h) * pow2i(k - h);
  y = x > 88.72283935f ? FLUXION_INF_F : y;
  y = x < -103.97208f ? 0.0f : y;
  return x != x ? x : y;
}
FLUXION_HOST_DEVICE inline double exp(double x) {
  return FLUXION_LIBM(exp)(x);
}

// 2^n (e^r - 1) + (2^n - 1): no cancellation near 0. Above 2^64 the -1 is
// below rounding, and 2^n is applied in two halves as in exp.
FLUXION_HOST_DEVICE inline float expm1(float x) {
  float c = x < 88.72283935f ? x : 88.72283935f;
  c = c > -87.33654785f ? c : -87.33654785f;  // e^c - 1 = -1 below
  float n;
  float u = expm1_reduced(c, n);
  int k = static_cast<int>(n), h = k >> 1;
  float s = pow2i(k < 127 ? k : 127);
  float small = FLUXION_FMAF(s, u, s - 1.0f);
  float big = (u + 1.0f) * pow2i(h) * pow2i(k - h);
  float y = k > 64 ? big : small;
  y = x > 88.72283935f ? FLUXION_INF_F : y;
  return (x != x || x == 0.0f) ? x : y;  // NaN, and the sign of zero
}
FLUXION_HOST_DEVICE inline double expm1(double x) {
  return FLUXION_LIBM(expm1)(x);
}

// e^c for c <= 0 (sigmoid's e^-|x|): one scale, so results below the
// smallest normal float (c < -87.34) flush to zero.
FLUXION_HOST_DEVICE inline float exp_nonpositive(float c) {
  float a = c > -87.33654785f ? c : -87.33654785f;
  float n;
  float u = expm1_reduced(a, n);
  float s = pow2i(static_cast<int>(n));
  float y = FLUXION_FMAF(s, u, s);
  return c < -87.33654785f ? 0.0f : y;
}

// tanh(a) = -m / (2 + m) with m = e^(-2|a|) - 1 computed without
// cancellation (2^n (e^r - 1) + (2^n - 1)), so it is accurate near 0 too.
FLUXION_HOST_DEVICE inline float tanh(float x) {
  float c = -2.0f * fabs(x);
  c = c > -87.0f ? c : -87.0f;
  float n;
  float u = expm1_reduced(c, n);
  float s = pow2i(static_cast<int>(n));
  float m = FLUXION_FMAF(s, u, s - 1.0f);
  float y = copysign(-m / (2.0f + m), x);
  return x != x ? x : y;
}
FLUXION_HOST_DEVICE inline double tanh(double x) {
  return FLUXION_LIBM(tanh)(x);
}

// Stable for large |x|: never exponentiates a positive number.
FLUXION_HOST_DEVICE inline float sigmoid(float x) {
  float e = exp_nonpositive(-fabs(x));
  float y = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
  return x != x ? x : y;
}
FLUXION_HOST_DEVICE inline double sigmoid(double x) {
  double e = exp(-fabs(x));
  return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

// libm's exponential: for scalar code that does not vectorize anyway
// (LogAddExp's branches around log1p), where it is faster than the
// polynomial (measured: logaddexp 16 ns an element against 24).
FLUXION_HOST_DEVICE inline float libm_exp(float x) {
  return FLUXION_LIBM(expf)(x);
}
FLUXION_HOST_DEVICE inline double libm_exp(double x) {
  return FLUXION_LIBM(exp)(x);
}

#undef FLUXION_LIBM

}  // namespace fluxion::math
