// The `Compiled` primitive: a fused run of elementwise nodes from a
// compiled function's tape. Its CPU kernel is generated C++ (see
// backend/cpu/codegen.h); without a working compiler it evaluates the fused
// nodes one by one. Its rules replay the fused nodes, so grad, jvp and vmap
// see through it.
#pragma once

#include <memory>
#include <string>

#include "fluxion/compile_ir.h"
#include "fluxion/primitive.h"

namespace fluxion {

class Compiled : public Primitive {
 public:
  // `tape`: the fused nodes, with the fused region's inputs as its inputs
  // and one output. The generated source is made once, here.
  Compiled(Stream s, detail::Ir tape);

  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_RULES
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  bool is_equivalent(const Primitive& other) const override;
  const char* name() const override { return "Compiled"; }
  // Prints the fused primitives, e.g. Compiled(Multiply,Tanh,Add).
  void print(std::ostream& os) const override;

  const detail::Ir& tape() const { return tape_; }
  // Empty when the tape cannot be generated: some node has no template,
  // or an input feeds both a reshape and other nodes (fuse_ir then leaves
  // the group unfused).
  const std::string& source() const { return source_; }
  // Whether input k is read through an absorbed reshape: as a
  // row-contiguous array of the output's shape.
  bool reshaped(size_t k) const { return reshaped_[k]; }

 private:
  std::vector<array> replay(const std::vector<array>& inputs) const;
  void eval_fallback(const std::vector<array>& inputs, array& out);

  detail::Ir tape_;
  std::string source_;
  std::vector<bool> reshaped_;
};

}  // namespace fluxion
