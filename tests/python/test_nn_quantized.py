"""Quantized layers, nn.quantize, and the tensor-parallel linear layers in
a single-process group."""

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn
from fluxion.utils import tree_flatten, tree_reduce

RNG = np.random.default_rng(5)


def npa(x):
    # The floating modes dequantize to bfloat16 (MLX), which NumPy lacks.
    return np.array(x.astype(mx.float32) if x.dtype == mx.bfloat16 else x)


def dequantized(layer):
    return npa(
        mx.dequantize(
            layer.weight,
            layer.scales,
            layer.biases,
            layer.group_size,
            layer.bits,
        )
    )


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_quantized_linear_matches_dequantized_dense(bits):
    lin = nn.Linear(128, 16)
    q = nn.QuantizedLinear.from_linear(lin, group_size=64, bits=bits)
    assert q.weight.dtype == mx.uint32 and q.weight.shape == (
        16,
        128 * bits // 32,
    )
    x = RNG.normal(size=(3, 128)).astype(np.float32)
    W = dequantized(q)
    np.testing.assert_allclose(
        npa(q(mx.array(x))), x @ W.T + npa(lin.bias), rtol=1e-4, atol=1e-4
    )
    # The quantization error is within one step of the grid.
    err = np.abs(W - npa(lin.weight)).max()
    assert err <= np.abs(npa(q.scales)).max() * 1.01
    assert f"bits={bits}" in repr(q) and "input_dims=128" in repr(q)


def test_quantized_linear_freezing():
    q = nn.Linear(64, 8).to_quantized(group_size=32)
    assert isinstance(q, nn.QuantizedLinear)
    assert set(k for k, _ in tree_flatten(q.trainable_parameters())) == {
        "bias"
    }
    q.unfreeze()
    assert set(k for k, _ in tree_flatten(q.trainable_parameters())) == {
        "bias"
    }
    q.unfreeze(keys=["scales"])
    trainable = set(k for k, _ in tree_flatten(q.trainable_parameters()))
    assert "scales" in trainable and "weight" not in trainable
    # Gradients flow to the bias (and the unfrozen scales).
    x = mx.ones((2, 64))
    _, g = nn.value_and_grad(q, lambda x: q(x).sum())(x)
    np.testing.assert_allclose(npa(g["bias"]), [2.0] * 8)
    assert g["scales"].shape == q.scales.shape


def test_quantized_embedding():
    emb = nn.Embedding(16, 64)
    q = nn.QuantizedEmbedding.from_embedding(emb, group_size=32, bits=8)
    idx = mx.array([[3, 0], [15, 3]])
    W = dequantized(q)
    np.testing.assert_allclose(npa(q(idx)), W[npa(idx)], rtol=1e-6)
    assert np.abs(npa(q(idx)) - npa(emb(idx))).max() <= npa(q.scales).max()
    x = RNG.normal(size=(2, 64)).astype(np.float32)
    np.testing.assert_allclose(
        npa(q.as_linear(mx.array(x))), x @ W.T, rtol=1e-4, atol=1e-4
    )
    assert isinstance(emb.to_quantized(), nn.QuantizedEmbedding)


def test_quantize_model_in_place():
    m = nn.Sequential(
        nn.Embedding(5, 64), nn.ReLU(), nn.Linear(64, 64), nn.LayerNorm(64)
    )
    nn.quantize(m, group_size=32)
    assert isinstance(m.layers[0], nn.QuantizedEmbedding)
    assert isinstance(m.layers[2], nn.QuantizedLinear)
    assert isinstance(m.layers[3], nn.LayerNorm)
    m = nn.Sequential(nn.Embedding(5, 64), nn.Linear(64, 64))
    nn.quantize(
        m, class_predicate=lambda path, mod: isinstance(mod, nn.Linear)
    )
    assert isinstance(m.layers[0], nn.Embedding)
    assert (
        isinstance(m.layers[1], nn.QuantizedLinear) and m.layers[1].bits == 4
    )
    # A dict from the predicate gives per-layer settings.
    m = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64))
    nn.quantize(
        m,
        class_predicate=lambda p, mod: {"bits": 8, "group_size": 32}
        if p == "layers.1"
        else False,
    )
    assert isinstance(m.layers[0], nn.Linear) and m.layers[1].bits == 8
    with pytest.raises(ValueError, match="Unable to quantize"):
        nn.quantize(
            nn.Sequential(nn.LayerNorm(4)), class_predicate=lambda p, mod: True
        )
    with pytest.raises(ValueError, match="not supported"):
        nn.quantize(nn.Sequential(nn.Embedding(5, 64)), quantize_input=True)


