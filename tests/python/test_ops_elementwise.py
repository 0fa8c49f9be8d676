"""Elementwise ops against NumPy, table-driven over dtypes and layouts."""

import math

import numpy as np
import pytest

import fluxion.core as mx
from helpers import assert_close, from_np, rand, to_np

FLOATS = [mx.float16, mx.bfloat16, mx.float32, mx.float64]
SIGNED = [mx.int8, mx.int16, mx.int32, mx.int64]
UNSIGNED = [mx.uint8, mx.uint16, mx.uint32, mx.uint64]
INTS = SIGNED + UNSIGNED

erf = np.vectorize(math.erf)
erfc = np.vectorize(math.erfc)

# name, NumPy reference (on float64), dtypes, input domain (low, high)
UNARY = [
    ("abs", np.abs, FLOATS + SIGNED + [mx.complex64], (-3, 3)),
    ("negative", np.negative, FLOATS + SIGNED + [mx.complex64], (-3, 3)),
    ("sign", np.sign, FLOATS + SIGNED, (-3, 3)),
    ("exp", np.exp, FLOATS + [mx.complex64], (-3, 3)),
    ("expm1", np.expm1, FLOATS, (-1, 1)),
    ("log", np.log, FLOATS, (0.1, 5)),
    ("log1p", np.log1p, FLOATS, (-0.5, 5)),
    ("log2", np.log2, FLOATS, (0.1, 5)),
    ("log10", np.log10, FLOATS, (0.1, 5)),
    ("sqrt", np.sqrt, FLOATS, (0.1, 5)),
    ("rsqrt", lambda x: 1 / np.sqrt(x), FLOATS, (0.1, 5)),
    ("square", np.square, FLOATS + SIGNED + [mx.complex64], (-3, 3)),
    ("reciprocal", np.reciprocal, FLOATS, (0.5, 3)),
    ("sin", np.sin, FLOATS + [mx.complex64], (-3, 3)),
    ("cos", np.cos, FLOATS + [mx.complex64], (-3, 3)),
    ("tan", np.tan, FLOATS, (-1, 1)),
    ("arcsin", np.arcsin, FLOATS, (-0.9, 0.9)),
    ("arccos", np.arccos, FLOATS, (-0.9, 0.9)),
    ("arctan", np.arctan, FLOATS, (-3, 3)),
    ("sinh", np.sinh, FLOATS, (-2, 2)),
    ("cosh", np.cosh, FLOATS, (-2, 2)),
    ("tanh", np.tanh, FLOATS, (-2, 2)),
    ("arcsinh", np.arcsinh, FLOATS, (-3, 3)),
    ("arccosh", np.arccosh, FLOATS, (1.1, 4)),
    ("arctanh", np.arctanh, FLOATS, (-0.9, 0.9)),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), FLOATS, (-4, 4)),
    ("erf", erf, FLOATS, (-2, 2)),
    ("erfc", erfc, FLOATS, (-2, 3)),
    ("floor", np.floor, FLOATS, (-3, 3)),
    ("ceil", np.ceil, FLOATS, (-3, 3)),
    ("round", np.round, FLOATS, (-3, 3)),
    ("logical_not", np.logical_not, [mx.bool_], (0, 1)),
    ("isnan", np.isnan, FLOATS, (-3, 3)),
    ("isinf", np.isinf, FLOATS, (-3, 3)),
    ("isfinite", np.isfinite, FLOATS, (-3, 3)),
    ("conjugate", np.conjugate, [mx.complex64], (-3, 3)),
    ("conj", np.conjugate, [mx.complex64], (-3, 3)),
    ("real", np.real, [mx.complex64], (-3, 3)),
    ("imag", np.imag, [mx.complex64], (-3, 3)),
    ("stop_gradient", lambda x: x, FLOATS + INTS, (-3, 3)),
    ("copy", lambda x: x, FLOATS + INTS + [mx.bool_], (-3, 3)),
]


def unary_cases():
    for name, ref, dtypes, domain in UNARY:
        for dt in dtypes:
            yield pytest.param(name, ref, dt, domain, id=f"{name}-{dt}")


