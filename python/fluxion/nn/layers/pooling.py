"""Max and average pooling over channels-last inputs ``(N, *spatial, C)``
(a leading batch axis is optional).

Average pooling divides by the full window size, counting padded
positions as zeros (MLX's behaviour, PyTorch's ``count_include_pad``).
"""

import operator
from functools import reduce
from itertools import product

import fluxion.core as mx
from fluxion.nn.layers.base import Module

__all__ = [
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
]


def _ntuple(value, n, name, cls):
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) != n or not all(isinstance(v, int) for v in value):
        raise ValueError(
            f"[{cls}] {name} must be an int or a tuple of {n} ints, got "
            f"{value}"
        )
    return value


def _lowest(dtype):
    if mx.issubdtype(dtype, mx.floating):
        return float("-inf")
    if dtype == mx.bool_:
        return False
    return mx.iinfo(dtype).min


def _pool(x, kernel, stride, padding, op, pad_value):
    """Reduce windows of ``x`` with ``op`` ("max" or "mean") over the
    spatial axes, which are the ``len(kernel)`` axes before the last."""
    n = len(kernel)
    first = x.ndim - 1 - n
    if any(padding):
        widths = [(0, 0)] * x.ndim
        for i, p in enumerate(padding):
            widths[first + i] = (p, p)
        x = mx.pad(x, widths, constant_values=pad_value)
    sizes = x.shape[first : first + n]
    out = [(size - k) // s + 1 for size, k, s in zip(sizes, kernel, stride)]
    if any(o <= 0 for o in out):
        raise ValueError(
            f"[pool] The (padded) spatial shape {tuple(sizes)} is smaller "
            "than "
            f"the kernel {tuple(kernel)}"
        )
    lead = x.shape[:first]
    channels = x.shape[-1]

    if tuple(kernel) == tuple(stride):
        # Non-overlapping windows: crop to whole windows and split each
        # spatial axis into (windows, kernel); one reduction, no copies.
        crop = [slice(None)] * x.ndim
        for i, (o, k) in enumerate(zip(out, kernel)):
            crop[first + i] = slice(0, o * k)
        x = x[tuple(crop)]
        shape = list(lead)
        for o, k in zip(out, kernel):
            shape += [o, k]
        x = x.reshape(*shape, channels)
        axes = tuple(first + 2 * i + 1 for i in range(n))
        return x.max(axis=axes) if op == "max" else x.mean(axis=axes)

    # Overlapping or gapped windows: one strided view per kernel offset,
    # combined elementwise (each view is a slice, so no gather is needed
    # and the gradient is a sum of strided scatters).
    views = []
    for offset in product(*(range(k) for k in kernel)):
        index = [slice(None)] * x.ndim
        for i, (o, s) in enumerate(zip(offset, stride)):
            index[first + i] = slice(o, o + s * (out[i] - 1) + 1, s)
        views.append(x[tuple(index)])
    if op == "max":
        return reduce(mx.maximum, views)
    total = reduce(operator.add, views)
    return total / len(views)


class _Pool(Module):
    _ndim = 0
    _op = "max"

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        name = type(self).__name__
        n = self._ndim
        self._kernel_size = _ntuple(kernel_size, n, "kernel_size", name)
        self._stride = (
            self._kernel_size
            if stride is None
            else _ntuple(stride, n, "stride", name)
        )
        self._padding = _ntuple(padding, n, "padding", name)
        if any(k <= 0 for k in self._kernel_size) or any(
            s <= 0 for s in self._stride
        ):
            raise ValueError(
                f"[{name}] kernel_size and stride must be positive"
            )
        if any(p < 0 for p in self._padding):
            raise ValueError(
                f"[{name}] padding {self._padding} must be non-negative"
            )

    def _extra_repr(self):
        return (
            f"kernel_size={self._kernel_size}, stride={self._stride}, "
            f"padding={self._padding}"
        )

    def __call__(self, x):
        if x.ndim < self._ndim + 1:
            raise ValueError(
                f"[{type(self).__name__}] Expected an input with at least "
                f"{self._ndim + 1} dimensions (*spatial, C), got shape "
                f"{x.shape}"
            )
        pad_value = _lowest(x.dtype) if self._op == "max" else 0
        return _pool(
            x,
            self._kernel_size,
            self._stride,
            self._padding,
            self._op,
            pad_value,
        )


class MaxPool1d(_Pool):
    """Max pooling over ``(N, L, C)`` inputs.

    Args:
        kernel_size (int or tuple): Kernel size.
        stride (int or tuple, optional): Stride. Default ``None``.
        padding (int or tuple, optional): Zero padding. Default ``0``.
    """

    _ndim, _op = 1, "max"


class MaxPool2d(_Pool):
    """Max pooling over ``(N, H, W, C)`` inputs.

    Args:
        kernel_size (int or tuple): Kernel size.
        stride (int or tuple, optional): Stride. Default ``None``.
        padding (int or tuple, optional): Zero padding. Default ``0``.
    """

    _ndim, _op = 2, "max"


class MaxPool3d(_Pool):
    """Max pooling over ``(N, D, H, W, C)`` inputs.

    Args:
        kernel_size (int or tuple): Kernel size.
        stride (int or tuple, optional): Stride. Default ``None``.
        padding (int or tuple, optional): Zero padding. Default ``0``.
    """

    _ndim, _op = 3, "max"


class AvgPool1d(_Pool):
    """Average pooling over ``(N, L, C)`` inputs.

    Args:
        kernel_size (int or tuple): Kernel size.
        stride (int or tuple, optional): Stride. Default ``None``.
        padding (int or tuple, optional): Zero padding. Default ``0``.
    """

    _ndim, _op = 1, "mean"


class AvgPool2d(_Pool):
    """Average pooling over ``(N, H, W, C)`` inputs.

    Args:
        kernel_size (int or tuple): Kernel size.
        stride (int or tuple, optional): Stride. Default ``None``.
        padding (int or tuple, optional): Zero padding. Default ``0``.
    """

    _ndim, _op = 2, "mean"


class AvgPool3d(_Pool):
    """Average pooling over ``(N, D, H, W, C)`` inputs.

    Args:
        kernel_size (int or tuple): Kernel size.
        stride (int or tuple, optional): Stride. Default ``None``.
        padding (int or tuple, optional): Zero padding. Default ``0``.
    """

    _ndim, _op = 3, "mean"
