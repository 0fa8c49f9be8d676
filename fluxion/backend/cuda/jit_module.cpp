// Building, caching and loading modules of generated kernels
// (jit_module.h).
#include "fluxion/backend/cuda/jit_module.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "fluxion/backend/common/disk_cache.h"
#include "fluxion/backend/cuda/cuda.h"
#include "fluxion/backend/cuda/nvrtc_compile.h"
#include "fluxion/gpu_stats.h"

namespace fluxion::cu {

namespace {

// Bump when the file layout or the kernels' calling convention changes.
constexpr const char* kCacheFolder = "cuda-v1";
constexpr char kMagic[8] = {'F', 'X', 'N', 'V', 'R', 'T', 'C', '1'};
constexpr uint64_t kCheckBasis = 0x84222325cbf29ce4ull;  // a second hash
constexpr size_t kHeader = sizeof(kMagic) + 3 * sizeof(uint64_t);

struct Counters {
  std::atomic<uint64_t> launches{0}, fallbacks{0}, unfused{0}, compiles{0},
      disk_hits{0}, disk_writes{0}, loads{0};
};
Counters& counters() {
  static auto* c = new Counters();
  return *c;
}

std::string cache_key(const std::string& source, int arch,
                      const JitOptions& jo) {
  std::string key = source;
  key += "\n// arch " + std::to_string(arch) + ", NVRTC " + nvrtc::version();
  for (auto& o : nvrtc::options()) {
    key += " " + o;
  }
  for (auto& o : jo.nvrtc_options) {
    key += " " + o;
  }
  return key;
}

void put_u64(std::string& s, uint64_t v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(v));
}
uint64_t get_u64(const std::string& s, size_t at) {
  uint64_t v;
  std::memcpy(&v, s.data() + at, sizeof(v));
  return v;
}

// The image in a cache file, when the file is whole and for this key.
bool read_cached(const std::filesystem::path& path, uint64_t check,
                 std::string& image) {
  auto file = codegen::read_file(path);
  if (!file || file->size() < kHeader ||
      std::memcmp(file->data(), kMagic, sizeof(kMagic)) != 0 ||
      get_u64(*file, 8) != check || get_u64(*file, 16) != file->size() - kHeader) {
    return false;
  }
  image = file->substr(kHeader);
  return codegen::fnv1a(image) == get_u64(*file, 24);
}

void write_cached(const std::filesystem::path& path, uint64_t check,
                  const std::string& image) {
  std::string file(kMagic, sizeof(kMagic));
  put_u64(file, check);
  put_u64(file, image.size());
  put_u64(file, codegen::fnv1a(image));
  file += image;
  // A read-only or full disk only costs the next process a compile.
  if (codegen::write_atomically(path, file)) {
    counters().disk_writes++;
  }
}

// Loads `image` and resolves `entries`; false (nothing kept) on failure.
bool load(const std::string& image, const std::vector<std::string>& entries,
          JitModule& m, std::string& why) {
  cudaLibrary_t lib = nullptr;
  cudaError_t err = cudaLibraryLoadData(&lib, image.data(), nullptr, nullptr,
                                        0, nullptr, nullptr, 0);
  if (err != cudaSuccess) {
    cudaGetLastError();
    why = std::string("cudaLibraryLoadData: ") + cudaGetErrorString(err);
    return false;
  }
  std::vector<cudaKernel_t> kernels(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    err = cudaLibraryGetKernel(&kernels[i], lib, entries[i].c_str());
    // Modules load lazily (CUDA_MODULE_LOADING=LAZY is the default): the
    // kernel's attributes load it into this device's context now, so an
    // image the driver cannot use fails here, not at the launch.
    cudaFuncAttributes attr;
    if (err == cudaSuccess) {
      err = cudaFuncGetAttributes(
          &attr, reinterpret_cast<const void*>(kernels[i]));
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      why = "loading " + entries[i] + ": " + cudaGetErrorString(err);
      cudaLibraryUnload(lib);
      return false;
    }
  }
  m.library = lib;
  m.kernels = std::move(kernels);
  counters().loads++;
  return true;
}

struct Slot {
  std::once_flag once;
  JitModule module;
  bool ok = false;
  std::string why;
  bool source_error = false;
};

void build(Slot& slot, const std::string& source, int arch,
           const std::vector<std::string>& entries, const JitOptions& jo) {
  std::string why;
  if (!nvrtc::available(&why)) {
    slot.why = why;
    return;
  }
  const std::string key = cache_key(source, arch, jo);
  const uint64_t check = codegen::fnv1a(key, kCheckBasis);
  const auto path = codegen::cache_root() / kCacheFolder /
                    (codegen::hex(codegen::fnv1a(key)) + ".bin");
  std::string image;
  if (read_cached(path, check, image)) {
    counters().disk_hits++;
    if (load(image, entries, slot.module, why)) {
      slot.ok = true;
      return;
    }
    // Whole but unloadable (another driver's CUBIN): built again below.
  }
  nvrtc::Image fresh;
  counters().compiles++;
  if (!nvrtc::compile(source, arch, fresh, slot.why, jo.nvrtc_options,
                      jo.program, &slot.source_error)) {
    return;
  }
  if (!load(fresh.bytes, entries, slot.module, slot.why)) {
    return;
  }
  slot.ok = true;
  write_cached(path, check, fresh.bytes);
}

// The slot of `key`, made on first use. Modules stay loaded for the life
// of the process, like Fluxion's own kernels.
std::shared_ptr<Slot> slot_of(const std::string& key) {
  static std::mutex mu;
  static auto* slots =
      new std::unordered_map<std::string, std::shared_ptr<Slot>>();
  std::lock_guard<std::mutex> lk(mu);
  auto& s = (*slots)[key];
  if (!s) {
    s = std::make_shared<Slot>();
  }
  return s;
}

// The entries in a key: one image may be asked for under other names.
std::string entries_key(const std::vector<std::string>& entries) {
  std::string k;
  for (auto& e : entries) {
    k += e + "\n";
  }
  return k;
}

}  // namespace

