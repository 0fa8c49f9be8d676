"""Array and Python semantics that follow MLX (issue 11, section 3):
comparisons with non-arrays, operand types, conversions from Python and
NumPy objects, indexing limits, in-place operators, formatting, and a set of
per-op edge cases. Values are checked against NumPy or by hand."""

import threading

import numpy as np
import pytest

import fluxion.core as mx


# --- comparisons and operands -------------------------------------------

def test_equality_with_sequences_and_objects_is_object_equality():
    x = mx.array([1, 2])
    assert (x == [1, 2]) is False
    assert (x == (1, 2)) is False
    assert (x != [1, 2]) is True
    assert (x == "ab") is False
    assert (x == None) is False  # noqa: E711
    assert (x != object()) is True
    # Scalars and NumPy arrays still compare elementwise.
    assert (x == 1).tolist() == [True, False]
    assert (x == np.array([1, 3])).tolist() == [True, False]


@pytest.mark.parametrize("other,name", [
    ([1, 2], "list"), ((1, 2), "tuple"), ("ab", "str"), (b"ab", "bytes")])
def test_operators_reject_sequence_and_text_operands(other, name):
    x = mx.array([1, 2])
    for fn in (lambda: x + other, lambda: other * x, lambda: x < other,
               lambda: x @ other, lambda: other - x):
        with pytest.raises(ValueError,
                           match=rf"\[array\] Cannot use an operand of type "
                                 rf"{name}"):
            fn()


def test_unknown_operand_defers_to_its_reflected_operator():
    class Other:
        def __radd__(self, a):
            return "radd"

    assert mx.array([1]) + Other() == "radd"


# --- in-place operators ---------------------------------------------------

def test_inplace_operators_keep_the_dtype():
    a = mx.array([4, 6])
    with pytest.raises(ValueError, match=r"in-place.*int32.*float32"):
        a /= 1
    with pytest.raises(ValueError, match="dtype"):
        a += mx.array([0.5, 0.5])
    b = mx.array([1.5, 2.5])
    b += mx.array([1, 1])  # int operand, float32 result: fine
    assert b.dtype == mx.float32 and b.tolist() == [2.5, 3.5]
    a //= 4
    assert a.tolist() == [1, 1]


# --- conversions -----------------------------------------------------------

def test_numpy_float64_becomes_float32():
    v = np.array([[0.1, 0.2], [0.3, 0.4]])
    assert mx.array(v).dtype == mx.float32
    assert mx.asarray(v).dtype == mx.float32
    assert mx.array(v, dtype=mx.float64).dtype == mx.float64
    # Other NumPy dtypes keep theirs.
    assert mx.array(v.astype(np.float16)).dtype == mx.float16
    assert mx.array(np.arange(3, dtype=np.int64)).dtype == mx.int64


def test_lists_mixing_arrays_and_lists():
    x = mx.array([mx.array([1, 2]), [3, 4], (5, 6)])
    assert x.shape == (3, 2) and x.dtype == mx.int32
    assert x.tolist() == [[1, 2], [3, 4], [5, 6]]
    y = mx.array([[mx.array(1.5), 2], [3, mx.array(4)]])
    assert y.dtype == mx.float32 and y.tolist() == [[1.5, 2], [3, 4]]
    # The arrays stay in the graph: gradients flow through.
    g = mx.grad(lambda a: mx.array([a, [1.0, 1.0]]).sum() * a.sum())(
        mx.array([1.0, 2.0]))
    # f = (sum(a) + 2) * sum(a): df/da_i = 2 * sum(a) + 2 = 8 at a = [1, 2].
    assert g.tolist() == [8.0, 8.0]
    with pytest.raises(ValueError):
        mx.array([mx.array([1, 2]), [3]])


def test_bytes_and_buffers_become_uint8():
    assert mx.array(b"\x01\x02\xff").tolist() == [1, 2, 255]
    x = mx.array(bytearray(b"\x07"))
    assert x.dtype == mx.uint8 and x.tolist() == [7]
    assert mx.array(b"\x01\x02", mx.int32).tolist() == [1, 2]
    m = memoryview(np.arange(4, dtype=np.int16))
    assert mx.array(m).dtype == mx.int16


