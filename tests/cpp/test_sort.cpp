// Sorting, partitioning and scans against references computed here with
// std::stable_sort and double-precision loops, over layouts and dtypes.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numeric>
#include <random>
#include <sstream>

#include "test_inputs.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;
using namespace fluxion::test::inputs;

namespace {

const Shape kShape{3, 4, 5};

// Rows of `shape` along `axis`: the flat row-major positions of each.
std::vector<std::vector<int64_t>> rows_of(const Shape& shape, int axis) {
  int nd = static_cast<int>(shape.size());
  axis = axis < 0 ? axis + nd : axis;
  int64_t n = shape[axis];
  int64_t inner = 1;
  for (int d = axis + 1; d < nd; ++d) {
    inner *= shape[d];
  }
  int64_t total = shape_size(shape);
  std::vector<std::vector<int64_t>> rows;
  for (int64_t o = 0; o < total / (n * inner); ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      std::vector<int64_t> r;
      for (int64_t i = 0; i < n; ++i) {
        r.push_back((o * n + i) * inner + j);
      }
      rows.push_back(r);
    }
  }
  return rows;
}

// NumPy's order: NaNs last.
bool ref_less(double a, double b) {
  return a < b || (std::isnan(b) && !std::isnan(a));
}

// Stable argsort and sort of each row.
std::vector<double> ref_argsort(const std::vector<double>& x,
                                const Shape& shape, int axis) {
  std::vector<double> out(x.size());
  for (auto& r : rows_of(shape, axis)) {
    std::vector<int64_t> idx(r.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
      return ref_less(x[r[a]], x[r[b]]);
    });
    for (size_t i = 0; i < r.size(); ++i) {
      out[r[i]] = static_cast<double>(idx[i]);
    }
  }
  return out;
}
std::vector<double> ref_sort(const std::vector<double>& x, const Shape& shape,
                             int axis) {
  auto idx = ref_argsort(x, shape, axis);
  std::vector<double> out(x.size());
  for (auto& r : rows_of(shape, axis)) {
    for (size_t i = 0; i < r.size(); ++i) {
      out[r[i]] = x[r[static_cast<int64_t>(idx[r[i]])]];
    }
  }
  return out;
}

// Small values with many ties, valid in every dtype.
std::vector<double> tie_values(int64_t n, Dtype t) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    double x = static_cast<double>((i * 7919) % 13);
    if (t == bool_) {
      x = static_cast<double>(static_cast<int64_t>(x) % 2);
    } else if (!is_unsigned(t)) {
      x -= 6;
    }
    v[i] = x;
  }
  return v;
}

const std::vector<Dtype>& real_dtypes() {
  static const std::vector<Dtype> t = {
      bool_, uint8, uint16,  uint32,   uint64,  int8,   int16,
      int32, int64, float16, bfloat16, float32, float64};
  return t;
}

}  // namespace

TEST(Sort, ValuesAndStableArgsortEveryDtypeLayoutAxis) {
  for (Dtype t : real_dtypes()) {
    auto vals = tie_values(shape_size(kShape), t);
    for (Layout l : all_layouts()) {
      auto a = make_array(vals, kShape, t, l);
      for (int axis : {0, 1, 2, -1}) {
        std::string what = std::string(dtype_name(t)) + " " + layout_name(l) +
                           " axis " + std::to_string(axis);
        auto s = sort(a, axis);
        EXPECT_EQ(s.dtype(), t);
        EXPECT_EQ(s.shape(), kShape);
        expect_close(s, ref_sort(vals, kShape, axis), 0, 0, what);
        auto i = argsort(a, axis);
        EXPECT_EQ(i.dtype(), uint32);
        expect_close(i, ref_argsort(vals, kShape, axis), 0, 0, what);
      }
    }
  }
}

