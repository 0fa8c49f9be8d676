"""Arrays past 2^31 elements (issue 11, section 4): indices and collapsed
shapes must be 64-bit. int8/bool keep the memory small: the default test
stays under ~5 GiB; the others run only with FLUXION_LARGE_TESTS=1."""

import os

import numpy as np
import pytest

import fluxion.core as mx

N = (1 << 30) + 8  # columns; two rows give 2^31 + 16 elements
large = pytest.mark.skipif(
    os.environ.get("FLUXION_LARGE_TESTS") != "1",
    reason="several GiB; set FLUXION_LARGE_TESTS=1",
)


def tail(x, k=3):
    """The last k elements of each row (a small slice, read back)."""
    return np.array(x[:, -k:])


def test_broadcast_add_past_2_31_elements():
    a = mx.array([[1], [2]], mx.int8)
    b = mx.broadcast_to(mx.array([3], mx.int8), (1, N))
    out = a + b  # 2^31 + 16 int8 elements, one 2 GiB buffer
    mx.eval(out)
    assert out.shape == (2, N) and out.size == 2 * N
    assert tail(out).tolist() == [[4, 4, 4], [5, 5, 5]]
    assert np.array(out[:, :2]).tolist() == [[4, 4], [5, 5]]
    # A unary op on the contiguous buffer (a flat loop past 2^31), donated.
    neg = -out
    del out
    assert tail(neg).tolist() == [[-4, -4, -4], [-5, -5, -5]]
    # Reductions over the long rows: a 2 GiB comparison at most alive
    # beside the 2 GiB input (under 5 GiB in all).
    assert mx.sum(neg == -5, axis=1).tolist() == [0, N]
    # int8 sums accumulate in int32 (as MLX), which wraps here.
    wrap = lambda v: (v + 2**31) % 2**32 - 2**31
    assert neg.sum(axis=1).tolist() == [wrap(-4 * N), wrap(-5 * N)]
    # A 1-D view of it cannot exist: Shape entries are int32 (as MLX's).
    with pytest.raises(ValueError):
        neg.reshape(-1)


@large
def test_large_astype_copy_and_where():
    a = mx.zeros((2, N), mx.bool_)
    a = mx.logical_not(a)
    u = a.astype(mx.uint8)  # contiguous conversion of > 2^31 elements
    del a
    assert tail(u).tolist() == [[1, 1, 1], [1, 1, 1]]
    v = mx.where(u > 0, mx.array(7, mx.uint8), mx.array(0, mx.uint8))
    del u
    assert tail(v).tolist() == [[7, 7, 7], [7, 7, 7]]
    # A strided walk (transposed operand) over > 2^31 elements.
    t = v.T * 1
    del v
    assert t.shape == (N, 2)
    assert np.array(t[-2:]).tolist() == [[7, 7], [7, 7]]


@large
def test_large_slices_and_concatenate():
    a = mx.ones((1, N), mx.int8)
    b = mx.concatenate([a, a * 2], axis=0)  # copies past 2^31 elements
    del a
    assert b.shape == (2, N)
    assert tail(b).tolist() == [[1, 1, 1], [2, 2, 2]]
    c = b[1, N - 4 :]  # a view whose offset is past 2^31 elements
    assert np.array(c).tolist() == [2, 2, 2, 2]
    assert b[:, ::-1][1, 0].item() == 2  # reversed strides
    assert mx.sum(b[1] == 2).item() == N


@large
def test_large_gather_scatter_and_reductions_past_2_31():
    b = mx.zeros((2, N), mx.int8) + mx.array([[1], [2]], mx.int8)
    mx.eval(b)
    # Offsets of the second row pass 2^31 elements.
    assert mx.take(b, mx.array([N - 1, 0]), axis=1).tolist() == [[1, 1], [2, 2]]
    assert mx.take_along_axis(b, mx.array([[N - 1], [N - 2]]), axis=1).tolist() == [[1], [2]]
    assert b[1, N - 1].item() == 2
    assert b[mx.array([1]), mx.array([N - 3])].tolist() == [2]
    c = b.at[1, N - 1].add(mx.array(5, mx.int8))
    mx.eval(c)
    del b
    assert c[1, -2:].tolist() == [2, 7]
    d = mx.slice_update(c, mx.array([[9, 9]], mx.int8), mx.array([1, N - 2]), axes=(0, 1))
    del c
    assert d[1, -3:].tolist() == [2, 9, 9]
    assert d.max().item() == 9
    assert mx.argmax(d, axis=1).tolist() == [0, N - 2]
