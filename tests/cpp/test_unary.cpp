// Unary elementwise ops against <cmath> references in double precision, for
// each supported dtype and every kernel path (flat, strided, broadcast).
#include <cmath>
#include <complex>
#include <functional>
#include <limits>

#include "test_inputs.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;
using namespace fluxion::test::inputs;

namespace {

using cd = std::complex<double>;

// How an op treats dtypes.
enum class Kind {
  Inexact,      // ints and bools become float32; complex supported
  RealInexact,  // as Inexact, but complex is an error
  Same,         // keeps the dtype
  Predicate,    // bool output
};

struct UnaryCase {
  const char* name;
  std::function<array(const array&)> fn;
  std::function<double(double)> ref;
  double lo, hi;  // the real domain tested
  Kind kind;
  // Complex reference; empty when complex is an error (or not tested).
  std::function<cd(cd)> cref;
};

double erfinv_ref(double y) {
  if (std::isnan(y) || y <= -1 || y >= 1) {
    return y == -1 ? -kInf : (y == 1 ? kInf : kNaN);
  }
  // Bisection on erf: slow but independent of the implementation tested.
  double lo = -6, hi = 6;
  for (int i = 0; i < 200; ++i) {
    double mid = 0.5 * (lo + hi);
    (std::erf(mid) < y ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

std::vector<UnaryCase> cases() {
  auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  return {
      {"exp", [](const array& a) { return exp(a); },
       [](double x) { return std::exp(x); }, -10, 10, Kind::Inexact,
       [](cd z) { return std::exp(z); }},
      {"expm1",
       [](const array& a) { return expm1(a); },
       [](double x) { return std::expm1(x); },
       -5,
       5,
       Kind::RealInexact,
       {}},
      {"log", [](const array& a) { return log(a); },
       [](double x) { return std::log(x); }, 0.01, 50, Kind::Inexact,
       [](cd z) { return std::log(z); }},
      {"log1p",
       [](const array& a) { return log1p(a); },
       [](double x) { return std::log1p(x); },
       -0.9,
       50,
       Kind::RealInexact,
       {}},
      {"log2",
       [](const array& a) { return log2(a); },
       [](double x) { return std::log2(x); },
       0.01,
       50,
       Kind::RealInexact,
       {}},
      {"log10", [](const array& a) { return log10(a); },
       [](double x) { return std::log10(x); }, 0.01, 50, Kind::Inexact,
       [](cd z) { return std::log10(z); }},
      {"sqrt", [](const array& a) { return sqrt(a); },
       [](double x) { return std::sqrt(x); }, 0, 50, Kind::Inexact,
       [](cd z) { return std::sqrt(z); }},
      {"rsqrt", [](const array& a) { return rsqrt(a); },
       [](double x) { return 1.0 / std::sqrt(x); }, 0.01, 50, Kind::Inexact,
       [](cd z) { return 1.0 / std::sqrt(z); }},
      {"reciprocal", [](const array& a) { return reciprocal(a); },
       [](double x) { return 1.0 / x; }, 0.1, 20, Kind::Inexact,
       [](cd z) { return 1.0 / z; }},
      {"sin", [](const array& a) { return sin(a); },
       [](double x) { return std::sin(x); }, -10, 10, Kind::Inexact,
       [](cd z) { return std::sin(z); }},
      {"cos", [](const array& a) { return cos(a); },
       [](double x) { return std::cos(x); }, -10, 10, Kind::Inexact,
       [](cd z) { return std::cos(z); }},
      {"tan", [](const array& a) { return tan(a); },
       [](double x) { return std::tan(x); }, -1.4, 1.4, Kind::Inexact,
       [](cd z) { return std::tan(z); }},
      {"arcsin", [](const array& a) { return arcsin(a); },
       [](double x) { return std::asin(x); }, -1, 1, Kind::Inexact,
       [](cd z) { return std::asin(z); }},
      {"arccos", [](const array& a) { return arccos(a); },
       [](double x) { return std::acos(x); }, -1, 1, Kind::Inexact,
       [](cd z) { return std::acos(z); }},
      {"arctan", [](const array& a) { return arctan(a); },
       [](double x) { return std::atan(x); }, -20, 20, Kind::Inexact,
       [](cd z) { return std::atan(z); }},
      {"sinh", [](const array& a) { return sinh(a); },
       [](double x) { return std::sinh(x); }, -5, 5, Kind::Inexact,
       [](cd z) { return std::sinh(z); }},
      {"cosh", [](const array& a) { return cosh(a); },
       [](double x) { return std::cosh(x); }, -5, 5, Kind::Inexact,
       [](cd z) { return std::cosh(z); }},
      {"tanh", [](const array& a) { return tanh(a); },
       [](double x) { return std::tanh(x); }, -5, 5, Kind::Inexact,
       [](cd z) { return std::tanh(z); }},
      {"arcsinh", [](const array& a) { return arcsinh(a); },
       [](double x) { return std::asinh(x); }, -20, 20, Kind::Inexact,
       [](cd z) { return std::asinh(z); }},
      {"arccosh", [](const array& a) { return arccosh(a); },
       [](double x) { return std::acosh(x); }, 1, 20, Kind::Inexact,
       [](cd z) { return std::acosh(z); }},
      {"arctanh", [](const array& a) { return arctanh(a); },
       [](double x) { return std::atanh(x); }, -0.95, 0.95, Kind::Inexact,
       [](cd z) { return std::atanh(z); }},
      // MLX rejects complex inputs to sigmoid.
      {"sigmoid", [](const array& a) { return sigmoid(a); }, sig, -20, 20,
       Kind::RealInexact, nullptr},
      {"erf",
       [](const array& a) { return erf(a); },
       [](double x) { return std::erf(x); },
       -3,
       3,
       Kind::RealInexact,
       {}},
      {"erfc",
       [](const array& a) { return erfc(a); },
       [](double x) { return std::erfc(x); },
       -3,
       9,
       Kind::RealInexact,
       {}},
      {"erfinv",
       [](const array& a) { return erfinv(a); },
       erfinv_ref,
       -0.99,
       0.99,
       Kind::RealInexact,
       {}},
      {"abs",
       [](const array& a) { return abs(a); },
       [](double x) { return std::abs(x); },
       -20,
       20,
       Kind::Same,
       {}},
      {"negative", [](const array& a) { return negative(a); },
       [](double x) { return -x; }, -20, 20, Kind::Same,
       [](cd z) { return -z; }},
      {"sign",
       [](const array& a) { return sign(a); },
       [](double x) { return std::isnan(x) ? x : double((x > 0) - (x < 0)); },
       -20,
       20,
       Kind::Same,
       {}},
      {"square", [](const array& a) { return square(a); },
       [](double x) { return x * x; }, -10, 10, Kind::Same,
       [](cd z) { return z * z; }},
      {"floor",
       [](const array& a) { return floor(a); },
       [](double x) { return std::floor(x); },
       -20,
       20,
       Kind::Same,
       {}},
      {"ceil",
       [](const array& a) { return ceil(a); },
       [](double x) { return std::ceil(x); },
       -20,
       20,
       Kind::Same,
       {}},
      {"round", [](const array& a) { return round(a); },
       [](double x) { return std::nearbyint(x); }, -20, 20, Kind::Same,
       [](cd z) {
         return cd(std::nearbyint(z.real()), std::nearbyint(z.imag()));
       }},
      {"conjugate", [](const array& a) { return conjugate(a); },
       [](double x) { return x; }, -20, 20, Kind::Same,
       [](cd z) { return std::conj(z); }},
      {"copy", [](const array& a) { return copy(a); },
       [](double x) { return x; }, -20, 20, Kind::Same, [](cd z) { return z; }},
      {"stop_gradient", [](const array& a) { return stop_gradient(a); },
       [](double x) { return x; }, -20, 20, Kind::Same, [](cd z) { return z; }},
      {"logical_not", [](const array& a) { return logical_not(a); },
       [](double x) { return double(x == 0); }, -3, 3, Kind::Predicate,
       [](cd z) { return cd(z == cd(0)); }},
      {"isnan", [](const array& a) { return isnan(a); },
       [](double x) { return double(std::isnan(x)); }, -3, 3, Kind::Predicate,
       [](cd) { return cd(0); }},
      {"isinf", [](const array& a) { return isinf(a); },
       [](double x) { return double(std::isinf(x)); }, -3, 3, Kind::Predicate,
       [](cd) { return cd(0); }},
      {"isfinite", [](const array& a) { return isfinite(a); },
       [](double x) { return double(std::isfinite(x)); }, -3, 3,
       Kind::Predicate, [](cd) { return cd(1); }},
  };
}

// n values spread over [lo, hi] (endpoints included), then rounded to `dt`.
std::vector<double> domain(double lo, double hi, int n, Dtype dt) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) {
    // A scrambled order so neighbours differ (catches index mix-ups).
    int k = (i * 7) % n;
    v[i] = lo + (hi - lo) * k / (n - 1);
  }
  return round_all(v, dt);
}

// Integer inputs inside the op's domain.
std::vector<double> int_domain(double lo, double hi, int n, Dtype dt) {
  std::vector<double> pool;
  for (int x = -3; x <= 5; ++x) {
    if (x >= lo && x <= hi && (x >= 0 || !is_unsigned(dt)) &&
        (dt != bool_ || x == 0 || x == 1)) {
      pool.push_back(x);
    }
  }
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) {
    v[i] = pool[(i * 5) % pool.size()];
  }
  return v;
}

struct Tol {
  double rtol, atol;
};
Tol tol_for(Dtype dt) {
  if (dt == float64) {
    return {1e-12, 1e-14};
  }
  if (dt == float16) {
    return {2e-3, 1e-4};
  }
  if (dt == bfloat16) {
    return {1.6e-2, 1e-3};
  }
  return {2e-6, 1e-7};
}

Dtype out_dtype(const UnaryCase& c, Dtype in) {
  switch (c.kind) {
    case Kind::Inexact:
    case Kind::RealInexact:
      return is_inexact(in) ? in : float32;
    case Kind::Same:
      return in;
    case Kind::Predicate:
      return bool_;
  }
  return in;
}

}  // namespace

