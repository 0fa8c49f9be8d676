// CPU kernel of QuantizedMatmul. The quantized matrix is never dequantized
// whole:
//  - transpose with few rows of x (up to 4; up to 16 with AVX2, in blocks
//    of 4): per row of w and per group, the dot products of the rows of x
//    with the integer values q (AVX2+FMA when the CPU has them:
//    quantized_avx2.cpp; else the row is unpacked into an L1-sized buffer
//    and dotted with eight accumulators), then s * (x . q) + b * sum(x);
//    rows of w are spread over the thread pool;
//  - otherwise: tiles of about 1Mi values (rows of w when transposed, whole
//    groups of columns when not) are unpacked in parallel into a float
//    buffer (AVX2 when the scales are float32) and handed to BLAS gemm.
// Half types compute in float32. 3-, 5- and 6-bit values straddle words and
// are read from the bit stream; the floating modes (mxfp4, nvfp4, mxfp8)
// decode their codes through value tables, with per-group scales decoded
// once up front and zero biases, so they share every path except the AVX2
// ones. A batched matrix runs the 2-D product per batch element (batch dims
// broadcast between x and w).
#include "fluxion/ops/quantized.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/quantized_simd.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

namespace {

// Byte -> its 8 / bits values as C, lowest bits first: unpacking is then
// one small copy per byte.
template <typename C, int bits>
const C* byte_table() {
  static const std::vector<C> table = [] {
    constexpr int per = 8 / bits;
    std::vector<C> t(256 * per);
    for (int v = 0; v < 256; ++v) {
      for (int j = 0; j < per; ++j) {
        t[v * per + j] = static_cast<C>((v >> (j * bits)) & ((1 << bits) - 1));
      }
    }
    return t;
  }();
  return table.data();
}

// The integer values of `n` packed values at `w` (n a multiple of
// 32 / bits) as C. Packed words are little-endian, so byte order is value
// order.
template <typename C, int bits>
void unpack_q(const uint32_t* w, int64_t n, C* dst) {
  constexpr int per = 8 / bits;
  const C* table = byte_table<C, bits>();
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(w);
  for (int64_t i = 0; i < n / per; ++i) {
    const C* src = table + bytes[i] * per;
    for (int j = 0; j < per; ++j) {
      dst[i * per + j] = src[j];
    }
  }
}

// Values that straddle 32-bit words (3, 5, 6 bits): read from the bit
// stream, value i in bits [i * bits, (i + 1) * bits).
template <typename C>
void unpack_stream(int bits, const uint32_t* w, int64_t n, C* dst) {
  const uint32_t mask = (1u << bits) - 1;
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = i * bits;
    int64_t word = p >> 5;
    int off = static_cast<int>(p & 31);
    uint32_t v = w[word] >> off;
    if (off + bits > 32) {
      v |= w[word + 1] << (32 - off);
    }
    dst[i] = static_cast<C>(v & mask);
  }
}

// Byte -> its two FP4 E2M1 values (low nibble first), or its FP8 E4M3
// value.
template <typename C>
const C* fp_table(bool fp8) {
  static const std::vector<C> t4 = [] {
    std::vector<C> t(512);
    for (int v = 0; v < 256; ++v) {
      t[2 * v] = static_cast<C>(fp4_values()[v & 15]);
      t[2 * v + 1] = static_cast<C>(fp4_values()[v >> 4]);
    }
    return t;
  }();
  static const std::vector<C> t8 = [] {
    std::vector<C> t(256);
    for (int v = 0; v < 256; ++v) {
      t[v] = static_cast<C>(fp8_values()[v]);
    }
    return t;
  }();
  return fp8 ? t8.data() : t4.data();
}

// The values of `n` packed entries at `w`: integers (affine) or decoded
// small floats (the floating modes), as C.
template <typename C>
void unpack_q(QuantizationMode mode, int bits, const uint32_t* w, int64_t n,
              C* dst) {
  if (mode != QuantizationMode::affine) {
    bool fp8 = mode == QuantizationMode::mxfp8;
    int per = fp8 ? 1 : 2;
    const C* table = fp_table<C>(fp8);
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(w);
    for (int64_t i = 0; i < n / per; ++i) {
      const C* src = table + bytes[i] * per;
      for (int j = 0; j < per; ++j) {
        dst[i * per + j] = src[j];
      }
    }
    return;
  }
  switch (bits) {
    case 2:
      return unpack_q<C, 2>(w, n, dst);
    case 4:
      return unpack_q<C, 4>(w, n, dst);
    case 8:
      return unpack_q<C, 8>(w, n, dst);
    default:
      return unpack_stream(bits, w, n, dst);
  }
}

