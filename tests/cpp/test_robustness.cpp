// Crashes and large arrays (issue 11, section 4): destroying deep graphs
// with shared inputs, allocations that cannot be satisfied, and errors in
// kernels that must reach the caller without taking the process down.
#include <thread>

#include "test_utils.h"

namespace fluxion::test {
namespace {

TEST(Robustness, DestroyingDeepGraphWithSharedInputs) {
  // x = x + x: every node uses its input twice.
  {
    array x({1.0f});
    for (int i = 0; i < 100000; ++i) {
      x = x + x;
    }
  }
  // Inputs shared between branches of a long chain.
  {
    array x({1.0f});
    array keep = x;
    for (int i = 0; i < 100000; ++i) {
      array y = x * 2.0f;
      x = y + y - x;
    }
  }
  // A chain through multi-output primitives (sibling groups).
  {
    array x({5.0f});
    for (int i = 0; i < 100000; ++i) {
      auto two = depends({x, x * 2.0f}, {x});
      x = two[0] + two[1];
    }
  }
  // A deep graph released on another thread (as the Python garbage
  // collector or a worker may do).
  {
    array x({1.0f});
    for (int i = 0; i < 100000; ++i) {
      x = x + x;
    }
    std::thread t([x = std::move(x)]() mutable { array gone = std::move(x); });
    t.join();
  }
  // The process still works and evaluates a shared chain exactly.
  array x({1.0f});
  for (int i = 0; i < 20; ++i) {
    x = x + x;
  }
  EXPECT_EQ(x.item<float>(), 1048576.0f);
}

TEST(Robustness, UnsatisfiableAllocationRaisesAndTheProcessGoesOn) {
  // 2 TiB: more than any machine here can give.
  auto big = zeros({1 << 20, 1 << 20}, uint16);
  auto r = reciprocal(big);
  expect_error<std::runtime_error>([&] { eval(r); }, "[malloc] Unable to");
  // The error names the size asked for.
  try {
    eval(reciprocal(big) + array(1, uint16));
    ADD_FAILURE() << "expected an error";
  } catch (const std::exception& e) {
    // zeros owns its buffer (as MLX's Full): the first allocation to fail is
    // its 2^40 uint16s (2^41 bytes); reciprocal's float32s would be 2^42.
    std::string what = e.what();
    EXPECT_TRUE(what.find("2199023255552") != std::string::npos ||
                what.find("4398046511104") != std::string::npos)
        << what;
  }
  // Consumers of the failed array do not run on garbage: they raise the
  // same error, and so does waiting on the failed array again.
  auto s = sum(astype(r, float32));
  expect_error<std::runtime_error>([&] { eval(s); }, "[malloc]");
  expect_error<std::runtime_error>([&] { eval(r); }, "[malloc]");
  // Other work is unaffected, before and after.
  auto ok = arange(10.0f) * 2.0f;
  EXPECT_EQ(sum(ok).item<float>(), 90.0f);
}

TEST(Robustness, FailedKernelOnAnotherStreamReachesTheCaller) {
  auto s2 = new_stream(Device::cpu);
  auto big = zeros({1 << 20, 1 << 20}, uint16, s2);
  auto r = reciprocal(big, s2);
  // Consumed on the default stream: the error crosses streams.
  auto y = sum(astype(r, float32));
  expect_error<std::runtime_error>([&] { eval(y); }, "[malloc]");
  async_eval({reciprocal(big, s2)});
  expect_error<std::runtime_error>([&] { synchronize(s2); }, "[malloc]");
  // The stream keeps working.
  auto z = add(array({1.0f, 2.0f}), array(1.0f), s2);
  expect_close(z, {2, 3});
}

TEST(Robustness, IndexErrorsStillReportTheirType) {
  auto a = arange(4.0f);
  auto t = take(a, array({7}), 0);
  auto u = t * 2.0f;
  expect_error<std::out_of_range>([&] { eval(u); }, "");
  expect_close(a + 1.0f, {1, 2, 3, 4});
}

}  // namespace
}  // namespace fluxion::test
