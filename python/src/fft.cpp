// The mx.fft submodule: discrete Fourier transforms and frequency shifts
// (MLX's names and parameters; `s` / `n` crop or zero-pad as in NumPy).
#include "fluxion/ops/fft.h"

#include "python/src/convert.h"

namespace ff = fluxion::fft;

namespace {

using Ints = std::optional<std::vector<int>>;
using NFn = fx::array (*)(const fx::array&, const fx::Shape&,
                          const std::vector<int>&, fx::StreamOrDevice);
using AxesFn = fx::array (*)(const fx::array&, const std::vector<int>&,
                             fx::StreamOrDevice);

// s and axes as NumPy reads them: s without axes covers the last len(s)
// axes; neither means every axis.
template <NFn WithN, AxesFn WithAxes>
fx::array nd(const fx::array& a, const Ints& s, const Ints& axes,
             fx::StreamOrDevice st) {
  if (s && axes) {
    return WithN(a, *s, *axes, st);
  }
  if (axes) {
    return WithAxes(a, *axes, st);
  }
  if (s) {
    int k = static_cast<int>(s->size());
    std::vector<int> last(k);
    for (int i = 0; i < k; ++i) {
      last[i] = i - k;
    }
    return WithN(a, *s, last, st);
  }
  std::vector<int> all(a.ndim());
  for (int i = 0; i < a.ndim(); ++i) {
    all[i] = i;
  }
  return WithAxes(a, all, st);
}

}  // namespace

void init_fft(py::module_& parent) {
  auto m = parent.def_submodule(
      "fft", "Discrete Fourier transforms (as MLX's mx.fft).");
  const auto stream = "stream"_a = py::none();
#define FLUXION_FFT1(NAME, DOC)                                       \
  m.def(                                                              \
      #NAME,                                                          \
      [](const fx::array& a, std::optional<int> n, int axis,          \
         fx::StreamOrDevice st) {                                     \
        return n ? ff::NAME(a, *n, axis, st) : ff::NAME(a, axis, st); \
      },                                                              \
      "a"_a, "n"_a = py::none(), "axis"_a = -1, stream, DOC);
  FLUXION_FFT1(fft, "One-dimensional discrete Fourier transform.")
  FLUXION_FFT1(ifft, "One-dimensional inverse discrete Fourier transform.")
  FLUXION_FFT1(rfft,
               "One-dimensional transform of a real input (n // 2 + 1 "
               "frequencies).")
  FLUXION_FFT1(irfft, "Inverse of rfft: n real values (default 2 (m - 1)).")
#undef FLUXION_FFT1
#define FLUXION_FFTN(NAME, DEFAULT_AXES, DOC)                      \
  m.def(#NAME, &nd<ff::NAME, ff::NAME>, "a"_a, "s"_a = py::none(), \
        "axes"_a = DEFAULT_AXES, stream, DOC);
  const auto last2 = std::vector<int>{-2, -1};
  FLUXION_FFTN(fft2, last2, "Two-dimensional discrete Fourier transform.")
  FLUXION_FFTN(ifft2, last2, "Two-dimensional inverse transform.")
  FLUXION_FFTN(rfft2, last2, "Two-dimensional transform of a real input.")
  FLUXION_FFTN(irfft2, last2, "Inverse of rfft2.")
  FLUXION_FFTN(fftn, py::none(), "n-dimensional discrete Fourier transform.")
  FLUXION_FFTN(ifftn, py::none(), "n-dimensional inverse transform.")
  FLUXION_FFTN(rfftn, py::none(), "n-dimensional transform of a real input.")
  FLUXION_FFTN(irfftn, py::none(), "Inverse of rfftn.")
#undef FLUXION_FFTN
  m.def(
      "fftshift",
      [](const fx::array& a, const Ints& axes, fx::StreamOrDevice st) {
        return axes ? ff::fftshift(a, *axes, st) : ff::fftshift(a, st);
      },
      "a"_a, "axes"_a = py::none(), stream,
      "Move the zero frequency to the centre (all axes by default).");
  m.def(
      "ifftshift",
      [](const fx::array& a, const Ints& axes, fx::StreamOrDevice st) {
        return axes ? ff::ifftshift(a, *axes, st) : ff::ifftshift(a, st);
      },
      "a"_a, "axes"_a = py::none(), stream, "The inverse of fftshift.");
}
