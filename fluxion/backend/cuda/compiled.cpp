// The Compiled primitive on the GPU: one generated kernel for the fused
// nodes (codegen_cuda.h), compiled by NVRTC for the device's architecture
// and cached (jit_module.h), launched on the node's stream over the
// output's elements: the packed entry point when every input is
// row-contiguous of the output's size or a broadcast scalar and the
// arrays are 16-byte aligned, the flat one when they are not aligned, the
// strided one otherwise; 32-bit index arithmetic when the sizes allow.
// Without a kernel (NVRTC missing or failing, a module that does not
// load, a strided input behind an absorbed reshape, more collapsed
// dimensions than the strided kernel takes) the fused nodes are evaluated
// one by one with their eager kernels, their intermediates kept alive
// until the stream has run them; the first such reason is logged once.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>

#include "fluxion/backend/common/codegen_parts.h"
#include "fluxion/backend/common/fused_layout.h"
#include "fluxion/backend/cuda/codegen_cuda.h"
#include "fluxion/backend/cuda/cuda.h"
#include "fluxion/backend/cuda/jit_module.h"
#include "fluxion/compiled.h"

namespace fluxion {

namespace {

void eval_gpu_node(array& node, std::vector<array>& outs) {
  node.primitive().eval_gpu(node.inputs(), outs);
  for (auto& o : outs) {
    cu::keep_alive(o);
  }
}

// Why compiled functions run unfused, said once per process on stderr:
// the cause (no NVRTC, a compile error with its log) is usually the same
// for every kernel, and the results are right either way.
void report_once(const Compiled& c, const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::ostringstream name;
    c.print(name);
    std::fprintf(stderr,
                 "[fluxion] compile: no GPU kernel for %s, so its fused "
                 "nodes run one by one (reported once): %s\n",
                 name.str().c_str(), why.c_str());
  });
}

// What the GPU keeps per Compiled node: the generated source (made on the
// first evaluation) and a module for each entry point and device
// architecture met (entry points are compiled when first needed; a
// process may drive GPUs of different architectures).
struct GpuKernel {
  cu::FusedSource fused;
  struct Modules {
    std::mutex mu;
    struct Entry {
      int arch;
      cu::FusedEntry entry;
      const cu::JitModule* module;  // null: failed, for `why`
      std::string why;
    };
    std::vector<Entry> built;
  };
  std::unique_ptr<Modules> modules = std::make_unique<Modules>();

  const cu::JitModule* module(int arch, cu::FusedEntry entry,
                              std::string& why) const {
    {
      std::lock_guard<std::mutex> lk(modules->mu);
      for (auto& b : modules->built) {
        if (b.arch == arch && b.entry == entry) {
          why = b.why;
          return b.module;
        }
      }
    }
    // Built at most once per source and architecture (jit_module), so a
    // race between two streams here only repeats the lookup.
    const cu::JitModule* m = cu::jit_module(
        fused.source(entry), arch, {cu::kFusedEntryNames[entry]}, &why);
    std::lock_guard<std::mutex> lk(modules->mu);
    modules->built.push_back({arch, entry, m, why});
    return m;
  }
};

bool fits_int32(int64_t v) {
  return v >= 0 && v <= std::numeric_limits<int32_t>::max();
}

