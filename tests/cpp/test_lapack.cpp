// fluxion::linalg (LAPACK): hand-computed cases, reconstruction identities
// checked with double-precision loops here, batched / transposed / half
// inputs, and every error path (the singular and non-positive-definite
// ones raised by the kernels at eval time).
#include <cmath>
#include <random>

#include "transform_checks.h"

using namespace fluxion;
using namespace fluxion::test;
namespace la = fluxion::linalg;

namespace {

using Mat = std::vector<double>;  // row-major

// Uniform values in [-1, 1).
array rand_array(const Shape& shape, unsigned seed, Dtype t = float64) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) {
    x = d(gen);
  }
  return astype(array(v.begin(), shape, float64), t);
}

// Batches of well-conditioned matrices: random plus n on the diagonal.
array well_conditioned(const Shape& shape, unsigned seed, Dtype t = float64) {
  int n = shape.back();
  return astype(rand_array(shape, seed) + eye(n, float64) * double(n), t);
}

// Symmetric positive definite: M M^T + I.
array spd(const Shape& shape, unsigned seed, Dtype t = float64) {
  auto m = rand_array(shape, seed);
  return astype(matmul(m, swapaxes(m, -1, -2)) + eye(shape.back(), float64), t);
}

Mat mat(const array& a) { return to_vector<double>(a); }

// Matrix i of a batch of (r, c) matrices.
Mat at(const Mat& m, int i, int r, int c) {
  return Mat(m.begin() + int64_t{i} * r * c,
             m.begin() + int64_t{i + 1} * r * c);
}

Mat mul(const Mat& a, const Mat& b, int m, int k, int n) {
  Mat out(int64_t{m} * n, 0.0);
  for (int i = 0; i < m; ++i) {
    for (int p = 0; p < k; ++p) {
      for (int j = 0; j < n; ++j) {
        out[i * n + j] += a[i * k + p] * b[p * n + j];
      }
    }
  }
  return out;
}

Mat tr(const Mat& a, int r, int c) {
  Mat out(a.size());
  for (int i = 0; i < r; ++i) {
    for (int j = 0; j < c; ++j) {
      out[j * r + i] = a[i * c + j];
    }
  }
  return out;
}

Mat identity_mat(int n) {
  Mat out(int64_t{n} * n, 0.0);
  for (int i = 0; i < n; ++i) {
    out[i * n + i] = 1.0;
  }
  return out;
}

void expect_mat_near(const Mat& got, const Mat& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol) << what << " at " << i;
  }
}

}  // namespace

// --- inv ---

TEST(LapackInv, HandComputed) {
  for (auto t : {float32, float64}) {
    auto a = array({4.0, 7.0, 2.0, 6.0}, {2, 2}, t);
    auto x = la::inv(a);
    EXPECT_EQ(x.dtype(), t);
    expect_close(x, {0.6, -0.7, -0.2, 0.4}, 1e-5, 1e-6);
  }
}

TEST(LapackInv, BatchedAndTransposed) {
  auto a = well_conditioned({2, 3, 4, 4}, 1);
  for (auto& in : {a, swapaxes(a, -1, -2), transpose(a, {1, 0, 2, 3})}) {
    auto x = la::inv(in);
    ASSERT_EQ(x.shape(), in.shape());
    auto ma = mat(in), mx = mat(x);
    for (int i = 0; i < 6; ++i) {
      expect_mat_near(mul(at(ma, i, 4, 4), at(mx, i, 4, 4), 4, 4, 4),
                      identity_mat(4), 1e-12, "A inv(A)");
    }
  }
}

TEST(LapackInv, HalfTypesComputeInFloat32) {
  for (auto t : {float16, bfloat16}) {
    auto x = la::inv(array({2.0, 0.0, 0.0, 4.0}, {2, 2}, t));
    EXPECT_EQ(x.dtype(), t);
    expect_close(x, {0.5, 0.0, 0.0, 0.25}, 0, 0);
  }
}

TEST(LapackInv, Errors) {
  expect_error<std::invalid_argument>([] { la::inv(zeros({3}, float32)); },
                                      "[linalg::inv] Arrays must have at "
                                      "least two dimensions; got shape (3)");
  expect_error<std::invalid_argument>(
      [] {
        la::inv(zeros({2, 3}, float32));
      },
      "[linalg::inv] Arrays must be batches of square matrices; got shape "
      "(2,3)");
  expect_error<std::invalid_argument>(
      [] {
        la::inv(zeros({2, 2}, int32));
      },
      "[linalg::inv] Arrays must have a real floating point type");
  expect_error<std::invalid_argument>(
      [] {
        la::inv(zeros({2, 2}, complex64));
      },
      "got complex64");
  // Singular: only LAPACK knows, at eval; the error reaches eval's caller.
  for (auto t : {float32, float64}) {
    auto x = la::inv(array({1.0, 2.0, 2.0, 4.0}, {2, 2}, t));
    expect_error<std::runtime_error>([&] { eval(x); },
                                     "[linalg::inv] Matrix is singular.");
  }
  // One singular matrix in a batch fails the whole batch.
  auto b = stack({eye(2, float32), zeros({2, 2}, float32)});
  expect_error<std::runtime_error>([&] { eval(la::inv(b)); },
                                   "[linalg::inv] Matrix is singular.");
}

