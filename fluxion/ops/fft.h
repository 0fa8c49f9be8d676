// Discrete Fourier transforms (MLX's mx.fft).
//
// Complex transforms take any input, promoted to complex64 (float64 inputs
// compute in complex64 too, as in MLX: Fluxion has no complex128); rfft*
// take real inputs, cast to float32, and return complex64; irfft* return
// float32. `n` / `s` give the transform length along each axis: the input
// is cropped or zero-padded to it first (NumPy). Inverse transforms scale
// by 1 / n. irfft's default length is 2 (m - 1) for m input frequencies.
#pragma once

#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

namespace fft {

#define FLUXION_FFTN_DECL(NAME)                                            \
  array NAME(const array& a, const Shape& n, const std::vector<int>& axes, \
             StreamOrDevice s = {});                                       \
  array NAME(const array& a, const std::vector<int>& axes,                 \
             StreamOrDevice s = {});                                       \
  array NAME(const array& a, StreamOrDevice s = {});
// n-dimensional: over `axes` (all axes by default).
FLUXION_FFTN_DECL(fftn)
FLUXION_FFTN_DECL(ifftn)
FLUXION_FFTN_DECL(rfftn)
FLUXION_FFTN_DECL(irfftn)
#undef FLUXION_FFTN_DECL

#define FLUXION_FFT1_DECL(NAME)                                       \
  array NAME(const array& a, int n, int axis, StreamOrDevice s = {}); \
  array NAME(const array& a, int axis = -1, StreamOrDevice s = {});
FLUXION_FFT1_DECL(fft)
FLUXION_FFT1_DECL(ifft)
FLUXION_FFT1_DECL(rfft)
FLUXION_FFT1_DECL(irfft)
#undef FLUXION_FFT1_DECL

#define FLUXION_FFT2_DECL(NAME)                                            \
  array NAME(const array& a, const Shape& n, const std::vector<int>& axes, \
             StreamOrDevice s = {});                                       \
  array NAME(const array& a, const std::vector<int>& axes = {-2, -1},      \
             StreamOrDevice s = {});
FLUXION_FFT2_DECL(fft2)
FLUXION_FFT2_DECL(ifft2)
FLUXION_FFT2_DECL(rfft2)
FLUXION_FFT2_DECL(irfft2)
#undef FLUXION_FFT2_DECL

// Move the zero frequency to the centre (roll by n / 2 along each axis;
// all axes by default); ifftshift undoes it.
array fftshift(const array& a, const std::vector<int>& axes,
               StreamOrDevice s = {});
array fftshift(const array& a, StreamOrDevice s = {});
array ifftshift(const array& a, const std::vector<int>& axes,
                StreamOrDevice s = {});
array ifftshift(const array& a, StreamOrDevice s = {});

// NumPy's sample frequencies, float32 (computed in double, rounded once):
// fftfreq gives [0, 1, ..., ceil(n/2) - 1, -floor(n/2), ..., -1] / (d n),
// rfftfreq [0, 1, ..., n / 2] / (d n). n must be positive, d non-zero.
array fftfreq(int n, double d = 1.0, StreamOrDevice s = {});
array rfftfreq(int n, double d = 1.0, StreamOrDevice s = {});

// NumPy's `norm=` of a transform whose result is `out`: the transforms
// above use "backward" (forward unscaled, inverse by 1 / n); "ortho" scales
// both by 1 / sqrt(n), "forward" puts 1 / n on the forward transform. `n` is
// the number of points transformed (the product of the lengths along the
// axes, real lengths for real transforms). Returns `out` rescaled.
array apply_norm(const array& out, double n, bool inverse,
                 const std::string& norm, StreamOrDevice s = {});
// Throws std::invalid_argument unless `norm` is one of the three.
void check_norm(const std::string& norm, const char* op);

}  // namespace fft

// The transform along `axes` (distinct, normalized) of an input already of
// the transform's size: complex64 -> complex64; real: float32 -> complex64
// with the last axis of `axes` halved (n / 2 + 1), or, inverse, complex64
// -> float32 with that axis `n` long. Inverse transforms scale by 1 / size.
// Gradients (the rules' convention, JAX's: the vjp of a complex-linear map
// is its transpose; the public vjp's is its adjoint): the DFT matrix is
// symmetric, so a complex transform's vjp is the same transform of the
// cotangent. rfftn's vjp is N irfftn(conj(ct) * w) with w = 1/2 on the
// frequencies that stand for a conjugate pair and 1 on the self-conjugate ones
// (0 and n / 2); irfftn's is conj(rfftn(ct)) * a / N with a = 2 on the paired
// frequencies, 1 on the others. jvp: the transform of the tangent. vmap: the
// axes shift past the batch axis.
class FFT : public Primitive {
 public:
  FFT(Stream s, std::vector<int> axes, bool inverse, bool real, int n = 0)
      : Primitive(s),
        axes_(std::move(axes)),
        inverse_(inverse),
        real_(real),
        n_(n) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "FFT"; }
  FLUXION_DECLARE_STATE
  void print(std::ostream& os) const override;
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  const std::vector<int>& axes() const { return axes_; }
  bool inverse() const { return inverse_; }
  bool real() const { return real_; }
  // For real transforms: the real length along the last axis of axes().
  int n() const { return n_; }

 private:
  std::vector<int> axes_;
  bool inverse_;
  bool real_;
  int n_;
};

}  // namespace fluxion