def test_sharded_linear_single_process():
    lin = nn.Linear(16, 8)
    x = mx.array(RNG.normal(size=(3, 16)).astype(np.float32))
    for cls in (nn.AllToShardedLinear, nn.ShardedToAllLinear):
        s = cls.from_linear(lin)
        np.testing.assert_allclose(npa(s(x)), npa(lin(x)), rtol=1e-6)
        assert s.weight.shape == lin.weight.shape
        assert "input_dims=16, output_dims=8" in repr(s)
    q = nn.Linear(64, 8).to_quantized(group_size=32, bits=8)
    x = mx.array(RNG.normal(size=(3, 64)).astype(np.float32))
    for cls in (
        nn.QuantizedAllToShardedLinear,
        nn.QuantizedShardedToAllLinear,
    ):
        s = cls.from_quantized_linear(q)
        assert s.weight.shape == q.weight.shape
        np.testing.assert_allclose(npa(s(x)), npa(q(x)), rtol=1e-6)
    assert isinstance(
        nn.shard_linear(lin, "all-to-sharded"), nn.AllToShardedLinear
    )
    assert isinstance(
        nn.shard_linear(q, "sharded-to-all"), nn.QuantizedShardedToAllLinear
    )
    with pytest.raises(ValueError):
        nn.shard_linear(lin, "rows")
    m = nn.Sequential(nn.Linear(4, 4))
    w = m.layers[0].weight
    nn.shard_inplace(m, "all-to-sharded")
    assert mx.array_equal(m.layers[0].weight, w).item()
    size = tree_reduce(
        lambda acc, p: acc + p.size, q.trainable_parameters(), 0
    )
    assert size == 8


# -- quantization formats beyond the core's -----------------------------------

from fluxion.nn.layers import quant_formats as qf  # noqa: E402


