// mx.fft on the GPU (cuFFT, backend/cuda/fft.cu) against the CPU kernel on
// the same inputs: fft / ifft / rfft / irfft and their 2-D and n-D forms,
// lengths 1, 2, 7, 16, 97 (prime), 1000, 4096 and larger, every axis set of
// a 3 x 5 x 7 array, axes not last and negative, strided, transposed,
// broadcast and misaligned inputs, `n` / `s` padding and truncation, the
// batch layouts the GPU loops or transposes (fft_program.h), more than
// three axes, gradients through the GPU, more distinct shapes than the plan
// cache holds, threads with their own GPU streams, and inputs left intact by
// the C2R transforms. Results agree to float32 rounding (1e-4 of the
// largest magnitude). Skipped without a GPU.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <thread>

#include "fluxion/ops/fft.h"
#include "fluxion/transforms.h"
#include "device_scope.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

array rnd(const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(shape_size(shape));
  for (auto& x : v) x = u(gen);
  return array(v.begin(), shape, float32);
}

array crnd(const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<complex64_t> v(shape_size(shape));
  for (auto& x : v) x = complex64_t(u(gen), u(gen));
  return array(v.begin(), shape, complex64);
}

std::string shape_name(const Shape& s) {
  std::string r = "(";
  for (auto d : s) r += std::to_string(d) + ",";
  return r + ")";
}

// GPU against CPU: same dtype and shape, values within 1e-4 of the largest
// CPU magnitude (float32 transforms whose sums run in different orders).
void expect_match(array gpu, array cpu, const std::string& what,
                  double rel = 1e-4) {
  ASSERT_EQ(gpu.dtype(), cpu.dtype()) << what;
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  std::vector<double> g, c;
  if (gpu.dtype() == complex64) {
    g = to_vector<double>(real(gpu, kCpu));
    auto gi = to_vector<double>(imag(gpu, kCpu));
    g.insert(g.end(), gi.begin(), gi.end());
    c = to_vector<double>(real(cpu, kCpu));
    auto ci = to_vector<double>(imag(cpu, kCpu));
    c.insert(c.end(), ci.begin(), ci.end());
  } else {
    g = to_vector<double>(gpu);
    c = to_vector<double>(cpu);
  }
  double scale = 1;
  for (double v : c) scale = std::max(scale, std::abs(v));
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    if (!(std::abs(g[i] - c[i]) <= rel * scale)) {
      ADD_FAILURE() << what << " at " << i << ": gpu " << g[i] << ", cpu "
                    << c[i] << " (scale " << scale << ")";
      ++bad;
    }
  }
}

// f on the GPU and on the CPU.
template <typename F>
void both(const std::string& what, F&& f) {
  expect_match(f(kGpu), f(kCpu), what);
}

}  // namespace

TEST(CudaFft, OneDimensionalLengths) {
  SKIP_WITHOUT_GPU();
  for (int n : {1, 2, 3, 7, 16, 97, 1000, 1009, 4096}) {
    for (const Shape& s : {Shape{n}, Shape{5, n}, Shape{n, 3}}) {
      const std::string w = shape_name(s) + " n " + std::to_string(n);
      const int ax = s[0] == n ? 0 : 1;
      auto z = crnd(s, n);
      auto x = rnd(s, n + 1);
      both("fft " + w, [&](Device d) { return fft::fft(z, ax, d); });
      both("ifft " + w, [&](Device d) { return fft::ifft(z, ax, d); });
      both("rfft " + w, [&](Device d) { return fft::rfft(x, ax, d); });
      // irfft to n from n / 2 + 1 frequencies (an arbitrary, non-Hermitian
      // spectrum: the imaginary parts at 0 and n / 2 are ignored).
      Shape hs = s;
      hs[ax] = n / 2 + 1;
      auto h = crnd(hs, n + 2);
      both("irfft " + w, [&](Device d) { return fft::irfft(h, n, ax, d); });
      if (n > 1) {
        // The default length, 2 (m - 1).
        both("irfft default n " + w,
             [&](Device d) { return fft::irfft(h, ax, d); });
      }
    }
  }
}

