// CPU kernels of the LAPACK primitives: each batch matrix is copied into a
// row-major scratch (LAPACKE's row-major interface handles the layout), so
// inputs of any strides work and LAPACK may overwrite its operands. The
// batch runs over the thread pool; a failure (singular matrix, no
// convergence) is reported after the batch by throwing from the kernel,
// which eval() carries to its caller.
//
// A matrix holding a NaN or an infinity is never handed to LAPACK: its
// outputs are NaN (an LU's pivots the identity). LAPACKE rejects NaN input
// as a bad argument (a misleading error), and the iterative drivers
// (gesdd, syevd, geev) can loop forever on an infinity (found by the
// fuzzer: pinv of a matrix with one inf hung).
#include <lapacke.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/thread_pool.h"
#include "fluxion/ops/linalg_lapack.h"

namespace fluxion::linalg {

namespace {

constexpr int kRow = LAPACK_ROW_MAJOR;

// Typed LAPACKE entry points.
int getrf(int m, int n, float* a, int* ipiv) {
  return LAPACKE_sgetrf(kRow, m, n, a, n, ipiv);
}
int getrf(int m, int n, double* a, int* ipiv) {
  return LAPACKE_dgetrf(kRow, m, n, a, n, ipiv);
}
int getri(int n, float* a, const int* ipiv) {
  return LAPACKE_sgetri(kRow, n, a, n, ipiv);
}
int getri(int n, double* a, const int* ipiv) {
  return LAPACKE_dgetri(kRow, n, a, n, ipiv);
}
int gesv(int n, int k, double* a, int* ipiv, double* b) {
  return LAPACKE_dgesv(kRow, n, k, a, n, ipiv, b, k);
}
int trtrs(char uplo, int n, int k, const float* a, float* b) {
  return LAPACKE_strtrs(kRow, uplo, 'N', 'N', n, k, a, n, b, k);
}
int trtrs(char uplo, int n, int k, const double* a, double* b) {
  return LAPACKE_dtrtrs(kRow, uplo, 'N', 'N', n, k, a, n, b, k);
}
int potrf(int n, float* a) { return LAPACKE_spotrf(kRow, 'L', n, a, n); }
int potrf(int n, double* a) { return LAPACKE_dpotrf(kRow, 'L', n, a, n); }
int geqrf(int m, int n, float* a, float* tau) {
  return LAPACKE_sgeqrf(kRow, m, n, a, n, tau);
}
int geqrf(int m, int n, double* a, double* tau) {
  return LAPACKE_dgeqrf(kRow, m, n, a, n, tau);
}
int orgqr(int m, int k, int lda, float* a, const float* tau) {
  return LAPACKE_sorgqr(kRow, m, k, k, a, lda, tau);
}
int orgqr(int m, int k, int lda, double* a, const double* tau) {
  return LAPACKE_dorgqr(kRow, m, k, k, a, lda, tau);
}
int gesdd(char jobz, int m, int n, float* a, float* s, float* u, float* vt) {
  return LAPACKE_sgesdd(kRow, jobz, m, n, a, n, s, u, m, vt, n);
}
int gesdd(char jobz, int m, int n, double* a, double* s, double* u,
          double* vt) {
  return LAPACKE_dgesdd(kRow, jobz, m, n, a, n, s, u, m, vt, n);
}
int syevd(char jobz, char uplo, int n, float* a, float* w) {
  return LAPACKE_ssyevd(kRow, jobz, uplo, n, a, n, w);
}
int syevd(char jobz, char uplo, int n, double* a, double* w) {
  return LAPACKE_dsyevd(kRow, jobz, uplo, n, a, n, w);
}

// Complex64 (row-major std::complex<float> matches lapack_complex_float).
lapack_complex_float* lc(complex64_t* p) {
  return reinterpret_cast<lapack_complex_float*>(p);
}
int gesdd(char jobz, int m, int n, complex64_t* a, float* s, complex64_t* u,
          complex64_t* vt) {
  return LAPACKE_cgesdd(kRow, jobz, m, n, lc(a), n, s, lc(u), m, lc(vt), n);
}
int heevd(char jobz, char uplo, int n, complex64_t* a, float* w) {
  return LAPACKE_cheevd(kRow, jobz, uplo, n, lc(a), n, w);
}
int geev(int n, complex64_t* a, complex64_t* w, complex64_t* vr, char jobvr) {
  lapack_complex_float vl;
  return LAPACKE_cgeev(kRow, 'N', jobvr, n, lc(a), n, lc(w), &vl, 1, lc(vr), n);
}

int geev(int n, float* a, float* wr, float* wi, float* vr, char jobvr) {
  float vl;
  return LAPACKE_sgeev(kRow, 'N', jobvr, n, a, n, wr, wi, &vl, 1, vr, n);
}
int geev(int n, double* a, double* wr, double* wi, double* vr, char jobvr) {
  double vl;
  return LAPACKE_dgeev(kRow, 'N', jobvr, n, a, n, wr, wi, &vl, 1, vr, n);
}

// True when the n values at p are all finite (both parts of complex ones).
template <typename T>
bool all_finite(const T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, complex64_t>) {
      if (!std::isfinite(p[i].real()) || !std::isfinite(p[i].imag())) {
        return false;
      }
    } else if (!std::isfinite(p[i])) {
      return false;
    }
  }
  return true;
}

