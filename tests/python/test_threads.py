"""Several Python threads building and evaluating graphs at once; eval and
item release the GIL."""

import threading
import time

import numpy as np

import fluxion.core as mx


def test_threads_evaluate_concurrently():
    errors = []
    results = {}

    def work(tid):
        try:
            s = mx.new_stream(mx.cpu) if tid % 2 else None
            base = mx.arange(1000, dtype=mx.float32) + tid
            acc = base
            for i in range(50):
                acc = acc * 0.5 + base
                if i % 10 == 0:
                    mx.eval(acc)
            total = mx.sum(acc, stream=s).item()
            ref = np.arange(1000, dtype=np.float64) + tid
            a = ref.copy()
            for _ in range(50):
                a = a * 0.5 + ref
            results[tid] = (total, a.sum())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 8
    for total, ref in results.values():
        assert abs(total - ref) / ref < 1e-5


def test_shared_input_across_threads():
    x = mx.random.normal((200, 200), key=mx.random.key(0))
    mx.eval(x)
    expected = np.array(x) @ np.array(x)
    outs = [None] * 6

    def work(i):
        outs[i] = np.array(x @ x)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for o in outs:
        np.testing.assert_allclose(o, expected, rtol=1e-4, atol=1e-4)


def test_threads_evaluate_and_wait_on_one_lazy_graph():
    # Threads released together all evaluate (or wait on) the same
    # unevaluated nodes: each node is scheduled once, nobody reads an event
    # another thread is dropping (this crashed in CI), every thread sees
    # the right values. Some graphs live on a second stream, so waits cross
    # streams too (one that any thread may use).
    other = mx.new_thread_unsafe_stream(mx.cpu)
    errors = []
    for rep in range(40):
        base = mx.arange(64, dtype=mx.float32) + rep
        mid = mx.exp(base * 0.01, stream=other if rep % 2 else None)
        shared = [mid * 2, mx.sum(mid), mid + base]
        want = np.exp((np.arange(64) + rep) * 0.01)
        barrier = threading.Barrier(4)

        def work(tid):
            try:
                barrier.wait()
                if tid == 0:
                    mx.eval(*shared)
                elif tid == 1:
                    mx.async_eval(shared[0])
                    got = np.array(shared[0])
                    assert np.allclose(got, 2 * want, rtol=1e-5)
                elif tid == 2:
                    assert abs(shared[1].item() - want.sum()) < 1e-3 * want.sum()
                else:
                    got = shared[2].tolist()
                    assert np.allclose(got, want + np.arange(64) + rep, rtol=1e-5)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors


def test_threads_draw_from_an_unevaluated_global_key():
    # The global key is a lazy array (as a compiled function that updates
    # mx.random.state leaves it): every thread's first draw evaluates it at
    # once (the case that crashed in CI); every draw gets its own key.
    keys = []
    for rep in range(20):
        mx.random.state[0] = mx.random.split(mx.random.key(rep))[0]
        barrier = threading.Barrier(4)

        def work():
            barrier.wait()
            for _ in range(5):
                keys.append(tuple(mx.random.bits(shape=(2,)).tolist()))

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(keys) == 400
    assert len(set(keys)) == 400


def test_eval_releases_the_gil():
    a = mx.random.uniform(shape=(1024, 1024), key=mx.random.key(1))
    mx.eval(a)
    duration = []

    def heavy():
        t0 = time.perf_counter()
        y = a
        for _ in range(12):
            y = mx.tanh(y @ a) * 0.01
        mx.eval(y)
        duration.append(time.perf_counter() - t0)

    t = threading.Thread(target=heavy)
    last = time.perf_counter()
    max_gap = 0.0
    t.start()
    while t.is_alive():
        now = time.perf_counter()
        max_gap = max(max_gap, now - last)
        last = now
        time.sleep(0.001)
    t.join()
    # Holding the GIL through eval would stall this loop for the whole
    # evaluation.
    assert max_gap < 0.6 * duration[0] or duration[0] < 0.05, (max_gap,
                                                                duration)
