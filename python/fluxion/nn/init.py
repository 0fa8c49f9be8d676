"""Parameter initializers (MLX's ``nn.init``).

Each function returns an initializer: a callable taking an array (only its
shape is used) and returning a new array of the initializer's dtype, e.g.
``layer.weight = init.he_normal()(layer.weight)``.
"""

import math

import fluxion.core as mx

__all__ = [
    "constant",
    "normal",
    "uniform",
    "identity",
    "glorot_normal",
    "glorot_uniform",
    "he_normal",
    "he_uniform",
    "sparse",
    "orthogonal",
]


def constant(value, dtype=mx.float32):
    """Fill with ``value``.

    Args:
        value (float): The fill value.
        dtype (Dtype, optional): Type of the initialized arrays. Default
            ``mx.float32``.

    Returns:
        Callable: ``init(array)``, returning a new array of the array's shape.
    """

    def initializer(a):
        return mx.full(a.shape, value, dtype=dtype)

    return initializer


def normal(mean=0.0, std=1.0, dtype=mx.float32):
    """Draw from N(mean, std^2).

    Args:
        mean (float, optional): The mean. Default ``0.0``.
        std (float, optional): The standard deviation. Default ``1.0``.
        dtype (Dtype, optional): Type of the initialized arrays. Default
            ``mx.float32``.

    Returns:
        Callable: ``init(array)``, returning a new array of the array's shape.

    Example:
        >>> init_fn = nn.init.normal(std=0.02)
        >>> w = init_fn(mx.zeros((4, 4)))
    """

    def initializer(a):
        return mx.random.normal(
            shape=a.shape, scale=std, loc=mean, dtype=dtype
        )

    return initializer


def uniform(low=0.0, high=1.0, dtype=mx.float32):
    """Draw from U(low, high).

    Args:
        low (float, optional): The lower bound. Default ``0.0``.
        high (float, optional): The upper bound. Default ``1.0``.
        dtype (Dtype, optional): Type of the initialized arrays. Default
            ``mx.float32``.

    Returns:
        Callable: ``init(array)``, returning a new array of the array's shape.
    """

    def initializer(a):
        return mx.random.uniform(low, high, a.shape, dtype=dtype)

    return initializer


def identity(dtype=mx.float32):
    """The identity matrix (square 2-D arrays only).

    Args:
        dtype (Dtype, optional): Type of the initialized arrays. Default
            ``mx.float32``.

    Returns:
        Callable: ``init(array)``, returning a new array of the array's shape.
    """

    def initializer(arr):
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
            raise ValueError(
                "[identity] The input array must be a square matrix, got "
                "shape "
                f"{tuple(arr.shape)}."
            )
        return mx.eye(arr.shape[0], dtype=dtype)

    return initializer


def _fans(x):
    """(fan_in, fan_out) of a weight ``[out, *receptive_field, in]``
    (MLX's layout: the input axis is last)."""
    if x.ndim < 2:
        raise ValueError(
            f"[init] Glorot and He initialization need an array of at least 2 "
            f"dimensions, got {x.ndim}."
        )
    fan_in, fan_out = x.shape[-1], x.shape[0]
    if x.ndim > 2:
        field = math.prod(x.shape[1:-1])
        fan_in *= field
        fan_out *= field
    return fan_in, fan_out


def glorot_normal(dtype=mx.float32):
    r"""Glorot (Xavier) normal: std :math:`\gamma \sqrt{2 / (f_{in} +
    f_{out})}`; the initializer takes the array and a ``gain``.

    Args:
        dtype (Dtype, optional): Type of the initialized arrays. Default
            ``mx.float32``.

    Returns:
        Callable: ``init(array, gain=1.0)``, returning a new array of the array's shape.
    """

    def initializer(a, gain=1.0):
        fan_in, fan_out = _fans(a)
        std = gain * math.sqrt(2.0 / (fan_in + fan_out))
        return mx.random.normal(shape=a.shape, dtype=dtype) * std

    return initializer