def np_bitstream(codes, bits):
    """Reference packing: codes of a row as a little-endian bit stream in
    uint32 words."""
    rows = []
    for row in codes.reshape(-1, codes.shape[-1]):
        value = 0
        for i, c in enumerate(row):
            value |= int(c) << (i * bits)
        total = len(row) * bits
        words = [(value >> (32 * k)) & 0xFFFFFFFF for k in range(total // 32)]
        rows.append(words)
    return np.array(rows, dtype=np.uint32).reshape(*codes.shape[:-1], -1)


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
def test_bit_stream_packing_matches_reference(bits):
    codes = RNG.integers(0, 1 << bits, size=(3, 64)).astype(np.uint32)
    packed = qf._pack(mx.array(codes), bits)
    np.testing.assert_array_equal(npa(packed), np_bitstream(codes, bits))
    np.testing.assert_array_equal(npa(qf._unpack(packed, bits, 64)), codes)


def test_python_affine_matches_core_formula():
    w = mx.array(RNG.normal(size=(6, 128)).astype(np.float32))
    for bits in (2, 4, 8):
        ours = qf._affine(w, 64, bits)
        core = mx.quantize(w, 64, bits)
        for a, b in zip(ours, core):
            np.testing.assert_array_equal(npa(a), npa(b))


@pytest.mark.parametrize("bits", [3, 5, 6])
def test_affine_odd_bits(bits):
    w = RNG.normal(size=(4, 128)).astype(np.float32)
    wq, s, b = qf.quantize(mx.array(w), 32, bits)
    assert wq.shape == (4, 128 * bits // 32) and s.shape == (4, 4)
    dq = npa(qf.dequantize(wq, s, b, 32, bits))
    # Within one grid step (the far extreme may be clipped by the exact edge).
    assert np.abs(dq - w).max() <= np.abs(npa(s)).max() * 1.01
    # The larger-magnitude edge of each group is exact.
    g, gd = w.reshape(4, 4, 32), dq.reshape(4, 4, 32)
    idx = np.abs(g).argmax(-1)
    np.testing.assert_allclose(
        np.take_along_axis(gd, idx[..., None], -1),
        np.take_along_axis(g, idx[..., None], -1),
        rtol=1e-6,
    )
    layer = nn.Linear(128, 4).to_quantized(group_size=32, bits=bits)
    x = RNG.normal(size=(2, 128)).astype(np.float32)
    W = npa(qf.dequantize(layer.weight, layer.scales, layer.biases, 32, bits))
    np.testing.assert_allclose(
        npa(layer(mx.array(x))),
        x @ W.T + npa(layer.bias),
        rtol=1e-4,
        atol=1e-5,
    )


def np_e4m3(code):
    s = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 7
    return s * (m * 2.0**-9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))


def test_float_element_formats():
    # Every E4M3 code but NaN decodes as the format says, and encodes back.
    codes = np.array(
        [c for c in range(256) if c & 0x7F != 0x7F], dtype=np.uint32
    )
    vals = np.array([np_e4m3(int(c)) for c in codes], dtype=np.float32)
    np.testing.assert_array_equal(npa(qf._decode_e4m3(mx.array(codes))), vals)
    back = npa(qf._encode_e4m3(mx.array(vals)))
    np.testing.assert_array_equal(np.vectorize(np_e4m3)(back), vals)
    # Rounding to nearest and saturation.
    np.testing.assert_array_equal(
        npa(
            qf._decode_e4m3(
                qf._encode_e4m3(mx.array([1.06, 1.07, 1000.0, -3e-3]))
            )
        ),
        [1.0, 1.125, 448.0, -2 * 2.0**-9],
    )
    e2m1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float32)
    np.testing.assert_array_equal(
        npa(
            qf._decode_e2m1(
                qf._encode_e2m1(mx.array(np.concatenate([e2m1, -e2m1])))
            )
        ),
        np.concatenate([e2m1, -e2m1]),
    )
    np.testing.assert_array_equal(
        npa(
            qf._decode_e2m1(
                qf._encode_e2m1(mx.array([0.7, 2.4, 2.6, 5.2, 9.0]))
            )
        ),
        [0.5, 2.0, 3.0, 6.0, 6.0],
    )


# Worst relative rounding error of an element v <= amax: E2M1 (steps of
# 0.5 to 2 between 1 and 6) loses at most v / 5, E4M3 (3 mantissa bits)
# v / 16; nvfp4's float8 scale adds its own rounding.
@pytest.mark.parametrize(
    "mode,group,bound",
    [
        ("mxfp4", 32, 1 / 5 + 1e-6),
        ("mxfp8", 32, 1 / 16 + 1e-6),
        ("nvfp4", 16, 1 / 5 + 0.02),
    ],
)
def test_floating_point_modes(mode, group, bound):
    # nvfp4's float8 scales have less range (the smallest nonzero scale is
    # 2^-9, so groups below ~6e-3 underflow): a milder small row for it.
    small = 0.1 if mode == "nvfp4" else 1e-3
    w = RNG.normal(size=(4, 64)).astype(np.float32) * np.array(
        [[1], [small], [30], [0]], np.float32
    )
    wq, scales = qf.quantize(mx.array(w), mode=mode)
    assert wq.dtype == mx.uint32 and scales.dtype == mx.uint8
    assert scales.shape == (4, 64 // group)
    dq = npa(qf.dequantize(wq, scales, mode=mode))
    assert np.all(dq[3] == 0)
    g, gd = w.reshape(4, -1, group), dq.reshape(4, -1, group)
    amax = np.abs(g).max(-1, keepdims=True)
    # Errors are bounded relative to each group's largest magnitude.
    assert np.all(np.abs(gd - g) <= bound * amax + 1e-30)
    if mode != "nvfp4":
        # E8M0 scales are powers of two: the largest value fits the range.
        scale = 2.0 ** (npa(scales).astype(np.float64) - 127)
        emax = 6.0 if mode == "mxfp4" else 448.0
        assert np.all(amax[:3, :, 0] / scale[:3] <= emax)
    layer = nn.Linear(64, 4).to_quantized(mode=mode)
    assert "biases" not in layer and layer.group_size == group
    x = RNG.normal(size=(3, 64)).astype(np.float32)
    W = npa(qf.dequantize(layer.weight, layer.scales, mode=mode))
    np.testing.assert_allclose(
        npa(layer(mx.array(x))),
        x @ W.T + npa(layer.bias),
        rtol=1e-4,
        atol=1e-5,
    )
    emb = nn.Embedding(10, 64).to_quantized(mode=mode)
    np.testing.assert_allclose(
        npa(emb(mx.array([3, 3, 7]))),
        npa(qf.dequantize(emb.weight, emb.scales, mode=mode))[[3, 3, 7]],
    )


def test_qq_linear_quantizes_its_input_straight_through():
    lin = nn.Linear(64, 8, bias=False)
    qq = lin.to_quantized(group_size=32, mode="mxfp8", quantize_input=True)
    assert isinstance(qq, nn.QQLinear) and qq.mode == "mxfp8"
    x = mx.array(RNG.normal(size=(2, 64)).astype(np.float32))
    W = npa(qf.dequantize(qq.weight, qq.scales, mode="mxfp8"))
    xq = qf.quantize(x, mode="mxfp8")
    xd = npa(qf.dequantize(*xq, mode="mxfp8"))
    assert not np.array_equal(xd, npa(x))
    np.testing.assert_allclose(npa(qq(x)), xd @ W.T, rtol=1e-5, atol=1e-5)
    g = mx.grad(lambda x: qq(x).sum())(x)
    np.testing.assert_allclose(
        npa(g), np.ones((2, 8)) @ W, rtol=1e-5, atol=1e-5
    )
    m = nn.Sequential(nn.Embedding(5, 64), nn.Linear(64, 64, bias=False))
    nn.quantize(
        m,
        mode="nvfp4",
        quantize_input=True,
        class_predicate=lambda p, mod: isinstance(mod, nn.Linear),
    )
    assert (
        isinstance(m.layers[1], nn.QQLinear) and m.layers[1].group_size == 16
    )


def test_format_validation():
    with pytest.raises(ValueError, match="group sizes"):
        qf.quantize(mx.zeros((2, 64)), group_size=64, mode="mxfp4")
    with pytest.raises(ValueError, match="bits"):
        qf.quantize(mx.zeros((2, 64)), bits=7)
    with pytest.raises(ValueError, match="Unknown quantization mode"):
        qf.quantize(mx.zeros((2, 64)), mode="int4")
    with pytest.raises(ValueError, match="divisible"):
        qf.quantize(mx.zeros((2, 48)), group_size=32, bits=3)
