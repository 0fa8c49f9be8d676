"""Names MLX programs use (issue 11, section 1): the mx.metal / mx.cuda /
mx.distributed modules, constants, NumPy / array-API aliases, dtype helpers,
print options and devices. Compared with NumPy or hand values."""

import math
import threading
import warnings

import numpy as np
import pytest

import fluxion.core as mx


# --- modules ---

def test_metal_module():
    assert mx.metal.is_available() is False
    with pytest.raises(RuntimeError, match=r"\[metal.device_info\] Metal is not"):
        mx.metal.device_info()
    with pytest.raises(RuntimeError, match=r"\[metal.start_capture\]"):
        mx.metal.start_capture("/tmp/x.gputrace")


def test_metal_deprecated_memory_aliases():
    with pytest.warns(DeprecationWarning, match=r"mx.metal.get_active_memory"):
        assert mx.metal.get_active_memory() == mx.get_active_memory()
    with pytest.warns(DeprecationWarning):
        old = mx.metal.set_cache_limit(1 << 20)
    assert mx.set_cache_limit(old) == 1 << 20
    with pytest.warns(DeprecationWarning):
        mx.metal.clear_cache()
    assert mx.get_cache_memory() == 0


def test_cuda_module_reports_the_build():
    assert mx.cuda.is_available() == mx.is_available(mx.gpu)
    assert mx.cuda.is_available() is False


def test_distributed_singleton_group():
    # MPI is available where libmpi loads; without mpirun the group is still
    # this process alone.
    assert mx.distributed.is_available() is mx.distributed.is_available("mpi")
    assert mx.distributed.is_available("nccl") is False
    g = mx.distributed.init()
    assert (g.rank(), g.size()) == (0, 1)
    assert g.split(0).size() == 1
    x = mx.array([1.0, 2.0, 3.0])
    for fn in (mx.distributed.all_sum, mx.distributed.all_max,
               mx.distributed.all_min, mx.distributed.all_gather,
               mx.distributed.sum_scatter):
        assert fn(x).tolist() == [1.0, 2.0, 3.0]
        assert fn(x, group=g).tolist() == [1.0, 2.0, 3.0]
    # Collectives are transparent to transformations.
    grad = mx.grad(lambda y: mx.distributed.all_sum(y * y).sum())(x)
    assert grad.tolist() == [2.0, 4.0, 6.0]


def test_distributed_errors():
    with pytest.raises(RuntimeError, match=r"\[distributed.init\] No multi"):
        mx.distributed.init(strict=True)
    with pytest.raises(ValueError, match=r"\[distributed.init\] Unknown backend"):
        mx.distributed.init(backend="carrier-pigeon")
    x = mx.array([1.0])
    with pytest.raises(ValueError, match=r"\[send\] Cannot send to rank 0"):
        mx.distributed.send(x, 0)
    with pytest.raises(ValueError, match=r"\[send\] Invalid rank 3 for a group of size 1"):
        mx.distributed.send(x, 3)
    with pytest.raises(ValueError, match=r"\[recv\] Cannot receive from rank 0"):
        mx.distributed.recv((2,), mx.float32, 0)
    with pytest.raises(ValueError, match=r"\[recv\]"):
        mx.distributed.recv_like(x, 0)
    with pytest.raises(ValueError, match=r"\[sum_scatter\] .*0-d"):
        mx.distributed.sum_scatter(mx.array(1.0))


# --- constants and aliases ---

def test_constants():
    assert mx.e == math.e and mx.pi == math.pi
    assert mx.inf == float("inf") and math.isnan(mx.nan)
    assert mx.newaxis is None
    assert abs(mx.euler_gamma - 0.5772156649015329) < 1e-16
    assert mx.array([1, 2])[:, mx.newaxis].shape == (2, 1)


@pytest.mark.parametrize("alias,np_fn", [
    ("acos", np.arccos), ("asin", np.arcsin), ("atan", np.arctan),
    ("acosh", lambda v: np.arccosh(v + 2.0)), ("asinh", np.arcsinh),
    ("atanh", np.arctanh), ("trunc", np.trunc), ("positive", np.positive)])
