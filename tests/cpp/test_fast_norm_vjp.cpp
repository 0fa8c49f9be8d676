// fast::NormVJP, the fused backward pass of layer_norm and rms_norm (what
// their vjp rules build), against two references: the composed forward
// differentiated by autodiff (layer_norm_composed through vjp) in float64,
// and norm_vjp_composed (the closed forms of public ops). Dtypes, row
// lengths from 1 to 20000, with and without weight and bias, strided,
// transposed and broadcast operands, empty arrays; gradients against
// finite differences, second-order gradients (through NormVJP's own
// rules), and vmap of the gradients against a loop.
#include <cmath>
#include <random>

#include "fluxion/ops/common.h"
#include "fluxion/ops/fast.h"
#include "rule_checks.h"
#include "transform_checks.h"

using namespace fluxion;
using namespace fluxion::test;
namespace fx = fluxion::fast;

namespace {

using Arrays = std::vector<array>;
using Opt = std::optional<array>;

array randn(const Shape& shape, unsigned seed, Dtype t = float32,
            double mean = 0.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(mean, 1.0);
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) {
    x = d(gen);
  }
  return astype(array(v.begin(), shape, float64), t);
}

// Agreement of a dtype's results with the float64 reference of its own
// (rounded) inputs: the kernels compute in float, then round once.
double tol_of(Dtype t) {
  return t == float64   ? 1e-11
         : t == float32 ? 3e-5
         : t == float16 ? 4e-3
                        : 3e-2;
}

const std::vector<Dtype> kFloatTypes{float32, float64, float16, bfloat16};

// One configuration of a norm: which one, and which parameters it has.
struct Variant {
  bool layer, weight, bias;
  std::string name() const {
    return std::string(layer ? "layer_norm" : "rms_norm") +
           (weight ? " +w" : "") + (bias ? " +b" : "");
  }
};
const std::vector<Variant> kVariants{
    {true, true, true},   {true, true, false},  {true, false, true},
    {true, false, false}, {false, true, false}, {false, false, false}};

// The norm of `v` as a function of its primals (x, then w and b when the
// variant has them), fused or composed.
Fn norm_fn(const Variant& v, bool composed, float eps = 1e-5f) {
  return [v, composed, eps](const Arrays& p) {
    Opt w, b;
    size_t i = 1;
    if (v.weight) {
      w = p[i++];
    }
    if (v.bias) {
      b = p[i++];
    }
    if (v.layer) {
      return Arrays{composed ? fx::layer_norm_composed(p[0], w, b, eps)
                             : fx::layer_norm(p[0], w, b, eps)};
    }
    return Arrays{composed ? fx::rms_norm_composed(p[0], w, eps)
                           : fx::rms_norm(p[0], w, eps)};
  };
}

Arrays primals_of(const Variant& v, const array& x, const array& w,
                  const array& b) {
  Arrays p{x};
  if (v.weight) {
    p.push_back(w);
  }
  if (v.bias) {
    p.push_back(b);
  }
  return p;
}

Arrays to64(const Arrays& a) {
  Arrays out;
  for (auto& e : a) {
    out.push_back(astype(e, float64));
  }
  return out;
}

// The rule's gradients (one NormVJP node) at dtype t against the composed
// forward's, differentiated in float64 from the same rounded values; and
// norm_vjp against norm_vjp_composed the same way.
void check_against_composed(const Variant& v, const array& x, const array& w,
                            const array& b, const array& c,
                            const std::string& what) {
  SCOPED_TRACE(what + " " + v.name());
  const Dtype t = x.dtype();
  const double tol = tol_of(t);
  auto p = primals_of(v, x, w, b);
  auto got = vjp(norm_fn(v, false), p, {c}).second;
  auto want = vjp(norm_fn(v, true), to64(p), {astype(c, float64)}).second;
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].dtype(), t) << "gradient " << i;
    ASSERT_EQ(got[i].shape(), want[i].shape()) << "gradient " << i;
    expect_close(got[i], to_vector<double>(want[i]), tol, tol,
                 what + " gradient " + std::to_string(i));
  }
  Opt wo;
  if (v.weight) {
    wo = w;
  }
  auto fused = fx::norm_vjp(x, wo, c, 1e-5f, v.layer, v.bias);
  Opt w64;
  if (v.weight) {
    w64 = astype(w, float64);
  }
  auto closed = fx::norm_vjp_composed(
      astype(x, float64), w64, astype(c, float64), 1e-5f, v.layer, v.bias);
  ASSERT_EQ(fused.size(), closed.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    expect_close(fused[i], to_vector<double>(closed[i]), tol, tol,
                 what + " norm_vjp output " + std::to_string(i));
  }
}

}  // namespace

