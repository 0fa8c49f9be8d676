// Transformation rules of the unary, binary and misc (AsType, Select)
// primitives beyond the op table (which checks every elementwise op's
// gradients to second order, its zero gradients and its vmap: see
// test_op_table.cpp): Hessians and third derivatives, hand-checked special
// points (kinks, ties, zeros of power), the complex conventions, the
// composites built on them; then per-example gradients of a small MLP.
#include <cmath>
#include <complex>
#include <functional>
#include <numbers>

#include "rule_checks.h"

using namespace fluxion;
using namespace fluxion::test;
using namespace fluxion::test::rules;

TEST(UnaryGrad, HessianOfSum) {
  // The Hessian of sum(f(x)) is diag(f''(x)); check tanh:
  // f'' = -2 tanh (1 - tanh^2).
  auto x = uniform({4}, -2, 2);
  auto h = hessian([](const array& a) { return sum(tanh(a)); })(x);
  ASSERT_EQ(h.shape(), Shape({4, 4}));
  auto xv = to_vector<double>(x);
  std::vector<double> expected(16, 0.0);
  for (int i = 0; i < 4; ++i) {
    double t = std::tanh(xv[i]);
    expected[i * 4 + i] = -2 * t * (1 - t * t);
  }
  expect_close(h, expected, 1e-10, 1e-12, "hessian");
}

TEST(UnaryGrad, ThirdOrderOfSin) {
  // grad(grad(grad(sin))) = -cos.
  auto g3 = grad(grad(grad([](const array& a) { return sin(a); })));
  auto x = array(0.7, float64);
  expect_close(g3(x), {-std::cos(0.7)}, 1e-12, 1e-12, "third derivative");
}

TEST(UnaryGrad, StopGradientBlocksOnlyItsBranch) {
  // d/dx [x * stop_gradient(x)] = stop_gradient(x) = x.
  auto x = uniform({5}, -2, 2);
  auto g = grad([](const array& a) { return sum(a * stop_gradient(a)); })(x);
  expect_close(g, to_vector<double>(x), 1e-12, 1e-12, "grad");
}

TEST(UnaryGrad, Kinks) {
  // abs' at 0 is sign(0) = 0, as in MLX and JAX.
  auto g = grad([](const array& a) { return sum(abs(a)); })(
      array({-1.5, 0.0, 2.0}, float64));
  expect_close(g, {-1, 0, 1}, 0, 0, "abs");
  // Derivatives at the edges of the domain are infinite, not nan.
  auto gs =
      grad([](const array& a) { return sum(sqrt(a)); })(array({0.0}, float64));
  expect_close(gs, {kInf}, 0, 0, "sqrt at 0");
}

TEST(UnaryGrad, VmapOfGrad) {
  // Per-row derivatives of sum(sigmoid(x) * x) match the analytic ones.
  auto x = uniform({3, 4}, -2, 2);
  auto g = vmap(grad([](const array& a) { return sum(sigmoid(a) * a); }))(x);
  auto xv = to_vector<double>(x);
  std::vector<double> expected;
  for (double v : xv) {
    double s = 1 / (1 + std::exp(-v));
    expected.push_back(s + v * s * (1 - s));
  }
  expect_close(g, expected, 1e-12, 1e-12, "vmap(grad)");
}

