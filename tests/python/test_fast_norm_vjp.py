"""The gradients of mx.fast.layer_norm and rms_norm, which their rules
compute with one fused backward node (NormVJP): against a float64 NumPy
reference of the closed forms and against the composed norm (mean,
subtract, rsqrt... written here) differentiated by mx.vjp; over dtypes,
row lengths, with and without weight and bias, strided and broadcast
operands, empty arrays; finite differences, second-order gradients, and
vmap of the gradients against a loop."""

import numpy as np
import pytest

import fluxion.core as mx

from helpers import to_np, keep64

RNG = np.random.default_rng(7)
EPS = 1e-5
# The primitives keep eps as a float: the references add that value (the
# rms_norm gradient of a one-element row is proportional to eps).
EPS32 = float(np.float32(EPS))


def randn(*shape, mean=0.0):
    return RNG.standard_normal(shape) + mean


# (layer, weight, bias)
VARIANTS = [(True, True, True), (True, True, False), (True, False, True),
            (True, False, False), (False, True, False), (False, False, False)]
VARIANT_IDS = ["ln_wb", "ln_w", "ln_b", "ln", "rms_w", "rms"]


def fused(layer, has_w, has_b):
    """The norm as a function of its primals (x, then w and b)."""
    def f(x, *p):
        w = p[0] if has_w else None
        b = p[-1] if has_b else None
        if layer:
            return mx.fast.layer_norm(x, w, b, EPS)
        return mx.fast.rms_norm(x, w, EPS)
    return f


def composed(layer, has_w, has_b):
    """The same norm from public ops (in the input dtype: call it with
    float64 arrays)."""
    def f(x, *p):
        xc = x - mx.mean(x, axis=-1, keepdims=True) if layer else x
        y = xc * mx.rsqrt(mx.mean(xc * xc, axis=-1, keepdims=True) + EPS32)
        if has_w:
            y = y * p[0]
        if has_b:
            y = y + p[-1]
        return y
    return f


