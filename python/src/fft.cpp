// The mx.fft submodule: discrete Fourier transforms and frequency shifts
// (MLX's names and parameters; `s` / `n` crop or zero-pad as in NumPy).
#include "fluxion/ops/fft.h"

#include "python/src/docs.h"
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
    return WithN(a, fx::Shape(s->begin(), s->end()), *axes, st);
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
    return WithN(a, fx::Shape(s->begin(), s->end()), last, st);
  }
  std::vector<int> all(a.ndim());
  for (int i = 0; i < a.ndim(); ++i) {
    all[i] = i;
  }
  return WithAxes(a, all, st);
}

// The number of points a transform covers along `axes` of `a` (for norm=):
// the lengths of the (cropped / padded) time-domain side. `real_out` is the
// real output of an inverse real transform; `s` the requested lengths.
double points(const fx::array& time_side, const std::vector<int>& axes) {
  double n = 1;
  for (int ax : axes) {
    n *= time_side.shape(ax < 0 ? ax + time_side.ndim() : ax);
  }
  return n;
}

std::vector<int> resolved_axes(const fx::array& a, const Ints& s,
                               const Ints& axes) {
  if (axes) {
    return *axes;
  }
  if (s) {
    int k = static_cast<int>(s->size());
    std::vector<int> last(k);
    for (int i = 0; i < k; ++i) {
      last[i] = i - k;
    }
    return last;
  }
  std::vector<int> all(a.ndim());
  for (int i = 0; i < a.ndim(); ++i) {
    all[i] = i;
  }
  return all;
}

// fftshift's axes: None, an int or a sequence.
using ShiftAxes = std::optional<std::variant<int, std::vector<int>>>;
std::optional<std::vector<int>> shift_axes(const ShiftAxes& axes) {
  if (!axes) {
    return std::nullopt;
  }
  if (auto* i = std::get_if<int>(&*axes)) {
    return std::vector<int>{*i};
  }
  return std::get<std::vector<int>>(*axes);
}

}  // namespace

