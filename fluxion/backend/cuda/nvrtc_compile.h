// NVRTC, CUDA's run-time compiler, for the kernels compile generates
// (codegen_cuda.h). libnvrtc is dlopen'ed on first use, not linked, so
// Fluxion loads and runs where only CUDA's runtime is installed: there the
// generated kernels are unavailable and compiled functions evaluate their
// fused nodes one by one. Plain C++ (no CUDA header), so tests can compile
// generated source without a GPU.
//
// Environment: FLUXION_NVRTC, the library to load (default: libnvrtc.so.<the
// CUDA major version Fluxion was built with>, then libnvrtc.so, then the
// toolkit's lib folders); FLUXION_NVRTC_OPTIONS, options added to every
// compile (space-separated; read once).
#pragma once

#include <string>
#include <vector>

namespace fluxion::cu::nvrtc {

// Whether NVRTC loaded; when not, `why` says why.
bool available(std::string* why = nullptr);
// "13.0": part of the disk cache's key (another NVRTC may generate other
// code).
std::string version();

struct Image {
  std::string bytes;   // CUBIN, or PTX (NUL-terminated) for the driver
  std::string target;  // "sm_90", or "compute_90" for PTX
};

// The image of `source` for a device of compute capability `arch` (major *
// 10 + minor): CUBIN for sm_<arch> when this NVRTC knows it, otherwise PTX
// for the newest compute_<a> below it, which the driver compiles on load.
// Options: --std=c++17 and --fmad=false (the eager kernels are built with
// --fmad=false, so products and sums round separately in both), then
// FLUXION_NVRTC_OPTIONS, then `extra` (include paths: toolkit_includes).
// `program` names the source in NVRTC's log. False with NVRTC's message
// and log in `error`; `source_error` (when given) then says whether the
// source itself failed to compile (NVRTC_ERROR_COMPILATION: the log is
// about the source) rather than NVRTC.
bool compile(const std::string& source, int arch, Image& image,
             std::string& error, const std::vector<std::string>& extra = {},
             const std::string& program = "fluxion_fused.cu",
             bool* source_error = nullptr);

// The options compile passes besides the target (part of the cache key).
const std::vector<std::string>& options();

// "--include-path=" options for the CUDA toolkit's headers (cuda_fp16.h,
// cooperative_groups.h and the CCCL folder they include), which user
// kernels (mx.fast.cuda_kernel) include and NVRTC does not carry: the
// first folder holding cooperative_groups.h among $CUDA_HOME/include,
// $CUDA_PATH/include, the include folder beside the loaded libnvrtc, the
// toolkit Fluxion was built with, and /usr/local/cuda/include; its cccl
// subfolder too when present. Empty when none is found (`why` then says
// where it looked). Found once per process.
const std::vector<std::string>& toolkit_includes(std::string* why = nullptr);

// The extra options of user kernels (mx.fast.cuda_kernel): the toolkit's
// include paths and, as MLX compiles them, --device-as-default-execution-
// space (unannotated functions in a kernel's header are device functions).
std::vector<std::string> user_kernel_options(std::string* why = nullptr);

}  // namespace fluxion::cu::nvrtc
