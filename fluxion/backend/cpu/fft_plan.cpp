// Mixed-radix Stockham and Bluestein plans (see fft_plan.h).
//
// Stockham indexing: after the stages with radices p_1 ... p_s (product
// l), position k * (n / l) + r holds the length-l DFT, at frequency k, of
// the subsequence x[r + (n / l) t]. A stage of radix p combines p of these:
// with m = n / (l p), for k < l and r < m,
//   a_q = src[k p m + q m + r] * w_{lp}^{q k}    (q < p)
//   dst[(k + l u) m + r] = sum_q a_q w_p^{q u}     (u < p)
// Start: l = 1 (the input itself); end: l = n (the transform, in order).
// The inner loop runs over r with fixed twiddles.
#include "fluxion/backend/cpu/fft_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <numbers>
#include <type_traits>
#include <utility>

#include "fluxion/backend/cpu/thread_pool.h"

#define FLUXION_FFT_ISA base
#include "fluxion/backend/cpu/fft_stages.h"
#undef FLUXION_FFT_ISA

namespace fluxion::cpu::fft {

#if defined(__x86_64__) && defined(__GNUC__)
// fft_avx2.cpp: the same stage compiled for AVX2 + FMA.
void stage_avx2(bool inverse, int p, int64_t l, int64_t m, const cfloat* tw,
                const float* cs, const float* sn, const cfloat* src,
                cfloat* dst, int64_t k0, int64_t k1, int64_t r0, int64_t r1);
#endif

namespace {

constexpr int kMaxGenericRadix = 97;

inline cfloat cmul(cfloat a, cfloat b) {
  return {a.real() * b.real() - a.imag() * b.imag(),
          a.real() * b.imag() + a.imag() * b.real()};
}
cfloat unit_root(int64_t num, int64_t den, bool inverse) {
  // exp(-+ 2 pi i num / den), with num reduced first for accuracy.
  num %= den;
  double a = 2.0 * std::numbers::pi * static_cast<double>(num) /
             static_cast<double>(den);
  double s = inverse ? std::sin(a) : -std::sin(a);
  return {static_cast<float>(std::cos(a)), static_cast<float>(s)};
}

std::vector<int> factorize(int64_t n) {
  std::vector<int> f;
  while (n % 4 == 0) {
    f.push_back(4);
    n /= 4;
  }
  if (n % 2 == 0) {
    f.push_back(2);
    n /= 2;
  }
  for (int64_t p = 3; p * p <= n; p += 2) {
    while (n % p == 0) {
      f.push_back(static_cast<int>(p));
      n /= p;
    }
  }
  if (n > 1) {
    if (n > std::numeric_limits<int>::max()) {
      f.push_back(std::numeric_limits<int>::max());  // marks "too large"
    } else {
      f.push_back(static_cast<int>(n));
    }
  }
  return f;
}

int64_t next_pow2(int64_t n) {
  int64_t m = 1;
  while (m < n) {
    m <<= 1;
  }
  return m;
}

double bluestein_cost(int64_t n) {
  int64_t m = next_pow2(2 * n - 1);
  return 2 * Plan::direct_cost(m) + 12.0 * m + 8.0 * n;
}

}  // namespace

double Plan::direct_cost(int64_t n) {
  double per = 0;
  for (int p : factorize(n)) {
    if (p > kMaxGenericRadix) {
      return std::numeric_limits<double>::infinity();
    }
    per += p == 2   ? 9
           : p == 3 ? 13
           : p == 4 ? 12.5
           : p == 5 ? 17
                    : 6.0 * p + 10;
  }
  return per * static_cast<double>(n);
}

Plan::Plan(int64_t n, bool inverse) : n_(n), inverse_(inverse) {
  if (n > 1 && bluestein_cost(n) < direct_cost(n)) {
    m_ = next_pow2(2 * n - 1);
    sub_fwd_ = get_plan(m_, false);
    sub_inv_ = get_plan(m_, true);
    chirp_.resize(n);
    for (int64_t j = 0; j < n; ++j) {
      // exp(-+ i pi j^2 / n) = unit_root(j^2 mod 2n, 2n).
      chirp_[j] = unit_root((j * j) % (2 * n), 2 * n, inverse);
    }
    std::vector<cfloat> h(m_, cfloat(0)), work(m_);
    float scale = 1.0f / static_cast<float>(m_);
    h[0] = std::conj(chirp_[0]) * scale;
    for (int64_t t = 1; t < n; ++t) {
      h[t] = h[m_ - t] = std::conj(chirp_[t]) * scale;
    }
    kernel_.resize(m_);
    sub_fwd_->execute(h.data(), kernel_.data(), work.data());
    work_ = 2 * m_ + sub_fwd_->work_size();
    return;
  }
  int64_t l = 1;
  for (int p : factorize(n)) {
    Stage st{p, l, n / (l * p), {}, {}, {}};
    st.tw.resize(l * (p - 1));
    if (p > 5) {
      for (int j = 0; j < p; ++j) {
        double a = 2.0 * std::numbers::pi * j / p;
        st.cs.push_back(static_cast<float>(std::cos(a)));
        st.sn.push_back(static_cast<float>(std::sin(a)));
      }
    }
    for (int64_t k = 0; k < l; ++k) {
      for (int q = 1; q < p; ++q) {
        st.tw[k * (p - 1) + q - 1] = unit_root(q * k, l * p, inverse);
      }
    }
    stages_.push_back(std::move(st));
    l *= p;
  }
  work_ = n;
}

namespace {

using StageFn = void (*)(bool, int, int64_t, int64_t, const cfloat*,
                         const float*, const float*, const cfloat*, cfloat*,
                         int64_t, int64_t, int64_t, int64_t);

// FLUXION_FFT_DISABLE_AVX2=1 forces the baseline kernels (for testing them
// on machines with AVX2).
StageFn pick_stage() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const char* off = std::getenv("FLUXION_FFT_DISABLE_AVX2");
  bool disabled = off != nullptr && off[0] != '\0' && off[0] != '0';
  if (!disabled && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma")) {
    return &stage_avx2;
  }
#endif
  return &base::stage;
}

// Elements below which a stage stays on one thread.
constexpr int64_t kStageGrain = 1 << 15;

}  // namespace

