// The ops added by the MLX audit against naive loops and hand-built
// references: searchsorted, hadamard_transform, as_strided, view,
// contiguous, gather_mm, segmented_mm, block_masked_mm.
#include <cstring>
#include <random>

#include "fluxion/ops/extras.h"
#include "fluxion/transforms.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

int naive_search(const std::vector<double>& row, double x, bool right) {
  auto lt = [](double p, double q) {
    return p < q || (std::isnan(q) && !std::isnan(p));
  };
  int i = 0;
  while (i < static_cast<int>(row.size()) &&
         (right ? !lt(x, row[i]) : lt(row[i], x))) {
    ++i;
  }
  return i;
}

std::vector<double> randn(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d;
  std::vector<double> v(n);
  for (auto& x : v) {
    x = d(gen);
  }
  return v;
}

// Sylvester's construction of the n x n Hadamard matrix.
std::vector<double> hadamard_matrix(int n) {
  std::vector<double> h{1};
  for (int k = 1; k < n; k *= 2) {
    std::vector<double> g(4 * k * k);
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < k; ++j) {
        double v = h[i * k + j];
        g[i * 2 * k + j] = v;
        g[i * 2 * k + j + k] = v;
        g[(i + k) * 2 * k + j] = v;
        g[(i + k) * 2 * k + j + k] = -v;
      }
    }
    h = g;
  }
  return h;
}

}  // namespace

TEST(SearchSorted, OneDimensionalAgainstLoop) {
  std::vector<double> row = {-1, 0, 0, 0, 2.5, 3, kNaN};
  std::vector<double> vals = {-2, -1, 0, 1, 3, 7, kNaN, 2.5};
  for (Dtype t : {float32, float64, float16, bfloat16}) {
    auto a = astype(array(row.begin(), {7}, float64), t);
    auto v = astype(array(vals.begin(), {2, 4}, float64), t);
    for (bool right : {false, true}) {
      auto got = searchsorted(a, v, right ? "right" : "left");
      EXPECT_EQ(got.shape(), Shape({2, 4}));
      EXPECT_EQ(got.dtype(), uint32);
      std::vector<double> want;
      for (double x : vals) {
        want.push_back(naive_search(row, x, right));
      }
      expect_close(got, want, 0, 0, dtype_name(t));
    }
  }
  // Integer dtypes, a scalar value, mixed types promote.
  auto ai = array({1, 3, 3, 8}, int64);
  expect_close(searchsorted(ai, array(3, int32)), {1});
  expect_close(searchsorted(ai, array(3.5f), "right"), {3});
  EXPECT_EQ(searchsorted(ai, array(3)).shape(), Shape({}));
  expect_close(searchsorted(array({false, true}), array({true}), "left"), {1});
}

TEST(SearchSorted, StridedViewsAndSorter) {
  auto av = randn(18, 1);
  auto full = sort(array(av.begin(), {18}, float64));
  // Every other element of a sorted array is sorted: a strided 1-D view.
  auto a = slice(full, {1}, {18}, {2});
  auto sorted = to_vector<double>(a);
  auto vv = randn(3 * 5, 2);
  // Transposed values (strides (1, 3)).
  auto v = transpose(array(vv.begin(), {5, 3}, float64));
  auto vt = to_vector<double>(v);
  for (bool right : {false, true}) {
    auto got = searchsorted(a, v, right ? "right" : "left");
    EXPECT_EQ(got.shape(), Shape({3, 5}));
    std::vector<double> want;
    for (double x : vt) {
      want.push_back(naive_search(sorted, x, right));
    }
    expect_close(got, want, 0, 0);
  }
  // sorter: positions in the sorted order of an unsorted a.
  auto u = array({3.0, 1.0, 2.0, 5.0});
  auto pos = searchsorted(u, array({2.5, 0.0, 9.0}), "left", argsort(u));
  expect_close(pos, {2, 0, 4});
}

TEST(SearchSorted, VmapOverValuesOnly) {
  auto a = array({1.0, 2.0, 4.0});
  auto v = array({0.5, 2.0, 5.0, 3.0, 1.0, 4.5}, {2, 3});
  auto f = [&](const std::vector<array>& x) {
    return std::vector<array>{searchsorted(a, x[0], "right")};
  };
  auto out = vmap(f, {1})({v})[0];
  EXPECT_EQ(out.shape(), Shape({3, 2}));
  expect_close(out, {0, 2, 2, 1, 3, 3});
  auto g = [](const std::vector<array>& x) {
    return std::vector<array>{searchsorted(x[0], array({1.5}))};
  };
  expect_error<std::invalid_argument>(
      [&] { vmap(g)({zeros({3, 4})}); },
      "[searchsorted] Cannot vmap over the sorted array");
}

