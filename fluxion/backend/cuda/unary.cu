// GPU kernels of the unary primitives: one line per op, with the dtypes
// the CPU instantiates it for (backend/cpu/unary.cpp) and the shared
// functor (backend/common/unary_ops.h).
#include "fluxion/backend/cuda/elementwise.cuh"
#include "fluxion/ops/unary.h"

namespace fluxion {

namespace {

template <typename List, typename Op>
void same_type(const array& in, array& out, const char* name) {
  cu::dispatch_gpu<List>(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cu::unary<T, T, Op>(in, out, name);
  });
}

template <typename Op>
void to_bool(const array& in, array& out, const char* name) {
  cu::dispatch_gpu<AllTypes>(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cu::unary<T, bool, Op>(in, out, name);
  });
}

// abs, real and imag: float32 out of complex64, the input's dtype else.
template <typename Op>
void to_real(const array& in, array& out, const char* name) {
  cu::dispatch_gpu<AllTypes>(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (math::is_complex_v<T>) {
      cu::unary<T, float, Op>(in, out, name);
    } else {
      cu::unary<T, T, Op>(in, out, name);
    }
  });
}

}  // namespace

#define FLUXION_GPU_UNARY(NAME, LIST, OPNAME)                              \
  void NAME::eval_gpu(const std::vector<array>& in,                        \
                      std::vector<array>& out) {                           \
    same_type<LIST, detail::NAME>(in[0], out[0], OPNAME);                  \
  }
#define FLUXION_GPU_TO_REAL(NAME, OPNAME)                                  \
  void NAME::eval_gpu(const std::vector<array>& in,                        \
                      std::vector<array>& out) {                           \
    to_real<detail::NAME>(in[0], out[0], OPNAME);                          \
  }
#define FLUXION_GPU_PREDICATE(NAME, OPNAME)                                \
  void NAME::eval_gpu(const std::vector<array>& in,                        \
                      std::vector<array>& out) {                           \
    to_bool<detail::NAME>(in[0], out[0], OPNAME);                          \
  }

FLUXION_GPU_TO_REAL(Abs, "abs")
FLUXION_GPU_UNARY(Negative, AllTypes, "negative")
FLUXION_GPU_UNARY(Sign, AllTypes, "sign")
FLUXION_GPU_UNARY(Exp, InexactTypes, "exp")
FLUXION_GPU_UNARY(Expm1, FloatTypes, "expm1")
FLUXION_GPU_UNARY(Log, InexactTypes, "log")
FLUXION_GPU_UNARY(Log1p, InexactTypes, "log1p")
FLUXION_GPU_UNARY(Log2, InexactTypes, "log2")
FLUXION_GPU_UNARY(Log10, InexactTypes, "log10")
FLUXION_GPU_UNARY(Sqrt, InexactTypes, "sqrt")
FLUXION_GPU_UNARY(Rsqrt, InexactTypes, "rsqrt")
FLUXION_GPU_UNARY(Square, AllTypes, "square")
FLUXION_GPU_UNARY(Reciprocal, InexactTypes, "reciprocal")
FLUXION_GPU_UNARY(Sin, InexactTypes, "sin")
FLUXION_GPU_UNARY(Cos, InexactTypes, "cos")
FLUXION_GPU_UNARY(Tan, InexactTypes, "tan")
FLUXION_GPU_UNARY(ArcSin, InexactTypes, "arcsin")
FLUXION_GPU_UNARY(ArcCos, InexactTypes, "arccos")
FLUXION_GPU_UNARY(ArcTan, InexactTypes, "arctan")
FLUXION_GPU_UNARY(Sinh, InexactTypes, "sinh")
FLUXION_GPU_UNARY(Cosh, InexactTypes, "cosh")
FLUXION_GPU_UNARY(Tanh, InexactTypes, "tanh")
FLUXION_GPU_UNARY(ArcSinh, InexactTypes, "arcsinh")
FLUXION_GPU_UNARY(ArcCosh, InexactTypes, "arccosh")
FLUXION_GPU_UNARY(ArcTanh, InexactTypes, "arctanh")
FLUXION_GPU_UNARY(Sigmoid, InexactTypes, "sigmoid")
FLUXION_GPU_UNARY(Erf, FloatTypes, "erf")
FLUXION_GPU_UNARY(ErfInv, FloatTypes, "erfinv")
FLUXION_GPU_UNARY(Floor, RealTypes, "floor")
FLUXION_GPU_UNARY(Ceil, RealTypes, "ceil")
FLUXION_GPU_UNARY(Round, AllTypes, "round")
FLUXION_GPU_UNARY(Conjugate, AllTypes, "conjugate")
FLUXION_GPU_TO_REAL(Real, "real")
FLUXION_GPU_TO_REAL(Imag, "imag")
FLUXION_GPU_PREDICATE(LogicalNot, "logical_not")
FLUXION_GPU_PREDICATE(IsNan, "isnan")
FLUXION_GPU_PREDICATE(IsInf, "isinf")
FLUXION_GPU_PREDICATE(IsFinite, "isfinite")
#undef FLUXION_GPU_UNARY
#undef FLUXION_GPU_PREDICATE
#undef FLUXION_GPU_TO_REAL

}  // namespace fluxion