template <typename T>
void fill_nan(T* p, int64_t n) {
  if (p == nullptr) {
    return;
  }
  if constexpr (std::is_same_v<T, complex64_t>) {
    constexpr float q = std::numeric_limits<float>::quiet_NaN();
    std::fill(p, p + n, complex64_t(q, q));
  } else {
    std::fill(p, p + n, std::numeric_limits<T>::quiet_NaN());
  }
}

// The inputs as row-major batches of matrices (copies of views).
array contiguous(const array& x) { return cpu::ensure_row_contiguous(x); }

void allocate(std::vector<array>& outputs) {
  for (auto& o : outputs) {
    o.set_data(o.nbytes());
  }
}

int64_t batch_count(const array& x) {
  int64_t m = static_cast<int64_t>(x.shape(-2)) * x.shape(-1);
  return m == 0 ? 0 : static_cast<int64_t>(x.size()) / m;
}

// Run f(i) for each batch matrix i over the pool; f returns LAPACK's info.
// A positive info (the matrix failed) raises `failure` after the batch; a
// negative one is an argument error, a bug here.
template <typename F>
void run_batch(int64_t batch, int64_t n, const char* op,
               const std::string& failure, F&& f) {
  std::atomic<int> worst{0};
  int64_t cost = std::max<int64_t>(n * n * n, 1);
  int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / cost);
  cpu::parallel_for(batch, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int info = f(i);
      if (info != 0) {
        int expected = 0;
        worst.compare_exchange_strong(expected, info);
      }
    }
  });
  int info = worst.load();
  if (info > 0) {
    throw std::runtime_error(std::string("[linalg::") + op + "] " + failure);
  }
  if (info < 0) {
    throw std::runtime_error(std::string("[linalg::") + op +
                             "] LAPACK rejected argument " +
                             std::to_string(-info) + ".");
  }
}

template <typename F>
void real_dispatch(Dtype t, const char* op, F&& f) {
  dispatch<TypeList<float, double>>(t, op, std::forward<F>(f));
}

}  // namespace

void Inverse::eval_cpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  allocate(outputs);
  auto a = contiguous(inputs[0]);
  int n = a.shape(-1);
  auto& out = outputs[0];
  real_dispatch(a.dtype(), "linalg::inv", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = a.data<T>();
    T* dst = out.data<T>();
    int64_t nn = int64_t{n} * n;
    run_batch(batch_count(a), n, "inv", "Matrix is singular.", [&](int64_t i) {
      T* m = dst + i * nn;
      if (!all_finite(src + i * nn, nn)) {
        fill_nan(m, nn);
        return 0;
      }
      std::memcpy(m, src + i * nn, nn * sizeof(T));
      std::vector<int> ipiv(n);
      int info = getrf(n, n, m, ipiv.data());
      return info != 0 ? info : getri(n, m, ipiv.data());
    });
  });
}

