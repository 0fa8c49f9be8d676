"""scaled_dot_product_attention on the GPU (skipped, with the reason, where
no GPU is visible): the flash kernel against the CPU's kernel and against
the composed reference (matmul, softmax, matmul in float32), for every mask
kind, grouped-query heads, sinks, decoding (the split-key path), head
dimensions off the fast sizes, transposed layouts, and gradients.
"""
import numpy as np
import pytest

import fluxion.core as mx

from helpers import host, requires_gpu

pytestmark = requires_gpu

G = mx.gpu
C = mx.cpu
TOL = {mx.float32: 2e-5, mx.float64: 1e-12, mx.float16: 2e-3,
       mx.bfloat16: 2e-2}


def reference(q, k, v, scale, mask=None, sinks=None):
    """The composed attention in float64 on NumPy (MLX's edge rules)."""
    q, k, v = (host(a).astype(np.float64) for a in (q, k, v))
    scale = float(np.float32(scale))  # the primitive keeps a float scale
    rep = q.shape[1] // k.shape[1]
    k = np.repeat(k, rep, axis=1)
    v = np.repeat(v, rep, axis=1)
    s = scale * q @ np.swapaxes(k, -1, -2)
    if mask is not None:
        if mask.dtype == np.bool_:
            s = np.where(mask, s, np.finfo(np.float32).min)
        else:
            s = s + mask
    if sinks is not None:
        sk = np.broadcast_to(host(sinks).astype(np.float64)[None, :, None, None],
                             s.shape[:-1] + (1,))
        s = np.concatenate([s, sk], axis=-1)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    if sinks is not None:
        p = p[..., :-1]
    return p @ v


def draw(shape, dt, seed):
    return mx.array(np.random.default_rng(seed).standard_normal(shape)
                    .astype(np.float32)).astype(dt)


def both(q, k, v, scale, **kw):
    g = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, stream=G,
                                             **kw)
    c = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, stream=C,
                                             **kw)
    return host(g), host(c)


@pytest.mark.parametrize("dt", [mx.float32, mx.float16, mx.bfloat16,
                                mx.float64])
@pytest.mark.parametrize("B,Hq,Hkv,Lq,Lk,D", [
    (1, 1, 1, 1, 1, 64), (2, 4, 4, 37, 53, 64), (1, 8, 2, 130, 130, 128),
    (1, 4, 1, 3, 700, 80), (2, 2, 2, 64, 33, 96), (1, 2, 2, 17, 19, 200)])
def test_matches_cpu_and_reference(dt, B, Hq, Hkv, Lq, Lk, D):
    q = draw((B, Hq, Lq, D), dt, 1)
    k = draw((B, Hkv, Lk, D), dt, 2)
    v = draw((B, Hkv, Lk, D), dt, 3)
    scale = D ** -0.5
    g, c = both(q, k, v, scale)
    np.testing.assert_allclose(g, c, rtol=TOL[dt], atol=TOL[dt])
    ref = reference(q, k, v, scale)
    np.testing.assert_allclose(g, ref, rtol=4 * TOL[dt], atol=4 * TOL[dt])


@pytest.mark.parametrize("Lq,Lk", [(50, 50), (7, 300), (300, 7), (1, 4000),
                                   (40, 33)])
def test_causal(Lq, Lk):
    q = draw((2, 4, Lq, 64), mx.float32, 4)
    k = draw((2, 2, Lk, 64), mx.float32, 5)
    v = draw((2, 2, Lk, 64), mx.float32, 6)
    g, c = both(q, k, v, 0.125, mask="causal")
    # Queries that see no key (Lq > Lk) attend uniformly: the CPU's rule.
    np.testing.assert_allclose(g, c, rtol=2e-5, atol=2e-5)


