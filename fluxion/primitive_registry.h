// The primitive registry at run time: the list of fluxion/primitive_list.h
// as a table, for tests and tools that ask which primitives lack a kernel
// on a backend.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fluxion/device.h"

namespace fluxion {

struct PrimitiveInfo {
  const char* name;    // the primitive's name: its class without namespace
  const char* cls;     // the class relative to namespace fluxion
  const char* family;  // op family (primitive_list.h says which)
  bool cpu;            // backend/cpu defines eval_cpu
  bool gpu;            // the GPU backend defines eval_gpu
};

// A primitive's name from its class as the list spells it:
// "linalg::Inverse" -> "Inverse".
constexpr const char* primitive_name_of_class(const char* cls) {
  const char* name = cls;
  for (const char* p = cls; *p != '\0'; ++p) {
    if (*p == ':') {
      name = p + 1;
    }
  }
  return name;
}

// Every primitive, in the list's order.
const std::vector<PrimitiveInfo>& primitive_registry();
// The entry named `name` (a class name, as PrimitiveInfo::name), or null.
const PrimitiveInfo* find_primitive(std::string_view name);
// Names of the primitives that have no kernel on `t`'s backend in this
// build: the list's 0s for that backend, or every primitive for the GPU
// when Fluxion was built without a GPU backend.
std::vector<std::string> kernels_missing(Device::DeviceType t);

}  // namespace fluxion
