"""mx.fast against NumPy references written here (and torch where present):
values over dtypes and layouts, gradients against finite differences, vmap
against a loop, errors."""

import numpy as np
import pytest

import fluxion.core as mx

from helpers import to_np, keep64

RNG = np.random.default_rng(0)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------- references


def np_layer_norm(x, w, b, eps):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def np_rms_norm(x, w, eps):
    x = x.astype(np.float64)
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return y * w if w is not None else y


def np_rope(x, dims, traditional, base, scale, offset, freqs=None):
    x = x.astype(np.float64)
    L = x.shape[-2]
    half = dims // 2
    inv = (1.0 / np.asarray(freqs, np.float64) if freqs is not None
           else base ** (-2.0 * np.arange(half) / dims))
    off = np.asarray(offset)
    pos = (off.reshape(-1, 1) + np.arange(L)) * scale  # [1 or X0, L]
    th = pos[..., None] * inv  # [1 or X0, L, half]
    if off.size > 1:
        th = th.reshape((x.shape[0],) + (1,) * (x.ndim - 3) + th.shape[1:])
    else:
        th = th[0]
    c, s = np.cos(th), np.sin(th)
    y = x.copy()
    if traditional:
        x1, x2 = x[..., 0:dims:2], x[..., 1:dims:2]
        y[..., 0:dims:2] = x1 * c - x2 * s
        y[..., 1:dims:2] = x1 * s + x2 * c
    else:
        x1, x2 = x[..., :half], x[..., half:dims]
        y[..., :half] = x1 * c - x2 * s
        y[..., half:dims] = x1 * s + x2 * c
    return y


