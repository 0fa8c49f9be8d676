// The Compiled primitive's rules, and the fusion pass that creates it.
#include "fluxion/compiled.h"

#include <algorithm>
#include <atomic>
#include <queue>
#include <unordered_set>

#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"
#include "fluxion/transforms.h"

namespace fluxion {

Compiled::Compiled(Stream s, detail::Ir tape)
    : Primitive(s), tape_(std::move(tape)) {
  for (int v : tape_.inputs) {
    bool by_reshape = false, other = false;
    for (auto& n : tape_.nodes) {
      bool uses =
          std::find(n.inputs.begin(), n.inputs.end(), v) != n.inputs.end();
      bool is_reshape = dynamic_cast<const Reshape*>(n.prim.get()) != nullptr;
      by_reshape = by_reshape || (uses && is_reshape);
      other = other || (uses && !is_reshape);
    }
    consistent_ = consistent_ && !(by_reshape && other);
    reshaped_.push_back(by_reshape);
  }
}

bool Compiled::traced_shapes(const std::vector<array>& inputs) const {
  bool same = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    same = same && inputs[i].shape() == tape_.values[tape_.inputs[i]].shape;
  }
  return same;
}

std::vector<array> Compiled::replay(const std::vector<array>& inputs) const {
  return detail::run_ir(tape_, inputs, /*shapeless=*/!traced_shapes(inputs));
}

std::optional<Shape> Compiled::row_shape(
    const std::vector<array>& inputs) const {
  if (traced_shapes(inputs)) {
    for (auto& n : tape_.nodes) {
      if (dynamic_cast<const Reduce*>(n.prim.get())) {
        return tape_.values[n.inputs[0]].shape;
      }
    }
    return std::nullopt;
  }
  std::vector<Shape> key;
  for (auto& in : inputs) {
    key.push_back(in.shape());
  }
  std::lock_guard<std::mutex> lock(row_shapes_mutex_);
  auto it = row_shapes_.find(key);
  if (it != row_shapes_.end()) {
    return it->second;
  }
  // Bounded: a function replayed on ever new shapes (a sequence length)
  // replays the tape once more per call rather than growing without end.
  if (row_shapes_.size() >= 256) {
    row_shapes_.clear();
  }
  auto row = detail::replayed_row_shape(tape_, inputs);
  row_shapes_.emplace(std::move(key), row);
  return row;
}

std::vector<Shape> Compiled::output_shapes(const std::vector<array>& inputs) {
  if (traced_shapes(inputs)) {
    std::vector<Shape> shapes;
    for (int v : tape_.outputs) {
      shapes.push_back(tape_.values[v].shape);
    }
    return shapes;
  }
  // New shapes (a shapeless trace replaying this group): the sub-tape's own
  // shape rules decide, since the inputs need not broadcast together (a
  // group that absorbed a reshape reads a (2, 6) input next to a (3, 4)
  // one; broadcasting them raised, found by the transformation fuzzer).
  // Builds the replay's nodes without evaluating them.
  std::vector<Shape> shapes;
  for (auto& out : replay(inputs)) {
    shapes.push_back(out.shape());
  }
  return shapes;
}

bool Compiled::is_equivalent(const Primitive& other) const {
  return this == &other;
}

// MLX's name for a fused node: "Compiled" followed by the fused
// primitives' names, broadcasts and reshapes included
// (CompiledBroadcastMultiplyAdd).
void Compiled::print(std::ostream& os) const {
  os << "Compiled";
  for (auto& n : tape_.nodes) {
    os << n.prim->name();
  }
}

std::vector<array> Compiled::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums,
                                 const std::vector<array>&) {
  auto f = [this](const std::vector<array>& x) { return replay(x); };
  // A rule, so in the rules' (JAX's) convention; `argnums` is sorted.
  return detail::internal_vjp(f, primals, cotangents, argnums).second;
}

std::vector<array> Compiled::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums) {
  // Only the inputs in `argnums` are differentiated; the others are held
  // as they are (a fused gather's integer indices have no tangent, and
  // its rule raises when given one).
  auto f = [&](const std::vector<array>& x) {
    std::vector<array> all = primals;
    for (size_t i = 0; i < argnums.size(); ++i) {
      all[argnums[i]] = x[i];
    }
    return replay(all);
  };
  std::vector<array> moving;
  for (int a : argnums) {
    moving.push_back(primals[a]);
  }
  return fluxion::jvp(f, moving, tangents).second;
}

std::pair<std::vector<array>, std::vector<int>> Compiled::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto f = [this](const std::vector<array>& x) { return replay(x); };
  std::vector<int> out_axes(tape_.outputs.size(), 0);
  return {fluxion::vmap(f, axes, out_axes)(inputs), out_axes};
}

