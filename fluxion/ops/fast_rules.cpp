// Derivative and vmap rules of the fused primitives, written with public ops
// (so that they differentiate again).
#include <algorithm>
#include <numeric>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/fast.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"
#include "fluxion/transforms.h"

namespace fluxion::fast {

namespace detail {

Dtype compute_dtype(Dtype t) { return t == float64 ? float64 : float32; }

std::vector<int> leading_axes(int ndim) {
  std::vector<int> ax(ndim - 1);
  std::iota(ax.begin(), ax.end(), 0);
  return ax;
}

}  // namespace detail

namespace {

using detail::compute_dtype;
using detail::leading_axes;

array scalar(double v, Dtype t) { return array(v, t); }

// Shape [n, 1, ..., 1, d] of rank `rank`, for a batched weight [n, d].
array batched_weight(const array& w, int axis, int rank, Stream s) {
  auto wb = axis == 0 ? w : moveaxis(w, axis, 0, s);
  Shape sh(rank, 1);
  sh[0] = wb.shape(0);
  sh[rank - 1] = wb.shape(1);
  return reshape(wb, sh, s);
}

}  // namespace

namespace detail {

NormStats norm_stats(const array& x, float eps, bool layer, Stream s) {
  Dtype ct = compute_dtype(x.dtype());
  auto xf = astype(x, ct, s);
  auto xc = layer ? subtract(xf, mean(xf, -1, true, s), s) : xf;
  auto rstd =
      rsqrt(add(mean(square(xc, s), -1, true, s), scalar(eps, ct), s), s);
  return {xf, multiply(xc, rstd, s), rstd};
}

}  // namespace detail

namespace {

// The norms' vjp: one NormVJP node whenever dx or dweight is asked (it
// computes all of them from one read of x and g); dbias alone is a plain
// sum of the cotangent over the rows.
std::vector<array> norm_rule_vjp(const std::vector<array>& primals,
                                 const array& cotangent,
                                 const std::vector<int>& argnums, float eps,
                                 bool layer, bool has_weight, bool has_bias,
                                 Stream s) {
  const array& x = primals[0];
  Dtype t = x.dtype();
  // Rules see cotangents of the output's dtype; the cast is a no-op then.
  auto g = astype(cotangent, t, s);
  bool fused = false;
  for (int i : argnums) {
    fused = fused || i == 0 || (i == 1 && has_weight);
  }
  std::vector<array> grads;
  if (fused) {
    std::optional<array> w;
    if (has_weight) {
      w = primals[1];
    }
    grads = norm_vjp(x, w, g, eps, layer, has_bias, s);
  }
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      out.push_back(grads[0]);
    } else if (i == 1 && has_weight) {
      out.push_back(grads[1]);
    } else if (fused) {
      out.push_back(grads.back());  // dbias, NormVJP's last output
    } else {
      out.push_back(astype(sum(astype(g, compute_dtype(t), s),
                               leading_axes(x.ndim()), false, s),
                           t, s));
    }
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------- LayerNorm

std::vector<array> LayerNorm::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>& argnums,
                                  const std::vector<array>&) {
  return norm_rule_vjp(primals, cotangents[0], argnums, eps_, true,
                       has_weight_, has_bias_, stream());
}

std::vector<array> LayerNorm::jvp(const std::vector<array>& primals,
                                  const std::vector<array>& tangents,
                                  const std::vector<int>& argnums) {
  auto s = stream();
  const array& x = primals[0];
  Dtype t = x.dtype();
  auto st = detail::norm_stats(x, eps_, true, s);
  Dtype ct = st.xf.dtype();
  std::optional<array> out;
  auto acc = [&](const array& v) { out = out ? add(*out, v, s) : v; };
  for (size_t k = 0; k < argnums.size(); ++k) {
    auto d = astype(tangents[k], ct, s);
    if (argnums[k] == 0) {
      auto dxh = multiply(
          subtract(
              subtract(d, mean(d, -1, true, s), s),
              multiply(st.xhat, mean(multiply(d, st.xhat, s), -1, true, s), s),
              s),
          st.rstd, s);
      acc(has_weight_ ? multiply(dxh, astype(primals[1], ct, s), s) : dxh);
    } else if (argnums[k] == 1 && has_weight_) {
      acc(multiply(st.xhat, d, s));
    } else {
      acc(broadcast_to(d, x.shape(), s));
    }
  }
  return {astype(*out, t, s)};
}

std::pair<std::vector<array>, std::vector<int>> LayerNorm::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  bool x_mapped = axes[0] >= 0;
  auto x = x_mapped ? moveaxis(inputs[0], axes[0], 0, s) : inputs[0];
  int rank = inputs[0].ndim() + (x_mapped ? 0 : 1);
  int wi = has_weight_ ? 1 : -1;
  int bi = has_bias_ ? (has_weight_ ? 2 : 1) : -1;
  bool params_mapped = (wi > 0 && axes[wi] >= 0) || (bi > 0 && axes[bi] >= 0);
  auto opt = [&](int i) -> std::optional<array> {
    return i > 0 ? std::optional<array>(inputs[i]) : std::nullopt;
  };
  if (!params_mapped) {
    return {{layer_norm(x, opt(wi), opt(bi), eps_, s)}, {x_mapped ? 0 : -1}};
  }
  auto y = layer_norm(x, std::nullopt, std::nullopt, eps_, s);
  if (wi > 0) {
    y = multiply(y,
                 axes[wi] >= 0 ? batched_weight(inputs[wi], axes[wi], rank, s)
                               : inputs[wi],
                 s);
  }
  if (bi > 0) {
    y = add(y,
            axes[bi] >= 0 ? batched_weight(inputs[bi], axes[bi], rank, s)
                          : inputs[bi],
            s);
  }
  return {{y}, {0}};
}

