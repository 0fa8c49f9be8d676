// Scalar types that C++ lacks: float16, bfloat16, complex64.
// Half types store 16 bits and compute in float ("opmath"): every arithmetic
// operator converts to float, so kernels written for float work unchanged.
#pragma once

#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>

namespace fluxion {

namespace detail {
inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace detail

struct float16_t {
  uint16_t bits;
  float16_t() = default;
  template <typename T>
  float16_t(T v) : bits(from_float(static_cast<float>(v))) {}
  operator float() const { return to_float(bits); }

  static float16_t from_bits(uint16_t b) {
    float16_t h;
    h.bits = b;
    return h;
  }
  // IEEE binary16 <-> binary32, round to nearest even.
  static uint16_t from_float(float f) {
    uint32_t x = detail::bits_of(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) {  // inf or nan
      return sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u);
    }
    if (absx >= 0x477ff000u) {  // rounds to >= 65520: overflow
      return sign | 0x7c00u;
    }
    if (absx < 0x38800000u) {  // subnormal half (or zero)
      // Add 0.5 to shift the mantissa into place with correct rounding.
      float magic = detail::float_of(absx) + 0.5f;
      return sign | (detail::bits_of(magic) - 0x3f000000u);
    }
    uint32_t mant_odd = (absx >> 13) & 1u;
    absx += 0xc8000fffu + mant_odd;  // rebias exponent and round
    return sign | (absx >> 13);
  }
  static float to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) {
      return detail::float_of(sign | 0x7f800000u | (mant << 13));
    }
    if (exp == 0) {
      float f = static_cast<float>(mant) * (1.0f / 16777216.0f);  // 2^-24
      return sign ? -f : f;
    }
    return detail::float_of(sign | ((exp + 112) << 23) | (mant << 13));
  }
};

struct bfloat16_t {
  uint16_t bits;
  bfloat16_t() = default;
  template <typename T>
  bfloat16_t(T v) : bits(from_float(static_cast<float>(v))) {}
  operator float() const { return detail::float_of((uint32_t)bits << 16); }

  static bfloat16_t from_bits(uint16_t b) {
    bfloat16_t h;
    h.bits = b;
    return h;
  }
  static uint16_t from_float(float f) {
    uint32_t x = detail::bits_of(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
      return (x >> 16) | 0x40u;  // keep nan a nan
    }
    x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
    return x >> 16;
  }
};

using complex64_t = std::complex<float>;

// Arithmetic on half types happens in float.
#define FLUXION_HALF_OPS(T)                                               \
  inline float operator+(T a, T b) { return float(a) + float(b); }       \
  inline float operator-(T a, T b) { return float(a) - float(b); }       \
  inline float operator*(T a, T b) { return float(a) * float(b); }       \
  inline float operator/(T a, T b) { return float(a) / float(b); }       \
  inline float operator-(T a) { return -float(a); }                      \
  inline bool operator==(T a, T b) { return float(a) == float(b); }      \
  inline bool operator!=(T a, T b) { return float(a) != float(b); }      \
  inline bool operator<(T a, T b) { return float(a) < float(b); }        \
  inline bool operator>(T a, T b) { return float(a) > float(b); }        \
  inline bool operator<=(T a, T b) { return float(a) <= float(b); }      \
  inline bool operator>=(T a, T b) { return float(a) >= float(b); }      \
  inline T& operator+=(T& a, T b) { return a = T(float(a) + float(b)); } \
  inline T& operator*=(T& a, T b) { return a = T(float(a) * float(b)); }
FLUXION_HALF_OPS(float16_t)
FLUXION_HALF_OPS(bfloat16_t)
#undef FLUXION_HALF_OPS

// The type kernels compute in: float for the half types, T otherwise.
template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<float16_t> {
  using type = float;
};
template <>
struct OpMath<bfloat16_t> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;

}  // namespace fluxion

namespace std {
template <>
class numeric_limits<fluxion::float16_t> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static fluxion::float16_t lowest() { return fluxion::float16_t::from_bits(0xfbff); }
  static fluxion::float16_t max() { return fluxion::float16_t::from_bits(0x7bff); }
  static fluxion::float16_t min() { return fluxion::float16_t::from_bits(0x0400); }
  static fluxion::float16_t epsilon() { return fluxion::float16_t::from_bits(0x1400); }
  static fluxion::float16_t infinity() { return fluxion::float16_t::from_bits(0x7c00); }
  static fluxion::float16_t quiet_NaN() { return fluxion::float16_t::from_bits(0x7e00); }
};
template <>
class numeric_limits<fluxion::bfloat16_t> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static fluxion::bfloat16_t lowest() { return fluxion::bfloat16_t::from_bits(0xff7f); }
  static fluxion::bfloat16_t max() { return fluxion::bfloat16_t::from_bits(0x7f7f); }
  static fluxion::bfloat16_t min() { return fluxion::bfloat16_t::from_bits(0x0080); }
  static fluxion::bfloat16_t epsilon() { return fluxion::bfloat16_t::from_bits(0x3c00); }
  static fluxion::bfloat16_t infinity() { return fluxion::bfloat16_t::from_bits(0x7f80); }
  static fluxion::bfloat16_t quiet_NaN() { return fluxion::bfloat16_t::from_bits(0x7fc0); }
};
}  // namespace std
