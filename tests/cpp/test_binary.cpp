// Binary elementwise ops against double-precision references, for each
// supported dtype, on every pairing of layouts the kernels distinguish
// (flat, scalar-vector, strided), with promotion and weak scalars.
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

enum class Kind {
  Arith,    // output = promoted input dtype
  Float,    // output = at least float32
  Compare,  // bool output
  Logical,  // inputs read as bools, bool output
  Bitwise,  // integers and bools only
};

enum Domain {
  kAny,
  kNonZeroB,    // b != 0
  kSmallPower,  // base in [-3, 3], exponent in [0, 5]
  kShift,       // b in [0, 5]
};

struct BinaryCase {
  const char* name;
  std::function<array(const array&, const array&)> fn;
  std::function<double(double, double)> ref;
  Kind kind;
  Domain domain;
  bool complex_ok;
  bool float_ok;
};

double py_floor_div(double a, double b) { return std::floor(a / b); }
double py_mod(double a, double b) { return a - b * std::floor(a / b); }

std::vector<BinaryCase> cases() {
  return {
      {"add", [](auto& a, auto& b) { return add(a, b); },
       [](double a, double b) { return a + b; }, Kind::Arith, kAny, true, true},
      {"subtract", [](auto& a, auto& b) { return subtract(a, b); },
       [](double a, double b) { return a - b; }, Kind::Arith, kAny, true, true},
      {"multiply", [](auto& a, auto& b) { return multiply(a, b); },
       [](double a, double b) { return a * b; }, Kind::Arith, kAny, true, true},
      {"divide", [](auto& a, auto& b) { return divide(a, b); },
       [](double a, double b) { return a / b; }, Kind::Float, kNonZeroB, true,
       true},
      {"floor_divide", [](auto& a, auto& b) { return floor_divide(a, b); },
       py_floor_div, Kind::Arith, kNonZeroB, false, true},
      {"remainder", [](auto& a, auto& b) { return remainder(a, b); }, py_mod,
       Kind::Arith, kNonZeroB, false, true},
      {"power", [](auto& a, auto& b) { return power(a, b); },
       [](double a, double b) { return std::pow(a, b); }, Kind::Arith,
       kSmallPower, true, true},
      {"maximum", [](auto& a, auto& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }, Kind::Arith, kAny,
       true, true},
      {"minimum", [](auto& a, auto& b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }, Kind::Arith, kAny,
       true, true},
      {"arctan2", [](auto& a, auto& b) { return arctan2(a, b); },
       [](double a, double b) { return std::atan2(a, b); }, Kind::Float, kAny,
       false, true},
      {"logaddexp", [](auto& a, auto& b) { return logaddexp(a, b); },
       [](double a, double b) { return std::log(std::exp(a) + std::exp(b)); },
       Kind::Float, kAny, false, true},
      {"equal", [](auto& a, auto& b) { return equal(a, b); },
       [](double a, double b) { return double(a == b); }, Kind::Compare, kAny,
       true, true},
      {"not_equal", [](auto& a, auto& b) { return not_equal(a, b); },
       [](double a, double b) { return double(a != b); }, Kind::Compare, kAny,
       true, true},
      {"less", [](auto& a, auto& b) { return less(a, b); },
       [](double a, double b) { return double(a < b); }, Kind::Compare, kAny,
       true, true},
      {"less_equal", [](auto& a, auto& b) { return less_equal(a, b); },
       [](double a, double b) { return double(a <= b); }, Kind::Compare, kAny,
       true, true},
      {"greater", [](auto& a, auto& b) { return greater(a, b); },
       [](double a, double b) { return double(a > b); }, Kind::Compare, kAny,
       true, true},
      {"greater_equal", [](auto& a, auto& b) { return greater_equal(a, b); },
       [](double a, double b) { return double(a >= b); }, Kind::Compare, kAny,
       true, true},
      {"logical_and", [](auto& a, auto& b) { return logical_and(a, b); },
       [](double a, double b) { return double(a != 0 && b != 0); },
       Kind::Logical, kAny, true, true},
      {"logical_or", [](auto& a, auto& b) { return logical_or(a, b); },
       [](double a, double b) { return double(a != 0 || b != 0); },
       Kind::Logical, kAny, true, true},
      {"bitwise_and", [](auto& a, auto& b) { return bitwise_and(a, b); },
       [](double a, double b) {
         return double(static_cast<int64_t>(a) & static_cast<int64_t>(b));
       },
       Kind::Bitwise, kAny, false, false},
      {"bitwise_or", [](auto& a, auto& b) { return bitwise_or(a, b); },
       [](double a, double b) {
         return double(static_cast<int64_t>(a) | static_cast<int64_t>(b));
       },
       Kind::Bitwise, kAny, false, false},
      {"bitwise_xor", [](auto& a, auto& b) { return bitwise_xor(a, b); },
       [](double a, double b) {
         return double(static_cast<int64_t>(a) ^ static_cast<int64_t>(b));
       },
       Kind::Bitwise, kAny, false, false},
      {"left_shift", [](auto& a, auto& b) { return left_shift(a, b); },
       [](double a, double b) { return a * std::pow(2.0, b); }, Kind::Bitwise,
       kShift, false, false},
      {"right_shift", [](auto& a, auto& b) { return right_shift(a, b); },
       [](double a, double b) { return std::floor(a / std::pow(2.0, b)); },
       Kind::Bitwise, kShift, false, false},
  };
}

