// quantize and dequantize (composites of public ops) and quantized_matmul
// (the QuantizedMatmul primitive and its rules). See quantized.h for the
// scheme.
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
#include "fluxion/ops/matmul_variants.h"
#include "fluxion/ops/searchsorted.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
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

std::string tag(const char* op) { return std::string("[") + op + "] "; }

bool is_fp(QuantizationMode m) { return m != QuantizationMode::affine; }

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

// A packed matrix holds cols * bits / 32 words per row.
int64_t unpacked_cols(int64_t words, int bits) { return words * 32 / bits; }

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

bool QuantizedMatmul::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& q = static_cast<const QuantizedMatmul&>(o);
  return q.group_size_ == group_size_ && q.bits_ == bits_ &&
         q.transpose_ == transpose_ && q.mode_ == mode_;
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
