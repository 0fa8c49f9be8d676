// Evaluation, streams, events, threads, memory accounting and errors raised
// by kernels.
#include <atomic>
#include <thread>

#include "fluxion/backend/cpu/thread_pool.h"

#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

// A primitive whose kernel fails, to exercise error propagation.
class Boom : public Primitive {
 public:
  using Primitive::Primitive;
  void eval_cpu(const std::vector<array>&, std::vector<array>&) override {
    throw std::out_of_range("[boom] Index 9 is out of bounds.");
  }
  // A test primitive outside the registry: no GPU kernel.
  void eval_gpu(const std::vector<array>&, std::vector<array>&) override {
    throw std::runtime_error("no gpu kernel");
  }
  const char* name() const override { return "Boom"; }
};

array boom(const array& a) {
  return array(a.shape(), a.dtype(),
               std::make_shared<Boom>(default_stream(Device::cpu)), {a});
}

array iota(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) {
    v[i] = static_cast<float>(i);
  }
  return array(v.begin(), {n});
}

}  // namespace

TEST(Eval, MultipleOutputsShareWork) {
  array a({1.0f, 2.0f, 3.0f});
  auto b = exp(a);
  auto c = b * 2.0f;
  auto d = b + 1.0f;
  eval(c, d);
  expect_close(c, {2 * std::exp(1.0), 2 * std::exp(2.0), 2 * std::exp(3.0)});
  expect_close(d, {std::exp(1.0) + 1, std::exp(2.0) + 1, std::exp(3.0) + 1});
}

TEST(Eval, WideGraph) {
  // Many independent branches exercise the width-limited BFS tape.
  array a = iota(8);
  std::vector<array> branches;
  for (int i = 0; i < 500; ++i) {
    branches.push_back(a * static_cast<float>(i));
  }
  array total = branches[0];
  for (size_t i = 1; i < branches.size(); ++i) {
    total = total + branches[i];
  }
  std::vector<double> expected;
  for (int j = 0; j < 8; ++j) {
    expected.push_back(j * (499.0 * 500.0 / 2));
  }
  expect_close(total, expected);
}

TEST(Eval, AsyncEval) {
  array a = iota(1000);
  auto b = sum(a * a);
  async_eval(b);
  EXPECT_NE(b.status(), array::Status::unscheduled);
  b.wait();
  EXPECT_TRUE(b.is_available());
  double expected = 0;
  for (int i = 0; i < 1000; ++i) {
    expected += double(i) * i;
  }
  EXPECT_NEAR(b.item<double>(), expected, 1e-6 * expected);  // float32 sum
  async_eval(std::vector<array>{});  // a no-op
}

TEST(Eval, ArrayWithoutPrimitive) {
  array orphan(Shape{2}, float32, nullptr, {});
  expect_error<std::runtime_error>(
      [&] { eval(orphan + 1.0f); },
      "[eval] Attempting to eval an array without a primitive.");
}

TEST(Eval, OtherStreams) {
  auto s2 = new_stream(Device::cpu);
  auto s3 = new_stream(Device::cpu);
  EXPECT_NE(s2, s3);
  EXPECT_EQ(s2.device, Device::cpu);
  array a = iota(1 << 16);
  // Produced on s2, consumed on s3 and the default stream in one eval:
  // fences order the streams.
  auto b = exp(a * 1e-5f, s2);
  auto c = multiply(b, b, s3);
  auto d = add(c, b);
  std::vector<double> expected;
  for (int i = 0; i < (1 << 16); ++i) {
    double e = std::exp(i * 1e-5);
    expected.push_back(e * e + e);
  }
  expect_close(d, expected, 1e-5);
  // Across evals: async on s2, consumed on s3 (events).
  auto e = sqrt(a, s2);
  async_eval(e);
  auto f = add(e, a, s3);
  auto got = to_vector<double>(f);
  EXPECT_NEAR(got[100], 100 + 10, 1e-4);
  EXPECT_NEAR(got[4], 4 + 2, 1e-5);
  synchronize(s2);
  synchronize();
}

