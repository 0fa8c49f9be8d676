// The GPU kernels of fast::LayerNorm, fast::RMSNorm, fast::RoPE, Hadamard
// and attention's fused backward (backend/cuda/norm.cu, rope.cu,
// hadamard.cu, sdpa_cudnn.cpp, sdpa_vjp.cpp) against the CPU's:
// the same graph is built and evaluated with each device as the default,
// and the results must agree to a few ulps of the dtype (NaN where the CPU
// has NaN, the same infinities). Shapes cover each kernel's paths: a warp
// per row, a block per row, the long-row kernel; vector loads and the
// element-by-element fallback (odd rows, misaligned slices); strided and
// broadcast inputs. Skipped without a GPU.
#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "fluxion/ops/common.h"
#include "fluxion/ops/fast.h"
#include "fluxion/ops/hadamard.h"
#include "fluxion/ops/layout.h"
#include "device_scope.h"
#include "transform_checks.h"

using namespace fluxion;
using namespace fluxion::test;
namespace fx = fluxion::fast;

namespace {

using Outs = std::vector<array>;

array randn(const Shape& shape, unsigned seed, Dtype t = float32,
            double mean = 0.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(mean, 1.0);
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) {
    x = d(gen);
  }
  // Made on the CPU once, so both devices read the same values.
  auto a = astype(array(v.begin(), shape), t, Device::cpu);
  a.eval();
  return a;
}

// A dtype's relative rounding step.
double res(Dtype t) {
  return t == float16    ? 9.77e-4
         : t == bfloat16 ? 7.82e-3
         : t == float64  ? 2.2e-16
                         : 1.19e-7;
}

// The outputs of f evaluated with `d` as the default device.
std::vector<array> run_on(Device d, const std::function<Outs()>& f) {
  OnDevice on(d);
  auto out = f();
  eval(out);
  return out;
}

// f on the GPU against f on the CPU: same shapes and dtypes, values within
// `ulps` steps of the dtype (relative and absolute, the values being of
// order one), NaN and infinities at the same places.
void expect_gpu_matches_cpu(const std::function<Outs()>& f, double ulps,
                            const std::string& what) {
  auto got = run_on(Device::gpu, f);
  auto want = run_on(Device::cpu, f);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].shape(), want[k].shape()) << what << " output " << k;
    ASSERT_EQ(got[k].dtype(), want[k].dtype()) << what << " output " << k;
    const double tol = ulps * res(got[k].dtype());
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
        ok = std::abs(g[i] - w[i]) <= tol + tol * std::abs(w[i]);
      }
      if (!ok) {
        ++bad;
        ADD_FAILURE() << what << " output " << k << " element " << i << ": gpu "
                      << g[i] << ", cpu " << w[i];
      }
    }
  }
}

const std::vector<Dtype> kFloats{float32, float16, bfloat16, float64};

// Ulps of the output dtype the norms may differ by: the two devices sum in
// different orders (a few float ulps, which moves a half-type result by at
// most one step).
double norm_ulps(Dtype t) { return t == float16 || t == bfloat16 ? 2 : 64; }

std::string name_of(const char* op, Dtype t, const Shape& s) {
  return std::string(op) + " " + dtype_name(t) + " " + shape_str(s);
}

}  // namespace

// ------------------------------------------------------------ norms

TEST(CudaFastGpu, LayerNormRowLengths) {
  SKIP_WITHOUT_GPU();
  // Warp rows (1 .. 1024, vector and scalar loads), block rows (to 16384),
  // the long-row kernel (over 16384); odd row counts.
  // The warp kernels take 1, 2, 4, ... units per lane by the row's length,
  // and rows of at most 16 units groups of 4, 8 or 16 lanes (several rows
  // per warp: row counts that leave a warp's batch partly empty, and more
  // rows than one launch's warps hold).
  const std::vector<Shape> shapes{
      {5, 1},     {7, 3},     {3, 7},     {9, 64},     {11, 100}, {6, 256},
      {3001, 8},  {37, 24},   {301, 32},  {2000, 128}, {3, 520},  {2, 999},
      {4, 1024},  {3, 1025},  {5, 4096},  {3, 8192},   {2, 6000}, {3, 8200},
      {2, 10000}, {2, 16384}, {2, 20000}, {3, 5, 33}};
  for (Dtype t : kFloats) {
    for (const auto& sh : shapes) {
      const int d = sh.back();
      auto x = randn(sh, 1, t, 0.5);
      auto w = randn({d}, 2, t);
      auto b = randn({d}, 3, t);
      expect_gpu_matches_cpu(
          [&] {
            return Outs{fx::layer_norm(x, w, b, 1e-5f),
                        fx::layer_norm(x, w, std::nullopt, 1e-5f),
                        fx::layer_norm(x, std::nullopt, b, 1e-3f),
                        fx::layer_norm(x, std::nullopt, std::nullopt, 0.0f)};
          },
          norm_ulps(t), name_of("layer_norm", t, sh));
    }
  }
}

