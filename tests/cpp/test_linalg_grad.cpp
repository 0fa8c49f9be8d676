// Transformation rules of the creation, matmul and random families.
//
// End to end, check_grads compares vjp, jvp and central finite differences
// and check_vmap compares vmap with a loop over slices. The rules are also
// called directly on the primitives and compared with double-precision
// loops: that pins down the values (e.g. no conjugation for complex
// operands) and exercises them without the rules of other families.
//
// The rules of the other families' primitives land on their own branches.
// A test whose function also goes through one of those (a broadcast,
// transpose, sum...) skips, naming the missing rule, until it is there; a
// missing rule of this family's primitives is a failure.
#include <algorithm>
#include <complex>
#include <random>
#include <string>

#include "transform_checks.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

using cdouble = std::complex<double>;

array randn(const Shape& shape, unsigned seed, Dtype t = float64) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) {
    x = d(gen);
  }
  return astype(array(v.begin(), shape), t);
}

array randc(const Shape& shape, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<complex64_t> v(shape_size(shape));
  for (auto& x : v) {
    x = complex64_t(d(gen), d(gen));
  }
  return array(v.begin(), shape);
}

template <typename T>
std::vector<T> values(const array& a);
template <>
std::vector<double> values<double>(const array& a) {
  return to_vector<double>(a);
}
template <>
std::vector<cdouble> values<cdouble>(const array& a) {
  auto v = to_vector<complex64_t>(a);
  return std::vector<cdouble>(v.begin(), v.end());
}

// (batch, m, k) @ (batch, k, n), each operand optionally read transposed
// in its last two dims (so x^T is stored as (batch, k, m)).
template <typename T>
std::vector<T> ref_bmm(const std::vector<T>& a, const std::vector<T>& b,
                       int batch, int m, int k, int n, bool ta = false,
                       bool tb = false) {
  std::vector<T> out(static_cast<size_t>(batch) * m * n, T(0));
  for (int p = 0; p < batch; ++p) {
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        T s(0);
        for (int l = 0; l < k; ++l) {
          T x = ta ? a[(p * k + l) * m + i] : a[(p * m + i) * k + l];
          T y = tb ? b[(p * n + j) * k + l] : b[(p * k + l) * n + j];
          s += x * y;
        }
        out[(p * m + i) * n + j] = s;
      }
    }
  }
  return out;
}

template <typename T>
void expect_values(const array& a, const std::vector<T>& expected, double tol,
                   const std::string& what) {
  auto got = values<T>(a);
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::abs(got[i] - expected[i]), tol * (1 + std::abs(expected[i])))
        << what << " at " << i;
  }
}

std::vector<double> axpby(double x, const std::vector<double>& a, double y,
                          const std::vector<double>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    out[i] = x * a[i] + (b.empty() ? 0.0 : y * b[i]);
  }
  return out;
}

Fn mm = [](const std::vector<array>& in) {
  return std::vector<array>{matmul(in[0], in[1])};
};

Shape with_axis(Shape s, int axis, int n) {
  s.insert(s.begin() + axis, n);
  return s;
}

}  // namespace

// --- matmul: end to end ---

TEST(LinalgGradMatmul, TwoD) {
  check_grads(mm, {randn({3, 4}, 1), randn({4, 5}, 2)});
  check_grads(mm, {randn({1, 7}, 3), randn({7, 1}, 4)});
}

TEST(LinalgGradMatmul, EqualBatchDims) {
  check_grads(mm, {randn({2, 3, 4}, 1), randn({2, 4, 5}, 2)});
  check_grads(mm, {randn({2, 2, 3, 4}, 3), randn({2, 2, 4, 1}, 4)});
}

TEST(LinalgGradMatmul, OneArgnum) {
  check_grads(mm, {randn({3, 4}, 1), randn({4, 5}, 2)}, 1e-6, 1e-6, {0});
  check_grads(mm, {randn({3, 4}, 1), randn({4, 5}, 2)}, 1e-6, 1e-6, {1});
}

// Transposed and strided views as the primals: the rules read them through
// their strides like the kernel does.
TEST(LinalgGradMatmul, TransposedInputs) {
  auto at = transpose(randn({4, 3}, 1));
  auto bt = transpose(randn({5, 4}, 2));
  eval(at, bt);
  ASSERT_FALSE(at.flags().row_contiguous);
  check_grads(mm, {at, bt});
  auto a3 = swapaxes(randn({2, 4, 3}, 3), 1, 2);
  auto b3 = slice(randn({2, 8, 5}, 4), {0, 0, 0}, {2, 8, 5}, {1, 2, 1});
  check_grads(mm, {a3, b3});
}

