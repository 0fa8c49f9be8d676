"""Activation functions, each as a function and as a Module (MLX's names).

All are compositions of core ops, so they differentiate, vmap and compile
like any other expression (compile fuses the elementwise chains).
"""

import math

import fluxion.core as mx
from fluxion.nn.layers.base import Module

__all__ = [
    "celu",
    "elu",
    "gelu",
    "gelu_approx",
    "gelu_fast_approx",
    "glu",
    "hard_shrink",
    "hard_tanh",
    "hardswish",
    "leaky_relu",
    "log_sigmoid",
    "log_softmax",
    "mish",
    "prelu",
    "relu",
    "relu2",
    "relu6",
    "selu",
    "sigmoid",
    "silu",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "step",
    "tanh",
    "CELU",
    "ELU",
    "GELU",
    "GLU",
    "HardShrink",
    "HardTanh",
    "Hardswish",
    "LeakyReLU",
    "LogSigmoid",
    "LogSoftmax",
    "Mish",
    "PReLU",
    "ReLU",
    "ReLU2",
    "ReLU6",
    "SELU",
    "Sigmoid",
    "SiLU",
    "Softmax",
    "Softmin",
    "Softplus",
    "Softshrink",
    "Softsign",
    "Step",
    "Tanh",
]

_SQRT_2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
# SELU's constants (Klambauer et al., 2017).
_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805


def sigmoid(x):
    """Element-wise logistic sigmoid :math:`1 / (1 + e^{-x})`.

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return mx.sigmoid(x)


def tanh(x):
    """Element-wise hyperbolic tangent.

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return mx.tanh(x)


def relu(x):
    r"""Rectified linear unit.

    :math:`\max(x, 0)`.

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return mx.maximum(x, 0)


def relu2(x):
    r"""Squared ReLU.

    :math:`\max(x, 0)^2`.

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return mx.square(mx.maximum(x, 0))


def relu6(x):
    r"""ReLU capped at 6.

    :math:`\min(\max(x, 0), 6)`.

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return mx.minimum(mx.maximum(x, 0), 6.0)


def leaky_relu(x, negative_slope=0.01):
    r"""Leaky rectified linear unit.

    :math:`\max(a x, x)` for a slope :math:`a < 1`.

    Args:
        x (array): The input.
        negative_slope (float, optional): The slope :math:`a` for negative
            inputs. Default ``0.01``.

    Returns:
        array: The activation, element by element.
    """
    return mx.maximum(negative_slope * x, x)


def elu(x, alpha=1.0):
    r"""Exponential linear unit.

    :math:`x` for :math:`x > 0`, else :math:`\alpha (e^x - 1)`.

    Args:
        x (array): The input.
        alpha (float or array, optional): The :math:`\alpha` of the formula.
            Default ``1.0``.

    Returns:
        array: The activation, element by element.
    """
    return mx.where(x > 0, x, alpha * mx.expm1(x))


def celu(x, alpha=1.0):
    r"""Continuously differentiable ELU.

    :math:`\max(0, x) + \min(0, \alpha (e^{x / \alpha} - 1))`.

    Args:
        x (array): The input.
        alpha (float or array, optional): The :math:`\alpha` of the formula.
            Default ``1.0``.

    Returns:
        array: The activation, element by element.
    """
    return mx.maximum(x, 0.0) + alpha * mx.expm1(mx.minimum(x, 0.0) / alpha)


def selu(x):
    """Scaled ELU with the self-normalizing constants.

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


def softplus(x):
    r"""The softplus function.

    :math:`\log(1 + e^x)`, computed without overflow.

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return mx.logaddexp(x, 0)


def softsign(x):
    """The softsign function.

    :math:`x / (1 + |x|)`.

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return mx.divide(x, 1 + mx.abs(x))


def softshrink(x, lambd=0.5):
    r"""Soft shrinkage.

    :math:`x - \lambda \operatorname{sign}(x)` where :math:`|x| >
    \lambda`, else 0.

    Args:
        x (array): The input.
        lambd (float, optional): The threshold :math:`\lambda`. Default
            ``0.5``.

    Returns:
        array: The activation, element by element.
    """
    return mx.where(mx.abs(x) > lambd, x - mx.sign(x) * lambd, 0)


def hard_shrink(x, lambd=0.5):
    r"""Hard shrinkage.

    :math:`x` where :math:`|x| > \lambda`, else 0.

    Args:
        x (array): The input.
        lambd (float, optional): The threshold :math:`\lambda`. Default
            ``0.5``.

    Returns:
        array: The activation, element by element.
    """
    return mx.where(mx.abs(x) > lambd, x, 0)


