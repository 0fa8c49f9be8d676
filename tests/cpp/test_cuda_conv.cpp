// The Convolution primitive on the GPU (backend/cuda/conv.cu,
// conv_cudnn.cpp) against the CPU kernel on the same inputs: every form
// (1-, 2-, 3-D, strides, asymmetric and negative padding through the
// gradients, kernel and input dilation, groups, depthwise, flip,
// transposed convolutions), forward and both gradients, float32, float16,
// bfloat16 and float64, with cuDNN on and off (FLUXION_CUDNN_CONV=0: the
// general path), which path ran (gpu::conv_stats), non-contiguous and
// misaligned operands, empty shapes, the general path cut into many chunks
// (FLUXION_CONV_SCRATCH_BYTES), and the benchmark's shapes at a smaller
// batch. Results agree within the dtype's rounding of the largest CPU
// magnitude. Skipped without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>

#include "fluxion/backend/gpu.h"
#include "fluxion/ops/conv.h"
#include "fluxion/transforms.h"
#include "device_scope.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

// Sets an environment variable for the scope (conv.cu reads these at each
// convolution).
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) {
      old_ = old;
    }
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~EnvVar() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

array rnd(const Shape& shape, unsigned seed, Dtype t) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(shape_size(shape));
  for (auto& e : v) {
    e = u(gen);
  }
  return astype(array(v.begin(), shape, float32), t, kCpu);
}

double tolerance(Dtype t) {
  return t == float64 ? 1e-10
         : t == float32 ? 1e-4
         : t == float16 ? 4e-3
                        : 3e-2;
}

void expect_match(const array& gpu, const array& cpu, const std::string& what,
                  double tol) {
  ASSERT_EQ(gpu.dtype(), cpu.dtype()) << what;
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  auto g = to_vector<double>(gpu);
  auto c = to_vector<double>(cpu);
  double scale = 1;
  for (double v : c) {
    scale = std::max(scale, std::abs(v));
  }
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    if (!(std::abs(g[i] - c[i]) <= tol * scale)) {
      ADD_FAILURE() << what << " at " << i << ": gpu " << g[i] << ", cpu "
                    << c[i] << " (scale " << scale << ")";
      ++bad;
    }
  }
}

using F = std::function<array(const array&, const array&, StreamOrDevice)>;

struct Case {
  std::string name;
  F f;
  Shape xs, ws;
};

