// Plans for one-dimensional discrete Fourier transforms of any length, in
// complex64 (float32 arithmetic, twiddles computed in double).
//
// A length whose prime factors are small runs as a Stockham autosort
// mixed-radix Cooley-Tukey transform (radix 4, 2, 3 and 5 butterflies, a
// generic butterfly for other primes) ping-ponging between the output and a
// work buffer; a length with a large prime factor runs Bluestein's chirp-z
// algorithm (a convolution through power-of-two transforms). Either way the
// cost is O(n log n). Plans hold their twiddles and are cached by (n,
// direction) in a thread-safe cache.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

namespace fluxion::cpu::fft {

using cfloat = std::complex<float>;

class Plan {
 public:
  Plan(int64_t n, bool inverse);
  int64_t size() const { return n_; }
  bool inverse() const { return inverse_; }
  // Complex elements of scratch `execute` needs.
  int64_t work_size() const { return work_; }
  // out = DFT(in), unnormalized (exp(-2 pi i jk/n) forward, + inverse).
  // `in` is left unchanged; `in`, `out` and `work` must not overlap.
  // `parallel`: spread each stage of a long transform over the threads
  // (for a single transform; batches parallelize over lines instead).
  void execute(const cfloat* in, cfloat* out, cfloat* work,
               bool parallel = false) const;

  // Whether execute_batch applies (a Stockham plan, not Bluestein).
  bool batchable() const { return m_ == 0; }
  // `b` interleaved transforms: element t of transform j at [t * b + j]
  // (in and out). A stage then is the same stage with m * b columns, so
  // every stage runs in whole vectors. Needs n * b complex of work.
  void execute_batch(const cfloat* in, cfloat* out, cfloat* work,
                     int64_t b) const;

  // Rough cost in butterfly operations, for choosing between algorithms.
  static double direct_cost(int64_t n);

 private:
  struct Stage {
    int p;                      // radix
    int64_t l;                  // length of the sub-transforms already done
    int64_t m;                  // n / (l * p)
    std::vector<cfloat> tw;     // w_{l p}^{q k}: [k][q - 1], k < l, 1 <= q < p
    std::vector<float> cs, sn;  // cos, sin(2 pi j / p) (generic radix)
  };
  void run_stage(const Stage& st, const cfloat* src, cfloat* dst,
                 bool parallel) const;
  void bluestein(const cfloat* in, cfloat* out, cfloat* work,
                 bool parallel) const;

  int64_t n_;
  bool inverse_;
  int64_t work_ = 0;
  std::vector<Stage> stages_;
  // Bluestein: chirp c_j = exp(-+ i pi j^2 / n), the transform of the
  // convolution kernel conj(c) (divided by m), and power-of-two sub-plans.
  int64_t m_ = 0;
  std::vector<cfloat> chirp_;
  std::vector<cfloat> kernel_;
  std::shared_ptr<const Plan> sub_fwd_, sub_inv_;
};

// The cached plan for (n, inverse).
std::shared_ptr<const Plan> get_plan(int64_t n, bool inverse);

// Real transforms of length n: forward maps n reals to n / 2 + 1 complex
// values, inverse maps n / 2 + 1 complex values (the imaginary parts of the
// first and, for even n, the last are ignored) to n reals, unnormalized.
// Even n runs a complex transform of length n / 2 on the packed pairs.
class RealPlan {
 public:
  RealPlan(int64_t n, bool inverse);
  int64_t work_size() const { return work_; }
  void forward(const float* in, cfloat* out, cfloat* work,
               bool parallel = false) const;
  void backward(const cfloat* in, float* out, cfloat* work,
                bool parallel = false) const;

 private:
  int64_t n_;
  int64_t work_;
  std::shared_ptr<const Plan> plan_;  // length n / 2 (even n) or n
  std::vector<cfloat> w_;             // exp(-2 pi i k / n), k < n / 2
};

std::shared_ptr<const RealPlan> get_real_plan(int64_t n, bool inverse);

}  // namespace fluxion::cpu::fft