void Plan::run_stage(const Stage& st, const cfloat* src, cfloat* dst,
                     bool parallel) const {
  static const StageFn fn = pick_stage();
  const cfloat* tw = st.tw.data();
  const float* cs = st.cs.data();
  const float* sn = st.sn.data();
  if (!parallel || n_ < 2 * kStageGrain) {
    fn(inverse_, st.p, st.l, st.m, tw, cs, sn, src, dst, 0, st.l, 0, st.m);
    return;
  }
  // Split the longer of the two independent loops.
  if (st.l >= st.m) {
    int64_t grain = std::max<int64_t>(1, kStageGrain / (st.p * st.m));
    parallel_for(st.l, grain, [&](int64_t k0, int64_t k1) {
      fn(inverse_, st.p, st.l, st.m, tw, cs, sn, src, dst, k0, k1, 0, st.m);
    });
  } else {
    // Chunks of 8 columns keep vectors whole.
    int64_t cols = (st.m + 7) / 8;
    int64_t grain = std::max<int64_t>(1, kStageGrain / (st.p * st.l * 8));
    parallel_for(cols, grain, [&](int64_t c0, int64_t c1) {
      fn(inverse_, st.p, st.l, st.m, tw, cs, sn, src, dst, 0, st.l, c0 * 8,
         std::min(st.m, c1 * 8));
    });
  }
}

void Plan::bluestein(const cfloat* in, cfloat* out, cfloat* work,
                     bool parallel) const {
  cfloat* a = work;
  cfloat* b = work + m_;
  cfloat* sub = work + 2 * m_;
  for (int64_t j = 0; j < n_; ++j) {
    a[j] = cmul(in[j], chirp_[j]);
  }
  std::fill(a + n_, a + m_, cfloat(0));
  sub_fwd_->execute(a, b, sub, parallel);
  for (int64_t j = 0; j < m_; ++j) {
    b[j] = cmul(b[j], kernel_[j]);
  }
  sub_inv_->execute(b, a, sub, parallel);
  for (int64_t k = 0; k < n_; ++k) {
    out[k] = cmul(a[k], chirp_[k]);
  }
}

void Plan::execute(const cfloat* in, cfloat* out, cfloat* work,
                   bool parallel) const {
  if (m_ > 0) {
    bluestein(in, out, work, parallel);
    return;
  }
  size_t s = stages_.size();
  if (s == 0) {
    std::copy(in, in + n_, out);
    return;
  }
  // Alternate so that the last stage writes `out`.
  const cfloat* src = in;
  for (size_t i = 0; i < s; ++i) {
    cfloat* dst = ((s - 1 - i) % 2 == 0) ? out : work;
    run_stage(stages_[i], src, dst, parallel);
    src = dst;
  }
}

void Plan::execute_batch(const cfloat* in, cfloat* out, cfloat* work,
                         int64_t b) const {
  static const StageFn fn = pick_stage();
  size_t s = stages_.size();
  if (s == 0) {
    std::copy(in, in + n_ * b, out);
    return;
  }
  // Element t of transform j at t * b + j: with columns r' = r * b + j the
  // Stockham indices are those of a stage with m * b columns.
  const cfloat* src = in;
  for (size_t i = 0; i < s; ++i) {
    const Stage& st = stages_[i];
    cfloat* dst = ((s - 1 - i) % 2 == 0) ? out : work;
    int64_t mb = st.m * b;
    fn(inverse_, st.p, st.l, mb, st.tw.data(), st.cs.data(), st.sn.data(), src,
       dst, 0, st.l, 0, mb);
    src = dst;
  }
}

