// Op-spec cases of the fused mx.fast primitives: layer_norm, rms_norm, rope
// and scaled_dot_product_attention (masks of each kind, grouped-query
// attention, traditional rope, frequency tables, per-row offsets).
#include "fluxion/ops/fast.h"
#include "op_cases.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

std::vector<OpCase> fast_cases() {
  std::vector<OpCase> c;
  namespace fx = fluxion::fast;
  Shape xs{2, 3, 5};
  c.push_back({"layer_norm",
               [](const std::vector<array>& x) {
                 return std::vector<array>{
                     fx::layer_norm(x[0], x[1], x[2], 1e-5f)};
               },
               {rnd(xs, 1), rnd({5}, 2), rnd({5}, 3)},
               true,
               true});
  c.push_back({"layer_norm_plain",
               unary([](const array& x) {
                 return fx::layer_norm(x, std::nullopt, std::nullopt, 1e-5f);
               }),
               {rnd(xs, 4)},
               true,
               true});
  c.push_back({"layer_norm_bias_only",
               binary([](const array& x, const array& b) {
                 return fx::layer_norm(x, std::nullopt, b, 1e-5f);
               }),
               {rnd({4, 3}, 5), rnd({3}, 6)},
               true,
               true});
  c.push_back({"rms_norm",
               binary([](const array& x, const array& w) {
                 return fx::rms_norm(x, w, 1e-5f);
               }),
               {rnd(xs, 7), rnd({5}, 8)},
               true,
               true});
  c.push_back({"rms_norm_plain",
               unary([](const array& x) {
                 return fx::rms_norm(x, std::nullopt, 1e-5f);
               }),
               {rnd({3, 1, 6}, 9)},
               true,
               true});

  Shape rs{2, 2, 3, 6};
  c.push_back({"rope",
               unary([](const array& x) {
                 return fx::rope(x, 4, false, 10000.0f, 1.0f, 2);
               }),
               {rnd(rs, 10)},
               true,
               true});
  c.push_back({"rope_traditional",
               unary([](const array& x) {
                 return fx::rope(x, 6, true, 100.0f, 0.5f, 1);
               }),
               {rnd(rs, 11)},
               true,
               true});
  c.push_back({"rope_freqs",
               binary([](const array& x, const array& f) {
                 return fx::rope(x, 4, false, std::nullopt, 1.0f, 3, f);
               }),
               {rnd(rs, 12), positive({2}, 13)},
               true,
               true});
  c.push_back({"rope_offsets",
               binary([](const array& x, const array& off) {
                 return fx::rope(x, 4, true, 10000.0f, 1.0f, off);
               }),
               {rnd(rs, 14), array({3, 7}, int32)},
               true,
               true});

  auto sdpa = [](const char* mode, float scale) {
    return [mode, scale](const std::vector<array>& x) {
      std::optional<array> m;
      if (x.size() > 3) {
        m = x[3];
      }
      return std::vector<array>{
          fx::scaled_dot_product_attention(x[0], x[1], x[2], scale, mode, m)};
    };
  };
  c.push_back(
      {"sdpa",
       sdpa("", 0.5f),
       {rnd({2, 2, 3, 4}, 20), rnd({2, 2, 5, 4}, 21), rnd({2, 2, 5, 4}, 22)},
       true,
       true});
  c.push_back(
      {"sdpa_gqa_causal",
       sdpa("causal", 0.7f),
       {rnd({1, 4, 3, 5}, 23), rnd({1, 2, 4, 5}, 24), rnd({1, 2, 4, 3}, 25)},
       true,
       true});
  // Every row keeps at least one key.
  auto keep = array({true, false, true, false, false, true, true, false, true,
                     true, false, false},
                    {3, 4});
  c.push_back({"sdpa_bool_mask",
               sdpa("", 0.5f),
               {rnd({1, 2, 3, 4}, 26), rnd({1, 1, 4, 4}, 27),
                rnd({1, 1, 4, 4}, 28), keep},
               true,
               true});
  c.push_back({"sdpa_additive_mask",
               sdpa("array", 0.5f),
               {rnd({2, 2, 3, 4}, 29), rnd({2, 2, 4, 4}, 30),
                rnd({2, 2, 4, 4}, 31), rnd({2, 1, 3, 4}, 32)},
               true,
               true});
  c.push_back(
      {"sdpa_decode",
       sdpa("causal", 0.4f),
       {rnd({2, 2, 1, 3}, 33), rnd({2, 1, 6, 3}, 34), rnd({2, 1, 6, 3}, 35)},
       true,
       true});
  // Attention sinks (the last input, one logit per query head), alone, with
  // grouped heads and a causal mask, and with a boolean mask that hides a
  // whole row (uniform over the keys; its scores take no gradient).
  auto sinked = [](const char* mode, float scale) {
    return [mode, scale](const std::vector<array>& x) {
      std::optional<array> m;
      if (x.size() > 4) {
        m = x[3];
      }
      return std::vector<array>{fx::scaled_dot_product_attention(
          x[0], x[1], x[2], scale, mode, m, x.back())};
    };
  };
  c.push_back({"sdpa_sinks",
               sinked("", 0.5f),
               {rnd({2, 2, 3, 4}, 36), rnd({2, 2, 5, 4}, 37),
                rnd({2, 2, 5, 4}, 38), rnd({2}, 39)},
               true,
               true});
  c.push_back({"sdpa_sinks_gqa_causal",
               sinked("causal", 0.7f),
               {rnd({1, 4, 3, 5}, 40), rnd({1, 2, 4, 5}, 41),
                rnd({1, 2, 4, 3}, 42), rnd({4}, 43)},
               true,
               true});
  auto hide_row = array({true, true, false, true, true, false, false, false,
                         true, false, true, true},
                        {3, 4});
  c.push_back({"sdpa_sinks_hidden_row",
               sinked("", 0.5f),
               {rnd({1, 2, 3, 4}, 44), rnd({1, 1, 4, 4}, 45),
                rnd({1, 1, 4, 4}, 46), hide_row, rnd({2}, 47)},
               true,
               true});
  c.push_back({"sdpa_hidden_row",
               sdpa("", 0.5f),
               {rnd({1, 2, 3, 4}, 48), rnd({1, 1, 4, 4}, 49),
                rnd({1, 1, 4, 4}, 50), hide_row},
               true,
               true});
  return c;
}

}  // namespace

FLUXION_REGISTER_OP_CASES(fast_cases);
