"""complex64 through the transformations and the ops that take it (issue
11: complex gradients and complex inputs)."""

import numpy as np
import pytest

import fluxion.core as mx

Z = np.array([1.0 + 2.0j, -0.5 + 0.3j, 0.7 - 1.1j, -1.3 - 0.4j], np.complex64)


def fd_grad(loss, z, eps=1e-3):
    """dL/dx + i dL/dy by central differences: grad's convention for a real
    loss of a complex input (MLX's and PyTorch's; JAX's is the conjugate)."""
    z = z.astype(np.complex128)
    g = np.zeros_like(z)
    for i in range(z.size):
        for step, w in ((eps, 1.0), (1j * eps, 1j)):
            zp, zm = z.copy(), z.copy()
            zp[i] += step
            zm[i] -= step
            d = (loss(mx.array(zp.astype(np.complex64))).item()
                 - loss(mx.array(zm.astype(np.complex64))).item()) / (2 * eps)
            g[i] += w * d
    return g


UNARY = [
    "exp", "log", "sin", "cos", "tan", "tanh", "sinh", "cosh", "sqrt",
    "square", "reciprocal", "rsqrt", "log1p", "log2", "log10",
    "arcsin", "arccos", "arctan", "negative", "conjugate",
]


@pytest.mark.parametrize("name", UNARY)
def test_complex_unary_gradients_against_finite_differences(name):
    f = getattr(mx, name)
    # A real loss mixing both parts, so the convention is fully checked.
    loss = lambda z: (mx.real(f(z)) + 0.3 * mx.imag(f(z))).sum()
    g = np.array(mx.grad(loss)(mx.array(Z)))
    np.testing.assert_allclose(g, fd_grad(loss, Z), rtol=2e-3, atol=2e-3)


def test_complex_abs_prod_and_holomorphic_convention():
    z = mx.array(Z)
    # abs: z / |z|
    g = np.array(mx.grad(lambda z: mx.abs(z).sum())(z))
    np.testing.assert_allclose(g, Z / np.abs(Z), rtol=1e-5)
    np.testing.assert_allclose(g, fd_grad(lambda z: mx.abs(z).sum(), Z), rtol=2e-3)
    # prod: the product of the others, exact at a zero
    loss = lambda z: mx.real(mx.prod(z))
    np.testing.assert_allclose(
        np.array(mx.grad(loss)(z)), fd_grad(loss, Z), rtol=2e-3, atol=2e-3
    )
    zz = mx.array(np.array([0.0, 1 + 1j, 2 - 1j], np.complex64))
    g = np.array(mx.grad(loss)(zz))
    np.testing.assert_allclose(g[0], np.conj((1 + 1j) * (2 - 1j)), rtol=1e-6)
    assert g[1] == 0 and g[2] == 0
    # holomorphic: grad of real(f) is conj(f'(z)); of imag(z) is 1j
    np.testing.assert_allclose(
        np.array(mx.grad(lambda z: mx.real(mx.exp(z)).sum())(z)), np.conj(np.exp(Z)),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        np.array(mx.grad(lambda z: mx.imag(z).sum())(z)), np.full(4, 1j), rtol=1e-6
    )
    # jvp of a holomorphic function: f'(z) t
    t = mx.array(np.array([1 + 1j, 2, -1j, 0.5], np.complex64))
    (_,), (jt,) = mx.jvp(lambda z: mx.exp(z), [z], [t])
    np.testing.assert_allclose(np.array(jt), np.exp(Z) * np.array(t), rtol=1e-5)


def test_complex_normal():
    x = mx.random.normal((200000,), dtype=mx.complex64, key=mx.random.key(3))
    assert x.dtype == mx.complex64 and x.shape == (200000,)
    a = np.array(x)
    assert abs(a.mean()) < 0.01
    # Standard complex normal: each part has variance 1/2, E|z|^2 = 1.
    assert abs(a.real.var() - 0.5) < 0.01 and abs(a.imag.var() - 0.5) < 0.01
    assert abs(np.mean(a.real * a.imag)) < 0.01
    assert abs(np.mean(np.abs(a) ** 2) - 1) < 0.01
    k = mx.random.key(5)
    base = np.array(mx.random.normal((4,), dtype=mx.complex64, key=k))
    y = mx.random.normal((4,), dtype=mx.complex64, loc=1.0, scale=2.0, key=k)
    np.testing.assert_allclose(np.array(y), 1 + 2 * base, rtol=1e-5)