void Solve::eval_cpu(const std::vector<array>& inputs,
                     std::vector<array>& outputs) {
  allocate(outputs);
  auto a = contiguous(inputs[0]);
  auto b = contiguous(inputs[1]);
  int n = a.shape(-1), k = b.shape(-1);
  auto& out = outputs[0];
  real_dispatch(a.dtype(), "linalg::solve", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* dst = out.data<T>();
    int64_t nn = int64_t{n} * n, nk = int64_t{n} * k;
    // float32 systems are factored in double and rounded back, as NumPy
    // does: a float32 LU loses about cond(A) * 2^-24 relatively, which for
    // a random 1000 x 1000 matrix (cond ~ 1e5) is ~1e-2 in x. A system with
    // NaN or inf never reaches LAPACK (its NaN check rejects it): x is NaN.
    run_batch(
        batch_count(a), n, "solve", "Matrix is singular.", [&](int64_t i) {
          if (!all_finite(pa + i * nn, nn) || !all_finite(pb + i * nk, nk)) {
            fill_nan(dst + i * nk, nk);
            return 0;
          }
          std::vector<double> m(pa + i * nn, pa + (i + 1) * nn);
          std::vector<double> x(pb + i * nk, pb + (i + 1) * nk);
          std::vector<int> ipiv(n);
          int info = k == 0 ? 0 : gesv(n, k, m.data(), ipiv.data(), x.data());
          std::transform(x.begin(), x.end(), dst + i * nk,
                         [](double v) { return static_cast<T>(v); });
          return info;
        });
  });
}

void SolveTriangular::eval_cpu(const std::vector<array>& inputs,
                               std::vector<array>& outputs) {
  allocate(outputs);
  auto a = contiguous(inputs[0]);
  auto b = contiguous(inputs[1]);
  int n = a.shape(-1), k = b.shape(-1);
  auto& out = outputs[0];
  char uplo = upper_ ? 'U' : 'L';
  real_dispatch(a.dtype(), "linalg::solve_triangular", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* dst = out.data<T>();
    int64_t nn = int64_t{n} * n, nk = int64_t{n} * k;
    run_batch(
        batch_count(a), n, "solve_triangular", "Matrix is singular.",
        [&](int64_t i) {
          T* x = dst + i * nk;
          if (!all_finite(pa + i * nn, nn) || !all_finite(pb + i * nk, nk)) {
            fill_nan(x, nk);
            return 0;
          }
          std::memcpy(x, pb + i * nk, nk * sizeof(T));
          return k == 0 ? 0 : trtrs(uplo, n, k, pa + i * nn, x);
        });
  });
}

void Cholesky::eval_cpu(const std::vector<array>& inputs,
                        std::vector<array>& outputs) {
  allocate(outputs);
  auto a = contiguous(inputs[0]);
  int n = a.shape(-1);
  auto& out = outputs[0];
  real_dispatch(a.dtype(), "linalg::cholesky", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = a.data<T>();
    T* dst = out.data<T>();
    int64_t nn = int64_t{n} * n;
    run_batch(batch_count(a), n, "cholesky", "Matrix is not positive definite.",
              [&](int64_t i) {
                T* m = dst + i * nn;
                if (!all_finite(src + i * nn, nn)) {
                  fill_nan(m, nn);
                  return 0;
                }
                std::memcpy(m, src + i * nn, nn * sizeof(T));
                int info = potrf(n, m);
                // potrf leaves the upper triangle as it was.
                for (int r = 0; r < n; ++r) {
                  std::fill(m + int64_t{r} * n + r + 1, m + int64_t{r + 1} * n,
                            T(0));
                }
                return info;
              });
  });
}

