// Reductions fused with their elementwise neighbours (compile_ir.h:
// fuse_reductions). A group is a set of nodes over one "row shape" S whose
// last axis is reduced: elementwise nodes of shape S (per element of a
// row), reductions over the last axis of an S-shaped value (shape Sr: S
// with the last axis 1), elementwise nodes of shape Sr or of Sr without
// its last axis (per row; keepdims=False), the squeezes and expand_dims
// between those two, and the broadcasts from Sr to S. One generated kernel
// then walks each row in as many passes as the chain of reductions needs
// (softmax: max, exp-sum, write), so nothing of shape S is materialized.
// A column group is the same over the leading axes: reductions over axes
// 0..m-1 of S (a batch's statistics, a bias gradient), per-column nodes of
// Sr = S with those axes 1 or of S[m:], and broadcasts back; its kernel
// walks blocks of columns over every row. A reduction over all the axes of
// a value of several dims fuses only with its prologue: its partial sums
// cross rows, so nothing may consume them inside the kernel. Groups are
// formed from the traced shapes; a shapeless compile replays them at
// others, each replay checked against what the group was formed on
// (replayed_row_shape, at the end).
#include <algorithm>
#include <queue>
#include <unordered_map>

#include "fluxion/compile_ir.h"
#include "fluxion/compiled.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"

namespace fluxion::detail {

namespace {

bool is_float(Dtype t) {
  return t == float16 || t == bfloat16 || t == float32 || t == float64;
}

// How a Reduce node may fuse: not at all, over the last axis (a row
// reduction), over leading axes 0..m-1 with m < ndim (a column one), or
// over all axes of a value of two or more dims (a total).
enum class ReduceKind { None, Row, Column, Total };

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
  size_t size = 1;
  for (auto d : in.shape) size *= d;
  // (Nor a reduction of nothing: the kernels tell a value per element from
  // one per row or a scalar by its shape or size, and every value of an
  // empty trace has size 0; a shapeless compile traced so would read them
  // wrong at every other shape.)
  if (nd == 0 || size == 0) {
    return ReduceKind::None;
  }
  const auto& axes = r->axes();
  if (axes.size() == 1 && axes[0] == nd - 1) {
    // A row of one element would make S and Sr the same shape, and a node
    // could not tell per-element from per-row: left unfused.
    return in.shape.back() == 1 ? ReduceKind::None : ReduceKind::Row;
  }
  if (static_cast<int>(axes.size()) == nd) {
    return size == 1 ? ReduceKind::None : ReduceKind::Total;
  }
  // Leading axes (axes are sorted): columns, unless every reduced axis is
  // 1 (S and Sr would then be one shape).
  int64_t reduced = 1;
  for (int i = 0; i < static_cast<int>(axes.size()); ++i) {
    if (axes[i] != i) {
      return ReduceKind::None;  // other axes: the eager kernel
    }
    reduced *= in.shape[i];
  }
  return reduced > 1 ? ReduceKind::Column : ReduceKind::None;
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

// take_along_axis over the last axis with one index per row (a
// cross-entropy's pick of the target's logit): inside a row group a
// per-row value read from the row in hand. (The kernel checks the index:
// one out of range makes the node run its nodes one by one, which raises
// eager's error.)
bool is_row_gather(const IrNode& n, const Ir& ir) {
  auto* g = dynamic_cast<const GatherAxis*>(n.prim.get());
  if (!g || n.inputs.size() != 2 || n.outputs.size() != 1) {
    return false;
  }
  const auto& src = ir.values[n.inputs[0]];
  const auto& idx = ir.values[n.inputs[1]];
  const auto& out = ir.values[n.outputs[0]];
  int nd = static_cast<int>(src.shape.size());
  return nd > 0 && g->axis() == nd - 1 && is_integral(idx.dtype) &&
         !is_complex(src.dtype) && idx.shape.back() == 1 &&
         out.shape == idx.shape && out.dtype == src.dtype;
}

// The shapes of a group, fixed by its first reduction: S (the reduction's
// input), Sr (its output, reduced axes kept as 1) and Sr without the
// reduced axes (the per-row or per-column values of keepdims=False).
struct GroupShapes {
  bool known = false;
  bool column = false;  // leading axes reduced (else the last one)
  Shape row, red, squeezed;

