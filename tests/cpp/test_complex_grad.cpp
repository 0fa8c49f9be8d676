// Complex gradients in MLX's (PyTorch's) convention: vjp is the adjoint of
// jvp under Re(conj(u) v), so grad of a real loss L(x + iy) is
// dL/dx + i dL/dy and a holomorphic f has vjp(ct) = ct * conj(f'(z)). The
// primitives' rules keep JAX's convention; the public vjp, grad and
// custom_function convert at the boundary (architecture.md, Transformations).
#include <complex>
#include <random>

#include "fluxion/compile.h"
#include "transform_checks.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

using cd = std::complex<double>;

array cvec(const std::vector<cd>& v, Shape shape = {}) {
  std::vector<complex64_t> c;
  for (auto x : v) {
    c.emplace_back(static_cast<float>(x.real()), static_cast<float>(x.imag()));
  }
  if (shape.empty()) {
    shape = {static_cast<int>(v.size())};
  }
  return array(c.begin(), shape);
}

std::vector<cd> values(const array& a) {
  std::vector<cd> out;
  for (auto v : to_vector<complex64_t>(a)) {
    out.emplace_back(v.real(), v.imag());
  }
  return out;
}

std::vector<cd> crandom(int n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<cd> v(n);
  for (auto& x : v) {
    x = cd(d(gen), d(gen));
  }
  return v;
}

void expect_cclose(const array& got, const std::vector<cd>& want, double tol,
                   const std::string& what) {
  ASSERT_EQ(got.dtype(), complex64) << what;
  auto g = values(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    double scale = std::max(1.0, std::abs(want[i]));
    EXPECT_NEAR(g[i].real(), want[i].real(), tol * scale) << what << " " << i;
    EXPECT_NEAR(g[i].imag(), want[i].imag(), tol * scale) << what << " " << i;
  }
}

// dL/dx + i dL/dy by central differences (complex64 inputs, so a coarse
// step and tolerance).
std::vector<cd> fd_grad(const UnaryFn& loss, const std::vector<cd>& z,
                        double eps = 1e-3) {
  std::vector<cd> g(z.size());
  for (size_t i = 0; i < z.size(); ++i) {
    for (cd dir : {cd(1, 0), cd(0, 1)}) {
      auto zp = z, zm = z;
      zp[i] += eps * dir;
      zm[i] -= eps * dir;
      double d = (loss(cvec(zp)).item<float>() - loss(cvec(zm)).item<float>()) /
                 (2 * eps);
      g[i] += d * dir;
    }
  }
  return g;
}

// A real loss mixing holomorphic and non-holomorphic ops of z.
array mixed_loss(const array& z) {
  return sum(abs(exp(z) * z) + 0.3 * imag(sin(z) / (z + 2.0)) +
             real(conjugate(z) * z * z));
}

}  // namespace

TEST(ComplexGrad, RealLossMatchesFiniteDifferences) {
  auto z = crandom(5, 1);
  auto g = grad(UnaryFn(mixed_loss))(cvec(z));
  expect_cclose(g, fd_grad(mixed_loss, z), 2e-3, "grad of a real loss");
  // The simplest case pins the sign: grad of |z|^2 is 2z (JAX: 2 conj(z)).
  g = grad([](const array& a) { return sum(square(abs(a))); })(cvec(z));
  std::vector<cd> two_z;
  for (auto v : z) {
    two_z.push_back(2.0 * v);
  }
  expect_cclose(g, two_z, 1e-5, "grad |z|^2");
}

TEST(ComplexGrad, HolomorphicVjpConjugatesTheDerivative) {
  auto z = crandom(4, 2), ct = crandom(4, 3);
  auto f = [](const array& a) { return exp(a) * a; };
  auto [out, g] = vjp(f, cvec(z), cvec(ct));
  std::vector<cd> want, want_t;
  for (size_t i = 0; i < z.size(); ++i) {
    cd df = std::exp(z[i]) * (1.0 + z[i]);
    want.push_back(ct[i] * std::conj(df));
    want_t.push_back(df * ct[i]);
  }
  expect_cclose(g, want, 1e-5, "vjp = ct conj(f')");
  // jvp is the same in every convention: f'(z) t.
  expect_cclose(jvp(f, cvec(z), cvec(ct)).second, want_t, 1e-5, "jvp = f' t");
}

TEST(ComplexGrad, VjpIsTheAdjointOfJvp) {
  // <u, J v> = <J* u, v> under Re(conj(a) b), for a non-holomorphic map with
  // complex and real inputs and outputs.
  auto f = [](const std::vector<array>& in) {
    auto& z = in[0];
    auto& x = in[1];
    return std::vector<array>{conjugate(z) * z * x + sin(z) * x,
                              abs(z) * x + real(z * z)};
  };
  auto z = cvec(crandom(3, 4));
  auto x = array({0.5f, -1.2f, 2.0f});
  auto u0 = cvec(crandom(3, 5)), vz = cvec(crandom(3, 6));
  auto u1 = array({1.0f, 0.3f, -0.7f}), vx = array({-0.4f, 0.9f, 0.2f});
  auto re_dot = [](const array& a, const array& b) {
    return sum(real(conjugate(astype(a, complex64)) * b)).item<float>();
  };
  auto t = jvp(f, {z, x}, {vz, vx}).second;
  auto g = vjp(f, {z, x}, {u0, u1}).second;
  EXPECT_EQ(g[1].dtype(), float32);
  double fwd = re_dot(u0, t[0]) + re_dot(u1, t[1]);
  double rev = re_dot(g[0], vz) + re_dot(g[1], vx);
  EXPECT_NEAR(fwd, rev, 1e-4 * std::max(1.0, std::abs(fwd)));
}

