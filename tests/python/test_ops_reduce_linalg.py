"""Reductions, linear algebra and misc ops against NumPy."""

import numpy as np
import pytest

import fluxion.core as mx
from helpers import assert_close, from_np, rand

REDUCTIONS = [
    ("sum", np.sum),
    ("prod", np.prod),
    ("mean", np.mean),
    ("max", np.max),
    ("min", np.min),
    ("all", np.all),
    ("any", np.any),
    ("logsumexp", lambda x, axis=None, keepdims=False: np.log(
        np.sum(np.exp(x), axis=axis, keepdims=keepdims))),
]
AXES = [None, 0, 1, -1, (0, 2), (0, 1, 2)]


def reduction_cases():
    for name, ref in REDUCTIONS:
        dtypes = [mx.bool_] if name in ("all", "any") else [
            mx.float32, mx.float64, mx.float16, mx.int32, mx.uint8]
        if name == "logsumexp":
            dtypes = [mx.float32, mx.float64]
        for dt in dtypes:
            for axis in AXES:
                for keepdims in (False, True):
                    yield pytest.param(
                        name, ref, dt, axis, keepdims,
                        id=f"{name}-{dt}-{axis}-{keepdims}")


@pytest.mark.parametrize("name,ref,dtype,axis,keepdims", reduction_cases())
def test_reduction(name, ref, dtype, axis, keepdims):
    vals = rand((2, 3, 4), dtype, 0 if dtype == mx.uint8 else -2, 2)
    if name == "prod" and dtype != mx.bool_:
        vals = rand((2, 3, 4), dtype, 1, 2)
    x = from_np(vals, dtype)
    wide = vals.astype(np.float64) if dtype in (
        mx.float16, mx.float32) else vals
    expected = ref(wide, axis=axis, keepdims=keepdims)
    out = getattr(mx, name)(x, axis=axis, keepdims=keepdims)
    method = getattr(x, name)(axis=axis, keepdims=keepdims)
    if name == "mean" and dtype in (mx.int32, mx.uint8):
        assert out.dtype == mx.float32
    tol = {mx.float16: 5e-3, mx.float32: 1e-5}.get(out.dtype, 1e-12)
    if dtype in (mx.int32, mx.uint8) and name in ("sum", "prod", "max",
                                                    "min"):
        expected = expected.astype(np.int64)
        assert_close(out.astype(mx.int64), expected)
        assert_close(method.astype(mx.int64), expected)
    else:
        assert_close(out, expected, rtol=tol, atol=tol)
        assert_close(method, expected, rtol=tol, atol=tol)
    # Transposed input.
    xt = mx.transpose(x, (2, 0, 1))
    assert_close(getattr(mx, name)(xt).astype(mx.float64),
                 np.asarray(ref(np.transpose(wide, (2, 0, 1)))).astype(
                     np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("ddof", [0, 1])
def test_var_std(axis, ddof):
    vals = rand((4, 5), mx.float32)
    x = mx.array(vals)
    for name in ("var", "std"):
        ref = getattr(np, name)(vals.astype(np.float64), axis=axis, ddof=ddof)
        assert_close(getattr(mx, name)(x, axis=axis, ddof=ddof), ref,
                     rtol=1e-5)
        assert_close(getattr(x, name)(axis=axis, ddof=ddof), ref, rtol=1e-5)
        kd = getattr(mx, name)(x, axis, True, ddof)
        assert kd.ndim == 2


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmax_argmin(axis, keepdims):
    vals = rand((4, 6), mx.float32, seed=3)
    x = mx.array(vals)
    for name in ("argmax", "argmin"):
        ref = getattr(np, name)(vals, axis=axis, keepdims=keepdims)
        out = getattr(mx, name)(x, axis=axis, keepdims=keepdims)
        assert out.dtype == mx.uint32
        assert_close(out.astype(mx.int64), np.asarray(ref).astype(np.int64))
        method = getattr(x, name)(axis=axis, keepdims=keepdims)
        assert_close(method.astype(mx.int64), np.asarray(ref).astype(np.int64))


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)])
def test_softmax_family(axis):
    vals = rand((3, 4), mx.float32)
    x = mx.array(vals)
    ax = axis if axis is not None else (0, 1)
    e = np.exp(vals - vals.max(axis=ax, keepdims=True))
    ref = e / e.sum(axis=ax, keepdims=True)
    assert_close(mx.softmax(x, axis=axis), ref, rtol=1e-5)
    assert_close(mx.softmax(x, axis, precise=True), ref, rtol=1e-5)
    assert_close(mx.log_softmax(x, axis=axis), np.log(ref), rtol=1e-5)


