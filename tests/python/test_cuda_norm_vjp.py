"""The fused backward of mx.fast.layer_norm and rms_norm on the GPU
(backend/cuda/norm_vjp.cu; skipped, with the reason, where no GPU is
visible): value_and_grad of a loss, and mx.vjp with and without weight and
bias, against the CPU and against a float64 NumPy reference, over the
kernels' paths (lane groups, a warp per row, a block per row, the long-row
kernel, lengths off the 16-byte pack width) and the half types. The C++
suite (test_cuda_norm_vjp.cpp) covers more shapes and the edge cases."""
import numpy as np
import pytest

import fluxion.core as mx

from helpers import host, requires_gpu

pytestmark = requires_gpu

G = mx.gpu
C = mx.cpu
EPS = 1e-5
# The primitives keep eps as a float: the references add that value (the
# rms_norm gradient of a one-element row is proportional to eps).
EPS32 = float(np.float32(EPS))
# dx to a few ulps; dweight and dbias are sums over the rows.
TOL = {mx.float32: 5e-5, mx.float64: 1e-11, mx.float16: 4e-3,
       mx.bfloat16: 3e-2}


def np_grads(x, w, g, layer, has_w, has_b):
    """Closed-form gradients in float64: dx, [dw], [db]."""
    x, g = x.astype(np.float64), g.astype(np.float64)
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
    return out


def grads_on(stream, x, w, b, c, layer, has_w, has_b):
    def f(*p):
        ww = p[1] if has_w else None
        bb = p[-1] if has_b else None
        if layer:
            return mx.fast.layer_norm(p[0], ww, bb, EPS, stream=stream)
        return mx.fast.rms_norm(p[0], ww, EPS, stream=stream)

    p = [x] + ([w] if has_w else []) + ([b] if has_b else [])
    with mx.stream(stream):
        _, g = mx.vjp(f, p, [c])
        mx.eval(g)
    return [host(a) for a in g]


@pytest.mark.parametrize("dt", [mx.float32, mx.bfloat16, mx.float16,
                                mx.float64])
@pytest.mark.parametrize("d", [1, 12, 33, 100, 512, 1000, 1003, 4096, 8192,
                               8200, 20000])
@pytest.mark.parametrize("variant", [(True, True, True), (True, False, True),
                                     (True, False, False), (False, True, False),
                                     (False, False, False)],
                         ids=["ln_wb", "ln_b", "ln", "rms_w", "rms"])
def test_vjp_matches_cpu_and_numpy(dt, d, variant):
    rng = np.random.default_rng(d)
    rows = 3 if d > 4096 else 37
    x = mx.array(rng.standard_normal((rows, d)) + 0.5).astype(dt)
    w = mx.array(rng.standard_normal((d,))).astype(dt)
    b = mx.array(rng.standard_normal((d,))).astype(dt)
    c = mx.array(rng.standard_normal((rows, d))).astype(dt)
    gpu = grads_on(G, x, w, b, c, *variant)
    cpu = grads_on(C, x, w, b, c, *variant)
    ref = np_grads(host(x), host(w), host(c), *variant)
    tol = TOL[dt]
    for k, (g, cc, r) in enumerate(zip(gpu, cpu, ref)):
        scale = 1.0 if k == 0 else np.sqrt(rows)
        np.testing.assert_allclose(g, cc, rtol=tol, atol=tol * scale)
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("dt", [mx.float32, mx.bfloat16])
def test_value_and_grad_of_a_loss_matches_cpu(dt):
    """The training-step path: value_and_grad through layer_norm and
    rms_norm with weight and bias, many rows (blocks loop over rows)."""
    rng = np.random.default_rng(0)
    x = mx.array(rng.standard_normal((4000, 768))).astype(dt)
    w = mx.array(rng.standard_normal((768,))).astype(dt)
    b = mx.array(rng.standard_normal((768,))).astype(dt)
    t = mx.array(rng.standard_normal((4000, 768))).astype(dt)

    def run(s):
        def loss(x, w, b):
            y = mx.fast.layer_norm(x, w, b, EPS, stream=s)
            z = mx.fast.rms_norm(y, w, EPS, stream=s)
            # A sum: cotangents of order one, gradients well above the
            # tolerances.
            return mx.sum(mx.astype(z * t, mx.float32, stream=s))

        with mx.stream(s):
            v, g = mx.value_and_grad(loss, argnums=(0, 1, 2))(x, w, b)
            mx.eval(v, g)
        return [host(v)] + [host(a) for a in g]

    gpu, cpu = run(G), run(C)
    tol = TOL[dt]
    for k, (g, c) in enumerate(zip(gpu, cpu)):
        # The value and dweight/dbias are sums over many rows.
        scale = 4.0 if k == 1 else 4.0 * np.sqrt(4000)
        np.testing.assert_allclose(g, c, rtol=4 * tol, atol=tol * scale)


def test_transposed_and_broadcast_operands_match_cpu():
    rng = np.random.default_rng(1)
    base = mx.array(rng.standard_normal((1003, 6)).astype(np.float32))
    w = mx.array(rng.standard_normal((2006,)).astype(np.float32))[::2]
    for dt in (mx.float32, mx.bfloat16):
        xt = base.astype(dt).T  # strided rows
        ww = w.astype(dt)

        def grads(s):
            with mx.stream(s):
                # The cotangent of a sum: ones broadcast.
                g = mx.grad(lambda a, v: mx.sum(mx.fast.layer_norm(
                    a, v, None, EPS, stream=s)), argnums=(0, 1))(xt, ww)
                mx.eval(g)
            return [host(a) for a in g]

        for g, c in zip(grads(G), grads(C)):
            np.testing.assert_allclose(g, c, rtol=TOL[dt], atol=TOL[dt] * 3)
