// Matmul and AddMM through cuBLASLt (host code: the library launches the
// kernels). Row-major C = A B is column-major C^T = B^T A^T, so B is
// cuBLASLt's first operand. Each operand's last two dims are used in place
// when row- or column-major (transposed views go through the op flags),
// else copied; batch dims are collapsed over the output's batch shape
// (broadcast ones have stride 0, never materialized) into strided-batched
// calls. float32 is computed in float32 (TF32 only with
// FLUXION_ENABLE_TF32=1, MLX's convention); halves in float32 with a
// half output; complex64 in complex float32. Heuristics are cached per
// shape, the workspace is one block per device.
#include <cublasLt.h>

#include <algorithm>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "fluxion/backend/cuda/cuda.h"
#include "fluxion/ops/linalg.h"

namespace fluxion {

namespace {

void check_lt(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("[matmul] cuBLASLt ") + what +
                             " failed: " + cublasLtGetStatusString(st));
  }
}

constexpr size_t kWorkspace = 32 << 20;

struct Lt {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::mutex mu;  // the heuristics cache
  std::map<std::string, cublasLtMatmulAlgo_t> algos;
  Lt() {
    check_lt(cublasLtCreate(&handle), "create");
    cu::check(cudaMalloc(&workspace, kWorkspace), "matmul workspace");
  }
};
Lt& lt() {
  static auto* l = new Lt();  // leaked: used until exit
  return *l;
}

using cu::tf32_enabled;

// How an operand's last two dims (rows x cols, row-major view) are stored.
struct MatView {
  bool transposed;  // stored column-major
  int64_t ld;
};
bool mat_view(const array& x, MatView& v) {
  int nd = x.ndim();
  int64_t rows = x.shape(nd - 2), cols = x.shape(nd - 1);
  int64_t s0 = x.strides()[nd - 2], s1 = x.strides()[nd - 1];
  if ((s1 == 1 || cols == 1) && s0 >= std::max<int64_t>(cols, 1)) {
    v = {false, std::max<int64_t>(s0, std::max<int64_t>(cols, 1))};
    return true;
  }
  if ((s0 == 1 || rows == 1) && s1 >= std::max<int64_t>(rows, 1)) {
    v = {true, std::max<int64_t>(s1, std::max<int64_t>(rows, 1))};
    return true;
  }
  return false;
}

struct Types {
  cudaDataType_t data, scale;
  cublasComputeType_t compute;
};
Types types_of(Dtype t) {
  if (t == float32) {
    return {CUDA_R_32F, CUDA_R_32F,
            tf32_enabled() ? CUBLAS_COMPUTE_32F_FAST_TF32
                           : CUBLAS_COMPUTE_32F};
  }
  if (t == float64) {
    return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
  }
  if (t == float16) {
    return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
  }
  if (t == bfloat16) {
    return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
  }
  if (t == complex64) {
    return {CUDA_C_32F, CUDA_C_32F, CUBLAS_COMPUTE_32F};
  }
  throw std::invalid_argument("[matmul] " + std::string(dtype_name(t)) +
                              " is not supported on the gpu.");
}

struct LayoutDeleter {
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const {
    cublasLtMatrixLayoutDestroy(l);
  }
};
using LayoutPtr =
    std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter>;

LayoutPtr make_layout(cudaDataType_t t, int64_t rows, int64_t cols,
                      int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t l;
  check_lt(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld), "layout");
  LayoutPtr p(l);
  if (batch > 1) {
    int32_t b = static_cast<int32_t>(batch);
    check_lt(cublasLtMatrixLayoutSetAttribute(
                 l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof(b)),
             "layout");
    check_lt(cublasLtMatrixLayoutSetAttribute(
                 l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                 sizeof(stride)),
             "layout");
  }
  return p;
}

// What choose_algo runs its candidates on: the product's descriptor and
// layouts, its first batch element's operands, and the size of that
// element's output (a scratch of that size takes the candidates' writes).
struct Problem {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t l1, l2, lc;
  const void *first, *second, *alpha;
  size_t out_bytes;
};

