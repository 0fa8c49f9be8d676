"""Normalization layers: LayerNorm, RMSNorm, GroupNorm, InstanceNorm,
BatchNorm. Features are the last axis (channels-last)."""

import fluxion.core as mx
from fluxion.nn.layers.base import Module

__all__ = ["LayerNorm", "RMSNorm", "GroupNorm", "InstanceNorm", "BatchNorm"]


def _check_eps(name, eps):
    # eps sits under a square root: zero gives rsqrt(0) = inf on constant
    # rows, a negative one NaNs wherever the variance is small.
    if not eps > 0:
        raise ValueError(f"[{name}] eps must be positive, got {eps}")


def _centered(xs, axes):
    """(x - mean, biased variance) over ``axes``, keeping dims: the mean is
    computed once and the centered values reused for the variance and the
    output (mx.var would compute the mean again)."""
    xc = xs - mx.mean(xs, axis=axes, keepdims=True)
    return xc, mx.mean(mx.square(xc), axis=axes, keepdims=True)


def _stats_dtype(dtype):
    """Statistics of half-precision inputs are computed in float32: the
    square of a float16 value above ~256 overflows."""
    if dtype in (mx.float16, mx.bfloat16):
        return mx.float32
    return dtype


class LayerNorm(Module):
    """Normalize the last axis to zero mean and unit variance, then (with
    ``affine``) scale by ``weight`` and shift by ``bias`` (Ba et al.).

    Args:
        dims (int): The feature size.
        eps (float, optional): Added to the variance for stability. Default
            ``1e-05``.
        affine (bool, optional): Learn a scale (and offset). Default ``True``.
        bias (bool, optional): Learn an additive bias. Default ``True``.
    """

    def __init__(self, dims, eps=1e-5, affine=True, bias=True):
        super().__init__()
        _check_eps("LayerNorm", eps)
        if affine:
            self.weight = mx.ones((dims,))
            if bias:
                self.bias = mx.zeros((dims,))
        self.eps = eps
        self.dims = dims

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        return mx.fast.layer_norm(
            x, self.get("weight"), self.get("bias"), self.eps
        )


class RMSNorm(Module):
    """Divide the last axis by its root mean square and scale by
    ``weight`` (Zhang and Sennrich).

    Args:
        dims (int): The feature size.
        eps (float, optional): Added to the variance for stability. Default
            ``1e-05``.
    """

    def __init__(self, dims, eps=1e-5):
        super().__init__()
        _check_eps("RMSNorm", eps)
        self.weight = mx.ones((dims,))
        self.eps = eps

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, eps={self.eps}"

    def __call__(self, x):
        return mx.fast.rms_norm(x, self["weight"], self.eps)


