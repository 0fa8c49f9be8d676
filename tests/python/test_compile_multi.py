"""mx.compile's fused groups with several outputs (issue 30 item 2, CPU): a
fused value that is also returned, or read after its group, is one more
output of the group's Compiled node, written by the same loop (AdamW's
parameter and moments: one node per parameter); reduction groups likewise;
cross-entropy's pick of the target's logit joins the row reduction. Each
test checks the fused nodes (names, number of outputs), the values against
eager (and NumPy), and that the fused nodes ran their generated kernels."""

import contextlib
import io
import re

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn
import fluxion.optimizers as optim
from fluxion.utils import tree_flatten
from compile_support import TOL, arr, close, kernels_ran_fixture, node_names

# Out-of-range targets make the fused node run its nodes one by one (which
# raises eager's error): that test counts its fallbacks itself.
kernels_ran = kernels_ran_fixture({"test_cross_entropy_out_of_range_targets"})


def fused(*outs):
    """(name, number of outputs) of each Compiled node behind `outs`."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        mx.print_graph(*outs)
    nodes = []
    for line in buf.getvalue().splitlines():
        m = re.search(r" = (Compiled[A-Za-z]*)\(", line)
        if m:
            nodes.append((m.group(1), line.split(" = ")[0].count("[")))
    return nodes


B1, B2, LR, EPS, WD = 0.9, 0.999, 1e-3, 1e-8, 0.01


def adamw(params, grads, ms, vs):
    out = []
    for p, g, m, v in zip(params, grads, ms, vs):
        m = B1 * m + (1 - B1) * g
        v = B2 * v + (1 - B2) * g * g
        p = p - LR * (m / (mx.sqrt(v) + EPS) + WD * p)
        out += [p, m, v]
    return out


def test_adamw_is_one_node_per_parameter():
    shapes = [(64, 32), (32,), (4, 8, 16), (1000,)]
    ps = [arr(s, seed=i) for i, s in enumerate(shapes)]
    gs = [arr(s, seed=10 + i) for i, s in enumerate(shapes)]
    ms = [arr(s, seed=20 + i) for i, s in enumerate(shapes)]
    vs = [mx.abs(arr(s, seed=30 + i)) for i, s in enumerate(shapes)]
    mx.eval(vs)
    outs = mx.compile(adamw)(ps, gs, ms, vs)
    nodes = fused(*outs)
    assert len(nodes) == 4, nodes
    assert all(n == 3 and "Sqrt" in name for name, n in nodes), nodes
    names = node_names(*outs)
    assert "Sqrt" not in names and "Multiply" not in names, names
    for got, want in zip(outs, adamw(ps, gs, ms, vs)):
        close(got, want)
    # NumPy, in float64.
    for i in range(4):
        p, g, m, v = (np.array(a, np.float64) for a in (ps[i], gs[i], ms[i],
                                                       vs[i]))
        m = B1 * m + (1 - B1) * g
        v = B2 * v + (1 - B2) * g * g
        p = p - LR * (m / (np.sqrt(v) + EPS) + WD * p)
        for got, want in zip(outs[3 * i:3 * i + 3], (p, m, v)):
            np.testing.assert_allclose(np.array(got), want, rtol=1e-5,
                                       atol=1e-6)


def mlp(seed):
    mx.random.seed(seed)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16),
                          nn.ReLU(), nn.Linear(16, 10))
    mx.eval(model.parameters())
    return model


def test_optimizer_adamw_in_a_compiled_step():
    x = arr((8, 12), seed=1)
    y = mx.array(np.random.default_rng(2).integers(0, 10, 8))

    def loss_fn(model, x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    def trainer(compiled):
        model, opt = mlp(3), optim.AdamW(learning_rate=1e-2)
        opt.init(model.trainable_parameters())

        def step(x, y):
            loss, g = nn.value_and_grad(model, loss_fn)(model, x, y)
            opt.update(model, g)
            return loss

        state = [model.state, opt.state]
        if compiled:
            step = mx.compile(step, inputs=state, outputs=state)
        return model, state, step

    model, state, step = trainer(True)
    loss = step(x, y)
    nodes = fused(loss, *[v for _, v in tree_flatten(state)])
    updates = [(name, n) for name, n in nodes if "Sqrt" in name]
    # One node per parameter (3 weights, 3 biases), each writing the
    # parameter and its two moments; a bias's gradient (a column sum of
    # the batch) joins its update.
    assert len(updates) == 6 and all(n == 3 for _, n in updates), nodes
    assert sum("Sum" in name for name, _ in updates) == 3, nodes
    # The loss: one row node (with the target's pick) and its mean.
    assert sum("GatherAxis" in name for name, _ in nodes) == 1, nodes
    eager_model, _, eager_step = trainer(False)
    eager_loss = eager_step(x, y)
    close(loss, eager_loss)
    for _ in range(3):
        loss, eager_loss = step(x, y), eager_step(x, y)
        close(loss, eager_loss, scale=10)
    for (_, a), (_, b) in zip(tree_flatten(model.parameters()),
                              tree_flatten(eager_model.parameters())):
        close(a, b, scale=10)


def moments(p, g, s):
    m = 0.9 * p + 0.1 * g  # returned, and read by both other outputs
    v = m * m + s
    return m, v, p - m / (mx.sqrt(mx.abs(v)) + 1.0)


def moments_np(p, g, s):
    m = 0.9 * p + 0.1 * g
    v = m * m + s
    return m, v, p - m / (np.sqrt(np.abs(v)) + 1.0)


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16,
                                   mx.float64])
def test_several_outputs_match_eager(dtype):
    x = arr((6, 7), dtype, 1)
    cases = [
        (arr((6, 7), dtype), x, arr((6, 7), dtype, 2)),
        (arr((6, 7), dtype), x, arr((7,), dtype, 3)),      # broadcast
        (arr((6, 7), dtype), x, mx.array(0.5, dtype)),      # scalar array
        (arr((7, 6), dtype).T, x, arr((6, 1), dtype, 4)),   # transposed
        (arr((6, 14), dtype)[:, ::2], x, 0.25),             # strided
        (arr((2, 3, 5), dtype), arr((3, 5), dtype), 2.0),   # broadcast
    ]
    f = mx.compile(moments)
    for p, g, s in cases:
        outs = f(p, g, s)
        nodes = fused(*outs)
        assert len(nodes) == 1 and nodes[0][1] == 3, nodes
        for got, want in zip(outs, moments(p, g, s)):
            close(got, want, dtype)
        if dtype in (mx.float32, mx.float64):
            s_np = np.array(s) if isinstance(s, mx.array) else s
            for got, want in zip(outs, moments_np(np.array(p), np.array(g),
                                                  s_np)):
                np.testing.assert_allclose(np.array(got), want,
                                           rtol=TOL[dtype], atol=TOL[dtype])


def test_a_value_read_after_its_group_is_written_once():
    x, y = arr((5, 8)), arr((5, 8), seed=1)
    w = arr((8, 3), seed=2)

    def f(x, y):
        a = mx.exp(x) * y
        b = mx.tanh(a + 1)
        return (b @ w) + mx.sum(a, -1, keepdims=True)

    out = mx.compile(f)(x, y)
    names = node_names(out)
    # exp is computed once: in the node that writes a and b.
    assert sum(n.count("Exp") for n in names) == 1, names
    assert ("CompiledExpMultiplyBroadcastAddTanh", 2) in fused(out), \
        fused(out)
    close(out, f(x, y))


def siblings(w):
    def f(a):
        h = a @ w
        t = mx.tanh(h) * 0.5
        return t + h, mx.exp(t), t - 1
    return f


def test_siblings_and_donated_inputs():
    # t is read by three nodes, each a root of its own (returned): they
    # join t's group as its outputs. h (a matmul's result, read only by
    # the fused node) is donatable: one output may take its buffer, the
    # others get their own.
    a, w = arr((33, 16)), arr((16, 16), seed=1)
    f = siblings(w)
    cf = mx.compile(f)
    for _ in range(3):
        outs = cf(a)
        assert [n for _, n in fused(*outs)] == [3]
        for got, want in zip(outs, f(a)):
            close(got, want)
    # The donation happens: h (4 MB) and two new outputs at the peak, not
    # three.
    a, f = arr((1024, 32)), siblings(arr((32, 1024), seed=1))
    cf = mx.compile(f)
    mx.eval(cf(a))
    mx.clear_cache()
    mx.reset_peak_memory()
    base = mx.get_active_memory()
    outs = cf(a)
    mx.eval(outs)
    assert mx.get_peak_memory() - base < 4 * (4 << 20)
    for got, want in zip(outs, f(a)):
        close(got, want)


def test_grad_vmap_and_shapeless_through_several_outputs():
    p, g, s = arr((4, 5), mx.float64), arr((4, 5), mx.float64, 1), 0.5
    cf = mx.compile(moments)

    def loss(fn):
        def inner(p, g):
            m, v, q = fn(p, g, s)
            return mx.sum(m * 3 + v * v + q)
        return inner

    for got, want in zip(mx.grad(loss(cf), argnums=(0, 1))(p, g),
                         mx.grad(loss(moments), argnums=(0, 1))(p, g)):
        close(got, want, mx.float64)
    cg = mx.compile(mx.grad(loss(moments)))
    close(cg(p, g), mx.grad(loss(moments))(p, g), mx.float64)
    pb, gb = arr((3, 4, 5), mx.float64), arr((3, 4, 5), mx.float64, 2)
    for got, want in zip(mx.vmap(lambda a, b: cf(a, b, s))(pb, gb),
                         mx.vmap(lambda a, b: moments(a, b, s))(pb, gb)):
        close(got, want, mx.float64)
    # Shapeless: broadcasts stay outside (a BroadcastAxes node reads its
    # partner for its shape, so a Python scalar meeting a fused value
    # splits the group there): same-shape operands here.
    def same_shape(p, g, s):
        m = p * g + s
        v = m * m
        return m, v, p - m * v

    sf = mx.compile(same_shape, shapeless=True)
    for shape in ((4, 5), (2, 9), (7,)):
        a, b, c = arr(shape, seed=3), arr(shape, seed=4), arr(shape, seed=5)
        outs = sf(a, b, c)
        assert [n for _, n in fused(*outs)] == [3]
        for got, want in zip(outs, same_shape(a, b, c)):
            close(got, want)


def layer_norm_stats(x, w):
    mean = mx.mean(x, -1, keepdims=True)
    c = x - mean
    rstd = mx.rsqrt(mx.mean(c * c, -1, keepdims=True) + 1e-5)
    return c * rstd * w, mean, rstd


def softmax_parts(x):
    mx_ = mx.max(x, -1)
    e = mx.exp(x - mx_[..., None])
    return e / mx.sum(e, -1, keepdims=True), mx_, e


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16,
                                   mx.float64])
def test_row_groups_with_several_outputs(dtype):
    # A layer norm returning its statistics (a backward pass reads them),
    # a softmax its max (squeezed) and its exponentials: one row node each.
    w = arr((50,), dtype, 1)
    for x in (arr((7, 50), dtype), arr((3, 4, 50), dtype),
              arr((50, 7), dtype).T):  # the last: strided rows
        outs = mx.compile(layer_norm_stats)(x, w)
        assert [n for _, n in fused(*outs)] == [3], fused(*outs)
        for got, want in zip(outs, layer_norm_stats(x, w)):
            close(got, want, dtype, 4)
        outs = mx.compile(softmax_parts)(x)
        assert [n for _, n in fused(*outs)] == [3], fused(*outs)
        for got, want in zip(outs, softmax_parts(x)):
            close(got, want, dtype, 4)


def test_column_groups_with_several_outputs():
    # Batch statistics returned with the normalized batch, and a bias
    # update from the batch's gradient with its moments (a column sum and
    # AdamW per column): one column node each.
    x, w = arr((64, 48)), arr((48,), seed=1)

    def batch_norm(x, w):
        mean = mx.mean(x, 0)
        var = mx.mean(mx.square(x - mean), 0)
        return (x - mean) * mx.rsqrt(var + 1e-5) * w, mean, var

    outs = mx.compile(batch_norm)(x, w)
    assert [n for _, n in fused(*outs)] == [3], fused(*outs)
    for got, want in zip(outs, batch_norm(x, w)):
        close(got, want, scale=4)

    def bias_update(dy, b, m, v):
        g = mx.sum(dy, 0)
        return adamw([b], [g], [m], [v])

    dy, b, m = arr((256, 48), seed=2), arr((48,), seed=3), arr((48,), seed=4)
    v = mx.abs(arr((48,), seed=5))
    outs = mx.compile(bias_update)(dy, b, m, v)
    assert len(fused(*outs)) == 1 and fused(*outs)[0][1] == 3, fused(*outs)
    for got, want in zip(outs, bias_update(dy, b, m, v)):
        close(got, want, scale=4)


def cross_entropy(logits, y):
    picked = mx.take_along_axis(logits, y[..., None], -1).squeeze(-1)
    return mx.logsumexp(logits, -1) - picked


def ce_np(x, y):
    x = x.astype(np.float64)
    m = x.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(-1, keepdims=True)))[..., 0]
    return lse - np.take_along_axis(x, y[..., None], -1)[..., 0]


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16,
                                   mx.float64])
def test_cross_entropy_picks_inside_the_row_kernel(dtype):
    rng = np.random.default_rng(7)
    cases = []
    for shape, idt in (((16, 50), mx.int32), ((3, 5, 33), mx.uint32),
                       ((1, 3000), mx.int64), ((9, 2), mx.int8)):
        x = arr(shape, dtype, 8)
        y = mx.array(rng.integers(0, shape[-1], shape[:-1])).astype(idt)
        cases.append((x, y))
    xt = arr((40, 12), dtype, 9).T  # strided rows
    cases.append((xt, mx.array(rng.integers(0, 40, 12))))
    # Negative targets wrap once, as eager's take_along_axis.
    cases.append((arr((6, 10), dtype), mx.array([-1, -10, 0, 9, -5, 3])))
    # A strided target vector.
    cases.append((arr((5, 10), dtype), mx.array(rng.integers(0, 10, 10))[::2]))
    f = mx.compile(lambda a, b: mx.mean(cross_entropy(a, b)))
    per_row = mx.compile(cross_entropy)
    for x, y in cases:
        out = f(x, y)
        # One row node picks the target's logit and subtracts it; the mean
        # is left (a fused 1-D mean, or a total's Sum and Divide).
        nodes = fused(out)
        assert "ExpSumLogAdd" in nodes[0][0], nodes
        assert nodes[0][0].endswith("GatherAxisSqueezeSubtract"), nodes
        assert len(nodes) == 1 or (len(nodes) == 2 and
                                   "Divide" in nodes[1][0]), nodes
        names = node_names(out)
        for op in ("GatherAxis", "Exp", "Max", "Subtract", "Log"):
            assert op not in names, names
        close(out, mx.mean(cross_entropy(x, y)), dtype, 4)
        close(per_row(x, y), cross_entropy(x, y), dtype, 4)
        yn = np.array(y).astype(np.int64) % x.shape[-1]
        np.testing.assert_allclose(
            np.array(per_row(x, y).astype(mx.float64)),
            ce_np(np.array(x.astype(mx.float64)), yn),
            rtol=TOL[dtype] * 8, atol=TOL[dtype] * 8)


def test_cross_entropy_loss_and_its_gradient():
    rng = np.random.default_rng(11)
    x = arr((32, 100), seed=12)
    y = mx.array(rng.integers(0, 100, 32))

    def loss(x, y):
        return nn.losses.cross_entropy(x, y, reduction="mean")

    out = mx.compile(loss)(x, y)
    nodes = fused(out)
    assert len(nodes) == 2 and "GatherAxis" in nodes[0][0], nodes
    close(out, loss(x, y))
    g = mx.compile(mx.grad(loss))(x, y)
    close(g, mx.grad(loss)(x, y))
    close(mx.grad(lambda a: mx.compile(loss)(a, y))(x), mx.grad(loss)(x, y))
    # jvp through the fused node: its integer targets get no tangent (the
    # gather's rule raises on one; found by the transformation fuzzer).
    t = arr((32, 100), seed=14)
    want = mx.jvp(lambda a: loss(a, y), [x], [t])[1][0]
    close(mx.jvp(lambda a: mx.compile(loss)(a, y), [x], [t])[1][0], want)
    close(mx.jvp(mx.compile(lambda a: loss(a, y)), [x], [t])[1][0], want)
    xs = arr((3, 32, 100), seed=13)
    close(mx.vmap(mx.compile(loss), in_axes=(0, None))(xs, y),
          mx.vmap(loss, in_axes=(0, None))(xs, y))


def test_cross_entropy_out_of_range_targets():
    # Eager raises IndexError at evaluation; the fused row kernel finds the
    # index out of range (reading nothing), and the node runs its nodes one
    # by one, which raises the same error.
    x = arr((4, 10))
    f = mx.compile(lambda a, b: mx.mean(cross_entropy(a, b)))
    for y in (mx.array([0, 10, 2, 3]), mx.array([0, 1, -11, 3]),
              mx.array([0, 1, 2, 4000000000], mx.uint32)):
        with pytest.raises(IndexError) as eager:
            mx.eval(mx.mean(cross_entropy(x, y)))
        before = mx._compiled_fallbacks()
        with pytest.raises(IndexError) as fused_err:
            mx.eval(f(x, y))
        assert str(fused_err.value) == str(eager.value)
        assert mx._compiled_fallbacks() == before + 1
    before = mx._compiled_fallbacks()
    close(f(x, mx.array([0, 9, -10, 3])),
          mx.mean(cross_entropy(x, mx.array([0, 9, -10, 3]))))
    assert mx._compiled_fallbacks() == before


def test_exported_compiled_function_with_several_outputs(tmp_path):
    path = str(tmp_path / "multi.mlxfn")
    cf = mx.compile(moments)
    p, g = arr((4, 5)), arr((4, 5), seed=1)
    assert [n for _, n in fused(*cf(p, g, 0.5))] == [3]
    mx.export_function(path, lambda a, b: cf(a, b, 0.5), p, g)
    imported = mx.import_function(path)
    for got, want in zip(imported(p, g), moments(p, g, 0.5)):
        close(got, want)