TEST(Sort, FlattenedForms) {
  auto vals = tie_values(24, float32);
  auto a = make_array(vals, {2, 3, 4}, float32, Layout::Transposed);
  auto s = sort(a);
  EXPECT_EQ(s.shape(), Shape{24});
  expect_close(s, ref_sort(vals, {24}, 0), 0, 0);
  expect_close(argsort(a), ref_argsort(vals, {24}, 0), 0, 0);
  // A scalar flattens to one element.
  expect_close(sort(array(3.0f)), {3.0}, 0, 0);
}

TEST(Sort, NaNsGoLastAndInfinitiesInOrder) {
  std::vector<double> v{3, kNaN, 1, -kInf, kNaN, 2, kInf, -0.5};
  for (Dtype t : {float16, bfloat16, float32, float64}) {
    auto a = array(v.begin(), {8}, t);
    expect_close(sort(a), {-kInf, -0.5, 1, 2, 3, kInf, kNaN, kNaN}, 0, 0,
                 dtype_name(t));
    // Stable: the first NaN (index 1) before the second (index 4).
    expect_close(argsort(a), {3, 7, 2, 5, 0, 6, 1, 4}, 0, 0, dtype_name(t));
    // NaN is the largest: it leads topk.
    expect_close(topk(a, 3), {kNaN, kNaN, kInf}, 0, 0, dtype_name(t));
  }
}

TEST(Sort, ComplexLexicographic) {
  std::vector<complex64_t> v{{1, 2}, {0, 5}, {1, -1}, {-2, 0}, {0, 5}};
  auto a = array(v.begin(), {5}, complex64);
  auto s = to_vector<complex64_t>(sort(a));
  std::vector<complex64_t> want{{-2, 0}, {0, 5}, {0, 5}, {1, -1}, {1, 2}};
  EXPECT_EQ(s, want);
  expect_close(argsort(a), {3, 1, 4, 2, 0}, 0, 0);
  auto p = to_vector<complex64_t>(partition(a, 3));
  EXPECT_EQ(p[3], complex64_t(1, -1));
}

