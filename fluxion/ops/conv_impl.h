// Internals shared by the convolution ops, their rules and tests: the
// primitive's parameters and a builder that skips the public checks (the
// gradient rules need negative padding, that is cropping).
#pragma once

#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"

namespace fluxion::conv_detail {

struct ConvParams {
  std::vector<int> stride;
  std::vector<int> padding_lo;
  std::vector<int> padding_hi;
  std::vector<int> kernel_dilation;
  std::vector<int> input_dilation;
  int groups = 1;
  bool flip = false;
};

// (n - 1) * dilation + 1, or 0 for n = 0.
int dilated_size(int n, int dilation);

// [N, out spatial..., C_out] for an input and weight shape (parameters
// given per spatial axis).
Shape output_shape(const Shape& in, const Shape& wt, const ConvParams& p);

// The Convolution node, without checks: `in` and `wt` share a dtype and
// the parameters have one entry per spatial axis.
array make_conv(const array& in, const array& wt, const ConvParams& p,
                Stream s);

// Checks shapes, channels, groups, strides and dilations (one value or one
// per axis), promotes both arrays to their common float type, and builds
// the node. Errors start with "[op] ".
array checked_conv(array in, array wt, ConvParams p, int spatial,
                   const char* op, Stream s);

// Throws "[op] ... padding must be non-negative".
void check_padding(const std::vector<int>& lo, const std::vector<int>& hi,
                   const char* op);

// The cotangents of the convolution of x with a weight: the input's (with
// weight `w`; x is read for its shape only) and the weight's, of kernel
// spatial size `kernel` (the parameters' padding_hi is not read). Both are
// bilinear, which the rules of ConvolutionWeightGrad use.
array input_grad(const array& x, const array& w, const array& ct,
                 const ConvParams& p, Stream s);
// A ConvolutionWeightGrad node when groups > 1, else weight_grad_composite
// (with one group its operands are transposed views: no copy to avoid).
array weight_grad(const array& x, const array& ct,
                  const std::vector<int>& kernel, const ConvParams& p,
                  Stream s);
// The weight's cotangent written with ops as one Convolution: the input as
// [C_in/g, L..., g N] (batch as channels, one group per convolution group;
// a copy when g > 1) correlated with the cotangent as [C_out, O..., N],
// the result transposed back (and reversed where the forward flips).
array weight_grad_composite(const array& x, const array& ct,
                            const std::vector<int>& kernel,
                            const ConvParams& p, Stream s);

}  // namespace fluxion::conv_detail
