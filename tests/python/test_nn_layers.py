"""Forward passes of the basic layers against NumPy / PyTorch, and their
gradients against finite differences."""

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn
from nn_check import check_module_grads

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - torch is a Debian dependency
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")
RNG = np.random.default_rng(0)


def npa(x):
    return np.array(x)


def rand(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def nhwc_to_nchw(x):
    return np.moveaxis(x, -1, 1)


def nchw_to_nhwc(x):
    return np.moveaxis(x, 1, -1)


def test_identity_and_sequential_with_callables():
    x = mx.array(rand(3, 2))
    assert nn.Identity(1, key="ignored")(x) is x
    seq = nn.Sequential(nn.Linear(2, 3), nn.relu, nn.Linear(3, 1))
    W1, b1 = npa(seq.layers[0].weight), npa(seq.layers[0].bias)
    W2, b2 = npa(seq.layers[2].weight), npa(seq.layers[2].bias)
    ref = np.maximum(npa(x) @ W1.T + b1, 0) @ W2.T + b2
    np.testing.assert_allclose(npa(seq(x)), ref, rtol=1e-5, atol=1e-6)


def test_linear_forward_init_and_grads():
    layer = nn.Linear(5, 3)
    assert layer.weight.shape == (3, 5) and layer.bias.shape == (3,)
    bound = 1 / np.sqrt(5)
    assert np.all(np.abs(npa(layer.weight)) <= bound)
    x = rand(4, 2, 5)
    np.testing.assert_allclose(
        npa(layer(mx.array(x))),
        x @ npa(layer.weight).T + npa(layer.bias),
        rtol=1e-5,
        atol=1e-6,
    )
    no_bias = nn.Linear(5, 3, bias=False)
    assert "bias" not in no_bias
    np.testing.assert_allclose(
        npa(no_bias(mx.array(x))),
        x @ npa(no_bias.weight).T,
        rtol=1e-5,
        atol=1e-6,
    )
    check_module_grads(nn.Linear(4, 3), [mx.array(rand(2, 4))])


def test_bilinear_forward_and_grads():
    layer = nn.Bilinear(3, 4, 2)
    x1, x2 = rand(5, 3), rand(5, 4)
    W, b = npa(layer.weight), npa(layer.bias)  # (out, in2, in1)
    ref = np.einsum("ni,oji,nj->no", x1, W, x2) + b
    np.testing.assert_allclose(
        npa(layer(mx.array(x1), mx.array(x2))), ref, rtol=1e-4, atol=1e-5
    )
    # Leading batch axes are kept.
    y = layer(mx.array(rand(2, 5, 3)), mx.array(rand(2, 5, 4)))
    assert y.shape == (2, 5, 2)
    check_module_grads(
        nn.Bilinear(2, 3, 2), [mx.array(rand(3, 2)), mx.array(rand(3, 3))]
    )


def test_embedding_lookup_as_linear_and_grads():
    emb = nn.Embedding(10, 4)
    idx = np.array([[1, 9, 1], [0, 3, 3]], dtype=np.int32)
    W = npa(emb.weight)
    np.testing.assert_array_equal(npa(emb(mx.array(idx))), W[idx])
    x = rand(2, 4)
    np.testing.assert_allclose(
        npa(emb.as_linear(mx.array(x))), x @ W.T, rtol=1e-5, atol=1e-6
    )
    # Repeated indices accumulate their gradients.
    g = mx.grad(lambda w: mx.take(w, mx.array(idx), axis=0).sum())(emb.weight)
    counts = np.bincount(idx.ravel(), minlength=10)[:, None] * np.ones((1, 4))
    np.testing.assert_allclose(npa(g), counts)
    check_module_grads(nn.Embedding(5, 3), [mx.array(idx % 5)])


@needs_torch
@pytest.mark.parametrize(
    "cfg",
    [
        dict(kernel_size=3),
        dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=2, dilation=2, padding=2),
        dict(kernel_size=3, groups=2, padding=1),
    ],
)
def test_conv1d_2d_3d_match_torch(cfg):
    for nd, (cls, tfn) in enumerate(
        [(nn.Conv1d, F.conv1d), (nn.Conv2d, F.conv2d), (nn.Conv3d, F.conv3d)],
        1,
    ):
        layer = cls(4, 6, **cfg)
        x = rand(2, *([7] * nd), 4)
        y = npa(layer(mx.array(x)))
        w = np.moveaxis(npa(layer.weight), -1, 1)  # (out, in/g, *k)
        ref = tfn(
            torch.from_numpy(nhwc_to_nchw(x)),
            torch.from_numpy(w),
            torch.from_numpy(npa(layer.bias)),
            stride=cfg.get("stride", 1),
            padding=cfg.get("padding", 0),
            dilation=cfg.get("dilation", 1),
            groups=cfg.get("groups", 1),
        )
        np.testing.assert_allclose(
            y, nchw_to_nhwc(ref.numpy()), rtol=1e-4, atol=1e-5
        )


