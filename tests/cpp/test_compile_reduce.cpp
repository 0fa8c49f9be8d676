// compile fusing reductions with their elementwise neighbours on the CPU
// (fuse_reductions): the fused graph's nodes, values against eager
// evaluation, and transformations through a fused reduction.
#include <random>
#include <sstream>

#include "transform_checks.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

array randn(const Shape& s, unsigned seed, Dtype t = float32) {
  std::mt19937 gen(seed);
  return random_like(zeros(s, t), gen);
}

std::string graph_of(const array& a) {
  std::ostringstream os;
  print_graph(os, {a});
  return os.str();
}

int count(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t p = text.find(word); p != std::string::npos;
       p = text.find(word, p + 1)) {
    ++n;
  }
  return n;
}

array softmax_composed(const array& x) {
  auto e = exp(x - max(x, -1, true));
  return e / sum(e, -1, true);
}

Fn softmax_fn() {
  return [](const std::vector<array>& x) {
    return std::vector<array>{softmax_composed(x[0])};
  };
}

}  // namespace

TEST(CompileReduce, PrologueAndRowReductionFuse) {
  auto f = compile([](const std::vector<array>& x) {
    return std::vector<array>{sum(exp(x[0] - 1.0f) * x[1], -1)};
  });
  auto a = randn({7, 300}, 1), b = randn({7, 300}, 2);
  auto out = f({a, b})[0];
  std::string g = graph_of(out);
  EXPECT_EQ(count(g, "= Compiled"), 1) << g;
  EXPECT_EQ(count(g, "ExpMultiplySum"), 1) << g;
  EXPECT_EQ(count(g, "= Sum"), 0) << g;
  expect_close(out, to_vector<double>(sum(exp(a - 1.0f) * b, -1)), 1e-6,
               1e-6);
}

TEST(CompileReduce, TotalFusesItsPrologue) {
  auto f = compile([](const std::vector<array>& x) {
    return std::vector<array>{mean(square(x[0] - x[1]))};
  });
  auto a = randn({300, 500}, 3), b = randn({300, 500}, 4);
  auto out = f({a, b})[0];
  std::string g = graph_of(out);
  EXPECT_EQ(count(g, "CompiledSubtractSquareSum"), 1) << g;
  EXPECT_EQ(count(g, "= Sum"), 0) << g;
  // Contiguous inputs: the eager chunks and fold order, bit for bit.
  EXPECT_EQ(to_vector<float>(out), to_vector<float>(mean(square(a - b))));
}

TEST(CompileReduce, SoftmaxIsOneKernel) {
  auto f = compile(softmax_fn());
  for (auto t : {float32, float16, bfloat16, float64}) {
    auto x = randn({9, 130}, 5, t);
    auto out = f({x})[0];
    std::string g = graph_of(out);
    EXPECT_EQ(count(g, "= Compiled"), 1) << g;
    EXPECT_EQ(count(g, "CompiledMaxBroadcastSubtractExpSumBroadcastDivide"),
              1)
        << g;
    double tol = t == float32 ? 1e-6 : t == float64 ? 1e-14 : 1e-2;
    expect_close(out, to_vector<double>(softmax_composed(x)), tol, tol);
  }
  // Strided rows (a transpose) and a size-0 batch.
  auto xt = transpose(randn({40, 24}, 6));
  expect_close(f({xt})[0], to_vector<double>(softmax_composed(xt)), 1e-6,
               1e-7);
  auto empty = zeros({0, 5});
  EXPECT_EQ(f({empty})[0].shape(), (Shape{0, 5}));
}

TEST(CompileReduce, SharedPrologueIsComputedOnce) {
  // A prologue read by a column and a row reduction: the column group
  // (formed first: its root comes first) writes it as a second output,
  // which the row reduction reads; the row group could not take it (its
  // other reader comes before the row's root).
  auto f = compile([](const std::vector<array>& x) {
    auto p = exp(x[0]) * 2.0f;
    return std::vector<array>{sum(p, 0) , sum(p, -1)};
  });
  auto a = randn({6, 10}, 7);
  auto outs = f({a});
  EXPECT_EQ(count(graph_of(outs[0]), "= Sum"), 0) << graph_of(outs[0]);
  EXPECT_EQ(count(graph_of(outs[1]), "= Sum"), 1) << graph_of(outs[1]);
  EXPECT_EQ(count(graph_of(outs[1]), "= Compiled"), 1) << graph_of(outs[1]);
  expect_close(outs[0], to_vector<double>(sum(exp(a) * 2.0f, 0)), 1e-6, 1e-6);
  expect_close(outs[1], to_vector<double>(sum(exp(a) * 2.0f, -1)), 1e-6, 1e-6);
}

