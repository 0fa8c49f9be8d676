"""The CUDA backend on a visible GPU (skipped, with the reason, elsewhere):
kernels against the CPU, residency across devices, memory accounting,
errors and out-of-memory recovery, and threads with their own GPU streams.
"""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import fluxion.core as mx

pytestmark = pytest.mark.skipif(
    not mx.is_available(mx.gpu),
    reason="no GPU is visible" if mx._gpu_backend_built()
    else "Fluxion was built without a GPU backend")

G = mx.gpu
C = mx.cpu


def host(x):
    """x as a NumPy array (bfloat16, which NumPy lacks, as float32)."""
    if x.dtype == mx.bfloat16:
        x = mx.astype(x, mx.float32, stream=C)
    return np.array(x)


def both(f, *args):
    """f on the gpu and on the cpu, as NumPy arrays."""
    return host(f(*args, G)), host(f(*args, C))


def test_default_device_and_modules():
    if os.environ.get("FLUXION_DEFAULT_DEVICE") != "cpu":
        assert mx.default_device() == mx.Device(mx.gpu)
    assert mx.cuda.is_available()
    assert not mx.metal.is_available()
    info = mx.device_info(mx.Device(mx.gpu))
    assert info["architecture"].startswith("sm_")


@pytest.mark.parametrize("dt", [mx.float32, mx.float16, mx.bfloat16,
                                mx.float64, mx.int32, mx.uint8, mx.int64])
def test_elementwise_and_reductions_match_cpu(dt):
    rng = np.random.default_rng(0)
    a = mx.array(rng.uniform(1, 5, (33, 65))).astype(dt)
    b = mx.array(rng.uniform(1, 5, (65,))).astype(dt)
    for f in [lambda x, y, s: mx.add(x, y, stream=s),
              lambda x, y, s: mx.multiply(x, y, stream=s),
              lambda x, y, s: mx.maximum(x.T[:40], y[:40, None], stream=s),
              lambda x, y, s: mx.less(x, y, stream=s),
              lambda x, y, s: mx.where(x > 2, x, y, stream=s),
              lambda x, y, s: mx.sum(x, axis=0, stream=s),
              lambda x, y, s: mx.sum(x, axis=1, stream=s),
              lambda x, y, s: mx.max(x, stream=s),
              lambda x, y, s: mx.prod(x[:3, :5], axis=1, stream=s),
              lambda x, y, s: mx.argmax(x, axis=1, stream=s),
              lambda x, y, s: mx.argmin(x, axis=0, stream=s),
              lambda x, y, s: mx.astype(x, mx.float32, stream=s),
              lambda x, y, s: mx.mean(x, stream=s)]:
        g, c = both(f, a, b)
        assert g.dtype == c.dtype
        tol = 1e-2 if dt in (mx.float16, mx.bfloat16) else 1e-5
        np.testing.assert_allclose(g.astype(np.float64),
                                   c.astype(np.float64), rtol=tol, atol=tol)


def test_unary_math_matches_cpu():
    x = mx.array(np.linspace(-3, 3, 1001, dtype=np.float32))
    for name in ["exp", "sin", "cos", "tanh", "sigmoid", "erf", "abs",
                 "floor", "square", "negative", "sign"]:
        f = getattr(mx, name)
        g, c = both(lambda v, s: f(v, stream=s), x)
        np.testing.assert_allclose(g, c, rtol=2e-6, atol=2e-6, err_msg=name)


COMPLEX_UNARY = ["exp", "log", "log1p", "log2", "log10", "sqrt", "rsqrt",
                 "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh",
                 "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
                 "abs", "negative", "sign", "square", "reciprocal", "round",
                 "conjugate", "real", "imag", "isnan", "isinf", "isfinite",
                 "logical_not"]
COMPLEX_BINARY = ["add", "subtract", "multiply", "divide", "power",
                  "maximum", "minimum", "logaddexp", "equal", "not_equal",
                  "less", "less_equal", "greater", "greater_equal"]


