// The shared kernel pieces of backend/common: reductions, scans and
// elementwise ops agree because they use the same functors (NaN through
// complex max/min, logaddexp at infinities, the accumulator dtype); the
// layout helpers (dimension collapsing, view spans); and the float32
// transcendentals of math.h against the vectorized eager paths and a
// float64 reference.
#include <cmath>
#include <complex>
#include <limits>

#include "fluxion/backend/common/layout.h"
#include "fluxion/backend/common/reduce_ops.h"
#include "fluxion/backend/common/unary_ops.h"
#include "fluxion/backend/cpu/simd.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

const float kNaNf = std::numeric_limits<float>::quiet_NaN();
const float kInff = std::numeric_limits<float>::infinity();

std::vector<complex64_t> complex_values(const array& a) {
  return to_vector<complex64_t>(a);
}

bool is_nan(complex64_t z) { return std::isnan(z.real()) || std::isnan(z.imag()); }

}  // namespace

// Before the functors were shared, the scan's max dropped a NaN that came
// second while the reduction propagated it.
TEST(KernelFunctors, ComplexMaxAndMinPropagateNaN) {
  using C = complex64_t;
  for (auto values : std::vector<std::vector<C>>{
           {C(1, 1), C(kNaNf, 0), C(2, 0)},
           {C(kNaNf, 0), C(1, 1), C(2, 0)},
           {C(1, 1), C(2, 0), C(0, kNaNf)}}) {
    array x(values.begin(), {3});
    int first = 0;
    while (!is_nan(values[first])) {
      ++first;
    }
    SCOPED_TRACE(first);
    EXPECT_TRUE(is_nan(max(x).item<C>()));
    EXPECT_TRUE(is_nan(min(x).item<C>()));
    auto cmax = complex_values(cummax(x));
    auto cmin = complex_values(cummin(x));
    auto rmax = complex_values(cummax(x, 0, /*reverse=*/true));
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(is_nan(cmax[i]), i >= first) << "cummax " << i;
      EXPECT_EQ(is_nan(cmin[i]), i >= first) << "cummin " << i;
      EXPECT_EQ(is_nan(rmax[i]), i <= first) << "reverse cummax " << i;
    }
    // The elementwise ops combine the same way.
    array y(std::vector<C>{C(5, 0), C(5, 0), C(5, 0)}.begin(), {3});
    auto mx = complex_values(maximum(x, y));
    auto mn = complex_values(minimum(y, x));
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(is_nan(mx[i]), i == first) << "maximum " << i;
      EXPECT_EQ(is_nan(mn[i]), i == first) << "minimum " << i;
    }
  }
  // Without NaNs: lexicographic.
  array z(std::vector<C>{C(1, 2), C(1, 3), C(0, 9)}.begin(), {3});
  EXPECT_EQ(max(z).item<C>(), C(1, 3));
  EXPECT_EQ(min(z).item<C>(), C(0, 9));
  auto cm = complex_values(cummax(z));
  EXPECT_EQ(cm, (std::vector<C>{C(1, 2), C(1, 3), C(1, 3)}));
}

TEST(KernelFunctors, RealMaxAndMinPropagateNaN) {
  for (Dtype t : {float32, float64, float16, bfloat16}) {
    SCOPED_TRACE(t);
    auto x = astype(array({1.0, kNaN, 3.0}), t);
    EXPECT_TRUE(std::isnan(max(x).item<double>()));
    EXPECT_TRUE(std::isnan(min(x).item<double>()));
    expect_close(cummax(x), {1, kNaN, kNaN});
    expect_close(cummin(x, 0, true), {kNaN, kNaN, 3});
    expect_close(maximum(x, array(2.0, t)), {2, kNaN, 3});
  }
}

