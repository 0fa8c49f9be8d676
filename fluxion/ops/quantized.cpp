// quantize and dequantize (composites of public ops), the FP8 conversions,
// the quantization modes and the argument checks that quantized_matmul.cpp
// shares. quantized_matmul and its composites are in quantized_matmul.cpp,
// QuantizedMatmul's rules in quantized_rules.cpp (apart only to keep files
// short). See quantized.h for the scheme.
#include "fluxion/ops/quantized.h"

#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/hadamard.h"
#include "fluxion/ops/layout.h"
#include "fluxion/ops/searchsorted.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/quantized_impl.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"

namespace fluxion {

using quantized_detail::dtype_str;
using quantized_detail::is_fp;
using quantized_detail::tag;
using quantized_detail::unpacked_cols;

namespace quantized_detail {

// Group size and bits after MLX's defaults, validated for the mode.
std::pair<int, int> resolve_params(const char* op, QuantizationMode mode,
                                   std::optional<int> group_size,
                                   std::optional<int> bits) {
  int gs, b;
  switch (mode) {
    case QuantizationMode::affine:
      gs = group_size.value_or(64);
      b = bits.value_or(4);
      if (gs != 32 && gs != 64 && gs != 128) {
        throw std::invalid_argument(
            tag(op) + "The requested group size " + std::to_string(gs) +
            " is not supported. The supported group sizes are 32, 64 and "
            "128.");
      }
      if (b != 2 && b != 3 && b != 4 && b != 5 && b != 6 && b != 8) {
        throw std::invalid_argument(
            tag(op) + "The requested number of bits " + std::to_string(b) +
            " is not supported. The supported bits are 2, 3, 4, 5, 6 and 8.");
      }
      return {gs, b};
    case QuantizationMode::mxfp4:
    case QuantizationMode::nvfp4:
    case QuantizationMode::mxfp8: {
      int want_gs = mode == QuantizationMode::nvfp4 ? 16 : 32;
      int want_b = mode == QuantizationMode::mxfp8 ? 8 : 4;
      gs = group_size.value_or(want_gs);
      b = bits.value_or(want_b);
      if (gs != want_gs) {
        throw std::invalid_argument(
            tag(op) + "The " + mode_name(mode) + " mode uses groups of " +
            std::to_string(want_gs) + "; got group_size=" +
            std::to_string(gs) + ".");
      }
      if (b != want_b) {
        throw std::invalid_argument(
            tag(op) + "The " + mode_name(mode) + " mode uses " +
            std::to_string(want_b) + " bits; got bits=" + std::to_string(b) +
            ".");
      }
      return {gs, b};
    }
  }
  return {0, 0};
}

// The shapes of a packed matrix and its scales (and biases) must agree.
void check_packed(const char* op, const array& w, const array& scales,
                  const std::optional<array>& biases, int group_size,
                  int bits) {
  if (w.dtype() != uint32) {
    throw std::invalid_argument(tag(op) +
                                "The matrix should be given as a uint32 "
                                "but received " +
                                dtype_str(w.dtype()) + ".");
  }
  if (biases && scales.shape() != biases->shape()) {
    throw std::invalid_argument(
        tag(op) +
        "Scales and biases should have the same shape. Received scales "
        "with shape " +
        shape_str(scales.shape()) + " and biases with shape " +
        shape_str(biases->shape()) + ".");
  }
  bool ok = w.ndim() >= 1 && w.ndim() == scales.ndim();
  for (int d = 0; ok && d + 1 < w.ndim(); ++d) {
    ok = w.shape(d) == scales.shape(d);
  }
  ok = ok && unpacked_cols(w.shape(-1), bits) ==
                 int64_t{scales.shape(-1)} * group_size &&
       (int64_t{w.shape(-1)} * 32) % bits == 0;
  if (!ok) {
    throw std::invalid_argument(
        tag(op) +
        "The shapes of the matrix and scales are incompatible given the "
        "quantization parameters: w.shape() == " +
        shape_str(w.shape()) +
        " and scales.shape() == " + shape_str(scales.shape()) +
        " with group_size=" + std::to_string(group_size) +
        " and bits=" + std::to_string(bits) + ".");
  }
}

// Scales (and biases) of the mode: affine ones share a real floating
// dtype; the floating modes' are uint8 codes.
void check_scales(const char* op, QuantizationMode mode, const array& scales,
                  const std::optional<array>& biases) {
  if (mode == QuantizationMode::affine) {
    if (!biases) {
      throw std::invalid_argument(
          tag(op) + "The affine mode needs biases (quantize returns them).");
    }
    if (!is_floating_point(scales.dtype()) ||
        biases->dtype() != scales.dtype()) {
      throw std::invalid_argument(
          tag(op) +
          "Scales and biases must share a real floating dtype; got " +
          dtype_str(scales.dtype()) + " and " + dtype_str(biases->dtype()) +
          ".");
    }
    return;
  }
  if (biases) {
    throw std::invalid_argument(tag(op) + "The " + mode_name(mode) +
                                " mode has no biases.");
  }
  if (scales.dtype() != uint8) {
    throw std::invalid_argument(tag(op) + "The " + mode_name(mode) +
                                " mode's scales are uint8 codes; got " +
                                dtype_str(scales.dtype()) + ".");
  }
}

void check_global_scale(const char* op, QuantizationMode mode,
                        const std::optional<array>& g) {
  if (!g) {
    return;
  }
  if (mode != QuantizationMode::nvfp4) {
    throw std::invalid_argument(tag(op) +
                                "global_scale is only used by the nvfp4 "
                                "mode; got mode " +
                                mode_name(mode) + ".");
  }
  if (g->size() != 1 || !is_floating_point(g->dtype())) {
    throw std::invalid_argument(
        tag(op) + "global_scale must be a real floating scalar; got shape " +
        shape_str(g->shape()) + " and dtype " + dtype_str(g->dtype()) + ".");
  }
}

}  // namespace quantized_detail

using quantized_detail::check_global_scale;
using quantized_detail::check_packed;
using quantized_detail::check_scales;
using quantized_detail::resolve_params;

namespace {

// --- packing: values as one little-endian bit stream ---

// q (uint32, [..., n]) with n * bits a multiple of 32, packed into
// [..., n * bits / 32] words.
array pack(const array& q, int bits, Stream s) {
  int n = q.shape(-1);
  if (32 % bits == 0) {
    int el = 32 / bits;
    Shape ps = q.shape();
    ps.back() = n / el;
    ps.push_back(el);
    array shifts = arange(0.0, 32.0, static_cast<double>(bits), uint32, s);
    return sum(left_shift(reshape(q, ps, s), shifts, s), -1, false, s);
  }
  // Chunks of V values fill W words exactly (V * bits == 32 * W).
  int W = bits, V = 32;
  while (V % 2 == 0 && W % 2 == 0) {
    V /= 2;
    W /= 2;
  }
  std::vector<uint32_t> lshift(W * V), rshift(W * V);
  std::vector<uint8_t> use_l(W * V), use_r(W * V);
  for (int j = 0; j < W; ++j) {
    for (int i = 0; i < V; ++i) {
      // Value i starts ls bits into word j (its low bits land there) ...
      int ls = bits * i - 32 * j;
      use_l[j * V + i] = ls >= 0 && ls < 32;
      lshift[j * V + i] = use_l[j * V + i] ? ls : 0;
      // ... or started rs bits before it and its high bits continue there.
      int rs = -ls;
      use_r[j * V + i] = rs > 0 && rs < bits;
      rshift[j * V + i] = use_r[j * V + i] ? rs : 0;
    }
  }
  Shape cs = q.shape();
  cs.back() = n / V;
  cs.push_back(1);
  cs.push_back(V);
  array qc = reshape(q, cs, s);  // [..., C, 1, V]
  auto table = [&](auto& v, Dtype t) {
    return array(v.begin(), Shape{W, V}, t);
  };
  array zero = array(0u, uint32);
  array lo = where(astype(table(use_l, uint8), bool_, s),
                   left_shift(qc, table(lshift, uint32), s), zero, s);
  array hi = where(astype(table(use_r, uint8), bool_, s),
                   right_shift(qc, table(rshift, uint32), s), zero, s);
  array words = sum(add(lo, hi, s), -1, false, s);  // [..., C, W]
  Shape out = q.shape();
  out.back() = n / V * W;
  return reshape(words, out, s);
}

// The inverse of pack: [..., words] -> [..., words * 32 / bits] uint32.
array unpack(const array& w, int bits, Stream s) {
  array mask(static_cast<uint32_t>((1u << bits) - 1));
  if (32 % bits == 0) {
    int el = 32 / bits;
    array shifts = arange(0.0, 32.0, static_cast<double>(bits), uint32, s);
    array q = bitwise_and(right_shift(expand_dims(w, -1, s), shifts, s), mask, s);
    Shape out = w.shape();
    out.back() *= el;
    return reshape(q, out, s);
  }
  int W = bits, V = 32;
  while (V % 2 == 0 && W % 2 == 0) {
    V /= 2;
    W /= 2;
  }
  std::vector<int32_t> first(V), second(V);
  std::vector<uint32_t> off(V), back(V);
  std::vector<uint8_t> spans(V);
  for (int i = 0; i < V; ++i) {
    int p = bits * i;
    first[i] = p / 32;
    off[i] = p % 32;
    spans[i] = off[i] + bits > 32;
    second[i] = spans[i] ? first[i] + 1 : first[i];
    back[i] = spans[i] ? 32 - off[i] : 0;
  }
  Shape cs = w.shape();
  cs.back() = w.shape(-1) / W;
  cs.push_back(W);
  array wc = reshape(w, cs, s);  // [..., C, W]
  array lo = take(wc, array(first.begin(), Shape{V}, int32), -1, s);
  array hi = take(wc, array(second.begin(), Shape{V}, int32), -1, s);
  array v = right_shift(lo, array(off.begin(), Shape{V}, uint32), s);
  array up = where(astype(array(spans.begin(), Shape{V}, uint8), bool_, s),
                   left_shift(hi, array(back.begin(), Shape{V}, uint32), s),
                   array(0u, uint32), s);
  array q = bitwise_and(bitwise_or(v, up, s), mask, s);
  Shape out = w.shape();
  out.back() = static_cast<int>(unpacked_cols(w.shape(-1), bits));
  return reshape(q, out, s);
}

// --- small floats ---

// Codes of a float format with `mbits` mantissa bits, smallest normal
// exponent `min_exp` and largest magnitude `max_val`, sign in bit
// `sign_bit`: value m * 2^(e - mbits) with e = max(floor(log2 |x|),
// min_exp) and m = round(|x| / 2^(e - mbits)) has the magnitude code
// (e - min_exp) * 2^mbits + m (rounding up to the next binade carries into
// the exponent field by itself). Computed in float32.
array fp_encode(const array& x, int mbits, int min_exp, double max_val,
                int sign_bit, Stream s) {
  array xf = astype(x, float32, s);
  array a = minimum(abs(xf, s), array(static_cast<float>(max_val)), s);
  array e = maximum(floor(log2(a, s), s), array(static_cast<float>(min_exp)),
                    s);
  array quantum = power(array(2.0f), subtract(e, array(float(mbits)), s), s);
  array m = round(divide(a, quantum, s), 0, s);
  array code = add(multiply(subtract(e, array(float(min_exp)), s),
                            array(float(1 << mbits)), s),
                   m, s);
  array sign = where(less(xf, array(0.0f), s), array(float(1 << sign_bit)),
                     array(0.0f), s);
  return astype(add(code, sign, s), uint8, s);
}

array fp4_encode(const array& x, Stream s) {
  return fp_encode(x, 1, 0, 6.0, 3, s);
}

array fp8_encode(const array& x, Stream s) {
  array code = fp_encode(x, 3, -6, 448.0, 7, s);
  return where(isnan(x, s), array(uint8_t{0x7f}), code, s);
}

array fp4_decode(const array& codes, Stream s) {
  return take(array(fp4_values(), Shape{16}, float32), codes, s);
}

array fp8_decode(const array& codes, Stream s) {
  return take(array(fp8_values(), Shape{256}, float32), codes, s);
}

// E8M0: 2^(c - 127); 255 is NaN.
array e8m0_decode(const array& codes, Stream s) {
  array c = astype(codes, float32, s);
  array v = power(array(2.0f), subtract(c, array(127.0f), s), s);
  return where(equal(codes, array(uint8_t{255}), s),
               array(std::numeric_limits<float>::quiet_NaN()), v, s);
}

// nvfp4's tensor factor: scales are stored times 448 * 6 / g.
array nv_encode_factor(const std::optional<array>& g, Stream s) {
  if (!g) {
    return array(1.0f);
  }
  return divide(array(448.0f * 6.0f), reshape(astype(*g, float32, s), {}, s),
                s);
}

// The decoded per-group scales (float32) of a floating mode.
array decoded_scales(QuantizationMode mode, const array& scales,
                     const std::optional<array>& g, Stream s) {
  if (mode == QuantizationMode::nvfp4) {
    return divide(fp8_decode(scales, s), nv_encode_factor(g, s), s);
  }
  return e8m0_decode(scales, s);
}

array check_float_input(const char* op, const array& w) {
  if (!is_floating_point(w.dtype())) {
    throw std::invalid_argument(
        tag(op) + "Only real floating types can be quantized but w has type " +
        dtype_str(w.dtype()) + ".");
  }
  return w;
}

std::tuple<array, array, array> quantize_affine(const array& w, int group_size,
                                                int bits, Stream s) {
  Dtype ct = w.dtype() == float64 ? float64 : float32;
  int K = w.shape(-1);
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
  q = reshape(astype(q, uint32, s), w.shape(), s);
  array scales = astype(squeeze(scale, -1, s), w.dtype(), s);
  array biases = astype(squeeze(bias, -1, s), w.dtype(), s);
  return {pack(q, bits, s), scales, biases};
}

std::pair<array, array> quantize_fp(const array& w, QuantizationMode mode,
                                    int group_size,
                                    const std::optional<array>& global_scale,
                                    Stream s) {
  int K = w.shape(-1);
  Shape gshape = w.shape();
  gshape.back() = K / group_size;
  gshape.push_back(group_size);
  array g = reshape(astype(w, float32, s), gshape, s);
  array amax = max(abs(g, s), -1, true, s);
  array codes(0u);  // scale codes, [..., groups, 1]
  array scale(0.0f);  // the decoded scale each value is divided by
  if (mode == QuantizationMode::nvfp4) {
    array enc = nv_encode_factor(global_scale, s);
    codes = fp8_encode(multiply(divide(amax, array(6.0f), s), enc, s), s);
    scale = divide(fp8_decode(codes, s), enc, s);
  } else {
    // The smallest power of two that fits the group's largest magnitude in
    // the element format (6 for FP4, 448 for E4M3), so nothing saturates.
    float max_elem = mode == QuantizationMode::mxfp4 ? 6.0f : 448.0f;
    array e = clip(ceil(log2(divide(amax, array(max_elem), s), s), s),
                   array(-127.0f), array(127.0f), s);
    codes = astype(add(e, array(127.0f), s), uint8, s);
    scale = power(array(2.0f), e, s);
  }
  // A zero scale (an all-zero group) leaves zeros.
  array safe = where(equal(scale, array(0.0f), s), array(1.0f), scale, s);
  array v = divide(g, safe, s);
  array q = mode == QuantizationMode::mxfp8 ? fp8_encode(v, s)
                                            : fp4_encode(v, s);
  int bits = mode == QuantizationMode::mxfp8 ? 8 : 4;
  q = reshape(astype(q, uint32, s), w.shape(), s);
  return {pack(q, bits, s), squeeze(codes, -1, s)};
}

}  // namespace

const float* fp4_values() {
  static const std::array<float, 16> t = [] {
    std::array<float, 16> v{};
    const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int i = 0; i < 8; ++i) {
      v[i] = mag[i];
      v[i + 8] = -mag[i];
    }
    return v;
  }();
  return t.data();
}