// ---------------------------------------------------------------- RMSNorm

std::vector<array> RMSNorm::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums,
                                const std::vector<array>&) {
  return norm_rule_vjp(primals, cotangents[0], argnums, eps_, false,
                       has_weight_, false, stream());
}

std::vector<array> RMSNorm::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>& argnums) {
  auto s = stream();
  const array& x = primals[0];
  auto st = detail::norm_stats(x, eps_, false, s);
  Dtype ct = st.xf.dtype();
  std::optional<array> out;
  auto acc = [&](const array& v) { out = out ? add(*out, v, s) : v; };
  for (size_t k = 0; k < argnums.size(); ++k) {
    auto d = astype(tangents[k], ct, s);
    if (argnums[k] == 0) {
      auto dxh = multiply(
          subtract(
              d,
              multiply(st.xhat, mean(multiply(d, st.xhat, s), -1, true, s), s),
              s),
          st.rstd, s);
      acc(has_weight_ ? multiply(dxh, astype(primals[1], ct, s), s) : dxh);
    } else {
      acc(multiply(st.xhat, d, s));
    }
  }
  return {astype(*out, x.dtype(), s)};
}

std::pair<std::vector<array>, std::vector<int>> RMSNorm::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  bool x_mapped = axes[0] >= 0;
  auto x = x_mapped ? moveaxis(inputs[0], axes[0], 0, s) : inputs[0];
  if (!has_weight_ || axes[1] < 0) {
    std::optional<array> w;
    if (has_weight_) {
      w = inputs[1];
    }
    return {{rms_norm(x, w, eps_, s)}, {x_mapped ? 0 : -1}};
  }
  int rank = inputs[0].ndim() + (x_mapped ? 0 : 1);
  auto y = rms_norm(x, std::nullopt, eps_, s);
  return {{multiply(y, batched_weight(inputs[1], axes[1], rank, s), s)}, {0}};
}

// ---------------------------------------------------------------- RoPE

namespace {

array make_rope(const RoPE& p, bool forward, const array& x,
                const array& offset, const std::optional<array>& freqs,
                Stream s) {
  std::vector<array> in{x, offset};
  if (freqs) {
    in.push_back(*freqs);
  }
  return array(x.shape(), x.dtype(),
               std::make_shared<RoPE>(s, p.dims(), p.traditional(), p.base(),
                                      p.scale(), forward, p.has_freqs()),
               std::move(in));
}

std::optional<array> freqs_of(const RoPE& p, const std::vector<array>& in) {
  return p.has_freqs() ? std::optional<array>(in[2]) : std::nullopt;
}

// d(angle)/d(freqs) times the output's derivative along the angle, in the
// compute dtype: the rotation's derivative swaps the halves
// (d y1 = -sign * y2, d y2 = sign * y1).
struct RopeAngleTerms {
  array ang;  // [..., L, half]
  array y1, y2;
  double sign;
};

RopeAngleTerms angle_terms(const RoPE& p, const std::vector<array>& primals,
                           const array& out, Stream s) {
  Dtype ct = compute_dtype(primals[0].dtype());
  auto ang = detail::rope_angles(primals[0], p.dims(), p.base(), p.scale(),
                                 primals[1], freqs_of(p, primals), s);
  auto parts =
      detail::rope_split(astype(out, ct, s), p.dims(), p.traditional(), s);
  return {ang, parts.x1, parts.x2, p.forward() ? 1.0 : -1.0};
}

}  // namespace

