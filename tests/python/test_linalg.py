"""mx.linalg against np.linalg: norms, inverses, solves, factorizations,
decompositions, errors and a gradient."""

import numpy as np
import pytest

import fluxion.core as mx
from helpers import assert_close, to_np, keep64

LA = mx.linalg


def randn(shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def spd(n, batch=(), seed=0):
    a = randn(batch + (n, n), seed)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


TOL = {np.float32: 2e-4, np.float64: 1e-10}

VECTOR_ORDS = [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5, -1]
MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]


@pytest.mark.parametrize("ord", VECTOR_ORDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vector_norm(ord, dtype):
    v = randn((3, 6), 1, dtype)
    v[0, 2] = 0
    tol = TOL[dtype]

    def ref(x, **kw):
        with np.errstate(divide="ignore"):  # ord < 0 with a zero entry
            return np.linalg.norm(x.astype(np.float64), ord=ord, **kw)

    assert_close(LA.norm(keep64(v[0]), ord), ref(v[0]), rtol=tol,
                 atol=tol)
    assert_close(LA.norm(keep64(v), ord, axis=1), ref(v, axis=1),
                 rtol=tol, atol=tol)
    assert_close(LA.norm(keep64(v), ord=ord, axis=0, keepdims=True),
                 ref(v, axis=0, keepdims=True), rtol=tol, atol=tol)


@pytest.mark.parametrize("ord", MATRIX_ORDS)
def test_matrix_norm(ord):
    a = randn((2, 4, 5), 2)
    ref = np.linalg.norm(a, ord=ord, axis=(1, 2))
    assert_close(LA.norm(keep64(a), ord, axis=(1, 2)), ref, rtol=1e-10,
                 atol=1e-10)
    assert_close(LA.norm(keep64(a[0]), ord=ord), np.linalg.norm(a[0], ord),
                 rtol=1e-10, atol=1e-10)
    # Transposed axes and keepdims.
    assert_close(LA.norm(keep64(a), ord, axis=[2, 1], keepdims=True),
                 np.linalg.norm(a, ord=ord, axis=(2, 1), keepdims=True),
                 rtol=1e-10, atol=1e-10)


def test_norm_no_ord_flattens_nd():
    a = randn((2, 3, 4), 3)
    assert_close(LA.norm(keep64(a)), np.sqrt(np.sum(a * a)), rtol=1e-12,
                 atol=1e-12)
    assert_close(LA.norm(keep64(a), axis=-1), np.linalg.norm(a, axis=-1),
                 rtol=1e-12, atol=1e-12)


def test_norm_errors():
    with pytest.raises(ValueError, match=r"\[linalg::norm\]"):
        LA.norm(mx.zeros((2, 3, 4)), 2)
    with pytest.raises(ValueError, match=r"\[linalg::norm\] Norm \"fro\""):
        LA.norm(mx.zeros((4,)), "fro")
    with pytest.raises(ValueError, match=r"\[linalg::norm\] Unknown matrix"):
        LA.norm(mx.zeros((3, 3)), "bad")
    with pytest.raises(ValueError, match=r"\[linalg::norm\] Matrix norms"):
        LA.norm(mx.zeros((3, 3)), 3)
    with pytest.raises(ValueError, match=r"\[linalg::norm\] axis must name"):
        LA.norm(mx.zeros((3, 3, 3)), axis=(0, 1, 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inv_pinv(dtype):
    a = (randn((3, 4, 4), 4) + 4 * np.eye(4)).astype(dtype)
    tol = TOL[dtype]
    assert_close(LA.inv(keep64(a)), np.linalg.inv(a.astype(np.float64)),
                 rtol=tol, atol=tol)
    r = randn((2, 5, 3), 5).astype(dtype)
    assert_close(LA.pinv(keep64(r)), np.linalg.pinv(r.astype(np.float64)),
                 rtol=tol * 10, atol=tol * 10)
    # A transposed view.
    at = mx.transpose(keep64(a), (0, 2, 1))
    assert_close(LA.inv(at), np.linalg.inv(np.swapaxes(a, 1, 2).astype(
        np.float64)), rtol=tol, atol=tol)


def test_solve():
    a = randn((3, 4, 4), 6) + 4 * np.eye(4)
    b = randn((3, 4, 2), 7)
    assert_close(LA.solve(keep64(a), keep64(b)), np.linalg.solve(a, b),
                 rtol=1e-10, atol=1e-10)
    # One vector right-hand side shared by the batch.
    v = randn((4,), 8)
    assert_close(LA.solve(keep64(a), keep64(v)),
                 np.linalg.solve(a, v[None, :, None])[..., 0], rtol=1e-10,
                 atol=1e-10)
    # Batch dims broadcast.
    bb = randn((2, 1, 4, 3), 9)
    assert_close(LA.solve(keep64(a), keep64(bb)), np.linalg.solve(a, bb),
                 rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("upper", [False, True])
def test_triangular(upper):
    a = randn((2, 4, 4), 10) + 4 * np.eye(4)
    t = np.triu(a) if upper else np.tril(a)
    b = randn((2, 4, 3), 11)
    # Only the named triangle is read: pass the full matrix.
    assert_close(LA.solve_triangular(keep64(a), keep64(b), upper=upper),
                 np.linalg.solve(t, b), rtol=1e-10, atol=1e-10)
    assert_close(LA.tri_inv(keep64(a), upper), np.linalg.inv(t),
                 rtol=1e-10, atol=1e-10)
    assert_close(LA.tri_inv(keep64(a), upper=upper, stream=mx.cpu),
                 np.linalg.inv(t), rtol=1e-10, atol=1e-10)


def test_cholesky():
    s = spd(4, (3,), 12)
    low = np.linalg.cholesky(s)
    assert_close(LA.cholesky(keep64(s)), low, rtol=1e-10, atol=1e-10)
    assert_close(LA.cholesky(keep64(s), upper=True),
                 np.swapaxes(low, -1, -2), rtol=1e-10, atol=1e-10)
    assert_close(LA.cholesky_inv(keep64(low)), np.linalg.inv(s),
                 rtol=1e-10, atol=1e-10)
    assert_close(LA.cholesky_inv(keep64(np.swapaxes(low, -1, -2)),
                                 upper=True),
                 np.linalg.inv(s), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
def test_qr(shape):
    a = randn(shape, 13)
    q, r = LA.qr(keep64(a))
    k = min(shape[-2:])
    assert q.shape == shape[:-1] + (k,) and r.shape == shape[:-2] + (
        k, shape[-1])
    qn, rn = to_np(q), to_np(r)
    np.testing.assert_allclose(qn @ rn, a, atol=1e-10)
    np.testing.assert_allclose(np.swapaxes(qn, -1, -2) @ qn,
                               np.broadcast_to(np.eye(k), qn.shape[:-2] +
                                               (k, k)), atol=1e-10)
    np.testing.assert_array_equal(np.tril(rn, -1), 0)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
def test_svd(shape):
    a = randn(shape, 14)
    u, s, vt = LA.svd(keep64(a))
    m, n = shape[-2:]
    k = min(m, n)
    assert u.shape == shape[:-2] + (m, m) and vt.shape == shape[:-2] + (n, n)
    sn = to_np(s)
    np.testing.assert_allclose(sn, np.linalg.svd(a, compute_uv=False),
                               atol=1e-10)
    un, vtn = to_np(u), to_np(vt)
    recon = un[..., :, :k] @ (sn[..., :, None] * vtn[..., :k, :])
    np.testing.assert_allclose(recon, a, atol=1e-10)
    only = LA.svd(keep64(a), compute_uv=False)
    assert isinstance(only, mx.array)
    np.testing.assert_allclose(to_np(only), sn, atol=1e-12)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(uplo):
    s = spd(5, (2,), 15) - 5 * np.eye(5)
    # Garbage in the unread triangle.
    junk = s + (np.triu(randn((2, 5, 5), 16), 1) if uplo == "L" else
                np.tril(randn((2, 5, 5), 16), -1))
    w, v = LA.eigh(keep64(junk), UPLO=uplo)
    wn, vn = to_np(w), to_np(v)
    np.testing.assert_allclose(wn, np.linalg.eigvalsh(s), atol=1e-10)
    np.testing.assert_allclose(s @ vn, vn * wn[..., None, :], atol=1e-10)
    np.testing.assert_allclose(to_np(LA.eigvalsh(keep64(junk), uplo)),
                               np.linalg.eigvalsh(s), atol=1e-10)


def test_eig():
    a = randn((2, 4, 4), 17)
    w, v = LA.eig(keep64(a))
    assert w.dtype == mx.complex64 and v.dtype == mx.complex64
    wn, vn = to_np(w).astype(np.complex128), to_np(v).astype(np.complex128)
    np.testing.assert_allclose(a @ vn, vn * wn[..., None, :], atol=1e-4)
    key = lambda z: np.sort_complex(np.round(z, 4))
    ref = np.linalg.eigvals(a)
    for i in range(2):
        np.testing.assert_allclose(key(wn[i]), key(ref[i]), atol=1e-3)
        np.testing.assert_allclose(
            key(to_np(LA.eigvals(keep64(a)))[i]), key(ref[i]), atol=1e-3)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 4)])
def test_lu(shape):
    a = randn(shape, 18)
    p, l, u = LA.lu(keep64(a))
    assert p.dtype == mx.uint32
    pn = to_np(p).astype(np.int64)
    ln, un = to_np(l), to_np(u)
    np.testing.assert_allclose(np.diagonal(ln, axis1=-2, axis2=-1), 1)
    np.testing.assert_array_equal(np.triu(ln, 1), 0)
    np.testing.assert_array_equal(np.tril(un, -1), 0)
    permuted = np.take_along_axis(ln, pn[..., None], -2)
    np.testing.assert_allclose(permuted @ un, a, atol=1e-10)


def test_lu_factor():
    a = randn((4, 4), 19)
    lu, piv = LA.lu_factor(keep64(a))
    assert piv.dtype == mx.uint32
    lun, pv = to_np(lu), to_np(piv)
    l = np.tril(lun, -1) + np.eye(4)
    u = np.triu(lun)
    pa = a.copy()
    for i, j in enumerate(pv):
        pa[[i, j]] = pa[[j, i]]
    np.testing.assert_allclose(l @ u, pa, atol=1e-10)


def test_cross():
    a, b = randn((4, 3), 20), randn((4, 3), 21)
    assert_close(LA.cross(keep64(a), keep64(b)), np.cross(a, b),
                 rtol=1e-12, atol=1e-12)
    assert_close(LA.cross(keep64(a.T), keep64(b.T), axis=0),
                 np.cross(a.T, b.T, axis=0), rtol=1e-12, atol=1e-12)
    # Broadcasting.
    assert_close(LA.cross(keep64(a), keep64(b[0])), np.cross(a, b[0]),
                 rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"\[linalg::cross\]"):
        LA.cross(mx.zeros((4, 2)), mx.zeros((4, 2)))


def test_errors():
    rect = mx.zeros((3, 4))
    for name in ("inv", "cholesky", "eigvalsh", "eigvals", "tri_inv"):
        with pytest.raises(ValueError,
                           match=rf"\[linalg::{name}\] Arrays must be "
                                 r"batches of square matrices"):
            getattr(LA, name)(rect)
    with pytest.raises(ValueError, match=r"\[linalg::qr\] Arrays must have "
                                         r"at least two dimensions"):
        LA.qr(mx.zeros((3,)))
    with pytest.raises(ValueError, match=r"\[linalg::inv\] Arrays must have a "
                                         r"real floating point type"):
        LA.inv(mx.zeros((2, 2), dtype=mx.int32))
    with pytest.raises(ValueError, match=r"\[linalg::eigh\] UPLO must be"):
        LA.eigh(mx.eye(3), "X")
    with pytest.raises(ValueError, match=r"\[linalg::solve\]"):
        LA.solve(mx.eye(3), mx.zeros((4, 2)))
    # Singular matrices fail when evaluated.
    sing = LA.inv(keep64([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.raises(RuntimeError, match=r"\[linalg::inv\]"):
        mx.eval(sing)
    with pytest.raises(RuntimeError, match=r"\[linalg::cholesky\]"):
        mx.eval(LA.cholesky(keep64([[1.0, 2.0], [2.0, 1.0]])))


def test_inv_grad():
    a = randn((4, 4), 22) + 4 * np.eye(4)
    g = mx.grad(lambda x: LA.inv(x).sum())(keep64(a))
    # d sum(inv(A)) / dA = -inv(A)^T 1 1^T inv(A)^T.
    ai = np.linalg.inv(a)
    ones = np.ones((4, 4))
    assert_close(g, -ai.T @ ones @ ai.T, rtol=1e-10, atol=1e-10)


def test_stream_keyword():
    a = spd(3, (), 23)
    assert_close(LA.inv(keep64(a), stream=mx.cpu), np.linalg.inv(a),
                 rtol=1e-10, atol=1e-10)
    w, _ = LA.eigh(keep64(a), stream=mx.default_stream(mx.cpu))
    np.testing.assert_allclose(to_np(w), np.linalg.eigvalsh(a), atol=1e-10)


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
def test_half_types_round_back(dtype):
    a = np.array([[4.0, 1.0], [2.0, 3.0]])
    out = LA.inv(keep64(a).astype(dtype))
    assert out.dtype == dtype
    assert_close(out, np.linalg.inv(a), rtol=2e-2, atol=2e-2)
    n = LA.norm(keep64(a).astype(dtype))
    assert n.dtype == dtype
    assert_close(n, np.linalg.norm(a), rtol=2e-2, atol=2e-2)


def test_lu_of_singular_matrix():
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    p, l, u = LA.lu(keep64(a))
    permuted = np.take_along_axis(to_np(l), to_np(p).astype(np.int64)[:, None],
                                  -2)
    np.testing.assert_allclose(permuted @ to_np(u), a, atol=1e-12)