// Unpacks `ngroups` consecutive groups (packed words at `w`, one scale and
// bias per group) into dst: dst[i] = scale * q[i] + bias.
template <typename C, typename S>
void unpack(QuantizationMode mode, int bits, const uint32_t* w, const S* sc,
            const S* bi, int gs, int64_t ngroups, C* dst) {
  if constexpr (std::is_same_v<C, float> && std::is_same_v<S, float>) {
    static const std::array<cpu::qsimd::UnpackFn, 9> fns = {
        nullptr,
        nullptr,
        cpu::qsimd::unpack(2),
        nullptr,
        cpu::qsimd::unpack(4),
        nullptr,
        nullptr,
        nullptr,
        cpu::qsimd::unpack(8)};
    if (mode == QuantizationMode::affine && fns[bits]) {
      return fns[bits](w, sc, bi, gs, ngroups, dst);
    }
  }
  unpack_q(mode, bits, w, ngroups * gs, dst);
  for (int64_t g = 0; g < ngroups; ++g) {
    const C s = static_cast<C>(sc[g]);
    const C b = static_cast<C>(bi[g]);
    C* d = dst + g * gs;
    for (int j = 0; j < gs; ++j) {
      d[j] = s * d[j] + b;
    }
  }
}

// Rows of x up to which the AVX2 row-by-row path beats unpacking for BLAS.
constexpr int kSimdRows = 16;

// Values per unpacked tile on the gemm path (4 MiB of float32).
constexpr int64_t kTileElems = int64_t{1} << 20;

template <typename C>
C dot(const C* a, const C* b, int64_t n) {
  C acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      acc[j] += a[i + j] * b[i + j];
    }
  }
  C s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
        ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) {
    s += a[i] * b[i];
  }
  return s;
}

// out (M x ldo, at column offset) = a (M x K) @ b, with b (K x nb) or, when
// `bt`, b^T with b (nb x K).
void gemm(bool bt, int M, int nb, int K, const float* a, const float* b,
          int ldb, float* out, int ldo) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, bt ? CblasTrans : CblasNoTrans, M,
              nb, K, 1.0f, a, K, b, ldb, 0.0f, out, ldo);
}
void gemm(bool bt, int M, int nb, int K, const double* a, const double* b,
          int ldb, double* out, int ldo) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, bt ? CblasTrans : CblasNoTrans, M,
              nb, K, 1.0, a, K, b, ldb, 0.0, out, ldo);
}

