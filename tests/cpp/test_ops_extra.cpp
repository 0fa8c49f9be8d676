// degrees/radians/isposinf/isneginf/nan_to_num and the random extras
// (truncated_normal, gumbel, laplace, categorical, permutation,
// multivariate_normal).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

const std::vector<double> kSpecial = {1.5, -kInf, kNaN, kInf, -2.0, 0.0};

TEST(ElemExtra, AngleConversions) {
  auto x = array({0.0f, 90.0f, -45.0f, 360.0f}, {4});
  std::vector<double> rad;
  for (double v : {0.0, 90.0, -45.0, 360.0}) {
    rad.push_back(v * std::numbers::pi / 180.0);
  }
  expect_close(radians(x), rad);
  expect_close(degrees(radians(x)), {0.0, 90.0, -45.0, 360.0}, 1e-5, 1e-4);
  // Transposed float64 and an int input (float32 out).
  auto m = transpose(reshape(astype(x, float64), {2, 2}));
  expect_close(radians(m), {rad[0], rad[2], rad[1], rad[3]}, 1e-12, 0);
  auto i = radians(array({180, -90}, {2}));
  EXPECT_EQ(i.dtype(), float32);
  expect_close(i, {std::numbers::pi, -std::numbers::pi / 2});
}

TEST(ElemExtra, SignedInfinities) {
  for (Dtype t : {float16, bfloat16, float32, float64}) {
    auto a = astype(array(kSpecial.begin(), {6}), t);
    EXPECT_EQ(to_vector<bool>(isposinf(a)),
              (std::vector<bool>{false, false, false, true, false, false}));
    EXPECT_EQ(to_vector<bool>(isneginf(a)),
              (std::vector<bool>{false, true, false, false, false, false}));
  }
  auto ints = array({1, -3}, {2});
  EXPECT_EQ(to_vector<bool>(isposinf(ints)), (std::vector<bool>{false, false}));
  // Complex: equal to (-inf) + 0j (as MLX).
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(to_vector<bool>(isneginf(array(
                {complex64_t(1, 1), complex64_t(-inf, 0), complex64_t(-inf, 1)}))),
            (std::vector<bool>{false, true, false}));
}

TEST(ElemExtra, NanToNum) {
  auto a = array(kSpecial.begin(), {6});
  expect_close(nan_to_num(a, -1.0, 100.0, -50.0),
               {1.5, -50.0, -1.0, 100.0, -2.0, 0.0}, 0, 0);
  double big = std::numeric_limits<double>::max();
  expect_close(nan_to_num(a), {1.5, -big, 0.0, big, -2.0, 0.0}, 0, 0);
  auto h = nan_to_num(astype(a, float16));
  EXPECT_EQ(h.dtype(), float16);
  expect_close(h, {1.5, -65504.0, 0.0, 65504.0, -2.0, 0.0}, 0, 0);
  auto ints = array({4, 5}, {2});
  EXPECT_EQ(to_vector<int32_t>(nan_to_num(ints, 1.0)),
            (std::vector<int32_t>{4, 5}));
}

TEST(ElemExtra, BitwiseInvert) {
  EXPECT_EQ(to_vector<uint8_t>(bitwise_invert(array({0, 5}, {2}, uint8))),
            (std::vector<uint8_t>{255, 250}));
  EXPECT_EQ(to_vector<int32_t>(bitwise_invert(array({1, -2}, {2}))),
            (std::vector<int32_t>{-2, 1}));
  EXPECT_EQ(to_vector<bool>(bitwise_invert(array({true, false}, {2}))),
            (std::vector<bool>{false, true}));
  expect_error<std::invalid_argument>(
      [] { bitwise_invert(array(1.0f)); },
      "[bitwise_invert] Only integer and boolean types are supported; got "
      "float32.");
}

std::vector<double> values(const array& a) { return to_vector<double>(a); }

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / v.size();
}