TEST(NormVjp, MatchesComposedOverDtypesAndRowLengths) {
  for (Dtype t : kFloatTypes) {
    for (int d : {1, 3, 33, 1000, 4096, 20000}) {
      const int rows = d >= 4096 ? 3 : 7;
      auto x = randn({rows, d}, 1 + d, t, 0.5);
      auto w = randn({d}, 2 + d, t);
      auto b = randn({d}, 3 + d, t);
      auto c = randn({rows, d}, 4 + d, t);
      for (auto& v : kVariants) {
        check_against_composed(
            v, x, w, b, c,
            std::string(dtype_name(t)) + " d=" + std::to_string(d));
      }
    }
  }
}

TEST(NormVjp, LeadingDimsAndOneDimensionalInput) {
  auto x = randn({2, 3, 4, 9}, 10, float32);
  auto w = randn({9}, 11), b = randn({9}, 12);
  auto c = randn({2, 3, 4, 9}, 13);
  auto x1 = randn({9}, 14), c1 = randn({9}, 15);
  for (auto& v : kVariants) {
    check_against_composed(v, x, w, b, c, "4-d");
    check_against_composed(v, x1, w, b, c1, "1-d");
  }
}

TEST(NormVjp, StridedTransposedAndBroadcastOperands) {
  for (Dtype t : kFloatTypes) {
    // x transposed (its last axis strided), a reversed weight, a bias of
    // stride 0, and the cotangent of sum(norm(x)): ones broadcast.
    auto x = transpose(randn({33, 2, 5}, 20, t), {2, 1, 0});
    auto w = slice(randn({33}, 21, t), {32}, {-34}, {-1});
    auto b = broadcast_to(array(0.5, t), {33});
    auto ones = broadcast_to(array(1.0, t), x.shape());
    auto c = transpose(randn({33, 2, 5}, 22, t), {2, 1, 0});
    // A slice starting at an odd element (the CUDA kernels' unaligned path).
    auto xs = slice(randn({6, 40}, 23, t), {0, 1}, {6, 38});
    auto cs = slice(randn({6, 40}, 24, t), {0, 3}, {6, 40});
    auto ws = slice(randn({74}, 25, t), {0}, {74}, {2});
    for (auto& v : kVariants) {
      check_against_composed(v, x, w, b, c,
                             std::string(dtype_name(t)) + " transposed");
      check_against_composed(v, x, w, b, ones,
                             std::string(dtype_name(t)) + " ones");
      check_against_composed(v, xs, ws, ws, cs,
                             std::string(dtype_name(t)) + " sliced");
    }
  }
}

TEST(NormVjp, EmptyArrays) {
  for (const Shape& sh : {Shape{0, 8}, Shape{4, 0}, Shape{2, 0, 3}}) {
    SCOPED_TRACE(shape_str(sh));
    const int d = sh.back();
    auto x = zeros(sh), c = zeros(sh);
    auto out = fx::norm_vjp(x, ones({d}), c, 1e-5f, true, true);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].shape(), sh);
    for (int i : {1, 2}) {
      EXPECT_EQ(out[i].shape(), Shape{d});
      // No rows: the sums over them are zero.
      expect_close(out[i], std::vector<double>(d, 0.0), 0, 0);
    }
    auto rms = fx::norm_vjp(x, std::nullopt, c, 1e-5f, false, false);
    ASSERT_EQ(rms.size(), 1u);
    EXPECT_EQ(rms[0].shape(), sh);
    eval(rms);
  }
}

TEST(NormVjp, OutputsDtypesAndErrors) {
  auto x = randn({3, 4}, 30, float16);
  auto w = randn({4}, 31, float32);
  auto c = randn({3, 4}, 32, float16);
  auto out = fx::norm_vjp(x, w, c, 1e-5f, true, true);
  ASSERT_EQ(out.size(), 3u);
  for (auto& o : out) {
    EXPECT_EQ(o.dtype(), float32);
  }
  EXPECT_EQ(fx::norm_vjp(x, std::nullopt, c, 1e-5f, true, false).size(), 1u);
  EXPECT_EQ(fx::norm_vjp(x, std::nullopt, c, 1e-5f, true, true).size(), 2u);
  expect_error<std::invalid_argument>(
      [&] {
        fx::norm_vjp(x, w, randn({3, 5}, 1), 1e-5f, true, true);
      },
      "[norm_vjp] The cotangent's shape (3,5) must be the input's (3,4).");
  expect_error<std::invalid_argument>(
      [&] { fx::norm_vjp(x, randn({5}, 1), c, 1e-5f, true, true); },
      "[norm_vjp] weight must have shape (4)");
  expect_error<std::invalid_argument>(
      [&] { fx::norm_vjp(x, w, c, 1e-5f, false, true); },
      "[norm_vjp] rms_norm has no bias.");
  expect_error<std::invalid_argument>(
      [&] {
        fx::norm_vjp(array({1, 2}), std::nullopt, array({1, 2}), 1e-5f, true,
                     false);
      },
      "[norm_vjp] Received unsupported type int32");
}

