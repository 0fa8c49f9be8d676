// One functor per elementwise unary op, shared by every backend: the eager
// CPU kernels call them, and the kernels compile generates call the same
// functors (this header's text is their preamble; see math.h for what that
// asks of the code below the includes). Each takes and returns the compute
// type (float for half types: see types.h). The functor of primitive P is
// detail::P (codegen relies on the names matching).
#pragma once

// Host only: stripped from the generated kernels' preamble.
#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/common/math.h"

namespace fluxion::detail {

template <typename T>
inline constexpr bool is_int_v = math::is_integral_v<T>;

// erfinv by Giles' single-precision approximation, refined with two Newton
// steps so it is accurate in double too.
FLUXION_HOST_DEVICE inline double erfinv_impl(double y) {
  if (y <= -1.0) {
    return y == -1.0 ? -FLUXION_INF : FLUXION_NAN;
  }
  if (y >= 1.0) {
    return y == 1.0 ? FLUXION_INF : FLUXION_NAN;
  }
  double w = -math::log((1.0 - y) * (1.0 + y));
  double x;
  if (w < 5.0) {
    w -= 2.5;
    double p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
    x = p * y;
  } else {
    w = math::sqrt(w) - 3.0;
    double p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
    x = p * y;
  }
  // Newton: f(x) = erf(x) - y, f'(x) = 2/sqrt(pi) exp(-x^2).
  constexpr double two_over_sqrt_pi = 1.1283791670955126;
  for (int i = 0; i < 2; ++i) {
    double err = math::erf(x) - y;
    x -= err / (two_over_sqrt_pi * math::exp(-x * x));
  }
  return x;
}

// Real inputs take math::FN (float32 exp, expm1 and tanh are math.h's
// branch-free versions); complex ones std::FN, found by argument lookup.
#define FLUXION_FLOAT_UNARY(NAME, FN)             \
  struct NAME {                                   \
    template <typename T>                         \
    FLUXION_HOST_DEVICE T operator()(T x) const { \
      using math::FN;                             \
      return FN(x);                               \
    }                                             \
  };

FLUXION_FLOAT_UNARY(Exp, exp)
FLUXION_FLOAT_UNARY(Expm1, expm1)
FLUXION_FLOAT_UNARY(Log, log)
FLUXION_FLOAT_UNARY(Log10, log10)
FLUXION_FLOAT_UNARY(Sqrt, sqrt)
FLUXION_FLOAT_UNARY(Sin, sin)
FLUXION_FLOAT_UNARY(Cos, cos)
FLUXION_FLOAT_UNARY(Tan, tan)
FLUXION_FLOAT_UNARY(ArcSin, asin)
FLUXION_FLOAT_UNARY(ArcCos, acos)
FLUXION_FLOAT_UNARY(ArcTan, atan)
FLUXION_FLOAT_UNARY(Sinh, sinh)
FLUXION_FLOAT_UNARY(Cosh, cosh)
FLUXION_FLOAT_UNARY(Tanh, tanh)
FLUXION_FLOAT_UNARY(ArcSinh, asinh)
FLUXION_FLOAT_UNARY(ArcCosh, acosh)
FLUXION_FLOAT_UNARY(ArcTanh, atanh)
FLUXION_FLOAT_UNARY(Erf, erf)  // real only (the op rejects complex)
// libm's (CUDA's) erfc: accurate where 1 - erf(x) cancels to 0 or to a few
// bits (x past about 4 in float32, 6 in float64), down to the subnormals.
FLUXION_FLOAT_UNARY(Erfc, erfc)
#undef FLUXION_FLOAT_UNARY

// log1p and log2 of complex z (as MLX): log(1 + z) with its real part
// 0.5 log1p(2x + x^2 + y^2), accurate near z = 0; log(z) / log(2).
struct Log1p {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    if constexpr (math::is_complex_v<T>) {
      using R = typename T::value_type;
      R a = x.real(), b = x.imag();
      return T(R(0.5) * math::log1p(a * (R(2) + a) + b * b),
               math::atan2(b, R(1) + a));
    } else {
      return math::log1p(x);
    }
  }
};
struct Log2 {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    if constexpr (math::is_complex_v<T>) {
      using R = typename T::value_type;
      return log(x) / R(0.69314718055994530942);
    } else {
      return math::log2(x);
    }
  }
};
struct Rsqrt {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    using math::sqrt;
    return T(1) / sqrt(x);
  }
};
struct ErfInv {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    return static_cast<T>(erfinv_impl(static_cast<double>(x)));
  }
};

struct Sigmoid {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    if constexpr (math::is_complex_v<T>) {
      return T(1) / (T(1) + exp(-x));
    } else {
      return math::sigmoid(x);
    }
  }
};

