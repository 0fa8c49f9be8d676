"""Loss functions (MLX's ``nn.losses``).

Each takes a ``reduction``: "none" (the per-element or per-sample losses),
"mean" or "sum". Defaults follow MLX.
"""

import math

import fluxion.core as mx

__all__ = [
    "cross_entropy",
    "binary_cross_entropy",
    "l1_loss",
    "mse_loss",
    "nll_loss",
    "gaussian_nll_loss",
    "kl_div_loss",
    "smooth_l1_loss",
    "triplet_loss",
    "hinge_loss",
    "huber_loss",
    "log_cosh_loss",
    "cosine_similarity_loss",
    "margin_ranking_loss",
]


def _reduce(loss, reduction):
    if reduction == "mean":
        return mx.mean(loss)
    if reduction == "sum":
        return mx.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(
        f"Invalid reduction {reduction!r}. Must be 'none', 'mean', or 'sum'."
    )


def _check_same_shape(name, a, b, what=("predictions", "targets")):
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(
            f"[{name}] The shape of {what[0]} {tuple(a.shape)} does not match "
            f"the shape of {what[1]} {tuple(b.shape)}."
        )


def _apply_weights(name, loss, weights):
    if weights is None:
        return loss
    if tuple(weights.shape) != tuple(loss.shape):
        raise ValueError(
            f"[{name}] Weights with shape {tuple(weights.shape)} do not match "
            f"the loss shape {tuple(loss.shape)}."
        )
    return loss * weights


def cross_entropy(
    logits,
    targets,
    weights=None,
    axis=-1,
    label_smoothing=0.0,
    reduction="none",
):
    """Cross entropy between ``logits`` and ``targets``: class indices
    (one dimension fewer than the logits) or class probabilities (the
    logits' shape).

    ``label_smoothing`` in [0, 1) mixes the target distribution with the
    uniform one. The logits are shifted by their maximum first (the loss
    does not depend on a shared offset), so large logits lose no
    precision.

    Args:
        logits (array): Unnormalized scores, classes along ``axis``.
        targets (array): The targets.
        weights (array, optional): Per-element weights of the loss. Default
            ``None``.
        axis (int, optional): The class (or feature) axis. Default ``-1``.
        label_smoothing (float, optional): Smoothing in ``[0, 1)``. Default
            ``0.0``.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'none'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.

    Example:
        >>> loss = nn.losses.cross_entropy(logits, labels, reduction="mean")
    """
    if not 0 <= label_smoothing < 1:
        raise ValueError(
            "[cross_entropy] Label smoothing must be in [0, 1), got "
            f"{label_smoothing}."
        )
    logits = mx.array(logits) if not isinstance(logits, mx.array) else logits
    targets = (
        mx.array(targets) if not isinstance(targets, mx.array) else targets
    )
    axis = axis % logits.ndim
    as_probs = targets.ndim == logits.ndim
    reduced_shape = tuple(s for i, s in enumerate(logits.shape) if i != axis)
    if (as_probs and tuple(targets.shape) != tuple(logits.shape)) or (
        not as_probs and tuple(targets.shape) != reduced_shape
    ):
        raise ValueError(
            f"[cross_entropy] Targets shape {tuple(targets.shape)} does not "
            "match "
            f"logits shape {tuple(logits.shape)}."
        )

    shift = mx.stop_gradient(mx.max(logits, axis=axis, keepdims=True))
    z = logits - shift
    if as_probs:
        score = mx.sum(z * targets, axis=axis)
        # sum(x t) = sum(z t) + shift * sum(t): the shift cancels against
        # logsumexp only for targets that sum to one.
        correction = mx.squeeze(shift, axis) * (1 - mx.sum(targets, axis=axis))
    else:
        score = mx.take_along_axis(
            z, mx.expand_dims(targets, axis), axis
        ).squeeze(axis)
        correction = None
    lse = mx.logsumexp(z, axis=axis)
    if label_smoothing > 0:
        loss = (
            lse
            - (1 - label_smoothing) * score
            - label_smoothing * mx.mean(z, axis=axis)
        )
    else:
        loss = lse - score
    if correction is not None:
        if label_smoothing > 0:
            correction = (1 - label_smoothing) * correction
        loss = loss + correction
    loss = _apply_weights("cross_entropy", loss, weights)
    return _reduce(loss, reduction)


