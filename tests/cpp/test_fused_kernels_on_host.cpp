// The GPU's generated kernels run on the host, without a GPU: the CUDA
// source of a fused group (codegen_cuda.cpp), with its PTX glue swapped
// for C++ (the half types' conversions) and CUDA's keywords defined away,
// is built by the system compiler with a driver that runs each entry
// point's grid block by block and thread by thread; the launch is planned
// by the same plan_launch as Compiled::eval_gpu (entry point, grid, the
// layout parameter's encoding). So the index arithmetic of every entry
// point (packs and the tail after them, grid-stride loops, strides over
// collapsed dimensions, 32- and 64-bit variants, broadcast scalars) is
// checked against eager evaluation here; NVRTC's compile is checked by
// test_nvrtc_codegen.cpp, the real launch by test_cuda_compiled.cpp on a
// GPU. Built with the CUDA backend only.
#if FLUXION_TEST_CUDA

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "fluxion/backend/common/codegen_parts.h"
#include "fluxion/backend/common/fused_layout.h"
#include "fluxion/backend/cuda/codegen_cuda.h"
#include "device_scope.h"
#include "fused_cases.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

// What the host build of a generated source needs instead of CUDA's.
const char* const kShim = R"(
#include <cstring>
struct FxDim { unsigned x; };
static FxDim blockIdx, threadIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
)";
const char* const kHostGlue = R"(
typedef unsigned short fx_f16;
typedef unsigned short fx_bf16;
static inline float fx_ld_f16(fx_f16 h) {
  _Float16 f;
  std::memcpy(&f, &h, 2);
  return (float)f;
}
static inline fx_f16 fx_st_f16(float x) {
  _Float16 f = (_Float16)x;
  fx_f16 h;
  std::memcpy(&h, &f, 2);
  return h;
}
static inline float fx_ld_bf16(fx_bf16 h) {
  unsigned u = (unsigned)h << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
static inline fx_bf16 fx_st_bf16(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (fx_bf16)0x7fffu;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (fx_bf16)(u >> 16);
}
)";

using Emulator = void (*)(unsigned grid, void** args);

// The tape's kernels built for the host: emu_<entry>(grid, args) runs the
// entry point's grid (args as cudaLaunchKernel takes them).
struct HostKernels {
  void* lib = nullptr;
  Emulator entry[cu::kFusedEntries] = {};
};

HostKernels build_on_host(const cu::FusedSource& src, const detail::Ir& tape,
                          std::string& error) {
  std::string s = src.all();
  // The CUDA glue (PTX conversions) -> the host's.
  size_t a = s.find("// ---- generated kernel (CUDA) ----");
  size_t b = s.find("// V elements moved as one");
  if (a == std::string::npos || b == std::string::npos) {
    error = "glue not found";
    return {};
  }
  s = kShim + s.substr(0, a) + kHostGlue + s.substr(b);
  // Drivers: every block and thread in turn (no entry point synchronizes
  // its threads, so any order is one the GPU could run).
  std::ostringstream d;
  const size_t nin = tape.inputs.size();
  auto ptype = [&](size_t k) {
    return std::string(codegen::storage_type(
        tape.values[k < nin ? tape.inputs[k] : tape.outputs[0]].dtype));
  };
  for (int e = 0; e < cu::kFusedEntries; ++e) {
    const bool wide = e % 2 == 1;
    const bool strided = e >= cu::kStrided32;
    d << "extern \"C\" void emu_" << cu::kFusedEntryNames[e]
      << "(unsigned grid, void** a) {\n"
      << "  gridDim.x = grid; blockDim.x = " << cu::kFusedThreads << ";\n"
      << "  for (unsigned b = 0; b < grid; ++b)\n"
      << "    for (unsigned t = 0; t < blockDim.x; ++t) {\n"
      << "      blockIdx.x = b; threadIdx.x = t;\n      "
      << cu::kFusedEntryNames[e] << "(";
    for (size_t k = 0; k < nin; ++k) {
      d << "*(const " << ptype(k) << "**)a[" << k << "], ";
    }
    const char* index = wide ? "unsigned long long" : "unsigned";
    d << "*(" << ptype(nin) << "**)a[" << nin << "], *(" << index << "*)a["
      << nin + 1 << "]";
    if (strided) {
      d << ", *(" << (wide ? "FxLayout<unsigned long long, long long>"
                           : "FxLayout<unsigned, int>")
        << "*)a[" << nin + 2 << "]";
    }
    d << ");\n    }\n}\n";
  }
  s += d.str();
  auto dir = std::filesystem::temp_directory_path() /
             ("fluxion-host-kernels-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  static int count = 0;
  auto cpp = dir / ("k" + std::to_string(count) + ".cpp");
  auto so = dir / ("k" + std::to_string(count++) + ".so");
  std::ofstream(cpp) << s;
  const char* cxx = std::getenv("FLUXION_CXX");
  std::string cmd = std::string(cxx ? cxx : "g++") +
                    " -O1 -std=c++17 -shared -fPIC -w -o " + so.string() +
                    " " + cpp.string() + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    error = "host build failed: " + cmd;
    std::filesystem::remove_all(dir);
    return {};
  }
  HostKernels k;
  k.lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!k.lib) {
    error = dlerror();
    return {};
  }
  for (int e = 0; e < cu::kFusedEntries; ++e) {
    k.entry[e] = reinterpret_cast<Emulator>(dlsym(
        k.lib, (std::string("emu_") + cu::kFusedEntryNames[e]).c_str()));
  }
  std::filesystem::remove_all(dir);
  return k;
}

