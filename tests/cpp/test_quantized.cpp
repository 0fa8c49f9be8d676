// quantize / dequantize / quantized_matmul against a reference written here
// with plain loops (MLX's affine scheme, see quantized.h), a hand-computed
// group, error bounds, dense products, layouts, dtypes and error paths.
#include <cmath>
#include <random>
#include <tuple>

#include "fluxion/ops/quantized.h"
#include "transform_checks.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

array randn(const Shape& shape, unsigned seed, Dtype t = float32,
            double shift = 0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(shift, 1.0);
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) {
    x = d(gen);
  }
  return astype(array(v.begin(), shape), t);
}

struct Ref {
  std::vector<uint32_t> wq;
  std::vector<float> scales, biases;
};

// The scheme in float32, one group at a time.
Ref ref_quantize(const std::vector<float>& w, int rows, int K, int gs,
                 int bits) {
  Ref r;
  float n_bins = static_cast<float>((1 << bits) - 1);
  int el = 32 / bits;
  for (int i = 0; i < rows; ++i) {
    std::vector<uint32_t> q(K);
    for (int g = 0; g < K / gs; ++g) {
      const float* p = &w[int64_t{i} * K + g * gs];
      float lo = *std::min_element(p, p + gs),
            hi = *std::max_element(p, p + gs);
      bool neg = std::abs(lo) > std::abs(hi);
      float scale = std::max((hi - lo) / n_bins, 1e-7f);
      scale = neg ? scale : -scale;
      float edge = neg ? lo : hi;
      float q0 = std::nearbyint(edge / scale);
      float bias = 0;
      if (q0 != 0) {
        scale = edge / q0;
        bias = edge;
      }
      for (int j = 0; j < gs; ++j) {
        float v = std::nearbyint((p[j] - bias) / scale);
        q[g * gs + j] = static_cast<uint32_t>(std::clamp(v, 0.f, n_bins));
      }
      r.scales.push_back(scale);
      r.biases.push_back(bias);
    }
    for (int k = 0; k < K; k += el) {
      uint32_t word = 0;
      for (int j = 0; j < el; ++j) {
        word |= q[k + j] << (j * bits);
      }
      r.wq.push_back(word);
    }
  }
  return r;
}

// Dense W (rows x K) from the packed form, in double.
std::vector<double> ref_dequantize(const array& wq, const array& s,
                                   const array& b, int gs, int bits) {
  auto w = to_vector<uint32_t>(wq);
  auto sv = to_vector<double>(s);
  auto bv = to_vector<double>(b);
  int el = 32 / bits;
  std::vector<double> out;
  for (size_t i = 0; i < w.size(); ++i) {
    for (int j = 0; j < el; ++j) {
      int64_t k = static_cast<int64_t>(i) * el + j;
      double q = (w[i] >> (j * bits)) & ((1u << bits) - 1);
      out.push_back(sv[k / gs] * q + bv[k / gs]);
    }
  }
  return out;
}

const int kBits[] = {2, 4, 8};
const int kGroups[] = {32, 64, 128};

}  // namespace

TEST(Quantized, QuantizeMatchesReference) {
  for (int bits : kBits) {
    for (int gs : kGroups) {
      SCOPED_TRACE(std::to_string(bits) + " bits, group " + std::to_string(gs));
      // Rows dominated by positive and by negative values.
      auto w = concatenate({randn({3, 256}, bits * gs, float32, 0.7),
                            randn({3, 256}, bits * gs + 1, float32, -0.7)},
                           0);
      auto wq_scales_biases_ = quantize(w, gs, bits);
      [[maybe_unused]] auto& wq = std::get<0>(wq_scales_biases_);
      [[maybe_unused]] auto& scales = std::get<1>(wq_scales_biases_);
      [[maybe_unused]] auto& biases = std::get<2>(wq_scales_biases_);
      EXPECT_EQ(wq.dtype(), uint32);
      EXPECT_EQ(wq.shape(), (Shape{6, 256 * bits / 32}));
      EXPECT_EQ(scales.shape(), (Shape{6, 256 / gs}));
      EXPECT_EQ(biases.dtype(), float32);
      auto ref = ref_quantize(to_vector<float>(w), 6, 256, gs, bits);
      EXPECT_EQ(to_vector<uint32_t>(wq), ref.wq);
      EXPECT_EQ(to_vector<float>(scales), ref.scales);
      EXPECT_EQ(to_vector<float>(biases), ref.biases);
    }
  }
}

