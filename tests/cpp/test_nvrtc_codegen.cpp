// The CUDA code generator of compile's fused kernels (backend/cuda/
// codegen_cuda.cpp) and its NVRTC front end (nvrtc_compile.cpp), without a
// GPU: the fused graphs of fused_cases.h are traced on the CPU (the
// Compiled nodes' tapes are backend-neutral), their CUDA source generated
// and compiled by NVRTC for sm_90, the architecture Fluxion's own kernels
// are built for. A generator that writes source NVRTC rejects (a functor
// that does not compile as device code, a type the glue does not define)
// fails here, on CI, before any GPU sees it. Built with the CUDA backend
// only; skipped where libnvrtc does not load.
#if FLUXION_TEST_CUDA

#include <set>

#include "fluxion/backend/cuda/codegen_cuda.h"
#include "fluxion/backend/cuda/nvrtc_compile.h"
#include "device_scope.h"
#include "fused_cases.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

#define SKIP_WITHOUT_NVRTC()                   \
  {                                            \
    std::string why;                           \
    if (!cu::nvrtc::available(&why)) {         \
      GTEST_SKIP() << "no NVRTC: " << why;     \
    }                                          \
  }

// Case `c` compiled and called on the CPU (not evaluated): its outputs'
// graph holds the Compiled nodes.
std::vector<array> trace_on_cpu(const FusedCase& c) {
  OnDevice cpu(Device::cpu);
  return compile(c.f)(fused_inputs(c));
}

}  // namespace

class NvrtcCases : public ::testing::TestWithParam<int> {};

