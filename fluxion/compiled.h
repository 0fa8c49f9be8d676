// The `Compiled` primitive: a fused run of elementwise nodes from a
// compiled function's tape, with one output or several (a fused value
// also read outside the group is written by the same loop, not
// recomputed; CPU streams only so far). It is backend-neutral: which nodes
// fuse is decided by the primitives' elementwise_functor trait (fuse_ir),
// and each backend's eval builds its own kernel source from the tape (the
// CPU's: backend/cpu/codegen.h), kept here once built. Without a working
// compiler the fused nodes are evaluated one by one. Its rules replay the
// fused nodes, so grad, jvp and vmap see through it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "fluxion/compile_ir.h"
#include "fluxion/primitive.h"

namespace fluxion {

class Compiled : public Primitive {
 public:
  // `tape`: the fused nodes, with the fused region's inputs as its inputs
  // and its outputs (the node's, in order).
  Compiled(Stream s, detail::Ir tape);

  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_RULES
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  bool is_equivalent(const Primitive& other) const override;
  const char* name() const override { return "Compiled"; }
  // Prints the fused primitives, e.g. Compiled(Multiply,Tanh,Add).
  void print(std::ostream& os) const override;

  const detail::Ir& tape() const { return tape_; }
  // False when an input feeds both a reshape and other nodes: one kernel
  // could not read it both ways (fuse_ir then leaves the group unfused).
  bool consistent() const { return consistent_; }
  // Whether input k is read through an absorbed reshape: as a
  // row-contiguous array of the output's shape.
  bool reshaped(size_t k) const { return reshaped_[k]; }
  // A fused reduction's rows S (its reductions' input shape) for these
  // inputs: the tape's at the traced shapes, else the replay's, or nullopt
  // when the replay breaks an assumption of the group
  // (detail::replayed_row_shape; remembered per input shapes).
  std::optional<Shape> row_shape(const std::vector<array>& inputs) const;

  // What a backend builds for this tape (its generated source, the loaded
  // kernel): made by `make` on the first evaluation on `device`, once
  // (calls racing from several streams wait for it), then shared by every
  // call of the compiled function.
  template <typename T, typename Make>
  const T& backend_kernel(Device::DeviceType device, Make&& make) const {
    auto& slot = kernels_[device == Device::gpu ? 1 : 0];
    std::call_once(slot.once, [&] {
      slot.value = std::make_shared<const T>(make());
    });
    return *static_cast<const T*>(slot.value.get());
  }

 private:
  // Whether the inputs have the shapes the tape was traced with.
  bool traced_shapes(const std::vector<array>& inputs) const;
  std::vector<array> replay(const std::vector<array>& inputs) const;
  // Without a generated kernel: the fused nodes evaluated one by one, each
  // by `eval_node(node, outputs)` (the backend's kernel of its primitive).
  void eval_fallback(
      const std::vector<array>& inputs, std::vector<array>& outputs,
      const std::function<void(array&, std::vector<array>&)>& eval_node);
  // One output: the CUDA Compiled's call (its groups keep one output until
  // the GPU has run the several-output path; fuse_ir says so).
  void eval_fallback(
      const std::vector<array>& inputs, array& out,
      const std::function<void(array&, std::vector<array>&)>& eval_node) {
    std::vector<array> outputs{out};
    eval_fallback(inputs, outputs, eval_node);
  }

  detail::Ir tape_;
  bool consistent_ = true;
  std::vector<bool> reshaped_;
  struct Slot {
    std::once_flag once;
    std::shared_ptr<const void> value;
  };
  mutable Slot kernels_[2];  // cpu, gpu
  mutable std::mutex row_shapes_mutex_;
  mutable std::map<std::vector<Shape>, std::optional<Shape>> row_shapes_;
};

namespace detail {
// How many times a Compiled node ran its nodes one by one for want of a
// generated kernel (any backend), since the process started: tests use it
// to tell a fused kernel from its fallback, whose values are the same.
uint64_t compiled_fallbacks();
}  // namespace detail

}  // namespace fluxion
