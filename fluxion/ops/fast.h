// Fused operations of common layers (MLX's `mx.fast`): layer and RMS
// normalization, rotary position embeddings and scaled dot-product
// attention. Each is one primitive with its own CPU kernel; each also has a
// composed version built from public ops (`*_composed`), which is what the
// fused kernels are tested against and what the derivative rules use for
// intermediate quantities.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion::fast {

// Normalizes over the last axis: (x - mean) / sqrt(var + eps) * weight +
// bias. weight and bias are 1-D with the last axis' size. Computes in
// float32 for float16/bfloat16 inputs; the output dtype is the common dtype
// of x and the given weight and bias.
array layer_norm(const array& x, const std::optional<array>& weight,
                 const std::optional<array>& bias, float eps,
                 StreamOrDevice s = {});

// x / sqrt(mean(x^2) + eps) * weight over the last axis.
array rms_norm(const array& x, const std::optional<array>& weight, float eps,
               StreamOrDevice s = {});

// Rotary position embedding of the first `dims` features of the last axis
// (x has at least 3 dimensions). Feature pairs (x[2i], x[2i+1]) when
// `traditional`, else (x[i], x[i + dims/2]), are rotated by the angle
// (offset + l) * scale * f_i, l being the index along axis -2 and f_i =
// base^(-2i/dims), or 1 / freqs[i] when `freqs` (dims/2 values) is given.
// An array offset is an integer scalar or a vector with one offset per
// element of axis 0.
array rope(const array& x, int dims, bool traditional,
           std::optional<float> base, float scale, int offset,
           const std::optional<array>& freqs = std::nullopt,
           StreamOrDevice s = {});
array rope(const array& x, int dims, bool traditional,
           std::optional<float> base, float scale, const array& offset,
           const std::optional<array>& freqs = std::nullopt,
           StreamOrDevice s = {});

// softmax(scale * q @ k^T + mask) @ v with q [B, Hq, Lq, D], k [B, Hkv, Lk,
// D], v [B, Hkv, Lk, Dv] and Hq a multiple of Hkv (grouped-query attention:
// query head h uses key/value head h / (Hq / Hkv)). `mask_mode` is "" (no
// mask unless `mask` is given), "causal" (query i sees keys j <= i + Lk -
// Lq) or "array" (`mask` required). A boolean mask keeps the True
// positions, another mask is added to the scores; either broadcasts to
// [B, Hq, Lq, Lk]. As MLX, hidden positions (boolean or causal) score the
// dtype's lowest finite value rather than -inf, so a row that sees no key
// attends uniformly to all of them (not nan); an additive -inf stays -inf.
// `sinks` [Hq] (MLX's attention sinks) adds one logit per head to every
// row's softmax that attends to no value: the weights sum to less than one.
// Its dtype must promote to the output dtype.
array scaled_dot_product_attention(
    const array& queries, const array& keys, const array& values, float scale,
    const std::string& mask_mode = "",
    const std::optional<array>& mask = std::nullopt,
    const std::optional<array>& sinks = std::nullopt, StreamOrDevice s = {});

// The gradients of layer_norm (`layer`) or rms_norm at x, given the
// cotangent g of the norm's output, in one primitive (NormVJP): {dx, then
// dweight when `weight` is given, then dbias when `has_bias` (layer_norm
// only)}. dweight and dbias are summed over every row (all axes of x but
// the last). x, weight and g (of x's shape) promote to one floating dtype,
// which every output takes; the arithmetic is the forward's (float for
// the half types, double for float64). This is what the norms' vjp rules
// build; exposed for tests and for callers with their own backward pass.
std::vector<array> norm_vjp(const array& x, const std::optional<array>& weight,
                            const array& g, float eps, bool layer,
                            bool has_bias, StreamOrDevice s = {});
// The same gradients composed from public ops (the closed forms the norms'
// rules used before NormVJP): the reference of the tests and what
// NormVJP's own derivative and vmap rules differentiate.
std::vector<array> norm_vjp_composed(const array& x,
                                     const std::optional<array>& weight,
                                     const array& g, float eps, bool layer,
                                     bool has_bias, StreamOrDevice s = {});

// The same operations composed from public ops (same validation).
array layer_norm_composed(const array& x, const std::optional<array>& weight,
                          const std::optional<array>& bias, float eps,
                          StreamOrDevice s = {});
array rms_norm_composed(const array& x, const std::optional<array>& weight,
                        float eps, StreamOrDevice s = {});
array rope_composed(const array& x, int dims, bool traditional,
                    std::optional<float> base, float scale, const array& offset,
                    const std::optional<array>& freqs = std::nullopt,
                    StreamOrDevice s = {});
