// The fused mx.fast primitives against their composed forms and against
// naive double-precision loops written here: dtypes, strided and transposed
// inputs, edge sizes, gradients, and every error path.
#include <cmath>
#include <limits>
#include <random>

#include "fluxion/ops/fast.h"
#include "transform_checks.h"

using namespace fluxion;
using namespace fluxion::test;
namespace fx = fluxion::fast;

namespace {

array randn(const Shape& shape, unsigned seed, Dtype t = float32) {
  std::mt19937 gen(seed);
  return random_like(zeros(shape, t), gen);
}

void expect_allclose(const array& got, const array& want, double rtol,
                     double atol, const std::string& what = "") {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(got.dtype(), want.dtype()) << what;
  expect_close(got, to_vector<double>(want), rtol, atol, what);
}

double tol_of(Dtype t) {
  return t == float64   ? 1e-12
         : t == float32 ? 2e-5
         : t == float16 ? 4e-3
                        : 3e-2;
}

const std::vector<Dtype> kFloatTypes{float32, float16, bfloat16, float64};

// ------------------------------------------------------------- norms

std::vector<double> naive_norm(const std::vector<double>& x, int64_t D,
                               const std::vector<double>* w,
                               const std::vector<double>* b, double eps,
                               bool layer) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / D; ++r) {
    double mu = 0, ss = 0;
    for (int64_t i = 0; i < D; ++i) {
      mu += x[r * D + i];
    }
    mu = layer ? mu / D : 0.0;
    for (int64_t i = 0; i < D; ++i) {
      ss += (x[r * D + i] - mu) * (x[r * D + i] - mu);
    }
    double rstd = 1.0 / std::sqrt(ss / D + eps);
    for (int64_t i = 0; i < D; ++i) {
      double v = (x[r * D + i] - mu) * rstd;
      v = w ? v * (*w)[i] : v;
      y[r * D + i] = b ? v + (*b)[i] : v;
    }
  }
  return y;
}

TEST(FastNorm, LayerNormMatchesLoop) {
  auto x = randn({3, 4, 13}, 1, float64);
  auto w = randn({13}, 2, float64), b = randn({13}, 3, float64);
  auto xv = to_vector<double>(x), wv = to_vector<double>(w),
       bv = to_vector<double>(b);
  expect_close(fx::layer_norm(x, w, b, 1e-5f),
               naive_norm(xv, 13, &wv, &bv, 1e-5f, true), 1e-12, 1e-12);
  expect_close(fx::layer_norm(x, std::nullopt, std::nullopt, 1e-3f),
               naive_norm(xv, 13, nullptr, nullptr, 1e-3f, true), 1e-12, 1e-12);
  expect_close(fx::rms_norm(x, w, 1e-5f),
               naive_norm(xv, 13, &wv, nullptr, 1e-5f, false), 1e-12, 1e-12);
  expect_close(fx::rms_norm(x, std::nullopt, 1e-2f),
               naive_norm(xv, 13, nullptr, nullptr, 1e-2f, false), 1e-12,
               1e-12);
}

TEST(FastNorm, FusedMatchesComposedOverDtypesAndLayouts) {
  for (Dtype t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    for (int D : {1, 7, 64, 1000}) {
      auto x = randn({5, D}, 10 + D, t) * 3.0 + 1.0;
      auto w = randn({D}, 11, t), b = randn({D}, 12, t);
      double tol = tol_of(t);
      expect_allclose(fx::layer_norm(x, w, b, 1e-5f),
                      fx::layer_norm_composed(x, w, b, 1e-5f), tol, tol);
      expect_allclose(fx::layer_norm(x, std::nullopt, b, 1e-5f),
                      fx::layer_norm_composed(x, std::nullopt, b, 1e-5f), tol,
                      tol);
      expect_allclose(fx::rms_norm(x, w, 1e-6f),
                      fx::rms_norm_composed(x, w, 1e-6f), tol, tol);
      expect_allclose(fx::rms_norm(x, std::nullopt, 1e-6f),
                      fx::rms_norm_composed(x, std::nullopt, 1e-6f), tol, tol);
    }
    // Transposed input, a reversed weight, a broadcast (stride 0) bias.
    auto xt = transpose(randn({9, 2, 6}, 20, t), {2, 1, 0});
    auto w = slice(randn({9}, 21, t), {8}, {-10}, {-1});
    auto b = broadcast_to(array(0.5, t), {9});
    expect_allclose(fx::layer_norm(xt, w, b, 1e-5f),
                    fx::layer_norm_composed(xt, w, b, 1e-5f), tol_of(t),
                    tol_of(t));
    expect_allclose(fx::rms_norm(xt, w, 1e-5f),
                    fx::rms_norm_composed(xt, w, 1e-5f), tol_of(t), tol_of(t));
  }
}

