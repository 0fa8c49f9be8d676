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
//  - fluxion/export_registry.cpp generates export_function's import table
//    from it: each class is rebuilt by its from_state (declared with its
//    state(), FLUXION_DECLARE_STATE) or, without parameters, from its
//    stream; a class with neither cannot be exported.
//  - fluxion/primitive_registry.h turns it into a table at run time
//    (primitive_registry(), kernels_missing()), which the rules-coverage
//    test (RulesCoverage.KernelsPerBackend) and fluxion.core._primitive_registry()
//    (tools/kernel_coverage.py) read.
//
// X(CLASS, FAMILY, CPU, GPU): CLASS relative to namespace fluxion (its
// last component is the primitive's name); FAMILY a bare word (the op
// family: the header it is declared in, or `view` for the primitives that
// move no data, evaluated in backend/common/views.cpp); CPU and GPU 1 when
// that backend defines the kernel (backend/cpu; the CUDA backend), else 0.
// Keep the families together, in the order of their headers. The unary
// and binary elementwise primitives come from their op specs
// (ops/elementwise_spec.h, each entry's CPU and GPU columns there), Copy and
// StopGradient aside.
#pragma once

#include "fluxion/ops/elementwise_spec.h"

// clang-format off
#define FLUXION_PRIMITIVES(X) \
  FLUXION_UNARY_SPEC(FLUXION_UNARY_SPEC_TO_REGISTRY, X) \
  X(Copy, unary, 1, 1)                            \
  FLUXION_BINARY_SPEC(FLUXION_BINARY_SPEC_TO_REGISTRY, X) \
  X(AsType, astype, 1, 1)                         \
  X(Select, ternary, 1, 1)                        \
  X(Reduce, reduce, 1, 1)                         \
  X(ArgReduce, reduce, 1, 1)                      \
  X(NumberOfElements, reduce, 1, 1)               \
  X(Softmax, reduce, 1, 1)                        \
  X(Reshape, view, 1, 1)                          \
  X(Transpose, view, 1, 1)                        \
  X(Broadcast, view, 1, 1)                        \
  X(ExpandDims, view, 1, 1)                       \
  X(Squeeze, view, 1, 1)                          \
  X(Slice, view, 1, 1)                            \
  X(AsStrided, view, 1, 1)                        \
  X(View, view, 1, 1)                             \
  X(Contiguous, view, 1, 1)                       \
  X(StopGradient, view, 1, 1)                     \
  X(Depends, view, 1, 1)                          \
  X(CustomTransforms, view, 1, 1)                 \
  X(SliceUpdate, shape, 1, 1)                     \
  X(Concatenate, shape, 1, 1)                     \
  X(Pad, shape, 1, 1)                             \
  X(SearchSorted, searchsorted, 1, 1)             \
  X(Hadamard, hadamard, 1, 1)                     \
  X(GatherAxis, indexing, 1, 1)                   \
  X(ScatterAxis, indexing, 1, 1)                  \
  X(Gather, indexing, 1, 1)                       \
  X(Scatter, indexing, 1, 1)                      \
  X(Arange, creation, 1, 1)                       \
  X(Matmul, linalg, 1, 1)                         \
  X(AddMM, linalg, 1, 1)                          \
  X(linalg::Inverse, lapack, 1, 1)                \
  X(linalg::Solve, lapack, 1, 1)                  \
  X(linalg::SolveTriangular, lapack, 1, 1)        \
  X(linalg::Cholesky, lapack, 1, 1)               \
  X(linalg::QRF, lapack, 1, 1)                    \
  X(linalg::SVD, lapack, 1, 1)                    \
  X(linalg::Eigh, lapack, 1, 1)                   \
  X(linalg::Eig, lapack, 1, 1)                    \
  X(linalg::LUF, lapack, 1, 1)                    \
  X(random::RandomBits, random, 1, 1)             \
  X(Sort, sort, 1, 1)                             \
  X(ArgSort, sort, 1, 1)                          \
  X(Partition, sort, 1, 1)                        \
  X(ArgPartition, sort, 1, 1)                     \
  X(Scan, sort, 1, 1)                             \
  X(Convolution, conv, 1, 1)                      \
  X(ConvolutionWeightGrad, conv, 1, 1)            \
  X(FFT, fft, 1, 1)                               \
  X(fast::LayerNorm, fast, 1, 1)                  \
  X(fast::RMSNorm, fast, 1, 1)                    \
  X(fast::NormVJP, fast, 1, 1)                    \
  X(fast::RoPE, fast, 1, 1)                       \
  X(fast::ScaledDotProductAttention, fast, 1, 1)  \
  X(fast::ScaledDotProductAttentionVJP, fast, 1, 1)\
  X(fast::CustomKernel, fast, 1, 1)               \
  X(Load, io, 1, 0)                               \
  X(QuantizedMatmul, quantized, 1, 1)             \
  X(Compiled, compile, 1, 1)                      \
  X(distributed::AllReduce, distributed, 1, 1)    \
  X(distributed::AllGather, distributed, 1, 1)    \
  X(distributed::ReduceScatter, distributed, 1, 1)\
  X(distributed::Send, distributed, 1, 1)         \
  X(distributed::Recv, distributed, 1, 1)
// clang-format on

// FLUXION_IF_NO_KERNEL(FLAG)(code...) expands to `code` when FLAG is 0 and
// to nothing when it is 1: a backend generates the definitions it lacks.
#define FLUXION_IF_NO_KERNEL(FLAG) FLUXION_IF_NO_KERNEL_##FLAG
#define FLUXION_IF_NO_KERNEL_0(...) __VA_ARGS__
#define FLUXION_IF_NO_KERNEL_1(...)
// FLUXION_IF_KERNEL(FLAG)(code...): the converse, for the kernels a backend
// generates from an op spec (backend/cpu/unary.cpp, backend/cuda/unary.cu).
#define FLUXION_IF_KERNEL(FLAG) FLUXION_IF_KERNEL_##FLAG
#define FLUXION_IF_KERNEL_0(...)
#define FLUXION_IF_KERNEL_1(...) __VA_ARGS__