// The case's every Compiled node compiles for sm_90: the packed and the
// strided entry points (the flat one and the 64-bit variants are the same
// bodies on other types, compiled whole for two cases: NVRTC's time grows
// with each entry point, and CI has two cores).
TEST_P(NvrtcCases, CompileForSm90) {
  SKIP_WITHOUT_NVRTC();
  const FusedCase c = fused_cases()[GetParam()];
  const bool whole = c.name == "broadcasts" || c.name == "binary_float32";
  auto outs = trace_on_cpu(c);
  auto nodes = compiled_in(outs);
  ASSERT_FALSE(nodes.empty()) << "nothing fused";
  for (auto* node : nodes) {
    auto src = cu::fused_kernel_source(node->tape());
    ASSERT_FALSE(src.empty());
    for (int e = 0; e < cu::kFusedEntries; ++e) {
      EXPECT_NE(
          src.entries[e].find(std::string(cu::kFusedEntryNames[e]) + "("),
          std::string::npos)
          << e;
    }
    std::string source = whole ? src.all()
                               : src.common + src.entries[cu::kPacked32] +
                                     src.entries[cu::kStrided32];
    cu::nvrtc::Image image;
    std::string error;
    ASSERT_TRUE(cu::nvrtc::compile(source, 90, image, error)) << error;
    EXPECT_EQ(image.target, "sm_90");
    EXPECT_GT(image.bytes.size(), 1000u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fused, NvrtcCases,
    ::testing::Range(0, static_cast<int>(fused_cases().size())),
    [](const ::testing::TestParamInfo<int>& info) {
      return fused_cases()[info.param].name;
    });

// Every elementwise primitive with a functor is in some fused case.
TEST(NvrtcCodegen, CasesCoverEveryFunctor) {
  std::set<std::string> fused;
  for (auto& c : fused_cases()) {
    auto outs = trace_on_cpu(c);
    for (auto* node : compiled_in(outs)) {
      for (auto& n : node->tape().nodes) {
        fused.insert(n.prim->name());
      }
    }
  }
  for (const char* p :
       {"Abs",        "Negative",   "Sign",         "Exp",        "Expm1",
        "Log",        "Log1p",      "Log2",         "Log10",      "Sqrt",
        "Rsqrt",      "Square",     "Reciprocal",   "Sin",        "Cos",
        "Tan",        "ArcSin",     "ArcCos",       "ArcTan",     "Sinh",
        "Cosh",       "Tanh",       "ArcSinh",      "ArcCosh",    "ArcTanh",
        "Sigmoid",    "Erf",        "ErfInv",       "Floor",      "Ceil",
        "Round",      "LogicalNot", "IsNan",        "IsInf",      "IsFinite",
        "Add",        "Subtract",   "Multiply",     "Divide",     "FloorDivide",
        "Remainder",  "Power",      "Maximum",      "Minimum",    "ArcTan2",
        "LogAddExp",  "Equal",      "NotEqual",     "Less",       "LessEqual",
        "Greater",    "GreaterEqual", "LogicalAnd", "LogicalOr",  "BitwiseAnd",
        "BitwiseOr",  "BitwiseXor", "LeftShift",    "RightShift", "Select",
        "AsType",     "Broadcast",  "Reshape"}) {
    EXPECT_TRUE(fused.count(p)) << p << " is in no fused case";
  }
}

// Broadcast scalars are hoisted; the pack follows the widest array.
TEST(NvrtcCodegen, PackWidthAndScalars) {
  auto x = fused_input({{8, 8}, float32, 0, 1}, 1);
  auto h = fused_input({{8, 8}, bfloat16, 0, 1}, 2);
  auto s = fused_input({{}, float64, 1, 2}, 3);
  OnDevice cpu(Device::cpu);
  auto source = [&](Fn fn, const std::vector<array>& in) {
    auto outs = compile(fn)(in);
    auto nodes = compiled_in(outs);
    EXPECT_EQ(nodes.size(), 1u);
    return cu::fused_kernel_source(nodes.at(0)->tape());
  };
  // bfloat16 and float32 in, bfloat16 out: 4 per 16 bytes of float32.
  auto mixed = source(
      [](const std::vector<array>& in) {
        return std::vector<array>{astype(exp(in[1]) * in[0], bfloat16)};
      },
      {x, h});
  EXPECT_EQ(mixed.pack, 4);
  // A float64 output times a broadcast float64 scalar: 2 per pack, the
  // scalar (input 2) read once.
  auto wide = source(
      [](const std::vector<array>& in) {
        return std::vector<array>{astype(exp(in[1]) * in[0], float64) * in[2]};
      },
      {x, h, s});
  EXPECT_EQ(wide.pack, 2);
  EXPECT_NE(wide.common.find("const double s"), std::string::npos)
      << wide.common.substr(wide.common.find("fx_packed("), 600);
  Fn g = [](const std::vector<array>& in) {
    return std::vector<array>{sigmoid(in[0]) * in[0]};
  };
  auto src16 = source(g, {h});
  EXPECT_EQ(src16.pack, 8);  // bfloat16 only: 8 per 16 bytes
  EXPECT_NE(src16.common.find("fx_st_bf16"), std::string::npos);
  // One entry point's module holds that entry point alone.
  auto one = src16.source(cu::kStrided32);
  EXPECT_NE(one.find("fx_strided32("), std::string::npos);
  EXPECT_EQ(one.find("fx_packed32("), std::string::npos);
}

// NVRTC's failures come back with its log, never as an abort; an
// architecture this NVRTC does not know gets PTX of the newest one below.
TEST(NvrtcCodegen, ErrorsAndUnknownArchitectures) {
  SKIP_WITHOUT_NVRTC();
  cu::nvrtc::Image image;
  std::string error;
  EXPECT_FALSE(cu::nvrtc::compile("this is not CUDA;", 90, image, error));
  EXPECT_NE(error.find("nvrtcCompileProgram"), std::string::npos) << error;
  EXPECT_NE(error.find("error"), std::string::npos) << error;
  const std::string ok =
      "extern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }";
  ASSERT_TRUE(cu::nvrtc::compile(ok, 999, image, error)) << error;
  EXPECT_EQ(image.target.rfind("compute_", 0), 0u) << image.target;
  EXPECT_NE(image.bytes.find(".entry k"), std::string::npos);
  EXPECT_FALSE(cu::nvrtc::compile(ok, 10, image, error));
  EXPECT_NE(error.find("cannot target sm_10"), std::string::npos) << error;
  EXPECT_FALSE(cu::nvrtc::version().empty());
}

#endif  // FLUXION_TEST_CUDA