TEST(FastNorm, DtypePromotionAndScalarRows) {
  auto x = randn({2, 3}, 30, float16);
  auto w = randn({3}, 31, float32);
  EXPECT_EQ(fx::layer_norm(x, w, std::nullopt, 1e-5f).dtype(), float32);
  EXPECT_EQ(fx::rms_norm(x, std::nullopt, 1e-5f).dtype(), float16);
  // A single feature: layer_norm gives the bias.
  auto one = fx::layer_norm(randn({4, 1}, 32), std::nullopt, array({2.0f}, {1}),
                            1e-5f);
  expect_close(one, {2, 2, 2, 2});
}

TEST(FastNorm, GradientsMatchComposed) {
  auto x = randn({3, 10}, 40), w = randn({10}, 41), b = randn({10}, 42);
  auto ct = randn({3, 10}, 43);
  auto check = [&](const Fn& f, const Fn& g, const std::vector<array>& in) {
    auto a = vjp(f, in, {ct}).second;
    auto r = vjp(g, in, {ct}).second;
    for (size_t i = 0; i < a.size(); ++i) {
      expect_allclose(a[i], r[i], 1e-4, 1e-5);
    }
  };
  check(
      [](const std::vector<array>& v) {
        return std::vector<array>{fx::layer_norm(v[0], v[1], v[2], 1e-5f)};
      },
      [](const std::vector<array>& v) {
        return std::vector<array>{
            fx::layer_norm_composed(v[0], v[1], v[2], 1e-5f)};
      },
      {x, w, b});
  check(
      [](const std::vector<array>& v) {
        return std::vector<array>{fx::rms_norm(v[0], v[1], 1e-5f)};
      },
      [](const std::vector<array>& v) {
        return std::vector<array>{fx::rms_norm_composed(v[0], v[1], 1e-5f)};
      },
      {x, w});
}

TEST(FastNorm, Errors) {
  auto x = randn({2, 4}, 50);
  expect_error<std::invalid_argument>(
      [&] { fx::layer_norm(array(1.0f), std::nullopt, std::nullopt, 1e-5f); },
      "[layer_norm] Input must have at least 1 dimension");
  expect_error<std::invalid_argument>(
      [&] {
        fx::layer_norm(x, randn({2, 4}, 1), std::nullopt, 1e-5f);
      },
      "[layer_norm] weight must have 1 dimension but has 2");
  expect_error<std::invalid_argument>(
      [&] { fx::layer_norm(x, std::nullopt, randn({3}, 1), 1e-5f); },
      "[layer_norm] bias must have the same size as the last dimension of x "
      "(4) but has 3");
  expect_error<std::invalid_argument>(
      [&] { fx::rms_norm(x, randn({5}, 1), 1e-5f); },
      "[rms_norm] weight must have the same size");
  expect_error<std::invalid_argument>(
      [&] {
        fx::rms_norm(array({1, 2}), std::nullopt, 1e-5f);
      },
      "[rms_norm] Received unsupported type int32");
  expect_error<std::invalid_argument>(
      [&] { fx::rms_norm(array(1.0f), std::nullopt, 1e-5f); },
      "[rms_norm] Input must have at least 1 dimension");
}