def test_bfloat16_memoryview():
    x = mx.array([1.0, -2.5, 3.0], mx.bfloat16)
    m = memoryview(x)
    assert m.format == "bfloat16" and m.nbytes == 6
    raw = np.frombuffer(m.tobytes(), np.uint16).astype(np.uint32) << 16
    np.testing.assert_array_equal(raw.view(np.float32), [1.0, -2.5, 3.0])


# --- indexing ----------------------------------------------------------------

def test_boolean_mask_setitem_matches_numpy():
    v = np.arange(12, dtype=np.float32).reshape(3, 4)
    for mask in (v > 5, (v % 2) == 0, np.array([True, False, True])):
        for val in (-1.0, np.float32(7)):
            ref = v.copy()
            ref[mask] = val
            x = mx.array(v)
            x[mx.array(mask)] = val
            np.testing.assert_array_equal(np.array(x), ref)
    # Values that match the number of selected elements are placed in order.
    ref = v.copy()
    ref[v > 8] = [10, 20, 30]
    x = mx.array(v)
    x[x > 8] = mx.array([10.0, 20.0, 30.0])
    np.testing.assert_array_equal(np.array(x), ref)


def test_zero_dim_setitem():
    x = mx.array(1.0)
    x[()] = 2
    assert x.item() == 2
    x[...] = 3
    assert x.item() == 3
    with pytest.raises(ValueError, match=r"\[setitem\] Cannot index a 0-d"):
        x[0] = 1
    y = mx.array([1, 2])
    y[mx.array(1)] = 9  # a 0-d index array indexes one element
    assert y.tolist() == [1, 9]


def test_indices_past_int32_raise():
    x = mx.arange(4)
    with pytest.raises(ValueError, match="4294967296"):
        x[: 2**32]
    with pytest.raises(ValueError, match="4294967296"):
        x[2**32]
    with pytest.raises(ValueError, match="4294967296"):
        x[2**32] = 1
    assert x[: 2**31 - 1].tolist() == [0, 1, 2, 3]


# --- Python ints, shapes and axes --------------------------------------------

def test_shape_ints_outside_int32_raise_overflow_error():
    for fn in (lambda: mx.zeros(2**31), lambda: mx.ones([2, 2**31]),
               lambda: mx.full((2**31,), 1.0),
               lambda: mx.reshape(mx.zeros(4), [2**31]),
               lambda: mx.broadcast_to(mx.zeros(4), [2**31, 4]),
               lambda: mx.sum(mx.zeros(4), axis=2**31)):
        with pytest.raises(OverflowError, match="2147483648"):
            fn()


def test_weak_int_that_does_not_fit_the_dtype_raises():
    with pytest.raises(ValueError, match="3000000000.*int32"):
        mx.array([1]) + 3000000000
    with pytest.raises(ValueError, match="-1.*uint8"):
        mx.array([1], mx.uint8) * -1
    assert (mx.array([1], mx.int64) + 3000000000).tolist() == [3000000001]
    assert (mx.array([1.0]) + 3000000000).dtype == mx.float32


@pytest.mark.parametrize("fn", [
    lambda x: mx.sum(x, axis=2), lambda x: mx.mean(x, axis=-3),
    lambda x: mx.transpose(x, (0, 2)), lambda x: mx.softmax(x, axis=5),
    lambda x: mx.sort(x, axis=2), lambda x: mx.cumsum(x, axis=3),
    lambda x: mx.expand_dims(x, 4), lambda x: mx.squeeze(x, 2),
    lambda x: mx.take(x, mx.array([0]), axis=2),
    lambda x: mx.flip(x, axis=2), lambda x: mx.diff(x, axis=3)])
def test_invalid_axes_raise_value_error(fn):
    with pytest.raises(ValueError, match=r"^\[\w+\].*axis"):
        fn(mx.zeros((2, 3)))


