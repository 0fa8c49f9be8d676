"""Tensor-parallel linear layers (MLX's ``nn.AllToShardedLinear`` family)
and fully-sharded data parallelism (MLX's ``nn.fully_shard``).

A linear layer is split over the processes of a group: "all-to-sharded"
layers hold a slice of the output features (every process sees the whole
input and produces its slice), "sharded-to-all" layers a slice of the input
features (partial products are summed over the group).

The group is ``mx.distributed.init()`` unless given: under mpirun the MPI
group; alone, the process itself (rank 0 of 1), where the layers hold the
whole weight and the collective operations are identities.

Gradients are those of the unsharded model for a loss that every process
computes alike (MLX's): the partial products' sum passes its cotangent
through unchanged (``_all_sum``), while the replicated input of an
all-to-sharded layer sums its cotangents over the group
(``sum_gradients``). Note that ``mx.distributed.all_sum`` itself
differentiates to the sum of the cotangents (docs/architecture.md,
"Distributed").

:func:`fully_shard` wraps a whole module instead: every process stores
1/N of each parameter (rows along axis 0), the full parameters are
gathered for each call, and the gradients are reduce-scattered, so each
process gets the group-averaged gradient of its own rows (data
parallelism with sharded parameters, gradients and optimizer state).
"""

import math
from functools import lru_cache

import fluxion.core as mx
from fluxion.nn.layers.base import Module
from fluxion.nn.layers.quantized import _Quantized
from fluxion.utils import tree_flatten, tree_map_with_path

__all__ = [
    "AllToShardedLinear",
    "FullyShardedModule",
    "ShardedToAllLinear",
    "QuantizedAllToShardedLinear",
    "QuantizedShardedToAllLinear",
    "fully_shard",
    "shard_linear",
    "shard_inplace",
    "sum_gradients",
]


class _SingleProcessGroup:
    """The group of one process, used when there is no distributed
    backend."""

    def rank(self):
        return 0

    def size(self):
        return 1

    def split(self, color, key=-1):
        return self


def _group(group):
    if group is not None:
        return group
    dist = getattr(mx, "distributed", None)
    if dist is not None and hasattr(dist, "init"):
        return dist.init()
    return _SingleProcessGroup()


@lru_cache
def _replicated_sum(group):
    """all_sum forward; backward the cotangent itself: every process holds
    the same loss, so each partial product's cotangent is the output's."""

    @mx.custom_function
    def f(x):
        return mx.distributed.all_sum(x, group=group)

    @f.vjp
    def f_vjp(x, dx, _):
        return dx

    return f


def _all_sum(x, group):
    if group.size() == 1:
        return x
    return _replicated_sum(group)(x)


@lru_cache
def sum_gradients(group):
    """A function that is the identity in the forward pass and sums its
    cotangent over ``group`` in the backward pass (MLX's public helper):
    the input of an all-to-sharded layer is used by every process, so its
    gradient is the sum of theirs. Over a group of one process it is the
    identity.

    Args:
        group (Group): The process group.

    Returns:
        Callable: ``f(x)``, equal to ``x``.
    """
    if group.size() == 1:
        return lambda x: x

    @mx.custom_function
    def f(x):
        return x

    @f.vjp
    def f_vjp(x, dx, _):
        return mx.distributed.all_sum(dx, group=group)

    return f


_sum_gradients = sum_gradients  # the name used before it was public


def _split_axis(x, axis, segments, group):
    """This process's part of ``x`` along ``axis``: each of ``segments``
    equal segments (e.g. fused q/k/v projections) is split over the group
    and the rank's pieces are concatenated."""
    N, r = group.size(), group.rank()
    if N == 1:
        return x
    parts = mx.split(x, segments, axis=axis) if segments > 1 else [x]
    return mx.concatenate(
        [mx.split(p, N, axis=axis)[r] for p in parts], axis=axis
    )


