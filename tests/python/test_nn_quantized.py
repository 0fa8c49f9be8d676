"""Quantized layers, nn.quantize, and the tensor-parallel linear layers in
a single-process group."""

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn
from fluxion.utils import tree_flatten, tree_reduce

RNG = np.random.default_rng(5)


def npa(x):
    return np.array(x)


def dequantized(layer):
    return npa(mx.dequantize(layer.weight, layer.scales, layer.biases, layer.group_size,
                             layer.bits))


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_quantized_linear_matches_dequantized_dense(bits):
    lin = nn.Linear(128, 16)
    q = nn.QuantizedLinear.from_linear(lin, group_size=64, bits=bits)
    assert q.weight.dtype == mx.uint32 and q.weight.shape == (16, 128 * bits // 32)
    x = RNG.normal(size=(3, 128)).astype(np.float32)
    W = dequantized(q)
    np.testing.assert_allclose(npa(q(mx.array(x))), x @ W.T + npa(lin.bias), rtol=1e-4,
                               atol=1e-4)
    # The quantization error is within one step of the grid.
    err = np.abs(W - npa(lin.weight)).max()
    assert err <= np.abs(npa(q.scales)).max() * 1.01
    assert f"bits={bits}" in repr(q) and "input_dims=128" in repr(q)


def test_quantized_linear_freezing():
    q = nn.Linear(64, 8).to_quantized(group_size=32)
    assert isinstance(q, nn.QuantizedLinear)
    assert set(k for k, _ in tree_flatten(q.trainable_parameters())) == {"bias"}
    q.unfreeze()
    assert set(k for k, _ in tree_flatten(q.trainable_parameters())) == {"bias"}
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
    np.testing.assert_allclose(npa(q.as_linear(mx.array(x))), x @ W.T, rtol=1e-4, atol=1e-4)
    assert isinstance(emb.to_quantized(), nn.QuantizedEmbedding)


def test_quantize_model_in_place():
    m = nn.Sequential(nn.Embedding(5, 64), nn.ReLU(), nn.Linear(64, 64), nn.LayerNorm(64))
    nn.quantize(m, group_size=32)
    assert isinstance(m.layers[0], nn.QuantizedEmbedding)
    assert isinstance(m.layers[2], nn.QuantizedLinear)
    assert isinstance(m.layers[3], nn.LayerNorm)
    m = nn.Sequential(nn.Embedding(5, 64), nn.Linear(64, 64))
    nn.quantize(m, class_predicate=lambda path, mod: isinstance(mod, nn.Linear))
    assert isinstance(m.layers[0], nn.Embedding)
    assert isinstance(m.layers[1], nn.QuantizedLinear) and m.layers[1].bits == 4
    # A dict from the predicate gives per-layer settings.
    m = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64))
    nn.quantize(m, class_predicate=lambda p, mod: {"bits": 8, "group_size": 32}
                if p == "layers.1" else False)
    assert isinstance(m.layers[0], nn.Linear) and m.layers[1].bits == 8
    with pytest.raises(ValueError, match="Unable to quantize"):
        nn.quantize(nn.Sequential(nn.LayerNorm(4)), class_predicate=lambda p, mod: True)
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
    for cls in (nn.QuantizedAllToShardedLinear, nn.QuantizedShardedToAllLinear):
        s = cls.from_quantized_linear(q)
        assert s.weight.shape == q.weight.shape
        np.testing.assert_allclose(npa(s(x)), npa(q(x)), rtol=1e-6)
    assert isinstance(nn.shard_linear(lin, "all-to-sharded"), nn.AllToShardedLinear)
    assert isinstance(nn.shard_linear(q, "sharded-to-all"), nn.QuantizedShardedToAllLinear)
    with pytest.raises(ValueError):
        nn.shard_linear(lin, "rows")
    m = nn.Sequential(nn.Linear(4, 4))
    w = m.layers[0].weight
    nn.shard_inplace(m, "all-to-sharded")
    assert mx.array_equal(m.layers[0].weight, w).item()
    size = tree_reduce(lambda acc, p: acc + p.size, q.trainable_parameters(), 0)
    assert size == 8