TEST(Sort, LargeRowsInParallel) {
  // Enough rows and elements to split over the threads, along both axes.
  Shape shape{64, 1000};
  std::vector<double> v(shape_size(shape));
  std::mt19937 gen(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (auto& x : v) {
    x = static_cast<float>(u(gen));
  }
  auto a = array(v.begin(), shape, float32);
  for (int axis : {0, 1}) {
    expect_close(sort(a, axis), ref_sort(v, shape, axis), 0, 0);
    expect_close(argsort(a, axis), ref_argsort(v, shape, axis), 0, 0);
  }
}

TEST(Sort, LongRowsEveryKeyType) {
  // Rows long enough for the radix path: negative numbers, extremes of the
  // float range, signed zeros and NaNs, in contiguous and strided rows.
  const int n = 2000;
  for (Dtype t : {int32, int64, uint32, uint64, float16, float32, float64}) {
    std::vector<double> v(2 * n);
    for (int i = 0; i < 2 * n; ++i) {
      double x = static_cast<double>((i * 2654435761LL) % 4001) - 2000;
      v[i] = is_unsigned(t) ? x + 2000 : x;
    }
    if (t == int64 || t == uint64) {
      v[5] = 1099511627776.0;  // 2^40: bytes above the fourth in use
      v[6] = t == int64 ? -1099511627776.0 : 3.0;
    }
    if (is_floating_point(t)) {
      v[1] = kNaN;
      v[2] = -kInf;
      v[3] = kInf;
      v[4] = -0.0;
      v[7] = 0.25;
      v[8] = -1e-3;
      v[9] = kNaN;
    }
    for (Layout l : {Layout::RowMajor, Layout::Strided}) {
      auto a = make_array(v, {2, n}, t, l);
      std::string what = std::string(dtype_name(t)) + " " + layout_name(l);
      auto want = ref_sort(round_all(v, t), {2, n}, 1);
      expect_close(sort(a, 1), want, 0, 0, what);
      // Along a strided axis (gathered rows).
      expect_close(transpose(sort(transpose(a), 0)), want, 0, 0, what);
      expect_close(argsort(a, 1), ref_argsort(round_all(v, t), {2, n}, 1), 0, 0,
                   what);
    }
  }
}

TEST(Sort, PartitionPropertyEveryKth) {
  for (Dtype t : {int32, uint8, float16, float32, float64}) {
    auto vals = tie_values(shape_size(kShape), t);
    for (Layout l : {Layout::RowMajor, Layout::Transposed, Layout::Reversed}) {
      auto a = make_array(vals, kShape, t, l);
      for (int axis : {0, 1, 2}) {
        int n = kShape[axis];
        auto sorted = ref_sort(vals, kShape, axis);
        for (int kth = -n; kth < n; ++kth) {
          SCOPED_TRACE(std::string(dtype_name(t)) + " " + layout_name(l) +
                       " axis " + std::to_string(axis) + " kth " +
                       std::to_string(kth));
          int k = kth < 0 ? kth + n : kth;
          auto p = to_vector<double>(partition(a, kth, axis));
          auto ip = argpartition(a, kth, axis);
          EXPECT_EQ(ip.dtype(), uint32);
          // The values are those taken at the indices.
          expect_close(take_along_axis(a, ip, axis), p, 0, 0);
          auto idx = to_vector<double>(ip);
          for (auto& r : rows_of(kShape, axis)) {
            double pivot = p[r[k]];
            EXPECT_EQ(pivot, sorted[r[k]]);
            for (int i = 0; i < n; ++i) {
              if (i < k) {
                EXPECT_LE(p[r[i]], pivot);
              } else if (i > k) {
                EXPECT_GE(p[r[i]], pivot);
              }
            }
            std::vector<double> seen;
            for (int i = 0; i < n; ++i) {
              seen.push_back(idx[r[i]]);
            }
            std::sort(seen.begin(), seen.end());
            EXPECT_EQ(seen, iota_vec(n));  // a permutation
          }
        }
      }
    }
  }
}

TEST(Sort, TopK) {
  auto vals = tie_values(shape_size(kShape), float32);
  for (Layout l : {Layout::RowMajor, Layout::Strided}) {
    auto a = make_array(vals, kShape, float32, l);
    for (int axis : {0, 1, 2, -1}) {
      int ax = axis < 0 ? axis + 3 : axis;
      int n = kShape[ax];
      for (int k : {1, 2, n}) {
        auto got = topk(a, k, axis);
        Shape want_shape = kShape;
        want_shape[ax] = k;
        ASSERT_EQ(got.shape(), want_shape);
        auto sorted = ref_sort(vals, kShape, axis);
        auto g = to_vector<double>(got);
        auto grows = rows_of(want_shape, axis);
        auto srows = rows_of(kShape, axis);
        for (size_t r = 0; r < grows.size(); ++r) {
          for (int i = 0; i < k; ++i) {
            EXPECT_EQ(g[grows[r][i]], sorted[srows[r][n - 1 - i]]);
          }
        }
      }
    }
  }
  expect_close(topk(array({4, 9, 1, 7, 9}, {5}), 3), {9, 9, 7}, 0, 0);
  expect_close(topk(array({4, 9, 1, 7, 3, 8}, {2, 3}), 2), {9, 8}, 0, 0);
}

// --- scans ---

namespace {

enum class Op { Sum, Prod, Max, Min, LogAddExp };

double ref_op(Op op, double a, double b) {
  switch (op) {
    case Op::Sum:
      return a + b;
    case Op::Prod:
      return a * b;
    case Op::Max:
      return std::isnan(a) || a > b ? a : b;
    case Op::Min:
      return std::isnan(a) || a < b ? a : b;
    case Op::LogAddExp: {
      double hi = std::max(a, b), lo = std::min(a, b);
      return lo == -kInf ? hi : hi + std::log1p(std::exp(lo - hi));
    }
  }
  return 0;
}
double ref_init(Op op) {
  switch (op) {
    case Op::Sum:
      return 0;
    case Op::Prod:
      return 1;
    case Op::Max:
    case Op::LogAddExp:
      return -kInf;
    case Op::Min:
      return kInf;
  }
  return 0;
}

std::vector<double> ref_scan(const std::vector<double>& x, const Shape& shape,
                             int axis, Op op, bool reverse, bool inclusive) {
  std::vector<double> out(x.size());
  for (auto r : rows_of(shape, axis)) {
    if (reverse) {
      std::reverse(r.begin(), r.end());
    }
    double acc = ref_init(op);
    for (auto p : r) {
      if (inclusive) {
        acc = ref_op(op, acc, x[p]);
        out[p] = acc;
      } else {
        out[p] = acc;
        acc = ref_op(op, acc, x[p]);
      }
    }
  }
  return out;
}

array run_scan(Op op, const array& a, int axis, bool reverse, bool inclusive) {
  switch (op) {
    case Op::Sum:
      return cumsum(a, axis, reverse, inclusive);
    case Op::Prod:
      return cumprod(a, axis, reverse, inclusive);
    case Op::Max:
      return cummax(a, axis, reverse, inclusive);
    case Op::Min:
      return cummin(a, axis, reverse, inclusive);
    case Op::LogAddExp:
      return logcumsumexp(a, axis, reverse, inclusive);
  }
  return a;
}

}  // namespace

TEST(Scan, FloatEveryOpDirectionLayoutAxis) {
  std::vector<double> v(shape_size(kShape));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = 0.5 + std::sin(static_cast<double>(i)) * 0.6;  // prods stay sane
  }
  for (Dtype t : {float32, float64}) {
    for (Op op : {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::LogAddExp}) {
      for (Layout l : all_layouts()) {
        auto a = make_array(v, kShape, t, l);
        for (int axis : {0, 1, 2, -1}) {
          for (bool reverse : {false, true}) {
            for (bool inclusive : {true, false}) {
              std::string what =
                  std::string(dtype_name(t)) + " op " +
                  std::to_string(static_cast<int>(op)) + " " + layout_name(l) +
                  " axis " + std::to_string(axis) +
                  (reverse ? " reverse" : "") + (inclusive ? "" : " exclusive");
              auto got = run_scan(op, a, axis, reverse, inclusive);
              EXPECT_EQ(got.dtype(), t);
              double tol = t == float32 ? 1e-5 : 1e-12;
              expect_close(got,
                           ref_scan(v, kShape, axis, op, reverse, inclusive),
                           tol, tol, what);
            }
          }
        }
      }
    }
  }
}

