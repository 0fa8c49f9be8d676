// CUDA source for fused elementwise kernels (codegen_cuda.h). Like the
// CPU's, the source includes no header (NVRTC has no system headers): the
// shared functors' text (kernel_source.h), which compiles as device code
// because NVRTC defines __CUDACC__ (FLUXION_HOST_DEVICE, CUDA's built-in
// math functions: math.h); the half types' storage and conversions below,
// the very PTX conversions cuda_fp16.h and cuda_bf16.h use on these GPUs,
// so values round as in the eager kernels without those large headers
// (they would triple the compile time); fx_elem, the fused expression
// (codegen_parts.h, shared with the CPU); and the entry points. Half types
// are computed in float and rounded after every op, as the eager GPU
// kernels do (elementwise.cuh: convert<Out>(Op{}(convert<compute_t>(x)))).
#include "fluxion/backend/cuda/codegen_cuda.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>

#include "fluxion/backend/common/codegen_parts.h"
#include "fluxion/backend/common/kernel_source.h"

namespace fluxion::cu {

const char* const kFusedEntryNames[kFusedEntries] = {
    "fx_packed32", "fx_packed64", "fx_flat32",
    "fx_flat64",   "fx_strided32", "fx_strided64"};

namespace {

using namespace codegen;

// The glue after the functors. bfloat16 rounding uses cvt.rn.bf16.f32
// from sm_80 on, as __float2bfloat16 does there; below, the same rounding
// in integer arithmetic (NaN becomes 0x7fff, as cuda_bf16.h's software
// path makes it).
const char* const kCudaBase = R"(
// ---- generated kernel (CUDA) ----
typedef unsigned short fx_f16;
typedef unsigned short fx_bf16;
__device__ __forceinline__ float fx_ld_f16(fx_f16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ fx_f16 fx_st_f16(float f) {
  fx_f16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float fx_ld_bf16(fx_bf16 h) {
  return __uint_as_float((unsigned)h << 16);
}
__device__ __forceinline__ fx_bf16 fx_st_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  fx_bf16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (fx_bf16)0x7fffu;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (fx_bf16)(u >> 16);
#endif
}
// V elements moved as one 16-byte (or narrower) access.
template <typename T, int V>
struct alignas(sizeof(T) * V) FxPack {
  T v[V];
};
)";

struct Gen {
  const detail::Ir& tape;
  size_t nin;
  Dtype out_t;

  Dtype in_t(size_t k) const { return tape.values[tape.inputs[k]].dtype; }
  std::string in_s(size_t k) const { return storage_type(in_t(k)); }
  std::string out_s() const { return storage_type(out_t); }

  // "const float* __restrict__ p0, ..., float* __restrict__ po"
  std::string params() const {
    std::ostringstream s;
    for (size_t k = 0; k < nin; ++k) {
      s << "const " << in_s(k) << "* __restrict__ p" << k << ", ";
    }
    s << out_s() << "* __restrict__ po";
    return s.str();
  }
  std::string args() const {
    std::ostringstream s;
    for (size_t k = 0; k < nin; ++k) {
      s << "p" << k << ", ";
    }
    s << "po";
    return s.str();
  }
  // Broadcast scalars, loaded once per thread.
  std::string hoist_scalars() const {
    std::ostringstream s;
    for (size_t k = 0; k < nin; ++k) {
      if (scalar_input(tape, k)) {
        s << "  const " << compute_type(in_t(k)) << " s" << k << " = "
          << load(tagged("p", k) + "[0]", in_t(k)) << ";\n";
      }
    }
    return s.str();
  }
  // The stored result of fx_elem on the values `operand(k)` names.
  template <typename F>
  std::string result(F operand) const {
    std::ostringstream s;
    s << "fx_elem(";
    for (size_t k = 0; k < nin; ++k) {
      s << (k ? ", " : "") << operand(k);
    }
    s << ")";
    return store(s.str(), out_t);
  }
  // Input k at flat index `i` (a broadcast scalar: its hoisted value).
  std::string flat_operand(size_t k, const std::string& i) const {
    if (scalar_input(tape, k)) {
      return tagged("s", k);
    }
    return load(tagged("p", k) + "[" + i + "]", in_t(k));
  }

