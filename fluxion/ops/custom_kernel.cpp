#include "fluxion/ops/custom_kernel.h"

#include <climits>
#include <iostream>
#include <set>
#include <stdexcept>

#include "fluxion/export.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/cuda_kernel_source.h"
#include "fluxion/ops/layout.h"

namespace fluxion::fast {

namespace {

constexpr const char* kNoMetal = "[metal_kernel] No Metal back-end.";

// The tag of a kind's messages: the Python function the user called.
const char* tag(KernelKind k) {
  switch (k) {
    case KernelKind::metal:
      return "[metal_kernel]";
    case KernelKind::cuda:
      return "[cuda_kernel]";
    case KernelKind::cuda_binary:
      return "[precompiled_cuda_kernel]";
  }
  return "[custom_kernel]";
}

// "[cuda_kernel] Kernel 'myexp': " -- every message names the kernel.
std::string where(const CustomKernelSpec& spec) {
  return std::string(tag(spec.kind)) + " Kernel '" + spec.name + "': ";
}

bool is_gpu(StreamOrDevice s) {
  return s.kind == StreamOrDevice::Kind::none ||
         (s.kind == StreamOrDevice::Kind::device &&
          s.device.type == Device::gpu) ||
         (s.kind == StreamOrDevice::Kind::stream &&
          s.stream.device.type == Device::gpu);
}

// MLX without Metal: a call outside export tracing raises; under export
// tracing the node goes on a placeholder GPU stream, and asking for another
// device raises.
Stream metal_stream(StreamOrDevice s) {
  if (!detail::in_export_tracing()) {
    throw std::runtime_error(kNoMetal);
  }
  if (!is_gpu(s)) {
    throw std::invalid_argument("[metal_kernel] Only supports the GPU.");
  }
  return Stream(-1, Device(Device::gpu));
}

// The GPU stream of a CUDA kernel. The default device may be the CPU (MLX
// then raises the same message); without a GPU, to_stream raises first.
Stream cuda_stream(const CustomKernelSpec& spec, StreamOrDevice s) {
  Stream st = to_stream(s);
  if (st.device.type != Device::gpu) {
    throw std::invalid_argument(std::string(tag(spec.kind)) +
                                " Only supports the GPU.");
  }
  return st;
}

void check_dims(const CustomKernelSpec& spec, const std::vector<int>& v,
                const char* what) {
  if (v.size() != 3) {
    throw std::invalid_argument(where(spec) + what +
                                " must have 3 entries; got " + vec_str(v) +
                                ".");
  }
}

// What every kind checks: the counts of inputs, output shapes and dtypes,
// and 3-entry grid and threadgroup.
void check_call(const CustomKernelSpec& spec, size_t n_inputs,
                const std::vector<Shape>& output_shapes,
                const std::vector<Dtype>& output_dtypes,
                const KernelLaunch& launch) {
  // A precompiled kernel has no names: it takes whatever it is given.
  if (spec.kind != KernelKind::cuda_binary &&
      n_inputs != spec.input_names.size()) {
    throw std::invalid_argument(where(spec) + "Expected " +
                                std::to_string(spec.input_names.size()) +
                                " inputs (" + std::to_string(n_inputs) +
                                " given).");
  }
  const size_t n_out = spec.kind == KernelKind::cuda_binary
                           ? output_shapes.size()
                           : spec.output_names.size();
  if (output_shapes.size() != n_out || output_dtypes.size() != n_out) {
    throw std::invalid_argument(
        where(spec) + "Expected " + std::to_string(n_out) +
        " output shapes and dtypes (got " +
        std::to_string(output_shapes.size()) + " and " +
        std::to_string(output_dtypes.size()) + ").");
  }
  check_dims(spec, launch.grid, "grid");
  check_dims(spec, launch.threadgroup, "threadgroup");
}

// The launch a CUDA kernel can take: grid entries >= 0 (in threads),
// threadgroup entries >= 1 with at most 1024 threads in all (every CUDA
// GPU's limit), and dynamic shared memory >= 0. Checked at the call so
// that the message names the kernel and the values, not a CUDA error.
void check_cuda_launch(const CustomKernelSpec& spec,
                       const KernelLaunch& launch) {
  int64_t threads = 1;
  for (int i = 0; i < 3; ++i) {
    if (launch.grid[i] < 0) {
      throw std::invalid_argument(where(spec) +
                                  "grid entries must be >= 0; got " +
                                  vec_str(launch.grid) + ".");
    }
    if (launch.threadgroup[i] < 1) {
      throw std::invalid_argument(where(spec) +
                                  "threadgroup entries must be >= 1; got " +
                                  vec_str(launch.threadgroup) + ".");
    }
    threads *= launch.threadgroup[i];
  }
  if (threads > 1024) {
    throw std::invalid_argument(
        where(spec) + "threadgroup " + vec_str(launch.threadgroup) + " has " +
        std::to_string(threads) +
        " threads; a CUDA block holds at most 1024.");
  }
  if (spec.shared_memory < 0) {
    throw std::invalid_argument(where(spec) +
                                "shared_memory must be >= 0; got " +
                                std::to_string(spec.shared_memory) + ".");
  }
}

void check_names(const CustomKernelSpec& spec) {
  if (!is_identifier(spec.name)) {
    throw std::invalid_argument(
        std::string(tag(spec.kind)) + " The kernel's name '" + spec.name +
        "' must be a C identifier (letters, digits and '_'): it names the "
        "CUDA function custom_kernel_<name>.");
  }
  if (spec.output_names.empty()) {
    throw std::invalid_argument(where(spec) +
                                "Must specify at least one output.");
  }
  std::set<std::string> seen;
  for (auto* names : {&spec.input_names, &spec.output_names}) {
    for (auto& n : *names) {
      if (!is_identifier(n)) {
        throw std::invalid_argument(where(spec) + "The parameter name '" + n +
                                    "' is not a C identifier.");
      }
      if (!seen.insert(n).second) {
        throw std::invalid_argument(where(spec) + "The parameter name '" + n +
                                    "' is used twice.");
      }
    }
  }
}

void check_template_args(const CustomKernelSpec& spec,
                         const std::vector<KernelTemplateArg>& targs) {
  for (auto& t : targs) {
    if (!is_identifier(t.name)) {
      throw std::invalid_argument(where(spec) + "The template argument name '" +
                                  t.name + "' is not a C identifier.");
    }
    if (t.kind == 'i' && (t.value < INT_MIN || t.value > INT_MAX)) {
      throw std::invalid_argument(
          where(spec) + "The template argument '" + t.name + "' = " +
          std::to_string(t.value) + " does not fit a C++ int.");
    }
  }
}

}  // namespace

std::vector<array> metal_kernel_call(const CustomKernelSpec& spec,
                                     const std::vector<array>& inputs,
                                     const std::vector<Shape>& output_shapes,
                                     const std::vector<Dtype>& output_dtypes,
                                     KernelLaunch launch, bool /*verbose*/,
                                     StreamOrDevice s) {
  check_call(spec, inputs.size(), output_shapes, output_dtypes, launch);
  Stream st = metal_stream(s);
  std::vector<array> in;
  for (auto& x : inputs) {
    // On the default stream: the placeholder one cannot run anything.
    in.push_back(spec.ensure_row_contiguous ? contiguous(x) : x);
  }
  return array::make_arrays(
      output_shapes, output_dtypes,
      std::make_shared<CustomKernel>(st, spec, std::move(launch)), in);
}

CustomKernelSpec cuda_kernel_spec(std::string name,
                                  std::vector<std::string> input_names,
                                  std::vector<std::string> output_names,
                                  std::string source, std::string header,
                                  bool ensure_row_contiguous,
                                  bool atomic_outputs, int shared_memory) {
  CustomKernelSpec spec;
  spec.kind = KernelKind::cuda;
  spec.name = std::move(name);
  spec.input_names = std::move(input_names);
  spec.output_names = std::move(output_names);
  spec.source = std::move(source);
  spec.header = std::move(header);
  spec.ensure_row_contiguous = ensure_row_contiguous;
  spec.atomic_outputs = atomic_outputs;
  spec.shared_memory = shared_memory;
  check_names(spec);
  if (shared_memory < 0) {
    throw std::invalid_argument(where(spec) +
                                "shared_memory must be >= 0; got " +
                                std::to_string(shared_memory) + ".");
  }
  return spec;
}

std::vector<array> cuda_kernel_call(const CustomKernelSpec& spec,
                                    const std::vector<array>& inputs,
                                    const std::vector<Shape>& output_shapes,
                                    const std::vector<Dtype>& output_dtypes,
                                    KernelLaunch launch, bool verbose,
                                    StreamOrDevice s) {
  check_call(spec, inputs.size(), output_shapes, output_dtypes, launch);
  check_cuda_launch(spec, launch);
  check_template_args(spec, launch.template_args);
  std::vector<Dtype> in_dtypes;
  std::vector<int> in_ndims;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const array& x = inputs[i];
    in_dtypes.push_back(x.dtype());
    in_ndims.push_back(static_cast<int>(x.ndim()));
    auto lp = layout_params(spec, i, static_cast<int>(x.ndim()));
    if ((lp.shape || lp.strides) && x.ndim() > kCustomKernelMaxDims) {
      throw std::invalid_argument(
          where(spec) + "Input '" + spec.input_names[i] + "' has " +
          std::to_string(x.ndim()) + " dimensions; its shape and strides " +
          "pass at most " + std::to_string(kCustomKernelMaxDims) + ".");
    }
  }
  Stream st = cuda_stream(spec, s);
  if (verbose) {
    // MLX prints at the call too, before anything is compiled.
    std::cout << "Generated source code for `"
              << cuda_kernel_name(spec, launch.template_args) << "`:\n```\n"
              << cuda_kernel_source(spec, launch.template_args, in_dtypes,
                                    in_ndims, output_dtypes)
              << "\n```" << std::endl;
  }
  return array::make_arrays(
      output_shapes, output_dtypes,
      std::make_shared<CustomKernel>(st, spec, std::move(launch)), inputs);
}

