// cuDNN's loader and backend-API plumbing (design in cudnn_loader.h).
#include "fluxion/backend/cuda/cudnn_loader.h"

#if FLUXION_HAVE_CUDNN

#include <dlfcn.h>
#include <glob.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "fluxion/backend/cuda/cuda.h"

namespace fluxion::cu::cudnn {

namespace {

std::vector<std::string> split_dirs(const char* list) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* c = list ? list : ""; ; ++c) {
    if (*c == ':' || *c == '\0') {
      if (!cur.empty()) {
        out.push_back(cur);
      }
      cur.clear();
      if (*c == '\0') {
        break;
      }
    } else {
      cur += *c;
    }
  }
  return out;
}

// libcudnn.so.9 is a shim that dlopens its parts (and the runtime-compiled
// engines dlopen NVRTC) by soname: from a folder outside the loader's path
// (a pip wheel) they are loaded first from that folder, so those dlopens
// find them already loaded.
void preload_parts(const std::string& dir) {
  for (const char* part :
       {"libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9",
        "libcudnn_engines_runtime_compiled.so.9", "libcudnn_heuristic.so.9",
        "libcudnn_ops.so.9", "libcudnn_cnn.so.9"}) {
    dlopen((dir + "/" + part).c_str(), RTLD_NOW | RTLD_GLOBAL);
  }
  // NVRTC: the loader's, else the toolkit's, else a pip wheel's beside
  // cuDNN's (site-packages/nvidia/<pkg>/lib).
  if (dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_GLOBAL) ||
      dlopen("/usr/local/cuda/lib64/libnvrtc.so.13", RTLD_NOW | RTLD_GLOBAL)) {
    return;
  }
  const std::string nvidia = dir + "/../..";
  for (const char* rel : {"/cu13/lib/libnvrtc.so.13",
                          "/cuda_nvrtc/lib/libnvrtc.so.13"}) {
    if (dlopen((nvidia + rel).c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      return;
    }
  }
}

// Handles are per device; executions on one handle are serialized (its
// stream is set for each).
struct Handles {
  std::mutex mu;
  std::map<int, cudnnHandle_t> by_device;
};
Handles& handles() {
  static auto* h = new Handles();  // leaked: used to exit
  return *h;
}

}  // namespace

Lib::Lib() {
  std::vector<std::string> tries{"libcudnn.so.9"};
  for (auto& d : split_dirs(std::getenv("FLUXION_CUDNN_PIP_DIRS"))) {
    tries.push_back(d + "/libcudnn.so.9");
  }
  // Without Python's help (a C++ program): the wheel in the active
  // virtual or conda environment.
  for (const char* env : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const char* prefix = std::getenv(env);
    if (!prefix || !*prefix) {
      continue;
    }
    glob_t g;
    std::string pattern = std::string(prefix) +
                          "/lib/python3*/site-packages/nvidia/cudnn/lib/"
                          "libcudnn.so.9";
    if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        tries.push_back(g.gl_pathv[i]);
      }
    }
    globfree(&g);
  }
  if (const char* e = std::getenv("FLUXION_CUDNN_LIB"); e && *e) {
    std::string p = e;
    // A folder or the library itself.
    tries.push_back(p.find(".so") == std::string::npos ? p + "/libcudnn.so.9"
                                                       : p);
  }
  std::string first;
  for (auto& t : tries) {
    const auto slash = t.rfind('/');
    if (slash != std::string::npos) {
      preload_parts(t.substr(0, slash));
    } else {
      dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_GLOBAL);
    }
    handle = dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      path = t;
      break;
    }
    if (first.empty()) {
      const char* e = dlerror();
      first = e ? e : t;
    }
  }
  if (!handle) {
    error = "cannot load libcudnn.so.9 (" + first + ")";
    return;
  }