void QRF::eval_cpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  allocate(outputs);
  auto a = contiguous(inputs[0]);
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  real_dispatch(a.dtype(), "linalg::qr", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = a.data<T>();
    T* pq = outputs[0].data<T>();
    T* pr = outputs[1].data<T>();
    int64_t mn = int64_t{m} * n;
    run_batch(
        batch_count(a), std::max(m, n), "qr", "QR failed.", [&](int64_t i) {
          if (!all_finite(src + i * mn, mn)) {
            fill_nan(pq + i * int64_t{m} * k, int64_t{m} * k);
            fill_nan(pr + i * int64_t{k} * n, int64_t{k} * n);
            return 0;
          }
          std::vector<T> w(src + i * mn, src + (i + 1) * mn);
          std::vector<T> tau(std::max(k, 1));
          int info = geqrf(m, n, w.data(), tau.data());
          if (info != 0) {
            return info;
          }
          T* r = pr + i * int64_t{k} * n;
          for (int row = 0; row < k; ++row) {
            for (int col = 0; col < n; ++col) {
              r[int64_t{row} * n + col] =
                  col >= row ? w[int64_t{row} * n + col] : T(0);
            }
          }
          if (k == 0) {
            return 0;
          }
          info = orgqr(m, k, n, w.data(), tau.data());
          T* q = pq + i * int64_t{m} * k;
          for (int row = 0; row < m; ++row) {
            std::copy(w.data() + int64_t{row} * n,
                      w.data() + int64_t{row} * n + k, q + int64_t{row} * k);
          }
          return info;
        });
  });
}

namespace {

void svd_complex(const array& a, std::vector<array>& outputs, bool uv) {
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  const complex64_t* src = a.data<complex64_t>();
  complex64_t* pu = uv ? outputs[0].data<complex64_t>() : nullptr;
  float* ps = outputs[uv ? 1 : 0].data<float>();
  complex64_t* pv = uv ? outputs[2].data<complex64_t>() : nullptr;
  int64_t mn = int64_t{m} * n;
  int64_t batch = m == 0 || n == 0 ? 0 : static_cast<int64_t>(a.size()) / mn;
  run_batch(batch, std::max(m, n), "svd", "SVD did not converge.",
            [&](int64_t i) {
              float* s = ps + i * k;
              if (!all_finite(src + i * mn, mn)) {
                fill_nan(s, k);
                if (uv) {
                  fill_nan(pu + i * int64_t{m} * m, int64_t{m} * m);
                  fill_nan(pv + i * int64_t{n} * n, int64_t{n} * n);
                }
                return 0;
              }
              std::vector<complex64_t> w(src + i * mn, src + (i + 1) * mn);
              if (!uv) {
                complex64_t du, dv;
                return gesdd('N', m, n, w.data(), s, &du, &dv);
              }
              return gesdd('A', m, n, w.data(), s, pu + i * int64_t{m} * m,
                           pv + i * int64_t{n} * n);
            });
  if (uv && batch == 0) {
    int64_t nb = 1;
    for (int d = 0; d < a.ndim() - 2; ++d) {
      nb *= a.shape(d);
    }
    auto identities = [nb](complex64_t* p, int64_t d) {
      for (int64_t i = 0; i < nb; ++i) {
        std::fill(p + i * d * d, p + (i + 1) * d * d, complex64_t(0));
        for (int64_t j = 0; j < d; ++j) {
          p[i * d * d + j * d + j] = complex64_t(1);
        }
      }
    };
    identities(pu, m);
    identities(pv, n);
  }
}

}  // namespace

