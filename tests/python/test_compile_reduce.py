"""mx.compile fusing reductions with their elementwise neighbours on the
CPU (issue 30 item 2): which graphs become one Compiled node (the dot
graph's names), and that the fused kernels equal the eager graph for
dtypes, shapes, strided inputs, empty and NaN rows, and under grad, vmap
and shapeless compile."""

import os
import subprocess
import sys

import numpy as np
import pytest

import fluxion.core as mx
from compile_support import TOL, arr, close, kernels_ran_fixture
from compile_support import node_names as graph_names


# Tests whose cases include inputs a generated kernel does not take (a
# total over strided inputs, a transposed input to a column kernel): their
# Compiled nodes run node by node there, by design. Every other test must
# run its fused nodes' kernels.
kernels_ran = kernels_ran_fixture({"test_strided_and_broadcast_inputs",
                                   "test_column_reductions_edge_cases"})


def node_names(f, *args):
    return graph_names(f(*args))


def compiled_names(f, *args):
    return [n for n in node_names(mx.compile(f), *args)
            if n.startswith("Compiled")]


def softmax(x):
    e = mx.exp(x - mx.max(x, -1, keepdims=True))
    return e / mx.sum(e, -1, keepdims=True)


def log_softmax(x):
    s = x - mx.max(x, -1, keepdims=True)
    return s - mx.log(mx.sum(mx.exp(s), -1, keepdims=True))


def layer_norm(x, w, b):
    c = x - mx.mean(x, -1, keepdims=True)
    return c * mx.rsqrt(mx.mean(c * c, -1, keepdims=True) + 1e-5) * w + b


def mse(x, y):
    return mx.mean(mx.square(x - y))


def sum_exp(x, y):
    return mx.sum(mx.exp(x - 1) * y, axis=-1)


def max_abs(x, y):
    return mx.max(mx.abs(x), axis=-1)


def test_what_fuses():
    x, y = arr((8, 100), mx.float32), arr((8, 100), mx.float32, 1)
    w, b = arr((100,), mx.float32, 2), arr((100,), mx.float32, 3)
    assert compiled_names(sum_exp, x, y) == [
        "CompiledBroadcastSubtractExpMultiplySum"]
    assert compiled_names(max_abs, x, y) == ["CompiledAbsMax"]
    assert compiled_names(mse, x, y) == ["CompiledSubtractSquareSum"]
    assert compiled_names(softmax, x) == [
        "CompiledMaxBroadcastSubtractExpSumBroadcastDivide"]
    assert compiled_names(log_softmax, x) == [
        "CompiledMaxBroadcastSubtractExpSumLogBroadcastSubtract"]
    names = node_names(mx.compile(layer_norm), x, w, b)
    assert len([n for n in names if n.startswith("Compiled")]) == 1
    # Nothing of the row's shape is left outside the fused node.
    for f, args in ((softmax, (x,)), (log_softmax, (x,)),
                    (layer_norm, (x, w, b)), (sum_exp, (x, y))):
        names = node_names(mx.compile(f), *args)
        for op in ("Sum", "Max", "Exp", "Subtract", "Divide", "Multiply"):
            assert op not in names, (f.__name__, names)