TEST(CudaFastGpu, RmsNormRowLengths) {
  SKIP_WITHOUT_GPU();
  const std::vector<Shape> shapes{{5, 1},    {7, 3},     {3, 7},     {9, 64},
                                  {11, 100}, {4, 1024},  {3, 1030},  {5, 4096},
                                  {3, 8192}, {2, 10000}, {2, 40000}, {2, 3, 8}};
  for (Dtype t : kFloats) {
    for (const auto& sh : shapes) {
      const int d = sh.back();
      auto x = randn(sh, 4, t);
      auto w = randn({d}, 5, t);
      expect_gpu_matches_cpu(
          [&] {
            return Outs{fx::rms_norm(x, w, 1e-5f),
                        fx::rms_norm(x, std::nullopt, 1e-6f)};
          },
          norm_ulps(t), name_of("rms_norm", t, sh));
    }
  }
}

TEST(CudaFastGpu, NormsOfStridedInputs) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : kFloats) {
    for (int d : {8, 100, 2048}) {
      auto base = randn({d, 6}, 6, t);
      auto big = randn({7, d + 3}, 7, t);
      auto wbig = randn({2 * d}, 8, t);
      auto b = randn({d}, 9, t);
      expect_gpu_matches_cpu(
          [&] {
            // A transposed x; a slice starting at an odd element (the rows
            // not 16-byte aligned); a weight of stride 2 and a reversed
            // one; a broadcast bias.
            auto xt = transpose(base);
            auto xs = slice(big, {0, 1}, {7, d + 1});
            auto ws = slice(wbig, {0}, {2 * d}, {2});
            auto wr = slice(wbig, {2 * d - 1}, {d - 1}, {-1});
            auto bb = broadcast_to(slice(b, {0}, {1}), {d});
            return Outs{fx::layer_norm(xt, ws, bb, 1e-5f),
                        fx::layer_norm(xs, wr, b, 1e-5f),
                        fx::rms_norm(xt, wr, 1e-5f),
                        fx::rms_norm(xs, ws, 1e-5f)};
          },
          norm_ulps(t), name_of("strided norms", t, {d}));
    }
  }
}

TEST(CudaFastGpu, NormsPropagateNanAndInf) {
  SKIP_WITHOUT_GPU();
  for (int d : {16, 4096, 20000}) {
    std::vector<double> v(4 * d);
    std::mt19937 gen(10);
    std::normal_distribution<double> nd;
    for (auto& e : v) {
      e = nd(gen);
    }
    v[1] = kNaN;           // row 0
    v[d + 2] = kInf;       // row 1
    v[2 * d + 3] = -kInf;  // row 2 (row 3 is finite)
    auto x = array(v.begin(), {4, d});
    expect_gpu_matches_cpu(
        [&] {
          return Outs{fx::layer_norm(x, std::nullopt, std::nullopt, 1e-5f),
                      fx::rms_norm(x, std::nullopt, 1e-5f)};
        },
        64, "nan/inf rows " + std::to_string(d));
  }
}

TEST(CudaFastGpu, NormsOfEmptyArrays) {
  SKIP_WITHOUT_GPU();
  for (const Shape& sh : {Shape{0, 8}, Shape{4, 0}, Shape{2, 0, 3}}) {
    auto x = zeros(sh);
    const int d = sh.back();
    expect_gpu_matches_cpu(
        [&] {
          return Outs{fx::layer_norm(x, ones({d}), zeros({d}), 1e-5f),
                      fx::rms_norm(x, ones({d}), 1e-5f)};
        },
        0, "empty " + shape_str(sh));
  }
}

