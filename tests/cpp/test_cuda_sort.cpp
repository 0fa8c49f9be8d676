// The GPU's sort, argsort, partition, scans and searchsorted against the
// CPU's, on the same inputs: every dtype, rows shorter and longer than one
// block, odd lengths, strided and transposed inputs, both ends of an axis,
// empty arrays, NaN, inf, signed zeros and ties. Sorts, argsorts (stable:
// ties in index order on both), integer scans and max/min scans must be
// identical; float scans are fed small integers (sums exact in float, and
// products of +-1, +-2, +-0.5 exact) so that they are identical too,
// except logcumsumexp (a tolerance). Skipped without a GPU.
#include <algorithm>
#include <random>
#include <string>

#include "fluxion/ops/searchsorted.h"
#include "device_scope.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

const Dtype kAllDtypes[] = {bool_,    uint8,   uint16,  uint32,   uint64,
                            int8,     int16,   int32,   int64,    float16,
                            bfloat16, float32, float64, complex64};

bool is_float(Dtype t) {
  return t == float16 || t == bfloat16 || t == float32 || t == float64;
}

// Values with many ties: integers in [-range, range] (halves for floats),
// made nonnegative for unsigned types; floats get NaN, +-inf and -0.0
// sprinkled in when `specials`.
std::vector<double> tie_values(int64_t n, Dtype t, int range, bool specials,
                               uint32_t seed) {
  std::mt19937 rng(seed);
  if (t == int8 || t == uint8) {
    range = std::min(range, 100);  // in range for 8-bit types
  }
  std::uniform_int_distribution<int> d(-range, range);
  std::vector<double> v(n);
  for (auto& x : v) {
    double k = d(rng);
    if (is_unsigned(t)) {
      k = std::abs(k);
    }
    x = is_float(t) || t == complex64 ? k * 0.5 : k;
  }
  if (specials && (is_float(t) || t == complex64)) {
    const double sp[] = {kNaN, kInf, -kInf, -0.0, 0.0, kNaN};
    for (int64_t i = 0; i < n; i += 7) {
      v[i] = sp[(i / 7) % 6];
    }
  }
  return v;
}

// A complex array whose imaginary parts tie often too (and hold a NaN).
array complex_values(int64_t n, const Shape& shape, uint32_t seed) {
  auto re = tie_values(n, float32, 3, true, seed);
  auto im = tie_values(n, float32, 2, false, seed + 1);
  if (n > 5) {
    im[5] = kNaN;
  }
  auto r = array(re.begin(), shape, float32);
  auto i = array(im.begin(), shape, float32);
  return add(astype(r, complex64),
             multiply(astype(i, complex64), array(complex64_t(0, 1))));
}

array make(const Shape& shape, Dtype t, int range = 20, bool specials = true,
           uint32_t seed = 1) {
  int64_t n = shape_size(shape);
  if (t == complex64) {
    return complex_values(n, shape, seed);
  }
  auto v = tie_values(n, t, range, specials, seed);
  return array(v.begin(), shape, t);
}

// Row-major values of `a` as doubles (complex: real parts, then imaginary
// parts), and as int64 for the integer types (exact for 64-bit values).
void expect_equal(array gpu, array cpu, const std::string& what,
                  double rtol = 0) {
  ASSERT_EQ(gpu.dtype(), cpu.dtype()) << what;
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  if (gpu.dtype() == complex64) {
    expect_equal(real(gpu, Device::cpu), real(cpu, Device::cpu),
                 what + " (real)", rtol);
    expect_equal(imag(gpu, Device::cpu), imag(cpu, Device::cpu),
                 what + " (imag)", rtol);
    return;
  }
  if (!is_float(gpu.dtype())) {
    auto g = to_vector<int64_t>(gpu);
    auto c = to_vector<int64_t>(cpu);
    int bad = 0;
    for (size_t i = 0; i < g.size() && bad < 10; ++i) {
      if (g[i] != c[i]) {
        ADD_FAILURE() << what << " at " << i << ": gpu " << g[i] << ", cpu "
                      << c[i];
        ++bad;
      }
    }
    return;
  }
  auto g = to_vector<double>(gpu);
  auto c = to_vector<double>(cpu);
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 10; ++i) {
    // rtol (logcumsumexp) is relative to max(|cpu|, 1): a log near 0 is
    // the difference of two larger numbers.
    bool ok = (std::isnan(g[i]) && std::isnan(c[i])) || g[i] == c[i] ||
              (rtol > 0 &&
               std::abs(g[i] - c[i]) <= rtol * std::max(std::abs(c[i]), 1.0));
    if (!ok) {
      ADD_FAILURE() << what << " at " << i << ": gpu " << g[i] << ", cpu "
                    << c[i];
      ++bad;
    }
  }
}

