// Transformation rules of Reduce (sum, prod, max, min, all, any) and
// ArgReduce: vjp and jvp against finite differences over every set of
// axes, second derivatives, exact gradients and Hessians of prod at zeros,
// ties of max and min, zero gradients of the logical and arg reductions,
// dtypes, and vmap over every input axis (and vmap of vmap).
#include <functional>
#include <string>
#include <tuple>

#include "rule_checks.h"

using namespace fluxion;
using namespace fluxion::test;
using namespace fluxion::test::rules;

namespace {

using Reduction =
    std::function<array(const array&, const std::vector<int>&, bool)>;

struct ReduceCase {
  const char* name;
  Reduction fn;
  double lo, hi;
};

std::vector<ReduceCase> smooth_reductions() {
  return {
      {"sum",
       [](const array& a, const std::vector<int>& ax, bool k) {
         return sum(a, ax, k);
       },
       -2, 2},
      {"prod",
       [](const array& a, const std::vector<int>& ax, bool k) {
         return prod(a, ax, k);
       },
       -1.5, 1.5},
      {"max",
       [](const array& a, const std::vector<int>& ax, bool k) {
         return max(a, ax, k);
       },
       -2, 2},
      {"min",
       [](const array& a, const std::vector<int>& ax, bool k) {
         return min(a, ax, k);
       },
       -2, 2},
  };
}

const std::vector<std::vector<int>>& axis_sets() {
  static const std::vector<std::vector<int>> sets = {
      {}, {0}, {1}, {2}, {-1}, {0, 2}, {1, 2}, {0, 1, 2}};
  return sets;
}

std::string axes_text(const std::vector<int>& ax) {
  std::string s = "axes (";
  for (int a : ax) {
    s += std::to_string(a) + ",";
  }
  return s + ")";
}

}  // namespace

TEST(ReduceGrad, MatchesFiniteDifferences) {
  for (auto& c : smooth_reductions()) {
    for (auto& ax : axis_sets()) {
      for (bool keep : {false, true}) {
        SCOPED_TRACE(std::string(c.name) + " " + axes_text(ax) +
                     (keep ? " keepdims" : ""));
        auto f = fn1([&](const array& a) { return c.fn(a, ax, keep); });
        grads(f, {uniform({2, 3, 4}, c.lo, c.hi)});
      }
    }
  }
}

TEST(ReduceGrad, SecondOrder) {
  for (auto& c : smooth_reductions()) {
    for (auto& ax : std::vector<std::vector<int>>{{1}, {0, 2}, {0, 1, 2}}) {
      SCOPED_TRACE(std::string(c.name) + " " + axes_text(ax));
      auto f = fn1([&](const array& a) { return c.fn(a, ax, false); });
      second_order(f, {uniform({2, 3, 4}, c.lo, c.hi)});
    }
  }
}

TEST(ReduceGrad, ProdAtZeros) {
  // The gradient is the product of the other elements, exactly, also when
  // one or more elements are zero (out / x would be nan).
  auto f = [](const array& a) { return prod(a); };
  auto g = grad(f)(array({2.0, 0.0, 3.0}, float64));
  expect_close(g, {0, 6, 0}, 0, 0, "one zero");
  g = grad(f)(array({0.0, 0.0, 3.0}, float64));
  expect_close(g, {0, 0, 0}, 0, 0, "two zeros");
  // Along one axis of a matrix, and through the jvp.
  auto m = array({1.0, 2.0, 0.0, 4.0, 5.0, 0.0}, {2, 3}, float64);
  auto rows = [](const array& a) { return prod(a, 1); };
  auto gm = vjp(rows, m, array({1.0, 10.0}, float64)).second;
  expect_close(gm, {0, 0, 2, 0, 0, 200}, 0, 0, "rows");
  auto t = jvp(rows, m, array({1.0, 1.0, 1.0, 1.0, 1.0, 1.0}, {2, 3}, float64))
               .second;
  expect_close(t, {2, 20}, 0, 0, "rows jvp");
  // The Hessian at zeros: H_ij = product of the elements other than i and
  // j, H_ii = 0.
  auto h = hessian(f)(array({2.0, 0.0, 3.0}, float64));
  expect_close(h, {0, 3, 0, 3, 0, 2, 0, 2, 0}, 0, 0, "hessian, one zero");
  h = hessian(f)(array({0.0, 0.0, 3.0}, float64));
  expect_close(h, {0, 3, 0, 3, 0, 0, 0, 0, 0}, 0, 0, "hessian, two zeros");
  // A group of one element: the empty product.
  g = grad([](const array& a) { return sum(prod(a, 1)); })(
      array({0.0, 5.0}, {2, 1}, float64));
  expect_close(g, {1, 1}, 0, 0, "single element");
}

