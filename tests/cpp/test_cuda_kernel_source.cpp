// mx.fast.cuda_kernel's generated source (ops/cuda_kernel_source.cpp),
// without a GPU: the signature MLX's users write their bodies against
// (inputs, their shape / strides / ndim when named, outputs, template
// constants, the kernel's name), and -- with the CUDA backend, where
// libnvrtc loads -- NVRTC compiling the documented examples for sm_90 with
// the options user kernels get, and rejecting a syntax error with a log
// that names the kernel's file and line.
#include <gtest/gtest.h>

#include "fluxion/ops/cuda_kernel_source.h"

#if FLUXION_TEST_CUDA
#include "fluxion/backend/cuda/nvrtc_compile.h"
#endif

using namespace fluxion;
using namespace fluxion::fast;

namespace {

CustomKernelSpec spec(std::vector<std::string> in,
                      std::vector<std::string> out, std::string source,
                      std::string header = "") {
  return cuda_kernel_spec("k", std::move(in), std::move(out),
                          std::move(source), std::move(header), true, false,
                          0);
}

KernelTemplateArg targ(std::string name, char kind, int64_t v,
                       Dtype d = float32) {
  return {std::move(name), kind, v, d};
}

}  // namespace

TEST(CudaKernelSource, SignatureAndConstants) {
  auto s = spec({"a", "b"}, {"out"},
                "out[0] = a[elem_to_loc(0, a_shape.data(), a_strides.data(), "
                "a_ndim)] + b_shape;");
  std::vector<KernelTemplateArg> t = {targ("T", 'd', 0, float32),
                                      targ("N", 'i', -4), targ("F", 'b', 1)};
  EXPECT_EQ(cuda_kernel_name(s, t), "custom_kernel_k_float32_n4_t");
  // b is 0-d: its pointer only, though the source names b_shape.
  auto src = cuda_kernel_source(s, t, {float32, int32}, {2, 0}, {float16});
  EXPECT_NE(src.find("extern \"C\" __global__ void custom_kernel_k_float32_"
                     "n4_t(\n"
                     "    const float* a,\n"
                     "    const __grid_constant__ Shape a_shape,\n"
                     "    const __grid_constant__ Strides a_strides,\n"
                     "    const __grid_constant__ int a_ndim,\n"
                     "    const int32_t* b,\n"
                     "    __half* out) {\n"
                     "  using T = float;\n"
                     "  constexpr int N = -4;\n"
                     "  constexpr bool F = true;\n\n"
                     "out[0] = a["),
            std::string::npos)
      << src;
  EXPECT_EQ(src.find("cuda/std/complex"), std::string::npos);
}

TEST(CudaKernelSource, LayoutParamsOnlyWhenNamed) {
  auto s = spec({"x", "y"}, {"o"}, "o[0] = x[0] + y_ndim;");
  EXPECT_FALSE(layout_params(s, 0, 3).any());
  auto y = layout_params(s, 1, 3);
  EXPECT_TRUE(y.ndim);
  EXPECT_FALSE(y.shape || y.strides);
  EXPECT_FALSE(layout_params(s, 1, 0).any());
  auto src = cuda_kernel_source(s, {}, {bfloat16, float32}, {3, 3}, {bool_});
  EXPECT_NE(src.find("    const __nv_bfloat16* x,\n    const float* y,\n"
                     "    const __grid_constant__ int y_ndim,\n    bool* o) {"),
            std::string::npos)
      << src;
}

TEST(CudaKernelSource, HeaderBeforeTheKernelAndComplexOnDemand) {
  auto s = spec({"z"}, {"o"}, "o[0] = z[0];", "// HEADER\n");
  auto src = cuda_kernel_source(s, {}, {complex64}, {1}, {complex64});
  auto header = src.find("// HEADER");
  auto kernel = src.find("custom_kernel_k(");
  ASSERT_NE(header, std::string::npos);
  EXPECT_LT(src.find("elem_to_loc"), header);  // the prelude comes first
  EXPECT_LT(header, kernel);
  EXPECT_NE(src.find("#include <cuda/std/complex>"), std::string::npos);
  EXPECT_NE(src.find("const cuda::std::complex<float>* z"), std::string::npos);
}

