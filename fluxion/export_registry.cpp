// The import table of export_function's files: primitive name -> the
// function that rebuilds the primitive from its saved parameters, with the
// two directions around it (export_primitive, import_primitive).
//
// The table is generated from the one list of primitives
// (fluxion/primitive_list.h) rather than written out, so it cannot miss a
// primitive or drift from the classes: a class with parameters declares
// state() and from_state together (FLUXION_DECLARE_STATE, defined side by
// side in its .cpp file) and is rebuilt by from_state; a class without
// parameters is rebuilt from its stream alone; any other class (Load,
// CustomTransforms, Compiled, the distributed primitives: their parameters
// are open files, host callables, tapes or process groups) has no entry
// and therefore cannot be exported. The only names written here are MLX's,
// which differ from the classes (the logarithms and NaNEqual, below).
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "fluxion/export.h"
#include "fluxion/primitive_args.h"
#include "fluxion/primitive_classes.h"
#include "fluxion/primitive_registry.h"

namespace fluxion {

namespace {

using ImportFn =
    std::shared_ptr<Primitive> (*)(Stream, const std::vector<PrimitiveArg>&);

template <typename T, typename = void>
struct HasFromState : std::false_type {};
template <typename T>
struct HasFromState<T, std::void_t<decltype(&T::from_state)>> : std::true_type {
};

// True when T declares state() itself: Primitive's own saves nothing.
template <typename T>
constexpr bool kSavesState =
    !std::is_same_v<decltype(&T::state),
                    std::vector<PrimitiveArg> (Primitive::*)() const>;

template <typename T>
std::shared_ptr<Primitive> from_stream(Stream s,
                                       const std::vector<PrimitiveArg>&) {
  return std::make_shared<T>(s);
}

// How T is rebuilt, or null when it cannot be.
template <typename T>
constexpr ImportFn import_fn() {
  static_assert(!kSavesState<T> || HasFromState<T>::value,
                "A primitive that saves parameters (state()) must be "
                "rebuilt from them: declare state() and from_state together "
                "with FLUXION_DECLARE_STATE.");
  if constexpr (HasFromState<T>::value) {
    return &T::from_state;
  } else if constexpr (std::is_constructible_v<T, Stream>) {
    return &from_stream<T>;
  } else {
    return nullptr;
  }
}

// MLX's "Log" carries its base: 0 two, 1 ten, 2 e (anything else is e).
std::shared_ptr<Primitive> import_log(Stream s,
                                      const std::vector<PrimitiveArg>& args) {
  int base = args.empty() ? 2 : PrimitiveArgs(args, "Log").i32(0);
  if (base == 0) {
    return std::make_shared<Log2>(s);
  }
  if (base == 1) {
    return std::make_shared<Log10>(s);
  }
  return std::make_shared<Log>(s);
}

// The name carries equal_nan (MLX's Equal and NaNEqual; Equal itself is
// rebuilt from its stream, equal_nan defaulting to false).
std::shared_ptr<Primitive> import_nan_equal(Stream s,
                                            const std::vector<PrimitiveArg>&) {
  return std::make_shared<Equal>(s, true);
}

const std::unordered_map<std::string, ImportFn>& import_table() {
  static const auto table = [] {
    std::unordered_map<std::string, ImportFn> t;
#define FLUXION_IMPORT_ENTRY(CLASS, FAMILY, CPU, GPU) \
  if (ImportFn f = import_fn<CLASS>()) {              \
    t.emplace(primitive_name_of_class(#CLASS), f);    \
  }
    FLUXION_PRIMITIVES(FLUXION_IMPORT_ENTRY)
#undef FLUXION_IMPORT_ENTRY
    // Log2 and Log10 are written as "Log" with their base
    // (export_primitive), never under their own names.
    t.erase("Log2");
    t.erase("Log10");
    t["Log"] = &import_log;
    t["NaNEqual"] = &import_nan_equal;
    return t;
  }();
  return table;
}

}  // namespace

std::pair<std::string, std::vector<PrimitiveArg>> export_primitive(
    const Primitive& p) {
  if (dynamic_cast<const Log2*>(&p)) {
    return {"Log", {int64_t{0}}};
  }
  if (dynamic_cast<const Log10*>(&p)) {
    return {"Log", {int64_t{1}}};
  }
  if (dynamic_cast<const Log*>(&p)) {
    return {"Log", {int64_t{2}}};
  }
  // Names that depend on parameters map back to one entry.
  std::string name = p.name();
  if (dynamic_cast<const Reduce*>(&p)) {
    name = "Reduce";
  } else if (dynamic_cast<const ArgReduce*>(&p)) {
    name = "ArgReduce";
  }
  if (!import_table().count(name)) {
    throw std::invalid_argument("[export_function] The primitive " + name +
                                " cannot be exported.");
  }
  return {name, p.state()};
}

std::shared_ptr<Primitive> import_primitive(const std::string& name,
                                            const std::vector<PrimitiveArg>& a,
                                            Stream s) {
  auto it = import_table().find(name);
  if (it == import_table().end()) {
    throw std::invalid_argument("[import_function] Unknown primitive '" + name +
                                "'.");
  }
  return it->second(s, a);
}

std::vector<std::string> exported_primitive_names() {
  std::vector<std::string> names;
  for (auto& entry : import_table()) {
    names.push_back(entry.first);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace fluxion
