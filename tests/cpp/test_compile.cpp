// compile: results equal eager evaluation, the cache retraces exactly when
// it should, simplification and fusion shape the graph as documented, and
// transformations see through compiled functions.
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>

#include "transform_checks.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

array gelu(const array& x) {
  return 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));
}

Fn gelu_fn() {
  return [](const std::vector<array>& x) {
    return std::vector<array>{gelu(x[0])};
  };
}

array randn(const Shape& s, unsigned seed, Dtype t = float32) {
  std::mt19937 gen(seed);
  return random_like(zeros(s, t), gen);
}

// The primitive names in the graph of `a` (compiled nodes print their
// fused primitives).
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

}  // namespace

TEST(Compile, GeluMatchesEagerAndFuses) {
  auto x = randn({1000}, 1);
  auto f = compile(gelu_fn());
  auto out = f({x})[0];
  std::string g = graph_of(out);
  EXPECT_EQ(count(g, "= Compiled"), 1) << g;
  EXPECT_EQ(count(g, "Tanh"), 1) << g;  // only inside the fused node
  expect_close(out, to_vector<double>(gelu(x)), 1e-5, 1e-6);
}

TEST(Compile, RetracesOnlyOnNewSignatures) {
  int calls = 0;
  auto f = compile([&](const std::vector<array>& x) {
    ++calls;
    return std::vector<array>{exp(x[0]) + x[0]};
  });
  f({randn({3}, 1)});
  f({randn({3}, 2)});
  EXPECT_EQ(calls, 1);
  f({randn({4}, 3)});  // new shape
  EXPECT_EQ(calls, 2);
  f({randn({3}, 4, float64)});  // new dtype
  EXPECT_EQ(calls, 3);
  f({randn({3}, 5)});
  EXPECT_EQ(calls, 3);
}

TEST(Compile, ShapelessReusesTheTrace) {
  int calls = 0;
  auto f = compile(
      [&](const std::vector<array>& x) {
        ++calls;
        return std::vector<array>{sigmoid(x[0]) * x[1] + 1.0f};
      },
      /*shapeless=*/true);
  for (int n : {2, 5, 17}) {
    auto a = randn({n, 3}, n);
    auto b = randn({3}, n + 1);
    auto out = f({a, b})[0];
    EXPECT_EQ(out.shape(), (Shape{n, 3}));
    expect_close(out, to_vector<double>(sigmoid(a) * b + 1.0f));
  }
  EXPECT_EQ(calls, 1);
  f({randn({2, 3, 4}, 9), randn({4}, 10)});  // new ndim
  EXPECT_EQ(calls, 2);
}

TEST(Compile, ShapelessRejectsFixedShapes) {
  auto f = compile(
      [](const std::vector<array>& x) {
        return std::vector<array>{slice(x[0], {0, 1}, {2, 3})};
      },
      true);
  expect_error<std::invalid_argument>(
      [&] {
        f({randn({2, 3}, 1)});
      },
      "[compile] Cannot compile with "
      "shapeless=True: the primitive Slice");
}

TEST(Compile, CommonSubexpressionsAndConstantsMerge) {
  auto f = compile([](const std::vector<array>& x) {
    auto a = exp(x[0]) * 2.0f;
    auto b = exp(x[0]) * 2.0f;  // same as a
    return std::vector<array>{a + b, sum(a), sum(b)};
  });
  auto x = randn({8}, 3);
  auto outs = f({x});
  std::ostringstream os;
  print_graph(os, outs);
  // One exp survives (inside a fused node or alone), one Sum per output.
  EXPECT_EQ(count(os.str(), "Exp"), 1) << os.str();
  expect_close(outs[0], to_vector<double>(exp(x) * 4.0f));
  expect_close(outs[1], to_vector<double>(sum(exp(x) * 2.0f)));
}

TEST(Compile, OutputsUsedOutsideStayMaterialized) {
  auto f = compile([](const std::vector<array>& x) {
    auto a = exp(x[0]) + 1.0f;  // needed outside the fused region
    auto b = a * a + x[0];
    return std::vector<array>{b, sum(a)};
  });
  auto x = randn({64}, 4);
  auto outs = f({x});
  auto a = exp(x) + 1.0f;
  expect_close(outs[0], to_vector<double>(a * a + x));
  expect_close(outs[1], to_vector<double>(sum(a)), 1e-5, 1e-4);
}

TEST(Compile, MixedGraphWithReductionsAndMatmul) {
  auto f = compile([](const std::vector<array>& x) {
    auto h = tanh(matmul(x[0], x[1]) + x[2]);
    auto n = h - mean(h, -1, true);
    return std::vector<array>{n / sqrt(mean(square(n), -1, true) + 1e-5f)};
  });
  auto a = randn({16, 32}, 1), w = randn({32, 8}, 2), b = randn({8}, 3);
  auto expected = [&] {
    auto h = tanh(matmul(a, w) + b);
    auto n = h - mean(h, -1, true);
    return n / sqrt(mean(square(n), -1, true) + 1e-5f);
  }();
  expect_close(f({a, w, b})[0], to_vector<double>(expected), 1e-4, 1e-5);
}