class GroupNorm(Module):
    """Normalize groups of channels over the spatial axes and the group.

    By default (MLX's layout) channel ``c`` belongs to group
    ``c % num_groups``; with ``pytorch_compatible`` groups are contiguous
    runs of channels, as in PyTorch.

    Args:
        num_groups (int): Groups the features are split into.
        dims (int): The feature size.
        eps (float, optional): Added to the variance for stability. Default
            ``1e-05``.
        affine (bool, optional): Learn a scale (and offset). Default ``True``.
        pytorch_compatible (bool, optional): Group the features as PyTorch
            does. Default ``False``.
    """

    def __init__(
        self, num_groups, dims, eps=1e-5, affine=True, pytorch_compatible=False
    ):
        super().__init__()
        _check_eps("GroupNorm", eps)
        if num_groups <= 0 or dims <= 0:
            raise ValueError(
                f"[GroupNorm] num_groups ({num_groups}) and dims ({dims}) "
                "must be positive"
            )
        if dims % num_groups != 0:
            raise ValueError(
                f"[GroupNorm] dims ({dims}) must be divisible by num_groups "
                f"({num_groups})"
            )
        if affine:
            self.bias = mx.zeros((dims,))
            self.weight = mx.ones((dims,))
        self.num_groups = num_groups
        self.dims = dims
        self.eps = eps
        self.pytorch_compatible = pytorch_compatible

    def _extra_repr(self):
        return (
            f"{self.num_groups}, {self.dims}, eps={self.eps}, "
            f"affine={'weight' in self}, "
            f"pytorch_compatible={self.pytorch_compatible}"
        )

    def _normalize(self, x, axes):
        dtype = x.dtype
        xc, var = _centered(x.astype(_stats_dtype(dtype)), axes)
        return (xc * mx.rsqrt(var + self.eps)).astype(dtype)

    def __call__(self, x):
        batch, *rest, dims = x.shape
        groups = self.num_groups
        if self.pytorch_compatible:
            # (batch, positions, groups, group_size): normalize over
            # positions and group_size.
            y = x.reshape(batch, -1, groups, dims // groups)
            y = self._normalize(y, (1, 3))
        else:
            # (batch, positions * group_size, groups): channel c is in
            # group c % groups.
            y = x.reshape(batch, -1, groups)
            y = self._normalize(y, (1,))
        y = y.reshape(batch, *rest, dims)
        if "weight" in self:
            y = self.weight * y + self.bias
        return y


class InstanceNorm(Module):
    """Normalize each channel of each sample over the spatial axes
    (Ulyanov et al.); inputs are ``(N, *spatial, C)``.

    Args:
        dims (int): The feature size.
        eps (float, optional): Added to the variance for stability. Default
            ``1e-05``.
        affine (bool, optional): Learn a scale (and offset). Default
            ``False``.
    """

    def __init__(self, dims, eps=1e-5, affine=False):
        super().__init__()
        _check_eps("InstanceNorm", eps)
        if affine:
            self.weight = mx.ones((dims,))
            self.bias = mx.zeros((dims,))
        self.dims = dims
        self.eps = eps

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        if x.ndim < 3:
            raise ValueError(
                "[InstanceNorm] Expected an input (N, *spatial, C) with at "
                "least one "
                f"spatial axis, got shape {x.shape}"
            )
        axes = tuple(range(1, x.ndim - 1))
        dtype = x.dtype
        xc, var = _centered(x.astype(_stats_dtype(dtype)), axes)
        y = (xc * mx.rsqrt(var + self.eps)).astype(dtype)
        if "weight" in self:
            y = self.weight * y + self.bias
        return y


class BatchNorm(Module):
    """Normalize each feature (last axis) over the batch and spatial axes
    (Ioffe and Szegedy). Inputs are ``(N, C)``, ``(N, L, C)`` or
    ``(N, H, W, C)``.

    In training mode the batch statistics are used and, with
    ``track_running_stats``, folded into ``running_mean`` and
    ``running_var`` with ``momentum`` (the variance unbiased, as PyTorch);
    in eval mode the running statistics are used. The running statistics
    are parameters (saved with the weights) but never trainable.

    Args:
        num_features (int): Features (the last axis).
        eps (float, optional): Added to the variance for stability. Default
            ``1e-05``.
        momentum (float, optional): Update rate of the running statistics.
            Default ``0.1``.
        affine (bool, optional): Learn a scale (and offset). Default ``True``.
        track_running_stats (bool, optional): Keep running statistics for
            evaluation. Default ``True``.
    """

    _STATS = ("running_mean", "running_var")

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
    ):
        super().__init__()
        _check_eps("BatchNorm", eps)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = mx.ones((num_features,))
            self.bias = mx.zeros((num_features,))
        if track_running_stats:
            self.running_mean = mx.zeros((num_features,))
            self.running_var = mx.ones((num_features,))
            self.freeze(keys=list(self._STATS), recurse=False)

    def unfreeze(self, *args, **kwargs):
        """Unfreeze as :meth:`Module.unfreeze`; the running statistics stay frozen.

        Args:
            *args: As :meth:`Module.unfreeze`'s.
            **kwargs: As :meth:`Module.unfreeze`'s.
        """
        super().unfreeze(*args, **kwargs)
        if self.track_running_stats:
            self.freeze(keys=list(self._STATS), recurse=False)
        return self

    def _extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={'weight' in self}, "
            f"track_running_stats={self.track_running_stats}"
        )

    def __call__(self, x):
        if x.ndim < 2 or x.ndim > 4:
            raise ValueError(
                "[BatchNorm] Expected an input of 2 to 4 dimensions (N, ..., "
                "C), "
                f"got shape {x.shape}"
            )
        axes = tuple(range(x.ndim - 1))
        dtype = x.dtype
        use_batch_stats = self.training or not self.track_running_stats
        xs = x.astype(_stats_dtype(dtype))
        if use_batch_stats:
            count = 1
            for a in axes:
                count *= x.shape[a]
            if self.training and count < 2:
                raise ValueError(
                    "[BatchNorm] Expected more than 1 value per feature in "
                    "training "
                    f"mode, got input shape {x.shape}"
                )
            mean = mx.mean(xs, axis=axes)
            xc = xs - mean
            var = mx.mean(mx.square(xc), axis=axes)
            if self.training and self.track_running_stats:
                mu = self.momentum
                unbiased = var * (count / (count - 1))
                self.running_mean = (
                    1 - mu
                ) * self.running_mean + mu * mean.astype(
                    self.running_mean.dtype
                )
                self.running_var = (
                    1 - mu
                ) * self.running_var + mu * unbiased.astype(
                    self.running_var.dtype
                )
        else:
            xc = xs - self.running_mean
            var = self.running_var
        # The per-feature factors are combined first, so the full-size work
        # is one multiply (and one add).
        scale = mx.rsqrt(var + self.eps)
        if "weight" in self:
            scale = scale * self.weight
            return (xc * scale + self.bias).astype(dtype)
        return (xc * scale).astype(dtype)
