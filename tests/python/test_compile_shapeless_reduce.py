"""mx.compile(..., shapeless=True) fusing reductions with their neighbours
on the CPU (issue 30 item 2): a group is formed from the traced shapes,
and its one generated kernel serves every shape the trace is replayed
with, taking all sizes at run time (no retrace, the same fused node); a
replay whose shapes break an assumption of the group runs its nodes one by
one. Values against eager for softmax, log_softmax, logsumexp, layer and
RMS norms, cross-entropy, mse and column reductions at more and fewer
rows, longer and shorter rows, rows of one element, empty arrays, four
dtypes, NaN and inf, under grad and vmap."""

import numpy as np
import pytest

import fluxion.core as mx
from compile_support import arr, close, kernels_ran_fixture, node_names


# Tests whose replays break a group's assumptions on purpose: their
# Compiled nodes run node by node there. Every other test must run the
# generated kernels on every replay.
kernels_ran = kernels_ran_fixture({"test_broken_assumptions_fall_back"})


def softmax(x):
    e = mx.exp(x - mx.max(x, -1, keepdims=True))
    return e / mx.sum(e, -1, keepdims=True)


def log_softmax(x):
    s = x - mx.max(x, -1, keepdims=True)
    return s - mx.log(mx.sum(mx.exp(s), -1, keepdims=True))


def logsumexp(x):
    return mx.logsumexp(x, -1)


def layer_norm(x, w, b):
    mu = mx.mean(x, -1, keepdims=True)
    return (x - mu) * mx.rsqrt(mx.var(x, -1, keepdims=True) + 1e-5) * w + b


def rms_norm(x, w):
    return x * mx.rsqrt(mx.mean(mx.square(x), -1, keepdims=True) + 1e-5) * w


def cross_entropy(x, t):
    picked = mx.take_along_axis(x, t[:, None], -1)[:, 0]
    return mx.mean(mx.logsumexp(x, -1) - picked)


def mse(x, y):
    return mx.mean(mx.square(x - y))


def bias_grad(x, w):  # a column reduction
    return mx.sum(x * w, 0)


def batch_stats(x):
    return mx.mean(x, 0), mx.var(x, 0)


def batch_norm(x, w):
    axes = tuple(range(x.ndim - 1))
    mean = mx.mean(x, axis=axes, keepdims=True)
    var = mx.var(x, axis=axes, keepdims=True)
    return (x - mean) * mx.rsqrt(var + 1e-5) * w


def shapeless(f):
    """f compiled shapeless, and the list its traces append to."""
    traces = []

    def traced(*args):
        traces.append(1)
        return f(*args)

    return mx.compile(traced, shapeless=True), traces


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def graph(cf, *args):
    """The primitive names of the replayed graph of cf(*args) (inputs
    evaluated first, so only the compiled function's nodes show)."""
    mx.eval(*args)
    return node_names(*as_tuple(cf(*args)))


def row_args(f, shape, dtype=mx.float32, seed=0):
    """Arguments of the row functions for rows of `shape`."""
    x = arr(shape, dtype, seed)
    if f is cross_entropy:
        rng = np.random.default_rng(seed)
        hi = max(shape[-1], 1)
        return x, mx.array(rng.integers(0, hi, shape[:-1]).astype(np.int32))
    if f in (layer_norm, rms_norm):
        w = arr(shape[-1:], dtype, seed + 1)
        return (x, w, arr(shape[-1:], dtype, seed + 2))[:3 if f is layer_norm
                                                          else 2]
    if f is mse:
        return x, arr(shape, dtype, seed + 1)
    return (x,)


