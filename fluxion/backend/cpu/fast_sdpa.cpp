// Scaled dot-product attention as gemm-softmax-gemm: for a block of queries
// of one (batch, head), S = scale * Q K^T over the keys the block can see
// (a causal mask skips the hidden ones), then mask and softmax per row
// (vector exp), then O = P V. Three schedules:
//  - few queries (decoding): per-query dot products and axpys, memory
//    bound, (batch, head) pairs over the thread pool;
//  - small products: blocks of 32 queries over the pool, each with
//    single-threaded BLAS calls;
//  - large products: heads one after another in chunks of queries, each
//    product threaded by OpenBLAS itself and the softmax rows spread over
//    the pool (OpenBLAS called from several pool threads at once would
//    start its own threads from each and oversubscribe the cores).
// float16/bfloat16 operands are converted to float32 once; float32 and
// float64 operands with unit feature stride are read in place (transposed
// [B, L, H, D] layouts and broadcast batches included).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/row_math.h"
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

// Row reductions with eight independent accumulators: a single running
// max or sum is one long dependency chain the compiler may not reorder
// (and was most of the fused kernel's time at L = 1024).
template <typename M>
M row_max(const M* x, int n) {
  // NaNs are skipped here: they still reach the row through exp and the
  // sum, so a row holding one becomes NaN as in the composed form.
  M acc[8];
  std::fill(acc, acc + 8, -std::numeric_limits<M>::infinity());
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) {
      acc[l] = acc[l] < x[j + l] ? x[j + l] : acc[l];
    }
  }
  for (; j < n; ++j) {
    acc[0] = acc[0] < x[j] ? x[j] : acc[0];
  }
  M mx = acc[0];
  for (int l = 1; l < 8; ++l) {
    mx = mx < acc[l] ? acc[l] : mx;
  }
  return mx;
}

template <typename M>
M row_sum(const M* x, int n) {
  M acc[8] = {};
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) {
      acc[l] += x[j + l];
    }
  }
  M sum = 0;
  for (; j < n; ++j) {
    sum += x[j];
  }
  for (int l = 0; l < 8; ++l) {
    sum += acc[l];
  }
  return sum;
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

// OpenBLAS threads a gemm of at least this many multiply-adds; smaller
// calls stay on the calling thread, so pool threads may make them.
constexpr int64_t kBlasThreaded = 64 * 64 * 64;

template <typename T, typename M>
struct Sdpa {
  int B, Hq, Lq, D, Hkv, Lk, Dv, R;
  bool causal;
  ScaledDotProductAttention::MaskKind kind;
  const array* mask;
  const array* sinks;  // [Hq] or null
  M scale;
  Operand<M> q, k, v;
  T* dst;
  M* lse = nullptr;  // [B, Hq, Lq] when the logsumexp is wanted

  void set_lse(int b, int h, int i, M value) const {
    if (lse) {
      lse[(static_cast<int64_t>(b) * Hq + h) * Lq + i] = value;
    }
  }

  M sink(int h) const {
    return static_cast<M>(sinks->data<T>()[h * sinks->strides()[0]]);
  }

  // A query that sees no key (causal, Lq > Lk): as MLX, all its scores are
  // the lowest finite value, so it attends uniformly to every key (or,
  // with a sink, puts ~all its weight on the sink).
  void empty_row(M* out, int b, int h, int i) const {
    // Every score is the lowest finite value.
    set_lse(b, h, i,
            std::numeric_limits<M>::lowest() + std::log(static_cast<M>(Lk)));
    M w = M(1) / static_cast<M>(Lk);
    if (sinks) {
      const M lo = std::numeric_limits<M>::lowest();
      const M sk = sink(h);
      const M mx = std::max(lo, sk);
      const M e = std::exp(lo - mx);
      w = e / (static_cast<M>(Lk) * e + std::exp(sk - mx));
      if (std::isnan(sk)) {
        w = sk;
      }
    }
    std::fill(out, out + Dv, M(0));
    const M* vp = vmat(b, h);
    for (int j = 0; j < Lk; ++j) {
      const M* vr = vp + j * v.sl;
      for (int d = 0; d < Dv; ++d) {
        out[d] += vr[d];
      }
    }
    for (int d = 0; d < Dv; ++d) {
      out[d] *= w;
    }
  }

