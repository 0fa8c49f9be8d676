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
// Half types compute in float32.
#include "fluxion/ops/quantized.h"

#include <cblas.h>

#include <algorithm>
#include <array>
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

template <typename C>
void unpack_q(int bits, const uint32_t* w, int64_t n, C* dst) {
  switch (bits) {
    case 2:
      return unpack_q<C, 2>(w, n, dst);
    case 4:
      return unpack_q<C, 4>(w, n, dst);
    default:
      return unpack_q<C, 8>(w, n, dst);
  }
}

// Unpacks `ngroups` consecutive groups (packed words at `w`, one scale and
// bias per group) into dst: dst[i] = scale * q[i] + bias.
template <typename C, typename S>
void unpack(int bits, const uint32_t* w, const S* sc, const S* bi, int gs,
            int64_t ngroups, C* dst) {
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
    if (fns[bits]) {
      return fns[bits](w, sc, bi, gs, ngroups, dst);
    }
  }
  unpack_q(bits, w, ngroups * gs, dst);
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
         int N, int K, int gs, int bits, bool transpose) {
  const int el = 32 / bits;
  if (transpose) {
    const int64_t words = K / el, groups = K / gs;
    // The row-by-row path: up to 4 rows of x, or kSimdRows in blocks of 4
    // with AVX2 (past that, unpacking tiles for BLAS pays off).
    std::array<cpu::qsimd::RowDotsFn, 5> simd{};
    if constexpr (std::is_same_v<C, float>) {
      for (int r = 1; r <= 4; ++r) {
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
            unpack_q(bits, w + n * words, K, row.data());
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
          unpack(bits, w + (n0 + r) * words, sc + (n0 + r) * groups,
                 bi + (n0 + r) * groups, gs, groups, buf.data() + r * K);
        }
      });
      gemm(true, M, nb, K, x, buf.data(), K, out + n0, N);
    }
    return;
  }
  // W is K x N: tiles of whole groups of columns.
  const int64_t words = N / el, groups = N / gs;
  const int64_t per_tile =
      std::clamp<int64_t>(kTileElems / (int64_t{K} * gs), 1, groups);
  std::vector<C> buf(int64_t{K} * per_tile * gs);
  for (int64_t g0 = 0; g0 < groups; g0 += per_tile) {
    int64_t ng = std::min(per_tile, groups - g0);
    int nb = static_cast<int>(ng * gs);
    cpu::parallel_for(K, 16, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        unpack(bits, w + k * words + g0 * gs / el, sc + k * groups + g0,
               bi + k * groups + g0, gs, ng, buf.data() + k * nb);
      }
    });
    gemm(false, M, nb, K, x, buf.data(), nb, out + g0 * gs, N);
  }
}

template <typename T>
void run(const std::vector<array>& in, array& out, int gs, int bits,
         bool transpose) {
  array x = cpu::ensure_row_contiguous(in[0]);
  array w = cpu::ensure_row_contiguous(in[1]);
  array sc = cpu::ensure_row_contiguous(in[2]);
  array bi = cpu::ensure_row_contiguous(in[3]);
  int N = out.shape(-1);
  int K = x.shape(-1);
  int M = static_cast<int>(x.size() / std::max(K, 1));
  out.set_data(out.nbytes());
  if (out.size() == 0) {
    return;
  }
  if (K == 0) {
    std::fill_n(out.data<T>(), out.size(), T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    qmm<T, T>(x.data<T>(), w.data<uint32_t>(), sc.data<T>(), bi.data<T>(),
              out.data<T>(), M, N, K, gs, bits, transpose);
  } else {
    std::vector<float> xf(x.size()), of(out.size());
    const T* xp = x.data<T>();
    for (size_t i = 0; i < xf.size(); ++i) {
      xf[i] = static_cast<float>(xp[i]);
    }
    qmm<float, T>(xf.data(), w.data<uint32_t>(), sc.data<T>(), bi.data<T>(),
                  of.data(), M, N, K, gs, bits, transpose);
    T* op = out.data<T>();
    for (size_t i = 0; i < of.size(); ++i) {
      op[i] = T(of[i]);
    }
  }
}

}  // namespace

void QuantizedMatmul::eval_cpu(const std::vector<array>& inputs,
                               std::vector<array>& outputs) {
  array& out = outputs[0];
  switch (out.dtype().val) {
    case Dtype::Val::float32:
      return run<float>(inputs, out, group_size_, bits_, transpose_);
    case Dtype::Val::float64:
      return run<double>(inputs, out, group_size_, bits_, transpose_);
    case Dtype::Val::float16:
      return run<float16_t>(inputs, out, group_size_, bits_, transpose_);
    case Dtype::Val::bfloat16:
      return run<bfloat16_t>(inputs, out, group_size_, bits_, transpose_);
    default:
      throw std::invalid_argument(
          "[quantized_matmul] Unsupported output dtype.");
  }
}

}  // namespace fluxion