TEST(Scan, IntegerAndHalfDtypes) {
  struct Case {
    Dtype in;
    Dtype sum_out;
  };
  for (auto c : std::vector<Case>{{bool_, int32},
                                  {int8, int32},
                                  {int16, int32},
                                  {uint8, uint32},
                                  {uint16, uint32},
                                  {int32, int32},
                                  {uint32, uint32},
                                  {int64, int64},
                                  {uint64, uint64},
                                  {float16, float16},
                                  {bfloat16, bfloat16}}) {
    auto v = tie_values(shape_size(kShape), c.in);
    if (c.in != bool_) {
      for (auto& x : v) {
        x = std::fmod(std::abs(x), 3.0) + (is_unsigned(c.in) ? 0 : -1);
      }
    }
    for (Layout l : {Layout::RowMajor, Layout::Transposed, Layout::Reversed}) {
      auto a = make_array(v, kShape, c.in, l);
      std::string what = std::string(dtype_name(c.in)) + " " + layout_name(l);
      for (int axis : {0, 2}) {
        double tol = is_floating_point(c.in) ? 1e-2 : 0;
        auto s = cumsum(a, axis);
        EXPECT_EQ(s.dtype(), c.sum_out) << what;
        expect_close(s, ref_scan(v, kShape, axis, Op::Sum, false, true), tol,
                     tol, what);
        auto p = cumprod(a, axis, true, false);
        EXPECT_EQ(p.dtype(), c.sum_out) << what;
        expect_close(p, ref_scan(v, kShape, axis, Op::Prod, true, false), tol,
                     tol, what);
        auto mx = cummax(a, axis, false, true);
        EXPECT_EQ(mx.dtype(), c.in) << what;
        expect_close(mx, ref_scan(v, kShape, axis, Op::Max, false, true), 0, 0,
                     what);
        expect_close(cummin(a, axis, true, true),
                     ref_scan(v, kShape, axis, Op::Min, true, true), 0, 0,
                     what);
      }
    }
  }
  // Small types widen before they overflow; int32 wraps like NumPy.
  auto big = full({300}, 200, uint8);
  EXPECT_EQ(cumsum(big).dtype(), uint32);
  EXPECT_EQ(to_vector<double>(cumsum(big)).back(), 60000.0);
  auto wrap = array({2147483647, 1}, {2});
  EXPECT_EQ(to_vector<int64_t>(cumsum(wrap)).back(), -2147483648LL);
  // Half-precision sums accumulate in float (1 + 2048 ones is exact there,
  // and rounds to 2048 or 2050 at the end).
  auto h = cumsum(ones({2049}, float16));
  EXPECT_NEAR(to_vector<double>(h).back(), 2049, 1.0);
}

