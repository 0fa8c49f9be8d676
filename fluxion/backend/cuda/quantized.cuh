// What quantized.cu (QuantizedMatmul's host side, the generic kernels)
// shares with quantized_qmv.cu (the matrix-vector kernel for the layouts
// whose codes never straddle a 32-bit word).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace fluxion::qmv {

// x [rows, K] @ w~^T -> out [rows, N], w~ the dequantized N x K matrix of
// the packed w [N, K * bits / 32] (row-contiguous, like x and out).
struct Args {
  const void* w;
  const void* scales;         // [N, K / gs]: x's type (affine) or uint8
  const void* biases;         // affine: like scales; else null
  const float* global_scale;  // nvfp4's tensor-wide scale, or null
  const void* x;
  void* out;
  int rows, N, K, gs, bits;
  int mode;  // QuantizationMode
};

// Launches the fast kernel on `stream` when it applies to T (__half,
// __nv_bfloat16 or float) and the arguments (affine with 2, 4 or 8 bits,
// mxfp4, nvfp4, mxfp8; 1 to 8 rows; rows of w a whole number of 16-byte
// units, 16-byte aligned), and returns true; otherwise launches nothing
// and returns false. Launch errors are left for cudaGetLastError.
template <typename T>
bool qmv_fast(const Args& a, cudaStream_t stream);

}  // namespace fluxion::qmv