#define FLUXION_CUDNN_RESOLVE(NAME)                                        \
  NAME = reinterpret_cast<decltype(&::NAME)>(dlsym(handle, #NAME));        \
  if (!NAME && error.empty()) {                                            \
    error = path + " lacks " #NAME " (Fluxion needs cuDNN 9)";             \
  }
  FLUXION_CUDNN_FUNCTIONS(FLUXION_CUDNN_RESOLVE)
#undef FLUXION_CUDNN_RESOLVE
  if (error.empty()) {
    version = static_cast<int64_t>(cudnnGetVersion());
    if (version < 90000) {
      error = path + " is cuDNN " + std::to_string(version) +
              " (Fluxion needs 9 or later)";
    }
  }
  if (!error.empty()) {
    dlclose(handle);
    handle = nullptr;
  }
}

Lib& lib() {
  static Lib* l = new Lib();  // never unloaded: plans live to exit
  return *l;
}

std::string status_text(cudnnStatus_t s) {
  auto& l = lib();
  std::string r = l.cudnnGetErrorString(s);
  char last[1024] = {0};
  l.cudnnGetLastErrorString(last, sizeof(last));
  if (last[0]) {
    r += ": ";
    r += last;
  }
  return r;
}

cudnnHandle_t handle_for(int device, std::string& error) {
  auto& h = handles();
  std::lock_guard<std::mutex> lk(h.mu);
  auto it = h.by_device.find(device);
  if (it != h.by_device.end()) {
    return it->second;
  }
  cudnnHandle_t handle = nullptr;
  cudnnStatus_t s = lib().cudnnCreate(&handle);
  if (s != CUDNN_STATUS_SUCCESS) {
    error = "cudnnCreate: " + status_text(s);
    return nullptr;
  }
  h.by_device[device] = handle;
  return handle;
}

int current_device(const char* op) {
  int d = 0;
  cu::check(cudaGetDevice(&d), op);
  return d;
}

// ------------------------------------------------------------ GraphBuilder

cudnnBackendDescriptor_t GraphBuilder::create(
    cudnnBackendDescriptorType_t t) {
  if (!ok()) {
    return nullptr;
  }
  cudnnBackendDescriptor_t d = nullptr;
  cudnnStatus_t s = lib().cudnnBackendCreateDescriptor(t, &d);
  if (s != CUDNN_STATUS_SUCCESS) {
    fail("create descriptor " + std::to_string(t), s);
    return nullptr;
  }
  keep.emplace_back(d);
  return d;
}

void GraphBuilder::set(cudnnBackendDescriptor_t d,
                       cudnnBackendAttributeName_t n,
                       cudnnBackendAttributeType_t t, int64_t count,
                       const void* v) {
  if (ok()) {
    cudnnStatus_t s = lib().cudnnBackendSetAttribute(d, n, t, count, v);
    if (s != CUDNN_STATUS_SUCCESS) {
      fail("set attribute " + std::to_string(n), s);
    }
  }
}

void GraphBuilder::finalize(cudnnBackendDescriptor_t d, const char* what) {
  if (ok()) {
    cudnnStatus_t s = lib().cudnnBackendFinalize(d);
    if (s != CUDNN_STATUS_SUCCESS) {
      fail(std::string("finalize ") + what, s);
    }
  }
}

void GraphBuilder::fail(const std::string& what, cudnnStatus_t s) {
  if (error.empty()) {
    error = what + ": " + status_text(s);
  }
}

void GraphBuilder::add_op(cudnnBackendDescriptor_t op, const char* what) {
  finalize(op, what);
  if (ok()) {
    ops.push_back(op);
  }
}

// ------------------------------------------------------------------- plans

bool numerical_notes(cudnnBackendDescriptor_t cfg,
                     std::vector<cudnnBackendNumericalNote_t>& notes) {
  auto& l = lib();
  cudnnBackendDescriptor_t raw = nullptr;
  if (l.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &raw) !=
      CUDNN_STATUS_SUCCESS) {
    return false;
  }
  Desc engine(raw);
  int64_t n = 0;
  if (l.cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                 &raw) != CUDNN_STATUS_SUCCESS) {
    return false;
  }
  cudnnBackendNumericalNote_t buf[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  n = 0;
  if (l.cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                 CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n,
                                 buf) != CUDNN_STATUS_SUCCESS) {
    return false;
  }
  notes.assign(buf, buf + std::clamp<int64_t>(
                              n, 0, CUDNN_NUMERICAL_NOTE_TYPE_COUNT));
  return true;
}