def test_logsumexp_and_cross_entropy():
    # logsumexp's stop-gradient max, the isinf guard and the log-sum form
    # one node; cross-entropy's gather of the target's logit and the
    # subtraction join it (the row is in hand), and the mean is a second.
    rng = np.random.default_rng(5)
    xn = rng.standard_normal((16, 50)).astype(np.float32)
    x, t = mx.array(xn), mx.array(rng.integers(0, 50, 16))
    lse = lambda a: mx.logsumexp(a, axis=-1)
    assert compiled_names(lse, x) == [
        "CompiledMaxStopGradientIsInfBroadcastSelectBroadcastSubtractExpSum"
        "LogAdd"]

    def ce(a, t):
        picked = mx.take_along_axis(a, t[:, None], -1)[:, 0]
        return mx.mean(mx.logsumexp(a, -1) - picked)

    names = node_names(mx.compile(ce), x, t)
    # The 1-D mean fuses its divide too (the squeezed total is a scalar).
    assert [n for n in names if n.startswith("Compiled")] == [
        "CompiledMaxStopGradientIsInfBroadcastSelectBroadcastSubtractExpSum"
        "LogAddSqueezeGatherAxisSqueezeSubtract", "CompiledSumSqueezeDivide"]
    assert "Exp" not in names and "GatherAxis" not in names
    m = xn.max(-1)
    ref = np.mean(m + np.log(np.exp(xn - m[:, None]).sum(-1))
                  - xn[np.arange(16), np.array(t)])
    np.testing.assert_allclose(mx.compile(ce)(x, t), ref, rtol=1e-5)
    inf = mx.array([[np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf]])
    close(mx.compile(lse)(inf), lse(inf), mx.float32)
    g = mx.grad(lambda a: mx.sum(mx.compile(lse)(a)))(x)
    close(g, mx.grad(lambda a: mx.sum(lse(a)))(x), mx.float32)


def test_values_match_eager_and_numpy():
    xn = np.random.default_rng(0).standard_normal((37, 300)).astype(
        np.float32)
    x = mx.array(xn)
    e = np.exp(xn - xn.max(-1, keepdims=True))
    np.testing.assert_allclose(mx.compile(softmax)(x),
                               e / e.sum(-1, keepdims=True), rtol=1e-5,
                               atol=1e-7)
    yn = np.random.default_rng(1).standard_normal((37, 300)).astype(
        np.float32)
    np.testing.assert_allclose(mx.compile(mse)(x, mx.array(yn)),
                               np.mean((xn - yn) ** 2), rtol=1e-5)


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16,
                                   mx.float64])
@pytest.mark.parametrize("shape", [(5, 7), (3, 33), (2, 3, 2049), (1, 5000),
                                   (4097,), (2, 0), (0, 6), (6, 1), (1, 1)])
def test_fused_equals_eager(dtype, shape):
    x = arr(shape, dtype)
    y = arr(shape, dtype, 1)
    w = arr(shape[-1:], dtype, 2)
    fns = [(sum_exp, (x, y)), (mse, (x, y)),
           (lambda a, b: mx.prod(1 + 0.01 * a * b, axis=-1), (x, y)),
           (lambda a, b: mx.sum(a * b, keepdims=True), (x, y)),
           (lambda a, b: mx.mean(a + b, axis=-1), (x, y)),
           (lambda a, b: layer_norm(a, w, b), (x, y))]
    if shape[-1] != 0:  # max over an empty axis raises
        fns += [(softmax, (x,)), (log_softmax, (x,)), (max_abs, (x, y)),
                (lambda a, b: mx.min(a * b, axis=-1, keepdims=True),
                 (x, y))]
    for f, args in fns:
        close(mx.compile(f)(*args), f(*args), dtype, 4)


@pytest.mark.parametrize("dtype", [mx.float32, mx.float64])
def test_sums_in_the_eager_order(dtype):
    # Row-contiguous rows are folded as the eager kernel folds them (lanes,
    # pairwise halves, chunks for a total): equal bit for bit.
    for shape in ((3, 31), (4, 100), (2, 5000), (1 << 18,), (3, 1 << 17)):
        x, y = arr(shape, dtype), arr(shape, dtype, 1)
        f = lambda a, b: mx.sum(a * b, axis=-1)
        g = lambda a, b: mx.sum(a * b)
        m = lambda a, b: mx.mean(mx.square(a - b))  # 1-D: divide fused
        for h in (f, g, m):
            assert np.array_equal(np.array(mx.compile(h)(x, y)),
                                  np.array(h(x, y))), (shape, h)