TEST(UnaryGrad, Complex) {
  // MLX's (PyTorch's) convention: holomorphic ops give vjp(ct) =
  // ct * conj(f'(z)) (JAX: ct * f'(z)); jvp is f'(z) t in both.
  auto z = array({complex64_t(0.5f, -1.0f), complex64_t(-2.0f, 0.25f)});
  auto one = ones({2}, complex64);
  auto to_cd = [](const array& a) {
    std::vector<std::complex<double>> out;
    for (auto v : to_vector<complex64_t>(a)) {
      out.emplace_back(v.real(), v.imag());
    }
    return out;
  };
  auto zs = to_cd(z);
  auto expect_c = [&](const array& got,
                      const std::vector<std::complex<double>>& want,
                      const char* what) {
    ASSERT_EQ(got.dtype(), complex64) << what;
    auto g = to_cd(got);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(g[i].real(), want[i].real(), 1e-5) << what << " " << i;
      EXPECT_NEAR(g[i].imag(), want[i].imag(), 1e-5) << what << " " << i;
    }
  };
  auto g = vjp([](const array& a) { return exp(a); }, z, one).second;
  expect_c(g, {std::conj(std::exp(zs[0])), std::conj(std::exp(zs[1]))},
           "exp");
  g = vjp([](const array& a) { return square(a); }, z, one).second;
  expect_c(g, {2.0 * std::conj(zs[0]), 2.0 * std::conj(zs[1])}, "square");
  auto t = jvp([](const array& a) { return sin(a); }, z, one).second;
  expect_c(t, {std::cos(zs[0]), std::cos(zs[1])}, "sin jvp");

  // Non-holomorphic: a real output's gradient is d/dx + i d/dy (PyTorch).
  auto rone = ones({2}, float32);
  g = vjp([](const array& a) { return abs(a); }, z, rone).second;
  expect_c(g, {zs[0] / std::abs(zs[0]), zs[1] / std::abs(zs[1])}, "abs");
  g = vjp([](const array& a) { return real(a); }, z, rone).second;
  expect_c(g, {1.0, 1.0}, "real");
  g = vjp([](const array& a) { return imag(a); }, z, rone).second;
  expect_c(g, {{0, 1}, {0, 1}}, "imag");
  auto ct = array({complex64_t(1.0f, 2.0f), complex64_t(-3.0f, 0.5f)});
  g = vjp([](const array& a) { return conjugate(a); }, z, ct).second;
  expect_c(g, {{1, -2}, {-3, -0.5}}, "conjugate");

  // jvp of abs: Re(conj(z) t) / |z|, real.
  auto tr = jvp([](const array& a) { return abs(a); }, z, ct).second;
  ASSERT_EQ(tr.dtype(), float32);
  auto tv = to_vector<double>(tr);
  auto cs = to_cd(ct);
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(tv[i], (std::conj(zs[i]) * cs[i]).real() / std::abs(zs[i]),
                1e-5);
  }
  // abs at 0: zero, not nan.
  g = vjp([](const array& a) { return abs(a); },
          array({complex64_t(0.0f, 0.0f)}), ones({1}, float32))
          .second;
  expect_c(g, {0.0}, "abs at 0");
  // Real-valued loss of a complex input: grad(|z|^2) = 2 z (JAX: 2 conj(z)).
  g = grad([](const array& a) { return sum(square(abs(a))); })(z);
  expect_c(g, {2.0 * zs[0], 2.0 * zs[1]}, "|z|^2");
}

// --- binary ---

TEST(BinaryGrad, Hessian) {
  // f(a, b) = sum(a^2 * b): d2f/da2 = 2b, d2f/dadb = 2a (diagonal).
  auto a = uniform({3});
  auto b = uniform({3});
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{sum(power(in[0], array(2.0, float64)) * in[1])};
  };
  auto h = hessian(f, {0})({a, b})[0];
  auto bv = to_vector<double>(b);
  std::vector<double> expected(9, 0.0);
  for (int i = 0; i < 3; ++i) {
    expected[i * 3 + i] = 2 * bv[i];
  }
  expect_close(h, expected, 1e-10, 1e-12, "hessian");
}

// (The elementwise ops' finite-difference, second-order, zero-gradient
// and vmap checks are driven by the op table: test_op_table.cpp.)

TEST(BinaryGrad, MixedOperandsGiveZeros) {
  // The float operand of a comparison with an int gets float zeros.
  zero_grads(fn2([](auto& a, auto& b) { return less(a, b); }),
             {uniform({3}), random_ints({3}, -2, 2)}, "less(float, int)");
}

TEST(BinaryGrad, VmapOfArrayEqualNaN) {
  // Equal with equal_nan has its own parameter.
  vmaps(fn2([](auto& a, auto& b) { return array_equal(a, b, true); }),
        {{2}, {2}}, {ints(0, 1), ints(0, 1)});
}