// The scan's own log-add-exp gave logcumsumexp([inf, inf]) = [inf, nan].
TEST(KernelFunctors, LogAddExpAtInfinities) {
  for (Dtype t : {float32, float64}) {
    SCOPED_TRACE(t);
    auto inf = array(kInf, t);
    EXPECT_EQ(logaddexp(inf, inf).item<double>(), kInf);
    EXPECT_EQ(logaddexp(-inf, -inf).item<double>(), -kInf);
    EXPECT_EQ(logaddexp(inf, -inf).item<double>(), kInf);
    EXPECT_EQ(logaddexp(-inf, inf).item<double>(), kInf);
    EXPECT_EQ(logaddexp(array(1.0, t), -inf).item<double>(), 1.0);
    EXPECT_TRUE(std::isnan(logaddexp(inf, array(kNaN, t)).item<double>()));
    auto scan = [&](std::vector<double> v, bool reverse = false) {
      return to_vector<double>(
          logcumsumexp(astype(array(v.begin(), {(int)v.size()}), t), 0,
                       reverse));
    };
    EXPECT_EQ(scan({kInf, kInf}), (std::vector<double>{kInf, kInf}));
    EXPECT_EQ(scan({kInf, kInf}, true), (std::vector<double>{kInf, kInf}));
    EXPECT_EQ(scan({-kInf, -kInf}), (std::vector<double>{-kInf, -kInf}));
    EXPECT_EQ(scan({kInf, -kInf, 2.0}),
              (std::vector<double>{kInf, kInf, kInf}));
    EXPECT_EQ(scan({-kInf, 0.0, -kInf}), (std::vector<double>{-kInf, 0, 0}));
    auto n = scan({1.0, kNaN, kInf});
    EXPECT_EQ(n[0], 1.0);
    EXPECT_TRUE(std::isnan(n[1]) && std::isnan(n[2]));
    // And the reduction: logsumexp over the same values.
    auto v = astype(array({kInf, kInf}), t);
    EXPECT_EQ(logsumexp(v).item<double>(), kInf);
  }
  // Finite values: each prefix is the chain of elementwise logaddexp.
  auto x = array({0.5, -2.0, 3.0, 1.0, -0.25}, float64);
  auto got = to_vector<double>(logcumsumexp(x));
  array acc = slice(x, {0}, {1});
  for (int i = 0; i < 5; ++i) {
    if (i > 0) {
      acc = logaddexp(acc, slice(x, {i}, {i + 1}));
    }
    EXPECT_DOUBLE_EQ(got[i], acc.item<double>()) << i;
  }
}

// One accumulator rule for reductions and scans, ops and kernels.
TEST(KernelFunctors, SumDtypeRule) {
  EXPECT_EQ(sum_dtype(bool_), int32);
  EXPECT_EQ(sum_dtype(int8), int32);
  EXPECT_EQ(sum_dtype(int16), int32);
  EXPECT_EQ(sum_dtype(uint8), uint32);
  EXPECT_EQ(sum_dtype(uint16), uint32);
  for (Dtype t : {int32, int64, uint32, uint64, float16, bfloat16, float32,
                  float64, complex64}) {
    EXPECT_EQ(sum_dtype(t), t);
  }
  static_assert(std::is_same_v<sum_type_t<int8_t>, int32_t>);
  static_assert(std::is_same_v<sum_type_t<uint16_t>, uint32_t>);
  static_assert(std::is_same_v<sum_type_t<float16_t>, float16_t>);
  for (Dtype t : {bool_, int8, int16, uint8, uint16, int32, uint64, float16}) {
    SCOPED_TRACE(t);
    // 100 + 100 + 100 overflows int8 but not its accumulator.
    auto x = astype(array({100, 100, 100}), t);
    EXPECT_EQ(sum(x).dtype(), sum_dtype(t));
    EXPECT_EQ(prod(x).dtype(), sum_dtype(t));
    EXPECT_EQ(cumsum(x).dtype(), sum_dtype(t));
    EXPECT_EQ(cumprod(x).dtype(), sum_dtype(t));
    EXPECT_EQ(cummax(x).dtype(), t);
    double one = t == bool_ ? 1 : 100;
    EXPECT_EQ(sum(x).item<double>(), 3 * one);
    EXPECT_EQ(to_vector<double>(cumsum(x)),
              (std::vector<double>{one, 2 * one, 3 * one}));
  }
}