TEST(Quantized, HandComputedGroup) {
  // One group 0, 1, ..., 31 (4 bits): |max| wins, scale = 31 / -15,
  // bias = 31, q_i = round((31 - i) * 15 / 31): q_0 = 15, q_31 = 0.
  auto w = reshape(arange(0, 32, float32), {1, 32});
  auto wq_scales_biases_ = quantize(w, 32, 4);
  [[maybe_unused]] auto& wq = std::get<0>(wq_scales_biases_);
  [[maybe_unused]] auto& scales = std::get<1>(wq_scales_biases_);
  [[maybe_unused]] auto& biases = std::get<2>(wq_scales_biases_);
  EXPECT_FLOAT_EQ(scales.item<float>(), 31.0f / -15.0f);
  EXPECT_EQ(biases.item<float>(), 31.0f);
  auto words = to_vector<uint32_t>(wq);
  ASSERT_EQ(words.size(), 4u);
  EXPECT_EQ(words[0] & 0xf, 15u);         // first value, lowest bits
  EXPECT_EQ((words[0] >> 4) & 0xf, 15u);  // round(30 * 15 / 31) = 15
  EXPECT_EQ((words[0] >> 8) & 0xf, 14u);  // round(29 * 15 / 31) = 14
  EXPECT_EQ(words[3] >> 28, 0u);          // the last value, 31
  // A zero group: scale 1e-7, q0 = 0, bias 0, q = 0.
  auto zq_zs_zb_ = quantize(zeros({2, 64}), 64, 8);
  [[maybe_unused]] auto& zq = std::get<0>(zq_zs_zb_);
  [[maybe_unused]] auto& zs = std::get<1>(zq_zs_zb_);
  [[maybe_unused]] auto& zb = std::get<2>(zq_zs_zb_);
  expect_close(zs, {-1e-7, -1e-7}, 1e-6, 0);
  expect_close(zb, {0, 0});
  expect_close(zq, std::vector<double>(32, 0));
}

TEST(Quantized, DequantizeErrorBound) {
  for (Dtype t : {float32, float16, bfloat16, float64}) {
    for (int bits : kBits) {
      for (int gs : kGroups) {
        auto w = randn({4, 384}, 7 + bits + gs, t);
        auto wq_scales_biases_ = quantize(w, gs, bits);
        [[maybe_unused]] auto& wq = std::get<0>(wq_scales_biases_);
        [[maybe_unused]] auto& scales = std::get<1>(wq_scales_biases_);
        [[maybe_unused]] auto& biases = std::get<2>(wq_scales_biases_);
        EXPECT_EQ(scales.dtype(), t);
        auto d = dequantize(wq, scales, biases, gs, bits);
        EXPECT_EQ(d.dtype(), t);
        EXPECT_EQ(d.shape(), w.shape());
        // Against a reference dequantization of the same packed values.
        expect_close(d, ref_dequantize(wq, scales, biases, gs, bits),
                     t == float32 || t == float64 ? 1e-6 : 1e-2, 1e-5);
        // Values inside the range the group can represent, between bias
        // and bias + n_bins * scale, are within |scale| / 2; the far edge
        // may fall outside it (scale = edge / q0 shrinks it) and is then
        // clipped, within |scale| (MLX's own test bound).
        auto wv = to_vector<double>(w), dv = to_vector<double>(d),
             sv = to_vector<double>(scales), bv = to_vector<double>(biases);
        // Half types store scales and biases rounded (q was computed with
        // the float32 scale): allow that rounding times q, and the output's.
        bool half = t == float16 || t == bfloat16;
        double eps = t == bfloat16  ? 1.0 / 256
                     : t == float16 ? 1.0 / 2048
                                    : 1e-6;
        double n_bins = (1 << bits) - 1;
        for (size_t i = 0; i < wv.size(); ++i) {
          double s = std::abs(sv[i / gs]), lo = bv[i / gs],
                 hi = bv[i / gs] + n_bins * sv[i / gs];
          bool inside = wv[i] >= std::min(lo, hi) && wv[i] <= std::max(lo, hi);
          double bound = inside ? s / 2 : s;
          double slack = half ? eps * (n_bins * s + 2 * std::abs(bv[i / gs]) +
                                       std::abs(wv[i]))
                              : 1e-5 * (s + 1e-3);
          ASSERT_LE(std::abs(wv[i] - dv[i]), bound + slack)
              << t << " bits " << bits << " gs " << gs << " at " << i;
        }
      }
    }
  }
}

