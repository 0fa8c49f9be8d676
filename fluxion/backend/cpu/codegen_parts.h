// The pieces of generated CPU kernel source shared by the elementwise
// generator (codegen.cpp) and the reduction generator (codegen_reduce.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "fluxion/compile_ir.h"

namespace fluxion::cpu::gen {

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
// The kernel's glue (half-type loads and stores), after the functors.
extern const char* const kBase;
// The expression computing node `n`'s output (named v<value>) from its
// inputs' names, rounded to its dtype; "" when the node has no functor.
std::string node_expr(const detail::IrNode& n, const detail::Ir& tape);

}  // namespace fluxion::cpu::gen
