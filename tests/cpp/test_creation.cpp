#include <climits>
#include <cmath>
#include <limits>

#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

std::vector<double> repeat_value(double v, size_t n) {
  return std::vector<double>(n, v);
}

}  // namespace

TEST(Creation, FullScalarAndDtype) {
  auto a = full({2, 3}, 7.5f);
  EXPECT_EQ(a.dtype(), float32);
  EXPECT_EQ(a.shape(), Shape({2, 3}));
  expect_close(a, repeat_value(7.5, 6));

  // The value is cast to the requested dtype.
  auto b = full({4}, 7.9, int32);
  EXPECT_EQ(b.dtype(), int32);
  expect_close(b, {7, 7, 7, 7});

  auto c = full({2}, array(3, int16), float64);
  EXPECT_EQ(c.dtype(), float64);
  expect_close(c, {3, 3});

  auto d = full({}, 2.0f);
  EXPECT_EQ(d.ndim(), 0);
  EXPECT_EQ(d.item<float>(), 2.0f);

  auto e = full({3, 0}, 1.0f);
  EXPECT_EQ(e.size(), 0u);
  EXPECT_EQ(to_vector<float>(e).size(), 0u);
}

TEST(Creation, FullBroadcastsValues) {
  auto a = full({2, 3}, array({1, 2, 3}));
  EXPECT_EQ(a.dtype(), int32);
  expect_close(a, {1, 2, 3, 1, 2, 3});
  auto b = full({2, 2}, array({5.0f, 6.0f}, {2, 1}), float16);
  EXPECT_EQ(b.dtype(), float16);
  expect_close(b, {5, 5, 6, 6});
  // The broadcast value feeds other ops like any array.
  auto c = a + full({2, 3}, 10);
  expect_close(c, {11, 12, 13, 11, 12, 13});
}

TEST(Creation, FullOwnsItsBuffer) {
  // As MLX's Full: a row-contiguous buffer of its own, not a broadcast view
  // with zero strides (NumPy views are writeable, memory is accounted).
  auto a = full({3, 4}, 2.0f);
  a.eval();
  EXPECT_TRUE(a.flags().row_contiguous);
  EXPECT_EQ(a.strides(), Strides({4, 1}));
  EXPECT_GE(a.data_size(), 12u);
  auto z = zeros({5});
  z.eval();
  EXPECT_EQ(z.strides(), Strides({1}));
  // Values of the full shape are used as they are.
  auto v = array({1.0f, 2.0f});
  auto same = full({2}, v);
  EXPECT_EQ(same.id(), v.id());
}

TEST(Creation, FullLikeZerosOnes) {
  auto z = zeros({2, 2});
  EXPECT_EQ(z.dtype(), float32);
  expect_close(z, {0, 0, 0, 0});
  auto o = ones({3}, int8);
  EXPECT_EQ(o.dtype(), int8);
  expect_close(o, {1, 1, 1});
  auto ob = ones({2}, bool_);
  EXPECT_EQ(ob.dtype(), bool_);
  EXPECT_TRUE(to_vector<bool>(ob)[0]);
  auto oc = ones({2}, complex64);
  EXPECT_EQ(oc.dtype(), complex64);
  EXPECT_EQ(to_vector<complex64_t>(oc)[1], complex64_t(1, 0));

  array x({1.5, 2.5, 3.5, 4.5}, {2, 2});
  auto zl = zeros_like(x);
  EXPECT_EQ(zl.dtype(), float64);
  EXPECT_EQ(zl.shape(), x.shape());
  expect_close(zl, {0, 0, 0, 0});
  auto ol = ones_like(array({1, 2, 3}, uint16));
  EXPECT_EQ(ol.dtype(), uint16);
  expect_close(ol, {1, 1, 1});
  auto fl = full_like(x, array(9));
  EXPECT_EQ(fl.dtype(), float64);
  expect_close(fl, {9, 9, 9, 9});
  auto fl2 = full_like(array({1, 2}), array(2.7f));
  EXPECT_EQ(fl2.dtype(), int32);
  expect_close(fl2, {2, 2});
}