TEST(Quantized, QuantizedMatmulMatchesDense) {
  for (int bits : kBits) {
    for (int gs : kGroups) {
      for (int M : {1, 3, 7, 33}) {
        SCOPED_TRACE(std::to_string(bits) + "/" + std::to_string(gs) + "/" +
                     std::to_string(M));
        auto w = randn({72, 256}, bits + gs + M);
        auto wq_s_b_ = quantize(w, gs, bits);
        [[maybe_unused]] auto& wq = std::get<0>(wq_s_b_);
        [[maybe_unused]] auto& s = std::get<1>(wq_s_b_);
        [[maybe_unused]] auto& b = std::get<2>(wq_s_b_);
        auto x = randn({M, 256}, M);
        auto wd = dequantize(wq, s, b, gs, bits);
        auto y = quantized_matmul(x, wq, s, b, true, gs, bits);
        EXPECT_EQ(y.shape(), (Shape{M, 72}));
        expect_close(y, to_vector<double>(matmul(x, transpose(wd))), 1e-4,
                     1e-3);
        // transpose=false: W (K=72 rows) x N=256 columns.
        auto x2 = randn({M, 72}, M + 1);
        auto y2 = quantized_matmul(x2, wq, s, b, false, gs, bits);
        EXPECT_EQ(y2.shape(), (Shape{M, 256}));
        expect_close(y2, to_vector<double>(matmul(x2, wd)), 1e-4, 1e-3);
      }
    }
  }
}

TEST(Quantized, LayoutsBatchesAndDtypes) {
  auto w = randn({40, 128}, 3);
  auto wq_s_b_ = quantize(w, 64, 4);
  [[maybe_unused]] auto& wq = std::get<0>(wq_s_b_);
  [[maybe_unused]] auto& s = std::get<1>(wq_s_b_);
  [[maybe_unused]] auto& b = std::get<2>(wq_s_b_);
  auto wd = dequantize(wq, s, b, 64, 4);
  // Batched and transposed x, a 1-D x, broadcast x.
  auto xt = transpose(randn({128, 3, 2}, 4), {2, 1, 0});  // (2, 3, 128)
  expect_close(quantized_matmul(xt, wq, s, b),
               to_vector<double>(matmul(xt, transpose(wd))), 1e-4, 1e-3);
  auto v = randn({128}, 5);
  auto yv = quantized_matmul(v, wq, s, b);
  EXPECT_EQ(yv.shape(), (Shape{40}));
  expect_close(yv, to_vector<double>(matmul(v, transpose(wd))), 1e-4, 1e-3);
  auto xb = broadcast_to(randn({1, 128}, 6), {5, 128});
  expect_close(quantized_matmul(xb, wq, s, b),
               to_vector<double>(matmul(xb, transpose(wd))), 1e-4, 1e-3);
  // Half types compute in float32; the output has their dtype.
  for (Dtype t : {float16, bfloat16, float64}) {
    auto hq_hs_hb_ = quantize(astype(w, t), 64, 4);
    [[maybe_unused]] auto& hq = std::get<0>(hq_hs_hb_);
    [[maybe_unused]] auto& hs = std::get<1>(hq_hs_hb_);
    [[maybe_unused]] auto& hb = std::get<2>(hq_hs_hb_);
    auto wd64 = ref_dequantize(hq, hs, hb, 64, 4);
    for (int m : {3, 24}) {  // the row-by-row and the BLAS path
      auto x = astype(randn({m, 128}, 7), t);
      auto y = quantized_matmul(x, hq, hs, hb);
      EXPECT_EQ(y.dtype(), t);
      auto ref = matmul(astype(x, float64),
                        transpose(array(wd64.begin(), {40, 128}, float64)));
      expect_close(y, to_vector<double>(ref), t == float64 ? 1e-12 : 1e-2,
                   t == float64 ? 1e-12 : 1e-2);
      auto x2 = astype(randn({m, 40}, 8), t);
      auto ref2 =
          matmul(astype(x2, float64), array(wd64.begin(), {40, 128}, float64));
      expect_close(quantized_matmul(x2, hq, hs, hb, false),
                   to_vector<double>(ref2), t == float64 ? 1e-12 : 1e-2,
                   t == float64 ? 1e-12 : 1e-2);
    }
  }
  // float32 x with float16 scales promotes to float32.
  auto hq_hs_hb_ = quantize(astype(w, float16), 64, 4);
  [[maybe_unused]] auto& hq = std::get<0>(hq_hs_hb_);
  [[maybe_unused]] auto& hs = std::get<1>(hq_hs_hb_);
  [[maybe_unused]] auto& hb = std::get<2>(hq_hs_hb_);
  EXPECT_EQ(quantized_matmul(randn({2, 128}, 8), hq, hs, hb).dtype(), float32);
  // Zero rows of x.
  EXPECT_EQ(quantized_matmul(zeros({0, 128}), wq, s, b).shape(),
            (Shape{0, 40}));
}