def test_complex64_math_matches_cpu():
    rng = np.random.default_rng(3)
    z = (rng.uniform(-2, 2, (7, 33)) + 1j * rng.uniform(-2, 2, (7, 33)))
    z[0, :4] = [0, 1j, np.nan, np.inf]  # zero, NaN and inf parts too
    a = mx.array(z.astype(np.complex64))
    with np.errstate(invalid="ignore"):  # inf * 0.7 has a NaN part: wanted
        b = mx.array((z[::-1] * 0.7 + 0.3j).astype(np.complex64))
    def check(g, c, what):
        assert g.dtype == c.dtype, what
        np.testing.assert_allclose(g, c, rtol=2e-5, atol=2e-5, err_msg=what)
    for name in COMPLEX_UNARY:
        f = getattr(mx, name)
        check(*both(lambda v, s: f(v, stream=s), a), name)
        check(*both(lambda v, s: f(v.T, stream=s), a), name + " strided")
    for name in COMPLEX_BINARY:
        f = getattr(mx, name)
        check(*both(lambda x, y, s: f(x, y, stream=s), a, b), name)
        check(*both(lambda x, y, s: f(x, y[0], stream=s), a, b),
              name + " scalar")
        check(*both(lambda x, y, s: f(x.T, y[:, :1].T, stream=s), a, b),
              name + " broadcast")
    finite = a[1:]
    for name, kw in [("sum", {}), ("sum", {"axis": 0}), ("sum", {"axis": 1}),
                     ("prod", {"axis": 1}), ("mean", {}), ("max", {"axis": 1}),
                     ("min", {"axis": 0}), ("all", {"axis": 1}),
                     ("any", {}), ("argmax", {"axis": 1}),
                     ("argmin", {"axis": 0})]:
        f = getattr(mx, name)
        check(*both(lambda v, s: f(v, stream=s, **kw), finite), name)
        check(*both(lambda v, s: f(v, stream=s, **kw), a), name + " nan")
    # A long row (the block and split paths) and a tall column.
    big = mx.array((rng.standard_normal(300001)
                    + 1j * rng.standard_normal(300001)).astype(np.complex64))
    np.testing.assert_allclose(host(mx.sum(big, stream=G)),
                               np.sum(np.array(big).astype(np.complex128)),
                               rtol=1e-4)
    col = mx.reshape(big[:300000], (30000, 10))
    check(*both(lambda v, s: mx.sum(v, axis=0, stream=s), col), "column")


def test_complex64_gradient_on_gpu():
    z = mx.array(np.array([1 + 2j, -0.5 + 1j, 3 - 1j], np.complex64))
    def loss(v):
        return mx.sum(mx.real(mx.exp(v) * mx.conjugate(v)))
    with mx.stream(G):
        g = mx.grad(loss)(z)
    with mx.stream(C):
        h = mx.grad(loss)(z)
    np.testing.assert_allclose(np.array(g), np.array(h), rtol=1e-5)