  void set(const IrNode& reduce, const Ir& ir, bool is_column) {
    set(ir.values[reduce.inputs[0]].shape, ir.values[reduce.outputs[0]].shape,
        static_cast<const Reduce*>(reduce.prim.get())->axes().size(),
        is_column);
  }
  // From the reduction's input and output shapes (`m` reduced axes).
  void set(const Shape& in, const Shape& out, size_t m, bool is_column) {
    known = true;
    column = is_column;
    row = in;
    red = out;
    squeezed = column ? Shape(red.begin() + m, red.end())
                      : Shape(red.begin(), red.end() - 1);
  }
  // The shape a group value traced with shape `s` has in a replay whose
  // group shapes are `now`: S, Sr and the squeezed form follow the replay
  // (they are never equal: S != Sr, and the squeezed form has another
  // rank); nothing else in a group changes.
  Shape replayed(const Shape& s, const GroupShapes& now) const {
    return s == row ? now.row
           : s == red ? now.red
           : s == squeezed ? now.squeezed
                           : s;
  }
  // Whether a reduction node of this kind fits the group.
  bool fits(const IrNode& reduce, const Ir& ir, bool is_column) const {
    return column == is_column && ir.values[reduce.inputs[0]].shape == row &&
           ir.values[reduce.outputs[0]].shape == red;
  }
  // A value of the squeezed shape that a broadcast to S (or a read against
  // S) would align with the row's own axis: kept out of row groups. (A
  // scalar, the squeezed form of a 1-D row's Sr, or a last axis of 1 is
  // harmless.) Column groups have none: their squeezed values align with
  // S's trailing axes, where they belong.
  bool misaligned(const Shape& s) const {
    return known && !column && s == squeezed && s != red && !s.empty() &&
           s.back() != 1;
  }
};

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

// Under a shapeless compile mean's and var's divisor must be counted on
// each call, so it stays a node. It reads only its input's shape, and an
// elementwise node's inputs have its shape in every replay (run_ir raises
// otherwise): the count moves to the earliest such input, up the chain
// (mean(square(x - y)) counts x), so that the divided value, which would
// join a group, is not read outside it for its shape alone.
void reroute_element_counts(Ir& ir) {
  IrUses uses(ir);
  for (auto& n : ir.nodes) {
    if (!dynamic_cast<const NumberOfElements*>(n.prim.get()) || !on_cpu(n)) {
      continue;
    }
    int v = n.inputs[0];
    for (int p = uses.producer[v]; p >= 0 && fusable(ir.nodes[p], ir);
         p = uses.producer[v]) {
      v = ir.nodes[p].inputs[0];
      for (int u : ir.nodes[p].inputs) {
        if (uses.producer[u] < uses.producer[v]) v = u;
      }
    }
    n.inputs[0] = v;
  }
}

// A group's root: a reduction, or an elementwise node whose shapes come
// from the nearest row or column reduction upstream.
struct Root {
  ReduceKind kind = ReduceKind::None;
  GroupShapes g;
};

// Whether the kernel of a group over S (traced), reducing `axes`, reads
// an outside input traced with shape `t` right when it now has shape `s`
// and the group's rows are `now` (S in this replay): `s` broadcasts to it
// (the kernel reads inputs with strides against it), and an input that
// was constant along the reduced axes (a per-row or per-column value, a
// scalar: read once per row or column) still is.
bool input_fits(const Shape& t, const Shape& s, const Shape& traced_row,
                const Shape& now, const std::vector<int>& axes) {
  if (s.size() > now.size()) {
    return false;
  }
  const size_t off = now.size() - s.size();
  for (size_t j = 0; j < s.size(); ++j) {
    if (s[j] != 1 && s[j] != now[off + j]) return false;
  }
  // Axis a of the rows as a dimension of a shape of rank r (1 if absent).
  auto dim = [](const Shape& x, size_t rows_rank, int a) {
    size_t lead = rows_rank - x.size();
    return static_cast<size_t>(a) < lead ? 1 : x[a - lead];
  };
  bool was_constant = true, is_constant = true;
  for (int a : axes) {
    was_constant = was_constant && dim(t, traced_row.size(), a) == 1;
    is_constant = is_constant && dim(s, now.size(), a) == 1;
  }
  return !was_constant || is_constant;
}

}  // namespace

void fuse_reductions(Ir& ir, bool shapeless) {
  if (shapeless) {
    reroute_element_counts(ir);
  } else {
    fold_element_counts(ir);
  }
  int count = static_cast<int>(ir.nodes.size());
  IrUses uses(ir);
  const auto& producer = uses.producer;
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
    if (!elementwise(n, ir) && !is_broadcast_node(n) && !is_reshaping(n) &&
        !is_row_gather(n, ir)) {
      continue;
    }
    for (int v : n.inputs) {
      reaches[i] = reaches[i] || (producer[v] >= 0 && reaches[producer[v]]);
    }
  }
  auto grouping = [](ReduceKind k) {
    return k == ReduceKind::Row || k == ReduceKind::Column;
  };
  std::vector<bool> grouped(count, false);
  // The root r's kind and shapes, from its nodes not yet grouped.
  auto find_root = [&](int r) {
    Root root;
    auto& n = ir.nodes[r];
    root.kind = reduce_kind(n, ir);
    if (root.kind != ReduceKind::None) {
      root.g.set(n, ir, root.kind == ReduceKind::Column);
      return root;
    }
    // An elementwise root: the nearest row or column reduction upstream
    // (through nodes that could join) whose input or output has the
    // root's shape fixes S, so that per-row nodes between them
    // (log_softmax's log of the sum) can join before that reduction is
    // reached.
    const Shape& root_shape = ir.values[n.outputs[0]].shape;
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
        auto& m = ir.nodes[q];
        if (grouping(reduce_kind(m, ir))) {
          GroupShapes c;
          c.set(m, ir, reduce_kind(m, ir) == ReduceKind::Column);
          if ((c.row == root_shape || c.red == root_shape ||
               c.squeezed == root_shape) &&
              q > best) {
            best = q;
          }
        } else if (reaches[q] &&
                   (elementwise(m, ir) || is_broadcast_node(m) ||
                    is_reshaping(m) || is_row_gather(m, ir))) {
          stack.push_back(q);
        }
      }
    }
    if (best >= 0) {
      auto& m = ir.nodes[best];
      root.g.set(m, ir, reduce_kind(m, ir) == ReduceKind::Column);
    }
    return root;
  };
  // Roots over the largest rows first, then (as fuse_ir) from the end: a
  // value of a small row that is per row for a larger one (cross-entropy's
  // loss per row, before its mean) joins the larger row's group, whose
  // kernel has the row in hand, not the small row's.
  std::vector<std::pair<size_t, int>> order;
  for (int r = 0; r < count; ++r) {
    auto& n = ir.nodes[r];
    if (!reaches[r] || !on_cpu(n) ||
        (reduce_kind(n, ir) == ReduceKind::None && !elementwise(n, ir))) {
      continue;
    }
    size_t size = 1;
    for (auto d : find_root(r).g.row) size *= d;
    order.emplace_back(size, r);
  }
  std::sort(order.rbegin(), order.rend());
  std::vector<std::optional<IrNode>> replacement(count);
  for (auto [size, r] : order) {
    auto& root = ir.nodes[r];
    if (grouped[r]) {
      continue;
    }
    Root found = find_root(r);
    ReduceKind root_kind = found.kind;
    GroupShapes& g = found.g;
    const Shape& root_shape = ir.values[root.outputs[0]].shape;
    const bool total = root_kind == ReduceKind::Total;
    auto shape_ok = [&](const Shape& s) {
      return g.known ? (s == g.row ||
                        (!total && (s == g.red || s == g.squeezed)))
                     : s == root_shape;
    };
    // Per-row values of the squeezed shape are internal only (an outside
    // value of that shape would read as per-element when its size is R).
    auto per_row_shape = [&](const Shape& s) {
      return g.known && !total && (s == g.red || s == g.squeezed);
    };
    std::vector<int> members{r};
    // reads_inside: members whose reads count as the group's (not a
    // broadcast copied in, whose original stays for outside readers).
    std::vector<bool> in_group(count, false), reads_inside(count, false);
    in_group[r] = reads_inside[r] = true;
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
      if (in_group[k] || grouped[k] || n.outputs.size() != 1 || !on_cpu(n)) {
        continue;
      }
      const Shape& out_shape = ir.values[n.outputs[0]].shape;
      ReduceKind kind = reduce_kind(n, ir);
      bool accept = false;
      if (grouping(kind) && !total) {
        const Shape& in_shape = ir.values[n.inputs[0]].shape;
        const bool column = kind == ReduceKind::Column;
        if (!g.known && (out_shape == root_shape || in_shape == root_shape)) {
          g.set(n, ir, column);
        }
        accept = g.known && g.fits(n, ir, column);
      } else if (is_row_gather(n, ir)) {
        // From a value of the row, by an index per row: row groups only.
        accept = g.known && !g.column && !total &&
                 ir.values[n.inputs[0]].shape == g.row && out_shape == g.red;
      } else if (kind == ReduceKind::None && !n.inputs.empty()) {
        // (A node without inputs, a constant's creation, stays outside.)
        const Shape& in0 = ir.values[n.inputs[0]].shape;
        bool internal_in = producer[n.inputs[0]] >= 0;
        if (is_reshaping(n)) {
          accept = internal_in && per_row_shape(in0) &&
                   per_row_shape(out_shape);
        } else if (is_broadcast_node(n)) {
          // From a per-row value only in the keepdims form: a squeezed one
          // would broadcast along the row's own axis.
          accept = shape_ok(out_shape) && !g.misaligned(in0);
        } else {
          accept = elementwise(n, ir) && shape_ok(out_shape);
        }
      }
      if (!accept) {
        continue;
      }
      int v = n.outputs[0];
      bool inside = !uses.read_outside(v, reads_inside);
      // A broadcast read elsewhere too is copied in (as fuse_ir does); any
      // other node read after the group joins as one more output (a total
      // has one: its partial sums are all it computes per element).
      if (!inside && !is_broadcast_node(n) &&
          (total || !uses.read_after(v, r, reads_inside))) {
        continue;
      }
      in_group[k] = true;
      members.push_back(k);
      reductions += kind != ReduceKind::None;
      if (inside || !is_broadcast_node(n)) {
        reads_inside[k] = true;
        push_inputs(k);
      }
    }
    int ops = 0;
    for (int k : members) {
      ops += !is_broadcast_node(ir.nodes[k]) && !is_reshaping(ir.nodes[k]);
    }
    if (reductions == 0 || ops < 2 || !g.known) {
      continue;  // a lone reduction is the eager kernel's
    }
    std::sort(members.begin(), members.end());
    std::vector<int> outputs;
    for (int k : members) {
      int v = ir.nodes[k].outputs[0];
      if (k == r || (reads_inside[k] && uses.read_outside(v, reads_inside))) {
        outputs.push_back(v);
      }
    }
    std::vector<int> outer_inputs;
    Ir tape = group_tape(ir, uses, members, in_group, outputs, outer_inputs);
    // Outside values are read broadcast against S (their shapes broadcast
    // to S or Sr, which broadcasts to S). The column kernel reads S, Sr,
    // its squeezed form and scalars only.
    bool ok = true;
    for (int v : outer_inputs) {
      const Shape& s = ir.values[v].shape;
      ok = ok && s.size() <= g.row.size() && !g.misaligned(s);
      if (g.column) {
        size_t n = 1;
        for (auto d : s) n *= d;
        ok = ok && (s == g.row || s == g.red || s == g.squeezed || n == 1);
      }
    }
    if (!ok) {
      continue;
    }
    auto prim = std::make_shared<Compiled>(root.prim->stream(), std::move(tape));
    for (int k : members) {
      if (reads_inside[k]) grouped[k] = true;
    }
    replacement[r] = IrNode{prim, outer_inputs, outputs};
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

