// QuantizedMatmul on the GPU, every mode and width of the CPU kernel
// (backend/cpu/quantized.cpp; the schemes are documented in
// ops/quantized.h):
//  - decoding (x has at most kVecRows rows, w is one N x K matrix used
//    transposed): a matrix-vector kernel that reads each packed word of w
//    once and dequantizes in registers: quantized_qmv.cu's for the
//    word-aligned layouts (affine 2/4/8 bits, mxfp4, nvfp4, mxfp8) with
//    16-byte aligned rows, else the generic one here, a warp per output
//    column;
//  - everything else: w is dequantized once into x's dtype (a matrix of
//    N x K or K x N, batched like w) and multiplied by cuBLASLt, its batch
//    dims broadcast against x's as stride-0 batches.
// Values are dequantized as the CPU does, scale * q + bias in float
// (double for float64), then (second path) rounded to x's dtype.
#include <limits>
#include <optional>

#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/backend/cuda/quantized.cuh"
#include "fluxion/ops/quantized.h"

namespace fluxion {

namespace {

constexpr int kVecRows = 8;

struct QParams {
  const uint32_t* w;   // row-contiguous packed values
  const void* scales;  // row-contiguous, one per group
  const void* biases;  // affine: like scales; else null
  const float* global_scale;  // nvfp4's tensor-wide scale, or null
  int bits, gs;
  int mode;  // QuantizationMode
};

// FP4 E2M1 and FP8 E4M3 ("fn") codes, as fp4_values() / fp8_values().
__device__ __forceinline__ float fp4_value(uint32_t c) {
  const uint32_t e = (c >> 1) & 3, m = c & 1;
  float mag = e == 0 ? 0.5f * m : ldexpf(1.0f + 0.5f * m, e - 1);
  return (c & 8) ? -mag : mag;
}
__device__ __forceinline__ float fp8_value(uint32_t c) {
  const int e = (c >> 3) & 15, m = c & 7;
  float mag = e == 0 ? ldexpf(float(m), -9) : ldexpf(float(8 + m), e - 10);
  if (e == 15 && m == 7) {
    mag = __int_as_float(0x7fc00000);
  }
  return (c & 0x80) ? -mag : mag;
}

// Code i of the packed stream (bits per value; the floating modes pack
// FP4 two per byte, low nibble first, FP8 one per byte).
__device__ __forceinline__ uint32_t code_at(const QParams& p, int64_t i) {
  if (p.mode == static_cast<int>(QuantizationMode::mxfp8)) {
    return reinterpret_cast<const uint8_t*>(p.w)[i];
  }
  if (p.mode != static_cast<int>(QuantizationMode::affine)) {
    uint32_t byte = reinterpret_cast<const uint8_t*>(p.w)[i >> 1];
    return (i & 1) ? byte >> 4 : byte & 15;
  }
  const int64_t bit = i * p.bits;
  const int64_t word = bit >> 5;
  const int off = static_cast<int>(bit & 31);
  uint32_t v = p.w[word] >> off;
  if (off + p.bits > 32) {
    v |= p.w[word + 1] << (32 - off);
  }
  return v & ((1u << p.bits) - 1);
}

// Scale and bias of group g, and the value of a code, in C.
template <typename S, typename C>
__device__ __forceinline__ void group_of(const QParams& p, int64_t g, C& s,
                                         C& b) {
  using QM = QuantizationMode;
  if (p.mode == static_cast<int>(QM::affine)) {
    s = cu::convert<C>(static_cast<const S*>(p.scales)[g]);
    b = cu::convert<C>(static_cast<const S*>(p.biases)[g]);
    return;
  }
  const uint32_t c = static_cast<const uint8_t*>(p.scales)[g];
  b = 0;
  if (p.mode == static_cast<int>(QM::nvfp4)) {
    const float inv = p.global_scale ? *p.global_scale / (448.0f * 6.0f)
                                     : 1.0f;
    s = static_cast<C>(fp8_value(c) * inv);
  } else {
    s = c == 255 ? static_cast<C>(__int_as_float(0x7fc00000))
                 : static_cast<C>(ldexpf(1.0f, int(c) - 127));
  }
}
template <typename C>
__device__ __forceinline__ C value_of(const QParams& p, uint32_t code) {
  using QM = QuantizationMode;
  if (p.mode == static_cast<int>(QM::affine)) {
    return static_cast<C>(code);
  }
  return static_cast<C>(p.mode == static_cast<int>(QM::mxfp8)
                            ? fp8_value(code)
                            : fp4_value(code));
}

// The dense matrix of w (every batch), element e at e.
template <typename T, typename S, typename C>
__global__ void dequantize_all(QParams p, T* out, int64_t n) {
  FLUXION_GRID_LOOP(e, n) {
    C s, b;
    group_of<S, C>(p, e / p.gs, s, b);
    out[e] = cu::convert<T>(s * value_of<C>(p, code_at(p, e)) + b);
  }
}

// out[m, n] = sum_k x[m, k] * w~[n, k] for M <= kVecRows rows of x: a warp
// per n, lanes over K in runs of 8 codes (the widths divide 8 * bits into
// whole bytes), partial sums combined by shuffles.
template <typename T, typename S, typename C, int M>
__global__ void qmv(QParams p, const T* x, T* out, int N, int K) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= N) {
    return;
  }
  const int64_t row = int64_t{warp} * K;
  C acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    acc[m] = 0;
  }
  for (int k0 = lane * 8; k0 < K; k0 += 32 * 8) {
    C s, b;
    group_of<S, C>(p, (row + k0) / p.gs, s, b);
    C wv[8];
    if (p.mode == static_cast<int>(QuantizationMode::affine) &&
        (p.bits == 4 || p.bits == 8 || p.bits == 2)) {
      // Whole words: 8 codes of 4 bits are one word, of 8 bits two, of 2
      // bits half of one.
      const int64_t bit = (row + k0) * p.bits;
      uint64_t bitsv = p.w[bit >> 5];
      if (p.bits == 8) {
        bitsv |= uint64_t{p.w[(bit >> 5) + 1]} << 32;
      }
      bitsv >>= (bit & 31);
      const uint32_t mask = (1u << p.bits) - 1;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        wv[j] = s * static_cast<C>((bitsv >> (j * p.bits)) & mask) + b;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        wv[j] = s * value_of<C>(p, code_at(p, row + k0 + j)) + b;
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const T* xm = x + int64_t{m} * K + k0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        acc[m] += cu::convert<C>(xm[j]) * wv[j];
      }
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const C v = cu::warp_sum(acc[m]);
    if (lane == 0) {
      out[int64_t{m} * N + warp] = cu::convert<T>(v);
    }
  }
}