TEST(UnaryOps, RealDtypesAndLayouts) {
  const Shape shape = {4, 6};
  for (auto& c : cases()) {
    for (Dtype dt : {float32, float64, float16, bfloat16, int8, int16, int32,
                     int64, uint8, uint16, uint32, uint64, bool_}) {
      std::string base = std::string(c.name) + " " + dtype_name(dt);
      if (dt == bool_ && std::string(c.name) == "negative") {
        continue;  // an error, tested below
      }
      auto v = is_inexact(dt) ? domain(c.lo, c.hi, 24, dt)
                              : int_domain(c.lo, c.hi, 24, dt);
      Dtype od = out_dtype(c, dt);
      std::vector<double> expected(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        expected[i] = round_to(c.ref(v[i]), od);
      }
      Tol t = is_inexact(od) ? tol_for(od) : Tol{0, 0};
      for (Layout l : all_layouts()) {
        auto a = make_array(v, shape, dt, l);
        auto out = c.fn(a);
        std::string what = base + " " + layout_name(l);
        ASSERT_EQ(out.dtype(), od) << what;
        ASSERT_EQ(out.shape(), shape) << what;
        expect_close(out, expected, t.rtol, t.atol, what);
      }
      // Rows broadcast down (stride 0) and a broadcast scalar.
      std::vector<double> row(v.begin(), v.begin() + 6), brow;
      for (int i = 0; i < 4; ++i) {
        brow.insert(brow.end(), expected.begin(), expected.begin() + 6);
      }
      auto b = broadcast_to(array(row.begin(), {1, 6}, dt), shape);
      expect_close(c.fn(b), brow, t.rtol, t.atol, base + " broadcast rows");
      auto s = broadcast_to(array(v[3], dt), {3, 5});
      expect_close(c.fn(s), std::vector<double>(15, expected[3]), t.rtol,
                   t.atol, base + " broadcast scalar");
      // A 0-d input.
      auto z = c.fn(array(v[5], dt));
      EXPECT_EQ(z.shape(), Shape{}) << base;
      expect_close(z, {expected[5]}, t.rtol, t.atol, base + " scalar");
      // Large enough to be split over threads (and to run vector kernels).
      std::vector<double> big(100003);
      std::vector<double> big_expected(big.size());
      for (size_t i = 0; i < big.size(); ++i) {
        big[i] = v[i % v.size()];
        big_expected[i] = expected[i % v.size()];
      }
      expect_close(c.fn(array(big.begin(), {100003}, dt)), big_expected, t.rtol,
                   t.atol, base + " large");
    }
  }
}

