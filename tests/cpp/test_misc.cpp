// where, astype, clip, isclose, allclose and array_equal.
#include <cmath>
#include <complex>
#include <limits>

#include "test_inputs.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;
using namespace fluxion::test::inputs;

namespace {


const std::vector<Dtype> kAll = {bool_,   uint8,   uint16,   uint32,   uint64,
                                 int8,    int16,   int32,    int64,    float16,
                                 float32, float64, bfloat16, complex64};

}  // namespace

TEST(MiscWhere, LayoutsAndDtypes) {
  const Shape shape = {4, 6};
  std::vector<double> c(24), x(24), y(24);
  for (int i = 0; i < 24; ++i) {
    c[i] = (i * 7) % 3 == 0;
    x[i] = i;
    y[i] = 100 + i;
  }
  for (Dtype dt : kAll) {
    if (dt == bool_) {
      continue;
    }
    auto xv = round_all(x, dt), yv = round_all(y, dt);
    std::vector<double> expected(24);
    for (int i = 0; i < 24; ++i) {
      expected[i] = c[i] ? xv[i] : yv[i];
    }
    for (Layout lc : all_layouts()) {
      for (Layout lx :
           {Layout::RowMajor, Layout::Transposed, Layout::Strided}) {
        auto out = where(make_array(c, shape, bool_, lc),
                         make_array(xv, shape, dt, lx),
                         make_array(yv, shape, dt, Layout::Reversed));
        std::string what = std::string(dtype_name(dt)) + " " + layout_name(lc) +
                           " " + layout_name(lx);
        ASSERT_EQ(out.dtype(), dt) << what;
        expect_close(out, expected, 0, 0, what);
      }
    }
  }
  // Any dtype is a condition (nonzero and NaN are true); x and y promote.
  auto cond = array({0.0f, 2.0f, NAN, -0.0f});
  auto out = where(cond, array({1, 2, 3, 4}), array({0.5f}));
  EXPECT_EQ(out.dtype(), float32);
  expect_close(out, {0.5, 2, 3, 0.5});
  auto ci = where(array({1, 0}, int8), array({1}, uint8), array({-1}, int8));
  EXPECT_EQ(ci.dtype(), int16);
  expect_close(ci, {1, -1});
  // Three-way broadcasting.
  auto b =
      where(array({true, false}, {2, 1}), array({1, 2, 3}, {1, 3}), array(0));
  EXPECT_EQ(b.shape(), (Shape{2, 3}));
  expect_close(b, {1, 2, 3, 0, 0, 0});
  // Complex values are moved whole.
  auto z = where(array({false, true}), array({complex64_t(1, 2)}),
                 array({complex64_t(3, -4), complex64_t(5, 6)}));
  auto zv = to_vector<complex64_t>(z);
  EXPECT_EQ(zv[0], complex64_t(3, -4));
  EXPECT_EQ(zv[1], complex64_t(1, 2));
  // Large (split over threads).
  std::vector<double> lc(100000), lx(100000);
  for (int i = 0; i < 100000; ++i) {
    lc[i] = i % 3 == 1;
    lx[i] = i;
  }
  auto big = where(array(lc.begin(), {100000}, bool_),
                   array(lx.begin(), {100000}, float64), array(-1.0));
  auto bv = to_vector<double>(big);
  for (int i = 0; i < 100000; i += 997) {
    EXPECT_EQ(bv[i], lc[i] ? lx[i] : -1.0) << i;
  }
  expect_error<std::invalid_argument>(
      [] {
        where(array({true, false}), array({1, 2, 3}), array(0));
      },
      "[where] Shapes (2) and (3) cannot be broadcast.");
  expect_error<std::invalid_argument>(
      [] {
        where(array({true}), array({1, 2}), array({1, 2, 3}));
      },
      "[where] Shapes (2) and (3) cannot be broadcast.");
}

