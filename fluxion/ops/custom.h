// Primitives behind the transformations: depends and custom functions.
#pragma once

#include <functional>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/primitive.h"
#include "fluxion/transforms.h"

namespace fluxion {

// `inputs` unchanged, but only computed after `dependencies` are: orders a
// recomputation after the arrays it must follow (used by checkpoint).
std::vector<array> depends(const std::vector<array>& inputs,
                           const std::vector<array>& dependencies);

// Inputs: the arrays to pass through, then the dependencies. Outputs share
// the first inputs' buffers.
class Depends : public Primitive {
 public:
  Depends(Stream s, int num_passed) : Primitive(s), num_passed_(num_passed) {}
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_VIEW_EVAL
  FLUXION_DECLARE_RULES
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "Depends"; }
  FLUXION_DECLARE_STATE
  bool is_equivalent(const Primitive& o) const override {
    return Primitive::is_equivalent(o) &&
           static_cast<const Depends&>(o).num_passed_ == num_passed_;
  }

 private:
  int num_passed_;  // inputs forwarded to outputs; the rest are dependencies
};

// A function with custom transformation rules. Inputs: the function's
// arguments followed by its (stop-gradient'ed) outputs, which the forward
// pass simply forwards.
class CustomTransforms : public Primitive {
 public:
  CustomTransforms(Stream s, int num_outputs, VjpFn vjp, JvpFn jvp,
                   VmapFn vmap)
      : Primitive(s),
        num_outputs_(num_outputs),
        vjp_fun_(std::move(vjp)),
        jvp_fun_(std::move(jvp)),
        vmap_fun_(std::move(vmap)) {}
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_VIEW_EVAL
  FLUXION_DECLARE_RULES
  // Its rules are arbitrary functions: equivalent only to itself (compile
  // must not merge two custom functions of the same inputs).
  bool is_equivalent(const Primitive& o) const override { return this == &o; }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "CustomTransforms"; }

 private:
  int num_outputs_;
  VjpFn vjp_fun_;
  JvpFn jvp_fun_;
  VmapFn vmap_fun_;
};

}  // namespace fluxion
