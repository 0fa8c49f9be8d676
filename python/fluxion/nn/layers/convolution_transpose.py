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
    """1-D transposed convolution over ``(N, L, C_in)`` inputs.

    Args:
        in_channels (int): Input channels.
        out_channels (int): Output channels.
        kernel_size (int or tuple): Kernel size.
        stride (int or tuple, optional): Stride. Default ``1``.
        padding (int or tuple, optional): Zero padding. Default ``0``.
        dilation (int or tuple, optional): Kernel dilation. Default ``1``.
        output_padding (int or tuple, optional): Added to one side of the
            output. Default ``0``.
        groups (int, optional): Channel groups. Default ``1``.
        bias (bool, optional): Learn an additive bias. Default ``True``.
    """

    _ndim = 1
    _op = staticmethod(mx.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over ``(N, H, W, C_in)`` inputs.

    Args:
        in_channels (int): Input channels.
        out_channels (int): Output channels.
        kernel_size (int or tuple): Kernel size.
        stride (int or tuple, optional): Stride. Default ``1``.
        padding (int or tuple, optional): Zero padding. Default ``0``.
        dilation (int or tuple, optional): Kernel dilation. Default ``1``.
        output_padding (int or tuple, optional): Added to one side of the
            output. Default ``0``.
        groups (int, optional): Channel groups. Default ``1``.
        bias (bool, optional): Learn an additive bias. Default ``True``.
    """

    _ndim = 2
    _op = staticmethod(mx.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over ``(N, D, H, W, C_in)`` inputs.

    Args:
        in_channels (int): Input channels.
        out_channels (int): Output channels.
        kernel_size (int or tuple): Kernel size.
        stride (int or tuple, optional): Stride. Default ``1``.
        padding (int or tuple, optional): Zero padding. Default ``0``.
        dilation (int or tuple, optional): Kernel dilation. Default ``1``.
        output_padding (int or tuple, optional): Added to one side of the
            output. Default ``0``.
        groups (int, optional): Channel groups. Default ``1``.
        bias (bool, optional): Learn an additive bias. Default ``True``.
    """

    _ndim = 3
    _op = staticmethod(mx.conv_transpose3d)