def test_strided_and_broadcast_inputs():
    x = arr((64, 48), mx.float32)
    xt = x.T  # (48, 64), columns of x: rows strided
    xs = x[::2, 1::3]
    b = arr((1, 64), mx.float32, 4)
    for a in (xt, xs, x[:, ::-1]):
        close(mx.compile(softmax)(a), softmax(a), mx.float32)
        close(mx.compile(sum_exp)(a, a), sum_exp(a, a), mx.float32)
        close(mx.compile(mse)(a, a * 0.5), mse(a, a * 0.5), mx.float32)
    # A 1-D total over a strided input takes the row kernel (one row).
    v = arr((5001,), mx.float32, 6)[::3]
    close(mx.compile(mse)(v, v * 0.25), mse(v, v * 0.25), mx.float32)
    f = lambda a, c: mx.sum(mx.exp(a) * c, -1)
    close(mx.compile(f)(xt, b), f(xt, b), mx.float32)
    col = arr((48, 1), mx.float32, 5)
    g = lambda a, c: softmax(a * c)
    close(mx.compile(g)(xt, col), g(xt, col), mx.float32)


def test_keepdims_false_and_back():
    # max(x, -1)[:, None]: the squeeze and expand_dims of the per-row value
    # join the group; a squeezed value broadcast along the row (its size is
    # the row's) must not be read per row.
    x = arr((6, 6), mx.float32, 8)
    f = lambda a: mx.exp(a - mx.max(a, -1)[:, None])
    assert compiled_names(f, x) == [
        "CompiledMaxSqueezeExpandDimsBroadcastSubtractExp"]
    close(mx.compile(f)(x), f(x), mx.float32)
    g = lambda a: a - mx.max(a, -1)  # (6,) broadcast along the last axis
    close(mx.compile(g)(x), g(x), mx.float32)
    h = lambda a: mx.log(mx.sum(mx.exp(a), -1)) * 2  # squeezed epilogue
    assert len(compiled_names(h, x)) == 1
    close(mx.compile(h)(x), h(x), mx.float32)
    v = arr((100,), mx.float32, 9)
    m = lambda a: mx.mean(mx.square(a - 1))  # 1-D: the divide fuses too
    assert compiled_names(m, v) == [
        "CompiledBroadcastSubtractSquareSumSqueezeDivide"]
    close(mx.compile(m)(v), m(v), mx.float32)


def test_long_rows_buffer_on_the_heap():
    # Rows whose buffers pass 256 KB of stack (softmax's exp over 70000
    # floats) keep them on the heap: the same values.
    x = arr((3, 70000), mx.float32, 7)
    names = compiled_names(softmax, x)
    assert len(names) == 1
    close(mx.compile(softmax)(x), softmax(x), mx.float32)
    close(mx.compile(log_softmax)(x.T.T), log_softmax(x), mx.float32)


def test_nan_and_inf_propagate():
    xn = np.array([[1.0, np.nan, 3.0], [np.inf, 1.0, 2.0],
                   [-np.inf, -np.inf, 0.0], [np.inf, -np.inf, 1.0]],
                  np.float32)
    x = mx.array(np.tile(xn, (1, 20)))
    for f in (softmax, log_softmax, lambda a: mx.max(a * 2, -1),
              lambda a: mx.min(a * 2, -1), lambda a: mx.sum(a * 2, -1)):
        close(mx.compile(f)(x), f(x), mx.float32)


def test_not_fused_where_it_must_not():
    x, y = arr((6, 40), mx.float32), arr((6, 40), mx.float32, 1)

    def shared(a, b):  # the product is an output too: written by the
        p = mx.exp(a) * b  # row kernel, not recomputed
        return p, mx.sum(p, -1)

    names = node_names(lambda a, b: mx.compile(shared)(a, b)[1], x, y)
    assert "Sum" not in names and "CompiledExpMultiplySum" in names
    for u, v in zip(mx.compile(shared)(x, y), shared(x, y)):
        close(u, v, mx.float32)
    x3 = arr((4, 6, 40), mx.float32)
    mid = lambda a: mx.sum(mx.exp(a) * 2, axis=1)  # a middle axis
    assert "Sum" in node_names(mx.compile(mid), x3)
    close(mx.compile(mid)(x3), mid(x3), mx.float32)
    xi = mx.arange(240).reshape(6, 40)
    ints = lambda a: mx.sum(a * 3, -1)  # integer sums: the eager kernel
    assert "Sum" in node_names(mx.compile(ints), xi)
    assert np.array_equal(mx.compile(ints)(xi), ints(xi))
    anyf = lambda a: mx.any(a > 3, -1)
    assert np.array_equal(mx.compile(anyf)(x), anyf(x))