// ------------------------------------------------------------- rope

// x [N, L, D] (leading dims flattened), per-row-of-axis-0 offsets.
std::vector<double> naive_rope(const array& x, int dims, bool traditional,
                               double base, double scale,
                               const std::vector<int>& offsets,
                               const std::vector<double>* freqs, bool fwd) {
  auto v = to_vector<double>(x);
  int64_t D = x.shape(-1), L = x.shape(-2);
  int64_t rows0 = x.size() / x.shape(0) / (L * D);
  std::vector<double> y = v;
  int half = dims / 2;
  for (int64_t n = 0; n < x.size() / (L * D); ++n) {
    int off = offsets.size() == 1 ? offsets[0] : offsets[n / rows0];
    for (int64_t l = 0; l < L; ++l) {
      const double* xr = v.data() + (n * L + l) * D;
      double* yr = y.data() + (n * L + l) * D;
      for (int i = 0; i < half; ++i) {
        double inv =
            freqs ? 1.0 / (*freqs)[i] : std::pow(base, -2.0 * i / dims);
        double th = (off + l) * scale * inv * (fwd ? 1 : -1);
        int i1 = traditional ? 2 * i : i;
        int i2 = traditional ? 2 * i + 1 : i + half;
        yr[i1] = xr[i1] * std::cos(th) - xr[i2] * std::sin(th);
        yr[i2] = xr[i1] * std::sin(th) + xr[i2] * std::cos(th);
      }
    }
  }
  return y;
}

TEST(FastRope, MatchesLoop) {
  auto x = randn({2, 3, 5, 10}, 60, float64);
  for (bool trad : {false, true}) {
    for (int dims : {2, 6, 10}) {
      SCOPED_TRACE(std::to_string(dims) + (trad ? " traditional" : ""));
      expect_close(fx::rope(x, dims, trad, 10000.0f, 1.0f, 3),
                   naive_rope(x, dims, trad, 10000.0, 1.0, {3}, nullptr, true),
                   1e-9, 1e-9);
      expect_close(
          fx::rope(x, dims, trad, 500.0f, 0.25f, array({1, 9})),
          naive_rope(x, dims, trad, 500.0, 0.25, {1, 9}, nullptr, true), 1e-9,
          1e-9);
    }
  }
  auto f = array({0.5, 2.0, 4.0}, {3}, float64);
  std::vector<double> fv{0.5, 2.0, 4.0};
  expect_close(fx::rope(x, 6, false, std::nullopt, 2.0f, array(4), f),
               naive_rope(x, 6, false, 0, 2.0, {4}, &fv, true), 1e-9, 1e-9);
}

TEST(FastRope, FusedMatchesComposed) {
  for (Dtype t : kFloatTypes) {
    SCOPED_TRACE(dtype_name(t));
    // Strided: a transposed [B, L, H, D] -> [B, H, L, D] view.
    auto x = transpose(randn({2, 7, 3, 12}, 61, t), {0, 2, 1, 3});
    double tol = t == float64 ? 1e-12 : t == float32 ? 2e-5 : tol_of(t) * 4;
    for (bool trad : {false, true}) {
      expect_allclose(fx::rope(x, 8, trad, 10000.0f, 1.0f, 5),
                      fx::rope_composed(x, 8, trad, 10000.0f, 1.0f, array(5)),
                      tol, tol);
    }
    auto f = abs(randn({6}, 62, float32)) + 1.0f;
    expect_allclose(
        fx::rope(x, 12, false, std::nullopt, 0.5f, array({2, 100}), f),
        fx::rope_composed(x, 12, false, std::nullopt, 0.5f, array({2, 100}), f),
        tol, tol);
  }
  // Decoding: one position, large offset.
  auto x = randn({1, 8, 1, 64}, 63);
  expect_allclose(fx::rope(x, 64, false, 10000.0f, 1.0f, 4095),
                  fx::rope_composed(x, 64, false, 10000.0f, 1.0f, array(4095)),
                  1e-4, 1e-4);
}