const JitModule* jit_module(const std::string& source, int arch,
                            const std::vector<std::string>& entries,
                            const JitOptions& options, JitError& error) {
  std::string key = "nvrtc\n" + std::to_string(arch) + "\n";
  for (auto& o : options.nvrtc_options) {
    key += o + "\n";
  }
  auto slot = slot_of(key + entries_key(entries) + source);
  std::call_once(slot->once,
                 [&] { build(*slot, source, arch, entries, options); });
  if (!slot->ok) {
    error.why = slot->why;
    error.source_error = slot->source_error;
  }
  return slot->ok ? &slot->module : nullptr;
}

const JitModule* jit_module(const std::string& source, int arch,
                            const std::vector<std::string>& entries,
                            std::string* why) {
  JitError error;
  const JitModule* m = jit_module(source, arch, entries, JitOptions{}, error);
  if (!m && why) {
    *why = error.why;
  }
  return m;
}

const JitModule* image_module(const std::string& image,
                              const std::vector<std::string>& entries,
                              std::string& why) {
  auto slot = slot_of("image\n" + entries_key(entries) + image);
  std::call_once(slot->once, [&] {
    // PTX is text the driver reads up to its NUL, which bytes read from a
    // .ptx file lack; CUBIN (ELF) and fatbins are taken as they are.
    const bool elf = image.rfind("\x7f" "ELF", 0) == 0;
    const bool fatbin = image.rfind("\x50\xed\x55\xba", 0) == 0;
    if (!elf && !fatbin && (image.empty() || image.back() != '\0')) {
      slot->ok = load(image + '\0', entries, slot->module, slot->why);
    } else {
      slot->ok = load(image, entries, slot->module, slot->why);
    }
  });
  if (!slot->ok) {
    why = slot->why;
  }
  return slot->ok ? &slot->module : nullptr;
}

int device_arch(int device) {
  static std::mutex mu;
  static auto* archs = new std::unordered_map<int, int>();
  std::lock_guard<std::mutex> lk(mu);
  auto it = archs->find(device);
  if (it != archs->end()) {
    return it->second;
  }
  int major = 0, minor = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                               device),
        "compile");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                               device),
        "compile");
  return (*archs)[device] = major * 10 + minor;
}

void count_fused_launch() { counters().launches++; }
void count_fused_fallback(bool layout) {
  (layout ? counters().unfused : counters().fallbacks)++;
}

}  // namespace fluxion::cu

namespace fluxion::gpu {

FusedKernelStats fused_kernel_stats() {
  auto& c = cu::counters();
  FusedKernelStats s;
  s.launches = c.launches;
  s.fallbacks = c.fallbacks;
  s.unfused = c.unfused;
  s.compiles = c.compiles;
  s.disk_hits = c.disk_hits;
  s.disk_writes = c.disk_writes;
  s.loads = c.loads;
  return s;
}

}  // namespace fluxion::gpu
