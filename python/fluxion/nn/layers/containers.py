"""Sequential container."""

from fluxion.nn.layers.base import Module

__all__ = ["Sequential"]


class Sequential(Module):
    """Calls its layers in order, each on the previous one's output.
    Layers may be Modules or plain callables (e.g. ``nn.relu``); only the
    Modules contribute parameters.

    Args:
        *modules (Module or Callable): The layers, applied in order.
    """

    def __init__(self, *modules):
        super().__init__()
        self.layers = list(modules)

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
