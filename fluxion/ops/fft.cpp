#include "fluxion/ops/fft.h"

#include <algorithm>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>

#include "fluxion/ops/array_ops.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/unary.h"
#include "fluxion/primitive_args.h"

namespace fluxion {

namespace {

std::string err(const char* op) { return std::string("[") + op + "] "; }

// The output shape of the transform of an input of shape `in`.
Shape fft_out_shape(Shape in, const std::vector<int>& axes, bool inverse,
                    bool real, int n) {
  if (real) {
    in[axes.back()] = inverse ? n : n / 2 + 1;
  }
  return in;
}

array make_fft(const array& x, std::vector<int> axes, bool inverse, bool real,
               int n, Stream st) {
  auto shape = fft_out_shape(x.shape(), axes, inverse, real, n);
  Dtype t = real && inverse ? float32 : complex64;
  return array(std::move(shape), t,
               std::make_shared<FFT>(st, std::move(axes), inverse, real, n),
               {x});
}

// Crop or zero-pad `x` along `ax` to `len`.
array fit(const array& x, int ax, int len, Stream st) {
  int have = x.shape(ax);
  if (have > len) {
    Shape start(x.ndim(), 0);
    Shape stop = x.shape();
    stop[ax] = len;
    return slice(x, start, stop, st);
  }
  if (have < len) {
    return pad(x, {ax}, {0}, {len - have}, array(0, x.dtype()), "constant", st);
  }
  return x;
}

array fft_impl(const array& a, const std::optional<Shape>& n,
               const std::vector<int>& axes_in, bool inverse, bool real,
               const char* op, StreamOrDevice s) {
  auto st = to_stream(s);
  if (n && n->size() != axes_in.size()) {
    throw std::invalid_argument(
        err(op) + "Shape s " + shape_str(*n) + " and axes " +
        shape_str(Shape(axes_in.begin(), axes_in.end())) +
        " must have the same length.");
  }
  std::vector<int> axes;
  for (int ax : axes_in) {
    axes.push_back(normalize_axis(ax, a.ndim(), op));
  }
  auto sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw std::invalid_argument(
        err(op) + "Received duplicate axes " +
        shape_str(Shape(axes_in.begin(), axes_in.end())) + ".");
  }
  if (axes.empty()) {
    if (real) {
      throw std::invalid_argument(err(op) +
                                  "Received no axes: a real transform needs "
                                  "at least one axis.");
    }
    return astype(a, complex64, st);
  }
  Shape len;
  for (size_t i = 0; i < axes.size(); ++i) {
    int d = a.shape(axes[i]);
    len.push_back(n                                           ? (*n)[i]
                  : (real && inverse && i + 1 == axes.size()) ? 2 * (d - 1)
                                                              : d);
    if (len.back() <= 0) {
      throw std::invalid_argument(
          err(op) + "Invalid number of data points " +
          std::to_string(len.back()) + " along axis " +
          std::to_string(axes_in[i]) + " of an array of shape " +
          shape_str(a.shape()) + ": it must be positive.");
    }
  }
  array x = a;
  if (real && !inverse) {
    x = astype(is_complex(a.dtype()) ? fluxion::real(a, st) : a, float32, st);
  } else {
    x = astype(a, complex64, st);
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    bool half = real && inverse && i + 1 == axes.size();
    x = fit(x, axes[i], half ? len[i] / 2 + 1 : len[i], st);
  }
  return make_fft(x, axes, inverse, real, real ? len.back() : 0, st);
}

std::vector<int> all_axes(const array& a) {
  std::vector<int> axes(a.ndim());
  for (int i = 0; i < a.ndim(); ++i) {
    axes[i] = i;
  }
  return axes;
}

array shift_impl(const array& a, const std::vector<int>& axes_in, bool inv,
                 const char* op, StreamOrDevice s) {
  std::vector<int> axes;
  Shape shift;
  for (int ax : axes_in) {
    int x = normalize_axis(ax, a.ndim(), op);
    axes.push_back(x);
    int d = a.shape(x);
    shift.push_back(inv ? -(d / 2) : d / 2);
  }
  if (axes.empty()) {
    return a;
  }
  return roll(a, shift, axes, s);
}

}  // namespace