def test_unary_aliases(alias, np_fn):
    v = np.array([-0.9, -0.25, 0.0, 0.5, 0.75], dtype=np.float32)
    arg = v + 2.0 if alias == "acosh" else v
    got = getattr(mx, alias)(mx.array(arg))
    expected = np_fn(v)
    np.testing.assert_allclose(np.array(got), expected, rtol=1e-6, atol=1e-7)


def test_binary_aliases():
    a = mx.array([1.0, 2.0, -3.0])
    b = mx.array([2.0, 0.5, 1.5])
    np.testing.assert_allclose(np.array(mx.atan2(a, b)),
                               np.arctan2(np.array(a), np.array(b)), rtol=1e-6)
    np.testing.assert_allclose(np.array(mx.pow(b, a)),
                               np.power(np.array(b), np.array(a)), rtol=1e-6)
    i = mx.array([1, 2, 8])
    assert mx.bitwise_left_shift(i, 2).tolist() == [4, 8, 32]
    assert mx.bitwise_right_shift(i, 1).tolist() == [0, 1, 4]
    assert mx.logical_xor(mx.array([True, True, False, False]),
                          mx.array([True, False, True, False])).tolist() == \
        [False, True, True, False]
    assert mx.logical_xor(mx.array([0, 2]), mx.array([1, 3])).tolist() == \
        [True, False]


def test_trunc_dtypes():
    assert mx.trunc(mx.array([-1.5, -0.5, 0.0, 0.5, 2.7])).tolist() == \
        [-1.0, -0.0, 0.0, 0.0, 2.0]
    assert mx.trunc(mx.array([3, -4])).tolist() == [3, -4]
    assert mx.trunc(mx.array([2.5], mx.float16)).dtype == mx.float16
    with pytest.raises(ValueError, match=r"\[trunc\] .*complex64"):
        mx.trunc(mx.array([1 + 1j]))
    # floor/ceil have zero derivatives, so trunc's is zero too.
    assert mx.grad(lambda x: mx.trunc(x).sum())(mx.array([1.5])).item() == 0


def test_shape_aliases():
    x = mx.arange(24).reshape(2, 3, 4)
    assert mx.permute_dims(x, (2, 0, 1)).shape == (4, 2, 3)
    assert mx.permute_dims(x).shape == (4, 3, 2)
    assert np.array_equal(np.array(mx.matrix_transpose(x)),
                          np.swapaxes(np.array(x), -1, -2))
    with pytest.raises(ValueError, match=r"\[matrix_transpose\] .*\(3\)"):
        mx.matrix_transpose(mx.zeros(3))


def test_cumulative_sum_and_prod():
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    assert np.allclose(mx.cumulative_sum(mx.array(x), axis=1),
                       np.cumsum(x, axis=1))
    assert np.allclose(mx.cumulative_prod(mx.array(x), axis=0),
                       np.cumprod(x, axis=0))
    assert mx.cumulative_sum(mx.array(x)).tolist() == \
        np.cumsum(x).tolist()
    out = mx.cumulative_sum(mx.array(x), axis=1, include_initial=True)
    assert out.tolist() == [[0, 1, 3, 6], [0, 4, 9, 15]]
    out = mx.cumulative_prod(mx.array(x), axis=0, include_initial=True)
    assert out.tolist() == [[1, 1, 1], [1, 2, 3], [4, 10, 18]]
    assert mx.cumulative_sum(mx.array([1, 2]), dtype=mx.float32).dtype == \
        mx.float32


# --- creation ---