void make_plan(cudnnHandle_t handle, GraphBuilder& g, Plan& p,
               const PlanOptions& options) {
  auto og = g.create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  g.set(og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
        static_cast<int64_t>(g.ops.size()), g.ops.data());
  g.set(og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  g.finalize(og, "operation graph");
  if (!g.ok()) {
    p.error = g.error;
    return;
  }
  auto& l = lib();
  std::string first;  // the first refusal, for the message
  int64_t tried = 0;
  for (cudnnBackendHeurMode_t mode : options.modes) {
    auto heur = g.create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    g.set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, og);
    g.set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    g.finalize(heur, "engine heuristics");
    if (!g.ok()) {
      // A mode this cuDNN lacks: the next one.
      if (first.empty()) {
        first = g.error;
      }
      g.error.clear();
      continue;
    }
    int64_t count = 0;
    cudnnStatus_t s = l.cudnnBackendGetAttribute(
        heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
        &count, nullptr);
    if (s != CUDNN_STATUS_SUCCESS || count <= 0) {
      if (first.empty()) {
        first = s != CUDNN_STATUS_SUCCESS ? "heuristics: " + status_text(s)
                                          : "no engine supports the graph";
      }
      continue;
    }
    std::vector<cudnnBackendDescriptor_t> cfgs(count);
    for (auto& c : cfgs) {
      c = g.create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    }
    if (!g.ok()) {
      p.error = g.error;
      return;
    }
    s = l.cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                   &count, cfgs.data());
    if (s != CUDNN_STATUS_SUCCESS) {
      p.error = "heuristics' results: " + status_text(s);
      return;
    }
    for (int64_t i = 0; i < count; ++i) {
      ++tried;
      std::string why;
      if (options.accept && !options.accept(cfgs[i], why)) {
        if (first.empty()) {
          first = why;
        }
        continue;
      }
      cudnnBackendDescriptor_t raw = nullptr;
      s = l.cudnnBackendCreateDescriptor(
          CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &raw);
      if (s != CUDNN_STATUS_SUCCESS) {
        p.error = "execution plan: " + status_text(s);
        return;
      }
      Desc plan(raw);
      s = l.cudnnBackendSetAttribute(raw, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                     CUDNN_TYPE_HANDLE, 1, &handle);
      if (s == CUDNN_STATUS_SUCCESS) {
        s = l.cudnnBackendSetAttribute(
            raw, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
      }
      if (s == CUDNN_STATUS_SUCCESS) {
        s = l.cudnnBackendFinalize(raw);
      }
      int64_t n = 0, ws = 0;
      if (s == CUDNN_STATUS_SUCCESS) {
        s = l.cudnnBackendGetAttribute(
            raw, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
            &n, &ws);
      }
      if (s != CUDNN_STATUS_SUCCESS) {
        if (first.empty()) {
          first = status_text(s);
        }
        continue;
      }
      if (options.max_workspace >= 0 && ws > options.max_workspace) {
        if (first.empty()) {
          first = "workspace of " + std::to_string(ws) + " bytes";
        }
        continue;
      }
      p.plan = std::move(plan);
      p.workspace = ws;
      p.keep = std::move(g.keep);
      return;
    }
  }
  p.error = "no engine config finalized (" + std::to_string(tried) +
            " tried; the first refusal: " + first + ")";
}

std::shared_ptr<Data> scratch(size_t bytes) {
  auto d = std::make_shared<Data>(std::max<size_t>(bytes, 16),
                                  Device{Device::gpu});
  cu::keep_alive(d);
  return d;
}

bool execute(const Plan& plan,
             const std::vector<std::pair<int64_t, void*>>& operands,
             int device, std::string& error) {
  auto& l = lib();
  std::vector<int64_t> uids;
  std::vector<void*> data;
  for (auto& [u, d] : operands) {
    uids.push_back(u);
    data.push_back(d);
  }
  void* ws = plan.workspace > 0
                 ? scratch(static_cast<size_t>(plan.workspace))->ptr()
                 : nullptr;
  cudnnBackendDescriptor_t raw = nullptr;
  cudnnStatus_t s = l.cudnnBackendCreateDescriptor(
      CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &raw);
  if (s != CUDNN_STATUS_SUCCESS) {
    error = "variant pack: " + status_text(s);
    return false;
  }
  Desc pack(raw);
  const int64_t n = static_cast<int64_t>(uids.size());
  s = l.cudnnBackendSetAttribute(raw, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                 CUDNN_TYPE_INT64, n, uids.data());
  if (s == CUDNN_STATUS_SUCCESS) {
    s = l.cudnnBackendSetAttribute(raw, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                   CUDNN_TYPE_VOID_PTR, n, data.data());
  }
  if (s == CUDNN_STATUS_SUCCESS) {
    s = l.cudnnBackendSetAttribute(raw, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                   CUDNN_TYPE_VOID_PTR, 1, &ws);
  }
  if (s == CUDNN_STATUS_SUCCESS) {
    s = l.cudnnBackendFinalize(raw);
  }
  if (s == CUDNN_STATUS_SUCCESS) {
    cudnnHandle_t h = handle_for(device, error);
    if (!h) {
      return false;
    }
    std::lock_guard<std::mutex> lk(handles().mu);
    s = l.cudnnSetStream(h, cu::current_stream());
    if (s == CUDNN_STATUS_SUCCESS) {
      s = l.cudnnBackendExecute(h, plan.plan.get(), raw);
    }
  }
  if (s != CUDNN_STATUS_SUCCESS) {
    error = status_text(s);
    return false;
  }
  return true;
}

size_t PlanCache::Hash::operator()(const Key& k) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the numbers
  for (int64_t x : k) {
    h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull;
  }
  return static_cast<size_t>(h);
}

std::shared_ptr<Plan> PlanCache::get(
    const Key& key, const std::function<std::shared_ptr<Plan>()>& build) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      return it->second;
    }
  }
  auto plan = build();
  std::lock_guard<std::mutex> lk(mu_);
  return plans_.emplace(key, std::move(plan)).first->second;
}

}  // namespace fluxion::cu::cudnn

#endif  // FLUXION_HAVE_CUDNN
