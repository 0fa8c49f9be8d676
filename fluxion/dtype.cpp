#include "fluxion/dtype.h"

#include <stdexcept>

namespace fluxion {

namespace {

constexpr Dtype kAll[kNumDtypes] = {bool_,   uint8,   uint16,  uint32, uint64,
                                    int8,    int16,   int32,   int64,  float16,
                                    float32, float64, bfloat16, complex64};

// MLX's promotion table, indexed by Dtype::Val.
#define b bool_
#define u8 uint8
#define u16 uint16
#define u32 uint32
#define u64 uint64
#define i8 int8
#define i16 int16
#define i32 int32
#define i64 int64
#define f16 float16
#define f32 float32
#define f64 float64
#define bf bfloat16
#define c64 complex64
constexpr Dtype kPromote[kNumDtypes][kNumDtypes] = {
    // b    u8   u16  u32  u64  i8   i16  i32  i64  f16  f32  f64  bf   c64
    {b, u8, u16, u32, u64, i8, i16, i32, i64, f16, f32, f64, bf, c64},  // b
    {u8, u8, u16, u32, u64, i16, i16, i32, i64, f16, f32, f64, bf, c64},
    {u16, u16, u16, u32, u64, i32, i32, i32, i64, f16, f32, f64, bf, c64},
    {u32, u32, u32, u32, u64, i64, i64, i64, i64, f16, f32, f64, bf, c64},
    {u64, u64, u64, u64, u64, f32, f32, f32, f32, f16, f32, f64, bf, c64},
    {i8, i16, i32, i64, f32, i8, i16, i32, i64, f16, f32, f64, bf, c64},
    {i16, i16, i32, i64, f32, i16, i16, i32, i64, f16, f32, f64, bf, c64},
    {i32, i32, i32, i64, f32, i32, i32, i32, i64, f16, f32, f64, bf, c64},
    {i64, i64, i64, i64, f32, i64, i64, i64, i64, f16, f32, f64, bf, c64},
    {f16, f16, f16, f16, f16, f16, f16, f16, f16, f16, f32, f64, f32, c64},
    {f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f64, f32, c64},
    {f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, c64},
    {bf, bf, bf, bf, bf, bf, bf, bf, bf, f32, f32, f64, bf, c64},
    {c64, c64, c64, c64, c64, c64, c64, c64, c64, c64, c64, c64, c64, c64},
};
#undef b
#undef u8
#undef u16
#undef u32
#undef u64
#undef i8
#undef i16
#undef i32
#undef i64
#undef f16
#undef f32
#undef f64
#undef bf
#undef c64

}  // namespace

Dtype promote_types(Dtype a, Dtype b) {
  return kPromote[static_cast<int>(a.val)][static_cast<int>(b.val)];
}

Dtype promote_with_scalar(Dtype t, Dtype scalar) {
  if (scalar == bool_) {
    return t;
  }
  if (scalar == complex64) {
    return complex64;
  }
  if (is_inexact(scalar)) {
    return is_inexact(t) ? t : float32;
  }
  // An int scalar: keeps any numeric type; a bool array becomes int32.
  return t == bool_ ? int32 : t;
}

Dtype::Kind kindof(Dtype t) {
  switch (t.val) {
    case Dtype::Val::bool_:
      return Dtype::Kind::b;
    case Dtype::Val::uint8:
    case Dtype::Val::uint16:
    case Dtype::Val::uint32:
    case Dtype::Val::uint64:
      return Dtype::Kind::u;
    case Dtype::Val::int8:
    case Dtype::Val::int16:
    case Dtype::Val::int32:
    case Dtype::Val::int64:
      return Dtype::Kind::i;
    case Dtype::Val::float16:
    case Dtype::Val::float32:
    case Dtype::Val::float64:
      return Dtype::Kind::f;
    case Dtype::Val::bfloat16:
      return Dtype::Kind::V;
    case Dtype::Val::complex64:
      return Dtype::Kind::c;
  }
  return Dtype::Kind::b;
}

bool issubdtype(Dtype a, Dtype b) { return a == b; }

bool issubdtype(DtypeCategory a, DtypeCategory b) {
  using C = DtypeCategory;
  if (a == b || b == C::generic) {
    return true;
  }
  switch (a) {
    case C::complexfloating:
    case C::floating:
      return b == C::inexact || b == C::number;
    case C::signedinteger:
    case C::unsignedinteger:
      return b == C::integer || b == C::number;
    case C::integer:
    case C::inexact:
      return b == C::number;
    default:
      return false;
  }
}

bool issubdtype(Dtype t, DtypeCategory c) {
  using C = DtypeCategory;
  DtypeCategory own;
  if (t == bool_) {
    return c == C::generic;
  } else if (is_complex(t)) {
    own = C::complexfloating;
  } else if (is_floating_point(t)) {
    own = C::floating;
  } else if (is_unsigned(t)) {
    own = C::unsignedinteger;
  } else {
    own = C::signedinteger;
  }
  return issubdtype(own, c);
}

const char* dtype_name(Dtype t) {
  static const char* names[kNumDtypes] = {
      "bool",  "uint8", "uint16",  "uint32",  "uint64",  "int8",     "int16",
      "int32", "int64", "float16", "float32", "float64", "bfloat16", "complex64"};
  return names[static_cast<int>(t.val)];
}

std::ostream& operator<<(std::ostream& os, Dtype t) {
  return os << dtype_name(t);
}
std::ostream& operator<<(std::ostream& os, Dtype::Val t) {
  return os << dtype_name(kAll[static_cast<int>(t)]);
}

}  // namespace fluxion