TEST(RandomExtra, TruncatedNormal) {
  auto x = values(random::truncated_normal(
      array(-0.5f), array(1.0f), Shape{20000}, float32, random::key(1)));
  auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  EXPECT_GE(*lo, -0.5);
  EXPECT_LE(*hi, 1.0);
  auto pdf = [](double z) {
    return std::exp(-z * z / 2) / std::sqrt(2 * std::numbers::pi);
  };
  auto cdf = [](double z) { return 0.5 * (1 + std::erf(z / std::sqrt(2.0))); };
  double expected = (pdf(-0.5) - pdf(1.0)) / (cdf(1.0) - cdf(-0.5));
  EXPECT_NEAR(mean_of(x), expected, 0.015);
  expect_error<std::invalid_argument>(
      [] { random::truncated_normal(zeros({3}), array(1.0f), Shape{2}); },
      "[random.truncated_normal] Cannot generate values of shape (2)");
}

TEST(RandomExtra, GumbelAndLaplace) {
  auto g = values(random::gumbel({50000}, float32, random::key(2)));
  EXPECT_NEAR(mean_of(g), 0.5772157, 0.02);
  auto l =
      values(random::laplace({50000}, float64, 2.0f, 0.5f, random::key(3)));
  EXPECT_NEAR(mean_of(l), 2.0, 0.02);
  double far = 0;
  for (double v : l) far += std::abs(v - 2.0) > 0.5;
  EXPECT_NEAR(far / l.size(), std::exp(-1.0), 0.01);
  expect_error<std::invalid_argument>(
      [] { random::laplace({2}, int32); },
      "[random.laplace] Only real floating point dtypes are supported");
}

TEST(RandomExtra, CategoricalAndPermutation) {
  auto logits = log(array({0.25f, 0.75f}, {2}));
  auto s = to_vector<uint32_t>(
      random::categorical(logits, -1, std::nullopt, 20000, random::key(4)));
  ASSERT_EQ(s.size(), 20000u);
  double ones = std::count(s.begin(), s.end(), 1u) / 20000.0;
  EXPECT_NEAR(ones, 0.75, 0.015);
  expect_error<std::invalid_argument>(
      [&] { random::categorical(logits, -1, Shape{2}, 3); },
      "[random.categorical] At most one of shape or num_samples");
  auto p = to_vector<int32_t>(random::permutation(10, random::key(5)));
  std::sort(p.begin(), p.end());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p[i], i);
  expect_error<std::invalid_argument>([] { random::permutation(-1); },
                                      "[random.permutation] n must be");
}

TEST(RandomExtra, MultivariateNormal) {
  auto cov = array({4.0f, 1.0f, 1.0f, 1.0f}, {2, 2});
  auto x = random::multivariate_normal(array({1.0f, -1.0f}, {2}), cov, {40000},
                                       float32, random::key(6));
  ASSERT_EQ(x.shape(), (Shape{40000, 2}));
  auto v = values(x);
  double m0 = 0, m1 = 0, c01 = 0, c00 = 0;
  int n = 40000;
  for (int i = 0; i < n; ++i) {
    m0 += v[2 * i];
    m1 += v[2 * i + 1];
  }
  m0 /= n;
  m1 /= n;
  for (int i = 0; i < n; ++i) {
    c00 += (v[2 * i] - m0) * (v[2 * i] - m0);
    c01 += (v[2 * i] - m0) * (v[2 * i + 1] - m1);
  }
  EXPECT_NEAR(m0, 1.0, 0.03);
  EXPECT_NEAR(m1, -1.0, 0.03);
  EXPECT_NEAR(c00 / n, 4.0, 0.1);
  EXPECT_NEAR(c01 / n, 1.0, 0.05);
  expect_error<std::invalid_argument>(
      [&] { random::multivariate_normal(zeros({3}), cov); },
      "[random.multivariate_normal] cov must have shape (..., 3, 3)");
}

}  // namespace

// A singular (positive semi-definite) covariance: samples lie on the line
// x1 = 2 x0 with the right variance (a Cholesky factor would fail here).
TEST(RandomExtra, MultivariateNormalSingularCovariance) {
  auto cov = array({1.0f, 2.0f, 2.0f, 4.0f}, {2, 2});
  auto x = random::multivariate_normal(zeros({2}), cov, {20000}, float32,
                                       random::key(7));
  auto v = values(x);
  double var0 = 0;
  for (int i = 0; i < 20000; ++i) {
    EXPECT_NEAR(v[2 * i + 1], 2.0 * v[2 * i], 1e-4 * (1 + std::abs(v[2 * i])));
    var0 += v[2 * i] * v[2 * i];
  }
  EXPECT_NEAR(var0 / 20000, 1.0, 0.05);
}
