// Attention's logsumexp output and its fused backward
// (fast::ScaledDotProductAttentionVJP) on the CPU: the logsumexp against
// the composed one, the fused backward against the composed rule and
// against central finite differences of the forward (float64), the
// edge rows of MLX's causal mask (Lq > Lk), and when the op keeps the
// logsumexp (only under a vjp, and never on the CPU, where the composed
// rule stays).
#include <cmath>
#include <limits>
#include <random>

#include "fluxion/ops/fast.h"
#include "fluxion/eager.h"
#include "fluxion/transforms.h"
#include "transform_checks.h"

using namespace fluxion;
using namespace fluxion::test;
namespace fx = fluxion::fast;

namespace {

array randn(const Shape& shape, unsigned seed, Dtype t = float64) {
  std::mt19937 gen(seed);
  return random_like(zeros(shape, t), gen);
}

struct Dims {
  int B, Hq, Hkv, Lq, Lk, D;
  bool causal;
};

const std::vector<Dims> kDims = {
    {2, 2, 2, 5, 7, 4, false},  {1, 4, 2, 6, 6, 8, true},
    {2, 2, 1, 3, 9, 5, true},   {1, 2, 2, 7, 4, 3, true},  // Lq > Lk
    {1, 1, 1, 1, 5, 4, false},  {2, 4, 4, 70, 70, 8, true}};

// Built by appending: GCC 12's -Wrestrict misfires on `"lit" +
// std::to_string(x)` (GCC bug 105329).
std::string name_of(const Dims& d) {
  std::string s;
  for (int x : {d.B, d.Hq, d.Hkv, d.Lq, d.Lk, d.D}) {
    s += std::to_string(x);
    s += ' ';
  }
  s += d.causal ? "causal" : "none";
  return s;
}

// The composed logsumexp of the scaled scores, MLX's hidden keys at the
// lowest finite value.
array lse_composed(const array& q, const array& k, float scale, bool causal) {
  int B = q.shape(0), Hq = q.shape(1), Lq = q.shape(2);
  int Hkv = k.shape(1), Lk = k.shape(2), R = Hq / Hkv;
  auto q5 = reshape(astype(q, float64), {B, Hkv, R, Lq, q.shape(3)});
  auto k5 = expand_dims(astype(k, float64), 2);
  auto s = matmul(q5, swapaxes(k5, -1, -2)) * double{scale};
  auto vis = fx::detail::attention_visible(std::nullopt, false, causal, Lq,
                                           Lk, default_stream(Device::cpu));
  if (vis) {
    double lowest = q.dtype() == float64
                        ? std::numeric_limits<double>::lowest()
                        : double{std::numeric_limits<float>::lowest()};
    s = where(*vis, s, array(lowest, float64));
  }
  return reshape(logsumexp(s, -1, false), {B, Hq, Lq});
}

Stream cpu_stream() { return default_stream(Device::cpu); }

}  // namespace

TEST(FastSdpaVjp, LogsumexpMatchesComposed) {
  for (Dtype t : {float64, float32, float16}) {
    for (auto& d : kDims) {
      auto q = astype(randn({d.B, d.Hq, d.Lq, d.D}, 1), t);
      auto k = astype(randn({d.B, d.Hkv, d.Lk, d.D}, 2), t);
      auto v = astype(randn({d.B, d.Hkv, d.Lk, d.D}, 3), t);
      auto ol = fx::detail::sdpa_with_lse(q, k, v, 0.4f, d.causal,
                                          cpu_stream());
      ASSERT_EQ(ol.size(), 2u);
      EXPECT_EQ(ol[1].dtype(), t == float64 ? float64 : float32);
      EXPECT_EQ(ol[1].shape(), (Shape{d.B, d.Hq, d.Lq}));
      const double tol = t == float64 ? 1e-12 : t == float32 ? 1e-5 : 1e-3;
      std::string what = name_of(d) + " " + dtype_name(t);
      if (d.causal && d.Lq > d.Lk) {
        // Rows that see no key: every score the lowest finite value, so
        // the logsumexp is that value (log Lk is below its resolution).
        auto got = to_vector<double>(ol[1]);
        double lowest = t == float64
                            ? std::numeric_limits<double>::lowest()
                            : double{std::numeric_limits<float>::lowest()};
        EXPECT_EQ(got[0], lowest) << what;
      } else {
        expect_close(ol[1], to_vector<double>(lse_composed(q, k, 0.4f,
                                                           d.causal)),
                     tol, tol, what);
      }
      // The attention itself is the plain primitive's.
      auto plain = fx::scaled_dot_product_attention(q, k, v, 0.4f,
                                                    d.causal ? "causal" : "");
      expect_close(ol[0], to_vector<double>(plain), 0, 0, what);
    }
  }
}

