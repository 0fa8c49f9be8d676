// The GPU linear algebra's host logic (backend/common/lapack_plan.h),
// without a GPU: the pivots-to-permutation and eig-pair rules against the
// CPU kernel's sequential code, the batching decisions, and the layout
// identities the CUDA kernels rely on (backend/cuda/lapack_*.cpp), checked
// by running the same column-major calls through the host's LAPACK
// (LAPACKE in column-major mode on the row-major buffers, as cuSOLVER sees
// them) and comparing with the CPU primitives.
#include <lapacke.h>

#include <algorithm>
#include <complex>
#include <numeric>
#include <random>
#include <vector>

#include "fluxion/backend/common/lapack_plan.h"
#include "fluxion/ops/linalg_lapack.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;
namespace plan = fluxion::lapack_plan;

namespace {

constexpr int kCol = LAPACK_COL_MAJOR;

std::vector<double> randn(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d;
  std::vector<double> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

// The CPU kernel's conversion (backend/cpu/lapack.cpp, LUF): swaps applied
// in order, then inverted.
std::vector<uint32_t> cpu_perm(const std::vector<int>& ipiv, int m) {
  std::vector<uint32_t> rows(m), perm(m);
  std::iota(rows.begin(), rows.end(), 0u);
  for (size_t j = 0; j < ipiv.size(); ++j) {
    std::swap(rows[j], rows[ipiv[j] - 1]);
  }
  for (int r = 0; r < m; ++r) perm[rows[r]] = r;
  return perm;
}

void expect_near_vec(const std::vector<double>& got,
                     const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol) << what << " at " << i;
  }
}

std::vector<double> values_of(const array& a) {
  return to_vector<double>(astype(a, float64));
}

array mat(const std::vector<double>& v, int rows, int cols) {
  return array(v.begin(), Shape{rows, cols}, float64);
}

}  // namespace

TEST(LapackPlan, LuRowPositionMatchesCpuSwaps) {
  std::mt19937 gen(5);
  for (int m : {1, 2, 3, 5, 8, 17}) {
    for (int k : {0, 1, std::min(m, 3), m}) {
      if (k > m) continue;
      for (int rep = 0; rep < 20; ++rep) {
        std::vector<int> ipiv(k);
        for (int j = 0; j < k; ++j) {
          // LAPACK's pivots: row j swapped with a row p >= j.
          ipiv[j] = std::uniform_int_distribution<int>(j, m - 1)(gen) + 1;
        }
        auto want = cpu_perm(ipiv, m);
        std::vector<int64_t> ipiv64(ipiv.begin(), ipiv.end());
        for (int r = 0; r < m; ++r) {
          EXPECT_EQ(plan::lu_row_position(ipiv.data(), k, r), want[r]);
          EXPECT_EQ(plan::lu_row_position(ipiv64.data(), k, r), want[r]);
        }
      }
    }
  }
}

TEST(LapackPlan, LuRowPositionOfARealFactorization) {
  // getrf on the transposed buffer (column-major A), as the GPU runs it:
  // P L U from the pivots equals A.
  const int m = 6, n = 4, k = 4;
  auto a = randn(m * n, 11);
  std::vector<double> w(m * n);  // column-major (m, n)
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < n; ++c) w[r + c * m] = a[r * n + c];
  std::vector<int> ipiv(k);
  ASSERT_EQ(LAPACKE_dgetrf(kCol, m, n, w.data(), m, ipiv.data()), 0);
  auto [lu_cpu, piv_cpu] = linalg::lu_factor(mat(a, m, n), Device::cpu);
  auto packed = values_of(lu_cpu);
  auto piv = to_vector<uint32_t>(piv_cpu);
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < n; ++c)
      EXPECT_NEAR(w[r + c * m], packed[r * n + c], 1e-12);
  auto p = to_vector<uint32_t>(linalg::lu(mat(a, m, n), Device::cpu)[0]);
  for (int j = 0; j < k; ++j) EXPECT_EQ(uint32_t(ipiv[j] - 1), piv[j]);
  for (int r = 0; r < m; ++r)
    EXPECT_EQ(plan::lu_row_position(ipiv.data(), k, r), p[r]);
}

