"""compile behaviours that differed from MLX: the trace cache's key,
shapeless replays, closures, donation, releases and graph export."""

import gc
import io
import threading
import weakref

import numpy as np
import pytest

import fluxion.core as mx


def test_cache_separates_shapeless_and_shaped_traces():
    traces = []

    def f(x):
        traces.append(x.shape)
        return x * 2 + 1

    shaped = mx.compile(f)
    shapeless = mx.compile(f, shapeless=True)
    np.testing.assert_allclose(np.array(shaped(mx.ones(2))), [3, 3])
    # Same function, shapeless: its own trace, which follows new shapes.
    for n in (3, 5):
        out = shapeless(mx.ones(n))
        assert out.shape == (n,)
        np.testing.assert_allclose(np.array(out), np.full(n, 3.0))
    assert len(traces) == 2
    # And the shaped entry is still the shaped one.
    assert shaped(mx.ones(4)).shape == (4,)
    assert len(traces) == 3


def test_cache_retraces_when_a_dtype_changes():
    traces = []

    def f(x, y):
        traces.append((x.dtype, y.dtype))
        return x + y

    cf = mx.compile(f)
    a = cf(mx.array([1, 2]), mx.array([3, 4]))
    assert a.dtype == mx.int32 and a.tolist() == [4, 6]
    b = cf(mx.array([1.5, 2.5]), mx.array([3, 4]))
    assert b.dtype == mx.float32 and b.tolist() == [4.5, 6.5]
    c = cf(mx.array([1, 2], mx.int16), mx.array([3, 4], mx.int16))
    assert c.dtype == mx.int16
    # Python scalars of another type are another trace too.
    d = mx.compile(lambda x, s: x * s)
    assert d(mx.array([1, 2]), 2).dtype == mx.int32
    assert d(mx.array([1, 2]), 2.5).tolist() == [2.5, 5.0]
    assert len(traces) == 3
    # shapeless entries retrace on dtype too
    sf = mx.compile(f, shapeless=True)
    assert sf(mx.array([1]), mx.array([1])).dtype == mx.int32
    assert sf(mx.array([1.0, 2.0]), mx.array([1.0, 1.0])).tolist() == [2.0, 3.0]


@pytest.mark.parametrize(
    "fn,shapes",
    [
        (lambda x: x.reshape(-1, 2) * 2, [(4,), (8,), (2, 6)]),
        (lambda x: mx.flatten(x, 0, 1) + 1, [(2, 3, 4), (5, 1, 4), (1, 7, 2)]),
        (lambda x: mx.unflatten(x, 0, (-1, 2)) * x.sum(), [(4, 3), (6, 3), (2, 5)]),
        (lambda x: mx.flatten(mx.exp(x), 1), [(2, 3, 4), (3, 2, 2)]),
    ],
)
def test_shapeless_through_reshapes(fn, shapes):
    cf = mx.compile(fn, shapeless=True)
    for s in shapes:
        x = mx.arange(float(np.prod(s))).reshape(s) / 7.0
        out, ref = cf(x), fn(x)
        assert out.shape == ref.shape, (s, out.shape, ref.shape)
        np.testing.assert_allclose(np.array(out), np.array(ref), rtol=1e-6)


def test_shapeless_reshape_with_fixed_shape_raises_on_mismatch():
    cf = mx.compile(lambda x: x.reshape(x.shape[0] * x.shape[1], -1), shapeless=True)
    assert cf(mx.zeros((2, 3, 4))).shape == (6, 4)
    # The traced reshape asks for (6, -1): (5, 5, 3) cannot be reshaped so.
    with pytest.raises(ValueError, match="reshape"):
        cf(mx.zeros((5, 5, 3)))


def test_shapeless_through_slice_update():
    def f(x):
        x[1] = 5.0
        return x * 2

    def g(x, u):
        x[0:2] = u
        return x

    cf = mx.compile(f, shapeless=True)
    cg = mx.compile(g, shapeless=True)
    for n in (3, 6):
        x = mx.arange(float(n))
        ref = np.arange(float(n)) * 2
        ref[1] = 10.0
        out = cf(x)
        assert out.shape == (n,)
        np.testing.assert_allclose(np.array(out), ref)
        ref = np.arange(float(n))
        ref[0:2] = [7.0, 8.0]
        out = cg(x, mx.array([7.0, 8.0]))
        assert out.shape == (n,)
        np.testing.assert_allclose(np.array(out), ref)


def test_shapeless_broadcasts():
    def f(x, y):
        return x + y, mx.exp(x[:, None]) * y.T

    cf = mx.compile(f, shapeless=True)
    for n in (2, 5):
        x = mx.arange(3.0)
        y = mx.ones((n, 3))
        for o, r in zip(cf(x, y), f(x, y)):
            assert o.shape == r.shape
            np.testing.assert_allclose(np.array(o), np.array(r), rtol=1e-6)
    # A broadcast that is an output on its own follows the input.
    cb = mx.compile(lambda x: mx.broadcast_to(x[:, None], (x.shape[0], 4)), shapeless=True)
    for n in (2, 6):
        out = cb(mx.arange(float(n)))
        assert out.shape == (n, 4)
        np.testing.assert_allclose(np.array(out), np.repeat(np.arange(n)[:, None], 4, 1))


