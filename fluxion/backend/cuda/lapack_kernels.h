// The small kernels around the cuSOLVER / cuBLAS calls of the LAPACK
// primitives (backend/cuda/lapack_*.cpp): layout changes, the CPU's
// non-finite rule, outputs the libraries do not produce in the CPU's form,
// and the check of their info arrays. Launched on the current stream;
// pointers are device pointers to `batch` matrices stored one after the
// other; `t` is float32, float64 or complex64 unless said otherwise.
//
// The CPU never hands a matrix holding a NaN or an infinity to LAPACK: its
// outputs are NaN (an LU's pivots the identity). The GPU keeps that rule
// without a host round trip: `copy_matrices` flags such matrices in
// `bad` (one int per matrix), `identity_where` replaces them in the
// library's working copy by an identity (which every routine factors
// without error or iteration: cuSOLVER's iterative drivers are never fed
// an infinity), and `nan_where` overwrites their outputs afterwards;
// `check_info` ignores them.
#pragma once

#include <cstdint>

#include "fluxion/backend/cuda/cuda.h"

namespace fluxion::cu::lapack {

// dst[b] = src[b] for row-major (rows, cols) matrices, converting from
// dtype `st` to `dt` (float32 <-> float64, or complex64 to itself); with
// `transpose` dst[b] is the (cols, rows) transpose (so src read
// column-major, or src written column-major), conjugated when `conj`.
// When `bad` is given, bad[b] = 1 for a matrix with a non-finite element
// (never cleared: several calls may flag into one array).
void copy_matrices(const void* src, Dtype st, void* dst, Dtype dt,
                   int64_t batch, int64_t rows, int64_t cols, bool transpose,
                   bool conj, int* bad);

// bad[b] = 1 for matrix b (of `size` elements) with a non-finite element.
void flag_nonfinite(const void* src, Dtype t, int64_t batch, int64_t size,
                    int* bad);

// Matrices b with bad[b] become (rows, cols) identities (any storage
// order: a unit diagonal).
void identity_where(void* dst, Dtype t, int64_t batch, int64_t rows,
                    int64_t cols, const int* bad);
// Every matrix a (rows, cols) identity (bad == null above).
void identity(void* dst, Dtype t, int64_t batch, int64_t rows, int64_t cols);

// Matrices b (of `size` elements) with bad[b] become NaN (complex: both
// parts).
void nan_where(void* dst, Dtype t, int64_t batch, int64_t size,
               const int* bad);

// Row-major (n, n) matrices: the strictly upper triangle set to 0 (the
// triangle potrf leaves as it was).
void zero_upper(void* dst, Dtype t, int64_t batch, int64_t n);

// R (k, n) row-major from geqrf's column-major (m, n) result (leading
// dimension m): its upper triangle, zeros below.
void extract_r(const void* w, void* r, Dtype t, int64_t batch, int64_t m,
               int64_t n, int64_t k);

// Q (m, k) row-major from geqrf's reflectors (column-major (m, n) `w`,
// leading dimension m, k <= n) and `tau` (k per matrix): Q = H_0 ... H_{k-1}
// applied to the first k columns of the identity, one thread per column of
// Q (the batched path's orgqr; real dtypes).
void form_q(const void* w, const void* tau, void* q, Dtype t, int64_t batch,
            int64_t m, int64_t n, int64_t k);

// The LU's pivots and permutation (lapack_plan.h) from getrf's 1-based
// pivots (`ipiv64` int64_t, else `ipiv32` int, k per matrix): piv (k per
// matrix) and perm (m per matrix), uint32; matrices with bad[b] get the
// identity (no row exchanges), as on the CPU.
void lu_pivots(const int* ipiv32, const int64_t* ipiv64, int64_t batch,
               int64_t m, int64_t k, uint32_t* piv, uint32_t* perm,
               const int* bad);
// perm[i] = i % max(m, 1) over `size` entries (the LU of empty matrices).
void iota_mod(uint32_t* perm, int64_t size, int64_t m);

// eig of real matrices: geev's real results (wr then wi, n each, per
// matrix, in `w`; VR column-major (n, n) per matrix in `vr`, null without
// vectors), dtype t (float32 or float64), as the primitive's complex64
// outputs: eigenvalues (n per matrix) and eigenvectors (row-major,
// columns; null without vectors).
void eig_real_outputs(const void* w, const void* vr, Dtype t, int64_t batch,
                      int64_t n, void* w_out, void* v_out);

// info[b] for the triangular solve: the 1-based index of the first exact
// zero on the diagonal of row-major (n, n) matrix b, else 0 (trtrs's
// singular check, which trsm does not make).
void diagonal_zero_info(const void* a, Dtype t, int64_t batch, int64_t n,
                        int* info);

// Folds the library's per-matrix info (ignoring matrices with bad[b],
// `bad` may be null) into a status fault (cuda.h, status_fault): the
// stream's next host mark raises "[op] failure" for a positive info.
void check_info(const int* info, const int* bad, int64_t batch,
                const char* op, const char* failure);

}  // namespace fluxion::cu::lapack
