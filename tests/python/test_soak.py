"""Leaks and soak (issue 17, section 4): 100,000 evals, grads, vmaps and
compiled calls, and as many calls that raise, must leave active memory,
compile's caches, Python's object count, the refcount of the user's
function and the RSS flat; compiled functions and their traces go with the
Python function, custom_function closures and checkpointed functions are
collected.

FLUXION_SOAK_SCALE scales the counts (CI runs 1, `make soak` 5). Each test
prints its figures (pytest -s shows them), e.g.
  soak eval: 100000 calls, active 64 -> 64 bytes, objects +3, rss +0.1 MiB
"""

import gc
import os
import sys
import weakref

import numpy as np
import pytest

import fluxion.core as mx

SCALE = float(os.environ.get("FLUXION_SOAK_SCALE", "1"))
N = int(100_000 * SCALE)


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Flat:
    """Snapshot of the leak indicators; check() compares after the run."""

    def __init__(self):
        gc.collect()
        self.active = mx.get_active_memory()
        self.cache = mx._compile_cache_size()
        self.objects = len(gc.get_objects())
        self.rss = rss()

    def check(self, what, calls, rss_slack=24 << 20, object_slack=200):
        gc.collect()
        active = mx.get_active_memory()
        objects = len(gc.get_objects())
        grown = rss() - self.rss
        print(f"soak {what}: {calls} calls, active {self.active} -> {active} "
              f"bytes, compile cache {self.cache} -> "
              f"{mx._compile_cache_size()}, objects {objects - self.objects:+d}"
              f", rss {grown / 2**20:+.1f} MiB")
        assert active <= self.active + 4096, (what, self.active, active)
        assert mx._compile_cache_size() <= self.cache, what
        assert objects - self.objects < object_slack, (what, objects,
                                                       self.objects)
        assert grown < rss_slack, (what, grown)


@pytest.fixture(autouse=True)
def settled():
    # Warm up every path once so that first-call allocations (kernel
    # caches, interned strings, thread pools) are not counted as growth.
    x = mx.array([1.0, 2.0])
    mx.eval(mx.grad(lambda y: mx.sum(y * y))(x), mx.vmap(lambda y: y * 2)(x))
    gc.collect()
    yield


def test_soak_eval():
    x = mx.array([1.0, 2.0, 3.0])
    mx.eval(x)
    for _ in range(1000):
        mx.eval(x + 1)
    flat = Flat()
    for _ in range(N):
        mx.eval(x * 2 + 1)
    flat.check("eval", N)


def test_soak_grad_and_value_and_grad():
    def loss(w, x):
        return mx.sum(mx.tanh(x @ w) ** 2)

    w = mx.ones((3, 2)) * 0.1
    x = mx.ones((4, 3))
    g = mx.grad(loss)
    vg = mx.value_and_grad(loss)
    for _ in range(500):
        mx.eval(g(w, x), vg(w, x))
    flat = Flat()
    refs = sys.getrefcount(loss)
    for i in range(N // 2):
        mx.eval(g(w, x))
        mx.eval(vg(w, x))
    flat.check("grad", N)
    assert sys.getrefcount(loss) == refs


def test_soak_vmap():
    def f(row):
        return mx.sum(row * row) + row

    v = mx.vmap(f)
    x = mx.ones((4, 3))
    for _ in range(500):
        mx.eval(v(x))
    flat = Flat()
    refs = sys.getrefcount(f)
    for _ in range(N):
        mx.eval(v(x))
    flat.check("vmap", N)
    assert sys.getrefcount(f) == refs


def test_soak_compiled_calls():
    def f(x, y):
        return mx.exp(x) * y + 1

    c = mx.compile(f)
    x, y = mx.ones((8,)), mx.ones((8,))
    for _ in range(500):
        mx.eval(c(x, y))
    flat = Flat()
    refs = sys.getrefcount(f)
    for _ in range(N):
        mx.eval(c(x, y))
    flat.check("compile", N)
    assert sys.getrefcount(f) == refs


def test_soak_calls_that_raise():
    x = mx.arange(4.0)
    bad = mx.array([7])
    c = mx.compile(lambda a: mx.take(a, bad) * 2)

    def each(i):
        k = i % 5
        if k == 0:
            mx.eval(mx.take(x, bad))            # IndexError from the kernel
        elif k == 1:
            mx.reshape(x, (3,))                 # ValueError at build time
        elif k == 2:
            mx.eval(c(x))                       # raising in a compiled call
        elif k == 3:
            mx.grad(lambda a: a)(x)             # grad of a non-scalar
        else:
            mx.vmap(lambda a: a)(mx.array(1.0))  # vmap of a 0-d input

    for i in range(500):
        try:
            each(i)
        except (IndexError, ValueError):
            pass
    flat = Flat()
    raised = 0
    for i in range(N // 2):
        try:
            each(i)
        except (IndexError, ValueError):
            raised += 1
    assert raised == N // 2
    flat.check("raising calls", N // 2, object_slack=400)


def test_compiled_function_and_its_traces_go_with_the_python_function():
    before = Flat()
    refs = []
    for i in range(300):
        def f(x, k=i):
            return x * k + 1
        c = mx.compile(f)
        mx.eval(c(mx.ones((2,))), c(mx.ones((3,))))  # two traces each
        refs.append(weakref.ref(f))
        del f, c
    gc.collect()
    assert all(r() is None for r in refs)
    before.check("compile and drop", 300, object_slack=len(refs) + 200)
    # A function holding its own compiled version (a cycle) too.
    def g(x):
        return x + 1
    g.compiled = mx.compile(g)
    mx.eval(g.compiled(mx.ones((2,))))
    r = weakref.ref(g)
    n = mx._compile_cache_size()
    del g
    gc.collect()
    assert r() is None
    assert mx._compile_cache_size() < n


def test_custom_function_closures_and_checkpointed_functions_are_collected():
    flat = Flat()
    refs = []
    for _ in range(200):
        big = mx.ones((1 << 14,))  # 64 KiB held by the closures
        mx.eval(big)

        @mx.custom_function
        def f(x):
            return mx.sin(x) * big

        @f.vjp
        def f_vjp(x, cotangent, output):
            return cotangent * mx.cos(x) * big

        def block(x):
            return f(x) * 2

        ck = mx.checkpoint(block)
        x = mx.ones((1 << 14,))
        mx.eval(mx.grad(lambda x: mx.sum(ck(x)))(x))
        refs += [weakref.ref(f_vjp), weakref.ref(block)]
        del f, f_vjp, block, ck, big, x
    gc.collect()
    assert all(r() is None for r in refs)
    flat.check("custom_function + checkpoint", 200,
               object_slack=len(refs) + 200)


def test_memory_figures_are_reported():
    # The start and end figures of a long eval loop over a 1 MiB array:
    # the same buffers are reused (cache), active memory returns to the
    # input's size.
    x = mx.ones((1 << 18,))
    mx.eval(x)
    start = mx.get_active_memory()
    for _ in range(max(1, N // 20)):
        mx.eval(mx.exp(x) * 2 + x)
    gc.collect()
    end = mx.get_active_memory()
    print(f"soak 1 MiB evals: active memory {start} -> {end} bytes, cache "
          f"{mx.get_cache_memory()} bytes")
    assert end == start
    assert np.isfinite(np.array(x)).all()