def glorot_uniform(dtype=mx.float32):
    r"""Glorot (Xavier) uniform on :math:`\pm\gamma\sqrt{6 / (f_{in} +
    f_{out})}`.

    Args:
        dtype (Dtype, optional): Type of the initialized arrays. Default
            ``mx.float32``.

    Returns:
        Callable: ``init(array, gain=1.0)``, returning a new array of the array's shape.
    """

    def initializer(a, gain=1.0):
        fan_in, fan_out = _fans(a)
        limit = gain * math.sqrt(6.0 / (fan_in + fan_out))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)

    return initializer


def _fan(a, mode):
    fan_in, fan_out = _fans(a)
    if mode == "fan_in":
        return fan_in
    if mode == "fan_out":
        return fan_out
    raise ValueError(
        f"[init] Invalid mode {mode!r}. Must be 'fan_in' or 'fan_out'."
    )


def he_normal(dtype=mx.float32):
    r"""He (Kaiming) normal: std :math:`\gamma / \sqrt{f}` with
    :math:`f` the fan in (default) or out.

    Args:
        dtype (Dtype, optional): Type of the initialized arrays. Default
            ``mx.float32``.

    Returns:
        Callable: ``init(array, mode="fan_in", gain=1.0)``, returning a new array of the array's shape.
    """

    def initializer(a, mode="fan_in", gain=1.0):
        std = gain / math.sqrt(_fan(a, mode))
        return mx.random.normal(shape=a.shape, dtype=dtype) * std

    return initializer


def he_uniform(dtype=mx.float32):
    r"""He (Kaiming) uniform on :math:`\pm\gamma\sqrt{3 / f}`.

    Args:
        dtype (Dtype, optional): Type of the initialized arrays. Default
            ``mx.float32``.

    Returns:
        Callable: ``init(array, mode="fan_in", gain=1.0)``, returning a new array of the array's shape.
    """

    def initializer(a, mode="fan_in", gain=1.0):
        limit = gain * math.sqrt(3.0 / _fan(a, mode))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)

    return initializer


def sparse(sparsity, mean=0.0, std=1.0, dtype=mx.float32):
    """Normal values with ``ceil(sparsity * columns)`` entries of every row
    set to zero (Martens, 2010): each output feature keeps the same number
    of input connections.

    Args:
        sparsity (float): The fraction of each row set to zero.
        mean (float, optional): The mean. Default ``0.0``.
        std (float, optional): The standard deviation. Default ``1.0``.
        dtype (Dtype, optional): Type of the initialized arrays. Default
            ``mx.float32``.

    Returns:
        Callable: ``init(array)``, returning a new array of the array's shape.
    """

    def initializer(a):
        if a.ndim != 2:
            raise ValueError(
                f"[sparse] Only 2-D arrays are supported, got {a.ndim} "
                "dimensions."
            )
        rows, cols = a.shape
        num_zeros = int(math.ceil(sparsity * cols))
        values = mx.random.normal(
            shape=a.shape, scale=std, loc=mean, dtype=dtype
        )
        # The rank of an independent uniform draw picks a random subset of
        # exactly num_zeros positions per row.
        ranks = mx.argsort(
            mx.argsort(mx.random.uniform(shape=a.shape), axis=1), axis=1
        )
        return mx.where(ranks < num_zeros, mx.zeros_like(values), values)

    return initializer


def orthogonal(gain=1.0, dtype=mx.float32):
    """A (semi-)orthogonal matrix (Saxe et al.): the Q factor of a Gaussian
    matrix, signs fixed by R's diagonal so the distribution is uniform
    (Haar); rows or columns, whichever are fewer, are orthonormal.

    Args:
        gain (float, optional): Scale of the matrix. Default ``1.0``.
        dtype (Dtype, optional): Type of the initialized arrays. Default
            ``mx.float32``.

    Returns:
        Callable: ``init(array)``, returning a new array of the array's shape.
    """

    def initializer(a):
        if a.ndim != 2:
            raise ValueError(
                "[orthogonal] Orthogonal initialization requires a 2D array "
                "but got "
                f"a {a.ndim}D array."
            )
        rows, cols = a.shape
        n = max(rows, cols)
        q, r = mx.linalg.qr(mx.random.normal(shape=(n, n)), stream=mx.cpu)
        q = q * mx.sign(mx.diag(r))
        q = q[:rows, :cols]
        return (gain * q).astype(dtype)

    return initializer