def batch_norm(x, w):
    axes = tuple(range(x.ndim - 1))
    mean = mx.mean(x, axis=axes, keepdims=True)
    var = mx.var(x, axis=axes, keepdims=True)
    return (x - mean) * mx.rsqrt(var + 1e-5) * w


def test_column_reductions_fuse():
    # Reductions over leading axes (a batch's statistics, a bias gradient)
    # fuse with their neighbours into one column kernel.
    x, y = arr((64, 48), mx.float32), arr((64, 48), mx.float32, 1)
    w = arr((48,), mx.float32, 2)
    mean0 = lambda a: mx.mean(a, axis=0)
    sum_prod = lambda a, b: mx.sum(a * b * 2.0, axis=0)
    max_exp = lambda a: mx.max(mx.exp(a), axis=0, keepdims=True)
    assert compiled_names(mean0, x) == ["CompiledSumSqueezeBroadcastDivide"]
    assert compiled_names(sum_prod, x, y) == [
        "CompiledMultiplyBroadcastMultiplySum"]
    assert compiled_names(max_exp, x) == ["CompiledExpMax"]
    # Batch norm: the mean, the variance's sum and the normalized output in
    # one node (the variance's divisor max(N - ddof, 0) is its own group).
    x4 = arr((4, 5, 6, 48), mx.float32, 3)
    names = compiled_names(batch_norm, x4, w)
    assert len([n for n in names if n.count("Sum") == 2]) == 1, names
    # Small inputs: one chunk on the eager side too, so sums of exactly
    # rounded ops are the eager ones bit for bit; exp and rsqrt come from
    # the generated kernel's functors, not the eager vector routines.
    for f, args in [(mean0, (x,)), (sum_prod, (x, y)),
                    (lambda a: mx.var(a, axis=0), (x,))]:
        got, want = mx.compile(f)(*args), f(*args)
        assert got.shape == want.shape
        assert np.array_equal(np.array(got), np.array(want)), f
    for f, args in [(max_exp, (x,)), (batch_norm, (x4, w)),
                    (batch_norm, (x, w.reshape(1, 48))),
                    (lambda a: mx.std(a, axis=(0, 1)), (x4,))]:
        got, want = mx.compile(f)(*args), f(*args)
        assert got.shape == want.shape
        close(got, want, mx.float32)


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16, mx.float32,
                                   mx.float64])
def test_column_reductions_match_eager(dtype):
    for shape in [(3, 5), (300, 70), (1000, 130), (2, 3, 4, 129)]:
        x = arr(shape, dtype, 4)
        w = arr(shape[-1:], dtype, 5)
        close(mx.compile(batch_norm)(x, w), batch_norm(x, w), dtype, 4)
        var0 = lambda a: mx.var(a, axis=0)
        close(mx.compile(var0)(x), var0(x), dtype, 4)
        np.testing.assert_allclose(
            np.array(mx.compile(var0)(x).astype(mx.float64)),
            np.var(np.array(x.astype(mx.float64)), axis=0),
            rtol=TOL[dtype] * 8, atol=TOL[dtype] * 8)