// The algorithm for a product not seen before. cuBLASLt's first heuristic
// answer is good for most shapes, but for large products it can be well
// behind the best of its own top answers (8192^3 bfloat16 on an H200: 608
// against 765 TFLOP/s for PyTorch's choice), so those time up to 16
// candidates once, on the stream, and keep the fastest; the cost (a few
// runs of the product and one host wait) is paid once per shape.
cublasLtMatmulAlgo_t choose_algo(Lt& l, const Problem& pr, double madds,
                                 cudaStream_t s) {
  constexpr int kCandidates = 16;
  constexpr double kTuneAbove = 1 << 30;  // multiply-adds
  cublasLtMatmulPreference_t pref;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "preference");
  size_t ws = kWorkspace;
  cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t res[kCandidates];
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
      l.handle, pr.desc, pr.l1, pr.l2, pr.lc, pr.lc, pref,
      madds >= kTuneAbove ? kCandidates : 1, res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check_lt(st, "heuristic");
  if (found == 0) {
    throw std::runtime_error(
        "[matmul] cuBLASLt found no algorithm for this product.");
  }
  if (found == 1) {
    return res[0].algo;
  }
  // Candidates write a scratch output (beta = 0): the real one may hold C.
  Data scratch(pr.out_bytes, Device{Device::gpu});
  const float zero_f = 0.0f;
  const double zero_d = 0.0;
  const float zero_c[2] = {0.0f, 0.0f};
  cudaDataType_t scale;
  size_t got = 0;
  cublasLtMatmulDescGetAttribute(pr.desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE,
                                 &scale, sizeof(scale), &got);
  const void* zero = scale == CUDA_R_64F   ? static_cast<const void*>(&zero_d)
                     : scale == CUDA_C_32F ? static_cast<const void*>(zero_c)
                                           : static_cast<const void*>(&zero_f);
  cudaEvent_t start, stop;
  cu::check(cudaEventCreate(&start), "matmul");
  cu::check(cudaEventCreate(&stop), "matmul");
  int best = 0;
  float best_ms = -1;  // none yet
  for (int i = 0; i < found; ++i) {
    auto run = [&] {
      return cublasLtMatmul(l.handle, pr.desc, pr.alpha, pr.first, pr.l1,
                            pr.second, pr.l2, zero, scratch.ptr(), pr.lc,
                            scratch.ptr(), pr.lc, &res[i].algo, l.workspace,
                            kWorkspace, s);
    };
    if (res[i].state != CUBLAS_STATUS_SUCCESS ||
        run() != CUBLAS_STATUS_SUCCESS) {  // the warm-up run
      continue;
    }
    cudaEventRecord(start, s);
    bool ok = true;
    for (int k = 0; k < 3 && ok; ++k) {
      ok = run() == CUBLAS_STATUS_SUCCESS;
    }
    cudaEventRecord(stop, s);
    float ms = 0;
    if (ok && cudaEventSynchronize(stop) == cudaSuccess &&
        cudaEventElapsedTime(&ms, start, stop) == cudaSuccess &&
        (best_ms < 0 || ms < best_ms)) {
      best = i;
      best_ms = ms;
    }
  }
  // The scratch is freed on return: no candidate may still be running.
  cudaStreamSynchronize(s);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGetLastError();
  return res[best].algo;
}