TEST(SearchSorted, Errors) {
  auto a = array({1.0, 2.0});
  expect_error<std::invalid_argument>(
      [&] { searchsorted(a, a, "middle"); },
      "[searchsorted] side must be 'left' or 'right'; got 'middle'.");
  expect_error<std::invalid_argument>(
      [&] { searchsorted(array(1.0), a); },
      "[searchsorted] The sorted array must be 1-D; got shape ().");
  expect_error<std::invalid_argument>(
      [&] { searchsorted(zeros({2, 3}), zeros({2, 1})); },
      "[searchsorted] The sorted array must be 1-D; got shape (2,3).");
  expect_error<std::invalid_argument>(
      [&] { searchsorted(astype(a, complex64), a); },
      "[searchsorted] complex64 is not supported.");
  expect_error<std::invalid_argument>(
      [&] {
        searchsorted(a, a, "left", array({0.0, 1.0}));
      },
      "[searchsorted] sorter must be an integer array of a's shape (2)");
}

TEST(Hadamard, AgainstSylvesterMatrix) {
  for (int n : {1, 2, 8, 64, 1024}) {
    auto xv = randn(3 * n, n);
    auto x = array(xv.begin(), {3, n}, float64);
    auto h = hadamard_matrix(n);
    auto got = hadamard_transform(x);
    std::vector<double> want(3 * n, 0);
    for (int r = 0; r < 3; ++r) {
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          want[r * n + i] += h[i * n + j] * xv[r * n + j];
        }
        want[r * n + i] /= std::sqrt(static_cast<double>(n));
      }
    }
    expect_close(got, want, 1e-12, 1e-12);
    // Orthonormal and symmetric: applying it twice is the identity.
    expect_close(hadamard_transform(got), xv, 1e-12, 1e-12);
    // float32, float16, bfloat16 and an integer input (-> float32), on a
    // transposed operand, with an explicit scale.
    auto xt = transpose(array(xv.begin(), {n, 3}, float64));
    auto want_t = to_vector<double>(
        multiply(hadamard_transform(astype(xt, float64), 2.0f), array(1.0)));
    expect_close(hadamard_transform(astype(xt, float32), 2.0f), want_t, 1e-5,
                 1e-4);
    expect_close(hadamard_transform(astype(xt, float16), 2.0f), want_t, 2e-2,
                 0.1 * std::sqrt(n));
    expect_close(hadamard_transform(astype(xt, bfloat16), 2.0f), want_t, 5e-2,
                 0.2 * std::sqrt(n));
  }
  auto xi = hadamard_transform(array({1, 2, 3, 4}), 1.0f);
  EXPECT_EQ(xi.dtype(), float32);
  expect_close(xi, {10, -2, -4, 0});
  expect_error<std::invalid_argument>(
      [] { hadamard_transform(zeros({2, 36})); },
      "[hadamard_transform] The last axis has size 36; it must be m * 2^k "
      "with m in (1, 12, 20, 28) and k <= 26.");
  // Sizes m * 2^k: kron(H_m, H_2^k). H_12 is symmetric with rows of +-1
  // whose Gram matrix is 12 I.
  auto h12 = to_vector<double>(hadamard_transform(eye(12), 1.0f));
  for (int i = 0; i < 12; ++i) {
    for (int j = 0; j < 12; ++j) {
      double dot = 0;
      for (int l = 0; l < 12; ++l) {
        dot += h12[i * 12 + l] * h12[j * 12 + l];
      }
      EXPECT_EQ(dot, i == j ? 12 : 0);
      EXPECT_EQ(h12[i * 12 + j], h12[j * 12 + i]);
    }
  }
  // A scalar is a transform of length 1 (MLX).
  expect_close(hadamard_transform(array(5.0f), 0.2f), {1});
  expect_error<std::invalid_argument>(
      [] { hadamard_transform(zeros({4}, complex64)); },
      "[hadamard_transform] complex64 is not supported.");
}

