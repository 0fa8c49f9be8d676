"""The operator fast path (issue 18 item 4): number slots, the cache of weak
scalar operand constants, constants broadcast as views and x[i]."""

import io
import sys
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


def test_a_loops_scalar_broadcast_is_one_node_until_evaluated():
    # `y + 1.0` in a loop broadcasts one cached scalar to one shape: the
    # Broadcast node is shared by the ops (a shared subexpression), while
    # the graph still shows it, and a fresh one is built once an eval has
    # detached it.
    def dot(a):
        buf = io.StringIO()
        mx.export_to_dot(buf, a)
        return buf.getvalue()

    x = mx.zeros((16,))
    mx.eval(x)
    y = x
    for _ in range(50):
        y = y + 1.0
    g = dot(y)
    assert g.count('label="Add"') == 50
    assert g.count('label="Broadcast"') == 1
    mx.eval(y)
    z = x + 1.0
    assert dot(z).count('label="Broadcast"') == 1
    assert np.array(y).tolist() == [50.0] * 16
    assert np.array(z).tolist() == [1.0] * 16
    # Another shape or dtype or stream gets its own view.
    w = mx.zeros((3, 16)) + 1.0
    assert w.shape == (3, 16) and np.array(w).tolist() == [[1.0] * 16] * 3
    i = mx.zeros((16,), dtype=mx.int32) + 1
    assert i.dtype == mx.int32 and np.array(i).tolist() == [1] * 16
    s = mx.new_stream(mx.cpu)
    v = mx.add(x, 1.0, stream=s)
    assert np.array(v).tolist() == [1.0] * 16


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


# --- the small-op fast path: small elementwise ops on computed arrays run
# at once on the calling thread; the result keeps its graph until it is
# evaluated, as MLX's lazy arrays (issue 33 item 1), so whether the path
# ran is not observable here: tests/cpp/test_eager.cpp checks where it
# applies, these check values and graphs through the Python entry points ---

def dot(a):
    buf = io.StringIO()
    mx.export_to_dot(buf, a)
    return buf.getvalue()


def keeps_graph(a):
    """True when `a` still shows the op that made it (unevaluated)."""
    return "shape=box" in dot(a)


def lazy(a):
    """The same values behind two view nodes: ops on it stay lazy."""
    return mx.expand_dims(a, 0).squeeze(0)


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.array(a.astype(mx.float32))
                                  if a.dtype == mx.bfloat16 else np.array(a),
                                  np.array(b.astype(mx.float32))
                                  if b.dtype == mx.bfloat16 else np.array(b))


DTYPES = [mx.bool_, mx.uint8, mx.int8, mx.int32, mx.int64, mx.uint32,
          mx.float16, mx.bfloat16, mx.float32, mx.float64, mx.complex64]

BINARY = [mx.add, mx.subtract, mx.multiply, mx.divide, mx.maximum,
          mx.minimum, mx.equal, mx.less, mx.greater_equal, mx.power,
          mx.logaddexp, mx.floor_divide, mx.remainder, mx.arctan2,
          mx.bitwise_and, mx.left_shift, mx.logical_and]


@pytest.mark.parametrize("op", BINARY, ids=lambda f: f.__name__)
def test_fast_path_equals_lazy_across_dtypes_and_broadcasting(op):
    rng = np.random.default_rng(0)
    shapes = [((4,), (4,)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3), ()),
              ((), (5,))]
    ran = 0
    for da in DTYPES:
        for db in (da, mx.float32, mx.int32):
            for sa, sb in shapes:
                a = mx.array(rng.integers(1, 4, sa)).astype(da)
                b = mx.array(rng.integers(1, 4, sb)).astype(db)
                mx.eval(a, b)
                try:
                    want = op(lazy(a), lazy(b))
                    mx.eval(want)
                except (ValueError, TypeError, RuntimeError):
                    with pytest.raises(Exception):
                        mx.eval(op(a, b))
                    continue
                got = op(a, b)
                assert keeps_graph(got), (op.__name__, da, db, sa, sb)
                same(got, want)
                ran += 1
    assert ran > 0


