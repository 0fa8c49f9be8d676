// Convolutions (MLX's layouts): channels last. An input is [N, spatial...,
// C_in], a weight [C_out, kernel spatial..., C_in / groups], the output
// [N, out spatial..., C_out]. Like MLX (and deep-learning frameworks) these
// are cross-correlations: the kernel is not flipped unless `flip` is set.
#pragma once

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// 1-D convolution of input [N, L, C_in] with weight [C_out, K, C_in/groups].
array conv1d(const array& input, const array& weight, int stride = 1,
             int padding = 0, int dilation = 1, int groups = 1,
             StreamOrDevice s = {});

// 2-D convolution of input [N, H, W, C_in] with weight
// [C_out, KH, KW, C_in/groups]; stride, padding and dilation per spatial
// axis (the int overload uses one value for both).
array conv2d(const array& input, const array& weight,
             const std::pair<int, int>& stride = {1, 1},
             const std::pair<int, int>& padding = {0, 0},
             const std::pair<int, int>& dilation = {1, 1}, int groups = 1,
             StreamOrDevice s = {});
array conv2d(const array& input, const array& weight, int stride,
             int padding = 0, int dilation = 1, int groups = 1,
             StreamOrDevice s = {});

// 3-D convolution of input [N, D, H, W, C_in] with weight
// [C_out, KD, KH, KW, C_in/groups].
array conv3d(const array& input, const array& weight,
             const std::tuple<int, int, int>& stride = {1, 1, 1},
             const std::tuple<int, int, int>& padding = {0, 0, 0},
             const std::tuple<int, int, int>& dilation = {1, 1, 1},
             int groups = 1, StreamOrDevice s = {});
array conv3d(const array& input, const array& weight, int stride,
             int padding = 0, int dilation = 1, int groups = 1,
             StreamOrDevice s = {});

// The general form, 1 to 3 spatial axes: the input is dilated by
// `input_dilation` (input_dilation - 1 zeros between neighbours), padded
// with padding_lo / padding_hi zeros, and correlated with the weight
// dilated by `kernel_dilation` (flipped along its spatial axes when `flip`),
// taking every `stride`-th position. Empty vectors mean 1 (stride,
// dilations) or 0 (padding); a single value applies to every axis.
array conv_general(array input, array weight, std::vector<int> stride,
                   std::vector<int> padding_lo, std::vector<int> padding_hi,
                   std::vector<int> kernel_dilation = {},
                   std::vector<int> input_dilation = {}, int groups = 1,
                   bool flip = false, StreamOrDevice s = {});
// Symmetric padding. (As in MLX, a call with braced lists for both
// padding_lo/padding_hi and fewer than ten arguments can be ambiguous
// between the two overloads; spell out every argument, stream included.)
array conv_general(const array& input, const array& weight,
                   std::vector<int> stride = {}, std::vector<int> padding = {},
                   std::vector<int> kernel_dilation = {},
                   std::vector<int> input_dilation = {}, int groups = 1,
                   bool flip = false, StreamOrDevice s = {});

// Transposed convolutions (the gradient of conv with respect to its input,
// as an op). The weight is [C_out, K..., C_in/groups] as in MLX; the output
// spatial size is (L - 1) * stride - 2 * padding + dilation * (K - 1) + 1 +
// output_padding.
array conv_transpose1d(const array& input, const array& weight, int stride = 1,
                       int padding = 0, int dilation = 1,
                       int output_padding = 0, int groups = 1,
                       StreamOrDevice s = {});
array conv_transpose2d(const array& input, const array& weight,
                       const std::pair<int, int>& stride = {1, 1},
                       const std::pair<int, int>& padding = {0, 0},
                       const std::pair<int, int>& dilation = {1, 1},
                       const std::pair<int, int>& output_padding = {0, 0},
                       int groups = 1, StreamOrDevice s = {});
array conv_transpose2d(const array& input, const array& weight, int stride,
                       int padding = 0, int dilation = 1,
                       int output_padding = 0, int groups = 1,
                       StreamOrDevice s = {});
array conv_transpose3d(const array& input, const array& weight,
                       const std::tuple<int, int, int>& stride = {1, 1, 1},
                       const std::tuple<int, int, int>& padding = {0, 0, 0},
                       const std::tuple<int, int, int>& dilation = {1, 1, 1},
                       const std::tuple<int, int, int>& output_padding = {0, 0,
                                                                          0},
                       int groups = 1, StreamOrDevice s = {});
array conv_transpose3d(const array& input, const array& weight, int stride,
                       int padding = 0, int dilation = 1,
                       int output_padding = 0, int groups = 1,
                       StreamOrDevice s = {});