TEST(LapackPlan, EigRolesMatchCpuPairing) {
  // wi patterns as geev leaves them, plus a trailing nonzero wi (no room
  // for a pair: the CPU treats it as real).
  std::vector<std::vector<double>> cases = {
      {0, 0, 0}, {1, -1, 0}, {0, 2, -2}, {1, -1, 3, -3}, {0, 0, 5}, {4}, {}};
  for (auto& wi : cases) {
    const int n = static_cast<int>(wi.size());
    std::vector<int> roles(n, -1);
    plan::eig_pair_roles(wi.data(), n, roles.data());
    // The CPU's scan (Eig::eval_cpu).
    std::vector<int> want(n, 0);
    for (int j = 0; j < n; ++j) {
      bool pair = wi[j] != 0 && j + 1 < n;
      if (pair) {
        want[j] = 1;
        want[j + 1] = 2;
        ++j;
      }
    }
    EXPECT_EQ(roles, want);
  }
}

TEST(LapackPlan, EigRealOutputsMatchCpu) {
  // dgeev on the transposed buffer (column-major A), unpacked element by
  // element as the GPU kernel does, against the CPU primitive.
  const int n = 5;
  auto a = randn(n * n, 21);
  std::vector<double> w(n * n);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c) w[r + c * n] = a[r * n + c];
  std::vector<double> wr(n), wi(n), vr(n * n);
  double vl;
  ASSERT_EQ(LAPACKE_dgeev(kCol, 'N', 'V', n, w.data(), n, wr.data(),
                          wi.data(), &vl, 1, vr.data(), n),
            0);
  std::vector<int> roles(n);
  plan::eig_pair_roles(wi.data(), n, roles.data());
  auto [wc, vc] = linalg::eig(mat(a, n, n), Device::cpu);
  auto wcpu = to_vector<complex64_t>(wc);
  auto vcpu = to_vector<complex64_t>(vc);
  bool any_pair = false;
  for (int j = 0; j < n; ++j) {
    any_pair |= roles[j] != 0;
    EXPECT_NEAR(wcpu[j].real(), wr[j], 1e-5);
    EXPECT_NEAR(wcpu[j].imag(), wi[j], 1e-5);
    for (int r = 0; r < n; ++r) {
      double re, im;
      plan::eig_vector_element(vr.data(), n, r, j, roles[j], re, im);
      EXPECT_NEAR(vcpu[r * n + j].real(), re, 1e-5);
      EXPECT_NEAR(vcpu[r * n + j].imag(), im, 1e-5);
    }
  }
  EXPECT_TRUE(any_pair) << "pick a seed with a complex pair";
}

TEST(LapackPlan, BatchingDecisions) {
  EXPECT_FALSE(plan::batched_lu(64, 64, 1));  // one matrix: blocked API
  EXPECT_TRUE(plan::batched_lu(64, 64, 4096));
  EXPECT_FALSE(plan::batched_lu(64, 32, 4096));  // getrfBatched: square
  EXPECT_FALSE(plan::batched_lu(1024, 1024, 8));
  EXPECT_TRUE(plan::batched_cholesky(8, 10000));
  EXPECT_FALSE(plan::batched_cholesky(2048, 2));
  EXPECT_TRUE(plan::batched_qr(8, 8, 10000));
  EXPECT_FALSE(plan::batched_qr(4, 8, 10000));  // wide: looped
  EXPECT_TRUE(plan::batched_svd(32, 32, 2));
  EXPECT_FALSE(plan::batched_svd(33, 8, 2));  // gesvdjBatched: <= 32
  EXPECT_TRUE(plan::batched_eigh(64, 4096));
  EXPECT_FALSE(plan::batched_eigh(4096, 1));
  EXPECT_EQ(plan::eigh_batch_chunk(64), ((int64_t{1} << 31) - 1) / 4096);
  EXPECT_GE(plan::eigh_batch_chunk(8) * 64, int64_t{10000} * 64);
  EXPECT_TRUE(plan::svd_direct(3, 5));
  EXPECT_FALSE(plan::svd_direct(5, 3));
}