TEST(ReduceGrad, ProdLongAxis) {
  // Several scan steps (n = 37, not a power of two), over two axes.
  auto x = uniform({37}, 0.8, 1.25);
  grads(fn1([](const array& a) { return prod(a); }), {x});
  grads(fn1([](const array& a) {
          return prod(a, {0, 2});
        }),
        {uniform({5, 2, 7}, 0.5, 1.5)});
}

TEST(ReduceGrad, MaxMinTiesShareEqually) {
  // As MLX: the cotangent is split evenly among tied extremes.
  auto x = array({1.0, 3.0, 3.0, 2.0, 3.0, -1.0}, {2, 3}, float64);
  auto g = grad([](const array& a) { return max(a); })(x);
  expect_close(g, {0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3, 0}, 1e-15, 0, "max");
  auto gr = vjp([](const array& a) { return max(a, 1); }, x,
                array({1.0, 6.0}, float64))
                .second;
  expect_close(gr, {0, 0.5, 0.5, 0, 6, 0}, 1e-15, 0, "max rows");
  auto gmin = grad([](const array& a) { return min(a); })(
      array({2.0, -1.0, -1.0}, float64));
  expect_close(gmin, {0, 0.5, 0.5}, 1e-15, 0, "min");
  // The jvp is the mean tangent of the ties, consistent with the vjp.
  auto t = jvp([](const array& a) { return max(a); }, x,
               array({9.0, 1.0, 2.0, 9.0, 6.0, 9.0}, {2, 3}, float64))
               .second;
  expect_close(t, {3.0}, 1e-15, 0, "max jvp");
}

TEST(ReduceGrad, LogicalAndArgReductionsGiveZeros) {
  auto x = uniform({2, 3});
  zero_grads(fn1([](const array& a) { return all(a, 1); }), {x}, "all");
  zero_grads(fn1([](const array& a) { return any(a); }), {x}, "any");
  zero_grads(fn1([](const array& a) { return argmax(a, 1); }), {x}, "argmax");
  zero_grads(fn1([](const array& a) { return argmin(a, 0, true); }), {x},
             "argmin");
  zero_grads(fn1([](const array& a) { return argmax(a); }), {x}, "argmax flat");
  // Integer inputs take gradients in their dtype in reverse mode (MLX:
  // the sum's cotangent broadcast back, the max's to its element); forward
  // mode pushes integer tangents through the (linear) reductions.
  auto xi = array({3, -1, 2, 0, 5, -2}, {2, 3});
  auto ti = array({1, 2, 3, 4, 5, 6}, {2, 3});
  for (auto& named : std::vector<std::tuple<
           std::string, std::function<array(const array&)>,
           std::vector<double>>>{
           {"sum", [](const array& a) { return sum(a, 0); },
            {1, 1, 1, 1, 1, 1}},
           {"max", [](const array& a) { return max(a); },
            {0, 0, 0, 0, 1, 0}}}) {
    SCOPED_TRACE(std::get<0>(named));
    // A named object, not a structured binding: clang < 16 cannot capture
    // bindings in lambdas.
    const auto& fn = std::get<1>(named);
    auto g = vjp([&](const Arrays& in) { return Arrays{fn(in[0])}; }, {xi},
                 {ones_like(fn(xi))})
                 .second[0];
    EXPECT_EQ(g.dtype(), int32);
    expect_close(g, std::get<2>(named), 0, 0);
  }
  expect_close(jvp([](const array& a) { return sum(a, 0); }, xi, ti).second,
               {5, 7, 9});
  expect_close(jvp([](const array& a) { return max(a); }, xi, ti).second, {5});
  expect_close(jvp([](const array& a) { return min(a, 1); }, xi, ti).second,
               {2, 6});
}