TEST(FastRope, InverseAndGradients) {
  auto x = randn({2, 2, 4, 8}, 64);
  auto y = fx::rope(x, 8, true, 10000.0f, 1.0f, 2);
  // The vjp is the inverse rotation, so vjp(y) recovers x.
  auto f = [](const std::vector<array>& v) {
    return std::vector<array>{fx::rope(v[0], 8, true, 10000.0f, 1.0f, 2)};
  };
  auto back = vjp(f, {x}, {y}).second[0];
  expect_allclose(back, x, 1e-5, 1e-5);
  auto g = [](const std::vector<array>& v) {
    return std::vector<array>{
        fx::rope_composed(v[0], 6, false, std::nullopt, 1.0f, array(1), v[1])};
  };
  auto h = [](const std::vector<array>& v) {
    return std::vector<array>{
        fx::rope(v[0], 6, false, std::nullopt, 1.0f, 1, v[1])};
  };
  std::vector<array> in{x, abs(randn({3}, 65)) + 0.5f};
  auto ct = randn(x.shape(), 66);
  auto a = vjp(h, in, {ct}).second, r = vjp(g, in, {ct}).second;
  expect_allclose(a[0], r[0], 1e-4, 1e-5);
  expect_allclose(a[1], r[1], 1e-4, 1e-4);
}

TEST(FastRope, Errors) {
  auto x = randn({2, 3, 8}, 67);
  expect_error<std::invalid_argument>(
      [&] {
        fx::rope(randn({3, 8}, 1), 8, false, 1e4f, 1.0f, 0);
      },
      "[rope] Input must have at least 3 dimensions but got input with 2");
  expect_error<std::invalid_argument>(
      [&] { fx::rope(x, 5, false, 1e4f, 1.0f, 0); },
      "[rope] dims must be a positive even number at most the size of the "
      "last axis (8) but got 5");
  expect_error<std::invalid_argument>(
      [&] { fx::rope(x, 10, false, 1e4f, 1.0f, 0); }, "but got 10");
  expect_error<std::invalid_argument>(
      [&] { fx::rope(x, 8, false, std::nullopt, 1.0f, 0); },
      "[rope] Neither base nor freqs");
  expect_error<std::invalid_argument>(
      [&] { fx::rope(x, 8, false, 1e4f, 1.0f, 0, randn({4}, 1)); },
      "[rope] Only one of base or freqs");
  expect_error<std::invalid_argument>(
      [&] { fx::rope(x, 8, false, std::nullopt, 1.0f, 0, randn({3}, 1)); },
      "[rope] freqs must be one dimensional with size 4");
  expect_error<std::invalid_argument>(
      [&] { fx::rope(x, 8, false, 1e4f, 1.0f, array(1.5f)); },
      "[rope] offset must be an integer but got float32");
  expect_error<std::invalid_argument>(
      [&] {
        fx::rope(x, 8, false, 1e4f, 1.0f, array({1, 2, 3}));
      },
      "[rope] offset must be a scalar or a vector with x.shape(0) = 2");
  expect_error<std::invalid_argument>(
      [&] {
        fx::rope(array({1, 2}, {1, 1, 2}), 2, false, 1e4f, 1.0f, 0);
      },
      "[rope] Input must be a floating type but got int32");
}

// ------------------------------------------------------------- sdpa