// --- the layout identities of backend/cuda/lapack_*.cpp -------------------

TEST(LapackPlan, InverseOfTheBufferAsItIs) {
  const int n = 5;
  auto a = randn(n * n, 1);
  for (int i = 0; i < n; ++i) a[i * n + i] += n;
  auto w = a;  // read column-major: A^T
  std::vector<int> ipiv(n);
  ASSERT_EQ(LAPACKE_dgetrf(kCol, n, n, w.data(), n, ipiv.data()), 0);
  ASSERT_EQ(LAPACKE_dgetri(kCol, n, w.data(), n, ipiv.data()), 0);
  expect_near_vec(w, values_of(linalg::inv(mat(a, n, n), Device::cpu)), 1e-12,
                  "inv");
}

TEST(LapackPlan, SolveWithGetrsTransposed) {
  const int n = 4, k = 3;
  auto a = randn(n * n, 2);
  for (int i = 0; i < n; ++i) a[i * n + i] += n;
  auto b = randn(n * k, 3);
  auto w = a;
  std::vector<int> ipiv(n);
  ASSERT_EQ(LAPACKE_dgetrf(kCol, n, n, w.data(), n, ipiv.data()), 0);
  std::vector<double> x(n * k);  // b column-major (n, k)
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < k; ++c) x[r + c * n] = b[r * k + c];
  ASSERT_EQ(LAPACKE_dgetrs(kCol, 'T', n, k, w.data(), n, ipiv.data(),
                           x.data(), n),
            0);
  std::vector<double> got(n * k);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < k; ++c) got[r * k + c] = x[r + c * n];
  expect_near_vec(got,
                  values_of(linalg::solve(mat(a, n, n), mat(b, n, k),
                                          Device::cpu)),
                  1e-12, "solve");
}

TEST(LapackPlan, TriangularSolveFromTheRight) {
  // X A^T = B^T through column-major buffers: the row-major x solves
  // A x = b. Checked with trtrs on the explicit transposes.
  const int n = 4, k = 2;
  auto a = randn(n * n, 4);
  for (int i = 0; i < n; ++i) a[i * n + i] += n;
  auto b = randn(n * k, 5);
  for (bool upper : {false, true}) {
    auto want = values_of(linalg::solve_triangular(mat(a, n, n), mat(b, n, k),
                                                   upper, Device::cpu));
    // Y = X^T (k, n) with Y A^T = B^T  <=>  A Y^T = B: solve column-major
    // with trtrs on A itself ('N'), the triangle flipped for the buffer.
    std::vector<double> ac(n * n);
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < n; ++c) ac[r + c * n] = a[r * n + c];
    std::vector<double> x(n * k);
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < k; ++c) x[r + c * n] = b[r * k + c];
    ASSERT_EQ(LAPACKE_dtrtrs(kCol, upper ? 'U' : 'L', 'N', 'N', n, k,
                             ac.data(), n, x.data(), n),
              0);
    std::vector<double> got(n * k);
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < k; ++c) got[r * k + c] = x[r + c * n];
    expect_near_vec(got, want, 1e-12, upper ? "upper" : "lower");
  }
}

TEST(LapackPlan, CholeskyUpperOfTheBuffer) {
  const int n = 5;
  auto m = randn(n * n, 6);
  std::vector<double> a(n * n, 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      for (int l = 0; l < n; ++l) a[i * n + j] += m[i * n + l] * m[j * n + l];
      a[i * n + j] += i == j ? 1 : 0;
    }
  auto w = a;
  ASSERT_EQ(LAPACKE_dpotrf(kCol, 'U', n, w.data(), n), 0);
  for (int r = 0; r < n; ++r)
    for (int c = r + 1; c < n; ++c) w[r * n + c] = 0;  // zero_upper
  expect_near_vec(w, values_of(linalg::cholesky(mat(a, n, n), false,
                                                Device::cpu)),
                  1e-12, "cholesky");
}

