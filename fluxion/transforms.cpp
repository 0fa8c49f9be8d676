// The function transformations (design.md §4; the seed's transforms.cpp is
// the behavioural spec): vjp and jvp walk the traced graph calling each
// primitive's rules; vmap traces on unbatched placeholders and replays the
// graph through the primitives' vmap rules.
#include "fluxion/transforms.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "fluxion/eager.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/custom.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/tracer_copy.h"
#include "fluxion/ops/unary.h"
#include "fluxion/primitive.h"
#include "fluxion/rule_context.h"

namespace fluxion {

namespace {
thread_local int t_grad_depth = 0;

// Marks a vjp's trace of its function (detail::in_grad_tracing).
struct GradTracing {
  GradTracing() { ++t_grad_depth; }
  ~GradTracing() { --t_grad_depth; }
  GradTracing(const GradTracing&) = delete;
  GradTracing& operator=(const GradTracing&) = delete;
};

Stream stream_of(const array& a) {
  return a.has_primitive() ? a.primitive().stream() : to_stream({});
}

// 0, 1, ..., n - 1: differentiate with respect to every input.
std::vector<int> all_argnums(size_t n) {
  std::vector<int> argnums(n);
  std::iota(argnums.begin(), argnums.end(), 0);
  return argnums;
}

bool is_stop_gradient(const array& a) {
  if (!a.has_primitive()) {
    return false;
  }
  const Primitive& p = a.primitive();  // typeid of a call warns in clang
  return typeid(p) == typeid(StopGradient);
}
}  // namespace

// --- tracing state (per thread; fluxion/trace_state.h) ---

namespace detail {
bool in_grad_tracing() { return t_grad_depth > 0; }

std::atomic<int> g_open_trace_scopes{0};

TraceState& trace_state() {
  thread_local TraceState state;
  return state;
}

InTracing::InTracing() { ++trace_state().trace_depth; }
InTracing::~InTracing() { --trace_state().trace_depth; }
RetainGraph::RetainGraph() { ++trace_state().retain_graph; }
RetainGraph::~RetainGraph() { --trace_state().retain_graph; }
}  // namespace detail

// --- vjp ---

namespace {

// Tracer copies of the primals: new graph nodes sharing their buffers.
std::vector<array> make_tracers(const std::vector<array>& primals) {
  std::vector<array> out;
  for (auto& p : primals) {
    out.push_back(detail::tracer_copy(p, stream_of(p)));
    out.back().set_tracer(true);
  }
  return out;
}

// Depth-first over the graph from `outputs`, collecting (in topological
// order) the nodes that depend on an id in `needs` and are not behind a
// stop_gradient. `seen` starts with the primals.
// Post-order walk from `outputs` over nodes not yet in `seen` (iterative:
// deep graphs must not overflow the stack). `enter(node)` runs when a node
// is first reached (its siblings count as reached with it), `leave(node)`
// after all its inputs.
template <typename Enter, typename Leave>
void walk_graph(const std::vector<array>& outputs,
                std::unordered_set<uintptr_t>& seen, Enter enter, Leave leave) {
  std::vector<std::pair<array, size_t>> stack;
  for (auto& out : outputs) {
    if (!seen.insert(out.id()).second) {
      continue;
    }
    stack.emplace_back(out, 0);
    while (!stack.empty()) {
      auto& [a, idx] = stack.back();
      if (idx == 0) {
        enter(a);
        for (auto& s : a.siblings()) {
          seen.insert(s.id());
        }
      }
      if (idx < a.inputs().size()) {
        array in = a.inputs()[idx++];
        if (seen.insert(in.id()).second) {
          stack.emplace_back(in, 0);
        }
        continue;
      }
      array node = a;
      stack.pop_back();
      leave(node);
    }
  }
}

// Whether `node` consumes an id in `needs`; if so it joins `needs` too.
bool propagate_need(array& node, std::unordered_set<uintptr_t>& needs) {
  for (auto& in : node.inputs()) {
    if (needs.count(in.id())) {
      needs.insert(node.id());
      for (auto& s : node.siblings()) {
        needs.insert(s.id());
      }
      return true;
    }
  }
  return false;
}

// The nodes (in topological order) that depend on an id in `needs` and are
// not behind a stop_gradient. `seen` starts with the primals.
std::vector<array> grad_tape(std::vector<array>& outputs,
                             std::unordered_set<uintptr_t>& seen,
                             std::unordered_set<uintptr_t>& needs) {
  std::vector<array> tape;
  walk_graph(
      outputs, seen,
      [](array& a) {
        a.set_tracer(false);
        for (auto& s : a.siblings()) {
          s.set_tracer(false);
        }
      },
      [&](array& node) {
        if (!is_stop_gradient(node) && propagate_need(node, needs)) {
          tape.push_back(node);
        }
      });
  return tape;
}

}  // namespace

namespace detail {

std::pair<std::vector<array>, std::vector<array>> internal_vjp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& cotangents, const std::vector<int>& argnums) {
  InTracing tracing;
  auto tracers = make_tracers(primals);
  auto outputs = [&] {
    GradTracing grad;
    return fun(tracers);
  }();

  // Pair outputs with cotangents, skipping stop_gradient outputs.
  std::vector<std::pair<int, int>> out_cotan;
  size_t ci = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto& out = outputs[i];
    if (is_stop_gradient(out)) {
      continue;
    }
    if (ci >= cotangents.size()) {
      std::ostringstream msg;
      msg << "[vjp] Number of outputs to compute gradients for ("
          << outputs.size() << ") does not match number of cotangents ("
          << cotangents.size() << ").";
      throw std::invalid_argument(msg.str());
    }
    if (out.shape() != cotangents[ci].shape()) {
      std::ostringstream msg;
      msg << "[vjp] Output shape " << shape_str(out.shape())
          << " does not match cotangent shape "
          << shape_str(cotangents[ci].shape()) << ".";
      if (outputs.size() == 1 && out.size() == 1) {
        msg << " If you are using grad your function must return a scalar.";
      }
      throw std::invalid_argument(msg.str());
    }
    out_cotan.emplace_back(static_cast<int>(i), static_cast<int>(ci++));
  }

