// The op spec of the unary elementwise primitives: one entry per primitive
// (issue 32 item 1; docs/architecture.md, "How to add an op", D37). Every
// fact about such an op that is not its math or its derivative is written
// here once, and the rest of the code expands this list:
//  - fluxion/ops/unary.h: the op function's declaration and the primitive's
//    class (its output dtype and which rules it declares);
//  - fluxion/ops/unary.cpp: the op function (the dtype policy's checks and
//    casts);
//  - fluxion/primitive_list.h: the registry entry, and from it the import
//    table of export, the no-GPU stand-ins and the kernel-coverage table;
//  - backend/cpu/unary.cpp and backend/cuda/unary.cu: the kernels, by
//    dispatching the dtypes listed here to the functor detail::CLASS
//    (backend/common/unary_ops.h), which compile's generated kernels call
//    too;
//  - python/src/ops_elementwise.cpp: the binding and its docstring;
//  - python/fluxion/core.pyi and docs/api/ops.rst: the stub and the
//    reference line, which tools/gen_op_spec.py writes from this file
//    (tests/python/test_op_spec.py fails when they differ from it).
// Written by hand beside the op stay what JAX keeps beside its primitives
// too: the functor (the math, shared by every backend), the derivative or
// the jvp/vjp of the op (unary.cpp), and a record in the op table
// (tests/cpp/op_table_core.cpp). vmap and the output shape are the
// UnaryPrimitive base's.
//
// FLUXION_UNARY_SPEC(U, A) expands to
// U(A, CLASS, NAME, POLICY, KERNEL, TYPES, RULES, CPU, GPU, SUMMARY, RESULT)
// per primitive, A passed through unchanged (so that a list expanding the
// spec can hand it the macro it was given itself, as primitive_list.h):
//  CLASS    the primitive (and its functor detail::CLASS).
//  NAME     the op: C++ function fluxion::NAME and Python fluxion.core.NAME;
//           the name in its error messages.
//  POLICY   what the op accepts and returns:
//             inexact    integers and bool cast to float32 first; real and
//                        complex in, the same dtype out;
//             real       as inexact, complex rejected ("[NAME] Not
//                        supported for complex64 inputs.");
//             real_keep  complex rejected, every other dtype kept (integers
//                        pass through the functor unchanged);
//             same       every dtype, the same dtype out;
//             to_real    every dtype; complex64 gives float32;
//             to_bool    every dtype, bool out (predicates);
//             custom     the op function is written by hand in unary.cpp
//                        (its own checks or parameters), and declared,
//                        bound and documented by hand too (SUMMARY and
//                        RESULT are empty); the output dtype is the
//                        input's.
//  KERNEL   math: the CPU takes a vector-math kernel where simd.h has one
//           and splits work over threads sooner (transcendentals are
//           compute-bound); plain: the scalar functor only.
//  TYPES    the dtypes both backends instantiate the kernel for
//           (dispatch.h's lists); the to_real and to_bool policies take
//           AllTypes.
//  RULES    derivative: a smooth op, UnaryPrimitive's jvp/vjp from its
//           CLASS::derivative; own: jvp and vjp of its own (linear or
//           non-holomorphic ops); none: a zero derivative (steps,
//           predicates).
//  CPU, GPU 1 when that backend has the kernel (as primitive_list.h).
//  SUMMARY, RESULT  the docstring's summary line and what its result holds.
//
// Entries in the order of the registry (primitive_list.h).
#pragma once