TEST(AsStrided, WindowsViewsAndGradient) {
  auto x = iota({10}, float32);
  auto w = as_strided(x, Shape{4, 3}, Strides{2, 1}, 1);
  expect_close(w, {1, 2, 3, 3, 4, 5, 5, 6, 7, 7, 8, 9});
  w.eval();
  EXPECT_EQ(w.data_shared_ptr(), x.data_shared_ptr());  // a view
  // Default shape/strides: the row-major identity; a transposed input is
  // read in its logical row-major order.
  auto t = transpose(iota({2, 3}, float32));
  expect_close(as_strided(t), to_vector<double>(t));
  expect_close(as_strided(t, Shape{6}), {0, 3, 1, 4, 2, 5});
  // Negative strides and a broadcast view (stride 0).
  expect_close(as_strided(x, Shape{3}, Strides{-3}, 9), {9, 6, 3});
  expect_close(as_strided(x, Shape{2, 2}, Strides{0, 1}, 4), {4, 5, 4, 5});
  // The gradient counts how often each element is read.
  auto g = grad([](const array& v) {
    return sum(as_strided(v, Shape{4, 3}, Strides{2, 1}, 1));
  })(ones({10}, float64));
  expect_close(g, {0, 1, 1, 2, 1, 2, 1, 2, 1, 1});
  expect_error<std::invalid_argument>(
      [&] {
        as_strided(x, Shape{4, 3}, Strides{3, 1}, 1);
      },
      "[as_strided] The view of shape (4,3) with strides (3,1) and offset 1 "
      "reaches element 12, outside the array's 10 elements.");
  expect_error<std::invalid_argument>(
      [&] { as_strided(x, Shape{3}, Strides{-4}, 4); }, "reaches element -4");
  expect_error<std::invalid_argument>(
      [&] {
        as_strided(x, Shape{2, 2}, Strides{1});
      },
      "[as_strided] Got strides (1) for the shape (2,2)");
}

TEST(View, ReinterpretsBytes) {
  auto f = view(array({1.0f, -2.0f}), uint32);
  auto bits = to_vector<double>(f);
  float vals[2] = {1.0f, -2.0f};
  uint32_t want[2];
  std::memcpy(want, vals, sizeof want);
  EXPECT_EQ(bits[0], want[0]);
  EXPECT_EQ(bits[1], want[1]);
  // Wider to narrower scales the last axis (little-endian bytes).
  auto b = view(array({0x01020304, 0x7f}, {1, 2}, int32), uint8);
  EXPECT_EQ(b.shape(), Shape({1, 8}));
  expect_close(b, {4, 3, 2, 1, 0x7f, 0, 0, 0});
  // Narrower to wider, from a strided (transposed) input.
  auto s = transpose(array({1, 0, 2, 0}, {2, 2}, int16));  // [[1,2],[0,0]]
  auto v = view(s, int32);
  EXPECT_EQ(v.shape(), Shape({2, 1}));
  expect_close(v, {1 + (2 << 16), 0});
  expect_close(view(array({1.5}), float64), {1.5});
  expect_error<std::invalid_argument>(
      [] {
        view(array({1, 2, 3}, int8), int16);
      },
      "[view] The last axis (size 3) of dtype int8 does not divide into "
      "int16 items.");
  expect_error<std::invalid_argument>(
      [] { view(array(1.0f), float64); },
      "[view] A scalar of dtype float32 cannot be viewed as float64");
}

TEST(Contiguous, CopiesOnlyWhenNeeded) {
  auto x = iota({3, 4});
  auto c = contiguous(x);
  c.eval();
  EXPECT_EQ(c.data_shared_ptr(), x.data_shared_ptr());
  auto t = transpose(x);
  auto ct = contiguous(t);
  ct.eval();
  EXPECT_TRUE(ct.flags().row_contiguous);
  expect_close(ct, to_vector<double>(t));
  auto cc = contiguous(t, true);  // column-major allowed: a view
  cc.eval();
  EXPECT_EQ(cc.data_shared_ptr(), x.data_shared_ptr());
}