// --- solve ---

TEST(LapackSolve, HandComputed) {
  for (auto t : {float32, float64}) {
    auto a = array({3.0, 1.0, 1.0, 2.0}, {2, 2}, t);
    auto x = la::solve(a, array({9.0, 8.0}, {2}, t));
    EXPECT_EQ(x.shape(), Shape({2}));
    expect_close(x, {2.0, 3.0}, 1e-5, 1e-6);
    auto xm = la::solve(a, array({9.0, 1.0, 8.0, 2.0}, {2, 2}, t));
    expect_close(xm, {2.0, 0.0, 3.0, 1.0}, 1e-5, 1e-6);
  }
}

TEST(LapackSolve, BatchedBroadcastTransposed) {
  auto a = well_conditioned({2, 3, 3}, 2);
  auto b = rand_array({3, 4}, 3);  // broadcast against a's batch
  for (auto& aa : {a, swapaxes(a, -1, -2)}) {
    auto x = la::solve(aa, b);
    ASSERT_EQ(x.shape(), Shape({2, 3, 4}));
    auto ma = mat(aa), mx = mat(x), mb = mat(b);
    for (int i = 0; i < 2; ++i) {
      expect_mat_near(mul(at(ma, i, 3, 3), at(mx, i, 3, 4), 3, 3, 4), mb, 1e-12,
                      "A x = b");
    }
  }
  // Mixed dtypes promote; a float32 system stays float32.
  EXPECT_EQ(la::solve(astype(a, float32), astype(b, float64)).dtype(), float64);
  EXPECT_EQ(la::solve(astype(a, float32), astype(b, float32)).dtype(), float32);
}

TEST(LapackSolve, Errors) {
  auto a = eye(3, float32);
  expect_error<std::invalid_argument>(
      [&] { la::solve(a, zeros({2}, float32)); },
      "[linalg::solve] Incompatible shapes (3,3) and (2)");
  expect_error<std::invalid_argument>(
      [&] {
        la::solve(zeros({2, 3}, float32), zeros({2}, float32));
      },
      "[linalg::solve] Arrays must be batches of square matrices");
  expect_error<std::invalid_argument>(
      [&] {
        la::solve(zeros({2, 3, 3}, float32), zeros({4, 3, 1}, float32));
      },
      "[linalg::solve] Batch dimensions of shapes (2,3,3) and (4,3,1) cannot "
      "be broadcast.");
  expect_error<std::invalid_argument>(
      [&] { la::solve(a, array(1.0f)); },
      "[linalg::solve] The right-hand side must have at least one dimension");
  auto x = la::solve(zeros({2, 2}, float64), ones({2}, float64));
  expect_error<std::runtime_error>([&] { eval(x); },
                                   "[linalg::solve] Matrix is singular.");
}

// --- solve_triangular ---

TEST(LapackSolveTriangular, HandComputedReadsOneTriangle) {
  for (auto t : {float32, float64}) {
    // The 100s are in the triangle that must not be read.
    auto lower = array({2.0, 100.0, 3.0, 1.0}, {2, 2}, t);
    expect_close(la::solve_triangular(lower, array({4.0, 7.0}, {2}, t)),
                 {2.0, 1.0}, 1e-5, 1e-6);
    auto upper = array({2.0, 3.0, 100.0, 1.0}, {2, 2}, t);
    expect_close(la::solve_triangular(upper, array({7.0, 1.0}, {2}, t), true),
                 {2.0, 1.0}, 1e-5, 1e-6);
  }
}

TEST(LapackSolveTriangular, BatchedTransposed) {
  auto a = tril(well_conditioned({3, 4, 4}, 4));
  auto b = rand_array({3, 4, 2}, 5);
  // The transposed lower matrices are upper triangular views.
  for (bool upper : {false, true}) {
    auto aa = upper ? swapaxes(a, -1, -2) : a;
    auto x = la::solve_triangular(aa, b, upper);
    auto ma = mat(aa), mx = mat(x), mb = mat(b);
    for (int i = 0; i < 3; ++i) {
      expect_mat_near(mul(at(ma, i, 4, 4), at(mx, i, 4, 2), 4, 4, 2),
                      at(mb, i, 4, 2), 1e-12, "A x = b");
    }
  }
}

TEST(LapackSolveTriangular, Errors) {
  expect_error<std::invalid_argument>(
      [] { la::solve_triangular(eye(2, float32), zeros({3}, float32)); },
      "[linalg::solve_triangular] Incompatible shapes (2,2) and (3)");
  auto x = la::solve_triangular(array({1.0, 0.0, 1.0, 0.0}, {2, 2}),
                                ones({2}, float32));
  expect_error<std::runtime_error>(
      [&] { eval(x); }, "[linalg::solve_triangular] Matrix is singular.");
}

// --- cholesky ---