def test_diff_axis_message():
    with pytest.raises(ValueError, match=r"^\[diff\] .*3.*2"):
        mx.diff(mx.zeros((2, 3)), axis=3)


# --- formatting and devices -----------------------------------------------------

def test_format_spec():
    assert f"{mx.array(3.14159):.2f}" == "3.14"
    assert f"{mx.array(7):>4}" == "   7"
    assert format(mx.array(True), "") == repr(mx.array(True))
    assert f"{mx.array([1, 2])}" == repr(mx.array([1, 2]))
    with pytest.raises(TypeError, match="0-d arrays only"):
        f"{mx.array([1.0, 2.0]):.2f}"


def test_device_type_compares_with_device():
    d = mx.Device(mx.cpu)
    assert d.type == mx.cpu
    assert d.type == d and d == d.type
    assert d == mx.cpu and mx.cpu == d
    assert mx.default_device() == mx.cpu
    assert not (d == mx.gpu) and mx.gpu != d
    assert mx.cpu != mx.gpu and mx.cpu == mx.cpu
    assert (mx.cpu == "cpu") is False
    assert len({mx.cpu, mx.cpu, mx.gpu}) == 2


def test_thread_local_stream_checks():
    s = mx.new_stream(mx.cpu)
    errors = []

    def use():
        try:
            mx.eval(mx.add(mx.array(1), 1, stream=s))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=use)
    t.start()
    t.join()
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError)
    assert "new_thread_local_stream" in str(errors[0])


# --- reductions, random and linear algebra edge cases --------------------------

def test_max_min_of_empty_axes():
    x = mx.zeros((0, 3))
    for fn in (mx.max, mx.min):
        with pytest.raises(ValueError, match="empty"):
            fn(x, axis=0)
        with pytest.raises(ValueError, match="empty"):
            fn(x)
        assert fn(x, axis=1).shape == (0,)
    assert mx.argmax(mx.zeros((3, 0)), axis=0).shape == (0,)


def test_bernoulli_argument_checks():
    with pytest.raises(ValueError, match=r"\[random.bernoulli\].*int32"):
        mx.random.bernoulli(mx.array([1, 0]))
    with pytest.raises(ValueError, match=r"\[random.bernoulli\].*\(3\)"):
        mx.random.bernoulli(mx.array([0.5, 0.5]), shape=(3,))
    out = mx.random.bernoulli(mx.array([0.0, 1.0]), shape=(4, 2))
    assert out.dtype == mx.bool_ and out.shape == (4, 2)
    assert mx.all(out[:, 1]).item() and not mx.any(out[:, 0]).item()


def test_randint_and_truncated_normal_with_empty_range():
    assert mx.random.randint(5, 3, (3,)).tolist() == [5, 5, 5]
    assert mx.random.randint(4, 4, (2,)).tolist() == [4, 4]
    assert mx.random.truncated_normal(2.0, 1.0, (2,)).tolist() == [2.0, 2.0]


@pytest.mark.parametrize("sampler", [mx.random.normal, mx.random.laplace])
def test_half_precision_normal_and_laplace_loc_scale(sampler):
    for dt in (mx.float16, mx.bfloat16):
        x = sampler((2000,), dtype=dt, loc=3.0, scale=0.5, key=mx.random.key(1))
        assert x.dtype == dt
        m = mx.mean(x.astype(mx.float32)).item()
        assert abs(m - 3.0) < 0.1
        c = sampler((3,), dtype=dt, loc=-2.0, scale=0.0)
        assert c.tolist() == [-2.0, -2.0, -2.0]


def test_meshgrid_returns_a_tuple():
    out = mx.meshgrid(mx.arange(2), mx.arange(3))
    assert isinstance(out, tuple) and len(out) == 2
    ref = np.meshgrid(np.arange(2), np.arange(3))
    for a, r in zip(out, ref):
        np.testing.assert_array_equal(np.array(a), r)


