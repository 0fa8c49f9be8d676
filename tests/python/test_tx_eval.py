"""Errors raised in kernels reach eval/synchronize of the stream they ran on
(issue 11: async-eval error semantics), also for lazy loads."""

import os

import numpy as np
import pytest

import fluxion.core as mx


def bad_take(stream=None):
    # Index values are only known to the kernel.
    return mx.take(mx.arange(4.0), mx.array([1, 10]), stream=stream)


def test_kernel_error_reaches_eval_on_the_default_stream():
    with pytest.raises(IndexError):
        mx.eval(bad_take() * 2)
    # The stream is usable afterwards.
    assert (mx.arange(3) + 1).tolist() == [1, 2, 3]


def test_kernel_error_on_another_stream():
    s = mx.new_stream(mx.cpu)
    y = bad_take(s)
    with pytest.raises(IndexError):
        mx.eval(y)
    # Consumed on the default stream: the error crosses streams.
    z = mx.exp(bad_take(s)) + 1
    with pytest.raises(IndexError):
        mx.eval(z)
    # async_eval returns; synchronize of that stream raises.
    mx.async_eval(bad_take(s))
    with pytest.raises(IndexError):
        mx.synchronize(s)
    # An error is raised once: the next synchronize is clean.
    mx.synchronize(s)
    w = mx.add(mx.array([1.0]), mx.array([2.0]), stream=s)
    assert w.item() == 3.0


def test_async_eval_then_eval_raises_and_array_stays_failed():
    y = bad_take()
    mx.async_eval(y)
    with pytest.raises(IndexError):
        mx.eval(y)
    # Reading the failed array again raises again, rather than giving
    # garbage.
    with pytest.raises(IndexError):
        y.item() if y.size == 1 else y.tolist()
    # A consumer built afterwards raises the same error.
    with pytest.raises(IndexError):
        mx.eval(y + 1)


def test_independent_outputs_of_a_failed_eval_are_right():
    good = mx.arange(5.0) * 3
    with pytest.raises(IndexError):
        mx.eval(bad_take(), good)
    assert good.tolist() == [0.0, 3.0, 6.0, 9.0, 12.0]


def test_errors_in_threads_stay_in_their_thread():
    import threading

    errors = []

    def work(i):
        s = mx.new_stream(mx.cpu)
        try:
            if i % 2:
                mx.eval(bad_take(s))
            else:
                assert (mx.arange(4, stream=s) * 2).tolist() == [0, 2, 4, 6]
                errors.append(None)
                return
        except IndexError:
            errors.append("index")
            return
        errors.append("no error")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(errors, key=str) == sorted([None, None, None, "index", "index", "index"], key=str)


def test_truncated_npy_raises_at_eval_not_at_load(tmp_path):
    p = os.path.join(tmp_path, "a.npy")
    np.save(p, np.arange(1000, dtype=np.float32))
    with open(p, "r+b") as f:
        f.truncate(500)
    a = mx.load(p)  # only the header is read
    assert a.shape == (1000,)
    with pytest.raises(RuntimeError, match="truncated"):
        mx.eval(a)
    # Also through a consumer, and on another stream.
    b = mx.load(p)
    with pytest.raises(RuntimeError, match="truncated"):
        mx.eval(b.sum())
    s = mx.new_stream(mx.cpu)
    c = mx.load(p, stream=s)
    mx.async_eval(c)
    with pytest.raises(RuntimeError, match="truncated"):
        mx.synchronize(s)
    # A good file still loads.
    q = os.path.join(tmp_path, "b.npy")
    np.save(q, np.arange(10, dtype=np.int32))
    assert mx.load(q).tolist() == list(range(10))