TEST(LinalgGradMatmul, TransposeInsideFunction) {
  Fn f = [](const std::vector<array>& in) {
    return std::vector<array>{matmul(transpose(in[0]), swapaxes(in[1], 0, 1))};
  };
  check_grads(f, {randn({4, 3}, 1), randn({5, 4}, 2)});
}

// Broadcast batch dims: the cotangents are summed back to each primal's
// shape (by the vjp of the broadcast view that matmul inserts).
TEST(LinalgGradMatmul, BroadcastBatchDims) {
  {
    {
      check_grads(mm, {randn({2, 1, 3, 4}, 1), randn({5, 4, 2}, 2)});
      check_grads(mm, {randn({3, 4}, 3), randn({2, 4, 5}, 4)});
      auto out_g_ = vjp(mm, {randn({3, 4}, 5), randn({2, 4, 5}, 6)},
                        {randn({2, 3, 5}, 7)});
      [[maybe_unused]] auto& out = std::get<0>(out_g_);
      [[maybe_unused]] auto& g = std::get<1>(out_g_);
      EXPECT_EQ(g[0].shape(), (Shape{3, 4}));
      EXPECT_EQ(g[1].shape(), (Shape{2, 4, 5}));
    }
  }
}

TEST(LinalgGradMatmul, OneDOperands) {
  {
    {
      check_grads(mm, {randn({4}, 1), randn({4, 5}, 2)});
      check_grads(mm, {randn({3, 4}, 3), randn({4}, 4)});
      check_grads(mm, {randn({4}, 5), randn({4}, 6)});
      check_grads(mm, {randn({2, 3, 4}, 7), randn({4}, 8)});
      check_grads(mm, {randn({4}, 9), randn({2, 4, 3}, 10)});
    }
  }
}

// --- matmul: the rules called directly ---

TEST(LinalgGradMatmul, DirectRulesMatchLoops) {
  const int B = 2, M = 3, K = 4, N = 5;
  auto a = randn({B, M, K}, 1);
  auto b = randn({B, K, N}, 2);
  auto out = matmul(a, b);
  auto& p = out.primitive();
  auto ct = randn({B, M, N}, 3);
  auto av = values<double>(a), bv = values<double>(b);
  auto cv = values<double>(ct);

  auto g = p.vjp({a, b}, {ct}, {0, 1}, {out});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].shape(), a.shape());
  EXPECT_EQ(g[1].shape(), b.shape());
  expect_values(g[0], ref_bmm(cv, bv, B, M, N, K, false, true), 1e-12,
                "ct @ b^T");
  expect_values(g[1], ref_bmm(av, cv, B, K, M, N, true, false), 1e-12,
                "a^T @ ct");
  // One entry per argnum, in argnums' order.
  auto g1 = p.vjp({a, b}, {ct}, {1}, {out});
  ASSERT_EQ(g1.size(), 1u);
  expect_values(g1[0], values<double>(g[1]), 0, "vjp of b alone");

  auto ta = randn({B, M, K}, 4), tb = randn({B, K, N}, 5);
  auto tav = values<double>(ta), tbv = values<double>(tb);
  auto both = p.jvp({a, b}, {ta, tb}, {0, 1});
  ASSERT_EQ(both.size(), 1u);
  auto expected =
      axpby(1, ref_bmm(tav, bv, B, M, K, N), 1, ref_bmm(av, tbv, B, M, K, N));
  expect_values(both[0], expected, 1e-12, "ta @ b + a @ tb");
  auto only_b = p.jvp({a, b}, {tb}, {1});
  expect_values(only_b[0], ref_bmm(av, tbv, B, M, K, N), 1e-12, "a @ tb");
  EXPECT_EQ(only_b[0].dtype(), float64);
}