std::string name(Dtype t, const Shape& s, int axis) {
  std::string r = std::string(dtype_name(t)) + " (";
  for (auto d : s) {
    r += std::to_string(d) + ",";
  }
  return r + ") axis " + std::to_string(axis);
}

// sort and argsort of `a` along `axis`, GPU against CPU. Complex values
// that tie without being equal (NaNs with different parts) come out of the
// CPU's sort (std::sort) in any order, so a complex sort is compared with
// the values at the CPU's argsort (stable on both).
void check_sorts(const array& a, int axis, const std::string& what) {
  auto cpu_idx = argsort(a, axis, Device::cpu);
  expect_equal(argsort(a, axis, Device::gpu), cpu_idx, "argsort " + what);
  expect_equal(sort(a, axis, Device::gpu),
               a.dtype() == complex64
                   ? take_along_axis(a, cpu_idx, axis, Device::cpu)
                   : sort(a, axis, Device::cpu),
               "sort " + what);
}

}  // namespace

TEST(CudaSort, GpuSortsMatchCpuEveryDtype) {
  SKIP_WITHOUT_GPU();
  // Block tiers (<= 128, <= 1024, <= 4096) and the device sorts (one row,
  // several rows), at odd lengths.
  const std::vector<Shape> shapes = {{1},       {3},       {1000},
                                     {4097},    {7, 129},  {5, 1000},
                                     {3, 4096}, {2, 5000}, {100000}};
  for (Dtype t : kAllDtypes) {
    for (const auto& s : shapes) {
      auto a = make(s, t);
      int last = static_cast<int>(s.size()) - 1;
      check_sorts(a, last, name(t, s, last));
      if (s.size() == 2) {
        check_sorts(a, 0, name(t, s, 0));
      }
    }
  }
}

TEST(CudaSort, GpuLongRowsAndManyRows) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : {float32, int64, float16, uint8, float64}) {
    // Several long rows (segmented radix sort), along either axis.
    auto a = make({4, 100000}, t, 1000);
    check_sorts(a, 1, name(t, {4, 100000}, 1));
    auto b = make({100000, 3}, t, 1000);
    check_sorts(b, 0, name(t, {100000, 3}, 0));
    // Many short rows.
    auto c = make({20000, 5}, t, 3);
    check_sorts(c, 1, name(t, {20000, 5}, 1));
  }
}

TEST(CudaSort, GpuNonContiguousInputs) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : {float32, int32, bfloat16, complex64}) {
    auto a = make({300, 70}, t);
    auto tr = transpose(a);  // (70, 300), rows strided
    check_sorts(tr, 1, "transposed " + name(t, {70, 300}, 1));
    check_sorts(tr, 0, "transposed " + name(t, {70, 300}, 0));
    auto sl = slice(a, {1, 2}, {300, 70}, {3, 2});  // gapped, both axes
    check_sorts(sl, 0, "strided slice axis 0 " + std::string(dtype_name(t)));
    check_sorts(sl, 1, "strided slice axis 1 " + std::string(dtype_name(t)));
    auto big = make({3, 6000}, t);
    check_sorts(transpose(big), 0,
                "transposed long " + std::string(dtype_name(t)));
    auto wide = make({3, 12000}, t);
    auto gapped = slice(wide, {0, 1}, {3, 12000}, {1, 2});  // long, stride 2
    check_sorts(gapped, 1, "gapped long " + std::string(dtype_name(t)));
  }
}

