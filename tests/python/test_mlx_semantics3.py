"""Issue 33 (MLX semantics, round 3): behaviours where MLX programs got a
different answer on Fluxion. Each test fails on the code before the fix."""

import numpy as np
import pytest

import fluxion.core as mx


def close(a, b, tol=1e-6):
    return np.allclose(np.array(a), np.array(b), rtol=tol, atol=tol)


# --- item 1: laziness is observable, keep it ---

def _dot(*arrays):
    import io
    buf = io.StringIO()
    mx.export_to_dot(buf, *arrays)
    return buf.getvalue()


def test_small_ops_keep_their_graph_until_eval():
    # Small computed inputs take the fast path (computed when built) but the
    # graph is the one MLX shows: three Adds, not one constant.
    x = mx.array([1.0, 2.0, 3.0])
    y = (x + 1) + (x + 1)
    assert _dot(y).count('label="Add"') == 3
    # The same graph as the large (plainly lazy) case.
    big = mx.zeros((5000,))
    mx.eval(big)
    assert _dot((big + 1) + (big + 1)).count('label="Add"') == 3
    # eval detaches it, as MLX's does: the result is then a constant.
    mx.eval(y)
    assert 'label="Add"' not in _dot(y)
    assert y.tolist() == [4.0, 6.0, 8.0]


def test_a_python_scalar_is_broadcast_by_a_node_as_in_mlx():
    # MLX broadcasts the scalar's array to the other operand's shape with a
    # Broadcast node; Fluxion did it without one (a view made at once).
    for n in (3, 5000):  # the fast path's size and a plainly lazy one
        x = mx.zeros((n,))
        mx.eval(x)
        dot = _dot(x + 1.0)
        assert dot.count('label="Broadcast"') == 1
        assert dot.count('label="Add"') == 1
        # 1 -> Broadcast -> b; x, b -> Add -> out
        assert dot.count("->") == 5
        # Two scalars, two broadcasts; values unchanged and eval detaches.
        y = 2.0 * x + 1.0
        assert _dot(y).count('label="Broadcast"') == 2
        mx.eval(y)
        assert "label=" not in _dot(y)
        assert np.array(y).tolist() == [1.0] * n
    # Same shape: nothing to broadcast.
    s = mx.array(2.0)
    assert 'label="Broadcast"' not in _dot(s * 3.0)


def test_eval_detaches_the_computed_ancestors_too():
    x = mx.array([1.0, 2.0])
    y = x * 2
    z = mx.exp(y) + y
    mx.eval(z)
    # y was part of z's graph: evaluated (and detached) with it.
    assert "label=" not in _dot(y)
    # Reading evaluates, as in MLX: the graph goes with it.
    w = x - 1
    assert w.tolist() == [0.0, 1.0]
    assert "label=" not in _dot(w)
    np.testing.assert_allclose(np.array(z), np.exp([2.0, 4.0]) + [2.0, 4.0],
                               rtol=1e-6)


def test_compile_rejects_a_closure_computed_from_its_argument():
    # MLX: an unevaluated array built from an input by an earlier uncompiled
    # call is an uncaptured input of the compiled function.
    x = mx.array([1.0, 2.0, 3.0])
    y = x + 1  # small: computed at once, still unevaluated to the graph
    f = mx.compile(lambda a: a * y)
    with pytest.raises(ValueError, match="uncaptured"):
        f(x)
    # Evaluated first, it is a constant, as in MLX.
    mx.eval(y)
    g = mx.compile(lambda a: a * y)
    assert g(x).tolist() == [2.0, 6.0, 12.0]


def test_compiled_closure_over_a_computed_node_follows_its_leaves():
    # A closure that does not read the arguments keeps its graph in the
    # tape (MLX), and gives the eager value.
    c = mx.array([1.0, 2.0]) * 3
    f = mx.compile(lambda a: a + c)
    a = mx.array([10.0, 20.0])
    assert f(a).tolist() == [13.0, 26.0]
    assert f(a).tolist() == (a + c).tolist()