def test_bool_and_additive_masks_with_hidden_rows():
    rng = np.random.default_rng(7)
    q = draw((2, 4, 45, 64), mx.float32, 7)
    k = draw((2, 4, 70, 64), mx.float32, 8)
    v = draw((2, 4, 70, 64), mx.float32, 9)
    keep = rng.random((2, 4, 45, 70)) < 0.6
    keep[0, 0, 3] = False  # a row that sees nothing: uniform
    g, c = both(q, k, v, 0.2, mask=mx.array(keep))
    np.testing.assert_allclose(g, c, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(g, reference(q, k, v, 0.2, keep), rtol=1e-4,
                               atol=1e-4)
    add = rng.standard_normal((45, 70)).astype(np.float32)
    add[5, :40] = -np.inf  # the first tile of a row is all -inf
    add[6, :] = -np.inf  # a row of -inf scores: nan, as on the CPU
    g, c = both(q, k, v, 0.2, mask=mx.array(add))
    np.testing.assert_allclose(g, c, rtol=2e-5, atol=2e-5)
    assert np.isnan(g[:, :, 6]).all()
    assert np.isfinite(g[:, :, 5]).all()


@pytest.mark.parametrize("mode", ["", "causal"])
@pytest.mark.parametrize("Lq,Lk", [(33, 40), (1, 3000)])
def test_sinks(mode, Lq, Lk):
    q = draw((1, 8, Lq, 64), mx.float32, 10)
    k = draw((1, 2, Lk, 64), mx.float32, 11)
    v = draw((1, 2, Lk, 64), mx.float32, 12)
    sinks = draw((8,), mx.float32, 13)
    g, c = both(q, k, v, 0.125, mask=mode or None, sinks=sinks)
    np.testing.assert_allclose(g, c, rtol=2e-5, atol=2e-5)
    if not mode:
        np.testing.assert_allclose(g, reference(q, k, v, 0.125, sinks=sinks),
                                   rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt", [mx.bfloat16, mx.float32])
def test_decode_split_keys_gqa(dt):
    # One query against many keys: the keys are split over blocks and the
    # partial softmaxes merged.
    q = draw((2, 32, 1, 128), dt, 14)
    k = draw((2, 8, 9000, 128), dt, 15)
    v = draw((2, 8, 9000, 128), dt, 16)
    g, c = both(q, k, v, 128 ** -0.5)
    np.testing.assert_allclose(g, c, rtol=TOL[dt], atol=TOL[dt])


def test_transposed_layouts_and_other_value_width():
    # [B, L, H, D] tensors seen as [B, H, L, D]; values of another width.
    q = mx.transpose(draw((2, 50, 4, 64), mx.float32, 17), (0, 2, 1, 3))
    k = mx.transpose(draw((2, 60, 4, 64), mx.float32, 18), (0, 2, 1, 3))
    v = mx.transpose(draw((2, 60, 4, 48), mx.float32, 19), (0, 2, 1, 3))
    g, c = both(q, k, v, 0.125, mask="causal")
    assert g.shape == (2, 4, 50, 48)
    np.testing.assert_allclose(g, c, rtol=2e-5, atol=2e-5)


def test_empty_keys_and_queries():
    q = draw((1, 2, 5, 64), mx.float32, 20)
    k = mx.zeros((1, 2, 0, 64))
    g, c = both(q, k, k, 1.0)
    np.testing.assert_array_equal(g, c)
    q0 = mx.zeros((1, 2, 0, 64))
    kk = draw((1, 2, 5, 64), mx.float32, 21)
    g, c = both(q0, kk, kk, 1.0)
    assert g.shape == (1, 2, 0, 64)


def test_nan_propagates_as_on_the_cpu():
    q = np.random.default_rng(22).standard_normal((1, 1, 4, 64)).astype(
        np.float32)
    q[0, 0, 2, 5] = np.nan
    k = draw((1, 1, 40, 64), mx.float32, 23)
    g, c = both(mx.array(q), k, k, 0.1)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(c))
    assert np.isnan(g[0, 0, 2]).all()


@pytest.mark.parametrize("mode", ["", "causal"])
def test_gradients_match_cpu(mode):
    q = draw((1, 4, 40, 64), mx.float32, 24)
    k = draw((1, 2, 50, 64), mx.float32, 25)
    v = draw((1, 2, 50, 64), mx.float32, 26)
    w = draw((1, 4, 40, 64), mx.float32, 27)

    def loss(q, k, v):
        o = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125,
                                                 mask=mode or None)
        return mx.sum(o * w)

    grads = {}
    for dev in (G, C):
        with mx.stream(dev):
            grads[dev] = [host(x) for x in
                          mx.grad(loss, argnums=(0, 1, 2))(q, k, v)]
    for g, c in zip(grads[G], grads[C]):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-5)


# The decode kernel (sdpa_decode.cu): Lq <= 4, float16/bfloat16/float32,
# one head dimension, K and V rows of whole 16-byte units; a block per KV
# head serves all its query heads, the keys split over blocks.
DECODE_TOL = {mx.float32: 2e-5, mx.float16: 2e-3, mx.bfloat16: 2e-2}


