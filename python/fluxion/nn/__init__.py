"""Neural-network layers, losses and initializers with MLX's API:
``import fluxion.nn as nn`` runs code written for ``mlx.nn``."""

from fluxion.nn import init, losses
from fluxion.nn.layers import *  # noqa: F401,F403
from fluxion.nn.layers import activations
from fluxion.nn.utils import average_gradients, checkpoint, value_and_grad