TEST(FastSdpaVjp, FusedBackwardMatchesComposed) {
  for (Dtype t : {float64, float32, float16}) {
    for (auto& d : kDims) {
      auto q = astype(randn({d.B, d.Hq, d.Lq, d.D}, 4), t);
      auto k = astype(randn({d.B, d.Hkv, d.Lk, d.D}, 5), t);
      auto v = astype(randn({d.B, d.Hkv, d.Lk, d.D}, 6), t);
      auto d_o = astype(randn({d.B, d.Hq, d.Lq, d.D}, 7), t);
      auto s = cpu_stream();
      auto ol = fx::detail::sdpa_with_lse(q, k, v, 0.3f, d.causal, s);
      auto got = fx::detail::sdpa_vjp(q, k, v, ol[0], ol[1], d_o, 0.3f,
                                      d.causal, s);
      // The reference in float64 from the same (rounded) values.
      auto want = fx::detail::sdpa_vjp_composed(
          astype(q, float64), astype(k, float64), astype(v, float64),
          astype(d_o, float64), 0.3f, d.causal, s);
      ASSERT_EQ(got.size(), 3u);
      for (int i = 0; i < 3; ++i) {
        std::string what = name_of(d) + " " + dtype_name(t) + " output " +
                           std::to_string(i);
        EXPECT_EQ(got[i].dtype(), t) << what;
        auto w = to_vector<double>(want[i]);
        double scale = 0;
        for (double x : w) {
          scale = std::max(scale, std::abs(x));
        }
        // float16: o and lse are rounded before the backward reads them.
        const double tol = t == float64 ? 1e-10 : t == float32 ? 2e-5 : 2e-2;
        expect_close(got[i], w, 0, tol * std::max(1.0, scale), what);
      }
    }
  }
}

TEST(FastSdpaVjp, FusedBackwardMatchesFiniteDifferences) {
  for (auto& d : kDims) {
    if (d.Lq * d.Lk > 100) {
      continue;  // central differences of every entry: small cases only
    }
    auto q = randn({d.B, d.Hq, d.Lq, d.D}, 8);
    auto k = randn({d.B, d.Hkv, d.Lk, d.D}, 9);
    auto v = randn({d.B, d.Hkv, d.Lk, d.D}, 10);
    auto d_o = randn({d.B, d.Hq, d.Lq, d.D}, 11);
    auto s = cpu_stream();
    const char* mode = d.causal ? "causal" : "";
    auto ol = fx::detail::sdpa_with_lse(q, k, v, 0.5f, d.causal, s);
    auto g = fx::detail::sdpa_vjp(q, k, v, ol[0], ol[1], d_o, 0.5f, d.causal,
                                  s);
    std::vector<array> x{q, k, v};
    // f(x) = sum(dO * attention(x)), differentiated entry by entry.
    auto f = [&](const std::vector<array>& y) {
      return sum(d_o * fx::scaled_dot_product_attention(y[0], y[1], y[2],
                                                        0.5f, mode))
          .item<double>();
    };
    for (int i = 0; i < 3; ++i) {
      auto base = to_vector<double>(x[i]);
      std::vector<double> fd(base.size());
      const double eps = 1e-6;
      for (size_t e = 0; e < base.size(); ++e) {
        auto up = base, dn = base;
        up[e] += eps;
        dn[e] -= eps;
        auto yu = x, yd = x;
        yu[i] = array(up.begin(), x[i].shape(), float64);
        yd[i] = array(dn.begin(), x[i].shape(), float64);
        fd[e] = (f(yu) - f(yd)) / (2 * eps);
      }
      expect_close(g[i], fd, 1e-6, 1e-7,
                   name_of(d) + " input " + std::to_string(i));
    }
  }
}

TEST(FastSdpaVjp, LogsumexpOnlyUnderAVjpAndNotOnTheCpu) {
  fluxion::detail::EagerOff lazy;
  auto q = randn({1, 2, 4, 8}, 12);
  auto k = randn({1, 2, 4, 8}, 13);
  EXPECT_FALSE(fluxion::detail::in_grad_tracing());
  bool inside = false;
  size_t outputs = 0;
  auto f = [&](const std::vector<array>& x) {
    inside = fluxion::detail::in_grad_tracing();
    auto y = fx::scaled_dot_product_attention(x[0], x[1], x[1], 0.5f,
                                              "causal");
    outputs = y.siblings().size() + 1;
    return std::vector<array>{sum(y)};
  };
  vjp(f, {q, k}, {array(1.0)});
  EXPECT_TRUE(inside);
  EXPECT_FALSE(fluxion::detail::in_grad_tracing());
  // The CPU keeps the composed rule: no logsumexp output is made.
  EXPECT_EQ(outputs, 1u);
  EXPECT_FALSE(fx::ScaledDotProductAttentionVJP::use_fused(
      default_stream(Device::cpu), q, k, k, true, 0.5f));
}

TEST(FastSdpaVjp, RulesOfTheFusedBackward) {
  // The primitive's own derivatives (those of the composed backward) and
  // its vmap, against finite differences and the unbatched calls.
  auto q = randn({1, 2, 3, 4}, 14);
  auto k = randn({1, 1, 5, 4}, 15);
  auto v = randn({1, 1, 5, 4}, 16);
  auto d_o = randn({1, 2, 3, 4}, 17);
  auto fn = [](const std::vector<array>& x) {
    auto s = default_stream(Device::cpu);
    auto ol = fx::detail::sdpa_with_lse(x[0], x[1], x[2], 0.7f, true, s);
    return fx::detail::sdpa_vjp(x[0], x[1], x[2], ol[0], ol[1], x[3], 0.7f,
                                true, s);
  };
  check_grads(fn, {q, k, v, d_o}, 1e-6, 1e-6);
  check_vmap(fn, {randn({3, 1, 2, 3, 4}, 18), k, v, d_o}, {0, -1, -1, -1},
             0, 1e-12);
  check_vmap(fn, {q, randn({1, 1, 5, 2, 4}, 19), v, randn({1, 2, 3, 2, 4}, 20)},
             {-1, 3, -1, 3}, 0, 1e-12);
}
