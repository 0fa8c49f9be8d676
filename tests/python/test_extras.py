"""Ops added by the MLX audit, against NumPy: searchsorted,
hadamard_transform, as_strided, view, contiguous, broadcast_shapes,
gather_mm, segmented_mm, block_masked_mm (values, gradients, vmap)."""

import numpy as np
import pytest
import fluxion.core as mx
from helpers import keep64


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32,
                                   np.int64, np.uint8, np.float16])
def test_searchsorted_1d(side, dtype):
    rng = np.random.default_rng(0)
    a = np.sort(rng.integers(0, 20, size=50)).astype(dtype)
    v = rng.integers(-2, 23, size=(4, 7)).astype(dtype)
    got = mx.searchsorted(keep64(a), keep64(v), side)
    np.testing.assert_array_equal(np.array(got), np.searchsorted(a, v, side))
    assert got.dtype == mx.uint32


def test_searchsorted_nan_sorter_and_vmap():
    a = np.array([0.0, 1.0, 1.0, np.nan])
    v = np.array([np.nan, 1.0, -np.inf, np.inf])
    for side in ["left", "right"]:
        np.testing.assert_array_equal(
            np.array(mx.searchsorted(keep64(a), keep64(v), side=side)),
            np.searchsorted(a, v, side=side))
    u = np.array([5.0, 1.0, 4.0, 2.0])
    order = np.argsort(u)
    np.testing.assert_array_equal(
        np.array(mx.searchsorted(keep64(u), keep64([3.0, 0.0, 6.0]),
                                 sorter=keep64(order))),
        np.searchsorted(u, [3.0, 0.0, 6.0], sorter=order))
    rng = np.random.default_rng(1)
    row = np.sort(rng.standard_normal(10))
    # vmap over the values, at any axis.
    vals = rng.standard_normal((4, 5))
    vm = mx.vmap(lambda x: mx.searchsorted(keep64(row), x), in_axes=1)(
        keep64(vals))
    np.testing.assert_array_equal(np.array(vm),
                                  np.searchsorted(row, vals.T))
    with pytest.raises(ValueError, match=r"\[searchsorted\] side must be"):
        mx.searchsorted(keep64(a), keep64(v), "up")
    # One sorted sequence (MLX, NumPy): N-d raises, and so does vmap over it.
    with pytest.raises(ValueError, match=r"must be 1-D; got shape \(3,10\)"):
        mx.searchsorted(keep64(np.sort(rng.standard_normal((3, 10)))),
                        keep64(vals[:3]))
    with pytest.raises(ValueError, match="Cannot vmap over the sorted array"):
        mx.vmap(lambda s: mx.searchsorted(s, mx.array([1.0])))(
            mx.zeros((3, 4)))


def sylvester(n):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.kron(np.array([[1, 1], [1, -1]]), h)
    return h


@pytest.mark.parametrize("n", [1, 4, 32, 256])
def test_hadamard_transform(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n))
    h = sylvester(n) / np.sqrt(n)
    got = mx.hadamard_transform(keep64(x))
    np.testing.assert_allclose(np.array(got), x @ h.T, rtol=1e-12,
                               atol=1e-12)
    got32 = mx.hadamard_transform(keep64(x.astype(np.float32)), scale=0.25)
    np.testing.assert_allclose(np.array(got32), x @ (h.T * np.sqrt(n) * 0.25),
                               rtol=1e-5, atol=1e-5)
    # Gradient of sum(w * H x) is H^T w.
    w = rng.standard_normal((3, n))
    g = mx.grad(lambda t: (mx.hadamard_transform(t) * keep64(w)).sum())(
        keep64(x))
    np.testing.assert_allclose(np.array(g), w @ h, rtol=1e-12, atol=1e-12)
    vm = mx.vmap(mx.hadamard_transform, in_axes=1)(keep64(x.T.copy()))
    np.testing.assert_allclose(np.array(vm), x @ h.T, rtol=1e-12, atol=1e-12)


def test_hadamard_errors():
    with pytest.raises(ValueError, match=r"it must be m \* 2\^k"):
        mx.hadamard_transform(mx.zeros((2, 6)))


def test_as_strided_against_numpy():
    x = np.arange(20, dtype=np.float32)
    win = np.lib.stride_tricks.as_strided(x[2:], shape=(5, 4),
                                          strides=(12, 4))
    got = mx.as_strided(keep64(x), (5, 4), (3, 1), 2)
    np.testing.assert_array_equal(np.array(got), win)
    np.testing.assert_array_equal(
        np.array(mx.as_strided(keep64(x).reshape(4, 5))), x.reshape(4, 5))
    g = mx.grad(lambda t: mx.as_strided(t, (5, 4), (3, 1), 2).sum())(
        keep64(x))
    counts = np.zeros(20)
    np.add.at(counts, (2 + np.arange(5)[:, None] * 3 + np.arange(4)).ravel(),
              1)
    np.testing.assert_array_equal(np.array(g), counts)
    with pytest.raises(ValueError, match=r"\[as_strided\] The view"):
        mx.as_strided(keep64(x), (5, 4), (4, 1), 2)


