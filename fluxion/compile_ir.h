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
// kernel would read or write past its buffers. With `values`, every
// value's array is handed back there too (a broadcast a shapeless replay
// left pending: as its first consumer settled it; unset if none did), for
// the checks that a shapeless replay keeps a fused group's shapes
// (replayed_row_shape).
std::vector<array> run_ir(const Ir& ir, const std::vector<array>& inputs,
                          bool shapeless, bool check = false,
                          std::vector<std::optional<array>>* values = nullptr);

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

// Who produces and who reads each value of a tape, for the fusion passes.
struct IrUses {
  std::vector<int> producer;                // node index, or -1
  std::vector<std::vector<int>> consumers;  // node indices
  std::vector<bool> is_output;              // a function output
  explicit IrUses(const Ir& ir);
  // Whether `v` is a function output or read by a node not `inside`.
  bool read_outside(int v, const std::vector<bool>& inside) const;
  // Whether every reader of `v` not `inside` a group comes after its root
  // `r`: then `v` may be one more output of the group.
  bool read_after(int v, int r, const std::vector<bool>& inside) const;
};

// The tape of a fused group: `members` (sorted node indices, one output
// each; `in_group` marks them), values renumbered, values made outside
// the group its inputs (their indices in `ir` appended to `outer_inputs`),
// and `outputs` (values of `ir`) its outputs.
Ir group_tape(const Ir& ir, const IrUses& uses, const std::vector<int>& members,
              const std::vector<bool>& in_group,
              const std::vector<int>& outputs, std::vector<int>& outer_inputs);

// Runs of elementwise nodes become one `Compiled` node (compiled.h), with
// an output for the last node and for each member read outside the group.
// Reductions with their elementwise neighbours are fused first
// (fuse_reductions).
void fuse_ir(Ir& ir, bool shapeless);

// Row reductions (over the last axis) of float values on CPU streams,
// fused with the elementwise nodes feeding them and consuming them (and a
// take_along_axis of one index per row), column reductions likewise, and
// totals (over all axes) with the nodes feeding them: one `Compiled` node
// each, with an output for each member read outside, a total's excepted
// (compile_reduce.cpp says which). Groups are formed from the traced
// shapes; under `shapeless` their kernels take every size at run time,
// and each replay at new shapes is checked (replayed_row_shape). Nodes on
// GPU streams are left as they are (the CUDA Compiled evaluates
// elementwise tapes only).
void fuse_reductions(Ir& ir, bool shapeless);

// The rows S (the reductions' input shape) of a fused reduction group's
// `tape` replayed on `inputs` of new shapes (a shapeless compile), or
// nullopt when the replay breaks an assumption the group was formed on
// (a per-row input that now varies along the row, a value whose shape no
// longer has its part): its Compiled node then runs its nodes one by one.
std::optional<Shape> replayed_row_shape(const Ir& tape,
                                        const std::vector<array>& inputs);

}  // namespace fluxion::detail
