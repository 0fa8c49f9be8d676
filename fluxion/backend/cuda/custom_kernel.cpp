// CustomKernel on the GPU (ops/custom_kernel.h): mx.fast.cuda_kernel's
// source generated for these inputs (ops/cuda_kernel_source.h), compiled
// by NVRTC for the device's architecture with the toolkit's headers and
// cached in memory and on disk (jit_module.h); a precompiled kernel's
// image loaded as given. Inputs are made row-contiguous when the spec asks,
// outputs allocated (and filled with init_value when given), then the
// kernel is launched on the node's stream with MLX's geometry: the grid is
// in threads, so the blocks are ceil(grid / threadgroup) per axis.
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "fluxion/backend/cuda/cuda.h"
#include "fluxion/backend/cuda/jit_module.h"
#include "fluxion/backend/cuda/nvrtc_compile.h"
#include "fluxion/ops/cuda_kernel_source.h"
#include "fluxion/ops/custom_kernel.h"

namespace fluxion::fast {

namespace {

// The module holding the kernel; raises when there is none: a source
// NVRTC rejects is the user's error (std::invalid_argument with NVRTC's
// log, ValueError in Python), anything else (no NVRTC, no headers, an image
// the driver refuses) a runtime_error.
const cu::JitModule* kernel_module(const CustomKernelSpec& spec,
                                   const std::string& entry,
                                   const std::string& source, int arch) {
  const std::string where =
      (spec.kind == KernelKind::cuda ? "[cuda_kernel]"
                                     : "[precompiled_cuda_kernel]") +
      std::string(" Kernel '") + spec.name + "': ";
  if (spec.kind == KernelKind::cuda_binary) {
    std::string why;
    const cu::JitModule* m = cu::image_module(spec.source, {entry}, why);
    if (!m) {
      throw std::runtime_error(where + "cannot load the compiled source (" +
                               why + ").");
    }
    return m;
  }
  std::string no_headers;
  cu::JitOptions options;
  options.nvrtc_options = cu::nvrtc::user_kernel_options(&no_headers);
  options.program = entry + ".cu";
  cu::JitError error;
  const cu::JitModule* m = cu::jit_module(source, arch, {entry}, options,
                                          error);
  if (m) {
    return m;
  }
  if (error.source_error) {
    throw std::invalid_argument(
        where + "NVRTC failed to compile the kernel" +
        (no_headers.empty() ? "" : " (" + no_headers + ")") + ": " +
        error.why);
  }
  throw std::runtime_error(where + "no kernel: " + error.why);
}

// Kernel parameters: cudaLaunchKernel takes the address of each value,
// which must stay put until the launch (hence a deque).
struct Params {
  std::deque<const void*> ptrs;
  std::deque<int32_t> ints;
  std::deque<int64_t> longs;
  std::deque<uint8_t> bools;
  std::deque<float> floats;
  std::deque<std::vector<int32_t>> shapes;
  std::deque<std::vector<int64_t>> strides;
  std::vector<void*> args;