// Complex operands: the rules are the holomorphic derivatives, without
// conjugation (JAX's convention, which the rules keep): the rule's vjp of a
// is ct @ b^T. The public vjp conjugates in and out (MLX's convention):
// ct @ b^H.
TEST(LinalgGradMatmul, ComplexHasNoConjugation) {
  const int M = 3, K = 4, N = 2;
  auto a = randc({M, K}, 1), b = randc({K, N}, 2);
  auto out = matmul(a, b);
  auto ct = randc({M, N}, 3);
  auto g = out.primitive().vjp({a, b}, {ct}, {0, 1}, {out});
  auto av = values<cdouble>(a), bv = values<cdouble>(b);
  auto cv = values<cdouble>(ct);
  EXPECT_EQ(g[0].dtype(), complex64);
  expect_values(g[0], ref_bmm(cv, bv, 1, M, N, K, false, true), 1e-5,
                "ct @ b^T");
  expect_values(g[1], ref_bmm(av, cv, 1, K, M, N, true, false), 1e-5,
                "a^T @ ct");
  auto ta = randc({M, K}, 4);
  auto t = out.primitive().jvp({a, b}, {ta}, {0});
  expect_values(t[0], ref_bmm(values<cdouble>(ta), bv, 1, M, K, N), 1e-5,
                "ta @ b");
  // Through the transformation (its graph is the Matmul node alone).
  auto gv = vjp(mm, {a, b}, {ct}).second;
  auto conj_b = bv;
  for (auto& v : conj_b) {
    v = std::conj(v);
  }
  expect_values(gv[0], ref_bmm(cv, conj_b, 1, M, N, K, false, true), 1e-5,
                "vjp(matmul) of a: ct @ b^H");
  // AddMM scales by real alpha and beta in the complex dtype.
  auto c = randc({M, N}, 5);
  auto x = addmm(c, a, b, 0.5f, -2.0f);
  auto gx = x.primitive().vjp(x.inputs(), {ct}, {1, 2}, {x});
  auto gb = ref_bmm(av, cv, 1, K, M, N, true, false);
  for (auto& v : gb) {
    v *= 0.5;
  }
  expect_values(gx[0], gb, 1e-5, "0.5 a^T @ ct");
  auto gc = cv;
  for (auto& v : gc) {
    v *= -2.0;
  }
  expect_values(gx[1], gc, 1e-6, "-2 ct");
}

// A failure inside a rule names the rule and the primitive as well as the
// op that raised it.
TEST(LinalgGradMatmul, ErrorInsideRuleNamesTheOp) {
  // The transformations add the rule and primitive to errors raised inside
  // a rule (here a custom vjp that multiplies mismatched matrices).
  auto a = randn({3, 4}, 1), b = randn({4, 5}, 2);
  auto f = custom_vjp(
      [](const std::vector<array>& x) {
        return std::vector<array>{matmul(x[0], x[1])};
      },
      [](const std::vector<array>& primals, const std::vector<array>& cts,
         const std::vector<array>&) {
        return std::vector<array>{matmul(cts[0], primals[0]), primals[1]};
      });
  expect_error<std::invalid_argument>(
      [&] {
        vjp(f, {a, b}, {randn({3, 5}, 3)});
      },
      "[vjp] In the rule of primitive CustomTransforms: [matmul] Last "
      "dimension");
}

TEST(LinalgGradMatmul, OutputShapesAndEquivalence) {
  auto a = randn({2, 3, 4}, 1), b = randn({2, 4, 5}, 2);
  auto out = matmul(a, b);
  EXPECT_EQ(out.primitive().output_shapes({a, b}),
            std::vector<Shape>{out.shape()});
  EXPECT_EQ(out.primitive().output_shapes({randn({7, 4}, 3), b}),
            std::vector<Shape>{(Shape{7, 5})});
  EXPECT_TRUE(out.primitive().is_equivalent(matmul(a, b).primitive()));
  auto c = randn({3, 5}, 3);
  auto x = addmm(c, a, b, 2.0f, 3.0f);
  EXPECT_EQ(x.primitive().output_shapes(x.inputs()),
            std::vector<Shape>{(Shape{2, 3, 5})});
  EXPECT_TRUE(x.primitive().is_equivalent(addmm(c, a, b, 2, 3).primitive()));
  EXPECT_FALSE(x.primitive().is_equivalent(addmm(c, a, b, 1, 3).primitive()));
  EXPECT_FALSE(x.primitive().is_equivalent(addmm(c, a, b, 2, 1).primitive()));
  EXPECT_FALSE(x.primitive().is_equivalent(out.primitive()));
}

// --- addmm ---

TEST(LinalgGradAddMM, AlphaBeta) {
  for (auto alpha_beta_ :
       {std::pair{1.0f, 1.0f}, std::pair{0.5f, -2.0f}, std::pair{3.0f, 0.0f}}) {
    [[maybe_unused]] auto& alpha = std::get<0>(alpha_beta_);
    [[maybe_unused]] auto& beta = std::get<1>(alpha_beta_);
    Fn f = [alpha, beta](const std::vector<array>& in) {
      return std::vector<array>{addmm(in[0], in[1], in[2], alpha, beta)};
    };
    check_grads(f, {randn({3, 5}, 1), randn({3, 4}, 2), randn({4, 5}, 3)});
    check_grads(
        f, {randn({2, 3, 5}, 4), randn({2, 3, 4}, 5), randn({2, 4, 5}, 6)});
  }
}