TEST(CudaKernelSource, EveryDtypeHasAType) {
  for (Dtype d : {bool_, uint8, uint16, uint32, uint64, int8, int16, int32,
                  int64, float16, float32, float64, bfloat16, complex64}) {
    EXPECT_STRNE(cuda_type_name(d), "") << dtype_name(d);
  }
}

TEST(CudaKernelSource, SpecChecksNames) {
  EXPECT_TRUE(is_identifier("_a1"));
  EXPECT_FALSE(is_identifier("1a"));
  EXPECT_FALSE(is_identifier("a-b"));
  EXPECT_FALSE(is_identifier(""));
  EXPECT_THROW(cuda_kernel_spec("my kernel", {"a"}, {"o"}, "", "", true,
                                false, 0),
               std::invalid_argument);
  EXPECT_THROW(cuda_kernel_spec("k", {"a"}, {}, "", "", true, false, 0),
               std::invalid_argument);
  EXPECT_THROW(cuda_kernel_spec("k", {"a"}, {"a"}, "", "", true, false, 0),
               std::invalid_argument);
  EXPECT_THROW(cuda_kernel_spec("k", {"a"}, {"o"}, "", "", true, false, -1),
               std::invalid_argument);
}

// Export's state round-trips every field of a CUDA kernel; a state without
// the fields the CUDA kinds added (an older file) is a Metal kernel.
TEST(CudaKernelState, RoundTripAndOlderFiles) {
  auto s = cuda_kernel_spec("k", {"a"}, {"o"}, "o[0] = a[0];", "// h", false,
                            true, 4096);
  KernelLaunch launch{{8, 1, 1}, {4, 1, 1}, {targ("T", 'd', 0, bfloat16)},
                      2.5, {{'f', 1.5}, {'b', 1}}};
  Stream st(-1, Device(Device::gpu));
  CustomKernel p(st, s, launch);
  auto state = p.state();
  auto back = CustomKernel::from_state(st, state);
  EXPECT_TRUE(p.is_equivalent(*back));
  auto& q = static_cast<const CustomKernel&>(*back);
  EXPECT_EQ(q.spec().kind, KernelKind::cuda);
  EXPECT_EQ(q.spec().shared_memory, 4096);
  EXPECT_TRUE(q.spec().atomic_outputs);
  EXPECT_EQ(q.launch().scalars.size(), 2u);
  EXPECT_EQ(*q.launch().init_value, 2.5);
  // Without kind, shared memory and scalars: a Metal kernel.
  state.resize(state.size() - 7);
  auto old = CustomKernel::from_state(st, state);
  EXPECT_EQ(static_cast<const CustomKernel&>(*old).spec().kind,
            KernelKind::metal);
  // A kind that is none of the three is refused.
  state = p.state();
  state[state.size() - 7] = std::string("x");
  EXPECT_THROW(CustomKernel::from_state(st, state), std::invalid_argument);
}

#if FLUXION_TEST_CUDA

namespace {

#define SKIP_WITHOUT_NVRTC_AND_HEADERS()                     \
  {                                                          \
    std::string why;                                         \
    if (!cu::nvrtc::available(&why)) {                       \
      GTEST_SKIP() << "no NVRTC: " << why;                   \
    }                                                        \
    if (cu::nvrtc::toolkit_includes(&why).empty()) {         \
      GTEST_SKIP() << "no CUDA headers: " << why;            \
    }                                                        \
  }

// Compiles as the CUDA backend does (custom_kernel.cpp) for sm_90.
bool compiles(const std::string& source, std::string& error,
              bool* source_error = nullptr) {
  cu::nvrtc::Image image;
  return cu::nvrtc::compile(source, 90, image, error,
                            cu::nvrtc::user_kernel_options(), "custom.cu",
                            source_error);
}

const char* kElem = "auto elem = cooperative_groups::this_grid().thread_rank();\n";

}  // namespace