  std::unordered_set<uintptr_t> seen, needs;
  for (size_t i = 0, j = 0; i < tracers.size(); ++i) {
    tracers[i].set_tracer(false);
    seen.insert(tracers[i].id());
    if (j < argnums.size() && argnums[j] == static_cast<int>(i)) {
      ++j;
      needs.insert(tracers[i].id());
    }
  }
  auto tape = grad_tape(outputs, seen, needs);

  std::unordered_map<uintptr_t, array> cotan_map;
  for (auto [oi, c] : out_cotan) {
    auto& o = outputs[oi];
    auto ct = astype(cotangents[c], o.dtype(), stream_of(o));
    // The same array returned twice receives the sum of its cotangents.
    auto found = cotan_map.find(o.id());
    if (found != cotan_map.end()) {
      found->second = add(found->second, ct, stream_of(o));
    } else {
      cotan_map.insert({o.id(), ct});
    }
  }
  for (auto it = tape.rbegin(); it != tape.rend(); ++it) {
    auto& a = *it;
    std::vector<int> args;
    for (size_t i = 0; i < a.inputs().size(); ++i) {
      if (needs.count(a.inputs()[i].id())) {
        args.push_back(static_cast<int>(i));
      }
    }
    auto outs = a.outputs();
    bool any = false;
    for (auto& o : outs) {
      any |= cotan_map.count(o.id()) > 0;
    }
    if (!any) {
      continue;
    }
    auto s = a.primitive().stream();
    std::vector<array> cts;
    for (auto& o : outs) {
      auto found = cotan_map.find(o.id());
      if (found != cotan_map.end()) {
        cts.push_back(std::move(found->second));
        cotan_map.erase(found);
      } else {
        cts.push_back(zeros_like(o, s));
      }
    }
    std::vector<array> vjps;
    {
      RetainGraph retain;
      vjps = with_rule_context("vjp", a.primitive(), [&] {
        return a.primitive().vjp(a.inputs(), cts, args, outs);
      });
    }
    for (size_t i = 0; i < args.size(); ++i) {
      auto id = a.inputs()[args[i]].id();
      auto found = cotan_map.find(id);
      if (found != cotan_map.end()) {
        found->second = add(found->second, vjps[i], s);
      } else {
        cotan_map.insert({id, vjps[i]});
      }
    }
  }

