// Reductions fused with their elementwise neighbours (compile_ir.h:
// fuse_reductions). A group is a set of nodes over one "row shape" S whose
// last axis is reduced: elementwise nodes of shape S (per element of a
// row), reductions over the last axis of an S-shaped value (shape Sr: S
// with the last axis 1), elementwise nodes of shape Sr or of Sr without
// its last axis (per row; keepdims=False), the squeezes and expand_dims
// between those two, and the broadcasts from Sr to S. One generated kernel then walks each row in as
// many passes as the chain of reductions needs (softmax: max, exp-sum,
// write), so nothing of shape S is materialized. A reduction over all the
// axes of a value of several dims fuses only with its prologue: its
// partial sums cross rows, so nothing may consume them inside the kernel.
#include <algorithm>
#include <queue>
#include <unordered_map>

#include "fluxion/compile_ir.h"
#include "fluxion/compiled.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"

namespace fluxion::detail {

namespace {

bool is_float(Dtype t) {
  return t == float16 || t == bfloat16 || t == float32 || t == float64;
}

// How a Reduce node may fuse: not at all, over the last axis (a row
// reduction), or over all axes of a value of two or more dims (a total).
enum class ReduceKind { None, Row, Total };

ReduceKind reduce_kind(const IrNode& n, const Ir& ir) {
  auto* r = dynamic_cast<const Reduce*>(n.prim.get());
  if (!r || n.inputs.size() != 1 || n.outputs.size() != 1) {
    return ReduceKind::None;
  }
  // The generated kernels accumulate floats only (integer sums wrap, and
  // And/Or are boolean: left to the eager kernels).
  if (r->type() == Reduce::And || r->type() == Reduce::Or) {
    return ReduceKind::None;
  }
  const auto& in = ir.values[n.inputs[0]];
  if (!is_float(in.dtype) || !is_float(ir.values[n.outputs[0]].dtype)) {
    return ReduceKind::None;
  }
  int nd = static_cast<int>(in.shape.size());
  if (nd == 0) {
    return ReduceKind::None;
  }
  const auto& axes = r->axes();
  if (axes.size() == 1 && axes[0] == nd - 1) {
    // A row of one element would make S and Sr the same shape, and a node
    // could not tell per-element from per-row: left unfused.
    return in.shape.back() == 1 ? ReduceKind::None : ReduceKind::Row;
  }
  if (static_cast<int>(axes.size()) == nd) {
    size_t size = 1;
    for (auto d : in.shape) size *= d;
    return size == 1 ? ReduceKind::None : ReduceKind::Total;
  }
  return ReduceKind::None;  // non-trailing axes: the eager kernel
}

// An elementwise node the generated kernels compute (fuse_ir's test), not
// an already fused one.
bool elementwise(const IrNode& n, const Ir& ir) {
  return !dynamic_cast<const Compiled*>(n.prim.get()) && fusable(n, ir);
}

bool is_broadcast_node(const IrNode& n) {
  return dynamic_cast<const Broadcast*>(n.prim.get()) != nullptr;
}

// Squeeze, ExpandDims, Reshape: inside a group they only move per-row
// values between Sr and its squeezed form (keepdims=False and back).
bool is_reshaping(const IrNode& n) {
  auto* p = n.prim.get();
  return n.inputs.size() == 1 && n.outputs.size() == 1 &&
         (dynamic_cast<const Squeeze*>(p) || dynamic_cast<const ExpandDims*>(p) ||
          dynamic_cast<const Reshape*>(p));
}

// Sr without its last axis: the per-row values of keepdims=False.
Shape squeezed(const Shape& s_red) {
  return Shape(s_red.begin(), s_red.end() - 1);
}

// A value of the squeezed shape that a broadcast to S (or a read against
// S) would align with the row's own axis: kept out of groups. (A scalar,
// the squeezed form of a 1-D row's Sr, or a last axis of 1 is harmless.)
bool misaligned(const Shape& s, const Shape& s_red) {
  return s == squeezed(s_red) && s != s_red && !s.empty() && s.back() != 1;
}

bool on_cpu(const IrNode& n) {
  return n.prim->stream().device.type == Device::cpu;
}

// mean's and var's divisor reads only its input's shape, which a compile
// that is not shapeless fixes: a constant, so that the divided value has
// the reduction as its only consumer and can fuse.
void fold_element_counts(Ir& ir) {
  std::vector<IrNode> kept;
  for (auto& n : ir.nodes) {
    auto* c = dynamic_cast<const NumberOfElements*>(n.prim.get());
    if (!c || !on_cpu(n) || n.outputs.size() != 1) {
      kept.push_back(std::move(n));
      continue;
    }
    const Shape& in = ir.values[n.inputs[0]].shape;
    double count = 1;
    for (int ax : c->axes()) {
      count *= in[ax];
    }
    auto& out = ir.values[n.outputs[0]];
    if (out.dtype == float32) {
      out.constant = array(static_cast<float>(count));
    } else if (out.dtype == float64) {
      out.constant = array(count);
    } else {
      kept.push_back(std::move(n));  // half or integer counts: left as is
    }
  }
  ir.nodes = std::move(kept);
}

}  // namespace

void fuse_reductions(Ir& ir) {
  fold_element_counts(ir);
  int count = static_cast<int>(ir.nodes.size());
  std::vector<int> producer(ir.values.size(), -1);
  std::vector<std::vector<int>> consumers(ir.values.size());
  for (int i = 0; i < count; ++i) {
    for (int v : ir.nodes[i].outputs) producer[v] = i;
    for (int v : ir.nodes[i].inputs) consumers[v].push_back(i);
  }
  std::vector<bool> is_output(ir.values.size(), false);
  for (int v : ir.outputs) is_output[v] = true;
  // Whether a row reduction lies upstream through nodes that could join
  // a group: elementwise roots without one are skipped at once (a long
  // elementwise chain would otherwise be searched from every node).
  std::vector<bool> reaches(count, false);
  for (int i = 0; i < count; ++i) {
    auto& n = ir.nodes[i];
    if (reduce_kind(n, ir) != ReduceKind::None) {
      reaches[i] = true;
      continue;
    }
    if (!elementwise(n, ir) && !is_broadcast_node(n) && !is_reshaping(n)) {
      continue;
    }
    for (int v : n.inputs) {
      reaches[i] = reaches[i] || (producer[v] >= 0 && reaches[producer[v]]);
    }
  }
  std::vector<bool> grouped(count, false);
  std::vector<std::optional<IrNode>> replacement(count);
  for (int r = count - 1; r >= 0; --r) {
    auto& root = ir.nodes[r];
    if (grouped[r] || !reaches[r] || !on_cpu(root)) {
      continue;
    }
    ReduceKind root_kind = reduce_kind(root, ir);
    if (root_kind == ReduceKind::None && !elementwise(root, ir)) {
      continue;
    }
    // S and Sr, fixed by the first reduction met (the root's own shape is
    // one of them).
    bool known = false;
    Shape s_row, s_red;
    const Shape& root_shape = ir.values[root.outputs[0]].shape;
    if (root_kind != ReduceKind::None) {
      known = true;
      s_row = ir.values[root.inputs[0]].shape;
      s_red = root_shape;
    }
    if (!known) {
      // An elementwise root: the nearest row reduction upstream (through
      // nodes that could join) whose input or output has the root's shape
      // fixes S, so that per-row nodes between them (log_softmax's log of
      // the sum) can join before that reduction is reached.
      std::vector<int> stack{r};
      std::vector<bool> seen(count, false);
      int best = -1;
      while (!stack.empty()) {
        int k = stack.back();
        stack.pop_back();
        for (int v : ir.nodes[k].inputs) {
          int q = producer[v];
          if (q < 0 || seen[q] || grouped[q]) continue;
          seen[q] = true;
          auto& n = ir.nodes[q];
          if (reduce_kind(n, ir) == ReduceKind::Row) {
            const Shape& in = ir.values[n.inputs[0]].shape;
            const Shape& out = ir.values[n.outputs[0]].shape;
            if ((in == root_shape || out == root_shape ||
                 squeezed(out) == root_shape) &&
                q > best) {
              best = q;
            }
          } else if (reaches[q] && (elementwise(n, ir) ||
                                    is_broadcast_node(n) || is_reshaping(n))) {
            stack.push_back(q);
          }
        }
      }
      if (best >= 0) {
        known = true;
        s_row = ir.values[ir.nodes[best].inputs[0]].shape;
        s_red = ir.values[ir.nodes[best].outputs[0]].shape;
      }
    }
    const bool total = root_kind == ReduceKind::Total;
    auto shape_ok = [&](const Shape& s) {
      return known ? (s == s_row ||
                      (!total && (s == s_red || s == squeezed(s_red))))
                   : s == root_shape;
    };
    // Per-row values of the squeezed shape are internal only (an outside
    // value of that shape would read as per-element when its size is R).
    auto per_row_shape = [&](const Shape& s) {
      return known && !total && (s == s_red || s == squeezed(s_red));
    };
    std::vector<int> members{r};
    std::vector<bool> in_group(count, false), shared_view(count, false);
    in_group[r] = true;
    int reductions = root_kind != ReduceKind::None;
    std::priority_queue<int> frontier;
    auto push_inputs = [&](int k) {
      for (int v : ir.nodes[k].inputs) {
        if (producer[v] >= 0) frontier.push(producer[v]);
      }
    };
    push_inputs(r);
    while (!frontier.empty()) {
      int k = frontier.top();
      frontier.pop();
      auto& n = ir.nodes[k];
      if (in_group[k] || grouped[k] || n.outputs.size() != 1 || !on_cpu(n) ||
          is_output[n.outputs[0]]) {
        continue;
      }
      const Shape& out_shape = ir.values[n.outputs[0]].shape;
      ReduceKind kind = reduce_kind(n, ir);
      bool accept = false;
      if (kind == ReduceKind::Row && !total) {
        const Shape& in_shape = ir.values[n.inputs[0]].shape;
        if (!known && (out_shape == root_shape || in_shape == root_shape)) {
          known = true;
          s_row = in_shape;
          s_red = out_shape;
        }
        accept = known && in_shape == s_row && out_shape == s_red;
      } else if (kind == ReduceKind::None) {
        const Shape& in0 = ir.values[n.inputs[0]].shape;
        bool internal_in = producer[n.inputs[0]] >= 0;
        if (is_reshaping(n)) {
          accept = internal_in && per_row_shape(in0) &&
                   per_row_shape(out_shape);
        } else if (is_broadcast_node(n)) {
          // From a per-row value only in the keepdims form: a squeezed one
          // would broadcast along the row's own axis.
          accept = shape_ok(out_shape) && !(known && misaligned(in0, s_red));
        } else {
          accept = elementwise(n, ir) && shape_ok(out_shape);
        }
      }
      if (!accept) {
        continue;
      }
      int v = n.outputs[0];
      bool inside = std::all_of(
          consumers[v].begin(), consumers[v].end(),
          [&](int c) { return in_group[c] && !shared_view[c]; });
      // A broadcast read elsewhere too is copied in (as fuse_ir does); any
      // other node with an outside consumer would be computed twice.
      if (!inside && !is_broadcast_node(n)) {
        continue;
      }
      in_group[k] = true;
      members.push_back(k);
      reductions += kind != ReduceKind::None;
      if (inside) {
        push_inputs(k);
      } else {
        shared_view[k] = true;
      }
    }
    int ops = 0;
    for (int k : members) {
      ops += !is_broadcast_node(ir.nodes[k]) && !is_reshaping(ir.nodes[k]);
    }
    if (reductions == 0 || ops < 2) {
      continue;  // a lone reduction is the eager kernel's
    }
    std::sort(members.begin(), members.end());
    Ir tape;
    std::unordered_map<int, int> local;
    std::vector<int> outer_inputs;
    auto value = [&](int v) {
      auto it = local.find(v);
      if (it != local.end()) return it->second;
      int l = static_cast<int>(tape.values.size());
      tape.values.push_back({ir.values[v].shape, ir.values[v].dtype, {}});
      local[v] = l;
      return l;
    };
    bool ok = true;
    for (int k : members) {
      for (int v : ir.nodes[k].inputs) {
        if (!local.count(v) && (producer[v] < 0 || !in_group[producer[v]])) {
          // Outside values are read broadcast against S (their shapes
          // broadcast to S or Sr, which broadcasts to S).
          const Shape& s = ir.values[v].shape;
          ok = ok && s.size() <= s_row.size() && !misaligned(s, s_red);
          tape.inputs.push_back(value(v));
          outer_inputs.push_back(v);
        }
      }
      IrNode n{ir.nodes[k].prim, {}, {}};
      for (int v : ir.nodes[k].inputs) n.inputs.push_back(value(v));
      n.outputs.push_back(value(ir.nodes[k].outputs[0]));
      tape.nodes.push_back(std::move(n));
    }
    if (!ok || !known) {
      continue;
    }
    tape.outputs.push_back(local.at(root.outputs[0]));
    auto prim = std::make_shared<Compiled>(root.prim->stream(), std::move(tape));
    for (int k : members) {
      if (!shared_view[k]) grouped[k] = true;
    }
    replacement[r] = IrNode{prim, outer_inputs, root.outputs};
  }
  std::vector<IrNode> nodes;
  for (int i = 0; i < count; ++i) {
    if (replacement[i]) {
      nodes.push_back(std::move(*replacement[i]));
    } else if (!grouped[i]) {
      nodes.push_back(std::move(ir.nodes[i]));
    }
  }
  ir.nodes = std::move(nodes);
}

}  // namespace fluxion::detail
