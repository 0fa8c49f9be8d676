// NVRTC through dlopen (nvrtc_compile.h). Types and names come from the
// toolkit's nvrtc.h; the functions are resolved with dlsym, as nccl.cpp
// does for NCCL.
#include "fluxion/backend/cuda/nvrtc_compile.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <sstream>

namespace fluxion::cu::nvrtc {

namespace {

#define FLUXION_NVRTC_FUNCTIONS(X)                                     \
  X(nvrtcGetErrorString) X(nvrtcVersion) X(nvrtcGetNumSupportedArchs) \
  X(nvrtcGetSupportedArchs) X(nvrtcCreateProgram)                      \
  X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize)                     \
  X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)          \
  X(nvrtcGetPTXSize) X(nvrtcGetPTX) X(nvrtcDestroyProgram)

struct Lib {
  void* handle = nullptr;
  std::string error;
  std::string version;
  std::vector<int> archs;  // the sm_XX this NVRTC can target, ascending
#define FLUXION_NVRTC_MEMBER(NAME) decltype(&::NAME) NAME = nullptr;
  FLUXION_NVRTC_FUNCTIONS(FLUXION_NVRTC_MEMBER)
#undef FLUXION_NVRTC_MEMBER

  Lib() {
    std::vector<std::string> names;
    if (const char* p = std::getenv("FLUXION_NVRTC"); p && *p) {
      names.push_back(p);
    } else {
      // The NVRTC of the CUDA major version Fluxion was built with: its
      // images load on the driver that runs Fluxion's own kernels.
      std::string so =
          "libnvrtc.so." + std::to_string(CUDART_VERSION / 1000);
      names = {so, "libnvrtc.so", "/usr/local/cuda/lib64/" + so,
               "/usr/local/cuda/lib/" + so,
               "/usr/local/cuda/targets/x86_64-linux/lib/" + so,
               "/usr/local/cuda/targets/sbsa-linux/lib/" + so};
    }
    std::string first;
    for (auto& n : names) {
      handle = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) {
        break;
      }
      if (first.empty()) {
        const char* e = dlerror();
        first = e ? e : n;
      }
    }
    if (!handle) {
      error = "cannot load NVRTC (" + first + ")";
      return;
    }
#define FLUXION_NVRTC_RESOLVE(NAME)                                     \
  NAME = reinterpret_cast<decltype(&::NAME)>(dlsym(handle, #NAME));     \
  if (!NAME && error.empty()) {                                         \
    error = "the loaded NVRTC lacks " #NAME;                            \
  }
    FLUXION_NVRTC_FUNCTIONS(FLUXION_NVRTC_RESOLVE)
#undef FLUXION_NVRTC_RESOLVE
    if (!error.empty()) {
      return;
    }
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    version = std::to_string(major) + "." + std::to_string(minor);
    int n = 0;
    if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
      archs.resize(n);
      if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) {
        archs.clear();
      }
    }
    if (archs.empty()) {
      error = "NVRTC " + version + " lists no target architecture";
    }
  }
};

// Loaded once and kept for the life of the process, like the kernels.
Lib& lib() {
  static auto* l = new Lib();
  return *l;
}

// "-a -b" -> {"-a", "-b"}.
std::vector<std::string> split(const char* s) {
  std::vector<std::string> out;
  std::istringstream in(s ? s : "");
  for (std::string w; in >> w;) {
    out.push_back(w);
  }
  return out;
}

}  // namespace

bool available(std::string* why) {
  Lib& l = lib();
  if (why) {
    *why = l.error;
  }
  return l.error.empty();
}

std::string version() { return lib().version; }

const std::vector<std::string>& options() {
  static const auto* o = [] {
    auto* v = new std::vector<std::string>{"--std=c++17", "--fmad=false"};
    auto extra = split(std::getenv("FLUXION_NVRTC_OPTIONS"));
    v->insert(v->end(), extra.begin(), extra.end());
    return v;
  }();
  return *o;
}

