// The Compiled primitive on the CPU: the kernel generated from the tape
// (codegen.h), over the output's elements (contiguous or strided entry
// point), split over the thread pool; without a kernel, the fused nodes
// evaluated one by one.
#include "fluxion/compiled.h"

#include "fluxion/backend/common/fused_layout.h"
#include "fluxion/backend/cpu/codegen.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

namespace {

void eval_cpu_node(array& node, std::vector<array>& outs) {
  node.primitive().eval_cpu(node.inputs(), outs);
}

}  // namespace

void Compiled::eval_cpu(const std::vector<array>& inputs,
                        std::vector<array>& outputs) {
  array& out = outputs[0];
  // The CPU's source for this tape, generated and built once.
  struct Built {
    std::string source;
    const cpu::Kernel* kernel;
  };
  const bool reduction = cpu::has_reduction(tape());
  const Built& built = backend_kernel<Built>(Device::cpu, [&] {
    std::string src = reduction ? cpu::reduce_kernel_source(tape())
                                : cpu::kernel_source(tape());
    const cpu::Kernel* k = src.empty() ? nullptr : cpu::load_kernel(src);
    return Built{std::move(src), k};
  });
  const cpu::Kernel* kernel = built.kernel;
  if (!kernel) {
    eval_fallback(inputs, out, eval_cpu_node);
    return;
  }
  if (reduction) {
    if (!cpu::run_reduction(tape(), *kernel, inputs, out)) {
      eval_fallback(inputs, out, eval_cpu_node);
    }
    return;
  }
  const Shape& shape = out.shape();
  auto layout = codegen::fused_layout(*this, inputs, shape);
  if (layout.kind == codegen::FusedLayout::kUnfused) {
    eval_fallback(inputs, out, eval_cpu_node);
    return;
  }
  const bool contiguous = layout.kind == codegen::FusedLayout::kContiguous;
  // Donate an input buffer of the output's size and dtype when possible.
  bool donated = false;
  for (auto& in : inputs) {
    if (contiguous && in.dtype() == out.dtype() && in.shape() == shape &&
        in.is_donatable()) {
      out.copy_shared_buffer(in);
      donated = true;
      break;
    }
  }
  if (!donated) {
    out.set_data(out.nbytes());
  }
  std::vector<void*> ptrs;
  for (auto& in : inputs) {
    ptrs.push_back(in.raw_data());
  }
  void* dst = out.raw_data();
  int64_t n = static_cast<int64_t>(out.size());
  if (n == 0) {
    return;
  }
  if (contiguous) {
    cpu::parallel_for(n, cpu::kElementwiseGrain, [&](int64_t b, int64_t e) {
      kernel->contiguous(ptrs.data(), dst, b, e);
    });
    return;
  }
  // Strided: over the collapsed dimensions.
  int nd = static_cast<int>(layout.shape.size());
  const std::vector<int64_t>& shape64 = layout.shape;
  std::vector<int64_t> flat;
  for (auto& s : layout.strides) {
    flat.insert(flat.end(), s.begin(), s.end());
  }
  int64_t inner = shape64.back();
  int64_t rows = n / inner;
  int64_t grain = std::max<int64_t>(1, cpu::kElementwiseGrain / inner);
  cpu::parallel_for(rows, grain, [&](int64_t b, int64_t e) {
    kernel->strided(ptrs.data(), dst, shape64.data(), flat.data(), nd, b, e);
  });
}

}  // namespace fluxion