TEST(LapackCholesky, HandComputed) {
  for (auto t : {float32, float64}) {
    // The upper entry (99) is not read by the lower factorization.
    auto a = array({4.0, 99.0, 2.0, 3.0}, {2, 2}, t);
    expect_close(la::cholesky(a), {2.0, 0.0, 1.0, std::sqrt(2.0)}, 1e-6, 1e-6);
    auto au = array({4.0, 2.0, 99.0, 3.0}, {2, 2}, t);
    expect_close(la::cholesky(au, true), {2.0, 1.0, 0.0, std::sqrt(2.0)}, 1e-6,
                 1e-6);
  }
}

TEST(LapackCholesky, BatchedReconstruction) {
  auto a = spd({2, 2, 5, 5}, 6);
  for (bool upper : {false, true}) {
    for (auto& in : {a, swapaxes(a, -1, -2)}) {
      auto f = la::cholesky(in, upper);
      auto ma = mat(in), mf = mat(f);
      for (int i = 0; i < 4; ++i) {
        auto l = at(mf, i, 5, 5);
        auto rec =
            upper ? mul(tr(l, 5, 5), l, 5, 5, 5) : mul(l, tr(l, 5, 5), 5, 5, 5);
        expect_mat_near(rec, at(ma, i, 5, 5), 1e-12, "factor product");
        for (int r = 0; r < 5; ++r) {
          for (int c = 0; c < 5; ++c) {
            if (upper ? c < r : c > r) {
              EXPECT_EQ(l[r * 5 + c], 0.0);
            }
          }
        }
      }
    }
  }
}

TEST(LapackCholesky, NotPositiveDefinite) {
  expect_error<std::invalid_argument>(
      [] {
        la::cholesky(zeros({2, 3}, float32));
      },
      "[linalg::cholesky] Arrays must be batches of square matrices");
  for (auto t : {float32, float64}) {
    auto l = la::cholesky(array({1.0, 2.0, 2.0, 1.0}, {2, 2}, t));
    expect_error<std::runtime_error>(
        [&] { eval(l); },
        "[linalg::cholesky] Matrix is not positive definite.");
  }
}

TEST(LapackCholeskyInv, MatchesInverse) {
  auto a = spd({3, 4, 4}, 7);
  for (bool upper : {false, true}) {
    auto x = la::cholesky_inv(la::cholesky(a, upper), upper);
    auto ma = mat(a), mx = mat(x);
    for (int i = 0; i < 3; ++i) {
      expect_mat_near(mul(at(ma, i, 4, 4), at(mx, i, 4, 4), 4, 4, 4),
                      identity_mat(4), 1e-12, "A cholesky_inv");
    }
  }
  expect_error<std::invalid_argument>(
      [] { la::cholesky_inv(zeros({3}, float32)); },
      "[linalg::cholesky_inv] Arrays must have at least two dimensions");
}

// --- qr ---

void check_qr(const array& a, double tol) {
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  auto [q, r] = la::qr(a);
  Shape qs(a.shape().begin(), a.shape().end() - 2), rs = qs;
  qs.insert(qs.end(), {m, k});
  rs.insert(rs.end(), {k, n});
  ASSERT_EQ(q.shape(), qs);
  ASSERT_EQ(r.shape(), rs);
  auto ma = mat(a), mq = mat(q), mr = mat(r);
  int nb = static_cast<int>(a.size() / (int64_t{m} * n));
  for (int i = 0; i < nb; ++i) {
    auto qi = at(mq, i, m, k), ri = at(mr, i, k, n);
    expect_mat_near(mul(qi, ri, m, k, n), at(ma, i, m, n), tol, "Q R = A");
    expect_mat_near(mul(tr(qi, m, k), qi, k, m, k), identity_mat(k), tol,
                    "Q^T Q = I");
    for (int r0 = 0; r0 < k; ++r0) {
      for (int c = 0; c < r0; ++c) {
        EXPECT_EQ(ri[r0 * n + c], 0.0) << "R upper triangular";
      }
    }
  }
}

TEST(LapackQR, HandComputed) {
  auto [q, r] = la::qr(array({3.0, 4.0}, {2, 1}));
  auto sign = to_vector<double>(r)[0] > 0 ? 1.0 : -1.0;
  expect_close(r, {5.0 * sign}, 1e-6, 1e-6);
  expect_close(q, {0.6 * sign, 0.8 * sign}, 1e-6, 1e-6);
}

TEST(LapackQR, TallWideBatchedTransposed) {
  check_qr(rand_array({2, 5, 3}, 8), 1e-12);
  check_qr(rand_array({2, 3, 5}, 9), 1e-12);
  check_qr(swapaxes(rand_array({3, 4, 4}, 10), -1, -2), 1e-12);
  check_qr(rand_array({4, 3}, 11, float32), 1e-5);
  expect_error<std::invalid_argument>([] { la::qr(zeros({3}, float32)); },
                                      "[linalg::qr] Arrays must have at least "
                                      "two dimensions");
}

// --- eigh ---