@pytest.mark.parametrize("name,ref,dtype,domain", unary_cases())
def test_unary(name, ref, dtype, domain):
    vals = rand((3, 5), dtype, *domain)
    if name in ("isnan", "isinf", "isfinite"):
        vals[0, :3] = [np.nan, np.inf, -np.inf]
    fn = getattr(mx, name)
    x = from_np(vals, dtype)
    expected = ref(vals.astype(np.complex128 if dtype == mx.complex64
                               else np.float64 if dtype != mx.bool_ and
                               not np.issubdtype(vals.dtype, np.integer)
                               else vals.dtype))
    out = fn(x)
    assert_close(out, expected, dtype=dtype if out.dtype != mx.bool_ else None)
    # The same op on a transposed (strided) view.
    out_t = fn(x.T)
    assert_close(out_t, np.asarray(expected).T,
                 dtype=dtype if out.dtype != mx.bool_ else None)


def test_unary_dtypes_follow_mlx():
    i = mx.array([1, 4, 9])
    assert mx.sqrt(i).dtype == mx.float32
    assert mx.exp(i).dtype == mx.float32
    assert mx.abs(i).dtype == mx.int32
    assert mx.square(i).dtype == mx.int32
    assert mx.isnan(mx.array([1.0])).dtype == mx.bool_
    assert mx.real(mx.array([1 + 2j])).dtype == mx.float32
    assert_close(mx.round(mx.array([1.234, -5.678]), 2), [1.23, -5.68])
    assert_close(mx.round(mx.array([0.5, 1.5, 2.5])), [0.0, 2.0, 2.0])


def test_erfinv_inverts_erf():
    x = np.linspace(-0.9, 0.9, 11).astype(np.float32)
    y = mx.erfinv(mx.array(x))
    assert_close(mx.array(erf(to_np(y).astype(np.float64))), x, rtol=1e-5,
                 dtype=mx.float32)


def test_bitwise_invert():
    assert mx.bitwise_invert(mx.array([0, 5], mx.uint8)).tolist() == [255, 250]
    assert (~mx.array([1, -2])).tolist() == [-2, 1]
    assert (~mx.array([True, False])).tolist() == [False, True]


# name, NumPy reference, dtypes, domain of b
BINARY = [
    ("add", np.add, FLOATS + INTS + [mx.complex64], None),
    ("subtract", np.subtract, FLOATS + INTS + [mx.complex64], None),
    ("multiply", np.multiply, FLOATS + INTS + [mx.complex64], None),
    ("divide", np.true_divide, FLOATS + [mx.complex64], (0.5, 3)),
    ("floor_divide", np.floor_divide, FLOATS + SIGNED, (1, 3)),
    ("remainder", np.remainder, FLOATS + SIGNED, (1, 3)),
    ("power", np.power, FLOATS, (0.5, 2)),
    ("maximum", np.maximum, FLOATS + INTS, None),
    ("minimum", np.minimum, FLOATS + INTS, None),
    ("arctan2", np.arctan2, FLOATS, None),
    ("logaddexp", np.logaddexp, FLOATS, None),
    ("equal", np.equal, FLOATS + INTS + [mx.bool_], None),
    ("not_equal", np.not_equal, FLOATS + INTS + [mx.bool_], None),
    ("less", np.less, FLOATS + INTS, None),
    ("less_equal", np.less_equal, FLOATS + INTS, None),
    ("greater", np.greater, FLOATS + INTS, None),
    ("greater_equal", np.greater_equal, FLOATS + INTS, None),
    ("logical_and", np.logical_and, [mx.bool_], None),
    ("logical_or", np.logical_or, [mx.bool_], None),
    ("bitwise_and", np.bitwise_and, INTS + [mx.bool_], None),
    ("bitwise_or", np.bitwise_or, INTS + [mx.bool_], None),
    ("bitwise_xor", np.bitwise_xor, INTS + [mx.bool_], None),
    ("left_shift", np.left_shift, [mx.int32, mx.uint8, mx.int64], (0, 3)),
    ("right_shift", np.right_shift, [mx.int32, mx.uint8, mx.int64], (0, 3)),
]