// Element i of a row-contiguous buffer of dtype t, as a double.
double element(const unsigned char* p, Dtype t, size_t i) {
  double v = 0;
  dispatch_all(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, complex64_t>) {
      T x;
      std::memcpy(&x, p + i * sizeof(T), sizeof(T));
      v = static_cast<double>(static_cast<float>(x));
      if constexpr (std::is_same_v<T, double> || std::is_integral_v<T>) {
        v = static_cast<double>(x);
      }
    }
  });
  return v;
}

// The fused group of f(args) (its root is f's only output) run by the
// host build of its kernels through plan_launch, against eager f.
void check_on_host(const Fn& f, const std::vector<array>& args,
                   const std::string& what, bool wide, double rtol,
                   cu::FusedEntry expect) {
  SCOPED_TRACE(what + (wide ? " (64-bit)" : ""));
  OnDevice cpu(Device::cpu);
  auto outs = compile(f)(args);
  auto* node = dynamic_cast<const Compiled*>(&outs[0].primitive());
  ASSERT_NE(node, nullptr) << "the root did not fuse";
  auto src = cu::fused_kernel_source(node->tape());
  std::string error;
  static std::map<std::string, HostKernels> built;  // by source
  auto it = built.find(src.all());
  if (it == built.end()) {
    it = built.emplace(src.all(), build_on_host(src, node->tape(), error))
             .first;
  }
  ASSERT_NE(it->second.lib, nullptr) << error;
  std::vector<array> in = outs[0].inputs();
  eval(in);
  const Shape& shape = outs[0].shape();
  auto layout = codegen::fused_layout(*node, in, shape);
  ASSERT_NE(layout.kind, codegen::FusedLayout::kUnfused);
  std::vector<const void*> ptrs;
  std::vector<size_t> sizes;
  for (auto& a : in) {
    ptrs.push_back(a.raw_data());
    sizes.push_back(a.itemsize());
  }
  const Dtype ot = outs[0].dtype();
  const int64_t n = outs[0].size();
  std::vector<unsigned char> buf(n * ot.size + 64);
  void* po = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64);
  auto launch = cu::plan_launch(src, node->tape(), layout, ptrs, sizes, po,
                                ot.size, n, wide);
  EXPECT_EQ(launch.entry, wide ? cu::FusedEntry(expect + 1) : expect);
  std::vector<void*> argv;
  for (auto& p : ptrs) {
    argv.push_back(&p);
  }
  argv.push_back(&po);
  launch.append_args(argv);
  it->second.entry[launch.entry](launch.blocks, argv.data());
  auto want = to_vector<double>(f(args)[0]);
  ASSERT_EQ(want.size(), size_t(n));
  size_t bad = 0, first = 0;
  for (int64_t i = 0; i < n; ++i) {
    double g = element(static_cast<unsigned char*>(po), ot, i);
    bool ok = (std::isnan(g) && std::isnan(want[i])) ||
              std::abs(g - want[i]) <= rtol * (1 + std::abs(want[i]));
    if (!ok && bad++ == 0) {
      first = i;
    }
  }
  EXPECT_EQ(bad, 0u) << "first at " << first << ": "
                     << element(static_cast<unsigned char*>(po), ot, first)
                     << " vs " << want[first];
}