# --- item 7: depends with an array, not a list ---

def test_depends_array_in_array_out():
    x = mx.array([[1.0, 2.0], [3.0, 4.0]])
    d = mx.array([5.0, 6.0])
    y = mx.depends(x, d)
    # One array in, one array out (it was a list of x's two rows).
    assert isinstance(y, mx.array)
    assert y.shape == (2, 2)
    assert close(y, x)


def test_depends_mixed_array_and_list_arguments():
    x = mx.array([[1.0, 2.0], [3.0, 4.0]])
    d = mx.array([[5.0], [6.0]])
    ys = mx.depends([x, x + 1], d)
    assert isinstance(ys, list) and len(ys) == 2
    assert close(ys[1], x + 1)
    y = mx.depends(x, [d, d * 2])
    assert isinstance(y, mx.array) and close(y, x)
    ys = mx.depends((x,), (d,))
    assert isinstance(ys, list) and len(ys) == 1 and ys[0].shape == (2, 2)


def test_depends_single_array_keeps_gradient_and_order():
    # The dependency is evaluated with the result; the gradient of the
    # pass-through is the identity.
    x = mx.array([1.0, 2.0, 3.0])
    g = mx.grad(lambda a: mx.depends(a * a, mx.ones(4)).sum())(x)
    assert close(g, [2.0, 4.0, 6.0])


def test_depends_rejects_other_types():
    with pytest.raises(TypeError, match=r"\[depends\] inputs must be an "
                       "array or a list of arrays; got dict"):
        mx.depends({"a": mx.array(1.0)}, mx.array(1.0))


# --- item 8: synchronize takes a Device ---

def test_synchronize_accepts_device_and_device_type():
    x = mx.array([1.0, 2.0]) * 2
    mx.async_eval(x)
    mx.synchronize(mx.cpu)
    mx.synchronize(mx.Device(mx.cpu))
    mx.synchronize(mx.default_stream(mx.cpu))
    mx.synchronize()
    assert close(x, [2.0, 4.0])
    with pytest.raises(TypeError):
        mx.synchronize("cpu")


# --- item 6: divmod's derivatives are zero for both outputs ---

def test_divmod_jvp_is_zero_for_both_outputs():
    a = mx.array([7.5, -3.25, 10.0])
    b = mx.array([2.0, 1.5, 3.0])
    outs, tans = mx.jvp(lambda x, y: mx.divmod(x, y), [a, b],
                        [mx.ones(3), mx.ones(3)])
    assert close(outs[0], np.floor_divide(np.array(a), np.array(b)))
    assert close(outs[1], np.remainder(np.array(a), np.array(b)))
    # The remainder's tangent was 1 - floor(a / b) (remainder's own rule).
    assert close(tans[0], [0, 0, 0]) and close(tans[1], [0, 0, 0])


def test_divmod_vjp_is_zero_and_keeps_cotangent_order():
    a = mx.array([7.5, -3.25, 10.0])
    b = mx.array([2.0, 1.5, 3.0])
    _, vjps = mx.vjp(lambda x, y: mx.divmod(x, y), [a, b],
                     [mx.ones(3), mx.ones(3)])
    assert close(vjps[0], [0, 0, 0]) and close(vjps[1], [0, 0, 0])
    # Python's divmod operator too; and the other outputs' cotangents are
    # not shifted (a zero-derivative output is not a stop_gradient one).
    _, vjps = mx.vjp(lambda x: [divmod(x, 2.0)[1], 3 * x], [a],
                     [mx.ones(3), mx.ones(3)])
    assert close(vjps[0], [3, 3, 3])
    g = mx.grad(lambda x: divmod(x, 2.0)[1].sum())(a)
    assert close(g, [0, 0, 0])
    # remainder alone keeps its own rule (MLX): d(a % b)/da = 1.
    g = mx.grad(lambda x: mx.remainder(x, 2.0).sum())(a)
    assert close(g, [1, 1, 1])


