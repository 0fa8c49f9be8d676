"""Multi-head attention and the Transformer family (Vaswani et al.)."""

import math

import fluxion.core as mx
from fluxion.nn.layers.activations import relu
from fluxion.nn.layers.base import Module
from fluxion.nn.layers.dropout import Dropout
from fluxion.nn.layers.linear import Linear
from fluxion.nn.layers.normalization import LayerNorm

__all__ = [
    "MultiHeadAttention",
    "TransformerEncoderLayer",
    "TransformerEncoder",
    "TransformerDecoderLayer",
    "TransformerDecoder",
    "Transformer",
]


class MultiHeadAttention(Module):
    """Multi-head scaled dot-product attention.

    Queries, keys and values are projected (to ``dims``, ``dims`` and
    ``value_dims``), split into ``num_heads`` heads, attended with
    ``mx.fast.scaled_dot_product_attention`` and projected back to
    ``value_output_dims``. ``mask`` is additive (or boolean) and broadcasts
    against ``(B, heads, Lq, Lk)``.

    Args:
        dims (int): The feature size.
        num_heads (int): Attention heads.
        query_input_dims (int, optional): Features of the queries; ``dims``
            when omitted. Default ``None``.
        key_input_dims (int, optional): Features of the keys; ``dims`` when
            omitted. Default ``None``.
        value_input_dims (int, optional): Features of the values;
            ``key_input_dims`` when omitted. Default ``None``.
        value_dims (int, optional): Features of the values inside; ``dims``
            when omitted. Default ``None``.
        value_output_dims (int, optional): Output features; ``dims`` when
            omitted. Default ``None``.
        bias (bool, optional): Learn an additive bias. Default ``False``.
    """

    def __init__(
        self,
        dims,
        num_heads,
        query_input_dims=None,
        key_input_dims=None,
        value_input_dims=None,
        value_dims=None,
        value_output_dims=None,
        bias=False,
    ):
        super().__init__()
        if dims % num_heads != 0:
            raise ValueError(
                "[MultiHeadAttention] The input feature dimensions should be "
                f"divisible by the number of heads ({dims} % {num_heads}) != 0"
            )
        query_input_dims = query_input_dims or dims
        key_input_dims = key_input_dims or dims
        value_input_dims = value_input_dims or key_input_dims
        value_dims = value_dims or dims
        value_output_dims = value_output_dims or dims
        self.num_heads = num_heads
        self.query_proj = Linear(query_input_dims, dims, bias=bias)
        self.key_proj = Linear(key_input_dims, dims, bias=bias)
        self.value_proj = Linear(value_input_dims, value_dims, bias=bias)
        self.out_proj = Linear(value_dims, value_output_dims, bias=bias)

    def __call__(self, queries, keys, values, mask=None):
        queries = self.query_proj(queries)
        keys = self.key_proj(keys)
        values = self.value_proj(values)
        h = self.num_heads
        # (B, L, h * d) -> (B, h, L, d)
        queries = mx.unflatten(queries, -1, (h, -1)).transpose(0, 2, 1, 3)
        keys = mx.unflatten(keys, -1, (h, -1)).transpose(0, 2, 1, 3)
        values = mx.unflatten(values, -1, (h, -1)).transpose(0, 2, 1, 3)
        scale = math.sqrt(1 / queries.shape[-1])
        out = mx.fast.scaled_dot_product_attention(
            queries, keys, values, scale=scale, mask=mask
        )
        out = out.transpose(0, 2, 1, 3).flatten(-2, -1)
        return self.out_proj(out)

    @staticmethod
    def create_additive_causal_mask(N, dtype=mx.float32):
        """An additive causal mask.

        0 on and below the diagonal and the dtype's most negative finite value
        above (finite, so that a fully masked row gives no NaN even in float16).

        Args:
            N (int): The sequence length.
            dtype (Dtype, optional): Type of the mask. Default ``float32``.

        Returns:
            array: The ``(N, N)`` mask.
        """
        indices = mx.arange(N)
        mask = indices[:, None] < indices[None]
        return mask.astype(dtype) * mx.finfo(dtype).min


class TransformerEncoderLayer(Module):
    """Self-attention then an MLP, each with a residual connection and a
    LayerNorm before (``norm_first``, the default) or after it.

    Args:
        dims (int): The feature size.
        num_heads (int): Attention heads.
        mlp_dims (int, optional): Hidden size of the MLP; ``4 * dims`` when
            omitted. Default ``None``.
        dropout (float, optional): Dropout probability. Default ``0.0``.
        activation (Callable, optional): The MLP's activation. Default
            ``relu``.
        norm_first (bool, optional): Normalize before attention and MLP (pre-
            norm). Default ``True``.
    """

    def __init__(
        self,
        dims,
        num_heads,
        mlp_dims=None,
        dropout=0.0,
        activation=relu,
        norm_first=True,
    ):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def _mlp(self, x):
        return self.linear2(self.dropout2(self.activation(self.linear1(x))))

    def __call__(self, x, mask):
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.attention(y, y, y, mask))
            return x + self._mlp(self.ln2(x))
        x = self.ln1(x + self.dropout1(self.attention(x, x, x, mask)))
        return self.ln2(x + self._mlp(x))


