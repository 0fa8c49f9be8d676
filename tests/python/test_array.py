"""The array class: construction and dtype inference, dtype objects,
properties, NumPy interop (copies and zero-copy views), printing, Python
conversions and the operators with weakly typed scalars."""

import copy
import pickle

import numpy as np
import pytest

import fluxion.core as mx
from helpers import NP_DTYPES, assert_close

ALL_DTYPES = list(NP_DTYPES)


# --- construction ---

@pytest.mark.parametrize("value,dtype,shape", [
    (True, mx.bool_, ()),
    (3, mx.int32, ()),
    (2**40, mx.int64, ()),
    (-2**40, mx.int64, ()),
    (2**63, mx.uint64, ()),
    (1.5, mx.float32, ()),
    (1 + 2j, mx.complex64, ()),
    ([1, 2, 3], mx.int32, (3,)),
    ([True, False], mx.bool_, (2,)),
    ([True, 2], mx.int32, (2,)),
    ([1, 2.5], mx.float32, (2,)),
    ([[1, 2], [3, 4]], mx.int32, (2, 2)),
    ((1, (2.0, 3)), None, None),  # ragged: checked below
    ([1, 2**40], mx.int64, (2,)),
    ([1j, 2], mx.complex64, (2,)),
    ([], mx.float32, (0,)),
    ([[], []], mx.float32, (2, 0)),
    (((1, 2), (3, 4)), mx.int32, (2, 2)),
])
def test_construction_inference(value, dtype, shape):
    if dtype is None:
        with pytest.raises(ValueError, match=r"\[array\].*non-uniform"):
            mx.array(value)
        return
    x = mx.array(value)
    assert x.dtype == dtype
    assert x.shape == shape
    np.testing.assert_array_equal(np.array(x.tolist()), np.array(value))


@pytest.mark.parametrize("ragged", [[1, [2]], [[1], 2], [[1, 2], [3]],
                                    [[[1]], [2]], [[], [1]]])
def test_ragged_lists_raise(ragged):
    with pytest.raises(ValueError, match="non-uniform"):
        mx.array(ragged)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_construction_with_dtype(dtype):
    x = mx.array([[0, 1], [2, 3]], dtype=dtype)
    assert x.dtype == dtype
    ref = np.array([[0, 1], [2, 3]]).astype(NP_DTYPES[dtype])
    assert_close(x, ref)
    assert mx.array(1, dtype).dtype == dtype
    assert mx.array(1.0, dtype=dtype).dtype == dtype
    assert mx.array(True, dtype=dtype).item() == 1


def test_construction_from_arrays_and_numpy():
    a = mx.array([1, 2])
    assert mx.array(a).tolist() == [1, 2]
    assert mx.array(a, mx.float16).dtype == mx.float16
    s = mx.array([a, a * 2])
    assert s.shape == (2, 2) and s.tolist() == [[1, 2], [2, 4]]
    assert mx.array([np.float32(1), np.float32(2)]).dtype == mx.float32
    assert mx.array(np.float64(2.5)).item() == 2.5
    assert mx.array(np.int16(7)).dtype == mx.int16
    with pytest.raises(ValueError, match=r"\[array\] Cannot convert"):
        mx.array("abc")
    with pytest.raises(ValueError, match=r"\[array\] Invalid type"):
        mx.array([1, "a"])


@pytest.mark.parametrize("np_dtype,mx_dtype", [
    (np.bool_, mx.bool_), (np.uint8, mx.uint8), (np.uint16, mx.uint16),
    (np.uint32, mx.uint32), (np.uint64, mx.uint64), (np.int8, mx.int8),
    (np.int16, mx.int16), (np.int32, mx.int32), (np.int64, mx.int64),
    (np.float16, mx.float16), (np.float32, mx.float32),
    (np.complex64, mx.complex64), (np.complex128, mx.complex64),
])
def test_numpy_round_trip(np_dtype, mx_dtype):
    v = (np.arange(12).reshape(3, 4) % 5).astype(np_dtype)
    x = mx.array(v)
    assert x.dtype == mx_dtype
    back = np.array(x)
    np.testing.assert_array_equal(back, v.astype(back.dtype))
    # Non-contiguous NumPy inputs are copied in logical order.
    xt = mx.array(v.T[::2])
    np.testing.assert_array_equal(np.array(xt), v.T[::2].astype(back.dtype))
    # Strided Fluxion views come out right too.
    np.testing.assert_array_equal(np.array(x.T), v.T.astype(back.dtype))
    np.testing.assert_array_equal(np.array(x[::-1, 1::2]),
                                  v[::-1, 1::2].astype(back.dtype))


