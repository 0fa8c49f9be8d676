// The CUDA source of an mx.fast.cuda_kernel call, built as MLX's CUDA
// backend builds it, so MLX users' kernel bodies compile unchanged: a
// prelude (cooperative_groups, the half types, WARP_SIZE, Shape / Strides
// and elem_to_loc), the user's header, then
//
//   extern "C" __global__ void custom_kernel_<name><template suffix>(
//       const T0* in0, [const __grid_constant__ Shape in0_shape,]
//       [const __grid_constant__ Strides in0_strides,]
//       [const __grid_constant__ int in0_ndim,] ...,
//       U0* out0, ...) {
//     constexpr int N = 4; constexpr bool B = true; using T = float;
//     <source>
//   }
//
// Inputs are `const T*` of their dtype; `<in>_shape`, `<in>_strides` and
// `<in>_ndim` follow an input of at least one dimension when the source
// names them (MLX's rule: a plain text search); outputs are `T*` of their
// dtype (also with atomic_outputs: CUDA's atomics take plain pointers).
// Template arguments become constants at the top of the body, as MLX's
// do. extern "C" keeps the symbol unmangled, so the module's kernel is
// found by its name. Plain C++ (no CUDA), so tests read it without a GPU.
#pragma once

#include <string>
#include <vector>

#include "fluxion/dtype.h"
#include "fluxion/ops/custom_kernel.h"

namespace fluxion::fast {

// Dimensions of the Shape / Strides parameters (MLX's MAX_NDIM): inputs
// with more cannot pass their shape or strides.
constexpr int kCustomKernelMaxDims = 10;

// Which of an input's layout parameters the kernel takes.
struct KernelLayoutParams {
  bool shape = false, strides = false, ndim = false;
  bool any() const { return shape || strides || ndim; }
};
// Those of input `i` of `spec` with `ndim` dimensions (none for a 0-d
// input: its pointer is all there is).
KernelLayoutParams layout_params(const CustomKernelSpec& spec, size_t i,
                                 int ndim);

// The CUDA type of a dtype in the generated source ("float", "__half",
// "__nv_bfloat16", "int32_t", "cuda::std::complex<float>", ...).
const char* cuda_type_name(Dtype d);

// custom_kernel_<name> followed by one suffix per template argument (_<int>
// with 'n' for a minus sign, _t / _f, _<dtype>), MLX's naming.
std::string cuda_kernel_name(const CustomKernelSpec& spec,
                             const std::vector<KernelTemplateArg>& targs);

// The source for inputs of these dtypes and dimensions.
std::string cuda_kernel_source(const CustomKernelSpec& spec,
                               const std::vector<KernelTemplateArg>& targs,
                               const std::vector<Dtype>& input_dtypes,
                               const std::vector<int>& input_ndims,
                               const std::vector<Dtype>& output_dtypes);

// Whether `s` is a C identifier (kernel, parameter and template names).
bool is_identifier(const std::string& s);

}  // namespace fluxion::fast