// clang-format off
#define FLUXION_UNARY_SPEC(U, A)                                               \
  U(A, Abs, abs, to_real, plain, AllTypes, own, 1, 1,                          \
    "Element-wise absolute value.",                                            \
    "``|a|``, with the dtype of ``a``.")                                       \
  U(A, Negative, negative, custom, plain, AllTypes, own, 1, 1,                 \
    "", "")                                                                    \
  U(A, Sign, sign, same, plain, AllTypes, none, 1, 1,                          \
    "Element-wise sign: -1, 0 or 1.",                                          \
    "The sign of each element (for complex input ``a / |a|``).")               \
  U(A, Exp, exp, inexact, math, InexactTypes, derivative, 1, 1,                \
    "Element-wise exponential.",                                               \
    "``e ** a``; integer input gives ``float32``.")                            \
  U(A, Expm1, expm1, real, math, FloatTypes, derivative, 1, 1,                 \
    "Element-wise ``exp(a) - 1``, accurate for small ``a``.",                  \
    "``exp(a) - 1``; integer input gives ``float32``.")                        \
  U(A, Log, log, inexact, math, InexactTypes, derivative, 1, 1,                \
    "Element-wise natural logarithm.",                                         \
    "``ln(a)`` (NaN for negative input, -inf at 0).")                          \
  U(A, Log1p, log1p, inexact, math, InexactTypes, derivative, 1, 1,            \
    "Element-wise ``log(1 + a)``, accurate for small ``a``.",                  \
    "``ln(1 + a)``.")                                                          \
  U(A, Log2, log2, inexact, math, InexactTypes, derivative, 1, 1,              \
    "Element-wise base-2 logarithm.",                                          \
    "``log2(a)``.")                                                            \
  U(A, Log10, log10, inexact, math, InexactTypes, derivative, 1, 1,            \
    "Element-wise base-10 logarithm.",                                         \
    "``log10(a)``.")                                                           \
  U(A, Sqrt, sqrt, inexact, math, InexactTypes, derivative, 1, 1,              \
    "Element-wise square root.",                                               \
    "``a ** 0.5`` (NaN for negative real input).")                             \
  U(A, Rsqrt, rsqrt, inexact, math, InexactTypes, derivative, 1, 1,            \
    "Element-wise reciprocal square root.",                                    \
    "``1 / sqrt(a)``.")                                                        \
  U(A, Square, square, same, plain, AllTypes, derivative, 1, 1,                \
    "Element-wise square.",                                                    \
    "``a * a``, with the dtype of ``a``.")                                     \
  U(A, Reciprocal, reciprocal, inexact, plain, InexactTypes, derivative, 1, 1, \
    "Element-wise reciprocal.",                                                \
    "``1 / a``.")                                                              \
  U(A, Sin, sin, inexact, math, InexactTypes, derivative, 1, 1,                \
    "Element-wise sine (radians).",                                            \
    "``sin(a)``.")                                                             \
  U(A, Cos, cos, inexact, math, InexactTypes, derivative, 1, 1,                \
    "Element-wise cosine (radians).",                                          \
    "``cos(a)``.")                                                             \
  U(A, Tan, tan, inexact, math, InexactTypes, derivative, 1, 1,                \
    "Element-wise tangent (radians).",                                         \
    "``tan(a)``.")                                                             \
  U(A, ArcSin, arcsin, inexact, math, InexactTypes, derivative, 1, 1,          \
    "Element-wise inverse sine.",                                              \
    "``arcsin(a)`` in radians, NaN outside [-1, 1].")                          \
  U(A, ArcCos, arccos, inexact, math, InexactTypes, derivative, 1, 1,          \
    "Element-wise inverse cosine.",                                            \
    "``arccos(a)`` in radians, NaN outside [-1, 1].")                          \
  U(A, ArcTan, arctan, inexact, math, InexactTypes, derivative, 1, 1,          \
    "Element-wise inverse tangent.",                                           \
    "``arctan(a)`` in radians.")                                               \
  U(A, Sinh, sinh, inexact, math, InexactTypes, derivative, 1, 1,              \
    "Element-wise hyperbolic sine.",                                           \
    "``sinh(a)``.")                                                            \
  U(A, Cosh, cosh, inexact, math, InexactTypes, derivative, 1, 1,              \
    "Element-wise hyperbolic cosine.",                                         \
    "``cosh(a)``.")                                                            \
  U(A, Tanh, tanh, inexact, math, InexactTypes, derivative, 1, 1,              \
    "Element-wise hyperbolic tangent.",                                        \
    "``tanh(a)``.")                                                            \
  U(A, ArcSinh, arcsinh, inexact, math, InexactTypes, derivative, 1, 1,        \
    "Element-wise inverse hyperbolic sine.",                                   \
    "``arcsinh(a)``.")                                                         \
  U(A, ArcCosh, arccosh, inexact, math, InexactTypes, derivative, 1, 1,        \
    "Element-wise inverse hyperbolic cosine.",                                 \
    "``arccosh(a)``, NaN below 1.")                                            \
  U(A, ArcTanh, arctanh, inexact, math, InexactTypes, derivative, 1, 1,        \
    "Element-wise inverse hyperbolic tangent.",                                \
    "``arctanh(a)``, NaN outside [-1, 1].")                                    \
  U(A, Sigmoid, sigmoid, real, math, InexactTypes, derivative, 1, 1,           \
    "Element-wise logistic sigmoid ``1 / (1 + exp(-a))``.",                    \
    "Values in (0, 1).")                                                       \
  U(A, Erf, erf, real, math, FloatTypes, derivative, 1, 1,                     \
    "Element-wise Gauss error function.",                                      \
    "``erf(a)``, values in [-1, 1].")                                          \
  U(A, Erfc, erfc, real, math, FloatTypes, derivative, 1, 1,                  \
    "Element-wise complementary error function ``1 - erf(a)``.",               \
    "``erfc(a)``, values in [0, 2], accurate where ``erf(a)`` is near 1.")     \
  U(A, ErfInv, erfinv, real, math, FloatTypes, derivative, 1, 1,               \
    "Element-wise inverse of the error function.",                             \
    "``x`` with ``erf(x) == a``; +-inf at +-1.")                               \
  U(A, Floor, floor, real_keep, plain, RealTypes, none, 1, 1,                  \
    "Element-wise floor.",                                                     \
    "The largest integer not above each element (integers unchanged).")        \
  U(A, Ceil, ceil, real_keep, plain, RealTypes, none, 1, 1,                    \
    "Element-wise ceiling.",                                                   \
    "The smallest integer not below each element (integers unchanged).")       \
  U(A, Round, round, custom, plain, AllTypes, none, 1, 1,                      \
    "", "")                                                                    \
  U(A, LogicalNot, logical_not, to_bool, plain, AllTypes, none, 1, 1,          \
    "Element-wise logical not.",                                               \
    "A ``bool`` array, ``True`` where ``a`` is zero.")                         \
  U(A, IsNan, isnan, to_bool, plain, AllTypes, none, 1, 1,                     \
    "Test element-wise for NaN.",                                              \
    "A ``bool`` array, ``True`` where ``a`` is NaN.")                          \
  U(A, IsInf, isinf, to_bool, plain, AllTypes, none, 1, 1,                     \
    "Test element-wise for positive or negative infinity.",                    \
    "A ``bool`` array, ``True`` where ``a`` is +-inf.")                        \
  U(A, IsFinite, isfinite, to_bool, plain, AllTypes, none, 1, 1,               \
    "Test element-wise for finiteness.",                                       \
    "A ``bool`` array, ``True`` where ``a`` is neither NaN nor +-inf.")        \
  U(A, Conjugate, conjugate, same, plain, AllTypes, own, 1, 1,                 \
    "Element-wise complex conjugate.",                                         \
    "The conjugate of ``a`` (real input unchanged).")                          \
  U(A, Real, real, to_real, plain, AllTypes, own, 1, 1,                        \
    "The real part of each element.",                                          \
    "A real array (``float32`` for ``complex64``).")                           \
  U(A, Imag, imag, to_real, plain, AllTypes, own, 1, 1,                        \
    "The imaginary part of each element.",                                     \
    "A real array; zeros for real input.")
// clang-format on

// The registry's entries (primitive_list.h expands them into
// FLUXION_PRIMITIVES): X(CLASS, unary, CPU, GPU).
#define FLUXION_UNARY_SPEC_TO_REGISTRY(X, CLASS, NAME, POLICY, KERNEL, TYPES, \
                                       RULES, CPU, GPU, SUMMARY, RESULT)      \
  X(CLASS, unary, CPU, GPU)

// FLUXION_UNARY_IF_OP(POLICY)(code...): `code`, unless POLICY is custom
// (an op function written by hand, for which nothing is generated).
#define FLUXION_UNARY_IF_OP(POLICY) FLUXION_UNARY_IF_OP_##POLICY
#define FLUXION_UNARY_IF_OP_inexact(...) __VA_ARGS__
#define FLUXION_UNARY_IF_OP_real(...) __VA_ARGS__
#define FLUXION_UNARY_IF_OP_real_keep(...) __VA_ARGS__
#define FLUXION_UNARY_IF_OP_same(...) __VA_ARGS__
#define FLUXION_UNARY_IF_OP_to_real(...) __VA_ARGS__
#define FLUXION_UNARY_IF_OP_to_bool(...) __VA_ARGS__
#define FLUXION_UNARY_IF_OP_custom(...)