const std::vector<Dtype> kRealDtypes = {
    float32, float64, float16, bfloat16, int8,   int16, int32,
    int64,   uint8,   uint16,  uint32,   uint64, bool_};

// Inputs for one case and dtype: n values each, inside the domain.
void make_inputs(const BinaryCase& c, Dtype dt, int n, std::vector<double>& a,
                 std::vector<double>& b) {
  a.resize(n);
  b.resize(n);
  const bool is_float = is_inexact(dt);
  for (int i = 0; i < n; ++i) {
    double x = static_cast<double>((i * 7) % 23) - 11;
    double y = static_cast<double>((i * 5 + 3) % 19) - 9;
    if (c.domain == kSmallPower) {
      x = static_cast<double>((i * 7) % 7) - 3;
      y = static_cast<double>((i * 3) % 6);
    } else if (c.domain == kShift) {
      y = static_cast<double>((i * 3) % 6);
    }
    if (is_float && c.domain != kSmallPower) {
      x *= 0.25;
      y *= 0.5;
    }
    if (is_unsigned(dt)) {
      x = std::abs(x);
      y = std::abs(y);
    }
    if (dt == bool_) {
      x = (i % 3) != 0;
      y = (i % 2) != 0;
      if (c.domain == kNonZeroB || c.domain == kShift) {
        y = 1;
      }
    }
    if (c.domain == kNonZeroB && y == 0) {
      y = is_float ? 1.5 : 3;
    }
    // Equal pairs exercise ==, <= and friends.
    if (i % 5 == 0 && c.domain == kAny) {
      y = x;
    }
    a[i] = round_to(x, dt);
    b[i] = round_to(y, dt);
  }
}

Dtype out_dtype(const BinaryCase& c, Dtype t) {
  switch (c.kind) {
    case Kind::Arith:
    case Kind::Bitwise:
      return t;
    case Kind::Float:
      return at_least_float(t);
    case Kind::Compare:
    case Kind::Logical:
      return bool_;
  }
  return t;
}

bool supports(const BinaryCase& c, Dtype dt) {
  std::string n = c.name;
  if (dt == bool_ && n == "subtract") {
    return false;  // an error
  }
  if (is_inexact(dt) && !c.float_ok) {
    return false;
  }
  return true;
}

// The reference in the output's arithmetic: bools combine as bools, small
// integers wrap.
double reference(const BinaryCase& c, Dtype dt, double x, double y) {
  std::string n = c.name;
  Dtype od = out_dtype(c, dt);
  if (dt == bool_ && c.kind == Kind::Arith) {
    bool p = x != 0, q = y != 0;
    if (n == "add" || n == "maximum") {
      return p || q;
    }
    if (n == "multiply" || n == "minimum" || n == "floor_divide") {
      return p && q;
    }
    if (n == "remainder") {
      return 0;
    }
    if (n == "power") {
      return p || !q;
    }
  }
  if (dt == bool_ && (n == "left_shift" || n == "right_shift")) {
    return (x != 0) && (y == 0);
  }
  return round_to(c.ref(x, y), od);
}

double tol_for(Dtype dt) {
  if (dt == float16) {
    return 2e-3;
  }
  if (dt == bfloat16) {
    return 1.6e-2;
  }
  if (dt == float32) {
    return 2e-6;
  }
  if (dt == float64) {
    return 1e-12;
  }
  return 0;
}

struct Pairing {
  std::string name;
  array a, b;
};