void init_fft(py::module_& parent) {
  auto m = parent.def_submodule(
      "fft", "Discrete Fourier transforms (as MLX's mx.fft).");
  const auto stream = "stream"_a = py::none();
  // kind: 0 complex forward, 1 complex inverse, 2 real forward, 3 real
  // inverse.
#define FLUXION_FFT1(NAME, KIND, DOC, RET)                                      \
  m.def(                                                                   \
      #NAME,                                                               \
      [](const fx::array& a, std::optional<int> n, int axis,               \
         const std::string& norm, fx::StreamOrDevice st) {                 \
        ff::check_norm(norm, #NAME);                                       \
        auto out = n ? ff::NAME(a, *n, axis, st) : ff::NAME(a, axis, st);  \
        double pts = KIND == 2 ? (n ? *n : points(a, {axis}))              \
                               : points(out, {axis});                      \
        return ff::apply_norm(out, pts, KIND % 2 == 1, norm, st);          \
      },                                                                   \
      "a"_a, "n"_a = py::none(), "axis"_a = -1,                            \
      "norm"_a = "backward", stream, DOC "\n\nArgs:\n"                                                               \
      "    a (array): Input array.\n"                                           \
      "    n (int, optional): Points along ``axis``: the input is cropped or\n"  \
      "        zero-padded to it; its size along ``axis`` when omitted.\n"      \
      "    axis (int, optional): The axis to transform. Default -1.\n"           \
      "    norm (str, optional): Scaling: ``\"backward\"`` (none forward, 1/n\n"  \
      "        inverse), ``\"ortho\"`` (1/sqrt(n) both) or ``\"forward\"``.\n"    \
      FXDOC_STREAM FXDOC_RET_ARRAY RET "\n");
  FLUXION_FFT1(fft, 0, "One-dimensional discrete Fourier transform.",
               "The ``complex64`` transform.")
  FLUXION_FFT1(ifft, 1, "One-dimensional inverse discrete Fourier transform.",
               "The ``complex64`` inverse transform.")
  FLUXION_FFT1(rfft, 2,
               "One-dimensional transform of a real input (n // 2 + 1 "
               "frequencies).",
               "The ``complex64`` non-negative frequencies, ``n // 2 + 1`` "
               "along ``axis``.")
  FLUXION_FFT1(irfft, 3,
               "Inverse of rfft: n real values (default 2 (m - 1)).",
               "The ``float32`` signal; ``n`` is the output length, ``2 * (m "
               "- 1)`` for ``m`` input frequencies by default.")
#undef FLUXION_FFT1
#define FLUXION_FFTN(NAME, KIND, DEFAULT_AXES, DOC, AXES)                         \
  m.def(                                                                    \
      #NAME,                                                                \
      [](const fx::array& a, const Ints& s, const Ints& axes,               \
         const std::string& norm, fx::StreamOrDevice st) {                  \
        ff::check_norm(norm, #NAME);                                        \
        auto out = nd<ff::NAME, ff::NAME>(a, s, axes, st);                  \
        auto ax = resolved_axes(a, s, axes);                                \
        double pts = 1;                                                     \
        if (KIND == 2) {                                                    \
          if (s) {                                                          \
            for (int v : *s) pts *= v;                                      \
          } else {                                                          \
            pts = points(a, ax);                                            \
          }                                                                 \
        } else {                                                            \
          pts = points(out, ax);                                            \
        }                                                                   \
        return ff::apply_norm(out, pts, KIND % 2 == 1, norm, st);           \
      },                                                                    \
      "a"_a, "s"_a = py::none(), "axes"_a = DEFAULT_AXES,                   \
      "norm"_a = "backward", stream, DOC "\n\nArgs:\n"                                                               \
      "    a (array): Input array.\n"                                           \
      "    s (list(int), optional): Points along each axis (crop or pad);\n"  \
      "        the input's sizes when omitted.\n"                              \
      "    axes (list(int), optional): The axes to transform; " AXES "\n"     \
      "    norm (str, optional): Scaling: ``\"backward\"``, ``\"ortho\"`` or\n" \
      "        ``\"forward\"`` (as in :func:`fft`).\n"                           \
      FXDOC_STREAM FXDOC_RET_ARRAY "The transform.\n");
  const auto last2 = std::vector<int>{-2, -1};
  FLUXION_FFTN(fft2, 0, last2, "Two-dimensional discrete Fourier transform.",
               "the last two by default.")
  FLUXION_FFTN(ifft2, 1, last2, "Two-dimensional inverse transform.",
               "the last two by default.")
  FLUXION_FFTN(rfft2, 2, last2, "Two-dimensional transform of a real input.",
               "the last two by default.")
  FLUXION_FFTN(irfft2, 3, last2, "Inverse of rfft2.",
               "the last two by default.")
  FLUXION_FFTN(fftn, 0, py::none(),
               "n-dimensional discrete Fourier transform.",
               "the last\n        ``len(s)`` (all when ``s`` is omitted) by default.")
  FLUXION_FFTN(ifftn, 1, py::none(), "n-dimensional inverse transform.",
               "the last\n        ``len(s)`` (all when ``s`` is omitted) by default.")
  FLUXION_FFTN(rfftn, 2, py::none(),
               "n-dimensional transform of a real input.",
               "the last\n        ``len(s)`` (all when ``s`` is omitted) by default.")
  FLUXION_FFTN(irfftn, 3, py::none(), "Inverse of rfftn.",
               "the last\n        ``len(s)`` (all when ``s`` is omitted) by default.")
#undef FLUXION_FFTN
  m.def(
      "fftshift",
      [](const fx::array& a, const ShiftAxes& axes, fx::StreamOrDevice st) {
        auto ax = shift_axes(axes);
        return ax ? ff::fftshift(a, *ax, st) : ff::fftshift(a, st);
      },
      "a"_a, "axes"_a = py::none(), stream,
      R"doc(Move the zero-frequency term to the centre.

Args:
    a (array): Input array (a spectrum).
    axes (int or list(int), optional): The axes to shift; all when
        omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a`` rolled by ``n // 2`` along each axis.
)doc");
  m.def(
      "ifftshift",
      [](const fx::array& a, const ShiftAxes& axes, fx::StreamOrDevice st) {
        auto ax = shift_axes(axes);
        return ax ? ff::ifftshift(a, *ax, st) : ff::ifftshift(a, st);
      },
      "a"_a, "axes"_a = py::none(), stream,
      R"doc(Undo :func:`fftshift`.

Args:
    a (array): Input array.
    axes (int or list(int), optional): The axes to shift; all when
        omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a`` rolled by ``-(n // 2)`` along each axis.
)doc");
  m.def(
      "fftfreq",
      [](int n, double d, fx::StreamOrDevice st) {
        return ff::fftfreq(n, d, st);
      },
      "n"_a, "d"_a = 1.0, py::kw_only(), stream,
      R"doc(The sample frequencies of an ``n``-point :func:`fft`.

Args:
    n (int): The number of points.
    d (float, optional): The sample spacing. Default 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``float32`` frequencies in NumPy's order (0, positive, then
    negative).

Example:
    >>> mx.fft.fftfreq(4).tolist()
    [0.0, 0.25, -0.5, -0.25]
)doc");
  m.def(
      "rfftfreq",
      [](int n, double d, fx::StreamOrDevice st) {
        return ff::rfftfreq(n, d, st);
      },
      "n"_a, "d"_a = 1.0, py::kw_only(), stream,
      R"doc(The non-negative sample frequencies of an ``n``-point :func:`rfft`.

Args:
    n (int): The number of points.
    d (float, optional): The sample spacing. Default 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The ``n // 2 + 1`` frequencies, ``float32``.
)doc");
}
