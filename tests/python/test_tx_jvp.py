"""Forward-mode (jvp) rules that differed from MLX, and the errors for
derivatives with respect to integer indices."""

import numpy as np
import pytest

import fluxion.core as mx


def fd_jvp(f, primals, tangents, eps=1e-3):
    """Central differences of f along the tangents, in float64."""
    p = [np.array(x, dtype=np.float64) for x in primals]
    t = [np.array(x, dtype=np.float64) for x in tangents]
    up = f(*[mx.array(a + eps * b) for a, b in zip(p, t)])
    dn = f(*[mx.array(a - eps * b) for a, b in zip(p, t)])
    return (np.array(up, dtype=np.float64) - np.array(dn, dtype=np.float64)) / (2 * eps)


@pytest.mark.parametrize("dtype", [mx.int32, mx.int64, mx.int16, mx.uint8])
def test_jvp_of_integer_reductions(dtype):
    x = mx.array([[3, 1, 2], [4, 5, 0]], dtype)
    t = mx.array([[1, 2, 3], [4, 5, 6]], dtype)
    xn, tn = np.array(x).astype(np.int64), np.array(t).astype(np.int64)
    (out,), (jt,) = mx.jvp(lambda x: x.sum(), [x], [t])
    assert jt.item() == tn.sum()
    (_,), (jt,) = mx.jvp(lambda x: x.sum(axis=1), [x], [t])
    assert np.array(jt).tolist() == tn.sum(1).tolist()
    # prod: sum over elements of t_i * prod(others)
    (_,), (jt,) = mx.jvp(lambda x: x.prod(axis=1), [x], [t])
    expected = [
        sum(tn[r, i] * np.prod(np.delete(xn[r], i)) for i in range(3)) for r in range(2)
    ]
    assert np.array(jt).astype(np.int64).tolist() == expected
    # max / min: the tangent of the extreme element
    (_,), (jt,) = mx.jvp(lambda x: x.max(axis=1), [x], [t])
    assert np.array(jt).tolist() == [tn[0, 0], tn[1, 1]]
    (_,), (jt,) = mx.jvp(lambda x: x.min(axis=1), [x], [t])
    assert np.array(jt).tolist() == [tn[0, 1], tn[1, 2]]


def test_vjp_of_integer_reductions_is_the_cotangent_in_their_dtype():
    # MLX (issue 33 item 5): an integer input's gradient is not zero.
    x = mx.array([1, 2, 3])
    (_,), (g,) = mx.vjp(lambda x: x.sum(), [x], [mx.array(1)])
    assert g.dtype == mx.int32 and np.array(g).tolist() == [1, 1, 1]


@pytest.mark.parametrize(
    "op", [mx.greater, mx.less, mx.equal, mx.not_equal, mx.greater_equal, mx.less_equal]
)
def test_jvp_of_comparisons_is_zero_of_the_tangent_dtype(op):
    a = mx.array([1.0, 2.0, 3.0])
    b = mx.array([2.0, 2.0, 2.0])
    (out,), (jt,) = mx.jvp(lambda a, b: op(a, b), [a, b], [mx.ones(3), mx.ones(3)])
    assert out.dtype == mx.bool_
    assert jt.dtype == mx.float32 and jt.shape == (3,)
    assert np.array(jt).tolist() == [0.0, 0.0, 0.0]
    (_,), (jt,) = mx.jvp(lambda a: op(a, b), [a], [mx.ones(3, mx.float16)])
    assert jt.dtype == mx.float16
    (_,), (jt,) = mx.jvp(lambda a: mx.isnan(a), [a], [mx.ones(3)])
    assert jt.dtype == mx.float32


def test_jvp_of_where_with_some_branches_traced():
    x = mx.array([1.0, -2.0, 3.0])
    y = mx.array([10.0, 20.0, 30.0])
    tx = mx.array([1.0, 2.0, 3.0])
    ty = mx.array([4.0, 5.0, 6.0])
    mask = mx.array([True, False, True])
    # constant condition, only x traced (y a constant array or a scalar)
    for other in (y, 2.0):
        (out,), (jt,) = mx.jvp(lambda x: mx.where(mask, x, other), [x], [tx])
        assert np.array(jt).tolist() == [1.0, 0.0, 3.0]
        (out,), (jt,) = mx.jvp(lambda x: mx.where(mask, other, x), [x], [tx])
        assert np.array(jt).tolist() == [0.0, 2.0, 0.0]
    # traced condition (derived from x), both branches traced
    f = lambda x, y: mx.where(x > 0, x * y, y)
    (out,), (jt,) = mx.jvp(f, [x, y], [tx, ty])
    np.testing.assert_allclose(np.array(jt), fd_jvp(f, [x, y], [tx, ty]), rtol=1e-3)
    # traced condition as an input of its own (a bool primal)
    (out,), (jt,) = mx.jvp(
        lambda c, x: mx.where(c, x, 0.0), [mask, x], [mx.zeros(3, mx.bool_), tx]
    )
    assert np.array(jt).tolist() == [1.0, 0.0, 3.0]