def hard_tanh(x, min_val=-1.0, max_val=1.0):
    """``x`` clipped to ``[min_val, max_val]``.

    Args:
        x (array): The input.
        min_val (float, optional): The lower bound. Default ``-1.0``.
        max_val (float, optional): The upper bound. Default ``1.0``.

    Returns:
        array: The activation, element by element.
    """
    return mx.minimum(mx.maximum(x, min_val), max_val)


def hardswish(x):
    r"""Hard swish.

    :math:`x \min(\max(x + 3, 0), 6) / 6`.

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return x * mx.minimum(mx.maximum(x + 3, 0), 6) / 6


def silu(x):
    r"""Sigmoid linear unit (swish).

    :math:`x \sigma(x)` (the swish function).

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return x * mx.sigmoid(x)


def log_sigmoid(x):
    r"""Log of the logistic sigmoid.

    :math:`\log \sigma(x) = -\operatorname{softplus}(-x)`.

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return -softplus(-x)


def gelu(x):
    r"""Gaussian error linear unit, exact: :math:`x \Phi(x)`.

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return x * (1 + mx.erf(x / _SQRT_2)) / 2


def gelu_approx(x):
    r"""GELU with the tanh approximation
    :math:`0.5 x (1 + \tanh(\sqrt{2/\pi} (x + 0.044715 x^3)))`
    (maximum absolute error about 5e-4).

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return 0.5 * x * (1 + mx.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3)))


def gelu_fast_approx(x):
    r"""GELU with the sigmoid approximation :math:`x \sigma(1.702 x)`
    (maximum absolute error about 0.02).

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return x * mx.sigmoid(1.702 * x)


def glu(x, axis=-1):
    r"""Gated linear unit: split ``x`` in halves :math:`a, b` along
    ``axis`` and return :math:`a \sigma(b)`.

    Args:
        x (array): The input.
        axis (int, optional): The axis. Default ``-1``.

    Returns:
        array: The result.
    """
    a, b = mx.split(x, indices_or_sections=2, axis=axis)
    return a * mx.sigmoid(b)


def step(x, threshold=0.0):
    """1 where ``x >= threshold`` (the threshold itself included), else 0.

    Args:
        x (array): The input.
        threshold (float, optional): The threshold. Default ``0.0``.

    Returns:
        array: The activation, element by element.
    """
    return mx.where(x >= threshold, 1, 0)


def mish(x):
    r"""The Mish activation.

    :math:`x \tanh(\operatorname{softplus}(x))`.

    Args:
        x (array): The input.

    Returns:
        array: The activation, element by element.
    """
    return x * mx.tanh(softplus(x))


def prelu(x, alpha):
    r"""Parametric ReLU.

    :math:`\max(0, x) + \alpha \min(0, x)` with a learned
    :math:`\alpha`.

    Args:
        x (array): The input.
        alpha (array): The learned slopes.

    Returns:
        array: The activation, element by element.
    """
    return mx.maximum(0, x) + alpha * mx.minimum(0, x)


def softmax(x, axis=-1):
    """Softmax along ``axis``.

    Args:
        x (array): The input.
        axis (int, optional): The axis. Default ``-1``.

    Returns:
        array: The result.
    """
    return mx.softmax(x, axis=axis)


def softmin(x, axis=-1):
    """Softmax of ``-x`` along ``axis``.

    Args:
        x (array): The input.
        axis (int, optional): The axis. Default ``-1``.

    Returns:
        array: The result.
    """
    return mx.softmax(-x, axis=axis)


def log_softmax(x, axis=-1):
    """Log of the softmax along ``axis``. The maximum is subtracted first,
    so equal logits give exactly ``-log(n)`` even at magnitudes where
    ``x - logsumexp(x)`` would cancel to 0.

    Args:
        x (array): The input.
        axis (int, optional): The axis. Default ``-1``.

    Returns:
        array: The result.
    """
    shifted = x - mx.stop_gradient(mx.max(x, axis=axis, keepdims=True))
    return shifted - mx.logsumexp(shifted, axis=axis, keepdims=True)


# -- Module forms -------------------------------------------------------------


def _simple_module(name, fn, doc):
    """A parameterless Module class whose __call__ is ``fn``."""

    def __call__(self, x):
        return fn(x)

    cls = type(name, (Module,), {"__call__": __call__, "__doc__": doc})
    cls.__module__ = __name__
    return cls