std::vector<Case> cases() {
  return {
      {"conv1d", [](auto& x, auto& w, auto s) {
         return conv1d(x, w, 1, 0, 1, 1, s);
       }, {2, 9, 3}, {4, 3, 3}},
      {"conv1d stride pad dilation", [](auto& x, auto& w, auto s) {
         return conv1d(x, w, 2, 2, 2, 1, s);
       }, {2, 11, 2}, {3, 3, 2}},
      {"conv1d groups", [](auto& x, auto& w, auto s) {
         return conv1d(x, w, 1, 1, 1, 2, s);
       }, {2, 7, 4}, {6, 2, 2}},
      {"conv2d 3x3 pad 1", [](auto& x, auto& w, auto s) {
         return conv2d(x, w, 1, 1, 1, 1, s);
       }, {2, 6, 5, 8}, {16, 3, 3, 8}},
      {"conv2d stride uneven", [](auto& x, auto& w, auto s) {
         return conv2d(x, w, {2, 3}, {1, 0}, {1, 1}, 1, s);
       }, {2, 8, 9, 8}, {8, 2, 3, 8}},
      {"conv2d stride 2 drops the last row", [](auto& x, auto& w, auto s) {
         return conv2d(x, w, 2, 0, 1, 1, s);
       }, {1, 6, 6, 8}, {8, 3, 3, 8}},
      {"conv2d dilation groups", [](auto& x, auto& w, auto s) {
         return conv2d(x, w, {1, 1}, {1, 2}, {2, 1}, 3, s);
       }, {1, 7, 6, 6}, {6, 2, 2, 2}},
      {"conv2d groups 2 x 8", [](auto& x, auto& w, auto s) {
         return conv2d(x, w, 1, 1, 1, 2, s);
       }, {2, 6, 6, 16}, {16, 3, 3, 8}},
      {"conv2d depthwise", [](auto& x, auto& w, auto s) {
         return conv2d(x, w, 1, 1, 1, 8, s);
       }, {2, 5, 6, 8}, {8, 3, 3, 1}},
      {"conv2d depthwise multiplier stride", [](auto& x, auto& w, auto s) {
         return conv2d(x, w, 2, 1, 1, 3, s);
       }, {1, 7, 6, 3}, {6, 3, 3, 1}},
      {"conv2d 1x1", [](auto& x, auto& w, auto s) {
         return conv2d(x, w, 1, 0, 1, 1, s);
       }, {2, 4, 5, 8}, {8, 1, 1, 8}},
      {"conv2d 1x1 groups", [](auto& x, auto& w, auto s) {
         return conv2d(x, w, 1, 0, 1, 2, s);
       }, {2, 4, 3, 6}, {4, 1, 1, 3}},
      {"conv2d single channel", [](auto& x, auto& w, auto s) {
         return conv2d(x, w, 1, 1, 1, 1, s);
       }, {3, 9, 9, 1}, {4, 5, 5, 1}},
      {"conv3d", [](auto& x, auto& w, auto s) {
         return conv3d(x, w, 1, 1, 1, 1, s);
       }, {1, 4, 5, 4, 8}, {8, 2, 3, 2, 8}},
      {"conv3d stride", [](auto& x, auto& w, auto s) {
         return conv3d(x, w, 2, 0, 1, 1, s);
       }, {1, 5, 4, 5, 1}, {2, 2, 2, 3, 1}},
      {"conv_general asymmetric flip dilations", [](auto& x, auto& w, auto s) {
         return conv_general(x, w, {1, 2}, {1, 2}, {2, 0}, {1, 2}, {2, 1}, 1,
                             true, s);
       }, {1, 4, 5, 2}, {2, 2, 2, 2}},
      {"conv_general 1d everything", [](auto& x, auto& w, auto s) {
         return conv_general(x, w, {3}, {2}, {1}, {2}, {3}, 2, true, s);
       }, {2, 4, 4}, {2, 2, 2}},
      {"conv_general input dilation stride 1", [](auto& x, auto& w, auto s) {
         return conv_general(x, w, {1, 1}, {2, 1}, {1, 3}, {1, 2}, {2, 3}, 1,
                             false, s);
       }, {2, 3, 4, 8}, {8, 3, 2, 8}},
      {"conv_transpose1d", [](auto& x, auto& w, auto s) {
         return conv_transpose1d(x, w, 2, 1, 1, 1, 1, s);
       }, {1, 4, 8}, {8, 3, 8}},
      {"conv_transpose2d groups", [](auto& x, auto& w, auto s) {
         return conv_transpose2d(x, w, {2, 1}, {0, 1}, {1, 2}, {1, 0}, 2, s);
       }, {1, 3, 4, 4}, {4, 2, 3, 2}},
      {"conv_transpose2d output padding > padding",
       [](auto& x, auto& w, auto s) {
         return conv_transpose2d(x, w, 3, 0, 1, 2, 1, s);
       }, {2, 3, 3, 8}, {8, 2, 2, 8}},
      {"conv_transpose3d", [](auto& x, auto& w, auto s) {
         return conv_transpose3d(x, w, 2, 1, 1, 0, 1, s);
       }, {1, 2, 3, 2, 8}, {8, 2, 2, 3, 8}},
  };
}

// f on the GPU and on the CPU, forward and both gradients (cotangent of
// the output's shape), compared.
void check_case(const Case& c, Dtype t, unsigned seed,
                const std::string& tag) {
  auto x = rnd(c.xs, seed, t);
  auto w = rnd(c.ws, seed + 1, t);
  const std::string what = c.name + " " + dtype_name(t) + " " + tag;
  auto run = [&](Device d) {
    Fn fn = [&](const std::vector<array>& in) {
      return std::vector<array>{c.f(in[0], in[1], d)};
    };
    auto y = c.f(x, w, d);
    auto ct = rnd(y.shape(), seed + 2, t);
    auto [outs, grads] = vjp(fn, {x, w}, {ct});
    std::vector<array> r{outs[0], grads[0], grads[1]};
    eval(r);
    return r;
  };
  auto gpu = run(kGpu);
  auto cpu = run(kCpu);
  const double tol = tolerance(t);
  expect_match(gpu[0], cpu[0], what + " forward", tol);
  expect_match(gpu[1], cpu[1], what + " input gradient", 2 * tol);
  expect_match(gpu[2], cpu[2], what + " weight gradient", 2 * tol);
}

int64_t cudnn_runs(const gpu::ConvStats& s) {
  return s.cudnn_forward + s.cudnn_backward_data + s.cudnn_backward_filter;
}

}  // namespace