  std::vector<array> vjps;
  for (int arg : argnums) {
    auto& p = tracers[arg];
    auto found = cotan_map.find(p.id());
    if (found == cotan_map.end()) {
      vjps.push_back(zeros_like(p, stream_of(p)));
    } else if (found->second.dtype() != p.dtype() && is_integral(p.dtype())) {
      // The gradient of an integer input is an integer array (MLX): a rule
      // that left it in float (accumulated with one that did) is cast.
      vjps.push_back(astype(found->second, p.dtype(), stream_of(p)));
    } else {
      vjps.push_back(found->second);
    }
  }
  return {outputs, vjps};
}

}  // namespace detail

namespace {

// The conjugate of a complex array; any other array as it is (no node).
array conj_if_complex(const array& a) {
  return is_complex(a.dtype()) ? conjugate(a, stream_of(a)) : a;
}

std::vector<array> conj_if_complex(std::vector<array> arrays) {
  for (auto& a : arrays) {
    a = conj_if_complex(a);
  }
  return arrays;
}

// A vjp rule written in one convention, called in the other: the two
// differ by conjugating the cotangents in and the gradients out.
VjpFn conjugated_rule(VjpFn rule) {
  return [rule = std::move(rule)](const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<array>& outputs) {
    return conj_if_complex(rule(primals, conj_if_complex(cotangents), outputs));
  };
}

}  // namespace

// MLX's (PyTorch's) convention: the adjoint of the jvp under the Hermitian
// inner product Re(conj(u) v), where the rules (JAX's) transpose it under
// the bilinear Re(u v). Conjugating in and out converts one into the other.
std::pair<std::vector<array>, std::vector<array>> vjp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& cotangents, const std::vector<int>& argnums) {
  auto [outputs, vjps] =
      detail::internal_vjp(fun, primals, conj_if_complex(cotangents), argnums);
  return {std::move(outputs), conj_if_complex(std::move(vjps))};
}

std::pair<std::vector<array>, std::vector<array>> vjp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& cotangents) {
  return vjp(fun, primals, cotangents, all_argnums(primals.size()));
}

std::pair<array, array> vjp(const UnaryFn& fun, const array& primal,
                            const array& cotangent) {
  auto [outs, vjps] = vjp(
      [&fun](const std::vector<array>& in) {
        return std::vector<array>{fun(in[0])};
      },
      {primal}, {cotangent});
  return {outs[0], vjps[0]};
}

// --- jvp ---

std::pair<std::vector<array>, std::vector<array>> jvp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& tangents) {
  detail::InTracing tracing;
  if (primals.size() != tangents.size()) {
    throw std::invalid_argument(
        "[jvp] Number of inputs does not match number of tangents.");
  }
  for (size_t i = 0; i < primals.size(); ++i) {
    if (primals[i].shape() != tangents[i].shape()) {
      throw std::invalid_argument(
          "[jvp] Input shape does not match shape of tangent.");
    }
  }
  auto tracers = make_tracers(primals);
  auto outputs = fun(tracers);

  std::unordered_set<uintptr_t> seen, needs;
  for (auto& t : tracers) {
    t.set_tracer(false);
    seen.insert(t.id());
    needs.insert(t.id());
  }
  auto tape = grad_tape(outputs, seen, needs);

  std::unordered_map<uintptr_t, array> tan_map;
  for (size_t i = 0; i < tracers.size(); ++i) {
    tan_map.insert({tracers[i].id(), tangents[i]});
  }
  for (auto& a : tape) {
    std::vector<int> args;
    std::vector<array> tans;
    for (size_t i = 0; i < a.inputs().size(); ++i) {
      auto found = tan_map.find(a.inputs()[i].id());
      if (found != tan_map.end()) {
        args.push_back(static_cast<int>(i));
        tans.push_back(found->second);
      }
    }
    std::vector<array> jvps;
    {
      detail::RetainGraph retain;
      jvps = detail::with_rule_context("jvp", a.primitive(), [&] {
        return a.primitive().jvp(a.inputs(), tans, args);
      });
    }
    auto outs = a.outputs();
    for (size_t i = 0; i < jvps.size(); ++i) {
      tan_map.insert({outs[i].id(), jvps[i]});
    }
  }
  std::vector<array> jvps;
  for (auto& out : outputs) {
    auto found = tan_map.find(out.id());
    jvps.push_back(found != tan_map.end() ? found->second
                                          : zeros_like(out, stream_of(out)));
  }
  return {outputs, jvps};
}