def test_asarray():
    a = mx.array([1, 2, 3])
    assert mx.asarray(a) is a
    assert mx.asarray(a, dtype=mx.float32).dtype == mx.float32
    assert mx.asarray([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert mx.asarray(np.array([1.5], np.float32)).tolist() == [1.5]
    c = mx.asarray(a, copy=True)
    assert c is not a and c.tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match=r"\[asarray\] copy=False"):
        mx.asarray(a, copy=False)
    assert a.__array_namespace__() is mx
    xp = a.__array_namespace__(api_version="2023.12")
    assert xp.asarray((1, 2)).tolist() == [1, 2]


def test_empty():
    e = mx.empty((2, 3), dtype=mx.int16)
    assert e.shape == (2, 3) and e.dtype == mx.int16
    assert mx.empty(4).shape == (4,)
    like = mx.empty_like(mx.ones((3,), mx.uint8))
    assert like.shape == (3,) and like.dtype == mx.uint8
    with pytest.raises(ValueError, match=r"\[full\] Negative"):
        mx.empty((-1,))


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming",
                                  "hanning"])
@pytest.mark.parametrize("m", [-2, 0, 1, 2, 5, 12])
def test_windows(name, m):
    got = getattr(mx, name)(m)
    expected = getattr(np, name)(m)
    assert got.dtype == mx.float32 and got.shape == expected.shape
    np.testing.assert_allclose(np.array(got), expected, rtol=1e-6, atol=1e-7)


# --- ops ---

def test_median():
    x = np.random.RandomState(0).randn(4, 5, 6).astype(np.float32)
    for axis in [None, 0, 1, (0, 2), (1, 2), (0, 1, 2)]:
        for keepdims in (False, True):
            got = mx.median(mx.array(x), axis=axis, keepdims=keepdims)
            exp = np.median(x, axis=axis, keepdims=keepdims)
            assert got.shape == exp.shape
            np.testing.assert_allclose(np.array(got), exp, rtol=1e-6)
    assert mx.median(mx.array([0, 1, 2, 3, 4, 5])).item() == 2.5
    assert mx.median(mx.array([0, 1, 2, 3, 4])).dtype == mx.float32
    nan = float("nan")
    y = np.array([[1.0, nan, 3.0], [4.0, 5.0, 6.0]], np.float32)
    np.testing.assert_array_equal(np.array(mx.median(mx.array(y), axis=1)),
                                  np.median(y, axis=1))
    assert mx.median(mx.array([1.0, nan], mx.bfloat16)).item() != \
        mx.median(mx.array([1.0, nan], mx.bfloat16)).item()


def test_median_errors():
    with pytest.raises(ValueError, match=r"\[median\] Cannot take the median "
                       r"of an empty"):
        mx.median(mx.array([]), axis=0)
    with pytest.raises(ValueError, match=r"\[median\] Invalid axis 1"):
        mx.median(mx.array([1, 2]), axis=(0, 1))
    with pytest.raises(ValueError, match=r"\[median\] Received duplicate"):
        mx.median(mx.array([1, 2]), axis=(0, 0))


def test_diff():
    a = np.array([1, 2, 4, 7, 0])
    for n in range(0, 6):
        assert mx.diff(mx.array(a), n=n).tolist() == np.diff(a, n=n).tolist()
    m = np.array([[1, 3, 6], [0, 5, 6]])
    assert mx.diff(mx.array(m), axis=0).tolist() == np.diff(m, axis=0).tolist()
    assert mx.diff(mx.array(m), prepend=0).tolist() == \
        np.diff(m, prepend=0).tolist()
    assert mx.diff(mx.array(m), axis=0, append=mx.array([[9, 9, 9]])).tolist() \
        == np.diff(m, axis=0, append=[[9, 9, 9]]).tolist()
    b = np.array([True, False, False, True])
    assert mx.diff(mx.array(b)).tolist() == np.diff(b).tolist()
    with pytest.raises(ValueError, match=r"\[diff\] Invalid axis 3 for array "
                       r"with 2 dimensions"):
        mx.diff(mx.array(m), axis=3)
    with pytest.raises(ValueError, match=r"\[diff\] The order n must be "
                       r"non-negative; got -1"):
        mx.diff(mx.array(a), n=-1)
    with pytest.raises(ValueError, match=r"\[diff\] .*0-d"):
        mx.diff(mx.array(1))


