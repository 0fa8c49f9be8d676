// mx.fft against a naive O(n^2) DFT computed here in double precision, for
// lengths with every kind of factorization (radix 2, 3, 4, 5; 7, 17 and 210
// use the generic odd radix; 97, 127, 1009 and 1000003 run Bluestein),
// batches, every memory layout, cropping and padding, input dtypes and the
// error paths.
#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <sstream>
#include <thread>

#include "fluxion/ops/fft.h"
#include "test_inputs.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;
using namespace fluxion::test::inputs;

namespace {

using cd = std::complex<double>;
using cvec = std::vector<cd>;

cvec random_cvec(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  cvec v(n);
  for (auto& x : v) {
    // Values exactly representable in float32.
    x = cd(static_cast<float>(u(gen)), static_cast<float>(u(gen)));
  }
  return v;
}

std::vector<complex64_t> to_c64(const cvec& v) {
  std::vector<complex64_t> out;
  for (auto x : v) {
    out.emplace_back(static_cast<float>(x.real()),
                     static_cast<float>(x.imag()));
  }
  return out;
}

cvec dft(const cvec& x, bool inverse) {
  int64_t n = x.size();
  cvec y(n);
  double sign = inverse ? 1 : -1;
  for (int64_t k = 0; k < n; ++k) {
    cd acc = 0;
    for (int64_t j = 0; j < n; ++j) {
      double a = sign * 2 * std::numbers::pi * ((j * k) % n) / n;
      acc += x[j] * cd(std::cos(a), std::sin(a));
    }
    y[k] = inverse ? acc / static_cast<double>(n) : acc;
  }
  return y;
}

// Transform along `axis` of a row-major array of `shape` (the line length
// stays the same).
cvec dft_axis(const cvec& x, const Shape& shape, int axis, bool inverse) {
  int64_t n = shape[axis], inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) {
    inner *= shape[d];
  }
  int64_t outer = x.size() / (n * inner);
  cvec y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      cvec line(n);
      for (int64_t t = 0; t < n; ++t) {
        line[t] = x[(o * n + t) * inner + i];
      }
      auto f = dft(line, inverse);
      for (int64_t t = 0; t < n; ++t) {
        y[(o * n + t) * inner + i] = f[t];
      }
    }
  }
  return y;
}

cvec get(const array& a) {
  cvec out;
  for (auto v : to_vector<complex64_t>(a)) {
    out.emplace_back(v.real(), v.imag());
  }
  return out;
}

// Max error within `rtol` of the largest expected magnitude (FFT errors
// scale with the norm, not with each output).
void expect_cclose(const array& a, const cvec& want, const std::string& what,
                   double rtol = 2e-6) {
  ASSERT_EQ(a.dtype(), complex64) << what;
  auto got = get(a);
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1;
  for (auto w : want) {
    scale = std::max(scale, std::abs(w));
  }
  double tol = rtol * scale * (1 + std::log2(1.0 + want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i].real(), want[i].real(), tol) << what << " at " << i;
    ASSERT_NEAR(got[i].imag(), want[i].imag(), tol) << what << " at " << i;
  }
}

void expect_rclose(const array& a, const cvec& want, const std::string& what) {
  ASSERT_EQ(a.dtype(), float32) << what;
  auto got = to_vector<double>(a);
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1;
  for (auto w : want) {
    scale = std::max(scale, std::abs(w));
  }
  double tol = 2e-6 * scale * (1 + std::log2(1.0 + want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i].real(), tol) << what << " at " << i;
  }
}

// The full spectrum irfft reads from n / 2 + 1 frequencies.
cvec hermitian(const cvec& half, int64_t n) {
  cvec full(n);
  for (int64_t k = 0; k <= n / 2; ++k) {
    cd v = half[k];
    if (k == 0 || 2 * k == n) {
      v = cd(v.real(), 0);
    }
    full[k] = v;
    full[(n - k) % n] = std::conj(v);
  }
  return full;
}

