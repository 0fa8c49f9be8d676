// Affine quantization of matrices along their last axis, as in MLX:
// quantize, dequantize and a matmul against a quantized matrix.
//
// Scheme (MLX's affine mode): each group of `group_size` consecutive values
// of the last axis gets a scale and a bias, w ≈ scale * q + bias with q an
// integer in [0, 2^bits - 1]. With n_bins = 2^bits - 1, for a group with
// extremes w_min and w_max:
//   scale = max((w_max - w_min) / n_bins, 1e-7), negated unless
//           |w_min| > |w_max|; edge = w_min if |w_min| > |w_max| else w_max;
//   q0 = round(edge / scale); if q0 != 0: scale = edge / q0, bias = edge,
//   else bias = 0;
//   q = clip(round((w - bias) / scale), 0, n_bins).
// So the edge of larger magnitude is reproduced exactly and 0 stays exactly
// representable; scales may be negative. Rounding is to nearest, ties to
// even (std::nearbyint). The arithmetic is in float32 (float64 for float64
// inputs); scales and biases have w's dtype.
// Packing: el = 32 / bits values per uint32, the first value in the lowest
// bits: w_q[..., i] = sum_j q[..., i * el + j] << (j * bits).
// Supported: bits 2, 4, 8 and group sizes 32, 64, 128.
#pragma once

#include <tuple>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// w: at least 2-D, real floating, last axis divisible by group_size.
// Returns (w_q uint32 [..., K * bits / 32], scales [..., K / group_size],
// biases [..., K / group_size]). A composite of public ops.
std::tuple<array, array, array> quantize(const array& w, int group_size = 64,
                                         int bits = 4, StreamOrDevice s = {});

// scale * q + bias per group, in scales' dtype (computed in float32 for
// half types, rounded once). A composite of public ops.
array dequantize(const array& w, const array& scales, const array& biases,
                 int group_size = 64, int bits = 4, StreamOrDevice s = {});

// x @ dequantize(w).T (transpose = true: w holds an N x K matrix) or
// x @ dequantize(w) (transpose = false: w holds K x N), without
// materializing the dequantized matrix. x: [..., K]; w 2-D. The result type
// is that of x, scales and biases together (real floating).
array quantized_matmul(const array& x, const array& w, const array& scales,
                       const array& biases, bool transpose = true,
                       int group_size = 64, int bits = 4,
                       StreamOrDevice s = {});

// Inputs: x (computation dtype), w (uint32), scales, biases (same dtype as
// x). The product is linear in x, scales and biases: vjp and jvp exist for
// all three (x: a quantized matmul with the other transpose; scales and
// biases: through the cotangent of the dense matrix, as in MLX); w holds
// integers, so derivatives with respect to it raise std::invalid_argument.
// vmap maps x (its batch axis moves to the front), and scales or biases
// (one dequantized matrix per batch element, multiplied densely); vmap over
// w raises std::invalid_argument.
class QuantizedMatmul : public Primitive {
 public:
  QuantizedMatmul(Stream s, int group_size, int bits, bool transpose)
      : Primitive(s),
        group_size_(group_size),
        bits_(bits),
        transpose_(transpose) {}
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  const char* name() const override { return "QuantizedMatmul"; }
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;

 private:
  int group_size_;
  int bits_;
  bool transpose_;
};

}  // namespace fluxion