  std::string packed(int pack, int unroll) const {
    std::ostringstream s;
    s << "template <typename I>\n__device__ __forceinline__ void fx_packed("
      << params() << ", I n) {\n"
      << "  constexpr int V = " << pack << ";\n"
      << "  constexpr int U = " << unroll << ";\n"
      << hoist_scalars() << "  const I packs = n / V;\n"
      << "  const I first = (I)blockIdx.x * (I)(blockDim.x * U) + "
         "threadIdx.x;\n";
    // Every load of the thread's packs is issued before the math, so U
    // 16-byte loads per array are in flight at once.
    for (size_t k = 0; k < nin; ++k) {
      if (!scalar_input(tape, k)) {
        s << "  FxPack<" << in_s(k) << ", V> a" << k << "[U];\n";
      }
    }
    s << "#pragma unroll\n  for (int u = 0; u < U; ++u) {\n"
      << "    const I q = first + (I)u * blockDim.x;\n"
      << "    if (q < packs) {\n";
    for (size_t k = 0; k < nin; ++k) {
      if (!scalar_input(tape, k)) {
        s << "      a" << k << "[u] = reinterpret_cast<const FxPack<"
          << in_s(k) << ", V>*>(p" << k << ")[q];\n";
      }
    }
    s << "    }\n  }\n"
      << "#pragma unroll\n  for (int u = 0; u < U; ++u) {\n"
      << "    const I q = first + (I)u * blockDim.x;\n"
      << "    if (q < packs) {\n"
      << "      FxPack<" << out_s() << ", V> r;\n"
      << "#pragma unroll\n      for (int e = 0; e < V; ++e) {\n"
      << "        r.v[e] = " << result([&](size_t k) {
           return scalar_input(tape, k)
                      ? tagged("s", k)
                      : load(tagged("a", k) + "[u].v[e]", in_t(k));
         })
      << ";\n      }\n"
      << "      reinterpret_cast<FxPack<" << out_s()
      << ", V>*>(po)[q] = r;\n    }\n  }\n"
      // The n % V elements after the last pack: the last block's threads.
      << "  if (blockIdx.x == gridDim.x - 1) {\n"
      << "    for (I i = packs * V + threadIdx.x; i < n; i += blockDim.x) {\n"
      << "      po[i] = "
      << result([&](size_t k) { return flat_operand(k, "i"); })
      << ";\n    }\n  }\n}\n";
    return s.str();
  }

  std::string flat() const {
    std::ostringstream s;
    s << "template <typename I>\n__device__ __forceinline__ void fx_flat("
      << params() << ", I n) {\n"
      << hoist_scalars()
      << "  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
      << "       i += (I)gridDim.x * blockDim.x) {\n"
      << "    po[i] = "
      << result([&](size_t k) { return flat_operand(k, "i"); })
      << ";\n  }\n}\n";
    return s.str();
  }