TEST(LapackEigh, HandComputed) {
  for (auto t : {float32, float64}) {
    auto a = array({2.0, 1.0, 1.0, 2.0}, {2, 2}, t);
    auto [w, v] = la::eigh(a);
    expect_close(w, {1.0, 3.0}, 1e-6, 1e-6);
    auto mv = mat(v);
    double r = 1.0 / std::sqrt(2.0);
    // Each eigenvector up to sign.
    EXPECT_NEAR(std::abs(mv[0]), r, 1e-6);
    EXPECT_NEAR(mv[0] + mv[2], 0.0, 1e-6);
    EXPECT_NEAR(mv[1] - mv[3], 0.0, 1e-6);
    expect_close(la::eigvalsh(a), {1.0, 3.0}, 1e-6, 1e-6);
  }
}

TEST(LapackEigh, ReadsOneTriangleBatched) {
  auto a = spd({3, 4, 4}, 12) - 3.0;
  // Garbage in the other triangle must not matter.
  auto low = tril(a) + triu(ones({4, 4}, float64) * 50.0, 1);
  auto up = triu(a) + tril(ones({4, 4}, float64) * 50.0, -1);
  for (auto& [in, uplo] :
       std::vector<std::pair<array, std::string>>{{low, "L"}, {up, "U"}}) {
    auto [w, v] = la::eigh(in, uplo);
    auto ma = mat(a), mw = mat(w), mv = mat(v);
    for (int i = 0; i < 3; ++i) {
      auto vi = at(mv, i, 4, 4);
      Mat vw = vi;
      for (int r = 0; r < 4; ++r) {
        for (int c = 0; c < 4; ++c) {
          vw[r * 4 + c] *= mw[i * 4 + c];
        }
      }
      expect_mat_near(mul(at(ma, i, 4, 4), vi, 4, 4, 4), vw, 1e-12,
                      "A v = w v");
      expect_mat_near(mul(tr(vi, 4, 4), vi, 4, 4, 4), identity_mat(4), 1e-12,
                      "V^T V = I");
      for (int c = 0; c + 1 < 4; ++c) {
        EXPECT_LE(mw[i * 4 + c], mw[i * 4 + c + 1]) << "ascending";
      }
    }
    expect_close(la::eigvalsh(in, uplo), mw, 1e-12, 1e-12);
  }
}

TEST(LapackEigh, Errors) {
  expect_error<std::invalid_argument>(
      [] { la::eigh(eye(2, float32), "X"); },
      "[linalg::eigh] UPLO must be \"L\" or \"U\"; got \"X\".");
  expect_error<std::invalid_argument>(
      [] {
        la::eigvalsh(zeros({2, 3}, float32));
      },
      "[linalg::eigvalsh] Arrays must be batches of square matrices");
}

// --- svd ---

void check_svd(const array& a, double tol) {
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  auto f = la::svd(a);
  ASSERT_EQ(f.size(), 3u);
  auto mu = mat(f[0]), ms = mat(f[1]), mv = mat(f[2]), ma = mat(a);
  int nb = static_cast<int>(a.size() / (int64_t{m} * n));
  for (int i = 0; i < nb; ++i) {
    auto u = at(mu, i, m, m), vt = at(mv, i, n, n);
    Mat us(int64_t{m} * n, 0.0);  // U[:, :k] diag(S) padded to (m, n)
    for (int r = 0; r < m; ++r) {
      for (int c = 0; c < k; ++c) {
        us[r * n + c] = u[r * m + c] * ms[i * k + c];
      }
    }
    expect_mat_near(mul(us, vt, m, n, n), at(ma, i, m, n), tol, "U S Vt = A");
    expect_mat_near(mul(tr(u, m, m), u, m, m, m), identity_mat(m), tol,
                    "U orthogonal");
    expect_mat_near(mul(vt, tr(vt, n, n), n, n, n), identity_mat(n), tol,
                    "Vt orthogonal");
    for (int c = 0; c + 1 < k; ++c) {
      EXPECT_GE(ms[i * k + c], ms[i * k + c + 1]);
    }
  }
  expect_close(la::svd(a, false)[0], ms, 1e-10, tol);
}

TEST(LapackSVD, HandComputed) {
  auto s = la::svd(array({3.0, 0.0, 0.0, -4.0}, {2, 2}), false);
  ASSERT_EQ(s.size(), 1u);
  expect_close(s[0], {4.0, 3.0}, 1e-12, 1e-12);
  // [[1, -2], [3, 4]]: A^T A has eigenvalues 15 +- sqrt(125).
  auto s2 = la::svd(array({1.0f, -2.0f, 3.0f, 4.0f}, {2, 2}), false)[0];
  EXPECT_EQ(s2.dtype(), float32);
  expect_close(
      s2, {std::sqrt(15 + std::sqrt(125.0)), std::sqrt(15 - std::sqrt(125.0))},
      1e-5, 1e-6);
}

TEST(LapackSVD, ShapesBatchedTransposed) {
  check_svd(rand_array({2, 5, 3}, 13), 1e-12);
  check_svd(rand_array({2, 3, 5}, 14), 1e-12);
  check_svd(swapaxes(rand_array({2, 4, 4}, 15), -1, -2), 1e-12);
  check_svd(rand_array({3, 3}, 16, float32), 1e-5);
  auto f = la::svd(zeros({2, 4, 3}, float64));
  EXPECT_EQ(f[0].shape(), Shape({2, 4, 4}));
  EXPECT_EQ(f[1].shape(), Shape({2, 3}));
  EXPECT_EQ(f[2].shape(), Shape({2, 3, 3}));
  expect_error<std::invalid_argument>(
      [] { la::svd(zeros({2}, float32)); },
      "[linalg::svd] Arrays must have at least two dimensions");
}