std::vector<array> precompiled_cuda_kernel(
    const std::string& name, const std::string& image,
    const std::vector<array>& inputs, const std::vector<Shape>& output_shapes,
    const std::vector<Dtype>& output_dtypes, KernelLaunch launch,
    int shared_memory, bool ensure_row_contiguous, StreamOrDevice s) {
  CustomKernelSpec spec;
  spec.kind = KernelKind::cuda_binary;
  spec.name = name;
  spec.source = image;
  spec.ensure_row_contiguous = ensure_row_contiguous;
  spec.shared_memory = shared_memory;
  if (name.empty()) {
    throw std::invalid_argument(
        "[precompiled_cuda_kernel] The kernel's name (its symbol in the "
        "image) is empty.");
  }
  if (image.empty()) {
    throw std::invalid_argument(where(spec) + "compiled_source is empty.");
  }
  check_call(spec, inputs.size(), output_shapes, output_dtypes, launch);
  check_cuda_launch(spec, launch);
  Stream st = cuda_stream(spec, s);
  return array::make_arrays(
      output_shapes, output_dtypes,
      std::make_shared<CustomKernel>(st, std::move(spec), std::move(launch)),
      inputs);
}

void CustomKernel::eval_cpu(const std::vector<array>&, std::vector<array>&) {
  if (spec_.kind == KernelKind::metal) {
    throw std::runtime_error(kNoMetal);
  }
  // An imported CUDA kernel replayed where the default device is the CPU.
  throw std::invalid_argument(where(spec_) +
                              "A CUDA kernel runs only on the GPU; "
                              "evaluate it on a GPU stream.");
}

