// Transformation rules (jvp, vjp, vmap) of QuantizedMatmul, written with
// public ops so that they differentiate again. They live apart from
// quantized_matmul.cpp only to keep files short; the op and the
// primitive's other members (output_shapes, is_equivalent) are there.
#include <optional>
#include <stdexcept>
#include <string>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/quantized.h"
#include "fluxion/ops/quantized_impl.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

using quantized_detail::is_fp;

namespace {

[[noreturn]] void no_rule_for(const char* rule, int arg, const char* what) {
  throw std::invalid_argument(
      std::string("[quantized_matmul] Cannot compute the ") + rule +
      " with respect to " + what + " (argument " + std::to_string(arg) +
      "): its values are integer codes.");
}

// `a` (shaped like the dense matrix: [..., rows, cols], groups along the
// columns) split into groups: [..., rows, cols / group_size, group_size].
array by_group(const array& a, const array& scales, int group_size,
               const Stream& s) {
  Shape shape = a.shape();
  shape.back() = scales.shape(-1);
  shape.push_back(group_size);
  return reshape(a, shape, s);
}

// `a` summed over the leading dims that `shape` broadcast to (the
// transpose of a broadcast).
array unbroadcast(const array& a, const Shape& shape, const Stream& s) {
  if (a.shape() == shape) {
    return a;
  }
  int lead = a.ndim() - static_cast<int>(shape.size());
  std::vector<int> axes;
  for (int i = 0; i < a.ndim(); ++i) {
    if (i < lead || (shape[i - lead] == 1 && a.shape(i) != 1)) {
      axes.push_back(i);
    }
  }
  array r = axes.empty() ? a : sum(a, axes, true, s);
  return reshape(r, shape, s);
}

}  // namespace

