// One Stockham stage (see fft_plan.cpp for the indexing), written once over
// a small complex-vector abstraction and compiled twice: in fft_plan.cpp for
// the baseline ISA (SSE2 on x86-64, 2 complex per vector) and in
// fft_avx2.cpp under `#pragma GCC target("avx2,fma")` (4 per vector), each
// inside its own namespace FLUXION_FFT_ISA so the two never mix at link
// time. The including file includes every standard header first.
//
// The inner loop runs over r (contiguous, fixed twiddles) in vectors, with
// a scalar tail; the generic odd radix is scalar.
#include <complex>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#if defined(FLUXION_FFT_AVX2)
// GCC does not apply `#pragma GCC target` to functions defined inside
// classes, so every function here carries the attribute itself.
#define FLUXION_FFT_TGT __attribute__((target("avx2,fma")))
#else
#define FLUXION_FFT_TGT
#endif

namespace fluxion::cpu::fft::FLUXION_FFT_ISA {

using cf = std::complex<float>;

// --- scalar "vector" (one complex) ---
struct S {
  static constexpr int W = 1;
  cf v;
  FLUXION_FFT_TGT static S load(const cf* p) { return {*p}; }
  FLUXION_FFT_TGT void store(cf* p) const { *p = v; }
  FLUXION_FFT_TGT friend S operator+(S a, S b) { return {a.v + b.v}; }
  FLUXION_FFT_TGT friend S operator-(S a, S b) { return {a.v - b.v}; }
  FLUXION_FFT_TGT friend S operator*(S a, float c) { return {a.v * c}; }
};
struct STw {
  cf w;
};
FLUXION_FFT_TGT inline STw twiddle(S*, cf w) { return {w}; }
FLUXION_FFT_TGT inline S cmul(S a, const STw& t) {
  return {{a.v.real() * t.w.real() - a.v.imag() * t.w.imag(),
           a.v.real() * t.w.imag() + a.v.imag() * t.w.real()}};
}
// Multiplication by -i (forward) or +i (inverse).
template <bool Inv>
FLUXION_FFT_TGT inline S rot(S a) {
  return Inv ? S{{-a.v.imag(), a.v.real()}} : S{{a.v.imag(), -a.v.real()}};
}

#if defined(FLUXION_FFT_AVX2)
struct V {
  static constexpr int W = 4;
  __m256 v;
  FLUXION_FFT_TGT static V load(const cf* p) {
    return {_mm256_loadu_ps(reinterpret_cast<const float*>(p))};
  }
  FLUXION_FFT_TGT void store(cf* p) const {
    _mm256_storeu_ps(reinterpret_cast<float*>(p), v);
  }
  FLUXION_FFT_TGT friend V operator+(V a, V b) {
    return {_mm256_add_ps(a.v, b.v)};
  }
  FLUXION_FFT_TGT friend V operator-(V a, V b) {
    return {_mm256_sub_ps(a.v, b.v)};
  }
  FLUXION_FFT_TGT friend V operator*(V a, float c) {
    return {_mm256_mul_ps(a.v, _mm256_set1_ps(c))};
  }
};
struct VTw {
  __m256 re, im;
};
FLUXION_FFT_TGT inline VTw twiddle(V*, cf w) {
  return {_mm256_set1_ps(w.real()), _mm256_set1_ps(w.imag())};
}
FLUXION_FFT_TGT inline V cmul(V a, const VTw& t) {
  __m256 sw = _mm256_permute_ps(a.v, 0xB1);  // (im, re) pairs
  return {_mm256_fmaddsub_ps(a.v, t.re, _mm256_mul_ps(sw, t.im))};
}
template <bool Inv>
FLUXION_FFT_TGT inline V rot(V a) {
  __m256 sw = _mm256_permute_ps(a.v, 0xB1);
  // Forward (im, -re): negate the odd lanes; inverse (-im, re): the even.
  __m256 sign = Inv ? _mm256_set_ps(0.f, -0.f, 0.f, -0.f, 0.f, -0.f, 0.f, -0.f)
                    : _mm256_set_ps(-0.f, 0.f, -0.f, 0.f, -0.f, 0.f, -0.f, 0.f);
  return {_mm256_xor_ps(sw, sign)};
}
#elif defined(__SSE2__)
struct V {
  static constexpr int W = 2;
  __m128 v;
  FLUXION_FFT_TGT static V load(const cf* p) {
    return {_mm_loadu_ps(reinterpret_cast<const float*>(p))};
  }
  FLUXION_FFT_TGT void store(cf* p) const {
    _mm_storeu_ps(reinterpret_cast<float*>(p), v);
  }
  FLUXION_FFT_TGT friend V operator+(V a, V b) {
    return {_mm_add_ps(a.v, b.v)};
  }
  FLUXION_FFT_TGT friend V operator-(V a, V b) {
    return {_mm_sub_ps(a.v, b.v)};
  }
  FLUXION_FFT_TGT friend V operator*(V a, float c) {
    return {_mm_mul_ps(a.v, _mm_set1_ps(c))};
  }
};
struct VTw {
  __m128 re, im;  // im = (-w.im, w.im, -w.im, w.im)
};
FLUXION_FFT_TGT inline VTw twiddle(V*, cf w) {
  return {_mm_set1_ps(w.real()),
          _mm_set_ps(w.imag(), -w.imag(), w.imag(), -w.imag())};
}
FLUXION_FFT_TGT inline V cmul(V a, const VTw& t) {
  __m128 sw = _mm_shuffle_ps(a.v, a.v, _MM_SHUFFLE(2, 3, 0, 1));
  return {_mm_add_ps(_mm_mul_ps(a.v, t.re), _mm_mul_ps(sw, t.im))};
}
template <bool Inv>
FLUXION_FFT_TGT inline V rot(V a) {
  __m128 sw = _mm_shuffle_ps(a.v, a.v, _MM_SHUFFLE(2, 3, 0, 1));
  __m128 sign =
      Inv ? _mm_set_ps(0.f, -0.f, 0.f, -0.f) : _mm_set_ps(-0.f, 0.f, -0.f, 0.f);
  return {_mm_xor_ps(sw, sign)};
}
#else
using V = S;
using VTw = STw;
#endif

FLUXION_FFT_TGT inline VTw twiddle_of(cf w) {
  return twiddle(static_cast<V*>(nullptr), w);
}

// Butterflies at position r; Vec is V or S, T: apply twiddles.
template <bool Inv, bool T, typename Vec, typename Tw>
FLUXION_FFT_TGT inline void bf2(const cf* s, cf* d, int64_t m, int64_t lm,
                                const Tw* t, int64_t r) {
  Vec a0 = Vec::load(s + r), a1 = Vec::load(s + m + r);
  if constexpr (T) {
    a1 = cmul(a1, t[0]);
  }
  (a0 + a1).store(d + r);
  (a0 - a1).store(d + lm + r);
}

template <bool Inv, bool T, typename Vec, typename Tw>
FLUXION_FFT_TGT inline void bf3(const cf* s, cf* d, int64_t m, int64_t lm,
                                const Tw* t, int64_t r) {
  constexpr float h = 0.86602540378443864676f;  // sin(2 pi / 3)
  Vec a0 = Vec::load(s + r), a1 = Vec::load(s + m + r),
      a2 = Vec::load(s + 2 * m + r);
  if constexpr (T) {
    a1 = cmul(a1, t[0]);
    a2 = cmul(a2, t[1]);
  }
  Vec sum = a1 + a2;
  Vec mid = a0 - sum * 0.5f;
  Vec dd = rot<Inv>(a1 - a2) * h;
  (a0 + sum).store(d + r);
  (mid + dd).store(d + lm + r);
  (mid - dd).store(d + 2 * lm + r);
}

template <bool Inv, bool T, typename Vec, typename Tw>
FLUXION_FFT_TGT inline void bf4(const cf* s, cf* d, int64_t m, int64_t lm,
                                const Tw* t, int64_t r) {
  Vec a0 = Vec::load(s + r), a1 = Vec::load(s + m + r),
      a2 = Vec::load(s + 2 * m + r), a3 = Vec::load(s + 3 * m + r);
  if constexpr (T) {
    a1 = cmul(a1, t[0]);
    a2 = cmul(a2, t[1]);
    a3 = cmul(a3, t[2]);
  }
  Vec t0 = a0 + a2, t1 = a0 - a2, t2 = a1 + a3;
  Vec t3 = rot<Inv>(a1 - a3);
  (t0 + t2).store(d + r);
  (t1 + t3).store(d + lm + r);
  (t0 - t2).store(d + 2 * lm + r);
  (t1 - t3).store(d + 3 * lm + r);
}

template <bool Inv, bool T, typename Vec, typename Tw>
FLUXION_FFT_TGT inline void bf5(const cf* s, cf* d, int64_t m, int64_t lm,
                                const Tw* t, int64_t r) {
  constexpr float c1 = 0.30901699437494742410f;   // cos(2 pi / 5)
  constexpr float c2 = -0.80901699437494742410f;  // cos(4 pi / 5)
  constexpr float s1 = 0.95105651629515357212f;   // sin(2 pi / 5)
  constexpr float s2 = 0.58778525229247312917f;   // sin(4 pi / 5)
  Vec a0 = Vec::load(s + r), a1 = Vec::load(s + m + r),
      a2 = Vec::load(s + 2 * m + r), a3 = Vec::load(s + 3 * m + r),
      a4 = Vec::load(s + 4 * m + r);
  if constexpr (T) {
    a1 = cmul(a1, t[0]);
    a2 = cmul(a2, t[1]);
    a3 = cmul(a3, t[2]);
    a4 = cmul(a4, t[3]);
  }
  Vec sa = a1 + a4, da = a1 - a4, sb = a2 + a3, db = a2 - a3;
  Vec e1 = a0 + sa * c1 + sb * c2;
  Vec e2 = a0 + sa * c2 + sb * c1;
  Vec o1 = rot<Inv>(da * s1 + db * s2);
  Vec o2 = rot<Inv>(da * s2 - db * s1);
  (a0 + sa + sb).store(d + r);
  (e1 + o1).store(d + lm + r);
  (e2 + o2).store(d + 2 * lm + r);
  (e2 - o2).store(d + 3 * lm + r);
  (e1 - o1).store(d + 4 * lm + r);
}

// Any odd p: pairs (q, p - q) share cosines and sines. One butterfly at r
// (Vec wide); `a`, `sum`, `dif` are scratch of p entries.
template <bool Inv, typename Vec, typename Tw>
FLUXION_FFT_TGT inline void bf_generic_at(const cf* s, cf* d, int64_t m,
                                          int64_t lm, const Tw* t, bool twiddle,
                                          int p, const float* cs,
                                          const float* sn, int64_t r, Vec* a,
                                          Vec* sum, Vec* dif) {
  int h = p / 2;
  a[0] = Vec::load(s + r);
  for (int q = 1; q < p; ++q) {
    Vec x = Vec::load(s + q * m + r);
    a[q] = twiddle ? cmul(x, t[q - 1]) : x;
  }
  Vec total = a[0];
  for (int q = 1; q <= h; ++q) {
    sum[q] = a[q] + a[p - q];
    dif[q] = a[q] - a[p - q];
    total = total + sum[q];
  }
  total.store(d + r);
  for (int u = 1; u <= h; ++u) {
    Vec e = a[0] + sum[1] * cs[u];
    Vec o = dif[1] * sn[u];
    int j = u;
    for (int q = 2; q <= h; ++q) {
      j += u;
      if (j >= p) {
        j -= p;
      }
      e = e + sum[q] * cs[j];
      o = o + dif[q] * sn[j];
    }
    o = rot<Inv>(o);
    (e + o).store(d + u * lm + r);
    (e - o).store(d + (p - u) * lm + r);
  }
}

template <bool Inv>
FLUXION_FFT_TGT inline void bf_generic(const cf* s, cf* d, int64_t m,
                                       int64_t lm, const cf* tw, bool twiddle,
                                       int p, const float* cs, const float* sn,
                                       int64_t r0, int64_t r1) {
  constexpr int kMax = 128;
  V va[kMax], vsum[kMax / 2 + 1], vdif[kMax / 2 + 1];
  S sa[kMax], ssum[kMax / 2 + 1], sdif[kMax / 2 + 1];
  VTw vt[kMax];
  STw st[kMax];
  if (twiddle) {
    for (int q = 0; q < p - 1; ++q) {
      vt[q] = twiddle_of(tw[q]);
      st[q] = STw{tw[q]};
    }
  }
  int64_t r = r0;
  for (; r + V::W <= r1; r += V::W) {
    bf_generic_at<Inv, V>(s, d, m, lm, vt, twiddle, p, cs, sn, r, va, vsum,
                          vdif);
  }
  for (; r < r1; ++r) {
    bf_generic_at<Inv, S>(s, d, m, lm, st, twiddle, p, cs, sn, r, sa, ssum,
                          sdif);
  }
}

template <int P, bool Inv, bool T, typename Vec, typename Tw>
FLUXION_FFT_TGT inline void bf(const cf* s, cf* d, int64_t m, int64_t lm,
                               const Tw* t, int64_t r) {
  if constexpr (P == 2) {
    bf2<Inv, T, Vec>(s, d, m, lm, t, r);
  } else if constexpr (P == 3) {
    bf3<Inv, T, Vec>(s, d, m, lm, t, r);
  } else if constexpr (P == 4) {
    bf4<Inv, T, Vec>(s, d, m, lm, t, r);
  } else {
    bf5<Inv, T, Vec>(s, d, m, lm, t, r);
  }
}

template <int P, bool Inv, bool T>
FLUXION_FFT_TGT inline void column(const cf* s, cf* d, int64_t m, int64_t lm,
                                   const cf* tw, int64_t r0, int64_t r1) {
  VTw vt[P - 1];
  STw st[P - 1];
  if constexpr (T) {
    for (int q = 0; q < P - 1; ++q) {
      vt[q] = twiddle_of(tw[q]);
      st[q] = STw{tw[q]};
    }
  }
  int64_t r = r0;
  for (; r + V::W <= r1; r += V::W) {
    bf<P, Inv, T, V>(s, d, m, lm, vt, r);
  }
  for (; r < r1; ++r) {
    bf<P, Inv, T, S>(s, d, m, lm, st, r);
  }
}

template <int P, bool Inv>
FLUXION_FFT_TGT inline void stage_p(int64_t l, int64_t m, const cf* tw,
                                    const cf* src, cf* dst, int64_t k0,
                                    int64_t k1, int64_t r0, int64_t r1) {
  int64_t lm = l * m;
  for (int64_t k = k0; k < k1; ++k) {
    const cf* s = src + k * P * m;
    cf* d = dst + k * m;
    if (k == 0) {
      column<P, Inv, false>(s, d, m, lm, tw, r0, r1);
    } else {
      column<P, Inv, true>(s, d, m, lm, tw + k * (P - 1), r0, r1);
    }
  }
}

// The stage of radix p over k in [k0, k1) and r in [r0, r1).
FLUXION_FFT_TGT inline void stage(bool inverse, int p, int64_t l, int64_t m,
                                  const cf* tw, const float* cs,
                                  const float* sn, const cf* src, cf* dst,
                                  int64_t k0, int64_t k1, int64_t r0,
                                  int64_t r1) {
#define FLUXION_FFT_CASE(P)                                          \
  case P:                                                            \
    inverse ? stage_p<P, true>(l, m, tw, src, dst, k0, k1, r0, r1)   \
            : stage_p<P, false>(l, m, tw, src, dst, k0, k1, r0, r1); \
    return;
  switch (p) {
    FLUXION_FFT_CASE(2)
    FLUXION_FFT_CASE(3)
    FLUXION_FFT_CASE(4)
    FLUXION_FFT_CASE(5)
    default:
      break;
  }
#undef FLUXION_FFT_CASE
  int64_t lm = l * m;
  for (int64_t k = k0; k < k1; ++k) {
    const cf* s = src + k * p * m;
    cf* d = dst + k * m;
    const cf* t = tw + k * (p - 1);
    inverse ? bf_generic<true>(s, d, m, lm, t, k > 0, p, cs, sn, r0, r1)
            : bf_generic<false>(s, d, m, lm, t, k > 0, p, cs, sn, r0, r1);
  }
}

}  // namespace fluxion::cpu::fft::FLUXION_FFT_ISA

#undef FLUXION_FFT_TGT
