// The primitive registry: one list of every primitive of the library, with
// its family and which backends have a kernel for it. Nothing else lists
// the primitives:
//  - backend/no_gpu generates every eval_gpu from it (raising "[eval] Cannot
//    run <Name> on the gpu: Fluxion was built without a GPU backend."),
//    and each backend generates the kernels it lacks (a 0 in its column)
//    the same way (FLUXION_IF_NO_KERNEL). A primitive class declared with
//    FLUXION_DECLARE_EVAL but missing here therefore fails to link (its
//    eval_gpu is undefined), and an entry without a class fails to compile;
//    a 1 in a backend's column without a kernel fails to link too, and a
//    kernel defined next to a 0 is a duplicate definition.
//  - fluxion/primitive_registry.h turns it into a table at run time
//    (primitive_registry(), kernels_missing()), which the rules-coverage
//    test, fluxion_bench --kernels and fluxion.core._primitive_registry()
//    (tools/kernel_coverage.py) read.
//
// X(CLASS, FAMILY, CPU, GPU): CLASS relative to namespace fluxion (its
// last component is the primitive's name); FAMILY a bare word (the op
// family: the header it is declared in, or `view` for the primitives that
// move no data, evaluated in backend/common/views.cpp); CPU and GPU 1 when
// that backend defines the kernel (backend/cpu; the CUDA backend), else 0.
// Keep the families together, in the order of their headers.
#pragma once

