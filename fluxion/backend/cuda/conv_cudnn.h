// The Convolution primitive through cuDNN 9's backend (graph) API
// (conv_cudnn.cpp), in front of conv.cu's general path. No cuDNN types
// here: conv.cu includes it.
#pragma once

#include <cstdint>
#include <string>

#include "fluxion/array.h"

namespace fluxion {
class Convolution;
class ConvolutionWeightGrad;
}

namespace fluxion::cu::cudnn_conv {

// FLUXION_CUDNN_CONV is not "0". Read at every convolution, so a test can
// run both paths in one process.
bool enabled();
// FLUXION_CUDNN_CONV is "all": cuDNN's forward operation is offered even
// the convolutions the general path keeps by default (conv.cu's long sums).
bool offer_all();

// Computes the convolution of x and w into `out` (allocated,
// row-contiguous) on the current stream through cuDNN when it is enabled,
// loads, takes the dtype (float32, float16, bfloat16), has an operation for
// the form (backend/common/conv_plan.h) and a plan for the shapes. False,
// with `out` not written, otherwise (the caller runs the general path).
// `forward` false: only the backward operations are tried.
bool run(const array& x, const array& w, array& out, const Convolution& c,
         bool forward = true);

// ConvolutionWeightGrad of x and the cotangent ct into `out` (allocated,
// row-contiguous) as cuDNN's backward filter, under the same conditions;
// false, with `out` not written, when cuDNN does not take it.
bool run_weight_grad(const array& x, const array& ct, array& out,
                     const ConvolutionWeightGrad& c);

// For gpu::conv_stats.
struct Status {
  bool loaded = false;
  int64_t version = 0;
  std::string error;
  int64_t forward_calls = 0, backward_data_calls = 0,
          backward_filter_calls = 0, failed_plans = 0;
};
Status status();

}  // namespace fluxion::cu::cudnn_conv
