"""Convolution layers (channels-last, as MLX: inputs ``(N, *spatial, C)``,
weights ``(C_out, *kernel, C_in / groups)``)."""

import math

import fluxion.core as mx
from fluxion.nn.layers.base import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d"]


def _ntuple(value, n, name):
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) != n:
        raise ValueError(f"[Conv] {name} should have {n} entries, got {value}")
    return value


class _ConvNd(Module):
    """Shared by the convolution and transposed-convolution layers: the
    weight ``(C_out, *kernel, C_in / groups)`` initialised as PyTorch and MLX
    do, the per-dimension arguments, and the call."""

    _ndim = 0
    _op = None
    # Attributes beyond MLX's common ones, shown by repr in this order.
    _extra_names = ()

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
    ):
        super().__init__()
        name = type(self).__name__
        if groups <= 0 or in_channels % groups != 0:
            raise ValueError(
                f"[{name}] The number of input channels ({in_channels}) must "
                "be "
                f"divisible by the number of groups ({groups})"
            )
        if out_channels % groups != 0:
            raise ValueError(
                f"[{name}] The number of output channels ({out_channels}) "
                "must be "
                f"divisible by the number of groups ({groups})"
            )
        n = self._ndim
        kernel_size = _ntuple(kernel_size, n, "kernel_size")
        # PyTorch's and MLX's initialisation: U(-k, k), k = 1/sqrt(fan_in).
        scale = math.sqrt(1.0 / (in_channels * math.prod(kernel_size)))
        self.weight = mx.random.uniform(
            low=-scale,
            high=scale,
            shape=(out_channels, *kernel_size, in_channels // groups),
        )
        if bias:
            self.bias = mx.zeros((out_channels,))
        self.padding = self._per_dim(padding, "padding")
        self.stride = self._per_dim(stride, "stride")
        self.dilation = self._per_dim(dilation, "dilation")
        self.groups = groups

    def _per_dim(self, value, name):
        # 1-D layers keep what they were given (an int), as MLX.
        return value if self._ndim == 1 else _ntuple(value, self._ndim, name)

    # The layer's extra arguments to its op, between dilation and groups
    # (the transposed layers' output_padding).
    def _op_extras(self):
        return ()

    def _extra_repr(self):
        kernel = self.weight.shape[1:-1]
        kernel = kernel[0] if self._ndim == 1 else tuple(kernel)
        extras = "".join(
            f"{name}={getattr(self, name)}, " for name in self._extra_names
        )
        return (
            f"{self.weight.shape[-1] * self.groups}, {self.weight.shape[0]}, "
            f"kernel_size={kernel}, stride={self.stride}, "
            f"padding={self.padding}, "
            f"dilation={self.dilation}, {extras}groups={self.groups}, "
            f"bias={'bias' in self}"
        )

    def __call__(self, x):
        y = type(self)._op(
            x,
            self.weight,
            self.stride,
            self.padding,
            self.dilation,
            *self._op_extras(),
            self.groups,
        )
        if "bias" in self:
            y = y + self.bias
        return y


class Conv1d(_ConvNd):
    """1-D convolution over ``(N, L, C_in)`` inputs.

    Args:
        in_channels (int): Input channels.
        out_channels (int): Output channels.
        kernel_size (int or tuple): Kernel size.
        stride (int or tuple, optional): Stride. Default ``1``.
        padding (int or tuple, optional): Zero padding. Default ``0``.
        dilation (int or tuple, optional): Kernel dilation. Default ``1``.
        groups (int, optional): Channel groups. Default ``1``.
        bias (bool, optional): Learn an additive bias. Default ``True``.
    """

    _ndim = 1
    _op = staticmethod(mx.conv1d)


class Conv2d(_ConvNd):
    """2-D convolution over ``(N, H, W, C_in)`` inputs.

    Args:
        in_channels (int): Input channels.
        out_channels (int): Output channels.
        kernel_size (int or tuple): Kernel size.
        stride (int or tuple, optional): Stride. Default ``1``.
        padding (int or tuple, optional): Zero padding. Default ``0``.
        dilation (int or tuple, optional): Kernel dilation. Default ``1``.
        groups (int, optional): Channel groups. Default ``1``.
        bias (bool, optional): Learn an additive bias. Default ``True``.
    """

    _ndim = 2
    _op = staticmethod(mx.conv2d)


class Conv3d(_ConvNd):
    """3-D convolution over ``(N, D, H, W, C_in)`` inputs.

    Args:
        in_channels (int): Input channels.
        out_channels (int): Output channels.
        kernel_size (int or tuple): Kernel size.
        stride (int or tuple, optional): Stride. Default ``1``.
        padding (int or tuple, optional): Zero padding. Default ``0``.
        dilation (int or tuple, optional): Kernel dilation. Default ``1``.
        groups (int, optional): Channel groups. Default ``1``.
        bias (bool, optional): Learn an additive bias. Default ``True``.
    """

    _ndim = 3
    _op = staticmethod(mx.conv3d)
