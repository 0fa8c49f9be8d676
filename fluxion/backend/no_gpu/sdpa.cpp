// Attention's fused backward without a GPU backend: never chosen (the
// composed rule stays), and no cuDNN (for attention or convolutions).
#include "fluxion/gpu_stats.h"
#include "fluxion/ops/fast.h"

namespace fluxion {

bool fast::ScaledDotProductAttentionVJP::use_fused(Stream, const array&,
                                                   const array&, const array&,
                                                   bool, float) {
  return false;
}

gpu::CudnnSdpaInfo gpu::cudnn_sdpa_info() {
  CudnnSdpaInfo info;
  info.error = "Fluxion was built without a GPU backend";
  return info;
}

gpu::ConvStats gpu::conv_stats() {
  ConvStats stats;
  stats.cudnn_error = "Fluxion was built without a GPU backend";
  return stats;
}

}  // namespace fluxion
