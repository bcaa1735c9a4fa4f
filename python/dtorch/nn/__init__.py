"""dtorch.nn: torch.nn's modules, parameters, initialisers, losses and
functional ops on dtorch tensors (and DTensors: a module whose parameters
are DTensors runs through the same ops, which propagate placements)."""
from . import functional, init, utils  # noqa: F401
from .parameter import Parameter, Buffer  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import Module  # noqa: F401
