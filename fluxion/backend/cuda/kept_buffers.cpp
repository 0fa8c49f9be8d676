// The buffers of a GPU stream's launched kernels (runtime.h, KeptBuffers):
// kept alive until a CUDA event recorded after those kernels has completed
// (a checkpoint every 64 launches and at finalize), so that a freed block
// is reused, by any stream, only after its last kernel finished; and GPU
// donation, which discounts the current stream's own holds.
#include <cuda_runtime_api.h>

#include <memory>
#include <utility>

#include "fluxion/backend/cuda/runtime.h"

namespace fluxion::cu {

void release_completed(StreamState& st, bool wait) {
  auto& in_flight = st.kept.in_flight;
  while (!in_flight.empty()) {
    auto& [ev, bufs] = in_flight.front();
    cudaError_t r = wait ? cudaEventSynchronize(ev) : cudaEventQuery(ev);
    if (r == cudaErrorNotReady) {
      cudaGetLastError();
      return;
    }
    cudaEventDestroy(ev);
    st.kept.release(bufs);
    in_flight.pop_front();
  }
}

void checkpoint(StreamState& st) {
  flush_batch(st);  // the event must follow the kernels using the buffers
  auto& kept = st.kept;
  if (kept.pending.empty()) {
    return;
  }
  cudaEvent_t ev;
  check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "eval");
  check(cudaEventRecord(ev, st.stream), "eval");
  kept.in_flight.emplace_back(ev, std::move(kept.pending));
  kept.pending.clear();
}

void keep_alive(const array& a) { keep_alive(a.data_shared_ptr()); }

void keep_alive(std::shared_ptr<Data> d) {
  if (d && t_keep != nullptr) {
    t_keep->keep(std::move(d));
  }
}

bool donatable(const array& a) {
  const Data* d = a.data_shared_ptr().get();
  long holds = t_keep != nullptr && d != nullptr ? t_keep->held(d) : 0;
  return a.is_donatable(Device{Device::gpu}, holds);
}

}  // namespace fluxion::cu
