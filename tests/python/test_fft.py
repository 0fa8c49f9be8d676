"""mx.fft against numpy.fft: the 14 functions with n / s / axes variants,
dtypes, errors, gradients (against finite differences and the analytic
adjoint) and vmap against a loop."""

import numpy as np
import pytest

import fluxion.core as mx

RNG = np.random.default_rng(0)


def crand(*shape):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(
        np.complex64)


def rrand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(got, want, tol=2e-5):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 12, 17, 30, 97, 100, 128, 1009,
                               4096])
def test_fft_ifft_lengths(n):
    x = crand(n)
    a = mx.array(x)
    y = mx.fft.fft(a)
    assert y.dtype == mx.complex64
    close(y, np.fft.fft(x))
    close(mx.fft.ifft(a), np.fft.ifft(x))
    r = rrand(n)
    close(mx.fft.rfft(mx.array(r)), np.fft.rfft(r))
    h = crand(n // 2 + 1)
    out = mx.fft.irfft(mx.array(h), n)
    assert out.dtype == mx.float32
    close(out, np.fft.irfft(h, n))


@pytest.mark.parametrize("n", [None, 4, 9, 16])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_one_dimensional_n_axis(n, axis):
    x = crand(6, 10)
    r = rrand(6, 10)
    a, ar = mx.array(x), mx.array(r)
    close(mx.fft.fft(a, n, axis), np.fft.fft(x, n, axis))
    close(mx.fft.ifft(a, n=n, axis=axis), np.fft.ifft(x, n, axis))
    close(mx.fft.rfft(ar, n, axis), np.fft.rfft(r, n, axis))
    close(mx.fft.irfft(a, n, axis), np.fft.irfft(x, n, axis))


@pytest.mark.parametrize("s,axes", [
    (None, None), ((3, 4), None), (None, (0, 2)), ((5, 6), (2, 0)),
    ((4, 8, 3), (0, 1, 2)), (None, (1,)), ((7,), (-1,))])
def test_n_dimensional(s, axes):
    x = crand(4, 6, 5)
    r = rrand(4, 6, 5)
    a, ar = mx.array(x), mx.array(r)
    close(mx.fft.fftn(a, s, axes), np.fft.fftn(x, s, axes))
    close(mx.fft.ifftn(a, s=s, axes=axes), np.fft.ifftn(x, s, axes))
    close(mx.fft.rfftn(ar, s, axes), np.fft.rfftn(r, s, axes))
    close(mx.fft.irfftn(a, s, axes), np.fft.irfftn(x, s, axes))


@pytest.mark.parametrize("s,axes", [(None, (-2, -1)), ((3, 4), (-2, -1)),
                                    (None, (0, 2)), ((6, 2), (2, 1))])
def test_two_dimensional(s, axes):
    x = crand(4, 6, 5)
    r = rrand(4, 6, 5)
    a, ar = mx.array(x), mx.array(r)
    close(mx.fft.fft2(a, s, axes), np.fft.fft2(x, s, axes))
    close(mx.fft.ifft2(a, s, axes), np.fft.ifft2(x, s, axes))
    close(mx.fft.rfft2(ar, s, axes), np.fft.rfft2(r, s, axes))
    close(mx.fft.irfft2(a, s, axes), np.fft.irfft2(x, s, axes))
    # Defaults: the last two axes.
    close(mx.fft.fft2(a), np.fft.fft2(x))
    close(mx.fft.irfft2(a), np.fft.irfft2(x))


@pytest.mark.parametrize("axes", [None, (0,), (1, 2), (-1,)])
def test_shifts(axes):
    x = rrand(4, 5, 7)
    a = mx.array(x)
    np.testing.assert_array_equal(mx.fft.fftshift(a, axes),
                                  np.fft.fftshift(x, axes))
    np.testing.assert_array_equal(mx.fft.ifftshift(a, axes=axes),
                                  np.fft.ifftshift(x, axes))


def test_views_and_dtypes():
    x = crand(8, 12)
    a = mx.array(x)
    close(mx.fft.fft(a.T), np.fft.fft(x.T))
    close(mx.fft.fft(a[::2, 1::3], axis=0), np.fft.fft(x[::2, 1::3], axis=0))
    close(mx.fft.rfft(mx.array(x.real)[:, ::-1]), np.fft.rfft(x.real[:, ::-1]))
    for dt in [mx.float16, mx.bfloat16, mx.float32, mx.float64, mx.int32,
               mx.uint8]:
        v = np.arange(10) % 4
        y = mx.fft.fft(mx.array(v).astype(dt))
        assert y.dtype == mx.complex64
        close(y, np.fft.fft(v))
        close(mx.fft.rfft(mx.array(v).astype(dt)), np.fft.rfft(v))
    # Python lists and NumPy arrays are accepted.
    close(mx.fft.fft([1.0, 2.0, 3.0]), np.fft.fft([1.0, 2.0, 3.0]))
    # A batch of many short transforms and a large prime length.
    b = crand(300, 7)
    close(mx.fft.fft(mx.array(b)), np.fft.fft(b))
    p = crand(100003)
    close(mx.fft.fft(mx.array(p)), np.fft.fft(p), tol=1e-5)


def test_errors():
    a = mx.zeros((4, 6), mx.complex64)
    with pytest.raises(ValueError, match=r"\[fft\] Invalid axis 2"):
        mx.fft.fft(a, axis=2)
    with pytest.raises(ValueError, match=r"\[fft\] Invalid number of data"):
        mx.fft.fft(a, 0)
    with pytest.raises(ValueError, match=r"\[irfft\] .* -4"):
        mx.fft.irfft(a, -4)
    with pytest.raises(ValueError, match=r"\[fftn\] Received duplicate axes"):
        mx.fft.fftn(a, axes=[0, -2])
    with pytest.raises(ValueError, match=r"\[rfft2\] Shape s"):
        mx.fft.rfft2(a, s=[3], axes=[0, 1])
    with pytest.raises(ValueError, match=r"\[fftshift\]"):
        mx.fft.fftshift(a, axes=[3])


def loss_fns():
    w = mx.array(rrand(5, 6))
    return {
        "fft": lambda x: mx.sum(mx.abs(mx.fft.fft(x)) ** 2 * w),
        "ifft2": lambda x: mx.sum(mx.real(mx.fft.ifft2(x, s=(4, 5))) * w[:4, :5]),
        "rfft": lambda x: mx.sum(mx.imag(mx.fft.rfft(x, axis=0)) * w[:3]),
        "rfftn": lambda x: mx.sum(mx.abs(mx.fft.rfftn(x)) * w[:, :4]),
        "irfft": lambda x: mx.sum(mx.fft.irfft(x, 9) ** 2),
        "irfftn": lambda x: mx.sum(mx.fft.irfftn(mx.fft.rfftn(x)) * w),
    }


@pytest.mark.parametrize("name", list(loss_fns()))
def test_grad_vs_finite_differences(name):
    f = loss_fns()[name]
    x0 = rrand(5, 6).astype(np.float64)
    g = np.asarray(mx.grad(f)(mx.array(x0.astype(np.float32))))
    assert g.dtype == np.float32
    eps = 1e-2
    num = np.zeros_like(x0)
    for idx in np.ndindex(x0.shape):
        xp, xm = x0.copy(), x0.copy()
        xp[idx] += eps
        xm[idx] -= eps
        fp = float(f(mx.array(xp.astype(np.float32))).item())
        fm = float(f(mx.array(xm.astype(np.float32))).item())
        num[idx] = (fp - fm) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=5e-3, atol=5e-3 * np.abs(num).max())


