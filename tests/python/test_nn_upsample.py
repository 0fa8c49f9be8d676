"""nn.Upsample against PyTorch's F.interpolate and hand-computed values,
with finite-difference gradients."""

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn
from nn_check import check_module_grads

torch = pytest.importorskip("torch")
F = torch.nn.functional
RNG = np.random.default_rng(4)


def interpolate(x, scale, mode, align_corners, antialias=False):
    t = torch.from_numpy(np.moveaxis(x, -1, 1).copy())
    tmode = {
        "nearest": "nearest",
        "linear": {3: "linear", 4: "bilinear", 5: "trilinear"},
        "cubic": "bicubic",
    }[mode]
    if isinstance(tmode, dict):
        tmode = tmode[x.ndim]
    y = F.interpolate(
        t,
        scale_factor=scale,
        mode=tmode,
        align_corners=None if mode == "nearest" else align_corners,
        antialias=antialias,
    )
    return np.moveaxis(y.numpy(), 1, -1)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize(
    "shape,scale",
    [((5, 6), (2.0, 3.0)), ((8, 8), (0.5, 0.25)), ((7, 5), (1.5, 1.0))],
)
def test_2d_matches_torch(mode, align_corners, shape, scale):
    if mode == "nearest" and align_corners:
        pytest.skip("align_corners does not apply to nearest")
    x = RNG.normal(size=(2, *shape, 3)).astype(np.float32)
    up = nn.Upsample(scale, mode=mode, align_corners=align_corners)
    y = np.array(up(mx.array(x)))
    ref = interpolate(x, scale, mode, align_corners)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_1d_and_3d_match_torch(mode):
    x1 = RNG.normal(size=(2, 7, 3)).astype(np.float32)
    np.testing.assert_allclose(
        np.array(nn.Upsample(2.0, mode=mode)(mx.array(x1))),
        interpolate(x1, 2.0, mode, False),
        rtol=1e-5,
        atol=1e-6,
    )
    x3 = RNG.normal(size=(1, 3, 4, 5, 2)).astype(np.float32)
    np.testing.assert_allclose(
        np.array(nn.Upsample((2.0, 1.0, 0.6), mode=mode)(mx.array(x3))),
        interpolate(x3, (2.0, 1.0, 0.6), mode, False),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize(
    "shape,scale", [((16, 16), 0.5), ((12, 20), (0.25, 0.5)), ((6, 6), 2.0)]
)
def test_antialias_matches_torch(mode, shape, scale):
    x = RNG.normal(size=(1, *shape, 2)).astype(np.float32)
    y = np.array(nn.Upsample(scale, mode=mode, antialias=True)(mx.array(x)))
    np.testing.assert_allclose(
        y,
        interpolate(x, scale, mode, False, antialias=True),
        rtol=1e-5,
        atol=1e-5,
    )


def test_hand_computed_values_dtypes_and_repr():
    x = mx.arange(1, 5).reshape(1, 2, 2, 1)  # integer input
    y = nn.Upsample(2, mode="linear")(x)
    assert y.dtype == mx.float32
    np.testing.assert_allclose(np.array(y)[0, 0, :, 0], [1, 1.25, 1.75, 2])
    y = nn.Upsample(2, mode="nearest")(x)
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(np.array(y)[0, :, 0, 0], [1, 1, 3, 3])
    y = nn.Upsample((0.5, 2), mode="linear", align_corners=True)(
        x.astype(mx.float32)
    )
    np.testing.assert_allclose(
        np.array(y)[0, 0, :, 0], [1, 4 / 3, 5 / 3, 2], rtol=1e-6
    )
    assert (
        nn.Upsample(2, mode="cubic")(x.astype(mx.float16)).dtype == mx.float16
    )
    assert (
        repr(nn.Upsample(2))
        == "Upsample(scale_factor=2.0, mode='nearest', align_corners=False)"
    )
    with pytest.raises(ValueError):
        nn.Upsample(2, mode="area")
    with pytest.raises(ValueError):
        nn.Upsample((2, 2, 2))(mx.zeros((1, 4, 4, 1)))


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_gradients(mode):
    x = mx.array(RNG.normal(size=(1, 3, 4, 2)).astype(np.float32))
    check_module_grads(nn.Upsample((2.0, 1.5), mode=mode), [x])