def test_float64_numpy_input_defaults_to_float32():
    # Like MLX, NumPy float64 data becomes float32 unless float64 is asked for.
    v = np.arange(6, dtype=np.float64).reshape(2, 3) / 3
    x = mx.array(v)
    assert x.dtype == mx.float32
    np.testing.assert_allclose(np.array(x), v, rtol=1e-6)
    y = mx.array(v, mx.float64)
    assert y.dtype == mx.float64
    np.testing.assert_array_equal(np.array(y), v)


def test_bfloat16_buffer_and_numpy():
    x = mx.array([1.5, -2.0], mx.bfloat16)
    # The buffer protocol exposes bfloat16 under its own format name ...
    m = memoryview(x)
    assert m.format == "bfloat16" and m.itemsize == 2 and m.shape == (2,)
    # ... which NumPy does not know, so a plain conversion names the dtype.
    with pytest.raises(ValueError, match="bfloat16"):
        np.array(x)
    # An explicit cast or dtype request converts.
    np.testing.assert_array_equal(np.array(x.astype(mx.float32)), [1.5, -2.0])
    assert x.__array__(np.float64).dtype == np.float64


def test_zero_copy_views():
    x = mx.arange(12, dtype=mx.float32).reshape(3, 4)
    mx.eval(x)
    a = np.asarray(x)
    b = np.asarray(x)
    assert np.shares_memory(a, b)
    assert a.ctypes.data == b.ctypes.data
    # Transposed and sliced views share the buffer too.
    t = np.asarray(x.T)
    assert np.shares_memory(a, t)
    np.testing.assert_array_equal(t, a.T)
    s = np.asarray(x[1:, ::2])
    assert np.shares_memory(a, s)
    np.testing.assert_array_equal(s, a[1:, ::2])
    # np.array copies.
    assert not np.shares_memory(np.array(x), a)
    # The view keeps the data alive after the array is rebound and freed.
    y = mx.arange(4, dtype=mx.int32) * 3
    view = np.asarray(y)
    y[0] = 100
    del y
    np.testing.assert_array_equal(view, [0, 3, 6, 9])
    # Broadcast views are read-only.
    bc = np.asarray(mx.broadcast_to(mx.array([1.0, 2.0]), (3, 2)))
    assert not bc.flags.writeable


def test_buffer_protocol():
    x = mx.array([[1, 2, 3], [4, 5, 6]], mx.int16)
    m = memoryview(x)
    assert m.format == "h" and m.shape == (2, 3) and m.itemsize == 2
    assert m.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert memoryview(mx.array([1 + 1j])).format == "Zf"
    assert memoryview(mx.array([True])).format == "?"
    mt = memoryview(x.T)
    assert mt.strides == (2, 6)
    assert not mt.c_contiguous
    assert mt.tolist() == [[1, 4], [2, 5], [3, 6]]


def test_dlpack():
    x = mx.arange(6, dtype=mx.float32).reshape(2, 3)
    assert x.__dlpack_device__() == (1, 0)
    y = np.from_dlpack(x)
    np.testing.assert_array_equal(y, np.arange(6).reshape(2, 3))
    assert np.shares_memory(y, np.asarray(x))
    z = np.from_dlpack(x.T)
    np.testing.assert_array_equal(z, np.arange(6).reshape(2, 3).T)
    # An unconsumed capsule frees itself.
    cap = x.__dlpack__()
    del cap


