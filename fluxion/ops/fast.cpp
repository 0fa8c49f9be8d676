#include "fluxion/ops/fast.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/unary.h"
#include "fluxion/primitive_args.h"
#include "fluxion/transforms.h"

namespace fluxion::fast {

namespace {

std::string dt(Dtype t) { return dtype_name(t); }

using detail::compute_dtype;

// Checks a norm's operands; returns the output dtype.
Dtype check_norm(const char* op, const array& x,
                 const std::optional<array>& weight,
                 const std::optional<array>& bias) {
  std::string tag = std::string("[") + op + "] ";
  if (x.ndim() == 0) {
    throw std::invalid_argument(
        tag +
        "Input must have at least 1 dimension but got input with 0 "
        "dimensions.");
  }
  std::vector<array> all{x};
  for (auto* p : {&weight, &bias}) {
    if (!p->has_value()) {
      continue;
    }
    const array& w = **p;
    const char* what = p == &weight ? "weight" : "bias";
    if (w.ndim() != 1) {
      throw std::invalid_argument(tag + what +
                                  " must have 1 dimension but has " +
                                  std::to_string(w.ndim()) + " dimensions.");
    }
    if (w.shape(0) != x.shape(-1)) {
      throw std::invalid_argument(
          tag + what + " must have the same size as the last dimension of x (" +
          std::to_string(x.shape(-1)) + ") but has " +
          std::to_string(w.shape(0)) + " elements.");
    }
    all.push_back(w);
  }
  Dtype t = result_type(all);
  if (!is_floating_point(t)) {
    throw std::invalid_argument(tag + "Received unsupported type " + dt(t) +
                                ": it needs a floating point type.");
  }
  return t;
}

struct RopeArgs {
  array offset;
  float base;
};

RopeArgs check_rope(const array& x, int dims, std::optional<float> base,
                    const array& offset, const std::optional<array>& freqs) {
  if (x.ndim() < 3) {
    throw std::invalid_argument(
        "[rope] Input must have at least 3 dimensions but got input with " +
        std::to_string(x.ndim()) + " dimensions.");
  }
  if (!is_floating_point(x.dtype())) {
    throw std::invalid_argument(
        "[rope] Input must be a floating type but got " + dt(x.dtype()) + ".");
  }
  if (dims <= 0 || dims % 2 != 0 || dims > x.shape(-1)) {
    throw std::invalid_argument(
        "[rope] dims must be a positive even number at most the size of the "
        "last axis (" +
        std::to_string(x.shape(-1)) + ") but got " + std::to_string(dims) +
        ".");
  }
  if (base.has_value() == freqs.has_value()) {
    throw std::invalid_argument(
        base ? "[rope] Only one of base or freqs can have a value."
             : "[rope] Neither base nor freqs has a value.");
  }
  if (!issubdtype(offset.dtype(), DtypeCategory::integer)) {
    throw std::invalid_argument("[rope] offset must be an integer but got " +
                                dt(offset.dtype()) + ".");
  }
  if (offset.ndim() > 1 ||
      (offset.size() != 1 && offset.size() != x.shape(0))) {
    throw std::invalid_argument(
        "[rope] offset must be a scalar or a vector with x.shape(0) = " +
        std::to_string(x.shape(0)) + " elements but has shape " +
        shape_str(offset.shape()) + ".");
  }
  if (freqs) {
    if (freqs->ndim() != 1 || freqs->shape(0) != dims / 2) {
      throw std::invalid_argument(
          "[rope] freqs must be one dimensional with size " +
          std::to_string(dims / 2) + " but got shape " +
          shape_str(freqs->shape()) + ".");
    }
    if (!is_floating_point(freqs->dtype())) {
      throw std::invalid_argument("[rope] freqs must be floating but got " +
                                  dt(freqs->dtype()) + ".");
    }
  }
  return {
      astype(offset.size() == 1 && offset.ndim() == 1 ? reshape(offset, {}, {})
                                                      : offset,
             int32),
      base.value_or(0.0f)};
}

struct SdpaArgs {
  array q, k, v;
  std::optional<array> mask;  // broadcast to [B, Hq, Lq, Lk]
  bool causal = false;
  ScaledDotProductAttention::MaskKind kind = ScaledDotProductAttention::None;
  std::optional<array> sinks;  // [Hq], of the output dtype
};

SdpaArgs check_sdpa(const array& q, const array& k, const array& v,
                    const std::string& mode, const std::optional<array>& mask,
                    const std::optional<array>& sinks, Stream s) {
  const std::string tag = "[scaled_dot_product_attention] ";
  if (q.ndim() != 4 || k.ndim() != 4 || v.ndim() != 4) {
    throw std::invalid_argument(
        tag +
        "queries, keys and values must have 4 dimensions [B, H, L, D] "
        "but got shapes " +
        shape_str(q.shape()) + ", " + shape_str(k.shape()) + " and " +
        shape_str(v.shape()) + ".");
  }
  if (q.shape(0) != k.shape(0) || k.shape(0) != v.shape(0)) {
    throw std::invalid_argument(
        tag +
        "queries, keys and values must have the same batch size but got " +
        shape_str(q.shape()) + ", " + shape_str(k.shape()) + " and " +
        shape_str(v.shape()) + ".");
  }
  if (k.shape(1) != v.shape(1) || k.shape(2) != v.shape(2)) {
    throw std::invalid_argument(
        tag + "keys " + shape_str(k.shape()) + " and values " +
        shape_str(v.shape()) +
        " must have the same number of heads and sequence length.");
  }
  if (k.shape(1) == 0 || q.shape(1) % k.shape(1) != 0) {
    throw std::invalid_argument(
        tag + "The number of query heads (" + std::to_string(q.shape(1)) +
        ") must be a multiple of the number of key/value heads (" +
        std::to_string(k.shape(1)) + ").");
  }
  if (q.shape(3) != k.shape(3)) {
    throw std::invalid_argument(
        tag + "queries and keys must have the same feature size but got " +
        std::to_string(q.shape(3)) + " and " + std::to_string(k.shape(3)) +
        ".");
  }
  Dtype t = result_type({q, k, v});
  if (!is_floating_point(t)) {
    throw std::invalid_argument(tag + "Received unsupported type " + dt(t) +
                                ": it needs a floating point type.");
  }
  SdpaArgs a{astype(q, t, s),
             astype(k, t, s),
             astype(v, t, s),
             std::nullopt,
             false,
             ScaledDotProductAttention::None,
             std::nullopt};
  if (sinks) {
    if (sinks->ndim() != 1 || sinks->shape(0) != q.shape(1)) {
      throw std::invalid_argument(
          tag + "sinks must have one value per query head, shape (" +
          std::to_string(q.shape(1)) + "); got shape " +
          shape_str(sinks->shape()) + ".");
    }
    if (promote_types(sinks->dtype(), t) != t) {
      throw std::invalid_argument(tag + "The sinks' dtype " +
                                  dt(sinks->dtype()) +
                                  " must promote to the output dtype " +
                                  dt(t) + ".");
    }
    a.sinks = astype(*sinks, t, s);
  }
  if (mode == "causal") {
    if (mask) {
      throw std::invalid_argument(
          tag + "A mask array cannot be combined with the \"causal\" mask.");
    }
    a.causal = true;
    return a;
  }
  if (mode != "" && mode != "array") {
    throw std::invalid_argument(tag + "Invalid mask \"" + mode +
                                "\": expected \"causal\" or an array.");
  }
  if (!mask) {
    if (mode == "array") {
      throw std::invalid_argument(tag +
                                  "The \"array\" mask mode needs a mask.");
    }
    return a;
  }
  Shape full{q.shape(0), q.shape(1), q.shape(2), k.shape(2)};
  bool ok = mask->ndim() <= 4;
  for (int i = 0; ok && i < mask->ndim(); ++i) {
    int m = mask->shape(mask->ndim() - 1 - i);
    ok = m == 1 || m == full[3 - i];
  }
  if (!ok) {
    throw std::invalid_argument(
        tag + "The mask with shape " + shape_str(mask->shape()) +
        " cannot be broadcast to the scores' shape " + shape_str(full) + ".");
  }
  if (mask->dtype() == bool_) {
    a.kind = ScaledDotProductAttention::Bool;
    a.mask = broadcast_to(*mask, full, s);
  } else {
    if (promote_types(mask->dtype(), t) != t) {
      throw std::invalid_argument(
          tag + "The mask dtype " + dt(mask->dtype()) +
          " must be bool or promote to the output dtype " + dt(t) + ".");
    }
    a.kind = ScaledDotProductAttention::Additive;
    a.mask = broadcast_to(astype(*mask, t, s), full, s);
  }
  return a;
}

}  // namespace

// ---------------------------------------------------------------- norms

array layer_norm(const array& x, const std::optional<array>& weight,
                 const std::optional<array>& bias, float eps,
                 StreamOrDevice s) {
  Dtype t = check_norm("layer_norm", x, weight, bias);
  auto st = to_stream(s);
  std::vector<array> in{astype(x, t, st)};
  if (weight) {
    in.push_back(astype(*weight, t, st));
  }
  if (bias) {
    in.push_back(astype(*bias, t, st));
  }
  return array(x.shape(), t,
               std::make_shared<LayerNorm>(st, eps, weight.has_value(),
                                           bias.has_value()),
               std::move(in));
}

array rms_norm(const array& x, const std::optional<array>& weight, float eps,
               StreamOrDevice s) {
  Dtype t = check_norm("rms_norm", x, weight, std::nullopt);
  auto st = to_stream(s);
  std::vector<array> in{astype(x, t, st)};
  if (weight) {
    in.push_back(astype(*weight, t, st));
  }
  return array(x.shape(), t,
               std::make_shared<RMSNorm>(st, eps, weight.has_value()),
               std::move(in));
}

array layer_norm_composed(const array& x, const std::optional<array>& weight,
                          const std::optional<array>& bias, float eps,
                          StreamOrDevice s) {
  Dtype t = check_norm("layer_norm", x, weight, bias);
  Dtype ct = compute_dtype(t);
  auto xf = astype(x, ct, s);
  auto xc = subtract(xf, mean(xf, -1, true, s), s);
  auto var = mean(square(xc, s), -1, true, s);
  auto y = multiply(xc, rsqrt(add(var, array(double{eps}, ct), s), s), s);
  if (weight) {
    y = multiply(y, astype(*weight, ct, s), s);
  }
  if (bias) {
    y = add(y, astype(*bias, ct, s), s);
  }
  return astype(y, t, s);
}

array rms_norm_composed(const array& x, const std::optional<array>& weight,
                        float eps, StreamOrDevice s) {
  Dtype t = check_norm("rms_norm", x, weight, std::nullopt);
  Dtype ct = compute_dtype(t);
  auto xf = astype(x, ct, s);
  auto ms = mean(square(xf, s), -1, true, s);
  auto y = multiply(xf, rsqrt(add(ms, array(double{eps}, ct), s), s), s);
  if (weight) {
    y = multiply(y, astype(*weight, ct, s), s);
  }
  return astype(y, t, s);
}

// ---------------------------------------------------------------- rope

array rope(const array& x, int dims, bool traditional,
           std::optional<float> base, float scale, const array& offset,
           const std::optional<array>& freqs, StreamOrDevice s) {
  auto a = check_rope(x, dims, base, offset, freqs);
  auto st = to_stream(s);
  std::vector<array> in{x, a.offset};
  if (freqs) {
    in.push_back(astype(*freqs, compute_dtype(x.dtype()), st));
  }
  return array(x.shape(), x.dtype(),
               std::make_shared<RoPE>(st, dims, traditional, a.base, scale,
                                      true, freqs.has_value()),
               std::move(in));
}

array rope(const array& x, int dims, bool traditional,
           std::optional<float> base, float scale, int offset,
           const std::optional<array>& freqs, StreamOrDevice s) {
  return rope(x, dims, traditional, base, scale, array(offset), freqs, s);
}

namespace detail {

RopeParts rope_split(const array& x, int dims, bool traditional, Stream s) {
  int nd = x.ndim();
  Shape lo(nd, 0), hi = x.shape(), step(nd, 1);
  auto part = [&](int start, int stop, int stride) {
    lo[nd - 1] = start;
    hi[nd - 1] = stop;
    step[nd - 1] = stride;
    return slice(x, lo, hi, step, s);
  };
  int half = dims / 2;
  auto rest = part(dims, x.shape(-1), 1);
  if (traditional) {
    return {part(0, dims, 2), part(1, dims, 2), rest};
  }
  return {part(0, half, 1), part(half, dims, 1), rest};
}

array rope_join(const array& y1, const array& y2, const array& rest,
                bool traditional, Stream s) {
  array y = y1;
  if (traditional) {
    Shape sh = y1.shape();
    sh.back() *= 2;
    y = reshape(stack({y1, y2}, -1, s), sh, s);
  } else {
    y = concatenate({y1, y2}, -1, s);
  }
  if (rest.shape(-1) == 0) {
    return y;
  }
  return concatenate({y, astype(rest, y.dtype(), s)}, -1, s);
}

array rope_angles(const array& x, int dims, float base, float scale,
                  const array& offset, const std::optional<array>& freqs,
                  Stream s) {
  Dtype ct = compute_dtype(x.dtype());
  int half = dims / 2;
  int L = x.shape(-2);
  // The inverse frequencies are computed in float64 and rounded once (as
  // the fused kernel does): positions in the thousands multiply their last
  // bit, so both paths must start from the same, correctly rounded values.
  array inv =
      freqs ? reciprocal(astype(*freqs, ct, s), s)
            : astype(exp(multiply(arange(0, half, 1, float64, s),
                                  array(-std::log(double{base}) / half), s),
                         s),
                     ct, s);
  array pos = arange(0, L, 1, ct, s);
  auto off = astype(offset, ct, s);
  if (offset.ndim() == 0) {
    pos = add(pos, off, s);  // [L]
  } else {
    pos = add(expand_dims(off, 1, s), pos, s);  // [X0, L]
  }
  pos = multiply(pos, array(double{scale}, ct), s);
  auto ang = multiply(expand_dims(pos, -1, s), inv, s);  // [..., L, half]
  if (offset.ndim() == 1) {
    Shape sh(x.ndim(), 1);
    sh[0] = x.shape(0);
    sh[x.ndim() - 2] = L;
    sh[x.ndim() - 1] = half;
    ang = reshape(ang, sh, s);
  }
  return ang;
}

}  // namespace detail

array rope_composed(const array& x, int dims, bool traditional,
                    std::optional<float> base, float scale, const array& offset,
                    const std::optional<array>& freqs, StreamOrDevice s) {
  auto a = check_rope(x, dims, base, offset, freqs);
  auto st = to_stream(s);
  Dtype ct = compute_dtype(x.dtype());
  auto ang = detail::rope_angles(x, dims, a.base, scale, a.offset, freqs, st);
  auto c = cos(ang, st), sn = sin(ang, st);
  auto p = detail::rope_split(astype(x, ct, st), dims, traditional, st);
  auto y1 = subtract(multiply(p.x1, c, st), multiply(p.x2, sn, st), st);
  auto y2 = add(multiply(p.x1, sn, st), multiply(p.x2, c, st), st);
  return astype(detail::rope_join(y1, y2, p.rest, traditional, st), x.dtype(),
                st);
}

// ---------------------------------------------------------------- sdpa

array scaled_dot_product_attention(const array& queries, const array& keys,
                                   const array& values, float scale,
                                   const std::string& mask_mode,
                                   const std::optional<array>& mask,
                                   const std::optional<array>& sinks,
                                   StreamOrDevice s) {
  auto st = to_stream(s);
  auto a = check_sdpa(queries, keys, values, mask_mode, mask, sinks, st);
  Shape out = a.q.shape();
  out[3] = a.v.shape(3);
  std::vector<array> in{a.q, a.k, a.v};
  if (a.mask) {
    in.push_back(*a.mask);
  }
  if (a.sinks) {
    in.push_back(*a.sinks);
  }
  // Under a vjp, attention the fused backward takes keeps its logsumexp
  // (a second output, hidden from the caller) for that backward.
  if (fluxion::detail::in_grad_tracing() &&
      a.kind == ScaledDotProductAttention::None && !a.sinks &&
      ScaledDotProductAttentionVJP::use_fused(st, a.q, a.k, a.v, a.causal,
                                              scale)) {
    return detail::sdpa_with_lse(a.q, a.k, a.v, scale, a.causal, st)[0];
  }
  Dtype t = a.q.dtype();
  return array(std::move(out), t,
               std::make_shared<ScaledDotProductAttention>(
                   st, scale, a.causal, a.kind, a.sinks.has_value()),
               std::move(in));
}

namespace detail {

std::vector<array> sdpa_with_lse(const array& q, const array& k,
                                 const array& v, float scale, bool causal,
                                 Stream s) {
  Shape out = q.shape();
  out[3] = v.shape(3);
  Shape lse{q.shape(0), q.shape(1), q.shape(2)};
  Dtype t = q.dtype();
  return array::make_arrays(
      {std::move(out), std::move(lse)},
      {t, t == float64 ? float64 : float32},
      std::make_shared<ScaledDotProductAttention>(
          s, scale, causal, ScaledDotProductAttention::None, false, true),
      {q, k, v});
}

std::vector<array> sdpa_vjp(const array& q, const array& k, const array& v,
                            const array& o, const array& lse, const array& d_o,
                            float scale, bool causal, Stream s) {
  return array::make_arrays(
      {q.shape(), k.shape(), v.shape()}, {q.dtype(), k.dtype(), v.dtype()},
      std::make_shared<ScaledDotProductAttentionVJP>(s, scale, causal),
      {q, k, v, astype(o, q.dtype(), s),
       astype(lse, q.dtype() == float64 ? float64 : float32, s),
       astype(d_o, q.dtype(), s)});
}

std::optional<array> attention_visible(const std::optional<array>& mask5,
                                       bool is_bool, bool causal, int lq,
                                       int lk, Stream s) {
  std::optional<array> vis;
  if (mask5 && is_bool) {
    vis = *mask5;
  }
  if (causal) {
    auto qi = expand_dims(arange(lk - lq, lk, 1, s), 1, s);
    auto kj = arange(0, lk, 1, s);
    auto c = less_equal(kj, qi, s);
    vis = vis ? logical_and(*vis, c, s) : c;
  }
  return vis;
}

array attention_probs(const array& q5, const array& k5,
                      const std::optional<array>& mask5, bool is_bool,
                      bool causal, float scale, Stream s,
                      const std::optional<array>& sinks5,
                      std::optional<array>* sink_prob) {
  Dtype ct = promote_types(q5.dtype(), float32);
  auto sc =
      matmul(astype(q5, ct, s), swapaxes(astype(k5, ct, s), -1, -2, s), s);
  sc = multiply(sc, array(double{scale}, ct), s);
  if (mask5 && !is_bool) {
    sc = add(sc, astype(*mask5, ct, s), s);
  }
  // Hidden scores are the lowest finite value (MLX): a row that sees no key
  // becomes uniform rather than nan.
  auto vis = attention_visible(mask5, is_bool, causal, q5.shape(-2),
                               k5.shape(-2), s);
  if (vis) {
    const array lowest(ct == float64
                           ? std::numeric_limits<double>::lowest()
                           : double{std::numeric_limits<float>::lowest()},
                       ct);
    sc = where(*vis, sc, lowest, s);
  }
  if (!sinks5) {
    return softmax(sc, -1, true, s);
  }
  // The sink is one more logit per row that attends to no value.
  Shape col = sc.shape();
  col.back() = 1;
  auto sk = broadcast_to(astype(*sinks5, ct, s), col, s);
  auto p = softmax(concatenate({sk, sc}, -1, s), -1, true, s);
  Shape b(p.ndim(), 0), e = p.shape();
  if (sink_prob) {
    e.back() = 1;
    *sink_prob = slice(p, b, e, s);
    e.back() = p.shape(-1);
  }
  b.back() = 1;
  return slice(p, b, e, s);
}

}  // namespace detail

array scaled_dot_product_attention_composed(const array& queries,
                                            const array& keys,
                                            const array& values, float scale,
                                            const std::string& mask_mode,
                                            const std::optional<array>& mask,
                                            const std::optional<array>& sinks,
                                            StreamOrDevice s) {
  auto st = to_stream(s);
  auto a = check_sdpa(queries, keys, values, mask_mode, mask, sinks, st);
  int B = a.q.shape(0), Hq = a.q.shape(1), Hkv = a.k.shape(1);
  int Lq = a.q.shape(2), Lk = a.k.shape(2);
  int R = Hq / Hkv;
  auto q5 = reshape(a.q, {B, Hkv, R, Lq, a.q.shape(3)}, st);
  auto k5 = expand_dims(a.k, 2, st);
  auto v5 = expand_dims(a.v, 2, st);
  std::optional<array> m5;
  if (a.mask) {
    m5 = reshape(*a.mask, {B, Hkv, R, Lq, Lk}, st);
  }
  std::optional<array> s5;
  if (a.sinks) {
    s5 = reshape(*a.sinks, {1, Hkv, R, 1, 1}, st);
  }
  auto p = detail::attention_probs(q5, k5, m5,
                                   a.kind == ScaledDotProductAttention::Bool,
                                   a.causal, scale, st, s5);
  auto o = matmul(p, astype(v5, p.dtype(), st), st);
  return astype(reshape(o, {B, Hq, Lq, a.v.shape(3)}, st), a.q.dtype(), st);
}

// ---------------------------------------------------------------- rules

bool LayerNorm::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& p = static_cast<const LayerNorm&>(o);
  return p.eps_ == eps_ && p.has_weight_ == has_weight_ &&
         p.has_bias_ == has_bias_;
}