TEST(LinalgGradAddMM, DirectRulesMatchLoops) {
  const int M = 3, K = 4, N = 2;
  const double alpha = 0.5, beta = -1.5;
  auto a = randn({M, K}, 1), b = randn({K, N}, 2), c = randn({M, N}, 3);
  auto out = addmm(c, a, b, alpha, beta);
  auto& p = out.primitive();
  auto ct = randn({M, N}, 4);
  auto av = values<double>(a), bv = values<double>(b);
  auto cv = values<double>(ct);
  auto g = p.vjp(out.inputs(), {ct}, {0, 1, 2}, {out});
  ASSERT_EQ(g.size(), 3u);
  expect_values(g[0],
                axpby(alpha, ref_bmm(cv, bv, 1, M, N, K, false, true), 0, {}),
                1e-12, "alpha ct @ b^T");
  expect_values(g[1], axpby(alpha, ref_bmm(av, cv, 1, K, M, N, true), 0, {}),
                1e-12, "alpha a^T @ ct");
  expect_values(g[2], axpby(beta, cv, 0, {}), 1e-12, "beta ct");
  auto gc = p.vjp(out.inputs(), {ct}, {2}, {out});
  ASSERT_EQ(gc.size(), 1u);
  EXPECT_EQ(gc[0].shape(), (Shape{M, N}));

  auto ta = randn({M, K}, 5), tb = randn({K, N}, 6), tc = randn({M, N}, 7);
  auto tav = values<double>(ta), tbv = values<double>(tb);
  auto tcv = values<double>(tc);
  auto prod =
      axpby(1, ref_bmm(tav, bv, 1, M, K, N), 1, ref_bmm(av, tbv, 1, M, K, N));
  auto all = p.jvp(out.inputs(), {ta, tb, tc}, {0, 1, 2});
  expect_values(all[0], axpby(alpha, prod, beta, tcv), 1e-12, "full jvp");
  auto only_c = p.jvp(out.inputs(), {tc}, {2});
  expect_values(only_c[0], axpby(beta, tcv, 0, {}), 1e-12, "jvp of c");
  auto b_c = p.jvp(out.inputs(), {tb, tc}, {1, 2});
  expect_values(b_c[0], axpby(alpha, ref_bmm(av, tbv, 1, M, K, N), beta, tcv),
                1e-12, "jvp of b and c");
}

TEST(LinalgGradAddMM, BroadcastC) {
  Fn f = [](const std::vector<array>& in) {
    return std::vector<array>{addmm(in[0], in[1], in[2], 0.5f, 2.0f)};
  };
  {
    {
      check_grads(f, {randn({5}, 1), randn({3, 4}, 2), randn({4, 5}, 3)});
      check_grads(f, {randn({3, 1}, 4), randn({2, 3, 4}, 5), randn({4, 5}, 6)});
      check_grads(f, {randn({}, 7), randn({4}, 8), randn({4, 5}, 9)});
    }
  }
}

TEST(LinalgGradAddMM, Vmap) {
  Fn f = [](const std::vector<array>& in) {
    return std::vector<array>{addmm(in[0], in[1], in[2], 0.5f, -2.0f)};
  };
  const int B = 3;
  Shape sc{2, 5}, sa{2, 4}, sb{4, 5};
  for (int ac : {-1, 0, 1, 2}) {
    for (int aa : {-1, 0, 2}) {
      for (int ab : {-1, 1}) {
        if (ac < 0 && aa < 0 && ab < 0) {
          continue;
        }
        SCOPED_TRACE("axes " + std::to_string(ac) + " " + std::to_string(aa) +
                     " " + std::to_string(ab));
        auto mk = [&](const Shape& s, int ax, unsigned seed) {
          return randn(ax < 0 ? s : with_axis(s, ax, B), seed);
        };
        check_vmap(f, {mk(sc, ac, 1), mk(sa, aa, 2), mk(sb, ab, 3)},
                   {ac, aa, ab}, 0, 1e-10);
      }
    }
  }
  // Mapped output moved elsewhere.
  check_vmap(f, {randn({2, 5}, 4), randn({B, 2, 4}, 5), randn({4, 5}, 6)},
             {-1, 0, -1}, 2, 1e-10);
}

// --- composites ---

TEST(LinalgGradComposites, InnerOuterTensordot) {
  {
    {
      check_grads(
          [](const std::vector<array>& in) {
            return std::vector<array>{inner(in[0], in[1])};
          },
          {randn({2, 3, 4}, 1), randn({5, 4}, 2)});
      check_grads(
          [](const std::vector<array>& in) {
            return std::vector<array>{outer(in[0], in[1])};
          },
          {randn({3}, 3), randn({2, 2}, 4)});
      check_grads(
          [](const std::vector<array>& in) {
            return std::vector<array>{tensordot(in[0], in[1], 2)};
          },
          {randn({2, 3, 4}, 5), randn({3, 4, 5}, 6)});
      check_grads(
          [](const std::vector<array>& in) {
            return std::vector<array>{tensordot(in[0], in[1], {0, 2}, {2, 0})};
          },
          {randn({2, 3, 4}, 7), randn({4, 5, 2}, 8)});
    }
  }
}

// --- second order ---

