// MLX's mx.fast.metal_kernel on a build without Metal (every Fluxion
// build), with MLX's semantics there: a kernel object can be made, but a
// call raises std::runtime_error "[metal_kernel] No Metal back-end." --
// except while export_function traces, where the call is recorded as a
// CustomKernel node on a placeholder GPU stream (a GPU stream is required:
// any other raises std::invalid_argument "Only supports the GPU"), so a
// model holding Metal kernels can be exported here and run where Metal is.
// Nothing ever executes the kernel source: evaluating the node (an imported
// function, say) raises the same runtime_error, and its derivative rules
// raise. The node is not an op-spec case (it cannot run); tests/python/
// test_metal_kernel.py covers it.
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

struct MetalKernelSpec {
  std::string name;
  std::vector<std::string> input_names, output_names;
  std::string source, header;
  bool ensure_row_contiguous = true;
  bool atomic_outputs = false;
  std::string math_mode;  // "" (default), "safe" or "fast"
};

// The call of a kernel: checks the arguments, then raises (no Metal) or,
// under export tracing, returns the recorded outputs.
std::vector<array> metal_kernel_call(
    const MetalKernelSpec& spec, const std::vector<array>& inputs,
    const std::vector<Shape>& output_shapes,
    const std::vector<Dtype>& output_dtypes, std::vector<int> grid,
    std::vector<int> threadgroup,
    const std::vector<KernelTemplateArg>& template_args,
    std::optional<double> init_value, bool verbose, StreamOrDevice s = {});

class CustomKernel : public Primitive {
 public:
  CustomKernel(Stream s, MetalKernelSpec spec, std::vector<int> grid,
               std::vector<int> threadgroup,
               std::vector<KernelTemplateArg> template_args,
               std::optional<double> init_value)
      : Primitive(s),
        spec_(std::move(spec)),
        grid_(std::move(grid)),
        threadgroup_(std::move(threadgroup)),
        template_args_(std::move(template_args)),
        init_value_(init_value) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "CustomKernel"; }
  std::vector<PrimitiveArg> state() const override;
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  // Output shapes are given, not inferred: a shapeless replay raises.
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;

 private:
  MetalKernelSpec spec_;
  std::vector<int> grid_, threadgroup_;
  std::vector<KernelTemplateArg> template_args_;
  std::optional<double> init_value_;
};

// The CustomKernel rebuilt from its state() (export's factory).
std::shared_ptr<Primitive> custom_kernel_from_state(
    Stream s, const std::vector<PrimitiveArg>& state);

}  // namespace fluxion::fast