std::vector<PrimitiveArg> LayerNorm::state() const {
  return export_state(double{eps_}, has_weight_, has_bias_);
}

std::shared_ptr<Primitive> LayerNorm::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "LayerNorm");
  return std::make_shared<LayerNorm>(s, a.f32(0), a.b(1), a.b(2));
}

bool RMSNorm::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& p = static_cast<const RMSNorm&>(o);
  return p.eps_ == eps_ && p.has_weight_ == has_weight_;
}

std::vector<PrimitiveArg> RMSNorm::state() const {
  return export_state(double{eps_}, has_weight_);
}

std::shared_ptr<Primitive> RMSNorm::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "RMSNorm");
  return std::make_shared<RMSNorm>(s, a.f32(0), a.b(1));
}

bool RoPE::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& p = static_cast<const RoPE&>(o);
  return p.dims_ == dims_ && p.traditional_ == traditional_ &&
         p.base_ == base_ && p.scale_ == scale_ && p.forward_ == forward_ &&
         p.has_freqs_ == has_freqs_;
}

std::vector<PrimitiveArg> RoPE::state() const {
  return export_state(int64_t{dims_}, traditional_, double{base_},
                      double{scale_}, forward_, has_freqs_);
}

std::shared_ptr<Primitive> RoPE::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "RoPE");
  return std::make_shared<RoPE>(s, a.i32(0), a.b(1), a.f32(2), a.f32(3), a.b(4),
                                a.b(5));
}