def capsule_name(cap):
    import ctypes
    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype, get.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get(cap).decode()


def test_dlpack_versions_copy_and_device():
    x = mx.arange(6, dtype=mx.float32).reshape(2, 3)
    assert capsule_name(x.__dlpack__()) == "dltensor"
    assert capsule_name(x.__dlpack__(max_version=(1, 0))) == \
        "dltensor_versioned"
    assert capsule_name(x.__dlpack__(max_version=(0, 8))) == "dltensor"
    with pytest.raises(BufferError, match=r"\(2, 0\)"):
        x.__dlpack__(dl_device=(2, 0))
    x.__dlpack__(dl_device=(1, 0))
    # Through our own importer: both capsule kinds, copy or not.
    y = mx.from_dlpack(x)
    assert mx.array_equal(y, x).item()
    z = mx.from_dlpack(x.__dlpack__(max_version=(1, 0), copy=True))
    w = mx.from_dlpack(x.__dlpack__())
    assert np.shares_memory(np.asarray(w), np.asarray(x))
    assert not np.shares_memory(np.asarray(z), np.asarray(x))
    assert mx.array_equal(z, x).item()


def test_from_dlpack_numpy_and_torch():
    import weakref
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    ref = weakref.ref(a)
    x = mx.from_dlpack(a)
    assert x.dtype == mx.int16 and x.shape == (3, 4)
    assert np.shares_memory(np.asarray(x), a)
    np.testing.assert_array_equal(np.asarray(x), a)
    # The producer's buffer stays alive with the array, and is released
    # with it.
    del a
    assert ref() is not None
    mx.eval(x + 1)
    del x
    import gc
    gc.collect()
    assert ref() is None
    # A float64 producer arrives as float32 (MLX), copied; its strides do
    # not matter then.
    b = np.arange(24, dtype=np.float64).reshape(2, 3, 4).transpose(2, 0, 1)
    y = mx.from_dlpack(b)
    assert y.dtype == mx.float32
    np.testing.assert_array_equal(np.asarray(y), b)
    for dt in (np.uint8, np.int64, np.float16, np.complex64):
        c = np.ones((2, 2), dtype=dt)
        assert mx.from_dlpack(c).dtype == getattr(mx, np.dtype(dt).name)
    # NumPy 1.24 exports no bool; our own capsules carry bool and bfloat16.
    for t in (mx.bool_, mx.bfloat16):
        assert mx.from_dlpack(mx.ones((2,), dtype=t)).dtype == t
    with pytest.raises(ValueError, match=r"\[from_dlpack\]"):
        mx.from_dlpack(3)
    torch = pytest.importorskip("torch")
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    u = mx.from_dlpack(t)
    np.testing.assert_array_equal(np.asarray(u), t.numpy())
    back = torch.from_dlpack(mx.arange(4, dtype=mx.int32))
    assert back.tolist() == [0, 1, 2, 3]


def test_array_protocol_copy_keyword():
    x = mx.arange(4, dtype=mx.float32)
    view = x.__array__()
    assert np.shares_memory(view, np.asarray(x))
    copied = x.__array__(copy=True)
    assert not np.shares_memory(copied, np.asarray(x))
    copied[0] = 100
    assert x[0].item() == 0
    assert x.__array__(np.float64).dtype == np.float64
    assert x.__array__(copy=False).dtype == np.float32
    with pytest.raises(ValueError, match=r"copy=False"):
        x.__array__(np.float64, copy=False)
    with pytest.raises(ValueError, match=r"copy=False"):
        x.astype(mx.bfloat16).__array__(copy=False)
    # np.array copies (writeable, independent); np.asarray may share.
    a = np.array(x)
    a[1] = -1
    assert x[1].item() == 1


# --- dtypes ---