TEST(CudaFastGpu, NormGradients) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : {float32, float64, bfloat16}) {
    for (const Shape& sh : {Shape{6, 32}, Shape{3, 4096}}) {
      const int d = sh.back();
      auto x = randn(sh, 11, t, 0.3);
      auto w = randn({d}, 12, t);
      auto b = randn({d}, 13, t);
      auto c = randn(sh, 14, t);
      const double ulps = t == bfloat16 ? 4 : 256;
      expect_gpu_matches_cpu(
          [&] {
            auto ln = [](const Outs& a) {
              return Outs{fx::layer_norm(a[0], a[1], a[2], 1e-5f)};
            };
            auto rms = [](const Outs& a) {
              return Outs{fx::rms_norm(a[0], a[1], 1e-5f)};
            };
            auto g1 = vjp(ln, {x, w, b}, {c}).second;
            auto g2 = vjp(rms, {x, w}, {c}).second;
            g1.insert(g1.end(), g2.begin(), g2.end());
            return g1;
          },
          ulps, name_of("norm vjp", t, sh));
    }
  }
}

// ------------------------------------------------------------- rope

TEST(CudaFastGpu, RopeVariants) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : kFloats) {
    // [B, H, L, D] (also [B, L, D] and 5-D: the offsets go by axis 0, the
    // positions by axis -2); dims = D and dims < D (the rest passes
    // through).
    for (const Shape& sh :
         {Shape{2, 3, 5, 16}, Shape{3, 2, 7, 64}, Shape{1, 4, 33, 128},
          Shape{3, 9, 32}, Shape{2, 2, 3, 4, 16}}) {
      const int d = sh.back();
      auto x = randn(sh, 20, t);
      auto voff = array({3, 11, 0}, {3}, int32);
      voff = slice(voff, {0}, {sh[0]});
      auto freqs = astype(
          add(multiply(randn({d / 4}, 21, float32), array(0.1f)), array(2.0f)),
          t == float64 ? float64 : float32);
      const double ulps = t == float16 || t == bfloat16 ? 2 : 16;
      for (bool trad : {false, true}) {
        expect_gpu_matches_cpu(
            [&] {
              return Outs{
                  fx::rope(x, d, trad, 10000.0f, 1.0f, 0),
                  fx::rope(x, d, trad, 500000.0f, 0.5f, 7),
                  fx::rope(x, d / 2, trad, 10000.0f, 1.0f, 3),
                  fx::rope(x, d, trad, 10000.0f, 1.0f, voff),
                  fx::rope(x, d / 2, trad, std::nullopt, 2.0f, voff, freqs),
                  fx::rope(x, d / 2, trad, std::nullopt, 1.0f, 5, freqs)};
            },
            ulps, name_of(trad ? "rope traditional" : "rope", t, sh));
      }
    }
  }
}

TEST(CudaFastGpu, RopeInverseThroughVjp) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : {float32, float16, bfloat16}) {
    auto x = randn({2, 3, 9, 32}, 22, t);
    auto c = randn({2, 3, 9, 32}, 23, t);
    auto voff = array({4, 9}, {2}, int32);
    const double ulps = t == float32 ? 16 : 2;
    for (bool trad : {false, true}) {
      expect_gpu_matches_cpu(
          [&] {
            // grad of sum(rope(x) * c) is the inverse rotation of c.
            auto f1 = [&](const array& a) {
              return fx::rope(a, 32, trad, 10000.0f, 1.0f, voff);
            };
            auto f2 = [&](const array& a) {
              return fx::rope(a, 16, trad, 10000.0f, 0.25f, 3);
            };
            return Outs{vjp(f1, x, c).second, vjp(f2, x, c).second};
          },
          ulps, name_of(trad ? "rope vjp traditional" : "rope vjp", t, {}));
    }
  }
}

TEST(CudaFastGpu, RopeOfStridedAndEmptyInputs) {
  SKIP_WITHOUT_GPU();
  auto base = randn({2, 8, 3, 16}, 24);
  expect_gpu_matches_cpu(
      [&] {
        auto xt = swapaxes(base, 1, 2);  // [2, 3, 8, 16], not contiguous
        auto xs = slice(base, {0, 0, 0, 0}, {2, 8, 3, 16}, {1, 2, 1, 1});
        return Outs{fx::rope(xt, 16, false, 10000.0f, 1.0f, 2),
                    fx::rope(xs, 8, true, 10000.0f, 1.0f, 1),
                    fx::rope(zeros({2, 0, 4, 8}), 8, false, 10000.0f, 1.0f, 0)};
      },
      16, "rope strided/empty");
}