  const M* qrow(int b, int h, int i) const {
    return q.ptr + b * q.sb + h * q.sh + i * q.sl;
  }
  const M* kmat(int b, int h) const {
    return k.ptr + b * k.sb + (h / R) * k.sh;
  }
  const M* vmat(int b, int h) const {
    return v.ptr + b * v.sb + (h / R) * v.sh;
  }
  T* orow(int b, int h, int i) const {
    return dst + ((static_cast<int64_t>(b) * Hq + h) * Lq + i) * Dv;
  }
  // Keys query i can see under the causal mask (all without it).
  int visible(int i) const {
    return causal ? std::clamp(i + Lk - Lq + 1, 0, Lk) : Lk;
  }

  // Turns the first `kend` scores of query i (already scaled) into
  // probabilities: mask, causal limit, softmax (with the head's sink as one
  // more logit). Keys a boolean mask hides score the lowest finite value
  // (MLX), so a fully hidden row is uniform; causally hidden keys of a row
  // that sees some get no weight. Returns false (probabilities zero) for a
  // row that sees no key at all, which empty_row computes instead. A row
  // whose scores are all -inf (an additive mask) or nan is nan.
  bool softmax_row(M* row, int b, int h, int i, int kend) const {
    const M ninf = -std::numeric_limits<M>::infinity();
    const int lim = std::min(visible(i), kend);
    if (lim == 0) {
      std::fill(row, row + kend, M(0));
      return false;
    }
    if (mask) {
      const auto& ms = mask->strides();
      const int64_t base = b * ms[0] + h * ms[1] + i * ms[2];
      const int64_t mj = ms[3];
      if (kind == ScaledDotProductAttention::Bool) {
        const M lowest = std::numeric_limits<M>::lowest();
        const bool* mp = mask->data<bool>() + base;
        for (int j = 0; j < lim; ++j) {
          row[j] = mp[j * mj] ? row[j] : lowest;
        }
      } else {
        const T* mp = mask->data<T>() + base;
        for (int j = 0; j < lim; ++j) {
          row[j] += static_cast<M>(mp[j * mj]);
        }
      }
    }
    std::fill(row + lim, row + kend, ninf);
    M mx = row_max(row, lim);
    M sk = 0;
    if (sinks) {
      sk = sink(h);
      mx = std::isnan(sk) ? sk : std::max(mx, sk);
    }
    if (mx == ninf || std::isnan(mx)) {
      std::fill(row, row + kend, std::numeric_limits<M>::quiet_NaN());
      set_lse(b, h, i, mx);
      return true;
    }
    for (int j = 0; j < kend; ++j) {
      row[j] -= mx;
    }
    cpu::exp_in_place(row, kend);
    M total = row_sum(row, kend);
    if (sinks) {
      total += std::exp(sk - mx);
    }
    set_lse(b, h, i, mx + std::log(total));
    const M inv = M(1) / total;
    for (int j = 0; j < kend; ++j) {
      row[j] *= inv;
    }
    return true;
  }

  void store(const M* o, T* out, int64_t n) const {
    if constexpr (!std::is_same_v<T, M>) {
      for (int64_t e = 0; e < n; ++e) {
        out[e] = static_cast<T>(o[e]);
      }
    }
  }

