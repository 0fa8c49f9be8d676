// The core of the op table (op_cases.h): elementwise, reductions, scans
// and sorts, shapes, linear algebra, creation, random, custom. References
// are host loops over float64 values with <cmath>, written without the
// kernels under test.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "op_cases.h"

namespace fluxion::test {

namespace {

// Host references (float64).

double sgn(double x) { return (x > 0) - (x < 0); }

// erfinv by bisection on std::erf: slow, but independent of the kernel's
// approximation and Newton steps.
double erfinv_ref(double y) {
  double lo = -6, hi = 6;
  for (int i = 0; i < 200; ++i) {
    double mid = 0.5 * (lo + hi);
    (std::erf(mid) < y ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// Python's float // and % (NumPy): floor(a / b) and a - b * floor(a / b).
double floordiv_ref(double a, double b) {
  if (b == 0) {
    return 0;  // integers; float inputs here have b != 0
  }
  return std::floor(a / b);
}
double mod_ref(double a, double b) {
  if (b == 0) {
    return 0;
  }
  return a - b * std::floor(a / b);
}

// Values at the multi-index `idx` of an output of `shape`, by `at`.
array host_map(const Shape& shape,
               const std::function<double(const std::vector<int>&)>& at) {
  std::vector<double> v(shape_size(shape));
  std::vector<int> idx(shape.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = at(idx);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        break;
      }
      idx[d] = 0;
    }
  }
  return host_array(v, shape);
}

// Row-major element of a Host.
double at(const Host& h, const std::vector<int>& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d) {
    off = off * h.shape[d] + idx[d];
  }
  return h.v[off];
}

// NumPy's slice: the indices start:stop:step selects of an axis of n.
std::vector<int> slice_indices(int start, int stop, int step, int n) {
  auto clamp = [&](int i, int lo, int hi) {
    if (i < 0) i += n;
    return std::min(std::max(i, lo), hi);
  };
  std::vector<int> out;
  if (step > 0) {
    for (int i = clamp(start, 0, n), e = clamp(stop, 0, n); i < e; i += step) {
      out.push_back(i);
    }
  } else {
    for (int i = clamp(start, -1, n - 1), e = clamp(stop, -1, n - 1); i > e;
         i += step) {
      out.push_back(i);
    }
  }
  return out;
}

// Batched row-major matmul of a (..., m, k) and b (k, n) or (..., k, n).
array matmul_ref(const array& a, const array& b) {
  Host ha(a), hb(b);
  int m = a.shape(-2), k = a.shape(-1), n = b.shape(-1);
  Shape out = a.shape();
  out.back() = n;
  int64_t batch = shape_size(out) / (m * n);
  bool b_batched = b.ndim() > 2;
  std::vector<double> v(shape_size(out), 0.0);
  for (int64_t t = 0; t < batch; ++t) {
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int l = 0; l < k; ++l) {
          s += ha.v[t * m * k + i * k + l] *
               hb.v[(b_batched ? t * k * n : 0) + l * n + j];
        }
        v[t * m * n + i * n + j] = s;
      }
    }
  }
  return host_array(v, out);
}

using Matrix = std::vector<std::vector<double>>;
Matrix to_matrix(const array& a) {
  Host h(a);
  int n = a.shape(0), m = a.shape(1);
  Matrix r(n, std::vector<double>(m));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) r[i][j] = h.v[i * m + j];
  return r;
}
array from_matrix(const Matrix& r) {
  std::vector<double> v;
  for (auto& row : r) v.insert(v.end(), row.begin(), row.end());
  return host_array(v, {static_cast<int>(r.size()),
                        static_cast<int>(r[0].size())});
}
// a^-1 b by Gauss-Jordan with partial pivoting.
Matrix solve_ref(Matrix a, Matrix b) {
  int n = static_cast<int>(a.size()), m = static_cast<int>(b[0].size());
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    std::swap(a[c], a[p]);
    std::swap(b[c], b[p]);
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      double f = a[r][c] / a[c][c];
      for (int j = 0; j < n; ++j) a[r][j] -= f * a[c][j];
      for (int j = 0; j < m; ++j) b[r][j] -= f * b[c][j];
    }
  }
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < m; ++j) b[r][j] /= a[r][r];
  return b;
}
Matrix identity(int n) {
  Matrix e(n, std::vector<double>(n, 0.0));
  for (int i = 0; i < n; ++i) e[i][i] = 1;
  return e;
}
// The triangle of `a` (lower or upper) as a full matrix.
Matrix triangle(Matrix a, bool upper) {
  int n = static_cast<int>(a.size());
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (upper ? j < i : j > i) a[i][j] = 0;
  return a;
}
Matrix transpose_m(const Matrix& a) {
  Matrix t(a[0].size(), std::vector<double>(a.size()));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[0].size(); ++j) t[j][i] = a[i][j];
  return t;
}
// Cholesky-Banachiewicz of the lower triangle.
Matrix cholesky_ref(const Matrix& a) {
  int n = static_cast<int>(a.size());
  Matrix l(n, std::vector<double>(n, 0.0));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j <= i; ++j) {
      double s = a[i][j];
      for (int k = 0; k < j; ++k) s -= l[i][k] * l[j][k];
      l[i][j] = i == j ? std::sqrt(s) : s / l[j][j];
    }
  }
  return l;
}

// Half-integer values: comparisons and logical ops meet equal elements
// and zeros.
In coarse(const Shape& s) {
  return from_normal(
      s, [](const array& x) { return round(x * 2.0) * 0.5; }, "k / 2");
}

const std::vector<Dtype> kFloatsInt = {float64, float32, float16, bfloat16,
                                       int32};
