// The interface the core uses to reach a GPU backend (backend/cuda, or
// backend/no_gpu when CUDA is not built).
#pragma once

#include "fluxion/array.h"
#include "fluxion/device.h"

namespace fluxion::gpu {

bool is_available();
// GPUs this process can use, and the properties of one of them (device_name,
// architecture, total_memory, ...; `index` < device_count()).
int device_count();
DeviceInfo device_info(int index);
// Schedule `arr`'s primitive on its GPU stream.
void eval(array& arr);
// Submit work queued on `s` so far.
void finalize(Stream s);

}  // namespace fluxion::gpu
