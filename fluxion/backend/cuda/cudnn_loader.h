// cuDNN 9 loaded at run time, shared by attention (sdpa_cudnn.cpp) and
// convolutions (conv_cudnn.cpp): the library and its entry points, one
// handle per device, the descriptor plumbing of the backend (graph) API,
// plans from the engine heuristics, and execution on the current stream
// with the workspace from Fluxion's allocator.
//
// The library is dlopen'ed: libcudnn.so.9, then the pip wheel's folders
// the Python package lists in FLUXION_CUDNN_PIP_DIRS, then the wheel of
// the active virtual or conda environment, then FLUXION_CUDNN_LIB (a
// folder or the library). Its types come from cudnn_graph.h (the
// toolkit's, $CUDNN_INCLUDE_DIR or the wheel's, found by CMake, which
// gives the files including this header its folder); without that header
// FLUXION_HAVE_CUDNN is 0, nothing below is declared, and the users
// compile to "no cuDNN".
#pragma once

#if __has_include(<cudnn_graph.h>)
#define FLUXION_HAVE_CUDNN 1
#else
#define FLUXION_HAVE_CUDNN 0
#endif

#if FLUXION_HAVE_CUDNN

#include <cudnn_graph.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fluxion/array.h"

namespace fluxion::cu::cudnn {

#define FLUXION_CUDNN_FUNCTIONS(X)                                       \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnGetLastErrorString)   \
  X(cudnnCreate) X(cudnnSetStream) X(cudnnBackendCreateDescriptor)       \
  X(cudnnBackendDestroyDescriptor) X(cudnnBackendSetAttribute)           \
  X(cudnnBackendGetAttribute) X(cudnnBackendFinalize)                    \
  X(cudnnBackendExecute)

// The loaded library (handle null when it is unusable: `error` says why).
struct Lib {
  void* handle = nullptr;
  std::string path, error;
  int64_t version = 0;
#define FLUXION_CUDNN_DECLARE(NAME) decltype(&::NAME) NAME = nullptr;
  FLUXION_CUDNN_FUNCTIONS(FLUXION_CUDNN_DECLARE)
#undef FLUXION_CUDNN_DECLARE
  Lib();
};
// Loaded on first call, never unloaded (plans live to exit).
Lib& lib();

// cuDNN's name for `s` and its last error message.
std::string status_text(cudnnStatus_t s);

struct DescDeleter {
  void operator()(void* d) const { lib().cudnnBackendDestroyDescriptor(d); }
};
using Desc = std::unique_ptr<void, DescDeleter>;

// The handle of `device` (created on first use), or null with `error`.
// Executions on a handle are serialized by execute().
cudnnHandle_t handle_for(int device, std::string& error);

// The current CUDA device (`op` names a failure).
int current_device(const char* op);

// Descriptors of one operation graph, built in order; the first failure
// is kept and makes every later call a no-op, so a build reads straight
// through and is checked once.
class GraphBuilder {
 public:
  std::vector<Desc> keep;  // every descriptor made, alive with the plan
  std::vector<cudnnBackendDescriptor_t> ops;
  std::string error;
  bool ok() const { return error.empty(); }

  cudnnBackendDescriptor_t create(cudnnBackendDescriptorType_t t);
  void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t n,
           cudnnBackendAttributeType_t t, int64_t count, const void* v);
  void finalize(cudnnBackendDescriptor_t d, const char* what);
  void set_desc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t n,
                cudnnBackendDescriptor_t v) {
    set(d, n, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
  }

 protected:
  void fail(const std::string& what, cudnnStatus_t s);
  // Finalizes an operation and adds it to the graph.
  void add_op(cudnnBackendDescriptor_t op, const char* what);
};

struct Plan {
  std::vector<Desc> keep;  // the graph's descriptors, alive with the plan
  Desc plan;
  int64_t workspace = 0;
  std::string error;  // why there is no plan
};

// How make_plan chooses: the heuristics' modes in turn, each engine config
// in their order, the first one `accept` takes (null: any; it may say why
// not) that finalizes and needs at most `max_workspace` bytes (< 0: any).
struct PlanOptions {
  std::vector<cudnnBackendHeurMode_t> modes{CUDNN_HEUR_MODE_A};
  std::function<bool(cudnnBackendDescriptor_t cfg, std::string& why)> accept;
  int64_t max_workspace = -1;
};

// The operation graph of g's ops on `handle`, then the engine heuristics,
// then the first acceptable engine config that finalizes into an
// execution plan: `p.plan`, or `p.error`.
void make_plan(cudnnHandle_t handle, GraphBuilder& g, Plan& p,
               const PlanOptions& options = {});

// Plans by every number they depend on (device, dtype, shapes, ...), each
// built once: a failure is kept too, as a plan without one, so a shape
// cuDNN cannot take is not planned again at every call.
class PlanCache {
 public:
  using Key = std::vector<int64_t>;
  // The plan of `key`: built by `build` on first sight (outside the lock:
  // planning takes milliseconds; two threads may both build, the first
  // stored wins).
  std::shared_ptr<Plan> get(
      const Key& key, const std::function<std::shared_ptr<Plan>()>& build);

 private:
  struct Hash {
    size_t operator()(const Key& k) const;
  };
  std::mutex mu_;
  std::unordered_map<Key, std::shared_ptr<Plan>, Hash> plans_;
};

// The numerical notes of an engine config's engine (false when cuDNN does
// not say).
bool numerical_notes(cudnnBackendDescriptor_t cfg,
                     std::vector<cudnnBackendNumericalNote_t>& notes);

// GPU memory from Fluxion's allocator, kept alive until the work queued so
// far on the current stream has run.
std::shared_ptr<Data> scratch(size_t bytes);

// Runs `plan` on the current stream of `device` with its memory operands
// (unique id, pointer) and a workspace of plan.workspace bytes from
// Fluxion's allocator. False when cuDNN refuses (`error` says why).
bool execute(const Plan& plan,
             const std::vector<std::pair<int64_t, void*>>& operands,
             int device, std::string& error);

}  // namespace fluxion::cu::cudnn

#endif  // FLUXION_HAVE_CUDNN