def test_conv_validation_and_repr():
    with pytest.raises(ValueError, match="divisible"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="kernel_size"):
        nn.Conv2d(3, 4, (3, 3, 3))
    c = nn.Conv1d(2, 4, 3, stride=2)
    assert c.weight.shape == (4, 3, 2)
    assert "kernel_size=3, stride=2" in repr(c)


def test_conv_grads():
    check_module_grads(
        nn.Conv2d(2, 3, 3, padding=1, stride=2), [mx.array(rand(1, 5, 5, 2))]
    )
    check_module_grads(
        nn.Conv1d(2, 2, 2, dilation=2), [mx.array(rand(2, 6, 2))]
    )


@needs_torch
@pytest.mark.parametrize(
    "cfg",
    [
        dict(kernel_size=3),
        dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=2, stride=2, output_padding=1),
        dict(kernel_size=3, dilation=2),
    ],
)
def test_conv_transpose_match_torch(cfg):
    for nd, (cls, tfn) in enumerate(
        [
            (nn.ConvTranspose1d, F.conv_transpose1d),
            (nn.ConvTranspose2d, F.conv_transpose2d),
            (nn.ConvTranspose3d, F.conv_transpose3d),
        ],
        1,
    ):
        layer = cls(3, 5, **cfg)
        assert layer.weight.shape == (5, *([cfg["kernel_size"]] * nd), 3)
        x = rand(2, *([4] * nd), 3)
        y = npa(layer(mx.array(x)))
        # PyTorch's transposed weight is (in, out, *k).
        w = np.moveaxis(npa(layer.weight), [0, -1], [1, 0])
        ref = tfn(
            torch.from_numpy(nhwc_to_nchw(x)),
            torch.from_numpy(np.ascontiguousarray(w)),
            torch.from_numpy(npa(layer.bias)),
            stride=cfg.get("stride", 1),
            padding=cfg.get("padding", 0),
            output_padding=cfg.get("output_padding", 0),
            dilation=cfg.get("dilation", 1),
        )
        np.testing.assert_allclose(
            y, nchw_to_nhwc(ref.numpy()), rtol=1e-4, atol=1e-5
        )


def test_conv_transpose_grads_and_repr():
    check_module_grads(
        nn.ConvTranspose2d(2, 2, 2, stride=2), [mx.array(rand(1, 3, 3, 2))]
    )
    assert "kernel_size=(3, 5)" in repr(
        nn.ConvTranspose2d(4, 8, kernel_size=(3, 5))
    )