// Every pairing of layouts the kernel treats differently.
std::vector<Pairing> pairings(const std::vector<double>& a,
                              const std::vector<double>& b, Dtype dt,
                              const Shape& shape) {
  std::vector<Pairing> out;
  for (Layout la : all_layouts()) {
    for (Layout lb : {Layout::RowMajor, Layout::Transposed, Layout::Strided}) {
      out.push_back({std::string(layout_name(la)) + "+" + layout_name(lb),
                     make_array(a, shape, dt, la),
                     make_array(b, shape, dt, lb)});
    }
  }
  return out;
}

}  // namespace

TEST(BinaryOps, SameDtypeAllLayouts) {
  const Shape shape = {4, 6};
  for (auto& c : cases()) {
    for (Dtype dt : kRealDtypes) {
      if (!supports(c, dt)) {
        continue;
      }
      std::vector<double> a, b;
      make_inputs(c, dt, 24, a, b);
      Dtype od = out_dtype(c, dt);
      std::vector<double> expected(24);
      for (int i = 0; i < 24; ++i) {
        expected[i] = reference(c, dt, a[i], b[i]);
      }
      double tol = tol_for(od);
      std::string base = std::string(c.name) + " " + dtype_name(dt);
      for (auto& p : pairings(a, b, dt, shape)) {
        auto out = c.fn(p.a, p.b);
        ASSERT_EQ(out.dtype(), od) << base << " " << p.name;
        ASSERT_EQ(out.shape(), shape) << base << " " << p.name;
        expect_close(out, expected, tol, tol * 0.1, base + " " + p.name);
      }
      // Scalar against vector, both ways (the scalar-broadcast path), and a
      // row broadcast down the matrix (the strided path with stride 0).
      auto arr_a = array(a.begin(), shape, dt);
      auto arr_b = array(b.begin(), shape, dt);
      auto sa = array(a[7], dt), sb = array(b[7], dt);
      std::vector<double> e_sb(24), e_sa(24), e_row(24);
      for (int i = 0; i < 24; ++i) {
        e_sb[i] = reference(c, dt, a[i], b[7]);
        e_sa[i] = reference(c, dt, a[7], b[i]);
        e_row[i] = reference(c, dt, a[i], b[i % 6]);
      }
      expect_close(c.fn(arr_a, sb), e_sb, tol, tol * 0.1, base + " a op s");
      expect_close(c.fn(sa, arr_b), e_sa, tol, tol * 0.1, base + " s op b");
      auto tb = make_array(b, shape, dt, Layout::Transposed);
      expect_close(c.fn(sa, tb), e_sa, tol, tol * 0.1, base + " s op bT");
      auto row = array(b.begin(), {6}, dt);
      expect_close(c.fn(arr_a, row), e_row, tol, tol * 0.1, base + " row");
      auto ta = make_array(a, shape, dt, Layout::Transposed);
      expect_close(c.fn(ta, row), e_row, tol, tol * 0.1, base + " T row");
      // 0-d with 0-d.
      auto z = c.fn(sa, sb);
      EXPECT_EQ(z.shape(), Shape{});
      expect_close(z, {reference(c, dt, a[7], b[7])}, tol, tol * 0.1, base);
      // Large: split over threads, flat and scalar paths.
      const int n = 70001;
      std::vector<double> la(n), lb(n), le(n), ls(n);
      for (int i = 0; i < n; ++i) {
        la[i] = a[i % 24];
        lb[i] = b[(i / 24) % 24];
        le[i] = reference(c, dt, la[i], lb[i]);
        ls[i] = reference(c, dt, la[i], b[7]);
      }
      auto big_a = array(la.begin(), {n}, dt);
      expect_close(c.fn(big_a, array(lb.begin(), {n}, dt)), le, tol, tol * 0.1,
                   base + " large");
      expect_close(c.fn(big_a, sb), ls, tol, tol * 0.1, base + " large s");
    }
  }
}