// MLX's documented examples and the shapes of its tests' kernels.
TEST(CudaKernelNvrtc, DocumentedExamplesCompile) {
  SKIP_WITHOUT_NVRTC_AND_HEADERS();
  struct Case {
    CustomKernelSpec spec;
    std::vector<KernelTemplateArg> targs;
    std::vector<Dtype> in;
    std::vector<int> ndim;
    std::vector<Dtype> out;
  };
  std::vector<Case> cases = {
      // exp elementwise, T a template argument, half input.
      {spec({"inp"}, {"out"},
            std::string(kElem) + "T tmp = inp[elem];\nout[elem] = exp(tmp);"),
       {targ("T", 'd', 0, float16)}, {float16}, {2}, {float16}},
      // strided input through elem_to_loc, WARP_SIZE.
      {spec({"inp"}, {"out"},
            std::string(kElem) +
                "auto loc = elem_to_loc(elem, inp_shape.data(), "
                "inp_strides.data(), inp_ndim);\nT tmp = inp[loc];\n"
                "out[elem] = exp(tmp) * WARP_SIZE;"),
       {targ("T", 'd', 0, float32)}, {float32}, {2}, {float32}},
      // mixed dtypes, bool and int template constants, a 0-d input.
      {spec({"a", "b", "c", "d"}, {"out1", "out2"},
            std::string(kElem) +
                "T tmp = a[0];\nif (e) {\n  out1[elem] = a[1] + b[2] + "
                "static_cast<float>(c[3]) + d[0] + f;\n} else {\n"
                "  out1[elem] = 1;\n}\nout2[elem] = a[1] + b[2] + "
                "static_cast<float>(c[1]) - d[0];"),
       {targ("e", 'b', 1), targ("f", 'i', 3), targ("T", 'd', 0, float16)},
       {float32, int32, bfloat16, float32},
       {2, 1, 2, 0},
       {float32, int32}},
      // atomic accumulation into an output filled by init_value.
      {spec({"inp"}, {"out"},
            std::string(kElem) + "atomicAdd(&out[0], inp[elem]);"),
       {}, {float32}, {1}, {float32}},
      // a helper in the header without __device__ (device by default).
      {spec({"a"}, {"out1"}, std::string(kElem) + "out1[elem] = do_exp(a[elem]);",
            "template <typename T> T do_exp(T x) { return exp(x); }\n"),
       {}, {float32}, {2}, {float32}},
      // complex and every integer type.
      {spec({"z", "i8", "u64"}, {"o"},
            "o[0] = z[0] * z[1] + float(i8[0]) + float(u64[0]);"),
       {}, {complex64, int8, uint64}, {1, 1, 1}, {complex64}},
  };
  for (auto& c : cases) {
    auto src = cuda_kernel_source(c.spec, c.targs, c.in, c.ndim, c.out);
    std::string error;
    EXPECT_TRUE(compiles(src, error)) << error << "\n" << src;
  }
}

TEST(CudaKernelNvrtc, SyntaxErrorCarriesTheLog) {
  SKIP_WITHOUT_NVRTC_AND_HEADERS();
  auto s = spec({"inp"}, {"out"}, "out[0] = inp[0] +;");
  auto src = cuda_kernel_source(s, {}, {float32}, {1}, {float32});
  std::string error;
  bool source_error = false;
  EXPECT_FALSE(compiles(src, error, &source_error));
  EXPECT_TRUE(source_error);
  EXPECT_NE(error.find("custom.cu("), std::string::npos) << error;
  EXPECT_NE(error.find("expected an expression"), std::string::npos) << error;
}

#endif  // FLUXION_TEST_CUDA