TEST(LapackPinv, FullRankAndRankDeficient) {
  auto a = rand_array({2, 5, 3}, 17);
  auto p = la::pinv(a);
  ASSERT_EQ(p.shape(), Shape({2, 3, 5}));
  auto ma = mat(a), mp = mat(p);
  for (int i = 0; i < 2; ++i) {
    expect_mat_near(mul(at(mp, i, 3, 5), at(ma, i, 5, 3), 3, 5, 3),
                    identity_mat(3), 1e-12, "pinv(A) A = I");
  }
  // Rank one: A = u v^T has pinv A^T / ||A||_F^2.
  expect_close(la::pinv(array({1.0, 2.0, 2.0, 4.0}, {2, 2})),
               {1 / 25.0, 2 / 25.0, 2 / 25.0, 4 / 25.0}, 1e-10, 1e-12);
}

// --- eig ---

TEST(LapackEig, HandComputedComplexPair) {
  // A rotation by 90 degrees: eigenvalues +-i, eigenvectors (1, -+i)/sqrt2.
  for (auto t : {float32, float64}) {
    auto [w, v] = la::eig(array({0.0, -1.0, 1.0, 0.0}, {2, 2}, t));
    EXPECT_EQ(w.dtype(), complex64);
    EXPECT_EQ(v.dtype(), complex64);
    auto cw = to_vector<complex64_t>(w), cv = to_vector<complex64_t>(v);
    EXPECT_NEAR(cw[0].real(), 0.0, 1e-6);
    EXPECT_NEAR(std::abs(cw[0].imag()), 1.0, 1e-6);
    EXPECT_NEAR(cw[1].imag(), -cw[0].imag(), 1e-6);
    for (int j = 0; j < 2; ++j) {
      // A v = w v, with A v = (-v1, v0).
      std::complex<float> v0 = cv[j], v1 = cv[2 + j];
      EXPECT_NEAR(std::abs(-v1 - cw[j] * v0), 0.0, 1e-6);
      EXPECT_NEAR(std::abs(v0 - cw[j] * v1), 0.0, 1e-6);
      EXPECT_NEAR(std::norm(v0) + std::norm(v1), 1.0, 1e-6) << "unit norm";
    }
  }
}

TEST(LapackEig, BatchedReconstruction) {
  auto a = rand_array({3, 4, 4}, 30);
  for (auto& in : {a, swapaxes(a, -1, -2)}) {
    auto [w, v] = la::eig(in);
    auto ma = mat(in);
    auto cw = to_vector<complex64_t>(w), cv = to_vector<complex64_t>(v);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 4; ++j) {
        for (int r = 0; r < 4; ++r) {
          std::complex<double> av = 0;
          for (int c = 0; c < 4; ++c) {
            av += ma[i * 16 + r * 4 + c] *
                  std::complex<double>(cv[i * 16 + c * 4 + j]);
          }
          auto wv = std::complex<double>(cw[i * 4 + j]) *
                    std::complex<double>(cv[i * 16 + r * 4 + j]);
          EXPECT_NEAR(std::abs(av - wv), 0.0, 1e-5) << "A v = w v";
        }
      }
    }
    auto ev = to_vector<complex64_t>(la::eigvals(in));
    for (size_t j = 0; j < ev.size(); ++j) {
      EXPECT_EQ(ev[j], cw[j]);
    }
  }
}

TEST(LapackEig, Errors) {
  expect_error<std::invalid_argument>(
      [] {
        la::eig(zeros({2, 3}, float32));
      },
      "[linalg::eig] Arrays must be batches of square matrices");
  expect_error<std::invalid_argument>(
      [] {
        la::eigvals(zeros({2, 2}, int32));
      },
      "[linalg::eigvals] Arrays must have a real floating point type");
}

// The derivatives of eigvals and eig against central differences in
// float64 (the outputs are complex64: the real and imaginary parts are
// checked separately, with a float32-sized step and tolerance).
TEST(LapackEig, Gradients) {
  auto a = rand_array({3, 3}, 34);
  check_grads(Fn([](const std::vector<array>& x) {
                return std::vector<array>{real(la::eigvals(x[0])),
                                          imag(la::eigvals(x[0]))};
              }),
              {a}, 1e-3, 1e-3);
  // The eigenvectors (in geev's normalization) and eigenvalues together.
  check_grads(Fn([](const std::vector<array>& x) {
                auto [w, v] = la::eig(x[0]);
                return std::vector<array>{real(w), imag(w), real(v), imag(v)};
              }),
              {rand_array({2, 3, 3}, 36)}, 1e-3, 1e-3);
  // A symmetric input: the eigenvalue gradient is V diag(wbar) V^T, as for
  // eigvalsh of the same (full) matrix.
  auto sym = spd({3, 3}, 35);
  auto g1 = grad([](const array& x) {
    return sum(real(la::eigvals(x)) * array({1.0, 2.0, 3.0}));
  })(sym);
  auto w = to_vector<double>(real(la::eigvals(sym)));
  // eigvals are unordered: weight eigvalsh's sorted values the same way.
  std::vector<double> weights(3);
  auto sorted = w;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 3; ++i) {
    weights[std::find(sorted.begin(), sorted.end(), w[i]) - sorted.begin()] =
        i + 1.0;
  }
  auto wa = array(weights.begin(), {3});
  auto g2 = grad([wa](const array& x) {
    // The symmetric gradient of eigvalsh read from both triangles.
    return sum(la::eigvalsh((x + swapaxes(x, 0, 1)) * 0.5) * wa);
  })(sym);
  expect_close(g1, to_vector<double>(g2), 1e-4, 1e-4);
}