def test_divmod_values_vmap_and_compile():
    a = mx.array([[7, -3, 10], [5, 6, -7]])
    b = mx.array([2, 4, -3])
    q, r = mx.divmod(a, b)
    assert q.dtype == mx.int32 and r.dtype == mx.int32
    assert close(q, np.floor_divide(np.array(a), np.array(b)))
    assert close(r, np.remainder(np.array(a), np.array(b)))
    vq, vr = mx.vmap(lambda x: mx.divmod(x, b))(a)
    assert close(vq, q) and close(vr, r)
    cq, cr = mx.compile(lambda x, y: mx.divmod(x, y))(a, b)
    assert close(cq, q) and close(cr, r)


# --- item 5: gradients of integer inputs; tuple subclasses keep their type ---

def test_grad_of_integer_input_is_the_derivative_in_its_dtype():
    x = mx.array([1, 2, 3], dtype=mx.int32)
    g = mx.grad(lambda a: (a + 10).sum())(x)
    assert g.dtype == mx.int32 and g.tolist() == [1, 1, 1]
    g = mx.grad(lambda a: (a * 10).sum())(x)
    assert g.dtype == mx.int32 and g.tolist() == [10, 10, 10]
    # Through a cast: the float cotangent comes back cast (1.5 -> 1).
    g = mx.grad(lambda a: (a * 1.5).sum())(x)
    assert g.dtype == mx.int32 and g.tolist() == [1, 1, 1]
    # Scalar leaves and several arguments.
    ga, gb = mx.grad(lambda a, b: a * b + b, argnums=(0, 1))(
        mx.array(3), mx.array(4))
    assert ga.item() == 4 and gb.item() == 4
    # value_and_grad over a dict with an int leaf next to a float one.
    params = {"i": mx.array([2, 5]), "f": mx.array([0.5, 1.0])}
    _, g = mx.value_and_grad(
        lambda p: (p["i"] * p["i"]).sum() + (p["f"] * 2).sum())(params)
    assert g["i"].dtype == mx.int32 and g["i"].tolist() == [4, 10]
    assert close(g["f"], [2.0, 2.0])


def test_vjp_of_integer_reductions_and_where():
    x = mx.array([[3, -1, 2], [0, 5, -2]])
    _, (g,) = mx.vjp(lambda a: [a.sum(axis=0)], [x], [mx.ones(3, mx.int32)])
    assert g.dtype == mx.int32 and g.tolist() == [[1, 1, 1], [1, 1, 1]]
    g = mx.grad(lambda a: a.max())(x)
    assert g.dtype == mx.int32 and g.tolist() == [[0, 0, 0], [0, 1, 0]]
    c = mx.array([[True, False, True], [False, True, False]])
    g = mx.grad(lambda a: mx.where(c, a, 0).sum())(x)
    assert g.tolist() == [[1, 0, 1], [0, 1, 0]]
    # Bool inputs still take none.
    b = mx.array([True, False])
    g = mx.grad(lambda a: (a + 1).sum())(b)
    assert g.dtype == mx.bool_ and g.tolist() == [False, False]


def test_named_tuples_keep_their_type_through_transforms():
    from collections import namedtuple
    from typing import NamedTuple

    Pair = namedtuple("Pair", ["w", "b"])

    class Params(NamedTuple):
        w: mx.array
        b: mx.array

    class MyTuple(tuple):
        pass

    for T in (Pair, Params):
        p = T(mx.array([1.0, 2.0]), mx.array(3.0))
        g = mx.grad(lambda q: (q.w * q.b).sum())(p)
        assert type(g) is T
        assert close(g.w, [3.0, 3.0]) and close(g.b, 3.0)
        _, vj = mx.vjp(lambda w: T(w * 2, w), [p.w],
                       [mx.ones(2), mx.ones(2)])
        assert close(vj[0], [3.0, 3.0])
        out = mx.vmap(lambda q: T(q.w * 2, q.b + q.w))(
            T(mx.array([[1.0], [2.0]]), mx.array([[1.0], [1.0]])))
        assert type(out) is T and close(out.w, [[2.0], [4.0]])
        out = mx.compile(lambda q: T(q.b, q.w))(p)
        assert type(out) is T and close(out.w, 3.0)
    t = MyTuple((mx.array(1.0), mx.array(2.0)))
    g = mx.grad(lambda q: q[0] * q[1])(t)
    assert type(g) is MyTuple and close(g[0], 2.0)


