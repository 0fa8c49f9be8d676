// Scaled dot-product attention as gemm-softmax-gemm per block of queries:
// for each (batch, query head, block of up to kBlock queries) the scores
// block S = scale * Q K^T is one gemm into per-thread scratch, the mask and
// the causal limit are applied, each row goes through a softmax (vector exp),
// and O = P V is a second gemm. Under a causal mask only the keys some
// query of the block can see are multiplied. Blocks run on the thread pool.
// float16/bfloat16 operands are converted to float32 once; float32 and
// float64 operands with unit feature stride are read in place (transposed
// [B, L, H, D] layouts included).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/simd.h"
#include "fluxion/backend/cpu/thread_pool.h"
#include "fluxion/ops/fast.h"

namespace fluxion::fast {

namespace {

constexpr int64_t kBlock = 32;

void gemm(bool tb, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, 0.0f, c, ldc);
}
void gemm(bool tb, int m, int n, int k, double alpha, const double* a, int lda,
          const double* b, int ldb, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, 0.0, c, ldc);
}

void vexp(float* p, int64_t n) {
  static const auto k = cpu::simd::f32<::fluxion::detail::Exp>();
  if (k) {
    k(p, p, n);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      p[i] = std::exp(p[i]);
    }
  }
}
void vexp(double* p, int64_t n) {
  static const auto k = cpu::simd::f64<::fluxion::detail::Exp>();
  if (k) {
    k(p, p, n);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      p[i] = std::exp(p[i]);
    }
  }
}

// A [B, H, L, D] operand readable as M with unit feature stride: element
// (b, h, l, 0) is at ptr + b * sb + h * sh + l * sl.
template <typename M>
struct Operand {
  array keep{0.0f};
  std::unique_ptr<M[]> owned;
  const M* ptr = nullptr;
  int64_t sb = 0, sh = 0, sl = 0;
};

template <typename T, typename M>
Operand<M> operand(const array& a) {
  Operand<M> o;
  const int D = a.shape(3);
  const auto& st = a.strides();
  bool direct = std::is_same_v<T, M> && (st[3] == 1 || D == 1) &&
                (a.shape(2) == 1 || st[2] >= std::max(D, 1));
  if (direct) {
    o.keep = a;
    o.ptr = reinterpret_cast<const M*>(a.data<T>());
    o.sb = st[0];
    o.sh = st[1];
    o.sl = a.shape(2) == 1 ? std::max(D, 1) : st[2];
    return o;
  }
  array c = cpu::ensure_row_contiguous(a);
  const T* src = c.data<T>();
  if constexpr (std::is_same_v<T, M>) {
    o.keep = c;
    o.ptr = src;
  } else {
    o.owned =
        std::make_unique_for_overwrite<M[]>(std::max<size_t>(c.size(), 1));
    M* dst = o.owned.get();
    cpu::parallel_for(c.size(), cpu::kElementwiseGrain,
                      [&](int64_t lo, int64_t hi) {
                        for (int64_t i = lo; i < hi; ++i) {
                          dst[i] = static_cast<M>(src[i]);
                        }
                      });
    o.ptr = dst;
  }
  o.sl = std::max(D, 1);
  o.sh = o.sl * a.shape(2);
  o.sb = o.sh * a.shape(1);
  return o;
}

