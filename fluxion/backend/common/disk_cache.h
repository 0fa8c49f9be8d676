// The on-disk cache of generated kernels, shared by the backends: the
// CPU's shared libraries (backend/cpu/codegen_jit.cpp) and the GPU's NVRTC
// images (backend/cuda/jit_module.cpp) live under one root,
// $FLUXION_CACHE_DIR (default ~/.cache/fluxion), each in a versioned
// folder of its own, named by a hash of what built them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace fluxion::codegen {

// $FLUXION_CACHE_DIR, else ~/.cache/fluxion, else <tmp>/fluxion-cache.
std::filesystem::path cache_root();

// 64-bit FNV-1a; `basis` picks an independent hash of the same bytes.
constexpr uint64_t kFnvBasis = 1469598103934665603ull;
uint64_t fnv1a(const std::string& s, uint64_t basis = kFnvBasis);
std::string hex(uint64_t h);

// Writes `bytes` to `path` through a temporary file of a name unique to
// this process and thread, renamed into place: a reader in another
// process sees the old file or the whole new one, never half of it. False
// (and nothing left behind) when the folder or the file cannot be made.
bool write_atomically(const std::filesystem::path& path,
                      const std::string& bytes);
// The whole file; nothing when it cannot be read.
std::optional<std::string> read_file(const std::filesystem::path& path);

}  // namespace fluxion::codegen