// -x for integers, wrapping like NumPy: -INT_MIN is INT_MIN (negating it
// in the signed type is undefined behaviour, reported by UBSan).
template <typename T>
FLUXION_HOST_DEVICE T wrapping_negate(T x) {
  using U = math::make_unsigned_t<T>;
  return static_cast<T>(U(0) - static_cast<U>(x));
}

struct Abs {
  template <typename T>
  FLUXION_HOST_DEVICE auto operator()(T x) const {
    if constexpr (math::is_unsigned_int_v<T>) {
      return x;  // bool included
    } else if constexpr (math::is_complex_v<T>) {
      return abs(x);  // a float
    } else if constexpr (math::is_floating_point_v<T>) {
      return math::fabs(x);  // abs(-0.0) is +0.0, as NumPy
    } else if constexpr (math::is_integral_v<T>) {
      return x < T(0) ? wrapping_negate(x) : x;
    } else {
      return static_cast<T>(x < T(0) ? -x : x);
    }
  }
};

struct Negative {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    if constexpr (math::is_same_v<T, bool>) {
      return !x;
    } else if constexpr (math::is_integral_v<T>) {
      return wrapping_negate(x);
    } else {
      return static_cast<T>(-x);
    }
  }
};

struct Sign {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    if constexpr (math::is_complex_v<T>) {
      // NumPy >= 2: x / |x|, and 0 at 0.
      float m = abs(x);
      return m == 0.0f ? T(0) : x / m;
    } else if constexpr (math::is_unsigned_int_v<T>) {
      return x != T(0) ? T(1) : T(0);
    } else if constexpr (is_int_v<T>) {
      return static_cast<T>((x > T(0)) - (x < T(0)));
    } else {
      // nan stays nan.
      return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
    }
  }
};

struct Square {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    if constexpr (math::is_same_v<T, bool>) {
      return x;
    } else {
      return static_cast<T>(x * x);
    }
  }
};

struct Reciprocal {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    return T(1) / x;
  }
};

struct Floor {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    if constexpr (is_int_v<T>) {
      return x;
    } else {
      return math::floor(x);
    }
  }
};

struct Ceil {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    if constexpr (is_int_v<T>) {
      return x;
    } else {
      return math::ceil(x);
    }
  }
};

// Half to even, as NumPy.
struct Round {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    if constexpr (is_int_v<T>) {
      return x;
    } else if constexpr (math::is_complex_v<T>) {
      return T(math::rint(x.real()), math::rint(x.imag()));
    } else {
      return math::rint(x);
    }
  }
};

struct LogicalNot {
  template <typename T>
  FLUXION_HOST_DEVICE bool operator()(T x) const {
    return !(x != T(0));
  }
};

// Any NaN part (NumPy's isnan for complex).
struct IsNan {
  template <typename T>
  FLUXION_HOST_DEVICE bool operator()(T x) const {
    if constexpr (math::is_complex_v<T>) {
      return math::isnan(x.real()) || math::isnan(x.imag());
    } else {
      return x != x;  // false for integers
    }
  }
};

struct IsInf {
  template <typename T>
  FLUXION_HOST_DEVICE bool operator()(T x) const {
    if constexpr (math::is_complex_v<T>) {
      return math::isinf(x.real()) || math::isinf(x.imag());
    } else if constexpr (is_int_v<T>) {
      return false;
    } else {
      return math::isinf(x);
    }
  }
};

struct IsFinite {
  template <typename T>
  FLUXION_HOST_DEVICE bool operator()(T x) const {
    if constexpr (math::is_complex_v<T>) {
      return math::isfinite(x.real()) && math::isfinite(x.imag());
    } else if constexpr (is_int_v<T>) {
      return true;
    } else {
      return math::isfinite(x);
    }
  }
};

struct Conjugate {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    if constexpr (math::is_complex_v<T>) {
      return conj(x);
    } else {
      return x;
    }
  }
};

struct Real {
  template <typename T>
  FLUXION_HOST_DEVICE auto operator()(T x) const {
    if constexpr (math::is_complex_v<T>) {
      return x.real();
    } else {
      return x;
    }
  }
};

struct Imag {
  template <typename T>
  FLUXION_HOST_DEVICE auto operator()(T x) const {
    if constexpr (math::is_complex_v<T>) {
      return x.imag();
    } else {
      return T(0);
    }
  }
};

struct Identity {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T x) const {
    return x;
  }
};
// The primitives that compute the identity (a cast, for AsType: the
// generated code converts every result to its node's dtype).
using Copy = Identity;
using StopGradient = Identity;
using AsType = Identity;

}  // namespace fluxion::detail
