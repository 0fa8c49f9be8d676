"""Attention, Transformer, recurrent and positional-encoding layers against
NumPy / PyTorch references, with finite-difference gradient checks."""

import math

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn
from nn_check import check_module_grads

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")
RNG = np.random.default_rng(1)


def npa(x):
    return np.array(x)


def rand(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def lin(layer, x):
    y = x @ npa(layer.weight).T
    return y + npa(layer.bias) if "bias" in layer else y


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def np_mha(attn, q, k, v, mask=None):
    h = attn.num_heads
    Q, K, V = (
        lin(attn.query_proj, q),
        lin(attn.key_proj, k),
        lin(attn.value_proj, v),
    )

    def split(t):
        B, L, D = t.shape
        return t.reshape(B, L, h, D // h).transpose(0, 2, 1, 3)

    Q, K, V = split(Q), split(K), split(V)
    s = Q @ K.transpose(0, 1, 3, 2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s + mask
    o = np_softmax(s) @ V
    B, _, L, _ = o.shape
    return lin(attn.out_proj, o.transpose(0, 2, 1, 3).reshape(B, L, -1))


def test_multi_head_attention_matches_numpy():
    attn = nn.MultiHeadAttention(
        8, 2, key_input_dims=6, value_dims=10, value_output_dims=4, bias=True
    )
    q, k, v = rand(2, 3, 8), rand(2, 5, 6), rand(2, 5, 6)
    mask = np.where(RNG.random((3, 5)) < 0.3, -1e9, 0).astype(np.float32)
    out = attn(mx.array(q), mx.array(k), mx.array(v), mask=mx.array(mask))
    assert out.shape == (2, 3, 4)
    np.testing.assert_allclose(
        npa(out), np_mha(attn, q, k, v, mask), rtol=1e-4, atol=1e-5
    )
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiHeadAttention(10, 3)
    check_module_grads(
        nn.MultiHeadAttention(4, 2),
        [mx.array(rand(1, 3, 4))] * 3,
        call=lambda m, q, k, v: m(q, k, v),
    )


def test_causal_mask():
    m = npa(nn.MultiHeadAttention.create_additive_causal_mask(4))
    assert m.shape == (4, 4)
    assert np.all(m[np.tril_indices(4)] == 0)
    assert np.all(m[np.triu_indices(4, 1)] < -1e30)
    for dtype in (mx.float16, mx.bfloat16):
        mh = nn.MultiHeadAttention.create_additive_causal_mask(4, dtype)
        assert mh.dtype == dtype
        assert not mx.any(mx.isnan(mh)).item() and mh[0, -1].item() < 0


def np_encoder_layer(layer, x, mask, norm_first):
    def ln(m, t):
        mu, var = t.mean(-1, keepdims=True), t.var(-1, keepdims=True)
        return (t - mu) / np.sqrt(var + 1e-5) * npa(m.weight) + npa(m.bias)

    def mlp(t):
        return lin(layer.linear2, np.maximum(lin(layer.linear1, t), 0))

    if norm_first:
        y = ln(layer.ln1, x)
        x = x + np_mha(layer.attention, y, y, y, mask)
        return x + mlp(ln(layer.ln2, x))
    x = ln(layer.ln1, x + np_mha(layer.attention, x, x, x, mask))
    return ln(layer.ln2, x + mlp(x))


@pytest.mark.parametrize("norm_first", [True, False])
def test_transformer_encoder_layer_matches_numpy(norm_first):
    layer = nn.TransformerEncoderLayer(
        8, 2, mlp_dims=12, norm_first=norm_first
    )
    x = rand(2, 5, 8)
    mask = npa(nn.MultiHeadAttention.create_additive_causal_mask(5))
    out = layer(mx.array(x), mx.array(mask))
    np.testing.assert_allclose(
        npa(out),
        np_encoder_layer(layer, x, mask, norm_first),
        rtol=1e-4,
        atol=1e-4,
    )


def test_transformer_stacks_and_custom_modules():
    enc = nn.TransformerEncoder(2, 8, 2)
    dec = nn.TransformerDecoder(2, 8, 2, norm_first=False)
    src, tgt = mx.array(rand(2, 6, 8)), mx.array(rand(2, 4, 8))
    mem = enc(src, None)
    assert mem.shape == (2, 6, 8)
    # The encoder stack is its layers followed by the final LayerNorm.
    h = src
    for layer in enc.layers:
        h = layer(h, None)
    np.testing.assert_allclose(npa(mem), npa(enc.ln(h)), rtol=1e-5, atol=1e-6)
    # MLX's argument names work as keywords.
    np.testing.assert_array_equal(npa(enc(src, mask=None)), npa(mem))
    mask = nn.MultiHeadAttention.create_additive_causal_mask(4)
    out = dec(tgt, mem, mask, None)
    assert out.shape == (2, 4, 8)
    np.testing.assert_array_equal(
        npa(dec(tgt, memory=mem, x_mask=mask, memory_mask=None)), npa(out)
    )
    model = nn.Transformer(8, 2, 1, 1, mlp_dims=16)
    assert model(src, tgt, None, mask, None).shape == (2, 4, 8)
    custom = nn.Transformer(
        8, 2, custom_encoder=nn.Identity(), custom_decoder=nn.Identity()
    )
    assert isinstance(custom.encoder, nn.Identity)
    # Checkpointed stacks compute the same function.
    enc.checkpoint = True
    np.testing.assert_allclose(
        npa(enc(src, None)), npa(mem), rtol=1e-5, atol=1e-6
    )
    check_module_grads(
        nn.TransformerDecoderLayer(4, 2, mlp_dims=8),
        [mx.array(rand(1, 3, 4)), mx.array(rand(1, 2, 4))],
        call=lambda m, x, mem: m(x, mem, None, None),
        rtol=1e-4,
    )


@needs_torch
def test_rnn_matches_torch():
    layer = nn.RNN(3, 5)
    t = torch.nn.RNN(3, 5, batch_first=True)
    with torch.no_grad():
        t.weight_ih_l0.copy_(torch.from_numpy(npa(layer.Wxh)))
        t.weight_hh_l0.copy_(torch.from_numpy(npa(layer.Whh)))
        t.bias_ih_l0.copy_(torch.from_numpy(npa(layer.bias)))
        t.bias_hh_l0.zero_()
    x, h0 = rand(2, 4, 3), rand(2, 5)
    ref, _ = t(torch.from_numpy(x), torch.from_numpy(h0)[None])
    np.testing.assert_allclose(
        npa(layer(mx.array(x), mx.array(h0))),
        ref.detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )
    ref0, _ = t(torch.from_numpy(x))
    np.testing.assert_allclose(
        npa(layer(mx.array(x))), ref0.detach().numpy(), rtol=1e-5, atol=1e-6
    )
    # Unbatched input and a custom nonlinearity.
    relu_rnn = nn.RNN(3, 5, bias=False, nonlinearity=nn.relu)
    assert relu_rnn(mx.array(x[0])).shape == (4, 5)
    with pytest.raises(ValueError):
        nn.RNN(3, 5, nonlinearity="tanh")
    check_module_grads(nn.RNN(2, 3), [mx.array(rand(1, 3, 2))])


@needs_torch
@pytest.mark.parametrize("bias", [True, False])
def test_gru_matches_torch(bias):
    layer = nn.GRU(3, 4, bias=bias)
    t = torch.nn.GRU(3, 4, batch_first=True, bias=bias)
    H = 4
    with torch.no_grad():
        t.weight_ih_l0.copy_(torch.from_numpy(npa(layer.Wx)))
        t.weight_hh_l0.copy_(torch.from_numpy(npa(layer.Wh)))
        if bias:
            # Our b holds both biases of r and z and the input bias of n;
            # bhn is the hidden bias of n (inside the reset gate).
            b = npa(layer.b)
            t.bias_ih_l0.copy_(torch.from_numpy(b))
            hh = np.zeros(3 * H, np.float32)
            hh[2 * H :] = npa(layer.bhn)
            t.bias_hh_l0.copy_(torch.from_numpy(hh))
    x, h0 = rand(2, 5, 3), rand(2, 4)
    ref, _ = t(torch.from_numpy(x), torch.from_numpy(h0)[None])
    np.testing.assert_allclose(
        npa(layer(mx.array(x), mx.array(h0))),
        ref.detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )
    # No initial state is the zero state.
    ref0, _ = t(torch.from_numpy(x))
    np.testing.assert_allclose(
        npa(layer(mx.array(x))), ref0.detach().numpy(), rtol=1e-5, atol=1e-6
    )
    check_module_grads(nn.GRU(2, 3, bias=bias), [mx.array(rand(1, 3, 2))])


@needs_torch
def test_lstm_matches_torch():
    layer = nn.LSTM(3, 4)
    t = torch.nn.LSTM(3, 4, batch_first=True)
    with torch.no_grad():
        t.weight_ih_l0.copy_(torch.from_numpy(npa(layer.Wx)))
        t.weight_hh_l0.copy_(torch.from_numpy(npa(layer.Wh)))
        t.bias_ih_l0.copy_(torch.from_numpy(npa(layer.bias)))
        t.bias_hh_l0.zero_()
    x, h0, c0 = rand(2, 5, 3), rand(2, 4), rand(2, 4)
    (h_ref, (hn, cn)) = t(
        torch.from_numpy(x),
        (torch.from_numpy(h0)[None], torch.from_numpy(c0)[None]),
    )
    hs, cs = layer(mx.array(x), mx.array(h0), mx.array(c0))
    np.testing.assert_allclose(
        npa(hs), h_ref.detach().numpy(), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        npa(cs[:, -1]), cn[0].detach().numpy(), rtol=1e-5, atol=1e-6
    )
    h_ref0, _ = t(torch.from_numpy(x))
    np.testing.assert_allclose(
        npa(layer(mx.array(x))[0]),
        h_ref0.detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )
    check_module_grads(nn.LSTM(2, 3), [mx.array(rand(1, 3, 2))])


def np_rope(x, dims, traditional, base, scale, offset):
    L = x.shape[-2]
    pos = (np.arange(L) + offset) * scale
    freqs = base ** (-np.arange(0, dims, 2) / dims)
    theta = pos[:, None] * freqs[None]
    cos, sin = np.cos(theta), np.sin(theta)
    out = x.astype(np.float64).copy()
    if traditional:
        a, b = x[..., 0:dims:2], x[..., 1:dims:2]
        out[..., 0:dims:2] = a * cos - b * sin
        out[..., 1:dims:2] = a * sin + b * cos
    else:
        h = dims // 2
        a, b = x[..., :h], x[..., h:dims]
        out[..., :h] = a * cos - b * sin
        out[..., h:dims] = a * sin + b * cos
    return out


@pytest.mark.parametrize("traditional", [False, True])
def test_rope_matches_numpy(traditional):
    x = rand(2, 3, 6, 8)
    rope = nn.RoPE(6, traditional=traditional, base=500, scale=0.5)
    np.testing.assert_allclose(
        npa(rope(mx.array(x), offset=2)),
        np_rope(x, 6, traditional, 500, 0.5, 2),
        rtol=1e-4,
        atol=1e-5,
    )
    assert rope(mx.array(x).astype(mx.float16)).dtype == mx.float16


def test_sinusoidal_positional_encoding():
    pe = nn.SinusoidalPositionalEncoding(8, min_freq=0.01, max_freq=2.0)
    x = np.arange(5, dtype=np.float32)
    freqs = np.exp(np.linspace(np.log(2.0), np.log(0.01), 4))
    ang = x[:, None] * freqs
    ref = np.concatenate([np.sin(ang), np.cos(ang)], -1) * np.sqrt(2 / 8)
    np.testing.assert_allclose(npa(pe(mx.array(x))), ref, rtol=1e-5, atol=1e-6)
    # Unit norm encodings.
    y = npa(nn.SinusoidalPositionalEncoding(16)(mx.arange(7)))
    np.testing.assert_allclose((y**2).sum(-1), 1, rtol=1e-5)
    cos_first = npa(
        nn.SinusoidalPositionalEncoding(
            8, min_freq=0.01, max_freq=2.0, cos_first=True, scale=1.0
        )(mx.array(x))
    )
    np.testing.assert_allclose(
        cos_first[:, :4], np.cos(ang), rtol=1e-5, atol=1e-6
    )
    assert nn.SinusoidalPositionalEncoding(2)(mx.arange(3)).shape == (3, 2)
    zero = nn.SinusoidalPositionalEncoding(4, scale=0.0)
    assert zero.scale == 0.0 and not npa(zero(mx.arange(3))).any()
    for dims in (0, 3, -2):
        with pytest.raises(ValueError):
            nn.SinusoidalPositionalEncoding(dims)


def test_alibi_matches_numpy():
    scores = rand(1, 4, 3, 5)
    out = npa(nn.ALiBi()(mx.array(scores), offset=2))
    slopes = 2.0 ** (-8.0 * np.arange(1, 5) / 4)
    q = np.arange(2, 5)[:, None]
    k = np.arange(5)[None]
    ref = scores - slopes[:, None, None] * np.abs(q - k)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    mask = rand(3, 5)
    np.testing.assert_allclose(
        npa(nn.ALiBi()(mx.array(scores), offset=2, mask=mx.array(mask))),
        ref + mask,
        rtol=1e-5,
        atol=1e-6,
    )
    assert nn.ALiBi()(mx.array(scores).astype(mx.float16)).dtype == mx.float16
