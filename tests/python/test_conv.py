"""Convolutions (conv1d/2d/3d, conv_general, conv_transpose*, convolve)
against a NumPy reference written from the definition, np.convolve and,
when importable, torch.nn.functional; gradients against finite differences
and vmap against a loop."""

import itertools

import numpy as np
import pytest

import fluxion.core as mx
from helpers import assert_close, to_np, keep64


def rng_array(shape, seed, dtype=np.float64):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def np_conv(x, w, stride=1, padding=0, kernel_dilation=1, input_dilation=1,
            groups=1, flip=False):
    """The definition, channels last, one tap at a time."""
    d = x.ndim - 2

    def per_axis(v):
        return list(v) if isinstance(v, (list, tuple)) else [v] * d

    stride, kd, idil = map(per_axis, (stride, kernel_dilation,
                                      input_dilation))
    if isinstance(padding, tuple) and len(padding) == 2 and \
            isinstance(padding[0], (list, tuple)):
        lo, hi = map(per_axis, padding)
    else:
        lo = hi = per_axis(padding)
    n, cin, cout = x.shape[0], x.shape[-1], w.shape[0]
    # Dilate, then pad.
    dil_shape = [n] + [(s - 1) * i + 1 for s, i in zip(x.shape[1:-1], idil)]
    xd = np.zeros(dil_shape + [cin], x.dtype)
    xd[(slice(None),) + tuple(slice(None, None, i) for i in idil)] = x
    xp = np.pad(xd, [(0, 0)] + list(zip(lo, hi)) + [(0, 0)])
    if flip:
        w = w[(slice(None),) + (slice(None, None, -1),) * d]
    ks = w.shape[1:-1]
    outs = [(p - (k - 1) * kk - 1) // s + 1
            for p, k, kk, s in zip(xp.shape[1:-1], ks, kd, stride)]
    g = groups
    out = np.zeros([n] + outs + [g, cout // g], np.float64)
    wg = w.reshape((g, cout // g) + ks + (cin // g,))
    for k in itertools.product(*[range(v) for v in ks]):
        sl = tuple(slice(ki * kk, ki * kk + (o - 1) * s + 1, s)
                   for ki, kk, o, s in zip(k, kd, outs, stride))
        patch = xp[(slice(None),) + sl]
        patch = patch.reshape(patch.shape[:-1] + (g, cin // g))
        tap = wg[(slice(None), slice(None)) + k]  # [g, cout_g, cin_g]
        out += np.einsum("...gc,goc->...go", patch, tap)
    return out.reshape([n] + outs + [cout])


def np_conv_transpose(x, w, stride, padding, dilation, output_padding,
                      groups):
    """Scatter form: input i feeds output i*stride - padding + k*dilation."""
    d = x.ndim - 2
    n, cin, cout = x.shape[0], x.shape[-1], w.shape[0]
    ks = w.shape[1:-1]
    outs = [(l - 1) * stride - 2 * padding + dilation * (k - 1) + 1 +
            output_padding for l, k in zip(x.shape[1:-1], ks)]
    full = [(l - 1) * stride + dilation * (k - 1) + 1 + output_padding
            for l, k in zip(x.shape[1:-1], ks)]
    out = np.zeros([n] + full + [cout])
    g = groups
    cin_g, cout_g = cin // g, cout // g
    for i in itertools.product(*[range(v) for v in x.shape[1:-1]]):
        for k in itertools.product(*[range(v) for v in ks]):
            pos = tuple(a * stride + b * dilation for a, b in zip(i, k))
            for grp in range(g):
                xv = x[(slice(None),) + i + (slice(grp * cin_g,
                                                   (grp + 1) * cin_g),)]
                wv = w[(slice(grp * cout_g, (grp + 1) * cout_g),) + k]
                out[(slice(None),) + pos +
                    (slice(grp * cout_g, (grp + 1) * cout_g),)] += xv @ wv.T
    crop = tuple(slice(padding, padding + o) for o in outs)
    return out[(slice(None),) + crop]


CASES_2D = [
    dict(),
    dict(stride=2),
    dict(stride=(2, 1), padding=(1, 2)),
    dict(padding=1, dilation=2),
    dict(dilation=(1, 2), groups=2),
    dict(stride=2, padding=1, dilation=2, groups=4),
]


@pytest.mark.parametrize("kw", CASES_2D)
def test_conv2d_against_numpy(kw):
    x = rng_array((2, 9, 8, 4), 1)
    w = rng_array((8, 3, 2, 4 // kw.get("groups", 1)), 2)
    y = mx.conv2d(keep64(x), keep64(w), **kw)
    ref = np_conv(x, w, kw.get("stride", 1), kw.get("padding", 0),
                  kw.get("dilation", 1), 1, kw.get("groups", 1))
    assert_close(y, ref)


def test_conv1d_conv3d_against_numpy():
    x = rng_array((2, 11, 6), 3)
    w = rng_array((4, 3, 3), 4)
    assert_close(mx.conv1d(keep64(x), keep64(w), 2, 1, 2, 2),
                 np_conv(x, w, 2, 1, 2, 1, 2))
    x3 = rng_array((1, 5, 6, 4, 2), 5)
    w3 = rng_array((3, 2, 3, 2, 2), 6)
    y = mx.conv3d(keep64(x3), keep64(w3), stride=(1, 2, 1),
                  padding=(1, 0, 1), dilation=(2, 1, 1))
    assert_close(y, np_conv(x3, w3, [1, 2, 1], [1, 0, 1], [2, 1, 1]))
    assert_close(mx.conv3d(keep64(x3), keep64(w3), 2, 1),
                 np_conv(x3, w3, 2, 1))


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("flip", [False, True])
def test_conv_general_against_numpy(d, flip):
    shape = [5, 6, 4][:d]
    x = rng_array([2] + shape + [4], 7 + d)
    w = rng_array([6] + [2] * d + [2], 8 + d)
    stride = [2, 1, 3][:d]
    lo, hi = [1, 0, 2][:d], [0, 2, 1][:d]
    kd, idil = [2, 1, 1][:d], [1, 2, 2][:d]
    y = mx.conv_general(keep64(x), keep64(w), stride=stride,
                        padding=(lo, hi), kernel_dilation=kd,
                        input_dilation=idil, groups=2, flip=flip)
    assert_close(y, np_conv(x, w, stride, (lo, hi), kd, idil, 2, flip))
    # Ints and one-per-axis lists.
    y = mx.conv_general(keep64(x), keep64(w), 1, [1] * d, 2, 1, 2)
    assert_close(y, np_conv(x, w, 1, 1, 2, 1, 2))


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("stride,padding,dilation,output_padding,groups", [
    (1, 0, 1, 0, 1), (2, 1, 1, 1, 1), (3, 0, 2, 2, 2), (1, 1, 2, 1, 2)])
def test_conv_transpose_against_numpy(d, stride, padding, dilation,
                                      output_padding, groups):
    x = rng_array([2] + [3, 4, 2][:d] + [2], 20 + d)
    w = rng_array([4] + [3, 2, 2][:d] + [2 // groups], 30 + d)
    fn = [mx.conv_transpose1d, mx.conv_transpose2d, mx.conv_transpose3d][d - 1]
    y = fn(keep64(x), keep64(w), stride=stride, padding=padding,
           dilation=dilation, output_padding=output_padding, groups=groups)
    assert_close(y, np_conv_transpose(x, w, stride, padding, dilation,
                                      output_padding, groups))


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n,m", [(7, 3), (6, 4), (3, 8), (5, 5), (1, 1)])
def test_convolve_against_numpy(mode, n, m):
    a, v = rng_array(n, 40 + n), rng_array(m, 50 + m)
    assert_close(mx.convolve(keep64(a), keep64(v), mode),
                 np.convolve(a, v, mode))
    assert_close(mx.convolve(a.tolist(), v.tolist(), mode=mode),
                 np.convolve(a, v, mode).astype(np.float32), rtol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(mx.float32, 1e-5),
                                       (mx.float16, 5e-3),
                                       (mx.bfloat16, 4e-2)])
def test_dtypes(dtype, tol):
    x = rng_array((2, 7, 6, 4), 60)
    w = rng_array((4, 3, 3, 2), 61)
    xa, wa = keep64(x).astype(dtype), keep64(w).astype(dtype)
    y = mx.conv2d(xa, wa, stride=2, padding=1, groups=2)
    assert y.dtype == dtype
    ref = np_conv(to_np(xa).astype(np.float64), to_np(wa).astype(np.float64),
                  2, 1, 1, 1, 2)
    assert_close(y, ref, rtol=tol, atol=tol)


def test_strided_inputs():
    base = rng_array((4, 2, 9, 7), 62)  # [C, N, H, W]
    x = mx.transpose(keep64(base), (1, 2, 3, 0))
    wbig = rng_array((3, 6, 3, 8), 63)
    w = keep64(wbig)[:, ::2, :, ::2]
    ref = np_conv(np.transpose(base, (1, 2, 3, 0)), wbig[:, ::2, :, ::2],
                  1, 1)
    assert_close(mx.conv2d(x, w, padding=1), ref)
    assert_close(mx.conv2d(x[:, ::-1], w, padding=1),
                 np_conv(np.transpose(base, (1, 2, 3, 0))[:, ::-1],
                         wbig[:, ::2, :, ::2], 1, 1))


def test_errors():
    x = mx.zeros((2, 6, 6, 4))
    w = mx.zeros((4, 3, 3, 4))
    with pytest.raises(ValueError, match=r"\[conv2d\].*groups = 3"):
        mx.conv2d(x, w, groups=3)
    with pytest.raises(ValueError, match=r"\[conv2d\].*non-negative"):
        mx.conv2d(x, w, padding=-1)
    with pytest.raises(ValueError, match=r"\[conv2d\].*stride"):
        mx.conv2d(x, w, stride=(0, 1))
    with pytest.raises(ValueError, match=r"\[conv1d\].*dimensions"):
        mx.conv1d(x[0, 0], w[:, 0, 0])  # a 2-D input
    with pytest.raises(ValueError, match=r"\[conv2d\].*4 channels"):
        mx.conv2d(x, mx.zeros((4, 3, 3, 3)))
    with pytest.raises(ValueError, match=r"\[conv2d\].*larger than"):
        mx.conv2d(x, mx.zeros((4, 7, 3, 4)))
    with pytest.raises(ValueError, match=r"\[conv2d\].*floating-point"):
        mx.conv2d(x.astype(mx.int32), w.astype(mx.int32))
    with pytest.raises(ValueError, match=r"\[conv_general\]"):
        mx.conv_general(x, w, padding=([0, 0], [0, -1]))
    with pytest.raises(ValueError, match=r"\[conv_transpose2d\]"):
        mx.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(ValueError, match=r"\[convolve\]"):
        mx.convolve(mx.zeros((2, 2)), mx.zeros((2,)))
    with pytest.raises(ValueError, match=r"\[convolve\].*mode"):
        mx.convolve(mx.zeros((3,)), mx.zeros((2,)), "wide")
    with pytest.raises(TypeError):
        mx.conv2d(x, w, 1, 0, 1, 1, None)  # stream is keyword-only


def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


@pytest.mark.parametrize("kw", [dict(stride=2, padding=1),
                                dict(dilation=2, groups=2),
                                dict(stride=(1, 2), padding=(0, 1))])
def test_grad_finite_differences(kw):
    x = rng_array((1, 5, 6, 4), 70)
    w = rng_array((2, 2, 3, 4 // kw.get("groups", 1)), 71)
    c = rng_array(mx.conv2d(keep64(x), keep64(w), **kw).shape, 72)

    def loss(xa, wa):
        return mx.sum(mx.conv2d(xa, wa, **kw) * keep64(c))

    gx, gw = mx.grad(loss, argnums=(0, 1))(keep64(x), keep64(w))
    fx = lambda v: loss(keep64(v), keep64(w)).item()
    fw = lambda v: loss(keep64(x), keep64(v)).item()
    assert_close(gx, numeric_grad(fx, x), rtol=1e-6, atol=1e-7)
    assert_close(gw, numeric_grad(fw, w), rtol=1e-6, atol=1e-7)


def test_grad_conv_transpose_and_convolve():
    x = rng_array((1, 3, 2), 73)
    w = rng_array((2, 3, 2), 74)
    loss = lambda a, b: mx.sum(mx.sin(mx.conv_transpose1d(a, b, 2, 1, 1, 1)))
    gx = mx.grad(loss)(keep64(x), keep64(w))
    assert_close(gx, numeric_grad(lambda v: loss(keep64(v),
                                                 keep64(w)).item(), x),
                 rtol=1e-6, atol=1e-7)
    a, v = rng_array(6, 75), rng_array(3, 76)
    lc = lambda p: mx.sum(mx.square(mx.convolve(p, keep64(v), "same")))
    assert_close(mx.grad(lc)(keep64(a)),
                 numeric_grad(lambda q: lc(keep64(q)).item(), a),
                 rtol=1e-6, atol=1e-7)


def test_vmap_against_loop():
    xs = rng_array((3, 2, 6, 5, 2), 80)
    ws = rng_array((3, 4, 3, 2, 1), 81)
    w0 = ws[0]
    f = lambda x, w: mx.conv2d(x, w, stride=(2, 1), padding=1, groups=2)
    # Batched input, shared weight.
    y = mx.vmap(f, in_axes=(0, None))(keep64(xs), keep64(w0))
    assert_close(y, np.stack([np_conv(x, w0, [2, 1], 1, 1, 1, 2)
                              for x in xs]))
    # Both batched (the weight through groups), batch on another axis.
    y = mx.vmap(f, in_axes=(2, 0))(keep64(np.moveaxis(xs, 0, 2)),
                                   keep64(ws))
    assert_close(y, np.stack([np_conv(x, w, [2, 1], 1, 1, 1, 2)
                              for x, w in zip(xs, ws)]))
    # Shared input, batched weight.
    y = mx.vmap(f, in_axes=(None, 0))(keep64(xs[0]), keep64(ws))
    assert_close(y, np.stack([np_conv(xs[0], w, [2, 1], 1, 1, 1, 2)
                              for w in ws]))


def test_vmap_of_grad():
    xs = rng_array((3, 1, 5, 2), 82)
    w = rng_array((2, 3, 2), 83)
    g = mx.grad(lambda x, w: mx.sum(mx.conv1d(x, w, padding=1) ** 2),
                argnums=1)
    got = mx.vmap(g, in_axes=(0, None))(keep64(xs), keep64(w))
    want = np.stack([to_np(g(keep64(x), keep64(w))) for x in xs])
    assert_close(got, want)


# --- torch.nn.functional, when importable ---

def torch_conv(x, w, d, transpose=False, **kw):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    tx = torch.from_numpy(np.moveaxis(x, -1, 1).copy())
    if transpose:
        g = kw.get("groups", 1)
        cout, cin_g = w.shape[0], w.shape[-1]
        wt = w.reshape((g, cout // g) + w.shape[1:])
        wt = np.moveaxis(wt, -1, 1)  # [g, cin_g, cout_g, K..., ]
        wt = wt.reshape((g * cin_g, cout // g) + w.shape[1:-1])
        fn = [F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d][d - 1]
    else:
        wt = np.moveaxis(w, -1, 1)
        fn = [F.conv1d, F.conv2d, F.conv3d][d - 1]
    out = fn(tx, torch.from_numpy(np.ascontiguousarray(wt)), **kw)
    return np.moveaxis(out.numpy(), 1, -1)


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1),
                                dict(dilation=2, groups=2)])
def test_against_torch(d, kw):
    x = rng_array([2] + [7, 6, 5][:d] + [4], 90 + d)
    w = rng_array([6] + [3, 2, 2][:d] + [4 // kw.get("groups", 1)], 95 + d)
    fn = [mx.conv1d, mx.conv2d, mx.conv3d][d - 1]
    assert_close(fn(keep64(x), keep64(w), **kw), torch_conv(x, w, d, **kw))


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1,
                                             output_padding=1),
                                dict(dilation=2, groups=2, stride=3)])
def test_transpose_against_torch(d, kw):
    x = rng_array([2] + [4, 3, 3][:d] + [4], 100 + d)
    w = rng_array([6] + [3, 2, 2][:d] + [4 // kw.get("groups", 1)], 105 + d)
    fn = [mx.conv_transpose1d, mx.conv_transpose2d, mx.conv_transpose3d][d - 1]
    assert_close(fn(keep64(x), keep64(w), **kw),
                 torch_conv(x, w, d, transpose=True, **kw))


def test_grads_against_torch():
    torch = pytest.importorskip("torch")
    x = rng_array((2, 6, 7, 4), 110)
    w = rng_array((6, 3, 3, 2), 111)
    kw = dict(stride=2, padding=1, groups=2)
    tx = torch.tensor(np.moveaxis(x, -1, 1), requires_grad=True)
    tw = torch.tensor(np.moveaxis(w, -1, 1), requires_grad=True)
    torch.sum(torch.nn.functional.conv2d(tx, tw, **kw) ** 3).backward()
    gx, gw = mx.grad(lambda a, b: mx.sum(mx.conv2d(a, b, **kw) ** 3),
                     argnums=(0, 1))(keep64(x), keep64(w))
    assert_close(gx, np.moveaxis(tx.grad.numpy(), 1, -1))
    assert_close(gw, np.moveaxis(tw.grad.numpy(), 1, -1))


def test_depthwise_against_torch():
    torch = pytest.importorskip("torch")
    x = rng_array((2, 9, 8, 6), 120)
    w = rng_array((6, 3, 3, 1), 121)
    kw = dict(stride=[2, 1], padding=(1, 2), groups=6)
    tx = torch.tensor(np.moveaxis(x, -1, 1), requires_grad=True)
    tw = torch.tensor(np.moveaxis(w, -1, 1), requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, stride=(2, 1), padding=(1, 2),
                                    groups=6)
    torch.sum(torch.tanh(ty)).backward()
    assert_close(mx.conv2d(keep64(x), keep64(w), **kw),
                 np.moveaxis(ty.detach().numpy(), 1, -1))
    gx, gw = mx.grad(lambda a, b: mx.sum(mx.tanh(mx.conv2d(a, b, **kw))),
                     argnums=(0, 1))(keep64(x), keep64(w))
    assert_close(gx, np.moveaxis(tx.grad.numpy(), 1, -1))
    assert_close(gw, np.moveaxis(tw.grad.numpy(), 1, -1))