@pytest.mark.parametrize("name", ["exp", "negative", "abs", "sqrt", "sin",
                                  "floor", "logical_not", "square", "sign"])
def test_fast_path_unary_and_casts(name):
    fn = getattr(mx, name)
    for dtype in (mx.float32, mx.float16, mx.int32, mx.bool_, mx.float64):
        x = mx.array([0, 1, 2, 3]).astype(dtype)
        mx.eval(x)
        try:
            want = fn(lazy(x))
            mx.eval(want)
        except (ValueError, TypeError):
            continue
        got = fn(x)
        assert keeps_graph(got)
        same(got, want)
    x = mx.array([1.5, -2.5, 3.0])
    for dtype in (mx.int32, mx.uint8, mx.float16, mx.bool_):
        got = x.astype(dtype)
        assert keeps_graph(got)
        same(got, lazy(x).astype(dtype))
    c = mx.array([True, False, True])
    got = mx.where(c, x, 0.0)
    assert keeps_graph(got)
    same(got, mx.where(lazy(c), lazy(x), 0.0))


def test_fast_path_python_scalars_keep_weak_types():
    x = mx.array([1, 2, 3], dtype=mx.int8)
    assert (x + 1).dtype == mx.int8 and keeps_graph(x + 1)
    assert (x + 1.5).dtype == mx.float32
    h = mx.array([1.0], dtype=mx.float16)
    assert (2 * h).dtype == mx.float16 and (h ** 2).dtype == mx.float16
    assert (h ** 2).tolist() == [1.0]


def test_fast_path_limits_keep_other_ops_lazy():
    # Inside and outside the path's limits, every result shows its graph
    # until evaluated, and has the lazy path's value.
    big = mx.zeros((5000,))
    mx.eval(big)
    x = mx.array([1.0, 2.0])
    s = mx.new_stream(mx.cpu)
    for y in (big + 1, x + 1, lazy(x) + 1, x.sum(), x.reshape(1, 2),
              mx.add(x, x, stream=s)):
        assert keeps_graph(y)
        mx.eval(y)
        assert not keeps_graph(y)
    np.testing.assert_array_equal(np.array(mx.add(x, x, stream=s)), [2, 4])
    pending = mx.exp(lazy(x))
    mx.async_eval(pending)
    y = pending + 1  # computed or still lazy: the value is right either way
    np.testing.assert_allclose(np.array(y), np.exp([1.0, 2.0]) + 1, rtol=1e-6)


def test_transformations_still_trace_through_small_ops():
    x = mx.array([1.0, 2.0, 3.0])
    c = mx.array([2.0, 2.0, 2.0])

    def f(v):
        return mx.sum(mx.exp(v * c + 1.0) * 2)

    g = mx.grad(f)(x)
    np.testing.assert_allclose(np.array(g), 4 * np.exp(2 * np.array(
        [1.0, 2.0, 3.0]) + 1), rtol=1e-5)
    _, jv = mx.jvp(lambda v: v * v + 1.0, [x], [mx.ones(3)])
    np.testing.assert_allclose(np.array(jv[0]), [2, 4, 6])
    vm = mx.vmap(lambda v: v * 2 + c)(mx.array([[1.0, 2, 3], [4, 5, 6]]))
    np.testing.assert_allclose(np.array(vm), [[4, 6, 8], [10, 12, 14]])
    cf = mx.compile(lambda v: mx.exp(v) + v * 2)
    np.testing.assert_allclose(np.array(cf(x)),
                               np.exp([1.0, 2, 3]) + [2, 4, 6], rtol=1e-6)
    np.testing.assert_allclose(np.array(cf(x + 1)),
                               np.exp([2.0, 3, 4]) + [4, 6, 8], rtol=1e-6)
    ck = mx.grad(lambda v: mx.checkpoint(lambda w: (w * w + 1.0).sum())(v))
    np.testing.assert_allclose(np.array(ck(x)), [2, 4, 6])
    # Constants built inside a trace stay graph nodes: the trace still sees
    # every op (the compiled graph recomputes them for new inputs).
    cf2 = mx.compile(lambda v: v + (mx.array([1.0, 1, 1]) * 3))
    np.testing.assert_allclose(np.array(cf2(x)), [4, 5, 6])