TEST(CudaFft, EveryAxisSetOf3x5x7) {
  SKIP_WITHOUT_GPU();
  const Shape s{3, 5, 7};
  auto z = crnd(s, 1);
  auto x = rnd(s, 2);
  const std::vector<std::vector<int>> sets = {
      {0},    {1},       {2},       {0, 1},   {1, 2}, {0, 2},
      {2, 0}, {0, 1, 2}, {2, 1, 0}, {-1, -3}, {-2},   {1, -1, 0}};
  for (const auto& axes : sets) {
    std::string w = "axes (";
    for (int a : axes) w += std::to_string(a) + ",";
    w += ")";
    both("fftn " + w, [&](Device d) { return fft::fftn(z, axes, d); });
    both("ifftn " + w, [&](Device d) { return fft::ifftn(z, axes, d); });
    both("rfftn " + w, [&](Device d) { return fft::rfftn(x, axes, d); });
    both("irfftn " + w, [&](Device d) { return fft::irfftn(z, axes, d); });
    // s: padding one axis, truncating another, odd real lengths.
    Shape lens;
    for (size_t i = 0; i < axes.size(); ++i) {
      lens.push_back(i % 2 == 0 ? 9 : 2);
    }
    both("fftn s " + w, [&](Device d) { return fft::fftn(z, lens, axes, d); });
    both("rfftn s " + w,
         [&](Device d) { return fft::rfftn(x, lens, axes, d); });
    both("irfftn s " + w,
         [&](Device d) { return fft::irfftn(z, lens, axes, d); });
  }
  both("fft2", [&](Device d) { return fft::fft2(z, {-2, -1}, d); });
  both("ifft2", [&](Device d) { return fft::ifft2(z, {-2, -1}, d); });
  both("rfft2", [&](Device d) { return fft::rfft2(x, {-2, -1}, d); });
  both("irfft2", [&](Device d) { return fft::irfft2(z, {-2, -1}, d); });
  both("fftn all", [&](Device d) { return fft::fftn(z, d); });
  both("irfftn all", [&](Device d) { return fft::irfftn(z, d); });
}

TEST(CudaFft, PaddingAndTruncation) {
  SKIP_WITHOUT_GPU();
  auto z = crnd({4, 16}, 3);
  auto x = rnd({4, 16}, 4);
  for (int n : {1, 5, 10, 16, 20, 33}) {
    const std::string w = " n " + std::to_string(n);
    both("fft" + w, [&](Device d) { return fft::fft(z, n, -1, d); });
    both("ifft" + w, [&](Device d) { return fft::ifft(z, n, 0, d); });
    both("rfft" + w, [&](Device d) { return fft::rfft(x, n, -1, d); });
    both("rfft axis 0" + w, [&](Device d) { return fft::rfft(x, n, 0, d); });
    both("irfft" + w, [&](Device d) { return fft::irfft(z, n, -1, d); });
    both("irfft axis 0" + w, [&](Device d) { return fft::irfft(z, n, 0, d); });
  }
  both("fft2 s", [&](Device d) { return fft::fft2(z, {3, 40}, {0, 1}, d); });
  both("irfft2 s", [&](Device d) {
    return fft::irfft2(z, {7, 11}, {0, 1}, d);
  });
}

TEST(CudaFft, StridedTransposedBroadcastAndOffsetInputs) {
  SKIP_WITHOUT_GPU();
  auto z = crnd({12, 10}, 5);
  auto x = rnd({12, 10}, 6);
  auto zt = transpose(z);  // (10, 12), columns contiguous
  auto xt = transpose(x);
  both("fft transposed", [&](Device d) { return fft::fft(zt, -1, d); });
  both("fft2 transposed", [&](Device d) { return fft::fft2(zt, {0, 1}, d); });
  both("rfft transposed", [&](Device d) { return fft::rfft(xt, -1, d); });
  both("irfft transposed", [&](Device d) { return fft::irfft(zt, 0, d); });
  auto zs = slice(z, {1, 0}, {12, 10}, {2, 3});  // gapped in both axes
  auto xs = slice(x, {1, 0}, {12, 10}, {2, 3});
  both("fft strided", [&](Device d) { return fft::fft(zs, 0, d); });
  both("rfftn strided", [&](Device d) { return fft::rfftn(xs, d); });
  auto zb = broadcast_to(slice(z, {0, 0}, {1, 10}), {6, 10});  // stride 0
  auto xb = broadcast_to(slice(x, {0, 0}, {1, 10}), {6, 10});
  both("fft broadcast", [&](Device d) { return fft::fft(zb, 0, d); });
  both("rfft broadcast", [&](Device d) { return fft::rfft(xb, 0, d); });
  // Row-contiguous views at an odd float offset: real input that cuFFT
  // would get misaligned (copied first), and a complex one.
  auto flat = rnd({41}, 7);
  auto odd = slice(flat, {1}, {41});
  both("rfft at odd offset", [&](Device d) { return fft::rfft(odd, -1, d); });
  auto zodd = slice(crnd({41}, 8), {1}, {41});
  both("fft at odd offset", [&](Device d) { return fft::fft(zodd, -1, d); });
  // Inputs computed on the GPU (resident there) and float64 / integer
  // inputs (cast by the op first).
  both("fft of a gpu result",
       [&](Device d) { return fft::fft(multiply(z, array(2.0f), d), -1, d); });
  both("rfft of int32", [&](Device d) {
    return fft::rfft(astype(multiply(x, array(10.0f)), int32), -1, d);
  });
  both("fft of float64",
       [&](Device d) { return fft::fft(astype(x, float64), -1, d); });
}