const std::vector<int> kLengths = {1,   2,   3,   4,    5,    7,   8,
                                   12,  16,  17,  30,   64,   97,  100,
                                   127, 128, 210, 1000, 1009, 4096};

}  // namespace

TEST(FFT, ComplexLengths) {
  for (int n : kLengths) {
    auto x = random_cvec(n, n);
    auto a = array(to_c64(x).begin(), {n}, complex64);
    expect_cclose(fft::fft(a), dft(x, false), "fft " + std::to_string(n));
    expect_cclose(fft::ifft(a), dft(x, true), "ifft " + std::to_string(n));
  }
}

TEST(FFT, RealLengths) {
  for (int n : kLengths) {
    auto x = random_cvec(n, n + 1);
    std::vector<float> xr;
    cvec xrc;
    for (auto v : x) {
      xr.push_back(static_cast<float>(v.real()));
      xrc.emplace_back(v.real(), 0);
    }
    auto full = dft(xrc, false);
    cvec half(full.begin(), full.begin() + n / 2 + 1);
    auto y = fft::rfft(array(xr.begin(), {n}, float32));
    ASSERT_EQ(y.shape(), Shape{n / 2 + 1});
    expect_cclose(y, half, "rfft " + std::to_string(n));

    auto spec = random_cvec(n / 2 + 1, n + 2);
    auto back =
        fft::irfft(array(to_c64(spec).begin(), {n / 2 + 1}, complex64), n, -1);
    ASSERT_EQ(back.shape(), Shape{n});
    expect_rclose(back, dft(hermitian(spec, n), true),
                  "irfft " + std::to_string(n));
  }
}

TEST(FFT, LargePrimeSpotChecks) {
  // 1000003 is prime (Bluestein with a 2^21 sub-transform): a round trip
  // and a few frequencies summed directly.
  const int n = 1000003;
  auto x = random_cvec(n, 7);
  auto a = array(to_c64(x).begin(), {n}, complex64);
  auto y = get(fft::fft(a));
  for (int64_t k : {0, 1, 4321, 999999}) {
    cd acc = 0;
    for (int64_t j = 0; j < n; ++j) {
      double ang = -2 * std::numbers::pi * ((j * k) % n) / n;
      acc += x[j] * cd(std::cos(ang), std::sin(ang));
    }
    EXPECT_NEAR(std::abs(y[k] - acc), 0, 2e-3) << k;
  }
  auto back = get(fft::ifft(fft::fft(a)));
  double err = 0;
  for (int64_t j = 0; j < n; ++j) {
    err = std::max(err, std::abs(back[j] - x[j]));
  }
  EXPECT_LT(err, 1e-4);
}

TEST(FFT, AxesLayoutsAndBatches) {
  const Shape shape{3, 5, 12};
  auto x = random_cvec(shape_size(shape), 11);
  for (auto layout : all_layouts()) {
    auto a = make_array(to_c64(x), shape, complex64, layout);
    std::string l = layout_name(layout);
    for (int ax : {0, 1, 2, -1}) {
      int axn = ax < 0 ? ax + 3 : ax;
      expect_cclose(fft::fft(a, ax), dft_axis(x, shape, axn, false),
                    "fft axis " + std::to_string(ax) + " " + l);
      expect_cclose(fft::ifft(a, ax), dft_axis(x, shape, axn, true),
                    "ifft axis " + std::to_string(ax) + " " + l);
    }
    auto want2 = dft_axis(dft_axis(x, shape, 1, false), shape, 2, false);
    expect_cclose(fft::fft2(a), want2, "fft2 " + l);
    auto wantn = dft_axis(dft_axis(want2, shape, 0, false), shape, 0, false);
    wantn = dft_axis(dft_axis(x, shape, 0, false), shape, 1, false);
    wantn = dft_axis(wantn, shape, 2, false);
    expect_cclose(fft::fftn(a), wantn, "fftn " + l);
    auto inv = dft_axis(dft_axis(x, shape, 0, true), shape, 2, true);
    expect_cclose(fft::ifftn(a, {2, 0}), inv, "ifftn (2, 0) " + l);
  }
}

