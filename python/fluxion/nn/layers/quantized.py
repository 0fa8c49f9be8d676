"""Quantized layers and ``nn.quantize``.

Weights are stored in one of MLX's quantization formats (see
:mod:`quant_formats`): "affine" (default: ``bits``-bit integers with a scale
and a bias per group of ``group_size`` inputs), "mxfp4", "mxfp8" or
"nvfp4" (small floats with a shared scale per group). ``group_size`` and
``bits`` default to the mode's (affine: 64 and 4).
"""

import math

import fluxion.core as mx
from fluxion.nn.layers import quant_formats as qf
from fluxion.nn.layers.base import Module
from fluxion.utils import tree_map_with_path

__all__ = ["QuantizedLinear", "QuantizedEmbedding", "QQLinear", "quantize"]

_QUANT_KEYS = ("weight", "scales", "biases")


def _quantize(w, group_size, bits, mode):
    """``(w_q, scales, biases)``; biases is None for modes without them."""
    q = qf.quantize(w, group_size, bits, mode)
    return q[0], q[1], (q[2] if len(q) > 2 else None)


def _unfreeze_quantized(module, unfreeze, *args, **kwargs):
    unfreeze(*args, **kwargs)
    keys = ["weight"] if kwargs.get("keys") is not None else list(_QUANT_KEYS)
    module.freeze(keys=[k for k in keys if k in module], recurse=False)


class _Quantized(Module):
    """Shared by the quantized layers: the format and the frozen
    quantization parameters."""

    def _init_format(self, group_size, bits, mode):
        self.group_size, self.bits = qf.resolve(mode, group_size, bits)
        self.mode = mode

    def _set_quantized(self, w):
        self.weight, self.scales, biases = _quantize(
            w, self.group_size, self.bits, self.mode
        )
        if biases is not None:
            self.biases = biases
        elif "biases" in self:
            del self["biases"]

    def _freeze_quantized(self):
        # The quantized values cannot be trained; a bias can.
        self.freeze(keys=[k for k in _QUANT_KEYS if k in self], recurse=False)

    def unfreeze(self, *args, **kwargs):
        """Unfreeze as asked, except that the packed weight, which has no
        gradient, always stays frozen, and a plain ``unfreeze()`` also
        leaves the scales and biases frozen (name them in ``keys`` to train
        them)."""
        _unfreeze_quantized(self, super().unfreeze, *args, **kwargs)
        return self

    def _matmul(self, x):
        return qf.quantized_matmul(
            x,
            self["weight"],
            self["scales"],
            self.get("biases"),
            transpose=True,
            group_size=self.group_size,
            bits=self.bits,
            mode=self.mode,
        )

    def _format_repr(self):
        return (
            f"group_size={self.group_size}, bits={self.bits}, "
            f"mode={self.mode!r}"
        )


class QuantizedLinear(_Quantized):
    """A Linear layer whose weight is quantized (frozen: it has no
    gradient); the bias stays trainable.

    Args:
        input_dims (int): Input features.
        output_dims (int): Output features.
        bias (bool, optional): Learn an additive bias. Default ``True``.
        group_size (int, optional): Elements per quantization group; the
            mode's default when omitted. Default ``None``.
        bits (int, optional): Bits per element; the mode's default when
            omitted. Default ``None``.
        mode (str, optional): The quantization mode (``"affine"``,
            ``"mxfp4"``, ``"nvfp4"``, ``"mxfp8"``). Default ``'affine'``.
    """

    def __init__(
        self,
        input_dims,
        output_dims,
        bias=True,
        group_size=None,
        bits=None,
        mode="affine",
    ):
        super().__init__()
        self._init_format(group_size, bits, mode)
        scale = math.sqrt(1 / input_dims)
        self._set_quantized(
            mx.random.uniform(
                low=-scale, high=scale, shape=(output_dims, input_dims)
            )
        )
        if bias:
            self.bias = mx.zeros((output_dims,))
        self._freeze_quantized()

    def _extra_repr(self):
        out_dims, words = self.weight.shape
        return (
            f"input_dims={words * 32 // self.bits}, output_dims={out_dims}, "
            f"bias={'bias' in self}, {self._format_repr()}"
        )

    def __call__(self, x):
        x = self._matmul(x)
        if "bias" in self:
            x = x + self["bias"]
        return x

    @classmethod
    def from_linear(
        cls, linear_layer, group_size=None, bits=None, mode="affine"
    ):
        """Quantize a :class:`Linear` layer.

        Args:
            linear_layer (Linear): The layer.
            group_size (int, optional): Elements per group; the mode's default
                when omitted.
            bits (int, optional): Bits per element; the mode's default when
                omitted.
            mode (str, optional): The quantization mode. Default ``"affine"``.

        Returns:
            QuantizedLinear: The quantized layer.
        """
        out_dims, in_dims = linear_layer.weight.shape
        ql = cls.__new__(cls)
        _Quantized.__init__(ql)
        ql._init_format(group_size, bits, mode)
        ql._set_quantized(linear_layer.weight)
        if "bias" in linear_layer:
            ql.bias = linear_layer.bias
        ql._freeze_quantized()
        return ql