TEST(CudaConv, EveryFormEveryDtypeCudnn) {
  SKIP_WITHOUT_GPU();
  EnvVar on("FLUXION_CUDNN_CONV", nullptr);
  unsigned seed = 1;
  for (const auto& c : cases()) {
    for (Dtype t : {float32, float16, bfloat16, float64}) {
      check_case(c, t, seed, "cudnn on");
      seed += 3;
    }
  }
  auto s = gpu::conv_stats();
  std::printf("cuDNN %s (%s): forward %lld, backward data %lld, backward "
              "filter %lld, failed plans %lld; general path: direct %lld, "
              "reduce %lld, im2col %lld\n",
              s.cudnn_loaded ? "loaded" : "not loaded",
              s.cudnn_error.c_str(), (long long)s.cudnn_forward,
              (long long)s.cudnn_backward_data,
              (long long)s.cudnn_backward_filter,
              (long long)s.cudnn_failed_plans, (long long)s.direct,
              (long long)s.reduce, (long long)s.im2col);
}

TEST(CudaConv, EveryFormEveryDtypeGeneralPath) {
  SKIP_WITHOUT_GPU();
  EnvVar off("FLUXION_CUDNN_CONV", "0");
  const auto before = gpu::conv_stats();
  unsigned seed = 1000;
  for (const auto& c : cases()) {
    for (Dtype t : {float32, float16, bfloat16, float64}) {
      check_case(c, t, seed, "cudnn off");
      seed += 3;
    }
  }
  const auto after = gpu::conv_stats();
  EXPECT_EQ(cudnn_runs(after), cudnn_runs(before));
  EXPECT_GT(after.direct, before.direct);
  EXPECT_GT(after.im2col, before.im2col);
}

// The benchmark's convolution (3x3, padding 1, 64 -> 64 channels) runs
// all three passes on cuDNN when it loads: forward, backward data,
// backward filter.
TEST(CudaConv, TrainingStepRunsOnCudnn) {
  SKIP_WITHOUT_GPU();
  EnvVar on("FLUXION_CUDNN_CONV", nullptr);
  const auto before = gpu::conv_stats();
  if (!before.cudnn_loaded) {
    GTEST_SKIP() << "cuDNN does not load: " << before.cudnn_error;
  }
  for (Dtype t : {float32, bfloat16, float16}) {
    Case c{"conv2d 3x3 64->64",
           [](auto& x, auto& w, auto s) { return conv2d(x, w, 1, 1, 1, 1, s); },
           {4, 14, 14, 64},
           {64, 3, 3, 64}};
    const auto b = gpu::conv_stats();
    check_case(c, t, 77, "cudnn on");
    const auto a = gpu::conv_stats();
    EXPECT_EQ(a.cudnn_forward - b.cudnn_forward, 1) << dtype_name(t);
    EXPECT_EQ(a.cudnn_backward_data - b.cudnn_backward_data, 1)
        << dtype_name(t);
    EXPECT_EQ(a.cudnn_backward_filter - b.cudnn_backward_filter, 1)
        << dtype_name(t);
    EXPECT_EQ(a.im2col, b.im2col) << dtype_name(t);
  }
}

// The benchmark's shapes at batch 4 (the CPU computes the reference):
// conv2d 3x3 56x56 64 -> 64 and the depthwise 3x3 of 256 channels.
TEST(CudaConv, BenchmarkShapes) {
  SKIP_WITHOUT_GPU();
  for (const char* path : {"1", "0"}) {
    EnvVar e("FLUXION_CUDNN_CONV", path);
    for (Dtype t : {float32, bfloat16}) {
      check_case({"conv2d 3x3 56x56 64->64",
                  [](auto& x, auto& w, auto s) {
                    return conv2d(x, w, 1, 1, 1, 1, s);
                  },
                  {4, 56, 56, 64},
                  {64, 3, 3, 64}},
                 t, 5, std::string("cudnn ") + path);
      check_case({"depthwise 3x3 56x56 x256",
                  [](auto& x, auto& w, auto s) {
                    return conv2d(x, w, 1, 1, 1, 256, s);
                  },
                  {4, 56, 56, 256},
                  {256, 3, 3, 1}},
                 t, 9, std::string("cudnn ") + path);
    }
  }
}

// The general path's scratch cut into many chunks of rows.
TEST(CudaConv, GeneralPathInChunks) {
  SKIP_WITHOUT_GPU();
  EnvVar off("FLUXION_CUDNN_CONV", "0");
  EnvVar small("FLUXION_CONV_SCRATCH_BYTES", "5000");
  const auto before = gpu::conv_stats();
  for (Dtype t : {float32, float64}) {
    check_case({"conv2d groups in chunks",
                [](auto& x, auto& w, auto s) {
                  return conv2d(x, w, 2, 1, 1, 2, s);
                },
                {3, 9, 11, 6},
                {4, 3, 3, 3}},
               t, 21, "5000-byte chunks");
  }
  EXPECT_GT(gpu::conv_stats().im2col, before.im2col);
}