TEST(Compile, StridedAndBroadcastInputs) {
  auto f = compile([](const std::vector<array>& x) {
    return std::vector<array>{exp(x[0]) * x[1] - x[0]};
  });
  auto base = randn({6, 5}, 7);
  auto t = transpose(base);  // strided
  auto b = randn({5, 1}, 8);
  auto out = f({t, broadcast_to(b, {5, 6})})[0];
  expect_close(out, to_vector<double>(exp(t) * b - t));
}

TEST(Compile, EveryDtypeOfAddAndCompare) {
  for (Dtype t : {bool_, uint8, uint16, uint32, uint64, int8, int16, int32,
                  int64, float16, bfloat16, float32, float64}) {
    SCOPED_TRACE(t);
    auto a = astype(randn({33}, 1) * 3.0f, t);
    auto b = astype(randn({33}, 2) * 3.0f, t);
    auto f = compile([](const std::vector<array>& x) {
      auto s = maximum(x[0], x[1]);
      return std::vector<array>{
          where(greater(x[0], x[1]), s, minimum(x[0], x[1])),
          astype(equal(s, x[0]), float32) * 2.0f};
    });
    auto outs = f({a, b});
    auto s = maximum(a, b);
    EXPECT_EQ(to_vector<double>(outs[0]),
              to_vector<double>(where(greater(a, b), s, minimum(a, b))));
    EXPECT_EQ(to_vector<double>(outs[1]),
              to_vector<double>(astype(equal(s, a), float32) * 2.0f));
  }
}

TEST(Compile, GradAndVmapThroughCompiled) {
  auto f = compile(gelu_fn());
  auto x = randn({5}, 11, float64);
  check_grads(f, {x}, 1e-6);
  check_grads(compile([f](const std::vector<array>& in) {
                return std::vector<array>{sum(f(in)[0] * in[0])};
              }),
              {x}, 1e-6);
  auto batched = randn({3, 5}, 12, float64);
  check_vmap(f, {batched}, {0}, 0, 1e-9);
  // compile of a grad
  auto loss = [](const std::vector<array>& v) { return sum(gelu(v[0])); };
  auto g = compile(grad(loss, std::vector<int>{0}));
  auto eager = grad(loss, std::vector<int>{0})({x})[0];
  expect_close(g({x})[0], to_vector<double>(eager), 1e-12, 1e-12);
}

TEST(Compile, DisabledCompileRunsEagerly) {
  int calls = 0;
  auto f = compile([&](const std::vector<array>& x) {
    ++calls;
    return std::vector<array>{exp(x[0]) + 1.0f};
  });
  disable_compile();
  auto x = randn({4}, 3);
  f({x});
  f({x});
  enable_compile();
  EXPECT_EQ(calls, 2);
  expect_close(f({x})[0], to_vector<double>(exp(x) + 1.0f));
}

TEST(Compile, FallsBackWithoutACompiler) {
  auto dir = std::filesystem::temp_directory_path() / "fluxion-nocc";
  setenv("FLUXION_CACHE_DIR", dir.c_str(), 1);
  setenv("FLUXION_CXX", "/nonexistent/c++", 1);
  // A kernel no other test made (so it is not loaded yet in this process).
  auto f = compile([](const std::vector<array>& x) {
    return std::vector<array>{cos(x[0]) * 3.5f - sin(x[0]) * 1.25f};
  });
  auto x = randn({100}, 5);
  auto out = f({x})[0];
  unsetenv("FLUXION_CXX");
  unsetenv("FLUXION_CACHE_DIR");
  expect_close(out, to_vector<double>(cos(x) * 3.5f - sin(x) * 1.25f));
}

