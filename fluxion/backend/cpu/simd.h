// Vectorized float32/float64 kernels for transcendental unary ops (AVX2 +
// FMA through SLEEF or libmvec, see simd_avx2.cpp), picked at run time:
// f32<Op>() is null when the CPU or the build has no vector version, and
// callers fall back to the scalar functor (backend/common/unary_ops.h),
// which is the reference: the two agree to a few ulps (tested).
#pragma once

#include <cstdint>

#include "fluxion/backend/common/unary_ops.h"

namespace fluxion::cpu::simd {

// Whether the vector kernels are handed out (default: yes). Tests turn
// them off to compare the kernels compile generates with the scalar
// functors, the reference they stand in for. Defined in unary.cpp (a
// baseline file: code in simd_avx2.cpp may use AVX2 anywhere).
void set_enabled(bool on);
bool enabled();

using F32Kernel = void (*)(const float*, float*, int64_t);
using F64Kernel = void (*)(const double*, double*, int64_t);

template <typename Op>
F32Kernel f32() {
  return nullptr;
}
template <typename Op>
F64Kernel f64() {
  return nullptr;
}

#define FLUXION_SIMD_DECL(OP)           \
  template <>                           \
  F32Kernel f32<detail::OP>();          \
  template <>                           \
  F64Kernel f64<detail::OP>();
FLUXION_SIMD_DECL(Exp)
FLUXION_SIMD_DECL(Expm1)
FLUXION_SIMD_DECL(Log)
FLUXION_SIMD_DECL(Log1p)
FLUXION_SIMD_DECL(Log2)
FLUXION_SIMD_DECL(Log10)
FLUXION_SIMD_DECL(Sqrt)
FLUXION_SIMD_DECL(Rsqrt)
FLUXION_SIMD_DECL(Sin)
FLUXION_SIMD_DECL(Cos)
FLUXION_SIMD_DECL(Tan)
FLUXION_SIMD_DECL(ArcSin)
FLUXION_SIMD_DECL(ArcCos)
FLUXION_SIMD_DECL(ArcTan)
FLUXION_SIMD_DECL(Sinh)
FLUXION_SIMD_DECL(Cosh)
FLUXION_SIMD_DECL(Tanh)
FLUXION_SIMD_DECL(ArcSinh)
FLUXION_SIMD_DECL(ArcCosh)
FLUXION_SIMD_DECL(ArcTanh)
FLUXION_SIMD_DECL(Sigmoid)
FLUXION_SIMD_DECL(Erf)
FLUXION_SIMD_DECL(ErfInv)
#undef FLUXION_SIMD_DECL

}  // namespace fluxion::cpu::simd