def test_batched_small_kernels_match_unbatched(tmp_path):
    """Batching (the default; FLUXION_GPU_BATCH=0, read at start, turns it
    off, hence processes of their own) queues small float32 elementwise kernels and runs them in one launch:
    the same program gives the unbatched kernels' results bit for bit, and
    the CPU's to rounding (tests/python/batch_worker.py)."""
    worker = os.path.join(os.path.dirname(__file__), "batch_worker.py")
    runs = {}
    for flag in ["1", "0"]:
        out = str(tmp_path / f"batch{flag}.npz")
        r = subprocess.run([sys.executable, worker, out],
                           env=dict(os.environ, FLUXION_GPU_BATCH=flag),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.strip().endswith("ok"), \
            r.stdout + r.stderr
        runs[flag] = np.load(out)
    for k in runs["1"].files:
        np.testing.assert_array_equal(runs["1"][k], runs["0"][k], err_msg=k)


def test_big_sum_and_column_sum():
    x = mx.ones((4096, 4097))
    assert mx.sum(x, stream=G).item() == 4096 * 4097
    np.testing.assert_array_equal(np.array(mx.sum(x, axis=0, stream=G)),
                                  np.full(4097, 4096.0))


@pytest.mark.parametrize("dt,tol", [(mx.float32, 1e-4), (mx.float64, 1e-10),
                                    (mx.float16, 2e-2), (mx.bfloat16, 5e-2),
                                    (mx.complex64, 1e-4)])
def test_matmul_matches_cpu(dt, tol):
    rng = np.random.default_rng(1)
    a = mx.array(rng.standard_normal((3, 37, 19))).astype(dt)
    b = mx.array(rng.standard_normal((19, 23))).astype(dt)
    for f in [lambda s: mx.matmul(a, b, stream=s),
              lambda s: mx.matmul(mx.swapaxes(a, 1, 2)[:, :5], a, stream=s),
              lambda s: mx.matmul(a[0], b, stream=s)]:
        g, c = host(f(G)), host(f(C))
        scale = max(1.0, np.abs(c).max())
        np.testing.assert_allclose(g, c, rtol=tol, atol=tol * scale)
    c = mx.array(rng.standard_normal((23,))).astype(dt)
    g = mx.addmm(c, a[0], b, alpha=0.5, beta=2.0, stream=G)
    h = mx.addmm(c, a[0], b, alpha=0.5, beta=2.0, stream=C)
    np.testing.assert_allclose(host(g), host(h), rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("dt", [mx.float32, mx.float16, mx.bfloat16,
                                mx.float64, mx.complex64])
def test_addmm_with_an_empty_inner_dimension(dt):
    # An empty sum: beta * c (cuBLASLt takes no K = 0; the GPU multiplies
    # one zero column instead), with c broadcast and batched operands.
    c = mx.array(np.arange(12.0).reshape(3, 4) - 5).astype(dt)
    for a_shape, b_shape in [((3, 0), (0, 4)), ((2, 3, 0), (2, 0, 4))]:
        a, b = mx.zeros(a_shape, dt), mx.zeros(b_shape, dt)
        for beta in [1.0, 2.5, 0.0]:
            g = host(mx.addmm(c, a, b, alpha=0.5, beta=beta, stream=G))
            want = np.broadcast_to(beta * host(c), g.shape)
            np.testing.assert_array_equal(g, want)


def test_random_bits_identical_to_cpu():
    k = mx.random.key(7)
    for shape, dt in [((1001,), mx.uint32), ((3, 5), mx.uint8),
                      ((7,), mx.uint16)]:
        g = mx.random.bits(shape, width=dt.size, key=k, stream=G)
        c = mx.random.bits(shape, width=dt.size, key=k, stream=C)
        np.testing.assert_array_equal(np.array(g), np.array(c))
    g = mx.random.uniform(shape=(1000,), key=k, stream=G)
    c = mx.random.uniform(shape=(1000,), key=k, stream=C)
    np.testing.assert_array_equal(np.array(g), np.array(c))
    g = mx.random.normal((1000,), key=k, stream=G)
    c = mx.random.normal((1000,), key=k, stream=C)
    np.testing.assert_allclose(np.array(g), np.array(c), rtol=1e-6,
                               atol=1e-6)


def test_residency_cpu_after_gpu_and_back():
    x = mx.arange(10, dtype=mx.float32, stream=G)
    y = mx.multiply(x, 2, stream=G)
    # A CPU op reads the GPU result (copied to the host once) ...
    z = mx.add(y, 1, stream=C)
    assert z.tolist() == [2 * i + 1 for i in range(10)]
    # ... and the GPU reads the CPU result (uploaded once).
    w = mx.add(z, y, stream=G)
    assert w.tolist() == [4 * i + 1 for i in range(10)]
    assert np.array(w).sum() == sum(4 * i + 1 for i in range(10))
    assert y[3].item() == 6.0
    assert bytes(memoryview(np.asarray(y)))[:4] == np.float32(0).tobytes()


def test_host_copies_are_exact_across_sizes_and_block_reuse():
    """A GPU result read on the host is copied into a cached pinned block:
    sizes around the cache's buckets, a block taken again by the next copy
    once its array is gone, and blocks made after mx.clear_cache gave the
    cache back all hold what the GPU computed."""
    for n in [1, 3, 17, 1000, (1 << 16) + 7, 3 << 20]:
        want = np.arange(n, dtype=np.float32)
        for scale in [2, 3]:
            x = mx.multiply(mx.arange(n, dtype=mx.float32, stream=G), scale,
                            stream=G)
            np.testing.assert_array_equal(np.array(x), want * scale)
            assert x[n - 1].item() == (n - 1) * scale
            del x
        mx.clear_cache()
    y = mx.add(mx.ones((5, 7), dtype=mx.float16, stream=G), 1, stream=G)
    assert np.array(y).tolist() == [[2.0] * 7] * 5


def test_host_copies_are_pinned():
    cupy = pytest.importorskip("cupy")
    x = mx.add(mx.zeros((1 << 20,), stream=G), 1, stream=G)
    h = np.asarray(x)  # the buffer protocol exposes the host copy itself
    assert h[-1] == 1.0
    attrs = cupy.cuda.runtime.pointerGetAttributes(h.ctypes.data)
    # CuPy names the field `type` (CUDA 11 on) or `memoryType` (older).
    kind = getattr(attrs, "type", getattr(attrs, "memoryType", None))
    assert kind == 1  # cudaMemoryTypeHost: page-locked
    # Pageable memory has no device mapping; page-locked memory has one.
    assert attrs.devicePointer != 0


def test_no_stale_copy_after_in_place_update():
    # A host array used on the GPU (uploaded), then updated in place.
    x = mx.array([1.0, 2.0, 3.0])
    assert mx.add(x, 0, stream=G).tolist() == [1, 2, 3]
    with mx.stream(C):
        x[0] = 100.0
    assert mx.add(x, 0, stream=G).tolist() == [100, 2, 3]
    # A GPU array read on the host, then updated.
    y = mx.add(mx.array([1.0, 2.0, 3.0]), 0, stream=G)
    assert y.tolist() == [1, 2, 3]
    with mx.stream(C):
        y[1] = 50.0
    assert mx.add(y, 0, stream=G).tolist() == [1, 50, 3]
    assert y.tolist() == [1, 50, 3]


@pytest.mark.skipif(os.environ.get("FLUXION_DEFAULT_DEVICE") == "cpu",
                    reason="the memory API reports on the default device")
def test_memory_accounting_of_the_gpu():
    # Without a device argument, MLX's memory API reports on the default
    # device: the GPU here.
    mx.synchronize()
    base = mx.get_active_memory()
    x = mx.add(mx.zeros((1 << 20,)), 1, stream=G)
    mx.eval(x)
    mx.synchronize()
    assert mx.get_active_memory() >= base + 4 * (1 << 20)
    assert mx.get_peak_memory() >= mx.get_active_memory()
    del x
    mx.synchronize()
    mx.clear_cache()
    assert mx.get_cache_memory() == 0


@pytest.mark.parametrize("dtype", [mx.float32, mx.bfloat16, mx.bool_,
                                   mx.int64, mx.complex64], ids=str)
def test_transposing_copies_match_numpy(dtype):
    """Copies whose source and destination are contiguous along different
    axes (the tiled transposition of copy.cu), with odd sizes, batch axes
    on either side and a conversion, against NumPy."""
    rng = np.random.default_rng(7)
    cases = [((33, 65), (1, 0)), ((4, 64, 40), (0, 2, 1)),
             ((3, 31, 5, 70), (3, 1, 2, 0)), ((2, 96, 32, 3), (0, 2, 1, 3)),
             ((40, 2, 33), (2, 1, 0)), ((7, 32), (1, 0))]
    for shape, perm in cases:
        v = rng.standard_normal(shape)
        if dtype == mx.complex64:
            v = v + 1j * rng.standard_normal(shape)
        a = mx.array(v).astype(dtype, stream=G)
        want = np.transpose(host(a), perm)
        t = mx.transpose(a, perm, stream=G)
        got = mx.contiguous(t, stream=G)
        np.testing.assert_array_equal(host(got), want, err_msg=str(shape))
        if dtype != mx.complex64:
            # A converting copy of the transposed view (astype's strided
            # path) rounds each element once, as on the CPU.
            cast = t.astype(mx.float16, stream=G)
            np.testing.assert_array_equal(
                host(cast), host(t.astype(mx.float16, stream=C)),
                err_msg=str(shape))


@pytest.mark.skipif(os.environ.get("FLUXION_DEFAULT_DEVICE") == "cpu",
                    reason="the memory API reports on the default device")
def test_ops_donate_an_input_nothing_else_holds():
    """An op whose input has no other user takes over its buffer on the
    GPU as on the CPU (MLX's donation): a chain of elementwise ops on a
    temporary peaks at one temporary, not one per op."""
    n = 1 << 22
    x = mx.random.normal((n,), stream=G)
    mx.eval(x)

    def peak(f):
        mx.synchronize()
        mx.reset_peak_memory()
        base = mx.get_active_memory()
        y = f()
        mx.eval(y)
        mx.synchronize()
        grew = mx.get_peak_memory() - base
        del y
        return grew

    one = peak(lambda: mx.add(x, 1, stream=G))
    assert one >= 4 * n
    chain = peak(lambda: mx.subtract(
        mx.exp(mx.multiply(mx.add(x, 1, stream=G), 0.5, stream=G),
               stream=G), 3, stream=G))
    # The scalars' own small blocks aside, no second temporary.
    assert chain < one + (1 << 20)
    # An input someone else still holds is not taken over.
    t = mx.add(x, 1, stream=G)
    mx.eval(t)
    u = mx.multiply(t, 2, stream=G)
    mx.eval(u)
    assert np.allclose(np.array(t), np.array(u) / 2)


def test_errors_name_the_op_and_the_process_keeps_working():
    a = mx.array([3.0, 1.0, 2.0])
    # A primitive without a GPU kernel yet raises naming it (Sort, Hadamard
    # and FFT, the examples until their kernels came, have one now): the
    # first of these the registry still lists as missing.
    m = mx.array([[2.0, 1.0], [1.0, 3.0]])
    lacking = {
        "Inverse": lambda: mx.linalg.inv(m, stream=G),
        "Convolution": lambda: mx.conv1d(mx.ones((1, 8, 2)),
                                         mx.ones((3, 3, 2)), stream=G),
    }
    missing = [n for n in lacking if n in mx._kernels_missing(mx.gpu)]
    if missing:
        with pytest.raises(RuntimeError, match=r"\[eval\] Cannot run " +
                           missing[0] + r" on the gpu yet\."):
            mx.eval(lacking[missing[0]]())
    with pytest.raises(RuntimeError, match=r"\[malloc\] out of GPU memory: "
                       r"asked \d+ bytes, \d+ free"):
        mx.eval(mx.add(mx.ones((1 << 20, 1 << 20)), 1, stream=G))
    assert mx.add(a, 1, stream=G).tolist() == [4, 2, 3]


def test_threads_with_their_own_gpu_streams():
    results = {}

    def work(i):
        s = mx.new_stream(G)
        x = mx.full((1000,), float(i), stream=s)
        for _ in range(50):
            x = mx.add(x, 1, stream=s)
        results[i] = mx.sum(x, stream=s).item()

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert results == {i: 1000.0 * (i + 50) for i in range(4)}


def test_async_eval_across_cpu_and_gpu_streams():
    x = mx.arange(1000, dtype=mx.float32, stream=G)
    y = mx.exp(mx.multiply(x, 1e-3, stream=G), stream=G)
    z = mx.add(y, 1, stream=C)
    w = mx.sum(z, stream=G)
    mx.async_eval(w)
    want = np.sum(np.exp(np.arange(1000, dtype=np.float32) * 1e-3) + 1)
    assert abs(w.item() - want) < 1e-2


def test_grad_and_vmap_on_gpu():
    def f(x):
        return mx.sum(mx.exp(x) * x)

    x = mx.array(np.linspace(-1, 1, 17, dtype=np.float32))
    with mx.stream(G):
        g = mx.grad(f)(x)
        v = mx.vmap(lambda r: mx.sum(r * r))(mx.reshape(x[:16], (4, 4)))
    with mx.stream(C):
        gc = mx.grad(f)(x)
        vc = mx.vmap(lambda r: mx.sum(r * r))(mx.reshape(x[:16], (4, 4)))
    np.testing.assert_allclose(np.array(g), np.array(gc), rtol=1e-5)
    np.testing.assert_allclose(np.array(v), np.array(vc), rtol=1e-5)


@pytest.mark.parametrize("dt", [mx.float32, mx.float16, mx.bfloat16,
                                mx.int32, mx.uint8, mx.bool_, mx.complex64])
def test_shape_and_indexing_kernels_match_cpu(dt):
    rng = np.random.default_rng(1)
    a = mx.array(rng.uniform(-3, 3, (6, 7, 5))).astype(dt)
    b = mx.array(rng.uniform(-3, 3, (6, 2, 5))).astype(dt)
    idx = mx.array(rng.integers(-7, 7, (6, 4, 5)).astype(np.int32))
    flat = mx.array(rng.integers(0, 6, (9,)).astype(np.int64))
    cases = [
        lambda s: mx.concatenate([a, b, a[:, ::3]], axis=1, stream=s),
        lambda s: mx.concatenate([a.T, a.T], axis=0, stream=s),
        lambda s: mx.pad(a, [(1, 2), (0, 0), (3, 1)], stream=s),
        lambda s: mx.slice_update(a, b, mx.array([0, 3, 0]), (0, 1, 2),
                                  stream=s),
        lambda s: mx.take_along_axis(a, idx, axis=1, stream=s),
        lambda s: mx.take(a, flat, axis=0, stream=s),
        lambda s: mx.put_along_axis(a, idx % 7, mx.broadcast_to(
            b[:, :1], (6, 4, 5)), axis=1, stream=s),
    ]
    for f in cases:
        with mx.stream(G):
            g = f(G)
        with mx.stream(C):
            c = f(C)
        np.testing.assert_array_equal(host(g), host(c))


def test_integer_array_indexing_and_scatters_match_cpu():
    rng = np.random.default_rng(2)
    x = mx.array(rng.standard_normal((8, 9, 4)).astype(np.float32))
    i0 = mx.array(rng.integers(-8, 8, (5, 3)).astype(np.int32))
    i1 = mx.array(rng.integers(0, 9, (5, 3)).astype(np.uint32))
    upd = mx.array(rng.standard_normal((5, 3, 4)).astype(np.float32))
    # Duplicate-free indices for the overwrite, so the result is defined.
    u0 = mx.array(np.arange(8)[::-1].copy())
    for s in (G, C):
        with mx.stream(s):
            got = [x[i0, i1], x[:, i1[0]], x[2:6, 1, i1[:, 0] % 4],
                   x.at[i0, i1].add(upd), x.at[i0, i1].multiply(upd),
                   x.at[i0, i1].maximum(upd), x.at[i0, i1].minimum(upd),
                   mx.put_along_axis(x, u0[:, None, None] * mx.ones(
                       (1, 9, 4), dtype=mx.int64), x * 2, axis=0)]
            mx.eval(got)
        if s == G:
            gpu = [np.array(v) for v in got]
        else:
            cpu = [np.array(v) for v in got]
    for g, c in zip(gpu, cpu):
        np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-6)
    # Integer and half sums through the compare-and-swap path.
    for dt in (mx.int8, mx.int16, mx.float16, mx.bfloat16, mx.int64):
        base = mx.zeros((4,), dtype=dt)
        ones = mx.ones((200,), dtype=dt)
        ind = mx.array(np.arange(200) % 4)
        with mx.stream(G):
            got = base.at[ind].add(ones)
        assert host(got).tolist() == [50, 50, 50, 50], dt


def test_out_of_range_index_on_gpu_raises_and_process_keeps_working():
    a = mx.arange(12, dtype=mx.float32, stream=G).reshape(3, 4)
    bad = mx.array([[0], [5], [1]])
    with mx.stream(G):
        y = mx.take_along_axis(a, bad, axis=1)
        z = mx.sum(y * 2)  # computed from the failed gather: fails too
    with pytest.raises(IndexError, match=r"\[take_along_axis\] Index 5 is "
                       r"out of bounds for axis 1 with size 4\."):
        z.item()
    with pytest.raises(IndexError, match="out of bounds"):
        y.tolist()
    with mx.stream(G):
        w = a[mx.array([1, -4]), 0]  # -4 is out of range for size 3
    with pytest.raises(IndexError, match=r"Index -4 is out of bounds for "
                       r"axis 0 with size 3"):
        mx.eval(w)
    with mx.stream(G):
        v = a.at[mx.array([3])].add(1.0)
    with pytest.raises(IndexError, match=r"\[scatter_add\] Index 3"):
        mx.eval(v)
    # The next ops, on the same stream, are unaffected.
    with mx.stream(G):
        ok = mx.take_along_axis(a, mx.array([[3], [2], [0]]), axis=1)
        assert ok.reshape(-1).tolist() == [3.0, 6.0, 8.0]
        assert mx.sum(a).item() == 66.0
    mx.synchronize(mx.default_stream(mx.Device(G)))


def test_compile_on_gpu_matches_eager():
    def f(x, y):
        return mx.tanh(x * y + 1.0) - mx.exp(-x) * 0.5

    cf = mx.compile(f)
    rng = np.random.default_rng(3)
    x = mx.array(rng.standard_normal((64, 33)).astype(np.float32))
    y = mx.array(rng.standard_normal((33,)).astype(np.float32))
    with mx.stream(G):
        got = cf(x, y)
        want = f(x, y)
        g = mx.grad(lambda a: mx.sum(cf(a, y)))(x)
        gw = mx.grad(lambda a: mx.sum(f(a, y)))(x)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6,
                               atol=1e-6)
    np.testing.assert_allclose(np.array(g), np.array(gw), rtol=1e-5,
                               atol=1e-6)