// The vjp of matmul, as a function of a, b and the cotangent, is itself
// differentiated in both modes.
TEST(LinalgGradSecondOrder, GradOfGrad) {
  Fn g = [](const std::vector<array>& in) {
    return vjp(mm, {in[0], in[1]}, {in[2]}).second;
  };
  {
    {
      check_grads(g, {randn({3, 4}, 1), randn({4, 5}, 2), randn({3, 5}, 3)});
      check_grads(
          g, {randn({2, 3, 4}, 4), randn({2, 4, 5}, 5), randn({2, 3, 5}, 6)});
    }
  }
  Fn h = [](const std::vector<array>& in) {
    return jvp(mm, {in[0], in[1]}, {in[2], in[3]}).second;
  };
  check_grads(h, {randn({3, 4}, 7), randn({4, 5}, 8), randn({3, 4}, 9),
                  randn({4, 5}, 10)});
}

// x^T A x has Hessian A + A^T.
TEST(LinalgGradSecondOrder, Hessian) {
  auto A = randn({4, 4}, 1);
  auto f = [A](const array& x) { return sum(multiply(x, matmul(A, x))); };
  array hess = hessian(f)(randn({4}, 2));
  auto av = values<double>(A);
  std::vector<double> expected(16);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      expected[i * 4 + j] = av[i * 4 + j] + av[j * 4 + i];
    }
  }
  EXPECT_EQ(hess.shape(), (Shape{4, 4}));
  expect_values(hess, expected, 1e-12, "hessian");
}

// --- Jacobians ---

TEST(LinalgGradJacobians, OfMatrixProduct) {
  const int M = 3, K = 4, N = 2;
  auto A = randn({M, K}, 1);
  auto f = [A](const array& x) { return matmul(A, x); };
  auto x = randn({K, N}, 2);
  // d(A x)[m, n] / dx[k, n'] = A[m, k] (n == n').
  auto av = values<double>(A);
  std::vector<double> expected(M * N * K * N, 0.0);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      for (int k = 0; k < K; ++k) {
        expected[((m * N + n) * K + k) * N + n] = av[m * K + k];
      }
    }
  }
  auto jr = jacrev(f)(x);
  EXPECT_EQ(jr.shape(), (Shape{M, N, K, N}));
  expect_values(jr, expected, 1e-12, "jacrev");
  auto jf = jacfwd(f)(x);
  EXPECT_EQ(jf.shape(), (Shape{M, N, K, N}));
  expect_values(jf, expected, 1e-12, "jacfwd");
}

TEST(LinalgGradJacobians, OfMatrixVectorProductIsA) {
  auto A = randn({3, 4}, 1);
  auto f = [A](const array& x) { return matmul(A, x); };
  {
    {
      auto jr = jacrev(f)(randn({4}, 2));
      auto jf = jacfwd(f)(randn({4}, 3));
      EXPECT_EQ(jr.shape(), A.shape());
      EXPECT_EQ(jf.shape(), A.shape());
      expect_values(jr, values<double>(A), 1e-12, "jacrev");
      expect_values(jf, values<double>(A), 1e-12, "jacfwd");
    }
  }
}

// --- vmap ---

TEST(LinalgGradVmap, EveryAxisAndUnmapped) {
  const int B = 3;
  for (auto sa_sb_ : {std::pair{Shape{2, 4}, Shape{4, 5}},
                      std::pair{Shape{2, 2, 4}, Shape{2, 4, 1}}}) {
    [[maybe_unused]] auto& sa = std::get<0>(sa_sb_);
    [[maybe_unused]] auto& sb = std::get<1>(sa_sb_);
    for (int ia = -1; ia <= static_cast<int>(sa.size()); ++ia) {
      for (int ib = -1; ib <= static_cast<int>(sb.size()); ++ib) {
        if (ia < 0 && ib < 0) {
          continue;
        }
        SCOPED_TRACE("axes " + std::to_string(ia) + " " + std::to_string(ib) +
                     " rank " + std::to_string(sa.size()));
        auto a = randn(ia < 0 ? sa : with_axis(sa, ia, B), 1);
        auto b = randn(ib < 0 ? sb : with_axis(sb, ib, B), 2);
        check_vmap(mm, {a, b}, {ia, ib}, 0, 1e-10);
      }
    }
  }
  check_vmap(mm, {randn({2, B, 4}, 3), randn({4, 5}, 4)}, {1, -1}, 1, 1e-10);
  check_vmap(mm, {randn({2, 4}, 5), randn({4, 5, B}, 6)}, {-1, 2}, 2, 1e-10);
}

TEST(LinalgGradVmap, Complex) {
  check_vmap(mm, {randc({2, 3, 4}, 1), randc({4, 2}, 2)}, {0, -1}, 0, 1e-5);
}

