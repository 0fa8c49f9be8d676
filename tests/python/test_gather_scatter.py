"""The multi-axis gather/scatter behind advanced indexing and .at[] (against
NumPy's ufunc.at, with heavy duplication, mixed slices and arrays, several
dtypes), their gradients and vmap, and take's `mode` extension."""

import numpy as np
import pytest

import fluxion.core as mx
from helpers import keep64

UFUNCS = [
    ("add", np.add),
    ("subtract", np.subtract),
    ("multiply", np.multiply),
    ("divide", np.true_divide),
    ("maximum", np.maximum),
    ("minimum", np.minimum),
]

INDICES = [
    # (numpy index, description)
    (np.array([0, 3, 3, 1, 0, 3, -1]), "1 axis, duplicates, negative"),
    ((np.array([[0, 1], [4, 4]]), np.array([2, 2])), "2 axes broadcast"),
    ((slice(1, 4), np.array([0, 0, 5, -6])), "slice then array"),
    ((np.array([1, 1, 2]), slice(None, None, 2), np.array([3, 3, 3])),
     "separated arrays"),
    ((Ellipsis, np.array([2, 0, 2])), "ellipsis then array"),
    ((np.array([3, 3]), 2, slice(None)), "array and int"),
    ((None, np.array([0, 0, 0]), np.array([[1], [1]])), "newaxis first"),
]


@pytest.mark.parametrize("name,ufunc", UFUNCS)
@pytest.mark.parametrize("index,desc", INDICES, ids=[d for _, d in INDICES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_at_matches_numpy_ufunc_at(name, ufunc, index, desc, dtype):
    rng = np.random.default_rng(3)
    base = rng.integers(1, 5, size=(5, 6, 4)).astype(dtype)
    shape = base[index].shape
    if name == "divide":
        if dtype == np.int32:
            pytest.skip("NumPy's divide.at cannot write floats into ints")
        value = rng.choice([0.5, 2.0, 4.0], size=shape).astype(dtype)
    else:
        value = rng.integers(-3, 4, size=shape).astype(dtype)
    ref = base.copy()
    ufunc.at(ref, index, value)
    out = getattr(keep64(base).at[index], name)(keep64(value))
    assert out.dtype == keep64(base).dtype
    np.testing.assert_allclose(np.array(out), ref, rtol=1e-6)


@pytest.mark.parametrize("index,desc", INDICES, ids=[d for _, d in INDICES])
def test_setitem_last_write_wins(index, desc):
    base = np.zeros((5, 6, 4), np.float32)
    shape = base[index].shape
    value = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1
    ref = base.copy()
    ref[index] = value  # NumPy keeps the last value for duplicates too
    x = keep64(base)
    x[index] = keep64(value)
    np.testing.assert_array_equal(np.array(x), ref)
    # getitem through gather
    g = keep64(ref)[index]
    np.testing.assert_array_equal(np.array(g), ref[index])


def test_large_duplicate_updates():
    rng = np.random.default_rng(0)
    idx = rng.integers(-1000, 1000, size=200_000)
    vals = rng.standard_normal(200_000)
    ref = np.zeros(1000)
    np.add.at(ref, idx, vals)
    out = mx.zeros((1000,), mx.float64).at[keep64(idx)].add(keep64(vals))
    np.testing.assert_allclose(np.array(out), ref, rtol=1e-10, atol=1e-10)
    # Deterministic: the same result bit for bit on every run.
    again = mx.zeros((1000,), mx.float64).at[keep64(idx)].add(
        keep64(vals))
    assert np.array_equal(np.array(out), np.array(again))
    ref = np.full(1000, -np.inf)
    np.maximum.at(ref, idx, vals)
    out = mx.full((1000,), -np.inf, mx.float64).at[keep64(idx)].maximum(
        keep64(vals))
    np.testing.assert_array_equal(np.array(out), ref)


def test_at_rows_of_a_matrix():
    rng = np.random.default_rng(1)
    base = rng.standard_normal((50, 300))
    idx = rng.integers(0, 50, size=400)
    vals = rng.uniform(0.9, 1.1, size=(400, 300))
    for name, ufunc in UFUNCS:
        ref = base.copy()
        ufunc.at(ref, idx, vals)
        out = getattr(keep64(base).at[keep64(idx)], name)(keep64(vals))
        np.testing.assert_allclose(np.array(out), ref, rtol=1e-9, atol=1e-12)


def test_out_of_range_indices_raise():
    x = mx.zeros((3, 4))
    with pytest.raises(IndexError, match=r"\[scatter_add\] Index 3 is out of "
                       r"bounds for axis 0 with size 3"):
        mx.eval(x.at[keep64([0, 3]), keep64([1, 1])].add(1.0))
    with pytest.raises(IndexError, match=r"\[gather\] Index -5 is out of "
                       r"bounds for axis 1 with size 4"):
        mx.eval(x[keep64([0, 1]), keep64([1, -5])])
    with pytest.raises(IndexError, match=r"\[scatter\] Index 9"):
        x[keep64([9]), keep64([0])] = 1.0
        mx.eval(x)


def test_at_gradients():
    rng = np.random.default_rng(2)
    base = rng.uniform(1, 2, size=(4, 3))
    vals = rng.uniform(1, 2, size=(5, 3))
    idx = keep64([0, 2, 0, 3, 0])

    def f(x, v):
        return (x.at[idx].multiply(v) * mx.arange(12).reshape(4, 3)).sum()

    gx, gv = mx.grad(f, argnums=(0, 1))(keep64(base), keep64(vals))
    # Reference: d/dx and d/dv of x[i] * prod(v rows at i).
    w = np.arange(12.0).reshape(4, 3)
    prod = np.ones_like(base)
    np.multiply.at(prod, np.array(idx), vals)
    np.testing.assert_allclose(np.array(gx), w * prod, rtol=1e-10)
    ref_gv = np.zeros_like(vals)
    for r, i in enumerate(np.array(idx)):
        ref_gv[r] = w[i] * base[i] * prod[i] / vals[r]
    np.testing.assert_allclose(np.array(gv), ref_gv, rtol=1e-10)

    def g(x, v):
        return x.at[idx].maximum(v).sum()

    gx, gv = mx.grad(g, argnums=(0, 1))(keep64(base), keep64(vals + 5))
    assert np.array(gx)[[0, 2, 3]].sum() == 0
    np.testing.assert_array_equal(np.array(gx)[1], [1, 1, 1])
    # Row 0 gets three candidate rows: each column's winner gets 1.
    gvn = np.array(gv)
    assert gvn[[0, 2, 4]].sum(axis=0).tolist() == [1, 1, 1]


def test_vmap_of_at_and_gather():
    x = keep64(np.arange(24.0).reshape(2, 3, 4))
    idx = keep64([2, 0, 2])
    out = mx.vmap(lambda a: a.at[idx, 1].add(1.0))(x)
    ref = np.arange(24.0).reshape(2, 3, 4)
    for b in range(2):
        np.add.at(ref[b], (np.array(idx), 1), 1.0)
    np.testing.assert_array_equal(np.array(out), ref)
    rows = keep64([[0, 2], [1, 1]])
    got = mx.vmap(lambda a, r: a[r, keep64([3, 0])])(x, rows)
    want = np.stack([np.arange(24.0).reshape(2, 3, 4)[b][np.array(rows)[b],
                                                         [3, 0]]
                     for b in range(2)])
    np.testing.assert_array_equal(np.array(got), want)


@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int8])
def test_take_modes(mode, dtype):
    a = np.arange(35.0).reshape(5, 7)
    if mode == "raise":
        idx = np.array([0, -1, 3, -5], dtype=np.int32).astype(dtype)
        if np.issubdtype(dtype, np.unsignedinteger):
            idx = np.array([0, 4, 3], dtype=dtype)
    else:
        idx = np.array([0, 9, 127, 5, 6], dtype=dtype)
        if not np.issubdtype(dtype, np.unsignedinteger):
            idx = np.array([0, 9, -1, -12, 127, -128], dtype=dtype)
    for axis in [0, 1, None]:
        ref = np.take(a, idx, axis=axis, mode=mode)
        got = mx.take(keep64(a), keep64(idx), axis, mode=mode)
        np.testing.assert_array_equal(np.array(got), ref)


