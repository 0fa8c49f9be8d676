// quantize and dequantize (composites of public ops) and quantized_matmul
// (the QuantizedMatmul primitive and its rules). See quantized.h for the
// scheme.
#include "fluxion/ops/quantized.h"

#include <optional>
#include <sstream>
#include <stdexcept>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/misc.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"

namespace fluxion {

namespace {

std::string dtype_str(Dtype t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

void check_params(const char* op, int group_size, int bits) {
  if (group_size != 32 && group_size != 64 && group_size != 128) {
    throw std::invalid_argument(
        std::string("[") + op + "] The requested group size " +
        std::to_string(group_size) +
        " is not supported. The supported group sizes are 32, 64 and 128.");
  }
  if (bits != 2 && bits != 4 && bits != 8) {
    throw std::invalid_argument(
        std::string("[") + op + "] The requested number of bits " +
        std::to_string(bits) +
        " is not supported. The supported bits are 2, 4 and 8.");
  }
}

// The shapes of a packed matrix and its scales/biases must agree.
void check_packed(const char* op, const array& w, const array& scales,
                  const array& biases, int group_size, int bits) {
  if (w.dtype() != uint32) {
    throw std::invalid_argument(std::string("[") + op +
                                "] The matrix should be given as a uint32 "
                                "but received " +
                                dtype_str(w.dtype()) + ".");
  }
  if (scales.shape() != biases.shape()) {
    throw std::invalid_argument(
        std::string("[") + op +
        "] Scales and biases should have the same shape. Received scales "
        "with shape " +
        shape_str(scales.shape()) + " and biases with shape " +
        shape_str(biases.shape()) + ".");
  }
  bool ok = w.ndim() >= 1 && w.ndim() == scales.ndim();
  for (int d = 0; ok && d + 1 < w.ndim(); ++d) {
    ok = w.shape(d) == scales.shape(d);
  }
  ok = ok && int64_t{w.shape(-1)} * (32 / bits) ==
                 int64_t{scales.shape(-1)} * group_size;
  if (!ok) {
    throw std::invalid_argument(
        std::string("[") + op +
        "] The shapes of the matrix and scales are incompatible given the "
        "quantization parameters: w.shape() == " +
        shape_str(w.shape()) +
        " and scales.shape() == " + shape_str(scales.shape()) +
        " with group_size=" + std::to_string(group_size) +
        " and bits=" + std::to_string(bits) + ".");
  }
}

}  // namespace

std::tuple<array, array, array> quantize(const array& w, int group_size,
                                         int bits, StreamOrDevice s) {
  check_params("quantize", group_size, bits);
  if (!is_floating_point(w.dtype())) {
    throw std::invalid_argument(
        "[quantize] Only real floating types can be quantized but w has "
        "type " +
        dtype_str(w.dtype()) + ".");
  }
  if (w.ndim() < 2) {
    throw std::invalid_argument(
        "[quantize] The matrix to be quantized must have at least 2 "
        "dimensions but it has shape " +
        shape_str(w.shape()) + ".");
  }
  if (w.shape(-1) % group_size != 0) {
    throw std::invalid_argument(
        "[quantize] The last dimension of the matrix needs to be divisible "
        "by the quantization group size " +
        std::to_string(group_size) +
        ". However the provided matrix has shape " + shape_str(w.shape()) +
        ".");
  }
  Dtype ct = w.dtype() == float64 ? float64 : float32;
  int K = w.shape(-1);
  int el = 32 / bits;
  Shape gshape = w.shape();
  gshape.back() = K / group_size;
  gshape.push_back(group_size);
  array g = reshape(astype(w, ct, s), gshape, s);
  array n_bins(static_cast<double>((1 << bits) - 1), ct);
  array zero(0.0, ct);
  array w_max = max(g, -1, true, s);
  array w_min = min(g, -1, true, s);
  array mask = greater(abs(w_min, s), abs(w_max, s), s);
  array scale =
      maximum(divide(subtract(w_max, w_min, s), n_bins, s), array(1e-7, ct), s);
  scale = where(mask, scale, negative(scale, s), s);
  array edge = where(mask, w_min, w_max, s);
  array q0 = round(divide(edge, scale, s), 0, s);
  array nonzero = not_equal(q0, zero, s);
  scale =
      where(nonzero, divide(edge, where(nonzero, q0, scale, s), s), scale, s);
  array bias = where(nonzero, edge, zero, s);
  array q = clip(round(divide(subtract(g, bias, s), scale, s), 0, s), zero,
                 n_bins, s);
  Shape pshape = w.shape();
  pshape.back() = K / el;
  pshape.push_back(el);
  q = reshape(astype(q, uint32, s), pshape, s);
  array shifts = arange(0.0, 32.0, static_cast<double>(bits), uint32, s);
  array packed = sum(left_shift(q, shifts, s), -1, false, s);
  array scales = astype(squeeze(scale, -1, s), w.dtype(), s);
  array biases = astype(squeeze(bias, -1, s), w.dtype(), s);
  return {packed, scales, biases};
}

array dequantize(const array& w, const array& scales, const array& biases,
                 int group_size, int bits, StreamOrDevice s) {
  check_params("dequantize", group_size, bits);
  check_packed("dequantize", w, scales, biases, group_size, bits);
  if (!is_floating_point(scales.dtype()) || biases.dtype() != scales.dtype()) {
    throw std::invalid_argument(
        "[dequantize] Scales and biases must share a real floating dtype; "
        "got " +
        dtype_str(scales.dtype()) + " and " + dtype_str(biases.dtype()) + ".");
  }
  int el = 32 / bits;
  array shifts = arange(0.0, 32.0, static_cast<double>(bits), uint32, s);
  array mask(static_cast<uint32_t>((1u << bits) - 1));
  array q = bitwise_and(right_shift(expand_dims(w, -1, s), shifts, s), mask, s);
  Shape gshape = scales.shape();
  gshape.push_back(group_size);
  // Half types compute in float32 and round once.
  Dtype ct = scales.dtype() == float64 ? float64 : float32;
  q = reshape(astype(q, ct, s), gshape, s);
  array out = add(multiply(q, expand_dims(astype(scales, ct, s), -1, s), s),
                  expand_dims(astype(biases, ct, s), -1, s), s);
  Shape oshape = w.shape();
  oshape.back() = w.shape(-1) * el;
  return astype(reshape(out, oshape, s), scales.dtype(), s);
}

array quantized_matmul(const array& x, const array& w, const array& scales,
                       const array& biases, bool transpose, int group_size,
                       int bits, StreamOrDevice s) {
  const char* op = "quantized_matmul";
  check_params(op, group_size, bits);
  if (w.dtype() != uint32) {
    throw std::invalid_argument(
        "[quantized_matmul] The weight matrix should be uint32 but received " +
        dtype_str(w.dtype()) + ".");
  }
  if (w.ndim() != 2) {
    throw std::invalid_argument(
        "[quantized_matmul] The quantized matrix must be 2-D; got shape " +
        shape_str(w.shape()) + ".");
  }
  check_packed(op, w, scales, biases, group_size, bits);
  if (x.ndim() < 1) {
    throw std::invalid_argument(
        "[quantized_matmul] x must have at least 1 dimension; got a scalar.");
  }
  int K = transpose ? w.shape(1) * (32 / bits) : w.shape(0);
  int N = transpose ? w.shape(0) : w.shape(1) * (32 / bits);
  if (x.shape(-1) != K) {
    throw std::invalid_argument(
        "[quantized_matmul] The last dimension of x (shape " +
        shape_str(x.shape()) + ") does not match the quantized matrix (" +
        std::to_string(transpose ? N : K) + ", " +
        std::to_string(transpose ? K : N) + ") expanded from shape " +
        shape_str(w.shape()) + " with group_size=" +
        std::to_string(group_size) + ", bits=" + std::to_string(bits) +
        " and transpose=" + (transpose ? "true" : "false") + ".");
  }
  Dtype dt = result_type({x, scales, biases});
  if (!is_floating_point(dt)) {
    throw std::invalid_argument(
        "[quantized_matmul] Only real floating types are supported but x, "
        "scales and biases promote to " +
        dtype_str(dt) + ".");
  }
  Shape out = x.shape();
  out.back() = N;
  return array(
      std::move(out), dt,
      std::make_shared<QuantizedMatmul>(to_stream(s), group_size, bits,
                                        transpose),
      {astype(x, dt, s), w, astype(scales, dt, s), astype(biases, dt, s)});
}

bool QuantizedMatmul::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& q = static_cast<const QuantizedMatmul&>(o);
  return q.group_size_ == group_size_ && q.bits_ == bits_ &&
         q.transpose_ == transpose_;
}

std::vector<Shape> QuantizedMatmul::output_shapes(
    const std::vector<array>& in) {
  Shape out = in[0].shape();
  out.back() = transpose_ ? in[1].shape(0) : in[1].shape(1) * (32 / bits_);
  return {out};
}

namespace {

[[noreturn]] void no_rule_for_w(const char* rule) {
  throw std::invalid_argument(
      std::string("[quantized_matmul] Cannot compute the ") + rule +
      " with respect to the quantized matrix (argument 1): its values are "
      "integers.");
}

// `a` (shaped like the dense matrix: rows x cols, groups along the columns)
// split into groups: [rows, cols / group_size, group_size].
array by_group(const array& a, const array& scales, int group_size,
               const Stream& s) {
  Shape shape = scales.shape();
  shape.push_back(group_size);
  return reshape(a, shape, s);
}

}  // namespace

// Everything is linear in x, in the scales and in the biases. With G the
// cotangent and W = s * q + b (per group):
//  - x: G @ W (transpose) or G @ W^T, a quantized matmul with the other
//    transpose;
//  - scales: sum over each group of P * q, and biases: sum over each group
//    of P, where P = G^T @ x (transpose) or x^T @ G is the cotangent of the
//    dense W (as in MLX).
std::vector<array> QuantizedMatmul::vjp(const std::vector<array>& primals,
                                        const std::vector<array>& cotangents,
                                        const std::vector<int>& argnums,
                                        const std::vector<array>&) {
  const array &x = primals[0], &w = primals[1], &scales = primals[2],
              &biases = primals[3], &g = cotangents[0];
  Stream s = stream();
  std::optional<array> dense_cot;  // P, by group
  auto p = [&]() -> const array& {
    if (!dense_cot) {
      array g2 = reshape(g, {-1, g.shape(-1)}, s);
      array x2 = reshape(x, {-1, x.shape(-1)}, s);
      array pm = transpose_ ? matmul(transpose(g2, s), x2, s)
                            : matmul(transpose(x2, s), g2, s);
      dense_cot = by_group(pm, scales, group_size_, s);
    }
    return *dense_cot;
  };
  std::vector<array> out;
  for (int a : argnums) {
    if (a == 0) {
      out.push_back(quantized_matmul(g, w, scales, biases, !transpose_,
                                     group_size_, bits_, s));
    } else if (a == 1) {
      no_rule_for_w("VJP");
    } else if (a == 2) {
      array q =
          by_group(dequantize(w, ones_like(scales, s), zeros_like(biases, s),
                              group_size_, bits_, s),
                   scales, group_size_, s);
      out.push_back(sum(multiply(p(), q, s), -1, false, s));
    } else {
      out.push_back(sum(p(), -1, false, s));
    }
  }
  return out;
}

std::vector<array> QuantizedMatmul::jvp(const std::vector<array>& primals,
                                        const std::vector<array>& tangents,
                                        const std::vector<int>& argnums) {
  const array &x = primals[0], &w = primals[1], &scales = primals[2],
              &biases = primals[3];
  Stream s = stream();
  std::optional<array> out;
  auto accumulate = [&](array t) { out = out ? add(*out, t, s) : t; };
  // x @ dW^T (transpose) or x @ dW for a dense tangent dW of the matrix.
  auto times = [&](const array& dw) {
    return matmul(x, transpose_ ? transpose(dw, s) : dw, s);
  };
  for (size_t i = 0; i < argnums.size(); ++i) {
    const array& t = tangents[i];
    if (argnums[i] == 0) {
      accumulate(quantized_matmul(t, w, scales, biases, transpose_, group_size_,
                                  bits_, s));
    } else if (argnums[i] == 1) {
      no_rule_for_w("JVP");
    } else if (argnums[i] == 2) {
      accumulate(times(
          dequantize(w, t, zeros_like(biases, s), group_size_, bits_, s)));
    } else {
      Shape gshape = scales.shape();
      gshape.push_back(group_size_);
      Shape dense = scales.shape();
      dense.back() *= group_size_;
      accumulate(times(
          reshape(broadcast_to(expand_dims(t, -1, s), gshape, s), dense, s)));
    }
  }
  return {*out};
}

// Batched x alone: its batch axis moves to the front and the product
// broadcasts over it. Batched scales or biases give one matrix per batch
// element: dequantized, [B, K, N], and multiplied densely (a documented
// fallback: the packed matrix is shared, only the scales/biases vary).
std::pair<std::vector<array>, std::vector<int>> QuantizedMatmul::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  Stream s = stream();
  if (axes[1] >= 0) {
    throw std::invalid_argument(
        "[quantized_matmul] vmap over the quantized matrix is not supported "
        "(over x, scales and biases it is).");
  }
  const array& w = inputs[1];
  if (axes[2] < 0 && axes[3] < 0) {
    array x = axes[0] > 0 ? moveaxis(inputs[0], axes[0], 0, s) : inputs[0];
    return {{quantized_matmul(x, w, inputs[2], inputs[3], transpose_,
                              group_size_, bits_, s)},
            {0}};
  }
  int B = axes[2] >= 0 ? inputs[2].shape(axes[2]) : inputs[3].shape(axes[3]);
  auto batched = [&](const array& a, int axis) {
    if (axis >= 0) {
      return moveaxis(a, axis, 0, s);
    }
    Shape shape = a.shape();
    shape.insert(shape.begin(), B);
    return broadcast_to(expand_dims(a, 0, s), shape, s);
  };
  array sc = batched(inputs[2], axes[2]);
  array bi = batched(inputs[3], axes[3]);
  array wb = batched(w, -1);
  array dense = dequantize(wb, sc, bi, group_size_, bits_, s);  // [B, R, C]
  if (transpose_) {
    dense = swapaxes(dense, -1, -2, s);  // [B, K, N]
  }
  // x: [B or 1, L..., K] against [B, 1..., K, N].
  array x = axes[0] >= 0 ? moveaxis(inputs[0], axes[0], 0, s)
                         : expand_dims(inputs[0], 0, s);
  int r = x.ndim() - 1;  // x's own ndim
  if (r == 1) {
    array out = matmul(expand_dims(x, 1, s), dense, s);
    return {{squeeze(out, 1, s)}, {0}};
  }
  std::vector<int> ones;
  for (int i = 0; i < r - 2; ++i) {
    ones.push_back(1 + i);
  }
  if (!ones.empty()) {
    dense = expand_dims(dense, ones, s);
  }
  return {{matmul(x, dense, s)}, {0}};
}

}  // namespace fluxion
