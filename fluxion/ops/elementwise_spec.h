// The op specs of the elementwise primitives: FLUXION_UNARY_SPEC below, and
// FLUXION_BINARY_SPEC after it, one entry per primitive (issue 32 item 1;
// docs/architecture.md, "How to add an op", D37). The unary spec: every
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

// The op spec of the binary elementwise primitives (D37): one entry per
// primitive, expanded the same way as the unary spec above into
//  - fluxion/ops/binary.h: the op function's declaration and the
//    primitive's class (its output dtype and which rules it declares);
//  - fluxion/ops/binary.cpp: the op function (the dtype policy's checks,
//    promotion and casts, then the broadcast and the node: make_binary);
//  - fluxion/primitive_list.h: the registry entry;
//  - backend/cpu/binary.cpp and backend/cuda/binary_*.cu: the kernels,
//    dispatching TYPES to the functor detail::CLASS
//    (backend/common/binary_ops.h);
//  - python/src/ops_elementwise.cpp: the binding and its docstring;
//  - python/fluxion/core.pyi and docs/api/ops.rst: the stub and the
//    reference line (tools/gen_op_spec.py).
// Written by hand stay the functor, the partial derivatives or the jvp/vjp
// (binary.cpp) and a record in the op table (tests/cpp/op_table_core.cpp);
// vmap, broadcasting's rules and the output shape are BinaryPrimitive's.
//
// FLUXION_BINARY_SPEC(B, A) expands to
// B(A, CLASS, NAME, POLICY, FORM, TYPES, RULES, CPU, GPU, CU, SUMMARY, RESULT)
// per primitive, A passed through unchanged:
//  CLASS    the primitive (and its functor detail::CLASS).
//  NAME     the op: C++ fluxion::NAME(a, b, s), Python fluxion.core.NAME(a,
//           b) (scalars weakly typed); the name in its error messages.
//  POLICY   the dtype both operands are cast to (the compute dtype) and
//           the output's, after NumPy broadcasting:
//             promote       promote_types(a, b), the same dtype out;
//             inexact       as promote, integers and bool then float32;
//             real          as promote, complex rejected ("[NAME] Not
//                           supported for complex64 inputs.");
//             real_inexact  as inexact, complex rejected;
//             compare       promote_types(a, b), bool out;
//             logical       both cast to bool, bool out;
//             bitwise       as promote, floating and complex rejected
//                           ("[NAME] Only integer and boolean types are
//                           supported; got A and B.");
//             custom        the op function is written by hand in
//                           binary.cpp (checks of its own; the output
//                           dtype is the compute dtype); its declaration,
//                           binding and docs still come from here.
//  FORM     spec: the class and both kernels come from this entry;
//           cpu_kernel: the class and the GPU kernel do, the CPU kernel is
//           written by hand (Power: x * x for a scalar exponent of 2);
//           class: the class (a parameter) and both kernels are written by
//           hand (Equal: equal_nan).
//  TYPES    the compute dtypes both backends instantiate (dispatch.h).
//  RULES    partial: a smooth op, BinaryPrimitive's jvp/vjp from its
//           CLASS::partial; own: jvp and vjp of its own (linear ops);
//           none: zero derivatives (piecewise constant ops).
//  CPU, GPU 1 when that backend has the kernel (as primitive_list.h).
//  CU       the CUDA file of its kernel, backend/cuda/binary_CU.cu (arith,
//           math, compare: three files that nvcc builds in parallel).
//  SUMMARY, RESULT  the docstring's summary line and what its result holds.
//
// Entries in the order of the registry (primitive_list.h).

