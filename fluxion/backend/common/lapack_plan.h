// How the GPU runs the LAPACK primitives (ops/linalg_lapack.h) through
// cuSOLVER and cuBLAS: which library path takes a batch, and the index
// arithmetic that turns the libraries' column-major results into the CPU
// kernel's row-major outputs. Plain code, built in every configuration, so
// tests/cpp/test_lapack_plan.cpp checks it against the CPU's conventions
// (backend/cpu/lapack.cpp) without a GPU; backend/cuda/lapack_*.cpp make
// the calls and backend/cuda/lapack_kernels.cu runs the per-element
// helpers below on the device.
//
// Layout. The primitives' matrices are row-major; the libraries' are
// column-major, and a row-major (M, N) buffer read column-major is the
// transpose (N, M). Where the transpose's factorization gives the answer
// (inv(A^T) = inv(A)^T, a solve through getrs with op T, the symmetric
// eigenproblem, the SVD of a wide matrix, trsm from the right) the buffer
// goes to the library as it is; elsewhere (LU and QR, whose pivoting and
// reflectors are by rows; the SVD of a tall matrix; eig, whose right
// eigenvectors would become left ones) a kernel transposes it first.
#pragma once

#include <cstdint>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/backend/common/math.h"

namespace fluxion::lapack_plan {

// --- which path takes a batch of `batch` matrices ------------------------
//
// The batched entry points (cuBLAS's getrfBatched / getrsBatched /
// getriBatched / trsmBatched / geqrfBatched, cuSOLVER's potrfBatched,
// syevBatched and gesvdjBatched) run a whole batch in a few launches but
// are written for small matrices: past a size each matrix is better served
// by the blocked 64-bit API (Xgetrf, Xpotrf, Xgeqrf, Xsyevd, Xgesvd), one
// call per matrix. One matrix always takes the blocked API.
constexpr int64_t kBatchedMaxN = 128;  // LU, Cholesky, QR, triangular solve
constexpr int64_t kEighBatchedMaxN = 64;  // syevBatched
constexpr int64_t kSvdBatchedMaxN = 32;   // gesvdjBatched's limit

inline bool batched_lu(int64_t m, int64_t n, int64_t batch) {
  // getrfBatched factors square matrices only.
  return batch > 1 && m == n && n <= kBatchedMaxN;
}
inline bool batched_cholesky(int64_t n, int64_t batch) {
  return batch > 1 && n <= kBatchedMaxN;
}
inline bool batched_qr(int64_t m, int64_t n, int64_t batch) {
  // geqrfBatched with m >= n (a wide batch is looped); Q is formed by our
  // own kernel (no batched orgqr), O(m n^2) per thread-column.
  return batch > 1 && m >= n && m <= kBatchedMaxN;
}
inline bool batched_trsm(int64_t n, int64_t batch) {
  return batch > 1 && n <= kBatchedMaxN;
}
inline bool batched_eigh(int64_t n, int64_t batch) {
  return batch > 1 && n <= kEighBatchedMaxN;
}
// syevBatched's limit: n * lda * batch < 2^31 per call.
inline int64_t eigh_batch_chunk(int64_t n) {
  const int64_t per = n * n > 0 ? n * n : 1;
  const int64_t c = ((int64_t{1} << 31) - 1) / per;
  return c > 0 ? c : 1;
}
inline bool batched_svd(int64_t m, int64_t n, int64_t batch) {
  return batch > 1 && m <= kSvdBatchedMaxN && n <= kSvdBatchedMaxN;
}

// The SVD of a row-major (M, N) matrix. With N >= M the buffer read
// column-major is A^T (N, M), tall, which gesvd takes as it is:
// A^T = U' S V'^T gives A = V' S U'^T, and gesvd's outputs, read back
// row-major, are already the primitive's: its VT' (M, M) column-major is
// V' row-major = U, and its U' (N, N) column-major is U'^T row-major = Vt.
// With M > N (tall A) gesvd (m >= n only) needs A itself: the input is
// transposed first and both factors transposed back.
inline bool svd_direct(int64_t m, int64_t n) { return n >= m; }

// True when `shape` (..., n, n) with `strides` is a batch of column-major
// matrices packed one after the other (the transposed view of a
// row-contiguous batch: strides (..., n * n, 1, n)), which the libraries
// can read in place with op T. `contiguous`: the array's data is packed
// (no broadcast batch dims).
inline bool column_major_matrices(const Shape& shape, const Strides& strides,
                                  bool contiguous) {
  const size_t nd = shape.size();
  if (nd < 2 || !contiguous) {
    return false;
  }
  const int64_t n = shape[nd - 1];
  if (shape[nd - 2] != n || n < 2 || strides[nd - 2] != 1 ||
      strides[nd - 1] != n) {
    return false;
  }
  int64_t expect = n * n;
  for (size_t d = nd - 2; d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expect) {
      return false;
    }
    expect *= shape[d];
  }
  return true;
}