TEST(KernelFunctors, CollapseDims) {
  using detail::collapse_dims;
  using detail::Dims;
  // Row-major (3, 4, 5) with one broadcast operand: the two inner dims
  // merge for both; the broadcast axis keeps the outer one apart.
  Dims shape{3, 4, 5};
  std::array<Strides, 2> st{Strides{20, 5, 1}, Strides{0, 5, 1}};
  collapse_dims(shape, st);
  EXPECT_EQ(shape, (Dims{3, 20}));
  EXPECT_EQ(st[0], (Strides{20, 1}));
  EXPECT_EQ(st[1], (Strides{0, 1}));
  // Size-1 dimensions disappear; everything merges.
  shape = {1, 3, 1, 4};
  std::vector<Strides> v{Strides{12, 4, 4, 1}};
  collapse_dims(shape, v);
  EXPECT_EQ(shape, (Dims{12}));
  EXPECT_EQ(v[0], (Strides{1}));
  // A transposed operand merges nothing.
  shape = {3, 4};
  st = {Strides{1, 3}, Strides{4, 1}};
  collapse_dims(shape, st);
  EXPECT_EQ(shape, (Dims{3, 4}));
  // No dimension left: {1} with stride 0.
  shape = {1, 1};
  st = {Strides{5, 7}, Strides{1, 1}};
  collapse_dims(shape, st);
  EXPECT_EQ(shape, (Dims{1}));
  EXPECT_EQ(st[0], (Strides{0}));
  shape = {};
  v = {Strides{}};
  collapse_dims(shape, v);
  EXPECT_EQ(shape, (Dims{1}));
  EXPECT_EQ(v[0], (Strides{0}));
  // Merged sizes pass int32.
  shape = {1 << 16, 1 << 16};
  v = {Strides{1 << 16, 1}};
  collapse_dims(shape, v);
  EXPECT_EQ(shape, (Dims{int64_t(1) << 32}));
}

TEST(KernelFunctors, ViewDataSize) {
  using detail::view_data_size;
  EXPECT_EQ(view_data_size({3, 4}, {4, 1}), 12u);   // dense
  EXPECT_EQ(view_data_size({3, 4}, {1, 3}), 12u);   // dense, transposed
  EXPECT_EQ(view_data_size({3, 4}, {0, 0}), 1u);    // broadcast scalar
  EXPECT_EQ(view_data_size({3, 4}, {8, 2}), 23u);   // gaps: the span
  EXPECT_EQ(view_data_size({4}, {-1}), 5u);         // reversed: never size
  EXPECT_EQ(view_data_size({2, 3}, {0, 2}), 5u);    // broadcast + gap
  // Spans exactly `size` slots without filling them: must not pass as
  // contiguous.
  EXPECT_EQ(view_data_size({2, 2}, {0, 3}), 5u);
  EXPECT_EQ(view_data_size({0, 3}, {3, 1}), 0u);
  EXPECT_EQ(view_data_size({}, {}), 1u);
}

// abs(-0.0) is +0.0 (NumPy); the generated kernels always said so, the
// eager functor did not.
TEST(KernelFunctors, AbsOfNegativeZero) {
  for (Dtype t : {float16, bfloat16, float32, float64}) {
    auto a = abs(astype(array({-0.0, -2.0}), t));
    auto v = to_vector<double>(a);
    EXPECT_FALSE(std::signbit(v[0])) << t;
    EXPECT_EQ(v[1], 2.0);
  }
}

namespace {

// Distance in float32 ulps of `got` from `ref`, with results below the
// normal range compared absolutely (1e-37 counts as one ulp there).
double ulps(float got, double ref) {
  if (std::isnan(ref) || std::isnan(got)) {
    return std::isnan(ref) && std::isnan(got) ? 0 : 1e30;
  }
  float r = static_cast<float>(ref);  // overflow: float's inf
  if (std::isinf(r) || std::isinf(got)) {
    return got == r ? 0 : 1e30;
  }
  double mag = std::max(std::abs(ref), 1.1754943508222875e-38);
  double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(mag)) - 23);
  double d = std::abs(static_cast<double>(got) - ref);
  return d <= 1e-37 ? std::min(d / ulp, 1.0) : d / ulp;
}

std::vector<float> grid(float lo, float hi, int n) {
  std::vector<float> v;
  for (int i = 0; i <= n; ++i) {
    v.push_back(lo + (hi - lo) * static_cast<float>(i) / n);
  }
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-8f, -1e-8f, 0.3f, -0.3f,
                  88.7f, 88.73f, -87.2f, -87.4f, -103.9f, -104.0f, 1e30f,
                  -1e30f, kInff, -kInff, kNaNf}) {
    v.push_back(x);
  }
  return v;
}

struct FloatCase {
  const char* name;
  float (*functor)(float);
  double (*reference)(double);
  float lo, hi;
  double max_ulps;  // against the float64 reference
};

}  // namespace