// clang-format off
#define FLUXION_PRIMITIVES(X) \
  X(Abs, unary, 1, 0)                             \
  X(Negative, unary, 1, 0)                        \
  X(Sign, unary, 1, 0)                            \
  X(Exp, unary, 1, 0)                             \
  X(Expm1, unary, 1, 0)                           \
  X(Log, unary, 1, 0)                             \
  X(Log1p, unary, 1, 0)                           \
  X(Log2, unary, 1, 0)                            \
  X(Log10, unary, 1, 0)                           \
  X(Sqrt, unary, 1, 0)                            \
  X(Rsqrt, unary, 1, 0)                           \
  X(Square, unary, 1, 0)                          \
  X(Reciprocal, unary, 1, 0)                      \
  X(Sin, unary, 1, 0)                             \
  X(Cos, unary, 1, 0)                             \
  X(Tan, unary, 1, 0)                             \
  X(ArcSin, unary, 1, 0)                          \
  X(ArcCos, unary, 1, 0)                          \
  X(ArcTan, unary, 1, 0)                          \
  X(Sinh, unary, 1, 0)                            \
  X(Cosh, unary, 1, 0)                            \
  X(Tanh, unary, 1, 0)                            \
  X(ArcSinh, unary, 1, 0)                         \
  X(ArcCosh, unary, 1, 0)                         \
  X(ArcTanh, unary, 1, 0)                         \
  X(Sigmoid, unary, 1, 0)                         \
  X(Erf, unary, 1, 0)                             \
  X(ErfInv, unary, 1, 0)                          \
  X(Floor, unary, 1, 0)                           \
  X(Ceil, unary, 1, 0)                            \
  X(Round, unary, 1, 0)                           \
  X(LogicalNot, unary, 1, 0)                      \
  X(IsNan, unary, 1, 0)                           \
  X(IsInf, unary, 1, 0)                           \
  X(IsFinite, unary, 1, 0)                        \
  X(Conjugate, unary, 1, 0)                       \
  X(Real, unary, 1, 0)                            \
  X(Imag, unary, 1, 0)                            \
  X(Copy, unary, 1, 0)                            \
  X(Add, binary, 1, 0)                            \
  X(Subtract, binary, 1, 0)                       \
  X(Multiply, binary, 1, 0)                       \
  X(Divide, binary, 1, 0)                         \
  X(FloorDivide, binary, 1, 0)                    \
  X(Remainder, binary, 1, 0)                      \
  X(Power, binary, 1, 0)                          \
  X(Maximum, binary, 1, 0)                        \
  X(Minimum, binary, 1, 0)                        \
  X(ArcTan2, binary, 1, 0)                        \
  X(LogAddExp, binary, 1, 0)                      \
  X(Equal, binary, 1, 0)                          \
  X(NotEqual, binary, 1, 0)                       \
  X(Less, binary, 1, 0)                           \
  X(LessEqual, binary, 1, 0)                      \
  X(Greater, binary, 1, 0)                        \
  X(GreaterEqual, binary, 1, 0)                   \
  X(LogicalAnd, binary, 1, 0)                     \
  X(LogicalOr, binary, 1, 0)                      \
  X(BitwiseAnd, binary, 1, 0)                     \
  X(BitwiseOr, binary, 1, 0)                      \
  X(BitwiseXor, binary, 1, 0)                     \
  X(LeftShift, binary, 1, 0)                      \
  X(RightShift, binary, 1, 0)                     \
  X(AsType, misc, 1, 0)                           \
  X(Select, misc, 1, 0)                           \
  X(Reduce, reduce, 1, 0)                         \
  X(ArgReduce, reduce, 1, 0)                      \
  X(NumberOfElements, reduce, 1, 0)               \
  X(Reshape, view, 1, 0)                          \
  X(Transpose, view, 1, 0)                        \
  X(Broadcast, view, 1, 0)                        \
  X(ExpandDims, view, 1, 0)                       \
  X(Squeeze, view, 1, 0)                          \
  X(Slice, view, 1, 0)                            \
  X(AsStrided, view, 1, 0)                        \
  X(View, view, 1, 0)                             \
  X(Contiguous, view, 1, 0)                       \
  X(StopGradient, view, 1, 0)                     \
  X(Depends, view, 1, 0)                          \
  X(CustomTransforms, view, 1, 0)                 \
  X(SliceUpdate, shape, 1, 0)                     \
  X(Concatenate, shape, 1, 0)                     \
  X(Pad, shape, 1, 0)                             \
  X(SearchSorted, extras, 1, 0)                   \
  X(Hadamard, extras, 1, 0)                       \
  X(GatherAxis, indexing, 1, 0)                   \
  X(ScatterAxis, indexing, 1, 0)                  \
  X(Gather, indexing, 1, 0)                       \
  X(Scatter, indexing, 1, 0)                      \
  X(Arange, creation, 1, 0)                       \
  X(Matmul, linalg, 1, 0)                         \
  X(AddMM, linalg, 1, 0)                          \
  X(linalg::Inverse, lapack, 1, 0)                \
  X(linalg::Solve, lapack, 1, 0)                  \
  X(linalg::SolveTriangular, lapack, 1, 0)        \
  X(linalg::Cholesky, lapack, 1, 0)               \
  X(linalg::QRF, lapack, 1, 0)                    \
  X(linalg::SVD, lapack, 1, 0)                    \
  X(linalg::Eigh, lapack, 1, 0)                   \
  X(linalg::Eig, lapack, 1, 0)                    \
  X(linalg::LUF, lapack, 1, 0)                    \
  X(random::RandomBits, random, 1, 0)             \
  X(Sort, sort, 1, 0)                             \
  X(ArgSort, sort, 1, 0)                          \
  X(Partition, sort, 1, 0)                        \
  X(ArgPartition, sort, 1, 0)                     \
  X(Scan, sort, 1, 0)                             \
  X(Convolution, conv, 1, 0)                      \
  X(FFT, fft, 1, 0)                               \
  X(fast::LayerNorm, fast, 1, 0)                  \
  X(fast::RMSNorm, fast, 1, 0)                    \
  X(fast::RoPE, fast, 1, 0)                       \
  X(fast::ScaledDotProductAttention, fast, 1, 0)  \
  X(fast::CustomKernel, fast, 1, 0)               \
  X(Load, io, 1, 0)                               \
  X(QuantizedMatmul, quantized, 1, 0)             \
  X(Compiled, compile, 1, 0)
// clang-format on

// FLUXION_IF_NO_KERNEL(FLAG)(code...) expands to `code` when FLAG is 0 and
// to nothing when it is 1: a backend generates the definitions it lacks.
#define FLUXION_IF_NO_KERNEL(FLAG) FLUXION_IF_NO_KERNEL_##FLAG
#define FLUXION_IF_NO_KERNEL_0(...) __VA_ARGS__
#define FLUXION_IF_NO_KERNEL_1(...)