std::vector<array> RoPE::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<array>& outputs) {
  auto s = stream();
  const array& x = primals[0];
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      out.push_back(make_rope(*this, !forward_,
                              astype(cotangents[0], x.dtype(), s), primals[1],
                              freqs_of(*this, primals), s));
    } else if (i == 1) {
      out.push_back(zeros_like(primals[1], s));
    } else {
      // d out / d freq_i = (d out / d angle) * (-angle / freq_i).
      auto a = angle_terms(*this, primals, outputs[0], s);
      Dtype ct = a.ang.dtype();
      auto c = detail::rope_split(astype(cotangents[0], ct, s), dims_,
                                  traditional_, s);
      auto g_ang = multiply(
          subtract(multiply(c.x2, a.y1, s), multiply(c.x1, a.y2, s), s),
          scalar(a.sign, ct), s);
      auto f = astype(primals[2], ct, s);
      auto g = negative(divide(sum(multiply(g_ang, a.ang, s),
                                   leading_axes(x.ndim()), false, s),
                               f, s),
                        s);
      out.push_back(astype(g, primals[2].dtype(), s));
    }
  }
  return out;
}

std::vector<array> RoPE::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents,
                             const std::vector<int>& argnums) {
  auto s = stream();
  const array& x = primals[0];
  std::optional<array> out;
  for (size_t k = 0; k < argnums.size(); ++k) {
    array term = zeros_like(x, s);
    if (argnums[k] == 0) {
      term = make_rope(*this, forward_, astype(tangents[k], x.dtype(), s),
                       primals[1], freqs_of(*this, primals), s);
    } else if (argnums[k] == 2) {
      auto y = make_rope(*this, forward_, x, primals[1],
                         freqs_of(*this, primals), s);
      auto a = angle_terms(*this, primals, y, s);
      Dtype ct = a.ang.dtype();
      auto f = astype(primals[2], ct, s);
      auto dang = negative(
          multiply(a.ang, divide(astype(tangents[k], ct, s), f, s), s), s);
      dang = multiply(dang, scalar(a.sign, ct), s);
      auto d1 = negative(multiply(a.y2, dang, s), s);
      auto d2 = multiply(a.y1, dang, s);
      auto rest =
          detail::rope_split(zeros(x.shape(), ct, s), dims_, traditional_, s)
              .rest;
      term = astype(detail::rope_join(d1, d2, rest, traditional_, s), x.dtype(),
                    s);
    }
    out = out ? add(*out, term, s) : term;
  }
  return {*out};
}