bool ScaledDotProductAttention::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& p = static_cast<const ScaledDotProductAttention&>(o);
  return p.scale_ == scale_ && p.causal_ == causal_ && p.mask_ == mask_ &&
         p.has_sinks_ == has_sinks_ && p.output_lse_ == output_lse_;
}

std::vector<PrimitiveArg> ScaledDotProductAttention::state() const {
  return export_state(double{scale_}, causal_, int64_t{mask_}, has_sinks_,
                      output_lse_);
}

std::shared_ptr<Primitive> ScaledDotProductAttention::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "ScaledDotProductAttention");
  auto mask = a.enum_up_to(2, Additive);
  // Files written before the logsumexp output have four parameters.
  return std::make_shared<ScaledDotProductAttention>(
      s, a.f32(0), a.b(1), mask, a.b(3), a.size() > 4 && a.b(4));
}

std::vector<Shape> ScaledDotProductAttention::output_shapes(
    const std::vector<array>& in) {
  Shape out = in[0].shape();
  out[3] = in[2].shape(3);
  if (output_lse_) {
    return {out, {out[0], out[1], out[2]}};
  }
  return {out};
}

bool ScaledDotProductAttentionVJP::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& p = static_cast<const ScaledDotProductAttentionVJP&>(o);
  return p.scale_ == scale_ && p.causal_ == causal_;
}

std::vector<PrimitiveArg> ScaledDotProductAttentionVJP::state() const {
  return export_state(double{scale_}, causal_);
}

std::shared_ptr<Primitive> ScaledDotProductAttentionVJP::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "ScaledDotProductAttentionVJP");
  return std::make_shared<ScaledDotProductAttentionVJP>(s, a.f32(0), a.b(1));
}

}  // namespace fluxion::fast