// --- lu ---

TEST(LapackLU, HandComputed) {
  for (auto t : {float32, float64}) {
    auto a = array({1.0, 2.0, 3.0, 4.0}, {2, 2}, t);
    auto f = la::lu(a);
    ASSERT_EQ(f.size(), 3u);
    EXPECT_EQ(f[0].dtype(), uint32);
    expect_close(f[0], {1, 0}, 0, 0);
    expect_close(f[1], {1.0, 0.0, 1 / 3.0, 1.0}, 1e-6, 1e-7);
    expect_close(f[2], {3.0, 4.0, 0.0, 2 / 3.0}, 1e-6, 1e-7);
    auto [packed, piv] = la::lu_factor(a);
    expect_close(packed, {3.0, 4.0, 1 / 3.0, 2 / 3.0}, 1e-6, 1e-7);
    EXPECT_EQ(piv.dtype(), uint32);
    expect_close(piv, {1, 1}, 0, 0);
  }
}

// take_along_axis(L, p) @ U == A, for square, tall, wide, batched and
// transposed inputs; L unit lower, U upper.
TEST(LapackLU, Reconstruction) {
  for (auto& a :
       {rand_array({2, 4, 4}, 20), rand_array({2, 5, 3}, 21),
        rand_array({3, 5}, 22), swapaxes(rand_array({2, 4, 4}, 23), -1, -2)}) {
    int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
    auto f = la::lu(a);
    auto mp = to_vector<double>(f[0]), ml = mat(f[1]), mu = mat(f[2]),
         ma = mat(a);
    int nb = static_cast<int>(a.size() / (int64_t{m} * n));
    for (int i = 0; i < nb; ++i) {
      auto l = at(ml, i, m, k), u = at(mu, i, k, n);
      auto lu = mul(l, u, m, k, n);
      Mat permuted(lu.size());
      std::vector<bool> seen(m, false);
      for (int r = 0; r < m; ++r) {
        int pr = static_cast<int>(mp[i * m + r]);
        ASSERT_TRUE(pr >= 0 && pr < m && !seen[pr]) << "a permutation";
        seen[pr] = true;
        for (int c = 0; c < n; ++c) {
          permuted[r * n + c] = lu[pr * n + c];
        }
      }
      expect_mat_near(permuted, at(ma, i, m, n), 1e-12, "L[p] U = A");
      for (int r = 0; r < m; ++r) {
        for (int c = 0; c < k; ++c) {
          double want = r == c ? 1.0 : (c > r ? 0.0 : l[r * k + c]);
          EXPECT_EQ(l[r * k + c], want) << "L unit lower";
          EXPECT_LE(std::abs(l[r * k + c]), 1.0) << "partial pivoting";
        }
      }
      for (int r = 0; r < k; ++r) {
        for (int c = 0; c < std::min(r, n); ++c) {
          EXPECT_EQ(u[r * n + c], 0.0) << "U upper";
        }
      }
    }
  }
}

TEST(LapackLU, SingularAndErrors) {
  // A singular matrix factors (with a zero on U's diagonal).
  auto f = la::lu(array({1.0, 2.0, 2.0, 4.0}, {2, 2}));
  expect_close(f[2], {2.0, 4.0, 0.0, 0.0}, 1e-12, 1e-12);
  expect_error<std::invalid_argument>(
      [] { la::lu(zeros({3}, float32)); },
      "[linalg::lu] Arrays must have at least two dimensions");
  expect_error<std::invalid_argument>(
      [] {
        la::lu_factor(zeros({2, 2}, int32));
      },
      "[linalg::lu_factor] Arrays must have a real floating point type");
}

// --- norm ---

TEST(LapackNorm, VectorNorms) {
  auto v = array({3.0, -4.0, 0.0}, {3});
  expect_close(la::norm(v), {5.0});
  expect_close(la::norm(v, 2.0), {5.0});
  expect_close(la::norm(v, 1.0), {7.0});
  expect_close(la::norm(v, kInf), {4.0});
  expect_close(la::norm(v, -kInf), {0.0});
  expect_close(la::norm(v, 0.0), {2.0});
  expect_close(la::norm(v, 3.0), {std::cbrt(91.0)});
  // Along an axis of a strided view, with keepdims.
  auto m = transpose(array({3.0, 1.0, 4.0, 1.0}, {2, 2}));  // [[3,4],[1,1]]
  auto n = la::norm(m, 2.0, std::vector<int>{1}, true);
  EXPECT_EQ(n.shape(), Shape({2, 1}));
  expect_close(n, {5.0, std::sqrt(2.0)});
  // No ord, no axis: the 2-norm of everything.
  expect_close(la::norm(ones({2, 2, 2}, float32)), {std::sqrt(8.0)});
}