  // Few queries (decoding): dot products and axpys per query, memory
  // bound, tasks (b, h) over the pool.
  void run_rows() const {
    cpu::parallel_for(
        int64_t{B} * Hq,
        std::max<int64_t>(1, (1 << 16) / (int64_t{Lq} * Lk * (D + Dv) + 1)),
        [&](int64_t lo, int64_t hi) {
          auto s = std::make_unique_for_overwrite<M[]>(Lk);
          auto o = std::make_unique<M[]>(std::max(Dv, 1));
          for (int64_t t = lo; t < hi; ++t) {
            const int b = static_cast<int>(t / Hq),
                      h = static_cast<int>(t % Hq);
            const M* kp = kmat(b, h);
            const M* vp = vmat(b, h);
            for (int i = 0; i < Lq; ++i) {
              const M* qp = qrow(b, h, i);
              const int kend = visible(i);
              for (int j = 0; j < kend; ++j) {
                const M* kr = kp + j * k.sl;
                M a[8] = {};
                int d = 0;
                for (; d + 8 <= D; d += 8) {
                  for (int l = 0; l < 8; ++l) {
                    a[l] += qp[d + l] * kr[d + l];
                  }
                }
                M acc = ((a[0] + a[1]) + (a[2] + a[3])) +
                        ((a[4] + a[5]) + (a[6] + a[7]));
                for (; d < D; ++d) {
                  acc += qp[d] * kr[d];
                }
                s[j] = acc * scale;
              }
              M* out = nullptr;
              if constexpr (std::is_same_v<T, M>) {
                out = orow(b, h, i);
              } else {
                out = o.get();
              }
              std::fill(out, out + Dv, M(0));
              if (kend == 0 || !softmax_row(s.get(), b, h, i, kend)) {
                empty_row(out, b, h, i);
              } else {
                for (int j = 0; j < kend; ++j) {
                  const M p = s[j];
                  const M* vr = vp + j * v.sl;
                  for (int d = 0; d < Dv; ++d) {
                    out[d] += p * vr[d];
                  }
                }
              }
              store(out, orow(b, h, i), Dv);
            }
          }
        });
  }

  // One block of queries [i0, i0 + m) of head (b, h): S = scale Q K^T over
  // the keys the block can see, softmax rows (over the pool when
  // `parallel_rows`), O = P V.
  void run_block(int b, int h, int i0, int m, M* s, M* obuf,
                 bool parallel_rows) const {
    const int kend = visible(i0 + m - 1);
    T* outp = orow(b, h, i0);
    M* o = nullptr;
    if constexpr (std::is_same_v<T, M>) {
      o = outp;
    } else {
      o = obuf;
    }
    if (kend == 0) {
      for (int r = 0; r < m; ++r) {
        empty_row(o + int64_t{r} * Dv, b, h, i0 + r);
      }
    } else {
      if (D == 0) {
        std::fill(s, s + int64_t{m} * kend, M(0));
      } else {
        gemm(true, m, kend, D, scale, qrow(b, h, i0), q.sl, kmat(b, h), k.sl, s,
             kend);
      }
      // Causal rows of the block that see no key (only when Lq > Lk) are
      // computed after the product.
      int empty = 0;
      for (int r = 0; r < m && visible(i0 + r) == 0; ++r) {
        empty = r + 1;
      }
      auto rows = [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
          softmax_row(s + r * kend, b, h, i0 + static_cast<int>(r), kend);
        }
      };
      if (parallel_rows) {
        cpu::parallel_for(m, std::max<int64_t>(1, 8192 / kend), rows);
      } else {
        rows(0, m);
      }
      if (Dv > 0) {
        gemm(false, m, Dv, kend, M(1), s, kend, vmat(b, h), v.sl, o, Dv);
      }
      for (int r = 0; r < empty; ++r) {
        empty_row(o + int64_t{r} * Dv, b, h, i0 + r);
      }
    }
    store(o, outp, int64_t{m} * Dv);
  }

  void run() const {
    if (Lq <= 4) {
      run_rows();
      return;
    }
    const int64_t wide = std::max(D, Dv);
    if (int64_t{kBlock} * Lk * wide < kBlasThreaded) {
      // Small gemms (single-threaded in OpenBLAS): blocks over the pool.
      const int64_t nblocks = (Lq + kBlock - 1) / kBlock;
      cpu::parallel_for(
          int64_t{B} * Hq * nblocks,
          std::max<int64_t>(1, (1 << 16) / (kBlock * Lk * (wide + 8))),
          [&](int64_t lo, int64_t hi) {
            auto s = std::make_unique_for_overwrite<M[]>(kBlock * Lk);
            auto o =
                std::make_unique_for_overwrite<M[]>(kBlock * std::max(Dv, 1));
            for (int64_t t = lo; t < hi; ++t) {
              const int64_t bh = t / nblocks;
              const int i0 = static_cast<int>((t % nblocks) * kBlock);
              run_block(static_cast<int>(bh / Hq), static_cast<int>(bh % Hq),
                        i0, std::min<int>(kBlock, Lq - i0), s.get(), o.get(),
                        false);
            }
          });
      return;
    }
    // Large gemms: one head at a time in chunks of queries, OpenBLAS
    // threading each product and the pool the softmax rows. Chunks bound
    // the scores' memory (and under a causal mask skip hidden keys).
    int chunk = static_cast<int>(
        std::clamp<int64_t>((int64_t{1} << 20) / Lk, kBlock, Lq));
    chunk = std::min(chunk, causal ? 128 : 1024);
    auto s = std::make_unique_for_overwrite<M[]>(int64_t{chunk} * Lk);
    auto o =
        std::make_unique_for_overwrite<M[]>(int64_t{chunk} * std::max(Dv, 1));
    for (int b = 0; b < B; ++b) {
      for (int h = 0; h < Hq; ++h) {
        for (int i0 = 0; i0 < Lq; i0 += chunk) {
          run_block(b, h, i0, std::min(chunk, Lq - i0), s.get(), o.get(), true);
        }
      }
    }
  }
};

