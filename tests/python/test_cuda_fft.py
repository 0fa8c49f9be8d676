"""mx.fft on the GPU (cuFFT; skipped, with the reason, where no GPU is
visible) against numpy.fft: every function at lengths with every kind of
factor (primes included), n / s padding and truncation, axes not last and
negative, strided and transposed views, norm=, gradients against the CPU's,
compile, vmap, more shapes than the plan cache holds, and the spectra left
intact by the inverse real transforms (cuFFT's C2R overwrites its input).
"""
import numpy as np
import pytest

import fluxion.core as mx

from helpers import requires_gpu

pytestmark = requires_gpu

G = mx.gpu
C = mx.cpu
RNG = np.random.default_rng(31)


def crand(*shape):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)
            ).astype(np.complex64)


def rrand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(got, want, tol=5e-5):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 16, 97, 100, 128, 1000, 1009,
                               4096, 65537])
def test_lengths(n):
    x = crand(3, n)
    a = mx.array(x)
    y = mx.fft.fft(a, stream=G)
    assert y.dtype == mx.complex64
    close(y, np.fft.fft(x))
    close(mx.fft.ifft(a, stream=G), np.fft.ifft(x))
    r = rrand(3, n)
    close(mx.fft.rfft(mx.array(r), stream=G), np.fft.rfft(r))
    h = crand(3, n // 2 + 1)
    out = mx.fft.irfft(mx.array(h), n, stream=G)
    assert out.dtype == mx.float32
    close(out, np.fft.irfft(h, n))


@pytest.mark.parametrize("n", [None, 1, 4, 9, 16, 25])
@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_one_dimensional_n_axis(n, axis):
    x = crand(6, 10)
    r = rrand(6, 10)
    a, ar = mx.array(x), mx.array(r)
    close(mx.fft.fft(a, n, axis, stream=G), np.fft.fft(x, n, axis))
    close(mx.fft.ifft(a, n=n, axis=axis, stream=G), np.fft.ifft(x, n, axis))
    close(mx.fft.rfft(ar, n, axis, stream=G), np.fft.rfft(r, n, axis))
    close(mx.fft.irfft(a, n, axis, stream=G), np.fft.irfft(x, n, axis))


@pytest.mark.parametrize("s,axes", [
    (None, None), ((3, 4), None), (None, (0, 2)), ((5, 6), (2, 0)),
    ((4, 8, 3), (0, 1, 2)), (None, (1,)), ((7,), (-1,)), (None, (-3, -1)),
    ((2, 9), (1, 2)), (None, (2, 1, 0))])
def test_n_dimensional(s, axes):
    x = crand(3, 5, 7)
    r = rrand(3, 5, 7)
    a, ar = mx.array(x), mx.array(r)
    close(mx.fft.fftn(a, s, axes, stream=G), np.fft.fftn(x, s, axes))
    close(mx.fft.ifftn(a, s=s, axes=axes, stream=G), np.fft.ifftn(x, s, axes))
    close(mx.fft.rfftn(ar, s, axes, stream=G), np.fft.rfftn(r, s, axes))
    close(mx.fft.irfftn(a, s, axes, stream=G), np.fft.irfftn(x, s, axes))


@pytest.mark.parametrize("s,axes", [(None, (-2, -1)), ((3, 4), (-2, -1)),
                                    (None, (0, 2)), ((6, 2), (2, 1))])
def test_two_dimensional(s, axes):
    x = crand(4, 6, 5)
    r = rrand(4, 6, 5)
    a, ar = mx.array(x), mx.array(r)
    close(mx.fft.fft2(a, s, axes, stream=G), np.fft.fft2(x, s, axes))
    close(mx.fft.ifft2(a, s, axes, stream=G), np.fft.ifft2(x, s, axes))
    close(mx.fft.rfft2(ar, s, axes, stream=G), np.fft.rfft2(r, s, axes))
    close(mx.fft.irfft2(a, s, axes, stream=G), np.fft.irfft2(x, s, axes))


@pytest.mark.parametrize("shape,axis", [((8, 1000, 8), 1), ((100, 7, 100), 1),
                                        ((4, 5, 3), 1), ((2, 9, 2, 3), 2),
                                        ((4, 3, 5, 2), None)])
def test_batch_layouts(shape, axis):
    # Axes in the middle (batches the GPU loops or transposes through
    # scratch), and more axes than one cuFFT plan's rank.
    x = crand(*shape)
    r = rrand(*shape)
    a, ar = mx.array(x), mx.array(r)
    if axis is None:
        close(mx.fft.fftn(a, stream=G), np.fft.fftn(x))
        close(mx.fft.rfftn(ar, stream=G), np.fft.rfftn(r))
        close(mx.fft.irfftn(a, stream=G), np.fft.irfftn(x))
        return
    close(mx.fft.fft(a, axis=axis, stream=G), np.fft.fft(x, axis=axis))
    close(mx.fft.ifft(a, axis=axis, stream=G), np.fft.ifft(x, axis=axis))
    close(mx.fft.rfft(ar, axis=axis, stream=G), np.fft.rfft(r, axis=axis))
    close(mx.fft.irfft(a, axis=axis, stream=G), np.fft.irfft(x, axis=axis))


def test_views_and_dtypes():
    x = crand(8, 12)
    a = mx.array(x)
    close(mx.fft.fft(a.T, stream=G), np.fft.fft(x.T))
    close(mx.fft.fft(a[::2, 1::3], axis=0, stream=G),
          np.fft.fft(x[::2, 1::3], axis=0))
    close(mx.fft.rfft(mx.array(x.real)[:, ::-1], stream=G),
          np.fft.rfft(x.real[:, ::-1]))
    # A row-contiguous real view at an odd offset (copied to align it).
    flat = rrand(41)
    close(mx.fft.rfft(mx.array(flat)[1:], stream=G), np.fft.rfft(flat[1:]))
    # Broadcast (stride 0) input.
    row = crand(1, 10)
    close(mx.fft.fft(mx.broadcast_to(mx.array(row), (4, 10)), axis=0,
                     stream=G), np.fft.fft(np.broadcast_to(row, (4, 10)),
                                           axis=0))
    for dt in [mx.float16, mx.bfloat16, mx.float32, mx.float64, mx.int32]:
        v = np.arange(10) % 4
        y = mx.fft.fft(mx.array(v).astype(dt), stream=G)
        assert y.dtype == mx.complex64
        close(y, np.fft.fft(v))
        close(mx.fft.rfft(mx.array(v).astype(dt), stream=G), np.fft.rfft(v))


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_norm(norm):
    x = crand(5, 8)
    r = rrand(5, 8)
    close(mx.fft.fft(mx.array(x), norm=norm, stream=G),
          np.fft.fft(x, norm=norm))
    close(mx.fft.ifftn(mx.array(x), norm=norm, stream=G),
          np.fft.ifftn(x, norm=norm))
    close(mx.fft.rfft2(mx.array(r), norm=norm, stream=G),
          np.fft.rfft2(r, norm=norm))
    close(mx.fft.irfft(mx.array(x), 13, norm=norm, stream=G),
          np.fft.irfft(x, 13, norm=norm))


def test_large_and_prime():
    p = crand(1000003)
    close(mx.fft.fft(mx.array(p), stream=G), np.fft.fft(p), tol=2e-5)
    x = rrand(1024, 2048)
    close(mx.fft.rfft2(mx.array(x), stream=G), np.fft.rfft2(x), tol=2e-5)


W = rrand(5, 6)


def loss_fns(d):
    w = mx.array(W)
    return {
        "fft": lambda x: mx.sum(mx.abs(mx.fft.fft(x, stream=d)) ** 2 * w),
        "ifft2": lambda x: mx.sum(mx.real(mx.fft.ifft2(x, s=(4, 5), stream=d))
                                  * w[:4, :5]),
        "rfft": lambda x: mx.sum(mx.imag(mx.fft.rfft(x, axis=0, stream=d))
                                 * w[:3]),
        "rfftn": lambda x: mx.sum(mx.abs(mx.fft.rfftn(x, stream=d))
                                  * w[:, :4]),
        "irfft": lambda x: mx.sum(mx.fft.irfft(x, 9, stream=d) ** 2),
        "irfftn": lambda x: mx.sum(mx.fft.irfftn(mx.fft.rfftn(x, stream=d),
                                                 stream=d) * w),
    }


@pytest.mark.parametrize("name", ["fft", "ifft2", "rfft", "rfftn", "irfft",
                                  "irfftn"])
def test_grad_on_gpu_matches_cpu(name):
    x = mx.array(rrand(5, 6))
    with mx.stream(G):
        g = np.asarray(mx.grad(loss_fns(G)[name])(x))
    with mx.stream(C):
        c = np.asarray(mx.grad(loss_fns(C)[name])(x))
    close(g, c, tol=1e-4)


def test_compile_and_vmap():
    x = rrand(3, 4, 10)
    a = mx.array(x)

    def f(z):
        return mx.fft.irfft(mx.fft.rfft(z, stream=G) * 2, 10, stream=G)

    close(mx.compile(f)(a), 2 * x)
    got = mx.vmap(lambda z: mx.fft.fft2(z, stream=G), in_axes=1)(a)
    close(got, np.stack([np.fft.fft2(x[:, i]) for i in range(4)]))


def test_more_shapes_than_the_plan_cache():
    for rnd in range(2):
        for n in range(2, 82, 1 if rnd == 0 else 9):
            x = crand(2, n)
            close(mx.fft.fft(mx.array(x), stream=G), np.fft.fft(x))


def test_inverse_real_transforms_leave_their_input():
    r = rrand(6, 20)
    spec = mx.fft.rfft(mx.array(r), stream=G)
    spec2 = mx.fft.rfftn(mx.array(r), stream=G)
    mx.eval(spec, spec2)
    back = mx.fft.irfft(spec, 20, stream=G)
    back2 = mx.fft.irfftn(spec2, (6, 20), stream=G)
    mx.eval(back, back2)
    close(spec, np.fft.rfft(r))
    close(spec2, np.fft.rfftn(r))
    close(back, r)
    close(back2, r)
