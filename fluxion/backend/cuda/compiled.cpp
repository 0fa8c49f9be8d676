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
  const int64_t n = static_cast<int64_t>(out.size());
  // Donate an input's buffer of the output's dtype and shape when no one
  // else can see it (the kernels read each element before writing it).
  bool donated = false;
  for (size_t i = 0; contiguous && i < inputs.size() && !donated; ++i) {
    const array& in = inputs[i];
    if (!codegen::scalar_input(tape(), i) && in.dtype() == out.dtype() &&
        in.shape() == out.shape() && cu::donatable(in)) {
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
  std::vector<size_t> itemsize;
  for (auto& in : inputs) {
    ptrs.push_back(cu::ptr<const void>(in));
    itemsize.push_back(in.itemsize());
  }
  void* po = cu::ptr<void>(out);
  cu::FusedLaunch launch = cu::plan_launch(k.fused, tape(), layout, ptrs,
                                           itemsize, po, out.itemsize(), n);
  std::vector<void*> args;
  for (auto& p : ptrs) {
    args.push_back(&p);
  }
  args.push_back(&po);
  launch.append_args(args);
  std::string why;
  const cu::JitModule* m =
      k.module(cu::device_arch(stream().device.index), launch.entry, why);
  if (m == nullptr) {
    // Nothing was launched: the nodes one by one compute the output, whose
    // buffer the fallback replaces with theirs.
    report_once(*this, why);
    fallback();
    return;
  }
  cudaError_t err = cudaLaunchKernel(
      reinterpret_cast<const void*>(m->kernels[0]), dim3(launch.blocks),
      dim3(cu::kFusedThreads), args.data(), 0, cu::current_stream());
  if (err != cudaSuccess) {
    // Refused at launch (a configuration error is not sticky): nothing
    // ran, so the nodes one by one still give the right result.
    cudaGetLastError();
    report_once(*this, std::string("cudaLaunchKernel: ") +
                           cudaGetErrorString(err));
    fallback();
    return;
  }
  cu::count_fused_launch();
}

}  // namespace fluxion