Fn two_inputs() {
  return [](const std::vector<array>& in) {
    return std::vector<array>{tanh(in[0] * in[1] + 1) * in[0] - in[1]};
  };
}

}  // namespace

TEST(FusedKernelsOnHost, EveryEntryPointAndLayout) {
  for (Dtype t : {float32, bfloat16, float64}) {
    double rtol = t == bfloat16 ? 2e-2 : 1e-5;
    std::string n = dtype_name(t);
    auto big = fused_input({{4099}, t, -2, 2}, 1);
    auto other = fused_input({{4099}, t, -2, 2}, 2);
    auto m = fused_input({{37, 64}, t, -2, 2}, 3);
    auto m2 = fused_input({{64, 37}, t, -2, 2}, 4);
    auto row = fused_input({{64}, t, -2, 2}, 5);
    auto col = fused_input({{37, 1}, t, -2, 2}, 6);
    auto one = fused_input({{}, t, 1, 2}, 7);
    auto cube = fused_input({{3, 5, 7, 2, 3}, t, -2, 2}, 8);
    for (bool wide : {false, true}) {
      Fn f = two_inputs();
      check_on_host(f, {big, other}, n + " packed, a tail", wide, rtol,
                    cu::kPacked32);
      check_on_host(f, {m, one}, n + " packed, a scalar", wide, rtol,
                    cu::kPacked32);
      check_on_host(f, {one, m}, n + " packed, scalar first", wide, rtol,
                    cu::kPacked32);
      check_on_host(f, {slice(big, {1}, {4099}), slice(other, {0}, {4098})},
                    n + " unaligned", wide, rtol, cu::kFlat32);
      check_on_host(f, {m, transpose(m2)}, n + " transposed", wide, rtol,
                    cu::kStrided32);
      check_on_host(f, {m, row}, n + " row broadcast", wide, rtol,
                    cu::kStrided32);
      check_on_host(f, {m, col}, n + " column broadcast", wide, rtol,
                    cu::kStrided32);
      check_on_host(f, {slice(m, {0, 0}, {37, 64}, {2, 3}), one},
                    n + " stepped slice", wide, rtol, cu::kStrided32);
      check_on_host(f, {transpose(cube, {4, 2, 0, 3, 1}), one},
                    n + " five strided dims", wide, rtol, cu::kStrided32);
      check_on_host(f, {broadcast_to(row, {3, 37, 64}), col},
                    n + " broadcast both", wide, rtol, cu::kStrided32);
    }
  }
}

// Mixed dtypes (a float16 scalar, a bool output, a reshaped input) and
// the fused cases of fused_cases.h on their contiguous inputs.
TEST(FusedKernelsOnHost, MixedDtypesAndFusedCases) {
  auto x = fused_input({{5, 31}, float32, -2, 2}, 1);
  auto h = fused_input({{}, float16, -1, 1}, 2);
  auto r = fused_input({{155}, bfloat16, -2, 2}, 3);
  Fn f = [](const std::vector<array>& in) {
    return std::vector<array>{
        greater(exp(in[0]) * astype(in[1], float32),
                astype(reshape(in[2], {5, 31}), float32))};
  };
  check_on_host(f, {x, h, r}, "bool out", false, 0, cu::kPacked32);
  for (auto& c : fused_cases()) {
    if (c.name.rfind("integer_", 0) == 0 || c.name == "bool" ||
        c.name == "half_scalars" || c.name == "unary_float32") {
      double rtol = c.name == "half_scalars" ? 2e-2 : 1e-5;
      check_on_host(c.f, fused_inputs(c), c.name, false, rtol,
                    cu::kPacked32);
    }
  }
}

#endif  // FLUXION_TEST_CUDA
