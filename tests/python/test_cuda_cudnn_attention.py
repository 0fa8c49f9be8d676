"""cuDNN's fused attention behind mx.fast.scaled_dot_product_attention on
the GPU (backend/cuda/sdpa_cudnn.cpp): the forward and the fused backward
(ScaledDotProductAttentionVJP) against the CPU, for causal and unmasked
attention, head sizes 64 and 128, grouped-query heads, Lq != Lk, decoding
and transposed layouts; that they ran on cuDNN (its call counters); that
masks, sinks, float32 and head size 84 still take the other kernels and
agree;
and FLUXION_CUDNN_SDPA=0. Skipped without a GPU; the cuDNN cases skip,
with the loader's reason, where cuDNN cannot be loaded.
"""
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import fluxion.core as mx

from helpers import host, requires_gpu

pytestmark = requires_gpu

G = mx.gpu
C = mx.cpu
# Against the CPU's float32 computation of the same rounded inputs: cuDNN
# rounds the probabilities to the input type before P V, as flash kernels
# do.
TOL = {mx.float16: 4e-3, mx.bfloat16: 3e-2}


def info():
    return mx._cudnn_sdpa_info()


def needs_cudnn():
    i = info()
    if not i["loaded"]:
        pytest.skip("cuDNN not loadable: " + i["error"])


def draw(shape, dt, seed):
    return mx.array(np.random.default_rng(seed).standard_normal(shape)
                    .astype(np.float32)).astype(dt)


def attention(q, k, v, scale, mask, stream):
    return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale,
                                                mask=mask, stream=stream)


def on_cpu_f32(q, k, v, scale, mask):
    f = lambda a: mx.astype(a, mx.float32, stream=C)  # noqa: E731
    return host(attention(f(q), f(k), f(v), scale, mask, C))


def close(got, want, dt, what=""):
    # Relative to the array's magnitude: gradients are not of order one.
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=TOL[dt], atol=TOL[dt] * scale,
                               err_msg=what)


SHAPES = [  # B, Hq, Hkv, Lq, Lk, D
    (2, 4, 4, 128, 128, 64),
    (2, 8, 2, 256, 256, 128),   # grouped-query heads
    (1, 4, 4, 100, 200, 64),    # Lq != Lk, lengths off the tile sizes
    (2, 4, 2, 64, 192, 128),
    (1, 4, 4, 64, 96, 80),      # head sizes off the powers of two
    (1, 2, 2, 64, 64, 256),
]


def test_loads_where_the_wheel_is_installed():
    # A machine with cuDNN's pip wheel must load it (the wheel's folder is
    # found through sys.path, fluxion/__init__.py).
    if importlib.util.find_spec("nvidia.cudnn") is None:
        pytest.skip("no nvidia.cudnn wheel on sys.path")
    i = info()
    assert i["loaded"], i["error"]
    assert i["version"] >= 90000


@pytest.mark.parametrize("dt", [mx.bfloat16, mx.float16])
@pytest.mark.parametrize("mask", [None, "causal"])
@pytest.mark.parametrize("B,Hq,Hkv,Lq,Lk,D", SHAPES)
def test_forward_on_cudnn_matches_cpu(dt, mask, B, Hq, Hkv, Lq, Lk, D):
    needs_cudnn()
    q = draw((B, Hq, Lq, D), dt, 1)
    k = draw((B, Hkv, Lk, D), dt, 2)
    v = draw((B, Hkv, Lk, D), dt, 3)
    before = info()["forward_calls"]
    g = host(attention(q, k, v, D ** -0.5, mask, G))
    assert info()["forward_calls"] == before + 1, info()
    close(g, on_cpu_f32(q, k, v, D ** -0.5, mask), dt)


def test_decoding_and_transposed_layouts():
    needs_cudnn()
    dt = mx.bfloat16
    # One query against many keys (decoding): inference stays on the
    # split-key kernel (cuDNN would run a block per head), training takes
    # cuDNN.
    q = draw((2, 8, 1, 128), dt, 4)
    k = draw((2, 2, 1000, 128), dt, 5)
    v = draw((2, 2, 1000, 128), dt, 6)
    before = info()
    g = host(attention(q, k, v, 0.09, "causal", G))
    assert info()["forward_calls"] == before["forward_calls"]
    close(g, on_cpu_f32(q, k, v, 0.09, "causal"), dt)

    def loss(q):
        return mx.sum(mx.astype(attention(q, k, v, 0.09, "causal", G),
                                mx.float32))

    dq = host(mx.grad(loss)(q))
    after = info()
    assert after["forward_calls"] == before["forward_calls"] + 1, after
    assert after["backward_calls"] == before["backward_calls"] + 1, after
    f32 = [mx.astype(a, mx.float32, stream=C) for a in (q, k, v)]

    def loss_cpu(q):
        return mx.sum(attention(q, f32[1], f32[2], 0.09, "causal", C))

    close(dq, host(mx.grad(loss_cpu)(f32[0])), dt, "decoding dq")
    # [B, L, H, D] memory seen as [B, H, L, D] (what attention layers
    # make): read in place through its strides.
    x = draw((2, 96, 4, 64), dt, 7)
    t = mx.transpose(x, (0, 2, 1, 3))
    before = info()["forward_calls"]
    g = host(attention(t, t, t, 0.125, "causal", G))
    assert info()["forward_calls"] == before + 1
    close(g, on_cpu_f32(t, t, t, 0.125, "causal"), dt)