TEST(ReduceGrad, Dtypes) {
  // float32 stays float32; mean of float16 sums in float32 and the
  // cotangent comes back as float16.
  auto x32 = uniform({2, 3}, -1, 1, float32);
  for (auto& c : smooth_reductions()) {
    SCOPED_TRACE(c.name);
    auto f = [&](const array& a) { return c.fn(a, {1}, false); };
    auto g = vjp(f, x32, ones({2}, float32)).second;
    EXPECT_EQ(g.dtype(), float32);
    auto t = jvp(f, x32, ones_like(x32)).second;
    EXPECT_EQ(t.dtype(), float32);
  }
  auto x16 = uniform({4, 8}, -1, 1, float16);
  auto g = grad([](const array& a) { return astype(mean(a), float32); })(x16);
  ASSERT_EQ(g.dtype(), float16);
  expect_close(g, std::vector<double>(32, 1.0 / 32), 1e-3, 0, "mean f16");
  auto t = jvp([](const array& a) { return mean(a, 0); }, x16, ones_like(x16))
               .second;
  EXPECT_EQ(t.dtype(), float16);
  expect_close(t, std::vector<double>(8, 1.0), 1e-3, 0, "mean f16 jvp");
}

TEST(ReduceGrad, EmptyArrays) {
  // Sums over empty axes: zero-size cotangents; prod of an empty group is
  // 1 with nothing to differentiate.
  auto x = uniform({0, 3});
  auto g = grad([](const array& a) { return sum(a); })(x);
  EXPECT_EQ(g.shape(), Shape({0, 3}));
  auto gp =
      vjp([](const array& a) { return prod(a, 0); }, x, ones({3}, float64))
          .second;
  EXPECT_EQ(gp.shape(), Shape({0, 3}));
  auto tm = jvp([](const array& a) { return max(a, 1); }, x, x).second;
  EXPECT_EQ(tm.shape(), Shape({0}));
}

TEST(ReduceGrad, Vmap) {
  auto cases = smooth_reductions();
  cases.push_back({"all",
                   [](const array& a, const std::vector<int>& ax, bool k) {
                     return all(a > 0.0, ax, k);
                   },
                   -1, 1});
  cases.push_back({"any",
                   [](const array& a, const std::vector<int>& ax, bool k) {
                     return any(a > 0.5, ax, k);
                   },
                   -1, 1});
  cases.push_back({"mean",
                   [](const array& a, const std::vector<int>& ax, bool k) {
                     return mean(a, ax, k);
                   },
                   -1, 1});
  for (auto& c : cases) {
    for (auto& ax : std::vector<std::vector<int>>{{0}, {1}, {0, 1}, {}}) {
      for (bool keep : {false, true}) {
        SCOPED_TRACE(std::string(c.name) + " " + axes_text(ax) +
                     (keep ? " keepdims" : ""));
        vmaps(fn1([&](const array& a) { return c.fn(a, ax, keep); }), {{3, 4}},
              {floats(c.lo, c.hi)});
      }
    }
  }
  // Integer sums and products: the dtype the kernel chose is kept.
  vmaps(fn1([](const array& a) { return sum(a, 1); }), {{3, 4}}, {ints(-3, 3)});
  vmaps(fn1([](const array& a) { return mean(a, 0); }), {{3, 4}},
        {ints(-3, 3)});
}

TEST(ReduceGrad, VmapArgReduce) {
  for (int axis : {0, 1, -1}) {
    for (bool keep : {false, true}) {
      SCOPED_TRACE("axis " + std::to_string(axis) + (keep ? " keepdims" : ""));
      vmaps(fn1([&](const array& a) { return argmax(a, axis, keep); }),
            {{3, 4}}, {floats()});
      vmaps(fn1([&](const array& a) { return argmin(a, axis, keep); }),
            {{3, 4}}, {floats()});
    }
  }
  vmaps(fn1([](const array& a) { return argmax(a); }), {{3, 4}}, {floats()});
}

TEST(ReduceGrad, VmapOfGradients) {
  // Per-row gradients of prod and max equal the row-by-row ones.
  auto x = uniform({4, 5}, 0.5, 1.5);
  for (auto* f : {+[](const array& a) { return prod(a); },
                  +[](const array& a) { return max(a); },
                  +[](const array& a) { return logsumexp(a); }}) {
    auto batched = vmap(grad(UnaryFn(f)))(x);
    for (int i = 0; i < 4; ++i) {
      auto row = take(x, i, 0);
      expect_close(take(batched, i, 0),
                   to_vector<double>(grad(UnaryFn(f))(row)), 1e-12, 1e-14,
                   "row " + std::to_string(i));
    }
  }
  // Jacobians use vmap over vjp / jvp.
  auto jr = jacrev([](const array& a) { return prod(a, 1); })(x);
  auto jf = jacfwd([](const array& a) { return prod(a, 1); })(x);
  ASSERT_EQ(jr.shape(), Shape({4, 4, 5}));
  expect_close(jr, to_vector<double>(jf), 1e-12, 1e-14, "jacobians");
}