def test_dtype_objects():
    assert repr(mx.float32) == "fluxion.core.float32"
    assert repr(mx.bool_) == "fluxion.core.bool"
    assert mx.float32 == mx.float32 and mx.float32 != mx.int32
    assert mx.float32 != "float32"
    assert len({mx.float32, mx.float32, mx.int8}) == 2
    sizes = {mx.bool_: 1, mx.uint16: 2, mx.int64: 8, mx.bfloat16: 2,
             mx.complex64: 8, mx.float64: 8}
    for t, size in sizes.items():
        assert t.size == size
    assert mx.array([1.0]).dtype == mx.float32
    assert mx.issubdtype(mx.float16, mx.floating)
    assert mx.issubdtype(mx.int8, mx.signedinteger)
    assert not mx.issubdtype(mx.uint8, mx.signedinteger)
    assert mx.issubdtype(mx.complex64, mx.inexact)
    assert mx.issubdtype(mx.integer, mx.number)
    assert mx.issubdtype(mx.int32, mx.int32)
    assert not mx.issubdtype(mx.floating, mx.float32)


def test_finfo_iinfo():
    f = mx.finfo(mx.float32)
    assert f.max == float(np.finfo(np.float32).max)
    assert f.min == -f.max
    assert f.eps == float(np.finfo(np.float32).eps)
    assert f.bits == 32 and f.dtype == mx.float32
    assert mx.finfo(mx.float16).max == 65504.0
    assert mx.finfo(mx.bfloat16).eps == 2.0**-7
    assert mx.finfo(mx.float64).eps == np.finfo(np.float64).eps
    # complex64's finfo describes its float32 parts (the array API, MLX).
    assert mx.finfo(mx.complex64).bits == 32
    assert mx.finfo(mx.complex64).dtype == mx.float32
    i = mx.iinfo(mx.int8)
    assert (i.min, i.max, i.bits) == (-128, 127, 8)
    assert mx.iinfo(mx.uint64).max == 2**64 - 1
    assert mx.iinfo(mx.int64).min == -2**63
    with pytest.raises(ValueError, match=r"\[finfo\] int32"):
        mx.finfo(mx.int32)
    with pytest.raises(ValueError, match=r"\[iinfo\] float32"):
        mx.iinfo(mx.float32)


# --- properties and conversions ---

def test_properties():
    x = mx.zeros((2, 3, 4), mx.float16)
    assert x.shape == (2, 3, 4) and isinstance(x.shape, tuple)
    assert (x.ndim, x.size, x.itemsize, x.nbytes) == (3, 24, 2, 48)
    assert x.dtype == mx.float16
    assert x.T.shape == (4, 3, 2)
    c = mx.array([1 + 2j, 3 - 4j])
    assert c.real.tolist() == [1, 3] and c.imag.tolist() == [2, -4]


def test_item_tolist_and_python_conversions():
    assert mx.array(3).item() == 3 and isinstance(mx.array(3).item(), int)
    assert isinstance(mx.array(1.5).item(), float)
    assert mx.array(True).item() is True
    assert mx.array(1 + 2j).item() == 1 + 2j
    assert mx.array([2**63], mx.uint64).item() == 2**63
    assert mx.array(0.5, mx.bfloat16).item() == 0.5
    assert mx.array(7).tolist() == 7
    x = mx.arange(6).reshape(2, 3)
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert x.T.tolist() == [[0, 3], [1, 4], [2, 5]]
    assert int(mx.array(3.7)) == 3
    assert float(mx.array(2)) == 2.0
    assert complex(mx.array(1j)) == 1j
    assert bool(mx.array([1])) and not bool(mx.array(0))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(mx.array([1, 2]))
    with pytest.raises(ValueError, match=r"\[item\]"):
        mx.array([1, 2]).item()


def test_repr_like_mlx():
    assert repr(mx.array([1, 2, 3])) == "array([1, 2, 3], dtype=int32)"
    assert repr(mx.array(2.5)) == "array(2.5, dtype=float32)"
    assert repr(mx.array([True, False])) == \
        "array([True, False], dtype=bool)"
    assert str(mx.array([[1, 2], [3, 4]])) == \
        "array([[1, 2],\n       [3, 4]], dtype=int32)"