// Every pair of dtypes on values every dtype can hold exactly.
TEST(MiscAsType, EveryDtypePair) {
  for (Dtype from : kAll) {
    std::vector<double> v = from == bool_ ? std::vector<double>{0, 1, 1, 0}
                                          : std::vector<double>{0, 1, 2, 100};
    for (Dtype to : kAll) {
      std::string what = std::string(dtype_name(from)) + "->" + dtype_name(to);
      for (Layout l : {Layout::RowMajor, Layout::Transposed, Layout::Strided}) {
        auto a = make_array(v, {2, 2}, from, l);
        auto out = astype(a, to);
        ASSERT_EQ(out.dtype(), to) << what;
        ASSERT_EQ(out.shape(), (Shape{2, 2})) << what;
        expect_close(out, round_all(v, to), 0, 0, what + " " + layout_name(l));
      }
    }
    auto a = array({1, 2}, from);
    EXPECT_TRUE(astype(a, from).is_same(a)) << dtype_name(from);
  }
}

TEST(MiscAsType, Conversions) {
  // Float to int truncates toward zero.
  auto f = array({2.7f, -2.7f, 0.5f, -0.5f, 100.9f});
  for (Dtype dt : {int8, int16, int32, int64}) {
    expect_close(astype(f, dt), {2, -2, 0, 0, 100}, 0, 0, dtype_name(dt));
  }
  expect_close(astype(array({2.9, 255.9}), uint8), {2, 255});
  expect_close(astype(array({3.99}, float16), int32), {3});
  // Float to bool: anything but zero (NaN included) is true.
  expect_close(astype(array({0.0f, -0.0f, 0.1f, NAN, -INFINITY}), bool_),
               {0, 0, 1, 1, 1});
  expect_close(astype(array({0.0, 3.0}, bfloat16), bool_), {0, 1});
  // Complex to real keeps the real part; to bool looks at both.
  auto z = array({complex64_t(1.5f, 2.0f), complex64_t(-3.0f, 0.0f),
                  complex64_t(0.0f, 1.0f), complex64_t(0.0f, 0.0f)});
  expect_close(astype(z, float32), {1.5, -3, 0, 0});
  expect_close(astype(z, int32), {1, -3, 0, 0});
  expect_close(astype(z, float16), {1.5, -3, 0, 0});
  expect_close(astype(z, bool_), {1, 1, 1, 0});
  // Real to complex has a zero imaginary part.
  auto c = to_vector<complex64_t>(astype(array({-1.25, 2.0}), complex64));
  EXPECT_EQ(c[0], complex64_t(-1.25f, 0));
  EXPECT_EQ(c[1], complex64_t(2, 0));
  // Rounding to the narrow float types, overflow to infinity.
  expect_close(astype(array({0.1, 70000.0, -1e6}), float16),
               {0.0999755859375, kInf, -kInf});
  expect_close(astype(array({0.1f, 3e38f}), bfloat16),
               {0.10009765625, round_to(3e38, bfloat16)}, 0, 0);
  EXPECT_NE(round_to(3e38, bfloat16), static_cast<double>(3e38f));
  expect_close(astype(array({1.0 / 3.0}), float32), {1.0f / 3.0f}, 0, 0);
  // Integers wrap into narrower integers, like NumPy.
  expect_close(astype(array({300, -1, 128}), uint8), {44, 255, 128});
  expect_close(astype(array({300, -129, 128}), int8), {44, 127, -128});
  expect_close(astype(array({int64_t{1} << 40}), int32), {0});
  expect_close(astype(array({(int64_t{1} << 40) + 1}), float32),
               {1099511627776.0});
  // Bool from ints.
  expect_close(astype(array({0, -3, 256}), bool_), {0, 1, 1});
  // Large inputs are converted in parallel, keeping their layout.
  std::vector<double> big(100003);
  for (size_t i = 0; i < big.size(); ++i) {
    big[i] = static_cast<double>(i % 1000) - 500.5;
  }
  auto ab = astype(array(big.begin(), {100003}, float64), int32);
  auto got = to_vector<double>(ab);
  for (size_t i = 0; i < big.size(); i += 101) {
    EXPECT_EQ(got[i], std::trunc(big[i])) << i;
  }
}

