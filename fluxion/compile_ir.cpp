// Replaying and simplifying compile's tape (compile_ir.h).
#include "fluxion/compile_ir.h"

#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <typeindex>

#include "fluxion/compiled.h"
#include "fluxion/graph_utils.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"
#include "fluxion/primitive.h"

namespace fluxion::detail {

namespace {

bool is_broadcast(const Primitive& p) {
  return dynamic_cast<const Broadcast*>(&p) != nullptr;
}

// Elementwise nodes: every input has the output's shape, so a broadcast
// feeding one can take the shape its partners have now.
bool is_elementwise(const Primitive& p) {
  return dynamic_cast<const UnaryPrimitive*>(&p) ||
         dynamic_cast<const BinaryPrimitive*>(&p) ||
         dynamic_cast<const Select*>(&p) || dynamic_cast<const AsType*>(&p) ||
         dynamic_cast<const Compiled*>(&p);
}

// A shapeless replay keeps broadcasts pending until their consumer shows
// the shape to broadcast to.
struct Pending {
  array input;
  Shape traced_input_shape;
  Shape traced_shape;
};

array settle(const Pending& p, const char* consumer) {
  if (p.input.shape() == p.traced_input_shape) {
    return broadcast_to(p.input, p.traced_shape);
  }
  // No elementwise partner shows the new shape: output axes that the input
  // had at full size (not expanded from 1, not new) follow the input's new
  // size; the others keep their traced size.
  const Shape& in = p.input.shape();
  const Shape& tin = p.traced_input_shape;
  Shape target = p.traced_shape;
  auto cannot_hold = [&] {
    std::ostringstream msg;
    msg << "[compile] shapeless: cannot infer the shape to broadcast an input "
        << "of shape " << in << " to (traced: " << tin << " to "
        << p.traced_shape << ") for " << consumer << ".";
    throw std::invalid_argument(msg.str());
  };
  if (in.size() != tin.size() || in.size() > target.size()) {
    cannot_hold();
  }
  if (in.size() < target.size()) {
    // A broadcast_to a shape of the caller's from an input of another rank
    // (MLX's Broadcast): the traced shape stays, and a new input that does
    // not broadcast to it is an error, not a guess.
    for (size_t j = 1; j <= in.size(); ++j) {
      if (in[in.size() - j] != 1 && in[in.size() - j] != target[target.size() - j]) {
        cannot_hold();
      }
    }
    return broadcast_to(p.input, target);
  }
  size_t lead = target.size() - in.size();
  for (size_t j = 0; j < in.size(); ++j) {
    if (tin[j] == target[lead + j]) {
      target[lead + j] = in[j];
    }
  }
  return broadcast_to(p.input, target);
}

}  // namespace

bool is_view_primitive(const Primitive& p) {
  return is_broadcast(p) || dynamic_cast<const Reshape*>(&p) != nullptr;
}

namespace {

[[noreturn]] void corrupt_trace(const std::string& what) {
  throw std::invalid_argument("[import_function] Corrupt trace: " + what +
                              ".");
}

// A tape from a file: the traced shapes must be the ones the primitive
// computes (see run_ir). Primitives without an output_shapes rule are taken
// as traced, and so is a custom kernel (its output shapes are the caller's,
// given, not inferred).
void check_node_shapes(Primitive& p, const std::vector<array>& ins,
                       const std::vector<Shape>& traced) {
  if (std::string(p.name()) == "CustomKernel") {
    return;
  }
  std::vector<Shape> expected;
  try {
    expected = p.output_shapes(ins);
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).rfind("[output_shapes] Primitive", 0) == 0) {
      return;  // no rule
    }
    corrupt_trace(std::string(p.name()) + " rejects its inputs (" + e.what() +
                  ")");
  }
  if (expected != traced) {
    corrupt_trace(std::string(p.name()) +
                  "'s traced output shapes are not what it computes");
  }
}