def np_sdpa(q, k, v, scale, mask=None, sinks=None):
    """MLX's attention: hidden scores (boolean or causal) are the lowest
    finite value, so a row that sees no key is uniform; sinks add one logit
    per head that attends to no value."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k = np.repeat(k, rep, axis=1)
    v = np.repeat(v, rep, axis=1)
    s = scale * q @ np.swapaxes(k, -1, -2)
    lq, lk = q.shape[2], k.shape[2]
    low = np.finfo(np.float64).min
    if isinstance(mask, str):
        keep = np.arange(lk)[None, :] <= np.arange(lq)[:, None] + lk - lq
        s = np.where(keep, s, low)
    elif mask is not None and mask.dtype == np.bool_:
        s = np.where(mask, s, low)
    elif mask is not None:
        s = s + mask
    if sinks is not None:
        col = np.broadcast_to(
            np.asarray(sinks, np.float64)[None, :, None, None],
            s.shape[:-1] + (1,))
        s = np.concatenate([col, s], -1)
    with np.errstate(invalid="ignore"):  # rows of -inf only are nan
        s = s - s.max(-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(-1, keepdims=True)
    if sinks is not None:
        p = p[..., 1:]
    return p @ v


TOLS = {mx.float32: 2e-5, mx.float16: 5e-3, mx.bfloat16: 4e-2,
        mx.float64: 1e-10}


def check(got, want, t):
    np.testing.assert_allclose(to_np(got).astype(np.float64), want,
                               rtol=TOLS[t], atol=TOLS[t])


def as_mx(x, t):
    return keep64(x).astype(t)


# ---------------------------------------------------------------- values


@pytest.mark.parametrize("t", [mx.float32, mx.float16, mx.bfloat16,
                               mx.float64])
@pytest.mark.parametrize("D", [1, 7, 64])
def test_norms(t, D):
    x = randn(3, 4, D) * 2 + 0.5
    w, b = randn(D), randn(D)
    xm, wm, bm = as_mx(x, t), as_mx(w, t), as_mx(b, t)
    # References from the rounded inputs.
    xr, wr, br = (to_np(a).astype(np.float64) for a in (xm, wm, bm))
    check(mx.fast.layer_norm(xm, wm, bm, 1e-5), np_layer_norm(xr, wr, br, 1e-5),
          t)
    check(mx.fast.layer_norm(xm, None, None, 1e-3),
          np_layer_norm(xr, None, None, 1e-3), t)
    check(mx.fast.layer_norm(xm, wm, None, eps=1e-5),
          np_layer_norm(xr, wr, None, 1e-5), t)
    check(mx.fast.rms_norm(xm, wm, 1e-5), np_rms_norm(xr, wr, 1e-5), t)
    check(mx.fast.rms_norm(xm, None, 1e-5), np_rms_norm(xr, None, 1e-5), t)


def test_norms_strided_and_leading_dims():
    x = randn(6, 2, 3, 5)
    xt = keep64(x).transpose(3, 1, 2, 0)  # last axis strided
    xn = np.transpose(x, (3, 1, 2, 0))
    w = keep64(randn(12))[::2]
    check(mx.fast.rms_norm(xt, w, 1e-6), np_rms_norm(xn, to_np(w), 1e-6),
          mx.float32)
    check(mx.fast.layer_norm(xt, w, 0.5 * mx.ones(6), 1e-6),
          np_layer_norm(xn, to_np(w), 0.5, 1e-6), mx.float32)


def test_norms_against_torch():
    torch = pytest.importorskip("torch")
    x, w, b = randn(4, 9), randn(9), randn(9)
    want = torch.nn.functional.layer_norm(
        torch.tensor(x, dtype=torch.float64), (9,),
        torch.tensor(w, dtype=torch.float64),
        torch.tensor(b, dtype=torch.float64), 1e-5).numpy()
    check(mx.fast.layer_norm(keep64(x), keep64(w), keep64(b), 1e-5),
          want, mx.float32)


@pytest.mark.parametrize("t", [mx.float32, mx.float16, mx.bfloat16,
                               mx.float64])
@pytest.mark.parametrize("traditional", [False, True])
def test_rope(t, traditional):
    x = randn(2, 3, 7, 16)
    xm = as_mx(x, t)
    xr = to_np(xm).astype(np.float64)
    tol_t = mx.float32 if t == mx.float32 else t
    for dims in (4, 16):
        for offset in (0, 5):
            got = mx.fast.rope(xm, dims, traditional=traditional, base=10000.0,
                               scale=1.0, offset=offset)
            check(got, np_rope(xr, dims, traditional, 10000.0, 1.0, offset),
                  tol_t)
    got = mx.fast.rope(xm, 8, traditional=traditional, base=500.0, scale=0.5,
                       offset=keep64([3, 11]))
    check(got, np_rope(xr, 8, traditional, 500.0, 0.5, [3, 11]), tol_t)
    freqs = np.abs(randn(4)) + 0.5
    got = mx.fast.rope(xm, 8, traditional=traditional, base=None, scale=1.0,
                       offset=2, freqs=keep64(freqs))
    check(got, np_rope(xr, 8, traditional, None, 1.0, 2, freqs), tol_t)


def test_rope_transposed_input():
    x = randn(1, 9, 4, 8)  # [B, L, H, D]
    xm = keep64(x).transpose(0, 2, 1, 3)
    got = mx.fast.rope(xm, 8, traditional=False, base=10000.0, scale=1.0,
                       offset=keep64(4))
    check(got, np_rope(np.transpose(x, (0, 2, 1, 3)), 8, False, 10000.0, 1.0,
                       4), mx.float32)


SDPA_SHAPES = [
    # B, Hq, Hkv, Lq, Lk, D, Dv
    (1, 4, 4, 16, 16, 8, 8),
    (2, 8, 2, 5, 11, 13, 6),  # GQA, Lq != Lk, D not a multiple of 8
    (1, 4, 1, 1, 50, 16, 16),  # decoding
    (1, 2, 2, 40, 40, 64, 64),  # more than one query block
    (1, 2, 1, 300, 200, 48, 40),  # large products, several chunks
]


@pytest.mark.parametrize("t", [mx.float32, mx.float16, mx.bfloat16,
                               mx.float64])
@pytest.mark.parametrize("shape", SDPA_SHAPES)
def test_sdpa(t, shape):
    B, Hq, Hk, Lq, Lk, D, Dv = shape
    q, k, v = randn(B, Hq, Lq, D), randn(B, Hk, Lk, D), randn(B, Hk, Lk, Dv)
    qm, km, vm = as_mx(q, t), as_mx(k, t), as_mx(v, t)
    qr, kr, vr = (to_np(a).astype(np.float64) for a in (qm, km, vm))
    scale = float(np.float32(1.0 / np.sqrt(D)))  # the op takes a float32
    sd = mx.fast.scaled_dot_product_attention
    check(sd(qm, km, vm, scale=scale), np_sdpa(qr, kr, vr, scale), t)
    check(sd(qm, km, vm, scale=scale, mask="causal"),
          np_sdpa(qr, kr, vr, scale, "causal"), t)
    keep = (RNG.standard_normal((Lq, Lk)) > -0.5) | (np.arange(Lk) == 0)
    check(sd(qm, km, vm, scale=scale, mask=keep64(keep)),
          np_sdpa(qr, kr, vr, scale, keep), t)
    add = as_mx(randn(B, 1, Lq, Lk), t)
    check(sd(qm, km, vm, scale=scale, mask=add),
          np_sdpa(qr, kr, vr, scale, to_np(add).astype(np.float64)), t)


def test_sdpa_transposed_inputs():
    q, k, v = randn(2, 6, 4, 8), randn(2, 6, 2, 8), randn(2, 6, 2, 8)
    tr = (0, 2, 1, 3)
    got = mx.fast.scaled_dot_product_attention(
        keep64(q).transpose(*tr), keep64(k).transpose(*tr),
        keep64(v).transpose(*tr), scale=0.3, mask="causal")
    want = np_sdpa(q.transpose(tr), k.transpose(tr), v.transpose(tr), 0.3,
                   "causal")
    check(got, want, mx.float32)


def test_sdpa_against_torch():
    torch = pytest.importorskip("torch")
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        pytest.skip("this torch has no scaled_dot_product_attention")
    q, k, v = randn(1, 4, 9, 8), randn(1, 4, 9, 8), randn(1, 4, 9, 8)
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(a, dtype=torch.float64) for a in (q, k, v)),
        is_causal=True).numpy()
    got = mx.fast.scaled_dot_product_attention(
        keep64(q), keep64(k), keep64(v), scale=8 ** -0.5, mask="causal")
    check(got, want, mx.float32)


# ---------------------------------------------------------------- grads


def finite_diff_check(f, args, argnum, eps=1e-6, tol=1e-6):
    """mx.grad(sum(f * c)) against central differences in float64."""
    c = keep64(randn(*f(*args).shape, dtype=np.float64))

    def loss(*a):
        return (f(*a) * c).sum()

    g = np.array(mx.grad(loss, argnums=argnum)(*args))
    x = np.array(args[argnum])
    num = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        for sgn in (1, -1):
            xp = x.copy()
            xp[i] += sgn * eps
            a = list(args)
            a[argnum] = keep64(xp)
            num[i] += sgn * loss(*a).item() / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=tol, atol=tol)


def f64(*shape):
    return keep64(randn(*shape, dtype=np.float64))


def test_norm_grads():
    x, w, b = f64(2, 3, 5), f64(5), f64(5)
    ln = lambda x, w, b: mx.fast.layer_norm(x, w, b, 1e-5)
    rn = lambda x, w: mx.fast.rms_norm(x, w, 1e-5)
    for i in range(3):
        finite_diff_check(ln, [x, w, b], i)
    for i in range(2):
        finite_diff_check(rn, [x, w], i)


def test_rope_grads():
    x, f = f64(2, 2, 3, 6), keep64(np.abs(randn(2, dtype=np.float64)) + 0.5)
    r = lambda x: mx.fast.rope(x, 4, traditional=True, base=10000.0,
                               scale=1.0, offset=3)
    finite_diff_check(r, [x], 0)
    rf = lambda x, f: mx.fast.rope(x, 4, traditional=False, base=None,
                                   scale=0.5, offset=1, freqs=f)
    finite_diff_check(rf, [x, f], 0)
    finite_diff_check(rf, [x, f], 1)


@pytest.mark.parametrize("mask", [None, "causal", "additive"])
def test_sdpa_grads(mask):
    q, k, v, m = f64(1, 4, 3, 5), f64(1, 2, 4, 5), f64(1, 2, 4, 3), f64(3, 4)

    def f(q, k, v, m):
        mm = m if mask == "additive" else mask
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=0.5,
                                                    mask=mm)

    for i in range(4 if mask == "additive" else 3):
        finite_diff_check(f, [q, k, v, m], i)


# ---------------------------------------------------------------- vmap


def test_vmap_matches_loop():
    x = keep64(randn(3, 2, 4, 6))
    w = keep64(randn(3, 6))
    ln = mx.vmap(lambda x, w: mx.fast.layer_norm(x, w, None, 1e-5))
    got = ln(x, w)
    for i in range(3):
        check(got[i], np.array(mx.fast.layer_norm(x[i], w[i], None, 1e-5)),
              mx.float32)
    rn = mx.vmap(lambda x: mx.fast.rms_norm(x, None, 1e-5), in_axes=2)
    got = rn(x)
    for i in range(4):
        check(got[i], np.array(mx.fast.rms_norm(x[:, :, i], None, 1e-5)),
              mx.float32)
    xr = keep64(randn(5, 2, 3, 4, 8))
    ro = mx.vmap(lambda x: mx.fast.rope(x, 8, traditional=False,
                                        base=10000.0, scale=1.0, offset=2))
    got = ro(xr)
    for i in range(5):
        check(got[i], np.array(mx.fast.rope(xr[i], 8, traditional=False,
                                            base=10000.0, scale=1.0,
                                            offset=2)), mx.float32)
    q, k, v = (keep64(randn(3, 1, 4, 5, 8)) for _ in range(3))
    sd = mx.vmap(lambda q, k, v: mx.fast.scaled_dot_product_attention(
        q, k, v, scale=0.3, mask="causal"), in_axes=(0, 0, None))
    got = sd(q, k, v[0])
    for i in range(3):
        want = mx.fast.scaled_dot_product_attention(q[i], k[i], v[0],
                                                    scale=0.3, mask="causal")
        check(got[i], np.array(want), mx.float32)


# ---------------------------------------------------------------- errors


def test_errors():
    x = mx.zeros((2, 3, 8))
    with pytest.raises(ValueError, match=r"\[rms_norm\] weight must have"):
        mx.fast.rms_norm(x, mx.ones(4), 1e-5)
    with pytest.raises(ValueError, match=r"\[layer_norm\] bias must have 1"):
        mx.fast.layer_norm(x, None, mx.ones((1, 8)), 1e-5)
    with pytest.raises(ValueError, match=r"\[rope\] dims"):
        mx.fast.rope(x, 3, traditional=False, base=1e4, scale=1.0, offset=0)
    with pytest.raises(ValueError, match=r"\[rope\] Neither base nor freqs"):
        mx.fast.rope(x, 8, traditional=False, base=None, scale=1.0, offset=0)
    with pytest.raises(TypeError):
        mx.fast.rope(x, 8, False, 1e4, 1.0, 0)  # keyword-only
    q = mx.zeros((1, 3, 4, 8))
    kv = mx.zeros((1, 2, 4, 8))
    sd = mx.fast.scaled_dot_product_attention
    with pytest.raises(ValueError, match=r"\[scaled_dot_product_attention\] "
                       r"The number of query heads \(3\)"):
        sd(q, kv, kv, scale=1.0)
    with pytest.raises(ValueError, match=r"must have 4 dimensions"):
        sd(q[0], kv[0], kv[0], scale=1.0)
    with pytest.raises(ValueError, match=r"cannot be broadcast"):
        sd(kv, kv, kv, scale=1.0, mask=mx.ones((3, 4)))
    with pytest.raises(ValueError, match=r"Invalid mask"):
        sd(kv, kv, kv, scale=1.0, mask="upper")
    with pytest.raises(TypeError):
        sd(kv, kv, kv, 1.0)


def test_sdpa_nan_scores_match_composed():
    # A NaN in a query or key makes the rows that see it NaN, as composed.
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((1, 2, 64, 16)).astype(np.float32)
               for _ in range(3))
    q[0, 1, 5, 3] = np.nan
    k[0, 0, 7, 2] = np.nan
    f = mx.fast.scaled_dot_product_attention(keep64(q), keep64(k),
                                             keep64(v), scale=0.25)
    s = (keep64(q) * 0.25) @ keep64(k).transpose(0, 1, 3, 2)
    c = mx.softmax(s, axis=-1) @ keep64(v)
    a, b = np.array(f), np.array(c)
    assert np.array_equal(np.isnan(a), np.isnan(b))
    assert np.allclose(a[~np.isnan(a)], b[~np.isnan(b)], atol=1e-5)


# ----------------------------------------------- attention sinks, hidden rows


@pytest.mark.parametrize("t", [mx.float32, mx.float16])
@pytest.mark.parametrize("lq,lk,hkv", [(1, 9, 2), (7, 33, 4), (70, 40, 1)])
def test_sdpa_sinks_against_numpy(t, lq, lk, hkv):
    q, k, v = randn(2, 4, lq, 8), randn(2, hkv, lk, 8), randn(2, hkv, lk, 5)
    sinks = 3 * randn(4)
    got = mx.fast.scaled_dot_product_attention(
        as_mx(q, t), as_mx(k, t), as_mx(v, t), scale=0.3,
        sinks=as_mx(sinks, t))
    assert got.dtype == t
    qs, ks, vs, ss = (to_np(as_mx(a, t)).astype(np.float64)
                      for a in (q, k, v, sinks))
    check(got, np_sdpa(qs, ks, vs, 0.3, sinks=ss), t)
    # With a causal mask and with a boolean mask.
    got = mx.fast.scaled_dot_product_attention(
        as_mx(q, t), as_mx(k, t), as_mx(v, t), scale=0.3, mask="causal",
        sinks=as_mx(sinks, t))
    check(got, np_sdpa(qs, ks, vs, 0.3, "causal", ss), t)


def test_sdpa_sinks_checks():
    q = mx.array(randn(1, 4, 3, 8))
    with pytest.raises(ValueError, match=r"sinks must have one value per "
                                         r"query head, shape \(4\); got "
                                         r"shape \(5\)"):
        mx.fast.scaled_dot_product_attention(q, q, q, scale=1.0,
                                             sinks=mx.zeros(5))
    with pytest.raises(ValueError, match=r"got shape \(\)"):
        mx.fast.scaled_dot_product_attention(q, q, q, scale=1.0,
                                             sinks=mx.array(0.0))
    with pytest.raises(ValueError, match=r"sinks' dtype float32 must promote "
                                         r"to the output dtype float16"):
        h = q.astype(mx.float16)
        mx.fast.scaled_dot_product_attention(h, h, h, scale=1.0,
                                             sinks=mx.zeros(4))
    # A lower-precision sink promotes.
    out = mx.fast.scaled_dot_product_attention(
        q, q, q, scale=1.0, sinks=mx.zeros(4, mx.float16))
    assert out.dtype == mx.float32


@pytest.mark.parametrize("lq", [1, 8, 40])
def test_sdpa_fully_masked_rows_are_uniform(lq):
    # mask=False everywhere: each row averages the values (MLX), no nan.
    q, k, v = randn(1, 4, lq, 16), randn(1, 4, 8, 16), randn(1, 4, 8, 16)
    out = mx.fast.scaled_dot_product_attention(
        mx.array(q), mx.array(k), mx.array(v), scale=1.0, mask=mx.array(False))
    want = np.broadcast_to(v.mean(2, keepdims=True), (1, 4, lq, 16))
    np.testing.assert_allclose(np.array(out), want, atol=1e-5)
    # Some rows hidden, others not; with sinks; causal with Lq > Lk.
    keep = RNG.random((1, 4, lq, 8)) < 0.5
    keep[:, :, 0] = False
    sinks = randn(4)
    for sk in (None, sinks):
        got = mx.fast.scaled_dot_product_attention(
            mx.array(q), mx.array(k), mx.array(v), scale=0.5,
            mask=mx.array(keep), sinks=None if sk is None else mx.array(sk))
        np.testing.assert_allclose(np.array(got),
                                   np_sdpa(q, k, v, 0.5, keep, sk), atol=1e-5)
    got = mx.fast.scaled_dot_product_attention(
        mx.array(randn(1, 4, 12, 16)), mx.array(k), mx.array(v), scale=0.5,
        mask="causal")
    assert not np.isnan(np.array(got)).any()


def test_sdpa_sinks_grads_and_vmap():
    q, k, v = randn(2, 4, 3, 6), randn(2, 2, 5, 6), randn(2, 2, 5, 4)
    sinks = randn(4)
    keep = RNG.random((2, 4, 3, 5)) < 0.6
    keep[0, 1, 2] = False  # a hidden row: its scores take no gradient

    def f(q, k, v, s):
        return mx.fast.scaled_dot_product_attention(
            q, k, v, scale=0.5, mask=mx.array(keep), sinks=s)

    def composed(q, k, v, s):
        rep = q.shape[1] // k.shape[1]
        kk, vv = mx.repeat(k, rep, 1), mx.repeat(v, rep, 1)
        sc = mx.where(mx.array(keep), 0.5 * q @ kk.transpose(0, 1, 3, 2),
                      mx.finfo(mx.float32).min)
        col = mx.broadcast_to(s[None, :, None, None], sc.shape[:-1] + (1,))
        p = mx.softmax(mx.concatenate([col, sc], -1), axis=-1)[..., 1:]
        return p @ vv

    args = [mx.array(a) for a in (q, k, v, sinks)]
    ct = mx.array(randn(2, 4, 3, 4))
    _, g1 = mx.vjp(f, args, [ct])
    _, g2 = mx.vjp(composed, args, [ct])
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(np.array(a), np.array(b), atol=1e-5)
    tans = [mx.array(randn(*a.shape)) for a in args]
    _, j1 = mx.jvp(f, args, tans)
    _, j2 = mx.jvp(composed, args, tans)
    np.testing.assert_allclose(np.array(j1[0]), np.array(j2[0]), atol=1e-5)
    # vmap over batched sinks (and everything else), against a loop.
    sb = mx.array(randn(3, 4))
    qb = mx.array(randn(3, 2, 4, 3, 6))
    vm = mx.vmap(lambda a, s: f(a, args[1], args[2], s))(qb, sb)
    loop = mx.stack([f(qb[i], args[1], args[2], sb[i]) for i in range(3)])
    np.testing.assert_allclose(np.array(vm), np.array(loop), atol=1e-5)