def test_compiled_step_with_several_results_on_gpu():
    # AdamW's update of one parameter returns p, m and v: on CPU streams
    # one fused node with three outputs; GPU groups keep one output each
    # (fuse_ir's several_outputs) until the NVRTC generator emits several.
    # Values and gradients as on the CPU either way.
    def adamw(p, g, m, v):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        return p - 1e-3 * (m / (mx.sqrt(v) + 1e-8) + 0.01 * p), m, v

    rng = np.random.default_rng(4)
    p, g, m, v = [mx.array(rng.standard_normal((64, 33)).astype(np.float32))
                  for _ in range(4)]
    v = mx.abs(v)
    cf = mx.compile(adamw)
    loss = lambda f: lambda a: mx.sum(f(a, g, m, v)[0] * f(a, g, m, v)[1])
    with mx.stream(G):
        got = list(cf(p, g, m, v)) + [mx.grad(loss(cf))(p)]
    with mx.stream(mx.cpu):
        want = list(adamw(p, g, m, v)) + [mx.grad(loss(adamw))(p)]
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5,
                                   atol=1e-6)


# --- Kernels with several paths: 16-byte packs (aligned or not), row,
# short-row, column and split reductions.

@pytest.mark.parametrize("dt", [mx.float32, mx.float16, mx.bfloat16,
                                mx.int8, mx.uint8, mx.int64, mx.bool_])
