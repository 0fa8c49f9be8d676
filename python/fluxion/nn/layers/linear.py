"""Identity, Linear and Bilinear layers."""

import math

import fluxion.core as mx
from fluxion.nn.layers.base import Module

__all__ = ["Identity", "Linear", "Bilinear"]


class Identity(Module):
    """Returns its input unchanged.

    Arguments are accepted and ignored, so it can stand in for any layer.

    Args:
        *args: Ignored.
        **kwargs: Ignored.
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def __call__(self, x):
        return x


class Linear(Module):
    r"""Affine map :math:`y = x W^T + b`.

    ``weight`` has shape ``[output_dims, input_dims]`` and, like ``bias``,
    is initialised from :math:`\mathcal{U}(-k, k)` with
    :math:`k = 1 / \sqrt{\text{input\_dims}}` (as MLX and PyTorch).

    Args:
        input_dims (int): Input features.
        output_dims (int): Output features.
        bias (bool, optional): Learn an additive bias. Default ``True``.
    """

    def __init__(self, input_dims, output_dims, bias=True):
        super().__init__()
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(
            low=-scale, high=scale, shape=(output_dims, input_dims)
        )
        if bias:
            self.bias = mx.random.uniform(
                low=-scale, high=scale, shape=(output_dims,)
            )

    def _extra_repr(self):
        return (
            f"input_dims={self.weight.shape[1]}, "
            f"output_dims={self.weight.shape[0]}, "
            f"bias={'bias' in self}"
        )

    def __call__(self, x):
        if "bias" in self:
            return mx.addmm(self["bias"], x, self["weight"].T)
        return x @ self["weight"].T

    def to_quantized(
        self, group_size=None, bits=None, mode="affine", quantize_input=False
    ):
        """The :class:`QuantizedLinear` equivalent of this layer.

        Args:
            group_size (int, optional): Elements per group; the mode's default
                when omitted.
            bits (int, optional): Bits per element; the mode's default when
                omitted.
            mode (str, optional): The quantization mode. Default ``"affine"``.
            quantize_input (bool, optional): Return a :class:`QQLinear`, which
                quantizes its input too. Default ``False``.

        Returns:
            QuantizedLinear or QQLinear: The quantized layer.
        """
        from fluxion.nn.layers.quantized import QQLinear, QuantizedLinear

        cls = QQLinear if quantize_input else QuantizedLinear
        return cls.from_linear(self, group_size, bits, mode)


class Bilinear(Module):
    r"""Bilinear map :math:`y_i = x_1^T W_i x_2 + b_i`.

    ``weight`` has shape ``[output_dims, input2_dims, input1_dims]``;
    parameters are initialised from :math:`\mathcal{U}(-k, k)` with
    :math:`k = 1 / \sqrt{\text{input1\_dims}}`.

    Args:
        input1_dims (int): Features of the first input.
        input2_dims (int): Features of the second input.
        output_dims (int): Output features.
        bias (bool, optional): Learn an additive bias. Default ``True``.
    """

    def __init__(self, input1_dims, input2_dims, output_dims, bias=True):
        super().__init__()
        scale = math.sqrt(1.0 / input1_dims)
        self.weight = mx.random.uniform(
            low=-scale,
            high=scale,
            shape=(output_dims, input2_dims, input1_dims),
        )
        if bias:
            self.bias = mx.random.uniform(
                low=-scale, high=scale, shape=(output_dims,)
            )

    def _extra_repr(self):
        out, in2, in1 = self.weight.shape
        return (
            f"input1_dims={in1}, input2_dims={in2}, output_dims={out}, "
            f"bias={'bias' in self}"
        )

    def __call__(self, x1, x2):
        out, in2, in1 = self.weight.shape
        batch_shape = x1.shape[:-1]
        # One gemm for x1 against every (output, input2) row of W, then a
        # batched vector-matrix product with x2.
        x1 = x1.reshape(-1, in1)
        x2 = x2.reshape(-1, 1, in2)
        z = x1 @ self.weight.reshape(out * in2, in1).T
        z = z.reshape(-1, out, in2).swapaxes(-2, -1)
        y = (x2 @ z).squeeze(1)
        if "bias" in self:
            y = y + self.bias
        return y.reshape(*batch_shape, out)