namespace {

template <typename P>
std::shared_ptr<const P> cached(int64_t n, bool inverse) {
  // Plans are immutable once built; the cache holds at most kMax of them
  // (cleared when full: rebuilding a plan is cheap next to holding many).
  static std::mutex mu;
  static std::map<std::pair<int64_t, bool>, std::shared_ptr<const P>> cache;
  constexpr size_t kMax = 64;
  auto key = std::make_pair(n, inverse);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) {
      return it->second;
    }
  }
  // Built outside the lock: a Bluestein plan fetches its sub-plans.
  auto plan = std::make_shared<const P>(n, inverse);
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= kMax) {
    cache.clear();
  }
  return cache.emplace(key, plan).first->second;
}

}  // namespace

std::shared_ptr<const Plan> get_plan(int64_t n, bool inverse) {
  return cached<Plan>(n, inverse);
}
std::shared_ptr<const RealPlan> get_real_plan(int64_t n, bool inverse) {
  return cached<RealPlan>(n, inverse);
}

// --- real transforms ---
//
// Even n = 2h: z_j = x_{2j} + i x_{2j+1} has the length-h transform
// Z_k = E_k + i O_k, where E and O are the transforms of the even and odd
// samples; E_k = (Z_k + conj Z_{h-k}) / 2, O_k = (Z_k - conj Z_{h-k}) / 2i,
// and X_k = E_k + w^k O_k with w = exp(-2 pi i / n). The inverse runs the
// same relations backwards.

RealPlan::RealPlan(int64_t n, bool inverse) : n_(n) {
  if (n % 2 == 0) {
    int64_t h = n / 2;
    plan_ = get_plan(h, inverse);
    w_.resize(h + 1);
    for (int64_t k = 0; k <= h; ++k) {
      w_[k] = unit_root(k, n, false);
    }
    work_ = h + plan_->work_size();
  } else {
    plan_ = get_plan(n, inverse);
    work_ = 2 * n + plan_->work_size();
  }
}

void RealPlan::forward(const float* in, cfloat* out, cfloat* work,
                       bool parallel) const {
  if (n_ % 2 == 0) {
    int64_t h = n_ / 2;
    cfloat* z = work;
    plan_->execute(reinterpret_cast<const cfloat*>(in), z, work + h, parallel);
    for (int64_t k = 0; k <= h; ++k) {
      cfloat zk = z[k == h ? 0 : k];
      cfloat zc = std::conj(z[k == 0 ? 0 : h - k]);
      cfloat e = 0.5f * (zk + zc);
      cfloat o = cfloat(0, -0.5f) * (zk - zc);
      out[k] = e + cmul(w_[k], o);
    }
    return;
  }
  cfloat* x = work;
  cfloat* y = work + n_;
  for (int64_t j = 0; j < n_; ++j) {
    x[j] = cfloat(in[j], 0.0f);
  }
  plan_->execute(x, y, work + 2 * n_, parallel);
  std::copy(y, y + n_ / 2 + 1, out);
}

void RealPlan::backward(const cfloat* in, float* out, cfloat* work,
                        bool parallel) const {
  if (n_ % 2 == 0) {
    // 2 Z_k = (X_k + conj X_{h-k}) + i conj(w^k) (X_k - conj X_{h-k}); the
    // unnormalized inverse of 2Z is n times the packed output, which is
    // what an unnormalized inverse transform returns.
    int64_t h = n_ / 2;
    cfloat* z = work;
    cfloat x0(in[0].real(), 0.0f), xh(in[h].real(), 0.0f);
    for (int64_t k = 0; k < h; ++k) {
      cfloat xk = k == 0 ? x0 : in[k];
      cfloat xc = k == 0 ? xh : std::conj(in[h - k]);
      cfloat e = xk + xc;
      cfloat o = cmul(std::conj(w_[k]), xk - xc);
      z[k] = e + cfloat(-o.imag(), o.real());
    }
    plan_->execute(z, reinterpret_cast<cfloat*>(out), work + h, parallel);
    return;
  }
  cfloat* x = work;
  cfloat* y = work + n_;
  x[0] = cfloat(in[0].real(), 0.0f);
  for (int64_t k = 1; k <= n_ / 2; ++k) {
    x[k] = in[k];
    x[n_ - k] = std::conj(in[k]);
  }
  plan_->execute(x, y, work + 2 * n_, parallel);
  for (int64_t j = 0; j < n_; ++j) {
    out[j] = y[j].real();
  }
}

}  // namespace fluxion::cpu::fft