def test_packed_elementwise_aligned_and_offset(dt):
    rng = np.random.default_rng(1)
    a = mx.array(rng.uniform(1, 5, (1031,))).astype(dt)
    b = mx.array(rng.uniform(1, 5, (1031,))).astype(dt)
    # Offsets 0 and 1: pointers aligned for 16-byte packs and not.
    for lo in (0, 1, 3):
        for f in [lambda x, y, s: mx.add(x[lo:], y[lo:], stream=s),
                  lambda x, y, s: mx.multiply(x[lo:], 2, stream=s),
                  lambda x, y, s: mx.abs(x[lo:], stream=s),
                  lambda x, y, s: mx.astype(x[lo:], mx.float32, stream=s),
                  lambda x, y, s: mx.less(x[lo:], y[lo:], stream=s),
                  lambda x, y, s: mx.full((517,), x[lo], stream=s)]:
            if dt == mx.bool_ and f.__code__.co_names.count("multiply"):
                continue
            g, c = both(f, a, b)
            np.testing.assert_allclose(g.astype(np.float64),
                                       c.astype(np.float64), rtol=1e-2)


@pytest.mark.parametrize("shape,axes", [
    ((1 << 20,), None),              # split over blocks, second pass
    ((3, 100000), (1,)),             # few long rows: split rows
    ((4096, 777), (1,)),             # many rows, block per row
    ((5000, 10), (1,)),              # short rows: a warp per row
    ((777, 4096), (0,)),             # columns
    ((100000, 3), (0,)),             # few columns, split reduction
    ((64, 33, 65), (0, 2)),          # general: kept dim in the middle
    ((33, 64, 65), (1,)),            # column-like over a middle axis
])
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod", "any", "all"])
def test_reductions_every_path(shape, axes, op):
    rng = np.random.default_rng(2)
    x = rng.uniform(0.999, 1.001, shape).astype(np.float32)
    if op in ("any", "all"):
        x = x > 0.9995
    xs = mx.array(x)
    g = host(getattr(mx, op)(xs, axis=axes, stream=G))
    c = host(getattr(mx, op)(xs, axis=axes, stream=C))
    # Against float64: the two devices sum in different orders, and a
    # float32 product of 2^20 factors drifts by ~1e-4 either way.
    want = getattr(np, op)(x.astype(np.float64) if op not in ("any", "all")
                           else x, axis=axes)
    tol = 1e-3 if op == "prod" else 1e-4
    np.testing.assert_allclose(g.astype(np.float64), want, rtol=tol)
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=tol)
    # Transposed views take the other kernel.
    if len(shape) == 2 and axes is not None:
        t = host(getattr(mx, op)(xs.T, axis=1 - axes[0], stream=G))
        np.testing.assert_allclose(t.astype(np.float64), want, rtol=tol)