# --- item 2: compile cache keyed correctly ---

def test_compile_state_traces_keep_their_own_output_structure():
    # The body branches on the dtype: the float trace returns (out, state
    # updated), the int trace a different tree; replaying the float trace
    # after the int one must unflatten with the float trace's structure.
    state = [mx.array(0.0)]

    def fun(x):
        if x.dtype == mx.float32:
            state[0] = state[0] + x.sum()
            return x * 2
        state[0] = state[0] + 100
        return {"a": x + 1, "b": (x - 1, x * 3)}

    f = mx.compile(fun, inputs=state, outputs=state)
    xf = mx.array([1.0, 2.0])
    xi = mx.array([1, 2])
    y = f(xf)
    assert isinstance(y, mx.array) and close(y, [2.0, 4.0])
    assert close(state[0], 3.0)
    z = f(xi)
    assert isinstance(z, dict) and close(z["b"][1], [3, 6])
    assert close(state[0], 103.0)
    y = f(xf)  # replays the first trace
    assert isinstance(y, mx.array) and close(y, [2.0, 4.0])
    assert close(state[0], 106.0)
    z = f(xi)
    assert isinstance(z, dict) and close(z["a"], [2, 3])
    assert close(state[0], 206.0)


def _traced_count_after_release(release):
    import gc
    calls = []
    scale = [mx.array(2.0)]

    def fun(x):
        calls.append(1)
        return x * scale[0]

    x = mx.array([1.0, 2.0])
    holder = [mx.compile(fun)]
    assert close(holder[0](x), [2.0, 4.0])
    assert close(holder[0](x), [2.0, 4.0])
    assert len(calls) == 1
    release(holder)  # drops the wrapper's only reference
    assert not holder
    gc.collect()
    scale[0] = mx.array(5.0)  # the dead wrapper's tape holds 2.0
    g = mx.compile(fun)
    y = g(x)
    return len(calls), y


def test_recompiling_a_released_function_traces_again():
    n, y = _traced_count_after_release(lambda holder: holder.clear())
    assert n == 2 and close(y, [5.0, 10.0])


def test_recompiling_after_release_on_another_thread_traces_again():
    import threading

    def release(holder):
        t = threading.Thread(target=holder.clear)
        t.start()
        t.join()

    n, y = _traced_count_after_release(release)
    assert n == 2 and close(y, [5.0, 10.0])


def test_released_wrapper_frees_its_traces():
    base = mx._compile_cache_size()
    f = mx.compile(lambda x: x + 1)
    f(mx.array([1.0]))
    assert mx._compile_cache_size() > base
    del f
    import gc
    gc.collect()
    assert mx._compile_cache_size() == base


# --- item 9: the small missing names ---

def test_sum_gradients_is_public_and_identity_on_one_process():
    import fluxion.nn as nn
    from fluxion.nn.layers.distributed import sum_gradients

    group = mx.distributed.init()
    f = sum_gradients(group)
    x = mx.array([1.0, -2.0])
    assert close(f(x), x)
    assert close(mx.grad(lambda a: (f(a) * a).sum())(x), 2 * x)
    assert nn.layers.distributed.sum_gradients is sum_gradients


