// How the GPU computes the FFT primitive through cuFFT, as a list of steps
// over a few buffers (backend/cuda/fft.cu runs it; design in that file's
// header). The planner is plain host code, built in every configuration,
// so tests/cpp/test_fft_program.cpp checks it without a GPU: it runs the
// steps through an emulation of cuFFT's documented advanced data layout
// (bounds, strides, embeds, distances, alignment, in-place rules, C2R
// overwriting its input) against the CPU kernel.
//
// Buffers are row-contiguous element arrays: 0 the primitive's input
// (made row-contiguous and, for real data, 8-byte aligned by the
// executor), 1 its output, 2... scratch. Strides, distances and steps are
// in elements of the buffer's own type (real or complex).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fluxion/array.h"

namespace fluxion::fft_program {

enum class Kind { C2C, R2C, C2R };

// One cuFFT plan in the advanced data layout (cufftMakePlanMany64): rank
// 1-3, n[] row-major (n[0] the slowest), inembed/onembed the stored dims
// (entry 0 unused by cuFFT). Entries past `rank` are 0.
struct PlanShape {
  Kind kind = Kind::C2C;
  int rank = 1;
  int64_t n[3] = {0, 0, 0};
  int64_t inembed[3] = {0, 0, 0};
  int64_t onembed[3] = {0, 0, 0};
  int64_t istride = 1, idist = 1, ostride = 1, odist = 1, batch = 1;
  std::string str() const;
};

struct Buffer {
  bool complex;  // complex64, else float32
  Shape shape;   // sizes it (its product is the element count)
};

struct Step {
  enum class Op {
    // dst[dst_strides . i] = src[src_strides . i] over `shape` (converting:
    // real -> complex (x, 0), complex -> real the real part).
    Copy,
    // The plan, `loops` times, the l-th from src + l * in_step to dst +
    // l * out_step; C2C forward or `inverse`. src == dst: in place.
    Transform,
    // dst[i] *= factor, i < elems (complex).
    Scale,
    // dst[i] = src[i] * factor, i < elems (complex; dst may be src), the
    // imaginary part set to 0 where the index along the halved axis (m
    // long, `inner` elements apart) is 0 or, when `nyquist`, m - 1.
    PrepareC2R,
  };
  Op op = Op::Copy;
  int src = 0, dst = 0;
  // Copy
  Shape shape;
  Strides src_strides, dst_strides;
  // Transform
  PlanShape plan;
  bool inverse = false;
  int64_t loops = 1, in_step = 0, out_step = 0;
  // Scale, PrepareC2R
  int64_t elems = 0, m = 1, inner = 1;
  bool nyquist = false;
  double factor = 1.0;
};

struct Program {
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
};

struct Options {
  // Largest plan rank (cuFFT's is 3; 1 when a multi-dimensional plan was
  // refused).
  int max_rank = 3;
  // Batches with two strides (outer and inner indices both > 1): one plan
  // run per index of the shorter one when that is at most max_loops runs or
  // each run moves at least loop_elements elements, else the elements are
  // transposed through scratch into one batch.
  int64_t max_loops = 16;
  int64_t loop_elements = int64_t(1) << 20;
  // Complex transforms only: the output took over the input's buffer, so
  // the steps read buffer 1 where they would read buffer 0.
  bool in_place = false;
};

// The steps of FFT(axes, inverse, real, n) (ops/fft.h) from a row-contiguous
// input of shape `in_shape` (complex64, or float32 for a forward real
// transform) into the row-contiguous output of shape `out_shape`. `axes`
// are normalized and distinct, in the primitive's order (its last is the
// real axis of a real transform).
Program plan(const Shape& in_shape, const Shape& out_shape,
             const std::vector<int>& axes, bool inverse, bool real, int n,
             const Options& options = {});

}  // namespace fluxion::fft_program