// ------------------------------------------------------------- hadamard

TEST(CudaFastGpu, HadamardSizes) {
  SKIP_WITHOUT_GPU();
  // m * 2^k for m = 1, 12, 20, 28: one block per row in shared memory up to
  // 48 KB of values, the chunked multi-pass path beyond (16384 and more
  // floats; 12288 doubles).
  const std::vector<Shape> shapes{
      {3, 1},        {4, 2},         {5, 64},      {3, 12},        {2, 24},
      {3, 20 * 32},  {2, 28 * 16},   {2, 8192},    {2, 12 * 1024}, {2, 16384},
      {2, 28 * 512}, {2, 20 * 2048}, {1, 1 << 17}, {2, 3, 12 * 8}};
  for (Dtype t : kFloats) {
    for (const auto& sh : shapes) {
      auto x = randn(sh, 30, t);
      // The same additions in the same order as the CPU: equal up to the
      // last bit; one ulp allowed.
      expect_gpu_matches_cpu(
          [&] {
            return Outs{hadamard_transform(x), hadamard_transform(x, 0.25f)};
          },
          1, name_of("hadamard", t, sh));
    }
  }
}

TEST(CudaFastGpu, HadamardTransposeAndLayouts) {
  SKIP_WITHOUT_GPU();
  for (int n : {20, 28 * 64, 20 * 1024}) {
    auto x = randn({3, n}, 31);
    auto c = randn({3, n}, 32);
    auto base = randn({n, 4}, 33);
    expect_gpu_matches_cpu(
        [&] {
          // The vjp applies H^T (H_20 and H_28 are not symmetric);
          // integers are transformed in float32.
          auto f = [](const array& a) { return hadamard_transform(a); };
          return Outs{vjp(f, x, c).second,
                      hadamard_transform(transpose(base), 2.0f),
                      hadamard_transform(astype(x, int32)),
                      hadamard_transform(zeros({0, n}))};
        },
        1, "hadamard vjp/layouts " + std::to_string(n));
  }
}

// ------------------------------------------------------------- attention

// The fused attention backward (fast::ScaledDotProductAttentionVJP) on the
// GPU against the CPU's: cuDNN where it takes the inputs (bfloat16, head
// size 64, when cuDNN loads), the host routine elsewhere (float32, head
// size 80), both after the forward with its logsumexp. The gradients are
// compared relative to their largest magnitude (they are not of order
// one), within a few rounding steps of the dtype.
// The op table's vmap check of the fused backward (GQA, causal) failed on
// an H100 for the last of three slices when v was mapped at axes 2-4 or k
// at axis 4 (every output of that slice wrong, session 19; the CPU passes).
// Each piece on its own, GPU against CPU, so that a failure names it: the
// forward (o, logsumexp) and the fused backward of each slice, and the
// vmapped backward.
TEST(CudaFastGpu, AttentionFusedBackwardOfSlices) {
  SKIP_WITHOUT_GPU();
  auto q = randn({1, 4, 3, 8}, 51);
  auto d_o = randn({1, 4, 3, 8}, 54);
  for (int which : {1, 2}) {
    for (int axis : {2, 3, 4}) {
      Shape batched{1, 2, 4, 8};
      batched.insert(batched.begin() + axis, 3);
      auto mapped = randn(batched, 52 + which);
      auto other = randn({1, 2, 4, 8}, 60 + which);
      auto grads = [](const Outs& x, bool with_forward) {
        auto s = default_stream(default_device());
        auto ol = fx::detail::sdpa_with_lse(x[0], x[1], x[2], 0.7f, true, s);
        auto g = fx::detail::sdpa_vjp(x[0], x[1], x[2], ol[0], ol[1], x[3],
                                      0.7f, true, s);
        if (with_forward) {
          g.insert(g.begin(), ol.begin(), ol.end());
        }
        return g;
      };
      auto inputs = [&](const array& m) {
        return which == 1 ? Outs{q, m, other, d_o} : Outs{q, other, m, d_o};
      };
      const std::string what = std::string(which == 1 ? "k" : "v") +
                               " mapped at axis " + std::to_string(axis);
      for (int b = 0; b < 3; ++b) {
        expect_gpu_matches_cpu(
            [&] { return grads(inputs(take(mapped, b, axis)), true); }, 256,
            what + ", slice " + std::to_string(b) + " (o, lse, dq, dk, dv)");
        expect_gpu_matches_cpu(
            [&] {
              auto sl = contiguous(take(mapped, b, axis));
              return grads(inputs(sl), true);
            },
            256, what + ", contiguous slice " + std::to_string(b));
      }
      std::vector<int> axes{-1, -1, -1, -1};
      axes[which] = axis;
      expect_gpu_matches_cpu(
          [&] {
            return vmap([&](const Outs& x) { return grads(x, false); }, axes)(
                inputs(mapped));
          },
          256, what + ", vmapped (dq, dk, dv)");
    }
  }
}

