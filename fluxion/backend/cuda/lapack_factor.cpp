// GPU kernels of Cholesky, QRF and LUF through cuSOLVER and cuBLAS (the
// CPU's are backend/cpu/lapack.cpp; layout rules and batching thresholds
// in backend/common/lapack_plan.h).
//
// - Cholesky: the lower triangle of the row-major input is the upper one
//   of the buffer read column-major, so potrf with "upper" factors the
//   buffer in place: U (column-major) with U^T U = A is L = U^T read
//   row-major. potrf leaves the other triangle as it was: a kernel zeroes
//   it, as the CPU does. Batches of small matrices: potrfBatched; else
//   Xpotrf per matrix. A matrix that is not positive definite raises
//   "[linalg::cholesky] Matrix is not positive definite." at the stream's
//   next host mark.
// - QRF: Householder reflectors are by rows, so the input is transposed to
//   column-major first. Batches of small tall matrices: cuBLAS's
//   geqrfBatched and our form_q kernel (cuSOLVER has no batched orgqr);
//   else Xgeqrf and orgqr per matrix, Q transposed back. R is the upper
//   triangle of geqrf's result.
// - LUF: getrf on the transposed input (getrfBatched for batches of small
//   square matrices, else Xgetrf), the packed LU transposed back, and the
//   pivots (0-based) and permutation by a kernel (lapack_plan.h). A
//   singular matrix factors without error, as on the CPU.
// Matrices holding NaN or inf give NaN outputs (LU: identity pivots).
#include <algorithm>

#include "fluxion/backend/common/lapack_plan.h"
#include "fluxion/backend/cuda/lapack_kernels.h"
#include "fluxion/backend/cuda/solver.h"
#include "fluxion/ops/linalg_lapack.h"

namespace fluxion::linalg {

namespace {

using namespace cu::solver;
namespace kern = cu::lapack;
namespace plan = lapack_plan;

}  // namespace

void Cholesky::eval_gpu(const std::vector<array>& inputs,
                        std::vector<array>& outputs) {
  const char* op = "linalg::cholesky";
  array& out = outputs[0];
  cu::alloc(out);
  const Dtype t = out.dtype();
  const int64_t n = out.shape(-1), batch = matrices(out);
  if (batch == 0) {
    return;
  }
  const Handles& h = handles(op);
  const array a = cu::contiguous(inputs[0]);
  cu::keep_alive(a);
  void* o = cu::ptr<void>(out);
  int* bad = device_zeros(batch);
  kern::copy_matrices(cu::ptr<const void>(a), t, o, t, batch, n, n, false,
                      false, bad);
  kern::identity_where(o, t, batch, n, n, bad);
  int* info = device_zeros(batch);
  if (plan::batched_cholesky(n, batch)) {
    void** pa = pointer_array(o, n * n * t.size, batch);
    potrf_batched(h, t, CUBLAS_FILL_MODE_UPPER, n, pa, n, info, batch, op);
  } else {
    const cudaDataType dt = data_type(t);
    size_t dev = 0, host = 0;
    check(cusolverDnXpotrf_bufferSize(h.dn, h.params, CUBLAS_FILL_MODE_UPPER,
                                      n, dt, o, n, dt, &dev, &host),
          op, "cusolverDnXpotrf_bufferSize");
    void* dws = device_buffer(dev);
    void* hws = host_buffer(host);
    for (int64_t i = 0; i < batch; ++i) {
      check(cusolverDnXpotrf(h.dn, h.params, CUBLAS_FILL_MODE_UPPER, n, dt,
                             at(o, i, n * n, t), n, dt, dws, dev, hws, host,
                             info + i),
            op, "cusolverDnXpotrf");
    }
  }
  kern::zero_upper(o, t, batch, n);
  kern::check_info(info, bad, batch, op, "Matrix is not positive definite.");
  kern::nan_where(o, t, batch, n * n, bad);
}

void QRF::eval_gpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const char* op = "linalg::qr";
  array& q = outputs[0];
  array& r = outputs[1];
  cu::alloc(q);
  cu::alloc(r);
  const array& a = inputs[0];
  const Dtype t = a.dtype();
  const int64_t m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  const int64_t batch = matrices(a);
  if (batch == 0) {
    return;  // k == 0: Q and R are empty
  }
  const Handles& h = handles(op);
  // Column-major (m, n), leading dimension m.
  Work w = stage(a, t, /*transpose=*/true);
  void* tau = device_buffer(t.size * static_cast<size_t>(batch * k));
  int* info = device_zeros(batch);
  void* pq = cu::ptr<void>(q);
  if (plan::batched_qr(m, n, batch)) {
    void** pa = pointer_array(w.data, m * n * t.size, batch);
    void** pt = pointer_array(tau, k * t.size, batch);
    geqrf_batched(h, t, m, n, pa, m, pt, batch, op);
    kern::extract_r(w.data, cu::ptr<void>(r), t, batch, m, n, k);
    kern::form_q(w.data, tau, pq, t, batch, m, n, k);
  } else {
    const cudaDataType dt = data_type(t);
    size_t dev = 0, host = 0;
    check(cusolverDnXgeqrf_bufferSize(h.dn, h.params, m, n, dt, w.data, m, dt,
                                      tau, dt, &dev, &host),
          op, "cusolverDnXgeqrf_bufferSize");
    void* dws = device_buffer(dev);
    void* hws = host_buffer(host);
    for (int64_t i = 0; i < batch; ++i) {
      check(cusolverDnXgeqrf(h.dn, h.params, m, n, dt, at(w.data, i, m * n, t),
                             m, dt, at(tau, i, k, t), dt, dws, dev, hws, host,
                             info + i),
            op, "cusolverDnXgeqrf");
    }
    kern::extract_r(w.data, cu::ptr<void>(r), t, batch, m, n, k);
    orgqr(h, t, m, k, w.data, m, m * n, tau, k, batch, info, op);
    // Q's first k columns, column-major (m, k): transposed matrix by matrix
    // (the matrices are m * n apart, Q's m * k).
    for (int64_t i = 0; i < batch; ++i) {
      kern::copy_matrices(at(w.data, i, m * n, t), t, at(pq, i, m * k, t), t,
                          1, k, m, /*transpose=*/true, false, nullptr);
    }
  }
  kern::check_info(info, w.bad, batch, op, "QR failed.");
  kern::nan_where(pq, t, batch, m * k, w.bad);
  kern::nan_where(cu::ptr<void>(r), t, batch, k * n, w.bad);
}