def test_norm_of_integers_and_pinv_of_empty():
    n = mx.linalg.norm(mx.array([3, 4]))
    assert n.dtype == mx.float32 and n.item() == 5.0
    m = mx.linalg.norm(mx.array([[1, 2], [3, 4]]), "fro")
    assert m.item() == pytest.approx(np.linalg.norm([[1, 2], [3, 4]]))
    for shape in ((0, 3), (3, 0), (2, 0, 4)):
        p = mx.linalg.pinv(mx.zeros(shape))
        assert p.shape == np.linalg.pinv(np.zeros(shape)).shape


def test_einsum_path_is_numpys_greedy_path():
    ops = [np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5))]
    path, text = mx.einsum_path("ij,jk,kl->il", *[mx.array(o) for o in ops])
    ref, _ = np.einsum_path("ij,jk,kl->il", *ops, optimize="greedy")
    assert path == ref[1:]
    assert "Complete contraction" in text
    np.testing.assert_allclose(
        np.array(mx.einsum("ij,jk,kl->il", *[mx.array(o) for o in ops])),
        np.einsum("ij,jk,kl->il", *ops))


def test_integer_power_with_negative_exponents():
    for dt in (mx.int8, mx.int32, mx.int64):
        x = mx.power(mx.array([2, -2, 1, 3], dt), mx.array([-1, -3, -9, 2], dt))
        assert x.dtype == dt and x.tolist() == [0, 0, 0, 9]
    assert mx.power(2, -1).item() == 0