// The assumptions fuse_reductions made from the traced shapes, checked
// again on a replay's: every group value keeps its part (S, Sr or the
// squeezed form, in the replay's sizes), a squeezed per-row value is
// still not broadcast along the row's own axis, and outside inputs are
// read as the kernel reads them (input_fits). Sizes of 0 or 1 are not a
// break in themselves: the kernels take every row, column or total count
// from their arguments (a row of one element is one pass of one element).
std::optional<Shape> replayed_row_shape(const Ir& tape,
                                        const std::vector<array>& inputs) {
  const IrNode* reduce = nullptr;
  for (auto& n : tape.nodes) {
    if (!reduce && dynamic_cast<const Reduce*>(n.prim.get())) reduce = &n;
  }
  if (!reduce) {
    return std::nullopt;
  }
  std::vector<std::optional<array>> now;
  try {
    run_ir(tape, inputs, /*shapeless=*/true, /*check=*/false, &now);
  } catch (const std::invalid_argument&) {
    return std::nullopt;  // the nodes run one by one raise it again
  }
  auto shape = [&](int v) -> const Shape* {
    return now[v] ? &now[v]->shape() : nullptr;
  };
  const bool column = reduce_kind(*reduce, tape) == ReduceKind::Column;
  const auto& axes = static_cast<const Reduce*>(reduce->prim.get())->axes();
  const Shape* in = shape(reduce->inputs[0]);
  const Shape* out = shape(reduce->outputs[0]);
  if (!in || !out) {
    return std::nullopt;
  }
  GroupShapes was, is;
  was.set(*reduce, tape, column);
  is.set(*in, *out, axes.size(), column);
  for (auto& n : tape.nodes) {
    for (int v : n.outputs) {
      const Shape* s = shape(v);
      if (!s || *s != was.replayed(tape.values[v].shape, is)) {
        return std::nullopt;
      }
    }
    if (!is_broadcast_node(n)) {
      continue;
    }
    int v = n.inputs[0];
    if (tape.values[v].shape == was.squeezed &&
        (!shape(v) || is.misaligned(*shape(v)))) {
      return std::nullopt;
    }
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!input_fits(tape.values[tape.inputs[k]].shape, inputs[k].shape(),
                    was.row, is.row, axes)) {
      return std::nullopt;
    }
  }
  return is.row;
}

}  // namespace fluxion::detail