const float* fp8_values() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> v{};
    for (int c = 0; c < 256; ++c) {
      int e = (c >> 3) & 15, m = c & 7;
      float mag = e == 0 ? std::ldexp(float(m), -9)
                         : std::ldexp(float(8 + m), e - 10);
      if (e == 15 && m == 7) {
        mag = std::numeric_limits<float>::quiet_NaN();
      }
      v[c] = (c & 0x80) ? -mag : mag;
    }
    return v;
  }();
  return t.data();
}

QuantizationMode quantization_mode(const std::string& mode, const char* op) {
  if (mode == "affine") {
    return QuantizationMode::affine;
  }
  if (mode == "mxfp4") {
    return QuantizationMode::mxfp4;
  }
  if (mode == "nvfp4") {
    return QuantizationMode::nvfp4;
  }
  if (mode == "mxfp8") {
    return QuantizationMode::mxfp8;
  }
  throw std::invalid_argument(tag(op) + "Invalid quantization mode '" + mode +
                              "'; expected 'affine', 'mxfp4', 'nvfp4' or "
                              "'mxfp8'.");
}

const char* mode_name(QuantizationMode mode) {
  switch (mode) {
    case QuantizationMode::affine:
      return "affine";
    case QuantizationMode::mxfp4:
      return "mxfp4";
    case QuantizationMode::nvfp4:
      return "nvfp4";
    case QuantizationMode::mxfp8:
      return "mxfp8";
  }
  return "";
}