template <typename T>
void sdpa_kernel(const std::vector<array>& inputs, array& out, float scale,
                 bool causal, ScaledDotProductAttention::MaskKind kind) {
  using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
  out.set_data(std::max<size_t>(out.nbytes(), 1));
  const array& qa = inputs[0];
  const int B = qa.shape(0), Hq = qa.shape(1), Lq = qa.shape(2),
            D = qa.shape(3);
  const int Hkv = inputs[1].shape(1), Lk = inputs[1].shape(2),
            Dv = inputs[2].shape(3);
  if (out.size() == 0) {
    return;
  }
  if (Lk == 0) {  // empty softmax: the product with no keys is zero
    std::fill(out.data<T>(), out.data<T>() + out.size(), T(0));
    return;
  }
  const int R = Hq / Hkv;
  auto q = operand<T, M>(qa);
  auto k = operand<T, M>(inputs[1]);
  auto v = operand<T, M>(inputs[2]);
  const bool has_mask = kind != ScaledDotProductAttention::None;
  const array* mask = has_mask ? &inputs[3] : nullptr;
  const int64_t nblocks = (Lq + kBlock - 1) / kBlock;
  const M ninf = -std::numeric_limits<M>::infinity();
  const M nan = std::numeric_limits<M>::quiet_NaN();
  T* dst = out.data<T>();
  auto run = [&](int64_t lo, int64_t hi) {
    auto s = std::make_unique_for_overwrite<M[]>(kBlock * std::max(Lk, 1));
    std::unique_ptr<M[]> obuf;
    if constexpr (!std::is_same_v<T, M>) {
      obuf = std::make_unique_for_overwrite<M[]>(kBlock * std::max(Dv, 1));
    }
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t bh = task / nblocks, blk = task % nblocks;
      const int b = static_cast<int>(bh / Hq), h = static_cast<int>(bh % Hq);
      const int hk = h / R;
      const int i0 = static_cast<int>(blk * kBlock);
      const int m = std::min<int>(kBlock, Lq - i0);
      // Keys visible to the last query of the block.
      const int kend = causal ? std::clamp(i0 + m + Lk - Lq, 0, Lk) : Lk;
      T* orow = dst + ((static_cast<int64_t>(b) * Hq + h) * Lq + i0) * Dv;
      M* o = nullptr;
      if constexpr (std::is_same_v<T, M>) {
        o = orow;
      } else {
        o = obuf.get();
      }
      if (kend == 0) {
        std::fill(o, o + static_cast<int64_t>(m) * Dv, nan);
      } else {
        const M* qp = q.ptr + b * q.sb + h * q.sh + i0 * q.sl;
        const M* kp = k.ptr + b * k.sb + hk * k.sh;
        const M* vp = v.ptr + b * v.sb + hk * v.sh;
        if (D == 0) {
          std::fill(s.get(), s.get() + static_cast<int64_t>(m) * kend, M(0));
        } else {
          gemm(true, m, kend, D, static_cast<M>(scale), qp, q.sl, kp, k.sl,
               s.get(), kend);
        }
        for (int r = 0; r < m; ++r) {
          const int i = i0 + r;
          M* row = s.get() + static_cast<int64_t>(r) * kend;
          const int lim = causal ? std::clamp(i + Lk - Lq + 1, 0, kend) : kend;
          if (mask) {
            const auto& ms = mask->strides();
            const int64_t base = b * ms[0] + h * ms[1] + i * ms[2];
            const int64_t mj = ms[3];
            if (kind == ScaledDotProductAttention::Bool) {
              const bool* mp = mask->data<bool>() + base;
              for (int j = 0; j < lim; ++j) {
                row[j] = mp[j * mj] ? row[j] : ninf;
              }
            } else {
              const T* mp = mask->data<T>() + base;
              for (int j = 0; j < lim; ++j) {
                row[j] += static_cast<M>(mp[j * mj]);
              }
            }
          }
          std::fill(row + lim, row + kend, ninf);
          M mx = ninf;
          for (int j = 0; j < lim; ++j) {
            mx = std::max(mx, row[j]);
          }
          if (mx == ninf || std::isnan(mx)) {
            std::fill(row, row + kend,
                      nan);  // no visible key: nan (as softmax)
            continue;
          }
          for (int j = 0; j < kend; ++j) {
            row[j] -= mx;
          }
          vexp(row, kend);
          M sum = 0;
          for (int j = 0; j < kend; ++j) {
            sum += row[j];
          }
          const M inv = M(1) / sum;
          for (int j = 0; j < kend; ++j) {
            row[j] *= inv;
          }
        }
        if (Dv > 0) {
          gemm(false, m, Dv, kend, M(1), s.get(), kend, vp, v.sl, o, Dv);
        }
      }
      if constexpr (!std::is_same_v<T, M>) {
        for (int64_t e = 0; e < static_cast<int64_t>(m) * Dv; ++e) {
          orow[e] = static_cast<T>(o[e]);
        }
      }
    }
  };
  const int64_t tasks = static_cast<int64_t>(B) * Hq * nblocks;
  const int64_t work =
      static_cast<int64_t>(std::min<int>(Lq, kBlock)) * Lk * (D + Dv + 8);
  cpu::parallel_for(
      tasks, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(work, 1)), run);
}

}  // namespace

void ScaledDotProductAttention::eval_cpu(const std::vector<array>& inputs,
                                         std::vector<array>& outputs) {
  dispatch<FloatTypes>(
      inputs[0].dtype(), "scaled_dot_product_attention", [&](auto tag) {
        using T = typename decltype(tag)::type;
        sdpa_kernel<T>(inputs, outputs[0], scale_, causal_, mask_);
      });
}

}  // namespace fluxion::fast