class _LayerStack(Module):
    """``num_layers`` copies of ``_layer`` and a final LayerNorm. With
    ``checkpoint`` each layer's activations are recomputed in the backward
    pass instead of stored."""

    _layer = None

    def __init__(
        self,
        num_layers,
        dims,
        num_heads,
        mlp_dims=None,
        dropout=0.0,
        activation=relu,
        norm_first=True,
        checkpoint=False,
    ):
        super().__init__()
        self.layers = [
            type(self)._layer(
                dims, num_heads, mlp_dims, dropout, activation, norm_first
            )
            for _ in range(num_layers)
        ]
        self.ln = LayerNorm(dims)
        self.checkpoint = checkpoint

    def _run(self, x, *context):
        from fluxion.nn.utils import checkpoint

        for layer in self.layers:
            layer = checkpoint(layer) if self.checkpoint else layer
            x = layer(x, *context)
        return self.ln(x)


class TransformerEncoder(_LayerStack):
    """A stack of encoder layers, called as ``encoder(x, mask)``.

    Args:
        num_layers (int): Layers.
        dims (int): The feature size.
        num_heads (int): Attention heads.
        mlp_dims (int, optional): Hidden size of the MLP; ``4 * dims`` when
            omitted. Default ``None``.
        dropout (float, optional): Dropout probability. Default ``0.0``.
        activation (Callable, optional): The MLP's activation. Default
            ``relu``.
        norm_first (bool, optional): Normalize before attention and MLP (pre-
            norm). Default ``True``.
        checkpoint (bool, optional): Recompute each layer in the backward
            pass. Default ``False``.
    """

    _layer = TransformerEncoderLayer

    def __call__(self, x, mask):
        return self._run(x, mask)


class TransformerDecoderLayer(Module):
    """Self-attention, cross-attention over ``memory``, then an MLP; each
    with a residual connection and a LayerNorm (before or after).

    Args:
        dims (int): The feature size.
        num_heads (int): Attention heads.
        mlp_dims (int, optional): Hidden size of the MLP; ``4 * dims`` when
            omitted. Default ``None``.
        dropout (float, optional): Dropout probability. Default ``0.0``.
        activation (Callable, optional): The MLP's activation. Default
            ``relu``.
        norm_first (bool, optional): Normalize before attention and MLP (pre-
            norm). Default ``True``.
    """

    def __init__(
        self,
        dims,
        num_heads,
        mlp_dims=None,
        dropout=0.0,
        activation=relu,
        norm_first=True,
    ):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.self_attention = MultiHeadAttention(dims, num_heads)
        self.cross_attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.ln3 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def _mlp(self, x):
        return self.linear2(self.dropout3(self.activation(self.linear1(x))))

    def __call__(self, x, memory, x_mask, memory_mask):
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.self_attention(y, y, y, x_mask))
            y = self.ln2(x)
            x = x + self.dropout2(
                self.cross_attention(y, memory, memory, memory_mask)
            )
            return x + self._mlp(self.ln3(x))
        x = self.ln1(x + self.dropout1(self.self_attention(x, x, x, x_mask)))
        x = self.ln2(
            x
            + self.dropout2(
                self.cross_attention(x, memory, memory, memory_mask)
            )
        )
        return self.ln3(x + self._mlp(x))


class TransformerDecoder(_LayerStack):
    """A stack of decoder layers, called as
    ``decoder(x, memory, x_mask, memory_mask)``.

    Args:
        num_layers (int): Layers.
        dims (int): The feature size.
        num_heads (int): Attention heads.
        mlp_dims (int, optional): Hidden size of the MLP; ``4 * dims`` when
            omitted. Default ``None``.
        dropout (float, optional): Dropout probability. Default ``0.0``.
        activation (Callable, optional): The MLP's activation. Default
            ``relu``.
        norm_first (bool, optional): Normalize before attention and MLP (pre-
            norm). Default ``True``.
        checkpoint (bool, optional): Recompute each layer in the backward
            pass. Default ``False``.
    """

    _layer = TransformerDecoderLayer

    def __call__(self, x, memory, x_mask, memory_mask):
        return self._run(x, memory, x_mask, memory_mask)


class Transformer(Module):
    """Encoder-decoder Transformer. ``custom_encoder`` / ``custom_decoder``
    replace the default stacks (any Module, even one without
    parameters).

    Args:
        dims (int): The feature size. Default ``512``.
        num_heads (int): Attention heads. Default ``8``.
        num_encoder_layers (int, optional): Encoder layers. Default ``6``.
        num_decoder_layers (int, optional): Decoder layers. Default ``6``.
        mlp_dims (int, optional): Hidden size of the MLP; ``4 * dims`` when
            omitted. Default ``None``.
        dropout (float, optional): Dropout probability. Default ``0.0``.
        activation (Callable, optional): The MLP's activation. Default
            ``relu``.
        custom_encoder (Module, optional): An encoder to use instead. Default
            ``None``.
        custom_decoder (Module, optional): A decoder to use instead. Default
            ``None``.
        norm_first (bool, optional): Normalize before attention and MLP (pre-
            norm). Default ``True``.
        checkpoint (bool, optional): Recompute each layer in the backward
            pass. Default ``False``.
    """

    def __init__(
        self,
        dims=512,
        num_heads=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        mlp_dims=None,
        dropout=0.0,
        activation=relu,
        custom_encoder=None,
        custom_decoder=None,
        norm_first=True,
        checkpoint=False,
    ):
        super().__init__()
        # "is None", not truthiness: a Module without parameters is an
        # empty dict.
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                num_encoder_layers,
                dims,
                num_heads,
                mlp_dims,
                dropout,
                activation,
                norm_first,
                checkpoint,
            )
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                num_decoder_layers,
                dims,
                num_heads,
                mlp_dims,
                dropout,
                activation,
                norm_first,
                checkpoint,
            )

    def __call__(self, src, tgt, src_mask, tgt_mask, memory_mask):
        memory = self.encoder(src, src_mask)
        return self.decoder(tgt, memory, tgt_mask, memory_mask)