std::pair<std::vector<array>, std::vector<int>> RoPE::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  const array& x = inputs[0];
  const array& off = inputs[1];
  int n = rules::batch_size(inputs, axes);
  // The inputs are already normalized (int32 offset, freqs of the compute
  // dtype), so the primitive is rebuilt directly.
  auto call = [&](const array& xx, const array& oo,
                  const std::optional<array>& ff) {
    return make_rope(*this, forward_, xx, oo, ff, s);
  };
  if (has_freqs_ && axes[2] >= 0) {
    // A batch of frequency tables: one rotation per batch element.
    std::vector<array> outs;
    for (int b = 0; b < n; ++b) {
      auto pick = [&](const array& a, int ax) -> array {
        if (ax < 0) {
          return a;
        }
        auto m = moveaxis(a, ax, 0, s);
        Shape lo(m.ndim(), 0), hi = m.shape();
        lo[0] = b;
        hi[0] = b + 1;
        return squeeze(slice(m, lo, hi, s), 0, s);
      };
      outs.push_back(
          call(pick(x, axes[0]), pick(off, axes[1]), pick(inputs[2], axes[2])));
    }
    return {{stack(outs, 0, s)}, {0}};
  }
  auto freqs = freqs_of(*this, inputs);
  bool off_vec = (axes[1] < 0 ? off.ndim() : off.ndim() - 1) == 1;
  if (axes[1] < 0) {
    if (axes[0] < 0) {
      return {{call(x, off, freqs)}, {-1}};
    }
    // A per-row offset indexes axis 0: keep it there, the batch after it.
    int dst = off_vec ? 1 : 0;
    return {{call(moveaxis(x, axes[0], dst, s), off, freqs)}, {dst}};
  }
  auto xb = rules::to_front(x, axes[0], n, s);
  auto ob = rules::to_front(off, axes[1], n, s);
  if (!off_vec) {
    return {{call(xb, ob, freqs)}, {0}};
  }
  Shape sh = xb.shape();
  Shape merged(sh.begin() + 1, sh.end());
  merged[0] *= n;
  auto y = call(reshape(xb, merged, s), reshape(ob, {-1}, s), freqs);
  return {{reshape(y, sh, s)}, {0}};
}

// ------------------------------------------------ ScaledDotProductAttention

namespace {

// The grouped views of the primitive's inputs (see detail::attention_probs).
struct Grouped {
  array q5, k5, v5;
  std::optional<array> m5, s5;  // mask [B, Hkv, R, Lq, Lk], sinks [1, Hkv, R, 1, 1]
  int B, Hq, Lq, Lk, R;
};

Grouped grouped(const std::vector<array>& in, bool has_mask, bool has_sinks,
                Stream s) {
  const array& q = in[0];
  int B = q.shape(0), Hq = q.shape(1), Lq = q.shape(2);
  int Hkv = in[1].shape(1), Lk = in[1].shape(2);
  int R = Hq / Hkv;
  Grouped g{reshape(q, {B, Hkv, R, Lq, q.shape(3)}, s),
            expand_dims(in[1], 2, s),
            expand_dims(in[2], 2, s),
            std::nullopt,
            std::nullopt,
            B,
            Hq,
            Lq,
            Lk,
            R};
  if (has_mask) {
    g.m5 = reshape(in[3], {B, Hkv, R, Lq, Lk}, s);
  }
  if (has_sinks) {
    g.s5 = reshape(in[has_mask ? 4 : 3], {1, Hkv, R, 1, 1}, s);
  }
  return g;
}

// Probabilities p over the keys (and p0 of the sink): d(scores) = p * (dp -
// sum(p dp)) where dp = dO V^T, and d(sink) = -p0 sum(p dp) (the sink has
// no value). Hidden scores are constants: their d(scores) is zero (a row
// that sees no key has p uniform, not zero, there).
std::vector<array> composed_vjp(const std::vector<array>& primals,
                                const array& cotangent,
                                const std::vector<int>& argnums,
                                ScaledDotProductAttention::MaskKind mask,
                                bool has_sinks, bool causal, float scale,
                                Stream s) {
  using Sdpa = ScaledDotProductAttention;
  auto g = grouped(primals, mask != Sdpa::None, has_sinks, s);
  std::optional<array> p0;
  auto p = detail::attention_probs(g.q5, g.k5, g.m5, mask == Sdpa::Bool,
                                   causal, scale, s, g.s5, &p0);
  Dtype ct = p.dtype();
  auto q = astype(g.q5, ct, s), k = astype(g.k5, ct, s),
       v = astype(g.v5, ct, s);
  Shape o5 = g.q5.shape();
  o5[4] = primals[2].shape(3);
  auto d_o = reshape(astype(cotangent, ct, s), o5, s);
  auto dp = matmul(d_o, swapaxes(v, -1, -2, s), s);
  auto inner = sum(multiply(dp, p, s), -1, true, s);
  auto ds = multiply(p, subtract(dp, inner, s), s);
  auto vis = detail::attention_visible(g.m5, mask == Sdpa::Bool, causal, g.Lq,
                                       g.Lk, s);
  if (vis) {
    ds = where(*vis, ds, zeros({}, ct, s), s);
  }
  auto sc = scalar(scale, ct);
  const int sink_index = mask != Sdpa::None ? 4 : 3;
  std::vector<array> out;
  for (int i : argnums) {
    const array& x = primals[i];
    array r = zeros_like(x, s);
    if (i == 0) {
      r = reshape(multiply(matmul(ds, k, s), sc, s), x.shape(), s);
    } else if (i == 1) {
      r = sum(multiply(matmul(swapaxes(ds, -1, -2, s), q, s), sc, s), 2, false,
              s);
    } else if (i == 2) {
      r = sum(matmul(swapaxes(p, -1, -2, s), d_o, s), 2, false, s);
    } else if (has_sinks && i == sink_index) {
      auto d0 = negative(multiply(*p0, inner, s), s);  // [B, Hkv, R, Lq, 1]
      r = reshape(sum(d0, std::vector<int>{0, 3, 4}, false, s), x.shape(), s);
    } else if (i == 3 && mask == Sdpa::Additive) {
      r = reshape(ds, x.shape(), s);
    }
    out.push_back(astype(r, x.dtype(), s));
  }
  return out;
}

}  // namespace