array scaled_dot_product_attention_composed(
    const array& queries, const array& keys, const array& values, float scale,
    const std::string& mask_mode = "",
    const std::optional<array>& mask = std::nullopt,
    const std::optional<array>& sinks = std::nullopt, StreamOrDevice s = {});

// Inputs: x, then weight and bias when present (all of the output dtype).
// The vjp is one NormVJP node (the fused backward), the jvp a closed form
// of public ops; vmap folds batch axes into the leading ones (a batched
// weight or bias is applied outside the primitive).
class LayerNorm : public Primitive {
 public:
  LayerNorm(Stream s, float eps, bool has_weight, bool has_bias)
      : Primitive(s), eps_(eps), has_weight_(has_weight), has_bias_(has_bias) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "LayerNorm"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  float eps() const { return eps_; }
  bool has_weight() const { return has_weight_; }
  bool has_bias() const { return has_bias_; }

 private:
  float eps_;
  bool has_weight_;
  bool has_bias_;
};

// Inputs: x, then weight when present. Rules as LayerNorm's.
class RMSNorm : public Primitive {
 public:
  RMSNorm(Stream s, float eps, bool has_weight)
      : Primitive(s), eps_(eps), has_weight_(has_weight) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "RMSNorm"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  float eps() const { return eps_; }
  bool has_weight() const { return has_weight_; }

 private:
  float eps_;
  bool has_weight_;
};

// Inputs: x, then weight when has_weight, then the cotangent g (one
// floating dtype; g of x's shape). Outputs: dx, then dweight when
// has_weight, then dbias when has_bias (each [D], summed over the rows).
// One kernel reads each row of x and g once: the row's statistics, dx, and
// per-block partial sums of dweight/dbias (reduced once more at the end).
// Its own rules (second-order gradients of the norms, vmap of their
// gradients) differentiate or vectorize norm_vjp_composed: correct rather
// than fast.
class NormVJP : public Primitive {
 public:
  NormVJP(Stream s, float eps, bool layer, bool has_weight, bool has_bias)
      : Primitive(s),
        eps_(eps),
        layer_(layer),
        has_weight_(has_weight),
        has_bias_(has_bias) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "NormVJP"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  float eps() const { return eps_; }
  bool layer() const { return layer_; }
  bool has_weight() const { return has_weight_; }
  bool has_bias() const { return has_bias_; }

 private:
  float eps_;
  bool layer_;
  bool has_weight_;
  bool has_bias_;
};

// Inputs: x, offset (int32, size 1 or x.shape(0)), then freqs when present.
// `forward` false rotates by the negated angles (the vjp: the rotation's
// transpose is its inverse).
class RoPE : public Primitive {
 public:
  RoPE(Stream s, int dims, bool traditional, float base, float scale,
       bool forward, bool has_freqs)
      : Primitive(s),
        dims_(dims),
        traditional_(traditional),
        base_(base),
        scale_(scale),
        forward_(forward),
        has_freqs_(has_freqs) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "RoPE"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  int dims() const { return dims_; }
  bool traditional() const { return traditional_; }
  float base() const { return base_; }
  float scale() const { return scale_; }
  bool forward() const { return forward_; }
  bool has_freqs() const { return has_freqs_; }

 private:
  int dims_;
  bool traditional_;
  float base_;
  float scale_;
  bool forward_;
  bool has_freqs_;
};

// Inputs: q, k, v, then the mask (when not None) and the sinks [Hq] (when
// has_sinks), all of the output dtype but a boolean mask (broadcast to
// [B, Hq, Lq, Lk]). Outputs: the attention [B, Hq, Lq, Dv], then, when
// `output_lse`, the logsumexp of each row's scaled scores [B, Hq, Lq]
// (float32; float64 for float64), what the fused backward
// (ScaledDotProductAttentionVJP) rebuilds the probabilities from. The op
// asks for it only while a vjp traces (detail::in_grad_tracing) on inputs
// the fused backward takes (ScaledDotProductAttentionVJP::use_fused).
class ScaledDotProductAttention : public Primitive {
 public:
  enum MaskKind { None, Bool, Additive };
  ScaledDotProductAttention(Stream s, float scale, bool causal, MaskKind mask,
                            bool has_sinks = false, bool output_lse = false)
      : Primitive(s),
        scale_(scale),
        causal_(causal),
        mask_(mask),
        has_sinks_(has_sinks),
        output_lse_(output_lse) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "ScaledDotProductAttention"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  float scale() const { return scale_; }
  bool causal() const { return causal_; }
  MaskKind mask_kind() const { return mask_; }
  bool has_sinks() const { return has_sinks_; }
  bool output_lse() const { return output_lse_; }