def test_complex_forward_ops_against_numpy():
    z = mx.array(Z)
    small = np.array([1e-4 + 2e-4j, -3e-5j, 0.2 + 0.1j, 1.5 - 2j], np.complex64)
    np.testing.assert_allclose(np.array(mx.log1p(mx.array(small))),
                               np.log1p(small.astype(np.complex128)), rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(np.array(mx.log2(z)), np.log2(Z.astype(np.complex128)), rtol=1e-5)
    w = np.array([3.0 - 1j, -20 + 2j, 0.5j, 100 + 0j], np.complex64)
    ref = np.log(np.exp(Z.astype(np.complex128)) + np.exp(w.astype(np.complex128)))
    got = np.array(mx.logaddexp(z, mx.array(w)))
    # Same value up to the branch of the imaginary part (mod 2 pi).
    same_angle = lambda a, b: np.testing.assert_allclose(
        np.exp(1j * a.imag.astype(np.float64)), np.exp(1j * b.imag), atol=1e-4
    )
    same_angle(got, ref)
    np.testing.assert_allclose(got.real, ref.real, rtol=1e-5)
    ref = np.log(np.cumsum(np.exp(Z.astype(np.complex128))))
    got = np.array(mx.logcumsumexp(z))
    same_angle(got, ref)
    np.testing.assert_allclose(got.real, ref.real, rtol=1e-5)
    inf = float("inf")
    s = mx.array([complex(inf, 0), complex(-inf, 0), 1 + 1j])
    assert mx.isposinf(s).tolist() == [True, False, False]
    assert mx.isneginf(s).tolist() == [False, True, False]


def test_complex_decompositions():
    rng = np.random.default_rng(7)
    a = (rng.normal(size=(2, 4, 4)) + 1j * rng.normal(size=(2, 4, 4))).astype(np.complex64)
    A = mx.array(a)
    w, v = mx.linalg.eig(A, stream=mx.cpu)
    w, v = np.array(w), np.array(v)
    np.testing.assert_allclose(a @ v, v * w[:, None, :], rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(np.sort_complex(w[0]), np.sort_complex(np.linalg.eigvals(a[0])), rtol=1e-3, atol=1e-4)
    h = a + np.conj(np.swapaxes(a, -1, -2))
    wh, vh = mx.linalg.eigh(mx.array(h), stream=mx.cpu)
    assert wh.dtype == mx.float32 and vh.dtype == mx.complex64
    wh, vh = np.array(wh), np.array(vh)
    np.testing.assert_allclose(wh, np.linalg.eigvalsh(h), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(h @ vh, vh * wh[:, None, :], rtol=1e-3, atol=1e-3)
    assert mx.linalg.eigvalsh(mx.array(h), stream=mx.cpu).dtype == mx.float32
    b = (rng.normal(size=(3, 5)) + 1j * rng.normal(size=(3, 5))).astype(np.complex64)
    u, s, vt = mx.linalg.svd(mx.array(b), stream=mx.cpu)
    assert s.dtype == mx.float32 and u.dtype == mx.complex64
    u, s, vt = np.array(u), np.array(s), np.array(vt)
    np.testing.assert_allclose(s, np.linalg.svd(b, compute_uv=False), rtol=1e-4)
    np.testing.assert_allclose((u[:, :3] * s) @ vt[:3], b, rtol=1e-4, atol=1e-4)
    sv = mx.linalg.svd(mx.array(b), compute_uv=False, stream=mx.cpu)
    np.testing.assert_allclose(np.array(sv), s, rtol=1e-5)
    # Their derivatives are not implemented for complex inputs: a clear error.
    with pytest.raises(ValueError, match="complex64"):
        mx.grad(lambda x: mx.real(mx.linalg.eigvals(x, stream=mx.cpu)).sum())(A)


# --- MLX's (PyTorch's) convention, checked against torch.autograd (whose
# complex gradients are that convention), finite differences and itself
# through the other transformations ---

def crand(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(np.complex64)


def torch_grad(loss, z, create_graph=False):
    torch = pytest.importorskip("torch")
    zt = torch.tensor(z, requires_grad=True)
    (g,) = torch.autograd.grad(loss(torch, zt), zt, create_graph=create_graph)
    return g


# (fluxion loss, torch loss), each a real function of a complex z; `ns` is
# fluxion.core or torch, whose op names these share.
LOSSES = {
    "abs_exp_z": lambda ns, z: (ns.abs(ns.exp(z) * z) ** 2).sum(),
    "holomorphic_parts": lambda ns, z: (ns.real(ns.sin(z) / (z + 2)) + 0.3 * ns.imag(z * z)).sum(),
    "conj_product": lambda ns, z: ns.real(ns.conj(z) * z * z).sum(),
    "sqrt_abs": lambda ns, z: ns.abs(ns.sqrt(z)).sum(),
    "imag": lambda ns, z: ns.imag(z).sum(),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_complex_grad_matches_torch_and_finite_differences(name):
    loss = LOSSES[name]
    z = crand(5, seed=1)
    g = np.array(mx.grad(lambda a: loss(mx, a))(mx.array(z)))
    np.testing.assert_allclose(g, torch_grad(loss, z).numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g, fd_grad(lambda a: loss(mx, a), z), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("real,inverse", [(True, False), (True, True), (False, True), (False, False)])
@pytest.mark.parametrize("axes", [(-1,), (-2, -1)])
@pytest.mark.parametrize("shape", [(4, 4), (2, 7)])
def test_fft_power_grad_matches_torch(real, inverse, axes, shape):
    torch = pytest.importorskip("torch")
    names = {(True, True): "irfftn", (True, False): "rfftn", (False, True): "ifftn", (False, False): "fftn"}
    name = names[real, inverse]
    if real and not inverse:
        x = np.random.default_rng(2).normal(size=shape).astype(np.float32)
    else:
        x = crand(*shape, seed=2)
    g = mx.grad(lambda a: (mx.abs(getattr(mx.fft, name)(a, axes=axes)) ** 2).sum())(mx.array(x))
    xt = torch.tensor(x, requires_grad=True)
    (gt,) = torch.autograd.grad((torch.abs(getattr(torch.fft, name)(xt, dim=axes)) ** 2).sum(), xt)
    gt = gt.numpy()
    assert np.abs(np.array(g) - gt).max() / np.abs(gt).mean() < 1e-4


def test_grad_of_grad_matches_torch():
    inner = lambda ns, z: (ns.real(z * z * z) + 0.5 * ns.abs(z) ** 2 + ns.imag(ns.exp(z))).sum()
    outer_mx = lambda z: (mx.abs(mx.grad(lambda a: inner(mx, a))(z)) ** 2).sum()
    z = crand(4, seed=3)
    g = np.array(mx.grad(outer_mx)(mx.array(z)))
    np.testing.assert_allclose(g, fd_grad(outer_mx, z), rtol=5e-3, atol=5e-3)
    torch = pytest.importorskip("torch")
    zt = torch.tensor(z, requires_grad=True)
    (gi,) = torch.autograd.grad(inner(torch, zt), zt, create_graph=True)
    (gt,) = torch.autograd.grad((torch.abs(gi) ** 2).sum(), zt)
    np.testing.assert_allclose(g, gt.numpy(), rtol=1e-4, atol=1e-4)


def test_holomorphic_vjp_and_real_inputs():
    z, ct = crand(4, seed=4), crand(4, seed=5)
    _, (g,) = mx.vjp(lambda a: mx.exp(a) * a, [mx.array(z)], [mx.array(ct)])
    np.testing.assert_allclose(np.array(g), ct * np.conj(np.exp(z) * (1 + z)), rtol=1e-5)
    # A real input of a complex output: Re(conj(f'(x)) ct) (PyTorch's too).
    x = np.array([0.5, -1.0, 2.0], np.float32)
    c = (1 + 2j)
    _, (gx,) = mx.vjp(lambda a: a * c, [mx.array(x)], [mx.array(ct[:3])])
    assert gx.dtype == mx.float32
    np.testing.assert_allclose(np.array(gx), np.real(np.conj(c) * ct[:3]), rtol=1e-6)


def test_custom_function_complex_vjp_in_mlx_convention():
    @mx.custom_function
    def cexp(z):
        return mx.exp(z)

    @cexp.vjp
    def cexp_vjp(z, ct, out):
        return ct * mx.conj(out)  # MLX's convention: ct * conj(f'(z))

    loss = lambda e: (lambda z: (mx.abs(e(z) * z) ** 2).sum())
    z = mx.array(crand(4, seed=6))
    np.testing.assert_allclose(np.array(mx.grad(loss(cexp))(z)), np.array(mx.grad(loss(mx.exp))(z)),
                               rtol=1e-5)
    ct = mx.array(crand(4, seed=7))
    _, (g,) = mx.vjp(cexp, [z], [ct])
    np.testing.assert_allclose(np.array(g), np.array(ct) * np.conj(np.exp(np.array(z))), rtol=1e-5)


def test_vmap_checkpoint_and_compile_of_complex_grad():
    block = lambda z: mx.sin(z) * mx.conj(z) + mx.exp(z)
    loss = lambda b: (lambda z: mx.abs(b(b(z))).sum())
    z = mx.array(crand(3, 4, seed=8))
    gfun = mx.grad(loss(block))
    want = np.array(gfun(z))
    np.testing.assert_allclose(np.array(mx.grad(loss(mx.checkpoint(block)))(z)), want, rtol=1e-5)
    np.testing.assert_allclose(np.array(mx.compile(gfun)(z)), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(mx.grad(mx.compile(loss(block)))(z)), want, rtol=1e-5, atol=1e-6)
    rows = np.array(mx.vmap(gfun)(z))
    for r in range(3):
        np.testing.assert_allclose(rows[r], np.array(gfun(z[r])), rtol=1e-5, atol=1e-6)


def test_jacobians_of_holomorphic_functions():
    # jacrev = jacfwd = df/dz (not conjugated as vjp is); hessian = f''.
    z = crand(3, seed=9)
    f = lambda a: a * a * mx.exp(a)
    want = np.diag(np.exp(z) * (2 * z + z * z))
    np.testing.assert_allclose(np.array(mx.jacrev(f)(mx.array(z))), want, rtol=1e-5)
    np.testing.assert_allclose(np.array(mx.jacfwd(f)(mx.array(z))), want, rtol=1e-5)
    h = mx.hessian(lambda a: (a * a * a).sum())(mx.array(z))
    np.testing.assert_allclose(np.array(h), np.diag(6 * z), rtol=1e-5)
