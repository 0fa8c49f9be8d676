// The binary primitives' eval_gpu, expanded from their op spec
// (ops/elementwise_spec.h) in binary_*.cu, one file per CU column.
#pragma once

#include "fluxion/backend/cuda/elementwise.cuh"
#include "fluxion/ops/binary.h"
#include "fluxion/primitive_list.h"

namespace fluxion::gpu_binary {

template <typename List, typename Op>
void same_type(const std::vector<array>& in, array& out, const char* name) {
  cu::dispatch_gpu<List>(in[0].dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cu::binary<T, T, Op>(in[0], in[1], out, name);
  });
}

template <typename List, typename Op>
void to_bool(const std::vector<array>& in, array& out, const char* name) {
  cu::dispatch_gpu<List>(in[0].dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cu::binary<T, bool, Op>(in[0], in[1], out, name);
  });
}

// The kernel of a primitive of the spec: its POLICY's output dtype (bool or
// the compute dtype) over the TYPES the CPU takes too.
template <typename Op, BinaryPolicy Policy, typename List>
void spec_kernel(const std::vector<array>& in, array& out, const char* name) {
  if constexpr (binary_gives_bool(Policy)) {
    to_bool<List, Op>(in, out, name);
  } else {
    same_type<List, Op>(in, out, name);
  }
}

}  // namespace fluxion::gpu_binary

// FLUXION_BINARY_SPEC(FLUXION_GPU_BINARY, FILE) in binary_FILE.cu defines
// the eval_gpu of the entries whose CU is FILE and whose class is the
// spec's (FORM spec or cpu_kernel; Equal's is written by hand).
#define FLUXION_GPU_BINARY(FILE, CLASS, NAME, POLICY, FORM, TYPES, RULES, CPU, \
                           GPU, CU, ...)                                       \
  FLUXION_IF_KERNEL(GPU)(FLUXION_BINARY_IF_CLASS(FORM)(                        \
      FLUXION_GPU_BINARY_IN_##FILE##_##CU(                                     \
          void CLASS::eval_gpu(const std::vector<array>& in,                   \
                               std::vector<array>& out) {                      \
            gpu_binary::spec_kernel<detail::CLASS, BinaryPolicy::POLICY,       \
                                    TYPES>(in, out[0], #NAME);                 \
          })))
#define FLUXION_GPU_BINARY_IN_arith_arith(...) __VA_ARGS__
#define FLUXION_GPU_BINARY_IN_arith_math(...)
#define FLUXION_GPU_BINARY_IN_arith_compare(...)
#define FLUXION_GPU_BINARY_IN_math_arith(...)
#define FLUXION_GPU_BINARY_IN_math_math(...) __VA_ARGS__
#define FLUXION_GPU_BINARY_IN_math_compare(...)
#define FLUXION_GPU_BINARY_IN_compare_arith(...)
#define FLUXION_GPU_BINARY_IN_compare_math(...)
#define FLUXION_GPU_BINARY_IN_compare_compare(...) __VA_ARGS__
