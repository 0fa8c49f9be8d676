// mx.linalg on the GPU (cuSOLVER / cuBLAS, backend/cuda/lapack_*.cpp)
// against the CPU's LAPACK kernels on the same inputs: every primitive in
// float32 and float64 (complex64 for svd, eigh, eig), single matrices,
// batches of 10,000 small ones (the libraries' batched paths) and one large
// one (the blocked 64-bit API), transposed and broadcast inputs, empty
// matrices, NaN inputs (NaN outputs, no error, as on the CPU), singular
// and non-positive-definite inputs raising the CPU's exception at eval,
// and gradients through the GPU. Factors that are unique only up to signs
// (QR, SVD, eigenvectors) are compared after fixing the signs and through
// their defining identities. Skipped without a GPU.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "fluxion/ops/linalg_lapack.h"
#include "fluxion/transforms.h"
#include "device_scope.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;
namespace la = fluxion::linalg;

namespace {

array rnd(const Shape& shape, uint32_t seed, Dtype t = float64) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d;
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) x = d(gen);
  return astype(array(v.begin(), shape, float64), t, kCpu);
}

array crnd(const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  std::vector<complex64_t> v(shape_size(shape));
  for (auto& x : v) x = complex64_t(d(gen), d(gen));
  return array(v.begin(), shape, complex64);
}

// Well conditioned: random plus n on the diagonal.
array wc(const Shape& shape, uint32_t seed, Dtype t = float64) {
  const int n = shape.back();
  return astype(add(rnd(shape, seed), multiply(eye(n, float64, kCpu),
                                               array(double(n)), kCpu),
                    kCpu),
                t, kCpu);
}

// Symmetric positive definite: M M^T / n + I.
array spd(const Shape& shape, uint32_t seed, Dtype t = float64) {
  auto m = rnd(shape, seed);
  const int n = shape.back();
  auto p = divide(matmul(m, swapaxes(m, -1, -2, kCpu), kCpu),
                  array(double(n)), kCpu);
  return astype(add(p, eye(n, float64, kCpu), kCpu), t, kCpu);
}

double tol_of(Dtype t) { return t == float64 ? 1e-9 : 2e-3; }

// Every element within tol * max(1, max |want|).
void expect_match(const array& got, const array& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  auto g = to_vector<double>(is_complex(got.dtype()) ? abs(got, kCpu) : got);
  auto w = to_vector<double>(is_complex(want.dtype()) ? abs(want, kCpu) : want);
  double scale = 1;
  for (double v : w) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " at " << i;
      continue;
    }
    ASSERT_NEAR(g[i], w[i], tol * scale) << what << " at " << i;
  }
}

// Max |x| of a residual, relative to max(1, max |ref|).
double rel_max(const array& x, const array& ref) {
  auto r = to_vector<double>(max(abs(x, kCpu), false, kCpu));
  auto s = to_vector<double>(max(abs(ref, kCpu), false, kCpu));
  return r[0] / std::max(1.0, s[0]);
}

array mT(const array& x) { return swapaxes(x, -1, -2, kCpu); }

// Columns with their first row made non-negative (a sign per column).
array fix_cols(const array& v) {
  int nd = v.ndim();
  Shape start(nd, 0), stop = v.shape();
  stop[nd - 2] = 1;
  auto s = sign(slice(v, start, stop, kCpu), kCpu);
  s = where(equal(s, array(0.0, s.dtype()), kCpu), array(1.0, s.dtype()), s,
            kCpu);
  return multiply(v, s, kCpu);
}

const std::vector<Dtype> kReal{float32, float64};

}  // namespace