TEST(CompileReduce, GradAndVmapReplayTheFusedNodes) {
  auto f = compile(softmax_fn());
  auto x = randn({4, 6}, 8, float64);
  check_grads(compile([f](const std::vector<array>& in) {
                return std::vector<array>{sum(f(in)[0] * in[0])};
              }),
              {x}, 1e-6);
  check_vmap(f, {randn({3, 4, 6}, 9, float64)}, {0}, 0, 1e-12);
}

TEST(CompileReduce, SqueezedRowValuesAndOneDimMeans) {
  // var without keepdims: the mean's squeeze and the per-row divide join
  // the row kernel; values equal eager (same fold order, contiguous rows).
  auto f = compile([](const std::vector<array>& x) {
    return std::vector<array>{var(x[0], -1)};
  });
  auto a = randn({12, 70}, 10);
  auto out = f({a})[0];
  std::string g = graph_of(out);
  EXPECT_EQ(count(g, "SquareSumSqueezeBroadcastDivide"), 1) << g;
  EXPECT_EQ(to_vector<float>(out), to_vector<float>(var(a, -1)));
  // A 1-D mean: the total keeps its divide in fx_finish.
  auto m = compile([](const std::vector<array>& x) {
    return std::vector<array>{mean(square(x[0] - x[1]))};
  });
  auto u = randn({300000}, 11), v = randn({300000}, 12);
  auto r = m({u, v})[0];
  EXPECT_EQ(count(graph_of(r), "CompiledSubtractSquareSumSqueezeDivide"), 1)
      << graph_of(r);
  EXPECT_EQ(to_vector<float>(r), to_vector<float>(mean(square(u - v))));
}

TEST(CompileReduce, ShapelessGroupsServeEveryShape) {
  // One fused node, one generated kernel, at every shape a shapeless trace
  // is replayed with: the kernels take the sizes from the call.
  int traces = 0;
  auto f = compile(
      [&traces](const std::vector<array>& x) {
        ++traces;
        return std::vector<array>{softmax_composed(x[0])};
      },
      /*shapeless=*/true);
  auto before = detail::compiled_fallbacks();
  for (Shape s : {Shape{9, 130}, Shape{3, 7}, Shape{20, 1}, Shape{0, 5},
                  Shape{2, 70000}}) {
    auto x = randn(s, 13);
    auto out = f({x})[0];
    std::string g = graph_of(out);
    EXPECT_EQ(count(g, "= Compiled"), 1) << g;
    EXPECT_EQ(count(g, "= Max"), 0) << g;
    expect_close(out, to_vector<double>(softmax_composed(x)), 1e-6, 1e-7);
  }
  // mean's divisor is counted on each call.
  auto m = compile(
      [](const std::vector<array>& x) {
        return std::vector<array>{mean(x[0] * x[1], 0)};
      },
      /*shapeless=*/true);
  for (Shape s : {Shape{64, 8}, Shape{5, 30}, Shape{1, 3}}) {
    auto a = randn(s, 14), b = randn(s, 15);
    expect_close(m({a, b})[0], to_vector<double>(mean(a * b, 0)), 1e-6,
                 1e-6);
  }
  EXPECT_EQ(traces, 1);
  EXPECT_EQ(detail::compiled_fallbacks(), before);
  // A per-row input traced (N, 1) and replayed (N, R) breaks the group:
  // its nodes run one by one, with eager's values.
  auto g = compile(
      [](const std::vector<array>& x) {
        return std::vector<array>{softmax_composed(x[0] - x[1])};
      },
      /*shapeless=*/true);
  auto a = randn({4, 8}, 16);
  expect_close(g({a, randn({4, 1}, 17)})[0],
               to_vector<double>(softmax_composed(a - randn({4, 1}, 17))),
               1e-6, 1e-7);
  EXPECT_EQ(detail::compiled_fallbacks(), before);
  auto b = randn({4, 8}, 18);
  expect_close(g({a, b})[0], to_vector<double>(softmax_composed(a - b)), 1e-6,
               1e-7);
  EXPECT_GT(detail::compiled_fallbacks(), before);
}