// The weight gradient of a depthwise convolution (one output channel per
// group, sums over the batch and every output position) takes the general
// path's block-reduction kernel when its sums have kLongSum (4096) terms
// or more (conv.cu): here 3 x 40 x 37 = 4440 (the stride-2 output of an
// 80 x 74 input), one sum per tap and channel.
TEST(CudaConv, DepthwiseWeightGradientReduceKernel) {
  SKIP_WITHOUT_GPU();
  EnvVar off("FLUXION_CUDNN_CONV", "0");
  const auto before = gpu::conv_stats();
  for (Dtype t : {float32, bfloat16, float64}) {
    check_case({"depthwise 3x3 stride 2 x32",
                [](auto& x, auto& w, auto s) {
                  return conv2d(x, w, 2, 1, 1, 32, s);
                },
                {3, 80, 74, 32},
                {32, 3, 3, 1}},
               t, 41, "cudnn off");
  }
  EXPECT_GE(gpu::conv_stats().reduce - before.reduce, 3);
}

// Transposed, sliced (misaligned for cuDNN's 16-byte loads) and broadcast
// operands, through both paths.
TEST(CudaConv, StridedAndMisalignedOperands) {
  SKIP_WITHOUT_GPU();
  for (const char* path : {"1", "0"}) {
    EnvVar e("FLUXION_CUDNN_CONV", path);
    for (Dtype t : {float32, float16}) {
      auto xb = rnd({2, 9, 8, 9}, 3, t);
      auto wb = rnd({8, 3, 3, 9}, 4, t);
      // x: [2, 8, 9, 8] as a transposed view with its first channel
      // dropped; w: its first input channel dropped (offset 1).
      auto x = slice(transpose(xb, {0, 2, 1, 3}, kCpu), {0, 0, 0, 1},
                     {2, 8, 9, 9}, kCpu);
      auto w = slice(wb, {0, 0, 0, 1}, {8, 3, 3, 9}, kCpu);
      auto bc = broadcast_to(slice(wb, {0, 0, 0, 1}, {1, 3, 3, 9}, kCpu),
                             {8, 3, 3, 8}, kCpu);
      eval({x, w, bc});
      for (const array* wt : {&w, &bc}) {
        auto g = conv2d(x, *wt, 1, 1, 1, 1, kGpu);
        auto c = conv2d(x, *wt, 1, 1, 1, 1, kCpu);
        expect_match(g, c,
                     std::string("strided ") + dtype_name(t) + " cudnn " +
                         path,
                     tolerance(t));
      }
    }
  }
}

TEST(CudaConv, EmptyShapes) {
  SKIP_WITHOUT_GPU();
  for (const char* path : {"1", "0"}) {
    EnvVar e("FLUXION_CUDNN_CONV", path);
    // No batch.
    auto y = conv2d(zeros({0, 5, 5, 3}, float32, kCpu),
                    ones({4, 3, 3, 3}, float32, kCpu), 1, 0, 1, 1, kGpu);
    EXPECT_EQ(y.shape(), (Shape{0, 3, 3, 4}));
    eval(y);
    // No input channels: empty sums.
    y = conv2d(ones({1, 5, 5, 0}, float32, kCpu),
               ones({4, 3, 3, 0}, float32, kCpu), 1, 0, 1, 1, kGpu);
    EXPECT_EQ(y.shape(), (Shape{1, 3, 3, 4}));
    for (double v : to_vector<double>(y)) {
      EXPECT_EQ(v, 0.0);
    }
    // A kernel larger than the padded input has no output position: the
    // op's shape check raises (as MLX's does), on every device.
    EXPECT_THROW(conv2d(ones({1, 2, 2, 3}, float32, kCpu),
                        ones({4, 3, 3, 3}, float32, kCpu), 1, 0, 1, 1, kGpu),
                 std::invalid_argument);
    // An empty input padded into output positions: zeros.
    y = conv1d(ones({1, 0, 2}, float32, kCpu),
               ones({3, 2, 2}, float32, kCpu), 1, 2, 1, 1, kGpu);
    EXPECT_EQ(y.shape(), (Shape{1, 3, 3}));
    for (double v : to_vector<double>(y)) {
      EXPECT_EQ(v, 0.0);
    }
  }
}

TEST(CudaConv, IntegerInputsRaise) {
  SKIP_WITHOUT_GPU();
  EXPECT_THROW(conv1d(ones({1, 4, 2}, int32, kCpu),
                      ones({2, 2, 2}, int32, kCpu), 1, 0, 1, 1, kGpu),
               std::invalid_argument);
}