def test_flip_and_unstack():
    a = np.arange(24).reshape(2, 3, 4)
    for axis in [None, 0, 1, 2, -1, (0, 2), (0, 1, 2)]:
        assert mx.flip(mx.array(a), axis=axis).tolist() == \
            np.flip(a, axis=axis).tolist()
    g = mx.grad(lambda x: (mx.flip(x) * mx.arange(3.0)).sum())(
        mx.array([1.0, 2.0, 3.0]))
    assert g.tolist() == [2.0, 1.0, 0.0]
    with pytest.raises(ValueError, match=r"\[flip\] Invalid axis 3"):
        mx.flip(mx.array(a), axis=3)
    for axis in (0, 1, 2, -1):
        parts = mx.unstack(mx.array(a), axis=axis)
        assert isinstance(parts, tuple)
        assert len(parts) == a.shape[axis]
        for p, q in zip(parts, np.moveaxis(a, axis, 0)):
            assert p.tolist() == q.tolist()
    with pytest.raises(ValueError, match=r"\[unstack\] Cannot unstack a 0-d"):
        mx.unstack(mx.array(1))
    with pytest.raises(ValueError, match=r"\[unstack\] Invalid axis 3"):
        mx.unstack(mx.array(a), axis=3)


def test_count_nonzero():
    c = np.array([[0, 1, 0], [2, 3, 0]])
    assert mx.count_nonzero(mx.array(c)).item() == 3
    assert mx.count_nonzero(mx.array(c)).dtype == mx.int32
    assert mx.count_nonzero(mx.array(c), axis=0).tolist() == [1, 2, 0]
    assert mx.count_nonzero(mx.array(c), axis=1, keepdims=True).tolist() == \
        [[1], [2]]
    assert mx.count_nonzero(mx.array([0.0, -0.0, 0.5])).item() == 1


def test_vecdot():
    rng = np.random.RandomState(1)
    a = rng.randn(3, 4).astype(np.float32)
    b = rng.randn(4).astype(np.float32)
    np.testing.assert_allclose(np.array(mx.vecdot(mx.array(a), mx.array(b))),
                               a @ b, rtol=1e-5)
    np.testing.assert_allclose(
        np.array(mx.vecdot(mx.array(a), mx.array(a), axis=0)),
        (a * a).sum(0), rtol=1e-5)
    c = np.array([1 + 2j, 3 - 1j], np.complex64)
    # The first argument is conjugated (the array API).
    np.testing.assert_allclose(np.array(mx.vecdot(mx.array(c), mx.array(c))),
                               np.vdot(c, c), rtol=1e-6)
    with pytest.raises(ValueError, match=r"\[vecdot\] .*at least one"):
        mx.vecdot(mx.array(1), mx.array([1]))
    with pytest.raises(ValueError, match=r"\[vecdot\] The arrays must have "
                       r"the same size"):
        mx.vecdot(mx.array([1, 2]), mx.array([1]))
    with pytest.raises(ValueError, match=r"\[vecdot\] Invalid axis 1"):
        mx.vecdot(mx.array([1, 2]), mx.array([1, 2]), axis=1)


def test_matrix_norm():
    a = np.random.RandomState(2).randn(2, 3, 4).astype(np.float32)
    for ord in ["fro", "nuc", 1, -1, 2, -2, float("inf"), -float("inf")]:
        got = mx.matrix_norm(mx.array(a), ord=ord)
        np.testing.assert_allclose(np.array(got),
                                   np.linalg.norm(a, ord=ord, axis=(-2, -1)),
                                   rtol=1e-4)
    assert mx.matrix_norm(mx.array(a), keepdims=True).shape == (2, 1, 1)
    with pytest.raises(ValueError, match=r"\[matrix_norm\] .*two dimensions"):
        mx.matrix_norm(mx.array([1.0, 2.0]))


# --- dtypes ---