std::pair<array, array> jvp(const UnaryFn& fun, const array& primal,
                            const array& tangent) {
  auto [outs, jvps] = jvp(
      [&fun](const std::vector<array>& in) {
        return std::vector<array>{fun(in[0])};
      },
      {primal}, {tangent});
  return {outs[0], jvps[0]};
}

// --- value_and_grad / grad ---

namespace {

// value_and_grad with MLX's convention (public) or JAX's (`mlx_convention`
// false: the Hessians, which differentiate the gradient holomorphically).
ValueAndGradFn value_and_grad_in(const Fn& fun, const std::vector<int>& argnums,
                                 bool mlx_convention) {
  if (argnums.empty()) {
    throw std::invalid_argument("[grad] Must specify at least one argument.");
  }
  return [fun, argnums, mlx_convention](const std::vector<array>& inputs) {
    std::set<int> args;
    for (int a : argnums) {
      args.insert(a < 0 ? a + static_cast<int>(inputs.size()) : a);
    }
    if (args.size() != argnums.size()) {
      throw std::invalid_argument(
          "[grad] Repeat argument number not allowed in grad.");
    }
    if (*args.begin() < 0 ||
        *args.rbegin() >= static_cast<int>(inputs.size())) {
      std::ostringstream msg;
      msg << "[grad] Invalid argument number for function with "
          << inputs.size() << " inputs.";
      throw std::invalid_argument(msg.str());
    }
    std::vector<int> sorted(args.begin(), args.end());
    auto gfun = [&fun](const std::vector<array>& in) {
      auto outs = fun(in);
      // Auxiliary outputs carry no gradient.
      for (size_t i = 1; i < outs.size(); ++i) {
        outs[i] = stop_gradient(outs[i], stream_of(outs[i]));
      }
      return outs;
    };
    // A float32 seed: vjp casts it to the output's dtype.
    return mlx_convention
               ? vjp(gfun, inputs, {array(1.0f)}, sorted)
               : detail::internal_vjp(gfun, inputs, {array(1.0f)}, sorted);
  };
}

}  // namespace

ValueAndGradFn value_and_grad(const Fn& fun, const std::vector<int>& argnums) {
  return value_and_grad_in(fun, argnums, true);
}

ValueAndGradFn value_and_grad(const Fn& fun, int argnum) {
  return value_and_grad(fun, std::vector<int>{argnum});
}

std::function<std::pair<array, array>(const array&)> value_and_grad(
    const UnaryFn& fun) {
  auto vg = value_and_grad(
      [fun](const std::vector<array>& in) {
        return std::vector<array>{fun(in[0])};
      },
      std::vector<int>{0});
  return [vg](const array& x) {
    auto [v, g] = vg({x});
    return std::make_pair(v[0], g[0]);
  };
}

