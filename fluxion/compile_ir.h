// The tape that `compile` traces a function into: values (inputs, captured
// constants, intermediate results) and the nodes that produce them, in
// topological order. Simplification and fusion rewrite it; `run_ir` replays
// it on new inputs, building an ordinary lazy graph whose nodes share the
// traced primitives.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "fluxion/array.h"

namespace fluxion::detail {

struct IrValue {
  Shape shape;
  Dtype dtype;
  std::optional<array> constant;  // a captured array (no primitive)
};

struct IrNode {
  std::shared_ptr<Primitive> prim;
  std::vector<int> inputs;   // value indices
  std::vector<int> outputs;  // value indices, in sibling order
};

struct Ir {
  std::vector<IrValue> values;
  std::vector<IrNode> nodes;  // topological order
  std::vector<int> inputs;
  std::vector<int> outputs;
};

// Replays `ir` on `inputs`. With `shapeless`, output shapes come from each
// primitive's `output_shapes` (broadcasts feeding elementwise nodes follow
// their partners' new shapes); otherwise the traced shapes are reused.
// With `check` (a tape read from a file: import_function), the tape is
// not trusted: a value used before any node or input defines it, or a
// traced shape that is not what the node's primitive computes from its
// inputs (where the primitive has an output_shapes rule), raises
// "[import_function] Corrupt trace" rather than building a node whose
// kernel would read or write past its buffers.
std::vector<array> run_ir(const Ir& ir, const std::vector<array>& inputs,
                          bool shapeless, bool check = false);

// Broadcast or Reshape: nodes that only change how a fused group reads an
// input (strides, or a dense view in the group's order).
bool is_view_primitive(const Primitive& p);

// Rewrites: equal scalar constants merged, common subexpressions merged
// (`Primitive::is_equivalent` on the same inputs), no-op nodes dropped,
// unused nodes removed.
void simplify_ir(Ir& ir, bool shapeless);

// A node fuse_ir may take into a group: single output, inputs of its
// shape, and a functor (Primitive::elementwise_functor) for these real
// dtypes.
bool fusable(const IrNode& n, const Ir& ir);

// Runs of elementwise nodes become one `Compiled` node (compiled.h).
// Unless shapeless, reductions with their elementwise neighbours are
// fused first (fuse_reductions).
void fuse_ir(Ir& ir, bool shapeless);

// Row reductions (over the last axis) of float values on CPU streams,
// fused with the elementwise nodes feeding them and consuming them, and
// totals (over all axes) with the nodes feeding them: one `Compiled` node
// each (compile_reduce.cpp says which). Needs the traced shapes, so it is
// not run for shapeless compiles; nodes on GPU streams are left as they
// are (the CUDA Compiled evaluates elementwise tapes only).
void fuse_reductions(Ir& ir);

}  // namespace fluxion::detail