TEST(CudaSort, GpuEmptyAndSizeOneAxes) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : {float32, int8, complex64}) {
    for (const auto& s :
         std::vector<Shape>{{0}, {0, 5}, {5, 0}, {4, 1}, {1, 4}, {1}}) {
      auto a = make(s, t);
      for (int axis = 0; axis < static_cast<int>(s.size()); ++axis) {
        check_sorts(a, axis, name(t, s, axis));
        if (s[axis] > 0) {
          expect_equal(cumsum(a, axis, false, true, Device::gpu),
                       cumsum(a, axis, false, true, Device::cpu),
                       "cumsum " + name(t, s, axis));
        }
      }
    }
  }
}

TEST(CudaSort, GpuArgsortIsStableWithNanInfAndSignedZeros) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : {float16, bfloat16, float32, float64}) {
    for (int64_t n : {17, 600, 4000, 9000}) {
      std::vector<double> v(n);
      const double pool[] = {0.0, -0.0, kNaN, 1.0, -kInf, kInf, -1.0, 1.0};
      for (int64_t i = 0; i < n; ++i) {
        v[i] = pool[(i * 5 + i / 3) % 8];
      }
      auto a = array(v.begin(), {static_cast<int>(n)}, t);
      auto g = to_vector<int64_t>(argsort(a, 0, Device::gpu));
      // Ties in index order, -0.0 tied with 0.0, NaNs last in index order.
      std::vector<int64_t> want(n);
      std::iota(want.begin(), want.end(), 0);
      std::stable_sort(want.begin(), want.end(), [&](int64_t x, int64_t y) {
        double p = v[x], q = v[y];
        return p < q || (std::isnan(q) && !std::isnan(p));
      });
      EXPECT_EQ(g, want) << dtype_name(t) << " n " << n;
      check_sorts(a, 0, "specials " + name(t, {static_cast<int>(n)}, 0));
    }
  }
}

TEST(CudaSort, GpuPartitionsAreValid) {
  SKIP_WITHOUT_GPU();
  // Complex without NaNs: the CPU's sort of tied NaNs is in any order.
  for (Dtype t : {float32, int16, float16, complex64}) {
    for (const auto& s : std::vector<Shape>{{6, 33}, {3, 5000}, {40, 9}}) {
      auto a =
          t == complex64
              ? add(astype(make(s, float32, 5, false, 3), complex64),
                    multiply(astype(make(s, float32, 3, false, 4), complex64),
                             array(complex64_t(0, 1))))
              : make(s, t);
      for (int axis : {0, 1}) {
        int n = s[axis];
        for (int kth : {0, n / 2, n - 1, -1}) {
          std::string what = name(t, s, axis) + " kth " + std::to_string(kth);
          auto p = partition(a, kth, axis, Device::gpu);
          auto ip = argpartition(a, kth, axis, Device::gpu);
          EXPECT_EQ(ip.dtype(), uint32);
          // The values are those at the indices, the indices a
          // permutation, and the kth element the sorted one.
          expect_equal(take_along_axis(a, ip, axis, Device::cpu), p,
                       "values at indices " + what);
          expect_equal(
              sort(ip, axis, Device::cpu),
              broadcast_to(expand_dims(arange(0, n, 1, uint32, Device::cpu),
                                       axis == 0 ? 1 : 0),
                           s),
              "permutation " + what);
          int k = kth < 0 ? kth + n : kth;
          Shape lo(s.size(), 0), hi = s;
          lo[axis] = k;
          hi[axis] = k + 1;
          expect_equal(slice(p, lo, hi, Device::cpu),
                       slice(sort(a, axis, Device::cpu), lo, hi, Device::cpu),
                       "kth " + what);
          expect_equal(sort(p, axis, Device::cpu), sort(a, axis, Device::cpu),
                       "sorted " + what);
        }
      }
    }
  }
}