Sigmoid = _simple_module("Sigmoid", sigmoid, "Module form of :func:`sigmoid`.")
Tanh = _simple_module("Tanh", tanh, "Module form of :func:`tanh`.")
ReLU = _simple_module("ReLU", relu, "Module form of :func:`relu`.")
ReLU2 = _simple_module("ReLU2", relu2, "Module form of :func:`relu2`.")
ReLU6 = _simple_module("ReLU6", relu6, "Module form of :func:`relu6`.")
SELU = _simple_module("SELU", selu, "Module form of :func:`selu`.")
Softplus = _simple_module(
    "Softplus", softplus, "Module form of :func:`softplus`."
)
Softsign = _simple_module(
    "Softsign", softsign, "Module form of :func:`softsign`."
)
Hardswish = _simple_module(
    "Hardswish", hardswish, "Module form of :func:`hardswish`."
)
SiLU = _simple_module("SiLU", silu, "Module form of :func:`silu`.")
LogSigmoid = _simple_module(
    "LogSigmoid", log_sigmoid, "Module form of :func:`log_sigmoid`."
)
Mish = _simple_module("Mish", mish, "Module form of :func:`mish`.")
HardTanh = _simple_module(
    "HardTanh", hard_tanh, "Module form of :func:`hard_tanh`."
)


class LeakyReLU(Module):
    """Module form of :func:`leaky_relu`.

    Args:
        negative_slope (float, optional): The slope :math:`a` for negative
            inputs. Default ``0.01``.
    """

    def __init__(self, negative_slope=0.01):
        super().__init__()
        self._negative_slope = negative_slope

    def __call__(self, x):
        return leaky_relu(x, self._negative_slope)


class ELU(Module):
    r"""Module form of :func:`elu`.

    Args:
        alpha (float or array, optional): The :math:`\alpha` of the formula.
            Default ``1.0``.
    """

    def __init__(self, alpha=1.0):
        super().__init__()
        self._alpha = alpha

    def __call__(self, x):
        return elu(x, self._alpha)


class CELU(Module):
    r"""Module form of :func:`celu`.

    Args:
        alpha (float or array, optional): The :math:`\alpha` of the formula.
            Default ``1.0``.
    """

    def __init__(self, alpha=1.0):
        super().__init__()
        self._alpha = alpha

    def __call__(self, x):
        return celu(x, self._alpha)


class Softshrink(Module):
    r"""Module form of :func:`softshrink`.

    Args:
        lambd (float, optional): The threshold :math:`\lambda`. Default
            ``0.5``.
    """

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def __call__(self, x):
        return softshrink(x, self.lambd)


class HardShrink(Module):
    r"""Module form of :func:`hard_shrink`.

    Args:
        lambd (float, optional): The threshold :math:`\lambda`. Default
            ``0.5``.
    """

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def __call__(self, x):
        return hard_shrink(x, self.lambd)


class Step(Module):
    """Module form of :func:`step`.

    Args:
        threshold (float, optional): The threshold. Default ``0.0``.
    """

    def __init__(self, threshold=0.0):
        super().__init__()
        self.threshold = threshold

    def __call__(self, x):
        return step(x, self.threshold)


class GLU(Module):
    """Module form of :func:`glu`.

    Args:
        axis (int, optional): The axis. Default ``-1``.
    """

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis

    def __call__(self, x):
        return glu(x, self.axis)


class Softmax(Module):
    """Module form of :func:`softmax` (last axis)."""

    def __call__(self, x):
        return softmax(x)


class Softmin(Module):
    """Module form of :func:`softmin` (last axis)."""

    def __call__(self, x):
        return softmin(x)


class LogSoftmax(Module):
    """Module form of :func:`log_softmax` (last axis)."""

    def __call__(self, x):
        return log_softmax(x)


class PReLU(Module):
    """Parametric ReLU with ``num_parameters`` learned slopes (1, or one
    per channel of the last axis) initialised to ``init``.

    Args:
        num_parameters (int, optional): The number of slopes: 1, or one per
            channel. Default ``1``.
        init (float, optional): The initial slope. Default ``0.25``.
    """

    def __init__(self, num_parameters=1, init=0.25):
        super().__init__()
        self.weight = mx.full([num_parameters], init)

    def __call__(self, x):
        return prelu(x, self.weight)


class GELU(Module):
    """GELU with a choice of formula: ``approx="none"`` (exact, erf),
    ``"precise"`` or ``"tanh"`` (:func:`gelu_approx`), ``"fast"``
    (:func:`gelu_fast_approx`).

    Args:
        approx (str, optional): ``"none"``, ``"precise"`` or ``"tanh"`` (the
            tanh approximation), or ``"fast"`` (the sigmoid one). Default
            ``'none'``.
    """

    _FNS = {
        "none": gelu,
        "precise": gelu_approx,
        "tanh": gelu_approx,
        "fast": gelu_fast_approx,
    }

    def __init__(self, approx="none"):
        super().__init__()
        if approx not in self._FNS:
            raise ValueError(
                f"[GELU] The approximation should be one of "
                f"{list(self._FNS)} but '{approx}' was given"
            )
        self._approx = approx
        self._act = self._FNS[approx]

    def __call__(self, x):
        return self._act(x)
