// Element types, their categories and MLX's promotion rules.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "fluxion/types.h"

namespace fluxion {

struct Dtype {
  enum class Val : uint8_t {
    bool_,
    uint8,
    uint16,
    uint32,
    uint64,
    int8,
    int16,
    int32,
    int64,
    float16,
    float32,
    float64,
    bfloat16,
    complex64,
  };
  enum class Kind { b, u, i, f, V, c };  // V: bfloat16, as in MLX

  Val val;
  uint8_t size;
  constexpr Dtype(Val v, uint8_t s) : val(v), size(s) {}
  constexpr operator Val() const { return val; }
  constexpr bool operator==(const Dtype& o) const { return val == o.val; }
  constexpr bool operator!=(const Dtype& o) const { return val != o.val; }
};

inline constexpr Dtype bool_{Dtype::Val::bool_, 1};
inline constexpr Dtype uint8{Dtype::Val::uint8, 1};
inline constexpr Dtype uint16{Dtype::Val::uint16, 2};
inline constexpr Dtype uint32{Dtype::Val::uint32, 4};
inline constexpr Dtype uint64{Dtype::Val::uint64, 8};
inline constexpr Dtype int8{Dtype::Val::int8, 1};
inline constexpr Dtype int16{Dtype::Val::int16, 2};
inline constexpr Dtype int32{Dtype::Val::int32, 4};
inline constexpr Dtype int64{Dtype::Val::int64, 8};
inline constexpr Dtype float16{Dtype::Val::float16, 2};
inline constexpr Dtype float32{Dtype::Val::float32, 4};
inline constexpr Dtype float64{Dtype::Val::float64, 8};
inline constexpr Dtype bfloat16{Dtype::Val::bfloat16, 2};
inline constexpr Dtype complex64{Dtype::Val::complex64, 8};

inline constexpr int kNumDtypes = 14;

// Abstract categories, for issubdtype-style checks.
enum class DtypeCategory {
  complexfloating,
  floating,
  inexact,
  signedinteger,
  unsignedinteger,
  integer,
  number,
  generic
};

Dtype::Kind kindof(Dtype t);
bool issubdtype(Dtype a, Dtype b);
bool issubdtype(Dtype a, DtypeCategory c);
bool issubdtype(DtypeCategory a, DtypeCategory b);

inline bool is_floating_point(Dtype t) {
  return t == float16 || t == bfloat16 || t == float32 || t == float64;
}
inline bool is_complex(Dtype t) { return t == complex64; }
inline bool is_inexact(Dtype t) { return is_floating_point(t) || is_complex(t); }
inline bool is_integral(Dtype t) { return !is_inexact(t) && t != bool_; }
inline bool is_unsigned(Dtype t) {
  return t == uint8 || t == uint16 || t == uint32 || t == uint64;
}

Dtype promote_types(Dtype a, Dtype b);
// The result of an op between an array of type `t` and a Python-style scalar
// of kind `scalar` (bool_, int32 for ints, float32 for floats, complex64):
// scalars are weak, so they never widen a type of their own kind.
Dtype promote_with_scalar(Dtype t, Dtype scalar);

// The dtype arithmetic on integers and bools becomes when it must be inexact
// (e.g. `mean`, `sqrt` on an int array): float32, as in MLX.
inline Dtype at_least_float(Dtype t) { return is_inexact(t) ? t : float32; }

const char* dtype_name(Dtype t);  // "float32"
std::ostream& operator<<(std::ostream& os, Dtype t);
std::ostream& operator<<(std::ostream& os, Dtype::Val t);

// The dtype sums and products of `t` (and their scans) accumulate in and
// return: bool and the small integer types widen to 32 bits (MLX). The
// one statement of this rule: ops use it for output dtypes, kernels for
// their C++ accumulator types (sum_type_t in dispatch.h).
constexpr Dtype sum_dtype(Dtype t) {
  if (t == bool_ || t == int8 || t == int16) {
    return int32;
  }
  if (t == uint8 || t == uint16) {
    return uint32;
  }
  return t;
}

template <typename T>
struct TypeToDtype;
// The C++ type of a dtype (the inverse of TypeToDtype).
template <Dtype::Val V>
struct DtypeToType;
#define FLUXION_TYPE_TO_DTYPE(T, D)   \
  template <>                         \
  struct TypeToDtype<T> {             \
    static constexpr Dtype value = D; \
  };                                  \
  template <>                         \
  struct DtypeToType<D.val> {         \
    using type = T;                   \
  };
FLUXION_TYPE_TO_DTYPE(bool, bool_)
FLUXION_TYPE_TO_DTYPE(uint8_t, uint8)
FLUXION_TYPE_TO_DTYPE(uint16_t, uint16)
FLUXION_TYPE_TO_DTYPE(uint32_t, uint32)
FLUXION_TYPE_TO_DTYPE(uint64_t, uint64)
FLUXION_TYPE_TO_DTYPE(int8_t, int8)
FLUXION_TYPE_TO_DTYPE(int16_t, int16)
FLUXION_TYPE_TO_DTYPE(int32_t, int32)
FLUXION_TYPE_TO_DTYPE(int64_t, int64)
FLUXION_TYPE_TO_DTYPE(float16_t, float16)
FLUXION_TYPE_TO_DTYPE(bfloat16_t, bfloat16)
FLUXION_TYPE_TO_DTYPE(float, float32)
FLUXION_TYPE_TO_DTYPE(double, float64)
FLUXION_TYPE_TO_DTYPE(complex64_t, complex64)
#undef FLUXION_TYPE_TO_DTYPE
// `long long` and `unsigned long long` are distinct from int64_t/uint64_t on
// Linux; map them too so literals like 3LL work.
template <>
struct TypeToDtype<long long> {
  static constexpr Dtype value = int64;
};
template <>
struct TypeToDtype<unsigned long long> {
  static constexpr Dtype value = uint64;
};

template <typename T>
inline constexpr Dtype dtype_of = TypeToDtype<T>::value;

// A C++ type with a Fluxion dtype. Constraining templates on it keeps
// overload resolution from instantiating dtype_of<std::vector<int>> (a hard
// error rather than a discarded candidate).
template <typename T>
concept HasDtype = requires { TypeToDtype<T>::value; };

}  // namespace fluxion