def test_clip_grad_norm_sharded_on_one_process_is_clip_grad_norm():
    from fluxion.nn.utils import clip_grad_norm_sharded
    import fluxion.optimizers as optim

    grads = {"a": mx.ones((4, 3)) * 3.0, "b": [mx.ones((5,)) * 3.0]}
    expected = np.sqrt(17) * 3.0
    clipped, norm = clip_grad_norm_sharded(grads, max_norm=1e9)
    assert close(norm, expected, 1e-5)
    assert close(clipped["a"], grads["a"]) and close(clipped["b"][0], 3.0)
    clipped, norm = clip_grad_norm_sharded(grads, max_norm=1.0,
                                           group=mx.distributed.init())
    ref, ref_norm = optim.clip_grad_norm(grads, 1.0)
    assert close(norm, ref_norm, 1e-5)
    assert close(clipped["a"], ref["a"], 1e-5)
    assert close(clipped["a"], 3.0 / (expected + 1e-6), 1e-5)
    with pytest.raises(ValueError, match="clip_grad_norm_sharded"):
        clip_grad_norm_sharded(grads, max_norm=-1.0)


def test_array_iterator_and_array_like_names():
    x = mx.array([[1, 2], [3, 4]])
    it = iter(x)
    assert isinstance(it, mx.ArrayIterator)
    assert next(it).tolist() == [1, 2]

    class Wrapped:
        def __init__(self, v):
            self.v = v

        def __mlx_array__(self):
            return mx.array(self.v)

    w = Wrapped([1.0, 2.0])
    assert mx.array(w).tolist() == [1.0, 2.0]
    assert (mx.array([1.0, 1.0]) + w).tolist() == [2.0, 3.0]
    assert mx.add(w, 1.0).tolist() == [2.0, 3.0]
    like = mx.ArrayLike(w)
    assert isinstance(like, mx.ArrayLike) and like.obj is w
    assert mx.array(like).tolist() == [1.0, 2.0]

    class Bad:
        def __mlx_array__(self):
            return [1.0]

    with pytest.raises(ValueError, match="__mlx_array__"):
        mx.array(Bad())


# --- item 11a: ml_dtypes' bfloat16 ---

def test_numpy_bfloat16_without_ml_dtypes_is_a_clear_error():
    try:
        import ml_dtypes  # noqa: F401
        pytest.skip("ml_dtypes is installed: the error path does not apply")
    except ImportError:
        pass
    x = mx.array([1.0, 2.5], dtype=mx.bfloat16)
    with pytest.raises(TypeError, match=r"\[__array__\] NumPy has no dtype "
                       r"bfloat16.*ml_dtypes"):
        x.__array__("bfloat16")
    # The protocol's default conversion is unchanged: float32 values.
    assert x.__array__().dtype == np.float32
    # Other unknown dtypes keep NumPy's own error.
    with pytest.raises(TypeError, match="not understood"):
        x.__array__("float128x")


def test_numpy_bfloat16_with_ml_dtypes_round_trips():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([1.0, -2.5, 3.140625], dtype=ml_dtypes.bfloat16)
    x = mx.array(a)
    assert x.dtype == mx.bfloat16
    assert x.astype(mx.float32).tolist() == [1.0, -2.5, 3.140625]
    back = np.asarray(x, dtype=ml_dtypes.bfloat16)
    assert back.dtype == ml_dtypes.bfloat16
    assert back.view(np.uint16).tolist() == a.view(np.uint16).tolist()
    f = np.asarray(mx.array([0.5, 1.5]), dtype=ml_dtypes.bfloat16)
    assert f.astype(np.float32).tolist() == [0.5, 1.5]


# --- item 3: shapeless compile recomputes shapes on every replay ---

def test_shapeless_matmul_recomputes_broadcast_batch_dims():
    f = mx.compile(lambda a, b: a @ b, shapeless=True)
    for sa, sb in [((2, 1, 4, 2), (3, 2, 5)), ((3, 1, 4, 2), (2, 2, 5)),
                   ((1, 5, 3, 2), (4, 1, 2, 6))]:
        a = mx.array(np.random.default_rng(len(sa)).normal(size=sa)
                     .astype(np.float32))
        b = mx.ones(sb)
        out, ref = f(a, b), a @ b
        # (3, 1, 4, 2) @ (2, 2, 5) replayed on the first trace gave (3, 3, 4, 5)
        assert out.shape == ref.shape
        assert close(out, ref, 1e-5)