// The output dtypes the elementwise bases compute (protected there: the
// ops cast the inputs first, so a node built by an op always agrees).
struct UnaryDtype : UnaryPrimitive {
  using UnaryPrimitive::output_dtype;
};
struct BinaryDtype : BinaryPrimitive {
  using BinaryPrimitive::output_dtype;
};

std::string dtype_str(Dtype t) {
  return std::to_string(static_cast<int>(t.val));
}

// A tape from a file: the inputs and outputs the primitive's kernel
// expects, in number and dtype. A kernel trusts them (it reads and writes
// by the node's dtypes), so a damaged dtype would otherwise be a write past
// a buffer or an invalid bool (UBSan: a bool load of 255). Checked for the
// elementwise bases and AsType, which are most of a tape; the other
// primitives check their inputs in output_shapes.
void check_node_dtypes(Primitive& p, const std::vector<array>& ins,
                       const std::vector<Dtype>& traced) {
  auto expect = [&](size_t n_in, Dtype out) {
    if (ins.size() != n_in || traced.size() != 1) {
      corrupt_trace(std::string(p.name()) + " has " +
                    std::to_string(ins.size()) + " inputs and " +
                    std::to_string(traced.size()) + " outputs, not " +
                    std::to_string(n_in) + " and 1");
    }
    for (auto& x : ins) {
      if (x.dtype() != ins[0].dtype()) {
        corrupt_trace(std::string(p.name()) + "'s inputs have dtypes " +
                      dtype_str(ins[0].dtype()) + " and " +
                      dtype_str(x.dtype()));
      }
    }
    if (traced[0] != out) {
      corrupt_trace(std::string(p.name()) + "'s traced output dtype " +
                    dtype_str(traced[0]) + " is not the " + dtype_str(out) +
                    " it computes");
    }
  };
  if (auto* u = dynamic_cast<UnaryPrimitive*>(&p)) {
    if (ins.size() != 1) {
      expect(1, bool_);
    }
    expect(1, (u->*(&UnaryDtype::output_dtype))(ins[0].dtype()));
  } else if (auto* b = dynamic_cast<BinaryPrimitive*>(&p)) {
    if (ins.size() != 2) {
      expect(2, bool_);
    }
    expect(2, (b->*(&BinaryDtype::output_dtype))(ins[0].dtype()));
  } else if (auto* a = dynamic_cast<AsType*>(&p)) {
    auto st = a->state();
    if (st.size() != 1 || !std::holds_alternative<Dtype>(st[0])) {
      corrupt_trace("AsType has no dtype");
    }
    if (ins.size() != 1) {
      expect(1, bool_);
    }
    // AsType reads its input by its own dtype: any input dtype is valid.
    if (traced.size() != 1 || traced[0] != std::get<Dtype>(st[0])) {
      corrupt_trace("AsType's traced output dtype is not its dtype");
    }
  }
}

}  // namespace

