"""sort, argsort, partition, argpartition, topk and the cumulative scans
against NumPy, with their errors and gradients."""

import numpy as np
import pytest

import fluxion.core as mx
from helpers import assert_close, from_np, rand, to_np

SORT_DTYPES = [mx.float32, mx.float64, mx.float16, mx.bfloat16, mx.int32,
               mx.uint8, mx.int64, mx.int8]


def sort_input(dtype, shape=(3, 4, 7), seed=0):
    # A narrow integer range makes ties, which argsort must keep stable.
    lo, hi = (0, 3) if dtype == mx.uint8 else (-3, 3)
    return rand(shape, dtype, lo, hi, seed=seed)


@pytest.mark.parametrize("dtype", SORT_DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2, -1, None])
def test_sort_argsort(dtype, axis):
    vals = sort_input(dtype)
    x = from_np(vals, dtype)
    if axis is None:
        out, idx = mx.sort(x, axis=None), mx.argsort(x, axis=None)
        assert out.shape == (vals.size,)
    else:
        out, idx = mx.sort(x, axis=axis), mx.argsort(x, axis)
    assert idx.dtype == mx.uint32
    assert_close(out, np.sort(vals, axis=axis))
    np.testing.assert_array_equal(
        to_np(idx), np.argsort(vals, axis=axis, kind="stable"))


def test_sort_defaults_and_views():
    vals = sort_input(mx.float32, (5, 6), seed=1)
    x = mx.array(vals)
    assert_close(mx.sort(x), np.sort(vals, axis=-1))
    # Transposed and sliced inputs.
    xt = mx.transpose(x)
    assert_close(mx.sort(xt, 0), np.sort(vals.T, axis=0))
    np.testing.assert_array_equal(
        to_np(mx.argsort(xt)), np.argsort(vals.T, axis=-1, kind="stable"))
    xs = x[::2, 1::2]
    assert_close(mx.sort(xs, axis=0), np.sort(vals[::2, 1::2], axis=0))
    # Broadcast (stride 0) input.
    b = mx.broadcast_to(mx.array(vals[0]), (3, 6))
    assert_close(mx.sort(b), np.sort(np.broadcast_to(vals[0], (3, 6))))


def test_sort_nan_last():
    vals = np.array([3.0, np.nan, -1.0, 2.0], np.float32)
    np.testing.assert_array_equal(to_np(mx.sort(mx.array(vals))),
                                  np.sort(vals))


def check_partition(vals, out, kth, axis):
    """NumPy's partition property along `axis` for each lane."""
    v = np.moveaxis(vals, axis, -1).reshape(-1, vals.shape[axis])
    o = np.moveaxis(out, axis, -1).reshape(-1, vals.shape[axis])
    k = kth % vals.shape[axis]
    for row, got in zip(v, o):
        np.testing.assert_array_equal(np.sort(got), np.sort(row))
        assert got[k] == np.sort(row)[k]
        assert np.all(got[:k] <= got[k]) and np.all(got[k + 1:] >= got[k])


@pytest.mark.parametrize("dtype", [mx.float32, mx.float64, mx.int32,
                                   mx.uint8, mx.float16])
@pytest.mark.parametrize("kth,axis", [(0, -1), (3, -1), (-1, -1), (6, 2),
                                      (1, 0), (2, 1)])
def test_partition_argpartition(dtype, kth, axis):
    vals = sort_input(dtype, seed=2)
    x = from_np(vals, dtype)
    if kth >= vals.shape[axis]:
        kth = vals.shape[axis] - 1
    out = mx.partition(x, kth, axis=axis)
    check_partition(to_np(x), to_np(out), kth, axis)
    idx = mx.argpartition(x, kth=kth, axis=axis)
    assert idx.dtype == mx.uint32
    idx_np = to_np(idx).astype(np.int64)
    # The indices are a permutation of each lane and pick a partition.
    np.testing.assert_array_equal(
        np.sort(idx_np, axis=axis),
        np.broadcast_to(np.expand_dims(np.arange(vals.shape[axis]),
                                       [a for a in range(3) if a != axis % 3]),
                        vals.shape))
    check_partition(to_np(x), np.take_along_axis(to_np(x), idx_np, axis),
                    kth, axis)


def test_partition_flattened():
    vals = sort_input(mx.float32, (4, 5), seed=3)
    x = mx.array(vals)
    out = mx.partition(x, 7, axis=None)
    assert out.shape == (20,)
    check_partition(vals.reshape(-1), to_np(out), 7, 0)
    idx = to_np(mx.argpartition(x, -3, axis=None)).astype(np.int64)
    check_partition(vals.reshape(-1), vals.reshape(-1)[idx], -3, 0)


@pytest.mark.parametrize("dtype", [mx.float32, mx.float64, mx.int32,
                                   mx.int64])
@pytest.mark.parametrize("k,axis", [(1, -1), (3, -1), (7, 2), (2, 0),
                                    (4, 1), (5, None)])
