// The GPU kernels of fast::NormVJP (backend/cuda/norm_vjp.cu: the
// layer_norm / rms_norm backward) against the CPU's: the same graph built
// and evaluated with each device as the default. dx must agree to a few
// ulps of the dtype (the devices sum the rows in different orders);
// dweight and dbias, sums over the rows, to a few ulps scaled by the square
// root of the row count. Shapes cover every kernel: groups of 4, 8 and 16
// lanes per row, a warp per row (1 to 16 units per lane), a block per row,
// the long-row kernel; 16-byte loads and the element-by-element fallback
// (row lengths off the pack width, misaligned slices); more rows than one
// wave of blocks (each block looping over several rows); no rows. Skipped
// without a GPU.
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "fluxion/ops/common.h"
#include "fluxion/ops/fast.h"
#include "device_scope.h"
#include "transform_checks.h"

using namespace fluxion;
using namespace fluxion::test;
namespace fx = fluxion::fast;

namespace {

using Outs = std::vector<array>;
using Opt = std::optional<array>;

// Made on the CPU once, so that both devices read the same values.
array randn(const Shape& shape, unsigned seed, Dtype t, double mean = 0.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(mean, 1.0);
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) {
    x = d(gen);
  }
  auto a = astype(array(v.begin(), shape, float64), t, Device::cpu);
  a.eval();
  return a;
}

double res(Dtype t) {
  return t == float16    ? 9.77e-4
         : t == bfloat16 ? 7.82e-3
         : t == float64  ? 2.2e-16
                         : 1.19e-7;
}

// Ulps of the output dtype the devices may differ by: sums in other
// orders move a float result by a few float ulps, a half-type result by at
// most a step.
double ulps_of(Dtype t) { return t == float16 || t == bfloat16 ? 2 : 64; }

Outs run_on(Device d, const std::function<Outs()>& f) {
  OnDevice on(d);
  auto out = f();
  eval(out);
  return out;
}

// f on the GPU against f on the CPU. Output k is within tol[k] * (1 +
// |cpu value|) of the CPU's; NaN and infinities at the same places.
void expect_gpu_matches_cpu(const std::function<Outs()>& f,
                            const std::vector<double>& tol,
                            const std::string& what) {
  auto got = run_on(Device::gpu, f);
  auto want = run_on(Device::cpu, f);
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(got.size(), tol.size()) << what;
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].shape(), want[k].shape()) << what << " output " << k;
    ASSERT_EQ(got[k].dtype(), want[k].dtype()) << what << " output " << k;
    auto g = to_vector<double>(got[k]);
    auto w = to_vector<double>(want[k]);
    int bad = 0;
    for (size_t i = 0; i < g.size() && bad < 5; ++i) {
      bool ok;
      if (std::isnan(w[i]) || std::isnan(g[i])) {
        ok = std::isnan(w[i]) && std::isnan(g[i]);
      } else if (std::isinf(w[i]) || std::isinf(g[i])) {
        ok = g[i] == w[i];
      } else {
        ok = std::abs(g[i] - w[i]) <= tol[k] * (1 + std::abs(w[i]));
      }
      if (!ok) {
        ++bad;
        ADD_FAILURE() << what << " output " << k << " element " << i << ": gpu "
                      << g[i] << ", cpu " << w[i];
      }
    }
  }
}

// The tolerance of a sum over `rows` rows (dweight, dbias): in float32
// and float64 the devices' different orders move it by rounding errors
// growing with the row count; a half-type sum is added in float either
// way, its error far below the one rounding to the output's step.
double sum_tol(Dtype t, int64_t rows) {
  const double u = ulps_of(t) * res(t);
  if (t == float16 || t == bfloat16) {
    return u;
  }
  return u * std::sqrt(static_cast<double>(std::max<int64_t>(rows, 1)));
}

const std::vector<Dtype> kFloats{float32, bfloat16, float16, float64};

struct Variant {
  bool layer, weight, bias;
};
const std::vector<Variant> kVariants{
    {true, true, true},   {true, true, false},  {true, false, true},
    {true, false, false}, {false, true, false}, {false, false, false}};