std::vector<array> run_ir(const Ir& ir, const std::vector<array>& inputs,
                          bool shapeless, bool check,
                          std::vector<std::optional<array>>* values) {
  std::vector<std::optional<array>> env(ir.values.size());
  // Pending broadcasts as they were settled, for `values`.
  std::map<int, array> settled;
  std::map<int, Pending> pending;
  for (size_t i = 0; i < ir.inputs.size(); ++i) {
    env[ir.inputs[i]] = inputs[i];
  }
  for (size_t v = 0; v < ir.values.size(); ++v) {
    if (ir.values[v].constant) {
      env[v] = *ir.values[v].constant;
    }
  }
  for (auto& n : ir.nodes) {
    auto& p = *n.prim;
    // A BroadcastAxes node computes its shape from its partners
    // (output_shapes, below); a plain broadcast waits for its consumer.
    if (shapeless && is_broadcast(p) &&
        dynamic_cast<const BroadcastAxes*>(&p) == nullptr) {
      int in = n.inputs[0];
      pending.insert_or_assign(n.outputs[0],
                               Pending{*env[in], ir.values[in].shape,
                                       ir.values[n.outputs[0]].shape});
      continue;
    }
    std::vector<array> ins;
    std::vector<int> waiting;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      auto it = pending.find(n.inputs[i]);
      if (it == pending.end()) {
        if (check && !env[n.inputs[i]]) {
          corrupt_trace("value " + std::to_string(n.inputs[i]) +
                        " is used before it is defined");
        }
        ins.push_back(*env[n.inputs[i]]);
      } else {
        ins.push_back(it->second.input);
        waiting.push_back(static_cast<int>(i));
      }
    }
    if (!waiting.empty()) {
      // Elementwise partners with settled shapes fix the target shape.
      bool known = is_elementwise(p) && waiting.size() < ins.size();
      Shape target;
      if (known) {
        for (size_t i = 0; i < ins.size(); ++i) {
          target = broadcast_shapes(target, ins[i].shape(), "compile");
        }
      }
      for (int i : waiting) {
        auto& pend = pending.at(n.inputs[i]);
        ins[i] =
            known ? broadcast_to(pend.input, target) : settle(pend, p.name());
        settled.emplace(n.inputs[i], ins[i]);
      }
    }
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
    for (int v : n.outputs) {
      dtypes.push_back(ir.values[v].dtype);
    }
    if (check) {
      check_node_dtypes(p, ins, dtypes);
    }
    if (shapeless) {
      if (is_elementwise(p) && dynamic_cast<const Compiled*>(&p) == nullptr) {
        // (A Compiled node reads smaller inputs with zero strides and
        // checks its inputs itself, replaying its tape.)
        // Operands traced with one shape that a replay gives different
        // ones (no broadcast between them was traced): an error, not a
        // kernel reading past the smaller one.
        for (auto& x : ins) {
          if (x.shape() != ins[0].shape()) {
            std::ostringstream msg;
            msg << "[compile] shapeless: the inputs of " << p.name()
                << " were traced with equal shapes but now have shapes "
                << ins[0].shape() << " and " << x.shape()
                << "; compile without shapeless for these shapes.";
            throw std::invalid_argument(msg.str());
          }
        }
      }
      shapes = p.output_shapes(ins);
    } else {
      for (int v : n.outputs) {
        shapes.push_back(ir.values[v].shape);
      }
    }
    if (check && !shapeless) {
      check_node_shapes(p, ins, shapes);
    }
    auto outs = array::make_arrays(std::move(shapes), dtypes, n.prim, ins);
    for (size_t i = 0; i < outs.size(); ++i) {
      env[n.outputs[i]] = outs[i];
    }
  }
  std::vector<array> outs;
  for (int v : ir.outputs) {
    auto it = pending.find(v);
    if (check && it == pending.end() && !env[v]) {
      corrupt_trace("output value " + std::to_string(v) + " is never defined");
    }
    outs.push_back(it == pending.end() ? *env[v]
                                       : settle(it->second, "output"));
    if (it != pending.end()) {
      settled.emplace(v, outs.back());
    }
  }
  if (values) {
    for (auto& [v, a] : settled) {
      env[v] = a;
    }
    *values = std::move(env);
  }
  return outs;
}

