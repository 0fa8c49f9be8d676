"""Upsampling (and downsampling) of channels-last inputs ``(N, *spatial,
C)`` by nearest, linear or cubic interpolation, optionally antialiased.

Interpolation is separable: along each spatial axis the output is a fixed
linear map of the input, so each axis is one matmul with a small
``(in, out)`` weight matrix built on the host (cached per configuration).
Weights and source positions follow PyTorch's ``F.interpolate`` with a
``scale_factor`` (computed in float32, as PyTorch does, so nearest-index
rounding agrees): cubic uses Keys' kernel with a = -0.75 (-0.5 when
antialiased); antialiased downsampling widens the kernel by the scale.
"""

import functools
import math

import numpy as np

import fluxion.core as mx
from fluxion.nn.layers.base import Module

__all__ = ["Upsample", "upsample_nearest", "upsample_linear", "upsample_cubic"]


def _source_scale(in_size, out_size, scale_factor, align_corners):
    """PyTorch's area_pixel_compute_scale, as float32."""
    if align_corners:
        return (
            np.float32((in_size - 1) / (out_size - 1))
            if out_size > 1
            else np.float32(0)
        )
    return np.float32(1.0 / scale_factor)


def _cubic_weights(t, a):
    """Keys' cubic convolution weights of the taps at -1, 0, 1, 2 for a
    fractional position ``t`` in [0, 1)."""

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@functools.lru_cache(maxsize=256)
def _weights(in_size, out_size, scale_factor, mode, align_corners, antialias):
    """The ``(in_size, out_size)`` float32 interpolation matrix of one axis
    (its transpose is applied from the right)."""
    scale = _source_scale(in_size, out_size, scale_factor, align_corners)
    w = np.zeros((out_size, in_size), dtype=np.float64)
    dst = np.arange(out_size, dtype=np.float32)

    if antialias and mode == "linear" and scale <= 1.0:
        # Upsampling: the antialiased triangle filter is exactly linear
        # interpolation (edges included), so share the plain weights.
        antialias = False
    if antialias:
        # PyTorch's separable antialiased filter: the kernel support grows
        # with the downscaling factor and taps are renormalised.
        interp_size = 2 if mode == "linear" else 4
        support = (
            interp_size * 0.5 * scale if scale >= 1.0 else interp_size * 0.5
        )
        invscale = 1.0 / scale if scale >= 1.0 else 1.0
        if mode == "linear":

            def filt(x):
                x = abs(x)
                return 1.0 - x if x < 1.0 else 0.0

        else:

            def filt(x, a=-0.5):
                x = abs(x)
                if x < 1.0:
                    return ((a + 2) * x - (a + 3)) * x * x + 1
                if x < 2.0:
                    return (((x - 5) * x + 8) * x - 4) * a
                return 0.0

        for i in range(out_size):
            center = float(scale) * (i + 0.5)
            xmin = max(int(center - support + 0.5), 0)
            xmax = min(int(center + support + 0.5), in_size)
            taps = [
                filt((j - center + 0.5) * invscale) for j in range(xmin, xmax)
            ]
            total = sum(taps)
            if total != 0.0:
                taps = [t / total for t in taps]
            w[i, xmin:xmax] = taps
        return w.T.astype(np.float32)

    if align_corners:
        src = dst * scale
    else:
        src = (dst + np.float32(0.5)) * scale - np.float32(0.5)
    if mode == "linear":
        src = np.maximum(src, np.float32(0))
        i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
        i1 = np.minimum(i0 + 1, in_size - 1)
        lam = (src - i0).astype(np.float64)
        rows = np.arange(out_size)
        np.add.at(w, (rows, i0), 1 - lam)
        np.add.at(w, (rows, i1), lam)
    else:  # cubic
        i0 = np.floor(src).astype(np.int64)
        t = (src - i0).astype(np.float64)
        for k, wk in zip(range(-1, 3), _cubic_weights(t, -0.75)):
            idx = np.clip(i0 + k, 0, in_size - 1)
            np.add.at(w, (np.arange(out_size), idx), wk)
    return w.T.astype(np.float32)


@functools.lru_cache(maxsize=256)
def _nearest_indices(in_size, out_size, scale_factor):
    scale = _source_scale(in_size, out_size, scale_factor, False)
    src = np.floor(np.arange(out_size, dtype=np.float32) * scale).astype(
        np.int64
    )
    return np.minimum(src, in_size - 1).astype(np.int32)


def _scales(x, scale_factor, name):
    spatial = x.ndim - 2
    if spatial < 1:
        raise ValueError(
            f"[{name}] Expected an input (N, *spatial, C) with at least one "
            f"spatial axis, got shape {x.shape}"
        )
    if isinstance(scale_factor, (int, float)):
        return (float(scale_factor),) * spatial
    scale_factor = tuple(float(s) for s in scale_factor)
    if len(scale_factor) != spatial:
        raise ValueError(
            f"[{name}] Got {len(scale_factor)} scale factors for an input "
            "with "
            f"{spatial} spatial axes (shape {x.shape})"
        )
    return scale_factor