TEST(Quantized, Transformations) {
  auto wq_s_b_ = quantize(randn({16, 64}, 9), 32, 4);
  [[maybe_unused]] auto& wq = std::get<0>(wq_s_b_);
  [[maybe_unused]] auto& s = std::get<1>(wq_s_b_);
  [[maybe_unused]] auto& b = std::get<2>(wq_s_b_);
  auto wd = dequantize(wq, s, b, 32, 4);
  auto x = randn({3, 64}, 10);
  // Gradient wrt x: g @ W.
  UnaryFn f = [&](const array& a) {
    return sum(quantized_matmul(a, wq, s, b, true, 32, 4));
  };
  expect_close(grad(f)(x), to_vector<double>(matmul(ones({3, 16}), wd)), 1e-4,
               1e-4);
  // vmap over x against the unbatched product.
  UnaryFn g = [&](const array& a) {
    return quantized_matmul(a, wq, s, b, true, 32, 4);
  };
  auto xs = randn({4, 64, 3}, 11);
  auto out = vmap(g, 2, 0)(xs);
  EXPECT_EQ(out.shape(), (Shape{3, 4, 16}));
  expect_close(
      out, to_vector<double>(matmul(transpose(xs, {2, 0, 1}), transpose(wd))),
      1e-4, 1e-3);
  // Scales and biases: reverse and forward mode against finite
  // differences (float64, with x), and against P = G^T x summed by group.
  auto wq64_s64_b64_ = quantize(randn({6, 64}, 12, float64), 32, 2);
  [[maybe_unused]] auto& wq64 = std::get<0>(wq64_s64_b64_);
  [[maybe_unused]] auto& s64 = std::get<1>(wq64_s64_b64_);
  [[maybe_unused]] auto& b64 = std::get<2>(wq64_s64_b64_);
  {
    Fn qf = [&](const std::vector<array>& in) {
      return std::vector<array>{
          quantized_matmul(in[0], wq64, in[1], in[2], true, 32, 2)};
    };
    check_grads(qf, {randn({2, 3, 64}, 13, float64), s64, b64}, 1e-6, 1e-6,
                {0, 1, 2});
  }
  {
    auto wn_sn_bn_ = quantize(randn({5, 64}, 14, float64), 32, 8);
    [[maybe_unused]] auto& wn = std::get<0>(wn_sn_bn_);
    [[maybe_unused]] auto& sn = std::get<1>(wn_sn_bn_);
    [[maybe_unused]] auto& bn = std::get<2>(wn_sn_bn_);
    Fn qf = [&](const std::vector<array>& in) {
      return std::vector<array>{
          quantized_matmul(in[0], wn, in[1], in[2], false, 32, 8)};
    };
    check_grads(qf, {randn({3, 5}, 15, float64), sn, bn}, 1e-6, 1e-6,
                {0, 1, 2});
  }
  Fn h = [&](const std::vector<array>& in) {
    return std::vector<array>{
        sum(quantized_matmul(x, wq, in[0], in[1], true, 32, 4))};
  };
  auto outs_grads_ = vjp(h, {s, b}, {array(1.0f)});
  [[maybe_unused]] auto& outs = std::get<0>(outs_grads_);
  [[maybe_unused]] auto& grads = std::get<1>(outs_grads_);
  // d/db[n, g] = sum over the group of sum_m x[m, k]; d/ds adds q.
  auto xg = sum(reshape(x, {3, 2, 32}), {0, 2});  // per group
  auto q =
      reshape(dequantize(wq, ones_like(s), zeros_like(b), 32, 4), {16, 2, 32});
  expect_close(grads[1], to_vector<double>(broadcast_to(xg, {16, 2})), 1e-5,
               1e-4);
  expect_close(grads[0],
               to_vector<double>(sum(q * reshape(sum(x, 0), {1, 2, 32}), -1)),
               1e-5, 1e-4);
  // Not with respect to the packed integers.
  Fn hw = [&](const std::vector<array>& in) {
    return std::vector<array>{
        sum(quantized_matmul(x, in[0], s, b, true, 32, 4))};
  };
  expect_error<std::invalid_argument>([&] { vjp(hw, {wq}, {array(1.0f)}); },
                                      "[quantized_matmul]");
  expect_error<std::invalid_argument>([&] { jvp(hw, {wq}, {wq}); },
                                      "[quantized_matmul]");
  // vmap over biases: one dense matrix per batch element.
  Fn vb = [&](const std::vector<array>& in) {
    return std::vector<array>{quantized_matmul(x, wq, s, in[0], true, 32, 4)};
  };
  auto b2 = stack({b, b + 1.0f});
  auto vout = vmap(vb)({b2})[0];
  EXPECT_EQ(vout.shape(), (Shape{2, 3, 16}));
  expect_close(
      take(vout, 1, 0),
      to_vector<double>(quantized_matmul(x, wq, s, b + 1.0f, true, 32, 4)),
      1e-4, 1e-3);
  Fn vw = [&](const std::vector<array>& in) {
    return std::vector<array>{quantized_matmul(x, in[0], s, b, true, 32, 4)};
  };
  expect_error<std::invalid_argument>(
      [&] {
        vmap(vw)({stack({wq, wq})});
      },
      "[quantized_matmul] vmap over the "
      "quantized matrix");
}

