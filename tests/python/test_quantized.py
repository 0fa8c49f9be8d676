"""mx.quantize / mx.dequantize / mx.quantized_matmul against a NumPy
reference of MLX's affine scheme, error bounds, dense products, gradients
and vmap (x, scales, biases), and the error paths."""

import numpy as np
import pytest

import fluxion.core as mx

BITS = [2, 4, 8]
GROUPS = [32, 64, 128]


def np_quantize(w, gs, bits):
    """The scheme in float32 with NumPy (rint: ties to even)."""
    w = w.astype(np.float32)
    n_bins = np.float32(2**bits - 1)
    g = w.reshape(*w.shape[:-1], -1, gs)
    hi, lo = g.max(-1), g.min(-1)
    neg = np.abs(lo) > np.abs(hi)
    scale = np.maximum((hi - lo) / n_bins, np.float32(1e-7))
    scale = np.where(neg, scale, -scale).astype(np.float32)
    edge = np.where(neg, lo, hi)
    q0 = np.rint(edge / scale)
    nz = q0 != 0
    scale = np.where(nz, edge / np.where(nz, q0, 1), scale).astype(np.float32)
    bias = np.where(nz, edge, 0).astype(np.float32)
    q = np.clip(np.rint((g - bias[..., None]) / scale[..., None]), 0, n_bins)
    q = q.astype(np.uint32).reshape(*w.shape[:-1], -1, 32 // bits)
    shifts = np.arange(0, 32, bits, dtype=np.uint32)
    packed = (q << shifts).sum(-1, dtype=np.uint64).astype(np.uint32)
    return packed, scale, bias


def np_dequantize(wq, scales, biases, gs, bits):
    shifts = np.arange(0, 32, bits, dtype=np.uint32)
    q = (wq[..., None] >> shifts) & np.uint32(2**bits - 1)
    q = q.reshape(*scales.shape, gs).astype(np.float64)
    w = q * scales[..., None].astype(np.float64) + \
        biases[..., None].astype(np.float64)
    return w.reshape(*wq.shape[:-1], -1)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("gs", GROUPS)
def test_quantize_matches_reference(bits, gs):
    rng = np.random.default_rng(bits * gs)
    w = np.concatenate([rng.normal(0.6, 1, (3, 256)),
                        rng.normal(-0.6, 1, (3, 256))]).astype(np.float32)
    wq, s, b = mx.quantize(mx.array(w), group_size=gs, bits=bits)
    assert wq.dtype == mx.uint32 and wq.shape == (6, 256 * bits // 32)
    assert s.shape == b.shape == (6, 256 // gs)
    rq, rs, rb = np_quantize(w, gs, bits)
    np.testing.assert_array_equal(np.array(wq), rq)
    np.testing.assert_array_equal(np.array(s), rs)
    np.testing.assert_array_equal(np.array(b), rb)
    # dequantize is the reference dequantization of the same values.
    d = mx.dequantize(wq, s, b, group_size=gs, bits=bits)
    np.testing.assert_allclose(np.array(d), np_dequantize(rq, rs, rb, gs, bits),
                               rtol=1e-6, atol=1e-6)
    # Error bound: |scale| / 2 inside the representable range, |scale| at
    # a clipped far edge.
    err = np.abs(w - np.array(d)).reshape(6, -1, gs)
    sc = np.abs(rs)[..., None]
    lo = np.minimum(rb, rb + (2**bits - 1) * rs)[..., None]
    hi = np.maximum(rb, rb + (2**bits - 1) * rs)[..., None]
    g = w.reshape(6, -1, gs)
    inside = (g >= lo) & (g <= hi)
    bound = np.where(inside, sc / 2, sc) + 1e-5
    assert np.all(err <= bound)


def test_packing_order():
    w = mx.arange(32, dtype=mx.float32).reshape(1, 32)
    wq, s, b = mx.quantize(w, group_size=32, bits=4)
    word = int(np.array(wq)[0, 0])
    assert word & 0xF == 15       # value 0 maps to q = 15 (negative scale)
    assert (word >> 8) & 0xF == 14
    assert s.item() == pytest.approx(31 / -15)
    assert b.item() == 31.0


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("gs", GROUPS)
@pytest.mark.parametrize("m", [1, 5, 40])
def test_quantized_matmul_matches_dense(bits, gs, m):
    rng = np.random.default_rng(m + bits + gs)
    w = mx.array(rng.normal(size=(48, 256)).astype(np.float32))
    wq, s, b = mx.quantize(w, gs, bits)
    wd = np.array(mx.dequantize(wq, s, b, gs, bits)).astype(np.float64)
    x = rng.normal(size=(m, 256)).astype(np.float32)
    y = mx.quantized_matmul(mx.array(x), wq, s, b, transpose=True,
                            group_size=gs, bits=bits)
    np.testing.assert_allclose(np.array(y), x @ wd.T, rtol=1e-4, atol=1e-3)
    x2 = rng.normal(size=(2, m, 48)).astype(np.float32)
    y2 = mx.quantized_matmul(x2, wq, s, b, transpose=False, group_size=gs,
                             bits=bits)
    assert y2.shape == (2, m, 256)
    np.testing.assert_allclose(np.array(y2), x2 @ wd, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16, mx.float64])
def test_dtypes(dtype):
    rng = np.random.default_rng(0)
    w = mx.array(rng.normal(size=(16, 128))).astype(dtype)
    wq, s, b = mx.quantize(w)
    assert s.dtype == b.dtype == dtype
    d = mx.dequantize(wq, s, b)
    assert d.dtype == dtype
    x = mx.array(rng.normal(size=(3, 128))).astype(dtype)
    y = mx.quantized_matmul(x, wq, s, b)
    assert y.dtype == dtype
    # Reference: the exact dequantized values of the stored scales/biases.
    wd = np_dequantize(np.array(wq), np.array(s.astype(mx.float64)),
                       np.array(b.astype(mx.float64)), 64, 4)
    ref = np.array(x.astype(mx.float64)) @ wd.T
    tol = 1e-10 if dtype == mx.float64 else 1e-2
    np.testing.assert_allclose(np.array(y.astype(mx.float64)), ref,
                               rtol=tol, atol=tol)


def test_grad_and_vmap_wrt_x():
    rng = np.random.default_rng(1)
    wq, s, b = mx.quantize(mx.array(rng.normal(size=(24, 64))), 32, 4)
    wd = np.array(mx.dequantize(wq, s, b, 32, 4)).astype(np.float64)
    x = mx.array(rng.normal(size=(2, 64)).astype(np.float32))
    f = lambda x: (mx.quantized_matmul(x, wq, s, b, group_size=32) ** 2).sum()
    g = mx.grad(f)(x)
    xn = np.array(x).astype(np.float64)
    np.testing.assert_allclose(np.array(g), 2 * (xn @ wd.T) @ wd, rtol=1e-4,
                               atol=1e-4)
    # jvp is linear in the tangent.
    t = mx.ones_like(x)
    _, (jv,) = mx.jvp(lambda x: mx.quantized_matmul(x, wq, s, b,
                                                    group_size=32), [x], [t])
    np.testing.assert_allclose(np.array(jv), np.ones((2, 64)) @ wd.T,
                               rtol=1e-4, atol=1e-4)
    xs = mx.array(rng.normal(size=(64, 5)).astype(np.float32))
    out = mx.vmap(lambda v: mx.quantized_matmul(v, wq, s, b, group_size=32),
                  in_axes=1)(xs)
    assert out.shape == (5, 24)
    np.testing.assert_allclose(np.array(out), np.array(xs).T @ wd.T,
                               rtol=1e-4, atol=1e-3)
    # Gradients with respect to scales and biases (linear in both).
    def loss(sc, bi):
        return (mx.quantized_matmul(x, wq, sc, bi, group_size=32) ** 2).sum()
    gs_, gb_ = mx.grad(loss, argnums=(0, 1))(s, b)
    y = xn @ wd.T                                   # (2, 24)
    p = (2 * y).T @ xn                              # dense cotangent (24, 64)
    q = np_dequantize(np.array(wq), np.ones((24, 2)), np.zeros((24, 2)), 32, 4)
    np.testing.assert_allclose(np.array(gb_), p.reshape(24, 2, 32).sum(-1),
                               rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.array(gs_),
                               (p * q).reshape(24, 2, 32).sum(-1),
                               rtol=1e-4, atol=1e-2)
    with pytest.raises(ValueError, match=r"\[quantized_matmul\] Cannot"):
        mx.grad(lambda w: mx.quantized_matmul(x, w, s, b, group_size=32)
                .sum())(wq)
    # vmap over biases (one dense matrix per batch element), not over w.
    bb = mx.stack([b, b + 1])
    out = mx.vmap(lambda c: mx.quantized_matmul(x, wq, s, c, group_size=32))(
        bb)
    assert out.shape == (2, 2, 24)
    np.testing.assert_allclose(
        np.array(out[1]),
        np.array(mx.quantized_matmul(x, wq, s, b + 1, group_size=32)),
        rtol=1e-4, atol=1e-3)
    with pytest.raises(ValueError, match=r"\[quantized_matmul\] vmap over"):
        mx.vmap(lambda w: mx.quantized_matmul(x, w, s, b, group_size=32))(
            mx.stack([wq, wq]))


def test_errors():
    w = mx.ones((4, 64))
    with pytest.raises(ValueError, match=r"\[quantize\].*group size 16"):
        mx.quantize(w, group_size=16)
    with pytest.raises(ValueError, match=r"\[quantize\].*bits 7"):
        mx.quantize(w, bits=7)
    with pytest.raises(ValueError, match=r"\[quantize\].*at least 2"):
        mx.quantize(mx.ones(64))
    with pytest.raises(ValueError, match=r"\[quantize\].*divisible"):
        mx.quantize(mx.ones((2, 96)))
    with pytest.raises(ValueError, match=r"\[quantize\] Only real floating"):
        mx.quantize(mx.ones((2, 64), dtype=mx.int32))
    wq, s, b = mx.quantize(w, 32, 4)
    with pytest.raises(ValueError, match=r"\[dequantize\].*uint32"):
        mx.dequantize(wq.astype(mx.int32), s, b, 32, 4)
    with pytest.raises(ValueError, match=r"\[dequantize\].*incompatible"):
        mx.dequantize(wq, s, b, 64, 4)
    with pytest.raises(ValueError, match=r"\[quantized_matmul\].*last dim"):
        mx.quantized_matmul(mx.ones((2, 32)), wq, s, b, group_size=32)
    with pytest.raises(ValueError, match=r"\[quantized_matmul\].*same shape"):
        mx.quantized_matmul(mx.ones((2, 64)), wq, s, b[:, :1], group_size=32)
    with pytest.raises(ValueError, match=r"\[quantized_matmul\].*uint32"):
        mx.quantized_matmul(mx.ones((2, 64)), s, s, b, group_size=32)