TEST(UnaryOps, Complex) {
  std::vector<complex64_t> v;
  for (int i = 0; i < 24; ++i) {
    v.emplace_back(0.3f * static_cast<float>((i * 7) % 11) - 1.4f,
                   0.25f * static_cast<float>((i * 5) % 9) - 1.0f);
  }
  for (auto& c : cases()) {
    if (!c.cref) {
      continue;
    }
    for (Layout l : all_layouts()) {
      auto a = make_array(v, {4, 6}, complex64, l);
      auto out = c.fn(a);
      std::string what = std::string(c.name) + " " + layout_name(l);
      if (c.kind == Kind::Predicate) {
        ASSERT_EQ(out.dtype(), bool_) << what;
        auto got = to_vector<bool>(out);
        for (size_t i = 0; i < v.size(); ++i) {
          EXPECT_EQ(got[i], c.cref(cd(v[i])).real() != 0) << what << " " << i;
        }
        continue;
      }
      ASSERT_EQ(out.dtype(), complex64) << what;
      auto got = to_vector<complex64_t>(out);
      for (size_t i = 0; i < v.size(); ++i) {
        cd ref = c.cref(cd(v[i]));
        EXPECT_LE(std::abs(cd(got[i]) - ref), 1e-5 * std::abs(ref) + 1e-6)
            << what << " at " << i << ": got " << got[i] << " expected " << ref;
      }
    }
  }
  // abs, real and imag give float32; sign is z/|z|.
  auto z = array({complex64_t(3, 4), complex64_t(0, 0), complex64_t(-1, 0)});
  EXPECT_EQ(abs(z).dtype(), float32);
  expect_close(abs(z), {5, 0, 1});
  expect_close(real(z), {3, 0, -1});
  expect_close(imag(z), {4, 0, 0});
  EXPECT_EQ(real(z).dtype(), float32);
  auto sg = to_vector<complex64_t>(sign(z));
  EXPECT_NEAR(sg[0].real(), 0.6, 1e-6);
  EXPECT_NEAR(sg[0].imag(), 0.8, 1e-6);
  EXPECT_EQ(sg[1], complex64_t(0, 0));
  EXPECT_EQ(sg[2], complex64_t(-1, 0));
  // isnan/isinf look at both parts.
  auto w =
      array({complex64_t(NAN, 0), complex64_t(0, INFINITY), complex64_t(1, 1)});
  expect_close(isnan(w), {1, 0, 0});
  expect_close(isinf(w), {0, 1, 0});
  expect_close(isfinite(w), {0, 0, 1});
  // real/imag of real inputs keep the dtype.
  auto r = array({1.5, -2.0});
  EXPECT_EQ(real(r).dtype(), float64);
  expect_close(real(r), {1.5, -2.0});
  expect_close(imag(r), {0, 0});
  EXPECT_EQ(imag(array({1, 2})).dtype(), int32);
}

