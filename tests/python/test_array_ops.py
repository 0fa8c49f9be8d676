"""diag, diagonal, trace, roll, meshgrid and kron against NumPy, with
gradients and vmap."""

import numpy as np
import pytest

import fluxion.core as mx
from helpers import assert_close, from_np, rand

DTYPES = [mx.float32, mx.int32, mx.bool_, mx.float16, mx.bfloat16,
          mx.uint8, mx.int64, mx.complex64, mx.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_diagonal_and_diag(dtype):
    v = rand((3, 4, 5), dtype, low=0)
    x = from_np(v, dtype)
    for offset in (-3, -1, 0, 2, 6):
        for a1, a2 in ((0, 1), (2, 0), (-1, 1)):
            assert_close(mx.diagonal(x, offset, a1, a2),
                         np.diagonal(v, offset, a1, a2))
    # A transposed view.
    assert_close(mx.diagonal(x.T, offset=1, axis1=1, axis2=2),
                 np.diagonal(v.T, 1, 1, 2))
    m = v[0]
    for k in (-2, 0, 1, 4):
        assert_close(mx.diag(from_np(m, dtype), k), np.diag(m, k))
        assert_close(mx.diag(from_np(m[1], dtype), k=k), np.diag(m[1], k))


def test_trace():
    v = rand((4, 3, 5), mx.float64)
    x = mx.array(v)
    for offset in (-1, 0, 2):
        assert_close(mx.trace(x, offset, 0, 2), np.trace(v, offset, 0, 2))
        assert_close(mx.trace(x, offset=offset, axis1=2, axis2=1),
                     np.trace(v, offset, 2, 1))
    m = mx.array(np.arange(9, dtype=np.int32).reshape(3, 3))
    assert mx.trace(m).item() == 12
    assert mx.trace(m, dtype=mx.float16).dtype == mx.float16
    big = mx.full((300, 300), 1).astype(mx.int8)
    assert mx.trace(big, dtype=mx.int32).item() == 300


@pytest.mark.parametrize("dtype", [mx.float32, mx.int32, mx.complex64])
def test_roll(dtype):
    v = rand((3, 4, 2), dtype)
    x = from_np(v, dtype)
    for shift in (-7, -1, 0, 3, 25):
        assert_close(mx.roll(x, shift), np.roll(v, shift))
        assert_close(mx.roll(x, shift, 1), np.roll(v, shift, 1))
        assert_close(mx.roll(x, shift, axis=-1), np.roll(v, shift, -1))
        assert_close(mx.roll(x.T, shift, axis=(0, 2)),
                     np.roll(v.T, shift, (0, 2)))
    assert_close(mx.roll(x, (1, -2), (0, 1)), np.roll(v, (1, -2), (0, 1)))
    assert_close(mx.roll(x, (1, 4)), np.roll(v, (1, 4)))


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
def test_meshgrid(indexing, sparse):
    a, b, c = np.arange(3.0), np.arange(4, dtype=np.int32), \
        np.linspace(0, 1, 5).astype(np.float32)
    got = mx.meshgrid(mx.array(a), mx.array(b), mx.array(c), sparse=sparse,
                      indexing=indexing)
    want = np.meshgrid(a, b, c, sparse=sparse, indexing=indexing)
    assert len(got) == 3
    for g, w in zip(got, want):
        assert_close(g, w)
    g2 = mx.meshgrid(mx.array(a), mx.array(b))
    for g, w in zip(g2, np.meshgrid(a, b)):
        assert_close(g, w)


def test_kron():
    for sa, sb in (((2, 3), (3, 2)), ((4,), (2, 2)), ((2, 1, 3), (3,)),
                   ((), (3,))):
        va, vb = rand(sa, mx.float32), rand(sb, mx.float32, seed=1)
        assert_close(mx.kron(mx.array(va), mx.array(vb)), np.kron(va, vb))
    vi = rand((2, 2), mx.int32)
    assert_close(mx.kron(mx.array(vi), mx.array(vi).T), np.kron(vi, vi.T))


def test_grads_and_vmap():
    v = rand((3, 3), mx.float64)
    g = mx.grad(lambda x: mx.trace(x))(mx.array(v))
    assert_close(g, np.eye(3))
    g = mx.grad(lambda x: (mx.diagonal(x, 1) ** 2).sum())(mx.array(v))
    want = np.zeros((3, 3))
    for i in range(2):
        want[i, i + 1] = 2 * v[i, i + 1]
    assert_close(g, want)
    w = rand((3, 4), mx.float64, seed=2)
    g = mx.grad(lambda x: (mx.roll(x, 1, 1) * mx.array(w)).sum())(
        mx.array(w))
    assert_close(g, np.roll(w, -1, 1))
    b = rand((4, 3, 3), mx.float64)
    assert_close(mx.vmap(mx.trace)(mx.array(b)), np.trace(b, 0, 1, 2))
    assert_close(mx.vmap(lambda x: mx.kron(x, mx.array(w)))(mx.array(b)),
                 np.stack([np.kron(bi, w) for bi in b]))


def test_errors():
    with pytest.raises(ValueError, match=r"\[diagonal\] Array must have at "
                       r"least two dimensions"):
        mx.diagonal(mx.zeros((3,)))
    with pytest.raises(ValueError, match=r"\[diagonal\] axis1 and axis2 must"
                       r" differ"):
        mx.trace(mx.zeros((3, 3)), 0, 1, 1)
    with pytest.raises(ValueError, match=r"\[diagonal\]"):
        mx.diagonal(mx.zeros((3, 3)), 0, 0, 5)
    with pytest.raises(ValueError, match=r"\[diag\] Input must be 1-D or 2-D"):
        mx.diag(mx.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match=r"\[roll\] shift and axis"):
        mx.roll(mx.zeros((2, 2)), (1, 2, 3), (0, 1))
    with pytest.raises(ValueError, match=r"\[roll\]"):
        mx.roll(mx.zeros((2, 2)), 1, 3)
    with pytest.raises(ValueError, match=r"\[meshgrid\] indexing must be"):
        mx.meshgrid(mx.zeros((2,)), indexing="yx")


EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ii", [(3, 3)]),
    ("ii->i", [(3, 3)]),
    ("ij->ji", [(2, 3)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("i,j->ij", [(3,), (2,)]),
    ("i,i", [(4,), (4,)]),
    ("iij,jk->ki", [(3, 3, 2), (2, 4)]),
    ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 2)]),
    ("abc,cd,ab->d", [(2, 3, 2), (2, 3), (2, 3)]),
    ("ij,kl->", [(2, 2), (3, 1)]),
    ("Ba,aB", [(2, 3), (3, 2)]),
    ("ba , a", [(2, 3), (3,)]),
    # size-1 axes broadcast against the letter's size (NumPy)
    ("ij,ij->ij", [(1, 3), (2, 3)]),
    ("ij,jk->ik", [(2, 1), (3, 4)]),
    ("bij,bjk->bik", [(1, 2, 3), (4, 3, 2)]),
]


