"""Quantized layers and ``nn.quantize`` (MLX's affine scheme: per group of
``group_size`` weights along the input axis, ``w ~ scale * q + bias`` with
``bits``-bit integers packed into uint32)."""

import math

import fluxion.core as mx
from fluxion.nn.layers.base import Module
from fluxion.utils import tree_map_with_path

__all__ = ["QuantizedLinear", "QuantizedEmbedding", "quantize"]


def _quantize(w, group_size, bits, mode):
    """``(w_q, scales, biases)``; biases is None for modes without them."""
    if mode != "affine":
        raise ValueError(
            f"[quantize] Quantization mode {mode!r} is not supported; Fluxion's "
            "mx.quantize implements the 'affine' mode"
        )
    return mx.quantize(w, group_size, bits)


_QUANT_KEYS = ("weight", "scales", "biases")


def _unfreeze_quantized(module, unfreeze, *args, **kwargs):
    unfreeze(*args, **kwargs)
    keys = ["weight"] if kwargs.get("keys") is not None else list(_QUANT_KEYS)
    module.freeze(keys=[k for k in keys if k in module], recurse=False)


class QuantizedLinear(Module):
    """A Linear layer whose weight is quantized. The quantized weight, its
    scales and biases are frozen (they are not differentiable); the bias
    and any sub-modules stay trainable."""

    def __init__(self, input_dims, output_dims, bias=True, group_size=64, bits=4,
                 mode="affine"):
        super().__init__()
        self.group_size = group_size
        self.bits = bits
        self.mode = mode
        scale = math.sqrt(1 / input_dims)
        weight = mx.random.uniform(low=-scale, high=scale, shape=(output_dims, input_dims))
        self.weight, self.scales, self.biases = _quantize(weight, group_size, bits, mode)
        if bias:
            self.bias = mx.zeros((output_dims,))
        # The quantized values cannot be trained; the bias can.
        self.freeze(keys=[k for k in _QUANT_KEYS if k in self], recurse=False)

    def unfreeze(self, *args, **kwargs):
        """Unfreeze as asked, except that the packed weight, which has no
        gradient, always stays frozen, and a plain ``unfreeze()`` also
        leaves the scales and biases frozen (name them in ``keys`` to train
        them)."""
        _unfreeze_quantized(self, super().unfreeze, *args, **kwargs)
        return self

    def _extra_repr(self):
        out_dims, in_dims = self.weight.shape
        in_dims = in_dims * 32 // self.bits
        return (
            f"input_dims={in_dims}, output_dims={out_dims}, bias={'bias' in self}, "
            f"group_size={self.group_size}, bits={self.bits}, mode={self.mode!r}"
        )

    def __call__(self, x):
        x = mx.quantized_matmul(
            x,
            self["weight"],
            scales=self["scales"],
            biases=self["biases"],
            transpose=True,
            group_size=self.group_size,
            bits=self.bits,
        )
        if "bias" in self:
            x = x + self["bias"]
        return x

    @classmethod
    def from_linear(cls, linear_layer, group_size=64, bits=4, mode="affine"):
        """Quantize a :class:`Linear` layer."""
        out_dims, in_dims = linear_layer.weight.shape
        ql = cls(in_dims, out_dims, False, group_size, bits, mode)
        ql.weight, ql.scales, ql.biases = _quantize(
            linear_layer.weight, group_size, bits, mode
        )
        if "bias" in linear_layer:
            ql.bias = linear_layer.bias
        return ql


class QuantizedEmbedding(Module):
    """An Embedding whose table is quantized (rows are dequantized on
    lookup)."""

    def __init__(self, num_embeddings, dims, group_size=64, bits=4, mode="affine"):
        super().__init__()
        self.group_size = group_size
        self.bits = bits
        self.mode = mode
        scale = math.sqrt(1 / dims)
        weight = mx.random.normal(shape=(num_embeddings, dims), scale=scale)
        self.weight, self.scales, self.biases = _quantize(weight, group_size, bits, mode)
        self.num_embeddings = num_embeddings
        self.dims = dims
        # The quantized values cannot be trained; the bias can.
        self.freeze(keys=[k for k in _QUANT_KEYS if k in self], recurse=False)

    def unfreeze(self, *args, **kwargs):
        """As :meth:`QuantizedLinear.unfreeze`."""
        _unfreeze_quantized(self, super().unfreeze, *args, **kwargs)
        return self

    def _extra_repr(self):
        return (
            f"{self.num_embeddings}, {self.dims}, group_size={self.group_size}, "
            f"bits={self.bits}, mode={self.mode!r}"
        )

    def __call__(self, x):
        shape = x.shape
        x = x.flatten()
        out = mx.dequantize(
            self["weight"][x],
            scales=self["scales"][x],
            biases=self["biases"][x],
            group_size=self.group_size,
            bits=self.bits,
        )
        return out.reshape(*shape, -1)

    def as_linear(self, x):
        """Use the quantized table as a linear layer (``x @ weight.T``)."""
        return mx.quantized_matmul(
            x,
            self["weight"],
            scales=self["scales"],
            biases=self["biases"],
            transpose=True,
            group_size=self.group_size,
            bits=self.bits,
        )

    @classmethod
    def from_embedding(cls, embedding_layer, group_size=64, bits=4, mode="affine"):
        """Quantize an :class:`Embedding` layer."""
        num_embeddings, dims = embedding_layer.weight.shape
        qe = cls(num_embeddings, dims, group_size, bits, mode)
        qe.weight, qe.scales, qe.biases = _quantize(
            embedding_layer.weight, group_size, bits, mode
        )
        return qe


def quantize(model, group_size=64, bits=4, mode="affine", class_predicate=None,
             quantize_input=False):
    """Replace, in place, the leaf modules of ``model`` accepted by
    ``class_predicate(path, module)`` (default: those with a
    ``to_quantized`` method) by their quantized versions. The predicate may
    also return a dict of keyword arguments for ``to_quantized``."""
    if class_predicate is None:

        def class_predicate(_, m):
            return hasattr(m, "to_quantized")

    def maybe_quantize(path, m):
        choice = class_predicate(path, m)
        if not choice:
            return m
        if not hasattr(m, "to_quantized"):
            raise ValueError(f"[quantize] Unable to quantize model of type {type(m)}")
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