// out[M, N] = x[M, K] @ W^T (transpose; W is N x K, packed per row) or
// x @ W (W is K x N, packed per row). Scales/biases: one per group of each
// packed row.
template <typename C, typename S>
void qmm(const C* x, const uint32_t* w, const S* sc, const S* bi, C* out, int M,
         int N, int K, int gs, int bits, bool transpose,
         QuantizationMode mode) {
  if (transpose) {
    const int64_t words = int64_t{K} * bits / 32, groups = K / gs;
    // The row-by-row path: up to 4 rows of x, or kSimdRows in blocks of 4
    // with AVX2 (past that, unpacking tiles for BLAS pays off).
    std::array<cpu::qsimd::RowDotsFn, 5> simd{};
    if constexpr (std::is_same_v<C, float>) {
      for (int r = 1; r <= 4 && mode == QuantizationMode::affine; ++r) {
        simd[r] = cpu::qsimd::row_dots(bits, r);
      }
    }
    if (M <= (simd[4] ? kSimdRows : 4)) {
      // sum_k x_k (s q_k + b) = s * (x . q) + b * sum(x) per group: the
      // group sums of x are computed once.
      std::vector<C> xs(int64_t{M} * groups);
      for (int m = 0; m < M; ++m) {
        for (int64_t g = 0; g < groups; ++g) {
          const C* p = x + int64_t{m} * K + g * gs;
          C acc = 0;
          for (int j = 0; j < gs; ++j) {
            acc += p[j];
          }
          xs[m * groups + g] = acc;
        }
      }
      int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max(K, 1));
      cpu::parallel_for(N, grain, [&](int64_t n0, int64_t n1) {
        std::vector<C> row(K), dots(int64_t{M} * groups);
        for (int64_t n = n0; n < n1; ++n) {
          const S* sn = sc + n * groups;
          const S* bn = bi + n * groups;
          bool done = false;
          if constexpr (std::is_same_v<C, float>) {
            if (simd[4]) {
              for (int m0 = 0; m0 < M; m0 += 4) {
                simd[std::min(4, M - m0)](w + n * words, x + int64_t{m0} * K, K,
                                          gs, dots.data() + m0 * groups);
              }
              done = true;
            }
          }
          if (!done) {
            unpack_q(mode, bits, w + n * words, K, row.data());
            for (int m = 0; m < M; ++m) {
              for (int64_t g = 0; g < groups; ++g) {
                dots[m * groups + g] =
                    dot(x + int64_t{m} * K + g * gs, row.data() + g * gs, gs);
              }
            }
          }
          for (int m = 0; m < M; ++m) {
            const C* dm = dots.data() + m * groups;
            const C* xsm = xs.data() + m * groups;
            C acc = 0;
            for (int64_t g = 0; g < groups; ++g) {
              acc += static_cast<C>(sn[g]) * dm[g] +
                     static_cast<C>(bn[g]) * xsm[g];
            }
            out[int64_t{m} * N + n] = acc;
          }
        }
      });
      return;
    }
    // Tiles of about kTileElems values: unpacked in parallel, then one
    // gemm each (BLAS threads it).
    const int64_t nb_max = std::clamp<int64_t>(kTileElems / K, 16, N);
    std::vector<C> buf(nb_max * K);
    for (int64_t n0 = 0; n0 < N; n0 += nb_max) {
      int nb = static_cast<int>(std::min<int64_t>(nb_max, N - n0));
      cpu::parallel_for(nb, 1, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          unpack(mode, bits, w + (n0 + r) * words, sc + (n0 + r) * groups,
                 bi + (n0 + r) * groups, gs, groups, buf.data() + r * K);
        }
      });
      gemm(true, M, nb, K, x, buf.data(), K, out + n0, N);
    }
    return;
  }
  // W is K x N: tiles of whole groups of columns.
  const int64_t words = int64_t{N} * bits / 32, groups = N / gs;
  const int64_t per_tile =
      std::clamp<int64_t>(kTileElems / (int64_t{K} * gs), 1, groups);
  std::vector<C> buf(int64_t{K} * per_tile * gs);
  for (int64_t g0 = 0; g0 < groups; g0 += per_tile) {
    int64_t ng = std::min(per_tile, groups - g0);
    int nb = static_cast<int>(ng * gs);
    cpu::parallel_for(K, 16, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        unpack(mode, bits, w + k * words + g0 * gs * bits / 32,
               sc + k * groups + g0, bi + k * groups + g0, gs, ng,
               buf.data() + k * nb);
      }
    });
    gemm(false, M, nb, K, x, buf.data(), nb, out + g0 * gs, N);
  }
}

// Per-group scales and biases as S: affine ones as given; the floating
// modes' uint8 codes decoded (E8M0: 2^(c - 127); nvfp4: E4M3 over the
// global encode factor 448 * 6 / g), with zero biases.
template <typename S>
void decode_scales(QuantizationMode mode, const array& sc,
                   const std::vector<array>& in, std::vector<S>& scales,
                   std::vector<S>& biases) {
  const uint8_t* c = sc.data<uint8_t>();
  scales.resize(sc.size());
  biases.assign(sc.size(), S(0));
  float inv_enc = 1.0f;
  if (mode == QuantizationMode::nvfp4 && in.size() > 3) {
    inv_enc = cpu::ensure_row_contiguous(in[3]).data<float>()[0] /
              (448.0f * 6.0f);
  }
  for (size_t i = 0; i < sc.size(); ++i) {
    float v = mode == QuantizationMode::nvfp4
                  ? fp8_values()[c[i]] * inv_enc
                  : (c[i] == 255 ? std::numeric_limits<float>::quiet_NaN()
                                 : std::ldexp(1.0f, int(c[i]) - 127));
    scales[i] = static_cast<S>(v);
  }
}

// Offsets (in batch elements) of each output batch element into an input
// whose batch dims `in_batch` broadcast to `out_batch` (right-aligned).
std::vector<int64_t> batch_offsets(const Shape& out_batch,
                                   const Shape& in_batch) {
  int64_t total = 1;
  for (auto d : out_batch) {
    total *= d;
  }
  std::vector<int64_t> offs(total);
  int nd = out_batch.size(), lead = nd - static_cast<int>(in_batch.size());
  for (int64_t b = 0; b < total; ++b) {
    int64_t rem = b, off = 0, stride = 1;
    for (int d = nd - 1; d >= 0; --d) {
      int64_t coord = rem % out_batch[d];
      rem /= out_batch[d];
      if (d >= lead) {
        int64_t size = in_batch[d - lead];
        off += (size == 1 ? 0 : coord) * stride;
        stride *= size;
      }
    }
    offs[b] = off;
  }
  return offs;
}