def test_finfo_smallest_normal():
    for t, n in [(mx.float32, np.float32), (mx.float16, np.float16),
                 (mx.float64, np.float64)]:
        assert mx.finfo(t).smallest_normal == float(np.finfo(n).smallest_normal)
    assert mx.finfo(mx.bfloat16).smallest_normal == 2.0 ** -126
    assert mx.finfo(mx.complex64).dtype == mx.float32
    assert mx.finfo(mx.complex64).bits == 32


def test_result_type_and_can_cast():
    assert mx.result_type(mx.int8, mx.int16) == mx.int16
    assert mx.result_type(mx.array([1], mx.int8), mx.int16, mx.int32) == \
        mx.int32
    assert mx.result_type(mx.array(1.0), mx.array(1, mx.int32)) == mx.float32
    # Python scalars are weak, as in the ops.
    assert mx.result_type(mx.array([1], mx.int8), 3) == mx.int8
    assert mx.result_type(mx.array([1], mx.float16), 2.5) == mx.float16
    assert mx.result_type(1.5) == mx.float32
    with pytest.raises(ValueError, match=r"\[result_type\] At least one"):
        mx.result_type()
    assert mx.can_cast(mx.int8, mx.int16) and not mx.can_cast(mx.int16,
                                                               mx.int8)
    assert mx.can_cast(mx.uint8, mx.int16)
    assert not mx.can_cast(mx.uint16, mx.int16)
    assert not mx.can_cast(mx.float64, mx.float32)
    assert mx.can_cast(mx.array([1], mx.int8), mx.int32)


def test_isdtype():
    assert mx.isdtype(mx.int32, mx.int32)
    assert not mx.isdtype(mx.int32, mx.int16)
    assert mx.isdtype(mx.int32, "signed integer")
    assert mx.isdtype(mx.uint8, "unsigned integer")
    assert mx.isdtype(mx.int16, "integral")
    assert mx.isdtype(mx.bfloat16, "real floating")
    assert mx.isdtype(mx.complex64, "complex floating")
    assert mx.isdtype(mx.bool_, "bool") and not mx.isdtype(mx.bool_, "numeric")
    assert mx.isdtype(mx.float32, ("integral", "real floating"))
    assert not mx.isdtype(mx.int32, ("bool", mx.float32))
    with pytest.raises(ValueError, match=r"\[isdtype\] Unknown kind 'xyz'"):
        mx.isdtype(mx.int32, "xyz")
    with pytest.raises(ValueError, match=r"\[isdtype\] Unknown kind"):
        mx.isdtype(mx.int32, ("bool", "xyz"))
    with pytest.raises(TypeError, match=r"\[isdtype\]"):
        mx.isdtype(mx.int32, 3)


# --- printing ---

def test_repr_summarizes_long_axes():
    assert str(mx.array([1] * 6)) == "array([1, 1, 1, 1, 1, 1], dtype=int32)"
    assert str(mx.array([1] * 7)) == \
        "array([1, 1, 1, ..., 1, 1, 1], dtype=int32)"
    assert str(mx.array([[1, 2]] * 7)) == (
        "array([[1, 2],\n       [1, 2],\n       [1, 2],\n       ...,\n"
        "       [1, 2],\n       [1, 2],\n       [1, 2]], dtype=int32)")


def test_printoptions():
    x = mx.array([1.123456789], dtype=mx.float32)
    assert str(x) == "array([1.12346], dtype=float32)"
    assert mx.get_printoptions().precision == -1
    with mx.printoptions(precision=3):
        assert str(x) == "array([1.123], dtype=float32)"
        assert mx.get_printoptions().precision == 3
        with mx.printoptions(precision=1):
            assert str(x) == "array([1.1], dtype=float32)"
        assert str(x) == "array([1.123], dtype=float32)"
    assert str(x) == "array([1.12346], dtype=float32)"
    mx.set_printoptions(precision=2)
    try:
        assert str(mx.array([0.9, 2.0])) == "array([0.90, 2.00], dtype=float32)"
        # Integers are not affected.
        assert str(mx.array([3])) == "array([3], dtype=int32)"
    finally:
        mx.set_printoptions()
    assert str(x) == "array([1.12346], dtype=float32)"
    with pytest.raises(ValueError, match=r"\[set_printoptions\] precision"):
        mx.set_printoptions(precision=-5)
    with pytest.raises(ValueError, match=r"\[printoptions\] precision"):
        mx.printoptions(precision=-5)


