"""Transposed convolution layers (channels-last, weights
``(C_out, *kernel, C_in / groups)`` as MLX)."""

import math

import fluxion.core as mx
from fluxion.nn.layers.base import Module
from fluxion.nn.layers.convolution import _ntuple

__all__ = ["ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


class _ConvTransposeNd(Module):
    _ndim = 0
    _op = None

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        output_padding=0,
        groups=1,
        bias=True,
    ):
        super().__init__()
        name = type(self).__name__
        if (
            groups <= 0
            or in_channels % groups != 0
            or out_channels % groups != 0
        ):
            raise ValueError(
                f"[{name}] The numbers of input ({in_channels}) and output "
                f"({out_channels}) channels must be divisible by the number "
                "of "
                f"groups ({groups})"
            )
        n = self._ndim
        kernel_size = _ntuple(kernel_size, n, "kernel_size")
        scale = math.sqrt(1.0 / (in_channels * math.prod(kernel_size)))
        self.weight = mx.random.uniform(
            low=-scale,
            high=scale,
            shape=(out_channels, *kernel_size, in_channels // groups),
        )
        if bias:
            self.bias = mx.zeros((out_channels,))
        self.padding = padding if n == 1 else _ntuple(padding, n, "padding")
        self.stride = stride if n == 1 else _ntuple(stride, n, "stride")
        self.dilation = (
            dilation if n == 1 else _ntuple(dilation, n, "dilation")
        )
        self.output_padding = (
            output_padding
            if n == 1
            else _ntuple(output_padding, n, "output_padding")
        )
        self.groups = groups

    def _extra_repr(self):
        kernel = self.weight.shape[1:-1]
        kernel = kernel[0] if self._ndim == 1 else tuple(kernel)
        return (
            f"{self.weight.shape[-1] * self.groups}, {self.weight.shape[0]}, "
            f"kernel_size={kernel}, stride={self.stride}, "
            f"padding={self.padding}, "
            f"dilation={self.dilation}, output_padding={self.output_padding}, "
            f"groups={self.groups}, bias={'bias' in self}"
        )

    def __call__(self, x):
        y = type(self)._op(
            x,
            self.weight,
            self.stride,
            self.padding,
            self.dilation,
            self.output_padding,
            self.groups,
        )
        if "bias" in self:
            y = y + self.bias
        return y


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over ``(N, L, C_in)`` inputs."""

    _ndim = 1
    _op = staticmethod(mx.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over ``(N, H, W, C_in)`` inputs."""

    _ndim = 2
    _op = staticmethod(mx.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over ``(N, D, H, W, C_in)`` inputs."""

    _ndim = 3
    _op = staticmethod(mx.conv_transpose3d)