TEST(CudaLinalg, InvSolveTriangular) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : kReal) {
    SCOPED_TRACE(dtype_name(t));
    for (Shape s : {Shape{1, 1}, Shape{4, 4}, Shape{3, 7, 7}, Shape{2, 3, 33, 33},
                    Shape{200, 200}}) {
      SCOPED_TRACE(s.back());
      auto a = wc(s, 1, t);
      expect_match(la::inv(a, kGpu), la::inv(a, kCpu), tol_of(t), "inv");
      Shape bs = s;
      bs.back() = 3;
      auto b = rnd(bs, 2, t);
      expect_match(la::solve(a, b, kGpu), la::solve(a, b, kCpu), tol_of(t),
                   "solve");
      for (bool upper : {false, true}) {
        expect_match(la::solve_triangular(a, b, upper, kGpu),
                     la::solve_triangular(a, b, upper, kCpu), tol_of(t),
                     "solve_triangular");
        expect_match(la::tri_inv(a, upper, kGpu), la::tri_inv(a, upper, kCpu),
                     tol_of(t), "tri_inv");
      }
    }
    // A vector right-hand side, broadcast batch dims, a transposed view.
    auto a = wc({2, 5, 5}, 3, t);
    auto v = rnd({5}, 4, t);
    expect_match(la::solve(a, v, kGpu), la::solve(a, v, kCpu), tol_of(t),
                 "solve vector");
    auto b = rnd({5, 2}, 5, t);
    expect_match(la::solve(a, b, kGpu), la::solve(a, b, kCpu), tol_of(t),
                 "solve broadcast");
    auto at = mT(a);
    expect_match(la::inv(at, kGpu), la::inv(at, kCpu), tol_of(t),
                 "inv transposed");
    expect_match(la::solve_triangular(at, b, true, kGpu),
                 la::solve_triangular(at, b, true, kCpu), tol_of(t),
                 "solve_triangular transposed");
  }
}

TEST(CudaLinalg, CholeskyQrLu) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : kReal) {
    SCOPED_TRACE(dtype_name(t));
    for (Shape s : {Shape{1, 1}, Shape{4, 4}, Shape{5, 6, 6}, Shape{150, 150}}) {
      auto p = spd(s, 6, t);
      for (bool upper : {false, true}) {
        expect_match(la::cholesky(p, upper, kGpu), la::cholesky(p, upper, kCpu),
                     tol_of(t), "cholesky");
      }
      auto l = la::cholesky(p, false, kCpu);
      expect_match(la::cholesky_inv(l, false, kGpu),
                   la::cholesky_inv(l, false, kCpu), tol_of(t), "cholesky_inv");
    }
    for (Shape s : {Shape{4, 4}, Shape{6, 3}, Shape{3, 6}, Shape{7, 5, 4},
                    Shape{7, 4, 5}, Shape{130, 90}}) {
      SCOPED_TRACE(shape_size(s));
      auto a = rnd(s, 7, t);
      auto [q, r] = la::qr(a, kGpu);
      auto [qc, rc] = la::qr(a, kCpu);
      // Reconstruction, orthogonality, triangularity, and the factors
      // against the CPU with R's diagonal made positive.
      EXPECT_LT(rel_max(subtract(matmul(q, r, kCpu), a, kCpu), a),
                10 * tol_of(t));
      int k = q.shape(-1);
      EXPECT_LT(rel_max(subtract(matmul(mT(q), q, kCpu),
                                 eye(k, t, kCpu), kCpu),
                        q),
                10 * tol_of(t));
      expect_match(r, triu(r, 0, kCpu), 0, "R upper");
      auto fix = [&](const array& qq, const array& rr) {
        auto d = sign(sum(multiply(rr, eye(k, rr.shape(-1), 0, t, kCpu), kCpu),
                          -1, false, kCpu),
                      kCpu);
        return std::pair{multiply(qq, expand_dims(d, -2, kCpu), kCpu),
                         multiply(rr, expand_dims(d, -1, kCpu), kCpu)};
      };
      auto [q1, r1] = fix(q, r);
      auto [q2, r2] = fix(qc, rc);
      expect_match(q1, q2, 10 * tol_of(t), "Q");
      expect_match(r1, r2, 10 * tol_of(t), "R");
      // LU: partial pivoting picks the same rows (no ties in random data).
      auto f = la::lu(a, kGpu);
      auto fc = la::lu(a, kCpu);
      expect_match(f[0], fc[0], 0, "p");
      expect_match(f[1], fc[1], tol_of(t), "L");
      expect_match(f[2], fc[2], tol_of(t), "U");
      auto [packed, piv] = la::lu_factor(a, kGpu);
      auto [packed_c, piv_c] = la::lu_factor(a, kCpu);
      expect_match(packed, packed_c, tol_of(t), "packed LU");
      expect_match(piv, piv_c, 0, "pivots");
    }
  }
}

