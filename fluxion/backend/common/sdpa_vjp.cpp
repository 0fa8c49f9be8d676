// FlashAttention's backward from the forward's logsumexp, block by block of
// queries of one (batch, key/value head), so the Lq x Lk probabilities of a
// whole head never exist at once:
//   P  = exp(scale Q K^T - lse)        (0 where the causal mask hides)
//   dV += P^T dO,   dP = dO V^T,   D = rowsum(dO o)
//   dS = scale P (dP - D),   dQ = dS K,   dK += dS^T Q
// with BLAS for the products. A query that sees no key (causal, Lq > Lk)
// attends uniformly to every key (MLX) and its hidden scores take no
// gradient, as in the composed rule (fast_rules.cpp).
#include "fluxion/backend/common/sdpa_vjp.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace fluxion::common {

namespace {

constexpr int kRows = 64;  // queries per block

// c (m x n) = alpha op(a) op(b) + beta c, row-major.
void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}
void gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a,
          int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

}  // namespace

template <typename M>
void sdpa_vjp_host(const SdpaVjpDims& x, const M* q, const M* k, const M* v,
                   const M* o, const M* lse, const M* d_o, M* dq, M* dk,
                   M* dv) {
  const int Lq = x.Lq, Lk = x.Lk, D = x.D, Dv = x.Dv, R = x.Hq / x.Hkv;
  const M scale = static_cast<M>(x.scale);
  std::fill(dq, dq + int64_t{x.B} * x.Hq * Lq * D, M(0));
  std::fill(dk, dk + int64_t{x.B} * x.Hkv * Lk * D, M(0));
  std::fill(dv, dv + int64_t{x.B} * x.Hkv * Lk * Dv, M(0));
  if (Lk == 0 || Lq == 0) {
    return;
  }
  auto visible = [&](int i) {
    return x.causal ? std::clamp(i + Lk - Lq + 1, 0, Lk) : Lk;
  };
  auto p = std::make_unique_for_overwrite<M[]>(int64_t{kRows} * Lk);
  auto ds = std::make_unique_for_overwrite<M[]>(int64_t{kRows} * Lk);
  for (int b = 0; b < x.B; ++b) {
    for (int hk = 0; hk < x.Hkv; ++hk) {
      const int64_t kv = int64_t{b} * x.Hkv + hk;
      const M* K = k + kv * Lk * D;
      const M* V = v + kv * Lk * Dv;
      M* dK = dk + kv * Lk * D;
      M* dV = dv + kv * Lk * Dv;
      for (int h = hk * R; h < (hk + 1) * R; ++h) {
        for (int i0 = 0; i0 < Lq; i0 += kRows) {
          const int m = std::min(kRows, Lq - i0);
          const int64_t r0 = (int64_t{b} * x.Hq + h) * Lq + i0;
          const M* Q = q + r0 * D;
          const M* dO = d_o + r0 * Dv;
          std::fill(p.get(), p.get() + int64_t{m} * Lk, M(0));
          std::fill(ds.get(), ds.get() + int64_t{m} * Lk, M(0));
          if (D > 0) {  // scores
            gemm(false, true, m, Lk, D, scale, Q, D, K, D, M(0), p.get(), Lk);
          }
          if (Dv > 0) {  // dP
            gemm(false, true, m, Lk, Dv, M(1), dO, Dv, V, Dv, M(0), ds.get(),
                 Lk);
          }
          for (int r = 0; r < m; ++r) {
            M* pr = p.get() + int64_t{r} * Lk;
            M* dsr = ds.get() + int64_t{r} * Lk;
            const int vis = visible(i0 + r);
            if (vis == 0) {  // uniform; its hidden scores take no gradient
              std::fill(pr, pr + Lk, M(1) / static_cast<M>(Lk));
              std::fill(dsr, dsr + Lk, M(0));
              continue;
            }
            const M l = lse[r0 + r];
            M di = 0;
            for (int d = 0; d < Dv; ++d) {
              di += dO[int64_t{r} * Dv + d] * o[(r0 + r) * Dv + d];
            }
            for (int j = 0; j < Lk; ++j) {
              const M pj = j < vis ? std::exp(pr[j] - l) : M(0);
              pr[j] = pj;
              dsr[j] = j < vis ? scale * pj * (dsr[j] - di) : M(0);
            }
          }
          if (Dv > 0) {  // dV += P^T dO
            gemm(true, false, Lk, Dv, m, M(1), p.get(), Lk, dO, Dv, M(1), dV,
                 Dv);
          }
          if (D > 0) {  // dK += dS^T Q, dQ = dS K
            gemm(true, false, Lk, D, m, M(1), ds.get(), Lk, Q, D, M(1), dK, D);
            gemm(false, false, m, D, Lk, M(1), ds.get(), Lk, K, D, M(0),
                 dq + r0 * D, D);
          }
        }
      }
    }
  }
}

template void sdpa_vjp_host<float>(const SdpaVjpDims&, const float*,
                                   const float*, const float*, const float*,
                                   const float*, const float*, float*, float*,
                                   float*);
template void sdpa_vjp_host<double>(const SdpaVjpDims&, const double*,
                                    const double*, const double*,
                                    const double*, const double*,
                                    const double*, double*, double*, double*);

}  // namespace fluxion::common