# Each function's graph once compiled shapeless: the same at every shape
# it is replayed with. (BroadcastAxes nodes, which a shapeless trace puts
# where the ops broadcast, print as Broadcast.)
FUSED = {
    softmax: ["CompiledMaxBroadcastBroadcastSubtractExpSumBroadcastBroadcast"
              "Divide"],
    log_softmax: ["CompiledMaxBroadcastBroadcastSubtractExpSumLogBroadcast"
                  "BroadcastSubtract"],
    logsumexp: ["CompiledMaxStopGradientIsInfBroadcastBroadcastBroadcast"
                "SelectBroadcastBroadcastSubtractExpSumLogAdd", "Squeeze"],
    # mean's and var's divisors are counted on each call (NumberOfElements,
    # var's max(n - ddof, 0) a small group of its own); all of the row's
    # work is one node.
    layer_norm: ["NumberOfElements", "CompiledSubtractMaximum",
                 "CompiledSumBroadcastBroadcastDivideBroadcastBroadcast"
                 "SubtractSquareSumBroadcastBroadcastDivideBroadcastBroadcast"
                 "AddRsqrtBroadcastBroadcastMultiplyBroadcastBroadcast"
                 "MultiplyBroadcastBroadcastAdd"],
    rms_norm: ["NumberOfElements",
               "CompiledSquareSumBroadcastBroadcastDivideBroadcastBroadcast"
               "AddRsqrtBroadcastBroadcastMultiplyBroadcastBroadcastMultiply"],
    # The loss per row joins the logits' row node; its mean is a second.
    cross_entropy: ["ExpandDims",
                    "CompiledMaxStopGradientIsInfBroadcastBroadcastBroadcast"
                    "SelectBroadcastBroadcastSubtractExpSumLogAddSqueeze"
                    "GatherAxisSqueezeSubtract", "NumberOfElements",
                    "CompiledSumSqueezeDivide"],
    # A total fuses with what feeds it (its squeeze and divide stay out).
    mse: ["CompiledSubtractSquareSum", "Squeeze", "NumberOfElements",
          "Divide"],
}

ROW_SHAPES = [(20, 33), (3, 33), (8, 5), (8, 100), (8, 1), (1, 33), (0, 33),
              (2, 5000), (2, 70000)]


@pytest.mark.parametrize("f", list(FUSED), ids=lambda f: f.__name__)
def test_rows_fuse_once_for_every_shape(f):
    cf, traces = shapeless(f)
    assert graph(cf, *row_args(f, (8, 33))) == FUSED[f]
    for shape in ROW_SHAPES[:7]:
        assert graph(cf, *row_args(f, shape, seed=1)) == FUSED[f], shape
    assert len(traces) == 1


def test_columns_fuse_once_for_every_shape():
    cf, traces = shapeless(bias_grad)
    x, w = arr((64, 48)), arr((48,), seed=1)
    assert graph(cf, x, w) == ["CompiledBroadcastBroadcastMultiplySum",
                               "Squeeze"]
    # Batch statistics: the mean's node, and the variance's (its centering
    # on the shared sum, the squares and their sum).
    sf, strace = shapeless(batch_stats)
    assert graph(sf, x) == [
        "NumberOfElements", "CompiledSumSqueezeBroadcastBroadcastDivide",
        "CompiledSubtractMaximum",
        "CompiledBroadcastBroadcastDivideBroadcastBroadcastSubtractSquareSum"
        "SqueezeBroadcastBroadcastDivide"]
    bf, btrace = shapeless(batch_norm)
    x4 = arr((4, 5, 6, 48))
    names = graph(bf, x4, w)
    assert len([n for n in names if n.count("Sum") == 2]) == 1, names
    for shape in [(10, 48), (64, 7), (1, 48), (0, 48), (300, 130)]:
        x, w = arr(shape, seed=2), arr(shape[-1:], seed=3)
        assert graph(cf, x, w)[0] == "CompiledBroadcastBroadcastMultiplySum"
        assert len(graph(sf, x)) == 4
    for shape in [(2, 3, 4, 48), (8, 7, 7, 16)]:
        x4, w = arr(shape, seed=4), arr(shape[-1:], seed=5)
        assert graph(bf, x4, w) == names
    assert len(traces) == len(strace) == len(btrace) == 1


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16,
                                   mx.float64], ids=str)
