// Built when CUDA is off: every GPU entry point raises a clear error.
#include <stdexcept>
#include <string>

#include "fluxion/backend/gpu.h"
#include "fluxion/primitive.h"

namespace fluxion::gpu {

bool is_available() { return false; }

int device_count() { return 0; }

DeviceInfo device_info(int index) {
  throw std::invalid_argument(
      "[device_info] There is no gpu " + std::to_string(index) +
      ": Fluxion was built without a GPU backend.");
}

void eval(array& arr) {
  throw std::runtime_error(
      std::string("[eval] Cannot run ") + arr.primitive().name() +
      " on the gpu: Fluxion was built without a GPU backend.");
}

void finalize(Stream) {}

}  // namespace fluxion::gpu
