// Compile on the GPU (backend/cuda/compiled.cpp): fused groups run as one
// NVRTC-generated kernel each (counted by gpu::fused_kernel_stats), and
// give eager evaluation's results bit for bit (the same functors, half
// types rounded after every op, no FMA contraction in either) whatever the
// inputs' layout: contiguous and aligned (packed entry point), unaligned
// (flat), strided, transposed and broadcast (strided), NaN and infinities,
// empty arrays, past 2^31 elements (64-bit indices), and one kernel for
// every shape of a shapeless compile. Skipped without a GPU.
#include <cmath>
#include <functional>

#include "fluxion/backend/gpu.h"
#include "device_scope.h"
#include "fused_cases.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

using Stats = gpu::FusedKernelStats;

// Counters moved by `body`.
Stats delta(const std::function<void()>& body) {
  Stats a = gpu::fused_kernel_stats();
  body();
  Stats b = gpu::fused_kernel_stats();
  Stats d;
  d.launches = b.launches - a.launches;
  d.fallbacks = b.fallbacks - a.fallbacks;
  d.unfused = b.unfused - a.unfused;
  d.compiles = b.compiles - a.compiles;
  d.disk_hits = b.disk_hits - a.disk_hits;
  d.disk_writes = b.disk_writes - a.disk_writes;
  d.loads = b.loads - a.loads;
  return d;
}

// Same shape, dtype and values (NaN where eager has NaN; -0.0 == 0.0).
void expect_same(const array& got, const array& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  auto g = to_vector<double>(got);
  auto w = to_vector<double>(want);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool same = g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]));
    if (!same && bad++ == 0) {
      first = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << g.size()
                     << " differ, first at " << first << ": " << g[first]
                     << " (compiled) vs " << w[first] << " (eager)";
}

// f compiled against f eager, on the GPU; the fused groups must each be
// one generated kernel launch, none evaluated node by node.
void check_fused(const Fn& f, const std::vector<array>& x,
                 const std::string& what, bool shapeless = false) {
  OnDevice gpu(Device::gpu);
  std::vector<array> compiled;
  size_t groups = 0;
  Stats d = delta([&] {
    compiled = compile(f, shapeless)(x);
    groups = compiled_in(compiled).size();
    eval(compiled);
  });
  auto eager = f(x);
  ASSERT_EQ(compiled.size(), eager.size());
  for (size_t k = 0; k < eager.size(); ++k) {
    expect_same(compiled[k], eager[k], what);
  }
  EXPECT_GE(groups, 1u) << what << ": nothing fused";
  EXPECT_EQ(d.fallbacks + d.unfused, 0u)
      << what << ": a fused group ran unfused";
  size_t nonempty = 0;
  for (auto& o : compiled) {
    nonempty += o.size() > 0;
  }
  if (nonempty == compiled.size()) {
    EXPECT_EQ(d.launches, groups) << what;
  }
}

Fn gelu_fn() {
  return [](const std::vector<array>& in) {
    const array& x = in[0];
    return std::vector<array>{
        0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))};
  };
}

}  // namespace

TEST(CompiledCuda, FusedCasesMatchEagerBitForBit) {
  SKIP_WITHOUT_GPU();
  for (auto& c : fused_cases()) {
    check_fused(c.f, fused_inputs(c), c.name);
  }
}

TEST(CompiledCuda, GeluIsOneKernel) {
  SKIP_WITHOUT_GPU();
  for (Dtype t : {float32, float16, bfloat16}) {
    auto x = fused_input({{1 << 20}, t, -4, 4}, 5);
    check_fused(gelu_fn(), {x}, std::string("gelu ") + dtype_name(t));
  }
}

// Every entry point and its edges: odd sizes (the tail after the last
// pack), unaligned slices, transposes, steps, broadcasts, many dims.
TEST(CompiledCuda, LayoutsMatchEager) {
  SKIP_WITHOUT_GPU();
  OnDevice gpu(Device::gpu);
  Fn f = [](const std::vector<array>& in) {
    return std::vector<array>{tanh(in[0] * in[1] + 1) * in[0] - in[1]};
  };
  for (Dtype t : {float32, bfloat16, float16, float64}) {
    std::string n = dtype_name(t);
    auto big = fused_input({{4099}, t, -2, 2}, 1);
    auto other = fused_input({{4099}, t, -2, 2}, 2);
    auto m = fused_input({{37, 64}, t, -2, 2}, 3);
    auto m2 = fused_input({{64, 37}, t, -2, 2}, 4);
    auto row = fused_input({{64}, t, -2, 2}, 5);
    auto col = fused_input({{37, 1}, t, -2, 2}, 6);
    auto one = fused_input({{}, t, 1, 2}, 7);
    auto cube = fused_input({{3, 5, 7, 2, 3}, t, -2, 2}, 8);
    check_fused(f, {big, other}, n + " packed with a tail");
    check_fused(f, {slice(big, {1}, {4099}), slice(other, {0}, {4098})},
                n + " unaligned");
    check_fused(f, {m, transpose(m2)}, n + " transposed");
    check_fused(f, {m, row}, n + " row broadcast");
    check_fused(f, {m, col}, n + " column broadcast");
    check_fused(f, {m, one}, n + " scalar");
    check_fused(f, {one, m}, n + " scalar first");
    check_fused(f, {slice(m, {0, 0}, {37, 64}, {2, 3}), one},
                n + " stepped slice");
    check_fused(f, {transpose(cube, {4, 2, 0, 3, 1}), one},
                n + " five strided dims");
    check_fused(f, {broadcast_to(row, {3, 37, 64}), col},
                n + " broadcast both");
  }
}