TEST(CudaLinalg, SvdEighEig) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : {float32, float64, complex64}) {
    SCOPED_TRACE(dtype_name(t));
    const double tol = t == float64 ? 1e-9 : 2e-3;
    auto draw = [&](const Shape& s, uint32_t seed) {
      return t == complex64 ? crnd(s, seed) : rnd(s, seed, t);
    };
    for (Shape s : {Shape{3, 3}, Shape{4, 6}, Shape{6, 4}, Shape{5, 8, 3},
                    Shape{40, 70}, Shape{70, 40}}) {
      auto a = draw(s, 8);
      int m = s[s.size() - 2], n = s.back(), k = std::min(m, n);
      auto f = la::svd(a, true, kGpu);
      auto fc = la::svd(a, true, kCpu);
      expect_match(f[1], fc[1], tol, "singular values");
      expect_match(la::svd(a, false, kGpu)[0], fc[1], tol, "values only");
      // U S Vt = A with the first k columns / rows; U and Vt unitary.
      int nd = a.ndim();
      Shape st(nd, 0), su = f[0].shape(), sv = f[2].shape();
      su.back() = k;
      sv[nd - 2] = k;
      auto u = slice(f[0], st, su, kCpu), vt = slice(f[2], st, sv, kCpu);
      auto us = multiply(u, astype(expand_dims(f[1], -2, kCpu), t, kCpu), kCpu);
      EXPECT_LT(rel_max(subtract(matmul(us, vt, kCpu), a, kCpu), a), 10 * tol);
      auto uh = conjugate(mT(f[0]), kCpu);
      EXPECT_LT(rel_max(subtract(matmul(uh, f[0], kCpu), eye(m, t, kCpu), kCpu),
                        f[0]),
                10 * tol);
      auto vh = conjugate(mT(f[2]), kCpu);
      EXPECT_LT(rel_max(subtract(matmul(f[2], vh, kCpu), eye(n, t, kCpu), kCpu),
                        f[2]),
                10 * tol);
    }
    for (Shape s : {Shape{1, 1}, Shape{4, 4}, Shape{6, 5, 5}, Shape{100, 100}}) {
      auto a = draw(s, 9);
      if (t == complex64) {
        // Hermitian (a real diagonal: LAPACK ignores its imaginary part).
        a = add(a, conjugate(mT(a), kCpu), kCpu);
      }
      for (std::string uplo : {"L", "U"}) {
        auto [w, v] = la::eigh(a, uplo, kGpu);
        auto [wcpu, vcpu] = la::eigh(a, uplo, kCpu);
        expect_match(w, wcpu, tol, "eigh values");
        expect_match(la::eigvalsh(a, uplo, kGpu), wcpu, tol, "eigvalsh");
        if (t != complex64) {
          expect_match(fix_cols(v), fix_cols(vcpu), 10 * tol, "eigh vectors");
        }
        // A V = V diag(w) for the matrix the triangle defines.
        auto tri = uplo == "L" ? tril(a, 0, kCpu) : triu(a, 0, kCpu);
        auto off = uplo == "L" ? tril(a, -1, kCpu) : triu(a, 1, kCpu);
        auto full = add(tri, conjugate(mT(off), kCpu), kCpu);
        auto res = subtract(matmul(full, v, kCpu),
                            multiply(v, astype(expand_dims(w, -2, kCpu), t,
                                               kCpu),
                                     kCpu),
                            kCpu);
        EXPECT_LT(rel_max(res, full), 100 * tol);
      }
    }
    for (Shape s : {Shape{1, 1}, Shape{5, 5}, Shape{3, 6, 6}, Shape{64, 64}}) {
      auto a = draw(s, 10);
      auto [w, v] = la::eig(a, kGpu);
      auto wg = la::eigvals(a, kGpu);
      expect_match(wg, w, 1e-4, "eigvals = eig's values");
      auto ac = astype(a, complex64, kCpu);
      auto res = subtract(matmul(ac, v, kCpu),
                          multiply(v, expand_dims(w, -2, kCpu), kCpu), kCpu);
      EXPECT_LT(rel_max(res, ac), 1e-3);
      // Unit columns, and the same spectrum as the CPU (order free).
      auto norms = sqrt(sum(square(abs(v, kCpu), kCpu), -2, false, kCpu), kCpu);
      expect_match(norms, ones_like(norms, kCpu), 1e-4, "unit vectors");
      auto key = [&](const array& x) {
        return add(real(x, kCpu), multiply(imag(x, kCpu), array(1e-3f), kCpu),
                   kCpu);
      };
      auto wc_ = la::eigvals(a, kCpu);
      auto order = argsort(key(w), -1, kCpu);
      auto order_c = argsort(key(wc_), -1, kCpu);
      expect_match(take_along_axis(w, order, -1, kCpu),
                   take_along_axis(wc_, order_c, -1, kCpu), 1e-3,
                   "eigenvalues");
    }
  }
}

