// What every backend's generator of fused elementwise kernels shares
// (backend/cpu/codegen.cpp and codegen_reduce.cpp, backend/cuda/
// codegen_cuda.cpp): the types values are stored and computed in, and the
// expression walk over a tape that calls the shared functors. The text
// they produce needs, after the functor preamble (kernel_source.h), the
// backend's own glue defining the half types' storage and conversions:
//   fx_f16, fx_bf16                       storage of float16, bfloat16
//   float fx_ld_f16(fx_f16), fx_ld_bf16   exact widening to float
//   fx_f16 fx_st_f16(float), fx_st_bf16   rounding to nearest even
// so one walk serves a C++ compiler (_Float16) and NVRTC (PTX cvt).
#pragma once

#include <cstdint>
#include <string>

#include "fluxion/compile_ir.h"

namespace fluxion::codegen {

// "v3", "p0"...
std::string tagged(const char* prefix, int64_t i);
// How values of a dtype are stored; null for dtypes kernels do not compute.
const char* storage_type(Dtype t);
// The type a value is computed in (float for the half types).
std::string compute_type(Dtype t);
// A float holding a half-type value rounded as storing it would.
std::string round_half(const std::string& x, Dtype t);
std::string load(const std::string& x, Dtype t);
std::string store(const std::string& x, Dtype t);
// The expression computing node `n`'s output (named v<value>) from its
// inputs' names, rounded to its dtype; "" when the node has no functor.
std::string node_expr(const detail::IrNode& n, const detail::Ir& tape);
// The fused computation on loaded values, `<qualifiers> <type> fx_elem(
// <compute type> v<input>, ...)` returning the tape's one output in its
// compute type (the CUDA generator's form: GPU groups keep one output,
// fuse_ir); "" when a dtype is not computed, a node has no functor, or
// the tape has several outputs.
std::string elem_function(const detail::Ir& tape, const char* qualifiers);
// The same computation for one output or several (the CPU generator's
// form): `<qualifiers> void fx_elem(<compute type> v<input>, ...,
// <storage type>* o<k>, ...)` storing output k through o<k>. Every input
// is loaded, as an argument, before any store: an output may share a
// donated input's buffer. "" as elem_function, whatever the outputs.
std::string elem_store_function(const detail::Ir& tape,
                                const char* qualifiers);
// Whether tape input k is a broadcast scalar: one traced element feeding
// a larger output. Generated contiguous kernels read it once; a tape whose
// output is one element too reads every input as an array, so a shapeless
// compile traced on one element keeps the contiguous path for others.
bool scalar_input(const detail::Ir& tape, size_t k);
// Elements of a traced value.
int64_t traced_size(const detail::Ir& tape, int value);

}  // namespace fluxion::codegen