TEST(BinaryOps, Complex) {
  std::vector<complex64_t> a, b;
  for (int i = 0; i < 12; ++i) {
    a.emplace_back(0.5f * ((i * 7) % 9) - 2.0f, 0.25f * ((i * 5) % 7) - 1.0f);
    b.emplace_back(0.5f * ((i * 3) % 5) - 1.0f, 0.5f * ((i * 2) % 5) - 0.5f);
  }
  b[4] = a[4];                                       // an equal pair
  b[5] = complex64_t(a[5].real(), a[5].imag() + 1);  // equal real parts
  auto lex_less = [](cd x, cd y) {
    return x.real() < y.real() || (x.real() == y.real() && x.imag() < y.imag());
  };
  struct C {
    const char* name;
    std::function<array(const array&, const array&)> fn;
    std::function<cd(cd, cd)> ref;
    bool predicate;
  };
  std::vector<C> ops = {
      {"add", [](auto& x, auto& y) { return x + y; },
       [](cd x, cd y) { return x + y; }, false},
      {"subtract", [](auto& x, auto& y) { return x - y; },
       [](cd x, cd y) { return x - y; }, false},
      {"multiply", [](auto& x, auto& y) { return x * y; },
       [](cd x, cd y) { return x * y; }, false},
      {"divide", [](auto& x, auto& y) { return x / y; },
       [](cd x, cd y) { return x / y; }, false},
      {"power", [](auto& x, auto& y) { return power(x, y); },
       [](cd x, cd y) { return std::pow(x, y); }, false},
      {"maximum", [](auto& x, auto& y) { return maximum(x, y); },
       [&](cd x, cd y) { return lex_less(x, y) ? y : x; }, false},
      {"minimum", [](auto& x, auto& y) { return minimum(x, y); },
       [&](cd x, cd y) { return lex_less(y, x) ? y : x; }, false},
      {"equal", [](auto& x, auto& y) { return x == y; },
       [](cd x, cd y) { return cd(x == y); }, true},
      {"not_equal", [](auto& x, auto& y) { return x != y; },
       [](cd x, cd y) { return cd(x != y); }, true},
      {"less", [](auto& x, auto& y) { return x < y; },
       [&](cd x, cd y) { return cd(lex_less(x, y)); }, true},
      {"greater_equal", [](auto& x, auto& y) { return x >= y; },
       [&](cd x, cd y) { return cd(!lex_less(x, y)); }, true},
      {"logical_and", [](auto& x, auto& y) { return x && y; },
       [](cd x, cd y) { return cd(x != cd(0) && y != cd(0)); }, true},
  };
  for (auto& op : ops) {
    for (Layout l : {Layout::RowMajor, Layout::Transposed, Layout::Strided}) {
      auto x = make_array(a, {3, 4}, complex64, l);
      auto y = make_array(b, {3, 4}, complex64, Layout::RowMajor);
      auto out = op.fn(x, y);
      std::string what = std::string(op.name) + " " + layout_name(l);
      if (op.predicate) {
        ASSERT_EQ(out.dtype(), bool_) << what;
        auto got = to_vector<bool>(out);
        for (int i = 0; i < 12; ++i) {
          EXPECT_EQ(got[i], op.ref(cd(a[i]), cd(b[i])).real() != 0)
              << what << " " << i;
        }
        continue;
      }
      ASSERT_EQ(out.dtype(), complex64) << what;
      auto got = to_vector<complex64_t>(out);
      for (int i = 0; i < 12; ++i) {
        cd ref = op.ref(cd(a[i]), cd(b[i]));
        EXPECT_LE(std::abs(cd(got[i]) - ref), 1e-5 * std::abs(ref) + 1e-6)
            << what << " at " << i << " got " << got[i] << " want " << ref;
      }
    }
  }
  // Complex with real operands promotes.
  auto z = array({complex64_t(1, 1)}) + array({2.0f});
  EXPECT_EQ(z.dtype(), complex64);
  EXPECT_EQ(to_vector<complex64_t>(z)[0], complex64_t(3, 1));
  EXPECT_EQ((array({1, 2}) * complex64_t(0, 1)).dtype(), complex64);
}