TEST(BinaryGrad, MaximumTiesGoToSecondOperand) {
  // As in MLX: a > b routes to a, a <= b to b (JAX would split ties).
  auto a = array({1.0, 2.0, 3.0}, float64);
  auto b = array({1.0, 5.0, 0.0}, float64);
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{maximum(in[0], in[1])};
  };
  auto g = vjp(f, {a, b}, {ones({3}, float64)}).second;
  expect_close(g[0], {0, 0, 1}, 0, 0, "maximum d/da");
  expect_close(g[1], {1, 1, 0}, 0, 0, "maximum d/db");
  auto fm = [](const std::vector<array>& in) {
    return std::vector<array>{minimum(in[0], in[1])};
  };
  g = vjp(fm, {a, b}, {ones({3}, float64)}).second;
  expect_close(g[0], {0, 1, 0}, 0, 0, "minimum d/da");
  expect_close(g[1], {1, 0, 1}, 0, 0, "minimum d/db");
  // The jvp is consistent: ties take b's tangent.
  auto t = jvp(fm, {a, b}, {full({3}, 10.0, float64), full({3}, 20.0, float64)})
               .second[0];
  expect_close(t, {20, 10, 20}, 0, 0, "minimum jvp");
}

TEST(BinaryGrad, PowerSpecialPoints) {
  // As JAX: d/db at a = 0 is 0 (not 0 * log 0 = nan); d/da at b = 0 is 0
  // even at a = 0 (not 0 * 0^-1); second derivatives stay finite there.
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{power(in[0], in[1])};
  };
  auto a = array({0.0, 0.0, 2.0, 0.0}, float64);
  auto b = array({2.0, 0.0, 0.0, 0.5}, float64);
  auto g = vjp(f, {a, b}, {ones({4}, float64)}).second;
  expect_close(g[0], {0, 0, 0, kInf}, 0, 0, "d/da");
  expect_close(g[1], {0, 0, std::log(2.0), 0}, 1e-12, 0, "d/db");
  // Second derivatives at the finite points.
  a = array({0.0, 0.0, 2.0}, float64);
  b = array({2.0, 0.0, 0.0}, float64);
  auto gg = [&](const std::vector<array>& in) {
    return vjp(f, in, {ones({3}, float64)}).second;
  };
  auto h = vjp(gg, {a, b}, {ones({3}, float64), ones({3}, float64)}).second;
  for (auto& x : h) {
    for (double v : to_vector<double>(x)) {
      EXPECT_FALSE(std::isnan(v));
    }
  }
  // Negative base with an integer exponent: d/da is fine; d/db is nan
  // (a^b is not real there) but only when asked for.
  auto an = array({-2.0}, float64);
  auto bn = array({3.0}, float64);
  auto ga = vjp(f, {an, bn}, {ones({1}, float64)}, {0}).second;
  expect_close(ga[0], {12.0}, 1e-12, 0, "d/da at a < 0");
}

TEST(BinaryGrad, LogAddExpInfinities) {
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{logaddexp(in[0], in[1])};
  };
  auto a = array({-kInf, kInf, 1.0, -kInf}, float64);
  auto b = array({-kInf, kInf, -kInf, 0.0}, float64);
  auto g = vjp(f, {a, b}, {ones({4}, float64)}).second;
  expect_close(g[0], {0.5, 0.5, 1, 0}, 1e-12, 0, "d/da");
  expect_close(g[1], {0.5, 0.5, 0, 1}, 1e-12, 0, "d/db");
}

TEST(BinaryGrad, RemainderMatchesMlx) {
  // d(a % b)/da = 1, d/db = -floor(a / b).
  auto a = array({5.5, -5.5, 2.0}, float64);
  auto b = array({2.0, 2.0, -0.75}, float64);
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{remainder(in[0], in[1])};
  };
  auto g = vjp(f, {a, b}, {ones({3}, float64)}).second;
  expect_close(g[0], {1, 1, 1}, 0, 0, "d/da");
  expect_close(g[1], {-2, 3, 3}, 0, 0, "d/db");
  // floor_divide has zero derivatives.
  auto fd = [](const std::vector<array>& in) {
    return std::vector<array>{floor_divide(in[0], in[1])};
  };
  auto z = vjp(fd, {a, b}, {ones({3}, float64)}).second;
  expect_close(z[0], {0, 0, 0}, 0, 0, "floor_divide");
}

