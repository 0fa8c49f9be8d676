// One functor per elementwise binary op, shared by every backend. Inputs are
// in the compute type (float for half types). Integer ops are total: no
// division by zero, overflow or over-wide shift reaches the hardware.
#pragma once

#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include "fluxion/backend/common/dispatch.h"

namespace fluxion::detail {

struct Add {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a || b;
    } else {
      return static_cast<T>(a + b);
    }
  }
};
struct Subtract {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a - b);
  }
};
struct Multiply {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a && b;
    } else {
      return static_cast<T>(a * b);
    }
  }
};

// Integer division rounding toward -inf, 0 for a zero divisor (as NumPy).
template <typename T>
T int_floor_div(T a, T b) {
  if (b == 0) {
    return 0;
  }
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) {
      // -a, wrapping for INT_MIN (INT_MIN / -1 traps, and negating it in
      // the signed type is undefined: UBSan).
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(U(0) - static_cast<U>(a));
    }
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) {
      --q;
    }
    return q;
  } else {
    return a / b;
  }
}

struct Divide {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return int_floor_div(a, b);  // only reached through floor_divide
    } else {
      return a / b;
    }
  }
};

// Python's float //, as NumPy computes it: derived from fmod so that
// a == b * (a // b) + a % b holds; floor(a / b) is not (1.0 // 0.1 is 9,
// while 1.0 / 0.1 rounds up to exactly 10).
template <typename T>
T float_floor_div(T a, T b) {
  if (b == T(0)) {
    return a / b;
  }
  T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) {
    div -= T(1);
  }
  if (div == T(0)) {
    return std::copysign(T(0), a / b);
  }
  T q = std::floor(div);
  if (div - q > T(0.5)) {
    q += T(1);
  }
  return q;
}

struct FloorDivide {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a && b;
    } else if constexpr (std::is_integral_v<T>) {
      return int_floor_div(a, b);
    } else {
      return float_floor_div(a, b);
    }
  }
};

// Python's %: the result has the sign of the divisor.
struct Remainder {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return false;
    } else if constexpr (std::is_integral_v<T>) {
      if (b == 0) {
        return 0;
      }
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) {
          return 0;
        }
        T r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) {
          r += b;
        }
        return r;
      } else {
        return a % b;
      }
    } else {
      T r = std::fmod(a, b);
      if (r == T(0)) {
        return std::copysign(T(0), b);  // a zero takes b's sign too
      }
      if ((r < T(0)) != (b < T(0))) {
        r += b;
      }
      return r;
    }
  }
};

struct Power {
  template <typename T>
  T operator()(T base, T exp) const {
    if constexpr (std::is_same_v<T, bool>) {
      return base || !exp;
    } else if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_signed_v<T>) {
        if (exp < 0) {
          // MLX: an integer power with a negative exponent is 0, whatever
          // the base (1 ** -1 included).
          return 0;
        }
      }
      using U = std::make_unsigned_t<T>;
      U result = 1, b = static_cast<U>(base);
      for (U e = static_cast<U>(exp); e; e >>= 1) {
        if (e & 1) {
          result *= b;
        }
        b *= b;
      }
      return static_cast<T>(result);
    } else {
      return std::pow(base, exp);
    }
  }
};

// NaN wins, as in NumPy.
struct Maximum {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (is_complex_v<T>) {
      // NaN in either part propagates, as for real floats (NumPy).
      if (std::isnan(a.real()) || std::isnan(a.imag())) {
        return a;
      }
      if (std::isnan(b.real()) || std::isnan(b.imag())) {
        return b;
      }
      return (a.real() > b.real() ||
              (a.real() == b.real() && a.imag() > b.imag()))
                 ? a
                 : b;
    } else if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) {
        return a;
      }
      return a > b ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};
struct Minimum {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (is_complex_v<T>) {
      // NaN in either part propagates, as for real floats (NumPy).
      if (std::isnan(a.real()) || std::isnan(a.imag())) {
        return a;
      }
      if (std::isnan(b.real()) || std::isnan(b.imag())) {
        return b;
      }
      return (a.real() < b.real() ||
              (a.real() == b.real() && a.imag() < b.imag()))
                 ? a
                 : b;
    } else if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) {
        return a;
      }
      return a < b ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};

struct ArcTan2 {
  template <typename T>
  T operator()(T a, T b) const {
    return std::atan2(a, b);
  }
};

// log(exp(a) + exp(b)) without overflow.
struct LogAddExp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (is_complex_v<T>) {
      // The operand with the larger real part factors out (as MLX).
      using R = typename T::value_type;
      if (a != a || b != b) {
        return a + b;
      }
      T hi = a.real() >= b.real() ? a : b;
      T lo = a.real() >= b.real() ? b : a;
      if (std::isinf(hi.real()) && hi.real() == lo.real()) {
        return hi;
      }
      T w = std::exp(lo - hi);
      R x = w.real(), y = w.imag();
      // hi + log1p(w), log1p accurate for small w.
      return hi + T(R(0.5) * std::log1p(x * (R(2) + x) + y * y),
                    std::atan2(y, R(1) + x));
    } else {
      return real_op(a, b);
    }
  }

 private:
  template <typename T>
  static T real_op(T a, T b) {
    if (std::isnan(a) || std::isnan(b)) {
      return a + b;
    }
    T hi = a > b ? a : b;
    T lo = a > b ? b : a;
    if (std::isinf(hi) && hi == lo) {
      return hi;  // inf + inf, -inf + -inf
    }
    return hi + std::log1p(std::exp(lo - hi));
  }
};

// Complex numbers order lexicographically, as in NumPy.
template <typename T>
bool less_than(T a, T b) {
  if constexpr (is_complex_v<T>) {
    return a.real() < b.real() || (a.real() == b.real() && a.imag() < b.imag());
  } else {
    return a < b;
  }
}

struct Equal {
  template <typename T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};
struct NotEqual {
  template <typename T>
  bool operator()(T a, T b) const {
    return a != b;
  }
};
struct Less {
  template <typename T>
  bool operator()(T a, T b) const {
    return less_than(a, b);
  }
};
struct LessEqual {
  template <typename T>
  bool operator()(T a, T b) const {
    return less_than(a, b) || a == b;
  }
};
struct Greater {
  template <typename T>
  bool operator()(T a, T b) const {
    return less_than(b, a);
  }
};
struct GreaterEqual {
  template <typename T>
  bool operator()(T a, T b) const {
    return less_than(b, a) || a == b;
  }
};
struct LogicalAnd {
  template <typename T>
  bool operator()(T a, T b) const {
    return a && b;
  }
};
struct LogicalOr {
  template <typename T>
  bool operator()(T a, T b) const {
    return a || b;
  }
};
struct BitwiseAnd {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a & b);
  }
};
struct BitwiseOr {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a | b);
  }
};
struct BitwiseXor {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a ^ b);
  }
};
// Shifts by >= the bit width (or a negative amount) give 0, or -1 for a
// right shift of a negative number, rather than undefined behaviour.
struct LeftShift {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a && !b;
    } else {
      constexpr T bits = sizeof(T) * 8;
      if (b < 0 || b >= bits) {
        return 0;
      }
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) << b);
    }
  }
};
struct RightShift {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a && !b;
    } else {
      constexpr T bits = sizeof(T) * 8;
      if (b < 0 || b >= bits) {
        if constexpr (std::is_signed_v<T>) {
          return a < 0 ? T(-1) : T(0);
        }
        return 0;
      }
      return static_cast<T>(a >> b);
    }
  }
};

}  // namespace fluxion::detail