template <typename T>
void run(const std::vector<array>& in, array& out, int gs, int bits,
         bool transpose, QuantizationMode mode) {
  bool fp = mode != QuantizationMode::affine;
  array x = cpu::ensure_row_contiguous(in[0]);
  array w = cpu::ensure_row_contiguous(in[1]);
  array sc = cpu::ensure_row_contiguous(in[2]);
  int N = out.shape(-1);
  int K = x.shape(-1);
  out.set_data(out.nbytes());
  if (out.size() == 0) {
    return;
  }
  if (K == 0) {
    std::fill_n(out.data<T>(), out.size(), T(0));
    return;
  }
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  using S = std::conditional_t<std::is_same_v<T, double>, double, T>;
  // Scales and biases as S; the floating modes' decoded into C (E8M0
  // scales span far more than a half type).
  std::vector<C> fsc, fbi;
  array bi = fp ? sc : cpu::ensure_row_contiguous(in[3]);
  if (fp) {
    decode_scales<C>(mode, sc, in, fsc, fbi);
  }
  // x as C (half types widened once).
  std::vector<C> xbuf;
  const C* xp;
  if constexpr (std::is_same_v<T, C>) {
    xp = x.data<T>();
  } else {
    xbuf.resize(x.size());
    const T* src = x.data<T>();
    for (size_t i = 0; i < xbuf.size(); ++i) {
      xbuf[i] = static_cast<C>(src[i]);
    }
    xp = xbuf.data();
  }
  std::vector<C> obuf;
  C* op;
  if constexpr (std::is_same_v<T, C>) {
    op = out.data<T>();
  } else {
    obuf.resize(out.size());
    op = obuf.data();
  }
  const uint32_t* wp = w.data<uint32_t>();
  auto product = [&](const auto* scp, const auto* bip) {
    using SS = std::remove_cv_t<std::remove_pointer_t<decltype(scp)>>;
    if (w.ndim() == 2) {
      int M = static_cast<int>(x.size() / K);
      qmm<C, SS>(xp, wp, scp, bip, op, M, N, K, gs, bits, transpose, mode);
      return;
    }
    // One 2-D product per output batch element.
    Shape ob(out.shape().begin(), out.shape().end() - 2);
    Shape xb(x.shape().begin(), x.shape().end() - 2);
    Shape wb(w.shape().begin(), w.shape().end() - 2);
    auto xo = batch_offsets(ob, xb);
    auto wo = batch_offsets(ob, wb);
    int M = x.shape(-2);
    int64_t x_step = int64_t{M} * K, o_step = int64_t{M} * N;
    int64_t w_step = int64_t{w.shape(-2)} * w.shape(-1);
    int64_t s_step = int64_t{sc.shape(-2)} * sc.shape(-1);
    for (size_t b = 0; b < xo.size(); ++b) {
      qmm<C, SS>(xp + xo[b] * x_step, wp + wo[b] * w_step,
                 scp + wo[b] * s_step, bip + wo[b] * s_step, op + b * o_step,
                 M, N, K, gs, bits, transpose, mode);
    }
  };
  if (fp) {
    product(fsc.data(), fbi.data());
  } else {
    product(sc.data<S>(), bi.data<S>());
  }
  if constexpr (!std::is_same_v<T, C>) {
    T* dst = out.data<T>();
    for (size_t i = 0; i < obuf.size(); ++i) {
      dst[i] = T(obuf[i]);
    }
  }
}

}  // namespace

void QuantizedMatmul::eval_cpu(const std::vector<array>& inputs,
                               std::vector<array>& outputs) {
  array& out = outputs[0];
  switch (out.dtype().val) {
    case Dtype::Val::float32:
      return run<float>(inputs, out, group_size_, bits_, transpose_, mode_);
    case Dtype::Val::float64:
      return run<double>(inputs, out, group_size_, bits_, transpose_, mode_);
    case Dtype::Val::float16:
      return run<float16_t>(inputs, out, group_size_, bits_, transpose_,
                            mode_);
    case Dtype::Val::bfloat16:
      return run<bfloat16_t>(inputs, out, group_size_, bits_, transpose_,
                             mode_);
    default:
      throw std::invalid_argument(
          "[quantized_matmul] Unsupported output dtype.");
  }
}

}  // namespace fluxion
