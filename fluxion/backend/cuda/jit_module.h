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

// The module of `source` for devices of compute capability `arch` (major
// * 10 + minor) with `entries` resolved: built at most once per process for
// each source and architecture (racing callers wait for the first). Null
// when NVRTC or the load fails; `why` then says why (the same reason on
// every later call).
const JitModule* jit_module(const std::string& source, int arch,
                            const std::vector<std::string>& entries,
                            std::string* why);

// Compute capability of GPU `device` as major * 10 + minor (cached).
int device_arch(int device);

// Counters since the process started (gpu.h, FusedKernelStats).
void count_fused_launch();
// `layout`: a kernel exists, but these inputs' layout is not one it takes.
void count_fused_fallback(bool layout);

}  // namespace fluxion::cu