namespace {

using ScanFn = array (*)(const array&, int, bool, bool, StreamOrDevice);

struct ScanOp {
  const char* name;
  ScanFn fn;
};

const ScanOp kScans[] = {
    {"cumsum", [](const array& a, int ax, bool r, bool i,
                  StreamOrDevice s) { return cumsum(a, ax, r, i, s); }},
    {"cumprod", [](const array& a, int ax, bool r, bool i,
                   StreamOrDevice s) { return cumprod(a, ax, r, i, s); }},
    {"cummax", [](const array& a, int ax, bool r, bool i,
                  StreamOrDevice s) { return cummax(a, ax, r, i, s); }},
    {"cummin", [](const array& a, int ax, bool r, bool i,
                  StreamOrDevice s) { return cummin(a, ax, r, i, s); }},
    {"logcumsumexp",
     [](const array& a, int ax, bool r, bool i, StreamOrDevice s) {
       return logcumsumexp(a, ax, r, i, s);
     }},
};

// Inputs a scan reproduces exactly in any order: small integers (sums),
// +-1 with a few +-2 and +-0.5 (products: exact powers of two that stay in
// range), anything for max and min.
array scan_input(const Shape& shape, Dtype t, const std::string& op,
                 uint32_t seed) {
  int64_t n = shape_size(shape);
  std::mt19937 rng(seed);
  std::vector<double> v(n);
  if (op == "cumprod") {
    // Rare +-2 and +-0.5: the running exponent stays far inside float's
    // range, so no order of the products overflows.
    std::uniform_int_distribution<int> d(0, 999);
    for (auto& x : v) {
      int k = d(rng);
      double m = k == 0 ? 2.0 : (k == 1 && is_float(t) ? 0.5 : 1.0);
      x = (k % 2 && !is_unsigned(t) && t != bool_) ? -m : m;
    }
  } else {
    v = tie_values(n, t, 50, op != "cumsum", seed);
  }
  if (t == complex64) {
    return astype(array(v.begin(), shape, float32), complex64);
  }
  return array(v.begin(), shape, t);
}

void check_scans(const Shape& shape, int axis, Dtype t,
                 const std::string& layout = "") {
  for (const auto& op : kScans) {
    std::string opname = op.name;
    if (opname == "logcumsumexp" && !is_float(t) && t != complex64) {
      continue;
    }
    auto a = scan_input(shape, t, opname, 7);
    if (layout == "transposed") {
      a = transpose(scan_input({shape[1], shape[0]}, t, opname, 7));
    }
    double rtol = 0;
    if (opname == "logcumsumexp") {
      rtol = t == float64 ? 1e-10 : t == float16 || t == bfloat16 ? 2e-2 : 1e-4;
    }
    for (bool reverse : {false, true}) {
      for (bool inclusive : {true, false}) {
        std::string what = opname + " " + name(t, shape, axis) + " " + layout +
                           (reverse ? " reverse" : "") +
                           (inclusive ? " inclusive" : " exclusive");
        expect_equal(op.fn(a, axis, reverse, inclusive, Device::gpu),
                     op.fn(a, axis, reverse, inclusive, Device::cpu), what,
                     rtol);
      }
    }
  }
}

}  // namespace

TEST(CudaSort, GpuScansEveryVariantLongRowsAndAxis0) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : {float32, int32, float64, int64}) {
    check_scans({3, 70000}, 1, t);   // long rows: block per row
    check_scans({70000, 3}, 0, t);   // few columns: transposed to rows
    check_scans({50, 20000}, 0, t);  // many columns: thread per column
    check_scans({300000}, 0, t);     // one row: the packed look-back scan
    check_scans({2, 300000}, 1, t);  // a few rows: one packed launch
    check_scans({300001}, 0, t);     // not a multiple of 4: unpacked or CUB
    check_scans({2, 300002}, 1, t);  // the second row off a 4-element bound
    check_scans({1000, 37}, 1, t);   // short rows: 32-thread blocks
    check_scans({4, 5, 6}, 1, t);    // a middle axis
  }
}