TEST(Scan, ExclusiveIdentitiesAndNaN) {
  auto a = array({2.0, kNaN, 1.0, 5.0}, {4}, float32);
  expect_close(cumsum(a, 0, false, false), {0, 2, kNaN, kNaN}, 0, 0);
  expect_close(cummax(a, 0, false, true), {2, kNaN, kNaN, kNaN}, 0, 0);
  expect_close(cummin(a, 0, true, false), {kNaN, 1, 5, kInf}, 0, 0);
  expect_close(cummax(a, 0, false, false), {-kInf, 2, kNaN, kNaN}, 0, 0);
  expect_close(logcumsumexp(array({-kInf, 0.0}, {2}, float32), 0, false, false),
               {-kInf, -kInf}, 0, 0);
  expect_close(cumprod(array({3, 4, 5}, {3}), 0, true, false), {20, 5, 1}, 0,
               0);
  // Integers: cummax's exclusive start is the type's lowest value.
  expect_close(cummax(array({3, 4}, {2}, int8), 0, false, false), {-128, 3}, 0,
               0);
  // Flattened forms and logcumsumexp of integers (promoted to float32).
  auto m = array({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_close(cumsum(m), {1, 3, 6, 10, 15, 21}, 0, 0);
  expect_close(cumsum(m, true), {21, 20, 18, 15, 11, 6}, 0, 0);
  auto lc = logcumsumexp(m);
  EXPECT_EQ(lc.dtype(), float32);
  expect_close(lc,
               ref_scan({1, 2, 3, 4, 5, 6}, {6}, 0, Op::LogAddExp, false, true),
               1e-6, 1e-6);
  // Complex sums and lexicographic maxima.
  std::vector<complex64_t> z{{1, 2}, {1, 3}, {0, 9}};
  auto za = array(z.begin(), {3}, complex64);
  auto zs = to_vector<complex64_t>(cumsum(za));
  EXPECT_EQ(zs.back(), complex64_t(2, 14));
  auto zm = to_vector<complex64_t>(cummax(za));
  EXPECT_EQ(zm.back(), complex64_t(1, 3));
}

TEST(Scan, LargeSingleRowAndColumns) {
  // One long row (sequential) and many columns (the blocked sweep).
  int n = 1 << 17;
  auto a = ones({n}, float32);
  auto s = to_vector<double>(cumsum(a));
  EXPECT_EQ(s[12345], 12346.0);
  EXPECT_EQ(s.back(), static_cast<double>(n));
  Shape shape{300, 600};
  std::vector<double> v(shape_size(shape));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<double>(i % 7) - 3;
  }
  auto b = array(v.begin(), shape, int32);
  expect_close(cumsum(b, 0, true), ref_scan(v, shape, 0, Op::Sum, true, true),
               0, 0);
  expect_close(cummax(b, 0), ref_scan(v, shape, 0, Op::Max, false, true), 0, 0);
}

// Gradients where finite differences cannot go: products through zeros,
// and the routing of max's cotangent.
TEST(Scan, ProdGradientWithZerosIsExact) {
  std::vector<double> x{2, 0, 3, 0, 5, 0.5};
  std::vector<double> ct{1, -2, 0.5, 3, 1, 2};
  int n = static_cast<int>(x.size());
  for (bool reverse : {false, true}) {
    for (bool inclusive : {true, false}) {
      // Output i is the product over S_i (in scan order, up to and
      // maybe including i); dx_j = sum over i with j in S_i.
      auto in_set = [&](int i, int k) {
        int pi = reverse ? n - 1 - i : i;
        int pk = reverse ? n - 1 - k : k;
        return inclusive ? pk <= pi : pk < pi;
      };
      std::vector<double> want(n, 0), tangent(n, 0);
      std::vector<double> t{0.3, -1, 2, 0.7, -0.4, 1.5};
      for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) {
          if (!in_set(i, j)) {
            continue;
          }
          double p = 1;
          for (int k = 0; k < n; ++k) {
            if (k != j && in_set(i, k)) {
              p *= x[k];
            }
          }
          want[j] += ct[i] * p;
          tangent[i] += t[j] * p;
        }
      }
      auto f = [&](const array& a) {
        return cumprod(a, 0, reverse, inclusive);
      };
      auto xa = array(x.begin(), {n}, float64);
      auto g = vjp(f, xa, array(ct.begin(), {n}, float64)).second;
      std::string what = std::string(reverse ? "reverse" : "forward") +
                         (inclusive ? " inclusive" : " exclusive");
      expect_close(g, want, 1e-12, 1e-12, what);
      auto jt = jvp(f, xa, array(t.begin(), {n}, float64)).second;
      expect_close(jt, tangent, 1e-12, 1e-12, what);
    }
  }
}