def _np_pool(x, k, s, p, op):
    """Reference pooling over the spatial axes of (N, *spatial, C), padding
    with -inf (max) or 0 (mean over the whole window, padding included)."""
    nd = len(k)
    pad = [(0, 0)] + [(pi, pi) for pi in p] + [(0, 0)]
    x = np.pad(x, pad, constant_values=-np.inf if op == "max" else 0)
    out_shape = [(x.shape[1 + i] - k[i]) // s[i] + 1 for i in range(nd)]
    out = np.empty((x.shape[0], *out_shape, x.shape[-1]), dtype=np.float64)
    for pos in np.ndindex(*out_shape):
        sl = tuple(
            slice(pos[i] * s[i], pos[i] * s[i] + k[i]) for i in range(nd)
        )
        win = x[(slice(None),) + sl + (slice(None),)]
        axes = tuple(range(1, 1 + nd))
        out[(slice(None),) + pos + (slice(None),)] = (
            win.max(axis=axes) if op == "max" else win.mean(axis=axes)
        )
    return out


@pytest.mark.parametrize(
    "k,s,p", [(2, None, 0), (3, 2, 1), (3, 1, 0), (2, 3, 1)]
)
def test_pooling_matches_reference(k, s, p):
    for nd, (maxc, avgc) in enumerate(
        [
            (nn.MaxPool1d, nn.AvgPool1d),
            (nn.MaxPool2d, nn.AvgPool2d),
            (nn.MaxPool3d, nn.AvgPool3d),
        ],
        1,
    ):
        x = rand(2, *([7] * nd), 3)
        kk, ss, pp = (k,) * nd, ((s or k),) * nd, (p,) * nd
        np.testing.assert_allclose(
            npa(maxc(k, s, p)(mx.array(x))),
            _np_pool(x, kk, ss, pp, "max"),
            rtol=1e-6,
        )
        np.testing.assert_allclose(
            npa(avgc(k, s, p)(mx.array(x))),
            _np_pool(x, kk, ss, pp, "mean"),
            rtol=1e-5,
            atol=1e-6,
        )


def test_pooling_irregular_unbatched_integer_and_repr():
    x = rand(9, 8, 2)  # no batch axis
    ref = _np_pool(x[None], (2, 4), (3, 1), (1, 2), "max")[0]
    np.testing.assert_allclose(
        npa(nn.MaxPool2d((2, 4), (3, 1), (1, 2))(mx.array(x))), ref
    )
    xi = np.arange(24, dtype=np.int32).reshape(1, 12, 2)
    y = nn.MaxPool1d(2)(mx.array(xi))
    assert y.dtype == mx.int32
    np.testing.assert_array_equal(npa(y), xi.reshape(1, 6, 2, 2).max(axis=2))
    assert npa(nn.AvgPool1d(2)(mx.array(xi))).dtype == np.float32
    assert (
        repr(nn.MaxPool2d(3, 2, 1))
        == "MaxPool2d(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))"
    )
    with pytest.raises(ValueError):
        nn.MaxPool2d(3)(mx.zeros((2, 3)))


def test_pooling_grads():
    # Distinct values, so the max is unique and differentiable.
    x = mx.array(RNG.permutation(50).reshape(1, 5, 5, 2).astype(np.float32))
    check_module_grads(nn.MaxPool2d(2, 1), [x])
    check_module_grads(nn.AvgPool2d(3, 2, 1), [x])
    check_module_grads(
        nn.MaxPool1d(2),
        [mx.array(RNG.permutation(12).reshape(1, 6, 2).astype(np.float32))],
    )


def _np_layer_norm(x, eps, w=None, b=None):
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    return y * w + b if w is not None else y


def test_layer_norm_rms_norm():
    x = rand(3, 4, 8) * 3 + 1
    ln = nn.LayerNorm(8)
    ln.weight = mx.array(rand(8))
    ln.bias = mx.array(rand(8))
    np.testing.assert_allclose(
        npa(ln(mx.array(x))),
        _np_layer_norm(x, 1e-5, npa(ln.weight), npa(ln.bias)),
        rtol=1e-4,
        atol=1e-5,
    )
    assert "weight" not in nn.LayerNorm(8, affine=False)
    assert "bias" not in nn.LayerNorm(8, bias=False)
    rms = nn.RMSNorm(8, eps=1e-6)
    rms.weight = mx.array(rand(8))
    ref = (
        x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6) * npa(rms.weight)
    )
    np.testing.assert_allclose(
        npa(rms(mx.array(x))), ref, rtol=1e-4, atol=1e-5
    )
    check_module_grads(nn.LayerNorm(5), [mx.array(rand(2, 5))])
    check_module_grads(nn.RMSNorm(5), [mx.array(rand(2, 5))])


