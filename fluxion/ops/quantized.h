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
// Packing: the values form one little-endian bit stream, value i in bits
// [i * bits, (i + 1) * bits) (for bits 2, 4, 8: el = 32 / bits values per
// uint32, the first in the lowest bits; 3, 5 and 6 bits straddle words).
// Affine: bits 2, 3, 4, 5, 6, 8 and group sizes 32, 64, 128.
//
// Floating-point modes (MLX's mode=): each group shares a scale and the
// values are small floats, with no bias:
//  - mxfp4 (OCP MX): groups of 32, FP4 E2M1 values (0, 0.5, 1, 1.5, 2, 3,
//    4, 6 and negatives), scales E8M0 (uint8 code c: 2^(c - 127)), the
//    shared exponent ceil(log2(max |w| / 6)): the smallest power of two
//    that needs no saturation (the OCP spec's floor(log2(max |w|)) - 2 may
//    clip the largest values);
//  - mxfp8: groups of 32, FP8 E4M3 values (max 448), scales E8M0 with
//    exponent ceil(log2(max |w| / 448));
//  - nvfp4: groups of 16, FP4 E2M1 values, scales FP8 E4M3 (uint8) of
//    max |w| / 6. An optional tensor-wide `global_scale` g (float32, e.g.
//    max |w| of the whole tensor) stores the scales multiplied by
//    448 * 6 / g, so they use E4M3's range; dequantizing divides it out.
// Values round to nearest (ties to even) and saturate at the format's
// largest magnitude; scales and codes are uint8.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// The affine forms (C++ shorthands of the general ones below).
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
// materializing the dequantized matrix. x: [..., K]; w 2-D or batched (see
// the general form below). The result type
// is that of x, scales and biases together (real floating).
array quantized_matmul(const array& x, const array& w, const array& scales,
                       const array& biases, bool transpose = true,
                       int group_size = 64, int bits = 4,
                       StreamOrDevice s = {});

enum class QuantizationMode { affine, mxfp4, nvfp4, mxfp8 };
// "affine", "mxfp4", "nvfp4" or "mxfp8"; anything else raises
// std::invalid_argument naming `op`.
QuantizationMode quantization_mode(const std::string& mode, const char* op);
const char* mode_name(QuantizationMode mode);

// The general forms (MLX's signatures). Absent group_size / bits take the
// mode's defaults: affine 64 / 4, mxfp4 32 / 4, nvfp4 16 / 4, mxfp8 32 / 8
// (the floating modes accept only those). quantize returns {w_q, scales,
// biases} for affine and {w_q, scales} otherwise. dequantize's `dtype` is
// the output type (default, as MLX: the scales' for affine, bfloat16 for
// the floating modes).
std::vector<array> quantize(const array& w, std::optional<int> group_size,
                            std::optional<int> bits, const std::string& mode,
                            const std::optional<array>& global_scale = {},
                            StreamOrDevice s = {});
array dequantize(const array& w, const array& scales,
                 const std::optional<array>& biases,
                 std::optional<int> group_size, std::optional<int> bits,
                 const std::string& mode,
                 const std::optional<array>& global_scale = {},
                 std::optional<Dtype> dtype = {}, StreamOrDevice s = {});
// w may be batched ([..., rows, cols]): its batch dims broadcast against
// x's ([..., M, K]). The result type is x's for the floating modes.
array quantized_matmul(const array& x, const array& w, const array& scales,
                       const std::optional<array>& biases, bool transpose,
                       std::optional<int> group_size, std::optional<int> bits,
                       const std::string& mode,
                       const std::optional<array>& global_scale = {},
                       StreamOrDevice s = {});
// quantized_matmul of x[lhs_indices] and w[rhs_indices] (indices into the
// batch dims, broadcast together; absent: every batch element in order), as
// gather_mm for dense matrices.
array gather_qmm(const array& x, const array& w, const array& scales,
                 const std::optional<array>& biases,
                 const std::optional<array>& lhs_indices,
                 const std::optional<array>& rhs_indices, bool transpose,
                 std::optional<int> group_size, std::optional<int> bits,
                 const std::string& mode, bool sorted_indices = false,
                 StreamOrDevice s = {});
// Both operands quantized (floating modes): x is quantized with `mode`
// (and global_scale_x), w is already (with `scales`, and global_scale_w),
// or is quantized too when scales is absent; the product is
// x_hat @ w_hat^T in x's dtype.
array qqmm(const array& x, const array& w, const std::optional<array>& scales,
           std::optional<int> group_size, std::optional<int> bits,
           const std::string& mode,
           const std::optional<array>& global_scale_x = {},
           const std::optional<array>& global_scale_w = {},
           StreamOrDevice s = {});
array gather_qqmm(const array& x, const array& w,
                  const std::optional<array>& scales,
                  const std::optional<array>& lhs_indices,
                  const std::optional<array>& rhs_indices,
                  std::optional<int> group_size, std::optional<int> bits,
                  const std::string& mode,
                  const std::optional<array>& global_scale_x = {},
                  const std::optional<array>& global_scale_w = {},
                  bool sorted_indices = false, StreamOrDevice s = {});

// FP8 E4M3 ("fn": no infinities, max 448, NaN 0x7f) codes of x as uint8,
// rounded to nearest even and saturated; from_fp8 decodes them.
array to_fp8(const array& x, StreamOrDevice s = {});
array from_fp8(const array& x, Dtype dtype = bfloat16, StreamOrDevice s = {});

// Inputs: x (computation dtype), w (uint32), scales, biases (same dtype as
// x); in the floating modes x, w, scales (uint8) and, for nvfp4 with a
// global scale, the global scale (0-d float32). The product is linear in x, scales and biases: vjp and jvp exist for
// all three (x: a quantized matmul with the other transpose; scales and
// biases: through the cotangent of the dense matrix, as in MLX); w holds
// integers, so derivatives with respect to it raise std::invalid_argument.
// vmap maps x (its batch axis moves to the front), and scales or biases
// (one dequantized matrix per batch element, multiplied densely); vmap over
// w raises std::invalid_argument.
class QuantizedMatmul : public Primitive {
 public:
  QuantizedMatmul(Stream s, int group_size, int bits, bool transpose,
                  QuantizationMode mode = QuantizationMode::affine)
      : Primitive(s),
        group_size_(group_size),
        bits_(bits),
        transpose_(transpose),
        mode_(mode) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "QuantizedMatmul"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  int group_size() const { return group_size_; }
  int bits() const { return bits_; }
  bool transposed() const { return transpose_; }
  QuantizationMode mode() const { return mode_; }

 private:
  int group_size_;
  int bits_;
  bool transpose_;
  QuantizationMode mode_;
};

// Constant tables shared by the ops and the kernel: the 16 FP4 E2M1 values
// and the 256 FP8 E4M3 values by code (NaN at 0x7f and 0xff).
const float* fp4_values();
const float* fp8_values();

}  // namespace fluxion
