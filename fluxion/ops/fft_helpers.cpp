// fft::fftfreq, fft::rfftfreq and the norm= scaling of the transforms.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/fft.h"

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

array fftfreq(int n, double d, StreamOrDevice s) {
  check_freq_args(n, d, "fftfreq");
  std::vector<float> v(n);
  double scale = 1.0 / (n * d);
  int positive = (n - 1) / 2 + 1;  // 0 .. ceil(n/2) - 1
  for (int i = 0; i < n; ++i) {
    int k = i < positive ? i : i - n;
    v[i] = static_cast<float>(k * scale);
  }
  return array(v.begin(), Shape{n}, float32);
}

array rfftfreq(int n, double d, StreamOrDevice s) {
  check_freq_args(n, d, "rfftfreq");
  int m = n / 2 + 1;
  std::vector<float> v(m);
  double scale = 1.0 / (n * d);
  for (int i = 0; i < m; ++i) {
    v[i] = static_cast<float>(i * scale);
  }
  return array(v.begin(), Shape{m}, float32);
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
