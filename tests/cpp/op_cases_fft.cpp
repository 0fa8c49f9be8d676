// Op-spec cases for mx.fft. The transforms compute in complex64 (float32
// precision) and have complex outputs, so each case returns the real and
// imaginary parts (float32), and complex inputs are built from two float64
// inputs as x + i y. Tolerances are those of the core table's float32 cast
// (a large finite-difference step is exact for these linear maps).
#include <algorithm>
#include <cmath>
#include <complex>

#include "fluxion/ops/fft.h"
#include "op_cases.h"

namespace fluxion::test {

namespace {

array cplx(const array& x, const array& y) {
  return astype(x, complex64) +
         astype(y, complex64) * array(complex64_t(0.0f, 1.0f));
}

std::vector<array> parts(const array& z) { return {real(z), imag(z)}; }

Fn of_real(std::function<array(const array&)> g) {
  return [g](const std::vector<array>& x) { return parts(g(x[0])); };
}
Fn of_complex(std::function<array(const array&)> g) {
  return
      [g](const std::vector<array>& x) { return parts(g(cplx(x[0], x[1]))); };
}
// A real-valued output of a complex input (irfft).
Fn real_of_complex(std::function<array(const array&)> g) {
  return [g](const std::vector<array>& x) {
    return std::vector<array>{g(cplx(x[0], x[1]))};
  };
}

// --- references: a direct DFT per axis in complex double ---

using cd = std::complex<double>;
struct CHost {
  Shape shape;
  std::vector<cd> v;
};
CHost chost(const array& re, const array* im) {
  CHost h{re.shape(), {}};
  auto r = values(re);
  std::vector<double> i = im ? values(*im) : std::vector<double>(r.size());
  for (size_t k = 0; k < r.size(); ++k) h.v.emplace_back(r[k], i[k]);
  return h;
}
// An axis of a row-major shape: normalized, with the element counts
// before (outer) and after (inner) it.
struct AxisSplit {
  int axis;
  int64_t outer = 1, inner = 1;
};
AxisSplit split_at(const Shape& shape, int axis) {
  int nd = static_cast<int>(shape.size());
  AxisSplit a{axis < 0 ? axis + nd : axis};
  for (int d = 0; d < a.axis; ++d) a.outer *= shape[d];
  for (int d = a.axis + 1; d < nd; ++d) a.inner *= shape[d];
  return a;
}
// Along `axis`: crop or zero-pad to n, then transform (inverse scales 1/n).
CHost dft(const CHost& h, int axis, int n, bool inverse) {
  auto [ax, outer, inner] = split_at(h.shape, axis);
  axis = ax;
  int64_t m = h.shape[axis];
  CHost out{h.shape, std::vector<cd>(outer * n * inner)};
  out.shape[axis] = n;
  double sign = inverse ? 1 : -1;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      for (int f = 0; f < n; ++f) {
        cd s = 0;
        for (int64_t t = 0; t < std::min<int64_t>(m, n); ++t) {
          double ang = sign * 2 * M_PI * double(f) * double(t) / n;
          s += h.v[(o * m + t) * inner + i] * cd(std::cos(ang), std::sin(ang));
        }
        out.v[(o * n + f) * inner + i] = inverse ? s / double(n) : s;
      }
  return out;
}
// The first `keep` entries along axis (rfft's half spectrum).
CHost crop(const CHost& h, int axis, int keep) {
  auto [ax, outer, inner] = split_at(h.shape, axis);
  axis = ax;
  int64_t m = h.shape[axis];
  CHost out{h.shape, std::vector<cd>(outer * keep * inner)};
  out.shape[axis] = keep;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < keep; ++k)
      for (int64_t i = 0; i < inner; ++i)
        out.v[(o * keep + k) * inner + i] =
            k < m ? h.v[(o * m + k) * inner + i] : cd(0);
  return out;
}
// irfft along axis with output length n: the Hermitian spectrum from the
// first n/2 + 1 entries, inverse DFT, real part.
CHost irdft(const CHost& h, int axis, int n) {
  CHost half = crop(h, axis, n / 2 + 1);
  auto [ax, outer, inner] = split_at(half.shape, axis);
  axis = ax;
  CHost full{half.shape, std::vector<cd>(outer * n * inner)};
  full.shape[axis] = n;
  int64_t m = n / 2 + 1;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      for (int64_t f = 0; f < n; ++f) {
        cd val = f < m ? half.v[(o * m + f) * inner + i]
                       : std::conj(half.v[(o * m + (n - f)) * inner + i]);
        if (f == 0 || (n % 2 == 0 && f == n / 2)) val = val.real();
        full.v[(o * n + f) * inner + i] = val;
      }
  CHost r = dft(full, axis, n, true);
  for (auto& e : r.v) e = e.real();
  return r;
}
Arrays to_parts(const CHost& h, bool with_imag = true) {
  std::vector<double> re, im;
  for (auto& e : h.v) re.push_back(e.real()), im.push_back(e.imag());
  Arrays out{host_array(re, h.shape)};
  if (with_imag) out.push_back(host_array(im, h.shape));
  return out;
}
Ref of_real_ref(std::function<CHost(const CHost&)> g) {
  return [g](const Arrays& x) { return to_parts(g(chost(x[0], nullptr))); };
}
Ref of_complex_ref(std::function<CHost(const CHost&)> g, bool imag = true) {
  return [g, imag](const Arrays& x) {
    return to_parts(g(chost(x[0], &x[1])), imag);
  };
}
// np.fft.fftshift / ifftshift along `axes` (all when empty).
Ref shift_ref(std::vector<int> axes, bool inverse) {
  return [axes, inverse](const Arrays& x) {
    Host h(x[0]);
    std::vector<int> ax = axes;
    if (ax.empty())
      for (int d = 0; d < x[0].ndim(); ++d) ax.push_back(d);
    std::vector<double> v(h.v.size());
    auto st = h.strides();
    for (size_t e = 0; e < v.size(); ++e) {
      int64_t r = e, src = 0;
      for (int d = 0; d < x[0].ndim(); ++d) {
        int64_t i = (r / st[d]) % h.shape[d];
        int n = h.shape[d];
        if (std::find(ax.begin(), ax.end(), d) != ax.end()) {
          int shift = inverse ? n - n / 2 : n / 2;
          i = ((i - shift) % n + n) % n;
        }
        src += i * st[d];
      }
      v[e] = h.v[src];
    }
    return Arrays{host_array(v, h.shape)};
  };
}

}  // namespace