namespace detail {

// Fusion is the primitives' decision (Primitive::elementwise_functor),
// not a backend's: a single-output node whose inputs have its shape and
// whose primitive names a functor for these dtypes. Generated kernels
// compute real dtypes only (the functors' complex paths need
// std::complex, which kernels do not include).
bool fusable(const IrNode& n, const Ir& ir) {
  if (n.outputs.size() != 1 || n.inputs.empty()) {
    return false;
  }
  const auto& out = ir.values[n.outputs[0]];
  std::vector<Dtype> in;
  for (int v : n.inputs) {
    // Elementwise nodes see inputs of their output's shape.
    if (ir.values[v].shape != out.shape || is_complex(ir.values[v].dtype)) {
      return false;
    }
    in.push_back(ir.values[v].dtype);
  }
  return !is_complex(out.dtype) && n.prim->elementwise_functor(in) != nullptr;
}

namespace {

// Broadcasts and reshapes feeding a group only change how an input is
// read (strides, or a row-contiguous view): absorbed unless shapeless,
// where their shapes must stay visible to the replay.
bool is_view(const IrNode& n) { return is_view_primitive(*n.prim); }

}  // namespace

IrUses::IrUses(const Ir& ir)
    : producer(ir.values.size(), -1),
      consumers(ir.values.size()),
      is_output(ir.values.size(), false) {
  for (int i = 0; i < static_cast<int>(ir.nodes.size()); ++i) {
    for (int v : ir.nodes[i].outputs) producer[v] = i;
    for (int v : ir.nodes[i].inputs) consumers[v].push_back(i);
  }
  for (int v : ir.outputs) is_output[v] = true;
}

// Every edge out of a group then goes to a node after its root r: a group
// reads only nodes and groups before its root, its readers come after it,
// so the fused nodes replace their groups at their roots in topological
// order and no group waits on another that waits on it.
bool IrUses::read_after(int v, int r, const std::vector<bool>& inside) const {
  return std::all_of(consumers[v].begin(), consumers[v].end(),
                     [&](int c) { return inside[c] || c > r; });
}

bool IrUses::read_outside(int v, const std::vector<bool>& inside) const {
  return is_output[v] ||
         !std::all_of(consumers[v].begin(), consumers[v].end(),
                      [&](int c) { return inside[c]; });
}

Ir group_tape(const Ir& ir, const IrUses& uses, const std::vector<int>& members,
              const std::vector<bool>& in_group,
              const std::vector<int>& outputs, std::vector<int>& outer_inputs) {
  Ir tape;
  std::unordered_map<int, int> local;
  auto value = [&](int v) {
    auto it = local.find(v);
    if (it != local.end()) return it->second;
    int l = static_cast<int>(tape.values.size());
    tape.values.push_back({ir.values[v].shape, ir.values[v].dtype, {}});
    local[v] = l;
    return l;
  };
  for (int k : members) {
    for (int v : ir.nodes[k].inputs) {
      int p = uses.producer[v];
      if (!local.count(v) && (p < 0 || !in_group[p])) {
        tape.inputs.push_back(value(v));
        outer_inputs.push_back(v);
      }
    }
    IrNode n{ir.nodes[k].prim, {}, {}};
    for (int v : ir.nodes[k].inputs) n.inputs.push_back(value(v));
    n.outputs.push_back(value(ir.nodes[k].outputs[0]));
    tape.nodes.push_back(std::move(n));
  }
  for (int v : outputs) tape.outputs.push_back(local.at(v));
  return tape;
}

void fuse_ir(Ir& ir, bool shapeless) {
  fuse_reductions(ir, shapeless);
  int count = static_cast<int>(ir.nodes.size());
  IrUses uses(ir);
  std::vector<int> group_of(count, -1);  // root index of a node's group
  std::vector<std::optional<IrNode>> replacement(count);
  for (int r = count - 1; r >= 0; --r) {
    if (group_of[r] != -1 || !fusable(ir.nodes[r], ir)) {
      continue;
    }
    const Shape& shape = ir.values[ir.nodes[r].outputs[0]].shape;
    std::vector<int> members{r};
    // Views (broadcast, reshape) that also feed nodes outside the group:
    // copied into it (MLX fuses a shared broadcast in), while the original
    // stays for its other consumers. Their input is read by the group
    // directly, so their producers are not absorbed through them.
    std::vector<bool> in_group(count, false);
    // Members whose reads count as the group's: all but the shared views,
    // whose originals read their inputs outside.
    std::vector<bool> reads_inside(count, false);
    in_group[r] = reads_inside[r] = true;
    std::priority_queue<int> frontier;
    auto push_inputs = [&](int k) {
      for (int v : ir.nodes[k].inputs) {
        if (uses.producer[v] >= 0) {
          frontier.push(uses.producer[v]);
        }
      }
    };
    push_inputs(r);
    // One group, one stream: its kernel runs on the root's stream, on
    // that stream's device (a node the function put on the CPU stays
    // there when the rest runs on the GPU).
    auto same_stream = [&](int k) {
      return ir.nodes[k].prim->stream() == ir.nodes[r].prim->stream();
    };
    auto joins = [&](int k) {
      auto& n = ir.nodes[k];
      return !in_group[k] && group_of[k] == -1 && n.outputs.size() == 1 &&
             same_stream(k) && ir.values[n.outputs[0]].shape == shape &&
             fusable(n, ir);
    };
    // The readers of `v` before the root, and theirs (siblings of the
    // group reading one value: `t = f(x); return g(t), h(t)`), when all
    // can join: a few fusable nodes of the group's shape.
    auto early_readers = [&](int v, std::vector<int>& take) {
      std::vector<int> todo{v};
      while (!todo.empty()) {
        int u = todo.back();
        todo.pop_back();
        for (int c : uses.consumers[u]) {
          if (reads_inside[c] || c > r ||
              std::find(take.begin(), take.end(), c) != take.end()) {
            continue;
          }
          if (!joins(c) || take.size() >= 16) {
            return false;
          }
          take.push_back(c);
          todo.push_back(ir.nodes[c].outputs[0]);
        }
      }
      return true;
    };
    const bool several_outputs =
        ir.nodes[r].prim->stream().device.type == Device::cpu;
    while (!frontier.empty()) {
      int k = frontier.top();
      frontier.pop();
      auto& n = ir.nodes[k];
      const bool view = !shapeless && is_view(n);
      if (!(joins(k) ||
            (view && !in_group[k] && group_of[k] == -1 && same_stream(k) &&
             ir.values[n.outputs[0]].shape == shape))) {
        continue;
      }
      int v = n.outputs[0];
      bool inside = !uses.read_outside(v, reads_inside);
      // A computed value also read outside joins as one more output of
      // the group (written once, by the same loop), when its readers come
      // after the root, or before it but can join too (then outputs
      // themselves); a view is copied in instead. Only on CPU streams: the
      // CUDA Compiled writes one output (Compiled::eval_gpu), so GPU groups
      // keep one output.
      if (!inside && !view && !several_outputs) {
        continue;
      }
      if (!inside && !view && !uses.read_after(v, r, reads_inside)) {
        std::vector<int> readers;
        if (!early_readers(v, readers)) {
          continue;
        }
        for (int c : readers) {
          in_group[c] = reads_inside[c] = true;
          members.push_back(c);
          push_inputs(c);
        }
      }
      in_group[k] = true;
      members.push_back(k);
      if (inside || !view) {
        reads_inside[k] = true;
        push_inputs(k);
      }
    }
    int ops = 0;
    for (int k : members) {
      ops += !is_view(ir.nodes[k]);
    }
    if (ops < 2) {
      continue;  // nothing to fuse
    }
    std::sort(members.begin(), members.end());
    // Outputs: the root and every member read outside, in tape order.
    std::vector<int> outputs;
    for (int k : members) {
      int v = ir.nodes[k].outputs[0];
      if (k == r || (reads_inside[k] && uses.read_outside(v, reads_inside))) {
        outputs.push_back(v);
      }
    }
    std::vector<int> outer_inputs;
    Ir tape = group_tape(ir, uses, members, in_group, outputs, outer_inputs);
    auto prim =
        std::make_shared<Compiled>(ir.nodes[r].prim->stream(), std::move(tape));
    if (!prim->consistent()) {
      continue;
    }
    for (int k : members) {
      if (reads_inside[k]) {
        group_of[k] = r;
      }
    }
    replacement[r] = IrNode{prim, outer_inputs, outputs};
  }
  std::vector<IrNode> nodes;
  for (int i = 0; i < count; ++i) {
    if (replacement[i]) {
      nodes.push_back(std::move(*replacement[i]));
    } else if (group_of[i] == -1) {
      nodes.push_back(std::move(ir.nodes[i]));
    }
  }
  ir.nodes = std::move(nodes);
}

}  // namespace detail
namespace {
std::atomic<uint64_t> g_fallbacks{0};
}  // namespace