namespace detail {
std::vector<array> sdpa_vjp_composed(const array& q, const array& k,
                                     const array& v, const array& d_o,
                                     float scale, bool causal, Stream s) {
  return composed_vjp({q, k, v}, d_o, {0, 1, 2},
                      ScaledDotProductAttention::None, false, causal, scale,
                      s);
}
}  // namespace detail

// With the logsumexp kept (output_lse: the op saw a vjp coming and the
// fused backward taking these inputs), the fused backward primitive;
// otherwise the composed rule. The logsumexp's cotangent is ignored: it is
// the backward's input, not a result (MLX does the same).
std::vector<array> ScaledDotProductAttention::vjp(
    const std::vector<array>& primals, const std::vector<array>& cotangents,
    const std::vector<int>& argnums, const std::vector<array>& outputs) {
  auto s = stream();
  if (output_lse_ && outputs.size() == 2) {
    auto g = detail::sdpa_vjp(primals[0], primals[1], primals[2], outputs[0],
                              outputs[1], cotangents[0], scale_, causal_, s);
    std::vector<array> out;
    for (int i : argnums) {
      out.push_back(g[i]);
    }
    return out;
  }
  return composed_vjp(primals, cotangents[0], argnums, mask_, has_sinks_,
                      causal_, scale_, s);
}

std::vector<array> ScaledDotProductAttention::jvp(
    const std::vector<array>& primals, const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  auto s = stream();
  auto g = grouped(primals, mask_ != None, has_sinks_, s);
  std::optional<array> p0;
  auto p = detail::attention_probs(g.q5, g.k5, g.m5, mask_ == Bool, causal_,
                                   scale_, s, g.s5, &p0);
  Dtype ct = p.dtype();
  auto sc = scalar(scale_, ct);
  const int sink_index = mask_ != None ? 4 : 3;
  std::optional<array> ds, dv, dsink;
  auto acc = [&](std::optional<array>& a, const array& v) {
    a = a ? add(*a, v, s) : v;
  };
  for (size_t k = 0; k < argnums.size(); ++k) {
    auto t = astype(tangents[k], ct, s);
    int i = argnums[k];
    if (i == 0) {
      auto t5 = reshape(t, g.q5.shape(), s);
      acc(ds, multiply(matmul(t5, swapaxes(astype(g.k5, ct, s), -1, -2, s), s),
                       sc, s));
    } else if (i == 1) {
      auto t5 = expand_dims(t, 2, s);
      acc(ds, multiply(matmul(astype(g.q5, ct, s), swapaxes(t5, -1, -2, s), s),
                       sc, s));
    } else if (i == 2) {
      acc(dv, expand_dims(t, 2, s));
    } else if (has_sinks_ && i == sink_index) {
      acc(dsink, reshape(t, {1, g.Hq / g.R, g.R, 1, 1}, s));
    } else if (i == 3 && mask_ == Additive) {
      acc(ds, reshape(t, {g.B, g.Hq / g.R, g.R, g.Lq, g.Lk}, s));
    }
  }
  if (ds) {
    // Hidden scores are constants.
    auto vis = detail::attention_visible(g.m5, mask_ == Bool, causal_, g.Lq,
                                         g.Lk, s);
    if (vis) {
      ds = where(*vis, *ds, zeros({}, ct, s), s);
    }
  }
  Shape o5 = g.q5.shape();
  o5[4] = primals[2].shape(3);
  std::optional<array> out;
  if (ds || dsink) {
    // The softmax's jvp over the row [sink, keys]: dp = p (ds - sum(p ds)).
    std::optional<array> inner;
    if (ds) {
      inner = sum(multiply(p, *ds, s), -1, true, s);
    }
    if (dsink) {
      acc(inner, multiply(*p0, *dsink, s));
    }
    auto dp = ds ? multiply(p, subtract(*ds, *inner, s), s)
                 : negative(multiply(p, *inner, s), s);
    acc(out, matmul(dp, astype(g.v5, ct, s), s));
  }
  if (dv) {
    acc(out, matmul(p, *dv, s));
  }
  Shape o4 = primals[0].shape();
  o4[3] = primals[2].shape(3);
  auto r = out ? reshape(broadcast_to(*out, o5, s), o4, s) : zeros(o4, ct, s);
  if (!output_lse_) {
    return {astype(r, primals[0].dtype(), s)};
  }
  // The logsumexp is the backward's input only: the rules treat it as a
  // constant (its cotangent is ignored too, as MLX's).
  return {astype(r, primals[0].dtype(), s),
          zeros({o4[0], o4[1], o4[2]}, ct == float64 ? float64 : float32, s)};
}

