// What the GPU backend did in this process, for tests and benchmarks (the
// Python module's _cudnn_sdpa_info, _conv_stats, ...): cuDNN's attention and
// convolution paths, and the generated kernels of compile. Defined by
// backend/cuda, and by backend/no_gpu (zeros, and the reason cuDNN is absent)
// in a build without a GPU backend. Scheduling and memory go through
// fluxion/backend_interface.h instead.
#pragma once

#include <cstdint>
#include <string>

namespace fluxion::gpu {

// cuDNN's fused attention (backend/cuda/sdpa_cudnn.cpp), for tests and
// benchmarks: whether it loads (`error` says why not; loading is tried on
// first use, which this call makes), its version and library, and how
// many forward and backward passes ran on it and how many shapes' plans
// failed (those run the other kernels) in this process.
struct CudnnSdpaInfo {
  bool loaded = false;
  int64_t version = 0;
  std::string library;
  std::string error;
  int64_t forward_calls = 0, backward_calls = 0, failed_plans = 0;
};
CudnnSdpaInfo cudnn_sdpa_info();

// The Convolution primitive's GPU paths in this process (backend/cuda/
// conv.cu, conv_cudnn.cpp), for tests and benchmarks: whether cuDNN loads
// for it (`cudnn_error` says why not; asking loads it), how many
// convolutions ran as each cuDNN operation, how many shapes' cuDNN plans
// failed (those run the general path), and how many ran each kernel of
// the general path: direct (one input channel per group), reduce (one
// output channel per group, long sums) or im2col + matmul;
// weight_grad_composite counts the ConvolutionWeightGrad nodes no cuDNN
// operation took, computed as the Convolution of rearranged (copied)
// operands.
struct ConvStats {
  bool cudnn_loaded = false;
  int64_t cudnn_version = 0;
  std::string cudnn_error;
  int64_t cudnn_forward = 0, cudnn_backward_data = 0, cudnn_backward_filter = 0,
          cudnn_failed_plans = 0;
  int64_t direct = 0, reduce = 0, im2col = 0;
  int64_t weight_grad_composite = 0;
};
ConvStats conv_stats();

// The generated kernels of compile on the GPU (backend/cuda/compiled.cpp),
// counted since the process started: for tests (is a fused group one
// kernel? did a second process reuse the disk cache?) and benchmarks.
// Zeros without a GPU backend.
struct FusedKernelStats {
  uint64_t launches = 0;     // generated kernels launched
  uint64_t fallbacks = 0;    // Compiled nodes run node by node: no kernel
  uint64_t unfused = 0;      // ... with a kernel, for their inputs' layout
  uint64_t compiles = 0;     // NVRTC compilations started
  uint64_t disk_hits = 0;    // images read back from the disk cache
  uint64_t disk_writes = 0;  // images written to the disk cache
  uint64_t loads = 0;        // modules loaded onto the GPU
};
FusedKernelStats fused_kernel_stats();

}  // namespace fluxion::gpu