SimpleValueAndGradFn value_and_grad(
    const std::function<array(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums) {
  auto vg = value_and_grad(
      [fun](const std::vector<array>& in) {
        return std::vector<array>{fun(in)};
      },
      argnums);
  return [vg](const std::vector<array>& in) {
    auto [v, g] = vg(in);
    return std::make_pair(v[0], g);
  };
}

std::function<std::vector<array>(const std::vector<array>&)> grad(
    const std::function<array(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums) {
  auto vg = value_and_grad(fun, argnums);
  return [vg](const std::vector<array>& in) { return vg(in).second; };
}

std::function<array(const std::vector<array>&)> grad(
    const std::function<array(const std::vector<array>&)>& fun, int argnum) {
  auto g = grad(fun, std::vector<int>{argnum});
  return [g](const std::vector<array>& in) { return g(in)[0]; };
}

UnaryFn grad(const UnaryFn& fun) {
  auto vg = value_and_grad(fun);
  return [vg](const array& x) { return vg(x).second; };
}

// --- vmap ---

namespace detail {

std::pair<std::vector<array>, std::vector<array>> vmap_trace(
    const Fn& fun, const std::vector<array>& inputs,
    const std::vector<int>& in_axes) {
  InTracing tracing;
  if (in_axes.size() != inputs.size()) {
    std::ostringstream msg;
    msg << "[vmap] The number of in axes (" << in_axes.size()
        << ") must match the number of inputs (" << inputs.size() << ").";
    throw std::invalid_argument(msg.str());
  }
  int size = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (in_axes[i] == -1) {
      continue;
    }
    if (inputs[i].ndim() == 0) {
      throw std::invalid_argument(
          "[vmap] Cannot vmap an input with zero dimensions.");
    }
    if (in_axes[i] < 0 || in_axes[i] >= inputs[i].ndim()) {
      std::ostringstream msg;
      msg << "[vmap] Axis " << in_axes[i] << " invalid for input with "
          << inputs[i].ndim() << " dimensions.";
      throw std::invalid_argument(msg.str());
    }
    int n = inputs[i].shape(in_axes[i]);
    if (size >= 0 && n != size) {
      std::ostringstream msg;
      msg << "[vmap] Inconsistent axis sizes: " << n << " and " << size << ".";
      throw std::invalid_argument(msg.str());
    }
    size = n;
  }
  std::vector<array> s_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (in_axes[i] != -1) {
      auto shape = inputs[i].shape();
      shape.erase(shape.begin() + in_axes[i]);
      array placeholder(std::move(shape), inputs[i].dtype(), nullptr, {});
      placeholder.set_tracer(true);
      s_inputs.push_back(placeholder);
    } else {
      s_inputs.push_back(inputs[i]);
    }
  }
  return {s_inputs, fun(s_inputs)};
}

std::vector<array> vmap_replace(const std::vector<array>& inputs,
                                const std::vector<array>& s_inputs,
                                const std::vector<array>& s_outputs,
                                const std::vector<int>& in_axes,
                                const std::vector<int>& out_axes) {
  if (out_axes.size() != s_outputs.size()) {
    std::ostringstream msg;
    msg << "[vmap] The number of out axes (" << out_axes.size()
        << ") must match the number of outputs (" << s_outputs.size() << ").";
    throw std::invalid_argument(msg.str());
  }
  int size = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (in_axes[i] >= 0) {
      size = inputs[i].shape(in_axes[i]);
      break;
    }
  }
  if (size == -1) {
    throw std::invalid_argument(
        "[vmap] At least one of in_axes must be non-None.");
  }

  std::unordered_map<uintptr_t, std::pair<array, int>> tmap;
  std::unordered_set<uintptr_t> needs, seen;
  for (size_t i = 0; i < s_inputs.size(); ++i) {
    auto in = s_inputs[i];
    if (in_axes[i] != -1) {
      tmap.insert({in.id(), {inputs[i], in_axes[i]}});
      needs.insert(in.id());
      in.set_tracer(false);
    }
    seen.insert(in.id());
  }

  // Topological order of the nodes that depend on a mapped input.
  std::vector<array> tape;
  std::vector<array> traced;
  for (auto& out : s_outputs) {
    if (out.has_primitive()) {
      traced.push_back(out);
    }
  }
  walk_graph(
      traced, seen, [](array&) {},
      [&](array& node) {
        if (propagate_need(node, needs)) {
          tape.push_back(node);
          node.set_tracer(false);
          for (auto s : node.siblings()) {
            s.set_tracer(false);
          }
        }
      });

  for (auto& a : tape) {
    std::vector<array> v_inputs;
    std::vector<int> v_axes;
    for (auto& in : a.inputs()) {
      auto found = tmap.find(in.id());
      if (found != tmap.end()) {
        v_inputs.push_back(found->second.first);
        v_axes.push_back(found->second.second);
      } else {
        v_inputs.push_back(in);
        v_axes.push_back(-1);
      }
    }
    auto [v_outputs, v_out_axes] = detail::with_rule_context(
        "vmap", a.primitive(),
        [&] { return a.primitive().vmap(v_inputs, v_axes); });
    auto outs = a.outputs();
    for (size_t i = 0; i < v_outputs.size(); ++i) {
      tmap.insert({outs[i].id(), {v_outputs[i], v_out_axes[i]}});
    }
  }

  std::vector<array> outputs;
  for (size_t i = 0; i < s_outputs.size(); ++i) {
    auto found = tmap.find(s_outputs[i].id());
    // A rule may report an output as unmapped (-1): broadcast it below.
    if (found != tmap.end() && found->second.second >= 0) {
      auto [out, vdim] = found->second;
      if (vdim != out_axes[i]) {
        if (out_axes[i] >= out.ndim()) {
          std::ostringstream msg;
          msg << "[vmap] Axis " << out_axes[i] << " invalid for output with "
              << out.ndim() << " dimensions.";
          throw std::invalid_argument(msg.str());
        }
        out = moveaxis(out, vdim, out_axes[i]);
      }
      outputs.push_back(out);
    } else {
      // Independent of every mapped input: broadcast along the new axis.
      const array& o = found != tmap.end() ? found->second.first : s_outputs[i];
      // out_axes None (-1): returned unmapped, as MLX does.
      if (out_axes[i] == -1) {
        outputs.push_back(o);
        continue;
      }
      if (out_axes[i] < 0 || out_axes[i] > o.ndim()) {
        std::ostringstream msg;
        msg << "[vmap] Axis " << out_axes[i] << " invalid for output with "
            << o.ndim() + 1 << " dimensions.";
        throw std::invalid_argument(msg.str());
      }
      auto shape = o.shape();
      shape.insert(shape.begin() + out_axes[i], size);
      outputs.push_back(broadcast_to(expand_dims(o, out_axes[i]), shape));
    }
  }
  return outputs;
}

}  // namespace detail