def test_copy_pickle_hash():
    x = mx.array([[1.0, 2.0]], mx.bfloat16)
    assert copy.copy(x).tolist() == x.tolist()
    assert copy.deepcopy(x).tolist() == x.tolist()
    y = pickle.loads(pickle.dumps(x))
    assert y.dtype == mx.bfloat16 and y.tolist() == [[1.0, 2.0]]
    assert hash(x) != hash(mx.array([[1.0, 2.0]]))
    assert len({x, x}) == 1


# --- operators ---

BINOPS = [
    ("+", np.add), ("-", np.subtract), ("*", np.multiply),
    ("/", np.true_divide), ("//", np.floor_divide), ("%", np.remainder),
    ("**", np.power), ("==", np.equal), ("!=", np.not_equal),
    ("<", np.less), ("<=", np.less_equal), (">", np.greater),
    (">=", np.greater_equal),
]


@pytest.mark.parametrize("op,ref", BINOPS)
@pytest.mark.parametrize("dtype", [mx.float32, mx.int32, mx.float16])
def test_operators(op, ref, dtype):
    a = np.array([[1, 2, 3], [4, 5, 6]]).astype(NP_DTYPES[dtype])
    b = np.array([2, 1, 3]).astype(NP_DTYPES[dtype])
    x, y = mx.array(a), mx.array(b)
    env = {"x": x, "y": y}
    assert_close(eval(f"x {op} y", env), ref(a, b))
    # Reflected and scalar forms keep the array's dtype (weak scalars).
    out = eval(f"x {op} 2", env)
    assert_close(out, ref(a, np.array(2, a.dtype)))
    if op not in ("==", "!=", "<", "<=", ">", ">=", "/"):
        assert out.dtype == dtype
    assert_close(eval(f"3 {op} x", env), ref(np.array(3, a.dtype), a))
    # In-place forms rebind the Python object; arrays computed from its
    # old value keep that value.
    # (True division of integers would change the dtype, which in-place
    # operators refuse; see test_inplace_keeps_dtype.)
    if op not in ("==", "!=", "<", "<=", ">", ">=") and not (
            op == "/" and dtype == mx.int32):
        w = mx.array(a)
        snapshot = w + 0
        env["w"] = w
        exec(f"w {op}= y", env)
        assert env["w"] is w
        assert_close(w, ref(a, b))
        assert_close(snapshot, a)


def test_inplace_rebinds_same_object():
    x = mx.array([1, 2])
    alias = x
    x += 1
    assert x is alias
    assert alias.tolist() == [2, 3]
    m = mx.ones((2, 2))
    m @= mx.ones((2, 2))
    assert m.tolist() == [[2, 2], [2, 2]]


def test_inplace_keeps_dtype():
    x = mx.array([1, 2])
    with pytest.raises(ValueError, match="dtype"):
        x *= 2.5
    with pytest.raises(ValueError, match="dtype"):
        x /= 2
    assert x.dtype == mx.int32 and x.tolist() == [1, 2]
    f = mx.array([1.0, 2.0], mx.float16)
    f *= 2.5  # weak scalar keeps float16
    assert f.dtype == mx.float16 and f.tolist() == [2.5, 5.0]


def test_scalar_promotion():
    f16 = mx.array([1.0], mx.float16)
    assert (f16 + 1).dtype == mx.float16
    assert (f16 * 2.5).dtype == mx.float16
    assert (1.5 - f16).dtype == mx.float16
    i8 = mx.array([1], mx.int8)
    assert (i8 + 1).dtype == mx.int8
    assert (i8 + 1.5).dtype == mx.float32
    assert (i8 / 2).dtype == mx.float32
    b = mx.array([True])
    assert (b + 1).dtype == mx.int32
    assert (b + True).dtype == mx.bool_
    assert (b * 1.5).dtype == mx.float32
    assert (mx.array([1]) + 1j).dtype == mx.complex64
    # A Python int that does not fit the integer array's dtype is an error
    # rather than a silent wrap.
    with pytest.raises(ValueError, match="300"):
        mx.array([1], mx.uint8) + 300
    assert (mx.array([1], mx.uint8) + 255).tolist() == [0]
    assert (mx.array([1], mx.int64) + 2**40).tolist() == [2**40 + 1]
    assert (mx.array([1.0], mx.float64) * 3).dtype == mx.float64
    # Strong array operands promote normally.
    assert (i8 + mx.array([1], mx.int16)).dtype == mx.int16
    assert (f16 + np.array([1.0], np.float32)).dtype == mx.float32