void SVD::eval_cpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  allocate(outputs);
  auto a = contiguous(inputs[0]);
  if (a.dtype() == complex64) {
    svd_complex(a, outputs, compute_uv_);
    return;
  }
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  real_dispatch(a.dtype(), "linalg::svd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = a.data<T>();
    T* pu = compute_uv_ ? outputs[0].data<T>() : nullptr;
    T* ps = outputs[compute_uv_ ? 1 : 0].data<T>();
    T* pv = compute_uv_ ? outputs[2].data<T>() : nullptr;
    int64_t mn = int64_t{m} * n;
    int64_t batch = m == 0 || n == 0 ? 0 : static_cast<int64_t>(a.size()) / mn;
    run_batch(batch, std::max(m, n), "svd", "SVD did not converge.",
              [&](int64_t i) {
                T* s = ps + i * k;
                if (!all_finite(src + i * mn, mn)) {
                  fill_nan(s, k);
                  if (compute_uv_) {
                    fill_nan(pu + i * int64_t{m} * m, int64_t{m} * m);
                    fill_nan(pv + i * int64_t{n} * n, int64_t{n} * n);
                  }
                  return 0;
                }
                std::vector<T> w(src + i * mn, src + (i + 1) * mn);
                if (!compute_uv_) {
                  T du, dv;
                  return gesdd('N', m, n, w.data(), s, &du, &dv);
                }
                return gesdd('A', m, n, w.data(), s, pu + i * int64_t{m} * m,
                             pv + i * int64_t{n} * n);
              });
    // Empty matrices: U and Vt are identities.
    if (compute_uv_ && batch == 0) {
      int64_t nb = 1;
      for (int d = 0; d < a.ndim() - 2; ++d) {
        nb *= a.shape(d);
      }
      auto identities = [nb](T* p, int64_t d) {
        for (int64_t i = 0; i < nb; ++i) {
          std::fill(p + i * d * d, p + (i + 1) * d * d, T(0));
          for (int64_t j = 0; j < d; ++j) {
            p[i * d * d + j * d + j] = T(1);
          }
        }
      };
      identities(pu, m);
      identities(pv, n);
    }
  });
}

void Eigh::eval_cpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  allocate(outputs);
  auto a = contiguous(inputs[0]);
  int n = a.shape(-1);
  char uplo = upper_ ? 'U' : 'L';
  if (a.dtype() == complex64) {
    // Hermitian: real eigenvalues, complex eigenvectors.
    const complex64_t* src = a.data<complex64_t>();
    float* pw = outputs[0].data<float>();
    complex64_t* pv = vectors_ ? outputs[1].data<complex64_t>() : nullptr;
    int64_t nn = int64_t{n} * n;
    run_batch(batch_count(a), n, "eigh", "Eigenvalues did not converge.",
              [&](int64_t i) {
                if (!all_finite(src + i * nn, nn)) {
                  fill_nan(pw + i * n, n);
                  fill_nan(vectors_ ? pv + i * nn : nullptr, nn);
                  return 0;
                }
                if (vectors_) {
                  complex64_t* v = pv + i * nn;
                  std::copy(src + i * nn, src + (i + 1) * nn, v);
                  return heevd('V', uplo, n, v, pw + i * n);
                }
                std::vector<complex64_t> w(src + i * nn, src + (i + 1) * nn);
                return heevd('N', uplo, n, w.data(), pw + i * n);
              });
    return;
  }
  real_dispatch(a.dtype(), "linalg::eigh", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = a.data<T>();
    T* pw = outputs[0].data<T>();
    T* pv = vectors_ ? outputs[1].data<T>() : nullptr;
    int64_t nn = int64_t{n} * n;
    run_batch(batch_count(a), n, "eigh", "Eigenvalues did not converge.",
              [&](int64_t i) {
                if (!all_finite(src + i * nn, nn)) {
                  fill_nan(pw + i * n, n);
                  fill_nan(vectors_ ? pv + i * nn : nullptr, nn);
                  return 0;
                }
                if (vectors_) {
                  T* v = pv + i * nn;
                  std::memcpy(v, src + i * nn, nn * sizeof(T));
                  return syevd('V', uplo, n, v, pw + i * n);
                }
                std::vector<T> w(src + i * nn, src + (i + 1) * nn);
                return syevd('N', uplo, n, w.data(), pw + i * n);
              });
  });
}