def binary_cross_entropy(
    inputs, targets, weights=None, with_logits=True, reduction="mean"
):
    """Binary cross entropy of logits (default) or probabilities
    (``with_logits=False``; the logs are clipped at -100, as PyTorch, so a
    probability of exactly 0 or 1 gives a finite loss).

    Args:
        inputs (array): The predictions.
        targets (array): The targets.
        weights (array, optional): Per-element weights of the loss. Default
            ``None``.
        with_logits (bool, optional): ``inputs`` are logits (else
            probabilities). Default ``True``.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'mean'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.
    """
    if with_logits:
        loss = mx.logaddexp(0.0, inputs) - inputs * targets
    else:
        log_p = mx.clip(mx.log(inputs), -100, None)
        log_1mp = mx.clip(mx.log(1 - inputs), -100, None)
        loss = -(targets * log_p + (1 - targets) * log_1mp)
    loss = _apply_weights("binary_cross_entropy", loss, weights)
    return _reduce(loss, reduction)


def l1_loss(predictions, targets, reduction="mean"):
    """Mean absolute error.

    Args:
        predictions (array): The predictions.
        targets (array): The targets.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'mean'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.
    """
    _check_same_shape("l1_loss", predictions, targets)
    return _reduce(mx.abs(predictions - targets), reduction)


def mse_loss(predictions, targets, reduction="mean"):
    """Mean squared error.

    Args:
        predictions (array): The predictions.
        targets (array): The targets.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'mean'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.
    """
    _check_same_shape("mse_loss", predictions, targets)
    return _reduce(mx.square(predictions - targets), reduction)


def nll_loss(inputs, targets, axis=-1, reduction="none"):
    """Negative log likelihood of the target classes, given
    log-probabilities ``inputs`` (classes along ``axis``).

    Args:
        inputs (array): The predictions.
        targets (array): The targets.
        axis (int, optional): The class (or feature) axis. Default ``-1``.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'none'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.
    """
    picked = mx.take_along_axis(inputs, mx.expand_dims(targets, axis), axis)
    return _reduce(-mx.squeeze(picked, axis), reduction)


def gaussian_nll_loss(
    inputs, targets, vars, full=False, eps=1e-6, reduction="mean"
):
    r"""Negative Gaussian log likelihood of ``targets`` under means
    ``inputs`` and variances ``vars`` (clipped below at ``eps``):
    :math:`\frac12(\log v + (t - \mu)^2 / v)`, plus
    :math:`\frac12\log 2\pi` with ``full``.

    Args:
        inputs (array): The predictions.
        targets (array): The targets.
        vars (array): The variances.
        full (bool, optional): Add the constant term. Default ``False``.
        eps (float, optional): Lower bound for stability. Default ``1e-06``.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'mean'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.
    """
    _check_same_shape(
        "gaussian_nll_loss", inputs, targets, ("inputs", "targets")
    )
    _check_same_shape("gaussian_nll_loss", inputs, vars, ("inputs", "vars"))
    vars = mx.maximum(vars, eps)
    loss = 0.5 * (mx.log(vars) + mx.square(targets - inputs) / vars)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def kl_div_loss(inputs, targets, axis=-1, reduction="none"):
    r"""Kullback-Leibler divergence :math:`\sum e^{t} (t - x)` of the
    target distribution from the input one, both given as log
    probabilities.

    Args:
        inputs (array): The predictions.
        targets (array): The targets.
        axis (int, optional): The class (or feature) axis. Default ``-1``.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'none'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.
    """
    loss = mx.sum(mx.exp(targets) * (targets - inputs), axis=axis)
    return _reduce(loss, reduction)


def smooth_l1_loss(predictions, targets, beta=1.0, reduction="mean"):
    r"""Smooth L1: :math:`0.5 d^2 / \beta` for :math:`|d| < \beta`, else
    :math:`|d| - 0.5 \beta`.

    Args:
        predictions (array): The predictions.
        targets (array): The targets.
        beta (float, optional): Where the loss turns from quadratic to linear.
            Default ``1.0``.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'mean'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.
    """
    _check_same_shape("smooth_l1_loss", predictions, targets)
    diff = mx.abs(predictions - targets)
    loss = mx.where(
        diff < beta, 0.5 * mx.square(diff) / beta, diff - 0.5 * beta
    )
    return _reduce(loss, reduction)


def _p_distance(a, b, p, axis, eps):
    """The p-norm distance along ``axis``, with ``eps`` inside the root so
    that the gradient is finite at zero distance."""
    d = mx.sum(mx.power(mx.abs(a - b), p), axis=axis)
    return mx.power(d + eps, 1.0 / p)