// 10,000 small matrices: the batched library paths, against the CPU.
TEST(CudaLinalg, TenThousandSmall) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : kReal) {
    SCOPED_TRACE(dtype_name(t));
    const double tol = tol_of(t);
    auto a = wc({10000, 8, 8}, 11, t);
    auto b = rnd({10000, 8, 2}, 12, t);
    auto p = spd({10000, 8, 8}, 13, t);
    expect_match(la::inv(a, kGpu), la::inv(a, kCpu), tol, "inv");
    expect_match(la::solve(a, b, kGpu), la::solve(a, b, kCpu), tol, "solve");
    expect_match(la::solve_triangular(a, b, false, kGpu),
                 la::solve_triangular(a, b, false, kCpu), tol, "trsm");
    expect_match(la::cholesky(p, false, kGpu), la::cholesky(p, false, kCpu),
                 tol, "cholesky");
    // Cholesky solve: L y = b, L^T x = y (L^T a transposed view).
    auto chol_solve = [&](Device d) {
      auto l = la::cholesky(p, false, d);
      auto y = la::solve_triangular(l, b, false, d);
      return la::solve_triangular(swapaxes(l, -1, -2, d), y, true, d);
    };
    expect_match(chol_solve(kGpu), chol_solve(kCpu), tol, "cholesky solve");
    auto f = la::lu(a, kGpu);
    auto fc = la::lu(a, kCpu);
    expect_match(f[0], fc[0], 0, "p");
    expect_match(f[2], fc[2], tol, "U");
    auto [q, r] = la::qr(a, kGpu);
    EXPECT_LT(rel_max(subtract(matmul(q, r, kCpu), a, kCpu), a), 10 * tol);
    expect_match(la::eigvalsh(p, "L", kGpu), la::eigvalsh(p, "L", kCpu), tol,
                 "eigvalsh");
    auto [w, v] = la::eigh(p, "L", kGpu);
    expect_match(fix_cols(v), fix_cols(la::eigh(p, "L", kCpu).second),
                 10 * tol, "eigh vectors");
    expect_match(la::svd(a, false, kGpu)[0], la::svd(a, false, kCpu)[0], tol,
                 "svd values");
    auto fs = la::svd(a, true, kGpu);
    auto us = multiply(fs[0], expand_dims(fs[1], -2, kCpu), kCpu);
    EXPECT_LT(rel_max(subtract(matmul(us, fs[2], kCpu), a, kCpu), a),
              10 * tol);
  }
  // eig runs one Xgeev call per matrix: 2,000 of them.
  auto e = rnd({2000, 8, 8}, 14, float32);
  auto [w, v] = la::eig(e, kGpu);
  auto ec = astype(e, complex64, kCpu);
  auto res = subtract(matmul(ec, v, kCpu),
                      multiply(v, expand_dims(w, -2, kCpu), kCpu), kCpu);
  EXPECT_LT(rel_max(res, ec), 1e-3);
}

// One large matrix: the blocked 64-bit API.
TEST(CudaLinalg, Large) {
  SKIP_WITHOUT_GPU();
  const int n = 1024;
  auto a = wc({n, n}, 15, float32);
  auto b = rnd({n, 4}, 16, float32);
  auto p = spd({n, n}, 17, float32);
  expect_match(la::inv(a, kGpu), la::inv(a, kCpu), 1e-4, "inv");
  expect_match(la::solve(a, b, kGpu), la::solve(a, b, kCpu), 1e-5, "solve");
  expect_match(la::cholesky(p, false, kGpu), la::cholesky(p, false, kCpu),
               1e-4, "cholesky");
  expect_match(la::solve_triangular(a, b, true, kGpu),
               la::solve_triangular(a, b, true, kCpu), 1e-4, "trsm");
  // A transposed view goes to trsm in place (op T).
  expect_match(la::solve_triangular(mT(a), b, false, kGpu),
               la::solve_triangular(mT(a), b, false, kCpu), 1e-4,
               "trsm of a transposed view");
  auto f = la::lu(a, kGpu);
  expect_match(f[0], la::lu(a, kCpu)[0], 0, "p");
  auto [q, r] = la::qr(a, kGpu);
  EXPECT_LT(rel_max(subtract(matmul(q, r, kCpu), a, kCpu), a), 1e-4);
  expect_match(la::eigvalsh(p, "L", kGpu), la::eigvalsh(p, "L", kCpu), 1e-4,
               "eigvalsh");
  auto x = rnd({n, 512}, 18, float32);
  expect_match(la::svd(x, false, kGpu)[0], la::svd(x, false, kCpu)[0], 1e-4,
               "singular values");
  auto e = rnd({256, 256}, 19, float32);
  auto [w, v] = la::eig(e, kGpu);
  auto ec = astype(e, complex64, kCpu);
  auto res = subtract(matmul(ec, v, kCpu),
                      multiply(v, expand_dims(w, -2, kCpu), kCpu), kCpu);
  EXPECT_LT(rel_max(res, ec), 1e-3);
}