class QQLinear(QuantizedLinear):
    """A quantized Linear layer that also quantizes its input (MLX's
    ``QQLinear``, for the floating-point modes): the input is rounded to
    the same format along its features before the product, with a
    straight-through gradient.

    Args:
        input_dims (int): Input features.
        output_dims (int): Output features.
        bias (bool, optional): Learn an additive bias. Default ``False``.
        group_size (int, optional): Elements per quantization group; the
            mode's default when omitted. Default ``None``.
        bits (int, optional): Bits per element; the mode's default when
            omitted. Default ``None``.
        mode (str, optional): The quantization mode (``"affine"``,
            ``"mxfp4"``, ``"nvfp4"``, ``"mxfp8"``). Default ``'nvfp4'``.
    """

    def __init__(
        self,
        input_dims,
        output_dims,
        bias=False,
        group_size=None,
        bits=None,
        mode="nvfp4",
    ):
        super().__init__(input_dims, output_dims, bias, group_size, bits, mode)

    def __call__(self, x):
        x = qf.fake_quantize(x, self.group_size, self.bits, self.mode)
        return super().__call__(x)

    @classmethod
    def from_linear(
        cls, linear_layer, group_size=None, bits=None, mode="nvfp4"
    ):
        """Quantize a :class:`Linear` layer (weights and inputs).

        Args:
            linear_layer (Linear): The layer.
            group_size (int, optional): Elements per group; the mode's default
                when omitted.
            bits (int, optional): Bits per element; the mode's default when
                omitted.
            mode (str, optional): The quantization mode. Default ``"nvfp4"``.

        Returns:
            QQLinear: The quantized layer.
        """
        return super().from_linear(linear_layer, group_size, bits, mode)


class QuantizedEmbedding(_Quantized):
    """An Embedding whose table is quantized (rows are dequantized on
    lookup).

    Args:
        num_embeddings (int): Size of the vocabulary.
        dims (int): The feature size.
        group_size (int, optional): Elements per quantization group; the
            mode's default when omitted. Default ``None``.
        bits (int, optional): Bits per element; the mode's default when
            omitted. Default ``None``.
        mode (str, optional): The quantization mode (``"affine"``,
            ``"mxfp4"``, ``"nvfp4"``, ``"mxfp8"``). Default ``'affine'``.
    """

    def __init__(
        self, num_embeddings, dims, group_size=None, bits=None, mode="affine"
    ):
        super().__init__()
        self._init_format(group_size, bits, mode)
        scale = math.sqrt(1 / dims)
        self._set_quantized(
            mx.random.normal(shape=(num_embeddings, dims), scale=scale)
        )
        self.num_embeddings = num_embeddings
        self.dims = dims
        self._freeze_quantized()

    def _extra_repr(self):
        return f"{self.num_embeddings}, {self.dims}, {self._format_repr()}"

    def __call__(self, x):
        shape = x.shape
        x = x.flatten()
        biases = self["biases"][x] if "biases" in self else None
        out = qf.dequantize(
            self["weight"][x],
            self["scales"][x],
            biases,
            self.group_size,
            self.bits,
            self.mode,
        )
        return out.reshape(*shape, -1)

    def as_linear(self, x):
        """Use the quantized table as a linear layer (``x @ weight.T``).

        Args:
            x (array): Features, last axis ``dims``.

        Returns:
            array: Scores over the vocabulary.
        """
        return self._matmul(x)

    @classmethod
    def from_embedding(
        cls, embedding_layer, group_size=None, bits=None, mode="affine"
    ):
        """Quantize an :class:`Embedding` layer.

        Args:
            embedding_layer (Embedding): The layer.
            group_size (int, optional): Elements per group; the mode's default
                when omitted.
            bits (int, optional): Bits per element; the mode's default when
                omitted.
            mode (str, optional): The quantization mode. Default ``"affine"``.

        Returns:
            QuantizedEmbedding: The quantized layer.
        """
        qe = cls.__new__(cls)
        _Quantized.__init__(qe)
        qe._init_format(group_size, bits, mode)
        qe._set_quantized(embedding_layer.weight)
        qe.num_embeddings, qe.dims = embedding_layer.weight.shape
        qe._freeze_quantized()
        return qe


def quantize(
    model,
    group_size=None,
    bits=None,
    mode="affine",
    class_predicate=None,
    quantize_input=False,
):
    """Replace, in place, the leaf modules of ``model`` accepted by
    ``class_predicate(path, module)`` (default: those with a
    ``to_quantized`` method) by their quantized versions. The predicate may
    also return a dict of keyword arguments for ``to_quantized``.

    Args:
        model (Module): The model.
        group_size (int, optional): Elements per quantization group; the
            mode's default when omitted. Default ``None``.
        bits (int, optional): Bits per element; the mode's default when
            omitted. Default ``None``.
        mode (str, optional): The quantization mode (``"affine"``,
            ``"mxfp4"``, ``"nvfp4"``, ``"mxfp8"``). Default ``'affine'``.
        class_predicate (Callable, optional): ``class_predicate(path,
            module)`` selects the modules to quantize (or returns their
            parameters); every quantizable one when omitted. Default ``None``.
        quantize_input (bool, optional): Quantize the inputs too
            (``QQLinear``). Default ``False``.
    """
    if class_predicate is None:

        def class_predicate(_, m):
            return hasattr(m, "to_quantized")

    def maybe_quantize(path, m):
        choice = class_predicate(path, m)
        if not choice:
            return m
        if not hasattr(m, "to_quantized"):
            raise ValueError(
                f"[quantize] Unable to quantize model of type {type(m)}"
            )
        if isinstance(choice, bool):
            kwargs = {"group_size": group_size, "bits": bits, "mode": mode}
            if quantize_input:
                kwargs["quantize_input"] = True
            return m.to_quantized(**kwargs)
        if isinstance(choice, dict):
            return m.to_quantized(**choice)
        raise ValueError(
            "[quantize] class_predicate must return a bool or a dict of "
            f"parameters for to_quantized, got {type(choice).__name__}"
        )

    leaves = tree_map_with_path(
        maybe_quantize, model.leaf_modules(), is_leaf=Module.is_module
    )
    model.update_modules(leaves)
    return model
