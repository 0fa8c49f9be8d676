"""Dropout layers (active only in training mode)."""

import fluxion.core as mx
from fluxion.nn.layers.base import Module

__all__ = ["Dropout", "Dropout2d", "Dropout3d"]


def _check_p(name, p):
    if p < 0 or p >= 1:
        raise ValueError(
            f"[{name}] The dropout probability {p} is not in [0, 1)"
        )


class Dropout(Module):
    """Zero each element with probability ``p`` and scale the rest by
    ``1 / (1 - p)`` so that the expectation is unchanged.

    Args:
        p (float, optional): Probability of zeroing an element. Default
            ``0.5``.
    """

    def __init__(self, p=0.5):
        super().__init__()
        _check_p("Dropout", p)
        self._p_1 = 1 - p

    def _extra_repr(self):
        return f"p={1 - self._p_1}"

    def _mask_shape(self, x):
        return x.shape

    def __call__(self, x):
        if self._p_1 == 1 or not self.training:
            return x
        mask = mx.random.bernoulli(self._p_1, self._mask_shape(x))
        # The mask is bool and the scale a Python float (weak), so x's
        # dtype is kept.
        return (mask * x) * (1 / self._p_1)


class Dropout2d(Dropout):
    """Zero whole channels of ``(N, H, W, C)`` or ``(H, W, C)`` inputs:
    one draw per (sample, channel), shared over H and W, which suits
    convolutional features where neighbouring pixels are correlated.

    Args:
        p (float, optional): Probability of zeroing an element. Default
            ``0.5``.
    """

    def __init__(self, p=0.5):
        _check_p("Dropout2d", p)
        super().__init__(p)

    def _mask_shape(self, x):
        if x.ndim not in (3, 4):
            raise ValueError(
                f"[Dropout2d] Received input with {x.ndim} dimensions. "
                "Expected 3 or 4 dimensions."
            )
        shape = list(x.shape)
        shape[-2] = shape[-3] = 1
        return shape


class Dropout3d(Dropout):
    """Zero whole channels of ``(N, D, H, W, C)`` or ``(D, H, W, C)``
    inputs (one draw per sample and channel).

    Args:
        p (float, optional): Probability of zeroing an element. Default
            ``0.5``.
    """

    def __init__(self, p=0.5):
        _check_p("Dropout3d", p)
        super().__init__(p)

    def _mask_shape(self, x):
        if x.ndim not in (4, 5):
            raise ValueError(
                f"[Dropout3d] Received input with {x.ndim} dimensions. "
                "Expected 4 or 5 dimensions."
            )
        shape = list(x.shape)
        shape[-2] = shape[-3] = shape[-4] = 1
        return shape
