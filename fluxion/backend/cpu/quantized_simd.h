// AVX2 + FMA dot products of packed quantized rows with float32 rows, for
// QuantizedMatmul's few-rows path; picked at run time (null without AVX2).
#pragma once

#include <cstdint>

namespace fluxion::cpu::qsimd {

// dots[m * (K / gs) + g] = sum over group g of x[m * K + k] * q[k], for the
// M (1..4) rows of x and the K packed values of one row at `w`.
using RowDotsFn = void (*)(const uint32_t* w, const float* x, int64_t K, int gs,
                           float* dots);

RowDotsFn row_dots(int bits, int M);

// dst[i] = scale * q[i] + bias for `ngroups` groups of `gs` packed values at
// `w` with one float32 scale and bias each.
using UnpackFn = void (*)(const uint32_t* w, const float* scales,
                          const float* biases, int gs, int64_t ngroups,
                          float* dst);

UnpackFn unpack(int bits);

}  // namespace fluxion::cpu::qsimd