TEST(Scan, ExtremumGradientRoutesToSource) {
  auto x = array({1.0, 3.0, 2.0, 5.0, 4.0}, {5});
  auto ct = array({1.0, 10.0, 100.0, 1000.0, 10000.0}, {5});
  auto g = vjp([](const array& a) { return cummax(a); }, x, ct).second;
  expect_close(g, {1, 110, 0, 11000, 0}, 0, 0);
  // Reverse cummin: y = [1, 2, 2, 4, 4]: from x0, x2, x2, x4, x4.
  auto gr =
      vjp([](const array& a) { return cummin(a, 0, true); }, x, ct).second;
  expect_close(gr, {1, 0, 110, 0, 11000}, 0, 0);
  // Exclusive: y = [-inf, 1, 3, 3, 5], from nothing, x0, x1, x1, x3.
  auto ge =
      vjp([](const array& a) { return cummax(a, 0, false, false); }, x, ct)
          .second;
  expect_close(ge, {10, 1100, 0, 10000, 0}, 0, 0);
  auto t = array({0.1, 0.2, 0.3, 0.4, 0.5}, {5});
  auto jt = jvp([](const array& a) { return cummax(a); }, x, t).second;
  expect_close(jt, {0.1, 0.2, 0.2, 0.4, 0.4}, 0, 1e-15);
}

TEST(Scan, LogcumsumexpGradientOverAWideRange) {
  // exp(1005) overflows: the rules work with logs of the weights.
  std::vector<double> x{-1000, 0, 5, -kInf, 2};
  std::vector<double> ct{1, -2, 0.5, 3, 0};
  std::vector<double> t{0.3, -1, 2, 0.7, -0.4};
  int n = 5;
  std::vector<double> y(n);
  double acc = -kInf;
  for (int i = 0; i < n; ++i) {
    double hi = std::max(acc, x[i]), lo = std::min(acc, x[i]);
    acc = lo == -kInf ? hi : hi + std::log1p(std::exp(lo - hi));
    y[i] = acc;
  }
  std::vector<double> want(n, 0), tangent(n, 0);
  for (int j = 0; j < n; ++j) {
    for (int i = j; i < n; ++i) {
      want[j] += ct[i] * std::exp(x[j] - y[i]);
      tangent[i] += t[j] * std::exp(x[j] - y[i]);
    }
  }
  auto f = [](const array& a) { return logcumsumexp(a); };
  auto xa = array(x.begin(), {n}, float64);
  expect_close(vjp(f, xa, array(ct.begin(), {n}, float64)).second, want, 1e-12,
               1e-300);
  expect_close(jvp(f, xa, array(t.begin(), {n}, float64)).second, tangent,
               1e-12, 1e-300);
  // A leading -inf (an empty prefix) weighs nothing: no NaN.
  auto z = array({-kInf, 1.0}, {2});
  auto g = vjp(f, z, array({1.0, 1.0}, {2})).second;
  expect_close(g, {0, 1}, 1e-12, 1e-12);
}

