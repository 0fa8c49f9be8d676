#include "fluxion/ops/custom_kernel.h"

#include <stdexcept>

#include "fluxion/export.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/extras.h"

namespace fluxion::fast {

namespace {

constexpr const char* kNoMetal = "[metal_kernel] No Metal back-end.";

// MLX without Metal: a call outside export tracing raises; under export
// tracing the node goes on a placeholder GPU stream, and asking for another
// device raises.
Stream kernel_stream(StreamOrDevice s) {
  if (!detail::in_export_tracing()) {
    throw std::runtime_error(kNoMetal);
  }
  bool gpu = s.kind == StreamOrDevice::Kind::none ||
             (s.kind == StreamOrDevice::Kind::device &&
              s.device.type == Device::gpu) ||
             (s.kind == StreamOrDevice::Kind::stream &&
              s.stream.device.type == Device::gpu);
  if (!gpu) {
    throw std::invalid_argument("[metal_kernel] Only supports the GPU.");
  }
  return Stream(-1, Device(Device::gpu));
}

void check_dims(const std::vector<int>& v, const char* what) {
  if (v.size() != 3) {
    throw std::invalid_argument(std::string("[metal_kernel] ") + what +
                                " must have 3 entries; got " + vec_str(v) +
                                ".");
  }
}

}  // namespace

std::vector<array> metal_kernel_call(
    const MetalKernelSpec& spec, const std::vector<array>& inputs,
    const std::vector<Shape>& output_shapes,
    const std::vector<Dtype>& output_dtypes, std::vector<int> grid,
    std::vector<int> threadgroup,
    const std::vector<KernelTemplateArg>& template_args,
    std::optional<double> init_value, bool verbose, StreamOrDevice s) {
  if (inputs.size() != spec.input_names.size()) {
    throw std::invalid_argument(
        std::string("[metal_kernel] Expected ") +
        std::to_string(spec.input_names.size()) +
        " inputs (" + std::to_string(inputs.size()) + " given).");
  }
  if (output_shapes.size() != spec.output_names.size() ||
      output_dtypes.size() != spec.output_names.size()) {
    throw std::invalid_argument(
        std::string("[metal_kernel] Expected ") +
        std::to_string(spec.output_names.size()) +
        " output shapes and dtypes (got " +
        std::to_string(output_shapes.size()) + " and " +
        std::to_string(output_dtypes.size()) + ").");
  }
  check_dims(grid, "grid");
  check_dims(threadgroup, "threadgroup");
  Stream st = kernel_stream(s);
  std::vector<array> in;
  for (auto& x : inputs) {
    // On the default stream: the placeholder one cannot run anything.
    in.push_back(spec.ensure_row_contiguous ? contiguous(x) : x);
  }
  return array::make_arrays(
      output_shapes, output_dtypes,
      std::make_shared<CustomKernel>(st, spec, std::move(grid),
                                     std::move(threadgroup), template_args,
                                     init_value),
      in);
}

void CustomKernel::eval_cpu(const std::vector<array>&, std::vector<array>&) {
  throw std::runtime_error(kNoMetal);
}

std::vector<array> CustomKernel::vjp(const std::vector<array>&,
                                     const std::vector<array>&,
                                     const std::vector<int>&,
                                     const std::vector<array>&) {
  throw std::invalid_argument("[metal_kernel] A custom kernel has no vjp.");
}

std::vector<array> CustomKernel::jvp(const std::vector<array>&,
                                     const std::vector<array>&,
                                     const std::vector<int>&) {
  throw std::invalid_argument("[metal_kernel] A custom kernel has no jvp.");
}

std::pair<std::vector<array>, std::vector<int>> CustomKernel::vmap(
    const std::vector<array>&, const std::vector<int>&) {
  throw std::invalid_argument(
      "[metal_kernel] A custom kernel cannot be vmapped.");
}

std::vector<Shape> CustomKernel::output_shapes(const std::vector<array>&) {
  throw std::invalid_argument(
      "[metal_kernel] A custom kernel's output shapes are given, not "
      "inferred: it cannot be replayed shapeless.");
}

bool CustomKernel::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& p = static_cast<const CustomKernel&>(o);
  return state() == p.state();
}

// name, source, header, ensure_row_contiguous, atomic_outputs, math_mode,
// grid, threadgroup, has_init, init, #inputs, names..., #outputs, names...,
// #template args, (name, kind, value, dtype)...
std::vector<PrimitiveArg> CustomKernel::state() const {
  std::vector<PrimitiveArg> st =
      export_state(spec_.name, spec_.source, spec_.header,
                   spec_.ensure_row_contiguous, spec_.atomic_outputs,
                   spec_.math_mode, export_ints(grid_),
                   export_ints(threadgroup_), init_value_.has_value(),
                   init_value_.value_or(0.0),
                   static_cast<int64_t>(spec_.input_names.size()));
  for (auto& n : spec_.input_names) {
    st.emplace_back(n);
  }
  st.emplace_back(static_cast<int64_t>(spec_.output_names.size()));
  for (auto& n : spec_.output_names) {
    st.emplace_back(n);
  }
  st.emplace_back(static_cast<int64_t>(template_args_.size()));
  for (auto& t : template_args_) {
    st.emplace_back(t.name);
    st.emplace_back(std::string(1, t.kind));
    st.emplace_back(t.value);
    st.emplace_back(t.dtype);
  }
  return st;
}

std::shared_ptr<Primitive> custom_kernel_from_state(
    Stream s, const std::vector<PrimitiveArg>& a) {
  size_t i = 0;
  auto next = [&]() -> const PrimitiveArg& {
    if (i >= a.size()) {
      throw std::invalid_argument(
          "[import_function] Malformed parameters for CustomKernel.");
    }
    return a[i++];
  };
  auto str = [&] { return std::get<std::string>(next()); };
  auto boolean = [&] { return std::get<bool>(next()); };
  auto i64 = [&] { return std::get<int64_t>(next()); };
  auto ints = [&] {
    auto& v = std::get<std::vector<int64_t>>(next());
    return std::vector<int>(v.begin(), v.end());
  };
  try {
    MetalKernelSpec spec;
    spec.name = str();
    spec.source = str();
    spec.header = str();
    spec.ensure_row_contiguous = boolean();
    spec.atomic_outputs = boolean();
    spec.math_mode = str();
    auto grid = ints();
    auto tg = ints();
    bool has_init = boolean();
    double init = std::get<double>(next());
    for (int64_t n = i64(); n > 0; --n) {
      spec.input_names.push_back(str());
    }
    for (int64_t n = i64(); n > 0; --n) {
      spec.output_names.push_back(str());
    }
    std::vector<KernelTemplateArg> targs;
    for (int64_t n = i64(); n > 0; --n) {
      KernelTemplateArg t;
      t.name = str();
      t.kind = str().at(0);
      t.value = i64();
      t.dtype = std::get<Dtype>(next());
      targs.push_back(t);
    }
    return std::make_shared<CustomKernel>(
        s, std::move(spec), std::move(grid), std::move(tg), std::move(targs),
        has_init ? std::optional<double>(init) : std::nullopt);
  } catch (const std::bad_variant_access&) {
    throw std::invalid_argument(
        "[import_function] Malformed parameters for CustomKernel.");
  }
}

}  // namespace fluxion::fast