std::vector<array> quantize(const array& w, std::optional<int> group_size,
                            std::optional<int> bits, const std::string& mode_s,
                            const std::optional<array>& global_scale,
                            StreamOrDevice sd) {
  const char* op = "quantize";
  auto mode = quantization_mode(mode_s, op);
  auto [gs, b] = resolve_params(op, mode, group_size, bits);
  check_global_scale(op, mode, global_scale);
  check_float_input(op, w);
  if (w.ndim() < 2) {
    throw std::invalid_argument(
        tag(op) +
        "The matrix to be quantized must have at least 2 dimensions but it "
        "has shape " +
        shape_str(w.shape()) + ".");
  }
  if (w.shape(-1) % gs != 0) {
    throw std::invalid_argument(
        tag(op) +
        "The last dimension of the matrix needs to be divisible by the "
        "quantization group size " +
        std::to_string(gs) + ". However the provided matrix has shape " +
        shape_str(w.shape()) + ".");
  }
  Stream s = to_stream(sd);
  if (mode == QuantizationMode::affine) {
    auto [wq, scales, biases] = quantize_affine(w, gs, b, s);
    return {wq, scales, biases};
  }
  auto [wq, scales] = quantize_fp(w, mode, gs, global_scale, s);
  return {wq, scales};
}

