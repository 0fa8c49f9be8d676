"""The weight gradient of grouped and depthwise convolutions: one
ConvolutionWeightGrad node (issue 31) reading the input and the cotangent
as they are. Its values against finite differences for every form (1-D to
3-D, strides, padding, kernel and input dilation, flip, conv_transpose, a
channel multiplier), its own derivatives (second order), vmap against a
loop, and export round trips. On the CPU; test_cuda_conv.py compares the
GPU with the CPU."""

import io
import re

import numpy as np
import pytest

import fluxion.core as mx
from helpers import assert_close, keep64


def rng(shape, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


def node_names(*outs):
    buf = io.StringIO()
    mx.export_to_dot(buf, *outs)
    return re.findall(r'label="([A-Za-z]+)', buf.getvalue())


# (name, f(x, w), x shape, w shape)
FORMS = [
    ("conv1d depthwise stride",
     lambda x, w: mx.conv1d(x, w, stride=2, padding=1, groups=4),
     (2, 9, 4), (4, 3, 1)),
    ("conv1d multiplier dilation",
     lambda x, w: mx.conv1d(x, w, padding=2, dilation=2, groups=2),
     (2, 9, 2), (4, 3, 1)),
    ("conv2d depthwise multiplier stride",
     lambda x, w: mx.conv2d(x, w, stride=2, padding=1, groups=3),
     (2, 6, 5, 3), (6, 3, 3, 1)),
    ("conv2d groups dilation",
     lambda x, w: mx.conv2d(x, w, padding=(1, 0), dilation=(2, 1), groups=2),
     (1, 6, 6, 4), (4, 2, 3, 2)),
    ("conv3d groups",
     lambda x, w: mx.conv3d(x, w, padding=1, groups=2),
     (1, 4, 3, 4, 4), (4, 2, 2, 2, 2)),
    ("conv_general asymmetric flip",
     lambda x, w: mx.conv_general(x, w, stride=[1, 2],
                                  padding=([2, 0], [0, 1]),
                                  kernel_dilation=[2, 1], groups=2,
                                  flip=True),
     (2, 6, 7, 4), (4, 2, 3, 2)),
    ("conv_general input dilation",
     lambda x, w: mx.conv_general(x, w, stride=1, padding=([2, 1], [1, 3]),
                                  kernel_dilation=[1, 2],
                                  input_dilation=[2, 3], groups=2),
     (2, 3, 4, 4), (4, 3, 2, 2)),
    ("conv_transpose2d groups",
     lambda x, w: mx.conv_transpose2d(x, w, stride=2, padding=1, groups=2),
     (1, 3, 4, 4), (4, 3, 3, 2)),
    ("conv_transpose1d depthwise output padding",
     lambda x, w: mx.conv_transpose1d(x, w, stride=2, padding=1,
                                      output_padding=1, groups=3),
     (2, 4, 3), (3, 3, 1)),
]
IDS = [f[0] for f in FORMS]


def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def make_case(form, seed):
    _, f, xs, ws = form
    x, w = rng(xs, seed), rng(ws, seed + 1)
    c = rng(f(keep64(x), keep64(w)).shape, seed + 2)
    return f, x, w, c


@pytest.mark.parametrize("form", FORMS, ids=IDS)
def test_one_node_against_finite_differences(form):
    f, x, w, c = make_case(form, 10)

    def loss(xa, wa):
        return mx.sum(f(xa, wa) * keep64(c))

    gw = mx.grad(loss, argnums=1)(keep64(x), keep64(w))
    assert "ConvolutionWeightGrad" in node_names(gw)
    want = numeric_grad(lambda v: loss(keep64(x), keep64(v)).item(), w)
    assert_close(gw, want, rtol=1e-6, atol=1e-7)
    # float32 too (the CPU computes it in float32).
    g32 = mx.grad(loss, argnums=1)(mx.array(x, mx.float32),
                                   mx.array(w, mx.float32))
    assert g32.dtype == mx.float32
    assert_close(g32, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("form", FORMS, ids=IDS)
def test_second_order(form):
    """The node's own vjp: d/dx and d/dct of <R, wgrad(x, ct)>."""
    f, x, w, c = make_case(form, 20)
    r = rng(w.shape, 23)

    def gw(xa, ca):
        return mx.grad(lambda wa: mx.sum(f(xa, wa) * ca))(keep64(w))

    def h(xa, ca):
        return mx.sum(gw(xa, ca) * keep64(r))

    hx, hc = mx.grad(h, argnums=(0, 1))(keep64(x), keep64(c))
    assert_close(hx, numeric_grad(lambda v: h(keep64(v), keep64(c)).item(),
                                  x), rtol=1e-6, atol=1e-7)
    assert_close(hc, numeric_grad(lambda v: h(keep64(x), keep64(v)).item(),
                                  c), rtol=1e-6, atol=1e-7)
    # Forward mode through the node.
    tx, tc = rng(x.shape, 24), rng(c.shape, 25)
    _, (jv,) = mx.jvp(lambda a, b: gw(a, b), [keep64(x), keep64(c)],
                      [keep64(tx), keep64(tc)])
    eps = 1e-6
    fd = (np.array(gw(keep64(x + eps * tx), keep64(c + eps * tc))) -
          np.array(gw(keep64(x - eps * tx), keep64(c - eps * tc)))) / (2 * eps)
    assert_close(jv, fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("form", [FORMS[2], FORMS[5], FORMS[7]],
                         ids=[IDS[2], IDS[5], IDS[7]])
def test_vmap_against_loop(form):
    _, f, xs, ws = form
    b = 3
    x = rng((b,) + xs, 30)
    w = rng(ws, 31)
    c = rng((b,) + f(keep64(x[0]), keep64(w)).shape, 32)

    def g(xa, wa, ca):
        return mx.grad(lambda v: mx.sum(f(xa, v) * ca))(wa)

    loop = np.stack([np.array(g(keep64(x[i]), keep64(w), keep64(c[i])))
                     for i in range(b)])
    # Input and cotangent batched (per-example gradients), on other axes.
    got = mx.vmap(g, in_axes=(0, None, 1))(keep64(x), keep64(w),
                                           keep64(np.moveaxis(c, 0, 1)))
    assert_close(got, loop)
    # Only the input batched: the cotangent broadcast.
    loop1 = np.stack([np.array(g(keep64(x[i]), keep64(w), keep64(c[0])))
                      for i in range(b)])
    got = mx.vmap(g, in_axes=(0, None, None))(keep64(x), keep64(w),
                                              keep64(c[0]))
    assert_close(got, loop1)


def test_export_round_trip(tmp_path):
    path = str(tmp_path / "wgrad.fxfn")
    _, f, xs, ws = FORMS[5]
    x, w = rng(xs, 40), rng(ws, 41)

    def fun(xa, wa):
        return mx.grad(lambda v: mx.sum(mx.sin(f(xa, v))))(wa)

    mx.export_function(path, fun, keep64(x), keep64(w))
    with open(path, "rb") as fh:
        assert b"ConvolutionWeightGrad" in fh.read()
    (got,) = mx.import_function(path)(keep64(x), keep64(w))
    assert_close(got, fun(keep64(x), keep64(w)), rtol=0, atol=0)


def test_prints_its_parameters():
    x, w = mx.zeros((1, 5, 5, 4)), mx.zeros((4, 3, 3, 1))
    gw = mx.grad(lambda v: mx.sum(mx.conv2d(x, v, stride=2, padding=1,
                                            groups=4)))(w)
    buf = io.StringIO()
    mx.export_to_dot(buf, gw)
    assert re.search(r"ConvolutionWeightGrad", buf.getvalue())