def test_column_result_broadcast_back_to_the_full_shape():
    # The group's result has S's shape but no value of it depends on the
    # row (a per-column value broadcast back): every row is written (the
    # kernel once wrote only the first row's C values; the fuzzer found it
    # through grad of a batch centering).
    x = arr((3, 4), mx.float64)
    f = lambda a: mx.broadcast_to(mx.sum(-a, axis=0) / 3.0, a.shape) + 1.0
    np.testing.assert_array_equal(np.array(mx.compile(f)(x)), np.array(f(x)))
    y = arr((3, 4), mx.float64, 1)
    loss = lambda a: mx.sum((a - mx.mean(a * a, axis=0, keepdims=True)) * y)
    close(mx.compile(mx.grad(loss))(x), mx.grad(loss)(x), mx.float64)


def fused(f, *args):
    """f compiled and evaluated, asserting that its Compiled nodes ran
    their generated kernels (the fallback gives the same values)."""
    before = mx._compiled_fallbacks()
    out = mx.compile(f)(*args)
    mx.eval(out)
    assert mx._compiled_fallbacks() == before, "ran node by node"
    return out


def test_column_kernels_run_and_fold_in_order():
    xn = np.random.default_rng(0).standard_normal((40000, 64)).astype(
        np.float32)
    x = mx.array(xn)
    # A chain of reductions folds each column row after row (NumPy's
    # axis-0 order; eager Fluxion splits these rows over its threads).
    var = fused(lambda a: mx.sum(mx.square(a - mx.mean(a, axis=0)), axis=0),
                x)
    mean = np.sum(xn, axis=0) / np.float32(40000)
    assert np.array_equal(np.array(var),
                          np.sum(np.square(xn - mean), axis=0))
    # One reduction over few columns splits its rows as the eager kernel
    # does (chunks of whole rows, partials combined as a tree): the eager
    # sum bit for bit, whatever the thread count.
    f = lambda a: mx.sum(a * 2, axis=0)
    assert np.array_equal(np.array(fused(f, x)), np.array(f(x)))
    g = lambda a: mx.max(mx.abs(a), axis=0) * 3.0
    assert np.array_equal(np.array(fused(g, x)), np.array(g(x)))
    x3 = mx.array(xn.reshape(200, 200, 64))
    h = lambda a: mx.mean(a * a, axis=(0, 1))
    close(fused(h, x3), h(x3), mx.float32)
    for dt in (mx.float16, mx.bfloat16, mx.float64):
        xd = x.astype(dt)
        close(fused(lambda a: mx.mean(a, axis=0), xd), mx.mean(xd, axis=0),
              dt)
    # Wide rows: the columns are shared instead; batch norm is a chain.
    xw = mx.array(xn.reshape(2500, 1024))
    close(fused(f, xw), f(xw), mx.float32, 20)  # 2500-term sums
    w = arr((64,), mx.float32, 3)
    close(fused(batch_norm, x, w), batch_norm(x, w), mx.float32, 4)


def test_column_reductions_edge_cases():
    x = arr((50, 20), mx.float32)
    mean0 = mx.compile(lambda a: mx.mean(mx.exp(a), axis=0))
    # A transposed input: not row-contiguous, the nodes run one by one.
    xt = arr((20, 50), mx.float32, 1).T
    close(mean0(xt), mx.mean(mx.exp(xt), axis=0), mx.float32)
    # NaN and inf stay in their columns.
    xn = np.array(x)
    xn[3, 2], xn[7, 5], xn[9, 5] = np.nan, np.inf, -np.inf
    got = np.array(mean0(mx.array(xn)))
    assert np.isnan(got[2]) and np.isinf(got[5]) and np.isfinite(got[0])
    xn[7, 5] = 1.0
    got = np.array(mx.compile(lambda a: mx.max(a * 2, axis=0))(mx.array(xn)))
    assert np.isnan(got[2])
    # More columns than a block, and a ragged last block.
    xw = arr((9, 1000), mx.float32, 2)
    close(mean0(xw), mx.mean(mx.exp(xw), axis=0), mx.float32)
    sum0 = mx.compile(lambda a: mx.sum(a * 3, axis=0))
    assert np.array_equal(np.array(sum0(xw)), np.array(mx.sum(xw * 3, 0)))
    # Gradients through a compiled batch norm.
    w = arr((20,), mx.float32, 3)
    loss = lambda a: mx.sum(batch_norm(a, w) * mx.arange(20))
    close(mx.grad(mx.compile(loss))(x), mx.grad(loss)(x), mx.float32, 10)