TEST(UnaryOps, SpecialValues) {
  std::vector<double> sv = {kInf,   -kInf, kNaN, 0.0,  -0.0, 100.0,
                            -100.0, 1e-30, 1.0,  -1.0, 2.0};
  for (auto& c : cases()) {
    if (c.kind == Kind::Predicate && std::string(c.name) == "logical_not") {
      continue;  // NaN is truthy; checked below
    }
    for (Dtype dt : {float32, float64, float16}) {
      Dtype od = out_dtype(c, dt);
      std::vector<double> in = round_all(sv, dt), expected(in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        expected[i] = round_to(c.ref(in[i]), od);
      }
      // Contiguous (vector kernels) and strided (scalar functors) agree.
      for (Layout l : {Layout::RowMajor, Layout::Strided}) {
        auto out = c.fn(make_array(in, {11}, dt, l));
        auto got = to_vector<double>(out);
        for (size_t i = 0; i < in.size(); ++i) {
          std::string what = std::string(c.name) + " " + dtype_name(dt) + " " +
                             layout_name(l) + " x=" + std::to_string(in[i]);
          if (std::isnan(expected[i])) {
            EXPECT_TRUE(std::isnan(got[i])) << what << " got " << got[i];
          } else if (std::isinf(expected[i])) {
            EXPECT_EQ(got[i], expected[i]) << what;
          } else {
            Tol t = tol_for(od);
            // Tiny results (e.g. sigmoid(-100)) may flush to zero.
            EXPECT_NEAR(got[i], expected[i],
                        1e-30 + t.atol + t.rtol * std::abs(expected[i]))
                << what;
          }
        }
      }
    }
  }
  expect_close(logical_not(array({NAN, 0.0f, -0.0f, INFINITY})), {0, 1, 1, 0});
  // The sign of zero survives where it should.
  EXPECT_TRUE(std::signbit(negative(array(0.0f)).item<float>()));
  EXPECT_TRUE(std::signbit(floor(array(-0.0f)).item<float>()));
  EXPECT_TRUE(std::signbit(round(array(-0.4f)).item<float>()));
}