TEST(BinaryGrad, ComplexHolomorphic) {
  // divide: ct * conj(df/dz) (MLX's convention; JAX's has no conjugate).
  auto a = array({complex64_t(1.0f, 2.0f)});
  auto b = array({complex64_t(-0.5f, 1.5f)});
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{divide(in[0], in[1])};
  };
  auto g = vjp(f, {a, b}, {ones({1}, complex64)}).second;
  std::complex<double> ac(1, 2), bc(-0.5, 1.5);
  auto da = to_vector<complex64_t>(g[0])[0];
  auto db = to_vector<complex64_t>(g[1])[0];
  auto want_a = std::conj(1.0 / bc), want_b = std::conj(-ac / (bc * bc));
  EXPECT_NEAR(da.real(), want_a.real(), 1e-6);
  EXPECT_NEAR(da.imag(), want_a.imag(), 1e-6);
  EXPECT_NEAR(db.real(), want_b.real(), 1e-6);
  EXPECT_NEAR(db.imag(), want_b.imag(), 1e-6);
}

// --- misc: AsType and Select ---

TEST(MiscGrad, AsType) {
  // float64 -> float32 -> float64: the cotangent is cast back.
  auto f = fn1(
      [](const array& a) { return astype(astype(a, float32), float64) * a; });
  // float32 rounding limits the finite differences' accuracy.
  grads(f, {uniform({2, 3})}, 1e-3, 1e-3);
  auto x = uniform({3}, -2, 2);
  auto g = vjp([](const array& a) { return astype(a, float32); }, x,
               ones({3}, float32))
               .second;
  EXPECT_EQ(g.dtype(), float64);
  expect_close(g, {1, 1, 1}, 0, 0, "float cast");
  // To or from integers: the (co)tangent passes, cast, as MLX's AsType
  // (issue 33: the gradient of an integer input is not zero).
  auto gi = vjp([](const array& a) { return astype(a, int32); }, x,
                ones({3}, int32))
                .second;
  EXPECT_EQ(gi.dtype(), float64);
  expect_close(gi, {1, 1, 1}, 0, 0, "float to int");
  auto xi = random_ints({3}, -3, 3);
  auto gf = vjp([](const array& a) { return astype(a, float64); }, xi,
                array({1.5, 2.0, -1.0}))
                .second;
  EXPECT_EQ(gf.dtype(), xi.dtype());
  expect_close(gf, {1, 2, -1}, 0, 0, "int to float");
  auto ti = jvp([](const array& a) { return astype(a, int32); }, x,
                array({2.0, -3.0, 1.0}))
                .second;
  EXPECT_EQ(ti.dtype(), int32);
  expect_close(ti, {2, -3, 1}, 0, 0, "float to int tangent");
  // To bool: zero.
  zero_grads(fn1([](const array& a) { return astype(a, bool_); }), {x},
             "float to bool");
  // Real to complex and back: the real part's cotangent.
  auto gc =
      vjp([](const array& a) { return astype(a, complex64); },
          astype(x, float32),
          array({complex64_t(1, 2), complex64_t(3, 4), complex64_t(5, 6)}))
          .second;
  ASSERT_EQ(gc.dtype(), float32);
  expect_close(gc, {1, 3, 5}, 0, 0, "real to complex");
  auto gr = vjp([](const array& a) { return astype(a, float32); },
                array({complex64_t(1, 2)}), ones({1}, float32))
                .second;
  ASSERT_EQ(gr.dtype(), complex64);
  EXPECT_EQ(to_vector<complex64_t>(gr)[0], complex64_t(1, 0));
  second_order(fn1([](const array& a) {
                 return astype(square(astype(a, float32)), float64);
               }),
               {uniform({3})}, 1e-3, 1e-3);
  vmaps(fn1([](const array& a) { return astype(a, float32); }), {{2, 3}},
        {floats()});
  vmaps(fn1([](const array& a) { return astype(a, int32); }), {{2, 3}},
        {floats(-5, 5)});
}