def test_topk(dtype, k, axis):
    vals = rand((3, 4, 7), dtype, -50, 50, seed=4)
    x = from_np(vals, dtype)
    out = mx.topk(x, k, axis=axis)
    flat = vals.reshape(-1) if axis is None else vals
    ax = 0 if axis is None else axis
    desc = np.flip(np.sort(flat, axis=ax), axis=ax)
    expected = np.take(desc, np.arange(k), axis=ax)
    assert_close(out, expected)


def test_topk_transposed():
    vals = rand((6, 5), mx.float32, seed=5)
    out = mx.topk(mx.transpose(mx.array(vals)), k=2)
    expected = np.flip(np.sort(vals.T, axis=-1), axis=-1)[:, :2]
    assert_close(out, expected)


def test_sort_errors():
    x = mx.zeros((2, 5))
    with pytest.raises(ValueError, match=r"\[sort\] Invalid axis 2"):
        mx.sort(x, axis=2)
    with pytest.raises(ValueError, match=r"\[argsort\] Invalid axis -3"):
        mx.argsort(x, axis=-3)
    with pytest.raises(ValueError,
                       match=r"\[partition\] Received invalid kth 5"):
        mx.partition(x, 5)
    with pytest.raises(ValueError,
                       match=r"\[argpartition\] Received invalid kth -6"):
        mx.argpartition(x, -6, axis=1)
    with pytest.raises(ValueError, match=r"\[partition\] Invalid axis"):
        mx.partition(x, 0, axis=4)
    # k = 0 is an empty selection (MLX), a negative k an error.
    assert mx.topk(x, 0).shape == x.shape[:-1] + (0,)
    with pytest.raises(ValueError, match=r"\[topk\] Received k = -1"):
        mx.topk(x, -1)
    with pytest.raises(ValueError, match=r"\[topk\] Received k = 6"):
        mx.topk(x, 6, axis=1)
    with pytest.raises(ValueError, match=r"\[topk\] Invalid axis"):
        mx.topk(x, 1, axis=2)


# --- scans ---

def np_logcumsumexp(x, axis):
    return np.logaddexp.accumulate(x, axis=axis)


SCANS = {
    "cumsum": (np.cumsum, 0),
    "cumprod": (np.cumprod, 1),
    "cummax": (np.maximum.accumulate, None),
    "cummin": (np.minimum.accumulate, None),
    "logcumsumexp": (np_logcumsumexp, -np.inf),
}


def identity(name, dtype):
    if name in ("cummax", "cummin"):
        hi = name == "cummin"
        if np.issubdtype(dtype, np.floating):
            return np.inf if hi else -np.inf
        info = np.iinfo(dtype)
        return info.max if hi else info.min
    return SCANS[name][1]


def scan_ref(name, vals, axis, reverse, inclusive):
    fn = SCANS[name][0]
    if axis is None:
        vals, axis = vals.reshape(-1), 0
    x = np.flip(vals, axis) if reverse else vals
    out = fn(x, axis=axis)
    if not inclusive:
        first = np.full_like(np.take(out, [0], axis=axis),
                             identity(name, out.dtype))
        rest = np.take(out, np.arange(out.shape[axis] - 1), axis=axis)
        out = np.concatenate([first, rest], axis=axis)
    return np.flip(out, axis) if reverse else out


def scan_cases():
    for name in SCANS:
        dtypes = [mx.float32, mx.float64, mx.int32, mx.int64, mx.float16]
        if name == "logcumsumexp":
            dtypes = [mx.float32, mx.float64]
        for dt in dtypes:
            for axis in (0, 1, -1, None):
                for reverse in (False, True):
                    for inclusive in (True, False):
                        yield pytest.param(
                            name, dt, axis, reverse, inclusive,
                            id=f"{name}-{dt}-{axis}-{reverse}-{inclusive}")


@pytest.mark.parametrize("name,dtype,axis,reverse,inclusive", scan_cases())
def test_scan(name, dtype, axis, reverse, inclusive):
    lo, hi = (0.5, 1.5) if name == "cumprod" else (-2, 2)
    if name == "cumprod" and dtype in (mx.int32, mx.int64):
        lo, hi = -2, 2
    vals = rand((3, 5), dtype, lo, hi, seed=6)
    x = from_np(vals, dtype)
    wide = vals.astype(np.float64) if dtype in (mx.float16,
                                                mx.float32) else vals
    expected = scan_ref(name, wide, axis, reverse, inclusive)
    out = getattr(mx, name)(x, axis=axis, reverse=reverse,
                            inclusive=inclusive)
    method = getattr(x, name)(axis, reverse=reverse, inclusive=inclusive)
    assert out.dtype == x.dtype
    tol = {mx.float16: 1e-2, mx.float32: 1e-5}.get(dtype, 1e-12)
    if dtype in (mx.float16, mx.float32):
        expected = expected.astype(np.float64)
    for got in (out, method):
        if dtype in (mx.int32, mx.int64):
            np.testing.assert_array_equal(to_np(got), expected)
        else:
            np.testing.assert_allclose(to_np(got).astype(np.float64),
                                       expected, rtol=tol, atol=tol)


