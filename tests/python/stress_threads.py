"""Concurrency stress in a child process (test_stress_threads.py): a
deadlock is a timeout of the child, reported with the last logged step.

Several Python threads build, transform (grad, vmap, compile) and evaluate
graphs on their own streams, on a stream they share
(new_thread_unsafe_stream) and on their default streams; one compiled
function is called from all threads at once with different signatures;
async_eval chains hop across streams; and kernels fail at random on the
stream workers (take with indices drawn out of range one time in four,
inv of a singular matrix): every eval returns its result or its own error,
and never another thread's.
"""

import random
import threading

import numpy as np

import fluxion.core as mx
from fuzz_support import CaseLog


def run(log, workdir, threads, reps, seed):
    caselog = CaseLog(log)
    shared = mx.new_thread_unsafe_stream(mx.cpu)
    compiled = mx.compile(lambda x, y: mx.exp(x * 0.1) + x * y)
    failures = []
    lock = threading.Lock()

    def fail(msg):
        with lock:
            failures.append(msg)

    def work(t):
        rnd = random.Random(seed * 1000 + t)
        own = mx.new_stream(mx.cpu)
        chain = [mx.new_stream(mx.cpu) for _ in range(3)]
        for rep in range(reps):
            kind = rnd.randrange(5)
            with lock:
                caselog(f"thread {t} rep {rep} kind {kind}")
            s = rnd.choice([own, shared, None])
            try:
                if kind == 0:  # build, transform, evaluate
                    x = mx.arange(12, dtype=mx.float32).reshape(3, 4) * 0.1 + t
                    g = mx.grad(lambda a: mx.sum(mx.sin(a) * a))(x)
                    v = mx.vmap(lambda r: mx.sum(r * r))(x)
                    mx.eval(g, v)
                    xn = np.array(x)
                    np.testing.assert_allclose(
                        np.array(g), np.sin(xn) + xn * np.cos(xn), rtol=1e-4,
                        atol=1e-4)
                    np.testing.assert_allclose(np.array(v), (xn * xn).sum(1),
                                               rtol=1e-5)
                elif kind == 1:  # one compiled function from every thread
                    n = 1 + rnd.randrange(4)
                    x = mx.arange(n, dtype=mx.float32) + t
                    got = np.array(compiled(x, x))
                    xn = np.arange(n, dtype=np.float32) + t
                    np.testing.assert_allclose(got, np.exp(xn * 0.1) + xn * xn,
                                               rtol=1e-5)
                elif kind == 2:  # async_eval chain across streams
                    x = mx.full((256,), float(t))
                    for i in range(9):
                        x = mx.add(x, 1.0, stream=chain[i % 3])
                        mx.async_eval(x)
                    assert x[255].item() == t + 9.0
                elif kind == 3:  # kernels failing at random
                    bad = rnd.random() < 0.25
                    idx = mx.array([0, 5 if bad else 1])
                    y = mx.take(mx.arange(4.0, stream=s), idx, stream=s) * 2
                    try:
                        out = y.tolist()
                    except IndexError:
                        assert bad, "spurious IndexError (another thread's?)"
                    else:
                        assert not bad, "an out-of-range take returned"
                        assert out == [0.0, 2.0]
                else:  # a singular matrix fails in its kernel
                    singular = rnd.random() < 0.3
                    a = mx.array([[1.0, 2.0], [2.0, 4.0 if singular else 5.0]])
                    try:
                        inv = mx.linalg.inv(a, stream=s)
                        mx.eval(inv)
                    except RuntimeError as e:
                        assert singular and "[linalg::inv]" in str(e), e
                    else:
                        assert not singular
            except AssertionError as e:
                fail(f"thread {t} rep {rep} kind {kind}: {e}")
            except Exception as e:  # noqa: BLE001
                fail(f"thread {t} rep {rep} kind {kind}: unexpected "
                     f"{type(e).__name__}: {e}")
        for st in [own] + chain:
            try:
                mx.synchronize(st)
            except (RuntimeError, IndexError):
                pass

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    try:
        mx.synchronize(shared)
    except (RuntimeError, IndexError):
        pass
    return {"cases": caselog.count, "failures": failures[:20]}