void LUF::eval_gpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const char* op = "linalg::lu";
  for (auto& o : outputs) {
    cu::alloc(o);
  }
  const array& a = inputs[0];
  const Dtype t = a.dtype();
  const int64_t m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  const int64_t batch = matrices(a);
  auto* piv = cu::ptr<uint32_t>(outputs[1]);
  auto* perm = cu::ptr<uint32_t>(outputs[2]);
  if (batch == 0) {
    // No columns (or rows): the identity permutation, as the CPU.
    kern::iota_mod(perm, static_cast<int64_t>(outputs[2].size()), m);
    return;
  }
  const Handles& h = handles(op);
  Work w = stage(a, t, /*transpose=*/true);  // column-major (m, n)
  // getrf's info (> 0 for a zero pivot) is no error here.
  int* info = device_zeros(batch);
  void* lu = cu::ptr<void>(outputs[0]);
  if (plan::batched_lu(m, n, batch)) {
    int* ipiv = device_array<int>(batch * n);
    void** pa = pointer_array(w.data, m * n * t.size, batch);
    getrf_batched(h, t, n, pa, n, ipiv, info, batch, op);
    kern::lu_pivots(ipiv, nullptr, batch, m, k, piv, perm, w.bad);
  } else {
    const cudaDataType dt = data_type(t);
    auto* ipiv = device_array<int64_t>(std::max<int64_t>(batch * k, 1));
    size_t dev = 0, host = 0;
    check(cusolverDnXgetrf_bufferSize(h.dn, h.params, m, n, dt, w.data, m, dt,
                                      &dev, &host),
          op, "cusolverDnXgetrf_bufferSize");
    void* dws = device_buffer(dev);
    void* hws = host_buffer(host);
    for (int64_t i = 0; i < batch; ++i) {
      check(cusolverDnXgetrf(h.dn, h.params, m, n, dt,
                             at(w.data, i, m * n, t), m, ipiv + i * k, dt, dws,
                             dev, hws, host, info + i),
            op, "cusolverDnXgetrf");
    }
    kern::lu_pivots(nullptr, ipiv, batch, m, k, piv, perm, w.bad);
  }
  // Column-major (m, n) is row-major (n, m): transposed back.
  kern::copy_matrices(w.data, t, lu, t, batch, n, m, /*transpose=*/true, false,
                      nullptr);
  kern::nan_where(lu, t, batch, m * n, w.bad);
}

}  // namespace fluxion::linalg
