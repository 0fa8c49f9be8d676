// Built with -mavx2 -mfma (see CMakeLists.txt); only called after a run-time
// check that the CPU has both. Eight packed values become one vector of
// floats (shift by lane, mask, convert) and meet eight values of x in an
// FMA; two accumulators per row hide the FMA latency.
#include <immintrin.h>

#include "fluxion/backend/cpu/quantized_simd.h"

namespace fluxion::cpu::qsimd {

namespace {

bool has_avx2() {
  static bool ok =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}

// The 8 values starting at value index v (a multiple of 8).
template <int bits>
inline __m256 unpack8(const uint32_t* w, int64_t v) {
  if constexpr (bits == 8) {
    __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(
        reinterpret_cast<const uint8_t*>(w) + v));
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
  } else if constexpr (bits == 4) {
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    __m256i word = _mm256_set1_epi32(static_cast<int>(w[v / 8]));
    __m256i q = _mm256_and_si256(_mm256_srlv_epi32(word, shifts),
                                 _mm256_set1_epi32(15));
    return _mm256_cvtepi32_ps(q);
  } else {
    const int base = static_cast<int>(v % 16) * 2;  // 0 or 16
    const __m256i shifts = _mm256_add_epi32(
        _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14), _mm256_set1_epi32(base));
    __m256i word = _mm256_set1_epi32(static_cast<int>(w[v / 16]));
    __m256i q =
        _mm256_and_si256(_mm256_srlv_epi32(word, shifts), _mm256_set1_epi32(3));
    return _mm256_cvtepi32_ps(q);
  }
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <int bits, int M>
void row_dots_impl(const uint32_t* w, const float* x, int64_t K, int gs,
                   float* dots) {
  const int64_t G = K / gs;
  for (int64_t g = 0; g < G; ++g) {
    __m256 acc[M][2];
    for (int m = 0; m < M; ++m) {
      acc[m][0] = _mm256_setzero_ps();
      acc[m][1] = _mm256_setzero_ps();
    }
    // Group sizes are multiples of 32: whole pairs of vectors.
    for (int64_t v = g * gs; v < (g + 1) * gs; v += 16) {
      __m256 q0 = unpack8<bits>(w, v);
      __m256 q1 = unpack8<bits>(w, v + 8);
      for (int m = 0; m < M; ++m) {
        const float* xm = x + m * K + v;
        acc[m][0] = _mm256_fmadd_ps(q0, _mm256_loadu_ps(xm), acc[m][0]);
        acc[m][1] = _mm256_fmadd_ps(q1, _mm256_loadu_ps(xm + 8), acc[m][1]);
      }
    }
    for (int m = 0; m < M; ++m) {
      dots[m * G + g] = hsum(_mm256_add_ps(acc[m][0], acc[m][1]));
    }
  }
}

template <int bits>
void unpack_impl(const uint32_t* w, const float* scales, const float* biases,
                 int gs, int64_t ngroups, float* dst) {
  for (int64_t g = 0; g < ngroups; ++g) {
    __m256 s = _mm256_set1_ps(scales[g]);
    __m256 b = _mm256_set1_ps(biases[g]);
    for (int64_t v = g * gs; v < (g + 1) * gs; v += 8) {
      _mm256_storeu_ps(dst + v, _mm256_fmadd_ps(unpack8<bits>(w, v), s, b));
    }
  }
}

template <int bits>
RowDotsFn for_rows(int M) {
  switch (M) {
    case 1:
      return &row_dots_impl<bits, 1>;
    case 2:
      return &row_dots_impl<bits, 2>;
    case 3:
      return &row_dots_impl<bits, 3>;
    case 4:
      return &row_dots_impl<bits, 4>;
    default:
      return nullptr;
  }
}

}  // namespace

UnpackFn unpack(int bits) {
  if (!has_avx2()) {
    return nullptr;
  }
  switch (bits) {
    case 2:
      return &unpack_impl<2>;
    case 4:
      return &unpack_impl<4>;
    case 8:
      return &unpack_impl<8>;
    default:
      return nullptr;
  }
}

RowDotsFn row_dots(int bits, int M) {
  if (!has_avx2()) {
    return nullptr;
  }
  switch (bits) {
    case 2:
      return for_rows<2>(M);
    case 4:
      return for_rows<4>(M);
    case 8:
      return for_rows<8>(M);
    default:
      return nullptr;
  }
}

}  // namespace fluxion::cpu::qsimd
