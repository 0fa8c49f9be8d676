// GPU kernels of Inverse, Solve and SolveTriangular through cuBLAS and
// cuSOLVER (the CPU's are backend/cpu/lapack.cpp; the layout rules and
// the batching thresholds are backend/common/lapack_plan.h).
//
// - Inverse: the row-major buffer read column-major is A^T, and
//   inv(A^T) = inv(A)^T, so the library's inverse of the buffer, read back
//   row-major, is inv(A): no transposes. Batches of small matrices:
//   getrfBatched + getriBatched (cuBLAS); otherwise per matrix Xgetrf, then
//   Xgetrs of the identity.
// - Solve: as on the CPU, float32 systems are factored in float64 (the
//   CPU's comment says why: NumPy's accuracy) and rounded back. A is
//   factored as A^T (no transpose) and getrs solves with op T; b is
//   transposed to column-major (and widened) on the way in, x back.
// - SolveTriangular: X A^T = B^T is trsm from the right on the row-major
//   buffers as they are (B read column-major is B^T, (k, n)); only the
//   triangle trsm reads is touched, as LAPACK's trtrs. trsm does not check
//   the diagonal: a kernel reports trtrs's "singular" (an exact zero on
//   it) first.
//
// Errors: a singular matrix raises "[linalg::inv] Matrix is singular."
// (solve, solve_triangular alike) at the stream's next host mark, from the
// info array (cuda.h, status_fault); matrices holding NaN or inf give NaN,
// never an error (lapack_kernels.h).
#include <algorithm>
#include <string>

#include "fluxion/backend/common/lapack_plan.h"
#include "fluxion/backend/cuda/lapack_kernels.h"
#include "fluxion/backend/cuda/solver.h"
#include "fluxion/ops/linalg_lapack.h"

namespace fluxion::linalg {

namespace {

using namespace cu::solver;
namespace kern = cu::lapack;
namespace plan = lapack_plan;

constexpr const char* kSingular = "Matrix is singular.";

// getrf of each matrix of `w` (column-major (n, n)) with the 64-bit API:
// pivots in `ipiv` (n per matrix), info per matrix. One workspace.
void getrf_each(const Handles& h, Dtype t, int64_t n, void* w, int64_t batch,
                int64_t* ipiv, int* info, const char* op) {
  const cudaDataType dt = data_type(t);
  size_t dev = 0, host = 0;
  check(cusolverDnXgetrf_bufferSize(h.dn, h.params, n, n, dt, w, n, dt, &dev,
                                    &host),
        op, "cusolverDnXgetrf_bufferSize");
  void* dws = device_buffer(dev);
  void* hws = host_buffer(host);
  for (int64_t i = 0; i < batch; ++i) {
    check(cusolverDnXgetrf(h.dn, h.params, n, n, dt, at(w, i, n * n, t), n,
                           ipiv + i * n, dt, dws, dev, hws, host, info + i),
          op, "cusolverDnXgetrf");
  }
}

// getrs of each matrix (n, k) of `b` (column-major, in place) with the
// factors of getrf_each; the calls' own info is only about arguments.
void getrs_each(const Handles& h, Dtype t, cublasOperation_t trans, int64_t n,
                int64_t k, void* w, const int64_t* ipiv, void* b, int64_t batch,
                const char* op) {
  const cudaDataType dt = data_type(t);
  int* info = device_zeros(1);
  for (int64_t i = 0; i < batch; ++i) {
    check(cusolverDnXgetrs(h.dn, h.params, trans, n, k, dt, at(w, i, n * n, t),
                           n, ipiv + i * n, dt, at(b, i, n * k, t), n, info),
          op, "cusolverDnXgetrs");
  }
}

}  // namespace

void Inverse::eval_gpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  const char* op = "linalg::inv";
  array& out = outputs[0];
  cu::alloc(out);
  const array& a = inputs[0];
  const Dtype t = a.dtype();
  const int64_t n = a.shape(-1), batch = matrices(a);
  if (batch == 0) {
    return;
  }
  const Handles& h = handles(op);
  Work w = stage(a, t, /*transpose=*/false);
  int* info = device_zeros(batch);
  void* o = cu::ptr<void>(out);
  if (plan::batched_lu(n, n, batch)) {
    int* piv = device_array<int>(batch * n);
    void** pa = pointer_array(w.data, n * n * t.size, batch);
    void** pc = pointer_array(o, n * n * t.size, batch);
    getrf_batched(h, t, n, pa, n, piv, info, batch, op);
    // getri's own info repeats getrf's zero pivots.
    int* info2 = device_zeros(batch);
    getri_batched(h, t, n, pa, n, piv, pc, n, info2, batch, op);
  } else {
    auto* ipiv = device_array<int64_t>(batch * n);
    getrf_each(h, t, n, w.data, batch, ipiv, info, op);
    kern::identity(o, t, batch, n, n);
    getrs_each(h, t, CUBLAS_OP_N, n, n, w.data, ipiv, o, batch, op);
  }
  kern::check_info(info, w.bad, batch, op, kSingular);
  kern::nan_where(o, t, batch, n * n, w.bad);
}

