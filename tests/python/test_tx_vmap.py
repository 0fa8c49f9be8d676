"""vmap behaviours of issue 11: pad values, broadcasting under a shapeless
compile, and memory."""

import gc

import numpy as np
import pytest

import fluxion.core as mx


def test_pad_with_batched_constant_values_raises():
    x = mx.ones((3, 2))
    v = mx.arange(3.0)
    f = lambda x, v: mx.pad(x, 1, constant_values=v)
    with pytest.raises(ValueError, match="pad"):
        mx.vmap(f)(x, v)


def test_pad_with_unbatched_constant_values():
    x = mx.arange(6.0).reshape(3, 2)
    v = mx.array(-1.0)
    out = mx.vmap(lambda x, v: mx.pad(x, (1, 2), constant_values=v), in_axes=(0, None))(x, v)
    ref = np.stack([np.pad(np.array(r), (1, 2), constant_values=-1.0) for r in np.array(x)])
    np.testing.assert_allclose(np.array(out), ref)
    # Batched along another axis, the value a Python scalar.
    out = mx.vmap(lambda x: mx.pad(x, 1, constant_values=7.0), in_axes=1)(x)
    ref = np.stack([np.pad(np.array(x)[:, j], 1, constant_values=7.0) for j in range(2)])
    np.testing.assert_allclose(np.array(out), ref)


def test_broadcasting_inside_vmap_under_shapeless_compile():
    def f(x, y):
        return x * y + mx.exp(y)

    g = mx.compile(mx.vmap(f, in_axes=(0, None)), shapeless=True)
    h = mx.compile(mx.vmap(lambda x, y: x + y), shapeless=True)
    for b in (2, 5, 3):
        x = mx.array(np.random.default_rng(b).normal(size=(b, 4)).astype(np.float32))
        y = mx.array(np.random.default_rng(b + 1).normal(size=(1,)).astype(np.float32))
        ref = np.stack([np.array(f(x[i], y)) for i in range(b)])
        out = g(x, y)
        assert out.shape == (b, 4)
        np.testing.assert_allclose(np.array(out), ref, rtol=1e-5)
        col = mx.ones((b, 1))
        out = h(x, col)
        assert out.shape == (b, 4)
        np.testing.assert_allclose(np.array(out), np.array(x) + 1, rtol=1e-6)


def test_repeated_vmap_does_not_leak():
    def f(x, w):
        return mx.tanh(x @ w).sum(-1)

    w = mx.arange(64.0).reshape(8, 8) / 64
    x = mx.arange(8.0 * 100).reshape(100, 8)
    mx.eval(w, x)
    for _ in range(3):
        mx.eval(mx.vmap(f, in_axes=(0, None))(x, w))
    gc.collect()
    mx.synchronize()
    start = mx.get_active_memory()
    for _ in range(200):
        out = mx.vmap(f, in_axes=(0, None))(x, w)
        mx.eval(out)
        del out
        mx.eval(mx.vmap(mx.grad(lambda x: (x * x).sum()))(x))
    gc.collect()
    mx.synchronize()
    assert mx.get_active_memory() <= start