std::string name_of(const Variant& v, Dtype t, const Shape& s) {
  return std::string(v.layer ? "layer_norm" : "rms_norm") +
         (v.weight ? "+w" : "") + (v.bias ? "+b" : "") + " " + dtype_name(t) +
         " " + shape_str(s);
}

// norm_vjp of every variant at (x, w, c) on both devices.
void check_variants(const array& x, const array& w, const array& c,
                    const std::string& what = "") {
  const Dtype t = x.dtype();
  const int64_t rows = x.shape(-1) ? x.size() / x.shape(-1) : 0;
  const double u = ulps_of(t) * res(t);
  const double su = sum_tol(t, rows);
  for (const auto& v : kVariants) {
    std::vector<double> tol{u};
    if (v.weight) {
      tol.push_back(su);
    }
    if (v.bias) {
      tol.push_back(su);
    }
    Opt wo;
    if (v.weight) {
      wo = w;
    }
    expect_gpu_matches_cpu(
        [&] { return fx::norm_vjp(x, wo, c, 1e-5f, v.layer, v.bias); }, tol,
        what + name_of(v, t, x.shape()));
  }
}

}  // namespace

TEST(CudaNormVjpGpu, RowLengths) {
  SKIP_WITHOUT_GPU();
  // Lane groups (d <= 16 units), warps of 1..16 units per lane (to 512
  // elements; 256 doubles), blocks per row (to 8192; 4096 doubles), the
  // long-row kernel beyond; lengths off the pack width (element by
  // element); row counts that leave a warp's or block's last turn partial.
  const std::vector<Shape> shapes{
      {5, 1},    {7, 3},    {3, 7},     {9, 64},    {11, 100},  {6, 256},
      {3001, 8}, {37, 24},  {301, 32},  {200, 128}, {13, 257},  {3, 520},
      {2, 999},  {4, 1024}, {3, 1025},  {5, 4096},  {3, 4100},  {3, 8192},
      {2, 6000}, {3, 8200}, {2, 10000}, {2, 16384}, {2, 20000}, {3, 5, 33}};
  for (Dtype t : kFloats) {
    for (const auto& sh : shapes) {
      const int d = sh.back();
      auto x = randn(sh, 1 + d, t, 0.5);
      auto w = randn({d}, 2 + d, t);
      auto c = randn(sh, 3 + d, t);
      check_variants(x, w, c);
    }
  }
}

TEST(CudaNormVjpGpu, MoreRowsThanOneWaveOfBlocks) {
  SKIP_WITHOUT_GPU();
  // Blocks loop over many rows each, adding every row's terms into their
  // registers (warp kernel, block kernel) or their scratch row (long).
  for (Dtype t : {bfloat16, float32}) {
    for (const Shape& sh : {Shape{40000, 64}, Shape{20000, 500},
                            Shape{6000, 1100}, Shape{700, 9000}}) {
      const int d = sh.back();
      auto x = randn(sh, 10 + d, t, -0.3);
      auto w = randn({d}, 11 + d, t);
      auto c = randn(sh, 12 + d, t);
      check_variants(x, w, c, "many rows ");
    }
  }
}

TEST(CudaNormVjpGpu, StridedAndMisalignedOperands) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : kFloats) {
    for (int d : {8, 100, 2048, 9000}) {
      auto base = randn({d, 6}, 20, t);
      auto big = randn({7, d + 3}, 21, t);
      auto cbig = randn({7, d + 5}, 22, t);
      auto wbig = randn({2 * d}, 23, t);
      // A transposed x, the cotangent of sum(norm(x)) (ones broadcast), a
      // slice starting at an odd element (rows not 16-byte aligned), a
      // weight of stride 2 and a reversed one.
      auto xt = transpose(base);
      auto ones = broadcast_to(astype(array(1.0), t), {6, d});
      auto xs = slice(big, {0, 1}, {7, d + 1});
      auto cs = slice(cbig, {0, 3}, {7, d + 3});
      auto ws = slice(wbig, {0}, {2 * d}, {2});
      auto wr = slice(wbig, {2 * d - 1}, {d - 1}, {-1});
      const std::string what = "strided d=" + std::to_string(d) + " ";
      check_variants(xt, ws, ones, what);
      check_variants(xs, wr, cs, what);
      check_variants(xt, wr, transpose(randn({d, 6}, 24, t)), what);
    }
  }
}

