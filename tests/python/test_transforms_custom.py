"""custom_function, checkpoint, compile, jacrev/jacfwd/hessian, reference
counting of transformed calls and threads running transforms at once."""

import gc
import math
import threading
import weakref

import numpy as np
import pytest

import fluxion.core as mx


def close(a, b, tol=1e-5):
    return np.allclose(np.array(a), np.array(b), rtol=tol, atol=tol)


def test_custom_vjp_and_fallbacks():
    @mx.custom_function
    def f(x, y):
        return x * y

    x, y = mx.array(2.0), mx.array(3.0)
    # Without rules it is the plain function.
    assert close(mx.grad(f, argnums=(0, 1))(x, y)[1], 2.0)

    @f.vjp
    def f_vjp(primals, cotangent, output):
        a, b = primals
        return cotangent * 10 * b, cotangent * 100 * a

    assert f_vjp is f
    ga, gb = mx.grad(f, argnums=(0, 1))(x, y)
    assert ga.item() == 30.0 and gb.item() == 200.0
    # jvp and vmap fall back to the function.
    _, t = mx.jvp(f, [x, y], [mx.array(1.0), mx.array(0.0)])
    assert t[0].item() == 3.0
    v = mx.vmap(f)(mx.array([1.0, 2.0]), mx.array([3.0, 4.0]))
    assert v.tolist() == [3.0, 8.0]


def test_custom_jvp_and_vmap_rules():
    calls = []

    @mx.custom_function
    def g(x):
        return mx.sin(x)

    @g.jvp
    def g_jvp(x, t):
        return 7 * t

    @g.vmap
    def g_vmap(x, axis):
        calls.append(axis)
        return mx.sin(x) + 1, axis

    _, t = mx.jvp(g, [mx.array(0.3)], [mx.array(2.0)])
    assert t[0].item() == 14.0
    out = mx.vmap(g)(mx.array([0.0, 0.5]))
    assert calls == [0]
    assert close(out, [1.0, 1 + math.sin(0.5)])
    # The vjp falls back to the function's own.
    assert close(mx.grad(g)(mx.array(0.3)), math.cos(0.3))


def test_custom_function_trees_and_errors():
    @mx.custom_function
    def h(d, s=1.0):
        return {"o": d["a"] * d["b"] * s}

    @h.vjp
    def h_vjp(d, ct, out, s=1.0):
        return {"a": ct["o"] * d["b"], "b": ct["o"] * 0}

    d = {"a": mx.array(2.0), "b": mx.array(5.0)}
    g = mx.grad(lambda d: h(d)["o"])(d)
    assert g["a"].item() == 5.0 and g["b"].item() == 0.0

    @mx.custom_function
    def k(x):
        return x

    @k.vmap
    def k_vmap(x, ax):
        return x

    with pytest.raises(ValueError, match=r"\[custom vmap\] Vmap function "
                       r"should return a tuple with 2 items."):
        mx.vmap(k)(mx.array([1.0]))

    @mx.custom_function
    def kk(x, y=None):
        return x

    @kk.jvp
    def kk_jvp(x, t):
        return t

    with pytest.raises(ValueError, match=r"\[custom jvp\] Function should only "
                       r"accept positional arguments"):
        mx.jvp(lambda x: kk(x, y=x), [mx.array(1.0)], [mx.array(1.0)])


def test_custom_function_is_collected():
    def fun(x):
        return x * 2

    cf = mx.custom_function(fun)

    def rule(p, c, o):
        return c * 3

    cf.vjp(rule)
    cf.vjp(rule)
    # A cycle through the custom_function itself.
    fun.me = cf
    rule.me = cf
    assert mx.grad(cf)(mx.array(1.0)).item() == 3.0
    wf, wr, wc = weakref.ref(fun), weakref.ref(rule), weakref.ref(cf)
    del fun, rule, cf
    gc.collect()
    assert wf() is None and wr() is None and wc() is None


def test_transformed_functions_do_not_leak():
    def loss(w, x):
        return (w * x).sum()

    loss.self_grad = mx.grad(loss)  # cycle through the transformed function
    w = mx.array([1.0, 2.0])
    ww = weakref.ref(w)
    out = loss.self_grad(w, mx.array([3.0, 4.0]))
    assert out.tolist() == [3.0, 4.0]
    for make in (mx.value_and_grad, mx.vmap, mx.checkpoint, mx.compile):
        f = make(loss) if make is not mx.vmap else make(lambda a: a * 2)
        f.me = f
    wl = weakref.ref(loss)
    del loss, f, w, out
    gc.collect()
    assert wl() is None and ww() is None


def test_checkpoint_matches_plain_grad():
    def block(x, w):
        return mx.tanh(x @ w)

    rng = np.random.default_rng(1)
    x = mx.array(rng.normal(size=(4, 3)).astype(np.float32))
    w = mx.array(rng.normal(size=(3, 3)).astype(np.float32))
    cblock = mx.checkpoint(block)
    f1 = lambda w: cblock(cblock(x, w), w).sum()
    f2 = lambda w: block(block(x, w), w).sum()
    assert close(mx.grad(f1)(w), mx.grad(f2)(w))
    assert close(cblock(x, w), block(x, w))
    assert cblock.__name__ == "block"