// The result dtype is MLX's promotion of the two inputs, and values are
// computed in it (checked on exact small values).
TEST(BinaryOps, Promotion) {
  const std::vector<Dtype> all = {bool_,   uint8,   uint16,   uint32,   uint64,
                                  int8,    int16,   int32,    int64,    float16,
                                  float32, float64, bfloat16, complex64};
  for (Dtype x : all) {
    for (Dtype y : all) {
      auto a = array({1, 0, 1}, x);
      auto b = array({1, 1, 0}, y);
      Dtype t = promote_types(x, y);
      EXPECT_EQ(promote_types(y, x), t);
      auto s = add(a, b);
      EXPECT_EQ(s.dtype(), t) << dtype_name(x) << "+" << dtype_name(y);
      double two = t == bool_ ? 1 : 2;
      expect_close(s, {two, 1, 1}, 0, 0,
                   std::string(dtype_name(x)) + "+" + dtype_name(y));
      EXPECT_EQ(equal(a, b).dtype(), bool_);
      EXPECT_EQ(divide(a, b).dtype(), at_least_float(t));
    }
  }
  // Entries of MLX's table, written out independently.
  struct Row {
    Dtype a, b, out;
  };
  for (auto r : std::vector<Row>{{uint8, int8, int16},
                                 {uint16, int8, int32},
                                 {uint32, int32, int64},
                                 {uint64, int8, float32},
                                 {uint64, int64, float32},
                                 {int64, float16, float16},
                                 {float16, bfloat16, float32},
                                 {bfloat16, int32, bfloat16},
                                 {bool_, uint16, uint16},
                                 {float64, bfloat16, float64},
                                 {complex64, float64, complex64},
                                 {int8, int16, int16},
                                 {uint32, uint64, uint64}}) {
    EXPECT_EQ(promote_types(r.a, r.b), r.out)
        << dtype_name(r.a) << "," << dtype_name(r.b);
    EXPECT_EQ((array(1, r.a) * array(1, r.b)).dtype(), r.out);
  }
  // Values survive mixed-type arithmetic.
  expect_close(array({200, 100}, uint8) + array({-100, 27}, int8), {100, 127});
  EXPECT_EQ((array({200}, uint8) + array({-100}, int8)).dtype(), int16);
  expect_close(array({4000000000u}, uint32) - array({1}, int32),
               {3999999999.0});
  expect_close(array({7}, int32) / array({2}, int32), {3.5});
  expect_close(array({7}, int64) / array({2.0f}, float16), {3.5});
}

TEST(BinaryOps, WeakScalars) {
  for (Dtype dt : {uint8, uint16, uint32, uint64, int8, int16, int32, int64,
                   float16, bfloat16, float32, float64, complex64}) {
    auto x = array({1, 2, 3}, dt);
    std::string n = dtype_name(dt);
    EXPECT_EQ((x * 2).dtype(), dt) << n;
    EXPECT_EQ((2 * x).dtype(), dt) << n;
    EXPECT_EQ((x + 1).dtype(), dt) << n;
    EXPECT_EQ((x - 1LL).dtype(), dt) << n;
    EXPECT_EQ((x + true).dtype(), dt) << n;
    Dtype fl = is_inexact(dt) ? dt : float32;
    EXPECT_EQ((x * 2.5f).dtype(), fl) << n;
    EXPECT_EQ((x * 2.5).dtype(), fl) << n;
    EXPECT_EQ((0.5 + x).dtype(), fl) << n;
    EXPECT_EQ((x < 2).dtype(), bool_) << n;
    EXPECT_EQ((x * complex64_t(1, 0)).dtype(), complex64) << n;
    expect_close(x * 2, {2, 4, 6}, 0, 0, n);
    expect_close(10 - x, {9, 8, 7}, 0, 0, n);
    expect_close(x * 2.5f, {2.5, 5, 7.5}, 0, 0, n);
    expect_close(x == 2, {0, 1, 0}, 0, 0, n);
    expect_close(2 < x, {0, 0, 1}, 0, 0, n);
    expect_close(x >= 2.5, {0, 0, 1}, 0, 0, n);
  }
  auto b = array({true, false});
  EXPECT_EQ((b + 1).dtype(), int32);
  expect_close(b + 1, {2, 1});
  EXPECT_EQ((b * 1.5f).dtype(), float32);
  EXPECT_EQ((b + true).dtype(), bool_);
  expect_close(b + true, {1, 1});
  EXPECT_EQ((b && true).dtype(), bool_);
  expect_close(b || false, {1, 0});
  // Integer scalars combine with integer arrays without widening them.
  expect_close(array({250}, uint8) + 3, {253});
  expect_close(array({120}, int8) + 10, {round_to(130, int8)});
  expect_close(array({7, -7}) % 3, {1, 2});
  expect_close(array({6, 5}, int16) & 3, {2, 1});
  expect_close(array({1, 2}, uint8) << 3, {8, 16});
  expect_close(array({-16}, int32) >> 2, {-4});
  expect_close(array({5, 6}) ^ 3, {6, 5});
  expect_close(array({5, 6}) | 8, {13, 14});
}

