#include "fluxion/primitive_registry.h"

#include "fluxion/backend_interface.h"
#include "fluxion/primitive_list.h"

namespace fluxion {

const std::vector<PrimitiveInfo>& primitive_registry() {
#define FLUXION_REGISTRY_ENTRY(CLASS, FAMILY, CPU, GPU)                     \
  PrimitiveInfo{primitive_name_of_class(#CLASS), #CLASS, #FAMILY, CPU != 0, \
                GPU != 0},
  static const std::vector<PrimitiveInfo> table = {
      FLUXION_PRIMITIVES(FLUXION_REGISTRY_ENTRY)};
#undef FLUXION_REGISTRY_ENTRY
  return table;
}

const PrimitiveInfo* find_primitive(std::string_view name) {
  for (auto& p : primitive_registry()) {
    if (name == p.name) {
      return &p;
    }
  }
  return nullptr;
}

std::vector<std::string> kernels_missing(Device::DeviceType t) {
  // Without a GPU backend, backend/no_gpu defines every eval_gpu to raise.
  bool gpu_built = gpu_backend().built();
  std::vector<std::string> names;
  for (auto& p : primitive_registry()) {
    bool has = t == Device::cpu ? p.cpu : (gpu_built && p.gpu);
    if (!has) {
      names.emplace_back(p.name);
    }
  }
  return names;
}

}  // namespace fluxion