def _shard(parameters, rule, group):
    """Shard a parameter tree: ``rule(path, weight)`` gives an axis, an
    ``(axis, segments)`` pair, or None to replicate (MLX accepts both
    forms; an axis alone means one segment)."""

    def shard(path, w):
        spec = rule(path, w)
        if spec is None:
            return w
        if isinstance(spec, int) and not isinstance(spec, bool):
            axis, segments = spec, 1
        elif isinstance(spec, (tuple, list)) and len(spec) == 2:
            axis, segments = spec
        else:
            raise ValueError(
                "[shard_inplace] The sharding function must return an "
                "axis, an (axis, segments) pair or None; got "
                f"{spec!r} for {path!r}"
            )
        return _split_axis(w, axis, segments, group)

    return tree_map_with_path(shard, parameters)


def _all_to_sharded(segments):
    # Output features are axis 0 of weights, scales and biases, and the
    # only axis of the bias.
    return lambda path, w: (max(w.ndim - 2, 0), segments)


def _sharded_to_all(segments):
    # Input features are the last axis; the bias is replicated.
    return lambda path, w: None if path.endswith("bias") else (-1, segments)


def _check_divisible(name, what, dims, N):
    if dims % N != 0:
        raise ValueError(
            f"[{name}] Cannot shard the {what} of size {dims} over {N} "
            "processes."
        )


class _ShardedLinear(Module):
    """A Linear layer holding this process's slice of the weight along
    ``_axis`` (0: output features, 1: input features); the bias is sliced
    with the output features and replicated with the input ones."""

    _axis = 0

    def __init__(self, input_dims, output_dims, bias=True, group=None):
        super().__init__()
        self.group = _group(group)
        N = self.group.size()
        dims = [output_dims, input_dims]
        _check_divisible(
            type(self).__name__,
            ("output", "input")[self._axis],
            dims[self._axis],
            N,
        )
        dims[self._axis] //= N
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(-scale, scale, tuple(dims))
        if bias:
            self.bias = mx.random.uniform(-scale, scale, (dims[0],))

    def _extra_repr(self):
        dims = list(self.weight.shape)
        dims[self._axis] *= self.group.size()
        return (
            f"input_dims={dims[1]}, output_dims={dims[0]}, "
            f"bias={'bias' in self}"
        )

    @classmethod
    def from_linear(cls, linear_layer, *, segments=1, group=None):
        group = _group(group)
        out, inp = linear_layer.weight.shape
        layer = cls(inp, out, "bias" in linear_layer, group)
        layer.update(
            _shard(linear_layer.parameters(), cls._rule(segments), group)
        )
        return layer


class AllToShardedLinear(_ShardedLinear):
    """A Linear layer computing this process's slice of the output
    features from the whole input.

    Args:
        input_dims (int): Input features.
        output_dims (int): Output features.
        bias (bool, optional): Learn an additive bias. Default ``True``.
        group (Group, optional): The process group; the global one when
            omitted. Default ``None``.
    """

    _axis = 0
    _rule = staticmethod(_all_to_sharded)

    def __call__(self, x):
        x = sum_gradients(self.group)(x)
        if "bias" in self:
            return mx.addmm(self["bias"], x, self["weight"].T)
        return x @ self["weight"].T


class ShardedToAllLinear(_ShardedLinear):
    """A Linear layer over this process's slice of the input features;
    the partial products are summed over the group.

    Args:
        input_dims (int): Input features.
        output_dims (int): Output features.
        bias (bool, optional): Learn an additive bias. Default ``True``.
        group (Group, optional): The process group; the global one when
            omitted. Default ``None``.
    """

    _axis = 1
    _rule = staticmethod(_sharded_to_all)

    def __call__(self, x):
        x = _all_sum(x @ self["weight"].T, self.group)
        if "bias" in self:
            x = x + self["bias"]
        return x


