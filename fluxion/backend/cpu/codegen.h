// CPU code generation for compile's fused elementwise kernels: C++ source
// for a tape of elementwise nodes, built by the system compiler into a
// shared library that is cached on disk and loaded with dlopen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fluxion/compile_ir.h"

namespace fluxion::cpu {

// The source of a kernel computing `tape`'s single output (every node's
// primitive names an elementwise functor: fuse_ir made the tape so); inputs
// whose traced size is 1 are read as scalars by the contiguous entry
// point. Empty when the tape holds a dtype kernels do not compute.
std::string kernel_source(const detail::Ir& tape);

// Contiguous: out[i] for i in [begin, end), every input either of the
// output's size and row-contiguous, or (the scalars above) one element.
using ContiguousKernel = void (*)(void* const* in, void* out, int64_t begin,
                                  int64_t end);
// Strided: rows [row_begin, row_end) of a row-contiguous output of `shape`
// (`ndim` >= 1); input k's element strides are strides[k * ndim + d].
using StridedKernel = void (*)(void* const* in, void* out, const int64_t* shape,
                               const int64_t* strides, int ndim,
                               int64_t row_begin, int64_t row_end);

struct Kernel {
  ContiguousKernel contiguous = nullptr;
  StridedKernel strided = nullptr;
};

// The kernel for `source`, compiled once per process (or found in the disk
// cache). Returns null when no compiler works: callers then fall back to
// evaluating the nodes one by one. Environment: FLUXION_CXX (compiler),
// FLUXION_CACHE_DIR (default ~/.cache/fluxion).
const Kernel* load_kernel(const std::string& source);

}  // namespace fluxion::cpu
