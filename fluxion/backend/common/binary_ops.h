// One functor per elementwise binary op, shared by every backend and by
// the kernels compile generates (see unary_ops.h and math.h). Inputs are
// in the compute type (float for half types). Integer ops are total: no
// division by zero, overflow or over-wide shift reaches the hardware.
#pragma once

// Host only: stripped from the generated kernels' preamble.
#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/common/math.h"
#include "fluxion/backend/common/unary_ops.h"

namespace fluxion::detail {

struct Add {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (math::is_same_v<T, bool>) {
      return a || b;
    } else {
      return static_cast<T>(a + b);
    }
  }
};
struct Subtract {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    return static_cast<T>(a - b);
  }
};
struct Multiply {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (math::is_same_v<T, bool>) {
      return a && b;
    } else {
      return static_cast<T>(a * b);
    }
  }
};

// Integer division rounding toward -inf, 0 for a zero divisor (as NumPy).
template <typename T>
FLUXION_HOST_DEVICE T int_floor_div(T a, T b) {
  if (b == 0) {
    return 0;
  }
  if constexpr (math::is_signed_int_v<T>) {
    if (b == -1) {
      // -a, wrapping for INT_MIN (INT_MIN / -1 traps, and negating it in
      // the signed type is undefined: UBSan).
      using U = math::make_unsigned_t<T>;
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
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (math::is_integral_v<T>) {
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
FLUXION_HOST_DEVICE T float_floor_div(T a, T b) {
  if (b == T(0)) {
    return a / b;
  }
  T mod = math::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) {
    div -= T(1);
  }
  if (div == T(0)) {
    return math::copysign(T(0), a / b);
  }
  T q = math::floor(div);
  if (div - q > T(0.5)) {
    q += T(1);
  }
  return q;
}

struct FloorDivide {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (math::is_same_v<T, bool>) {
      return a && b;
    } else if constexpr (math::is_integral_v<T>) {
      return int_floor_div(a, b);
    } else {
      return float_floor_div(a, b);
    }
  }
};

// Python's %: the result has the sign of the divisor.
struct Remainder {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (math::is_same_v<T, bool>) {
      return false;
    } else if constexpr (math::is_integral_v<T>) {
      if (b == 0) {
        return 0;
      }
      if constexpr (math::is_signed_int_v<T>) {
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
      T r = math::fmod(a, b);
      if (r == T(0)) {
        return math::copysign(T(0), b);  // a zero takes b's sign too
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
  FLUXION_HOST_DEVICE T operator()(T base, T exp) const {
    if constexpr (math::is_same_v<T, bool>) {
      return base || !exp;
    } else if constexpr (math::is_integral_v<T>) {
      if constexpr (math::is_signed_int_v<T>) {
        if (exp < 0) {
          // MLX: an integer power with a negative exponent is 0, whatever
          // the base (1 ** -1 included).
          return 0;
        }
      }
      using U = math::make_unsigned_t<T>;
      U result = 1, b = static_cast<U>(base);
      for (U e = static_cast<U>(exp); e; e >>= 1) {
        if (e & 1) {
          result *= b;
        }
        b *= b;
      }
      return static_cast<T>(result);
    } else {
      using math::pow;
      return pow(base, exp);
    }
  }
};

// Complex numbers order lexicographically, as in NumPy.
template <typename T>
FLUXION_HOST_DEVICE bool less_than(T a, T b) {
  if constexpr (math::is_complex_v<T>) {
    return a.real() < b.real() || (a.real() == b.real() && a.imag() < b.imag());
  } else {
    return a < b;
  }
}

// NaN wins (the first one met), as in NumPy; complex numbers with a NaN
// part count as NaN, and others order lexicographically. The reductions
// and scans use these too (reduce_ops.h). One select, so loops vectorize.
template <bool IsMax>
struct MaxMin {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (math::is_complex_v<T>) {
      IsNan nan;
      if (nan(a) || nan(b)) {
        return nan(a) ? a : b;
      }
      return (IsMax ? less_than(a, b) : less_than(b, a)) ? b : a;
    } else {
      return ((IsMax ? a > b : a < b) || a != a) ? a : b;
    }
  }
};
struct Maximum : MaxMin<true> {};
struct Minimum : MaxMin<false> {};

struct ArcTan2 {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    return math::atan2(a, b);
  }
};

// log(exp(a) + exp(b)) without overflow.
struct LogAddExp {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (math::is_complex_v<T>) {
      // The operand with the larger real part factors out (as MLX).
      using R = typename T::value_type;
      if (a != a || b != b) {
        return a + b;
      }
      T hi = a.real() >= b.real() ? a : b;
      T lo = a.real() >= b.real() ? b : a;
      if (math::isinf(hi.real()) && hi.real() == lo.real()) {
        return hi;
      }
      T w = exp(lo - hi);
      R x = w.real(), y = w.imag();
      // hi + log1p(w), log1p accurate for small w.
      return hi + T(R(0.5) * math::log1p(x * (R(2) + x) + y * y),
                    math::atan2(y, R(1) + x));
    } else {
      return real_op(a, b);
    }
  }

 private:
  template <typename T>
  FLUXION_HOST_DEVICE static T real_op(T a, T b) {
    if (math::isnan(a) || math::isnan(b)) {
      return a + b;
    }
    T hi = a > b ? a : b;
    T lo = a > b ? b : a;
    if (math::isinf(hi) && hi == lo) {
      return hi;  // inf + inf, -inf + -inf
    }
    return hi + math::log1p(math::libm_exp(lo - hi));
  }
};

struct Equal {
  template <typename T>
  FLUXION_HOST_DEVICE bool operator()(T a, T b) const {
    return a == b;
  }
};
// Equality with NaN == NaN (array_equal(equal_nan=True)).
struct NaNEqual {
  template <typename T>
  FLUXION_HOST_DEVICE bool operator()(T a, T b) const {
    IsNan nan;
    return a == b || (nan(a) && nan(b));
  }
};
struct NotEqual {
  template <typename T>
  FLUXION_HOST_DEVICE bool operator()(T a, T b) const {
    return a != b;
  }
};
struct Less {
  template <typename T>
  FLUXION_HOST_DEVICE bool operator()(T a, T b) const {
    return less_than(a, b);
  }
};
struct LessEqual {
  template <typename T>
  FLUXION_HOST_DEVICE bool operator()(T a, T b) const {
    return less_than(a, b) || a == b;
  }
};
struct Greater {
  template <typename T>
  FLUXION_HOST_DEVICE bool operator()(T a, T b) const {
    return less_than(b, a);
  }
};
struct GreaterEqual {
  template <typename T>
  FLUXION_HOST_DEVICE bool operator()(T a, T b) const {
    return less_than(b, a) || a == b;
  }
};
struct LogicalAnd {
  template <typename T>
  FLUXION_HOST_DEVICE bool operator()(T a, T b) const {
    return a && b;
  }
};
struct LogicalOr {
  template <typename T>
  FLUXION_HOST_DEVICE bool operator()(T a, T b) const {
    return a || b;
  }
};
struct BitwiseAnd {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    return static_cast<T>(a & b);
  }
};
struct BitwiseOr {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    return static_cast<T>(a | b);
  }
};
struct BitwiseXor {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    return static_cast<T>(a ^ b);
  }
};
// Shifts by >= the bit width (or a negative amount) give 0, or -1 for a
// right shift of a negative number, rather than undefined behaviour.
struct LeftShift {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (math::is_same_v<T, bool>) {
      return a && !b;
    } else {
      constexpr T bits = sizeof(T) * 8;
      if (b < 0 || b >= bits) {
        return 0;
      }
      using U = math::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) << b);
    }
  }
};
struct RightShift {
  template <typename T>
  FLUXION_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (math::is_same_v<T, bool>) {
      return a && !b;
    } else {
      constexpr T bits = sizeof(T) * 8;
      if (b < 0 || b >= bits) {
        if constexpr (math::is_signed_int_v<T>) {
          return a < 0 ? T(-1) : T(0);
        }
        return 0;
      }
      return static_cast<T>(a >> b);
    }
  }
};

}  // namespace fluxion::detail