TEST(CudaSort, GpuScansEveryDtype) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : kAllDtypes) {
    check_scans({4, 1000}, 1, t);
    check_scans({1000, 4}, 0, t);
    check_scans({3, 300000}, 1, t);
    check_scans({130, 3}, 1, t, "transposed");
  }
}

TEST(CudaSort, GpuScansOfAnUnalignedView) {
  SKIP_WITHOUT_GPU();
  // A contiguous slice one element in: rows of a multiple of 4 that do
  // not start on a 16-byte boundary take the unpacked scans.
  for (Dtype t : {float32, int32, float16}) {
    auto whole = scan_input({300005}, t, "cumsum", 3);
    auto a = slice(whole, {1}, {300005});
    for (bool reverse : {false, true}) {
      for (bool inclusive : {true, false}) {
        expect_equal(cumsum(a, 0, reverse, inclusive, Device::gpu),
                     cumsum(a, 0, reverse, inclusive, Device::cpu),
                     std::string("cumsum of a view ") + dtype_name(t));
        expect_equal(cummax(a, 0, reverse, inclusive, Device::gpu),
                     cummax(a, 0, reverse, inclusive, Device::cpu),
                     std::string("cummax of a view ") + dtype_name(t));
      }
    }
  }
}

TEST(CudaSort, GpuCumsumOf16MElements) {
  SKIP_WITHOUT_GPU();
  // Ones: every prefix sum up to 2^24 is exact in float32.
  const int n = 1 << 24;
  for (Dtype t : {float32, int32}) {
    auto a = ones({n}, t);
    for (bool reverse : {false, true}) {
      for (bool inclusive : {true, false}) {
        auto g = cumsum(a, 0, reverse, inclusive, Device::gpu);
        expect_equal(g, cumsum(a, 0, reverse, inclusive, Device::cpu),
                     std::string("cumsum 2^24 ") + dtype_name(t));
      }
    }
  }
}

TEST(CudaSort, GpuSearchSortedLeftAndRight) {
  SKIP_WITHOUT_GPU();
  for (Dtype t :
       {float32, float64, float16, bfloat16, int32, uint8, int64, bool_}) {
    auto sorted_a = sort(make({2000}, t, 30), 0, Device::cpu);
    auto v = make({7, 300}, t, 35, true, 9);
    for (const char* side : {"left", "right"}) {
      expect_equal(searchsorted(sorted_a, v, side, std::nullopt, Device::gpu),
                   searchsorted(sorted_a, v, side, std::nullopt, Device::cpu),
                   std::string("searchsorted ") + side + " " + dtype_name(t));
      // Strided values and a sorter.
      auto vt = transpose(v);
      auto perm = argsort(make({2000}, t, 30), 0, Device::cpu);
      auto unsorted = make({2000}, t, 30);
      expect_equal(
          searchsorted(unsorted, vt, side, perm, Device::gpu),
          searchsorted(unsorted, vt, side, perm, Device::cpu),
          std::string("searchsorted sorter ") + side + " " + dtype_name(t));
    }
    // Empty values and a one-element array.
    auto e = make({0}, t);
    auto none = searchsorted(sorted_a, e, "left", std::nullopt, Device::gpu);
    none.eval();
    EXPECT_EQ(none.size(), 0u);
    auto one = make({1}, t);
    expect_equal(searchsorted(one, v, "right", std::nullopt, Device::gpu),
                 searchsorted(one, v, "right", std::nullopt, Device::cpu),
                 std::string("searchsorted one ") + dtype_name(t));
  }
}
