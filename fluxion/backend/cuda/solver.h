// cuSOLVER and cuBLAS for the LAPACK primitives (backend/cuda/lapack_*.cpp):
// the handles of a stream, status checks that raise `[linalg::op] ...`,
// and temporaries from Fluxion's allocator kept alive until the stream has
// run the work that uses them. Host code.
#pragma once

#include <cublas_v2.h>
#include <cusolverDn.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "fluxion/array.h"
#include "fluxion/backend/cuda/cuda.h"

namespace fluxion::cu::solver {

// One cuSOLVER handle (with its 64-bit API parameters) and one cuBLAS
// handle per CUDA stream, bound to it once and kept for the process:
// gpu::eval runs a stream's primitives one at a time under the stream's
// lock, so a stream's handles are never used by two threads at once, and
// streams of other threads have their own. cuBLAS's workspace is a block
// of Fluxion's allocator, owned by the handle.
struct Handles {
  cusolverDnHandle_t dn = nullptr;
  cusolverDnParams_t params = nullptr;
  cublasHandle_t blas = nullptr;
  // gesvdj's parameters (sorted singular values, default tolerance and
  // sweeps). The device writes its residual into them, so they live with
  // the handle rather than per call.
  gesvdjInfo_t gesvdj = nullptr;
};
Handles& handles(const char* op);

// A failed library call raises std::runtime_error naming the op (as the
// CPU's `linalg::inv`), the call and the status:
// "[linalg::inv] cusolverDnXgetrf failed: CUSOLVER_STATUS_... (7)."
void check(cusolverStatus_t st, const char* op, const char* call);
void check(cublasStatus_t st, const char* op, const char* call);
// cuBLAS batched calls whose `info` is a host integer (getrsBatched,
// geqrfBatched): it reports a rejected argument only.
void check_host_info(int info, const char* op, const char* call);

// Uninitialized device memory of `bytes` (at least 1) from Fluxion's
// allocator, alive until the work queued on the current stream up to the
// end of the primitive has run.
void* device_buffer(size_t bytes);
template <typename T>
T* device_array(int64_t n) {
  return static_cast<T*>(device_buffer(sizeof(T) * static_cast<size_t>(n)));
}
// Zero-filled device ints (info arrays), stream-ordered.
int* device_zeros(int64_t n);
// Host memory for the 64-bit API's bufferOnHost (null for 0 bytes), alive
// as long.
void* host_buffer(size_t bytes);

// The library's type of a dtype (float32, float64, complex64).
cudaDataType data_type(Dtype t);

// An array of `batch` pointers base + i * stride_bytes in device memory,
// for the pointer-array batched APIs (a kernel fills it).
void** pointer_array(void* base, int64_t stride_bytes, int64_t batch);

// The working copy of a primitive's input: `x`'s matrices (row-major
// (rows, cols), any layout: made row-contiguous first) in fresh device
// memory of dtype `t`, transposed to column-major when `transpose`
// (conjugated when `conj`); bad[b] = 1 (zero otherwise) for a matrix
// holding a NaN or an infinity, which is replaced by an identity
// (lapack_kernels.h says why).
struct Work {
  void* data = nullptr;
  int* bad = nullptr;
};
Work stage(const array& x, Dtype t, bool transpose, bool conj = false);

// The number of (rows, cols) matrices in `x` (0 when they are empty).
int64_t matrices(const array& x);
// Matrix i of a batch of matrices of `elems` elements of dtype t at p.
inline char* at(void* p, int64_t i, int64_t elems, Dtype t) {
  return static_cast<char*>(p) + i * elems * static_cast<int64_t>(t.size);
}
// The product of x's batch dims (every dim but the last two).
int64_t batch_size(const array& x);
size_t item_size(Dtype t);

// --- typed entry points (float32 / float64; complex64 where noted) -------
// Each checks its status and raises as `check` does.

void getrf_batched(const Handles& h, Dtype t, int n, void** a, int lda,
                   int* piv, int* info, int batch, const char* op);
void getri_batched(const Handles& h, Dtype t, int n, void** a, int lda,
                   const int* piv, void** c, int ldc, int* info, int batch,
                   const char* op);
void getrs_batched(const Handles& h, Dtype t, cublasOperation_t trans, int n,
                   int nrhs, void** a, int lda, const int* piv, void** b,
                   int ldb, int batch, const char* op);
// alpha = 1, a non-unit diagonal.
void trsm(const Handles& h, Dtype t, cublasSideMode_t side,
          cublasFillMode_t uplo, cublasOperation_t trans, int m, int n,
          const void* a, int lda, void* b, int ldb, const char* op);
void trsm_batched(const Handles& h, Dtype t, cublasSideMode_t side,
                  cublasFillMode_t uplo, cublasOperation_t trans, int m,
                  int n, void** a, int lda, void** b, int ldb, int batch,
                  const char* op);
void geqrf_batched(const Handles& h, Dtype t, int m, int n, void** a, int lda,
                   void** tau, int batch, const char* op);
void potrf_batched(const Handles& h, Dtype t, cublasFillMode_t uplo, int n,
                   void** a, int lda, int* info, int batch, const char* op);
// Q's first k columns in place of geqrf's reflectors (orgqr), for `count`
// matrices stride_a / stride_tau elements apart (one call each, one
// workspace).
void orgqr(const Handles& h, Dtype t, int m, int k, void* a, int lda,
           int64_t stride_a, const void* tau, int64_t stride_tau,
           int64_t count, int* info, const char* op);
// gesvdj of `count` column-major (m, n) matrices (stride m * n), one call
// each or, with `batched`, one gesvdjBatched call (m, n <= 32): S (min(m,
// n) each), U (m, m), V (n, n) (not transposed); float32, float64 and
// complex64 (S real). U and V are always computed (jobz = VECTOR, why in
// solver.cpp) into real buffers: `count` matrices each, or with `reuse_uv`
// (one call each, not `batched`) one matrix each that every call
// overwrites, for a caller that wants the singular values only.
void gesvdj(const Handles& h, Dtype t, int m, int n, void* a, void* s,
            void* u, void* v, bool reuse_uv, int* info, int64_t count,
            bool batched, const char* op);

}  // namespace fluxion::cu::solver