// The batch axis folds into B (q, k, v, mask), or, when the sinks are
// batched, into the heads: batch element n's query head h becomes head
// n * Hq + h, whose key/value head (n * Hq + h) / R = n * Hkv + h / R is its
// own element's.
std::pair<std::vector<array>, std::vector<int>> ScaledDotProductAttention::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  int n = rules::batch_size(inputs, axes);
  if (output_lse_) {
    // No mask, no sinks: the batch folds into B for both outputs.
    std::vector<array> f;
    for (int i = 0; i < 3; ++i) {
      auto b = rules::to_front(inputs[i], axes[i], n, s);
      Shape sh(b.shape().begin() + 1, b.shape().end());
      sh[0] *= n;
      f.push_back(reshape(b, sh, s));
    }
    auto y = detail::sdpa_with_lse(f[0], f[1], f[2], scale_, causal_, s);
    std::vector<array> out;
    for (auto& a : y) {
      Shape sh = a.shape();
      sh[0] /= n;
      sh.insert(sh.begin(), n);
      out.push_back(reshape(a, sh, s));
    }
    return {out, {0, 0}};
  }
  const int sink_index = mask_ != None ? 4 : 3;
  const bool sinks_batched = has_sinks_ && axes[sink_index] >= 0;
  std::optional<array> mask, sinks;
  if (!sinks_batched) {
    std::vector<array> f;
    for (int i = 0; i < 3 + (mask_ != None); ++i) {
      auto b = rules::to_front(inputs[i], axes[i], n, s);
      Shape sh(b.shape().begin() + 1, b.shape().end());
      sh[0] *= n;
      f.push_back(reshape(b, sh, s));
    }
    if (mask_ != None) {
      mask = f[3];
    }
    if (has_sinks_) {
      sinks = inputs[sink_index];
    }
    auto y = scaled_dot_product_attention(f[0], f[1], f[2], scale_,
                                          causal_ ? "causal" : "", mask, sinks,
                                          s);
    Shape out = y.shape();
    out[0] /= n;
    out.insert(out.begin(), n);
    return {{reshape(y, out, s)}, {0}};
  }
  // [n, B, H, ...] -> [B, n * H, ...] for q, k, v and the mask (broadcast to
  // the batch first: a mask is [B, Hq, Lq, Lk] here already).
  std::vector<array> f;
  for (int i = 0; i < 3 + (mask_ != None); ++i) {
    auto b = rules::to_front(inputs[i], axes[i], n, s);
    b = swapaxes(b, 0, 1, s);  // [B, n, H, ...]
    Shape sh = b.shape();
    Shape merged{sh[0], sh[1] * sh[2]};
    merged.insert(merged.end(), sh.begin() + 3, sh.end());
    f.push_back(reshape(b, merged, s));
  }
  if (mask_ != None) {
    mask = f[3];
  }
  sinks = reshape(rules::to_front(inputs[sink_index], axes[sink_index], n, s),
                  {-1}, s);
  auto y = scaled_dot_product_attention(f[0], f[1], f[2], scale_,
                                        causal_ ? "causal" : "", mask, sinks,
                                        s);
  // [B, n * Hq, Lq, Dv] -> [n, B, Hq, Lq, Dv]
  Shape ys = y.shape();
  auto y5 = reshape(y, {ys[0], n, ys[1] / n, ys[2], ys[3]}, s);
  return {{swapaxes(y5, 0, 1, s)}, {0}};
}