class _QuantizedSharded(_Quantized):
    def __init__(
        self, weight_shape, output_dims, bias, group_size, bits, mode, group
    ):
        super().__init__()
        self.group = group
        self._init_format(group_size, bits, mode)
        scale = math.sqrt(1.0 / weight_shape[1])
        self._set_quantized(mx.random.uniform(-scale, scale, weight_shape))
        if bias:
            self.bias = mx.zeros((output_dims,))
        self._freeze_quantized()

    @classmethod
    def from_quantized_linear(
        cls, quantized_linear_layer, *, segments=1, group=None
    ):
        group = _group(group)
        q = quantized_linear_layer
        out = q.weight.shape[0]
        inp = q.weight.shape[1] * 32 // q.bits
        layer = cls(inp, out, "bias" in q, q.group_size, q.bits, q.mode, group)
        layer.update(_shard(q.parameters(), cls._rule(segments), group))
        return layer


class QuantizedAllToShardedLinear(_QuantizedSharded):
    """The quantized form of :class:`AllToShardedLinear`.

    Args:
        input_dims (int): Input features.
        output_dims (int): Output features.
        bias (bool, optional): Learn an additive bias. Default ``True``.
        group_size (int, optional): Elements per quantization group; the
            mode's default when omitted. Default ``None``.
        bits (int, optional): Bits per element; the mode's default when
            omitted. Default ``None``.
        mode (str, optional): The quantization mode (``"affine"``,
            ``"mxfp4"``, ``"nvfp4"``, ``"mxfp8"``). Default ``'affine'``.
        group (Group, optional): The process group; the global one when
            omitted. Default ``None``.
    """

    _rule = staticmethod(_all_to_sharded)

    def __init__(
        self,
        input_dims,
        output_dims,
        bias=True,
        group_size=None,
        bits=None,
        mode="affine",
        group=None,
    ):
        group = _group(group)
        N = group.size()
        _check_divisible(
            "QuantizedAllToShardedLinear", "output", output_dims, N
        )
        super().__init__(
            (output_dims // N, input_dims),
            output_dims // N,
            bias,
            group_size,
            bits,
            mode,
            group,
        )

    def __call__(self, x):
        x = self._matmul(sum_gradients(self.group)(x))
        if "bias" in self:
            x = x + self["bias"]
        return x


class QuantizedShardedToAllLinear(_QuantizedSharded):
    """The quantized form of :class:`ShardedToAllLinear`.

    Args:
        input_dims (int): Input features.
        output_dims (int): Output features.
        bias (bool, optional): Learn an additive bias. Default ``True``.
        group_size (int, optional): Elements per quantization group; the
            mode's default when omitted. Default ``None``.
        bits (int, optional): Bits per element; the mode's default when
            omitted. Default ``None``.
        mode (str, optional): The quantization mode (``"affine"``,
            ``"mxfp4"``, ``"nvfp4"``, ``"mxfp8"``). Default ``'affine'``.
        group (Group, optional): The process group; the global one when
            omitted. Default ``None``.
    """

    _rule = staticmethod(_sharded_to_all)

    def __init__(
        self,
        input_dims,
        output_dims,
        bias=True,
        group_size=None,
        bits=None,
        mode="affine",
        group=None,
    ):
        group = _group(group)
        N = group.size()
        _check_divisible("QuantizedShardedToAllLinear", "input", input_dims, N)
        super().__init__(
            (output_dims, input_dims // N),
            output_dims,
            bias,
            group_size,
            bits,
            mode,
            group,
        )

    def __call__(self, x):
        x = _all_sum(self._matmul(x), self.group)
        if "bias" in self:
            x = x + self["bias"]
        return x


_LINEAR_SHARDING = {
    "all-to-sharded": (AllToShardedLinear, QuantizedAllToShardedLinear),
    "sharded-to-all": (ShardedToAllLinear, QuantizedShardedToAllLinear),
}


def shard_linear(module, sharding, *, segments=1, group=None):
    """The sharded version of a Linear or QuantizedLinear ``module``;
    ``sharding`` is "all-to-sharded" or "sharded-to-all".

    Args:
        module (Module): The module.
        sharding (str): ``"all-to-sharded"`` or ``"sharded-to-all"``.
        segments (int, optional): Fused parts of the weight, sharded each.
            Default ``1``.
        group (Group, optional): The process group; the global one when
            omitted. Default ``None``.
    """
    from fluxion.nn.layers.linear import Linear
    from fluxion.nn.layers.quantized import QuantizedLinear

    if sharding not in _LINEAR_SHARDING:
        raise ValueError(
            "[shard_linear] sharding must be 'all-to-sharded' or "
            "'sharded-to-all', "
            f"got {sharding!r}"
        )
    plain, quantized = _LINEAR_SHARDING[sharding]
    if isinstance(module, QuantizedLinear):
        return quantized.from_quantized_linear(
            module, segments=segments, group=group
        )
    if isinstance(module, Linear):
        return plain.from_linear(module, segments=segments, group=group)
    raise ValueError(f"[shard_linear] Cannot shard a {type(module).__name__}")


def shard_inplace(module, sharding, *, segments=1, group=None):
    """Replace ``module``'s parameters, in place, by this process's shard:
    ``sharding`` is "all-to-sharded", "sharded-to-all", or a function
    ``(path, weight) -> axis | (axis, segments) | None``.

    Args:
        module (Module): The module.
        sharding (str): ``"all-to-sharded"`` or ``"sharded-to-all"``.
        segments (int, optional): Fused parts of the weight, sharded each.
            Default ``1``.
        group (Group, optional): The process group; the global one when
            omitted. Default ``None``.
    """
    group = _group(group)
    if callable(sharding):
        rule = sharding
    elif sharding == "all-to-sharded":
        rule = _all_to_sharded(segments)
    elif sharding == "sharded-to-all":
        rule = _sharded_to_all(segments)
    else:
        raise ValueError(f"[shard_inplace] Unknown sharding {sharding!r}")
    module.update(_shard(module.parameters(), rule, group))
    return module


# -- fully-sharded data parallelism -----------------------------------------


def _make_gather(group, shard_shapes, full_shapes, dtypes):
    """The function that turns this process's shards (a list, in a fixed
    order) into the full parameters; in the backward pass it
    reduce-scatters the full gradients back into averaged shard gradients.

    ``dtypes[i]`` is the dtype parameter ``i`` travels and computes in (the
    compute dtype for floating parameters, else its own). The parameters
    of one dtype share one custom function, so one all_gather and one
    sum_scatter: each shard is flattened into one row, the rows are
    concatenated, and after the all_gather row ``r`` holds process ``r``'s
    shards, i.e. rows ``r*n/N .. (r+1)*n/N`` of each parameter in memory
    order, so a reshape restores it. Separate functions per dtype also
    keep integer parameters (quantized weights, never differentiated) out
    of the gradient's graph: an output of a custom function depends on all
    its inputs, and quantized_matmul has no vjp for its packed weight."""
    N = group.size()
    buckets = {}
    for i, dt in enumerate(dtypes):
        buckets.setdefault(dt, []).append(i)
    sizes = [math.prod(s) for s in shard_shapes]

    def bucket_fn(dt, idx):
        offsets = [sum(sizes[i] for i in idx[:k]) for k in range(1, len(idx))]

        @mx.custom_function
        def gather(shards):
            row = mx.concatenate(
                [s.astype(dt).reshape(1, -1) for s in shards], axis=1
            )
            rows = mx.distributed.all_gather(row, group=group)
            parts = mx.split(rows, offsets, axis=1)
            return [p.reshape(full_shapes[i]) for i, p in zip(idx, parts)]

        @gather.vjp
        def gather_vjp(shards, cotangents, _):
            # Each process holds the cotangent of its own loss for the full
            # parameter; summing them over the group and keeping this
            # process's rows (sum_scatter), then dividing by N, gives the
            # gradient of the group's mean loss for this shard (MLX's
            # choice: the shard of average_gradients' result).
            rows = mx.concatenate(
                [c.astype(dt).reshape(N, -1) for c in cotangents], axis=1
            )
            row = mx.distributed.sum_scatter(rows, group=group) / N
            parts = mx.split(row, offsets, axis=1)
            return [
                p.reshape(shard_shapes[i]).astype(s.dtype)
                for i, p, s in zip(idx, parts, shards)
            ]

        return gather

    fns = [(idx, bucket_fn(dt, idx)) for dt, idx in buckets.items()]

    def gather_all(shards):
        fulls = [None] * len(shards)
        for idx, fn in fns:
            for i, full in zip(idx, fn([shards[i] for i in idx])):
                fulls[i] = full
        return fulls

    return gather_all


def _shardable(module, key, value):
    """The parameters a FullyShardedModule shards: every array of the
    wrapped tree (frozen ones too), except those inside a nested
    FullyShardedModule, which holds and gathers its own shards."""
    if isinstance(value, FullyShardedModule):
        return False
    return Module.valid_parameter_filter(module, key, value)


class FullyShardedModule(Module):
    """Wrap a module so that each process of the group holds only a shard
    of its parameters (fully-sharded data parallelism).

    Every parameter is split along axis 0: process ``r`` of ``N`` keeps
    rows ``r*n/N`` to ``(r+1)*n/N``, so axis 0 must be divisible by ``N``.
    Each call gathers the full parameters (one ``all_gather`` per dtype),
    runs the module, and puts the shards back; in the backward pass the
    gradients are reduce-scattered (``sum_scatter``) and divided by ``N``,
    so each process gets its shard of the group-averaged gradient and an
    optimizer updates only its own shard. The parameter tree is
    ``{"module": <the module's tree of shards>}``.

    Arrays the module reassigns during a call (BatchNorm's running
    statistics) keep their new values: this process's rows of them.
    Parameters of a nested FullyShardedModule stay its own.

    Use :func:`fully_shard` to wrap a module.

    Args:
        module (Module): The module whose parameters are sharded (in
            place).
        group (Group, optional): The group to shard across; the global
            one when omitted. Default ``None``.
        compute_dtype (Dtype, optional): If set, floating parameters are
            gathered and used in this dtype for the forward pass (their
            gradients come back in the shards' dtype). Default ``None``.
    """

    def __init__(self, module, group=None, compute_dtype=None):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(
                "[FullyShardedModule] Expected a Module to wrap, got "
                f"{type(module).__name__}."
            )
        if compute_dtype is not None and not (
            isinstance(compute_dtype, mx.Dtype)
            and mx.issubdtype(compute_dtype, mx.floating)
        ):
            raise ValueError(
                "[FullyShardedModule] compute_dtype must be a floating "
                f"dtype, got {compute_dtype!r}."
            )
        group = _group(group)
        N = group.size()
        flat = tree_flatten(module.filter_and_map(_shardable))
        for path, a in flat:
            if a.ndim == 0:
                raise ValueError(
                    f"[FullyShardedModule] Cannot shard parameter '{path}' "
                    "because it is a scalar."
                )
            if a.shape[0] % N != 0:
                raise ValueError(
                    f"[FullyShardedModule] Cannot shard parameter '{path}' "
                    f"with shape {tuple(a.shape)} across {N} processes: "
                    f"axis 0 must be divisible by {N}."
                )
        full_shapes = [tuple(a.shape) for _, a in flat]
        shard_shapes = [(s[0] // N,) + s[1:] for s in full_shapes]
        dtypes = [
            compute_dtype
            if compute_dtype is not None
            and mx.issubdtype(a.dtype, mx.floating)
            else a.dtype
            for _, a in flat
        ]
        # Plain attributes (lists and dicts would become entries of the
        # Module dict, i.e. part of the parameter tree): the paths fix the
        # order of the gather's inputs.
        object.__setattr__(self, "_paths", [p for p, _ in flat])
        object.__setattr__(self, "_shapes", dict(
            zip(self._paths, zip(shard_shapes, full_shapes))))
        self.group = group
        self.compute_dtype = compute_dtype

        module.update(
            tree_map_with_path(
                lambda path, a: mx.contiguous(_split_axis(a, 0, 1, group)),
                module.filter_and_map(_shardable),
            )
        )
        self.module = module
        self._gather = _make_gather(group, shard_shapes, full_shapes, dtypes)

    def _extra_repr(self):
        # (getattr: a constructor that raised leaves no _paths to print)
        return f"num_sharded_params={len(getattr(self, '_paths', ()))}"

    def _gathered_call(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` with the full parameters in the module;
        the shards are put back afterwards (even when ``fn`` raises)."""
        if not self._paths:
            return fn(*args, **kwargs)
        shard_tree = self.module.filter_and_map(_shardable)
        shards = dict(tree_flatten(shard_tree))
        # A tree changed since wrapping (e.g. full weights loaded into it)
        # would gather garbage or fail in a reshape: say which parameter.
        if list(shards) != self._paths:
            raise ValueError(
                "[FullyShardedModule] The wrapped module's parameters "
                f"changed: expected {self._paths}, found {list(shards)}."
            )
        for p, a in shards.items():
            if tuple(a.shape) != self._shapes[p][0]:
                raise ValueError(
                    f"[FullyShardedModule] Parameter '{p}' has shape "
                    f"{tuple(a.shape)}, expected its shard's shape "
                    f"{self._shapes[p][0]} (full shape {self._shapes[p][1]})."
                )
        fulls = dict(
            zip(self._paths, self._gather([shards[p] for p in self._paths]))
        )
        self.module.update(
            tree_map_with_path(lambda p, _: fulls[p], shard_tree)
        )

        def reshard(path, now):
            # Still the gathered array: put the shard back. Replaced by
            # the call with a full-shaped value (running statistics): keep
            # this process's rows of it, in the shard's dtype. An array
            # the call added is left as it is.
            if path not in fulls:
                return now
            if now is not fulls[path] and (
                tuple(now.shape) == self._shapes[path][1]
            ):
                rows = _split_axis(now, 0, 1, self.group)
                return mx.contiguous(rows.astype(shards[path].dtype))
            return shards[path]

        try:
            return fn(*args, **kwargs)
        finally:
            now = self.module.filter_and_map(_shardable)
            self.module.update(tree_map_with_path(reshard, now))

    def __call__(self, *args, **kwargs):
        return self._gathered_call(self.module, *args, **kwargs)

    def as_linear(self, *args, **kwargs):
        """The wrapped module's ``as_linear`` (e.g. an Embedding used as
        the tied output projection) with the full parameters.

        Args:
            *args: Passed to the wrapped module's ``as_linear``.
            **kwargs: Passed to the wrapped module's ``as_linear``.
        """
        return self._gathered_call(self.module.as_linear, *args, **kwargs)


def fully_shard(module, *, group=None, compute_dtype=None):
    """Wrap ``module`` in a :class:`FullyShardedModule`.

    ``module`` itself is returned when the group has one process, when it
    is already a :class:`FullyShardedModule`, or when it has no parameters
    of its own to shard (e.g. all of them are in nested fully-sharded
    modules).

    Args:
        module (Module): The module to wrap.
        group (Group, optional): The group to shard across; the global one
            when omitted. Default ``None``.
        compute_dtype (Dtype, optional): If set, floating parameters are
            gathered and used in this dtype for the forward pass.
            Default ``None``.

    Returns:
        Module: The wrapped module, or ``module`` unchanged.
    """
    group = _group(group)
    if group.size() == 1 or isinstance(module, FullyShardedModule):
        return module
    wrapped = FullyShardedModule(module, group, compute_dtype)
    return wrapped if wrapped._paths else module