@pytest.mark.parametrize("dt", [mx.float16, mx.bfloat16, mx.float32])
@pytest.mark.parametrize("ratio", [1, 4, 8])
@pytest.mark.parametrize("Lk", [1, 7, 1000, 32768])
def test_decode_gqa_ratios_and_key_counts(dt, ratio, Lk):
    Hkv = 4
    q = draw((1, Hkv * ratio, 1, 128), dt, 30)
    k = draw((1, Hkv, Lk, 128), dt, 31)
    v = draw((1, Hkv, Lk, 128), dt, 32)
    g, c = both(q, k, v, 128 ** -0.5)
    np.testing.assert_allclose(g, c, rtol=DECODE_TOL[dt],
                               atol=DECODE_TOL[dt])


@pytest.mark.parametrize("dt", [mx.float16, mx.bfloat16, mx.float32])
@pytest.mark.parametrize("D", [64, 80, 96, 128, 256])
def test_decode_head_dims(dt, D):
    q = draw((2, 8, 1, D), dt, 33)
    k = draw((2, 2, 1500, D), dt, 34)
    v = draw((2, 2, 1500, D), dt, 35)
    g, c = both(q, k, v, D ** -0.5)
    np.testing.assert_allclose(g, c, rtol=DECODE_TOL[dt],
                               atol=DECODE_TOL[dt])


@pytest.mark.parametrize("dt", [mx.float16, mx.bfloat16, mx.float32])
@pytest.mark.parametrize("Lq", [1, 3])
@pytest.mark.parametrize("kind", ["bool", "additive", "causal"])
@pytest.mark.parametrize("sinks", [False, True])
def test_decode_masks_and_sinks(dt, Lq, kind, sinks):
    rng = np.random.default_rng(36)
    B, Hq, Hkv, Lk, D = 2, 16, 4, 2000, 64
    q = draw((B, Hq, Lq, D), dt, 37)
    k = draw((B, Hkv, Lk, D), dt, 38)
    v = draw((B, Hkv, Lk, D), dt, 39)
    kw = {}
    if kind == "bool":
        keep = rng.random((B, Hq, Lq, Lk)) < 0.7
        keep[0, 1, 0] = False  # a row that sees nothing: uniform
        kw["mask"] = mx.array(keep)
    elif kind == "additive":
        add = rng.standard_normal((Lq, Lk)).astype(np.float32)
        add[0, :700] = -np.inf  # whole splits of -inf
        kw["mask"] = mx.array(add).astype(dt)
    else:
        kw["mask"] = "causal"
    if sinks:
        kw["sinks"] = draw((Hq,), dt, 40)
    g, c = both(q, k, v, 0.125, **kw)
    np.testing.assert_allclose(g, c, rtol=DECODE_TOL[dt],
                               atol=DECODE_TOL[dt])


def test_decode_more_queries_than_keys_and_strided_kv():
    # Causal with Lq > Lk: the first queries see no key (uniform rows);
    # K and V as transposed views of [B, L, H, D].
    q = draw((1, 8, 4, 64), mx.float32, 41)
    k = draw((1, 2, 3, 64), mx.float32, 42)
    g, c = both(q, k, k, 0.125, mask="causal")
    np.testing.assert_allclose(g, c, rtol=2e-5, atol=2e-5)
    kt = mx.transpose(draw((2, 3000, 4, 128), mx.bfloat16, 43), (0, 2, 1, 3))
    vt = mx.transpose(draw((2, 3000, 4, 128), mx.bfloat16, 44), (0, 2, 1, 3))
    qt = draw((2, 16, 2, 128), mx.bfloat16, 45)
    g, c = both(qt, kt, vt, 128 ** -0.5)
    np.testing.assert_allclose(g, c, rtol=2e-2, atol=2e-2)
    ref = reference(qt, kt, vt, 128 ** -0.5)
    np.testing.assert_allclose(g, ref, rtol=8e-2, atol=8e-2)


def test_decode_nan_query_and_batch():
    q = np.random.default_rng(46).standard_normal((3, 8, 1, 64)).astype(
        np.float32)
    q[1, 5, 0, 7] = np.nan
    k = draw((3, 2, 5000, 64), mx.float32, 47)
    v = draw((3, 2, 5000, 64), mx.float32, 48)
    g, c = both(mx.array(q), k, v, 0.125)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(c))
    assert np.isnan(g[1, 5]).all()
    np.testing.assert_allclose(np.nan_to_num(g), np.nan_to_num(c), rtol=2e-5,
                               atol=2e-5)