void Solve::eval_gpu(const std::vector<array>& inputs,
                     std::vector<array>& outputs) {
  const char* op = "linalg::solve";
  array& out = outputs[0];
  cu::alloc(out);
  const array& a = inputs[0];
  const Dtype t = out.dtype();
  const int64_t n = a.shape(-1), k = out.shape(-1), batch = matrices(out);
  if (batch == 0) {
    return;
  }
  const Handles& h = handles(op);
  const Dtype wt = float64;  // the CPU's working precision
  Work w = stage(a, wt, /*transpose=*/false);
  // b column-major (n, k) in float64; its non-finite matrices flag too.
  const array b = cu::contiguous(inputs[1]);
  cu::keep_alive(b);
  void* x = device_buffer(8 * static_cast<size_t>(batch * n * k));
  kern::copy_matrices(cu::ptr<const void>(b), b.dtype(), x, wt, batch, n, k,
                      /*transpose=*/true, false, w.bad);
  int* info = device_zeros(batch);
  if (plan::batched_lu(n, n, batch)) {
    int* piv = device_array<int>(batch * n);
    void** pa = pointer_array(w.data, n * n * 8, batch);
    void** pb = pointer_array(x, n * k * 8, batch);
    getrf_batched(h, wt, n, pa, n, piv, info, batch, op);
    getrs_batched(h, wt, CUBLAS_OP_T, n, k, pa, n, piv, pb, n, batch, op);
  } else {
    auto* ipiv = device_array<int64_t>(batch * n);
    getrf_each(h, wt, n, w.data, batch, ipiv, info, op);
    getrs_each(h, wt, CUBLAS_OP_T, n, k, w.data, ipiv, x, batch, op);
  }
  // x column-major (n, k) is row-major (k, n): transposed back, rounded.
  void* o = cu::ptr<void>(out);
  kern::copy_matrices(x, wt, o, t, batch, k, n, /*transpose=*/true, false,
                      nullptr);
  kern::check_info(info, w.bad, batch, op, kSingular);
  kern::nan_where(o, t, batch, n * k, w.bad);
}

void SolveTriangular::eval_gpu(const std::vector<array>& inputs,
                               std::vector<array>& outputs) {
  const char* op = "linalg::solve_triangular";
  array& out = outputs[0];
  cu::alloc(out);
  const Dtype t = out.dtype();
  const int64_t n = inputs[0].shape(-1), k = out.shape(-1);
  const int64_t batch = matrices(out);
  if (batch == 0) {
    return;
  }
  const Handles& h = handles(op);
  // A transposed view (the rules' and cholesky-solve's L^T) is column-major
  // already: trsm reads it with op T and the triangle as stored, no copy.
  const bool col_major = plan::column_major_matrices(
      inputs[0].shape(), inputs[0].strides(), inputs[0].flags().contiguous);
  const array a = col_major ? inputs[0] : cu::contiguous(inputs[0]);
  const array b = cu::contiguous(inputs[1]);
  cu::keep_alive(a);
  cu::keep_alive(b);
  void* o = cu::ptr<void>(out);
  int* bad = device_zeros(batch);
  // The CPU's NaN rule reads all of A (both triangles) and b.
  kern::flag_nonfinite(cu::ptr<const void>(a), t, batch, n * n, bad);
  kern::copy_matrices(cu::ptr<const void>(b), t, o, t, batch, n, k, false,
                      false, bad);
  int* info = device_array<int>(batch);
  kern::diagonal_zero_info(cu::ptr<const void>(a), t, batch, n, info);
  // Row-major lower A is column-major upper A^T, which trsm takes as it
  // is (op N); a column-major A is stored as itself: op T, same triangle.
  const bool lower_stored = col_major ? !upper_ : upper_;
  const cublasFillMode_t uplo =
      lower_stored ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
  const cublasOperation_t trans = col_major ? CUBLAS_OP_T : CUBLAS_OP_N;
  void* pa = const_cast<void*>(cu::ptr<const void>(a));
  if (plan::batched_trsm(n, batch)) {
    void** ppa = pointer_array(pa, n * n * t.size, batch);
    void** ppb = pointer_array(o, n * k * t.size, batch);
    trsm_batched(h, t, CUBLAS_SIDE_RIGHT, uplo, trans, k, n, ppa, n, ppb, k,
                 batch, op);
  } else {
    for (int64_t i = 0; i < batch; ++i) {
      trsm(h, t, CUBLAS_SIDE_RIGHT, uplo, trans, k, n, at(pa, i, n * n, t), n,
           at(o, i, n * k, t), k, op);
    }
  }
  kern::check_info(info, bad, batch, op, kSingular);
  kern::nan_where(o, t, batch, n * k, bad);
}

}  // namespace fluxion::linalg