@pytest.mark.parametrize("expr,shapes", EINSUM_CASES)
@pytest.mark.parametrize("dtype", [mx.float32, mx.float64, mx.int32])
def test_einsum(expr, shapes, dtype):
    vals = [rand(s, dtype, seed=i) for i, s in enumerate(shapes)]
    got = mx.einsum(expr, *[from_np(v, dtype) for v in vals])
    want = np.einsum(expr.replace(" ", ""), *vals)
    assert got.dtype == dtype
    assert_close(got, want, rtol=1e-5 if dtype == mx.float32 else None)


def test_einsum_views_grad_and_path():
    a, b = rand((4, 3), mx.float64), rand((4, 5), mx.float64, seed=1)
    x, y = mx.array(a), mx.array(b)
    assert_close(mx.einsum("ji,jk->ik", x, y), a.T @ b)
    assert_close(mx.einsum("ij,kj->ik", x.T, y.T), a.T @ b)
    ga, gb = mx.grad(lambda p, q: mx.einsum("ji,jk->", p, q),
                     argnums=(0, 1))(x, y)
    assert_close(ga, np.outer(b.sum(1), np.ones(3)))
    assert_close(gb, np.outer(a.sum(1), np.ones(5)))
    batched = rand((2, 4, 3), mx.float64, seed=2)
    assert_close(mx.vmap(lambda p: mx.einsum("ji,jk->ik", p, y))(
        mx.array(batched)), np.einsum("nji,jk->nik", batched, b))
    path, text = mx.einsum_path("ij,jk,k->i", mx.zeros((50, 60)),
                                mx.zeros((60, 70)), mx.zeros((70,)))
    assert path == [(1, 2), (0, 1)]
    assert "ij,jk,k->i" in text


def test_einsum_errors():
    with pytest.raises(ValueError, match=r"\[einsum\] 'ij,jk->ik' names 2 "
                       r"operands but 1 were given"):
        mx.einsum("ij,jk->ik", mx.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"\[einsum\] Index 'j' has size 3 "
                       r"and size 4"):
        mx.einsum("ij,jk", mx.zeros((2, 3)), mx.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"\[einsum\] Output index 'k' "
                       r"appears in no operand"):
        mx.einsum("ij->ik", mx.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"\[einsum\] Operand 0 has shape"):
        mx.einsum_path("ijk", mx.zeros((2, 3)))


@pytest.mark.parametrize("expr,shapes", [
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 2)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("i...,i...", [(3, 2, 1), (3, 1, 4)]),
    ("...,...", [(2, 3), (3,)]),
    ("ij...->", [(2, 3)]),
    ("b...,b->...", [(2, 3), (2,)]),
])
def test_einsum_ellipsis(expr, shapes):
    vals = [rand(s, mx.float64, seed=i) for i, s in enumerate(shapes)]
    got = mx.einsum(expr, *[mx.array(v) for v in vals])
    assert_close(got, np.einsum(expr, *vals))


def test_einsum_ellipsis_errors():
    with pytest.raises(ValueError, match=r"\[einsum\] Operand 0 has shape "
                       r"\(2\) but its subscripts 'ij...' name 2 axes"):
        mx.einsum("ij...", mx.zeros((2,)))
    with pytest.raises(ValueError, match=r"\[einsum\]"):
        mx.einsum("...,...", mx.zeros((2,)), mx.zeros((3,)))
    with pytest.raises(ValueError, match=r"\[einsum\] The output of "
                       r"'ij...->' has no '...' for the 1 axes under '...' "
                       r"\(4\)"):
        mx.einsum("ij...->", mx.zeros((2, 3, 4)))