TEST(Creation, FullErrors) {
  expect_error<std::invalid_argument>(
      [] {
        full({2, -1}, 1.0f);
      },
      "[full] Negative dimensions are not allowed; got shape (2,-1).");
  expect_error<std::invalid_argument>(
      [] {
        full({2, 2}, array({1, 2, 3}));
      },
      "[full] Cannot broadcast values of shape (3) to shape (2,2).");
  expect_error<std::invalid_argument>(
      [] {
        full({3}, array({1, 2, 3}, {3, 1}));
      },
      "[full] Cannot broadcast values of shape (3,1) to shape (3).");
  expect_error<std::invalid_argument>([] { zeros({-3}); },
                                      "[full] Negative dimensions");
}

TEST(Creation, ArangeIntOverloads) {
  auto a = arange(5);
  EXPECT_EQ(a.dtype(), int32);
  EXPECT_EQ(a.shape(), Shape({5}));
  expect_close(a, {0, 1, 2, 3, 4});
  expect_close(arange(2, 10, 3), {2, 5, 8});
  expect_close(arange(-2, 3), {-2, -1, 0, 1, 2});
  expect_close(arange(5, 0, -2), {5, 3, 1});
  // Empty ranges.
  auto e = arange(5, 0);
  EXPECT_EQ(e.shape(), Shape({0}));
  EXPECT_EQ(to_vector<int>(e).size(), 0u);
  EXPECT_EQ(arange(0, 5, -1).size(), 0u);
  EXPECT_EQ(arange(0).size(), 0u);
}

TEST(Creation, ArangeDoubleOverloads) {
  auto a = arange(0.0, 1.0, 0.25);
  EXPECT_EQ(a.dtype(), float32);
  expect_close(a, {0, 0.25, 0.5, 0.75});
  auto b = arange(3.0);
  EXPECT_EQ(b.dtype(), float32);
  expect_close(b, {0, 1, 2});
  auto c = arange(1.5, 4.0);
  EXPECT_EQ(c.dtype(), float32);
  expect_close(c, {1.5, 2.5, 3.5});
  auto d = arange(4.0, float64);
  EXPECT_EQ(d.dtype(), float64);
  expect_close(d, {0, 1, 2, 3});
  auto e = arange(1.0, 3.0, int16);
  EXPECT_EQ(e.dtype(), int16);
  expect_close(e, {1, 2});
  // size = ceil((stop - start) / step).
  EXPECT_EQ(arange(0.0, 1.0, 0.3).size(), 4u);
  EXPECT_EQ(arange(0.0, 0.9, 0.3).size(), 3u);
  expect_close(arange(1.0, -1.0, -0.5), {1, 0.5, 0, -0.5});
  // An infinite step gives the start alone, or nothing.
  expect_close(arange(2.0, 5.0, INFINITY), {2});
  EXPECT_EQ(arange(5.0, 2.0, INFINITY).size(), 0u);
  expect_close(arange(5.0, 2.0, -INFINITY), {5});
}

TEST(Creation, ArangeEveryDtype) {
  // 1, 2.5, 4, 5.5; integer dtypes step by the truncated step from the
  // truncated start (MLX): 1, 2, 3, 4.
  std::vector<Dtype> floats = {float16, bfloat16, float32, float64};
  for (auto t : floats) {
    auto a = arange(1.0, 6.0, 1.5, t);
    EXPECT_EQ(a.dtype(), t);
    expect_close(a, {1, 2.5, 4, 5.5}, 0, 0, dtype_name(t));
  }
  std::vector<Dtype> ints = {uint8, uint16, uint32, uint64,
                             int8,  int16,  int32,  int64};
  for (auto t : ints) {
    auto a = arange(1.0, 6.0, 1.5, t);
    EXPECT_EQ(a.dtype(), t);
    expect_close(a, {1, 2, 3, 4}, 0, 0, dtype_name(t));
  }
  auto c = arange(0.0, 3.0, 1.0, complex64);
  EXPECT_EQ(c.dtype(), complex64);
  auto cv = to_vector<complex64_t>(c);
  EXPECT_EQ(cv[2], complex64_t(2, 0));
  expect_close(arange(-3.0, 0.0, 1.0, int8), {-3, -2, -1});
}

TEST(Creation, ArangeValuesFromIndex) {
  // Large enough to be split over threads; every value is start + i * step
  // computed in double, with no accumulated error.
  int n = 1 << 20;
  auto a = arange(0, n);
  auto v = to_vector<int64_t>(a);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(v[i], i);
  }
  auto b = arange(0.0, 1000.0, 0.1, float64);
  ASSERT_EQ(b.size(), 10000u);
  auto bv = to_vector<double>(b);
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(bv[i], i * 0.1) << i;
  }
  auto c = arange(-1.0, 1.0, 1.0 / 1024, float32);
  auto cv = to_vector<double>(c);
  ASSERT_EQ(cv.size(), 2048u);
  for (int i = 0; i < 2048; ++i) {
    ASSERT_EQ(cv[i], -1.0 + i / 1024.0);
  }
}