void Eig::eval_cpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  allocate(outputs);
  auto a = contiguous(inputs[0]);
  int n = a.shape(-1);
  complex64_t* pw = outputs[0].data<complex64_t>();
  complex64_t* pv = vectors_ ? outputs[1].data<complex64_t>() : nullptr;
  if (a.dtype() == complex64) {
    const complex64_t* src = a.data<complex64_t>();
    int64_t nn = int64_t{n} * n;
    run_batch(batch_count(a), n, "eig", "Eigenvalues did not converge.",
              [&](int64_t i) {
                if (!all_finite(src + i * nn, nn)) {
                  fill_nan(pw + i * n, n);
                  fill_nan(vectors_ ? pv + i * nn : nullptr, nn);
                  return 0;
                }
                std::vector<complex64_t> m(src + i * nn, src + (i + 1) * nn);
                std::vector<complex64_t> vr(vectors_ ? nn : 1);
                int info = geev(n, m.data(), pw + i * n, vr.data(),
                                vectors_ ? 'V' : 'N');
                if (info == 0 && vectors_) {
                  std::copy(vr.begin(), vr.end(), pv + i * nn);
                }
                return info;
              });
    return;
  }
  real_dispatch(a.dtype(), "linalg::eig", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = a.data<T>();
    int64_t nn = int64_t{n} * n;
    run_batch(batch_count(a), n, "eig", "Eigenvalues did not converge.",
              [&](int64_t i) {
                if (!all_finite(src + i * nn, nn)) {
                  fill_nan(pw + i * n, n);
                  fill_nan(vectors_ ? pv + i * nn : nullptr, nn);
                  return 0;
                }
                std::vector<T> m(src + i * nn, src + (i + 1) * nn);
                std::vector<T> wr(n), wi(n), vr(vectors_ ? nn : 1);
                int info = geev(n, m.data(), wr.data(), wi.data(), vr.data(),
                                vectors_ ? 'V' : 'N');
                if (info != 0) {
                  return info;
                }
                complex64_t* w = pw + i * n;
                for (int j = 0; j < n; ++j) {
                  w[j] = complex64_t(static_cast<float>(wr[j]),
                                     static_cast<float>(wi[j]));
                }
                if (!vectors_) {
                  return 0;
                }
                // A complex pair (j, j + 1) stores the real and imaginary
                // parts of the first vector; the second is its conjugate.
                complex64_t* v = pv + i * nn;
                for (int j = 0; j < n; ++j) {
                  bool pair = wi[j] != 0 && j + 1 < n;
                  for (int r = 0; r < n; ++r) {
                    auto re = static_cast<float>(vr[int64_t{r} * n + j]);
                    auto im =
                        pair ? static_cast<float>(vr[int64_t{r} * n + j + 1])
                             : 0.0f;
                    v[int64_t{r} * n + j] = complex64_t(re, im);
                    if (pair) {
                      v[int64_t{r} * n + j + 1] = complex64_t(re, -im);
                    }
                  }
                  j += pair ? 1 : 0;
                }
                return 0;
              });
  });
}

void LUF::eval_cpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  allocate(outputs);
  auto a = contiguous(inputs[0]);
  int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  uint32_t* piv = outputs[1].data<uint32_t>();
  uint32_t* perm = outputs[2].data<uint32_t>();
  real_dispatch(a.dtype(), "linalg::lu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = a.data<T>();
    T* dst = outputs[0].data<T>();
    int64_t mn = int64_t{m} * n;
    if (mn == 0) {  // no columns: the identity permutation
      for (size_t i = 0; i < outputs[2].size(); ++i) {
        perm[i] = static_cast<uint32_t>(i % std::max(m, 1));
      }
    }
    // A zero pivot (info > 0: a singular matrix) still gives a valid
    // factorization.
    run_batch(batch_count(a), std::max(m, n), "lu", "", [&](int64_t i) {
      T* f = dst + i * mn;
      std::vector<int> ipiv(std::max(k, 1));
      int info = 0;
      if (!all_finite(src + i * mn, mn)) {
        fill_nan(f, mn);
        std::iota(ipiv.begin(), ipiv.end(), 1);  // no row exchanges
      } else {
        std::memcpy(f, src + i * mn, mn * sizeof(T));
        info = getrf(m, n, f, ipiv.data());
      }
      std::vector<uint32_t> rows(m);
      for (int r = 0; r < m; ++r) {
        rows[r] = r;
      }
      for (int j = 0; j < k; ++j) {
        piv[i * k + j] = static_cast<uint32_t>(ipiv[j] - 1);
        std::swap(rows[j], rows[ipiv[j] - 1]);
      }
      // rows[r] is the input row at row r of L U; p is its inverse.
      for (int r = 0; r < m; ++r) {
        perm[i * m + rows[r]] = static_cast<uint32_t>(r);
      }
      return info > 0 ? 0 : info;
    });
  });
}

}  // namespace fluxion::linalg