TEST(BinaryOps, IntegerDivisionEdgeCases) {
  for (Dtype dt : {int8, int16, int32, int64}) {
    std::string n = dtype_name(dt);
    auto a = array({7, -7, 0, 5}, dt);
    auto zero = array(0, dt);
    // Division by zero gives 0 for integers (NumPy), without crashing.
    expect_close(floor_divide(a, zero), {0, 0, 0, 0}, 0, 0, n);
    expect_close(remainder(a, zero), {0, 0, 0, 0}, 0, 0, n);
    expect_close(a % zero, {0, 0, 0, 0}, 0, 0, n);
    // True division of integers is float32: inf and nan.
    expect_close(a / zero, {kInf, -kInf, kNaN, kInf}, 0, 0, n);
    // Python signs.
    expect_close(floor_divide(a, array(2, dt)), {3, -4, 0, 2}, 0, 0, n);
    expect_close(floor_divide(a, array(-2, dt)), {-4, 3, 0, -3}, 0, 0, n);
    expect_close(remainder(a, array(3, dt)), {1, 2, 0, 2}, 0, 0, n);
    expect_close(remainder(a, array(-3, dt)), {-2, -1, 0, -1}, 0, 0, n);
    // The most negative value divided by -1 wraps; its remainder is 0.
    double lowest = -std::pow(2.0, 8.0 * dt.size - 1);
    auto m = array({lowest}, dt);
    expect_close(floor_divide(m, array(-1, dt)), {lowest}, 0, 0, n);
    expect_close(remainder(m, array(-1, dt)), {0}, 0, 0, n);
    expect_close(floor_divide(m, array(1, dt)), {lowest}, 0, 0, n);
  }
  for (Dtype dt : {uint8, uint16, uint32, uint64}) {
    auto a = array({7, 0}, dt);
    expect_close(floor_divide(a, array(0, dt)), {0, 0}, 0, 0, dtype_name(dt));
    expect_close(remainder(a, array(0, dt)), {0, 0}, 0, 0, dtype_name(dt));
    expect_close(remainder(a, array(4, dt)), {3, 0}, 0, 0, dtype_name(dt));
  }
}

TEST(BinaryOps, FloatDivisionEdgeCases) {
  // Python's float // and %: consistent with each other.
  expect_close(floor_divide(array({1.0}), array({0.1})), {9.0});
  expect_close(remainder(array({1.0}), array({0.1})), {0.09999999999999995},
               1e-15);
  expect_close(floor_divide(array({7.5, -7.5, 7.5, -7.5}),
                            array({2.0, 2.0, -2.0, -2.0})),
               {3, -4, -4, 3});
  expect_close(remainder(array({7.5f, -7.5f, 7.5f, -7.5f}),
                         array({2.0f, 2.0f, -2.0f, -2.0f})),
               {1.5, 0.5, -0.5, -1.5});
  // Zeros take the divisor's sign; division by zero gives inf or nan.
  EXPECT_FALSE(
      std::signbit(remainder(array(-0.0f), array(3.0f)).item<float>()));
  EXPECT_TRUE(std::signbit(remainder(array(0.0f), array(-3.0f)).item<float>()));
  EXPECT_TRUE(std::signbit(remainder(array(6.0f), array(-3.0f)).item<float>()));
  expect_close(floor_divide(array({1.0f, -1.0f, 0.0f}), array(0.0f)),
               {kInf, -kInf, kNaN});
  expect_close(remainder(array({1.0f, 0.0f}), array(0.0f)), {kNaN, kNaN});
  expect_close(floor_divide(array({kInf, -1.0}), array({2.0, kInf})),
               {kNaN, -1.0});
  expect_close(remainder(array({-1.0, 1.0}), array({kInf, kInf})), {kInf, 1.0});
  expect_close(divide(array({1.0f, -1.0f, 0.0f}), array(0.0f)),
               {kInf, -kInf, kNaN});
  // float16 computes in float and rounds once.
  expect_close(remainder(array({-7.5}, float16), array({2.0}, float16)), {0.5});
}