@pytest.mark.parametrize("f", list(FUSED), ids=lambda f: f.__name__)
def test_row_replays_equal_eager(f, dtype):
    cf, traces = shapeless(f)
    close(cf(*row_args(f, (8, 33), dtype)), f(*row_args(f, (8, 33), dtype)),
          dtype, 4)
    uses_max = f in (softmax, log_softmax, logsumexp, cross_entropy)
    for i, shape in enumerate(ROW_SHAPES + [(3, 1, 7)]):
        if len(shape) == 3 and f is cross_entropy:
            continue  # its targets are one per row of a matrix
        args = row_args(f, shape, dtype, seed=i)
        got = as_tuple(cf(*args))
        want = as_tuple(f(*args))
        for g, w in zip(got, want):
            # Sums of 70000 terms round differently from eager's where a
            # fused prologue is not rounded as eager rounds it.
            close(g, w, dtype, 40 if shape[-1] > 5000 else 4)
    # Empty rows: eager's max refuses them, a replay's kernel gives the
    # reduction's identity (as the unfused replay does).
    for shape in [(8, 0), (0, 0)]:
        args = row_args(f, shape, dtype)
        if f is cross_entropy and shape[0]:
            continue  # no target in an empty row: see below
        if not uses_max:
            for g, w in zip(as_tuple(cf(*args)), as_tuple(f(*args))):
                close(g, w, dtype)
            continue
        out = np.array(cf(*args).astype(mx.float32))
        if f is logsumexp:
            assert out.shape == shape[:1] and np.all(out == -np.inf)
        elif f is cross_entropy:
            assert np.isnan(out)  # the mean of no rows
        else:
            assert out.shape == shape
    # One trace per rank (the 3-D rows retrace; cross-entropy has none).
    assert len(traces) == (1 if f is cross_entropy else 2)


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16,
                                   mx.float64], ids=str)
def test_column_replays_equal_eager(dtype):
    fns = [bias_grad, batch_stats, batch_norm]
    compiled = [shapeless(f) for f in fns]
    for shape in [(64, 48), (10, 48), (64, 7), (1, 48), (2, 1), (0, 48),
                  (5, 0), (300, 130), (1000, 3)]:
        x, w = arr(shape, dtype, 1), arr(shape[-1:], dtype, 2)
        for f, (cf, _) in zip(fns, compiled):
            args = (x,) if f is batch_stats else (x, w)
            for g, want in zip(as_tuple(cf(*args)), as_tuple(f(*args))):
                close(g, want, dtype, 8)
    for cf, traces in compiled:
        assert len(traces) == 1
    # NHWC batch norm, its statistics over three axes.
    bf, traces = shapeless(batch_norm)
    for shape in [(4, 5, 6, 48), (2, 3, 4, 129), (1, 1, 1, 8), (3, 2, 0, 5)]:
        x, w = arr(shape, dtype, 3), arr(shape[-1:], dtype, 4)
        close(bf(x, w), batch_norm(x, w), dtype, 8)
    assert len(traces) == 1


def test_one_dimensional_rows():
    # A 1-D input is one row (its total's divide fuses too), at any length.
    cf, traces = shapeless(mse)
    for n in (100, 5, 1, 0, 70001):
        x, y = arr((n,), seed=n), arr((n,), seed=n + 1)
        close(cf(x, y), mse(x, y), mx.float32, 4)
    sf, straces = shapeless(softmax)
    for n in (9, 1, 40000):
        x = arr((n,), seed=n)
        close(sf(x), softmax(x), mx.float32)
    assert len(traces) == len(straces) == 1


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16,
                                   mx.float64], ids=str)
def test_nan_and_inf_propagate(dtype):
    rows = np.array([[1.0, np.nan, 3.0], [np.inf, 1.0, 2.0],
                     [-np.inf, -np.inf, 0.0], [np.inf, -np.inf, 1.0],
                     [-np.inf, -np.inf, -np.inf]], np.float32)
    fns = [softmax, log_softmax, logsumexp, lambda a: mx.sum(a * 2, -1),
           lambda a: mx.max(a * 2, -1), lambda a: mx.min(a * 2, -1),
           lambda a: mx.sum(mx.exp(a) * 2, 0), lambda a: mse(a, a * 0.5)]
    compiled = [shapeless(f) for f in fns]
    for cf, _ in compiled:
        cf(arr((6, 9), dtype))  # traced without NaN or inf, at another shape
    for reps in (1, 7):
        x = mx.array(np.tile(rows, (1, reps))).astype(dtype)
        for f, (cf, traces) in zip(fns, compiled):
            close(cf(x), f(x), dtype)
            assert len(traces) == 1