TEST(FFT, BlocksOfLines) {
  // Blocks of lines transformed together, with partial last blocks, along
  // inner and outer axes, including length-1 axes and generic radices.
  for (Shape shape : {Shape{130, 7}, Shape{5, 70, 3}, Shape{2, 67, 11},
                      Shape{4, 1, 3}, Shape{200, 2}}) {
    auto x = random_cvec(shape_size(shape), 16);
    auto a = array(to_c64(x).begin(), shape, complex64);
    for (int ax = 0; ax < static_cast<int>(shape.size()); ++ax) {
      expect_cclose(
          fft::ifft(a, ax), dft_axis(x, shape, ax, true),
          "ifft " + shape_text(shape) + " axis " + std::to_string(ax));
      expect_cclose(fft::fft(a, ax), dft_axis(x, shape, ax, false),
                    "fft " + shape_text(shape) + " axis " + std::to_string(ax));
    }
  }
}

TEST(FFT, RealMultiAxis) {
  const Shape shape{4, 6, 10};
  auto x = random_cvec(shape_size(shape), 12);
  std::vector<float> xr;
  cvec xrc;
  for (auto v : x) {
    xr.push_back(static_cast<float>(v.real()));
    xrc.emplace_back(v.real(), 0);
  }
  for (auto layout : all_layouts()) {
    auto a = make_array(xr, shape, float32, layout);
    std::string l = layout_name(layout);
    // rfftn over (0, 2): full transform, then keep half of axis 2.
    auto full = dft_axis(dft_axis(xrc, shape, 0, false), shape, 2, false);
    cvec half;
    for (int i = 0; i < 4 * 6; ++i) {
      for (int k = 0; k < 6; ++k) {
        half.push_back(full[i * 10 + k]);
      }
    }
    auto y = fft::rfftn(a, {0, 2});
    ASSERT_EQ(y.shape(), (Shape{4, 6, 6}));
    expect_cclose(y, half, "rfftn " + l);
    // Last axis in `axes` need not be the last dimension.
    auto y1 = fft::rfft(a, 1);
    ASSERT_EQ(y1.shape(), (Shape{4, 4, 10}));
    // irfftn of rfftn is the identity.
    auto back = fft::irfftn(y, {4, 10}, {0, 2});
    expect_rclose(back, xrc, "irfftn(rfftn) " + l);
    auto back2 = fft::irfft2(fft::rfft2(a), {6, 10}, {-2, -1});
    expect_rclose(back2, xrc, "irfft2(rfft2) " + l);
  }
  // irfftn on a complex spectrum: ifft over axis 0, irfft over axis 1.
  const Shape hs{3, 5};
  auto spec = random_cvec(15, 13);
  auto y =
      fft::irfftn(array(to_c64(spec).begin(), hs, complex64), {3, 8}, {0, 1});
  auto t = dft_axis(spec, hs, 0, true);
  cvec want;
  for (int i = 0; i < 3; ++i) {
    cvec row(t.begin() + i * 5, t.begin() + i * 5 + 5);
    auto r = dft(hermitian(row, 8), true);
    want.insert(want.end(), r.begin(), r.end());
  }
  expect_rclose(y, want, "irfftn complex spectrum");
}

