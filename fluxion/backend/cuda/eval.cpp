// The launch of one node's kernels on its GPU stream (gpu::eval) and the
// checkpoint of the stream's buffers at the end of an eval (gpu::finalize).
// The rest of the CUDA runtime is in the files runtime.h lists.
//
// Kernels are launched from the thread that runs eval, in tape order, onto
// the node's CUDA stream (asynchronous; no worker thread): the scheduling
// cost per primitive is one launch. A kernel's errors (an unsupported
// dtype, a failed launch, out of memory) are raised while launching, on
// this thread; like the CPU backend's, they are stored on the outputs and
// on the stream, and rethrown by the wait on the stream's event.
#include <cuda_runtime_api.h>

#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>

#include "fluxion/backend/common/fail_outputs.h"
#include "fluxion/backend/common/node.h"
#include "fluxion/backend/cuda/runtime.h"
#include "fluxion/primitive.h"
#include "fluxion/scheduler.h"

namespace fluxion {

namespace cu {

thread_local constinit cudaStream_t t_current = nullptr;
thread_local constinit StreamState* t_state = nullptr;
thread_local constinit KeptBuffers* t_keep = nullptr;

cudaStream_t current_stream() { return t_current; }

void alloc(array& out) { out.set_data(out.nbytes(), Device{Device::gpu}); }

}  // namespace cu

namespace gpu {

using namespace cu;
using common::fail_outputs;

void eval(array& arr) {
  if (!is_available()) {
    // Only a node built on an explicit Stream(…, gpu) gets here.
    throw std::runtime_error(std::string("[eval] Cannot run ") +
                             arr.primitive().name() +
                             " on the gpu: no GPU is visible.");
  }
  auto [prim, inputs, outputs] = common::take_node(arr);
  auto s = prim->stream();
  StreamState& st = stream_state(s);
  std::lock_guard<std::mutex> lk(st.mu);
  for (auto& in : inputs) {
    if (in.error()) {
      fail_outputs(outputs, in.error());
      scheduler::set_stream_error(s.index, in.error());
      return;
    }
  }
  t_current = st.stream;
  t_state = &st;
  t_keep = &st.kept;
  t_took_fault_slot = false;
  bool queued = false;
  try {
    set_device(st.device);
    wait_for_uploads(st);
    queued = MicroBatch::enabled() &&
             st.batch.add(*prim, inputs, outputs, st.stream);
    if (!queued) {
      flush_batch(st);  // the queued kernels come first
      prim->eval_gpu(inputs, outputs);
    }
    watch_outputs(st.faults, inputs, outputs);
  } catch (...) {
    auto e = std::current_exception();
    fail_outputs(outputs, e);
    scheduler::set_stream_error(s.index, e);
  }
  t_keep = nullptr;
  t_state = nullptr;
  // The buffers the kernel reads and writes live until it has finished.
  for (auto* v : {&inputs, &outputs}) {
    for (auto& a : *v) {
      if (a.data_shared_ptr()) {
        st.kept.keep(a.data_shared_ptr());
      }
    }
  }
  if (!queued && ++st.launches % 64 == 0) {
    try {
      checkpoint(st);
    } catch (...) {
      scheduler::set_stream_error(s.index, std::current_exception());
    }
    release_completed(st, false);
  }
}

void finalize(Stream s) {
  if (!is_available()) {
    return;
  }
  StreamState& st = stream_state(s);
  std::lock_guard<std::mutex> lk(st.mu);
  checkpoint(st);
  release_completed(st, false);
}

}  // namespace gpu

}  // namespace fluxion