def test_integer_and_half_sums_on_every_path():
    rng = np.random.default_rng(3)
    for dt in (mx.int32, mx.uint8, mx.float16, mx.bfloat16, mx.int64):
        x = mx.array(rng.integers(0, 4, (513, 1029))).astype(dt)
        for ax in (None, 0, 1):
            g = host(mx.sum(x, axis=ax, stream=G))
            c = host(mx.sum(x, axis=ax, stream=C))
            np.testing.assert_allclose(g.astype(np.float64),
                                       c.astype(np.float64), rtol=1e-2)


def test_host_scalars_on_several_streams():
    # Host constants read by kernels on several GPU streams at once are
    # uploaded asynchronously; every stream must see the whole upload.
    streams = [mx.new_stream(G) for _ in range(3)]
    outs = []
    for i in range(60):
        s = streams[i % 3]
        c = mx.array(float(i))  # a fresh host scalar each time
        outs.append(mx.add(mx.zeros((4096,), stream=s), c, stream=s))
    mx.eval(*outs)
    for i, o in enumerate(outs):
        assert np.all(np.array(o) == float(i))


# --- DLPack with CUDA tensors (PyTorch as the other side).

try:
    import torch as _torch
    _torch_cuda = _torch.cuda.is_available()
except ImportError:  # pragma: no cover - CI has no CUDA torch
    _torch, _torch_cuda = None, False