 private:
  float scale_;
  bool causal_;
  MaskKind mask_;
  bool has_sinks_;
  bool output_lse_;
};

// The backward pass of attention without a mask array or sinks (causal or
// not), from the forward's output and logsumexp: inputs q, k, v, o, lse,
// dO; outputs dq, dk, dv. On the GPU it runs cuDNN's fused flash-attention
// backward (backend/cuda/sdpa_cudnn.cpp); the CPU kernel computes the same
// flash-style (P = exp(scale q k^T - lse), D = rowsum(dO o)). Its own
// derivatives are those of the composed backward (o and lse, functions of
// q, k, v, take none), so it differentiates again.
class ScaledDotProductAttentionVJP : public Primitive {
 public:
  ScaledDotProductAttentionVJP(Stream s, float scale, bool causal)
      : Primitive(s), scale_(scale), causal_(causal) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "ScaledDotProductAttentionVJP"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape(), in[1].shape(), in[2].shape()};
  }
  float scale() const { return scale_; }
  bool causal() const { return causal_; }

  // Whether the gradient of attention on q, k, v (no mask array, no
  // sinks) goes through this primitive on stream `s`: defined by the GPU
  // backend (cuDNN loads and builds both passes' plans for these shapes;
  // false without a GPU backend and on the CPU, where the composed rule
  // stays).
  static bool use_fused(Stream s, const array& q, const array& k,
                        const array& v, bool causal, float scale);

 private:
  float scale_;
  bool causal_;
};

namespace detail {
// The compute dtype of the composed forms and the kernels: float64 stays,
// the rest use float32.
Dtype compute_dtype(Dtype t);
// All axes but the last (the ones a weight's gradient sums over).
std::vector<int> leading_axes(int ndim);
// The statistics of the norms' composed forms, in the compute dtype
// (float32, float64 for float64): x itself, xhat = (x - mean) * rstd
// (mean 0 for rms_norm) and rstd = 1 / sqrt(var + eps), kept as [..., 1].
struct NormStats {
  array xf, xhat, rstd;
};
NormStats norm_stats(const array& x, float eps, bool layer, Stream s);
// The attention and its logsumexp (the primitive with output_lse), for q,
// k, v without a mask array or sinks.
std::vector<array> sdpa_with_lse(const array& q, const array& k,
                                 const array& v, float scale, bool causal,
                                 Stream s);
// The fused backward primitive's outputs {dq, dk, dv}, and the same from
// public ops (its rules' function and its CPU tests' reference).
std::vector<array> sdpa_vjp(const array& q, const array& k, const array& v,
                            const array& o, const array& lse, const array& d_o,
                            float scale, bool causal, Stream s);
std::vector<array> sdpa_vjp_composed(const array& q, const array& k,
                                     const array& v, const array& d_o,
                                     float scale, bool causal, Stream s);
// The attention probabilities softmax(scale * q @ k^T + mask) of the
// grouped layout: q [B, Hkv, R, Lq, D], k [B, Hkv, 1, Lk, D], mask [B, Hkv,
// R, Lq, Lk] or absent, sinks [1, Hkv, R, 1, 1] or absent; computed in
// float32 at least (precise softmax). `sink_prob` (when given and sinks
// are) receives the sinks' column [B, Hkv, R, Lq, 1].
array attention_probs(const array& q5, const array& k5,
                      const std::optional<array>& mask5, bool is_bool,
                      bool causal, float scale, Stream s,
                      const std::optional<array>& sinks5 = std::nullopt,
                      std::optional<array>* sink_prob = nullptr);
// Where the scores are kept (a boolean mask and the causal limit), as a
// boolean broadcastable to [B, Hkv, R, Lq, Lk]; nullopt when nothing is
// hidden.
std::optional<array> attention_visible(const std::optional<array>& mask5,
                                       bool is_bool, bool causal, int lq,
                                       int lk, Stream s);
// The rotated halves and the pass-through rest of x for rope.
struct RopeParts {
  array x1, x2, rest;
};
RopeParts rope_split(const array& x, int dims, bool traditional, Stream s);
array rope_join(const array& y1, const array& y2, const array& rest,
                bool traditional, Stream s);
// Angles [..., L, dims/2] (broadcastable against the halves of x).
array rope_angles(const array& x, int dims, float base, float scale,
                  const array& offset, const std::optional<array>& freqs,
                  Stream s);
}  // namespace detail

}  // namespace fluxion::fast