def test_shapeless_full_like_mean_and_reductions_after_gather():
    fns = [
        lambda x: mx.full_like(x, 3.0),
        lambda x: mx.zeros_like(x),
        lambda x: mx.ones_like(x) + x,
        lambda x: x.mean(),
        lambda x: x.mean(axis=0),
        lambda x: mx.var(x, axis=1, ddof=1),
        lambda x: x - x.mean(axis=1, keepdims=True),
    ]
    for fn in fns:
        cf = mx.compile(fn, shapeless=True)
        for s in [(2, 3), (5, 3), (4, 7)]:
            x = mx.array(np.random.default_rng(len(s)).normal(size=s).astype(np.float32))
            out, ref = cf(x), fn(x)
            assert out.shape == ref.shape
            np.testing.assert_allclose(np.array(out), np.array(ref), rtol=1e-5, atol=1e-6)

    table = mx.arange(10.0) * 1.5
    gathered = mx.compile(lambda t, i: t[i].sum(), shapeless=True)
    gathered_max = mx.compile(lambda t, i: mx.take(t, i).max(axis=0), shapeless=True)
    for n in (2, 5, 9):
        i = mx.arange(n)
        assert gathered(table, i).item() == pytest.approx(float(np.arange(n).sum() * 1.5))
        assert gathered_max(table, i).item() == pytest.approx((n - 1) * 1.5)


def test_shapeless_gather_mm():
    rng = np.random.default_rng(0)
    w = mx.array(rng.normal(size=(4, 3, 5)).astype(np.float32))
    f = lambda a, idx: mx.gather_mm(a, w, rhs_indices=idx)
    cf = mx.compile(f, shapeless=True)
    for n in (2, 6):
        a = mx.array(rng.normal(size=(n, 1, 3)).astype(np.float32))
        idx = mx.array(rng.integers(0, 4, size=(n,)).astype(np.uint32))
        out, ref = cf(a, idx), f(a, idx)
        assert out.shape == ref.shape == (n, 1, 5)
        np.testing.assert_allclose(np.array(out), np.array(ref), rtol=1e-5, atol=1e-5)


def test_lazy_closures_are_part_of_the_trace():
    # MLX's rule: an unevaluated array the function closes over keeps its
    # graph in the trace (recomputed on each call from its leaves), whether
    # or not it is captured.
    y = mx.array([1.0, 2.0]) + 2
    cf = mx.compile(lambda x: x + y)
    np.testing.assert_allclose(np.array(cf(mx.ones(2))), [4.0, 5.0])
    np.testing.assert_allclose(np.array(cf(mx.ones(2))), [4.0, 5.0])
    # Closures are not tracked: a rebound one keeps the traced value (MLX).
    y = mx.array([3.0, 4.0]) * 2
    np.testing.assert_allclose(np.array(cf(mx.ones(2))), [4.0, 5.0])
    # A closure over an unevaluated array while the state is captured
    # (an optimizer step over parameters it closes over).
    params = {"w": mx.ones((3, 3))}
    state = [mx.array(0.5)]
    step = mx.compile(lambda g: params["w"] - state[0] * g, inputs=state)
    np.testing.assert_allclose(np.array(step(mx.ones((3, 3)))), 0.5)
    state[0] = mx.array(2.0)
    np.testing.assert_allclose(np.array(step(mx.ones((3, 3)))), -1.0)
    # Arrays built inside the function are fine.
    ch = mx.compile(lambda x: x + mx.arange(2.0) * 2 + mx.zeros(2))
    np.testing.assert_allclose(np.array(ch(mx.ones(2))), [1.0, 3.0])


def test_reading_an_input_other_than_through_its_argument_raises():
    # A lazy closure computed from the array passed as the argument: the
    # trace would read the caller's array, not the argument (MLX raises).
    # (arange keeps x lazy: ops on small computed arrays run at once and
    # hold no graph to read, the small-op fast path.)
    x = mx.arange(1, 4) + 2
    y = x + 1
    with pytest.raises(ValueError, match="uncaptured inputs"):
        mx.compile(lambda a: a + y)(x)
    # The same array as argument and closure, even evaluated.
    z = mx.array([1.0, 2.0])
    mx.eval(z)
    with pytest.raises(ValueError, match=r"reads input 0 \(shape \(2\)\)"):
        mx.compile(lambda a: a * z)(z)
    # Rebound between calls: a function that accumulates into a closure
    # built from its previous (eager) call's argument.
    x = mx.arange(1.0, 3.0) + mx.array([1.0, 2.0])
    acc = [None]

    def fn(v):
        acc[0] = mx.array([1.0, 2.0]) if acc[0] is None else acc[0]
        acc[0] = acc[0] + v
        return acc[0]

    fn(x)
    with pytest.raises(ValueError, match="uncaptured inputs"):
        mx.compile(fn)(x)
    # Captured through inputs=, the state is an input: no error.
    state = [mx.array([1.0, 1.0]) * 5]
    cg = mx.compile(lambda v: v + state[0], inputs=state)
    np.testing.assert_allclose(np.array(cg(mx.ones(2))), [6.0, 6.0])
    state[0] = mx.array([2.0, 2.0]) * 5
    np.testing.assert_allclose(np.array(cg(mx.ones(2))), [11.0, 11.0])
    # Under vmap the argument may also be the closure (MLX does not compile
    # tracer inputs; here the trace is used for that call only).
    xs = mx.array([[1.0, -2.0], [3.0, -4.0]])

    def outer(v):
        v = mx.abs(v)
        return mx.compile(lambda _: -mx.exp(v))(v)

    np.testing.assert_allclose(np.array(mx.vmap(outer)(xs)),
                               -np.exp(np.abs(np.array(xs))), rtol=1e-6)