def test_compile_equals_eager_and_captured_state():
    f = lambda x, y, scale=2.0: mx.exp(x) * y + scale
    cf = mx.compile(f)
    x, y = mx.array([0.0, 1.0]), mx.array([2.0, 3.0])
    assert close(cf(x, y), f(x, y)) and close(cf(x, y, scale=1.0), f(x, y, 1.0))
    with pytest.raises(ValueError, match=r"\[compile\] Function arguments must "
                       r"be trees of arrays or constants \(floats, ints, "
                       r"strings, or None\), but received type object."):
        cf(x, object())
    state = [mx.array(1.0)]

    def step(v):
        state[0] = state[0] + v
        return state[0] * 2

    cstep = mx.compile(step, inputs=state, outputs=state)
    assert cstep(mx.array(2.0)).item() == 6.0
    assert cstep(mx.array(1.0)).item() == 8.0 and state[0].item() == 4.0
    # Random state captured by compile keeps advancing.
    mx.random.seed(0)
    r = mx.compile(lambda: mx.random.uniform(shape=(2,)),
                   inputs=mx.random.state, outputs=mx.random.state)
    assert r().tolist() != r().tolist()
    mx.disable_compile()
    try:
        assert close(cf(x, y), f(x, y))
    finally:
        mx.enable_compile()
    # Gradients through a compiled function.
    assert close(mx.grad(mx.compile(lambda a: (a * a).sum()))(x), [0.0, 2.0])


def test_jacobians_and_hessian():
    A = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.0]], dtype=np.float32)
    f = lambda x: mx.array(A) @ (x * x)
    x = mx.array([1.0, 2.0])
    ref = A * (2 * np.array([1.0, 2.0]))[None, :]
    assert close(mx.jacrev(f)(x), ref) and close(mx.jacfwd(f)(x), ref)
    g = lambda x, y: (x * x * y).sum()
    y = mx.array([3.0, 4.0])
    ja, jb = mx.jacrev(g, argnums=[0, 1])(x, y)
    assert close(ja, [6.0, 16.0]) and close(jb, [1.0, 4.0])
    assert close(mx.hessian(g)(x, y), np.diag([6.0, 8.0]))
    assert close(mx.hessian(g, argnums=1)(x, y), np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"\[jacrev\] Invalid argument number "
                       r"2 for a function called with 2 arguments."):
        mx.jacrev(g, argnums=2)(x, y)
    with pytest.raises(ValueError, match=r"\[hessian\] Arguments must be "
                       r"arrays; got list."):
        mx.hessian(g)([x], y)


def test_threads_run_grads_at_once():
    errors = []
    results = {}

    def work(tid):
        try:
            w = mx.array(np.full(3, float(tid), dtype=np.float32))
            for i in range(30):
                g = mx.grad(lambda w, x: ((w * x) ** 2).sum())(
                    w, mx.array([1.0, 2.0, 3.0]))
                v = mx.vmap(mx.grad(lambda a: (a * a).sum()))(
                    mx.array([[1.0, 2.0]]) * tid)
                mx.eval(g, v)
            results[tid] = (g.tolist(), v.tolist())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for tid, (g, v) in results.items():
        assert g == [2.0 * tid * c * c for c in (1.0, 2.0, 3.0)]
        assert v == [[2.0 * tid, 4.0 * tid]]


def test_threads_custom_rules_checkpoint_and_random_state():
    @mx.custom_function
    def f(x):
        return mx.sin(x) * 2

    @f.vjp
    def f_vjp(x, ct, out):
        return ct * mx.cos(x) * 2

    blk = mx.checkpoint(lambda x, w: mx.tanh(x @ w))
    rng = np.random.default_rng(3)
    x = mx.array(rng.normal(size=(4, 8)).astype(np.float32))
    w = mx.array(rng.normal(size=(8, 8)).astype(np.float32) * 0.3)
    loss = lambda w: f(blk(blk(x, w), w)).sum()
    plain = lambda w: (mx.sin(mx.tanh(mx.tanh(x @ w) @ w)) * 2).sum()
    ref = np.array(mx.grad(plain)(w))
    errors, keys = [], []

    def work():
        try:
            for i in range(20):
                g = mx.grad(loss)(w)
                if i % 2:
                    mx.async_eval(g)
                assert np.allclose(np.array(g), ref, rtol=1e-4, atol=1e-5)
                keys.append(tuple(mx.random.bits(shape=(2,)).tolist()))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # Every draw from the global state used a fresh key.
    assert len(set(keys)) == len(keys) == 80


def test_reference_counts_are_stable():
    import sys

    def fun(x):
        return mx.sin(x) * x

    def rule(x, ct, out):
        return ct * 3

    cf = mx.custom_function(fun)
    cf.vjp(rule)
    cp = mx.checkpoint(fun)
    x = mx.array([0.5, 1.5])
    transforms = [mx.grad(lambda a: fun(a).sum()), mx.vmap(fun),
                  mx.grad(lambda a: cf(a).sum()),
                  mx.grad(lambda a: cp(a).sum()),
                  mx.value_and_grad(lambda a: cp(a).sum())]

    def run():
        for t in transforms:
            mx.eval(t(x))

    run()
    gc.collect()
    before = (sys.getrefcount(fun), sys.getrefcount(rule), sys.getrefcount(x))
    for _ in range(20):
        run()
    gc.collect()
    after = (sys.getrefcount(fun), sys.getrefcount(rule), sys.getrefcount(x))
    assert before == after
