// The Compiled primitive's rules, and the fusion pass that creates it.
#include "fluxion/compiled.h"

#include <algorithm>
#include <atomic>
#include <queue>
#include <unordered_set>

#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
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

std::vector<array> Compiled::replay(const std::vector<array>& inputs) const {
  bool same = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    same = same && inputs[i].shape() == tape_.values[tape_.inputs[i]].shape;
  }
  return detail::run_ir(tape_, inputs, /*shapeless=*/!same);
}

std::vector<Shape> Compiled::output_shapes(const std::vector<array>& inputs) {
  bool same = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    same = same && inputs[i].shape() == tape_.values[tape_.inputs[i]].shape;
  }
  if (same) {
    return {tape_.values[tape_.outputs[0]].shape};
  }
  // New shapes (a shapeless trace replaying this group): the sub-tape's own
  // shape rules decide, since the inputs need not broadcast together (a
  // group that absorbed a reshape reads a (2, 6) input next to a (3, 4)
  // one; broadcasting them raised, found by the transformation fuzzer).
  // Builds the replay's nodes without evaluating them.
  return {replay(inputs)[0].shape()};
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
  std::vector<array> all;
  for (auto& p : primals) {
    all.push_back(zeros_like(p));
  }
  for (size_t i = 0; i < argnums.size(); ++i) {
    all[argnums[i]] = tangents[i];
  }
  auto f = [this](const std::vector<array>& x) { return replay(x); };
  return fluxion::jvp(f, primals, all).second;
}

std::pair<std::vector<array>, std::vector<int>> Compiled::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto f = [this](const std::vector<array>& x) { return replay(x); };
  return {fluxion::vmap(f, axes, {0})(inputs), {0}};
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

void fuse_ir(Ir& ir, bool shapeless) {
  if (!shapeless) {
    fuse_reductions(ir);
  }
  int count = static_cast<int>(ir.nodes.size());
  std::vector<int> producer(ir.values.size(), -1);
  std::vector<std::vector<int>> consumers(ir.values.size());
  for (int i = 0; i < count; ++i) {
    for (int v : ir.nodes[i].outputs) {
      producer[v] = i;
    }
    for (int v : ir.nodes[i].inputs) {
      consumers[v].push_back(i);
    }
  }
  std::vector<bool> is_output(ir.values.size(), false);
  for (int v : ir.outputs) {
    is_output[v] = true;
  }
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
    std::vector<bool> shared_view(count, false);
    std::vector<bool> in_group(count, false);
    in_group[r] = true;
    std::priority_queue<int> frontier;
    auto push_inputs = [&](int k) {
      for (int v : ir.nodes[k].inputs) {
        if (producer[v] >= 0) {
          frontier.push(producer[v]);
        }
      }
    };
    push_inputs(r);
    while (!frontier.empty()) {
      int k = frontier.top();
      frontier.pop();
      auto& n = ir.nodes[k];
      if (in_group[k] || group_of[k] != -1 || n.outputs.size() != 1) {
        continue;
      }
      int v = n.outputs[0];
      // One group, one stream: its kernel runs on the root's stream, on
      // that stream's device (a node the function put on the CPU stays
      // there when the rest runs on the GPU).
      if (n.prim->stream() != ir.nodes[r].prim->stream()) {
        continue;
      }
      if (is_output[v] || ir.values[v].shape != shape ||
          !(fusable(n, ir) || (!shapeless && is_view(n)))) {
        continue;
      }
      // A shared view's copy does not count: its original stays outside.
      bool inside = std::all_of(consumers[v].begin(), consumers[v].end(),
                                [&](int c) {
                                  return in_group[c] && !shared_view[c];
                                });
      if (!inside && !(!shapeless && is_view(n))) {
        continue;
      }
      in_group[k] = true;
      members.push_back(k);
      if (inside) {
        push_inputs(k);
      } else {
        shared_view[k] = true;
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
    // The fused tape: values renumbered, outside values become inputs.
    Ir tape;
    std::unordered_map<int, int> local;
    std::vector<int> outer_inputs;
    auto value = [&](int v) {
      auto it = local.find(v);
      if (it != local.end()) {
        return it->second;
      }
      int l = static_cast<int>(tape.values.size());
      tape.values.push_back({ir.values[v].shape, ir.values[v].dtype, {}});
      local[v] = l;
      return l;
    };
    for (int k : members) {
      for (int v : ir.nodes[k].inputs) {
        if (!local.count(v) && (producer[v] < 0 || !in_group[producer[v]])) {
          tape.inputs.push_back(value(v));
          outer_inputs.push_back(v);
        }
      }
      IrNode n{ir.nodes[k].prim, {}, {}};
      for (int v : ir.nodes[k].inputs) {
        n.inputs.push_back(value(v));
      }
      n.outputs.push_back(value(ir.nodes[k].outputs[0]));
      tape.nodes.push_back(std::move(n));
    }
    tape.outputs.push_back(local.at(ir.nodes[r].outputs[0]));
    auto prim =
        std::make_shared<Compiled>(ir.nodes[r].prim->stream(), std::move(tape));
    if (!prim->consistent()) {
      continue;
    }
    for (int k : members) {
      if (!shared_view[k]) {
        group_of[k] = r;
      }
    }
    replacement[r] = IrNode{prim, outer_inputs, ir.nodes[r].outputs};
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
    const std::vector<array>& inputs, array& out,
    const std::function<void(array&, std::vector<array>&)>& eval_node) {
  ++g_fallbacks;
  auto result = replay(inputs)[0];
  // Post-order over the replayed nodes, evaluated in place.
  std::vector<std::pair<array, size_t>> stack{{result, 0}};
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
  out.copy_shared_buffer(result);
}

}  // namespace fluxion
