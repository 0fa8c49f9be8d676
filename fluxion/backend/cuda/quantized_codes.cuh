// The packed codes of the word-aligned quantized layouts, for the two
// decoding kernels (quantized_qmv.cu stages x in shared memory for 1 to 8
// rows; qmv_lanes.cu keeps one row of x in each lane's registers): the
// schemes' geometry, a 32-bit word's codes as floats, the scales.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/backend/cuda/quantized.cuh"

namespace fluxion::qmv {

enum Scheme { kAffine2, kAffine4, kAffine8, kMxfp4, kNvfp4, kMxfp8 };

template <int S>
struct SchemeOf {
  static constexpr bool affine = S <= kAffine8;
  static constexpr int bits =
      S == kAffine2 ? 2 : (S == kAffine8 || S == kMxfp8 ? 8 : 4);
  static constexpr int cpw = 32 / bits;  // codes per word
  static constexpr int cc = 4 * cpw;     // codes per 16-byte chunk
  // Words that share one scale (a "unit"): as many as the scheme's
  // smallest group holds (affine 32, nvfp4 16, mx 32 codes).
  static constexpr int wpu = S == kAffine2 || S == kNvfp4 ? 2 : 4;
  static constexpr int upc = 4 / wpu;   // units per chunk
  static constexpr int uc = wpu * cpw;  // codes per unit
};


__device__ __forceinline__ __half2 half2_of_bits(uint32_t bits) {
  __half2 h;
  memcpy(&h, &bits, 4);
  return h;
}

// 2^(-bits * j) for code kk's position j in its 16-bit half word (affine),
// and its inverse.
template <int bits>
__device__ __forceinline__ float prescale(int kk) {
  const int j = kk % (16 / bits);
  return __int_as_float((127 - bits * j) << 23);
}
template <int bits>
__device__ __forceinline__ float unscale(int kk) {
  const int j = kk % (16 / bits);
  return __int_as_float((127 + bits * j) << 23);
}

// The values of the cpw codes of word w, in code order: affine q *
// 2^(bits j) (x is staged scaled by the inverse), E2M1 exactly, E4M3
// divided by 2^8 (multiplied back per unit). E4M3's NaN codes (0x7f,
// 0xff) would decode as 480: they set bits of `nan_codes` instead.
template <int S>
__device__ __forceinline__ void decode_word(uint32_t w, float* f,
                                            uint32_t& nan_codes) {
  using Sc = SchemeOf<S>;
  if constexpr (Sc::affine) {
    constexpr int cph = 16 / Sc::bits;
    constexpr uint32_t mask = (1u << Sc::bits) - 1;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint32_t h = half ? w >> 16 : w;
#pragma unroll
      for (int j = 0; j < cph; ++j) {
        f[half * cph + j] =
            __uint_as_float((h & (mask << (Sc::bits * j))) | 0x4B000000u) -
            8388608.0f;
      }
    }
  } else if constexpr (S == kMxfp4 || S == kNvfp4) {
    // A pair of nibbles 8 bits apart, at bits 4-7 and 12-15 of t, becomes a
    // half2: the magnitudes through a byte-permute table of the high bytes
    // of 0, 0.5, 1, 1.5, 2, 3, 4, 6 (the low bytes are zero), the sign
    // bits (7 and 15) moved to 15 and 31 by a second permute.
    const uint32_t ts[4] = {w << 4, w, w >> 12, w >> 16};  // nibbles
    const int lo[4] = {0, 1, 4, 5}, hi[4] = {2, 3, 6, 7};  // of each pair
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t t = ts[i];
      const uint32_t mag = __byte_perm(0x3E3C3800u, 0x46444240u, t & 0x7070u);
      const uint32_t sgn = __byte_perm(t, 0u, 0x1404u);
      const float2 v = __half22float2(half2_of_bits(mag | (sgn & 0x80008000u)));
      f[lo[i]] = v.x;
      f[hi[i]] = v.y;
    }
  } else {
    // Bytes 0 and 2 (then 1 and 3) as a half2: the 7 exponent and mantissa
    // bits at 7-13 make half = E4M3 / 2^8, normal and subnormal alike; the
    // sign bytes move by a permute.
    nan_codes |= (w & 0x7F7F7F7Fu) + 0x01010101u;
    const uint32_t em[2] = {(w << 7) & 0x3F803F80u, (w >> 1) & 0x3F803F80u};
    const uint32_t sg[2] = {__byte_perm(w, 0u, 0x2404u),
                            __byte_perm(w, 0u, 0x3414u)};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float2 v =
          __half22float2(half2_of_bits(em[i] | (sg[i] & 0x80008000u)));
      f[i] = v.x;
      f[i + 2] = v.y;
    }
  }
}

