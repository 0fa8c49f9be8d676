// The preamble every generated elementwise kernel starts with, whatever the
// backend: the text of math.h, unary_ops.h, binary_ops.h and ternary_ops.h
// (in that order) without their #include and #pragma once lines, embedded
// at build time by cmake/EmbedKernelSource.cmake. A kernel then calls
// fluxion::detail::<Primitive>{}(...), the functor the eager kernels call.
#pragma once

namespace fluxion::detail {

const char* kernel_functor_source();

}  // namespace fluxion::detail