@pytest.mark.parametrize("dt", [mx.bfloat16, mx.float16])
@pytest.mark.parametrize("mask", [None, "causal"])
@pytest.mark.parametrize("B,Hq,Hkv,Lq,Lk,D", SHAPES)
def test_gradients_on_cudnn_match_cpu(dt, mask, B, Hq, Hkv, Lq, Lk, D):
    needs_cudnn()
    q = draw((B, Hq, Lq, D), dt, 8)
    k = draw((B, Hkv, Lk, D), dt, 9)
    v = draw((B, Hkv, Lk, D), dt, 10)
    w = draw((B, Hq, Lq, D), dt, 11)
    scale = D ** -0.5

    def loss(q, k, v):
        o = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale,
                                                 mask=mask)
        return mx.sum(mx.astype(o, mx.float32) * mx.astype(w, mx.float32))

    before = info()["backward_calls"]
    with mx.stream(G):
        got = [host(x) for x in mx.grad(loss, argnums=(0, 1, 2))(q, k, v)]
    assert info()["backward_calls"] == before + 1, info()
    # The reference: the composed rule on the CPU, in float32 from the
    # same rounded values.
    f32 = [mx.astype(a, mx.float32, stream=C) for a in (q, k, v)]
    with mx.stream(C):
        want = [host(x) for x in mx.grad(loss, argnums=(0, 1, 2))(*f32)]
    for name, a, b in zip("qkv", got, want):
        close(a, b, dt, "d" + name)


def test_value_and_grad_compiled_and_vmapped():
    needs_cudnn()
    dt = mx.bfloat16
    q = draw((3, 2, 4, 64, 64), dt, 12)
    k = draw((2, 4, 64, 64), dt, 13)

    def loss(q, k):
        o = mx.fast.scaled_dot_product_attention(q, k, k, scale=0.125,
                                                 mask="causal")
        return mx.sum(mx.astype(o, mx.float32))

    with mx.stream(G):
        f = mx.compile(mx.value_and_grad(loss, argnums=(0, 1)))
        vals, (dq, dk) = f(q[0], k)
        per = mx.vmap(mx.grad(loss), in_axes=(0, None))(q, k)
        mx.eval(vals, dq, dk, per)
    f32 = lambda a: mx.astype(a, mx.float32, stream=C)  # noqa: E731
    with mx.stream(C):
        want = mx.value_and_grad(loss, argnums=(0, 1))(f32(q[0]), f32(k))
        want_per = mx.vmap(mx.grad(loss), in_axes=(0, None))(f32(q), f32(k))
    close(host(dq), host(want[1][0]), dt, "compiled dq")
    close(host(dk), host(want[1][1]), dt, "compiled dk")
    close(host(per), host(want_per), dt, "vmapped dq")


@pytest.mark.parametrize("case", ["bool_mask", "additive_mask", "float32",
                                  "head_84", "sinks", "causal_lq_gt_lk"])
def test_other_kernels_where_cudnn_does_not_apply(case):
    dt = mx.float32 if case == "float32" else mx.bfloat16
    D = 84 if case == "head_84" else 64  # cuDNN: multiples of 8
    Lq, Lk = (96, 40) if case == "causal_lq_gt_lk" else (64, 96)
    q = draw((2, 4, Lq, D), dt, 14)
    k = draw((2, 4, Lk, D), dt, 15)
    v = draw((2, 4, Lk, D), dt, 16)
    kw = {}
    if case == "bool_mask":
        kw["mask"] = mx.array(np.random.default_rng(17).random((Lq, Lk)) > 0.3)
    elif case == "additive_mask":
        kw["mask"] = draw((Lq, Lk), dt, 18)
    elif case == "sinks":
        kw["sinks"] = draw((4,), dt, 19)
    elif case == "causal_lq_gt_lk":
        kw["mask"] = "causal"
    w = draw((2, 4, Lq, D), dt, 20)

    def loss(q, k, v):
        o = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.1, **kw)
        return mx.sum(mx.astype(o, mx.float32) * mx.astype(w, mx.float32))

    before = info()
    with mx.stream(G):
        out = host(mx.fast.scaled_dot_product_attention(q, k, v, scale=0.1,
                                                        **kw))
        grads = [host(x) for x in mx.grad(loss, argnums=(0, 1, 2))(q, k, v)]
    after = info()
    assert after["forward_calls"] == before["forward_calls"]
    assert after["backward_calls"] == before["backward_calls"]
    with mx.stream(C):
        want = host(mx.fast.scaled_dot_product_attention(q, k, v, scale=0.1,
                                                         **kw))
        want_grads = [host(x)
                      for x in mx.grad(loss, argnums=(0, 1, 2))(q, k, v)]
    tol = 1e-4 if dt == mx.float32 else 3e-2
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    for a, b in zip(grads, want_grads):
        scale = max(1.0, float(np.abs(b).max()))
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * scale)


def test_disabled_by_environment():
    script = """
import numpy as np, fluxion.core as mx
rng = np.random.default_rng(0)
q = mx.array(rng.standard_normal((2, 4, 128, 64)).astype(np.float32))
q = q.astype(mx.bfloat16)
def loss(q):
    return mx.sum(mx.astype(mx.fast.scaled_dot_product_attention(
        q, q, q, scale=0.125, mask="causal"), mx.float32))
with mx.stream(mx.gpu):
    v, g = mx.value_and_grad(loss)(q)
with mx.stream(mx.cpu):
    v2, g2 = mx.value_and_grad(loss)(q.astype(mx.float32))
i = mx._cudnn_sdpa_info()
assert i["forward_calls"] == 0 and i["backward_calls"] == 0, i
np.testing.assert_allclose(np.array(g.astype(mx.float32)), np.array(g2),
                           rtol=3e-2, atol=3e-2 * float(np.abs(np.array(g2)).max()))
print("ok")
"""
    env = dict(os.environ, FLUXION_CUDNN_SDPA="0")
    r = subprocess.run([sys.executable, "-c", script], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