TEST(Sort, SortGradientUnpermutes) {
  auto x = array({3.0, 1.0, 2.0}, {3});
  auto ct = array({10.0, 20.0, 30.0}, {3});
  auto g = vjp([](const array& a) { return sort(a); }, x, ct).second;
  expect_close(g, {30, 10, 20}, 0, 0);
  auto gt = vjp([](const array& a) { return topk(a, 2); }, x,
                array({10.0, 20.0}, {2}))
                .second;
  expect_close(gt, {10, 0, 20}, 0, 0);
  auto ga =
      vjp([](const array& a) { return astype(argsort(a), float64); }, x, ct)
          .second;
  expect_close(ga, {0, 0, 0}, 0, 0);
}

TEST(Sort, EveryErrorMessage) {
  auto a = zeros({2, 3});
  expect_error<std::invalid_argument>([&] { sort(a, 2); }, "[sort] Invalid axis 2");
  expect_error<std::invalid_argument>([&] { argsort(a, -3); },
                                  "[argsort] Invalid axis -3");
  expect_error<std::invalid_argument>([&] { sort(array(1.0f), 0); },
                                  "[sort] Invalid axis 0");
  expect_error<std::invalid_argument>([&] { partition(a, 0, 5); },
                                  "[partition] Invalid axis 5");
  expect_error<std::invalid_argument>([&] { argpartition(a, 0, -4); },
                                  "[argpartition] Invalid axis -4");
  expect_error<std::invalid_argument>(
      [&] { partition(a, 3, 1); },
      "[partition] Received invalid kth 3 along axis 1 of an array of shape "
      "(2,3).");
  expect_error<std::invalid_argument>(
      [&] { argpartition(a, -3, 0); },
      "[argpartition] Received invalid kth -3 along axis 0");
  expect_error<std::invalid_argument>([&] { partition(a, 6); },
                                      "[partition] Received invalid kth 6");
  expect_error<std::invalid_argument>(
      [&] { topk(a, 4, 1); },
      "[topk] Received k = 4 for axis 1 of an array of shape (2,3): k must "
      "be in [0, 3].");
  expect_error<std::invalid_argument>([&] { topk(a, -1); },
                                      "[topk] Received k = -1");
  EXPECT_EQ(topk(a, 0, 1).shape(), Shape({2, 0}));
  EXPECT_EQ(topk(a, 0).shape(), Shape({0}));  // flattened form
  expect_error<std::invalid_argument>([&] { topk(a, 7); },
                                      "[topk] Received k = 7");
  expect_error<std::invalid_argument>([&] { topk(a, 1, 2); },
                                  "[topk] Invalid axis 2");
}