namespace fft {

#define FLUXION_FFTN_DEF(NAME, INV, REAL)                                      \
  array NAME(const array& a, const Shape& n, const std::vector<int>& axes,     \
             StreamOrDevice s) {                                               \
    return fft_impl(a, n, axes, INV, REAL, #NAME, s);                          \
  }                                                                            \
  array NAME(const array& a, const std::vector<int>& axes, StreamOrDevice s) { \
    return fft_impl(a, std::nullopt, axes, INV, REAL, #NAME, s);               \
  }                                                                            \
  array NAME(const array& a, StreamOrDevice s) {                               \
    return fft_impl(a, std::nullopt, all_axes(a), INV, REAL, #NAME, s);        \
  }
FLUXION_FFTN_DEF(fftn, false, false)
FLUXION_FFTN_DEF(ifftn, true, false)
FLUXION_FFTN_DEF(rfftn, false, true)
FLUXION_FFTN_DEF(irfftn, true, true)
#undef FLUXION_FFTN_DEF

#define FLUXION_FFT1_DEF(NAME, INV, REAL)                          \
  array NAME(const array& a, int n, int axis, StreamOrDevice s) {  \
    return fft_impl(a, Shape{n}, {axis}, INV, REAL, #NAME, s);     \
  }                                                                \
  array NAME(const array& a, int axis, StreamOrDevice s) {         \
    return fft_impl(a, std::nullopt, {axis}, INV, REAL, #NAME, s); \
  }
FLUXION_FFT1_DEF(fft, false, false)
FLUXION_FFT1_DEF(ifft, true, false)
FLUXION_FFT1_DEF(rfft, false, true)
FLUXION_FFT1_DEF(irfft, true, true)
#undef FLUXION_FFT1_DEF

#define FLUXION_FFT2_DEF(NAME, INV, REAL)                                      \
  array NAME(const array& a, const Shape& n, const std::vector<int>& axes,     \
             StreamOrDevice s) {                                               \
    return fft_impl(a, n, axes, INV, REAL, #NAME, s);                          \
  }                                                                            \
  array NAME(const array& a, const std::vector<int>& axes, StreamOrDevice s) { \
    return fft_impl(a, std::nullopt, axes, INV, REAL, #NAME, s);               \
  }
FLUXION_FFT2_DEF(fft2, false, false)
FLUXION_FFT2_DEF(ifft2, true, false)
FLUXION_FFT2_DEF(rfft2, false, true)
FLUXION_FFT2_DEF(irfft2, true, true)
#undef FLUXION_FFT2_DEF

array fftshift(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  return shift_impl(a, axes, false, "fftshift", s);
}
array fftshift(const array& a, StreamOrDevice s) {
  return shift_impl(a, all_axes(a), false, "fftshift", s);
}
array ifftshift(const array& a, const std::vector<int>& axes,
                StreamOrDevice s) {
  return shift_impl(a, axes, true, "ifftshift", s);
}
array ifftshift(const array& a, StreamOrDevice s) {
  return shift_impl(a, all_axes(a), true, "ifftshift", s);
}

}  // namespace fft

// --- the primitive ---

bool FFT::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& p = static_cast<const FFT&>(o);
  return p.axes_ == axes_ && p.inverse_ == inverse_ && p.real_ == real_ &&
         p.n_ == n_;
}

std::vector<PrimitiveArg> FFT::state() const {
  return export_state(export_ints(axes_), inverse_, real_, int64_t{n_});
}

std::shared_ptr<Primitive> FFT::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "FFT");
  return std::make_shared<FFT>(s, a.ints(0), a.b(1), a.b(2), a.i32(3));
}

std::vector<Shape> FFT::output_shapes(const std::vector<array>& in) {
  return {fft_out_shape(in[0].shape(), axes_, inverse_, real_, n_)};
}

void FFT::print(std::ostream& os) const {
  os << "FFT(axes=" << shape_str(Shape(axes_.begin(), axes_.end()))
     << (inverse_ ? ", inverse" : "") << (real_ ? ", real" : "");
  if (real_) {
    os << ", n=" << n_;
  }
  os << ")";
}

namespace {

// Weights along the halved axis of a real transform of length n, shaped to
// broadcast against an array of `ndim` dimensions: `paired` on the
// frequencies standing for a conjugate pair, 1 on frequency 0 and (even n)
// n / 2.
array half_weights(int n, int ax, int ndim, float paired, Stream st) {
  int m = n / 2 + 1;
  std::vector<float> w(m, paired);
  w[0] = 1.0f;
  if (n % 2 == 0) {
    w[m - 1] = 1.0f;
  }
  Shape shape(ndim, 1);
  shape[ax] = m;
  return array(w.data(), shape, float32);
}

double axes_size(const Shape& shape, const std::vector<int>& axes) {
  double n = 1;
  for (int ax : axes) {
    n *= shape[ax];
  }
  return n;
}

}  // namespace

std::vector<array> FFT::jvp(const std::vector<array>& primals,
                            const std::vector<array>& tangents,
                            const std::vector<int>& argnums) {
  // Linear: the transform of the tangent.
  return {make_fft(tangents[0], axes_, inverse_, real_, n_, stream())};
}

std::vector<array> FFT::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>& argnums,
                            const std::vector<array>& outputs) {
  auto st = stream();
  const auto& ct = cotangents[0];
  if (!real_) {
    // The DFT matrix (and its inverse) is symmetric: vjp = transpose.
    return {make_fft(ct, axes_, inverse_, false, 0, st)};
  }
  int last = axes_.back();
  int nd = primals[0].ndim();
  Shape len;
  const Shape& real_shape = inverse_ ? outputs[0].shape() : primals[0].shape();
  for (int ax : axes_) {
    len.push_back(real_shape[ax]);
  }
  double size = axes_size(real_shape, axes_);
  if (!inverse_) {
    // L x = rfftn(x); conj(L*(conj ct)) = Re(fftn(pad(ct))) = N irfftn(w *
    // conj(ct)): irfftn doubles the paired frequencies, w halves them back.
    auto w = half_weights(n_, last, nd, 0.5f, st);
    auto g = fft::irfftn(multiply(conjugate(ct, st), w, st), len, axes_, st);
    return {multiply(g, array(static_cast<float>(size)), st)};
  }
  // L c = irfftn(c): L* y = a / N conj(rfftn(y)) on the kept half, a = 2 on
  // the frequencies irfftn counts twice.
  auto a = half_weights(n_, last, nd, 2.0f, st);
  auto y = fft::rfftn(astype(ct, float32, st), len, axes_, st);
  auto scale =
      divide(astype(a, complex64, st), array(static_cast<float>(size)), st);
  return {multiply(conjugate(y, st), scale, st)};
}

std::pair<std::vector<array>, std::vector<int>> FFT::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int b = axes[0];
  std::vector<int> shifted;
  for (int ax : axes_) {
    shifted.push_back(b >= 0 && ax >= b ? ax + 1 : ax);
  }
  return {{make_fft(inputs[0], shifted, inverse_, real_, n_, stream())}, {b}};
}

}  // namespace fluxion
