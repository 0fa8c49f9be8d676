// User kernels: MLX's mx.fast.metal_kernel, mx.fast.cuda_kernel and
// mx.fast.precompiled_cuda_kernel, one CustomKernel primitive for the three
// (as MLX), told apart by the spec's kind.
//
// Metal (every Fluxion build lacks it), with MLX's semantics there: a
// kernel object can be made, but a call raises std::runtime_error
// "[metal_kernel] No Metal back-end." -- except while export_function
// traces, where the call is recorded as a CustomKernel node on a
// placeholder GPU stream (a GPU stream is required: any other raises
// std::invalid_argument "Only supports the GPU"), so a model holding Metal
// kernels can be exported here and run where Metal is. Nothing executes
// the Metal source: evaluating the node raises the same runtime_error.
//
// CUDA: the call makes a CustomKernel node on a GPU stream (a CPU stream
// raises std::invalid_argument "[cuda_kernel] Only supports the GPU.", as
// MLX's; without a GPU the GPU stream itself cannot be had). The CUDA
// backend generates the kernel's source from the spec and the inputs'
// dtypes (cuda_kernel_source.h), compiles it with NVRTC (cached in memory
// and on disk) and launches it; a source NVRTC rejects raises
// std::invalid_argument carrying NVRTC's log when the node is evaluated
// (MLX raises at evaluation too). A precompiled kernel is the user's PTX or
// CUBIN, loaded as given, its scalars passed after the outputs.
//
// Every kind: the rules (vjp, jvp, vmap) raise, output shapes are given,
// not inferred (a shapeless replay raises), the node is exported with its
// spec and launch and rebuilt by CustomKernel::from_state. It is the one
// primitive without an op-spec case (it runs no fixed computation);
// tests/python/test_metal_kernel.py and test_cuda_custom_kernel.py cover it.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion::fast {

// One template argument: an int, a bool or a dtype.
struct KernelTemplateArg {
  std::string name;
  char kind;  // 'i' int, 'b' bool, 'd' dtype
  int64_t value = 0;
  Dtype dtype = float32;
};

// One scalar argument of a precompiled kernel, passed by value after the
// outputs as MLX does: bool, int (an int32) or float (a float32).
struct KernelScalar {
  char kind;  // 'b', 'i' or 'f'
  double value = 0;
};

enum class KernelKind : char {
  metal = 'm',
  cuda = 'c',         // source compiled by NVRTC
  cuda_binary = 'p',  // precompiled PTX / CUBIN (in `source`)
};

struct CustomKernelSpec {
  KernelKind kind = KernelKind::metal;
  std::string name;
  std::vector<std::string> input_names, output_names;
  std::string source, header;
  bool ensure_row_contiguous = true;
  bool atomic_outputs = false;
  std::string math_mode;  // metal: "" (default), "safe" or "fast"
  int shared_memory = 0;  // cuda: dynamic shared memory, bytes
};

// A call's launch: grid (in threads, as MLX's) and threadgroup (threads
// per block), template arguments, the outputs' initial value, and a
// precompiled kernel's scalars.
struct KernelLaunch {
  std::vector<int> grid, threadgroup;
  std::vector<KernelTemplateArg> template_args;
  std::optional<double> init_value;
  std::vector<KernelScalar> scalars;
};

// The call of a kernel object: checks the arguments, then raises (no
// Metal) or, under export tracing, returns the recorded outputs.
std::vector<array> metal_kernel_call(const CustomKernelSpec& spec,
                                     const std::vector<array>& inputs,
                                     const std::vector<Shape>& output_shapes,
                                     const std::vector<Dtype>& output_dtypes,
                                     KernelLaunch launch, bool verbose,
                                     StreamOrDevice s = {});

// The spec of mx.fast.cuda_kernel, checked (names are C identifiers, at
// least one output, no name used twice); raises std::invalid_argument.
CustomKernelSpec cuda_kernel_spec(std::string name,
                                  std::vector<std::string> input_names,
                                  std::vector<std::string> output_names,
                                  std::string source, std::string header,
                                  bool ensure_row_contiguous,
                                  bool atomic_outputs, int shared_memory);

// The call of a cuda_kernel object: checks the arguments, prints the
// generated source when `verbose`, and returns the outputs of a lazy
// CustomKernel node on the GPU stream.
std::vector<array> cuda_kernel_call(const CustomKernelSpec& spec,
                                    const std::vector<array>& inputs,
                                    const std::vector<Shape>& output_shapes,
                                    const std::vector<Dtype>& output_dtypes,
                                    KernelLaunch launch, bool verbose,
                                    StreamOrDevice s = {});

// mx.fast.precompiled_cuda_kernel: `name` is the kernel's symbol in
// `image` (PTX, CUBIN or fatbin bytes); its parameters are the inputs'
// pointers, the outputs' pointers, then `launch.scalars`.
std::vector<array> precompiled_cuda_kernel(
    const std::string& name, const std::string& image,
    const std::vector<array>& inputs, const std::vector<Shape>& output_shapes,
    const std::vector<Dtype>& output_dtypes, KernelLaunch launch,
    int shared_memory, bool ensure_row_contiguous, StreamOrDevice s = {});

class CustomKernel : public Primitive {
 public:
  CustomKernel(Stream s, CustomKernelSpec spec, KernelLaunch launch)
      : Primitive(s), spec_(std::move(spec)), launch_(std::move(launch)) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "CustomKernel"; }
  // state(): the spec and launch; from_state raises "[import_function]
  // Malformed parameters for CustomKernel." for anything else.
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  // Output shapes are given, not inferred: a shapeless replay raises.
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;

  const CustomKernelSpec& spec() const { return spec_; }
  const KernelLaunch& launch() const { return launch_; }

 private:
  CustomKernelSpec spec_;
  KernelLaunch launch_;
};

}  // namespace fluxion::fast