uint64_t detail::compiled_fallbacks() { return g_fallbacks.load(); }

void Compiled::eval_fallback(
    const std::vector<array>& inputs, std::vector<array>& outputs,
    const std::function<void(array&, std::vector<array>&)>& eval_node) {
  ++g_fallbacks;
  auto results = replay(inputs);
  // Post-order over the replayed nodes, evaluated in place.
  std::vector<std::pair<array, size_t>> stack;
  for (auto it = results.rbegin(); it != results.rend(); ++it) {
    stack.emplace_back(*it, 0);
  }
  std::unordered_set<uintptr_t> done;
  for (auto& in : inputs) {
    done.insert(in.id());
  }
  while (!stack.empty()) {
    auto& [a, next] = stack.back();
    if (next < a.inputs().size()) {
      const array& in = a.inputs()[next++];
      if (!done.count(in.id()) && in.has_primitive() && !in.is_available()) {
        stack.emplace_back(in, 0);
      }
      continue;
    }
    array node = a;
    stack.pop_back();
    if (!done.insert(node.id()).second) {
      continue;
    }
    auto outs = node.outputs();
    eval_node(node, outs);
    for (auto& o : outs) {
      done.insert(o.id());
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].copy_shared_buffer(results[i]);
  }
}

}  // namespace fluxion
