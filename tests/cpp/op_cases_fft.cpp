// Op-spec cases for mx.fft. The transforms compute in complex64 (float32
// precision) and have complex outputs, so each case returns the real and
// imaginary parts (float32), and complex inputs are built from two float64
// inputs as x + i y. Tolerances are those of the core table's float32 cast
// (a large finite-difference step is exact for these linear maps).
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

}  // namespace

std::vector<OpCase> fft_cases() {
  std::vector<OpCase> c;
  auto add = [&](const std::string& name, Fn f, std::vector<array> in,
                 bool second = false) {
    c.push_back({name, f, std::move(in), true, second, 1e-3, 1e-2});
  };
  add("fft", of_real([](auto& x) { return fft::fft(x); }), {rnd({4, 6}, 1)},
      true);
  add("fft_complex_pad", of_complex([](auto& z) { return fft::fft(z, 6, 0); }),
      {rnd({4, 5}, 2), rnd({4, 5}, 3)}, true);
  add("ifft_crop", of_complex([](auto& z) { return fft::ifft(z, 3, -1); }),
      {rnd({3, 5}, 4), rnd({3, 5}, 5)});
  add("fft2", of_complex([](auto& z) { return fft::fft2(z); }),
      {rnd({3, 4, 5}, 6), rnd({3, 4, 5}, 7)});
  add("ifftn_axes", of_complex([](auto& z) {
        return fft::ifftn(z, {2, 0});
      }),
      {rnd({3, 4, 5}, 8), rnd({3, 4, 5}, 9)});
  add("fftn_prime", of_complex([](auto& z) { return fft::fftn(z); }),
      {rnd({7, 11}, 10), rnd({7, 11}, 11)});
  add("rfft_even", of_real([](auto& x) { return fft::rfft(x); }),
      {rnd({3, 8}, 12)}, true);
  add("rfft_odd", of_real([](auto& x) { return fft::rfft(x, 7, 0); }),
      {rnd({5, 3}, 13)});
  add("rfftn", of_real([](auto& x) {
        return fft::rfftn(x, {1, 0});
      }),
      {rnd({4, 6}, 14)});
  add("rfft2_s", of_real([](auto& x) {
        return fft::rfft2(x, {3, 5}, {-2, -1});
      }),
      {rnd({2, 4, 6}, 15)});
  add("irfft_even", real_of_complex([](auto& z) { return fft::irfft(z); }),
      {rnd({3, 5}, 16), rnd({3, 5}, 17)}, true);
  add("irfft_odd", real_of_complex([](auto& z) { return fft::irfft(z, 9, 0); }),
      {rnd({5, 2}, 18), rnd({5, 2}, 19)});
  add("irfftn", real_of_complex([](auto& z) {
        return fft::irfftn(z, {4, 6}, {0, 1});
      }),
      {rnd({4, 4}, 20), rnd({4, 4}, 21)});
  add("irfft2", real_of_complex([](auto& z) { return fft::irfft2(z); }),
      {rnd({2, 3, 3}, 22), rnd({2, 3, 3}, 23)});
  add("fftshift", unary([](auto& x) { return fft::fftshift(x); }),
      {rnd({3, 4}, 24)});
  add("ifftshift", unary([](auto& x) { return fft::ifftshift(x, {1}); }),
      {rnd({3, 5}, 25)});
  return c;
}

FLUXION_REGISTER_OP_CASES(fft_cases);

}  // namespace fluxion::test