Fn vmap(const Fn& fun, const std::vector<int>& in_axes,
        const std::vector<int>& out_axes) {
  auto none_mapped = [](const std::vector<int>& axes) {
    return !axes.empty() &&
           std::all_of(axes.begin(), axes.end(), [](int a) { return a < 0; });
  };
  if (none_mapped(in_axes) != none_mapped(out_axes)) {
    throw std::invalid_argument(
        "[vmap] Input (or output) axes must be specified if output (or "
        "input) axes are.");
  }
  return [fun, in_axes, out_axes](const std::vector<array>& inputs) {
    auto ia = in_axes.empty() ? std::vector<int>(inputs.size(), 0) : in_axes;
    auto [s_inputs, s_outputs] = detail::vmap_trace(fun, inputs, ia);
    auto oa =
        out_axes.empty() ? std::vector<int>(s_outputs.size(), 0) : out_axes;
    return detail::vmap_replace(inputs, s_inputs, s_outputs, ia, oa);
  };
}

std::function<array(const array&, const array&)> vmap(
    const std::function<array(const array&, const array&)>& fun, int in_axis_a,
    int in_axis_b, int out_axis) {
  auto vf = vmap(
      [fun](const std::vector<array>& in) {
        return std::vector<array>{fun(in[0], in[1])};
      },
      {in_axis_a, in_axis_b}, {out_axis});
  return [vf](const array& a, const array& b) { return vf({a, b})[0]; };
}

UnaryFn vmap(const UnaryFn& fun, int in_axis, int out_axis) {
  auto vf = vmap(
      [fun](const std::vector<array>& in) {
        return std::vector<array>{fun(in[0])};
      },
      {in_axis}, {out_axis});
  return [vf](const array& a) { return vf({a})[0]; };
}

