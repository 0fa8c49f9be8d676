"""degrees, radians, isposinf, isneginf and nan_to_num against NumPy."""

import numpy as np
import pytest

import fluxion.core as mx
from helpers import assert_close, from_np, rand, to_np

FLOATS = [mx.float16, mx.bfloat16, mx.float32, mx.float64]
SPECIAL = np.array([1.5, -np.inf, np.nan, np.inf, -2.0, 0.0, 7.0, -0.0])


@pytest.mark.parametrize("name", ["degrees", "radians"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_angle_conversions(name, dtype):
    x = rand((3, 4), dtype, -7, 7)
    a = from_np(x, dtype)
    ref = getattr(np, name)(x.astype(np.float64))
    assert_close(getattr(mx, name)(a), ref, dtype=dtype)
    # A transposed view.
    assert_close(getattr(mx, name)(a.T), ref.T, dtype=dtype)


@pytest.mark.parametrize("name", ["degrees", "radians"])
def test_angle_conversions_of_ints_are_float32(name):
    out = getattr(mx, name)(mx.array([0, 90, -180], mx.int16))
    assert out.dtype == mx.float32
    assert_close(out, getattr(np, name)(np.array([0.0, 90.0, -180.0])),
                 dtype=mx.float32)


def test_angle_conversion_gradients():
    g = mx.grad(lambda x: mx.sum(mx.degrees(x)))(mx.array([0.5, 2.0]))
    assert np.allclose(to_np(g), 180 / np.pi, rtol=1e-6)
    g = mx.grad(lambda x: mx.sum(mx.radians(x) ** 2))(mx.array([30.0]))
    assert np.allclose(to_np(g), 2 * np.radians(30.0) * np.pi / 180,
                       rtol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
def test_isposinf_isneginf(dtype):
    a = from_np(SPECIAL, dtype)
    assert to_np(mx.isposinf(a)).tolist() == np.isposinf(SPECIAL).tolist()
    assert to_np(mx.isneginf(a)).tolist() == np.isneginf(SPECIAL).tolist()
    # A broadcast view.
    b = mx.broadcast_to(a, (2, 8))
    assert to_np(mx.isposinf(b)).tolist() == np.broadcast_to(
        np.isposinf(SPECIAL), (2, 8)).tolist()


def test_isposinf_of_ints_and_bools_is_false():
    for a in (mx.array([1, -5, 0]), mx.array([True, False, True]),
              mx.array([200, 0, 1], mx.uint8)):
        assert mx.isposinf(a).dtype == mx.bool_
        assert mx.isposinf(a).tolist() == [False] * 3
        assert mx.isneginf(a).tolist() == [False] * 3


def test_isposinf_of_complex():
    # As MLX: equality with (+-inf) + 0j.
    inf = float("inf")
    z = mx.array([1 + 2j, complex(inf, 0), complex(-inf, 0), complex(inf, 1)])
    assert mx.isposinf(z).tolist() == [False, True, False, False]
    assert mx.isneginf(z).tolist() == [False, False, True, False]


@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_to_num_defaults(dtype):
    a = from_np(SPECIAL, dtype)
    out = mx.nan_to_num(a)
    assert out.dtype == dtype
    npt = {mx.float16: np.float16, mx.float32: np.float32,
           mx.float64: np.float64, mx.bfloat16: np.float32}[dtype]
    big = {mx.bfloat16: 3.3895313892515355e38}.get(dtype,
                                                     np.finfo(npt).max)
    ref = np.nan_to_num(SPECIAL, posinf=big, neginf=-big)
    got = to_np(out).astype(np.float64)
    assert np.all(np.isfinite(got))
    assert np.array_equal(got, ref.astype(npt).astype(np.float64))


@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_to_num_values(dtype):
    a = from_np(SPECIAL, dtype)
    out = mx.nan_to_num(a, nan=-1.0, posinf=100.0, neginf=-50.0)
    ref = np.nan_to_num(SPECIAL, nan=-1.0, posinf=100.0, neginf=-50.0)
    assert_close(out, ref, dtype=dtype)
    # Only some given; a transposed view.
    m = from_np(SPECIAL.reshape(2, 4), dtype).T
    src = SPECIAL.reshape(2, 4).T
    got = to_np(mx.nan_to_num(m, 3.0, posinf=9.0)).astype(np.float64)
    neg = np.isneginf(src)
    ref = np.nan_to_num(src, nan=3.0, posinf=9.0)
    assert np.array_equal(got[~neg], ref[~neg])
    # -inf becomes the dtype's lowest finite value.
    assert np.all(np.isfinite(got)) and np.all(got[neg] <= -65504.0)


def test_nan_to_num_complex_and_ints():
    z = np.array([complex(np.nan, np.inf), complex(-np.inf, 2.0), 1 - 1j],
                 np.complex64)
    out = mx.nan_to_num(mx.array(z), posinf=5.0, neginf=-6.0)
    assert out.dtype == mx.complex64
    assert np.array_equal(np.array(out),
                          np.nan_to_num(z, posinf=5.0, neginf=-6.0))
    ints = mx.array([1, -2, 3])
    assert mx.nan_to_num(ints, nan=9.0).tolist() == [1, -2, 3]
    assert mx.nan_to_num(ints).dtype == mx.int32


def test_nan_to_num_gradient_passes_finite_values():
    x = mx.array([1.0, np.nan, np.inf, 2.0])
    g = mx.grad(lambda v: mx.sum(mx.nan_to_num(v) * 3.0))(x)
    assert to_np(g).tolist() == [3.0, 0.0, 0.0, 3.0]