// out (holding beta's C when `with_c`) = alpha a b + beta out. out is
// row-contiguous, or a view whose rows are unit-stride and at least N
// elements apart (cu::matmul_into's: a convolution's group columns).
void gemm(const array& a, const array& b, array& out, float alpha, float beta,
          bool with_c) {
  const int nd = out.ndim();
  const int64_t M = out.shape(nd - 2), N = out.shape(nd - 1);
  const int64_t K = a.shape(-1);
  const int64_t ldc =
      M > 1 ? std::max<int64_t>(out.strides()[nd - 2], N) : N;
  MatView va, vb;
  array A = a, B = b;
  if (!mat_view(A, va)) {
    A = cu::contiguous(A);
    mat_view(A, va);
  }
  if (!mat_view(B, vb)) {
    B = cu::contiguous(B);
    mat_view(B, vb);
  }
  // Batch dims: collapse over the output's batch shape.
  Shape bshape(out.shape().begin(), out.shape().end() - 2);
  Strides sa(A.strides().begin(), A.strides().end() - 2);
  Strides sb(B.strides().begin(), B.strides().end() - 2);
  Strides so(out.strides().begin(), out.strides().end() - 2);
  cu::Layout bl = cu::collapse(bshape, {sa, sb, so}, "matmul");
  int64_t inner = bl.ndim > 0 ? bl.shape[bl.ndim - 1] : 1;
  int64_t isa = bl.ndim > 0 ? bl.strides[0][bl.ndim - 1] : 0;
  int64_t isb = bl.ndim > 0 ? bl.strides[1][bl.ndim - 1] : 0;
  int64_t iso = bl.ndim > 0 ? bl.strides[2][bl.ndim - 1] : M * N;
  int64_t outer = 1;
  for (int d = 0; d + 1 < bl.ndim; ++d) {
    outer *= bl.shape[d];
  }

  Types ty = types_of(out.dtype());
  Lt& l = lt();
  cublasLtMatmulDesc_t desc;
  check_lt(cublasLtMatmulDescCreate(&desc, ty.compute, ty.scale), "desc");
  std::unique_ptr<cublasLtMatmulDescOpaque_t,
                  decltype(&cublasLtMatmulDescDestroy)>
      desc_guard(desc, cublasLtMatmulDescDestroy);
  // cuBLASLt's first operand is B (N x K column-major = B^T).
  cublasOperation_t op1 = vb.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op2 = va.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                          &op1, sizeof(op1)),
           "desc");
  check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                          &op2, sizeof(op2)),
           "desc");
  auto l1 = vb.transposed ? make_layout(ty.data, K, N, vb.ld, inner, isb)
                          : make_layout(ty.data, N, K, vb.ld, inner, isb);
  auto l2 = va.transposed ? make_layout(ty.data, M, K, va.ld, inner, isa)
                          : make_layout(ty.data, K, M, va.ld, inner, isa);
  auto lc = make_layout(ty.data, N, M, ldc, inner, iso);

  std::string key = std::to_string(out.dtype().size) +
                    dtype_name(out.dtype()) + ":" + std::to_string(M) + "," +
                    std::to_string(N) + "," + std::to_string(K) + "," +
                    std::to_string(va.transposed) +
                    std::to_string(vb.transposed) + "," +
                    std::to_string(va.ld) + "," + std::to_string(vb.ld) +
                    "," + std::to_string(inner) + "," + std::to_string(isa) +
                    "," + std::to_string(isb) + "," + std::to_string(with_c) +
                    std::to_string(tf32_enabled()) + "," +
                    std::to_string(ldc) + "," + std::to_string(iso);
  float alpha_f = alpha, beta_f = with_c ? beta : 0.0f;
  double alpha_d = alpha, beta_d = beta_f;
  float alpha_c[2] = {alpha, 0.0f}, beta_c[2] = {beta_f, 0.0f};
  const void* pa = &alpha_f;
  const void* pb = &beta_f;
  if (ty.scale == CUDA_R_64F) {
    pa = &alpha_d;
    pb = &beta_d;
  } else if (ty.scale == CUDA_C_32F) {
    pa = alpha_c;
    pb = beta_c;
  }
  const size_t isz = out.itemsize();
  const char* da = cu::ptr<const char>(A);
  const char* db = cu::ptr<const char>(B);
  char* dc = cu::ptr<char>(out);
  cudaStream_t s = cu::current_stream();
  cublasLtMatmulAlgo_t algo;
  {
    std::lock_guard<std::mutex> lk(l.mu);
    auto it = l.algos.find(key);
    if (it != l.algos.end()) {
      algo = it->second;
    } else {
      // The first outer index's output extent (its inner batches' rows).
      const int64_t extent = (inner - 1) * iso + (M - 1) * ldc + N;
      Problem pr{desc, l1.get(), l2.get(), lc.get(), db, da, pa,
                 static_cast<size_t>(extent) * isz};
      algo = choose_algo(l, pr, static_cast<double>(M) * N * K * inner, s);
      l.algos.emplace(key, algo);
    }
  }
  for (int64_t o = 0; o < outer; ++o) {
    // Offsets of the outer batch index o (all but the innermost dim).
    int64_t oa = 0, ob = 0, oc = 0, r = o;
    for (int d = bl.ndim - 2; d >= 0; --d) {
      int64_t q = r % bl.shape[d];
      r /= bl.shape[d];
      oa += q * bl.strides[0][d];
      ob += q * bl.strides[1][d];
      oc += q * bl.strides[2][d];
    }
    check_lt(cublasLtMatmul(l.handle, desc, pa, db + ob * isz, l1.get(),
                            da + oa * isz, l2.get(), pb, dc + oc * isz,
                            lc.get(), dc + oc * isz, lc.get(), &algo,
                            l.workspace, kWorkspace, s),
             "matmul");
  }
}

