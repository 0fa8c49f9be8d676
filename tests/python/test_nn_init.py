"""nn.init: shapes, dtypes and the statistics each initializer promises."""

import math

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn.init as init


def npa(x):
    return np.array(x.astype(mx.float32))


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16])
def test_constant_normal_uniform(dtype):
    a = mx.zeros((200, 300))
    c = init.constant(2.5, dtype)(a)
    assert c.dtype == dtype and c.shape == a.shape and np.all(npa(c) == 2.5)
    n = npa(init.normal(1.0, 0.5, dtype)(a))
    assert init.normal(dtype=dtype)(a).dtype == dtype
    assert abs(n.mean() - 1.0) < 0.01 and abs(n.std() - 0.5) < 0.01
    u = init.uniform(-2.0, 3.0, dtype)(a)
    assert u.dtype == dtype
    u = npa(u)
    assert u.min() >= -2 and u.max() <= 3 and abs(u.mean() - 0.5) < 0.03


def test_identity():
    np.testing.assert_array_equal(
        npa(init.identity()(mx.zeros((4, 4)))), np.eye(4)
    )
    assert init.identity(mx.float16)(mx.zeros((2, 2))).dtype == mx.float16
    for shape in [(3, 2), (3,), (2, 2, 2)]:
        with pytest.raises(ValueError, match="square"):
            init.identity()(mx.zeros(shape))


# (out, *receptive field, in): fan_in = in * field, fan_out = out * field.
SHAPE = (64, 3, 3, 32)
FAN_IN, FAN_OUT = 32 * 9, 64 * 9


def test_glorot():
    a = mx.zeros(SHAPE)
    g = npa(init.glorot_normal()(a, gain=2.0))
    np.testing.assert_allclose(
        g.std(), 2 * math.sqrt(2 / (FAN_IN + FAN_OUT)), rtol=0.03
    )
    u = npa(init.glorot_uniform(mx.float16)(a))
    limit = math.sqrt(6 / (FAN_IN + FAN_OUT))
    assert np.abs(u).max() <= limit * 1.001
    np.testing.assert_allclose(u.std(), limit / math.sqrt(3), rtol=0.03)
    with pytest.raises(ValueError):
        init.glorot_normal()(mx.zeros((5,)))


def test_he():
    a = mx.zeros(SHAPE)
    np.testing.assert_allclose(
        npa(init.he_normal()(a)).std(), 1 / math.sqrt(FAN_IN), rtol=0.03
    )
    np.testing.assert_allclose(
        npa(init.he_normal()(a, mode="fan_out", gain=3.0)).std(),
        3 / math.sqrt(FAN_OUT),
        rtol=0.03,
    )
    u = npa(init.he_uniform()(a))
    assert np.abs(u).max() <= math.sqrt(3 / FAN_IN) * 1.001
    with pytest.raises(ValueError, match="mode"):
        init.he_normal()(a, mode="fan_avg")


@pytest.mark.parametrize(
    "sparsity,shape", [(0.5, (4, 10)), (0.3, (50, 7)), (0.9, (3, 3))]
)
def test_sparse_zeros_per_row(sparsity, shape):
    w = npa(init.sparse(sparsity, std=0.1)(mx.zeros(shape)))
    assert w.shape == shape
    np.testing.assert_array_equal(
        (w == 0).sum(axis=1), math.ceil(sparsity * shape[1])
    )
    # The kept entries are the normal draws.
    assert np.abs(w).max() < 1
    with pytest.raises(ValueError):
        init.sparse(0.5)(mx.zeros((4,)))


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 7)])
def test_orthogonal(shape):
    w = np.array(init.orthogonal(gain=2.0)(mx.zeros(shape)), dtype=np.float64)
    r, c = shape
    gram = w.T @ w if r >= c else w @ w.T
    np.testing.assert_allclose(gram, 4 * np.eye(min(r, c)), atol=1e-5)
    with pytest.raises(ValueError, match="3D array"):
        init.orthogonal()(mx.zeros((2, 3, 4)))