@pytest.mark.parametrize("dtype", [mx.float32, mx.float64, mx.float16,
                                   mx.complex64])
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 4), (4, 2)),
                                    ((4,), (4, 3)), ((3, 4), (4,)),
                                    ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul(dtype, shapes):
    a = rand(shapes[0], dtype, seed=4)
    b = rand(shapes[1], dtype, seed=5)
    tol = {mx.float16: 1e-2, mx.float32: 1e-5, mx.complex64: 1e-5}.get(
        dtype, 1e-12)
    ref = np.matmul(a.astype(np.complex128 if dtype == mx.complex64 else
                             np.float64), b)
    assert_close(mx.matmul(from_np(a, dtype), from_np(b, dtype)), ref,
                 rtol=tol, atol=tol)
    assert_close(from_np(a, dtype) @ from_np(b, dtype), ref, rtol=tol,
                 atol=tol)


def test_matmul_transposed_views():
    a = rand((5, 3), mx.float32)
    b = rand((4, 5), mx.float32)
    assert_close(mx.array(a).T @ mx.array(b).T, a.T @ b.T, rtol=1e-5)


def test_linalg_others():
    a = rand((3, 4), mx.float32, seed=6)
    b = rand((4, 2), mx.float32, seed=7)
    c = rand((3, 2), mx.float32, seed=8)
    assert_close(mx.addmm(mx.array(c), mx.array(a), mx.array(b), alpha=2.0,
                          beta=0.5), 2 * a @ b + 0.5 * c, rtol=1e-5)
    v, w = rand((4,), mx.float32, seed=9), rand((3,), mx.float32, seed=10)
    assert_close(mx.inner(mx.array(v), mx.array(v)), np.inner(v, v),
                 rtol=1e-5)
    assert_close(mx.inner(mx.array(a), mx.array(v)), np.inner(a, v),
                 rtol=1e-5)
    assert_close(mx.outer(mx.array(v), mx.array(w)), np.outer(v, w),
                 rtol=1e-5)
    t1 = rand((2, 3, 4), mx.float32, seed=11)
    t2 = rand((3, 4, 5), mx.float32, seed=12)
    assert_close(mx.tensordot(mx.array(t1), mx.array(t2)),
                 np.tensordot(t1, t2), rtol=1e-5)
    assert_close(mx.tensordot(mx.array(t1), mx.array(t2.transpose(2, 0, 1)),
                              axes=([2], [2])),
                 np.tensordot(t1, t2.transpose(2, 0, 1), axes=([2], [2])),
                 rtol=1e-5)
    assert_close(mx.tensordot(mx.array(t1), mx.array(b), axes=1),
                 np.tensordot(t1, b, axes=1), rtol=1e-5)
    assert_close(mx.tensordot(mx.array(t1), mx.array(t2),
                              axes=[[1, 2], [0, 1]]),
                 np.tensordot(t1, t2, axes=[[1, 2], [0, 1]]), rtol=1e-5)


def test_where_clip_isclose():
    c = np.array([True, False, True])
    x = mx.array([1, 2, 3], mx.float16)
    out = mx.where(mx.array(c), x, 0.5)
    assert out.dtype == mx.float16
    assert_close(out, np.where(c, [1, 2, 3], 0.5), dtype=mx.float16)
    assert mx.where(c, 1, 2.0).dtype == mx.float32
    v = mx.array([-3, 0, 5])
    assert mx.clip(v, -1, 2).tolist() == [-1, 0, 2]
    assert mx.clip(v, None, 2).tolist() == [-3, 0, 2]
    assert mx.clip(v, 0, None).tolist() == [0, 0, 5]
    assert mx.clip(v, 0, 2).dtype == mx.int32
    a = mx.array([1.0, 2.0, np.nan])
    b = mx.array([1.0 + 1e-7, 2.1, np.nan])
    assert mx.isclose(a, b).tolist() == [True, False, False]
    assert mx.isclose(a, b, equal_nan=True).tolist() == [True, False, True]
    assert mx.isclose(a, b, rtol=0.1, equal_nan=True).tolist() == [True] * 3
    assert not mx.allclose(a, b).item()
    assert mx.allclose(a, b, 0.1, equal_nan=True).item()
    assert mx.array_equal(mx.array([1, 2]), mx.array([1.0, 2.0])).item()
    assert not mx.array_equal(mx.array([1, 2]), mx.array([1, 2, 3])).item()
    assert mx.array_equal(a, a, equal_nan=True).item()
    assert mx.astype(mx.array([1.7, -1.7]), mx.int32).tolist() == [1, -1]