TEST(CudaNormVjpGpu, EmptyArraysAndNonFiniteRows) {
  SKIP_WITHOUT_GPU();
  for (const Shape& sh :
       {Shape{0, 8}, Shape{0, 9000}, Shape{4, 0}, Shape{2, 0, 3}}) {
    auto x = zeros(sh), c = zeros(sh);
    check_variants(x, ones({sh.back()}), c, "empty ");
  }
  for (int d : {16, 1000, 20000}) {
    std::vector<double> v(4 * d);
    std::mt19937 gen(30);
    std::normal_distribution<double> nd;
    for (auto& e : v) {
      e = nd(gen);
    }
    v[1] = std::numeric_limits<double>::quiet_NaN();     // row 0
    v[d + 2] = std::numeric_limits<double>::infinity();  // row 1
    auto x = array(v.begin(), {4, d}, float32);
    auto c = randn({4, d}, 31, float32);
    auto w = randn({d}, 32, float32);
    check_variants(x, w, c, "nan/inf ");
  }
}

// The norms' gradients as training computes them (value_and_grad through
// the rules: one NormVJP node), and second-order gradients (NormVJP's own
// rules, composed of public ops) on the GPU against the CPU.
TEST(CudaNormVjpGpu, GradientsThroughTheRules) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : {float32, bfloat16, float64}) {
    for (const Shape& sh : {Shape{6, 32}, Shape{3, 4096}, Shape{2, 12000}}) {
      const int d = sh.back();
      auto x = randn(sh, 40, t, 0.3);
      auto w = randn({d}, 41, t);
      auto b = randn({d}, 42, t);
      auto c = randn(sh, 43, t);
      const double u = ulps_of(t) * res(t);
      const double su = sum_tol(t, sh[0]);
      // The loss sums every element (in float or double).
      const double acc = 64 * res(t == float64 ? float64 : float32);
      const double vu = acc * std::sqrt(static_cast<double>(sh[0]) * d) +
                        (t == bfloat16 ? 2 * u : 0.0);
      expect_gpu_matches_cpu(
          [&] {
            auto loss = [&](const Outs& p) {
              auto y = fx::layer_norm(p[0], p[1], p[2], 1e-5f);
              auto z = fx::rms_norm(y, p[1], 1e-6f);
              // Summed in the compute type (float64 stays).
              return Outs{sum(
                  astype(multiply(z, c), t == float64 ? float64 : float32))};
            };
            auto [val, grads] = value_and_grad(loss, {0, 1, 2})({x, w, b});
            grads.insert(grads.begin(), val[0]);
            return grads;
          },
          {vu, 4 * u, 4 * su, 4 * su},
          "value_and_grad " + std::string(dtype_name(t)) + " " + shape_str(sh));
    }
  }
  auto x = randn({4, 300}, 50, float32), w = randn({300}, 51, float32);
  auto c = randn({4, 300}, 52, float32), v = randn({4, 300}, 53, float32);
  expect_gpu_matches_cpu(
      [&] {
        // d/dx <vjp_x(layer_norm)(x, w; c), v>: through NormVJP::vjp.
        auto h = [&](const Outs& p) {
          auto f = [](const Outs& q) {
            return Outs{fx::layer_norm(q[0], q[1], std::nullopt, 1e-5f)};
          };
          auto g = vjp(f, p, {c}).second;
          return Outs{sum(multiply(g[0], v))};
        };
        return vjp(h, {x, w}, {array(1.0f)}).second;
      },
      {1e-4, 1e-4}, "grad of grad");
}