def test_compiled_functions_donate_their_inputs():
    n = 1 << 22  # 16 MiB of float32
    fun = mx.compile(lambda x: mx.exp(mx.sin(x) * 2) + 1)
    mx.eval(fun(mx.ones(8)))  # traced and built
    mx.synchronize()

    def peak_of(call):
        x = mx.arange(float(n))  # a buffer of its own (ones() is a view)
        mx.eval(x)
        mx.reset_peak_memory()
        base = mx.get_active_memory()
        y = call(x)
        del x
        mx.eval(y)
        # The peak restarts from zero: a call that allocates nothing (the
        # eager chain donates every buffer, and its scalar operands are
        # cached constants) leaves it below the base.
        return (max(mx.get_peak_memory(), base) - base) / (4 * n)

    eager = peak_of(lambda x: mx.exp(mx.sin(x) * 2) + 1)
    compiled = peak_of(fun)
    # The input buffer is reused for the output, as the eager ops do.
    assert compiled <= eager + 0.01
    assert compiled < 0.5, compiled


def test_repeated_compiled_calls_do_not_leak():
    fun = mx.compile(lambda x, y: (mx.exp(x) * y + 1).sum(), shapeless=True)
    for n in (100, 200):
        mx.eval(fun(mx.ones(n), mx.ones(n)))
    gc.collect()
    mx.synchronize()
    start = mx.get_active_memory()
    for i in range(200):
        n = 100 + (i % 2) * 100
        mx.eval(fun(mx.ones(n), mx.ones(n)))
    gc.collect()
    mx.synchronize()
    assert mx.get_active_memory() <= start


def test_trace_released_when_function_released_on_another_thread():
    payload = mx.arange(float(1 << 20))  # 4 MiB, a constant of the trace
    mx.eval(payload)

    def make():
        def f(x):
            return x + payload

        return f

    f = make()
    cf = mx.compile(f)
    mx.eval(cf(mx.ones((1 << 20,))))
    gc.collect()
    ref = weakref.ref(f)
    before = mx.get_active_memory()
    holder = [f, cf]
    del f, cf

    def drop():
        holder.clear()
        gc.collect()

    t = threading.Thread(target=drop)
    t.start()
    t.join()
    gc.collect()
    assert ref() is None
    del payload
    gc.collect()
    mx.synchronize()
    # The trace (and its constant) went with the function.
    assert mx.get_active_memory() <= before - (4 << 20)


def test_export_to_dot_with_keyword_outputs():
    x = mx.array([1.0, 2.0])
    y = mx.exp(x) + 1
    z = y * 2
    buf = io.StringIO()
    mx.export_to_dot(buf, total=z, partial=y)
    text = buf.getvalue()
    assert text.startswith("digraph")
    assert "total" in text and "partial" in text
    buf2 = io.StringIO()
    mx.export_to_dot(buf2, z, extra=y)
    assert "extra" in buf2.getvalue()


def test_broadcast_shared_by_two_fused_groups():
    def f(x, y, z):
        b = mx.broadcast_to(x, (3, 4))
        return mx.exp(b * y) - 1, mx.sin(b + z) * 2, b.sum()

    rng = np.random.default_rng(1)
    x = mx.array(rng.normal(size=(4,)).astype(np.float32))
    y = mx.array(rng.normal(size=(3, 4)).astype(np.float32))
    z = mx.array(rng.normal(size=(3, 4)).astype(np.float32))
    for shapeless in (False, True):
        cf = mx.compile(f, shapeless=shapeless)
        for got, ref in zip(cf(x, y, z), f(x, y, z)):
            assert got.shape == ref.shape
            np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-5, atol=1e-6)
    # Broadcast from a column, consumed by groups of different shapes.
    def g(c, y):
        b = mx.broadcast_to(c, (3, 4))
        return mx.tanh(b) * y, mx.cos(b) + y * y

    c = mx.array(rng.normal(size=(3, 1)).astype(np.float32))
    for got, ref in zip(mx.compile(g)(c, y), g(c, y)):
        np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-5, atol=1e-6)