// softmax(scale q k^T + mask) v per (b, h), in double. mask(b, h, i, j)
// returns nan for "drop", else the additive value.
template <typename MaskFn>
std::vector<double> naive_sdpa(const array& q, const array& k, const array& v,
                               double scale, MaskFn mask) {
  auto qv = to_vector<double>(q), kv = to_vector<double>(k),
       vv = to_vector<double>(v);
  int B = q.shape(0), Hq = q.shape(1), Lq = q.shape(2), D = q.shape(3);
  int Hk = k.shape(1), Lk = k.shape(2), Dv = v.shape(3);
  std::vector<double> out(static_cast<size_t>(B) * Hq * Lq * Dv);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < Hq; ++h) {
      int hk = h / (Hq / Hk);
      for (int i = 0; i < Lq; ++i) {
        std::vector<double> s(Lk);
        double mx = -INFINITY;
        for (int j = 0; j < Lk; ++j) {
          double m = mask(b, h, i, j);
          double acc = 0;
          for (int d = 0; d < D; ++d) {
            acc += qv[((b * Hq + h) * Lq + i) * D + d] *
                   kv[((b * Hk + hk) * Lk + j) * D + d];
          }
          s[j] = std::isnan(m) ? -INFINITY : acc * scale + m;
          mx = std::max(mx, s[j]);
        }
        double tot = 0;
        for (auto& e : s) {
          e = std::exp(e - mx);
          tot += e;
        }
        for (int d = 0; d < Dv; ++d) {
          double acc = 0;
          for (int j = 0; j < Lk; ++j) {
            acc += s[j] / tot * vv[((b * Hk + hk) * Lk + j) * Dv + d];
          }
          out[((b * Hq + h) * Lq + i) * Dv + d] = acc;
        }
      }
    }
  }
  return out;
}

TEST(FastSdpa, MatchesLoop) {
  auto q = randn({2, 4, 5, 3}, 70, float64);
  auto k = randn({2, 2, 7, 3}, 71, float64);
  auto v = randn({2, 2, 7, 4}, 72, float64);
  auto none = [](int, int, int, int) { return 0.0; };
  expect_close(fx::scaled_dot_product_attention(q, k, v, 0.6f),
               naive_sdpa(q, k, v, 0.6f, none), 1e-10, 1e-10);
  auto causal = [](int, int, int i, int j) { return j <= i + 2 ? 0.0 : NAN; };
  expect_close(fx::scaled_dot_product_attention(q, k, v, 0.6f, "causal"),
               naive_sdpa(q, k, v, 0.6f, causal), 1e-10, 1e-10);
  // A bool mask over keys only ([Lk] broadcast), an additive [Lq, Lk] one.
  auto keep = array({true, false, true, true, false, true, true}, {7});
  auto bm = [](int, int, int, int j) { return (j == 1 || j == 4) ? NAN : 0.0; };
  expect_close(fx::scaled_dot_product_attention(q, k, v, 0.6f, "", keep),
               naive_sdpa(q, k, v, 0.6f, bm), 1e-10, 1e-10);
  auto add = randn({5, 7}, 73, float64);
  auto av = to_vector<double>(add);
  auto am = [&](int, int, int i, int j) { return av[i * 7 + j]; };
  expect_close(fx::scaled_dot_product_attention(q, k, v, 0.6f, "array", add),
               naive_sdpa(q, k, v, 0.6f, am), 1e-10, 1e-10);
}

TEST(FastSdpa, FusedMatchesComposed) {
  struct Case {
    int B, Hq, Hk, Lq, Lk, D, Dv;
  };
  // Covers the three schedules: Lq <= 4 (decoding), small products, and
  // large ones (chunks of queries; the last case has several chunks).
  std::vector<Case> cases{
      {1, 2, 2, 8, 8, 8, 8},     {2, 4, 1, 3, 9, 13, 5},
      {1, 8, 2, 1, 70, 16, 16},  {1, 2, 2, 70, 45, 7, 7},
      {2, 3, 3, 33, 33, 64, 32}, {1, 2, 1, 300, 200, 48, 40}};
  for (Dtype t : kFloatTypes) {
    for (auto& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " Lq=" + std::to_string(c.Lq) +
                   " Lk=" + std::to_string(c.Lk));
      auto q = randn({c.B, c.Hq, c.Lq, c.D}, 80, t);
      auto k = randn({c.B, c.Hk, c.Lk, c.D}, 81, t);
      auto v = randn({c.B, c.Hk, c.Lk, c.Dv}, 82, t);
      float sc = 1.0f / std::sqrt(static_cast<float>(c.D));
      double tol = t == float64 ? 1e-10 : t == float32 ? 1e-5 : tol_of(t);
      auto run = [&](const std::string& mode, std::optional<array> m) {
        expect_allclose(
            fx::scaled_dot_product_attention(q, k, v, sc, mode, m),
            fx::scaled_dot_product_attention_composed(q, k, v, sc, mode, m),
            tol, tol, mode);
      };
      run("", std::nullopt);
      run("causal", std::nullopt);  // Lq > Lk: the first rows are nan
      run("",
          greater(randn({c.Lq, c.Lk}, 83), array(-1.0f)) | (arange(c.Lk) == 0));
      run("", randn({c.B, 1, c.Lq, c.Lk}, 84, t));
      // A lower-precision mask promotes to the output dtype.
      run("", randn({c.Lk}, 85, t == bfloat16 ? bfloat16 : float16));
    }
  }
}

