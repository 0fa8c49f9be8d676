// The operation of a graph node, with its kernels and transformation rules.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"

namespace fluxion {

// One parameter of a primitive, as export_function records it (and MLX's
// export callback lists it): enums as their integer values, shapes and
// axis lists as integer lists.
using PrimitiveArg = std::variant<bool, int64_t, double, std::string, Dtype,
                                  std::vector<int64_t>>;

template <typename V>
std::vector<int64_t> export_ints(const V& v) {
  return std::vector<int64_t>(v.begin(), v.end());
}

// A state() list built one element at a time: an initializer list of
// PrimitiveArg would copy each variant out of a temporary, which GCC 12
// misreads as a use of uninitialized memory (-Wmaybe-uninitialized).
template <typename... Args>
std::vector<PrimitiveArg> export_state(Args&&... args) {
  std::vector<PrimitiveArg> state;
  state.reserve(sizeof...(Args));
  (state.emplace_back(std::forward<Args>(args)), ...);
  return state;
}

class Primitive {
 public:
  explicit Primitive(Stream stream) : stream_(stream) {}
  virtual ~Primitive() = default;
  Primitive(const Primitive&) = delete;
  Primitive& operator=(const Primitive&) = delete;

  // Kernels: fill `outputs` (shapes and dtypes already set) from `inputs`.
  // Every primitive of the library declares both with FLUXION_DECLARE_EVAL
  // and is listed in fluxion/primitive_list.h: each backend defines its
  // kernels in its own files (backend/cpu, backend/cuda), and where a
  // backend has none (backend/no_gpu, or a 0 in the list) a definition
  // raising a clear error is generated from the list.
  virtual void eval_cpu(const std::vector<array>& inputs,
                        std::vector<array>& outputs) = 0;
  virtual void eval_gpu(const std::vector<array>& inputs,
                        std::vector<array>& outputs) = 0;

  // Transformation rules (the transformations issue fills these in for every
  // primitive; the defaults raise an error naming the primitive).
  virtual std::vector<array> jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums);
  virtual std::vector<array> vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums,
                                 const std::vector<array>& outputs);
  virtual std::pair<std::vector<array>, std::vector<int>> vmap(
      const std::vector<array>& inputs, const std::vector<int>& axes);
  virtual std::vector<Shape> output_shapes(const std::vector<array>& inputs);

  // Same operation with the same parameters (used for CSE in compile).
  virtual bool is_equivalent(const Primitive& other) const {
    return typeid(*this) == typeid(other);
  }

  // False when the output shape is a parameter fixed when the graph was
  // built (Reshape, Slice...): shapeless compile rejects such primitives.
  virtual bool shapeless_ok() const { return true; }

  // Fusion trait: the elementwise functor computing this primitive on
  // inputs of dtypes `in` (its name in backend/common/*_ops.h, namespace
  // fluxion::detail), or null. compile fuses exactly the nodes whose
  // primitive names one (fuse_ir, compiled.cpp), and every backend's code
  // generator calls that functor, the one its eager kernels use. Unary
  // and binary primitives name the functor called like them; Select and
  // AsType theirs; everything else null.
  virtual const char* elementwise_functor(const std::vector<Dtype>& in) const {
    return nullptr;
  }

  virtual const char* name() const = 0;
  // The parameters that rebuild this primitive with its name (see
  // fluxion/export.h; every exportable primitive with parameters lists
  // them, in its constructor's order, and declares this together with the
  // static from_state that reads them back: FLUXION_DECLARE_STATE below).
  virtual std::vector<PrimitiveArg> state() const { return {}; }
  // Name plus parameters, for graph printing.
  virtual void print(std::ostream& os) const { os << name(); }

  const Stream& stream() const { return stream_; }
  Device device() const { return stream_.device; }

 private:
  Stream stream_;
};

// The kernels of a primitive, for the class bodies in fluxion/ops/*.h: the
// CPU backend defines eval_cpu (backend/cpu/<family>.cpp), a GPU backend
// eval_gpu; where a backend has no kernel the definition is generated from
// fluxion/primitive_list.h, so a class missing from that list fails to link.
#define FLUXION_DECLARE_EVAL                                       \
  void eval_cpu(const std::vector<array>& inputs,                  \
                std::vector<array>& outputs) override;             \
  void eval_gpu(const std::vector<array>& inputs,                  \
                std::vector<array>& outputs) override;

// The backend-neutral kernel of a primitive that moves no data (a view, or
// outputs forwarding input buffers), defined once in
// backend/common/views.cpp and called by every backend's eval_cpu /
// eval_gpu. It returns false, having done nothing, when input 0 must first
// be made row-contiguous (a reshape that no strides can express, an
// as_strided of a strided input): the backend copies it with its own copy
// kernel and calls again (see common::eval_view in backend/common/views.h).
#define FLUXION_DECLARE_VIEW_EVAL                                  \
  bool eval_view(const std::vector<array>& inputs,                 \
                 std::vector<array>& outputs);

// Declarations of a primitive's rule overrides, for the class bodies in
// fluxion/ops/*.h (the signatures are the virtuals above).
#define FLUXION_DECLARE_VJP                                        \
  std::vector<array> vjp(const std::vector<array>& primals,        \
                         const std::vector<array>& cotangents,     \
                         const std::vector<int>& argnums,          \
                         const std::vector<array>& outputs) override;
#define FLUXION_DECLARE_JVP                                        \
  std::vector<array> jvp(const std::vector<array>& primals,        \
                         const std::vector<array>& tangents,       \
                         const std::vector<int>& argnums) override;
#define FLUXION_DECLARE_VMAP                                       \
  std::pair<std::vector<array>, std::vector<int>> vmap(            \
      const std::vector<array>& inputs, const std::vector<int>& axes) override;
#define FLUXION_DECLARE_RULES \
  FLUXION_DECLARE_VJP         \
  FLUXION_DECLARE_JVP         \
  FLUXION_DECLARE_VMAP

// A primitive with parameters saves them with state() and is rebuilt from
// them by the static from_state (export_function writes the first,
// import_function calls the second; fluxion/primitive_args.h reads them
// back typed and checked). Declaring both together keeps saving and loading
// side by side: a primitive defines them next to each other in its .cpp
// file, and the import table (export_registry.cpp) finds from_state for
// every class of fluxion/primitive_list.h that has it.
#define FLUXION_DECLARE_STATE                       \
  std::vector<PrimitiveArg> state() const override; \
  static std::shared_ptr<Primitive> from_state(     \
      Stream s, const std::vector<PrimitiveArg>& args);

// An elementwise primitive NAME deriving from BASE (UnaryPrimitive or
// BinaryPrimitive): its output dtype is OUT, an expression of the input
// dtype `in`; the rest declares the rules NAME defines.
#define FLUXION_ELEMENTWISE_PRIMITIVE(BASE, NAME, OUT, ...)     \
  class NAME : public BASE {                                    \
   public:                                                      \
    using BASE::BASE;                                           \
    FLUXION_DECLARE_EVAL                                        \
    const char* name() const override { return #NAME; }         \
    __VA_ARGS__                                                 \
   protected:                                                   \
    Dtype output_dtype(Dtype in) const override { return OUT; } \
  };

// The tag used in error messages thrown from a transformation rule.
std::string rule_error(const char* rule, const Primitive& p);

}  // namespace fluxion