needs_torch_cuda = pytest.mark.skipif(not _torch_cuda,
                                      reason="PyTorch with CUDA is absent")


@needs_torch_cuda
def test_dlpack_export_to_torch_is_zero_copy():
    x = mx.add(mx.arange(12, stream=G).reshape(3, 4).astype(mx.float32), 0,
               stream=G)
    mx.eval(x)
    assert x.__dlpack_device__() == (2, 0)
    t = _torch.from_dlpack(x)
    assert t.device.type == "cuda"
    np.testing.assert_array_equal(t.cpu().numpy(), np.arange(12).reshape(3, 4))
    t.add_(100)  # writes the shared buffer
    _torch.cuda.synchronize()
    assert host(x)[0, 0] == 100
    # A transposed view keeps its strides.
    tt = _torch.from_dlpack(mx.transpose(x))
    assert tt.stride() == (1, 4)
    # The CPU on request: the host copy.
    cap = x.__dlpack__(dl_device=(1, 0))
    assert np.from_dlpack(type("P", (), {
        "__dlpack__": lambda self, **k: cap,
        "__dlpack_device__": lambda self: (1, 0)})())[0, 1] == 101


@needs_torch_cuda
def test_dlpack_import_from_torch_is_zero_copy_and_ordered():
    t = _torch.arange(6.0, device="cuda", dtype=_torch.float32).reshape(2, 3)
    y = mx.from_dlpack(t)
    assert y.__dlpack_device__() == (2, 0)
    np.testing.assert_array_equal(host(y), t.cpu().numpy())
    t.add_(1)
    _torch.cuda.synchronize()
    np.testing.assert_array_equal(host(mx.add(y, 0, stream=G)),
                                  t.cpu().numpy())
    # Strided (transposed) and converted (float64 -> float32) imports.
    np.testing.assert_array_equal(host(mx.from_dlpack(t.t())),
                                  t.t().cpu().numpy())
    d = mx.from_dlpack(t.double())
    assert d.dtype == mx.float32
    # The producer's pending work is ordered before ours: a large product
    # still running on torch's stream when it is imported.
    a = _torch.randn(4096, 4096, device="cuda")
    w = a @ a
    z = mx.from_dlpack(w)
    got = float(mx.sum(z, stream=G).item())
    want = float(w.sum().item())
    assert abs(got - want) <= 1e-3 * float(w.abs().sum().item())
    # copy=True is a copy: later writes do not show.
    c = mx.from_dlpack(t, copy=True)
    mx.eval(c)
    t.add_(1)
    _torch.cuda.synchronize()
    assert host(c)[0, 0] == 1.0
    # Onto the CPU on request.
    assert mx.from_dlpack(t, device=mx.cpu).tolist()[0][0] == 2.0