def test_float_power_of_two_is_the_exact_square():
    # A scalar exponent of 2 squares (as NumPy does): bit for bit x * x,
    # for every float dtype, strided and broadcast bases, NaN and inf;
    # other exponents keep pow.
    rng = np.random.default_rng(7)
    base = rng.standard_normal((40, 33)).astype(np.float32) * 100
    base[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    for dt in (mx.float16, mx.bfloat16, mx.float32, mx.float64):
        x = mx.array(base).astype(dt)
        for b in (x, x[:, ::3], x.T, mx.broadcast_to(x[:1], (5, 33))):
            for p in (b ** 2, mx.power(b, mx.array(2.0, dt)), b ** 2.0):
                assert p.dtype == dt
                assert mx.array_equal(p, b * b, equal_nan=True).item()
        small = mx.abs(x[1:]) / 100
        np.testing.assert_allclose(
            np.array((small ** 2.5).astype(mx.float32)),
            np.array(small.astype(mx.float32)) ** 2.5, rtol=2e-2, atol=1e-3)
    x = mx.array(base[1:])
    np.testing.assert_allclose(np.array(x ** 3), base[1:] ** 3, rtol=1e-6)
    np.testing.assert_array_equal(
        np.array(mx.grad(lambda v: mx.sum(v ** 2))(mx.array([1.5, -3.0]))),
        [3.0, -6.0])


def test_round_integers_with_negative_decimals():
    v = np.array([125, 135, -125, 1234, 15, 25, -15])
    for d in (-1, -2):
        x = mx.round(mx.array(v.astype(np.int32)), d)
        assert x.dtype == mx.int32
        np.testing.assert_array_equal(np.array(x), np.round(v, d))
    assert mx.round(mx.array([7]), 0).tolist() == [7]


def test_arange_integer_dtype_and_widening():
    np.testing.assert_array_equal(
        np.array(mx.arange(0, 3, 0.2, dtype=mx.int32)), np.zeros(15))
    x = mx.arange(2**40, 2**40 + 3)
    assert x.dtype == mx.int64 and x.tolist() == [2**40, 2**40 + 1, 2**40 + 2]


def test_searchsorted_returns_uint32():
    out = mx.searchsorted(mx.array([1, 3, 5]), mx.array([0, 3, 6]))
    assert out.dtype == mx.uint32 and out.tolist() == [0, 1, 3]


def test_sigmoid_rejects_complex():
    with pytest.raises(ValueError, match=r"\[sigmoid\].*complex64"):
        mx.sigmoid(mx.array([1 + 1j]))


# --- array methods -----------------------------------------------------------

def test_diag_diagonal_methods_and_namespace():
    m = mx.array([[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(np.array(m.diagonal()), [1, 5])
    np.testing.assert_array_equal(np.array(m.diagonal(1)), [2, 6])
    np.testing.assert_array_equal(np.array(m.diag(-1)), [4])
    np.testing.assert_array_equal(np.array(mx.array([1, 2]).diag()),
                                  np.diag([1, 2]))
    t = mx.arange(24).reshape(2, 3, 4)
    np.testing.assert_array_equal(
        np.array(t.diagonal(0, 1, 2)), np.arange(24).reshape(2, 3, 4)
        .diagonal(0, 1, 2))
    assert m.__array_namespace__() is mx


def test_einsum_path_of_one_operand():
    a = mx.zeros((5, 5))
    for spec in ("ii", "ij->i", "ii->i"):
        path, _ = mx.einsum_path(spec, a)
        assert path == [(0,)]


def test_int_parameters_take_only_integers():
    a = mx.arange(4)
    k = np.int32(2)
    assert mx.topk(a, k).shape == (2,)
    assert mx.reshape(a, [k, 2]).shape == (2, 2)
    for bad in (np.float32(2), 2.0, "2"):
        with pytest.raises(TypeError):
            mx.topk(a, bad)
        with pytest.raises(TypeError):
            mx.reshape(a, [bad, 2])


def test_randint_bool():
    a = mx.random.randint(0, 2, [1000], dtype=mx.bool_, key=mx.random.key(0))
    assert a.dtype == mx.bool_
    assert sorted(set(a.tolist())) == [False, True]
    assert not mx.any(mx.random.randint(0, 1, [100], dtype=mx.bool_)).item()
    with pytest.raises(ValueError, match=r"\[random.randint\].*float32"):
        mx.random.randint(0, 2, [3], dtype=mx.float32)


def test_complex_max_min_propagate_nan():
    nan = float("nan")
    for vals in ([1 + 1j, 2 + 2j, 3 + 3j, complex(nan, 4)],
                 [1 + 1j, complex(2, nan), 3 + 3j, 4 + 4j],
                 [complex(nan, 1), 2 + 2j, 3 + 3j, 4 + 4j]):
        v = np.array(vals, np.complex64).reshape(2, 2)
        x = mx.array(v)
        for axis in (0, 1, None):
            for op in ("max", "min"):
                got = np.array(getattr(mx, op)(x, axis=axis))
                ref = getattr(np, op)(v, axis=axis)
                assert np.array_equal(got, ref, equal_nan=True), (vals, op)
            for op in ("argmax", "argmin"):
                if axis is None:
                    continue
                got = np.array(getattr(mx, op)(x, axis=axis))
                np.testing.assert_array_equal(got, getattr(np, op)(v, axis))


def test_full_owns_a_writeable_buffer():
    a = mx.ones((2, 2))
    v = np.array(a, copy=False)
    assert not v.flags.owndata and v.flags.writeable
    assert v.strides == (8, 4)
    b = np.array(mx.broadcast_to(a, (5, 2, 2)), copy=False)
    assert b.strides == (0, 8, 4)
    c = np.array(a)
    assert c.flags.owndata and c.flags.writeable
    # zeros / full count as memory once evaluated.
    mx.synchronize()
    before = mx.get_active_memory()
    z = mx.zeros((4096,))
    mx.eval(z)
    assert mx.get_active_memory() >= before + 4096 * 4
    assert mx.full((2, 3), 1.5).tolist() == [[1.5] * 3] * 2


def test_reset_peak_memory_restarts_from_zero():
    keep = mx.zeros((1024,))
    mx.eval(keep)
    mx.reset_peak_memory()
    assert mx.get_peak_memory() == 0
    mx.eval(mx.zeros((2048,)))
    assert mx.get_peak_memory() >= 2048 * 4


def test_malformed_indices_raise_value_error():
    a = mx.zeros((2, 2, 2))
    for idx in ((Ellipsis, Ellipsis), (0, Ellipsis, 0, Ellipsis),
                (0, 0, 0, 0)):
        with pytest.raises(ValueError):
            a[idx]
        with pytest.raises(ValueError):
            a[idx] = 1
    with pytest.raises(IndexError, match="out of bounds"):
        a[2]