TEST(BinaryOps, ShiftsAndBitwise) {
  // Shifts by the bit width or more do not reach the hardware.
  expect_close(left_shift(array({1, 1, 1, 3}), array({31, 32, 40, 1})),
               {-2147483648.0, 0, 0, 6});
  expect_close(right_shift(array({-8, 8, -8, 8}), array({40, 32, 1, 3})),
               {-1, 0, -4, 1});
  expect_close(left_shift(array({1}, uint8), array({8}, uint8)), {0});
  expect_close(left_shift(array({1}, int8), array({7}, int8)), {-128});
  expect_close(right_shift(array({-128}, int8), array({100}, int8)), {-1});
  expect_close(right_shift(array({255}, uint8), array({7}, uint8)), {1});
  expect_close(left_shift(array({1}, uint64), array({63}, uint64)),
               {9223372036854775808.0});
  expect_close(left_shift(array({1}, int64), array({64}, int64)), {0});
  // A negative shift amount is treated as out of range.
  expect_close(left_shift(array({5}), array({-1})), {0});
  expect_close(right_shift(array({-5, 5}), array({-1, -1})), {-1, 0});
  // Bools: shifting by true clears the bit.
  expect_close(left_shift(array({true, true}), array({false, true})), {1, 0});
  // ~ flips every bit; on bools it is logical_not.
  expect_close(~array({0, -1, 5}), {-1, 0, -6});
  expect_close(~array({0, 255}, uint8), {255, 0});
  EXPECT_EQ((~array({0}, uint16)).dtype(), uint16);
  expect_close(~array({true, false}), {0, 1});
  expect_close(!array({2.0f, 0.0f}), {0, 1});
  expect_close(bitwise_xor(array({true, true}), array({true, false})), {0, 1});
}

TEST(BinaryOps, PowerEdgeCases) {
  expect_close(power(array({2}, int32), array({31}, int32)),
               {-2147483648.0});  // wraps
  expect_close(power(array({3}, int8), array({5}, int8)), {-13});
  // MLX: negative integer exponents give 0 for every base.
  expect_close(power(array({2, 1, -1, -1, 0}), array({-1, -5, -3, -2, 0})),
               {0, 0, 0, 0, 1});
  expect_close(
      power(array({0.0f, -8.0f, 2.0f}), array({0.0f, 1.0f / 3.0f, -1.0f})),
      {1, kNaN, 0.5});
  expect_close(power(array({4.0}, float16), array({0.5}, float16)), {2});
  expect_close(power(array({true, false, false}), array({true, true, false})),
               {1, 0, 1});
}

TEST(BinaryOps, NaNAndInfinities) {
  auto a = array({NAN, 1.0f, NAN, 2.0f});
  auto b = array({1.0f, NAN, NAN, 3.0f});
  expect_close(maximum(a, b), {kNaN, kNaN, kNaN, 3});
  expect_close(minimum(a, b), {kNaN, kNaN, kNaN, 2});
  expect_close(maximum(array({1.0}, float16), array({NAN}, float16)), {kNaN});
  expect_close(minimum(array({NAN}, bfloat16), array({1.0}, bfloat16)), {kNaN});
  expect_close(equal(a, b), {0, 0, 0, 0});
  expect_close(not_equal(a, b), {1, 1, 1, 1});
  expect_close(less(a, b), {0, 0, 0, 1});
  expect_close(greater_equal(a, b), {0, 0, 0, 0});
  // logaddexp at the edges.
  expect_close(logaddexp(array({kInf, -kInf, kInf, -kInf, kNaN, 1000.0}),
                         array({kInf, -kInf, -kInf, 3.0, 1.0, 1000.0})),
               {kInf, -kInf, kInf, 3.0, kNaN, 1000.0 + std::log(2.0)}, 1e-12);
  expect_close(logaddexp(array({-1000.0f}), array({-1000.0f})),
               {-1000.0 + std::log(2.0)}, 1e-6);
  expect_close(
      arctan2(array({0.0, -0.0, 1.0, -1.0}), array({-0.0, -1.0, 0.0, kInf})),
      {M_PI, -M_PI, M_PI / 2, -0.0}, 1e-15);
}