TEST(MiscClip, BoundsAndPromotion) {
  auto a = array({-3.0f, 0.5f, 2.0f, 7.0f, NAN});
  expect_close(clip(a, array(0.0f), array(2.0f)), {0, 0.5, 2, 2, kNaN});
  expect_close(clip(a, array(1.0f), std::nullopt), {1, 1, 2, 7, kNaN});
  expect_close(clip(a, std::nullopt, array(1.0f)), {-3, 0.5, 1, 1, kNaN});
  // Bounds broadcast.
  auto m = array({1, 5, 9, 1, 5, 9}, {2, 3});
  auto lo = array({2, 2, 2});
  auto hi = array({3}, {1, 1});
  EXPECT_EQ(clip(m, lo, hi).dtype(), int32);
  expect_close(clip(m, lo, hi), {2, 3, 3, 2, 3, 3});
  expect_close(clip(m, array({0, 6, 0}), std::nullopt), {1, 6, 9, 1, 6, 9});
  // Bounds of another dtype promote.
  auto p = clip(array({1, 5}, uint8), array(1.5f), array(4.5f));
  EXPECT_EQ(p.dtype(), float32);
  expect_close(p, {1.5, 4.5});
  EXPECT_EQ(clip(array({1, 5}, int8), array(0, int8), array(3, int8)).dtype(),
            int8);
  // Every layout.
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) {
    v[i] = (i * 7) % 24 - 12;
  }
  std::vector<double> e(24);
  for (int i = 0; i < 24; ++i) {
    e[i] = std::min(std::max(v[i], -5.0), 6.0);
  }
  for (Layout l : all_layouts()) {
    expect_close(clip(make_array(v, {4, 6}, int16, l), array(-5, int16),
                      array(6, int16)),
                 e, 0, 0, layout_name(l));
  }
  expect_error<std::invalid_argument>(
      [&] { clip(a, std::nullopt, std::nullopt); },
      "[clip] At least one of a_min and a_max must be given.");
  expect_error<std::invalid_argument>(
      [&] {
        clip(m, array({1, 2}), std::nullopt);
      },
      "[clip] Shapes (2,3) and (2) cannot be broadcast.");
  expect_error<std::invalid_argument>(
      [&] {
        clip(m, std::nullopt, array({1, 2, 3, 4}));
      },
      "[clip] Shapes (2,3) and (4) cannot be broadcast.");
}

TEST(MiscIsClose, Tolerances) {
  auto a = array({1.0f, 1.0f, 100.0f, 0.0f, 0.0f});
  auto b = array({1.0f + 1e-6f, 1.1f, 100.0009f, 1e-9f, 1e-7f});
  EXPECT_EQ(isclose(a, b).dtype(), bool_);
  // |a - b| <= 1e-8 + 1e-5 * |b|
  expect_close(isclose(a, b), {1, 0, 1, 1, 0});
  expect_close(isclose(a, b, 0.2), {1, 1, 1, 1, 0});
  expect_close(isclose(a, b, 0, 1e-6), {1, 0, 0, 1, 1});
  // Infinities are close only to themselves; NaN only with equal_nan.
  auto x = array({INFINITY, INFINITY, -INFINITY, 1.0f, NAN, NAN, 1.0f});
  auto y = array({INFINITY, -INFINITY, -INFINITY, INFINITY, NAN, 1.0f, NAN});
  expect_close(isclose(x, y), {1, 0, 1, 0, 0, 0, 0});
  expect_close(isclose(x, y, 1e-5, 1e-8, true), {1, 0, 1, 0, 1, 0, 0});
  expect_close(isclose(y, x), {1, 0, 1, 0, 0, 0, 0});
  // Integers, mixed dtypes and broadcasting.
  auto i = isclose(array({1, 2, 3}), array(2.0f));
  EXPECT_EQ(i.shape(), Shape{3});
  expect_close(i, {0, 1, 0});
  // 4 <= 1e-8 + 1e-5 * 1000005 < 25
  expect_close(isclose(array({999980, 1000001}, int64), array(1000005)),
               {0, 1});
  // Half-precision inputs keep the default tolerances meaningful.
  expect_close(
      isclose(array({1.0, 1.0}, float16), array({1.0, 1.0009765625}, float16)),
      {1, 0});
  // Complex: the distance is |a - b|.
  expect_close(
      isclose(array({complex64_t(1, 1)}), array({complex64_t(1, 1.000001f)})),
      {1});
  expect_close(isclose(array({complex64_t(1, 1)}), array({complex64_t(1, 2)})),
               {0});
  expect_error<std::invalid_argument>(
      [] {
        isclose(array({1.0f, 2.0f}), array({1.0f, 2.0f, 3.0f}));
      },
      "[isclose] Shapes (2) and (3) cannot be broadcast.");
  expect_error<std::invalid_argument>(
      [] {
        allclose(array({1.0f, 2.0f}), array({1.0f, 2.0f, 3.0f}));
      },
      "[allclose] Shapes (2) and (3) cannot be broadcast.");
}