// ------------------------------------------------ ScaledDotProductAttentionVJP

// The rules differentiate the composed backward g(q, k, v, dO): o and lse
// are functions of q, k, v (the forward's outputs), so the total
// derivative through them is g's, and they take none themselves.
namespace {
Fn composed_backward(float scale, bool causal, Stream s) {
  return [=](const std::vector<array>& x) {
    return detail::sdpa_vjp_composed(x[0], x[1], x[2], x[3], scale, causal,
                                     s);
  };
}
}  // namespace

std::vector<array> ScaledDotProductAttentionVJP::jvp(
    const std::vector<array>& primals, const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  auto s = stream();
  std::vector<array> x{primals[0], primals[1], primals[2], primals[5]};
  std::vector<array> t;
  for (auto& a : x) {
    t.push_back(zeros_like(a, s));
  }
  for (size_t i = 0; i < argnums.size(); ++i) {
    int a = argnums[i];
    if (a < 3 || a == 5) {
      t[a == 5 ? 3 : a] = tangents[i];
    }
  }
  return fluxion::jvp(composed_backward(scale_, causal_, s), x, t).second;
}

std::vector<array> ScaledDotProductAttentionVJP::vjp(
    const std::vector<array>& primals, const std::vector<array>& cotangents,
    const std::vector<int>& argnums, const std::vector<array>&) {
  auto s = stream();
  std::vector<array> x{primals[0], primals[1], primals[2], primals[5]};
  std::vector<int> wanted;
  for (int a : argnums) {
    if (a < 3 || a == 5) {
      wanted.push_back(a == 5 ? 3 : a);
    }
  }
  std::vector<array> g;
  if (!wanted.empty()) {
    g = fluxion::detail::internal_vjp(composed_backward(scale_, causal_, s),
                                      x, cotangents, wanted)
            .second;
  }
  std::vector<array> out;
  size_t k = 0;
  for (int a : argnums) {
    out.push_back(a < 3 || a == 5 ? g[k++] : zeros_like(primals[a], s));
  }
  return out;
}

// A batch of attention backwards (per-example gradients): the composed
// backward of q, k, v and dO, vectorized (o and lse are functions of q, k
// and v, so the batch needs neither). The fused primitive over the batch
// folded into B gave wrong gradients on the GPU for grouped-query heads
// (batch elements past the first, every row's weights off by one factor:
// its logsumexp input disagreed with the rows), a cause not found without
// a GPU at hand; this primitive is only built where cuDNN runs both
// passes, so its vmap is rare, and the composed form is right by
// construction.
std::pair<std::vector<array>, std::vector<int>>
ScaledDotProductAttentionVJP::vmap(const std::vector<array>& inputs,
                                   const std::vector<int>& axes) {
  auto s = stream();
  std::vector<array> x{inputs[0], inputs[1], inputs[2], inputs[5]};
  std::vector<int> x_axes{axes[0], axes[1], axes[2], axes[5]};
  auto backward = composed_backward(scale_, causal_, s);
  if (std::all_of(x_axes.begin(), x_axes.end(), [](int a) { return a < 0; })) {
    // Only o or lse batched: the gradients are the same for every element.
    int n = rules::batch_size(inputs, axes);
    std::vector<array> outs;
    for (auto& g : backward(x)) {
      Shape sh = g.shape();
      sh.insert(sh.begin(), n);
      outs.push_back(broadcast_to(expand_dims(g, 0, s), sh, s));
    }
    return {std::move(outs), {0, 0, 0}};
  }
  return {fluxion::vmap(backward, x_axes)(x), {0, 0, 0}};
}

}  // namespace fluxion::fast