# --- devices and streams ---

def test_device_info_and_count():
    assert mx.device_count(mx.cpu) == 1
    assert mx.device_count(mx.gpu) == 0
    info = mx.device_info(mx.cpu)
    assert len(info["device_name"]) > 0 and info["architecture"]
    assert info["memory_size"] > 0
    assert mx.device_info() == info
    with pytest.raises(ValueError, match=r"\[device_info\] There is no gpu 0"):
        mx.device_info(mx.Device(mx.gpu))
    with pytest.raises(ValueError, match=r"\[device_info\] cpu 1 does not"):
        mx.device_info(mx.Device(mx.cpu, 1))


def test_set_wired_limit():
    old = mx.set_wired_limit(1000)
    assert mx.set_wired_limit(old) == 1000
    with pytest.raises(ValueError, match=r"\[set_wired_limit\] .*physical"):
        mx.set_wired_limit(mx.device_info()["memory_size"] + 10)


def test_gpu_streams_raise_without_a_gpu():
    with pytest.raises(ValueError, match=r"\[default_stream\]"):
        mx.default_stream(mx.gpu)
    with pytest.raises(ValueError, match=r"\[new_stream\]"):
        mx.new_stream(mx.gpu)
    with pytest.raises(ValueError, match=r"\[new_thread_local_stream\]"):
        mx.new_thread_local_stream(mx.gpu)


def run_in_thread(fn):
    errors = []

    def body():
        try:
            fn()
        except BaseException as e:  # noqa: B902 - reported below
            errors.append(e)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    return errors


def test_stream_of_another_thread_raises():
    s = mx.new_stream(mx.cpu)

    def use():
        with mx.stream(s):
            mx.eval(mx.arange(4) * 2)

    errors = run_in_thread(use)
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError)
    assert "belongs to the thread that made it" in str(errors[0])
    # The thread that made it may use it.
    with mx.stream(s):
        assert (mx.arange(3) + 1).tolist() == [1, 2, 3]


def test_thread_unsafe_and_thread_local_streams():
    shared = mx.new_thread_unsafe_stream(mx.cpu)
    tls = mx.new_thread_local_stream(mx.cpu)
    assert tls.device == mx.cpu
    results = {}

    def work(i):
        with mx.stream(shared):
            a = (mx.arange(4) * i).tolist()
        with mx.stream(tls):
            b = (mx.arange(4) + i).tolist()
            results[i] = (a, b, mx.default_stream(mx.cpu))
        mx.clear_streams()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(3):
        assert results[i][0] == [0, i, 2 * i, 3 * i]
        assert results[i][1] == [i, i + 1, i + 2, i + 3]
    # Each thread had its own stream for the thread-local one.
    assert len({results[i][2] for i in range(3)}) == 3


def test_clear_streams_ends_this_threads_streams():
    def body():
        s = mx.new_stream(mx.cpu)
        mx.set_default_stream(s)
        x = mx.arange(3) * 3
        mx.eval(x)
        mx.clear_streams()
        # The default went back to the device's first stream.
        assert mx.default_stream(mx.cpu) != s
        assert (mx.arange(2) + 1).tolist() == [1, 2]
        with pytest.raises(RuntimeError, match=r"\[eval\] Stream .* ended by "
                           r"clear_streams"):
            mx.eval(mx.add(mx.array(1), 1, stream=s))
        with pytest.raises(RuntimeError, match=r"\[synchronize\]"):
            mx.synchronize(s)

    assert run_in_thread(body) == []


def test_default_stream_is_per_thread():
    s = mx.new_thread_unsafe_stream(mx.cpu)
    seen = []
    with mx.stream(s):
        assert mx.default_stream(mx.cpu) == s
        run_in_thread(lambda: seen.append(mx.default_stream(mx.cpu)))
    assert seen[0] != s