// The outer vmap maps the graph that the inner vmap's rule built: with both
// maps on axis 0 that graph is Matmul nodes alone.
TEST(LinalgGradVmap, VmapOfVmap) {
  auto inner0 = vmap(mm, {0, 0}, {0});
  check_vmap(inner0, {randn({2, 3, 2, 4}, 1), randn({2, 3, 4, 5}, 2)}, {0, 0},
             0, 1e-10);
  // Inner map over axis 1 of a (size 3), b shared; outer map of size 6.
  auto inner = vmap(mm, {1, -1}, {0});
  {
    {
      check_vmap(inner, {randn({2, 3, 6, 4}, 3), randn({6, 4, 5}, 4)}, {2, 0},
                 0, 1e-10);
      check_vmap(inner, {randn({6, 2, 3, 4}, 5), randn({4, 5}, 6)}, {0, -1}, 1,
                 1e-10);
    }
  }
}

// Per-example gradients: vmap over the examples of the gradient of a loss.
TEST(LinalgGradVmap, PerExampleGradients) {
  auto W = randn({4, 3}, 1);
  auto loss = [](const std::vector<array>& in) {
    auto y = matmul(in[0], in[1]);
    return sum(multiply(y, y));
  };
  Fn per_example = [loss](const std::vector<array>& in) {
    return grad(loss, std::vector<int>{0, 1})(in);
  };
  auto x = randn({5, 2, 4}, 2);
  {
    {
      auto got = vmap(per_example, {0, -1}, {0, 0})({x, W});
      ASSERT_EQ(got.size(), 2u);
      EXPECT_EQ(got[0].shape(), (Shape{5, 2, 4}));
      EXPECT_EQ(got[1].shape(), (Shape{5, 4, 3}));
      // d/dx sum((x W)^2) = 2 (x W) W^T, d/dW = 2 x^T (x W), per example.
      auto wv = values<double>(W);
      for (int e = 0; e < 5; ++e) {
        auto xe = values<double>(take(x, e, 0));
        auto y = ref_bmm(xe, wv, 1, 2, 4, 3);
        auto gx = axpby(2, ref_bmm(y, wv, 1, 2, 3, 4, false, true), 0, {});
        auto gw = axpby(2, ref_bmm(xe, y, 1, 4, 2, 3, true), 0, {});
        expect_values(take(got[0], e, 0), gx, 1e-10, "dx " + std::to_string(e));
        expect_values(take(got[1], e, 0), gw, 1e-10, "dW " + std::to_string(e));
      }
    }
  }
}

// --- creation ---

// Arange has no inputs: the transformations never reach its rules, which
// are checked directly.
TEST(CreationGradArange, Rules) {
  auto out = arange(0.0, 5.0, 1.5, float64);
  auto& p = out.primitive();
  EXPECT_TRUE(p.vjp({}, {ones({4}, float64)}, {}, {out}).empty());
  auto t = p.jvp({}, {}, {});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].shape(), (Shape{4}));
  EXPECT_EQ(t[0].dtype(), float64);
  expect_values(t[0], std::vector<double>(4, 0.0), 0, "jvp");
  auto vo_va_ = p.vmap({}, {});
  [[maybe_unused]] auto& vo = std::get<0>(vo_va_);
  [[maybe_unused]] auto& va = std::get<1>(vo_va_);
  ASSERT_EQ(vo.size(), 1u);
  EXPECT_EQ(va, std::vector<int>{-1});
  EXPECT_EQ(vo[0].dtype(), float64);
  expect_values(vo[0], std::vector<double>{0, 1.5, 3, 4.5}, 0, "vmap");
  EXPECT_EQ(p.output_shapes({}), std::vector<Shape>{(Shape{4})});
  auto ti = arange(2, 9, 3).primitive().jvp({}, {}, {});
  EXPECT_EQ(ti[0].dtype(), int32);
  EXPECT_EQ(ti[0].shape(), (Shape{3}));
}

TEST(CreationGradArange, Equivalence) {
  auto x = arange(0.0, 5.0, 1.5, float64);
  auto& p = x.primitive();
  EXPECT_TRUE(p.is_equivalent(arange(0.0, 5.0, 1.5, float64).primitive()));
  EXPECT_FALSE(p.is_equivalent(arange(1.0, 5.0, 1.5, float64).primitive()));
  EXPECT_FALSE(p.is_equivalent(arange(0.0, 6.0, 1.5, float64).primitive()));
  EXPECT_FALSE(p.is_equivalent(arange(0.0, 5.0, 2.0, float64).primitive()));
  EXPECT_FALSE(p.is_equivalent(arange(0.0, 5.0, 1.5, float32).primitive()));
}

