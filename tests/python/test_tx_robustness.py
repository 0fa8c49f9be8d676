"""Crashes (issue 11, section 4): destroying deep graphs, allocations that
cannot be satisfied."""

import gc

import pytest

import fluxion.core as mx


def test_destroying_deep_graph_with_shared_inputs():
    x = mx.array([1.0])
    for _ in range(100000):
        x = x + x  # each node uses its input twice
    del x
    gc.collect()
    y = mx.array([1.0])
    for _ in range(100000):
        z = y * 2
        y = z + z - y
    del y, z
    # Still working, and exact on a shared chain.
    x = mx.array([1.0])
    for _ in range(20):
        x = x + x
    assert x.item() == 2.0**20


def test_unsatisfiable_allocation_raises_and_the_process_goes_on():
    big = mx.zeros((2**20, 2**20), mx.uint16)
    with pytest.raises(RuntimeError, match=r"\[malloc\] Unable to allocate \d+ bytes"):
        mx.eval(mx.reciprocal(big))
    r = mx.reciprocal(big)
    # zeros owns its buffer (as MLX's Full), so the first allocation to fail
    # is big's 2^40 uint16s (2^41 bytes) or, were it a view, r's float32s.
    with pytest.raises(RuntimeError, match="2199023255552|4398046511104"):
        mx.eval(r.sum())
    # The failed array raises again rather than reading garbage.
    with pytest.raises(RuntimeError, match=r"\[malloc\]"):
        mx.eval(r)
    # On another stream, through async_eval and synchronize.
    s = mx.new_stream(mx.cpu)
    mx.async_eval(mx.reciprocal(big, stream=s))
    with pytest.raises(RuntimeError, match=r"\[malloc\]"):
        mx.synchronize(s)
    assert (mx.arange(4, stream=s) * 2).tolist() == [0, 2, 4, 6]
    assert (mx.ones(3) + 1).tolist() == [2.0, 2.0, 2.0]


# --- issue 17: resource failures are exceptions ---

def test_out_of_memory_names_the_op_and_the_size():
    big = mx.zeros((2**20, 2**20), mx.float32)  # 4 TiB
    with pytest.raises(RuntimeError, match=r"\[malloc\] Unable to allocate "
                       r"4398046511104 bytes \(in \w+, output shape "
                       r"\(1048576,1048576\) float32\)"):
        mx.eval(big)
    # The next op works.
    assert (mx.arange(3) + 1).tolist() == [1, 2, 3]


def test_out_of_memory_on_other_threads_is_raised_there():
    import threading
    errors, results = [], []

    def work():
        s = mx.new_stream(mx.cpu)
        try:
            mx.eval(mx.exp(mx.ones((2**21, 2**20), stream=s)))
        except RuntimeError as e:
            errors.append(str(e))
        results.append(mx.sum(mx.arange(10, stream=s)).item())

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(errors) == 4 and all("[malloc] Unable to allocate" in e and
                                    "(in " in e for e in errors), errors
    assert results == [45] * 4


def test_memory_limit_bounds_the_memory_in_flight():
    # Thirty-two independent 4 MiB temporaries: without a limit the tape
    # keeps many in flight at once; under a limit, eval waits for tasks to
    # finish whenever active memory is above it, so the peak stays near it.
    a = mx.ones((1 << 20,))
    mx.eval(a)
    def run(limit):
        old = mx.set_memory_limit(limit)
        try:
            mx.clear_cache()
            mx.reset_peak_memory()
            outs = [mx.sum(mx.exp(a * (i + 1) * 1e-3)) for i in range(32)]
            mx.eval(outs)
            return mx.get_peak_memory(), [o.item() for o in outs]
        finally:
            mx.set_memory_limit(old)

    free_peak, free_vals = run(1 << 40)
    low_peak, low_vals = run(12 << 20)
    assert low_vals == free_vals
    # The input (4 MiB) plus what the limit lets through, plus one task's
    # own buffers in flight past it.
    assert low_peak <= (12 << 20) + 3 * (4 << 20), (low_peak, free_peak)
    assert mx.get_memory_limit() > 1 << 30  # restored