std::vector<array> CustomKernel::vjp(const std::vector<array>&,
                                     const std::vector<array>&,
                                     const std::vector<int>&,
                                     const std::vector<array>&) {
  throw std::invalid_argument(std::string(tag(spec_.kind)) +
                              " A custom kernel has no vjp.");
}

std::vector<array> CustomKernel::jvp(const std::vector<array>&,
                                     const std::vector<array>&,
                                     const std::vector<int>&) {
  throw std::invalid_argument(std::string(tag(spec_.kind)) +
                              " A custom kernel has no jvp.");
}

std::pair<std::vector<array>, std::vector<int>> CustomKernel::vmap(
    const std::vector<array>&, const std::vector<int>&) {
  throw std::invalid_argument(std::string(tag(spec_.kind)) +
                              " A custom kernel cannot be vmapped.");
}

std::vector<Shape> CustomKernel::output_shapes(const std::vector<array>&) {
  throw std::invalid_argument(
      std::string(tag(spec_.kind)) +
      " A custom kernel's output shapes are given, not inferred: it cannot "
      "be replayed shapeless.");
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
// #template args, (name, kind, value, dtype)..., then (added with the CUDA
// kinds; a file without them holds a Metal kernel) kind, shared_memory,
// #scalars, (kind, value)...
std::vector<PrimitiveArg> CustomKernel::state() const {
  std::vector<PrimitiveArg> st = export_state(
      spec_.name, spec_.source, spec_.header, spec_.ensure_row_contiguous,
      spec_.atomic_outputs, spec_.math_mode, export_ints(launch_.grid),
      export_ints(launch_.threadgroup), launch_.init_value.has_value(),
      launch_.init_value.value_or(0.0),
      static_cast<int64_t>(spec_.input_names.size()));
  for (auto& n : spec_.input_names) {
    st.emplace_back(n);
  }
  st.emplace_back(static_cast<int64_t>(spec_.output_names.size()));
  for (auto& n : spec_.output_names) {
    st.emplace_back(n);
  }
  st.emplace_back(static_cast<int64_t>(launch_.template_args.size()));
  for (auto& t : launch_.template_args) {
    st.emplace_back(t.name);
    st.emplace_back(std::string(1, t.kind));
    st.emplace_back(t.value);
    st.emplace_back(t.dtype);
  }
  st.emplace_back(std::string(1, static_cast<char>(spec_.kind)));
  st.emplace_back(static_cast<int64_t>(spec_.shared_memory));
  st.emplace_back(static_cast<int64_t>(launch_.scalars.size()));
  for (auto& sc : launch_.scalars) {
    st.emplace_back(std::string(1, sc.kind));
    st.emplace_back(sc.value);
  }
  return st;
}

std::shared_ptr<Primitive> CustomKernel::from_state(
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
  auto f64 = [&] { return std::get<double>(next()); };
  auto ints = [&] {
    auto& v = std::get<std::vector<int64_t>>(next());
    return std::vector<int>(v.begin(), v.end());
  };
  auto one_char = [&] {
    std::string c = str();
    if (c.size() != 1) {
      throw std::invalid_argument(
          "[import_function] Malformed parameters for CustomKernel.");
    }
    return c[0];
  };
  try {
    CustomKernelSpec spec;
    KernelLaunch launch;
    spec.name = str();
    spec.source = str();
    spec.header = str();
    spec.ensure_row_contiguous = boolean();
    spec.atomic_outputs = boolean();
    spec.math_mode = str();
    launch.grid = ints();
    launch.threadgroup = ints();
    bool has_init = boolean();
    double init = f64();
    if (has_init) {
      launch.init_value = init;
    }
    for (int64_t n = i64(); n > 0; --n) {
      spec.input_names.push_back(str());
    }
    for (int64_t n = i64(); n > 0; --n) {
      spec.output_names.push_back(str());
    }
    for (int64_t n = i64(); n > 0; --n) {
      KernelTemplateArg t;
      t.name = str();
      t.kind = one_char();
      t.value = i64();
      t.dtype = std::get<Dtype>(next());
      launch.template_args.push_back(t);
    }
    if (i < a.size()) {
      char k = one_char();
      if (k != 'm' && k != 'c' && k != 'p') {
        throw std::invalid_argument(
            "[import_function] Malformed parameters for CustomKernel.");
      }
      spec.kind = static_cast<KernelKind>(k);
      spec.shared_memory = static_cast<int>(i64());
      for (int64_t n = i64(); n > 0; --n) {
        KernelScalar sc;
        sc.kind = one_char();
        sc.value = f64();
        launch.scalars.push_back(sc);
      }
    }
    if (i != a.size()) {
      throw std::invalid_argument(
          "[import_function] Malformed parameters for CustomKernel.");
    }
    return std::make_shared<CustomKernel>(s, std::move(spec),
                                          std::move(launch));
  } catch (const std::bad_variant_access&) {
    throw std::invalid_argument(
        "[import_function] Malformed parameters for CustomKernel.");
  }
}

}  // namespace fluxion::fast