// The host routine of the fused backward reads its operands from the GPU.
// A cotangent made on the host and never read by a GPU kernel before gets
// its GPU copy from the asynchronous upload stream (at most 64 KiB): the
// routine must read it after that upload, not the buffer half written.
// Fresh host cotangents of 64 KiB, each the first read of its buffer,
// many times over (the race lost one time in a few before the fix).
TEST(CudaFastGpu, AttentionFusedBackwardReadsFreshHostCotangents) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : {float64, float32}) {
    const int D = t == float64 ? 32 : 64;  // q and dO of 64 KiB
    auto q = randn({1, 4, 64, D}, 71, t);
    auto k = randn({1, 2, 80, D}, 72, t);
    auto v = randn({1, 2, 80, D}, 73, t);
    for (int round = 0; round < 12; ++round) {
      auto d_o = randn({1, 4, 64, D}, 100 + round, t);
      ASSERT_EQ(d_o.nbytes(), size_t{64} << 10);
      auto grads = [&] {
        auto s = default_stream(default_device());
        auto ol = fx::detail::sdpa_with_lse(q, k, v, 0.3f, true, s);
        eval(ol);  // q, k and v are on the GPU; d_o is not yet
        return fx::detail::sdpa_vjp(q, k, v, ol[0], ol[1], d_o, 0.3f, true,
                                    s);
      };
      expect_gpu_matches_cpu(grads, 256,
                             std::string(dtype_name(t)) + " round " +
                                 std::to_string(round));
      if (HasFailure()) {
        return;
      }
    }
  }
}

TEST(CudaFastGpu, AttentionFusedBackward) {
  SKIP_WITHOUT_GPU();
  struct Case {
    Dtype t;
    int Hq, Hkv, Lq, Lk, D;
    bool causal;
  };
  for (const Case& c : {Case{bfloat16, 4, 2, 96, 160, 64, true},
                        Case{bfloat16, 4, 4, 64, 64, 64, false},
                        Case{float32, 4, 2, 33, 70, 80, true},
                        Case{float16, 2, 2, 17, 17, 24, false}}) {
    auto q = randn({2, c.Hq, c.Lq, c.D}, 41, c.t);
    auto k = randn({2, c.Hkv, c.Lk, c.D}, 42, c.t);
    auto v = randn({2, c.Hkv, c.Lk, c.D}, 43, c.t);
    auto d_o = randn({2, c.Hq, c.Lq, c.D}, 44, c.t);
    auto f = [&] {
      auto s = default_stream(default_device());
      auto ol = fx::detail::sdpa_with_lse(q, k, v, 0.2f, c.causal, s);
      auto g = fx::detail::sdpa_vjp(q, k, v, ol[0], ol[1], d_o, 0.2f,
                                    c.causal, s);
      g.insert(g.begin(), ol.begin(), ol.end());
      return g;
    };
    auto got = run_on(Device::gpu, f);
    auto want = run_on(Device::cpu, f);
    const double steps = c.t == float32 ? 256 : 6;
    for (size_t i = 0; i < got.size(); ++i) {
      auto g = to_vector<double>(got[i]);
      auto w = to_vector<double>(want[i]);
      ASSERT_EQ(g.size(), w.size());
      double big = 1, err = 0;
      for (size_t e = 0; e < w.size(); ++e) {
        big = std::max(big, std::abs(w[e]));
        err = std::max(err, std::abs(g[e] - w[e]));
      }
      EXPECT_LE(err, steps * res(c.t) * big)
          << dtype_name(c.t) << " D" << c.D << " output " << i;
    }
  }
}
