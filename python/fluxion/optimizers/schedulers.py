"""Learning-rate schedules: functions of the step count (an array or a
Python int) returning the learning rate, usable as an optimizer's
``learning_rate``."""

import math

import fluxion.core as mx

__all__ = [
    "exponential_decay",
    "step_decay",
    "cosine_decay",
    "join_schedules",
    "linear_schedule",
]


def exponential_decay(init, decay_rate):
    """Exponential decay: ``init * decay_rate ** step``.

    Args:
        init (float): The rate at step 0.
        decay_rate (float): The factor per step.

    Returns:
        Callable: ``schedule(step)``, usable as an optimizer's
        ``learning_rate``.

    Example:
        >>> lr = exponential_decay(0.1, 0.9)
        >>> opt = optim.SGD(learning_rate=lr)
    """

    def schedule(step):
        return init * decay_rate**step

    return schedule


def step_decay(init, decay_rate, step_size):
    """Step decay: ``init * decay_rate ** (step // step_size)``.

    The rate drops by ``decay_rate`` every ``step_size`` steps.

    Args:
        init (float): The rate at step 0.
        decay_rate (float): The factor per drop.
        step_size (int): Steps between drops.

    Returns:
        Callable: ``schedule(step)``, usable as an optimizer's
        ``learning_rate``.
    """

    def schedule(step):
        return init * (decay_rate ** (step // step_size))

    return schedule


def cosine_decay(init, decay_steps, end=0.0):
    """Cosine decay: half a cosine from ``init`` at step 0 to ``end``.

    Args:
        init (float): The rate at step 0.
        decay_steps (int): The step at which ``end`` is reached (and kept).
        end (float, optional): The final rate. Default 0.

    Returns:
        Callable: ``schedule(step)``, usable as an optimizer's
        ``learning_rate``.
    """

    def schedule(step):
        s = mx.minimum(step, decay_steps)
        decay = 0.5 * (1.0 + mx.cos((math.pi / decay_steps) * s))
        return end + decay * (init - end)

    return schedule


def linear_schedule(init, end, steps):
    """Linear schedule from ``init`` at step 0 to ``end`` at ``steps``, then ``end``.

    Args:
        init (float): The rate at step 0.
        end (float): The final rate.
        steps (int): The step at which ``end`` is reached (at least 1).

    Returns:
        Callable: ``schedule(step)``, usable as an optimizer's
        ``learning_rate``.

    Example:
        >>> warmup = linear_schedule(0.0, 1e-3, 100)
    """
    if steps < 1:
        raise ValueError(
            f"[linear_schedule] steps must be at least 1, got {steps}"
        )

    def schedule(step):
        step = mx.minimum(step, steps)
        return step * ((end - init) / steps) + init

    return schedule


def join_schedules(schedules, boundaries):
    """Join schedules one after another at given steps.

    Schedule ``schedules[i]`` runs from ``boundaries[i - 1]`` on, started at
    its own step 0.

    Args:
        schedules (list(Callable)): The schedules.
        boundaries (list(int)): The steps where each next one starts;
            ``len(schedules) - 1`` of them.

    Returns:
        Callable: ``schedule(step)``.

    Example:
        >>> warmup = linear_schedule(0.0, 1e-3, 100)
        >>> lr = join_schedules([warmup, cosine_decay(1e-3, 1000)], [100])
    """
    if len(schedules) == 0:
        raise ValueError("[join_schedules] Must provide at least 1 schedule.")
    if len(schedules) != len(boundaries) + 1:
        raise ValueError(
            "[join_schedules] Received %d boundaries but expected %d."
            % (len(boundaries), len(schedules) - 1)
        )

    def schedule(step):
        output = schedules[0](step)
        for boundary, s in zip(boundaries, schedules[1:]):
            output = mx.where(step < boundary, output, s(step - boundary))
        return output

    return schedule