// Everything is linear in x, in the scales and in the biases. With G the
// cotangent and W = s * q + b (per group):
//  - x: G @ W (transpose) or G @ W^T, a quantized matmul with the other
//    transpose (summed over batch dims x was broadcast along);
//  - scales: sum over each group of P * q, and biases: sum over each group
//    of P, where P = G^T @ x (transpose) or x^T @ G is the cotangent of the
//    dense W (as in MLX; per batch element when w is batched).
// In the floating modes the scales are integer codes: only x has a rule.
std::vector<array> QuantizedMatmul::vjp(const std::vector<array>& primals,
                                        const std::vector<array>& cotangents,
                                        const std::vector<int>& argnums,
                                        const std::vector<array>&) {
  const array &x = primals[0], &w = primals[1], &scales = primals[2],
              &g = cotangents[0];
  bool fp = is_fp(mode_);
  std::optional<array> biases;
  std::optional<array> gscale;
  if (!fp) {
    biases = primals[3];
  } else if (primals.size() > 3) {
    gscale = primals[3];
  }
  Stream s = stream();
  bool batched = w.ndim() > 2;
  std::optional<array> dense_cot;  // P, by group
  auto p = [&]() -> const array& {
    if (!dense_cot) {
      array pm(0.0f);
      if (batched) {
        pm = transpose_ ? matmul(swapaxes(g, -1, -2, s), x, s)
                        : matmul(swapaxes(x, -1, -2, s), g, s);
        Shape target(w.shape().begin(), w.shape().end() - 2);
        target.push_back(pm.shape(-2));
        target.push_back(pm.shape(-1));
        pm = unbroadcast(pm, target, s);
      } else {
        array g2 = reshape(g, {-1, g.shape(-1)}, s);
        array x2 = reshape(x, {-1, x.shape(-1)}, s);
        pm = transpose_ ? matmul(transpose(g2, s), x2, s)
                        : matmul(transpose(x2, s), g2, s);
      }
      dense_cot = by_group(pm, scales, group_size_, s);
    }
    return *dense_cot;
  };
  std::vector<array> out;
  for (int a : argnums) {
    if (a == 0) {
      array gx = quantized_matmul(g, w, scales, biases, !transpose_,
                                  group_size_, bits_, mode_name(mode_), gscale,
                                  s);
      out.push_back(batched ? unbroadcast(gx, x.shape(), s) : gx);
    } else if (a == 1) {
      no_rule_for("VJP", 1, "the quantized matrix");
    } else if (fp) {
      no_rule_for("VJP", a, a == 2 ? "the scales" : "the global scale");
    } else if (a == 2) {
      array q = by_group(
          dequantize(w, ones_like(scales, s), zeros_like(*biases, s),
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
  const array &x = primals[0], &w = primals[1], &scales = primals[2];
  bool fp = is_fp(mode_);
  std::optional<array> biases;
  std::optional<array> gscale;
  if (!fp) {
    biases = primals[3];
  } else if (primals.size() > 3) {
    gscale = primals[3];
  }
  Stream s = stream();
  std::optional<array> out;
  auto accumulate = [&](array t) { out = out ? add(*out, t, s) : t; };
  // x @ dW^T (transpose) or x @ dW for a dense tangent dW of the matrix.
  auto times = [&](const array& dw) {
    return matmul(x, transpose_ ? swapaxes(dw, -1, -2, s) : dw, s);
  };
  for (size_t i = 0; i < argnums.size(); ++i) {
    const array& t = tangents[i];
    if (argnums[i] == 0) {
      accumulate(quantized_matmul(t, w, scales, biases, transpose_,
                                  group_size_, bits_, mode_name(mode_), gscale,
                                  s));
    } else if (argnums[i] == 1) {
      no_rule_for("JVP", 1, "the quantized matrix");
    } else if (fp) {
      no_rule_for("JVP", argnums[i],
                  argnums[i] == 2 ? "the scales" : "the global scale");
    } else if (argnums[i] == 2) {
      accumulate(times(
          dequantize(w, t, zeros_like(*biases, s), group_size_, bits_, s)));
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
// broadcasts over it (a 2-D matrix is shared; a batched one gains a leading
// 1). Batched scales or biases (affine) give one matrix per batch element:
// dequantized and multiplied densely (a documented fallback: the packed
// matrix is shared, only the scales/biases vary).
std::pair<std::vector<array>, std::vector<int>> QuantizedMatmul::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  Stream s = stream();
  bool fp = is_fp(mode_);
  if (axes[1] >= 0) {
    throw std::invalid_argument(
        "[quantized_matmul] vmap over the quantized matrix is not supported "
        "(over x, and the affine scales and biases, it is).");
  }
  for (size_t i = 2; fp && i < axes.size(); ++i) {
    if (axes[i] >= 0) {
      throw std::invalid_argument(
          "[quantized_matmul] vmap over the scales of a floating mode is not "
          "supported (over x it is).");
    }
  }
  const array& w = inputs[1];
  std::optional<array> gscale;
  if (fp && inputs.size() > 3) {
    gscale = inputs[3];
  }
  if (fp || (axes[2] < 0 && axes[3] < 0)) {
    // Only x is mapped.
    array x = axes[0] > 0 ? moveaxis(inputs[0], axes[0], 0, s) : inputs[0];
    // With a batched matrix the batch dims broadcast right-aligned: x needs
    // as many batch dims as w after the mapped one.
    while (w.ndim() > 2 && x.ndim() < w.ndim() + 1) {
      x = expand_dims(x, 1, s);
    }
    return {{quantized_matmul(
                x, w, inputs[2],
                fp ? std::nullopt : std::optional<array>(inputs[3]),
                transpose_, group_size_, bits_, mode_name(mode_), gscale, s)},
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
  array dense = dequantize(wb, sc, bi, group_size_, bits_, s);  // [B, .., R, C]
  if (transpose_) {
    dense = swapaxes(dense, -1, -2, s);  // [B, .., K, N]
  }
  array x = axes[0] >= 0 ? moveaxis(inputs[0], axes[0], 0, s)
                         : expand_dims(inputs[0], 0, s);
  if (w.ndim() == 2) {
    // x: [B or 1, L..., K] against [B, 1..., K, N].
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
  // Batched matrix: x [B or 1, xb..., M, K] against [B, wb..., K, N].
  while (x.ndim() < dense.ndim()) {
    x = expand_dims(x, 1, s);
  }
  while (dense.ndim() < x.ndim()) {
    dense = expand_dims(dense, 1, s);
  }
  return {{matmul(x, dense, s)}, {0}};
}

}  // namespace fluxion