const std::vector<Dtype> kFloatsIntBool = {float64, float32, float16,
                                           bfloat16, int32, bool_};

}  // namespace

std::vector<OpCase> core_cases() {
  std::vector<OpCase> c;
  Shape s{3, 4};
  // An elementwise unary case: the op, its reference, its domain.
  auto add_unary = [&](const std::string& name, UnaryFn g, In x, Ref ref,
                       Deriv deriv = Deriv::second,
                       std::vector<Dtype> dtypes = kFloats, int ulps = 0) {
    OpCase k{name, unary(g), {std::move(x)}};
    k.deriv = deriv;
    k.dtypes = std::move(dtypes);
    k.ref = std::move(ref);
    k.fused_ulps = ulps;
    c.push_back(std::move(k));
  };
  using std::function;
  auto r1 = [](double (*g)(double)) { return ref1(g); };
  add_unary("abs", [](auto& x) { return abs(x); }, normal(s),
            r1([](double x) { return std::abs(x); }), Deriv::first,
            kFloatsInt);
  add_unary("abs_negative", [](auto& x) { return abs(x); },
            uniform_in(s, -2, -0.2),
            r1([](double x) { return std::abs(x); }), Deriv::second);
  add_unary("negative", [](auto& x) { return negative(x); }, normal(s),
            r1([](double x) { return -x; }), Deriv::second, kFloatsInt);
  add_unary("sign", [](auto& x) { return sign(x); }, normal(s), r1(sgn),
            Deriv::zero, kFloatsInt);
  // The float32 polynomials (math.h) differ from the scalar functor only
  // by FMA contraction in generated code: 2 ulps.
  add_unary("exp", [](auto& x) { return exp(x); }, normal(s),
            r1([](double x) { return std::exp(x); }), Deriv::second, kFloats,
            2);
  add_unary("expm1", [](auto& x) { return expm1(x); }, normal(s),
            r1([](double x) { return std::expm1(x); }), Deriv::second,
            kFloats, 2);
  add_unary("log", [](auto& x) { return log(x); }, positive(s),
            r1([](double x) { return std::log(x); }));
  add_unary("log1p", [](auto& x) { return log1p(x); }, positive(s),
            r1([](double x) { return std::log1p(x); }));
  add_unary("log2", [](auto& x) { return log2(x); }, positive(s),
            r1([](double x) { return std::log2(x); }));
  add_unary("log10", [](auto& x) { return log10(x); }, positive(s),
            r1([](double x) { return std::log10(x); }));
  add_unary("sqrt", [](auto& x) { return sqrt(x); }, positive(s),
            r1([](double x) { return std::sqrt(x); }));
  add_unary("rsqrt", [](auto& x) { return rsqrt(x); }, positive(s),
            r1([](double x) { return 1 / std::sqrt(x); }));
  add_unary("square", [](auto& x) { return square(x); }, normal(s),
            r1([](double x) { return x * x; }), Deriv::second, kFloatsInt);
  add_unary("reciprocal", [](auto& x) { return reciprocal(x); }, positive(s),
            r1([](double x) { return 1 / x; }));
  add_unary("sin", [](auto& x) { return sin(x); }, normal(s),
            r1([](double x) { return std::sin(x); }));
  add_unary("cos", [](auto& x) { return cos(x); }, normal(s),
            r1([](double x) { return std::cos(x); }));
  add_unary("tan", [](auto& x) { return tan(x); }, unit(s),
            r1([](double x) { return std::tan(x); }));
  add_unary("arcsin", [](auto& x) { return arcsin(x); }, unit(s),
            r1([](double x) { return std::asin(x); }));
  add_unary("arccos", [](auto& x) { return arccos(x); }, unit(s),
            r1([](double x) { return std::acos(x); }));
  add_unary("arctan", [](auto& x) { return arctan(x); }, normal(s),
            r1([](double x) { return std::atan(x); }));
  add_unary("sinh", [](auto& x) { return sinh(x); }, normal(s),
            r1([](double x) { return std::sinh(x); }));
  add_unary("cosh", [](auto& x) { return cosh(x); }, normal(s),
            r1([](double x) { return std::cosh(x); }));
  add_unary("tanh", [](auto& x) { return tanh(x); }, normal(s),
            r1([](double x) { return std::tanh(x); }), Deriv::second, kFloats,
            2);
  add_unary("arcsinh", [](auto& x) { return arcsinh(x); }, normal(s),
            r1([](double x) { return std::asinh(x); }));
  add_unary("arccosh", [](auto& x) { return arccosh(x); },
            from_normal(
                s, [](const array& x) { return abs(x) + 1.5; }, "(1.5, inf)"),
            r1([](double x) { return std::acosh(x); }));
  add_unary("arctanh", [](auto& x) { return arctanh(x); }, unit(s),
            r1([](double x) { return std::atanh(x); }));
  add_unary("sigmoid", [](auto& x) { return sigmoid(x); }, normal(s),
            r1([](double x) { return 1 / (1 + std::exp(-x)); }),
            Deriv::second, kFloats, 2);
  add_unary("erf", [](auto& x) { return erf(x); }, normal(s),
            r1([](double x) { return std::erf(x); }));
  add_unary("erfc", [](auto& x) { return erfc(x); }, normal(s),
            r1([](double x) { return std::erfc(x); }));
  // The tail, where erfc is far from 1 - erf (its own test checks the
  // relative error there: test_unary.cpp).
  add_unary("erfc_tail", [](auto& x) { return erfc(x); },
            uniform_in(s, 1.5, 4), r1([](double x) { return std::erfc(x); }));
  // Its double-precision Newton steps contract into FMAs when fused.
  add_unary("erfinv", [](auto& x) { return erfinv(x); }, unit(s),
            r1(erfinv_ref), Deriv::second, kFloats, 1);
  add_unary("floor", [](auto& x) { return floor(x); }, normal(s),
            r1([](double x) { return std::floor(x); }), Deriv::zero,
            kFloatsInt);
  add_unary("ceil", [](auto& x) { return ceil(x); }, normal(s),
            r1([](double x) { return std::ceil(x); }), Deriv::zero,
            kFloatsInt);
  // (round of an integer array is the array itself: no primitive.)
  add_unary("round", [](auto& x) { return round(x); }, normal(s),
            r1([](double x) { return std::nearbyint(x); }), Deriv::zero);
  // round with decimals: a composite (scale, round, unscale).
  add_unary("round_2", [](auto& x) { return round(x, 2); }, normal(s),
            r1([](double x) { return std::nearbyint(x * 100) / 100; }),
            Deriv::zero, {float64});
  add_unary("logical_not", [](auto& x) { return logical_not(x); }, coarse(s),
            r1([](double x) { return double(x == 0); }), Deriv::zero,
            kFloatsIntBool);
  add_unary("isnan", [](auto& x) { return isnan(x); }, normal(s),
            r1([](double x) { return double(std::isnan(x)); }), Deriv::zero);
  add_unary("isinf", [](auto& x) { return isinf(x); }, normal(s),
            r1([](double x) { return double(std::isinf(x)); }), Deriv::zero);
  add_unary("isfinite", [](auto& x) { return isfinite(x); }, normal(s),
            r1([](double x) { return double(std::isfinite(x)); }),
            Deriv::zero);
  add_unary("conjugate", [](auto& x) { return conjugate(x); }, normal(s),
            r1([](double x) { return x; }));
  add_unary("real", [](auto& x) { return real(x); }, normal(s),
            r1([](double x) { return x; }));
  add_unary("imag", [](auto& x) { return imag(x); }, normal(s),
            r1([](double) { return 0.0; }), Deriv::zero);
  // Blocks gradients by design: zero derivatives.
  add_unary("stop_gradient", [](auto& x) { return stop_gradient(x); },
            normal(s), r1([](double x) { return x; }), Deriv::zero);
  add_unary("copy", [](auto& x) { return copy(x); }, normal(s),
            r1([](double x) { return x; }), Deriv::second, kFloatsInt);
  {
    // float32 outputs: a larger step keeps rounding out of the
    // differences.
    OpCase k{"astype",
             unary([](auto& x) { return astype(x, float32); }),
             {normal(s)},
             Deriv::first,
             1e-4,
             1e-2};
    k.ref = r1([](double x) { return double(static_cast<float>(x)); });
    k.fwd_tol = 0;
    k.fused_ulps = 0;
    c.push_back(std::move(k));
  }

  // Binary elementwise.
  auto add_binary = [&](const std::string& name,
                        function<array(const array&, const array&)> g, In a,
                        In b, Ref ref, Deriv deriv = Deriv::second,
                        std::vector<Dtype> dtypes = kFloats, int ulps = 0) {
    OpCase k{name,
             binary(g),
             {std::move(a), std::move(b)}};
    k.deriv = deriv;
    k.dtypes = std::move(dtypes);
    k.ref = std::move(ref);
    k.fused_ulps = ulps;
    c.push_back(std::move(k));
  };
  auto r2 = [](double (*g)(double, double)) { return ref2(g); };
  add_binary("add", [](auto& a, auto& b) { return add(a, b); }, normal(s),
             normal(s), r2([](double a, double b) { return a + b; }),
             Deriv::second, kFloatsInt);
  add_binary("subtract", [](auto& a, auto& b) { return subtract(a, b); },
             normal(s), normal(s),
             r2([](double a, double b) { return a - b; }), Deriv::second,
             kFloatsInt);
  add_binary("multiply", [](auto& a, auto& b) { return multiply(a, b); },
             normal(s), normal(s),
             r2([](double a, double b) { return a * b; }), Deriv::second,
             kFloatsInt);
  add_binary("divide", [](auto& a, auto& b) { return divide(a, b); },
             normal(s), positive(s),
             r2([](double a, double b) { return a / b; }));
  // float32 and half quotients near a whole number may floor the other
  // way than float64: checked in float64 and int32.
  add_binary("floor_divide",
             [](auto& a, auto& b) { return floor_divide(a, b); }, normal(s),
             positive(s), r2(floordiv_ref), Deriv::zero, {float64, int32});
  add_binary("remainder", [](auto& a, auto& b) { return remainder(a, b); },
             normal(s), positive(s), r2(mod_ref), Deriv::first,
             {float64, int32});
  {
    // divmod: both outputs; its derivatives are zero for both (MLX),
    // unlike remainder's alone.
    OpCase k{"divmod",
             [](const Arrays& x) { return divmod(x[0], x[1]); },
             {normal(s), positive(s)},
             Deriv::zero};
    k.dtypes = {float64, int32};
    k.ref = [](const Arrays& x) {
      Arrays q = ref2(floordiv_ref)(x), r = ref2(mod_ref)(x);
      return Arrays{q[0], r[0]};
    };
    c.push_back(std::move(k));
  }
  add_binary("power", [](auto& a, auto& b) { return power(a, b); },
             positive(s), normal(s),
             r2([](double a, double b) { return std::pow(a, b); }));
  add_binary("maximum", [](auto& a, auto& b) { return maximum(a, b); },
             normal(s), normal(s),
             r2([](double a, double b) { return std::max(a, b); }),
             Deriv::first, kFloatsInt);
  add_binary("minimum", [](auto& a, auto& b) { return minimum(a, b); },
             normal(s), normal(s),
             r2([](double a, double b) { return std::min(a, b); }),
             Deriv::first, kFloatsInt);
  add_binary("arctan2", [](auto& a, auto& b) { return arctan2(a, b); },
             normal(s), positive(s),
             r2([](double a, double b) { return std::atan2(a, b); }));
  add_binary("logaddexp", [](auto& a, auto& b) { return logaddexp(a, b); },
             normal(s), normal(s),
             r2([](double a, double b) {
               return std::log(std::exp(a) + std::exp(b));
             }),
             Deriv::second, kFloats, 2);
  using BinFn = function<array(const array&, const array&)>;
  using BinRef = double (*)(double, double);
  for (auto& [name, g, ref] : std::vector<std::tuple<std::string, BinFn, BinRef>>{
           {"equal", [](auto& a, auto& b) { return equal(a, b); },
            [](double a, double b) { return double(a == b); }},
           {"not_equal", [](auto& a, auto& b) { return not_equal(a, b); },
            [](double a, double b) { return double(a != b); }},
           {"less", [](auto& a, auto& b) { return less(a, b); },
            [](double a, double b) { return double(a < b); }},
           {"less_equal", [](auto& a, auto& b) { return less_equal(a, b); },
            [](double a, double b) { return double(a <= b); }},
           {"greater", [](auto& a, auto& b) { return greater(a, b); },
            [](double a, double b) { return double(a > b); }},
           {"greater_equal",
            [](auto& a, auto& b) { return greater_equal(a, b); },
            [](double a, double b) { return double(a >= b); }},
           {"logical_and", [](auto& a, auto& b) { return logical_and(a, b); },
            [](double a, double b) { return double(a != 0 && b != 0); }},
           {"logical_or", [](auto& a, auto& b) { return logical_or(a, b); },
            [](double a, double b) { return double(a != 0 || b != 0); }},
       }) {
    add_binary(name, g, coarse(s), coarse(s), ref2(ref), Deriv::zero,
               kFloatsIntBool);
  }
  for (auto& [name, g, ref] : std::vector<std::tuple<std::string, BinFn, BinRef>>{
           {"bitwise_and", [](auto& a, auto& b) { return bitwise_and(a, b); },
            [](double a, double b) { return double(int64_t(a) & int64_t(b)); }},
           {"bitwise_or", [](auto& a, auto& b) { return bitwise_or(a, b); },
            [](double a, double b) { return double(int64_t(a) | int64_t(b)); }},
           {"bitwise_xor", [](auto& a, auto& b) { return bitwise_xor(a, b); },
            [](double a, double b) { return double(int64_t(a) ^ int64_t(b)); }},
           {"left_shift", [](auto& a, auto& b) { return left_shift(a, b); },
            [](double a, double b) {
              return double(int64_t(a) * (int64_t(1) << int64_t(b)));
            }},
           {"right_shift", [](auto& a, auto& b) { return right_shift(a, b); },
            [](double a, double b) { return double(int64_t(a) >> int64_t(b)); }},
       }) {
    add_binary(name, g, ints_in(s, -5, 5), ints_in(s, 0, 4), ref2(ref),
               Deriv::zero, {int32, int64, int16});
  }
  {
    OpCase k{"where",
             [](const Arrays& x) {
               return Arrays{where(x[0] > 0.0, x[1], x[2])};
             },
             {normal(s), normal(s), normal(s)}};
    k.dtypes = kFloatsInt;
    k.ref = [](const Arrays& x) {
      auto c0 = values(x[0]), a = values(x[1]), b = values(x[2]);
      for (size_t i = 0; i < a.size(); ++i) a[i] = c0[i] > 0 ? a[i] : b[i];
      return Arrays{host_array(a, x[0].shape())};
    };
    k.fused_ulps = 0;
    c.push_back(std::move(k));
  }

  // Reductions over the {3, 4} inputs.
  auto add_reduce = [&](const std::string& name, UnaryFn g, Ref ref,
                        Deriv deriv, std::vector<Dtype> dtypes, In x,
                        int ulps_scale = 1) {
    OpCase k{name, unary(g), {std::move(x)}};
    k.deriv = deriv;
    k.dtypes = std::move(dtypes);
    k.ref = std::move(ref);
    k.fwd_tol = 1e-12 * ulps_scale;
    k.vmap_tol = 1e-9;
    c.push_back(std::move(k));
  };
  auto line_sum = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0);
  };
  add_reduce("sum", [](auto& x) { return sum(x, 1); }, ref_reduce(1, line_sum),
             Deriv::second, kFloatsInt, normal(s));
  add_reduce("prod", [](auto& x) { return prod(x, 0); },
             ref_reduce(0,
                        [](const std::vector<double>& v) {
                          return std::accumulate(v.begin(), v.end(), 1.0,
                                                 std::multiplies<>());
                        }),
             Deriv::second, kFloatsInt, normal(s));
  add_reduce("max", [](auto& x) { return max(x, 1); },
             ref_reduce(1,
                        [](const std::vector<double>& v) {
                          return *std::max_element(v.begin(), v.end());
                        }),
             Deriv::first, kFloatsInt, normal(s));
  add_reduce("min", [](auto& x) { return min(x, std::vector<int>{0, 1}); },
             [](const Arrays& x) {
               auto v = values(x[0]);
               return Arrays{
                   array(*std::min_element(v.begin(), v.end()), float64)};
             },
             Deriv::first, kFloatsInt, normal(s));
  add_reduce("all", [](auto& x) { return all(x > 0.0, 1); },
             ref_reduce(1,
                        [](const std::vector<double>& v) {
                          return double(std::all_of(v.begin(), v.end(),
                                                    [](double e) {
                                                      return e > 0;
                                                    }));
                        }),
             Deriv::zero, kFloatsInt, positive(s));
  add_reduce("any", [](auto& x) { return any(x > 0.0, 0); },
             ref_reduce(0,
                        [](const std::vector<double>& v) {
                          return double(std::any_of(v.begin(), v.end(),
                                                    [](double e) {
                                                      return e > 0;
                                                    }));
                        }),
             Deriv::zero, kFloatsInt, normal(s));
  add_reduce("argmax", [](auto& x) { return argmax(x, 1); },
             ref_reduce(1,
                        [](const std::vector<double>& v) {
                          return double(std::max_element(v.begin(), v.end()) -
                                        v.begin());
                        }),
             Deriv::zero, {float64, float32}, normal(s));
  add_reduce("argmin", [](auto& x) { return argmin(x, 0); },
             ref_reduce(0,
                        [](const std::vector<double>& v) {
                          return double(std::min_element(v.begin(), v.end()) -
                                        v.begin());
                        }),
             Deriv::zero, {float64, float32}, normal(s));
  add_reduce("logsumexp", [](auto& x) { return logsumexp(x, 1); },
             ref_reduce(1,
                        [](const std::vector<double>& v) {
                          double t = 0;
                          for (double e : v) t += std::exp(e);
                          return std::log(t);
                        }),
             Deriv::second, kFloats, normal(s));
  add_reduce("softmax", [](auto& x) { return softmax(x, 1); },
             ref_lines(1,
                       [](std::vector<double> v) {
                         double t = 0;
                         for (double e : v) t += std::exp(e);
                         for (double& e : v) e = std::exp(e) / t;
                         return v;
                       }),
             Deriv::second, kFloats, normal(s));
  // var rounds at each step of mean-subtract-square-mean in half types.
  add_reduce("var", [](auto& x) { return var(x, 0); },
             ref_reduce(0,
                        [](const std::vector<double>& v) {
                          double m = 0, q = 0;
                          for (double e : v) m += e / v.size();
                          for (double e : v) q += (e - m) * (e - m) / v.size();
                          return q;
                        }),
             Deriv::second, {float64, float32}, normal(s), 10);

  // Sorting and scans.
  auto sorted_line = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  auto cum = [](bool reverse, bool inclusive, double init,
                std::function<double(double, double)> op) {
    return [=](std::vector<double> v) {
      if (reverse) std::reverse(v.begin(), v.end());
      std::vector<double> out(v.size());
      double acc = init;
      for (size_t i = 0; i < v.size(); ++i) {
        if (inclusive) {
          acc = op(acc, v[i]);
          out[i] = acc;
        } else {
          out[i] = acc;
          acc = op(acc, v[i]);
        }
      }
      if (reverse) std::reverse(out.begin(), out.end());
      return out;
    };
  };
  auto plus = [](double a, double b) { return a + b; };
  auto times = [](double a, double b) { return a * b; };
  auto lae = [](double a, double b) {
    return std::max(a, b) + std::log1p(std::exp(-std::abs(a - b)));
  };
  auto add_lines = [&](const std::string& name, UnaryFn g, Ref ref,
                       Deriv deriv, std::vector<Dtype> dtypes) {
    add_reduce(name, g, std::move(ref), deriv, std::move(dtypes), normal(s));
  };
  add_lines("sort", [](auto& x) { return sort(x, 0); },
            ref_lines(0, sorted_line), Deriv::second, kFloatsInt);
  add_lines("argsort", [](auto& x) { return argsort(x, 1); },
            ref_lines(1,
                      [](std::vector<double> v) {
                        std::vector<double> idx(v.size());
                        std::vector<size_t> p(v.size());
                        std::iota(p.begin(), p.end(), 0);
                        std::stable_sort(p.begin(), p.end(), [&](size_t a,
                                                                 size_t b) {
                          return v[a] < v[b];
                        });
                        for (size_t i = 0; i < p.size(); ++i) idx[i] = p[i];
                        return idx;
                      }),
            Deriv::zero, {float64, float32});
  // partition's order besides the kth element is unspecified: the case
  // returns the kth element and the sorted row.
  add_lines("partition",
            [](auto& x) {
              auto p = partition(x, 1, 1);
              return concatenate({slice(p, {0, 1}, {3, 2}), sort(p, 1)}, 1);
            },
            ref_lines(1,
                      [](std::vector<double> v) {
                        std::sort(v.begin(), v.end());
                        v.insert(v.begin(), v[1]);
                        return v;
                      }),
            Deriv::second, kFloatsInt);
  add_lines("argpartition",
            [](auto& x) {
              auto i = stop_gradient(argpartition(x, -2, 0));
              return sort(take_along_axis(x, i, 0), 0);
            },
            ref_lines(0, sorted_line), Deriv::second, {float64, float32});
  add_lines("topk", [](auto& x) { return sort(topk(x, 2, 1), 1); },
            ref_lines(1,
                      [](std::vector<double> v) {
                        std::sort(v.begin(), v.end());
                        return std::vector<double>(v.end() - 2, v.end());
                      }),
            Deriv::second, kFloatsInt);
  add_lines("cumsum", [](auto& x) { return cumsum(x, 1); },
            ref_lines(1, cum(false, true, 0, plus)), Deriv::second,
            kFloatsInt);
  add_lines("cumsum_reverse_exclusive",
            [](auto& x) { return cumsum(x, 0, true, false); },
            ref_lines(0, cum(true, false, 0, plus)), Deriv::second,
            kFloatsInt);
  add_lines("cumprod", [](auto& x) { return cumprod(x, 1); },
            ref_lines(1, cum(false, true, 1, times)), Deriv::second,
            kFloatsInt);
  add_lines("cumprod_reverse_exclusive",
            [](auto& x) { return cumprod(x, 0, true, false); },
            ref_lines(0, cum(true, false, 1, times)), Deriv::second,
            kFloatsInt);
  add_lines("cummax", [](auto& x) { return cummax(x, 1); },
            ref_lines(1, cum(false, true, -kInf,
                             [](double a, double b) { return std::max(a, b); })),
            Deriv::second, kFloatsInt);
  add_lines("cummin_reverse", [](auto& x) { return cummin(x, 1, true); },
            ref_lines(1, cum(true, true, kInf,
                             [](double a, double b) { return std::min(a, b); })),
            Deriv::second, kFloatsInt);
  add_lines("logcumsumexp", [](auto& x) { return logcumsumexp(x, 1); },
            ref_lines(1, cum(false, true, -kInf, lae)), Deriv::second,
            kFloats);
  add_lines("logcumsumexp_reverse",
            [](auto& x) { return logcumsumexp(x, 0, true); },
            ref_lines(0, cum(true, true, -kInf, lae)), Deriv::second, kFloats);

  // Shapes.
  Shape s3{2, 3, 4};
  auto add_shape = [&](const std::string& name, Fn f, std::vector<In> in,
                       Ref ref) {
    OpCase k{name, std::move(f), std::move(in)};
    k.dtypes = kFloatsInt;
    k.ref = std::move(ref);
    k.fwd_tol = 0;
    c.push_back(std::move(k));
  };
  add_shape("reshape", unary([](auto& x) { return reshape(x, {4, 3}); }),
            {normal(s)}, [](const Arrays& x) {
              return Arrays{host_array(values(x[0]), {4, 3})};
            });
  add_shape("transpose",
            unary([](auto& x) { return transpose(x, {2, 0, 1}); }),
            {normal(s3)}, [](const Arrays& x) {
              Host h(x[0]);
              return Arrays{host_map({4, 2, 3}, [&](const std::vector<int>& i) {
                return at(h, {i[1], i[2], i[0]});
              })};
            });
  add_shape("broadcast_to",
            unary([](auto& x) { return broadcast_to(x, {2, 3, 4}); }),
            {normal({3, 1})}, [](const Arrays& x) {
              Host h(x[0]);
              return Arrays{host_map({2, 3, 4}, [&](const std::vector<int>& i) {
                return at(h, {i[1], 0});
              })};
            });
  add_shape("expand_dims", unary([](auto& x) { return expand_dims(x, 1); }),
            {normal(s)}, [](const Arrays& x) {
              return Arrays{host_array(values(x[0]), {3, 1, 4})};
            });
  add_shape("squeeze", unary([](auto& x) { return squeeze(x, 1); }),
            {normal({3, 1, 4})}, [](const Arrays& x) {
              return Arrays{host_array(values(x[0]), {3, 4})};
            });
  add_shape("slice",
            unary([](auto& x) {
              return slice(x, {2, 0, 3}, {0, 3, 0}, {-1, 2, -2});
            }),
            {normal(s3)}, [](const Arrays& x) {
              Host h(x[0]);
              auto i0 = slice_indices(2, 0, -1, 2);
              auto i1 = slice_indices(0, 3, 2, 3);
              auto i2 = slice_indices(3, 0, -2, 4);
              Shape out{(int)i0.size(), (int)i1.size(), (int)i2.size()};
              return Arrays{host_map(out, [&](const std::vector<int>& i) {
                return at(h, {i0[i[0]], i1[i[1]], i2[i[2]]});
              })};
            });
  add_shape("slice_update",
            binary([](auto& a, auto& b) {
              return slice_update(a, b, {0, 1}, {3, 4}, {2, 2});
            }),
            {normal(s), normal({2, 2})}, [](const Arrays& x) {
              Host a(x[0]), b(x[1]);
              return Arrays{host_map({3, 4}, [&](const std::vector<int>& i) {
                bool in = i[0] % 2 == 0 && i[1] >= 1 && (i[1] - 1) % 2 == 0;
                return in ? at(b, {i[0] / 2, (i[1] - 1) / 2}) : at(a, i);
              })};
            });
  add_shape("concatenate",
            binary([](auto& a, auto& b) { return concatenate({a, b}, 1); }),
            {normal(s), normal({3, 2})}, [](const Arrays& x) {
              Host a(x[0]), b(x[1]);
              return Arrays{host_map({3, 6}, [&](const std::vector<int>& i) {
                return i[1] < 4 ? at(a, i) : at(b, {i[0], i[1] - 4});
              })};
            });
  // The pad value is a constant here: vmap over a batched value raises (as
  // MLX); its gradient is checked in test_shape_grad.cpp.
  add_shape("pad",
            unary([](auto& a) {
              return pad(a, std::vector<int>{0, 1}, {1, 0}, {2, 1},
                         array(0.25, float64));
            }),
            {normal(s)}, [](const Arrays& x) {
              Host a(x[0]);
              // The pad value in the input's dtype.
              double v = astype(array(0.25), x[0].dtype()).item<double>();
              return Arrays{host_map({6, 5}, [&](const std::vector<int>& i) {
                int r = i[0] - 1;
                return r >= 0 && r < 3 && i[1] < 4 ? at(a, {r, i[1]}) : v;
              })};
            });
  add_shape("take_along_axis",
            [](const Arrays& x) {
              return Arrays{take_along_axis(x[0], x[1], 1)};
            },
            {normal(s), ints_in(s, 0, 3)}, [](const Arrays& x) {
              Host a(x[0]), i(x[1]);
              return Arrays{host_map({3, 4}, [&](const std::vector<int>& k) {
                return at(a, {k[0], static_cast<int>(at(i, k))});
              })};
            });
  // Distinct indices per row: the written values are then determined.
  add_shape("put_along_axis",
            [](const Arrays& x) {
              return Arrays{put_along_axis(x[0], x[1], x[2], 1)};
            },
            {normal(s), array({0, 3, 1, 2, 2, 0}, {3, 2}), normal({3, 2})},
            [](const Arrays& x) {
              Host a(x[0]), i(x[1]), u(x[2]);
              return Arrays{host_map({3, 4}, [&](const std::vector<int>& k) {
                for (int j = 0; j < 2; ++j) {
                  if (at(i, {k[0], j}) == k[1]) return at(u, {k[0], j});
                }
                return at(a, k);
              })};
            });

  // Linear algebra, creation, random, custom.
  {
    OpCase k{"matmul",
             binary([](auto& a, auto& b) { return matmul(a, b); }),
             {normal({2, 3, 4}), normal({4, 5})}};
    k.dtypes = {float64, float32, float16, bfloat16};
    k.ref = [](const Arrays& x) { return Arrays{matmul_ref(x[0], x[1])}; };
    k.vmap_tol = 1e-9;
    c.push_back(std::move(k));
  }
  {
    OpCase k{"addmm",
             [](const Arrays& x) {
               return Arrays{addmm(x[0], x[1], x[2], 0.5f, 2.0f)};
             },
             {normal({3, 5}), normal({3, 4}), normal({4, 5})}};
    k.dtypes = {float64, float32};
    k.ref = [](const Arrays& x) {
      auto m = values(matmul_ref(x[1], x[2]));
      auto cv = values(x[0]);
      for (size_t i = 0; i < m.size(); ++i) m[i] = 0.5 * m[i] + 2.0 * cv[i];
      return Arrays{host_array(m, {3, 5})};
    };
    c.push_back(std::move(k));
  }
  {
    OpCase k{"arange",
             unary([](auto& x) { return x + arange(0, 4, x.dtype()); }),
             {normal({4})}};
    k.dtypes = kFloats;
    k.ref = [](const Arrays& x) {
      auto v = values(x[0]);
      for (size_t i = 0; i < v.size(); ++i) v[i] += double(i);
      return Arrays{host_array(v, {4})};
    };
    c.push_back(std::move(k));
  }
  {
    OpCase k{"random_bits",
             [](const Arrays& x) { return Arrays{random::bits({4}, 4, x[0])}; },
             {random::key(7)},
             Deriv::none};
    k.dtypes = {uint32};
    k.ref_note = "threefry values: test_random.cpp";
    c.push_back(std::move(k));
  }
  {
    OpCase k{"depends",
             unary([](auto& x) { return depends({x * 2.0}, {exp(x)})[0]; }),
             {normal(s)}};
    k.dtypes = kFloats;
    k.ref = ref1([](double x) { return 2 * x; });
    c.push_back(std::move(k));
  }
  {
    OpCase k{"custom_function",
             unary([](auto& x) {
               auto f = custom_vjp(
                   [](const std::vector<array>& in) {
                     return std::vector<array>{sin(in[0])};
                   },
                   [](const std::vector<array>& p, const std::vector<array>& ct,
                      const std::vector<array>&) {
                     return std::vector<array>{cos(p[0]) * ct[0]};
                   });
               return f({x})[0];
             }),
             {normal(s)},
             Deriv::first};
    k.dtypes = {float64, float32};
    k.ref = ref1([](double x) { return std::sin(x); });
    c.push_back(std::move(k));
  }
  // LAPACK (fluxion::linalg): inputs well-conditioned or symmetric positive
  // definite, 4 x 4 so that vmap's batch dimensions (3, and 2 inside) are
  // told apart from the matrix's (see structured()); ops that read one triangle are given full matrices, so the
  // other triangle's gradient (zero) is checked too. Eigen- and singular
  // vectors are sign-normalized (their sign is arbitrary, so a loop and a
  // batch could differ), and only the first min(M, N) columns of U / rows
  // of Vt are compared for non-square inputs (the rest span an arbitrary
  // null-space basis).
  {
    auto wc = [](const Shape& sh) {
      return structured(from_normal(
          sh,
          [](const array& m) {
            return m + eye(m.shape(-1), float64) * double(m.shape(-1));
          },
          "normal + n I"));
    };
    auto spd = [](const Shape& sh) {
      return structured(from_normal(
          sh,
          [](const array& m) {
            return matmul(m, swapaxes(m, -1, -2)) + eye(m.shape(-1), float64);
          },
          "m m^T + I"));
    };
    auto lapack = [&](const std::string& name, Fn f, std::vector<In> in,
                      Ref ref, std::string note = {}, double tol = 1e-6,
                      double eps = 1e-6, Deriv deriv = Deriv::second) {
      OpCase k{name,
               std::move(f),
               std::move(in),
               deriv,
               tol,
               eps};
      k.dtypes = {float64, float32};
      k.ref = std::move(ref);
      k.ref_note = std::move(note);
      k.fwd_tol = 1e-10;
      // float32: the GPU's libraries (cuSOLVER, cuBLAS; Jacobi SVD) order
      // their operations unlike LAPACK, and a factorization's rounding is
      // amplified by the matrix's conditioning: 64 float32 steps.
      k.fwd_ulps = 64;
      k.vmap_tol = 1e-8;
      c.push_back(std::move(k));
    };
    lapack("linalg_inv", unary([](auto& x) { return linalg::inv(x); }),
           {wc({4, 4})}, [](const Arrays& x) {
             return Arrays{from_matrix(solve_ref(to_matrix(x[0]), identity(4)))};
           });
    lapack("linalg_solve",
           binary([](auto& a, auto& b) { return linalg::solve(a, b); }),
           {wc({4, 4}), normal({4, 2})}, [](const Arrays& x) {
             return Arrays{
                 from_matrix(solve_ref(to_matrix(x[0]), to_matrix(x[1])))};
           });
    lapack("linalg_solve_triangular",
           [](const Arrays& x) {
             return Arrays{linalg::solve_triangular(x[0], x[1]),
                           linalg::solve_triangular(x[0], x[1], true)};
           },
           {wc({4, 4}), normal({4, 2})}, [](const Arrays& x) {
             auto a = to_matrix(x[0]), b = to_matrix(x[1]);
             return Arrays{from_matrix(solve_ref(triangle(a, false), b)),
                           from_matrix(solve_ref(triangle(a, true), b))};
           });
    lapack("linalg_cholesky",
           [](const Arrays& x) {
             return Arrays{linalg::cholesky(x[0]),
                           linalg::cholesky(x[0], true)};
           },
           {spd({4, 4})}, [](const Arrays& x) {
             auto l = cholesky_ref(to_matrix(x[0]));
             return Arrays{from_matrix(l), from_matrix(transpose_m(l))};
           });
    lapack("linalg_qr",
           [](const Arrays& x) {
             // R's diagonal made non-negative (Q's columns with it): the
             // factors are unique only up to those signs, which the GPU's
             // library need not choose as LAPACK does.
             auto fixed = [](const array& q, const array& r) {
               auto d = sign(diagonal(r, 0, -2, -1));
               d = where(equal(d, array(0.0, d.dtype())),
                         array(1.0, d.dtype()), d);
               return std::pair{q * expand_dims(d, -2),
                                r * expand_dims(d, -1)};
             };
             auto [q, r] = linalg::qr(x[0]);
             auto [q2, r2] = linalg::qr(x[1]);
             auto [fq, fr] = fixed(q, r);
             auto [fq2, fr2] = fixed(q2, r2);
             return Arrays{fq, fr, fq2, fr2};
           },
           {normal({4, 3}), normal({2, 4})}, {},
           "Q R = A, Q^T Q = I: test_lapack.cpp");
    lapack("linalg_eigh",
           [](const Arrays& x) {
             auto [w, v] = linalg::eigh(x[0]);
             auto [wu, vu] = linalg::eigh(x[0], "U");
             auto first_row = [](const array& m) {
               return sign(slice(m, {0, 0}, {1, m.shape(-1)}));
             };
             return Arrays{w, v * first_row(v), wu, vu * first_row(vu),
                           linalg::eigvalsh(x[0])};
           },
           {normal({3, 3})}, {}, "A V = V diag(w): test_lapack.cpp", 1e-5);
    lapack("linalg_svd",
           [](const Arrays& x) {
             Arrays out;
             for (auto& a : x) {
               int m = a.shape(0), n = a.shape(1), k = std::min(m, n);
               auto f = linalg::svd(a);
               auto u = slice(f[0], {0, 0}, {m, k});
               auto vt = slice(f[2], {0, 0}, {k, n});
               auto sg = sign(slice(u, {0, 0}, {1, k}));
               out.push_back(u * sg);
               out.push_back(f[1]);
               out.push_back(vt * swapaxes(sg, 0, 1));
               out.push_back(linalg::svd(a, false)[0]);
             }
             return out;
           },
           {normal({3, 3}), normal({4, 3}), normal({2, 3})}, {},
           "U S Vt = A: test_lapack.cpp", 1e-5);
    lapack("linalg_lu",
           [](const Arrays& x) {
             Arrays out;
             for (auto& a : x) {
               auto f = linalg::lu(a);
               auto [packed, piv] = linalg::lu_factor(a);
               out.insert(out.end(), {f[0], f[1], f[2], packed, piv});
             }
             return out;
           },
           {wc({4, 4}), normal({4, 2}), normal({2, 4})}, {},
           "P L U = A: test_lapack.cpp");
    // Complex64 outputs: real and imaginary parts, a float32-sized step.
    // The eigenvectors' phase (sign, for real ones) is arbitrary and may
    // jump: they are compared with their first component made real
    // positive. geev leaves the eigenvalues in no particular order, which
    // the GPU's library need not share with LAPACK: both are sorted (by
    // real part, then imaginary part) before they are compared.
    auto eig_order = [](const array& w) {
      return stop_gradient(argsort(real(w) + imag(w) * array(1e-3f), -1));
    };
    lapack("linalg_eig",
           [eig_order](const Arrays& x) {
             auto [w, v] = linalg::eig(x[0]);
             auto order = eig_order(w);
             w = take_along_axis(w, order, -1);
             v = take_along_axis(v, expand_dims(order, -2), -1);
             auto v0 = slice(v, {0, 0}, {1, 3});
             auto vn = v / (v0 / astype(abs(v0), complex64));
             return Arrays{real(w), imag(w), real(vn), imag(vn)};
           },
           {normal({3, 3})}, {}, "A V = V diag(w): test_lapack.cpp", 1e-3,
           1e-3, Deriv::first);
    lapack("linalg_eigvals",
           [eig_order](const Arrays& x) {
             auto w = linalg::eigvals(x[0]);
             w = take_along_axis(w, eig_order(w), -1);
             return Arrays{real(w), imag(w)};
           },
           {normal({3, 3})}, {}, "eigenvalues: test_lapack.cpp", 1e-3, 1e-3,
           Deriv::first);
    for (auto* k = &c.back(); k->name.rfind("linalg_eig", 0) == 0; --k) {
      k->vmap_tol = 2e-6;  // complex64 results
    }
  }
  return c;
}

}  // namespace fluxion::test