// --- pivots -------------------------------------------------------------

// getrf's pivots (1-based: row j was swapped with row ipiv[j] - 1 at step
// j, j < k) as the primitive's permutation: perm[r] is the row of the
// factored matrix that input row r ends up at (the CPU's p, the inverse of
// the row order the swaps make). Row r's position is followed through the
// swaps, so each row is computed alone (one device thread each).
template <typename I>
FLUXION_HOST_DEVICE inline int64_t lu_row_position(const I* ipiv, int64_t k,
                                                   int64_t r) {
  int64_t pos = r;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t p = static_cast<int64_t>(ipiv[j]) - 1;
    if (pos == j) {
      pos = p;
    } else if (pos == p) {
      pos = j;
    }
  }
  return pos;
}

// --- Q of a QR from its reflectors ------------------------------------------

// Column c of Q (m, k), row-major with leading dimension ldq, from geqrf's
// column-major (m, n) result `a` (leading dimension m: reflector j is 1 at
// row j and a[i + j * m] below it) and `tau`: Q e_c = H_0 ... H_{k-1} e_c
// with H_j = I - tau_j v_j v_j^T. The reflectors after c leave e_c alone
// (v_j is zero above row j > c), so the product starts at H_c. One device
// thread per column (the batched path, where cuSOLVER has no orgqr).
template <typename T>
FLUXION_HOST_DEVICE inline void form_q_column(const T* a, const T* tau,
                                              int64_t m, int64_t c, T* q,
                                              int64_t ldq) {
  for (int64_t i = 0; i < m; ++i) {
    q[i * ldq + c] = T(i == c ? 1 : 0);
  }
  for (int64_t j = c; j >= 0; --j) {
    T s = q[j * ldq + c];
    for (int64_t i = j + 1; i < m; ++i) {
      s += a[i + j * m] * q[i * ldq + c];
    }
    s *= tau[j];
    q[j * ldq + c] -= s;
    for (int64_t i = j + 1; i < m; ++i) {
      q[i * ldq + c] -= s * a[i + j * m];
    }
  }
}

// --- eig of a real matrix -------------------------------------------------

// geev's real output for a real matrix: eigenvalues (wr[j], wi[j]); a
// complex pair (j, j + 1) has wi[j] != 0 and stores the first vector's
// real part in column j of VR and its imaginary part in column j + 1, the
// second vector being the conjugate. Each column's role, by the CPU's
// left-to-right scan (a pair starts at a nonzero wi that is not already
// the second of a pair): 0 a real vector, 1 the first of a pair, 2 the
// second. One pass per matrix (one device thread).
template <typename T>
FLUXION_HOST_DEVICE inline void eig_pair_roles(const T* wi, int64_t n,
                                               int* roles) {
  for (int64_t c = 0; c < n; ++c) {
    const bool pair = wi[c] != T(0) && c + 1 < n;
    roles[c] = pair ? 1 : 0;
    if (pair) {
      roles[c + 1] = 2;
      ++c;
    }
  }
}

// Element (r, j) of the complex eigenvector matrix (row-major output) from
// VR, column-major with leading dimension n, given column j's role.
template <typename T>
FLUXION_HOST_DEVICE inline void eig_vector_element(const T* vr, int64_t n,
                                                   int64_t r, int64_t j,
                                                   int role, T& re, T& im) {
  if (role == 0) {
    re = vr[r + j * n];
    im = T(0);
  } else if (role == 1) {
    re = vr[r + j * n];
    im = vr[r + (j + 1) * n];
  } else {
    re = vr[r + (j - 1) * n];
    im = -vr[r + j * n];
  }
}

}  // namespace fluxion::lapack_plan