TEST(CudaFft, BatchLayoutsLoopedOrTransposed) {
  SKIP_WITHOUT_GPU();
  // Axis in the middle with both sides > 1: few outer lines (looped), many
  // short lines on both sides (transposed through scratch), odd real steps
  // (transposed), long lines (looped).
  struct L {
    Shape s;
    int axis;
  };
  for (const L& l :
       {L{{8, 1000, 8}, 1}, L{{100, 7, 100}, 1}, L{{4, 5, 3}, 1},
        L{{30, 64, 33}, 1}, L{{3, 4, 300000}, 1}, L{{2, 9, 2, 3}, 2}}) {
    const std::string w = shape_name(l.s) + " axis " + std::to_string(l.axis);
    auto z = crnd(l.s, 9);
    auto x = rnd(l.s, 10);
    both("fft " + w, [&](Device d) { return fft::fft(z, l.axis, d); });
    both("ifft " + w, [&](Device d) { return fft::ifft(z, l.axis, d); });
    both("rfft " + w, [&](Device d) { return fft::rfft(x, l.axis, d); });
    both("irfft " + w, [&](Device d) { return fft::irfft(z, l.axis, d); });
    both("irfft odd n " + w, [&](Device d) {
      return fft::irfft(z, 2 * l.s[l.axis] - 1, l.axis, d);
    });
  }
  // More axes than one plan's rank, unit dims among them.
  auto z4 = crnd({4, 3, 5, 2}, 11);
  auto x4 = rnd({4, 3, 5, 2}, 12);
  both("fftn 4-d", [&](Device d) { return fft::fftn(z4, d); });
  both("ifftn 4-d", [&](Device d) { return fft::ifftn(z4, d); });
  both("rfftn 4-d", [&](Device d) { return fft::rfftn(x4, d); });
  both("irfftn 4-d", [&](Device d) { return fft::irfftn(z4, d); });
  auto z5 = crnd({2, 3, 1, 3, 2}, 13);
  both("fftn 5-d", [&](Device d) { return fft::fftn(z5, d); });
  both("irfftn 5-d", [&](Device d) {
    return fft::irfftn(z5, {3, 3, 1, 2}, {1, 2, 3, 0}, d);
  });
}

TEST(CudaFft, LargeTransforms) {
  SKIP_WITHOUT_GPU();
  auto z = crnd({1 << 22}, 14);
  both("fft 2^22", [&](Device d) { return fft::fft(z, -1, d); });
  auto p = crnd({1000003}, 15);
  both("fft prime 1000003", [&](Device d) { return fft::fft(p, -1, d); });
  both("ifft prime 1000003", [&](Device d) { return fft::ifft(p, -1, d); });
  auto x = rnd({1024, 2048}, 16);
  both("rfft2 1024 x 2048", [&](Device d) { return fft::rfft2(x, {0, 1}, d); });
  auto h = crnd({1024, 1025}, 17);
  both("irfft2 1024 x 2048", [&](Device d) {
    return fft::irfft2(h, {0, 1}, d);
  });
}