TEST(UnaryOps, IntegerEdgeCases) {
  // Wrapping like NumPy: -INT_MIN == INT_MIN, abs(INT_MIN) == INT_MIN.
  auto m = array({std::numeric_limits<int32_t>::min(), -5, 0, 7});
  expect_close(negative(m), {-2147483648.0, 5, 0, -7});
  expect_close(abs(m), {-2147483648.0, 5, 0, 7});
  expect_close(sign(m), {-1, -1, 0, 1});
  expect_close(square(array({200, -3}, int16)), {round_to(40000, int16), 9});
  auto u = array({0, 3, 255}, uint8);
  expect_close(negative(u), {0, 253, 1});
  expect_close(abs(u), {0, 3, 255});
  expect_close(sign(u), {0, 1, 1});
  EXPECT_EQ(floor(u).dtype(), uint8);
  EXPECT_EQ(round(u).dtype(), uint8);
  expect_close(round(array({-7, 9}), 2), {-7, 9});
  auto b = array({true, false});
  EXPECT_EQ(abs(b).dtype(), bool_);
  EXPECT_EQ(square(b).dtype(), bool_);
  expect_close(square(b), {1, 0});
  expect_close(sign(b), {1, 0});
  EXPECT_EQ(exp(b).dtype(), float32);
  expect_close(exp(b), {std::exp(1.0), 1.0});
  expect_close(logical_not(array({0, 2, -1})), {1, 0, 0});
  expect_close(isnan(array({1, 2}, int64)), {0, 0});
  expect_close(isfinite(array({1, 2}, uint16)), {1, 1});
}

TEST(UnaryOps, RoundDecimals) {
  // Half to even, like NumPy.
  expect_close(round(array({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 3.7f, -3.7f})),
               {0, 2, 2, 0, -2, 4, -4});
  expect_close(round(array({1.2345, -1.2355, 0.125}), 2), {1.23, -1.24, 0.12},
               0, 1e-12);
  expect_close(round(array({1234.5f, -1250.0f, 1350.0f}), -2),
               {1200, -1200, 1400});
  expect_close(round(array({1.25f, 2.675f}, float16), 1), {1.2, 2.7}, 2e-3);
  auto z = round(array({complex64_t(1.5f, -2.5f)}), 0);
  EXPECT_EQ(to_vector<complex64_t>(z)[0], complex64_t(2, -2));
}

TEST(UnaryOps, Errors) {
  auto z = array({complex64_t(1, 2)});
  for (auto& name_fn_ :
       std::vector<std::pair<std::string, std::function<array(const array&)>>>{
           {"expm1", [](const array& a) { return expm1(a); }},
           {"erf", [](const array& a) { return erf(a); }},
           {"erfc", [](const array& a) { return erfc(a); }},
           {"erfinv", [](const array& a) { return erfinv(a); }},
           {"sigmoid", [](const array& a) { return sigmoid(a); }},
           {"floor", [](const array& a) { return floor(a); }},
           {"ceil", [](const array& a) { return ceil(a); }}}) {
    [[maybe_unused]] auto& name = std::get<0>(name_fn_);
    [[maybe_unused]] auto& fn = std::get<1>(name_fn_);
    expect_error<std::invalid_argument>(
        [&] { fn(z); }, "[" + name + "] Not supported for complex64 inputs.");
  }
  // log1p and log2 take complex64 (as MLX).
  expect_close(real(log1p(z)), {0.5 * std::log(8.0)}, 1e-6);
  expect_close(imag(log1p(z)), {std::atan2(2.0, 2.0)}, 1e-6);
  expect_close(real(log2(z)), {0.5 * std::log2(5.0)}, 1e-6);
  expect_error<std::invalid_argument>(
      [] { negative(array({true})); },
      "[negative] Not supported for bool; use logical_not instead.");
  expect_error<std::invalid_argument>(
      [] { -array(false); },
      "[negative] Not supported for bool; use logical_not instead.");
}