def test_shapeless_binary_ops_with_both_operands_broadcast():
    f = mx.compile(lambda x, y: x * y + 1, shapeless=True)
    for sx, sy in [((3, 1), (1, 4)), ((5, 1), (1, 6)), ((1, 2), (7, 1))]:
        x, y = mx.arange(float(np.prod(sx))).reshape(sx), mx.ones(sy) * 2
        out, ref = f(x, y), x * y + 1
        assert out.shape == ref.shape and close(out, ref)
    w = mx.compile(lambda c, x, y: mx.where(c, x, y), shapeless=True)
    for n, m in [(2, 3), (4, 5)]:
        c = mx.arange(n)[:, None] > 0
        x, y = mx.ones((1, m)), mx.zeros((n, 1))
        assert w(c, x, y).shape == (n, m)
        assert close(w(c, x, y), mx.where(c, x, y))


def test_grad_under_shapeless_compile_follows_the_input_shape():
    # The gradient of a sum is its cotangent broadcast to the input: it
    # kept the traced shape ((3,) for a (5,) input).
    g = mx.compile(mx.grad(lambda x: x.sum()), shapeless=True)
    assert g(mx.ones(3)).shape == (3,)
    assert g(mx.ones(5)).shape == (5,) and close(g(mx.ones(5)), [1] * 5)
    gw = mx.compile(mx.grad(lambda x, w: (x @ w).sum(), argnums=1),
                    shapeless=True)
    for sx, sw in [((2, 3), (3, 4)), ((2, 5), (5, 6))]:
        x, w = mx.arange(float(np.prod(sx))).reshape(sx), mx.ones(sw)
        ref = mx.grad(lambda x, w: (x @ w).sum(), argnums=1)(x, w)
        out = gw(x, w)
        assert out.shape == ref.shape and close(out, ref)
    g2 = mx.compile(mx.grad(lambda x: (x * x).sum()), shapeless=True)
    assert close(g2(mx.arange(3.0)), [0, 2, 4])
    assert close(g2(mx.arange(5.0)), [0, 2, 4, 6, 8])


def test_vmapped_matmul_under_shapeless_compile():
    v = mx.compile(mx.vmap(mx.matmul, in_axes=(0, 1)), shapeless=True)
    # The second replay raised "[broadcast_to] Cannot broadcast array of
    # shape (3,2,3,4) to shape (3,3,3,4)": the traced batch shape stayed.
    for sa, sb in [((2, 1, 3, 4), (3, 2, 4, 5)), ((3, 2, 3, 4), (1, 3, 4, 5)),
                   ((2, 3, 4), (4, 2, 5)), ((6, 2, 4), (4, 6, 7))]:
        x = mx.array(np.random.default_rng(sa[0]).normal(size=sa)
                     .astype(np.float32))
        y = mx.ones(sb)
        ref = mx.vmap(mx.matmul, in_axes=(0, 1))(x, y)
        out = v(x, y)
        assert out.shape == ref.shape and close(out, ref, 1e-5)


def test_shapeless_replay_that_cannot_hold_raises():
    h = mx.compile(lambda x: mx.broadcast_to(x, (4, 3)) * 2, shapeless=True)
    assert h(mx.ones(3)).shape == (4, 3)
    assert h(mx.ones(1)).shape == (4, 3)
    # (5,) cannot be broadcast to the traced constant (4, 3): an error, not
    # a (4, 5) guess.
    with pytest.raises(ValueError, match="shapeless"):
        h(mx.ones(5))
    r = mx.compile(lambda x: x.reshape(2, 3) + 1, shapeless=True)
    assert r(mx.ones(6)).shape == (2, 3)
    with pytest.raises(ValueError, match="reshape"):
        r(mx.ones(8))