TEST(Quantized, Errors) {
  auto w = randn({4, 64}, 1);
  expect_error<std::invalid_argument>([&] { quantize(w, 16, 4); },
                                      "[quantize] The requested group size 16");
  expect_error<std::invalid_argument>(
      [&] { quantize(w, 64, 7); }, "[quantize] The requested number of bits 7");
  expect_error<std::invalid_argument>([&] { quantize(randn({64}, 1), 64, 4); },
                                      "[quantize] The matrix to be quantized");
  expect_error<std::invalid_argument>(
      [&] {
        quantize(randn({2, 96}, 1), 64, 4);
      },
      "divisible by the quantization group size 64");
  expect_error<std::invalid_argument>(
      [&] { quantize(astype(w, int32), 64, 4); },
      "[quantize] Only real floating");
  auto wq_s_b_ = quantize(w, 32, 4);
  [[maybe_unused]] auto& wq = std::get<0>(wq_s_b_);
  [[maybe_unused]] auto& s = std::get<1>(wq_s_b_);
  [[maybe_unused]] auto& b = std::get<2>(wq_s_b_);
  expect_error<std::invalid_argument>(
      [&] { dequantize(astype(wq, int32), s, b, 32, 4); },
      "[dequantize] The matrix should be given as a uint32");
  expect_error<std::invalid_argument>(
      [&] { dequantize(wq, s, b, 64, 4); },
      "[dequantize] The shapes of the matrix and scales");
  expect_error<std::invalid_argument>(
      [&] {
        dequantize(wq, s, reshape(b, {2, 4}), 32, 4);
      },
      "[dequantize] Scales and biases should have the same shape");
  expect_error<std::invalid_argument>(
      [&] { dequantize(wq, s, b, 32, 7); },
      "[dequantize] The requested number of bits 7");
  auto x = randn({2, 64}, 2);
  expect_error<std::invalid_argument>(
      [&] {
        quantized_matmul(randn({2, 32}, 2), wq, s, b, true, 32, 4);
      },
      "[quantized_matmul] The last dimension of x");
  expect_error<std::invalid_argument>(
      [&] { quantized_matmul(x, wq, s, b, false, 32, 4); },
      "[quantized_matmul] The last dimension of x");
  expect_error<std::invalid_argument>(
      [&] { quantized_matmul(x, astype(wq, int32), s, b, true, 32, 4); },
      "[quantized_matmul] The weight matrix should be uint32");
  expect_error<std::invalid_argument>(
      [&] {
        quantized_matmul(x, reshape(wq, {32}), reshape(s, {8}),
                         reshape(b, {8}), true, 32, 4);
      },
      "[quantized_matmul] The quantized matrix must have at least 2 "
      "dimensions");
  expect_error<std::invalid_argument>(
      [&] {
        quantized_matmul(array({1.0f, 2.0f}, {2}), reshape(wq, {1, 4, 8}),
                         reshape(s, {1, 4, 2}), reshape(b, {1, 4, 2}), true,
                         32, 4);
      },
      "[quantized_matmul] The last dimension of x (shape (2)) does not "
      "match the quantized matrix");
  expect_error<std::invalid_argument>(
      [&] { quantized_matmul(x, wq, s, b, true, 64, 4); },
      "[quantized_matmul] The shapes of the matrix and scales");
  expect_error<std::invalid_argument>(
      [&] { quantized_matmul(x, wq, s, b, true, 32, 7); },
      "[quantized_matmul] The requested number of bits 7");
  expect_error<std::invalid_argument>(
      [&] { quantized_matmul(array(1.0f), wq, s, b, true, 32, 4); },
      "[quantized_matmul] x must have");
  expect_error<std::invalid_argument>(
      [&] {
        quantized_matmul(astype(x, int32), wq, astype(s, int32),
                         astype(b, int32), true, 32, 4);
      },
      "[quantized_matmul] Scales and biases must share a real floating "
      "dtype; got int32 and int32");
}

