"""Positional encodings: RoPE, sinusoidal encodings and ALiBi."""

import math

import fluxion.core as mx
from fluxion.nn.layers.base import Module

__all__ = ["RoPE", "SinusoidalPositionalEncoding", "ALiBi"]


class RoPE(Module):
    """Rotary positional encoding (Su et al.) of the first ``dims``
    features of the last axis; positions are the second-to-last axis,
    starting at ``offset``. ``traditional`` rotates adjacent pairs instead
    of the two halves.

    Args:
        dims (int): The feature size.
        traditional (bool, optional): Rotate consecutive pairs (else halves).
            Default ``False``.
        base (float, optional): Base of the frequencies. Default ``10000``.
        scale (float, optional): Scale of the positions or values. Default
            ``1.0``.
    """

    def __init__(self, dims, traditional=False, base=10000, scale=1.0):
        super().__init__()
        self.dims = dims
        self.traditional = traditional
        self.base = base
        self.scale = scale

    def _extra_repr(self):
        return f"{self.dims}, traditional={self.traditional}"

    def __call__(self, x, offset=0):
        return mx.fast.rope(
            x,
            self.dims,
            traditional=self.traditional,
            base=self.base,
            scale=self.scale,
            offset=offset,
        )


class SinusoidalPositionalEncoding(Module):
    r"""Sinusoidal encoding of (possibly fractional) positions
    (Vaswani et al.): ``dims / 2`` frequencies spaced geometrically from
    ``max_freq`` down to ``min_freq``; each position maps to the sines
    followed by the cosines (or the reverse with ``cos_first``), times
    ``scale`` (default :math:`\sqrt{2 / \text{dims}}`, which gives every
    encoding unit norm). ``full_turns`` multiplies the frequencies by
    :math:`2\pi`.

    Args:
        dims (int): The feature size.
        min_freq (float, optional): The lowest frequency. Default ``0.0001``.
        max_freq (float, optional): The highest frequency. Default ``1``.
        scale (float, optional): Scale of the positions or values. Default
            ``None``.
        cos_first (bool, optional): Put the cosines before the sines. Default
            ``False``.
        full_turns (bool, optional): Multiply the angles by :math:`2\pi`.
            Default ``False``.
    """

    def __init__(
        self,
        dims,
        min_freq=0.0001,
        max_freq=1,
        scale=None,
        cos_first=False,
        full_turns=False,
    ):
        super().__init__()
        if dims <= 0 or dims % 2 != 0:
            raise ValueError(
                f"[SinusoidalPositionalEncoding] dims must be a positive even "
                f"number, got {dims}"
            )
        half = dims // 2
        if half == 1:
            # One frequency: the top of the range.
            one_zero = mx.array([1.0])
        else:
            one_zero = 1 - mx.arange(0, half) / (half - 1)
        log_min, log_max = math.log(min_freq), math.log(max_freq)
        self._sigmas = mx.exp(one_zero * (log_max - log_min) + log_min)
        if full_turns:
            self._sigmas = self._sigmas * (2 * math.pi)
        # An explicit 0.0 is a valid scale, so test against None.
        self.scale = (2 / dims) ** 0.5 if scale is None else scale
        self.cos_first = cos_first

    def __call__(self, x):
        y = x[..., None] * self._sigmas
        cosy, siny = mx.cos(y), mx.sin(y)
        parts = [cosy, siny] if self.cos_first else [siny, cosy]
        y = mx.concatenate(parts, axis=-1)
        if self.scale != 1:
            y = y * self.scale
        return y


class ALiBi(Module):
    """Attention with linear biases (Press et al.): adds
    ``-slope_h * |i - j|`` to the attention scores ``(B, H, Lq, Lk)``,
    with head slopes ``2^(-8 h / H)``."""

    @staticmethod
    def create_alibi_slope(num_heads):
        """The per-head slopes ``2^(-8 h / H)``.

        Args:
            num_heads (int): The number of heads ``H``.

        Returns:
            array: The slopes, shape ``(H, 1, 1)``.
        """
        x = (2**8) ** (1 / num_heads)
        out = mx.power(x, -mx.arange(1, num_heads + 1))
        return mx.expand_dims(out, axis=(1, 2))

    @classmethod
    def create_alibi_matrix(
        cls,
        q_sequence_length,
        k_sequence_length,
        num_heads,
        offset,
        dtype=mx.float32,
    ):
        """The bias matrix added to the attention scores.

        Args:
            q_sequence_length (int): Length of the queries (with the offset).
            k_sequence_length (int): Length of the keys.
            num_heads (int): The number of heads.
            offset (int): Position of the first query.
            dtype (Dtype, optional): Type of the result. Default ``float32``.

        Returns:
            array: ``-slope_h * |i - j|``, shape ``(1, H, Lq, Lk)``.
        """
        x1 = mx.arange(offset, q_sequence_length)
        x2 = mx.arange(0, k_sequence_length)
        distance = -mx.abs(
            mx.expand_dims(x1[:, None] - x2[None, :], axis=(0, 1))
        )
        slope = cls.create_alibi_slope(num_heads)
        return (distance * slope).astype(dtype)

    def __call__(self, attention_scores, offset=0, mask=None):
        bias = self.create_alibi_matrix(
            q_sequence_length=attention_scores.shape[-2] + offset,
            k_sequence_length=attention_scores.shape[-1],
            num_heads=attention_scores.shape[1],
            offset=offset,
            dtype=attention_scores.dtype,
        )
        if mask is not None:
            bias = bias + mask
        return attention_scores + bias
