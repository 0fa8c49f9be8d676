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
        """Use the table as a linear layer (``x @ weight.T``), e.g. for
        tied input/output embeddings."""
        return x @ self.weight.T

    def to_quantized(
        self, group_size=None, bits=None, mode="affine", quantize_input=False
    ):
        """The :class:`QuantizedEmbedding` equivalent of this layer."""
        from fluxion.nn.layers.quantized import QuantizedEmbedding

        if quantize_input:
            raise ValueError(
                "[Embedding] quantize_input is not supported for Embedding"
            )
        return QuantizedEmbedding.from_embedding(self, group_size, bits, mode)