namespace {

// Union-find style aliasing: a removed value points to its replacement.
int resolve(std::vector<int>& alias, int v) {
  while (alias[v] != v) {
    v = alias[v] = alias[alias[v]];
  }
  return v;
}

bool same_scalar(const IrValue& a, const IrValue& b) {
  if (!a.constant || !b.constant || a.dtype != b.dtype || a.shape != b.shape ||
      a.constant->size() != 1 || b.constant->size() != 1 ||
      !a.constant->is_available() || !b.constant->is_available()) {
    return false;
  }
  return std::memcmp(a.constant->raw_data(), b.constant->raw_data(),
                     a.dtype.size) == 0;
}

// Nodes that return their input unchanged (in value and derivative).
bool is_noop(const IrNode& n, const Ir& ir, bool shapeless) {
  if (n.inputs.size() != 1 || n.outputs.size() != 1) {
    return false;
  }
  auto& in = ir.values[n.inputs[0]];
  auto& out = ir.values[n.outputs[0]];
  if (in.shape != out.shape || in.dtype != out.dtype) {
    return false;
  }
  auto& p = *n.prim;
  return dynamic_cast<const Copy*>(&p) || dynamic_cast<const AsType*>(&p) ||
         (!shapeless && (is_broadcast(p) || dynamic_cast<const Reshape*>(&p)));
}

}  // namespace

void simplify_ir(Ir& ir, bool shapeless) {
  std::vector<int> alias(ir.values.size());
  for (size_t v = 0; v < alias.size(); ++v) {
    alias[v] = static_cast<int>(v);
  }
  // Equal scalar constants.
  std::vector<int> scalars;
  for (size_t v = 0; v < ir.values.size(); ++v) {
    if (!ir.values[v].constant || ir.values[v].constant->size() != 1) {
      continue;
    }
    bool merged = false;
    for (int s : scalars) {
      if (same_scalar(ir.values[s], ir.values[v])) {
        alias[v] = s;
        merged = true;
        break;
      }
    }
    if (!merged) {
      scalars.push_back(static_cast<int>(v));
    }
  }
  // No-ops, then common subexpressions (same primitive on the same inputs).
  std::map<std::pair<std::type_index, std::vector<int>>, std::vector<size_t>>
      seen;
  std::vector<IrNode> kept;
  for (auto& n : ir.nodes) {
    for (auto& v : n.inputs) {
      v = resolve(alias, v);
    }
    if (is_noop(n, ir, shapeless)) {
      alias[n.outputs[0]] = n.inputs[0];
      continue;
    }
    const Primitive& prim = *n.prim;  // typeid of a plain reference: no
                                      // evaluated side effect (clang warns)
    auto key = std::make_pair(std::type_index(typeid(prim)), n.inputs);
    auto& candidates = seen[key];
    bool merged = false;
    for (size_t k : candidates) {
      auto& m = kept[k];
      if (m.outputs.size() != n.outputs.size() ||
          !m.prim->is_equivalent(*n.prim)) {
        continue;
      }
      bool same = true;
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        auto& a = ir.values[m.outputs[i]];
        auto& b = ir.values[n.outputs[i]];
        same = same && a.shape == b.shape && a.dtype == b.dtype;
      }
      if (same) {
        for (size_t i = 0; i < n.outputs.size(); ++i) {
          alias[n.outputs[i]] = m.outputs[i];
        }
        merged = true;
        break;
      }
    }
    if (!merged) {
      candidates.push_back(kept.size());
      kept.push_back(std::move(n));
    }
  }
  for (auto& v : ir.outputs) {
    v = resolve(alias, v);
  }
  // Drop nodes nothing uses any more (walking backwards).
  std::vector<bool> used(ir.values.size(), false);
  for (int v : ir.outputs) {
    used[v] = true;
  }
  std::vector<IrNode> live;
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    bool any = false;
    for (int v : it->outputs) {
      any = any || used[v];
    }
    if (!any) {
      continue;
    }
    for (int v : it->inputs) {
      used[v] = true;
    }
    live.push_back(std::move(*it));
  }
  ir.nodes.assign(std::make_move_iterator(live.rbegin()),
                  std::make_move_iterator(live.rend()));
  // Constants no longer referenced release their arrays.
  for (size_t v = 0; v < ir.values.size(); ++v) {
    if (!used[v] && ir.values[v].constant) {
      ir.values[v].constant.reset();
    }
  }
}

}  // namespace fluxion::detail
