"""Transposed convolution layers (channels-last, weights
``(C_out, *kernel, C_in / groups)`` as MLX)."""

import fluxion.core as mx
from fluxion.nn.layers.convolution import _ConvNd

__all__ = ["ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


class _ConvTransposeNd(_ConvNd):
    _extra_names = ("output_padding",)

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
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
        )
        self.output_padding = self._per_dim(output_padding, "output_padding")

    def _op_extras(self):
        return (self.output_padding,)


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