TEST(Scan, EveryErrorMessage) {
  auto a = zeros({2, 3});
  expect_error<std::invalid_argument>([&] { cumsum(a, 2); },
                                  "[cumsum] Invalid axis 2");
  expect_error<std::invalid_argument>([&] { cumprod(a, -3); },
                                  "[cumprod] Invalid axis -3");
  expect_error<std::invalid_argument>([&] { cummax(a, 3); },
                                  "[cummax] Invalid axis 3");
  expect_error<std::invalid_argument>([&] { cummin(a, 9); },
                                  "[cummin] Invalid axis 9");
  expect_error<std::invalid_argument>([&] { logcumsumexp(a, 2); },
                                  "[logcumsumexp] Invalid axis 2");
  expect_error<std::invalid_argument>(
      [&] { logcumsumexp(zeros({3}, bool_)); },
      "[logcumsumexp] Received an input of dtype bool: it needs a real "
      "number type.");
  // complex64 is supported (as MLX): log(cumsum(exp(z))).
  auto lz = logcumsumexp(array({complex64_t(0, 1), complex64_t(1, -0.5f)}));
  auto ez = to_vector<complex64_t>(lz);
  auto ref = std::log(std::exp(std::complex<double>(0, 1)) +
                      std::exp(std::complex<double>(1, -0.5)));
  EXPECT_NEAR(std::abs(std::exp(std::complex<double>(ez[1])) - std::exp(ref)),
              0, 1e-5);
}

TEST(Sort, EmptyAxes) {
  auto e = zeros({0, 3});
  EXPECT_EQ(sort(e, 0).shape(), (Shape{0, 3}));
  EXPECT_EQ(to_vector<double>(argsort(e, 1)).size(), 0u);
  EXPECT_EQ(to_vector<double>(cumsum(e, 0)).size(), 0u);
  expect_error<std::invalid_argument>([&] { partition(e, 0, 0); },
                                      "[partition] Received invalid kth 0");
}

TEST(Sort, PrimitiveParametersAndEquivalence) {
  auto a = zeros({3, 4});
  auto sorted = sort(a, 1);  // keeps the primitive alive
  auto& p = sorted.primitive();
  EXPECT_STREQ(p.name(), "Sort");
  EXPECT_TRUE(p.is_equivalent(sort(a, -1).primitive()));
  EXPECT_FALSE(p.is_equivalent(sort(a, 0).primitive()));
  EXPECT_FALSE(p.is_equivalent(argsort(a, 1).primitive()));
  EXPECT_TRUE(
      argsort(a, 0).primitive().is_equivalent(argsort(a, -2).primitive()));
  EXPECT_FALSE(
      argsort(a, 0).primitive().is_equivalent(argsort(a, 1).primitive()));
  auto part = partition(a, 1, 1);
  EXPECT_TRUE(part.primitive().is_equivalent(partition(a, -3, 1).primitive()));
  EXPECT_FALSE(part.primitive().is_equivalent(partition(a, 2, 1).primitive()));
  EXPECT_FALSE(part.primitive().is_equivalent(partition(a, 1, 0).primitive()));
  EXPECT_FALSE(
      part.primitive().is_equivalent(argpartition(a, 1, 1).primitive()));
  EXPECT_TRUE(argpartition(a, 1, 1).primitive().is_equivalent(
      argpartition(a, 1, -1).primitive()));
  EXPECT_FALSE(argpartition(a, 1, 1).primitive().is_equivalent(
      argpartition(a, 0, 1).primitive()));
  auto c = cumsum(a, 1);
  EXPECT_TRUE(c.primitive().is_equivalent(cumsum(a, -1).primitive()));
  EXPECT_FALSE(c.primitive().is_equivalent(cumsum(a, 0).primitive()));
  EXPECT_FALSE(c.primitive().is_equivalent(cumsum(a, 1, true).primitive()));
  EXPECT_FALSE(
      c.primitive().is_equivalent(cumsum(a, 1, false, false).primitive()));
  EXPECT_FALSE(c.primitive().is_equivalent(cumprod(a, 1).primitive()));
  auto cm = cummax(a, 0, true, false);
  auto& scan = static_cast<const Scan&>(cm.primitive());
  EXPECT_EQ(scan.type(), Scan::Max);
  EXPECT_EQ(scan.axis(), 0);
  EXPECT_TRUE(scan.reverse());
  EXPECT_FALSE(scan.inclusive());
  std::ostringstream os;
  scan.print(os);
  EXPECT_EQ(os.str(), "Scan(Max, axis=0, reverse, exclusive)");
  EXPECT_EQ(sort(a, 1).primitive().output_shapes({a})[0], (Shape{3, 4}));
}