// erfc keeps its relative accuracy in the tail, where 1 - erf(x) has
// rounded to 0 (float32 past x = 4, float64 past 6), down to the
// subnormals; and erfc(-x) = 2 - erfc(x) without a loss.
TEST(UnaryOps, ErfcKeepsTheTail) {
  for (Dtype dt : {float32, float64}) {
    double top = dt == float32 ? 9.0 : 26.0;
    std::vector<double> x;
    for (double v = -6; v <= top; v += 0.25) {
      x.push_back(v);
    }
    auto got = to_vector<double>(erfc(array(x.begin(), {int(x.size())}, dt)));
    double rtol = dt == float32 ? 1e-6 : 1e-14;
    for (size_t i = 0; i < x.size(); ++i) {
      double want = std::erfc(round_to(x[i], dt));
      if (dt == float32) {
        want = static_cast<float>(want);
      }
      EXPECT_NEAR(got[i], want, rtol * want) << dtype_name(dt) << " " << x[i];
    }
    // Where erf's complement has nothing left.
    auto one_minus_erf =
        to_vector<double>(subtract(array(1.0, dt), erf(array(top - 1, dt))));
    EXPECT_EQ(one_minus_erf[0], 0.0) << dtype_name(dt);
  }
  EXPECT_EQ(erfc(array(std::numeric_limits<float>::infinity())).item<float>(),
            0.0f);
  EXPECT_EQ(erfc(array(-std::numeric_limits<float>::infinity())).item<float>(),
            2.0f);
  EXPECT_TRUE(std::isnan(erfc(array(NAN)).item<float>()));
  // Integers become float32, as erf's.
  EXPECT_EQ(erfc(array({0, 1})).dtype(), float32);
}

// An intermediate that nothing else holds lends its buffer to the next op:
// a long chain over a 4M-element array needs at most a few buffers at once.
TEST(UnaryOps, BufferDonation) {
  const int n = 1 << 22;
  const size_t buf = n * sizeof(float);
  std::vector<float> v(n, 0.5f);
  auto a = array(v.begin(), {n});
  a.eval();
  {
    // exp(a + 1): the sum is donated to exp.
    auto y = exp(a + 1.0f);
    reset_peak_memory();
    size_t before = get_active_memory();
    y.eval();
    EXPECT_LE(get_peak_memory() - before, buf + (1 << 16));
    EXPECT_NEAR(to_vector<float>(y)[n - 1], std::exp(1.5), 1e-5);
  }
  auto x = a;
  for (int i = 0; i < 20; ++i) {
    x = sin(x * 0.5f + 0.25f);
    x = exp(x) - 1.0f;
    x = sqrt(abs(x)) * 2.0f;
  }
  reset_peak_memory();
  size_t before = get_active_memory();
  x.eval();
  // One buffer for the first result (`a` itself is held), then every op
  // writes in place; without donation each op would need a second one.
  EXPECT_LE(get_peak_memory() - before, buf + (1 << 16))
      << "peak " << get_peak_memory() << " before " << before;
  double r = 0.5;
  for (int i = 0; i < 20; ++i) {
    r = std::sin(r * 0.5 + 0.25);
    r = std::exp(r) - 1.0;
    r = std::sqrt(std::abs(r)) * 2.0;
  }
  auto got = to_vector<float>(x);
  EXPECT_NEAR(got[0], r, 1e-4);
  EXPECT_NEAR(got[n - 1], r, 1e-4);
  // A buffer someone else still holds is not overwritten.
  auto held = a + 1.0f;
  held.eval();
  auto e = exp(held);
  e.eval();
  EXPECT_FLOAT_EQ(to_vector<float>(held)[0], 1.5f);
  EXPECT_FLOAT_EQ(to_vector<float>(e)[0], std::exp(1.5f));
}
