"""The module classes (torch.nn.modules)."""
from .module import Module  # noqa: F401
from .layers import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
