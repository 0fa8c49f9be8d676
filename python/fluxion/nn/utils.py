"""Transformations of functions of a Module: value_and_grad, checkpoint,
and gradient averaging."""

from functools import wraps

import fluxion.core as mx

__all__ = ["value_and_grad", "checkpoint", "average_gradients"]


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


def _world_size(group):
    dist = getattr(mx, "distributed", None)
    if group is not None:
        return group.size()
    if dist is None or not hasattr(dist, "init"):
        return 1
    try:
        return dist.init().size()
    except Exception:  # no backend available: a single process
        return 1


def average_gradients(
    gradients,
    group=None,
    all_reduce_size=32 * 1024**2,
    communication_type=None,
    communication_stream=None,
):
    """Average ``gradients`` over the processes of a distributed group.

    Fluxion runs a single process (there is no distributed backend yet),
    where the average is the gradients themselves, returned unchanged (as
    MLX does for a group of size 1).

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
    """
    if _world_size(group) == 1:
        return gradients
    raise NotImplementedError(
        "[average_gradients] Fluxion has no distributed backend: only a "
        "single "
        "process is supported"
    )