namespace {

// The CPU's message for `f` on the CPU, and the GPU raising the same
// message (and type) at eval.
template <typename F>
void expect_same_error(F&& f, const std::string& needle) {
  std::string cpu_msg;
  try {
    f(kCpu).eval();
  } catch (const std::runtime_error& e) {
    cpu_msg = e.what();
  }
  ASSERT_NE(cpu_msg.find(needle), std::string::npos) << cpu_msg;
  try {
    f(kGpu).eval();
    ADD_FAILURE() << "no error on the GPU; the CPU raised: " << cpu_msg;
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), cpu_msg);
  }
}

}  // namespace

TEST(CudaLinalg, ErrorsAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : kReal) {
    SCOPED_TRACE(dtype_name(t));
    // One singular matrix among 10,000 (batched path) and a large one.
    auto a = wc({10000, 4, 4}, 20, t);
    auto zero_row = zeros({1, 1, 4}, t, kCpu);
    auto sing = slice_update(a, zero_row, {17, 2, 0}, {18, 3, 4}, kCpu);
    auto b = rnd({10000, 4, 1}, 21, t);
    expect_same_error([&](Device d) { return la::inv(sing, d); },
                      "[linalg::inv] Matrix is singular.");
    expect_same_error([&](Device d) { return la::solve(sing, b, d); },
                      "[linalg::solve] Matrix is singular.");
    auto big = zeros({300, 300}, t, kCpu);
    expect_same_error([&](Device d) { return la::inv(big, d); },
                      "[linalg::inv] Matrix is singular.");
    auto tri = slice_update(a, zero_row, {5, 1, 0}, {6, 2, 4}, kCpu);
    expect_same_error(
        [&](Device d) { return la::solve_triangular(tri, b, false, d); },
        "[linalg::solve_triangular] Matrix is singular.");
    auto p = spd({10000, 4, 4}, 22, t);
    auto not_pd = slice_update(p, negative(ones({1, 1, 1}, t, kCpu), kCpu),
                               {33, 0, 0}, {34, 1, 1}, kCpu);
    expect_same_error([&](Device d) { return la::cholesky(not_pd, false, d); },
                      "[linalg::cholesky] Matrix is not positive definite.");
    expect_same_error(
        [&](Device d) { return la::cholesky(negative(eye(500, t, kCpu), kCpu),
                                            false, d); },
        "[linalg::cholesky] Matrix is not positive definite.");
    // The stream still works afterwards; a singular LU is no error.
    expect_match(la::inv(a, kGpu), la::inv(a, kCpu), tol_of(t), "after");
    expect_match(la::lu(sing, kGpu)[2], la::lu(sing, kCpu)[2], tol_of(t),
                 "singular LU");
    // An error raised when a dependent of the failed output is read.
    EXPECT_THROW(add(la::inv(sing, kGpu), array(1.0, t), kGpu).eval(),
                 std::runtime_error);
  }
}