TEST(Creation, ArangeErrors) {
  expect_error<std::invalid_argument>([] { arange(0.0, 5.0, 0.0); },
                                      "[arange] The step must be nonzero.");
  expect_error<std::invalid_argument>([] { arange(0, 5, 0); },
                                      "[arange] The step must be nonzero.");
  expect_error<std::invalid_argument>([] { arange(0.0, 5.0, 1.0, bool_); },
                                      "[arange] bool is not supported.");
  expect_error<std::invalid_argument>(
      [] { arange(NAN, 5.0); },
      "[arange] Cannot compute the length of the range with start=nan");
  expect_error<std::invalid_argument>([] { arange(0.0, INFINITY); },
                                      "[arange] Cannot compute the length");
  expect_error<std::invalid_argument>(
      [] { arange(0.0, 1e10); },
      "[arange] The range with start=0, stop=1e+10 and step=1 has more than "
      "2147483647 elements.");
}

TEST(Creation, ArangePrimitive) {
  auto a = arange(1.0, 10.0, 2.0);
  auto& p = static_cast<Arange&>(a.primitive());
  EXPECT_STREQ(p.name(), "Arange");
  EXPECT_EQ(p.start(), 1.0);
  EXPECT_EQ(p.stop(), 10.0);
  EXPECT_EQ(p.step(), 2.0);
  EXPECT_EQ(p.output_shapes({}), std::vector<Shape>{Shape{5}});
  auto b = arange(1.0, 10.0, 2.0);
  auto c = arange(1.0, 10.0, 3.0);
  EXPECT_TRUE(p.is_equivalent(b.primitive()));
  // The dtype is a parameter too (the transformation rules rebuild it).
  EXPECT_EQ(p.dtype(), float32);
  EXPECT_FALSE(p.is_equivalent(arange(1.0, 10.0, 2.0, int32).primitive()));
  EXPECT_FALSE(p.is_equivalent(c.primitive()));
  EXPECT_FALSE(p.is_equivalent(zeros({2}).primitive()));
}

TEST(Creation, Linspace) {
  auto a = linspace(0.0, 1.0, 5);
  EXPECT_EQ(a.dtype(), float32);
  expect_close(a, {0, 0.25, 0.5, 0.75, 1.0}, 0, 0);
  EXPECT_EQ(linspace(0.0, 1.0).size(), 50u);

  // Both ends are exact; interior values are correctly rounded.
  auto b = linspace(0.1, 0.7, 7);
  auto bv = to_vector<float>(b);
  EXPECT_EQ(bv.front(), 0.1f);
  EXPECT_EQ(bv.back(), 0.7f);
  for (int i = 0; i < 7; ++i) {
    EXPECT_NEAR(bv[i], 0.1 + i * 0.1, 1e-7);
  }

  auto c = linspace(-3.0, 5.0, 101, float64);
  EXPECT_EQ(c.dtype(), float64);
  auto cv = to_vector<double>(c);
  for (int i = 0; i < 101; ++i) {
    EXPECT_NEAR(cv[i], -3.0 + i * 0.08, 1e-14);
  }
  EXPECT_EQ(cv.back(), 5.0);

  // Decreasing, one sample, none, and integer output (truncated).
  expect_close(linspace(2.0, -2.0, 3), {2, 0, -2});
  auto one = linspace(4.0, 9.0, 1);
  EXPECT_EQ(one.shape(), Shape({1}));
  expect_close(one, {4});
  auto none = linspace(4.0, 9.0, 0);
  EXPECT_EQ(none.shape(), Shape({0}));
  auto ints = linspace(0.0, 10.0, 4, int32);
  EXPECT_EQ(ints.dtype(), int32);
  expect_close(ints, {0, 3, 6, 10});

  expect_error<std::invalid_argument>(
      [] { linspace(0.0, 1.0, -1); },
      "[linspace] The number of samples must be non-negative; got -1.");
}