// The discrete linear convolution of two 1-D arrays (NumPy's
// np.convolve): mode "full" (length n + m - 1), "same" (max(n, m)) or
// "valid" (max(n, m) - min(n, m) + 1).
array convolve(const array& a, const array& v, const std::string& mode = "full",
               StreamOrDevice s = {});

// The convolution of conv_general (any padding, including the negative
// padding, that is cropping, which its gradients need). Inputs are
// row-major copies in the kernel: im2col over blocks of output positions,
// then one BLAS gemm per block and group (float16/bfloat16 compute in
// float32). Gradients are convolutions too: the input's is the cotangent
// correlated with the flipped, channel-swapped weight (input dilation =
// stride), the weight's the input correlated with the cotangent (batch as
// channels). vmap folds a batched input into N and a batched weight into
// the groups.
class Convolution : public Primitive {
 public:
  Convolution(Stream s, std::vector<int> stride, std::vector<int> padding_lo,
              std::vector<int> padding_hi, std::vector<int> kernel_dilation,
              std::vector<int> input_dilation, int groups, bool flip)
      : Primitive(s),
        stride_(std::move(stride)),
        padding_lo_(std::move(padding_lo)),
        padding_hi_(std::move(padding_hi)),
        kernel_dilation_(std::move(kernel_dilation)),
        input_dilation_(std::move(input_dilation)),
        groups_(groups),
        flip_(flip) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Convolution"; }
  FLUXION_DECLARE_STATE
  void print(std::ostream& os) const override;
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;

  const std::vector<int>& stride() const { return stride_; }
  const std::vector<int>& padding_lo() const { return padding_lo_; }
  const std::vector<int>& padding_hi() const { return padding_hi_; }
  const std::vector<int>& kernel_dilation() const { return kernel_dilation_; }
  const std::vector<int>& input_dilation() const { return input_dilation_; }
  int groups() const { return groups_; }
  bool flip() const { return flip_; }

 private:
  std::vector<int> stride_;
  std::vector<int> padding_lo_;
  std::vector<int> padding_hi_;
  std::vector<int> kernel_dilation_;
  std::vector<int> input_dilation_;
  int groups_;
  bool flip_;
};

// The weight's cotangent of a grouped Convolution (its vjp with respect to
// the weight when groups > 1), as one node reading the forward's input x
// [N, L..., C_in] and the cotangent ct [N, O..., C_out] as they are; the
// output is weight-shaped, [C_out, K..., C_in/groups] (K the kernel's
// spatial size, a parameter: strides make it ambiguous from the shapes).
// The parameters are the forward's (padding_hi aside, which O implies).
// It stands for the composite the rule wrote before: the input
// rearranged to [C_in/g, L..., g N] (batch as channels, one group per
// convolution group) correlated with the cotangent [C_out, O..., N]
// (conv_detail::weight_grad_composite): the CPU computes exactly that; the
// GPU maps it onto cuDNN's backward filter over x and ct without copies
// (backend/common/conv_plan.h) and computes the composite where cuDNN
// cannot. It is bilinear, so its rules are convolutions again: the vjp
// with respect to x is the forward's input gradient with the cotangent as
// weight, with respect to ct the forward convolution with it.
class ConvolutionWeightGrad : public Primitive {
 public:
  ConvolutionWeightGrad(Stream s, std::vector<int> kernel_size,
                        std::vector<int> stride, std::vector<int> padding_lo,
                        std::vector<int> kernel_dilation,
                        std::vector<int> input_dilation, int groups, bool flip)
      : Primitive(s),
        kernel_size_(std::move(kernel_size)),
        stride_(std::move(stride)),
        padding_lo_(std::move(padding_lo)),
        kernel_dilation_(std::move(kernel_dilation)),
        input_dilation_(std::move(input_dilation)),
        groups_(groups),
        flip_(flip) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "ConvolutionWeightGrad"; }
  FLUXION_DECLARE_STATE
  void print(std::ostream& os) const override;
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;

  const std::vector<int>& kernel_size() const { return kernel_size_; }
  const std::vector<int>& stride() const { return stride_; }
  const std::vector<int>& padding_lo() const { return padding_lo_; }
  const std::vector<int>& kernel_dilation() const { return kernel_dilation_; }
  const std::vector<int>& input_dilation() const { return input_dilation_; }
  int groups() const { return groups_; }
  bool flip() const { return flip_; }

 private:
  std::vector<int> kernel_size_;
  std::vector<int> stride_;
  std::vector<int> padding_lo_;
  std::vector<int> kernel_dilation_;
  std::vector<int> input_dilation_;
  int groups_;
  bool flip_;
};

}  // namespace fluxion