def test_load_where_the_gpu_is_the_default(tmp_path):
    # Reading a file is host work: every format loads with the GPU as the
    # default device (reading on the CPU), and GPU ops take the result.
    want = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = mx.array(want)
    mx.save(str(tmp_path / "a.npy"), a)
    mx.savez(str(tmp_path / "a.npz"), a=a)
    mx.save_safetensors(str(tmp_path / "a.safetensors"), {"a": a})
    mx.save_gguf(str(tmp_path / "a.gguf"), {"a": a})
    with mx.stream(G):
        loaded = [mx.load(str(tmp_path / "a.npy")),
                  mx.load(str(tmp_path / "a.npz"))["a"],
                  mx.load(str(tmp_path / "a.safetensors"))["a"],
                  mx.load(str(tmp_path / "a.gguf"))["a"]]
        for x in loaded:
            np.testing.assert_array_equal(np.array(mx.add(x, 1)), want + 1)


@pytest.mark.parametrize("dt,tol", [(mx.float32, 1e-6), (mx.bfloat16, 1e-2),
                                    (mx.float16, 2e-3), (mx.float64, 1e-14)])
@pytest.mark.parametrize("n", [1, 4, 33, 128, 200, 512, 1000, 1024, 1025,
                               5000, 8192, 16384, 16385, 40000])
def test_softmax_rows_match_cpu(dt, tol, n):
    # One pass per row: a warp per row up to 1024 elements (4, 8, 16 or 32
    # values a lane), a block per row up to 16384, three passes beyond;
    # rows whose length is a multiple of 16 bytes in Packs. Five rows: the
    # last block of warp rows is part empty.
    x = np.random.default_rng(n).standard_normal((5, n)).astype(np.float32)
    x[1, n // 2] = np.nan  # a nan row stays nan
    if n > 1:
        x[2, :] = -np.inf
        x[2, 0] = 1.0  # -inf elsewhere: weight one on the finite element
    a = mx.array(x).astype(dt)
    g, c = both(lambda a, s: mx.softmax(a, axis=-1, stream=s), a)
    np.testing.assert_allclose(g, c, rtol=tol, atol=tol)
    assert np.isnan(g[1]).all()
    # Gradients through the rule, and a non-last axis (the composite).
    f = lambda a, s: mx.grad(lambda t: mx.sum(mx.softmax(t, axis=-1) *
                                              mx.arange(n)))(a)
    if dt != mx.bfloat16:
        y = mx.array(x[:1]).astype(dt)
        with mx.stream(G):
            gg = host(f(y, G))
        with mx.stream(C):
            gc = host(f(y, C))
        gtol = 2e-3 if dt == mx.float16 else 1e-4
        np.testing.assert_allclose(gg, gc, rtol=gtol, atol=gtol / 10)
    g, c = both(lambda a, s: mx.softmax(a, axis=0, stream=s), a[:1])
    np.testing.assert_allclose(g, c, rtol=tol, atol=tol)


@pytest.mark.parametrize("dt", [mx.float32, mx.float16, mx.bfloat16])
def test_fast_norms_rope_hadamard_match_cpu(dt):
    """mx.fast.layer_norm, rms_norm, rope and hadamard_transform on the GPU
    (backend/cuda/norm.cu, rope.cu, hadamard.cu) agree with the CPU;
    the C++ suite (test_cuda_fast.cpp) covers the shapes and edge cases."""
    rng = np.random.default_rng(1)
    tol = {mx.float32: 1e-5, mx.float16: 2e-3, mx.bfloat16: 2e-2}[dt]
    x = mx.array(rng.standard_normal((5, 3, 7, 4096))).astype(dt)
    w = mx.array(rng.standard_normal((4096,))).astype(dt)
    b = mx.array(rng.standard_normal((4096,))).astype(dt)
    for f in [
        lambda s: mx.fast.layer_norm(x, w, b, 1e-5, stream=s),
        lambda s: mx.fast.rms_norm(x, w, 1e-5, stream=s),
        lambda s: mx.fast.layer_norm(x[..., :100], None, None, 1e-5,
                                     stream=s),
        lambda s: mx.fast.rope(x[..., :64], 32, traditional=False,
                               base=10000.0, scale=1.0, offset=3, stream=s),
        lambda s: mx.fast.rope(x[..., :64], 64, traditional=True,
                               base=10000.0, scale=0.5,
                               offset=mx.array([1, 2, 3, 4, 5]), stream=s),
        lambda s: mx.hadamard_transform(x[..., :20 * 64], stream=s),
    ]:
        g, c = both(lambda s: f(s))
        np.testing.assert_allclose(g, c, rtol=tol, atol=tol)