TEST(Creation, EyeAndIdentity) {
  auto check = [](int n, int m, int k) {
    auto e = eye(n, m, k);
    EXPECT_EQ(e.shape(), Shape({n, m}));
    EXPECT_EQ(e.dtype(), float32);
    std::vector<double> expect;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < m; ++j) {
        expect.push_back(j - i == k ? 1 : 0);
      }
    }
    expect_close(e, expect, 0, 0,
                 "eye(" + std::to_string(n) + ", " + std::to_string(m) + ", " +
                     std::to_string(k) + ")");
  };
  for (int k : {-4, -3, -1, 0, 1, 2, 4, 5}) {
    check(3, 4, k);
    check(4, 3, k);
  }
  check(0, 3, 0);
  check(3, 3, INT_MAX);
  check(3, 3, INT_MIN);

  auto e = eye(3, int32);
  EXPECT_EQ(e.dtype(), int32);
  expect_close(e, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  auto id = identity(2, bool_);
  EXPECT_EQ(id.dtype(), bool_);
  expect_close(id, {1, 0, 0, 1});
  expect_close(identity(1), {1});

  expect_error<std::invalid_argument>(
      [] { eye(-1, 2, 0); },
      "[eye] The number of rows and columns must be non-negative; got n=-1 "
      "and m=2.");
  expect_error<std::invalid_argument>(
      [] { identity(-2); },
      "[identity] The size must be non-negative; got -2.");
}

TEST(Creation, Tri) {
  for (int k : {-3, -1, 0, 1, 3, 6}) {
    auto t = tri(3, 5, k);
    EXPECT_EQ(t.shape(), Shape({3, 5}));
    EXPECT_EQ(t.dtype(), float32);
    std::vector<double> expect;
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 5; ++j) {
        expect.push_back(j <= i + k ? 1 : 0);
      }
    }
    expect_close(t, expect, 0, 0, "k=" + std::to_string(k));
  }
  auto t = tri(3, int32);
  EXPECT_EQ(t.dtype(), int32);
  expect_close(t, {1, 0, 0, 1, 1, 0, 1, 1, 1});
  expect_close(tri(2, 2, INT_MIN), {0, 0, 0, 0});
  expect_close(tri(2, 2, INT_MAX), {1, 1, 1, 1});
  expect_error<std::invalid_argument>(
      [] { tri(2, -3, 0); },
      "[tri] The number of rows and columns must be non-negative; got n=2 "
      "and m=-3.");
}

TEST(Creation, TrilTriu) {
  // A batch of 2 matrices 3 x 4, and the same values seen through a
  // transposed view.
  std::vector<float> vals(24);
  for (int i = 0; i < 24; ++i) {
    vals[i] = static_cast<float>(i + 1);
  }
  array x(vals.begin(), {2, 3, 4});
  array xt = transpose(array(vals.begin(), {2, 4, 3}), {0, 2, 1});
  for (int k : {-2, -1, 0, 1, 3, INT_MIN, INT_MAX}) {
    auto lo = tril(x, k);
    auto hi = triu(x, k);
    auto lot = tril(xt, k);
    EXPECT_EQ(lo.dtype(), float32);
    EXPECT_EQ(lo.shape(), x.shape());
    std::vector<double> elo, ehi, elot;
    for (int b = 0; b < 2; ++b) {
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 4; ++j) {
          double v = vals[b * 12 + i * 4 + j];
          double vt = vals[b * 12 + j * 3 + i];
          // Compare in 64 bits: i + k must not overflow.
          bool below = j <= int64_t{i} + k;
          bool above = j >= int64_t{i} + k;
          elo.push_back(below ? v : 0);
          ehi.push_back(above ? v : 0);
          elot.push_back(below ? vt : 0);
        }
      }
    }
    std::string what = "k=" + std::to_string(k);
    expect_close(lo, elo, 0, 0, "tril " + what);
    expect_close(hi, ehi, 0, 0, "triu " + what);
    expect_close(lot, elot, 0, 0, "tril of a view, " + what);
  }
  auto ti = triu(array({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(ti.dtype(), int32);
  expect_close(ti, {1, 2, 0, 4});

  expect_error<std::invalid_argument>(
      [] {
        tril(array({1, 2, 3}));
      },
      "[tril] The input must have at least 2 dimensions; got shape (3).");
  expect_error<std::invalid_argument>(
      [] { triu(array(1.0f)); },
      "[triu] The input must have at least 2 dimensions; got shape ().");
}