namespace {

// A folder with the toolkit's headers, or "".
std::string toolkit_dir(const std::filesystem::path& include) {
  std::error_code ec;
  return std::filesystem::exists(include / "cooperative_groups.h", ec)
             ? include.string()
             : "";
}

struct Includes {
  std::vector<std::string> options;
  std::string why;
  Includes() {
    std::vector<std::filesystem::path> tried;
    for (const char* env : {"CUDA_HOME", "CUDA_PATH"}) {
      if (const char* p = std::getenv(env); p && *p) {
        tried.push_back(std::filesystem::path(p) / "include");
      }
    }
    // Beside the NVRTC that compiles: <root>/lib64/libnvrtc.so ->
    // <root>/include (also targets/<arch>/lib -> targets/<arch>/include).
    Lib& l = lib();
    Dl_info info;
    if (l.nvrtcVersion &&
        dladdr(reinterpret_cast<void*>(l.nvrtcVersion), &info) &&
        info.dli_fname) {
      auto so = std::filesystem::path(info.dli_fname);
      std::error_code ec;
      auto real = std::filesystem::canonical(so, ec);
      for (auto& f : {so, ec ? so : real}) {
        tried.push_back(f.parent_path().parent_path() / "include");
      }
    }
#ifdef FLUXION_CUDA_TOOLKIT_INCLUDE
    tried.push_back(FLUXION_CUDA_TOOLKIT_INCLUDE);
#endif
    tried.push_back("/usr/local/cuda/include");
    for (auto& t : tried) {
      std::string dir = toolkit_dir(t);
      if (dir.empty()) {
        continue;
      }
      options.push_back("--include-path=" + dir);
      std::error_code ec;
      // CUDA 13 keeps libcu++ (cuda/std/...), which the headers include,
      // in include/cccl.
      if (std::filesystem::is_directory(t / "cccl", ec)) {
        options.push_back("--include-path=" + (t / "cccl").string());
      }
      return;
    }
    why = "CUDA's headers (cooperative_groups.h) were not found in";
    for (auto& t : tried) {
      why += " " + t.string();
    }
    why += "; set CUDA_HOME to the toolkit's folder";
  }
};

}  // namespace

const std::vector<std::string>& toolkit_includes(std::string* why) {
  static const auto* inc = new Includes();
  if (why) {
    *why = inc->why;
  }
  return inc->options;
}

std::vector<std::string> user_kernel_options(std::string* why) {
  std::vector<std::string> o = toolkit_includes(why);
  o.push_back("--device-as-default-execution-space");
  return o;
}

bool compile(const std::string& source, int arch, Image& image,
             std::string& error, const std::vector<std::string>& extra,
             const std::string& program, bool* source_error) {
  if (source_error) {
    *source_error = false;
  }
  Lib& l = lib();
  if (!l.error.empty()) {
    error = l.error;
    return false;
  }
  // sm_<arch> when NVRTC knows it; else PTX of the newest target below.
  int target = 0;
  for (int a : l.archs) {
    if (a <= arch) {
      target = a;
    }
  }
  if (target == 0) {
    error = "NVRTC " + l.version + " cannot target sm_" +
            std::to_string(arch) + " or any architecture below it";
    return false;
  }
  const bool cubin = target == arch;
  image.target = (cubin ? "sm_" : "compute_") + std::to_string(target);
  std::vector<std::string> opts = options();
  opts.insert(opts.end(), extra.begin(), extra.end());
  opts.push_back("--gpu-architecture=" + image.target);
  std::vector<const char*> argv;
  for (auto& o : opts) {
    argv.push_back(o.c_str());
  }
  nvrtcProgram prog = nullptr;
  nvrtcResult r = l.nvrtcCreateProgram(&prog, source.c_str(),
                                       program.c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    error = std::string("nvrtcCreateProgram: ") + l.nvrtcGetErrorString(r);
    return false;
  }
  r = l.nvrtcCompileProgram(prog, static_cast<int>(argv.size()),
                            argv.data());
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    std::string log;
    if (l.nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 1) {
      log.resize(n);
      l.nvrtcGetProgramLog(prog, log.data());
      log.resize(n - 1);  // the terminating NUL
    }
    error = std::string("nvrtcCompileProgram (") + image.target + "): " +
            l.nvrtcGetErrorString(r) + (log.empty() ? "" : "\n" + log);
    if (source_error) {
      *source_error = r == NVRTC_ERROR_COMPILATION;
    }
    l.nvrtcDestroyProgram(&prog);
    return false;
  }
  size_t n = 0;
  r = cubin ? l.nvrtcGetCUBINSize(prog, &n) : l.nvrtcGetPTXSize(prog, &n);
  if (r == NVRTC_SUCCESS) {
    image.bytes.assign(n, '\0');
    r = cubin ? l.nvrtcGetCUBIN(prog, image.bytes.data())
              : l.nvrtcGetPTX(prog, image.bytes.data());
  }
  l.nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) {
    error = std::string("reading NVRTC's output: ") + l.nvrtcGetErrorString(r);
    return false;
  }
  return true;
}

}  // namespace fluxion::cu::nvrtc
