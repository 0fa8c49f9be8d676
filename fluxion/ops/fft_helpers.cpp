// fft::fftfreq, fft::rfftfreq and the norm= scaling of the transforms.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/fft.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"

namespace fluxion::fft {

namespace {

void check_freq_args(int n, double d, const char* op) {
  if (n <= 0) {
    throw std::invalid_argument(std::string("[") + op +
                                "] n must be positive; got " +
                                std::to_string(n) + ".");
  }
  if (d == 0.0) {
    throw std::invalid_argument(std::string("[") + op +
                                "] The sample spacing d must be non-zero.");
  }
}

}  // namespace

// Composed from ops (not a host vector), so a huge n is an ordinary lazy
// array: its allocation fails or succeeds at eval, on the given stream.
array fftfreq(int n, double d, StreamOrDevice s) {
  check_freq_args(n, d, "fftfreq");
  double scale = 1.0 / (n * d);
  int positive = (n - 1) / 2 + 1;  // 0 .. ceil(n/2) - 1
  array i = arange(0.0, static_cast<double>(n), 1.0, float64, s);
  array k = where(less(i, array(double(positive), float64), s), i,
                  subtract(i, array(double(n), float64), s), s);
  return astype(multiply(k, array(scale, float64), s), float32, s);
}

array rfftfreq(int n, double d, StreamOrDevice s) {
  check_freq_args(n, d, "rfftfreq");
  int m = n / 2 + 1;
  double scale = 1.0 / (n * d);
  array i = arange(0.0, static_cast<double>(m), 1.0, float64, s);
  return astype(multiply(i, array(scale, float64), s), float32, s);
}

void check_norm(const std::string& norm, const char* op) {
  if (norm != "backward" && norm != "ortho" && norm != "forward") {
    throw std::invalid_argument(
        std::string("[") + op + "] Invalid norm '" + norm +
        "'; expected 'backward', 'ortho' or 'forward'.");
  }
}

array apply_norm(const array& out, double n, bool inverse,
                 const std::string& norm, StreamOrDevice s) {
  check_norm(norm, "fft");
  if (norm == "backward" || n == 0) {
    return out;
  }
  // The inverse already carries 1 / n.
  double scale = norm == "ortho" ? (inverse ? std::sqrt(n) : 1.0 / std::sqrt(n))
                                 : (inverse ? n : 1.0 / n);
  return multiply(out, array(static_cast<float>(scale), float32), s);
}

}  // namespace fluxion::fft
