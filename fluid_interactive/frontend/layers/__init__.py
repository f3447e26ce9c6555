"""`fluid.layers`: functions that append ops to the method being traced.

Each module lists its public layers in ``__all__``; this package re-exports exactly those.
"""
from . import (
    activations,
    compare,
    control_flow,
    conv,
    io,
    loss,
    lr,
    math,
    metric,
    nn,
    norm,
    rnn,
    tensor,
    tensor_array,
)
from .activations import *  # noqa: F403
from .compare import *  # noqa: F403
from .control_flow import *  # noqa: F403
from .conv import *  # noqa: F403
from .io import *  # noqa: F403
from .loss import *  # noqa: F403
from .lr import *  # noqa: F403
from .math import *  # noqa: F403
from .metric import *  # noqa: F403
from .nn import *  # noqa: F403
from .norm import *  # noqa: F403
from .rnn import *  # noqa: F403
from .tensor import *  # noqa: F403
from .tensor_array import *  # noqa: F403

__all__ = sorted({name for module in (activations, compare, control_flow, conv, io, loss, lr,
                                math, metric, nn, norm, rnn, tensor, tensor_array)
                  for name in module.__all__})