std::tuple<array, array, array> quantize(const array& w, int group_size,
                                         int bits, StreamOrDevice s) {
  auto out = quantize(w, group_size, bits, "affine", std::nullopt, s);
  return {out[0], out[1], out[2]};
}

array dequantize(const array& w, const array& scales,
                 const std::optional<array>& biases,
                 std::optional<int> group_size, std::optional<int> bits,
                 const std::string& mode_s,
                 const std::optional<array>& global_scale,
                 std::optional<Dtype> dtype, StreamOrDevice sd) {
  const char* op = "dequantize";
  auto mode = quantization_mode(mode_s, op);
  auto [gs, b] = resolve_params(op, mode, group_size, bits);
  check_global_scale(op, mode, global_scale);
  check_scales(op, mode, scales, biases);
  check_packed(op, w, scales, biases, gs, b);
  // MLX's defaults: the scales' type for affine (check_scales made the
  // biases share it), bfloat16 for the floating modes (whose scales are
  // uint8 exponents).
  Dtype out_t = dtype.value_or(is_fp(mode) ? bfloat16 : scales.dtype());
  if (!is_floating_point(out_t)) {
    throw std::invalid_argument(tag(op) +
                                "The output dtype must be real floating; "
                                "got " +
                                dtype_str(out_t) + ".");
  }
  Stream s = to_stream(sd);
  Shape gshape = scales.shape();
  gshape.push_back(gs);
  Shape oshape = w.shape();
  oshape.back() = static_cast<int>(unpacked_cols(w.shape(-1), b));
  array q = unpack(w, b, s);
  if (mode == QuantizationMode::affine) {
    // Half types compute in float32 and round once.
    Dtype ct = scales.dtype() == float64 ? float64 : float32;
    array qg = reshape(astype(q, ct, s), gshape, s);
    array out =
        add(multiply(qg, expand_dims(astype(scales, ct, s), -1, s), s),
            expand_dims(astype(*biases, ct, s), -1, s), s);
    return astype(reshape(out, oshape, s), out_t, s);
  }
  array codes = astype(q, uint8, s);
  array v = mode == QuantizationMode::mxfp8 ? fp8_decode(codes, s)
                                            : fp4_decode(codes, s);
  array out = multiply(reshape(v, gshape, s),
                       expand_dims(decoded_scales(mode, scales, global_scale, s),
                                   -1, s),
                       s);
  return astype(reshape(out, oshape, s), out_t, s);
}

array dequantize(const array& w, const array& scales, const array& biases,
                 int group_size, int bits, StreamOrDevice s) {
  return dequantize(w, scales, std::optional<array>(biases), group_size, bits,
                    "affine", std::nullopt, std::nullopt, s);
}

array to_fp8(const array& x, StreamOrDevice sd) {
  if (!is_floating_point(x.dtype()) && !is_integral(x.dtype())) {
    throw std::invalid_argument("[to_fp8] Expected a real input; got " +
                                dtype_str(x.dtype()) + ".");
  }
  return fp8_encode(x, to_stream(sd));
}

array from_fp8(const array& x, Dtype dtype, StreamOrDevice sd) {
  if (x.dtype() != uint8) {
    throw std::invalid_argument(
        "[from_fp8] Expected uint8 FP8 E4M3 codes; got " +
        dtype_str(x.dtype()) + ".");
  }
  if (!is_floating_point(dtype)) {
    throw std::invalid_argument(
        "[from_fp8] The output dtype must be real floating; got " +
        dtype_str(dtype) + ".");
  }
  Stream s = to_stream(sd);
  return astype(fp8_decode(x, s), dtype, s);
}

}  // namespace fluxion