TEST(LapackPlan, SvdOfTheTransposedView) {
  // gesvd of the buffer (A^T, column-major) gives Vt as U' and U as VT'
  // (svd_direct); the tall case transposes first. Compared through
  // U S Vt = A and |U|, |Vt| against the CPU (signs are free).
  for (auto [m, n] : {std::pair{3, 5}, std::pair{4, 4}, std::pair{5, 3}}) {
    auto a = randn(m * n, 7 + m);
    const int k = std::min(m, n);
    std::vector<double> s(k), u(m * m), vt(n * n), sup(k);
    if (plan::svd_direct(m, n)) {
      auto w = a;  // column-major (n, m)
      ASSERT_EQ(LAPACKE_dgesvd(kCol, 'A', 'A', n, m, w.data(), n, s.data(),
                               vt.data(), n, u.data(), m, sup.data()),
                0);
    } else {
      std::vector<double> w(m * n), uc(m * m), vc(n * n);
      for (int r = 0; r < m; ++r)
        for (int c = 0; c < n; ++c) w[r + c * m] = a[r * n + c];
      ASSERT_EQ(LAPACKE_dgesvd(kCol, 'A', 'A', m, n, w.data(), m, s.data(),
                               uc.data(), m, vc.data(), n, sup.data()),
                0);
      for (int r = 0; r < m; ++r)
        for (int c = 0; c < m; ++c) u[r * m + c] = uc[r + c * m];
      for (int r = 0; r < n; ++r)
        for (int c = 0; c < n; ++c) vt[r * n + c] = vc[r + c * n];
    }
    for (int r = 0; r < m; ++r) {
      for (int c = 0; c < n; ++c) {
        double v = 0;
        for (int j = 0; j < k; ++j) v += u[r * m + j] * s[j] * vt[j * n + c];
        EXPECT_NEAR(v, a[r * n + c], 1e-12) << m << "x" << n;
      }
    }
    auto f = linalg::svd(mat(a, m, n), true, Device::cpu);
    expect_near_vec(s, values_of(f[1]), 1e-12, "singular values");
    auto ucpu = values_of(f[0]);
    for (int r = 0; r < m; ++r)
      for (int j = 0; j < k; ++j)
        EXPECT_NEAR(std::abs(u[r * m + j]), std::abs(ucpu[r * m + j]), 1e-10);
  }
}

TEST(LapackPlan, EighWithTheOtherTriangle) {
  // Row-major lower is column-major upper: syevd with 'U' on the buffer,
  // vectors transposed back. Complex: the buffer is conj(A), vectors
  // conjugated back.
  const int n = 4;
  auto a = randn(n * n, 9);  // not symmetric: only one triangle is read
  for (bool upper : {false, true}) {
    auto w = a;
    std::vector<double> ev(n);
    ASSERT_EQ(LAPACKE_dsyevd(kCol, 'V', upper ? 'L' : 'U', n, w.data(), n,
                             ev.data()),
              0);
    auto [wc, vc] = linalg::eigh(mat(a, n, n), upper ? "U" : "L", Device::cpu);
    expect_near_vec(ev, values_of(wc), 1e-12, "eigenvalues");
    auto v = values_of(vc);
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < n; ++j)
        EXPECT_NEAR(std::abs(w[j * n + r]), std::abs(v[r * n + j]), 1e-10);
  }
  // complex64 Hermitian
  auto re = randn(n * n, 10), im = randn(n * n, 12);
  std::vector<std::complex<float>> c(n * n);
  for (int i = 0; i < n * n; ++i) c[i] = {float(re[i]), float(im[i])};
  auto buf = c;
  std::vector<float> ev(n);
  ASSERT_EQ(LAPACKE_cheevd(kCol, 'V', 'U', n,
                           reinterpret_cast<lapack_complex_float*>(buf.data()),
                           n, ev.data()),
            0);
  auto ca = array(reinterpret_cast<complex64_t*>(c.data()),
                  Shape{n, n}, complex64);
  auto [wc, vc] = linalg::eigh(ca, "L", Device::cpu);
  auto wv = to_vector<float>(wc);
  auto vv = to_vector<complex64_t>(vc);
  for (int j = 0; j < n; ++j) EXPECT_NEAR(ev[j], wv[j], 1e-4);
  // Column j of conj(transpose of the buffer) against the CPU's column j,
  // up to a phase: compare |<v_gpu, v_cpu>| = 1.
  for (int j = 0; j < n; ++j) {
    std::complex<float> dot = 0;
    for (int r = 0; r < n; ++r) {
      std::complex<float> g = std::conj(buf[r + j * n]);
      dot += std::conj(g) * std::complex<float>(vv[r * n + j]);
    }
    EXPECT_NEAR(std::abs(dot), 1.0f, 1e-4) << "vector " << j;
  }
}