// The norms' vjp is one NormVJP node (dbias alone is a plain sum).
TEST(NormVjp, RulesBuildOneNode) {
  auto x = randn({4, 6}, 40), w = randn({6}, 41), b = randn({6}, 42);
  auto c = randn({4, 6}, 43);
  auto ln = norm_fn({true, true, true}, false);
  auto g = vjp(ln, {x, w, b}, {c}, {0, 1, 2}).second;
  EXPECT_STREQ(g[0].primitive().name(), "NormVJP");
  EXPECT_STREQ(g[1].primitive().name(), "NormVJP");
  EXPECT_STREQ(g[2].primitive().name(), "NormVJP");
  EXPECT_EQ(g[0].siblings().size(), 2u);
  auto only_b = vjp(ln, {x, w, b}, {c}, {2}).second;
  EXPECT_STRNE(only_b[0].primitive().name(), "NormVJP");
  expect_close(only_b[0], to_vector<double>(g[2]), 1e-6, 1e-6);
}

// float64 gradients against finite differences, first and second order:
// the second order differentiates the vjp, i.e. runs NormVJP's own vjp
// and jvp rules.
TEST(NormVjp, FiniteDifferencesAndSecondOrder) {
  auto x = randn({3, 7}, 50, float64, 0.3);
  auto w = randn({7}, 51, float64), b = randn({7}, 52, float64);
  for (auto& v : kVariants) {
    SCOPED_TRACE(v.name());
    auto p = primals_of(v, x, w, b);
    rules::grads(norm_fn(v, false), p, 1e-6, 1e-6);
    rules::second_order(norm_fn(v, false), p, 1e-5, 1e-5);
  }
}

// Grad of grad and jvp of vjp through NormVJP against the same of the
// composed forward (autodiff through every op).
TEST(NormVjp, SecondOrderMatchesComposed) {
  auto x = randn({4, 10}, 60, float64, 0.2);
  auto w = randn({10}, 61, float64), b = randn({10}, 62, float64);
  auto c = randn({4, 10}, 63, float64);
  auto u = randn({4, 10}, 64, float64);
  for (auto& v : kVariants) {
    SCOPED_TRACE(v.name());
    auto p = primals_of(v, x, w, b);
    // h(p) = <vjp(norm)(p; c)[0], u>: its gradient is a second derivative.
    auto h = [&](bool composed) {
      return [&, composed](const Arrays& q) {
        auto g = vjp(norm_fn(v, composed), q, {c}).second;
        return Arrays{sum(multiply(g[0], u))};
      };
    };
    Arrays ones_ct{array(1.0, float64)};
    auto got = vjp(h(false), p, ones_ct).second;
    auto want = vjp(h(true), p, ones_ct).second;
    for (size_t i = 0; i < got.size(); ++i) {
      expect_close(got[i], to_vector<double>(want[i]), 1e-10, 1e-10,
                   "grad of grad " + std::to_string(i));
    }
    // jvp of the vjp along the tangents (u, ones...).
    Arrays tangents{u};
    for (size_t i = 1; i < p.size(); ++i) {
      tangents.push_back(ones_like(p[i]));
    }
    auto vj = [&](bool composed) {
      return [&, composed](const Arrays& q) {
        return vjp(norm_fn(v, composed), q, {c}).second;
      };
    };
    auto jg = jvp(vj(false), p, tangents).second;
    auto jw = jvp(vj(true), p, tangents).second;
    for (size_t i = 0; i < jg.size(); ++i) {
      expect_close(jg[i], to_vector<double>(jw[i]), 1e-10, 1e-10,
                   "jvp of vjp " + std::to_string(i));
    }
  }
}

// vmap of the gradients (per-example gradients) against a loop over the
// batch, with each input mapped alone at each axis, all at once, and vmap
// of vmap (NormVJP's vmap rule).
TEST(NormVjp, VmapOfGradientsMatchesLoop) {
  for (auto& v : kVariants) {
    SCOPED_TRACE(v.name());
    const int n = 1 + int{v.weight} + int{v.bias};
    // (x, [w], [b], c) -> gradients of the norm at (x, [w], [b]) along c.
    Fn f = [v, n](const Arrays& in) {
      Arrays p(in.begin(), in.begin() + n);
      return vjp(norm_fn(v, false), p, {in.back()}).second;
    };
    std::vector<Shape> shapes{{3, 5}};
    for (int i = 1; i < n; ++i) {
      shapes.push_back({5});
    }
    shapes.push_back({3, 5});
    std::vector<rules::Maker> makers(shapes.size(), rules::floats(-1, 1));
    rules::vmaps(f, shapes, makers, 1e-5);
  }
  // The loss of a batch of examples: vmap(grad) against per-example grads.
  auto xs = randn({4, 3, 6}, 70, float64), w = randn({6}, 71, float64);
  auto b = randn({6}, 72, float64);
  auto loss = [](const Arrays& p) {
    auto y = fx::layer_norm(p[0], p[1], p[2], 1e-5f);
    return Arrays{sum(multiply(y, y))};
  };
  auto per_example = [&](const Arrays& in) {
    return vjp(loss, {in[0], in[1], in[2]}, {array(1.0, float64)}).second;
  };
  check_vmap(per_example, {xs, w, b}, {0, -1, -1}, 0, 1e-10);
}