TEST(CudaFft, GradientsThroughTheGpu) {
  SKIP_WITHOUT_GPU();
  auto z = crnd({6, 10}, 18);
  auto x = rnd({6, 10}, 19);
  auto grads = [&](Device d, auto f, const array& primal, const array& ct) {
    OnDevice on(d);
    return vjp(
               [&](const std::vector<array>& a) {
                 return std::vector<array>{f(a[0], d)};
               },
               {primal}, {ct})
        .second[0];
  };
  auto check = [&](const std::string& what, auto f, const array& primal,
                   const array& ct) {
    expect_match(grads(kGpu, f, primal, ct), grads(kCpu, f, primal, ct),
                 "vjp " + what);
  };
  check(
      "fft", [](const array& a, Device d) { return fft::fft(a, -1, d); }, z,
      crnd({6, 10}, 20));
  check(
      "ifft2",
      [](const array& a, Device d) {
        return fft::ifft2(a, {0, 1}, d);
      },
      z, crnd({6, 10}, 21));
  check(
      "rfft", [](const array& a, Device d) { return fft::rfft(a, -1, d); }, x,
      crnd({6, 6}, 22));
  check(
      "rfftn odd",
      [](const array& a, Device d) {
        return fft::rfftn(a, {5, 9}, {0, 1}, d);
      },
      x, crnd({5, 5}, 23));
  check(
      "irfft", [](const array& a, Device d) { return fft::irfft(a, -1, d); }, z,
      rnd({6, 18}, 24));
  check(
      "irfftn",
      [](const array& a, Device d) {
        return fft::irfftn(a, {4, 7}, {1, 0}, d);
      },
      z, rnd({7, 4}, 25));
  // A real loss through the GPU: grad of sum |fft(x)|^2 w.
  auto w = rnd({6, 10}, 26);
  auto loss = [&](Device d) {
    OnDevice on(d);
    return grad([&](const std::vector<array>& a) {
      return sum(multiply(square(abs(fft::fft(a[0], -1, d), d), d), w, d),
                 false, d);
    })({x});
  };
  expect_match(loss(kGpu), loss(kCpu), "grad of sum |fft|^2 w");
}

TEST(CudaFft, MoreShapesThanThePlanCache) {
  SKIP_WITHOUT_GPU();
  // 80 lengths (each a plan, the cache keeps 64), then the first ones again
  // (plans made anew after eviction).
  for (int round = 0; round < 2; ++round) {
    for (int n = 2; n < 82; n += round == 0 ? 1 : 7) {
      auto z = crnd({3, n}, n);
      both("fft n " + std::to_string(n) + " round " + std::to_string(round),
           [&](Device d) { return fft::fft(z, -1, d); });
    }
  }
}

TEST(CudaFft, ThreadsWithTheirOwnGpuStreams) {
  SKIP_WITHOUT_GPU();
  // The same shapes (shared plans, each execution with its own stream and
  // work area) from four threads at once.
  std::vector<array> inputs, want;
  for (int t = 0; t < 4; ++t) {
    inputs.push_back(crnd({16, 1009}, 100 + t));
    want.push_back(fft::fft(inputs.back(), -1, kCpu));
    want.back().eval();
  }
  std::vector<array> got(4, array(0.0f));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Stream s = new_stream(kGpu);
      array y = inputs[t];
      for (int k = 0; k < 5; ++k) {
        y = fft::ifft(fft::fft(y, -1, s), -1, s);
      }
      got[t] = fft::fft(y, -1, s);
      got[t].eval();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    expect_match(got[t], want[t], "thread " + std::to_string(t));
  }
}

TEST(CudaFft, InputsAreLeftIntact) {
  SKIP_WITHOUT_GPU();
  // cuFFT's C2R overwrites its input: the GPU's C2R reads a scratch copy.
  // The spectra are GPU results, read again after the inverse transforms.
  auto x = rnd({8, 30}, 27);
  auto spec = fft::rfft(x, -1, kGpu);
  auto spec2 = fft::rfftn(x, kGpu);
  spec.eval();
  spec2.eval();
  auto before = fft::rfft(x, -1, kCpu);
  auto before2 = fft::rfftn(x, kCpu);
  auto back = fft::irfft(spec, 30, -1, kGpu);
  auto back2 = fft::irfftn(spec2, {8, 30}, {0, 1}, kGpu);
  back.eval();
  back2.eval();
  expect_match(spec, before, "rfft after irfft read it");
  expect_match(spec2, before2, "rfftn after irfftn read it");
  expect_match(back, x, "irfft(rfft(x))");
  expect_match(back2, x, "irfftn(rfftn(x))");
  // A complex input still referenced is not donated to the output.
  auto z = crnd({5, 12}, 28);
  auto zg = multiply(z, array(1.0f), kGpu);
  zg.eval();
  auto f = fft::fft(zg, -1, kGpu);
  f.eval();
  expect_match(zg, z, "fft input after fft");
}