TEST(FastSdpa, StridedAndBroadcastInputs) {
  // [B, L, H, D] tensors transposed to [B, H, L, D]; a broadcast key batch;
  // a non-unit feature stride (reversed features).
  auto q = transpose(randn({2, 6, 4, 8}, 90), {0, 2, 1, 3});
  auto k = broadcast_to(randn({1, 2, 5, 8}, 91), {2, 2, 5, 8});
  auto v = slice(randn({2, 2, 5, 8}, 92), {0, 0, 0, 7}, {2, 2, 5, -9},
                 {1, 1, 1, -1});
  for (std::string mode : {"", "causal"}) {
    expect_allclose(
        fx::scaled_dot_product_attention(q, k, v, 0.3f, mode),
        fx::scaled_dot_product_attention_composed(q, k, v, 0.3f, mode), 1e-5,
        1e-6, mode);
  }
}

TEST(FastSdpa, RowsWithoutKeysAttendUniformly) {
  // Causal with Lq > Lk: the first Lq - Lk queries see nothing. As MLX
  // (hidden scores are the lowest finite value) they average every value.
  auto q = randn({1, 1, 4, 2}, 93), k = randn({1, 1, 2, 2}, 94);
  auto y = fx::scaled_dot_product_attention(q, k, k, 1.0f, "causal");
  auto r = fx::scaled_dot_product_attention_composed(q, k, k, 1.0f, "causal");
  auto kv = to_vector<double>(k);
  auto yv = to_vector<double>(y);
  for (int i = 0; i < 2; ++i) {
    for (int d = 0; d < 2; ++d) {
      EXPECT_NEAR(yv[i * 2 + d], (kv[d] + kv[2 + d]) / 2, 1e-6);
    }
  }
  expect_allclose(y, r, 1e-5, 1e-6);
  // A boolean mask that hides a whole row: the same, in both forms; with
  // a sink the row's weights all go to the sink (zero output).
  auto q2 = randn({1, 2, 3, 2}, 95), k2 = randn({1, 2, 5, 2}, 96);
  auto hide = array({true, false, true}, {1, 1, 3, 1});  // row 1 hidden
  auto y2 = fx::scaled_dot_product_attention(q2, k2, k2, 0.7f, "", hide);
  auto r2 =
      fx::scaled_dot_product_attention_composed(q2, k2, k2, 0.7f, "", hide);
  expect_allclose(y2, r2, 1e-5, 1e-6);
  auto row1 = to_vector<double>(slice(y2, {0, 0, 1, 0}, {1, 1, 2, 2}));
  auto kv2 = to_vector<double>(mean(slice(k2, {0, 0, 0, 0}, {1, 1, 5, 2}), 2));
  EXPECT_NEAR(row1[0], kv2[0], 1e-6);
  EXPECT_NEAR(row1[1], kv2[1], 1e-6);
  auto sinks = array({1.0f, -2.0f});
  auto y3 = fx::scaled_dot_product_attention(q2, k2, k2, 0.7f, "", hide, sinks);
  auto r3 = fx::scaled_dot_product_attention_composed(q2, k2, k2, 0.7f, "",
                                                      hide, sinks);
  expect_allclose(y3, r3, 1e-5, 1e-6);
  expect_close(slice(y3, {0, 0, 1, 0}, {1, 2, 2, 2}), {0, 0, 0, 0}, 1e-6,
               1e-6);
  // No keys at all: zeros, as the composed form.
  auto e = fx::scaled_dot_product_attention(q, zeros({1, 1, 0, 2}),
                                            zeros({1, 1, 0, 3}), 1.0f);
  expect_close(e, std::vector<double>(12, 0.0));
}