@pytest.mark.parametrize(
    "cls,args",
    [
        (nn.LayerNorm, (4,)),
        (nn.RMSNorm, (4,)),
        (nn.GroupNorm, (2, 4)),
        (nn.InstanceNorm, (4,)),
        (nn.BatchNorm, (4,)),
    ],
)
def test_norm_eps_must_be_positive(cls, args):
    for eps in (0.0, -1e-5):
        with pytest.raises(ValueError, match="must be positive"):
            cls(*args, eps=eps)
    cls(*args, eps=1e-12)


@needs_torch
def test_group_norm_matches_torch_and_groups_last_mode():
    x = rand(2, 5, 5, 6)
    g = nn.GroupNorm(3, 6, pytorch_compatible=True)
    g.weight, g.bias = mx.array(rand(6)), mx.array(rand(6))
    tg = torch.nn.GroupNorm(3, 6, eps=1e-5)
    with torch.no_grad():
        tg.weight.copy_(torch.from_numpy(npa(g.weight)))
        tg.bias.copy_(torch.from_numpy(npa(g.bias)))
    ref = nchw_to_nhwc(tg(torch.from_numpy(nhwc_to_nchw(x))).detach().numpy())
    np.testing.assert_allclose(npa(g(mx.array(x))), ref, rtol=1e-4, atol=1e-5)
    # MLX's default layout: channel c is in group c % num_groups.
    g2 = nn.GroupNorm(3, 6, affine=False)
    xr = x.reshape(2, -1, 3)
    ref2 = (xr - xr.mean(1, keepdims=True)) / np.sqrt(
        xr.var(1, keepdims=True) + 1e-5
    )
    np.testing.assert_allclose(
        npa(g2(mx.array(x))), ref2.reshape(x.shape), rtol=1e-4, atol=1e-5
    )
    with pytest.raises(ValueError):
        nn.GroupNorm(4, 6)
    check_module_grads(
        nn.GroupNorm(2, 4, pytorch_compatible=True), [mx.array(rand(2, 3, 4))]
    )


@needs_torch
def test_instance_norm_matches_torch_and_half_precision():
    x = rand(2, 4, 5, 3)
    inorm = nn.InstanceNorm(3, affine=True)
    inorm.weight, inorm.bias = mx.array(rand(3)), mx.array(rand(3))
    t = torch.nn.InstanceNorm2d(3, affine=True)
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(npa(inorm.weight)))
        t.bias.copy_(torch.from_numpy(npa(inorm.bias)))
    ref = nchw_to_nhwc(t(torch.from_numpy(nhwc_to_nchw(x))).detach().numpy())
    np.testing.assert_allclose(
        npa(inorm(mx.array(x))), ref, rtol=1e-4, atol=1e-5
    )
    # float16 inputs whose squares overflow float16 still normalize.
    big = mx.array((np.sign(rand(1, 4, 4, 2)) * 600).astype(np.float16))
    y = nn.InstanceNorm(2)(big)
    assert y.dtype == mx.float16 and np.isfinite(npa(y)).all()
    assert (
        repr(nn.InstanceNorm(3)) == "InstanceNorm(3, eps=1e-05, affine=False)"
    )
    with pytest.raises(ValueError, match="spatial"):
        nn.InstanceNorm(3)(mx.zeros((2, 3)))
    check_module_grads(
        nn.InstanceNorm(2, affine=True), [mx.array(rand(2, 4, 2))]
    )


