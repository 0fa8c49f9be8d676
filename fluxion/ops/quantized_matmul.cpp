// quantized_matmul (the QuantizedMatmul primitive's checks, construction,
// output_shapes and is_equivalent) and the composites over it: gather_qmm,
// qqmm and gather_qqmm. QuantizedMatmul's rules are in quantized_rules.cpp;
// quantize, dequantize and the shared argument checks in quantized.cpp.
#include <optional>
#include <stdexcept>
#include <string>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/matmul_variants.h"
#include "fluxion/ops/quantized.h"
#include "fluxion/ops/quantized_impl.h"
#include "fluxion/ops/shape.h"
#include "fluxion/primitive_args.h"

namespace fluxion {

using quantized_detail::check_global_scale;
using quantized_detail::check_packed;
using quantized_detail::check_scales;
using quantized_detail::dtype_str;
using quantized_detail::is_fp;
using quantized_detail::resolve_params;
using quantized_detail::tag;
using quantized_detail::unpacked_cols;

array quantized_matmul(const array& x, const array& w, const array& scales,
                       const std::optional<array>& biases, bool transpose,
                       std::optional<int> group_size, std::optional<int> bits,
                       const std::string& mode_s,
                       const std::optional<array>& global_scale,
                       StreamOrDevice sd) {
  const char* op = "quantized_matmul";
  auto mode = quantization_mode(mode_s, op);
  auto [gs, b] = resolve_params(op, mode, group_size, bits);
  check_global_scale(op, mode, global_scale);
  if (w.dtype() != uint32) {
    throw std::invalid_argument(
        tag(op) + "The weight matrix should be uint32 but received " +
        dtype_str(w.dtype()) + ".");
  }
  if (w.ndim() < 2) {
    throw std::invalid_argument(
        tag(op) + "The quantized matrix must have at least 2 dimensions; got "
                  "shape " +
        shape_str(w.shape()) + ".");
  }
  check_scales(op, mode, scales, biases);
  check_packed(op, w, scales, biases, gs, b);
  if (x.ndim() < 1) {
    throw std::invalid_argument(
        tag(op) + "x must have at least 1 dimension; got a scalar.");
  }
  int64_t cols = unpacked_cols(w.shape(-1), b);
  int K = transpose ? static_cast<int>(cols) : w.shape(-2);
  int N = transpose ? w.shape(-2) : static_cast<int>(cols);
  if (x.shape(-1) != K) {
    throw std::invalid_argument(
        tag(op) + "The last dimension of x (shape " + shape_str(x.shape()) +
        ") does not match the quantized matrix (" +
        std::to_string(transpose ? N : K) + ", " +
        std::to_string(transpose ? K : N) + ") expanded from shape " +
        shape_str(w.shape()) + " with group_size=" + std::to_string(gs) +
        ", bits=" + std::to_string(b) +
        " and transpose=" + (transpose ? "true" : "false") + ".");
  }
  Dtype dt = is_fp(mode) ? x.dtype() : result_type({x, scales, *biases});
  if (!is_floating_point(dt)) {
    throw std::invalid_argument(
        tag(op) + "Only real floating types are supported but x" +
        (is_fp(mode) ? std::string("") : std::string(", scales and biases")) +
        " promote to " + dtype_str(dt) + ".");
  }
  Shape out;
  if (w.ndim() == 2) {
    out = x.shape();
    out.back() = N;
  } else {
    if (x.ndim() < 2) {
      throw std::invalid_argument(
          tag(op) + "With a batched quantized matrix (shape " +
          shape_str(w.shape()) +
          "), x needs at least 2 dimensions; got shape " +
          shape_str(x.shape()) + ".");
    }
    Shape xb(x.shape().begin(), x.shape().end() - 2);
    Shape wb(w.shape().begin(), w.shape().end() - 2);
    out = broadcast_shapes(xb, wb, op);
    out.push_back(x.shape(-2));
    out.push_back(N);
  }
  Stream s = to_stream(sd);
  std::vector<array> inputs = {astype(x, dt, s), w};
  if (is_fp(mode)) {
    inputs.push_back(scales);
    if (global_scale) {
      inputs.push_back(reshape(astype(*global_scale, float32, s), {}, s));
    }
  } else {
    inputs.push_back(astype(scales, dt, s));
    inputs.push_back(astype(*biases, dt, s));
  }
  return array(std::move(out), dt,
               std::make_shared<QuantizedMatmul>(s, gs, b, transpose, mode),
               std::move(inputs));
}

array quantized_matmul(const array& x, const array& w, const array& scales,
                       const array& biases, bool transpose, int group_size,
                       int bits, StreamOrDevice s) {
  return quantized_matmul(x, w, scales, std::optional<array>(biases),
                          transpose, group_size, bits, "affine", std::nullopt,
                          s);
}

namespace {

// An index array selecting batch elements of `x` (all batch dims flattened;
// absent: every element in order, shaped like the batch dims).
array batch_indices(const std::optional<array>& idx, const array& x,
                    const char* op, const char* which, Stream s) {
  Shape bs(x.shape().begin(), x.shape().end() - 2);
  if (idx) {
    if (!is_integral(idx->dtype())) {
      throw std::invalid_argument(tag(op) + which +
                                  " must have an integer type; got " +
                                  dtype_str(idx->dtype()) + ".");
    }
    return *idx;
  }
  int64_t n = 1;
  for (auto d : bs) {
    n *= d;
  }
  return reshape(arange(0, static_cast<int>(n), s), bs, s);
}

// x[..., M, K] -> [B, M, K] with the batch dims merged (a vector becomes one
// row).
array batch_rows(const array& a, Stream s) {
  if (a.ndim() < 2) {
    return reshape(a, {1, 1, a.shape(-1)}, s);
  }
  return reshape(a, {-1, a.shape(-2), a.shape(-1)}, s);
}

}  // namespace

array gather_qmm(const array& x, const array& w, const array& scales,
                 const std::optional<array>& biases,
                 const std::optional<array>& lhs_indices,
                 const std::optional<array>& rhs_indices, bool transpose,
                 std::optional<int> group_size, std::optional<int> bits,
                 const std::string& mode_s, bool /*sorted_indices*/,
                 StreamOrDevice sd) {
  const char* op = "gather_qmm";
  auto mode = quantization_mode(mode_s, op);
  auto [gs, b] = resolve_params(op, mode, group_size, bits);
  check_scales(op, mode, scales, biases);
  if (w.ndim() < 2 || x.ndim() < 1) {
    throw std::invalid_argument(
        tag(op) + "Expected x with at least 1 dimension and a quantized "
                  "matrix with at least 2; got shapes " +
        shape_str(x.shape()) + " and " + shape_str(w.shape()) + ".");
  }
  check_packed(op, w, scales, biases, gs, b);
  if (!is_floating_point(x.dtype())) {
    throw std::invalid_argument(tag(op) +
                                "Only real floating types are supported but "
                                "x has type " +
                                dtype_str(x.dtype()) + ".");
  }
  Stream s = to_stream(sd);
  bool vec = x.ndim() == 1;
  array X = vec ? reshape(x, {1, x.shape(0)}, s) : x;
  array li = batch_indices(lhs_indices, X, op, "lhs_indices", s);
  array ri = batch_indices(rhs_indices, w, op, "rhs_indices", s);
  Shape out_batch = broadcast_shapes(li.shape(), ri.shape(), op);
  array lf = reshape(broadcast_to(li, out_batch, s), {-1}, s);
  array rf = reshape(broadcast_to(ri, out_batch, s), {-1}, s);
  array gx = take(batch_rows(X, s), lf, 0, s);  // [B, M, K]
  auto gather_w = [&](const array& a) {
    return take(reshape(a, {-1, a.shape(-2), a.shape(-1)}, s), rf, 0, s);
  };
  std::optional<array> gb;
  if (biases) {
    gb = gather_w(*biases);
  }
  array out = quantized_matmul(gx, gather_w(w), gather_w(scales), gb,
                               transpose, gs, b, mode_s, std::nullopt, s);
  Shape out_shape = out_batch;
  if (!vec) {
    out_shape.push_back(X.shape(-2));
  }
  out_shape.push_back(out.shape(-1));
  return reshape(out, out_shape, s);
}

namespace {

// x quantized and dequantized with `mode`, in float32 (qqmm's left side).
array fake_quantized(const array& x, int gs, int b, const std::string& mode,
                     const std::optional<array>& g, Stream s) {
  auto q = quantize(x, gs, b, mode, g, s);
  return dequantize(q[0], q[1], std::nullopt, gs, b, mode, g, float32, s);
}

}  // namespace

array qqmm(const array& x, const array& w, const std::optional<array>& scales,
           std::optional<int> group_size, std::optional<int> bits,
           const std::string& mode_s, const std::optional<array>& gx,
           const std::optional<array>& gw, StreamOrDevice sd) {
  const char* op = "qqmm";
  auto mode = quantization_mode(mode_s, op);
  if (!is_fp(mode)) {
    throw std::invalid_argument(
        tag(op) + "Both operands are quantized with a floating mode "
                  "('mxfp4', 'nvfp4' or 'mxfp8'); got 'affine'.");
  }
  auto [gs, b] = resolve_params(op, mode, group_size, bits);
  check_global_scale(op, mode, gx);
  check_global_scale(op, mode, gw);
  if (!is_floating_point(x.dtype())) {
    throw std::invalid_argument(tag(op) + "x must be real floating; got " +
                                dtype_str(x.dtype()) + ".");
  }
  Stream s = to_stream(sd);
  array xq = x.ndim() == 1 ? reshape(x, {1, x.shape(0)}, s) : x;
  array xh = reshape(fake_quantized(xq, gs, b, mode_s, gx, s), x.shape(), s);
  array wq = w, ws = scales.value_or(array(0u));
  if (!scales) {
    auto q = quantize(w, gs, b, mode_s, gw, s);
    wq = q[0];
    ws = q[1];
  }
  return astype(quantized_matmul(xh, wq, ws, std::nullopt, true, gs, b, mode_s,
                                 gw, s),
                x.dtype(), s);
}

array gather_qqmm(const array& x, const array& w,
                  const std::optional<array>& scales,
                  const std::optional<array>& lhs_indices,
                  const std::optional<array>& rhs_indices,
                  std::optional<int> group_size, std::optional<int> bits,
                  const std::string& mode_s, const std::optional<array>& gx,
                  const std::optional<array>& gw, bool sorted_indices,
                  StreamOrDevice sd) {
  const char* op = "gather_qqmm";
  auto mode = quantization_mode(mode_s, op);
  if (!is_fp(mode)) {
    throw std::invalid_argument(
        tag(op) + "Both operands are quantized with a floating mode "
                  "('mxfp4', 'nvfp4' or 'mxfp8'); got 'affine'.");
  }
  auto [gs, b] = resolve_params(op, mode, group_size, bits);
  check_global_scale(op, mode, gx);
  check_global_scale(op, mode, gw);
  Stream s = to_stream(sd);
  array xq = x.ndim() == 1 ? reshape(x, {1, x.shape(0)}, s) : x;
  array xh = reshape(fake_quantized(xq, gs, b, mode_s, gx, s), x.shape(), s);
  array wq = w, ws = scales.value_or(array(0u));
  if (!scales) {
    auto q = quantize(w, gs, b, mode_s, gw, s);
    wq = q[0];
    ws = q[1];
  }
  if (gw) {
    // The global scale is one number: fold it into a dequantized gather.
    array wh = dequantize(wq, ws, std::nullopt, gs, b, mode_s, gw, float32, s);
    array li = batch_indices(lhs_indices, xq, op, "lhs_indices", s);
    array ri = batch_indices(rhs_indices, wh, op, "rhs_indices", s);
    return astype(gather_mm(xh, swapaxes(wh, -1, -2, s), li, ri,
                            sorted_indices, s),
                  x.dtype(), s);
  }
  return astype(gather_qmm(xh, wq, ws, std::nullopt, lhs_indices, rhs_indices,
                           true, gs, b, mode_s, sorted_indices, s),
                x.dtype(), s);
}

bool QuantizedMatmul::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& q = static_cast<const QuantizedMatmul&>(o);
  return q.group_size_ == group_size_ && q.bits_ == bits_ &&
         q.transpose_ == transpose_ && q.mode_ == mode_;
}

std::vector<PrimitiveArg> QuantizedMatmul::state() const {
  return export_state(int64_t{group_size_}, int64_t{bits_}, transpose_,
                      static_cast<int64_t>(mode_));
}

std::shared_ptr<Primitive> QuantizedMatmul::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "QuantizedMatmul");
  auto mode = a.enum_up_to(3, QuantizationMode::mxfp8);
  return std::make_shared<QuantizedMatmul>(s, a.i32(0), a.i32(1), a.b(2), mode);
}

std::vector<Shape> QuantizedMatmul::output_shapes(
    const std::vector<array>& in) {
  const array &x = in[0], &w = in[1];
  int N = transpose_ ? w.shape(-2)
                     : static_cast<int>(unpacked_cols(w.shape(-1), bits_));
  if (w.ndim() == 2) {
    Shape out = x.shape();
    out.back() = N;
    return {out};
  }
  Shape xb(x.shape().begin(), x.shape().end() - 2);
  Shape wb(w.shape().begin(), w.shape().end() - 2);
  Shape out = broadcast_shapes(xb, wb, "quantized_matmul");
  out.push_back(x.shape(-2));
  out.push_back(N);
  return {out};
}

}  // namespace fluxion