TEST(FFT, CropAndPad) {
  auto x = random_cvec(6, 14);
  auto a = array(to_c64(x).begin(), {6}, complex64);
  cvec padded = x;
  padded.resize(9);
  expect_cclose(fft::fft(a, 9, 0), dft(padded, false), "pad");
  cvec cropped(x.begin(), x.begin() + 4);
  expect_cclose(fft::fft(a, 4, -1), dft(cropped, false), "crop");
  expect_cclose(fft::ifft(a, 4, -1), dft(cropped, true), "ifft crop");
  // irfft: the default length is 2 (m - 1); odd lengths and crops.
  auto spec = array(to_c64(x).begin(), {6}, complex64);
  auto y = fft::irfft(spec);
  EXPECT_EQ(y.shape(), Shape{10});
  expect_rclose(y, dft(hermitian(x, 10), true), "irfft default n");
  expect_rclose(fft::irfft(spec, 11, 0), dft(hermitian(x, 11), true),
                "irfft n = 11");
  expect_rclose(fft::irfft(spec, 4, 0), dft(hermitian(cropped, 4), true),
                "irfft n = 4 crops");
  auto xp = x;
  xp.resize(9);
  expect_rclose(fft::irfft(spec, 16, 0), dft(hermitian(xp, 16), true),
                "irfft n = 16 pads");
  // fft2 with s: (2, 3) from (3, 4).
  auto b = array(to_c64(random_cvec(12, 15)).begin(), {3, 4}, complex64);
  auto bv = get(b);
  cvec sub;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      sub.push_back(bv[i * 4 + j]);
    }
  }
  expect_cclose(fft::fft2(b, {2, 3}, {0, 1}),
                dft_axis(dft_axis(sub, {2, 3}, 0, false), {2, 3}, 1, false),
                "fft2 s");
  // s larger on one axis, smaller on the other.
  auto c = fft::fftn(b, {5, 2}, {0, 1});
  EXPECT_EQ(c.shape(), (Shape{5, 2}));
}

TEST(FFT, Dtypes) {
  std::vector<double> v = {1, -2, 3, 0.5, 4};
  cvec cv(v.begin(), v.end());
  auto want = dft(cv, false);
  for (Dtype t : {float32, float64, float16, bfloat16, int32, uint8, bool_}) {
    std::vector<double> vals = v;
    if (t == int32) {
      vals = {1, -2, 3, 0, 4};
    }
    if (t == uint8 || t == bool_) {
      vals = {1, 0, 3, 1, 4};
      if (t == bool_) {
        vals = {1, 0, 1, 1, 0};
      }
    }
    cvec c(vals.begin(), vals.end());
    auto a = array(vals.begin(), {5}, t);
    auto y = fft::fft(a);
    EXPECT_EQ(y.dtype(), complex64) << dtype_name(t);
    expect_cclose(y, dft(c, false), std::string("fft of ") + dtype_name(t),
                  1e-3);
    auto r = fft::rfft(a);
    EXPECT_EQ(r.dtype(), complex64);
    auto full = dft(c, false);
    expect_cclose(r, cvec(full.begin(), full.begin() + 3),
                  std::string("rfft of ") + dtype_name(t), 1e-3);
  }
  // irfft of a real input: treated as a spectrum with zero imaginary parts.
  auto r = fft::irfft(array({1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(r.dtype(), float32);
  expect_rclose(r, dft(hermitian({1, 2, 3}, 4), true), "irfft real input");
  // rfft of a complex input uses the real part.
  auto rc = fft::rfft(array({complex64_t(1, 5), complex64_t(2, -1)}));
  expect_cclose(rc, {3, -1}, "rfft complex input");
  // Empty batch.
  auto e = fft::fft(zeros({0, 4}, complex64));
  EXPECT_EQ(e.shape(), (Shape{0, 4}));
  e.eval();
  // No axes: a complex copy.
  auto na = fft::fftn(array({1.0f, 2.0f}), Shape{}, std::vector<int>{});
  expect_cclose(na, {1, 2}, "no axes");
}

TEST(FFT, Shift) {
  auto a = reshape(arange(15.0f), {3, 5});
  auto s = fft::fftshift(a);
  // Roll by (1, 2).
  std::vector<double> want;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 5; ++j) {
      want.push_back(((i + 2) % 3) * 5 + (j + 3) % 5);
    }
  }
  expect_close(s, want, 0, 0, "fftshift");
  expect_close(fft::ifftshift(s), iota_vec(15), 0, 0, "ifftshift");
  auto s1 = fft::fftshift(a, {1});
  want.clear();
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 5; ++j) {
      want.push_back(i * 5 + (j + 3) % 5);
    }
  }
  expect_close(s1, want, 0, 0, "fftshift axis 1");
  want.clear();
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 5; ++j) {
      want.push_back(i * 5 + (j + 2) % 5);
    }
  }
  expect_close(fft::ifftshift(a, {-1}), want, 0, 0, "ifftshift axis -1");
  expect_error<std::invalid_argument>([&] { fft::fftshift(a, {2}); }, "[fftshift]");
  expect_error<std::invalid_argument>([&] { fft::ifftshift(a, {-3}); },
                                  "[ifftshift]");
}