TEST(MiscGrad, Select) {
  auto f = fn3([](const array& c, const array& x, const array& y) {
    return where(c, x, y);
  });
  auto c = random_bools({2, 3});
  grads(f, {c, uniform({2, 3}), uniform({2, 3})});
  grads(f, {random_bools({3}), uniform({2, 3}), uniform({})});
  second_order(f, {c, uniform({2, 3}), uniform({2, 3})});
  // Hand-checked routing; the condition's cotangent is bool zeros.
  auto cond = array({true, false, true});
  auto g = vjp(f, {cond, uniform({3}), uniform({3})},
               {array({1.0, 2.0, 3.0}, float64)})
               .second;
  ASSERT_EQ(g[0].dtype(), bool_);
  expect_close(g[0], {0, 0, 0}, 0, 0, "condition");
  expect_close(g[1], {1, 0, 3}, 0, 0, "x");
  expect_close(g[2], {0, 2, 0}, 0, 0, "y");
  vmaps(f, {{2, 3}, {2, 3}, {2, 3}}, {bools(), floats(), floats()});
  vmaps(f, {{3}, {2, 3}, {}}, {bools(), floats(), floats()});
}

// --- composites ---

TEST(MiscGrad, Composites) {
  struct Case {
    const char* name;
    std::function<array(const array&)> fn;
  };
  std::vector<Case> cases = {
      {"softmax", [](const array& a) { return softmax(a, -1); }},
      {"softmax_all", [](const array& a) { return softmax(a); }},
      {"softmax_precise", [](const array& a) { return softmax(a, 0, true); }},
      {"log_softmax", [](const array& a) { return log_softmax(a, -1); }},
      {"log_softmax_0", [](const array& a) { return log_softmax(a, 0); }},
      {"logsumexp", [](const array& a) { return logsumexp(a, -1); }},
      {"logsumexp_all", [](const array& a) { return logsumexp(a, true); }},
      {"mean", [](const array& a) { return mean(a, 0); }},
      {"mean_all", [](const array& a) { return mean(a); }},
      {"var", [](const array& a) { return var(a, -1); }},
      {"var_ddof", [](const array& a) { return var(a, 0, true, 1); }},
      {"std", [](const array& a) { return fluxion::std(a, -1); }},
      {"std_all", [](const array& a) { return fluxion::std(a); }},
      {"clip",
       [](const array& a) {
         return clip(a, array(-0.5, float64), array(0.5, float64));
       }},
      {"clip_min",
       [](const array& a) { return clip(a, array(0.1, float64), {}); }},
      {"where",
       [](const array& a) { return where(a > 0.0, square(a), a * 3.0); }},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    grads(fn1(c.fn), {uniform({3, 4}, -2, 2)});
    second_order(fn1(c.fn), {uniform({3, 4}, -2, 2)});
    vmaps(fn1(c.fn), {{3, 4}}, {floats(-2, 2)});
  }
}

TEST(MiscGrad, CompositesValues) {
  // Gradients of well-known shapes: d logsumexp = softmax; d mean = 1/n;
  // d var = 2 (x - mean) / n.
  auto x = uniform({5}, -2, 2);
  auto g = grad([](const array& a) { return logsumexp(a); })(x);
  expect_close(g, to_vector<double>(softmax(x)), 1e-12, 1e-12, "logsumexp");
  g = grad([](const array& a) { return mean(a); })(x);
  expect_close(g, std::vector<double>(5, 0.2), 1e-12, 0, "mean");
  g = grad([](const array& a) { return var(a); })(x);
  auto xv = to_vector<double>(x);
  double m = 0;
  for (double v : xv) {
    m += v / 5;
  }
  std::vector<double> expected;
  for (double v : xv) {
    expected.push_back(2 * (v - m) / 5);
  }
  expect_close(g, expected, 1e-10, 1e-12, "var");
  // Large inputs: the stop_gradient'ed max shift keeps softmax's gradient
  // finite.
  auto big = array({1000.0, 1000.0}, float64);
  g = grad([](const array& a) { return logsumexp(a); })(big);
  expect_close(g, {0.5, 0.5}, 1e-12, 0, "logsumexp at 1000");
  // clip: the gradient passes inside the bounds only.
  g = grad([](const array& a) {
    return sum(clip(a, array(-1.0, float64), array(1.0, float64)));
  })(array({-2.0, 0.5, 3.0}, float64));
  expect_close(g, {0, 1, 0}, 0, 0, "clip");
}

// --- per-example gradients ---