TEST(FastSdpa, GradientsMatchComposed) {
  auto q = randn({1, 4, 5, 6}, 100), k = randn({1, 2, 7, 6}, 101),
       v = randn({1, 2, 7, 3}, 102), m = randn({1, 4, 5, 7}, 103),
       sk = randn({4}, 105);
  auto ct = randn({1, 4, 5, 3}, 104);
  for (bool sinks : {false, true}) {
    for (std::string mode : {"", "causal", "array"}) {
      SCOPED_TRACE(mode + (sinks ? " with sinks" : ""));
      auto make = [mode, sinks](bool fused) {
        return [mode, fused, sinks](const std::vector<array>& x) {
          std::optional<array> mask, sink;
          if (mode == "array") {
            mask = x[3];
          }
          if (sinks) {
            sink = x[4];
          }
          auto f = fused ? fx::scaled_dot_product_attention
                         : fx::scaled_dot_product_attention_composed;
          return std::vector<array>{
              f(x[0], x[1], x[2], 0.4f, mode, mask, sink, {})};
        };
      };
      std::vector<array> in{q, k, v, m, sk};
      auto a = vjp(make(true), in, {ct}).second;
      auto r = vjp(make(false), in, {ct}).second;
      for (size_t i = 0; i < a.size(); ++i) {
        expect_allclose(a[i], r[i], 1e-4, 1e-5, std::to_string(i));
      }
      std::vector<array> tan{randn(q.shape(), 1), randn(k.shape(), 2),
                             randn(v.shape(), 3), randn(m.shape(), 4),
                             randn(sk.shape(), 5)};
      auto ja = jvp(make(true), in, tan).second[0];
      auto jr = jvp(make(false), in, tan).second[0];
      expect_allclose(ja, jr, 1e-4, 1e-5, "jvp");
    }
  }
}

TEST(FastSdpa, Errors) {
  auto q = randn({1, 4, 3, 8}, 1), k = randn({1, 2, 5, 8}, 2);
  auto sdpa = [](const array& a, const array& b, const array& c,
                 const std::string& mode = "",
                 std::optional<array> m = std::nullopt) {
    return fx::scaled_dot_product_attention(a, b, c, 1.0f, mode, m);
  };
  const std::string tag = "[scaled_dot_product_attention] ";
  expect_error<std::invalid_argument>(
      [&] {
        sdpa(randn({4, 3, 8}, 1), k, k);
      },
      tag + "queries, keys and values must have 4 dimensions");
  expect_error<std::invalid_argument>(
      [&] {
        sdpa(randn({1, 3, 3, 8}, 1), k, k);
      },
      tag +
          "The number of query heads (3) must be a multiple of the number "
          "of key/value heads (2)");
  expect_error<std::invalid_argument>(
      [&] {
        sdpa(q, k, randn({1, 1, 5, 8}, 3));
      },
      tag + "keys (1,2,5,8) and values (1,1,5,8)");
  expect_error<std::invalid_argument>(
      [&] {
        sdpa(q, randn({1, 2, 5, 7}, 2), k);
      },
      tag + "queries and keys must have the same feature size but got 8 and 7");
  expect_error<std::invalid_argument>(
      [&] {
        sdpa(q, randn({2, 2, 5, 8}, 2), randn({2, 2, 5, 8}, 2));
      },
      tag + "queries, keys and values must have the same batch size");
  expect_error<std::invalid_argument>(
      [&] {
        sdpa(q, k, k, "", randn({3, 4}, 4));
      },
      tag +
          "The mask with shape (3,4) cannot be broadcast to the scores' "
          "shape (1,4,3,5)");
  expect_error<std::invalid_argument>(
      [&] { sdpa(q, k, k, "", astype(randn({5}, 4), complex64)); },
      tag + "The mask dtype complex64 must be bool or promote");
  expect_error<std::invalid_argument>(
      [&] { sdpa(q, k, k, "", randn({5}, 4, float64)); },
      tag + "The mask dtype float64");
  expect_error<std::invalid_argument>([&] { sdpa(q, k, k, "sliding"); },
                                      tag + "Invalid mask \"sliding\"");
  expect_error<std::invalid_argument>(
      [&] { sdpa(q, k, k, "causal", randn({5}, 4)); },
      tag + "A mask array cannot be combined");
  expect_error<std::invalid_argument>([&] { sdpa(q, k, k, "array"); },
                                      tag + "The \"array\" mask mode");
  expect_error<std::invalid_argument>(
      [&] {
        sdpa(array({1, 2}, {1, 1, 1, 2}), array({1, 2}, {1, 1, 1, 2}),
             array({1, 2}, {1, 1, 1, 2}));
      },
      tag + "Received unsupported type int32");
}

}  // namespace

