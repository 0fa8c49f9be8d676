"""Recurrent layers: RNN, GRU, LSTM (Elman/Cho/Hochreiter).

Inputs are ``(N, L, D)`` or ``(L, D)``; outputs hold the hidden state at
every step, ``(N, L, H)`` or ``(L, H)``. The input projection of all steps
is one matmul; the recurrence is a Python loop over steps (compile it, or
use short sequences).
"""

import math

import fluxion.core as mx
from fluxion.nn.layers.base import Module

__all__ = ["RNN", "GRU", "LSTM"]


def _uniform(scale, shape):
    return mx.random.uniform(low=-scale, high=scale, shape=shape)


class RNN(Module):
    r"""Elman RNN: :math:`h_t = \sigma(W_{xh} x_t + W_{hh} h_{t-1} + b)`
    with ``nonlinearity`` :math:`\sigma` (default tanh).

    Args:
        input_size (int): Input features.
        hidden_size (int): Size of the hidden state.
        bias (bool, optional): Learn an additive bias. Default ``True``.
        nonlinearity (Callable, optional): The activation; ``tanh`` when
            omitted. Default ``None``.
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity=None):
        super().__init__()
        self.nonlinearity = nonlinearity or mx.tanh
        if not callable(self.nonlinearity):
            raise ValueError(
                "[RNN] Nonlinearity must be callable. Current value: "
                f"{nonlinearity}."
            )
        scale = 1.0 / math.sqrt(hidden_size)
        self.hidden_size = hidden_size
        self.Wxh = _uniform(scale, (hidden_size, input_size))
        self.Whh = _uniform(scale, (hidden_size, hidden_size))
        self.bias = _uniform(scale, (hidden_size,)) if bias else None

    def _extra_repr(self):
        return (
            f"input_dims={self.Wxh.shape[1]}, hidden_size={self.hidden_size}, "
            f"nonlinearity={self.nonlinearity}, bias={self.bias is not None}"
        )

    def __call__(self, x, hidden=None):
        if self.bias is not None:
            x = mx.addmm(self.bias, x, self.Wxh.T)
        else:
            x = x @ self.Wxh.T
        outputs = []
        for t in range(x.shape[-2]):
            if hidden is not None:
                hidden = mx.addmm(x[..., t, :], hidden, self.Whh.T)
            else:
                hidden = x[..., t, :]
            hidden = self.nonlinearity(hidden)
            outputs.append(hidden)
        return mx.stack(outputs, axis=-2)


class GRU(Module):
    """Gated recurrent unit (PyTorch's formulation, with the hidden bias
    of the candidate ``bhn`` inside the reset gate).

    A missing initial ``hidden`` is the zero state.

    Args:
        input_size (int): Input features.
        hidden_size (int): Size of the hidden state.
        bias (bool, optional): Learn an additive bias. Default ``True``.
    """

    def __init__(self, input_size, hidden_size, bias=True):
        super().__init__()
        self.hidden_size = hidden_size
        scale = 1.0 / math.sqrt(hidden_size)
        self.Wx = _uniform(scale, (3 * hidden_size, input_size))
        self.Wh = _uniform(scale, (3 * hidden_size, hidden_size))
        self.b = _uniform(scale, (3 * hidden_size,)) if bias else None
        self.bhn = _uniform(scale, (hidden_size,)) if bias else None

    def _extra_repr(self):
        return (
            f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, "
            f"bias={self.b is not None}"
        )

    def __call__(self, x, hidden=None):
        H = self.hidden_size
        if self.b is not None:
            x = mx.addmm(self.b, x, self.Wx.T)
        else:
            x = x @ self.Wx.T
        x_rz = x[..., :-H]
        x_n = x[..., -H:]
        outputs = []
        for t in range(x.shape[-2]):
            rz = x_rz[..., t, :]
            n = x_n[..., t, :]
            if hidden is not None:
                h_proj = hidden @ self.Wh.T
                rz = rz + h_proj[..., :-H]
                h_n = h_proj[..., -H:]
                if self.bhn is not None:
                    h_n = h_n + self.bhn
            else:
                # The zero state projects to just the bias.
                h_n = self.bhn
            r, z = mx.split(mx.sigmoid(rz), 2, axis=-1)
            if h_n is not None:
                n = n + r * h_n
            n = mx.tanh(n)
            if hidden is not None:
                hidden = (1 - z) * n + z * hidden
            else:
                hidden = (1 - z) * n
            outputs.append(hidden)
        return mx.stack(outputs, axis=-2)


class LSTM(Module):
    """Long short-term memory; returns the hidden and the cell states of
    every step. Gates are ordered input, forget, cell, output.

    Args:
        input_size (int): Input features.
        hidden_size (int): Size of the hidden state.
        bias (bool, optional): Learn an additive bias. Default ``True``.
    """

    def __init__(self, input_size, hidden_size, bias=True):
        super().__init__()
        self.hidden_size = hidden_size
        scale = 1.0 / math.sqrt(hidden_size)
        self.Wx = _uniform(scale, (4 * hidden_size, input_size))
        self.Wh = _uniform(scale, (4 * hidden_size, hidden_size))
        self.bias = _uniform(scale, (4 * hidden_size,)) if bias else None

    def _extra_repr(self):
        return (
            f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, "
            f"bias={self.bias is not None}"
        )

    def __call__(self, x, hidden=None, cell=None):
        if self.bias is not None:
            x = mx.addmm(self.bias, x, self.Wx.T)
        else:
            x = x @ self.Wx.T
        hiddens, cells = [], []
        for t in range(x.shape[-2]):
            ifgo = x[..., t, :]
            if hidden is not None:
                ifgo = mx.addmm(ifgo, hidden, self.Wh.T)
            i, f, g, o = mx.split(ifgo, 4, axis=-1)
            i, f, g, o = (
                mx.sigmoid(i),
                mx.sigmoid(f),
                mx.tanh(g),
                mx.sigmoid(o),
            )
            cell = f * cell + i * g if cell is not None else i * g
            hidden = o * mx.tanh(cell)
            hiddens.append(hidden)
            cells.append(cell)
        return mx.stack(hiddens, axis=-2), mx.stack(cells, axis=-2)