def test_grad_complex_input_adjoint():
    # A complex-linear map's vjp is its adjoint (conjugate transpose, MLX's
    # convention), and the DFT matrix F is symmetric: F^H = n ifft.
    x = mx.array(crand(8))
    ct = crand(8)
    _, (g,) = mx.vjp(lambda z: mx.fft.fft(z), [x], [mx.array(ct)])
    close(g, 8 * np.fft.ifft(ct), 1e-5)
    _, (g,) = mx.vjp(lambda z: mx.fft.ifft(z), [x], [mx.array(ct)])
    close(g, np.fft.fft(ct) / 8, 1e-5)
    # Real loss of a complex input: grad |fft z|^2 = 2 n z (JAX: 2 n conj(z)).
    g = mx.grad(lambda z: mx.sum(mx.abs(mx.fft.fft(z)) ** 2))(x)
    close(g, 2 * 8 * np.asarray(x), 1e-5)
    # jvp: the transform of the tangent.
    tan = crand(3, 4)
    _, (t,) = mx.jvp(lambda z: mx.fft.fft2(z), [mx.array(crand(3, 4))],
                     [mx.array(tan)])
    close(t, np.fft.fft2(tan), 1e-5)


@pytest.mark.parametrize("fn", [
    lambda x: mx.fft.fft(x),
    lambda x: mx.fft.ifft(x, n=6, axis=0),
    lambda x: mx.fft.fft2(x),
    lambda x: mx.fft.rfft(x),
    lambda x: mx.fft.irfft(x, 7),
    lambda x: mx.fft.rfftn(x, axes=(0, 1)),
    lambda x: mx.fft.irfftn(x),
    lambda x: mx.fft.fftshift(x),
])
@pytest.mark.parametrize("in_axis", [0, 1, 2])
def test_vmap_vs_loop(fn, in_axis):
    x = rrand(3, 4, 5)
    got = mx.vmap(fn, in_axes=in_axis)(mx.array(x))
    want = np.stack([np.asarray(fn(mx.array(np.take(x, i, in_axis))))
                     for i in range(x.shape[in_axis])])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