TEST(CompiledCuda, NanInfAndSignedZeros) {
  SKIP_WITHOUT_GPU();
  std::vector<double> v{kNaN, kInf, -kInf, -0.0, 0.0, 1e30, -1e30, 65504,
                        -70000, 3e-39, 1, -1, 88.8, -104, 0.5, -0.5};
  Fn f = [](const std::vector<array>& in) {
    const array &x = in[0], &y = in[1];
    array r = exp(x) + tanh(y) * sigmoid(x) + log(abs(x)) +
              maximum(x, y) - minimum(y, x) + logaddexp(x, y) +
              where(isnan(x), y, x) * expm1(y) + floor_divide(x, y) +
              remainder(x, y) + sqrt(x) + arctan2(x, y) + power(x, y);
    return std::vector<array>{r, astype(isinf(r), float32) + sign(r)};
  };
  for (Dtype t : {float32, float16, bfloat16, float64}) {
    std::vector<double> w(v.rbegin(), v.rend());
    // Every pair, by broadcasting a column against a row.
    auto x = astype(array(v.begin(), {16, 1}, float64), t, Device::cpu);
    auto y = astype(array(w.begin(), {16}, float64), t, Device::cpu);
    check_fused(f, {x, y}, std::string("specials ") + dtype_name(t));
  }
}

TEST(CompiledCuda, EmptyArrays) {
  SKIP_WITHOUT_GPU();
  Fn f = [](const std::vector<array>& in) {
    return std::vector<array>{exp(in[0]) * in[1] + 1};
  };
  for (auto [a, b] : std::vector<std::pair<Shape, Shape>>{
           {{0}, {0}}, {{3, 0}, {3, 0}}, {{0, 5}, {5}}, {{4, 0}, {}}}) {
    auto x = fused_input({a, float32, 0, 1}, 1);
    auto y = fused_input({b, float32, 0, 1}, 2);
    check_fused(f, {x, y}, "empty");
  }
}

// Past 2^31 one-byte elements: the 64-bit variants of the packed and the
// strided entry points (compared on the GPU: a host copy would be 2 GB).
TEST(CompiledCuda, PastTwoToTheThirtyOneElements) {
  SKIP_WITHOUT_GPU();
  OnDevice gpu(Device::gpu);
  // (8555774, 251): 2^31 + 15626 elements, each row 0..250.
  const int rows = 8555774;
  auto pattern = reshape(astype(arange(0, 251, 1, int32), uint8), {1, 251});
  auto x = broadcast_to(pattern, {rows, 251}) + astype(array(0), uint8);
  x.eval();
  Fn f = [](const std::vector<array>& in) {
    return std::vector<array>{(in[0] + in[1]) * in[0]};
  };
  auto two = astype(array(2), uint8);
  for (bool strided : {false, true}) {
    auto a = strided ? transpose(x) : x;
    std::vector<array> c;
    Stats d = delta([&] {
      c = compile(f)({a, two});
      eval(c);
    });
    auto e = f({a, two})[0];
    EXPECT_TRUE(array_equal(c[0], e).item<bool>()) << strided;
    EXPECT_EQ(d.launches, 1u);
    EXPECT_EQ(d.fallbacks, 0u);
    // The last elements, past 2^31.
    int r = c[0].shape(0), k = c[0].shape(1);
    expect_same(slice(c[0], {r - 1, k - 5}, {r, k}),
                slice(e, {r - 1, k - 5}, {r, k}), "tail");
  }
}

// A shapeless compile runs one generated kernel for every shape: the
// later shapes compile nothing.
TEST(CompiledCuda, ShapelessOneKernelForEveryShape) {
  SKIP_WITHOUT_GPU();
  OnDevice gpu(Device::gpu);
  // No constants: a shapeless trace keeps the broadcast of a scalar
  // outside the group, and its stride-0 view would take the strided
  // entry point (for most shapes) next to the packed one.
  Fn f = [](const std::vector<array>& in) {
    return std::vector<array>{sigmoid(in[0] * in[1]) * in[1] - in[0]};
  };
  auto cf = compile(f, /*shapeless=*/true);
  int before = 0;
  for (Shape s : {Shape{7}, Shape{1000}, Shape{1}, Shape{3, 333},
                  Shape{5, 2}, Shape{100003}}) {
    auto x = fused_input({s, float32, -3, 3}, 1);
    auto y = fused_input({s, float32, -3, 3}, 2);
    std::vector<array> c;
    Stats d = delta([&] {
      c = cf({x, y});
      eval(c);
    });
    expect_same(c[0], f({x, y})[0], "shapeless");
    EXPECT_EQ(d.launches, 1u);
    EXPECT_EQ(d.fallbacks, 0u);
    if (before++ > 0) {
      EXPECT_EQ(d.compiles, 0u) << "a new shape compiled a new kernel";
      EXPECT_EQ(d.loads, 0u) << "a new shape loaded a new module";
    }
  }
}