// A view of `a`'s buffer with `shape` and `strides`.
array view_of(const array& a, const Shape& shape, const Strides& strides) {
  array v(shape, a.dtype(), nullptr, {});
  v.copy_shared_buffer(a, strides, {false, false, false}, a.data_size());
  return v;
}

template <typename T>
void qmm_gpu(const std::vector<array>& in, array& out, int gs, int bits,
             bool transpose, QuantizationMode mode) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const bool affine = mode == QuantizationMode::affine;
  array x = cu::contiguous(in[0]);
  array w = cu::contiguous(in[1]);
  array sc = cu::contiguous(in[2]);
  std::optional<array> bi, g;
  if (affine) {
    bi = cu::contiguous(in[3]);
  } else if (in.size() > 3) {
    g = cu::contiguous(in[3]);
  }
  const int N = out.shape(-1);
  const int K = x.shape(-1);
  cudaStream_t stream = cu::current_stream();
  if (K == 0) {
    cu::check(cudaMemsetAsync(cu::ptr(out), 0, out.nbytes(), stream),
              "quantized_matmul");
    return;
  }
  QParams p{cu::ptr<const uint32_t>(w), cu::ptr(sc),
            bi ? cu::ptr(*bi) : nullptr,
            g ? cu::ptr<const float>(*g) : nullptr, bits, gs,
            static_cast<int>(mode)};
  auto with_scales = [&](auto f) {
    // The scales' type: x's (affine) or uint8 codes (decoded in C).
    if (affine) {
      f(TypeTag<T>{});
    } else {
      f(TypeTag<uint8_t>{});
    }
  };
  const int64_t rows = x.size() / K;
  if (w.ndim() == 2 && transpose && rows <= kVecRows) {
    const qmv::Args args{p.w, p.scales, p.biases, p.global_scale,
                         cu::ptr(x), cu::ptr(out), static_cast<int>(rows),
                         N, K, gs, bits, static_cast<int>(mode)};
    if (qmv::qmv_fast<T>(args, stream)) {
      cu::check_launch("quantized_matmul");
      return;
    }
    with_scales([&](auto stag) {
      using S = typename decltype(stag)::type;
      const T* xp = cu::ptr<const T>(x);
      T* op = cu::ptr<T>(out);
      const unsigned blocks = (static_cast<unsigned>(N) + 7) / 8;
      switch (rows) {
#define FLUXION_QMV_CASE(R)                                               \
  case R:                                                                 \
    qmv<T, S, C, R><<<blocks, 256, 0, stream>>>(p, xp, op, N, K);         \
    break;
        FLUXION_QMV_CASE(1)
        FLUXION_QMV_CASE(2)
        FLUXION_QMV_CASE(3)
        FLUXION_QMV_CASE(4)
        FLUXION_QMV_CASE(5)
        FLUXION_QMV_CASE(6)
        FLUXION_QMV_CASE(7)
        FLUXION_QMV_CASE(8)
#undef FLUXION_QMV_CASE
      }
    });
    cu::check_launch("quantized_matmul");
    return;
  }
  // The dense w, batched like w: [..., N, K] (transpose) or [..., K, N].
  Shape dshape = w.shape();
  dshape.back() = transpose ? K : N;
  array wd(dshape, out.dtype(), nullptr, {});
  cu::alloc(wd);
  with_scales([&](auto stag) {
    using S = typename decltype(stag)::type;
    dequantize_all<T, S, C><<<cu::blocks_for(wd.size()), cu::kThreads, 0,
                              stream>>>(p, cu::ptr<T>(wd), wd.size());
  });
  cu::check_launch("quantized_matmul");
  cu::keep_alive(wd);
  if (w.ndim() == 2) {
    // One matrix: x's leading dims are rows (out may be 1-D).
    array x2 = view_of(x, {static_cast<int>(rows), K}, {K, 1});
    array o2 = view_of(out, {static_cast<int>(rows), N}, {N, 1});
    array w2 = transpose ? view_of(wd, {K, N}, {1, K})
                         : view_of(wd, {K, N}, {N, 1});
    cu::matmul_into(x2, w2, o2);
    return;
  }
  // Batched w: operands as [batch..., rows, cols] views over out's batch
  // dims.
  Shape bshape(out.shape().begin(), out.shape().end() - 2);
  auto batch_view = [&](const array& a, int r, int c, int64_t sr,
                        int64_t sc2) {
    Shape s = bshape;
    Strides st(bshape.size(), 0);
    // a's batch dims (right-aligned), stride 0 where broadcast.
    const int ab = a.ndim() - 2;
    for (int d = 0; d < ab; ++d) {
      const int od = static_cast<int>(bshape.size()) - ab + d;
      st[od] = a.shape(d) == 1 ? 0 : a.strides()[d];
    }
    s.push_back(r);
    s.push_back(c);
    st.push_back(sr);
    st.push_back(sc2);
    return view_of(a, s, st);
  };
  const int M = x.shape(-2);
  array xv = batch_view(x, M, K, K, 1);
  array wv = transpose ? batch_view(wd, K, N, 1, K)
                       : batch_view(wd, K, N, N, 1);
  cu::matmul_into(xv, wv, out);
}

}  // namespace

void QuantizedMatmul::eval_gpu(const std::vector<array>& inputs,
                               std::vector<array>& outputs) {
  array& out = outputs[0];
  cu::alloc(out);
  if (out.size() == 0) {
    return;
  }
  cu::dispatch_gpu<FloatTypes>(out.dtype(), "quantized_matmul",
                               [&](auto tag) {
                                 using T = typename decltype(tag)::type;
                                 qmm_gpu<T>(inputs, out, group_size_, bits_,
                                            transpose_, mode_);
                               });
}

}  // namespace fluxion