def np_grads(x, w, g, layer, has_w, has_b):
    """Closed-form gradients in float64: dx, [dw], [db]."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    d = x.shape[-1]
    mu = x.mean(-1, keepdims=True) if layer else 0.0
    rstd = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + EPS32)
    xh = (x - mu) * rstd
    gw = g * w.astype(np.float64) if has_w else g
    inner = (gw * xh).mean(-1, keepdims=True)
    c = gw - gw.mean(-1, keepdims=True) if layer else gw
    out = [(c - xh * inner) * rstd]
    rows = tuple(range(x.ndim - 1))
    if has_w:
        out.append((g * xh).sum(rows))
    if has_b:
        out.append(g.sum(rows))
    assert d == x.shape[-1]
    return out


def primals(x, w, b, has_w, has_b):
    return [x] + ([w] if has_w else []) + ([b] if has_b else [])


def grad_all(f, p):
    """The gradients of f with respect to every array of p, as a list
    (mx.grad returns one array, not a tuple, for a single argnum)."""
    g = mx.grad(f, argnums=tuple(range(len(p))))(*p)
    return [g] if len(p) == 1 else list(g)


TOLS = {mx.float32: 3e-5, mx.float64: 1e-10, mx.float16: 4e-3,
        mx.bfloat16: 3e-2}


def check_grads(x, w, b, c, variant):
    """The fused rule's gradients at x's dtype against NumPy's closed forms
    and against the composed norm's vjp, both in float64 from the same
    rounded values."""
    layer, has_w, has_b = variant
    t = x.dtype
    p = primals(x, w, b, has_w, has_b)
    _, got = mx.vjp(fused(*variant), p, [c])
    p64 = [a.astype(mx.float64) for a in p]
    _, want = mx.vjp(composed(*variant), p64, [c.astype(mx.float64)])
    ref = np_grads(to_np(x), to_np(w), to_np(c), layer, has_w, has_b)
    assert len(got) == len(want) == len(ref)
    for g, wv, r in zip(got, want, ref):
        assert g.dtype == t and g.shape == wv.shape
        gv = to_np(g).astype(np.float64)
        np.testing.assert_allclose(gv, np.array(wv), rtol=TOLS[t],
                                   atol=TOLS[t])
        np.testing.assert_allclose(gv, r, rtol=TOLS[t], atol=TOLS[t])


@pytest.mark.parametrize("t", [mx.float32, mx.float64, mx.float16,
                               mx.bfloat16])
@pytest.mark.parametrize("d", [1, 3, 33, 1000, 4096, 20000])
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_grads_match_composed(t, d, variant):
    rows = 3 if d >= 4096 else 6
    x = keep64(randn(rows, d, mean=0.5)).astype(t)
    w, b = keep64(randn(d)).astype(t), keep64(randn(d)).astype(t)
    c = keep64(randn(rows, d)).astype(t)
    check_grads(x, w, b, c, variant)


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_strided_broadcast_and_leading_dims(variant):
    for t in (mx.float32, mx.bfloat16):
        # x transposed (strided last axis), a reversed weight, a stride-0
        # bias, the cotangent of sum(norm(x)) (ones, broadcast), 4-d rows.
        x = keep64(randn(33, 2, 5)).astype(t).transpose(2, 1, 0)
        w = keep64(randn(33)).astype(t)[::-1]
        b = mx.broadcast_to(mx.array(0.5, dtype=t), (33,))
        ones = mx.broadcast_to(mx.array(1.0, dtype=t), x.shape)
        check_grads(x, w, b, ones, variant)
        c = keep64(randn(5, 2, 33)).astype(t)
        check_grads(x, w, b, c, variant)
        x4 = keep64(randn(2, 3, 4, 9)).astype(t)
        c4 = keep64(randn(2, 3, 4, 9)).astype(t)
        w9, b9 = keep64(randn(9)).astype(t), keep64(randn(9)).astype(t)
        check_grads(x4, w9, b9, c4, variant)
        # Rows starting at odd elements (a slice).
        xs = keep64(randn(6, 40)).astype(t)[:, 1:38]
        cs = keep64(randn(6, 40)).astype(t)[:, 3:]
        ws = keep64(randn(74)).astype(t)[::2]
        check_grads(xs, ws, ws, cs, variant)


@pytest.mark.parametrize("shape", [(0, 8), (4, 0), (2, 0, 3)])
def test_empty_arrays(shape):
    d = shape[-1]
    x, c = mx.zeros(shape), mx.zeros(shape)
    f = fused(True, True, True)
    _, (dx, dw, db) = mx.vjp(f, [x, mx.ones((d,)), mx.zeros((d,))], [c])
    assert dx.shape == shape and dw.shape == (d,) and db.shape == (d,)
    np.testing.assert_array_equal(np.array(dw), np.zeros(d))
    np.testing.assert_array_equal(np.array(db), np.zeros(d))
    _, (rx,) = mx.vjp(fused(False, False, False), [x], [c])
    assert rx.shape == shape


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_finite_differences_float64(variant):
    layer, has_w, has_b = variant
    x = keep64(randn(3, 7, mean=0.3))
    w, b = keep64(randn(7)), keep64(randn(7))
    c = keep64(randn(3, 7))
    p = primals(x, w, b, has_w, has_b)
    f = fused(*variant)

    def loss(*a):
        return mx.sum(f(*a) * c)

    grads = grad_all(loss, p)
    h = 1e-6
    for i, (a, g) in enumerate(zip(p, grads)):
        v = keep64(randn(*a.shape))
        plus = list(p)
        minus = list(p)
        plus[i] = a + h * v
        minus[i] = a - h * v
        fd = (loss(*plus).item() - loss(*minus).item()) / (2 * h)
        assert abs(fd - mx.sum(g * v).item()) < 1e-6 * max(1.0, abs(fd))


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_second_order_matches_composed(variant):
    """grad of grad and jvp of vjp go through NormVJP's own rules."""
    layer, has_w, has_b = variant
    x = keep64(randn(4, 10, mean=0.2))
    w, b = keep64(randn(10)), keep64(randn(10))
    c, u = keep64(randn(4, 10)), keep64(randn(4, 10))
    p = primals(x, w, b, has_w, has_b)

    def outer(f):
        def h(*a):
            _, g = mx.vjp(f, list(a), [c])
            return mx.sum(g[0] * u)
        return h

    got = grad_all(outer(fused(*variant)), p)
    want = grad_all(outer(composed(*variant)), p)
    for g, wv in zip(got, want):
        np.testing.assert_allclose(np.array(g), np.array(wv), rtol=1e-9,
                                   atol=1e-9)

    def vjp_of(f):
        return lambda *a: mx.vjp(f, list(a), [c])[1]

    tangents = [u] + [mx.ones_like(a) for a in p[1:]]
    _, jg = mx.jvp(vjp_of(fused(*variant)), p, tangents)
    _, jw = mx.jvp(vjp_of(composed(*variant)), p, tangents)
    for g, wv in zip(jg, jw):
        np.testing.assert_allclose(np.array(g), np.array(wv), rtol=1e-9,
                                   atol=1e-9)


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_vmap_of_grad_matches_loop(variant):
    """Per-example gradients: vmap over a batch of x (and cotangents), and
    over batched weights too."""
    layer, has_w, has_b = variant
    xs, cs = keep64(randn(5, 3, 8)), keep64(randn(5, 3, 8))
    ws, bs = keep64(randn(5, 8)), keep64(randn(5, 8))
    f = fused(*variant)

    def grads(x, w, b, c):
        return mx.vjp(f, primals(x, w, b, has_w, has_b), [c])[1]

    for in_axes in [(0, None, None, 0), (0, 0, 0, 0), (None, 0, 0, 0),
                    (1, None, 0, 1)]:
        args = [xs, ws, bs, cs]
        args = [a if ax is None else mx.moveaxis(a, 0, ax)
                for a, ax in zip(args, in_axes)]
        args = [a[0] if ax is None else a for a, ax in zip(args, in_axes)]
        got = mx.vmap(grads, in_axes=in_axes)(*args)
        for i in range(5):
            one = [a if ax is None else mx.take(a, i, axis=ax)
                   for a, ax in zip(args, in_axes)]
            want = grads(*one)
            for g, wv in zip(got, want):
                np.testing.assert_allclose(np.array(g[i]), np.array(wv),
                                           rtol=1e-10, atol=1e-10)


def test_value_and_grad_of_a_loss():
    """A training step's use: value_and_grad of a loss through nn layers'
    fast norms, against the composed norms."""
    x = keep64(randn(16, 64))
    w, b = keep64(randn(64)), keep64(randn(64))

    def loss(f, g):
        def run(x, w, b):
            y = f(x, w, b)
            return mx.mean(g(y, w) ** 2)
        return run

    ln_f = fused(True, True, True)
    ln_c = composed(True, True, True)
    rms_f = fused(False, True, False)
    rms_c = composed(False, True, False)
    vg = mx.value_and_grad(loss(ln_f, rms_f), argnums=(0, 1, 2))
    vc = mx.value_and_grad(loss(ln_c, rms_c), argnums=(0, 1, 2))
    (v1, g1), (v2, g2) = vg(x, w, b), vc(x, w, b)
    np.testing.assert_allclose(v1.item(), v2.item(), rtol=1e-12)
    for a, e in zip(g1, g2):
        np.testing.assert_allclose(np.array(a), np.array(e), rtol=1e-9,
                                   atol=1e-9)
