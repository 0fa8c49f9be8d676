// Typed reading of a primitive's saved parameters: the other half of
// Primitive::state(). An exported file's nodes carry their parameters as
// PrimitiveArg variants, and each primitive's static from_state (declared
// with FLUXION_DECLARE_STATE next to its state()) rebuilds the primitive
// from them through a PrimitiveArgs. The file may be corrupt or written by
// something else, so every read checks that the parameter is there and of
// the expected type, and enum values are checked against their range: any
// mismatch raises std::invalid_argument "[import_function] Invalid
// parameters for the primitive <Name> (a corrupt or foreign file?)."
// rather than building a primitive with a meaningless parameter.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "fluxion/primitive.h"

namespace fluxion {

class PrimitiveArgs {
 public:
  // `primitive` names the primitive in error messages.
  PrimitiveArgs(const std::vector<PrimitiveArg>& args, const char* primitive)
      : args_(args), primitive_(primitive) {}

  size_t size() const { return args_.size(); }

  [[noreturn]] void bad() const {
    throw std::invalid_argument(
        std::string("[import_function] Invalid parameters for the "
                    "primitive ") +
        primitive_ + " (a corrupt or foreign file?).");
  }

  template <typename T>
  const T& get(size_t i) const {
    if (i >= args_.size() || !std::holds_alternative<T>(args_[i])) {
      bad();
    }
    return std::get<T>(args_[i]);
  }

  int64_t i64(size_t i) const { return get<int64_t>(i); }
  int i32(size_t i) const { return static_cast<int>(get<int64_t>(i)); }
  bool b(size_t i) const { return get<bool>(i); }
  double f64(size_t i) const { return get<double>(i); }
  // Float parameters are saved as doubles.
  float f32(size_t i) const { return static_cast<float>(get<double>(i)); }
  Dtype dt(size_t i) const { return get<Dtype>(i); }
  std::vector<int> ints(size_t i) const {
    auto& v = get<std::vector<int64_t>>(i);
    return std::vector<int>(v.begin(), v.end());
  }
  Shape shp(size_t i) const {
    auto& v = get<std::vector<int64_t>>(i);
    return Shape(v.begin(), v.end());
  }

  // An enum saved as its integer value (read as an int, like i32), which
  // must lie in [0, last]: a value outside is no enumerator at all.
  template <typename E>
  E enum_up_to(size_t i, E last) const {
    int v = i32(i);
    if (v < 0 || v > static_cast<int>(last)) {
      bad();
    }
    return static_cast<E>(v);
  }

  // The string parameter at `i`, as a pointer that lives as long as the
  // program: for the primitives that keep their op's name as a `const
  // char*` tag (GatherAxis, ScatterAxis), which normally points at a
  // string literal.
  const char* interned(size_t i) const {
    static std::mutex mu;
    static std::set<std::string> names;
    const std::string& s = get<std::string>(i);
    std::lock_guard<std::mutex> lock(mu);
    return names.insert(s).first->c_str();
  }

 private:
  const std::vector<PrimitiveArg>& args_;
  const char* primitive_;
};

}  // namespace fluxion
