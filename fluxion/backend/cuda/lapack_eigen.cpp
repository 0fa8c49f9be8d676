// GPU kernels of SVD, Eigh and Eig through cuSOLVER (the CPU's are
// backend/cpu/lapack.cpp; layout rules and batching thresholds in
// backend/common/lapack_plan.h). float32, float64 and complex64.
//
// - SVD: gesvdj (Jacobi; gesvdjBatched for batches of matrices up to
//   32 x 32), which is what torch.linalg.svd runs on CUDA, on the buffer
//   as it is: read column-major it is A^T (n, m), and A^T = U' S V'^H gives
//   A = conj(V') S U'^T, so U' read row-major is the primitive's Vt and
//   conj(V')'s row-major form (a transposing copy) its U. Singular values
//   come sorted in decreasing order, as LAPACK's. U and Vt are full
//   (M x M, N x N); the columns past min(M, N) span the complement and,
//   like the signs of singular vectors, need not equal LAPACK's. The
//   values alone are the same call with U and V dropped (solver.cpp says
//   why), and float32 matrices past the batched sizes are computed in
//   float64 (SVD::eval_gpu says why).
// - Eigh: the symmetric (Hermitian) matrix given by the row-major lower
//   triangle is, read column-major, the one given by the upper triangle of
//   A^T = conj(A): syevd with the other triangle gives its eigenvalues
//   (ascending, real) and eigenvectors conj(V) column-major, transposed
//   (and conjugated) back. Batches of small matrices: syevBatched.
// - Eig: Xgeev on the transposed input (right eigenvectors of A, not of
//   A^T). A real matrix gives geev's real form (wr, wi, and pairs of
//   columns for complex pairs), turned into the primitive's complex64
//   outputs by a kernel with the CPU's pairing rule; float64 is computed
//   in float64 and rounded. geev normalizes each vector to unit norm with
//   its largest component real, as LAPACK. Eigenvalues are in the order
//   the QR iteration leaves them (not sorted), as on the CPU; the order
//   may differ from LAPACK's for the same matrix. One call per matrix.
// Failures raise "[linalg::svd] SVD did not converge." / "[linalg::eigh]
// Eigenvalues did not converge." at the stream's next host mark; matrices
// holding NaN or inf give NaN outputs.
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

Dtype real_of(Dtype t) { return t == complex64 ? float32 : t; }

}  // namespace

