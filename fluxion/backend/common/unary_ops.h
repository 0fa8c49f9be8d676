// One functor per elementwise unary op, shared by every backend. Each takes
// and returns the compute type (float for half types: see types.h).
#pragma once

#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include "fluxion/backend/common/dispatch.h"

namespace fluxion::detail {

template <typename T>
inline constexpr bool is_int_v = std::is_integral_v<T>;

// erfinv by Giles' single-precision approximation, refined with two Newton
// steps so it is accurate in double too.
inline double erfinv_impl(double y) {
  if (y <= -1.0) {
    return y == -1.0 ? -std::numeric_limits<double>::infinity()
                     : std::numeric_limits<double>::quiet_NaN();
  }
  if (y >= 1.0) {
    return y == 1.0 ? std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::quiet_NaN();
  }
  double w = -std::log((1.0 - y) * (1.0 + y));
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
    w = std::sqrt(w) - 3.0;
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
    double err = std::erf(x) - y;
    x -= err / (two_over_sqrt_pi * std::exp(-x * x));
  }
  return x;
}

#define FLUXION_FLOAT_UNARY(NAME, EXPR)  \
  struct NAME {                          \
    template <typename T>                \
    T operator()(T x) const {            \
      using std::abs;                    \
      return EXPR;                       \
    }                                    \
  };

FLUXION_FLOAT_UNARY(Exp, std::exp(x))
FLUXION_FLOAT_UNARY(Expm1, std::expm1(x))
FLUXION_FLOAT_UNARY(Log, std::log(x))
// log1p and log2 of complex z (as MLX): log(1 + z) with its real part
// 0.5 log1p(2x + x^2 + y^2), accurate near z = 0; log(z) / log(2).
struct Log1p {
  template <typename T>
  T operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      using R = typename T::value_type;
      R a = x.real(), b = x.imag();
      return T(R(0.5) * std::log1p(a * (R(2) + a) + b * b),
               std::atan2(b, R(1) + a));
    } else {
      return std::log1p(x);
    }
  }
};
struct Log2 {
  template <typename T>
  T operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      using R = typename T::value_type;
      return std::log(x) / R(0.69314718055994530942);
    } else {
      return std::log2(x);
    }
  }
};
FLUXION_FLOAT_UNARY(Log10, std::log10(x))
FLUXION_FLOAT_UNARY(Sqrt, std::sqrt(x))
FLUXION_FLOAT_UNARY(Rsqrt, T(1) / std::sqrt(x))
FLUXION_FLOAT_UNARY(Sin, std::sin(x))
FLUXION_FLOAT_UNARY(Cos, std::cos(x))
FLUXION_FLOAT_UNARY(Tan, std::tan(x))
FLUXION_FLOAT_UNARY(ArcSin, std::asin(x))
FLUXION_FLOAT_UNARY(ArcCos, std::acos(x))
FLUXION_FLOAT_UNARY(ArcTan, std::atan(x))
FLUXION_FLOAT_UNARY(Sinh, std::sinh(x))
FLUXION_FLOAT_UNARY(Cosh, std::cosh(x))
FLUXION_FLOAT_UNARY(Tanh, std::tanh(x))
FLUXION_FLOAT_UNARY(ArcSinh, std::asinh(x))
FLUXION_FLOAT_UNARY(ArcCosh, std::acosh(x))
FLUXION_FLOAT_UNARY(ArcTanh, std::atanh(x))
#undef FLUXION_FLOAT_UNARY

// log/exp of complex numbers exist in std; erf and friends are real only.
struct Erf {
  template <typename T>
  T operator()(T x) const {
    return std::erf(x);
  }
};
struct ErfInv {
  template <typename T>
  T operator()(T x) const {
    return static_cast<T>(erfinv_impl(static_cast<double>(x)));
  }
};

struct Sigmoid {
  template <typename T>
  T operator()(T x) const {
    // Stable for large |x|: never exponentiates a positive number.
    if constexpr (is_complex_v<T>) {
      return T(1) / (T(1) + std::exp(-x));
    } else {
      T e = std::exp(-std::abs(x));
      return x >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
    }
  }
};

// -x for integers, wrapping like NumPy: -INT_MIN is INT_MIN (negating it
// in the signed type is undefined behaviour, reported by UBSan).
template <typename T>
T wrapping_negate(T x) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U(0) - static_cast<U>(x));
}

struct Abs {
  template <typename T>
  auto operator()(T x) const {
    if constexpr (std::is_unsigned_v<T> || std::is_same_v<T, bool>) {
      return x;
    } else if constexpr (is_complex_v<T>) {
      return std::abs(x);  // a float
    } else if constexpr (std::is_integral_v<T>) {
      return x < T(0) ? wrapping_negate(x) : x;
    } else {
      return static_cast<T>(x < T(0) ? -x : x);
    }
  }
};

struct Negative {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return !x;
    } else if constexpr (std::is_integral_v<T>) {
      return wrapping_negate(x);
    } else {
      return static_cast<T>(-x);
    }
  }
};

struct Sign {
  template <typename T>
  T operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      // NumPy >= 2: x / |x|, and 0 at 0.
      float m = std::abs(x);
      return m == 0.0f ? T(0) : x / m;
    } else if constexpr (std::is_unsigned_v<T> || std::is_same_v<T, bool>) {
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
  T operator()(T x) const {
    return static_cast<T>(x * x);
  }
};

struct Reciprocal {
  template <typename T>
  T operator()(T x) const {
    return T(1) / x;
  }
};

struct Floor {
  template <typename T>
  T operator()(T x) const {
    if constexpr (is_int_v<T>) {
      return x;
    } else {
      return std::floor(x);
    }
  }
};

struct Ceil {
  template <typename T>
  T operator()(T x) const {
    if constexpr (is_int_v<T>) {
      return x;
    } else {
      return std::ceil(x);
    }
  }
};

// Half to even, as NumPy.
struct Round {
  template <typename T>
  T operator()(T x) const {
    if constexpr (is_int_v<T>) {
      return x;
    } else if constexpr (is_complex_v<T>) {
      return T(std::nearbyint(x.real()), std::nearbyint(x.imag()));
    } else {
      return std::nearbyint(x);
    }
  }
};

struct LogicalNot {
  template <typename T>
  bool operator()(T x) const {
    return !cast_value<bool>(x);
  }
};

struct IsNan {
  template <typename T>
  bool operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return std::isnan(x.real()) || std::isnan(x.imag());
    } else if constexpr (is_int_v<T>) {
      return false;
    } else {
      return std::isnan(x);
    }
  }
};

struct IsInf {
  template <typename T>
  bool operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return std::isinf(x.real()) || std::isinf(x.imag());
    } else if constexpr (is_int_v<T>) {
      return false;
    } else {
      return std::isinf(x);
    }
  }
};

struct IsFinite {
  template <typename T>
  bool operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return std::isfinite(x.real()) && std::isfinite(x.imag());
    } else if constexpr (is_int_v<T>) {
      return true;
    } else {
      return std::isfinite(x);
    }
  }
};

struct Conjugate {
  template <typename T>
  T operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return std::conj(x);
    } else {
      return x;
    }
  }
};

struct Real {
  template <typename T>
  auto operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return x.real();
    } else {
      return x;
    }
  }
};

struct Imag {
  template <typename T>
  auto operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return x.imag();
    } else {
      return T(0);
    }
  }
};

struct Identity {
  template <typename T>
  T operator()(T x) const {
    return x;
  }
};

}  // namespace fluxion::detail