# --- item 4 (part): fused nodes named as MLX names them; dot labels ---

def test_fused_node_name_and_dot_labels():
    import io
    x = mx.array(np.arange(12, dtype=np.float32).reshape(4, 3))
    y = mx.array([1.0, 2.0, 3.0])
    out = mx.compile(lambda a, b: a * b + a)(x, y)
    buf = io.StringIO()
    mx.export_to_dot(buf, out)
    text = buf.getvalue()
    # "Compiled" then the fused primitives, as MLX (was Compiled(...,...)).
    assert 'label="CompiledBroadcastMultiplyAdd"' in text, text
    # Only primitives are labelled; arrays are bare names.
    assert text.count("label=") == text.count("shape=box")
    assert "float32" not in text


def test_shared_broadcast_is_fused_into_the_group():
    import io

    def f(x, y):
        b = mx.broadcast_to(x, (3, 4))
        return b * y + 1, b.sum(axis=0)

    x = mx.array([1.0, 2.0, 3.0, 4.0])
    y = mx.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    outs = mx.compile(f)(x, y)
    buf = io.StringIO()
    mx.export_to_dot(buf, outs)
    text = buf.getvalue()
    # The broadcast also feeding the sum is copied into the fused kernel
    # (MLX), rather than left outside it as the group's input.
    assert 'label="CompiledBroadcastMultiply' in text, text
    for got, ref in zip(outs, f(x, y)):
        assert close(got, ref)


# --- item 10 (part): shard_inplace takes an axis or an (axis, segments) ---

def test_shard_inplace_predicate_may_return_an_axis():
    import fluxion.nn as nn
    m = nn.Linear(4, 6)
    w = np.array(m.weight)
    # An int axis (MLX's form) was "cannot unpack non-iterable int".
    nn.layers.distributed.shard_inplace(
        m, lambda path, p: 0 if path.endswith("weight") else None)
    assert close(m.weight, w)  # one process: the whole weight
    nn.layers.distributed.shard_inplace(m, lambda path, p: (0, 2))
    assert close(m.weight, w)
    with pytest.raises(ValueError, match=r"\[shard_inplace\].*'x'"):
        nn.layers.distributed.shard_inplace(m, lambda path, p: "x")


def test_distributed_init_all_gather_factory_checked_as_mlx():
    with pytest.raises(ValueError, match="all_gather_factory.*jaccl"):
        mx.distributed.init(
            backend="ring",
            all_gather_factory=lambda rank, size: lambda src, n: b"")
    with pytest.raises(TypeError, match="callable"):
        mx.distributed.init(backend="jaccl", all_gather_factory="no")
    g = mx.distributed.init(backend="jaccl",
                            all_gather_factory=lambda r, s: None)
    assert g.size() == 1


@pytest.mark.parametrize("kw", [dict(group_size=32, bits=8, mode="mxfp8"),
                                dict(group_size=32, bits=4, mode="mxfp4"),
                                dict(group_size=16, bits=4, mode="nvfp4"),
                                dict(bits=6)])
def test_quantized_linear_rows_slice_exactly(kw):
    # What shard_linear of a quantized layer relies on (MLX's distributed
    # test compares with allclose's default tolerance): the product with a
    # slice of the weight's rows is exactly that slice of the product.
    import fluxion.nn as nn
    mx.random.seed(7)
    x = mx.random.normal((4, 256))
    q = nn.Linear(256, 256).to_quantized(**kw)
    y = q(x)
    for N in (2, 8):
        rows = slice(256 // N, 2 * 256 // N)
        b = q.get("biases")
        y1 = mx.quantized_matmul(
            x, q.weight[rows], q.scales[rows],
            None if b is None else b[rows], transpose=True,
            group_size=q.group_size, bits=q.bits, mode=q.mode) + q.bias[rows]
        assert np.array_equal(np.array(y[:, rows]), np.array(y1)), (kw, N)
