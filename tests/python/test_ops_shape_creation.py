"""Shape, creation and integer-array indexing ops against NumPy."""

import numpy as np
import pytest

import fluxion.core as mx
from helpers import assert_close, rand, keep64

DTYPES = [mx.float32, mx.int32, mx.bool_, mx.float16, mx.bfloat16,
          mx.uint8, mx.int64, mx.complex64, mx.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_shape_ops(dtype):
    v = rand((2, 3, 4), dtype)
    x = keep64(v).astype(dtype)
    assert_close(mx.reshape(x, (4, 6)), v.reshape(4, 6))
    assert_close(mx.reshape(x, shape=[-1, 2]), v.reshape(-1, 2))
    assert_close(x.reshape(6, 4), v.reshape(6, 4))
    assert_close(x.reshape((6, -1)), v.reshape(6, -1))
    assert_close(mx.flatten(x), v.flatten())
    assert_close(mx.flatten(x, 1, 2), v.reshape(2, 12))
    assert_close(x.flatten(start_axis=0, end_axis=1), v.reshape(6, 4))
    assert_close(mx.unflatten(mx.flatten(x), 0, (2, 12)), v.reshape(2, 12))
    assert_close(mx.transpose(x), v.transpose())
    assert_close(mx.transpose(x, (1, 0, 2)), v.transpose(1, 0, 2))
    assert_close(x.transpose(2, 0, 1), v.transpose(2, 0, 1))
    assert_close(x.transpose((2, 0, 1)), v.transpose(2, 0, 1))
    assert_close(x.T, v.T)
    assert_close(mx.swapaxes(x, 0, 2), np.swapaxes(v, 0, 2))
    assert_close(x.swapaxes(-1, 0), np.swapaxes(v, -1, 0))
    assert_close(mx.moveaxis(x, 0, -1), np.moveaxis(v, 0, -1))
    assert_close(x.moveaxis(2, 0), np.moveaxis(v, 2, 0))
    e = mx.expand_dims(x, (0, 3))
    assert_close(e, np.expand_dims(v, (0, 3)))
    assert_close(mx.squeeze(e), v)
    assert_close(mx.squeeze(e, 0), v[..., None, :].reshape(2, 3, 1, 4))
    assert_close(e.squeeze(axis=(0, 3)), v)
    assert_close(mx.broadcast_to(x[:, :1], (2, 3, 4)),
                 np.broadcast_to(v[:, :1], (2, 3, 4)))
    p, q = mx.broadcast_arrays(x[0], x[:, :1, :1])
    assert p.shape == q.shape == (2, 3, 4)
    assert_close(mx.concatenate([x, x], axis=1), np.concatenate([v, v], 1))
    assert_close(mx.concatenate([x, x], axis=None),
                 np.concatenate([v, v], axis=None))
    assert_close(mx.concat([x, x]), np.concatenate([v, v]))
    assert_close(mx.stack([x, x], axis=-1), np.stack([v, v], axis=-1))
    assert_close(mx.repeat(x, 2, axis=1), np.repeat(v, 2, axis=1))
    assert_close(mx.repeat(x, 3), np.repeat(v, 3))
    assert_close(mx.tile(x, (2, 1, 2)), np.tile(v, (2, 1, 2)))
    assert_close(mx.tile(x, 2), np.tile(v, 2))
    for got, ref in zip(mx.split(x, 2), np.split(v, 2)):
        assert_close(got, ref)
    for got, ref in zip(mx.split(x, [1, 3], axis=2), np.split(v, [1, 3], 2)):
        assert_close(got, ref)
    for got, ref in zip(x.split(3, axis=1), np.split(v, 3, axis=1)):
        assert_close(got, ref)


def test_pad():
    v = rand((2, 3), mx.float32)
    x = keep64(v)
    assert_close(mx.pad(x, 1), np.pad(v, 1))
    assert_close(mx.pad(x, (1, 2)), np.pad(v, (1, 2)))
    assert_close(mx.pad(x, [(0, 1), (2, 0)], constant_values=7),
                 np.pad(v, [(0, 1), (2, 0)], constant_values=7))
    assert_close(mx.pad(x, [(1, 1), (1, 2)], mode="edge"),
                 np.pad(v, [(1, 1), (1, 2)], mode="edge"))
    i = mx.pad(keep64([1, 2], mx.uint8), 1, constant_values=3)
    assert i.dtype == mx.uint8 and i.tolist() == [3, 1, 2, 3]


def test_atleast():
    assert mx.atleast_1d(keep64(1)).shape == (1,)
    assert mx.atleast_2d(keep64([1, 2])).shape == (1, 2)
    assert mx.atleast_3d(keep64([1, 2])).shape == (1, 2, 1)
    a, b = mx.atleast_2d(1, keep64([[1]]))
    assert a.shape == (1, 1) and b.shape == (1, 1)


def test_mlx_slice_and_slice_update():
    v = np.arange(24).reshape(4, 6)
    x = keep64(v)
    out = mx.slice(x, keep64([1, 2]), axes=[0, 1], slice_size=[2, 3])
    assert_close(out, v[1:3, 2:5])
    assert_close(mx.slice(x, [1], [1], [4]), v[:, 1:5])
    upd = mx.zeros((2, 6), mx.int32)
    res = mx.slice_update(x, upd, keep64([1]), [0])
    ref = v.copy()
    ref[1:3] = 0
    assert_close(res, ref)
    with pytest.raises(IndexError, match=r"\[slice\]"):
        mx.slice(x, [3], [0], [2])


def test_creation():
    assert_close(mx.zeros((2, 3)), np.zeros((2, 3)))
    assert mx.zeros(3, mx.int32).dtype == mx.int32
    assert_close(mx.ones((2,), dtype=mx.float16), np.ones(2))
    f = mx.full((2, 2), 3)
    assert f.dtype == mx.int32 and f.tolist() == [[3, 3], [3, 3]]
    assert mx.full((2,), 2.5).dtype == mx.float32
    assert mx.full(3, 1, mx.float64).dtype == mx.float64
    assert_close(mx.full((2, 3), keep64([1.0, 2.0, 3.0])),
                 np.full((2, 3), [1.0, 2.0, 3.0]))
    x = keep64([[1, 2]], mx.uint8)
    assert mx.zeros_like(x).dtype == mx.uint8
    assert mx.ones_like(x).tolist() == [[1, 1]]
    assert mx.full_like(x, 7).tolist() == [[7, 7]]
    assert mx.full_like(x, 7).dtype == mx.uint8
    assert_close(mx.eye(3), np.eye(3))
    assert_close(mx.eye(3, 4, 1), np.eye(3, 4, 1))
    assert_close(mx.eye(3, k=-1, dtype=mx.int32), np.eye(3, k=-1))
    assert_close(mx.identity(2), np.identity(2))
    assert_close(mx.tri(3, 4, 1), np.tri(3, 4, 1))
    assert_close(mx.tri(3), np.tri(3))
    m = rand((4, 4), mx.float32)
    assert_close(mx.tril(keep64(m)), np.tril(m))
    assert_close(mx.triu(keep64(m), 1), np.triu(m, 1))
    assert_close(mx.triu(keep64(m), k=-1), np.triu(m, -1))


@pytest.mark.parametrize("args,kwargs,ref,dtype", [
    ((5,), {}, np.arange(5), mx.int32),
    ((2, 8), {}, np.arange(2, 8), mx.int32),
    ((2, 8, 3), {}, np.arange(2, 8, 3), mx.int32),
    ((8, 2, -2), {}, np.arange(8, 2, -2), mx.int32),
    ((5.0,), {}, np.arange(5.0), mx.float32),
    ((0, 1, 0.25), {}, np.arange(0, 1, 0.25), mx.float32),
    ((0, 3), {"dtype": mx.float16}, np.arange(0, 3), mx.float16),
    ((4,), {"dtype": mx.int64}, np.arange(4), mx.int64),
    ((), {"start": 1, "stop": 4}, np.arange(1, 4), mx.int32),
    ((), {"stop": 3}, np.arange(3), mx.int32),
    ((10,), {"step": 3}, np.arange(0, 10, 3), mx.int32),
])
def test_arange(args, kwargs, ref, dtype):
    out = mx.arange(*args, **kwargs)
    assert out.dtype == dtype
    assert_close(out, ref)


def test_linspace():
    assert_close(mx.linspace(0, 1, 5), np.linspace(0, 1, 5), rtol=1e-6)
    assert mx.linspace(0, 1).shape == (50,)
    assert mx.linspace(0, 4, 5, dtype=mx.int32).tolist() == [0, 1, 2, 3, 4]


def test_take_family():
    v = rand((3, 4), mx.float32)
    x = keep64(v)
    idx = np.array([[2, 0], [-1, 1]])
    assert_close(mx.take(x, keep64(idx), axis=1), np.take(v, idx, axis=1))
    assert_close(mx.take(x, keep64([0, 5, -1])), np.take(v, [0, 5, -1]))
    assert_close(mx.take(x, 1, axis=0), v[1])
    assert_close(mx.take(x, [1, 1], axis=0), v[[1, 1]])
    ia = np.array([[0, 2, 1, 3], [3, 3, 0, 0], [1, 0, 2, 2]])
    assert_close(mx.take_along_axis(x, keep64(ia), axis=1),
                 np.take_along_axis(v, ia, axis=1))
    assert_close(mx.take_along_axis(x, keep64([5, 0]), axis=None),
                 np.take_along_axis(v, np.array([5, 0]), axis=None))
    ref = v.copy()
    np.put_along_axis(ref, ia[:, :1], -1.0, axis=1)
    assert_close(mx.put_along_axis(x, keep64(ia[:, :1]), -1.0, axis=1), ref)
    # scatter_add_axis accumulates duplicate indices.
    z = mx.zeros((2, 3))
    out = mx.scatter_add_axis(z, keep64([[0, 0], [2, 2]]),
                              keep64([[1.0, 2.0], [3.0, 4.0]]), 1)
    assert out.tolist() == [[3.0, 0.0, 0.0], [0.0, 0.0, 7.0]]


def test_depends():
    a = keep64([1.0])
    b = keep64([2.0])
    (out,) = mx.depends([a], [b])
    assert out.tolist() == [1.0]