// clang-format off
#define FLUXION_BINARY_SPEC(B, A)                                              \
  B(A, Add, add, promote, spec, AllTypes, own, 1, 1, arith,                    \
    "Element-wise sum ``a + b``, with broadcasting.",                          \
    "``a + b``.")                                                              \
  B(A, Subtract, subtract, custom, spec, AllTypes, own, 1, 1, arith,           \
    "Element-wise difference ``a - b``, with broadcasting.",                   \
    "``a - b``.")                                                              \
  B(A, Multiply, multiply, promote, spec, AllTypes, partial, 1, 1, arith,      \
    "Element-wise product ``a * b``, with broadcasting.",                      \
    "``a * b``.")                                                              \
  B(A, Divide, divide, inexact, spec, InexactTypes, partial, 1, 1, arith,      \
    "Element-wise true division ``a / b``.",                                   \
    "``a / b``; integer operands give ``float32``.")                           \
  B(A, FloorDivide, floor_divide, real, spec, RealTypes, none, 1, 1, arith,    \
    "Element-wise floor division ``a // b``.",                                 \
    "``floor(a / b)``; integers stay integers.")                               \
  B(A, Remainder, remainder, real, spec, RealTypes, partial, 1, 1, arith,      \
    "Element-wise remainder ``a % b``, with the sign of ``b`` (as Python).",   \
    "``a - b * floor(a / b)``.")                                               \
  B(A, Power, power, promote, cpu_kernel, AllTypes, partial, 1, 1, arith,      \
    "Element-wise power ``a ** b``.",                                          \
    "``a`` raised to ``b``.")                                                  \
  B(A, Maximum, maximum, promote, spec, AllTypes, partial, 1, 1, math,         \
    "Element-wise maximum of two arrays (NaN propagates).",                    \
    "The larger of each pair.")                                                \
  B(A, Minimum, minimum, promote, spec, AllTypes, partial, 1, 1, math,         \
    "Element-wise minimum of two arrays (NaN propagates).",                    \
    "The smaller of each pair.")                                               \
  B(A, ArcTan2, arctan2, real_inexact, spec, FloatTypes, partial, 1, 1, math,  \
    "Element-wise ``arctan(a / b)`` using the signs of both to pick the "      \
    "quadrant.",                                                               \
    "Angles in radians in [-pi, pi].")                                         \
  B(A, LogAddExp, logaddexp, inexact, spec, InexactTypes, partial, 1, 1, math, \
    "Element-wise ``log(exp(a) + exp(b))``, computed without overflow.",       \
    "``log(exp(a) + exp(b))``.")                                               \
  B(A, Equal, equal, compare, class, AllTypes, none, 1, 1, compare,            \
    "Element-wise ``a == b``.",                                                \
    "A ``bool`` array.")                                                       \
  B(A, NotEqual, not_equal, compare, spec, AllTypes, none, 1, 1, compare,      \
    "Element-wise ``a != b``.",                                                \
    "A ``bool`` array.")                                                       \
  B(A, Less, less, compare, spec, AllTypes, none, 1, 1, compare,               \
    "Element-wise ``a < b``.",                                                 \
    "A ``bool`` array.")                                                       \
  B(A, LessEqual, less_equal, compare, spec, AllTypes, none, 1, 1, compare,    \
    "Element-wise ``a <= b``.",                                                \
    "A ``bool`` array.")                                                       \
  B(A, Greater, greater, compare, spec, AllTypes, none, 1, 1, compare,         \
    "Element-wise ``a > b``.",                                                 \
    "A ``bool`` array.")                                                       \
  B(A, GreaterEqual, greater_equal, compare, spec, AllTypes, none, 1, 1,       \
    compare,                                                                   \
    "Element-wise ``a >= b``.",                                                \
    "A ``bool`` array.")                                                       \
  B(A, LogicalAnd, logical_and, logical, spec, TypeList<bool>, none, 1, 1,     \
    compare,                                                                   \
    "Element-wise logical and (nonzero is true).",                             \
    "A ``bool`` array.")                                                       \
  B(A, LogicalOr, logical_or, logical, spec, TypeList<bool>, none, 1, 1,       \
    compare,                                                                   \
    "Element-wise logical or (nonzero is true).",                              \
    "A ``bool`` array.")                                                       \
  B(A, BitwiseAnd, bitwise_and, bitwise, spec, IntBoolTypes, none, 1, 1,       \
    compare,                                                                   \
    "Element-wise bitwise and of integer or boolean arrays.",                  \
    "``a & b``.")                                                              \
  B(A, BitwiseOr, bitwise_or, bitwise, spec, IntBoolTypes, none, 1, 1,         \
    compare,                                                                   \
    "Element-wise bitwise or of integer or boolean arrays.",                   \
    "``a | b``.")                                                              \
  B(A, BitwiseXor, bitwise_xor, bitwise, spec, IntBoolTypes, none, 1, 1,       \
    compare,                                                                   \
    "Element-wise bitwise exclusive or of integer or boolean arrays.",         \
    "``a ^ b``.")                                                              \
  B(A, LeftShift, left_shift, bitwise, spec, IntBoolTypes, none, 1, 1,         \
    compare,                                                                   \
    "Element-wise left shift of integers ``a << b``.",                         \
    "``a << b``.")                                                             \
  B(A, RightShift, right_shift, bitwise, spec, IntBoolTypes, none, 1, 1,       \
    compare,                                                                   \
    "Element-wise right shift of integers ``a >> b``.",                        \
    "``a >> b``.")
// clang-format on

// The registry's entries: X(CLASS, binary, CPU, GPU).
#define FLUXION_BINARY_SPEC_TO_REGISTRY(X, CLASS, NAME, POLICY, FORM, TYPES,  \
                                        RULES, CPU, GPU, CU, SUMMARY, RESULT) \
  X(CLASS, binary, CPU, GPU)

// FLUXION_BINARY_IF_OP(POLICY)(code...): `code` unless POLICY is custom.
#define FLUXION_BINARY_IF_OP(POLICY) FLUXION_BINARY_IF_OP_##POLICY
#define FLUXION_BINARY_IF_OP_promote(...) __VA_ARGS__
#define FLUXION_BINARY_IF_OP_inexact(...) __VA_ARGS__
#define FLUXION_BINARY_IF_OP_real(...) __VA_ARGS__
#define FLUXION_BINARY_IF_OP_real_inexact(...) __VA_ARGS__
#define FLUXION_BINARY_IF_OP_compare(...) __VA_ARGS__
#define FLUXION_BINARY_IF_OP_logical(...) __VA_ARGS__
#define FLUXION_BINARY_IF_OP_bitwise(...) __VA_ARGS__
#define FLUXION_BINARY_IF_OP_custom(...)
// FLUXION_BINARY_IF_CLASS(FORM)(code...): `code` unless the class is
// written by hand (FORM class).
#define FLUXION_BINARY_IF_CLASS(FORM) FLUXION_BINARY_IF_CLASS_##FORM
#define FLUXION_BINARY_IF_CLASS_spec(...) __VA_ARGS__
#define FLUXION_BINARY_IF_CLASS_cpu_kernel(...) __VA_ARGS__
#define FLUXION_BINARY_IF_CLASS_class(...)
// FLUXION_BINARY_IF_CPU_KERNEL(FORM)(code...): `code` when the spec gives
// the CPU kernel (FORM spec). The GPU kernel follows FLUXION_BINARY_IF_CLASS.
#define FLUXION_BINARY_IF_CPU_KERNEL(FORM) FLUXION_BINARY_IF_CPU_KERNEL_##FORM
#define FLUXION_BINARY_IF_CPU_KERNEL_spec(...) __VA_ARGS__
#define FLUXION_BINARY_IF_CPU_KERNEL_cpu_kernel(...)
#define FLUXION_BINARY_IF_CPU_KERNEL_class(...)