@needs_torch
@pytest.mark.parametrize("shape", [(6, 4), (3, 5, 4), (2, 3, 3, 4)])
def test_batch_norm_train_eval_matches_torch(shape):
    x1, x2 = rand(*shape) * 2 + 1, rand(*shape)
    bn = nn.BatchNorm(4, momentum=0.2)
    bn.weight, bn.bias = mx.array(rand(4)), mx.array(rand(4))
    tcls = {
        2: torch.nn.BatchNorm1d,
        3: torch.nn.BatchNorm1d,
        4: torch.nn.BatchNorm2d,
    }
    t = tcls[len(shape)](4, momentum=0.2)
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(npa(bn.weight)))
        t.bias.copy_(torch.from_numpy(npa(bn.bias)))

    def tforward(x):
        xt = torch.from_numpy(np.moveaxis(x, -1, 1).copy())
        return np.moveaxis(t(xt).detach().numpy(), 1, -1)

    for x in (x1, x2):  # two training steps
        np.testing.assert_allclose(
            npa(bn(mx.array(x))), tforward(x), rtol=1e-4, atol=1e-5
        )
    np.testing.assert_allclose(
        npa(bn.running_mean), t.running_mean.numpy(), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        npa(bn.running_var), t.running_var.numpy(), rtol=1e-5, atol=1e-6
    )
    bn.eval()
    t.eval()
    np.testing.assert_allclose(
        npa(bn(mx.array(x1))), tforward(x1), rtol=1e-4, atol=1e-5
    )


def test_batch_norm_parameters_and_errors():
    bn = nn.BatchNorm(3)
    assert {"running_mean", "running_var", "weight", "bias"} <= set(
        bn.parameters()
    )
    assert set(bn.trainable_parameters()) == {"weight", "bias"}
    bn.unfreeze()
    assert set(bn.trainable_parameters()) == {"weight", "bias"}
    with pytest.raises(ValueError, match="more than 1 value"):
        bn(mx.zeros((1, 3)))
    with pytest.raises(ValueError, match="2 to 4 dimensions"):
        bn(mx.zeros((2, 2, 2, 2, 3)))
    # Without running statistics, eval mode uses the batch statistics.
    nb = nn.BatchNorm(3, track_running_stats=False, affine=False).eval()
    x = rand(5, 3)
    np.testing.assert_allclose(
        npa(nb(mx.array(x))),
        (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5),
        rtol=1e-4,
        atol=1e-5,
    )
    check_module_grads(nn.BatchNorm(3), [mx.array(rand(4, 3))])


def test_dropout_train_and_eval():
    x = mx.ones((200, 100))
    d = nn.Dropout(0.3)
    y = npa(d(x))
    kept = y != 0
    assert 0.66 < kept.mean() < 0.74
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
    d.eval()
    assert d(x) is x
    for dtype in (mx.float16, mx.bfloat16):
        assert nn.Dropout(0.5)(x.astype(dtype)).dtype == dtype
    with pytest.raises(ValueError, match="not in"):
        nn.Dropout(1.0)
    assert nn.Dropout(0.0)(x) is x


def test_dropout2d_3d_drop_whole_channels():
    x = mx.ones((8, 5, 5, 16))
    y = npa(nn.Dropout2d(0.5)(x))
    per_channel = y.reshape(8, 25, 16)
    # Each (sample, channel) is either all kept or all dropped.
    assert np.all((per_channel == 0).all(1) | (per_channel == 2).all(1))
    assert 0 < (per_channel == 0).all(1).mean() < 1
    y3 = npa(nn.Dropout3d(0.5)(mx.ones((4, 3, 3, 3, 8)))).reshape(4, 27, 8)
    assert np.all((y3 == 0).all(1) | (y3 == 2).all(1))
    with pytest.raises(ValueError):
        nn.Dropout2d()(mx.ones((2, 3)))
    with pytest.raises(ValueError):
        nn.Dropout3d()(mx.ones((2, 3, 3)))