def test_bitwise_and_unary_operators():
    a = mx.array([12, 10], mx.uint8)
    b = mx.array([10, 6], mx.uint8)
    assert (a & b).tolist() == [8, 2]
    assert (a | b).tolist() == [14, 14]
    assert (a ^ b).tolist() == [6, 12]
    assert (a << 1).tolist() == [24, 20]
    assert (a >> 2).tolist() == [3, 2]
    assert (1 << mx.array([1, 2])).tolist() == [2, 4]
    assert (3 & mx.array([1, 2])).tolist() == [1, 2]
    t = mx.array([True, False])
    assert (t & mx.array([True, True])).tolist() == [True, False]
    assert (t | False).tolist() == [True, False]
    assert (-mx.array([1, -2])).tolist() == [-1, 2]
    assert abs(mx.array([-1.5])).tolist() == [1.5]
    assert (+mx.array([1])).tolist() == [1]
    assert (~mx.array([0], mx.int8)).tolist() == [-1]
    assert round(mx.array([1.26]), 1).tolist() == pytest.approx([1.3])
    with pytest.raises(ValueError, match=r"\[bitwise_and\] Floating"):
        mx.array([1.0]) & 1
    q, r = divmod(mx.array([7, -7]), 2)
    assert q.tolist() == [3, -4] and r.tolist() == [1, 1]


def test_operators_reject_unknown_types():
    x = mx.array([1])
    with pytest.raises(ValueError, match="str"):
        x + "a"
    with pytest.raises(ValueError, match="str"):
        "a" * x
    with pytest.raises(ValueError, match="list"):
        x + [1]
    with pytest.raises(ValueError, match="tuple"):
        x * (1,)
    assert (x == [1]) is False
    assert (x != (1,)) is True
    assert (x == None) is False  # noqa: E711 (identity fallback)
    assert x != None  # noqa: E711


def test_method_forms():
    v = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
    x = mx.array(v)
    assert_close(x.sum(axis=(0, 2)), v.sum(axis=(0, 2)), rtol=1e-5)
    assert_close(x.mean(1, True), v.mean(1, keepdims=True), rtol=1e-5)
    assert_close(x.exp().log(), v, rtol=1e-5, atol=1e-5)
    assert_close(x.sqrt().square(), v, rtol=1e-5, atol=1e-6)
    assert_close(x.abs(), v)
    assert_close((x + 1).rsqrt(), 1 / np.sqrt(v + 1), rtol=1e-5)
    assert_close((x + 1).reciprocal(), 1 / (v + 1), rtol=1e-5)
    assert_close(x.sin(), np.sin(v), rtol=1e-5, atol=1e-6)
    assert_close(x.cos(), np.cos(v), rtol=1e-5, atol=1e-6)
    assert_close((x + 1).log1p(), np.log1p(v + 1), rtol=1e-5)
    assert_close((x + 1).log2(), np.log2(v + 1), rtol=1e-5)
    assert_close((x + 1).log10(), np.log10(v + 1), rtol=1e-5)
    assert_close(x.round(1), np.round(v, 1), rtol=1e-6)
    assert_close(x.prod(axis=2), v.prod(axis=2), rtol=1e-5)
    assert (x > 1).all().item() is False and (x > 1).any().item() is True
    assert_close(x.max(), v.max()) and x.argmax().item() == 23
    assert_close(x.min(0), v.min(0))
    assert x.argmin(axis=1).tolist() == [[0] * 4] * 2
    assert_close(x.var(ddof=1), v.var(ddof=1), rtol=1e-5)
    assert_close(x.std(axis=0), v.std(axis=0), rtol=1e-5)
    assert_close(x.logsumexp(axis=-1),
                 np.log(np.exp(v).sum(-1)), rtol=1e-5)
    assert x.astype(mx.int16).dtype == mx.int16
    assert mx.array([1 + 1j]).conj().tolist() == [1 - 1j]