TEST(Compile, ConcurrentCallsFromThreads) {
  auto f = compile(gelu_fn());
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto x = randn({257}, 20 + t);
      for (int i = 0; i < 10; ++i) {
        auto out = to_vector<float>(f({x})[0]);
        auto ref = to_vector<float>(gelu(x));
        bool same = true;
        for (size_t k = 0; k < out.size(); ++k) {
          same = same &&
                 std::abs(out[k] - ref[k]) <= 1e-5f * (1 + std::abs(ref[k]));
        }
        ok[t] += same;
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  EXPECT_EQ(ok, (std::vector<int>{10, 10, 10, 10}));
}

TEST(Compile, SlicedInputsTakeTheStridedPath) {
  auto f = compile(gelu_fn());
  auto x = randn({3, 4, 3}, 30);
  for (int i = 0; i < 3; ++i) {
    auto s = slice(x, {0, 0, i}, {3, 4, i + 1});
    s = reshape(s, {3, 4});  // a strided view with an offset
    expect_close(f({s})[0], to_vector<double>(gelu(s)), 1e-5, 1e-6);
    auto t = transpose(slice(x, {0, 0, i}, {3, 4, i + 1}), {2, 1, 0});
    expect_close(f({t})[0], to_vector<double>(gelu(t)), 1e-5, 1e-6);
  }
}

// The generated float32 exp, tanh and sigmoid against eager (SLEEF/libm)
// over a wide grid and the special values.
TEST(Compile, GeneratedTranscendentalsAreAccurate) {
  std::vector<float> v;
  for (float x = -120.0f; x <= 120.0f; x += 0.0137f) {
    v.push_back(x);
  }
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-8f, 0.2999f, 0.3f, 0.3001f,
                  88.7f, 88.73f, -87.2f, -103.9f, -104.0f, 1e30f, -1e30f}) {
    v.push_back(x);
  }
  v.push_back(std::numeric_limits<float>::infinity());
  v.push_back(-std::numeric_limits<float>::infinity());
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  array x(v.begin(), {static_cast<int>(v.size())});
  auto one = array(1.0f);
  for (auto name_op_ : std::vector<std::pair<const char*, UnaryFn>>{
           {"exp", [](const array& a) { return exp(a); }},
           {"tanh", [](const array& a) { return tanh(a); }},
           {"sigmoid", [](const array& a) { return sigmoid(a); }}}) {
    [[maybe_unused]] auto& name = std::get<0>(name_op_);
    [[maybe_unused]] auto& op = std::get<1>(name_op_);
    SCOPED_TRACE(name);
    auto f = compile([op](const std::vector<array>& in) {
      return std::vector<array>{op(in[0] * in[1])};  // two ops: fused
    });
    auto got = f({x, one})[0];
    EXPECT_NE(graph_of(got).find("Compiled"), std::string::npos);
    // Relative 1e-6, and absolute 1e-37 for results near underflow.
    expect_close(got, to_vector<double>(op(x)), 1e-6, 1e-37);
  }
}

// A compiled function that closes over a tracer of an enclosing grad or
// vmap sees it as a constant for that call only (never cached), so the
// enclosing transformation stays right.
TEST(Compile, ClosingOverOuterTracers) {
  auto x = randn({4}, 40, float64);
  auto w = randn({4}, 41, float64);
  auto loss = [&](const std::vector<array>& p) {
    auto f = compile([&](const std::vector<array>& in) {
      return std::vector<array>{tanh(in[0] * p[0]) + p[0]};
    });
    return sum(f({x})[0]);
  };
  auto g = grad(loss, std::vector<int>{0})({w})[0];
  auto expected = grad(
      [&](const std::vector<array>& p) { return sum(tanh(x * p[0]) + p[0]); },
      std::vector<int>{0})({w})[0];
  expect_close(g, to_vector<double>(expected), 1e-12, 1e-12);
  // vmap over the captured array.
  auto ws = randn({3, 4}, 42, float64);
  auto v = vmap(
      [&](const std::vector<array>& p) {
        auto f = compile([&](const std::vector<array>& in) {
          return std::vector<array>{exp(in[0] * p[0]) * 2.0};
        });
        return f({x});
      },
      {0})({ws})[0];
  expect_close(v, to_vector<double>(exp(x * ws) * 2.0), 1e-12, 1e-12);
}

// Reshapes feeding a fused group are absorbed: a dense input is read in
// the output's order; a strided one is evaluated node by node.
TEST(Compile, ReshapesFeedingAGroupAreAbsorbed) {
  auto f = compile([](const std::vector<array>& x) {
    auto r = reshape(x[0], {4, 6});
    return std::vector<array>{exp(r) * x[1] + r};
  });
  auto a = randn({2, 3, 4}, 50);
  auto b = randn({4, 6}, 51);
  auto out = f({a, b})[0];
  auto g = graph_of(out);
  EXPECT_EQ(count(g, "Reshape"), 1) << g;  // only inside the Compiled node
  EXPECT_NE(g.find("CompiledReshape"), std::string::npos) << g;
  auto ref = [&](const array& x) {
    auto r = reshape(x, {4, 6});
    return exp(r) * b + r;
  };
  expect_close(out, to_vector<double>(ref(a)));
  // A strided input (transposed): the fallback path, same values.
  auto t = transpose(randn({4, 3, 2}, 52));
  expect_close(f({t, b})[0], to_vector<double>(ref(t)));
  // Strided partner, dense reshaped input: the strided kernel.
  auto bt = transpose(randn({6, 4}, 53));
  auto out2 = f({a, bt})[0];
  auto r = reshape(a, {4, 6});
  expect_close(out2, to_vector<double>(exp(r) * bt + r));
}