TEST(Quantized, TilesWithRemainders) {
  // transpose: K = 1024 makes tiles of 1024 rows of w, N = 1100 leaves 76.
  {
    auto wq_s_b_ = quantize(randn({1100, 1024}, 21), 64, 4);
    [[maybe_unused]] auto& wq = std::get<0>(wq_s_b_);
    [[maybe_unused]] auto& s = std::get<1>(wq_s_b_);
    [[maybe_unused]] auto& b = std::get<2>(wq_s_b_);
    auto wd = dequantize(wq, s, b, 64, 4);
    auto x = randn({5, 1024}, 22);
    expect_close(quantized_matmul(x, wq, s, b, true, 64, 4),
                 to_vector<double>(matmul(x, transpose(wd))), 1e-4, 2e-3);
  }
  // no transpose: K = 2048 rows, groups of 128 columns, 4 groups per tile,
  // N = 640 columns = 5 groups (a tile of 4 and one of 1).
  {
    auto wq_s_b_ = quantize(randn({2048, 640}, 23), 128, 8);
    [[maybe_unused]] auto& wq = std::get<0>(wq_s_b_);
    [[maybe_unused]] auto& s = std::get<1>(wq_s_b_);
    [[maybe_unused]] auto& b = std::get<2>(wq_s_b_);
    auto wd = dequantize(wq, s, b, 128, 8);
    auto x = randn({3, 2048}, 24);
    expect_close(quantized_matmul(x, wq, s, b, false, 128, 8),
                 to_vector<double>(matmul(x, wd)), 1e-4, 2e-3);
  }
  // A sliced (non-contiguous) packed matrix.
  {
    auto wq_s_b_ = quantize(randn({16, 128}, 25), 32, 2);
    [[maybe_unused]] auto& wq = std::get<0>(wq_s_b_);
    [[maybe_unused]] auto& s = std::get<1>(wq_s_b_);
    [[maybe_unused]] auto& b = std::get<2>(wq_s_b_);
    auto ws = slice(wq, {0, 0}, {16, 8}, {2, 1});
    auto ss = slice(s, {0, 0}, {16, 4}, {2, 1});
    auto bs = slice(b, {0, 0}, {16, 4}, {2, 1});
    auto wd = dequantize(ws, ss, bs, 32, 2);
    auto x = randn({2, 128}, 26);
    expect_close(quantized_matmul(x, ws, ss, bs, true, 32, 2),
                 to_vector<double>(matmul(x, transpose(wd))), 1e-4, 1e-3);
  }
}