  // The layout is a kernel parameter: its dimension loop is unrolled over
  // kFusedMaxDims with guards, so every access has a constant index and
  // reads the parameter bank (a loop over a runtime bound would copy the
  // struct to local memory for its dynamic indexing).
  std::string strided() const {
    std::ostringstream s;
    s << "template <typename I, typename S>\nstruct FxLayout {\n"
      << "  S ndim;\n  I shape[" << kFusedMaxDims << "];\n"
      << "  S strides[" << nin << "][" << kFusedMaxDims << "];\n};\n"
      << "template <typename I, typename S>\n"
      << "__device__ __forceinline__ void fx_strided(" << params()
      << ", I n, const FxLayout<I, S>& l) {\n"
      << "  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
      << "       i += (I)gridDim.x * blockDim.x) {\n"
      << "    I rem = i;\n";
    for (size_t k = 0; k < nin; ++k) {
      s << "    S o" << k << " = 0;\n";
    }
    s << "#pragma unroll\n    for (int d = " << kFusedMaxDims - 1
      << "; d >= 1; --d) {\n"
      << "      if (d < l.ndim) {\n"
      << "        const I c = rem % l.shape[d];\n"
      << "        rem /= l.shape[d];\n";
    for (size_t k = 0; k < nin; ++k) {
      s << "        o" << k << " += (S)c * l.strides[" << k << "][d];\n";
    }
    s << "      }\n    }\n";
    for (size_t k = 0; k < nin; ++k) {
      s << "    o" << k << " += (S)rem * l.strides[" << k << "][0];\n";
    }
    s << "    po[i] = " << result([&](size_t k) {
      return load(tagged("p", k) + "[" + tagged("o", k) + "]", in_t(k));
    }) << ";\n  }\n}\n";
    return s.str();
  }