TEST(MiscIsClose, AllClose) {
  auto a = array({1.0f, 2.0f, 3.0f});
  EXPECT_TRUE(allclose(a, a + 1e-7f).item<bool>());
  EXPECT_FALSE(allclose(a, a + 1e-3f).item<bool>());
  EXPECT_TRUE(allclose(a, a + 1e-3f, 1e-3).item<bool>());
  EXPECT_EQ(allclose(a, a).shape(), Shape{});
  EXPECT_EQ(allclose(a, a).dtype(), bool_);
  auto n = array({1.0f, NAN});
  EXPECT_FALSE(allclose(n, n).item<bool>());
  EXPECT_TRUE(allclose(n, n, 1e-5, 1e-8, true).item<bool>());
  EXPECT_TRUE(allclose(array({INFINITY}), array({INFINITY})).item<bool>());
  EXPECT_FALSE(allclose(array({1.0f}), array({INFINITY})).item<bool>());
  // Broadcast: every row close to the one row.
  auto m = array({1.0f, 2.0f, 1.0f, 2.0f}, {2, 2});
  EXPECT_TRUE(allclose(m, array({1.0f, 2.0f})).item<bool>());
  std::vector<float> none;
  EXPECT_TRUE(allclose(array(none.begin(), {0}, float32),
                       array(none.begin(), {0}, float32))
                  .item<bool>());
}

TEST(MiscArrayEqual, ShapesDtypesNaN) {
  auto a = array({1, 2, 3}, {3});
  EXPECT_TRUE(array_equal(a, array({1, 2, 3})).item<bool>());
  EXPECT_FALSE(array_equal(a, array({1, 2, 4})).item<bool>());
  // Dtypes may differ; values are compared after promotion.
  EXPECT_TRUE(array_equal(a, array({1.0f, 2.0f, 3.0f})).item<bool>());
  EXPECT_TRUE(array_equal(a, array({1, 2, 3}, uint8)).item<bool>());
  EXPECT_FALSE(array_equal(a, array({1.0f, 2.0f, 3.5f})).item<bool>());
  // Different shapes are never equal, even when they broadcast.
  EXPECT_FALSE(array_equal(a, array({1, 2, 3}, {1, 3})).item<bool>());
  EXPECT_FALSE(array_equal(array({1, 1}), array(1)).item<bool>());
  EXPECT_FALSE(array_equal(a, array({1, 2})).item<bool>());
  EXPECT_EQ(array_equal(a, array({1, 2})).dtype(), bool_);
  EXPECT_EQ(array_equal(a, a).shape(), Shape{});
  // NaN equals NaN only with equal_nan, in every float type and complex.
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    auto n = array({1.0, kNaN}, dt);
    EXPECT_FALSE(array_equal(n, n).item<bool>()) << dtype_name(dt);
    EXPECT_TRUE(array_equal(n, n, true).item<bool>()) << dtype_name(dt);
    EXPECT_FALSE(array_equal(n, array({2.0, kNaN}, dt), true).item<bool>());
  }
  auto z = array({complex64_t(NAN, 0), complex64_t(1, 1)});
  EXPECT_FALSE(array_equal(z, z).item<bool>());
  EXPECT_TRUE(array_equal(z, z, true).item<bool>());
  // Layouts do not matter, only values.
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) {
    v[i] = i * 3 % 7;
  }
  for (Layout l : all_layouts()) {
    EXPECT_TRUE(array_equal(make_array(v, {4, 6}, int32, l),
                            make_array(v, {4, 6}, float32, Layout::RowMajor))
                    .item<bool>())
        << layout_name(l);
    auto w = v;
    w[17] += 1;
    EXPECT_FALSE(array_equal(make_array(v, {4, 6}, int32, l),
                             make_array(w, {4, 6}, int32, Layout::Strided))
                     .item<bool>())
        << layout_name(l);
  }
  std::vector<int> none;
  EXPECT_TRUE(array_equal(array(none.begin(), {0, 2}, int32),
                          array(none.begin(), {0, 2}, int32))
                  .item<bool>());
  EXPECT_FALSE(array_equal(array(none.begin(), {0, 2}, int32),
                           array(none.begin(), {2, 0}, int32))
                   .item<bool>());
}
