// CUDA code generation for compile's fused elementwise kernels: CUDA C++
// for a tape of elementwise nodes, compiled at run time by NVRTC
// (nvrtc_compile.h) for the device's architecture and loaded with the
// runtime's library API (jit_module.h). The source is built from the same
// functor text as the eager kernels and the CPU's generated ones
// (kernel_source.h, codegen_parts.h). Plain C++: no CUDA header, so the
// generator is testable on a machine without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fluxion/backend/common/fused_layout.h"
#include "fluxion/compile_ir.h"

namespace fluxion::cu {

// The generated entry points, each in a 32-bit and a 64-bit index variant
// (the 32-bit one where the element count and every offset fit in int32:
// cheaper index arithmetic), extern "C" so NVRTC keeps their names:
//  - packed: every input row-contiguous of the output's size or a
//    broadcast scalar (read once), every array 16-byte aligned; each
//    thread moves `unroll` 16-byte packs per array, loads first;
//  - flat: the same inputs, unaligned (one element a thread, grid-stride);
//  - strided: any input strides over the collapsed output shape (up to
//    kFusedMaxDims dimensions), into a row-contiguous output.
// Parameters: p0..p<k-1> (inputs' data), po (output), n (elements), and
// for strided a by-value layout: {ndim, shape[kFusedMaxDims],
// strides[k][kFusedMaxDims]}, all int32 (ndim, shape as uint32) in the
// 32-bit variant and all 64-bit in the other.
enum FusedEntry : int {
  kPacked32,
  kPacked64,
  kFlat32,
  kFlat64,
  kStrided32,
  kStrided64,
  kFusedEntries
};
extern const char* const kFusedEntryNames[kFusedEntries];

constexpr int kFusedMaxDims = 10;
constexpr int kFusedThreads = 256;
// More inputs than this are not generated (the strided layout, passed by
// value, would pass CUDA's 32 KB of kernel parameters).
constexpr int kFusedMaxInputs = 128;

// A tape's source: what every entry point needs (the functor preamble,
// the glue, fx_elem and the bodies, which are templates), and each entry
// point's definition. A module is compiled per entry point, when a call
// first needs it: NVRTC's time grows with every body it instantiates (for
// GELU on the 2-core development machine: 40 ms for the preamble, about
// 35 ms for each entry point), so a first call pays for its own alone.
struct FusedSource {
  std::string common;  // empty: the tape has no GPU kernel
  std::string entries[kFusedEntries];
  int pack = 1;  // elements per 16-byte pack (the widest array's)
  // Packs per thread in the packed entry point: 4 (loads in flight for
  // the memory's bandwidth), fewer for long expressions, whose code is
  // copied pack * unroll times (a 40-op bfloat16 tape unrolled 32 times
  // took NVRTC 11 s) and which are bound by their math anyway.
  int unroll = 4;

  bool empty() const { return common.empty(); }
  // The module source of entry point `e`.
  std::string source(FusedEntry e) const { return common + entries[e]; }
  // Every entry point in one source (tests compile it whole).
  std::string all() const;
};

// The source for `tape`'s single output (fuse_ir made every node
// elementwise with a functor); inputs that codegen::scalar_input calls
// broadcast scalars are read once by the packed and flat entry points.
FusedSource fused_kernel_source(const detail::Ir& tape);

// One call's launch: its entry point, its grid (of kFusedThreads-thread
// blocks) and the values of its parameters after the data pointers.
struct FusedLaunch {
  FusedEntry entry = kPacked32;
  unsigned blocks = 1;
  uint32_t n32 = 0;
  uint64_t n64 = 0;
  // The strided entry points' layout parameter: {ndim, shape[kFusedMaxDims],
  // strides[k][kFusedMaxDims]} in int32 (ndim, shape as uint32) or int64
  // elements, the device struct's layout (every field one size: no
  // padding).
  std::vector<int32_t> layout32;
  std::vector<int64_t> layout64;

  bool wide() const { return entry % 2 == 1; }
  // Appends pointers to n (and the layout), which cudaLaunchKernel reads:
  // valid while this object lives, unmoved.
  void append_args(std::vector<void*>& args);
};

// Plans a call over n > 0 elements of a row-contiguous output at `out`
// (`out_itemsize` bytes each) reading the tape's inputs at `in` (with
// `itemsize`) as `layout` says (not kUnfused, at most kFusedMaxDims
// dimensions): packed when every array the packs touch is aligned to a
// pack, 32-bit indices when the element count and every offset fit in
// int32, unless `wide` (tests run the 64-bit variants on small arrays).
FusedLaunch plan_launch(const FusedSource& src, const detail::Ir& tape,
                        const codegen::FusedLayout& layout,
                        const std::vector<const void*>& in,
                        const std::vector<size_t>& itemsize, const void* out,
                        size_t out_itemsize, int64_t n, bool wide = false);

}  // namespace fluxion::cu
