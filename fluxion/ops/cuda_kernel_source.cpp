#include "fluxion/ops/cuda_kernel_source.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace fluxion::fast {

namespace {

// What every kernel sees before the user's header: what MLX's kernels
// get from its device headers, under the names MLX users write
// (cooperative_groups / cg, WARP_SIZE, Shape, Strides, elem_to_loc).
// NVRTC runs with --device-as-default-execution-space (as MLX's), so
// unannotated helpers in headers are device functions.
constexpr const char* kPrelude = R"(#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
%COMPLEX%
#ifndef WARP_SIZE
#define WARP_SIZE 32
#endif

namespace cg = cooperative_groups;

namespace fluxion_kernel {

// An input's shape or strides, passed by value (%DIMS% entries, the
// first <input>_ndim of them used).
template <typename T>
struct Dims {
  T v[%DIMS%];
  __host__ __device__ const T* data() const { return v; }
  __host__ __device__ T operator[](int i) const { return v[i]; }
  __host__ __device__ static constexpr int size() { return %DIMS%; }
};
using Shape = Dims<int32_t>;
using Strides = Dims<int64_t>;

// The offset (in elements) of the `elem`-th element in row-major order
// of an array with this shape and these strides.
template <typename IdxT>
__host__ __device__ inline int64_t elem_to_loc(IdxT elem, const int32_t* shape,
                                               const int64_t* strides,
                                               int ndim) {
  int64_t e = static_cast<int64_t>(elem);
  int64_t loc = 0;
  for (int i = ndim - 1; i >= 0 && e > 0; --i) {
    loc += (e % shape[i]) * strides[i];
    e /= shape[i];
  }
  return loc;
}

}  // namespace fluxion_kernel

)";

void replace_all(std::string& s, const std::string& from,
                 const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos;
       at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

}  // namespace

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

KernelLayoutParams layout_params(const CustomKernelSpec& spec, size_t i,
                                 int ndim) {
  KernelLayoutParams p;
  if (ndim == 0 || spec.kind != KernelKind::cuda) {
    return p;
  }
  const std::string& n = spec.input_names.at(i);
  p.shape = spec.source.find(n + "_shape") != std::string::npos;
  p.strides = spec.source.find(n + "_strides") != std::string::npos;
  p.ndim = spec.source.find(n + "_ndim") != std::string::npos;
  return p;
}

const char* cuda_type_name(Dtype d) {
  switch (d.val) {
    case Dtype::Val::bool_:
      return "bool";
    case Dtype::Val::uint8:
      return "uint8_t";
    case Dtype::Val::uint16:
      return "uint16_t";
    case Dtype::Val::uint32:
      return "uint32_t";
    case Dtype::Val::uint64:
      return "uint64_t";
    case Dtype::Val::int8:
      return "int8_t";
    case Dtype::Val::int16:
      return "int16_t";
    case Dtype::Val::int32:
      return "int32_t";
    case Dtype::Val::int64:
      return "int64_t";
    case Dtype::Val::float16:
      return "__half";
    case Dtype::Val::float32:
      return "float";
    case Dtype::Val::float64:
      return "double";
    case Dtype::Val::bfloat16:
      return "__nv_bfloat16";
    case Dtype::Val::complex64:
      return "cuda::std::complex<float>";
  }
  throw std::invalid_argument("[cuda_kernel] Unsupported dtype " +
                              std::string(dtype_name(d)) + ".");
}

std::string cuda_kernel_name(const CustomKernelSpec& spec,
                             const std::vector<KernelTemplateArg>& targs) {
  std::string name = "custom_kernel_";
  name += spec.name;
  for (auto& t : targs) {
    name += '_';
    if (t.kind == 'i') {
      std::string v = std::to_string(t.value);
      std::replace(v.begin(), v.end(), '-', 'n');
      name += v;
    } else if (t.kind == 'b') {
      name += t.value ? 't' : 'f';
    } else {
      name += dtype_name(t.dtype);
    }
  }
  return name;
}

std::string cuda_kernel_source(const CustomKernelSpec& spec,
                               const std::vector<KernelTemplateArg>& targs,
                               const std::vector<Dtype>& input_dtypes,
                               const std::vector<int>& input_ndims,
                               const std::vector<Dtype>& output_dtypes) {
  // cuda/std/complex costs NVRTC time: only kernels that name it get it.
  bool complex = false;
  for (auto* v : {&input_dtypes, &output_dtypes}) {
    complex |= std::count(v->begin(), v->end(), complex64) > 0;
  }
  for (auto& t : targs) {
    complex |= t.kind == 'd' && t.dtype == complex64;
  }
  std::string prelude = kPrelude;
  replace_all(prelude, "%COMPLEX%",
              complex ? "#include <cuda/std/complex>\n" : "");
  replace_all(prelude, "%DIMS%", std::to_string(kCustomKernelMaxDims));

  std::string s = "// mx.fast.cuda_kernel '";
  s += spec.name;
  s += "', generated by Fluxion.\n";
  s += prelude;
  s += spec.header;
  s += "\n\nnamespace fluxion_kernel {\n\n";
  s += "extern \"C\" __global__ void ";
  s += cuda_kernel_name(spec, targs);
  s += "(\n";
  // One parameter: "<type> <name><suffix>" (appends only: GCC 12 misreads
  // chains of string + as overlapping copies, -Wrestrict).
  std::vector<std::string> params;
  auto param = [&](const char* type, const std::string& n,
                   const char* suffix) {
    std::string p = type;
    p += ' ';
    p += n;
    p += suffix;
    params.push_back(std::move(p));
  };
  for (size_t i = 0; i < input_dtypes.size(); ++i) {
    const std::string& n = spec.input_names.at(i);
    std::string type = "const ";
    type += cuda_type_name(input_dtypes[i]);
    type += '*';
    param(type.c_str(), n, "");
    auto lp = layout_params(spec, i, input_ndims.at(i));
    if (lp.shape) {
      param("const __grid_constant__ Shape", n, "_shape");
    }
    if (lp.strides) {
      param("const __grid_constant__ Strides", n, "_strides");
    }
    if (lp.ndim) {
      param("const __grid_constant__ int", n, "_ndim");
    }
  }
  for (size_t i = 0; i < output_dtypes.size(); ++i) {
    std::string type = cuda_type_name(output_dtypes[i]);
    type += '*';
    param(type.c_str(), spec.output_names.at(i), "");
  }
  for (size_t i = 0; i < params.size(); ++i) {
    s += "    ";
    s += params[i];
    s += i + 1 < params.size() ? ",\n" : ") {\n";
  }
  for (auto& t : targs) {
    if (t.kind == 'i') {
      s += "  constexpr int ";
      s += t.name;
      s += " = ";
      s += std::to_string(t.value);
    } else if (t.kind == 'b') {
      s += "  constexpr bool ";
      s += t.name;
      s += t.value ? " = true" : " = false";
    } else {
      s += "  using ";
      s += t.name;
      s += " = ";
      s += cuda_type_name(t.dtype);
    }
    s += ";\n";
  }
  if (!targs.empty()) {
    s += "\n";
  }
  s += spec.source;
  s += "\n}\n\n}  // namespace fluxion_kernel\n";
  return s;
}

}  // namespace fluxion::fast