TEST(CreationGradArange, InsideTransformedFunctions) {
  Fn f = [](const std::vector<array>& in) {
    return std::vector<array>{
        matmul(in[0], reshape(arange(0.0, 6.0, 1.0, float64), {3, 2}))};
  };
  // The product's only traced input is x: d/dx = ct @ R^T with R constant.
  auto x = randn({2, 3}, 1);
  check_grads(f, {x});
  check_vmap(f, {randn({4, 2, 3}, 2)}, {0}, 0, 1e-10);
  check_vmap(f, {randn({2, 4, 3}, 3)}, {1}, 0, 1e-10);
}

// --- random ---

TEST(RandomGradBits, Rules) {
  auto k = random::key(7);
  auto out = random::bits({3, 5}, 2, k);
  auto& p = out.primitive();
  auto g = p.vjp({k}, {zeros({3, 5}, uint16)}, {0}, {out});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].dtype(), uint32);
  EXPECT_EQ(g[0].shape(), (Shape{2}));
  expect_values(g[0], std::vector<double>{0, 0}, 0, "vjp");
  // jvp: zeros like the output, whose shape leads with the key batch.
  auto keys = random::split(k, 4);
  auto t = p.jvp({keys}, {zeros_like(keys)}, {0});
  EXPECT_EQ(t[0].shape(), (Shape{4, 3, 5}));
  EXPECT_EQ(t[0].dtype(), uint16);
  expect_values(t[0], std::vector<double>(60, 0.0), 0, "jvp");
  EXPECT_EQ(p.output_shapes({keys}), std::vector<Shape>{(Shape{4, 3, 5})});
  EXPECT_EQ(p.output_shapes({k}), std::vector<Shape>{(Shape{3, 5})});
  // Through vjp: the key gets a zero cotangent.
  auto o_gk_ = vjp(
      [](const std::vector<array>& in) {
        return std::vector<array>{random::bits({2}, 4, in[0])};
      },
      {k}, {zeros({2}, uint32)});
  [[maybe_unused]] auto& o = std::get<0>(o_gk_);
  [[maybe_unused]] auto& gk = std::get<1>(o_gk_);
  EXPECT_EQ(gk[0].dtype(), uint32);
  expect_values(gk[0], std::vector<double>{0, 0}, 0, "vjp of the key");
}

TEST(RandomGradBits, Equivalence) {
  auto k = random::key(7);
  auto x = random::bits({3, 5}, 2, k);
  auto& p = x.primitive();
  EXPECT_TRUE(p.is_equivalent(random::bits({3, 5}, 2, k).primitive()));
  EXPECT_FALSE(p.is_equivalent(random::bits({5, 3}, 2, k).primitive()));
  EXPECT_FALSE(p.is_equivalent(random::bits({3, 5}, 4, k).primitive()));
  auto k0_k1_ = random::split(k);
  [[maybe_unused]] auto& k0 = std::get<0>(k0_k1_);
  [[maybe_unused]] auto& k1 = std::get<1>(k0_k1_);
  // The pair are rows of one split(k, 2) node (MLX): different values.
  EXPECT_FALSE(array_equal(k0, k1).item<bool>());
}

// A batch of keys draws what a loop over the keys draws.
TEST(RandomGradBits, VmapOverKeys) {
  auto keys = random::split(random::key(3), 4);
  for (int width : {1, 2, 4}) {
    Fn f = [width](const std::vector<array>& in) {
      return std::vector<array>{random::bits({3, 5}, width, in[0])};
    };
    check_vmap(f, {keys}, {0}, 0, 0);
    check_vmap(f, {transpose(keys)}, {1}, 1, 0);
  }
  // The pair (first, second) of split(key) as a mapped key.
  Fn pair = [](const std::vector<array>& in) {
    auto a_b_ = random::split(in[0]);
    [[maybe_unused]] auto& a = std::get<0>(a_b_);
    [[maybe_unused]] auto& b = std::get<1>(a_b_);
    return std::vector<array>{a, b};
  };
  check_vmap(pair, {keys}, {0}, 0, 0);
  // Nested: a (2, 4) grid of keys.
  auto grid = reshape(random::split(random::key(5), 8), {2, 4, 2});
  Fn f = [](const std::vector<array>& in) {
    return std::vector<array>{random::bits({6}, 4, in[0])};
  };
  check_vmap(vmap(f, {0}, {0}), {grid}, {0}, 0, 0);
}

TEST(RandomGradUniform, VmapOverKeys) {
  auto keys = random::split(random::key(11), 5);
  Fn f = [](const std::vector<array>& in) {
    return std::vector<array>{
        random::uniform(array(-2.0f), array(3.0f), {4, 3}, float32, in[0])};
  };
  Fn g = [](const std::vector<array>& in) {
    return std::vector<array>{random::uniform({7}, float64, in[0])};
  };
  {
    {
      check_vmap(f, {keys}, {0}, 0, 0);
      check_vmap(g, {keys}, {0}, 0, 0);
    }
  }
}