def _out_size(in_size, s, name):
    out = int(in_size * s)
    if out < 1:
        raise ValueError(
            f"[{name}] Scale factor {s} maps an axis of size {in_size} to "
            f"{out}"
        )
    return out


def upsample_nearest(x, scale_factor):
    """Nearest-neighbour resampling of every spatial axis by
    ``scale_factor`` (one factor or one per axis).

    Args:
        x (array): The input, channels-last.
        scale_factor (float or tuple): Factor per spatial axis.

    Returns:
        array: The upsampled input.
    """
    for axis, s in enumerate(
        _scales(x, scale_factor, "upsample_nearest"), start=1
    ):
        in_size = x.shape[axis]
        out_size = _out_size(in_size, s, "upsample_nearest")
        if out_size == in_size and s == 1.0:
            continue
        idx = mx.array(_nearest_indices(in_size, out_size, s))
        x = mx.take(x, idx, axis=axis)
    return x


def _interpolate(x, scale_factor, mode, align_corners, antialias, name):
    scales = _scales(x, scale_factor, name)
    if not mx.issubdtype(x.dtype, mx.floating):
        x = x.astype(mx.float32)
    for axis, s in enumerate(scales, start=1):
        in_size = x.shape[axis]
        out_size = _out_size(in_size, s, name)
        w = _weights(
            in_size, out_size, s, mode, bool(align_corners), bool(antialias)
        )
        w = mx.array(w).astype(x.dtype)
        # Bring the axis last, contract it with the weights, put it back.
        y = mx.swapaxes(x, axis, -1) @ w
        x = mx.swapaxes(y, axis, -1)
    return x


def upsample_linear(x, scale_factor, align_corners=False, antialias=False):
    """(Multi-)linear resampling of every spatial axis.

    Args:
        x (array): The input, channels-last.
        scale_factor (float or tuple): Factor per spatial axis.
        align_corners (bool, optional): Align the corner pixels of input and
            output. Default ``False``.
        antialias (bool, optional): Low-pass filter when downsampling. Default
            ``False``.

    Returns:
        array: The upsampled input.
    """
    return _interpolate(
        x, scale_factor, "linear", align_corners, antialias, "upsample_linear"
    )


def upsample_cubic(x, scale_factor, align_corners=False, antialias=False):
    """(Multi-)cubic resampling of every spatial axis (Keys' kernel).

    Args:
        x (array): The input, channels-last.
        scale_factor (float or tuple): Factor per spatial axis.
        align_corners (bool, optional): Align the corner pixels of input and
            output. Default ``False``.
        antialias (bool, optional): Low-pass filter when downsampling. Default
            ``False``.

    Returns:
        array: The upsampled input.
    """
    return _interpolate(
        x, scale_factor, "cubic", align_corners, antialias, "upsample_cubic"
    )


class Upsample(Module):
    """Resample the spatial axes of ``(N, *spatial, C)`` inputs by
    ``scale_factor`` with ``mode`` "nearest", "linear" or "cubic".
    ``align_corners`` maps the corner pixels of input and output onto each
    other (linear and cubic only); ``antialias`` low-pass filters when
    downsampling (linear and cubic only).

    Args:
        scale_factor (float or tuple): Factor per spatial axis.
        mode (str, optional): The quantization mode (``"affine"``,
            ``"mxfp4"``, ``"nvfp4"``, ``"mxfp8"``). Default ``'nearest'``.
        align_corners (bool, optional): Align the corner pixels of input and
            output. Default ``False``.
        antialias (bool, optional): Low-pass filter when downsampling. Default
            ``False``.
    """

    def __init__(
        self,
        scale_factor,
        mode="nearest",
        align_corners=False,
        antialias=False,
    ):
        super().__init__()
        if mode not in ("nearest", "linear", "cubic"):
            raise ValueError(
                "[Upsample] mode must be 'nearest', 'linear' or 'cubic', got "
                f"{mode!r}"
            )
        if isinstance(scale_factor, (list, tuple)):
            self.scale_factor = tuple(float(s) for s in scale_factor)
        else:
            self.scale_factor = float(scale_factor)
        if any(
            not math.isfinite(s) or s <= 0
            for s in (
                self.scale_factor
                if isinstance(self.scale_factor, tuple)
                else (self.scale_factor,)
            )
        ):
            raise ValueError(
                f"[Upsample] scale_factor must be positive, got {scale_factor}"
            )
        self.mode = mode
        self.align_corners = align_corners
        self.antialias = antialias

    def _extra_repr(self):
        text = (
            f"scale_factor={self.scale_factor}, mode={self.mode!r}, "
            f"align_corners={self.align_corners}"
        )
        if self.antialias:
            text += ", antialias=True"
        return text

    def __call__(self, x):
        if self.mode == "nearest":
            return upsample_nearest(x, self.scale_factor)
        fn = upsample_linear if self.mode == "linear" else upsample_cubic
        return fn(x, self.scale_factor, self.align_corners, self.antialias)
