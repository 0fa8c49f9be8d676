"""mx.linalg on the GPU (cuSOLVER / cuBLAS; skipped, with the reason, where
no GPU is visible) against np.linalg and the CPU: every function of the
module in float32 and float64 (complex64 for svd, eigh, eig), batches of
10,000 small matrices and one large matrix, norms of every ord, singular
and non-positive-definite inputs raising the CPU's error, NaN inputs,
gradients against the CPU's, vmap and compile.
"""
import numpy as np
import pytest

import fluxion.core as mx

from helpers import keep64, requires_gpu

pytestmark = requires_gpu

G = mx.gpu
C = mx.cpu
LA = mx.linalg
RNG = np.random.default_rng(31)
DTYPES = [np.float32, np.float64]


def randn(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def wc(*shape, dtype=np.float64):
    n = shape[-1]
    return (randn(*shape) + n * np.eye(n)).astype(dtype)


def spd(*shape, dtype=np.float64):
    m = randn(*shape)
    n = shape[-1]
    return (m @ np.swapaxes(m, -1, -2) / n + np.eye(n)).astype(dtype)


def tol(dtype):
    return 1e-9 if dtype == np.float64 else 2e-3


def close(got, want, t):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=t * scale)


def arr(x):
    return keep64(x)  # float64 stays float64 (mx.array alone rounds it)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (3, 9, 9), (200, 200)])
def test_inv_solve_triangular(dtype, shape):
    a = wc(*shape, dtype=dtype)
    b = randn(*shape[:-1], 3, dtype=dtype)
    t = tol(dtype)
    close(LA.inv(arr(a), stream=G), np.linalg.inv(a.astype(np.float64)), t)
    close(LA.solve(arr(a), arr(b), stream=G),
          np.linalg.solve(a.astype(np.float64), b.astype(np.float64)), t)
    for upper in (False, True):
        tri = np.triu(a) if upper else np.tril(a)
        close(LA.solve_triangular(arr(a), arr(b), upper=upper, stream=G),
              np.linalg.solve(tri.astype(np.float64), b.astype(np.float64)),
              t)
        close(LA.tri_inv(arr(a), upper=upper, stream=G),
              np.linalg.inv(tri.astype(np.float64)), t)
    close(LA.pinv(arr(a), stream=G), np.linalg.pinv(a.astype(np.float64)),
          10 * t)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky(dtype):
    s = spd(5, 6, 6, dtype=dtype)
    low = np.linalg.cholesky(s.astype(np.float64))
    t = tol(dtype)
    close(LA.cholesky(arr(s), stream=G), low, t)
    close(LA.cholesky(arr(s), upper=True, stream=G),
          np.swapaxes(low, -1, -2), t)
    close(LA.cholesky_inv(arr(low.astype(dtype)), stream=G),
          np.linalg.inv(s.astype(np.float64)), 10 * t)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (2, 5, 4),
                                   (300, 200)])
def test_qr_lu(dtype, shape):
    a = randn(*shape, dtype=dtype)
    t = tol(dtype)
    q, r = LA.qr(arr(a), stream=G)
    qn, rn = np.asarray(q), np.asarray(r)
    k = min(shape[-2:])
    close(qn @ rn, a, 10 * t)
    close(np.swapaxes(qn, -1, -2) @ qn,
          np.broadcast_to(np.eye(k), qn.shape[:-2] + (k, k)), 10 * t)
    assert np.all(np.tril(rn, -1) == 0)
    p, l, u = LA.lu(arr(a), stream=G)
    pc, lc, uc = LA.lu(arr(a), stream=C)
    np.testing.assert_array_equal(np.asarray(p), np.asarray(pc))
    close(l, np.asarray(lc), t)
    close(u, np.asarray(uc), t)
    lu, piv = LA.lu_factor(arr(a), stream=G)
    luc, pivc = LA.lu_factor(arr(a), stream=C)
    np.testing.assert_array_equal(np.asarray(piv), np.asarray(pivc))
    close(lu, np.asarray(luc), t)


@pytest.mark.parametrize("dtype", DTYPES + [np.complex64])
@pytest.mark.parametrize("shape", [(4, 4), (4, 7), (7, 4), (3, 5, 2),
                                   (50, 80)])
def test_svd(dtype, shape):
    if dtype == np.complex64:
        a = (randn(*shape) + 1j * randn(*shape)).astype(dtype)
    else:
        a = randn(*shape, dtype=dtype)
    t = 1e-9 if dtype == np.float64 else 2e-3
    u, s, vt = LA.svd(arr(a), stream=G)
    m, n = shape[-2:]
    k = min(m, n)
    sn = np.asarray(s)
    close(sn, np.linalg.svd(a.astype(np.complex128), compute_uv=False), t)
    un, vtn = np.asarray(u), np.asarray(vt)
    close(un[..., :, :k] @ (sn[..., :, None] * vtn[..., :k, :]), a, 10 * t)
    close(np.conj(np.swapaxes(un, -1, -2)) @ un,
          np.broadcast_to(np.eye(m), un.shape), 10 * t)
    close(LA.svd(arr(a), compute_uv=False, stream=G), sn, t)