  void ptr(const void* p) { args.push_back(&ptrs.emplace_back(p)); }
  void i32(int32_t v) { args.push_back(&ints.emplace_back(v)); }
  void f32(float v) { args.push_back(&floats.emplace_back(v)); }
  void b(bool v) { args.push_back(&bools.emplace_back(v ? 1 : 0)); }
  // A Shape / Strides parameter: kCustomKernelMaxDims entries by value.
  template <typename T, typename V>
  void dims(std::deque<std::vector<T>>& store, const V& v) {
    auto& d = store.emplace_back(kCustomKernelMaxDims, T{0});
    for (size_t i = 0; i < v.size(); ++i) {
      d[i] = static_cast<T>(v[i]);
    }
    args.push_back(d.data());
  }
};

unsigned blocks(int threads, int per_block) {
  return static_cast<unsigned>((int64_t(threads) + per_block - 1) /
                               per_block);
}

}  // namespace

void CustomKernel::eval_gpu(const std::vector<array>& inputs,
                            std::vector<array>& outputs) {
  if (spec_.kind == KernelKind::metal) {
    throw std::runtime_error("[metal_kernel] No Metal back-end.");
  }
  std::vector<array> in;
  for (auto& x : inputs) {
    if (spec_.ensure_row_contiguous && !x.flags().row_contiguous) {
      in.push_back(cu::contiguous(x));
      cu::keep_alive(in.back());
    } else {
      in.push_back(x);
    }
  }
  for (auto& out : outputs) {
    cu::alloc(out);
    if (launch_.init_value) {
      array value(*launch_.init_value, out.dtype());
      cu::fill(value, out);
      cu::keep_alive(value);
    }
  }

  // The module: generated for these dtypes, or the user's image.
  std::string entry = spec_.name;
  std::string source;
  if (spec_.kind == KernelKind::cuda) {
    std::vector<Dtype> in_dtypes, out_dtypes;
    std::vector<int> in_ndims;
    for (auto& x : in) {
      in_dtypes.push_back(x.dtype());
      in_ndims.push_back(static_cast<int>(x.ndim()));
    }
    for (auto& o : outputs) {
      out_dtypes.push_back(o.dtype());
    }
    entry = cuda_kernel_name(spec_, launch_.template_args);
    source = cuda_kernel_source(spec_, launch_.template_args, in_dtypes,
                                in_ndims, out_dtypes);
  }
  const int arch = cu::device_arch(stream().device.index);
  const cu::JitModule* m = kernel_module(spec_, entry, source, arch);

  // The parameters, in the generated signature's order.
  Params p;
  for (size_t i = 0; i < in.size(); ++i) {
    const array& x = in[i];
    p.ptr(cu::ptr<const void>(x));
    auto lp = layout_params(spec_, i, static_cast<int>(x.ndim()));
    // The call checks this too; an imported node's inputs may differ.
    if ((lp.shape || lp.strides) && x.ndim() > kCustomKernelMaxDims) {
      throw std::invalid_argument(
          "[cuda_kernel] Kernel '" + spec_.name + "': input '" +
          spec_.input_names[i] + "' has " + std::to_string(x.ndim()) +
          " dimensions; its shape and strides pass at most " +
          std::to_string(kCustomKernelMaxDims) + ".");
    }
    if (lp.shape) {
      p.dims(p.shapes, x.shape());
    }
    if (lp.strides) {
      p.dims(p.strides, x.strides());
    }
    if (lp.ndim) {
      p.i32(static_cast<int32_t>(x.ndim()));
    }
  }
  for (auto& o : outputs) {
    p.ptr(cu::ptr<void>(o));
  }
  for (auto& sc : launch_.scalars) {
    if (sc.kind == 'b') {
      p.b(sc.value != 0);
    } else if (sc.kind == 'i') {
      p.i32(static_cast<int32_t>(sc.value));
    } else {
      p.f32(static_cast<float>(sc.value));
    }
  }

  const auto& g = launch_.grid;
  const auto& t = launch_.threadgroup;
  dim3 grid(blocks(g[0], t[0]), blocks(g[1], t[1]), blocks(g[2], t[2]));
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) {
    return;  // an empty grid runs nothing (outputs as allocated / filled)
  }
  const void* fn = reinterpret_cast<const void*>(m->kernels[0]);
  const std::string op = "cuda_kernel " + entry;
  if (spec_.shared_memory > 48 * 1024) {
    // Above 48 KiB a kernel must opt in to its dynamic shared memory.
    cu::check(cudaFuncSetAttribute(fn,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   spec_.shared_memory),
              op.c_str());
  }
  cu::check(cudaLaunchKernel(fn, grid, dim3(t[0], t[1], t[2]), p.args.data(),
                             static_cast<size_t>(spec_.shared_memory),
                             cu::current_stream()),
            op.c_str());
}

}  // namespace fluxion::fast