TEST(GatherMM, AgainstLoop) {
  auto av = randn(3 * 2 * 4, 5);
  auto bv = randn(2 * 4 * 5, 6);
  auto a = array(av.begin(), {3, 2, 4}, float64);
  auto b = array(bv.begin(), {2, 4, 5}, float64);
  auto li = array({2, 0, 2, 1}, {2, 2});
  auto ri = array({1, 0}, {1, 2});
  auto out = gather_mm(a, b, li, ri);
  EXPECT_EQ(out.shape(), Shape({2, 2, 2, 5}));
  std::vector<int> l = {2, 0, 2, 1}, r = {1, 0, 1, 0};
  std::vector<double> want;
  for (int p = 0; p < 4; ++p) {
    for (int m = 0; m < 2; ++m) {
      for (int n = 0; n < 5; ++n) {
        double acc = 0;
        for (int k = 0; k < 4; ++k) {
          acc += av[(l[p] * 2 + m) * 4 + k] * bv[(r[p] * 4 + k) * 5 + n];
        }
        want.push_back(acc);
      }
    }
  }
  expect_close(out, want, 1e-12, 1e-12);
  // No indices: the batches in order (a plain batched matmul).
  auto a2 = array(av.begin(), {2, 3, 4}, float64);
  expect_close(gather_mm(a2, b), to_vector<double>(matmul(a2, b)), 1e-12,
               1e-12);
  // A vector lhs.
  auto vec =
      gather_mm(array({1.0, 2.0, 3.0, 4.0}), b, std::nullopt, array({1}));
  EXPECT_EQ(vec.shape(), Shape({1, 5}));
  expect_error<std::invalid_argument>([&] { gather_mm(a, a); },
                                      "[gather_mm] Inner dimensions differ");
  expect_error<std::invalid_argument>(
      [&] { gather_mm(a, b, array({0.5})); },
      "[gather_mm] lhs_indices must have an integer type; got float64.");
}

TEST(SegmentedMM, AgainstLoop) {
  auto av = randn(3 * 7, 7);
  auto bv = randn(7 * 2, 8);
  auto a = array(av.begin(), {3, 7}, float64);
  auto b = array(bv.begin(), {7, 2}, float64);
  std::vector<int> seg = {0, 3, 3, 7, 2, 2, 1, 6};
  auto out = segmented_mm(a, b, array(seg.begin(), {2, 2, 2}, int32));
  EXPECT_EQ(out.shape(), Shape({2, 2, 3, 2}));
  std::vector<double> want;
  for (int s = 0; s < 4; ++s) {
    for (int m = 0; m < 3; ++m) {
      for (int n = 0; n < 2; ++n) {
        double acc = 0;
        for (int k = seg[2 * s]; k < seg[2 * s + 1]; ++k) {
          acc += av[m * 7 + k] * bv[k * 2 + n];
        }
        want.push_back(acc);
      }
    }
  }
  expect_close(out, want, 1e-12, 1e-12);
  expect_error<std::invalid_argument>(
      [&] {
        segmented_mm(a, b, array({0, 1, 2}));
      },
      "[segmented_mm] segments must be integer pairs of shape (..., 2)");
  expect_error<std::invalid_argument>(
      [&] {
        segmented_mm(a, a, array({0, 1}));
      },
      "[segmented_mm] Expected matrices (M, K) and (K, N)");
}

TEST(BlockMaskedMM, AgainstDenseMasks) {
  int M = 70, K = 40, N = 33, bs = 32;
  auto av = randn(M * K, 9);
  auto bv = randn(K * N, 10);
  auto a = array(av.begin(), {M, K}, float64);
  auto b = array(bv.begin(), {K, N}, float64);
  std::vector<int> mo = {1, 0, 1, 1, 0, 1};        // (3, 2) bool
  std::vector<double> ml = {0.5, 1, 2, 0, 1, -1};  // (3, 2) float
  auto out =
      block_masked_mm(a, b, bs, astype(array(mo.begin(), {3, 2}, int32), bool_),
                      array(ml.begin(), {3, 2}, float64), std::nullopt);
  std::vector<double> want;
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int k = 0; k < K; ++k) {
        acc += av[m * K + k] * ml[(m / bs) * 2 + k / bs] * bv[k * N + n];
      }
      want.push_back(mo[(m / bs) * 2 + n / bs] ? acc : 0.0);
    }
  }
  expect_close(out, want, 1e-12, 1e-12);
  expect_error<std::invalid_argument>(
      [&] { block_masked_mm(a, b, 16); },
      "[block_masked_mm] Only block sizes 32 and 64 are supported; got 16.");
  expect_error<std::invalid_argument>(
      [&] {
        block_masked_mm(a, b, 32, zeros({2, 2}, bool_));
      },
      "[block_masked_mm] mask_out of shape (2,2) must end in (3,2).");
}