void SVD::eval_gpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const char* op = "linalg::svd";
  for (auto& o : outputs) {
    cu::alloc(o);
  }
  const array& a = inputs[0];
  const Dtype t = a.dtype();
  const Dtype rt = real_of(t);
  const int64_t m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  const int64_t batch = matrices(a);
  void* pu = compute_uv_ ? cu::ptr<void>(outputs[0]) : nullptr;
  void* ps = cu::ptr<void>(outputs[compute_uv_ ? 1 : 0]);
  void* pv = compute_uv_ ? cu::ptr<void>(outputs[2]) : nullptr;
  if (batch == 0) {
    // Empty matrices: U and Vt are identities, as on the CPU.
    if (compute_uv_) {
      const int64_t nb = batch_size(a);
      kern::identity(pu, t, nb, m, m);
      kern::identity(pv, t, nb, n, n);
    }
    return;
  }
  const Handles& h = handles(op);
  const bool batched = plan::batched_svd(m, n, batch);
  // float32 past gesvdjBatched's sizes is computed in float64 and rounded:
  // float32 gesvdj loses accuracy with the size. On an H100 the singular
  // values of a 1024 x 1024 float32 matrix (randn + 1024 I) were off by up
  // to 0.28 on values near 1000 (2.8e-4 relative; each one shown too high)
  // against a float64 reference, where float32 LAPACK (sgesdd or sgesvd)
  // on a matrix drawn the same way is off by at most 3.6e-3 (3.4e-6
  // relative): 80 times worse, and past test_large's 1e-4. The same error
  // growth in float64's unit roundoff (2^29 times smaller: 5e-13 relative)
  // is far below float32's rounding of the result. The batched sizes (32
  // at most) stay in float32 (few rotations per column), as does
  // complex64, for want of a complex128 staging copy: large complex64
  // matrices keep float32 gesvdj's accuracy.
  const Dtype ct = t == float32 && !batched ? float64 : t;
  const Dtype crt = real_of(ct);
  Work w = stage(a, ct, /*transpose=*/false);  // column-major A^T (n, m)
  int* info = device_zeros(batch);
  // gesvdj of A^T: U' (n, n) is Vt read row-major, V' (m, m) gives U as
  // conj(V') row-major. Values only: both in scratch and dropped, one of
  // each for all the matrices where the calls are one per matrix.
  const bool reuse = !compute_uv_ && !batched;
  const int64_t nuv = reuse ? 1 : batch;
  const bool direct = ct == t;  // gesvdj writes S and Vt in place
  void* sbuf =
      direct ? ps : device_buffer(crt.size * static_cast<size_t>(batch * k));
  void* ubuf = direct && compute_uv_
                   ? pv
                   : device_buffer(ct.size * static_cast<size_t>(nuv * n * n));
  void* vbuf = device_buffer(ct.size * static_cast<size_t>(nuv * m * m));
  gesvdj(h, ct, n, m, w.data, sbuf, ubuf, vbuf, reuse, info, batch, batched,
         op);
  if (!direct) {
    kern::copy_matrices(sbuf, crt, ps, rt, batch, 1, k, /*transpose=*/false,
                        /*conj=*/false, nullptr);
  }
  if (compute_uv_) {
    if (!direct) {
      kern::copy_matrices(ubuf, ct, pv, t, batch, n, n, /*transpose=*/false,
                          /*conj=*/false, nullptr);
    }
    kern::copy_matrices(vbuf, ct, pu, t, batch, m, m, /*transpose=*/true,
                        /*conj=*/t == complex64, nullptr);
  }
  kern::check_info(info, w.bad, batch, op, "SVD did not converge.");
  kern::nan_where(ps, rt, batch, k, w.bad);
  if (compute_uv_) {
    kern::nan_where(pu, t, batch, m * m, w.bad);
    kern::nan_where(pv, t, batch, n * n, w.bad);
  }
}

void Eigh::eval_gpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  const char* op = "linalg::eigh";
  for (auto& o : outputs) {
    cu::alloc(o);
  }
  const array& a = inputs[0];
  const Dtype t = a.dtype();
  const Dtype rt = real_of(t);
  const int64_t n = a.shape(-1), batch = matrices(a);
  if (batch == 0) {
    return;
  }
  const Handles& h = handles(op);
  Work w = stage(a, t, /*transpose=*/false);
  int* info = device_zeros(batch);
  void* pw = cu::ptr<void>(outputs[0]);
  const cudaDataType dt = data_type(t), dw = data_type(rt);
  const cusolverEigMode_t jobz =
      vectors_ ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  // Row-major lower is column-major upper.
  const cublasFillMode_t uplo =
      upper_ ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
  size_t dev = 0, host = 0;
  if (plan::batched_eigh(n, batch)) {
    // syevBatched indexes the batch with 32-bit integers: chunks of at most
    // eigh_batch_chunk(n) matrices.
    const int64_t chunk = std::min(batch, plan::eigh_batch_chunk(n));
    check(cusolverDnXsyevBatched_bufferSize(h.dn, h.params, jobz, uplo, n, dt,
                                            w.data, n, dw, pw, dt, &dev, &host,
                                            chunk),
          op, "cusolverDnXsyevBatched_bufferSize");
    void* dws = device_buffer(dev);
    void* hws = host_buffer(host);
    for (int64_t i = 0; i < batch; i += chunk) {
      check(cusolverDnXsyevBatched(h.dn, h.params, jobz, uplo, n, dt,
                                   at(w.data, i, n * n, t), n, dw,
                                   at(pw, i, n, rt), dt, dws, dev, hws, host,
                                   info + i, std::min(chunk, batch - i)),
            op, "cusolverDnXsyevBatched");
    }
  } else {
    check(cusolverDnXsyevd_bufferSize(h.dn, h.params, jobz, uplo, n, dt,
                                      w.data, n, dw, pw, dt, &dev, &host),
          op, "cusolverDnXsyevd_bufferSize");
    void* dws = device_buffer(dev);
    void* hws = host_buffer(host);
    for (int64_t i = 0; i < batch; ++i) {
      check(cusolverDnXsyevd(h.dn, h.params, jobz, uplo, n, dt,
                             at(w.data, i, n * n, t), n, dw, at(pw, i, n, rt),
                             dt, dws, dev, hws, host, info + i),
            op, "cusolverDnXsyevd");
    }
  }
  kern::check_info(info, w.bad, batch, op, "Eigenvalues did not converge.");
  kern::nan_where(pw, rt, batch, n, w.bad);
  if (vectors_) {
    void* pv = cu::ptr<void>(outputs[1]);
    kern::copy_matrices(w.data, t, pv, t, batch, n, n, /*transpose=*/true,
                        /*conj=*/t == complex64, nullptr);
    kern::nan_where(pv, t, batch, n * n, w.bad);
  }
}