// --- custom functions ---

namespace {

// custom_function with `fun_vjp` in the rules' (JAX's) convention.
Fn make_custom_function(Fn fun, std::optional<VjpFn> fun_vjp,
                        std::optional<JvpFn> fun_jvp,
                        std::optional<VmapFn> fun_vmap) {
  if (!fun_vjp && !fun_jvp && !fun_vmap) {
    return fun;
  }
  return [fun, fun_vjp, fun_jvp, fun_vmap](const std::vector<array>& args) {
    auto outputs = fun(args);
    for (auto& o : outputs) {
      o = stop_gradient(o);
    }
    std::vector<array> inputs = args;
    inputs.insert(inputs.end(), outputs.begin(), outputs.end());
    Stream s = outputs.empty() ? to_stream({}) : stream_of(outputs[0]);
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
    for (auto& o : outputs) {
      shapes.push_back(o.shape());
      dtypes.push_back(o.dtype());
    }
    // Rules not given are derived from `fun` (possibly recomputing it).
    VjpFn vjp_rule = fun_vjp.value_or(
        [fun](const std::vector<array>& primals,
              const std::vector<array>& cotangents, const std::vector<array>&) {
          return detail::internal_vjp(fun, primals, cotangents,
                                      all_argnums(primals.size()))
              .second;
        });
    JvpFn jvp_rule = fun_jvp.value_or([fun](const std::vector<array>& primals,
                                            const std::vector<array>& tangents,
                                            const std::vector<int>& argnums) {
      std::vector<array> all;
      for (size_t i = 0, j = 0; i < primals.size(); ++i) {
        if (j < argnums.size() && static_cast<int>(i) == argnums[j]) {
          all.push_back(tangents[j++]);
        } else {
          all.push_back(zeros_like(primals[i]));
        }
      }
      return jvp(fun, primals, all).second;
    });
    VmapFn vmap_rule = fun_vmap.value_or(
        [fun, n = outputs.size()](const std::vector<array>& in,
                                  const std::vector<int>& axes) {
          std::vector<int> out_axes(n, 0);
          return std::make_pair(vmap(fun, axes, out_axes)(in), out_axes);
        });
    return array::make_arrays(
        std::move(shapes), dtypes,
        std::make_shared<CustomTransforms>(
            s, static_cast<int>(outputs.size()), std::move(vjp_rule),
            std::move(jvp_rule), std::move(vmap_rule)),
        inputs);
  };
}

}  // namespace

Fn custom_function(Fn fun, std::optional<VjpFn> fun_vjp,
                   std::optional<JvpFn> fun_jvp,
                   std::optional<VmapFn> fun_vmap) {
  // The user's rule is in MLX's convention, as the vjp it customizes.
  if (fun_vjp) {
    fun_vjp = conjugated_rule(std::move(*fun_vjp));
  }
  return make_custom_function(std::move(fun), std::move(fun_vjp),
                              std::move(fun_jvp), std::move(fun_vmap));
}

Fn custom_vjp(Fn fun, VjpFn fun_vjp) {
  return custom_function(std::move(fun), std::move(fun_vjp), std::nullopt,
                         std::nullopt);
}

Fn checkpoint(Fn fun) {
  VjpFn vjp_fun = [fun](const std::vector<array>& primals,
                        const std::vector<array>& cotangents,
                        const std::vector<array>& outputs) {
    // `depends` holds the recomputation back until the cotangents exist:
    // otherwise the scheduler may recompute every block early and keep all
    // their intermediates alive, which is what checkpoint must avoid.
    return detail::internal_vjp(fun, depends(primals, cotangents), cotangents,
                                all_argnums(primals.size()))
        .second;
  };
  return make_custom_function(std::move(fun), std::move(vjp_fun), std::nullopt,
                              std::nullopt);
}

// --- Jacobians ---

