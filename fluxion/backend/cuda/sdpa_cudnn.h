// cuDNN's fused flash attention (the runtime-fusion SDPA engine) behind
// fast::ScaledDotProductAttention and its backward, through cuDNN's
// backend (graph) API with the library dlopen'ed at run time. Attention
// without a mask array or sinks (causal or not) in float16/bfloat16 runs
// here when the library loads and builds a plan for the shapes; anything
// else, or a failure, stays on sdpa.cu's kernels (forward) or the host
// routine (backward). No cuDNN types here: sdpa.cu includes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fluxion/array.h"

namespace fluxion::cu::cudnn_sdpa {

// The rules that need no library: FLUXION_CUDNN_SDPA is not "0", dtype
// float16/bfloat16, head dims equal, a multiple of 8 and at most 256 (the
// engine's range on sm_90: 64, 80, 128 and 256 checked against a CPU
// reference on the H200 with cuDNN 9.14, forward and backward), a causal
// mask only with Lq <= Lk (rows that see no key are MLX's uniform rows,
// not cuDNN's), no empty dimension.
bool eligible(Dtype t, int B, int Hq, int Hkv, int Lq, int Lk, int D, int Dv,
              bool causal);

// Whether both passes' plans build for these shapes (row-contiguous
// operands) on `device`: loads the library and builds (then caches) the
// plans. Never throws.
bool plans_ready(int device, Dtype t, int B, int Hq, int Hkv, int Lq, int Lk,
                 int D, bool causal, float scale);

// The forward of the primitive's inputs q, k, v into outputs[0] (and the
// logsumexp into outputs[1] when there), queued on the current stream.
// False, with nothing queued or allocated, when cuDNN cannot run it.
bool forward(const std::vector<array>& in, std::vector<array>& out,
             float scale, bool causal);

// The backward: inputs q, k, v, o, lse, dO; outputs dq, dk, dv. False,
// with nothing queued, when cuDNN cannot run it.
bool backward(const std::vector<array>& in, std::vector<array>& out,
              float scale, bool causal);

}  // namespace fluxion::cu::cudnn_sdpa