// E8M0: 2^(c - 127), 255 is NaN (as the CPU's mx scales).
__device__ __forceinline__ float e8m0(uint32_t c) {
  return c == 255 ? __int_as_float(0x7fc00000)
                  : __uint_as_float(c == 0 ? 0x00400000u : c << 23);
}
// E4M3 ("fn"): the 7 low bits at 20-26 of a float are the value / 2^120
// (subnormals included); 0x7f / 0xff are NaN.
__device__ __forceinline__ float e4m3(uint32_t c) {
  if ((c & 0x7F) == 0x7F) {
    return __int_as_float(0x7fc00000);
  }
  const float v = __uint_as_float((c & 0x7F) << 20) * 0x1p120f;
  return (c & 0x80) ? -v : v;
}
// A group's scale and bias as stored (x's type for affine codes, else an
// E8M0/E4M3 byte): the kernels fetch them with the weights a step ahead
// and convert them (scale_of) only when they multiply, so that no
// instruction waits on a scale's load at the prefetch (on the H100 that
// wait stalled both decoding kernels: half their cycles on L1TEX).
template <typename T, int S>
using RawScale = std::conditional_t<SchemeOf<S>::affine, T, uint8_t>;

template <typename T, int S>
__device__ __forceinline__ void fetch_scale(const void* scales,
                                            const void* biases, int64_t g,
                                            RawScale<T, S>& s,
                                            RawScale<T, S>& b) {
  s = static_cast<const RawScale<T, S>*>(scales)[g];
  if constexpr (SchemeOf<S>::affine) {
    b = static_cast<const T*>(biases)[g];
  }
}

// Zeros in the stored form (a dead lane's scale and bias: its products
// vanish; E8M0's 0 is 2^-127, times codes of zero).
template <typename T, int S>
__device__ __forceinline__ RawScale<T, S> zero_scale() {
  if constexpr (SchemeOf<S>::affine) {
    return cu::convert<T>(0.0f);
  } else {
    return 0;
  }
}

// Scale and bias in float.
template <typename T, int S>
__device__ __forceinline__ void scale_of(RawScale<T, S> s, RawScale<T, S> b,
                                         float gscale, float& sf, float& bf) {
  if constexpr (SchemeOf<S>::affine) {
    sf = cu::convert<float>(s);
    bf = cu::convert<float>(b);
  } else {
    sf = S == kNvfp4 ? e4m3(s) * gscale : e8m0(s);
    bf = 0;
  }
}

// The fields both decoding kernels' parameters (P<T>) take from the
// arguments as they are: operands, sizes, log2 of the group size.
template <typename P>
void take_args(const Args& a, P& p) {
  using T = std::remove_cv_t<std::remove_pointer_t<decltype(p.x)>>;
  p.w = static_cast<const uint4*>(a.w);
  p.scales = a.scales;
  p.biases = a.biases;
  p.global_scale = a.global_scale;
  p.x = static_cast<const T*>(a.x);
  p.out = static_cast<T*>(a.out);
  p.N = a.N;
  p.K = a.K;
  p.lgs = 0;
  while ((1 << p.lgs) < a.gs) {
    ++p.lgs;
  }
}

// The register kernel (qmv_lanes.cu) for one row of x: launches and returns
// true when the row fits a block's lanes (see there), else launches
// nothing and returns false.
template <typename T, int S>
bool launch_lanes(const Args& a, cudaStream_t stream);

}  // namespace fluxion::qmv