@pytest.mark.parametrize("src,dst", [(np.float32, np.uint32),
                                     (np.int32, np.uint8),
                                     (np.uint8, np.int16),
                                     (np.float64, np.int64),
                                     (np.float16, np.int16)])
def test_view_against_numpy(src, dst):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((4, 8)) * 50).astype(src)
    got = mx.view(keep64(x), getattr(mx, np.dtype(dst).name))
    np.testing.assert_array_equal(np.array(got), x.view(dst))
    # From a transposed (non-contiguous) array.
    xt = x.T
    got = mx.view(keep64(x).T, getattr(mx, np.dtype(dst).name))
    np.testing.assert_array_equal(np.array(got),
                                  np.ascontiguousarray(xt).view(dst))


def test_view_scalar_and_errors():
    np.testing.assert_array_equal(
        np.array(keep64([1.0, 2.0]).view(mx.int32)),
        np.array([1.0, 2.0], np.float32).view(np.int32))
    assert mx.view(1.0, mx.int32).item() == np.float32(1.0).view(np.int32)
    with pytest.raises(ValueError, match=r"\[view\] The last axis"):
        mx.view(mx.zeros((3,), mx.int8), mx.int16)


def test_contiguous_and_broadcast_shapes():
    x = mx.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(np.array(mx.contiguous(x.T)),
                                  np.arange(12).reshape(3, 4).T)
    np.testing.assert_array_equal(
        np.array(mx.contiguous(x.T, allow_col_major=True)),
        np.arange(12).reshape(3, 4).T)
    assert mx.broadcast_shapes((3, 1), (1, 4), (4,)) == \
        np.broadcast_shapes((3, 1), (1, 4), (4,))
    assert mx.broadcast_shapes((2, 3)) == (2, 3)
    with pytest.raises(ValueError, match=r"\[broadcast_shapes\]"):
        mx.broadcast_shapes((2,), (3,))


def test_gather_mm():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 3, 5))
    b = rng.standard_normal((2, 5, 6))
    li = np.array([[3, 0], [1, 1]])
    ri = np.array([1, 0])
    got = mx.gather_mm(keep64(a), keep64(b), keep64(li), keep64(ri))
    want = np.einsum("pqmk,pqkn->pqmn", a[li], b[np.broadcast_to(ri, li.shape)])
    np.testing.assert_allclose(np.array(got), want, rtol=1e-12)
    # Gradient against finite differences on a.
    def f(x):
        return (mx.gather_mm(x, keep64(b), keep64(li), keep64(ri))
                ** 2).sum()
    g = np.array(mx.grad(f)(keep64(a)))
    eps = 1e-6
    d = rng.standard_normal(a.shape)
    fd = (f(keep64(a + eps * d)).item() - f(keep64(a - eps * d)).item()) \
        / (2 * eps)
    assert abs(fd - (g * d).sum()) < 1e-5 * max(1, abs(fd))
    np.testing.assert_allclose(
        np.array(mx.gather_mm(keep64(a[:2]), keep64(b))), a[:2] @ b,
        rtol=1e-12)


def test_segmented_mm():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 8))
    b = rng.standard_normal((8, 2))
    seg = np.array([[0, 3], [3, 8], [2, 2]])
    got = mx.segmented_mm(keep64(a), keep64(b), keep64(seg))
    want = np.stack([a[:, s:e] @ b[s:e] for s, e in seg])
    np.testing.assert_allclose(np.array(got), want, rtol=1e-12, atol=1e-14)


def test_block_masked_mm():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 64, 96))
    b = rng.standard_normal((2, 96, 64))
    mo = rng.random((2, 2, 2)) > 0.3
    ml = rng.random((2, 2, 3)) > 0.3
    mr = rng.random((2, 3, 2)) > 0.3
    got = mx.block_masked_mm(keep64(a), keep64(b), 32, keep64(mo),
                             keep64(ml), keep64(mr))
    up = lambda m: np.repeat(np.repeat(m, 32, -2), 32, -1)
    want = ((a * up(ml)) @ (b * up(mr))) * up(mo)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"block sizes 32 and 64"):
        mx.block_masked_mm(keep64(a), keep64(b), 8)