// The strided entry point's layout parameter, {ndim, shape[kFusedMaxDims],
// strides[k][kFusedMaxDims]}, in elements of T (int32_t or int64_t: every
// field has the same size, so the device struct has no padding).
template <typename T>
std::vector<T> layout_param(const codegen::FusedLayout& l) {
  const size_t nd = l.shape.size();
  std::vector<T> p(1 + cu::kFusedMaxDims * (1 + l.strides.size()), 0);
  p[0] = static_cast<T>(nd);
  for (size_t d = 0; d < nd; ++d) {
    p[1 + d] = static_cast<T>(l.shape[d]);
    for (size_t k = 0; k < l.strides.size(); ++k) {
      p[1 + cu::kFusedMaxDims * (1 + k) + d] = static_cast<T>(l.strides[k][d]);
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

}  // namespace

void Compiled::eval_gpu(const std::vector<array>& inputs,
                        std::vector<array>& outputs) {
  array& out = outputs[0];
  const GpuKernel& k = backend_kernel<GpuKernel>(Device::gpu, [&] {
    return GpuKernel{cu::fused_kernel_source(tape())};
  });
  auto fallback = [&](bool layout = false) {
    cu::count_fused_fallback(layout);
    eval_fallback(inputs, out, eval_gpu_node);
  };
  if (k.fused.empty()) {
    report_once(*this, "more inputs than a generated kernel takes");
    fallback();
    return;
  }
  const auto layout = codegen::fused_layout(*this, inputs, out.shape());
  if (layout.kind == codegen::FusedLayout::kUnfused ||
      (layout.kind == codegen::FusedLayout::kStrided &&
       layout.shape.size() > static_cast<size_t>(cu::kFusedMaxDims))) {
    fallback(/*layout=*/true);
    return;
  }
  const bool contiguous = layout.kind == codegen::FusedLayout::kContiguous;
  const Device gpu{Device::gpu};
  const int64_t n = static_cast<int64_t>(out.size());
  // Donate an input's buffer of the output's dtype and shape when no one
  // else can see it (the kernels read each element before writing it).
  bool donated = false;
  for (size_t i = 0; contiguous && i < inputs.size() && !donated; ++i) {
    const array& in = inputs[i];
    if (!codegen::scalar_input(tape(), i) && in.dtype() == out.dtype() &&
        in.shape() == out.shape() && in.is_donatable(gpu)) {
      out.copy_shared_buffer(in);
      donated = true;
    }
  }
  if (!donated) {
    cu::alloc(out);
  }
  if (n == 0) {
    return;
  }
  std::vector<const void*> ptrs;
  for (auto& in : inputs) {
    ptrs.push_back(cu::ptr<const void>(in));
  }
  void* po = cu::ptr<void>(out);
  std::vector<void*> args;
  for (auto& p : ptrs) {
    args.push_back(&p);
  }
  args.push_back(&po);
  uint32_t n32 = static_cast<uint32_t>(n);
  uint64_t n64 = static_cast<uint64_t>(n);
  std::vector<int32_t> l32;
  std::vector<int64_t> l64;
  cu::FusedEntry entry;
  unsigned blocks;
  if (contiguous) {
    const int v = k.fused.pack;
    auto aligned = [&](const void* p, size_t itemsize) {
      return reinterpret_cast<uintptr_t>(p) % (itemsize * v) == 0;
    };
    bool packed = aligned(po, out.itemsize());
    for (size_t i = 0; i < inputs.size(); ++i) {
      packed = packed && (codegen::scalar_input(tape(), i) ||
                          aligned(ptrs[i], inputs[i].itemsize()));
    }
    const bool small = fits_int32(n);
    if (packed) {
      entry = small ? cu::kPacked32 : cu::kPacked64;
      const int64_t per_block = int64_t(cu::kFusedThreads) * k.fused.unroll;
      blocks = static_cast<unsigned>(
          std::max<int64_t>(1, (n / v + per_block - 1) / per_block));
    } else {
      entry = small ? cu::kFlat32 : cu::kFlat64;
      blocks = cu::blocks_for(n, 4);
    }
    args.push_back(small ? static_cast<void*>(&n32) : &n64);
  } else {
    const bool small = strided_fits_int32(layout, n);
    entry = small ? cu::kStrided32 : cu::kStrided64;
    blocks = cu::blocks_for(n, 4);
    if (small) {
      l32 = layout_param<int32_t>(layout);
      args.push_back(&n32);
      args.push_back(l32.data());
    } else {
      l64 = layout_param<int64_t>(layout);
      args.push_back(&n64);
      args.push_back(l64.data());
    }
  }
  std::string why;
  const cu::JitModule* m =
      k.module(cu::device_arch(stream().device.index), entry, why);
  if (m == nullptr) {
    // Nothing was launched: the nodes one by one compute the output, whose
    // buffer the fallback replaces with theirs.
    report_once(*this, why);
    fallback();
    return;
  }
  cu::check(cudaLaunchKernel(reinterpret_cast<const void*>(m->kernels[0]),
                             dim3(blocks), dim3(cu::kFusedThreads),
                             args.data(), 0, cu::current_stream()),
            "compile");
  cu::count_fused_launch();
}

}  // namespace fluxion