def test_jvp_of_arctan2_and_power_with_one_traced_side():
    a = mx.array([0.5, -1.5, 2.0])
    b = mx.array([1.5, 0.7, -2.5])
    t = mx.array([1.0, -0.5, 2.0])
    cases = [
        lambda a: mx.arctan2(a, b),
        lambda b: mx.arctan2(a, b),
        lambda a: mx.power(mx.abs(a), b),
        lambda b: mx.power(mx.abs(a), b),
        lambda a: mx.power(a, 3.0),
        lambda b: mx.power(2.0, b),
        lambda a: a**2,
        lambda b: 3.0**b,
    ]
    for i, f in enumerate(cases):
        primal = a if i % 2 == 0 else b
        (out,), (jt,) = mx.jvp(f, [primal], [t])
        np.testing.assert_allclose(
            np.array(jt), fd_jvp(f, [primal], [t]), rtol=2e-3, atol=1e-4, err_msg=str(i)
        )


def test_jvp_of_divmod_outputs():
    a = mx.array([5.5, -3.25, 7.0])
    b = mx.array([2.0, 1.5, -2.5])
    ta = mx.array([1.0, 2.0, -1.0])
    tb = mx.array([0.5, -1.0, 0.25])
    outs, jts = mx.jvp(lambda a, b: list(mx.divmod(a, b)), [a, b], [ta, tb])
    assert len(jts) == 2
    # MLX defines both outputs' derivatives as zero (issue 33 item 6).
    assert np.array(jts[0]).tolist() == [0.0, 0.0, 0.0]
    assert np.array(jts[1]).tolist() == [0.0, 0.0, 0.0]
    (_,), (jt,) = mx.jvp(lambda a: mx.divmod(a, b)[1], [a], [ta])
    assert np.array(jt).tolist() == [0.0, 0.0, 0.0]
    # remainder alone keeps its rule: a % b = a - b * floor(a / b)
    q = np.floor(np.array(a) / np.array(b))
    (_,), (jt,) = mx.jvp(lambda a, b: mx.remainder(a, b), [a, b], [ta, tb])
    np.testing.assert_allclose(np.array(jt), np.array(ta) - np.array(tb) * q, rtol=1e-6)


def test_jvp_of_slice_update_with_array_starts():
    x = mx.zeros((5, 3))
    u = mx.ones((2, 3)) * 4.0
    tx = mx.arange(15.0).reshape(5, 3)
    tu = -mx.ones((2, 3))
    start = mx.array([2])

    def f(x, u):
        return mx.slice_update(x, u, start, axes=(0,))

    expected = np.array(tx)
    expected[2:4] = np.array(tu)
    (_,), (jt,) = mx.jvp(f, [x, u], [tx, tu])
    np.testing.assert_allclose(np.array(jt), expected)
    # only one of them traced
    (_,), (jt,) = mx.jvp(lambda u: f(x, u), [u], [tu])
    e = np.zeros((5, 3))
    e[2:4] = -1
    np.testing.assert_allclose(np.array(jt), e)
    (_,), (jt,) = mx.jvp(lambda x: f(x, u), [x], [tx])
    e = np.array(tx)
    e[2:4] = 0
    np.testing.assert_allclose(np.array(jt), e)


def _raises_stop_gradient(fn):
    with pytest.raises(ValueError, match="stop_gradient"):
        fn()


def test_derivatives_with_respect_to_integer_indices_raise():
    x = mx.arange(6.0)
    idx = mx.array([1, 4])
    _raises_stop_gradient(lambda: mx.grad(lambda i: mx.take(x, i).sum())(idx))
    _raises_stop_gradient(
        lambda: mx.grad(lambda i: mx.take_along_axis(x, i, axis=0).sum())(idx)
    )
    _raises_stop_gradient(lambda: mx.grad(lambda i: x.at[i].add(1.0).sum())(idx))
    _raises_stop_gradient(
        lambda: mx.grad(lambda i: mx.put_along_axis(x, i, mx.array(1.0), axis=0).sum())(idx)
    )
    _raises_stop_gradient(
        lambda: mx.vjp(lambda v, i: [x.at[i].add(v)], [mx.ones(2), idx], [mx.ones(6)])
    )
    _raises_stop_gradient(lambda: mx.jvp(lambda i: [mx.take(x, i)], [idx], [idx]))
    # Indices computed from the differentiated input, too...
    _raises_stop_gradient(
        lambda: mx.grad(lambda x: mx.take_along_axis(x, mx.argsort(x), axis=0)[-1])(x)
    )
    # ... which stop_gradient fixes.
    g = mx.grad(
        lambda x: mx.take_along_axis(x, mx.stop_gradient(mx.argsort(x)), axis=0)[-1]
    )(x)
    assert np.array(g).tolist() == [0, 0, 0, 0, 0, 1]
    # Differentiating the values (not the indices) still works.
    g = mx.grad(lambda x: mx.take(x, idx).sum())(x)
    assert np.array(g).tolist() == [0, 1, 0, 0, 1, 0]
    g = mx.grad(lambda v: x.at[idx].add(v).sum())(mx.ones(2))
    assert np.array(g).tolist() == [1, 1]