TEST(CudaLinalg, NonFiniteAndEmpty) {
  SKIP_WITHOUT_GPU();
  auto a = wc({3, 4, 4}, 23, float32);
  auto nan_in = slice_update(a, full({1, 1, 1}, NAN, float32, kCpu), {1, 0, 0},
                             {2, 1, 1}, kCpu);
  auto inf_in = slice_update(a, full({1, 1, 1}, INFINITY, float32, kCpu),
                             {1, 2, 3}, {2, 3, 4}, kCpu);
  auto b = rnd({3, 4, 2}, 24, float32);
  for (auto& x : {nan_in, inf_in}) {
    expect_match(la::inv(x, kGpu), la::inv(x, kCpu), 1e-5, "inv");
    expect_match(la::solve(x, b, kGpu), la::solve(x, b, kCpu), 1e-5, "solve");
    expect_match(la::cholesky(x, false, kGpu), la::cholesky(x, false, kCpu),
                 1e-5, "cholesky");
    expect_match(la::svd(x, false, kGpu)[0], la::svd(x, false, kCpu)[0], 1e-4,
                 "svd");
    expect_match(la::eigvalsh(x, "L", kGpu), la::eigvalsh(x, "L", kCpu), 1e-4,
                 "eigvalsh");
    auto f = la::lu(x, kGpu);
    auto fc = la::lu(x, kCpu);
    expect_match(f[0], fc[0], 0, "p");
    auto [packed, piv] = la::lu_factor(x, kGpu);
    expect_match(piv, la::lu_factor(x, kCpu).second, 0, "pivots");
    auto w = la::eigvals(x, kGpu);
    auto wv = to_vector<complex64_t>(slice(w, {1, 0}, {2, 4}, kCpu));
    for (auto z : wv) EXPECT_TRUE(std::isnan(z.real()));
  }
  // Empty matrices.
  auto e = zeros({2, 0, 3}, float32, kCpu);
  auto f = la::svd(e, true, kGpu);
  expect_match(f[0], la::svd(e, true, kCpu)[0], 0, "U of empty");
  expect_match(f[2], la::svd(e, true, kCpu)[2], 0, "Vt of empty");
  auto l = la::lu(zeros({3, 0}, float32, kCpu), kGpu);
  expect_match(l[0], la::lu(zeros({3, 0}, float32, kCpu), kCpu)[0], 0,
               "p of empty");
  EXPECT_EQ(la::inv(zeros({0, 0}, float32, kCpu), kGpu).size(), 0u);
  EXPECT_EQ(la::eigvals(zeros({2, 0, 0}, float32, kCpu), kGpu).size(), 0u);
}

TEST(CudaLinalg, GradientsAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  using Fn = std::function<array(const std::vector<array>&, Device)>;
  std::vector<std::pair<std::string, Fn>> fns = {
      {"inv", [](const std::vector<array>& x, Device d) { return sum(la::inv(x[0], d), false, d); }},
      {"solve",
       [](const std::vector<array>& x, Device d) {
         return sum(square(la::solve(x[0], x[1], d), d), false, d);
       }},
      {"solve_triangular",
       [](const std::vector<array>& x, Device d) {
         return sum(la::solve_triangular(x[0], x[1], true, d), false, d);
       }},
      {"cholesky",
       [](const std::vector<array>& x, Device d) {
         auto s = matmul(x[0], swapaxes(x[0], -1, -2, d), d);
         s = add(s, eye(x[0].shape(-1), x[0].dtype(), d), d);
         return sum(la::cholesky(s, false, d), false, d);
       }},
      {"qr",
       [](const std::vector<array>& x, Device d) {
         auto [q, r] = la::qr(x[0], d);
         return add(sum(square(q, d), false, d), sum(r, false, d), d);
       }},
      {"svd",
       [](const std::vector<array>& x, Device d) { return sum(la::svd(x[0], false, d)[0], false, d); }},
      {"eigh",
       [](const std::vector<array>& x, Device d) {
         auto [w, v] = la::eigh(x[0], "L", d);
         return add(sum(w, false, d), sum(square(v, d), false, d), d);
       }},
      {"eigvals",
       [](const std::vector<array>& x, Device d) {
         return sum(real(la::eigvals(x[0], d), d), false, d);
       }},
      {"lu",
       [](const std::vector<array>& x, Device d) { return sum(la::lu(x[0], d)[2], false, d); }},
      {"det", [](const std::vector<array>& x, Device d) { return sum(la::det(x[0], d), false, d); }},
  };
  for (Dtype t : kReal) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<array> in{wc({3, 4, 4}, 25, t), rnd({3, 4, 2}, 26, t)};
    for (auto& [name, f] : fns) {
      SCOPED_TRACE(name);
      auto on = [&, &f = f](Device d) {
        return value_and_grad(
            [&](const std::vector<array>& x) {
              return std::vector<array>{f(x, d)};
            },
            std::vector<int>{0, 1})(in);
      };
      auto [vg, gg] = on(kGpu);
      auto [vc, gc] = on(kCpu);
      // eig's outputs are complex64 whatever the input (as MLX's), and its
      // vjp works on them in complex64 / float32 on both devices: for a
      // float64 input the value and the gradient are float32 results
      // (the CPU's grad of sum(real(eigvals)) is I to 1.2e-7, not 1e-16),
      // so they are held to float32's tolerance.
      const double tol = 10 * tol_of(name == "eigvals" ? float32 : t);
      expect_match(vg[0], vc[0], tol, name + " value");
      for (size_t i = 0; i < gg.size(); ++i) {
        expect_match(gg[i], gc[i], tol, name + " grad");
      }
    }
  }
}