def test_fast_path_results_are_independent_buffers():
    x = mx.array([1.0, 2.0])
    y = x + 0
    z = y * 1
    assert keeps_graph(z)
    np.testing.assert_array_equal(np.array(x), [1, 2])
    w = np.array(z, copy=False) if hasattr(np, "asarray") else None
    assert w is None or w.tolist() == [1.0, 2.0]
    before = mx.get_active_memory()
    chain = x
    for _ in range(200):
        chain = chain + 1.0
    assert chain.tolist() == [201.0, 202.0]
    del chain
    assert mx.get_active_memory() <= before + 4096



def test_unevaluated_chains_hold_nodes_not_values():
    # A loop of small ops left unevaluated keeps its graph (as MLX's lazy
    # one), not every intermediate's value: 2,000 values of 16 KB would be
    # 32 MB; the nodes the graph holds are a few hundred bytes each.
    x = mx.ones((4096,))
    mx.eval(x)
    before = mx.get_active_memory()
    y = x
    for _ in range(2000):
        y = y + 1.0
    assert mx.get_active_memory() - before < (1 << 20)
    buf = io.StringIO()
    mx.export_to_dot(buf, y)
    assert buf.getvalue().count("Add") >= 2000  # every op still in the graph
    mx.eval(y)
    np.testing.assert_array_equal(np.array(y), np.full(4096, 2001, np.float32))


def test_values_still_held_stay_computed_and_right():
    x = mx.array(np.arange(8, dtype=np.float32))
    mx.eval(x)
    y, kept = x, []
    for i in range(60):
        y = y * 2.0 - x  # stays x: 2x - x
        if i % 7 == 0:
            kept.append((i, y))
    # A function closing over such a chain sees a graph node, not a value
    # (MLX's uncaptured-input error), until it is evaluated.
    f = mx.compile(lambda v: v + kept[-1][1])
    with pytest.raises(ValueError):
        f(x)
    for i, k in kept:
        np.testing.assert_array_equal(np.array(k), np.arange(8))
    z = kept[2][1] + 1.0
    np.testing.assert_array_equal(np.array(z), np.arange(8) + 1.0)
    np.testing.assert_array_equal(np.array(f(x)), 2 * np.arange(8))


def test_fast_path_from_threads():
    x = mx.array(np.arange(16, dtype=np.float32))
    mx.eval(x)
    errors = []

    def work(k):
        try:
            y = x
            for _ in range(300):
                y = y * 1.0 + k
            np.testing.assert_allclose(np.array(y),
                                       np.arange(16) + 300 * k)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


# --- Methods as vectorcall callables (array_fast_methods.cpp) and the
# subscript slot: the fast forms equal the general binding's results, and
# every other form (streams, odd types, errors) still reaches it.

@pytest.mark.parametrize("name", ["sum", "prod", "mean", "max", "min",
                                  "all", "any"])