TEST(Eval, ManyThreads) {
  array shared_input = iota(4096);
  shared_input.eval();
  std::vector<std::thread> threads;
  std::vector<double> results(8, 0.0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto s = new_stream(Device::cpu);
      for (int rep = 0; rep < 20; ++rep) {
        array x = shared_input;
        for (int i = 0; i < 50; ++i) {
          x = x * 0.5f + static_cast<float>(t);
        }
        // Alternate between the default stream and a private one.
        auto total = rep % 2 ? sum(x, false, s) : sum(x);
        results[t] = total.item<double>();
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  for (int t = 0; t < 8; ++t) {
    // x converges to 2t: each element is i/2^50 + t * (2 - 2^-49).
    double expected = 0;
    for (int i = 0; i < 4096; ++i) {
      double x = i;
      for (int k = 0; k < 50; ++k) {
        x = x * 0.5 + t;
      }
      expected += x;
    }
    EXPECT_NEAR(results[t], expected, 1e-3 * std::max(1.0, expected));
  }
}

TEST(Eval, GpuWithoutBackendIsAClearError) {
  if (is_available(Device::gpu)) {
    GTEST_SKIP() << "a GPU is visible";
  }
  EXPECT_TRUE(is_available(Device::cpu));
  expect_error<std::invalid_argument>(
      [] { set_default_device(Device::gpu); },
      "[set_default_device] Cannot set the gpu device");
  // Without a backend there is no default gpu stream to build ops on ...
  array a({1.0f, 2.0f});
  expect_error<std::invalid_argument>([&] { add(a, a, Device::gpu); },
                                      "[default_stream] Cannot get the gpu");
  // ... and a node on the gpu stream itself fails clearly at eval.
  auto b = add(a, a, Stream(1, Device::gpu));
  expect_error<std::runtime_error>([&] { b.eval(); },
                                   "[eval] Cannot run Add on the gpu");
  // The CPU keeps working afterwards.
  expect_close(a + a, {2, 4});
}

TEST(Eval, KernelErrorsReachTheCaller) {
  array a({1.0f, 2.0f});
  auto b = boom(a);
  auto c = b + 1.0f;  // downstream of the failure: computed, never read
  expect_error<std::out_of_range>([&] { c.eval(); }, "[boom] Index 9");
  // The stream is healthy afterwards.
  expect_close(a * 3.0f, {3, 6});
}

TEST(Memory, ActiveCacheAndPeak) {
  clear_cache();
  size_t base = get_active_memory();
  const int n = 1 << 20;
  {
    array a = iota(n) * 2.0f;
    a.eval();
    EXPECT_GE(get_active_memory(), base + n * 4);
  }
  // Freed into the cache, not to the system.
  EXPECT_LE(get_active_memory(), base + 256);
  EXPECT_GE(get_cache_memory(), size_t(n) * 4);
  clear_cache();
  EXPECT_EQ(get_cache_memory(), 0u);
  reset_peak_memory();
  EXPECT_EQ(get_peak_memory(), 0u);  // MLX: restarts from zero
  {
    array p = iota(n) + 2.0f;
    p.eval();
    EXPECT_GE(get_peak_memory(), size_t(n) * 4);
  }

  size_t old = set_cache_limit(0);
  {
    array a = iota(n) + 1.0f;
    a.eval();
  }
  EXPECT_EQ(get_cache_memory(), 0u);
  set_cache_limit(old);

  size_t limit = get_memory_limit();
  EXPECT_EQ(set_memory_limit(limit / 2), limit);
  EXPECT_EQ(set_memory_limit(limit), limit / 2);
}

TEST(Memory, ChainsDonateBuffers) {
  const int n = 1 << 22;
  array a = iota(n);
  a.eval();
  clear_cache();
  reset_peak_memory();
  size_t before = get_active_memory();
  array x = a;
  for (int i = 0; i < 100; ++i) {
    x = exp(x * 1e-7f) - 1.0f;
  }
  x.eval();
  double extra = double(get_peak_memory() - before) / (n * 4.0);
  // One buffer for the running result (the input a is kept by us).
  EXPECT_LE(extra, 2.01);
  EXPECT_TRUE(std::isfinite(to_vector<float>(x)[n - 1]));
}

TEST(Memory, LowMemoryLimitStillEvaluates) {
  // Over the limit, eval waits for tasks to finish; results are unchanged.
  size_t old = set_memory_limit(1 << 20);
  array a = iota(1 << 18);
  std::vector<array> outs;
  for (int i = 0; i < 20; ++i) {
    outs.push_back(a + static_cast<float>(i));
  }
  eval(outs);
  set_memory_limit(old);
  EXPECT_EQ(to_vector<float>(outs[19])[5], 24.0f);
}

TEST(Eval, EmptyStridedInputs) {
  array x(std::initializer_list<float>{}, {0, 3});
  auto y = transpose(x) + array(1.0f);
  EXPECT_EQ(y.shape(), Shape({3, 0}));
  EXPECT_EQ(to_vector<float>(y).size(), 0u);
  EXPECT_EQ(to_vector<float>(exp(transpose(x))).size(), 0u);
  EXPECT_EQ(to_vector<float>(where(transpose(x) > 0.0f, transpose(x),
                                   array(2.0f)))
                .size(),
            0u);
}

TEST(ThreadPool, ExceptionsFromChunksReachTheCaller) {
  for (int rep = 0; rep < 20; ++rep) {
    try {
      cpu::parallel_for(1 << 20, 1 << 10, [&](int64_t b, int64_t e) {
        if (b <= (1 << 19) && (1 << 19) < e) {
          throw std::out_of_range("[test] chunk failed");
        }
      });
      ADD_FAILURE() << "no exception";
    } catch (const std::out_of_range& e) {
      EXPECT_STREQ(e.what(), "[test] chunk failed");
    }
  }
  // The pool still works.
  std::atomic<int64_t> total{0};
  cpu::parallel_for(1 << 20, 1 << 10, [&](int64_t b, int64_t e) {
    total += e - b;
  });
  EXPECT_EQ(total.load(), 1 << 20);
}