namespace {

TEST(FastPrimitives, EquivalenceAndOutputShapes) {
  auto x = randn({2, 3, 4, 8}, 110);
  auto prim = [](const array& a) -> const Primitive& { return a.primitive(); };
  auto l1 = fx::layer_norm(x, std::nullopt, std::nullopt, 1e-5f);
  auto l2 = fx::layer_norm(x * 2.0f, std::nullopt, std::nullopt, 1e-5f);
  auto l3 = fx::layer_norm(x, std::nullopt, std::nullopt, 1e-4f);
  EXPECT_TRUE(prim(l1).is_equivalent(prim(l2)));
  EXPECT_FALSE(prim(l1).is_equivalent(prim(l3)));
  auto r1 = fx::rms_norm(x, std::nullopt, 1e-5f);
  EXPECT_FALSE(prim(r1).is_equivalent(prim(l1)));
  EXPECT_FALSE(prim(r1).is_equivalent(prim(fx::rms_norm(x, ones({8}), 1e-5f))));
  auto p1 = fx::rope(x, 8, false, 1e4f, 1.0f, 0);
  EXPECT_TRUE(
      prim(p1).is_equivalent(prim(fx::rope(x, 8, false, 1e4f, 1.0f, 3))));
  EXPECT_FALSE(
      prim(p1).is_equivalent(prim(fx::rope(x, 8, true, 1e4f, 1.0f, 0))));
  EXPECT_FALSE(
      prim(p1).is_equivalent(prim(fx::rope(x, 6, false, 1e4f, 1.0f, 0))));
  EXPECT_FALSE(
      prim(p1).is_equivalent(prim(fx::rope(x, 8, false, 1e3f, 1.0f, 0))));
  auto k = randn({2, 3, 5, 8}, 111);
  auto a1 = fx::scaled_dot_product_attention(x, k, k, 0.5f);
  auto a2 = fx::scaled_dot_product_attention(x, k, k, 0.5f, "causal");
  auto a3 = fx::scaled_dot_product_attention(x, k, k, 0.25f);
  EXPECT_TRUE(prim(a1).is_equivalent(
      prim(fx::scaled_dot_product_attention(k, k, k, 0.5f))));
  EXPECT_FALSE(prim(a1).is_equivalent(prim(a2)));
  EXPECT_FALSE(prim(a1).is_equivalent(prim(a3)));
  auto v = randn({2, 3, 5, 6}, 112);
  auto a4 = fx::scaled_dot_product_attention(x, k, v, 0.5f);
  EXPECT_EQ(a4.shape(), (Shape{2, 3, 4, 6}));
  EXPECT_EQ(a4.primitive().output_shapes(a4.inputs()),
            std::vector<Shape>{a4.shape()});
}

}  // namespace