def binary_cases():
    for name, ref, dtypes, domain in BINARY:
        for dt in dtypes:
            yield pytest.param(name, ref, dt, domain, id=f"{name}-{dt}")


@pytest.mark.parametrize("name,ref,dtype,domain", binary_cases())
def test_binary(name, ref, dtype, domain):
    lo_a = 0 if dtype in (mx.uint8, mx.uint16, mx.uint32, mx.uint64) else -3
    a = rand((3, 1), dtype, lo_a, 3, seed=1)
    b = rand((4,), dtype, *(domain or (lo_a, 3)), seed=2)
    if name == "power":
        a = np.abs(a) + np.asarray(0.5, a.dtype)
    fn = getattr(mx, name)
    out = fn(from_np(a, dtype), from_np(b, dtype))
    with np.errstate(all="ignore"):
        wide = (np.complex128 if dtype == mx.complex64 else np.float64
                if dtype in FLOATS else None)
        expected = ref(a.astype(wide) if wide else a,
                       b.astype(wide) if wide else b)
    assert out.shape == (3, 4)
    check_dtype = dtype if out.dtype not in (mx.bool_,) else None
    assert_close(out, expected, dtype=check_dtype)


def test_binary_result_dtypes():
    i = mx.array([1, 2])
    assert mx.divide(i, i).dtype == mx.float32
    assert mx.equal(i, i).dtype == mx.bool_
    assert mx.add(mx.array([1], mx.uint8), mx.array([1], mx.int8)).dtype == \
        mx.int16
    assert mx.add(i, mx.array([1.0])).dtype == mx.float32
    assert mx.add(mx.array([1], mx.float16), mx.array([1], mx.bfloat16)) \
        .dtype == mx.float32
    assert mx.add(mx.array([1], mx.uint32), i).dtype == mx.int64


def test_binary_python_scalars_are_weak():
    h = mx.array([1, 2], mx.float16)
    assert mx.add(h, 1.5).dtype == mx.float16
    assert mx.add(2, h).dtype == mx.float16
    u = mx.array([250], mx.uint8)
    assert mx.add(u, 10).dtype == mx.uint8
    assert mx.add(u, 10).tolist() == [4]  # wraps like uint8 arithmetic
    assert mx.multiply(u, 0.5).dtype == mx.float32
    assert mx.add(mx.array([True]), 1).dtype == mx.int32
    # Two scalars: each is converted on its own.
    assert mx.add(1, 2).dtype == mx.int32
    assert mx.add(1, 2.0).dtype == mx.float32
    assert mx.add(1, 2.0).item() == 3.0
    # NumPy arrays are strongly typed.
    assert mx.add(mx.array([1], mx.float16),
                  np.array([1.0], np.float32)).dtype == mx.float32


def test_divmod():
    q, r = mx.divmod(mx.array([7, -7]), 3)
    assert q.tolist() == [2, -3]
    assert r.tolist() == [1, 2]


def test_erfc_tail_and_gradient():
    # 1 - erf(x) is 0 in float32 from x = 4 on; erfc keeps every bit.
    x = np.array([0.5, 2.0, 4.0, 6.0, 9.0], dtype=np.float32)
    got = np.array(mx.erfc(mx.array(x)))
    want = erfc(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert np.all(got > 0)
    assert (1 - mx.erf(mx.array(6.0))).item() == 0.0
    # d/dx erfc(x) = -2/sqrt(pi) exp(-x^2)
    g = mx.grad(lambda v: mx.erfc(v).sum())(mx.array(x[:3]))
    np.testing.assert_allclose(
        np.array(g), -2 / np.sqrt(np.pi) * np.exp(-x[:3].astype(np.float64) ** 2),
        rtol=1e-5)
    with pytest.raises(ValueError, match=r"\[erfc\] Not supported for complex64"):
        mx.erfc(mx.array([1 + 2j]))
