// The node a transformation (vjp, jvp, vmap) traces each primal through.
#pragma once

#include "fluxion/ops/unary.h"

namespace fluxion {

// Copy's rules and name (graphs print it as Copy, as MLX's do), but its
// output shares the input's buffer instead of copying it: arrays are
// immutable, and donation refuses a shared buffer, so nothing can write
// through either. A plain Copy still copies (DLPack's copy=True and device
// moves need a buffer of their own). Copying cost every gradient a pass
// over its primals: on an H100, 134 us of the 710 us of a depthwise
// convolution's forward and backward (N 64, 56 x 56, 256 channels,
// float32) went to copying x. The CPU shares; the GPU still copies until
// its sharing has run on the device (branch gpu-next2).
class TracerCopy : public Copy {
 public:
  using Copy::Copy;
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  void eval_gpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
};

namespace detail {
// The tracer of `a`: a TracerCopy node on stream s.
array tracer_copy(const array& a, StreamOrDevice s);
}  // namespace detail

}  // namespace fluxion