  // Entry point e: an extern "C" kernel calling its body.
  std::string entry(FusedEntry e) const {
    struct Spec {
      const char* body;
      const char* index;
      const char* layout;  // the strided layout's parameter type
    };
    static const Spec specs[kFusedEntries] = {
        {"fx_packed<unsigned>", "unsigned", nullptr},
        {"fx_packed<unsigned long long>", "unsigned long long", nullptr},
        {"fx_flat<unsigned>", "unsigned", nullptr},
        {"fx_flat<unsigned long long>", "unsigned long long", nullptr},
        {"fx_strided<unsigned, int>", "unsigned", "FxLayout<unsigned, int>"},
        {"fx_strided<unsigned long long, long long>", "unsigned long long",
         "FxLayout<unsigned long long, long long>"}};
    const Spec& sp = specs[e];
    std::ostringstream s;
    s << "extern \"C\" __global__ void __launch_bounds__(" << kFusedThreads
      << ") " << kFusedEntryNames[e] << "(" << params() << ", " << sp.index
      << " n" << (sp.layout ? std::string(", ") + sp.layout + " l" : "")
      << ") {\n  " << sp.body << "(" << args() << ", n"
      << (sp.layout ? ", l" : "") << ");\n}\n";
    return s.str();
  }
};

}  // namespace

FusedSource fused_kernel_source(const detail::Ir& tape) {
  FusedSource r;
  if (tape.inputs.empty() ||
      tape.inputs.size() > static_cast<size_t>(kFusedMaxInputs)) {
    return r;
  }
  std::string elem = elem_function(tape, "__device__ __forceinline__");
  if (elem.empty()) {
    return r;
  }
  Gen g{tape, tape.inputs.size(), tape.values[tape.outputs[0]].dtype};
  // The pack: 16 bytes of the widest array read or written per element
  // (broadcast scalars are read once, outside the packs).
  size_t widest = g.out_t.size;
  for (size_t k = 0; k < g.nin; ++k) {
    if (!scalar_input(tape, k)) {
      widest = std::max<size_t>(widest, g.in_t(k).size);
    }
  }
  r.pack = widest >= 16 ? 1 : static_cast<int>(16 / widest);
  // At most ~512 copies of a node in the unrolled packed body.
  int ops = 0;
  for (auto& n : tape.nodes) {
    ops += !detail::is_view_primitive(*n.prim);
  }
  while (r.unroll > 1 && r.unroll * r.pack * ops > 512) {
    r.unroll /= 2;
  }
  std::ostringstream src;
  src << "// Generated by Fluxion's compile: one fused elementwise kernel "
         "(CUDA, NVRTC).\n#define FLUXION_GENERATED_KERNEL 1\n"
      << detail::kernel_functor_source() << kCudaBase << elem
      << g.packed(r.pack, r.unroll) << g.flat() << g.strided();
  r.common = src.str();
  for (int e = 0; e < kFusedEntries; ++e) {
    r.entries[e] = g.entry(static_cast<FusedEntry>(e));
  }
  return r;
}

namespace {

bool fits_int32(int64_t v) {
  return v >= 0 && v <= std::numeric_limits<int32_t>::max();
}

template <typename T>
std::vector<T> layout_param(const codegen::FusedLayout& l) {
  const size_t nd = l.shape.size();
  std::vector<T> p(1 + kFusedMaxDims * (1 + l.strides.size()), 0);
  p[0] = static_cast<T>(nd);
  for (size_t d = 0; d < nd; ++d) {
    p[1 + d] = static_cast<T>(l.shape[d]);
    for (size_t k = 0; k < l.strides.size(); ++k) {
      p[1 + kFusedMaxDims * (1 + k) + d] = static_cast<T>(l.strides[k][d]);
    }
  }
  return p;
}

// Whether every offset the strided kernel computes fits in int32.
bool strided_fits_int32(const codegen::FusedLayout& l, int64_t n) {
  if (!fits_int32(n)) {
    return false;
  }
  for (auto& s : l.strides) {
    int64_t span = 0;
    for (size_t d = 0; d < l.shape.size(); ++d) {
      span += (l.shape[d] - 1) * (s[d] < 0 ? -s[d] : s[d]);
    }
    if (!fits_int32(span)) {
      return false;
    }
  }
  return true;
}

// Blocks of a grid-stride entry point: about 4 elements a thread, at most
// 2^30 blocks (the loop covers the rest).
unsigned grid_stride_blocks(int64_t n) {
  const int64_t per_block = int64_t(kFusedThreads) * 4;
  return static_cast<unsigned>(
      std::clamp<int64_t>((n + per_block - 1) / per_block, 1, 1 << 30));
}

}  // namespace

void FusedLaunch::append_args(std::vector<void*>& args) {
  args.push_back(wide() ? static_cast<void*>(&n64) : &n32);
  if (entry == kStrided32) {
    args.push_back(layout32.data());
  } else if (entry == kStrided64) {
    args.push_back(layout64.data());
  }
}

FusedLaunch plan_launch(const FusedSource& src, const detail::Ir& tape,
                        const codegen::FusedLayout& layout,
                        const std::vector<const void*>& in,
                        const std::vector<size_t>& itemsize, const void* out,
                        size_t out_itemsize, int64_t n, bool wide) {
  FusedLaunch l;
  l.n32 = static_cast<uint32_t>(n);
  l.n64 = static_cast<uint64_t>(n);
  if (layout.kind == codegen::FusedLayout::kContiguous) {
    const int v = src.pack;
    auto aligned = [&](const void* p, size_t size) {
      return reinterpret_cast<uintptr_t>(p) % (size * v) == 0;
    };
    bool packed = aligned(out, out_itemsize);
    for (size_t k = 0; k < in.size(); ++k) {
      packed = packed &&
               (codegen::scalar_input(tape, k) || aligned(in[k], itemsize[k]));
    }
    const bool small = fits_int32(n) && !wide;
    if (packed) {
      l.entry = small ? kPacked32 : kPacked64;
      // Each block covers kFusedThreads * unroll packs; the last one also
      // the n % pack elements after them.
      const int64_t per_block = int64_t(kFusedThreads) * src.unroll;
      l.blocks = static_cast<unsigned>(
          std::max<int64_t>(1, (n / v + per_block - 1) / per_block));
    } else {
      l.entry = small ? kFlat32 : kFlat64;
      l.blocks = grid_stride_blocks(n);
    }
    return l;
  }
  const bool small = strided_fits_int32(layout, n) && !wide;
  l.entry = small ? kStrided32 : kStrided64;
  l.blocks = grid_stride_blocks(n);
  if (small) {
    l.layout32 = layout_param<int32_t>(layout);
  } else {
    l.layout64 = layout_param<int64_t>(layout);
  }
  return l;
}

std::string FusedSource::all() const {
  std::string s = common;
  for (auto& e : entries) {
    s += e;
  }
  return s;
}

}  // namespace fluxion::cu