std::vector<OpCase> fft_cases() {
  std::vector<OpCase> c;
  // complex64 arithmetic: float32 accuracy in every dtype.
  auto add = [&](const std::string& name, Fn f, std::vector<In> in, Ref ref,
                 bool second = false) {
    OpCase k{name,
             f,
             std::move(in),
             second ? Deriv::second : Deriv::first,
             1e-3,
             1e-2};
    k.dtypes = {float64, float32};
    k.ref = std::move(ref);
    k.fwd_tol = 1e-5;
    // A batched transform (vmap) and the loop's single ones may take
    // different plans (cuFFT), whose float32 results differ in the last
    // bits, whatever the dtype.
    k.vmap_tol = 1e-5;
    c.push_back(std::move(k));
  };
  add("fft", of_real([](auto& x) { return fft::fft(x); }), {normal({4, 6})},
      of_real_ref([](const CHost& h) { return dft(h, -1, 6, false); }), true);
  add("fft_complex_pad", of_complex([](auto& z) { return fft::fft(z, 6, 0); }),
      {normal({4, 5}), normal({4, 5})},
      of_complex_ref([](const CHost& h) { return dft(h, 0, 6, false); }), true);
  add("ifft_crop", of_complex([](auto& z) { return fft::ifft(z, 3, -1); }),
      {normal({3, 5}), normal({3, 5})},
      of_complex_ref([](const CHost& h) { return dft(h, -1, 3, true); }));
  add("fft2", of_complex([](auto& z) { return fft::fft2(z); }),
      {normal({3, 4, 5}), normal({3, 4, 5})},
      of_complex_ref([](const CHost& h) {
        return dft(dft(h, 1, 4, false), 2, 5, false);
      }));
  add("ifftn_axes", of_complex([](auto& z) { return fft::ifftn(z, {2, 0}); }),
      {normal({3, 4, 5}), normal({3, 4, 5})},
      of_complex_ref([](const CHost& h) {
        return dft(dft(h, 2, 5, true), 0, 3, true);
      }));
  add("fftn_prime", of_complex([](auto& z) { return fft::fftn(z); }),
      {normal({7, 11}), normal({7, 11})},
      of_complex_ref([](const CHost& h) {
        return dft(dft(h, 0, 7, false), 1, 11, false);
      }));
  add("rfft_even", of_real([](auto& x) { return fft::rfft(x); }),
      {normal({3, 8})}, of_real_ref([](const CHost& h) {
        return crop(dft(h, -1, 8, false), -1, 5);
      }),
      true);
  add("rfft_odd", of_real([](auto& x) { return fft::rfft(x, 7, 0); }),
      {normal({5, 3})}, of_real_ref([](const CHost& h) {
        return crop(dft(h, 0, 7, false), 0, 4);
      }));
  // The real transform over the last axis listed (0), then axis 1.
  add("rfftn", of_real([](auto& x) { return fft::rfftn(x, {1, 0}); }),
      {normal({4, 6})}, of_real_ref([](const CHost& h) {
        return dft(crop(dft(h, 0, 4, false), 0, 3), 1, 6, false);
      }));
  add("rfft2_s", of_real([](auto& x) {
        return fft::rfft2(x, {3, 5}, {-2, -1});
      }),
      {normal({2, 4, 6})}, of_real_ref([](const CHost& h) {
        return dft(crop(dft(h, 2, 5, false), 2, 3), 1, 3, false);
      }));
  add("irfft_even", real_of_complex([](auto& z) { return fft::irfft(z); }),
      {normal({3, 5}), normal({3, 5})},
      of_complex_ref([](const CHost& h) { return irdft(h, -1, 8); }, false),
      true);
  add("irfft_odd", real_of_complex([](auto& z) { return fft::irfft(z, 9, 0); }),
      {normal({5, 2}), normal({5, 2})},
      of_complex_ref([](const CHost& h) { return irdft(h, 0, 9); }, false));
  add("irfftn", real_of_complex([](auto& z) {
        return fft::irfftn(z, {4, 6}, {0, 1});
      }),
      {normal({4, 4}), normal({4, 4})},
      of_complex_ref([](const CHost& h) {
        return irdft(dft(h, 0, 4, true), 1, 6);
      }, false));
  add("irfft2", real_of_complex([](auto& z) { return fft::irfft2(z); }),
      {normal({2, 3, 3}), normal({2, 3, 3})},
      of_complex_ref([](const CHost& h) {
        return irdft(dft(h, 1, 3, true), 2, 4);
      }, false));
  add("fftshift", unary([](auto& x) { return fft::fftshift(x); }),
      {normal({3, 4})}, shift_ref({}, false));
  add("ifftshift", unary([](auto& x) { return fft::ifftshift(x, {1}); }),
      {normal({3, 5})}, shift_ref({1}, true));
  for (auto* k = &c[c.size() - 2]; k <= &c.back(); ++k) {
    k->fwd_tol = 0;  // moves only
    k->dtypes = kFloats;
  }
  return c;
}

FLUXION_REGISTER_OP_CASES(fft_cases);

}  // namespace fluxion::test
