"""quantized_matmul on the GPU (skipped, with the reason, where no GPU is
visible): the decoding kernel (few rows of x) and the dequantize-and-gemm
path against the CPU, for every affine width, group size and floating
mode, batched and broadcast weights, and the composites built on it
(gather_qmm, nn.QuantizedLinear).
"""
import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn

from helpers import host, requires_gpu

pytestmark = requires_gpu

G = mx.gpu
C = mx.cpu


def draw(shape, seed, dt=mx.float32):
    return mx.array(np.random.default_rng(seed).standard_normal(shape)
                    .astype(np.float32)).astype(dt)


def qmm_both(x, wq, *rest, **kw):
    g = mx.quantized_matmul(x, wq, *rest, stream=G, **kw)
    c = mx.quantized_matmul(x, wq, *rest, stream=C, **kw)
    return host(g), host(c)


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize("gs", [32, 64, 128])
@pytest.mark.parametrize("rows", [1, 3, 8, 9, 40])
def test_affine_every_width(bits, gs, rows):
    w = draw((96, 256), 1)
    wq, s, b = mx.quantize(w, group_size=gs, bits=bits, stream=C)
    x = draw((rows, 256), 2)
    g, c = qmm_both(x, wq, s, b, transpose=True, group_size=gs, bits=bits)
    np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-4)
    x2 = draw((rows, 96), 3)
    g, c = qmm_both(x2, wq, s, b, transpose=False, group_size=gs, bits=bits)
    np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["mxfp4", "mxfp8", "nvfp4"])
@pytest.mark.parametrize("rows", [1, 5, 33])
def test_floating_modes(mode, rows):
    w = draw((64, 128), 4)
    q = mx.quantize(w, mode=mode, stream=C)
    wq, s = q[0], q[1]
    x = draw((rows, 128), 5)
    g, c = qmm_both(x, wq, s, None, transpose=True, mode=mode)
    np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt,tol", [(mx.bfloat16, 3e-2), (mx.float16, 3e-3),
                                    (mx.float64, 1e-10)])
@pytest.mark.parametrize("rows", [1, 64])
def test_dtypes(dt, tol, rows):
    w = draw((128, 512), 6, dt)
    wq, s, b = mx.quantize(w, group_size=64, bits=4, stream=C)
    x = draw((rows, 512), 7, dt)
    g, c = qmm_both(x, wq, s, b, transpose=True, group_size=64, bits=4)
    np.testing.assert_allclose(g, c, rtol=tol, atol=tol * 4)


def test_batched_and_broadcast_weights():
    w = draw((3, 1, 32, 128), 8)
    wq, s, b = mx.quantize(w, group_size=64, bits=4, stream=C)
    x = draw((2, 5, 128), 9)  # broadcasts against (3, 1) to (3, 2)
    g, c = qmm_both(x, wq, s, b, transpose=True, group_size=64, bits=4)
    assert g.shape == (3, 2, 5, 32)
    np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-4)


def test_decode_long_rows_and_vector_input():
    w = draw((4096, 1024), 10)
    wq, s, b = mx.quantize(w, group_size=64, bits=4, stream=C)
    x = draw((1024,), 11)
    g, c = qmm_both(x, wq, s, b, transpose=True, group_size=64, bits=4)
    assert g.shape == (4096,)
    np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-3)


def test_gather_qmm_and_quantized_linear():
    w = draw((4, 32, 64), 12)
    wq, s, b = mx.quantize(w, group_size=32, bits=4, stream=C)
    x = draw((6, 1, 64), 13)
    idx = mx.array([0, 3, 1, 1, 2, 0])
    out = {}
    for dev in (G, C):
        out[dev] = host(mx.gather_qmm(x, wq, s, b, rhs_indices=idx,
                                      transpose=True, group_size=32, bits=4,
                                      stream=dev))
    np.testing.assert_allclose(out[G], out[C], rtol=1e-4, atol=1e-4)
    layer = nn.QuantizedLinear(64, 48, bias=True, group_size=32, bits=4)
    xs = draw((3, 7, 64), 14)
    with mx.stream(G):
        yg = host(layer(xs))
    with mx.stream(C):
        yc = host(layer(xs))
    np.testing.assert_allclose(yg, yc, rtol=1e-4, atol=1e-4)


def test_gradient_with_respect_to_x():
    w = draw((32, 64), 15)
    wq, s, b = mx.quantize(w, group_size=32, bits=4, stream=C)
    x = draw((5, 64), 16)

    def f(x):
        return mx.sum(mx.quantized_matmul(x, wq, s, b, group_size=32, bits=4)
                      ** 2)

    grads = {}
    for dev in (G, C):
        with mx.stream(dev):
            grads[dev] = host(mx.grad(f)(x))
    np.testing.assert_allclose(grads[G], grads[C], rtol=1e-4, atol=1e-4)