def test_grad_and_vmap_of_shapeless_softmax():
    cf, traces = shapeless(softmax)
    for shape in [(5, 9), (3, 40), (7, 1), (1, 300)]:
        x = arr(shape, seed=shape[0])
        w = arr(shape, seed=1)
        loss = lambda a, f: mx.sum(f(a) * w)
        close(mx.grad(lambda a: loss(a, cf))(x),
              mx.grad(lambda a: loss(a, softmax))(x), mx.float32)
        xb = arr((3,) + shape, seed=2)
        close(mx.vmap(cf)(xb), softmax(xb), mx.float32)
        close(mx.vmap(cf, in_axes=1, out_axes=1)(xb.swapaxes(0, 1)),
              softmax(xb).swapaxes(0, 1), mx.float32)
    # And shapeless compile of the gradient.
    gf, gtraces = shapeless(mx.grad(lambda a: mx.sum(softmax(a) * a)))
    for shape in [(4, 6), (9, 17)]:
        x = arr(shape, seed=3)
        close(gf(x), mx.grad(lambda a: mx.sum(softmax(a) * a))(x),
              mx.float32)
    assert len(gtraces) == 1


def test_broken_assumptions_fall_back():
    # Replays whose shapes break what the group was formed on: the node
    # runs its nodes one by one (mx._compiled_fallbacks counts it), with
    # eager's values, and the next replay that fits runs the kernel again.
    def runs(cf, f, *args):
        before = mx._compiled_fallbacks()
        close(cf(*args), f(*args), mx.float32)
        return mx._compiled_fallbacks() - before

    # A per-row input (traced (N, 1)) that now varies along the row.
    shifted = lambda a, b: softmax(a - b)
    cf, traces = shapeless(shifted)
    assert runs(cf, shifted, arr((4, 8)), arr((4, 1), seed=1)) == 0
    assert len([n for n in graph(cf, arr((4, 8)), arr((4, 1)))
                if n.startswith("Compiled")]) == 1
    assert runs(cf, shifted, arr((5, 6)), arr((5, 6), seed=2)) > 0
    assert runs(cf, shifted, arr((5, 6)), arr((5, 1), seed=2)) == 0
    # A per-row max squeezed (keepdims=False) and broadcast back: traced
    # with rows of one row each (its last axis 1), replayed where it would
    # broadcast along the row's own axis.
    g = lambda a: a - mx.max(a, -1)
    gf, gtraces = shapeless(g)
    assert runs(gf, g, arr((1, 1, 6))) == 0
    assert "Max" not in graph(gf, arr((1, 1, 6)))
    assert runs(gf, g, arr((1, 6, 6), seed=3)) > 0
    assert runs(gf, g, arr((2, 1, 9), seed=4)) > 0  # (2, 2, 9) now
    assert runs(gf, g, arr((1, 1, 9), seed=4)) == 0
    # A column group's one-element input replayed with one per column.
    h = lambda a, s: mx.sum(a * s, 0)
    hf, htraces = shapeless(h)
    assert runs(hf, h, arr((6, 5)), arr((1, 1), seed=5)) == 0
    assert runs(hf, h, arr((6, 5)), arr((1, 5), seed=5)) > 0
    assert runs(hf, h, arr((9, 4)), arr((1, 1), seed=6)) == 0
    assert len(traces) == len(gtraces) == len(htraces) == 1
    # Not a shape's break but an index's: a target out of its row (every
    # one, in rows of no element) is reported by the kernel, and the nodes
    # run one by one raise eager's error.
    cf, traces = shapeless(cross_entropy)
    cf(*row_args(cross_entropy, (8, 33)))
    for x, t in ((arr((4, 7)), [0, 1, 7, 0]), (arr((4, 0)), [0, 0, 0, 0])):
        with pytest.raises(IndexError, match="out of bounds"):
            mx.eval(cf(x, mx.array(t)))
    assert len(traces) == 1
