// Evaluation and the function transformations: vjp, jvp, value_and_grad,
// grad, vmap, custom_function, custom_vjp, checkpoint, and the Jacobians.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/trace_state.h"

namespace fluxion {

// Compute `outputs` and wait for them.
void eval(std::vector<array> outputs);
// Schedule `outputs` and return at once; read them later (item, wait, eval).
void async_eval(std::vector<array> outputs);

template <typename... Arrays>
void eval(Arrays&&... outputs) {
  eval(std::vector<array>{std::forward<Arrays>(outputs)...});
}
template <typename... Arrays>
void async_eval(Arrays&&... outputs) {
  async_eval(std::vector<array>{std::forward<Arrays>(outputs)...});
}

namespace env {
// Width limit of the breadth-first tape (FLUXION_BFS_MAX_WIDTH, default 20).
int bfs_max_width();
}  // namespace env

using Fn = std::function<std::vector<array>(const std::vector<array>&)>;
using UnaryFn = std::function<array(const array&)>;

// Outputs of `fun(primals)` and the vector-Jacobian products of `cotangents`
// with respect to the primals listed in `argnums` (sorted). Outputs that are
// stop_gradient'ed take no cotangent. Complex arrays follow MLX's (and
// PyTorch's) convention: the adjoint of the jvp under Re(conj(u) v), so a
// holomorphic f gives ct * conj(f'(z)), and grad of a real loss L(x + iy) is
// dL/dx + i dL/dy (JAX gives the conjugates; detail::internal_vjp).
std::pair<std::vector<array>, std::vector<array>> vjp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& cotangents, const std::vector<int>& argnums);
std::pair<std::vector<array>, std::vector<array>> vjp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& cotangents);
std::pair<array, array> vjp(const UnaryFn& fun, const array& primal,
                            const array& cotangent);

// Outputs of `fun(primals)` and the Jacobian-vector products with `tangents`.
std::pair<std::vector<array>, std::vector<array>> jvp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& tangents);
std::pair<array, array> jvp(const UnaryFn& fun, const array& primal,
                            const array& tangent);

using ValueAndGradFn =
    std::function<std::pair<std::vector<array>, std::vector<array>>(
        const std::vector<array>&)>;
using SimpleValueAndGradFn = std::function<std::pair<array, std::vector<array>>(
    const std::vector<array>&)>;

// `fun`'s first output must be a scalar; further outputs are auxiliary (their
// gradients are stopped). Negative argnums count from the end.
ValueAndGradFn value_and_grad(const Fn& fun, const std::vector<int>& argnums);
ValueAndGradFn value_and_grad(const Fn& fun, int argnum = 0);
std::function<std::pair<array, array>(const array&)> value_and_grad(
    const UnaryFn& fun);
SimpleValueAndGradFn value_and_grad(
    const std::function<array(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums);

std::function<std::vector<array>(const std::vector<array>&)> grad(
    const std::function<array(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums);
std::function<array(const std::vector<array>&)> grad(
    const std::function<array(const std::vector<array>&)>& fun,
    int argnum = 0);
UnaryFn grad(const UnaryFn& fun);

// Vectorize `fun` over axis `in_axes[i]` of input i (-1: not mapped); the
// mapped axis of output j goes to `out_axes[j]`. Empty means all zeros.
Fn vmap(const Fn& fun, const std::vector<int>& in_axes = {},
        const std::vector<int>& out_axes = {});
std::function<array(const array&, const array&)> vmap(
    const std::function<array(const array&, const array&)>& fun,
    int in_axis_a = 0, int in_axis_b = 0, int out_axis = 0);
UnaryFn vmap(const UnaryFn& fun, int in_axis = 0, int out_axis = 0);

using VjpFn = std::function<std::vector<array>(
    const std::vector<array>& primals, const std::vector<array>& cotangents,
    const std::vector<array>& outputs)>;
using JvpFn = std::function<std::vector<array>(
    const std::vector<array>& primals, const std::vector<array>& tangents,
    const std::vector<int>& argnums)>;
using VmapFn = std::function<std::pair<std::vector<array>, std::vector<int>>(
    const std::vector<array>& inputs, const std::vector<int>& axes)>;

// `fun` with any of its vjp, jvp and vmap replaced; the ones not given are
// derived from `fun`. `fun_vjp` is written in vjp's (MLX's) convention.
Fn custom_function(Fn fun, std::optional<VjpFn> fun_vjp = std::nullopt,
                   std::optional<JvpFn> fun_jvp = std::nullopt,
                   std::optional<VmapFn> fun_vmap = std::nullopt);
Fn custom_vjp(Fn fun, VjpFn fun_vjp);
// Recompute `fun` in the backward pass instead of keeping its intermediates.
Fn checkpoint(Fn fun);

// Beyond MLX: Jacobians and Hessians built from vjp/jvp/vmap. For a function
// of one array returning one array: jac[out..., in...]. Complex arrays: the
// holomorphic Jacobian df/dz (JAX's holomorphic=True, not conjugated as vjp
// is), so jacrev equals jacfwd for holomorphic f, and hessian (jacfwd of
// jacrev) is f''. A non-holomorphic f has no complex Jacobian: jacfwd then
// gives df/dx (along the real axis) and jacrev df/dz + conj(df/dconj(z)),
// which is conj(grad) for a real f.
UnaryFn jacrev(const UnaryFn& fun);
UnaryFn jacfwd(const UnaryFn& fun);
// Jacobians of output 0 with respect to each of `argnums`.
Fn jacrev(const Fn& fun, const std::vector<int>& argnums);
Fn jacfwd(const Fn& fun, const std::vector<int>& argnums);
// Hessian of a scalar function (forward-over-reverse).
UnaryFn hessian(const UnaryFn& fun);
Fn hessian(const Fn& fun, const std::vector<int>& argnums);
// Hessian-vector product of a scalar function: (H v) for each primal.
std::pair<std::vector<array>, std::vector<array>> hvp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& tangents);


namespace detail {
// True while a vjp (grad, value_and_grad, a rule that differentiates a
// function) traces its function on this thread: ops built then may keep
// what their backward pass wants (attention's logsumexp), as MLX's
// detail::in_grad_tracing.
bool in_grad_tracing();
}  // namespace detail

namespace detail {

// vjp in the primitives' rules' own (JAX's) convention: the transpose of the
// jvp under Re(u v), the conjugate of vjp's for complex arrays. Rules that
// differentiate a function (Compiled, checkpoint, derived custom rules) and
// the Jacobians use it.
std::pair<std::vector<array>, std::vector<array>> internal_vjp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& cotangents, const std::vector<int>& argnums);

// Scoped tracing marks (thread-local: threads transform independently).
class InTracing {
  TraceScope scope_;  // constructed first, destroyed last

 public:
  InTracing();
  ~InTracing();
  InTracing(const InTracing&) = delete;
  InTracing& operator=(const InTracing&) = delete;
};

class RetainGraph {
  TraceScope scope_;

 public:
  RetainGraph();
  ~RetainGraph();
  RetainGraph(const RetainGraph&) = delete;
  RetainGraph& operator=(const RetainGraph&) = delete;
};

std::pair<std::vector<array>, std::vector<array>> vmap_trace(
    const Fn& fun, const std::vector<array>& inputs,
    const std::vector<int>& in_axes);
std::vector<array> vmap_replace(const std::vector<array>& inputs,
                                const std::vector<array>& s_inputs,
                                const std::vector<array>& s_outputs,
                                const std::vector<int>& in_axes,
                                const std::vector<int>& out_axes);

}  // namespace detail

}  // namespace fluxion