def test_take_mode_scalars_and_errors():
    a = mx.arange(5)
    assert mx.take(a, 7, 0, mode="wrap").item() == 2
    assert mx.take(a, -9, 0, mode="clip").item() == 0
    assert mx.take(a, 9, mode="clip").item() == 4
    with pytest.raises(ValueError, match=r"\[take\] Unknown mode 'bad'"):
        mx.take(a, keep64([0]), 0, mode="bad")
    with pytest.raises(ValueError, match=r"\[take\] Cannot take from the "
                       r"empty axis 0"):
        mx.take(mx.zeros((0,)), keep64([0]), 0, mode="wrap")
    assert mx.take(mx.zeros((0,)), keep64([], mx.int32), 0,
                   mode="clip").shape == (0,)
    with pytest.raises(IndexError, match=r"\[take\] Index 7 is out of bounds"):
        mx.eval(mx.take(a, keep64([7]), 0))
    # Gradients flow through the wrapped / clipped positions.
    g = mx.grad(lambda x: mx.take(x, keep64([6, -1, 6]), 0,
                                  mode="wrap").sum())(mx.ones((5,)))
    assert g.tolist() == [0, 2, 0, 0, 1]


def test_empty_indexed_axis():
    x = mx.zeros((0, 3))
    e = keep64([], mx.int32)
    assert x[e, e].shape == np.zeros((0, 3))[[], []].shape
    assert x[e].shape == (0, 3)
    assert x.at[e].add(1).shape == (0, 3)
    assert x.at[e, e].add(1).shape == (0, 3)
    y = mx.zeros((0, 3))
    y[e, keep64([], mx.int32)] = 5.0
    assert y.shape == (0, 3)
    with pytest.raises(IndexError, match=r"\[getitem\] Index out of bounds "
                       r"for axis 0 with size 0"):
        x[keep64([0]), keep64([1])]
    with pytest.raises(IndexError, match=r"\[at\] Index out of bounds"):
        x.at[keep64([0]), 1].add(1.0)