TEST(BinaryOps, Errors) {
  auto t = array({true, false});
  expect_error<std::invalid_argument>(
      [&] { subtract(t, t); },
      "[subtract] Not supported for two bool inputs; use logical_xor or "
      "not_equal instead.");
  expect_error<std::invalid_argument>([&] { t - t; }, "[subtract]");
  auto f = array({1.0f, 2.0f});
  auto i = array({1, 2});
  expect_error<std::invalid_argument>(
      [&] { bitwise_and(f, i); },
      "[bitwise_and] Only integer and boolean types are supported; got "
      "float32 and int32.");
  expect_error<std::invalid_argument>(
      [&] { i | f; },
      "[bitwise_or] Only integer and boolean types are supported; got int32 "
      "and float32.");
  expect_error<std::invalid_argument>(
      [&] { bitwise_xor(array({complex64_t(1, 0)}), i); },
      "[bitwise_xor] Only integer and boolean types are supported; got "
      "complex64 and int32.");
  expect_error<std::invalid_argument>(
      [&] { left_shift(i, array({1.0})); },
      "[left_shift] Only integer and boolean types are supported; got int32 "
      "and float64.");
  expect_error<std::invalid_argument>([&] { right_shift(f, i); },
                                      "[right_shift] Only integer and boolean");
  expect_error<std::invalid_argument>(
      [&] { ~f; },
      "[bitwise_invert] Only integer and boolean types are supported; got "
      "float32.");
  auto z = array({complex64_t(1, 1)});
  for (auto& name_fn_ :
       std::vector<std::pair<std::string,
                             std::function<array(const array&, const array&)>>>{
           {"floor_divide", [](auto&x, auto&y) { return floor_divide(x, y); }},
           {"remainder", [](auto&x, auto&y) { return remainder(x, y); }},
           {"arctan2", [](auto&x, auto&y) { return arctan2(x, y); }}}) {
    [[maybe_unused]] auto& name = std::get<0>(name_fn_);
    [[maybe_unused]] auto& fn = std::get<1>(name_fn_);
    expect_error<std::invalid_argument>(
        [&] { fn(z, f); },
        "[" + name + "] Not supported for complex64 inputs.");
    expect_error<std::invalid_argument>(
        [&] { fn(f, z); },
        "[" + name + "] Not supported for complex64 inputs.");
  }
  // Shapes that cannot broadcast, named as received.
  auto m = array({1, 2, 3, 4, 5, 6}, {2, 3});
  auto v = array({1, 2, 3, 4});
  expect_error<std::invalid_argument>(
      [&] { add(m, v); }, "[add] Shapes (2,3) and (4) cannot be broadcast.");
  expect_error<std::invalid_argument>(
      [&] { m* v; }, "[multiply] Shapes (2,3) and (4) cannot be broadcast.");
  expect_error<std::invalid_argument>(
      [&] { less(v, m); }, "[less] Shapes (4) and (2,3) cannot be broadcast.");
  expect_error<std::invalid_argument>(
      [&] { logical_and(m, v); },
      "[logical_and] Shapes (2,3) and (4) cannot be broadcast.");
  expect_error<std::invalid_argument>(
      [&] {
        power(broadcast_to(v, {3, 4}), m);
      },
      "[power] Shapes (3,4) and (2,3) cannot be broadcast.");
}

TEST(BinaryOps, BroadcastShapes) {
  auto col = array({1.0f, 2.0f, 3.0f}, {3, 1});
  auto row = array({10.0f, 20.0f}, {1, 2});
  auto s = col + row;
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  expect_close(s, {11, 21, 12, 22, 13, 23});
  auto t = array({1, 2}, {2, 1, 1}) * array({1, 10, 100}, {3, 1});
  EXPECT_EQ(t.shape(), (Shape{2, 3, 1}));
  expect_close(t, {1, 10, 100, 2, 20, 200});
  // Empty dimensions broadcast too.
  std::vector<float> none;
  auto e = array(none.begin(), {0, 3}, float32) + array({1.0f, 2.0f, 3.0f});
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  EXPECT_EQ(to_vector<float>(e).size(), 0u);
  auto e1 = array(none.begin(), {0, 1}, float32) * array({1.0f, 2.0f});
  EXPECT_EQ(e1.shape(), (Shape{0, 2}));
}

// An intermediate with no other owner is reused by the next binary op.
TEST(BinaryOps, BufferDonation) {
  const int n = 1 << 22;
  const size_t buf = n * sizeof(float);
  std::vector<float> v(n, 1.0f);
  auto a = array(v.begin(), {n});
  auto b = array(v.begin(), {n});
  eval(a, b);
  auto x = a + b;  // one new buffer
  for (int i = 0; i < 30; ++i) {
    x = x * 0.5f + a;  // each step reuses x's buffer
    x = maximum(x, b) - 0.25f;
  }
  reset_peak_memory();
  size_t before = get_active_memory();
  x.eval();
  EXPECT_LE(get_peak_memory() - before, buf + (1 << 16));
  double r = 2.0;
  for (int i = 0; i < 30; ++i) {
    r = r * 0.5 + 1.0;
    r = std::max(r, 1.0) - 0.25;
  }
  auto got = to_vector<float>(x);
  EXPECT_NEAR(got[0], r, 1e-5);
  EXPECT_NEAR(got[n - 1], r, 1e-5);
  EXPECT_EQ(to_vector<float>(a)[5], 1.0f);  // the inputs are untouched
  EXPECT_EQ(to_vector<float>(b)[5], 1.0f);
}