// math.h's branch-free float32 exponentials against float64 libm, and the
// eager kernels' vectorized path (SLEEF or libmvec, where the build has
// one) against the scalar functor it stands in for.
TEST(KernelFunctors, Float32ExponentialsAgree) {
  std::vector<FloatCase> cases = {
      {"exp", [](float x) { return detail::Exp{}(x); },
       [](double x) { return std::exp(x); }, -110, 95, 2},
      {"expm1", [](float x) { return detail::Expm1{}(x); },
       [](double x) { return std::expm1(x); }, -95, 95, 2},
      {"tanh", [](float x) { return detail::Tanh{}(x); },
       [](double x) { return std::tanh(x); }, -12, 12, 3},
      {"sigmoid", [](float x) { return detail::Sigmoid{}(x); },
       [](double x) {
         return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
       },
       -90, 90, 3},
  };
  auto simd = [](const std::string& n) {
    if (n == "exp") return cpu::simd::f32<detail::Exp>();
    if (n == "expm1") return cpu::simd::f32<detail::Expm1>();
    if (n == "tanh") return cpu::simd::f32<detail::Tanh>();
    return cpu::simd::f32<detail::Sigmoid>();
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto xs = grid(c.lo, c.hi, 200000);
    std::vector<float> vec(xs.size());
    auto k = simd(c.name);
    if (k) {
      k(xs.data(), vec.data(), static_cast<int64_t>(xs.size()));
    }
    double worst_ref = 0, worst_vec = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      float got = c.functor(xs[i]);
      worst_ref = std::max(worst_ref, ulps(got, c.reference(xs[i])));
      if (k) {
        // Both within a few ulps of the truth (SLEEF 1, libmvec 4).
        worst_vec = std::max(worst_vec, ulps(got, vec[i]));
      }
    }
    EXPECT_LE(worst_ref, c.max_ulps);
    if (k) {
      EXPECT_LE(worst_vec, c.max_ulps + 4);
    }
  }
  // Special values exactly.
  EXPECT_EQ(detail::Exp{}(-kInff), 0.0f);
  EXPECT_EQ(detail::Exp{}(kInff), kInff);
  EXPECT_EQ(detail::Expm1{}(-kInff), -1.0f);
  EXPECT_TRUE(std::signbit(detail::Expm1{}(-0.0f)));
  EXPECT_TRUE(std::signbit(detail::Tanh{}(-0.0f)));
  EXPECT_EQ(detail::Tanh{}(kInff), 1.0f);
  EXPECT_EQ(detail::Tanh{}(-kInff), -1.0f);
  EXPECT_EQ(detail::Sigmoid{}(-kInff), 0.0f);
  EXPECT_EQ(detail::Sigmoid{}(kInff), 1.0f);
  for (auto f : {+[](float x) { return detail::Exp{}(x); },
                 +[](float x) { return detail::Expm1{}(x); },
                 +[](float x) { return detail::Tanh{}(x); },
                 +[](float x) { return detail::Sigmoid{}(x); }}) {
    EXPECT_TRUE(std::isnan(f(kNaNf)));
  }
  // Subnormal results of exp.
  EXPECT_GT(detail::Exp{}(-100.0f), 0.0f);
  EXPECT_NEAR(detail::Exp{}(-100.0f), std::exp(-100.0), 2e-45);
}

// Eager results of the vector path (contiguous, strided through blocks,
// half types through blocks) against the scalar functors, the reference.
TEST(KernelFunctors, EagerScalarAndVectorPathsAgree) {
  auto base = linspace(-20.0, 20.0, 4002, float32);
  auto strided = slice(base, {0}, {4002}, {2});
  auto dense = strided + 0.0f;
  auto half = astype(strided, float16);
  for (auto op : std::vector<std::function<array(const array&)>>{
           [](const array& a) { return exp(a); },
           [](const array& a) { return expm1(a); },
           [](const array& a) { return tanh(a); },
           [](const array& a) { return sigmoid(a); },
           [](const array& a) { return sin(a); },
           [](const array& a) { return log1p(abs(a)); }}) {
    for (auto& in : {strided, dense, half}) {
      auto vec = op(in);
      vec.eval();
      cpu::simd::set_enabled(false);
      auto ref = op(in);
      ref.eval();
      cpu::simd::set_enabled(true);
      auto v = to_vector<float>(vec), r = to_vector<float>(ref);
      double tol = in.dtype() == float16 ? 1 : 6;  // half: a rounding step
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] == r[i] || (std::isnan(v[i]) && std::isnan(r[i]))) {
          continue;  // including overflow to inf in half
        }
        double d = in.dtype() == float16
                       ? std::abs(v[i] - r[i]) / std::max(std::abs(r[i]), 6e-5f) /
                             9.77e-4
                       : ulps(v[i], r[i]);
        ASSERT_LE(d, tol) << i << ": " << v[i] << " vs " << r[i];
      }
    }
  }
}
