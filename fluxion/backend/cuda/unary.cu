// GPU kernels of the unary primitives: generated from their op spec
// (ops/elementwise_spec.h), with the dtypes the CPU instantiates each for
// (backend/cpu/unary.cpp) and the shared functor
// (backend/common/unary_ops.h).
#include "fluxion/backend/cuda/elementwise.cuh"
#include "fluxion/ops/unary.h"
#include "fluxion/primitive_list.h"

namespace fluxion {

namespace {

template <typename List, typename Op>
void same_type(const array& in, array& out, const char* name) {
  cu::dispatch_gpu<List>(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cu::unary<T, T, Op>(in, out, name);
  });
}

template <typename Op>
void to_bool(const array& in, array& out, const char* name) {
  cu::dispatch_gpu<AllTypes>(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cu::unary<T, bool, Op>(in, out, name);
  });
}

// abs, real and imag: float32 out of complex64, the input's dtype else.
template <typename Op>
void to_real(const array& in, array& out, const char* name) {
  cu::dispatch_gpu<AllTypes>(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (math::is_complex_v<T>) {
      cu::unary<T, float, Op>(in, out, name);
    } else {
      cu::unary<T, T, Op>(in, out, name);
    }
  });
}

// The kernels of the spec's primitives (ops/elementwise_spec.h), by
// policy: the output dtype the op gives, over the TYPES the CPU takes too.
template <typename Op, UnaryPolicy Policy, typename List>
void spec_kernel(const array& in, array& out, const char* name) {
  if constexpr (Policy == UnaryPolicy::to_real) {
    to_real<Op>(in, out, name);
  } else if constexpr (Policy == UnaryPolicy::to_bool) {
    to_bool<Op>(in, out, name);
  } else {
    same_type<List, Op>(in, out, name);
  }
}

}  // namespace

// The kernels of the spec's primitives.
#define FLUXION_GPU_UNARY(A, CLASS, NAME, POLICY, KERNEL, TYPES, RULES, CPU, \
                          GPU, ...)                                          \
  FLUXION_IF_KERNEL(GPU)(                                                    \
      void CLASS::eval_gpu(const std::vector<array>& in,                     \
                           std::vector<array>& out) {                        \
        spec_kernel<detail::CLASS, UnaryPolicy::POLICY, TYPES>(             \
            in[0], out[0], #NAME);                                           \
      })
FLUXION_UNARY_SPEC(FLUXION_GPU_UNARY, _)
#undef FLUXION_GPU_UNARY

}  // namespace fluxion
