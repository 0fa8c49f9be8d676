"""Optimizers and learning-rate schedules with MLX's API:
``import fluxion.optimizers as optim`` runs code written for
``mlx.optimizers``."""

from fluxion.optimizers import optimizers, schedulers
from fluxion.optimizers.optimizers import *  # noqa: F401,F403
from fluxion.optimizers.schedulers import *  # noqa: F401,F403
