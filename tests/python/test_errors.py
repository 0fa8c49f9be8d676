"""C++ exceptions surface as ValueError / IndexError / RuntimeError with
the "[op]" tag; bad argument types are TypeErrors."""

import pytest

import fluxion.core as mx

X = mx.ones((2, 3))

CASES = [
    (lambda: mx.reshape(X, (5,)), ValueError,
     r"^\[reshape\] Cannot reshape array of shape \(2,3\)"),
    (lambda: mx.sum(X, axis=5), ValueError,
     r"^\[sum\] Invalid axis 5 for array with 2 dimensions"),
    (lambda: mx.transpose(X, (0, 0)), ValueError, r"^\[transpose\]"),
    (lambda: mx.matmul(X, X), ValueError, r"^\[matmul\] Last dimension"),
    (lambda: mx.concatenate([]), ValueError, r"^\[concatenate\] No arrays"),
    (lambda: mx.arange(0, 5, 0), ValueError, r"^\[arange\] The step"),
    (lambda: mx.zeros((-1,)), ValueError, r"^\[full\] Negative dimensions"),
    (lambda: mx.add(X, mx.ones((4,))), ValueError,
     r"^\[add\] Shapes \(2,3\) and \(4\) cannot be broadcast"),
    (lambda: mx.clip(X, None, None), ValueError, r"^\[clip\] At least one"),
    (lambda: mx.pad(X, 1, mode="wrap"), ValueError,
     r"^\[pad\] Invalid padding mode"),
    (lambda: mx.split(X, 4, axis=1), ValueError, r"^\[split\]"),
    (lambda: mx.eval(mx.take(X, mx.array([9]), axis=0)), IndexError,
     r"^\[take\] Index 9 is out of bounds for axis 0 with size 2"),
    (lambda: mx.add(X, X, stream=mx.gpu), ValueError,
     r"^\[default_stream\] Cannot get the gpu stream"),
    (lambda: mx.array([1, 2]).item(), ValueError, r"^\[item\]"),
    (lambda: mx.random.key(0) + "x", ValueError,
     r"\[array\] Cannot use an operand of type str"),
    (lambda: mx.sum(X, axis="a"), TypeError, r"incompatible function"),
    (lambda: mx.array(object()), ValueError, r"^\[array\] Cannot convert"),
    (lambda: mx.array([1, [2]]), ValueError, r"^\[array\] Initialization"),
    (lambda: mx.tensordot(X, X, axes=(1, 2, 3)), ValueError,
     r"^\[tensordot\] axes must be"),
    (lambda: mx.slice_update(X, mx.ones((3,)), [0], [0]), ValueError,
     r"^\[slice_update\] The update must have"),
    (lambda: mx.pad(X, [(1, 2, 3)]), ValueError, r"^\[pad\] Each pad width"),
]


@pytest.mark.parametrize("fn,exc,pattern", CASES)
def test_error(fn, exc, pattern):
    with pytest.raises(exc, match=pattern):
        fn()


def test_errors_do_not_poison_later_work():
    with pytest.raises(IndexError):
        mx.eval(mx.take(X, mx.array([7]), axis=1))
    assert mx.sum(X).item() == 6.0
