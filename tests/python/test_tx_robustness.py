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
