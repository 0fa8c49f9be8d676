// Op-table cases of the fused mx.fast primitives: layer_norm, rms_norm,
// their backward pass (NormVJP), rope and scaled_dot_product_attention
// (masks of each kind, grouped-query attention, traditional rope,
// frequency tables, per-row offsets). Each one's reference is its
// `*_composed` twin, built from public ops.
#include "fluxion/ops/fast.h"
#include "op_cases.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

namespace fx = fluxion::fast;

// `fast(inputs)` checked against `composed(inputs)`.
OpCase twin(const std::string& name,
            std::function<array(const Arrays&, bool composed)> g,
            std::vector<In> in) {
  OpCase k{name,
           [g](const Arrays& x) { return Arrays{g(x, false)}; },
           std::move(in)};
  k.dtypes = {float64, float32, float16};
  // The twin in float64, whatever the dtype under test.
  k.ref = [g](const Arrays& x) {
    Arrays y;
    for (auto& a : x) {
      y.push_back(is_floating_point(a.dtype()) ? astype(a, float64) : a);
    }
    return Arrays{g(y, true)};
  };
  k.fwd_tol = 1e-12;
  return k;
}

std::vector<OpCase> fast_cases() {
  std::vector<OpCase> c;
  Shape xs{2, 3, 5};
  auto ln = [](const array& x, std::optional<array> w, std::optional<array> b,
               bool composed) {
    return composed ? fx::layer_norm_composed(x, w, b, 1e-5f)
                    : fx::layer_norm(x, w, b, 1e-5f);
  };
  auto rms = [](const array& x, std::optional<array> w, bool composed) {
    return composed ? fx::rms_norm_composed(x, w, 1e-5f)
                    : fx::rms_norm(x, w, 1e-5f);
  };
  c.push_back(twin("layer_norm",
                   [ln](const Arrays& x, bool k) {
                     return ln(x[0], x[1], x[2], k);
                   },
                   {normal(xs), normal({5}), normal({5})}));
  c.push_back(twin("layer_norm_plain",
                   [ln](const Arrays& x, bool k) {
                     return ln(x[0], std::nullopt, std::nullopt, k);
                   },
                   {normal(xs)}));
  c.push_back(twin("layer_norm_bias_only",
                   [ln](const Arrays& x, bool k) {
                     return ln(x[0], std::nullopt, x[1], k);
                   },
                   {normal({4, 3}), normal({3})}));
  c.push_back(twin("rms_norm",
                   [rms](const Arrays& x, bool k) { return rms(x[0], x[1], k); },
                   {normal(xs), normal({5})}));
  c.push_back(twin("rms_norm_plain",
                   [rms](const Arrays& x, bool k) {
                     return rms(x[0], std::nullopt, k);
                   },
                   {normal({3, 1, 6})}));

  // NormVJP (the norms' fused backward; its outputs dx, [dweight],
  // [dbias]) against norm_vjp_composed in float64. Its derivatives are the
  // norms' second (and, in Gradients' second order, third) derivatives,
  // through its own rules.
  auto nvjp = [](const std::string& name, bool layer, bool weight,
                 bool bias, std::vector<In> in) {
    auto call = [layer, weight, bias](const Arrays& x, bool composed) {
      std::optional<array> w;
      if (weight) {
        w = x[1];
      }
      return composed ? fx::norm_vjp_composed(x[0], w, x.back(), 1e-5f, layer,
                                              bias)
                      : fx::norm_vjp(x[0], w, x.back(), 1e-5f, layer, bias);
    };
    OpCase k{name, [call](const Arrays& x) { return call(x, false); },
             std::move(in)};
    k.dtypes = {float64, float32, float16};
    k.ref = [call](const Arrays& x) {
      Arrays y;
      for (auto& a : x) {
        y.push_back(astype(a, float64));
      }
      return call(y, true);
    };
    k.fwd_tol = 1e-12;
    // dweight and dbias sum over the rows and dx ends in a difference:
    // devices (and the float64 reference) add in other orders, which moves
    // a float result by more than the default 4 ulps of its magnitude.
    k.fwd_ulps = 16;
    return k;
  };
  c.push_back(nvjp("norm_vjp_layer", true, true, true,
                   {normal(xs), normal({5}), normal(xs)}));
  c.push_back(nvjp("norm_vjp_layer_bias_only", true, false, true,
                   {normal({4, 3}), normal({4, 3})}));
  c.push_back(nvjp("norm_vjp_rms", false, true, false,
                   {normal(xs), normal({5}), normal(xs)}));
  c.push_back(nvjp("norm_vjp_rms_plain", false, false, false,
                   {normal({3, 1, 6}), normal({3, 1, 6})}));

  Shape rs{2, 2, 3, 6};
  c.push_back(twin("rope",
                   [](const Arrays& x, bool k) {
                     return k ? fx::rope_composed(x[0], 4, false, 10000.0f,
                                                  1.0f, array(2))
                              : fx::rope(x[0], 4, false, 10000.0f, 1.0f, 2);
                   },
                   {normal(rs)}));
  c.push_back(twin("rope_traditional",
                   [](const Arrays& x, bool k) {
                     return k ? fx::rope_composed(x[0], 6, true, 100.0f, 0.5f,
                                                  array(1))
                              : fx::rope(x[0], 6, true, 100.0f, 0.5f, 1);
                   },
                   {normal(rs)}));
  c.push_back(twin("rope_freqs",
                   [](const Arrays& x, bool k) {
                     return k ? fx::rope_composed(x[0], 4, false, std::nullopt,
                                                  1.0f, array(3), x[1])
                              : fx::rope(x[0], 4, false, std::nullopt, 1.0f, 3,
                                         x[1]);
                   },
                   {normal(rs), positive({2})}));
  c.push_back(twin("rope_offsets",
                   [](const Arrays& x, bool k) {
                     return k ? fx::rope_composed(x[0], 4, true, 10000.0f,
                                                  1.0f, x[1])
                              : fx::rope(x[0], 4, true, 10000.0f, 1.0f, x[1]);
                   },
                   {normal(rs), array({3, 7}, int32)}));

  auto sdpa = [](const char* mode, float scale) {
    return [mode, scale](const Arrays& x, bool k) {
      std::optional<array> m;
      if (x.size() > 3) {
        m = x[3];
      }
      return k ? fx::scaled_dot_product_attention_composed(x[0], x[1], x[2],
                                                           scale, mode, m)
               : fx::scaled_dot_product_attention(x[0], x[1], x[2], scale,
                                                  mode, m);
    };
  };
  c.push_back(twin("sdpa", sdpa("", 0.5f),
                   {normal({2, 2, 3, 4}), normal({2, 2, 5, 4}),
                    normal({2, 2, 5, 4})}));
  c.push_back(twin("sdpa_gqa_causal", sdpa("causal", 0.7f),
                   {normal({1, 4, 3, 5}), normal({1, 2, 4, 5}),
                    normal({1, 2, 4, 3})}));
  // Every row keeps at least one key.
  auto keep = array({true, false, true, false, false, true, true, false, true,
                     true, false, false},
                    {3, 4});
  c.push_back(twin("sdpa_bool_mask", sdpa("", 0.5f),
                   {normal({1, 2, 3, 4}), normal({1, 1, 4, 4}),
                    normal({1, 1, 4, 4}), keep}));
  c.push_back(twin("sdpa_additive_mask", sdpa("array", 0.5f),
                   {normal({2, 2, 3, 4}), normal({2, 2, 4, 4}),
                    normal({2, 2, 4, 4}), normal({2, 1, 3, 4})}));
  c.push_back(twin("sdpa_decode", sdpa("causal", 0.4f),
                   {normal({2, 2, 1, 3}), normal({2, 1, 6, 3}),
                    normal({2, 1, 6, 3})}));
  // Attention sinks (the last input, one logit per query head), alone, with
  // grouped heads and a causal mask, and with a boolean mask that hides a
  // whole row (uniform over the keys; its scores take no gradient).
  auto sinked = [](const char* mode, float scale) {
    return [mode, scale](const Arrays& x, bool k) {
      std::optional<array> m;
      if (x.size() > 4) {
        m = x[3];
      }
      return k ? fx::scaled_dot_product_attention_composed(
                     x[0], x[1], x[2], scale, mode, m, x.back())
               : fx::scaled_dot_product_attention(x[0], x[1], x[2], scale,
                                                  mode, m, x.back());
    };
  };
  c.push_back(twin("sdpa_sinks", sinked("", 0.5f),
                   {normal({2, 2, 3, 4}), normal({2, 2, 5, 4}),
                    normal({2, 2, 5, 4}), normal({2})}));
  c.push_back(twin("sdpa_sinks_gqa_causal", sinked("causal", 0.7f),
                   {normal({1, 4, 3, 5}), normal({1, 2, 4, 5}),
                    normal({1, 2, 4, 3}), normal({4})}));
  auto hide_row = array({true, true, false, true, true, false, false, false,
                         true, false, true, true},
                        {3, 4});
  c.push_back(twin("sdpa_sinks_hidden_row", sinked("", 0.5f),
                   {normal({1, 2, 3, 4}), normal({1, 1, 4, 4}),
                    normal({1, 1, 4, 4}), hide_row, normal({2})}));
  c.push_back(twin("sdpa_hidden_row", sdpa("", 0.5f),
                   {normal({1, 2, 3, 4}), normal({1, 1, 4, 4}),
                    normal({1, 1, 4, 4}), hide_row}));

  // The fused backward (ScaledDotProductAttentionVJP) of q, k, v and dO,
  // from the forward's output and logsumexp (the forward primitive with
  // output_lse), against the composed backward; its derivatives are the
  // composed backward's. On the GPU the float16 run of the causal case
  // (head size 8) takes cuDNN, the others the host routine.
  auto fused_vjp = [](bool causal, float scale) {
    return [causal, scale](const Arrays& x, bool composed) {
      auto s = to_stream({});
      if (composed) {
        return fx::detail::sdpa_vjp_composed(x[0], x[1], x[2], x[3], scale,
                                             causal, s);
      }
      auto ol = fx::detail::sdpa_with_lse(x[0], x[1], x[2], scale, causal, s);
      return fx::detail::sdpa_vjp(x[0], x[1], x[2], ol[0], ol[1], x[3], scale,
                                  causal, s);
    };
  };
  auto vjp_case = [](const std::string& name,
                     std::function<Arrays(const Arrays&, bool)> g,
                     std::vector<In> in) {
    OpCase k{name, [g](const Arrays& x) { return g(x, false); },
             std::move(in), Deriv::first};
    k.dtypes = {float64, float32, float16};
    k.ref = [g](const Arrays& x) {
      Arrays y;
      for (auto& a : x) {
        y.push_back(astype(a, float64));
      }
      return g(y, true);
    };
    k.fwd_tol = 1e-10;
    // o and the logsumexp are rounded to the dtype before the backward.
    k.fwd_ulps = 32;
    return k;
  };
  c.push_back(vjp_case("sdpa_fused_vjp", fused_vjp(false, 0.5f),
                       {normal({2, 2, 3, 4}), normal({2, 2, 5, 4}),
                        normal({2, 2, 5, 4}), normal({2, 2, 3, 4})}));
  c.push_back(vjp_case("sdpa_fused_vjp_gqa_causal", fused_vjp(true, 0.7f),
                       {normal({1, 4, 3, 8}), normal({1, 2, 4, 8}),
                        normal({1, 2, 4, 8}), normal({1, 4, 3, 8})}));
  return c;
}

}  // namespace

FLUXION_REGISTER_OP_CASES(fast_cases);
