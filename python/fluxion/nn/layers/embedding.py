"""Embedding lookup table."""

import math

import fluxion.core as mx
from fluxion.nn.layers.base import Module

__all__ = ["Embedding"]


class Embedding(Module):
    r"""A table of ``num_embeddings`` vectors of size ``dims``, indexed by
    integer arrays; initialised from :math:`\mathcal{N}(0, 1/\text{dims})`.

    Args:
        num_embeddings (int): Size of the vocabulary.
        dims (int): The feature size.
    """

    def __init__(self, num_embeddings, dims):
        super().__init__()
        scale = math.sqrt(1.0 / dims)
        self.weight = mx.random.normal(
            shape=(num_embeddings, dims), scale=scale
        )

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, {self.weight.shape[1]}"

    def __call__(self, x):
        return self.weight[x]

    def as_linear(self, x):
        """Use the table as a linear layer (``x @ weight.T``).

        For tied input and output embeddings.

        Args:
            x (array): Features, last axis ``dims``.

        Returns:
            array: Scores over the vocabulary.
        """
        return x @ self.weight.T

    def to_quantized(
        self, group_size=None, bits=None, mode="affine", quantize_input=False
    ):
        """The :class:`QuantizedEmbedding` equivalent of this layer.

        Args:
            group_size (int, optional): Elements per group; the mode's default
                when omitted.
            bits (int, optional): Bits per element; the mode's default when
                omitted.
            mode (str, optional): The quantization mode. Default ``"affine"``.
            quantize_input (bool, optional): Accepted for symmetry with
                :meth:`Linear.to_quantized`.

        Returns:
            QuantizedEmbedding: The quantized layer.
        """
        from fluxion.nn.layers.quantized import QuantizedEmbedding

        if quantize_input:
            raise ValueError(
                "[Embedding] quantize_input is not supported for Embedding"
            )
        return QuantizedEmbedding.from_embedding(self, group_size, bits, mode)
