// The binary primitives' eval_gpu, one macro line each (binary_*.cu).
#pragma once

#include "fluxion/backend/cuda/elementwise.cuh"
#include "fluxion/ops/binary.h"

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

}  // namespace fluxion::gpu_binary

#define FLUXION_GPU_SAME_TYPE(NAME, LIST, OPNAME)                       \
  void NAME::eval_gpu(const std::vector<array>& in,                     \
                      std::vector<array>& out) {                        \
    gpu_binary::same_type<LIST, detail::NAME>(in, out[0], OPNAME);      \
  }
#define FLUXION_GPU_TO_BOOL(NAME, LIST, OPNAME)                         \
  void NAME::eval_gpu(const std::vector<array>& in,                     \
                      std::vector<array>& out) {                        \
    gpu_binary::to_bool<LIST, detail::NAME>(in, out[0], OPNAME);        \
  }