TEST(LapackNorm, MatrixNorms) {
  auto a = array({1.0, -2.0, 3.0, 4.0}, {2, 2});
  double s1 = std::sqrt(15 + std::sqrt(125.0)),
         s2 = std::sqrt(15 - std::sqrt(125.0));
  expect_close(la::norm(a, "fro"), {std::sqrt(30.0)});
  expect_close(la::norm(a, "nuc"), {s1 + s2});
  expect_close(la::norm(a, 1.0), {6.0});
  expect_close(la::norm(a, -1.0), {4.0});
  expect_close(la::norm(a, kInf), {7.0});
  expect_close(la::norm(a, -kInf), {3.0});
  expect_close(la::norm(a, 2.0), {s1});
  expect_close(la::norm(a, -2.0), {s2});
  // The matrix in axes (2, 0) of a 3-D array, keepdims.
  auto b = transpose(expand_dims(a, 1), {1, 2, 0});  // b[0, j, i] = a[i, j]
  auto n1 = la::norm(b, 1.0, std::vector<int>{2, 1}, true);
  EXPECT_EQ(n1.shape(), Shape({1, 1, 1}));
  expect_close(n1, {6.0});
  auto n2 = la::norm(b, 2.0, std::vector<int>{1, 2});
  EXPECT_EQ(n2.shape(), Shape({1}));
  expect_close(n2, {s1});
}

TEST(LapackNorm, Errors) {
  auto a = zeros({2, 2, 2}, float32);
  expect_error<std::invalid_argument>(
      [&] { la::norm(a, 2.0); },
      "[linalg::norm] With an ord and no axis the input must be 1-D or 2-D; "
      "got shape (2,2,2).");
  expect_error<std::invalid_argument>(
      [&] { la::norm(a, "fro", std::vector<int>{0}); },
      "[linalg::norm] Norm \"fro\" is a matrix norm; it needs two axes.");
  expect_error<std::invalid_argument>(
      [&] {
        la::norm(a, "abc", std::vector<int>{0, 1});
      },
      "[linalg::norm] Unknown matrix norm \"abc\"");
  expect_error<std::invalid_argument>(
      [&] {
        la::norm(a, 3.0, std::vector<int>{0, 1});
      },
      "[linalg::norm] Matrix norms take ord 1, -1, 2, -2, inf, -inf");
  expect_error<std::invalid_argument>(
      [&] {
        la::norm(a, 2.0, std::vector<int>{0, 1, 2});
      },
      "[linalg::norm] axis must name one or two axes");
  expect_error<std::invalid_argument>(
      [&] {
        la::norm(a, 2.0, std::vector<int>{1, -2});
      },
      "[linalg::norm] Repeated axis");
  expect_error<std::invalid_argument>(
      [&] { la::norm(a, 2.0, std::vector<int>{3}); }, "");
  // Integers are promoted to float32 (MLX).
  auto ni = la::norm(array({3, 4}));
  EXPECT_EQ(ni.dtype(), float32);
  EXPECT_FLOAT_EQ(ni.item<float>(), 5.0f);
}

// --- cross ---

TEST(LapackCross, Values) {
  auto x = array({1.0, 0.0, 0.0, 1.0, 2.0, 3.0}, {2, 3});
  auto y = array({0.0, 1.0, 0.0, 4.0, 5.0, 6.0}, {2, 3});
  expect_close(la::cross(x, y), {0, 0, 1, -3, 6, -3});
  // Vectors along axis 0.
  auto c = la::cross(transpose(x), transpose(y), 0);
  EXPECT_EQ(c.shape(), Shape({3, 2}));
  expect_close(c, {0, -3, 0, 6, 1, -3});
  expect_error<std::invalid_argument>(
      [] { la::cross(zeros({2}, float32), zeros({2}, float32)); },
      "[linalg::cross] The axis -1 must have size 3 in both inputs");
}

// --- half types, tri_inv ---

TEST(LapackHalf, ComputedInFloat32) {
  for (auto t : {float16, bfloat16}) {
    auto a = array({4.0, 2.0, 2.0, 3.0}, {2, 2}, t);
    auto x = la::solve(a, array({6.0, 5.0}, {2}, t));
    EXPECT_EQ(x.dtype(), t);
    expect_close(x, {1.0, 1.0}, 1e-2, 1e-2);
    auto l = la::cholesky(a);
    EXPECT_EQ(l.dtype(), t);
    expect_close(l, {2.0, 0.0, 1.0, std::sqrt(2.0)}, 1e-2, 1e-2);
    auto [q, r] = la::qr(a);
    EXPECT_EQ(q.dtype(), t);
    EXPECT_EQ(r.dtype(), t);
    auto [w, v] = la::eigh(a);
    EXPECT_EQ(w.dtype(), t);
    expect_close(w, {3.5 - std::sqrt(4.25), 3.5 + std::sqrt(4.25)}, 1e-2, 1e-2);
    EXPECT_EQ(la::svd(a)[1].dtype(), t);
    EXPECT_EQ(la::lu(a)[1].dtype(), t);
    EXPECT_EQ(la::eigvals(a).dtype(), complex64);
  }
}