@pytest.mark.parametrize("dtype", DTYPES + [np.complex64])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(dtype, uplo):
    n = 6
    if dtype == np.complex64:
        m = randn(3, n, n) + 1j * randn(3, n, n)
        h = (m + np.conj(np.swapaxes(m, -1, -2))).astype(dtype)
    else:
        h = (spd(3, n, n) - 2 * np.eye(n)).astype(dtype)
    junk = h + (np.triu(randn(3, n, n), 1) if uplo == "L" else
                np.tril(randn(3, n, n), -1)).astype(dtype)
    t = 1e-9 if dtype == np.float64 else 2e-3
    w, v = LA.eigh(arr(junk), UPLO=uplo, stream=G)
    wn, vn = np.asarray(w), np.asarray(v)
    close(wn, np.linalg.eigvalsh(h.astype(np.complex128)), t)
    close(h @ vn, vn * wn[..., None, :], 10 * t)
    close(LA.eigvalsh(arr(junk), uplo, stream=G), wn, t)


@pytest.mark.parametrize("dtype", DTYPES + [np.complex64])
def test_eig(dtype):
    if dtype == np.complex64:
        a = (randn(2, 5, 5) + 1j * randn(2, 5, 5)).astype(dtype)
    else:
        a = randn(2, 5, 5, dtype=dtype)
    w, v = LA.eig(arr(a), stream=G)
    assert w.dtype == mx.complex64 and v.dtype == mx.complex64
    wn = np.asarray(w).astype(np.complex128)
    vn = np.asarray(v).astype(np.complex128)
    close(a @ vn, vn * wn[..., None, :], 1e-4)
    close(np.linalg.norm(vn, axis=-2), np.ones((2, 5)), 1e-5)
    ref = np.linalg.eigvals(a.astype(np.complex128))
    key = lambda z: np.sort_complex(np.round(z, 4))
    for i in range(2):
        close(key(wn[i]), key(ref[i]), 1e-3)
        close(key(np.asarray(LA.eigvals(arr(a), stream=G))[i]), key(ref[i]),
              1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_det_slogdet_norm(dtype):
    a = wc(3, 5, 5, dtype=dtype) / 5
    t = tol(dtype)
    a64 = a.astype(np.float64)
    close(LA.det(arr(a), stream=G), np.linalg.det(a64), 10 * t)
    sgn, logdet = LA.slogdet(arr(a), stream=G)
    rs, rl = np.linalg.slogdet(a64)
    close(sgn, rs, t)
    close(logdet, rl, 10 * t)
    m = randn(4, 6, dtype=dtype)
    for ord in [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]:
        close(LA.norm(arr(m), ord=ord, stream=G),
              np.linalg.norm(m.astype(np.float64), ord=ord), 10 * t)
    v = randn(7, dtype=dtype)
    for ord in [None, 1, 2, 0, 3.5, np.inf, -np.inf]:
        close(LA.norm(arr(v), ord=ord, stream=G),
              np.linalg.norm(v.astype(np.float64), ord=ord), 10 * t)


@pytest.mark.parametrize("dtype", DTYPES)
def test_ten_thousand_small(dtype):
    a = wc(10000, 8, 8, dtype=dtype)
    b = randn(10000, 8, 2, dtype=dtype)
    s = spd(10000, 8, 8, dtype=dtype)
    t = tol(dtype)
    a64, s64 = a.astype(np.float64), s.astype(np.float64)
    close(LA.inv(arr(a), stream=G), np.linalg.inv(a64), t)
    close(LA.solve(arr(a), arr(b), stream=G),
          np.linalg.solve(a64, b.astype(np.float64)), t)
    close(LA.cholesky(arr(s), stream=G), np.linalg.cholesky(s64), t)
    close(LA.eigvalsh(arr(s), stream=G), np.linalg.eigvalsh(s64), t)
    close(LA.svd(arr(a), compute_uv=False, stream=G),
          np.linalg.svd(a64, compute_uv=False), t)
    q, r = LA.qr(arr(a), stream=G)
    close(np.asarray(q) @ np.asarray(r), a, 10 * t)
    p, l, u = LA.lu(arr(a), stream=G)
    pn = np.asarray(p).astype(np.int64)
    close(np.take_along_axis(np.asarray(l), pn[..., None], -2) @ np.asarray(u),
          a, 10 * t)


def test_large():
    n = 1024
    a = wc(n, n, dtype=np.float32)
    s = spd(n, n, dtype=np.float32)
    b = randn(n, 2, dtype=np.float32)
    a64 = a.astype(np.float64)
    close(LA.inv(arr(a), stream=G), np.linalg.inv(a64), 1e-4)
    close(LA.solve(arr(a), arr(b), stream=G),
          np.linalg.solve(a64, b.astype(np.float64)), 1e-5)
    close(LA.cholesky(arr(s), stream=G),
          np.linalg.cholesky(s.astype(np.float64)), 1e-4)
    close(LA.eigvalsh(arr(s), stream=G),
          np.linalg.eigvalsh(s.astype(np.float64)), 1e-4)
    close(LA.svd(arr(a), compute_uv=False, stream=G),
          np.linalg.svd(a64, compute_uv=False), 1e-4)


def test_errors_as_on_the_cpu():
    a = wc(1000, 3, 3)
    a[7, 1, :] = 0
    cases = [
        (lambda s: LA.inv(arr(a), stream=s), r"\[linalg::inv\] Matrix is "
         r"singular\."),
        (lambda s: LA.solve(arr(a), arr(randn(1000, 3, 1)), stream=s),
         r"\[linalg::solve\] Matrix is singular\."),
        (lambda s: LA.solve_triangular(arr(a), arr(randn(1000, 3, 1)),
                                       stream=s),
         r"\[linalg::solve_triangular\] Matrix is singular\."),
        (lambda s: LA.cholesky(arr(-np.eye(4)), stream=s),
         r"\[linalg::cholesky\] Matrix is not positive definite\."),
    ]
    for f, msg in cases:
        for s in (C, G):
            with pytest.raises(RuntimeError, match=msg):
                mx.eval(f(s))
    # NaN inputs give NaN, no error, as on the CPU.
    x = wc(2, 3, 3)
    x[1, 0, 0] = np.nan
    for name in ("inv", "cholesky", "eigvalsh"):
        g = np.asarray(getattr(LA, name)(arr(x), stream=G))
        c = np.asarray(getattr(LA, name)(arr(x), stream=C))
        np.testing.assert_array_equal(np.isnan(g), np.isnan(c))
        assert np.isnan(g[1]).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_grads_as_on_the_cpu(dtype):
    a = wc(2, 4, 4, dtype=dtype)
    b = randn(2, 4, 3, dtype=dtype)
    t = 10 * tol(dtype)
    fns = {
        "inv": lambda x, y, s: LA.inv(x, stream=s).sum(),
        "solve": lambda x, y, s: (LA.solve(x, y, stream=s) ** 2).sum(),
        "tri": lambda x, y, s: LA.solve_triangular(x, y, stream=s).sum(),
        "cholesky": lambda x, y, s: LA.cholesky(
            x @ mx.swapaxes(x, -1, -2) + mx.eye(4), stream=s).sum(),
        "qr": lambda x, y, s: sum(z.sum() for z in LA.qr(x, stream=s)),
        "svd": lambda x, y, s: LA.svd(x, compute_uv=False, stream=s).sum(),
        "eigh": lambda x, y, s: LA.eigvalsh(x, stream=s).sum(),
        "eigvals": lambda x, y, s: mx.real(LA.eigvals(x, stream=s)).sum(),
        "det": lambda x, y, s: LA.det(x, stream=s).sum(),
    }
    for name, f in fns.items():
        gg = mx.grad(lambda x, y: f(x, y, G), argnums=(0, 1))(arr(a), arr(b))
        gc = mx.grad(lambda x, y: f(x, y, C), argnums=(0, 1))(arr(a), arr(b))
        # eig's outputs are complex64 whatever the input (as MLX's) and its
        # vjp works in complex64 / float32 on both devices, so a float64
        # input's gradient is a float32 result (the CPU's is I to 1.2e-7):
        # float32's tolerance.
        tn = 10 * tol(np.float32) if name == "eigvals" else t
        for g1, g2 in zip(gg, gc):
            close(g1, np.asarray(g2), tn)


def test_vmap_and_compile():
    a = wc(6, 5, 5)
    f = lambda x: LA.inv(x, stream=G) @ x
    close(mx.vmap(f)(arr(a)), np.broadcast_to(np.eye(5), (6, 5, 5)), 1e-9)
    g = mx.compile(lambda x: LA.eigvalsh(x @ mx.swapaxes(x, -1, -2),
                                         stream=G))
    close(g(arr(a)), np.linalg.eigvalsh(a @ np.swapaxes(a, -1, -2)), 1e-8)
