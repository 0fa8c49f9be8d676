"""The operator fast path (issue 18 item 4): number slots, the cache of weak
scalar operand constants, constants broadcast as views and x[i]."""

import threading

import numpy as np
import pytest

import fluxion.core as mx


def close(a, b):
    return np.allclose(np.array(a), np.asarray(b), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16,
                                   mx.float64, mx.int8, mx.int32, mx.uint8,
                                   mx.int64])
def test_weak_scalar_keeps_dtype_after_reuse(dtype):
    x = mx.array([1, 2, 3]).astype(dtype)
    for _ in range(3):  # the second and third use hit the cache
        y = x + 1
        assert y.dtype == dtype
        assert y.astype(mx.float32).tolist() == [2.0, 3.0, 4.0]
        z = 2 * x
        assert z.dtype == dtype
        assert z.astype(mx.float32).tolist() == [2.0, 4.0, 6.0]
    f = x + 1.0
    if mx.issubdtype(dtype, mx.floating):
        assert f.dtype == dtype
    else:
        assert f.dtype == mx.float32


def test_same_value_in_different_dtypes_are_different_constants():
    a = mx.array([1.0], dtype=mx.float64)
    b = mx.array([1.0], dtype=mx.float16)
    c = mx.array([1], dtype=mx.int8)
    for _ in range(2):
        assert (a + 0.1).dtype == mx.float64
        assert np.array(a + 0.1)[0] == 1.1  # exact in float64, not rounded
        assert (b + 0.1).dtype == mx.float16
        assert (c + 1).dtype == mx.int8
        assert (c + True).dtype == mx.int8


def test_weak_int_range_checks_still_raise():
    x = mx.array([1], dtype=mx.uint8)
    assert (x + 255).tolist() == [0]
    with pytest.raises(ValueError):
        x + 256
    with pytest.raises(ValueError):
        x + (-1)
    y = mx.array([1], dtype=mx.int32)
    with pytest.raises(ValueError):
        y + 2 ** 40
    assert (mx.array([1], dtype=mx.int64) + 2 ** 40).tolist() == [2 ** 40 + 1]


def test_many_values_evict_and_stay_correct():
    x = mx.zeros((4,))
    vals = [i * 0.5 for i in range(2000)]
    outs = [x + v for v in vals]
    outs += [x + v for v in reversed(vals)]
    mx.eval(outs)
    ref = vals + list(reversed(vals))
    for o, v in zip(outs, ref):
        assert o.tolist() == [v] * 4


def test_cached_constant_not_overwritten_by_donation():
    # Size-1 results may donate a size-1 input's buffer: never the cache's.
    for _ in range(5):
        a = mx.zeros((1,))
        for _ in range(10):
            a = a * 0.0 + 7.0
        mx.eval(a)
        assert a.tolist() == [7.0]
    assert (mx.zeros(()) + 7.0).item() == 7.0
    assert (mx.zeros((1, 1)) + 0.0).tolist() == [[0.0]]


def test_threads_share_the_cache():
    errors = []

    def work(k):
        try:
            x = mx.ones((8,))
            for i in range(300):
                v = float((i * 7 + k) % 50)
                y = x * v + v
                if y.tolist() != [2 * v] * 8:
                    errors.append((k, i, y.tolist()))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []


def test_reflected_and_power_slots():
    x = mx.array([1.0, 2.0, 4.0])
    assert close(1.0 - x, [0.0, -1.0, -3.0])
    assert close(8.0 / x, [8.0, 4.0, 2.0])
    assert close(x ** 2, [1.0, 4.0, 16.0])
    assert close(2 ** x, [2.0, 4.0, 16.0])
    assert close(7.0 % x, [0.0, 1.0, 3.0])
    assert close(9.0 // x, [9.0, 4.0, 2.0])
    assert close(x.__add__(1.0), [2.0, 3.0, 5.0])
    assert close(x.__radd__(1.0), [2.0, 3.0, 5.0])
    with pytest.raises(TypeError):
        pow(x, 2, 3)
    i = mx.array([1, 2, 3])
    assert (i & 1).tolist() == [1, 0, 1]
    assert (6 | i).tolist() == [7, 6, 7]
    assert (1 << i).tolist() == [2, 4, 8]
    with pytest.raises(ValueError):
        x & 1


def test_slot_errors_and_not_implemented():
    x = mx.array([1.0])
    with pytest.raises(TypeError):
        x + object()
    with pytest.raises(TypeError):
        object() * x
    with pytest.raises(ValueError):
        x + [1.0]
    with pytest.raises(ValueError):
        mx.ones((2,)) + mx.ones((3,))

    class Other:
        def __radd__(self, other):
            return "radd"

        def __mul__(self, other):
            return "mul"

    assert x + Other() == "radd"
    assert Other() * x == "mul"


def test_numpy_operands():
    x = mx.array([1.0, 2.0])
    n = np.array([10.0, 20.0], dtype=np.float32)
    r = x + n
    assert isinstance(r, mx.array) and r.tolist() == [11.0, 22.0]
    assert (x * np.float32(2)).tolist() == [2.0, 4.0]


def test_available_constants_broadcast_as_views():
    a = mx.array([[1.0], [2.0]])
    mx.eval(a)
    b = mx.ones((2, 3))
    assert (a + b).tolist() == [[2.0] * 3, [3.0] * 3]
    assert (b * a).tolist() == [[1.0] * 3, [2.0] * 3]
    e = mx.zeros((0, 3)) + 1.0
    assert e.shape == (0, 3)
    c = mx.ones((2, 3, 4)) * mx.array(3.0)
    assert c.tolist() == (np.ones((2, 3, 4)) * 3).tolist()


def test_scalars_inside_transformations():
    def f(x):
        return ((x * 2.0 + 1.0) ** 2).sum()

    x = mx.array([1.0, 2.0])
    g = mx.grad(f)(x)
    assert close(g, 4 * (2 * np.array([1.0, 2.0]) + 1))
    cf = mx.compile(f)
    assert close(cf(x), f(x))
    assert close(cf(x + 1.0), f(x + 1.0))
    vf = mx.vmap(lambda r: r * 3.0 + 1.0)
    assert close(vf(mx.ones((2, 3))), np.full((2, 3), 4.0))


def test_int_index_fast_path():
    x = mx.arange(12).reshape(3, 4)
    assert x[0].tolist() == [0, 1, 2, 3]
    assert x[-1].tolist() == [8, 9, 10, 11]
    assert x[2][3].item() == 11
    with pytest.raises(IndexError):
        x[3]
    with pytest.raises(IndexError):
        x[-4]
    with pytest.raises((IndexError, ValueError)):
        x[2 ** 70]
    with pytest.raises(ValueError):
        mx.array(1.0)[0]
    v = mx.arange(5)
    assert v[np.int64(2)].item() == 2
    assert v[4].item() == 4
