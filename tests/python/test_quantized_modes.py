"""Quantization modes of issue 11: affine with 2..8 bits, mxfp4, nvfp4 and
mxfp8 (round trips, value grids, errors), quantized matmul with batched
weights and floating modes, gather_qmm, qqmm and gather_qqmm, against
dequantized dense products."""

import numpy as np
import pytest

import fluxion.core as mx

FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize("gs", [32, 64, 128])
def test_affine_bits(bits, gs):
    w = mx.random.normal((16, 256), key=mx.random.key(bits))
    wq, s, b = mx.quantize(w, gs, bits)
    assert wq.dtype == mx.uint32 and wq.shape == (16, 256 * bits // 32)
    w_hat = mx.dequantize(wq, s, b, gs, bits)
    err = mx.abs(w - w_hat).reshape(*s.shape, -1)
    assert mx.all(err <= mx.abs(s)[..., None] + 1e-6).item()
    zeros = mx.zeros((4, 256))
    assert mx.all(mx.dequantize(*mx.quantize(zeros, gs, bits), gs, bits) ==
                  0).item()


def test_affine_packing_is_a_bit_stream():
    # Value i of a row occupies bits [i * bits, (i + 1) * bits).
    for bits in (3, 5, 6):
        q = np.random.RandomState(bits).randint(0, 2**bits, 64)
        w = mx.array(q.astype(np.float32)[None] * 0.25)
        wq, s, b = mx.quantize(w, 32, bits)
        codes = np.round((np.array(w) - np.array(b).repeat(32, 1)) /
                         np.array(s).repeat(32, 1)).astype(np.uint64)[0]
        stream = 0
        for i, c in enumerate(codes):
            stream |= int(c) << (i * bits)
        words = [(stream >> (32 * j)) & 0xFFFFFFFF
                 for j in range(64 * bits // 32)]
        assert np.array(wq)[0].tolist() == words


def fp4_grid_matrix(rows, group):
    rng = np.random.RandomState(7)
    lut = np.array(FP4 + [-v for v in FP4], np.float32)
    w = lut[rng.randint(0, 16, (rows, 4 * group))].reshape(-1, group)
    w[:, 0] = 6.0
    return w.reshape(rows, 4 * group)


@pytest.mark.parametrize("mode,group", [("mxfp4", 32), ("nvfp4", 16)])
def test_fp4_round_trip(mode, group):
    w = mx.array(fp4_grid_matrix(8, group))
    wq, scales = mx.quantize(w, mode=mode)
    assert scales.dtype == mx.uint8 and scales.shape == (8, 4)
    assert mx.array_equal(mx.dequantize(wq, scales, mode=mode), w)
    # Scaled groups are exact too (powers of two for mxfp4).
    w2 = w * 2.0 ** -5
    assert mx.array_equal(mx.dequantize(*mx.quantize(w2, mode=mode),
                                        mode=mode), w2)
    zero = mx.zeros((2, 64))
    assert mx.all(mx.dequantize(*mx.quantize(zero, mode=mode),
                                mode=mode) == 0).item()


def test_nvfp4_small_groups_and_global_scale():
    alternating = np.zeros((64, 16), np.float32)
    alternating[::2] = 6 * 2.0 ** -9
    alternating[1::2] = 6.0
    a = mx.array(alternating).astype(mx.bfloat16)
    wq, s = mx.quantize(a, mode="nvfp4")
    assert mx.allclose(mx.dequantize(wq, s, mode="nvfp4", dtype=mx.bfloat16),
                       a, rtol=1e-5, atol=1e-6)
    w = mx.array(fp4_grid_matrix(4, 16) * 3.0)
    g = mx.max(mx.abs(w))
    wq, s = mx.quantize(w, mode="nvfp4", global_scale=g)
    w_hat = mx.dequantize(wq, s, mode="nvfp4", global_scale=g)
    assert mx.allclose(w_hat, w, rtol=1e-5, atol=1e-5)


def test_mxfp8_round_trip():
    w = 2 * mx.random.uniform(shape=(64, 64), key=mx.random.key(1)) - 1
    wq, s = mx.quantize(w, mode="mxfp8")
    assert wq.shape == (64, 16) and s.shape == (64, 2)
    w_hat = mx.dequantize(wq, s, mode="mxfp8")
    # E4M3 keeps 3 mantissa bits: relative error <= 2^-4, down to its
    # subnormals (2^-9 of the group's scale, at most 2^-8 here).
    assert mx.all(mx.abs(w_hat - w) <= mx.abs(w) / 16 + 2.0 ** -17).item()


def test_mode_errors():
    w = mx.random.normal((32, 64))
    with pytest.raises(ValueError, match=r"\[quantize\] Invalid quantization "
                       r"mode 'xyz'"):
        mx.quantize(w, mode="xyz")
    with pytest.raises(ValueError, match=r"\[quantize\] The mxfp4 mode uses "
                       r"groups of 32; got group_size=64"):
        mx.quantize(w, group_size=64, mode="mxfp4")
    with pytest.raises(ValueError, match=r"\[quantize\] The mxfp8 mode uses 8 "
                       r"bits; got bits=7"):
        mx.quantize(w, bits=7, mode="mxfp8")
    with pytest.raises(ValueError, match=r"\[quantize\] The requested number "
                       r"of bits 7"):
        mx.quantize(w, bits=7)
    with pytest.raises(ValueError, match=r"\[quantize\] Only real floating"):
        mx.quantize(mx.zeros((8, 32), mx.int32), mode="mxfp4")
    wq, s, b = mx.quantize(w, 32, 4)
    with pytest.raises(ValueError, match=r"\[dequantize\] The affine mode "
                       r"needs biases"):
        mx.dequantize(wq, s, None, 32, 4)
    with pytest.raises(ValueError, match=r"\[quantized_matmul\] The affine "
                       r"mode needs biases"):
        mx.quantized_matmul(mx.ones((1, 64)), wq, s, None, group_size=32)
    fq, fs = mx.quantize(w, mode="mxfp4")
    with pytest.raises(ValueError, match=r"\[dequantize\] The mxfp4 mode has "
                       r"no biases"):
        mx.dequantize(fq, fs, fs, mode="mxfp4")
    with pytest.raises(ValueError, match=r"\[dequantize\] The output dtype "
                       r"must be real floating"):
        mx.dequantize(fq, fs, mode="mxfp4", dtype=mx.int32)
    with pytest.raises(ValueError, match=r"\[quantize\] global_scale is only"):
        mx.quantize(w, mode="mxfp4", global_scale=mx.array(1.0))


@pytest.mark.parametrize("mode", ["affine", "mxfp4", "nvfp4", "mxfp8"])
@pytest.mark.parametrize("transpose", [True, False])
def test_quantized_matmul_modes(mode, transpose):
    k = mx.random.key(4)
    x = mx.random.normal((5, 128), key=k) / 8
    w = mx.random.normal((96, 128) if transpose else (128, 128),
                         key=mx.random.split(k)[0]) / 8
    q = mx.quantize(w, mode=mode)
    w_hat = mx.dequantize(*q, mode=mode)
    biases = q[2] if mode == "affine" else None
    for rows in (x[:1], x, mx.broadcast_to(x, (3, 5, 128))):
        y = mx.quantized_matmul(rows, q[0], q[1], biases, transpose,
                                mode=mode)
        ref = rows @ (w_hat.T if transpose else w_hat)
        assert y.shape == ref.shape and y.dtype == rows.dtype
        assert mx.allclose(y, ref, atol=1e-4).item()


@pytest.mark.parametrize("mode", ["affine", "mxfp8"])
def test_quantized_matmul_batched_weights(mode):
    k = mx.random.key(9)
    w = mx.random.normal((3, 64, 128), key=k) / 8
    q = mx.quantize(w, mode=mode)
    w_hat = mx.dequantize(*q, mode=mode)
    biases = q[2] if mode == "affine" else None
    for x_shape in [(3, 1, 128), (1, 4, 128), (2, 3, 2, 128)]:
        x = mx.random.normal(x_shape, key=mx.random.key(len(x_shape)))
        y = mx.quantized_matmul(x, q[0], q[1], biases, True, mode=mode)
        ref = x @ mx.swapaxes(w_hat, -1, -2)
        assert y.shape == ref.shape
        assert mx.allclose(y, ref, atol=1e-4).item()
    # Gradients with respect to x broadcast back.
    x = mx.random.normal((1, 2, 128), key=k)
    g = mx.grad(lambda x: mx.quantized_matmul(x, q[0], q[1], biases, True,
                                              mode=mode).sum())(x)
    g_ref = mx.grad(lambda x: (x @ mx.swapaxes(w_hat, -1, -2)).sum())(x)
    assert g.shape == x.shape and mx.allclose(g, g_ref, atol=1e-4).item()
    with pytest.raises(ValueError, match=r"\[quantized_matmul\] With a batched"):
        mx.quantized_matmul(mx.ones(128), q[0], q[1], biases, mode=mode)


def test_affine_vjp_with_batched_weights():
    w = mx.random.normal((2, 32, 64), key=mx.random.key(2))
    wq, s, b = mx.quantize(w, 32, 4)
    x = mx.random.normal((2, 3, 64), key=mx.random.key(3))
    f = lambda s, b: mx.quantized_matmul(x, wq, s, b, True, 32, 4).sum()
    ds, db = mx.grad(f, argnums=(0, 1))(s, b)
    dense = lambda s, b: (x @ mx.swapaxes(
        mx.dequantize(wq, s, b, 32, 4), -1, -2)).sum()
    es, eb = mx.grad(dense, argnums=(0, 1))(s, b)
    assert mx.allclose(ds, es, atol=1e-3) and mx.allclose(db, eb, atol=1e-3)


@pytest.mark.parametrize("mode", ["affine", "mxfp4", "nvfp4", "mxfp8"])
def test_gather_qmm(mode):
    x = mx.random.normal((5, 2, 64), key=mx.random.key(1))
    w = mx.random.normal((3, 32, 64), key=mx.random.key(2))
    q = mx.quantize(w, mode=mode)
    w_hat = mx.dequantize(*q, mode=mode)
    biases = q[2] if mode == "affine" else None
    li, ri = mx.array([0, 2, 4]), mx.array([2, 1, 0])
    got = mx.gather_qmm(x, q[0], q[1], biases, li, ri, mode=mode)
    ref = mx.gather_mm(x, mx.swapaxes(w_hat, -1, -2), li, ri)
    assert got.shape == ref.shape and mx.allclose(got, ref, atol=1e-4).item()
    got = mx.gather_qmm(x[:1], q[0], q[1], biases, rhs_indices=ri, mode=mode)
    ref = mx.gather_mm(x[:1], mx.swapaxes(w_hat, -1, -2), None, ri)
    assert mx.allclose(got, ref, atol=1e-4).item()
    with pytest.raises(ValueError, match=r"\[gather_qmm\] Invalid quantization"):
        mx.gather_qmm(x, q[0], q[1], biases, rhs_indices=ri, mode="xyz")
    with pytest.raises(ValueError, match=r"\[gather_qmm\] lhs_indices must "
                       r"have an integer type"):
        mx.gather_qmm(x, q[0], q[1], biases, mx.array([0.0]), ri, mode=mode)


@pytest.mark.parametrize("mode", ["nvfp4", "mxfp8", "mxfp4"])
def test_qqmm_and_gather_qqmm(mode):
    x = mx.random.normal((4, 64), key=mx.random.key(5))
    w = mx.random.normal((32, 64), key=mx.random.key(6))
    gx = mx.max(mx.abs(x)) if mode == "nvfp4" else None
    gw = mx.max(mx.abs(w)) if mode == "nvfp4" else None
    x_hat = mx.dequantize(*mx.quantize(x, mode=mode, global_scale=gx),
                          mode=mode, global_scale=gx, dtype=mx.float32)
    wq, ws = mx.quantize(w, mode=mode, global_scale=gw)
    w_hat = mx.dequantize(wq, ws, mode=mode, global_scale=gw,
                          dtype=mx.float32)
    y = mx.qqmm(x, wq, ws, mode=mode, global_scale_x=gx, global_scale_w=gw)
    assert mx.allclose(y, x_hat @ w_hat.T, atol=1e-3).item()
    # A dense w is quantized too.
    y2 = mx.qqmm(x, w, mode=mode, global_scale_x=gx, global_scale_w=gw)
    assert mx.allclose(y2, y, atol=1e-5).item()
    xb = mx.random.normal((3, 2, 64), key=mx.random.key(7))
    wb = mx.random.normal((2, 32, 64), key=mx.random.key(8))
    gwb = mx.max(mx.abs(wb)) if mode == "nvfp4" else None
    gxb = mx.max(mx.abs(xb)) if mode == "nvfp4" else None
    wbq, wbs = mx.quantize(wb, mode=mode, global_scale=gwb)
    li, ri = mx.array([0, 2]), mx.array([1, 0])
    got = mx.gather_qqmm(xb, wbq, wbs, li, ri, mode=mode, global_scale_x=gxb,
                         global_scale_w=gwb)
    xbh = mx.dequantize(*mx.quantize(xb, mode=mode, global_scale=gxb),
                        mode=mode, global_scale=gxb, dtype=mx.float32)
    wbh = mx.dequantize(wbq, wbs, mode=mode, global_scale=gwb,
                        dtype=mx.float32)
    ref = mx.gather_mm(xbh, mx.swapaxes(wbh, -1, -2), li, ri)
    assert mx.allclose(got, ref, atol=1e-3).item()
    with pytest.raises(ValueError, match=r"\[qqmm\] Both operands are "
                       r"quantized with a floating mode"):
        mx.qqmm(x, w, mode="affine")


@pytest.mark.parametrize("mode", ["mxfp4", "mxfp8", "nvfp4"])
def test_dequantize_default_dtype_is_mlxs(mode):
    # MLX: bfloat16 for the floating modes (their scales are uint8), the
    # scales' and biases' common type for affine.
    w = mx.random.normal((8, 64), key=mx.random.key(9))
    q = mx.quantize(w, mode=mode)
    assert mx.dequantize(*q, mode=mode).dtype == mx.bfloat16
    f32 = mx.dequantize(*q, mode=mode, dtype=mx.float32)
    assert f32.dtype == mx.float32
    np.testing.assert_array_equal(
        np.array(mx.dequantize(*q, mode=mode).astype(mx.float32)),
        np.array(f32.astype(mx.bfloat16).astype(mx.float32)))


def test_dequantize_affine_default_is_the_scales_type():
    w = mx.random.normal((8, 64), key=mx.random.key(10))
    wq, s, b = mx.quantize(w)
    assert mx.dequantize(wq, s, b).dtype == mx.float32
    half = mx.dequantize(wq, s.astype(mx.float16), b.astype(mx.float16))
    assert half.dtype == mx.float16