void Eig::eval_gpu(const std::vector<array>& inputs,
                   std::vector<array>& outputs) {
  const char* op = "linalg::eig";
  for (auto& o : outputs) {
    cu::alloc(o);
  }
  const array& a = inputs[0];
  const Dtype t = a.dtype();
  const int64_t n = a.shape(-1), batch = matrices(a);
  if (batch == 0) {
    return;
  }
  const Handles& h = handles(op);
  Work w = stage(a, t, /*transpose=*/true);  // column-major A
  int* info = device_zeros(batch);
  const bool cplx = t == complex64;
  const cudaDataType dt = data_type(t);
  const cusolverEigMode_t jobvr =
      vectors_ ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  void* pw = cu::ptr<void>(outputs[0]);
  void* pv = vectors_ ? cu::ptr<void>(outputs[1]) : nullptr;
  // Real input: W holds wr then wi (n each) per matrix, in the input's
  // type; complex: the eigenvalues go straight to the output.
  const int64_t w_elems = cplx ? n : 2 * n;
  void* wbuf = cplx ? pw
                    : device_buffer(t.size * static_cast<size_t>(batch * w_elems));
  void* vr = vectors_ ? device_buffer(t.size * static_cast<size_t>(batch * n * n))
                      : nullptr;
  void* vl = device_buffer(t.size);  // not referenced (no left vectors)
  const int64_t ldvr = vectors_ ? n : 1;
  size_t dev = 0, host = 0;
  check(cusolverDnXgeev_bufferSize(h.dn, h.params, CUSOLVER_EIG_MODE_NOVECTOR,
                                   jobvr, n, dt, w.data, n, dt, wbuf, dt, vl,
                                   1, dt, vr, ldvr, dt, &dev, &host),
        op, "cusolverDnXgeev_bufferSize");
  void* dws = device_buffer(dev);
  void* hws = host_buffer(host);
  for (int64_t i = 0; i < batch; ++i) {
    check(cusolverDnXgeev(h.dn, h.params, CUSOLVER_EIG_MODE_NOVECTOR, jobvr, n,
                          dt, at(w.data, i, n * n, t), n, dt,
                          at(wbuf, i, w_elems, t), dt, vl, 1, dt,
                          vectors_ ? at(vr, i, n * n, t) : nullptr, ldvr, dt,
                          dws, dev, hws, host, info + i),
          op, "cusolverDnXgeev");
  }
  if (cplx) {
    if (vectors_) {
      kern::copy_matrices(vr, t, pv, t, batch, n, n, /*transpose=*/true, false,
                          nullptr);
    }
  } else {
    kern::eig_real_outputs(wbuf, vr, t, batch, n, pw, pv);
  }
  kern::check_info(info, w.bad, batch, op, "Eigenvalues did not converge.");
  kern::nan_where(pw, complex64, batch, n, w.bad);
  if (vectors_) {
    kern::nan_where(pv, complex64, batch, n * n, w.bad);
  }
}

}  // namespace fluxion::linalg