TEST(LapackPlan, FormQMatchesOrgqrAndTheCpu) {
  // geqrf on the transposed buffer, then Q column by column as the batched
  // path's kernel forms it, against orgqr and the CPU primitive.
  for (auto [m, n] : {std::pair{6, 4}, std::pair{5, 5}, std::pair{8, 1}}) {
    const int k = std::min(m, n);
    auto a = randn(m * n, 30 + m);
    std::vector<double> w(m * n);
    for (int r = 0; r < m; ++r)
      for (int c = 0; c < n; ++c) w[r + c * m] = a[r * n + c];
    std::vector<double> tau(k);
    ASSERT_EQ(LAPACKE_dgeqrf(kCol, m, n, w.data(), m, tau.data()), 0);
    std::vector<double> q(m * k);
    for (int c = 0; c < k; ++c) {
      plan::form_q_column(w.data(), tau.data(), m, c, q.data(), k);
    }
    auto o = w;
    ASSERT_EQ(LAPACKE_dorgqr(kCol, m, k, k, o.data(), m, tau.data()), 0);
    for (int r = 0; r < m; ++r)
      for (int c = 0; c < k; ++c)
        EXPECT_NEAR(q[r * k + c], o[r + c * m], 1e-12) << m << "x" << n;
    auto [qc, rc] = linalg::qr(mat(a, m, n), Device::cpu);
    expect_near_vec(q, values_of(qc), 1e-12, "Q against the CPU");
    // R: the upper triangle of the factored buffer (extract_r).
    auto rv = values_of(rc);
    for (int r = 0; r < k; ++r)
      for (int c = 0; c < n; ++c)
        EXPECT_NEAR(c >= r ? w[r + c * m] : 0.0, rv[r * n + c], 1e-12);
  }
}

TEST(LapackPlan, ColumnMajorMatrices) {
  auto strides_of = [](const array& x) { return x.strides(); };
  auto a = zeros({3, 4, 4}, float32, Device::cpu);
  auto t = swapaxes(a, -1, -2, Device::cpu);
  t.eval();
  EXPECT_TRUE(plan::column_major_matrices(t.shape(), strides_of(t),
                                          t.flags().contiguous));
  a.eval();
  EXPECT_FALSE(plan::column_major_matrices(a.shape(), strides_of(a),
                                           a.flags().contiguous));
  // Batch dims moved, or broadcast: not one packed batch.
  auto p = transpose(zeros({4, 3, 4}, float32, Device::cpu), {1, 2, 0},
                     Device::cpu);
  p.eval();
  EXPECT_FALSE(plan::column_major_matrices(p.shape(), strides_of(p),
                                           p.flags().contiguous));
  auto b = broadcast_to(swapaxes(zeros({4, 4}, float32, Device::cpu), 0, 1,
                                 Device::cpu),
                        {2, 4, 4}, Device::cpu);
  b.eval();
  EXPECT_FALSE(plan::column_major_matrices(b.shape(), strides_of(b),
                                           b.flags().contiguous));
  EXPECT_TRUE(plan::column_major_matrices({4, 4}, {1, 4}, true));
  EXPECT_TRUE(plan::column_major_matrices({1, 4, 4}, {99, 1, 4}, true));
}