def test_a_constant_made_inside_the_function():
    # A node without inputs (eye's creation) next to a row reduction: the
    # group search once read its missing first input (a segfault).
    x = arr((3, 4), mx.float32)
    f = lambda r: r * mx.expand_dims(mx.sign(mx.sum(r * mx.eye(3, 4), -1)),
                                     -1)
    close(mx.compile(f)(x), f(x), mx.float32)
    g = lambda r: mx.sum(r * mx.eye(3, 4), axis=0)  # a column group too
    close(mx.compile(g)(x), g(x), mx.float32)


def test_grad_vmap_and_shapeless():
    x = arr((5, 9), mx.float32)
    loss = lambda a: mx.sum(softmax(a * 2) * mx.arange(9))
    close(mx.grad(mx.compile(loss))(x), mx.grad(loss)(x), mx.float32)
    close(mx.compile(mx.grad(loss))(x), mx.grad(loss)(x), mx.float32)
    xb = arr((3, 5, 9), mx.float32, 1)
    close(mx.vmap(mx.compile(softmax))(xb), softmax(xb), mx.float32)
    close(mx.vmap(mx.compile(mse))(xb, xb * 0.3),
          mx.stack([mse(r, r * 0.3) for r in xb]), mx.float32)
    cf = mx.compile(softmax, shapeless=True)
    for n in (2, 7, 30):
        a = arr((n, n + 1), mx.float32, n)
        close(cf(a), softmax(a), mx.float32)


def test_missing_compiler_falls_back(tmp_path):
    code = (
        "import fluxion.core as mx, numpy as np\n"
        "def f(x):\n"
        "    e = mx.exp(x - mx.max(x, -1, keepdims=True))\n"
        "    return e / mx.sum(e, -1, keepdims=True)\n"
        "x = mx.arange(12, dtype=mx.float32).reshape(3, 4)\n"
        "assert np.allclose(mx.compile(f)(x), f(x), rtol=1e-6)\n"
        "assert np.allclose(mx.compile(lambda a: mx.sum(a * a))(x), 506)\n"
        "print('ok')\n")
    env = dict(os.environ, FLUXION_CXX="/nonexistent/c++",
               FLUXION_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_fused_kernels_are_built(tmp_path):
    # Each fused reduction has a generated library (the values above would
    # also match through the node-by-node fallback).
    code = (
        "import fluxion.core as mx\n"
        "x = mx.ones((4, 50))\n"
        "def sm(x):\n"
        "    e = mx.exp(x - mx.max(x, -1, keepdims=True))\n"
        "    return e / mx.sum(e, -1, keepdims=True)\n"
        "mx.eval(mx.compile(sm)(x))\n"
        "mx.eval(mx.compile(lambda a: mx.sum(mx.exp(a) * 2))(x))\n"
        "mx.eval(mx.compile(lambda a: mx.max(mx.abs(a) * 2, -1))(x))\n"
        "v = mx.ones((1 << 18,))\n"
        "mx.eval(mx.compile(lambda a: mx.mean(mx.square(a - 1)))(v))\n"
        "mx.eval(mx.compile(lambda a: mx.sum(mx.exp(a) * 2, axis=0))(x))\n"
        "def bn(x, w):\n"
        "    mu = mx.mean(x, axis=0, keepdims=True)\n"
        "    var = mx.mean(mx.square(x - mu), axis=0, keepdims=True)\n"
        "    return (x - mu) * mx.rsqrt(var + 1e-5) * w\n"
        "mx.eval(mx.compile(bn)(x, mx.ones((50,))))\n")
    env = dict(os.environ, FLUXION_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert len(list(tmp_path.rglob("*.so"))) == 6