TEST(FFT, Errors) {
  auto a = zeros({4, 6}, complex64);
  expect_error<std::invalid_argument>([&] { fft::fft(a, 2); },
                                  "[fft] Invalid axis 2");
  expect_error<std::invalid_argument>([&] { fft::rfft2(a, {0, -3}); }, "[rfft2]");
  expect_error<std::invalid_argument>([&] { fft::fft(a, 0, -1); },
                                      "[fft] Invalid number of data points 0");
  expect_error<std::invalid_argument>(
      [&] { fft::ifft(a, -2, 0); }, "[ifft] Invalid number of data points -2");
  expect_error<std::invalid_argument>(
      [&] {
        fft::fftn(a, {1, -1});
      },
      "[fftn] Received duplicate axes (1,-1)");
  expect_error<std::invalid_argument>(
      [&] {
        fft::ifft2(a, {2, 2, 2}, {0, 1});
      },
      "[ifft2] Shape s (2,2,2) and axes (0,1) must have the same length");
  expect_error<std::invalid_argument>(
      [&] { fft::irfft(zeros({1}, complex64)); },
      "[irfft] Invalid number of data points 0");
  expect_error<std::invalid_argument>(
      [&] { fft::rfftn(a, Shape{}, std::vector<int>{}); }, "[rfftn]");
  expect_error<std::invalid_argument>([&] { fft::fft(zeros({0})); },
                                      "[fft] Invalid number of data points 0");
}

TEST(FFT, PrimitiveParameters) {
  auto x = zeros({4, 6}, float32);
  auto y = fft::rfft(x, 0);
  auto z = fft::rfft(x, 0);
  auto w = fft::rfft(x, 1);
  EXPECT_TRUE(y.primitive().is_equivalent(z.primitive()));
  EXPECT_FALSE(y.primitive().is_equivalent(w.primitive()));
  EXPECT_EQ(y.primitive().output_shapes(y.inputs()),
            (std::vector<Shape>{{3, 6}}));
  auto b = fft::irfft(y, 5, 0);
  EXPECT_EQ(b.primitive().output_shapes(b.inputs()),
            (std::vector<Shape>{{5, 6}}));
  EXPECT_FALSE(b.primitive().is_equivalent(fft::irfft(y, 4, 0).primitive()));
  std::ostringstream os;
  b.primitive().print(os);
  EXPECT_EQ(os.str(), "FFT(axes=(0), inverse, real, n=5)");
}

TEST(FFT, ConcurrentPlans) {
  // Plans are built and cached from several threads at once.
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int n : {97, 1009, 210, 4096, 127}) {
        auto x = random_cvec(n, n + t);
        auto a = array(to_c64(x).begin(), {n}, complex64);
        auto back = get(fft::ifft(fft::fft(a)));
        double err = 0;
        for (int j = 0; j < n; ++j) {
          err = std::max(err, std::abs(back[j] - x[j]));
        }
        ok[t] += err < 1e-5;
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(ok[t], 5) << t;
  }
}