namespace {

// Identity basis shaped (n, shape...), in dtype `t`.
array basis(const Shape& shape, Dtype t) {
  int n = static_cast<int>(shape_size(shape));
  Shape s{n};
  s.insert(s.end(), shape.begin(), shape.end());
  return reshape(eye(n, t), s);
}

Shape concat_shapes(const Shape& a, const Shape& b) {
  Shape s = a;
  s.insert(s.end(), b.begin(), b.end());
  return s;
}

}  // namespace

Fn jacrev(const Fn& fun, const std::vector<int>& argnums) {
  return [fun, argnums](const std::vector<array>& primals) {
    auto out = fun(primals)[0];
    // One vjp per output element, batched with vmap over the basis.
    std::vector<array> jacs;
    auto rows = vmap(
        [&](const std::vector<array>& ct) {
          // The rules' convention: rows of the holomorphic Jacobian, so
          // that jacrev equals jacfwd (see transforms.h).
          return detail::internal_vjp(
                     [&](const std::vector<array>& p) {
                       return std::vector<array>{fun(p)[0]};
                     },
                     primals, ct, argnums)
              .second;
        },
        {0})({basis(out.shape(), out.dtype())});
    for (size_t i = 0; i < argnums.size(); ++i) {
      jacs.push_back(reshape(
          rows[i], concat_shapes(out.shape(), primals[argnums[i]].shape())));
    }
    return jacs;
  };
}

Fn jacfwd(const Fn& fun, const std::vector<int>& argnums) {
  return [fun, argnums](const std::vector<array>& primals) {
    auto out = fun(primals)[0];
    std::vector<array> jacs;
    for (int arg : argnums) {
      const auto& x = primals[arg];
      // One jvp per input element, batched with vmap over the basis.
      auto cols = vmap(
          [&](const std::vector<array>& t) {
            std::vector<array> tangents;
            for (size_t i = 0; i < primals.size(); ++i) {
              tangents.push_back(
                  static_cast<int>(i) == arg ? t[0] : zeros_like(primals[i]));
            }
            return std::vector<array>{jvp(
                                          [&](const std::vector<array>& p) {
                                            return std::vector<array>{
                                                fun(p)[0]};
                                          },
                                          primals, tangents)
                                          .second[0]};
          },
          {0}, {out.ndim()})({basis(x.shape(), x.dtype())});
      // cols: (out..., n) -> (out..., x...)
      jacs.push_back(reshape(cols[0], concat_shapes(out.shape(), x.shape())));
    }
    return jacs;
  };
}

UnaryFn jacrev(const UnaryFn& fun) {
  auto j = jacrev(
      [fun](const std::vector<array>& in) {
        return std::vector<array>{fun(in[0])};
      },
      {0});
  return [j](const array& x) { return j({x})[0]; };
}

UnaryFn jacfwd(const UnaryFn& fun) {
  auto j = jacfwd(
      [fun](const std::vector<array>& in) {
        return std::vector<array>{fun(in[0])};
      },
      {0});
  return [j](const array& x) { return j({x})[0]; };
}

Fn hessian(const Fn& fun, const std::vector<int>& argnums) {
  // Forward-over-reverse: the Jacobian (by jvp) of the gradient (by vjp).
  return [fun, argnums](const std::vector<array>& primals) {
    std::vector<array> out;
    for (int arg : argnums) {
      auto g = [fun, arg](const std::vector<array>& p) {
        auto vg = value_and_grad_in(fun, std::vector<int>{arg}, false);
        return std::vector<array>{vg(p).second[0]};
      };
      out.push_back(jacfwd(g, {arg})(primals)[0]);
    }
    return out;
  };
}

UnaryFn hessian(const UnaryFn& fun) {
  auto h = hessian(
      [fun](const std::vector<array>& in) {
        return std::vector<array>{fun(in[0])};
      },
      {0});
  return [h](const array& x) { return h({x})[0]; };
}

std::pair<std::vector<array>, std::vector<array>> hvp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& tangents) {
  auto argnums = all_argnums(primals.size());
  auto g = [fun, argnums](const std::vector<array>& p) {
    return value_and_grad_in(fun, argnums, false)(p).second;
  };
  return jvp(g, primals, tangents);
}

}  // namespace fluxion