namespace {

// A dense layer, x (in,), w (in, out), b (out,): from multiply and sum, or
// with matmul (whose rules are the linalg family's).
array dense(const array& x, const array& w, const array& b, bool use_matmul) {
  if (use_matmul) {
    return matmul(x, w) + b;
  }
  return sum(expand_dims(x, -1) * w, 0) + b;
}

// Squared error (plus a logsumexp term) of a two-layer tanh MLP on one
// example: inputs w1, b1, w2, b2, x, y.
array mlp_loss(const std::vector<array>& in, bool use_matmul) {
  auto h = tanh(dense(in[4], in[0], in[1], use_matmul));
  auto out = dense(h, in[2], in[3], use_matmul);
  return sum(square(out - in[5])) + 0.1 * logsumexp(out);
}

}  // namespace

TEST(MiscGrad, PerExampleGradientsOfMlp) {
  const int n = 5, din = 3, dh = 4, dout = 2;
  std::vector<array> params = {uniform({din, dh}), uniform({dh}),
                               uniform({dh, dout}), uniform({dout})};
  auto xs = uniform({n, din});
  auto ys = uniform({n, dout});
  std::vector<array> in = params;
  in.push_back(xs);
  in.push_back(ys);
  for (bool use_matmul : {false, true}) {
    SCOPED_TRACE(use_matmul ? "matmul" : "multiply and sum");
    auto loss = [use_matmul](const std::vector<array>& a) {
      return mlp_loss(a, use_matmul);
    };
    auto per_example = [loss](const std::vector<array>& a) {
      return grad(loss, {0, 1, 2, 3})(a);
    };
    auto batched = vmap(per_example, {-1, -1, -1, -1, 0, 0})(in);
    ASSERT_EQ(batched.size(), 4u);
    for (int i = 0; i < n; ++i) {
      std::vector<array> one = params;
      one.push_back(take(xs, i, 0));
      one.push_back(take(ys, i, 0));
      auto g = per_example(one);
      for (int p = 0; p < 4; ++p) {
        auto row = take(batched[p], i, 0);
        ASSERT_EQ(row.shape(), params[p].shape());
        expect_close(
            row, to_vector<double>(g[p]), 1e-10, 1e-12,
            "example " + std::to_string(i) + " param " + std::to_string(p));
      }
    }
    // And the per-example gradients are right: check_grads on the loss.
    std::vector<array> one = params;
    one.push_back(take(xs, 0, 0));
    one.push_back(take(ys, 0, 0));
    grads(
        [loss](const std::vector<array>& a) {
          return std::vector<array>{loss(a)};
        },
        one);
  }
}

TEST(MiscGrad, VmapOfUnmappedIntermediates) {
  // A rule may report its output unmapped (-1); the rules downstream then
  // see axis -1 for it, alone or next to mapped operands. Here a custom
  // vmap rule says "every batch element sees the first slice".
  auto first_slice = custom_function(
      [](const std::vector<array>& in) { return std::vector<array>{in[0]}; },
      std::nullopt, std::nullopt,
      [](const std::vector<array>& in, const std::vector<int>& axes) {
        return std::make_pair(std::vector<array>{take(in[0], 0, axes[0])},
                              std::vector<int>{-1});
      });
  auto f = [&](const std::vector<array>& in) {
    auto g = first_slice({in[0]})[0];
    const auto& y = in[1];
    auto r = exp(g) * y + sum(g, 0, true) + astype(argmax(g), float64);
    return std::vector<array>{where(g > 0.0, g, y) + (g * g) + r};
  };
  auto x = uniform({3, 4});
  auto y = uniform({3, 4});
  auto got = vmap(f)({x, y})[0];
  ASSERT_EQ(got.shape(), Shape({3, 4}));
  auto x0 = take(x, 0, 0);
  for (int i = 0; i < 3; ++i) {
    auto yi = take(y, i, 0);
    auto r = exp(x0) * yi + sum(x0, 0, true) + astype(argmax(x0), float64);
    auto want = where(x0 > 0.0, x0, yi) + (x0 * x0) + r;
    expect_close(take(got, i, 0), to_vector<double>(want), 1e-12, 1e-12,
                 "row " + std::to_string(i));
  }
}
