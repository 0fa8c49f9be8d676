"""Transformations of functions of a Module: value_and_grad, checkpoint,
gradient averaging and sharded gradient clipping."""

from functools import wraps

import fluxion.core as mx
from fluxion.utils import tree_flatten, tree_map, tree_unflatten

__all__ = [
    "value_and_grad",
    "checkpoint",
    "average_gradients",
    "clip_grad_norm_sharded",
]


def _with_params(model, fn):
    """``fn`` rewritten to take the model's trainable parameters first, so
    that a core transformation can trace them."""

    def inner(params, *args, **kwargs):
        model.update(params)
        return fn(*args, **kwargs)

    return inner


def value_and_grad(model, fn):
    """``fn(*args)``'s value and its gradient with respect to
    ``model.trainable_parameters()`` (a tree of the same structure).

    While ``fn`` runs the model holds the traced parameters; afterwards its
    original parameters are put back (state the function itself writes,
    such as BatchNorm's running statistics, is kept).

    Args:
        model (Module): The model.
        fn (Callable): The function.
    """
    vg = mx.value_and_grad(_with_params(model, fn))

    @wraps(fn)
    def wrapped(*args, **kwargs):
        params = model.trainable_parameters()
        try:
            return vg(params, *args, **kwargs)
        finally:
            model.update(params)

    return wrapped


def checkpoint(module, fn=None):
    """``fn`` (default: the module's ``__call__``) with gradient
    checkpointing: its intermediates are not kept for the backward pass
    but recomputed from the module's parameters and the arguments.

    Args:
        module (Module): The module.
        fn (Callable): The function. Default ``None``.
    """
    if fn is None:
        fn = module.__call__
    cp = mx.checkpoint(_with_params(module, fn))

    @wraps(fn)
    def wrapped(*args, **kwargs):
        params = module.trainable_parameters()
        try:
            return cp(params, *args, **kwargs)
        finally:
            module.update(params)

    return wrapped


def average_gradients(
    gradients,
    group=None,
    all_reduce_size=32 * 1024**2,
    communication_type=None,
    communication_stream=None,
):
    """Average ``gradients`` (a tree of arrays) over the processes of a
    distributed group (default: ``mx.distributed.init()``), as MLX does.

    To send few large messages rather than one per array, arrays of one
    dtype are flattened and concatenated into buckets of at least
    ``all_reduce_size`` bytes, each summed with one ``all_sum``, then split
    back (``all_reduce_size <= 0``, or mixed dtypes: one ``all_sum`` per
    array). ``communication_type`` is the dtype sent (e.g. ``mx.bfloat16``
    to halve the bytes; results come back in each array's dtype);
    ``communication_stream`` the stream the sums run on. Over a group of
    one process the gradients are returned unchanged.

    Args:
        gradients (tree): The gradients.
        group (Group, optional): The process group; the global one when
            omitted. Default ``None``.
        all_reduce_size (int, optional): Bytes per all-reduce batch. Default
            ``33554432``.
        communication_type (Dtype, optional): Type the gradients are reduced
            in. Default ``None``.
        communication_stream (Stream, optional): Where the reductions run.
            Default ``None``.

    Returns:
        tree: The averaged gradients.
    """
    group = group if group is not None else mx.distributed.init()
    n = group.size()
    if n == 1:
        return gradients

    def average(x):
        dtype = x.dtype
        if communication_type is not None:
            x = x.astype(communication_type)
        # Looked up at each call, so that a wrapped all_sum is used.
        total = mx.distributed.all_sum(
            x, group=group, stream=communication_stream
        )
        return total.astype(dtype) / n

    flat = tree_flatten(gradients)
    if all_reduce_size <= 0 or len({v.dtype for _, v in flat}) > 1:
        return tree_map(average, gradients)
    if not flat:
        return gradients
    itemsize = (communication_type or flat[0][1].dtype).size
    buckets, bucket, nbytes = [], [], 0
    for key, value in flat:
        bucket.append((key, value))
        nbytes += value.size * itemsize
        if nbytes >= all_reduce_size:
            buckets.append(bucket)
            bucket, nbytes = [], 0
    if bucket:
        buckets.append(bucket)
    averaged = []
    for bucket in buckets:
        total = average(mx.concatenate([v.reshape(-1) for _, v in bucket]))
        offsets, at = [], 0
        for _, v in bucket[:-1]:
            at += v.size
            offsets.append(at)
        parts = mx.split(total, offsets) if offsets else [total]
        averaged.extend(
            (key, part.reshape(v.shape)) for (key, v), part in zip(bucket, parts)
        )
    return tree_unflatten(averaged)


def clip_grad_norm_sharded(gradients, max_norm, group=None):
    """Clip the global L2 norm of gradients sharded across a group (MLX's
    sharded ``clip_grad_norm``).

    Each process holds only its shard of the gradients, so the squared norms
    of the local shards are summed over the group (one ``all_sum``) before
    the common scale ``min(max_norm / (norm + 1e-6), 1)`` is applied to the
    local shard. Over a group of one process it is ``clip_grad_norm``.

    Args:
        gradients (tree): This process's shard of the gradients.
        max_norm (float): The largest global norm allowed.
        group (Group, optional): The group the gradients are sharded over;
            the global group when ``None``. Default ``None``.

    Returns:
        tuple: ``(clipped_gradients, global_norm)``, the norm before
        clipping.
    """
    if max_norm < 0:
        raise ValueError(
            "[clip_grad_norm_sharded] max_norm must be non-negative, got "
            f"{max_norm}"
        )
    group = group if group is not None else mx.distributed.init()
    norm_squared = mx.array(0.0)
    for _, g in tree_flatten(gradients):
        norm_squared = norm_squared + mx.sum(mx.square(g))
    if group.size() > 1:
        norm_squared = mx.distributed.all_sum(norm_squared, group=group)
    total_norm = mx.sqrt(norm_squared)
    normalizer = mx.minimum(max_norm / (total_norm + 1e-6), 1.0)
    return tree_map(lambda g: g * normalizer, gradients), total_norm