// A row-contiguous array of zeros in GPU memory.
array zeros_on_gpu(const Shape& shape, Dtype t) {
  array z(shape, t, nullptr, {});
  cu::alloc(z);
  z.set_status(array::Status::available);
  cu::check(cudaMemsetAsync(cu::ptr(z), 0, z.nbytes(), cu::current_stream()),
            "matmul");
  return z;
}

void product(const array& a, const array& b, const array* c, array& out,
             float alpha, float beta) {
  if (beta == 0.0f) {
    c = nullptr;  // BLAS semantics: c is not read (its nans do not leak)
  }
  types_of(out.dtype());  // raises for unsupported dtypes
  cu::alloc(out);
  if (out.size() == 0) {
    return;
  }
  if (c != nullptr) {
    cu::copy_into(*c, out);
  }
  if (a.shape(-1) == 0) {
    // An empty sum: zeros, c, or beta * c, which cuBLASLt computes as a
    // product over one zero column (it takes no empty inner dimension).
    if (c == nullptr) {
      cu::check(cudaMemsetAsync(cu::ptr(out), 0, out.nbytes(),
                                cu::current_stream()),
                "matmul");
    } else if (beta != 1.0f) {
      Shape sa = a.shape(), sb = b.shape();
      sa.back() = 1;
      sb[sb.size() - 2] = 1;
      array za = zeros_on_gpu(sa, a.dtype()), zb = zeros_on_gpu(sb, b.dtype());
      gemm(za, zb, out, alpha, beta, true);
      cu::keep_alive(za);
      cu::keep_alive(zb);
    }
    return;
  }
  gemm(a, b, out, alpha, beta, c != nullptr);
}

}  // namespace

namespace cu {

bool tf32_enabled() {
  static bool on = [] {
    const char* e = std::getenv("FLUXION_ENABLE_TF32");
    return e != nullptr && std::string(e) == "1";
  }();
  return on;
}

void matmul_into(const array& a, const array& b, array& out) {
  if (out.size() == 0) {
    return;
  }
  if (a.shape(-1) == 0) {
    check(cudaMemsetAsync(ptr(out), 0, out.nbytes(), current_stream()),
          "matmul");
    return;
  }
  gemm(a, b, out, 1.0f, 0.0f, false);
}

}  // namespace cu

void Matmul::eval_gpu(const std::vector<array>& in, std::vector<array>& out) {
  product(in[0], in[1], nullptr, out[0], 1.0f, 0.0f);
}

void AddMM::eval_gpu(const std::vector<array>& in, std::vector<array>& out) {
  product(in[0], in[1], &in[2], out[0], alpha_, beta_);
}

}  // namespace fluxion