// uniform(low, high) = low + (high - low) u with u fixed by the key: the
// gradients are (1 - u) and u, summed over the dims low and high broadcast.
TEST(RandomGradUniform, GradFlowsToBounds) {
  auto k = random::key(21);
  Fn f = [k](const std::vector<array>& in) {
    return std::vector<array>{
        random::uniform(in[0], in[1], {3, 4}, float64, k)};
  };
  auto low = randn({4}, 1);
  auto high = add(randn({3, 1}, 2), array(4.0));
  auto ct = randn({3, 4}, 3);
  {
    {
      check_grads(f, {low, high});
      auto o_g_ = vjp(f, {low, high}, {ct});
      [[maybe_unused]] auto& o = std::get<0>(o_g_);
      [[maybe_unused]] auto& g = std::get<1>(o_g_);
      auto u = values<double>(random::uniform({3, 4}, float64, k));
      auto cv = values<double>(ct);
      std::vector<double> glow(4, 0.0), ghigh(3, 0.0);
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 4; ++j) {
          glow[j] += cv[i * 4 + j] * (1 - u[i * 4 + j]);
          ghigh[i] += cv[i * 4 + j] * u[i * 4 + j];
        }
      }
      EXPECT_EQ(g[0].shape(), low.shape());
      EXPECT_EQ(g[1].shape(), high.shape());
      expect_values(g[0], glow, 1e-12, "d low");
      expect_values(g[1], ghigh, 1e-12, "d high");
    }
  }
}

// normal(loc, scale) = loc + scale z with z fixed by the key.
TEST(RandomGradNormal, GradFlowsToLocAndScale) {
  auto k = random::key(5);
  Fn f = [k](const std::vector<array>& in) {
    return std::vector<array>{random::normal({3, 4}, float64, in[0], in[1], k)};
  };
  auto loc = randn({4}, 1), scale = randn({3, 1}, 2);
  auto ct = randn({3, 4}, 3);
  {
    {
      check_grads(f, {loc, scale});
      auto o_g_ = vjp(f, {loc, scale}, {ct});
      [[maybe_unused]] auto& o = std::get<0>(o_g_);
      [[maybe_unused]] auto& g = std::get<1>(o_g_);
      auto z = values<double>(random::normal({3, 4}, float64, 0.0f, 1.0f, k));
      auto cv = values<double>(ct);
      std::vector<double> gloc(4, 0.0), gscale(3, 0.0);
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 4; ++j) {
          gloc[j] += cv[i * 4 + j];
          gscale[i] += cv[i * 4 + j] * z[i * 4 + j];
        }
      }
      expect_values(g[0], gloc, 1e-12, "d loc");
      expect_values(g[1], gscale, 1e-12, "d scale");
    }
  }
}

TEST(RandomGradNormal, ArrayLocAndScale) {
  auto k = random::key(5);
  auto z = values<double>(random::normal({3, 4}, float64, 0.0f, 1.0f, k));
  auto loc = randn({4}, 1), scale = randn({3, 1}, 2);
  auto lv = values<double>(loc), sv = values<double>(scale);
  std::vector<double> expected(12);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      expected[i * 4 + j] = lv[j] + sv[i] * z[i * 4 + j];
    }
  }
  expect_values(random::normal({3, 4}, float64, loc, scale, k), expected, 1e-14,
                "loc + scale z");
  expect_values(random::normal({3, 4}, float64, std::nullopt, std::nullopt, k),
                z, 0, "defaults");
  // Same draws as the float overload, in float32 and float16.
  for (Dtype t : {float32, float16}) {
    auto want = random::normal({3, 4}, t, 0.5f, 2.0f, k);
    auto got = random::normal({3, 4}, t, array(0.5f), array(2.0f), k);
    EXPECT_EQ(got.dtype(), t);
    expect_values(got, values<double>(want), 0, "vs float overload");
  }
  expect_error<std::invalid_argument>(
      [&] {
        random::normal({3, 4}, float32, array(1), std::nullopt, k);
      },
      "[random.normal] loc must have a real floating point dtype; got int32.");
  expect_error<std::invalid_argument>(
      [&] {
        random::normal({3, 4}, float32, std::nullopt, randn({4, 1}, 3), k);
      },
      "[random.normal] scale with shape (4,1) cannot be broadcast to shape "
      "(3,4).");
  expect_error<std::invalid_argument>(
      [&] {
        random::normal({3, -1}, float32, loc, scale, k);
      },
      "[random.normal] Negative dimensions");
  expect_error<std::invalid_argument>(
      [&] {
        random::normal({3, 4}, int32, loc, scale, k);
      },
      "[random.normal] Only real floating point dtypes");
}
