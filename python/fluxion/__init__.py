"""Fluxion: lazy arrays and composable transformations with MLX's API.

``import fluxion.core as mx`` gives the array type and the ops.
"""

__version__ = "0.1.0"