template <typename T>
void sdpa_kernel(const std::vector<array>& inputs, std::vector<array>& outs,
                 float scale, bool causal,
                 ScaledDotProductAttention::MaskKind kind, bool has_sinks) {
  using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
  array& out = outs[0];
  out.set_data(std::max<size_t>(out.nbytes(), 1));
  M* lse = nullptr;
  if (outs.size() > 1) {
    outs[1].set_data(std::max<size_t>(outs[1].nbytes(), 1));
    lse = outs[1].data<M>();
  }
  if (out.size() == 0) {
    if (lse) {  // no value features (Dv = 0): nothing computed the rows
      std::fill(lse, lse + outs[1].size(),
                std::numeric_limits<M>::quiet_NaN());
    }
    return;
  }
  const array& qa = inputs[0];
  Sdpa<T, M> p{qa.shape(0),
               qa.shape(1),
               qa.shape(2),
               qa.shape(3),
               inputs[1].shape(1),
               inputs[1].shape(2),
               inputs[2].shape(3),
               qa.shape(1) / inputs[1].shape(1),
               causal,
               kind,
               kind == ScaledDotProductAttention::None ? nullptr : &inputs[3],
               has_sinks ? &inputs.back() : nullptr,
               static_cast<M>(scale),
               {},
               {},
               {},
               out.data<T>()};
  p.lse = lse;
  if (p.Lk == 0) {  // empty softmax: the product with no keys is zero
    std::fill(p.dst, p.dst + out.size(), T(0));
    if (lse) {
      std::fill(lse, lse + outs[1].size(), -std::numeric_limits<M>::infinity());
    }
    return;
  }
  p.q = operand<T, M>(qa);
  p.k = operand<T, M>(inputs[1]);
  p.v = operand<T, M>(inputs[2]);
  p.run();
}

}  // namespace

void ScaledDotProductAttention::eval_cpu(const std::vector<array>& inputs,
                                         std::vector<array>& outputs) {
  dispatch<FloatTypes>(
      inputs[0].dtype(), "scaled_dot_product_attention", [&](auto tag) {
        using T = typename decltype(tag)::type;
        sdpa_kernel<T>(inputs, outputs, scale_, causal_, mask_, has_sinks_);
      });
}

}  // namespace fluxion::fast