TEST(LapackTriInv, LowerAndUpper) {
  auto a = array({2.0, 100.0, 3.0, 4.0}, {2, 2});
  expect_close(la::tri_inv(a), {0.5, 0.0, -0.375, 0.25}, 1e-12, 1e-12);
  expect_close(la::tri_inv(transpose(a), true), {0.5, -0.375, 0.0, 0.25}, 1e-12,
               1e-12);
  expect_error<std::invalid_argument>(
      [] {
        la::tri_inv(zeros({2, 3}, float32));
      },
      "[linalg::tri_inv] Arrays must be batches of square matrices");
}

// --- gradients of the composites (vjp, jvp and finite differences) ---

TEST(LapackGrad, Composites) {
  auto wc = well_conditioned({3, 3}, 40);
  auto spd3 = spd({3, 3}, 41);
  auto r = rand_array({4, 3}, 42);
  auto un = [](std::function<array(const array&)> g) {
    return Fn([g](const std::vector<array>& x) {
      return std::vector<array>{g(x[0])};
    });
  };
  check_grads(un([](auto& x) { return la::pinv(x); }), {r}, 1e-5);
  check_grads(un([](auto& x) { return la::tri_inv(x, true); }), {wc});
  check_grads(un([](auto& x) { return la::cholesky_inv(la::cholesky(x)); }),
              {spd3}, 1e-5);
  for (double ord : {1.0, -1.0, 2.0, -2.0, kInf, -kInf}) {
    SCOPED_TRACE(ord);
    check_grads(un([ord](auto& x) { return la::norm(x, ord); }), {r}, 1e-5);
  }
  check_grads(un([](auto& x) { return la::norm(x, "nuc"); }), {r}, 1e-5);
  check_grads(un([](auto& x) { return la::norm(x, "fro"); }), {r});
  check_grads(un([](auto& x) { return la::norm(x, 3.0, std::vector<int>{1}); }),
              {r});
  check_grads(Fn([](const std::vector<array>& x) {
                return std::vector<array>{la::cross(x[0], x[1])};
              }),
              {rand_array({2, 3}, 43), rand_array({2, 3}, 44)});
  // Batched solve with a broadcast right-hand side, through vmap too.
  Fn solve_fn = [](const std::vector<array>& x) {
    return std::vector<array>{la::solve(x[0], x[1])};
  };
  auto a = well_conditioned({2, 3, 3}, 45);
  auto b = rand_array({3}, 46);
  check_grads(solve_fn, {a, b});
  check_vmap(solve_fn, {a, b}, {0, -1});
}

// --- large batches (split over the thread pool) and empty inputs ---

TEST(LapackBatch, ManyMatricesInParallel) {
  auto a = well_conditioned({300, 8, 8}, 50);
  auto x = la::inv(a);
  auto [w, v] = la::eigh(spd({300, 8, 8}, 51));
  auto ma = mat(a), mx = mat(x);
  for (int i = 0; i < 300; i += 37) {
    expect_mat_near(mul(at(ma, i, 8, 8), at(mx, i, 8, 8), 8, 8, 8),
                    identity_mat(8), 1e-12, "A inv(A)");
  }
  // A singular matrix deep in a large batch is still reported.
  auto b = concatenate({a, zeros({1, 8, 8}, float64)}, 0);
  expect_error<std::runtime_error>([&] { eval(la::inv(b)); },
                                   "[linalg::inv] Matrix is singular.");
}

TEST(LapackBatch, EmptyInputs) {
  EXPECT_EQ(la::inv(zeros({0, 3, 3}, float32)).shape(), Shape({0, 3, 3}));
  EXPECT_EQ(la::cholesky(zeros({2, 0, 0}, float32)).shape(), Shape({2, 0, 0}));
  auto f = la::svd(zeros({2, 0, 3}, float64));
  EXPECT_EQ(f[0].shape(), Shape({2, 0, 0}));
  EXPECT_EQ(f[1].shape(), Shape({2, 0}));
  // Vt spans the whole row space: the identity.
  expect_close(
      f[2], to_vector<double>(broadcast_to(eye(3, float64), {2, 3, 3})), 0, 0);
  auto p = la::lu(zeros({3, 0}, float64))[0];
  expect_close(p, {0, 1, 2}, 0, 0);
  auto [q, r] = la::qr(zeros({0, 2}, float32));
  EXPECT_EQ(q.shape(), Shape({0, 0}));
  EXPECT_EQ(r.shape(), Shape({0, 2}));
  EXPECT_EQ(la::solve(eye(2, float32), zeros({2, 0}, float32)).shape(),
            Shape({2, 0}));
}