def test_fast_reduce_methods_match_the_functions(name):
    x = mx.array(np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4) / 7)
    f = getattr(mx, name)
    cases = [((), {}), ((1,), {}), ((-1, True), {}), (((0, 2),), {}),
             (([0, 1],), {"keepdims": True}), ((), {"axis": 2}),
             ((), {"axis": None, "keepdims": True}),
             ((), {"keepdims": False, "axis": (1,)})]
    for args, kw in cases:
        got = getattr(x, name)(*args, **kw)
        axis = args[0] if args else kw.get("axis")
        keep = args[1] if len(args) > 1 else kw.get("keepdims", False)
        want = f(x, axis=axis, keepdims=keep)
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6)
        assert got.shape == want.shape
    # The general binding: a stream, a bool axis, errors.
    assert getattr(x, name)(stream=mx.cpu).shape == ()
    with pytest.raises(ValueError, match="Invalid axis 5"):
        getattr(x, name)(axis=5)
    with pytest.raises(TypeError):
        getattr(x, name)(1, axis=1)
    with pytest.raises(TypeError):
        getattr(x, name)(foo=1)


def test_fast_reshape_and_T():
    x = mx.arange(24)
    assert x.reshape(4, 6).shape == (4, 6)
    assert x.reshape((2, 3, 4)).shape == (2, 3, 4)
    assert x.reshape([6, -1]).shape == (6, 4)
    assert x.reshape(24).shape == (24,)
    assert x.reshape(2, 12, stream=mx.cpu).shape == (2, 12)
    m = x.reshape(4, 6)
    np.testing.assert_array_equal(np.array(m.T), np.arange(24).reshape(4, 6).T)
    assert isinstance(mx.array.T, property) and mx.array.T.__doc__
    assert mx.array.sum.__doc__.startswith("sum(")
    with pytest.raises(ValueError, match=r"\[reshape\]"):
        x.reshape(5, 5)
    with pytest.raises(TypeError, match=r"\[reshape\]"):
        x.reshape(2.0, 12)
    with pytest.raises(TypeError, match=r"\[reshape\]"):
        x.reshape(("a", 2))
    with pytest.raises(OverflowError):
        x.reshape(2 ** 40)


def test_subscript_slot_results_and_errors():
    x = mx.arange(12).reshape(3, 4)
    assert x[1].tolist() == [4, 5, 6, 7]
    assert x[-1, 2].item() == 10
    assert x[:, 1:3].tolist() == [[1, 2], [5, 6], [9, 10]]
    assert x[mx.array([2, 0])].tolist() == [[8, 9, 10, 11], [0, 1, 2, 3]]
    with pytest.raises(IndexError):
        x[3]
    with pytest.raises((TypeError, ValueError)):
        x["a"]


def test_fast_methods_keep_nothing_alive():
    x = mx.arange(16).astype(mx.float32)
    m = x.reshape(4, 4)
    for f in (lambda: x.sum(), lambda: m.T, lambda: x.reshape(4, 4),
              lambda: x[0], lambda: m.max(axis=1)):
        for _ in range(200):  # warm caches
            f()
        before = sys.getallocatedblocks()
        for _ in range(2000):
            f()
        # Results die at once; a per-call Python allocation kept alive
        # would show as thousands of blocks.
        assert sys.getallocatedblocks() - before < 100


def test_results_are_released_by_the_lean_dealloc():
    # Operator results are built outside pybind11's instance registry and
    # released by the array type's own tp_dealloc: weak references still
    # fire, a pending exception survives dropping an array (whose buffer
    # may be NumPy's), and subclass instances take pybind11's path.
    import gc
    import weakref

    x = mx.ones((4,))
    fired = []
    y = x + 1.0
    ref = weakref.ref(y, lambda r: fired.append(True))
    del y
    gc.collect()
    assert ref() is None and fired == [True]

    borrowed = mx.array(np.arange(4, dtype=np.float32))
    try:
        raise KeyError("pending")
    except KeyError:
        z = borrowed * 2
        del borrowed, z
        assert sys.exc_info()[0] is KeyError

    class Sub(mx.array):
        pass

    s = Sub(mx.ones((2,)))
    sref = weakref.ref(s)
    t = s + 1
    assert t.tolist() == [2.0, 2.0]
    del s, t
    gc.collect()
    assert sref() is None