def test_scan_default_axis_flattens_and_views():
    vals = rand((4, 3), mx.float32, seed=7)
    x = mx.array(vals)
    assert_close(mx.cumsum(x), np.cumsum(vals.astype(np.float64)),
                 rtol=1e-5, atol=1e-5)
    assert_close(x.cummax(), np.maximum.accumulate(vals.reshape(-1)))
    xt = mx.transpose(x)
    assert_close(mx.cumsum(xt, axis=1),
                 np.cumsum(vals.T.astype(np.float64), axis=1),
                 rtol=1e-5, atol=1e-5)
    assert_close(mx.cummin(x[:, ::2], 0),
                 np.minimum.accumulate(vals[:, ::2], axis=0))
    b = mx.broadcast_to(mx.array(vals[0]), (2, 3))
    assert_close(mx.cumprod(b, axis=1),
                 np.cumprod(np.broadcast_to(vals[0], (2, 3)).astype(
                     np.float64), axis=1), rtol=1e-5, atol=1e-5)


def test_scan_small_integer_accumulation():
    vals = np.array([[100, 100, 100], [1, 2, 3]], np.int8)
    out = mx.cumsum(mx.array(vals), axis=1)
    assert out.dtype == mx.int32
    np.testing.assert_array_equal(to_np(out), np.cumsum(vals.astype(
        np.int32), axis=1))
    u = mx.cumprod(mx.array(np.array([16, 16, 16], np.uint8)))
    assert u.dtype == mx.uint32
    np.testing.assert_array_equal(to_np(u), [16, 256, 4096])
    b = mx.cumsum(mx.array([True, False, True, True]))
    assert b.dtype == mx.int32
    np.testing.assert_array_equal(to_np(b), [1, 1, 2, 3])
    # cummax keeps the dtype.
    assert mx.cummax(mx.array(vals), axis=1).dtype == mx.int8
    # logcumsumexp promotes integers to float32.
    lc = mx.logcumsumexp(mx.array([0, 1, 2]))
    assert lc.dtype == mx.float32
    assert_close(lc, np.logaddexp.accumulate(np.array([0.0, 1.0, 2.0])),
                 rtol=1e-6, atol=1e-6)


def test_scan_errors():
    x = mx.zeros((2, 3))
    for name in SCANS:
        with pytest.raises(ValueError, match=rf"\[{name}\] Invalid axis 2"):
            getattr(mx, name)(x, axis=2)
        with pytest.raises(ValueError, match=rf"\[{name}\] Invalid axis -3"):
            getattr(x, name)(-3)
    with pytest.raises(ValueError,
                       match=r"\[logcumsumexp\] Received an input of dtype "
                             r"bool"):
        mx.logcumsumexp(mx.array([True, False]))
    with pytest.raises(TypeError):
        mx.cumsum(x, 0, True)  # reverse is keyword-only


# --- gradients against central differences ---

def finite_diff(f, vals, eps=1e-6):
    g = np.zeros_like(vals)
    for i in np.ndindex(vals.shape):
        up, down = vals.copy(), vals.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2 * eps)
    return g


@pytest.mark.parametrize("axis", [0, 1, None])
def test_sort_grad(axis):
    vals = rand((3, 4), mx.float64, seed=8)
    w = rand((3, 4), mx.float64, seed=9)
    wflat = w.reshape(-1) if axis is None else w

    def f_np(v):
        return np.sum(np.sort(v, axis=axis) * wflat)

    g = mx.grad(lambda x: (mx.sort(x, axis=axis) * mx.array(wflat)).sum())(
        mx.array(vals))
    assert_close(g, finite_diff(f_np, vals), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reverse,inclusive", [(False, True), (True, True),
                                               (False, False),
                                               (True, False)])
def test_cumsum_grad(reverse, inclusive):
    vals = rand((3, 4), mx.float64, seed=10)
    w = rand((3, 4), mx.float64, seed=11)

    def f_np(v):
        return np.sum(scan_ref("cumsum", v, 1, reverse, inclusive) * w)

    g = mx.grad(lambda x: (mx.cumsum(x, axis=1, reverse=reverse,
                                     inclusive=inclusive) *
                           mx.array(w)).sum())(mx.array(vals))
    assert_close(g, finite_diff(f_np, vals), rtol=1e-6, atol=1e-6)
    # The method form agrees.
    gm = mx.grad(lambda x: (x.cumsum(1, reverse=reverse,
                                     inclusive=inclusive) *
                            mx.array(w)).sum())(mx.array(vals))
    assert_close(gm, to_np(g))
