"""`fluid.layers`: functions that append ops to the method being traced.

Each module lists its public layers in ``__all__``; this package re-exports exactly those.
"""
import difflib as _difflib

from . import (
    activations,
    compare,
    control_flow,
    conv,
    dynamic_rnn,
    io,
    loss,
    lr,
    math,
    metric,
    nn,
    norm,
    normalization,
    pool,
    recurrent,
    resize,
    rnn,
    roi,
    sequence,
    tensor,
    tensor_array,
    vision,
)
from .activations import *  # noqa: F403
from .compare import *  # noqa: F403
from .control_flow import *  # noqa: F403
from .conv import *  # noqa: F403
from .dynamic_rnn import *  # noqa: F403
from .io import *  # noqa: F403
from .loss import *  # noqa: F403
from .lr import *  # noqa: F403
from .math import *  # noqa: F403
from .metric import *  # noqa: F403
from .nn import *  # noqa: F403
from .norm import *  # noqa: F403
from .normalization import *  # noqa: F403
from .pool import *  # noqa: F403
from .recurrent import *  # noqa: F403
from .resize import *  # noqa: F403
from .rnn import *  # noqa: F403
from .roi import *  # noqa: F403
from .sequence import *  # noqa: F403
from .tensor import *  # noqa: F403
from .tensor_array import *  # noqa: F403
from .vision import *  # noqa: F403

__all__ = sorted({name for module in (activations, compare, control_flow, conv, dynamic_rnn, io,
                                loss, lr, math, metric, nn, norm, normalization, pool,
                                recurrent, resize, rnn, roi, sequence, tensor,
                                tensor_array, vision)
                  for name in module.__all__})


def __getattr__(name: str) -> object:
    """An unknown layer name: an `AttributeError` that suggests the closest layers."""
    if name.startswith("__"):
        raise AttributeError(name)
    close = _difflib.get_close_matches(name, __all__, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(f'fluid.layers.{c}' for c in close)}?" if close \
        else "; dir(fluid.layers) lists them"
    raise AttributeError(f"fluid.layers has no layer {name!r}{hint}", name=name)