def triplet_loss(
    anchors,
    positives,
    negatives,
    axis=-1,
    p=2,
    margin=1.0,
    eps=1e-6,
    reduction="none",
):
    r"""Triplet margin loss of anchors, positives and negatives.

    :math:`\max(\|a - p\|_p - \|a - n\|_p + \text{margin}, 0)`.

    Args:
        anchors (array): The anchors.
        positives (array): Samples of the anchors' class.
        negatives (array): Samples of other classes.
        axis (int, optional): The class (or feature) axis. Default ``-1``.
        p (int, optional): The norm's degree. Default ``2``.
        margin (float, optional): The margin. Default ``1.0``.
        eps (float, optional): Lower bound for stability. Default ``1e-06``.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'none'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.
    """
    loss = mx.maximum(
        _p_distance(anchors, positives, p, axis, eps)
        - _p_distance(anchors, negatives, p, axis, eps)
        + margin,
        0,
    )
    return _reduce(loss, reduction)


def hinge_loss(inputs, targets, reduction="none"):
    r"""Hinge loss for targets in {-1, 1}.

    :math:`\max(1 - y x, 0)` for targets :math:`y \in \{-1, 1\}`.

    Args:
        inputs (array): The predictions.
        targets (array): The targets.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'none'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.
    """
    return _reduce(mx.maximum(1 - inputs * targets, 0), reduction)


def huber_loss(inputs, targets, delta=1.0, reduction="none"):
    """Huber loss: quadratic (:math:`d^2 / 2`) below ``delta``, linear
    above.

    Args:
        inputs (array): The predictions.
        targets (array): The targets.
        delta (float, optional): Where the loss turns from quadratic to
            linear. Default ``1.0``.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'none'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.
    """
    abs_err = mx.abs(inputs - targets)
    quadratic = mx.minimum(abs_err, delta)
    linear = abs_err - quadratic
    return _reduce(0.5 * mx.square(quadratic) + delta * linear, reduction)


def log_cosh_loss(inputs, targets, reduction="none"):
    r"""Log-cosh loss of the difference.

    :math:`\log\cosh(x - y)`, computed as
    :math:`\operatorname{logaddexp}(d, -d) - \log 2` so it never
    overflows.

    Args:
        inputs (array): The predictions.
        targets (array): The targets.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'none'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.
    """
    d = inputs - targets
    return _reduce(mx.logaddexp(d, -d) - math.log(2), reduction)


def cosine_similarity_loss(x1, x2, axis=1, eps=1e-8, reduction="none"):
    r"""Cosine similarity :math:`x_1 \cdot x_2 / \max(\|x_1\| \|x_2\|,
    \epsilon)` along ``axis``.

    Args:
        x1 (array): The first inputs.
        x2 (array): The second inputs.
        axis (int, optional): The class (or feature) axis. Default ``1``.
        eps (float, optional): Lower bound for stability. Default ``1e-08``.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'none'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.
    """
    n1 = mx.sqrt(mx.sum(mx.square(x1), axis=axis))
    n2 = mx.sqrt(mx.sum(mx.square(x2), axis=axis))
    loss = mx.sum(x1 * x2, axis=axis) / mx.maximum(n1 * n2, eps)
    return _reduce(loss, reduction)


def margin_ranking_loss(
    inputs1, inputs2, targets, margin=0.0, reduction="none"
):
    r"""Margin ranking loss of two score arrays.

    :math:`\max(-y (x_1 - x_2) + \text{margin}, 0)` for targets
    :math:`y \in \{-1, 1\}` (1: ``inputs1`` should rank higher).

    Args:
        inputs1 (array): The first scores.
        inputs2 (array): The second scores.
        targets (array): The targets.
        margin (float, optional): The margin. Default ``0.0``.
        reduction (str, optional): ``"none"``, ``"mean"`` or ``"sum"``.
            Default ``'none'``.

    Returns:
        array: The loss, reduced as ``reduction`` says.
    """
    _check_same_shape(
        "margin_ranking_loss", inputs1, inputs2, ("inputs1", "inputs2")
    )
    _check_same_shape(
        "margin_ranking_loss", inputs1, targets, ("inputs1", "targets")
    )
    loss = mx.maximum(-targets * (inputs1 - inputs2) + margin, 0)
    return _reduce(loss, reduction)
