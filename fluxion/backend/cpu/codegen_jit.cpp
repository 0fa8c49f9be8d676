// Building generated kernels: the system compiler makes a shared library,
// kept in a versioned on-disk cache keyed by a hash of the source, the
// compiler and its flags, so a later process only pays for dlopen.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "fluxion/backend/common/disk_cache.h"
#include "fluxion/backend/cpu/codegen.h"

namespace fluxion::cpu {

namespace {

// Bump when the kernel calling convention changes.
constexpr const char* kCacheVersion = "v1";

std::string compiler() {
  if (const char* c = std::getenv("FLUXION_CXX")) {
    return c;
  }
  return "g++";
}

// Kernels are built on the machine that runs them, so they may use all of
// its instruction set (AVX-512 where present doubles the vector width).
// No contraction into fused multiply-adds: the eager kernels round every
// product (a fused sum(a * b) then sums the values eager sums).
std::string flags() {
  return "-O3 -march=native -shared -fPIC -fno-math-errno "
         "-fno-trapping-math -fwrapv -fno-semantic-interposition "
         "-ffp-contract=off";
}

// What -march=native means here (the CPU's feature flags), so a cache
// directory shared between different machines never serves a library
// built for another CPU.
const std::string& cpu_signature() {
  static const std::string sig = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("flags", 0) == 0) {
        return line;
      }
    }
    return std::string("unknown-cpu");
  }();
  return sig;
}

std::filesystem::path cache_dir() {
  return codegen::cache_root() / kCacheVersion;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return out + "'";
}

// Loads `lib`'s entry points; false when it is not a usable kernel.
bool open_kernel(const std::filesystem::path& lib, Kernel& k) {
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    return false;
  }
  k.contiguous = reinterpret_cast<ContiguousKernel>(dlsym(h, "fx_contiguous"));
  k.strided = reinterpret_cast<StridedKernel>(dlsym(h, "fx_strided"));
  k.rows = reinterpret_cast<RowsKernel>(dlsym(h, "fx_rows"));
  k.total = reinterpret_cast<TotalKernel>(dlsym(h, "fx_total"));
  k.finish = reinterpret_cast<FinishKernel>(dlsym(h, "fx_finish"));
  k.cols = reinterpret_cast<ColumnsKernel>(dlsym(h, "fx_cols"));
  k.cols_part = reinterpret_cast<ColumnsPartKernel>(dlsym(h, "fx_cols_part"));
  k.cols_finish =
      reinterpret_cast<ColumnsFinishKernel>(dlsym(h, "fx_cols_finish"));
  // Libraries stay loaded for the life of the process, like the kernels.
  return (k.contiguous && k.strided) || k.rows || (k.total && k.finish) ||
         k.cols;
}

// Compiles `source` into `lib`; writes go to unique temporary names that
// are renamed into place, so concurrent processes never see half a file.
bool build(const std::string& source, const std::string& cxx,
           const std::string& flags, const std::filesystem::path& lib) {
  std::error_code ec;
  std::filesystem::create_directories(lib.parent_path(), ec);
  std::ostringstream tag;
  tag << "." << getpid() << "." << std::this_thread::get_id();
  auto src = lib.parent_path() / (lib.stem().string() + tag.str() + ".cpp");
  auto tmp = lib.parent_path() / (lib.stem().string() + tag.str() + ".so");
  {
    std::ofstream out(src);
    out << source;
    if (!out) {
      return false;
    }
  }
  std::string cmd = quote(cxx) + " " + flags + " -o " + quote(tmp.string()) +
                    " " + quote(src.string()) + " >/dev/null 2>&1";
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::filesystem::remove(src, ec);
    std::filesystem::remove(tmp, ec);
    return false;
  }
  // The source stays next to its library, for reading what was generated.
  auto kept = lib;
  std::filesystem::rename(src, kept.replace_extension(".cpp"), ec);
  std::filesystem::rename(tmp, lib, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return false;
  }
  return true;
}

struct Slot {
  std::once_flag once;
  bool ok = false;
  Kernel kernel;
};

}  // namespace

const Kernel* load_kernel(const std::string& source) {
  static std::mutex mutex;
  static auto* slots =
      new std::unordered_map<std::string, std::shared_ptr<Slot>>();
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto& s = (*slots)[source];
    if (!s) {
      s = std::make_shared<Slot>();
    }
    slot = s;
  }
  std::call_once(slot->once, [&] {
    std::string cxx = compiler();
    std::string f = flags();
    std::ostringstream name;
    name << std::hex << codegen::fnv1a(source + "\n" + cxx + "\n" + f + "\n" +
                              cpu_signature())
         << ".so";
    auto lib = cache_dir() / name.str();
    if (std::filesystem::exists(lib) && open_kernel(lib, slot->kernel)) {
      slot->ok = true;
      return;
    }
    slot->ok = build(source, cxx, f, lib) && open_kernel(lib, slot->kernel);
  });
  return slot->ok ? &slot->kernel : nullptr;
}

}  // namespace fluxion::cpu