TEST(ComplexGrad, RealArraysTakeNoConjugate) {
  auto name = [](const array& a) { return std::string(a.primitive().name()); };
  auto gr = grad([](const array& a) { return sum(a * a); })(array({1.0f}));
  EXPECT_NE(name(gr), "Conjugate");
  auto gc =
      grad([](const array& a) { return sum(abs(a * a)); })(cvec({cd(1, 2)}));
  EXPECT_EQ(name(gc), "Conjugate");
}

TEST(ComplexGrad, CustomFunctionRuleInMlxConvention) {
  // exp with its vjp written as MLX's: ct * conj(exp(z)).
  auto cexp = custom_vjp(
      [](const std::vector<array>& in) {
        return std::vector<array>{exp(in[0])};
      },
      [](const std::vector<array>& primals, const std::vector<array>& cts,
         const std::vector<array>&) {
        return std::vector<array>{cts[0] * conjugate(exp(primals[0]))};
      });
  auto loss = [](const Fn& e) {
    return [e](const array& z) { return sum(abs(e({z})[0] * z) * 2.0); };
  };
  Fn plain = [](const std::vector<array>& in) {
    return std::vector<array>{exp(in[0])};
  };
  auto z = cvec(crandom(4, 7));
  auto want = values(grad(UnaryFn(loss(plain)))(z));
  expect_cclose(grad(UnaryFn(loss(cexp)))(z), want, 1e-5,
                "custom exp inside a loss");
  // A real output of a complex input: |z|^2 with the rule ct * 2z.
  auto sq = custom_vjp(
      [](const std::vector<array>& in) {
        return std::vector<array>{square(abs(in[0]))};
      },
      [](const std::vector<array>& primals, const std::vector<array>& cts,
         const std::vector<array>&) {
        return std::vector<array>{cts[0] * (primals[0] * 2.0)};
      });
  auto g = grad([&](const array& a) { return sum(sq({a})[0] * 3.0); })(z);
  std::vector<cd> six_z;
  for (auto v : values(z)) {
    six_z.push_back(6.0 * v);
  }
  expect_cclose(g, six_z, 1e-5, "custom |z|^2");
}

TEST(ComplexGrad, CheckpointCompileAndVmapMatchEager) {
  Fn block = [](const std::vector<array>& in) {
    return std::vector<array>{sin(in[0]) * conjugate(in[0]) + exp(in[0])};
  };
  auto loss = [](const Fn& b) -> Fn {
    return [b](const std::vector<array>& in) {
      return std::vector<array>{sum(abs(b(b(in))[0]))};
    };
  };
  auto z = cvec(crandom(6, 8), {2, 3});
  auto eager = value_and_grad(loss(block))({z}).second[0];
  auto want = values(eager);
  expect_cclose(value_and_grad(loss(checkpoint(block)))({z}).second[0], want,
                1e-5, "grad of checkpoint");
  Fn g = [&](const std::vector<array>& in) {
    return value_and_grad(loss(block))(in).second;
  };
  expect_cclose(compile(g)({z})[0], want, 1e-5, "compile(grad)");
  // grad of a compiled loss: the Compiled node's vjp rule.
  auto compiled_loss = compile(loss(block));
  expect_cclose(value_and_grad(compiled_loss)({z}).second[0], want, 1e-5,
                "grad(compile)");
  // vmap of grad over the rows equals the gradient of each row.
  auto rows = vmap(g)({z})[0];
  for (int r = 0; r < 2; ++r) {
    auto row = slice(z, {r, 0}, {r + 1, 3});
    auto gr = g({reshape(row, {3})})[0];
    expect_cclose(reshape(slice(rows, {r, 0}, {r + 1, 3}), {3}), values(gr),
                  1e-5, "vmap(grad) row " + std::to_string(r));
  }
}

TEST(ComplexGrad, GradOfGradMatchesFiniteDifferences) {
  // L2(z) = sum |grad L(z)|^2 is real: its grad follows the same convention.
  auto inner = [](const array& z) {
    return sum(real(z * z * z) + 0.5 * square(abs(z)) + imag(exp(z)));
  };
  auto l2 = [inner](const array& z) {
    return sum(square(abs(grad(UnaryFn(inner))(z))));
  };
  auto z = crandom(3, 9);
  expect_cclose(grad(UnaryFn(l2))(cvec(z)), fd_grad(l2, z), 5e-3,
                "grad of grad");
}

TEST(ComplexGrad, JacobiansAreHolomorphic) {
  // jacrev = jacfwd = df/dz for holomorphic f; hessian = f''.
  auto f = [](const array& z) { return z * z * exp(z); };
  auto z = crandom(3, 10);
  std::vector<cd> want(9);
  for (int i = 0; i < 3; ++i) {
    want[i * 4] = std::exp(z[i]) * (2.0 * z[i] + z[i] * z[i]);
  }
  expect_cclose(jacrev(f)(cvec(z)), want, 1e-5, "jacrev");
  expect_cclose(jacfwd(f)(cvec(z)), want, 1e-5, "jacfwd");
  std::vector<cd> h(9);
  for (int i = 0; i < 3; ++i) {
    h[i * 4] = 6.0 * z[i];
  }
  expect_cclose(hessian([](const array& a) { return sum(a * a * a); })(cvec(z)),
                h, 1e-5, "hessian");
}