def test_from_dlpack_copy_strides_and_mapping():
    # copy=None shares, copy=True copies, copy=False shares or raises.
    x = np.arange(3, dtype=np.float32)
    shared, copied = mx.from_dlpack(x), mx.from_dlpack(x, copy=True)
    nocopy = mx.from_dlpack(x, copy=False)
    x += 10
    assert shared.tolist() == nocopy.tolist() == [10.0, 11.0, 12.0]
    assert copied.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match=r"copy=False, but .* imported as "
                                         r"float32, which needs a copy"):
        mx.from_dlpack(np.ones(2), copy=False)
    # Strided producers are shared with their strides (in bytes through the
    # buffer protocol), a broadcast one (read-only: NumPy 1.24 exports it
    # through its buffer, not DLPack) too.
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    step = np.arange(20, dtype=np.int32)[2:10:2]
    bcast = np.broadcast_to(np.array([7], dtype=np.int32), (3,))
    for src in (base.T, step, bcast, base[:, 1:3]):
        y = mx.from_dlpack(src)
        assert y.tolist() == src.tolist()
        assert memoryview(y).strides == src.strides
        assert not memoryview(y).c_contiguous
        np.testing.assert_array_equal(np.array(y + 0), src)
        np.testing.assert_array_equal(np.array(mx.sum(y, axis=0)),
                                      src.sum(axis=0))
    with pytest.raises(ValueError, match=r"\[from_dlpack\] Negative strides"):
        mx.from_dlpack(np.arange(5, dtype=np.float32)[::-1])
    # The dtype mapping of MLX's import: bool through the buffer (NumPy
    # 1.24 has no DLPack bool), float64 -> float32, complex128 -> complex64.
    want = {np.bool_: mx.bool_, np.uint16: mx.uint16, np.uint64: mx.uint64,
            np.int8: mx.int8, np.float16: mx.float16, np.float64: mx.float32,
            np.complex64: mx.complex64, np.complex128: mx.complex64}
    for nd, t in want.items():
        a = (np.arange(4) % 2).astype(nd)
        y = mx.from_dlpack(a)
        assert y.dtype == t, nd
        np.testing.assert_array_equal(np.array(y), a)
    c = np.array([1 + 2j, -3.5 + 0.25j])
    assert mx.from_dlpack(c).tolist() == [1 + 2j, -3.5 + 0.25j]
    if not mx.is_available(mx.gpu):
        with pytest.raises(ValueError, match="gpu"):
            mx.eval(mx.from_dlpack(x, device=mx.gpu))
    # A shared buffer is never taken over as a kernel's output (donation):
    # the producer's memory stays as it was.
    x = np.arange(4, dtype=np.float32)
    y = mx.from_dlpack(x)
    z = mx.exp(y)
    del y
    mx.eval(z)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_array_from_a_dlpack_producer_copies():
    # mx.array takes DLPack producers (PyTorch tensors: bfloat16 has no
    # NumPy form) as copies, with MLX's float64 -> float32.
    class Producer:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return (1, 0)

    src = mx.array([1.5, 2.5, 3.5], mx.bfloat16)
    y = mx.array(Producer(src))
    assert y.dtype == mx.bfloat16 and y.tolist() == [1.5, 2.5, 3.5]
    n = np.arange(3.0)
    z = mx.array(Producer(n))
    n += 1
    assert z.dtype == mx.float32 and z.tolist() == [0.0, 1.0, 2.0]
    assert mx.array(Producer(n), mx.int32).tolist() == [1, 2, 3]
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16)
    a = mx.array(t)
    assert a.dtype == mx.bfloat16 and a.tolist() == [1.0, 2.0, 3.0]
