// Modules of generated kernels: NVRTC's image of a source (nvrtc_compile.h)
// loaded with the CUDA runtime's library API (cudaLibraryLoadData, which
// loads into every device's context on first use; CUDA 12+, no libcuda
// link), cached in memory for the process and on disk across processes.
//
// Disk: $FLUXION_CACHE_DIR/cuda-v1/<hash>.bin (default ~/.cache/fluxion),
// the hash over the source, the device's architecture, NVRTC's version
// and its options. A file holds a header (magic, a second hash of the key,
// the payload's size and hash) and the image; a file that does not match
// is ignored and rebuilt, one whose image does not load too. Writes are
// atomic (disk_cache.h), so concurrent processes never read half a file.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace fluxion::cu {

struct JitModule {
  cudaLibrary_t library = nullptr;
  std::vector<cudaKernel_t> kernels;  // in the order of the entry names
};

// How a source is compiled besides the defaults (the generated kernels
// of compile use none): NVRTC options added after nvrtc::options() (part
// of both caches' keys) and the program's name in NVRTC's log.
struct JitOptions {
  std::vector<std::string> nvrtc_options;
  std::string program = "fluxion_fused.cu";
};

// Why jit_module gave no module.
struct JitError {
  std::string why;
  // NVRTC rejected the source (the log in `why` is about it), as opposed
  // to NVRTC missing or a module that does not load.
  bool source_error = false;
};

// The module of `source` for devices of compute capability `arch` (major
// * 10 + minor) with `entries` resolved: built at most once per process for
// each source, architecture and options (racing callers wait for the
// first). Null when NVRTC or the load fails; `why` then says why (the same
// reason on every later call).
const JitModule* jit_module(const std::string& source, int arch,
                            const std::vector<std::string>& entries,
                            std::string* why);
const JitModule* jit_module(const std::string& source, int arch,
                            const std::vector<std::string>& entries,
                            const JitOptions& options, JitError& error);

// The module of an image built elsewhere (PTX, CUBIN or fatbin bytes:
// mx.fast.precompiled_cuda_kernel), loaded at most once per process for
// each image and entry list; no NVRTC, no disk cache. Null when the load
// fails, `why` saying why.
const JitModule* image_module(const std::string& image,
                              const std::vector<std::string>& entries,
                              std::string& why);

// Compute capability of GPU `device` as major * 10 + minor (cached).
int device_arch(int device);

// Counters since the process started (gpu.h, FusedKernelStats).
void count_fused_launch();
// `layout`: a kernel exists, but these inputs' layout is not one it takes.
void count_fused_fallback(bool layout);

}  // namespace fluxion::cu
