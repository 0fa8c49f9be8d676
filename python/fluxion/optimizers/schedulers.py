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
    """``init * decay_rate ** step``."""

    def schedule(step):
        return init * decay_rate**step

    return schedule


def step_decay(init, decay_rate, step_size):
    """``init * decay_rate ** (step // step_size)``: the rate drops by
    ``decay_rate`` every ``step_size`` steps."""

    def schedule(step):
        return init * (decay_rate ** (step // step_size))

    return schedule


def cosine_decay(init, decay_steps, end=0.0):
    """Half a cosine from ``init`` at step 0 to ``end`` at
    ``decay_steps``, then ``end``."""

    def schedule(step):
        s = mx.minimum(step, decay_steps)
        decay = 0.5 * (1.0 + mx.cos((math.pi / decay_steps) * s))
        return end + decay * (init - end)

    return schedule


def linear_schedule(init, end, steps):
    """Linear from ``init`` at step 0 to ``end`` at ``steps``, then
    ``end``."""
    if steps < 1:
        raise ValueError(
            f"[linear_schedule] steps must be at least 1, got {steps}"
        )

    def schedule(step):
        step = mx.minimum(step, steps)
        return step * ((end - init) / steps) + init

    return schedule


def join_schedules(schedules, boundaries):
    """Schedule ``schedules[i]`` from ``boundaries[i - 1]`` on (each
    started at its own step 0); ``len(boundaries) == len(schedules) - 1``.
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
