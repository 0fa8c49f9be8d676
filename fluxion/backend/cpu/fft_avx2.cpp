// The FFT stage kernels compiled for AVX2 + FMA (4 complex per vector);
// fft_plan.cpp calls them only after a run-time CPU check. Every standard
// header comes before the target pragma, so that only this file's own
// functions are compiled for AVX2.
#include <complex>
#include <cstdint>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

#define FLUXION_FFT_ISA avx2
#define FLUXION_FFT_AVX2 1
#include "fluxion/backend/cpu/fft_stages.h"
#undef FLUXION_FFT_AVX2
#undef FLUXION_FFT_ISA

namespace fluxion::cpu::fft {

void stage_avx2(bool inverse, int p, int64_t l, int64_t m,
                const std::complex<float>* tw, const float* cs, const float* sn,
                const std::complex<float>* src, std::complex<float>* dst,
                int64_t k0, int64_t k1, int64_t r0, int64_t r1) {
  avx2::stage(inverse, p, l, m, tw, cs, sn, src, dst, k0, k1, r0, r1);
}

}  // namespace fluxion::cpu::fft

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
